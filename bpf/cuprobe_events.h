/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one record format shared by the BPF programs (bpf/) and userspace.
 * Only __u32/__u64 fields, every struct a multiple of 8 bytes, no libc:
 * the same bytes mean the same thing on both sides.
 */
#ifndef CUPROBE_EVENTS_H
#define CUPROBE_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "cuprobe_catalogue.h"

/*
 * The record types, one line each (as cuprobe_catalogue.h is for APIs):
 *   R(NAME, value, member, struct, type name)
 * CP_EV_NAME = value is the first field of every ring-buffer record (the
 * values are ABI: never renumber one); member is its member of union
 * cp_event (cuprobe.h), struct its layout below, type name what --json
 * writes as "type". Generated from it: enum cp_event_type, the sizes and
 * alignment asserts cp_event__decode relies on, the union's members, the
 * type names, and each output format's table of record writers (a writer
 * named after the member in each file of userspace/format/). A new record
 * type is a line here, its struct, the BPF program writing it, and its
 * writer in each format.
 */
#define CP_RECORD_TYPES(R) \
	/* a kernel, host-function or graph launch (driver API) */ \
	R(LAUNCH, 1, launch, cp_launch_event, "launch") \
	/* an allocation returned */ \
	R(ALLOC, 2, alloc, cp_alloc_event, "alloc") \
	/* a free was called */ \
	R(FREE, 3, free, cp_free_event, "free") \
	/* a memcpy was called */ \
	R(COPY, 4, copy, cp_copy_event, "copy") \
	/* a synchronization was called, or a completion query returned */ \
	R(SYNC, 5, sync, cp_sync_event, "sync") \
	/* a function/kernel handle learned its name */ \
	R(NAME, 6, name, cp_name_event, "name") \
	/* process lifecycle: cuInit, fork, exit */ \
	R(PROC, 7, proc, cp_proc_event, "process") \
	/* cudaLaunchKernel (runtime API): its host stub address */ \
	R(RT_LAUNCH, 8, rt_launch, cp_rt_launch_event, "rt_launch") \
	/* a memset was called */ \
	R(MEMSET, 9, memset, cp_memset_event, "memset") \
	/* an event was recorded on, or waited for by, a stream */ \
	R(EVENT, 10, event, cp_event_event, "event") \
	/* a module or library was loaded or unloaded */ \
	R(MODULE, 11, module, cp_module_event, "module") \
	/* virtual memory management: physical handles, ranges, mappings */ \
	R(VMM, 12, vmm, cp_vmm_event, "vmm") \
	/* a process mapped a CUDA library file (attach event) */ \
	R(ATTACH, 13, attach, cp_attach_event, "attach") \
	/* a context was made, made current, pushed, popped or destroyed */ \
	R(CONTEXT, 14, context, cp_context_event, "context") \
	/* an API call returned (return_records: slices for --perfetto) */ \
	R(RETURN, 15, ret, cp_return_event, "return") \
	/* the NVIDIA driver reported a GPU error (Xid) */ \
	R(XID, 16, xid, cp_xid_event, "xid") \
	/* a Python stack seen for the first time, its frames (--python) */ \
	R(PY_STACK, 17, py_stack, cp_py_stack_event, "py_stack") \
	/* an NCCL call returned: a collective, send/recv, group, communicator call */ \
	R(NCCL, 18, nccl, cp_nccl_event, "nccl")

#define CP_EV_ENUM(NAME, value, member, type, name) CP_EV_##NAME = value,
enum cp_event_type {
	CP_RECORD_TYPES(CP_EV_ENUM)
	CP_EV_TYPE_MAX,     /* one past the last: keep the lines in the order of their values */
};
#undef CP_EV_ENUM

/* API families (bpf/cuprobe_catalogue.h): the record type each one writes. */
#define CP_FAMILY_ENUM(f, sdk) CP_FAMILY_##f,
enum cp_family {
	CP_FAMILY_NONE = 0,
	CP_FAMILIES(CP_FAMILY_ENUM)
	CP_FAMILY_MAX,
};
#undef CP_FAMILY_ENUM

/* The probed libraries (bpf/cuprobe_catalogue.h): which table a file gets. */
#define CP_LIBRARY_ENUM(lib, table, prefix) CP_LIBRARY_##lib,
enum cp_library {
	CP_LIBRARIES(CP_LIBRARY_ENUM)
	CP_LIBRARY_MAX,
};
#undef CP_LIBRARY_ENUM

/*
 * API identifiers, from the catalogue. Each probe is attached with its API
 * id (and the rest of its catalogue cookie) as the BPF cookie, so one
 * program serves every symbol of the same signature.
 */
#define CP_API_ENUM_PROBE(sym, family, prog, ret, bits) CP_API_##sym,
#define CP_API_ENUM_SKIP(sym, family, reason)
#define CP_API_ENUM_PSEUDO(name) CP_API_##name,
#define CP_API_ENUM_TABLE(lib, table, prefix) table(CP_API_ENUM_PROBE, CP_API_ENUM_SKIP)
enum cp_api {
	CP_API_UNKNOWN = 0,
	CP_LIBRARIES(CP_API_ENUM_TABLE)
	CP_PSEUDO_APIS(CP_API_ENUM_PSEUDO)
	CP_API_MAX,
};
#undef CP_API_ENUM_TABLE
#undef CP_API_ENUM_PROBE
#undef CP_API_ENUM_SKIP
#undef CP_API_ENUM_PSEUDO

/*
 * Cookie layout, one __u64 per probed symbol (the catalogue's last column):
 *   bits  0-15  enum cp_api
 *   bits 16-23  kind: the family's own enum (memory kind, copy direction, ...)
 *   bit  24     async: the call takes a stream
 *   bits 25-27  variant: how to decode (2D memset, pitch allocation, ...)
 *   bits 28-47  argument positions, 4 bits each (1-6 registers, 7+ stack, 0 absent):
 *               A (destination/pointer/handle), B (source/value), BYTES, STREAM, C (extra)
 *   bits 48-55  enum cp_family (added from the catalogue's family column)
 *   bits 56-59  a sixth argument position, D (NCCL's root, peer or rank)
 */
#define CP_KIND(k)          ((__u64)(k) << 16)
#define CP_ASYNC            (1ull << 24)
#define CP_VARIANT(v)       ((__u64)(v) << 25)
#define CP_ARG_A(n)         ((__u64)(n) << 28)
#define CP_ARG_B(n)         ((__u64)(n) << 32)
#define CP_ARG_BYTES(n)     ((__u64)(n) << 36)
#define CP_ARG_STREAM(n)    ((__u64)(n) << 40)
#define CP_ARG_C(n)         ((__u64)(n) << 44)
#define CP_FAMILY_BITS(f)   ((__u64)(f) << 48)
#define CP_ARG_D(n)         ((__u64)(n) << 56)

