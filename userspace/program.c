// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Users' BPF programs (cuprobe run): a BPF object checked, opened, bound to
 * the catalogue's families by section name, loaded with the runtime's
 * shared maps, and then attached by the tracer's one attach path to every
 * driver file, with cuprobe's own programs. Its device programs (gpu/GLOB)
 * are verified by the kernel in the same load, as kprobe programs never
 * attached, and then translated to PTX for the injection. Also what is
 * needed to print its output: its rings (with their record types and loss
 * counts) and its maps, read as bytes with their BTF types.
 */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "cuprobe_internal.h"
#include "tracer_internal.h"

#ifndef EM_BPF
#define EM_BPF 247
#endif

#define SECTION_ENTRY "cuda/"
#define SECTION_RETURN "cuda.return/"
#define SECTION_GPU "gpu/"
#define SECTION_GPU_EXIT "gpu.exit/"
#define DEVICE_FORMS "gpu/GLOB, gpu.exit/GLOB"

static int fail(const struct cp_program_opts *opts, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Says why in opts->error, one line; returns err (negative errno). */
static int fail(const struct cp_program_opts *opts, int err, const char *fmt, ...)
{
	va_list ap;

	if (opts && opts->error && opts->error_size) {
		va_start(ap, fmt);
		vsnprintf(opts->error, opts->error_size, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* "cuda/launch, cuda/alloc, ..., cuda.return/context": every section a program may use. */
static void valid_sections(char *out, size_t len)
{
	size_t used = 0;
	int kind, n;
	unsigned int family;

	out[0] = '\0';
	for (kind = 0; kind < 2; kind++)
		for (family = CP_FAMILY_NONE + 1; family < CP_FAMILY_MAX; family++) {
			if (!cp_family__programmable(family) || used >= len)
				continue;
			n = snprintf(out + used, len - used, "%s%s%s", used ? ", " : "",
				     kind ? SECTION_RETURN : SECTION_ENTRY, cp_family__name(family));
			if (n > 0)
				used += (size_t)n;
		}
	if (used < len)
		snprintf(out + used, len - used, "%s" DEVICE_FORMS, used ? ", " : "");
}

/* A device program's section ("gpu..."): its glob and where it runs; false when malformed. */
static bool parse_device_section(const char *section, const char **glob, bool *at_exit)
{
	const char *p;

	if (!strncmp(section, SECTION_GPU, strlen(SECTION_GPU))) {
		*glob = section + strlen(SECTION_GPU);
		*at_exit = false;
	} else if (!strncmp(section, SECTION_GPU_EXIT, strlen(SECTION_GPU_EXIT))) {
		*glob = section + strlen(SECTION_GPU_EXIT);
		*at_exit = true;
	} else {
		return false;
	}
	for (p = *glob; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return false;
	return **glob != '\0';
}

static bool device_section(const char *section)
{
	return !strncmp(section, "gpu", 3);
}

/* The family and direction a section names; false when it names none. */
static bool parse_section(const char *section, enum cp_family *family, bool *retprobe)
{
	const char *name;

	if (!strncmp(section, SECTION_RETURN, strlen(SECTION_RETURN))) {
		name = section + strlen(SECTION_RETURN);
		*retprobe = true;
	} else if (!strncmp(section, SECTION_ENTRY, strlen(SECTION_ENTRY))) {
		name = section + strlen(SECTION_ENTRY);
		*retprobe = false;
	} else {
		return false;
	}
	*family = cp_family__by_name(name);
	return cp_family__programmable(*family);
}

/* Refuses what is not a 64-bit little-endian BPF ELF object before libbpf sees it. */
static int check_elf(const void *elf, size_t size, const struct cp_program_opts *opts,
		     const char *name)
{
	const Elf64_Ehdr *header = elf;

	if (size < EI_NIDENT || memcmp(header->e_ident, ELFMAG, SELFMAG))
		return fail(opts, -ENOEXEC, "%s: not an ELF file", name);
	if (size < sizeof(*header) || header->e_ident[EI_CLASS] != ELFCLASS64 ||
	    header->e_ident[EI_DATA] != ELFDATA2LSB)
		return fail(opts, -ENOEXEC, "%s: not a BPF object (not 64-bit little-endian ELF)", name);
	if (header->e_machine != EM_BPF)
		return fail(opts, -ENOEXEC, "%s: not a BPF object (ELF machine %u, not BPF)", name,
			    header->e_machine);
	if (header->e_type != ET_REL)
		return fail(opts, -ENOEXEC, "%s: not a BPF object file (compile with -c)", name);
	return 0;
}

/*
 * Whether the object has a .BTF section. libbpf needs one for a .maps
 * section and, without it, fails with ENOENT ("No such file or directory"),
 * which says nothing of the cause: asked first, it is said as it is.
 */
static bool has_btf(void *elf, size_t size)
{
	Elf_Scn *section = NULL;
	GElf_Shdr header;
	size_t names;
	bool found = false;
	Elf *object;

	if (elf_version(EV_CURRENT) == EV_NONE || !(object = elf_memory(elf, size)))
		return true; /* cannot tell: libbpf will say what it finds */
	if (elf_getshdrstrndx(object, &names)) {
		elf_end(object);
		return true;
	}
	while (!found && (section = elf_nextscn(object, section))) {
		const char *name = gelf_getshdr(section, &header) ?
				   elf_strptr(object, names, header.sh_name) : NULL;

		found = name && !strcmp(name, ".BTF");
	}
	elf_end(object);
	return found;
}

/*
 * The maps the runtime shares with every program: those cuprobe.bpf.h
 * declares, all named cuprobe_* (the SDK's prefix), so that the header is
 * their one list.
 */
static bool shared_map(const struct bpf_map *map)
{
	return !bpf_map__is_internal(map) && !strncmp(bpf_map__name(map), "cuprobe_", 8);
}

/* Every shared map of obj reuses the fd of the same map in source. */
static int reuse_maps(struct bpf_object *obj, struct bpf_object *source, bool all)
{
	struct bpf_map *map, *same;
	int err;

	bpf_object__for_each_map(map, obj) {
		if (!all && !shared_map(map))
			continue;
		same = bpf_object__find_map_by_name(source, bpf_map__name(map));
		if (!same)
			return -ENOENT;
		err = bpf_map__reuse_fd(map, bpf_map__fd(same));
		if (err)
			return err;
	}
	return 0;
}

static struct bpf_object *open_object(const struct cp_program *program)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts, .object_name = program->object_name);

	return bpf_object__open_mem(program->elf, program->elf_size, &open_opts);
}

/*
 * Program types and attach types, before load: uprobe_multi or classic.
 * Device programs are kprobe programs to the kernel, checked with the
 * helpers of the same signatures and never attached; the classic twin
 * leaves them out (checked once is enough).
 */
static void prepare_programs(struct cp_program *program, struct bpf_object *obj, bool multi,
			     bool twin)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		bool device = device_section(bpf_program__section_name(prog));

		bpf_program__set_type(prog, BPF_PROG_TYPE_KPROBE);
		bpf_program__set_expected_attach_type(prog, multi && !device ? CP_BPF_TRACE_UPROBE_MULTI : 0);
		if (device && twin)
			bpf_program__set_autoload(prog, false);
	}
}

/* A record type: through const/volatile, keeping typedefs (cuprobe_kernel_t...). */
static __u32 unqualified(const struct btf *btf, __u32 type_id)
{
	const struct btf_type *type = btf__type_by_id(btf, type_id);

	while (type && (btf_is_const(type) || btf_is_volatile(type) || btf_is_restrict(type))) {
		type_id = type->type;
		type = btf__type_by_id(btf, type_id);
	}
	return type_id;
}

static int variable_type(const struct btf *btf, const char *prefix, const char *name, __u32 *type_id)
{
	char var_name[128];
	const struct btf_type *var;
	int id;

	snprintf(var_name, sizeof(var_name), "%s%s", prefix, name);
	id = btf__find_by_name_kind(btf, var_name, BTF_KIND_VAR);
	if (id <= 0)
		return -ENOENT;
	var = btf__type_by_id(btf, id);
	*type_id = unqualified(btf, var->type);
	return 0;
}

/* The offset of a variable in the datasec named section ("".bss"), or -1. */
static long variable_offset(const struct btf *btf, const char *section, const char *name)
{
	const struct btf_var_secinfo *info;
	const struct btf_type *datasec;
	int id = btf__find_by_name_kind(btf, section, BTF_KIND_DATASEC);
	__u16 i;

	if (id <= 0)
		return -1;
	datasec = btf__type_by_id(btf, id);
	info = btf_var_secinfos(datasec);
	for (i = 0; i < btf_vlen(datasec); i++, info++) {
		const struct btf_type *var = btf__type_by_id(btf, info->type);
		const char *var_name = var ? btf__name_by_offset(btf, var->name_off) : NULL;

		if (var_name && !strcmp(var_name, name))
			return info->offset;
	}
	return -1;
}

static struct bpf_map *internal_map(struct bpf_object *obj, const char *suffix)
{
	struct bpf_map *map;
	size_t n = strlen(suffix), len;

	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);

		len = strlen(name);
		if (bpf_map__is_internal(map) && len >= n && !strcmp(name + len - n, suffix))
			return map;
	}
	return NULL;
}

