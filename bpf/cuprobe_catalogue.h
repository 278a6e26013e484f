/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The probe catalogue: every CUDA and NCCL API cuprobe traces, one line
 * each, and every export of a traced family it deliberately leaves alone,
 * with the reason. Everything else is generated from these lists: the enum
 * cp_api, the API name table, the probe table of each library (symbol ->
 * BPF program, return program, cookie) and the family of each API. Adding
 * an API is one line.
 *
 * CP_LIBRARIES(L): L(library, its table, file-name prefix): the libraries
 * probed, each a file of its own (a uprobe goes on an inode). Each table,
 * CP_DRIVER_APIS(P, X), CP_RUNTIME_APIS(P, X) and CP_NCCL_APIS(P, X):
 *   P(symbol, family, entry program, return program or none, cookie bits)
 *   X(symbol, family, why it is not probed)
 * CP_FAMILY_PREFIXES(F): F(family, export-name prefix). Every export of a
 * library whose name starts with a family's prefix must appear in its
 * table, probed or excluded (tests/unit_catalogue.c checks this against a
 * real driver's export list; `cuprobe probes --lib FILE` lists what a given
 * libcuda or libnccl exports in these families that is not probed).
 * CP_ALIAS_PREFIXES(A): A(alias prefix, canonical prefix): exports that
 * are another name of the same function (NCCL's pnccl* profiling names are
 * ELF aliases of nccl*, one address): covered by the canonical line, never
 * probed twice.
 *
 * Cookie bits (cuprobe_events.h): CP_KIND(k) the family's own small enum
 * (memory kind, copy direction, sync kind, ...), CP_ASYNC (takes a stream),
 * CP_VARIANT(v) a decoding variant, and 1-based argument positions
 * (7 and up are the stack arguments): CP_ARG_A (destination, pointer or
 * handle), CP_ARG_B (source or value), CP_ARG_BYTES (size or count),
 * CP_ARG_STREAM, CP_ARG_C (pitch, height, ...).
 */
#ifndef CUPROBE_CATALOGUE_H
#define CUPROBE_CATALOGUE_H

/*
 * The families: one record type each. F(family, sdk): sdk 1 when users'
 * programs (cuprobe run) may attach to it, in SEC("cuda/FAMILY") and
 * SEC("cuda.return/FAMILY"), with struct cuda_FAMILY (cuprobe.bpf.h).
 */
#define CP_FAMILIES(F) \
	F(launch, 1) F(alloc, 1) F(free, 1) F(vmm, 1) F(copy, 1) F(memset, 1) F(sync, 1) \
	F(event, 1) F(module, 1) F(context, 1) F(name, 0) F(init, 0) F(runtime, 0) F(nccl, 1)

/*
 * The libraries: the driver (libcuda.so.1), the runtime (libcudart, or an
 * executable with static cudart: with --runtime) and NCCL (libnccl.so.2, a
 * system copy or a wheel's under site-packages/nvidia/nccl/lib). The
 * prefix is what the kernel side matches a mapped file's name against.
 */
#define CP_LIBRARIES(L) \
	L(driver, CP_DRIVER_APIS, "libcuda.so") \
	L(runtime, CP_RUNTIME_APIS, "libcudart.so") \
	L(nccl, CP_NCCL_APIS, "libnccl.so")

#define CP_FAMILY_PREFIXES(F) \
	F(launch, "cuLaunch") F(launch, "cuGraphLaunch") \
	F(alloc, "cuMemAlloc") F(alloc, "cuMemHostAlloc") \
	F(free, "cuMemFree") \
	F(vmm, "cuMemCreate") F(vmm, "cuMemRelease") F(vmm, "cuMemMap") F(vmm, "cuMemUnmap") \
	F(vmm, "cuMemAddress") F(vmm, "cuMemRetainAllocationHandle") \
	F(copy, "cuMemcpy") \
	F(memset, "cuMemset") \
	F(sync, "cuCtxSynchronize") F(sync, "cuStreamSynchronize") F(sync, "cuEventSynchronize") \
	F(sync, "cuStreamQuery") F(sync, "cuEventQuery") \
	F(event, "cuEventRecord") F(event, "cuStreamWaitEvent") \
	F(event, "cuCtxRecordEvent") F(event, "cuCtxWaitEvent") \
	F(event, "cuGreenCtxRecordEvent") F(event, "cuGreenCtxWaitEvent") \
	F(module, "cuModuleLoad") F(module, "cuModuleUnload") \
	F(module, "cuLibraryLoad") F(module, "cuLibraryUnload") \
	F(context, "cuDevicePrimaryCtxRetain") F(context, "cuCtxCreate") F(context, "cuCtxDestroy") \
	F(context, "cuCtxSetCurrent") F(context, "cuCtxPushCurrent") F(context, "cuCtxPopCurrent") \
	F(name, "cuModuleGetFunction") F(name, "cuLibraryGetKernel") F(name, "cuKernelGetFunction") \
	F(init, "cuInit") \
	F(nccl, "nccl")

#define CP_ALIAS_PREFIXES(A) A("pnccl", "nccl")

/* Shorthands for the argument layouts that repeat. */
#define CP_COPY_ARGS(dst, src, bytes) (CP_ARG_A(dst) | CP_ARG_B(src) | CP_ARG_BYTES(bytes))
#define CP_COPY_ASYNC_ARGS(dst, src, bytes, stream) \
	(CP_COPY_ARGS(dst, src, bytes) | CP_ASYNC | CP_ARG_STREAM(stream))
