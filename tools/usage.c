// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What cuprobe says about itself, made from the command table (commands.c)
 * and the option table (cli_options.c): `cuprobe --help`, each command's
 * --help, the man page cuprobe(8) and one page per command, cuprobe-NAME(8).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cuprobe_internal.h"

/* Where a description lists the families users' programs attach to, made from the catalogue. */
#define FAMILY_LIST "@FAMILIES@"

static const char about[] =
	"Kernel-assisted tracing of CUDA programs: kernel uprobes on libcuda.so.1\n"
	"feed BPF maps and a ring buffer; nothing is injected into the programs\n"
	"(but device programs, which cuprobe run puts into the kernels of a COMMAND).\n"
	"Needs root (CAP_BPF, CAP_PERFMON) and a kernel with BTF.";

/* text as one paragraph (its newlines are spaces), wrapped into [indent, width) columns. */
static void print_wrapped(FILE *out, const char *text, int indent, int width)
{
	int column = indent;
	const char *p = text;

	while (*p) {
		size_t word;

		while (*p == ' ' || *p == '\n')
			p++;
		word = strcspn(p, " \n");
		if (!word)
			break;
		if (column > indent && column + 1 + (int)word > width) {
			fprintf(out, "\n%*s", indent, "");
			column = indent;
		}
		fprintf(out, "%s%.*s", column > indent ? " " : "", (int)word, p);
		column += (column > indent ? 1 : 0) + (int)word;
		p += word;
	}
	fputc('\n', out);
}

/*
 * A command's description, with FAMILY_LIST replaced by every family users'
 * programs may attach to (the list the section check of
 * cp_tracer__load_program takes), its paragraphs wrapped again (malloc'd).
 * NULL when out of memory: the description is then shown as it is.
 */
static char *description_of(const struct cp_command *command)
{
	const char *text = command->description, *at = strstr(text, FAMILY_LIST), *p;
	char families[512], *flat = NULL, *wrapped = NULL;
	unsigned int family;
	size_t used = 0, len = 0;
	FILE *out;

	if (!at)
		return strdup(text);
	families[0] = '\0';
	for (family = CP_FAMILY_NONE + 1; family < CP_FAMILY_MAX; family++)
		if (cp_family__programmable(family) && used < sizeof(families))
			used += (size_t)snprintf(families + used, sizeof(families) - used, "%s%s",
						 used ? ", " : "", cp_family__name(family));
	if (asprintf(&flat, "%.*s%s%s", (int)(at - text), text, families,
		     at + strlen(FAMILY_LIST)) < 0)
		return NULL;
	out = open_memstream(&wrapped, &len);
	if (!out) {
		free(flat);
		return NULL;
	}
	for (p = flat; *p;) {
		const char *end = strstr(p, "\n\n");
		char *paragraph = strndup(p, end ? (size_t)(end - p) : strlen(p));

		if (paragraph) {
			fputs(p == flat ? "" : "\n", out);
			print_wrapped(out, paragraph, 0, 79);
		}
		free(paragraph);
		p = end ? end + 2 : p + strlen(p);
	}
	if (fclose(out) || !wrapped) {
		free(flat);
		free(wrapped);
		return NULL;
	}
	if (len && wrapped[len - 1] == '\n')
		wrapped[len - 1] = '\0'; /* print_wrapped's last newline */
	free(flat);
	return wrapped;
}

int cp_usage__general(FILE *out, const struct cp_command *commands, size_t count)
{
	size_t i;

	fprintf(out, "usage: cuprobe COMMAND [OPTIONS]\n\n%s\n\nCommands:\n", about);
	for (i = 0; i < count; i++)
		fprintf(out, "  %-10s%s\n", commands[i].name, commands[i].summary);
	fputs("\n"
	      "  cuprobe COMMAND --help   options of one command\n"
	      "  cuprobe help COMMAND     the same\n"
	      "  cuprobe --version        version\n", out);
	return ferror(out) ? -EIO : 0;
}

/* prefix and text as one paragraph, wrapped to 79 columns. */
static void print_paragraph(FILE *out, const char *prefix, const char *text)
{
	char *joined = NULL;

	if (asprintf(&joined, "%s%s", prefix, text) < 0) {
		fprintf(out, "%s%s\n", prefix, text);
		return;
	}
	print_wrapped(out, joined, 0, 79);
	free(joined);
}

