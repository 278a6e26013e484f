// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The BPF-to-PTX translator on hand-written instruction sequences: every
 * instruction class the verifier lets through, the helpers, the context,
 * bounded loops, subprograms and the stack. The PTX is judged by the
 * machine's ptxas for the oldest target it has and for sm_90; what BPF
 * defines (division by zero, shift counts, zero-extension, the helpers'
 * results) is asserted on the translation of the instructions that carry
 * it; every refusal is one line naming what the GPU has no translation for.
 * Clang-built programs, verified by the kernel first, are root_device's.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "bpf_insns.h"
#include "device/ptx_jit.h"
#include "cuprobe_events.h"
#include "helpers.h"
#include "ptxas.h"

#define MMAPABLE (1u << 10)
#define COUNTS_FD 100
#define WIDE_FD 101
#define HASH_FD 102
#define PLAIN_FD 103
#define BSS_FD 104
#define RING_FD 105
#define RING_CONTROL_FD 106

/* The object's maps: index i is __cuprobe_map_<i>. */
static const struct cp_ptx_map maps[] = {
	{ .name = "counts", .fd = COUNTS_FD, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = 8, .max_entries = 4 },
	{ .name = "wide", .fd = WIDE_FD, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = 12, .max_entries = 3 },
	{ .name = "by_pid", .fd = HASH_FD, .type = BPF_MAP_TYPE_HASH, .key_size = 4,
	  .value_size = 8, .max_entries = 64 },
	{ .name = "plain", .fd = PLAIN_FD, .type = BPF_MAP_TYPE_ARRAY, .key_size = 4,
	  .value_size = 8, .max_entries = 4 },
	{ .name = "prog.bss", .fd = BSS_FD, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = 64, .max_entries = 1 },
	/* A device ring (CUPROBE_GPU_RING): 256 slots of 16 + 8 bytes, 4 segments of 64 on the GPU. */
	{ .name = "events", .fd = RING_FD, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = 24, .max_entries = 256 },
	{ .name = "events__control", .fd = RING_CONTROL_FD, .type = BPF_MAP_TYPE_ARRAY, .flags = MMAPABLE,
	  .key_size = 4, .value_size = sizeof(struct cuprobe_gpu_ring_control), .max_entries = 1 },
};
#define MAP_COUNT (sizeof(maps) / sizeof(maps[0]))

#define PROG(...) ((const struct bpf_insn[]){ __VA_ARGS__ }), \
	sizeof((const struct bpf_insn[]){ __VA_ARGS__ }) / sizeof(struct bpf_insn)

static char error[512];
static bool used[MAP_COUNT];

/* The translation of insns as a function named prog; fails the test when refused. */
static char *translate(const struct bpf_insn *insns, size_t count)
{
	struct cp_ptx_program prog = { .name = "prog", .insns = insns, .insn_count = count,
				       .maps = maps, .map_count = MAP_COUNT };
	char *ptx = NULL;
	int err = cp_ptx__translate(&prog, &ptx, used, error, sizeof(error));

	const char *guard;

	cr_assert_eq(err, 0, "refused (%d): %s", err, error);
	cr_assert_not_null(ptx);
	cr_assert_str_empty(error);
	/* A conditional branch may diverge: never bra.uni, which promises the warp it does not. */
	for (guard = ptx; (guard = strstr(guard, "@%p")); guard++)
		cr_assert(strncmp(guard + strcspn(guard, " "), " bra.uni", 8),
			  "a guarded bra.uni: %.40s", guard);
	return ptx;
}

/* The refusal of insns: its error, and a line of text that names why. */
static void assert_refused(const struct bpf_insn *insns, size_t count, int expected,
			   const char *message)
{
	struct cp_ptx_program prog = { .name = "prog", .insns = insns, .insn_count = count,
				       .maps = maps, .map_count = MAP_COUNT };
	char *ptx = (char *)1;
	int err = cp_ptx__translate(&prog, &ptx, NULL, error, sizeof(error));

	cr_assert_eq(err, expected, "%d (expected %d): %s", err, expected, error);
	cr_assert_null(ptx);
	cr_assert(strstr(error, message), "expected \"%s\" in \"%s\"", message, error);
	cr_assert_eq(count_lines(error), 1, "one line: %s", error);
	cr_assert_null(strchr(error, '\n'));
}

/* The module ptxas would get, judged for the oldest target and for sm_90. */
static void judge(const char *ptx, const char *what)
{
	struct cp_ptx_function function = { .name = "prog", .section = "gpu/test", .ptx = ptx };
	char *module = NULL;

	require_ptxas();
	cr_assert_eq(cp_ptx__module(&function, 1, maps, NULL, MAP_COUNT, &module), 0);
	assert_ptxas_accepts(module, ptxas_oldest_arch(), what);
	assert_ptxas_accepts(module, "sm_90", what);
	free(module);
}

static void assert_has(const char *ptx, const char *line)
{
	cr_assert(strstr(ptx, line), "expected \"%s\" in:\n%s", line, ptx);
}

static void assert_lacks(const char *ptx, const char *line)
{
	cr_assert(!strstr(ptx, line), "unexpected \"%s\" in:\n%s", line, ptx);
}

/* ---- every class, judged by ptxas ------------------------------------------------------- */

#define ALU_OPS(X) X(BPF_ADD) X(BPF_SUB) X(BPF_MUL) X(BPF_DIV) X(BPF_OR) X(BPF_AND) \
	X(BPF_LSH) X(BPF_RSH) X(BPF_MOD) X(BPF_XOR) X(BPF_ARSH)
#define ALU_EACH(op) ALU64_IMM(op, 1, 7), ALU64_REG(op, 1, 2), ALU32_IMM(op, 3, 5), \
	ALU32_REG(op, 3, 2),

static const struct bpf_insn alu_program[] = {
	MOV64_IMM(1, 1000), MOV64_IMM(2, 3), MOV64_IMM(3, -9),
	ALU_OPS(ALU_EACH)
	/* signed division and modulo (ISA v4: off 1) */
	INSN(BPF_ALU64 | BPF_DIV | BPF_X, 1, 2, 1, 0), INSN(BPF_ALU64 | BPF_MOD | BPF_X, 1, 2, 1, 0),
	INSN(BPF_ALU | BPF_DIV | BPF_K, 3, 0, 1, -4), INSN(BPF_ALU | BPF_MOD | BPF_K, 3, 0, 1, -4),
	INSN(BPF_ALU64 | BPF_NEG, 1, 0, 0, 0), INSN(BPF_ALU | BPF_NEG, 3, 0, 0, 0),
	MOV64_REG(4, 1), ALU32_REG(BPF_MOV, 5, 1), ALU32_IMM(BPF_MOV, 5, -1),
	/* sign-extending moves (ISA v4) */
	INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 8, 0), INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 16, 0),
	INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 32, 0), INSN(BPF_ALU | BPF_MOV | BPF_X, 7, 1, 8, 0),
	INSN(BPF_ALU | BPF_MOV | BPF_X, 7, 1, 16, 0),
	/* byte order: to little-endian (truncates), to big-endian, unconditional (ISA v4) */
	INSN(BPF_ALU | BPF_END | BPF_TO_LE, 1, 0, 0, 16), INSN(BPF_ALU | BPF_END | BPF_TO_LE, 1, 0, 0, 32),
	INSN(BPF_ALU | BPF_END | BPF_TO_LE, 1, 0, 0, 64), INSN(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 16),
	INSN(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 32), INSN(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 64),
	INSN(BPF_ALU64 | BPF_END, 1, 0, 0, 16), INSN(BPF_ALU64 | BPF_END, 1, 0, 0, 32),
	INSN(BPF_ALU64 | BPF_END, 1, 0, 0, 64),
	MOV64_REG(0, 1), EXIT(),
};

#define JMP_OPS(X) X(BPF_JEQ) X(BPF_JGT) X(BPF_JGE) X(BPF_JSET) X(BPF_JNE) X(BPF_JSGT) \
	X(BPF_JSGE) X(BPF_JLT) X(BPF_JLE) X(BPF_JSLT) X(BPF_JSLE)
