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

#include "vec_add_ptx.h"

#define ELEMENTS 1024

static long iterations;
static CUdevice device;

static void check(CUresult result, const char *what)
{
	const char *name = NULL;

	if (result == CUDA_SUCCESS)
		return;
	cuGetErrorName(result, &name);
	fprintf(stderr, "two_contexts: %s failed: %s\n", what, name ? name : "?");
	exit(1);
}

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

	check(cuModuleLoadData(&module, vec_add_ptx), "cuModuleLoadData");
	check(cuModuleGetFunction(&function, module, "vec_add"), "cuModuleGetFunction");
	check(cuMemAlloc(&a, sizeof(host)), "cuMemAlloc");
	check(cuMemAlloc(&b, sizeof(host)), "cuMemAlloc");
	check(cuMemAlloc(&c, sizeof(host)), "cuMemAlloc");
	check(cuMemcpyHtoD(a, host, sizeof(host)), "cuMemcpyHtoD");
	check(cuMemcpyHtoD(b, host, sizeof(host)), "cuMemcpyHtoD");
	for (i = 0; i < iterations; i++)
		check(cuLaunchKernel(function, ELEMENTS / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
		      "cuLaunchKernel");
	check(cuCtxSynchronize(), "cuCtxSynchronize");
	check(cuMemcpyDtoH(host, c, sizeof(host)), "cuMemcpyDtoH");
	check(cuMemFree(a), "cuMemFree");
	check(cuMemFree(b), "cuMemFree");
	check(cuMemFree(c), "cuMemFree");
	check(cuModuleUnload(module), "cuModuleUnload");
}

static void *own_context(void *arg)
{
	CUcontext context;

	(void)arg;
	check(cuCtxCreate(&context, NULL, 0, device), "cuCtxCreate");
	work();
	check(cuCtxDestroy(context), "cuCtxDestroy");
	return NULL;
}

static void *primary_context(void *arg)
{
	CUcontext context, popped;

	(void)arg;
	check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
	check(cuCtxPushCurrent(context), "cuCtxPushCurrent");
	work();
	check(cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
	check(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
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
	check(cuInit(0), "cuInit");
	check(cuDeviceGet(&device, 0), "cuDeviceGet");
	if (pthread_create(&threads[0], NULL, own_context, NULL) ||
	    pthread_create(&threads[1], NULL, primary_context, NULL))
		return 1;
	pthread_join(threads[0], NULL);
	pthread_join(threads[1], NULL);
	printf("two_contexts: pid=%d device=0 launches=%ld allocs=6 htod=4 dtoh=2 copy_bytes=%zu\n",
	       getpid(), 2 * iterations, 6 * ELEMENTS * sizeof(float));
	return 0;
}
