// SPDX-License-Identifier: GPL-2.0
/*
 * When and where does each warp of the kernels named vec_add... finish?
 * One record per warp, through a device ring: written at the kernel's exit
 * by the warp's first thread (linear thread index a multiple of 32) with
 * its block, its warp in the block, the SM it ran on and the GPU's
 * globaltimer then. A kernel of B blocks of T threads gives exactly
 * B * ceil(T / 32) records, each (block, warp) once; records that find the
 * ring full are counted as lost.
 *
 *	sudo cuprobe run gpu_warp_exits.bpf.c -- ./vec_add 100 1000
 */
#include "cuprobe.bpf.h"

struct warp_exit {
	__u32 block;
	__u32 warp;		/* the warp in its block: linear thread index / 32 */
	__u32 sm;
	__u32 pad;
	__u64 exit_ns;		/* globaltimer at the first thread's exit */
};

CUPROBE_GPU_RING(warp_exits, struct warp_exit, 65536);

SEC("gpu.exit/vec_add*")
int GPU_PROG(warp_exit)
{
	__u64 thread = cuprobe_gpu_thread_index(ctx);
	struct warp_exit record = {};

	if (thread % 32)
		return 0;
	record.block = (__u32)cuprobe_gpu_block_index(ctx);
	record.warp = (__u32)(thread / 32);
	record.sm = (__u32)ctx->sm_id;
	record.exit_ns = ctx->globaltimer_ns;
	cuprobe_gpu_output(warp_exits, ctx, &record);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
