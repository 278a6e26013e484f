/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The translator from verified BPF bytecode to PTX: device programs
 * (SEC("gpu/GLOB"), bpf/cuprobe.bpf.h) as PTX functions that the injection
 * pastes into a CUDA module, for the driver to compile with the kernels
 * they go into. Like the kernel's own JITs it trusts the verifier for what
 * the verifier checks (bounds, initialized registers, termination) and
 * refuses, by name, whatever the GPU has no translation for.
 *
 * Not installed: the library's and the CLI's (libcuprobe.a).
 */
#ifndef CUPROBE_PTX_JIT_H
#define CUPROBE_PTX_JIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/bpf.h>

/* Stack bytes of every BPF function, as the kernel allows. */
#define CP_PTX_STACK_BYTES 512
/* The longest program translated (the kernel takes more; the GPU's programs are short). */
#define CP_PTX_MAX_INSNS 65536
/* The PTX the output needs at least, and the target it declares (--ptx's module). */
#define CP_PTX_VERSION "6.2"
#define CP_PTX_TARGET "sm_70"

/* A map of the object, as the instructions name it. Index i is __cuprobe_map_<i>. */
struct cp_ptx_map {
	const char *name;
	int fd;                  /* what ld_imm64 BPF_PSEUDO_MAP_FD/VALUE carries */
	uint32_t type;           /* enum bpf_map_type */
	uint32_t flags;          /* map_flags: device maps need BPF_F_MMAPABLE */
	uint32_t key_size;
	uint32_t value_size;
	uint32_t max_entries;
	bool without_shadow;     /* declarations: no program adds into it, no shadow declared */
};

/* One verified program: its instructions after the load (map fds in, subprograms appended). */
struct cp_ptx_program {
	const char *name;                /* the PTX function's name: letters, digits, _ and $ */
	const struct bpf_insn *insns;
	size_t insn_count;
	const struct cp_ptx_map *maps;   /* the object's maps */
	size_t map_count;
};

/*
 * Translates prog into PTX `.func` definitions: one per BPF subprogram,
 * callees first, named NAME__sub<first instruction>, then the program's
 *
 *	.func NAME (.param .b64 __cuprobe_launch)
 *
 * where __cuprobe_launch is the generic address of the launch's slot (a
 * __u64 holding its sequence number; 0 when there is none). A map is
 * reached through `__cuprobe_map_<i>` (cp_ptx__map_declarations), i its
 * index in prog->maps. Only PTX ISA 6.2 instructions for sm_70 and later (match.any.sync for the warp aggregation).
 *
 * Returns 0 with *ptx malloc'd (NUL-terminated) and maps_used[i] set for
 * each map it references (maps_used: map_count entries, or NULL); or
 * -EINVAL (a bad argument or instruction), -EOPNOTSUPP (what the GPU has no
 * translation for: a helper, a map type, an instruction class) or -ENOMEM,
 * with one line in error: "instruction 12: helper bpf_probe_read_user
 * (#112) is not available on the GPU".
 */
int cp_ptx__translate(const struct cp_ptx_program *prog, char **ptx, bool *maps_used,
		      char *error, size_t error_size);

/*
 * Device-memory shadows (docs/device-programs.md, "Counters in a shadow"):
 * a map of at most CP_PTX_SHADOW_MAX_WORDS 8-byte words of values gets, in
 * each module, copies of its values in device memory, one for each of
 * cp_ptx__shadow_replicas() groups of SMs. A 64-bit add without a result
 * (a counter) goes to its SM's copy; the injection moves what the copies
 * gained into the kernel's map at the calls that prove kernels done
 * (synchronizations, completed queries, blocking copies) and before the
 * module or its context goes. Everything else (loads, stores, other
 * atomics, 32-bit adds) reaches the map as before.
 */
#define CP_PTX_SHADOW_MAX_WORDS 128
/* The shadow of map I in a module: `.global .b8 NAME<I>[replicas x stride]`. */
#define CP_PTX_SHADOW_PREFIX "__cuprobe_shadow_"

/* The copies a map of this shape gets (1 to 128), or 0: none, its adds go to the map. */
unsigned int cp_ptx__shadow_replicas(uint32_t value_size, uint32_t max_entries);
/* Bytes from one copy to the next (whole 128-byte lines): the shadow is replicas x this. */
uint64_t cp_ptx__shadow_stride(uint32_t value_size, uint32_t max_entries);
/* Does a translation (cp_ptx__translate's text) add into a shadow or write a ring? Its launches then need a drain. */
bool cp_ptx__uses_shadow(const char *ptx);

