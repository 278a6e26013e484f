/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Device programs on cuprobe's side (cuprobe run PROG -- COMMAND): the plan
 * COMMAND's preload library reads (inject_protocol.h), made from a loaded
 * program's device programs as the translator left them
 * (cp_program__device, cp_program__device_map in cuprobe_internal.h), with
 * the maps they use and the launch slots. Internal to libcuprobe.
 */
#ifndef CUPROBE_DEVICE_H
#define CUPROBE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "inject_protocol.h"

struct cp_program;

/* The launch-slot map: slot 0 counts, the others are handed out round robin. */
#define CP_LAUNCH_SLOTS 65536u

struct cp_device_plan_opts {
	uint64_t magic;           /* the session's: the tracer's launch_slot_magic */
	int launch_slots_fd;
	uint32_t launch_slots;
	int report_fd;            /* COMMAND's end of the report socket */
};

/*
 * The plan for COMMAND from a loaded program: every device program's PTX,
 * the maps they use (each named by its index among the object's maps, as
 * the translator numbers them; .rodata read-only), the launch slots and the
 * report socket. fds are cuprobe's, which COMMAND inherits at the same
 * numbers. 0, or a negative errno with one line in error.
 */
int cp_device_plan__build(const struct cp_program *program, const struct cp_device_plan_opts *opts,
			  struct cp_inject_plan *plan, char *error, size_t error_size);

#endif
