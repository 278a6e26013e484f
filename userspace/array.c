// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Growable arrays: one helper for every array the library and the CLI grow. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"

int cp_array__reserve(void *array, size_t *capacity, size_t needed, size_t size, size_t first)
{
	size_t grown = *capacity ? *capacity : (first ? first : 1);
	void *data, *bigger;

	if (needed <= *capacity)
		return 0;
	while (grown < needed) {
		if (grown > SIZE_MAX / 2)
			return -ENOMEM;
		grown *= 2;
	}
	if (size && grown > SIZE_MAX / size)
		return -ENOMEM;
	/* array points to the caller's pointer, of whatever element type: copied, not cast. */
	memcpy(&data, array, sizeof(data));
	bigger = realloc(data, grown * size);
	if (!bigger)
		return -ENOMEM;
	memcpy(array, &bigger, sizeof(bigger));
	*capacity = grown;
	return 0;
}
