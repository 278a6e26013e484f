// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The device-program smoke's counters for kernels launched from a CUDA graph
 * (tests/gpu/device_smoke.sh, gpu/graph_replay.cu): as device_count.bpf.c,
 * for graph_step_kernel, whose launches cuprobe never sees (cuGraphLaunch
 * replays them), so each replay of a graph of K kernels adds K x grid x block
 * to both.
 */
#include "vmlinux.h"
#include "cuprobe.bpf.h"

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

SEC("gpu/graph_step*")
int count_entries(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&entries, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("gpu.exit/graph_step*")
int count_exits(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&exits, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
