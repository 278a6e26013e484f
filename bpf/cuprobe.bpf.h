/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cuprobe's SDK for BPF programs on CUDA events (`cuprobe run PROG`), and
 * the decoders cuprobe's own programs are built on.
 *
 * A program goes in a section named after a family of the probe catalogue
 * (cuprobe_catalogue.h), "cuda/FAMILY" for the calls' entries and
 * "cuda.return/FAMILY" for their returns, and is attached to every exported
 * variant of every API of that family (cuLaunchKernel, cuLaunchKernel_ptsz,
 * cuLaunchKernelEx, ... for "cuda/launch"), in every driver file, including
 * the ones processes map after the start. CUDA_PROG declares one and hands
 * it the call decoded into the family's struct (struct cuda_launch, ...),
 * for the processes cuprobe was asked to trace only (the macro checks
 * cuprobe_traced() first):
 *
 *	SEC("cuda/launch")
 *	int CUDA_PROG(count_blocks, struct cuda_launch, launch)
 *	{
 *		... launch->block[0], launch->function, launch->stream ...
 *		return 0;
 *	}
 *
 * Families: launch, alloc, free, vmm, copy, memset, sync, event, module,
 * context, and nccl (every probed NCCL call in libnccl: collectives,
 * send/recv, groups, communicators; struct cuda_nccl). Return programs see
 * what the call returned (the pointer of an allocation, a query's result,
 * the duration of a sync): their arguments come from entry state that
 * cuprobe keeps for them.
 *
 * The target filter (COMMAND, -p) lives in the programs, not in the
 * probes: the driver file is shared by every process that maps it. A
 * program written without CUDA_PROG/CUDA_RETURN_PROG, such as
 * SEC("cuda/launch") int f(struct pt_regs *ctx), sees every process unless
 * it returns early when cuprobe_traced() is false; cuprobe warns about a
 * program that never reads the filter when it was given targets.
 *
 * Every map declared here is named cuprobe_*, and the loader shares every
 * map of a program named so with the runtime: a program's own maps must
 * not use that prefix.
 *
 * What cuprobe prints without a consumer (the README has the details):
 *  - every ring buffer declared with CUPROBE_RING(name, type, bytes): each
 *    record as text or JSON, fields from the BTF of its type;
 *  - every other map of the object, at exit and every -i seconds: keys and
 *    values from BTF; a struct cuprobe_hist is drawn as a log2 histogram, a
 *    cuprobe_kernel_t is shown as the kernel's name, a cuprobe_stack_t as a
 *    symbolized user stack, a cuprobe_py_stack_t (cuprobe_python_stack_id(),
 *    with --python) as its innermost Python frame (all of the pid in a field
 *    named "pid" beside).
 *
 * Device programs, which run inside the GPU's kernels (SEC("gpu/GLOB")),
 * are described at the end of this file and in docs/device-programs.md.
 *
 * Compile against the installed SDK:
 *	clang -g -O2 -target bpf -D__TARGET_ARCH_x86 $(pkg-config --cflags cuprobe) -c prog.bpf.c
 * (`cuprobe run prog.bpf.c` does this itself when clang is installed).
 */
#ifndef CUPROBE_BPF_H
#define CUPROBE_BPF_H

#ifndef __VMLINUX_H__
#include "vmlinux.h"
#endif
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "cuprobe_events.h"
#include "cuprobe_nccl_hash.h"

#ifndef PT_REGS_PARM6
#define PT_REGS_PARM6(x) ((x)->r9) /* x86-64; libbpf before 1.2 stops at five */
#endif

/*
 * A hash map of value_type by key_type, at most entries of them: the map a
 * program counts in (with cuprobe_lookup_or_init), printed at exit and
 * every -i seconds. CUPROBE_LRU_HASH: one that, full, makes room by
 * dropping its least recently used entry (state kept per process or call).
 */
#define CUPROBE_HASH(name, key_type, value_type, entries) \
	CUPROBE_KEYED_MAP(BPF_MAP_TYPE_HASH, name, key_type, value_type, entries)
#define CUPROBE_LRU_HASH(name, key_type, value_type, entries) \
	CUPROBE_KEYED_MAP(BPF_MAP_TYPE_LRU_HASH, name, key_type, value_type, entries)
#define CUPROBE_KEYED_MAP(map_type, name, key_type, value_type, entries)		\
	struct {								\
		__uint(type, map_type);						\
		__uint(max_entries, entries);					\
		__type(key, key_type);						\
		__type(value, value_type);					\
	} name SEC(".maps")

/* Per-thread state of value_type (bpf_task_storage_get), made at a thread's first use. */
#define CUPROBE_TASK_STORAGE(name, value_type)					\
	struct {								\
		__uint(type, BPF_MAP_TYPE_TASK_STORAGE);			\
		__uint(map_flags, BPF_F_NO_PREALLOC);				\
		__type(key, int);						\
		__type(value, value_type);					\
	} name SEC(".maps")

/* ---- what the runtime shares with every program (types in cuprobe_events.h) ---- */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cuprobe_config);
} cuprobe_config SEC(".maps");

CUPROBE_HASH(cuprobe_targets, __u32 /* thread group id */, __u8, 4096);

CUPROBE_LRU_HASH(cuprobe_kernel_names, struct cuprobe_name_key, struct cuprobe_kernel_name, 16384);

CUPROBE_LRU_HASH(cuprobe_calls, struct cuprobe_call_key, struct cuprobe_call, 16384);

CUPROBE_HASH(cuprobe_contexts, struct cuprobe_context_key, __s32 /* device ordinal */, 4096);

/* Each thread's context stack: task-local storage, read without hashing at every launch. */
CUPROBE_TASK_STORAGE(cuprobe_thread_contexts, struct cuprobe_thread_context);

/* run --python: each thread's Python stack at the entry of its current call. */
CUPROBE_TASK_STORAGE(cuprobe_python_stacks, struct cuprobe_python_stack);

/*
 * NCCL communicators of traced processes, by (pid, ncclComm_t): rank, size,
 * device and NCCL's id, filled when a call made them returned (or a query
 * answered), removed when one destroying them returned.
 */
CUPROBE_HASH(cuprobe_nccl_comms, struct cuprobe_nccl_comm_key, struct cuprobe_nccl_comm, 4096);

/* The context a process made or retained last: its device when a thread has none set. */
CUPROBE_HASH(cuprobe_process_contexts, __u32 /* thread group id */, struct cuprobe_process_context, 4096);

/*
 * Kernel handles cuprobe_kernel_name() found unnamed: the runtime reads
 * each one's name from the driver's record (a handle made before cuprobe
 * attached) and writes it into cuprobe_kernel_names, an empty name when it
 * cannot, so a handle is asked about until answered and then no more.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} cuprobe_name_requests SEC(".maps");

/* User stacks for cuprobe_user_stack(): printed symbolized. */
#define CUPROBE_STACK_DEPTH 32

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 4096);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, CUPROBE_STACK_DEPTH * sizeof(__u64));
} cuprobe_stacks SEC(".maps");

/* ---- types the printer knows -------------------------------------------------------- */

/* A CUfunction/CUkernel: printed as the kernel's name. */
typedef __u64 cuprobe_kernel_t;
/* A user stack id from cuprobe_user_stack(): printed symbolized. */
typedef __s64 cuprobe_stack_t;
/* An address or handle (pointer, stream, event, context): printed in hex. */
typedef __u64 cuprobe_addr_t;
/* A Python stack id from cuprobe_python_stack_id(): printed as its innermost frame. */
typedef __u64 cuprobe_py_stack_t;

/*
 * A log2 histogram of any __u64 quantity: bucket 0 holds 0 and 1, bucket b
 * holds 2^(b-1)+1 to 2^b. Printed drawn, non-empty buckets only.
 */
#define CUPROBE_HIST_BUCKETS 65

struct cuprobe_hist {
	__u64 bucket[CUPROBE_HIST_BUCKETS];
};

/*
 * A ring buffer whose records, of type record_type, cuprobe prints (the
 * type is found by the name of the variable cuprobe_record__NAME). Write to
 * it with cuprobe_ring_reserve/cuprobe_ring_output, which count the records
 * that did not fit (cuprobe shows the count per ring).
 */
