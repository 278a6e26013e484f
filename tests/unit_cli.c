// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `cuprobe trace` option parsing, and the small parsers behind it. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include <criterion/criterion.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_options.h"
#include "cuprobe_internal.h"
#include "helpers.h"
#include "spawn.h"
#include "warnings.h"

static union cp_options opts;
static char error[256];

/* argv as getopt needs it: "trace" first, NULL last, writable. */
static enum cp_parse_result parse_as(enum cp_command_id command, char **argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	memset(error, 'x', sizeof(error));
	return cp_options__parse(&cp_commands[command], argc, argv, &opts, error, sizeof(error));
}

static enum cp_parse_result parse(char **argv)
{
	return parse_as(CP_CMD_TRACE, argv);
}

#define PARSE(...) parse((char *[]){ "trace", __VA_ARGS__, NULL })

/* An error with a reason: one line, not empty. */
static void assert_error(enum cp_parse_result r, const char *needle)
{
	cr_assert_eq(r, CP_PARSE_ERROR, "accepted");
	cr_assert_gt(strlen(error), 0, "no reason given");
	cr_assert_null(strchr(error, '\n'), "reason is not one line: %s", error);
	if (needle)
		cr_assert_not_null(strstr(error, needle), "reason \"%s\" lacks \"%s\"", error, needle);
}

Test(cli, no_arguments_is_system_wide)
{
	cr_assert_eq(parse((char *[]){ "trace", NULL }), CP_PARSE_OK);
	cr_assert_eq(opts.common.pid_count, 0);
	cr_assert_null(opts.common.command);
	cr_assert_eq(opts.common.format, CP_FORMAT_TEXT);
	cr_assert_null(opts.common.output);
	cr_assert_eq(opts.common.duration_ms, 0);
	cr_assert_eq(opts.common.ring_bytes, 0);
	cr_assert_not(opts.trace.runtime);
}

Test(cli, repeated_pids)
{
	cr_assert_eq(PARSE("-p", "12", "--pid", "34", "-p56"), CP_PARSE_OK);
	cr_assert_eq(opts.common.pid_count, 3);
	cr_assert_eq(opts.common.pids[0], 12);
	cr_assert_eq(opts.common.pids[1], 34);
	cr_assert_eq(opts.common.pids[2], 56);
	cr_assert_null(opts.common.command);
}

Test(cli, bad_pids)
{
	assert_error(PARSE("-p", "0"), "0");
	assert_error(PARSE("-p", "-1"), NULL);
	assert_error(PARSE("-p", "abc"), "abc");
	assert_error(PARSE("-p", "99999999999"), NULL);
	assert_error(PARSE("-p", "12x"), NULL);
	assert_error(PARSE("-p", ""), NULL);
}

Test(cli, duplicate_pid)
{
	assert_error(PARSE("-p", "12", "-p", "34", "-p", "12"), "12");
}

Test(cli, too_many_pids)
{
	char *argv[2 + 2 * (CP_CLI_MAX_PIDS + 1) + 1], values[CP_CLI_MAX_PIDS + 1][16];
	int i, n = 0;

	argv[n++] = "trace";
	for (i = 0; i <= CP_CLI_MAX_PIDS; i++) {
		snprintf(values[i], sizeof(values[i]), "%d", 100 + i);
		argv[n++] = "-p";
		argv[n++] = values[i];
	}
	argv[n] = NULL;
	assert_error(parse(argv), NULL);
	argv[n - 2] = NULL; /* exactly the maximum */
	cr_assert_eq(parse(argv), CP_PARSE_OK);
	cr_assert_eq(opts.common.pid_count, CP_CLI_MAX_PIDS);
}

Test(cli, json_output_lib_runtime)
{
	cr_assert_eq(PARSE("--json", "-o", "/tmp/out.json", "--lib", "/a/libcuda.so.1",
			   "--lib", "/b/libcuda.so.1", "--runtime"), CP_PARSE_OK);
	cr_assert_eq(opts.common.format, CP_FORMAT_JSON);
	cr_assert_str_eq(opts.common.output, "/tmp/out.json");
	cr_assert_eq(opts.common.lib_count, 2);
	cr_assert_str_eq(opts.common.libs[0], "/a/libcuda.so.1");
	cr_assert_str_eq(opts.common.libs[1], "/b/libcuda.so.1");
	cr_assert(opts.trace.runtime);
	cr_assert_eq(opts.trace.cudart_count, 0);

	cr_assert_eq(PARSE("--output=/tmp/o2"), CP_PARSE_OK);
	cr_assert_str_eq(opts.common.output, "/tmp/o2");
	cr_assert_eq(opts.common.format, CP_FORMAT_TEXT);
	assert_error(PARSE("-o", ""), NULL);
	assert_error(PARSE("--lib", ""), NULL);
}

/* --format picks a format of CP_FORMATS by name; --json is --format json. */
Test(cli, format_by_name)
{
	cr_assert_eq(PARSE("--format", "json"), CP_PARSE_OK);
	cr_assert_eq(opts.common.format, CP_FORMAT_JSON);
	cr_assert_eq(PARSE("--format=text"), CP_PARSE_OK);
	cr_assert_eq(opts.common.format, CP_FORMAT_TEXT);
	assert_error(PARSE("--format", "yaml"), "no format called 'yaml'");
	assert_error(PARSE("--format", ""), "no format called ''");
}

Test(cli, cudart_implies_runtime)
{
	cr_assert_eq(PARSE("--cudart", "/x/libcudart.so.13"), CP_PARSE_OK);
	cr_assert(opts.trace.runtime);
	cr_assert_eq(opts.trace.cudart_count, 1);
	cr_assert_str_eq(opts.trace.cudarts[0], "/x/libcudart.so.13");
	cr_assert_eq(opts.common.lib_count, 0);
}

