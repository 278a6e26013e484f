// SPDX-License-Identifier: GPL-2.0
/*
 * How long do the blocks of the kernels named vec_add... run? A log2
 * histogram of each block's time on the GPU, in nanoseconds of the GPU's
 * globaltimer: from the entry of its thread (0, 0, 0) to the exit of its
 * last thread (the one whose exit completes the block's count). Blocks past
 * the first MAX_BLOCKS of a grid are counted in blocks_untimed.
 *
 * Each block has a slot (a global array: working state, not printed),
 * emptied by its last thread for the next launch: launches of matching
 * kernels that run at the same time (other streams) share slots, so time
 * them one at a time.
 *
 *	sudo cuprobe run gpu_block_time.bpf.c -- ./vec_add 100 1048576
 */
#include "cuprobe.bpf.h"

#define MAX_BLOCKS 65536

struct block_slot {
	__u64 start_ns;		/* the globaltimer at thread (0, 0, 0)'s entry */
	__u64 exited;		/* threads of the block past their exit */
};

struct block_slot block_slots[MAX_BLOCKS];
CUPROBE_GPU_ARRAY(block_ns, struct cuprobe_hist, 1);
CUPROBE_GPU_ARRAY(blocks_untimed, __u64, 1);

SEC("gpu/vec_add*")
int GPU_PROG(block_entry)
{
	__u64 block = cuprobe_gpu_block_index(ctx);
	__u32 zero = 0;
	__u64 *untimed;

	if (!cuprobe_gpu_block_leader(ctx))
		return 0;
	if (block < MAX_BLOCKS) {
		block_slots[block].start_ns = ctx->globaltimer_ns;
		return 0;
	}
	untimed = bpf_map_lookup_elem(&blocks_untimed, &zero);
	if (untimed)
		__sync_fetch_and_add(untimed, 1);
	return 0;
}

SEC("gpu.exit/vec_add*")
int GPU_PROG(block_exit)
{
	__u64 block = cuprobe_gpu_block_index(ctx);
	struct cuprobe_hist *hist;
	struct block_slot *slot;
	__u32 zero = 0;

	if (block >= MAX_BLOCKS)
		return 0;
	slot = &block_slots[block];
	/* The fetch is ordered (a BPF atomic with a result is): the leader's start is seen. */
	if (__sync_fetch_and_add(&slot->exited, 1) + 1 != cuprobe_gpu_block_threads(ctx))
		return 0;
	slot->exited = 0;
	hist = bpf_map_lookup_elem(&block_ns, &zero);
	if (hist)
		cuprobe_hist_add(hist, ctx->globaltimer_ns - slot->start_ns);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
