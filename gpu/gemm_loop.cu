// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * gemm_loop: a cuBLAS workload for bench/compare.c on a GPU machine.
 * cublasSgemm of N x N matrices, ITERATIONS times on one stream, then one
 * cudaDeviceSynchronize; cuBLAS launches its kernels with cuLaunchKernelEx.
 *
 * usage: gemm_loop ITERATIONS [N]
 * prints: gemm_loop: iterations=I n=N ns_per_call=X result=ok
 * (ns_per_call: the loop and the final synchronize, divided by ITERATIONS)
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "workload_args.h"

static void check_cuda(cudaError_t rc, const char *call)
{
	if (rc == cudaSuccess)
		return;
	fprintf(stderr, "gemm_loop: %s failed: %s\n", call, cudaGetErrorName(rc));
	exit(EXIT_FAILURE);
}

static void check_cublas(cublasStatus_t rc, const char *call)
{
	if (rc == CUBLAS_STATUS_SUCCESS)
		return;
	fprintf(stderr, "gemm_loop: %s failed: cublasStatus %d\n", call, (int)rc);
	exit(EXIT_FAILURE);
}

int main(int argc, char **argv)
{
	long iterations, n = 256;
	const float alpha = 1.0f, beta = 0.0f;
	float *a, *b, *c;
	cublasHandle_t handle;

	if (argc < 2 || argc > 3 || !parse_long(argv[1], 0, 1000000000L, &iterations) ||
	    (argc == 3 && !parse_long(argv[2], 1, 16384, &n))) {
		fprintf(stderr, "usage: gemm_loop ITERATIONS [N]\n");
		return 2;
	}
	size_t bytes = (size_t)n * (size_t)n * sizeof(float);
	std::vector<float> host((size_t)n * (size_t)n, 1.0f);

	check_cuda(cudaMalloc(&a, bytes), "cudaMalloc");
	check_cuda(cudaMalloc(&b, bytes), "cudaMalloc");
	check_cuda(cudaMalloc(&c, bytes), "cudaMalloc");
	check_cuda(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
	check_cuda(cudaMemcpy(b, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
	check_cublas(cublasCreate(&handle), "cublasCreate");
	/* One untimed call: cuBLAS loads its kernels on first use. */
	check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &alpha, a,
				 (int)n, b, (int)n, &beta, c, (int)n), "cublasSgemm");
	check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

	auto start = std::chrono::steady_clock::now();
	for (long i = 0; i < iterations; i++)
		check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n,
					 &alpha, a, (int)n, b, (int)n, &beta, c, (int)n), "cublasSgemm");
	check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	double elapsed = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();

	check_cuda(cudaMemcpy(host.data(), c, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
	bool ok = host[0] == (float)n && host[host.size() - 1] == (float)n;
	printf("gemm_loop: iterations=%ld n=%ld ns_per_call=%.1f result=%s\n", iterations, n,
	       iterations ? elapsed / (double)iterations : 0.0, ok ? "ok" : "wrong");
	cublasDestroy(handle);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	return ok ? 0 : 1;
}
