// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer harness: the PTX rewriter (userspace/device/ptx_rewrite.c) on
 * any text, every kernel matched by an entry and an exit program. What it
 * returns must keep every byte of the input, in order (it only inserts).
 * Seeds: tests/fuzz/corpus/ptx_rewrite and the PTX built for the tests.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_rewrite.h"

static const struct cp_ptx_probe probes[] = {
	{ .glob = "*", .function = "__cuprobe_gpu_enter" },
	{ .glob = "*", .function = "__cuprobe_gpu_leave", .at_exit = true },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cp_ptx_rewrite_opts opts = { .probes = probes, .probe_count = 2,
					    .prelude = ".func __cuprobe_gpu_enter (.param .b64 __cuprobe_launch)\n{\n\tret;\n}\n" };
	struct cp_ptx_rewrite out;
	char error[512];
	size_t len = strnlen((const char *)data, size), i, j;

	if (!cp_ptx__rewrite((const char *)data, size, &opts, &out, error, sizeof(error)) && out.text) {
		/* The input is a subsequence of the output. */
		for (i = 0, j = 0; i < len && j < out.len; j++)
			if (out.text[j] == (char)data[i])
				i++;
		if (i != len)
			abort();
	}
	cp_ptx_rewrite__release(&out);
	return 0;
}
