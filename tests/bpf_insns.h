/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* BPF instructions written by hand, as the kernel's own tests write them (its filter.h). */
#ifndef CUPROBE_TEST_BPF_INSNS_H
#define CUPROBE_TEST_BPF_INSNS_H

#include <stdint.h>

#include <linux/bpf.h>

#define INSN(c, d, s, o, i) \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define ALU64_IMM(op, d, i) INSN(BPF_ALU64 | (op) | BPF_K, d, 0, 0, i)
#define ALU64_REG(op, d, s) INSN(BPF_ALU64 | (op) | BPF_X, d, s, 0, 0)
#define ALU32_IMM(op, d, i) INSN(BPF_ALU | (op) | BPF_K, d, 0, 0, i)
#define ALU32_REG(op, d, s) INSN(BPF_ALU | (op) | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i) ALU64_IMM(BPF_MOV, d, i)
#define MOV64_REG(d, s) ALU64_REG(BPF_MOV, d, s)
#define LDX(size, d, s, o) INSN(BPF_LDX | BPF_MEM | (size), d, s, o, 0)
#define LDXSX(size, d, s, o) INSN(BPF_LDX | 0x80 | (size), d, s, o, 0)
#define STX(size, d, s, o) INSN(BPF_STX | BPF_MEM | (size), d, s, o, 0)
#define ST(size, d, o, i) INSN(BPF_ST | BPF_MEM | (size), d, 0, o, i)
#define ATOMIC(size, d, s, o, op) INSN(BPF_STX | BPF_ATOMIC | (size), d, s, o, op)
#define JMP_IMM(op, d, i, o) INSN(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define JMP_REG(op, d, s, o) INSN(BPF_JMP | (op) | BPF_X, d, s, o, 0)
#define JMP32_IMM(op, d, i, o) INSN(BPF_JMP32 | (op) | BPF_K, d, 0, o, i)
#define JMP32_REG(op, d, s, o) INSN(BPF_JMP32 | (op) | BPF_X, d, s, o, 0)
#define JA(o) INSN(BPF_JMP | BPF_JA, 0, 0, o, 0)
#define CALL(helper) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, helper)
#define CALL_SUB(rel) INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, rel)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define LD_IMM64(d, v) \
	INSN(BPF_LD | BPF_DW | BPF_IMM, d, 0, 0, (int32_t)(uint32_t)(v)), \
	INSN(0, 0, 0, 0, (int32_t)(uint32_t)((uint64_t)(v) >> 32))
#define LD_MAP(d, fd) INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), INSN(0, 0, 0, 0, 0)
#define LD_MAP_VALUE(d, fd, o) \
	INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_VALUE, 0, fd), INSN(0, 0, 0, 0, o)
/* ISA v4 (kernels 6.6+) and load-acquire/store-release (6.15+): newer than Debian 12's uapi. */
#define SDIV64_REG(d, s) INSN(BPF_ALU64 | BPF_DIV | BPF_X, d, s, 1, 0)
#define SMOD64_IMM(d, i) INSN(BPF_ALU64 | BPF_MOD | BPF_K, d, 0, 1, i)
#define SDIV32_IMM(d, i) INSN(BPF_ALU | BPF_DIV | BPF_K, d, 0, 1, i)
#define SMOD32_REG(d, s) INSN(BPF_ALU | BPF_MOD | BPF_X, d, s, 1, 0)
#define MOVSX64(d, s, bits) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, bits, 0)
#define MOVSX32(d, s, bits) INSN(BPF_ALU | BPF_MOV | BPF_X, d, s, bits, 0)
#define BSWAP(d, bits) INSN(BPF_ALU64 | BPF_END, d, 0, 0, bits)
#define GOTOL(o) INSN(BPF_JMP32 | BPF_JA, 0, 0, 0, o)
#define LOAD_ACQ(size, d, s, o) ATOMIC(size, d, s, o, 0x100)
#define STORE_REL(size, d, s, o) ATOMIC(size, d, s, o, 0x110)

#endif
