// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Device programs end to end against the simulated driver, which writes
 * down every module image it is handed (CUDA_SIM_IMAGE_DIR) and, for each
 * launch of a kernel carrying cuprobe's parameter, the seq the launch slot
 * held: `cuprobe run PROG -- module_loads STEPS`, with PROG's gpu/ and
 * gpu.exit/ programs. A matching module arrives rewritten (ptxas accepts
 * it) through every loading entry point and its launches carry their seq;
 * other modules arrive byte for byte; every refusal (verifier, unknown
 * section, a map device code cannot use, no PTX, a module the rewriter
 * refuses, a glob matching nothing, -p and system-wide) is one line with a
 * non-zero exit; nothing is left in the file system.
 */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"
#include "ptxas.h"
#include "vec_add_ptx.h"

static const char count_program[] =
	"#include \"vmlinux.h\"\n"
	"#include \"cuprobe.bpf.h\"\n"
	"char LICENSE[] SEC(\"license\") = \"Dual BSD/GPL\";\n"
	"struct {\n"
	"\t__uint(type, BPF_MAP_TYPE_ARRAY);\n"
	"\t__uint(map_flags, BPF_F_MMAPABLE);\n"
	"\t__uint(max_entries, 2);\n"
	"\t__type(key, __u32);\n"
	"\t__type(value, __u64);\n"
	"} counts SEC(\".maps\");\n"
	"static int bump(__u32 slot)\n"
	"{\n"
	"\t__u64 *n = bpf_map_lookup_elem(&counts, &slot);\n"
	"\tif (n)\n"
	"\t\t__sync_fetch_and_add(n, 1);\n"
	"\treturn 0;\n"
	"}\n"
	"SEC(\"gpu/%s\") int enter(void *ctx) { return bump(0); }\n"
	"SEC(\"gpu.exit/%s\") int leave(void *ctx) { return bump(1); }\n";

struct run {
	char *dir;
	char *images;      /* CUDA_SIM_IMAGE_DIR */
	const char *library_path; /* COMMAND's LD_LIBRARY_PATH, when set */
	const char *sim_env;      /* one more NAME=VALUE for COMMAND, when set */
	char *prog;
	int status;
	char *out_text;
	char *err_text;
};

static void write_program(struct run *r, const char *text)
{
	r->prog = path_join(r->dir, "prog.bpf.c");
	cr_assert(write_text(r->prog, text));
}

static void setup_run(struct run *r)
{
	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->images = path_join(r->dir, "images");
	cr_assert_eq(mkdir(r->images, 0755), 0);
}

/* The count program for kernels matching glob. */
static void count_kernels(struct run *r, const char *glob)
{
	char text[4096];

	snprintf(text, sizeof(text), count_program, glob, glob);
	write_program(r, text);
}

/* `cuprobe run PROG [extra...] [-- module_loads STEPS...]` */
static void run_cuprobe(struct run *r, const char *const *extra, const char *const *steps)
{
	char *argv[64], *out_path = path_join(r->dir, "stdout"), *err_path = path_join(r->dir, "stderr");
	char env_line[4200], library_line[4200];
	char *env[] = { env_line, r->library_path ? library_line : (char *)r->sim_env,
			r->library_path ? (char *)r->sim_env : NULL, NULL };
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = err_path, .extra_env = env };
	int n = 0, i;

	snprintf(env_line, sizeof(env_line), "CUDA_SIM_IMAGE_DIR=%s", r->images);
	snprintf(library_line, sizeof(library_line), "LD_LIBRARY_PATH=%s", r->library_path ? r->library_path : "");
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "run";
	argv[n++] = r->prog;
	for (i = 0; extra && extra[i]; i++)
		argv[n++] = (char *)extra[i];
	if (steps) {
		argv[n++] = "--";
		argv[n++] = MODULE_LOADS;
		for (i = 0; steps[i]; i++)
			argv[n++] = (char *)steps[i];
	}
	argv[n] = NULL;
	r->status = run_program(argv, &opts, NULL);
	r->out_text = read_text(out_path);
	r->err_text = read_text(err_path);
	cr_assert_not_null(r->err_text);
	free(out_path);
	free(err_path);
}

