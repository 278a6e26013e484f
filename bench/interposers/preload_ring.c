// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * preload_ring: the userspace contender of bench/compare.c. An
 * LD_PRELOAD interposer on the CUDA driver API that writes cuprobe's own
 * records (bpf/cuprobe_events.h) into a shared-memory ring (shm_ring.h) and
 * a consumer thread, started from a constructor, that delivers them
 * (counting, latency = consumer clock - record time_ns, both
 * CLOCK_MONOTONIC).
 *
 * One source, three designs chosen by a compile definition:
 *
 *  CP_PRELOAD_POLL1MS  libcp_preload_poll1ms.so: the watcher thread polls a
 *      "records pending" flag in the shared segment and sleeps 1 ms between
 *      looks -- the design of the userspace runtime cuprobe replaces. Its
 *      global destructor writes the stats, then unmaps the segment and
 *      unlinks it WITHOUT stopping the watcher first. The watcher's next look
 *      at the flag (or a drain in progress) touches unmapped memory and the
 *      process dies with SIGSEGV while exiting. That is the bug class cuprobe
 *      exists to remove; it is kept on purpose so the bench's exit-race runs
 *      can count it. Do not fix it here.
 *  CP_PRELOAD_BUSY     libcp_preload_busy.so: the consumer spins on the ring
 *      (pause between empty looks). Its destructor stops it properly: stop
 *      flag, join, then stats; the mapping is left to the process's end.
 *  CP_PRELOAD_EVENTFD  libcp_preload_eventfd.so: the consumer sleeps in
 *      read(2) on an eventfd. Before sleeping it sets consumer_waiting in the
 *      segment and looks at the ring once more; a producer that sees the flag
 *      after publishing clears it and writes the eventfd, so a busy consumer
 *      costs the traced call no syscall. The destructor stops it like busy's.
 *
 * Wrapped calls: cuLaunchKernel, cuLaunchKernelEx, cuMemAlloc_v2,
 * cuMemFree_v2, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuStreamSynchronize,
 * cuCtxSynchronize. Launches, frees, copies and syncs are recorded on entry,
 * allocations on return (as cuprobe's entry probes and return probe do).
 *
 * Reaching the calls: a program linked against libcuda.so.1 (drv_launch,
 * cp_bench_load) binds to these exported wrappers. The CUDA runtime instead
 * dlopen()s libcuda and asks dlsym(handle, "cuGetProcAddress_v2") for
 * everything, which LD_PRELOAD alone never sees; so dlsym is wrapped too:
 * asked for cuGetProcAddress{,_v2} or a wrapped symbol it returns the
 * wrapper, and the cuGetProcAddress wrappers hand out the wrappers for the
 * legacy-stream forms (per-thread-stream _ptsz forms are passed through
 * untraced). dlsym(RTLD_NEXT, ...) is passed on by a tail jump, so that
 * glibc still sees the caller's address (see dlsym below).
 *
 * Environment: CP_BENCH_STATS=FILE appends the stats line (cp_bench_stats.h)
 * at exit. A forked child stops recording (its ring would be the parent's).
 */
#include <cuda.h>

#include <dlfcn.h>
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
#include <time.h>
#include <unistd.h>

#include "interposer.h"

#if defined(CP_PRELOAD_POLL1MS)
#define DESIGN_NAME "preload-poll1ms"
#elif defined(CP_PRELOAD_BUSY)
#define DESIGN_NAME "preload-busy"
#elif defined(CP_PRELOAD_EVENTFD)
#define DESIGN_NAME "preload-eventfd"
#else
#error "define one of CP_PRELOAD_POLL1MS, CP_PRELOAD_BUSY, CP_PRELOAD_EVENTFD"
#endif

#define EXPORT __attribute__((visibility("default")))

/* ---- the real functions ------------------------------------------------- */

enum wrapped {
	W_cuLaunchKernel,
	W_cuLaunchKernelEx,
	W_cuMemAlloc_v2,
	W_cuMemFree_v2,
	W_cuMemcpyHtoD_v2,
	W_cuMemcpyDtoH_v2,
	W_cuStreamSynchronize,
	W_cuCtxSynchronize,
	W_cuGetProcAddress_v2,
	W_cuGetProcAddress, /* the CUDA 11 four-argument form */
	W_COUNT,
};

/* The exported symbol, and the name cuGetProcAddress knows it by (NULL: never handed out). */
static const struct {
	const char *symbol;
	const char *proc_name;
} wrapped_names[W_COUNT] = {
	[W_cuLaunchKernel] = { "cuLaunchKernel", "cuLaunchKernel" },
	[W_cuLaunchKernelEx] = { "cuLaunchKernelEx", "cuLaunchKernelEx" },
	[W_cuMemAlloc_v2] = { "cuMemAlloc_v2", "cuMemAlloc" },
	[W_cuMemFree_v2] = { "cuMemFree_v2", "cuMemFree" },
	[W_cuMemcpyHtoD_v2] = { "cuMemcpyHtoD_v2", "cuMemcpyHtoD" },
	[W_cuMemcpyDtoH_v2] = { "cuMemcpyDtoH_v2", "cuMemcpyDtoH" },
	[W_cuStreamSynchronize] = { "cuStreamSynchronize", "cuStreamSynchronize" },
	[W_cuCtxSynchronize] = { "cuCtxSynchronize", "cuCtxSynchronize" },
	[W_cuGetProcAddress_v2] = { "cuGetProcAddress_v2", "cuGetProcAddress" },
	[W_cuGetProcAddress] = { "cuGetProcAddress", NULL },
};

static void *_Atomic real_fn[W_COUNT];
static void *wrapper_fn[W_COUNT]; /* filled by the constructor */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn _Atomic real_dlsym_ptr;

static dlsym_fn real_dlsym(void)
{
	dlsym_fn fn = atomic_load_explicit(&real_dlsym_ptr, memory_order_acquire);

	if (!fn) {
		fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!fn)
			fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		atomic_store_explicit(&real_dlsym_ptr, fn, memory_order_release);
	}
	return fn;
}

static void *real_of(enum wrapped which)
{
	void *fn = atomic_load_explicit(&real_fn[which], memory_order_acquire);

	if (!fn && real_dlsym()) {
		fn = real_dlsym()(RTLD_NEXT, wrapped_names[which].symbol);
		atomic_store_explicit(&real_fn[which], fn, memory_order_release);
	}
	return fn;
}

#define REAL(which, type) ((type)real_of(W_##which))

/* ---- the segment, the consumer and their state -------------------------- */

static struct cp_shm_segment *seg; /* poll1ms: left dangling by the destructor, on purpose */
static uint64_t seg_bytes;
static char seg_name[64];
static pthread_t consumer;
static bool consumer_started;
static _Atomic bool tracing;        /* off in forked children */
#if !defined(CP_PRELOAD_POLL1MS)
static _Atomic bool stopping;       /* busy, eventfd: the destructor's stop request */
#endif
#if defined(CP_PRELOAD_EVENTFD)
static int wake_fd = -1;
#endif
static uint32_t self_pid;
static const char *stats_path;
static uint64_t started_ns;

/* Written by the consumer only; read by the destructor. */
static struct cp_interposer_delivery delivery;
static uint64_t consumer_cpu_ns;

/* What the consumer does with one record: copy it out, time it, count it. */
static void deliver(const struct cp_shm_slot *slot)
{
	cp_interposer__deliver(&delivery, slot);
}

#if defined(CP_PRELOAD_POLL1MS)
static void *consumer_main(void *arg)
{
	const struct timespec one_ms = { 0, 1000000 };

	/* Never told to stop: it runs until the process is gone (or faults). */
	for (;;) {
		if (atomic_load_explicit(&seg->flag, memory_order_acquire)) {
			atomic_store_explicit(&seg->flag, 0, memory_order_relaxed);
			cp_shm__drain(seg, deliver);
		}
		nanosleep(&one_ms, NULL);
	}
	return NULL;
}

static inline void notify(void)
{
	atomic_store_explicit(&seg->flag, 1, memory_order_release);
}
#elif defined(CP_PRELOAD_BUSY)
static void *consumer_main(void *arg)
{
	while (!atomic_load_explicit(&stopping, memory_order_acquire))
		if (!cp_shm__drain(seg, deliver))
			__builtin_ia32_pause();
	cp_shm__drain(seg, deliver);
	consumer_cpu_ns = cp_interposer__cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	return NULL;
}

static inline void notify(void)
{
}
#else /* CP_PRELOAD_EVENTFD */
static void *consumer_main(void *arg)
{
	cp_shm__consume_until_stopped(seg, wake_fd, &stopping, deliver);
	consumer_cpu_ns = cp_interposer__cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	return NULL;
}

static inline void notify(void)
{
	cp_shm__notify(seg, wake_fd);
}
#endif

/* ---- producing records -------------------------------------------------- */

struct emit {
	struct cp_shm_slot *slot;
	uint64_t pos;
};

static inline union cp_shm_record *record_begin(struct emit *emit, enum cp_event_type type,
						enum cp_api api)
{
	if (!seg || !atomic_load_explicit(&tracing, memory_order_relaxed))
		return NULL;
	return cp_interposer__begin(seg, &emit->slot, &emit->pos, type, api, self_pid);
}

static inline void record_end(struct emit *emit, size_t size)
{
	cp_shm__commit(emit->slot, emit->pos, size);
	notify();
}

/* ---- the wrappers --------------------------------------------------------- */

typedef CUresult (*launch_fn)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
			      unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*stream_sync_fn)(CUstream);
