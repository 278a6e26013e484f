// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * two_contexts: one process, device 0 selected explicitly, two threads with
 * two contexts on it: one thread creates its own (cuCtxCreate), the other
 * pushes the device's primary context (cuDevicePrimaryCtxRetain +
 * cuCtxPushCurrent). Each allocates, copies, launches vec_add ITERATIONS
 * times and synchronizes, so the device each call went to is known: for
 * checking cuprobe's per-GPU attribution on a machine with one GPU
 * (tests/gpu/devices_check.sh).
 *
 * usage: two_contexts ITERATIONS
 * prints "two_contexts: pid=P device=0 launches=L allocs=A htod=X dtoh=Y copy_bytes=B"
 */
#include <cuda.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_setup.h"

#define ELEMENTS 1024

static long iterations;
static CUdevice device;

/* Allocate, copy in, launch, synchronize, copy out, free: in the current context. */
static void work(void)
{
	static float host[ELEMENTS];
	CUdeviceptr a, b, c;
	CUmodule module;
	CUfunction function;
	int n = ELEMENTS;
	void *params[] = { &a, &b, &c, &n };
	long i;

	function = cu_setup_vec_add(&module, cu_check);
	cu_check(cuMemAlloc(&a, sizeof(host)), "cuMemAlloc");
	cu_check(cuMemAlloc(&b, sizeof(host)), "cuMemAlloc");
	cu_check(cuMemAlloc(&c, sizeof(host)), "cuMemAlloc");
	cu_check(cuMemcpyHtoD(a, host, sizeof(host)), "cuMemcpyHtoD");
	cu_check(cuMemcpyHtoD(b, host, sizeof(host)), "cuMemcpyHtoD");
	for (i = 0; i < iterations; i++)
		cu_check(cuLaunchKernel(function, ELEMENTS / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
			 "cuLaunchKernel");
	cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
	cu_check(cuMemcpyDtoH(host, c, sizeof(host)), "cuMemcpyDtoH");
	cu_check(cuMemFree(a), "cuMemFree");
	cu_check(cuMemFree(b), "cuMemFree");
	cu_check(cuMemFree(c), "cuMemFree");
	cu_check(cuModuleUnload(module), "cuModuleUnload");
}

static void *own_context(void *arg)
{
	CUcontext context;

	(void)arg;
	cu_check(cuCtxCreate(&context, NULL, 0, device), "cuCtxCreate");
	work();
	cu_check(cuCtxDestroy(context), "cuCtxDestroy");
	return NULL;
}

static void *primary_context(void *arg)
{
	CUcontext context, popped;

	(void)arg;
	cu_check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
	cu_check(cuCtxPushCurrent(context), "cuCtxPushCurrent");
	work();
	cu_check(cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
	cu_check(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[2];

	iterations = argc == 2 ? atol(argv[1]) : 0;
	if (iterations < 1) {
		fprintf(stderr, "usage: two_contexts ITERATIONS\n");
		return 2;
	}
	device = cu_setup_device(cu_check);
	if (pthread_create(&threads[0], NULL, own_context, NULL) ||
	    pthread_create(&threads[1], NULL, primary_context, NULL))
		return 1;
	pthread_join(threads[0], NULL);
	pthread_join(threads[1], NULL);
	printf("two_contexts: pid=%d device=0 launches=%ld allocs=6 htod=4 dtoh=2 copy_bytes=%zu\n",
	       getpid(), 2 * iterations, 6 * ELEMENTS * sizeof(float));
	return 0;
}