static void free_run(struct run *r)
{
	remove_tree(r->dir);
	free(r->dir);
	free(r->images);
	free(r->prog);
	free(r->out_text);
	free(r->err_text);
}

/* The images recorded, in the order the driver got them (N in PID-N-API.img). */
static size_t images(const struct run *r, char paths[][4096], size_t max)
{
	char pattern[4200];
	glob_t g;
	size_t i, n = 0;

	snprintf(pattern, sizeof(pattern), "%s/*.img", r->images);
	if (glob(pattern, 0, NULL, &g))
		return 0;
	for (i = 0; i < g.gl_pathc && n < max; i++)
		snprintf(paths[n++], 4096, "%s", g.gl_pathv[i]);
	globfree(&g);
	/* glob sorts by name: order by the number after the pid. */
	for (i = 1; i < n; i++) {
		size_t j = i;
		char tmp[4096];

		while (j > 0 && atoi(strchr(strrchr(paths[j - 1], '/'), '-') + 1) >
				atoi(strchr(strrchr(paths[j], '/'), '-') + 1)) {
			memcpy(tmp, paths[j], sizeof(tmp));
			memcpy(paths[j], paths[j - 1], sizeof(tmp));
			memcpy(paths[j - 1], tmp, sizeof(tmp));
			j--;
		}
	}
	return n;
}

static void *read_bytes(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *data;
	long n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	data = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(data, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return data;
}

/* The image at path holds exactly the bytes of expected (size bytes). */
static void expect_same_bytes(const char *path, const void *expected, size_t size, const char *what)
{
	size_t got_size;
	void *got = read_bytes(path, &got_size);

	cr_expect_eq(got_size, size, "%s: %zu bytes reached the driver, %zu passed", what, got_size, size);
	cr_expect(got_size == size && !memcmp(got, expected, size), "%s: not byte-identical", what);
	free(got);
}

static void expect_ptxas(const char *path)
{
	char *text = read_text(path);

	cr_assert_not_null(text, "%s", path);
	require_ptxas();
	assert_ptxas_accepts(text, "sm_90", path);
	free(text);
}

/* The seqs of the launches the simulated driver saw, in order. */
static size_t launch_seqs(const struct run *r, unsigned long *seqs, size_t max)
{
	char pattern[4200], line[512];
	glob_t g;
	size_t n = 0;
	FILE *f;

	snprintf(pattern, sizeof(pattern), "%s/*.launches", r->images);
	if (glob(pattern, 0, NULL, &g))
		return 0;
	cr_assert_eq(g.gl_pathc, 1, "one process launched");
	f = fopen(g.gl_pathv[0], "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f) && n < max) {
		cr_assert_eq(strncmp(line, "vec_add ", 8), 0, "%s", line);
		seqs[n++] = strtoul(line + 8, NULL, 10);
	}
	fclose(f);
	globfree(&g);
	return n;
}

static char *data_path(const char *name)
{
	return path_join(DEVICE_DATA_DIR, name);
}

/* cuprobe's lines on stderr that contain needle. */
static size_t lines_with(const char *text, const char *needle)
{
	size_t n = 0;
	const char *line = text;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char *copy = strndup(line, len);

		n += strstr(copy, needle) != NULL;
		free(copy);
		line = end ? end + 1 : NULL;
	}
	return n;
}

