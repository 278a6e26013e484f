/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Delivery-latency histogram and the one-line stats record that the bench
 * contenders living inside a traced process (the LD_PRELOAD interposers, the
 * CUPTI subscriber) hand to cp_compare (bench/contender_interposers.c
 * reads the line). Header-only, libc only, so the interposers stay free of
 * any cuprobe library.
 *
 * The histogram is log-linear: exact below 64 ns, then 32 buckets per power
 * of two (under 3.2% relative error), up to 2^46 ns.
 *
 * The stats line, appended with one write(2) to the file named by
 * $CP_BENCH_STATS:
 *
 *   cp_bench_stats design=NAME pid=P produced=N delivered=N lost=N cpu_ns=N
 *                  alive_ns=N max_ns=N hist=INDEX:COUNT,INDEX:COUNT,...
 *
 * produced: records the traced calls tried to write; lost: refused because
 * the ring was full; delivered: handed to the consumer. produced - lost -
 * delivered records were still in the ring when the process ended.
 * cpu_ns: the consumer thread's CPU time; alive_ns: how long it existed.
 */
#ifndef CP_BENCH_STATS_H
#define CP_BENCH_STATS_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CP_BENCH_HIST_SUB_BITS 5
#define CP_BENCH_HIST_SUB      (1u << CP_BENCH_HIST_SUB_BITS)
#define CP_BENCH_HIST_LINEAR   64u
#define CP_BENCH_HIST_TOP_BIT  46
#define CP_BENCH_HIST_BUCKETS  (CP_BENCH_HIST_LINEAR + (CP_BENCH_HIST_TOP_BIT - 6 + 1) * CP_BENCH_HIST_SUB)

struct cp_bench_hist {
	uint64_t count[CP_BENCH_HIST_BUCKETS];
	uint64_t total;
	uint64_t max;
};

static inline uint64_t cp_bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline unsigned int cp_bench_hist_index(uint64_t value)
{
	unsigned int msb, index;

	if (value < CP_BENCH_HIST_LINEAR)
		return (unsigned int)value;
	msb = 63u - (unsigned int)__builtin_clzll(value);
	if (msb > CP_BENCH_HIST_TOP_BIT)
		return CP_BENCH_HIST_BUCKETS - 1;
	index = CP_BENCH_HIST_LINEAR + (msb - 6) * CP_BENCH_HIST_SUB +
		(unsigned int)((value >> (msb - CP_BENCH_HIST_SUB_BITS)) & (CP_BENCH_HIST_SUB - 1));
	return index;
}

/* The middle of a bucket's range. */
static inline uint64_t cp_bench_hist_value(unsigned int index)
{
	unsigned int msb, sub, shift;

	if (index < CP_BENCH_HIST_LINEAR)
		return index;
	msb = (index - CP_BENCH_HIST_LINEAR) / CP_BENCH_HIST_SUB + 6;
	sub = (index - CP_BENCH_HIST_LINEAR) % CP_BENCH_HIST_SUB;
	shift = msb - CP_BENCH_HIST_SUB_BITS;
	return ((uint64_t)(CP_BENCH_HIST_SUB + sub) << shift) + ((1ull << shift) >> 1);
}

static inline void cp_bench_hist_add(struct cp_bench_hist *hist, uint64_t value)
{
	hist->count[cp_bench_hist_index(value)]++;
	hist->total++;
	if (value > hist->max)
		hist->max = value;
}

static inline void cp_bench_hist_merge(struct cp_bench_hist *into, const struct cp_bench_hist *from)
{
	unsigned int i;

	for (i = 0; i < CP_BENCH_HIST_BUCKETS; i++)
		into->count[i] += from->count[i];
	into->total += from->total;
	if (from->max > into->max)
		into->max = from->max;
}

/* The value below which a fraction p of the samples lie; the exact max for p = 1. */
static inline uint64_t cp_bench_hist_percentile(const struct cp_bench_hist *hist, double p)
{
	uint64_t rank, seen = 0;
	unsigned int i;

	if (!hist->total)
		return 0;
	if (p >= 1.0)
		return hist->max;
	rank = (uint64_t)(p * (double)hist->total);
	if (rank >= hist->total)
		rank = hist->total - 1;
	for (i = 0; i < CP_BENCH_HIST_BUCKETS; i++) {
		seen += hist->count[i];
		if (seen > rank) {
			uint64_t value = cp_bench_hist_value(i);

			return value < hist->max ? value : hist->max;
		}
	}
	return hist->max;
}

struct cp_bench_report {
	const char *design;
	uint64_t produced, delivered, lost;
	uint64_t cpu_ns, alive_ns;
	const struct cp_bench_hist *hist;
};

/*
 * Appends the stats line to path with one write(2): safe to call from a
 * library destructor (no stdio, no allocation). Returns 0 or -1.
 */
static inline int cp_bench_report__write(const char *path, const struct cp_bench_report *report)
{
	static char line[CP_BENCH_HIST_BUCKETS * 24 + 512];
	size_t used;
	unsigned int i;
	ssize_t written;
	int fd, n;

	if (!path || !*path)
		return 0;
	n = snprintf(line, sizeof(line),
		     "cp_bench_stats design=%s pid=%d produced=%llu delivered=%llu lost=%llu "
		     "cpu_ns=%llu alive_ns=%llu max_ns=%llu hist=",
		     report->design, (int)getpid(), (unsigned long long)report->produced,
		     (unsigned long long)report->delivered, (unsigned long long)report->lost,
		     (unsigned long long)report->cpu_ns, (unsigned long long)report->alive_ns,
		     (unsigned long long)report->hist->max);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -1;
	used = (size_t)n;
	for (i = 0; i < CP_BENCH_HIST_BUCKETS; i++) {
		if (!report->hist->count[i])
			continue;
		n = snprintf(line + used, sizeof(line) - used, "%s%u:%llu", line[used - 1] == '=' ? "" : ",",
			     i, (unsigned long long)report->hist->count[i]);
		if (n < 0 || (size_t)n >= sizeof(line) - used)
			return -1;
		used += (size_t)n;
	}
	line[used++] = '\n';
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	written = write(fd, line, used);
	close(fd);
	return written == (ssize_t)used ? 0 : -1;
}

#endif /* CP_BENCH_STATS_H */
