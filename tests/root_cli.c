// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The command line as a user meets it, as root with the real cuprobe and the
 * simulated driver: exit statuses after write errors, output files a failed
 * start leaves alone, stops asked from a script, a command's whole tree,
 * late-attached names in stats, bad input.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <criterion/criterion.h>

#include "helpers.h"

struct run {
	char *dir;
	char *out;
	char *err;
	char *out_text;
	char *err_text;
	int status;
	double elapsed;
};

static void run_init(struct run *r)
{
	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->out = path_join(r->dir, "stdout.txt");
	r->err = path_join(r->dir, "stderr.txt");
}

static void run_free(struct run *r)
{
	remove_tree(r->dir);
	free(r->dir);
	free(r->out);
	free(r->err);
	free(r->out_text);
	free(r->err_text);
}

static void run_argv(struct run *r, char **argv)
{
	struct run_opts o = { .stdout_path = r->out, .stderr_path = r->err };

	r->status = run_program(argv, &o, &r->elapsed);
	r->out_text = read_text(r->out);
	r->err_text = read_text(r->err);
	cr_assert_not_null(r->out_text);
	cr_assert_not_null(r->err_text);
}

/* Runs `sh -c script` (for redirections a test needs). */
static void run_shell(struct run *r, const char *script)
{
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };

	run_argv(r, argv);
}

/* ---- 1. write errors reach the exit status ------------------------------------ */

Test(write_errors, trace_to_a_full_file_exits_1_whatever_the_command_did, .timeout = 120)
{
	const char *sizes[] = { "3", "2000" };
	size_t i;

	for (i = 0; i < 2; i++) {
		char *argv[] = { CUPROBE_BIN, "trace", "-o", "/dev/full", "--", DRV_LAUNCH,
				 (char *)sizes[i], NULL };
		struct run r;

		run_init(&r);
		run_argv(&r, argv);
		cr_assert_eq(r.status, 1, "drv_launch %s: exit %d; stderr:\n%s", sizes[i], r.status,
			     r.err_text);
		cr_assert_not_null(strstr(r.err_text, "cannot write /dev/full: No space left on device"),
				   "%s", r.err_text);
		run_free(&r);
	}
}

Test(write_errors, trace_to_a_full_stdout_exits_1, .timeout = 120)
{
	char script[1024];
	struct run r;

	run_init(&r);
	snprintf(script, sizeof(script), "'%s' trace -- '%s' 3 > /dev/full", CUPROBE_BIN, DRV_LAUNCH);
	run_shell(&r, script);
	cr_assert_eq(r.status, 1, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "cannot write standard output"), "%s", r.err_text);
	run_free(&r);
}

Test(write_errors, stats_to_a_full_file_exits_1_with_a_message, .timeout = 120)
{
	char *argv[] = { CUPROBE_BIN, "stats", "-o", "/dev/full", "--", DRV_LAUNCH, "100", NULL };
	struct run r;

	run_init(&r);
	run_argv(&r, argv);
	cr_assert_eq(r.status, 1, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "cannot write /dev/full"), "%s", r.err_text);
	run_free(&r);
}

/* The file at path ends with a whole line of its kind (JSON: an object; text: a record line). */
static void assert_ends_whole(const char *path, bool json)
{
	char *text = read_text(path), *last;
	size_t len;

	cr_assert_not_null(text, "%s not written", path);
	len = strlen(text);
	cr_assert_gt(len, 4096, "%s: only %zu bytes before the disk was full", path, len);
	cr_assert_eq(text[len - 1], '\n', "%s ends inside a record: ...%s", path,
		     text + (len > 80 ? len - 80 : 0));
	text[len - 1] = '\0';
	last = strrchr(text, '\n') ? strrchr(text, '\n') + 1 : text;
	if (json) {
		json_error_t error;
		json_t *record = json_loads(last, 0, &error);

		cr_assert_not_null(record, "%s: last line not JSON (%s): %s", path, error.text, last);
		cr_assert(json_is_string(json_object_get(record, "type")), "%s", last);
		json_decref(record);
	} else {
		double time;
		int pid, tid, end = 0;

		/* "    0.004972   17403   17404 cuLaunchKernel ... stream=0x7f447ed11320" */
		cr_assert(sscanf(last, "%lf %d %d %*s%n", &time, &pid, &tid, &end) == 3 && end,
			  "%s: last line not a record: %s", path, last);
	}
	free(text);
}

