// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU agent's lifecycle (needs root: a real BPF ring buffer), and the
 * library end to end: tracer + agent on the simulated driver, no CLI.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <criterion/criterion.h>

#include "cuprobe.h"
#include "helpers.h"

static int ring_fd = -1;

static void make_ring(void)
{
	require_root();
	libbpf_set_print(NULL); /* expected failures below would be printed */
	ring_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "cp_test_ring", 0, 0, 64 * 1024, NULL);
	cr_assert_geq(ring_fd, 0, "bpf_map_create(RINGBUF): %s", strerror(errno));
}

static void close_ring(void)
{
	if (ring_fd >= 0)
		close(ring_fd);
}

static int count_event(void *ctx, const union cp_event *event)
{
	atomic_fetch_add((atomic_int *)ctx, 1);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

TestSuite(agent, .init = make_ring, .fini = close_ring, .timeout = 30);

Test(agent, start_stop_free_without_records)
{
	atomic_int calls = 0;
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = count_event, .ctx = &calls,
				   .idle_timeout_ms = 5 };
	struct cp_agent *agent = cp_agent__new(ring_fd, &o);
	struct cp_agent_stats stats;

	cr_assert_not_null(agent, "cp_agent__new: %s", strerror(errno));
	cr_assert_eq(cp_agent__start(agent), 0);
	usleep(30 * 1000);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cp_agent__stats(agent, &stats);
	cr_assert_eq(stats.delivered, 0);
	cr_assert_eq(stats.malformed, 0);
	cr_assert_eq(stats.callback_error, 0);
	cr_assert_eq(stats.thread_error, 0);
	cr_assert_geq(stats.wakeups, 1, "5 ms idle timeouts over 30 ms woke the thread %llu times",
		      (unsigned long long)stats.wakeups);
	cr_assert_eq(atomic_load(&calls), 0);
	cp_agent__free(agent);
}

Test(agent, stop_is_idempotent)
{
	atomic_int calls = 0;
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = count_event, .ctx = &calls };
	struct cp_agent *agent = cp_agent__new(ring_fd, &o);

	cr_assert_not_null(agent);
	cr_assert_eq(cp_agent__stop(agent), 0, "stop before start");
	cr_assert_eq(cp_agent__start(agent), 0);
	cr_assert_eq(cp_agent__start(agent), -EALREADY);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cp_agent__free(agent);
}

Test(agent, free_without_start)
{
	atomic_int calls = 0;
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = count_event, .ctx = &calls };
	struct cp_agent *agent = cp_agent__new(ring_fd, &o);

	cr_assert_not_null(agent);
	cp_agent__free(agent);
	cp_agent__free(NULL);
	cp_agent__request_stop(NULL);
	cr_assert_eq(cp_agent__stop(NULL), -EINVAL);
	cr_assert_eq(cp_agent__start(NULL), -EINVAL);
}

Test(agent, stop_wakes_a_thread_that_would_wait_forever)
{
	atomic_int calls = 0;
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = count_event, .ctx = &calls,
				   .idle_timeout_ms = -1 };
	struct cp_agent *agent = cp_agent__new(ring_fd, &o);
	double start;

	cr_assert_not_null(agent);
	cr_assert_eq(cp_agent__start(agent), 0);
	usleep(20 * 1000); /* let it block in epoll_wait */
	start = now_s();
	cp_agent__request_stop(agent);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cr_assert_lt(now_s() - start, 1.0, "stop took %.3f s: the eventfd did not wake the agent",
		     now_s() - start);
	cp_agent__free(agent);
}

Test(agent, free_stops_a_running_agent)
{
	atomic_int calls = 0;
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = count_event, .ctx = &calls,
				   .idle_timeout_ms = -1 };
	struct cp_agent *agent = cp_agent__new(ring_fd, &o);
	double start;

	cr_assert_not_null(agent);
	cr_assert_eq(cp_agent__start(agent), 0);
	usleep(10 * 1000);
	start = now_s();
	cp_agent__free(agent);
	cr_assert_lt(now_s() - start, 1.0);
}