Test(cli, duration)
{
	cr_assert_eq(PARSE("-d", "1.5"), CP_PARSE_OK);
	cr_assert_eq(opts.common.duration_ms, 1500);
	cr_assert_eq(PARSE("--duration", "2"), CP_PARSE_OK);
	cr_assert_eq(opts.common.duration_ms, 2000);
	cr_assert_eq(PARSE("-d", "0.0001"), CP_PARSE_OK);
	cr_assert_eq(opts.common.duration_ms, 1, "a tiny positive duration must not become 0 (= forever)");
	assert_error(PARSE("-d", "0"), NULL);
	assert_error(PARSE("-d", "-1"), NULL);
	assert_error(PARSE("-d", "abc"), NULL);
	assert_error(PARSE("-d", "1.5s"), NULL);
	assert_error(PARSE("-d", "nan"), NULL);
	assert_error(PARSE("-d", "inf"), NULL);
}

#define PARSE_EXPORTER(...) parse_as(CP_CMD_EXPORTER, (char *[]){ "exporter", __VA_ARGS__, NULL })

Test(cli, keep_exited)
{
	cr_assert_eq(PARSE_EXPORTER("-i", "1"), CP_PARSE_OK);
	cr_assert_not(opts.exporter.keep_exited_set, "not given: the default applies");
	cr_assert_eq(PARSE_EXPORTER("--keep-exited", "2.5"), CP_PARSE_OK);
	cr_assert(opts.exporter.keep_exited_set);
	cr_assert_eq(opts.exporter.keep_exited_ms, 2500);
	cr_assert_eq(PARSE_EXPORTER("--keep-exited", "0"), CP_PARSE_OK);
	cr_assert(opts.exporter.keep_exited_set, "0 is a value: fold at the first refresh");
	cr_assert_eq(opts.exporter.keep_exited_ms, 0);
	cr_assert_eq(PARSE_EXPORTER("--keep-exited", "0.0"), CP_PARSE_OK);
	cr_assert_eq(opts.exporter.keep_exited_ms, 0);
	cr_assert_eq(PARSE_EXPORTER("--keep-exited", "604800"), CP_PARSE_OK);
	assert_error(PARSE_EXPORTER("--keep-exited", "604801"), "--keep-exited");
	assert_error(PARSE_EXPORTER("--keep-exited", "-1"), "--keep-exited");
	assert_error(PARSE_EXPORTER("--keep-exited", "."), "--keep-exited");
	assert_error(PARSE_EXPORTER("--keep-exited", "0.0.0"), "--keep-exited");
	assert_error(PARSE_EXPORTER("--keep-exited", "5m"), "--keep-exited");
	assert_error(PARSE("--keep-exited", "5"), "--keep-exited");
}

Test(cli, ring_size)
{
	cr_assert_eq(PARSE("--ring-size", "16M"), CP_PARSE_OK);
	cr_assert_eq(opts.common.ring_bytes, 16u << 20);
	cr_assert_eq(PARSE("--ring-size", "4096"), CP_PARSE_OK);
	cr_assert_eq(opts.common.ring_bytes, 4096);
	cr_assert_eq(PARSE("--ring-size", "1G"), CP_PARSE_OK);
	cr_assert_eq(opts.common.ring_bytes, 1u << 30);
	assert_error(PARSE("--ring-size", "3000"), "3000");
	assert_error(PARSE("--ring-size", "12K"), NULL);   /* not a power of two */
	assert_error(PARSE("--ring-size", "2048"), NULL);  /* below 4K */
	assert_error(PARSE("--ring-size", "2G"), NULL);    /* above 1G */
	assert_error(PARSE("--ring-size", "16Q"), NULL);
	assert_error(PARSE("--ring-size", "-16M"), NULL);
}

Test(cli, wakeup_latency)
{
	cr_assert_eq(PARSE("--wakeup-latency", "250"), CP_PARSE_OK);
	cr_assert_eq(opts.common.wakeup_latency_ns, 250000);
	cr_assert_eq(PARSE("--wakeup-latency", "10000000"), CP_PARSE_OK);
	cr_assert_eq(opts.common.wakeup_latency_ns, 10000000000ull);
	cr_assert_eq(PARSE("--wakeup-latency", "1"), CP_PARSE_OK);
	cr_assert_eq(opts.common.wakeup_latency_ns, 1000);
	assert_error(PARSE("--wakeup-latency", "0"), "--wakeup-latency");
	assert_error(PARSE("--wakeup-latency", "10000001"), "--wakeup-latency");
	assert_error(PARSE("--wakeup-latency", "1M"), "--wakeup-latency");
	assert_error(PARSE("--wakeup-latency", "-5"), "--wakeup-latency");
	assert_error(PARSE("--wakeup-latency", ""), "--wakeup-latency");
	assert_error(PARSE("--wakeup-latency", "2.5"), "--wakeup-latency");
}

/* Out of range: the error names the limit, not the syntax. */
Test(cli, a_duration_too_long_names_the_limit)
{
	assert_error(PARSE("-d", "99999999999999"), "at most 1000000000 seconds");
	assert_error(PARSE("-d", "1000000001"), "at most 1000000000 seconds");
	cr_assert_eq(PARSE("-d", "1000000000"), CP_PARSE_OK);
	assert_error(parse_as(CP_CMD_STATS, (char *[]){ "stats", "-i", "99999999999999", NULL }),
		     "from 0.01 to 1000000000");
	assert_error(parse_as(CP_CMD_STATS, (char *[]){ "stats", "-i", "0.001", NULL }),
		     "from 0.01 to 1000000000");
}

#define PARSE_RUN(...) parse_as(CP_CMD_RUN, (char *[]){ "run", "p.bpf.o", __VA_ARGS__, NULL })

Test(cli, max_entries)
{
	cr_assert_eq(PARSE_RUN("-v"), CP_PARSE_OK);
	cr_assert_not(opts.run.max_entries_set, "not given: the default applies");
	cr_assert_eq(PARSE_RUN("--max-entries", "0"), CP_PARSE_OK);
	cr_assert(opts.run.max_entries_set);
	cr_assert_eq(opts.run.max_entries, 0, "0: every entry");
	cr_assert_eq(PARSE_RUN("--max-entries", "25"), CP_PARSE_OK);
	cr_assert_eq(opts.run.max_entries, 25);
	assert_error(PARSE_RUN("--max-entries", "-1"), "--max-entries");
	assert_error(PARSE_RUN("--max-entries", "1K"), "--max-entries");
	assert_error(PARSE_RUN("--max-entries", "4294967296"), "--max-entries");
	assert_error(PARSE("--max-entries", "5"), "--max-entries");
}

