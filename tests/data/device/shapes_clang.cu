// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernels for clang's NVPTX back-end (tests/unit_ptx_rewrite.c), built at
 * build time with -nocudainc (no CUDA headers: clang 14 predates the
 * toolkit's), so the rewriter also sees PTX that nvcc did not write.
 */
#define __global__ __attribute__((global))

extern "C" __global__ void clang_add(float *a, const float *b, int n)
{
	int i = __nvvm_read_ptx_sreg_tid_x() +
		__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x();

	if (i >= n)
		return;
	a[i] += b[i];
}

namespace ns {
template <int N> __global__ void unrolled(int *out)
{
	int i = __nvvm_read_ptx_sreg_tid_x();

	if (i & 1)
		return;
#pragma unroll
	for (int k = 0; k < N; k++)
		out[i] += k;
}
template __global__ void unrolled<4>(int *);
}