Test(agent, invalid_arguments)
{
	atomic_int calls = 0;
	struct cp_agent_opts good = { .sz = sizeof(good), .on_event = count_event, .ctx = &calls };
	struct cp_agent_opts o;

	errno = 0;
	cr_assert_null(cp_agent__new(-1, &good));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(cp_agent__new(ring_fd, NULL));
	cr_assert_eq(errno, EINVAL);
	o = good;
	o.sz = 0;
	errno = 0;
	cr_assert_null(cp_agent__new(ring_fd, &o));
	cr_assert_eq(errno, EINVAL);
	o = good;
	o.on_event = NULL;
	errno = 0;
	cr_assert_null(cp_agent__new(ring_fd, &o));
	cr_assert_eq(errno, EINVAL);
	o = good;
	o.busy_timeout_ms = -1;
	errno = 0;
	cr_assert_null(cp_agent__new(ring_fd, &o));
	cr_assert_eq(errno, EINVAL);
	o = good;
	o.idle_timeout_ms = -2;
	errno = 0;
	cr_assert_null(cp_agent__new(ring_fd, &o));
	cr_assert_eq(errno, EINVAL);
}

/* Options structs of older and newer releases, on a real ring (tests/unit_opts.c has the rule). */
Test(agent, options_of_other_releases)
{
	atomic_int calls = 0;
	CP_OPTS(cp_agent_opts, old, .on_event = count_event, .ctx = &calls,
		.busy_timeout_ms = -1, .idle_timeout_ms = -2);
	struct { struct cp_agent_opts known; uint64_t added; } newer;
	struct cp_agent *agent;

	/* Built before the timeouts existed: the invalid values past its sz are not its own. */
	old.sz = offsetof(struct cp_agent_opts, busy_timeout_ms);
	agent = cp_agent__new(ring_fd, &old);
	cr_assert_not_null(agent, "older struct: %s", strerror(errno));
	cp_agent__free(agent);

	memset(&newer, 0, sizeof(newer));
	newer.known.sz = sizeof(newer);
	newer.known.on_event = count_event;
	newer.known.ctx = &calls;
	agent = cp_agent__new(ring_fd, &newer.known);
	cr_assert_not_null(agent, "newer struct, unknown field unset: %s", strerror(errno));
	cp_agent__free(agent);

	newer.added = 1;
	errno = 0;
	cr_assert_null(cp_agent__new(ring_fd, &newer.known));
	cr_assert_eq(errno, EINVAL, "newer struct with an unknown field set");
}

Test(agent, not_a_ring_buffer)
{
	atomic_int calls = 0;
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = count_event, .ctx = &calls };
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	errno = 0;
	cr_assert_null(cp_agent__new(fd, &o), "a non-BPF fd was accepted");
	cr_assert_neq(errno, 0);
	close(fd);
}

/* ---- tracer + agent on the simulated driver --------------------------------- */

struct collected {
	struct cp_agent *agent;
	pid_t target;
	int calls;
	int launches;
	int launches_named_ok; /* grid/block as drv_launch makes them */
	int allocs;
	int exits;
	int exit_status;
	int inits;
	int fail_after;        /* return -42 after this many calls; 0 = never */
	int stop_from_callback;
};

static int collect(void *ctx, const union cp_event *ev)
{
	struct collected *c = ctx;

	c->calls++;
	if (ev->hdr.pid == (uint32_t)c->target) {
		switch (ev->hdr.type) {
		case CP_EV_LAUNCH:
			c->launches++;
			if (ev->launch.grid[0] == 4 && ev->launch.grid[1] == 1 &&
			    ev->launch.block[0] == 256 && ev->launch.block[1] == 1)
				c->launches_named_ok++;
			break;
		case CP_EV_ALLOC:
			c->allocs++;
			break;
		case CP_EV_PROC:
			if (ev->proc.kind == CP_PROC_EXIT) {
				c->exits++;
				c->exit_status = (ev->proc.exit_code >> 8) & 0xff;
			} else if (ev->proc.kind == CP_PROC_CUDA_INIT) {
				c->inits++;
			}
			break;
		default:
			break;
		}
	}
	if (c->fail_after && c->calls >= c->fail_after) {
		c->stop_from_callback = cp_agent__stop(c->agent);
		return -42;
	}
	return 0;
}