#define CP_COOKIE_API(c)     ((__u32)((c) & 0xffff))
#define CP_COOKIE_KIND(c)    ((__u32)(((c) >> 16) & 0xff))
#define CP_COOKIE_ASYNC(c)   ((__u32)(((c) >> 24) & 0x1))
#define CP_COOKIE_VARIANT(c) ((__u32)(((c) >> 25) & 0x7))
#define CP_COOKIE_FAMILY(c)  ((__u32)(((c) >> 48) & 0xff))
#define CP_COOKIE_ARG(c, shift) ((__u32)(((c) >> (shift)) & 0xf))
#define CP_SHIFT_A 28
#define CP_SHIFT_B 32
#define CP_SHIFT_BYTES 36
#define CP_SHIFT_STREAM 40
#define CP_SHIFT_C 44
#define CP_SHIFT_D 56

/*
 * Counters kept per CPU by the BPF side, indexed by these slots. Slots below
 * CP_API_MAX are per-API probe hits (after the pid filter).
 */
enum cp_counter {
	CP_CNT_RECORDS_ATTEMPTED = CP_API_MAX, /* every ring reservation tried */
	CP_CNT_RECORDS_LOST,        /* reservations that failed: ring full */
	CP_CNT_PENDING_OVERFLOW,    /* entry->return state that did not fit */
	CP_CNT_PENDING_MISSED,      /* return probe without its entry state */
	CP_CNT_TARGETS_OVERFLOW,    /* forked children that did not fit in the pid set */
	CP_CNT_FILTERED,            /* probe hits in processes nobody asked about */
	CP_CNT_KERNEL_STATS_FULL,   /* (pid, kernel) rows that did not fit */
	CP_CNT_API_STATS_FULL,      /* (pid, api) rows that did not fit */
	CP_CNT_MEM_STATS_FULL,      /* per-process memory rows that did not fit */
	CP_CNT_LIVE_ALLOCS_FULL,    /* live allocations not tracked: map full */
	CP_CNT_STACKS_LOST,         /* allocation stacks not captured */
	CP_CNT_CALL_START_FULL,     /* calls whose latency could not be timed */
	CP_CNT_VMM_FULL,            /* physical handles or mappings not tracked: map full */
	CP_CNT_VMM_UNKNOWN,         /* releases/unmaps of handles made before tracing began */
	CP_CNT_DEVICE_STATS_FULL,   /* device memory or copy updates that did not fit their maps */
	CP_CNT_HOLD_FAILED,         /* new driver mappings whose process could not be held */
	CP_CNT_NCCL_TOO_DEEP,       /* NCCL calls nested deeper than a thread's call stack holds */
	CP_CNT_NCCL_UNMATCHED,      /* NCCL returns without their entry (a thread's stack lost) */
	CP_CNT_NCCL_NESTED,         /* NCCL exports called inside another (ncclBcast's ncclBroadcast) */
	CP_CNT_NCCL_COMMS_FULL,     /* communicators not kept: map full */
	CP_CNT_NCCL_STATS_FULL,     /* (pid, communicator, op) rows that did not fit */
	/* Python stacks (--python): see bpf/cuprobe_python.bpf.h. */
	CP_CNT_PY_WALKS,            /* calls of Python processes whose stack was walked */
	CP_CNT_PY_NO_FRAMES,        /* ... from threads with no Python thread state or frame */
	CP_CNT_PY_TRUNCATED,        /* stacks deeper than CP_PY_STACK_MAX frames, cut */
	CP_CNT_PY_UNREADABLE,       /* walks stopped by a thread state or frame that could not be read */
	CP_CNT_PY_NEW_STACKS,       /* stacks seen for the first time (a CP_EV_PY_STACK each) */
	CP_CNT_PY_STACKS_LOST,      /* new stacks whose record did not fit in the ring */
	CP_CNT_PY_SEEN_FULL,        /* new stacks the dedup map could not keep (seen again: sent again) */
	CP_CNT_PY_COLLISIONS,       /* two stacks with one id: the later call carries no stack */
	CP_CNT_PY_BUSY,             /* calls without a stack: a walk preempted on their CPU had the scratch */
	CP_CNT_MAX,
};

/* Memory kinds of CP_EV_ALLOC / CP_EV_FREE (the alloc and free families' kind). */
enum cp_mem_kind {
	CP_MEM_DEVICE = 1,
	CP_MEM_MANAGED = 2,
	CP_MEM_HOST = 3,     /* page-locked host memory */
	CP_MEM_DEVICE_ASYNC = 4, /* stream-ordered (cuMemAllocAsync, cuMemAllocFromPoolAsync) */
};

/* Decoding variants of the alloc family. */
#define CP_ALLOC_PITCH 1 /* bytes = *pitch (arg B, written by the call) x height (arg C) */

/* Copy directions of CP_EV_COPY (the copy family's kind). */
enum cp_copy_dir {
	CP_COPY_DEFAULT = 0, /* unified addressing: the driver infers the direction */
	CP_COPY_HTOD = 1,
	CP_COPY_DTOH = 2,
	CP_COPY_DTOD = 3,
	CP_COPY_HTOH = 4,
	CP_COPY_PEER = 5,    /* device to device across contexts */
	CP_COPY_HTOA = 6,    /* A: a CUDA array */
	CP_COPY_ATOH = 7,
	CP_COPY_DTOA = 8,
	CP_COPY_ATOD = 9,
	CP_COPY_ATOA = 10,
	CP_COPY_BATCH = 11,  /* a batch of copies in any directions */
	CP_COPY_DIR_MAX,
};

/* Decoding variants of the copy family: copies described by a struct or an array. */
#define CP_COPY_VARIANT_2D 1       /* CUDA_MEMCPY2D */
#define CP_COPY_VARIANT_3D 2       /* CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER (same layout) */
#define CP_COPY_VARIANT_BATCH 3    /* arrays of dsts (A), srcs (B), sizes (C), count (BYTES) */
#define CP_COPY_VARIANT_BATCH_3D 4 /* count of CUDA_MEMCPY3D_BATCH_OP (BYTES); bytes not decoded */

/* Flags of CP_EV_COPY. */
#define CP_COPY_UNREADABLE   (1u << 0) /* the copy's description could not be read */
#define CP_COPY_BYTES_UNKNOWN (1u << 1) /* a 3D batch: only the operation count is known */
#define CP_COPY_TRUNCATED    (1u << 2) /* a batch longer than the probe reads: bytes of the first ops */
#define CP_COPY_BATCH_READ_MAX 64

/* Decoding variants of the memset family (its kind is the element size: 1, 2 or 4). */
#define CP_MEMSET_2D 1 /* (dst, pitch, value, width, height[, stream]) */

/* Synchronization kinds of CP_EV_SYNC. */
enum cp_sync_kind {
	CP_SYNC_CONTEXT = 1,
	CP_SYNC_STREAM = 2,
	CP_SYNC_EVENT = 3,
	CP_SYNC_QUERY_STREAM = 4, /* cuStreamQuery returned (result says whether it was idle) */
	CP_SYNC_QUERY_EVENT = 5,  /* cuEventQuery returned */
	CP_SYNC_COPY = 6,         /* a blocking host<->device copy returned (after the legacy stream) */
};

