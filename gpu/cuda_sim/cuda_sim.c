// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuda_sim: a simulated CUDA driver, built as libcuda.so.1.
 *
 * THIS IS A TEST DOUBLE for machines without a GPU. It exists so cuprobe's
 * uprobes have real driver API symbols to attach to, called with real
 * arguments, when no NVIDIA driver is installed. It includes the real
 * cuda.h, so the compiler checks every signature and the versioned names
 * (cuMemAlloc -> cuMemAlloc_v2, ...) come out as the real driver exports
 * them.
 *
 * All work is done on the CPU: "device" memory is malloc'd host memory
 * (a CUdeviceptr is the pointer value), copies are memmove, and a launch
 * runs a CPU implementation of the kernel, looked up by the entry name
 * found in the PTX. Only vec_add has one, and the simulated NCCL's kernels
 * an empty one (that library moves the data itself).
 *
 * Time is simulated apart from the data: a virtual GPU clock (see "the
 * virtual clock" below) gives each kernel a start and an end on its stream
 * with CUDA's stream rules, synchronizations really wait for those ends, and
 * CUDA_SIM_TIMELINE writes them down as the truth a tracer's timeline is
 * checked against.
 *
 * It is never installed or put on the loader's search path: only the
 * cuprobe workloads load it, through their own RUNPATH
 * ($ORIGIN/../lib/cuda-sim). A copy of a workload copied to a real GPU
 * machine finds the real libcuda.so.1 instead.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif

#include <cuda.h>
#include <linux/types.h>

#include "cuprobe_events.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Built with -fvisibility=hidden: only what is marked here is exported. */
#define SIM_EXPORT __attribute__((visibility("default")))

#define SIM_DRIVER_VERSION	CUDA_VERSION
#define SIM_DEVICE_COUNT	1
#define SIM_DEVICE_NAME		"cuprobe simulated GPU (runs on the CPU)"
#define SIM_ALLOC_ALIGNMENT	256	/* what cuMemAlloc guarantees */

/* Launch limits of a compute capability 9.0 device. */
#define SIM_MAX_THREADS_PER_BLOCK	1024u
#define SIM_MAX_BLOCK_X			1024u
#define SIM_MAX_BLOCK_Y			1024u
#define SIM_MAX_BLOCK_Z			64u
#define SIM_MAX_GRID_X			0x7fffffffu
#define SIM_MAX_GRID_YZ			65535u
#define SIM_MAX_DYNAMIC_SHARED_BYTES	(48u * 1024u)

/*
 * Every handle points at a struct whose first field is one of these, so a
 * wrong or stale handle is rejected instead of being used (handles are
 * wiped to SIM_MAGIC_DEAD before they are freed).
 */
enum sim_magic {
	SIM_MAGIC_DEAD = 0,
	SIM_MAGIC_CONTEXT = 0x63747831,	/* "ctx1" */
	SIM_MAGIC_MODULE = 0x6d6f6431,	/* "mod1" */
	SIM_MAGIC_LIBRARY = 0x6c696231,	/* "lib1" */
	SIM_MAGIC_FUNCTION = 0x66756e31,	/* "fun1" */
	SIM_MAGIC_KERNEL = 0x6b726e31,	/* "krn1" */
	SIM_MAGIC_STREAM = 0x73746d31,	/* "stm1" */
	SIM_MAGIC_EVENT = 0x65766e31,	/* "evn1" */
	SIM_MAGIC_PHYSICAL = 0x70687931,	/* "phy1": a VMM allocation handle */
	SIM_MAGIC_POOL = 0x706f6f31,	/* "poo1" */
};

struct sim_launch_dims {
	unsigned int grid[3];
	unsigned int block[3];
	unsigned int shared_mem_bytes;
};

typedef CUresult (*sim_kernel_body)(const struct sim_launch_dims *dims,
				    void **params);

struct sim_kernel_impl {
	const char *name;
	sim_kernel_body run;
	bool name_part;	/* name is part of the entry's (mangled) name, not all of it */
};

/*
 * One struct serves CUfunction and CUkernel: real CUDA accepts a CUkernel
 * wherever a CUfunction is expected, and so does the simulator.
 *
 * Like the real driver's CUkernel record (measured on driver 580, see
 * tests/gpu/results-late-attach-h200.md), the second word points at the
 * kernel's name: cuprobe reads it for handles made before it attached, and
 * the tests check that path here.
 */
struct sim_function {
	enum sim_magic magic;		/* FUNCTION or KERNEL */
	const char *name_ptr;		/* = name, at offset 8 as in the driver */
	const struct sim_kernel_impl *impl; /* NULL: no CPU implementation */
	struct sim_function *function;	/* KERNEL: from cuKernelGetFunction */
	unsigned int param_count;	/* from the PTX; 0 when the image was binary */
	bool launch_param;		/* its last parameter is cuprobe's __cuprobe_launch */
	const struct sim_ring *ring;	/* a device ring its module declares, or NULL */
	const struct sim_module *shadowed; /* its module, when that declares counter shadows */
	char name[];
};

/* A counter's shadow (cuprobe's __cuprobe_shadow_N): device memory the module declares. */
struct sim_shadow {
	char name[64];
	uintptr_t address;
	size_t bytes;
	unsigned int copies;
	size_t words, stride;
};

#define SIM_MAX_SHADOWS 16

/* A device ring's segments (cuprobe's __cuprobe_ring_control_N and _slots_N): device memory. */
struct sim_ring {
	uintptr_t control, slots;
	unsigned int segments, segment_slots, slot_bytes;
	size_t control_stride, slots_stride;
};

/* A CUmodule or a CUlibrary: the entries its PTX declared. */
struct sim_module {
	enum sim_magic magic;		/* MODULE or LIBRARY */
	size_t entry_count;
	struct sim_function **entries;
	struct sim_shadow shadows[SIM_MAX_SHADOWS]; /* also the rings' segments, for cuModuleGetGlobal */
	size_t shadow_count;
	struct sim_ring ring;		/* the first device ring it declares (segments 0: none) */
};

struct sim_context {
	enum sim_magic magic;
	CUdevice device;
	atomic_int retain_count;	/* the primary context is active while > 0 */
};

/*
 * Stream-ordered work of the virtual clock (below) goes to a queue: the
 * legacy default stream's, a created stream's, or one thread's per-thread
 * default stream. Work is never run late: its data effects happen in the
 * call, and a queue only keeps the time its last work ends.
 */
enum sim_queue_kind {
	SIM_QUEUE_LEGACY,	/* handle 0 (not to a _ptsz entry point), CU_STREAM_LEGACY */
	SIM_QUEUE_PER_THREAD,	/* CU_STREAM_PER_THREAD, or 0 to a _ptsz entry point */
	SIM_QUEUE_BLOCKING,	/* cuStreamCreate(CU_STREAM_DEFAULT) */
	SIM_QUEUE_NON_BLOCKING,	/* cuStreamCreate(CU_STREAM_NON_BLOCKING) */
};

struct sim_queue {
	struct sim_queue *prev, *next;	/* the clock's table of live queues */
	enum sim_queue_kind kind;
	uint64_t end_ns;		/* when its last work ends (CLOCK_MONOTONIC) */
};

struct sim_stream {
	enum sim_magic magic;
	unsigned int flags;
	struct sim_queue queue;
};

/*
 * Created streams live in a table, its slots handed out round robin: a
 * destroyed stream's handle comes back only after SIM_MAX_STREAMS more
 * creations, so within a run a handle names one stream, in a tracer's
 * records as in the truth file (heap handles were reused as soon as another
 * thread took over an exited thread's malloc arena). Slots change under
 * sim_clock.lock.
 */
#define SIM_MAX_STREAMS 4096

static struct sim_stream stream_table[SIM_MAX_STREAMS];
static size_t stream_cursor;	/* the next slot to try */

enum sim_mem_kind {
	SIM_MEM_DEVICE = 1u << 0,
	SIM_MEM_MANAGED = 1u << 1,
	SIM_MEM_HOST = 1u << 2,		/* cuMemAllocHost */
	SIM_MEM_VMM = 1u << 3,		/* a cuMemMap mapping: freed by cuMemUnmap only */
};

#define SIM_MEM_FREEABLE (SIM_MEM_DEVICE | SIM_MEM_MANAGED)
#define SIM_MEM_DEVICE_VISIBLE (SIM_MEM_DEVICE | SIM_MEM_MANAGED | SIM_MEM_VMM)

struct sim_allocation {
	struct sim_allocation *next;
	uintptr_t base;
	size_t bytes;
	enum sim_mem_kind kind;
};

static atomic_bool driver_initialized;
static struct sim_context primary_context = {
	.magic = SIM_MAGIC_CONTEXT,
	.device = 0,
};
/* As in the real driver, the current context is per thread. */
static _Thread_local struct sim_context *current_context;

/* Every live allocation, so copies and frees can be checked like a GPU would. */
static pthread_mutex_t allocations_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_allocation *allocations;

/*
 * Kernels' CPU bodies run one at a time (their simulated times may overlap
 * on different streams): kernels launched from several threads often write
 * the same buffer, benign on a GPU, a data race in C.
 */
static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;

/* cuKernelGetFunction creates a kernel's function handle on first use. */
static pthread_mutex_t kernel_function_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---------------------------------------------------------------- kernels */

/* extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n) */
static CUresult run_vec_add(const struct sim_launch_dims *dims, void **params);

/*
 * The simulated libnccl's kernels (gpu/nccl_sim): that library moves the
 * data on the CPU when the call is made, as this driver's copies do, and
 * launches its kernel for the GPU work real NCCL enqueues: here the kernel
 * only takes its time on the stream.
 */
static CUresult run_nccl_kernel(const struct sim_launch_dims *dims, void **params)
{
	(void)dims;
	(void)params;
	return CUDA_SUCCESS;
}

static const struct sim_kernel_impl kernel_impls[] = {
	{ "vec_add", run_vec_add, false },
	{ "ncclDevKernel_", run_nccl_kernel, true },
	{ "oneRankReduce", run_nccl_kernel, true }, /* one-rank NCCL's pre-multiplied sum */
};

static bool range_is_allocated(uintptr_t address, size_t bytes,
			       unsigned int kinds)
{
	const struct sim_allocation *allocation;
	bool found = false;

	if (address + bytes < address)
		return false;
	pthread_mutex_lock(&allocations_lock);
	for (allocation = allocations; allocation; allocation = allocation->next) {
		if ((allocation->kind & kinds) &&
		    address >= allocation->base &&
		    address + bytes <= allocation->base + allocation->bytes) {
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&allocations_lock);
	return found;
}

static CUresult run_vec_add(const struct sim_launch_dims *dims, void **params)
{
	CUdeviceptr a, b, c;
	uint64_t threads_x, count, i;
	size_t bytes;
	int n;

	if (!params || !params[0] || !params[1] || !params[2] || !params[3])
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&a, params[0], sizeof(a));
	memcpy(&b, params[1], sizeof(b));
	memcpy(&c, params[2], sizeof(c));
	memcpy(&n, params[3], sizeof(n));

	/*
	 * The PTX indexes with blockIdx.x * blockDim.x + threadIdx.x only, so
	 * y and z just repeat the same writes: run the x range once.
	 */
	threads_x = (uint64_t)dims->grid[0] * dims->block[0];
	count = n <= 0 ? 0 : ((uint64_t)n < threads_x ? (uint64_t)n : threads_x);
	if (count == 0)
		return CUDA_SUCCESS;

	/* A GPU would fault on memory it does not own: so does the simulator. */
	bytes = count * sizeof(float);
	if (!range_is_allocated(a, bytes, SIM_MEM_DEVICE_VISIBLE) ||
	    !range_is_allocated(b, bytes, SIM_MEM_DEVICE_VISIBLE) ||
	    !range_is_allocated(c, bytes, SIM_MEM_DEVICE_VISIBLE))
		return CUDA_ERROR_ILLEGAL_ADDRESS;

	for (i = 0; i < count; i++) {
		const float *av = (const float *)(uintptr_t)a;
		const float *bv = (const float *)(uintptr_t)b;
		float *cv = (float *)(uintptr_t)c;

		cv[i] = av[i] + bv[i];
	}
	return CUDA_SUCCESS;
}

static const struct sim_kernel_impl *find_kernel_impl(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(kernel_impls) / sizeof(kernel_impls[0]); i++)
		if (kernel_impls[i].name_part ? strstr(name, kernel_impls[i].name) != NULL :
		    strcmp(kernel_impls[i].name, name) == 0)
			return &kernel_impls[i];
	return NULL;
}

/* ----------------------------------------------------------------- checks */

static CUresult require_init(void)
{
	return atomic_load(&driver_initialized) ? CUDA_SUCCESS
						 : CUDA_ERROR_NOT_INITIALIZED;
}

/* What a call on a device checks first, in the driver's order: cuInit, its output given, the device. */
static CUresult require_device(CUdevice dev, bool output_given)
{
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!output_given)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= SIM_DEVICE_COUNT)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

static CUresult require_context(void)
{
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!current_context ||
	    atomic_load(&current_context->retain_count) <= 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	return CUDA_SUCCESS;
}

/* A created stream's slot, or NULL for anything else (special handles included). */
static struct sim_stream *stream_from_handle(CUstream stream)
{
	uintptr_t address = (uintptr_t)stream, first = (uintptr_t)stream_table;

	if (address < first || address >= (uintptr_t)(stream_table + SIM_MAX_STREAMS) ||
	    (address - first) % sizeof(stream_table[0]))
		return NULL;
	return (struct sim_stream *)stream;
}

