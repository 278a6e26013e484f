// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Stands in for the BPF-to-PTX translator (issue 21, item 3) until it
 * joins this tree: cp_device__translate with the translator's contract
 * (a .func of the signature the rewriter calls, the maps referenced in
 * index order), from a fixed body rather than the program's instructions:
 * an entry counter, adding 1 to the first u64 of the first map the
 * program references (none: an empty function). The join replaces this
 * file with the translator.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <linux/bpf.h>

#include "device.h"

/* The index of map fd in maps, added when new; -1 when maps is full. */
static int map_index(struct cp_device_maps *maps, int fd)
{
	size_t i;

	for (i = 0; i < maps->count; i++)
		if (maps->fds[i] == fd)
			return (int)i;
	if (maps->count == CP_INJECT_MAX_MAPS)
		return -1;
	maps->fds[maps->count] = fd;
	return (int)maps->count++;
}

int cp_device__translate(const struct cp_device_program_info *program, const char *function,
			 struct cp_device_maps *maps, char **ptx, char *error, size_t error_size)
{
	int first = -1, index;
	size_t i;

	*ptx = NULL;
	/* Every map the program references, in order: ld_imm64 of a map fd or a map value. */
	for (i = 0; program->insns && i + 1 < program->insn_count; i++) {
		const struct bpf_insn *insn = &program->insns[i];

		if (insn->code != (BPF_LD | BPF_IMM | BPF_DW))
			continue;
		if (insn->src_reg == BPF_PSEUDO_MAP_FD || insn->src_reg == BPF_PSEUDO_MAP_VALUE) {
			index = map_index(maps, insn->imm);
			if (index < 0) {
				snprintf(error, error_size, "program %s: more than %u maps", program->name,
					 CP_INJECT_MAX_MAPS);
				return -E2BIG;
			}
			if (first < 0)
				first = index;
		}
		i++; /* the second half of the ld_imm64 */
	}
	if (first < 0 && asprintf(ptx, ".func %s (.param .b64 __cuprobe_launch)\n{\n\tret;\n}\n", function) < 0)
		*ptx = NULL;
	if (first >= 0 &&
	    asprintf(ptx, ".func %s (.param .b64 __cuprobe_launch)\n{\n"
			  "\t.reg .b64 \t%%rd<3>;\n"
			  "\tld.global.u64 \t%%rd1, [__cuprobe_map_%d];\n"
			  "\tatom.add.u64 \t%%rd2, [%%rd1], 1;\n"
			  "\tret;\n}\n", function, first) < 0)
		*ptx = NULL;
	if (!*ptx) {
		snprintf(error, error_size, "out of memory");
		return -ENOMEM;
	}
	return 0;
}
