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
	/* The last warp moves replicas x words values: at most 128, four a lane. */
	return (unsigned int)(CP_PTX_SHADOW_MAX_WORDS / words);
}

bool cp_ptx__uses_shadow(const char *ptx)
{
	/* The translator names a shadow only where it moves an add into one. */
	return ptx && strstr(ptx, "__cuprobe_shadow_");
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

static uint64_t shadow_words(const struct cp_ptx_map *map)
{
	return cp_jit_shadow_bytes(map) / 8;
}

/* The moves of one map's replicas, by the launch's last warp (emit_launch_functions). */
static void emit_map_move(FILE *out, size_t i, const struct cp_ptx_map *map)
{
	unsigned int replicas = cp_ptx__shadow_replicas(map->value_size, map->max_entries);
	unsigned long long words = shadow_words(map), stride = cp_jit_shadow_stride(map);

	fprintf(out, "\t// map %zu: %u replicas of %llu words\n", i, replicas, words);
	fprintf(out, "\tmov.u64 %%e3, __cuprobe_shadow_%zu;\n\tcvta.global.u64 %%e3, %%e3;\n", i);
	fprintf(out, "\tld.const.u64 %%e4, [__cuprobe_map_%zu];\n", i);
	/* Replicas 1.. into replica 0, value k of them by the lane of rank k mod lanes. */
	fprintf(out, "\tmov.u32 %%f9, %%f8;\n$m%zu_gather:\n", i);
	fprintf(out, "\tsetp.ge.u32 %%q1, %%f9, %llu;\n\t@%%q1 bra $m%zu_gathered;\n",
		words * (replicas - 1), i);
	fprintf(out, "\tdiv.u32 %%f10, %%f9, %llu;\n\trem.u32 %%f11, %%f9, %llu;\n"
		     "\tadd.u32 %%f10, %%f10, 1;\n", words, words);
	fprintf(out, "\tmul.wide.u32 %%e5, %%f10, %llu;\n\tmul.wide.u32 %%e6, %%f11, 8;\n", stride);
	fputs("\tadd.u64 %e5, %e5, %e3;\n\tadd.u64 %e5, %e5, %e6;\n"
	      "\tatom.exch.b64 %e7, [%e5], 0;\n"
	      "\tsetp.ne.u64 %q2, %e7, 0;\n\tadd.u64 %e6, %e6, %e3;\n"
	      "\t@%q2 atom.add.u64 %e8, [%e6], %e7;\n"
	      "\tadd.u32 %f9, %f9, %f1;\n", out);
	fprintf(out, "\tbra $m%zu_gather;\n$m%zu_gathered:\n", i, i);
	/* Every lane's adds done (they returned) before replica 0 moves. */
	fputs("\tbar.warp.sync %f0;\n\tmov.u32 %f9, %f8;\n", out);
	fprintf(out, "$m%zu_move:\n\tsetp.ge.u32 %%q1, %%f9, %llu;\n\t@%%q1 bra $m%zu_moved;\n",
		i, words, i);
	/* Replica 0 into the map: one host atomic a word that moved. */
	fputs("\tmul.wide.u32 %e6, %f9, 8;\n\tadd.u64 %e5, %e6, %e3;\n"
	      "\tatom.exch.b64 %e7, [%e5], 0;\n"
	      "\tsetp.ne.u64 %q2, %e7, 0;\n\tadd.u64 %e6, %e6, %e4;\n"
	      "\t@%q2 red.add.u64 [%e6], %e7;\n"
	      "\tadd.u32 %f9, %f9, %f1;\n", out);
	fprintf(out, "\tbra $m%zu_move;\n$m%zu_moved:\n", i, i);
}

/*
 * The launch's start (the block's count of finished threads set to 0,
 * before any thread can finish) and end: each warp counts its lanes out;
 * the last warp of a block counts the block out of its group, the last
 * block of a group the group out of its launch (counters by slot); the
 * last warp of the launch moves every replica's values into the map.
 * Fences: a warp's adds reach the device before its count (cta, then gpu
 * in the block's last warp); the moves reach the host before the launch
 * is done (sys).
 */
static void emit_launch_functions(FILE *out, const struct cp_ptx_map *shapes, const bool *declare,
				  size_t count)
{
	size_t i;

	fprintf(out, ".shared .align 4 .u32 __cuprobe_block_exits;\n"
		".global .align 4 .u32 __cuprobe_blocks_done[%u];\n"
		".global .align 4 .u32 __cuprobe_groups_done[%u];\n\n",
		CP_PTX_LAUNCH_COUNTERS * CP_PTX_LAUNCH_GROUPS, CP_PTX_LAUNCH_COUNTERS);
	fputs(".func " CP_PTX_LAUNCH_START " ()\n{\n"
	      "\t.reg .b32 %s<3>;\n\t.reg .pred %sp;\n"
	      "\tmov.u32 %s0, %tid.x;\n\tmov.u32 %s1, %tid.y;\n\tor.b32 %s0, %s0, %s1;\n"
	      "\tmov.u32 %s1, %tid.z;\n\tor.b32 %s0, %s0, %s1;\n"
	      "\tsetp.eq.u32 %sp, %s0, 0;\n\tmov.u32 %s2, 0;\n"
	      "\t@%sp st.shared.u32 [__cuprobe_block_exits], %s2;\n"
	      "\tbar.sync 0;\n\tret;\n}\n\n", out);
	fputs(".func " CP_PTX_LAUNCH_END " (.param .b64 __cuprobe_launch)\n{\n"
	      "\t.reg .b64 %e<9>;\n\t.reg .b32 %f<12>;\n\t.reg .pred %q<3>;\n"
	      "\tld.param.u64 %e0, [__cuprobe_launch];\n"
	      "\tsetp.eq.u64 %q0, %e0, 0;\n\t@%q0 bra $done;\n"
	      /* the active lanes, how many, the lowest (the leader), this lane, last */
	      "\tactivemask.b32 %f0;\n\tpopc.b32 %f1, %f0;\n"
	      "\tneg.s32 %f2, %f0;\n\tand.b32 %f2, %f2, %f0;\n\tclz.b32 %f2, %f2;\n\tsub.u32 %f2, 31, %f2;\n"
	      "\tmov.u32 %f3, %laneid;\n\tmov.u32 %f4, 0;\n"
	      "\tsetp.ne.u32 %q1, %f3, %f2;\n\t@%q1 bra $counted;\n"
	      "\tmembar.cta;\n"
	      "\tatom.shared.add.u32 %f5, [__cuprobe_block_exits], %f1;\n\tadd.u32 %f5, %f5, %f1;\n"
	      "\tmov.u32 %f6, %ntid.x;\n\tmov.u32 %f7, %ntid.y;\n\tmul.lo.u32 %f6, %f6, %f7;\n"
	      "\tmov.u32 %f7, %ntid.z;\n\tmul.lo.u32 %f6, %f6, %f7;\n"
	      "\tsetp.ne.u32 %q1, %f5, %f6;\n\t@%q1 bra $counted;\n"
	      /* the block's last warp: the block out of its group, by slot */
	      "\tmembar.gl;\n\tshr.u64 %e1, %e0, 3;\n", out);
	fprintf(out, "\tand.b64 %%e1, %%e1, %u;\n", CP_PTX_LAUNCH_COUNTERS - 1);
	/* the block's index in its grid, the grid's blocks, its group, the group's blocks */
	fputs("\tmov.u32 %f6, %ctaid.z;\n\tmov.u32 %f7, %nctaid.y;\n\tmul.lo.u32 %f6, %f6, %f7;\n"
	      "\tmov.u32 %f7, %ctaid.y;\n\tadd.u32 %f6, %f6, %f7;\n"
	      "\tmov.u32 %f7, %nctaid.x;\n\tmul.lo.u32 %f6, %f6, %f7;\n"
	      "\tmov.u32 %f7, %ctaid.x;\n\tadd.u32 %f6, %f6, %f7;\n"
	      "\tmov.u32 %f8, %nctaid.x;\n\tmov.u32 %f9, %nctaid.y;\n\tmul.lo.u32 %f8, %f8, %f9;\n"
	      "\tmov.u32 %f9, %nctaid.z;\n\tmul.lo.u32 %f8, %f8, %f9;\n", out);
	fprintf(out, "\trem.u32 %%f9, %%f6, %u;\n\tdiv.u32 %%f10, %%f8, %u;\n\trem.u32 %%f11, %%f8, %u;\n",
		CP_PTX_LAUNCH_GROUPS, CP_PTX_LAUNCH_GROUPS, CP_PTX_LAUNCH_GROUPS);
	fputs("\tsetp.lt.u32 %q2, %f9, %f11;\n\tselp.u32 %f11, 1, 0, %q2;\n\tadd.u32 %f10, %f10, %f11;\n"
	      "\tcvt.u64.u32 %e3, %f9;\n", out);
	fprintf(out, "\tmul.lo.u64 %%e4, %%e1, %u;\n", CP_PTX_LAUNCH_GROUPS);
	fputs("\tadd.u64 %e3, %e3, %e4;\n\tshl.b64 %e3, %e3, 2;\n"
	      "\tmov.u64 %e2, __cuprobe_blocks_done;\n\tcvta.global.u64 %e2, %e2;\n\tadd.u64 %e2, %e2, %e3;\n"
	      "\tatom.add.u32 %f5, [%e2], 1;\n\tadd.u32 %f5, %f5, 1;\n"
	      "\tsetp.ne.u32 %q1, %f5, %f10;\n\t@%q1 bra $counted;\n"
	      /* the group's last block: its counter free for the slot's next launch, the group counted out */
	      "\tmov.u32 %f5, 0;\n\tst.u32 [%e2], %f5;\n", out);
	fprintf(out, "\tmin.u32 %%f10, %%f8, %u;\n", CP_PTX_LAUNCH_GROUPS);
	fputs("\tmembar.gl;\n\tshl.b64 %e3, %e1, 2;\n"
	      "\tmov.u64 %e2, __cuprobe_groups_done;\n\tcvta.global.u64 %e2, %e2;\n\tadd.u64 %e2, %e2, %e3;\n"
	      "\tatom.add.u32 %f5, [%e2], 1;\n\tadd.u32 %f5, %f5, 1;\n"
	      "\tsetp.ne.u32 %q1, %f5, %f10;\n\t@%q1 bra $counted;\n"
	      /* every group counted: the launch's last warp */
	      "\tmov.u32 %f5, 0;\n\tst.u32 [%e2], %f5;\n\tmembar.gl;\n\tmov.u32 %f4, 1;\n"
	      "$counted:\n"
	      "\tshfl.sync.idx.b32 %f4, %f4, %f2, 31, %f0;\n"
	      "\tsetp.eq.u32 %q0, %f4, 0;\n\t@%q0 bra $done;\n"
	      /* the launch's last warp: each lane's rank among the active ones */
	      "\tmov.u32 %f8, %lanemask_lt;\n\tand.b32 %f8, %f8, %f0;\n\tpopc.b32 %f8, %f8;\n", out);
	for (i = 0; i < count; i++)
		if ((!declare || declare[i]) &&
		    cp_ptx__shadow_replicas(shapes[i].value_size, shapes[i].max_entries))
			emit_map_move(out, i, &shapes[i]);
	fputs("\tmembar.sys;\n$done:\n\tret;\n}\n\n", out);
}

/* The shadow of map index, when it has one. */
static void declare_shadow(FILE *out, size_t index, const struct cp_ptx_map *map)
{
	unsigned int replicas = cp_ptx__shadow_replicas(map->value_size, map->max_entries);

	if (replicas)
		fprintf(out, ".global .align 128 .b8 __cuprobe_shadow_%zu[%llu];\n", index,
			(unsigned long long)(replicas * cp_jit_shadow_stride(map)));
}

static bool any_shadow(const struct cp_ptx_map *shapes, const bool *declare, size_t count)
{
	size_t i;

	for (i = 0; shapes && i < count; i++)
		if ((!declare || declare[i]) &&
		    cp_ptx__shadow_replicas(shapes[i].value_size, shapes[i].max_entries))
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
			if (shapes)
				declare_shadow(out, i, &shapes[i]);
		}
	if (shadows)
		emit_launch_functions(out, shapes, declare, count);
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
	bool shadows;
	FILE *out;
	int err = 0;

	if (!ptx || (count && !functions) || (map_count && !maps))
		return -EINVAL;
	*ptx = NULL;
	out = open_memstream(&text, &len);
	if (!out)
		return -ENOMEM;
	fprintf(out,
		"//\n// Device programs translated from verified BPF by cuprobe: the functions\n"
		"// are what goes into the matching kernels; the maps' addresses (0 here) and\n"
		"// the calls are the injection's.\n//\n\n"
		".version " CP_PTX_VERSION "\n.target " CP_PTX_TARGET "\n.address_size 64\n\n");
	for (i = 0; i < map_count; i++)
		if (!maps_used || maps_used[i]) {
			declare_map(out, i, 0, &maps[i]);
			declare_shadow(out, i, &maps[i]);
		}
	fputc('\n', out);
	shadows = any_shadow(maps, maps_used, map_count);
	if (shadows)
		emit_launch_functions(out, maps, maps_used, map_count);
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
	if (shadows)
		fputs("\tcall " CP_PTX_LAUNCH_START ";\n", out);
	for (i = 0; !err && i < count; i++)
		fprintf(out, "\t{\n\t.param .b64 __cuprobe_p;\n\tst.param.b64 [__cuprobe_p], %%slot;\n"
			"\tcall %s, (__cuprobe_p);\n\t}\n", functions[i].name);
	if (shadows)
		fputs("\t{\n\t.param .b64 __cuprobe_p;\n\tst.param.b64 [__cuprobe_p], %slot;\n"
		      "\tcall " CP_PTX_LAUNCH_END ", (__cuprobe_p);\n\t}\n", out);
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