/* Operations of CP_EV_EVENT. */
enum cp_event_op {
	CP_EVENT_RECORD = 1, /* the event is recorded on the stream */
	CP_EVENT_WAIT = 2,   /* the stream waits for the event */
	/* Context-wide (cuCtxRecordEvent, cuGreenCtx*): the stream field holds the context. */
	CP_EVENT_RECORD_CONTEXT = 3, /* the event captures all of the context's work so far */
	CP_EVENT_WAIT_CONTEXT = 4,   /* the context's later work waits for the event */
};

/* Operations of CP_EV_MODULE. */
enum cp_module_op {
	CP_MODULE_LOAD = 1,
	CP_MODULE_UNLOAD = 2,
	CP_LIBRARY_LOAD = 3,
	CP_LIBRARY_UNLOAD = 4,
};
#define CP_MODULE_FROM_FILE 1 /* variant: arg B is a path */

/* Operations of CP_EV_VMM. */
enum cp_vmm_op {
	CP_VMM_CREATE = 1,       /* cuMemCreate: physical memory, a handle */
	CP_VMM_RELEASE = 2,      /* cuMemRelease: one reference to the handle dropped */
	CP_VMM_RETAIN = 3,       /* cuMemRetainAllocationHandle: one more reference */
	CP_VMM_MAP = 4,          /* cuMemMap: the handle mapped at ptr */
	CP_VMM_UNMAP = 5,        /* cuMemUnmap: a range unmapped */
	CP_VMM_RESERVE = 6,      /* cuMemAddressReserve: a virtual range */
	CP_VMM_ADDRESS_FREE = 7, /* cuMemAddressFree */
};

/* Operations of CP_EV_CONTEXT (the context family's kind). */
enum cp_context_op {
	CP_CONTEXT_RETAIN = 1,   /* cuDevicePrimaryCtxRetain: the device's primary context */
	CP_CONTEXT_CREATE = 2,   /* cuCtxCreate */
	CP_CONTEXT_DESTROY = 3,
	CP_CONTEXT_SET = 4,      /* cuCtxSetCurrent: the thread's current context */
	CP_CONTEXT_PUSH = 5,
	CP_CONTEXT_POP = 6,
};

/* Kinds of the name family. */
#define CP_NAME_LOOKUP 1 /* cuModuleGetFunction/cuLibraryGetKernel(out, owner, name) */
#define CP_NAME_ALIAS 2  /* cuKernelGetFunction(out, kernel) */

/*
 * Benches only (bench/probe_cost.c): parts of the launch probe left out,
 * to find where its time goes. Never set by cuprobe itself.
 */
enum cp_bench_omit {
	CP_OMIT_FILTER = 1 << 0,     /* the target look-up */
	CP_OMIT_COUNTERS = 1 << 1,   /* the per-CPU hit counter */
	CP_OMIT_CLOCK = 1 << 2,      /* bpf_ktime_get_ns */
	CP_OMIT_STACK_ARGS = 1 << 3, /* the user-memory read of the stack arguments */
	CP_OMIT_DEVICE = 1 << 4,     /* the current context's device */
	CP_OMIT_RECORD = 1 << 5,     /* the ring reserve, fill and submit */
	CP_OMIT_WAKEUP = 1 << 6,     /* the wakeup decision (never wake) */
};

/* Lifecycle kinds of CP_EV_PROC. */
enum cp_proc_kind {
	CP_PROC_CUDA_INIT = 1, /* cuInit was called */
	CP_PROC_FORK = 2,      /* a traced process forked a traced child */
	CP_PROC_EXIT = 3,      /* the whole process (thread group) exited */
	CP_PROC_HELD_FOR_STACKS = 4, /* stopped until its memory map is read (hold_for_stacks) */
};

/*
 * NCCL calls (the nccl family's kind, CP_EV_NCCL's op). Counts as the API
 * takes them: AllGather's is what each rank sends (the output holds nranks
 * times it), ReduceScatter's what each rank receives (the input holds nranks
 * times it), AlltoAll's, Gather's and Scatter's what goes to or comes from
 * each peer.
 */
#define CP_NCCL_OPS(O) \
	O(ALL_REDUCE, 1, "all_reduce") O(BROADCAST, 2, "broadcast") O(REDUCE, 3, "reduce") \
	O(ALL_GATHER, 4, "all_gather") O(REDUCE_SCATTER, 5, "reduce_scatter") \
	O(ALL_TO_ALL, 6, "all_to_all") O(GATHER, 7, "gather") O(SCATTER, 8, "scatter") \
	O(SEND, 9, "send") O(RECV, 10, "recv") \
	O(GROUP_START, 11, "group_start") O(GROUP_END, 12, "group_end") \
	O(COMM_INIT, 13, "comm_init") O(COMM_INIT_ALL, 14, "comm_init_all") \
	O(COMM_SPLIT, 15, "comm_split") O(COMM_SHRINK, 16, "comm_shrink") \
	O(COMM_FINALIZE, 17, "comm_finalize") O(COMM_DESTROY, 18, "comm_destroy") \
	O(COMM_ABORT, 19, "comm_abort") O(COMM_REVOKE, 20, "comm_revoke") \
	O(COMM_COUNT, 21, "comm_count") O(COMM_USER_RANK, 22, "comm_user_rank") \
	O(COMM_CU_DEVICE, 23, "comm_cu_device")

#define CP_NCCL_OP_ENUM(NAME, value, name) CP_NCCL_##NAME = value,
enum cp_nccl_op {
	CP_NCCL_OPS(CP_NCCL_OP_ENUM)
	CP_NCCL_OP_MAX,
};
#undef CP_NCCL_OP_ENUM

/* Data movement: collectives and send/recv (they have a count, a datatype and a stream). */
#define CP_NCCL_MOVES_DATA(op) ((op) >= CP_NCCL_ALL_REDUCE && (op) <= CP_NCCL_RECV)
/* Calls that make a communicator (read through their out pointer on return). */
#define CP_NCCL_MAKES_COMM(op) ((op) >= CP_NCCL_COMM_INIT && (op) <= CP_NCCL_COMM_SHRINK)

/* Decoding variants of the nccl family: how init takes its ncclUniqueId. */
#define CP_NCCL_ID_BY_VALUE 1   /* 128 bytes on the stack, at argument C's slot */
#define CP_NCCL_ID_BY_POINTER 2 /* argument C points at it (the first of an array) */
#define CP_NCCL_UNIQUE_ID_BYTES 128
/* ncclDataType_t values NCCL defines: 0 int8 ... 11 float8e5m2. */
#define CP_NCCL_DATATYPES 12
#define CP_NCCL_INIT_ALL_MAX 16 /* communicators of one ncclCommInitAll kept */
#define CP_NCCL_IN_PROGRESS 7   /* ncclInProgress: a non-blocking communicator's call goes on */

