// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * BPF to PTX (ptx_jit.h). Three passes over a verified program:
 *
 *  1. check: every instruction is one the GPU has a translation for (else
 *     one line naming it), and where the BPF functions (subprograms) begin;
 *  2. analysis: which registers and stack slots may hold the context
 *     pointer, a map pointer (and which maps), a pointer into the
 *     function's own stack or into a map's values, to a fixed point over
 *     the branches and calls. A load whose base may be the context is a
 *     context read, translated to a special register; where the base may
 *     also be memory, the register's value tells them apart at run time
 *     (the kernel lets one instruction read only one of them, and the
 *     context is a tag no address has). A helper's map argument names the
 *     maps it may be; an atomic knows whether it is on the stack (no PTX
 *     atomics there), on a map's values, or must ask; the stack's depth is
 *     the deepest offset reached (512 bytes when a pointer to it leaves);
 *  3. emission: one PTX .func per BPF function, callees first, every BPF
 *     register a 64-bit PTX register, helpers inline. The stack is a
 *     register per 8-byte slot where the analysis saw every access to it
 *     at one offset (a pointer to it never leaving, no atomic on it) and it
 *     is at most 128 bytes deep, an access a field of one (bfe, bfi); else
 *     a .local array addressed generically. Kept in memory, a frame costs
 *     a local store and load for each spill and each lookup's key, which
 *     clang's code has many of.
 *
 * BPF's arithmetic is kept as the kernel defines it: 32-bit operations
 * zero-extend, x / 0 = 0 and x % 0 = x (signed too, and INT_MIN / -1 =
 * INT_MIN), shift counts masked to the width as the x86-64 JIT does.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_jit_internal.h"

/* The helpers, by id, as the kernel names them (the uapi's list). */
#define CP_HELPER_NAME(name, ...) [BPF_FUNC_##name] = "bpf_" #name
static const char *const helper_names[] = { __BPF_FUNC_MAPPER(CP_HELPER_NAME) };
#undef CP_HELPER_NAME

#define CP_CTX_FIELD(name, source, bits) { #name, source, bits },
const struct ctx_field cp_jit_ctx_fields[CTX_FIELD_COUNT] = { CUPROBE_GPU_CTX_FIELDS(CP_CTX_FIELD) };
#undef CP_CTX_FIELD

/* The verifier checks device programs as kprobe programs: ctx is a struct pt_regs to it. */
_Static_assert(sizeof(struct cuprobe_gpu_ctx) <= 168, "within x86-64's struct pt_regs");

