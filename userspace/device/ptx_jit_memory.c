// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The translator's pass 3 for memory: map helpers, context reads, atomics. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_jit_internal.h"

static void emit_value_address(struct jit *j, const struct cp_ptx_map *map, int m, const char *dst)
{
	uint32_t stride = (map->value_size + 7) & ~7u; /* the kernel's array element size */

	cp_jit_emit(j, "ld.const.u64 %%t0, [__cuprobe_map_%d];", m);
	cp_jit_emit(j, "mul.wide.u32 %%t1, %%w0, %u;", stride);
	cp_jit_emit(j, "add.u64 %s, %%t0, %%t1;", dst);
}

/*
 * The value at index %w0 of a ring's map in the block's segment (ptx_jit.h):
 * segment (linear block index & (segments - 1)), so that a block's
 * reservation and its slot are in the same segment wherever it runs.
 */
static void emit_ring_value_address(struct jit *j, const struct cp_ptx_ring *ring, int m,
				    const char *dst)
{
	bool control = (size_t)m == ring->control;

	cp_jit_emit(j, "{");
	cp_jit_emit(j, ".reg .b32 %%rg<4>;");
	cp_jit_emit(j, "mov.u32 %%rg0, %%ctaid.x;");
	cp_jit_emit(j, "mov.u32 %%rg1, %%ctaid.y;");
	cp_jit_emit(j, "mov.u32 %%rg2, %%nctaid.x;");
	cp_jit_emit(j, "mad.lo.u32 %%rg0, %%rg1, %%rg2, %%rg0;");
	cp_jit_emit(j, "mov.u32 %%rg1, %%ctaid.z;");
	cp_jit_emit(j, "mov.u32 %%rg3, %%nctaid.y;");
	cp_jit_emit(j, "mul.lo.u32 %%rg2, %%rg2, %%rg3;");
	cp_jit_emit(j, "mad.lo.u32 %%rg0, %%rg1, %%rg2, %%rg0;");
	cp_jit_emit(j, "and.b32 %%rg0, %%rg0, %u;", ring->segments - 1);
	cp_jit_emit(j, "mul.wide.u32 %%t1, %%rg0, %llu;",
		    (unsigned long long)(control ? ring->control_stride : ring->slots_stride));
	cp_jit_emit(j, "}");
	cp_jit_emit(j, "mov.u64 %%t0, %s%d;", control ? CP_PTX_RING_CONTROL_PREFIX : CP_PTX_RING_SLOTS_PREFIX, m);
	cp_jit_emit(j, "cvta.global.u64 %%t0, %%t0;");
	if (control) { /* one value: key 0 (the caller checks) */
		cp_jit_emit(j, "add.u64 %s, %%t0, %%t1;", dst);
		return;
	}
	cp_jit_emit(j, "add.u64 %%t0, %%t0, %%t1;");
	cp_jit_emit(j, "mul.wide.u32 %%t1, %%w0, %u;", ring->slot_bytes);
	cp_jit_emit(j, "add.u64 %s, %%t0, %%t1;", dst);
}

static void emit_lookup(struct jit *j, size_t i, int m, const char *done)
{
	const struct cp_ptx_map *map = &j->prog->maps[m];
	struct cp_ptx_ring ring;

	if (cp_ptx__ring_of(j->prog->maps, j->prog->map_count, (size_t)m, &ring)) {
		cp_jit_emit(j, "setp.lt.u32 %%p0, %%w0, %u;",
			    (size_t)m == ring.control ? 1 : ring.segment_slots);
		emit_ring_value_address(j, &ring, m, "%t2");
	} else {
		cp_jit_emit(j, "setp.lt.u32 %%p0, %%w0, %u;", map->max_entries);
		emit_value_address(j, map, m, "%t2");
	}
	cp_jit_emit(j, "selp.b64 %%r0, %%t2, 0, %%p0;");
	if (done)
		cp_jit_emit(j, "bra.uni %s;", done);
}