/* Flags of CP_EV_NCCL. */
#define CP_NCCL_BAD_DATATYPE (1u << 0) /* a datatype NCCL does not define: bytes 0 */
#define CP_NCCL_COMM_UNKNOWN (1u << 1) /* the communicator was made before tracing began */
#define CP_NCCL_ID_UNREADABLE (1u << 2) /* init: the unique id could not be read */
#define CP_NCCL_GROUP_OUTERMOST (1u << 3) /* ncclGroupEnd that ended the outermost group: it launched the group's work */

/* Launch kinds (the launch family's kind). */
enum cp_launch_kind {
	CP_LAUNCH_KIND_KERNEL = 0,
	CP_LAUNCH_KIND_COOPERATIVE = 1,
	CP_LAUNCH_KIND_EX = 2,
	CP_LAUNCH_KIND_HOST_FUNC = 3, /* function is the host function */
	CP_LAUNCH_KIND_GRAPH = 4,     /* function is the CUgraphExec */
	CP_LAUNCH_KIND_LEGACY = 5,    /* cuLaunch/cuLaunchGrid: block shape set elsewhere */
};

/* Launch flags of CP_EV_LAUNCH. */
#define CP_LAUNCH_GRAPH        (1u << 0) /* cuGraphLaunch: function is the CUgraphExec */
#define CP_LAUNCH_COOPERATIVE  (1u << 1)
#define CP_LAUNCH_EX           (1u << 2) /* config read from CUlaunchConfig */
#define CP_LAUNCH_CONFIG_FAULT (1u << 3) /* a stack argument or the config could not be read */
#define CP_LAUNCH_HOST_FUNC    (1u << 4) /* cuLaunchHostFunc: function is the host function */
#define CP_LAUNCH_LEGACY       (1u << 5) /* cuLaunch/cuLaunchGrid: block unknown (0) */

#define CP_COMM_MAX 16 /* a process name, NUL included (the kernel's TASK_COMM_LEN) */
#define CP_NAME_MAX 456 /* bytes of kernel name carried, NUL included */
#define CP_PATH_MAX 256 /* bytes of a module file path carried, NUL included */
#define CP_FILE_NAME_MAX 64 /* bytes of a mapped file's name carried, NUL included */

/* Common part of every record. */
struct cp_event_header {
	__u32 type;    /* enum cp_event_type */
	__u32 api;     /* enum cp_api */
	__u32 pid;     /* thread group id */
	__u32 tid;     /* thread id */
	__u64 time_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
};

struct cp_launch_event {
	struct cp_event_header hdr;
	__u64 function; /* CUfunction / CUkernel / CUgraphExec / host function */
	__u64 stream;
	__u32 grid[3];
	__u32 block[3];
	__u32 shared_mem_bytes;
	__u32 flags;    /* CP_LAUNCH_* */
	__s32 device;   /* of the calling thread's current context; -1 when not known */
	/*
	 * The NCCL call in flight on the launching thread (its seq, CP_EV_NCCL):
	 * a collective or send/recv, or for a launch inside ncclGroupEnd, the
	 * group's seq; 0 when none.
	 */
	__u32 nccl_call;
	__u64 py_stack; /* the calling Python stack (CP_EV_PY_STACK); 0: none */
};

struct cp_alloc_event {
	struct cp_event_header hdr;
	__u64 ptr;     /* 0 when the call failed */
	__u64 bytes;
	__u64 stream;  /* async allocations */
	__u32 kind;    /* enum cp_mem_kind */
	__s32 result;  /* CUresult the call returned */
	__u64 py_stack; /* the calling Python stack (CP_EV_PY_STACK); 0: none */
};

struct cp_free_event {
	struct cp_event_header hdr;
	__u64 ptr;
	__u64 stream;
	__u32 kind;    /* enum cp_mem_kind */
	__u32 pad;
};

struct cp_copy_event {
	struct cp_event_header hdr;
	__u64 dst;       /* pointer or CUarray; the first destination of a batch */
	__u64 src;
	__u64 bytes;     /* a batch: the sum of its sizes */
	__u64 stream;
	__u32 direction; /* enum cp_copy_dir */
	__u32 async;     /* 1 for the forms that take a stream */
	__u32 count;     /* copies described: 1, or a batch's length */
	__u32 flags;     /* CP_COPY_* flags */
	__u64 py_stack;  /* the calling Python stack (CP_EV_PY_STACK); 0: none */
	/* The NCCL call in flight on the copying thread (as cp_launch_event's); 0 when none. */
	__u32 nccl_call;
	__u32 pad;
};

struct cp_memset_event {
	struct cp_event_header hdr;
	__u64 dst;
	__u64 bytes;         /* elements x element size (x height for 2D) */
	__u64 stream;
	__u64 pitch;         /* 2D: bytes between rows; 0 for 1D */
	__u32 value;
	__u32 element_size;  /* 1, 2 or 4 */
	__u32 async;
	__u32 pad;
};

/* An API call returned: hdr.time_ns is the return; the entry record, if any, has entry_ns. */
struct cp_return_event {
	struct cp_event_header hdr;
	__u64 entry_ns;
	__s32 result;   /* CUresult */
	__u32 pad;
};

#define CP_XID_DEV_MAX 32
#define CP_XID_MSG_MAX 256

/*
 * The driver's tracepoint nvidia:nvidia_dev_xid: hdr.pid/tid are the task
 * current when it fired (the faulting process, or a driver thread); the
 * message often names the process ("pid=..., name=...").
 */
struct cp_xid_event {
	struct cp_event_header hdr;
	__u32 error_code;            /* the Xid */
	__u32 process;               /* 0 from the kernel; the agent fills in the process the
				      * driver's log names (cp_tracer__handle_xid) */
	char dev[CP_XID_DEV_MAX];    /* the PCI address */
	char msg[CP_XID_MSG_MAX];
};

/* Written when the call returns: hdr.time_ns is the return, entry_ns the call. */
struct cp_sync_event {
	struct cp_event_header hdr;
	__u64 handle;   /* stream, event or context; 0 for the current context */
	__u64 entry_ns; /* when the call was made (CLOCK_MONOTONIC) */
	__u32 kind;     /* enum cp_sync_kind */
	__s32 result;   /* CUresult (queries: 0 idle/complete, 600 not ready) */
	__s32 device;   /* of the context synchronized or current; -1 when not known */
	__u32 pad;
	__u64 py_stack; /* the calling Python stack (CP_EV_PY_STACK); 0: none */
};

struct cp_event_event {
	struct cp_event_header hdr;
	__u64 event;    /* CUevent */
	__u64 stream;
	__u32 op;       /* enum cp_event_op */
	__u32 flags;    /* the call's flags argument */
	__s32 device;   /* of the calling thread's current context; -1 when not known */
	__u32 pad;
};

struct cp_module_event {
	struct cp_event_header hdr;
	__u64 handle;   /* CUmodule / CUlibrary (loaded, or being unloaded) */
	__u32 op;       /* enum cp_module_op */
	__s32 result;
	__u32 path_len; /* bytes in path, NUL excluded; 0 when loaded from memory */
	__u32 pad;
	char path[CP_PATH_MAX];
};

