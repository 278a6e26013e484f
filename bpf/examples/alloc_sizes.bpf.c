// SPDX-License-Identifier: GPL-2.0
/*
 * How large are the allocations of each process, by kind of memory?
 * Per process and kind (device, managed, stream-ordered, pinned host): the
 * allocations that succeeded, their bytes and a histogram of their sizes.
 *
 *	sudo cuprobe run alloc_sizes.bpf.c -- ./my_app
 */
#include "cuprobe.bpf.h"

struct alloc_key {
	__u32 pid;
	enum cp_mem_kind kind;		/* printed as the kind's enumerator */
};

struct alloc_sizes {
	__u64 allocations;
	__u64 bytes;
	struct cuprobe_hist size;
};

CUPROBE_HASH(alloc_sizes, struct alloc_key, struct alloc_sizes, 4096);

/* At the return: the size of pitched allocations is known only then, and failures are left out. */
SEC("cuda.return/alloc")
int CUDA_RETURN_PROG(count_alloc, struct cuda_alloc, alloc)
{
	struct alloc_key key = { .pid = bpf_get_current_pid_tgid() >> 32, .kind = alloc->kind };
	struct alloc_sizes *sizes;

	if (alloc->result != 0)
		return 0;
	sizes = cuprobe_lookup_or_init(alloc_sizes, &key);
	if (!sizes)
		return 0;
	__sync_fetch_and_add(&sizes->allocations, 1);
	__sync_fetch_and_add(&sizes->bytes, alloc->bytes);
	cuprobe_hist_add(&sizes->size, alloc->bytes);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
