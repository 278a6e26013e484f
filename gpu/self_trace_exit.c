// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A CUDA program that traces itself through libcuprobe and exits while its
 * own threads are still launching: the shape of the bug cuprobe exists to
 * remove (an agent stopped by a teardown that already freed what it uses).
 *
 * The agent starts from a constructor. Built twice: STOP_FROM_ATEXIT stops
 * it from an atexit handler, STOP_FROM_DESTRUCTOR from a destructor. Either
 * way exit() runs while LAUNCHERS threads are in the middle of a burst.
 *
 * usage: self_trace_exit [LAUNCHERS] [LAUNCHES_BEFORE_EXIT]
 * Prints one line: self_trace_exit: mode=M delivered=D launches_seen=L lost=X
 */
#include <bpf/libbpf.h>
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuprobe.h"
#include "cuda_setup.h"

#if defined(STOP_FROM_ATEXIT) == defined(STOP_FROM_DESTRUCTOR)
#error "define exactly one of STOP_FROM_ATEXIT and STOP_FROM_DESTRUCTOR"
#endif
#ifdef STOP_FROM_ATEXIT
#define MODE "atexit"
#else
#define MODE "destructor"
#endif

#define ELEMENTS 256

static struct cp_self_trace *self_trace;
static atomic_ulong launches_seen;
static atomic_ulong launches_made;
static CUcontext context;
static CUfunction function;
static CUdeviceptr buffers[3];

static int on_event(void *ctx, const union cp_event *event)
{
	if (event->hdr.type == CP_EV_LAUNCH)
		atomic_fetch_add(&launches_seen, 1);
	return 0;
}

static void stop_tracing(void)
{
	struct cp_agent_stats stats;
	struct cp_counters counters;

	/* Stop = request, wake, drain, join; only then free. Launchers still run. */
	cp_self_trace__stop(self_trace);
	cp_self_trace__stats(self_trace, &stats, &counters);
	printf("self_trace_exit: mode=%s delivered=%llu launches_seen=%lu lost=%llu made_before_stop=%lu\n",
	       MODE, (unsigned long long)stats.delivered, atomic_load(&launches_seen),
	       (unsigned long long)counters.records_lost, atomic_load(&launches_made));
	fflush(stdout);
	cp_self_trace__free(self_trace);
	self_trace = NULL;
}

__attribute__((constructor)) static void start_tracing(void)
{
	CP_OPTS(cp_self_trace_opts, opts, .on_event = on_event);

	/* libbpf would report each driver symbol the simulated driver lacks. */
	libbpf_set_print(NULL);
	self_trace = cp_self_trace__start(&opts);
	if (!self_trace) {
		perror("self_trace_exit: cp_self_trace__start");
		_exit(3);
	}
#ifdef STOP_FROM_ATEXIT
	atexit(stop_tracing);
#endif
}

#ifdef STOP_FROM_DESTRUCTOR
__attribute__((destructor)) static void stop_tracing_at_unload(void)
{
	stop_tracing();
}
#endif

static void *launch_forever(void *arg)
{
	int n = ELEMENTS;
	void *params[] = { &buffers[0], &buffers[1], &buffers[2], &n };

	if (cuCtxSetCurrent(context) != CUDA_SUCCESS)
		return NULL;
	for (;;) {
		if (cuLaunchKernel(function, 1, 1, 1, ELEMENTS, 1, 1, 0, NULL, params, NULL))
			return NULL;
		atomic_fetch_add(&launches_made, 1);
	}
}

int main(int argc, char **argv)
{
	long launchers = argc > 1 ? atol(argv[1]) : 4;
	long before_exit = argc > 2 ? atol(argv[2]) : 2000;
	pthread_t thread;
	CUmodule module;
	long i;

	if (launchers < 1 || launchers > 64 || before_exit < 0) {
		fprintf(stderr, "usage: self_trace_exit [LAUNCHERS 1-64] [LAUNCHES_BEFORE_EXIT]\n");
		return 2;
	}
	context = cu_setup_primary_context(cu_setup_device(cu_check), true, cu_check);
	function = cu_setup_vec_add(&module, cu_check);
	for (i = 0; i < 3; i++)
		cu_check(cuMemAlloc(&buffers[i], ELEMENTS * sizeof(float)), "cuMemAlloc");
	for (i = 0; i < launchers; i++)
		if (pthread_create(&thread, NULL, launch_forever, NULL)) {
			fprintf(stderr, "self_trace_exit: pthread_create failed\n");
			return 1;
		}
	while (atomic_load(&launches_made) < (unsigned long)before_exit)
		usleep(100);
	/* exit() in the middle of the burst: the launchers are never joined. */
	exit(0);
}
