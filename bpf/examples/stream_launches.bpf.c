// SPDX-License-Identifier: GPL-2.0
/*
 * How many kernels does each stream get, second by second?
 * Per process, stream and second (counted from the process's first launch):
 * the kernel launches (graph launches included, host functions not).
 *
 *	sudo cuprobe run stream_launches.bpf.c -i 1 -- ./my_app
 */
#include "cuprobe.bpf.h"

struct stream_second {
	__u32 pid;
	__u32 second;			/* since the process's first launch */
	cuprobe_addr_t stream;		/* 0: the legacy default stream */
};

CUPROBE_HASH(launches, struct stream_second, __u64, 16384);

/* When each process launched first. */
CUPROBE_LRU_HASH(first_launch_ns, __u32, __u64, 4096);

SEC("cuda/launch")
int CUDA_PROG(count_launch, struct cuda_launch, launch)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u64 now = bpf_ktime_get_ns(), *first, *count;
	struct stream_second key = { .pid = pid, .stream = launch->stream };

	if (launch->flags & CP_LAUNCH_HOST_FUNC)
		return 0;
	first = bpf_map_lookup_elem(&first_launch_ns, &pid);
	if (!first) {
		bpf_map_update_elem(&first_launch_ns, &pid, &now, BPF_NOEXIST);
		first = bpf_map_lookup_elem(&first_launch_ns, &pid);
		if (!first)
			return 0;
	}
	key.second = now > *first ? (now - *first) / 1000000000 : 0;
	count = cuprobe_lookup_or_init(launches, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
