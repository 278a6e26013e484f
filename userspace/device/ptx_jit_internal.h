/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The translator's insides (ptx_jit.h), shared by its files: ptx_jit.c
 * (pass 1, the check, and cp_ptx__translate), ptx_jit_analysis.c (pass 2),
 * ptx_jit_emit.c (pass 3: ALU, jumps, calls, functions), ptx_jit_memory.c
 * (pass 3: helpers, context reads, atomics, warp aggregation) and
 * ptx_module.c (map declarations, --ptx's module). Internal to them.
 */
#ifndef CUPROBE_PTX_JIT_INTERNAL_H
#define CUPROBE_PTX_JIT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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
#define REGISTER_FRAME_BYTES 128 /* the deepest frame kept in registers (ptx_jit_analysis.c) */

/* What a register or stack slot may hold: a bit per kind, a bit per map pointer. */
#define MAY_CTX (1ull << 0)
#define MAY_OTHER (1ull << 1) /* a number, or a pointer other than these */
#define MAY_STACK (1ull << 2) /* a pointer into the function's own stack */
#define MAY_VALUE (1ull << 3) /* a pointer into a map's values (GPU-visible memory) */
#define MAY_SEGMENT (1ull << 4) /* a pointer into a device ring's segment (the module's device memory) */
#define MAP_BIT0 5
#define MAP_BITS (64 - MAP_BIT0)
#define MAY_MAPS (~0ull << MAP_BIT0)
/* stack_at of an access not to one known offset of the frame. */
#define NOT_ON_STACK INT32_MIN
/* What r1 holds for the context: never an address. */
#define CTX_TAG 1


/* The context's fields, in order (cuprobe_events.h's one list). */
struct ctx_field {
	const char *name;
	const char *source;      /* special register; NULL: the launch slot */
	int bits;
};

#define CTX_FIELD_COUNT (sizeof(struct cuprobe_gpu_ctx) / 8)
extern const struct ctx_field cp_jit_ctx_fields[CTX_FIELD_COUNT];

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
	/*
	 * Some access needs the frame's addresses (a pointer to it leaves, an
	 * offset the analysis cannot fix, an atomic on it, a value a helper
	 * copies from it): the frame is local memory. Else its slots are
	 * registers (%sl<k>, k as a state's slot), which no local memory
	 * traffic reaches.
	 */
	bool stack_addressed;
	bool stack_in_registers;
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
	bool *map_named;         /* per map: some ld_imm64 names it (the maps a value pointer may be in) */
	int bit_of_map[MAP_BITS];/* map pointer bits: which map each is */
	int map_bit_count;
	/* analysis */
	struct state **states;   /* at each leader */
	uint64_t *base_mask;     /* loads, stores: what the base may be; calls: r1 */
	int32_t *stack_at;       /* loads, stores, a lookup's key: the offset from r10 it has; NOT_ON_STACK */
	bool changed;
	bool final;
	int err;
	/* emission */
	const struct func *emitting;
	FILE *out;
	char name_buf[160];
};

/* The first refusal says why; returns err. */
int cp_jit_refuse(struct jit *j, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "bpf_probe_read_user (#112)", or "#N" for a helper newer than the list. */
const char *cp_jit_helper_name(char *buf, size_t len, int32_t id);

static inline bool is_ld_imm64(const struct bpf_insn *in)
{
	return in->code == (BPF_LD | BPF_IMM | BPF_DW);
}

static inline bool valid_size(int size)
{
	return size == BPF_B || size == BPF_H || size == BPF_W || size == BPF_DW;
}

static inline int size_bytes(int size)
{
	return size == BPF_B ? 1 : size == BPF_H ? 2 : size == BPF_W ? 4 : 8;
}

/* Pass 2 (ptx_jit_analysis.c): every function's states to a fixed point. 0 or a refusal. */
int cp_jit_analyze(struct jit *j);
/* The index of the function starting at instruction start, or -1. */
int cp_jit_func_at(const struct jit *j, size_t start);

/* Pass 3 (ptx_jit_emit.c): one tab-indented line of PTX. */
void cp_jit_emit(struct jit *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An immediate of width bits, as PTX takes it. */
const char *cp_jit_imm_text(char *buf, size_t len, int64_t value, int bits);
/*
 * Instruction i's access to a frame kept in registers: the slot's register
 * and the bit its bytes start at; false where the frame is memory.
 */
bool cp_jit_stack_field(const struct jit *j, size_t i, char *slot, size_t len, int *bit);
/* u32 %w... into rD, zero-extended. */
void cp_jit_emit_zext32(struct jit *j, int dst, const char *w);
/* f's callees (not yet emitted), then f. */
int cp_jit_emit_tree(struct jit *j, struct func *f, int depth);
/* ptx_jit_memory.c: bpf_map_lookup_elem/update_elem, a context read, an atomic. */
int cp_jit_emit_map_helper(struct jit *j, size_t i, bool update);
int cp_jit_emit_ctx_load(struct jit *j, size_t i);
int cp_jit_emit_atomic(struct jit *j, size_t i);

/* ptx_module.c: a map's values in bytes (its shadow's copy), and the bytes between two copies. */
/* The copies of a map's shadow (0: none; never for a map programs cannot write). */
unsigned int cp_jit_shadow_replicas(const struct cp_ptx_map *map);
uint64_t cp_jit_shadow_bytes(const struct cp_ptx_map *map);
uint64_t cp_jit_shadow_stride(const struct cp_ptx_map *map);
/* ptx_module.c: a name PTX takes for a function (letters, digits, _ and $, < 120 bytes). */
bool cp_ptx_identifier(const char *name);

#endif /* CUPROBE_PTX_JIT_INTERNAL_H */