/* cuMemsetD<N>(dst, value, count[, stream]) and cuMemsetD2D<N>(dst, pitch, value, width, height[, stream]) */
#define CP_SET(size) (CP_KIND(size) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_BYTES(3))
#define CP_SET_ASYNC(size) (CP_SET(size) | CP_ASYNC | CP_ARG_STREAM(4))
#define CP_SET2D(size) (CP_KIND(size) | CP_VARIANT(CP_MEMSET_2D) | CP_ARG_A(1) | CP_ARG_C(2) | \
			CP_ARG_B(3) | CP_ARG_BYTES(4))
#define CP_SET2D_ASYNC(size) (CP_SET2D(size) | CP_ASYNC | CP_ARG_STREAM(6))

#define CP_LEGACY_32 "CUDA < 3.2 entry point with 32-bit sizes and pointers; cuGetProcAddress hands it out only to callers asking for CUDA 3.1 or older"

#define CP_DRIVER_APIS(P, X) \
	/* launches: kernels, cooperative kernels, host functions, graphs */ \
	P(cuLaunchKernel, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_KERNEL)) \
	P(cuLaunchKernel_ptsz, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_KERNEL)) \
	P(cuLaunchCooperativeKernel, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_COOPERATIVE)) \
	P(cuLaunchCooperativeKernel_ptsz, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_COOPERATIVE)) \
	P(cuLaunchKernelEx, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_EX)) \
	P(cuLaunchKernelEx_ptsz, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_EX)) \
	P(cuLaunchHostFunc, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_HOST_FUNC) | CP_ARG_A(2) | CP_ARG_STREAM(1)) \
	P(cuLaunchHostFunc_ptsz, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_HOST_FUNC) | CP_ARG_A(2) | CP_ARG_STREAM(1)) \
	P(cuGraphLaunch, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_GRAPH) | CP_ARG_A(1) | CP_ARG_STREAM(2)) \
	P(cuGraphLaunch_ptsz, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_GRAPH) | CP_ARG_A(1) | CP_ARG_STREAM(2)) \
	P(cuLaunch, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_LEGACY) | CP_ARG_A(1)) \
	P(cuLaunchGrid, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_LEGACY) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(3)) \
	P(cuLaunchGridAsync, launch, launch, none, CP_KIND(CP_LAUNCH_KIND_LEGACY) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(3) | CP_ARG_STREAM(4)) \
	X(cuLaunchCooperativeKernelMultiDevice, launch, "deprecated since CUDA 11.3 and unsupported on CUDA 12+ devices: takes an array of launches, not decoded") \
	/* allocations: the pointer is read when the call returns */ \
	P(cuMemAlloc_v2, alloc, call_entry, call_return, CP_KIND(CP_MEM_DEVICE) | CP_ARG_A(1) | CP_ARG_BYTES(2)) \
	P(cuMemAllocPitch_v2, alloc, call_entry, call_return, CP_KIND(CP_MEM_DEVICE) | CP_VARIANT(CP_ALLOC_PITCH) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(4)) \
	P(cuMemAllocManaged, alloc, call_entry, call_return, CP_KIND(CP_MEM_MANAGED) | CP_ARG_A(1) | CP_ARG_BYTES(2)) \
	P(cuMemAllocAsync, alloc, call_entry, call_return, CP_KIND(CP_MEM_DEVICE_ASYNC) | CP_ARG_A(1) | CP_ARG_BYTES(2) | CP_ASYNC | CP_ARG_STREAM(3)) \
	P(cuMemAllocAsync_ptsz, alloc, call_entry, call_return, CP_KIND(CP_MEM_DEVICE_ASYNC) | CP_ARG_A(1) | CP_ARG_BYTES(2) | CP_ASYNC | CP_ARG_STREAM(3)) \
	P(cuMemAllocFromPoolAsync, alloc, call_entry, call_return, CP_KIND(CP_MEM_DEVICE_ASYNC) | CP_ARG_A(1) | CP_ARG_BYTES(2) | CP_ARG_C(3) | CP_ASYNC | CP_ARG_STREAM(4)) \
	P(cuMemAllocFromPoolAsync_ptsz, alloc, call_entry, call_return, CP_KIND(CP_MEM_DEVICE_ASYNC) | CP_ARG_A(1) | CP_ARG_BYTES(2) | CP_ARG_C(3) | CP_ASYNC | CP_ARG_STREAM(4)) \
	P(cuMemAllocHost_v2, alloc, call_entry, call_return, CP_KIND(CP_MEM_HOST) | CP_ARG_A(1) | CP_ARG_BYTES(2)) \
	P(cuMemHostAlloc, alloc, call_entry, call_return, CP_KIND(CP_MEM_HOST) | CP_ARG_A(1) | CP_ARG_BYTES(2)) \
	X(cuMemAlloc, alloc, CP_LEGACY_32) \
	X(cuMemAllocPitch, alloc, CP_LEGACY_32) \
	X(cuMemAllocHost, alloc, CP_LEGACY_32) \
	/* frees */ \
	P(cuMemFree_v2, free, free_entry, none, CP_KIND(CP_MEM_DEVICE) | CP_ARG_A(1)) \
	P(cuMemFreeAsync, free, free_entry, none, CP_KIND(CP_MEM_DEVICE_ASYNC) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemFreeAsync_ptsz, free, free_entry, none, CP_KIND(CP_MEM_DEVICE_ASYNC) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemFreeHost, free, free_entry, none, CP_KIND(CP_MEM_HOST) | CP_ARG_A(1)) \
	X(cuMemFree, free, CP_LEGACY_32) \
	/* virtual memory management: physical handles, address ranges, mappings */ \
	P(cuMemCreate, vmm, call_entry, call_return, CP_KIND(CP_VMM_CREATE) | CP_ARG_A(1) | CP_ARG_BYTES(2) | CP_ARG_C(3)) \
	P(cuMemRelease, vmm, call_entry, call_return, CP_KIND(CP_VMM_RELEASE) | CP_ARG_C(1)) \
	P(cuMemRetainAllocationHandle, vmm, call_entry, call_return, CP_KIND(CP_VMM_RETAIN) | CP_ARG_A(1) | CP_ARG_B(2)) \
	P(cuMemMap, vmm, call_entry, call_return, CP_KIND(CP_VMM_MAP) | CP_ARG_B(1) | CP_ARG_BYTES(2) | CP_ARG_C(4)) \
	P(cuMemUnmap, vmm, call_entry, call_return, CP_KIND(CP_VMM_UNMAP) | CP_ARG_B(1) | CP_ARG_BYTES(2)) \
	P(cuMemAddressReserve, vmm, call_entry, call_return, CP_KIND(CP_VMM_RESERVE) | CP_ARG_A(1) | CP_ARG_BYTES(2)) \
	P(cuMemAddressFree, vmm, call_entry, call_return, CP_KIND(CP_VMM_ADDRESS_FREE) | CP_ARG_B(1) | CP_ARG_BYTES(2)) \
	X(cuMemMapArrayAsync, vmm, "maps tiles of sparse CUDA arrays and mipmaps, not linear device memory: no bytes change hands") \
	X(cuMemMapArrayAsync_ptsz, vmm, "maps tiles of sparse CUDA arrays and mipmaps, not linear device memory: no bytes change hands") \
	/*
	 * copies: 1D (pointers and arrays), peer, 2D, 3D, batches. The return of a
	 * blocking host<->device copy is timeline evidence (it is ordered after the
	 * legacy stream's work and returns once done); device-to-device copies do not
	 * synchronize with the host, so theirs is not.
	 */ \
	P(cuMemcpy, copy, copy, none, CP_KIND(CP_COPY_DEFAULT) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpy_ptds, copy, copy, none, CP_KIND(CP_COPY_DEFAULT) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpyAsync, copy, copy, none, CP_KIND(CP_COPY_DEFAULT) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyAsync_ptsz, copy, copy, none, CP_KIND(CP_COPY_DEFAULT) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyHtoD_v2, copy, copy, call_return, CP_KIND(CP_COPY_HTOD) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpyHtoD_v2_ptds, copy, copy, call_return, CP_KIND(CP_COPY_HTOD) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpyDtoH_v2, copy, copy, call_return, CP_KIND(CP_COPY_DTOH) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpyDtoH_v2_ptds, copy, copy, call_return, CP_KIND(CP_COPY_DTOH) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpyDtoD_v2, copy, copy, none, CP_KIND(CP_COPY_DTOD) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpyDtoD_v2_ptds, copy, copy, none, CP_KIND(CP_COPY_DTOD) | CP_COPY_ARGS(1, 2, 3)) \
	P(cuMemcpyHtoDAsync_v2, copy, copy, none, CP_KIND(CP_COPY_HTOD) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyHtoDAsync_v2_ptsz, copy, copy, none, CP_KIND(CP_COPY_HTOD) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyDtoHAsync_v2, copy, copy, none, CP_KIND(CP_COPY_DTOH) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyDtoHAsync_v2_ptsz, copy, copy, none, CP_KIND(CP_COPY_DTOH) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyDtoDAsync_v2, copy, copy, none, CP_KIND(CP_COPY_DTOD) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyDtoDAsync_v2_ptsz, copy, copy, none, CP_KIND(CP_COPY_DTOD) | CP_COPY_ASYNC_ARGS(1, 2, 3, 4)) \
	P(cuMemcpyPeer, copy, copy, none, CP_KIND(CP_COPY_PEER) | CP_COPY_ARGS(1, 3, 5)) \
	P(cuMemcpyPeer_ptds, copy, copy, none, CP_KIND(CP_COPY_PEER) | CP_COPY_ARGS(1, 3, 5)) \
	P(cuMemcpyPeerAsync, copy, copy, none, CP_KIND(CP_COPY_PEER) | CP_COPY_ASYNC_ARGS(1, 3, 5, 6)) \
	P(cuMemcpyPeerAsync_ptsz, copy, copy, none, CP_KIND(CP_COPY_PEER) | CP_COPY_ASYNC_ARGS(1, 3, 5, 6)) \
	P(cuMemcpyHtoA_v2, copy, copy, none, CP_KIND(CP_COPY_HTOA) | CP_COPY_ARGS(1, 3, 4)) \
	P(cuMemcpyHtoA_v2_ptds, copy, copy, none, CP_KIND(CP_COPY_HTOA) | CP_COPY_ARGS(1, 3, 4)) \
	P(cuMemcpyAtoH_v2, copy, copy, none, CP_KIND(CP_COPY_ATOH) | CP_COPY_ARGS(1, 2, 4)) \
	P(cuMemcpyAtoH_v2_ptds, copy, copy, none, CP_KIND(CP_COPY_ATOH) | CP_COPY_ARGS(1, 2, 4)) \
	P(cuMemcpyDtoA_v2, copy, copy, none, CP_KIND(CP_COPY_DTOA) | CP_COPY_ARGS(1, 3, 4)) \
	P(cuMemcpyDtoA_v2_ptds, copy, copy, none, CP_KIND(CP_COPY_DTOA) | CP_COPY_ARGS(1, 3, 4)) \
	P(cuMemcpyAtoD_v2, copy, copy, none, CP_KIND(CP_COPY_ATOD) | CP_COPY_ARGS(1, 2, 4)) \
	P(cuMemcpyAtoD_v2_ptds, copy, copy, none, CP_KIND(CP_COPY_ATOD) | CP_COPY_ARGS(1, 2, 4)) \
	P(cuMemcpyAtoA_v2, copy, copy, none, CP_KIND(CP_COPY_ATOA) | CP_COPY_ARGS(1, 3, 5)) \
	P(cuMemcpyAtoA_v2_ptds, copy, copy, none, CP_KIND(CP_COPY_ATOA) | CP_COPY_ARGS(1, 3, 5)) \
	P(cuMemcpyHtoAAsync_v2, copy, copy, none, CP_KIND(CP_COPY_HTOA) | CP_COPY_ASYNC_ARGS(1, 3, 4, 5)) \
	P(cuMemcpyHtoAAsync_v2_ptsz, copy, copy, none, CP_KIND(CP_COPY_HTOA) | CP_COPY_ASYNC_ARGS(1, 3, 4, 5)) \
	P(cuMemcpyAtoHAsync_v2, copy, copy, none, CP_KIND(CP_COPY_ATOH) | CP_COPY_ASYNC_ARGS(1, 2, 4, 5)) \
	P(cuMemcpyAtoHAsync_v2_ptsz, copy, copy, none, CP_KIND(CP_COPY_ATOH) | CP_COPY_ASYNC_ARGS(1, 2, 4, 5)) \
	P(cuMemcpy2D_v2, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_2D) | CP_ARG_A(1)) \
	P(cuMemcpy2D_v2_ptds, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_2D) | CP_ARG_A(1)) \
	P(cuMemcpy2DUnaligned_v2, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_2D) | CP_ARG_A(1)) \
	P(cuMemcpy2DUnaligned_v2_ptds, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_2D) | CP_ARG_A(1)) \
	P(cuMemcpy2DAsync_v2, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_2D) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemcpy2DAsync_v2_ptsz, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_2D) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemcpy3D_v2, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1)) \
	P(cuMemcpy3D_v2_ptds, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1)) \
	P(cuMemcpy3DAsync_v2, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemcpy3DAsync_v2_ptsz, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemcpy3DPeer, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1)) \
	P(cuMemcpy3DPeer_ptds, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1)) \
	P(cuMemcpy3DPeerAsync, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemcpy3DPeerAsync_ptsz, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_3D) | CP_ARG_A(1) | CP_ASYNC | CP_ARG_STREAM(2)) \
	P(cuMemcpyBatchAsync, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(3) | CP_ARG_BYTES(4) | CP_ASYNC | CP_ARG_STREAM(9)) \
	P(cuMemcpyBatchAsync_ptsz, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(3) | CP_ARG_BYTES(4) | CP_ASYNC | CP_ARG_STREAM(9)) \
	P(cuMemcpyBatchAsync_v2, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(3) | CP_ARG_BYTES(4) | CP_ASYNC | CP_ARG_STREAM(8)) \
	P(cuMemcpyBatchAsync_v2_ptsz, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(3) | CP_ARG_BYTES(4) | CP_ASYNC | CP_ARG_STREAM(8)) \
	P(cuMemcpy3DBatchAsync, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH_3D) | CP_ARG_BYTES(1) | CP_ASYNC | CP_ARG_STREAM(5)) \
	P(cuMemcpy3DBatchAsync_ptsz, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH_3D) | CP_ARG_BYTES(1) | CP_ASYNC | CP_ARG_STREAM(5)) \
	P(cuMemcpy3DBatchAsync_v2, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH_3D) | CP_ARG_BYTES(1) | CP_ASYNC | CP_ARG_STREAM(4)) \
	P(cuMemcpy3DBatchAsync_v2_ptsz, copy, copy, none, CP_VARIANT(CP_COPY_VARIANT_BATCH_3D) | CP_ARG_BYTES(1) | CP_ASYNC | CP_ARG_STREAM(4)) \
	X(cuMemcpyHtoD, copy, CP_LEGACY_32) X(cuMemcpyDtoH, copy, CP_LEGACY_32) \
	X(cuMemcpyDtoD, copy, CP_LEGACY_32) X(cuMemcpyHtoDAsync, copy, CP_LEGACY_32) \
	X(cuMemcpyDtoHAsync, copy, CP_LEGACY_32) X(cuMemcpyDtoDAsync, copy, CP_LEGACY_32) \
	X(cuMemcpyHtoA, copy, CP_LEGACY_32) X(cuMemcpyAtoH, copy, CP_LEGACY_32) \
	X(cuMemcpyDtoA, copy, CP_LEGACY_32) X(cuMemcpyAtoD, copy, CP_LEGACY_32) \
	X(cuMemcpyAtoA, copy, CP_LEGACY_32) X(cuMemcpyHtoAAsync, copy, CP_LEGACY_32) \
	X(cuMemcpyAtoHAsync, copy, CP_LEGACY_32) X(cuMemcpy2D, copy, CP_LEGACY_32) \
	X(cuMemcpy2DAsync, copy, CP_LEGACY_32) X(cuMemcpy2DUnaligned, copy, CP_LEGACY_32) \
	X(cuMemcpy3D, copy, CP_LEGACY_32) X(cuMemcpy3DAsync, copy, CP_LEGACY_32) \
	/* memset: 8, 16 and 32-bit elements, 1D and 2D */ \
	P(cuMemsetD8_v2, memset, memset_entry, none, CP_SET(1)) \
	P(cuMemsetD8_v2_ptds, memset, memset_entry, none, CP_SET(1)) \
	P(cuMemsetD16_v2, memset, memset_entry, none, CP_SET(2)) \
	P(cuMemsetD16_v2_ptds, memset, memset_entry, none, CP_SET(2)) \
	P(cuMemsetD32_v2, memset, memset_entry, none, CP_SET(4)) \
	P(cuMemsetD32_v2_ptds, memset, memset_entry, none, CP_SET(4)) \
	P(cuMemsetD8Async, memset, memset_entry, none, CP_SET_ASYNC(1)) \
	P(cuMemsetD8Async_ptsz, memset, memset_entry, none, CP_SET_ASYNC(1)) \
	P(cuMemsetD16Async, memset, memset_entry, none, CP_SET_ASYNC(2)) \
	P(cuMemsetD16Async_ptsz, memset, memset_entry, none, CP_SET_ASYNC(2)) \
	P(cuMemsetD32Async, memset, memset_entry, none, CP_SET_ASYNC(4)) \
	P(cuMemsetD32Async_ptsz, memset, memset_entry, none, CP_SET_ASYNC(4)) \
	P(cuMemsetD2D8_v2, memset, memset_entry, none, CP_SET2D(1)) \
	P(cuMemsetD2D8_v2_ptds, memset, memset_entry, none, CP_SET2D(1)) \
	P(cuMemsetD2D16_v2, memset, memset_entry, none, CP_SET2D(2)) \
	P(cuMemsetD2D16_v2_ptds, memset, memset_entry, none, CP_SET2D(2)) \
	P(cuMemsetD2D32_v2, memset, memset_entry, none, CP_SET2D(4)) \
	P(cuMemsetD2D32_v2_ptds, memset, memset_entry, none, CP_SET2D(4)) \
	P(cuMemsetD2D8Async, memset, memset_entry, none, CP_SET2D_ASYNC(1)) \
	P(cuMemsetD2D8Async_ptsz, memset, memset_entry, none, CP_SET2D_ASYNC(1)) \
	P(cuMemsetD2D16Async, memset, memset_entry, none, CP_SET2D_ASYNC(2)) \
	P(cuMemsetD2D16Async_ptsz, memset, memset_entry, none, CP_SET2D_ASYNC(2)) \
	P(cuMemsetD2D32Async, memset, memset_entry, none, CP_SET2D_ASYNC(4)) \
	P(cuMemsetD2D32Async_ptsz, memset, memset_entry, none, CP_SET2D_ASYNC(4)) \
	X(cuMemsetD8, memset, CP_LEGACY_32) X(cuMemsetD16, memset, CP_LEGACY_32) \
	X(cuMemsetD32, memset, CP_LEGACY_32) X(cuMemsetD2D8, memset, CP_LEGACY_32) \
	X(cuMemsetD2D16, memset, CP_LEGACY_32) X(cuMemsetD2D32, memset, CP_LEGACY_32) \
	/* synchronization and completion queries: recorded when they return */ \
	P(cuCtxSynchronize, sync, call_entry, call_return, CP_KIND(CP_SYNC_CONTEXT)) \
	P(cuCtxSynchronize_v2, sync, call_entry, call_return, CP_KIND(CP_SYNC_CONTEXT) | CP_ARG_A(1)) \
	P(cuStreamSynchronize, sync, call_entry, call_return, CP_KIND(CP_SYNC_STREAM) | CP_ARG_A(1)) \
	P(cuStreamSynchronize_ptsz, sync, call_entry, call_return, CP_KIND(CP_SYNC_STREAM) | CP_ARG_A(1)) \
	P(cuEventSynchronize, sync, call_entry, call_return, CP_KIND(CP_SYNC_EVENT) | CP_ARG_A(1)) \
	P(cuStreamQuery, sync, call_entry, call_return, CP_KIND(CP_SYNC_QUERY_STREAM) | CP_ARG_A(1)) \
	P(cuStreamQuery_ptsz, sync, call_entry, call_return, CP_KIND(CP_SYNC_QUERY_STREAM) | CP_ARG_A(1)) \
	P(cuEventQuery, sync, call_entry, call_return, CP_KIND(CP_SYNC_QUERY_EVENT) | CP_ARG_A(1)) \
	/* stream ordering through events */ \
	P(cuEventRecord, event, event, none, CP_KIND(CP_EVENT_RECORD) | CP_ARG_A(1) | CP_ARG_STREAM(2)) \
	P(cuEventRecord_ptsz, event, event, none, CP_KIND(CP_EVENT_RECORD) | CP_ARG_A(1) | CP_ARG_STREAM(2)) \
	P(cuEventRecordWithFlags, event, event, none, CP_KIND(CP_EVENT_RECORD) | CP_ARG_A(1) | CP_ARG_STREAM(2) | CP_ARG_C(3)) \
	P(cuEventRecordWithFlags_ptsz, event, event, none, CP_KIND(CP_EVENT_RECORD) | CP_ARG_A(1) | CP_ARG_STREAM(2) | CP_ARG_C(3)) \
	P(cuStreamWaitEvent, event, event, none, CP_KIND(CP_EVENT_WAIT) | CP_ARG_A(2) | CP_ARG_STREAM(1) | CP_ARG_C(3)) \
	P(cuStreamWaitEvent_ptsz, event, event, none, CP_KIND(CP_EVENT_WAIT) | CP_ARG_A(2) | CP_ARG_STREAM(1) | CP_ARG_C(3)) \
	/* context-wide: (context, event); the context goes where the stream would */ \
	P(cuCtxRecordEvent, event, event, none, CP_KIND(CP_EVENT_RECORD_CONTEXT) | CP_ARG_A(2) | CP_ARG_STREAM(1)) \
	P(cuCtxWaitEvent, event, event, none, CP_KIND(CP_EVENT_WAIT_CONTEXT) | CP_ARG_A(2) | CP_ARG_STREAM(1)) \
	P(cuGreenCtxRecordEvent, event, event, none, CP_KIND(CP_EVENT_RECORD_CONTEXT) | CP_ARG_A(2) | CP_ARG_STREAM(1)) \
	P(cuGreenCtxWaitEvent, event, event, none, CP_KIND(CP_EVENT_WAIT_CONTEXT) | CP_ARG_A(2) | CP_ARG_STREAM(1)) \
	/* modules and libraries: the handle is read when the call returns */ \
	P(cuModuleLoad, module, call_entry, call_return, CP_KIND(CP_MODULE_LOAD) | CP_VARIANT(CP_MODULE_FROM_FILE) | CP_ARG_A(1) | CP_ARG_B(2)) \
	P(cuModuleLoadData, module, call_entry, call_return, CP_KIND(CP_MODULE_LOAD) | CP_ARG_A(1)) \
	P(cuModuleLoadDataEx, module, call_entry, call_return, CP_KIND(CP_MODULE_LOAD) | CP_ARG_A(1)) \
	P(cuModuleLoadFatBinary, module, call_entry, call_return, CP_KIND(CP_MODULE_LOAD) | CP_ARG_A(1)) \
	P(cuModuleUnload, module, call_entry, call_return, CP_KIND(CP_MODULE_UNLOAD) | CP_ARG_C(1)) \
	P(cuLibraryLoadData, module, call_entry, call_return, CP_KIND(CP_LIBRARY_LOAD) | CP_ARG_A(1)) \
	P(cuLibraryLoadFromFile, module, call_entry, call_return, CP_KIND(CP_LIBRARY_LOAD) | CP_VARIANT(CP_MODULE_FROM_FILE) | CP_ARG_A(1) | CP_ARG_B(2)) \
	P(cuLibraryUnload, module, call_entry, call_return, CP_KIND(CP_LIBRARY_UNLOAD) | CP_ARG_C(1)) \
	/* contexts: which device a thread's work goes to (results read on return) */ \
	P(cuDevicePrimaryCtxRetain, context, call_entry, call_return, CP_KIND(CP_CONTEXT_RETAIN) | CP_ARG_A(1) | CP_ARG_C(2)) \
	P(cuCtxCreate, context, call_entry, call_return, CP_KIND(CP_CONTEXT_CREATE) | CP_ARG_A(1) | CP_ARG_C(3)) \
	P(cuCtxCreate_v2, context, call_entry, call_return, CP_KIND(CP_CONTEXT_CREATE) | CP_ARG_A(1) | CP_ARG_C(3)) \
	P(cuCtxCreate_v3, context, call_entry, call_return, CP_KIND(CP_CONTEXT_CREATE) | CP_ARG_A(1) | CP_ARG_C(5)) \
	P(cuCtxCreate_v4, context, call_entry, call_return, CP_KIND(CP_CONTEXT_CREATE) | CP_ARG_A(1) | CP_ARG_C(4)) \
	P(cuCtxDestroy, context, call_entry, call_return, CP_KIND(CP_CONTEXT_DESTROY) | CP_ARG_B(1)) \
	P(cuCtxDestroy_v2, context, call_entry, call_return, CP_KIND(CP_CONTEXT_DESTROY) | CP_ARG_B(1)) \
	P(cuCtxSetCurrent, context, call_entry, call_return, CP_KIND(CP_CONTEXT_SET) | CP_ARG_B(1)) \
	P(cuCtxPushCurrent, context, call_entry, call_return, CP_KIND(CP_CONTEXT_PUSH) | CP_ARG_B(1)) \
	P(cuCtxPushCurrent_v2, context, call_entry, call_return, CP_KIND(CP_CONTEXT_PUSH) | CP_ARG_B(1)) \
	P(cuCtxPopCurrent, context, call_entry, call_return, CP_KIND(CP_CONTEXT_POP) | CP_ARG_A(1)) \
	P(cuCtxPopCurrent_v2, context, call_entry, call_return, CP_KIND(CP_CONTEXT_POP) | CP_ARG_A(1)) \
	/* kernel names: the handle and the name are read when the call returns */ \
	P(cuModuleGetFunction, name, name_entry, name_return, CP_KIND(CP_NAME_LOOKUP)) \
	P(cuLibraryGetKernel, name, name_entry, name_return, CP_KIND(CP_NAME_LOOKUP)) \
	P(cuKernelGetFunction, name, name_entry, name_return, CP_KIND(CP_NAME_ALIAS)) \
	X(cuModuleGetFunctionCount, name, "returns how many functions a module has: no handle, no name") \
	X(cuLibraryGetKernelCount, name, "returns how many kernels a library has: no handle, no name") \
	P(cuInit, init, init_entry, none, 0)

