// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Map declarations and the module --ptx prints (ptx_jit.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_jit_internal.h"

bool cp_ptx_identifier(const char *name)
{
	size_t i;

	if (!name || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
		       name[0] == '_' || name[0] == '$'))
		return false;
	for (i = 0; name[i]; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '_' || name[i] == '$'))
			return false;
	return i < 120;
}

unsigned int cp_ptx__shadow_replicas(uint32_t value_size, uint32_t max_entries)
{
	struct cp_ptx_map shape = { .value_size = value_size, .max_entries = max_entries };
	uint64_t words = cp_jit_shadow_bytes(&shape) / 8;

	if (!words || words > CP_PTX_SHADOW_MAX_WORDS)
		return 0;
	/*
	 * At most 128 values in all (a drain copies and sums replicas x words),
	 * and a power of two: a thread picks its copy by %smid & (replicas - 1)
	 * (ptxas turned `rem` into a division).
	 */
	unsigned int replicas = (unsigned int)(CP_PTX_SHADOW_MAX_WORDS / words);

	while (replicas & (replicas - 1))
		replicas &= replicas - 1;
	return replicas;
}

bool cp_ptx__uses_shadow(const char *ptx)
{
	/* The translator names a shadow only where it moves an add into one, a ring's segments where it writes them. */
	return ptx && (strstr(ptx, CP_PTX_SHADOW_PREFIX) || strstr(ptx, CP_PTX_RING_CONTROL_PREFIX));
}

static bool named(const struct cp_ptx_map *map, const char *name, size_t len)
{
	return map->name && strlen(map->name) == len && !strncmp(map->name, name, len);
}

bool cp_ptx__ring_of(const struct cp_ptx_map *maps, size_t count, size_t m, struct cp_ptx_ring *ring)
{
	static const char suffix[] = "__control";
	const struct cp_ptx_map *control = NULL, *slots = NULL;
	size_t i, len, base;

	if (!maps || m >= count || !maps[m].name)
		return false;
	len = strlen(maps[m].name);
	if (len > strlen(suffix) && !strcmp(maps[m].name + len - strlen(suffix), suffix)) {
		base = len - strlen(suffix);
		for (i = 0; i < count && !slots; i++)
			if (named(&maps[i], maps[m].name, base))
				ring->slots = i, ring->control = m, slots = &maps[i], control = &maps[m];
	} else {
		for (i = 0; i < count && !control; i++)
			if (maps[i].name && strlen(maps[i].name) == len + strlen(suffix) &&
			    !strncmp(maps[i].name, maps[m].name, len) &&
			    !strcmp(maps[i].name + len, suffix))
				ring->control = i, ring->slots = m, control = &maps[i], slots = &maps[m];
	}
	if (!control || control->type != BPF_MAP_TYPE_ARRAY || slots->type != BPF_MAP_TYPE_ARRAY ||
	    control->value_size != sizeof(struct cuprobe_gpu_ring_control) || control->max_entries != 1 ||
	    slots->value_size <= sizeof(struct cuprobe_gpu_ring_slot) || !slots->max_entries ||
	    (slots->max_entries & (slots->max_entries - 1)))
		return false;
	ring->segments = CUPROBE_GPU_RING_SEGMENTS(slots->max_entries);
	ring->segment_slots = CUPROBE_GPU_RING_SEGMENT_SLOTS(slots->max_entries);
	ring->slot_bytes = (slots->value_size + 7) & ~7u;
	ring->control_stride = (sizeof(struct cuprobe_gpu_ring_control) + 127) / 128 * 128;
	ring->slots_stride = ((uint64_t)ring->segment_slots * ring->slot_bytes + 127) / 128 * 128;
	return true;
}

unsigned int cp_jit_shadow_replicas(const struct cp_ptx_map *map)
{
	/* A map programs cannot write (.rodata, frozen) has nothing to add into. */
	if ((map->flags & BPF_F_RDONLY_PROG) || map->without_shadow)
		return 0;
	return cp_ptx__shadow_replicas(map->value_size, map->max_entries);
}

