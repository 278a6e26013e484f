// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The PTX rewriter (userspace/device/ptx_rewrite.c): on the PTX nvcc emits
 * for the bundled workloads (gpu/ *.cu) and for kernels of many shapes
 * (tests/data/device/shapes.cu, for sm_90 and sm_75), and on clang's NVPTX
 * output, all built at build time: ptxas accepts every rewritten module
 * for sm_90 and for the module's own target, kernels not matched keep
 * their text byte for byte, modules without a match come back untouched.
 * Then hand-written PTX for what compilers rarely emit (predicated exits,
 * declarations, a .pragma before the body) and every refusal.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpf_insns.h"
#include "cuprobe_events.h"
#include "cuprobe_internal.h"
#include "device/ptx_jit.h"
#include "device/ptx_rewrite.h"
#include "helpers.h"
#include "ptxas.h"

/*
 * The prelude the injection puts into a module: the declaration of a map and
 * the functions the translator makes of two programs (hand-written BPF): an
 * entry counter (a map lookup and an atomic add of the launch's seq) and an
 * empty exit program.
 */
#define COUNTS_FD 7
static const struct cp_ptx_map counts = { .name = "counts", .fd = COUNTS_FD,
					  .type = BPF_MAP_TYPE_ARRAY, .flags = 1u << 10,
					  .key_size = 4, .value_size = 8, .max_entries = 2 };
static const struct bpf_insn enter_insns[] = {
	MOV64_REG(6, 1),
	ST(BPF_W, 10, -4, 0),
	LD_MAP(1, COUNTS_FD),
	MOV64_REG(2, 10),
	ALU64_IMM(BPF_ADD, 2, -4),
	CALL(BPF_FUNC_map_lookup_elem),
	JMP_IMM(BPF_JEQ, 0, 0, 2),
	LDX(BPF_DW, 1, 6, offsetof(struct cuprobe_gpu_ctx, launch_seq)),
	ATOMIC(BPF_DW, 0, 1, 0, BPF_ADD),
	MOV64_IMM(0, 0),
	EXIT(),
};
static const struct bpf_insn leave_insns[] = { MOV64_IMM(0, 0), EXIT() };
static char *prelude;
/* counts has a device-memory shadow: kernels call the launch's start and end. */
static bool shadowed;

static char *translated(const char *name, const struct bpf_insn *insns, size_t count)
{
	struct cp_ptx_program prog = { .name = name, .insns = insns, .insn_count = count,
				       .maps = &counts, .map_count = 1 };
	char error[512], *ptx = NULL;

	cr_assert_eq(cp_ptx__translate(&prog, &ptx, NULL, error, sizeof(error)), 0, "%s", error);
	return ptx;
}

static void make_prelude(void)
{
	uint64_t address = 0x7f0000001000ull;
	char *declarations, *enter, *leave;

	cr_assert_eq(cp_ptx__map_declarations(&address, &counts, NULL, 1, &declarations, &shadowed), 0);
	cr_assert(shadowed, "a map of 2 counters has a shadow");
	enter = translated("__cuprobe_gpu_enter", enter_insns, sizeof(enter_insns) / sizeof(enter_insns[0]));
	leave = translated("__cuprobe_gpu_leave", leave_insns, sizeof(leave_insns) / sizeof(leave_insns[0]));
	/* The entry counter's add goes to the shadow; the empty exit program names none. */
	cr_assert(cp_ptx__uses_shadow(enter) && !cp_ptx__uses_shadow(leave));
	cr_assert_gt(asprintf(&prelude, "%s%s%s", declarations, enter, leave), 0);
	free(declarations);
	free(enter);
	free(leave);
}

static void free_prelude(void)
{
	free(prelude);
	prelude = NULL;
}

TestSuite(ptx_rewrite, .init = make_prelude, .fini = free_prelude);

static const struct cp_ptx_probe both[] = {
	{ .glob = "*", .function = "__cuprobe_gpu_enter" },
	{ .glob = "*", .function = "__cuprobe_gpu_leave", .at_exit = true },
};

static int rewrite(const char *ptx, const struct cp_ptx_probe *probes, size_t count,
		   struct cp_ptx_rewrite *out, char *error, size_t error_size)
{
	struct cp_ptx_rewrite_opts opts = { .probes = probes, .probe_count = count, .prelude = prelude };

	return cp_ptx__rewrite(ptx, strlen(ptx), &opts, out, error, error_size);
}

