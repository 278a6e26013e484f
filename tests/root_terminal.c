// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe in a real terminal (tmux, detached windows of the test's own):
 *  - `cuprobe top` resized while drv_launch runs on the simulated driver must
 *    live through every size (it crashed in 12x3 and 25x3: ncurses' printw
 *    formats into a buffer sized from the largest screen seen, so the first
 *    sizes are the small ones), show the workload at a normal size, and
 *    exit 0 on `q`;
 *  - `cuprobe top` started after a process made its launches' handles:
 *    the TOP KERNEL column names the kernel all the same;
 *  - `cuprobe trace -- COMMAND` and Ctrl-C: one press reaches COMMAND once
 *    (the terminal signals the whole group; cuprobe must not pass it on
 *    again), a second press stops cuprobe at once with 130.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"

#define INTERVAL_S 0.2

struct top_run {
	struct tmux tmux;
	char *dir;
	char *pid_path;    /* cuprobe's pid, written by the shell that execs it */
	char *status_path; /* "exit=N" once cuprobe has ended (N: 128+signal when killed) */
	char *err_path;    /* cuprobe's stderr */
	char *workload_dir; /* the workload's own files, when it has any */
	pid_t cuprobe;
	pid_t workload;
};

static struct top_run run;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double seconds)
{
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };

	while (nanosleep(&ts, &ts))
		;
}

/*
 * The pane runs a shell that starts cuprobe through a second shell: that one
 * writes its pid and execs cuprobe (so the pid is cuprobe's), and the first
 * writes cuprobe's exit status when it ends.
 */
static void start_top(int cols, int rows, const char *options)
{
	char *script, *command = NULL, *pid;
	FILE *file;

	require_root();
	run.dir = make_tmpdir();
	run.pid_path = path_join(run.dir, "pid");
	run.status_path = path_join(run.dir, "status");
	run.err_path = path_join(run.dir, "stderr");
	script = path_join(run.dir, "top.sh");
	file = fopen(script, "we");
	cr_assert_not_null(file);
	fprintf(file, "sh -c 'echo $$ > \"$0\"; exec \"$@\"' '%s' \\\n", run.pid_path);
	fprintf(file, "\t'%s' top --interval %.1f --lib '%s' %s 2> '%s'\n", CUPROBE_BIN, INTERVAL_S,
		CUDA_SIM_LIB, options, run.err_path);
	fprintf(file, "echo \"exit=$?\" > '%s'\n", run.status_path);
	cr_assert_eq(fclose(file), 0);
	cr_assert(asprintf(&command, "sh '%s'", script) > 0);
	tmux_start(&run.tmux, cols, rows, command);
	free(command);
	free(script);
	cr_assert(wait_for_text(run.pid_path, "\n", 10), "cuprobe top did not start in tmux");
	pid = read_text(run.pid_path);
	run.cuprobe = (pid_t)strtol(pid, NULL, 10);
	free(pid);
	cr_assert_gt(run.cuprobe, 0);
}

static void stop_all(void)
{
	if (run.workload > 0) {
		kill(run.workload, SIGKILL);
		wait_program(run.workload, 0);
	}
	tmux_stop(&run.tmux);
	remove_tree(run.dir);
	free(run.dir);
	if (run.workload_dir)
		remove_tree(run.workload_dir);
	free(run.workload_dir);
	free(run.pid_path);
	free(run.status_path);
	free(run.err_path);
	memset(&run, 0, sizeof(run));
}

/* Running, neither ended (the status file) nor a zombie waiting to be reaped. */
static bool cuprobe_alive(void)
{
	char path[64], *stat, *state;
	bool alive;

	if (!access(run.status_path, F_OK) || kill(run.cuprobe, 0))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)run.cuprobe);
	stat = read_text(path);
	state = stat ? strrchr(stat, ')') : NULL;
	alive = state && state[1] == ' ' && state[2] != 'Z' && state[2] != 'X';
	free(stat);
	return alive;
}

