// SPDX-License-Identifier: GPL-2.0
/*
 * Which grid and block sizes does each kernel launch with?
 * Per process and kernel: a histogram of blocks per grid and one of threads
 * per block, over every kernel launch (graphs and host functions left out).
 *
 *	sudo cuprobe run launch_dims.bpf.c -- ./my_app
 */
#include "cuprobe.bpf.h"

struct launch_key {
	__u32 pid;
	__u32 pad;
	cuprobe_kernel_t kernel;	/* printed as the kernel's name */
};

struct launch_dims {
	struct cuprobe_hist blocks_per_grid;
	struct cuprobe_hist threads_per_block;
};

CUPROBE_HASH(launch_dims, struct launch_key, struct launch_dims, 4096);

SEC("cuda/launch")
int CUDA_PROG(count_dims, struct cuda_launch, launch)
{
	struct launch_key key = {
		.pid = bpf_get_current_pid_tgid() >> 32,
		.kernel = launch->function,
	};
	struct launch_dims *dims;

	if (launch->flags & (CP_LAUNCH_GRAPH | CP_LAUNCH_HOST_FUNC))
		return 0;
	dims = cuprobe_lookup_or_init(launch_dims, &key);
	if (!dims)
		return 0;
	cuprobe_hist_add(&dims->blocks_per_grid,
			 (__u64)launch->grid[0] * launch->grid[1] * launch->grid[2]);
	cuprobe_hist_add(&dims->threads_per_block,
			 (__u64)launch->block[0] * launch->block[1] * launch->block[2]);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
