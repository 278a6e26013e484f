// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe's bash completion (completion/cuprobe in the build tree, made from
 * the command and option tables) in a real bash: sourced by a non-interactive
 * bash, where `complete -p cuprobe` must show it registered, then its function
 * called with COMP_WORDS, COMP_CWORD, COMP_LINE and COMP_POINT set as bash
 * sets them for a line (as bash-completion's own tests do), its COMPREPLY read
 * back. Every case runs twice: in a bare bash, and with bash-completion's
 * functions loaded (Debian's bash-completion package; without it the test
 * fails), whose _command_offset completes the COMMAND after "--".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cli_options.h"
#include "commands.h"
#include "helpers.h"

enum mode { BARE, WITH_BASH_COMPLETION, MODES };
static const char *const mode_names[MODES] = { "bare bash", "bash with bash-completion" };

/*
 * Runs in bash: $1 bash-completion's script or "", $2 the completion, $3 the
 * directory to be in, $4 COMP_LINE, the rest COMP_WORDS (the last at the
 * cursor). The function gets what bash gives it: the command, the word
 * readline completes (nothing when the last word is a "=" or ":") and the
 * word before; COMPREPLY comes out one a line, what it printed on stderr.
 */
static const char driver[] =
	"if [[ -n $1 ]]; then source \"$1\" || exit 3; fi\n"
	"source \"$2\" || exit 3\n"
	"cd \"$3\" || exit 3\n"
	"COMP_LINE=$4 COMP_POINT=${#4}\n"
	"shift 4\n"
	"COMP_WORDS=(\"$@\") COMP_CWORD=$(($# - 1))\n"
	"word=${COMP_WORDS[COMP_CWORD]}\n"
	"[[ $word == [=:]* ]] && word=\n"
	"_cuprobe cuprobe \"$word\" \"${COMP_WORDS[COMP_CWORD - 1]}\"\n"
	"printf '%s\\n' \"${COMPREPLY[@]}\"\n";

static char *work; /* the files that complete: work/files */

static void setup(void)
{
	work = make_tmpdir();
}

static void teardown(void)
{
	remove_tree(work);
	free(work);
}

TestSuite(completion, .init = setup, .fini = teardown);

static char *files_dir(void)
{
	return path_join(work, "files");
}

static void make_file(const char *dir, const char *name)
{
	char *path = path_join(dir, name);

	cr_assert(write_text(path, ""), "cannot write %s", path);
	free(path);
}

/* work/files: what the file values are completed from (more with make_file). */
static char *make_files(void)
{
	char *dir = files_dir(), *sub = path_join(dir, "sub");

	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert_eq(mkdir(sub, 0755), 0);
	free(sub);
	return dir;
}

/*
 * COMP_WORDS as readline splits line: at blanks, and a run of "=" or ":"
 * (in COMP_WORDBREAKS) is a word of its own; a line that ends in a blank
 * ends with an empty word, the one at the cursor. Appended to argv at *argc.
 */
static void split_line(char *line, char **argv, int *argc, int max)
{
	char *p = line;

	for (;;) {
		size_t len;

		while (*p == ' ')
			p++;
		cr_assert_lt(*argc, max - 1);
		if (!*p) {
			/* After a blank (or nothing at all): the word at the cursor is empty. */
			if (p == line || p[-1] == ' ')
				argv[(*argc)++] = strdup("");
			return;
		}
		len = strchr("=:", *p) ? strspn(p, "=:") : strcspn(p, " =:");
		argv[(*argc)++] = strndup(p, len);
		p += len;
	}
}

/* COMPREPLY for line, in mode, with dir the current directory: one reply a line, sorted. */
static char *complete_in(enum mode mode, const char *dir, const char *line)
{
	char *out_path = path_join(work, "replies"), *err_path = path_join(work, "stderr");
	char *argv[64] = { "/bin/bash", "--norc", "--noprofile", "-c", (char *)driver, "bash",
			   mode == WITH_BASH_COMPLETION ? BASH_COMPLETION : "", COMPLETION,
			   (char *)dir, (char *)line };
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = err_path };
	char *copy = strdup(line), *sorted = NULL, *text, *err;
	int argc = 10, status, first = argc;

	split_line(copy, argv, &argc, 64);
	argv[argc] = NULL;
	status = run_program(argv, &opts, NULL);
	text = read_text(out_path);
	err = read_text(err_path);
	cr_assert_eq(status, 0, "%s: `%s`: bash exited with %d: %s", mode_names[mode], line, status,
		     err ? err : "");
	/* bash-completion's own functions may say "not in a completion" (compopt); ours never speak. */
	if (mode == BARE)
		cr_assert_str_eq(err ? err : "", "", "`%s` printed on stderr: %s", line, err);
	{
		/* One reply a line, sorted with sort(1) (the order bash shows them in is its own). */
		char *sort_argv[] = { "/usr/bin/sort", out_path, "-o", out_path, NULL };

		cr_assert_eq(run_program(sort_argv, &(struct run_opts){ 0 }, NULL), 0);
		sorted = read_text(out_path);
	}
	cr_assert_not_null(sorted);
	/* printf with no reply prints one empty line. */
	if (!strcmp(sorted, "\n"))
		sorted[0] = '\0';
	for (int i = first; i < argc; i++)
		free(argv[i]);
	free(copy);
	free(text);
	free(err);
	free(out_path);
	free(err_path);
	return sorted;
}

