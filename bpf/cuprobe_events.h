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

/* Record types: the first field of every ring-buffer record. */
enum cp_event_type {
	CP_EV_LAUNCH = 1,   /* kernel launch or graph launch (driver API) */
	CP_EV_ALLOC = 2,    /* an allocation returned */
	CP_EV_FREE = 3,     /* a free was called */
	CP_EV_COPY = 4,     /* a memcpy was called */
	CP_EV_SYNC = 5,     /* a synchronization was called */
	CP_EV_NAME = 6,     /* a function/kernel handle learned its name */
	CP_EV_PROC = 7,     /* process lifecycle: cuInit, fork, exit */
	CP_EV_RT_LAUNCH = 8,/* cudaLaunchKernel (runtime API), host stub address */
	CP_EV_TYPE_MAX,
};

/*
 * API identifiers. Each probe is attached with its API id as the BPF cookie,
 * so one program serves every symbol of the same signature.
 */
enum cp_api {
	CP_API_UNKNOWN = 0,
	CP_API_cuLaunchKernel,
	CP_API_cuLaunchKernel_ptsz,
	CP_API_cuLaunchKernelEx,
	CP_API_cuLaunchKernelEx_ptsz,
	CP_API_cuLaunchCooperativeKernel,
	CP_API_cuLaunchCooperativeKernel_ptsz,
	CP_API_cuGraphLaunch,
	CP_API_cuGraphLaunch_ptsz,
	CP_API_cuMemAlloc_v2,
	CP_API_cuMemAllocManaged,
	CP_API_cuMemAllocPitch_v2,
	CP_API_cuMemAllocAsync,
	CP_API_cuMemAllocAsync_ptsz,
	CP_API_cuMemAllocHost_v2,
	CP_API_cuMemHostAlloc,
	CP_API_cuMemFree_v2,
	CP_API_cuMemFreeAsync,
	CP_API_cuMemFreeAsync_ptsz,
	CP_API_cuMemFreeHost,
	CP_API_cuMemcpy,
	CP_API_cuMemcpy_ptds,
	CP_API_cuMemcpyAsync,
	CP_API_cuMemcpyAsync_ptsz,
	CP_API_cuMemcpyHtoD_v2,
	CP_API_cuMemcpyHtoD_v2_ptds,
	CP_API_cuMemcpyDtoH_v2,
	CP_API_cuMemcpyDtoH_v2_ptds,
	CP_API_cuMemcpyDtoD_v2,
	CP_API_cuMemcpyDtoD_v2_ptds,
	CP_API_cuMemcpyHtoDAsync_v2,
	CP_API_cuMemcpyHtoDAsync_v2_ptsz,
	CP_API_cuMemcpyDtoHAsync_v2,
	CP_API_cuMemcpyDtoHAsync_v2_ptsz,
	CP_API_cuMemcpyDtoDAsync_v2,
	CP_API_cuMemcpyDtoDAsync_v2_ptsz,
	CP_API_cuCtxSynchronize,
	CP_API_cuStreamSynchronize,
	CP_API_cuStreamSynchronize_ptsz,
	CP_API_cuEventSynchronize,
	CP_API_cuModuleGetFunction,
	CP_API_cuLibraryGetKernel,
	CP_API_cuKernelGetFunction,
	CP_API_cuInit,
	CP_API_cudaLaunchKernel,
	CP_API_sched_process_fork,
	CP_API_sched_process_exit,
	CP_API_MAX,
};

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
	CP_CNT_MAX,
};

/* Memory kinds of CP_EV_ALLOC / CP_EV_FREE. */
enum cp_mem_kind {
	CP_MEM_DEVICE = 1,
	CP_MEM_MANAGED = 2,
	CP_MEM_HOST = 3,     /* page-locked host memory */
	CP_MEM_DEVICE_ASYNC = 4,
};

/* Copy directions of CP_EV_COPY. */
enum cp_copy_dir {
	CP_COPY_DEFAULT = 0, /* cuMemcpy: direction inferred from unified addresses */
	CP_COPY_HTOD = 1,
	CP_COPY_DTOH = 2,
	CP_COPY_DTOD = 3,
};

/* Synchronization kinds of CP_EV_SYNC. */
enum cp_sync_kind {
	CP_SYNC_CONTEXT = 1,
	CP_SYNC_STREAM = 2,
	CP_SYNC_EVENT = 3,
};

/* Lifecycle kinds of CP_EV_PROC. */
enum cp_proc_kind {
	CP_PROC_CUDA_INIT = 1, /* cuInit was called */
	CP_PROC_FORK = 2,      /* a traced process forked a traced child */
	CP_PROC_EXIT = 3,      /* the whole process (thread group) exited */
};

/* Launch flags of CP_EV_LAUNCH. */
#define CP_LAUNCH_GRAPH        (1u << 0) /* cuGraphLaunch: function is the CUgraphExec */
#define CP_LAUNCH_COOPERATIVE  (1u << 1)
#define CP_LAUNCH_EX           (1u << 2) /* config read from CUlaunchConfig */
#define CP_LAUNCH_CONFIG_FAULT (1u << 3) /* a stack argument or the config could not be read */

#define CP_NAME_MAX 456 /* bytes of kernel name carried, NUL included */

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
	__u64 function; /* CUfunction / CUkernel / CUgraphExec */
	__u64 stream;
	__u32 grid[3];
	__u32 block[3];
	__u32 shared_mem_bytes;
	__u32 flags;    /* CP_LAUNCH_* */
};

struct cp_alloc_event {
	struct cp_event_header hdr;
	__u64 ptr;     /* 0 when the call failed */
	__u64 bytes;
	__u64 stream;  /* async allocations */
	__u32 kind;    /* enum cp_mem_kind */
	__s32 result;  /* CUresult the call returned */
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
	__u64 dst;
	__u64 src;
	__u64 bytes;
	__u64 stream;
	__u32 direction; /* enum cp_copy_dir */
	__u32 async;     /* 1 for the Async forms */
};

struct cp_sync_event {
	struct cp_event_header hdr;
	__u64 handle;   /* stream or event; 0 for a context */
	__u32 kind;     /* enum cp_sync_kind */
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

#define CP_RT_STACK_FAULT (1u << 0) /* sharedMem/stream could not be read */
#define CP_RT_NO_VMA      (1u << 1) /* the stub address is in no file mapping */
#define CP_RT_CALLER_NO_VMA (1u << 2) /* the return address is in no file mapping */

/* ---- aggregation maps (cuprobe stats / top): keys and values -------------- */

#define CP_HIST_BUCKETS 32 /* log2 of nanoseconds: bucket b holds [2^(b-1), 2^b) */
#define CP_STACK_DEPTH 32

struct cp_kernel_key {
	__u32 pid;
	__u32 pad;
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

struct cp_mem_stat {
	__u64 live_bytes;       /* device, managed and async device memory */
	__u64 peak_bytes;
	__u64 live_allocations;
	__u64 host_live_bytes;  /* page-locked host memory */
	__u64 allocations;      /* successful allocation calls, any kind */
	__u64 frees;
	__u64 unknown_frees;    /* frees of pointers allocated before tracing began */
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
};

/* Read-only configuration, set before load. */
#define CP_DEFAULT_WAKEUP_BYTES  (256u * 1024u)
#define CP_DEFAULT_WAKEUP_NS     (250000ull)  /* 250 us: p99 delivery 256 us on the H200 */

#endif /* CUPROBE_EVENTS_H */
