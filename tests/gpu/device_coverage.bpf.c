// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Coverage (tests/gpu/device_check.sh): threads and blocks counted at the
 * entry of every kernel (glob "*"), so every kernel a module load brings
 * is matched, and cuprobe reports each as instrumented or not
 * instrumentable (with why):
 * PyTorch's and Triton's, which ship cubins without PTX, are expected to
 * be listed, not instrumented.
 */
#include "device_check.bpf.h"

CUPROBE_GPU_ARRAY(threads_entered, __u64, 1);
CUPROBE_GPU_ARRAY(blocks_entered, __u64, 1);

SEC("gpu/*")
int GPU_PROG(count_any)
{
	count_one(&threads_entered);
	if (cuprobe_gpu_block_leader(ctx))
		count_one(&blocks_entered);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
