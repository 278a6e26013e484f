// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The device-program smoke's entry and exit counters (tests/gpu/device_smoke.sh):
 * every thread of every kernel named vec_add* adds one to `entries` when it
 * starts and one to `exits` before it ends, so each launch adds
 * grid x block to both. Each program touches one map of its own.
 */
#include "vmlinux.h"
#include "cuprobe.bpf.h"

/* The kernels counted: device_graph.bpf.c includes this file with its own. */
#ifndef COUNTED_KERNELS
#define COUNTED_KERNELS "vec_add*"
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} entries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} exits SEC(".maps");

SEC("gpu/" COUNTED_KERNELS)
int count_entries(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&entries, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("gpu.exit/" COUNTED_KERNELS)
int count_exits(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&exits, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
