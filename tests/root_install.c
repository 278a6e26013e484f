// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cmake --install` into a temporary prefix, then what a user of the
 * installed tree meets: the files, libcuprobe.so exporting the public API
 * and nothing else under its SONAME, a program built out of tree with
 * `pkg-config cuprobe`, a BPF program built against the installed SDK, the
 * installed man pages naming the options the installed cuprobe takes, and
 * the installed bash completion, found by bash-completion's loader.
 *
 * Each test installs afresh (Criterion runs each in its own process).
 */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cuprobe.h"
#include "helpers.h"

static char *prefix;   /* the install tree */
static char *work;     /* sources, objects and the outputs of the commands run */

/* Runs a shell command line in work: its status; stdout and stderr (malloc'd) when asked. */
__attribute__((format(printf, 3, 4)))
static int sh(char **out, char **err, const char *fmt, ...)
{
	char *command, *out_path = path_join(work, "stdout"), *err_path = path_join(work, "stderr");
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = err_path };
	va_list ap;
	int status;

	va_start(ap, fmt);
	cr_assert_geq(vasprintf(&command, fmt, ap), 0);
	va_end(ap);
	{
		char *argv[] = { "/bin/sh", "-c", command, NULL };

		status = run_program(argv, &opts, NULL);
	}
	if (out)
		*out = read_text(out_path);
	if (err)
		*err = read_text(err_path);
	free(command);
	free(out_path);
	free(err_path);
	return status;
}

/* "<prefix>/<dir>/<name>", malloc'd. */
static char *installed(const char *dir, const char *name)
{
	char *path;

	cr_assert_geq(asprintf(&path, "%s/%s/%s", prefix, dir, name), 0);
	return path;
}

/* pkg-config, finding the installed cuprobe.pc (and the system's libbpf.pc ...). */
static char *pkg_config(void)
{
	char *command;

	cr_assert_geq(asprintf(&command, "PKG_CONFIG_PATH=%s/%s/pkgconfig %s", prefix,
			       INSTALL_LIBDIR, PKG_CONFIG_BIN), 0);
	return command;
}

static void install_tree(void)
{
	char *err = NULL;
	int status;

	prefix = make_tmpdir();
	work = make_tmpdir();
	status = sh(NULL, &err, "%s --install %s --prefix %s", CMAKE_BIN, BUILD_DIR, prefix);
	cr_assert_eq(status, 0, "cmake --install: status %d: %s", status, err ? err : "");
	free(err);
}

static void remove_trees(void)
{
	remove_tree(prefix);
	remove_tree(work);
	free(prefix);
	free(work);
}

TestSuite(install, .init = install_tree, .fini = remove_trees);

static void assert_regular(const char *dir, const char *name, bool executable)
{
	char *path = installed(dir, name);
	struct stat st;

	cr_assert_eq(lstat(path, &st), 0, "%s not installed: %s", path, strerror(errno));
	cr_assert(S_ISREG(st.st_mode), "%s is not a regular file", path);
	cr_assert_gt(st.st_size, 0, "%s is empty", path);
	if (executable)
		cr_assert(st.st_mode & S_IXUSR, "%s is not executable", path);
	free(path);
}

static void assert_absent(const char *dir, const char *name)
{
	char *path = installed(dir, name);
	struct stat st;

	cr_assert_neq(lstat(path, &st), 0, "%s is installed, and should not be", path);
	free(path);
}

static void assert_link(const char *dir, const char *name, const char *target)
{
	char *path = installed(dir, name), got[PATH_MAX];
	ssize_t len = readlink(path, got, sizeof(got) - 1);

	cr_assert_gt(len, 0, "%s is not a symbolic link: %s", path, strerror(errno));
	got[len] = '\0';
	cr_assert_str_eq(got, target, "%s points to %s", path, got);
	free(path);
}

