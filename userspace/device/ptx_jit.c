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
 *     register a 64-bit PTX register, the stack a .local array addressed
 *     generically, helpers inline.
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

#include "cuprobe_events.h"
#include "ptx_jit.h"

/* Instructions newer than the uapi headers of Debian 12 (kernel 6.1). */
#ifndef BPF_MEMSX
#define BPF_MEMSX 0x80
#endif
#ifndef BPF_JCOND
#define BPF_JCOND 0xe0
#endif
#define CP_BPF_LOAD_ACQ 0x100
#define CP_BPF_STORE_REL 0x110
#define CP_BPF_F_MMAPABLE (1u << 10)

#define REG_COUNT 11
#define SECOND_HALF (-2) /* map_of of an ld_imm64's second instruction */
#define SLOT_COUNT (CP_PTX_STACK_BYTES / 8)

/* What a register or stack slot may hold: a bit per kind, a bit per map pointer. */
#define MAY_CTX (1ull << 0)
#define MAY_OTHER (1ull << 1) /* a number, or a pointer other than these */
#define MAY_STACK (1ull << 2) /* a pointer into the function's own stack */
#define MAY_VALUE (1ull << 3) /* a pointer into a map's values (GPU-visible memory) */
#define MAP_BIT0 4
#define MAP_BITS (64 - MAP_BIT0)
#define MAY_MAPS (~0ull << MAP_BIT0)
/* What r1 holds for the context: never an address. */
#define CTX_TAG 1

/* The helpers, by id, as the kernel names them (the uapi's list). */
#define CP_HELPER_NAME(name, ...) [BPF_FUNC_##name] = "bpf_" #name
static const char *const helper_names[] = { __BPF_FUNC_MAPPER(CP_HELPER_NAME) };
#undef CP_HELPER_NAME

/* The context's fields, in order (cuprobe_events.h's one list). */
struct ctx_field {
	const char *name;
	const char *source;      /* special register; NULL: the launch slot */
	int bits;
};

#define CP_CTX_FIELD(name, source, bits) { #name, source, bits },
static const struct ctx_field ctx_fields[] = { CUPROBE_GPU_CTX_FIELDS(CP_CTX_FIELD) };
#undef CP_CTX_FIELD
#define CTX_FIELD_COUNT (sizeof(ctx_fields) / sizeof(ctx_fields[0]))

_Static_assert(sizeof(struct cuprobe_gpu_ctx) == CTX_FIELD_COUNT * 8, "one __u64 per field");
/* The verifier checks device programs as kprobe programs: ctx is a struct pt_regs to it. */
_Static_assert(sizeof(struct cuprobe_gpu_ctx) <= 168, "within x86-64's struct pt_regs");

struct value {
	uint64_t mask;
	int32_t off;             /* MAY_STACK: the offset from r10, or the lowest it may be */
	bool exact;              /* off is the one offset it has */
};

struct state {
	struct value reg[REG_COUNT];
	uint64_t slot[SLOT_COUNT]; /* slot k: r10 - 512 + 8 * k */
	bool escaped;            /* a pointer to this frame went to a call or into memory */
};

struct func {
	size_t start, end;       /* its instructions: [start, end) */
	struct value args[6];    /* r1-r5 as its callers pass them (index 1-5) */
	uint64_t ret;            /* r0 at its exits */
	bool called;
	int depth;               /* stack bytes it needs */
	bool uses_stack;
	bool emitted;
};

struct jit {
	const struct cp_ptx_program *prog;
	const struct bpf_insn *insn;
	size_t count;
	char *error;
	size_t error_size;
	bool *maps_used;
	/* check */
	struct func *funcs;
	size_t func_count;
	size_t *func_of;         /* instruction -> its function */
	bool *leader;            /* a block starts here */
	bool *target;            /* a branch goes here: a label */
	int *map_of;             /* ld_imm64 of a map: the map's index; -1 */
	int bit_of_map[MAP_BITS];/* map pointer bits: which map each is */
	int map_bit_count;
	/* analysis */
	struct state **states;   /* at each leader */
	uint64_t *base_mask;     /* loads, stores: what the base may be; calls: r1 */
	bool changed;
	bool final;
	int err;
	/* emission */
	FILE *out;
	char name_buf[160];
};

