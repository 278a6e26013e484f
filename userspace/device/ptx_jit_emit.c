// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The translator's pass 3: ALU, jumps, calls, functions (ptx_jit.c says what the passes are). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_jit_internal.h"

/* ---- pass 3: PTX ----------------------------------------------------------------------------- */

void cp_jit_emit(struct jit *j, const char *fmt, ...)
{
	va_list ap;

	fputc('\t', j->out);
	va_start(ap, fmt);
	vfprintf(j->out, fmt, ap);
	va_end(ap);
	fputc('\n', j->out);
}

static const char *func_name(struct jit *j, const struct func *f)
{
	if (f == &j->funcs[0])
		return j->prog->name;
	snprintf(j->name_buf, sizeof(j->name_buf), "%s__sub%zu", j->prog->name, f->start);
	return j->name_buf;
}

/* An immediate of width bits, as PTX takes it. */
const char *cp_jit_imm_text(char *buf, size_t len, int64_t value, int bits)
{
	if (bits == 64)
		snprintf(buf, len, "0x%016llx", (unsigned long long)value);
	else
		snprintf(buf, len, "0x%08x", (unsigned int)value);
	return buf;
}

/* u32 -> its low bits into rD, zero-extended. */
void cp_jit_emit_zext32(struct jit *j, int dst, const char *w)
{
	cp_jit_emit(j, "cvt.u64.u32 %%r%d, %s;", dst, w);
}

/*
 * x / y and x % y as BPF defines them, on registers of width bits: x / 0 = 0,
 * x % 0 = x; signed: INT_MIN / -1 = INT_MIN, x % -1 = 0. The division
 * itself never sees 0 (or -1 when signed).
 */
static void emit_divmod(struct jit *j, const char *x, const char *y, bool mod, bool is_signed,
			int bits)
{
	const char *t = bits == 64 ? "%t" : "%w";
	char minus_one[24];

	cp_jit_emit(j, "setp.eq.u%d %%p0, %s, 0;", bits, y);
	if (is_signed) {
		cp_jit_imm_text(minus_one, sizeof(minus_one), -1, bits);
		cp_jit_emit(j, "setp.eq.u%d %%p1, %s, %s;", bits, y, minus_one);
		cp_jit_emit(j, "or.pred %%p2, %%p0, %%p1;");
		cp_jit_emit(j, "selp.b%d %s1, 1, %s, %%p2;", bits, t, y);
		cp_jit_emit(j, "%s.s%d %s2, %s, %s1;", mod ? "rem" : "div", bits, t, x, t);
		if (mod) {
			cp_jit_emit(j, "selp.b%d %s2, 0, %s2, %%p1;", bits, t, t);
		} else {
			cp_jit_emit(j, "neg.s%d %s3, %s;", bits, t, x);
			cp_jit_emit(j, "selp.b%d %s2, %s3, %s2, %%p1;", bits, t, t, t);
		}
	} else {
		cp_jit_emit(j, "selp.b%d %s1, 1, %s, %%p0;", bits, t, y);
		cp_jit_emit(j, "%s.u%d %s2, %s, %s1;", mod ? "rem" : "div", bits, t, x, t);
	}
	if (mod)
		cp_jit_emit(j, "selp.b%d %s, %s, %s2, %%p0;", bits, x, x, t);
	else
		cp_jit_emit(j, "selp.b%d %s, 0, %s2, %%p0;", bits, x, t);
}

/* A byte swap of the low bits of rD (16, 32 or 64), zero-extended. */
static void emit_bswap(struct jit *j, int dst, int bits)
{
	if (bits == 64) {
		cp_jit_emit(j, "mov.b64 {%%w0, %%w1}, %%r%d;", dst);
		cp_jit_emit(j, "prmt.b32 %%w2, %%w0, 0, 0x0123;");
		cp_jit_emit(j, "prmt.b32 %%w3, %%w1, 0, 0x0123;");
		cp_jit_emit(j, "mov.b64 %%r%d, {%%w3, %%w2};", dst);
		return;
	}
	cp_jit_emit(j, "cvt.u32.u64 %%w0, %%r%d;", dst);
	cp_jit_emit(j, "prmt.b32 %%w0, %%w0, 0, %s;", bits == 16 ? "0x4401" : "0x0123");
	cp_jit_emit_zext32(j, dst, "%w0");
}

