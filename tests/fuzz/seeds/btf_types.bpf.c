// SPDX-License-Identifier: GPL-2.0
/*
 * Not a program to run: the BTF kinds a user's records and maps may hold,
 * compiled only for the seeds of fuzz_btf_value (make_seeds.sh).
 */
#include "cuprobe.bpf.h"

struct inner {
	__u8 flag : 1;
	__u8 level : 3;
	__s16 delta;
	char tag[6];
};

union either {
	__u64 number;
	char text[8];
};

typedef struct inner inner_t;

struct everything {
	__u32 pid;
	enum cp_api api;
	cuprobe_kernel_t kernel;
	cuprobe_stack_t stack;
	cuprobe_addr_t handle;
	char comm[16];
	bool ok;
	__s8 small;
	__s64 big;
	float ratio;
	double mean;
	inner_t inner;
	struct inner many[3];
	union either either;
	__u32 grid[3];
	struct {
		__u16 a, b;
	} anonymous;
	void *pointer;
	struct cuprobe_hist hist;
};

struct everything_key {
	__u32 pid;
	__u32 api;
};

CUPROBE_RING(everything_ring, struct everything, 256 * 1024);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct everything_key);
	__type(value, struct everything);
} everything_map SEC(".maps");

SEC("cuda/launch")
int CUDA_PROG(everything_launch, struct cuda_launch, launch)
{
	struct everything *record = cuprobe_ring_reserve(everything_ring);
	struct everything_key key = { .pid = (__u32)(bpf_get_current_pid_tgid() >> 32) };

	if (!record)
		return 0;
	__builtin_memset(record, 0, sizeof(*record));
	record->kernel = launch->function;
	bpf_map_update_elem(&everything_map, &key, record, BPF_ANY);
	cuprobe_ring_submit(record);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