/* Runs `drv_launch ITERATIONS` held until the tracer knows it, like the CLI does. */
static void trace_drv_launch(struct cp_tracer *tracer, struct collected *c, const char *iterations)
{
	int go[2], status;
	char byte = 1;
	pid_t pid;

	cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		if (read(go[0], &byte, 1) != 1)
			_exit(120);
		dup2(null, STDOUT_FILENO);
		execl(DRV_LAUNCH, "drv_launch", iterations, (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	c->target = pid;
	cr_assert_eq(cp_tracer__add_pid(tracer, pid), 0);
	cr_assert_eq(write(go[1], &byte, 1), 1);
	close(go[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "drv_launch failed: status %#x", status);
}

static struct cp_tracer *open_tracer(void)
{
	struct cp_tracer_opts topts = { .sz = sizeof(topts) };
	struct cp_attach_report report;
	struct cp_tracer *tracer;

	require_root();
	libbpf_set_print(NULL); /* the simulator lacks many symbols: libbpf would list each */
	tracer = cp_tracer__open(&topts);
	cr_assert_not_null(tracer, "cp_tracer__open: %s", strerror(errno));
	cr_assert_eq(cp_tracer__attach_driver(tracer, CUDA_SIM_LIB, &report), 0);
	cr_assert_gt(report.attached, 0);
	/* Two process tracepoints, and at least one link for the driver probes. */
	cr_assert_gt(cp_tracer__link_count(tracer), 2);
	return tracer;
}

Test(tracer_agent, every_committed_record_is_delivered_before_stop_returns, .timeout = 60)
{
	struct cp_tracer *tracer = open_tracer();
	struct collected c = { 0 };
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = collect, .ctx = &c,
				   .idle_timeout_ms = -1 };
	struct cp_agent_stats stats;
	struct cp_counters counters;

	c.agent = cp_agent__new(cp_tracer__ring_fd(tracer), &o);
	cr_assert_not_null(c.agent);
	cr_assert_eq(cp_agent__start(c.agent), 0);
	trace_drv_launch(tracer, &c, "25");
	/* No timeout to save us: only the stop's drain can deliver what is left. */
	cr_assert_eq(cp_agent__stop(c.agent), 0);
	cp_agent__stats(c.agent, &stats);
	cr_assert_eq(c.launches, 25);
	cr_assert_eq(c.launches_named_ok, 25);
	cr_assert_eq(c.allocs, 4, "3 cuMemAlloc + 1 cuMemAllocHost");
	cr_assert_eq(c.inits, 1);
	cr_assert_eq(c.exits, 1);
	cr_assert_eq(c.exit_status, 0);
	cr_assert_eq(stats.delivered, (uint64_t)c.calls);
	cr_assert_eq(stats.malformed, 0);
	cr_assert_eq(stats.callback_error, 0);
	cr_assert_eq(stats.thread_error, 0);
	cr_assert_eq(cp_tracer__read_counters(tracer, &counters), 0);
	cr_assert_eq(counters.api_hits[CP_API_cuLaunchKernel], 25);
	cr_assert_eq(counters.records_lost, 0);
	cr_assert_geq(counters.records_attempted, (uint64_t)c.calls);
	cp_agent__free(c.agent);
	cp_tracer__free(tracer);
}

Test(tracer_agent, negative_callback_return_stops_the_agent, .timeout = 60)
{
	struct cp_tracer *tracer = open_tracer();
	struct collected c = { .fail_after = 3 };
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = collect, .ctx = &c };
	struct cp_agent_stats stats;

	c.agent = cp_agent__new(cp_tracer__ring_fd(tracer), &o);
	cr_assert_not_null(c.agent);
	cr_assert_eq(cp_agent__start(c.agent), 0);
	trace_drv_launch(tracer, &c, "20");
	cr_assert_eq(cp_agent__stop(c.agent), 0);
	cp_agent__stats(c.agent, &stats);
	cr_assert_eq(c.calls, 3, "callbacks went on after one returned an error");
	cr_assert_eq(stats.callback_error, -42);
	cr_assert_eq(stats.thread_error, 0);
	cr_assert_eq(c.stop_from_callback, -EDEADLK, "stop from the agent's own callback must not join");
	cp_agent__free(c.agent);
	cp_tracer__free(tracer);
}

/* The first record's callback waits until the test thread is inside cp_agent__stop, then stops too. */
struct racing_stop {
	struct cp_agent *agent;
	atomic_bool main_stopping;
	int calls;
	int from_callback;
};

static int stop_while_being_stopped(void *ctx, const union cp_event *ev)
{
	struct racing_stop *r = ctx;
	const struct timespec step = { 0, 10000000 };
	int waited;

	(void)ev;
	if (r->calls++)
		return 0;
	for (waited = 0; !atomic_load(&r->main_stopping) && waited < 1000; waited++)
		nanosleep(&step, NULL);
	/* Long enough for the test thread to hold the stop's lock and be joining us. */
	nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
	r->from_callback = cp_agent__stop(r->agent);
	return 0;
}

Test(tracer_agent, stop_from_a_callback_while_another_thread_stops_the_agent, .timeout = 30)
{
	struct cp_tracer *tracer = open_tracer();
	struct racing_stop r = { 0 };
	struct collected c = { 0 };
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = stop_while_being_stopped, .ctx = &r };

	r.agent = cp_agent__new(cp_tracer__ring_fd(tracer), &o);
	cr_assert_not_null(r.agent);
	c.agent = r.agent;
	/* Records wait in the ring, not yet read: the stop's drain hands them to the callback. */
	trace_drv_launch(tracer, &c, "5");
	cr_assert_eq(cp_agent__start(r.agent), 0);
	atomic_store(&r.main_stopping, true);
	cr_assert_eq(cp_agent__stop(r.agent), 0, "the stop from the test thread must join");
	cr_assert_eq(r.from_callback, -EDEADLK, "the callback's own stop must return at once");
	cr_assert_geq(r.calls, 1);
	cp_agent__free(r.agent);
	cp_tracer__free(tracer);
}

