/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cuprobe's commands, one row each (tools/commands.c): the row makes the
 * dispatch of `cuprobe NAME`, `cuprobe --help`, `cuprobe NAME --help`, the
 * man pages and the bash completion (with the option table of
 * cli_options.c). A new command is a row, an options struct in
 * cli_options.h and its function.
 */
#ifndef CUPROBE_COMMANDS_H
#define CUPROBE_COMMANDS_H

#include <stddef.h>

enum cp_command_id { CP_CMD_TRACE, CP_CMD_STATS, CP_CMD_TOP, CP_CMD_RUN, CP_CMD_EXPORTER,
		     CP_CMD_PROBES, CP_CMD_COUNT };

union cp_options;

/* What the bash completion offers for an option's value or an operand (tools/completion.c). */
enum cp_completion {
	CP_COMPLETE_NOTHING,     /* a number, an address: nothing to offer */
	CP_COMPLETE_CUDA_PID,    /* the pids of the processes that map a libcuda */
	CP_COMPLETE_FILE,        /* any file */
	CP_COMPLETE_LIBCUDA,     /* files, those named libcuda.so* when there are */
	CP_COMPLETE_LIBCUDART,   /* files, those named libcudart.so* when there are */
	CP_COMPLETE_BPF_PROGRAM, /* files, those named *.bpf.c or *.bpf.o when there are */
};

struct cp_command {
	enum cp_command_id id;  /* its place in cp_commands, its bit in an option's commands */
	const char *name;
	/* Runs it with its parsed options (opts->NAME): the process's exit status. */
	int (*run)(const union cp_options *opts);
	const char *summary;    /* one line: cuprobe --help, the NAME of its man page */
	const char *synopsis;   /* after "cuprobe NAME " */
	/* Paragraphs; "@FAMILIES@" stands for the families users' programs attach to. */
	const char *description;
	const char *trailer;    /* the end of its description: what it says at exit, signals; or NULL */
	const char *exit_status;/* its exit statuses, one paragraph */
	/*
	 * Examples, each a command line and, on the lines after it, what it
	 * does; a blank line between two. Only options the command takes.
	 */
	const char *examples;
	/* What each environment variable it reads does for it ("NAME\ntext"); NULL: none. */
	const char *environment[4];
	/* Its operand before "--" (run's PROG), required when it has one. */
	struct {
		const char *name;   /* "PROG"; NULL: none */
		const char *what;   /* said when it is missing: "a .bpf.c or .bpf.o file" */
		size_t at;          /* where it goes: offsetof(union cp_options, ...) */
		enum cp_completion complete;
	} operand;
	/* Why it takes no COMMAND after "--" ("watches the whole host"); NULL: it takes one. */
	const char *no_command;
};

extern const struct cp_command cp_commands[CP_CMD_COUNT];

/* The command called name, or NULL. */
const struct cp_command *cp_command__find(const char *name);
/*
 * Parses argv (argv[0] is the command's name) and runs the command: its
 * --help printed (0), a usage error said (2), or the command's status.
 */
int cp_command__main(const struct cp_command *command, int argc, char **argv);

/* The commands' functions (tools/NAME.c). */
int cp_cmd_trace(const union cp_options *opts);
int cp_cmd_stats(const union cp_options *opts);
int cp_cmd_top(const union cp_options *opts);
int cp_cmd_run(const union cp_options *opts);
int cp_cmd_exporter(const union cp_options *opts);
int cp_cmd_probes(const union cp_options *opts);

#endif
