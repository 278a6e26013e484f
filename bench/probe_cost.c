// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * probe_cost: where the launch probe's time goes. The kernel's own
 * accounting (BPF_ENABLE_STATS: run time and count per program) over the
 * same workload, once with the whole program and once per variant with one
 * part left out (enum cp_bench_omit), then with everything left out (the
 * bare cost of running any program there). Also the whole cost of the other
 * programs the workload hits (copies, allocations, syncs).
 *
 * usage: probe_cost LIBCUDA DRV_LAUNCH [LAUNCHES [THREADS [ROUNDS]]]
 * Prints a Markdown table; numbers are medians over ROUNDS rounds, the
 * variants interleaved within each round. One more variant is the whole
 * probe with the wakeup latency bound at 1 s instead of 250 us: the price of
 * the wakeups the probe makes (paid inside the traced call).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bench_common.h"
#include "cuprobe_internal.h"
#include "tracer_internal.h"

struct variant {
	const char *name;
	uint32_t omit;
	uint64_t wakeup_latency_ns; /* 0: the default bound (250 us) */
	double ns[MAX_ROUNDS];
};

static struct variant variants[] = {
	{ "whole launch probe", 0 },
	{ "without the target look-up", CP_OMIT_FILTER },
	{ "without the per-CPU counter", CP_OMIT_COUNTERS },
	{ "without the clock read", CP_OMIT_CLOCK },
	{ "without the stack-argument read", CP_OMIT_STACK_ARGS },
	{ "without the device look-up", CP_OMIT_DEVICE },
	{ "without the wakeup decision", CP_OMIT_WAKEUP },
	{ "without the record (reserve, fill, submit)", CP_OMIT_RECORD },
	/* Whole, but woken by the latency bound at most once a second: what the wakeups cost. */
	{ "whole, wakeup bound 1 s (--wakeup-latency 1000000)", 0, 1000000000ull },
	{ "nothing (enter and return)", CP_OMIT_FILTER | CP_OMIT_COUNTERS | CP_OMIT_CLOCK |
					 CP_OMIT_STACK_ARGS | CP_OMIT_DEVICE | CP_OMIT_RECORD },
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

/* The other programs' whole cost, from the whole variant's runs. */
static const char *const others[] = { "copy", "call_entry", "call_return", "free_entry" };
#define N_OTHERS (sizeof(others) / sizeof(others[0]))
static double other_ns[N_OTHERS][MAX_ROUNDS];

/* One run of the workload under a tracer loaded with omit; -1 on failure. */
static int measure(const char *lib, const char *workload, const char *launches, const char *threads,
		   const struct variant *variant, double *launch_ns, double *others_ns)
{
	CP_OPTS(cp_tracer_opts, tracer_opts, .bench_omit = variant->omit, .ring_bytes = 64u << 20,
		.wakeup_latency_ns = variant->wakeup_latency_ns);
	CP_OPTS(cp_agent_opts, agent_opts, .on_event = bench_discard);
	struct cp_tracer *tracer = cp_tracer__open(&tracer_opts);
	unsigned long long runs;
	struct cp_agent *agent = NULL;
	int status = -1;
	size_t i;
	pid_t pid;

	if (!tracer || cp_tracer__attach_driver(tracer, lib, NULL)) {
		fprintf(stderr, "probe_cost: cannot load or attach: %s\n", strerror(errno));
		goto out;
	}
	agent = cp_agent__new(cp_tracer__ring_fd(tracer), &agent_opts);
	if (!agent || cp_agent__start(agent))
		goto out;
	pid = fork();
	if (pid == 0) {
		/* Time to be added to the traced set before the first call. */
		execl(workload, workload, launches, threads, "--start-delay", "100", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || cp_tracer__add_pid(tracer, pid))
		goto out;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "probe_cost: the workload failed\n");
		status = -1;
		goto out;
	}
	cp_agent__stop(agent);
	*launch_ns = bench_program_ns(tracer, "launch", &runs);
	for (i = 0; i < N_OTHERS; i++)
		others_ns[i] = bench_program_ns(tracer, others[i], &runs);
	status = *launch_ns > 0 ? 0 : -1;
out:
	cp_agent__free(agent);
	cp_tracer__free(tracer);
	return status;
}

int main(int argc, char **argv)
{
	const char *launches = argc > 3 ? argv[3] : "200000", *threads = argc > 4 ? argv[4] : "1";
	int rounds = argc > 5 ? atoi(argv[5]) : 5, stats_fd, r;
	double others_round[N_OTHERS];
	size_t v, i;

	if (argc < 3 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: probe_cost LIBCUDA DRV_LAUNCH [LAUNCHES [THREADS [ROUNDS (1..%d)]]]\n",
			MAX_ROUNDS);
		return 2;
	}
	/* The kernel counts run time only while someone holds this fd. */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "probe_cost: cannot enable BPF run-time stats: %s\n", strerror(errno));
		return 1;
	}
	for (r = 0; r < rounds; r++)
		for (v = 0; v < N_VARIANTS; v++) {
			if (measure(argv[1], argv[2], launches, threads, &variants[v],
				    &variants[v].ns[r], others_round))
				return 1;
			if (v == 0)
				for (i = 0; i < N_OTHERS; i++)
					other_ns[i][r] = others_round[i];
		}
	close(stats_fd);
	printf("| launch probe | ns per run (median of %d) | saved vs whole |\n|---|---|---|\n", rounds);
	for (v = 0; v < N_VARIANTS; v++)
		printf("| %s | %.0f | %.0f |\n", variants[v].name, bench_median(variants[v].ns, rounds),
		       bench_median(variants[0].ns, rounds) - bench_median(variants[v].ns, rounds));
	printf("\n| other program (whole) | ns per run (median of %d) |\n|---|---|\n", rounds);
	for (i = 0; i < N_OTHERS; i++)
		printf("| %s | %.0f |\n", others[i], bench_median(other_ns[i], rounds));
	printf("\n%s launches from %s thread(s) per run, driver %s.\n", launches, threads, argv[1]);
	return 0;
}
