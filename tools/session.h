/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A tracing session, shared by cuprobe's tracing commands (trace, stats,
 * top): privileges, COMMAND, discovery, the tracer, the GPU agent with the
 * name table and symbolizer it feeds, the output, the wait for the end
 * (COMMAND's tree, -p targets, --duration, signals) and the exit status.
 */
#ifndef CUPROBE_SESSION_H
#define CUPROBE_SESSION_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_options.h"
#include "cuprobe_internal.h"
#include "output_file.h"
#include "spawn.h"
#include "stall_watch.h"

#define CP_EXIT_SETUP 1
#define CP_EXIT_USAGE 2
#define CP_EXIT_CANNOT_EXECUTE 126 /* COMMAND exists but cannot be run: as a shell says it */
#define CP_EXIT_NOT_FOUND 127

/* After a stop request, how long COMMAND has to end before cuprobe stops anyway. */
#define CP_STOP_GRACE_MS 500

extern int cp_verbosity;
/* One line on stderr, "cuprobe: " first. */
void cp_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cp_log_to_stderr(void *ctx, enum cp_log_level level, const char *message);
/*
 * What is wrong with a file the user named, from the library's error:
 * "not a regular file", "not an ELF file", "a truncated or damaged ELF
 * file", or strerror's words.
 */
const char *cp_file_problem(int err);

/* Why the wait ended. */
enum cp_end {
	CP_END_TARGETS,   /* COMMAND's tree (or COMMAND) ended, or every -p target */
	CP_END_DURATION,  /* --duration passed */
	CP_END_SIGNAL,    /* a stop was asked by a signal */
	CP_END_HOOK,      /* the caller's hook asked (top's q) */
	CP_END_OUTPUT,    /* the output cannot be written any more */
};

struct cp_session {
	const struct cp_common_options *opts;
	struct cp_identity identity;          /* the invoking user: outputs, PROG */
	struct cp_identity command_identity;  /* COMMAND's: root with --run-as-root */
	char command_path[PATH_MAX];
	struct cp_lib_set *libs;
	struct cp_lib_set *cudarts;
	struct cp_lib_set *nccls;  /* libnccl files found at the start */
	bool runtime;              /* cp_session__probe_runtime: cudaLaunchKernel probed too */
	const char *const *cudart_paths; /* --cudart: the files the user named for it */
	size_t cudart_count;
	struct cp_tracer *tracer;
	bool system_wide;
	/* What the agent feeds and the commands read. */
	struct cp_symbolizer *symbolizer;
	struct cp_names *names;
	struct cp_python *python;   /* --python; NULL when not asked */
	struct cp_agent *agent;
	struct cp_output output;
	struct cp_output perfetto;  /* --perfetto FILE; its stream NULL when not asked */
	const char *perfetto_path;  /* that FILE: set by the command before attach */
	/* COMMAND and the end. */
	struct cp_child child;
	pid_t child_pid;
	int child_status;
	bool child_done;
	sigset_t original_mask;
	bool mask_changed;
	int signal_fd;
	int timer_fd;
	int tick_fd;
	int grace_fd;
	int stop_fd;           /* eventfd: a stop asked from another thread (output failed) */
	int pid_fds[CP_CLI_MAX_PIDS];
	size_t pid_fd_count;
	enum cp_end end;
	int stop_signal;       /* the signal that asked for the stop, if any */
	/*
	 * cuprobe run: the user's object, loaded between the tracer's open and
	 * its attach. Set by run before attach.
	 */
	const char *program_name;
	bool program_load_only;    /* run --ptx: PROG loaded for the verifier, nothing attached */
	const void *program_elf;
	size_t program_size;
	const char *const *program_settings; /* --set NAME=VALUE */
	size_t program_setting_count;
	struct cp_program *program;
	/* cuprobe run with device programs: what COMMAND inherits besides (set before its start). */
	const struct cp_child_extras *command_extras;
	/* More rings the agent consumes (a user's program's), set before the agent starts. */
	struct cp_session_ring *rings;
	size_t ring_count;
	/* From the agent's start to the outputs' close: ends writes blocked at a stop. */
	struct cp_stall_watch *stall_watch;
};

struct cp_session_ring {
	int fd;
	cp_record_fn on_record;
	void *ctx;
};

/*
 * Checks everything that can be checked before touching the kernel:
 * invoking user, COMMAND, privileges, BTF, the libraries to probe.
 * Returns 0, or the exit code after saying why.
 */
int cp_session__open(struct cp_session *s, const struct cp_common_options *opts);
/*
 * cuprobe trace --runtime: cudaLaunchKernel is probed too, in these files
 * (--cudart) and in those found for the targets. Between open and attach.
 * 0, or 2 when a --cudart PATH is not a file to read (said).
 */
int cp_session__probe_runtime(struct cp_session *s, const char *const *paths, size_t count);
/*
 * Loads and attaches the tracer, adds the -p targets and opens the output
 * (-o FILE as a temporary file until the start is known good). The caller
 * fills what its command needs in tracer_opts (aggregation, ...).
 * 0 or an exit code.
 */
int cp_session__attach(struct cp_session *s, struct cp_tracer_opts *tracer_opts);
/* Starts the GPU agent calling on_event: 0 or an exit code. */
int cp_session__start_agent(struct cp_session *s, cp_event_fn on_event, void *ctx);
/*
 * Starts COMMAND, if any, held until it is in the traced set, then makes
 * the output file final: 0 or an exit code.
 */
int cp_session__start_command(struct cp_session *s);

struct cp_wait_hooks {
	uint64_t tick_ms;            /* call tick every tick_ms; 0 = never */
	void (*tick)(void *ctx);
	int extra_fd;                /* also watch this fd (e.g. a terminal) */
	bool (*on_extra)(void *ctx); /* true: stop waiting */
	void *ctx;
};
/*
 * Blocks until the targets end (COMMAND's whole tree, or COMMAND alone with
 * --exit-with-command; every -p target), --duration passes, the output
 * fails or a stop is asked. A first SIGINT/SIGTERM/SIGHUP is passed on to
 * COMMAND (unless it came from the terminal, which signalled COMMAND's
 * process group itself); if COMMAND has not ended CP_STOP_GRACE_MS later,
 * or a second one comes, tracing stops and COMMAND is left running.
 */
void cp_session__wait(struct cp_session *s, const struct cp_wait_hooks *hooks);
/* Asks the wait to end: async-signal-safe, from any thread (a write to an eventfd). */
void cp_session__request_stop(struct cp_session *s);
/* Notes a failed write to the output and ends the wait. */
void cp_session__output_failed(struct cp_session *s, int err);
/*
 * Writes what text holds to out, the output or the --perfetto file (then
 * flushes, if asked): false, the session stopping, when the write failed or
 * text could not be made whole (out of memory).
 */
bool cp_session__write_text(struct cp_session *s, struct cp_output *out, const struct cp_text *text,
			    bool flush);

/*
 * --python: what the resolver could not do, a line each on stderr (the
 * walker's own losses are counters: cp_warnings__print says them).
 */
void cp_session__warn_python(const struct cp_session *s);
/* Stops the agent: every record committed so far is delivered. */
void cp_session__stop_agent(struct cp_session *s);
/*
 * A command's run, once COMMAND has started: says what it does (when
 * verbose, "DOING (N probes, M links); Ctrl-C stops"; doing_format NULL says
 * nothing), waits (cp_session__wait) and stops the agent.
 */
void cp_session__run(struct cp_session *s, const struct cp_wait_hooks *hooks, const char *doing_format, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * The files probed while tracing ran: a line each on stderr, and in the
 * output what the format writes of them (JSON: a "driver_file" record each;
 * a failed write stops the session).
 */
void cp_session__report_files(struct cp_session *s, enum cp_format format);
/* What the BPF side and the agent could not record: a line each on stderr (warnings.c's table). */
void cp_session__warn_losses(const struct cp_session *s);
/*
 * Says what is left running and returns the exit status: COMMAND's status
 * as a shell reports it when it ended; 128+N when signal N stopped tracing
 * before it ended; 1 when the output could not be written; else 0.
 */
int cp_session__finish(struct cp_session *s);
/* Detaches and frees everything the session holds (the agent is stopped first). */
void cp_session__close(struct cp_session *s);

#endif