/*
 * Device rings (CUPROBE_GPU_RING, docs/device-programs.md "Device rings"):
 * a ring's two maps, NAME (the slots) and NAME__control, are on the GPU
 * segments in device memory, in each module:
 *	.weak .global .align 128 .b8 __cuprobe_ring_control_<C>[segments x control_stride];
 *	.weak .global .align 128 .b8 __cuprobe_ring_slots_<S>[segments x slots_stride];
 * C and S the maps' indexes; a block's lookups in either map reach its own
 * segment (linear block index & (segments - 1)). The injection moves what
 * the segments hold into the kernel's maps at the calls that prove kernels
 * done, like the counters' shadows.
 */
#define CP_PTX_RING_CONTROL_PREFIX "__cuprobe_ring_control_"
#define CP_PTX_RING_SLOTS_PREFIX "__cuprobe_ring_slots_"

struct cp_ptx_ring {
	size_t control, slots;       /* the two maps' indexes */
	uint32_t segments;           /* a power of two (CUPROBE_GPU_RING_SEGMENTS) */
	uint32_t segment_slots;      /* a power of two (CUPROBE_GPU_RING_SEGMENT_SLOTS) */
	uint32_t slot_bytes;         /* from one slot to the next (the kernel's array stride) */
	uint64_t control_stride;     /* bytes from one segment's control block to the next */
	uint64_t slots_stride;       /* bytes from one segment's slots to the next */
};

/*
 * Is map m one of a ring's two maps? By their names and shapes: NAME__control
 * holds one struct cuprobe_gpu_ring_control, NAME is an array of a power of
 * two slots, each a struct cuprobe_gpu_ring_slot and a record. Fills *ring.
 */
bool cp_ptx__ring_of(const struct cp_ptx_map *maps, size_t count, size_t m, struct cp_ptx_ring *ring);

/*
 * The module-scope declarations of the maps i < count with declare[i] (all
 * when declare is NULL), one line each:
 *	.const .align 8 .u64 __cuprobe_map_<i> = <addresses[i]>;
 * addresses[i]: the generic (UVA) address of map i's first value (what a
 * mapping of the map's fd starts with). With shapes (value_size and
 * max_entries of each map; NULL: no shadows), the shadows of the declared
 * maps that have one and the segments of the declared rings (*shadowed
 * set when any is declared: launches of the kernels using them need the
 * drain). 0 with *ptx
 * malloc'd, or -EINVAL/-ENOMEM.
 */
int cp_ptx__map_declarations(const uint64_t *addresses, const struct cp_ptx_map *shapes,
			     const bool *declare, size_t count, char **ptx, bool *shadowed);

/* A translated program, for a whole module. */
struct cp_ptx_function {
	const char *name;        /* cp_ptx_program's name */
	const char *section;     /* "gpu/vec_add": said in a comment */
	const char *ptx;         /* cp_ptx__translate's text */
};

/*
 * A standalone module that ptxas accepts: the header (.version, .target
 * sm_70, 64-bit addresses), the declarations of the maps with maps_used[i]
 * (all when NULL) at address 0, named in a comment, the functions, and an
 * entry `__cuprobe_check` calling each with no launch slot. What `cuprobe
 * run PROG --ptx` prints. 0 with *ptx malloc'd, or -EINVAL/-ENOMEM.
 */
int cp_ptx__module(const struct cp_ptx_function *functions, size_t count,
		   const struct cp_ptx_map *maps, const bool *maps_used, size_t map_count,
		   char **ptx);

/*
 * Program name's function, found in functions (text of cp_ptx__translate's),
 * as a block a kernel holds in place of a call to it: `{`, its declarations
 * and code, each `ret` a branch to a label before the block's `}`. Its
 * `ld.param` of __cuprobe_launch reads the kernel's parameter of that name.
 * Labels and declarations are the block's own (PTX scopes them), so blocks
 * of several programs, or one program at several exits, sit side by side.
 * Why not a call: ptxas keeps a program's function a real call (CALL, RET
 * and a reconvergence barrier), and where one lane of a warp takes its
 * branch the whole warp pays for it (measured on vec_add of 1M, an H200:
 * one ring record a warp cost 1.56x called, 1.42x inlined).
 * NULL when functions has no such function, or on ENOMEM.
 */
char *cp_ptx__inline_block(const char *functions, const char *name);

#endif /* CUPROBE_PTX_JIT_H */
