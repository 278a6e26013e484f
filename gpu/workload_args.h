/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The numeric arguments of the C and CUDA workloads, read one way. */
#ifndef CUPROBE_GPU_WORKLOAD_ARGS_H
#define CUPROBE_GPU_WORKLOAD_ARGS_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* A whole decimal number from min to max into *out: false (*out unchanged) for anything else. */
static inline bool parse_long(const char *text, long min, long max, long *out)
{
	char *end;
	long value;

	if (!text || !*text)
		return false;
	errno = 0;
	value = strtol(text, &end, 10);
	if (errno || *end || value < min || value > max)
		return false;
	*out = value;
	return true;
}

#endif
