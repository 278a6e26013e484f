// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The translator's pass 2 (ptx_jit.c says what the passes are). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_jit_internal.h"

/* ---- pass 2: what registers and stack slots may hold -------------------------------------- */

static const struct value other = { .mask = MAY_OTHER };

static struct value join(struct value a, struct value b)
{
	struct value v = { .mask = a.mask | b.mask };

	if ((a.mask & MAY_STACK) && (b.mask & MAY_STACK)) {
		v.off = a.off < b.off ? a.off : b.off;
		v.exact = a.exact && b.exact && a.off == b.off;
	} else if (a.mask & MAY_STACK) {
		v.off = a.off;
		v.exact = a.exact;
	} else if (b.mask & MAY_STACK) {
		v.off = b.off;
		v.exact = b.exact;
	}
	return v;
}

static bool same_value(struct value a, struct value b)
{
	return a.mask == b.mask &&
	       (!(a.mask & MAY_STACK) || (a.off == b.off && a.exact == b.exact));
}

/* Joins s into *into (allocated on first use); sets j->changed when it grew. */
static int join_state(struct jit *j, struct state **into, const struct state *s)
{
	struct state *t = *into;
	size_t k;

	if (!t) {
		t = *into = malloc(sizeof(*t));
		if (!t)
			return cp_jit_refuse(j, -ENOMEM, "out of memory");
		*t = *s;
		j->changed = true;
		return 0;
	}
	for (k = 0; k < REG_COUNT; k++) {
		struct value v = join(t->reg[k], s->reg[k]);

		if (!same_value(v, t->reg[k])) {
			t->reg[k] = v;
			j->changed = true;
		}
	}
	for (k = 0; k < SLOT_COUNT; k++)
		if ((t->slot[k] | s->slot[k]) != t->slot[k]) {
			t->slot[k] |= s->slot[k];
			j->changed = true;
		}
	if (s->escaped && !t->escaped) {
		t->escaped = true;
		j->changed = true;
	}
	return 0;
}

/* Once a frame's address has left it, any store may be to it: every slot may be anything. */
static void spoil_slots(struct state *s, size_t from)
{
	size_t k;

	for (k = from; k < SLOT_COUNT; k++)
		s->slot[k] |= MAY_OTHER;
}

static long slot_index(long off)
{
	return (off + CP_PTX_STACK_BYTES) / 8;
}

static void need_stack(struct jit *j, struct func *f, long lowest)
{
	long depth = -lowest;

	f->uses_stack = true;
	if (depth > CP_PTX_STACK_BYTES || lowest > 0)
		depth = CP_PTX_STACK_BYTES; /* the verifier keeps accesses inside: never here */
	depth = (depth + 7) & ~7l;
	if (depth > f->depth)
		f->depth = (int)depth;
}

/* A store of bytes at base + off of value v (v NULL: not a pointer the analysis follows). */
static void store(struct jit *j, struct func *f, struct state *s, size_t i, struct value base,
		  int bytes, const struct value *v)
{
	const struct bpf_insn *in = &j->insn[i];
	uint64_t kept = v ? v->mask : MAY_OTHER;
	long lowest, k;

	if (j->final && (base.mask & MAY_CTX))
		cp_jit_refuse(j, -EOPNOTSUPP, "instruction %zu: writes to the context, which is read-only", i);
	if (kept & MAY_STACK) {
		/* A pointer to the frame kept in memory: any later access may be through it. */
		s->escaped = true;
		kept = (kept & ~MAY_STACK) | MAY_OTHER;
		if (j->final)
			need_stack(j, f, -CP_PTX_STACK_BYTES);
	}
	if (j->final && (base.mask & ~MAY_STACK) && (kept & (MAY_CTX | MAY_MAPS)))
		cp_jit_refuse(j, -EOPNOTSUPP,
		       "instruction %zu: stores the context or a map pointer outside the stack, where the translation cannot follow it",
		       i);
	if (base.mask & MAY_STACK) {
		lowest = (long)base.off + in->off;
		if (j->final)
			need_stack(j, f, lowest);
		if (base.mask == MAY_STACK && base.exact && lowest >= -CP_PTX_STACK_BYTES &&
		    lowest + bytes <= 0) {
			/* The slots it touches: a whole aligned one takes the value, a part makes it a number. */
			for (k = slot_index(lowest); k <= slot_index(lowest + bytes - 1); k++)
				s->slot[k] = bytes == 8 && !(lowest & 7) ? kept : MAY_OTHER;
		} else {
			spoil_slots(s, lowest < -CP_PTX_STACK_BYTES ? 0 : (size_t)slot_index(lowest));
		}
	}
	if ((base.mask & ~MAY_STACK) && s->escaped)
		spoil_slots(s, 0);
}