static bool stream_is_valid(CUstream stream)
{
	const struct sim_stream *sim_stream = stream_from_handle(stream);

	if (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
		return true;
	return sim_stream && sim_stream->magic == SIM_MAGIC_STREAM;
}

static struct sim_module *module_from_handle(const void *handle,
					     enum sim_magic magic)
{
	struct sim_module *module = (struct sim_module *)handle;

	if (!module || module->magic != magic)
		return NULL;
	return module;
}

/* ------------------------------------------------------ the virtual clock */

/*
 * A GPU's timing, simulated. Each kernel takes CUDA_SIM_KERNEL_NS plus
 * CUDA_SIM_NS_PER_BLOCK per block of its grid (both read at cuInit, default
 * 0: instantaneous). Every piece of stream-ordered work (a kernel, an async
 * copy or memset, an event record or wait, a host function, a stream-ordered
 * allocation) is enqueued when it is called:
 *
 *   start = max(now, end of its queue, implicit waits, explicit wait)
 *   end   = start + duration (0 for everything but kernels)
 *
 * Implicit waits are CUDA's default-stream rules ("Stream synchronization
 * behavior" in the driver API reference): work on the legacy stream first
 * waits for all work so far of the blocking streams (created without
 * CU_STREAM_NON_BLOCKING, and the per-thread default streams), and work on a
 * blocking stream waits for all work so far of the legacy stream. A
 * per-thread default stream is otherwise an ordinary blocking stream of its
 * thread: it does not wait for other streams. Non-blocking streams wait for
 * nothing implicit.
 *
 * Synchronizations sleep (clock_nanosleep, TIMER_ABSTIME, CLOCK_MONOTONIC)
 * until the end they wait for, with the thread's timer slack at 1 ns so that
 * they return as a spinning driver sync does, not up to 50 us late; queries
 * compare it with now.
 *
 * One context (the primary one) exists, so the clock is the context's. All
 * of its state is under sim_clock.lock; the table holds the live queues only:
 * a destroyed stream or an exited thread's per-thread stream leaves it, and
 * its end is kept in retired_end_ns for cuCtxSynchronize.
 */
#define SIM_TIMELINE_LINE_MAX 384

static struct {
	pthread_mutex_t lock;
	uint64_t kernel_ns;		/* CUDA_SIM_KERNEL_NS */
	uint64_t ns_per_block;		/* CUDA_SIM_NS_PER_BLOCK */
	struct sim_queue legacy;
	struct sim_queue *queues;	/* created and per-thread streams, live */
	uint64_t retired_end_ns;	/* the latest end of queues that left the table */
	uint64_t context_wait_ns;	/* cuCtxWaitEvent: later work starts after this */
} sim_clock = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.legacy = { .kind = SIM_QUEUE_LEGACY },
};

/* CUDA_SIM_TIMELINE, opened O_APPEND at cuInit; -1: no truth file. */
static atomic_int timeline_fd = -1;

/* The calling thread's per-thread default stream, made on first use. */
static _Thread_local struct sim_queue *per_thread_queue;
static pthread_key_t per_thread_key;	/* its destructor retires the queue */
static pthread_once_t per_thread_key_once = PTHREAD_ONCE_INIT;
static int per_thread_key_error;

/* What one enqueue gave a piece of work. */
struct sim_work {
	uint64_t launch_ns;	/* now, read inside the call */
	uint64_t start_ns;
	uint64_t end_ns;
};

/* A synchronization in progress, for its truth line. */
struct sim_wait {
	uint64_t entry_ns;
	uint64_t until_ns;	/* what it waits for (<= entry_ns: nothing) */
};

static uint64_t now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t add_saturating(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void sleep_until(uint64_t ns)
{
	struct timespec until = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u),
	};

	static __thread bool precise;

	if (ns <= now_ns())
		return;
	if (!precise) {
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
		precise = true;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
}

/* One truth line, one write(2): O_APPEND keeps threads and processes whole. */
static void timeline_write(const char *format, ...)
{
	char line[SIM_TIMELINE_LINE_MAX];
	int fd = atomic_load(&timeline_fd), len;
	va_list ap;

	if (fd < 0)
		return;
	va_start(ap, format);
	len = vsnprintf(line, sizeof(line), format, ap);
	va_end(ap);
	if (len > 0 && (size_t)len < sizeof(line) && write(fd, line, (size_t)len) < 0) {
		/* Nowhere to report it: a missing line fails the checker instead. */
	}
}

static long thread_id(void)
{
	return (long)syscall(SYS_gettid);
}

static void queue_link(struct sim_queue *queue)
{
	queue->prev = NULL;
	queue->next = sim_clock.queues;
	if (sim_clock.queues)
		sim_clock.queues->prev = queue;
	sim_clock.queues = queue;
}

/* Takes a queue out of the table; its pending work still counts for the context. */
static void queue_retire(struct sim_queue *queue)
{
	if (queue->prev)
		queue->prev->next = queue->next;
	else
		sim_clock.queues = queue->next;
	if (queue->next)
		queue->next->prev = queue->prev;
	queue->prev = queue->next = NULL;
	sim_clock.retired_end_ns = max_u64(sim_clock.retired_end_ns, queue->end_ns);
}

static void per_thread_queue_exit(void *queue)
{
	pthread_mutex_lock(&sim_clock.lock);
	queue_retire(queue);
	pthread_mutex_unlock(&sim_clock.lock);
	free(queue);
	per_thread_queue = NULL;
}

static void per_thread_key_create(void)
{
	per_thread_key_error = pthread_key_create(&per_thread_key, per_thread_queue_exit);
}

/* Lock held. NULL: out of memory. */
static struct sim_queue *this_thread_queue(void)
{
	struct sim_queue *queue = per_thread_queue;

	if (queue)
		return queue;
	queue = calloc(1, sizeof(*queue));
	if (!queue)
		return NULL;
	if (pthread_setspecific(per_thread_key, queue)) {
		free(queue);
		return NULL;
	}
	queue->kind = SIM_QUEUE_PER_THREAD;
	queue_link(queue);
	per_thread_queue = queue;
	return queue;
}

/*
 * The queue a valid stream handle names. per_thread_default: the call came
 * through a _ptsz/_ptds entry point, where 0 is the per-thread stream.
 * Lock held. NULL: out of memory.
 */
static struct sim_queue *queue_of(CUstream stream, bool per_thread_default)
{
	if (stream == CU_STREAM_PER_THREAD || (!stream && per_thread_default))
		return this_thread_queue();
	if (!stream || stream == CU_STREAM_LEGACY)
		return &sim_clock.legacy;
	return &stream_from_handle(stream)->queue;	/* valid: checked by the caller */
}

/* Lock held. What new work of queue waits for besides its own queue. */
static uint64_t implicit_wait_ns(const struct sim_queue *queue)
{
	const struct sim_queue *other;
	uint64_t after = 0;

	switch (queue->kind) {
	case SIM_QUEUE_LEGACY:
		for (other = sim_clock.queues; other; other = other->next)
			if (other->kind != SIM_QUEUE_NON_BLOCKING)
				after = max_u64(after, other->end_ns);
		return after;
	case SIM_QUEUE_PER_THREAD:
	case SIM_QUEUE_BLOCKING:
		return sim_clock.legacy.end_ns;
	case SIM_QUEUE_NON_BLOCKING:
		break;
	}
	return 0;
}

/* Lock held. The time all work so far of queue has ended (what a sync waits for). */
static uint64_t queue_done_ns(const struct sim_queue *queue)
{
	/* Synchronizing the legacy stream waits for what its next work would. */
	if (queue->kind == SIM_QUEUE_LEGACY)
		return max_u64(queue->end_ns, implicit_wait_ns(queue));
	return queue->end_ns;
}

/* Lock held. The time all work of the context has ended. */
static uint64_t context_done_ns(void)
{
	const struct sim_queue *queue;
	uint64_t done = max_u64(sim_clock.legacy.end_ns, sim_clock.retired_end_ns);

	for (queue = sim_clock.queues; queue; queue = queue->next)
		done = max_u64(done, queue->end_ns);
	return done;
}

/* Lock held. Puts work of duration_ns on queue, starting no earlier than after_ns. */
static struct sim_work enqueue(struct sim_queue *queue, uint64_t after_ns, uint64_t duration_ns)
{
	struct sim_work work = { .launch_ns = now_ns() };

	work.start_ns = max_u64(max_u64(work.launch_ns, queue->end_ns),
				max_u64(implicit_wait_ns(queue), after_ns));
	work.start_ns = max_u64(work.start_ns, sim_clock.context_wait_ns);
	work.end_ns = add_saturating(work.start_ns, duration_ns);
	queue->end_ns = work.end_ns;
	return work;
}

/*
 * Zero-duration work on a stream (async copies and memsets, stream-ordered
 * allocations and frees, host functions): it keeps the stream's order and
 * the default-stream rules, and takes no time of its own.
 */
static CUresult order_on_stream(CUstream stream, bool per_thread_default)
{
	struct sim_queue *queue;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!stream_is_valid(stream))
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_clock.lock);
	queue = queue_of(stream, per_thread_default);
	if (queue)
		enqueue(queue, 0, 0);
	pthread_mutex_unlock(&sim_clock.lock);
	return queue ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Lock held. A kernel's time: CUDA_SIM_KERNEL_NS + CUDA_SIM_NS_PER_BLOCK x blocks. */
static uint64_t kernel_duration_ns(const unsigned int grid[3])
{
	uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2], per_blocks;

	if (__builtin_mul_overflow(blocks, sim_clock.ns_per_block, &per_blocks))
		per_blocks = UINT64_MAX;
	return add_saturating(sim_clock.kernel_ns, per_blocks);
}

/* A kernel on its stream, with its truth line (written in launch order). */
static CUresult clock_kernel(CUfunction function, CUstream stream, bool per_thread_default,
			     const unsigned int grid[3])
{
	struct sim_queue *queue;
	struct sim_work work;

	pthread_mutex_lock(&sim_clock.lock);
	queue = queue_of(stream, per_thread_default);
	if (queue) {
		work = enqueue(queue, 0, kernel_duration_ns(grid));
		timeline_write("kernel pid=%ld tid=%ld stream=0x%" PRIxPTR " function=0x%" PRIxPTR
			       " launch_ns=%" PRIu64 " start_ns=%" PRIu64 " end_ns=%" PRIu64 "\n",
			       (long)getpid(), thread_id(), (uintptr_t)stream,
			       (uintptr_t)function, work.launch_ns, work.start_ns, work.end_ns);
	}
	pthread_mutex_unlock(&sim_clock.lock);
	return queue ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Waits (really) until the time a synchronization is waiting for. */
static struct sim_wait wait_until(uint64_t entry_ns, uint64_t until_ns)
{
	sleep_until(until_ns);
	return (struct sim_wait){ .entry_ns = entry_ns, .until_ns = until_ns };
}

/* The truth line of a synchronization, once it is done. */
static void wait_done(const struct sim_wait *wait, const char *api, const void *handle)
{
	timeline_write("sync pid=%ld tid=%ld api=%s entry_ns=%" PRIu64 " return_ns=%" PRIu64
		       " until_ns=%" PRIu64 " handle=0x%" PRIxPTR "\n",
		       (long)getpid(), thread_id(), api, wait->entry_ns, now_ns(),
		       wait->until_ns, (uintptr_t)handle);
}

/* Synchronizing a stream: until all its work so far (stream sync, stream query). */
static CUresult stream_done_ns(CUstream stream, bool per_thread_default, uint64_t *done_ns)
{
	struct sim_queue *queue;

	if (!stream_is_valid(stream))
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_clock.lock);
	queue = queue_of(stream, per_thread_default);
	if (queue)
		*done_ns = queue_done_ns(queue);
	pthread_mutex_unlock(&sim_clock.lock);
	return queue ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * A synchronous copy whose host side waits (any side in host or managed
 * memory): it is work on the legacy stream, so it first waits for what a
 * legacy-stream synchronization would, then copies.
 */
static struct sim_wait legacy_copy_wait(void)
{
	uint64_t entry_ns = now_ns();
	struct sim_work work;

	pthread_mutex_lock(&sim_clock.lock);
	work = enqueue(&sim_clock.legacy, 0, 0);
	pthread_mutex_unlock(&sim_clock.lock);
	return wait_until(entry_ns, work.end_ns);
}

static bool env_u64(const char *name, uint64_t *out)
{
	const char *text = getenv(name);
	unsigned long long value;
	char *end;

	*out = 0;
	if (!text || !*text)
		return true;
	if (*text < '0' || *text > '9')
		return false;
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno || *end)
		return false;
	*out = value;
	return true;
}

/*
 * cuInit: the durations (every call) and the truth file (the first call
 * that finds CUDA_SIM_TIMELINE set). A malformed duration is
 * CUDA_ERROR_INVALID_VALUE, a truth file that cannot be opened
 * CUDA_ERROR_FILE_NOT_FOUND: a test must not pass on a clock it did not ask for.
 */
static CUresult clock_configure(void)
{
	const char *timeline = getenv("CUDA_SIM_TIMELINE");
	uint64_t kernel_ns, ns_per_block;
	CUresult rc = CUDA_SUCCESS;

	pthread_once(&per_thread_key_once, per_thread_key_create);
	if (per_thread_key_error)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!env_u64("CUDA_SIM_KERNEL_NS", &kernel_ns) ||
	    !env_u64("CUDA_SIM_NS_PER_BLOCK", &ns_per_block))
		return CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&sim_clock.lock);
	sim_clock.kernel_ns = kernel_ns;
	sim_clock.ns_per_block = ns_per_block;
	if (timeline && *timeline && atomic_load(&timeline_fd) < 0) {
		int fd = open(timeline, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		if (fd < 0)
			rc = CUDA_ERROR_FILE_NOT_FOUND;
		else
			atomic_store(&timeline_fd, fd);
	}
	pthread_mutex_unlock(&sim_clock.lock);
	return rc;
}

/* -------------------------------------------------------- init and device */

SIM_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
	CUresult rc;

	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	rc = clock_configure();
	if (rc != CUDA_SUCCESS)
		return rc;
	atomic_store(&driver_initialized, true);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SIM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = SIM_DEVICE_COUNT;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult rc = require_device(ordinal, device != NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	*device = ordinal;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult rc = require_device(dev, name && len > 0);
	size_t copy;

	if (rc != CUDA_SUCCESS)
		return rc;
	copy = strlen(SIM_DEVICE_NAME);
	if (copy > (size_t)len - 1)
		copy = (size_t)len - 1;
	memcpy(name, SIM_DEVICE_NAME, copy);
	name[copy] = '\0';
	return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- context */

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult rc = require_device(dev, pctx != NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	atomic_fetch_add(&primary_context.retain_count, 1);
	*pctx = (CUcontext)&primary_context;
	/*
	 * CUDA_SIM_RETAIN_SETS_CURRENT: as driver 580 does, the retain makes the
	 * context current from inside itself, through the exported entry point:
	 * a probe sees cuCtxSetCurrent return before the retain returns the
	 * context (whose device a tracer learns only then).
	 */
	if (getenv("CUDA_SIM_RETAIN_SETS_CURRENT")) {
		rc = cuCtxSetCurrent(*pctx);
		/* Not a tail call: the retain returns on its own, after the set (as the driver's). */
		__asm__ volatile("" ::: "memory");
	}
	return rc;
}

/* cuda.h maps this name to cuDevicePrimaryCtxRelease_v2. */
SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult rc = require_device(dev, true);
	int count;

	if (rc != CUDA_SUCCESS)
		return rc;
	count = atomic_load(&primary_context.retain_count);
	do {
		if (count <= 0)
			return CUDA_ERROR_INVALID_CONTEXT;
	} while (!atomic_compare_exchange_weak(&primary_context.retain_count,
					       &count, count - 1));
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	struct sim_context *context = (struct sim_context *)ctx;
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (context && context->magic != SIM_MAGIC_CONTEXT)
		return CUDA_ERROR_INVALID_CONTEXT;
	current_context = context;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)current_context;
	return CUDA_SUCCESS;
}

