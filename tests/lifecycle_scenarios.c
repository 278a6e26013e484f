// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent lifecycle scenarios, in plain C so that the same code runs
 * inside Criterion (root_lifecycle) and, under ThreadSanitizer, in a
 * standalone program (agent_stress): Criterion cannot run under TSan.
 *
 * The producers are this process's own threads calling the simulated
 * driver, so every record is a real uprobe hit written into the BPF ring.
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuprobe.h"
#include "lifecycle_scenarios.h"
#include "vec_add_ptx.h"

#define ELEMENTS 32
#define MAX_PRODUCERS 8

static CUfunction function;
static CUdeviceptr buffers[3];
static CUcontext context;
static CUmodule module; /* kept for the process's life, like a real program's */
static bool cuda_ready;

static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

int lifecycle_setup(char *why, size_t len)
{
	CUdevice device;
	int i;

	if (cuda_ready)
		return 0;
	if (geteuid() != 0)
		return fail(why, len, "needs root: BPF programs are loaded");
	libbpf_set_print(NULL); /* the simulated driver lacks many symbols */
	if (cuInit(0) || cuDeviceGet(&device, 0) || cuDevicePrimaryCtxRetain(&context, device) ||
	    cuCtxSetCurrent(context) || cuModuleLoadData(&module, vec_add_ptx) ||
	    cuModuleGetFunction(&function, module, "vec_add"))
		return fail(why, len, "simulated driver setup failed");
	for (i = 0; i < 3; i++)
		if (cuMemAlloc(&buffers[i], ELEMENTS * sizeof(float)))
			return fail(why, len, "cuMemAlloc failed");
	cuda_ready = true;
	return 0;
}

void lifecycle_launch_once(void)
{
	int n = ELEMENTS;
	void *params[] = { &buffers[0], &buffers[1], &buffers[2], &n };

	cuLaunchKernel(function, 1, 1, 1, ELEMENTS, 1, 1, 0, NULL, params, NULL);
}

/* ---- producers ---------------------------------------------------------------- */

struct producers {
	pthread_t threads[MAX_PRODUCERS];
	int count;
	long per_thread; /* 0: until stopped */
	atomic_bool stop;
	atomic_long launched;
};

static void *produce(void *arg)
{
	struct producers *p = arg;
	long i;

	cuCtxSetCurrent(context);
	for (i = 0; !atomic_load(&p->stop) && (!p->per_thread || i < p->per_thread); i++) {
		lifecycle_launch_once();
		atomic_fetch_add(&p->launched, 1);
	}
	return NULL;
}

static int start_producers(struct producers *p, int count, long per_thread)
{
	int i;

	p->count = 0;
	p->per_thread = per_thread;
	atomic_store(&p->stop, false);
	atomic_store(&p->launched, 0);
	for (i = 0; i < count; i++) {
		if (pthread_create(&p->threads[i], NULL, produce, p))
			return -1;
		p->count++;
	}
	return 0;
}

/* Waits for the producers; those running until stopped are told to stop first. */
static void join_producers(struct producers *p)
{
	int i;

	if (!p->per_thread)
		atomic_store(&p->stop, true);
	for (i = 0; i < p->count; i++)
		pthread_join(p->threads[i], NULL);
	p->count = 0;
}

/* ---- tracer and counting ------------------------------------------------------ */

struct cp_tracer *lifecycle_open_tracer(size_t ring_bytes, char *why, size_t len)
{
	struct cp_tracer_opts opts = { .sz = sizeof(opts), .ring_bytes = ring_bytes };
	struct cp_tracer *tracer;
	int err;

	tracer = cp_tracer__open(&opts);
	if (!tracer) {
		fail(why, len, "cp_tracer__open: %s", strerror(errno));
		return NULL;
	}
	err = cp_tracer__attach_driver(tracer, CUDA_SIM_LIB, NULL);
	if (!err)
		err = cp_tracer__add_pid(tracer, getpid());
	if (err) {
		fail(why, len, "attach/add pid: %s", strerror(-err));
		cp_tracer__free(tracer);
		return NULL;
	}
	return tracer;
}

struct tally {
	atomic_ulong records;
	atomic_ulong launches;
	unsigned long stop_after;  /* the callback asks to stop at this record; 0 = never */
	unsigned int slow_us;      /* per-record delay: a consumer slower than the producers */
};

static int tally_event(void *ctx, const union cp_event *event)
{
	struct tally *t = ctx;
	unsigned long n = atomic_fetch_add(&t->records, 1) + 1;

	if (event->hdr.type == CP_EV_LAUNCH)
		atomic_fetch_add(&t->launches, 1);
	if (t->slow_us)
		usleep(t->slow_us);
	if (t->stop_after && n >= t->stop_after)
		return -ECANCELED;
	return 0;
}

static struct cp_agent *new_agent(struct cp_tracer *tracer, struct tally *t)
{
	struct cp_agent_opts opts = { .sz = sizeof(opts), .on_event = tally_event, .ctx = t };

	return cp_agent__new(cp_tracer__ring_fd(tracer), &opts);
}

