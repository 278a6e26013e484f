// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The kernel of gpu/vec_add_ptx.h as CUDA C, for the device-program tests:
 * nvcc builds it into fatbins (each compression mode), a cubin and PTX at
 * build time. The simulated driver runs it by its name, vec_add.
 */
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}