static int emit_alu(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64, use_x = BPF_SRC(in->code) == BPF_X;
	int op = BPF_OP(in->code), d = in->dst_reg, s = in->src_reg, bits = is64 ? 64 : 32;
	char dst[8], src[32], count[32];
	static const char *const simple[16] = {
		[BPF_ADD >> 4] = "add.u", [BPF_SUB >> 4] = "sub.u", [BPF_MUL >> 4] = "mul.lo.u",
		[BPF_OR >> 4] = "or.b", [BPF_AND >> 4] = "and.b", [BPF_XOR >> 4] = "xor.b",
	};

	if (op == BPF_MOV) {
		if (is64 && !in->off && use_x) {
			cp_jit_emit(j, "mov.b64 %%r%d, %%r%d;", d, s);
			return 0;
		}
		if (is64 && !in->off) {
			cp_jit_emit(j, "mov.b64 %%r%d, %s;", d, cp_jit_imm_text(src, sizeof(src), in->imm, 64));
			return 0;
		}
		if (is64) {
			/* movsx: the low off bits, sign-extended */
			cp_jit_emit(j, "bfe.s64 %%r%d, %%r%d, 0, %d;", d, s, in->off);
			return 0;
		}
		if (!use_x) {
			cp_jit_emit(j, "mov.b64 %%r%d, %s;", d, cp_jit_imm_text(src, sizeof(src), (uint32_t)in->imm, 64));
			return 0;
		}
		cp_jit_emit(j, "cvt.u32.u64 %%w0, %%r%d;", s);
		if (in->off)
			cp_jit_emit(j, "bfe.s32 %%w0, %%w0, 0, %d;", in->off);
		cp_jit_emit_zext32(j, d, "%w0");
		return 0;
	}
	if (op == BPF_END) {
		if (!is64 && BPF_SRC(in->code) == BPF_TO_LE) {
			/* This is a little-endian machine's BPF: to little-endian only truncates. */
			if (in->imm < 64)
				cp_jit_emit(j, "and.b64 %%r%d, %%r%d, %s;", d, d,
				     cp_jit_imm_text(src, sizeof(src), (int64_t)((1ull << in->imm) - 1), 64));
			return 0;
		}
		emit_bswap(j, d, in->imm);
		return 0;
	}
	/* The operands: rD and rS (or the immediate) at 64 bits; their low halves at 32. */
	if (is64) {
		snprintf(dst, sizeof(dst), "%%r%d", d);
		if (use_x)
			snprintf(src, sizeof(src), "%%r%d", s);
		else
			cp_jit_imm_text(src, sizeof(src), in->imm, 64);
	} else {
		snprintf(dst, sizeof(dst), "%%w4");
		cp_jit_emit(j, "cvt.u32.u64 %%w4, %%r%d;", d);
		if (use_x) {
			cp_jit_emit(j, "cvt.u32.u64 %%w5, %%r%d;", s);
			snprintf(src, sizeof(src), "%%w5");
		} else {
			cp_jit_imm_text(src, sizeof(src), in->imm, 32);
		}
	}
	switch (op) {
	case BPF_ADD: case BPF_SUB: case BPF_MUL: case BPF_OR: case BPF_AND: case BPF_XOR:
		cp_jit_emit(j, "%s%d %s, %s, %s;", simple[op >> 4], bits, dst, dst, src);
		break;
	case BPF_DIV: case BPF_MOD:
		if (!use_x) {
			/* setp and selp want the divisor in a register. */
			cp_jit_emit(j, "mov.b%d %s6, %s;", bits, is64 ? "%t" : "%w", src);
			snprintf(src, sizeof(src), "%s6", is64 ? "%t" : "%w");
		}
		emit_divmod(j, dst, src, op == BPF_MOD, in->off == 1, bits);
		break;
	case BPF_LSH: case BPF_RSH: case BPF_ARSH:
		/* The count masked to the width, as x86-64's shifts (and its BPF JIT) do. */
		if (use_x) {
			if (is64)
				cp_jit_emit(j, "cvt.u32.u64 %%w5, %%r%d;", s);
			cp_jit_emit(j, "and.b32 %%w5, %%w5, %d;", bits - 1);
			snprintf(count, sizeof(count), "%%w5");
		} else {
			snprintf(count, sizeof(count), "%d", in->imm & (bits - 1));
		}
		cp_jit_emit(j, "%s.%s%d %s, %s, %s;", op == BPF_LSH ? "shl" : "shr",
		     op == BPF_LSH ? "b" : op == BPF_RSH ? "u" : "s", bits, dst, dst, count);
		break;
	case BPF_NEG:
		cp_jit_emit(j, "neg.s%d %s, %s;", bits, dst, dst);
		break;
	}
	if (!is64)
		cp_jit_emit_zext32(j, d, "%w4");
	return 0;
}

