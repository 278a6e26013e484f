// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The cuprobe contenders of cp_compare: cuprobe's probes, BPF ring buffer and
 * blocking agent, the agent running in cp_compare itself, outside the traced
 * process ("cuprobe"; "cuprobe-wake250us" with c->wakeup_ns set). Their exit
 * races go through the real `cuprobe trace -o /dev/null -- COMMAND`.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compare.h"
#include "cuprobe_internal.h"

struct cuprobe_sink {
	pid_t pid;
	struct cp_bench_hist *hist;
	_Atomic uint64_t delivered;
};

static int cuprobe_on_event(void *ctx, const union cp_event *event)
{
	struct cuprobe_sink *sink = ctx;
	uint64_t now = cp_bench_now_ns();

	if (event->hdr.pid != (uint32_t)sink->pid)
		return 0;
	cp_bench_hist_add(sink->hist, now > event->hdr.time_ns ? now - event->hdr.time_ns : 0);
	atomic_fetch_add_explicit(&sink->delivered, 1, memory_order_relaxed);
	return 0;
}

struct cuprobe_run {
	struct cp_tracer *tracer;
	struct cp_agent *agent;
	struct cuprobe_sink sink;
};

static int cuprobe_start(struct contender *c, const struct options *opt, pid_t pid,
			 struct cp_bench_hist *hist)
{
	struct cp_tracer_opts tracer_opts = { .sz = sizeof(tracer_opts), .wakeup_latency_ns = c->wakeup_ns };
	struct cp_agent_opts agent_opts = { .sz = sizeof(agent_opts), .on_event = cuprobe_on_event };
	struct cuprobe_run *run = calloc(1, sizeof(*run));
	int err;

	if (!run)
		return -ENOMEM;
	run->sink.pid = pid;
	run->sink.hist = hist;
	agent_opts.ctx = &run->sink;
	run->tracer = cp_tracer__open(&tracer_opts);
	if (!run->tracer) {
		err = -errno;
		free(run);
		return err;
	}
	err = cp_tracer__attach_driver(run->tracer, opt->cuda_lib, NULL);
	if (!err)
		err = cp_tracer__add_pid(run->tracer, pid);
	if (!err) {
		run->agent = cp_agent__new(cp_tracer__ring_fd(run->tracer), &agent_opts);
		if (!run->agent || cp_agent__start(run->agent))
			err = -errno ? -errno : -EIO;
	}
	if (err) {
		cp_agent__free(run->agent);
		cp_tracer__free(run->tracer);
		free(run);
		return err;
	}
	c->run = run;
	return 0;
}

/* The agent runs in this process: every thread of it but the driver's. */
static uint64_t cuprobe_cpu_ns(struct contender *c)
{
	return threads_cpu_ns(getpid(), (pid_t)syscall(SYS_gettid));
}

/* Waits until every record the BPF side wrote for the child is delivered (or 3 s). */
static void cuprobe_drain(struct cuprobe_run *run, struct cp_counters *counters)
{
	uint64_t deadline = cp_bench_now_ns() + 3000000000ull;

	/* The agent wakes at the latest after its idle timeout (1 s): wait longer than that. */
	for (;;) {
		cp_tracer__read_counters(run->tracer, counters);
		if (atomic_load(&run->sink.delivered) + counters->records_lost >=
		    counters->records_attempted || cp_bench_now_ns() > deadline)
			break;
		sleep_ms(2);
	}
}

/* Stops the agent and frees the run; returns the records it delivered. */
static uint64_t cuprobe_finish(struct contender *c)
{
	struct cuprobe_run *run = c->run;
	uint64_t delivered;

	cp_agent__stop(run->agent);
	cp_agent__free(run->agent);
	cp_tracer__free(run->tracer);
	delivered = atomic_load(&run->sink.delivered);
	free(run);
	c->run = NULL;
	return delivered;
}

static void cuprobe_after_measured(struct contender *c, const struct options *opt,
				   const struct child *child, uint64_t cpu_before)
{
	struct cp_counters counters;
	uint64_t cpu_after, delivered;

	cuprobe_drain(c->run, &counters);
	cpu_after = cuprobe_cpu_ns(c);
	delivered = cuprobe_finish(c);
	contender_count(c, counters.records_attempted, delivered, counters.records_lost,
			cpu_after - cpu_before);
}

static void cuprobe_stop(struct contender *c)
{
	cuprobe_finish(c);
}

static bool cuprobe_before_exit_races(struct contender *c, const struct options *opt)
{
	if (c->wakeup_ns) {
		format_into(c->exit_note, sizeof(c->exit_note), "as cuprobe (only the wakeup bound differs)");
		return false;
	}
	if (!file_exists(opt->cuprobe, X_OK)) {
		format_into(c->exit_note, sizeof(c->exit_note), "no cuprobe binary");
		return false;
	}
	return true;
}

static void cuprobe_exit_argv(struct contender *c, const struct options *opt, const char **argv)
{
	const char *load[8];
	int n = 0, j;

	load_argv(opt, load, opt->exit_calls, 0, true);
	argv[n++] = opt->cuprobe;
	argv[n++] = "trace";
	argv[n++] = "-o";
	argv[n++] = "/dev/null";
	argv[n++] = "--";
	for (j = 0; load[j]; j++)
		argv[n++] = load[j];
	argv[n] = NULL;
}

static void cuprobe_after_exit_run(struct contender *c, const struct options *opt, int run,
				   const struct child *child)
{
	/* "cuprobe: N events delivered, L lost, ..." */
	const char *line = strstr(child->out, "events delivered"), *start = line;
	uint64_t got = 0;

	if (line) {
		while (start > child->out && start[-1] != ':' && start[-1] != '\n')
			start--;
		got = strtoull(start, NULL, 10);
	}
	/* Setup and exit records come on top of the launches: none said is all lost. */
	contender_exit_shortfall(c, (uint64_t)opt->exit_calls, got);
}

const struct contender_ops contender_cuprobe_ops = {
	.start = cuprobe_start,
	.consumer_cpu_ns = cuprobe_cpu_ns,
	.stop = cuprobe_stop,
	.after_measured = cuprobe_after_measured,
	.before_exit_races = cuprobe_before_exit_races,
	.exit_argv = cuprobe_exit_argv,
	.after_exit_run = cuprobe_after_exit_run,
};
