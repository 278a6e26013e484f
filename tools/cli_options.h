/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cuprobe's options: one table (cli_options.c) for the parser, each
 * command's --help and the man pages; each command's options struct.
 */
#ifndef CUPROBE_CLI_OPTIONS_H
#define CUPROBE_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "commands.h"
#include "format/format.h"

#define CP_CLI_MAX_PIDS 64
#define CP_CLI_MAX_LIBS 16
#define CP_CLI_MAX_SETTINGS 32

/*
 * What the session reads, first in every command's options: the targets,
 * the libraries, the output, the verbosity, when to stop, the ring.
 */
struct cp_common_options {
	pid_t pids[CP_CLI_MAX_PIDS];
	size_t pid_count;
	const char *libs[CP_CLI_MAX_LIBS];   /* --lib: extra libcuda files */
	size_t lib_count;
	enum cp_format format; /* --format NAME (--json: json); CP_FORMAT_TEXT when not given */
	const char *output;  /* -o FILE; NULL = stdout */
	int verbose;
	uint64_t duration_ms;/* -d SECONDS; 0 = until the target ends or a signal */
	size_t ring_bytes;   /* --ring-size */
	uint64_t wakeup_latency_ns; /* --wakeup-latency US; 0 = the library's default */
	bool run_as_root;    /* --run-as-root: do not drop to SUDO_UID/SUDO_GID */
	bool exit_with_command; /* stop when COMMAND exits, not when its whole tree has */
	bool python;         /* --python (trace, stats): the Python stack of each call */
	char **command;      /* after "--"; NULL when none */
	int command_argc;
};

struct cp_trace_options {
	struct cp_common_options common;
	const char *cudarts[CP_CLI_MAX_LIBS]; /* --cudart: files for the runtime probe */
	size_t cudart_count;
	bool runtime;        /* --runtime: also probe cudaLaunchKernel */
	bool timeline;       /* --timeline: a gpu_interval record per launch */
	const char *perfetto;/* --perfetto FILE: a trace file the Perfetto UI opens */
};

struct cp_stats_options {
	struct cp_common_options common;
	uint64_t interval_ms;/* --interval SECS: report period; 0 = only at exit */
	bool latency;        /* --latency: return probes, latency histograms, error counts */
	bool stacks;         /* --stacks: allocating stacks in leak reports */
	bool timeline;       /* --timeline: kernels' GPU time bounded from host evidence */
	bool python_own;     /* --python-own: lines by the program's own innermost frame */
};

struct cp_top_options {
	struct cp_common_options common;
	uint64_t interval_ms;/* --interval SECS: refresh period; 0 = the default */
};

struct cp_run_options {
	struct cp_common_options common;
	uint64_t interval_ms;/* --interval SECS: print the maps this often; 0 = only at exit */
	const char *program; /* PROG: a .bpf.o, or a .bpf.c to compile */
	const char *settings[CP_CLI_MAX_SETTINGS]; /* --set NAME=VALUE */
	size_t setting_count;
	bool ptx;            /* --ptx: print the device programs' PTX and exit */
	size_t max_entries;  /* --max-entries N: printed of each map; 0 = all */
	bool max_entries_set;/* ... given (0 is a value) */
};

struct cp_exporter_options {
	struct cp_common_options common;
	uint64_t interval_ms;/* --interval SECS: read the maps this often; 0 = the default */
	bool latency;        /* --latency: API latency histograms and error counts */
	const char *listen;  /* --listen ADDR:PORT; NULL = 127.0.0.1:9466 */
	bool allow_remote;   /* --allow-remote: a non-loopback ADDR */
	size_t max_kernels;  /* --max-kernels N: kernels named per process (the rest: other) */
	uint64_t keep_exited_ms; /* --keep-exited SECS: an exited process keeps its pid this long */
	bool keep_exited_set;    /* ... given (0 is a valid value) */
};

struct cp_probes_options {
	struct cp_common_options common; /* --lib only */
};