/* ptxas judges text for arch (skipped, saying so, only where the toolkit has no ptxas). */
static void expect_ptxas(const char *text, const char *arch, const char *what)
{
	require_ptxas();
	assert_ptxas_accepts(text, arch, what);
}

/* From a kernel's .entry to its body's end (or its ';'): the kernel's text. */
static char *kernel_text(const char *ptx, const char *name)
{
	char needle[4200];
	const char *at, *end;
	int depth = 0;

	snprintf(needle, sizeof(needle), ".entry %s", name);
	at = strstr(ptx, needle);
	if (!at)
		return NULL;
	for (end = at; *end && *end != '{' && *end != ';'; end++)
		;
	for (; *end == '{' || depth; end++) {
		if (*end == '{')
			depth++;
		else if (*end == '}' && --depth == 0)
			break;
		else if (!*end)
			return NULL;
	}
	return strndup(at, (size_t)(end - at + 1));
}

#ifdef DEVICE_DATA_DIR
/* Every .ptx file built for the tests: nvcc's for the workloads and shapes.cu, clang's. */
static size_t ptx_files(char names[][256], size_t max)
{
	DIR *dir = opendir(DEVICE_DATA_DIR);
	struct dirent *e;
	size_t n = 0;

	cr_assert_not_null(dir, "%s: %s", DEVICE_DATA_DIR, strerror(errno));
	while ((e = readdir(dir)) && n < max) {
		size_t len = strlen(e->d_name);

		if (len > 4 && !strcmp(e->d_name + len - 4, ".ptx") && strncmp(e->d_name, "vec_add-compute", 15))
			snprintf(names[n++], 256, "%s", e->d_name);
	}
	closedir(dir);
	return n;
}

static char *data_file(const char *name)
{
	char path[4096];
	char *text;

	snprintf(path, sizeof(path), "%s/%s", DEVICE_DATA_DIR, name);
	text = read_text(path);
	cr_assert_not_null(text, "%s", path);
	return text;
}

/* "sm_90" of the module's .target. */
static void module_target(const char *ptx, char *out, size_t len)
{
	const char *at = strstr(ptx, ".target");

	cr_assert_not_null(at);
	at += 7;
	while (*at == ' ' || *at == '\t')
		at++;
	snprintf(out, len, "%.*s", (int)strcspn(at, ", \t\n"), at);
}

Test(ptx_rewrite, every_built_module_rewritten_is_accepted_by_ptxas, .timeout = 300)
{
	char names[64][256], target[32], error[512];
	size_t count = ptx_files(names, 64), i, k, kernels = 0;

	cr_assert_geq(count, 8, "the workloads' PTX, shapes.cu's and clang's: %zu files", count);
	for (i = 0; i < count; i++) {
		struct cp_ptx_rewrite out;
		char *ptx = data_file(names[i]);

		cr_assert_eq(rewrite(ptx, both, 2, &out, error, sizeof(error)), 0, "%s: %s", names[i], error);
		if (!out.kernel_count) {
			cr_expect_null(out.text, "%s: no kernel, nothing to rewrite", names[i]);
			free(ptx);
			continue;
		}
		cr_assert_not_null(out.text, "%s: every kernel matches *", names[i]);
		kernels += out.kernel_count;
		for (k = 0; k < out.kernel_count; k++)
			cr_expect_eq(out.kernels[k].probes, 3, "%s: %s", names[i], out.kernels[k].name);
		expect_ptxas(out.text, "sm_90", names[i]);
		module_target(ptx, target, sizeof(target));
		if (strcmp(target, "sm_90"))
			expect_ptxas(out.text, target, names[i]);
		cp_ptx_rewrite__release(&out);
		free(ptx);
	}
	cr_expect_geq(kernels, 12, "kernels rewritten in all: %zu", kernels);
}