Test(inject, a_matching_module_arrives_rewritten_and_its_launches_carry_their_seq, .timeout = 120)
{
	char *shapes = data_path("shapes.ptx"), load_shapes[4200], paths[8][4096], *rewritten;
	const char *steps[] = { "--launches", "3", "ptx", load_shapes, NULL };
	unsigned long seqs[16];
	size_t n, shapes_size;
	void *shapes_bytes;
	struct run r;

	setup_run(&r);
	count_kernels(&r, "vec_add");
	snprintf(load_shapes, sizeof(load_shapes), "load=%s", shapes);
	run_cuprobe(&r, NULL, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_expect_not_null(strstr(r.out_text, "ptx vec_add=launched"), "%s", r.out_text);
	cr_expect_not_null(strstr(r.err_text, "device programs: 1 kernel instrumented: vec_add"), "%s",
			   r.err_text);

	n = images(&r, paths, 8);
	cr_assert_eq(n, 2, "two modules loaded");
	rewritten = read_text(paths[0]);
	cr_assert_not_null(strstr(rewritten, ".param .u64 __cuprobe_launch"), "%s", rewritten);
	/* Each program's code inline in the kernel (its function also in the prelude). */
	cr_expect_not_null(strstr(rewritten, "{ // cuprobe: entry programs\n\t// __cuprobe_gpu_enter\n\t{\n"),
			   "%s", rewritten);
	cr_expect_not_null(strstr(rewritten, "{ // cuprobe: exit programs\n\t// __cuprobe_gpu_leave\n\t{\n"),
			   "%s", rewritten);
	cr_expect_not_null(strstr(rewritten, ".const .align 8 .u64 __cuprobe_map_"), "%s", rewritten);
	expect_ptxas(paths[0]);
	free(rewritten);
	/* shapes.ptx matches nothing: byte for byte. */
	shapes_bytes = read_bytes(shapes, &shapes_size);
	expect_same_bytes(paths[1], shapes_bytes, shapes_size, "shapes.ptx");
	free(shapes_bytes);

	/* Each launch's slot held its seq when the kernel ran: 1, 2, 3 (the process's launches). */
	cr_assert_eq(launch_seqs(&r, seqs, 16), 3);
	cr_expect(seqs[0] == 1 && seqs[1] == 2 && seqs[2] == 3, "seqs %lu %lu %lu", seqs[0], seqs[1],
		  seqs[2]);
	free(shapes);
	free_run(&r);
}

Test(inject, every_loading_entry_point_is_rewritten_and_launches, .timeout = 180)
{
	char *files[] = { data_path("vec_add-none.fatbin"), data_path("vec_add-default.fatbin"),
			  data_path("vec_add-compute_90.ptx"), data_path("vec_add-speed.fatbin"),
			  data_path("vec_add-size.fatbin"), data_path("vec_add-balance.fatbin") };
	char steps_text[6][4200], paths[32][4096];
	const char *steps[] = { "--launches", "1", "ptx-ex", "library", "link", "proc", "proc-v1",
				steps_text[0], steps_text[1], steps_text[2], steps_text[3], steps_text[4],
				steps_text[5], NULL };
	unsigned long seqs[32];
	size_t n, i, step_count = 11;
	struct run r;

	snprintf(steps_text[0], 4200, "fatbin=%s", files[0]);
	snprintf(steps_text[1], 4200, "wrapper=%s", files[1]);
	snprintf(steps_text[2], 4200, "module=%s", files[2]);
	snprintf(steps_text[3], 4200, "libfile=%s", files[3]);
	snprintf(steps_text[4], 4200, "linkfile=%s", files[4]);
	snprintf(steps_text[5], 4200, "load=%s", files[5]);
	setup_run(&r);
	count_kernels(&r, "vec_add");
	run_cuprobe(&r, NULL, steps);
	cr_assert_eq(r.status, 0, "%s\n%s", r.out_text, r.err_text);
	cr_expect_eq(lines_with(r.out_text, "vec_add=launched"), step_count, "%s", r.out_text);
	n = images(&r, paths, 32);
	cr_assert_geq(n, step_count, "%zu images", n);
	/* Every image the driver got holds the rewritten kernel, however it came. */
	for (i = 0; i < n; i++) {
		char *text = read_text(paths[i]);

		cr_expect_not_null(strstr(text, ".param .u64 __cuprobe_launch"), "%s is not rewritten", paths[i]);
		if (strstr(paths[i], "cuLinkAddData") == NULL)
			expect_ptxas(paths[i]);
		free(text);
	}
	cr_assert_eq(launch_seqs(&r, seqs, 32), step_count);
	for (i = 0; i < step_count; i++)
		cr_expect_eq(seqs[i], i + 1, "launch %zu carried seq %lu", i, seqs[i]);
	for (i = 0; i < 6; i++)
		free(files[i]);
	free_run(&r);
}

/* The "detail" of each device record of a --json output, in order. */
static size_t instrumented_details(const char *path, char details[][512], size_t max)
{
	json_t *lines = load_json_lines(path);
	size_t i, n = 0;

	for (i = 0; i < json_array_size(lines) && n < max; i++) {
		json_t *o = json_array_get(lines, i);

		if (!strcmp(jstr(o, "type"), "device") && !strcmp(jstr(o, "event"), "instrumented"))
			snprintf(details[n++], 512, "%s", jstr(o, "detail"));
	}
	json_decref(lines);
	return n;
}

/*
 * cudart 13 never hands the driver a fatbin: it takes the cubin for the
 * device from the fatbin nvcc registered and loads that with
 * cuLibraryLoadData (a pointer into the object's .nv_fatbin section when
 * the cubin is stored uncompressed, a decompressed copy when not). module_loads'
 * cudart steps do the same with nvcc-built libraries: the kernel is rewritten
 * from the PTX of the fatbin its cubin came from, found each of the three ways.
 */
Test(inject, a_cudart_cubin_is_rewritten_from_the_ptx_of_its_fatbin, .timeout = 120)
{
	char plain[3][4200], compressed[4200], output[4200], paths[8][4096], details[8][512];
	const char *extra[] = { "--json", "-o", output, NULL };
	const char *steps[] = { plain[0], plain[1], plain[2], compressed, NULL };
	const char *ways[] = { "libregistered_vec_add_plain.so, by address",
			       "libregistered_vec_add_plain.so, by bytes",
			       "libregistered_vec_add_plain.so, by kernel names",
			       /* the plain library's cubin has the same bytes, and it was opened first */
			       "libregistered_vec_add_plain.so, by bytes" };
	unsigned long seqs[16];
	size_t i;
	struct run r;

	snprintf(plain[0], sizeof(plain[0]), "cudart=%s", REGISTERED_PLAIN);
	snprintf(plain[1], sizeof(plain[1]), "cudart-copy=%s", REGISTERED_PLAIN);
	snprintf(plain[2], sizeof(plain[2]), "cudart-patched=%s", REGISTERED_PLAIN);
	snprintf(compressed, sizeof(compressed), "cudart=%s", REGISTERED_COMPRESSED);
	setup_run(&r);
	count_kernels(&r, "vec_add");
	snprintf(output, sizeof(output), "%s/out.json", r.dir);
	run_cuprobe(&r, extra, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_expect_eq(lines_with(r.out_text, "vec_add=launched"), 4, "%s", r.out_text);
	cr_assert_eq(images(&r, paths, 8), 4);
	for (i = 0; i < 4; i++) {
		char *text = read_text(paths[i]);

		cr_expect_not_null(strstr(paths[i], "cuLibraryLoadData"), "%s", paths[i]);
		cr_expect_not_null(strstr(text, ".entry vec_add"), "%s: not PTX", paths[i]);
		cr_expect_not_null(strstr(text, ".param .u64 __cuprobe_launch"), "%s: not rewritten", paths[i]);
		expect_ptxas(paths[i]);
		free(text);
	}
	cr_assert_eq(instrumented_details(output, details, 8), 4);
	for (i = 0; i < 4; i++)
		cr_expect_not_null(strstr(details[i], ways[i]), "load %zu: \"%s\" not in \"%s\"", i, ways[i],
				   details[i]);
	/* Every launch of the rewritten kernels carried its parameter and its seq. */
	cr_assert_eq(launch_seqs(&r, seqs, 16), 8);
	for (i = 0; i < 8; i++)
		cr_expect_eq(seqs[i], i + 1, "launch %zu carried seq %lu", i, seqs[i]);
	free_run(&r);

	/* Its cubin compressed, the library alone: found by its decompressed bytes. */
	setup_run(&r);
	count_kernels(&r, "vec_add");
	snprintf(output, sizeof(output), "%s/out.json", r.dir);
	steps[0] = compressed;
	steps[1] = NULL;
	run_cuprobe(&r, extra, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_assert_eq(instrumented_details(output, details, 8), 1);
	cr_expect_not_null(strstr(details[0], "libregistered_vec_add_compressed.so, by bytes"), "%s",
			   details[0]);
	free_run(&r);
}

/*
 * The real cudart 13 (static, as nvcc links it) resolves the driver through
 * cuGetProcAddress_v2 from dlsym on libcuda's handle, then through what it
 * got for "cuGetProcAddress" at versions 11030 and 12000: the simulated
 * driver names the caller of each request, and every one must come through
 * the preload library's wrapper, module loads and launches included.
 * (cudart then stops at its check of the driver's integrity, through
 * private interfaces the simulator does not have: its kernels are loaded
 * by the cudart steps above, on a machine with a GPU by the real thing.)
 */
Test(inject, the_real_cudart_resolves_the_driver_through_the_wrappers, .timeout = 120)
{
	static const char *const needed[] = { "cuGetProcAddress 11030", "cuGetProcAddress 12000",
					      "cuLibraryLoadData ", "cuModuleLoadData ", "cuLaunchKernel ",
					      "cuLaunchKernelEx ", "cuLibraryGetKernel " };
	char pattern[4200], *argv[8], *out_path, *err_path, env_images[4200], env_library[4200], line[4096];
	char *env[] = { env_images, env_library, NULL };
	struct run_opts opts = { .extra_env = env };
	size_t i, requests = 0, direct = 0, found[sizeof(needed) / sizeof(needed[0])] = { 0 };
	glob_t g;
	FILE *f;
	struct run r;

	setup_run(&r);
	count_kernels(&r, "vec_add*");
	out_path = path_join(r.dir, "stdout");
	err_path = path_join(r.dir, "stderr");
	opts.stdout_path = out_path;
	opts.stderr_path = err_path;
	snprintf(env_images, sizeof(env_images), "CUDA_SIM_IMAGE_DIR=%s", r.images);
	snprintf(env_library, sizeof(env_library), "LD_LIBRARY_PATH=%s", SIM_DRIVER_DIR);
	argv[0] = CUPROBE_BIN;
	argv[1] = "run";
	argv[2] = r.prog;
	argv[3] = "--";
	argv[4] = CUDART_STATIC_WORKLOAD;
	argv[5] = "1";
	argv[6] = NULL;
	run_program(argv, &opts, NULL);
	r.err_text = read_text(err_path);
	snprintf(pattern, sizeof(pattern), "%s/*.procs", r.images);
	cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "cudart asked the driver for nothing: %s", r.err_text);
	f = fopen(g.gl_pathv[0], "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		const char *caller = strrchr(line, ' ');

		requests++;
		/* The preload library is a memfd: ld.so names it /proc/self/fd/N. */
		if (!caller || strncmp(caller + 1, "/proc/self/fd/", 14))
			direct++;
		for (i = 0; i < sizeof(needed) / sizeof(needed[0]); i++)
			found[i] += !strncmp(line, needed[i], strlen(needed[i]));
	}
	fclose(f);
	globfree(&g);
	cr_expect_gt(requests, 100, "cudart resolved %zu entry points", requests);
	cr_expect_eq(direct, 0, "%zu of %zu requests did not come through the preload library", direct,
		     requests);
	for (i = 0; i < sizeof(needed) / sizeof(needed[0]); i++)
		cr_expect_gt(found[i], 0, "cudart never asked for \"%s\"", needed[i]);
	free(out_path);
	free(err_path);
	free_run(&r);
}

/*
 * Global variables are device maps too: .bss mapped writable in COMMAND,
 * .rodata (a const volatile setting, frozen at load) mapped and registered
 * read-only, which the kernel insists on: a writable mapping of a frozen
 * map is refused, and the run would say so and fail.
 */
Test(inject, globals_reach_the_gpu_and_rodata_is_mapped_read_only)
{
	static const char program[] =
		"#include \"cuprobe.bpf.h\"\n"
		"char LICENSE[] SEC(\"license\") = \"Dual BSD/GPL\";\n"
		"const volatile __u64 step = 1;\n"
		"__u64 entered;\n"
		"SEC(\"gpu/vec_add\") int GPU_PROG(add_step) { __sync_fetch_and_add(&entered, step); return 0; }\n";
	const char *steps[] = { "ptx", NULL };
	char paths[4][4096], *text, *at;
	size_t declared = 0;
	struct run r;

	setup_run(&r);
	write_program(&r, program);
	run_cuprobe(&r, NULL, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_expect_not_null(strstr(r.err_text, "device programs: 1 kernel instrumented: vec_add"), "%s",
			   r.err_text);
	cr_assert_eq(images(&r, paths, 4), 1);
	text = read_text(paths[0]);
	for (at = text; (at = strstr(at, ".const .align 8 .u64 __cuprobe_map_")); at++) {
		const char *value = strstr(at, " = ");

		declared++;
		cr_expect(value && strncmp(value, " = 0;", 5), "a map declared at address 0: %.80s", at);
	}
	cr_expect_eq(declared, 2, "the .bss and .rodata maps: %zu declared\n%s", declared, text);
	expect_ptxas(paths[0]);
	free(text);
	free_run(&r);
}

/* The other launch entry points: the slot header before their kernelParams too. */
static void expect_seqs_with(const char *launch_option)
{
	const char *steps[] = { "--launches", "4", launch_option, "ptx", NULL };
	unsigned long seqs[8];
	struct run r;

	setup_run(&r);
	count_kernels(&r, "vec_*");
	run_cuprobe(&r, NULL, steps);
	cr_assert_eq(r.status, 0, "%s: %s", launch_option, r.err_text);
	cr_assert_eq(launch_seqs(&r, seqs, 8), 4, "%s", launch_option);
	cr_expect(seqs[0] == 1 && seqs[1] == 2 && seqs[2] == 3 && seqs[3] == 4, "%s: seqs %lu %lu %lu %lu",
		  launch_option, seqs[0], seqs[1], seqs[2], seqs[3]);
	free_run(&r);
}

/*
 * Counters add into their module's device-memory shadow; the injection
 * moves what the shadows gained into the kernel's map at the calls that
 * prove kernels done (module_loads ends with cuCtxSynchronize and a
 * blocking copy). The simulator runs no PTX: with CUDA_SIM_SHADOW_ADDS=1
 * each launch adds its thread count to every word of the shadow, in one
 * copy after another, as the count program's entry and exit adds would.
 */
Test(inject, counters_reach_the_map_at_the_synchronizations, .timeout = 120)
{
	const char *steps[] = { "--launches", "3", "ptx", NULL };
	char expected[64];
	struct run r;

	setup_run(&r);
	r.sim_env = "CUDA_SIM_SHADOW_ADDS=1";
	count_kernels(&r, "vec_add");
	run_cuprobe(&r, NULL, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	/* 3 launches of 4 blocks of 256 threads: every entry and every exit. */
	snprintf(expected, sizeof(expected), "counts (array)\n  0: %d\n  1: %d\n", 3 * 1024, 3 * 1024);
	cr_expect_not_null(strstr(r.out_text, expected), "%s", r.out_text);
	cr_expect_null(strstr(r.err_text, "after their last synchronization"), "%s", r.err_text);
	free_run(&r);

	/* Launches no synchronization covered: said at exit, the run not failed. */
	setup_run(&r);
	r.sim_env = "CUDA_SIM_SHADOW_ADDS=1";
	count_kernels(&r, "vec_add");
	{
		const char *unsynced[] = { "--no-sync", "--launches", "2", "ptx", NULL };

		run_cuprobe(&r, NULL, unsynced);
	}
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_expect_not_null(strstr(r.err_text, "device programs: 1 stream(s) launched instrumented kernels after "
					      "their last synchronization: the counters and device rings may miss "
					      "those launches' adds and records"),
			   "%s", r.err_text);
	free_run(&r);

	/* Without the adds (the simulator's default) the shadows stay empty and so does the map. */
	setup_run(&r);
	count_kernels(&r, "vec_add");
	run_cuprobe(&r, NULL, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_expect_not_null(strstr(r.out_text, "counts (array)\n  (no entries)\n"), "%s", r.out_text);
	free_run(&r);
}

Test(inject, launches_through_cuLaunchKernelEx_and_cooperative_ones_carry_their_seq_too)
{
	expect_seqs_with("--ex");
	expect_seqs_with("--cooperative");
}

Test(inject, json_lists_what_was_instrumented)
{
	char output[4200];
	const char *extra[] = { "--json", "-o", output, NULL };
	const char *steps[] = { "ptx", NULL };
	size_t i, found = 0;
	json_t *lines;
	struct run r;

	setup_run(&r);
	count_kernels(&r, "vec_add");
	snprintf(output, sizeof(output), "%s/out.json", r.dir);
	run_cuprobe(&r, extra, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	lines = load_json_lines(output);
	for (i = 0; i < json_array_size(lines); i++) {
		json_t *o = json_array_get(lines, i);

		if (strcmp(jstr(o, "type"), "device"))
			continue;
		found++;
		cr_expect_str_eq(jstr(o, "event"), "instrumented");
		cr_expect_str_eq(jstr(o, "kernel"), "vec_add");
		cr_expect_str_eq(jstr(o, "api"), "cuModuleLoadData");
		cr_expect_str_eq(jstr(o, "programs"), "enter, leave");
		cr_expect_eq(jint(o, "sm"), 90);
	}
	cr_expect_eq(found, 1);
	json_decref(lines);
	free_run(&r);
}

/* A refusal after COMMAND ran: its one line, exit status 1, the image as it came. */
static void expect_module_refused(const char *glob, const char *file, const char *line, const char *what)
{
	char step[4200], paths[4][4096];
	const char *steps[] = { step, NULL };
	size_t size;
	void *bytes;
	struct run r;

	setup_run(&r);
	count_kernels(&r, glob);
	snprintf(step, sizeof(step), "load=%s", file);
	run_cuprobe(&r, NULL, steps);
	cr_expect_eq(r.status, 1, "%s: exit %d\n%s", what, r.status, r.err_text);
	cr_expect_eq(lines_with(r.err_text, line), 1, "%s: one line with \"%s\":\n%s", what, line, r.err_text);
	cr_assert_eq(images(&r, paths, 4), 1);
	bytes = read_bytes(file, &size);
	expect_same_bytes(paths[0], bytes, size, what);
	free(bytes);
	free_run(&r);
}

Test(inject, a_matching_kernel_without_ptx_is_named_in_one_line_and_fails_the_run)
{
	char *cubin = data_path("vec_add.cubin"), *sass = data_path("vec_add-sass.fatbin");

	expect_module_refused("vec_add", cubin, "not instrumentable: no PTX for sm_90: vec_add", "a cubin");
	expect_module_refused("vec_add", sass, "not instrumentable: no PTX for sm_90: vec_add",
			      "a SASS-only fatbin");
	free(cubin);
	free(sass);
}

Test(inject, a_module_the_rewriter_refuses_is_loaded_as_it_was)
{
	struct run r;
	char *old;

	setup_run(&r);
	old = path_join(r.dir, "old.ptx");
	cr_assert(write_text(old, ".version 5.0\n.target sm_60\n.address_size 64\n"
				  ".visible .entry vec_add(.param .u64 a)\n{\n\tret;\n}\n"));
	expect_module_refused("vec_add", old, "not instrumentable: PTX ISA 5.0 is older than 6.2", "old PTX");
	free(old);
	free_run(&r);
}

Test(inject, a_glob_matching_nothing_is_one_line_and_the_module_passes_untouched)
{
	const char *steps[] = { "ptx", NULL };
	char paths[4][4096];
	struct run r;

	setup_run(&r);
	count_kernels(&r, "no_such_kernel*");
	run_cuprobe(&r, NULL, steps);
	cr_expect_eq(r.status, 1, "%s", r.err_text);
	cr_expect_eq(lines_with(r.err_text, "gpu program enter: gpu/no_such_kernel* matched no kernel"), 1,
		     "%s", r.err_text);
	cr_expect_eq(lines_with(r.err_text, "gpu program leave: gpu.exit/no_such_kernel* matched no kernel"), 1,
		     "%s", r.err_text);
	cr_assert_eq(images(&r, paths, 4), 1);
	expect_same_bytes(paths[0], vec_add_ptx, strlen(vec_add_ptx), "vec_add_ptx");
	free_run(&r);
}

/* A refusal before anything runs: one line naming the reason, exit 2, COMMAND never started. */
static void expect_refused_before(const char *program, const char *const *extra, const char *reason)
{
	const char *steps[] = { "ptx", NULL };
	char paths[4][4096];
	struct run r;

	setup_run(&r);
	write_program(&r, program);
	run_cuprobe(&r, extra, extra ? NULL : steps);
	cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err_text);
	cr_expect_eq(count_lines(r.err_text), 1, "one line: %s", r.err_text);
	cr_expect_not_null(strstr(r.err_text, reason), "\"%s\" not in: %s", reason, r.err_text);
	cr_expect_eq(images(&r, paths, 4), 0, "COMMAND ran");
	free_run(&r);
}

Test(inject, programs_refused_before_command_starts_say_why_in_one_line)
{
	static const char head[] = "#include \"vmlinux.h\"\n#include \"cuprobe.bpf.h\"\n"
				   "char LICENSE[] SEC(\"license\") = \"Dual BSD/GPL\";\n";
	char text[2048];

	/* The verifier: a write past the map value's end. */
	snprintf(text, sizeof(text),
		 "%sstruct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(map_flags, BPF_F_MMAPABLE);\n"
		 "__uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } m SEC(\".maps\");\n"
		 "SEC(\"gpu/vec_add\") int f(void *ctx) { __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&m, &k);\n"
		 "if (v) v[1] += 1; return 0; }\n", head);
	expect_refused_before(text, NULL, "the kernel's verifier refused it");
	/* A section that is neither gpu/ nor gpu.exit/, beside one that is. */
	snprintf(text, sizeof(text), "%sSEC(\"gpu/vec_add\") int g(void *ctx) { return 0; }\n"
		 "SEC(\"gpu.enter/vec_add\") int f(void *ctx) { return 0; }\n", head);
	expect_refused_before(text, NULL, "unknown section \"gpu.enter/vec_add\"");
	/* A map device code cannot reach: not an mmapable array. */
	snprintf(text, sizeof(text),
		 "%sstruct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8); __type(key, __u32);\n"
		 "__type(value, __u64); } h SEC(\".maps\");\n"
		 "SEC(\"gpu/vec_add\") int f(void *ctx) { __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&h, &k);\n"
		 "if (v) *v += 1; return 0; }\n", head);
	expect_refused_before(text, NULL, "map h is a hash: device programs reach only arrays");
	/* No glob. */
	snprintf(text, sizeof(text), "%sSEC(\"gpu/\") int f(void *ctx) { return 0; }\n", head);
	expect_refused_before(text, NULL, "unknown section \"gpu/\"; device programs go in gpu/GLOB, gpu.exit/GLOB");
}

Test(inject, pid_and_system_wide_targets_refuse_device_programs)
{
	/* A CUDA process to name with -p: it maps the driver and waits before cuInit. */
	char *workload[] = { DRV_LAUNCH, "1", "--start-delay", "60000", NULL };
	char text[4096], pid[32];
	const char *with_pid[] = { "-p", pid, NULL };
	const char *system_wide[] = { "-d", "1", NULL };
	pid_t target = start_background(workload);
	char maps[64];

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)target);
	cr_assert(wait_for_text(maps, "libcuda.so.1", 30), "drv_launch never mapped the driver");
	snprintf(pid, sizeof(pid), "%d", (int)target);
	snprintf(text, sizeof(text), count_program, "vec_add", "vec_add");
	expect_refused_before(text, with_pid, "device programs (gpu/ sections) run inside the kernels of a COMMAND only");
	expect_refused_before(text, system_wide,
			      "device programs (gpu/ sections) run inside the kernels of a COMMAND only");
	kill(target, SIGKILL);
	wait_program(target, 10);
}

/* Nothing of the injection is a file: the library and the plan were memfds. */
static size_t leftovers(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += strstr(e->d_name, "cuprobe_inject") || strstr(e->d_name, "cuprobe-plan");
	closedir(d);
	return n;
}

Test(inject, nothing_is_left_behind)
{
	const char *steps[] = { "ptx", NULL };
	struct run r;

	setup_run(&r);
	count_kernels(&r, "vec_add");
	run_cuprobe(&r, NULL, steps);
	cr_assert_eq(r.status, 0, "%s", r.err_text);
	cr_expect_eq(leftovers("/tmp") + leftovers("/dev/shm") + leftovers("/run") + leftovers(r.dir), 0);
	free_run(&r);
}