struct cp_vmm_event {
	struct cp_event_header hdr;
	__u64 handle;   /* CUmemGenericAllocationHandle (create, release, retain, map) */
	__u64 ptr;      /* virtual address (map, unmap, reserve, address free, retain) */
	__u64 bytes;    /* size of the handle or the range */
	__u64 physical_bytes; /* create/release/unmap: physical bytes this call made live (+) or freed */
	__u32 op;       /* enum cp_vmm_op */
	__s32 result;
	__s32 device;   /* create: the location id of its properties; -1 unknown */
	__u32 pad;
};

/* Flags of CP_EV_ATTACH. */
#define CP_ATTACH_HELD    (1u << 0) /* the process is stopped until the probes are live */
#define CP_ATTACH_RUNTIME (1u << 1) /* a CUDA runtime (libcudart, or an executable at exec) */
#define CP_ATTACH_EXEC    (1u << 2) /* the file is the executable, seen at exec */
#define CP_ATTACH_NCCL    (1u << 3) /* NCCL (libnccl) */

/* Outcome of an attach event, filled in by the agent (0 from the kernel). */
enum cp_attach_status {
	CP_ATTACH_PENDING = 0,
	CP_ATTACH_ATTACHED = 1,    /* probes attached to the file by this event */
	CP_ATTACH_COVERED = 2,     /* the file was already probed */
	CP_ATTACH_NOTHING = 3,     /* the file has none of the probed symbols */
	CP_ATTACH_FAILED = 4,      /* the file could not be reached or probed */
};

struct cp_attach_event {
	struct cp_event_header hdr;
	__u64 inode;
	__u32 dev;      /* the kernel's dev_t: major << 20 | minor */
	__s32 fd;       /* the mapping fd (-1 at exec) */
	__u32 flags;    /* CP_ATTACH_* */
	__u32 pad;
	char name[CP_FILE_NAME_MAX]; /* the file's name (last path component) */
	/* Filled in by the agent once it has handled the event. */
	__u64 probes_live_ns; /* when the probes were live (CLOCK_MONOTONIC); 0 if never */
	__u32 status;   /* enum cp_attach_status */
	__u32 probes;   /* probes attached by this event */
	__s32 error;    /* negative errno when status is FAILED */
	__u32 pad2;
	char path[CP_PATH_MAX]; /* how the agent reached the file */
};

/*
 * An NCCL call, written when it returns: hdr.time_ns is the return,
 * entry_ns the call (their difference the enqueue time of a collective).
 */
struct cp_nccl_event {
	struct cp_event_header hdr;
	__u64 entry_ns;
	__u64 comm;       /* ncclComm_t; calls that make one: the one made (0 when it failed) */
	/*
	 * NCCL's hash of the communicator's ncclUniqueId: what NCCL_DEBUG=INFO
	 * prints as "commId 0x..." at init, the same in every rank; 0 when NCCL
	 * made the id itself (ncclCommInitAll, split, shrink) or it is not known.
	 */
	__u64 comm_id;
	__u64 count;      /* elements, as the call takes them (enum cp_nccl_op says per what) */
	__u64 bytes;      /* count x the datatype's size */
	__u64 stream;
	__u64 parent;     /* split, shrink: the communicator split */
	__u32 op;         /* enum cp_nccl_op */
	__u32 seq;        /* this call's number (from 1): launches inside it carry it */
	__u32 group;      /* the seq of the group it was made in (its outermost ncclGroupStart); 0 none */
	__u32 datatype;   /* ncclDataType_t */
	__u32 redop;      /* ncclRedOp_t (>= 5: made by ncclRedOpCreatePreMulSum) */
	__s32 root;       /* root (broadcast, reduce, gather, scatter), peer (send, recv); else -1 */
	__s32 rank;       /* the communicator's rank; -1 when not known */
	__s32 nranks;     /* its size; -1 when not known */
	__s32 device;     /* its CUDA device (else the thread's current one); -1 when not known */
	__s32 result;     /* ncclResult_t */
	__u32 launches;   /* launches made inside the call (they carry its seq) */
	__u32 flags;      /* CP_NCCL_* */
	__u64 py_stack;   /* the calling Python stack (CP_EV_PY_STACK); 0: none */
	__u32 copies;     /* copies made inside the call (they carry its seq): one-rank NCCL's */
	__u32 pad;
};

struct cp_context_event {
	struct cp_event_header hdr;
	__u64 context;  /* the context (retain/create/pop: returned) */
	__s32 device;   /* retain/create: the device; else the context's, or -1 unknown */
	__s32 result;
	__u32 op;       /* enum cp_context_op */
	__u32 pad;
};

struct cp_name_event {
	struct cp_event_header hdr;
	__u64 handle;   /* the CUfunction / CUkernel that was returned */
	__u64 alias_of; /* cuKernelGetFunction: the CUkernel whose name applies */
	__s32 result;   /* CUresult; no name when non-zero */
	__u32 name_len; /* bytes in name, NUL excluded; 0 for an alias */
	char name[CP_NAME_MAX];
};

struct cp_proc_event {
	struct cp_event_header hdr;
	__u32 kind;       /* enum cp_proc_kind */
	__u32 child_pid;  /* CP_PROC_FORK */
	__s32 exit_code;  /* CP_PROC_EXIT: wait status as the kernel keeps it */
	__u32 pad;
	/* The process's name (its main thread's): read when the record is made, it may be gone since. */
	char comm[CP_COMM_MAX];
};

struct cp_rt_launch_event {
	struct cp_event_header hdr;
	__u64 stub;        /* host stub address passed to cudaLaunchKernel */
	__u64 stream;
	/*
	 * Where the stub lives, read from its VMA inside the probe, so the name
	 * can be found after the process is gone: file offset, inode and the
	 * kernel's dev_t (major << 20 | minor); inode 0 when not file-backed.
	 */
	__u64 file_offset;
	__u64 inode;
	__u32 dev;
	__u32 flags;       /* CP_RT_* */
	/*
	 * Since CUDA 12.x/13, nvcc's stubs pass cudaLaunchKernel a cudaKernel_t
	 * handle (from __cudaGetKernel) rather than the stub's address once a
	 * driver is present, so the return address is located too: it lies in
	 * the __device_stub_ function, whose symbol embeds the kernel's name.
	 */
	__u64 caller;
	__u64 caller_file_offset;
	__u64 caller_inode;
	__u32 caller_dev;
	__u32 pad2;
	__u32 grid[3];
	__u32 block[3];
	__u32 shared_mem_bytes;
	__u32 pad;
};

/*
 * Python stacks (--python). The walker (bpf/cuprobe_python.bpf.h) reads
 * the calling thread's CPython frames at launches, syncs, copies and
 * allocations, and names the stack by an id: a hash of its frames, salted
 * per process. The first time an id is seen, a CP_EV_PY_STACK record
 * carries the frames (code object and instruction of each), which the
 * agent resolves to file, line and function (userspace/python.c) while the
 * process lives; later records carry the id only.
 */
