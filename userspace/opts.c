// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Options structs across releases, as libbpf's OPTS_VALID/OPTS_GET do it:
 * every __new/__open/__start that takes options copies the caller's struct
 * into a zeroed one of its own size here, then reads only that copy.
 */
#include <errno.h>
#include <string.h>

#include "cuprobe_internal.h"

int cp_opts__copy(void *local, size_t local_sz, const void *opts)
{
	const unsigned char *bytes = opts;
	size_t sz, i;

	if (!local || local_sz < sizeof(size_t))
		return -EINVAL;
	memset(local, 0, local_sz);
	if (opts) {
		memcpy(&sz, opts, sizeof(sz));
		if (sz < sizeof(size_t))
			return -EINVAL;
		/* A newer caller's struct: what this library does not know must be unset. */
		for (i = local_sz; i < sz; i++)
			if (bytes[i])
				return -EINVAL;
		memcpy(local, opts, sz < local_sz ? sz : local_sz);
	}
	memcpy(local, &local_sz, sizeof(local_sz));
	return 0;
}