#define JMP_EACH(op) JMP_IMM(op, 1, -3, 1), ALU64_IMM(BPF_ADD, 0, 1), \
	JMP_REG(op, 1, 2, 1), ALU64_IMM(BPF_ADD, 0, 1), \
	JMP32_IMM(op, 1, -3, 1), ALU64_IMM(BPF_ADD, 0, 1), \
	JMP32_REG(op, 1, 2, 1), ALU64_IMM(BPF_ADD, 0, 1),

static const struct bpf_insn jmp_program[] = {
	MOV64_IMM(0, 0), LD_IMM64(1, 0x80000000fffffff0ull), MOV64_IMM(2, 5),
	JMP_OPS(JMP_EACH)
	JA(1), ALU64_IMM(BPF_ADD, 0, 1),
	/* gotol: a 32-bit jump offset (ISA v4) */
	INSN(BPF_JMP32 | BPF_JA, 0, 0, 0, 1), ALU64_IMM(BPF_ADD, 0, 1),
	EXIT(),
};

static const struct bpf_insn memory_program[] = {
	ST(BPF_B, 10, -1, 0x81), ST(BPF_H, 10, -4, -2), ST(BPF_W, 10, -8, 7), ST(BPF_DW, 10, -16, -1),
	MOV64_IMM(1, -5),
	STX(BPF_B, 10, 1, -17), STX(BPF_H, 10, 1, -20), STX(BPF_W, 10, 1, -24), STX(BPF_DW, 10, 1, -32),
	LDX(BPF_B, 2, 10, -17), LDX(BPF_H, 2, 10, -20), LDX(BPF_W, 2, 10, -24), LDX(BPF_DW, 2, 10, -32),
	/* sign-extending loads (ISA v4) */
	LDXSX(BPF_B, 3, 10, -17), LDXSX(BPF_H, 3, 10, -20), LDXSX(BPF_W, 3, 10, -24),
	/* through a pointer into the stack */
	MOV64_REG(4, 10), ALU64_IMM(BPF_ADD, 4, -40), STX(BPF_DW, 4, 2, 0), LDX(BPF_DW, 0, 4, 0),
	EXIT(),
};

#define ATOMIC_OPS(size) \
	ATOMIC(size, 6, 1, 0, BPF_ADD), ATOMIC(size, 6, 1, 0, BPF_ADD | BPF_FETCH), \
	ATOMIC(size, 6, 1, 0, BPF_OR), ATOMIC(size, 6, 1, 0, BPF_OR | BPF_FETCH), \
	ATOMIC(size, 6, 1, 0, BPF_AND), ATOMIC(size, 6, 1, 0, BPF_AND | BPF_FETCH), \
	ATOMIC(size, 6, 1, 0, BPF_XOR), ATOMIC(size, 6, 1, 0, BPF_XOR | BPF_FETCH), \
	ATOMIC(size, 6, 1, 0, BPF_XCHG), ATOMIC(size, 6, 1, 0, BPF_CMPXCHG)

/* Every atomic, 32 and 64 bits, on a map value and on the stack; load-acquire, store-release. */
static const struct bpf_insn atomic_program[] = {
	LD_MAP_VALUE(6, BSS_FD, 8), MOV64_IMM(1, 3), MOV64_IMM(0, 0),
	ATOMIC_OPS(BPF_W), ATOMIC_OPS(BPF_DW),
	ST(BPF_DW, 10, -8, 0), MOV64_REG(6, 10), ALU64_IMM(BPF_ADD, 6, -8),
	ATOMIC_OPS(BPF_W), ATOMIC_OPS(BPF_DW),
	ATOMIC(BPF_DW, 2, 6, 0, 0x100), ATOMIC(BPF_W, 2, 6, 0, 0x100), ATOMIC(BPF_B, 2, 6, 0, 0x100),
	ATOMIC(BPF_DW, 6, 1, 0, 0x110), ATOMIC(BPF_H, 6, 1, 0, 0x110),
	EXIT(),
};

/* A loop the verifier bounds: sums 0..9 into the stack. */
static const struct bpf_insn loop_program[] = {
	MOV64_IMM(1, 0), ST(BPF_DW, 10, -8, 0),
	LDX(BPF_DW, 2, 10, -8), ALU64_REG(BPF_ADD, 2, 1), STX(BPF_DW, 10, 2, -8),
	ALU64_IMM(BPF_ADD, 1, 1), JMP_IMM(BPF_JLT, 1, 10, -5),
	LDX(BPF_DW, 0, 10, -8), EXIT(),
};

/* The map helpers, on a map picked on a branch; the time and the SM. */
static const struct bpf_insn helper_program[] = {
	MOV64_REG(6, 1),
	ST(BPF_W, 10, -4, 1),
	LD_MAP(1, COUNTS_FD), JMP_IMM(BPF_JEQ, 6, 0, 2), LD_MAP(1, WIDE_FD),
	MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), CALL(BPF_FUNC_map_lookup_elem),
	JMP_IMM(BPF_JEQ, 0, 0, 2), MOV64_IMM(1, 1), ATOMIC(BPF_DW, 0, 1, 0, BPF_ADD),
	ST(BPF_DW, 10, -16, 42),
	LD_MAP(1, COUNTS_FD), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4),
	MOV64_REG(3, 10), ALU64_IMM(BPF_ADD, 3, -16), MOV64_IMM(4, BPF_ANY),
	CALL(BPF_FUNC_map_update_elem),
	LD_MAP(1, WIDE_FD), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4),
	MOV64_REG(3, 10), ALU64_IMM(BPF_ADD, 3, -16), MOV64_IMM(4, BPF_EXIST),
	CALL(BPF_FUNC_map_update_elem),
	CALL(BPF_FUNC_ktime_get_ns), MOV64_REG(7, 0),
	CALL(BPF_FUNC_get_smp_processor_id), ALU64_REG(BPF_ADD, 0, 7),
	EXIT(),
};

/* main calls f(ctx, stack pointer), which calls g(key): each a .func, callees first. */
static const struct bpf_insn subprogram_program[] = {
	ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4),
	CALL_SUB(2), MOV64_IMM(0, 0), EXIT(),
	/* f (3 + 3 = 6): reads the context it was given, then calls g */
	MOV64_REG(6, 2), LDX(BPF_DW, 3, 1, offsetof(struct cuprobe_gpu_ctx, lane_id)),
	STX(BPF_W, 6, 3, 0), MOV64_REG(1, 6), CALL_SUB(1), EXIT(),
	/* g (12): looks the key up */
	MOV64_REG(2, 1), LD_MAP(1, COUNTS_FD), CALL(BPF_FUNC_map_lookup_elem), EXIT(),
};

/* Every field of the context, read whole; parts of them, and sign-extended. */
static const struct bpf_insn ctx_program[] = {
#define CTX_READ(name, source, bits) \
	LDX(BPF_DW, 2, 1, offsetof(struct cuprobe_gpu_ctx, name)), ALU64_REG(BPF_ADD, 0, 2),
	MOV64_IMM(0, 0),
	CUPROBE_GPU_CTX_FIELDS(CTX_READ)
#undef CTX_READ
	LDX(BPF_W, 3, 1, offsetof(struct cuprobe_gpu_ctx, globaltimer_ns) + 4),
	LDX(BPF_B, 3, 1, offsetof(struct cuprobe_gpu_ctx, block_x) + 1),
	LDX(BPF_H, 3, 1, offsetof(struct cuprobe_gpu_ctx, thread_y)),
	LDXSX(BPF_B, 4, 1, offsetof(struct cuprobe_gpu_ctx, lane_id)),
	/* the context kept in a callee-saved register and in the stack across a helper */
	MOV64_REG(6, 1), STX(BPF_DW, 10, 1, -8), CALL(BPF_FUNC_ktime_get_ns),
	LDX(BPF_DW, 7, 10, -8), LDX(BPF_DW, 3, 7, offsetof(struct cuprobe_gpu_ctx, sm_id)),
	LDX(BPF_DW, 3, 6, offsetof(struct cuprobe_gpu_ctx, launch_seq)),
	EXIT(),
};