#define CUPROBE_RING(name, record_type, bytes)					\
	struct {								\
		__uint(type, BPF_MAP_TYPE_RINGBUF);				\
		__uint(max_entries, bytes);					\
	} name SEC(".maps");							\
	typedef record_type cuprobe_record_type__##name;			\
	const volatile record_type cuprobe_record__##name;			\
	__u64 cuprobe_lost__##name SEC(".bss")

/* A record of the ring's type, or NULL (counted as lost) when the ring is full. */
#define cuprobe_ring_reserve(name)						\
	({									\
		cuprobe_record_type__##name *____record =			\
			bpf_ringbuf_reserve(&name, sizeof(cuprobe_record_type__##name), 0); \
		if (!____record)						\
			__sync_fetch_and_add(&cuprobe_lost__##name, 1);		\
		____record;							\
	})

#define cuprobe_ring_submit(record) bpf_ringbuf_submit((void *)(record), 0)

/* Copies *record into the ring; counted as lost when it does not fit. */
#define cuprobe_ring_output(name, record)					\
	({									\
		long ____err = bpf_ringbuf_output(&name, (record), sizeof(*(record)), 0); \
		if (____err)							\
			__sync_fetch_and_add(&cuprobe_lost__##name, 1);		\
		____err;							\
	})

/* ---- helpers --------------------------------------------------------------------------- */

/* True when the current process is one cuprobe was asked to trace. */
static __always_inline bool cuprobe_traced(void)
{
	__u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
	struct cuprobe_config *config = bpf_map_lookup_elem(&cuprobe_config, &zero);

	if (!config || !config->filter_by_pid)
		return true;
	return bpf_map_lookup_elem(&cuprobe_targets, &tgid) != NULL;
}

static __always_inline void cuprobe_hist_add(struct cuprobe_hist *hist, __u64 value)
{
	__u32 bucket = cp_log2_ceil(value);

	if (bucket < CUPROBE_HIST_BUCKETS) /* always: the check is for the verifier */
		__sync_fetch_and_add(&hist->bucket[bucket], 1);
}

/*
 * The value of key in map (the map variable, not its address), inserted as
 * zeroes first when absent; NULL only when the map is full. For counters
 * and histograms.
 */
#define cuprobe_lookup_or_init(map, key)						\
	({										\
		typeof((map).value) ____value = bpf_map_lookup_elem(&(map), key);	\
		if (!____value) {							\
			static const typeof(*(map).value) ____zero;			\
			bpf_map_update_elem(&(map), key, &____zero, BPF_NOEXIST);	\
			____value = bpf_map_lookup_elem(&(map), key);			\
		}									\
		____value;								\
	})

/* The calling thread's user stack, for a cuprobe_stack_t field (< 0: not captured). */
static __always_inline cuprobe_stack_t cuprobe_user_stack(void *ctx)
{
	return bpf_get_stackid(ctx, &cuprobe_stacks, BPF_F_USER_STACK);
}

/*
 * With `cuprobe run --python`: the id of the calling thread's Python stack
 * at the entry of the call being probed (the id of trace's py_stack
 * records), for a cuprobe_py_stack_t field of a program's own maps; 0 when
 * the process is not Python, the thread has no Python frames, the stack
 * could not be walked, or --python was not given. In an entry or a return
 * program of a cuda/ family, and in the programs it calls with ctx.
 */
static __always_inline cuprobe_py_stack_t cuprobe_python_stack_id(struct pt_regs *ctx)
{
	struct cuprobe_python_stack *stack =
		bpf_task_storage_get(&cuprobe_python_stacks, bpf_get_current_task_btf(), 0, 0);
	__u64 sp = PT_REGS_SP(ctx);

	/* The entry's stack pointer: this call's (sp + 8 at its return), not an earlier one's. */
	if (!stack || (stack->sp != sp && stack->sp != sp - 8))
		return 0;
	return stack->id;
}

/*
 * The mangled name of a kernel handle of pid, or NULL when not known (yet).
 * Names come from cuprobe's naming probes and, for handles made before it
 * attached, from the driver's records: a handle not known yet is asked
 * for, and named for the calls after the runtime has read it.
 */
static __always_inline const char *cuprobe_kernel_name(__u32 pid, __u64 handle)
{
	struct cuprobe_name_key key = { .pid = pid, .handle = handle };
	struct cuprobe_kernel_name *name = bpf_map_lookup_elem(&cuprobe_kernel_names, &key);

	if (!name) {
		bpf_ringbuf_output(&cuprobe_name_requests, &key, sizeof(key), 0);
		return NULL;
	}
	return name->name[0] ? name->name : NULL; /* "": the runtime could not name it */
}

/* The device of the calling thread's current context, or -1 when not known. */
static __always_inline int cuprobe_current_device(void)
{
	struct cuprobe_thread_context *thread =
		bpf_task_storage_get(&cuprobe_thread_contexts, bpf_get_current_task_btf(), 0, 0);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct cuprobe_context_key key = { .pid = tgid };
	struct cuprobe_process_context *last;
	__s32 *known;
	__u32 top;

	if (thread && thread->depth > 0 && thread->depth <= CUPROBE_CONTEXT_DEPTH) {
		top = (thread->depth - 1) & (CUPROBE_CONTEXT_DEPTH - 1);
		if (thread->device[top] >= 0)
			return thread->device[top];
		/*
		 * Made current before its device was known: the driver's
		 * cuDevicePrimaryCtxRetain sets the context current inside itself,
		 * before the retain returns with it. Looked up now, and kept.
		 */
		key.context = thread->stack[top];
		known = bpf_map_lookup_elem(&cuprobe_contexts, &key);
		if (known)
			thread->device[top] = *known;
		return known ? *known : -1;
	}
	last = bpf_map_lookup_elem(&cuprobe_process_contexts, &tgid);
	return last ? last->device : -1;
}

/* ---- the normalized view of each family ------------------------------------------------- */

/*
 * cuLaunchKernel, cooperative, Ex, host functions, graphs, the legacy
 * cuLaunch*. On return also the result and the duration, the arguments as
 * the entry decoded them.
 */
struct cuda_launch {
	__u32 api;              /* enum cp_api: which entry point (every struct starts so) */
	__u32 kind;             /* enum cp_launch_kind */
	cuprobe_kernel_t function; /* the CUfunction/CUkernel; the CUgraphExec or host function */
	cuprobe_addr_t stream;
	__u32 grid[3];
	__u32 block[3];
	__u32 shared_mem_bytes;
	__u32 flags;            /* CP_LAUNCH_* */
	__s32 result;           /* return: CUresult */
	__u32 pad;
	__u64 duration_ns;      /* return: entry to return */
};

/* Allocations: on return also the pointer and the result. */
struct cuda_alloc {
	__u32 api;
	__u32 kind;             /* enum cp_mem_kind */
	__u64 bytes;            /* pitched allocations: known on return */
	cuprobe_addr_t stream;  /* stream-ordered allocations */
	cuprobe_addr_t ptr;     /* return: the allocation (0 when it failed) */
	__s32 result;           /* return: CUresult */
	__u32 pad;
	__u64 duration_ns;      /* return: entry to return */
};

struct cuda_free {
	__u32 api;
	__u32 kind;             /* enum cp_mem_kind */
	cuprobe_addr_t ptr;
	cuprobe_addr_t stream;
	__s32 result;           /* return: CUresult */
	__u32 pad;
	__u64 duration_ns;
};

struct cuda_vmm {
	__u32 api;
	__u32 op;               /* enum cp_vmm_op */
	cuprobe_addr_t handle;  /* create/retain: on return */
	cuprobe_addr_t ptr;     /* reserve: on return */
	__u64 bytes;
	__s32 result;
	__u32 pad;
	__u64 duration_ns;
};

struct cuda_copy {
	__u32 api;
	__u32 direction;        /* enum cp_copy_dir */
	cuprobe_addr_t dst;
	cuprobe_addr_t src;
	__u64 bytes;
	cuprobe_addr_t stream;
	__u32 async;
	__u32 count;            /* 1, or a batch's length */
	__u32 flags;            /* CP_COPY_* */
	__s32 result;           /* return */
	__u64 duration_ns;      /* return */
};

struct cuda_memset {
	__u32 api;
	__u32 element_size;     /* 1, 2 or 4 */
	cuprobe_addr_t dst;
	__u64 bytes;
	__u64 pitch;            /* 2D */
	cuprobe_addr_t stream;
	__u32 value;
	__u32 async;
	__s32 result;           /* return */
	__u32 pad;
	__u64 duration_ns;      /* return */
};

/* Synchronizations and completion queries. */
struct cuda_sync {
	__u32 api;
	__u32 kind;             /* enum cp_sync_kind */
	cuprobe_addr_t handle;  /* stream, event or context */
	__s32 result;           /* return: CUresult (queries: 0 complete, 600 not ready) */
	__u32 pad;
	__u64 duration_ns;      /* return: how long the call blocked */
};

struct cuda_event {
	__u32 api;
	__u32 op;               /* enum cp_event_op */
	cuprobe_addr_t event;
	cuprobe_addr_t stream;
	__u32 flags;
	__s32 result;           /* return */
	__u64 duration_ns;      /* return */
};

struct cuda_module {
	__u32 api;
	__u32 op;               /* enum cp_module_op */
	cuprobe_addr_t handle;  /* loads: on return */
	cuprobe_addr_t path;    /* user address of the file name (from a file), else 0 */
	__s32 result;           /* return */
	__u32 pad;
	__u64 duration_ns;
};

struct cuda_context {
	__u32 api;
	__u32 op;               /* enum cp_context_op */
	cuprobe_addr_t context; /* retain/create/pop: on return */
	__s32 device;           /* retain/create: the device asked for; else -1 */
	__s32 result;           /* return */
	__u64 duration_ns;
};

/*
 * An NCCL call (libnccl's exports: struct cp_nccl_op says which). At entry
 * the communicator's rank, size, device and id come from cuprobe_nccl_comms
 * (calls that make one: from the arguments); on return also the result, the
 * communicator made and the duration.
 */
struct cuda_nccl {
	__u32 api;
	__u32 op;               /* enum cp_nccl_op */
	cuprobe_addr_t comm;    /* calls that make one: on return, the one made */
	__u64 count;            /* elements, as the call takes them */
	__u64 bytes;            /* count x the datatype's size */
	cuprobe_addr_t stream;
	__u64 comm_id;          /* NCCL's hash of the ncclUniqueId ("commId 0x..." in its log); 0 unknown */
	cuprobe_addr_t parent;  /* split, shrink: the communicator split */
	__u32 datatype;         /* ncclDataType_t */
	__u32 redop;            /* ncclRedOp_t */
	__s32 root;             /* root or peer; -1 when the call has none */
	__s32 rank;             /* -1 when not known */
	__s32 nranks;           /* -1 when not known */
	__s32 device;           /* the communicator's device; -1 when not known */
	__u32 flags;            /* CP_NCCL_* */
	__s32 result;           /* return: ncclResult_t */
	__u64 duration_ns;      /* return: entry to return (a collective's enqueue time) */
};

/* ---- decoding ----------------------------------------------------------------------- */

/* The integer arguments, x86-64 SysV: six registers, then the stack slots. */
struct cuprobe_args {
	struct pt_regs *regs;
	__u64 cookie;
	__u64 reg[8];
};

/*
 * The registers are copied out once, each load pinned (barrier_var) so the
 * compiler cannot fold them into a computed context offset, which the
 * verifier refuses.
 */
static __always_inline void cuprobe_load_args(struct cuprobe_args *args, struct pt_regs *regs,
					      __u64 cookie)
{
	__u64 a1 = PT_REGS_PARM1(regs), a2 = PT_REGS_PARM2(regs), a3 = PT_REGS_PARM3(regs);
	__u64 a4 = PT_REGS_PARM4(regs), a5 = PT_REGS_PARM5(regs), a6 = PT_REGS_PARM6(regs);

	barrier_var(a1);
	barrier_var(a2);
	barrier_var(a3);
	barrier_var(a4);
	barrier_var(a5);
	barrier_var(a6);
	args->regs = regs;
	args->cookie = cookie;
	args->reg[0] = a1;
	args->reg[1] = a2;
	args->reg[2] = a3;
	args->reg[3] = a4;
	args->reg[4] = a5;
	args->reg[5] = a6;
}

/* The n-th (1-based) argument; 0 for position 0 (absent). */
static __always_inline __u64 cuprobe_arg(const struct cuprobe_args *args, __u32 n)
{
	__u64 value = 0;

	if (n == 0)
		return 0;
	if (n <= 6)
		return args->reg[(n - 1) & 7]; /* the mask bounds the index for the verifier */
	bpf_probe_read_user(&value, sizeof(value), (void *)(PT_REGS_SP(args->regs) + 8 * (n - 6)));
	return value;
}

/* The argument the cookie names at shift (CP_SHIFT_A, ...). */
static __always_inline __u64 cuprobe_cookie_arg(const struct cuprobe_args *args, __u32 shift)
{
	return cuprobe_arg(args, CP_COOKIE_ARG(args->cookie, shift));
}

/* A signed int argument (root, peer, rank) at shift; -1 when the call has none. */
static __always_inline __s32 cuprobe_cookie_int(const struct cuprobe_args *args, __u32 shift)
{
	return CP_COOKIE_ARG(args->cookie, shift) ? (__s32)cuprobe_cookie_arg(args, shift) : -1;
}

/* Where a stack argument (position 7 and up) lies: a struct passed by value begins there. */
static __always_inline __u64 cuprobe_arg_address(const struct cuprobe_args *args, __u32 n)
{
	return n >= 7 ? PT_REGS_SP(args->regs) + 8 * (n - 6) : 0;
}

/* The leading fields of CUlaunchConfig, as cuda.h lays them out. */
struct cuprobe_launch_config {
	__u32 grid[3];
	__u32 block[3];
	__u32 shared_mem_bytes;
	__u32 pad;
	__u64 stream;
};

/*
 * cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sharedMem, hStream, params, extra)
 * and cuLaunchCooperativeKernel: six registers, then blockDimZ, sharedMem and
 * hStream on the stack. cuLaunchKernelEx(const CUlaunchConfig *, f, ...).
 * cuGraphLaunch(exec, stream), cuLaunchHostFunc(stream, fn, data), cuLaunch(f),
 * cuLaunchGrid(f, w, h), cuLaunchGridAsync(f, w, h, stream): by the cookie.
 */
static __always_inline void cuprobe_decode_launch_stack(const struct cuprobe_args *args,
							struct cuda_launch *out, bool read_stack);

static __always_inline void cuda_decode_launch(const struct cuprobe_args *args,
					       struct cuda_launch *out)
{
	cuprobe_decode_launch_stack(args, out, true);
}

/* read_stack false: the stack arguments left 0 (benches measuring the read's cost). */
static __always_inline void cuprobe_decode_launch_stack(const struct cuprobe_args *args,
							struct cuda_launch *out, bool read_stack)
{
	__u32 kind = CP_COOKIE_KIND(args->cookie);
	int i;

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(args->cookie);
	out->kind = kind;
	if (kind == CP_LAUNCH_KIND_KERNEL || kind == CP_LAUNCH_KIND_COOPERATIVE) {
		__u64 on_stack[3] = {}; /* blockDimZ, sharedMemBytes, hStream */

		/* One read for the three stack arguments above the return address. */
		if (read_stack && bpf_probe_read_user(on_stack, sizeof(on_stack),
						      (void *)(PT_REGS_SP(args->regs) + 8)))
			out->flags |= CP_LAUNCH_CONFIG_FAULT;
		out->function = args->reg[0];
		out->grid[0] = args->reg[1];
		out->grid[1] = args->reg[2];
		out->grid[2] = args->reg[3];
		out->block[0] = args->reg[4];
		out->block[1] = args->reg[5];
		out->block[2] = on_stack[0];
		out->shared_mem_bytes = on_stack[1];
		out->stream = on_stack[2];
		if (kind == CP_LAUNCH_KIND_COOPERATIVE)
			out->flags |= CP_LAUNCH_COOPERATIVE;
	} else if (kind == CP_LAUNCH_KIND_EX) {
		struct cuprobe_launch_config config = {};

		if (bpf_probe_read_user(&config, sizeof(config), (void *)args->reg[0]))
			out->flags |= CP_LAUNCH_CONFIG_FAULT;
		out->function = args->reg[1];
		for (i = 0; i < 3; i++) {
			out->grid[i] = config.grid[i];
			out->block[i] = config.block[i];
		}
		out->shared_mem_bytes = config.shared_mem_bytes;
		out->stream = config.stream;
		out->flags |= CP_LAUNCH_EX;
	} else {
		out->function = cuprobe_cookie_arg(args, CP_SHIFT_A);
		out->stream = cuprobe_cookie_arg(args, CP_SHIFT_STREAM);
		if (kind == CP_LAUNCH_KIND_GRAPH) {
			out->flags = CP_LAUNCH_GRAPH;
		} else if (kind == CP_LAUNCH_KIND_HOST_FUNC) {
			out->flags = CP_LAUNCH_HOST_FUNC;
		} else {
			out->flags = CP_LAUNCH_LEGACY;
			out->grid[0] = CP_COOKIE_ARG(args->cookie, CP_SHIFT_B) ?
				       cuprobe_cookie_arg(args, CP_SHIFT_B) : 1;
			out->grid[1] = CP_COOKIE_ARG(args->cookie, CP_SHIFT_C) ?
				       cuprobe_cookie_arg(args, CP_SHIFT_C) : 1;
			out->grid[2] = 1;
		}
	}
}

static __always_inline void cuda_decode_free(const struct cuprobe_args *args, struct cuda_free *out)
{
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(args->cookie);
	out->kind = CP_COOKIE_KIND(args->cookie);
	out->ptr = cuprobe_cookie_arg(args, CP_SHIFT_A);
	out->stream = cuprobe_cookie_arg(args, CP_SHIFT_STREAM);
}

/* CUmemorytype: 1 host, 2 device, 3 array, 4 unified. */
static __always_inline __u32 cuprobe_copy_direction(__u32 src_type, __u32 dst_type)
{
	if (src_type == 4 || dst_type == 4)
		return CP_COPY_DEFAULT;
	switch (src_type * 8 + dst_type) {
	case 1 * 8 + 2: return CP_COPY_HTOD;
	case 2 * 8 + 1: return CP_COPY_DTOH;
	case 2 * 8 + 2: return CP_COPY_DTOD;
	case 1 * 8 + 1: return CP_COPY_HTOH;
	case 1 * 8 + 3: return CP_COPY_HTOA;
	case 3 * 8 + 1: return CP_COPY_ATOH;
	case 2 * 8 + 3: return CP_COPY_DTOA;
	case 3 * 8 + 2: return CP_COPY_ATOD;
	case 3 * 8 + 3: return CP_COPY_ATOA;
	}
	return CP_COPY_DEFAULT;
}

/* One side of a 2D/3D copy: memory type, then host, device and array pointers. */
struct cuprobe_copy_side {
	__u32 type;
	__u32 pad;
	__u64 host, device, array;
};

static __always_inline __u64 cuprobe_side_address(const struct cuprobe_copy_side *side)
{
	return side->type == 1 ? side->host : side->type == 3 ? side->array : side->device;
}

/* Offsets in CUDA_MEMCPY2D (128 bytes) and CUDA_MEMCPY3D / CUDA_MEMCPY3D_PEER (200 bytes). */
#define CUPROBE_COPY2D_SRC 16
#define CUPROBE_COPY2D_DST 72
#define CUPROBE_COPY2D_EXTENT 112
#define CUPROBE_COPY3D_SRC 32
#define CUPROBE_COPY3D_DST 120
#define CUPROBE_COPY3D_EXTENT 176

/*
 * Copies: 1D between pointers and arrays by the cookie's positions; 2D, 3D
 * and 3D peer copies from their struct; batches from their arrays (the
 * sizes of the first CP_COPY_BATCH_READ_MAX summed).
 */
static __always_inline void cuda_decode_copy(const struct cuprobe_args *args, struct cuda_copy *out)
{
	__u32 variant = CP_COOKIE_VARIANT(args->cookie);
	struct cuprobe_copy_side src = {}, dst = {};
	__u64 extent[3] = { 0, 1, 1 }, desc, sizes[8], n;
	int i, j;

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(args->cookie);
	out->async = CP_COOKIE_ASYNC(args->cookie);
	out->stream = cuprobe_cookie_arg(args, CP_SHIFT_STREAM);
	out->count = 1;
	if (!variant) {
		out->dst = cuprobe_cookie_arg(args, CP_SHIFT_A);
		out->src = cuprobe_cookie_arg(args, CP_SHIFT_B);
		out->bytes = cuprobe_cookie_arg(args, CP_SHIFT_BYTES);
		out->direction = CP_COOKIE_KIND(args->cookie);
		return;
	}
	desc = cuprobe_cookie_arg(args, CP_SHIFT_A);
	if (variant == CP_COPY_VARIANT_2D || variant == CP_COPY_VARIANT_3D) {
		bool flat = variant == CP_COPY_VARIANT_2D;

		if (bpf_probe_read_user(&src, sizeof(src),
					(void *)(desc + (flat ? CUPROBE_COPY2D_SRC : CUPROBE_COPY3D_SRC))) ||
		    bpf_probe_read_user(&dst, sizeof(dst),
					(void *)(desc + (flat ? CUPROBE_COPY2D_DST : CUPROBE_COPY3D_DST))) ||
		    bpf_probe_read_user(extent, flat ? 16 : 24,
					(void *)(desc + (flat ? CUPROBE_COPY2D_EXTENT : CUPROBE_COPY3D_EXTENT))))
			out->flags |= CP_COPY_UNREADABLE;
		out->bytes = extent[0] * extent[1] * extent[2];
		out->direction = cuprobe_copy_direction(src.type, dst.type);
		out->dst = cuprobe_side_address(&dst);
		out->src = cuprobe_side_address(&src);
		return;
	}
	out->direction = CP_COPY_BATCH;
	if (variant == CP_COPY_VARIANT_BATCH_3D) {
		out->count = cuprobe_cookie_arg(args, CP_SHIFT_BYTES);
		out->flags |= CP_COPY_BYTES_UNKNOWN;
		return;
	}
	/* dsts (A), srcs (B), sizes (C), count (BYTES) */
	n = cuprobe_cookie_arg(args, CP_SHIFT_BYTES);
	out->count = n;
	bpf_probe_read_user(&out->dst, sizeof(out->dst), (void *)desc);
	bpf_probe_read_user(&out->src, sizeof(out->src), (void *)cuprobe_cookie_arg(args, CP_SHIFT_B));
	desc = cuprobe_cookie_arg(args, CP_SHIFT_C);
	for (i = 0; i < CP_COPY_BATCH_READ_MAX / 8; i++) {
		if ((__u64)i * 8 >= n)
			break;
		if (bpf_probe_read_user(sizes, sizeof(sizes), (void *)(desc + i * sizeof(sizes)))) {
			/* a short array at the end of a page: one at a time */
			for (j = 0; j < 8; j++)
				if (bpf_probe_read_user(&sizes[j], 8, (void *)(desc + (i * 8 + j) * 8)))
					sizes[j] = 0;
		}
		for (j = 0; j < 8; j++)
			if ((__u64)(i * 8 + j) < n)
				out->bytes += sizes[j];
	}
	if (n > CP_COPY_BATCH_READ_MAX)
		out->flags |= CP_COPY_TRUNCATED;
}

/* cuMemsetD<N>[Async](dst, value, count[, stream]), cuMemsetD2D<N>[Async](dst, pitch, value, width, height[, stream]) */
static __always_inline void cuda_decode_memset(const struct cuprobe_args *args,
					       struct cuda_memset *out)
{
	__u32 size = CP_COOKIE_KIND(args->cookie);

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(args->cookie);
	out->element_size = size;
	out->dst = cuprobe_cookie_arg(args, CP_SHIFT_A);
	out->value = cuprobe_cookie_arg(args, CP_SHIFT_B);
	out->bytes = cuprobe_cookie_arg(args, CP_SHIFT_BYTES) * size;
	if (CP_COOKIE_VARIANT(args->cookie) == CP_MEMSET_2D) {
		out->pitch = cuprobe_cookie_arg(args, CP_SHIFT_C);
		out->bytes *= args->reg[4]; /* height */
	}
	out->stream = cuprobe_cookie_arg(args, CP_SHIFT_STREAM);
	out->async = CP_COOKIE_ASYNC(args->cookie);
}

static __always_inline void cuda_decode_sync(const struct cuprobe_args *args, struct cuda_sync *out)
{
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(args->cookie);
	out->kind = CP_COOKIE_KIND(args->cookie);
	out->handle = cuprobe_cookie_arg(args, CP_SHIFT_A);
}

static __always_inline void cuda_decode_event(const struct cuprobe_args *args, struct cuda_event *out)
{
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(args->cookie);
	out->op = CP_COOKIE_KIND(args->cookie);
	out->event = cuprobe_cookie_arg(args, CP_SHIFT_A);
	out->stream = cuprobe_cookie_arg(args, CP_SHIFT_STREAM);
	out->flags = cuprobe_cookie_arg(args, CP_SHIFT_C);
}

/* Bytes of one element of an ncclDataType_t (int8 ... float8e5m2); 0 for one NCCL does not define. */
static __always_inline __u32 cuprobe_nccl_type_size(__u32 datatype)
{
	switch (datatype) {
	case 0: case 1: case 10: case 11: return 1; /* int8, uint8, float8e4m3, float8e5m2 */
	case 6: case 9: return 2;                   /* float16, bfloat16 */
	case 2: case 3: case 7: return 4;           /* int32, uint32, float32 */
	case 4: case 5: case 8: return 8;           /* int64, uint64, float64 */
	}
	return 0;
}

/*
 * NCCL's hash of the ncclUniqueId at address (cuprobe_nccl_hash.h): the
 * "commId 0x..." NCCL_DEBUG=INFO prints at init. 0 when the id cannot be read.
 */
static __always_inline __u64 cuprobe_nccl_id_hash(__u64 address)
{
	struct cp_nccl_hash h;
	__u64 word;
	int i;

	if (!address)
		return 0;
	cp_nccl_hash_begin(&h, CP_NCCL_UNIQUE_ID_BYTES);
	for (i = 0; i < CP_NCCL_UNIQUE_ID_BYTES / 8; i++) {
		if (bpf_probe_read_user(&word, sizeof(word), (void *)(address + 8 * i)))
			return 0;
		cp_nccl_hash_word(&h, word);
	}
	return cp_nccl_hash_end(&h);
}

/* What cuprobe knows of a communicator of pid; NULL when nothing. */
static __always_inline struct cuprobe_nccl_comm *cuprobe_nccl_comm(__u32 pid, __u64 comm)
{
	struct cuprobe_nccl_comm_key key = { .pid = pid, .comm = comm };

	return comm ? bpf_map_lookup_elem(&cuprobe_nccl_comms, &key) : NULL;
}

/* The communicator's rank, size, device and id into out; CP_NCCL_COMM_UNKNOWN when not known. */
static __always_inline void cuprobe_nccl_fill_comm(struct cuda_nccl *out)
{
	struct cuprobe_nccl_comm *known = cuprobe_nccl_comm(bpf_get_current_pid_tgid() >> 32, out->comm);

	if (!known) {
		out->flags |= CP_NCCL_COMM_UNKNOWN;
		return;
	}
	out->rank = known->rank;
	out->nranks = known->nranks;
	out->device = known->device;
	out->comm_id = known->id;
}

/*
 * Everything an NCCL call's arguments say, by the cookie's slots
 * (cuprobe_catalogue.h, CP_NCCL_APIS): for calls that make a communicator
 * the out pointer is in comm until the return reads it.
 */
static __always_inline void cuda_decode_nccl(const struct cuprobe_args *args, struct cuda_nccl *out)
{
	__u32 op = CP_COOKIE_KIND(args->cookie), size, variant = CP_COOKIE_VARIANT(args->cookie);
	__u64 id_at;

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(args->cookie);
	out->op = op;
	out->comm = cuprobe_cookie_arg(args, CP_SHIFT_A);
	out->root = cuprobe_cookie_int(args, CP_SHIFT_D);
	out->rank = -1;
	out->nranks = -1;
	out->device = -1;
	if (CP_NCCL_MOVES_DATA(op)) {
		out->count = cuprobe_cookie_arg(args, CP_SHIFT_BYTES);
		out->datatype = cuprobe_cookie_arg(args, CP_SHIFT_B);
		out->redop = cuprobe_cookie_arg(args, CP_SHIFT_C);
		out->stream = cuprobe_cookie_arg(args, CP_SHIFT_STREAM);
		size = cuprobe_nccl_type_size(out->datatype);
		if (!size)
			out->flags |= CP_NCCL_BAD_DATATYPE;
		out->bytes = out->count * size;
		cuprobe_nccl_fill_comm(out);
		return;
	}
	switch (op) {
	case CP_NCCL_COMM_INIT:
		out->nranks = cuprobe_cookie_arg(args, CP_SHIFT_B);
		out->rank = out->root;
		out->root = -1;
		id_at = variant == CP_NCCL_ID_BY_VALUE ?
			cuprobe_arg_address(args, CP_COOKIE_ARG(args->cookie, CP_SHIFT_C)) :
			cuprobe_cookie_arg(args, CP_SHIFT_C);
		out->comm_id = cuprobe_nccl_id_hash(id_at);
		if (!out->comm_id)
			out->flags |= CP_NCCL_ID_UNREADABLE;
		out->device = cuprobe_current_device();
		break;
	case CP_NCCL_COMM_INIT_ALL:
		out->nranks = cuprobe_cookie_arg(args, CP_SHIFT_B);
		out->parent = cuprobe_cookie_arg(args, CP_SHIFT_C); /* the device list, until the return */
		break;
	case CP_NCCL_COMM_SPLIT:
	case CP_NCCL_COMM_SHRINK:
		out->parent = cuprobe_cookie_arg(args, CP_SHIFT_C);
		break;
	case CP_NCCL_COMM_COUNT:
	case CP_NCCL_COMM_USER_RANK:
	case CP_NCCL_COMM_CU_DEVICE:
		out->parent = cuprobe_cookie_arg(args, CP_SHIFT_B); /* the answer's int, until the return */
		cuprobe_nccl_fill_comm(out);
		break;
	case CP_NCCL_COMM_FINALIZE:
	case CP_NCCL_COMM_DESTROY:
	case CP_NCCL_COMM_ABORT:
	case CP_NCCL_COMM_REVOKE:
		cuprobe_nccl_fill_comm(out);
		break;
	}
}

/* ---- entry state, and the calls decoded at their return ---------------------------------- */

/* Keeps the arguments the cookie names (and when the call started) for the return probe. */
static __always_inline struct cuprobe_call cuprobe_call_of(const struct cuprobe_args *args,
							   __u64 now)
{
	struct cuprobe_call call = {
		.cookie = args->cookie,
		.a = cuprobe_cookie_arg(args, CP_SHIFT_A),
		.b = cuprobe_cookie_arg(args, CP_SHIFT_B),
		.c = cuprobe_cookie_arg(args, CP_SHIFT_C),
		.bytes = cuprobe_cookie_arg(args, CP_SHIFT_BYTES),
		.stream = cuprobe_cookie_arg(args, CP_SHIFT_STREAM),
		.start_ns = now,
		.stack_id = -1,
	};

	return call;
}

/*
 * The entry state call_stash keeps for return programs. A launch keeps its
 * normalized arguments, packed: a the function, stream, b grid x and y,
 * c grid z and block x, bytes block y and z, caller shared memory and flags
 * (each pair low half first). An NCCL call too: a the communicator (or the
 * out pointer), bytes the count, stream, c the id (init) or the parent (or
 * the pointer the answer goes to), b datatype and redop, caller root and
 * rank, stack_id nranks and device.
 */
static __always_inline struct cuprobe_call cuprobe_stash_of(const struct cuprobe_args *args,
							     __u64 now)
{
	struct cuprobe_call call = cuprobe_call_of(args, now);
	struct cuda_launch l;
	struct cuda_nccl n;

	if (CP_COOKIE_FAMILY(args->cookie) == CP_FAMILY_nccl) {
		cuda_decode_nccl(args, &n);
		call.a = n.comm;
		call.bytes = n.count;
		call.stream = n.stream;
		call.c = n.op == CP_NCCL_COMM_INIT ? n.comm_id : n.parent;
		call.b = n.datatype | (__u64)n.redop << 32;
		call.caller = (__u32)n.root | (__u64)(__u32)n.rank << 32;
		call.stack_id = (__s64)((__u32)n.nranks | (__u64)(__u32)n.device << 32);
		return call;
	}
	if (CP_COOKIE_FAMILY(args->cookie) != CP_FAMILY_launch)
		return call;
	cuda_decode_launch(args, &l);
	call.a = l.function;
	call.stream = l.stream;
	call.b = l.grid[0] | (__u64)l.grid[1] << 32;
	call.c = l.grid[2] | (__u64)l.block[0] << 32;
	call.bytes = l.block[1] | (__u64)l.block[2] << 32;
	call.caller = l.shared_mem_bytes | (__u64)l.flags << 32;
	return call;
}

static __always_inline struct cuprobe_call_key cuprobe_entry_key(struct pt_regs *regs)
{
	struct cuprobe_call_key key = { .pid_tgid = bpf_get_current_pid_tgid(),
					.sp = PT_REGS_SP(regs) };

	return key;
}

/* At the return probe: the stack pointer is the entry's plus the popped return address. */
static __always_inline struct cuprobe_call_key cuprobe_return_key(struct pt_regs *regs)
{
	struct cuprobe_call_key key = { .pid_tgid = bpf_get_current_pid_tgid(),
					.sp = PT_REGS_SP(regs) - 8 };

	return key;
}

/*
 * The entry state of the returning call (left for other return programs),
 * or NULL when its entry was not seen: state of another call made from the
 * same frame is told apart by the API in the cookie.
 */
static __always_inline struct cuprobe_call *cuprobe_returning_call(struct pt_regs *regs)
{
	struct cuprobe_call_key key = cuprobe_return_key(regs);
	struct cuprobe_call *call = bpf_map_lookup_elem(&cuprobe_calls, &key);

	if (call && CP_COOKIE_API(call->cookie) != CP_COOKIE_API(bpf_get_attach_cookie(regs)))
		return NULL;
	return call;
}

/* The CUresult a probed call returned (rax). */
static __always_inline int cuprobe_return_value(struct pt_regs *regs)
{
	return (int)PT_REGS_RC(regs);
}

static __always_inline __u64 cuprobe_duration(const struct cuprobe_call *call)
{
	return call->start_ns ? bpf_ktime_get_ns() - call->start_ns : 0;
}

/* A pointer-sized value the call wrote through its out pointer (0 when it failed or cannot be read). */
static __always_inline __u64 cuprobe_out_value(__u64 out_ptr, int result)
{
	__u64 value = 0;

	if (result != 0 || bpf_probe_read_user(&value, sizeof(value), (void *)out_ptr))
		return 0;
	return value;
}

/*
 * On return: the communicator a call made (read through its out pointer),
 * and a query's answer, in out (as cuda_decode_nccl left it).
 */
static __always_inline void cuda_nccl_returned(struct cuda_nccl *out, int result)
{
	__s32 answer = -1;

	out->result = result;
	if (CP_NCCL_MAKES_COMM(out->op)) {
		out->comm = cuprobe_out_value(out->comm, result);
		if (out->op == CP_NCCL_COMM_INIT_ALL)
			out->rank = 0; /* the first of them */
	}
	if (out->op >= CP_NCCL_COMM_COUNT && out->op <= CP_NCCL_COMM_CU_DEVICE) {
		if (result == 0 && !bpf_probe_read_user(&answer, sizeof(answer), (void *)out->parent)) {
			if (out->op == CP_NCCL_COMM_COUNT)
				out->nranks = answer;
			else if (out->op == CP_NCCL_COMM_USER_RANK)
				out->rank = answer;
			else
				out->device = answer;
		}
		out->parent = 0;
	}
}

static __always_inline void cuda_decode_alloc_call(const struct cuprobe_call *call, int result,
						   struct cuda_alloc *out)
{
	__u64 pitch = 0;

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie);
	out->kind = CP_COOKIE_KIND(call->cookie);
	out->result = result;
	if (CP_COOKIE_VARIANT(call->cookie) == CP_ALLOC_PITCH) {
		/* bytes = *pitch (written by the call) x height */
		if (result == 0)
			bpf_probe_read_user(&pitch, sizeof(pitch), (void *)call->b);
		out->bytes = pitch * call->c;
	} else {
		out->bytes = call->bytes;
	}
	out->stream = CP_COOKIE_ASYNC(call->cookie) ? call->stream : 0;
	out->ptr = cuprobe_out_value(call->a, result);
}

/* The location id in a CUmemAllocationProp: {type, handle types, {location type, id}}. */
#define CUPROBE_ALLOC_PROP_LOCATION_ID 12

static __always_inline void cuda_decode_vmm_call(const struct cuprobe_call *call, int result,
						 struct cuda_vmm *out)
{
	__u32 op = CP_COOKIE_KIND(call->cookie);

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie);
	out->op = op;
	out->result = result;
	out->bytes = call->bytes;
	out->handle = call->c;
	out->ptr = call->b;
	/* Calls that hand something back through a pointer: the handle or the range. */
	if (op == CP_VMM_CREATE || op == CP_VMM_RETAIN)
		out->handle = cuprobe_out_value(call->a, result);
	if (op == CP_VMM_RESERVE)
		out->ptr = cuprobe_out_value(call->a, result);
}

static __always_inline void cuda_decode_context_call(const struct cuprobe_call *call, int result,
						     struct cuda_context *out)
{
	__u32 op = CP_COOKIE_KIND(call->cookie);

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie);
	out->op = op;
	out->result = result;
	out->device = CP_COOKIE_ARG(call->cookie, CP_SHIFT_C) ? (__s32)call->c : -1;
	out->context = op == CP_CONTEXT_RETAIN || op == CP_CONTEXT_CREATE || op == CP_CONTEXT_POP ?
		       cuprobe_out_value(call->a, result) : call->b;
}

static __always_inline void cuda_decode_module_call(const struct cuprobe_call *call, int result,
						    struct cuda_module *out)
{
	__u32 op = CP_COOKIE_KIND(call->cookie);

	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie);
	out->op = op;
	out->result = result;
	out->handle = op == CP_MODULE_LOAD || op == CP_LIBRARY_LOAD ? cuprobe_out_value(call->a, result) :
		      call->c;
	out->path = CP_COOKIE_VARIANT(call->cookie) == CP_MODULE_FROM_FILE ? call->b : 0;
}