/* The integer type of a variable: its size and signedness; false for other types. */
static bool integer_variable(const struct btf *btf, __u32 var_id, size_t *size, bool *is_signed)
{
	const struct btf_type *var = btf__type_by_id(btf, var_id);
	__u32 type_id = var ? var->type : 0;
	const struct btf_type *type = btf__type_by_id(btf, type_id);

	while (type && (btf_is_const(type) || btf_is_volatile(type) || btf_is_typedef(type))) {
		type_id = type->type;
		type = btf__type_by_id(btf, type_id);
	}
	if (type && btf_is_enum(type)) {
		*size = type->size;
		*is_signed = true;
		return true;
	}
	if (!type || !btf_is_int(type) || type->size > 8)
		return false;
	*size = type->size;
	*is_signed = btf_int_encoding(type) & BTF_INT_SIGNED;
	return true;
}

/* The program's settable variables (const volatile integers), for messages. */
static void settable_names(const struct btf *btf, char *out, size_t len)
{
	const struct btf_var_secinfo *info;
	const struct btf_type *datasec;
	int id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	size_t used = 0, size;
	bool is_signed;
	__u16 i;
	int n;

	out[0] = '\0';
	if (id <= 0)
		return;
	datasec = btf__type_by_id(btf, id);
	info = btf_var_secinfos(datasec);
	for (i = 0; i < btf_vlen(datasec) && used < len; i++, info++) {
		const struct btf_type *var = btf__type_by_id(btf, info->type);
		const char *name = var ? btf__name_by_offset(btf, var->name_off) : NULL;

		/* cuprobe's own, and function-local statics ("f.zero"), are not settings. */
		if (!name || !strncmp(name, "cuprobe_", 8) || strchr(name, '.') ||
		    !integer_variable(btf, info->type, &size, &is_signed))
			continue;
		n = snprintf(out + used, len - used, "%s%s", used ? ", " : "", name);
		if (n > 0)
			used += (size_t)n;
	}
}