/* Waits until every stream of the context, live or destroyed, has ended its work. */
static void context_synchronize(const char *api, const void *handle)
{
	uint64_t entry_ns = now_ns(), until_ns;
	struct sim_wait wait;

	pthread_mutex_lock(&sim_clock.lock);
	until_ns = context_done_ns();
	pthread_mutex_unlock(&sim_clock.lock);
	wait = wait_until(entry_ns, until_ns);
	wait_done(&wait, api, handle);
}

SIM_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	context_synchronize("cuCtxSynchronize", NULL);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------ modules, libraries */

static bool is_ptx_identifier_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%';
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	       c == '\v';
}

/* Byte by byte, so a short image is never read past its NUL. */
static bool starts_with_bytes(const char *image, const char *magic)
{
	while (*magic && *image == *magic) {
		image++;
		magic++;
	}
	return *magic == '\0';
}

static CUresult release(uintptr_t base, unsigned int kinds);

static void free_module(struct sim_module *module)
{
	size_t i;

	if (!module)
		return;
	for (i = 0; i < module->entry_count; i++) {
		struct sim_function *entry = module->entries[i];

		if (entry->function) {
			entry->function->magic = SIM_MAGIC_DEAD;
			free(entry->function);
		}
		entry->magic = SIM_MAGIC_DEAD;
		free(entry);
	}
	free(module->entries);
	for (i = 0; i < module->shadow_count; i++)
		release(module->shadows[i].address, SIM_MEM_DEVICE);
	module->magic = SIM_MAGIC_DEAD;
	free(module);
}

_Static_assert(offsetof(struct sim_function, name_ptr) == 8, "the driver keeps the name pointer at 8");

static struct sim_function *new_function(enum sim_magic magic, const char *name,
					 size_t name_len)
{
	struct sim_function *function;

	function = calloc(1, sizeof(*function) + name_len + 1);
	if (!function)
		return NULL;
	function->magic = magic;
	memcpy(function->name, name, name_len);
	function->name[name_len] = '\0';
	function->name_ptr = function->name;
	function->impl = find_kernel_impl(function->name);
	return function;
}

static struct sim_function *find_entry(const struct sim_module *module,
				       const char *name, size_t name_len)
{
	size_t i;

	for (i = 0; i < module->entry_count; i++) {
		const char *entry_name = module->entries[i]->name;

		if (strlen(entry_name) == name_len &&
		    memcmp(entry_name, name, name_len) == 0)
			return module->entries[i];
	}
	return NULL;
}

static CUresult add_entry(struct sim_module *module, enum sim_magic entry_magic,
			  const char *name, size_t name_len, struct sim_function **added)
{
	struct sim_function **entries;
	struct sim_function *entry;

	*added = find_entry(module, name, name_len);
	if (*added)
		return CUDA_SUCCESS;
	entries = realloc(module->entries,
			  (module->entry_count + 1) * sizeof(*entries));
	if (!entries)
		return CUDA_ERROR_OUT_OF_MEMORY;
	module->entries = entries;
	entry = new_function(entry_magic, name, name_len);
	if (!entry)
		return CUDA_ERROR_OUT_OF_MEMORY;
	module->entries[module->entry_count++] = entry;
	*added = entry;
	return CUDA_SUCCESS;
}

/*
 * The stand-in for a device ring's GPU code (CUPROBE_GPU_RING): the
 * simulator cannot run the PTX the translator made, so at each launch of an
 * instrumented kernel whose module declares a ring's segments it writes
 * what gpu_warp_exits.bpf.c writes at the kernel's exit, one record per
 * warp ({block, warp, sm, pad, exit_ns}, cut to the slot's size), into
 * segment (block index % segments), by the SDK's protocol on a segment
 * (cuprobe_gpu_ring_reserve in cuprobe.bpf.h): read released, take a
 * position, count the record lost when the segment is full, else write the
 * slot and commit it with a store. The injection moves them into the
 * ring's maps at the calls that prove kernels done.
 * CUDA_SIM_RING_KILL_AT=N: the process kills itself (SIGKILL) with its Nth
 * record reserved and not committed, as a kernel cut short would leave it.
 */
static uint64_t ring_records_reserved;

static CUresult allocate(uintptr_t *out, size_t bytes, enum sim_mem_kind kind);

/*
 * The stand-in for counters' GPU code: the shadows the module declares
 * (".weak .global .align 128 .b8 __cuprobe_shadow_N[BYTES];\t// C copies of
 * W words, S bytes apart") in device memory, found by cuModuleGetGlobal;
 * with CUDA_SIM_SHADOW_ADDS=1, at each launch of an instrumented kernel
 * every word of every shadow gains the launch's thread count, in one copy
 * (launches take the copies in turn): what a program adding 1 per thread to
 * each value (gpu_threads.bpf.c, an entry and an exit count) adds.
 */
static void find_shadows(struct sim_module *module, const char *ptx)
{
	static const char declaration[] = ".weak .global .align 128 .b8 __cuprobe_shadow_";
	const char *at = ptx;
	size_t i;

	while (module->shadow_count < SIM_MAX_SHADOWS && (at = strstr(at, declaration))) {
		struct sim_shadow *s = &module->shadows[module->shadow_count];
		unsigned long long index, bytes, words, stride;
		unsigned int copies;
		int used = 0;

		at += sizeof(declaration) - 1;
		if (sscanf(at, "%llu[%llu];\t// %u copies of %llu words, %llu bytes apart%n", &index, &bytes,
			   &copies, &words, &stride, &used) != 5 || !used || !copies ||
		    copies * stride != bytes || words * 8 > stride)
			continue;
		snprintf(s->name, sizeof(s->name), "__cuprobe_shadow_%llu", index);
		if (allocate(&s->address, bytes, SIM_MEM_DEVICE) != CUDA_SUCCESS)
			continue;
		memset((void *)s->address, 0, bytes);
		s->bytes = bytes;
		s->copies = copies;
		s->words = words;
		s->stride = stride;
		module->shadow_count++;
	}
	for (i = 0; module->shadow_count && i < module->entry_count; i++)
		if (module->entries[i]->launch_param)
			module->entries[i]->shadowed = module;
}

static void add_to_shadows(const struct sim_module *module, const struct sim_launch_dims *dims)
{
	static atomic_uint launches;
	uint64_t threads = (uint64_t)dims->grid[0] * dims->grid[1] * dims->grid[2] *
			   dims->block[0] * dims->block[1] * dims->block[2];
	unsigned int turn = atomic_fetch_add(&launches, 1);
	size_t i, w;

	for (i = 0; i < module->shadow_count; i++) {
		const struct sim_shadow *s = &module->shadows[i];
		uint64_t *copy = (uint64_t *)(s->address + (turn % s->copies) * s->stride);

		for (w = 0; w < s->words; w++)
			__atomic_fetch_add(&copy[w], threads, __ATOMIC_RELAXED);
	}
}

/* A device-memory global of the module, found by cuModuleGetGlobal: its address, or 0. */
static uintptr_t module_global(struct sim_module *module, const char *name, size_t bytes)
{
	struct sim_shadow *g;

	if (module->shadow_count == SIM_MAX_SHADOWS)
		return 0;
	g = &module->shadows[module->shadow_count];
	*g = (struct sim_shadow){ .bytes = bytes, .copies = 1, .stride = bytes };
	snprintf(g->name, sizeof(g->name), "%s", name);
	if (allocate(&g->address, bytes, SIM_MEM_DEVICE) != CUDA_SUCCESS)
		return 0;
	memset((void *)g->address, 0, bytes);
	module->shadow_count++;
	return g->address;
}

/* The first ring's segments the module declares (ptx_jit.h's two lines, their layout said). */
static void find_device_ring(struct sim_module *module, const char *ptx)
{
	static const char declaration[] = ".weak .global .align 128 .b8 __cuprobe_ring_control_";
	const char *at = strstr(ptx, declaration);
	unsigned long long control_index, control_bytes, slots_index, slots_bytes, control_map, slots_map;
	unsigned long long slots_stride, control_stride;
	unsigned int segments, segment_slots, slot_bytes;
	struct sim_ring *r = &module->ring;
	char name[64];
	size_t i;
	int used = 0;

	if (!at || sscanf(at + sizeof(declaration) - 1,
			  "%llu[%llu];\t// ring of maps %llu and %llu: %u segments of %u slots of %u bytes, %llu bytes apart\n"
			  ".weak .global .align 128 .b8 __cuprobe_ring_slots_%llu[%llu];\t// control blocks %llu bytes apart%n",
			  &control_index, &control_bytes, &control_map, &slots_map, &segments, &segment_slots,
			  &slot_bytes, &slots_stride, &slots_index, &slots_bytes, &control_stride, &used) != 11 ||
	    !used || !segments || (segments & (segments - 1)) || !segment_slots ||
	    (segment_slots & (segment_slots - 1)) || slot_bytes <= sizeof(struct cuprobe_gpu_ring_slot) ||
	    control_stride < sizeof(struct cuprobe_gpu_ring_control) ||
	    slots_stride < (unsigned long long)segment_slots * slot_bytes ||
	    control_bytes != segments * control_stride || slots_bytes != segments * slots_stride)
		return;
	snprintf(name, sizeof(name), "__cuprobe_ring_control_%llu", control_index);
	r->control = module_global(module, name, control_bytes);
	snprintf(name, sizeof(name), "__cuprobe_ring_slots_%llu", slots_index);
	r->slots = r->control ? module_global(module, name, slots_bytes) : 0;
	if (!r->slots)
		return;
	r->segments = segments;
	r->segment_slots = segment_slots;
	r->slot_bytes = slot_bytes;
	r->control_stride = control_stride;
	r->slots_stride = slots_stride;
	for (i = 0; i < module->entry_count; i++)
		if (module->entries[i]->launch_param)
			module->entries[i]->ring = r;
}

/*
 * One record, as the translated cuprobe_gpu_output does it in segment c:
 * true when committed. seq: the launch's slot address (ctx->launch_slot).
 */
static bool ring_output(struct cuprobe_gpu_ring_control *c, unsigned char *slots, uint32_t capacity,
			uint32_t slot_bytes, uint64_t seq, const void *record, size_t size)
{
	uint64_t released = __atomic_load_n(&c->released, __ATOMIC_RELAXED), position;
	const char *kill_at = getenv("CUDA_SIM_RING_KILL_AT");
	struct cuprobe_gpu_ring_slot *slot;

	position = __atomic_fetch_add(&c->head, 1, __ATOMIC_RELAXED);
	if (position - released >= capacity) {
		struct cuprobe_gpu_ring_launch_lost *bucket =
			&c->lost_by_launch[seq / 8 % CUPROBE_GPU_RING_LAUNCH_BUCKETS];

		__atomic_store_n(&bucket->launch_seq, seq, __ATOMIC_RELAXED);
		__atomic_fetch_add(&bucket->lost, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->lost, 1, __ATOMIC_RELAXED);
		return false;
	}
	slot = (struct cuprobe_gpu_ring_slot *)(slots + (position & (capacity - 1)) * slot_bytes);
	slot->launch_seq = seq;
	if (kill_at && ++ring_records_reserved == strtoull(kill_at, NULL, 10))
		kill(getpid(), SIGKILL);
	memset(slot + 1, 0, slot_bytes - sizeof(*slot));
	memcpy(slot + 1, record, size < slot_bytes - sizeof(*slot) ? size : slot_bytes - sizeof(*slot));
	__atomic_store_n(&slot->commit, position + 1, __ATOMIC_RELAXED);
	return true;
}

/*
 * An entry's parameter list, from its '(' to its ')': how many, and whether
 * the last one is cuprobe's (the instrumented kernels' trailing
 * __cuprobe_launch). Returns where the list ends.
 */
static const char *parse_params(const char *p, struct sim_function *entry)
{
	const char *end = strchr(p, ')'), *last = NULL, *at;

	if (!end)
		return p;
	for (at = p; (at = strstr(at, ".param")) && at < end; at += 6) {
		entry->param_count++;
		last = at;
	}
	if (last) {
		const char *name = strstr(last, "__cuprobe_launch");

		entry->launch_param = name && name < end;
	}
	return end;
}

/*
 * The simulator cannot run device code, it only needs the kernel names:
 * collect every ".entry NAME" (and its parameters), skipping comments.
 * Binary images go through parse_image.
 */
static CUresult parse_ptx(struct sim_module *module, enum sim_magic entry_magic,
			  const char *ptx)
{
	static const char entry_directive[] = ".entry";
	const size_t directive_len = sizeof(entry_directive) - 1;
	bool seen_version = false;
	const char *p = ptx;
	CUresult rc;

	if (starts_with_bytes(ptx, "\x7f" "ELF") ||
	    starts_with_bytes(ptx, "\x50\xed\x55\xba") ||	/* fatbin */
	    starts_with_bytes(ptx, "\xb1\x43\x62\x46"))	/* fatbin wrapper */
		return CUDA_ERROR_INVALID_IMAGE;

	while (*p) {
		if (p[0] == '/' && p[1] == '/') {
			while (*p && *p != '\n')
				p++;
			continue;
		}
		if (p[0] == '/' && p[1] == '*') {
			const char *end = strstr(p + 2, "*/");

			if (!end)
				return CUDA_ERROR_INVALID_PTX;
			p = end + 2;
			continue;
		}
		if (p[0] == '.' && (p == ptx || !is_ptx_identifier_char(p[-1]))) {
			if (strncmp(p, ".version", 8) == 0 && is_space(p[8]))
				seen_version = true;
			if (strncmp(p, entry_directive, directive_len) == 0 &&
			    is_space(p[directive_len])) {
				struct sim_function *entry;
				const char *name;

				p += directive_len;
				while (is_space(*p))
					p++;
				name = p;
				while (is_ptx_identifier_char(*p))
					p++;
				if (p == name)
					return CUDA_ERROR_INVALID_PTX;
				rc = add_entry(module, entry_magic, name,
					       (size_t)(p - name), &entry);
				if (rc != CUDA_SUCCESS)
					return rc;
				while (is_space(*p))
					p++;
				if (*p == '(' && entry->param_count == 0)
					p = parse_params(p, entry);
				continue;
			}
		}
		p++;
	}
	if (seen_version) {
		find_device_ring(module, ptx);
		find_shadows(module, ptx);
	}
	return seen_version ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
}