Test(ptx_rewrite, kernels_not_matched_keep_their_text_and_unmatched_modules_are_untouched)
{
	struct cp_ptx_probe only_scale_float[] = {
		{ .glob = "ns::scale<float>", .function = "__cuprobe_gpu_enter" },
		{ .glob = "ns::scale<float>", .function = "__cuprobe_gpu_leave", .at_exit = true },
	};
	struct cp_ptx_probe nothing[] = { { .glob = "no_such_kernel*", .function = "__cuprobe_gpu_enter" } };
	const char *others[] = { "no_params", "early_exits", "_Z8by_value3bigPi", "with_shared",
				 "_ZN2ns5scaleIdEEvPT_S1_i" };
	struct cp_ptx_rewrite out;
	char error[512], *ptx = data_file("shapes.ptx");
	size_t i, matched = 0;

	cr_assert_eq(rewrite(ptx, only_scale_float, 2, &out, error, sizeof(error)), 0, "%s", error);
	cr_assert_not_null(out.text);
	for (i = 0; i < out.kernel_count; i++)
		matched += out.kernels[i].probes != 0;
	cr_expect_eq(matched, 1, "ns::scale<float> only, by its demangled name");
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		char *before = kernel_text(ptx, others[i]), *after = kernel_text(out.text, others[i]);

		cr_assert_not_null(before, "%s", others[i]);
		cr_assert_not_null(after, "%s", others[i]);
		cr_expect_str_eq(after, before, "%s changed though it does not match", others[i]);
		free(before);
		free(after);
	}
	expect_ptxas(out.text, "sm_90", "shapes.ptx, one kernel");
	cp_ptx_rewrite__release(&out);

	cr_assert_eq(rewrite(ptx, nothing, 1, &out, error, sizeof(error)), 0, "%s", error);
	cr_expect_null(out.text, "no kernel matched: the caller passes its own bytes on");
	cr_expect_eq(out.kernel_count, 6, "the kernels are still listed");
	cp_ptx_rewrite__release(&out);
	free(ptx);
}

Test(ptx_rewrite, parameter_blocks_are_measured_as_nvcc_lays_them_out)
{
	struct cp_ptx_rewrite out;
	char error[512], *ptx = data_file("shapes.ptx");
	size_t i;

	cr_assert_eq(rewrite(ptx, both, 2, &out, error, sizeof(error)), 0, "%s", error);
	for (i = 0; i < out.kernel_count; i++) {
		const struct cp_ptx_kernel *k = &out.kernels[i];

		if (!strcmp(k->name, "no_params"))
			cr_expect(k->param_count == 0 && k->param_bytes == 0);
		else if (!strcmp(k->name, "early_exits"))
			cr_expect(k->param_count == 2 && k->param_bytes == 12, "%u %zu", k->param_count,
				  k->param_bytes);
		else if (!strcmp(k->name, "_Z8by_value3bigPi"))
			cr_expect(k->param_count == 2 && k->param_bytes == 88, "%u %zu", k->param_count,
				  k->param_bytes);
		else if (!strcmp(k->name, "_ZN2ns5scaleIdEEvPT_S1_i"))
			cr_expect(k->param_count == 3 && k->param_bytes == 20, "%u %zu", k->param_count,
				  k->param_bytes);
	}
	cp_ptx_rewrite__release(&out);
	free(ptx);
}
#endif

/* ---- hand-written PTX ------------------------------------------------------------------ */

static const char predicated[] =
	".version 7.0\n"
	".target sm_75\n"
	".address_size 64\n"
	"\n"
	".extern .entry declared(.param .u32 a);\n"
	"\n"
	".visible .entry pred .pragma \"nounroll\";\n"
	"{\n"
	"\t.reg .pred %p<3>;\n"
	"\t.reg .b32 %r<2>;\n"
	"\tmov.u32 %r1, %tid.x;\n"
	"\tsetp.eq.u32 %p1, %r1, 0;\n"
	"\tsetp.eq.u32 %p2, %r1, 1;\n"
	"\t@%p1 ret;\n"
	"\t@!%p2 exit;\n"
	"\t@ ! %p1 /* spaced */ ret;\n"
	"\t/* ret; in a comment is not an exit */\n"
	"$L_end:\n"
	"\tret.uni;\n"
	"}\n";

static size_t count_of(const char *text, const char *needle)
{
	size_t n = 0;

	for (; (text = strstr(text, needle)); text += strlen(needle))
		n++;
	return n;
}