/* A full disk ends the output at a record: never part of one. */
Test(write_errors, a_full_disk_leaves_whole_records_only, .timeout = 180)
{
	static const struct {
		const char *options, *file, *message;
		bool json, on_stdout;
	} cases[] = {
		{ "trace --json -o", "trace.json", "cannot write %s: No space left on device", true },
		{ "trace -o", "trace.txt", "cannot write %s: No space left on device", false },
		{ "trace --json >", "stdout.json", "cannot write standard output: No space left on device", true, true },
		{ "run @ --set min_us=0 --json -o", "run.json",
		  "cannot write %s: No space left on device", true },
	};
	char *disk, *path, script[2048], message[512], options[1024];
	const char *at;
	size_t i;

	require_root();
	disk = small_disk("64k");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;

		run_init(&r);
		path = path_join(disk, cases[i].file);
		/* "@": the example, as a file of root's (see root_owned_copy). */
		at = strchr(cases[i].options, '@');
		if (at)
			snprintf(options, sizeof(options), "%.*s'%s'%s", (int)(at - cases[i].options),
				 cases[i].options, root_owned_copy(EXAMPLES_DIR "/slow_syncs.bpf.c"),
				 at + 1);
		else
			snprintf(options, sizeof(options), "%s", cases[i].options);
		snprintf(script, sizeof(script), "'%s' %s '%s' -- '%s' 5000 --sync-every 1%s",
			 CUPROBE_BIN, options, path, DRV_LAUNCH,
			 cases[i].on_stdout ? "" : " > /dev/null");
		run_shell(&r, script);
		cr_assert_eq(r.status, 1, "%s: exit %d: %s", cases[i].options, r.status, r.err_text);
		snprintf(message, sizeof(message), cases[i].message, path);
		cr_assert(strstr(r.err_text, message), "%s: %s", cases[i].options, r.err_text);
		assert_ends_whole(path, cases[i].json);
		unlink(path);
		free(path);
		run_free(&r);
	}
	small_disk_free(disk);
}