/* "-12", "4096", "0x1f": the whole text, no spaces; false otherwise. */
static bool parse_integer(const char *text, bool is_signed, __u64 *value)
{
	char *end;

	if (!*text || *text == ' ' || (!is_signed && *text == '-'))
		return false;
	errno = 0;
	*value = is_signed ? (__u64)strtoll(text, &end, 0) : strtoull(text, &end, 0);
	return !errno && !*end;
}

/* NAME=VALUE settings, written into .rodata before the load. */
static int apply_settings(struct cp_program *program, const struct cp_program_opts *opts,
			  const char *name)
{
	const struct btf *btf = bpf_object__btf(program->obj);
	struct bpf_map *rodata = internal_map(program->obj, ".rodata");
	size_t i, rodata_size = 0, size;
	char *data = rodata ? (char *)bpf_map__initial_value(rodata, &rodata_size) : NULL;
	char valid[1024];

	for (i = 0; i < opts->setting_count; i++) {
		const char *setting = opts->settings[i], *equals = strchr(setting, '=');
		char var_name[128];
		bool is_signed;
		__u64 value;
		long offset;
		int id;

		if (!equals || equals == setting || (size_t)(equals - setting) >= sizeof(var_name))
			return fail(opts, -EINVAL, "--set %s: expected NAME=VALUE", setting);
		snprintf(var_name, sizeof(var_name), "%.*s", (int)(equals - setting), setting);
		id = btf__find_by_name_kind(btf, var_name, BTF_KIND_VAR);
		offset = data ? variable_offset(btf, ".rodata", var_name) : -1;
		if (id <= 0 || offset < 0 || !integer_variable(btf, id, &size, &is_signed) ||
		    !strncmp(var_name, "cuprobe_", 8)) {
			settable_names(btf, valid, sizeof(valid));
			return fail(opts, -ENOENT, "%s: --set %s: no const volatile integer %s%s%s", name,
				    setting, var_name, valid[0] ? "; settable: " : " (it has none)", valid);
		}
		if (!parse_integer(equals + 1, is_signed, &value) ||
		    (size < 8 && (is_signed ? ((__s64)value < -(1ll << (size * 8 - 1)) ||
					       (__s64)value >= (1ll << (size * 8 - 1))) :
				  value >> (size * 8))))
			return fail(opts, -ERANGE, "%s: --set %s: not a%s integer of %zu bytes", name,
				    setting, is_signed ? "" : "n unsigned", size);
		if ((size_t)offset + size > rodata_size)
			return fail(opts, -EINVAL, "%s: --set %s: outside the object's data", name, setting);
		memcpy(data + offset, &value, size);
	}
	return 0;
}

/* The rings, their record types and loss counters; the maps to print. */
static int describe(struct cp_program *program, const struct cp_program_opts *opts)
{
	const struct btf *btf = bpf_object__btf(program->obj);
	struct bpf_map *map;
	size_t rings = 0, maps = 0;
	char lost_var[128];

	program->bss = internal_map(program->obj, ".bss");
	bpf_object__for_each_map(map, program->obj) {
		if (bpf_map__is_internal(map) || shared_map(map))
			continue;
		if (bpf_map__type(map) == BPF_MAP_TYPE_RINGBUF)
			rings++;
		else
			maps++;
	}
	program->rings = calloc(rings ? rings : 1, sizeof(*program->rings));
	program->maps = calloc(maps ? maps : 1, sizeof(*program->maps));
	if (!program->rings || !program->maps)
		return fail(opts, -ENOMEM, "out of memory");
	bpf_object__for_each_map(map, program->obj) {
		const char *name = bpf_map__name(map);

		if (bpf_map__is_internal(map) || shared_map(map))
			continue;
		if (bpf_map__type(map) == BPF_MAP_TYPE_RINGBUF) {
			struct cp_program_ring *ring = &program->rings[program->ring_count++];
			const struct btf_type *type;

			snprintf(ring->name, sizeof(ring->name), "%s", name);
			snprintf(lost_var, sizeof(lost_var), "cuprobe_lost__%s", name);
			ring->fd = bpf_map__fd(map);
			ring->lost_offset = program->bss ? variable_offset(btf, ".bss", lost_var) : -1;
			if (!variable_type(btf, "cuprobe_record__", name, &ring->type_id)) {
				type = btf__type_by_id(btf, ring->type_id);
				ring->record_size = type ? (size_t)btf__resolve_size(btf, ring->type_id) : 0;
			}
			continue;
		}
		program->maps[program->map_count++] = map;
	}
	return 0;
}