/* The copy of a value from *r3 to the value at %t2, unit bytes at a time; %t3 counts. */
static void emit_copy_loop(struct jit *j, size_t i, int m, const char *label, const char *type,
			   const char *reg, int unit)
{
	fprintf(j->out, "$L%zu_%d_%s:\n", i, m, label);
	cp_jit_emit(j, "add.u64 %%t4, %%r3, %%t3;");
	cp_jit_emit(j, "ld.%s %s, [%%t4];", type, reg);
	cp_jit_emit(j, "add.u64 %%t4, %%t2, %%t3;");
	cp_jit_emit(j, "st.%s [%%t4], %s;", type, reg);
	cp_jit_emit(j, "add.u64 %%t3, %%t3, %d;", unit);
	cp_jit_emit(j, "setp.lt.u64 %%p0, %%t3, %u;", j->prog->maps[m].value_size);
	cp_jit_emit(j, "@%%p0 bra $L%zu_%d_%s;", i, m, label);
}

/* bpf_map_update_elem on an array, as array_map_update_elem does it (BPF_F_LOCK: -EINVAL). */
static void emit_update(struct jit *j, size_t i, int m, const char *done)
{
	const struct cp_ptx_map *map = &j->prog->maps[m];
	char err[24];

	cp_jit_emit(j, "mov.b64 %%r0, %s;", cp_jit_imm_text(err, sizeof(err), -EINVAL, 64));
	cp_jit_emit(j, "setp.gt.u64 %%p0, %%r4, %d;", BPF_EXIST);
	cp_jit_emit(j, "@%%p0 bra %s;", done);
	cp_jit_emit(j, "mov.b64 %%r0, %s;", cp_jit_imm_text(err, sizeof(err), -E2BIG, 64));
	cp_jit_emit(j, "setp.ge.u32 %%p0, %%w0, %u;", map->max_entries);
	cp_jit_emit(j, "@%%p0 bra %s;", done);
	cp_jit_emit(j, "mov.b64 %%r0, %s;", cp_jit_imm_text(err, sizeof(err), -EEXIST, 64));
	cp_jit_emit(j, "setp.eq.u64 %%p0, %%r4, %d;", BPF_NOEXIST);
	cp_jit_emit(j, "@%%p0 bra %s;", done);
	emit_value_address(j, map, m, "%t2");
	/* value_size bytes from *r3: eight at a time where both are aligned, else one. */
	cp_jit_emit(j, "mov.u64 %%t3, 0;");
	if (map->value_size % 8 == 0) {
		cp_jit_emit(j, "or.b64 %%t4, %%t2, %%r3;");
		cp_jit_emit(j, "and.b64 %%t4, %%t4, 7;");
		cp_jit_emit(j, "setp.ne.u64 %%p0, %%t4, 0;");
		cp_jit_emit(j, "@%%p0 bra $L%zu_%d_bytes;", i, m);
		emit_copy_loop(j, i, m, "words", "u64", "%t5", 8);
		cp_jit_emit(j, "bra.uni $L%zu_%d_copied;", i, m);
	}
	emit_copy_loop(j, i, m, "bytes", "u8", "%w1", 1);
	fprintf(j->out, "$L%zu_%d_copied:\n", i, m);
	cp_jit_emit(j, "mov.b64 %%r0, 0;");
	cp_jit_emit(j, "bra.uni %s;", done);
}