/*
 * The rule for numbers: K, M and G (powers of 1024) are taken where the
 * value is a size in bytes (--ring-size) and nowhere else; counts, times and
 * pids are plain decimal. --max-kernels took 1K as 1024.
 */
Test(cli, suffixes_only_on_sizes)
{
	uint64_t value;

	assert_error(PARSE_EXPORTER("--max-kernels", "1K"), "--max-kernels");
	assert_error(PARSE_EXPORTER("--max-kernels", "1k"), "--max-kernels");
	assert_error(PARSE_EXPORTER("--max-kernels", "64KiB"), "--max-kernels");
	cr_assert_eq(PARSE_EXPORTER("--max-kernels", "1024"), CP_PARSE_OK);
	cr_assert_eq(opts.exporter.max_kernels, 1024);
	cr_assert_eq(PARSE_EXPORTER("--max-kernels", "100000"), CP_PARSE_OK);
	assert_error(PARSE_EXPORTER("--max-kernels", "0"), "--max-kernels");
	assert_error(PARSE_EXPORTER("--max-kernels", "100001"), "--max-kernels");
	assert_error(PARSE_EXPORTER("--max-kernels", "+5"), "--max-kernels");
	assert_error(PARSE_EXPORTER("--max-kernels", ""), "--max-kernels");
	assert_error(PARSE_EXPORTER("--max-kernels", "99999999999999999999"), "--max-kernels");
	assert_error(PARSE_RUN("--max-entries", "2M"), "--max-entries");
	assert_error(PARSE("--wakeup-latency", "1K"), "--wakeup-latency");
	assert_error(PARSE("-d", "1K"), "-d/--duration");
	assert_error(PARSE("-p", "1K"), "-p/--pid");
	cr_assert_eq(PARSE("--ring-size", "64K"), CP_PARSE_OK);
	/* The shared parser of counts. */
	cr_assert_eq(cp_parse_count("17", 1, 100, &value), 0);
	cr_assert_eq(value, 17);
	cr_assert_eq(cp_parse_count("0", 0, 100, &value), 0);
	cr_assert_eq(value, 0);
	cr_assert_eq(cp_parse_count("0", 1, 100, &value), -ERANGE);
	cr_assert_eq(cp_parse_count("101", 1, 100, &value), -ERANGE);
	cr_assert_eq(cp_parse_count("99999999999999999999999", 1, 100, &value), -ERANGE);
	cr_assert_eq(cp_parse_count("1K", 1, 100000, &value), -EINVAL);
	cr_assert_eq(cp_parse_count("", 1, 100, &value), -EINVAL);
	cr_assert_eq(cp_parse_count("+5", 1, 100, &value), -EINVAL);
	cr_assert_eq(cp_parse_count(" 5", 1, 100, &value), -EINVAL);
	cr_assert_eq(cp_parse_count("0x5", 1, 100, &value), -EINVAL);
}

Test(cli, unknown_options)
{
	assert_error(PARSE("--bogus"), "--bogus");
	assert_error(PARSE("-x"), "-x");
	assert_error(PARSE("--json=yes"), NULL);
}

Test(cli, missing_option_value_is_reported_as_such)
{
	/* "-p" with no value is not an unknown option: it is one without its value. */
	assert_error(PARSE("-p"), "needs a value");
	assert_error(PARSE("--json", "--lib"), "needs a value");
	assert_error(PARSE("-o"), "needs a value");
}

Test(cli, command_after_dashdash_keeps_its_own_options)
{
	/* Named, so that opts.common.command (pointing into it) outlives the assertion's block. */
	char *argv[] = { "trace", "--json", "--", "cmd", "-x", "--json", "-p", "5", NULL };

	cr_assert_eq(parse(argv), CP_PARSE_OK);
	cr_assert_eq(opts.common.format, CP_FORMAT_JSON);
	cr_assert_not_null(opts.common.command);
	cr_assert_eq(opts.common.command_argc, 5);
	cr_assert_str_eq(opts.common.command[0], "cmd");
	cr_assert_str_eq(opts.common.command[1], "-x");
	cr_assert_str_eq(opts.common.command[2], "--json");
	cr_assert_null(opts.common.command[5], "COMMAND's argv must stay NULL-terminated");
	cr_assert_eq(opts.common.pid_count, 0, "the command's -p was taken as ours");
}

Test(cli, dashdash_without_command)
{
	assert_error(PARSE("--json", "--"), NULL);
}

Test(cli, positional_without_dashdash)
{
	assert_error(PARSE("drv_launch", "10"), "drv_launch");
	assert_error(PARSE("--json", "drv_launch"), NULL);
}

Test(cli, option_value_that_looks_like_dashdash)
{
	/* "-o --" names a file "--"; "prog" is then a positional without "--". */
	assert_error(PARSE("-o", "--", "prog"), NULL);
}

Test(cli, pid_with_command)
{
	assert_error(PARSE("-p", "5", "--", "cmd"), NULL);
}

Test(cli, run_as_root_needs_a_command)
{
	assert_error(PARSE("--run-as-root"), NULL);
	cr_assert_eq(PARSE("--run-as-root", "--", "cmd"), CP_PARSE_OK);
	cr_assert(opts.common.run_as_root);
}

Test(cli, help)
{
	cr_assert_eq(PARSE("-h"), CP_PARSE_HELP);
	cr_assert_eq(PARSE("--json", "--help"), CP_PARSE_HELP);
}

/* ---- --help, the man page and the README list the options the parser takes -------- */

static char *help_of(enum cp_command_id command)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	cr_assert_not_null(out);
	cr_assert_eq(cp_usage__print(&cp_commands[command], out), 0);
	fclose(out);
	return text;
}

/* The options of a command's --help, the labels only. */
static void help_options(enum cp_command_id command, struct option_list *l)
{
	char *text = help_of(command);

	help_text_options(text, l);
	free(text);
}

/*
 * Whether the parser takes option for command: refused options are named as
 * such ("does not apply", "unknown option"); any other outcome (accepted, or
 * a complaint about its value or its use) means it knows the option.
 */
