// SPDX-License-Identifier: GPL-2.0
/*
 * What does each NCCL operation move, and how long do its calls take to
 * enqueue? Per process, operation (enum cp_nccl_op: 1 all_reduce, 2
 * broadcast, ... 10 recv) and communicator size: calls that succeeded, their
 * bytes (count x datatype size, count as the call takes it) and a histogram
 * of the time from each call to its return.
 *
 *	sudo cuprobe run nccl_bytes.bpf.c -- python3 train.py
 *
 * A call NCCL makes inside another (ncclBcast calls ncclBroadcast) is seen
 * as a call of its own.
 */
#include "cuprobe.bpf.h"

struct nccl_key {
	__u32 pid;
	__u32 op;		/* enum cp_nccl_op */
	__s32 nranks;		/* -1: a communicator made before tracing began */
	__u32 pad;
};

struct nccl_bytes {
	__u64 calls;
	__u64 bytes;
	struct cuprobe_hist enqueue_ns;
};

CUPROBE_HASH(nccl_bytes, struct nccl_key, struct nccl_bytes, 4096);

SEC("cuda.return/nccl")
int CUDA_RETURN_PROG(count_bytes, struct cuda_nccl, call)
{
	struct nccl_key key = {
		.pid = bpf_get_current_pid_tgid() >> 32,
		.op = call->op,
		.nranks = call->nranks,
	};
	struct nccl_bytes *sums;

	if (!CP_NCCL_MOVES_DATA(call->op) || call->result)
		return 0;
	sums = cuprobe_lookup_or_init(nccl_bytes, &key);
	if (!sums)
		return 0;
	__sync_fetch_and_add(&sums->calls, 1);
	__sync_fetch_and_add(&sums->bytes, call->bytes);
	cuprobe_hist_add(&sums->enqueue_ns, call->duration_ns);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
