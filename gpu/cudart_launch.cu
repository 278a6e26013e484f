// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cudart_launch: exercises the runtime API launch path, cudaLaunchKernel
 * in the shared libcudart.so.13, which cuprobe traces (CP_EV_RT_LAUNCH).
 *
 * usage: cudart_launch ATTEMPTS [--direct]
 * prints: cudart_launch: pid=P stub=0xADDR kernel=_Z15rt_probe_kernelPfi attempts=N errors=E
 *
 * On a machine without a driver every launch fails (the runtime cannot
 * initialize); that is expected and only counted, and the program exits 0.
 *
 * How <<<>>> reaches cudaLaunchKernel with CUDA 13.0 (checked with gdb):
 * the host stub nvcc generates calls __cudaGetKernel(&handle, stub) once,
 * then __cudaLaunchKernel(handle, ...) on every launch, and
 * __cudaLaunchKernel is a tail jump to cudaLaunchKernel. So a uprobe on
 * cudaLaunchKernel fires once per <<<>>>, driver or not. Its first
 * argument is the stub address only while the runtime has no driver
 * (__cudaGetKernel stores the stub in handle before it initializes, and
 * leaves it there when that fails); with a working driver it is the
 * cudaKernel_t that __cudaGetKernel returned. --direct calls
 * cudaLaunchKernel((const void *)rt_probe_kernel, ...) instead, whose
 * first argument is the stub address on every machine.
 *
 * It deliberately does not load the simulated driver (no RUNPATH to
 * lib/cuda-sim): the runtime needs driver entry points (cuGetProcAddress
 * and more) that the simulator does not provide.
 */
#include <cuda_runtime.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#define MAX_ATTEMPTS 1000000000L
#define PROBE_GRID 2
#define PROBE_BLOCK 64
#define PROBE_ELEMENTS (PROBE_GRID * PROBE_BLOCK)

/* Not extern "C": the tracer must cope with the mangled _Z15rt_probe_kernelPfi. */
__global__ void rt_probe_kernel(float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (out && i < n)
		out[i] = (float)i;
}

static void usage(void)
{
	fprintf(stderr, "usage: cudart_launch ATTEMPTS [--direct]\n"
			"  ATTEMPTS  launches of rt_probe_kernel<<<%d, %d>>> (0..%ld)\n"
			"  --direct  call cudaLaunchKernel with the stub instead of <<<>>>\n",
		PROBE_GRID, PROBE_BLOCK, MAX_ATTEMPTS);
	exit(2);
}

static cudaError_t launch_direct(float *out)
{
	int n = PROBE_ELEMENTS;
	void *args[] = { &out, &n };

	return cudaLaunchKernel((const void *)rt_probe_kernel, dim3(PROBE_GRID),
				dim3(PROBE_BLOCK), args, 0, 0);
}

int main(int argc, char **argv)
{
	long attempts = -1, errors = 0;
	bool direct = false;
	float *out = nullptr;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "--direct") == 0) {
			direct = true;
			continue;
		}
		if (attempts >= 0)
			usage();
		errno = 0;
		attempts = strtol(argv[i], &end, 10);
		if (!*argv[i] || errno || *end || attempts < 0 || attempts > MAX_ATTEMPTS)
			usage();
	}
	if (attempts < 0)
		usage();

	/* With a GPU the kernel gets somewhere to write; without one, nullptr. */
	if (cudaMalloc(&out, PROBE_ELEMENTS * sizeof(float)) != cudaSuccess)
		out = nullptr;

	for (long i = 0; i < attempts; i++) {
		cudaError_t rc;

		if (direct) {
			rc = launch_direct(out);
			(void)cudaGetLastError(); /* clear it, as <<<>>> users would */
		} else {
			rt_probe_kernel<<<PROBE_GRID, PROBE_BLOCK>>>(out, PROBE_ELEMENTS);
			rc = cudaGetLastError();
		}
		/* Failure is expected without a GPU: count it, do not stop. */
		if (rc != cudaSuccess)
			errors++;
	}

	/* Only worth reporting when some launch got through to a device. */
	if (errors < attempts) {
		cudaError_t rc = cudaDeviceSynchronize();

		if (rc != cudaSuccess)
			fprintf(stderr, "cudart_launch: cudaDeviceSynchronize failed: %s\n",
				cudaGetErrorName(rc));
	}
	if (out) {
		cudaError_t rc = cudaFree(out);

		if (rc != cudaSuccess)
			fprintf(stderr, "cudart_launch: cudaFree failed: %s\n",
				cudaGetErrorName(rc));
	}

	printf("cudart_launch: pid=%ld stub=0x%" PRIxPTR
	       " kernel=_Z15rt_probe_kernelPfi attempts=%ld errors=%ld\n",
	       (long)getpid(), (uintptr_t)(const void *)rt_probe_kernel, attempts,
	       errors);
	return 0;
}