int cp_jit_emit_map_helper(struct jit *j, size_t i, bool update)
{
	const struct bpf_insn *in = &j->insn[i];
	uint64_t maps = j->base_mask[i];
	char done[48], name[64], slot[16];
	bool single;
	int b, m, bit;

	/* Also something else (a slot the analysis saw both in): any map the program names. */
	if (maps & ~MAY_MAPS)
		maps |= j->map_bit_count ? (~0ull >> (MAP_BITS - j->map_bit_count)) << MAP_BIT0 : 0;
	if (!(maps & MAY_MAPS))
		return cp_jit_refuse(j, -EINVAL, "instruction %zu: helper %s without a map", i,
			      cp_jit_helper_name(name, sizeof(name), in->imm));
	snprintf(done, sizeof(done), "$L%zu_done", i);
	if (!cp_jit_stack_field(j, i, slot, sizeof(slot), &bit)) {
		cp_jit_emit(j, "ld.u32 %%w0, [%%r2];");
	} else if (bit) {
		cp_jit_emit(j, "shr.b64 %%t0, %s, %d;", slot, bit);
		cp_jit_emit(j, "cvt.u32.u64 %%w0, %%t0;");
	} else {
		cp_jit_emit(j, "cvt.u32.u64 %%w0, %s;", slot);
	}
	/* Each map r1 may be, told apart by its tag (the map's index) where there are several. */
	single = !(maps & (maps - 1));
	for (b = 0; b < j->map_bit_count; b++) {
		if (!(maps & (1ull << (MAP_BIT0 + b))))
			continue;
		m = j->bit_of_map[b];
		if (!single) {
			cp_jit_emit(j, "setp.ne.u64 %%p1, %%r1, %d;", m);
			cp_jit_emit(j, "@%%p1 bra $L%zu_not%d;", i, m);
		}
		if (update && cp_ptx__ring_of(j->prog->maps, j->prog->map_count, (size_t)m,
					      &(struct cp_ptx_ring){ 0 }))
			return cp_jit_refuse(j, -EOPNOTSUPP,
				      "instruction %zu: bpf_map_update_elem on device ring map %s: rings are written by cuprobe_gpu_output",
				      i, j->prog->maps[m].name);
		if (update)
			emit_update(j, i, m, done);
		else
			emit_lookup(j, i, m, single ? NULL : done);
		if (!single)
			fprintf(j->out, "$L%zu_not%d:\n", i, m);
	}
	if (!single)
		cp_jit_emit(j, "mov.b64 %%r0, 0;"); /* never: r1 is one of them */
	fprintf(j->out, "%s:\n", done);
	return 0;
}

int cp_jit_emit_ctx_load(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	int bytes = size_bytes(BPF_SIZE(in->code)), d = in->dst_reg, within;
	const struct ctx_field *field;
	char mask[24];

	if (in->off < 0 || (size_t)in->off / 8 >= CTX_FIELD_COUNT)
		return cp_jit_refuse(j, -EOPNOTSUPP,
			      "instruction %zu: reads the context at offset %d: struct cuprobe_gpu_ctx has %zu bytes",
			      i, in->off, CTX_FIELD_COUNT * 8);
	field = &cp_jit_ctx_fields[in->off / 8];
	within = in->off % 8;
	if (!field->source && !field->bits) {
		cp_jit_emit(j, "mov.b64 %%r%d, %%cp_launch;", d);
	} else if (!field->source) {
		cp_jit_emit(j, "mov.b64 %%r%d, 0;", d);
		cp_jit_emit(j, "setp.ne.u64 %%p0, %%cp_launch, 0;");
		cp_jit_emit(j, "@%%p0 ld.u64 %%r%d, [%%cp_launch];", d);
	} else if (field->bits == 64) {
		cp_jit_emit(j, "mov.u64 %%r%d, %s;", d, field->source);
	} else {
		cp_jit_emit(j, "mov.u32 %%w0, %s;", field->source);
		cp_jit_emit_zext32(j, d, "%w0");
	}
	if (within)
		cp_jit_emit(j, "shr.u64 %%r%d, %%r%d, %d;", d, d, within * 8);
	if (bytes < 8 && BPF_MODE(in->code) == BPF_MEMSX)
		cp_jit_emit(j, "bfe.s64 %%r%d, %%r%d, 0, %d;", d, d, bytes * 8);
	else if (bytes < 8)
		cp_jit_emit(j, "and.b64 %%r%d, %%r%d, %s;", d, d,
		     cp_jit_imm_text(mask, sizeof(mask), (int64_t)((1ull << (bytes * 8)) - 1), 64));
	return 0;
}

/*
 * The stack's copy of an atomic operation: the thread's own memory, which
 * no other thread sees (PTX has no atomics on local memory).
 */
