// SPDX-License-Identifier: GPL-2.0
/*
 * Device programs for the translator's tests (root_device): what clang
 * makes of loops, division, 32-bit arithmetic (built for BPF ISA v3 too),
 * subprograms, the stack, atomics with and without results, the map
 * helpers, globals and every field of the context. A host program shares
 * a map with them, as users' objects do.
 */
#include "cuprobe.bpf.h"

#define SLOTS 16

struct stats {
	__u64 entered;
	__u64 exited;
	__u64 launches;		/* written by the host program */
	__u64 checksum;
	__u64 small[4];
	__u32 small32[4];	/* 32-bit atomics: ISA v3 */
};

CUPROBE_GPU_ARRAY(shared_stats, struct stats, 1);
CUPROBE_GPU_ARRAY(slots, __u64, SLOTS);

const volatile __u64 divisor = 7;	/* --set, read on the GPU from .rodata */
__u64 flags_seen;			/* .bss */
__u32 last_lane = 5;			/* .data */

/* Not inlined: a subprogram of its own, the context and a stack pointer passed in. */
static __noinline __u64 mix(struct cuprobe_gpu_ctx *ctx, __u64 *scratch, __u32 n)
{
	__u64 acc = 0;
	__u32 i;

	for (i = 0; i < 8 && i < n; i++) {
		scratch[i] = ctx->thread_x * i + ctx->block_dim_y;
		acc ^= scratch[i] << (i & 7);
	}
	return acc + ctx->grid_dim_z % (n | 1);
}

static __noinline int bump(__u32 key, __u64 by)
{
	__u64 *slot = bpf_map_lookup_elem(&slots, &key);

	if (!slot)
		return -1;
	__sync_fetch_and_add(slot, by);
	return 0;
}

SEC("gpu/vec_add*")
int GPU_PROG(device_entry)
{
	struct stats *stats;
	__u64 scratch[8] = {}, seq, old, value = 1;
	__u32 zero = 0, lane = ctx->lane_id, key;

	stats = bpf_map_lookup_elem(&shared_stats, &zero);
	if (!stats)
		return 0;
	__sync_fetch_and_add(&stats->entered, 1);
	seq = ctx->launch_seq;
	key = (__u32)(ctx->thread_x + ctx->thread_y + ctx->thread_z + ctx->block_x + ctx->block_y +
		      ctx->block_z + ctx->sm_id + ctx->warp_id + seq) % SLOTS;
	bump(key, mix(ctx, scratch, lane) / divisor);
	old = __sync_fetch_and_or(&flags_seen, 1ull << (lane & 63));
	if (!(old & 1))
		__sync_fetch_and_xor(&flags_seen, 2);
	__sync_fetch_and_and(&flags_seen, ~4ull);
	old = __sync_lock_test_and_set(&stats->checksum, ctx->globaltimer_ns);
	__sync_val_compare_and_swap(&stats->small[lane & 3], old, lane);
#ifdef DEVICE_ISA_V3 /* built with -mcpu=v3 */
	old = __sync_fetch_and_add(&stats->small32[lane & 3], 3);
	__sync_val_compare_and_swap(&stats->small32[(lane + 1) & 3], (__u32)old, lane);
	__sync_lock_test_and_set(&stats->small32[0], (__u32)seq);
#endif
	last_lane = lane;
	bpf_map_update_elem(&slots, &key, &value, BPF_EXIST);
	return 0;
}

SEC("gpu.exit/vec_add*")
int GPU_PROG(device_exit)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	struct stats *stats = bpf_map_lookup_elem(&shared_stats, &zero);
	__u64 now = bpf_ktime_get_ns();

	if (!stats)
		return 0;
	__sync_fetch_and_add(&stats->exited, 1);
	if ((__s64)(now - stats->checksum) < 0)
		__sync_fetch_and_add(&stats->small[cpu & 3], (__u32)now >> 3);
#ifdef DEVICE_ISA_V3 /* built with -mcpu=v3 */
	__sync_fetch_and_or(&stats->small32[cpu & 3], (__u32)now);
#endif
	return 0;
}

/* The host's side of the same map: the launches counted at their entry. */
SEC("cuda/launch")
int CUDA_PROG(host_launches, struct cuda_launch, launch)
{
	__u32 zero = 0;
	struct stats *stats = bpf_map_lookup_elem(&shared_stats, &zero);

	if (stats && !(launch->flags & (CP_LAUNCH_GRAPH | CP_LAUNCH_HOST_FUNC)))
		__sync_fetch_and_add(&stats->launches, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