static char *complete(enum mode mode, const char *line)
{
	char *dir = files_dir(), *out = complete_in(mode, access(dir, F_OK) ? "/" : dir, line);

	free(dir);
	return out;
}

static bool has_reply(const char *replies, const char *word)
{
	size_t len = strlen(word);
	const char *line;

	for (line = replies; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, word, len) && (line[len] == '\n' || !line[len]))
			return true;
	return false;
}

/* The replies are exactly the words of want (one a line, any order), each once. */
static void expect_replies(enum mode mode, const char *line, const char *replies, const char *want)
{
	char *copy = strdup(want), *save = NULL, *word;
	size_t wanted = 0;

	for (word = strtok_r(copy, "\n", &save); word; word = strtok_r(NULL, "\n", &save)) {
		cr_assert(has_reply(replies, word), "%s: `%s` does not offer %s; it offers:\n%s",
			  mode_names[mode], line, word, replies);
		wanted++;
	}
	cr_assert_eq(count_lines(replies), wanted, "%s: `%s` offers:\n%s\nwanted:\n%s",
		     mode_names[mode], line, replies, want);
	free(copy);
}

static void expect_completion(enum mode mode, const char *line, const char *want)
{
	char *replies = complete(mode, line);

	expect_replies(mode, line, replies, want);
	free(replies);
}

static char *lines_of(const char *const *words, size_t count)
{
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);

	cr_assert_not_null(mem);
	for (size_t i = 0; i < count; i++)
		fprintf(mem, "%s\n", words[i]);
	cr_assert_eq(fclose(mem), 0);
	return out;
}

/* dir/NAME for each name, one a line. */
static char *paths_in(const char *dir, const char *const *names, size_t count)
{
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);

	cr_assert_not_null(mem);
	for (size_t i = 0; i < count; i++)
		fprintf(mem, "%s/%s\n", dir, names[i]);
	cr_assert_eq(fclose(mem), 0);
	return out;
}

#define LINES(...) lines_of((const char *const[]){ __VA_ARGS__ }, \
			    sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *))
#define PATHS(dir, ...) paths_in(dir, (const char *const[]){ __VA_ARGS__ }, \
				 sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *))

Test(completion, sourced_by_a_non_interactive_bash_it_is_registered)
{
	char *out_path = path_join(work, "out"), *text;
	char *argv[] = { "/bin/bash", "--norc", "--noprofile", "-c",
			 "source \"$1\" && complete -p cuprobe", "bash", COMPLETION, NULL };
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = out_path };

	cr_assert_eq(run_program(argv, &opts, NULL), 0, "%s", read_text(out_path));
	text = read_text(out_path);
	cr_assert_str_eq(text, "complete -F _cuprobe cuprobe\n");
	free(text);
	free(out_path);
}

