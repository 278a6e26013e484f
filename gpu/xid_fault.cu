// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * xid_fault: a kernel that writes through a bad device pointer, so the GPU
 * raises an MMU fault (an Xid) that kills only this process's context.
 * For checking that cuprobe attributes the Xid to this process and to the
 * kernel it had in flight (tests/gpu/timeline_check.sh).
 *
 * usage: xid_fault
 * Prints "xid_fault: pid=P" first, then the error the faulting sync
 * returned, and exits 0 when that sync failed as expected.
 */
#include <cstdio>
#include <unistd.h>

#include <cuda_runtime.h>

__global__ void write_through_bad_pointer(int *bad)
{
	bad[threadIdx.x * 4096] = 42;
}

__global__ void innocent_neighbour(int *ok)
{
	ok[threadIdx.x] = 1;
}

int main()
{
	int *ok = nullptr;
	cudaStream_t other;

	printf("xid_fault: pid=%d\n", getpid());
	fflush(stdout);
	if (cudaMalloc(&ok, 1024 * sizeof(int)) != cudaSuccess || cudaStreamCreate(&other) != cudaSuccess)
		return 2;
	innocent_neighbour<<<1, 256, 0, other>>>(ok);
	/* The null page: never mapped, for the GPU as for the CPU (with HMM too). */
	write_through_bad_pointer<<<1, 32>>>(nullptr);
	cudaError_t err = cudaDeviceSynchronize();
	printf("xid_fault: sync returned %s\n", cudaGetErrorName(err));
	return err != cudaSuccess ? 0 : 1;
}