/* Calls fn with each example of command: its command line, and what it does. */
static void for_each_example(const struct cp_command *command,
			     void (*fn)(FILE *out, const char *line, const char *what), FILE *out)
{
	const char *p = command->examples;

	while (p && *p) {
		size_t line_len = strcspn(p, "\n"), what_len;
		const char *what = p[line_len] ? p + line_len + 1 : p + line_len;
		const char *end = strstr(what, "\n\n");
		char *line = strndup(p, line_len), *text;

		what_len = end ? (size_t)(end - what) : strlen(what);
		text = strndup(what, what_len);
		if (line && text)
			fn(out, line, text);
		free(line);
		free(text);
		p = end ? end + 2 : what + what_len;
	}
}

static void print_example(FILE *out, const char *line, const char *what)
{
	fprintf(out, "  %s\n      ", line);
	print_wrapped(out, what, 6, 79);
}

/* "  -o, --output FILE" / "      --json": the option as --help lists it. */
static int option_label(const struct cp_option_doc *o, char *buf, size_t len)
{
	if (o->short_name)
		return snprintf(buf, len, "  -%c, --%s%s%s", o->short_name, o->name,
				o->arg ? " " : "", o->arg ? o->arg : "");
	return snprintf(buf, len, "      --%s%s%s", o->name, o->arg ? " " : "",
			o->arg ? o->arg : "");
}

int cp_usage__print(const struct cp_command *command, FILE *out)
{
	char *description = description_of(command);
	const struct cp_option_doc *docs;
	size_t count, i;
	char label[64];
	int n;

	docs = cp_option_docs(&count);
	fprintf(out, "usage: cuprobe %s %s\n\n%s\n\nOptions:\n", command->name, command->synopsis,
		description ? description : command->description);
	free(description);
	for (i = 0; i < count; i++) {
		const struct cp_option_doc *o = &docs[i];

		if (!cp_option_takes(o, command->id))
			continue;
		n = option_label(o, label, sizeof(label));
		fprintf(out, "%s", label);
		/* The help column starts at 23; a longer label puts it on the next line. */
		if (n > 22)
			fprintf(out, "\n%23s", "");
		else
			fprintf(out, "%*s", 23 - n, "");
		print_wrapped(out, cp_option_help(o, command->id), 23, 79);
	}
	if (command->trailer)
		fprintf(out, "\n%s\n", command->trailer);
	fputc('\n', out);
	print_paragraph(out, "Exit status: ", command->exit_status);
	fputs("\nExamples:\n", out);
	for_each_example(command, print_example, out);
	return ferror(out) ? -EIO : 0;
}

/*
 * troff-safe text: backslashes doubled, '-' as \-, a leading '.' or '\''
 * guarded, and a blank line (a new paragraph) as .PP.
 */