static void assert_alive(const char *when)
{
	char *status, *err;

	if (cuprobe_alive())
		return;
	wait_for_text(run.status_path, "\n", 3); /* let the shell write the status */
	status = read_text(run.status_path);
	err = read_text(run.err_path);
	cr_assert_fail("cuprobe top (pid %d) died %s: %s; its stderr: %s", (int)run.cuprobe, when,
		       status ? strtok(status, "\n") : "no exit status written",
		       err ? err : "(none)");
}

/* Polls the pane until it shows every needle (NULL-terminated); the last capture, or NULL. */
static char *wait_for_pane(const char *const *needles, double timeout_s, const char *when)
{
	double deadline = now_s() + timeout_s;
	char *text = NULL;

	for (;;) {
		size_t i;

		assert_alive(when);
		free(text);
		text = tmux_capture(&run.tmux);
		for (i = 0; text && needles[i] && strstr(text, needles[i]); i++)
			;
		if (text && !needles[i])
			return text;
		if (now_s() > deadline)
			return text;
		sleep_s(0.1);
	}
}

/* Every line of a capture fits in cols, and there are no more than rows of them. */
static void assert_fits(const char *text, int cols, int rows)
{
	const char *line = text;
	int count = 0;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		cr_assert_leq(len, (size_t)cols, "a %zu-column line in a %dx%d pane: %.*s", len,
			      cols, rows, (int)len, line);
		count++;
		line = end ? end + 1 : NULL;
	}
	cr_assert_leq(count, rows, "%d lines in a %dx%d pane", count, cols, rows);
}

/* At a normal size: the title and the workload's own row (its pid, then its name). */
static void assert_shows_workload(int cols, int rows)
{
	char row[64], when[64], *text;
	const char *needles[] = { "cuprobe top - ", "    PID COMMAND", row, NULL };

	snprintf(row, sizeof(row), "%7d drv_launch ", (int)run.workload);
	snprintf(when, sizeof(when), "at %dx%d", cols, rows);
	text = wait_for_pane(needles, 10, when);
	cr_assert_not_null(text, "no capture of the pane at %dx%d", cols, rows);
	cr_assert(strstr(text, needles[0]) && strstr(text, needles[1]) && strstr(text, row),
		  "at %dx%d the pane does not show the header and drv_launch's row (\"%s\"):\n%s",
		  cols, rows, row, text);
	assert_fits(text, cols, rows);
	free(text);
}

/* A size too small for the header: the title cut to the width, nothing past the pane. */
static void assert_small(int cols, int rows)
{
	char title[16], when[64], *text;
	const char *needles[] = { title, NULL };
	int shown = cols < 11 ? cols : 11;

	/* The last row never gets its last column: a one-row pane shows one column less. */
	if (rows == 1)
		shown = cols - 1 < 11 ? cols - 1 : 11;
	snprintf(title, sizeof(title), "%.*s", shown, "cuprobe top");
	snprintf(when, sizeof(when), "at %dx%d", cols, rows);
	text = wait_for_pane(needles, 5, when);
	cr_assert_not_null(text, "no capture of the pane at %dx%d", cols, rows);
	cr_assert(!strncmp(text, title, strlen(title)),
		  "at %dx%d the pane does not start with \"%s\":\n%s", cols, rows, title, text);
	assert_fits(text, cols, rows);
	free(text);
}