static bool parser_takes(enum cp_command_id command, const char *option)
{
	char *argv[] = { "cmd", (char *)option, "1", NULL };

	if (parse_as(command, argv) != CP_PARSE_ERROR)
		return true;
	return !strstr(error, "does not apply") && !strstr(error, "unknown option");
}

Test(docs, every_option_the_parser_takes_is_in_the_help_and_back)
{
	size_t count, i;
	const struct cp_option_doc *docs = cp_option_docs(&count);
	enum cp_command_id command;

	for (command = 0; command < CP_CMD_COUNT; command++) {
		struct option_list help = { 0 };

		help_options(command, &help);
		for (i = 0; i < count; i++) {
			char long_name[40], short_name[4];
			bool takes;

			snprintf(long_name, sizeof(long_name), "--%s", docs[i].name);
			takes = parser_takes(command, long_name);
			cr_assert_eq(option_list_has(&help, long_name), takes,
				     "cuprobe %s: %s is %s by the parser but %s in --help",
				     cp_commands[command].name, long_name, takes ? "taken" : "refused",
				     takes ? "missing" : "listed");
			if (docs[i].short_name && takes) {
				snprintf(short_name, sizeof(short_name), "-%c", docs[i].short_name);
				cr_assert(option_list_has(&help, short_name), "cuprobe %s: %s missing in --help",
					  cp_commands[command].name, short_name);
				cr_assert(parser_takes(command, short_name));
			}
		}
		for (i = 0; i < help.count; i++)
			cr_assert(parser_takes(command, help.names[i]), "cuprobe %s --help lists %s, which the parser refuses",
				  cp_commands[command].name, help.names[i]);
	}
}

/* A command's man page, cuprobe-NAME(8) (malloc'd). */
static char *man_page_of(enum cp_command_id command)
{
	char *man = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&man, &len);

	cr_assert_not_null(out);
	cr_assert_eq(cp_usage__man_page(&cp_commands[command], out, "test"), 0);
	fclose(out);
	return man;
}

/* Each command's man page lists the options of its --help. */
Test(docs, each_man_page_lists_the_options_of_its_help)
{
	enum cp_command_id command;

	for (command = 0; command < CP_CMD_COUNT; command++) {
		struct option_list help = { 0 }, in_man = { 0 };
		char *man = man_page_of(command), title[64];
		size_t i;

		snprintf(title, sizeof(title), ".TH CUPROBE-%s 8", cp_commands[command].name);
		for (i = 0; title[i]; i++)
			title[i] = (char)toupper((unsigned char)title[i]);
		cr_assert_not_null(strstr(man, title), "cuprobe %s: no %s in\n%s",
				   cp_commands[command].name, title, man);
		cr_assert(man_section_options(man, ".SH OPTIONS", &in_man),
			  "cuprobe-%s(8) has no OPTIONS", cp_commands[command].name);
		help_options(command, &help);
		cr_assert_eq(in_man.count, help.count, "cuprobe %s: %zu options in the man page, %zu in --help",
			     cp_commands[command].name, in_man.count, help.count);
		for (i = 0; i < help.count; i++)
			cr_assert(option_list_has(&in_man, help.names[i]), "%s: %s not in the man page",
				  cp_commands[command].name, help.names[i]);
		free(man);
	}
}

/* The text of section heading (".SH EXAMPLES") of a man page, to the next .SH; NULL if none. */
static char *man_section(const char *man, const char *heading)
{
	char line_of[64], *text, *end;
	const char *found;

	snprintf(line_of, sizeof(line_of), "\n%s\n", heading);
	found = strstr(man, line_of);
	if (!found)
		return NULL;
	text = strdup(found + strlen(line_of));
	end = strstr(text, "\n.SH ");
	if (end)
		end[1] = '\0';
	return text;
}

/*
 * Each man page has EXAMPLES (with only options its command takes), EXIT
 * STATUS and ENVIRONMENT (SUDO_UID and SUDO_GID where there is an invoking
 * user to act for), and points to the documentation cmake --install installs.
 */
Test(docs, each_man_page_has_examples_exit_status_and_environment)
{
	enum cp_command_id command;

	for (command = 0; command < CP_CMD_COUNT; command++) {
		const char *name = cp_commands[command].name;
		char *man = man_page_of(command), *examples, *exit_status, *environment, *p;
		struct option_list help = { 0 }, used = { 0 };
		size_t i;

		examples = man_section(man, ".SH EXAMPLES");
		exit_status = man_section(man, ".SH EXIT STATUS");
		environment = man_section(man, ".SH ENVIRONMENT");
		cr_assert_not_null(examples, "cuprobe-%s(8) has no EXAMPLES", name);
		cr_assert_not_null(exit_status, "cuprobe-%s(8) has no EXIT STATUS", name);
		cr_assert_not_null(environment, "cuprobe-%s(8) has no ENVIRONMENT", name);
		for (p = exit_status; *p; p++)
			*p = *p == '\n' ? ' ' : *p;
		cr_assert(strstr(exit_status, "2 for bad usage"), "%s: %s", name, exit_status);
		if (command == CP_CMD_TRACE || command == CP_CMD_STATS || command == CP_CMD_RUN)
			cr_assert(strstr(environment, "SUDO_UID") && strstr(environment, "SUDO_GID"),
				  "%s: %s", name, environment);
		cr_assert(strstr(man, "share/doc/cuprobe"), "cuprobe-%s(8) does not say where the docs are",
			  name);
		/* Every example is of this command ("sudo cuprobe NAME", or without sudo), its options only. */
		cr_assert(strstr(examples, ".TP\n.B "), "%s: %s", name, examples);
		for (p = strstr(examples, ".TP\n.B "); p; p = strstr(p + 1, ".TP\n.B ")) {
			char line[512], want[64];
			const char *at = p + 7;

			snprintf(line, sizeof(line), "%.*s", (int)strcspn(at, "\n"), at);
			snprintf(want, sizeof(want), "cuprobe %s", name);
			cr_assert(!strncmp(line, want, strlen(want)) ||
				  (!strncmp(line, "sudo ", 5) && !strncmp(line + 5, want, strlen(want))),
				  "%s: %s", name, line);
		}
		help_options(command, &help);
		{
			char *plain = strdup(examples), *q, *w;

			/* troff's "\-" as "-", then every option named in the examples. */
			for (q = w = plain; *q; q++)
				if (!(q[0] == '\\' && q[1] == '-'))
					*w++ = *q;
			*w = '\0';
			scan_options(plain, &used);
			free(plain);
		}
		cr_assert_gt(used.count, 0, "%s: examples with no option at all", name);
		for (i = 0; i < used.count; i++)
			cr_assert(option_list_has(&help, used.names[i]) || !strcmp(used.names[i], "--"),
				  "cuprobe %s's examples use %s, which it does not take", name,
				  used.names[i]);
		free(examples);
		free(exit_status);
		free(environment);
		free(man);
	}
}