static const char *cmp_name(int op, bool *is_signed)
{
	*is_signed = op == BPF_JSGT || op == BPF_JSGE || op == BPF_JSLT || op == BPF_JSLE;
	switch (op) {
	case BPF_JEQ: return "eq";
	case BPF_JNE: return "ne";
	case BPF_JGT: case BPF_JSGT: return "gt";
	case BPF_JGE: case BPF_JSGE: return "ge";
	case BPF_JLT: case BPF_JSLT: return "lt";
	default: return "le";
	}
}

/* An array map's value at the index *key (r2), or 0 past its end: into rD. */
static int emit_call(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	char name[64];
	int r;

	if (in->src_reg == BPF_PSEUDO_CALL) {
		const struct func *callee = &j->funcs[cp_jit_func_at(j, i + 1 + in->imm)];

		cp_jit_emit(j, "{");
		cp_jit_emit(j, ".param .b64 __cuprobe_result;");
		cp_jit_emit(j, ".param .b64 __cuprobe_p0;");
		for (r = 1; r <= 5; r++)
			cp_jit_emit(j, ".param .b64 __cuprobe_p%d;", r);
		cp_jit_emit(j, "st.param.b64 [__cuprobe_p0], %%cp_launch;");
		for (r = 1; r <= 5; r++)
			cp_jit_emit(j, "st.param.b64 [__cuprobe_p%d], %%r%d;", r, r);
		cp_jit_emit(j, "call (__cuprobe_result), %s, (__cuprobe_p0, __cuprobe_p1, __cuprobe_p2, __cuprobe_p3, __cuprobe_p4, __cuprobe_p5);",
		     func_name(j, callee));
		cp_jit_emit(j, "ld.param.b64 %%r0, [__cuprobe_result];");
		cp_jit_emit(j, "}");
		return 0;
	}
	switch (in->imm) {
	case BPF_FUNC_map_lookup_elem:
		return cp_jit_emit_map_helper(j, i, false);
	case BPF_FUNC_map_update_elem:
		return cp_jit_emit_map_helper(j, i, true);
	case BPF_FUNC_ktime_get_ns:
		cp_jit_emit(j, "mov.u64 %%r0, %%globaltimer;");
		return 0;
	case BPF_FUNC_get_smp_processor_id:
		cp_jit_emit(j, "mov.u32 %%w0, %%smid;");
		cp_jit_emit_zext32(j, BPF_REG_0, "%w0");
		return 0;
	}
	return cp_jit_refuse(j, -EOPNOTSUPP, "instruction %zu: helper %s is not available on the GPU", i,
		      cp_jit_helper_name(name, sizeof(name), in->imm));
}

static int emit_jmp(struct jit *j, size_t i, bool main)
{
	const struct bpf_insn *in = &j->insn[i];
	bool is64 = BPF_CLASS(in->code) == BPF_JMP, is_signed;
	int op = BPF_OP(in->code), bits = is64 ? 64 : 32;
	char left[8], right[32];
	const char *cmp;

	switch (op) {
	case BPF_JA:
		cp_jit_emit(j, "bra.uni $L%zu;", i + 1 + (is64 ? in->off : in->imm));
		return 0;
	case BPF_CALL:
		return emit_call(j, i);
	case BPF_EXIT:
		if (!main)
			cp_jit_emit(j, "st.param.b64 [__cuprobe_ret], %%r0;");
		cp_jit_emit(j, "ret;");
		return 0;
	}
	if (is64) {
		snprintf(left, sizeof(left), "%%r%d", in->dst_reg);
		if (BPF_SRC(in->code) == BPF_X)
			snprintf(right, sizeof(right), "%%r%d", in->src_reg);
		else
			cp_jit_imm_text(right, sizeof(right), in->imm, 64);
	} else {
		cp_jit_emit(j, "cvt.u32.u64 %%w0, %%r%d;", in->dst_reg);
		snprintf(left, sizeof(left), "%%w0");
		if (BPF_SRC(in->code) == BPF_X) {
			cp_jit_emit(j, "cvt.u32.u64 %%w1, %%r%d;", in->src_reg);
			snprintf(right, sizeof(right), "%%w1");
		} else {
			cp_jit_imm_text(right, sizeof(right), in->imm, 32);
		}
	}
	if (op == BPF_JSET) {
		cp_jit_emit(j, "and.b%d %s7, %s, %s;", bits, is64 ? "%t" : "%w", left, right);
		cp_jit_emit(j, "setp.ne.u%d %%p0, %s7, 0;", bits, is64 ? "%t" : "%w");
	} else {
		cmp = cmp_name(op, &is_signed);
		cp_jit_emit(j, "setp.%s.%c%d %%p0, %s, %s;", cmp, is_signed ? 's' : 'u', bits, left, right);
	}
	cp_jit_emit(j, "@%%p0 bra $L%zu;", i + 1 + in->off);
	return 0;
}

