// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * vec_add: a CUDA runtime API workload. Built twice, against the static
 * cudart (vec_add) and the shared one (vec_add_shared), so the tracer is
 * tested on both ways the runtime reaches the driver.
 *
 * usage: vec_add ITERATIONS [ELEMENTS]
 * prints: vec_add: launches=L elements=N ns_per_call=T result=ok
 * (T: the launch loop and its synchronize, divided by L)
 */
#include <cuda_runtime.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "workload_args.h"

#define BLOCK_THREADS 256
#define DEFAULT_ELEMENTS 1024L
#define MAX_ELEMENTS (1L << 26)
#define MAX_ITERATIONS 1000000000L

__global__ void vec_add_kernel(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}

static void check(cudaError_t rc, const char *call)
{
	if (rc == cudaSuccess)
		return;
	fprintf(stderr, "vec_add: %s failed: %s: %s\n", call, cudaGetErrorName(rc),
		cudaGetErrorString(rc));
	exit(EXIT_FAILURE);
}

int main(int argc, char **argv)
{
	long iterations, elements = DEFAULT_ELEMENTS;

	if (argc < 2 || argc > 3 ||
	    !parse_long(argv[1], 0, MAX_ITERATIONS, &iterations) ||
	    (argc == 3 && !parse_long(argv[2], 1, MAX_ELEMENTS, &elements))) {
		fprintf(stderr, "usage: vec_add ITERATIONS [ELEMENTS]\n"
				"  ITERATIONS 0..%ld, ELEMENTS 1..%ld (default %ld)\n",
			MAX_ITERATIONS, MAX_ELEMENTS, DEFAULT_ELEMENTS);
		return 2;
	}

	const int n = (int)elements;
	const size_t bytes = (size_t)n * sizeof(float);
	const unsigned int grid = (unsigned int)((n + BLOCK_THREADS - 1) / BLOCK_THREADS);
	std::vector<float> a(n), b(n), c(n);
	float *dev_a, *dev_b, *dev_c;

	for (int i = 0; i < n; i++) {
		/* Small integers: the sums are exact. */
		a[i] = (float)(i % 1000);
		b[i] = (float)(2 * (i % 1000) + 1);
	}

	check(cudaMalloc(&dev_a, bytes), "cudaMalloc");
	check(cudaMalloc(&dev_b, bytes), "cudaMalloc");
	check(cudaMalloc(&dev_c, bytes), "cudaMalloc");
	check(cudaMemcpy(dev_a, a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
	check(cudaMemcpy(dev_b, b.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
	/* c starts as a copy of a, so a kernel that never ran fails the check. */
	check(cudaMemcpy(dev_c, dev_a, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");

	/* Timed from the first launch to the end of the synchronize: launch-bound. */
	auto started = std::chrono::steady_clock::now();
	for (long i = 0; i < iterations; i++) {
		vec_add_kernel<<<grid, BLOCK_THREADS>>>(dev_a, dev_b, dev_c, n);
		check(cudaGetLastError(), "vec_add_kernel<<<>>>");
	}
	check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	double loop_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() -
								   started).count();
	check(cudaMemcpy(c.data(), dev_c, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");

	for (int i = 0; i < n; i++) {
		float expected = iterations ? a[i] + b[i] : a[i];

		if (c[i] != expected) {
			fprintf(stderr, "vec_add: wrong result at element %d: %g, expected %g\n",
				i, (double)c[i], (double)expected);
			return EXIT_FAILURE;
		}
	}

	check(cudaFree(dev_a), "cudaFree");
	check(cudaFree(dev_b), "cudaFree");
	check(cudaFree(dev_c), "cudaFree");
	printf("vec_add: launches=%ld elements=%d ns_per_call=%.1f result=ok\n", iterations, n,
	       iterations ? loop_ns / iterations : 0.0);
	return 0;
}