Test(completion, the_commands_and_help_command)
{
	const char *names[CP_CMD_COUNT + 1];
	char *commands, *with_help;

	for (size_t i = 0; i < CP_CMD_COUNT; i++)
		names[i] = cp_commands[i].name;
	commands = lines_of(names, CP_CMD_COUNT);
	names[CP_CMD_COUNT] = "help";
	with_help = lines_of(names, CP_CMD_COUNT + 1);
	for (enum mode mode = 0; mode < MODES; mode++) {
		expect_completion(mode, "cuprobe ", with_help);
		expect_completion(mode, "cuprobe t", "top\ntrace\n");
		expect_completion(mode, "cuprobe -", "-h\n--help\n--version\n");
		expect_completion(mode, "cuprobe help ", commands);
		expect_completion(mode, "cuprobe help st", "stats\n");
		expect_completion(mode, "cuprobe help trace ", "");
		expect_completion(mode, "cuprobe nosuch --", "");
	}
	free(commands);
	free(with_help);
}

/* Every option a command takes and nothing else, from the option table: `cuprobe NAME -<TAB>`. */
Test(completion, each_command_offers_the_options_it_takes)
{
	const struct cp_option_doc *docs;
	size_t count;

	docs = cp_option_docs(&count);
	for (size_t c = 0; c < CP_CMD_COUNT; c++) {
		const struct cp_command *command = &cp_commands[c];
		char *want = NULL, *line = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&want, &len);

		cr_assert_not_null(mem);
		for (size_t i = 0; i < count; i++) {
			if (!cp_option_takes(&docs[i], command->id))
				continue;
			if (docs[i].short_name)
				fprintf(mem, "-%c\n", docs[i].short_name);
			fprintf(mem, "--%s\n", docs[i].name);
		}
		if (!command->no_command)
			fputs("--\n", mem);
		cr_assert_eq(fclose(mem), 0);
		cr_assert(asprintf(&line, "cuprobe %s -", command->name) > 0);
		for (enum mode mode = 0; mode < MODES; mode++)
			expect_completion(mode, line, want);
		free(line);
		free(want);
	}
}

Test(completion, options_by_prefix_and_only_the_commands_own)
{
	const struct cp_option_doc *docs;
	size_t count;

	docs = cp_option_docs(&count);
	for (enum mode mode = 0; mode < MODES; mode++) {
		char *top = complete(mode, "cuprobe top --");

		expect_completion(mode, "cuprobe trace --j", "--json\n");
		expect_completion(mode, "cuprobe trace --per", "--perfetto\n");
		/* top takes none of trace's own options (--json, --pid, --runtime...). */
		for (size_t i = 0; i < count; i++) {
			char name[64];

			if (!cp_option_takes(&docs[i], CP_CMD_TRACE) || cp_option_takes(&docs[i], CP_CMD_TOP))
				continue;
			snprintf(name, sizeof(name), "--%s", docs[i].name);
			cr_assert(!has_reply(top, name), "%s: cuprobe top offers %s", mode_names[mode], name);
		}
		cr_assert(has_reply(top, "--interval") && !has_reply(top, "--json") &&
			  !has_reply(top, "--"), "%s: cuprobe top offers:\n%s", mode_names[mode], top);
		/* With nothing typed: the long options, and -- where a COMMAND may follow. */
		free(top);
		top = complete(mode, "cuprobe probes ");
		expect_replies(mode, "cuprobe probes ", top, "--lib\n--help\n");
		free(top);
		top = complete(mode, "cuprobe trace ");
		cr_assert(has_reply(top, "--json") && has_reply(top, "--") && !has_reply(top, "-p"),
			  "%s: cuprobe trace offers:\n%s", mode_names[mode], top);
		free(top);
		/* A value that takes nothing to complete (seconds, an address) is offered nothing. */
		expect_completion(mode, "cuprobe stats -i ", "");
		expect_completion(mode, "cuprobe exporter --listen ", "");
		expect_completion(mode, "cuprobe exporter --listen 127.0.0.1:", "");
		expect_completion(mode, "cuprobe run x.bpf.c --set ", "");
	}
}