static void emit_local_atomic(struct jit *j, size_t i, const char *addr, const char *value, int bits)
{
	const struct bpf_insn *in = &j->insn[i];
	const char *old = bits == 32 ? "%w6" : "%t4", *new = bits == 32 ? "%w7" : "%t3";
	static const char *const ops[16] = { [BPF_ADD >> 4] = "add.u", [BPF_OR >> 4] = "or.b",
					     [BPF_AND >> 4] = "and.b", [BPF_XOR >> 4] = "xor.b" };
	int op = in->imm & ~BPF_FETCH;

	cp_jit_emit(j, "ld.u%d %s, %s;", bits, old, addr);
	if (in->imm == BPF_CMPXCHG) {
		if (bits == 32)
			cp_jit_emit(j, "cvt.u32.u64 %%w4, %%r0;");
		cp_jit_emit(j, "setp.eq.u%d %%p2, %s, %s;", bits, old, bits == 32 ? "%w4" : "%r0");
		cp_jit_emit(j, "@%%p2 st.u%d %s, %s;", bits, addr, value);
		if (bits == 32)
			cp_jit_emit_zext32(j, BPF_REG_0, old);
		else
			cp_jit_emit(j, "mov.b64 %%r0, %s;", old);
		return;
	}
	if (in->imm == BPF_XCHG)
		cp_jit_emit(j, "st.u%d %s, %s;", bits, addr, value);
	else
		cp_jit_emit(j, "%s%d %s, %s, %s;\n\tst.u%d %s, %s;", ops[op >> 4], bits, new, old, value, bits,
		     addr, new);
	if (!(in->imm & BPF_FETCH))
		return;
	if (bits == 32)
		cp_jit_emit_zext32(j, in->src_reg, old);
	else
		cp_jit_emit(j, "mov.b64 %%r%d, %s;", in->src_reg, old);
}

/* The GPU's atomic: unordered without a result, fully ordered with one (as the kernel's). */
/* %ga3: the lowest bit of mask (a b32 register), %ga4: its lane. */
static void emit_lowest_lane(struct jit *j, const char *mask)
{
	cp_jit_emit(j, "neg.s32 %%ga3, %s;", mask);
	cp_jit_emit(j, "and.b32 %%ga3, %%ga3, %s;", mask);
	cp_jit_emit(j, "clz.b32 %%ga4, %%ga3;");
	cp_jit_emit(j, "sub.u32 %%ga4, 31, %%ga4;");
}

/*
 * The operand of atomic i when the instruction before it, in the same
 * block, set it to a constant (`r2 = 1; lock *(u64 *)(r1 + 0) += r2`: a
 * counter): the warp's sum is then that constant times its lanes.
 */
static bool constant_operand(const struct jit *j, size_t i, int64_t *k)
{
	const struct bpf_insn *in = &j->insn[i], *before = i ? &j->insn[i - 1] : NULL;

	if (!before || j->leader[i] || before->code != (BPF_ALU64 | BPF_MOV | BPF_K) ||
	    before->dst_reg != in->src_reg)
		return false;
	*k = before->imm; /* sign-extended, as the move does */
	return true;
}

/*
 * An add without a result on GPU-visible memory, aggregated per warp: the
 * lanes that add to the same address sum their operands, and the lowest of
 * them alone does the reduction, so the result is the same as one
 * reduction per lane. A whole warp on one address (a counter: the common
 * case) is found with one exchange and a vote, and sums by a butterfly of
 * five exchanges, or by a multiplication when the operand is a constant; a
 * lone lane (a program that returns early on the others) adds its own
 * operand; otherwise the lanes are grouped by address (match.any, which costs more)
 * and each group sums over its own lanes (shfl.sync with the group as its
 * member mask).
 */
