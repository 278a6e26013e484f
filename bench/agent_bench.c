// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * agent_bench: numbers for the GPU agent's lifecycle and wakeup policy,
 * measured side by side in one run (never asserted in tests).
 *
 *  1. Stop latency with a full ring: fill a ring of --ring-size (default
 *     64 MiB) with launch records while no agent runs, then start an agent
 *     and time request-stop -> drained and joined. Repeated; p50/p99/max.
 *  2. SIGINT -> exit of the real `cuprobe trace -p PID` (ring of the same
 *     size), for a process that keeps launching. Repeated; p50/p99/max.
 *  3. Cost per traced call: untraced; streaming with batched wakeups (the
 *     default) or a wakeup on every record; counting in BPF maps with nothing
 *     streamed (cuprobe stats), with and without latency return probes.
 *     Interleaved round by round.
 *
 * The launches go to the simulated driver (build/lib/cuda-sim), loaded by
 * this program's RUNPATH, so the probes fire in this very process.
 * Run as root: sudo build/bin/agent_bench [--rounds N] [--calls N] [--ring-size BYTES]
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuprobe.h"
#include "vec_add_ptx.h"

#define ELEMENTS 32

static CUfunction function;
static CUdeviceptr buffers[3];
static char self_cuda[4096];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t percentile(uint64_t *sorted, size_t n, double p)
{
	size_t index = (size_t)(p * (double)(n - 1) + 0.5);

	return sorted[index < n ? index : n - 1];
}