typedef CUresult (*ctx_sync_fn)(void);
typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t,
				   CUdriverProcAddressQueryResult *);
typedef CUresult (*get_proc_v1_fn)(const char *, void **, int, cuuint64_t);

EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				       unsigned int gridDimZ, unsigned int blockDimX,
				       unsigned int blockDimY, unsigned int blockDimZ,
				       unsigned int sharedMemBytes, CUstream hStream,
				       void **kernelParams, void **extra)
{
	launch_fn real = REAL(cuLaunchKernel, launch_fn);
	struct emit emit;
	union cp_shm_record *record = record_begin(&emit, CP_EV_LAUNCH, CP_API_cuLaunchKernel);

	if (record) {
		struct cp_launch_event *event = &record->launch;

		event->function = (uintptr_t)f;
		event->stream = (uintptr_t)hStream;
		event->grid[0] = gridDimX, event->grid[1] = gridDimY, event->grid[2] = gridDimZ;
		event->block[0] = blockDimX, event->block[1] = blockDimY, event->block[2] = blockDimZ;
		event->shared_mem_bytes = sharedMemBytes;
		event->flags = 0;
		record_end(&emit, sizeof(*event));
	}
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
		    hStream, kernelParams, extra);
}

EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
					 void **kernelParams, void **extra)
{
	launch_ex_fn real = REAL(cuLaunchKernelEx, launch_ex_fn);
	struct emit emit;
	union cp_shm_record *record = record_begin(&emit, CP_EV_LAUNCH, CP_API_cuLaunchKernelEx);

	if (record) {
		struct cp_launch_event *event = &record->launch;

		memset(&event->function, 0, sizeof(*event) - sizeof(event->hdr));
		event->function = (uintptr_t)f;
		event->flags = CP_LAUNCH_EX;
		if (config) {
			event->stream = (uintptr_t)config->hStream;
			event->grid[0] = config->gridDimX, event->grid[1] = config->gridDimY;
			event->grid[2] = config->gridDimZ;
			event->block[0] = config->blockDimX, event->block[1] = config->blockDimY;
			event->block[2] = config->blockDimZ;
			event->shared_mem_bytes = config->sharedMemBytes;
		} else {
			event->flags |= CP_LAUNCH_CONFIG_FAULT;
		}
		record_end(&emit, sizeof(*event));
	}
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	return real(config, f, kernelParams, extra);
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	alloc_fn real = REAL(cuMemAlloc_v2, alloc_fn);
	CUresult rc = real ? real(dptr, bytesize) : CUDA_ERROR_NOT_INITIALIZED;
	struct emit emit;
	union cp_shm_record *record = record_begin(&emit, CP_EV_ALLOC, CP_API_cuMemAlloc_v2);

	if (record) {
		struct cp_alloc_event *event = &record->alloc;

		event->ptr = rc == CUDA_SUCCESS && dptr ? *dptr : 0;
		event->bytes = bytesize;
		event->stream = 0;
		event->kind = CP_MEM_DEVICE;
		event->result = (int32_t)rc;
		record_end(&emit, sizeof(*event));
	}
	return rc;
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr dptr)
{
	free_fn real = REAL(cuMemFree_v2, free_fn);
	struct emit emit;
	union cp_shm_record *record = record_begin(&emit, CP_EV_FREE, CP_API_cuMemFree_v2);

	if (record) {
		record->free.ptr = dptr;
		record->free.stream = 0;
		record->free.kind = CP_MEM_DEVICE;
		record->free.pad = 0;
		record_end(&emit, sizeof(record->free));
	}
	return real ? real(dptr) : CUDA_ERROR_NOT_INITIALIZED;
}