/* ---- one decoder per struct, for CUDA_PROG ------------------------------------------------- */

/* Entry: the arguments; returns 0 when ev holds the call. */
#define cuprobe_decode_entry(args, ev)							\
	_Generic((ev),									\
		struct cuda_launch *: cuda_decode_launch,				\
		struct cuda_free *: cuda_decode_free,					\
		struct cuda_copy *: cuda_decode_copy,					\
		struct cuda_memset *: cuda_decode_memset,				\
		struct cuda_sync *: cuda_decode_sync,					\
		struct cuda_event *: cuda_decode_event,					\
		struct cuda_alloc *: cuprobe_decode_alloc_entry,			\
		struct cuda_vmm *: cuprobe_decode_vmm_entry,				\
		struct cuda_module *: cuprobe_decode_module_entry,			\
		struct cuda_context *: cuprobe_decode_context_entry,			\
		struct cuda_nccl *: cuda_decode_nccl)((args), (ev))

/*
 * Entry decoders of the families decoded from their kept arguments: the
 * call as its return would see it, before anything was written back.
 */
#define CUPROBE_ENTRY_DECODER(type)							\
static __always_inline void cuprobe_decode_##type##_entry(const struct cuprobe_args *args,	\
							  struct cuda_##type *out)		\
{											\
	struct cuprobe_call call = cuprobe_call_of(args, 0);				\
											\
	cuda_decode_##type##_call(&call, -1, out);					\
	out->result = 0;								\
}