static void die(const char *what, int err)
{
	fprintf(stderr, "agent_bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static void launch_n(long n)
{
	int elements = ELEMENTS;
	void *params[] = { &buffers[0], &buffers[1], &buffers[2], &elements };
	long i;

	for (i = 0; i < n; i++)
		if (cuLaunchKernel(function, 1, 1, 1, ELEMENTS, 1, 1, 0, NULL, params, NULL))
			die("cuLaunchKernel", EIO);
}

static void setup_cuda(void)
{
	CUcontext context;
	CUmodule module;
	CUdevice device;
	struct cp_lib_set *libs;
	int i;

	if (cuInit(0) || cuDeviceGet(&device, 0) || cuDevicePrimaryCtxRetain(&context, device) ||
	    cuCtxSetCurrent(context) || cuModuleLoadData(&module, vec_add_ptx) ||
	    cuModuleGetFunction(&function, module, "vec_add"))
		die("CUDA setup", EIO);
	for (i = 0; i < 3; i++)
		if (cuMemAlloc(&buffers[i], ELEMENTS * sizeof(float)))
			die("cuMemAlloc", ENOMEM);
	libs = cp_lib_set__new();
	if (!libs || cp_discover__process(libs, getpid(), "libcuda.so.1") <= 0)
		die("no libcuda.so.1 mapped", ENOENT);
	snprintf(self_cuda, sizeof(self_cuda), "%s", cp_lib_set__path(libs, 0));
	cp_lib_set__free(libs);
}

static struct cp_tracer *open_tracer(size_t ring_bytes, bool wake_every_record)
{
	struct cp_tracer_opts opts = {
		.sz = sizeof(opts), .ring_bytes = ring_bytes, .wake_every_record = wake_every_record,
	};
	struct cp_tracer *tracer = cp_tracer__open(&opts);
	int err;

	if (!tracer)
		die("cp_tracer__open", errno);
	err = cp_tracer__attach_driver(tracer, self_cuda, NULL);
	if (err)
		die("attach", err);
	err = cp_tracer__add_pid(tracer, getpid());
	if (err)
		die("add pid", err);
	return tracer;
}

static atomic_ulong consumed;

static int count_event(void *ctx, const union cp_event *event)
{
	atomic_fetch_add_explicit(&consumed, 1, memory_order_relaxed);
	return 0;
}

/* 1. request-stop -> joined, with the ring full. */
static void bench_full_ring_stop(int rounds, size_t ring_bytes)
{
	uint64_t *samples = calloc(rounds, sizeof(*samples));
	unsigned long drained = 0;
	int r;

	for (r = 0; r < rounds; r++) {
		struct cp_agent_opts agent_opts = { .sz = sizeof(agent_opts), .on_event = count_event };
		struct cp_tracer *tracer = open_tracer(ring_bytes, false);
		struct cp_agent_stats stats;
		struct cp_counters counters;
		struct cp_agent *agent;
		uint64_t start;

		/* Fill until the ring refuses records. */
		do {
			launch_n(20000);
			cp_tracer__read_counters(tracer, &counters);
		} while (!counters.records_lost);
		agent = cp_agent__new(cp_tracer__ring_fd(tracer), &agent_opts);
		if (!agent)
			die("cp_agent__new", errno);
		start = now_ns();
		cp_agent__request_stop(agent); /* the stop request comes before the thread runs */
		if (cp_agent__start(agent))
			die("cp_agent__start", errno);
		cp_agent__stop(agent);
		samples[r] = now_ns() - start;
		cp_agent__stats(agent, &stats);
		drained = stats.delivered;
		cp_agent__free(agent);
		cp_tracer__free(tracer);
	}
	qsort(samples, rounds, sizeof(*samples), cmp_u64);
	printf("| full %zu MiB ring: stop -> drained + joined | %lu records | p50 %.2f ms | p99 %.2f ms | max %.2f ms |\n",
	       ring_bytes >> 20, drained, percentile(samples, rounds, 0.5) / 1e6,
	       percentile(samples, rounds, 0.99) / 1e6, samples[rounds - 1] / 1e6);
	free(samples);
}

/* 2. SIGINT -> exit of the real CLI tracing this process while it launches. */
static void bench_cli_sigint(int rounds, size_t ring_bytes, const char *cuprobe)
{
	uint64_t *samples = calloc(rounds, sizeof(*samples));
	char pid_text[32], ring_text[32];
	int r, status;

	snprintf(pid_text, sizeof(pid_text), "%d", getpid());
	snprintf(ring_text, sizeof(ring_text), "%zu", ring_bytes);
	for (r = 0; r < rounds; r++) {
		uint64_t start;
		pid_t child = fork();

		if (child < 0)
			die("fork", errno);
		if (child == 0) {
			int null_fd = open("/dev/null", O_WRONLY);

			dup2(null_fd, STDERR_FILENO);
			execl(cuprobe, cuprobe, "trace", "--json", "-o", "/dev/null", "--ring-size",
			      ring_text, "-p", pid_text, (char *)NULL);
			_exit(127);
		}
		/* Let it attach, then keep it busy with launches. */
		launch_n(5000);
		usleep(300000);
		launch_n(50000);
		start = now_ns();
		kill(child, SIGINT);
		waitpid(child, &status, 0);
		samples[r] = now_ns() - start;
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "agent_bench: cuprobe exited with status 0x%x\n", status);
			exit(1);
		}
	}
	qsort(samples, rounds, sizeof(*samples), cmp_u64);
	printf("| cuprobe trace -p: SIGINT -> exit (%zu MiB ring) | %d runs | p50 %.2f ms | p99 %.2f ms | max %.2f ms |\n",
	       ring_bytes >> 20, rounds, percentile(samples, rounds, 0.5) / 1e6,
	       percentile(samples, rounds, 0.99) / 1e6, samples[rounds - 1] / 1e6);
	free(samples);
}

/* CPU time of the whole process (launching thread, agent, and the kernel work of both). */
static uint64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* 3. ns per traced call for each way of tracing, interleaved round by round. */
struct variant {
	const char *label;
	bool traced;
	bool wake_every_record;
	bool aggregate;
	bool no_call_records;
	bool measure_latency;
};

static const struct variant variants[] = {
	{ "untraced", false },
	{ "streaming every call, batched wakeups (cuprobe trace)", true },
	{ "streaming every call, wakeup on every record", true, .wake_every_record = true },
	{ "counting in BPF maps, nothing streamed (cuprobe stats)", true, .aggregate = true,
	  .no_call_records = true },
	{ "counting in maps + latency return probes (stats --latency)", true, .aggregate = true,
	  .no_call_records = true, .measure_latency = true },
};
#define VARIANTS (sizeof(variants) / sizeof(variants[0]))