/* The first refusal says why; returns err. */
int cp_jit_refuse(struct jit *j, int err, const char *fmt, ...)
{
	va_list ap;

	if (j->err)
		return j->err;
	j->err = err;
	if (j->error && j->error_size) {
		va_start(ap, fmt);
		vsnprintf(j->error, j->error_size, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* "bpf_probe_read_user (#112)", or "#N" for a helper newer than the list. */
const char *cp_jit_helper_name(char *buf, size_t len, int32_t id)
{
	if (id >= 0 && (size_t)id < sizeof(helper_names) / sizeof(helper_names[0]) && helper_names[id])
		snprintf(buf, len, "%s (#%d)", helper_names[id], id);
	else
		snprintf(buf, len, "#%d", id);
	return buf;
}

static const char *map_type_name(uint32_t type)
{
	static const char *const names[] = {
		[BPF_MAP_TYPE_HASH] = "a hash", [BPF_MAP_TYPE_ARRAY] = "an array",
		[BPF_MAP_TYPE_PROG_ARRAY] = "a program array",
		[BPF_MAP_TYPE_PERF_EVENT_ARRAY] = "a perf event array",
		[BPF_MAP_TYPE_PERCPU_HASH] = "a per-CPU hash",
		[BPF_MAP_TYPE_PERCPU_ARRAY] = "a per-CPU array",
		[BPF_MAP_TYPE_STACK_TRACE] = "a stack trace map", [BPF_MAP_TYPE_LRU_HASH] = "an LRU hash",
		[BPF_MAP_TYPE_LRU_PERCPU_HASH] = "a per-CPU LRU hash",
		[BPF_MAP_TYPE_LPM_TRIE] = "an LPM trie", [BPF_MAP_TYPE_RINGBUF] = "a ring buffer",
		[BPF_MAP_TYPE_TASK_STORAGE] = "task storage",
	};

	return type < sizeof(names) / sizeof(names[0]) && names[type] ? names[type] : "a map";
}

/* ---- pass 1: what each instruction is, where the functions are ------------------------- */

/* The map an ld_imm64 names (by its fd), checked as a device map; -1 after a refusal. */
static int device_map(struct jit *j, size_t i, int fd)
{
	const struct cp_ptx_map *map;
	size_t m;

	for (m = 0; m < j->prog->map_count; m++)
		if (j->prog->maps[m].fd == fd)
			break;
	if (m == j->prog->map_count) {
		cp_jit_refuse(j, -EINVAL, "instruction %zu: a map (fd %d) the object does not have", i, fd);
		return -1;
	}
	map = &j->prog->maps[m];
	if (map->type != BPF_MAP_TYPE_ARRAY || !(map->flags & CP_BPF_F_MMAPABLE)) {
		cp_jit_refuse(j, -EOPNOTSUPP,
		       "instruction %zu: map %s is %s%s: device programs reach only arrays declared with CUPROBE_GPU_ARRAY (BPF_F_MMAPABLE)",
		       i, map->name ? map->name : "?", map_type_name(map->type),
		       map->type == BPF_MAP_TYPE_ARRAY ? " without BPF_F_MMAPABLE" : "");
		return -1;
	}
	return (int)m;
}

static int check_alu(struct jit *j, size_t i, const struct bpf_insn *in)
{
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64;
	int op = BPF_OP(in->code);

	switch (op) {
	case BPF_ADD: case BPF_SUB: case BPF_MUL: case BPF_OR: case BPF_AND:
	case BPF_LSH: case BPF_RSH: case BPF_XOR: case BPF_ARSH:
		if (in->off)
			break;
		return 0;
	case BPF_DIV: case BPF_MOD:
		if (in->off != 0 && in->off != 1)
			break;
		return 0;
	case BPF_NEG:
		if (BPF_SRC(in->code) != BPF_K || in->off)
			break;
		return 0;
	case BPF_MOV:
		if (is64 && in->off == 1 && BPF_SRC(in->code) == BPF_X)
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: addr_space_cast (arena memory) is not available on the GPU", i);
		if (in->off == 0 || (BPF_SRC(in->code) == BPF_X &&
				     (in->off == 8 || in->off == 16 || (is64 && in->off == 32))))
			return 0;
		break;
	case BPF_END:
		if (in->imm != 16 && in->imm != 32 && in->imm != 64)
			break;
		if (is64 && BPF_SRC(in->code) != BPF_TO_LE)
			break;
		return 0;
	}
	return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown ALU instruction (code 0x%02x, off %d)", i,
		      in->code, in->off);
}

static int check_jmp(struct jit *j, size_t i, const struct bpf_insn *in)
{
	bool is64 = BPF_CLASS(in->code) == BPF_JMP;
	int op = BPF_OP(in->code);
	long target = -1;
	char name[64];

	switch (op) {
	case BPF_JA:
		if (BPF_SRC(in->code) != BPF_K)
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: the indirect jump (gotox) is not available on the GPU", i);
		target = (long)i + 1 + (is64 ? in->off : in->imm);
		break;
	case BPF_JEQ: case BPF_JGT: case BPF_JGE: case BPF_JSET: case BPF_JNE:
	case BPF_JSGT: case BPF_JSGE: case BPF_JLT: case BPF_JLE: case BPF_JSLT: case BPF_JSLE:
		target = (long)i + 1 + in->off;
		break;
	case BPF_CALL:
		if (!is64)
			break;
		if (in->src_reg == BPF_PSEUDO_KFUNC_CALL)
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: kfunc calls (BTF id %d) are not available on the GPU", i,
				      in->imm);
		if (in->src_reg == BPF_PSEUDO_CALL) {
			target = (long)i + 1 + in->imm;
			if (target < 0 || (size_t)target >= j->count)
				return cp_jit_refuse(j, -EINVAL, "instruction %zu: calls outside the program", i);
			j->leader[target] = true;
			return 0;
		}
		if (in->src_reg)
			break;
		switch (in->imm) {
		case BPF_FUNC_map_lookup_elem:
		case BPF_FUNC_map_update_elem:
		case BPF_FUNC_ktime_get_ns:
		case BPF_FUNC_get_smp_processor_id:
			return 0;
		default:
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: helper %s is not available on the GPU", i,
				      cp_jit_helper_name(name, sizeof(name), in->imm));
		}
	case BPF_EXIT:
		if (!is64)
			break;
		return 0;
	case BPF_JCOND:
		return cp_jit_refuse(j, -EOPNOTSUPP, "instruction %zu: may_goto is not available on the GPU", i);
	default:
		break;
	}
	if (op == BPF_CALL || op == BPF_EXIT || (op != BPF_JA && op > BPF_JSLE))
		return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown jump instruction (code 0x%02x)", i,
			      in->code);
	if (target < 0 || (size_t)target >= j->count)
		return cp_jit_refuse(j, -EINVAL, "instruction %zu: jumps outside the program", i);
	j->leader[target] = true;
	j->target[target] = true;
	if (i + 1 < j->count)
		j->leader[i + 1] = true;
	return 0;
}