/* cuprobe(8) names every command and its page; cuprobe --help every command. */
Test(docs, the_index_names_every_command)
{
	char *man = NULL, *help = NULL;
	size_t len = 0, help_len = 0;
	FILE *out = open_memstream(&man, &len), *help_out = open_memstream(&help, &help_len);
	enum cp_command_id command;

	cr_assert(out && help_out);
	cr_assert_eq(cp_usage__man_index(cp_commands, CP_CMD_COUNT, out, "test"), 0);
	cr_assert_eq(cp_usage__general(help_out, cp_commands, CP_CMD_COUNT), 0);
	fclose(out);
	fclose(help_out);
	cr_assert_not_null(strstr(man, ".TH CUPROBE 8"));
	for (command = 0; command < CP_CMD_COUNT; command++) {
		char page[64], line[128];

		snprintf(page, sizeof(page), ".BR cuprobe\\-%s (8)", cp_commands[command].name);
		cr_assert_not_null(strstr(man, page), "cuprobe(8) lacks %s", page);
		snprintf(line, sizeof(line), "\n  %-10s%s\n", cp_commands[command].name,
			 cp_commands[command].summary);
		cr_assert_not_null(strstr(help, line), "cuprobe --help lacks %s", line);
		cr_assert_eq(cp_command__find(cp_commands[command].name), &cp_commands[command]);
		cr_assert_eq(cp_commands[command].id, command, "row %d is not in its place", command);
	}
	cr_assert_null(cp_command__find("bogus"));
	free(man);
	free(help);
}

/*
 * Whether text speaks of command other as a command of its own ("run: ...",
 * "(exporter: ...", "stats adds"): words an option's help shared by several
 * commands used, and that each command's help must not carry for the others.
 */