#define CP_PY_STACK_MAX 64          /* frames kept, innermost first */
#define CP_PY_VERSION(major, minor) ((major) << 8 | (minor))
#define CP_PY_NO_OFFSET 0xffffffffu /* a field this version does not have */
#define CP_PY_INSTR_UNKNOWN 0xffffffffu
#define CP_PY_FRAME_READ_MAX 128    /* a frame's fields are read at once: this many bytes at most */

/* Flags of CP_EV_PY_STACK. */
#define CP_PY_STACK_TRUNCATED  (1u << 0) /* deeper than CP_PY_STACK_MAX: the outermost frames cut */
#define CP_PY_STACK_UNREADABLE (1u << 1) /* the walk stopped at a frame it could not read */

struct cp_py_stack_event {
	struct cp_event_header hdr;  /* the thread whose call first had this stack */
	__u64 stack_id;
	__u32 depth;                 /* frames in code[] and instr[] */
	__u32 flags;                 /* CP_PY_STACK_* */
	__u64 code[CP_PY_STACK_MAX]; /* each frame's code object, innermost first */
	/*
	 * Where each frame was: the bytes from its code object to the
	 * instruction (3.11+), or f_lasti (3.10); CP_PY_INSTR_UNKNOWN.
	 */
	__u32 instr[CP_PY_STACK_MAX];
};

/* Layout flags of struct cp_py_proc. */
#define CP_PY_FRAME_OBJECTS (1u << 0) /* 3.10: a chain of PyFrameObject, f_lasti an index */
#define CP_PY_CFRAME        (1u << 1) /* 3.11, 3.12: the frame through tstate->cframe */
#define CP_PY_TAGGED_CODE   (1u << 2) /* 3.14: f_executable is a tagged stack reference */

/*
 * One process's CPython, as the agent found it (userspace/python.c): where
 * _PyRuntime is and where the walker's fields lie, from the interpreter's
 * _Py_DebugOffsets (3.13+) or cuprobe's per-version tables (3.10-3.12).
 * version 0 marks a process checked and found not to be Python.
 */
struct cp_py_proc {
	__u64 runtime;              /* address of _PyRuntime */
	__u64 seed;                 /* new at each detection: salts the stack ids */
	__u32 version;              /* CP_PY_VERSION; 0: not Python */
	__u32 flags;                /* CP_PY_* */
	__u32 runtime_interpreters_head; /* _PyRuntimeState */
	__u32 interp_next;          /* PyInterpreterState */
	__u32 interp_threads_head;
	__u32 tstate_next;          /* PyThreadState */
	__u32 tstate_interp;
	__u32 tstate_thread_id;     /* pthread_self() of its thread: the thread's fs base */
	__u32 tstate_frame;         /* frame (3.10), cframe (3.11, 3.12), current_frame (3.13+) */
	__u32 cframe_current_frame; /* with CP_PY_CFRAME, in the _PyCFrame */
	__u32 frame_code;           /* _PyInterpreterFrame (3.11+), PyFrameObject (3.10) */
	__u32 frame_previous;
	__u32 frame_instr;          /* prev_instr (3.11, 3.12), instr_ptr (3.13+), f_lasti (3.10) */
	__u32 frame_owner;          /* 3.11+; CP_PY_NO_OFFSET before */
	__u32 frame_read_start;     /* the frame fields lie in [start, start + size): one read */
	__u32 frame_read_size;
	__u32 tstate_datastack;     /* 3.11+: datastack_chunk, where frames lie one after another */
	__u32 pad;
	/* The rest is read by userspace only, to resolve frames. */
	__u32 code_filename;        /* PyCodeObject */
	__u32 code_name;
	__u32 code_qualname;        /* 3.11+; CP_PY_NO_OFFSET before */
	__u32 code_linetable;
	__u32 code_firstlineno;
	__u32 code_adaptive;        /* co_code_adaptive (3.11+): the first instruction */
	__u32 unicode_length;       /* PyASCIIObject */
	__u32 unicode_state;
	__u32 unicode_ascii_data;   /* sizeof(PyASCIIObject) */
	__u32 unicode_compact_data; /* sizeof(PyCompactUnicodeObject) */
	__u32 bytes_size;           /* PyBytesObject */
	__u32 bytes_data;
	__u64 code_type;            /* &PyCode_Type, every code object's ob_type */
};

/* A held_pids value with this inode: held by the Python walker (cuInit, a new stack). */
#define CP_PY_HOLD_INODE (~0ull)

#define CP_RT_STACK_FAULT (1u << 0) /* sharedMem/stream could not be read */
#define CP_RT_NO_VMA      (1u << 1) /* the stub address is in no file mapping */
#define CP_RT_CALLER_NO_VMA (1u << 2) /* the return address is in no file mapping */

/*
 * The log2 histogram buckets of latencies, shared by the BPF side and
 * userspace: bucket 0 holds [0, 1] ns and bucket b > 0 holds (2^(b-1), 2^b]
 * ns (Prometheus "le" buckets); the last bucket also takes everything above.
 */
#define CP_HIST_BUCKETS 32 /* log2 of nanoseconds */

/* The smallest b with value <= 2^b (0 for 0 and 1): 0 to 64. */
static inline __u32 cp_log2_ceil(__u64 value)
{
	__u32 bucket = 0;
	__u64 v;

	if (value <= 1)
		return 0;
	v = value - 1; /* the bit length of value - 1 is the smallest b with value <= 2^b */
	if (v >> 32) { v >>= 32; bucket += 32; }
	if (v >> 16) { v >>= 16; bucket += 16; }
	if (v >> 8) { v >>= 8; bucket += 8; }
	if (v >> 4) { v >>= 4; bucket += 4; }
	if (v >> 2) { v >>= 2; bucket += 2; }
	if (v >> 1) { v >>= 1; bucket += 1; }
	return bucket + (__u32)v;
}

static inline __u32 cp_log2_bucket(__u64 ns)
{
	__u32 bucket = cp_log2_ceil(ns);

	return bucket < CP_HIST_BUCKETS ? bucket : CP_HIST_BUCKETS - 1;
}

/* ---- aggregation maps (cuprobe stats / top): keys and values -------------- */

#define CP_STACK_DEPTH 32

struct cp_kernel_key {
	__u32 pid;
	__s32 device;     /* of the launching thread's current context; -1 when not known */
	__u64 handle;     /* CUfunction / CUkernel, or CUgraphExec for graph launches */
};

struct cp_kernel_stat {
	__u64 launches;
	__u64 threads;    /* sum of grid x block over the launches */
	__u64 graph;      /* 1 when the handle is a CUgraphExec */
};

struct cp_api_key {
	__u32 pid;
	__u32 api;        /* enum cp_api */
};

struct cp_api_stat {
	__u64 calls;
	__u64 timed;      /* calls whose return was seen (with --latency) */
	__u64 errors;     /* of those, returned a CUresult other than 0 */
	__u64 total_ns;
	__u64 histogram[CP_HIST_BUCKETS];
};