CUPROBE_ENTRY_DECODER(alloc)
CUPROBE_ENTRY_DECODER(vmm)
CUPROBE_ENTRY_DECODER(module)
CUPROBE_ENTRY_DECODER(context)

/*
 * Return: the entry's arguments from the entry state (cuprobe keeps it for
 * every family a return program asks for), the result and what the call
 * wrote back. Returns the state, or NULL when the entry was not seen.
 */
#define CUPROBE_RETURN_DECODER(type, family_decode)					\
static __always_inline int cuprobe_decode_return_##type(struct pt_regs *regs,		\
							struct cuda_##type *out)	\
{											\
	struct cuprobe_call *call = cuprobe_returning_call(regs);			\
	int result = cuprobe_return_value(regs);					\
											\
	if (!call)									\
		return -1;								\
	family_decode;									\
	out->result = result;								\
	out->duration_ns = cuprobe_duration(call);					\
	return 0;									\
}

CUPROBE_RETURN_DECODER(alloc, cuda_decode_alloc_call(call, result, out))
CUPROBE_RETURN_DECODER(vmm, cuda_decode_vmm_call(call, result, out))
CUPROBE_RETURN_DECODER(module, cuda_decode_module_call(call, result, out))
CUPROBE_RETURN_DECODER(context, cuda_decode_context_call(call, result, out))
CUPROBE_RETURN_DECODER(sync,
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie); out->kind = CP_COOKIE_KIND(call->cookie);
	out->handle = call->a)