static int check_atomic(struct jit *j, size_t i, const struct bpf_insn *in)
{
	int size = BPF_SIZE(in->code);

	switch (in->imm) {
	case BPF_ADD: case BPF_ADD | BPF_FETCH:
	case BPF_OR: case BPF_OR | BPF_FETCH:
	case BPF_AND: case BPF_AND | BPF_FETCH:
	case BPF_XOR: case BPF_XOR | BPF_FETCH:
	case BPF_XCHG: case BPF_CMPXCHG:
		if (size != BPF_W && size != BPF_DW)
			break;
		return 0;
	case CP_BPF_LOAD_ACQ: case CP_BPF_STORE_REL:
		return 0;
	}
	return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown atomic operation 0x%x (size %d)", i, in->imm,
		      size_bytes(size));
}

static int check_insn(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	int class = BPF_CLASS(in->code), mode = BPF_MODE(in->code);

	if (in->dst_reg >= REG_COUNT || in->src_reg >= REG_COUNT)
		return cp_jit_refuse(j, -EINVAL, "instruction %zu: register r%d does not exist", i,
			      in->dst_reg >= REG_COUNT ? in->dst_reg : in->src_reg);
	switch (class) {
	case BPF_ALU: case BPF_ALU64:
		return check_alu(j, i, in);
	case BPF_JMP: case BPF_JMP32:
		return check_jmp(j, i, in);
	case BPF_LD:
		if (mode == BPF_ABS || mode == BPF_IND)
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: packet access (BPF_LD_ABS/IND) is not available on the GPU", i);
		if (!is_ld_imm64(in) || i + 1 >= j->count)
			return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown load (code 0x%02x)", i, in->code);
		switch (in->src_reg) {
		case 0:
			return 0;
		case BPF_PSEUDO_MAP_FD:
		case BPF_PSEUDO_MAP_VALUE:
			j->map_of[i] = device_map(j, i, in->imm);
			if (j->map_of[i] < 0)
				return j->err;
			j->map_named[j->map_of[i]] = true;
			if (in->src_reg == BPF_PSEUDO_MAP_VALUE &&
			    (uint32_t)in[1].imm >= j->prog->maps[j->map_of[i]].value_size *
						   (uint64_t)j->prog->maps[j->map_of[i]].max_entries)
				return cp_jit_refuse(j, -EINVAL, "instruction %zu: points past map %s", i,
					      j->prog->maps[j->map_of[i]].name);
			/* A ring's maps are its segments on the GPU: reached by a lookup, the block's own. */
			if (in->src_reg == BPF_PSEUDO_MAP_VALUE &&
			    cp_ptx__ring_of(j->prog->maps, j->prog->map_count, (size_t)j->map_of[i],
					    &(struct cp_ptx_ring){ 0 }))
				return cp_jit_refuse(j, -EOPNOTSUPP,
					      "instruction %zu: device ring map %s is reached through bpf_map_lookup_elem (cuprobe_gpu_output) only",
					      i, j->prog->maps[j->map_of[i]].name);
			return 0;
		case BPF_PSEUDO_BTF_ID:
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: kernel variables (ksym, BTF id %d) are not available on the GPU",
				      i, in->imm);
		case BPF_PSEUDO_FUNC:
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: callbacks (a function's address, for bpf_loop and the like) are not available on the GPU",
				      i);
		default:
			return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown ld_imm64 kind %d", i,
				      in->src_reg);
		}
	case BPF_LDX:
		if ((mode != BPF_MEM && mode != BPF_MEMSX) || !valid_size(BPF_SIZE(in->code)) ||
		    (mode == BPF_MEMSX && BPF_SIZE(in->code) == BPF_DW))
			return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown load (code 0x%02x)", i, in->code);
		return 0;
	case BPF_ST:
		if (mode != BPF_MEM)
			return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown store (code 0x%02x)", i, in->code);
		return 0;
	case BPF_STX:
		if (mode == BPF_ATOMIC)
			return check_atomic(j, i, in);
		if (mode != BPF_MEM)
			return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown store (code 0x%02x)", i, in->code);
		return 0;
	}
	return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown instruction class (code 0x%02x)", i, in->code);
}