/* ---------------------------------------------- binary images, recorded images */

#define SIM_FATBIN_MAGIC 0xba55ed50u
#define SIM_FATBIN_WRAPPER_MAGIC 0x466243b1u
#define SIM_FATBIN_COMPRESSED 0xa000u	/* LZ4 0x2000, ZSTD 0x8000 */
#define SIM_STO_CUDA_ENTRY 0x10

static uint32_t read_u32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The fatbin a wrapper (cudart's registration struct) points at. */
static const unsigned char *unwrap(const void *image)
{
	const void *data;

	if (read_u32(image) != SIM_FATBIN_WRAPPER_MAGIC)
		return image;
	memcpy(&data, (const char *)image + 8, sizeof(data));
	return data;
}

/* How many bytes the driver reads of image: its text, a fatbin's size, a cubin's extent. */
static size_t image_size(const void *image)
{
	const unsigned char *data = unwrap(image);
	uint64_t entries;
	uint16_t header;

	if (read_u32(data) == SIM_FATBIN_MAGIC) {
		memcpy(&header, data + 6, sizeof(header));
		memcpy(&entries, data + 8, sizeof(entries));
		return (size_t)header + entries;
	}
	if (!memcmp(data, ELFMAG, SELFMAG)) {
		const Elf64_Ehdr *eh = (const Elf64_Ehdr *)data;
		size_t end = eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr), i;

		if (eh->e_phoff + (size_t)eh->e_phnum * sizeof(Elf64_Phdr) > end)
			end = eh->e_phoff + (size_t)eh->e_phnum * sizeof(Elf64_Phdr);
		for (i = 0; i < eh->e_phnum; i++) {
			const Elf64_Phdr *ph = (const Elf64_Phdr *)(data + eh->e_phoff) + i;

			if (ph->p_offset + ph->p_filesz > end)
				end = ph->p_offset + ph->p_filesz;
		}
		for (i = 0; i < eh->e_shnum; i++) {
			const Elf64_Shdr *sh = (const Elf64_Shdr *)(data + eh->e_shoff) + i;

			if (sh->sh_type != SHT_NOBITS && sh->sh_offset + sh->sh_size > end)
				end = sh->sh_offset + sh->sh_size;
		}
		return end;
	}
	return strlen((const char *)data);
}

static atomic_uint images_recorded;

/*
 * CUDA_SIM_IMAGE_DIR=DIR: each image a module-loading entry point is
 * handed goes to DIR/PID-N-API.img (N from 1 in the process), as many bytes
 * as the driver reads of it (a wrapper's fatbin, PTX without its NUL): what
 * a test compares with what the program passed.
 */
static void record_image(const char *api, const void *image, size_t size)
{
	const char *dir = getenv("CUDA_SIM_IMAGE_DIR");
	char path[4096];
	size_t done = 0;
	ssize_t n;
	int fd;

	if (!dir || !image)
		return;
	snprintf(path, sizeof(path), "%s/%d-%u-%s.img", dir, (int)getpid(),
		 atomic_fetch_add(&images_recorded, 1) + 1, api);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	while (done < size && (n = write(fd, (const char *)unwrap(image) + done, size - done)) > 0)
		done += (size_t)n;
	close(fd);
}

/*
 * Each launch of a kernel whose last parameter is __cuprobe_launch appends
 * "NAME SEQ" to DIR/PID.launches: SEQ read from the launch slot that
 * parameter points at, as the kernel would read it (0: no slot).
 */
static void record_launch(const struct sim_function *function, void **params)
{
	const char *dir = getenv("CUDA_SIM_IMAGE_DIR");
	uint64_t slot = 0, seq = 0;
	char path[4096], line[1024];
	int fd, len;

	if (!dir || !params || !function->param_count || !params[function->param_count - 1])
		return;
	memcpy(&slot, params[function->param_count - 1], sizeof(slot));
	if (slot)
		memcpy(&seq, (const void *)(uintptr_t)slot, sizeof(seq));
	snprintf(path, sizeof(path), "%s/%d.launches", dir, (int)getpid());
	len = snprintf(line, sizeof(line), "%s %" PRIu64 "\n", function->name, seq);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)len) != len)
		len = -1;
	close(fd);
}

/*
 * CUDA_SIM_IMAGE_DIR/ring.committed: the records every process of the run
 * committed, one shared 8-byte counter, so a test knows what was written.
 */
static uint64_t *committed_counter(void)
{
	static uint64_t *counter;
	const char *dir = getenv("CUDA_SIM_IMAGE_DIR");
	char path[4096];
	void *mapped;
	int fd;

	if (counter || !dir)
		return counter;
	snprintf(path, sizeof(path), "%s/ring.committed", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, sizeof(uint64_t)) == 0) {
		mapped = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (mapped != MAP_FAILED)
			counter = mapped;
	}
	close(fd);
	return counter;
}

/* gpu_warp_exits's records for one launch: one per warp of every block. */
static void write_ring_records(const struct sim_function *function,
			       const struct sim_launch_dims *dims, void **params)
{
	const struct sim_ring *r = function->ring;
	struct { uint32_t block, warp, sm, pad; uint64_t exit_ns; } record = { 0 };
	uint64_t blocks = (uint64_t)dims->grid[0] * dims->grid[1] * dims->grid[2];
	uint64_t threads = (uint64_t)dims->block[0] * dims->block[1] * dims->block[2];
	uint64_t slot = 0, *committed = committed_counter(), b, w;
	struct timespec now;

	if (!params || !params[function->param_count - 1])
		return;
	/* The launch's slot address: what the translated code records (ctx->launch_slot). */
	memcpy(&slot, params[function->param_count - 1], sizeof(slot));
	for (b = 0; b < blocks; b++)
		for (w = 0; w < (threads + 31) / 32; w++) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			record.block = (uint32_t)b;
			record.warp = (uint32_t)w;
			record.sm = (uint32_t)(b % 132);
			record.exit_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
			if (ring_output((void *)(r->control + (b & (r->segments - 1)) * r->control_stride),
					(void *)(r->slots + (b & (r->segments - 1)) * r->slots_stride),
					r->segment_slots, r->slot_bytes, slot, &record, sizeof(record)) &&
			    committed)
				__atomic_fetch_add(committed, 1, __ATOMIC_SEQ_CST);
		}
}

/* A cubin's kernels: its STT_FUNC symbols marked as entries. */
static CUresult parse_cubin(struct sim_module *module, enum sim_magic entry_magic,
			    const unsigned char *data)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)data;
	const Elf64_Shdr *sections = (const Elf64_Shdr *)(data + eh->e_shoff);
	struct sim_function *entry;
	size_t i, j;
	CUresult rc;

	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *strtab;
		const Elf64_Sym *syms;

		if (sections[i].sh_type != SHT_SYMTAB)
			continue;
		strtab = &sections[sections[i].sh_link];
		syms = (const Elf64_Sym *)(data + sections[i].sh_offset);
		for (j = 0; j < sections[i].sh_size / sizeof(*syms); j++) {
			const char *name = (const char *)data + strtab->sh_offset + syms[j].st_name;

			if (ELF64_ST_TYPE(syms[j].st_info) != STT_FUNC ||
			    !(syms[j].st_other & SIM_STO_CUDA_ENTRY))
				continue;
			rc = add_entry(module, entry_magic, name, strlen(name), &entry);
			if (rc != CUDA_SUCCESS)
				return rc;
		}
	}
	return CUDA_SUCCESS;
}

/*
 * A fatbin's kernels, from its uncompressed PTX and ELF entries (compressed
 * ones are skipped: the simulator has no decompressor, and the names are
 * in every entry alike).
 */
static CUresult parse_fatbin(struct sim_module *module, enum sim_magic entry_magic,
			     const unsigned char *data)
{
	size_t at, end = image_size(data);
	uint16_t header;
	CUresult rc = CUDA_SUCCESS;

	memcpy(&header, data + 6, sizeof(header));
	for (at = header; rc == CUDA_SUCCESS && at + 64 <= end;) {
		const unsigned char *e = data + at;
		uint64_t stored, flags;
		uint32_t entry_header = read_u32(e + 4);
		uint16_t kind;

		memcpy(&kind, e, sizeof(kind));
		memcpy(&stored, e + 8, sizeof(stored));
		memcpy(&flags, e + 40, sizeof(flags));
		if (entry_header < 64 || at + entry_header + stored > end)
			return CUDA_ERROR_INVALID_IMAGE;
		if (!(flags & SIM_FATBIN_COMPRESSED) && kind == 1) {
			char *text = calloc(1, stored + 1);

			if (!text)
				return CUDA_ERROR_OUT_OF_MEMORY;
			memcpy(text, e + entry_header, stored);
			rc = parse_ptx(module, entry_magic, text);
			free(text);
		} else if (!(flags & SIM_FATBIN_COMPRESSED) && kind == 2) {
			rc = parse_cubin(module, entry_magic, e + entry_header);
		}
		at += entry_header + stored;
	}
	return rc;
}

static CUresult parse_image(struct sim_module *module, enum sim_magic entry_magic,
			    const void *image)
{
	const unsigned char *data = unwrap(image);

	if (!data)
		return CUDA_ERROR_INVALID_IMAGE;
	if (read_u32(data) == SIM_FATBIN_MAGIC)
		return parse_fatbin(module, entry_magic, data);
	if (!memcmp(data, ELFMAG, SELFMAG))
		return parse_cubin(module, entry_magic, data);
	return parse_ptx(module, entry_magic, image);
}

static CUresult load_module(struct sim_module **out, enum sim_magic magic,
			    const void *image)
{
	enum sim_magic entry_magic = magic == SIM_MAGIC_LIBRARY ?
				     SIM_MAGIC_KERNEL : SIM_MAGIC_FUNCTION;
	struct sim_module *module;
	CUresult rc;

	if (!out || !image)
		return CUDA_ERROR_INVALID_VALUE;
	module = calloc(1, sizeof(*module));
	if (!module)
		return CUDA_ERROR_OUT_OF_MEMORY;
	module->magic = magic;
	rc = parse_image(module, entry_magic, image);
	if (rc != CUDA_SUCCESS) {
		free_module(module);
		return rc;
	}
	*out = module;
	return CUDA_SUCCESS;
}

static CUresult get_entry(struct sim_function **out, const void *handle,
			  enum sim_magic magic, const char *name)
{
	struct sim_module *module = module_from_handle(handle, magic);
	struct sim_function *entry;

	if (!out || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!module)
		return CUDA_ERROR_INVALID_HANDLE;
	entry = find_entry(module, name, strlen(name));
	if (!entry)
		return CUDA_ERROR_NOT_FOUND;
	*out = entry;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (image)
		record_image("cuModuleLoadData", image, image_size(image));
	return load_module((struct sim_module **)module, SIM_MAGIC_MODULE, image);
}

/* JIT options are accepted and ignored: there is no JIT. */
SIM_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
					       unsigned int numOptions, CUjit_option *options,
					       void **optionValues)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (numOptions && (!options || !optionValues))
		return CUDA_ERROR_INVALID_VALUE;
	if (image)
		record_image("cuModuleLoadDataEx", image, image_size(image));
	return load_module((struct sim_module **)module, SIM_MAGIC_MODULE, image);
}

SIM_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (fatCubin)
		record_image("cuModuleLoadFatBinary", fatCubin, image_size(fatCubin));
	return load_module((struct sim_module **)module, SIM_MAGIC_MODULE, fatCubin);
}

SIM_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
						const char *name)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	return get_entry((struct sim_function **)hfunc, hmod, SIM_MAGIC_MODULE,
			 name);
}

SIM_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	struct sim_module *module = module_from_handle(hmod, SIM_MAGIC_MODULE);
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!module)
		return CUDA_ERROR_INVALID_HANDLE;
	free_module(module);
	return CUDA_SUCCESS;
}

/* Only cuprobe's counter shadows (find_shadows): the simulator keeps no other globals. */
SIM_EXPORT CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
					      const char *name)
{
	const struct sim_module *module = (const struct sim_module *)hmod;
	CUresult rc = require_context();
	size_t i;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!module || (module->magic != SIM_MAGIC_MODULE && module->magic != SIM_MAGIC_LIBRARY))
		return CUDA_ERROR_INVALID_HANDLE;
	for (i = 0; i < module->shadow_count; i++)
		if (!strcmp(module->shadows[i].name, name)) {
			if (dptr)
				*dptr = (CUdeviceptr)module->shadows[i].address;
			if (bytes)
				*bytes = module->shadows[i].bytes;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_NOT_FOUND;
}

/* Libraries are context-independent, as in the real driver. Options are accepted and ignored: there is no JIT. */
static CUresult load_library(CUlibrary *library, const void *code, bool bad_jit_options,
			     bool bad_library_options)
{
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (bad_jit_options || bad_library_options)
		return CUDA_ERROR_INVALID_VALUE;
	return load_module((struct sim_module **)library, SIM_MAGIC_LIBRARY, code);
}

SIM_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code,
					      CUjit_option *jitOptions,
					      void **jitOptionsValues,
					      unsigned int numJitOptions,
					      CUlibraryOption *libraryOptions,
					      void **libraryOptionValues,
					      unsigned int numLibraryOptions)
{
	if (code)
		record_image("cuLibraryLoadData", code, image_size(code));
	return load_library(library, code, numJitOptions && (!jitOptions || !jitOptionsValues),
			    numLibraryOptions && (!libraryOptions || !libraryOptionValues));
}

SIM_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library,
					       const char *name)
{
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	return get_entry((struct sim_function **)pKernel, library,
			 SIM_MAGIC_LIBRARY, name);
}