/* Every width at each place in a slot, and a lookup's key, all at offsets the analysis fixes. */
static const struct bpf_insn register_frame_program[] = {
	MOV64_IMM(1, 5),
	ST(BPF_B, 10, -8, 1), ST(BPF_B, 10, -7, 2), ST(BPF_H, 10, -6, 3), STX(BPF_W, 10, 1, -4),
	STX(BPF_DW, 10, 1, -16),
	LDX(BPF_W, 2, 10, -8), LDX(BPF_B, 3, 10, -7), LDXSX(BPF_H, 4, 10, -6), LDX(BPF_DW, 5, 10, -16),
	/* a key through a copy of r10, at either half of the slot */
	LD_MAP(1, COUNTS_FD), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), CALL(BPF_FUNC_map_lookup_elem),
	LD_MAP(1, COUNTS_FD), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8), CALL(BPF_FUNC_map_lookup_elem),
	MOV64_IMM(0, 0), EXIT(),
};

struct named_program {
	const char *name;
	const struct bpf_insn *insns;
	size_t count;
};

#define NAMED(p) { #p, p, sizeof(p) / sizeof(p[0]) }
static const struct named_program programs[] = {
	NAMED(alu_program), NAMED(jmp_program), NAMED(memory_program), NAMED(atomic_program),
	NAMED(loop_program), NAMED(helper_program), NAMED(subprogram_program), NAMED(ctx_program),
	NAMED(register_frame_program),
};

Test(ptxas, accepts_every_class_for_the_oldest_target_and_sm_90, .timeout = 120)
{
	size_t i;

	for (i = 0; i < sizeof(programs) / sizeof(programs[0]); i++) {
		char *ptx = translate(programs[i].insns, programs[i].count);

		judge(ptx, programs[i].name);
		free(ptx);
	}
}

Test(ptxas, accepts_a_module_of_several_programs_and_the_declarations_alone)
{
	struct cp_ptx_function functions[2];
	uint64_t addresses[MAP_COUNT] = { 0x7f0000001000ull, 0, 0, 0, 0x7f0000002000ull };
	bool declare[MAP_COUNT] = { true, false, false, false, true };
	struct cp_ptx_program other = { .name = "other", .insns = loop_program,
					.insn_count = sizeof(loop_program) / sizeof(loop_program[0]),
					.maps = maps, .map_count = MAP_COUNT };
	char *a = translate(PROG(LD_MAP_VALUE(1, BSS_FD, 0), MOV64_IMM(0, 0), EXIT()));
	char *b = NULL, *module = NULL, *declarations = NULL;

	functions[0] = (struct cp_ptx_function){ .name = "prog", .section = "gpu/a", .ptx = a };
	/* Another program under another name: nothing of one collides with the other's. */
	cr_assert_eq(cp_ptx__translate(&other, &b, NULL, error, sizeof(error)), 0, "%s", error);
	functions[1] = (struct cp_ptx_function){ .name = "other", .section = "gpu.exit/b*", .ptx = b };
	cr_assert_eq(cp_ptx__module(functions, 2, maps, used, MAP_COUNT, &module), 0);
	assert_has(module, ".const .align 8 .u64 __cuprobe_map_4 = 0;\t// prog.bss: 1 x 64 bytes");
	assert_lacks(module, "__cuprobe_map_0 ");
	assert_has(module, "// other: SEC(\"gpu.exit/b*\")");
	assert_has(module, "call other, (__cuprobe_p);");
	cr_assert_eq(cp_ptx__map_declarations(addresses, NULL, declare, MAP_COUNT, &declarations, NULL), 0);
	cr_assert_str_eq(declarations,
			 ".const .align 8 .u64 __cuprobe_map_0 = 139637976731648;\n"
			 ".const .align 8 .u64 __cuprobe_map_4 = 139637976735744;\n");
	require_ptxas();
	assert_ptxas_accepts(module, ptxas_oldest_arch(), "two programs");
	assert_ptxas_accepts(module, "sm_90", "two programs");
	free(declarations);
	free(module);
	free(a);
	free(b);
}

/* ---- what BPF defines, in the translation ------------------------------------------------- */

Test(semantics, division_by_zero_gives_zero_and_modulo_keeps_the_dividend)
{
	char *ptx = translate(PROG(MOV64_IMM(1, 7), MOV64_IMM(2, 0), ALU64_REG(BPF_DIV, 1, 2),
				   ALU64_REG(BPF_MOD, 1, 2), MOV64_REG(0, 1), EXIT()));

	/* The divisor tested, replaced by 1 for the division, the result chosen. */
	assert_has(ptx, "setp.eq.u64 %p0, %r2, 0;\n\tselp.b64 %t1, 1, %r2, %p0;\n"
			"\tdiv.u64 %t2, %r1, %t1;\n\tselp.b64 %r1, 0, %t2, %p0;");
	assert_has(ptx, "rem.u64 %t2, %r1, %t1;\n\tselp.b64 %r1, %r1, %t2, %p0;");
	free(ptx);
}

Test(semantics, signed_division_by_minus_one_negates_and_modulo_is_zero)
{
	char *ptx = translate(PROG(MOV64_IMM(1, 7), MOV64_IMM(2, -1),
				   INSN(BPF_ALU64 | BPF_DIV | BPF_X, 1, 2, 1, 0),
				   INSN(BPF_ALU | BPF_MOD | BPF_X, 1, 2, 1, 0), MOV64_REG(0, 1), EXIT()));

	assert_has(ptx, "setp.eq.u64 %p1, %r2, 0xffffffffffffffff;");
	assert_has(ptx, "div.s64 %t2, %r1, %t1;\n\tneg.s64 %t3, %r1;\n\tselp.b64 %t2, %t3, %t2, %p1;");
	/* 32-bit: on the low halves, the result zero-extended */
	assert_has(ptx, "setp.eq.u32 %p1, %w5, 0xffffffff;");
	assert_has(ptx, "rem.s32 %w2, %w4, %w1;\n\tselp.b32 %w2, 0, %w2, %p1;\n"
			"\tselp.b32 %w4, %w4, %w2, %p0;\n\tcvt.u64.u32 %r1, %w4;");
	free(ptx);
}

Test(semantics, shift_counts_are_masked_to_the_width)
{
	char *ptx = translate(PROG(MOV64_IMM(1, 1), MOV64_IMM(2, 65), ALU64_REG(BPF_LSH, 1, 2),
				   ALU32_REG(BPF_RSH, 1, 2), ALU64_IMM(BPF_ARSH, 1, 65),
				   ALU32_IMM(BPF_LSH, 1, 33), MOV64_REG(0, 1), EXIT()));

	assert_has(ptx, "cvt.u32.u64 %w5, %r2;\n\tand.b32 %w5, %w5, 63;\n\tshl.b64 %r1, %r1, %w5;");
	assert_has(ptx, "cvt.u32.u64 %w5, %r2;\n\tand.b32 %w5, %w5, 31;\n\tshr.u32 %w4, %w4, %w5;");
	assert_has(ptx, "shr.s64 %r1, %r1, 1;");
	assert_has(ptx, "shl.b32 %w4, %w4, 1;");
	free(ptx);
}

Test(semantics, alu32_zero_extends_and_mov32_drops_the_high_half)
{
	char *ptx = translate(PROG(LD_IMM64(1, 0xffffffff00000001ull), ALU32_IMM(BPF_ADD, 1, -1),
				   ALU32_REG(BPF_MOV, 2, 1), ALU32_IMM(BPF_MOV, 3, -1), MOV64_IMM(4, -1),
				   MOV64_REG(0, 1), EXIT()));

	assert_has(ptx, "mov.b64 %r1, 0xffffffff00000001;");
	assert_has(ptx, "cvt.u32.u64 %w4, %r1;\n\tadd.u32 %w4, %w4, 0xffffffff;\n\tcvt.u64.u32 %r1, %w4;");
	assert_has(ptx, "cvt.u32.u64 %w0, %r1;\n\tcvt.u64.u32 %r2, %w0;");
	/* an immediate: zero-extended at 32 bits, sign-extended at 64 */
	assert_has(ptx, "mov.b64 %r3, 0x00000000ffffffff;");
	assert_has(ptx, "mov.b64 %r4, 0xffffffffffffffff;");
	free(ptx);
}

