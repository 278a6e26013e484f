/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The setup and end shared by cuprobe's tracing commands (trace, stats, top). */
#ifndef CUPROBE_SESSION_H
#define CUPROBE_SESSION_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_options.h"
#include "cuprobe.h"
#include "spawn.h"

#define CP_EXIT_SETUP 1
#define CP_EXIT_USAGE 2
#define CP_EXIT_CANNOT_EXECUTE 126 /* COMMAND exists but cannot be run: as a shell says it */
#define CP_EXIT_NOT_FOUND 127

extern int cp_verbosity;
/* One line on stderr, "cuprobe: " first. */
void cp_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cp_log_to_stderr(void *ctx, enum cp_log_level level, const char *message);

struct cp_session {
	const struct cp_trace_options *opts;
	struct cp_identity identity;
	char command_path[PATH_MAX];
	struct cp_lib_set *libs;
	struct cp_lib_set *cudarts;
	struct cp_tracer *tracer;
	bool system_wide;
	struct cp_child child;
	sigset_t original_mask;
	bool mask_changed;
	int signal_fd;
	int timer_fd;
	int tick_fd;
	int pid_fds[CP_CLI_MAX_PIDS];
	size_t pid_fd_count;
	pid_t child_pid;
	int child_status;
	bool child_done;
};

/* Parses COMMAND's options: -1 to go on, else the exit code (help printed, or the error said). */
int cp_session__parse(enum cp_command command, int argc, char **argv,
		      struct cp_trace_options *opts);

/*
 * Checks everything that can be checked before touching the kernel:
 * invoking user, COMMAND, privileges, BTF, the libraries to probe.
 * Returns 0, or the exit code after saying why.
 */
int cp_session__open(struct cp_session *s, const struct cp_trace_options *opts);
/*
 * Loads and attaches the tracer and adds the -p targets. The caller fills
 * what its command needs in tracer_opts (aggregation, ...). 0 or an exit code.
 */
int cp_session__attach(struct cp_session *s, struct cp_tracer_opts *tracer_opts);
/* Starts COMMAND, if any, held until it is in the traced set: 0 or an exit code. */
int cp_session__start_command(struct cp_session *s);

struct cp_wait_hooks {
	uint64_t tick_ms;            /* call tick every tick_ms; 0 = never */
	void (*tick)(void *ctx);
	int extra_fd;                /* also watch this fd (e.g. a terminal) */
	bool (*on_extra)(void *ctx); /* true: stop waiting */
	void *ctx;
};
/* Blocks until COMMAND ends, every -p target ends, --duration passes or a signal. */
void cp_session__wait(struct cp_session *s, const struct cp_wait_hooks *hooks);
/*
 * -o FILE, created as the invoking user and never through a symlink; stdout
 * when path is NULL. NULL after saying why.
 */
FILE *cp_session__open_output(const struct cp_session *s, const char *path);
/* Flushes or closes it; a failed write turns a 0 exit code into an error. */
int cp_session__close_output(FILE *out, const char *path, int exit_code);
/* One stderr line per library file attached while tracing: delay, early processes. */
void cp_session__report_files(const struct cp_session *s);
/* COMMAND's status as a shell reports it; 0 without a command. */
int cp_session__exit_code(const struct cp_session *s);
/* Detaches and frees everything the session holds (stop the agent first). */
void cp_session__close(struct cp_session *s);

#endif