static void add_func(struct jit *j, size_t start)
{
	size_t f;

	for (f = 0; f < j->func_count; f++)
		if (j->funcs[f].start == start)
			return;
	j->funcs[j->func_count++] = (struct func){ .start = start };
}

static int by_start(const void *a, const void *b)
{
	const struct func *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Every instruction checked; the functions (main, then each call's target) and their blocks. */
static int check_program(struct jit *j)
{
	size_t i, f, k;
	long target;

	j->func_count = 0;
	add_func(j, 0);
	for (i = 0; i < j->count; i++) {
		j->map_of[i] = -1;
		if (check_insn(j, i))
			return j->err;
		if (BPF_CLASS(j->insn[i].code) == BPF_JMP && BPF_OP(j->insn[i].code) == BPF_CALL &&
		    j->insn[i].src_reg == BPF_PSEUDO_CALL)
			add_func(j, i + 1 + j->insn[i].imm);
		if (BPF_CLASS(j->insn[i].code) == BPF_JMP && BPF_OP(j->insn[i].code) == BPF_EXIT &&
		    i + 1 < j->count)
			j->leader[i + 1] = true;
		if (is_ld_imm64(&j->insn[i])) {
			i++;
			j->map_of[i] = SECOND_HALF;
			if (j->insn[i].code || j->insn[i].dst_reg || j->insn[i].src_reg || j->insn[i].off)
				return cp_jit_refuse(j, -EINVAL, "instruction %zu: a broken ld_imm64", i - 1);
		}
	}
	qsort(j->funcs, j->func_count, sizeof(*j->funcs), by_start);
	for (f = 0; f < j->func_count; f++) {
		j->funcs[f].end = f + 1 < j->func_count ? j->funcs[f + 1].start : j->count;
		j->leader[j->funcs[f].start] = true;
		for (k = j->funcs[f].start; k < j->funcs[f].end; k++)
			j->func_of[k] = f;
	}
	for (i = 0; i < j->count; i++) {
		const struct bpf_insn *in = &j->insn[i];
		int class = BPF_CLASS(in->code), op = BPF_OP(in->code);

		if (j->map_of[i] == SECOND_HALF) {
			if (j->leader[i])
				return cp_jit_refuse(j, -EINVAL, "instruction %zu: a branch into an ld_imm64", i);
			continue;
		}
		if ((class != BPF_JMP && class != BPF_JMP32) || op == BPF_CALL || op == BPF_EXIT)
			continue;
		target = (long)i + 1 + (class == BPF_JMP32 && op == BPF_JA ? in->imm : in->off);
		if (j->func_of[target] != j->func_of[i])
			return cp_jit_refuse(j, -EINVAL, "instruction %zu: jumps into another function", i);
	}
	/* The last instruction of each function must not fall through into the next. */
	for (f = 0; f < j->func_count; f++) {
		const struct bpf_insn *last = &j->insn[j->funcs[f].end - 1];
		int op = BPF_OP(last->code);

		if (!((BPF_CLASS(last->code) == BPF_JMP && (op == BPF_EXIT || op == BPF_JA)) ||
		      (BPF_CLASS(last->code) == BPF_JMP32 && op == BPF_JA)))
			return cp_jit_refuse(j, -EINVAL, "instruction %zu: falls off the end of its function",
				      j->funcs[f].end - 1);
	}
	return 0;
}

static void free_jit(struct jit *j)
{
	void *arrays[] = { j->states, j->funcs, j->func_of, j->leader, j->target, j->map_of,
			   j->map_named, j->base_mask, j->stack_at };
	size_t i;

	if (j->states)
		for (i = 0; i < j->count; i++)
			free(j->states[i]);
	for (i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		free(arrays[i]);
}

int cp_ptx__translate(const struct cp_ptx_program *prog, char **ptx, bool *maps_used,
		      char *error, size_t error_size)
{
	struct jit j = { .prog = prog, .error = error, .error_size = error_size,
			 .maps_used = maps_used };
	char *text = NULL;
	size_t len = 0, f;
	int err;

	if (error && error_size)
		error[0] = '\0';
	if (!ptx)
		return -EINVAL;
	*ptx = NULL;
	if (!prog || !prog->insns || !prog->insn_count || (prog->map_count && !prog->maps))
		return cp_jit_refuse(&j, -EINVAL, "no program to translate");
	if (!cp_ptx_identifier(prog->name))
		return cp_jit_refuse(&j, -EINVAL, "\"%s\" is not a PTX function name", prog->name ? prog->name : "");
	if (prog->insn_count > CP_PTX_MAX_INSNS)
		return cp_jit_refuse(&j, -EOPNOTSUPP, "%zu instructions: device programs have at most %d",
			      prog->insn_count, CP_PTX_MAX_INSNS);
	if (maps_used)
		memset(maps_used, 0, prog->map_count * sizeof(*maps_used));
	j.insn = prog->insns;
	j.count = prog->insn_count;
	j.funcs = calloc(j.count, sizeof(*j.funcs));
	j.func_of = calloc(j.count, sizeof(*j.func_of));
	j.leader = calloc(j.count, sizeof(*j.leader));
	j.target = calloc(j.count, sizeof(*j.target));
	j.map_of = calloc(j.count, sizeof(*j.map_of));
	j.map_named = calloc(prog->map_count ? prog->map_count : 1, sizeof(*j.map_named));
	j.base_mask = calloc(j.count, sizeof(*j.base_mask));
	j.stack_at = malloc(j.count * sizeof(*j.stack_at));
	j.states = calloc(j.count, sizeof(*j.states));
	if (!j.funcs || !j.func_of || !j.leader || !j.target || !j.map_of || !j.map_named ||
	    !j.base_mask || !j.stack_at || !j.states) {
		err = cp_jit_refuse(&j, -ENOMEM, "out of memory");
		goto out;
	}
	for (f = 0; f < j.count; f++)
		j.stack_at[f] = NOT_ON_STACK;
	err = check_program(&j);
	if (!err)
		err = cp_jit_analyze(&j);
	if (err)
		goto out;
	j.out = open_memstream(&text, &len);
	if (!j.out) {
		err = cp_jit_refuse(&j, -ENOMEM, "out of memory");
		goto out;
	}
	for (f = 0; !err && f < j.func_count; f++)
		if (j.funcs[f].called)
			err = cp_jit_emit_tree(&j, &j.funcs[f], 0);
	if (fclose(j.out) && !err)
		err = cp_jit_refuse(&j, -ENOMEM, "out of memory");
	if (!err)
		*ptx = text;
	else
		free(text);
out:
	free_jit(&j);
	return err;
}