static void emit_copy(enum cp_api api, uint64_t dst, uint64_t src, uint64_t bytes,
		      enum cp_copy_dir direction)
{
	struct emit emit;
	union cp_shm_record *record = record_begin(&emit, CP_EV_COPY, api);

	if (record) {
		record->copy.dst = dst;
		record->copy.src = src;
		record->copy.bytes = bytes;
		record->copy.stream = 0;
		record->copy.direction = direction;
		record->copy.async = 0;
		record_end(&emit, sizeof(record->copy));
	}
}

EXPORT CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	htod_fn real = REAL(cuMemcpyHtoD_v2, htod_fn);

	emit_copy(CP_API_cuMemcpyHtoD_v2, dstDevice, (uintptr_t)srcHost, ByteCount, CP_COPY_HTOD);
	return real ? real(dstDevice, srcHost, ByteCount) : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	dtoh_fn real = REAL(cuMemcpyDtoH_v2, dtoh_fn);

	emit_copy(CP_API_cuMemcpyDtoH_v2, (uintptr_t)dstHost, srcDevice, ByteCount, CP_COPY_DTOH);
	return real ? real(dstHost, srcDevice, ByteCount) : CUDA_ERROR_NOT_INITIALIZED;
}

static void emit_sync(enum cp_api api, uint64_t handle, enum cp_sync_kind kind)
{
	struct emit emit;
	union cp_shm_record *record = record_begin(&emit, CP_EV_SYNC, api);

	if (record) {
		record->sync.handle = handle;
		record->sync.kind = kind;
		record->sync.result = 0;
		record_end(&emit, sizeof(record->sync));
	}
}

EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	stream_sync_fn real = REAL(cuStreamSynchronize, stream_sync_fn);

	emit_sync(CP_API_cuStreamSynchronize, (uintptr_t)hStream, CP_SYNC_STREAM);
	return real ? real(hStream) : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
	ctx_sync_fn real = REAL(cuCtxSynchronize, ctx_sync_fn);

	emit_sync(CP_API_cuCtxSynchronize, 0, CP_SYNC_CONTEXT);
	return real ? real() : CUDA_ERROR_NOT_INITIALIZED;
}

/* A pointer the driver handed out for proc_name, swapped for our wrapper when it is the legacy form. */
static void *substitute_proc(const char *symbol, void *pointer, int version, cuuint64_t flags)
{
	int i;

	if (!symbol || !pointer || (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		return pointer;
	for (i = 0; i < W_COUNT; i++) {
		void *expected = NULL;

		if (!wrapped_names[i].proc_name || strcmp(symbol, wrapped_names[i].proc_name))
			continue;
		/* cuGetProcAddress by that name is the _v2 signature from CUDA 12.0 on. */
		if (i == W_cuGetProcAddress_v2 && version < 12000)
			return pointer;
		if (!atomic_compare_exchange_strong(&real_fn[i], &expected, pointer) && expected != pointer)
			return pointer; /* another form than the one we wrap: pass it through */
		return wrapper_fn[i];
	}
	return pointer;
}

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
					 cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	get_proc_v2_fn real = REAL(cuGetProcAddress_v2, get_proc_v2_fn);
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = substitute_proc(symbol, *pfn, cudaVersion, flags);
	return rc;
}

static CUresult CUDAAPI wrap_get_proc_v1(const char *symbol, void **pfn, int cudaVersion,
					  cuuint64_t flags)
{
	get_proc_v1_fn real = REAL(cuGetProcAddress, get_proc_v1_fn);
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cudaVersion, flags);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = substitute_proc(symbol, *pfn, cudaVersion, flags);
	return rc;
}

static void *hooked_dlsym(dlsym_fn real, void *handle, const char *name)
{
	void *found = real(handle, name);
	int i;

	if (!found || handle == RTLD_DEFAULT || strncmp(name, "cu", 2))
		return found;
	for (i = 0; i < W_COUNT; i++) {
		void *expected = NULL;

		if (strcmp(name, wrapped_names[i].symbol))
			continue;
		if (found == wrapper_fn[i])
			return found;
		if (!atomic_compare_exchange_strong(&real_fn[i], &expected, found) && expected != found)
			return found;
		return wrapper_fn[i];
	}
	return found;
}

