// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exact checks of tests/gpu/device_check.sh, on gpu/kernel_timing's
 * "exact" run: entry and exit counters for a 1D kernel (vec_add_kernel)
 * and a 2D one (add_2d_kernel, whose threads outside the matrix return
 * early), each adding one per thread, so each launch adds grid x block;
 * and per block of each kernel the globaltimer at the entry of its thread
 * (0, 0, 0) and at the exit of its last thread, with the launch's seq.
 * Launches of one stream run in order, so at the end the spans are the
 * last launch's, which the check holds against the globaltimer stamps
 * kernel_timing took around that launch.
 */
#include "device_check.bpf.h"

#define MAX_BLOCKS 4096

struct block_span {
	__u64 start_ns;		/* globaltimer at thread (0, 0, 0)'s entry */
	__u64 end_ns;		/* globaltimer at the block's last exit */
	__u64 launch_seq;	/* the launch that wrote start_ns */
	__u64 exited;		/* threads of the block past their exit (working state) */
};

CUPROBE_GPU_ARRAY(entries_1d, __u64, 1);
CUPROBE_GPU_ARRAY(exits_1d, __u64, 1);
CUPROBE_GPU_ARRAY(entries_2d, __u64, 1);
CUPROBE_GPU_ARRAY(exits_2d, __u64, 1);
CUPROBE_GPU_ARRAY(spans_1d, struct block_span, MAX_BLOCKS);
CUPROBE_GPU_ARRAY(spans_2d, struct block_span, MAX_BLOCKS);
CUPROBE_GPU_ARRAY(blocks_past_max, __u64, 1);	/* blocks with no span slot */

static __always_inline void span_start(struct cuprobe_gpu_ctx *ctx, struct block_span *span)
{
	if (!cuprobe_gpu_block_leader(ctx))
		return;
	if (!span) {
		count_one(&blocks_past_max);
		return;
	}
	span->start_ns = ctx->globaltimer_ns;
	span->launch_seq = ctx->launch_seq;
}

static __always_inline void span_end(struct cuprobe_gpu_ctx *ctx, struct block_span *span)
{
	/* Ordered (an atomic with a result): every earlier exit of the block is counted. */
	if (!span || __sync_fetch_and_add(&span->exited, 1) + 1 != cuprobe_gpu_block_threads(ctx))
		return;
	span->exited = 0;
	span->end_ns = ctx->globaltimer_ns;
}

/* A kernel's counter (entries or exits) and its block's span (start or end). */
static __always_inline void probe(struct cuprobe_gpu_ctx *ctx, void *counter, void *spans, bool entry)
{
	__u32 block = cuprobe_gpu_block_index(ctx);
	struct block_span *span = bpf_map_lookup_elem(spans, &block);

	count_one(counter);
	if (entry)
		span_start(ctx, span);
	else
		span_end(ctx, span);
}

/* The entry and exit programs of one kernel. */
#define KERNEL_PROBES(kernel, dims)							\
	SEC("gpu/" #kernel)								\
	int GPU_PROG(entry_##dims)							\
	{										\
		probe(ctx, &entries_##dims, &spans_##dims, true);			\
		return 0;								\
	}										\
	SEC("gpu.exit/" #kernel)							\
	int GPU_PROG(exit_##dims)							\
	{										\
		probe(ctx, &exits_##dims, &spans_##dims, false);			\
		return 0;								\
	}

KERNEL_PROBES(vec_add_kernel, 1d)
KERNEL_PROBES(add_2d_kernel, 2d)

char LICENSE[] SEC("license") = "GPL";