/* Probed in libcudart (shared) or in an executable with static cudart, with --runtime. */
#define CP_RUNTIME_APIS(P, X) \
	P(cudaLaunchKernel, runtime, rt_launch, none, 0) \
	P(cudaLaunchKernel_ptsz, runtime, rt_launch, none, 0)

/*
 * NCCL (API of NCCL 2.28, nccl.h, checked against 2.28.9's exports,
 * tests/data/libnccl-2.28.9-exports.txt; the *Config and one-sided calls
 * are 2.29 and later: absent symbols are skipped). One family, one
 * record type: the kind is enum cp_nccl_op. The argument slots mean:
 *   A      the communicator; for calls that make one, the out pointer
 *   B      collectives and send/recv: the datatype; init: nranks; queries:
 *          the int the answer is written to
 *   BYTES  the count, as the call takes it (per rank for AllGather and
 *          ReduceScatter, per peer for AlltoAll, Gather and Scatter)
 *   C      the reduction op; init: the unique id (VARIANT: passed by value,
 *          128 bytes on the stack, or by pointer); ncclCommInitAll: the
 *          device list; split and shrink: the parent communicator
 *   D      root (Broadcast, Reduce, Gather, Scatter), peer (Send, Recv),
 *          the rank (init)
 *   STREAM the stream
 */
