// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a device program costs (tests/gpu/device_check.sh): gpu/kernel_timing
 * launches the same vec_add under several names, interleaved, in one run;
 * each name gets one kind of probe at its entry, vec_add_plain none:
 *   vec_add_empty    an empty program (a call that does nothing)
 *   vec_add_timer    a read of the globaltimer, kept (a count if it read 0)
 *   vec_add_counter  a counter: one add per thread to one map slot, which
 *                    the translation aggregates per warp (one red per warp)
 *   vec_add_ring     one device-ring record per warp, written by the
 *                    warp's first thread (block, warp in the block)
 *   vec_add_ring_full the same into a ring too small for a launch's
 *                    records: the GPU counts them lost (the full ring's path)
 */
#include "device_check.bpf.h"

CUPROBE_GPU_ARRAY(threads_counted, __u64, 1);
CUPROBE_GPU_ARRAY(timer_read_zero, __u64, 1);

SEC("gpu/vec_add_empty")
int GPU_PROG(empty_probe)
{
	return 0;
}

SEC("gpu/vec_add_timer")
int GPU_PROG(timer_probe)
{
	if (!ctx->globaltimer_ns)
		count_one(&timer_read_zero);
	return 0;
}

SEC("gpu/vec_add_counter")
int GPU_PROG(counter_probe)
{
	count_one(&threads_counted);
	return 0;
}

struct warp_record {
	__u32 block;
	__u32 warp;
};

/*
 * A launch of 1M elements writes 32,768 records, a round of kernel_timing
 * overhead (20 launches between two syncs) 655,360: 128 segments of 8,192
 * slots hold them all, so every record takes the path of one delivered.
 * full_records' 64 segments of 64 slots hold 4,096: from a round's first
 * launch on, its records find the segments full and are counted lost.
 */
CUPROBE_GPU_RING(warp_records, struct warp_record, 1048576);
CUPROBE_GPU_RING(full_records, struct warp_record, 4096);

/*
 * The body of both ring programs: the record of the warp's first thread
 * (block, warp in the block), into ring; the other threads write none.
 */
#define WARP_RECORD_BODY(ring)						\
	{								\
		__u64 thread = cuprobe_gpu_thread_index(ctx);		\
		struct warp_record record = {};				\
									\
		if (thread % 32)					\
			return 0;					\
		record.block = (__u32)cuprobe_gpu_block_index(ctx);	\
		record.warp = (__u32)(thread / 32);			\
		cuprobe_gpu_output(ring, ctx, &record);			\
		return 0;						\
	}

SEC("gpu/vec_add_ring")
int GPU_PROG(ring_probe)
WARP_RECORD_BODY(warp_records)

SEC("gpu/vec_add_ring_full")
int GPU_PROG(ring_full_probe)
WARP_RECORD_BODY(full_records)

char LICENSE[] SEC("license") = "GPL";