/* Delivers whatever is still in the ring: an agent asked to stop before it starts. */
static int drain_rest(struct cp_tracer *tracer, struct tally *t, uint64_t *delivered,
		      char *why, size_t len)
{
	struct cp_agent *agent;
	struct cp_agent_stats stats;

	t->stop_after = 0;
	t->slow_us = 0;
	agent = new_agent(tracer, t);
	if (!agent)
		return fail(why, len, "cp_agent__new: %s", strerror(errno));
	cp_agent__request_stop(agent);
	if (cp_agent__start(agent) || cp_agent__stop(agent)) {
		cp_agent__free(agent);
		return fail(why, len, "the draining agent did not start and stop");
	}
	cp_agent__stats(agent, &stats);
	cp_agent__free(agent);
	if (stats.malformed)
		return fail(why, len, "%llu malformed records", (unsigned long long)stats.malformed);
	*delivered += stats.delivered;
	return 0;
}

/* The BPF side's count of records produced equals delivered + lost, exactly. */
static int check_accounting(struct cp_tracer *tracer, uint64_t delivered, char *why, size_t len)
{
	struct cp_counters counters;

	if (cp_tracer__read_counters(tracer, &counters))
		return fail(why, len, "cannot read the counters");
	if (counters.records_attempted != delivered + counters.records_lost)
		return fail(why, len, "produced %llu != delivered %llu + lost %llu",
			    (unsigned long long)counters.records_attempted,
			    (unsigned long long)delivered, (unsigned long long)counters.records_lost);
	return 0;
}

/* ---- the scenarios ------------------------------------------------------------ */

int scenario_start_stop_cycles(int cycles, char *why, size_t len)
{
	struct cp_tracer *tracer = lifecycle_open_tracer(1u << 20, why, len);
	struct producers producers = { 0 };
	struct tally t = { 0 };
	uint64_t delivered = 0;
	int cycle, err = 0;

	if (!tracer)
		return -1;
	if (start_producers(&producers, 4, 0)) {
		err = fail(why, len, "pthread_create failed");
		goto out;
	}
	for (cycle = 0; cycle < cycles && !err; cycle++) {
		struct cp_agent *agent = new_agent(tracer, &t);
		struct cp_agent_stats stats;

		if (!agent || cp_agent__start(agent)) {
			err = fail(why, len, "cycle %d: agent did not start", cycle);
			cp_agent__free(agent);
			break;
		}
		if (cycle % 3)
			usleep(cycle % 200);
		if (cp_agent__stop(agent) || cp_agent__stop(agent))
			err = fail(why, len, "cycle %d: stop (or the second, idempotent stop) failed", cycle);
		cp_agent__stats(agent, &stats);
		if (!err && (stats.thread_error || stats.callback_error))
			err = fail(why, len, "cycle %d: agent error %d/%d", cycle, stats.thread_error,
				   stats.callback_error);
		delivered += stats.delivered;
		cp_agent__free(agent);
	}
	join_producers(&producers);
	if (err)
		goto out;
	err = drain_rest(tracer, &t, &delivered, why, len);
	if (!err && atomic_load(&producers.launched) < 1000)
		err = fail(why, len, "the producers barely ran (%ld launches)",
			   atomic_load(&producers.launched));
	if (!err && atomic_load(&t.records) != delivered)
		err = fail(why, len, "callback saw %lu records, agents counted %llu",
			   atomic_load(&t.records), (unsigned long long)delivered);
	if (!err)
		err = check_accounting(tracer, delivered, why, len);
out:
	join_producers(&producers);
	cp_tracer__free(tracer);
	return err;
}

static struct cp_agent *signal_target;

static void stop_on_signal(int signo)
{
	cp_agent__request_stop(signal_target); /* async-signal-safe by contract */
}

int scenario_stop_from_signal_handler(char *why, size_t len)
{
	struct sigaction action = { .sa_handler = stop_on_signal }, old;
	struct cp_tracer *tracer = lifecycle_open_tracer(1u << 20, why, len);
	struct producers producers = { 0 };
	struct cp_agent_stats stats;
	struct tally t = { 0 };
	uint64_t delivered = 0;
	int err = 0, waited;

	if (!tracer)
		return -1;
	signal_target = new_agent(tracer, &t);
	sigemptyset(&action.sa_mask);
	if (!signal_target || sigaction(SIGUSR1, &action, &old)) {
		err = fail(why, len, "setup failed: %s", strerror(errno));
		goto out;
	}
	if (start_producers(&producers, 2, 0) || cp_agent__start(signal_target)) {
		err = fail(why, len, "start failed");
		goto out_restore;
	}
	for (waited = 0; atomic_load(&t.records) < 2000 && waited < 10000; waited++)
		usleep(1000);
	kill(getpid(), SIGUSR1);
	if (cp_agent__stop(signal_target))
		err = fail(why, len, "stop after the signal failed");
	cp_agent__stats(signal_target, &stats);
	if (!err && stats.thread_error)
		err = fail(why, len, "agent error %d", stats.thread_error);
	delivered = stats.delivered;
	join_producers(&producers);
	if (!err)
		err = drain_rest(tracer, &t, &delivered, why, len);
	if (!err)
		err = check_accounting(tracer, delivered, why, len);
out_restore:
	sigaction(SIGUSR1, &old, NULL);
out:
	join_producers(&producers);
	cp_agent__free(signal_target);
	signal_target = NULL;
	cp_tracer__free(tracer);
	return err;
}

