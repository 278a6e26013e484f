/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared helpers of cuprobe's Criterion tests: processes, files, JSON lines, tmux. */
#ifndef CUPROBE_TEST_HELPERS_H
#define CUPROBE_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef CUPROBE_TEST_WITH_JSON
#include <jansson.h>
#endif

/* Fails the running test (never skips) when the test process is not root. */
void require_root(void);

/* A fresh private directory under /tmp; remove_tree() deletes it. */
char *make_tmpdir(void);
void remove_tree(const char *path);
/*
 * A tmpfs of size bytes ("64k") at a new directory, in a mount namespace of
 * the test's own (Criterion runs each test in a process of its own): it
 * goes with the test, whatever happens. small_disk_free() unmounts and
 * removes it.
 */
char *small_disk(const char *size);
void small_disk_free(char *dir);
/*
 * A copy of the file at path in a directory of root's own, kept until the
 * test process exits (one copy a path). cuprobe loads as root only a PROG
 * that nobody but root and the invoking user can change, and the tests run
 * it as root without SUDO_UID: a checkout that belongs to a user (cloned as
 * one, tested with sudo) holds programs it would refuse.
 */
const char *root_owned_copy(const char *path);
/* "dir/name", malloc'd. */
char *path_join(const char *dir, const char *name);

/* The whole file as a NUL-terminated string (malloc'd), or NULL. */
char *read_text(const char *path);
bool write_text(const char *path, const char *text);
/* Lines of text (without '\n'), the empty last piece after a final '\n' not counted. */
size_t count_lines(const char *text);

struct run_opts {
	const char *stdout_path; /* NULL: /dev/null */
	const char *stderr_path; /* NULL: /dev/null */
	char **extra_env;        /* NAME=VALUE entries added, NULL-terminated, may be NULL */
	bool as_nobody;          /* drop to uid/gid 65534 before exec */
};

/*
 * Runs argv[0] with argv, waits for it, and returns its status as a shell
 * reports it (exit code, or 128 + signal). SUDO_UID/SUDO_GID of the test's
 * own environment are never passed on. elapsed_s (may be NULL) gets the
 * wall time.
 */
int run_program(char *const argv[], const struct run_opts *opts, double *elapsed_s);

/* run_program, with the resource usage of argv's process (and the children it waited for). */
struct rusage;
int run_program_rusage(char *const argv[], const struct run_opts *opts, struct rusage *usage);

/* Starts argv as run_program does, without waiting: returns its pid. */
pid_t spawn_program(char *const argv[], const struct run_opts *opts);
/*
 * Waits for pid (a child): its status as a shell reports it; with a timeout
 * (> 0 seconds) it is killed when the time is up, and -1 is returned.
 */
int wait_program(pid_t pid, double timeout_s);
/* Polls the file at path until it contains needle: false after timeout_s seconds. */
bool wait_for_text(const char *path, const char *needle, double timeout_s);

/* The child of parent whose command name is comm, waited for up to timeout_s seconds; 0 if none. */
pid_t child_named(pid_t parent, const char *comm, double timeout_s);
/* The state letter of /proc/PID/stat ('T' stopped, 'Z' exited, not reaped), or 0 when gone. */
char process_state(pid_t pid);

/* Starts argv in the background (stdio on /dev/null); returns its pid. */
pid_t start_background(char *const argv[]);

/*
 * A real terminal for interactive programs: a tmux server of the test's own,
 * never a user's (its socket is in a private directory: tmux -S, and no
 * configuration file is read), with one detached session running a shell
 * command. Only tmux_start() fails the test (when tmux cannot run at all);
 * once the command has ended the session and the server are gone, and the
 * other functions say so by returning false or NULL. tmux_stop() kills the
 * server.
 */
struct tmux {
	char *program;          /* tmux, found on PATH */
	char *dir;              /* private: the server's socket, what tmux prints */
	char *socket;
};

/* Starts shell_command (tmux runs it with $SHELL -c) in a window of cols x rows. */
void tmux_start(struct tmux *t, int cols, int rows, const char *shell_command);
/* The visible pane as text, one line per row (malloc'd), or NULL. */
char *tmux_capture(struct tmux *t);
/* Resizes the window (the program gets SIGWINCH); true once the pane has that size. */
bool tmux_resize(struct tmux *t, int cols, int rows);
/* Sends keys by tmux's names: "q", "C-c", "Enter", "Space". */
bool tmux_send_keys(struct tmux *t, const char *keys);
/* Kills the server (and the command, by SIGHUP) and frees t; safe to call twice. */
void tmux_stop(struct tmux *t);

/* cuprobe's summary line on stderr. */
struct cuprobe_summary {
	unsigned long long delivered, lost, unnamed, launches;
};
bool parse_cuprobe_summary(const char *stderr_text, struct cuprobe_summary *out);

/*
 * The value of key=VALUE on a workload summary line ("drv_launch: pid=..."),
 * as an integer; -1 when the key is missing.
 */
long long line_value(const char *line, const char *key);
/* The nth (0-based) line of text that starts with prefix, malloc'd, or NULL. */
char *find_line(const char *text, const char *prefix, int nth);

uint64_t parse_hex(const char *text);

/* Option names ("--json", "-p") that a text lists, each once. */
#define OPTION_LIST_MAX 64

struct option_list {
	char names[OPTION_LIST_MAX][32];
	size_t count;
};

bool option_list_has(const struct option_list *l, const char *name);
/* Adds every "-x" and "--long-name" token of text. */
void scan_options(const char *text, struct option_list *l);
/* Adds the option labels of a --help text ("  -p, --pid PID", "      --json"), not their help. */
void help_text_options(const char *help, struct option_list *l);
/*
 * Adds the options of the man page's section under heading (".SH OPTIONS",
 * to the next .SH or .SS): the line after each .TP, with the \- and \f
 * escapes removed. false when there is no such section.
 */
bool man_section_options(const char *man, const char *heading, struct option_list *l);

#ifdef CUPROBE_TEST_WITH_JSON
/* Every line of path parsed as a JSON object into an array; fails the test on a bad line. */
json_t *load_json_lines(const char *path);
/* Field helpers that fail the test when the field is missing or of the wrong type. */
const char *jstr(json_t *obj, const char *key);
long long jint(json_t *obj, const char *key);
uint64_t jhex(json_t *obj, const char *key);
/* Number of events in arr whose "type" is type (and, when api is not NULL, "api" is api). */
size_t count_events(json_t *arr, const char *type, const char *api);
/* Checks that a JSON array field holds exactly the three integers a, b, c. */
bool jdims_equal(json_t *obj, const char *key, long long a, long long b, long long c);
#endif

#endif
