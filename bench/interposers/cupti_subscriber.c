// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cupti_subscriber: the CUPTI contender of bench/compare.c. A CUPTI
 * callback-API subscriber on the same driver calls preload_ring.c wraps,
 * writing the same records (bpf/cuprobe_events.h) into the same kind of
 * shared-memory ring (shm_ring.h), delivered by a consumer thread asleep on
 * an eventfd (the eventfd design of preload_ring.c). Stopped properly at
 * exit: unsubscribe, stop flag, wake, join, stats; nothing is unmapped.
 *
 * Loading: CUDA_INJECTION64_PATH=.../libcp_cupti_subscriber.so (the driver
 * calls InitializeInjection from cuInit), or LD_PRELOAD (the constructor
 * subscribes). Needs the real driver: the simulated one has no CUPTI.
 * CP_BENCH_STATS=FILE appends the stats line (cp_bench_stats.h) at exit.
 */
#include <cuda.h>
#include <cupti.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interposer.h"

#define EXPORT __attribute__((visibility("default")))

static struct cp_shm_segment *seg;
static uint64_t seg_bytes;
static char seg_name[64];
static pthread_t consumer;
static bool consumer_started;
static _Atomic bool stopping;
static _Atomic bool subscribed;
static CUpti_SubscriberHandle subscriber;
static int wake_fd = -1;
static uint32_t self_pid;
static const char *stats_path;
static uint64_t started_ns;

static struct cp_interposer_delivery delivery;
static uint64_t consumer_cpu_ns;

static void deliver(const struct cp_shm_slot *slot)
{
	cp_interposer__deliver(&delivery, slot);
}

static void *consumer_main(void *arg)
{
	cp_shm__consume_until_stopped(seg, wake_fd, &stopping, deliver);
	consumer_cpu_ns = cp_interposer__cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	return NULL;
}

static void notify(void)
{
	cp_shm__notify(seg, wake_fd);
}

static union cp_shm_record *record_begin(struct cp_shm_slot **slot, uint64_t *pos,
					 enum cp_event_type type, enum cp_api api)
{
	union cp_shm_record *record = cp_interposer__begin(seg, slot, pos, type, api, self_pid);

	/* The fields a callback does not write stay zero. */
	if (record)
		memset((char *)record + sizeof(record->hdr), 0, sizeof(*record) - sizeof(record->hdr));
	return record;
}

static void record_end(struct cp_shm_slot *slot, uint64_t pos, size_t size)
{
	cp_shm__commit(slot, pos, size);
	notify();
}

