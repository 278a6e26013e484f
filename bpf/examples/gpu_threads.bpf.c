// SPDX-License-Identifier: GPL-2.0
/*
 * How many GPU threads entered the kernels named vec_add...? A device
 * program at each matching kernel's entry counts every thread that enters
 * it: for one launch of vec_add, grid x block threads exactly. Change the
 * glob to count another kernel (the glob "*" counts them all).
 *
 *	sudo cuprobe run gpu_threads.bpf.c -- ./vec_add 100
 *	sudo cuprobe run gpu_threads.bpf.c --ptx	(the PTX it puts in the kernels)
 */
#include "cuprobe.bpf.h"

CUPROBE_GPU_ARRAY(threads_entered, __u64, 1);

SEC("gpu/vec_add*")
int GPU_PROG(count_threads)
{
	__u32 zero = 0;
	__u64 *count = bpf_map_lookup_elem(&threads_entered, &zero);

	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