Test(semantics, sign_extension_of_moves_and_loads)
{
	char *ptx = translate(PROG(MOV64_IMM(1, 0x80), ST(BPF_W, 10, -4, -1),
				   INSN(BPF_ALU64 | BPF_MOV | BPF_X, 2, 1, 8, 0),
				   INSN(BPF_ALU | BPF_MOV | BPF_X, 3, 1, 16, 0),
				   LDXSX(BPF_H, 4, 10, -4), LDX(BPF_H, 5, 10, -4), MOV64_IMM(0, 0), EXIT()));

	assert_has(ptx, "bfe.s64 %r2, %r1, 0, 8;");
	assert_has(ptx, "cvt.u32.u64 %w0, %r1;\n\tbfe.s32 %w0, %w0, 0, 16;\n\tcvt.u64.u32 %r3, %w0;");
	/* the frame in a register: bytes -4..-3 of the slot at -8 are its bits 32..47 */
	assert_has(ptx, "bfe.s64 %r4, %sl63, 32, 16;");
	assert_has(ptx, "bfe.u64 %r5, %sl63, 32, 16;");
	free(ptx);
}

Test(semantics, byte_order)
{
	char *ptx = translate(PROG(MOV64_IMM(1, 0x1234), INSN(BPF_ALU | BPF_END | BPF_TO_LE, 1, 0, 0, 16),
				   INSN(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 16),
				   INSN(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 32),
				   INSN(BPF_ALU64 | BPF_END, 1, 0, 0, 64), MOV64_REG(0, 1), EXIT()));

	/* to little-endian on a little-endian machine: the low 16 bits, zero-extended */
	assert_has(ptx, "and.b64 %r1, %r1, 0x000000000000ffff;");
	assert_has(ptx, "prmt.b32 %w0, %w0, 0, 0x4401;");
	assert_has(ptx, "prmt.b32 %w0, %w0, 0, 0x0123;");
	assert_has(ptx, "mov.b64 {%w0, %w1}, %r1;\n\tprmt.b32 %w2, %w0, 0, 0x0123;\n"
			"\tprmt.b32 %w3, %w1, 0, 0x0123;\n\tmov.b64 %r1, {%w3, %w2};");
	free(ptx);
}

Test(semantics, conditions_signed_unsigned_and_32_bit)
{
	char *ptx = translate(PROG(MOV64_IMM(1, -1), MOV64_IMM(0, 0),
				   JMP_IMM(BPF_JSLT, 1, 0, 1), ALU64_IMM(BPF_ADD, 0, 1),
				   JMP_IMM(BPF_JGT, 1, -2, 1), ALU64_IMM(BPF_ADD, 0, 1),
				   JMP32_REG(BPF_JSET, 1, 0, 1), ALU64_IMM(BPF_ADD, 0, 1), EXIT()));

	assert_has(ptx, "setp.lt.s64 %p0, %r1, 0x0000000000000000;\n\t@%p0 bra $L4;");
	/* an immediate of a 64-bit comparison is sign-extended */
	assert_has(ptx, "setp.gt.u64 %p0, %r1, 0xfffffffffffffffe;\n\t@%p0 bra $L6;");
	assert_has(ptx, "cvt.u32.u64 %w0, %r1;\n\tcvt.u32.u64 %w1, %r0;\n\tand.b32 %w7, %w0, %w1;\n"
			"\tsetp.ne.u32 %p0, %w7, 0;\n\t@%p0 bra $L8;");
	assert_has(ptx, "$L8:\n\tret;");
	free(ptx);
}

/* A whole read of a field from a special register, into r2. */
static void assert_source(const char *ptx, const char *source, int bits)
{
	char line[128];

	if (!source)
		return; /* launch_seq: asserted on its own */
	if (bits == 32)
		snprintf(line, sizeof(line), "mov.u32 %%w0, %s;\n\tcvt.u64.u32 %%r2, %%w0;", source);
	else
		snprintf(line, sizeof(line), "mov.u64 %%r2, %s;", source);
	assert_has(ptx, line);
}

Test(semantics, the_context_reads_special_registers_and_the_launch_slot)
{
	char *ptx = translate(ctx_program, sizeof(ctx_program) / sizeof(ctx_program[0]));

#define ASSERT_SOURCE(name, source, bits) assert_source(ptx, source, bits);
	CUPROBE_GPU_CTX_FIELDS(ASSERT_SOURCE)
#undef ASSERT_SOURCE
	/* launch_seq: through the slot, 0 without one; launch_slot: the slot's address, not read */
	assert_has(ptx, "mov.b64 %r2, 0;\n\tsetp.ne.u64 %p0, %cp_launch, 0;\n\t@%p0 ld.u64 %r2, [%cp_launch];");
	assert_has(ptx, "mov.b64 %r2, %cp_launch;\n\tadd.u64 %r0, %r0, %r2;");
	/* the high half of the globaltimer, a byte of block_x, 16 bits of thread_y, a signed byte */
	assert_has(ptx, "mov.u64 %r3, %globaltimer;\n\tshr.u64 %r3, %r3, 32;\n"
			"\tand.b64 %r3, %r3, 0x00000000ffffffff;");
	assert_has(ptx, "mov.u32 %w0, %ctaid.x;\n\tcvt.u64.u32 %r3, %w0;\n\tshr.u64 %r3, %r3, 8;\n"
			"\tand.b64 %r3, %r3, 0x00000000000000ff;");
	assert_has(ptx, "mov.u32 %w0, %tid.y;\n\tcvt.u64.u32 %r3, %w0;\n\tand.b64 %r3, %r3, 0x000000000000ffff;");
	assert_has(ptx, "mov.u32 %w0, %laneid;\n\tcvt.u64.u32 %r4, %w0;\n\tbfe.s64 %r4, %r4, 0, 8;");
	/* kept in r6 and spilled to the stack across a call: still the context */
	assert_has(ptx, "mov.u32 %w0, %smid;\n\tcvt.u64.u32 %r3, %w0;");
	assert_has(ptx, "@%p0 ld.u64 %r3, [%cp_launch];");
	/* no read of ctx as memory */
	assert_lacks(ptx, "[%r1+");
	assert_lacks(ptx, "[%r6+");
	assert_lacks(ptx, "[%r7+");
	free(ptx);
}

Test(semantics, a_read_of_the_context_or_memory_tells_them_apart_by_value)
{
	/*
	 * The context spilled where a pointer to the stack has left the frame:
	 * the slot may have been written by the callee, so the reload may be
	 * either (the kernel knows; one instruction reads only one of them).
	 */
	char *ptx = translate(PROG(STX(BPF_DW, 10, 1, -8), MOV64_REG(1, 10), ALU64_IMM(BPF_ADD, 1, -16),
				   CALL_SUB(3), LDX(BPF_DW, 2, 10, -8), LDX(BPF_DW, 0, 2, 0), EXIT(),
				   MOV64_IMM(0, 0), EXIT()));

	assert_has(ptx, "setp.ne.u64 %p1, %r2, 1;\n\t@%p1 bra $L5_memory;\n"
			"\tmov.u32 %w0, %tid.x;\n\tcvt.u64.u32 %r0, %w0;\n\tbra.uni $L5_read;\n"
			"$L5_memory:\n\tld.u64 %r0, [%r2+0];\n$L5_read:");
	assert_has(ptx, "mov.b64 %r1, 1;");
	judge(ptx, "a context read told apart at run time");
	free(ptx);
}