Test(ptx_rewrite, every_exit_gets_the_exit_programs_under_its_guard)
{
	struct cp_ptx_rewrite out;
	char error[512], *kernel;

	cr_assert_eq(rewrite(predicated, both, 2, &out, error, sizeof(error)), 0, "%s", error);
	cr_assert_not_null(out.text);
	/* pred: the module's last entry, its .pragma's ';' before its body. */
	cr_assert_not_null(strstr(out.text, ".visible .entry pred"), "%s", out.text);
	kernel = strdup(strstr(out.text, ".visible .entry pred"));
	/* Each program's code in the kernel, in a block of its own, its ret a branch to the block's end. */
	cr_expect_eq(count_of(kernel, "\t// __cuprobe_gpu_leave\n\t{\n"), 4, "%s", kernel);
	cr_expect_eq(count_of(kernel, "\t// __cuprobe_gpu_enter\n\t{\n"), 1, "%s", kernel);
	cr_expect_eq(count_of(kernel, "\tbra.uni $__cuprobe_return;\n$__cuprobe_return:\n\t}\n"), 5, "%s",
		     kernel);
	/* Each block reads the launch's parameter itself: no register of the kernel's for it. */
	cr_expect_eq(count_of(kernel, "%__cuprobe_launch"), 0, "%s", kernel);
	/* No call: a counter's shadow needs no work in the kernel, and the programs are inline. */
	cr_expect_eq(count_of(out.text, "call"), 0, "%s", out.text);
	/* Under each exit's guard: skipped where the exit is not taken. */
	cr_expect_eq(count_of(kernel, "{ // cuprobe: exit programs\n\t@!%p1 bra \t$__cuprobe_skip;\n"), 1, "%s",
		     kernel);
	cr_expect_eq(count_of(kernel, "$__cuprobe_skip:\n\t}\n\t@%p1 ret;"), 1, "%s", kernel);
	cr_expect_eq(count_of(kernel, "{ // cuprobe: exit programs\n\t@%p2 bra \t$__cuprobe_skip;\n"), 1, "%s",
		     kernel);
	cr_expect_eq(count_of(kernel, "$__cuprobe_skip:\n\t}\n\t@!%p2 exit;"), 1, "%s", kernel);
	/* A guard written with spaces and a comment: its predicate, negated. */
	cr_expect_eq(count_of(kernel, "{ // cuprobe: exit programs\n\t@%p1 bra \t$__cuprobe_skip;\n"), 1, "%s",
		     kernel);
	cr_expect_eq(count_of(kernel, "$__cuprobe_skip:\n\t}\n\t@ ! %p1 /* spaced */ ret;"), 1, "%s", kernel);
	/* The kernel's own exits are all still there, each once; no program's ret is. */
	cr_expect_eq(count_of(kernel, "@%p1 ret;"), 1, "%s", kernel);
	cr_expect_eq(count_of(kernel, "@!%p2 exit;"), 1, "%s", kernel);
	cr_expect_eq(count_of(kernel, "\tret.uni;"), 1, "%s", kernel);
	cr_expect_eq(count_of(kernel, "\tret;"), 0, "%s", kernel);
	free(kernel);
	cr_expect_not_null(strstr(out.text, ".entry pred(.param .u64 __cuprobe_launch) .pragma"));
	/* The declaration, matching too, gets the parameter (a definition elsewhere would). */
	cr_expect_not_null(strstr(out.text, ".entry declared(.param .u32 a,\n\t.param .u64 __cuprobe_launch)"),
			   "%s", out.text);
	cr_expect_not_null(strstr(out.text, "$L_end:\n\t{ // cuprobe: exit programs\n\t// __cuprobe_gpu_leave\n"),
			   "%s", out.text);
	expect_ptxas(out.text, "sm_90", "predicated exits");
	expect_ptxas(out.text, "sm_75", "predicated exits");
	cp_ptx_rewrite__release(&out);
}


Test(ptx_rewrite, programs_at_one_site_each_get_a_block_and_a_missing_function_is_refused)
{
	/* Two entry programs: two blocks side by side, each with its own return label. */
	static const struct cp_ptx_probe two_entries[] = {
		{ .glob = "*", .function = "__cuprobe_gpu_enter" },
		{ .glob = "*", .function = "__cuprobe_gpu_leave" },
	};
	static const struct cp_ptx_probe unknown[] = { { .glob = "*", .function = "__cuprobe_gpu_nowhere" } };
	struct cp_ptx_rewrite out;
	char error[512], *kernel;

	cr_assert_eq(rewrite(predicated, two_entries, 2, &out, error, sizeof(error)), 0, "%s", error);
	kernel = strdup(strstr(out.text, ".visible .entry pred"));
	cr_expect_eq(count_of(kernel, "{ // cuprobe: entry programs\n\t// __cuprobe_gpu_enter\n\t{\n"), 1, "%s",
		     kernel);
	cr_expect_eq(count_of(kernel, "$__cuprobe_return:\n\t}\n\t// __cuprobe_gpu_leave\n\t{\n"), 1, "%s",
		     kernel);
	cr_expect_eq(count_of(kernel, "$__cuprobe_return:"), 2, "%s", kernel);
	cr_expect_eq(count_of(kernel, "cuprobe: exit programs"), 0, "%s", kernel);
	expect_ptxas(out.text, "sm_90", "two programs at one site");
	free(kernel);
	cp_ptx_rewrite__release(&out);

	cr_expect_eq(rewrite(predicated, unknown, 1, &out, error, sizeof(error)), -EINVAL);
	cr_expect_str_eq(error, "program __cuprobe_gpu_nowhere: no function of that name in the prelude");
	cr_expect_null(out.text);
	cp_ptx_rewrite__release(&out);
}