/* Any command's options: command NAME reads opts->NAME (each starts with common). */
union cp_options {
	struct cp_common_options common;
	struct cp_trace_options trace;
	struct cp_stats_options stats;
	struct cp_top_options top;
	struct cp_run_options run;
	struct cp_exporter_options exporter;
	struct cp_probes_options probes;
};

/* One option, as the parser, --help, the man page and the bash completion know it. */
struct cp_option_doc {
	int value;              /* getopt's value: the short option's letter, or an OPT_ code */
	const char *name;       /* long name */
	char short_name;        /* 0 when none */
	const char *arg;        /* the value's name in the help ("PID"); NULL for a flag */
	unsigned int commands;  /* a bit (1 << enum cp_command_id) per command that takes it */
	const char *help;       /* one paragraph: --help wraps it, so do man readers */
	/* A command's own wording where the shared help is not true of it (NULL: help). */
	const char *help_for[CP_CMD_COUNT];
	/*
	 * Where each command that takes it keeps its value, for an option whose
	 * value is not a common one: offsetof(union cp_options, ...) + 1 (0: none).
	 */
	size_t in[CP_CMD_COUNT];
	enum cp_completion complete; /* what the bash completion offers for its value */
};

const struct cp_option_doc *cp_option_docs(size_t *count);
/* What an option does in one command: its help_for[command], else its help. */
const char *cp_option_help(const struct cp_option_doc *o, enum cp_command_id command);
/* Whether command takes the option. */
bool cp_option_takes(const struct cp_option_doc *o, enum cp_command_id command);

/* `cuprobe --help`: the commands, one line each. 0 or -EIO. */
int cp_usage__general(FILE *out, const struct cp_command *commands, size_t count);
/* A command's --help, made from its row and the option table: 0 or -EIO. */
int cp_usage__print(const struct cp_command *command, FILE *out);
/* Its man page, cuprobe-NAME(8), from the same: 0 or -EIO. */
int cp_usage__man_page(const struct cp_command *command, FILE *out, const char *version);
/* The man page cuprobe(8): what cuprobe is, its commands and their pages. 0 or -EIO. */
int cp_usage__man_index(const struct cp_command *commands, size_t count, FILE *out,
			const char *version);

enum cp_parse_result {
	CP_PARSE_OK = 0,
	CP_PARSE_HELP = 1,
	CP_PARSE_ERROR = -1,
};

/*
 * Parses a command's arguments (argv[0] is its name) into opts->NAME;
 * options another command owns are refused. On CP_PARSE_ERROR, error holds
 * a one-line reason. argv is not copied: options point into it.
 */
enum cp_parse_result cp_options__parse(const struct cp_command *command, int argc, char **argv,
				       union cp_options *opts, char *error, size_t error_len);

/* Parses a positive pid, decimal digits only (no sign, space or leading 0): 0 or -EINVAL. */
int cp_parse_pid(const char *text, pid_t *pid);
/*
 * Numbers on the command line, one rule: plain decimal digits (no sign,
 * space, hex or exponent); K, M and G suffixes (powers of 1024) only for a
 * size in bytes (--ring-size), never for a count, a time or a pid.
 *
 * Parses decimal digits with an optional K, M or G suffix (powers of 1024):
 * 0 or -EINVAL/-ERANGE.
 */
int cp_parse_size(const char *text, uint64_t *bytes);
/* Parses a count from min to max, digits only: 0, -EINVAL, or -ERANGE outside [min, max]. */
int cp_parse_count(const char *text, uint64_t min, uint64_t max, uint64_t *value);
/* The most seconds a time option takes. */
#define CP_SECONDS_MAX 1000000000u
/*
 * Parses decimal seconds ("2", "1.5", ".5"; no sign, exponent or hex) into
 * milliseconds, rounded, at least 1: 0 or -EINVAL (also for 0) / -ERANGE
 * (above CP_SECONDS_MAX).
 */
int cp_parse_seconds(const char *text, uint64_t *ms);

#endif