Test(semantics, helpers)
{
	char *ptx = translate(helper_program, sizeof(helper_program) / sizeof(helper_program[0]));

	/* lookup on either map r1 may be: bounds, then base + index x value size rounded to 8 */
	assert_has(ptx, "setp.ne.u64 %p1, %r1, 0;");
	assert_has(ptx, "setp.lt.u32 %p0, %w0, 4;\n\tld.const.u64 %t0, [__cuprobe_map_0];\n"
			"\tmul.wide.u32 %t1, %w0, 8;");
	assert_has(ptx, "setp.lt.u32 %p0, %w0, 3;\n\tld.const.u64 %t0, [__cuprobe_map_1];\n"
			"\tmul.wide.u32 %t1, %w0, 16;");
	assert_has(ptx, "selp.b64 %r0, %t2, 0, %p0;");
	/* update as the kernel's array does it: -EINVAL for flags, -E2BIG past the end, -EEXIST */
	assert_has(ptx, "mov.b64 %r0, 0xffffffffffffffea;\n\tsetp.gt.u64 %p0, %r4, 2;");
	assert_has(ptx, "mov.b64 %r0, 0xfffffffffffffff9;\n\tsetp.ge.u32 %p0, %w0, 4;");
	assert_has(ptx, "mov.b64 %r0, 0xffffffffffffffef;\n\tsetp.eq.u64 %p0, %r4, 1;");
	/* value sizes: a multiple of 8 copied by words when aligned, 12 bytes by bytes */
	assert_has(ptx, "ld.u64 %t5, [%t4];");
	assert_has(ptx, "setp.lt.u64 %p0, %t3, 12;");
	assert_has(ptx, "mov.u64 %r0, %globaltimer;");
	assert_has(ptx, "mov.u32 %w0, %smid;\n\tcvt.u64.u32 %r0, %w0;");
	/* a counter in a map value: one reduction a warp (per address), no fence */
	assert_has(ptx, "add.u64 %t6, %r0, 0;\n\t{\n");
	assert_has(ptx, "cvta.to.global.u64 %gd1, %t6;\n\t@%gp1 red.global.add.u64 [%gd1], %gd0;");
	cr_assert(used[0] && used[1] && !used[2] && !used[3] && !used[4]);
	free(ptx);
}

Test(semantics, atomics_fetch_fenced_and_on_the_stack_plain)
{
	char *ptx = translate(atomic_program, sizeof(atomic_program) / sizeof(atomic_program[0]));

	/* map value: the address in %t6; an add without a result aggregated per warp, the others
	 * red without a result, atom with one between fences, 32 bits zero-extended */
	assert_has(ptx, "cvt.u32.u64 %w5, %r1;\n\tadd.u64 %t6, %r6, 0;\n\t{\n");
	/* the whole warp on lane 0's address found by an exchange and a vote; else grouped by address */
	assert_has(ptx, "shfl.sync.idx.b32 %ga7, %ga7, 0, 31, -1;\n\tmov.b64 %gd1, {%ga6, %ga7};\n"
			"\tsetp.eq.u64 %gp0, %gd1, %t6;\n\tvote.sync.all.pred %gp0, %gp0, -1;");
	/* a lone lane adds its own operand; more, grouped by address */
	assert_has(ptx, "_match:\n\tpopc.b32 %ga6, %ga0;\n\tsetp.ne.u32 %gp0, %ga6, 1;\n");
	assert_has(ptx, "_group:\n\tmatch.any.sync.b64 %ga1, %t6, %ga0;");
	assert_has(ptx, "shfl.sync.idx.b32 %ga6, %ga8, %ga4, 31, %ga1;");
	assert_has(ptx, "cvt.u32.u64 %ga6, %gd0;\n\t@%gp1 red.global.add.u32 [%gd1], %ga6;\n\t}");
	assert_has(ptx, "@%gp1 red.global.add.u64 [%gd1], %gd0;\n\t}");
	assert_has(ptx, "membar.sys;\n\tatom.add.u32 %w7, [%t6], %w5;\n\tcvt.u64.u32 %r1, %w7;\n\tmembar.sys;");
	assert_has(ptx, "membar.sys;\n\tatom.or.b64 %r1, [%t6], %r1;\n\tmembar.sys;");
	assert_has(ptx, "red.xor.b64 [%t6], %r1;");
	assert_has(ptx, "atom.exch.b64 %r1, [%t6], %r1;");
	assert_has(ptx, "atom.cas.b64 %r0, [%t6], %r0, %r1;");
	assert_has(ptx, "cvt.u32.u64 %w6, %r0;\n\tatom.cas.b32 %w7, [%t6], %w6, %w5;\n\tcvt.u64.u32 %r0, %w7;");
	assert_lacks(ptx, "red.add.u64 [%r6");
	/* the stack: the thread's own, so a load, the operation and a store */
	assert_has(ptx, "ld.u64 %t4, [%r6+0];\n\tadd.u64 %t3, %t4, %r1;\n\tst.u64 [%r6+0], %t3;\n"
			"\tmov.b64 %r1, %t4;");
	assert_has(ptx, "ld.u32 %w6, [%r6+0];\n\tcvt.u32.u64 %w4, %r0;\n\tsetp.eq.u32 %p2, %w6, %w4;\n"
			"\t@%p2 st.u32 [%r6+0], %w5;\n\tcvt.u64.u32 %r0, %w6;");
	/* load-acquire and store-release */
	assert_has(ptx, "ld.volatile.u8 %r2, [%r6+0];\n\tmembar.sys;");
	assert_has(ptx, "membar.sys;\n\tst.volatile.u16 [%r6+0], %r1;");
	free(ptx);
}

Test(semantics, an_atomic_on_memory_of_unknown_space_asks_the_hardware)
{
	/* A pointer loaded from a map value: the analysis cannot tell where it points. */
	char *ptx = translate(PROG(LD_MAP_VALUE(1, BSS_FD, 0), LDX(BPF_DW, 2, 1, 0), MOV64_IMM(3, 1),
				   ATOMIC(BPF_DW, 2, 3, 8, BPF_ADD), MOV64_IMM(0, 0), EXIT()));

	assert_has(ptx, "add.u64 %t6, %r2, 8;\n\tisspacep.local %p2, %t6;\n\t@%p2 bra $L4_local;\n"
			"\t{\n");
	assert_has(ptx, "@%gp1 red.global.add.u64 [%gd1], %gd0;\n\t}\n\tbra.uni $L4_atomic;\n$L4_local:\n"
			"\tld.u64 %t4, [%t6];\n\tadd.u64 %t3, %t4, %r3;\n\tst.u64 [%t6], %t3;\n$L4_atomic:");
	judge(ptx, "an atomic on unknown memory");
	free(ptx);
}

Test(semantics, the_stack_is_as_deep_as_the_deepest_access)
{
	/* Frames in memory (an atomic on each needs its address): as deep as reached. */
	char *shallow = translate(PROG(ST(BPF_DW, 10, -24, 1), MOV64_IMM(1, 1),
				       ATOMIC(BPF_DW, 10, 1, -16, BPF_ADD), MOV64_IMM(0, 0), EXIT()));
	char *through_pointer = translate(PROG(MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -100),
					       ST(BPF_W, 2, -4, 1), MOV64_IMM(1, 1),
					       ATOMIC(BPF_W, 2, 1, -4, BPF_ADD), MOV64_IMM(0, 0), EXIT()));
	char *none = translate(PROG(MOV64_IMM(0, 0), EXIT()));
	char *escaped = translate(subprogram_program,
				  sizeof(subprogram_program) / sizeof(subprogram_program[0]));

	assert_has(shallow, ".local .align 8 .b8 __cuprobe_stack[24];");
	assert_has(shallow, "add.u64 %r10, %r10, 24;\n\tmov.b64 %t0, 0x0000000000000001;\n"
			    "\tst.u64 [%r10+-24], %t0;");
	assert_has(through_pointer, "__cuprobe_stack[104];");
	assert_lacks(none, "__cuprobe_stack");
	/* a pointer to the stack passed to a subprogram: the whole 512 bytes */
	assert_has(escaped, "__cuprobe_stack[512];");
	free(shallow);
	free(through_pointer);
	free(none);
	free(escaped);
}