Test(ptx_rewrite, globs_match_demangled_names_without_parameters_or_mangled_ones)
{
	cr_expect(cp_ptx__glob_matches("ns::gemm<float>", "_ZN2ns4gemmIfEEvPT_i"));
	cr_expect(cp_ptx__glob_matches("ns::*", "_ZN2ns4gemmIfEEvPT_i"));
	cr_expect(cp_ptx__glob_matches("_ZN2ns4gemm*", "_ZN2ns4gemmIfEEvPT_i"));
	cr_expect(cp_ptx__glob_matches("vec_add_kernel", "_Z14vec_add_kernelPKfS0_Pfi"));
	cr_expect(!cp_ptx__glob_matches("vec_add_kernel(*", "_Z14vec_add_kernelPKfS0_Pfi"));
	cr_expect(cp_ptx__glob_matches("vec_add", "vec_add"));
	cr_expect(!cp_ptx__glob_matches("vec_add", "vec_add2"));
}

/* A module the rewriter must refuse, the reason its line must give. */
struct refusal {
	const char *ptx;
	const char *reason;
};

Test(ptx_rewrite, what_cannot_be_rewritten_safely_is_refused_by_name)
{
	static const struct refusal refusals[] = {
		{ ".version 5.0\n.target sm_60\n.address_size 64\n.entry k()\n{\nret;\n}\n", "PTX ISA 5.0" },
		{ ".version 7.0\n.target sm_52\n.address_size 64\n.entry k()\n{\nret;\n}\n", "sm_52" },
		{ ".version 7.0\n.target sm_75\n.address_size 32\n.entry k()\n{\nret;\n}\n", "32-bit" },
		{ ".version 7.0\n.target sm_75\n.entry k()\n{\nret;\n}\n", "32-bit" },
		{ ".version 7.0\n.target sm_75\n.address_size 64\n.global .u64 __cuprobe_map_0;\n"
		  ".entry k()\n{\nret;\n}\n", "already holds cuprobe's symbols" },
		{ ".version 7.0\n.target sm_75\n.address_size 64\n.entry k()\n{\n.reg .b64 %rd<2>;\n"
		  "mov.u64 %rd1, k;\nret;\n}\n", "referenced inside its module" },
		{ ".version 7.0\n.target sm_75\n.address_size 64\n.entry k(.param .texref t)\n{\nret;\n}\n",
		  "texture" },
		{ ".version 7.0\n.target sm_75\n.address_size 64\n.entry k(.param .align 8 .b8 p[4090])\n"
		  "{\nret;\n}\n", "leave no room" },
	};
	size_t i;

	for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		struct cp_ptx_rewrite out;
		char error[512];
		int err = rewrite(refusals[i].ptx, both, 2, &out, error, sizeof(error));

		cr_expect_eq(err, -ENOTSUP, "refusal %zu: %d", i, err);
		cr_expect_null(out.text);
		cr_expect_not_null(strstr(error, refusals[i].reason), "refusal %zu: \"%s\"", i, error);
		cr_expect_null(strchr(error, '\n'), "one line: %s", error);
		cr_expect_eq(out.kernel_count, 1, "the matching kernel is listed, to be reported");
		cp_ptx_rewrite__release(&out);
	}
}

Test(ptx_rewrite, text_it_cannot_parse_is_refused)
{
	static const char *const bad[] = {
		".version 7.0\n.target sm_75\n.address_size 64\n.entry k(\n",
		".version 7.0\n.target sm_75\n.address_size 64\n.entry k()\n{\nret;\n",
		".version 7.0\n.target sm_75\n.address_size 64\n/* open comment\n.entry k()\n{\nret;\n}\n",
		".target sm_75\n.address_size 64\n.entry k()\n{\nret;\n}\n",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cp_ptx_rewrite out;
		char error[512];

		cr_expect_eq(rewrite(bad[i], both, 2, &out, error, sizeof(error)), -EINVAL, "text %zu", i);
		cr_expect_neq(error[0], '\0');
		cp_ptx_rewrite__release(&out);
	}
}