bool cp_jit_stack_field(const struct jit *j, size_t i, char *slot, size_t len, int *bit)
{
	int32_t at = j->stack_at[i];

	if (!j->emitting || !j->emitting->stack_in_registers || at == NOT_ON_STACK)
		return false;
	snprintf(slot, len, "%%sl%d", (at + CP_PTX_STACK_BYTES) / 8);
	*bit = (at + CP_PTX_STACK_BYTES) % 8 * 8; /* little-endian: byte b is bits 8b.. */
	return true;
}

/* bits of value (a register) into a slot register at bit. */
static void emit_slot_store(struct jit *j, const char *slot, int bit, int bits, const char *value)
{
	if (bits == 64)
		cp_jit_emit(j, "mov.b64 %s, %s;", slot, value);
	else
		cp_jit_emit(j, "bfi.b64 %s, %s, %s, %d, %d;", slot, value, slot, bit, bits);
}

static int emit_insn(struct jit *j, size_t i, bool main)
{
	const struct bpf_insn *in = &j->insn[i];
	int class = BPF_CLASS(in->code), bits = size_bytes(BPF_SIZE(in->code)) * 8, bit;
	char value[24], slot[16];

	switch (class) {
	case BPF_ALU: case BPF_ALU64:
		return emit_alu(j, i);
	case BPF_JMP: case BPF_JMP32:
		return emit_jmp(j, i, main);
	case BPF_LD: {
		uint64_t imm64 = (uint32_t)in->imm | (uint64_t)(uint32_t)in[1].imm << 32;

		if (!in->src_reg) {
			cp_jit_emit(j, "mov.b64 %%r%d, %s;", in->dst_reg,
			     cp_jit_imm_text(value, sizeof(value), (int64_t)imm64, 64));
		} else if (in->src_reg == BPF_PSEUDO_MAP_FD) {
			/* A map pointer: the map's index, which the helpers tell maps apart by. */
			cp_jit_emit(j, "mov.b64 %%r%d, %d;", in->dst_reg, j->map_of[i]);
		} else {
			cp_jit_emit(j, "ld.const.u64 %%r%d, [__cuprobe_map_%d];", in->dst_reg, j->map_of[i]);
			if (in[1].imm)
				cp_jit_emit(j, "add.u64 %%r%d, %%r%d, %u;", in->dst_reg, in->dst_reg,
				     (uint32_t)in[1].imm);
		}
		if (j->maps_used && in->src_reg)
			j->maps_used[j->map_of[i]] = true;
		return 0;
	}
	case BPF_LDX:
		if (cp_jit_stack_field(j, i, slot, sizeof(slot), &bit)) {
			if (bits == 64)
				cp_jit_emit(j, "mov.b64 %%r%d, %s;", in->dst_reg, slot);
			else
				cp_jit_emit(j, "bfe.%c64 %%r%d, %s, %d, %d;",
					    BPF_MODE(in->code) == BPF_MEMSX ? 's' : 'u', in->dst_reg, slot, bit, bits);
			return 0;
		}
		if (j->base_mask[i] == MAY_CTX)
			return cp_jit_emit_ctx_load(j, i);
		if (j->base_mask[i] & MAY_CTX) {
			/*
			 * The context or memory (a slot the analysis saw both in): the
			 * kernel lets one instruction read only one of them, so the
			 * register's value says which, the context's tag or an address.
			 */
			cp_jit_emit(j, "setp.ne.u64 %%p1, %%r%d, %d;", in->src_reg, CTX_TAG);
			cp_jit_emit(j, "@%%p1 bra $L%zu_memory;", i);
			if (cp_jit_emit_ctx_load(j, i))
				return j->err;
			cp_jit_emit(j, "bra.uni $L%zu_read;", i);
			fprintf(j->out, "$L%zu_memory:\n", i);
		}
		cp_jit_emit(j, "ld.%c%d %%r%d, [%%r%d+%d];", BPF_MODE(in->code) == BPF_MEMSX ? 's' : 'u', bits,
		     in->dst_reg, in->src_reg, in->off);
		if (j->base_mask[i] & MAY_CTX)
			fprintf(j->out, "$L%zu_read:\n", i);
		return 0;
	case BPF_ST:
		cp_jit_emit(j, "mov.b64 %%t0, %s;", cp_jit_imm_text(value, sizeof(value), in->imm, 64));
		if (cp_jit_stack_field(j, i, slot, sizeof(slot), &bit))
			emit_slot_store(j, slot, bit, bits, "%t0");
		else
			cp_jit_emit(j, "st.u%d [%%r%d+%d], %%t0;", bits, in->dst_reg, in->off);
		return 0;
	case BPF_STX:
		if (BPF_MODE(in->code) == BPF_ATOMIC)
			return cp_jit_emit_atomic(j, i);
		snprintf(value, sizeof(value), "%%r%d", in->src_reg);
		if (cp_jit_stack_field(j, i, slot, sizeof(slot), &bit))
			emit_slot_store(j, slot, bit, bits, value);
		else
			cp_jit_emit(j, "st.u%d [%%r%d+%d], %s;", bits, in->dst_reg, in->off, value);
		return 0;
	}
	return cp_jit_refuse(j, -EINVAL, "instruction %zu: unknown instruction class (code 0x%02x)", i, in->code);
}