Test(semantics, a_frame_whose_accesses_all_have_one_offset_is_registers, .timeout = 60)
{
	char *ptx = translate(register_frame_program,
			      sizeof(register_frame_program) / sizeof(register_frame_program[0]));

	assert_has(ptx, ".reg .b64 %sl<64>;");
	assert_lacks(ptx, "__cuprobe_stack");
	assert_lacks(ptx, "[%r10");
	assert_lacks(ptx, "\tst.");
	assert_lacks(ptx, "\tld.u");
	assert_lacks(ptx, "\tld.s");
	/* r10 is a value no frame address is near 0; the two slots reached start at 0 */
	assert_has(ptx, "mov.u64 %r10, 4096;\n\tmov.b64 %sl62, 0;\n\tmov.b64 %sl63, 0;\n");
	/* little-endian: the byte at -8 + b is bits 8b.. of the slot at -8 */
	assert_has(ptx, "mov.b64 %t0, 0x0000000000000001;\n\tbfi.b64 %sl63, %t0, %sl63, 0, 8;");
	assert_has(ptx, "mov.b64 %t0, 0x0000000000000002;\n\tbfi.b64 %sl63, %t0, %sl63, 8, 8;");
	assert_has(ptx, "mov.b64 %t0, 0x0000000000000003;\n\tbfi.b64 %sl63, %t0, %sl63, 16, 16;");
	assert_has(ptx, "bfi.b64 %sl63, %r1, %sl63, 32, 32;");
	assert_has(ptx, "mov.b64 %sl62, %r1;");
	assert_has(ptx, "bfe.u64 %r2, %sl63, 0, 32;");
	assert_has(ptx, "bfe.u64 %r3, %sl63, 8, 8;");
	assert_has(ptx, "bfe.s64 %r4, %sl63, 16, 16;");
	assert_has(ptx, "mov.b64 %r5, %sl62;");
	/* the keys: the slot's high half, then its low half */
	assert_has(ptx, "shr.b64 %t0, %sl63, 32;\n\tcvt.u32.u64 %w0, %t0;\n\tsetp.lt.u32 %p0, %w0, 4;");
	assert_has(ptx, "cvt.u32.u64 %w0, %sl63;\n\tsetp.lt.u32 %p0, %w0, 4;");
	judge(ptx, "a frame in registers");
	free(ptx);
	/* 128 bytes deep: still registers, the 16 slots from r10 - 128 */
	ptx = translate(PROG(ST(BPF_DW, 10, -128, 1), MOV64_IMM(0, 0), EXIT()));
	assert_has(ptx, "mov.b64 %sl48, 0;");
	assert_lacks(ptx, "mov.b64 %sl47, 0;");
	assert_has(ptx, "mov.b64 %sl48, %t0;");
	free(ptx);
}

Test(semantics, a_frame_stays_in_memory_where_an_access_needs_its_address)
{
	struct {
		const char *why;
		const struct bpf_insn *insns;
		size_t count;
	} cases[] = {
		{ "a pointer to it stored", PROG(STX(BPF_DW, 10, 10, -8), MOV64_IMM(0, 0), EXIT()) },
		{ "an offset the analysis cannot fix",
		  PROG(MOV64_IMM(3, -8), MOV64_REG(2, 10), ALU64_REG(BPF_ADD, 2, 3), ST(BPF_DW, 2, 0, 1),
		       MOV64_IMM(0, 0), EXIT()) },
		{ "a misaligned access", PROG(ST(BPF_W, 10, -6, 1), MOV64_IMM(0, 0), EXIT()) },
		{ "an access across two slots", PROG(ST(BPF_DW, 10, -12, 1), MOV64_IMM(0, 0), EXIT()) },
		{ "deeper than 128 bytes", PROG(ST(BPF_DW, 10, -136, 1), MOV64_IMM(0, 0), EXIT()) },
		{ "an atomic on it", PROG(ST(BPF_DW, 10, -8, 0), MOV64_IMM(1, 1),
					  ATOMIC(BPF_DW, 10, 1, -8, BPF_ADD), MOV64_IMM(0, 0), EXIT()) },
		{ "a load-acquire from it", PROG(ST(BPF_DW, 10, -8, 0), LOAD_ACQ(BPF_DW, 0, 10, -8), EXIT()) },
		{ "a pointer to it passed to a subprogram", subprogram_program,
		  sizeof(subprogram_program) / sizeof(subprogram_program[0]) },
		{ "an update's value copied from it", helper_program,
		  sizeof(helper_program) / sizeof(helper_program[0]) },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *ptx = translate(cases[c].insns, cases[c].count);

		cr_assert(strstr(ptx, ".local .align 8 .b8 __cuprobe_stack["), "%s: in memory:\n%s",
			  cases[c].why, ptx);
		cr_assert(!strstr(ptx, "%sl"), "%s: no slot registers:\n%s", cases[c].why, ptx);
		free(ptx);
	}
}

Test(semantics, subprograms_are_functions_callees_first)
{
	char *ptx = translate(subprogram_program,
			      sizeof(subprogram_program) / sizeof(subprogram_program[0]));
	char *g = strstr(ptx, ".func (.param .b64 __cuprobe_ret) prog__sub12 ");
	char *f = strstr(ptx, ".func (.param .b64 __cuprobe_ret) prog__sub6 ");
	char *main = strstr(ptx, ".func prog (.param .b64 __cuprobe_launch)");

	cr_assert(g && f && main && g < f && f < main, "%s", ptx);
	assert_has(ptx, "call (__cuprobe_result), prog__sub6, (__cuprobe_p0, __cuprobe_p1, "
			"__cuprobe_p2, __cuprobe_p3, __cuprobe_p4, __cuprobe_p5);");
	assert_has(ptx, "st.param.b64 [__cuprobe_p0], %cp_launch;");
	/* the context handed to f is still read as the context there */
	assert_has(f, "mov.u32 %w0, %laneid;");
	assert_has(ptx, "st.param.b64 [__cuprobe_ret], %r0;\n\tret;");
	free(ptx);
}

Test(semantics, map_values_and_globals)
{
	char *ptx = translate(PROG(LD_MAP_VALUE(1, BSS_FD, 16), LDX(BPF_DW, 0, 1, 0), EXIT()));

	assert_has(ptx, "ld.const.u64 %r1, [__cuprobe_map_4];\n\tadd.u64 %r1, %r1, 16;\n"
			"\tld.u64 %r0, [%r1+0];");
	cr_assert(used[4] && !used[0]);
	free(ptx);
}

/* ---- refusals: one line each, naming what ------------------------------------------------- */

Test(refusals, helpers_the_gpu_has_not)
{
	assert_refused(PROG(CALL(BPF_FUNC_probe_read_user), EXIT()), -EOPNOTSUPP,
		       "instruction 0: helper bpf_probe_read_user (#112) is not available on the GPU");
	assert_refused(PROG(MOV64_IMM(0, 0), CALL(BPF_FUNC_tail_call), EXIT()), -EOPNOTSUPP,
		       "instruction 1: helper bpf_tail_call (#12) is not available on the GPU");
	assert_refused(PROG(CALL(BPF_FUNC_get_current_pid_tgid), EXIT()), -EOPNOTSUPP,
		       "helper bpf_get_current_pid_tgid (#14) is not available on the GPU");
	assert_refused(PROG(CALL(BPF_FUNC_ringbuf_output), EXIT()), -EOPNOTSUPP,
		       "helper bpf_ringbuf_output (#130)");
	assert_refused(PROG(CALL(100000), EXIT()), -EOPNOTSUPP,
		       "instruction 0: helper #100000 is not available on the GPU");
}

Test(refusals, kfuncs_callbacks_kernel_variables_packets_may_goto_arenas)
{
	assert_refused(PROG(INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_KFUNC_CALL, 0, 5), EXIT()),
		       -EOPNOTSUPP, "instruction 0: kfunc calls (BTF id 5) are not available on the GPU");
	assert_refused(PROG(INSN(BPF_LD | BPF_DW | BPF_IMM, 2, BPF_PSEUDO_FUNC, 0, 2), INSN(0, 0, 0, 0, 0),
			    MOV64_IMM(0, 0), EXIT(), MOV64_IMM(0, 0), EXIT()),
		       -EOPNOTSUPP, "instruction 0: callbacks");
	assert_refused(PROG(INSN(BPF_LD | BPF_DW | BPF_IMM, 2, BPF_PSEUDO_BTF_ID, 0, 77), INSN(0, 0, 0, 0, 0),
			    EXIT()),
		       -EOPNOTSUPP, "kernel variables (ksym, BTF id 77) are not available on the GPU");
	assert_refused(PROG(MOV64_REG(6, 1), INSN(BPF_LD | BPF_ABS | BPF_W, 0, 0, 0, 14), EXIT()),
		       -EOPNOTSUPP, "instruction 1: packet access (BPF_LD_ABS/IND)");
	assert_refused(PROG(INSN(BPF_LD | BPF_IND | BPF_B, 0, 2, 0, 0), EXIT()), -EOPNOTSUPP,
		       "packet access");
	assert_refused(PROG(MOV64_IMM(0, 0), INSN(BPF_JMP | 0xe0, 0, 0, 0, 0), EXIT()), -EOPNOTSUPP,
		       "instruction 1: may_goto is not available on the GPU");
	assert_refused(PROG(INSN(BPF_ALU64 | BPF_MOV | BPF_X, 1, 1, 1, 1), EXIT()), -EOPNOTSUPP,
		       "addr_space_cast (arena memory)");
	assert_refused(PROG(INSN(BPF_JMP | BPF_JA | BPF_X, 1, 0, 0, 0), EXIT()), -EOPNOTSUPP,
		       "indirect jump (gotox)");
}