/*
 * glibc answers dlsym(RTLD_NEXT, ...) relative to the object dlsym returns
 * to, so that case is a tail jump to the real dlsym: it returns straight to
 * the caller and sees the caller's address. Everything else goes through
 * hooked_dlsym.
 */
#if !defined(__OPTIMIZE__) && !(defined(__has_attribute) && __has_attribute(musttail))
#error "dlsym's RTLD_NEXT path needs a sibling call: build with optimization"
#endif
EXPORT __attribute__((optimize("optimize-sibling-calls"))) void *dlsym(void *handle, const char *name)
{
	dlsym_fn real = real_dlsym();

	if (!real)
		return NULL;
	if (handle != RTLD_NEXT)
		return hooked_dlsym(real, handle, name);
#if defined(__has_attribute) && __has_attribute(musttail)
	__attribute__((musttail))
#endif
	return real(handle, name);
}

/* ---- start and exit --------------------------------------------------------- */

static void after_fork_child(void)
{
	atomic_store(&tracing, false);
}

__attribute__((constructor)) static void preload_start(void)
{
	wrapper_fn[W_cuLaunchKernel] = (void *)cuLaunchKernel;
	wrapper_fn[W_cuLaunchKernelEx] = (void *)cuLaunchKernelEx;
	wrapper_fn[W_cuMemAlloc_v2] = (void *)cuMemAlloc;
	wrapper_fn[W_cuMemFree_v2] = (void *)cuMemFree;
	wrapper_fn[W_cuMemcpyHtoD_v2] = (void *)cuMemcpyHtoD;
	wrapper_fn[W_cuMemcpyDtoH_v2] = (void *)cuMemcpyDtoH;
	wrapper_fn[W_cuStreamSynchronize] = (void *)cuStreamSynchronize;
	wrapper_fn[W_cuCtxSynchronize] = (void *)cuCtxSynchronize;
	wrapper_fn[W_cuGetProcAddress_v2] = (void *)cuGetProcAddress;
	wrapper_fn[W_cuGetProcAddress] = (void *)wrap_get_proc_v1;
	real_dlsym();

	self_pid = (uint32_t)getpid();
	stats_path = getenv("CP_BENCH_STATS");
	started_ns = cp_bench_now_ns();
	snprintf(seg_name, sizeof(seg_name), "/cp_preload.%u", self_pid);
	seg = cp_shm_segment__create(seg_name, CP_SHM_SLOTS, &seg_bytes);
	if (!seg)
		return;
#if defined(CP_PRELOAD_EVENTFD)
	wake_fd = eventfd(0, EFD_CLOEXEC);
	if (wake_fd < 0)
		return;
#endif
	if (pthread_create(&consumer, NULL, consumer_main, NULL))
		return;
	consumer_started = true;
	pthread_atfork(NULL, NULL, after_fork_child);
	atomic_store(&tracing, true);
}

static void write_report(void)
{
	struct cp_bench_report report = {
		.design = DESIGN_NAME,
		.produced = atomic_load(&seg->produced),
		.lost = atomic_load(&seg->lost),
		.delivered = atomic_load(&delivery.delivered),
		.cpu_ns = consumer_cpu_ns,
		.alive_ns = cp_bench_now_ns() - started_ns,
		.hist = &delivery.hist,
	};

	cp_bench_report__write(stats_path, &report);
}

__attribute__((destructor)) static void preload_stop(void)
{
	if (!seg || !consumer_started || (uint32_t)getpid() != self_pid)
		return;
	atomic_store(&tracing, false);
#if defined(CP_PRELOAD_POLL1MS)
	{
		clockid_t clock;

		if (!pthread_getcpuclockid(consumer, &clock))
			consumer_cpu_ns = cp_interposer__cpu_ns(clock);
	}
	write_report();
	/* The bug, kept: the watcher is still running and will touch this. */
	munmap(seg, seg_bytes);
	shm_unlink(seg_name);
#else
	atomic_store_explicit(&stopping, true, memory_order_seq_cst);
#if defined(CP_PRELOAD_EVENTFD)
	{
		uint64_t one = 1;

		(void)!write(wake_fd, &one, sizeof(one));
	}
#endif
	pthread_join(consumer, NULL);
	write_report();
	/* Nothing is unmapped: the thread is gone and the process ends next. */
	shm_unlink(seg_name);
#endif
}
