// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * vec_add in a shared library as nvcc builds CUDA code: the fatbin in the
 * library's .nv_fatbin section, and host code that registers it when the
 * library loads (__cudaRegisterFatBinary, __cudaRegisterFunction). Built
 * twice (gpu/CMakeLists.txt): the cubin stored as it is, and compressed.
 * module_loads' cudart steps stand in for cudart: they take the cubin for
 * the device from the registered fatbin and load it, as cudart 13 does.
 */
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}