/* The library's module in the current context: the library itself here (one context). */
SIM_EXPORT CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pMod)
		return CUDA_ERROR_INVALID_VALUE;
	if (!module_from_handle(library, SIM_MAGIC_LIBRARY))
		return CUDA_ERROR_INVALID_HANDLE;
	*pMod = (CUmodule)library;
	return CUDA_SUCCESS;
}

/*
 * Returns a handle distinct from the CUkernel, like the real driver's
 * per-context function, so a tracer has to follow the alias.
 */
SIM_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	struct sim_function *sim_kernel = (struct sim_function *)kernel;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_kernel || sim_kernel->magic != SIM_MAGIC_KERNEL)
		return CUDA_ERROR_INVALID_HANDLE;

	pthread_mutex_lock(&kernel_function_lock);
	if (!sim_kernel->function) {
		sim_kernel->function = new_function(SIM_MAGIC_FUNCTION,
						    sim_kernel->name,
						    strlen(sim_kernel->name));
		if (sim_kernel->function) {
			sim_kernel->function->param_count = sim_kernel->param_count;
			sim_kernel->function->launch_param = sim_kernel->launch_param;
		}
	}
	*pFunc = (CUfunction)sim_kernel->function;
	pthread_mutex_unlock(&kernel_function_lock);
	return *pFunc ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	struct sim_module *module = module_from_handle(library, SIM_MAGIC_LIBRARY);
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!module)
		return CUDA_ERROR_INVALID_HANDLE;
	free_module(module);
	return CUDA_SUCCESS;
}

/* ----------------------------------------------------------------- memory */

static CUresult allocate(uintptr_t *out, size_t bytes, enum sim_mem_kind kind)
{
	struct sim_allocation *allocation;
	size_t rounded;
	void *memory;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!out || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* aligned_alloc wants a multiple of the alignment. */
	rounded = (bytes + SIM_ALLOC_ALIGNMENT - 1) & ~(size_t)(SIM_ALLOC_ALIGNMENT - 1);
	if (rounded < bytes)
		return CUDA_ERROR_OUT_OF_MEMORY;
	allocation = malloc(sizeof(*allocation));
	memory = aligned_alloc(SIM_ALLOC_ALIGNMENT, rounded);
	if (!allocation || !memory) {
		free(allocation);
		free(memory);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	allocation->base = (uintptr_t)memory;
	allocation->bytes = bytes;
	allocation->kind = kind;

	pthread_mutex_lock(&allocations_lock);
	allocation->next = allocations;
	allocations = allocation;
	pthread_mutex_unlock(&allocations_lock);

	*out = (uintptr_t)memory;
	return CUDA_SUCCESS;
}

static CUresult release(uintptr_t base, unsigned int kinds)
{
	struct sim_allocation **link, *allocation = NULL;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!base)
		return CUDA_SUCCESS; /* freeing NULL is a no-op */

	pthread_mutex_lock(&allocations_lock);
	for (link = &allocations; *link; link = &(*link)->next) {
		if ((*link)->base == base && ((*link)->kind & kinds)) {
			allocation = *link;
			*link = allocation->next;
			break;
		}
	}
	pthread_mutex_unlock(&allocations_lock);

	if (!allocation)
		return CUDA_ERROR_INVALID_VALUE;
	free((void *)allocation->base);
	free(allocation);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	uintptr_t address;
	CUresult rc;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	rc = allocate(&address, bytesize, SIM_MEM_DEVICE);
	if (rc == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)address;
	return rc;
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
					      unsigned int flags)
{
	uintptr_t address;
	CUresult rc;

	if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	rc = allocate(&address, bytesize, SIM_MEM_MANAGED);
	if (rc == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)address;
	return rc;
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize)
{
	uintptr_t address;
	CUresult rc;

	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	rc = allocate(&address, bytesize, SIM_MEM_HOST);
	if (rc == CUDA_SUCCESS)
		*pp = (void *)address;
	return rc;
}

SIM_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr dptr)
{
	return release((uintptr_t)dptr, SIM_MEM_FREEABLE);
}

SIM_EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
	return release((uintptr_t)p, SIM_MEM_HOST);
}

/* Checks a copy the way the GPU would see it, then does it on the CPU. */
static CUresult copy(uintptr_t dst, unsigned int dst_kinds, uintptr_t src,
		     unsigned int src_kinds, size_t bytes, CUstream stream)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!stream_is_valid(stream))
		return CUDA_ERROR_INVALID_HANDLE;
	if (bytes == 0)
		return CUDA_SUCCESS;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	if ((dst_kinds && !range_is_allocated(dst, bytes, dst_kinds)) ||
	    (src_kinds && !range_is_allocated(src, bytes, src_kinds)))
		return CUDA_ERROR_INVALID_VALUE;
	memmove((void *)dst, (const void *)src, bytes);
	return CUDA_SUCCESS;
}

/* Device memory proper: not host memory, not managed (Unified) memory. */
static bool is_device_memory(uintptr_t address)
{
	return range_is_allocated(address, 1, SIM_MEM_DEVICE | SIM_MEM_VMM);
}

/*
 * How a copy is ordered (CUDA's "API synchronization behavior"). An async
 * copy is zero-duration work on its stream. A synchronous copy is work on
 * the legacy stream: between two device buffers the host does not wait for
 * it; with host or managed memory on either side the host first waits for
 * what a legacy-stream synchronization would, then copies, and the copy
 * gets a sync truth line.
 */
struct sim_copy_order {
	const char *sync_api;	/* NULL: an async copy */
	bool waited;
	struct sim_wait wait;
};

static CUresult copy_order_begin(struct sim_copy_order *order, const char *sync_api,
				 CUstream stream, uintptr_t dst, uintptr_t src)
{
	CUresult rc = require_context();

	*order = (struct sim_copy_order){ .sync_api = sync_api };
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!sync_api)
		return order_on_stream(stream, false);
	if (is_device_memory(dst) && is_device_memory(src))
		return order_on_stream(CU_STREAM_LEGACY, false);
	order->wait = legacy_copy_wait();
	order->waited = true;
	return CUDA_SUCCESS;
}

static CUresult copy_order_end(const struct sim_copy_order *order, CUresult rc)
{
	if (order->waited)
		wait_done(&order->wait, order->sync_api, NULL);
	return rc;
}

/* sync_api: the synchronous entry point's name; NULL: async on stream. */
static CUresult copy_ordered(const char *sync_api, CUstream stream, uintptr_t dst,
			     unsigned int dst_kinds, uintptr_t src, unsigned int src_kinds,
			     size_t bytes)
{
	struct sim_copy_order order;
	CUresult rc = copy_order_begin(&order, sync_api, stream, dst, src);

	if (rc != CUDA_SUCCESS)
		return rc;
	return copy_order_end(&order, copy(dst, dst_kinds, src, src_kinds, bytes, stream));
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost,
					 size_t ByteCount)
{
	return copy_ordered("cuMemcpyHtoD_v2", NULL, (uintptr_t)dstDevice,
			    SIM_MEM_DEVICE_VISIBLE, (uintptr_t)srcHost, 0, ByteCount);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice,
					 size_t ByteCount)
{
	return copy_ordered("cuMemcpyDtoH_v2", NULL, (uintptr_t)dstHost, 0,
			    (uintptr_t)srcDevice, SIM_MEM_DEVICE_VISIBLE, ByteCount);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
					 size_t ByteCount)
{
	return copy_ordered("cuMemcpyDtoD_v2", NULL, (uintptr_t)dstDevice,
			    SIM_MEM_DEVICE_VISIBLE, (uintptr_t)srcDevice,
			    SIM_MEM_DEVICE_VISIBLE, ByteCount);
}

/* The data moves in the call; the copy's place in the stream is zero-duration work. */
SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice,
					      const void *srcHost,
					      size_t ByteCount, CUstream hStream)
{
	return copy_ordered(NULL, hStream, (uintptr_t)dstDevice, SIM_MEM_DEVICE_VISIBLE,
			    (uintptr_t)srcHost, 0, ByteCount);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice,
					      size_t ByteCount, CUstream hStream)
{
	return copy_ordered(NULL, hStream, (uintptr_t)dstHost, 0, (uintptr_t)srcDevice,
			    SIM_MEM_DEVICE_VISIBLE, ByteCount);
}

/* Unified addressing: either side may be host or device memory. */
SIM_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src,
				     size_t ByteCount)
{
	return copy_ordered("cuMemcpy", NULL, (uintptr_t)dst, 0, (uintptr_t)src, 0, ByteCount);
}

/* ---------------------------------------------------------------- streams */

SIM_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	struct sim_stream *stream;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	size_t i;

	if (!phStream || (Flags != CU_STREAM_DEFAULT && Flags != CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_clock.lock);
	for (i = 0; i < SIM_MAX_STREAMS; i++) {
		stream = &stream_table[(stream_cursor + i) % SIM_MAX_STREAMS];
		if (stream->magic != SIM_MAGIC_STREAM)
			break;
	}
	if (i == SIM_MAX_STREAMS) {
		pthread_mutex_unlock(&sim_clock.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	stream_cursor = (stream_cursor + i + 1) % SIM_MAX_STREAMS;
	*stream = (struct sim_stream){
		.magic = SIM_MAGIC_STREAM,
		.flags = Flags,
		.queue.kind = Flags == CU_STREAM_NON_BLOCKING ? SIM_QUEUE_NON_BLOCKING
							      : SIM_QUEUE_BLOCKING,
	};
	queue_link(&stream->queue);
	pthread_mutex_unlock(&sim_clock.lock);
	*phStream = (CUstream)stream;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
	struct sim_stream *stream = stream_from_handle(hStream);
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	/* As in CUDA, it returns at once; its pending work still ends when it would. */
	pthread_mutex_lock(&sim_clock.lock);
	if (!stream || stream->magic != SIM_MAGIC_STREAM) {
		rc = CUDA_ERROR_INVALID_HANDLE;
	} else {
		queue_retire(&stream->queue);
		stream->magic = SIM_MAGIC_DEAD;
	}
	pthread_mutex_unlock(&sim_clock.lock);
	return rc;
}

static CUresult stream_synchronize(CUstream stream, bool per_thread_default, const char *api)
{
	uint64_t entry_ns = now_ns(), until_ns;
	struct sim_wait wait;
	CUresult rc = require_context();

	if (rc == CUDA_SUCCESS)
		rc = stream_done_ns(stream, per_thread_default, &until_ns);
	if (rc != CUDA_SUCCESS)
		return rc;
	wait = wait_until(entry_ns, until_ns);
	wait_done(&wait, api, stream);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	return stream_synchronize(hStream, false, "cuStreamSynchronize");
}

SIM_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
	return stream_synchronize(hStream, true, "cuStreamSynchronize_ptsz");
}

/* --------------------------------------------------------------- launches */

static CUresult check_dims(const struct sim_launch_dims *dims)
{
	const unsigned int *grid = dims->grid, *block = dims->block;

	if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2])
		return CUDA_ERROR_INVALID_VALUE;
	if (grid[0] > SIM_MAX_GRID_X || grid[1] > SIM_MAX_GRID_YZ ||
	    grid[2] > SIM_MAX_GRID_YZ)
		return CUDA_ERROR_INVALID_VALUE;
	if (block[0] > SIM_MAX_BLOCK_X || block[1] > SIM_MAX_BLOCK_Y ||
	    block[2] > SIM_MAX_BLOCK_Z ||
	    (uint64_t)block[0] * block[1] * block[2] > SIM_MAX_THREADS_PER_BLOCK)
		return CUDA_ERROR_INVALID_VALUE;
	if (dims->shared_mem_bytes > SIM_MAX_DYNAMIC_SHARED_BYTES)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, const struct sim_launch_dims *dims,
		       CUstream stream, bool per_thread_default, void **params, void **extra)
{
	const struct sim_function *function = (const struct sim_function *)f;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	/* A CUkernel may stand in for a CUfunction. */
	if (!function || (function->magic != SIM_MAGIC_FUNCTION &&
			  function->magic != SIM_MAGIC_KERNEL))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!stream_is_valid(stream))
		return CUDA_ERROR_INVALID_HANDLE;
	rc = check_dims(dims);
	if (rc != CUDA_SUCCESS)
		return rc;
	/* Parameters packed into a buffer through `extra` are not simulated. */
	if (extra)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (function->launch_param)
		record_launch(function, params);
	if (function->ring)
		write_ring_records(function, dims, params);
	if (function->shadowed && getenv("CUDA_SIM_SHADOW_ADDS"))
		add_to_shadows(function->shadowed, dims);
	/* The entry exists in the image, but the simulator cannot run it. */
	if (!function->impl)
		return CUDA_ERROR_NOT_SUPPORTED;

	/* The data now; the time on the stream's queue. */
	pthread_mutex_lock(&device_lock);
	rc = function->impl->run(dims, params);
	pthread_mutex_unlock(&device_lock);
	if (rc != CUDA_SUCCESS)
		return rc;
	return clock_kernel(f, stream, per_thread_default, dims->grid);
}

/*
 * Every launch entry point has its _ptsz twin, where stream 0 is the calling
 * thread's per-thread default stream. cuda.h declares the twins only for
 * per-thread builds, so each one is checked against its plain signature.
 */
#define SIM_SAME_SIGNATURE(twin, plain)						\
	_Static_assert(__builtin_types_compatible_p(__typeof__(twin), __typeof__(plain)), \
		       #twin " has the signature of " #plain)

static CUresult launch_kernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			      unsigned int gridDimZ, unsigned int blockDimX,
			      unsigned int blockDimY, unsigned int blockDimZ,
			      unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
			      void **extra, bool per_thread_default)
{
	const struct sim_launch_dims dims = {
		.grid = { gridDimX, gridDimY, gridDimZ },
		.block = { blockDimX, blockDimY, blockDimZ },
		.shared_mem_bytes = sharedMemBytes,
	};

	return launch(f, &dims, hStream, per_thread_default, kernelParams, extra);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f,
					   unsigned int gridDimX,
					   unsigned int gridDimY,
					   unsigned int gridDimZ,
					   unsigned int blockDimX,
					   unsigned int blockDimY,
					   unsigned int blockDimZ,
					   unsigned int sharedMemBytes,
					   CUstream hStream,
					   void **kernelParams,
					   void **extra)
{
	return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, kernelParams, extra, false);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f,
						unsigned int gridDimX,
						unsigned int gridDimY,
						unsigned int gridDimZ,
						unsigned int blockDimX,
						unsigned int blockDimY,
						unsigned int blockDimZ,
						unsigned int sharedMemBytes,
						CUstream hStream,
						void **kernelParams,
						void **extra)
{
	return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, kernelParams, extra, true);
}
SIM_SAME_SIGNATURE(cuLaunchKernel_ptsz, cuLaunchKernel);