Test(top, survives_every_terminal_size_and_quits_on_q, .fini = stop_all, .timeout = 150)
{
	/* Small first: that is when ncurses' printw buffer was smaller than a line. */
	static const struct {
		int cols, rows;
		bool normal;
	} sizes[] = {
		{ 25, 3 }, { 1, 1 }, { 12, 3 }, { 25, 3 }, { 80, 24, true }, { 200, 50, true },
		{ 25, 3 }, { 12, 3 }, { 1, 1 }, { 3, 2 }, { 40, 1 }, { 80, 24, true },
	};
	char *const workload[] = { DRV_LAUNCH, "100000000", NULL };
	const char *title[] = { "cuprobe top", NULL };
	char *text, *status;
	size_t i;

	start_top(12, 3, "");
	/* Drawn once attached: the title, cut to 12 columns. */
	text = wait_for_pane(title, 60, "while attaching at 12x3");
	cr_assert(text && strstr(text, "cuprobe top"), "top drew nothing at 12x3: %s", text);
	free(text);
	/* Runs for longer than the test: killed at the end. */
	run.workload = start_background(workload);
	sleep_s(5 * INTERVAL_S);
	assert_alive("at 12x3 with the workload running");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int cols = sizes[i].cols, rows = sizes[i].rows;
		char when[64];
		bool resized = tmux_resize(&run.tmux, cols, rows);

		snprintf(when, sizeof(when), "after a resize to %dx%d", cols, rows);
		sleep_s(3 * INTERVAL_S);
		assert_alive(when);
		cr_assert(resized, "tmux could not resize the window to %dx%d", cols, rows);
		if (sizes[i].normal)
			assert_shows_workload(cols, rows);
		else
			assert_small(cols, rows);
		assert_alive(when);
	}
	cr_assert_eq(kill(run.workload, 0), 0, "drv_launch ended before the test did");

	cr_assert(tmux_send_keys(&run.tmux, "q"));
	cr_assert(wait_for_text(run.status_path, "\n", 10),
		  "cuprobe top did not exit within 10 s of q");
	status = read_text(run.status_path);
	cr_assert_str_eq(status, "exit=0\n", "cuprobe top ended with %s", status);
	free(status);
}

/*
 * A process attached late: it loaded its module and got its function before
 * top started, so no probe saw the name; top must still name the kernel
 * (from the driver's own record of the function, in the process's memory),
 * never "<unnamed function 0x...>".
 */
Test(top, names_the_kernels_of_a_process_that_started_launching_before_it,
     .fini = stop_all, .timeout = 120)
{
	/* 60000 launches 1 ms apart: running for the whole test, killed at its end. */
	char *workload[] = { DRV_LAUNCH, "60000", "--host-us", "1000", NULL };
	char env_line[512], *env[] = { env_line, NULL }, row[64], *truth, *text, *line, *end;
	const char *needles[] = { row, "vec_add", NULL };
	struct run_opts o = { .extra_env = env };

	require_root();
	run.workload_dir = make_tmpdir();
	truth = path_join(run.workload_dir, "timeline");
	/* The simulated driver writes a line per launch there: proof it is launching. */
	snprintf(env_line, sizeof(env_line), "CUDA_SIM_TIMELINE=%s", truth);
	run.workload = spawn_program(workload, &o);
	cr_assert(wait_for_text(truth, "kernel pid=", 20), "drv_launch did not start launching");
	free(truth);

	start_top(120, 30, "");
	snprintf(row, sizeof(row), "%7d drv_launch ", (int)run.workload);
	text = wait_for_pane(needles, 30, "attached to a running drv_launch");
	cr_assert_not_null(text, "no capture of the pane");
	line = strstr(text, row);
	cr_assert_not_null(line, "top shows no row for drv_launch (\"%s\"):\n%s", row, text);
	end = line + strcspn(line, "\n");
	while (end > line && end[-1] == ' ')
		end--;
	*end = '\0';
	cr_assert(strlen(line) > 9 && !strcmp(line + strlen(line) - 9, "  vec_add"),
		  "drv_launch's TOP KERNEL is not vec_add: \"%s\"", line);
	cr_assert_eq(kill(run.workload, 0), 0, "drv_launch ended before the test did");
	free(text);
}

