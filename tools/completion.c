// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe-completion TEMPLATE FILE: writes cuprobe's bash completion into FILE
 * (build time): what it completes, made from the command and option tables,
 * then TEMPLATE (tools/completion.bash), the functions that read it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "commands.h"

/* What each kind of value completes to: a call of the template's functions on the text $2. */
static const char *const completers[] = {
	[CP_COMPLETE_NOTHING] = NULL,
	[CP_COMPLETE_CUDA_PID] = "_cuprobe_cuda_pids \"$2\"",
	[CP_COMPLETE_FILE] = "_cuprobe_files \"$2\" '*'",
	[CP_COMPLETE_LIBCUDA] = "_cuprobe_files \"$2\" 'libcuda.so*'",
	[CP_COMPLETE_LIBCUDART] = "_cuprobe_files \"$2\" 'libcudart.so*'",
	[CP_COMPLETE_BPF_PROGRAM] = "_cuprobe_files \"$2\" '*.bpf.[co]'",
};

/* Names go into the script unquoted, or in single quotes: letters, digits, - and _ only. */
static bool plain_word(const char *name)
{
	return name && *name && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					     "0123456789-_") == strlen(name);
}

static bool tables_are_plain(const struct cp_option_doc *docs, size_t count)
{
	size_t i;

	for (i = 0; i < CP_CMD_COUNT; i++)
		if (!plain_word(cp_commands[i].name) ||
		    (cp_commands[i].operand.name && !plain_word(cp_commands[i].operand.name))) {
			fprintf(stderr, "cuprobe-completion: command %zu: a name bash would need quoted\n", i);
			return false;
		}
	for (i = 0; i < count; i++)
		if (!plain_word(docs[i].name) ||
		    (docs[i].short_name && !plain_word((char[]){ docs[i].short_name, '\0' })) ||
		    (size_t)docs[i].complete >= sizeof(completers) / sizeof(completers[0])) {
			fprintf(stderr, "cuprobe-completion: option %zu: a name bash would need quoted, or an unknown completion\n",
				i);
			return false;
		}
	return true;
}

/* The options command takes ("-p --pid --json ..."); only_valued: only those that take a value. */
static void write_option_list(FILE *out, enum cp_command_id command, bool only_valued,
			      const struct cp_option_doc *docs, size_t count)
{
	const char *sep = "";
	size_t i;

	for (i = 0; i < count; i++) {
		if (!cp_option_takes(&docs[i], command) || (only_valued && !docs[i].arg))
			continue;
		if (docs[i].short_name) {
			fprintf(out, "%s-%c", sep, docs[i].short_name);
			sep = " ";
		}
		fprintf(out, "%s--%s", sep, docs[i].name);
		sep = " ";
	}
}

static void write_tables(FILE *out, const struct cp_option_doc *docs, size_t count)
{
	size_t i;

	fprintf(out, "# Bash completion for cuprobe %s, made from its command and option tables\n"
		     "# (tools/commands.c, tools/cli_options.c) by cuprobe-completion.\n\n",
		CUPROBE_VERSION);
	fputs("_cuprobe_commands='", out);
	for (i = 0; i < CP_CMD_COUNT; i++)
		fprintf(out, "%s%s", i ? " " : "", cp_commands[i].name);
	fputs("'\n\n", out);

	fputs("# What command $1 takes: options (all it takes), valued (those that take a\n"
	      "# value), operand (the name of its operand before \"--\", or nothing),\n"
	      "# takes_command (1 when a COMMAND may follow \"--\"). 1 for no command.\n"
	      "_cuprobe_command()\n{\n\tcase $1 in\n", out);
	for (i = 0; i < CP_CMD_COUNT; i++) {
		const struct cp_command *command = &cp_commands[i];

		fprintf(out, "\t%s)\n\t\toptions='", command->name);
		write_option_list(out, command->id, false, docs, count);
		fputs("'\n\t\tvalued='", out);
		write_option_list(out, command->id, true, docs, count);
		fprintf(out, "'\n\t\toperand=%s\n\t\ttakes_command=%s\n\t\t;;\n",
			command->operand.name ? command->operand.name : "",
			command->no_command ? "" : "1");
	}
	fputs("\t*) return 1 ;;\n\tesac\n}\n\n", out);

	fputs("# The values of the option or operand $1 for the text $2, into COMPREPLY.\n"
	      "_cuprobe_value()\n{\n\tcase $1 in\n", out);
	for (i = 0; i < count; i++) {
		if (!docs[i].arg || !completers[docs[i].complete])
			continue;
		fputs("\t", out);
		if (docs[i].short_name)
			fprintf(out, "-%c|", docs[i].short_name);
		fprintf(out, "--%s) %s ;;\n", docs[i].name, completers[docs[i].complete]);
	}
	for (i = 0; i < CP_CMD_COUNT; i++) {
		const struct cp_command *command = &cp_commands[i];

		if (command->operand.name && completers[command->operand.complete])
			fprintf(out, "\t%s) %s ;;\n", command->operand.name,
				completers[command->operand.complete]);
	}
	fputs("\tesac\n}\n\n", out);
}

/* TEMPLATE, as it is, after the tables. */
static int copy_template(FILE *out, const char *template_path)
{
	char buf[8192];
	size_t n;
	FILE *in = fopen(template_path, "re");
	int err = 0;

	if (!in) {
		fprintf(stderr, "cuprobe-completion: %s: %s\n", template_path, strerror(errno));
		return -1;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			break;
	if (ferror(in)) {
		fprintf(stderr, "cuprobe-completion: cannot read %s\n", template_path);
		err = -1;
	}
	fclose(in);
	return err;
}

int main(int argc, char **argv)
{
	const struct cp_option_doc *docs;
	size_t count;
	FILE *out;
	int err;

	if (argc != 3) {
		fprintf(stderr, "usage: cuprobe-completion TEMPLATE FILE\n");
		return 2;
	}
	docs = cp_option_docs(&count);
	if (!tables_are_plain(docs, count))
		return 1;
	out = fopen(argv[2], "we");
	if (!out) {
		fprintf(stderr, "cuprobe-completion: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	write_tables(out, docs, count);
	err = copy_template(out, argv[1]);
	if (ferror(out))
		err = -1;
	if (fclose(out) || err) {
		fprintf(stderr, "cuprobe-completion: cannot write %s\n", argv[2]);
		unlink(argv[2]);
		return 1;
	}
	return 0;
}