/*
 * Live device memory: cuMemAlloc*, managed and stream-ordered allocations,
 * plus the physical memory of VMM handles: cuMemCreate makes it live, and it
 * stays live until its handle is released (every reference: create and each
 * cuMemRetainAllocationHandle) and every mapping of it unmapped, which is
 * when the driver frees it. Reserved address ranges are not memory and are
 * counted apart; so is page-locked host memory.
 */
struct cp_mem_stat {
	__u64 live_bytes;       /* device memory, VMM physical memory included */
	__u64 peak_bytes;
	__u64 live_allocations; /* device allocations live (a VMM handle counts as one) */
	__u64 host_live_bytes;  /* page-locked host memory */
	__u64 allocations;      /* successful device allocation calls (cuMemCreate included) */
	__u64 frees;            /* device frees, and VMM handles freed */
	__u64 unknown_frees;    /* device frees of pointers allocated before tracing began */
	__u64 vmm_live_bytes;   /* of live_bytes, physical memory of VMM handles */
	__u64 reserved_bytes;   /* virtual address ranges reserved (cuMemAddressReserve) */
	__u64 host_live_allocations; /* page-locked host allocations live */
	__u64 vmm_peak_bytes;   /* the most VMM physical memory live at once */
};

/* VMM bookkeeping (BPF side only): physical handles, their mappings, reserved ranges. */
struct cp_vmm_key {
	__u32 pid;
	__u32 pad;
	__u64 id;         /* a handle, or a virtual address */
};

struct cp_vmm_handle {
	__u64 bytes;
	__s64 refs;       /* create + retains - releases */
	__s64 maps;       /* mappings not yet unmapped */
	__u64 freed;      /* set once, by whichever of release/unmap frees it */
};

struct cp_vmm_mapping {
	__u64 handle;
	__u64 bytes;
};

/* A CUDA library file: the key of the attach bookkeeping. */
struct cp_file_key {
	__u32 dev;        /* the kernel's dev_t: major << 20 | minor */
	__u32 pad;
	__u64 inode;
};

struct cp_alloc_key {
	__u32 pid;
	__u32 pad;
	__u64 ptr;
};

struct cp_alloc_info {
	__u64 bytes;
	__s64 stack_id;   /* in the stacks map; < 0 when not captured */
	/*
	 * The return address of the allocation call. At a function's first
	 * instruction the frame-pointer walk starts from the caller's frame
	 * and so skips the caller itself: this is that missing frame.
	 */
	__u64 caller;
	__u64 time_ns;
	__u32 kind;       /* enum cp_mem_kind */
	__u32 api;
	__s32 device;     /* of the allocating thread's current context; -1 when not known */
	__u32 pad;
};

/* Per process and device (exporter): device allocations, and copies by direction. */
struct cp_device_key {
	__u32 pid;
	__s32 device;
};

struct cp_device_mem_stat {
	__u64 live_bytes;       /* cuMemAlloc* family (VMM is per process only) */
	__u64 peak_bytes;
	__u64 allocations;
	__u64 frees;
};

struct cp_copy_key {
	__u32 pid;
	__s32 device;
	__u32 direction;        /* enum cp_copy_dir */
	__u32 pad;
};

struct cp_copy_stat {
	__u64 copies;           /* a batch counts its copies */
	__u64 bytes;
};

/* Per (process, communicator, NCCL op): calls, bytes and enqueue time (stats, exporter). */
struct cp_nccl_key {
	__u32 pid;
	__u32 op;         /* enum cp_nccl_op */
	__u64 comm;
};

struct cp_nccl_stat {
	__u64 calls;
	__u64 errors;     /* returned other than ncclSuccess */
	__u64 bytes;
	__u64 enqueue_ns; /* entry to return, summed */
	__u64 launches;   /* launches made inside the calls */
	__u64 copies;     /* copies made inside the calls */
	__u64 no_gpu_work; /* ungrouped collectives that launched and copied nothing */
	__u64 comm_id;    /* the communicator, as its last call knew it */
	__s32 rank, nranks, device;
	__u32 pad;
};

/* ---- maps shared with users' programs (cuprobe.bpf.h declares them) ---------- */

/* The processes being traced (cuprobe's -p targets, COMMAND's tree); system-wide: all. */
struct cuprobe_config {
	__u32 filter_by_pid;
	__u32 pad;
};

/* Kernel names by (pid, CUfunction/CUkernel), kept filled by the runtime. */
#define CUPROBE_KERNEL_NAME_MAX 256

struct cuprobe_name_key {
	__u32 pid;
	__u32 pad;
	__u64 handle;
};

struct cuprobe_kernel_name {
	char name[CUPROBE_KERNEL_NAME_MAX]; /* mangled, as the driver saw it; may be cut */
};

/*
 * Entry state of calls whose return is probed, keyed by thread and stack
 * pointer: at the return probe the stack pointer is the entry's plus the
 * popped return address, so a probed call made inside another keeps its
 * own state. LRU: state whose return never comes (longjmp) ages out.
 */
struct cuprobe_call_key {
	__u64 pid_tgid;
	__u64 sp;
};

struct cuprobe_call {
	__u64 cookie;
	__u64 a, b, c, bytes, stream; /* the arguments the cookie points at */
	__u64 start_ns;
	__s64 stack_id;  /* allocating user stack, when cuprobe records stacks */
	__u64 caller;    /* the call's return address, with the stack */
};

/* CUDA contexts: their device, and each thread's current one (a small push/pop stack). */
struct cuprobe_context_key {
	__u32 pid;
	__u32 pad;
	__u64 context;
};

#define CUPROBE_CONTEXT_DEPTH 4

/* run --python: the thread's Python stack (0: none) at the entry whose stack pointer is sp. */
struct cuprobe_python_stack {
	__u64 id;
	__u64 sp;
};

/* A thread's context stack, each with its device (kept so a launch reads it in one look-up). */
struct cuprobe_thread_context {
	__u64 stack[CUPROBE_CONTEXT_DEPTH];
	__s32 device[CUPROBE_CONTEXT_DEPTH];
	__u32 depth;
	__u32 pad;
};

/* NCCL communicators: learned when made (or queried), forgotten when destroyed. */
struct cuprobe_nccl_comm_key {
	__u32 pid;
	__u32 pad;
	__u64 comm;       /* ncclComm_t */
};

struct cuprobe_nccl_comm {
	__u64 id;         /* NCCL's hash of its ncclUniqueId; 0 when not known */
	__u64 parent;     /* split, shrink: the communicator it came from */
	__s32 rank;       /* -1 when not known */
	__s32 nranks;     /* -1 when not known */
	__s32 device;     /* -1 when not known */
	__u32 pad;
};

/* The context a process made or retained last, and its device. */
struct cuprobe_process_context {
	__u64 context;
	__s32 device;
	__u32 pad;
};