int scenario_stop_from_callback(char *why, size_t len)
{
	struct cp_tracer *tracer = lifecycle_open_tracer(1u << 20, why, len);
	struct producers producers = { 0 };
	struct cp_agent_stats stats;
	struct tally t = { .stop_after = 500 };
	struct cp_agent *agent;
	uint64_t delivered = 0;
	int err = 0, waited;

	if (!tracer)
		return -1;
	agent = new_agent(tracer, &t);
	if (!agent || start_producers(&producers, 2, 0) || cp_agent__start(agent)) {
		err = fail(why, len, "start failed");
		goto out;
	}
	for (waited = 0; atomic_load(&t.records) < 500 && waited < 10000; waited++)
		usleep(1000);
	usleep(20000);
	/* The thread ended on its own once the callback said so. */
	cp_agent__stats(agent, &stats);
	if (stats.delivered != 500 || stats.callback_error != -ECANCELED)
		err = fail(why, len, "delivered %llu (want 500), callback_error %d (want %d)",
			   (unsigned long long)stats.delivered, stats.callback_error, -ECANCELED);
	if (!err && cp_agent__stop(agent))
		err = fail(why, len, "stop after the callback's stop failed");
	cp_agent__stats(agent, &stats);
	if (!err && stats.delivered != 500)
		err = fail(why, len, "records delivered after the callback stopped the agent");
	delivered = stats.delivered;
	join_producers(&producers);
	if (!err)
		err = drain_rest(tracer, &t, &delivered, why, len);
	if (!err)
		err = check_accounting(tracer, delivered, why, len);
out:
	join_producers(&producers);
	cp_agent__free(agent);
	cp_tracer__free(tracer);
	return err;
}

int scenario_tiny_ring_accounting(char *why, size_t len)
{
	struct cp_tracer *tracer = lifecycle_open_tracer((size_t)sysconf(_SC_PAGESIZE), why, len);
	struct producers producers = { 0 };
	struct cp_counters counters;
	struct cp_agent_stats stats;
	struct tally t = { .slow_us = 20 };
	struct cp_agent *agent;
	uint64_t delivered = 0;
	int err = 0;

	if (!tracer)
		return -1;
	agent = new_agent(tracer, &t);
	if (!agent || cp_agent__start(agent) || start_producers(&producers, 4, 5000)) {
		err = fail(why, len, "start failed");
		goto out;
	}
	join_producers(&producers);
	cp_agent__stop(agent);
	cp_agent__stats(agent, &stats);
	delivered = stats.delivered;
	err = drain_rest(tracer, &t, &delivered, why, len);
	if (!err && cp_tracer__read_counters(tracer, &counters))
		err = fail(why, len, "cannot read the counters");
	if (!err && atomic_load(&producers.launched) != 20000)
		err = fail(why, len, "launched %ld, want 20000", atomic_load(&producers.launched));
	if (!err && !counters.records_lost)
		err = fail(why, len, "a one-page ring with a slow consumer lost nothing");
	/* Each launch is one record, kept or counted lost; the rest are init/name/alloc. */
	if (!err && atomic_load(&t.launches) + counters.records_lost < 20000)
		err = fail(why, len, "launch records kept %lu + lost %llu < 20000",
			   atomic_load(&t.launches), (unsigned long long)counters.records_lost);
	if (!err)
		err = check_accounting(tracer, delivered, why, len);
out:
	join_producers(&producers);
	cp_agent__free(agent);
	cp_tracer__free(tracer);
	return err;
}

int scenario_fork_child_starts_its_own(char *why, size_t len)
{
	struct cp_tracer *tracer = lifecycle_open_tracer(1u << 20, why, len);
	struct tally t = { 0 };
	struct cp_agent *agent;
	int status, err = 0;
	pid_t child;

	if (!tracer)
		return -1;
	agent = new_agent(tracer, &t);
	if (!agent || cp_agent__start(agent)) {
		err = fail(why, len, "start failed");
		goto out;
	}
	child = fork();
	if (child < 0) {
		err = fail(why, len, "fork: %s", strerror(errno));
		goto out;
	}
	if (child == 0) {
		struct tally mine = { 0 };
		struct cp_agent *own;

		/* The parent's agent thread does not exist here: freeing must not join it. */
		cp_agent__free(agent);
		own = new_agent(tracer, &mine);
		if (!own || cp_agent__start(own))
			_exit(2);
		lifecycle_launch_once();
		if (cp_agent__stop(own))
			_exit(3);
		cp_agent__free(own);
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		err = fail(why, len, "child status %#x", status);
	if (!err && cp_agent__stop(agent))
		err = fail(why, len, "the parent's agent did not stop");
out:
	cp_agent__free(agent);
	cp_tracer__free(tracer);
	return err;
}