Test(completion, run_completes_its_program_then_its_options)
{
	char *dir = make_files(), *programs, *line = NULL;

	make_file(dir, "a.bpf.c");
	make_file(dir, "b.bpf.o");
	make_file(dir, "c.txt");
	make_file(dir, "d.bpf.h");
	programs = PATHS(dir, "a.bpf.c", "b.bpf.o", "sub");
	for (enum mode mode = 0; mode < MODES; mode++) {
		expect_completion(mode, "cuprobe run x.bpf.c --p", "--pid\n--ptx\n--python\n");
		cr_assert(asprintf(&line, "cuprobe run %s/", dir) > 0);
		expect_completion(mode, line, programs);
		free(line);
		/* After -i's value, still PROG; relative to the current directory too. */
		cr_assert(asprintf(&line, "cuprobe run -i 1 -v %s/", dir) > 0);
		expect_completion(mode, line, programs);
		free(line);
		expect_completion(mode, "cuprobe run ", "a.bpf.c\nb.bpf.o\nsub\n");
		/* PROG given: the options. */
		cr_assert(asprintf(&line, "cuprobe run %s/a.bpf.c ", dir) > 0);
		{
			char *replies = complete(mode, line);

			cr_assert(has_reply(replies, "--ptx") && has_reply(replies, "--") &&
				  !has_reply(replies, "a.bpf.c"), "%s: `%s` offers:\n%s", mode_names[mode],
				  line, replies);
			free(replies);
		}
		free(line);
	}
	free(programs);
	free(dir);
}

Test(completion, files_for_the_options_that_take_one)
{
	char *dir = make_files(), *others = path_join(work, "others"), *line = NULL, *want;

	make_file(dir, "libcuda.so.1");
	make_file(dir, "libcudart.so.12");
	make_file(dir, "notes.txt");
	make_file(dir, "a:b.txt");
	cr_assert_eq(mkdir(others, 0755), 0);
	make_file(others, "notes.txt");
	make_file(others, "other.so");
	for (enum mode mode = 0; mode < MODES; mode++) {
		/* --lib: the libcuda files (and directories) where there are. */
		want = PATHS(dir, "libcuda.so.1", "sub");
		cr_assert(asprintf(&line, "cuprobe trace --lib %s/", dir) > 0);
		expect_completion(mode, line, want);
		free(line);
		cr_assert(asprintf(&line, "cuprobe probes --lib %s/", dir) > 0);
		expect_completion(mode, line, want);
		free(line);
		/* --lib=PATH: bash splits the word at "="; what it replaces is PATH. */
		cr_assert(asprintf(&line, "cuprobe top --lib=%s/", dir) > 0);
		expect_completion(mode, line, want);
		free(line);
		free(want);
		/* --cudart: the libcudart files. */
		want = PATHS(dir, "libcudart.so.12", "sub");
		cr_assert(asprintf(&line, "cuprobe trace --cudart %s/", dir) > 0);
		expect_completion(mode, line, want);
		free(line);
		free(want);
		/* No libcuda file there: every file. */
		want = PATHS(others, "notes.txt", "other.so");
		cr_assert(asprintf(&line, "cuprobe trace --lib %s/", others) > 0);
		expect_completion(mode, line, want);
		free(line);
		free(want);
		/* -o and --perfetto: any file. */
		want = PATHS(dir, "a:b.txt", "libcuda.so.1", "libcudart.so.12", "notes.txt", "sub");
		cr_assert(asprintf(&line, "cuprobe stats -o %s/", dir) > 0);
		expect_completion(mode, line, want);
		free(line);
		free(want);
		want = PATHS(dir, "notes.txt");
		cr_assert(asprintf(&line, "cuprobe trace --json --perfetto %s/n", dir) > 0);
		expect_completion(mode, line, want);
		free(line);
		free(want);
		/* A name with ":": bash replaces what follows it, so that is what comes back. */
		cr_assert(asprintf(&line, "cuprobe trace -o %s/a:", dir) > 0);
		expect_completion(mode, line, "b.txt\n");
		free(line);
		/* The value of -o is "--", not the end of the options. */
		expect_completion(mode, "cuprobe trace -o -- --j", "--json\n");
	}
	free(others);
	free(dir);
}