/* A load of bytes at base + off: what it may give. */
static struct value load(struct jit *j, struct func *f, struct state *s, size_t i,
			 struct value base, int bytes)
{
	const struct bpf_insn *in = &j->insn[i];
	struct value v = other;
	long lowest, k;

	if (!(base.mask & MAY_STACK))
		return v;
	lowest = (long)base.off + in->off;
	if (j->final)
		need_stack(j, f, lowest);
	if (bytes != 8 || BPF_MODE(in->code) != BPF_MEM)
		return v;
	if (base.mask == MAY_STACK && base.exact && lowest >= -CP_PTX_STACK_BYTES && lowest <= -8 &&
	    !(lowest & 7)) {
		v.mask = s->slot[slot_index(lowest)] ? s->slot[slot_index(lowest)] : MAY_OTHER;
		return v;
	}
	for (k = lowest < -CP_PTX_STACK_BYTES ? 0 : slot_index(lowest); k < SLOT_COUNT; k++)
		v.mask |= s->slot[k];
	return v;
}

/*
 * In the last walk: an access of bytes at base + off that may be to the
 * frame. A plain one at one offset, within an aligned slot, can be a field
 * of that slot's register; anything else keeps the frame in memory.
 */
static void note_stack_access(struct jit *j, struct func *f, size_t i, struct value base, int16_t off,
			      int bytes, bool plain)
{
	long at = (long)base.off + off;

	if (!j->final || !(base.mask & MAY_STACK))
		return;
	if (plain && base.mask == MAY_STACK && base.exact && at >= -CP_PTX_STACK_BYTES && at + bytes <= 0 &&
	    at % bytes == 0)
		j->stack_at[i] = (int32_t)at;
	else
		f->stack_addressed = true;
}

/* What pointer arithmetic leaves: the context and map pointers are numbers after it. */
static uint64_t arithmetic(uint64_t mask)
{
	return (mask & (MAY_STACK | MAY_VALUE | MAY_SEGMENT | MAY_OTHER)) |
	       (mask & (MAY_CTX | MAY_MAPS) ? MAY_OTHER : 0);
}

static int map_bit(struct jit *j, size_t i, int map)
{
	int b;

	for (b = 0; b < j->map_bit_count; b++)
		if (j->bit_of_map[b] == map)
			return b;
	if (j->map_bit_count == MAP_BITS)
		return cp_jit_refuse(j, -EOPNOTSUPP, "instruction %zu: more than %d maps used as map pointers", i,
			      MAP_BITS), -1;
	j->bit_of_map[j->map_bit_count] = map;
	return j->map_bit_count++;
}

/* What a lookup in the maps r1 may be gives: a ring's segment, another map's value, or either. */
static uint64_t lookup_result(const struct jit *j, uint64_t maps)
{
	uint64_t result = maps & ~MAY_MAPS ? MAY_VALUE : 0; /* not only map pointers: any map */
	int b;

	for (b = 0; b < j->map_bit_count; b++)
		if ((maps & ~MAY_MAPS) || (maps & (1ull << (MAP_BIT0 + b))))
			result |= cp_ptx__ring_of(j->prog->maps, j->prog->map_count, (size_t)j->bit_of_map[b],
						  &(struct cp_ptx_ring){ 0 }) ? MAY_SEGMENT : MAY_VALUE;
	return result ? result : MAY_VALUE;
}

int cp_jit_func_at(const struct jit *j, size_t start)
{
	size_t f;

	for (f = 0; f < j->func_count; f++)
		if (j->funcs[f].start == start)
			return (int)f;
	return -1;
}

