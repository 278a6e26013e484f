/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the device programs of tests/gpu/device_check.sh share. */
#ifndef DEVICE_CHECK_BPF_H
#define DEVICE_CHECK_BPF_H

#include "cuprobe.bpf.h"

/* One added to the first __u64 of an array (a reduction, aggregated per warp on the GPU). */
static __always_inline void count_one(void *array)
{
	__u32 zero = 0;
	__u64 *count = bpf_map_lookup_elem(array, &zero);

	if (count)
		__sync_fetch_and_add(count, 1);
}

#endif /* DEVICE_CHECK_BPF_H */