static CUresult launch_kernel_ex(const CUlaunchConfig *config, CUfunction f,
				 void **kernelParams, void **extra, bool per_thread_default)
{
	struct sim_launch_dims dims;

	if (!config || (config->numAttrs && !config->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	/* Launch attributes change scheduling only, which the CPU ignores. */
	dims = (struct sim_launch_dims){
		.grid = { config->gridDimX, config->gridDimY, config->gridDimZ },
		.block = { config->blockDimX, config->blockDimY, config->blockDimZ },
		.shared_mem_bytes = config->sharedMemBytes,
	};
	return launch(f, &dims, config->hStream, per_thread_default, kernelParams, extra);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config,
					     CUfunction f,
					     void **kernelParams,
					     void **extra)
{
	return launch_kernel_ex(config, f, kernelParams, extra, false);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config,
						  CUfunction f,
						  void **kernelParams,
						  void **extra)
{
	return launch_kernel_ex(config, f, kernelParams, extra, true);
}
SIM_SAME_SIGNATURE(cuLaunchKernelEx_ptsz, cuLaunchKernelEx);

/* ------------------------------------------ more launches, sync, events */

SIM_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f,
						      unsigned int gridDimX,
						      unsigned int gridDimY,
						      unsigned int gridDimZ,
						      unsigned int blockDimX,
						      unsigned int blockDimY,
						      unsigned int blockDimZ,
						      unsigned int sharedMemBytes,
						      CUstream hStream,
						      void **kernelParams)
{
	return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, kernelParams, NULL, false);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f,
							   unsigned int gridDimX,
							   unsigned int gridDimY,
							   unsigned int gridDimZ,
							   unsigned int blockDimX,
							   unsigned int blockDimY,
							   unsigned int blockDimZ,
							   unsigned int sharedMemBytes,
							   CUstream hStream,
							   void **kernelParams)
{
	return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, kernelParams, NULL, true);
}
SIM_SAME_SIGNATURE(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel);

/*
 * The host function runs in the call, not when the stream reaches it: it is
 * zero-duration work that keeps the stream's order.
 */
static CUresult launch_host_func(CUstream hStream, CUhostFn fn, void *userData,
				 bool per_thread_default)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	rc = order_on_stream(hStream, per_thread_default);
	if (rc != CUDA_SUCCESS)
		return rc;
	fn(userData);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	return launch_host_func(hStream, fn, userData, false);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
	return launch_host_func(hStream, fn, userData, true);
}
SIM_SAME_SIGNATURE(cuLaunchHostFunc_ptsz, cuLaunchHostFunc);
SIM_SAME_SIGNATURE(cuStreamSynchronize_ptsz, cuStreamSynchronize);

SIM_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
	const struct sim_context *context = (const struct sim_context *)ctx;
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!context)
		rc = require_context();
	else if (context->magic != SIM_MAGIC_CONTEXT)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (rc != CUDA_SUCCESS)
		return rc;
	context_synchronize("cuCtxSynchronize_v2", ctx);
	return CUDA_SUCCESS;
}

static CUresult stream_query(CUstream hStream, bool per_thread_default)
{
	uint64_t done_ns;
	CUresult rc = require_context();

	if (rc == CUDA_SUCCESS)
		rc = stream_done_ns(hStream, per_thread_default, &done_ns);
	if (rc != CUDA_SUCCESS)
		return rc;
	return now_ns() >= done_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
	return stream_query(hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
	return stream_query(hStream, true);
}
SIM_SAME_SIGNATURE(cuStreamQuery_ptsz, cuStreamQuery);

/* ready_ns is under sim_clock.lock. */
struct sim_event {
	enum sim_magic magic;
	unsigned int flags;
	bool recorded;		/* never recorded: complete, as in CUDA */
	uint64_t ready_ns;	/* when the work it captured ends */
};

static bool event_is_valid(CUevent event)
{
	const struct sim_event *sim_event = (const struct sim_event *)event;

	return sim_event && sim_event->magic == SIM_MAGIC_EVENT;
}

SIM_EXPORT CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct sim_event *event;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!phEvent)
		return CUDA_ERROR_INVALID_VALUE;
	event = calloc(1, sizeof(*event));
	if (!event)
		return CUDA_ERROR_OUT_OF_MEMORY;
	event->magic = SIM_MAGIC_EVENT;
	event->flags = Flags;
	*phEvent = (CUevent)event;
	return CUDA_SUCCESS;
}

/* cuda.h maps this name to cuEventDestroy_v2. */
SIM_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
	struct sim_event *event = (struct sim_event *)hEvent;

	if (!event_is_valid(hEvent))
		return CUDA_ERROR_INVALID_HANDLE;
	event->magic = SIM_MAGIC_DEAD;
	free(event);
	return CUDA_SUCCESS;
}

static CUresult event_on_stream(CUevent hEvent, CUstream hStream)
{
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!event_is_valid(hEvent) || !stream_is_valid(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	return CUDA_SUCCESS;
}

/*
 * A record is zero-duration work on the stream: the event is ready when the
 * stream reaches it, that is at the end of the stream's work so far (for the
 * legacy stream, of the blocking streams' work too), or at the record if the
 * stream is idle.
 */
static CUresult event_record(CUevent hEvent, CUstream hStream, bool per_thread_default)
{
	struct sim_event *event = (struct sim_event *)hEvent;
	struct sim_queue *queue;
	struct sim_work work;
	CUresult rc = event_on_stream(hEvent, hStream);

	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_mutex_lock(&sim_clock.lock);
	queue = queue_of(hStream, per_thread_default);
	if (queue) {
		work = enqueue(queue, 0, 0);
		event->recorded = true;
		event->ready_ns = work.end_ns;
		timeline_write("event pid=%ld tid=%ld stream=0x%" PRIxPTR " event=0x%" PRIxPTR
			       " record_ns=%" PRIu64 " ready_ns=%" PRIu64 "\n",
			       (long)getpid(), thread_id(), (uintptr_t)hStream,
			       (uintptr_t)hEvent, work.launch_ns, work.end_ns);
	}
	pthread_mutex_unlock(&sim_clock.lock);
	return queue ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return event_record(hEvent, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	return event_record(hEvent, hStream, true);
}
SIM_SAME_SIGNATURE(cuEventRecord_ptsz, cuEventRecord);

/* Record flags (CU_EVENT_RECORD_EXTERNAL) only matter inside graphs. */
SIM_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream,
						   unsigned int flags)
{
	return event_record(hEvent, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
							unsigned int flags)
{
	return event_record(hEvent, hStream, true);
}
SIM_SAME_SIGNATURE(cuEventRecordWithFlags_ptsz, cuEventRecordWithFlags);

/* Later work of the stream starts no earlier than the event's time (none if never recorded). */
static CUresult stream_wait_event(CUstream hStream, CUevent hEvent, bool per_thread_default)
{
	const struct sim_event *event = (const struct sim_event *)hEvent;
	struct sim_queue *queue;
	CUresult rc = event_on_stream(hEvent, hStream);

	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_mutex_lock(&sim_clock.lock);
	queue = queue_of(hStream, per_thread_default);
	if (queue)
		enqueue(queue, event->recorded ? event->ready_ns : 0, 0);
	pthread_mutex_unlock(&sim_clock.lock);
	return queue ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, false);
}

SIM_EXPORT CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent,
						   unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, true);
}
SIM_SAME_SIGNATURE(cuStreamWaitEvent_ptsz, cuStreamWaitEvent);

static CUresult context_and_event(CUcontext hCtx, CUevent hEvent)
{
	const struct sim_context *context = (const struct sim_context *)hCtx;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!context || context->magic != SIM_MAGIC_CONTEXT)
		return CUDA_ERROR_INVALID_CONTEXT;
	return event_is_valid(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The event captures every stream's work so far: ready when the context would be synchronized. */
SIM_EXPORT CUresult CUDAAPI cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)
{
	struct sim_event *event = (struct sim_event *)hEvent;
	CUresult rc = context_and_event(hCtx, hEvent);

	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_mutex_lock(&sim_clock.lock);
	event->recorded = true;
	event->ready_ns = max_u64(now_ns(), context_done_ns());
	pthread_mutex_unlock(&sim_clock.lock);
	return CUDA_SUCCESS;
}

/* Every stream's later work waits for the event (none if it was never recorded). */
SIM_EXPORT CUresult CUDAAPI cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)
{
	const struct sim_event *event = (const struct sim_event *)hEvent;
	CUresult rc = context_and_event(hCtx, hEvent);

	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_mutex_lock(&sim_clock.lock);
	if (event->recorded)
		sim_clock.context_wait_ns = max_u64(sim_clock.context_wait_ns, event->ready_ns);
	pthread_mutex_unlock(&sim_clock.lock);
	return CUDA_SUCCESS;
}

static uint64_t event_ready_ns(const struct sim_event *event)
{
	uint64_t ready_ns;

	pthread_mutex_lock(&sim_clock.lock);
	ready_ns = event->recorded ? event->ready_ns : 0;
	pthread_mutex_unlock(&sim_clock.lock);
	return ready_ns;
}

SIM_EXPORT CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	if (!event_is_valid(hEvent))
		return CUDA_ERROR_INVALID_HANDLE;
	return now_ns() >= event_ready_ns((const struct sim_event *)hEvent) ? CUDA_SUCCESS
									     : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	uint64_t entry_ns = now_ns();
	struct sim_wait wait;

	if (!event_is_valid(hEvent))
		return CUDA_ERROR_INVALID_HANDLE;
	wait = wait_until(entry_ns, event_ready_ns((const struct sim_event *)hEvent));
	wait_done(&wait, "cuEventSynchronize", hEvent);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ memsets */

/*
 * sync_api: the synchronous entry point's name; NULL: async on stream. A
 * synchronous memset is work on the legacy stream that the host waits for
 * only when it targets managed memory (CUDA's "API synchronization
 * behavior"); an async one is zero-duration work on its stream.
 */
static CUresult fill(uintptr_t dst, size_t pitch, unsigned int value, unsigned int size,
		     size_t width, size_t height, CUstream stream, const char *sync_api)
{
	struct sim_wait wait;
	bool waited = false;
	size_t row, i;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!stream_is_valid(stream))
		return CUDA_ERROR_INVALID_HANDLE;
	if (sync_api && range_is_allocated(dst, 1, SIM_MEM_MANAGED)) {
		wait = legacy_copy_wait();
		waited = true;
	} else {
		rc = order_on_stream(sync_api ? CU_STREAM_LEGACY : stream, false);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	if (!width || !height)
		rc = CUDA_SUCCESS;
	else if (pitch < width * size ||
		 !range_is_allocated(dst, pitch * (height - 1) + width * size,
				     SIM_MEM_DEVICE_VISIBLE))
		rc = CUDA_ERROR_INVALID_VALUE;
	for (row = 0; rc == CUDA_SUCCESS && row < height; row++) {
		unsigned char *p = (unsigned char *)(dst + row * pitch);

		for (i = 0; i < width; i++)
			memcpy(p + i * size, &value, size); /* little-endian: the low bytes */
	}
	if (waited)
		wait_done(&wait, sync_api, NULL);
	return rc;
}