/* The line of py_launch.py that ends with "  # @MARKER" (its only one). */
static int marked_line(const char *marker)
{
	char *text = read_text(PY_LAUNCH), *at, *line;
	char needle[64];
	int number = 1;

	cr_assert_not_null(text, "cannot read %s", PY_LAUNCH);
	snprintf(needle, sizeof(needle), "  # @%s\n", marker);
	at = strstr(text, needle);
	cr_assert_not_null(at, "no %s in %s", needle, PY_LAUNCH);
	for (line = text; line < at; line++)
		number += *line == '\n';
	free(text);
	return number;
}

/* The sanitizer build's simulated driver needs its runtime loaded first in the interpreter. */
#ifdef ASAN_RUNTIME
#define PYTHON_ENV "/usr/bin/env", "LD_PRELOAD=" ASAN_RUNTIME, "ASAN_OPTIONS=detect_leaks=0",
#else
#define PYTHON_ENV
#endif
#define WORKLOAD_ARGS (sizeof(workload) / sizeof(workload[0]))

/*
 * --python: a Python process (py_launch.py through ctypes on the simulated
 * driver, launching from one line in a loop, started before top) shows that
 * line in its PYTHON LINE column; a 40-column pane still fits.
 */
Test(top, python_shows_the_line_of_the_last_launch, .fini = stop_all, .timeout = 120)
{
	/* Launches from @rate-launch for longer than the test: killed at its end. */
	char *workload[] = { PYTHON_ENV PYTHON_BIN, PY_LAUNCH, CUDA_SIM_LIB, "1000000000", "--rate",
			     "--depth", "0", "--wait-file", NULL, NULL };
	char line_text[64], row[64], *text, *line, *end, *out, *go;
	const char *needles[] = { row, line_text, NULL };
	struct run_opts o = { 0 };

	require_root();
	run.workload_dir = make_tmpdir();
	out = path_join(run.workload_dir, "out");
	go = path_join(run.workload_dir, "go");
	o.stdout_path = out;
	workload[WORKLOAD_ARGS - 2] = go;
	run.workload = spawn_program(workload, &o);
	cr_assert_gt(run.workload, 0);
	/* Its driver set up before top starts: top finds it as a running CUDA process. */
	cr_assert(wait_for_text(out, "py_launch: ready", 30), "py_launch.py did not start");
	cr_assert(write_text(go, ""), "cannot write %s", go);

	start_top(160, 30, "--python");
	snprintf(row, sizeof(row), "%7d ", (int)run.workload);
	snprintf(line_text, sizeof(line_text), "py_launch.py:%d ", marked_line("rate-launch"));
	text = wait_for_pane(needles, 30, "attached to a running py_launch.py");
	cr_assert_not_null(text, "no capture of the pane");
	cr_assert(strstr(text, "PYTHON LINE"), "no PYTHON LINE column:\n%s", text);
	line = strstr(text, row);
	cr_assert_not_null(line, "top shows no row for py_launch.py (\"%s\"):\n%s", row, text);
	end = line + strcspn(line, "\n");
	*end = '\0';
	cr_assert(strstr(line, line_text), "py_launch.py's row does not show %s: \"%s\"", line_text,
		  line);
	cr_assert(strstr(line, "vec_add"), "py_launch.py's row has no kernel: \"%s\"", line);
	free(text);

	cr_assert(tmux_resize(&run.tmux, 40, 20), "tmux could not resize the window to 40x20");
	sleep_s(3 * INTERVAL_S);
	/* PID and COMMAND still fit in 40 columns; the rest is cut. */
	snprintf(row, sizeof(row), "%7d python", (int)run.workload);
	needles[1] = NULL;
	text = wait_for_pane(needles, 10, "at 40x20");
	cr_assert(text && strstr(text, row), "at 40x20 no row for py_launch.py:\n%s", text);
	assert_fits(text, 40, 20);
	free(text);
	assert_alive("at 40x20");
	cr_assert_eq(kill(run.workload, 0), 0, "py_launch.py ended before the test did");
	free(out);
	free(go);
}

