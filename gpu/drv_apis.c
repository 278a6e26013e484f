// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * drv_apis: one known number of calls of every driver-API family cuprobe's
 * catalogue covers (launch kinds, allocations and pools, frees, VMM,
 * memsets, 1D/2D/3D/peer/batch copies, syncs, queries, events, modules),
 * each counted under the name the driver exports it as. At the end it
 * prints one line per API ("drv_apis: api=NAME calls=N") and a summary with
 * the device memory it had live at its peak, so a test can compare what it
 * did with what cuprobe saw.
 *
 * Like drv_launch, its RUNPATH finds the simulated driver in the build tree;
 * copied alone to a GPU machine it uses the real one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <cuda.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_setup.h"
#include "vec_add_ptx.h"

#define ELEMENTS 1024
#define BYTES (ELEMENTS * sizeof(float))
#define MAX_APIS 96

static const char *program = "drv_apis";

struct api_count {
	const char *api;
	unsigned long calls;
};

static struct api_count counts[MAX_APIS];
static size_t api_count;
static unsigned long long live_device, peak_device, live_host;

/* One more call of api (its exported symbol), which must succeed. */
static void check(CUresult rc, const char *api)
{
	size_t i;

	for (i = 0; i < api_count && strcmp(counts[i].api, api); i++)
		;
	if (i == api_count) {
		if (api_count == MAX_APIS) {
			fprintf(stderr, "%s: too many APIs\n", program);
			exit(1);
		}
		counts[api_count++].api = api;
	}
	counts[i].calls++;
	if (!cu_ok(rc, api))
		exit(1);
}

static void device_allocated(long long bytes)
{
	live_device += bytes;
	if (live_device > peak_device)
		peak_device = live_device;
}

static void host_function(void *data)
{
	(*(int *)data)++;
}

/* Sorted by name, so the output is stable. */
static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct api_count *)a)->api, ((const struct api_count *)b)->api);
}

static void memsets(CUdeviceptr buffer, CUstream stream)
{
	/* 1D over the buffer, 2D as 8 rows of 128 bytes with a pitch of 512. */
	check(cuMemsetD8(buffer, 1, BYTES), "cuMemsetD8_v2");
	check(cuMemsetD16(buffer, 2, BYTES / 2), "cuMemsetD16_v2");
	check(cuMemsetD32(buffer, 3, BYTES / 4), "cuMemsetD32_v2");
	check(cuMemsetD8Async(buffer, 4, BYTES, stream), "cuMemsetD8Async");
	check(cuMemsetD16Async(buffer, 5, BYTES / 2, stream), "cuMemsetD16Async");
	check(cuMemsetD32Async(buffer, 6, BYTES / 4, stream), "cuMemsetD32Async");
	check(cuMemsetD2D8(buffer, 512, 7, 128, 8), "cuMemsetD2D8_v2");
	check(cuMemsetD2D16(buffer, 512, 8, 64, 8), "cuMemsetD2D16_v2");
	check(cuMemsetD2D32(buffer, 512, 9, 32, 8), "cuMemsetD2D32_v2");
	check(cuMemsetD2D8Async(buffer, 512, 10, 128, 8, stream), "cuMemsetD2D8Async");
	check(cuMemsetD2D16Async(buffer, 512, 11, 64, 8, stream), "cuMemsetD2D16Async");
	check(cuMemsetD2D32Async(buffer, 512, 12, 32, 8, stream), "cuMemsetD2D32Async");
}

static void copies(CUcontext context, CUdeviceptr a, CUdeviceptr b, float *host, CUstream stream)
{
	CUDA_MEMCPY2D copy2d = {
		.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a, .srcPitch = 512,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = host, .dstPitch = 512,
		.WidthInBytes = 256, .Height = 8,
	};
	CUDA_MEMCPY3D copy3d = {
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = 256, .srcHeight = 4,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = b, .dstPitch = 256, .dstHeight = 4,
		.WidthInBytes = 128, .Height = 4, .Depth = 2,
	};
	CUdeviceptr dsts[3] = { b, b + 1024, b + 2048 }, srcs[3] = { a, a + 1024, a + 2048 };
	size_t sizes[3] = { 1000, 512, 24 };
	CUmemcpyAttributes attrs = {
		.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
		.srcLocHint = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
		.dstLocHint = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	size_t attrs_index = 0;

	check(cuMemcpy2D(&copy2d), "cuMemcpy2D_v2");
	check(cuMemcpy2DUnaligned(&copy2d), "cuMemcpy2DUnaligned_v2");
	check(cuMemcpy2DAsync(&copy2d, stream), "cuMemcpy2DAsync_v2");
	check(cuMemcpy3D(&copy3d), "cuMemcpy3D_v2");
	check(cuMemcpy3DAsync(&copy3d, stream), "cuMemcpy3DAsync_v2");
	check(cuMemcpyPeer(b, context, a, context, BYTES), "cuMemcpyPeer");
	check(cuMemcpyPeerAsync(b, context, a, context, BYTES, stream), "cuMemcpyPeerAsync");
	check(cuMemcpyAsync(b, a, BYTES, stream), "cuMemcpyAsync");
	check(cuMemcpyHtoDAsync(a, host, BYTES, stream), "cuMemcpyHtoDAsync_v2");
	check(cuMemcpyDtoHAsync(host, a, BYTES, stream), "cuMemcpyDtoHAsync_v2");
	check(cuMemcpyDtoDAsync(b, a, BYTES, stream), "cuMemcpyDtoDAsync_v2");
	check(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &attrs, &attrs_index, 1, stream),
	      "cuMemcpyBatchAsync_v2");
}

