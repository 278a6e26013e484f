// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The plan COMMAND gets (device.h), from what the load of a program left:
 * its device programs translated to PTX and the object's maps, numbered as
 * the translator numbers them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "cuprobe_internal.h"
#include "device.h"

/* The programs' PTX, one after the other: every .func of the plan. */
static int add_functions(char **functions, size_t *len, const char *ptx)
{
	size_t n = strlen(ptx);
	char *grown = realloc(*functions, *len + n + 2);

	if (!grown)
		return -ENOMEM;
	*functions = grown;
	memcpy(grown + *len, ptx, n);
	*len += n;
	grown[(*len)++] = '\n';
	grown[*len] = '\0';
	return 0;
}

static int add_program(struct cp_inject_plan *plan, const struct cp_device_program_info *info)
{
	struct cp_inject_program *p = &plan->programs[plan->program_count];

	p->name = strdup(info->name);
	p->glob = strdup(info->glob);
	p->function = strdup(info->function);
	p->at_exit = info->at_exit;
	p->uses_shadow = info->uses_shadow;
	plan->program_count++;
	return p->name && p->glob && p->function ? 0 : -ENOMEM;
}

static int add_map(struct cp_inject_plan *plan, size_t index, const struct cp_device_map_info *info)
{
	struct cp_inject_map *m = &plan->maps[plan->map_count];

	*m = (struct cp_inject_map){
		.index = (uint32_t)index, .fd = info->fd, .value_size = info->value_size,
		.max_entries = info->max_entries,
		/* .rodata (const volatile settings) is frozen: mapped and registered read-only. */
		.read_only = info->flags & BPF_F_RDONLY_PROG,
		.name = strdup(info->name),
	};
	plan->map_count++;
	return m->name ? 0 : -ENOMEM;
}

int cp_device_plan__build(const struct cp_program *program, const struct cp_device_plan_opts *opts,
			  struct cp_inject_plan *plan, char *error, size_t error_size)
{
	size_t count = cp_program__device_count(program),
	       map_count = cp_program__device_map_count(program), functions_len = 0, i;
	int err = 0;

	if (!opts || !plan)
		return -EINVAL;
	memset(plan, 0, sizeof(*plan));
	if (count > CP_INJECT_MAX_PROGRAMS)
		return cp_device__fail(error, error_size, -E2BIG, "%zu device programs: at most %u", count,
			    CP_INJECT_MAX_PROGRAMS);
	plan->magic = opts->magic;
	plan->report_fd = opts->report_fd;
	plan->launch_slots_fd = opts->launch_slots_fd;
	plan->launch_slot_count = opts->launch_slots;
	plan->programs = calloc(count ? count : 1, sizeof(*plan->programs));
	plan->maps = calloc(CP_INJECT_MAX_MAPS, sizeof(*plan->maps));
	plan->functions = strdup("");
	if (!plan->programs || !plan->maps || !plan->functions) {
		err = cp_device__fail(error, error_size, -ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; !err && i < count; i++) {
		struct cp_device_program_info info;

		err = cp_program__device(program, i, &info);
		if (!err)
			err = add_program(plan, &info);
		if (!err)
			err = add_functions(&plan->functions, &functions_len, info.ptx);
		if (err)
			err = cp_device__fail(error, error_size, err, "%s", err == -ENOMEM ? "out of memory" :
				   "a device program cannot be read back");
	}
	/* The maps some program uses: the translator refused any other kind already. */
	for (i = 0; !err && i < map_count; i++) {
		struct cp_device_map_info info;

		if (cp_program__device_map(program, i, &info))
			err = cp_device__fail(error, error_size, -EINVAL, "a device map cannot be read back");
		else if (!info.used)
			continue;
		else if (plan->map_count == CP_INJECT_MAX_MAPS)
			err = cp_device__fail(error, error_size, -E2BIG, "device programs use more than %u maps",
				   CP_INJECT_MAX_MAPS);
		else if (i >= CP_INJECT_MAX_MAP_INDEX)
			err = cp_device__fail(error, error_size, -E2BIG,
				   "map %s is the object's map number %zu: device programs reach the first %u",
				   info.name, i, CP_INJECT_MAX_MAP_INDEX);
		else if (add_map(plan, i, &info))
			err = cp_device__fail(error, error_size, -ENOMEM, "out of memory");
	}
out:
	if (err)
		cp_inject_plan__release(plan);
	return err;
}
