// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The seeds of fuzz_ptx_jit (make_seeds.sh): device programs as a verifier would pass them. */
#include <stdio.h>
#include <string.h>

#include "bpf_insns.h"

#define COUNTS 100
#define WIDE 101
#define HASH 102

static void write_program(const char *dir, const char *name, const struct bpf_insn *insns, size_t n)
{
	char path[512];
	FILE *out;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	out = fopen(path, "wb");
	fwrite(insns, sizeof(*insns), n, out);
	fclose(out);
}

#define WRITE(dir, name, ...) do { \
	const struct bpf_insn insns[] = { __VA_ARGS__ }; \
	write_program(dir, name, insns, sizeof(insns) / sizeof(insns[0])); } while (0)

int main(int argc, char **argv)
{
	const char *dir = argv[1];

	(void)argc;
	WRITE(dir, "alu", MOV64_IMM(1, 7), MOV64_IMM(2, 3), ALU64_REG(BPF_ADD, 1, 2),
	      ALU64_IMM(BPF_MUL, 1, 5), ALU64_REG(BPF_DIV, 1, 2), ALU64_REG(BPF_MOD, 1, 2),
	      ALU32_IMM(BPF_LSH, 2, 3), ALU32_REG(BPF_ARSH, 2, 1), ALU64_IMM(BPF_XOR, 1, -1),
	      INSN(BPF_ALU64 | BPF_NEG, 1, 0, 0, 0), INSN(BPF_ALU | BPF_END | BPF_TO_BE, 1, 0, 0, 32),
	      MOV64_REG(0, 1), EXIT());
	WRITE(dir, "jumps", MOV64_IMM(0, 0), MOV64_IMM(1, 5), MOV64_IMM(2, 9),
	      JMP_IMM(BPF_JGT, 1, 3, 1), ALU64_IMM(BPF_ADD, 0, 1), JMP_REG(BPF_JSLT, 1, 2, 1),
	      ALU64_IMM(BPF_ADD, 0, 2), JMP32_IMM(BPF_JSET, 2, 8, 1), ALU64_IMM(BPF_ADD, 0, 4),
	      JA(1), ALU64_IMM(BPF_ADD, 0, 8), EXIT());
	WRITE(dir, "stack-loop", MOV64_IMM(1, 0), ST(BPF_DW, 10, -8, 0), LDX(BPF_DW, 2, 10, -8),
	      ALU64_REG(BPF_ADD, 2, 1), STX(BPF_DW, 10, 2, -8), ALU64_IMM(BPF_ADD, 1, 1),
	      JMP_IMM(BPF_JLT, 1, 10, -5), ST(BPF_B, 10, -9, 1), LDX(BPF_B, 3, 10, -9),
	      LDX(BPF_DW, 0, 10, -8), EXIT());
	WRITE(dir, "map-count", ST(BPF_W, 10, -4, 1), LD_MAP(1, COUNTS), MOV64_REG(2, 10),
	      ALU64_IMM(BPF_ADD, 2, -4), CALL(BPF_FUNC_map_lookup_elem), JMP_IMM(BPF_JEQ, 0, 0, 2),
	      MOV64_IMM(1, 1), ATOMIC(BPF_DW, 0, 1, 0, BPF_ADD), ST(BPF_DW, 10, -16, 42),
	      LD_MAP(1, WIDE), MOV64_REG(2, 10), ALU64_IMM(BPF_ADD, 2, -4), MOV64_REG(3, 10),
	      ALU64_IMM(BPF_ADD, 3, -16), MOV64_IMM(4, BPF_ANY), CALL(BPF_FUNC_map_update_elem),
	      CALL(BPF_FUNC_ktime_get_ns), MOV64_REG(7, 0), CALL(BPF_FUNC_get_smp_processor_id),
	      ALU64_REG(BPF_ADD, 0, 7), EXIT());
	WRITE(dir, "map-value-atomics", LD_MAP_VALUE(6, COUNTS, 8), MOV64_IMM(1, 1),
	      ATOMIC(BPF_DW, 6, 1, 0, BPF_ADD | BPF_FETCH), ATOMIC(BPF_W, 6, 1, 0, BPF_OR),
	      ATOMIC(BPF_DW, 6, 1, 0, BPF_XCHG), MOV64_IMM(0, 0), ATOMIC(BPF_DW, 6, 1, 0, BPF_CMPXCHG),
	      EXIT());
	WRITE(dir, "context", LDX(BPF_W, 2, 1, 0), LDX(BPF_W, 3, 1, 4), LDX(BPF_DW, 4, 1, 8),
	      ALU64_REG(BPF_ADD, 2, 3), MOV64_REG(0, 2), EXIT());
	WRITE(dir, "subprogram", MOV64_IMM(1, 4), CALL_SUB(2), ALU64_IMM(BPF_ADD, 0, 1), EXIT(),
	      MOV64_REG(0, 1), ALU64_IMM(BPF_MUL, 0, 3), EXIT());
	WRITE(dir, "hash-lookup", ST(BPF_W, 10, -4, 7), LD_MAP(1, HASH), MOV64_REG(2, 10),
	      ALU64_IMM(BPF_ADD, 2, -4), CALL(BPF_FUNC_map_lookup_elem), MOV64_IMM(0, 0), EXIT());
	return 0;
}