/* Whether /proc/pid/maps maps the simulated driver yet. */
static bool maps_libcuda(pid_t pid)
{
	char path[64], *maps;
	bool found;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = read_text(path);
	found = maps && strstr(maps, "/libcuda.so");
	free(maps);
	return found;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

Test(completion, pids_of_the_processes_that_map_a_libcuda, .timeout = 60)
{
	/* A CUDA process (the simulated driver linked in) that waits a minute before cuInit. */
	char *cuda_argv[] = { DRV_LAUNCH, "1", "--start-delay", "60000", NULL };
	char *plain_argv[] = { "/bin/sleep", "60", NULL };
	pid_t cuda = start_background(cuda_argv), plain = start_background(plain_argv);
	char cuda_pid[16], plain_pid[16], own_pid[16];
	struct timespec pause = { 0, 10 * 1000000L };

	snprintf(cuda_pid, sizeof(cuda_pid), "%d", (int)cuda);
	snprintf(plain_pid, sizeof(plain_pid), "%d", (int)plain);
	snprintf(own_pid, sizeof(own_pid), "%d", (int)getpid());
	for (int i = 0; i < 500 && !maps_libcuda(cuda); i++)
		nanosleep(&pause, NULL);
	cr_assert(maps_libcuda(cuda), "drv_launch (pid %d) never mapped libcuda", (int)cuda);
	for (enum mode mode = 0; mode < MODES; mode++) {
		static const char *const lines[] = { "cuprobe trace -p ", "cuprobe stats --pid ",
						     "cuprobe run x.bpf.c --pid=", "cuprobe trace -vp " };

		for (size_t l = 0; l < sizeof(lines) / sizeof(lines[0]); l++) {
			char *replies = complete(mode, lines[l]), *copy, *save = NULL, *pid;

			cr_assert(has_reply(replies, cuda_pid), "%s: `%s` does not offer drv_launch's pid %s:\n%s",
				  mode_names[mode], lines[l], cuda_pid, replies);
			cr_assert(!has_reply(replies, plain_pid) && !has_reply(replies, own_pid),
				  "%s: `%s` offers a process that maps no libcuda:\n%s", mode_names[mode],
				  lines[l], replies);
			/* Every pid offered maps one (or has exited since). */
			copy = strdup(replies);
			for (pid = strtok_r(copy, "\n", &save); pid; pid = strtok_r(NULL, "\n", &save)) {
				char path[64];

				snprintf(path, sizeof(path), "/proc/%s", pid);
				cr_assert(maps_libcuda(atoi(pid)) || access(path, F_OK),
					  "%s: `%s` offers %s, which maps no libcuda", mode_names[mode],
					  lines[l], pid);
			}
			free(copy);
			free(replies);
		}
		/* top takes no -p: what follows it is not a pid. */
		{
			char *replies = complete(mode, "cuprobe top -p ");

			cr_assert(!has_reply(replies, cuda_pid), "%s: cuprobe top -p offers pids:\n%s",
				  mode_names[mode], replies);
			free(replies);
		}
	}
	stop(cuda);
	stop(plain);
}

Test(completion, the_command_after_dashdash)
{
	for (enum mode mode = 0; mode < MODES; mode++) {
		char *replies = complete(mode, "cuprobe trace -- bas");

		cr_assert(has_reply(replies, "bash"), "%s: `cuprobe trace -- bas` offers:\n%s",
			  mode_names[mode], replies);
		free(replies);
		/* top and the exporter take no COMMAND. */
		expect_completion(mode, "cuprobe top -- ", "");
		expect_completion(mode, "cuprobe exporter -- bas", "");
	}
	/* bash-completion's _command_offset: COMMAND's own completion, here cuprobe's again. */
	expect_completion(WITH_BASH_COMPLETION, "cuprobe trace -- cuprobe st", "stats\n");
	expect_completion(WITH_BASH_COMPLETION, "cuprobe stats --json --output=x -- cuprobe trace --j",
			  "--json\n");
}
