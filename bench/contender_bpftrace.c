// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The bpftrace contender of cp_compare: Debian's bpftrace, a uprobe printf of
 * the launch record's fields per cuLaunchKernel, its output read here. One
 * bpftrace per measured or idle run; one for all the exit-race runs, matching
 * the workload by comm.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"

struct bpftrace_run {
	pid_t pid;
	int out_fd;
	pthread_t reader;
	struct cp_bench_hist *hist;
	_Atomic uint64_t lines;
	_Atomic uint64_t lost;
	_Atomic bool ready;
	_Atomic bool gone;
};

static void *bpftrace_reader(void *arg)
{
	struct bpftrace_run *run = arg;
	static char buf[1 << 16];
	size_t used = 0;

	for (;;) {
		ssize_t n = read(run->out_fd, buf + used, sizeof(buf) - 1 - used);
		uint64_t now = cp_bench_now_ns();
		char *line, *newline;

		if (n <= 0)
			break;
		used += (size_t)n;
		buf[used] = '\0';
		line = buf;
		while ((newline = strchr(line, '\n'))) {
			*newline = '\0';
			if (!strcmp(line, "ready")) {
				atomic_store(&run->ready, true);
			} else if (!strncmp(line, "Lost ", 5)) {
				atomic_fetch_add(&run->lost, strtoull(line + 5, NULL, 10));
			} else if (line[0] >= '0' && line[0] <= '9') {
				uint64_t then = strtoull(line, NULL, 10);

				if (run->hist)
					cp_bench_hist_add(run->hist, now > then ? now - then : 0);
				atomic_fetch_add(&run->lines, 1);
			}
			line = newline + 1;
		}
		used = strlen(line);
		memmove(buf, line, used);
		if (used >= sizeof(buf) - 1)
			used = 0;
	}
	atomic_store(&run->gone, true);
	return NULL;
}

/* Starts bpftrace on the workload's cuLaunchKernel, filtered by pid (or comm when pid is 0). */
static int bpftrace_launch(struct bpftrace_run *run, const struct options *opt, pid_t pid, const char *comm,
			   struct cp_bench_hist *hist)
{
	static char program[2048];
	char filter[64];
	const char *argv[] = { opt->bpftrace, "-B", "line", "-e", program, NULL };
	uint64_t deadline;

	memset(run, 0, sizeof(*run));
	run->hist = hist;
	if (pid)
		snprintf(filter, sizeof(filter), "pid == %d", (int)pid);
	else
		snprintf(filter, sizeof(filter), "comm == \"%s\"", comm);
	/* The same fields as cuprobe's launch record; sargN are the stack arguments. */
	format_into(program, sizeof(program),
		 "BEGIN { printf(\"ready\\n\"); }\n"
		 "uprobe:%s:cuLaunchKernel /%s/ {\n"
		 "  printf(\"%%llu %%d %%d %%llx %%u %%u %%u %%u %%u %%u %%u %%llx\\n\", nsecs, pid, tid,\n"
		 "         arg0, arg1, arg2, arg3, arg4, arg5, sarg0, sarg1, sarg2);\n"
		 "}\n", opt->cuda_lib, filter);
	run->pid = process_start(argv, STDOUT_FILENO, &run->out_fd);
	if (run->pid < 0)
		return run->pid;
	if (pthread_create(&run->reader, NULL, bpftrace_reader, run))
		return -EAGAIN;
	deadline = cp_bench_now_ns() + 30000000000ull;
	while (!atomic_load(&run->ready) && !atomic_load(&run->gone) && cp_bench_now_ns() < deadline)
		sleep_ms(10);
	if (!atomic_load(&run->ready)) {
		kill(run->pid, SIGKILL);
		waitpid(run->pid, NULL, 0);
		pthread_join(run->reader, NULL);
		close(run->out_fd);
		return -ETIMEDOUT;
	}
	return 0;
}