CUPROBE_RETURN_DECODER(free,
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie); out->kind = CP_COOKIE_KIND(call->cookie);
	out->ptr = call->a; out->stream = call->stream)
CUPROBE_RETURN_DECODER(event,
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie); out->op = CP_COOKIE_KIND(call->cookie);
	out->event = call->a; out->stream = call->stream; out->flags = call->c)
CUPROBE_RETURN_DECODER(memset,
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie); out->element_size = CP_COOKIE_KIND(call->cookie);
	out->dst = call->a; out->value = call->b; out->stream = call->stream;
	out->async = CP_COOKIE_ASYNC(call->cookie);
	out->bytes = call->bytes * CP_COOKIE_KIND(call->cookie))
CUPROBE_RETURN_DECODER(launch,
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie); out->kind = CP_COOKIE_KIND(call->cookie);
	out->function = call->a; out->stream = call->stream;
	out->grid[0] = call->b; out->grid[1] = call->b >> 32;
	out->grid[2] = call->c; out->block[0] = call->c >> 32;
	out->block[1] = call->bytes; out->block[2] = call->bytes >> 32;
	out->shared_mem_bytes = call->caller; out->flags = call->caller >> 32)
/* An NCCL call from its packed entry state (cuprobe_stash_of), then what it returned. */
static __always_inline void cuprobe_nccl_of_call(const struct cuprobe_call *call, int result,
						 struct cuda_nccl *out)
{
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie);
	out->op = CP_COOKIE_KIND(call->cookie);
	out->comm = call->a;
	out->count = call->bytes;
	out->stream = call->stream;
	out->datatype = (__u32)call->b;
	out->redop = call->b >> 32;
	out->root = (__s32)call->caller;
	out->rank = (__s32)(call->caller >> 32);
	out->nranks = (__s32)call->stack_id;
	out->device = (__s32)((__u64)call->stack_id >> 32);
	if (out->op == CP_NCCL_COMM_INIT)
		out->comm_id = call->c;
	else
		out->parent = call->c;
	if (CP_NCCL_MOVES_DATA(out->op)) {
		out->bytes = out->count * cuprobe_nccl_type_size(out->datatype);
		if (!cuprobe_nccl_type_size(out->datatype))
			out->flags |= CP_NCCL_BAD_DATATYPE;
	}
	cuda_nccl_returned(out, result);
}