/* argv with its stdout a pipe whose reader has gone: its status; its stderr in *err_text. */
static int run_into_closed_pipe(char **argv, const char *err_path, char **err_text)
{
	int fds[2], status, err_fd;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	close(fds[0]);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (err_fd < 0 || dup2(fds[1], STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
			_exit(125);
		/* SIGPIPE as a shell leaves it: the default. */
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	status = wait_program(pid, 60);
	*err_text = read_text(err_path);
	return status;
}

/*
 * A closed pipe is a write error: exit 1 and one line saying so, for every
 * command (stats -i, run -i and trace were killed by SIGPIPE: 141).
 */
Test(write_errors, a_closed_pipe_exits_1_for_every_command, .timeout = 180)
{
	const char *const cases[][12] = {
		{ "stats", "-i", "0.1", "--", DRV_LAUNCH, "200000", NULL },
		{ "run", root_owned_copy(EXAMPLES_DIR "/launch_dims.bpf.c"), "-i", "0.1", "--", DRV_LAUNCH,
		  "200000", NULL },
		{ "trace", "--", DRV_LAUNCH, "2000", NULL },
		{ "trace", "--", "/bin/sleep", "0.5", NULL },
		{ "probes", NULL },
	};
	size_t i, j;

	require_root();
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[16] = { CUPROBE_BIN }, *dir = make_tmpdir(), *err_path = path_join(dir, "err");
		char *err;
		int status;

		for (j = 0; cases[i][j]; j++)
			argv[j + 1] = (char *)cases[i][j];
		status = run_into_closed_pipe(argv, err_path, &err);
		cr_assert_eq(status, 1, "%s %s: exit %d: %s", cases[i][0], cases[i][1] ? cases[i][1] : "",
			     status, err);
		cr_assert(strstr(err, "cannot write standard output: Broken pipe"), "%s: %s",
			  cases[i][0], err);
		free(err);
		free(err_path);
		remove_tree(dir);
		free(dir);
	}
}

/* ---- 2. a failed start leaves the output file alone ------------------------------ */

static void assert_untouched(const char *path, const char *want)
{
	char *text = read_text(path);

	cr_assert_not_null(text, "%s is gone", path);
	cr_assert_str_eq(text, want, "%s was changed", path);
	free(text);
}

static size_t files_in(const char *dir)
{
	char command[512], *listing;
	size_t n;
	char *list_path = path_join(dir, "../listing.txt");

	snprintf(command, sizeof(command), "ls -A '%s' > '%s'", dir, list_path);
	cr_assert_eq(system(command), 0);
	listing = read_text(list_path);
	n = count_lines(listing);
	free(listing);
	unlink(list_path);
	free(list_path);
	return n;
}

Test(output_file, a_failed_start_leaves_an_existing_file_as_it_was, .timeout = 60)
{
	struct run r;
	char *data, *bad_lib, *sub;

	run_init(&r);
	sub = path_join(r.dir, "out");
	cr_assert_eq(mkdir(sub, 0755), 0);
	data = path_join(sub, "p.json");
	bad_lib = path_join(r.dir, "notelf.so");
	cr_assert(write_text(data, "data\n"));
	cr_assert(write_text(bad_lib, "not an ELF file\n"));
	{
		char *argv[] = { CUPROBE_BIN, "trace", "--lib", bad_lib, "-d", "1", "-o", data, NULL };

		run_argv(&r, argv);
	}
	cr_assert_neq(r.status, 0, "a library that is not ELF must fail the start");
	cr_assert_not_null(strstr(r.err_text, "not an ELF file"), "%s", r.err_text);
	assert_untouched(data, "data\n");
	cr_assert_eq(files_in(sub), 1, "a temporary file was left behind");
	free(r.out_text);
	free(r.err_text);
	{
		char *argv[] = { CUPROBE_BIN, "trace", "-o", data, "--", "/etc/hostname", NULL };

		run_argv(&r, argv);
	}
	cr_assert_eq(r.status, 126, "a command that is not executable: %d\n%s", r.status, r.err_text);
	assert_untouched(data, "data\n");
	cr_assert_eq(files_in(sub), 1, "a temporary file was left behind");
	free(data);
	free(bad_lib);
	free(sub);
	run_free(&r);
}

/* A name of 255 bytes, the most a directory entry takes: the temporary name must fit too. */
Test(output_file, a_name_of_255_bytes_is_written, .timeout = 60)
{
	char name[256], *sub, *data, *text;
	struct run r;

	run_init(&r);
	sub = path_join(r.dir, "out");
	cr_assert_eq(mkdir(sub, 0755), 0);
	memset(name, 'n', 255);
	memcpy(name + 250, ".json", 6);
	data = path_join(sub, name);
	{
		char *argv[] = { CUPROBE_BIN, "trace", "--json", "-o", data, "--", DRV_LAUNCH, "3", NULL };

		run_argv(&r, argv);
	}
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err_text);
	text = read_text(data);
	cr_assert(text && strstr(text, "\"api\":\"cuLaunchKernel\""), "%s", text ? text : "no file");
	cr_assert_eq(files_in(sub), 1, "a temporary file was left behind");
	free(text);
	free(data);
	free(sub);
	run_free(&r);
}

Test(output_file, a_thread_id_is_refused_and_leaves_the_file_alone, .timeout = 60)
{
	char *target_argv[] = { DRV_LAUNCH, "100000000", "2", NULL };
	char tid_text[32], task_dir[64], *data;
	struct run r;
	pid_t target, tid = 0;
	int status, i;

	run_init(&r);
	data = path_join(r.dir, "p.json");
	cr_assert(write_text(data, "data\n"));
	target = start_background(target_argv);
	/* drv_launch with 2 threads: find a task of it that is not the leader. */
	for (i = 0; i < 200 && !tid; i++) {
		char command[256], *text;
		char *list = path_join(r.dir, "tasks.txt");

		usleep(10000);
		snprintf(task_dir, sizeof(task_dir), "/proc/%d/task", target);
		snprintf(command, sizeof(command), "ls '%s' > '%s'", task_dir, list);
		if (!system(command) && (text = read_text(list))) {
			char *line, *save = NULL;

			for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
				if (atoi(line) != target)
					tid = atoi(line);
			free(text);
		}
		free(list);
	}
	cr_assert_neq(tid, 0, "no second thread in drv_launch");
	snprintf(tid_text, sizeof(tid_text), "%d", tid);
	{
		char *argv[] = { CUPROBE_BIN, "trace", "-p", tid_text, "-d", "1", "-o", data, NULL };

		run_argv(&r, argv);
	}
	kill(target, SIGKILL);
	waitpid(target, &status, 0);
	cr_assert_eq(r.status, 2, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "is a thread of process"), "%s", r.err_text);
	assert_untouched(data, "data\n");
	free(data);
	run_free(&r);
}

/* ---- 4. a stop asked of cuprobe stops it, whatever COMMAND's dispositions -------- */