static void man_text(FILE *out, const char *text)
{
	const char *p;
	bool line_start = true;

	for (p = text; *p; p++) {
		if (line_start && *p == '\n') {
			fputs(".PP\n", out);
			continue;
		}
		if (line_start && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		if (*p == '\\')
			fputs("\\e", out);
		else if (*p == '-')
			fputs("\\-", out);
		else
			fputc(*p, out);
		line_start = *p == '\n';
	}
}

/* The page's title line: name upper-cased, as man pages write it. */
static void man_title(FILE *out, const char *name, const char *version)
{
	const char *p;

	fputs(".TH ", out);
	for (p = name; *p; p++)
		fputc(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p, out);
	fprintf(out, " 8 \"\" \"cuprobe %s\" \"System Administration\"\n", version);
}

static bool takes_output_file(const struct cp_command *command)
{
	const struct cp_option_doc *docs;
	size_t count, i;

	docs = cp_option_docs(&count);
	for (i = 0; i < count; i++)
		if (docs[i].value == 'o')
			return cp_option_takes(&docs[i], command->id);
	return false;
}

static const char files_section[] =
	".SH FILES\n"
	"Output files given with \\fB\\-o\\fR are created as the invoking user\n"
	"(SUDO_UID/SUDO_GID) and never through a symbolic link.\n";

static const char docs_note[] =
	"The reference is installed with cuprobe, in share/doc/cuprobe under its\n"
	"prefix (/usr/share/doc/cuprobe from the Debian package,\n"
	"/usr/local/share/doc/cuprobe from cmake \\-\\-install by default): commands.md\n"
	"(each command in full), json.md (every record), timeline.md, sdk.md (the\n"
	"programs of cuprobe run), exporter.md, internals.md.\n";

static void man_example(FILE *out, const char *line, const char *what)
{
	fputs(".TP\n.B ", out);
	man_text(out, line);
	fputc('\n', out);
	man_text(out, what);
	fputc('\n', out);
}

/* EXIT STATUS, ENVIRONMENT and EXAMPLES of a command's page. */
static void man_sections(FILE *out, const struct cp_command *command)
{
	size_t i;

	fputs(".SH EXIT STATUS\n", out);
	man_text(out, command->exit_status);
	fputs("\n.SH ENVIRONMENT\n", out);
	if (!command->environment[0])
		fputs("No environment variable changes what it does.\n", out);
	for (i = 0; i < sizeof(command->environment) / sizeof(command->environment[0]) &&
		    command->environment[i]; i++) {
		const char *text = command->environment[i];
		size_t name_len = strcspn(text, "\n");
		char *name = strndup(text, name_len);

		fputs(".TP\n.B ", out);
		man_text(out, name ? name : "");
		fputc('\n', out);
		man_text(out, text[name_len] ? text + name_len + 1 : "");
		fputc('\n', out);
		free(name);
	}
	fputs(".SH EXAMPLES\n", out);
	for_each_example(command, man_example, out);
}

int cp_usage__man_page(const struct cp_command *command, FILE *out, const char *version)
{
	char *description = description_of(command), title[64];
	const struct cp_option_doc *docs;
	size_t count, i;

	docs = cp_option_docs(&count);
	snprintf(title, sizeof(title), "cuprobe-%s", command->name);
	man_title(out, title, version);
	fprintf(out, ".SH NAME\ncuprobe\\-%s \\- ", command->name);
	man_text(out, command->summary);
	fprintf(out, "\n.SH SYNOPSIS\n.B cuprobe %s\n", command->name);
	man_text(out, command->synopsis);
	fputs("\n.SH DESCRIPTION\n", out);
	man_text(out, description ? description : command->description);
	free(description);
	if (command->trailer) {
		fputs("\n.PP\n", out);
		man_text(out, command->trailer);
	}
	fputs("\n.SH OPTIONS\n", out);
	for (i = 0; i < count; i++) {
		const struct cp_option_doc *o = &docs[i];

		if (!cp_option_takes(o, command->id))
			continue;
		fputs(".TP\n", out);
		if (o->short_name)
			fprintf(out, "\\fB\\-%c\\fR, ", o->short_name);
		fprintf(out, "\\fB\\-\\-");
		man_text(out, o->name);
		fprintf(out, "\\fR");
		if (o->arg)
			fprintf(out, " \\fI%s\\fR", o->arg);
		fputc('\n', out);
		man_text(out, cp_option_help(o, command->id));
		fputc('\n', out);
	}
	man_sections(out, command);
	if (takes_output_file(command))
		fputs(files_section, out);
	fprintf(out, ".SH SEE ALSO\n.BR cuprobe (8)\n.PP\n%s", docs_note);
	return ferror(out) ? -EIO : 0;
}

int cp_usage__man_index(const struct cp_command *commands, size_t count, FILE *out,
			const char *version)
{
	size_t i;

	man_title(out, "cuprobe", version);
	fputs(".SH NAME\ncuprobe \\- what processes do to the GPU, traced with kernel uprobes on the CUDA driver\n"
	      ".SH SYNOPSIS\n"
	      ".B cuprobe\n\\fICOMMAND\\fR [OPTIONS]\n.br\n"
	      ".B cuprobe help\n[\\fICOMMAND\\fR]\n.br\n"
	      ".B cuprobe \\-\\-version\n"
	      ".SH DESCRIPTION\n"
	      "Kernel uprobes on the CUDA driver API (libcuda.so.1) fire in any process; BPF\n"
	      "programs write what happened into BPF maps and a ring buffer, and a GPU agent\n"
	      "thread hands the records to an output. Nothing is injected into the traced\n"
	      "programs, except by cuprobe run's device programs, with -- COMMAND only.\n"
	      "Loading and attaching needs root (CAP_BPF, CAP_PERFMON,\n"
	      "CAP_SYS_ADMIN) and a kernel with BTF.\n"
	      ".PP\n"
	      "Each command has its own page, with its options.\n"
	      ".SH COMMANDS\n", out);
	for (i = 0; i < count; i++) {
		fprintf(out, ".TP\n.BR cuprobe\\-%s (8)\n", commands[i].name);
		man_text(out, commands[i].summary);
		fputc('\n', out);
	}
	fputs(files_section, out);
	fputs(".SH SEE ALSO\n", out);
	for (i = 0; i < count; i++)
		fprintf(out, ".BR cuprobe\\-%s (8)%s\n", commands[i].name, i + 1 < count ? "," : "");
	fprintf(out, ".PP\n%s", docs_note);
	return ferror(out) ? -EIO : 0;
}