Test(install, the_listed_files)
{
	static const char *const examples[] = {
		"launch_dims.bpf.c", "slow_syncs.bpf.c", "alloc_sizes.bpf.c", "stream_launches.bpf.c",
		"copy_sizes.bpf.c",
	};
	char *pattern;
	glob_t sources;
	size_t i;

	assert_regular(INSTALL_BINDIR, "cuprobe", true);
	assert_regular(INSTALL_LIBDIR, "libcuprobe.so.0.1.0", false);
	assert_link(INSTALL_LIBDIR, "libcuprobe.so.0", "libcuprobe.so.0.1.0");
	assert_link(INSTALL_LIBDIR, "libcuprobe.so", "libcuprobe.so.0");
	assert_regular(INSTALL_LIBDIR "/pkgconfig", "cuprobe.pc", false);
	/* The library's header and the BPF SDK, side by side. */
	assert_regular(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe.h", false);
	assert_regular(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe_events.h", false);
	assert_regular(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe_catalogue.h", false);
	assert_regular(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe_nccl_hash.h", false);
	assert_regular(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe.bpf.h", false);
	assert_regular(INSTALL_INCLUDEDIR "/cuprobe", "vmlinux.h", false);
	assert_regular(INSTALL_MANDIR "/man8", "cuprobe.8", false);
	assert_regular(INSTALL_MANDIR "/man8", "cuprobe-trace.8", false);
	assert_regular(INSTALL_DATADIR "/bash-completion/completions", "cuprobe", false);
	/* The reference the man pages point to: every page of docs/. */
	cr_assert_geq(asprintf(&pattern, "%s/docs/*.md", SOURCE_DIR), 0);
	cr_assert_eq(glob(pattern, 0, NULL, &sources), 0, "no docs in the tree: %s", pattern);
	for (i = 0; i < sources.gl_pathc; i++)
		assert_regular(INSTALL_DOCDIR, strrchr(sources.gl_pathv[i], '/') + 1, false);
	globfree(&sources);
	free(pattern);
	/* Internal headers and the static library stay in the tree. */
	assert_absent(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe_internal.h");
	assert_absent(INSTALL_INCLUDEDIR "/cuprobe", "tracer_internal.h");
	assert_absent(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe.skel.h");
	assert_absent(INSTALL_LIBDIR, "libcuprobe.a");

	/* The five example programs, by name... */
	for (i = 0; i < sizeof(examples) / sizeof(examples[0]); i++)
		assert_regular(INSTALL_DATADIR "/cuprobe/examples", examples[i], false);
	/* ...and every other example program of the tree. */
	cr_assert_geq(asprintf(&pattern, "%s/bpf/examples/*.bpf.c", SOURCE_DIR), 0);
	cr_assert_eq(glob(pattern, 0, NULL, &sources), 0, "no examples in the tree: %s", pattern);
	cr_assert_geq(sources.gl_pathc, sizeof(examples) / sizeof(examples[0]));
	for (i = 0; i < sources.gl_pathc; i++)
		assert_regular(INSTALL_DATADIR "/cuprobe/examples",
			       strrchr(sources.gl_pathv[i], '/') + 1, false);
	globfree(&sources);
	free(pattern);
}

/* The names nm -D --defined-only lists, one per line, in a malloc'd text. */
static char *exported_names(void)
{
	char *lib = installed(INSTALL_LIBDIR, "libcuprobe.so.0.1.0"), *out = NULL, *err = NULL;
	int status = sh(&out, &err, "%s -D --defined-only %s | awk '{ print $3 }'", NM_BIN, lib);

	cr_assert_eq(status, 0, "nm: %s", err ? err : "");
	cr_assert_not_null(out);
	free(lib);
	free(err);
	return out;
}

static bool has_line(const char *text, const char *line)
{
	size_t len = strlen(line);
	const char *p;

	for (p = text; (p = strstr(p, line)); p += len)
		if ((p == text || p[-1] == '\n') && (p[len] == '\n' || !p[len]))
			return true;
	return false;
}

Test(install, the_library_exports_the_public_api_and_nothing_else)
{
	char *names = exported_names(), *header = NULL, *copy, *line, *save = NULL, *p;
	char *header_path = installed(INSTALL_INCLUDEDIR "/cuprobe", "cuprobe.h");
	size_t exported = 0, declared = 0;

	copy = strdup(names);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cr_assert_eq(strncmp(line, "cp_", 3), 0, "libcuprobe.so exports %s", line);
		exported++;
	}
	free(copy);
	/* What the installed header declares CUPROBE_API, and only that. */
	header = read_text(header_path);
	cr_assert_not_null(header);
	for (p = strstr(header, "\nCUPROBE_API "); p; p = strstr(p + 1, "\nCUPROBE_API ")) {
		char *paren = strchr(p, '('), *start = paren, name[128];

		cr_assert_not_null(paren);
		while (start > p && (start[-1] == '_' || isalnum((unsigned char)start[-1])))
			start--;
		cr_assert_lt((size_t)(paren - start), sizeof(name));
		snprintf(name, sizeof(name), "%.*s", (int)(paren - start), start);
		cr_assert(has_line(names, name), "%s is declared CUPROBE_API but not exported", name);
		declared++;
	}
	cr_assert_eq(exported, declared, "%zu symbols exported, %zu declared CUPROBE_API",
		     exported, declared);
	/* And no function of the header lacks it (it would be declared, yet hidden). */
	copy = strdup(header);
	save = NULL;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (isalpha((unsigned char)line[0]) && strchr(line, '(') && strncmp(line, "typedef ", 8))
			cr_assert_eq(strncmp(line, "CUPROBE_API ", 12), 0,
				     "cuprobe.h declares without CUPROBE_API: %s", line);
	free(copy);
	cr_assert_gt(declared, 50);
	/* The internal interface, and libiberty linked inside, stay hidden. */
	cr_assert_not(has_line(names, "cp_opts__copy"));
	cr_assert_not(has_line(names, "cp_maps__parse_line"));
	cr_assert_not(has_line(names, "cp_tracer__log"));
	cr_assert_not(has_line(names, "xmalloc"));
	cr_assert_not(has_line(names, "cplus_demangle"));
	free(names);
	free(header);
	free(header_path);
}

Test(install, the_library_has_its_soname)
{
	char *lib = installed(INSTALL_LIBDIR, "libcuprobe.so.0.1.0"), *out = NULL;

	cr_assert_eq(sh(&out, NULL, "%s -d %s", READELF_BIN, lib), 0);
	cr_assert_not_null(strstr(out, "Library soname: [libcuprobe.so.0]"), "%s", out);
	/* The exporter's protobuf exposition is the command line's: the library does not need it. */
	cr_assert_null(strstr(out, "protobuf"), "%s", out);
	free(out);
	free(lib);
}

Test(install, cuprobe_runs_from_the_tree_without_the_shared_library)
{
	char *bin = installed(INSTALL_BINDIR, "cuprobe"), *out = NULL;

	/* libcuprobe.a is linked in: nothing to find at run time. */
	cr_assert_eq(sh(&out, NULL, "%s -d %s", READELF_BIN, bin), 0);
	cr_assert_null(strstr(out, "libcuprobe"), "%s", out);
	cr_assert_null(strstr(out, "RPATH"), "%s", out);
	cr_assert_null(strstr(out, "RUNPATH"), "%s", out);
	free(out);
	cr_assert_eq(sh(&out, NULL, "%s --version", bin), 0);
	cr_assert_str_eq(out, "cuprobe " CUPROBE_VERSION "\n");
	free(out);
	free(bin);
}

/* A program of a user of the library, public API only, warnings as errors. */
static const char user_program[] =
	"#include <stdio.h>\n"
	"#include \"cuprobe.h\"\n"
	"\n"
	"static int on_event(void *ctx, const union cp_event *event)\n"
	"{\n"
	"\t(void)ctx;\n"
	"\t(void)event;\n"
	"\treturn 0;\n"
	"}\n"
	"\n"
	"int main(void)\n"
	"{\n"
	"\tCP_OPTS(cp_agent_opts, opts, .on_event = on_event);\n"
	"\tstruct cp_launch_event raw = { .hdr = { .type = CP_EV_LAUNCH,\n"
	"\t\t\t\t\t\t.api = CP_API_cuLaunchKernel } };\n"
	"\tunion cp_event event;\n"
	"\n"
	"\tif (opts.sz != sizeof(opts) || cp_event__decode(&raw, sizeof(raw), &event))\n"
	"\t\treturn 1;\n"
	"\tprintf(\"%s %s\\n\", cp_event_type__name(event.hdr.type), cp_api__name(event.hdr.api));\n"
	"\treturn 0;\n"
	"}\n";

Test(install, a_program_builds_and_runs_with_pkg_config)
{
	char *source = path_join(work, "user.c"), *program = path_join(work, "user");
	char *pc = pkg_config(), *out = NULL, *err = NULL, expected[128];
	int status;

	cr_assert_eq(sh(&out, NULL, "%s --modversion cuprobe", pc), 0);
	cr_assert_str_eq(out, CUPROBE_VERSION "\n");
	free(out);
	cr_assert(write_text(source, user_program));
	status = sh(NULL, &err, "%s -std=gnu11 -Wall -Wextra -Werror %s %s -o %s $(%s --cflags --libs cuprobe) "
		    "-Wl,-rpath,$(%s --variable=libdir cuprobe)",
		    CC_BIN, SANITIZE_FLAGS, source, program, pc, pc);
	cr_assert_eq(status, 0, "cc: status %d: %s", status, err ? err : "");
	free(err);
	status = sh(&out, &err, "%s", program);
	cr_assert_eq(status, 0, "the program: status %d: %s", status, err ? err : "");
	snprintf(expected, sizeof(expected), "%s %s\n", cp_event_type__name(CP_EV_LAUNCH),
		 cp_api__name(CP_API_cuLaunchKernel));
	cr_assert_str_eq(out, expected);
	free(out);
	free(err);
	free(pc);
	free(source);
	free(program);
}

/* What cuprobe_internal.h declares is not there for a program linking libcuprobe.so. */
Test(install, the_internal_functions_do_not_link)
{
	static const char *const internal[] = { "cp_opts__copy", "cp_maps__parse_line",
						"cp_text__escape", "cp_format__report" };
	char *source = path_join(work, "internal.c"), *program = path_join(work, "internal");
	char *pc = pkg_config(), *text = NULL, *err = NULL, *p;
	size_t i;
	int status;

	for (i = 0; i < sizeof(internal) / sizeof(internal[0]); i++) {
		cr_assert_geq(asprintf(&p, "%svoid %s(void);\n", text ? text : "", internal[i]), 0);
		free(text);
		text = p;
	}
	cr_assert_geq(asprintf(&p, "%sint main(void)\n{\n", text), 0);
	free(text);
	text = p;
	for (i = 0; i < sizeof(internal) / sizeof(internal[0]); i++) {
		cr_assert_geq(asprintf(&p, "%s\t%s();\n", text, internal[i]), 0);
		free(text);
		text = p;
	}
	cr_assert_geq(asprintf(&p, "%s\treturn 0;\n}\n", text), 0);
	free(text);
	text = p;
	cr_assert(write_text(source, text));
	status = sh(NULL, &err, "%s %s %s -o %s $(%s --cflags --libs cuprobe)", CC_BIN,
		    SANITIZE_FLAGS, source, program, pc);
	cr_assert_neq(status, 0, "a program calling internal functions linked");
	for (i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
		cr_assert_not_null(strstr(err, internal[i]), "the linker found %s: %s", internal[i], err);
	free(err);
	free(text);
	free(pc);
	free(source);
	free(program);
}

/* The commands the installed cuprobe's --help names ("  trace     stream ..."). */
static size_t installed_commands(const char *bin, char names[][32], size_t max)
{
	char *out = NULL, *line, *save = NULL;
	size_t count = 0;
	bool in_list = false;

	cr_assert_eq(sh(&out, NULL, "%s --help", bin), 0);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(line, "Commands:")) {
			in_list = true;
			continue;
		}
		if (!in_list)
			continue;
		/* "  trace     stream ...": a command; "  cuprobe COMMAND --help ...": the list is over. */
		if (strncmp(line, "  ", 2) || line[2] == ' ' || !strncmp(line, "  cuprobe ", 10))
			break;
		cr_assert_lt(count, max);
		snprintf(names[count], sizeof(names[0]), "%.*s", (int)strcspn(line + 2, " "), line + 2);
		count++;
	}
	free(out);
	return count;
}

Test(install, the_man_pages_and_help_name_the_same_options)
{
	char *bin = installed(INSTALL_BINDIR, "cuprobe");
	char *index_path = installed(INSTALL_MANDIR "/man8", "cuprobe.8"), *index = read_text(index_path);
	char commands[16][32];
	size_t count = installed_commands(bin, commands, 16), c, i;

	cr_assert_not_null(index);
	cr_assert_not_null(strstr(index, ".TH CUPROBE 8"));
	cr_assert_geq(count, 4, "cuprobe --help names %zu commands", count);
	for (c = 0; c < count; c++) {
		struct option_list help = { 0 }, in_man = { 0 }, in_help = { 0 };
		char page[64], *man_path, *man, *out = NULL;

		/* cuprobe(8) points to the command's page, which lists its options. */
		snprintf(page, sizeof(page), ".BR cuprobe\\-%s (8)", commands[c]);
		cr_assert_not_null(strstr(index, page), "cuprobe(8) does not name %s", page);
		snprintf(page, sizeof(page), "cuprobe-%s.8", commands[c]);
		man_path = installed(INSTALL_MANDIR "/man8", page);
		man = read_text(man_path);
		cr_assert_not_null(man, "no installed man page %s", page);
		cr_assert_eq(sh(&out, NULL, "%s %s --help", bin, commands[c]), 0);
		help_text_options(out, &help);
		free(out);
		cr_assert(man_section_options(man, ".SH OPTIONS", &in_man),
			  "the installed %s has no OPTIONS", page);
		cr_assert_gt(help.count, 0, "cuprobe %s --help names no option", commands[c]);
		cr_assert_eq(in_man.count, help.count,
			     "cuprobe %s: %zu options in the installed man page, %zu in --help",
			     commands[c], in_man.count, help.count);
		for (i = 0; i < help.count; i++)
			cr_assert(option_list_has(&in_man, help.names[i]),
				  "cuprobe %s: %s not in the installed man page", commands[c],
				  help.names[i]);
		/* cuprobe help NAME is cuprobe NAME --help. */
		out = NULL;
		cr_assert_eq(sh(&out, NULL, "%s help %s", bin, commands[c]), 0);
		help_text_options(out, &in_help);
		cr_assert_eq(in_help.count, help.count, "cuprobe help %s: %s", commands[c], out);
		free(out);
		free(man);
		free(man_path);
	}
	free(index);
	free(index_path);
	free(bin);
}

/*
 * In bash: bash-completion's script ($1) loaded, then the completion of cuprobe
 * found by its loader, as on a first <TAB> after cuprobe; `complete -p cuprobe`,
 * then what `cuprobe help <TAB>` offers, one a line.
 */
static const char load_completion[] =
	"source \"$1\" || exit 3\n"
	"__load_completion cuprobe || exit 4\n"
	"complete -p cuprobe || exit 5\n"
	"COMP_LINE='cuprobe help ' COMP_POINT=13 COMP_WORDS=(cuprobe help '') COMP_CWORD=2\n"
	"_cuprobe cuprobe '' help\n"
	"printf '%s\\n' \"${COMPREPLY[@]}\"\n";

Test(install, bash_completion_loads_the_completion_of_the_installed_commands)
{
	char *bin = installed(INSTALL_BINDIR, "cuprobe"), *out_path = path_join(work, "completion");
	char *none = path_join(work, "no-user-completions"), *user_dir = NULL, *data_dirs = NULL;
	char *text, commands[16][32], want[64];
	size_t count = installed_commands(bin, commands, 16), c;
	int status;

	/* Found under PREFIX/share (a prefix in XDG_DATA_DIRS), none of the user's own first. */
	cr_assert_geq(asprintf(&user_dir, "BASH_COMPLETION_USER_DIR=%s", none), 0);
	cr_assert_geq(asprintf(&data_dirs, "XDG_DATA_DIRS=%s/%s", prefix, INSTALL_DATADIR), 0);
	{
		char *argv[] = { "/bin/bash", "--norc", "--noprofile", "-c", (char *)load_completion,
				 "bash", BASH_COMPLETION, NULL };
		char *env[] = { user_dir, data_dirs, NULL };
		struct run_opts opts = { .stdout_path = out_path, .stderr_path = out_path, .extra_env = env };

		status = run_program(argv, &opts, NULL);
	}
	text = read_text(out_path);
	cr_assert_eq(status, 0, "bash-completion did not load the installed completion (%d): %s", status,
		     text ? text : "");
	cr_assert_eq(strncmp(text, "complete -F _cuprobe cuprobe\n", 29), 0, "%s", text);
	/* Every command the installed cuprobe has, and help, once each. */
	cr_assert_geq(count, 4, "cuprobe --help names %zu commands", count);
	cr_assert_eq(count_lines(text), 1 + count, "cuprobe help <TAB> offers:\n%s", text);
	for (c = 0; c < count; c++) {
		snprintf(want, sizeof(want), "\n%s\n", commands[c]);
		cr_assert_not_null(strstr(text, want), "cuprobe help <TAB> does not offer %s:\n%s",
				   commands[c], text);
	}
	free(text);
	free(out_path);
	free(none);
	free(user_dir);
	free(data_dirs);
	free(bin);
}

/* ---- BPF programs against the installed SDK ----------------------------------------- */

/*
 * Compiles a BPF program as a user would, with the installed headers only
 * (`pkg-config --cflags cuprobe`): 0, or the compiler's status with its
 * messages in *err.
 */
static int compile_bpf(const char *source, const char *object, char **err)
{
	char *pc = pkg_config();
	int status = sh(NULL, err, "%s -g -O2 -Wall -target bpf -D__TARGET_ARCH_x86 "
			"$(%s --cflags cuprobe) -c %s -o %s", BPF_CLANG_BIN, pc, source, object);

	free(pc);
	return status;
}

static const char sdk_program[] =
	"#include \"cuprobe.bpf.h\"\n"
	"\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(p, struct cuda_launch, launch)\n"
	"{\n"
	"\treturn 0;\n"
	"}\n"
	"\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

Test(install, a_bpf_program_builds_against_the_installed_sdk)
{
	char *source = path_join(work, "launch.bpf.c"), *object = path_join(work, "launch.bpf.o");
	char *err = NULL;
	struct stat st;
	int status;

	cr_assert(write_text(source, sdk_program));
	status = compile_bpf(source, object, &err);
	cr_assert_eq(status, 0, "clang -target bpf: status %d: %s", status, err ? err : "");
	cr_assert_eq(stat(object, &st), 0);
	cr_assert_gt(st.st_size, 0);
	free(err);
	free(source);
	free(object);
}

static const char count_program[] =
	"#include \"cuprobe.bpf.h\"\n"
	"\n"
	"struct {\n"
	"\t__uint(type, BPF_MAP_TYPE_HASH);\n"
	"\t__uint(max_entries, 64);\n"
	"\t__type(key, __u32);\n"
	"\t__type(value, __u64);\n"
	"} launches_by_pid SEC(\".maps\");\n"
	"\n"
	"SEC(\"cuda/launch\")\n"
	"int CUDA_PROG(count, struct cuda_launch, launch)\n"
	"{\n"
	"\t__u32 pid = bpf_get_current_pid_tgid() >> 32;\n"
	"\t__u64 *n = cuprobe_lookup_or_init(launches_by_pid, &pid);\n"
	"\n"
	"\tif (n)\n"
	"\t\t__sync_fetch_and_add(n, 1);\n"
	"\treturn 0;\n"
	"}\n"
	"\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n";

/* The value printed for the workload's pid in the final printing of map, from JSON lines. */
static long long map_value_of(const char *output, const char *map, long long pid, const char *member)
{
	json_t *lines = load_json_lines(output), *line, *entries = NULL, *entry;
	long long value = -1;
	size_t i;

	json_array_foreach(lines, i, line)
		if (!strcmp(jstr(line, "type"), "map") && !strcmp(jstr(line, "map"), map))
			entries = json_object_get(line, "entries");
	cr_assert(json_is_array(entries), "map %s not printed", map);
	json_array_foreach(entries, i, entry) {
		json_t *key = json_object_get(entry, "key"), *v = json_object_get(entry, "value");

		if ((json_is_integer(key) ? json_integer_value(key) : jint(key, "pid")) != pid)
			continue;
		value = member ? jint(json_object_get(v, member), "count") : json_integer_value(v);
	}
	json_decref(lines);
	return value;
}

/* The installed cuprobe runs PROG on drv_launch ITERATIONS: the workload's pid. */
static long long run_installed(const char *prog, const char *output, const char *iterations)
{
	char *bin = installed("bin", "cuprobe"), *out = NULL, *err = NULL, *line;
	long long pid;
	int status;

	status = sh(&out, &err, "%s run %s --json -o %s -- %s %s", bin, prog, output, DRV_LAUNCH,
		    iterations);
	cr_assert_eq(status, 0, "installed cuprobe run %s: status %d: %s", prog, status, err ? err : "");
	line = find_line(out, "drv_launch:", 0);
	cr_assert_not_null(line, "no workload summary: %s", out);
	pid = line_value(line, "pid");
	free(line);
	free(out);
	free(err);
	free(bin);
	return pid;
}

Test(install, a_program_built_out_of_tree_runs_with_the_installed_cuprobe, .timeout = 120)
{
	char *source = path_join(work, "count.bpf.c"), *object = path_join(work, "count.bpf.o");
	char *output = path_join(work, "count.json"), *err = NULL;
	long long pid;
	int status;

	require_root();
	cr_assert(write_text(source, count_program));
	status = compile_bpf(source, object, &err);
	cr_assert_eq(status, 0, "clang -target bpf: status %d: %s", status, err ? err : "");
	pid = run_installed(object, output, "250");
	cr_assert_eq(map_value_of(output, "launches_by_pid", pid, NULL), 250);
	free(err);
	free(source);
	free(object);
	free(output);
}

Test(install, the_installed_cuprobe_compiles_an_installed_example, .timeout = 120)
{
	char *example = installed("share/cuprobe/examples", "launch_dims.bpf.c");
	char *output = path_join(work, "dims.json");
	long long pid;

	require_root();
	/* C source: compiled by the installed cuprobe against the installed SDK. */
	pid = run_installed(example, output, "120");
	cr_assert_eq(map_value_of(output, "launch_dims", pid, "blocks_per_grid"), 120);
	free(example);
	free(output);
}