Test(refusals, maps_other_than_mmapable_arrays_by_name)
{
	assert_refused(PROG(LD_MAP(1, HASH_FD), MOV64_IMM(0, 0), EXIT()), -EOPNOTSUPP,
		       "instruction 0: map by_pid is a hash: device programs reach only arrays declared with CUPROBE_GPU_ARRAY (BPF_F_MMAPABLE)");
	assert_refused(PROG(MOV64_IMM(0, 0), LD_MAP_VALUE(1, PLAIN_FD, 0), EXIT()), -EOPNOTSUPP,
		       "instruction 1: map plain is an array without BPF_F_MMAPABLE");
	assert_refused(PROG(LD_MAP(1, 555), EXIT()), -EINVAL, "a map (fd 555) the object does not have");
}

Test(refusals, the_context_written_beyond_its_end_or_mixed_with_memory)
{
	assert_refused(PROG(ST(BPF_DW, 1, 0, 1), MOV64_IMM(0, 0), EXIT()), -EOPNOTSUPP,
		       "instruction 0: writes to the context, which is read-only");
	assert_refused(PROG(MOV64_IMM(2, 1), ATOMIC(BPF_DW, 1, 2, 0, BPF_ADD), EXIT()), -EOPNOTSUPP,
		       "instruction 1: an atomic operation on the context");
	assert_refused(PROG(LDX(BPF_DW, 0, 1, 160), EXIT()), -EOPNOTSUPP,
		       "instruction 0: reads the context at offset 160: struct cuprobe_gpu_ctx has 144 bytes");
	assert_refused(PROG(LD_MAP_VALUE(2, BSS_FD, 0), STX(BPF_DW, 2, 1, 0), MOV64_IMM(0, 0), EXIT()),
		       -EOPNOTSUPP, "instruction 2: stores the context or a map pointer outside the stack");
}

Test(refusals, malformed_programs)
{
	struct cp_ptx_program prog = { .name = "no good", .insns = alu_program, .insn_count = 2,
				       .maps = maps, .map_count = MAP_COUNT };
	char *ptx = NULL;

	cr_assert_eq(cp_ptx__translate(&prog, &ptx, NULL, error, sizeof(error)), -EINVAL);
	cr_assert(strstr(error, "\"no good\" is not a PTX function name"), "%s", error);
	assert_refused(PROG(INSN(0xff, 0, 0, 0, 0), EXIT()), -EINVAL, "instruction 0: unknown");
	assert_refused(PROG(JA(5), EXIT()), -EINVAL, "instruction 0: jumps outside the program");
	assert_refused(PROG(MOV64_IMM(0, 0)), -EINVAL, "instruction 0: falls off the end of its function");
	assert_refused(PROG(INSN(BPF_ALU64 | BPF_MOV | BPF_K, 11, 0, 0, 0), EXIT()), -EINVAL,
		       "register r11 does not exist");
	assert_refused(PROG(JA(1), LD_IMM64(0, 1), EXIT()), -EINVAL, "a branch into an ld_imm64");
	assert_refused(PROG(CALL_SUB(1), EXIT(), JA(-3), EXIT()), -EINVAL, "jumps into another function");
}

Test(refusals, programs_longer_than_the_gpu_takes)
{
	size_t count = CP_PTX_MAX_INSNS + 1, i;
	struct bpf_insn *insns = calloc(count, sizeof(*insns));

	for (i = 0; i + 1 < count; i++)
		insns[i] = MOV64_IMM(0, 0);
	insns[count - 1] = EXIT();
	assert_refused(insns, count, -EOPNOTSUPP, "65537 instructions: device programs have at most 65536");
	free(insns);
}

/* ---- counters in a device-memory shadow ------------------------------------------------- */

static size_t occurrences(const char *text, const char *what)
{
	size_t n = 0;

	for (const char *at = strstr(text, what); at; at = strstr(at + 1, what))
		n++;
	return n;
}

Test(shadow, small_maps_get_replicas_that_share_128_values_and_large_ones_none)
{
	cr_expect_eq(cp_ptx__shadow_replicas(8, 1), 128);
	cr_expect_eq(cp_ptx__shadow_replicas(8, 4), 32);
	cr_expect_eq(cp_ptx__shadow_replicas(12, 3), 16, "12-byte values take 16: 128 / 6 is 21, rounded down to a power of two");
	cr_expect_eq(cp_ptx__shadow_replicas(8, 3), 32, "128 / 3 is 42");
	cr_expect_eq(cp_ptx__shadow_replicas(64, 1), 16);
	cr_expect_eq(cp_ptx__shadow_replicas(8, 128), 1);
	cr_expect_eq(cp_ptx__shadow_replicas(8, 129), 0);
	cr_expect_eq(cp_ptx__shadow_replicas(4096, 1), 0);
	cr_expect_eq(cp_ptx__shadow_replicas(8, 0), 0);
	cr_expect_eq(cp_ptx__shadow_replicas(0, 4), 0);
}

Test(shadow, a_64_bit_counter_goes_to_its_sms_replica_and_nothing_else_does)
{
	char *ptx = translate(PROG(LD_MAP_VALUE(1, BSS_FD, 0), MOV64_IMM(2, 1),
				   ATOMIC(BPF_DW, 1, 2, 8, BPF_ADD),
				   ATOMIC(BPF_W, 1, 2, 16, BPF_ADD),
				   ATOMIC(BPF_DW, 1, 2, 24, BPF_ADD | BPF_FETCH),
				   ATOMIC(BPF_DW, 1, 2, 32, BPF_OR),
				   MOV64_IMM(0, 0), EXIT()));
	struct cp_ptx_function function = { .name = "prog", .section = "gpu/k", .ptx = ptx };
	char *module = NULL;

	/* Every launch's (graph nodes' too), only inside the map (64 bytes), to replica smid mod 16. */
	assert_has(ptx, ".reg .pred %shp;\n\tld.const.u64 %sh0, [__cuprobe_map_4];\n\tsub.u64 %sh1, %t6, %sh0;\n"
			"\tsetp.ge.u64 %shp, %sh1, 64;\n\t@%shp bra $L3_not_shadow4;\n"
			"\tmov.u32 %shw, %smid;\n\tand.b32 %shw, %shw, 15;\n\tmul.wide.u32 %sh2, %shw, 128;\n"
			"\tmov.u64 %sh0, __cuprobe_shadow_4;\n\tcvta.global.u64 %sh0, %sh0;\n"
			"\tadd.u64 %sh0, %sh0, %sh2;\n\tadd.u64 %t6, %sh0, %sh1;\n");
	/*
	 * Then the warp's aggregation on the moved address. The operand is the
	 * constant 1 set just before: 32 for a whole warp on one address, 1 for
	 * a lone lane, else 1 times the lanes on each address; no exchange of
	 * operands.
	 */
	assert_has(ptx, "$L3_shadowed:\n\t}\n\t{\n\t.reg .b32 %ga<10>;");
	assert_has(ptx, "@!%gp0 bra $L3_match;\n\tmov.b32 %ga1, -1;\n\tmov.u64 %gd0, 32;\n"
			"\tbra.uni $L3_summed;\n$L3_match:\n\tpopc.b32 %ga6, %ga0;\n\tsetp.ne.u32 %gp0, %ga6, 1;\n"
			"\t@%gp0 bra $L3_group;\n\tmov.b32 %ga1, %ga0;\n\tmov.u64 %gd0, 1;\n\tbra.uni $L3_summed;\n"
			"$L3_group:\n\tmatch.any.sync.b64 %ga1, %t6, %ga0;\n"
			"\tpopc.b32 %ga6, %ga1;\n\tcvt.u64.u32 %gd1, %ga6;\n\tmul.lo.u64 %gd0, %gd1, 1;\n"
			"$L3_summed:");
	assert_lacks(ptx, "$L3_sum:");
	/* The 32-bit add's operand was not set just before it: a butterfly, or the loop by address. */
	assert_has(ptx, "@!%gp0 bra $L4_match;\n\tmov.b32 %ga1, -1;\n\tcvt.u64.u32 %gd0, %ga8;\n"
			"\tmov.b64 {%ga6, %ga7}, %gd0;\n\tshfl.sync.bfly.b32 %ga6, %ga6, 16, 31, -1;");
	assert_has(ptx, "shfl.sync.bfly.b32 %ga7, %ga7, 1, 31, -1;\n\tmov.b64 %gd1, {%ga6, %ga7};\n"
			"\tadd.u64 %gd0, %gd0, %gd1;\n\tbra.uni $L4_summed;\n$L4_match:");
	assert_has(ptx, "\t@%gp0 bra $L4_group;\n\tmov.b32 %ga1, %ga0;\n\tcvt.u64.u32 %gd0, %ga8;\n"
			"\tbra.uni $L4_summed;\n$L4_group:");
	assert_has(ptx, "$L4_sum:");
	/* The 32-bit add, the add with a result and the or reach the map itself. */
	cr_expect_eq(occurrences(ptx, "%smid"), 1, "%s", ptx);
	assert_lacks(ptx, "__cuprobe_shadow_0");
	cr_assert_eq(cp_ptx__module(&function, 1, maps, used, MAP_COUNT, &module), 0);
	/* 16 copies of 8 words, 128 bytes apart; weak: the copies of a link's inputs are one. */
	assert_has(module, ".weak .global .align 128 .b8 __cuprobe_shadow_4[2048];"
			   "\t// 16 copies of 8 words, 128 bytes apart\n");
	cr_expect_eq(cp_ptx__shadow_stride(8, 8), 128);
	/* Nothing else in the kernel: no count of its blocks, no work at its end. */
	assert_lacks(module, ".shared");
	assert_lacks(module, "bar.sync");
	judge(ptx, "a counter into a shadow");
	free(module);
	free(ptx);
}