static void emit_warp_add(struct jit *j, size_t i, const char *value, int bits)
{
	int64_t k = 0;
	bool constant = constant_operand(j, i, &k);

	cp_jit_emit(j, "{");
	/* active, peers, left, lowest, source lane, lane, shuffled low/high, operand low/high */
	cp_jit_emit(j, ".reg .b32 %%ga<10>;");
	cp_jit_emit(j, ".reg .b64 %%gd<2>;");
	cp_jit_emit(j, ".reg .pred %%gp<2>;");
	cp_jit_emit(j, "activemask.b32 %%ga0;");
	cp_jit_emit(j, "mov.u64 %%gd0, 0;");
	if (bits == 64)
		cp_jit_emit(j, "mov.b64 {%%ga8, %%ga9}, %s;", value);
	else
		cp_jit_emit(j, "mov.b32 %%ga8, %s;", value);
	/* All 32 lanes on lane 0's address? */
	cp_jit_emit(j, "setp.ne.u32 %%gp0, %%ga0, -1;");
	cp_jit_emit(j, "@%%gp0 bra $L%zu_match;", i);
	cp_jit_emit(j, "mov.b64 {%%ga6, %%ga7}, %%t6;");
	cp_jit_emit(j, "shfl.sync.idx.b32 %%ga6, %%ga6, 0, 31, -1;");
	cp_jit_emit(j, "shfl.sync.idx.b32 %%ga7, %%ga7, 0, 31, -1;");
	cp_jit_emit(j, "mov.b64 %%gd1, {%%ga6, %%ga7};");
	cp_jit_emit(j, "setp.eq.u64 %%gp0, %%gd1, %%t6;");
	cp_jit_emit(j, "vote.sync.all.pred %%gp0, %%gp0, -1;");
	cp_jit_emit(j, "@!%%gp0 bra $L%zu_match;", i);
	cp_jit_emit(j, "mov.b32 %%ga1, -1;");
	if (constant) {
		cp_jit_emit(j, "mov.u64 %%gd0, %llu;", (unsigned long long)((uint64_t)k * 32));
	} else {
		if (bits == 64)
			cp_jit_emit(j, "mov.b64 %%gd0, {%%ga8, %%ga9};");
		else
			cp_jit_emit(j, "cvt.u64.u32 %%gd0, %%ga8;");
		for (int lanes = 16; lanes; lanes >>= 1) {
			cp_jit_emit(j, "mov.b64 {%%ga6, %%ga7}, %%gd0;");
			cp_jit_emit(j, "shfl.sync.bfly.b32 %%ga6, %%ga6, %d, 31, -1;", lanes);
			cp_jit_emit(j, "shfl.sync.bfly.b32 %%ga7, %%ga7, %d, 31, -1;", lanes);
			cp_jit_emit(j, "mov.b64 %%gd1, {%%ga6, %%ga7};");
			cp_jit_emit(j, "add.u64 %%gd0, %%gd0, %%gd1;");
		}
	}
	cp_jit_emit(j, "bra.uni $L%zu_summed;", i);
	/* One lane (a program that runs on one lane a warp): its own operand, no exchange. */
	fprintf(j->out, "$L%zu_match:\n", i);
	cp_jit_emit(j, "popc.b32 %%ga6, %%ga0;");
	cp_jit_emit(j, "setp.ne.u32 %%gp0, %%ga6, 1;");
	cp_jit_emit(j, "@%%gp0 bra $L%zu_group;", i);
	cp_jit_emit(j, "mov.b32 %%ga1, %%ga0;");
	if (constant)
		cp_jit_emit(j, "mov.u64 %%gd0, %llu;", (unsigned long long)k);
	else if (bits == 64)
		cp_jit_emit(j, "mov.b64 %%gd0, {%%ga8, %%ga9};");
	else
		cp_jit_emit(j, "cvt.u64.u32 %%gd0, %%ga8;");
	cp_jit_emit(j, "bra.uni $L%zu_summed;", i);
	/* Lanes by address: each peer's operand, lowest lane first, summed by every peer. */
	fprintf(j->out, "$L%zu_group:\n", i);
	cp_jit_emit(j, "match.any.sync.b64 %%ga1, %%t6, %%ga0;");
	if (constant) {
		cp_jit_emit(j, "popc.b32 %%ga6, %%ga1;");
		cp_jit_emit(j, "cvt.u64.u32 %%gd1, %%ga6;");
		cp_jit_emit(j, "mul.lo.u64 %%gd0, %%gd1, %llu;", (unsigned long long)k);
	} else {
		cp_jit_emit(j, "mov.b32 %%ga2, %%ga1;");
		fprintf(j->out, "$L%zu_sum:\n", i);
		emit_lowest_lane(j, "%ga2");
		cp_jit_emit(j, "shfl.sync.idx.b32 %%ga6, %%ga8, %%ga4, 31, %%ga1;");
		if (bits == 64) {
			cp_jit_emit(j, "shfl.sync.idx.b32 %%ga7, %%ga9, %%ga4, 31, %%ga1;");
			cp_jit_emit(j, "mov.b64 %%gd1, {%%ga6, %%ga7};");
		} else {
			cp_jit_emit(j, "cvt.u64.u32 %%gd1, %%ga6;");
		}
		cp_jit_emit(j, "add.u64 %%gd0, %%gd0, %%gd1;");
		cp_jit_emit(j, "xor.b32 %%ga2, %%ga2, %%ga3;");
		cp_jit_emit(j, "setp.ne.u32 %%gp0, %%ga2, 0;");
		cp_jit_emit(j, "@%%gp0 bra $L%zu_sum;", i);
	}
	fprintf(j->out, "$L%zu_summed:\n", i);
	/* The lowest peer adds the sum (modulo 2^bits, as the lanes' adds would). */
	emit_lowest_lane(j, "%ga1");
	cp_jit_emit(j, "mov.u32 %%ga5, %%laneid;");
	cp_jit_emit(j, "setp.eq.u32 %%gp1, %%ga5, %%ga4;");
	/*
	 * Global memory (a map's value or its shadow; the stack's adds do not
	 * come here): said, so the reduction needs no test of the address's
	 * space (a generic one is compiled with a branch for shared memory).
	 */
	cp_jit_emit(j, "cvta.to.global.u64 %%gd1, %%t6;");
	if (bits == 64) {
		cp_jit_emit(j, "@%%gp1 red.global.add.u64 [%%gd1], %%gd0;");
	} else {
		cp_jit_emit(j, "cvt.u32.u64 %%ga6, %%gd0;");
		cp_jit_emit(j, "@%%gp1 red.global.add.u32 [%%gd1], %%ga6;");
	}
	cp_jit_emit(j, "}");
}