#define CP_NCCL(op, count, type, redop, root, comm, stream) \
	(CP_KIND(op) | CP_ARG_BYTES(count) | CP_ARG_B(type) | CP_ARG_C(redop) | CP_ARG_D(root) | \
	 CP_ARG_A(comm) | CP_ARG_STREAM(stream) | CP_ASYNC)
#define CP_NCCL_INIT_BY_VALUE (CP_KIND(CP_NCCL_COMM_INIT) | CP_VARIANT(CP_NCCL_ID_BY_VALUE) | \
			       CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(7) | CP_ARG_D(3))
#define CP_NCCL_QUERY(op) (CP_KIND(op) | CP_ARG_A(1) | CP_ARG_B(2))
#define CP_NCCL_ON(op) (CP_KIND(op) | CP_ARG_A(1))
#define CP_NCCL_NO_WORK "moves no data and touches no communicator's state that the records need"
#define CP_NCCL_DEVICE_API "the device API's host side: the program's own kernels move the data, and the launch probes see them"

#define CP_NCCL_APIS(P, X) \
	/* collectives: (sendbuff, recvbuff, count, datatype, ...); their Config forms take one more */ \
	P(ncclAllReduce, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_ALL_REDUCE, 3, 4, 5, 0, 6, 7)) \
	P(ncclAllReduceConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_ALL_REDUCE, 3, 4, 5, 0, 6, 7)) \
	P(ncclBroadcast, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_BROADCAST, 3, 4, 0, 5, 6, 7)) \
	P(ncclBroadcastConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_BROADCAST, 3, 4, 0, 5, 6, 7)) \
	/* ncclBcast(buff, count, datatype, root, comm, stream): NCCL implements it by calling ncclBroadcast */ \
	P(ncclBcast, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_BROADCAST, 2, 3, 0, 4, 5, 6)) \
	P(ncclReduce, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_REDUCE, 3, 4, 5, 6, 7, 8)) \
	P(ncclReduceConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_REDUCE, 3, 4, 5, 6, 7, 8)) \
	P(ncclAllGather, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_ALL_GATHER, 3, 4, 0, 0, 5, 6)) \
	P(ncclAllGatherConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_ALL_GATHER, 3, 4, 0, 0, 5, 6)) \
	P(ncclReduceScatter, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_REDUCE_SCATTER, 3, 4, 5, 0, 6, 7)) \
	P(ncclReduceScatterConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_REDUCE_SCATTER, 3, 4, 5, 0, 6, 7)) \
	P(ncclAlltoAll, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_ALL_TO_ALL, 3, 4, 0, 0, 5, 6)) \
	P(ncclAlltoAllConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_ALL_TO_ALL, 3, 4, 0, 0, 5, 6)) \
	/* RCCL's spelling of the same call */ \
	P(ncclAllToAll, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_ALL_TO_ALL, 3, 4, 0, 0, 5, 6)) \
	P(ncclGather, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_GATHER, 3, 4, 0, 5, 6, 7)) \
	P(ncclGatherConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_GATHER, 3, 4, 0, 5, 6, 7)) \
	P(ncclScatter, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_SCATTER, 3, 4, 0, 5, 6, 7)) \
	P(ncclScatterConfig, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_SCATTER, 3, 4, 0, 5, 6, 7)) \
	/* point to point: (buff, count, datatype, peer, comm, stream) */ \
	P(ncclSend, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_SEND, 2, 3, 0, 4, 5, 6)) \
	P(ncclRecv, nccl, nccl_entry, nccl_return, CP_NCCL(CP_NCCL_RECV, 2, 3, 0, 4, 5, 6)) \
	X(ncclPutSignal, nccl, "one-sided put into a peer's registered window (NCCL 2.29+): not decoded yet") \
	X(ncclSignal, nccl, "one-sided signal (NCCL 2.29+): moves no data; not decoded yet") \
	X(ncclWaitSignal, nccl, "one-sided wait (NCCL 2.29+): moves no data; not decoded yet") \
	/* groups: the work of the calls between them is launched by ncclGroupEnd */ \
	P(ncclGroupStart, nccl, nccl_entry, nccl_return, CP_KIND(CP_NCCL_GROUP_START)) \
	P(ncclGroupEnd, nccl, nccl_entry, nccl_return, CP_KIND(CP_NCCL_GROUP_END)) \
	X(ncclGroupSimulateEnd, nccl, "estimates a group's time and launches nothing") \
	/* communicators: made, split, ended (what they are is read when the call returns) */ \
	P(ncclCommInitRank, nccl, nccl_entry, nccl_return, CP_NCCL_INIT_BY_VALUE) \
	P(ncclCommInitRankConfig, nccl, nccl_entry, nccl_return, CP_NCCL_INIT_BY_VALUE) \
	P(ncclCommInitRankScalable, nccl, nccl_entry, nccl_return, CP_KIND(CP_NCCL_COMM_INIT) | \
	  CP_VARIANT(CP_NCCL_ID_BY_POINTER) | CP_ARG_A(1) | CP_ARG_B(2) | CP_ARG_C(5) | CP_ARG_D(3)) \
	P(ncclCommInitAll, nccl, nccl_entry, nccl_return, CP_KIND(CP_NCCL_COMM_INIT_ALL) | CP_ARG_A(1) | \
	  CP_ARG_B(2) | CP_ARG_C(3)) \
	P(ncclCommSplit, nccl, nccl_entry, nccl_return, CP_KIND(CP_NCCL_COMM_SPLIT) | CP_ARG_A(4) | CP_ARG_C(1)) \
	P(ncclCommShrink, nccl, nccl_entry, nccl_return, CP_KIND(CP_NCCL_COMM_SHRINK) | CP_ARG_A(4) | CP_ARG_C(1)) \
	X(ncclCommGrow, nccl, "adds ranks to a communicator (NCCL 2.29+): not decoded yet") \
	X(ncclCommGetUniqueId, nccl, "makes the id a later ncclCommGrow uses: no communicator yet") \
	P(ncclCommFinalize, nccl, nccl_entry, nccl_return, CP_NCCL_ON(CP_NCCL_COMM_FINALIZE)) \
	P(ncclCommDestroy, nccl, nccl_entry, nccl_return, CP_NCCL_ON(CP_NCCL_COMM_DESTROY)) \
	P(ncclCommAbort, nccl, nccl_entry, nccl_return, CP_NCCL_ON(CP_NCCL_COMM_ABORT)) \
	P(ncclCommRevoke, nccl, nccl_entry, nccl_return, CP_NCCL_ON(CP_NCCL_COMM_REVOKE)) \
	/* queries: the answer, read on return, also fills in a communicator made before tracing began */ \
	P(ncclCommCount, nccl, nccl_entry, nccl_return, CP_NCCL_QUERY(CP_NCCL_COMM_COUNT)) \
	P(ncclCommUserRank, nccl, nccl_entry, nccl_return, CP_NCCL_QUERY(CP_NCCL_COMM_USER_RANK)) \
	P(ncclCommCuDevice, nccl, nccl_entry, nccl_return, CP_NCCL_QUERY(CP_NCCL_COMM_CU_DEVICE)) \
	X(ncclCommGetAsyncError, nccl, "polled by frameworks' watchdog threads (PyTorch's, every few ms per communicator): never a per-call probe") \
	X(ncclGetVersion, nccl, CP_NCCL_NO_WORK) \
	X(ncclGetUniqueId, nccl, "makes the id that ncclCommInitRank takes, where it is read") \
	X(ncclGetErrorString, nccl, CP_NCCL_NO_WORK) \
	X(ncclGetLastError, nccl, CP_NCCL_NO_WORK) \
	X(ncclResetDebugInit, nccl, CP_NCCL_NO_WORK) \
	X(ncclRedOpCreatePreMulSum, nccl, "makes a reduction op handle: it is recorded as the op of each collective that uses it") \
	X(ncclRedOpDestroy, nccl, CP_NCCL_NO_WORK) \
	X(ncclMemAlloc, nccl, "allocates through the driver's cuMem* calls, which the driver probes record") \
	X(ncclMemFree, nccl, "frees through the driver's cuMem* calls, which the driver probes record") \
	X(ncclCommRegister, nccl, "registers a buffer for zero-copy: no data moves") \
	X(ncclCommDeregister, nccl, CP_NCCL_NO_WORK) \
	X(ncclCommWindowRegister, nccl, "registers a symmetric memory window: no data moves") \
	X(ncclCommWindowDeregister, nccl, CP_NCCL_NO_WORK) \
	X(ncclWinGetUserPtr, nccl, CP_NCCL_NO_WORK) \
	X(ncclCommSuspend, nccl, "releases a communicator's memory through the driver's calls, which the driver probes record") \
	X(ncclCommResume, nccl, "maps a communicator's memory back through the driver's calls, which the driver probes record") \
	X(ncclCommMemStats, nccl, CP_NCCL_NO_WORK) \
	X(ncclParamBind, nccl, CP_NCCL_NO_WORK) X(ncclParamGetI8, nccl, CP_NCCL_NO_WORK) \
	X(ncclParamGetI16, nccl, CP_NCCL_NO_WORK) X(ncclParamGetI32, nccl, CP_NCCL_NO_WORK) \
	X(ncclParamGetI64, nccl, CP_NCCL_NO_WORK) X(ncclParamGetU8, nccl, CP_NCCL_NO_WORK) \
	X(ncclParamGetU16, nccl, CP_NCCL_NO_WORK) X(ncclParamGetU32, nccl, CP_NCCL_NO_WORK) \
	X(ncclParamGetU64, nccl, CP_NCCL_NO_WORK) X(ncclParamGetStr, nccl, CP_NCCL_NO_WORK) \
	X(ncclParamGet, nccl, CP_NCCL_NO_WORK) X(ncclParamGetParameter, nccl, CP_NCCL_NO_WORK) \
	X(ncclParamGetAllParameterKeys, nccl, CP_NCCL_NO_WORK) X(ncclParamDumpAll, nccl, CP_NCCL_NO_WORK) \
	X(ncclResetDebugInitInternal, nccl, CP_NCCL_NO_WORK) \
	/* the device API (2.28): communicators and teams for kernels the program writes and launches */ \
	X(ncclDevCommCreate, nccl, CP_NCCL_DEVICE_API) X(ncclDevCommDestroy, nccl, CP_NCCL_DEVICE_API) \
	X(ncclTeamWorld, nccl, CP_NCCL_DEVICE_API) X(ncclTeamLsa, nccl, CP_NCCL_DEVICE_API) \
	X(ncclTeamRail, nccl, CP_NCCL_DEVICE_API) X(ncclTeamRankToWorld, nccl, CP_NCCL_DEVICE_API) \
	X(ncclTeamRankToLsa, nccl, CP_NCCL_DEVICE_API) \
	X(ncclLsaBarrierCreateRequirement, nccl, CP_NCCL_DEVICE_API) \
	X(ncclGinBarrierCreateRequirement, nccl, CP_NCCL_DEVICE_API) \
	X(ncclLLA2ACreateRequirement, nccl, CP_NCCL_DEVICE_API) X(ncclLLA2ACalcSlots, nccl, CP_NCCL_DEVICE_API)

/* Slots of enum cp_api that are not probed symbols: lifecycle and driver tracepoints. */
#define CP_PSEUDO_APIS(S) S(sched_process_fork) S(sched_process_exit) S(driver_mapped) S(nvidia_dev_xid)

#endif /* CUPROBE_CATALOGUE_H */
