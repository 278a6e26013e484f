/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The probe catalogue: every CUDA API cuprobe traces, one line each, and
 * every export of a traced family it deliberately leaves alone, with the
 * reason. Everything else is generated from these lists: the enum cp_api,
 * the API name table, the probe table (symbol -> BPF program, return
 * program, cookie) and the family of each API. Adding an API is one line.
 *
 * CP_DRIVER_APIS(P, X) and CP_RUNTIME_APIS(P, X):
 *   P(symbol, family, entry program, return program or none, cookie bits)
 *   X(symbol, family, why it is not probed)
 * CP_FAMILY_PREFIXES(F): F(family, export-name prefix). Every export of a
 * driver whose name starts with a family's prefix must appear in
 * CP_DRIVER_APIS, probed or excluded (tests/unit_catalogue.c checks this
 * against a real driver's export list; `cuprobe probes --lib FILE` lists
 * what a given libcuda exports in these families that is not probed).
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
	F(event, 1) F(module, 1) F(context, 1) F(name, 0) F(init, 0) F(runtime, 0)

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
	F(init, "cuInit")

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

/* Slots of enum cp_api that are not probed symbols: lifecycle and driver tracepoints. */
#define CP_PSEUDO_APIS(S) S(sched_process_fork) S(sched_process_exit) S(driver_mapped) S(nvidia_dev_xid)

#endif /* CUPROBE_CATALOGUE_H */