static int refuse(struct jit *j, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The first refusal says why; returns err. */
static int refuse(struct jit *j, int err, const char *fmt, ...)
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
static const char *helper_name(char *buf, size_t len, int32_t id)
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

static bool is_ld_imm64(const struct bpf_insn *in)
{
	return in->code == (BPF_LD | BPF_IMM | BPF_DW);
}

static bool valid_size(int size)
{
	return size == BPF_B || size == BPF_H || size == BPF_W || size == BPF_DW;
}

static int size_bytes(int size)
{
	return size == BPF_B ? 1 : size == BPF_H ? 2 : size == BPF_W ? 4 : 8;
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
		refuse(j, -EINVAL, "instruction %zu: a map (fd %d) the object does not have", i, fd);
		return -1;
	}
	map = &j->prog->maps[m];
	if (map->type != BPF_MAP_TYPE_ARRAY || !(map->flags & CP_BPF_F_MMAPABLE)) {
		refuse(j, -EOPNOTSUPP,
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
			return refuse(j, -EOPNOTSUPP,
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
	return refuse(j, -EINVAL, "instruction %zu: unknown ALU instruction (code 0x%02x, off %d)", i,
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
			return refuse(j, -EOPNOTSUPP,
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
			return refuse(j, -EOPNOTSUPP,
				      "instruction %zu: kfunc calls (BTF id %d) are not available on the GPU", i,
				      in->imm);
		if (in->src_reg == BPF_PSEUDO_CALL) {
			target = (long)i + 1 + in->imm;
			if (target < 0 || (size_t)target >= j->count)
				return refuse(j, -EINVAL, "instruction %zu: calls outside the program", i);
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
			return refuse(j, -EOPNOTSUPP,
				      "instruction %zu: helper %s is not available on the GPU", i,
				      helper_name(name, sizeof(name), in->imm));
		}
	case BPF_EXIT:
		if (!is64)
			break;
		return 0;
	case BPF_JCOND:
		return refuse(j, -EOPNOTSUPP, "instruction %zu: may_goto is not available on the GPU", i);
	default:
		break;
	}
	if (op == BPF_CALL || op == BPF_EXIT || (op != BPF_JA && op > BPF_JSLE))
		return refuse(j, -EINVAL, "instruction %zu: unknown jump instruction (code 0x%02x)", i,
			      in->code);
	if (target < 0 || (size_t)target >= j->count)
		return refuse(j, -EINVAL, "instruction %zu: jumps outside the program", i);
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
	return refuse(j, -EINVAL, "instruction %zu: unknown atomic operation 0x%x (size %d)", i, in->imm,
		      size_bytes(size));
}

static int check_insn(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	int class = BPF_CLASS(in->code), mode = BPF_MODE(in->code);

	if (in->dst_reg >= REG_COUNT || in->src_reg >= REG_COUNT)
		return refuse(j, -EINVAL, "instruction %zu: register r%d does not exist", i,
			      in->dst_reg >= REG_COUNT ? in->dst_reg : in->src_reg);
	switch (class) {
	case BPF_ALU: case BPF_ALU64:
		return check_alu(j, i, in);
	case BPF_JMP: case BPF_JMP32:
		return check_jmp(j, i, in);
	case BPF_LD:
		if (mode == BPF_ABS || mode == BPF_IND)
			return refuse(j, -EOPNOTSUPP,
				      "instruction %zu: packet access (BPF_LD_ABS/IND) is not available on the GPU", i);
		if (!is_ld_imm64(in) || i + 1 >= j->count)
			return refuse(j, -EINVAL, "instruction %zu: unknown load (code 0x%02x)", i, in->code);
		switch (in->src_reg) {
		case 0:
			return 0;
		case BPF_PSEUDO_MAP_FD:
		case BPF_PSEUDO_MAP_VALUE:
			j->map_of[i] = device_map(j, i, in->imm);
			if (j->map_of[i] < 0)
				return j->err;
			if (in->src_reg == BPF_PSEUDO_MAP_VALUE &&
			    (uint32_t)in[1].imm >= j->prog->maps[j->map_of[i]].value_size *
						   (uint64_t)j->prog->maps[j->map_of[i]].max_entries)
				return refuse(j, -EINVAL, "instruction %zu: points past map %s", i,
					      j->prog->maps[j->map_of[i]].name);
			return 0;
		case BPF_PSEUDO_BTF_ID:
			return refuse(j, -EOPNOTSUPP,
				      "instruction %zu: kernel variables (ksym, BTF id %d) are not available on the GPU",
				      i, in->imm);
		case BPF_PSEUDO_FUNC:
			return refuse(j, -EOPNOTSUPP,
				      "instruction %zu: callbacks (a function's address, for bpf_loop and the like) are not available on the GPU",
				      i);
		default:
			return refuse(j, -EINVAL, "instruction %zu: unknown ld_imm64 kind %d", i,
				      in->src_reg);
		}
	case BPF_LDX:
		if ((mode != BPF_MEM && mode != BPF_MEMSX) || !valid_size(BPF_SIZE(in->code)) ||
		    (mode == BPF_MEMSX && BPF_SIZE(in->code) == BPF_DW))
			return refuse(j, -EINVAL, "instruction %zu: unknown load (code 0x%02x)", i, in->code);
		return 0;
	case BPF_ST:
		if (mode != BPF_MEM)
			return refuse(j, -EINVAL, "instruction %zu: unknown store (code 0x%02x)", i, in->code);
		return 0;
	case BPF_STX:
		if (mode == BPF_ATOMIC)
			return check_atomic(j, i, in);
		if (mode != BPF_MEM)
			return refuse(j, -EINVAL, "instruction %zu: unknown store (code 0x%02x)", i, in->code);
		return 0;
	}
	return refuse(j, -EINVAL, "instruction %zu: unknown instruction class (code 0x%02x)", i, in->code);
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
				return refuse(j, -EINVAL, "instruction %zu: a broken ld_imm64", i - 1);
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
				return refuse(j, -EINVAL, "instruction %zu: a branch into an ld_imm64", i);
			continue;
		}
		if ((class != BPF_JMP && class != BPF_JMP32) || op == BPF_CALL || op == BPF_EXIT)
			continue;
		target = (long)i + 1 + (class == BPF_JMP32 && op == BPF_JA ? in->imm : in->off);
		if (j->func_of[target] != j->func_of[i])
			return refuse(j, -EINVAL, "instruction %zu: jumps into another function", i);
	}
	/* The last instruction of each function must not fall through into the next. */
	for (f = 0; f < j->func_count; f++) {
		const struct bpf_insn *last = &j->insn[j->funcs[f].end - 1];
		int op = BPF_OP(last->code);

		if (!((BPF_CLASS(last->code) == BPF_JMP && (op == BPF_EXIT || op == BPF_JA)) ||
		      (BPF_CLASS(last->code) == BPF_JMP32 && op == BPF_JA)))
			return refuse(j, -EINVAL, "instruction %zu: falls off the end of its function",
				      j->funcs[f].end - 1);
	}
	return 0;
}

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
			return refuse(j, -ENOMEM, "out of memory");
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
		refuse(j, -EOPNOTSUPP, "instruction %zu: writes to the context, which is read-only", i);
	if (kept & MAY_STACK) {
		/* A pointer to the frame kept in memory: any later access may be through it. */
		s->escaped = true;
		kept = (kept & ~MAY_STACK) | MAY_OTHER;
		if (j->final)
			need_stack(j, f, -CP_PTX_STACK_BYTES);
	}
	if (j->final && (base.mask & ~MAY_STACK) && (kept & (MAY_CTX | MAY_MAPS)))
		refuse(j, -EOPNOTSUPP,
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

/* What pointer arithmetic leaves: the context and map pointers are numbers after it. */
static uint64_t arithmetic(uint64_t mask)
{
	return (mask & (MAY_STACK | MAY_VALUE | MAY_OTHER)) |
	       (mask & (MAY_CTX | MAY_MAPS) ? MAY_OTHER : 0);
}

static int map_bit(struct jit *j, size_t i, int map)
{
	int b;

	for (b = 0; b < j->map_bit_count; b++)
		if (j->bit_of_map[b] == map)
			return b;
	if (j->map_bit_count == MAP_BITS)
		return refuse(j, -EOPNOTSUPP, "instruction %zu: more than %d maps used as map pointers", i,
			      MAP_BITS), -1;
	j->bit_of_map[j->map_bit_count] = map;
	return j->map_bit_count++;
}

static int func_at(const struct jit *j, size_t start)
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
		if ((op == BPF_ADD || op == BPF_SUB) && (dst->mask & MAY_VALUE)) {
			dst->mask = arithmetic(dst->mask);
			return;
		}
		if (op == BPF_ADD && BPF_SRC(in->code) == BPF_X && (src->mask & (MAY_STACK | MAY_VALUE))) {
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
		*dst = load(j, f, s, i, *src, bytes);
		return;
	case BPF_ST:
		if (j->final)
			j->base_mask[i] = dst->mask;
		store(j, f, s, i, *dst, bytes, NULL);
		return;
	case BPF_STX:
		if (j->final)
			j->base_mask[i] = dst->mask;
		if (BPF_MODE(in->code) == BPF_MEM || in->imm == CP_BPF_STORE_REL) {
			store(j, f, s, i, *dst, bytes, src);
			return;
		}
		if (in->imm == CP_BPF_LOAD_ACQ) {
			if (j->final)
				j->base_mask[i] = src->mask;
			if (j->final && (src->mask & MAY_CTX))
				refuse(j, -EOPNOTSUPP, "instruction %zu: a load-acquire of the context", i);
			*dst = load(j, f, s, i, *src, bytes);
			return;
		}
		if (j->final && (dst->mask & MAY_CTX))
			refuse(j, -EOPNOTSUPP, "instruction %zu: an atomic operation on the context", i);
		store(j, f, s, i, *dst, bytes, NULL);
		if (in->imm == BPF_CMPXCHG)
			s->reg[BPF_REG_0] = other;
		else if (in->imm & BPF_FETCH)
			*src = other;
		return;
	case BPF_JMP:
		if (op == BPF_CALL && in->src_reg == BPF_PSEUDO_CALL) {
			int callee = func_at(j, i + 1 + in->imm);
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
			if (j->final) {
				j->base_mask[i] = s->reg[BPF_REG_1].mask;
				/* Helpers read the key and the value where r2 and r3 point. */
				for (r = 2; r <= 3; r++)
					if (s->reg[r].mask & MAY_STACK)
						need_stack(j, f, s->reg[r].off);
			}
			for (r = 0; r <= 5; r++)
				s->reg[r] = other;
			if (in->imm == BPF_FUNC_map_lookup_elem)
				s->reg[BPF_REG_0] = (struct value){ .mask = MAY_VALUE }; /* or NULL */
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

static int analyze(struct jit *j)
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
			return refuse(j, -EINVAL, "the analysis did not settle");
	} while (j->changed);
	j->final = true;
	for (f = 0; f < j->func_count; f++)
		if (walk_func(j, &j->funcs[f]))
			return j->err;
	return 0;
}

/* ---- pass 3: PTX ----------------------------------------------------------------------------- */

static void emit(struct jit *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(struct jit *j, const char *fmt, ...)
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
static const char *imm_text(char *buf, size_t len, int64_t value, int bits)
{
	if (bits == 64)
		snprintf(buf, len, "0x%016llx", (unsigned long long)value);
	else
		snprintf(buf, len, "0x%08x", (unsigned int)value);
	return buf;
}

/* u32 -> its low bits into rD, zero-extended. */
static void emit_zext32(struct jit *j, int dst, const char *w)
{
	emit(j, "cvt.u64.u32 %%r%d, %s;", dst, w);
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

	emit(j, "setp.eq.u%d %%p0, %s, 0;", bits, y);
	if (is_signed) {
		imm_text(minus_one, sizeof(minus_one), -1, bits);
		emit(j, "setp.eq.u%d %%p1, %s, %s;", bits, y, minus_one);
		emit(j, "or.pred %%p2, %%p0, %%p1;");
		emit(j, "selp.b%d %s1, 1, %s, %%p2;", bits, t, y);
		emit(j, "%s.s%d %s2, %s, %s1;", mod ? "rem" : "div", bits, t, x, t);
		if (mod) {
			emit(j, "selp.b%d %s2, 0, %s2, %%p1;", bits, t, t);
		} else {
			emit(j, "neg.s%d %s3, %s;", bits, t, x);
			emit(j, "selp.b%d %s2, %s3, %s2, %%p1;", bits, t, t, t);
		}
	} else {
		emit(j, "selp.b%d %s1, 1, %s, %%p0;", bits, t, y);
		emit(j, "%s.u%d %s2, %s, %s1;", mod ? "rem" : "div", bits, t, x, t);
	}
	if (mod)
		emit(j, "selp.b%d %s, %s, %s2, %%p0;", bits, x, x, t);
	else
		emit(j, "selp.b%d %s, 0, %s2, %%p0;", bits, x, t);
}

/* A byte swap of the low bits of rD (16, 32 or 64), zero-extended. */
static void emit_bswap(struct jit *j, int dst, int bits)
{
	if (bits == 64) {
		emit(j, "mov.b64 {%%w0, %%w1}, %%r%d;", dst);
		emit(j, "prmt.b32 %%w2, %%w0, 0, 0x0123;");
		emit(j, "prmt.b32 %%w3, %%w1, 0, 0x0123;");
		emit(j, "mov.b64 %%r%d, {%%w3, %%w2};", dst);
		return;
	}
	emit(j, "cvt.u32.u64 %%w0, %%r%d;", dst);
	emit(j, "prmt.b32 %%w0, %%w0, 0, %s;", bits == 16 ? "0x4401" : "0x0123");
	emit_zext32(j, dst, "%w0");
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
			emit(j, "mov.b64 %%r%d, %%r%d;", d, s);
			return 0;
		}
		if (is64 && !in->off) {
			emit(j, "mov.b64 %%r%d, %s;", d, imm_text(src, sizeof(src), in->imm, 64));
			return 0;
		}
		if (is64) {
			/* movsx: the low off bits, sign-extended */
			emit(j, "bfe.s64 %%r%d, %%r%d, 0, %d;", d, s, in->off);
			return 0;
		}
		if (!use_x) {
			emit(j, "mov.b64 %%r%d, %s;", d, imm_text(src, sizeof(src), (uint32_t)in->imm, 64));
			return 0;
		}
		emit(j, "cvt.u32.u64 %%w0, %%r%d;", s);
		if (in->off)
			emit(j, "bfe.s32 %%w0, %%w0, 0, %d;", in->off);
		emit_zext32(j, d, "%w0");
		return 0;
	}
	if (op == BPF_END) {
		if (!is64 && BPF_SRC(in->code) == BPF_TO_LE) {
			/* This is a little-endian machine's BPF: to little-endian only truncates. */
			if (in->imm < 64)
				emit(j, "and.b64 %%r%d, %%r%d, %s;", d, d,
				     imm_text(src, sizeof(src), (int64_t)((1ull << in->imm) - 1), 64));
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
			imm_text(src, sizeof(src), in->imm, 64);
	} else {
		snprintf(dst, sizeof(dst), "%%w4");
		emit(j, "cvt.u32.u64 %%w4, %%r%d;", d);
		if (use_x) {
			emit(j, "cvt.u32.u64 %%w5, %%r%d;", s);
			snprintf(src, sizeof(src), "%%w5");
		} else {
			imm_text(src, sizeof(src), in->imm, 32);
		}
	}
	switch (op) {
	case BPF_ADD: case BPF_SUB: case BPF_MUL: case BPF_OR: case BPF_AND: case BPF_XOR:
		emit(j, "%s%d %s, %s, %s;", simple[op >> 4], bits, dst, dst, src);
		break;
	case BPF_DIV: case BPF_MOD:
		if (!use_x) {
			/* setp and selp want the divisor in a register. */
			emit(j, "mov.b%d %s6, %s;", bits, is64 ? "%t" : "%w", src);
			snprintf(src, sizeof(src), "%s6", is64 ? "%t" : "%w");
		}
		emit_divmod(j, dst, src, op == BPF_MOD, in->off == 1, bits);
		break;
	case BPF_LSH: case BPF_RSH: case BPF_ARSH:
		/* The count masked to the width, as x86-64's shifts (and its BPF JIT) do. */
		if (use_x) {
			if (is64)
				emit(j, "cvt.u32.u64 %%w5, %%r%d;", s);
			emit(j, "and.b32 %%w5, %%w5, %d;", bits - 1);
			snprintf(count, sizeof(count), "%%w5");
		} else {
			snprintf(count, sizeof(count), "%d", in->imm & (bits - 1));
		}
		emit(j, "%s.%s%d %s, %s, %s;", op == BPF_LSH ? "shl" : "shr",
		     op == BPF_LSH ? "b" : op == BPF_RSH ? "u" : "s", bits, dst, dst, count);
		break;
	case BPF_NEG:
		emit(j, "neg.s%d %s, %s;", bits, dst, dst);
		break;
	}
	if (!is64)
		emit_zext32(j, d, "%w4");
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
static void emit_value_address(struct jit *j, const struct cp_ptx_map *map, int m, const char *dst)
{
	uint32_t stride = (map->value_size + 7) & ~7u; /* the kernel's array element size */

	emit(j, "ld.const.u64 %%t0, [__cuprobe_map_%d];", m);
	emit(j, "mul.wide.u32 %%t1, %%w0, %u;", stride);
	emit(j, "add.u64 %s, %%t0, %%t1;", dst);
}

static void emit_lookup(struct jit *j, size_t i, int m, const char *done)
{
	const struct cp_ptx_map *map = &j->prog->maps[m];

	emit(j, "setp.lt.u32 %%p0, %%w0, %u;", map->max_entries);
	emit_value_address(j, map, m, "%t2");
	emit(j, "selp.b64 %%r0, %%t2, 0, %%p0;");
	if (done)
		emit(j, "bra.uni %s;", done);
}

/* bpf_map_update_elem on an array, as array_map_update_elem does it (BPF_F_LOCK: -EINVAL). */
static void emit_update(struct jit *j, size_t i, int m, const char *done)
{
	const struct cp_ptx_map *map = &j->prog->maps[m];
	char err[24];

	emit(j, "mov.b64 %%r0, %s;", imm_text(err, sizeof(err), -EINVAL, 64));
	emit(j, "setp.gt.u64 %%p0, %%r4, %d;", BPF_EXIST);
	emit(j, "@%%p0 bra %s;", done);
	emit(j, "mov.b64 %%r0, %s;", imm_text(err, sizeof(err), -E2BIG, 64));
	emit(j, "setp.ge.u32 %%p0, %%w0, %u;", map->max_entries);
	emit(j, "@%%p0 bra %s;", done);
	emit(j, "mov.b64 %%r0, %s;", imm_text(err, sizeof(err), -EEXIST, 64));
	emit(j, "setp.eq.u64 %%p0, %%r4, %d;", BPF_NOEXIST);
	emit(j, "@%%p0 bra %s;", done);
	emit_value_address(j, map, m, "%t2");
	/* value_size bytes from *r3: eight at a time where both are aligned, else one. */
	emit(j, "mov.u64 %%t3, 0;");
	if (map->value_size % 8 == 0) {
		emit(j, "or.b64 %%t4, %%t2, %%r3;");
		emit(j, "and.b64 %%t4, %%t4, 7;");
		emit(j, "setp.ne.u64 %%p0, %%t4, 0;");
		emit(j, "@%%p0 bra $L%zu_%d_bytes;", i, m);
		fprintf(j->out, "$L%zu_%d_words:\n", i, m);
		emit(j, "add.u64 %%t4, %%r3, %%t3;");
		emit(j, "ld.u64 %%t5, [%%t4];");
		emit(j, "add.u64 %%t4, %%t2, %%t3;");
		emit(j, "st.u64 [%%t4], %%t5;");
		emit(j, "add.u64 %%t3, %%t3, 8;");
		emit(j, "setp.lt.u64 %%p0, %%t3, %u;", map->value_size);
		emit(j, "@%%p0 bra $L%zu_%d_words;", i, m);
		emit(j, "bra.uni $L%zu_%d_copied;", i, m);
	}
	fprintf(j->out, "$L%zu_%d_bytes:\n", i, m);
	emit(j, "add.u64 %%t4, %%r3, %%t3;");
	emit(j, "ld.u8 %%w1, [%%t4];");
	emit(j, "add.u64 %%t4, %%t2, %%t3;");
	emit(j, "st.u8 [%%t4], %%w1;");
	emit(j, "add.u64 %%t3, %%t3, 1;");
	emit(j, "setp.lt.u64 %%p0, %%t3, %u;", map->value_size);
	emit(j, "@%%p0 bra $L%zu_%d_bytes;", i, m);
	fprintf(j->out, "$L%zu_%d_copied:\n", i, m);
	emit(j, "mov.b64 %%r0, 0;");
	emit(j, "bra.uni %s;", done);
}

static int emit_map_helper(struct jit *j, size_t i, bool update)
{
	const struct bpf_insn *in = &j->insn[i];
	uint64_t maps = j->base_mask[i];
	char done[48], name[64];
	bool single;
	int b, m;

	/* Also something else (a slot the analysis saw both in): any map the program names. */
	if (maps & ~MAY_MAPS)
		maps |= j->map_bit_count ? (~0ull >> (MAP_BITS - j->map_bit_count)) << MAP_BIT0 : 0;
	if (!(maps & MAY_MAPS))
		return refuse(j, -EINVAL, "instruction %zu: helper %s without a map", i,
			      helper_name(name, sizeof(name), in->imm));
	snprintf(done, sizeof(done), "$L%zu_done", i);
	emit(j, "ld.u32 %%w0, [%%r2];");
	/* Each map r1 may be, told apart by its tag (the map's index) where there are several. */
	single = !(maps & (maps - 1));
	for (b = 0; b < j->map_bit_count; b++) {
		if (!(maps & (1ull << (MAP_BIT0 + b))))
			continue;
		m = j->bit_of_map[b];
		if (!single) {
			emit(j, "setp.ne.u64 %%p1, %%r1, %d;", m);
			emit(j, "@%%p1 bra $L%zu_not%d;", i, m);
		}
		if (update)
			emit_update(j, i, m, done);
		else
			emit_lookup(j, i, m, single ? NULL : done);
		if (!single)
			fprintf(j->out, "$L%zu_not%d:\n", i, m);
	}
	if (!single)
		emit(j, "mov.b64 %%r0, 0;"); /* never: r1 is one of them */
	fprintf(j->out, "%s:\n", done);
	return 0;
}

static int emit_call(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	char name[64];
	int r;

	if (in->src_reg == BPF_PSEUDO_CALL) {
		const struct func *callee = &j->funcs[func_at(j, i + 1 + in->imm)];

		emit(j, "{");
		emit(j, ".param .b64 __cuprobe_result;");
		emit(j, ".param .b64 __cuprobe_p0;");
		for (r = 1; r <= 5; r++)
			emit(j, ".param .b64 __cuprobe_p%d;", r);
		emit(j, "st.param.b64 [__cuprobe_p0], %%cp_launch;");
		for (r = 1; r <= 5; r++)
			emit(j, "st.param.b64 [__cuprobe_p%d], %%r%d;", r, r);
		emit(j, "call (__cuprobe_result), %s, (__cuprobe_p0, __cuprobe_p1, __cuprobe_p2, __cuprobe_p3, __cuprobe_p4, __cuprobe_p5);",
		     func_name(j, callee));
		emit(j, "ld.param.b64 %%r0, [__cuprobe_result];");
		emit(j, "}");
		return 0;
	}
	switch (in->imm) {
	case BPF_FUNC_map_lookup_elem:
		return emit_map_helper(j, i, false);
	case BPF_FUNC_map_update_elem:
		return emit_map_helper(j, i, true);
	case BPF_FUNC_ktime_get_ns:
		emit(j, "mov.u64 %%r0, %%globaltimer;");
		return 0;
	case BPF_FUNC_get_smp_processor_id:
		emit(j, "mov.u32 %%w0, %%smid;");
		emit_zext32(j, BPF_REG_0, "%w0");
		return 0;
	}
	return refuse(j, -EOPNOTSUPP, "instruction %zu: helper %s is not available on the GPU", i,
		      helper_name(name, sizeof(name), in->imm));
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
		emit(j, "bra.uni $L%zu;", i + 1 + (is64 ? in->off : in->imm));
		return 0;
	case BPF_CALL:
		return emit_call(j, i);
	case BPF_EXIT:
		if (!main)
			emit(j, "st.param.b64 [__cuprobe_ret], %%r0;");
		emit(j, "ret;");
		return 0;
	}
	if (is64) {
		snprintf(left, sizeof(left), "%%r%d", in->dst_reg);
		if (BPF_SRC(in->code) == BPF_X)
			snprintf(right, sizeof(right), "%%r%d", in->src_reg);
		else
			imm_text(right, sizeof(right), in->imm, 64);
	} else {
		emit(j, "cvt.u32.u64 %%w0, %%r%d;", in->dst_reg);
		snprintf(left, sizeof(left), "%%w0");
		if (BPF_SRC(in->code) == BPF_X) {
			emit(j, "cvt.u32.u64 %%w1, %%r%d;", in->src_reg);
			snprintf(right, sizeof(right), "%%w1");
		} else {
			imm_text(right, sizeof(right), in->imm, 32);
		}
	}
	if (op == BPF_JSET) {
		emit(j, "and.b%d %s7, %s, %s;", bits, is64 ? "%t" : "%w", left, right);
		emit(j, "setp.ne.u%d %%p0, %s7, 0;", bits, is64 ? "%t" : "%w");
	} else {
		cmp = cmp_name(op, &is_signed);
		emit(j, "setp.%s.%c%d %%p0, %s, %s;", cmp, is_signed ? 's' : 'u', bits, left, right);
	}
	emit(j, "@%%p0 bra $L%zu;", i + 1 + in->off);
	return 0;
}

/* A read of ctx: the field's source, shifted and cut to the bytes read. */
static int emit_ctx_load(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	int bytes = size_bytes(BPF_SIZE(in->code)), d = in->dst_reg, within;
	const struct ctx_field *field;
	char mask[24];

	if (in->off < 0 || (size_t)in->off / 8 >= CTX_FIELD_COUNT)
		return refuse(j, -EOPNOTSUPP,
			      "instruction %zu: reads the context at offset %d: struct cuprobe_gpu_ctx has %zu bytes",
			      i, in->off, CTX_FIELD_COUNT * 8);
	field = &ctx_fields[in->off / 8];
	within = in->off % 8;
	if (!field->source) {
		emit(j, "mov.b64 %%r%d, 0;", d);
		emit(j, "setp.ne.u64 %%p0, %%cp_launch, 0;");
		emit(j, "@%%p0 ld.u64 %%r%d, [%%cp_launch];", d);
	} else if (field->bits == 64) {
		emit(j, "mov.u64 %%r%d, %s;", d, field->source);
	} else {
		emit(j, "mov.u32 %%w0, %s;", field->source);
		emit_zext32(j, d, "%w0");
	}
	if (within)
		emit(j, "shr.u64 %%r%d, %%r%d, %d;", d, d, within * 8);
	if (bytes < 8 && BPF_MODE(in->code) == BPF_MEMSX)
		emit(j, "bfe.s64 %%r%d, %%r%d, 0, %d;", d, d, bytes * 8);
	else if (bytes < 8)
		emit(j, "and.b64 %%r%d, %%r%d, %s;", d, d,
		     imm_text(mask, sizeof(mask), (int64_t)((1ull << (bytes * 8)) - 1), 64));
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

	emit(j, "ld.u%d %s, %s;", bits, old, addr);
	if (in->imm == BPF_CMPXCHG) {
		if (bits == 32)
			emit(j, "cvt.u32.u64 %%w4, %%r0;");
		emit(j, "setp.eq.u%d %%p2, %s, %s;", bits, old, bits == 32 ? "%w4" : "%r0");
		emit(j, "@%%p2 st.u%d %s, %s;", bits, addr, value);
		if (bits == 32)
			emit_zext32(j, BPF_REG_0, old);
		else
			emit(j, "mov.b64 %%r0, %s;", old);
		return;
	}
	if (in->imm == BPF_XCHG)
		emit(j, "st.u%d %s, %s;", bits, addr, value);
	else
		emit(j, "%s%d %s, %s, %s;\n\tst.u%d %s, %s;", ops[op >> 4], bits, new, old, value, bits,
		     addr, new);
	if (!(in->imm & BPF_FETCH))
		return;
	if (bits == 32)
		emit_zext32(j, in->src_reg, old);
	else
		emit(j, "mov.b64 %%r%d, %s;", in->src_reg, old);
}

/* The GPU's atomic: unordered without a result, fully ordered with one (as the kernel's). */
static void emit_global_atomic(struct jit *j, size_t i, const char *addr, const char *value,
			       int bits)
{
	const struct bpf_insn *in = &j->insn[i];
	const char *op;

	switch (in->imm & ~BPF_FETCH) {
	case BPF_ADD: op = bits == 32 ? "add.u32" : "add.u64"; break;
	case BPF_OR: op = bits == 32 ? "or.b32" : "or.b64"; break;
	case BPF_AND: op = bits == 32 ? "and.b32" : "and.b64"; break;
	case BPF_XOR: op = bits == 32 ? "xor.b32" : "xor.b64"; break;
	case BPF_XCHG & ~BPF_FETCH: op = bits == 32 ? "exch.b32" : "exch.b64"; break;
	default: op = bits == 32 ? "cas.b32" : "cas.b64"; break;
	}
	if (!(in->imm & BPF_FETCH)) {
		emit(j, "red.%s %s, %s;", op, addr, value);
		return;
	}
	emit(j, "membar.gl;");
	if (in->imm == BPF_CMPXCHG && bits == 32) {
		/* r0 = cmpxchg(addr, r0, rS): r0 gets what was there. */
		emit(j, "cvt.u32.u64 %%w6, %%r0;");
		emit(j, "atom.%s %%w7, %s, %%w6, %s;", op, addr, value);
		emit_zext32(j, BPF_REG_0, "%w7");
	} else if (in->imm == BPF_CMPXCHG) {
		emit(j, "atom.%s %%r0, %s, %%r0, %s;", op, addr, value);
	} else if (bits == 32) {
		emit(j, "atom.%s %%w7, %s, %s;", op, addr, value);
		emit_zext32(j, in->src_reg, "%w7");
	} else {
		emit(j, "atom.%s %%r%d, %s, %s;", op, in->src_reg, addr, value);
	}
	emit(j, "membar.gl;");
}

static int emit_atomic(struct jit *j, size_t i)
{
	const struct bpf_insn *in = &j->insn[i];
	int bits = size_bytes(BPF_SIZE(in->code)) * 8, d = in->dst_reg, s = in->src_reg;
	uint64_t base = j->base_mask[i];
	bool global = base == MAY_VALUE, local = base == MAY_STACK;
	char addr[32], value[8];

	snprintf(addr, sizeof(addr), "[%%r%d+%d]", d, in->off);
	if (in->imm == CP_BPF_LOAD_ACQ) {
		/* A load, then a fence: nothing after it moves before it. */
		snprintf(addr, sizeof(addr), "[%%r%d+%d]", s, in->off);
		emit(j, "ld.volatile.u%d %%r%d, %s;", bits, d, addr);
		emit(j, "membar.gl;");
		return 0;
	}
	if (in->imm == CP_BPF_STORE_REL) {
		emit(j, "membar.gl;");
		emit(j, "st.volatile.u%d %s, %%r%d;", bits, addr, s);
		return 0;
	}
	/* The operand: rS, or its low half. */
	snprintf(value, sizeof(value), "%%r%d", s);
	if (bits == 32) {
		emit(j, "cvt.u32.u64 %%w5, %%r%d;", s);
		snprintf(value, sizeof(value), "%%w5");
	}
	if (global || local) {
		(global ? emit_global_atomic : emit_local_atomic)(j, i, addr, value, bits);
		return 0;
	}
	/* Where the analysis cannot tell (a pointer from memory, a caller's stack): asked. */
	emit(j, "add.u64 %%t6, %%r%d, %d;", d, in->off);
	emit(j, "isspacep.local %%p2, %%t6;");
	emit(j, "@%%p2 bra $L%zu_local;", i);
	emit_global_atomic(j, i, "[%t6]", value, bits);
	emit(j, "bra.uni $L%zu_atomic;", i);
	fprintf(j->out, "$L%zu_local:\n", i);
	emit_local_atomic(j, i, "[%t6]", value, bits);
	fprintf(j->out, "$L%zu_atomic:\n", i);
	return 0;
}

static int emit_insn(struct jit *j, size_t i, bool main)
{
	const struct bpf_insn *in = &j->insn[i];
	int class = BPF_CLASS(in->code), bits = size_bytes(BPF_SIZE(in->code)) * 8;
	char value[24];

	switch (class) {
	case BPF_ALU: case BPF_ALU64:
		return emit_alu(j, i);
	case BPF_JMP: case BPF_JMP32:
		return emit_jmp(j, i, main);
	case BPF_LD: {
		uint64_t imm64 = (uint32_t)in->imm | (uint64_t)(uint32_t)in[1].imm << 32;

		if (!in->src_reg) {
			emit(j, "mov.b64 %%r%d, %s;", in->dst_reg,
			     imm_text(value, sizeof(value), (int64_t)imm64, 64));
		} else if (in->src_reg == BPF_PSEUDO_MAP_FD) {
			/* A map pointer: the map's index, which the helpers tell maps apart by. */
			emit(j, "mov.b64 %%r%d, %d;", in->dst_reg, j->map_of[i]);
		} else {
			emit(j, "ld.const.u64 %%r%d, [__cuprobe_map_%d];", in->dst_reg, j->map_of[i]);
			if (in[1].imm)
				emit(j, "add.u64 %%r%d, %%r%d, %u;", in->dst_reg, in->dst_reg,
				     (uint32_t)in[1].imm);
		}
		if (j->maps_used && in->src_reg)
			j->maps_used[j->map_of[i]] = true;
		return 0;
	}
	case BPF_LDX:
		if (j->base_mask[i] == MAY_CTX)
			return emit_ctx_load(j, i);
		if (j->base_mask[i] & MAY_CTX) {
			/*
			 * The context or memory (a slot the analysis saw both in): the
			 * kernel lets one instruction read only one of them, so the
			 * register's value says which, the context's tag or an address.
			 */
			emit(j, "setp.ne.u64 %%p1, %%r%d, %d;", in->src_reg, CTX_TAG);
			emit(j, "@%%p1 bra $L%zu_memory;", i);
			if (emit_ctx_load(j, i))
				return j->err;
			emit(j, "bra.uni $L%zu_read;", i);
			fprintf(j->out, "$L%zu_memory:\n", i);
		}
		emit(j, "ld.%c%d %%r%d, [%%r%d+%d];", BPF_MODE(in->code) == BPF_MEMSX ? 's' : 'u', bits,
		     in->dst_reg, in->src_reg, in->off);
		if (j->base_mask[i] & MAY_CTX)
			fprintf(j->out, "$L%zu_read:\n", i);
		return 0;
	case BPF_ST:
		emit(j, "mov.b64 %%t0, %s;", imm_text(value, sizeof(value), in->imm, 64));
		emit(j, "st.u%d [%%r%d+%d], %%t0;", bits, in->dst_reg, in->off);
		return 0;
	case BPF_STX:
		if (BPF_MODE(in->code) == BPF_ATOMIC)
			return emit_atomic(j, i);
		emit(j, "st.u%d [%%r%d+%d], %%r%d;", bits, in->dst_reg, in->off, in->src_reg);
		return 0;
	}
	return refuse(j, -EINVAL, "instruction %zu: unknown instruction class (code 0x%02x)", i, in->code);
}

static int emit_func(struct jit *j, struct func *f)
{
	bool main = f == &j->funcs[0];
	size_t i;
	int r;

	if (main)
		fprintf(j->out, ".func %s (.param .b64 __cuprobe_launch)\n{\n", j->prog->name);
	else
		fprintf(j->out,
			".func (.param .b64 __cuprobe_ret) %s (.param .b64 __cuprobe_launch, .param .b64 __cuprobe_a1, .param .b64 __cuprobe_a2, .param .b64 __cuprobe_a3, .param .b64 __cuprobe_a4, .param .b64 __cuprobe_a5)\n{\n",
			func_name(j, f));
	emit(j, ".reg .b64 %%r<11>;");
	emit(j, ".reg .b64 %%t<8>;");
	emit(j, ".reg .b32 %%w<8>;");
	emit(j, ".reg .pred %%p<3>;");
	emit(j, ".reg .b64 %%cp_launch;");
	if (f->uses_stack)
		emit(j, ".local .align 8 .b8 __cuprobe_stack[%d];", f->depth ? f->depth : 8);
	emit(j, "ld.param.u64 %%cp_launch, [__cuprobe_launch];");
	if (main) {
		/* The context: its reads are translated; its value is a tag no address has. */
		emit(j, "mov.b64 %%r1, %d;", CTX_TAG);
	} else {
		for (r = 1; r <= 5; r++)
			emit(j, "ld.param.u64 %%r%d, [__cuprobe_a%d];", r, r);
	}
	if (f->uses_stack) {
		emit(j, "mov.u64 %%t0, __cuprobe_stack;");
		emit(j, "cvta.local.u64 %%r10, %%t0;");
		emit(j, "add.u64 %%r10, %%r10, %d;", f->depth ? f->depth : 8);
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
static int emit_tree(struct jit *j, struct func *f, int depth)
{
	size_t i;

	if (f->emitted)
		return 0;
	if (depth > 64)
		return refuse(j, -EINVAL, "calls nest deeper than 64 functions");
	f->emitted = true;
	for (i = f->start; i < f->end; i++) {
		const struct bpf_insn *in = &j->insn[i];

		if (in->code == (BPF_JMP | BPF_CALL) && in->src_reg == BPF_PSEUDO_CALL &&
		    emit_tree(j, &j->funcs[func_at(j, i + 1 + in->imm)], depth + 1))
			return j->err;
	}
	return emit_func(j, f);
}

static bool ptx_identifier(const char *name)
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

static void free_jit(struct jit *j)
{
	size_t i;

	if (j->states)
		for (i = 0; i < j->count; i++)
			free(j->states[i]);
	free(j->states);
	free(j->funcs);
	free(j->func_of);
	free(j->leader);
	free(j->target);
	free(j->map_of);
	free(j->base_mask);
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
		return refuse(&j, -EINVAL, "no program to translate");
	if (!ptx_identifier(prog->name))
		return refuse(&j, -EINVAL, "\"%s\" is not a PTX function name", prog->name ? prog->name : "");
	if (prog->insn_count > CP_PTX_MAX_INSNS)
		return refuse(&j, -EOPNOTSUPP, "%zu instructions: device programs have at most %d",
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
	j.base_mask = calloc(j.count, sizeof(*j.base_mask));
	j.states = calloc(j.count, sizeof(*j.states));
	if (!j.funcs || !j.func_of || !j.leader || !j.target || !j.map_of || !j.base_mask ||
	    !j.states) {
		err = refuse(&j, -ENOMEM, "out of memory");
		goto out;
	}
	err = check_program(&j);
	if (!err)
		err = analyze(&j);
	if (err)
		goto out;
	j.out = open_memstream(&text, &len);
	if (!j.out) {
		err = refuse(&j, -ENOMEM, "out of memory");
		goto out;
	}
	for (f = 0; !err && f < j.func_count; f++)
		if (j.funcs[f].called)
			err = emit_tree(&j, &j.funcs[f], 0);
	if (fclose(j.out) && !err)
		err = refuse(&j, -ENOMEM, "out of memory");
	if (!err)
		*ptx = text;
	else
		free(text);
out:
	free_jit(&j);
	return err;
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

int cp_ptx__map_declarations(const uint64_t *addresses, const bool *declare, size_t count,
			     char **ptx)
{
	char *text = NULL;
	size_t len = 0, i;
	FILE *out;

	if (!ptx || (count && !addresses))
		return -EINVAL;
	*ptx = NULL;
	out = open_memstream(&text, &len);
	if (!out)
		return -ENOMEM;
	for (i = 0; i < count; i++)
		if (!declare || declare[i])
			declare_map(out, i, addresses[i], NULL);
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
		"//\n// Device programs translated from verified BPF by cuprobe: the functions\n"
		"// are what goes into the matching kernels; the maps' addresses (0 here) and\n"
		"// the calls are the injection's.\n//\n\n"
		".version " CP_PTX_VERSION "\n.target " CP_PTX_TARGET "\n.address_size 64\n\n");
	for (i = 0; i < map_count; i++)
		if (!maps_used || maps_used[i])
			declare_map(out, i, 0, &maps[i]);
	fputc('\n', out);
	for (i = 0; i < count; i++) {
		if (!functions[i].ptx || !ptx_identifier(functions[i].name)) {
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
