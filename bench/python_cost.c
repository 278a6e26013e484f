// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * python_cost: what the Python frame walker (--python) adds to a call.
 * The same workloads under the same tracer, walker off and on, interleaved
 * in each round: gpu/py_launch.py --rate (launches from a Python loop DEPTH
 * calls down: a stack of DEPTH + 3 frames, 64 kept) at several depths, and
 * drv_launch (not Python: the walker's look-up only). For each, the launch
 * probe's run time from the kernel's own accounting (BPF_ENABLE_STATS) and
 * the loop's launches per second as the Python program timed them.
 *
 * usage: python_cost LIBCUDA PYTHON PY_LAUNCH DRV_LAUNCH [LAUNCHES [ROUNDS]]
 * Prints a Markdown table of medians over ROUNDS rounds.
 */
#include <errno.h>
#include <fcntl.h>
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

struct workload {
	const char *name;
	const char *depth;         /* py_launch.py --depth; NULL: drv_launch */
	double probe_ns[2][MAX_ROUNDS];  /* walker off, on */
	double rate[2][MAX_ROUNDS];      /* launches per second the program saw (Python only) */
};

static struct workload workloads[] = {
	{ "Python, 4 frames", "1" },
	{ "Python, 23 frames", "20" },
	{ "Python, 63 frames", "60" },
	{ "Python, 103 frames (64 kept)", "100" },
	{ "drv_launch (not Python)", NULL },
};
#define N_WORKLOADS (sizeof(workloads) / sizeof(workloads[0]))

/* One run: the workload started held until traced, its rate read from its output. */
static int measure(char **argv, bool walker, const struct workload *w, const char *launches,
		   double *probe_ns, double *rate)
{
	CP_OPTS(cp_tracer_opts, tracer_opts, .ring_bytes = 64u << 20, .python_stacks = walker,
		.hold_for_stacks = true);
	CP_OPTS(cp_python_opts, python_opts);
	CP_OPTS(cp_agent_opts, agent_opts, .on_event = bench_discard);
	struct cp_tracer *tracer = cp_tracer__open(&tracer_opts);
	struct cp_python *python = NULL;
	struct cp_agent *agent = NULL;
	int go[2] = { -1, -1 }, out[2] = { -1, -1 }, status = -1;
	char byte = 1, text[512] = "";
	double seconds = 0;
	ssize_t n;
	pid_t pid;

	if (!tracer || cp_tracer__attach_driver(tracer, argv[1], NULL)) {
		fprintf(stderr, "python_cost: cannot load or attach: %s\n", strerror(errno));
		goto out;
	}
	python = walker ? cp_python__new(tracer, &python_opts) : NULL;
	agent_opts.python = python;
	agent = cp_agent__new(cp_tracer__ring_fd(tracer), &agent_opts);
	if (!agent || cp_agent__start(agent) || pipe2(go, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		goto out;
	pid = fork();
	if (pid == 0) {
		if (read(go[0], &byte, 1) != 1)
			_exit(120);
		dup2(out[1], STDOUT_FILENO);
		if (w->depth)
			execl(argv[2], argv[2], argv[3], argv[1], launches, "--rate", "--depth", w->depth,
			      (char *)NULL);
		else
			execl(argv[4], argv[4], launches, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	out[1] = -1;
	if (pid < 0 || cp_tracer__add_pid(tracer, pid) || write(go[1], &byte, 1) != 1)
		goto out;
	n = read(out[0], text, sizeof(text) - 1);
	while (n > 0 && (size_t)n < sizeof(text) - 1) {
		ssize_t more = read(out[0], text + n, sizeof(text) - 1 - (size_t)n);

		if (more <= 0)
			break;
		n += more;
	}
	text[n > 0 ? n : 0] = '\0';
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "python_cost: %s failed: %s\n", w->name, text);
		status = -1;
		goto out;
	}
	cp_agent__stop(agent);
	*probe_ns = bench_program_ns(tracer, "launch", NULL);
	*rate = 0;
	if (w->depth) {
		const char *at = strstr(text, "seconds=");

		seconds = at ? strtod(at + 8, NULL) : 0;
		*rate = seconds > 0 ? atof(launches) / seconds : 0;
	}
	status = *probe_ns > 0 ? 0 : -1;
out:
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
	if (out[0] >= 0)
		close(out[0]);
	if (out[1] >= 0)
		close(out[1]);
	cp_agent__free(agent);
	cp_python__free(python);
	cp_tracer__free(tracer);
	return status;
}

int main(int argc, char **argv)
{
	const char *launches = argc > 5 ? argv[5] : "100000";
	int rounds = argc > 6 ? atoi(argv[6]) : 5, stats_fd, r, walker;
	size_t i;

	if (argc < 5 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: python_cost LIBCUDA PYTHON PY_LAUNCH DRV_LAUNCH [LAUNCHES [ROUNDS (1..%d)]]\n",
			MAX_ROUNDS);
		return 2;
	}
	libbpf_set_print(NULL);
	/* The kernel counts run time only while someone holds this fd. */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "python_cost: cannot enable BPF run-time stats: %s\n", strerror(errno));
		return 1;
	}
	for (r = 0; r < rounds; r++)
		for (i = 0; i < N_WORKLOADS; i++)
			for (walker = 0; walker < 2; walker++)
				if (measure(argv, walker, &workloads[i], launches,
					    &workloads[i].probe_ns[walker][r], &workloads[i].rate[walker][r]))
					return 1;
	close(stats_fd);
	printf("| workload | launch probe, walker off (ns) | on (ns) | walker's cost per call (ns) | launches/s off | on | on/off |\n");
	printf("|---|---|---|---|---|---|---|\n");
	for (i = 0; i < N_WORKLOADS; i++) {
		const struct workload *w = &workloads[i];
		double off = bench_median(w->probe_ns[0], rounds);
		double on = bench_median(w->probe_ns[1], rounds);
		double rate_off = bench_median(w->rate[0], rounds);
		double rate_on = bench_median(w->rate[1], rounds);

		if (w->depth)
			printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.3f |\n", w->name, off, on, on - off,
			       rate_off, rate_on, rate_on / rate_off);
		else
			printf("| %s | %.0f | %.0f | %.0f | | | |\n", w->name, off, on, on - off);
	}
	printf("\n%s launches a run, medians of %d rounds, walker off and on interleaved; %s, driver %s.\n",
	       launches, rounds, argv[2], argv[1]);
	return 0;
}
