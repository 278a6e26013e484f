// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cp_bench_load: the launch-bound driver-API loop that bench/compare.c
 * runs under every contender. It sets up like agent_bench (cuInit, primary
 * context, vec_add from PTX, 3 cuMemAlloc, 2 cuMemcpyHtoD), then times
 * CALLS cuLaunchKernel calls of a 1x1x1 grid of ELEMENTS threads and prints
 *
 *     cp_bench_load: pid=P calls=N ns_per_call=X
 *
 * then cuStreamSynchronize, cuCtxSynchronize, cuMemcpyDtoH, 3 cuMemFree,
 * and sleeps --linger-ms (so in-process consumers can drain) before exit.
 * --idle-ms sleeps that long before the loop (idle consumer CPU).
 * --exit-race returns from main right after the loop, with nothing
 * synchronized or freed, while the records of the last calls are in flight.
 *
 * RUNPATH $ORIGIN/../lib/cuda-sim: the simulated driver in the build tree,
 * the system libcuda.so.1 (a near-empty kernel on a real GPU) elsewhere.
 */
#include <cuda.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vec_add_ptx.h"

static void check(CUresult rc, const char *call)
{
	const char *name = NULL;

	if (rc == CUDA_SUCCESS)
		return;
	cuGetErrorName(rc, &name);
	fprintf(stderr, "cp_bench_load: %s failed: %s\n", call, name ? name : "?");
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (ms > 0 && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void usage(void)
{
	fprintf(stderr, "usage: cp_bench_load [--calls N] [--elements N] [--idle-ms MS] "
			"[--linger-ms MS] [--exit-race]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long calls = 100000, elements = 32, idle_ms = 0, linger_ms = 20, i;
	bool exit_race = false;
	CUdeviceptr buffers[3];
	CUcontext context;
	CUfunction function;
	CUmodule module;
	CUdevice device;
	float *host;
	uint64_t start, elapsed;
	int n, b;

	for (b = 1; b < argc; b++) {
		if (!strcmp(argv[b], "--calls") && b + 1 < argc)
			calls = strtol(argv[++b], NULL, 10);
		else if (!strcmp(argv[b], "--elements") && b + 1 < argc)
			elements = strtol(argv[++b], NULL, 10);
		else if (!strcmp(argv[b], "--idle-ms") && b + 1 < argc)
			idle_ms = strtol(argv[++b], NULL, 10);
		else if (!strcmp(argv[b], "--linger-ms") && b + 1 < argc)
			linger_ms = strtol(argv[++b], NULL, 10);
		else if (!strcmp(argv[b], "--exit-race"))
			exit_race = true;
		else
			usage();
	}
	if (calls < 0 || elements < 1 || elements > 1024 || idle_ms < 0 || linger_ms < 0)
		usage();
	n = (int)elements;
	host = calloc((size_t)n, sizeof(*host));
	if (!host)
		return 1;
	check(cuInit(0), "cuInit");
	check(cuDeviceGet(&device, 0), "cuDeviceGet");
	check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
	check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
	check(cuModuleLoadData(&module, vec_add_ptx), "cuModuleLoadData");
	check(cuModuleGetFunction(&function, module, "vec_add"), "cuModuleGetFunction");
	for (b = 0; b < 3; b++)
		check(cuMemAlloc(&buffers[b], (size_t)n * sizeof(float)), "cuMemAlloc");
	check(cuMemcpyHtoD(buffers[0], host, (size_t)n * sizeof(float)), "cuMemcpyHtoD");
	check(cuMemcpyHtoD(buffers[1], host, (size_t)n * sizeof(float)), "cuMemcpyHtoD");
	sleep_ms(idle_ms);

	{
		void *params[] = { &buffers[0], &buffers[1], &buffers[2], &n };

		start = now_ns();
		for (i = 0; i < calls; i++)
			check(cuLaunchKernel(function, 1, 1, 1, (unsigned int)n, 1, 1, 0, NULL, params,
					     NULL), "cuLaunchKernel");
		elapsed = now_ns() - start;
	}
	printf("cp_bench_load: pid=%d calls=%ld ns_per_call=%.1f\n", (int)getpid(), calls,
	       calls ? (double)elapsed / (double)calls : 0.0);
	fflush(stdout);
	if (exit_race)
		return 0;

	check(cuStreamSynchronize(NULL), "cuStreamSynchronize");
	check(cuCtxSynchronize(), "cuCtxSynchronize");
	check(cuMemcpyDtoH(host, buffers[2], (size_t)n * sizeof(float)), "cuMemcpyDtoH");
	for (b = 0; b < 3; b++)
		check(cuMemFree(buffers[b]), "cuMemFree");
	free(host);
	sleep_ms(linger_ms);
	return 0;
}
