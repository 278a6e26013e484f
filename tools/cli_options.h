/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Command-line parsing for `cuprobe trace`, kept apart from main so tests can drive it. */
#ifndef CUPROBE_CLI_OPTIONS_H
#define CUPROBE_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CP_CLI_MAX_PIDS 64
#define CP_CLI_MAX_LIBS 16
#define CP_CLI_MAX_SETTINGS 32

struct cp_trace_options {
	pid_t pids[CP_CLI_MAX_PIDS];
	size_t pid_count;
	const char *libs[CP_CLI_MAX_LIBS];   /* --lib: extra libcuda files */
	size_t lib_count;
	const char *cudarts[CP_CLI_MAX_LIBS]; /* --cudart: files for the runtime probe */
	size_t cudart_count;
	bool runtime;        /* --runtime: also probe cudaLaunchKernel */
	bool json;
	bool run_as_root;    /* --run-as-root: do not drop to SUDO_UID/SUDO_GID */
	bool exit_with_command; /* stop when COMMAND exits, not when its whole tree has */
	int verbose;
	const char *output;  /* -o FILE; NULL = stdout */
	uint64_t duration_ms;/* -d SECONDS; 0 = until the target ends or a signal */
	size_t ring_bytes;   /* --ring-size */
	uint64_t wakeup_latency_ns; /* --wakeup-latency US; 0 = the library's default */
	char **command;      /* after "--"; NULL when none */
	int command_argc;
	/* cuprobe stats / top */
	uint64_t interval_ms;/* --interval SECS: report (or refresh) period; 0 = only at exit */
	bool latency;        /* --latency: return probes, latency histograms, error counts */
	bool stacks;         /* --stacks: allocating stacks in leak reports */
	bool timeline;       /* --timeline: kernels' GPU time bounded from host evidence */
	const char *perfetto;/* --perfetto FILE: a trace file the Perfetto UI opens */
	/* cuprobe run */
	const char *program; /* PROG: a .bpf.o, or a .bpf.c to compile */
	const char *settings[CP_CLI_MAX_SETTINGS]; /* --set NAME=VALUE */
	size_t setting_count;
	bool ptx;            /* --ptx: print the device programs' PTX and exit */
	/* cuprobe exporter */
	const char *listen;  /* --listen ADDR:PORT; NULL = 127.0.0.1:9466 */
	bool allow_remote;   /* --allow-remote: a non-loopback ADDR */
	size_t max_kernels;  /* --max-kernels N: kernels named per process (the rest: other) */
	uint64_t keep_exited_ms; /* --keep-exited SECS: an exited process keeps its pid this long */
	bool keep_exited_set;    /* ... given (0 is a valid value) */
};

enum cp_command { CP_CMD_TRACE, CP_CMD_STATS, CP_CMD_TOP, CP_CMD_RUN, CP_CMD_EXPORTER, CP_CMD_PROBES,
		  CP_CMD_COUNT };

/* One option, as the parser, --help and the man page know it. */
struct cp_option_doc {
	int value;              /* getopt's value: the short option's letter, or an OPT_ code */
	const char *name;       /* long name */
	char short_name;        /* 0 when none */
	const char *arg;        /* the value's name in the help ("PID"); NULL for a flag */
	unsigned int commands;  /* a bit (1 << enum cp_command) per command that takes it */
	const char *help;       /* one paragraph: --help wraps it, so do man readers */
	/* A command's own wording where the shared help is not true of it (NULL: help). */
	const char *help_for[CP_CMD_COUNT];
};

struct cp_command_doc {
	const char *name;
	const char *synopsis;   /* after "cuprobe NAME " */
	const char *description;
	const char *trailer;    /* signals, exit status */
};

const struct cp_option_doc *cp_option_docs(size_t *count);
/* What an option does in one command: its help_for[command], else its help. */
const char *cp_option_help(const struct cp_option_doc *o, enum cp_command command);
const struct cp_command_doc *cp_command_doc(enum cp_command command);
/* A command's --help, made from the option table: 0 or -EIO. */
int cp_usage__print(enum cp_command command, FILE *out);
/* The man page cuprobe(8), every command, from the same table: 0 or -EIO. */
int cp_usage__man(FILE *out, const char *version);

enum cp_parse_result {
	CP_PARSE_OK = 0,
	CP_PARSE_HELP = 1,
	CP_PARSE_ERROR = -1,
};

/*
 * Parses the arguments after "trace". On CP_PARSE_ERROR, error holds a
 * one-line reason. argv is not copied: options point into it.
 */
enum cp_parse_result cp_trace_options__parse(int argc, char **argv, struct cp_trace_options *opts,
					     char *error, size_t error_len);
/* The same for any command: options another command owns are refused. */
enum cp_parse_result cp_options__parse(enum cp_command command, int argc, char **argv,
				       struct cp_trace_options *opts, char *error, size_t error_len);

/* Parses a positive pid, decimal digits only (no sign, space or leading 0): 0 or -EINVAL. */
int cp_parse_pid(const char *text, pid_t *pid);
/*
 * Parses decimal digits with an optional K, M or G suffix (powers of 1024):
 * 0 or -EINVAL/-ERANGE.
 */
int cp_parse_size(const char *text, uint64_t *bytes);
/*
 * Parses decimal seconds ("2", "1.5", ".5"; no sign, exponent or hex) into
 * milliseconds, rounded, at least 1: 0 or -EINVAL (also for 0) / -ERANGE.
 */
int cp_parse_seconds(const char *text, uint64_t *ms);


#endif