/* Waits until `expected` lines came (or no new one for 1 s). */
static void bpftrace_drain(struct bpftrace_run *run, uint64_t expected)
{
	uint64_t last = atomic_load(&run->lines), last_change = cp_bench_now_ns();

	while (atomic_load(&run->lines) < expected && !atomic_load(&run->gone)) {
		uint64_t now_lines = atomic_load(&run->lines);

		if (now_lines != last) {
			last = now_lines;
			last_change = cp_bench_now_ns();
		} else if (cp_bench_now_ns() - last_change > 1000000000ull) {
			break;
		}
		sleep_ms(5);
	}
}

/* SIGINT, then SIGKILL after 5 s. Returns true when it was still running before the signal. */
static bool bpftrace_interrupt(struct bpftrace_run *run)
{
	bool alive = waitpid(run->pid, NULL, WNOHANG) == 0;

	process_stop(run->pid, SIGINT, 5000);
	pthread_join(run->reader, NULL);
	close(run->out_fd);
	return alive;
}

/* A bpftrace for c, in c->run: 0 or -errno. */
static int bpftrace_open(struct contender *c, const struct options *opt, pid_t pid, const char *comm,
			 struct cp_bench_hist *hist)
{
	struct bpftrace_run *run = malloc(sizeof(*run));
	int err;

	if (!run)
		return -ENOMEM;
	err = bpftrace_launch(run, opt, pid, comm, hist);
	if (err) {
		free(run);
		return err;
	}
	c->run = run;
	return 0;
}

/* Stops c's bpftrace and frees the run: its lines and lost counts, and whether it was still running. */
static bool bpftrace_close(struct contender *c, uint64_t *lines, uint64_t *lost)
{
	struct bpftrace_run *run = c->run;
	bool alive = bpftrace_interrupt(run);

	*lines = atomic_load(&run->lines);
	*lost = atomic_load(&run->lost);
	free(run);
	c->run = NULL;
	return alive;
}

static void bpftrace_prepare(struct contender *c, const struct options *opt)
{
	if (!opt->bpftrace[0])
		note_skip(c, "no bpftrace on this machine");
}

static int bpftrace_start(struct contender *c, const struct options *opt, pid_t pid, struct cp_bench_hist *hist)
{
	return bpftrace_open(c, opt, pid, NULL, hist);
}

/* All of bpftrace's threads. */
static uint64_t bpftrace_cpu_ns(struct contender *c)
{
	return threads_cpu_ns(((struct bpftrace_run *)c->run)->pid, 0);
}

static void bpftrace_after_measured(struct contender *c, const struct options *opt, const struct child *child,
				    uint64_t cpu_before)
{
	uint64_t cpu_after, lines, lost;

	bpftrace_drain(c->run, (uint64_t)opt->calls);
	cpu_after = bpftrace_cpu_ns(c);
	bpftrace_close(c, &lines, &lost);
	contender_count(c, (uint64_t)opt->calls, lines, lost, cpu_after - cpu_before);
}

static void bpftrace_stop(struct contender *c)
{
	uint64_t lines, lost;

	bpftrace_close(c, &lines, &lost);
}

static bool bpftrace_before_exit_races(struct contender *c, const struct options *opt)
{
	if (bpftrace_open(c, opt, 0, "cp_bench_load", NULL)) {
		snprintf(c->exit_note, sizeof(c->exit_note), "bpftrace did not start");
		return false;
	}
	return true;
}

static void bpftrace_after_exit_races(struct contender *c, const struct options *opt)
{
	uint64_t expected = (uint64_t)opt->exit_calls * (uint64_t)opt->exit_runs, lines, lost;
	bool alive;

	bpftrace_drain(c->run, expected);
	alive = bpftrace_close(c, &lines, &lost);
	contender_exit_shortfall(c, expected, lines);
	snprintf(c->exit_note, sizeof(c->exit_note), "one bpftrace for all runs, %s at the end",
		 alive ? "alive" : "dead");
}

const struct contender_ops contender_bpftrace_ops = {
	.prepare = bpftrace_prepare,
	.start = bpftrace_start,
	.consumer_cpu_ns = bpftrace_cpu_ns,
	.stop = bpftrace_stop,
	.after_measured = bpftrace_after_measured,
	.before_exit_races = bpftrace_before_exit_races,
	.after_exit_races = bpftrace_after_exit_races,
};