Test(shadow, declarations_say_whether_some_map_has_a_shadow)
{
	static const struct cp_ptx_map large[] = {
		{ .name = "big", .value_size = 8, .max_entries = 1024 },
		{ .name = "small", .value_size = 8, .max_entries = 1 },
	};
	uint64_t addresses[] = { 0x7f0000001000ull, 0x7f0000009000ull };
	bool only_large[] = { true, false }, shadowed = true;
	char *text = NULL;

	cr_assert_eq(cp_ptx__map_declarations(addresses, large, only_large, 2, &text, &shadowed), 0);
	cr_expect(!shadowed);
	assert_lacks(text, "__cuprobe_shadow");
	free(text);
	cr_assert_eq(cp_ptx__map_declarations(addresses, large, NULL, 2, &text, &shadowed), 0);
	cr_expect(shadowed);
	assert_lacks(text, "__cuprobe_shadow_0");
	assert_has(text, ".weak .global .align 128 .b8 __cuprobe_shadow_1[16384];"
			 "\t// 128 copies of 1 words, 128 bytes apart\n");
	cr_expect_eq(cp_ptx__shadow_stride(8, 1), 128, "one word takes a whole line");
	free(text);
}

/* cuprobe_gpu_output's shape: a ticket in the control block, a slot, its commit. */
static const struct bpf_insn ring_program[] = {
	ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4),
	LD_MAP(1, RING_CONTROL_FD), CALL(BPF_FUNC_map_lookup_elem),
	JMP_IMM(BPF_JEQ, 0, 0, 10),
	MOV64_IMM(1, 1), ATOMIC(BPF_DW, 0, 1, 24, BPF_ADD | BPF_FETCH),
	ST(BPF_W, 10, -8, 3), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -8),
	LD_MAP(1, RING_FD), CALL(BPF_FUNC_map_lookup_elem),
	JMP_IMM(BPF_JEQ, 0, 0, 2),
	MOV64_IMM(1, 5), ATOMIC(BPF_DW, 0, 1, 0, BPF_XCHG),
	MOV64_IMM(0, 0), EXIT(),
};

Test(rings, a_rings_maps_are_the_blocks_segment_in_device_memory, .timeout = 60)
{
	char *ptx = translate(ring_program, sizeof(ring_program) / sizeof(ring_program[0]));
	uint64_t addresses[MAP_COUNT] = { 0 };
	char *declarations = NULL;
	struct cp_ptx_ring ring;
	bool shadowed = false;

	cr_assert(cp_ptx__ring_of(maps, MAP_COUNT, 5, &ring) && ring.slots == 5 && ring.control == 6);
	cr_assert(cp_ptx__ring_of(maps, MAP_COUNT, 6, &ring));
	cr_expect(ring.segments == 4 && ring.segment_slots == 64 && ring.slot_bytes == 24 &&
		  ring.control_stride == 1152 && ring.slots_stride == 1536,
		  "%u segments of %u slots of %u bytes, %llu and %llu apart", ring.segments, ring.segment_slots,
		  ring.slot_bytes, (unsigned long long)ring.control_stride, (unsigned long long)ring.slots_stride);
	cr_expect_not(cp_ptx__ring_of(maps, MAP_COUNT, 0, &ring), "counts is no ring's");
	/* The block's segment: its linear index, modulo the segments. */
	assert_has(ptx, "mad.lo.u32 %rg0, %rg1, %rg2, %rg0;\n\tand.b32 %rg0, %rg0, 3;\n"
			"\tmul.wide.u32 %t1, %rg0, 1152;");
	assert_has(ptx, "mov.u64 %t0, __cuprobe_ring_control_6;");
	assert_has(ptx, "mul.wide.u32 %t1, %rg0, 1536;");
	assert_has(ptx, "mov.u64 %t0, __cuprobe_ring_slots_5;");
	/* A slot beyond the segment's 64 is none. */
	assert_has(ptx, "setp.lt.u32 %p0, %w0, 64;");
	/* Device memory of the GPU's own, read once its kernels are done: relaxed atomics, no fence. */
	assert_has(ptx, "atom.relaxed.gpu.add.u64 %r1, [%t6], %r1;");
	assert_lacks(ptx, "membar.sys");
	assert_lacks(ptx, "acq_rel");
	/* An exchange whose old value is not used (an older SDK's commit): a store. */
	assert_has(ptx, "st.relaxed.gpu.b64 [%t6], %r1;");
	/* Declared with the layout said, and named as a drain's need. */
	cr_assert_eq(cp_ptx__map_declarations(addresses, maps, NULL, MAP_COUNT, &declarations, &shadowed), 0);
	assert_has(declarations, ".weak .global .align 128 .b8 __cuprobe_ring_control_6[4608];\t// ring of maps 6 and 5: "
			       "4 segments of 64 slots of 24 bytes, 1536 bytes apart");
	assert_has(declarations, ".weak .global .align 128 .b8 __cuprobe_ring_slots_5[6144];\t// control blocks 1152 bytes apart");
	cr_expect(shadowed);
	cr_expect(cp_ptx__uses_shadow(ptx));
	judge(ptx, "a device ring's segments");
	free(declarations);
	free(ptx);
}

Test(rings, a_rings_maps_are_not_reached_but_by_a_lookup)
{
	assert_refused(PROG(LD_MAP_VALUE(2, RING_FD, 0), MOV64_IMM(0, 0), EXIT()), -EOPNOTSUPP,
		       "instruction 0: device ring map events is reached through bpf_map_lookup_elem (cuprobe_gpu_output) only");
	assert_refused(PROG(ST(BPF_W, 10, -4, 0), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), MOV64_REG(3, 2),
			    MOV64_IMM(4, 0), LD_MAP(1, RING_FD), CALL(BPF_FUNC_map_update_elem), EXIT()),
		       -EOPNOTSUPP, "bpf_map_update_elem on device ring map events: rings are written by cuprobe_gpu_output");
}
