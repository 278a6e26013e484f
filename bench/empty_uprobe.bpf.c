// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of cp_compare (contender_uprobe.c): a uprobe that does nothing.
 * Attached to the same cuLaunchKernel as cuprobe's probe, it costs the traced
 * call the trap, the uprobe dispatch and one empty BPF program run, and
 * nothing else.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int empty_uprobe(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