static bool names_command(const char *text, const char *other)
{
	const char *suffixes[] = { ":", " adds", " then" };
	size_t n = strlen(other), i;
	const char *p;

	for (p = text; (p = strstr(p, other)); p += n) {
		bool word = (p == text || p[-1] == ' ' || p[-1] == '\n' || p[-1] == '(') &&
			    !isalnum((unsigned char)p[n]);

		if (word && p > text && p[-1] == '(')
			return true;
		for (i = 0; word && i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
			if (!strncmp(p + n, suffixes[i], strlen(suffixes[i])))
				return true;
	}
	return false;
}

/* text as the man page writes it: '-' as \-. */
static char *as_troff(const char *text)
{
	char *out = malloc(2 * strlen(text) + 1), *q = out;

	cr_assert_not_null(out);
	for (; *text; text++) {
		if (*text == '-')
			*q++ = '\\';
		*q++ = *text;
	}
	*q = '\0';
	return out;
}

Test(docs, each_command_says_only_what_is_true_of_it)
{
	size_t count, i;
	const struct cp_option_doc *docs = cp_option_docs(&count);
	enum cp_command_id command, other;

	for (command = 0; command < CP_CMD_COUNT; command++) {
		const struct cp_command *doc = &cp_commands[command];
		char *help = help_of(command), *section = man_page_of(command);
		bool has_command = strstr(doc->synopsis, "COMMAND"), has_prog = strstr(doc->synopsis, "PROG");

		for (i = 0; i < count; i++) {
			const char *text;
			char *troff;

			if (!cp_option_takes(&docs[i], command))
				continue;
			text = cp_option_help(&docs[i], command);
			cr_assert(text && *text, "cuprobe %s --%s has no help", doc->name, docs[i].name);
			for (other = 0; other < CP_CMD_COUNT; other++)
				cr_assert(other == command || !names_command(text, cp_commands[other].name),
					  "cuprobe %s --%s speaks of cuprobe %s: %s", doc->name, docs[i].name,
					  cp_commands[other].name, text);
			cr_assert(has_command || !strstr(text, "COMMAND"),
				  "cuprobe %s takes no COMMAND, yet --%s: %s", doc->name, docs[i].name, text);
			cr_assert(has_prog || !strstr(text, "PROG"),
				  "cuprobe %s takes no PROG, yet --%s: %s", doc->name, docs[i].name, text);
			/* The man page says the same, word for word. */
			troff = as_troff(text);
			cr_assert(strstr(section, troff), "cuprobe-%s(8) lacks --%s's text: %s",
				  doc->name, docs[i].name, text);
			free(troff);
		}
		free(section);
		free(help);
	}
}

/* run's help lists the families users' programs may attach to, from the catalogue. */
Test(docs, run_lists_the_catalogues_programmable_families)
{
	char *help = help_of(CP_CMD_RUN), *p, *list, *end;
	unsigned int family;

	for (p = help; *p; p++)
		if (*p == '\n')
			*p = ' ';
	cr_assert_null(strstr(help, "@"), "%s", help);
	list = strstr(help, "FAMILY one of ");
	cr_assert_not_null(list, "%s", help);
	list += strlen("FAMILY one of ");
	end = strchr(list, ';');
	cr_assert_not_null(end);
	*end = '\0';
	for (family = CP_FAMILY_NONE + 1; family < CP_FAMILY_MAX; family++) {
		const char *name = cp_family__name(family);
		char *at = strstr(list, name);
		bool listed = false;

		/* As a whole item: "a, b, c". */
		for (; at; at = strstr(at + 1, name))
			listed |= (at == list || at[-1] == ' ') &&
				  (!at[strlen(name)] || at[strlen(name)] == ',');
		cr_assert_eq(listed, cp_family__programmable(family), "family %s %s in: %s", name,
			     listed ? "listed" : "missing", list);
	}
	free(help);
}

/* The one decoder of a wait status, as waitpid gives it and the kernel keeps it. */
Test(docs, wait_statuses_decode_to_a_signal_or_an_exit_status)
{
	struct cp_exit e;

	e = cp_exit__decode(W_EXITCODE(3, 0));
	cr_assert_eq(e.signal, 0);
	cr_assert_eq(e.status, 3);
	e = cp_exit__decode(W_EXITCODE(0, SIGKILL));
	cr_assert_eq(e.signal, SIGKILL);
	e = cp_exit__decode(W_EXITCODE(0, SIGSEGV) | 0x80); /* with a core dump */
	cr_assert_eq(e.signal, SIGSEGV);
	e = cp_exit__decode(0);
	cr_assert_eq(e.signal, 0);
	cr_assert_eq(e.status, 0);
}

/* README's synopsis blocks ("sudo cuprobe trace [...]") against --help, per command. */
Test(docs, the_readme_synopses_list_the_same_options)
{
	char *readme = read_text(README_PATH);
	size_t count;
	const struct cp_option_doc *docs = cp_option_docs(&count);
	enum cp_command_id command;

	cr_assert_not_null(readme);
	for (command = 0; command < CP_CMD_COUNT; command++) {
		struct option_list help = { 0 }, synopsis = { 0 };
		char start[64], *p, *end, *block;
		size_t i;

		/* "cuprobe run PROG [": the synopsis's operands before its first option. */
		snprintf(start, sizeof(start), "cuprobe %s %.*s[", cp_commands[command].name,
			 (int)strcspn(cp_commands[command].synopsis, "["),
			 cp_commands[command].synopsis);
		p = strstr(readme, start);
		cr_assert_not_null(p, "README has no synopsis \"%s...\"", start);
		/* The synopsis runs to the end of its code block (or its paragraph). */
		end = strstr(p, "```");
		block = strndup(p, end ? (size_t)(end - p) : strcspn(p, "`"));
		scan_options(block, &synopsis);
		help_options(command, &help);
		for (i = 0; i < count; i++) {
			char long_name[40], short_name[4] = "";

			snprintf(long_name, sizeof(long_name), "--%s", docs[i].name);
			if (docs[i].short_name)
				snprintf(short_name, sizeof(short_name), "-%c", docs[i].short_name);
			/* Every command has --help and --verbose: synopses may leave them out. */
			if (!option_list_has(&help, long_name) || !strcmp(docs[i].name, "help") ||
			    !strcmp(docs[i].name, "verbose"))
				continue;
			cr_assert(option_list_has(&synopsis, long_name) ||
				  (*short_name && option_list_has(&synopsis, short_name)),
				  "README's synopsis of cuprobe %s lacks %s", cp_commands[command].name,
				  long_name);
		}
		for (i = 0; i < synopsis.count; i++)
			cr_assert(option_list_has(&help, synopsis.names[i]),
				  "README's synopsis of cuprobe %s has %s, which --help does not list",
				  cp_commands[command].name, synopsis.names[i]);
		free(block);
	}
	free(readme);
}

Test(cli, parse_size_suffixes)
{
	uint64_t v;

	cr_assert_eq(cp_parse_size("0", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(cp_parse_size("4096", &v), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(cp_parse_size("4k", &v), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(cp_parse_size("4K", &v), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(cp_parse_size("16M", &v), 0);
	cr_assert_eq(v, 16ull << 20);
	cr_assert_eq(cp_parse_size("16MiB", &v), 0);
	cr_assert_eq(v, 16ull << 20);
	cr_assert_eq(cp_parse_size("16MB", &v), 0);
	cr_assert_eq(v, 16ull << 20);
	cr_assert_eq(cp_parse_size("2g", &v), 0);
	cr_assert_eq(v, 2ull << 30);
	cr_assert_eq(cp_parse_size("", &v), -EINVAL);
	cr_assert_eq(cp_parse_size("M", &v), -EINVAL);
	cr_assert_eq(cp_parse_size("16T", &v), -EINVAL);
	cr_assert_eq(cp_parse_size("16MX", &v), -EINVAL);
	cr_assert_eq(cp_parse_size("-5", &v), -EINVAL);
	cr_assert_lt(cp_parse_size("99999999999999999999", &v), 0);
	cr_assert_eq(cp_parse_size("17179869184G", &v), -ERANGE); /* 2^34 G = 2^64 */
}

Test(cli, parse_pid_and_seconds)
{
	pid_t pid;
	uint64_t ms;

	cr_assert_eq(cp_parse_pid("1", &pid), 0);
	cr_assert_eq(pid, 1);
	cr_assert_eq(cp_parse_pid("2147483647", &pid), 0);
	cr_assert_eq(pid, 2147483647);
	cr_assert_eq(cp_parse_pid("2147483648", &pid), -EINVAL);
	cr_assert_eq(cp_parse_pid("-5", &pid), -EINVAL);
	cr_assert_eq(cp_parse_seconds("0.5", &ms), 0);
	cr_assert_eq(ms, 500);
	cr_assert_eq(cp_parse_seconds("1000000000", &ms), 0);
	cr_assert_eq(ms, 1000000000000ull);
	cr_assert_eq(cp_parse_seconds("1000000001", &ms), -ERANGE);
	cr_assert_eq(cp_parse_seconds("99999999999999999999999", &ms), -ERANGE);
}

/* Spaces, signs, hex, octal-looking zeros, exponents, inf and nan: none is a number here. */
Test(cli, numbers_are_plain_decimal)
{
	static const char *const bad_pids[] = { " 12", "12 ", "+1", "-1", "\t5", "0x10", "012",
						"00", "1e3", "1.0" };
	static const char *const bad_secs[] = { "0x10", " 1", "1 ", "+1", "-1", "1e3", "1E3",
						"inf", "infinity", "nan", ".", "1..5", "1,5",
						"0x1p3", "0.0", ".000", "" };
	static const char *const bad_sizes[] = { "0x1000", " 4096", "4096 ", "+4096", "1e4",
						 "010000x", "4096.0" };
	uint64_t ms, bytes;
	size_t i;
	pid_t pid;

	for (i = 0; i < sizeof(bad_pids) / sizeof(bad_pids[0]); i++) {
		cr_assert_eq(cp_parse_pid(bad_pids[i], &pid), -EINVAL, "PID \"%s\" accepted",
			     bad_pids[i]);
		assert_error(PARSE("-p", (char *)bad_pids[i]), "-p/--pid");
	}
	for (i = 0; i < sizeof(bad_secs) / sizeof(bad_secs[0]); i++) {
		cr_assert_eq(cp_parse_seconds(bad_secs[i], &ms), -EINVAL, "seconds \"%s\" accepted",
			     bad_secs[i]);
		assert_error(PARSE("-d", (char *)bad_secs[i]), "-d/--duration");
		assert_error(parse_as(CP_CMD_STATS, (char *[]){ "stats", "--interval",
							       (char *)bad_secs[i], NULL }),
			     "--interval");
	}
	for (i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		cr_assert_eq(cp_parse_size(bad_sizes[i], &bytes), -EINVAL, "size \"%s\" accepted",
			     bad_sizes[i]);
		assert_error(PARSE("--ring-size", (char *)bad_sizes[i]), "--ring-size");
	}

	/* What stays valid: plain digits, a fraction with or without a leading digit. */
	cr_assert_eq(cp_parse_pid("10", &pid), 0);
	cr_assert_eq(pid, 10);
	cr_assert_eq(cp_parse_seconds("2", &ms), 0);
	cr_assert_eq(ms, 2000);
	cr_assert_eq(cp_parse_seconds("1.", &ms), 0);
	cr_assert_eq(ms, 1000);
	cr_assert_eq(cp_parse_seconds(".25", &ms), 0);
	cr_assert_eq(ms, 250);
	cr_assert_eq(cp_parse_seconds("0.0015", &ms), 0);
	cr_assert_eq(ms, 2, "rounded to the nearest millisecond");
	cr_assert_eq(cp_parse_seconds("2.0004999", &ms), 0);
	cr_assert_eq(ms, 2000);
	cr_assert_eq(cp_parse_seconds("0.9996", &ms), 0);
	cr_assert_eq(ms, 1000);
	cr_assert_eq(cp_parse_seconds("007", &ms), 0);
	cr_assert_eq(ms, 7000);
	cr_assert_eq(cp_parse_size("0016k", &bytes), 0);
	cr_assert_eq(bytes, 16384);
	cr_assert_eq(PARSE("-p", "7", "-d", ".5", "--ring-size", "64KiB"), CP_PARSE_OK);
	cr_assert_eq(opts.common.pids[0], 7);
	cr_assert_eq(opts.common.duration_ms, 500);
	cr_assert_eq(opts.common.ring_bytes, 65536);
}

Test(identity, from_sudo_environment)
{
	struct cp_identity id;

	cr_assert_eq(setenv("SUDO_UID", "65534", 1), 0);
	cr_assert_eq(setenv("SUDO_GID", "65533", 1), 0);
	cr_assert_eq(cp_identity__from_env(&id), 0);
	if (geteuid() == 0) {
		cr_assert(id.drop);
		cr_assert_eq(id.uid, 65534);
		cr_assert_eq(id.gid, 65533);
	} else {
		cr_assert_not(id.drop, "only root drops privileges");
	}
	setenv("SUDO_UID", "0", 1);
	cr_assert_eq(cp_identity__from_env(&id), 0);
	cr_assert_not(id.drop, "SUDO_UID=0 is root already");
	if (geteuid() == 0) {
		setenv("SUDO_UID", "nobody", 1);
		cr_assert_eq(cp_identity__from_env(&id), -EINVAL);
		setenv("SUDO_UID", " 65534", 1);
		cr_assert_eq(cp_identity__from_env(&id), -EINVAL);
		setenv("SUDO_UID", "+65534", 1);
		cr_assert_eq(cp_identity__from_env(&id), -EINVAL);
	}
	if (geteuid() == 0) {
		/* One without the other: refused, not taken for root. */
		setenv("SUDO_UID", "65534", 1);
		unsetenv("SUDO_GID");
		cr_assert_eq(cp_identity__from_env(&id), -ENODATA);
		unsetenv("SUDO_UID");
		setenv("SUDO_GID", "65534", 1);
		cr_assert_eq(cp_identity__from_env(&id), -ENODATA);
	}
	unsetenv("SUDO_UID");
	unsetenv("SUDO_GID");
	cr_assert_eq(cp_identity__from_env(&id), 0);
	cr_assert_not(id.drop);
}

Test(spawn, resolve_command)
{
	struct cp_identity root = { .drop = false };
	char out[4096];

	cr_assert_eq(cp_resolve_command("/bin/sh", &root, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/bin/sh");
	cr_assert_eq(setenv("PATH", "/nonexistent:/usr/bin:/bin", 1), 0);
	cr_assert_eq(cp_resolve_command("sh", &root, out, sizeof(out)), 0);
	cr_assert(!strcmp(out, "/usr/bin/sh") || !strcmp(out, "/bin/sh"), "resolved to %s", out);
	cr_assert_eq(cp_resolve_command("/nonexistent/prog", &root, out, sizeof(out)), -ENOENT);
	cr_assert_eq(cp_resolve_command("no-such-command-cuprobe", &root, out, sizeof(out)), -ENOENT);
	char *dir = make_tmpdir(), *plain = path_join(dir, "not-executable");

	cr_assert(write_text(plain, "#!/bin/sh\n"));
	cr_assert_eq(chmod(plain, 0644), 0);
	cr_assert_eq(cp_resolve_command(plain, &root, out, sizeof(out)), -EACCES,
		     "a file without execute bits must be refused");
	remove_tree(dir);
	free(plain);
	free(dir);
	cr_assert_eq(cp_resolve_command("", &root, out, sizeof(out)), -ENOENT);
}

/*
 * An option whose value each command keeps in its own options (-i,
 * --latency, --timeline) has a place in every command that takes it, and in
 * no other; the value lands there.
 */
Test(cli, a_value_of_its_own_has_a_place_in_each_command_that_takes_it)
{
	size_t count, i;
	const struct cp_option_doc *docs = cp_option_docs(&count);
	enum cp_command_id command;

	for (i = 0; i < count; i++) {
		bool any = false;

		for (command = 0; command < CP_CMD_COUNT; command++)
			any |= docs[i].in[command] != 0;
		for (command = 0; any && command < CP_CMD_COUNT; command++) {
			cr_assert_eq(docs[i].in[command] != 0, cp_option_takes(&docs[i], command),
				     "--%s: a place in cuprobe %s's options %s", docs[i].name,
				     cp_commands[command].name,
				     docs[i].in[command] ? "but not taken" : "missing");
			cr_assert_leq(docs[i].in[command], sizeof(union cp_options));
		}
	}
	cr_assert_eq(parse_as(CP_CMD_STATS, (char *[]){ "stats", "-i", "2", "--latency", "--timeline", NULL }),
		     CP_PARSE_OK);
	cr_assert_eq(opts.stats.interval_ms, 2000);
	cr_assert(opts.stats.latency && opts.stats.timeline);
	cr_assert_eq(parse_as(CP_CMD_EXPORTER, (char *[]){ "exporter", "-i", "3", "--latency", NULL }),
		     CP_PARSE_OK);
	cr_assert_eq(opts.exporter.interval_ms, 3000);
	cr_assert(opts.exporter.latency);
	cr_assert_eq(parse_as(CP_CMD_TOP, (char *[]){ "top", "-i", "0.5", NULL }), CP_PARSE_OK);
	cr_assert_eq(opts.top.interval_ms, 500);
	cr_assert_eq(parse_as(CP_CMD_RUN, (char *[]){ "run", "p.bpf.o", "-i", "4", NULL }), CP_PARSE_OK);
	cr_assert_eq(opts.run.interval_ms, 4000);
	cr_assert_str_eq(opts.run.program, "p.bpf.o");
	cr_assert(PARSE("--timeline") == CP_PARSE_OK && opts.trace.timeline);
}

/* The end-of-run warnings: one line for each loss counter set, none when nothing was lost. */
Test(warnings, each_loss_is_said_once)
{
	static const size_t losses[] = {
		offsetof(struct cp_counters, records_lost), offsetof(struct cp_counters, pending_overflow),
		offsetof(struct cp_counters, pending_missed), offsetof(struct cp_counters, targets_overflow),
		offsetof(struct cp_counters, kernel_stats_full), offsetof(struct cp_counters, api_stats_full),
		offsetof(struct cp_counters, mem_stats_full), offsetof(struct cp_counters, live_allocs_full),
		offsetof(struct cp_counters, stacks_lost), offsetof(struct cp_counters, call_start_full),
		offsetof(struct cp_counters, vmm_full), offsetof(struct cp_counters, vmm_unknown),
		offsetof(struct cp_counters, device_stats_full), offsetof(struct cp_counters, hold_failed),
	};
	struct cp_counters counters = { .records_attempted = 5, .filtered = 3, .driver_mappings = 2 };
	struct cp_agent_stats agent = { .delivered = 9 };
	char *text = NULL;
	size_t len = 0, i;
	FILE *out;

	cr_assert_eq(cp_warnings__print(stderr, &counters, &agent), 0, "nothing lost, yet a warning");
	cr_assert_eq(cp_warnings__print(stderr, NULL, NULL), 0);
	for (i = 0; i < sizeof(losses) / sizeof(losses[0]); i++) {
		struct cp_counters one = { 0 };
		uint64_t value = 4242;

		memcpy((char *)&one + losses[i], &value, sizeof(value));
		out = open_memstream(&text, &len);
		cr_assert_not_null(out);
		cr_assert_eq(cp_warnings__print(out, &one, NULL), 1, "counter at %zu", losses[i]);
		fclose(out);
		cr_assert_not_null(strstr(text, "4242"), "counter at %zu: %s", losses[i], text);
		cr_assert_eq(strncmp(text, "cuprobe: ", 9), 0, "%s", text);
		cr_assert_eq(strchr(text, '\n'), text + strlen(text) - 1, "not one line: %s", text);
		free(text);
		text = NULL;
	}
	agent.malformed = 2;
	agent.thread_error = -EIO;
	out = open_memstream(&text, &len);
	cr_assert_not_null(out);
	cr_assert_eq(cp_warnings__print(out, NULL, &agent), 2);
	fclose(out);
	free(text);
}

/* `cuprobe help NAME` is `cuprobe NAME --help` (it printed the general help). */
Test(docs, help_name_prints_that_commands_help)
{
	char *dir = make_tmpdir(), *a = path_join(dir, "a"), *b = path_join(dir, "b"), *ta, *tb;
	size_t i;

	for (i = 0; i < CP_CMD_COUNT; i++) {
		char *help_argv[] = { CUPROBE_BIN, "help", (char *)cp_commands[i].name, NULL };
		char *own_argv[] = { CUPROBE_BIN, (char *)cp_commands[i].name, "--help", NULL };
		struct run_opts oa = { .stdout_path = a }, ob = { .stdout_path = b };

		cr_assert_eq(run_program(help_argv, &oa, NULL), 0);
		cr_assert_eq(run_program(own_argv, &ob, NULL), 0);
		ta = read_text(a);
		tb = read_text(b);
		cr_assert(ta && tb && !strncmp(ta, "usage: cuprobe ", 15), "%s", ta);
		cr_assert_str_eq(ta, tb, "cuprobe help %s differs from cuprobe %s --help",
				 cp_commands[i].name, cp_commands[i].name);
		free(ta);
		free(tb);
	}
	{
		char *bogus[] = { CUPROBE_BIN, "help", "bogus", NULL };

		cr_assert_eq(run_program(bogus, NULL, NULL), 2);
	}
	free(a);
	free(b);
	remove_tree(dir);
	free(dir);
}

Test(cli, an_option_of_another_command_is_named_in_the_error)
{
	char *argv[] = { "top", "-p", "1", NULL };
	union cp_options opts;
	char error[256];

	cr_assert_eq(cp_options__parse(&cp_commands[CP_CMD_TOP], 3, argv, &opts, error, sizeof(error)),
		     CP_PARSE_ERROR);
	cr_assert_not_null(strstr(error, "'-p/--pid'"), "%s", error);
	cr_assert_not_null(strstr(error, "cuprobe top"), "%s", error);
}