static void free_program(struct cp_program *program)
{
	size_t i;

	if (!program)
		return;
	for (i = 0; i < program->device_count; i++)
		free(program->devices[i].ptx);
	free(program->devices);
	free(program->device_maps);
	free(program->device_map_used);
	bpf_object__close(program->classic_obj);
	bpf_object__close(program->obj);
	free(program->bindings);
	free(program->rings);
	free(program->maps);
	free(program->elf);
	free(program);
}

void cp_program__destroy(struct cp_program *program)
{
	free_program(program);
}

static bool cuda_section(const char *section)
{
	return !strncmp(section, SECTION_ENTRY, strlen(SECTION_ENTRY)) ||
	       !strncmp(section, SECTION_RETURN, strlen(SECTION_RETURN));
}

/*
 * Each program's family and direction, or for a device program its glob
 * and where it runs, from its section; every one must name one.
 */
static int bind_programs(struct cp_program *program, const struct cp_program_opts *opts,
			 const char *name)
{
	struct bpf_program *prog;
	size_t count = 0, cuda = 0;
	char valid[1024];

	bpf_object__for_each_program(prog, program->obj) {
		count++;
		cuda += cuda_section(bpf_program__section_name(prog)) ||
			device_section(bpf_program__section_name(prog));
	}
	if (!cuda)
		return fail(opts, -ENOENT, "%s: no CUDA programs: put them in SEC(\"cuda/FAMILY\") or SEC(\"cuda.return/FAMILY\"), or for the GPU in SEC(\"gpu/GLOB\") or SEC(\"gpu.exit/GLOB\")%s%s",
			    name, count ? "; found sections such as " : "",
			    count ? bpf_program__section_name(bpf_object__next_program(program->obj, NULL)) : "");
	program->bindings = calloc(count, sizeof(*program->bindings));
	program->devices = calloc(count, sizeof(*program->devices));
	if (!program->bindings || !program->devices)
		return fail(opts, -ENOMEM, "out of memory");
	bpf_object__for_each_program(prog, program->obj) {
		struct cp_program_binding *binding = &program->bindings[program->binding_count];
		const char *section = bpf_program__section_name(prog);

		if (device_section(section)) {
			struct cp_device_program *device = &program->devices[program->device_count];

			if (!parse_device_section(section, &device->glob, &device->at_exit))
				return fail(opts, -EINVAL, "%s: program %s: unknown section \"%s\"; device programs go in " DEVICE_FORMS " (GLOB: a kernel's name, or a pattern)",
					    name, bpf_program__name(prog), section);
			device->program = bpf_program__name(prog);
			device->section = section;
			snprintf(device->function, sizeof(device->function), "__cuprobe_gpu_%s",
				 device->program);
			program->device_count++;
			continue;
		}
		if (!parse_section(section, &binding->family, &binding->retprobe)) {
			valid_sections(valid, sizeof(valid));
			return fail(opts, -EINVAL, "%s: program %s: unknown section \"%s\"; valid: %s",
				    name, bpf_program__name(prog), section, valid);
		}
		binding->program = bpf_program__name(prog);
		program->binding_count++;
	}
	return 0;
}

/* True when the runtime was given targets (COMMAND, -p): not system-wide. */
static bool filtering(const struct cp_tracer *tracer)
{
	struct cuprobe_config config = { 0 };
	__u32 zero = 0;

	return !bpf_map_lookup_elem(bpf_map__fd(tracer->skel->maps.cuprobe_config), &zero, &config) &&
	       config.filter_by_pid;
}

/* Does the loaded prog read map (its ids, as the kernel keeps them)? */
static bool uses_map(const struct bpf_program *prog, const struct bpf_map *map)
{
	struct bpf_map_info map_info = { 0 };
	struct bpf_prog_info info = { 0 };
	__u32 ids[64], len = sizeof(info), map_len = sizeof(map_info), i;

	info.nr_map_ids = sizeof(ids) / sizeof(ids[0]);
	info.map_ids = (__u64)(unsigned long)ids;
	if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) ||
	    bpf_obj_get_info_by_fd(bpf_map__fd(map), &map_info, &map_len))
		return true; /* cannot tell: no warning */
	for (i = 0; i < info.nr_map_ids && i < sizeof(ids) / sizeof(ids[0]); i++)
		if (ids[i] == map_info.id)
			return true;
	return info.nr_map_ids > sizeof(ids) / sizeof(ids[0]);
}