/* The effect of instruction i on s (jumps are the walker's). */
static void step(struct jit *j, struct func *f, struct state *s, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	struct value *dst = &s->reg[in->dst_reg], *src = &s->reg[in->src_reg];
	int class = BPF_CLASS(in->code), op = BPF_OP(in->code), bytes = size_bytes(BPF_SIZE(in->code));
	size_t r;

	switch (class) {
	case BPF_ALU64:
		if (op == BPF_MOV && BPF_SRC(in->code) == BPF_X && !in->off) {
			*dst = *src;
			return;
		}
		/* Pointer arithmetic: a stack or map value pointer moves, and stays one. */
		if ((op == BPF_ADD || op == BPF_SUB) && (dst->mask & MAY_STACK)) {
			if (BPF_SRC(in->code) == BPF_K) {
				long off = (long)dst->off + (op == BPF_ADD ? in->imm : -(long)in->imm);

				/* Past either end: no access the verifier lets through. */
				dst->off = off < -CP_PTX_STACK_BYTES ? -CP_PTX_STACK_BYTES :
					   off > CP_PTX_STACK_BYTES ? CP_PTX_STACK_BYTES : (int32_t)off;
			} else {
				dst->off = -CP_PTX_STACK_BYTES; /* somewhere in the frame */
				dst->exact = false;
			}
			dst->mask = arithmetic(dst->mask);
			return;
		}
		if ((op == BPF_ADD || op == BPF_SUB) && (dst->mask & (MAY_VALUE | MAY_SEGMENT))) {
			dst->mask = arithmetic(dst->mask);
			return;
		}
		if (op == BPF_ADD && BPF_SRC(in->code) == BPF_X &&
		    (src->mask & (MAY_STACK | MAY_VALUE | MAY_SEGMENT))) {
			*dst = (struct value){ .mask = arithmetic(src->mask) | (dst->mask ? MAY_OTHER : 0),
					       .off = -CP_PTX_STACK_BYTES };
			return;
		}
		*dst = other;
		return;
	case BPF_ALU:
		*dst = other;
		return;
	case BPF_LD: {
		int b;

		if (!in->src_reg) {
			*dst = other;
			return;
		}
		if (in->src_reg == BPF_PSEUDO_MAP_VALUE) {
			*dst = (struct value){ .mask = MAY_VALUE };
			return;
		}
		b = map_bit(j, i, j->map_of[i]);
		*dst = b < 0 ? other : (struct value){ .mask = 1ull << (MAP_BIT0 + b) };
		return;
	}
	case BPF_LDX:
		if (j->final)
			j->base_mask[i] = src->mask;
		note_stack_access(j, f, i, *src, in->off, bytes, true);
		*dst = load(j, f, s, i, *src, bytes);
		return;
	case BPF_ST:
		if (j->final)
			j->base_mask[i] = dst->mask;
		note_stack_access(j, f, i, *dst, in->off, bytes, true);
		store(j, f, s, i, *dst, bytes, NULL);
		return;
	case BPF_STX:
		if (j->final)
			j->base_mask[i] = dst->mask;
		if (BPF_MODE(in->code) == BPF_MEM || in->imm == CP_BPF_STORE_REL) {
			note_stack_access(j, f, i, *dst, in->off, bytes, BPF_MODE(in->code) == BPF_MEM);
			store(j, f, s, i, *dst, bytes, src);
			return;
		}
		if (in->imm == CP_BPF_LOAD_ACQ) {
			if (j->final)
				j->base_mask[i] = src->mask;
			if (j->final && (src->mask & MAY_CTX))
				cp_jit_refuse(j, -EOPNOTSUPP, "instruction %zu: a load-acquire of the context", i);
			note_stack_access(j, f, i, *src, in->off, bytes, false);
			*dst = load(j, f, s, i, *src, bytes);
			return;
		}
		note_stack_access(j, f, i, *dst, in->off, bytes, false);
		if (j->final && (dst->mask & MAY_CTX))
			cp_jit_refuse(j, -EOPNOTSUPP, "instruction %zu: an atomic operation on the context", i);
		store(j, f, s, i, *dst, bytes, NULL);
		if (in->imm == BPF_CMPXCHG)
			s->reg[BPF_REG_0] = other;
		else if (in->imm & BPF_FETCH)
			*src = other;
		return;
	case BPF_JMP:
		if (op == BPF_CALL && in->src_reg == BPF_PSEUDO_CALL) {
			int callee = cp_jit_func_at(j, i + 1 + in->imm);
			struct func *c = &j->funcs[callee];

			for (r = 1; r <= 5; r++) {
				struct value arg = s->reg[r], joined;

				if (arg.mask & MAY_STACK) {
					/* The callee's r10 is its own: a pointer to this frame is memory to it. */
					s->escaped = true;
					arg.mask = (arg.mask & ~MAY_STACK) | MAY_OTHER;
				}
				joined = c->called ? join(c->args[r], arg) : arg;
				if (!c->called || !same_value(joined, c->args[r])) {
					c->args[r] = joined;
					j->changed = true;
				}
			}
			c->called = true;
			if (s->escaped) {
				spoil_slots(s, 0);
				if (j->final)
					need_stack(j, f, -CP_PTX_STACK_BYTES);
			}
			s->reg[BPF_REG_0] = (struct value){ .mask = c->ret ? c->ret : MAY_OTHER };
			for (r = 1; r <= 5; r++)
				s->reg[r] = other;
			return;
		}
		if (op == BPF_CALL) {
			uint64_t maps = s->reg[BPF_REG_1].mask; /* for a lookup: the maps it may be in */

			if (j->final) {
				j->base_mask[i] = s->reg[BPF_REG_1].mask;
				/* Helpers read the key and the value where r2 and r3 point. */
				for (r = 2; r <= 3; r++)
					if (s->reg[r].mask & MAY_STACK)
						need_stack(j, f, s->reg[r].off);
				/*
				 * A map helper's key is one 32-bit read; an update copies
				 * its value from memory. The others the GPU has read none.
				 */
				if (in->imm == BPF_FUNC_map_lookup_elem || in->imm == BPF_FUNC_map_update_elem)
					note_stack_access(j, f, i, s->reg[BPF_REG_2], 0, 4, true);
				if (in->imm == BPF_FUNC_map_update_elem)
					note_stack_access(j, f, i, s->reg[BPF_REG_3], 0, 1, false);
			}
			for (r = 0; r <= 5; r++)
				s->reg[r] = other;
			if (in->imm == BPF_FUNC_map_lookup_elem)
				s->reg[BPF_REG_0] = (struct value){ .mask = lookup_result(j, maps) }; /* or NULL */
			return;
		}
		if (op == BPF_EXIT) {
			uint64_t ret = s->reg[BPF_REG_0].mask;

			if (ret & MAY_STACK)
				ret = (ret & ~MAY_STACK) | MAY_OTHER;
			if ((f->ret | ret) != f->ret) {
				f->ret |= ret;
				j->changed = true;
			}
		}
		return;
	default:
		return;
	}
}