CUPROBE_RETURN_DECODER(nccl, cuprobe_nccl_of_call(call, result, out))
CUPROBE_RETURN_DECODER(copy,
	__builtin_memset(out, 0, sizeof(*out));
	out->api = CP_COOKIE_API(call->cookie); out->direction = CP_COOKIE_KIND(call->cookie);
	out->dst = call->a; out->src = call->b; out->bytes = call->bytes; out->stream = call->stream;
	out->async = CP_COOKIE_ASYNC(call->cookie); out->count = 1)

#define cuprobe_decode_return(regs, ev)							\
	_Generic((ev),									\
		struct cuda_launch *: cuprobe_decode_return_launch,			\
		struct cuda_alloc *: cuprobe_decode_return_alloc,			\
		struct cuda_free *: cuprobe_decode_return_free,				\
		struct cuda_vmm *: cuprobe_decode_return_vmm,				\
		struct cuda_copy *: cuprobe_decode_return_copy,				\
		struct cuda_memset *: cuprobe_decode_return_memset,			\
		struct cuda_sync *: cuprobe_decode_return_sync,				\
		struct cuda_event *: cuprobe_decode_return_event,			\
		struct cuda_module *: cuprobe_decode_return_module,			\
		struct cuda_context *: cuprobe_decode_return_context,			\
		struct cuda_nccl *: cuprobe_decode_return_nccl)((regs), (ev))