/* The pid in "the command (pid N)" of cuprobe's stderr, or 0. */
static pid_t command_pid_said(const char *err_text)
{
	const char *at = strstr(err_text, "the command (pid ");

	return at ? (pid_t)atoi(at + strlen("the command (pid ")) : 0;
}

/* Ids of BPF programs and links ("prog 12", "link 7" lines) still in the kernel. */
static size_t bpf_ids_alive(const char *ids_text, char *first, size_t len)
{
	const char *line = ids_text;
	size_t alive = 0;

	while (line && *line) {
		char kind[8];
		unsigned int id;
		int fd = -1;

		if (sscanf(line, "%7s %u", kind, &id) == 2)
			fd = !strcmp(kind, "link") ? bpf_link_get_fd_by_id(id) : bpf_prog_get_fd_by_id(id);
		if (fd >= 0) {
			if (!alive++)
				snprintf(first, len, "%s %u", kind, id);
			close(fd);
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return alive;
}

Test(stop, a_background_cuprobe_stops_on_sigint_within_a_second, .timeout = 60)
{
	char script[4096], *timing, *events, *ids;
	struct run r;
	long long elapsed_ns;
	int status;
	pid_t left;

	run_init(&r);
	timing = path_join(r.dir, "timing.txt");
	events = path_join(r.dir, "events.json");
	ids = path_join(r.dir, "ids.txt");
	/*
	 * A non-interactive shell starts background jobs with SIGINT ignored:
	 * drv_launch inherits that, so the SIGINT cuprobe passes on does nothing.
	 * It launches about once a millisecond (--host-us): records keep coming
	 * and a 8M ring never fills. cuprobe's programs and links are read from
	 * its fds before the SIGINT.
	 */
	snprintf(script, sizeof(script),
		 "'%s' trace -v --json -o '%s' -- '%s' 100000000 --host-us 1000 2> '%s/cuprobe.err' &\n"
		 "pid=$!\n"
		 "i=0; until grep -q 'tracing (' '%s/cuprobe.err' 2>/dev/null; do sleep 0.05; i=$((i+1)); [ $i -gt 400 ] && exit 99; done\n"
		 "sleep 0.2\n"
		 "for f in /proc/$pid/fdinfo/*; do sed -n -e 's/^prog_id:[[:space:]]*/prog /p' -e 's/^link_id:[[:space:]]*/link /p' \"$f\"; done > '%s' 2>/dev/null\n"
		 "t0=$(date +%%s%%N)\n"
		 "kill -INT $pid\n"
		 "wait $pid; status=$?\n"
		 "echo \"$status $(( $(date +%%s%%N) - t0 ))\" > '%s'\n",
		 CUPROBE_BIN, events, DRV_LAUNCH, r.dir, r.dir, ids, timing);
	run_shell(&r, script);
	cr_assert_eq(r.status, 0, "the script failed (%d): %s", r.status, r.err_text);
	{
		char *text = read_text(timing), *err = path_join(r.dir, "cuprobe.err");
		char *err_text = read_text(err);

		cr_assert_not_null(text);
		cr_assert_eq(sscanf(text, "%d %lld", &status, &elapsed_ns), 2, "%s", text);
		left = command_pid_said(err_text ? err_text : "");
		if (left > 0)
			kill(left, SIGKILL);
		cr_assert_eq(status, 130, "exit status after SIGINT: %d; stderr:\n%s", status, err_text);
		cr_assert_lt(elapsed_ns, 1000000000ll, "SIGINT to exit took %lld ms", elapsed_ns / 1000000);
		cr_assert_gt(left, 0, "cuprobe must say it left the command running:\n%s", err_text);
		cr_log_info("SIGINT to exit: %lld ms", elapsed_ns / 1000000);
		{
			/* The ring was drained: every record before the stop is in the file. */
			struct cuprobe_summary summary;
			json_t *lines = load_json_lines(events);

			cr_assert(parse_cuprobe_summary(err_text, &summary), "no summary:\n%s", err_text);
			cr_assert_gt(json_array_size(lines), 0, "no events before the SIGINT");
			cr_assert_eq(summary.lost, 0, "%s", err_text);
			cr_assert_eq(summary.delivered, json_array_size(lines),
				     "summary says %llu delivered, the file has %zu", summary.delivered,
				     json_array_size(lines));
			cr_assert_gt(count_events(lines, "launch", NULL), 0);
			json_decref(lines);
		}
		{
			/* The probes are gone soon after cuprobe: its child finishes the detach. */
			char *ids_text = read_text(ids), first[64] = "";
			size_t total, alive = 0;
			int tries;

			cr_assert_not_null(ids_text);
			total = count_lines(ids_text);
			cr_assert(strstr(ids_text, "prog ") && strstr(ids_text, "link "),
				  "no program or link among cuprobe's fds:\n%s", ids_text);
			for (tries = 0; tries < 200; tries++) {
				alive = bpf_ids_alive(ids_text, first, sizeof(first));
				if (!alive)
					break;
				usleep(10000);
			}
			cr_assert_eq(alive, 0, "%zu of cuprobe's %zu programs and links left 2 s after its exit (%s)",
				     alive, total, first);
			free(ids_text);
		}
		free(text);
		free(err);
		free(err_text);
	}
	free(timing);
	free(events);
	free(ids);
	run_free(&r);
}

/*
 * Standard output a pipe nobody reads (`cuprobe trace | a stuck reader`, or
 * a terminal stopped with Ctrl-S): the drain at the stop blocks in write.
 * A SIGINT still ends cuprobe within a second, says the output was blocked,
 * and exits 1 (records were dropped).
 */
static void assert_stops_with_output_blocked(char *const argv[], bool stderr_too)
{
	char *dir = make_tmpdir(), *err_path = path_join(dir, "stderr"), *err;
	int out[2], status = 0, err_fd, waited;
	struct timespec t0, t1;
	double seconds;
	pid_t pid;

	require_root();
	cr_assert_eq(pipe(out), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (err_fd < 0 || dup2(out[1], 1) < 0 || dup2(stderr_too ? out[1] : err_fd, 2) < 0)
			_exit(126);
		close(out[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	/* The pipe (64 KiB) fills well before this, and the writer blocks. */
	usleep(2000000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(kill(pid, SIGINT), 0);
	for (waited = 0; waited < 300 && waitpid(pid, &status, WNOHANG) == 0; waited++)
		usleep(10000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (waited == 300) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	close(out[0]);
	err = read_text(err_path);
	cr_assert_lt(waited, 300, "%s: still running 3 s after SIGINT with its output blocked: %s", argv[1], err);
	cr_assert_leq(seconds, 1.0, "%s: %.2f s from SIGINT to exit", argv[1], seconds);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s: status %#x: %s", argv[1], status, err);
	if (!stderr_too)
		cr_assert_not_null(strstr(err, "standard output was blocked when tracing stopped"), "%s", err);
	cr_log_info("%s: exit %.3f s after SIGINT with its output blocked", argv[1], seconds);
	free(err);
	free(err_path);
	remove_tree(dir);
	free(dir);
}

Test(stop, sigint_stops_trace_whose_output_is_blocked, .timeout = 60)
{
	char *argv[] = { CUPROBE_BIN, "trace", "--", DRV_LAUNCH, "2000000", NULL };

	assert_stops_with_output_blocked(argv, false);
}

/* Its messages too (2>&1 into the same pipe): the last words are dropped, not waited on. */
Test(stop, sigint_stops_trace_whose_output_and_messages_are_blocked, .timeout = 60)
{
	char *argv[] = { CUPROBE_BIN, "trace", "--", DRV_LAUNCH, "2000000", NULL };

	assert_stops_with_output_blocked(argv, true);
}

Test(stop, sigint_stops_stats_whose_output_is_blocked, .timeout = 60)
{
	/* A report every 10 ms fills the pipe. */
	char *argv[] = { CUPROBE_BIN, "stats", "--json", "-i", "0.01", "--", DRV_LAUNCH, "2000000",
			 "--host-us", "5", NULL };

	assert_stops_with_output_blocked(argv, false);
}

Test(stop, a_command_that_dies_of_the_forwarded_sigint_gives_its_status, .timeout = 60)
{
	char *argv[] = { CUPROBE_BIN, "trace", "-v", "-o", NULL, "--", DRV_LAUNCH, "100000000", NULL };
	struct run_opts o;
	struct run r;
	pid_t pid;

	run_init(&r);
	argv[4] = path_join(r.dir, "events.txt");
	o = (struct run_opts){ .stdout_path = r.out, .stderr_path = r.err };
	pid = spawn_program(argv, &o);
	cr_assert(wait_for_text(r.err, "tracing (", 20), "cuprobe did not start");
	kill(pid, SIGINT);
	r.status = wait_program(pid, 20);
	r.err_text = read_text(r.err);
	/* drv_launch has SIGINT's default action here: it dies of it, cuprobe says so. */
	cr_assert_eq(r.status, 130, "stderr:\n%s", r.err_text);
	cr_assert_null(strstr(r.err_text, "keeps running"), "%s", r.err_text);
	free(argv[4]);
	run_free(&r);
}

/* ---- 9. the whole tree of COMMAND is traced ---------------------------------------- */

static size_t count_text(const char *text, const char *needle)
{
	size_t n = 0;

	for (; text && (text = strstr(text, needle)); text += strlen(needle))
		n++;
	return n;
}

Test(tree, descendants_that_outlive_the_command_are_traced_to_their_end, .timeout = 120)
{
	char script[1024];
	char *argv[] = { CUPROBE_BIN, "trace", "-o", NULL, "--", "/bin/sh", "-c", script, NULL };
	struct run r;
	char *events_text;

	run_init(&r);
	argv[3] = path_join(r.dir, "events.txt");
	snprintf(script, sizeof(script), "'%s' 3000 > /dev/null &", DRV_LAUNCH);
	run_argv(&r, argv);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	events_text = read_text(argv[3]);
	cr_assert_eq(count_text(events_text, " cuLaunchKernel "), 3000,
		     "the orphaned drv_launch's launches, all of them");
	cr_assert_null(strstr(r.err_text, "still running"), "%s", r.err_text);
	free(events_text);
	free(argv[3]);
	run_free(&r);
}

Test(tree, exit_with_command_says_who_is_left, .timeout = 120)
{
	char script[1024];
	char *argv[] = { CUPROBE_BIN, "trace", "--exit-with-command", "-o", NULL, "--", "/bin/sh",
			 "-c", script, NULL };
	char pid_file[512];
	struct run r;
	char *pid_text;

	run_init(&r);
	argv[4] = path_join(r.dir, "events.txt");
	snprintf(pid_file, sizeof(pid_file), "%s/orphan.pid", r.dir);
	snprintf(script, sizeof(script), "'%s' 100000000 > /dev/null & echo $! > '%s'", DRV_LAUNCH,
		 pid_file);
	run_argv(&r, argv);
	pid_text = read_text(pid_file);
	if (pid_text)
		kill(atoi(pid_text), SIGKILL);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "1 traced process is still running, untraced from now on"),
			   "%s", r.err_text);
	free(pid_text);
	free(argv[4]);
	run_free(&r);
}

/* ---- 10. stats names kernels of a process attached late ------------------------------ */

Test(late_names, stats_p_names_handles_made_before_the_attach, .timeout = 120)
{
	char *target_argv[] = { DRV_LAUNCH, "100000000", NULL };
	char pid_text[32];
	char *argv[] = { CUPROBE_BIN, "stats", "-d", "1", "-p", pid_text, NULL };
	struct run r;
	pid_t target;
	int status;

	run_init(&r);
	target = start_background(target_argv);
	usleep(300000); /* past cuModuleGetFunction: launching */
	snprintf(pid_text, sizeof(pid_text), "%d", target);
	run_argv(&r, argv);
	kill(target, SIGKILL);
	waitpid(target, &status, 0);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.out_text, "  vec_add\n"), "the kernel is named:\n%s", r.out_text);
	cr_assert_null(strstr(r.out_text, "<unnamed"), "%s", r.out_text);
	run_free(&r);
}

/* ---- 14. interval reports say they were read live ------------------------------------ */

Test(live_reads, interval_reports_of_a_running_process_say_so, .timeout = 120)
{
	char *argv[] = { CUPROBE_BIN, "stats", "--json", "--interval", "0.2", "-o", NULL, "--",
			 DRV_LAUNCH, "300000", NULL };
	json_t *lines, *line;
	size_t i, live = 0, final_exited = 0;
	struct run r;

	run_init(&r);
	argv[6] = path_join(r.dir, "stats.json");
	run_argv(&r, argv);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	lines = load_json_lines(argv[6]);
	json_array_foreach(lines, i, line) {
		if (strcmp(jstr(line, "type"), "stats"))
			continue;
		if (json_is_true(json_object_get(line, "exited"))) {
			final_exited++;
			cr_assert(json_is_false(json_object_get(line, "live_read")),
				  "an exited process's rows no longer change");
		} else {
			live++;
			cr_assert(json_is_true(json_object_get(line, "live_read")));
		}
	}
	cr_assert_gt(live, 0, "no interval report while drv_launch ran");
	cr_assert_eq(final_exited, 1);
	json_decref(lines);
	free(argv[6]);
	run_free(&r);
}

/* ---- 15. bad input is one line, exit 2, and COMMAND does not run ------------------------ */

/* argv with a deadline: its status, or -1 when it had to be killed (it hung). */
static void run_argv_within(struct run *r, char **argv, double timeout_s)
{
	struct run_opts o = { .stdout_path = r->out, .stderr_path = r->err };

	r->status = wait_program(spawn_program(argv, &o), timeout_s);
	r->out_text = read_text(r->out);
	r->err_text = read_text(r->err);
	cr_assert_not_null(r->err_text);
}

/*
 * A path from the user that is not a regular file (a FIFO here) is refused
 * in one line wherever it is read; it used to be opened, waiting forever
 * for a writer.
 */
Test(bad_input, a_fifo_given_as_a_file_is_refused_not_waited_on, .timeout = 120)
{
	static const struct {
		const char *args[6];
		const char *fifo;
		int status;
		const char *message;
	} cases[] = {
		{ { "probes", "--lib", "@" }, "lib.so", 1, "@: not a regular file" },
		{ { "trace", "--lib", "@", "--", "/bin/true" }, "lib.so", 2, "--lib @: not a regular file" },
		{ { "trace", "--cudart", "@", "--", "/bin/true" }, "cudart.so", 2, "--cudart @: not a regular file" },
		{ { "run", "@", "--", "/bin/true" }, "prog.bpf.o", 2, "@: not a regular file" },
		{ { "run", "@", "--", "/bin/true" }, "prog.bpf.c", 2, "@: not a regular file" },
	};
	size_t i, j;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[8] = { CUPROBE_BIN }, *fifo, message[512], *at;
		struct run r;

		run_init(&r);
		fifo = path_join(r.dir, cases[i].fifo);
		cr_assert_eq(mkfifo(fifo, 0600), 0);
		for (j = 0; j < 6 && cases[i].args[j]; j++)
			argv[j + 1] = !strcmp(cases[i].args[j], "@") ? fifo : (char *)cases[i].args[j];
		run_argv_within(&r, argv, 20);
		cr_assert_neq(r.status, -1, "%s %s: still waiting after 20 s", cases[i].args[0],
			      cases[i].args[1]);
		cr_assert_eq(r.status, cases[i].status, "%s %s: exit %d: %s", cases[i].args[0],
			     cases[i].args[1], r.status, r.err_text);
		at = strchr(cases[i].message, '@');
		snprintf(message, sizeof(message), "%.*s%s%s", (int)(at - cases[i].message),
			 cases[i].message, fifo, at + 1);
		cr_assert(strstr(r.err_text, message), "expected \"%s\" in: %s", message, r.err_text);
		cr_assert_eq(count_lines(r.err_text), 1, "one line: %s", r.err_text);
		free(fifo);
		run_free(&r);
	}
}

/* COMMAND that is a directory: 126, said as such (it was "permission denied"). */
Test(bad_input, a_command_that_is_a_directory, .timeout = 60)
{
	char *argv[] = { CUPROBE_BIN, "trace", "--", "/tmp", NULL };
	struct run r;

	run_init(&r);
	run_argv(&r, argv);
	cr_assert_eq(r.status, 126, "exit %d: %s", r.status, r.err_text);
	cr_assert(strstr(r.err_text, "/tmp: is a directory"), "%s", r.err_text);
	cr_assert_eq(count_lines(r.err_text), 1, "one line: %s", r.err_text);
	run_free(&r);
}

/* A truncated ELF file: its section headers are cut off (it listed 0 exports and exit 0). */
Test(bad_input, probes_of_a_truncated_elf_file_fails, .timeout = 60)
{
	char *argv[] = { CUPROBE_BIN, "probes", "--lib", NULL, NULL };
	char head[100], *cut;
	FILE *in, *out;
	struct run r;

	run_init(&r);
	cut = path_join(r.dir, "libcuda.so.1");
	/* The ELF header and a little more: the first 100 bytes of the simulated driver. */
	in = fopen(CUDA_SIM_LIB, "rb");
	out = fopen(cut, "wb");
	cr_assert(in && out);
	cr_assert_eq(fread(head, 1, sizeof(head), in), sizeof(head));
	cr_assert_eq(fwrite(head, 1, sizeof(head), out), sizeof(head));
	fclose(in);
	cr_assert_eq(fclose(out), 0);
	argv[3] = cut;
	run_argv(&r, argv);
	cr_assert_eq(r.status, 1, "exit %d: %s%s", r.status, r.out_text, r.err_text);
	cr_assert(strstr(r.err_text, "libcuda.so.1: a truncated or damaged ELF file"), "%s", r.err_text);
	free(cut);
	run_free(&r);
}

/* --cudart of a file that cannot be probed is refused as --lib is (it was a warning, exit 0). */
Test(bad_input, a_cudart_that_cannot_be_probed_is_refused_as_a_lib_is, .timeout = 60)
{
	static const struct {
		const char *file, *message;
	} cases[] = {
		{ "/nonexistent/libcudart.so", "--cudart /nonexistent/libcudart.so: No such file or directory" },
		{ "@", "--cudart @: cannot be probed: not an ELF file" },
		{ "/bin/true", "--cudart /bin/true: cannot be probed: no cudaLaunchKernel in it" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char script[1024], *argv[] = { CUPROBE_BIN, "trace", "--cudart", NULL, "--", "/bin/sh",
					       "-c", script, NULL };
		char *mark, *text_file, message[512], *at;
		struct run r;

		run_init(&r);
		mark = path_join(r.dir, "ran");
		text_file = path_join(r.dir, "libcudart.so");
		cr_assert(write_text(text_file, "not an ELF file\n"));
		argv[3] = !strcmp(cases[i].file, "@") ? text_file : (char *)cases[i].file;
		snprintf(script, sizeof(script), "touch '%s'", mark);
		run_argv(&r, argv);
		cr_assert_eq(r.status, 2, "%s: exit %d: %s", argv[3], r.status, r.err_text);
		at = strchr(cases[i].message, '@');
		if (at)
			snprintf(message, sizeof(message), "%.*s%s%s", (int)(at - cases[i].message),
				 cases[i].message, text_file, at + 1);
		else
			snprintf(message, sizeof(message), "%s", cases[i].message);
		cr_assert(strstr(r.err_text, message), "expected \"%s\" in: %s", message, r.err_text);
		cr_assert_eq(count_lines(r.err_text), 1, "one line: %s", r.err_text);
		cr_assert_neq(access(mark, F_OK), 0, "COMMAND ran");
		free(mark);
		free(text_file);
		run_free(&r);
	}
}

Test(bad_input, a_lib_that_is_not_elf_with_a_command_is_refused_before_it_runs, .timeout = 60)
{
	char script[1024];
	char *argv[] = { CUPROBE_BIN, "trace", "--lib", NULL, "--", "/bin/sh", "-c", script, NULL };
	char *mark;
	struct run r;

	run_init(&r);
	argv[3] = path_join(r.dir, "notelf.so.1");
	mark = path_join(r.dir, "ran");
	cr_assert(write_text(argv[3], "not an ELF file\n"));
	snprintf(script, sizeof(script), "touch '%s'; exec '%s' 10", mark, DRV_LAUNCH);
	run_argv(&r, argv);
	cr_assert_eq(r.status, 2, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "notelf.so.1: cannot be probed: not an ELF file"), "%s",
			   r.err_text);
	cr_assert_eq(count_lines(r.err_text), 1, "one line:\n%s", r.err_text);
	cr_assert_neq(access(mark, F_OK), 0, "COMMAND ran");
	cr_assert_null(strstr(r.out_text, "drv_launch:"), "%s", r.out_text);
	free(mark);
	free(argv[3]);
	run_free(&r);
}

/* ---- 16. stats --json on stdout stays parseable with a COMMAND ------------------------- */

Test(json_stdout, stats_json_on_stdout_gets_the_commands_output_moved_to_stderr, .timeout = 120)
{
	char *argv[] = { CUPROBE_BIN, "stats", "--json", "--", DRV_LAUNCH, "2000", NULL };
	char *line, *save = NULL;
	size_t lines = 0, stats = 0;
	struct run r;

	run_init(&r);
	run_argv(&r, argv);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "drv_launch: pid="), "the command's output is on stderr:\n%s",
			   r.err_text);
	for (line = strtok_r(r.out_text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_error_t error;
		json_t *object = json_loads(line, 0, &error);

		cr_assert_not_null(object, "not JSON on stdout: %s (%s)", line, error.text);
		cr_assert(json_is_object(object), "%s", line);
		if (json_is_string(json_object_get(object, "type")) &&
		    !strcmp(json_string_value(json_object_get(object, "type")), "stats"))
			stats++;
		json_decref(object);
		lines++;
	}
	cr_assert_gt(lines, 0);
	cr_assert_eq(stats, 1, "one report, drv_launch's at its exit:\n%s", r.out_text);
	run_free(&r);
}