/* ---- the runtime probe: where cudaLaunchKernel is defined, and where it is not ---- */

static void runtime_attach(bool classic)
{
#ifndef CUPROBE_HAVE_CUDART_LAUNCH
	cr_assert_fail("cudart_launch was not built (nvcc not found): the runtime probe is untested");
#else
	struct cp_tracer_opts topts = { .sz = sizeof(topts), .classic_uprobes = classic };
	struct cp_lib_set *cudarts = cp_lib_set__new();
	struct cp_attach_report report;
	struct cp_tracer *tracer;

	require_root();
	libbpf_set_print(NULL);
	cr_assert_geq(cp_discover__for_exec(cudarts, "libcudart.so.13", CUDART_LAUNCH, NULL), 1,
		      "libcudart.so.13 of cudart_launch not found");
	tracer = cp_tracer__open(&topts);
	cr_assert_not_null(tracer, "cp_tracer__open: %s", strerror(errno));
	cr_assert_eq(cp_tracer__attach_runtime(tracer, cp_lib_set__path(cudarts, 0), &report), 0);
	/* cudaLaunchKernel and cudaLaunchKernel_ptsz (the catalogue's runtime lines) */
	cr_assert_eq(report.attached, 2);
	/*
	 * The executable only imports cudaLaunchKernel (an undefined symbol):
	 * nothing to probe there, which is "not found", not an error.
	 */
	memset(&report, 0, sizeof(report));
	cr_assert_eq(cp_tracer__attach_runtime(tracer, CUDART_LAUNCH, &report), -ENOENT,
		     "a dynamically linked executable that imports cudaLaunchKernel");
	cr_assert_eq(report.attached, 0);
	cp_tracer__free(tracer);
	cp_lib_set__free(cudarts);
#endif
}

Test(tracer_runtime, attach_with_uprobe_multi_links, .timeout = 60)
{
	runtime_attach(false);
}

Test(tracer_runtime, attach_with_classic_uprobes, .timeout = 60)
{
	runtime_attach(true);
}

Test(tracer_runtime, classic_and_multi_deliver_the_same_records, .timeout = 60)
{
	struct cp_tracer_opts topts = { .sz = sizeof(topts), .classic_uprobes = true };
	struct cp_attach_report report;
	struct collected c = { 0 };
	struct cp_agent_opts o = { .sz = sizeof(o), .on_event = collect, .ctx = &c };
	struct cp_tracer *tracer;

	require_root();
	libbpf_set_print(NULL);
	tracer = cp_tracer__open(&topts);
	cr_assert_not_null(tracer);
	cr_assert_eq(cp_tracer__attach_driver(tracer, CUDA_SIM_LIB, &report), 0);
	c.agent = cp_agent__new(cp_tracer__ring_fd(tracer), &o);
	cr_assert_not_null(c.agent);
	cr_assert_eq(cp_agent__start(c.agent), 0);
	trace_drv_launch(tracer, &c, "12");
	cr_assert_eq(cp_agent__stop(c.agent), 0);
	cr_assert_eq(c.launches, 12);
	cr_assert_eq(c.launches_named_ok, 12);
	cr_assert_eq(c.allocs, 4);
	cr_assert_eq(c.exits, 1);
	cp_agent__free(c.agent);
	cp_tracer__free(tracer);
}