/*
 * The target filter is in the programs (CUDA_PROG, cuprobe_traced()): a
 * program that never reads cuprobe_targets sees every process. Said once
 * per program, as a warning, when there are targets.
 */
static void warn_unfiltered(const struct cp_program *program)
{
	struct cp_tracer *tracer = program->tracer;
	struct bpf_program *prog;

	if (!filtering(tracer))
		return;
	bpf_object__for_each_program(prog, program->obj)
		if (!device_section(bpf_program__section_name(prog)) &&
		    !uses_map(prog, tracer->skel->maps.cuprobe_targets))
			cp_tracer__log(tracer, CP_LOG_WARN,
				       "program %s does not check cuprobe_traced(): it sees every process, not only the targets (use CUDA_PROG or CUDA_RETURN_PROG)",
				       bpf_program__name(prog));
}

/*
 * Each device program, as the kernel verified it (map fds in, subprograms
 * appended), translated to PTX; one that cannot be is refused in one line.
 */
static int translate_devices(struct cp_program *program, const struct cp_program_opts *opts,
			     const char *name)
{
	struct bpf_map *map;
	size_t i, count = 0;
	char error[512];
	bool *used;
	int err;

	if (!program->device_count)
		return 0;
	bpf_object__for_each_map(map, program->obj)
		count++;
	program->device_maps = calloc(count ? count : 1, sizeof(*program->device_maps));
	program->device_map_used = calloc(count ? count : 1, sizeof(*program->device_map_used));
	used = calloc(count ? count : 1, sizeof(*used));
	if (!program->device_maps || !program->device_map_used || !used) {
		free(used);
		return fail(opts, -ENOMEM, "out of memory");
	}
	bpf_object__for_each_map(map, program->obj)
		program->device_maps[program->device_map_count++] = (struct cp_ptx_map){
			.name = bpf_map__name(map), .fd = bpf_map__fd(map), .type = bpf_map__type(map),
			.flags = bpf_map__map_flags(map), .key_size = bpf_map__key_size(map),
			.value_size = bpf_map__value_size(map), .max_entries = bpf_map__max_entries(map) };
	for (i = 0; i < program->device_count; i++) {
		struct cp_device_program *device = &program->devices[i];
		const struct bpf_program *prog =
			bpf_object__find_program_by_name(program->obj, device->program);
		struct cp_ptx_program ptx = {
			.name = device->function,
			.insns = prog ? bpf_program__insns(prog) : NULL,
			.insn_count = prog ? bpf_program__insn_cnt(prog) : 0,
			.maps = program->device_maps, .map_count = program->device_map_count,
		};
		size_t m;

		err = cp_ptx__translate(&ptx, &device->ptx, used, error, sizeof(error));
		if (err) {
			free(used);
			return fail(opts, err, "%s: device program %s: %s", name, device->program, error);
		}
		for (m = 0; m < program->device_map_count; m++)
			program->device_map_used[m] |= used[m];
		device->uses_shadow = cp_ptx__uses_shadow(device->ptx);
	}
	free(used);
	return 0;
}