/*
 * No terminal top can drive is bad usage, whichever way: no terminal at all,
 * or one whose TERM ncurses does not know (that exited 1 after loading the
 * probes, the other 2 before).
 */
Test(top, no_usable_terminal_is_bad_usage_either_way, .timeout = 60)
{
	char *argv[] = { CUPROBE_BIN, "top", NULL };
	char *dir = make_tmpdir(), *status_path = path_join(dir, "status");
	char *err_path = path_join(dir, "stderr"), *command = NULL, *text;
	struct run_opts opts = { .stderr_path = err_path };
	struct tmux t;

	require_root();
	cr_assert_eq(run_program(argv, &opts, NULL), 2);
	text = read_text(err_path);
	cr_assert(strstr(text, "top needs a terminal"), "%s", text);
	free(text);
	cr_assert(asprintf(&command, "TERM=bogus '%s' top 2> '%s'; echo \"exit=$?\" > '%s'",
			   CUPROBE_BIN, err_path, status_path) > 0);
	tmux_start(&t, 80, 24, command);
	cr_assert(wait_for_text(status_path, "\n", 30), "top with TERM=bogus did not end");
	tmux_stop(&t);
	text = read_text(status_path);
	cr_assert_str_eq(text, "exit=2\n");
	free(text);
	text = read_text(err_path);
	cr_assert(strstr(text, "cannot drive this terminal (TERM=bogus)"), "%s", text);
	cr_assert_eq(count_lines(text), 1, "%s", text);
	free(text);
	free(command);
	free(status_path);
	free(err_path);
	remove_tree(dir);
	free(dir);
}

/* ---- Ctrl-C in a terminal: cuprobe trace -- COMMAND in the foreground ---------------- */

struct trace_run {
	struct tmux tmux;
	char *dir;
	char *status_path;  /* "exit=N" once cuprobe ended */
	char *err_path;
	char *count_path;   /* one line per SIGINT COMMAND received */
	char *ready_path;   /* COMMAND is running */
	char *command_pid_path;
};

static struct trace_run trace;

/*
 * The pane's shell runs cuprobe in the foreground (so Ctrl-C reaches the
 * whole group: the shell, cuprobe, COMMAND); the shell survives it with a
 * handler (a handler, unlike SIG_IGN, is not inherited) and writes
 * cuprobe's exit status. COMMAND counts the SIGINTs it gets and keeps
 * running, or, with dies, is drv_launch and dies of the first.
 */
static void start_trace(bool dies)
{
	char *script, *command = NULL;
	FILE *file;

	require_root();
	memset(&trace, 0, sizeof(trace));
	trace.dir = make_tmpdir();
	trace.status_path = path_join(trace.dir, "status");
	trace.err_path = path_join(trace.dir, "stderr");
	trace.count_path = path_join(trace.dir, "count");
	trace.ready_path = path_join(trace.dir, "ready");
	trace.command_pid_path = path_join(trace.dir, "command.pid");
	script = path_join(trace.dir, "trace.sh");
	file = fopen(script, "we");
	cr_assert_not_null(file);
	fprintf(file, "trap ':' INT\n");
	if (dies)
		fprintf(file, "'%s' trace -v -o /dev/null -- '%s' 100000000 2> '%s'\n", CUPROBE_BIN,
			DRV_LAUNCH, trace.err_path);
	else
		/*
		 * perl counts every delivery (its handler runs once per signal
		 * received, where a shell's trap folds close ones together).
		 */
		fprintf(file,
			"'%s' trace -v -o /dev/null -- perl -e '"
			"open(my $p, \">\", $ARGV[0]); print $p \"$$\\n\"; close $p; "
			"$SIG{INT} = sub { open(my $c, \">>\", $ARGV[1]); print $c \"sigint\\n\"; close $c; }; "
			"open(my $r, \">\", $ARGV[2]); print $r \"\\n\"; close $r; "
			"sleep 1 while 1;' '%s' '%s' '%s' 2> '%s'\n",
			CUPROBE_BIN, trace.command_pid_path, trace.count_path, trace.ready_path,
			trace.err_path);
	fprintf(file, "echo \"exit=$?\" > '%s'\nsleep 600\n", trace.status_path);
	cr_assert_eq(fclose(file), 0);
	cr_assert(asprintf(&command, "sh '%s'", script) > 0);
	tmux_start(&trace.tmux, 120, 30, command);
	free(command);
	free(script);
	cr_assert(wait_for_text(trace.err_path, "tracing (", 30), "cuprobe trace did not start");
	if (!dies)
		cr_assert(wait_for_text(trace.ready_path, "\n", 10), "COMMAND did not start");
}