static void bench_tracing_modes(int rounds, long calls)
{
	double sums[VARIANTS] = { 0 }, cpu[VARIANTS] = { 0 };
	uint64_t wakeups[VARIANTS] = { 0 };
	size_t v;
	int r;

	for (r = 0; r < rounds; r++) {
		for (v = 0; v < VARIANTS; v++) {
			struct cp_tracer_opts opts = {
				.sz = sizeof(opts), .ring_bytes = 64u << 20,
				.wake_every_record = variants[v].wake_every_record,
				.aggregate = variants[v].aggregate,
				.no_call_records = variants[v].no_call_records,
				.measure_latency = variants[v].measure_latency,
			};
			struct cp_agent_opts agent_opts = { .sz = sizeof(agent_opts), .on_event = count_event };
			struct cp_tracer *tracer = NULL;
			struct cp_agent *agent = NULL;
			struct cp_agent_stats stats;
			uint64_t start, cpu_start;
			int err;

			if (variants[v].traced) {
				tracer = cp_tracer__open(&opts);
				if (!tracer)
					die("cp_tracer__open", errno);
				err = cp_tracer__attach_driver(tracer, self_cuda, NULL);
				if (!err)
					err = cp_tracer__add_pid(tracer, getpid());
				if (err)
					die("attach", err);
				agent = cp_agent__new(cp_tracer__ring_fd(tracer), &agent_opts);
				if (!agent || cp_agent__start(agent))
					die("agent", errno);
			}
			start = now_ns();
			cpu_start = process_cpu_ns();
			launch_n(calls);
			sums[v] += (double)(now_ns() - start) / calls;
			if (agent) {
				cp_agent__stop(agent); /* the drain is part of the consumer's cost */
				cp_agent__stats(agent, &stats);
				wakeups[v] += stats.wakeups;
			}
			cpu[v] += (double)(process_cpu_ns() - cpu_start) / calls;
			cp_agent__free(agent);
			cp_tracer__free(tracer);
		}
	}
	for (v = 0; v < VARIANTS; v++)
		printf("| per call: %s | %.0f ns | %.2fx untraced | +%.0f ns | process CPU %.0f ns/call, %.1f agent wakeups/1k calls |\n",
		       variants[v].label, sums[v] / rounds, sums[v] / sums[0],
		       (sums[v] - sums[0]) / rounds, cpu[v] / rounds,
		       1000.0 * wakeups[v] / ((double)calls * rounds));
	printf("| waking on every record vs batched | +%.0f ns per record | %.2fx of batched | | |\n",
	       (sums[2] - sums[1]) / rounds, sums[2] / sums[1]);
	printf("| counting in maps vs streaming (batched) | %+.0f ns per launch | %.2fx of streaming | process CPU %+.0f ns/call | |\n",
	       (sums[3] - sums[1]) / rounds, sums[3] / sums[1], (cpu[3] - cpu[1]) / rounds);
}

int main(int argc, char **argv)
{
	const char *cuprobe = CUPROBE_BIN;
	size_t ring_bytes = 64u << 20;
	long calls = 200000;
	bool lifecycle = true, modes = true;
	int rounds = 5, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = atol(argv[++i]);
		else if (!strcmp(argv[i], "--ring-size") && i + 1 < argc)
			ring_bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--cuprobe") && i + 1 < argc)
			cuprobe = argv[++i];
		else if (!strcmp(argv[i], "--only-modes"))
			lifecycle = false;
		else if (!strcmp(argv[i], "--only-lifecycle"))
			modes = false;
		else {
			fprintf(stderr, "usage: agent_bench [--rounds N] [--calls N] [--ring-size BYTES] [--cuprobe PATH]\n"
					"                   [--only-modes | --only-lifecycle]\n");
			return 2;
		}
	}
	if (rounds < 1 || calls < 1000 || ring_bytes < 4096 || (ring_bytes & (ring_bytes - 1))) {
		fprintf(stderr, "agent_bench: rounds >= 1, calls >= 1000, ring size a power of two\n");
		return 2;
	}
	if (geteuid()) {
		fprintf(stderr, "agent_bench: must run as root\n");
		return 1;
	}
	libbpf_set_print(NULL);
	setup_cuda();
	printf("| measure | value | p50 / ratio | p99 / delta | max / note |\n|---|---|---|---|---|\n");
	if (lifecycle) {
		bench_full_ring_stop(rounds, ring_bytes);
		bench_cli_sigint(rounds * 4, ring_bytes, cuprobe);
	}
	if (modes)
		bench_tracing_modes(rounds, calls);
	return 0;
}