static void CUPTIAPI on_driver_call(void *userdata, CUpti_CallbackDomain domain,
				    CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *info = data;
	struct cp_shm_slot *slot;
	union cp_shm_record *record;
	bool at_exit = info->callbackSite == CUPTI_API_EXIT;
	uint64_t pos;

	if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !seg)
		return;
	/* Allocations on return (the pointer is known then), everything else on entry. */
	if (at_exit != (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2))
		return;
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
		const cuLaunchKernel_params *p = info->functionParams;

		record = record_begin(&slot, &pos, CP_EV_LAUNCH,
				      cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ?
				      CP_API_cuLaunchKernel : CP_API_cuLaunchKernel_ptsz);
		if (!record)
			return;
		record->launch.function = (uintptr_t)p->f;
		record->launch.stream = (uintptr_t)p->hStream;
		record->launch.grid[0] = p->gridDimX, record->launch.grid[1] = p->gridDimY;
		record->launch.grid[2] = p->gridDimZ;
		record->launch.block[0] = p->blockDimX, record->launch.block[1] = p->blockDimY;
		record->launch.block[2] = p->blockDimZ;
		record->launch.shared_mem_bytes = p->sharedMemBytes;
		record_end(slot, pos, sizeof(record->launch));
		return;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
		const cuLaunchKernelEx_params *p = info->functionParams;

		record = record_begin(&slot, &pos, CP_EV_LAUNCH,
				      cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ?
				      CP_API_cuLaunchKernelEx : CP_API_cuLaunchKernelEx_ptsz);
		if (!record)
			return;
		record->launch.function = (uintptr_t)p->f;
		record->launch.flags = CP_LAUNCH_EX;
		if (p->config) {
			record->launch.stream = (uintptr_t)p->config->hStream;
			record->launch.grid[0] = p->config->gridDimX;
			record->launch.grid[1] = p->config->gridDimY;
			record->launch.grid[2] = p->config->gridDimZ;
			record->launch.block[0] = p->config->blockDimX;
			record->launch.block[1] = p->config->blockDimY;
			record->launch.block[2] = p->config->blockDimZ;
			record->launch.shared_mem_bytes = p->config->sharedMemBytes;
		}
		record_end(slot, pos, sizeof(record->launch));
		return;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
		const cuMemAlloc_v2_params *p = info->functionParams;
		CUresult rc = info->functionReturnValue ? *(const CUresult *)info->functionReturnValue :
			      CUDA_SUCCESS;

		record = record_begin(&slot, &pos, CP_EV_ALLOC, CP_API_cuMemAlloc_v2);
		if (!record)
			return;
		record->alloc.ptr = rc == CUDA_SUCCESS && p->dptr ? *p->dptr : 0;
		record->alloc.bytes = p->bytesize;
		record->alloc.kind = CP_MEM_DEVICE;
		record->alloc.result = (int32_t)rc;
		record_end(slot, pos, sizeof(record->alloc));
		return;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
		const cuMemFree_v2_params *p = info->functionParams;

		record = record_begin(&slot, &pos, CP_EV_FREE, CP_API_cuMemFree_v2);
		if (!record)
			return;
		record->free.ptr = p->dptr;
		record->free.kind = CP_MEM_DEVICE;
		record_end(slot, pos, sizeof(record->free));
		return;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2: {
		const cuMemcpyHtoD_v2_params *p = info->functionParams;

		record = record_begin(&slot, &pos, CP_EV_COPY, CP_API_cuMemcpyHtoD_v2);
		if (!record)
			return;
		record->copy.dst = p->dstDevice;
		record->copy.src = (uintptr_t)p->srcHost;
		record->copy.bytes = p->ByteCount;
		record->copy.direction = CP_COPY_HTOD;
		record_end(slot, pos, sizeof(record->copy));
		return;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2: {
		const cuMemcpyDtoH_v2_params *p = info->functionParams;

		record = record_begin(&slot, &pos, CP_EV_COPY, CP_API_cuMemcpyDtoH_v2);
		if (!record)
			return;
		record->copy.dst = (uintptr_t)p->dstHost;
		record->copy.src = p->srcDevice;
		record->copy.bytes = p->ByteCount;
		record->copy.direction = CP_COPY_DTOH;
		record_end(slot, pos, sizeof(record->copy));
		return;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize: {
		const cuStreamSynchronize_params *p = info->functionParams;

		record = record_begin(&slot, &pos, CP_EV_SYNC, CP_API_cuStreamSynchronize);
		if (!record)
			return;
		record->sync.handle = (uintptr_t)p->hStream;
		record->sync.kind = CP_SYNC_STREAM;
		record_end(slot, pos, sizeof(record->sync));
		return;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
		record = record_begin(&slot, &pos, CP_EV_SYNC, CP_API_cuCtxSynchronize);
		if (!record)
			return;
		record->sync.kind = CP_SYNC_CONTEXT;
		record_end(slot, pos, sizeof(record->sync));
		return;
	default:
		return;
	}
}

static const CUpti_CallbackId traced_calls[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,   CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,  CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
	CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
};

static void subscribe_once(void)
{
	bool expected = false;
	size_t i;

	if (!seg || !atomic_compare_exchange_strong(&subscribed, &expected, true))
		return;
	if (cuptiSubscribe(&subscriber, on_driver_call, NULL) != CUPTI_SUCCESS) {
		atomic_store(&subscribed, false);
		return;
	}
	for (i = 0; i < sizeof(traced_calls) / sizeof(traced_calls[0]); i++)
		cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, traced_calls[i]);
}

/* Called by the driver from cuInit when loaded through CUDA_INJECTION64_PATH. */
EXPORT int InitializeInjection(void)
{
	subscribe_once();
	return 1;
}

__attribute__((constructor)) static void subscriber_start(void)
{
	self_pid = (uint32_t)getpid();
	stats_path = getenv("CP_BENCH_STATS");
	started_ns = cp_bench_now_ns();
	snprintf(seg_name, sizeof(seg_name), "/cp_cupti.%u", self_pid);
	seg = cp_shm_segment__create(seg_name, CP_SHM_SLOTS, &seg_bytes);
	if (!seg)
		return;
	wake_fd = eventfd(0, EFD_CLOEXEC);
	if (wake_fd < 0 || pthread_create(&consumer, NULL, consumer_main, NULL)) {
		seg = NULL;
		return;
	}
	consumer_started = true;
	/* Through LD_PRELOAD nobody calls InitializeInjection. */
	if (!getenv("CUDA_INJECTION64_PATH"))
		subscribe_once();
}

__attribute__((destructor)) static void subscriber_stop(void)
{
	uint64_t one = 1;
	struct cp_bench_report report = { .design = "cupti" };

	if (!consumer_started || (uint32_t)getpid() != self_pid)
		return;
	if (atomic_load(&subscribed))
		cuptiUnsubscribe(subscriber);
	atomic_store_explicit(&stopping, true, memory_order_seq_cst);
	(void)!write(wake_fd, &one, sizeof(one));
	pthread_join(consumer, NULL);
	report.produced = atomic_load(&seg->produced);
	report.lost = atomic_load(&seg->lost);
	report.delivered = atomic_load(&delivery.delivered);
	report.cpu_ns = consumer_cpu_ns;
	report.alive_ns = cp_bench_now_ns() - started_ns;
	report.hist = &delivery.hist;
	cp_bench_report__write(stats_path, &report);
	shm_unlink(seg_name);
}