static void stop_trace(void)
{
	char *pid = read_text(trace.command_pid_path);

	if (pid)
		kill((pid_t)strtol(pid, NULL, 10), SIGKILL); /* left running by design */
	free(pid);
	tmux_stop(&trace.tmux);
	remove_tree(trace.dir);
	free(trace.dir);
	free(trace.status_path);
	free(trace.err_path);
	free(trace.count_path);
	free(trace.ready_path);
	free(trace.command_pid_path);
}

static size_t sigints_received(void)
{
	char *text = read_text(trace.count_path);
	size_t n = text ? count_lines(text) : 0;

	free(text);
	return n;
}

static void assert_exit(const char *want, double within_s)
{
	char *status, *err;

	cr_assert(wait_for_text(trace.status_path, "\n", within_s), "cuprobe did not exit within %.1f s",
		  within_s);
	status = read_text(trace.status_path);
	err = read_text(trace.err_path);
	cr_assert_str_eq(status, want, "cuprobe ended with %s; stderr:\n%s", status, err);
	free(status);
	free(err);
}

Test(ctrl_c, one_press_reaches_the_command_once, .fini = stop_trace, .timeout = 120)
{
	start_trace(false);
	cr_assert(tmux_send_keys(&trace.tmux, "C-c"));
	/* The grace period passes: cuprobe stops, COMMAND (which survives SIGINT) runs on. */
	assert_exit("exit=130\n", 5);
	sleep_s(0.3);
	cr_assert_eq(sigints_received(), 1, "COMMAND got %zu SIGINTs for one Ctrl-C",
		     sigints_received());
	cr_assert(wait_for_text(trace.err_path, "keeps running", 1));
}

Test(ctrl_c, a_second_press_stops_at_once_and_exits_130, .fini = stop_trace, .timeout = 120)
{
	struct timespec start, end;

	start_trace(false);
	clock_gettime(CLOCK_MONOTONIC, &start);
	cr_assert(tmux_send_keys(&trace.tmux, "C-c"));
	cr_assert(tmux_send_keys(&trace.tmux, "C-c"));
	assert_exit("exit=130\n", 5);
	clock_gettime(CLOCK_MONOTONIC, &end);
	cr_assert_lt((end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9, 1.0,
		     "two Ctrl-C took longer than a second to stop cuprobe");
	sleep_s(0.3);
	cr_assert_eq(sigints_received(), 2, "COMMAND got %zu SIGINTs for two Ctrl-C",
		     sigints_received());
}

Test(ctrl_c, a_command_that_dies_of_it_gives_its_status, .fini = stop_trace, .timeout = 120)
{
	start_trace(true);
	cr_assert(tmux_send_keys(&trace.tmux, "C-c"));
	/* drv_launch dies of SIGINT: 128 + 2, its status as a shell reports it. */
	assert_exit("exit=130\n", 5);
	cr_assert(!wait_for_text(trace.err_path, "keeps running", 0.2),
		  "COMMAND died: nothing keeps running");
}