/* cuda.h maps the synchronous names to their _v2 entry points. */
SIM_EXPORT CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n)
{ return fill(d, n, v, 1, n, 1, NULL, "cuMemsetD8_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD16(CUdeviceptr d, unsigned short v, size_t n)
{ return fill(d, 2 * n, v, 2, n, 1, NULL, "cuMemsetD16_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD32(CUdeviceptr d, unsigned int v, size_t n)
{ return fill(d, 4 * n, v, 4, n, 1, NULL, "cuMemsetD32_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{ return fill(d, n, v, 1, n, 1, s, NULL); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{ return fill(d, 2 * n, v, 2, n, 1, s, NULL); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{ return fill(d, 4 * n, v, 4, n, 1, s, NULL); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD2D8(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h)
{ return fill(d, p, v, 1, w, h, NULL, "cuMemsetD2D8_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD2D16(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h)
{ return fill(d, p, v, 2, w, h, NULL, "cuMemsetD2D16_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD2D32(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h)
{ return fill(d, p, v, 4, w, h, NULL, "cuMemsetD2D32_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w,
					      size_t h, CUstream s)
{ return fill(d, p, v, 1, w, h, s, NULL); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w,
					       size_t h, CUstream s)
{ return fill(d, p, v, 2, w, h, s, NULL); }
SIM_EXPORT CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned int v, size_t w,
					       size_t h, CUstream s)
{ return fill(d, p, v, 4, w, h, s, NULL); }

/* ------------------------------------------------------ more copies */

/* The address of one side of a 2D/3D copy; arrays are not simulated. */
static CUresult side_address(CUmemorytype type, const void *host, CUdeviceptr device,
			     uintptr_t *address, unsigned int *kinds)
{
	switch (type) {
	case CU_MEMORYTYPE_HOST:
		*address = (uintptr_t)host;
		*kinds = 0;
		return CUDA_SUCCESS;
	case CU_MEMORYTYPE_DEVICE:
		*address = (uintptr_t)device;
		*kinds = SIM_MEM_DEVICE_VISIBLE;
		return CUDA_SUCCESS;
	case CU_MEMORYTYPE_UNIFIED:
		*address = (uintptr_t)device;
		*kinds = 0;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

static CUresult copy_rows(uintptr_t dst, unsigned int dst_kinds, size_t dst_pitch, uintptr_t src,
			  unsigned int src_kinds, size_t src_pitch, size_t width, size_t rows,
			  CUstream stream)
{
	size_t row;
	CUresult rc = CUDA_SUCCESS;

	for (row = 0; row < rows && rc == CUDA_SUCCESS; row++)
		rc = copy(dst + row * dst_pitch, dst_kinds, src + row * src_pitch, src_kinds, width,
			  stream);
	return rc;
}

/* sync_api: the synchronous entry point's name; NULL: async on stream. */
static CUresult copy_2d(const CUDA_MEMCPY2D *c, CUstream stream, const char *sync_api)
{
	struct sim_copy_order order;
	unsigned int src_kinds, dst_kinds;
	uintptr_t src, dst;
	CUresult rc;

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	rc = side_address(c->srcMemoryType, c->srcHost, c->srcDevice, &src, &src_kinds);
	if (rc == CUDA_SUCCESS)
		rc = side_address(c->dstMemoryType, c->dstHost, c->dstDevice, &dst, &dst_kinds);
	if (rc == CUDA_SUCCESS)
		rc = copy_order_begin(&order, sync_api, stream, dst, src);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = copy_rows(dst + c->dstY * c->dstPitch + c->dstXInBytes, dst_kinds, c->dstPitch,
		       src + c->srcY * c->srcPitch + c->srcXInBytes, src_kinds, c->srcPitch,
		       c->WidthInBytes, c->Height, stream);
	return copy_order_end(&order, rc);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2D(const CUDA_MEMCPY2D *pCopy)
{ return copy_2d(pCopy, NULL, "cuMemcpy2D_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *pCopy)
{ return copy_2d(pCopy, NULL, "cuMemcpy2DUnaligned_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{ return copy_2d(pCopy, hStream, NULL); }

static CUresult copy_3d(const CUDA_MEMCPY3D *c, CUstream stream, const char *sync_api)
{
	struct sim_copy_order order;
	size_t src_height, dst_height, z;
	unsigned int src_kinds, dst_kinds;
	uintptr_t src, dst;
	CUresult rc;

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	rc = side_address(c->srcMemoryType, c->srcHost, c->srcDevice, &src, &src_kinds);
	if (rc == CUDA_SUCCESS)
		rc = side_address(c->dstMemoryType, c->dstHost, c->dstDevice, &dst, &dst_kinds);
	if (rc == CUDA_SUCCESS)
		rc = copy_order_begin(&order, sync_api, stream, dst, src);
	if (rc != CUDA_SUCCESS)
		return rc;
	src_height = c->srcHeight ? c->srcHeight : c->Height;
	dst_height = c->dstHeight ? c->dstHeight : c->Height;
	for (z = 0; rc == CUDA_SUCCESS && z < c->Depth; z++)
		rc = copy_rows(dst + ((c->dstZ + z) * dst_height + c->dstY) * c->dstPitch +
			       c->dstXInBytes, dst_kinds, c->dstPitch,
			       src + ((c->srcZ + z) * src_height + c->srcY) * c->srcPitch +
			       c->srcXInBytes, src_kinds, c->srcPitch, c->WidthInBytes, c->Height,
			       stream);
	return copy_order_end(&order, rc);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3D(const CUDA_MEMCPY3D *pCopy)
{ return copy_3d(pCopy, NULL, "cuMemcpy3D_v2"); }
SIM_EXPORT CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{ return copy_3d(pCopy, hStream, NULL); }

/* One device: a peer copy is a device-to-device copy between contexts. */
SIM_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
					 CUdeviceptr srcDevice, CUcontext srcContext,
					 size_t ByteCount)
{
	return copy_ordered("cuMemcpyPeer", NULL, (uintptr_t)dstDevice, SIM_MEM_DEVICE_VISIBLE,
			    (uintptr_t)srcDevice, SIM_MEM_DEVICE_VISIBLE, ByteCount);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
					      CUdeviceptr srcDevice, CUcontext srcContext,
					      size_t ByteCount, CUstream hStream)
{
	return copy_ordered(NULL, hStream, (uintptr_t)dstDevice, SIM_MEM_DEVICE_VISIBLE,
			    (uintptr_t)srcDevice, SIM_MEM_DEVICE_VISIBLE, ByteCount);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
					  CUstream hStream)
{
	return copy_ordered(NULL, hStream, (uintptr_t)dst, 0, (uintptr_t)src, 0, ByteCount);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
					      size_t ByteCount, CUstream hStream)
{
	return copy_ordered(NULL, hStream, (uintptr_t)dstDevice, SIM_MEM_DEVICE_VISIBLE,
			    (uintptr_t)srcDevice, SIM_MEM_DEVICE_VISIBLE, ByteCount);
}

/* cuda.h maps this name to cuMemcpyBatchAsync_v2. */
SIM_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					       size_t count, CUmemcpyAttributes *attrs,
					       size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
	CUresult rc = CUDA_SUCCESS;
	size_t i;

	if (!count || !dsts || !srcs || !sizes)
		return CUDA_ERROR_INVALID_VALUE;
	rc = order_on_stream(hStream, false);	/* one piece of work for the batch */
	for (i = 0; i < count && rc == CUDA_SUCCESS; i++)
		rc = copy((uintptr_t)dsts[i], 0, (uintptr_t)srcs[i], 0, sizes[i], hStream);
	return rc;
}

/* ---------------------------------------- more allocations and pools */

/* Pitch rows to the allocation alignment, as a GPU would for coalescing. */
SIM_EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
					    size_t Height, unsigned int ElementSizeBytes)
{
	size_t pitch;

	if (!dptr || !pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	pitch = (WidthInBytes + SIM_ALLOC_ALIGNMENT - 1) & ~(size_t)(SIM_ALLOC_ALIGNMENT - 1);
	*pPitch = pitch;
	return allocate((uintptr_t *)dptr, pitch * Height, SIM_MEM_DEVICE);
}

/*
 * Entry points never call each other's exported symbols: a probe on one
 * must see exactly the calls the program made (the helpers are internal).
 */
SIM_EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	return allocate((uintptr_t *)pp, bytesize, SIM_MEM_HOST);
}

struct sim_pool {
	enum sim_magic magic;
};

static struct sim_pool default_pool = { .magic = SIM_MAGIC_POOL };

SIM_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	CUresult rc = require_device(dev, pool_out != NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	*pool_out = (CUmemoryPool)&default_pool;
	return CUDA_SUCCESS;
}

/* Stream-ordered allocations happen in the call; their place in the stream takes no time. */
SIM_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	CUresult rc;

	if (!stream_is_valid(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	rc = order_on_stream(hStream, false);
	if (rc != CUDA_SUCCESS)
		return rc;
	return allocate((uintptr_t *)dptr, bytesize, SIM_MEM_DEVICE);
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
						    CUmemoryPool pool, CUstream hStream)
{
	const struct sim_pool *sim_pool = (const struct sim_pool *)pool;
	CUresult rc;

	if (!sim_pool || sim_pool->magic != SIM_MAGIC_POOL || !dptr)
		return CUDA_ERROR_INVALID_VALUE;
	rc = order_on_stream(hStream, false);
	if (rc != CUDA_SUCCESS)
		return rc;
	return allocate((uintptr_t *)dptr, bytesize, SIM_MEM_DEVICE);
}

SIM_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	CUresult rc = order_on_stream(hStream, false);

	if (rc != CUDA_SUCCESS)
		return rc;
	return release((uintptr_t)dptr, SIM_MEM_FREEABLE);
}

/* ------------------------------------------------ virtual memory management */

/*
 * Physical memory is a memfd; mapping it is mmap over the reserved range,
 * so the simulated driver has CUDA's semantics: a handle released while
 * mapped keeps its memory until the last mapping goes.
 */
#define SIM_VMM_GRANULARITY (2u << 20)

struct sim_physical {
	enum sim_magic magic;
	int fd;
	size_t size;
	atomic_int refs;  /* handle references: create, retains */
	atomic_int maps;  /* mappings */
};

struct sim_mapping {
	struct sim_mapping *next;
	uintptr_t ptr;
	size_t size;
	struct sim_physical *physical;
};

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_mapping *mappings;

static void physical_put(struct sim_physical *physical)
{
	if (atomic_load(&physical->refs) > 0 || atomic_load(&physical->maps) > 0)
		return;
	close(physical->fd);
	physical->magic = SIM_MAGIC_DEAD;
	free(physical);
}

static struct sim_physical *physical_from_handle(CUmemGenericAllocationHandle handle)
{
	struct sim_physical *physical = (struct sim_physical *)(uintptr_t)handle;

	return physical && physical->magic == SIM_MAGIC_PHYSICAL ? physical : NULL;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity,
							  const CUmemAllocationProp *prop,
							  CUmemAllocationGranularity_flags option)
{
	if (!granularity || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = SIM_VMM_GRANULARITY;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
					const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct sim_physical *physical;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!handle || !prop || !size || size % SIM_VMM_GRANULARITY ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.id < 0 || prop->location.id >= SIM_DEVICE_COUNT)
		return CUDA_ERROR_INVALID_DEVICE;
	physical = calloc(1, sizeof(*physical));
	if (!physical)
		return CUDA_ERROR_OUT_OF_MEMORY;
	physical->fd = memfd_create("cuda-sim-physical", MFD_CLOEXEC);
	if (physical->fd < 0 || ftruncate(physical->fd, (off_t)size)) {
		if (physical->fd >= 0)
			close(physical->fd);
		free(physical);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	physical->magic = SIM_MAGIC_PHYSICAL;
	physical->size = size;
	atomic_store(&physical->refs, 1);
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)physical;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct sim_physical *physical;
	CUresult rc = CUDA_SUCCESS;

	pthread_mutex_lock(&vmm_lock);
	physical = physical_from_handle(handle);
	if (!physical || atomic_load(&physical->refs) <= 0)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (atomic_fetch_sub(&physical->refs, 1) == 1)
		physical_put(physical);
	pthread_mutex_unlock(&vmm_lock);
	return rc;
}

SIM_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
						CUdeviceptr addr, unsigned long long flags)
{
	void *range;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!ptr || !size || size % SIM_VMM_GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	range = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (range == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ptr = (CUdeviceptr)(uintptr_t)range;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	if (!ptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	return munmap((void *)(uintptr_t)ptr, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
				     CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct sim_physical *physical;
	struct sim_mapping *mapping;
	struct sim_allocation *allocation;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	mapping = calloc(1, sizeof(*mapping));
	allocation = calloc(1, sizeof(*allocation));
	pthread_mutex_lock(&vmm_lock);
	physical = physical_from_handle(handle);
	if (!mapping || !allocation)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	else if (!physical || !ptr || !size || offset + size > physical->size)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		      physical->fd, (off_t)offset) == MAP_FAILED)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc != CUDA_SUCCESS) {
		pthread_mutex_unlock(&vmm_lock);
		free(mapping);
		free(allocation);
		return rc;
	}
	atomic_fetch_add(&physical->maps, 1);
	*mapping = (struct sim_mapping){ .next = mappings, .ptr = (uintptr_t)ptr, .size = size,
					 .physical = physical };
	mappings = mapping;
	pthread_mutex_unlock(&vmm_lock);

	/* Copies, memsets and kernels may use it like any device memory. */
	*allocation = (struct sim_allocation){ .base = (uintptr_t)ptr, .bytes = size,
					       .kind = SIM_MEM_VMM };
	pthread_mutex_lock(&allocations_lock);
	allocation->next = allocations;
	allocations = allocation;
	pthread_mutex_unlock(&allocations_lock);
	return CUDA_SUCCESS;
}

static void forget_vmm_allocation(uintptr_t base)
{
	struct sim_allocation **link, *found = NULL;

	pthread_mutex_lock(&allocations_lock);
	for (link = &allocations; *link; link = &(*link)->next) {
		if ((*link)->base == base && (*link)->kind == SIM_MEM_VMM) {
			found = *link;
			*link = found->next;
			break;
		}
	}
	pthread_mutex_unlock(&allocations_lock);
	free(found);
}

/* Unmaps every mapping inside [ptr, ptr + size); the range stays reserved. */
SIM_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct sim_mapping **link = &mappings, *mapping;
	uintptr_t start = (uintptr_t)ptr, end = start + size;
	int unmapped = 0;

	if (!ptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	while ((mapping = *link)) {
		if (mapping->ptr < start || mapping->ptr + mapping->size > end) {
			link = &mapping->next;
			continue;
		}
		*link = mapping->next;
		mmap((void *)mapping->ptr, mapping->size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		forget_vmm_allocation(mapping->ptr);
		atomic_fetch_sub(&mapping->physical->maps, 1);
		physical_put(mapping->physical);
		free(mapping);
		unmapped++;
	}
	pthread_mutex_unlock(&vmm_lock);
	return unmapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
					   const CUmemAccessDesc *desc, size_t count)
{
	return ptr && size && desc && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
							void *addr)
{
	const struct sim_mapping *mapping;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	for (mapping = mappings; mapping; mapping = mapping->next) {
		if ((uintptr_t)addr >= mapping->ptr && (uintptr_t)addr < mapping->ptr + mapping->size) {
			atomic_fetch_add(&mapping->physical->refs, 1);
			*handle = (CUmemGenericAllocationHandle)(uintptr_t)mapping->physical;
			rc = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&vmm_lock);
	return rc;
}

/* ------------------------------------------------ modules from files */

static char *read_image(const char *path, size_t *out_size)
{
	FILE *file = fopen(path, "re");
	char *image = NULL;
	long size;

	if (!file)
		return NULL;
	if (!fseek(file, 0, SEEK_END) && (size = ftell(file)) >= 0 && !fseek(file, 0, SEEK_SET)) {
		image = calloc(1, (size_t)size + 1);
		if (image && fread(image, 1, (size_t)size, file) != (size_t)size) {
			free(image);
			image = NULL;
		}
		*out_size = (size_t)size;
	}
	fclose(file);
	return image;
}

SIM_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
	CUresult rc = require_context();
	size_t size = 0;
	char *image;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!fname)
		return CUDA_ERROR_INVALID_VALUE;
	image = read_image(fname, &size);
	if (!image)
		return CUDA_ERROR_FILE_NOT_FOUND;
	record_image("cuModuleLoad", image, size);
	rc = load_module((struct sim_module **)module, SIM_MAGIC_MODULE, image);
	free(image);
	return rc;
}

SIM_EXPORT CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
						  CUjit_option *jitOptions, void **jitOptionsValues,
						  unsigned int numJitOptions,
						  CUlibraryOption *libraryOptions,
						  void **libraryOptionValues,
						  unsigned int numLibraryOptions)
{
	size_t size = 0;
	CUresult rc;
	char *image;

	if (!fileName)
		return CUDA_ERROR_INVALID_VALUE;
	image = read_image(fileName, &size);
	if (!image)
		return CUDA_ERROR_FILE_NOT_FOUND;
	record_image("cuLibraryLoadFromFile", image, size);
	rc = load_library(library, image, numJitOptions && (!jitOptions || !jitOptionsValues),
			  numLibraryOptions && (!libraryOptions || !libraryOptionValues));
	free(image);
	return rc;
}

/* ------------------------------------------------------------------ linking */

/*
 * A link's "cubin" is its PTX inputs one after the other: all the
 * simulator reads of an image is its entries' names.
 */
struct sim_link {
	enum sim_magic magic;
	char *text;
	size_t len;
};

#define SIM_MAGIC_LINK 0x6c6e6b31	/* "lnk1" */

SIM_EXPORT CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options,
					    void **optionValues, CUlinkState *stateOut)
{
	struct sim_link *link;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!stateOut || (numOptions && (!options || !optionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	link = calloc(1, sizeof(*link));
	if (!link)
		return CUDA_ERROR_OUT_OF_MEMORY;
	link->magic = SIM_MAGIC_LINK;
	*stateOut = (CUlinkState)link;
	return CUDA_SUCCESS;
}

static struct sim_link *link_from_handle(CUlinkState state)
{
	struct sim_link *link = (struct sim_link *)state;

	return link && link->magic == SIM_MAGIC_LINK ? link : NULL;
}

/* The PTX of an input: the text itself, or a fatbin's uncompressed PTX entries. */
static CUresult link_append(struct sim_link *link, CUjitInputType type, const void *data, size_t size)
{
	const char *text = data;
	size_t len;
	char *grown;

	if (type == CU_JIT_INPUT_FATBINARY) {
		const unsigned char *fatbin = unwrap(data);
		size_t at, end = image_size(fatbin);
		uint16_t header;
		CUresult rc = CUDA_SUCCESS;

		memcpy(&header, fatbin + 6, sizeof(header));
		for (at = header; rc == CUDA_SUCCESS && at + 64 <= end;) {
			const unsigned char *e = fatbin + at;
			uint64_t stored, flags;
			uint32_t entry_header = read_u32(e + 4);
			uint16_t kind;

			memcpy(&kind, e, sizeof(kind));
			memcpy(&stored, e + 8, sizeof(stored));
			memcpy(&flags, e + 40, sizeof(flags));
			if (kind == 1 && !(flags & SIM_FATBIN_COMPRESSED))
				rc = link_append(link, CU_JIT_INPUT_PTX, e + entry_header,
						 strnlen((const char *)e + entry_header, stored));
			at += entry_header + stored;
		}
		return rc;
	}
	if (type != CU_JIT_INPUT_PTX)
		return CUDA_ERROR_NOT_SUPPORTED;
	len = strnlen(text, size ? size : SIZE_MAX);
	grown = realloc(link->text, link->len + len + 2);
	if (!grown)
		return CUDA_ERROR_OUT_OF_MEMORY;
	link->text = grown;
	memcpy(link->text + link->len, text, len);
	link->len += len;
	link->text[link->len++] = '\n';
	link->text[link->len] = '\0';
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data,
					     size_t size, const char *name, unsigned int numOptions,
					     CUjit_option *options, void **optionValues)
{
	struct sim_link *link = link_from_handle(state);

	if (!link)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!data || (numOptions && (!options || !optionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	record_image("cuLinkAddData_v2", data,
		     type == CU_JIT_INPUT_PTX ? strnlen(data, size ? size : SIZE_MAX) : image_size(data));
	return link_append(link, type, data, size);
}

SIM_EXPORT CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
					     unsigned int numOptions, CUjit_option *options,
					     void **optionValues)
{
	struct sim_link *link = link_from_handle(state);
	size_t size = 0;
	CUresult rc;
	char *image;

	if (!link)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!path || (numOptions && (!options || !optionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	image = read_image(path, &size);
	if (!image)
		return CUDA_ERROR_FILE_NOT_FOUND;
	record_image("cuLinkAddFile_v2", image, size);
	rc = link_append(link, type, image, size);
	free(image);
	return rc;
}

SIM_EXPORT CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	struct sim_link *link = link_from_handle(state);

	if (!link)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!cubinOut || !sizeOut || !link->text)
		return CUDA_ERROR_INVALID_VALUE;
	*cubinOut = link->text;
	*sizeOut = link->len + 1;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
	struct sim_link *link = link_from_handle(state);

	if (!link)
		return CUDA_ERROR_INVALID_HANDLE;
	link->magic = SIM_MAGIC_DEAD;
	free(link->text);
	free(link);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------- registered host memory */

/*
 * Host memory registered with the driver: device code reaches it at its
 * host address (CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM),
 * as on Linux with a real GPU.
 */
struct sim_registration {
	struct sim_registration *next;
	uintptr_t base;
	size_t bytes;
};

static pthread_mutex_t registrations_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_registration *registrations;

SIM_EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	struct sim_registration *r;
	CUresult rc = require_context();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!p || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&registrations_lock);
	for (r = registrations; r; r = r->next)
		if ((uintptr_t)p < r->base + r->bytes && r->base < (uintptr_t)p + bytesize) {
			pthread_mutex_unlock(&registrations_lock);
			return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
		}
	r = calloc(1, sizeof(*r));
	if (r) {
		*r = (struct sim_registration){ .next = registrations, .base = (uintptr_t)p,
						.bytes = bytesize };
		registrations = r;
	}
	pthread_mutex_unlock(&registrations_lock);
	return r ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	struct sim_registration **at, *r;
	CUresult rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;

	pthread_mutex_lock(&registrations_lock);
	for (at = &registrations; (r = *at); at = &r->next)
		if (r->base == (uintptr_t)p) {
			*at = r->next;
			free(r);
			rc = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&registrations_lock);
	return rc;
}

SIM_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	struct sim_registration *r;
	bool found = false;

	if (!pdptr || !p || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&registrations_lock);
	for (r = registrations; r && !found; r = r->next)
		found = (uintptr_t)p >= r->base && (uintptr_t)p < r->base + r->bytes;
	pthread_mutex_unlock(&registrations_lock);
	if (!found && !range_is_allocated((uintptr_t)p, 1, SIM_MEM_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* ------------------------------------------------ attributes, names, capture */

SIM_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult rc = require_device(dev, pi != NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*pi = 9;
		return CUDA_SUCCESS;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*pi = 0;
		return CUDA_SUCCESS;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
		*pi = 1;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	CUresult rc = require_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!current_context)
		return CUDA_ERROR_INVALID_CONTEXT;
	*device = current_context->device;
	return CUDA_SUCCESS;
}

/* Nothing is ever captured: the simulator has no graphs. */
SIM_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	if (!captureStatus)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stream_is_valid(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	*captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream,
						      CUstreamCaptureStatus *captureStatus)
{
	return cuStreamIsCapturing(hStream, captureStatus);
}
SIM_SAME_SIGNATURE(cuStreamIsCapturing_ptsz, cuStreamIsCapturing);

SIM_EXPORT CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
	const struct sim_function *function = (const struct sim_function *)hfunc;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!function || (function->magic != SIM_MAGIC_FUNCTION && function->magic != SIM_MAGIC_KERNEL))
		return CUDA_ERROR_INVALID_HANDLE;
	*name = function->name;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
	return cuFuncGetName(name, (CUfunction)hfunc);
}

/* ------------------------------------------------------- cuGetProcAddress */

/*
 * The entry points handed out by name, as the driver does (cudart 13
 * resolves every driver function this way, through the pointer it got for
 * "cuGetProcAddress" itself): any function the simulator exports, in its
 * newest variant (cuMemAlloc -> cuMemAlloc_v2), or its per-thread-stream
 * twin (_ptsz, _ptds) when the flag asks for one. Variants whose
 * signatures differ are handed out from the version that introduced them.
 */
static const struct {
	const char *name, *variant;
	int since;
} sim_proc_variants[] = {
	{ "cuGetProcAddress", "cuGetProcAddress_v2", 12000 },
	{ "cuCtxSynchronize", "cuCtxSynchronize_v2", 13000 },
};

/*
 * The simulator's own exports, read from its dynamic symbol table (the
 * driver has a table of its own): dlsym would go through whatever a
 * preloaded library puts in front of it, and cuGetProcAddress would then
 * hand out that library's functions instead of the driver's.
 */
static struct {
	uintptr_t base;
	const ElfW(Sym) *symbols;
	const char *strings;
	size_t count;
} sim_dynsym;

/* How many symbols a DT_GNU_HASH table covers: up to the end of its last chain. */
static size_t gnu_hash_symbols(const uint32_t *table)
{
	uint32_t buckets = table[0], first = table[1], bloom_words = table[2], i, last = 0;
	const uint32_t *bucket = table + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = bucket + buckets;

	for (i = 0; i < buckets; i++)
		if (bucket[i] > last)
			last = bucket[i];
	if (last < first)
		return first;
	while (!(chain[last - first] & 1))
		last++;
	return last + 1;
}

static int find_own_dynsym(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t self = (uintptr_t)cuInit;
	const ElfW(Dyn) *dyn = NULL;
	bool contains = false;
	int i;

	(void)size;
	(void)data;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && self >= start && self - start < ph->p_memsz)
			contains = true;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
	}
	if (!contains || !dyn)
		return 0;
	sim_dynsym.base = info->dlpi_addr;
	/* The loader has relocated these entries to addresses. */
	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			sim_dynsym.symbols = (const ElfW(Sym) *)dyn->d_un.d_ptr;
		else if (dyn->d_tag == DT_STRTAB)
			sim_dynsym.strings = (const char *)dyn->d_un.d_ptr;
		else if (dyn->d_tag == DT_HASH)
			sim_dynsym.count = ((const uint32_t *)dyn->d_un.d_ptr)[1];
		else if (dyn->d_tag == DT_GNU_HASH && !sim_dynsym.count)
			sim_dynsym.count = gnu_hash_symbols((const uint32_t *)dyn->d_un.d_ptr);
	}
	return 1;
}

static void read_own_dynsym(void)
{
	dl_iterate_phdr(find_own_dynsym, NULL);
}

static void *sim_export(const char *name)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	size_t i;

	pthread_once(&once, read_own_dynsym);
	for (i = 0; sim_dynsym.symbols && sim_dynsym.strings && i < sim_dynsym.count; i++) {
		const ElfW(Sym) *sym = &sim_dynsym.symbols[i];

		if (sym->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym->st_info) == STT_FUNC &&
		    !strcmp(sim_dynsym.strings + sym->st_name, name))
			return (void *)(sim_dynsym.base + sym->st_value);
	}
	return NULL;
}

static void *sim_proc(const char *symbol, int version, bool per_thread)
{
	static const char *const twins[] = { "_ptsz", "_ptds" };
	static const char *const variants[] = { "_v3", "_v2", "" };
	char name[256];
	size_t i, j;
	void *fn;

	for (i = 0; i < sizeof(sim_proc_variants) / sizeof(sim_proc_variants[0]); i++)
		if (!strcmp(symbol, sim_proc_variants[i].name))
			return sim_export(version >= sim_proc_variants[i].since ?
					  sim_proc_variants[i].variant : symbol);
	for (i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		for (j = 0; per_thread && j < sizeof(twins) / sizeof(twins[0]); j++) {
			snprintf(name, sizeof(name), "%s%s%s", symbol, variants[i], twins[j]);
			if ((fn = sim_export(name)))
				return fn;
		}
		snprintf(name, sizeof(name), "%s%s", symbol, variants[i]);
		if ((fn = sim_export(name)))
			return fn;
	}
	return NULL;
}

/*
 * CUDA_SIM_IMAGE_DIR=DIR: each request appends "SYMBOL VERSION CALLER" to
 * DIR/PID.procs, CALLER the file of the object the call came from (a
 * preloaded library's calls are told from the program's own).
 */
static void record_proc(const char *symbol, int version, const void *caller)
{
	const char *dir = getenv("CUDA_SIM_IMAGE_DIR");
	char path[4096], line[4096];
	Dl_info info = { 0 };
	int fd, len;

	if (!dir)
		return;
	if (!dladdr(caller, &info) || !info.dli_fname)
		info.dli_fname = "?";
	snprintf(path, sizeof(path), "%s/%d.procs", dir, (int)getpid());
	len = snprintf(line, sizeof(line), "%s %d %s\n", *symbol ? symbol : "-", version, info.dli_fname);
	if (len <= 0 || (size_t)len >= sizeof(line))
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)len) != len)
		len = -1;
	close(fd);
}

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status, const void *caller)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	record_proc(symbol, version, caller);
	*pfn = !strncmp(symbol, "cu", 2) ?
	       sim_proc(symbol, version, flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) : NULL;
	if (status)
		*status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

SIM_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
						cuuint64_t flags,
						CUdriverProcAddressQueryResult *symbolStatus)
{
	return get_proc(symbol, pfn, cudaVersion, flags, symbolStatus, __builtin_return_address(0));
}

/* The first cuGetProcAddress (CUDA 11.3), exported under its plain name as the driver does. */
CUresult CUDAAPI sim_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
					 cuuint64_t flags) __asm__("cuGetProcAddress");
SIM_EXPORT CUresult CUDAAPI sim_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
						    cuuint64_t flags)
{
	return get_proc(symbol, pfn, cudaVersion, flags, NULL, __builtin_return_address(0));
}

/* ----------------------------------------------------------------- errors */

#define SIM_ERRORS(X)								\
	X(CUDA_SUCCESS, "no error")						\
	X(CUDA_ERROR_INVALID_VALUE, "invalid argument")				\
	X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")				\
	X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")			\
	X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")			\
	X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")		\
	X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")			\
	X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")		\
	X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")			\
	X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed")		\
	X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid")		\
	X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")			\
	X(CUDA_ERROR_NOT_FOUND, "named symbol not found")			\
	X(CUDA_ERROR_NOT_READY, "device not ready")				\
	X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
	X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch") \
	X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")		\
	X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")			\
	X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")			\
	X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")				\
	X(CUDA_ERROR_UNKNOWN, "unknown error")

struct sim_error {
	CUresult code;
	const char *name;
	const char *description;
};

#define SIM_ERROR_ENTRY(code, description) { code, #code, description },
static const struct sim_error sim_errors[] = { SIM_ERRORS(SIM_ERROR_ENTRY) };
#undef SIM_ERROR_ENTRY

static const struct sim_error *find_error(CUresult error)
{
	size_t i;

	for (i = 0; i < sizeof(sim_errors) / sizeof(sim_errors[0]); i++)
		if (sim_errors[i].code == error)
			return &sim_errors[i];
	return NULL;
}

/* Like the real driver, these work before cuInit. */
SIM_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	const struct sim_error *entry = find_error(error);

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = entry ? entry->name : NULL;
	return entry ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	const struct sim_error *entry = find_error(error);

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = entry ? entry->description : NULL;
	return entry ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