static int emit_func(struct jit *j, struct func *f)
{
	bool main = f == &j->funcs[0];
	size_t i;
	int r;

	j->emitting = f;
	if (main)
		fprintf(j->out, ".func %s (.param .b64 __cuprobe_launch)\n{\n", j->prog->name);
	else
		fprintf(j->out,
			".func (.param .b64 __cuprobe_ret) %s (.param .b64 __cuprobe_launch, .param .b64 __cuprobe_a1, .param .b64 __cuprobe_a2, .param .b64 __cuprobe_a3, .param .b64 __cuprobe_a4, .param .b64 __cuprobe_a5)\n{\n",
			func_name(j, f));
	cp_jit_emit(j, ".reg .b64 %%r<11>;");
	cp_jit_emit(j, ".reg .b64 %%t<8>;");
	cp_jit_emit(j, ".reg .b32 %%w<8>;");
	cp_jit_emit(j, ".reg .pred %%p<3>;");
	cp_jit_emit(j, ".reg .b64 %%cp_launch;");
	if (f->stack_in_registers)
		cp_jit_emit(j, ".reg .b64 %%sl<%d>;", SLOT_COUNT);
	else if (f->uses_stack)
		cp_jit_emit(j, ".local .align 8 .b8 __cuprobe_stack[%d];", f->depth ? f->depth : 8);
	cp_jit_emit(j, "ld.param.u64 %%cp_launch, [__cuprobe_launch];");
	if (main) {
		/* The context: its reads are translated; its value is a tag no address has. */
		cp_jit_emit(j, "mov.b64 %%r1, %d;", CTX_TAG);
	} else {
		for (r = 1; r <= 5; r++)
			cp_jit_emit(j, "ld.param.u64 %%r%d, [__cuprobe_a%d];", r, r);
	}
	if (f->stack_in_registers) {
		/*
		 * No access goes through r10 or a pointer from it, but such a
		 * pointer may still be compared: a value no frame address is near 0.
		 */
		cp_jit_emit(j, "mov.u64 %%r10, %d;", 8 * CP_PTX_STACK_BYTES);
		/* What a read of a slot never written gives (the kernel lets root's programs). */
		for (r = SLOT_COUNT - (f->depth + 7) / 8; r < SLOT_COUNT; r++)
			cp_jit_emit(j, "mov.b64 %%sl%d, 0;", r);
	} else if (f->uses_stack) {
		cp_jit_emit(j, "mov.u64 %%t0, __cuprobe_stack;");
		cp_jit_emit(j, "cvta.local.u64 %%r10, %%t0;");
		cp_jit_emit(j, "add.u64 %%r10, %%r10, %d;", f->depth ? f->depth : 8);
	}
	for (i = f->start; i < f->end; i++) {
		if (j->target[i])
			fprintf(j->out, "$L%zu:\n", i);
		if (emit_insn(j, i, main))
			return j->err;
		if (is_ld_imm64(&j->insn[i]))
			i++;
	}
	fputs("}\n\n", j->out);
	return 0;
}

/* Callees first: PTX wants a function declared before its calls. */
int cp_jit_emit_tree(struct jit *j, struct func *f, int depth)
{
	size_t i;

	if (f->emitted)
		return 0;
	if (depth > 64)
		return cp_jit_refuse(j, -EINVAL, "calls nest deeper than 64 functions");
	f->emitted = true;
	for (i = f->start; i < f->end; i++) {
		const struct bpf_insn *in = &j->insn[i];

		if (in->code == (BPF_JMP | BPF_CALL) && in->src_reg == BPF_PSEUDO_CALL &&
		    cp_jit_emit_tree(j, &j->funcs[cp_jit_func_at(j, i + 1 + in->imm)], depth + 1))
			return j->err;
	}
	return emit_func(j, f);
}

