// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernels of the shapes the PTX rewriter must handle (tests/unit_ptx_rewrite.c),
 * compiled by nvcc -ptx at build time: templates in a namespace, no
 * parameters, early returns and an exit in inline assembly, launch bounds,
 * a struct passed by value, dynamic shared memory, a device function with
 * a ret of its own.
 */
namespace ns {
template <typename T> __global__ void scale(T *x, T a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	x[i] *= a;
}
template __global__ void scale<float>(float *, float, int);
template __global__ void scale<double>(double *, double, int);
}

__device__ __noinline__ int helper(int v)
{
	if (v < 0)
		return -v;
	return v * 2;
}

extern "C" __global__ void no_params(void) {}

extern "C" __global__ void __launch_bounds__(128, 2) early_exits(int *out, int n)
{
	int i = threadIdx.x;

	if (i == 0)
		return;
	if (i > n)
		asm volatile("exit;");
	out[i] = helper(i);
}

struct big {
	double v[9];
	char c;
};

__global__ void by_value(big b, int *out)
{
	out[threadIdx.x] = (int)b.v[threadIdx.x % 9] + b.c;
}

extern "C" __global__ void with_shared(float *x)
{
	extern __shared__ float tile[];

	tile[threadIdx.x] = x[threadIdx.x];
	__syncthreads();
	x[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}
