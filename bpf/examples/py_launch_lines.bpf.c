// SPDX-License-Identifier: GPL-2.0
/*
 * Which Python line launches how many kernels? Per process and Python stack
 * (printed as its innermost frame, FILE:LINE FUNCTION): the kernel launches
 * (graph launches included, host functions not). Launches from a thread
 * without Python frames count on "(no Python stack)".
 *
 *	sudo cuprobe run --python py_launch_lines.bpf.c -- python3 train.py
 */
#include "cuprobe.bpf.h"

struct python_stack {
	__u32 pid;
	__u32 pad;
	cuprobe_py_stack_t stack;
};

CUPROBE_HASH(py_launch_lines, struct python_stack, __u64, 16384);

SEC("cuda/launch")
int CUDA_PROG(count_launch, struct cuda_launch, launch)
{
	struct python_stack key = { .pid = bpf_get_current_pid_tgid() >> 32,
				    .stack = cuprobe_python_stack_id(ctx) };
	__u64 *count;

	if (launch->flags & CP_LAUNCH_HOST_FUNC)
		return 0;
	count = cuprobe_lookup_or_init(py_launch_lines, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