/* The state a function starts with: r1-r5 as called (main: the context), r10 its stack's end. */
static void entry_state(const struct jit *j, const struct func *f, struct state *s)
{
	size_t r;

	memset(s, 0, sizeof(*s));
	for (r = 0; r < REG_COUNT; r++)
		s->reg[r] = other;
	if (f == &j->funcs[0])
		s->reg[BPF_REG_1] = (struct value){ .mask = MAY_CTX };
	else
		for (r = 1; r <= 5; r++)
			s->reg[r] = f->args[r];
	s->reg[BPF_REG_10] = (struct value){ .mask = MAY_STACK, .off = 0, .exact = true };
	for (r = 0; r < SLOT_COUNT; r++)
		s->slot[r] = MAY_OTHER; /* uninitialized: the verifier lets nothing read it */
}

/* Walks every reached block of f once from its state, joining into its successors. */
static int walk_func(struct jit *j, struct func *f)
{
	struct state entry, s;
	size_t b, i;

	if (!f->called)
		return 0;
	entry_state(j, f, &entry);
	if (join_state(j, &j->states[f->start], &entry))
		return j->err;
	for (b = f->start; b < f->end; b++) {
		if (!j->leader[b] || !j->states[b])
			continue;
		s = *j->states[b];
		for (i = b; i < f->end; i++) {
			const struct bpf_insn *in = &j->insn[i];
			int class = BPF_CLASS(in->code), op = BPF_OP(in->code);

			if (i > b && j->leader[i]) {
				if (join_state(j, &j->states[i], &s))
					return j->err;
				break;
			}
			step(j, f, &s, i);
			if (j->err)
				return j->err;
			if (j->final && s.escaped)
				f->stack_addressed = true;
			if (is_ld_imm64(in)) {
				i++;
				continue;
			}
			if ((class == BPF_JMP || class == BPF_JMP32) && op != BPF_CALL) {
				size_t target;

				if (op == BPF_EXIT)
					break;
				target = i + 1 + (class == BPF_JMP32 && op == BPF_JA ? in->imm : in->off);
				if (join_state(j, &j->states[target], &s))
					return j->err;
				if (op == BPF_JA)
					break;
			}
		}
	}
	return 0;
}

/*
 * Registers for the frame when every access to it was seen at one offset
 * and it is at most REGISTER_FRAME_BYTES deep: a deeper one could raise
 * the register count of every kernel it is injected into, and lower their
 * occupancy. A block the walk never reached (none in a verified program)
 * keeps it in memory, as its accesses were not seen.
 */
static void choose_stack_home(struct jit *j, struct func *f)
{
	size_t b;

	for (b = f->start; b < f->end; b++)
		if (j->leader[b] && !j->states[b])
			f->stack_addressed = true;
	f->stack_in_registers = f->uses_stack && !f->stack_addressed && f->depth <= REGISTER_FRAME_BYTES;
}

int cp_jit_analyze(struct jit *j)
{
	size_t f, rounds = 0;

	j->funcs[0].called = true;
	do {
		j->changed = false;
		for (f = 0; f < j->func_count; f++)
			if (walk_func(j, &j->funcs[f]))
				return j->err;
		/* Masks only grow and offsets only fall: this ends; the bound is a guard. */
		if (++rounds > 10000)
			return cp_jit_refuse(j, -EINVAL, "the analysis did not settle");
	} while (j->changed);
	j->final = true;
	for (f = 0; f < j->func_count; f++)
		if (walk_func(j, &j->funcs[f]))
			return j->err;
	for (f = 0; f < j->func_count; f++)
		choose_stack_home(j, &j->funcs[f]);
	return 0;
}