struct cp_program *cp_tracer__load_program(struct cp_tracer *tracer, const void *elf, size_t size,
					   const struct cp_program_opts *caller_opts)
{
	struct cp_program_opts known;
	const struct cp_program_opts *opts = &known;
	struct cp_program *program = NULL;
	struct bpf_program *prog;
	struct bpf_map *map;
	const char *name;
	int err;

	if (!tracer || !elf || CP_OPTS_COPY(known, caller_opts)) {
		errno = EINVAL;
		return NULL;
	}
	name = opts->name ? opts->name : "program";
	if (opts->error && opts->error_size)
		opts->error[0] = '\0';
	if (tracer->probe_count) {
		/* Files already attached would miss the program. */
		err = fail(opts, -EBUSY, "%s: programs are loaded before any library is attached", name);
		goto err_out;
	}
	err = check_elf(elf, size, opts, name);
	if (err)
		goto err_out;
	program = calloc(1, sizeof(*program));
	if (!program || !(program->elf = malloc(size))) {
		err = fail(opts, -ENOMEM, "out of memory");
		goto err_out;
	}
	memcpy(program->elf, elf, size);
	program->elf_size = size;
	program->tracer = tracer;
	snprintf(program->object_name, sizeof(program->object_name), "cuprobe_run");
	if (!has_btf(program->elf, size)) {
		err = fail(opts, -ENOENT, "%s: no BTF (compile with -g): cuprobe needs it to print", name);
		goto err_out;
	}
	program->obj = open_object(program);
	if (!program->obj) {
		err = fail(opts, -errno, "%s: cannot open the BPF object: %s", name, strerror(errno));
		goto err_out;
	}
	if (!bpf_object__btf(program->obj)) { /* a .BTF libbpf could not use */
		err = fail(opts, -ENOENT, "%s: no BTF (compile with -g): cuprobe needs it to print", name);
		goto err_out;
	}
	err = bind_programs(program, opts, name);
	if (err)
		goto err_out;
	prepare_programs(program, program->obj, tracer->use_multi, false);
	err = apply_settings(program, opts, name);
	if (err)
		goto err_out;
	bpf_object__for_each_map(map, program->obj)
		if (shared_map(map) && !bpf_object__find_map_by_name(tracer->skel->obj, bpf_map__name(map))) {
			err = fail(opts, -EINVAL, "%s: map %s: names cuprobe_* are the runtime's maps (cuprobe.bpf.h); rename it",
				   name, bpf_map__name(map));
			goto err_out;
		}
	err = reuse_maps(program->obj, tracer->skel->obj, false);
	if (err) {
		err = fail(opts, err, "%s: cannot share the runtime's maps: %s", name, strerror(-err));
		goto err_out;
	}
	if (opts->log_buf && opts->log_size) {
		opts->log_buf[0] = '\0';
		bpf_object__for_each_program(prog, program->obj)
			bpf_program__set_log_buf(prog, opts->log_buf, opts->log_size);
	}
	err = bpf_object__load(program->obj);
	if (err) {
		bool refused = opts->log_buf && opts->log_size && opts->log_buf[0];

		err = fail(opts, err, "%s: %s: %s", name,
			   refused ? "the kernel's verifier refused it" : "cannot load it",
			   strerror(-err));
		goto err_out;
	}
	err = translate_devices(program, opts, name);
	if (err)
		goto err_out;
	err = describe(program, opts);
	if (err)
		goto err_out;
	warn_unfiltered(program);
	if (CP_ARRAY_RESERVE(tracer->programs, tracer->program_capacity, tracer->program_count + 1, 4)) {
		err = fail(opts, -ENOMEM, "out of memory");
		goto err_out;
	}
	tracer->programs[tracer->program_count++] = program;
	return program;

err_out:
	free_program(program);
	errno = -err;
	return NULL;
}

/*
 * A twin of the program loaded for classic uprobes, every map shared with
 * the first: for files whose uprobe_multi attach the kernel refuses.
 */
int cp_program__ensure_classic(struct cp_program *program)
{
	struct bpf_object *classic;
	int err;

	if (program->classic_obj || !program->tracer->use_multi)
		return 0;
	classic = open_object(program);
	if (!classic)
		return -errno;
	prepare_programs(program, classic, false, true);
	err = reuse_maps(classic, program->obj, true);
	if (!err)
		err = bpf_object__load(classic);
	if (err) {
		bpf_object__close(classic);
		return err;
	}
	program->classic_obj = classic;
	return 0;
}

/* ---- what the printer reads ----------------------------------------------------------- */

const struct btf *cp_program__btf(const struct cp_program *program)
{
	return program ? bpf_object__btf(program->obj) : NULL;
}

size_t cp_program__ring_count(const struct cp_program *program)
{
	return program ? program->ring_count : 0;
}

int cp_program__ring(const struct cp_program *program, size_t index, struct cp_program_ring_info *out)
{
	const struct cp_program_ring *ring;

	if (!program || index >= program->ring_count || !out)
		return -EINVAL;
	ring = &program->rings[index];
	memset(out, 0, sizeof(*out));
	out->name = ring->name;
	out->fd = ring->fd;
	out->type_id = ring->type_id;
	out->record_size = ring->record_size;
	/* The BPF side's loss counter, in the object's .bss as the kernel holds it now. */
	if (program->bss && ring->lost_offset >= 0 &&
	    (size_t)ring->lost_offset + sizeof(out->lost) <= bpf_map__value_size(program->bss)) {
		__u32 zero = 0;
		char *bss = malloc(bpf_map__value_size(program->bss));

		if (bss && !bpf_map_lookup_elem(bpf_map__fd(program->bss), &zero, bss)) {
			memcpy(&out->lost, bss + ring->lost_offset, sizeof(out->lost));
			out->lost_counted = true;
		}
		free(bss);
	}
	return 0;
}

size_t cp_program__map_count(const struct cp_program *program)
{
	return program ? program->map_count : 0;
}

int cp_program__map(const struct cp_program *program, size_t index, struct cp_program_map_info *out)
{
	struct bpf_map *map;

	if (!program || index >= program->map_count || !out)
		return -EINVAL;
	map = program->maps[index];
	memset(out, 0, sizeof(*out));
	out->name = bpf_map__name(map);
	out->type = bpf_map__type(map);
	out->fd = bpf_map__fd(map);
	out->key_size = bpf_map__key_size(map);
	out->value_size = bpf_map__value_size(map);
	out->max_entries = bpf_map__max_entries(map);
	out->key_type_id = bpf_map__btf_key_type_id(map);
	out->value_type_id = bpf_map__btf_value_type_id(map);
	out->per_cpu = out->type == BPF_MAP_TYPE_PERCPU_HASH || out->type == BPF_MAP_TYPE_PERCPU_ARRAY ||
		       out->type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
	return 0;
}