/*
 * A counter's add to a map with a shadow
 * (ptx_jit.h): %t6 moved to the same offset in its SM's replica. The maps
 * it may be in are those the program names.
 */
static void emit_shadow_redirect(struct jit *j, size_t i)
{
	const struct cp_ptx_program *prog = j->prog;
	bool any = false;
	size_t m;

	for (m = 0; m < prog->map_count; m++) {
		unsigned int replicas = cp_jit_shadow_replicas(&prog->maps[m]);
		uint64_t bytes = cp_jit_shadow_bytes(&prog->maps[m]);

		if (!replicas || !j->map_named[m] ||
		    cp_ptx__ring_of(prog->maps, prog->map_count, m, &(struct cp_ptx_ring){ 0 }))
			continue;
		if (!any) {
			cp_jit_emit(j, "{");
			cp_jit_emit(j, ".reg .b64 %%sh<3>;");
			cp_jit_emit(j, ".reg .b32 %%shw;");
			cp_jit_emit(j, ".reg .pred %%shp;");
			any = true;
		}
		cp_jit_emit(j, "ld.const.u64 %%sh0, [__cuprobe_map_%zu];", m);
		cp_jit_emit(j, "sub.u64 %%sh1, %%t6, %%sh0;");
		cp_jit_emit(j, "setp.ge.u64 %%shp, %%sh1, %llu;", (unsigned long long)bytes);
		cp_jit_emit(j, "@%%shp bra $L%zu_not_shadow%zu;", i, m);
		cp_jit_emit(j, "mov.u32 %%shw, %%smid;");
		cp_jit_emit(j, "and.b32 %%shw, %%shw, %u;", replicas - 1);
		cp_jit_emit(j, "mul.wide.u32 %%sh2, %%shw, %llu;",
			    (unsigned long long)cp_jit_shadow_stride(&prog->maps[m]));
		cp_jit_emit(j, "mov.u64 %%sh0, " CP_PTX_SHADOW_PREFIX "%zu;", m);
		cp_jit_emit(j, "cvta.global.u64 %%sh0, %%sh0;");
		cp_jit_emit(j, "add.u64 %%sh0, %%sh0, %%sh2;");
		cp_jit_emit(j, "add.u64 %%t6, %%sh0, %%sh1;");
		cp_jit_emit(j, "bra.uni $L%zu_shadowed;", i);
		fprintf(j->out, "$L%zu_not_shadow%zu:\n", i, m);
	}
	if (any) {
		fprintf(j->out, "$L%zu_shadowed:\n", i);
		cp_jit_emit(j, "}");
	}
}