uint64_t cp_jit_shadow_bytes(const struct cp_ptx_map *map)
{
	/* An array's values are value_size rounded up to 8, one after the other. */
	return ((uint64_t)map->value_size + 7) / 8 * 8 * map->max_entries;
}

/* Bytes between two replicas: whole 128-byte lines, so that SMs never share one. */
uint64_t cp_jit_shadow_stride(const struct cp_ptx_map *map)
{
	return (cp_jit_shadow_bytes(map) + 127) / 128 * 128;
}

uint64_t cp_ptx__shadow_stride(uint32_t value_size, uint32_t max_entries)
{
	struct cp_ptx_map shape = { .value_size = value_size, .max_entries = max_entries };

	return cp_jit_shadow_stride(&shape);
}

/* The shadow of map index, when it has one. */
static void declare_shadow(FILE *out, size_t index, const struct cp_ptx_map *map)
{
	unsigned int replicas = cp_jit_shadow_replicas(map);

	/* The layout said: for readers of --ptx (and the simulated driver). */
	if (replicas)
		fprintf(out, ".weak .global .align 128 .b8 " CP_PTX_SHADOW_PREFIX "%zu[%llu];"
			"\t// %u copies of %llu words, %llu bytes apart\n", index,
			(unsigned long long)(replicas * cp_jit_shadow_stride(map)), replicas,
			(unsigned long long)(cp_jit_shadow_bytes(map) / 8),
			(unsigned long long)cp_jit_shadow_stride(map));
}

/* A ring's segments, with its control map (both maps declared). */
static bool declare_ring(FILE *out, const struct cp_ptx_map *maps, const bool *declare, size_t count,
			 size_t index)
{
	struct cp_ptx_ring ring;

	if (!cp_ptx__ring_of(maps, count, index, &ring) || ring.control != index ||
	    (declare && !declare[ring.slots]))
		return false;
	/* The layout said: for readers of --ptx (and the simulated driver). */
	if (out) {
		fprintf(out, ".weak .global .align 128 .b8 " CP_PTX_RING_CONTROL_PREFIX "%zu[%llu];"
			"\t// ring of maps %zu and %zu: %u segments of %u slots of %u bytes, %llu bytes apart\n",
			ring.control, (unsigned long long)(ring.segments * ring.control_stride),
			ring.control, ring.slots, ring.segments, ring.segment_slots, ring.slot_bytes,
			(unsigned long long)ring.slots_stride);
		fprintf(out, ".weak .global .align 128 .b8 " CP_PTX_RING_SLOTS_PREFIX "%zu[%llu];"
			"\t// control blocks %llu bytes apart\n", ring.slots,
			(unsigned long long)(ring.segments * ring.slots_stride),
			(unsigned long long)ring.control_stride);
	}
	return true;
}

static bool any_shadow(const struct cp_ptx_map *shapes, const bool *declare, size_t count)
{
	size_t i;

	for (i = 0; shapes && i < count; i++)
		if ((!declare || declare[i]) &&
		    (cp_jit_shadow_replicas(&shapes[i]) || declare_ring(NULL, shapes, declare, count, i)))
			return true;
	return false;
}

/* One declaration; a comment after it when named. */
static void declare_map(FILE *out, size_t index, uint64_t address, const struct cp_ptx_map *map)
{
	fprintf(out, ".const .align 8 .u64 __cuprobe_map_%zu = %llu;", index,
		(unsigned long long)address);
	if (map && map->name)
		fprintf(out, "\t// %s: %u x %u bytes", map->name, map->max_entries, map->value_size);
	fputc('\n', out);
}

int cp_ptx__map_declarations(const uint64_t *addresses, const struct cp_ptx_map *shapes,
			     const bool *declare, size_t count, char **ptx, bool *shadowed)
{
	bool shadows = any_shadow(shapes, declare, count);
	char *text = NULL;
	size_t len = 0, i;
	FILE *out;

	if (!ptx || (count && !addresses))
		return -EINVAL;
	*ptx = NULL;
	if (shadowed)
		*shadowed = shadows;
	out = open_memstream(&text, &len);
	if (!out)
		return -ENOMEM;
	for (i = 0; i < count; i++)
		if (!declare || declare[i]) {
			declare_map(out, i, addresses[i], NULL);
			if (shapes && !declare_ring(out, shapes, declare, count, i) &&
			    !cp_ptx__ring_of(shapes, count, i, &(struct cp_ptx_ring){ 0 }))
				declare_shadow(out, i, &shapes[i]);
		}
	if (fclose(out)) {
		free(text);
		return -ENOMEM;
	}
	*ptx = text;
	return 0;
}