static bool readable_type(enum bpf_map_type type)
{
	switch (type) {
	case BPF_MAP_TYPE_HASH:
	case BPF_MAP_TYPE_ARRAY:
	case BPF_MAP_TYPE_LRU_HASH:
	case BPF_MAP_TYPE_PERCPU_HASH:
	case BPF_MAP_TYPE_PERCPU_ARRAY:
	case BPF_MAP_TYPE_LRU_PERCPU_HASH:
	case BPF_MAP_TYPE_STACK_TRACE:
	case BPF_MAP_TYPE_LPM_TRIE:
		return true;
	default:
		return false;
	}
}

/* Reads a map a batch at a time: memory bounded by the batch, whatever the map's size. */
struct cp_map_reader {
	struct cp_program_map_info info;
	size_t value_bytes;        /* one entry's value: every CPU's copy of a per-CPU map */
	size_t batch;              /* entries a call reads at most */
	bool skip_zero;            /* an array's all-zero entries are left out */
	bool by_batch;             /* BPF_MAP_LOOKUP_BATCH (arrays); else key by key */
	bool started, done;
	size_t visited;            /* keys walked: a map whose keys churn still ends */
	struct cp_map_entries entries; /* the current batch */
	unsigned char *key, *next; /* key by key: where the walk is */
	__u32 token;               /* by batch: where the next batch starts (an array's index) */
};

static bool batch_readable(enum bpf_map_type type)
{
	/* Arrays only: a hash map's batch fails with ENOSPC on a bucket larger than the batch. */
	return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

struct cp_map_reader *cp_program__map_reader(const struct cp_program *program, size_t index,
					     const struct cp_map_reader_opts *caller_opts)
{
	struct cp_map_reader_opts opts;
	struct cp_map_reader *reader;
	size_t cpus = 1, batch_bytes;
	int err, possible;

	if (CP_OPTS_COPY(opts, caller_opts)) {
		errno = EINVAL;
		return NULL;
	}
	reader = calloc(1, sizeof(*reader));
	if (!reader) {
		errno = ENOMEM;
		return NULL;
	}
	err = cp_program__map(program, index, &reader->info);
	if (!err && !readable_type(reader->info.type))
		err = -EOPNOTSUPP;
	if (!err && reader->info.per_cpu) {
		possible = libbpf_num_possible_cpus();
		err = possible > 0 ? 0 : possible ? possible : -EINVAL;
		cpus = possible > 0 ? (size_t)possible : 1;
	}
	if (err)
		goto err_out;
	/* Per-CPU values come one per possible CPU, each rounded up to 8 bytes. */
	reader->entries.key_size = reader->info.key_size;
	reader->entries.value_size = reader->info.value_size;
	reader->entries.value_stride = reader->info.per_cpu ? (reader->info.value_size + 7) & ~7u :
				       reader->info.value_size;
	reader->entries.cpus = cpus;
	reader->value_bytes = cpus * reader->entries.value_stride;
	batch_bytes = opts.batch_bytes ? opts.batch_bytes : 1u << 20;
	reader->batch = batch_bytes / (reader->info.key_size + reader->value_bytes);
	if (!reader->batch)
		reader->batch = 1;
	if (reader->info.max_entries && reader->batch > reader->info.max_entries)
		reader->batch = reader->info.max_entries;
	reader->skip_zero = opts.skip_zero && batch_readable(reader->info.type);
	reader->by_batch = batch_readable(reader->info.type);
	reader->entries.keys = calloc(reader->batch, reader->info.key_size);
	reader->entries.values = calloc(reader->batch, reader->value_bytes);
	reader->key = calloc(2, reader->info.key_size);
	if (!reader->entries.keys || !reader->entries.values || !reader->key) {
		err = -ENOMEM;
		goto err_out;
	}
	reader->next = reader->key + reader->info.key_size;
	return reader;

err_out:
	cp_map_reader__free(reader);
	errno = -err;
	return NULL;
}

/* Up to reader->batch entries with BPF_MAP_LOOKUP_BATCH: 0, or -errno. */
static int read_batch(struct cp_map_reader *reader)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	__u32 count = reader->batch, next_token;
	int err;

	err = bpf_map_lookup_batch(reader->info.fd, reader->started ? &reader->token : NULL,
				   &next_token, reader->entries.keys, reader->entries.values, &count,
				   &opts);
	reader->started = true;
	if (err && errno != ENOENT)
		return -errno;
	/* ENOENT: the last entries (count of them) are in, or there were none left. */
	reader->done = err || !count;
	reader->token = next_token;
	reader->entries.count = count;
	return 0;
}

