// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The BPF-to-PTX translator on any instructions. It is built to trust the
 * kernel's verifier for bounds, initialized registers and termination, but
 * not to be undone by what the verifier would refuse: whatever comes in is
 * translated, or refused with one line and no PTX (the errors its header
 * names), and what it translates makes a module with the maps it uses.
 *
 * Input: the instructions, 8 bytes each (a rest shorter than one is left
 * out). The object's maps are the unit test's, fds 100 to 104.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/ptx_jit.h"

#define MMAPABLE (1u << 10)

static const struct cp_ptx_map maps[] = {
	{ .name = "counts", .fd = 100, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = 8, .max_entries = 4 },
	{ .name = "wide", .fd = 101, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = 12, .max_entries = 3 },
	{ .name = "by_pid", .fd = 102, .type = BPF_MAP_TYPE_HASH, .key_size = 4,
	  .value_size = 8, .max_entries = 64 },
	{ .name = "plain", .fd = 103, .type = BPF_MAP_TYPE_ARRAY, .key_size = 4,
	  .value_size = 8, .max_entries = 4 },
	{ .name = "prog.bss", .fd = 104, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = 64, .max_entries = 1 },
};
#define MAP_COUNT (sizeof(maps) / sizeof(maps[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t count = size / sizeof(struct bpf_insn);
	struct cp_ptx_program prog = { .name = "prog", .insn_count = count, .maps = maps,
				       .map_count = MAP_COUNT };
	struct cp_ptx_function function = { .name = "prog", .section = "gpu/fuzz" };
	struct bpf_insn *insns;
	bool used[MAP_COUNT] = { false };
	char error[512], *ptx = NULL, *module = NULL;
	int err;

	if (!count)
		return 0;
	/* A copy of its own size, aligned: a read past the program is ASan's to see. */
	insns = malloc(count * sizeof(*insns));
	if (!insns)
		abort();
	memcpy(insns, data, count * sizeof(*insns));
	prog.insns = insns;
	error[0] = '\0';
	err = cp_ptx__translate(&prog, &ptx, used, error, sizeof(error));
	if (err) {
		/* Refused: by name, one line, nothing made. */
		if ((err != -EINVAL && err != -EOPNOTSUPP && err != -ENOMEM) || ptx || !error[0] ||
		    strchr(error, '\n'))
			abort();
	} else {
		if (!ptx || error[0])
			abort();
		function.ptx = ptx;
		if (cp_ptx__module(&function, 1, maps, used, MAP_COUNT, &module) || !module)
			abort();
	}
	free(module);
	free(ptx);
	free(insns);
	return 0;
}