static void syncs_and_events(CUcontext context, CUstream stream)
{
	CUevent event;

	check(cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
	check(cuEventRecord(event, stream), "cuEventRecord");
	check(cuEventRecordWithFlags(event, stream, CU_EVENT_RECORD_DEFAULT), "cuEventRecordWithFlags");
	check(cuStreamWaitEvent(NULL, event, 0), "cuStreamWaitEvent");
	check(cuCtxRecordEvent(context, event), "cuCtxRecordEvent");
	check(cuCtxWaitEvent(context, event), "cuCtxWaitEvent");
	check(cuEventQuery(event), "cuEventQuery");
	check(cuStreamQuery(stream), "cuStreamQuery");
	check(cuEventSynchronize(event), "cuEventSynchronize");
	check(cuStreamSynchronize(stream), "cuStreamSynchronize");
	check(cuCtxSynchronize(), "cuCtxSynchronize");
	check(cuCtxSynchronize_v2(NULL), "cuCtxSynchronize_v2");
	check(cuEventDestroy(event), "cuEventDestroy_v2");
}

static void allocations(CUstream stream)
{
	CUdeviceptr pitched, managed, async, pooled;
	CUmemoryPool pool;
	size_t pitch;
	void *host;

	check(cuMemAllocPitch(&pitched, &pitch, 1000, 16, 4), "cuMemAllocPitch_v2");
	device_allocated((long long)(pitch * 16));
	check(cuMemAllocManaged(&managed, 8192, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
	device_allocated(8192);
	check(cuMemAllocAsync(&async, 4096, stream), "cuMemAllocAsync");
	device_allocated(4096);
	check(cuDeviceGetDefaultMemPool(&pool, 0), "cuDeviceGetDefaultMemPool");
	check(cuMemAllocFromPoolAsync(&pooled, 12288, pool, stream), "cuMemAllocFromPoolAsync");
	device_allocated(12288);
	check(cuMemHostAlloc(&host, 65536, 0), "cuMemHostAlloc");
	live_host += 65536;

	check(cuMemFree(pitched), "cuMemFree_v2");
	device_allocated(-(long long)(pitch * 16));
	check(cuMemFree(managed), "cuMemFree_v2");
	device_allocated(-8192);
	check(cuMemFreeAsync(async, stream), "cuMemFreeAsync");
	device_allocated(-4096);
	check(cuMemFreeAsync(pooled, stream), "cuMemFreeAsync");
	device_allocated(-12288);
	check(cuMemFreeHost(host), "cuMemFreeHost");
	live_host -= 65536;
	check(cuStreamSynchronize(stream), "cuStreamSynchronize");
}

/*
 * Virtual memory management as PyTorch's expandable segments and CUDA's
 * samples use it: a reserved range, two physical handles mapped side by
 * side, one released while still mapped, one retained through its address,
 * the whole range unmapped in one call, then the last release.
 */
static void vmm(CUstream stream)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	CUmemAccessDesc access = {
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	CUmemGenericAllocationHandle first, second, retained;
	size_t granularity;
	CUdeviceptr range;

	check(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
	      "cuMemGetAllocationGranularity");
	check(cuMemAddressReserve(&range, 2 * granularity, 0, 0, 0), "cuMemAddressReserve");
	check(cuMemCreate(&first, granularity, &prop, 0), "cuMemCreate");
	device_allocated((long long)granularity);
	check(cuMemCreate(&second, granularity, &prop, 0), "cuMemCreate");
	device_allocated((long long)granularity);
	check(cuMemMap(range, granularity, 0, first, 0), "cuMemMap");
	check(cuMemMap(range + granularity, granularity, 0, second, 0), "cuMemMap");
	check(cuMemSetAccess(range, 2 * granularity, &access, 1), "cuMemSetAccess");
	check(cuMemRelease(first), "cuMemRelease"); /* mapped: its memory stays */
	check(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)(range + granularity)),
	      "cuMemRetainAllocationHandle");
	check(cuMemRelease(retained), "cuMemRelease");
	check(cuMemsetD8Async(range + granularity, 0x5a, granularity, stream), "cuMemsetD8Async");
	check(cuStreamSynchronize(stream), "cuStreamSynchronize");
	check(cuMemUnmap(range, 2 * granularity), "cuMemUnmap"); /* frees the first */
	device_allocated(-(long long)granularity);
	check(cuMemRelease(second), "cuMemRelease"); /* frees the second */
	device_allocated(-(long long)granularity);
	check(cuMemAddressFree(range, 2 * granularity), "cuMemAddressFree");
}

/* Modules and libraries loaded from a file, as cuModuleLoad and cuLibraryLoadFromFile do. */
static void modules_from_files(void)
{
	char dir[] = "/tmp/drv_apis.XXXXXX", path[64];
	CUmodule module;
	CUlibrary library;
	FILE *file;

	if (!mkdtemp(dir)) {
		fprintf(stderr, "%s: mkdtemp: %s\n", program, strerror(errno));
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/vec_add.ptx", dir);
	file = fopen(path, "we");
	if (!file || fputs(vec_add_ptx, file) == EOF || fclose(file)) {
		fprintf(stderr, "%s: cannot write %s\n", program, path);
		exit(1);
	}
	check(cuModuleLoad(&module, path), "cuModuleLoad");
	check(cuModuleUnload(module), "cuModuleUnload");
	check(cuLibraryLoadFromFile(&library, path, NULL, NULL, 0, NULL, NULL, 0), "cuLibraryLoadFromFile");
	check(cuLibraryUnload(library), "cuLibraryUnload");
	unlink(path);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	CUdeviceptr a, b, c;
	CUcontext context;
	CUfunction function;
	CUmodule module;
	CUstream stream;
	CUdevice device;
	float *host;
	long rounds, i;
	int n = ELEMENTS, host_calls = 0;
	void *params[] = { &a, &b, &c, &n };
	char *end;
	size_t k;

	if (argc != 2 || (rounds = strtol(argv[1], &end, 10)) < 1 || *end || rounds > 100000) {
		fprintf(stderr, "usage: %s ROUNDS (1..100000)\n", program);
		return 2;
	}
	host = calloc(ELEMENTS, sizeof(float));
	if (!host)
		return 1;
	device = cu_setup_device(check);
	context = cu_setup_primary_context(device, true, check);
	function = cu_setup_vec_add(&module, check);
	check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	check(cuMemAlloc(&a, BYTES), "cuMemAlloc_v2");
	check(cuMemAlloc(&b, BYTES), "cuMemAlloc_v2");
	check(cuMemAlloc(&c, BYTES), "cuMemAlloc_v2");
	device_allocated(3 * BYTES);
	check(cuMemcpyHtoD(a, host, BYTES), "cuMemcpyHtoD_v2");
	check(cuMemcpyHtoD(b, host, BYTES), "cuMemcpyHtoD_v2");

	for (i = 0; i < rounds; i++) {
		check(cuLaunchKernel(function, 4, 1, 1, 256, 1, 1, 0, stream, params, NULL), "cuLaunchKernel");
		check(cuLaunchCooperativeKernel(function, 4, 1, 1, 256, 1, 1, 0, stream, params),
		      "cuLaunchCooperativeKernel");
		check(cuLaunchHostFunc(stream, host_function, &host_calls), "cuLaunchHostFunc");
		memsets(c, stream);
		copies(context, a, b, host, stream);
		syncs_and_events(context, stream);
		allocations(stream);
		vmm(stream);
	}
	modules_from_files();

	check(cuMemcpyDtoH(host, c, BYTES), "cuMemcpyDtoH_v2");
	check(cuMemFree(a), "cuMemFree_v2");
	check(cuMemFree(b), "cuMemFree_v2");
	check(cuMemFree(c), "cuMemFree_v2");
	device_allocated(-3 * (long long)BYTES);
	check(cuStreamDestroy(stream), "cuStreamDestroy_v2");
	check(cuModuleUnload(module), "cuModuleUnload");
	check(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease_v2");
	if (host_calls != rounds) {
		fprintf(stderr, "%s: %d host functions ran, expected %ld\n", program, host_calls, rounds);
		return 1;
	}

	qsort(counts, api_count, sizeof(counts[0]), by_name);
	for (k = 0; k < api_count; k++)
		printf("%s: api=%s calls=%lu\n", program, counts[k].api, counts[k].calls);
	printf("%s: pid=%ld rounds=%ld peak_device_bytes=%llu live_device_bytes=%llu live_host_bytes=%llu result=ok\n",
	       program, (long)getpid(), rounds, peak_device, live_device, live_host);
	free(host);
	return 0;
}