/* Up to reader->batch entries, a key and a lookup each: 0, or -errno. */
static int read_by_key(struct cp_map_reader *reader)
{
	const size_t key_size = reader->info.key_size;
	size_t limit = reader->info.max_entries;
	int err;

	reader->entries.count = 0;
	while (reader->entries.count < reader->batch) {
		err = bpf_map_get_next_key(reader->info.fd, reader->started ? reader->key : NULL,
					   reader->next);
		reader->started = true;
		if (err || (limit && reader->visited >= limit)) {
			reader->done = true;
			return err && errno != ENOENT ? -errno : 0;
		}
		reader->visited++;
		memcpy(reader->key, reader->next, key_size);
		/* A key deleted meanwhile is skipped. */
		if (!bpf_map_lookup_elem(reader->info.fd, reader->key,
					 reader->entries.values + reader->entries.count * reader->value_bytes)) {
			memcpy(reader->entries.keys + reader->entries.count * key_size, reader->key,
			       key_size);
			reader->entries.count++;
		}
	}
	return 0;
}

static bool all_zero(const unsigned char *bytes, size_t len)
{
	return !len || (!bytes[0] && !memcmp(bytes, bytes + 1, len - 1));
}

/* Removes the batch's all-zero values, keeping the order. */
static void drop_zero_values(struct cp_map_reader *reader)
{
	struct cp_map_entries *e = &reader->entries;
	size_t i, kept = 0;

	for (i = 0; i < e->count; i++) {
		if (all_zero(e->values + i * reader->value_bytes, reader->value_bytes))
			continue;
		if (kept != i) {
			memcpy(e->keys + kept * e->key_size, e->keys + i * e->key_size, e->key_size);
			memcpy(e->values + kept * reader->value_bytes, e->values + i * reader->value_bytes,
			       reader->value_bytes);
		}
		kept++;
	}
	e->count = kept;
}

int cp_map_reader__next(struct cp_map_reader *reader, struct cp_map_entries *out)
{
	int err;

	if (!reader || !out)
		return -EINVAL;
	reader->entries.count = 0;
	/* A batch of zeros is not the end: read on until an entry or the end. */
	while (!reader->entries.count && !reader->done) {
		err = reader->by_batch ? read_batch(reader) : read_by_key(reader);
		if (err)
			return err;
		if (reader->skip_zero)
			drop_zero_values(reader);
	}
	*out = reader->entries;
	return (int)(reader->entries.count < INT_MAX ? reader->entries.count : INT_MAX);
}

void cp_map_reader__free(struct cp_map_reader *reader)
{
	if (!reader)
		return;
	free(reader->entries.keys);
	free(reader->entries.values);
	free(reader->key);
	free(reader);
}

/* ---- device programs, for the injection and --ptx ------------------------------------------ */

int cp_program__elf_has_device_programs(const void *elf, size_t size)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts, .object_name = "cuprobe_scan");
	struct bpf_object *obj;
	struct bpf_program *prog;
	int found = 0;

	if (!elf || !size)
		return -EINVAL;
	obj = bpf_object__open_mem(elf, size, &open_opts);
	if (!obj)
		return -errno;
	bpf_object__for_each_program(prog, obj)
		found |= device_section(bpf_program__section_name(prog));
	bpf_object__close(obj);
	return found;
}

size_t cp_program__device_count(const struct cp_program *program)
{
	return program ? program->device_count : 0;
}

int cp_program__device(const struct cp_program *program, size_t index,
		       struct cp_device_program_info *out)
{
	const struct cp_device_program *device;

	if (!program || index >= program->device_count || !out)
		return -EINVAL;
	device = &program->devices[index];
	*out = (struct cp_device_program_info){
		.name = device->program, .section = device->section, .glob = device->glob,
		.at_exit = device->at_exit, .uses_shadow = device->uses_shadow,
		.function = device->function, .ptx = device->ptx };
	return 0;
}

size_t cp_program__device_map_count(const struct cp_program *program)
{
	return program ? program->device_map_count : 0;
}

int cp_program__device_map(const struct cp_program *program, size_t index,
			   struct cp_device_map_info *out)
{
	const struct cp_ptx_map *map;

	if (!program || index >= program->device_map_count || !out)
		return -EINVAL;
	map = &program->device_maps[index];
	*out = (struct cp_device_map_info){
		.name = map->name, .fd = map->fd, .flags = map->flags, .value_size = map->value_size,
		.max_entries = map->max_entries, .used = program->device_map_used[index] };
	return 0;
}

int cp_program__ptx_module(const struct cp_program *program, char **ptx)
{
	struct cp_ptx_function *functions;
	size_t i;
	int err;

	if (!program || !ptx)
		return -EINVAL;
	functions = calloc(program->device_count ? program->device_count : 1, sizeof(*functions));
	if (!functions)
		return -ENOMEM;
	for (i = 0; i < program->device_count; i++)
		functions[i] = (struct cp_ptx_function){ .name = program->devices[i].function,
							 .section = program->devices[i].section,
							 .ptx = program->devices[i].ptx };
	err = cp_ptx__module(functions, program->device_count, program->device_maps,
			     program->device_map_used, program->device_map_count, ptx);
	free(functions);
	return err;
}