/*
 * What a device program (SEC("gpu/GLOB"), bpf/cuprobe.bpf.h) sees of the GPU
 * thread it runs in: one line per field of struct cuprobe_gpu_ctx, in
 * order, each a __u64, with where the translator to PTX reads it (a special
 * register of that many bits, zero-extended) or, for launch_seq, the slot
 * of the launch that cuprobe fills (0 when it has none), for launch_slot
 * that slot's address (no read: what device rings record, the seq being
 * read on the host when the records are moved). The kernel
 * verifies device programs as kprobe programs, so the struct stays within
 * sizeof(struct pt_regs) (168 bytes on x86-64).
 */
#define CUPROBE_GPU_CTX_FIELDS(X)						\
	X(thread_x, "%tid.x", 32)		/* the thread in its block */		\
	X(thread_y, "%tid.y", 32)						\
	X(thread_z, "%tid.z", 32)						\
	X(block_x, "%ctaid.x", 32)		/* the block in the grid */		\
	X(block_y, "%ctaid.y", 32)						\
	X(block_z, "%ctaid.z", 32)						\
	X(block_dim_x, "%ntid.x", 32)		/* threads per block */			\
	X(block_dim_y, "%ntid.y", 32)						\
	X(block_dim_z, "%ntid.z", 32)						\
	X(grid_dim_x, "%nctaid.x", 32)		/* blocks per grid */			\
	X(grid_dim_y, "%nctaid.y", 32)						\
	X(grid_dim_z, "%nctaid.z", 32)						\
	X(sm_id, "%smid", 32)			/* the SM running the thread */		\
	X(warp_id, "%warpid", 32)		/* its warp slot on the SM */		\
	X(lane_id, "%laneid", 32)		/* its lane in the warp, 0-31 */		\
	X(globaltimer_ns, "%globaltimer", 64)	/* the GPU's clock, ns, at the read */	\
	X(launch_seq, 0, 64)			/* the launch's sequence number */	\
	X(launch_slot, 0, 0)			/* where it is (0: no slot), not read */

#define CUPROBE_GPU_CTX_FIELD(name, source, bits) __u64 name;
struct cuprobe_gpu_ctx {
	CUPROBE_GPU_CTX_FIELDS(CUPROBE_GPU_CTX_FIELD)
};
#undef CUPROBE_GPU_CTX_FIELD

/*
 * A device ring (CUPROBE_GPU_RING in cuprobe.bpf.h): records from GPU threads
 * to cuprobe, in two mmapable arrays, the slots and this control block
 * (NAME__control). The GPU never writes them: its records go to segments of
 * the same layout in device memory, which the injection moves into these
 * maps at the calls that prove kernels done (below). Who writes what here:
 *  - cuprobe, before COMMAND starts: magic to record_bytes, which say what
 *    the ring is (the injection and the simulated driver find rings by them);
 *  - the injection (CPU atomics, any of COMMAND's processes): reserved
 *    (tickets), head (positions), lost and lost_by_launch. A producer reads
 *    released and lost, then takes a ticket; ticket - lost - released is at
 *    least the slots in use, so it takes a position only when one is free:
 *    positions are dense, a slot is never overwritten before cuprobe has
 *    read it, and the record that finds the ring full is counted in lost,
 *    never written;
 *  - the producer writes the record, then commit = position + 1 (release):
 *    cuprobe never sees the commit first;
 *  - cuprobe reads committed slots in order when a call proves kernels done
 *    and at process exits, and then raises released.
 * produced = delivered + lost. Per launch: delivered from each slot's
 * launch_seq, lost from lost_by_launch[seq % CUPROBE_GPU_RING_LAUNCH_BUCKETS]
 * (the bucket names the last launch that lost records in it).
 *
 * On the GPU (in each instrumented module, docs/device-programs.md): the
 * ring's records are split into CUPROBE_GPU_RING_SEGMENTS(records) segments
 * of CUPROBE_GPU_RING_SEGMENT_SLOTS(records) slots, each with a control
 * block of its own; a block writes segment (linear block index %
 * segments) by a protocol of one atomic: read released, take a position
 * (head), and when position - released < slots write the record and
 * commit = position + 1 with plain stores; else the record is lost, counted
 * in the segment's lost and buckets (reserved is not used there). Nothing
 * orders a record before its commit on the GPU: the injection reads a
 * segment only once no kernel that writes it can be running (a proof that
 * left none unproved), delivers the committed positions from released up
 * to head, takes the others for the counted losses, and sets released to
 * head. The losses are added here when the segment is drained. On the GPU a slot's and a
 * bucket's launch_seq hold the launch's slot address (ctx->launch_slot, no
 * read over PCIe for each record); the injection reads the seq there when it
 * moves them, and buckets are chosen by the address (address / 8 % 64).
 */
#define CUPROBE_GPU_RING_MAGIC 0x676e69725f757067ull /* "gpu_ring" */
#define CUPROBE_GPU_RING_LAUNCH_BUCKETS 64

struct cuprobe_gpu_ring_launch_lost {
	__u64 launch_seq;
	__u64 lost;
};

struct cuprobe_gpu_ring_control {
	__u64 magic;		/* CUPROBE_GPU_RING_MAGIC, from cuprobe */
	__u32 slots_map;	/* the slots' map: index i of __cuprobe_map_<i> */
	__u32 capacity;		/* slots */
	__u32 slot_bytes;	/* from one slot to the next */
	__u32 record_bytes;	/* the record, after its struct cuprobe_gpu_ring_slot */
	__u64 reserved;		/* GPU: tickets taken */
	__u64 head;		/* GPU: positions handed out */
	__u64 lost;		/* GPU: records that found the ring full */
	__u64 released;		/* cuprobe: positions read and given back */
	struct cuprobe_gpu_ring_launch_lost lost_by_launch[CUPROBE_GPU_RING_LAUNCH_BUCKETS];
};

/*
 * The GPU's segments, from the ring's records (a power of two): about 64
 * slots a segment at least, at most 128 segments (blocks share a segment
 * when there are more; a segment's control words take its blocks' atomics).
 */
#define CUPROBE_GPU_RING_MAX_SEGMENTS 128
#define CUPROBE_GPU_RING_SEGMENTS(records)                                            \
	((records) >= 64u * CUPROBE_GPU_RING_MAX_SEGMENTS ? CUPROBE_GPU_RING_MAX_SEGMENTS : \
	 (records) >= 128u ? (records) / 64u : 1u)
#define CUPROBE_GPU_RING_SEGMENT_SLOTS(records) ((records) / CUPROBE_GPU_RING_SEGMENTS(records))

struct cuprobe_gpu_ring_slot {
	__u64 commit;		/* position + 1 once the record is written */
	__u64 launch_seq;	/* the launch's sequence number (0: unknown) */
	/* the record follows */
};

/* Read-only configuration, set before load. */
#define CP_DEFAULT_WAKEUP_BYTES  (256u * 1024u)
#define CP_DEFAULT_WAKEUP_NS     (250000ull)  /* 250 us: p99 delivery 256 us on the H200 */

#endif /* CUPROBE_EVENTS_H */