/*
 * Is register r never read again after instruction i before it is
 * written? Followed in a straight line: a branch, or a call that may take
 * it as an argument, says it may be.
 */
static bool dead_after(const struct jit *j, size_t i, int r)
{
	size_t k;

	for (k = i + 1; k < j->count; k++) {
		const struct bpf_insn *in = &j->insn[k];
		int class = BPF_CLASS(in->code), op = BPF_OP(in->code);
		bool reads_src = BPF_SRC(in->code) == BPF_X;

		switch (class) {
		case BPF_ALU: case BPF_ALU64:
			if ((reads_src && in->src_reg == r) || (op != BPF_MOV && in->dst_reg == r))
				return false;
			if (in->dst_reg == r)
				return true;
			break;
		case BPF_LD:
			if (!is_ld_imm64(in))
				return false;
			if (in->dst_reg == r)
				return true;
			k++; /* its second half */
			break;
		case BPF_LDX:
			if (in->src_reg == r)
				return false;
			if (in->dst_reg == r)
				return true;
			break;
		case BPF_ST:
			if (in->dst_reg == r)
				return false;
			break;
		case BPF_STX:
			if (in->dst_reg == r || in->src_reg == r || BPF_MODE(in->code) == BPF_ATOMIC)
				return false;
			break;
		default: /* BPF_JMP, BPF_JMP32 */
			if (op == BPF_EXIT)
				return r != BPF_REG_0;
			/* A call: r1-r5 may be its arguments, r0 its result; a jump: paths part. */
			return op == BPF_CALL && r == BPF_REG_0;
		}
	}
	return false;
}