/*
 * A program on a family's calls: CUDA_PROG(name, struct cuda_FAMILY, arg) in a
 * "cuda/FAMILY" section, CUDA_RETURN_PROG(...) in "cuda.return/FAMILY". The
 * body gets ctx (struct pt_regs *) and arg (const struct cuda_FAMILY *); it
 * runs only for traced processes, and its return value is ignored.
 */
#define CUDA_PROG(name, type, arg)							\
name(struct pt_regs *ctx);								\
static __always_inline int ____##name(struct pt_regs *ctx, const type *arg);		\
int name(struct pt_regs *ctx)								\
{											\
	struct cuprobe_args ____args;							\
	type ____event;									\
											\
	if (!cuprobe_traced())								\
		return 0;								\
	cuprobe_load_args(&____args, ctx, bpf_get_attach_cookie(ctx));			\
	cuprobe_decode_entry(&____args, &____event);					\
	return ____##name(ctx, &____event);						\
}											\
static __always_inline int ____##name(struct pt_regs *ctx, const type *arg)

#define CUDA_RETURN_PROG(name, type, arg)						\
name(struct pt_regs *ctx);								\
static __always_inline int ____##name(struct pt_regs *ctx, const type *arg);		\
int name(struct pt_regs *ctx)								\
{											\
	type ____event;									\
											\
	if (!cuprobe_traced() || cuprobe_decode_return(ctx, &____event))		\
		return 0;								\
	return ____##name(ctx, &____event);						\
}											\
static __always_inline int ____##name(struct pt_regs *ctx, const type *arg)

/* ---- device programs: inside the GPU's kernels ------------------------------------------ */

