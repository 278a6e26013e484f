// SPDX-License-Identifier: GPL-2.0
/*
 * Which synchronizations block longer than a threshold, and from where?
 * One record per cuCtxSynchronize/cuStreamSynchronize/cuEventSynchronize
 * that blocked at least min_us microseconds, with the caller's user stack
 * (the program needs frame pointers for a full stack).
 *
 *	sudo cuprobe run slow_syncs.bpf.c --set min_us=1000 -- ./my_app
 */
#include "cuprobe.bpf.h"

/* Set with --set min_us=N. */
const volatile __u64 min_us = 1000;

struct slow_sync {
	__u32 pid;
	__u32 tid;
	enum cp_api api;		/* printed as the API's enumerator */
	__s32 result;
	cuprobe_addr_t handle;		/* the stream, event or context (printed in hex) */
	__u64 blocked_us;
	cuprobe_stack_t stack;		/* printed symbolized */
};

CUPROBE_RING(slow_syncs, struct slow_sync, 256 * 1024);

SEC("cuda.return/sync")
int CUDA_RETURN_PROG(slow_sync, struct cuda_sync, sync)
{
	struct slow_sync *record;
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	/* Completion queries return at once: only the calls that wait. */
	if (sync->kind != CP_SYNC_CONTEXT && sync->kind != CP_SYNC_STREAM &&
	    sync->kind != CP_SYNC_EVENT)
		return 0;
	if (sync->duration_ns < min_us * 1000)
		return 0;
	record = cuprobe_ring_reserve(slow_syncs);
	if (!record)
		return 0;
	record->pid = pid_tgid >> 32;
	record->tid = (__u32)pid_tgid;
	record->api = sync->api;
	record->result = sync->result;
	record->handle = sync->handle;
	record->blocked_us = sync->duration_ns / 1000;
	/* At the return the caller's frames are still there, above the driver's. */
	record->stack = cuprobe_user_stack(ctx);
	cuprobe_ring_submit(record);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