/* segment: the address is a ring's segment (device memory), else possibly a map's (host memory). */
static void emit_global_atomic(struct jit *j, size_t i, const char *addr, const char *value,
			       int bits, bool segment)
{
	const struct bpf_insn *in = &j->insn[i];
	const char *op, *sem = segment ? "relaxed.gpu." : "";

	switch (in->imm & ~BPF_FETCH) {
	case BPF_ADD: op = bits == 32 ? "add.u32" : "add.u64"; break;
	case BPF_OR: op = bits == 32 ? "or.b32" : "or.b64"; break;
	case BPF_AND: op = bits == 32 ? "and.b32" : "and.b64"; break;
	case BPF_XOR: op = bits == 32 ? "xor.b32" : "xor.b64"; break;
	case BPF_XCHG & ~BPF_FETCH: op = bits == 32 ? "exch.b32" : "exch.b64"; break;
	default: op = bits == 32 ? "cas.b32" : "cas.b64"; break;
	}
	if (in->imm == BPF_ADD) {
		/* The address in %t6: the emitter's callers put it there. */
		if (bits == 64)
			emit_shadow_redirect(j, i);
		emit_warp_add(j, i, value, bits);
		return;
	}
	if (!(in->imm & BPF_FETCH)) {
		cp_jit_emit(j, "red.%s %s, %s;", op, addr, value);
		return;
	}
	/*
	 * A BPF atomic with a result orders everything around it. Where the
	 * address may be a map's (host memory, which the host may read while
	 * kernels run), fenced system-wide (membar.sys, fence.sc.sys): what the
	 * thread wrote before reaches it first. A ring's segment is device
	 * memory that nothing reads while a kernel that writes it runs (the
	 * injection moves it once they are done, inject_ring.c): a relaxed
	 * atomic of the GPU's scope, with no fence to wait on.
	 */
	if (segment && in->imm == BPF_XCHG && dead_after(j, i, in->src_reg)) {
		/* What was there is not used (an older SDK's commit): a store. */
		cp_jit_emit(j, "st.relaxed.gpu.%s %s, %s;", bits == 32 ? "b32" : "b64", addr, value);
		return;
	}
	if (!segment)
		cp_jit_emit(j, "membar.sys;");
	if (in->imm == BPF_CMPXCHG && bits == 32) {
		/* r0 = cmpxchg(addr, r0, rS): r0 gets what was there. */
		cp_jit_emit(j, "cvt.u32.u64 %%w6, %%r0;");
		cp_jit_emit(j, "atom.%s%s %%w7, %s, %%w6, %s;", sem, op, addr, value);
		cp_jit_emit_zext32(j, BPF_REG_0, "%w7");
	} else if (in->imm == BPF_CMPXCHG) {
		cp_jit_emit(j, "atom.%s%s %%r0, %s, %%r0, %s;", sem, op, addr, value);
	} else if (bits == 32) {
		cp_jit_emit(j, "atom.%s%s %%w7, %s, %s;", sem, op, addr, value);
		cp_jit_emit_zext32(j, in->src_reg, "%w7");
	} else {
		cp_jit_emit(j, "atom.%s%s %%r%d, %s, %s;", sem, op, in->src_reg, addr, value);
	}
	if (!segment)
		cp_jit_emit(j, "membar.sys;");
}

int cp_jit_emit_atomic(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	int bits = size_bytes(BPF_SIZE(in->code)) * 8, d = in->dst_reg, s = in->src_reg;
	uint64_t base = j->base_mask[i];
	bool global = base && !(base & ~(MAY_VALUE | MAY_SEGMENT)), local = base == MAY_STACK;
	bool segment = base == MAY_SEGMENT;
	char addr[32], value[8];

	snprintf(addr, sizeof(addr), "[%%r%d+%d]", d, in->off);
	if (in->imm == CP_BPF_LOAD_ACQ) {
		/* A load, then a fence: nothing after it moves before it. */
		snprintf(addr, sizeof(addr), "[%%r%d+%d]", s, in->off);
		cp_jit_emit(j, "ld.volatile.u%d %%r%d, %s;", bits, d, addr);
		cp_jit_emit(j, "membar.sys;");
		return 0;
	}
	if (in->imm == CP_BPF_STORE_REL) {
		cp_jit_emit(j, "membar.sys;");
		cp_jit_emit(j, "st.volatile.u%d %s, %%r%d;", bits, addr, s);
		return 0;
	}
	/* The operand: rS, or its low half. */
	snprintf(value, sizeof(value), "%%r%d", s);
	if (bits == 32) {
		cp_jit_emit(j, "cvt.u32.u64 %%w5, %%r%d;", s);
		snprintf(value, sizeof(value), "%%w5");
	}
	if (local) {
		emit_local_atomic(j, i, addr, value, bits);
		return 0;
	}
	cp_jit_emit(j, "add.u64 %%t6, %%r%d, %d;", d, in->off);
	if (global) {
		emit_global_atomic(j, i, "[%t6]", value, bits, segment);
		return 0;
	}
	/* Where the analysis cannot tell (a pointer from memory, a caller's stack): asked. */
	cp_jit_emit(j, "isspacep.local %%p2, %%t6;");
	cp_jit_emit(j, "@%%p2 bra $L%zu_local;", i);
	emit_global_atomic(j, i, "[%t6]", value, bits, false);
	cp_jit_emit(j, "bra.uni $L%zu_atomic;", i);
	fprintf(j->out, "$L%zu_local:\n", i);
	emit_local_atomic(j, i, "[%t6]", value, bits);
	fprintf(j->out, "$L%zu_atomic:\n", i);
	return 0;
}

