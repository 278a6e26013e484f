// SPDX-License-Identifier: GPL-2.0
/*
 * How much data moves in each direction, and in what sizes?
 * Per direction (host to device, device to host, device to device, peer,
 * arrays, batches): the copies, their bytes and a histogram of their sizes,
 * synchronous and asynchronous copies apart.
 *
 *	sudo cuprobe run copy_sizes.bpf.c -- ./my_app
 */
#include "cuprobe.bpf.h"

struct copy_key {
	enum cp_copy_dir direction;	/* printed as the direction's enumerator */
	__u32 async;			/* 1: cuMemcpy*Async */
};

struct copy_sizes {
	__u64 copies;
	__u64 bytes;
	struct cuprobe_hist size;
};

CUPROBE_HASH(copy_sizes, struct copy_key, struct copy_sizes, 64);

SEC("cuda/copy")
int CUDA_PROG(count_copy, struct cuda_copy, copy)
{
	struct copy_key key = { .direction = copy->direction, .async = copy->async };
	struct copy_sizes *sizes = cuprobe_lookup_or_init(copy_sizes, &key);

	if (!sizes)
		return 0;
	/* A batch is one call of count copies. */
	__sync_fetch_and_add(&sizes->copies, copy->count);
	__sync_fetch_and_add(&sizes->bytes, copy->bytes);
	cuprobe_hist_add(&sizes->size, copy->bytes);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
