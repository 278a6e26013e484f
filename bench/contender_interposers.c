// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The in-process contenders of cp_compare, the libraries of interposers/
 * loaded into the workload: the LD_PRELOAD interposers (preload-poll1ms,
 * preload-busy, preload-eventfd: LD_PRELOAD) and the CUPTI subscriber (cupti:
 * CUDA_INJECTION64_PATH, real driver only). Their consumer is a thread of the
 * workload: what it did comes back as the stats line each library appends at
 * exit to $CP_BENCH_STATS (cp_bench_stats.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare.h"

struct stats_line {
	bool found;
	uint64_t produced, delivered, lost, cpu_ns, alive_ns;
	struct cp_bench_hist hist;
};

/* Where the workload appends its stats line: one file for every run of this process. */
static void stats_path(const struct options *opt, char *path, size_t len)
{
	snprintf(path, len, "%s/.cp_compare_stats.%d", opt->out_dir, (int)getpid());
}

static uint64_t field_u64(const char *line, const char *name)
{
	const char *at = strstr(line, name);

	return at ? strtoull(at + strlen(name), NULL, 10) : 0;
}

/* Reads the stats line of pid (cp_bench_stats.h), then removes the file and pid's segments. */
static void read_stats(const struct options *opt, pid_t pid, struct stats_line *out)
{
	static char line[CP_BENCH_HIST_BUCKETS * 24 + 512];
	char path[PATH_MAX + 32], pid_field[32];
	FILE *file;

	stats_path(opt, path, sizeof(path));
	file = fopen(path, "r");
	memset(out, 0, sizeof(*out));
	if (file) {
		snprintf(pid_field, sizeof(pid_field), " pid=%d ", (int)pid);
		while (fgets(line, sizeof(line), file)) {
			const char *hist;

			if (strncmp(line, "cp_bench_stats ", 15) || !strstr(line, pid_field))
				continue;
			out->found = true;
			out->produced = field_u64(line, " produced=");
			out->delivered = field_u64(line, " delivered=");
			out->lost = field_u64(line, " lost=");
			out->cpu_ns = field_u64(line, " cpu_ns=");
			out->alive_ns = field_u64(line, " alive_ns=");
			out->hist.max = field_u64(line, " max_ns=");
			hist = strstr(line, " hist=");
			if (hist) {
				const char *p = hist + 6;

				while (*p && *p != '\n') {
					char *end;
					unsigned long index = strtoul(p, &end, 10);
					unsigned long long count;

					if (*end != ':')
						break;
					count = strtoull(end + 1, &end, 10);
					if (index < CP_BENCH_HIST_BUCKETS) {
						out->hist.count[index] += count;
						out->hist.total += count;
					}
					p = *end == ',' ? end + 1 : end;
				}
			}
		}
		fclose(file);
		unlink(path);
	}
	/* A process that died leaves its shared-memory segment behind. */
	snprintf(path, sizeof(path), "/dev/shm/cp_preload.%d", (int)pid);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/cp_cupti.%d", (int)pid);
	unlink(path);
}

static void interposer_prepare(struct contender *c, const struct options *opt)
{
	format_into(c->so_path, sizeof(c->so_path), "%s/%s", opt->lib_dir, c->so_name);
	if (!file_exists(c->so_path, R_OK)) {
		char why[200];

		snprintf(why, sizeof(why), "%s not built (no CUPTI headers/library?)", c->so_name);
		note_skip(c, why);
	}
	if (opt->sim && !strcmp(c->so_variable, CUPTI_INJECTION_VARIABLE))
		note_skip(c, "needs the real driver: the simulated one has no CUPTI");
}

/* The library through its variable, and where its stats go (emptied first). */
static void interposer_env(struct contender *c, const struct options *opt, struct workload_env *env)
{
	char path[PATH_MAX + 32];

	stats_path(opt, path, sizeof(path));
	unlink(path);
	snprintf(env->room[0], sizeof(env->room[0]), "%s=%s", c->so_variable, c->so_path);
	snprintf(env->room[1], sizeof(env->room[1]), "CP_BENCH_STATS=%s", path);
	env->vars[0] = env->room[0];
	env->vars[1] = env->room[1];
	env->vars[2] = NULL;
}

static void interposer_after_measured(struct contender *c, const struct options *opt,
				      const struct child *child, uint64_t cpu_before)
{
	struct stats_line stats;

	read_stats(opt, child->pid, &stats);
	if (!stats.found)
		return;
	contender_count(c, stats.produced, stats.delivered, stats.lost, stats.cpu_ns);
	cp_bench_hist_merge(c->hist, &stats.hist);
}

/* The consumer thread's CPU over its life. */
static void interposer_after_idle(struct contender *c, const struct options *opt, const struct child *child)
{
	struct stats_line stats;

	read_stats(opt, child->pid, &stats);
	if (stats.found && stats.alive_ns) {
		c->idle_cpu_ms_per_s = cpu_ms_per_s(stats.cpu_ns, stats.alive_ns);
		c->idle_done = true;
	}
}

static void interposer_after_exit_run(struct contender *c, const struct options *opt, int run,
				      const struct child *child)
{
	struct stats_line stats;

	read_stats(opt, child->pid, &stats);
	/* No stats line: nothing of the run was delivered. */
	if (stats.found)
		contender_exit_shortfall(c, stats.produced, stats.delivered);
	else
		contender_exit_shortfall(c, (uint64_t)opt->exit_calls, 0);
}

const struct contender_ops contender_interposer_ops = {
	.prepare = interposer_prepare,
	.workload_env = interposer_env,
	.after_measured = interposer_after_measured,
	.after_idle = interposer_after_idle,
	.after_exit_run = interposer_after_exit_run,
};