int cp_ptx__module(const struct cp_ptx_function *functions, size_t count,
		   const struct cp_ptx_map *maps, const bool *maps_used, size_t map_count,
		   char **ptx)
{
	char *text = NULL;
	size_t len = 0, i;
	FILE *out;
	int err = 0;

	if (!ptx || (count && !functions) || (map_count && !maps))
		return -EINVAL;
	*ptx = NULL;
	out = open_memstream(&text, &len);
	if (!out)
		return -ENOMEM;
	fprintf(out,
		"//\n// Device programs translated from verified BPF by cuprobe: each function's\n"
		"// body is what goes into the matching kernels, inline, each in a block; the\n"
		"// maps' addresses (0 here) and that placing are the injection's.\n//\n\n"
		".version " CP_PTX_VERSION "\n.target " CP_PTX_TARGET "\n.address_size 64\n\n");
	for (i = 0; i < map_count; i++)
		if (!maps_used || maps_used[i]) {
			declare_map(out, i, 0, &maps[i]);
			if (!declare_ring(out, maps, maps_used, map_count, i) &&
			    !cp_ptx__ring_of(maps, map_count, i, &(struct cp_ptx_ring){ 0 }))
				declare_shadow(out, i, &maps[i]);
		}
	fputc('\n', out);
	for (i = 0; i < count; i++) {
		if (!functions[i].ptx || !cp_ptx_identifier(functions[i].name)) {
			err = -EINVAL;
			break;
		}
		fprintf(out, "// %s: SEC(\"%s\")\n%s", functions[i].name,
			functions[i].section ? functions[i].section : "?", functions[i].ptx);
	}
	fputs("// Calls each function once, without a launch slot: for ptxas.\n"
	      ".visible .entry __cuprobe_check ()\n{\n\t.reg .b64 %slot;\n\tmov.u64 %slot, 0;\n", out);
	for (i = 0; !err && i < count; i++)
		fprintf(out, "\t{\n\t.param .b64 __cuprobe_p;\n\tst.param.b64 [__cuprobe_p], %%slot;\n"
			"\tcall %s, (__cuprobe_p);\n\t}\n", functions[i].name);
	fputs("\tret;\n}\n", out);
	if (fclose(out) && !err)
		err = -ENOMEM;
	if (err) {
		free(text);
		return err;
	}
	*ptx = text;
	return 0;
}

char *cp_ptx__inline_block(const char *functions, const char *name)
{
	static const char ret[] = "\tret;\n", branch[] = "\tbra.uni $__cuprobe_return;\n";
	char *header, *text = NULL;
	const char *at, *body, *end, *line;
	size_t size = 0;
	FILE *out;

	if (!functions || !name || asprintf(&header, ".func %s (.param .b64 __cuprobe_launch)\n{\n",
					    name) < 0)
		return NULL;
	/* The translator's own text: the header at a line's start, the body up to a '}' alone at column 0. */
	for (at = strstr(functions, header); at && at != functions && at[-1] != '\n';)
		at = strstr(at + 1, header);
	body = at ? at + strlen(header) : NULL;
	free(header);
	end = body ? strstr(body - 1, "\n}\n") : NULL;
	if (!end || !(out = open_memstream(&text, &size)))
		return NULL;
	fputs("\t{\n", out);
	for (line = body; line <= end; line = strchr(line, '\n') + 1) {
		size_t len = (size_t)(strchr(line, '\n') - line) + 1;

		if (len == sizeof(ret) - 1 && !memcmp(line, ret, len))
			fputs(branch, out);
		else
			fwrite(line, 1, len, out);
	}
	fputs("$__cuprobe_return:\n\t}\n", out);
	if (fclose(out)) {
		free(text);
		return NULL;
	}
	return text;
}
