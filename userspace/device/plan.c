// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Device programs in cuprobe's process: which programs of an object are
 * device programs, and the plan COMMAND gets (device.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cuprobe_internal.h"
#include "device.h"
#include "tracer_internal.h"

static int fail(char *error, size_t error_size, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *error, size_t error_size, int err, const char *fmt, ...)
{
	va_list ap;

	if (error && error_size) {
		va_start(ap, fmt);
		vsnprintf(error, error_size, fmt, ap);
		va_end(ap);
	}
	return err;
}

bool cp_device__section(const char *section, const char **glob, bool *at_exit)
{
	const char *rest;
	bool exit_program;

	if (!section)
		return false;
	if (!strncmp(section, CP_DEVICE_SECTION_EXIT, strlen(CP_DEVICE_SECTION_EXIT))) {
		rest = section + strlen(CP_DEVICE_SECTION_EXIT);
		exit_program = true;
	} else if (!strncmp(section, CP_DEVICE_SECTION_ENTRY, strlen(CP_DEVICE_SECTION_ENTRY))) {
		rest = section + strlen(CP_DEVICE_SECTION_ENTRY);
		exit_program = false;
	} else {
		return false;
	}
	if (glob)
		*glob = rest;
	if (at_exit)
		*at_exit = exit_program;
	return true;
}

int cp_device__elf_has_programs(const void *elf, size_t size)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts, .object_name = "cuprobe_scan");
	struct bpf_object *obj = bpf_object__open_mem(elf, size, &open_opts);
	struct bpf_program *prog;
	int found = 0;

	if (!obj)
		return -errno;
	bpf_object__for_each_program(prog, obj)
		found |= cp_device__section(bpf_program__section_name(prog), NULL, NULL);
	bpf_object__close(obj);
	return found;
}

static struct bpf_program *nth_device_program(const struct cp_program *program, size_t index)
{
	struct bpf_program *prog;
	size_t n = 0;

	if (!program || !program->obj)
		return NULL;
	bpf_object__for_each_program(prog, program->obj)
		if (cp_device__section(bpf_program__section_name(prog), NULL, NULL) && n++ == index)
			return prog;
	return NULL;
}

size_t cp_program__device_count(const struct cp_program *program)
{
	struct bpf_program *prog;
	size_t n = 0;

	if (!program || !program->obj)
		return 0;
	bpf_object__for_each_program(prog, program->obj)
		n += cp_device__section(bpf_program__section_name(prog), NULL, NULL);
	return n;
}

int cp_program__device(const struct cp_program *program, size_t index,
		       struct cp_device_program_info *out)
{
	struct bpf_program *prog = nth_device_program(program, index);

	if (!prog || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->name = bpf_program__name(prog);
	cp_device__section(bpf_program__section_name(prog), &out->glob, &out->at_exit);
	out->insns = bpf_program__insns(prog);
	out->insn_count = bpf_program__insn_cnt(prog);
	return 0;
}

/* A map device code may use: an array COMMAND can map (BPF_F_MMAPABLE). */
static int describe_map(int fd, const char *user, struct cp_inject_map *out, char *error,
			size_t error_size)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return fail(error, error_size, -errno, "program %s: cannot inspect a map it uses: %s", user,
			    strerror(errno));
	if (info.type != BPF_MAP_TYPE_ARRAY || !(info.map_flags & BPF_F_MMAPABLE))
		return fail(error, error_size, -EINVAL,
			    "program %s: map %s is not an array with BPF_F_MMAPABLE, the only maps device programs can use",
			    user, info.name);
	out->fd = fd;
	/* .rodata (const volatile settings) is frozen: mapped and registered read-only. */
	out->read_only = info.map_flags & BPF_F_RDONLY_PROG;
	out->value_size = info.value_size;
	out->max_entries = info.max_entries;
	out->name = strdup(info.name);
	return out->name ? 0 : fail(error, error_size, -ENOMEM, "out of memory");
}

int cp_device_plan__build(const struct cp_program *program, const struct cp_device_plan_opts *opts,
			  struct cp_inject_plan *plan, char *error, size_t error_size)
{
	struct cp_device_maps maps = { .count = 0 };
	size_t count = cp_program__device_count(program), i, described = 0, functions_len = 0;
	int err = 0;

	if (!opts || !plan)
		return -EINVAL;
	memset(plan, 0, sizeof(*plan));
	if (count > CP_INJECT_MAX_PROGRAMS)
		return fail(error, error_size, -E2BIG, "%zu device programs: at most %u", count,
			    CP_INJECT_MAX_PROGRAMS);
	plan->magic = opts->magic;
	plan->report_fd = opts->report_fd;
	plan->launch_slots_fd = opts->launch_slots_fd;
	plan->launch_slot_count = opts->launch_slots;
	plan->programs = calloc(count ? count : 1, sizeof(*plan->programs));
	plan->maps = calloc(CP_INJECT_MAX_MAPS, sizeof(*plan->maps));
	plan->functions = strdup("");
	if (!plan->programs || !plan->maps || !plan->functions) {
		err = fail(error, error_size, -ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; !err && i < count; i++) {
		struct cp_inject_program *p = &plan->programs[plan->program_count];
		struct cp_device_program_info info;
		char *ptx = NULL, *grown;
		size_t len;

		err = cp_program__device(program, i, &info);
		if (err)
			break;
		if (!*info.glob) {
			err = fail(error, error_size, -EINVAL, "program %s: section %s needs a kernel glob after it",
				   info.name, info.at_exit ? CP_DEVICE_SECTION_EXIT : CP_DEVICE_SECTION_ENTRY);
			break;
		}
		p->name = strdup(info.name);
		p->glob = strdup(info.glob);
		p->at_exit = info.at_exit;
		if (!p->name || !p->glob || asprintf(&p->function, "__cuprobe_gpu_%s", info.name) < 0) {
			p->function = NULL;
			plan->program_count++;
			err = fail(error, error_size, -ENOMEM, "out of memory");
			break;
		}
		plan->program_count++;
		err = cp_device__translate(&info, p->function, &maps, &ptx, error, error_size);
		if (err)
			break;
		len = strlen(ptx);
		grown = realloc(plan->functions, functions_len + len + 2);
		if (!grown) {
			free(ptx);
			err = fail(error, error_size, -ENOMEM, "out of memory");
			break;
		}
		plan->functions = grown;
		memcpy(plan->functions + functions_len, ptx, len);
		functions_len += len;
		plan->functions[functions_len++] = '\n';
		plan->functions[functions_len] = '\0';
		free(ptx);
		/* The maps this program added. */
		for (; !err && described < maps.count; described++) {
			err = describe_map(maps.fds[described], info.name, &plan->maps[described], error,
					   error_size);
			if (!err)
				plan->map_count++;
		}
	}
out:
	if (err)
		cp_inject_plan__release(plan);
	return err;
}
