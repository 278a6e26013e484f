// SPDX-License-Identifier: GPL-2.0
/*
 * On which SMs do the blocks of the kernels named vec_add... run? Per SM,
 * the blocks it started (counted by each block's thread (0, 0, 0) at the
 * kernel's entry): over a run, they add up to the blocks launched. SMs
 * numbered MAX_SMS and above (none on GPUs of today: an H200 has 132) are
 * counted together in blocks_on_other_sms.
 *
 *	sudo cuprobe run gpu_sm_blocks.bpf.c -- ./vec_add 100 1048576
 */
#include "cuprobe.bpf.h"

#define MAX_SMS 192

CUPROBE_GPU_ARRAY(blocks_per_sm, __u64, MAX_SMS);
CUPROBE_GPU_ARRAY(blocks_on_other_sms, __u64, 1);

SEC("gpu/vec_add*")
int GPU_PROG(count_blocks)
{
	__u32 sm = ctx->sm_id, zero = 0;
	__u64 *count;

	if (!cuprobe_gpu_block_leader(ctx))
		return 0;
	count = bpf_map_lookup_elem(&blocks_per_sm, &sm);
	if (!count)
		count = bpf_map_lookup_elem(&blocks_on_other_sms, &zero);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