/*
 * A device program runs inside CUDA kernels, in every thread, when cuprobe
 * runs PROG with a COMMAND (`cuprobe run PROG -- COMMAND`: the one mode
 * that puts code into a process):
 *
 *	CUPROBE_GPU_ARRAY(threads, __u64, 1);
 *
 *	SEC("gpu/vec_add")
 *	int GPU_PROG(count_threads)
 *	{
 *		__u32 zero = 0;
 *		__u64 *count = bpf_map_lookup_elem(&threads, &zero);
 *
 *		if (count)
 *			__sync_fetch_and_add(count, 1);
 *		return 0;
 *	}
 *
 * SEC("gpu/GLOB") runs at the entry of every kernel whose name matches
 * GLOB, SEC("gpu.exit/GLOB") before each of its exits. GLOB is an
 * fnmatch(3) pattern matched against the demangled name without its
 * parameters (vec_add, ns::gemm<float>) and against the mangled name;
 * either match counts.
 *
 * The kernel's verifier checks a device program first (as a kprobe
 * program: the helpers below are the kernel's own, of the same
 * signatures); cuprobe then translates the verified bytecode to PTX, which
 * the driver compiles with the kernel it goes into. What a device program
 * may use:
 *  - ctx's fields (struct cuprobe_gpu_ctx, cuprobe_events.h), read whole
 *    or in part, never written: thread and block index and dims, SM,
 *    warp and lane, the GPU's globaltimer, the launch's sequence number;
 *  - bpf_map_lookup_elem and bpf_map_update_elem on arrays declared with
 *    CUPROBE_GPU_ARRAY, and the object's global variables (.bss, .data,
 *    .rodata: const volatile settings work too);
 *  - bpf_ktime_get_ns (the GPU's globaltimer, ns) and
 *    bpf_get_smp_processor_id (the SM's id);
 *  - atomics (__sync_fetch_and_add, _or, _and, _xor, __sync_lock_test_and_set,
 *    __sync_val_compare_and_swap): PTX atom, relaxed, device-wide;
 *  - arithmetic, branches, bounded loops, the 512-byte stack, subprograms.
 * Anything else (another helper, a map of another type, a tail call, a
 * kfunc) is refused when PROG is loaded, naming what. Host programs
 * (cuda/FAMILY) of the same object share the maps by name: what GPU
 * threads write, a host program or cuprobe reads. The return value is
 * ignored.
 */
#define GPU_PROG(name) name(struct cuprobe_gpu_ctx *ctx)

/*
 * An array that device programs (and host programs) may use: value_type
 * values, entries of them, keys 0 to entries - 1. Mappable
 * (BPF_F_MMAPABLE), so that the GPU writes the kernel map's own memory.
 */
#define CUPROBE_GPU_ARRAY(name, value_type, entries)				\
	struct {								\
		__uint(type, BPF_MAP_TYPE_ARRAY);				\
		__uint(map_flags, 1u << 10); /* BPF_F_MMAPABLE */		\
		__uint(max_entries, entries);					\
		__type(key, __u32);						\
		__type(value, value_type);					\
	} name SEC(".maps")

/* The block's index in its grid, x fastest. */
static __always_inline __u64 cuprobe_gpu_block_index(const struct cuprobe_gpu_ctx *ctx)
{
	return ctx->block_x + ctx->grid_dim_x * (ctx->block_y + ctx->grid_dim_y * ctx->block_z);
}

/* The thread's index in its block, x fastest. */
static __always_inline __u64 cuprobe_gpu_thread_index(const struct cuprobe_gpu_ctx *ctx)
{
	return ctx->thread_x +
	       ctx->block_dim_x * (ctx->thread_y + ctx->block_dim_y * ctx->thread_z);
}

/* Threads per block. */
static __always_inline __u64 cuprobe_gpu_block_threads(const struct cuprobe_gpu_ctx *ctx)
{
	return ctx->block_dim_x * ctx->block_dim_y * ctx->block_dim_z;
}

/* True in one thread of each block, (0, 0, 0): for what happens once per block. */
static __always_inline bool cuprobe_gpu_block_leader(const struct cuprobe_gpu_ctx *ctx)
{
	return (ctx->thread_x | ctx->thread_y | ctx->thread_z) == 0;
}

/*
 * A ring of records from GPU threads to cuprobe, which prints each record
 * from its BTF, with the launch's seq: record_type slots of a kernel map
 * (mmapable arrays: NAME, the slots, and NAME__control). On the GPU the
 * records go to device memory, in segments (CUPROBE_GPU_RING_SEGMENTS in
 * cuprobe_events.h); the injection moves them into the kernel map at the
 * calls that prove kernels done (a stream, context or event sync, a
 * completed query, a blocking copy), and cuprobe reads the map then and
 * when a process exits; nothing polls it, no thread runs in COMMAND for it.
 *
 *	struct warp_exit { __u32 block, warp; };
 *	CUPROBE_GPU_RING(exits, struct warp_exit, 4096);
 *	...
 *	struct warp_exit record = { ... };
 *	cuprobe_gpu_output(exits, ctx, &record);
 *
 * records: a power of two. A record that finds its segment (or the map)
 * full is counted as lost (per launch), never written: produced =
 * delivered + lost, said at the end. The layout and the protocol: struct
 * cuprobe_gpu_ring_control in cuprobe_events.h.
 */
#define CUPROBE_GPU_RING(name, record_type, records)				\
	_Static_assert((records) > 0 && ((records) & ((records) - 1)) == 0,	\
		       "CUPROBE_GPU_RING(" #name "): records must be a power of two"); \
	struct cuprobe_gpu_ring_slot__##name {					\
		struct cuprobe_gpu_ring_slot slot;				\
		record_type record;						\
	};									\
	CUPROBE_GPU_ARRAY(name, struct cuprobe_gpu_ring_slot__##name, records);	\
	CUPROBE_GPU_ARRAY(name##__control, struct cuprobe_gpu_ring_control, 1)

/*
 * A free slot of a segment (capacity slots, a power of two), its
 * launch_seq set; NULL, counted lost, when full. slots and control are the
 * ring's maps: the translator makes them the block's segment. One atomic:
 * a position that finds the segment full is a hole the injection skips
 * (it moves a segment only when no kernel that writes it can be running).
 */
static __always_inline struct cuprobe_gpu_ring_slot *
cuprobe_gpu_ring_reserve(void *slots, struct cuprobe_gpu_ring_control *control, __u32 capacity,
			 const struct cuprobe_gpu_ctx *ctx, __u64 *position)
{
	/* Read before the position: it only grows, so the estimate of slots in use is never low. */
	__u64 released = control->released;
	/* The launch's slot, not its seq: the host reads the seq when it moves the record. */
	__u64 seq = ctx->launch_slot;
	struct cuprobe_gpu_ring_launch_lost *bucket;
	struct cuprobe_gpu_ring_slot *slot;
	__u32 index;

	*position = __sync_fetch_and_add(&control->head, 1);
	if (*position - released >= capacity) {
		bucket = &control->lost_by_launch[seq / 8 % CUPROBE_GPU_RING_LAUNCH_BUCKETS];
		bucket->launch_seq = seq;
		__sync_fetch_and_add(&bucket->lost, 1);
		__sync_fetch_and_add(&control->lost, 1);
		return NULL;
	}
	index = (__u32)(*position & (capacity - 1));
	slot = bpf_map_lookup_elem(slots, &index);
	if (slot)
		slot->launch_seq = seq;
	return slot; /* never NULL: index < capacity (the check is for the verifier) */
}

/*
 * One record, *record_ptr, into ring name (declared with CUPROBE_GPU_RING),
 * from the device program whose context is ctx: 0, or -1 when its segment
 * was full (counted as lost). The commit is a plain store: the injection
 * reads a segment only once the kernels that write it are done.
 */
#define cuprobe_gpu_output(name, ctx, record_ptr)				\
	({									\
		__u32 ____zero = 0;						\
		__u64 ____position = 0;						\
		struct cuprobe_gpu_ring_control *____control =			\
			bpf_map_lookup_elem(&name##__control, &____zero);	\
		struct cuprobe_gpu_ring_slot__##name *____slot = ____control ?	\
			(void *)cuprobe_gpu_ring_reserve(&name, ____control,	\
				CUPROBE_GPU_RING_SEGMENT_SLOTS(			\
					sizeof(*name.max_entries) / sizeof(int)), (ctx), \
				&____position) : NULL;				\
		if (____slot) {							\
			__builtin_memcpy(&____slot->record, (record_ptr),	\
					 sizeof(____slot->record));		\
			____slot->slot.commit = ____position + 1;		\
		}								\
		____slot ? 0 : -1;						\
	})

#endif /* CUPROBE_BPF_H */
