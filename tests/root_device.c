// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Device programs (SEC("gpu/GLOB")) end to end on a machine without a GPU:
 * the kernel's verifier first, then the translation that `cuprobe run PROG
 * --ptx` prints, judged by ptxas for the oldest target it has and for
 * sm_90: every device example, and clang-built programs for BPF ISA v1
 * (cuprobe run's own clang) and v3. A host program shares a map with them;
 * every refusal is one line with exit status 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <criterion/criterion.h>

#include "bpf_insns.h"
#include "device/ptx_jit.h"
#include "helpers.h"
#include "ptxas.h"

/* An example of bpf/examples/, as a file of root's (see root_owned_copy). */
#define EXAMPLE(name) root_owned_copy(EXAMPLES_DIR "/" name)

struct run {
	int status;
	char *out;       /* -o FILE, or stdout when there is none */
	char *err;
};

/* cuprobe run PROG ARGS... (args: PROG first, NULL-terminated), with -o FILE after PROG when out_file. */
static void cuprobe(struct run *r, bool out_file, const char *const *args)
{
	char *dir = make_tmpdir(), *out = path_join(dir, "out"), *err = path_join(dir, "err");
	char *argv[32];
	struct run_opts opts = { .stderr_path = err };
	int n = 0, i;

	require_root();
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "run";
	argv[n++] = (char *)args[0];
	if (out_file) {
		argv[n++] = "-o";
		argv[n++] = out;
	} else {
		opts.stdout_path = out;
	}
	for (i = 1; args[i]; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	r->status = run_program(argv, &opts, NULL);
	r->out = read_text(out);
	r->err = read_text(err);
	remove_tree(dir);
	free(dir);
	free(out);
	free(err);
}

static void release(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* The module --ptx prints for prog, judged by ptxas; the caller frees it. */
static char *ptx_of(const char *prog)
{
	const char *const args[] = { prog, "--ptx", NULL };
	struct run r;

	cuprobe(&r, true, args);
	cr_assert_eq(r.status, 0, "%s --ptx: %s", prog, r.err);
	cr_assert_str_empty(r.err, "%s --ptx said: %s", prog, r.err);
	cr_assert(r.out && strstr(r.out, ".version 6.2\n.target sm_70\n.address_size 64\n"), "%s", r.out);
	free(r.err);
	return r.out;
}

static void judge(const char *module, const char *what)
{
	require_ptxas();
	assert_ptxas_accepts(module, ptxas_oldest_arch(), what);
	assert_ptxas_accepts(module, "sm_90", what);
}

static void assert_has(const char *text, const char *needle)
{
	cr_assert(strstr(text, needle), "expected \"%s\" in:\n%s", needle, text);
}

/* ---- the examples and clang-built programs, through --ptx and ptxas -------------------- */

/* Each program through the verifier and --ptx, its module through ptxas. */
static void judge_each(const char *const *programs, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++) {
		char *module = ptx_of(programs[i]);

		judge(module, programs[i]);
		free(module);
	}
}

Test(ptx, every_device_example, .timeout = 120)
{
	const char *const examples[] = { EXAMPLE("gpu_threads.bpf.c"), EXAMPLE("gpu_block_time.bpf.c"),
					 EXAMPLE("gpu_sm_blocks.bpf.c"), EXAMPLE("gpu_warp_exits.bpf.c") };

	judge_each(examples, sizeof(examples) / sizeof(examples[0]));
}

/* The device programs of the checks run on a machine with a GPU (tests/gpu/device_*.sh). */
#define GPU_CHECK(name) root_owned_copy(GPU_CHECKS_DIR "/" name)

Test(ptx, every_gpu_check_program, .timeout = 120)
{
	GPU_CHECK("device_check.bpf.h"); /* beside the programs that include it */
	const char *const programs[] = { GPU_CHECK("device_count.bpf.c"), GPU_CHECK("device_graph.bpf.c"),
					 GPU_CHECK("device_exact.bpf.c"),
					 GPU_CHECK("device_overhead.bpf.c"),
					 GPU_CHECK("device_coverage.bpf.c") };

	judge_each(programs, sizeof(programs) / sizeof(programs[0]));
}

Test(ptx, the_entry_counter_counts_with_one_reduction_a_warp, .timeout = 60)
{
	char *module = ptx_of(EXAMPLE("gpu_threads.bpf.c")), *function, *end;

	assert_has(module, "\t// threads_entered: 1 x 8 bytes\n");
	assert_has(module, "// __cuprobe_gpu_count_threads: SEC(\"gpu/vec_add*\")\n"
			   ".func __cuprobe_gpu_count_threads (.param .b64 __cuprobe_launch)\n");
	/* the lanes adding to one address sum over the warp; the lowest of them adds */
	assert_has(module, "match.any.sync.b64 %ga1, %t6, %ga0;");
	assert_has(module, "cvta.to.global.u64 %gd1, %t6;\n\t@%gp1 red.global.add.u64 [%gd1], %gd0;");
	/* the counter goes to its SM's replica of the map's device-memory shadow */
	assert_has(module, "mov.u64 %sh0, __cuprobe_shadow_");
	assert_has(module, ".weak .global .align 128 .b8 __cuprobe_shadow_");
	function = strstr(module, ".func __cuprobe_gpu_count_threads");
	cr_assert_not_null(function);
	end = strstr(function, "\n}\n");
	cr_assert_not_null(end);
	cr_assert(!memmem(function, (size_t)(end - function), "membar", 6),
		  "a counter needs no fence: %s", module);
	free(module);
}

/*
 * The ring's protocol in PTX, on the block's segment in device memory: one
 * relaxed atomic of the GPU's scope takes the position, then the record's
 * stores and the commit, a plain store (the drain reads a segment only
 * when the kernels that write it are done): no fence, no second atomic.
 */
Test(ptx, the_warp_ring_takes_one_atomic_and_commits_with_a_store, .timeout = 60)
{
	char *module = ptx_of(EXAMPLE("gpu_warp_exits.bpf.c"));
	char *fetch = strstr(module, "\tatom.relaxed.gpu.add.u64 "), *commit;

	assert_has(module, "// __cuprobe_gpu_warp_exit: SEC(\"gpu.exit/vec_add*\")");
	assert_has(module, "\t// warp_exits: 65536 x 40 bytes\n");
	assert_has(module, "\t// warp_exits__control: 1 x 1080 bytes\n");
	/* 128 segments of 512 slots, the block's by its linear index */
	assert_has(module, "// ring of maps 0 and 1: 128 segments of 512 slots of 40 bytes, 20480 bytes apart");
	assert_has(module, "and.b32 %rg0, %rg0, 127;\n\tmul.wide.u32 %t1, %rg0, 1152;");
	assert_has(module, "mov.u64 %t0, __cuprobe_ring_slots_1;");
	cr_assert_null(strstr(module, "membar.sys"), "a segment needs no system-wide fence: %s", module);
	cr_assert_null(strstr(module, "acq_rel"), "nor ordered atomics: %s", module);
	cr_assert_null(strstr(module, "st.release"), "nor a released commit: %s", module);
	/* the position: the one fetch-and-add with a result */
	cr_assert_not_null(fetch, "%s", module);
	cr_assert_null(strstr(fetch + 1, "\tatom."), "one atomic: %s", module);
	/* the record's stores (block, warp, sm, exit_ns) come after it, the commit (the slot's first word) last */
	commit = strstr(fetch, "\tst.u64 [%r0+0], ");
	cr_assert_not_null(commit, "%s", module);
	cr_assert(strstr(fetch, "\tst.u32 [%r0+16], ") < commit, "%s", module);
	cr_assert(!strstr(commit + 1, "\tst.") || strstr(commit + 1, "\tst.") > strstr(commit, "\n}"),
		  "the commit is the function's last store: %s", module);
	/* the launch named by its slot's address, not read */
	assert_has(module, "mov.b64 %r");
	cr_assert_not_null(strstr(module, ", %cp_launch;"), "%s", module);
	free(module);
}

Test(ptx, the_block_timer_reads_the_globaltimer_at_entry_and_exit, .timeout = 60)
{
	char *module = ptx_of(EXAMPLE("gpu_block_time.bpf.c"));
	char *exit_program = strstr(module, ".func __cuprobe_gpu_block_exit "), *atom;

	assert_has(module, "// __cuprobe_gpu_block_entry: SEC(\"gpu/vec_add*\")");
	assert_has(module, "// __cuprobe_gpu_block_exit: SEC(\"gpu.exit/vec_add*\")");
	cr_assert_not_null(exit_program);
	assert_has(module, "mov.u64 %r1, %globaltimer;");
	/* the last thread of a block: an ordered fetch-and-add, on the slots in .bss */
	atom = strstr(exit_program, "\tatom.add.u64 ");
	cr_assert(atom && !strncmp(atom - strlen("membar.sys;\n"), "membar.sys;\n", strlen("membar.sys;\n")) &&
		  strstr(atom, ";\n\tmembar.sys;") == atom + strcspn(atom, ";"), "%s", exit_program);
	assert_has(module, "\t// cuprobe_.bss: 1 x 1048576 bytes\n");
	assert_has(exit_program, "%globaltimer");
	free(module);
}

Test(ptx, clang_built_programs_for_isa_v1_and_v3, .timeout = 120)
{
	char *v1 = ptx_of(root_owned_copy(DEVICE_ISA)), *v3 = ptx_of(root_owned_copy(DEVICE_ISA_V3));

	judge(v1, "device_isa.bpf.c (v1)");
	judge(v3, "device_isa.bpf.o (v3)");
	/* Both: a subprogram with the context and a stack pointer, division, atomics, globals. */
	assert_has(v1, ".func (.param .b64 __cuprobe_ret) __cuprobe_gpu_device_entry__sub");
	assert_has(v1, "div.u64");
	assert_has(v1, "atom.or.b64");
	assert_has(v1, "atom.exch.b64");
	assert_has(v1, "atom.cas.b64");
	assert_has(v1, "mov.u64 %r0, %globaltimer;");
	assert_has(v1, "mov.u32 %w0, %smid;");
	assert_has(v1, "[%cp_launch];");
	assert_has(v1, "\t// shared_stats: 1 x 80 bytes\n");
	assert_has(v1, "\t// cuprobe_.rodata: 1 x 8 bytes\n");
	/* The host program's runtime maps are not the GPU's. */
	cr_assert_null(strstr(v1, "cuprobe_config"), "%s", v1);
	/* v3: 32-bit arithmetic and atomics */
	cr_assert_null(strstr(v1, "add.u32 %w4"), "v1 has no 32-bit ALU: %s", v1);
	assert_has(v3, "add.u32 %w4");
	assert_has(v3, "atom.cas.b32");
	assert_has(v3, "atom.add.u32");
	free(v1);
	free(v3);
}

/*
 * What this kernel's verifier takes beyond what clang 14 emits (ISA v4,
 * load-acquire and store-release), loaded as the device programs are (a
 * kprobe program), then translated: the classes the GPU gets from newer
 * compilers.
 */
Test(ptx, isa_v4_as_the_kernel_takes_it, .timeout = 60)
{
	static const struct bpf_insn insns[] = {
		MOV64_IMM(2, -7), MOV64_IMM(3, 2), MOV64_IMM(0, 0),
		SDIV64_REG(2, 3), SMOD64_IMM(2, -3), SDIV32_IMM(2, -2), SMOD32_REG(2, 3),
		MOVSX64(4, 2, 8), MOVSX64(4, 2, 16), MOVSX64(4, 2, 32), MOVSX32(5, 2, 8),
		MOVSX32(5, 2, 16), BSWAP(4, 16), BSWAP(4, 32), BSWAP(4, 64),
		ST(BPF_DW, 10, -8, -1), LDXSX(BPF_B, 6, 10, -8), LDXSX(BPF_H, 6, 10, -8),
		LDXSX(BPF_W, 6, 10, -8), JMP_IMM(BPF_JEQ, 6, 12345, 1), GOTOL(1), MOV64_IMM(0, 1),
		LOAD_ACQ(BPF_DW, 7, 10, -8), STORE_REL(BPF_W, 10, 3, -16),
		ALU64_REG(BPF_ADD, 0, 2), EXIT(),
	};
	static char log[65536];
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_buf = log, .log_size = sizeof(log), .log_level = 1);
	struct cp_ptx_program prog = { .name = "v4", .insns = insns,
				       .insn_count = sizeof(insns) / sizeof(insns[0]) };
	struct cp_ptx_function function = { .name = "v4", .section = "gpu/v4" };
	char error[256], *ptx = NULL, *module = NULL;
	int fd;

	require_root();
	fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "cuprobe_v4", "GPL", insns, prog.insn_count, &opts);
	cr_assert_geq(fd, 0, "the kernel refused ISA v4: %s", log);
	close(fd);
	cr_assert_eq(cp_ptx__translate(&prog, &ptx, NULL, error, sizeof(error)), 0, "%s", error);
	function.ptx = ptx;
	cr_assert_eq(cp_ptx__module(&function, 1, NULL, NULL, 0, &module), 0);
	assert_has(module, "div.s64");
	assert_has(module, "rem.s32");
	assert_has(module, "bfe.s64 %r4, %r2, 0, 32;");
	assert_has(module, "ld.s8 %r6, [%r10+-8];");
	assert_has(module, "ld.volatile.u64 %r7, [%r10+-8];\n\tmembar.sys;");
	judge(module, "ISA v4");
	free(module);
	free(ptx);
}

/* ---- host and device programs of one object ---------------------------------------------- */

Test(shared, a_host_program_writes_the_map_the_device_programs_use, .timeout = 120)
{
	const char *const args[] = { root_owned_copy(DEVICE_ISA), "--json", "--", DRV_LAUNCH, "50", NULL };
	struct run r;
	json_t *lines, *line, *found = NULL;
	char *dir = make_tmpdir(), *path = path_join(dir, "out.json");
	size_t i;

	cuprobe(&r, true, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(write_text(path, r.out));
	lines = load_json_lines(path);
	cr_assert_not_null(lines, "%s", r.out);
	json_array_foreach(lines, i, line)
		if (!strcmp(jstr(line, "type"), "map") && !strcmp(jstr(line, "map"), "shared_stats"))
			found = json_array_get(json_object_get(line, "entries"), 0);
	cr_assert_not_null(found, "shared_stats not printed: %s", r.out);
	cr_assert_eq(jint(json_object_get(found, "value"), "launches"), 50, "%s", r.out);
	json_decref(lines);
	release(&r);
	remove_tree(dir);
	free(dir);
	free(path);
}

/* ---- refusals: one line, exit 2 ------------------------------------------------------------ */

/* cuprobe run on the program text (written as NAME) with args after it: refused with message. */
static void assert_refused(const char *name, const char *source, const char *const *extra,
			   const char *message)
{
	char *dir = make_tmpdir(), *prog = path_join(dir, name);
	const char *args[16] = { prog };
	struct run r;
	int n = 1, i;

	cr_assert(write_text(prog, source));
	for (i = 0; extra && extra[i]; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	cuprobe(&r, false, args);
	cr_assert_eq(r.status, 2, "status %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, message), "expected \"%s\" in: %s", message, r.err);
	cr_assert_eq(count_lines(r.err), 1, "one line: %s", r.err);
	cr_assert(!r.out || !r.out[0], "nothing printed: %s", r.out);
	release(&r);
	remove_tree(dir);
	free(dir);
	free(prog);
}

#define HEADER "#include \"cuprobe.bpf.h\"\nchar LICENSE[] SEC(\"license\") = \"GPL\";\n"
static const char *const ptx_only[] = { "--ptx", NULL };

Test(refused, by_the_verifier, .timeout = 60)
{
	assert_refused("unchecked.bpf.c", HEADER
		       "CUPROBE_GPU_ARRAY(counts, __u64, 1);\n"
		       "SEC(\"gpu/vec_add\") int GPU_PROG(unchecked)\n"
		       "{ __u32 k = ctx->lane_id; __u64 *v = bpf_map_lookup_elem(&counts, &k);\n"
		       "  return v ? v[1] : 0; }\n",
		       ptx_only, "unchecked.bpf.c: the kernel's verifier refused it");
}

Test(refused, a_helper_the_gpu_has_not, .timeout = 60)
{
	assert_refused("pid.bpf.c", HEADER
		       "CUPROBE_GPU_ARRAY(last_pid, __u64, 1);\n"
		       "SEC(\"gpu/vec_add\") int GPU_PROG(pid)\n"
		       "{ __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&last_pid, &k);\n"
		       "  if (v) *v = bpf_get_current_pid_tgid(); return 0; }\n",
		       ptx_only,
		       "pid.bpf.c: device program pid: instruction ");
	assert_refused("pid.bpf.c", HEADER
		       "SEC(\"gpu/vec_add\") int GPU_PROG(pid) { return bpf_get_current_pid_tgid() > 5; }\n",
		       ptx_only, ": helper bpf_get_current_pid_tgid (#14) is not available on the GPU");
}

Test(refused, a_map_that_is_not_an_mmapable_array, .timeout = 60)
{
	assert_refused("hash.bpf.c", HEADER
		       "struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4);\n"
		       "  __type(key, __u32); __type(value, __u64); } by_sm SEC(\".maps\");\n"
		       "SEC(\"gpu/*\") int GPU_PROG(hashed)\n"
		       "{ __u32 k = ctx->sm_id; __u64 one = 1;\n"
		       "  bpf_map_update_elem(&by_sm, &k, &one, BPF_ANY); return 0; }\n",
		       ptx_only,
		       ": map by_sm is a hash: device programs reach only arrays declared with CUPROBE_GPU_ARRAY (BPF_F_MMAPABLE)");
	/* The runtime's target filter is the host's: its maps are not the GPU's. */
	assert_refused("traced.bpf.c", HEADER
		       "SEC(\"gpu/*\") int GPU_PROG(traced)\n"
		       "{ __u32 k = 0; struct cuprobe_config *c = bpf_map_lookup_elem(&cuprobe_config, &k);\n"
		       "  return c ? c->filter_by_pid : 0; }\n",
		       ptx_only, "map cuprobe_config is an array without BPF_F_MMAPABLE");
}

Test(refused, an_unknown_device_section, .timeout = 60)
{
	assert_refused("ret.bpf.c", HEADER "SEC(\"gpu.return/vec_add\") int GPU_PROG(ret) { return 0; }\n",
		       ptx_only,
		       "ret.bpf.c: program ret: unknown section \"gpu.return/vec_add\"; device programs go in gpu/GLOB, gpu.exit/GLOB");
	assert_refused("empty.bpf.c", HEADER "SEC(\"gpu/\") int GPU_PROG(empty) { return 0; }\n",
		       ptx_only, "program empty: unknown section \"gpu/\"; device programs go in");
}

Test(refused, ptx_without_device_programs_or_with_a_command, .timeout = 60)
{
	const char *const both[] = { "--ptx", "--", "/bin/true", NULL };

	assert_refused("host.bpf.c", HEADER "SEC(\"cuda/sync\") int CUDA_PROG(host, struct cuda_sync, s) { return 0; }\n",
		       ptx_only,
		       "host.bpf.c: no device programs (SEC(\"gpu/GLOB\") or SEC(\"gpu.exit/GLOB\")): no PTX to print");
	assert_refused("device.bpf.c", HEADER "SEC(\"gpu/x\") int GPU_PROG(device) { return 0; }\n",
		       both, "--ptx prints PROG's PTX and exits: no COMMAND or -p");
}

Test(refused, device_programs_without_a_command, .timeout = 60)
{
	assert_refused("device.bpf.c", HEADER "SEC(\"gpu/x\") int GPU_PROG(device) { return 0; }\n",
		       NULL,
		       "device.bpf.c: device programs (gpu/ sections) run inside the kernels of a COMMAND only");
}
