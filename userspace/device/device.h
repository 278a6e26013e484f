/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Device programs on cuprobe's side (cuprobe run PROG -- COMMAND): a BPF
 * object's SEC("gpu/GLOB") and SEC("gpu.exit/GLOB") programs, verified by
 * the kernel with the rest of the object, each translated to a PTX .func,
 * and put with their maps and the launch slots into the plan that COMMAND's
 * preload library reads (inject_protocol.h). Internal to libcuprobe.
 */
#ifndef CUPROBE_DEVICE_H
#define CUPROBE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inject_protocol.h"

struct bpf_insn;
struct cp_program;

#define CP_DEVICE_SECTION_ENTRY "gpu/"
#define CP_DEVICE_SECTION_EXIT "gpu.exit/"
/* The launch-slot map: slot 0 counts, the others are handed out round robin. */
#define CP_LAUNCH_SLOTS 65536u

/* Is section a device program's? Its glob and direction when it is. */
bool cp_device__section(const char *section, const char **glob, bool *at_exit);

/* Does the BPF object (ELF bytes) hold device programs? 1, 0, or a negative errno. */
int cp_device__elf_has_programs(const void *elf, size_t size);

/* One device program of a loaded object. */
struct cp_device_program_info {
	const char *name;              /* the BPF program's */
	const char *glob;
	bool at_exit;
	const struct bpf_insn *insns;  /* as loaded: map fds in their ld_imm64 */
	size_t insn_count;
};

size_t cp_program__device_count(const struct cp_program *program);
int cp_program__device(const struct cp_program *program, size_t index,
		       struct cp_device_program_info *out);

/* The maps the programs of one plan reference: __cuprobe_map_<i> is fds[i]'s. */
struct cp_device_maps {
	int fds[CP_INJECT_MAX_MAPS];
	size_t count;
};

/*
 * The translator's seam: program as PTX, `.func function (.param .b64
 * __cuprobe_launch)` and whatever subfunctions it needs (a new string in
 * *ptx), the maps it references added to maps (a map seen before keeps its
 * index). 0, or a negative errno with one line in error.
 */
int cp_device__translate(const struct cp_device_program_info *program, const char *function,
			 struct cp_device_maps *maps, char **ptx, char *error, size_t error_size);

struct cp_device_plan_opts {
	uint64_t magic;           /* the session's: the tracer's launch_slot_magic */
	int launch_slots_fd;
	uint32_t launch_slots;
	int report_fd;            /* COMMAND's end of the report socket */
};

/*
 * The plan for COMMAND from a loaded program: every device program
 * translated, the maps they use (each an mmapable array, else refused by
 * name), the launch slots and the report socket. fds are cuprobe's, which
 * COMMAND inherits at the same numbers. 0, or a negative errno with one
 * line in error.
 */
int cp_device_plan__build(const struct cp_program *program, const struct cp_device_plan_opts *opts,
			  struct cp_inject_plan *plan, char *error, size_t error_size);

#endif
