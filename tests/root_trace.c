// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe trace` end to end, as root: the real binary with real uprobes on
 * the simulated driver, its JSON lines checked with a real parser and
 * compared with what the workloads say they did. Every test runs its own
 * cuprobe (pid-filtered), so they can run at the same time.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"

/* One cuprobe run in its own directory: events, its stdout and its stderr. */
struct run {
	char *dir;
	char *events;   /* -o FILE */
	char *out;      /* cuprobe's stdout (the workload's output goes there) */
	char *err;      /* cuprobe's stderr */
	int status;
	double elapsed;
	char *out_text;
	char *err_text;
	json_t *json;   /* events, parsed (NULL unless asked for) */
};

static void run_init(struct run *r)
{
	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->events = path_join(r->dir, "events.json");
	r->out = path_join(r->dir, "stdout.txt");
	r->err = path_join(r->dir, "stderr.txt");
}

static void run_free(struct run *r)
{
	if (r->json)
		json_decref(r->json);
	remove_tree(r->dir);
	free(r->dir);
	free(r->events);
	free(r->out);
	free(r->err);
	free(r->out_text);
	free(r->err_text);
}

/* Runs cuprobe with argv (argv[0] is ignored and replaced by CUPROBE_BIN). */
static void run_cuprobe_env(struct run *r, char **argv, char **env, bool as_nobody)
{
	struct run_opts o = { .stdout_path = r->out, .stderr_path = r->err, .extra_env = env,
			      .as_nobody = as_nobody };

	argv[0] = CUPROBE_BIN;
	r->status = run_program(argv, &o, &r->elapsed);
	r->out_text = read_text(r->out);
	r->err_text = read_text(r->err);
	cr_assert_not_null(r->out_text);
	cr_assert_not_null(r->err_text);
}

/* run_cuprobe with a deadline: status -1 when it had to be killed. */
static void run_cuprobe_within(struct run *r, char **argv, double timeout_s)
{
	struct run_opts o = { .stdout_path = r->out, .stderr_path = r->err };

	argv[0] = CUPROBE_BIN;
	r->status = wait_program(spawn_program(argv, &o), timeout_s);
	r->out_text = read_text(r->out);
	r->err_text = read_text(r->err);
	cr_assert_not_null(r->out_text);
	cr_assert_not_null(r->err_text);
}

static void run_cuprobe(struct run *r, char **argv)
{
	run_cuprobe_env(r, argv, NULL, false);
}

/* The common case: `cuprobe trace --json -o EVENTS -- drv_launch ARGS...`, expected to succeed. */
static void trace_drv(struct run *r, int expect_status, ...)
{
	char *argv[32] = { NULL, "trace", "--json", "-o", r->events, "--", DRV_LAUNCH };
	int n = 7;
	va_list ap;
	char *arg;

	va_start(ap, expect_status);
	while ((arg = va_arg(ap, char *)) && n < 31)
		argv[n++] = arg;
	va_end(ap);
	argv[n] = NULL;
	run_cuprobe(r, argv);
	cr_assert_eq(r->status, expect_status, "cuprobe exited %d (want %d); stderr:\n%s",
		     r->status, expect_status, r->err_text);
	r->json = load_json_lines(r->events);
}

/* The summary line: everything delivered was written, nothing lost, every launch named. */
static void assert_clean_summary(struct run *r)
{
	struct cuprobe_summary s;

	cr_assert(parse_cuprobe_summary(r->err_text, &s), "no summary line on stderr:\n%s", r->err_text);
	cr_assert_eq(s.lost, 0, "records lost:\n%s", r->err_text);
	cr_assert_eq(s.unnamed, 0, "launches with unknown names:\n%s", r->err_text);
	cr_assert_eq(s.delivered, json_array_size(r->json),
		     "summary says %llu delivered, the file has %zu events", s.delivered,
		     json_array_size(r->json));
}

/* The workload's summary line (nth one, for --fork). */
static char *drv_summary(struct run *r, int nth)
{
	char *line = find_line(r->out_text, "drv_launch: pid=", nth);

	cr_assert_not_null(line, "drv_launch printed no summary line #%d; its output:\n%s", nth,
			   r->out_text);
	cr_assert_not_null(strstr(line, "result=ok"), "%s", line);
	return line;
}

static bool is(json_t *ev, const char *key, const char *value)
{
	json_t *v = json_object_get(ev, key);

	return json_is_string(v) && !strcmp(json_string_value(v), value);
}

/* ---- drv_launch -------------------------------------------------------------- */

Test(trace, thousand_launches_named_with_their_geometry, .timeout = 120)
{
	struct run r;
	size_t i, launches = 0;
	json_t *ev;
	char *line;

	run_init(&r);
	trace_drv(&r, 0, "1000", NULL);
	line = drv_summary(&r, 0);
	cr_assert_eq(line_value(line, "launches"), 1000);
	json_array_foreach(r.json, i, ev) {
		if (!is(ev, "type", "launch"))
			continue;
		launches++;
		cr_assert(is(ev, "api", "cuLaunchKernel"), "api %s", jstr(ev, "api"));
		cr_assert(is(ev, "kernel", "vec_add"), "launch %zu has kernel %s", launches,
			  json_dumps(json_object_get(ev, "kernel"), JSON_ENCODE_ANY));
		cr_assert(jdims_equal(ev, "grid", 4, 1, 1), "grid of launch %zu", launches);
		cr_assert(jdims_equal(ev, "block", 256, 1, 1), "block of launch %zu", launches);
		cr_assert_eq(jint(ev, "pid"), line_value(line, "pid"));
	}
	cr_assert_eq(launches, 1000);
	assert_clean_summary(&r);
	/* One line at exit, in the user's terms: the name checks' accounting is -v's. */
	cr_assert_eq(count_lines(r.err_text), 1, "%s", r.err_text);
	free(line);
	run_free(&r);
}

Test(trace, allocations_frees_and_copies_match_the_workload, .timeout = 120)
{
	struct run r;
	uint64_t device_ptrs[16], freed_ptrs[16], host_ptr = 0, host_freed = 0;
	long long alloc_bytes = 0, copy_bytes = 0, htod = 0, dtoh = 0, dtod = 0, syncs = 0, blocking_copies = 0;
	size_t i, n_alloc = 0, n_freed = 0, n_host = 0, n_host_free = 0, j;
	json_t *ev;
	char *line;

	run_init(&r);
	/* An odd element count: sizes the tracer cannot guess from the default. */
	trace_drv(&r, 0, "10", "1", "--elements", "3000", NULL);
	line = drv_summary(&r, 0);
	json_array_foreach(r.json, i, ev) {
		if (jint(ev, "pid") != line_value(line, "pid"))
			continue;
		if (is(ev, "type", "alloc")) {
			cr_assert_eq(jint(ev, "result"), 0);
			cr_assert_neq(jhex(ev, "ptr"), 0);
			if (is(ev, "kind", "device")) {
				cr_assert(is(ev, "api", "cuMemAlloc_v2"));
				cr_assert_lt(n_alloc, 16);
				device_ptrs[n_alloc++] = jhex(ev, "ptr");
				alloc_bytes += jint(ev, "bytes");
			} else {
				cr_assert(is(ev, "kind", "host"), "unexpected alloc kind %s", jstr(ev, "kind"));
				n_host++;
				host_ptr = jhex(ev, "ptr");
			}
		} else if (is(ev, "type", "free")) {
			if (is(ev, "kind", "device")) {
				cr_assert_lt(n_freed, 16);
				freed_ptrs[n_freed++] = jhex(ev, "ptr");
			} else {
				cr_assert(is(ev, "kind", "host"));
				n_host_free++;
				host_freed = jhex(ev, "ptr");
			}
		} else if (is(ev, "type", "copy")) {
			copy_bytes += jint(ev, "bytes");
			cr_assert(json_is_false(json_object_get(ev, "async")));
			if (is(ev, "direction", "HtoD"))
				htod++;
			else if (is(ev, "direction", "DtoH"))
				dtoh++;
			else if (is(ev, "direction", "DtoD"))
				dtod++;
			else
				cr_assert_fail("copy direction %s", jstr(ev, "direction"));
		} else if (is(ev, "type", "sync") && is(ev, "kind", "blocking_copy")) {
			/* A blocking copy's return: evidence for the timeline, after its copy record. */
			blocking_copies++;
		} else if (is(ev, "type", "sync")) {
			syncs++;
		}
	}
	cr_assert_eq((long long)n_alloc, line_value(line, "allocs"));
	cr_assert_eq(alloc_bytes, line_value(line, "alloc_bytes"));
	cr_assert_eq(alloc_bytes, 3 * 3000 * 4, "3 buffers of 3000 floats");
	cr_assert_eq((long long)n_freed, line_value(line, "frees"));
	cr_assert_eq((long long)n_host, line_value(line, "host_allocs"));
	cr_assert_eq(n_host_free, n_host);
	cr_assert_eq(host_freed, host_ptr, "cuMemFreeHost freed another pointer than cuMemAllocHost gave");
	/* Balanced: every device pointer allocated is freed exactly once. */
	for (i = 0; i < n_alloc; i++) {
		size_t hits = 0;

		for (j = 0; j < n_freed; j++)
			hits += freed_ptrs[j] == device_ptrs[i];
		cr_assert_eq(hits, 1, "allocation %#llx freed %zu times",
			     (unsigned long long)device_ptrs[i], hits);
	}
	cr_assert_eq(htod, line_value(line, "htod"));
	cr_assert_eq(dtoh, line_value(line, "dtoh"));
	cr_assert_eq(dtod, line_value(line, "dtod"));
	cr_assert_eq(copy_bytes, line_value(line, "copy_bytes"));
	cr_assert_eq(syncs, line_value(line, "syncs"));
	/* Blocking host<->device copies return when done (timeline evidence); DtoD ones do not wait. */
	cr_assert_eq(blocking_copies, htod + dtoh);
	assert_clean_summary(&r);
	free(line);
	run_free(&r);
}

Test(trace, threads_each_launch_on_their_own_stream, .timeout = 120)
{
	struct run r;
	long long tids[8] = { 0 }, counts[8] = { 0 }, syncs[8] = { 0 };
	long long first_ns[8] = { 0 }, sync_ns[8] = { 0 };
	uint64_t streams[8] = { 0 };
	size_t i, t, n_tids = 0, launches = 0;
	json_t *ev;
	char *line;

	run_init(&r);
	trace_drv(&r, 0, "50", "4", NULL);
	line = drv_summary(&r, 0);
	cr_assert_eq(line_value(line, "launches"), 200);
	json_array_foreach(r.json, i, ev) {
		bool launch = is(ev, "type", "launch");
		bool stream_sync = is(ev, "type", "sync") && is(ev, "kind", "stream");

		if (!launch && !stream_sync)
			continue;
		for (t = 0; t < n_tids && tids[t] != jint(ev, "tid"); t++)
			;
		if (stream_sync) {
			cr_assert_lt(t, n_tids, "a stream sync from thread %lld, which never launched",
				     jint(ev, "tid"));
			cr_assert_eq(jhex(ev, "handle"), streams[t],
				     "thread %lld synchronized a stream it did not launch on", tids[t]);
			syncs[t]++;
			sync_ns[t] = jint(ev, "time_ns");
			continue;
		}
		launches++;
		cr_assert(is(ev, "kernel", "vec_add"));
		if (t == n_tids) {
			cr_assert_lt(n_tids, 8, "more than 4 launching threads");
			tids[n_tids] = jint(ev, "tid");
			streams[n_tids] = jhex(ev, "stream");
			first_ns[n_tids] = jint(ev, "time_ns");
			n_tids++;
		}
		cr_assert_eq(jhex(ev, "stream"), streams[t], "thread %lld launched on two streams", tids[t]);
		counts[t]++;
	}
	cr_assert_eq(launches, 200);
	cr_assert_eq(n_tids, 4);
	for (t = 0; t < n_tids; t++) {
		size_t u;

		cr_assert_eq(counts[t], 50, "thread %lld made %lld launches", tids[t], counts[t]);
		cr_assert_eq(syncs[t], 1, "thread %lld synchronized its stream %lld times", tids[t], syncs[t]);
		cr_assert_neq(tids[t], line_value(line, "pid"), "the main thread does not launch");
		cr_assert_neq(streams[t], 0);
		/*
		 * A stream is destroyed after its sync, so a later thread may get the
		 * same handle value back; two streams alive at once are distinct.
		 */
		for (u = 0; u < t; u++)
			if (streams[u] == streams[t])
				cr_assert(sync_ns[u] < first_ns[t] || sync_ns[t] < first_ns[u],
					  "threads %lld and %lld used stream %#llx at the same time",
					  tids[u], tids[t], (unsigned long long)streams[t]);
	}
	assert_clean_summary(&r);
	free(line);
	run_free(&r);
}

Test(trace, launch_kernel_ex_path, .timeout = 120)
{
	struct run r;
	size_t i, launches = 0;
	json_t *ev;

	run_init(&r);
	trace_drv(&r, 0, "30", "1", "--ex", NULL);
	json_array_foreach(r.json, i, ev) {
		if (!is(ev, "type", "launch"))
			continue;
		launches++;
		cr_assert(is(ev, "api", "cuLaunchKernelEx"), "api %s", jstr(ev, "api"));
		cr_assert(is(ev, "kernel", "vec_add"));
		cr_assert(jdims_equal(ev, "grid", 4, 1, 1));
		cr_assert(jdims_equal(ev, "block", 256, 1, 1));
		cr_assert_null(json_object_get(ev, "config_unreadable"), "the CUlaunchConfig was not read");
	}
	cr_assert_eq(launches, 30);
	assert_clean_summary(&r);
	run_free(&r);
}

Test(trace, library_and_kernel_get_function_path, .timeout = 120)
{
	struct run r;
	size_t i, launches = 0;
	uint64_t kernel = 0, function = 0;
	json_t *ev;

	run_init(&r);
	trace_drv(&r, 0, "30", "1", "--library", NULL);
	json_array_foreach(r.json, i, ev) {
		if (is(ev, "type", "name") && is(ev, "api", "cuLibraryGetKernel")) {
			cr_assert(is(ev, "mangled", "vec_add"));
			kernel = jhex(ev, "handle");
		}
		if (is(ev, "type", "name") && is(ev, "api", "cuKernelGetFunction")) {
			function = jhex(ev, "handle");
			cr_assert_eq(jhex(ev, "alias_of"), kernel, "alias_of is not the CUkernel");
		}
		if (!is(ev, "type", "launch"))
			continue;
		launches++;
		cr_assert(is(ev, "kernel", "vec_add"));
		cr_assert_eq(jhex(ev, "function"), function, "launched a handle the trace never named");
	}
	cr_assert_neq(kernel, 0, "no cuLibraryGetKernel record");
	cr_assert_neq(function, 0, "no cuKernelGetFunction record");
	cr_assert_neq(kernel, function, "the simulator returns a separate CUfunction");
	cr_assert_eq(launches, 30);
	assert_clean_summary(&r);
	run_free(&r);
}

Test(trace, forked_child_is_traced, .timeout = 120)
{
	struct run r;
	long long pid_a, pid_b, parent = -1, child = -1;
	size_t i, a = 0, b = 0, forks = 0, exits_a = 0, exits_b = 0;
	json_t *ev;
	char *line_a, *line_b;

	run_init(&r);
	trace_drv(&r, 0, "20", "1", "--fork", NULL);
	line_a = drv_summary(&r, 0);
	line_b = drv_summary(&r, 1);
	pid_a = line_value(line_a, "pid");
	pid_b = line_value(line_b, "pid");
	cr_assert_neq(pid_a, pid_b);
	json_array_foreach(r.json, i, ev) {
		/* Only the fork between the two workloads (a sanitizer build may clone helpers). */
		if (is(ev, "type", "process") && is(ev, "kind", "fork") &&
		    (jint(ev, "child_pid") == pid_a || jint(ev, "child_pid") == pid_b)) {
			forks++;
			parent = jint(ev, "pid");
			child = jint(ev, "child_pid");
		}
		if (is(ev, "type", "process") && is(ev, "kind", "exit")) {
			exits_a += jint(ev, "pid") == pid_a;
			exits_b += jint(ev, "pid") == pid_b;
		}
		if (!is(ev, "type", "launch"))
			continue;
		cr_assert(is(ev, "kernel", "vec_add"));
		if (jint(ev, "pid") == pid_a)
			a++;
		else if (jint(ev, "pid") == pid_b)
			b++;
		else
			cr_assert_fail("launch from pid %lld, neither drv_launch", jint(ev, "pid"));
	}
	cr_assert_eq(a + b, 40);
	cr_assert_eq(a, 20);
	cr_assert_eq(b, 20);
	cr_assert_eq(forks, 1, "%zu fork events", forks);
	cr_assert((parent == pid_a && child == pid_b) || (parent == pid_b && child == pid_a),
		  "fork %lld -> %lld, workloads %lld and %lld", parent, child, pid_a, pid_b);
	cr_assert_eq(exits_a, 1);
	cr_assert_eq(exits_b, 1);
	assert_clean_summary(&r);
	free(line_a);
	free(line_b);
	run_free(&r);
}

Test(trace, exit_status_is_passed_on, .timeout = 120)
{
	struct run r;
	size_t i, exits = 0;
	json_t *ev;
	char *line;

	run_init(&r);
	trace_drv(&r, 7, "3", "1", "--exit-code", "7", NULL);
	line = drv_summary(&r, 0);
	json_array_foreach(r.json, i, ev) {
		if (is(ev, "type", "process") && is(ev, "kind", "exit") &&
		    jint(ev, "pid") == line_value(line, "pid")) {
			exits++;
			cr_assert_eq(jint(ev, "exit_status"), 7);
		}
	}
	cr_assert_eq(exits, 1);
	cr_assert_eq(count_events(r.json, "launch", NULL), 3);
	free(line);
	run_free(&r);
}

/* ---- the runtime API: cudaLaunchKernel in libcudart -------------------------- */

Test(trace, runtime_launches_named_through_host_stubs, .timeout = 120)
{
#ifndef CUPROBE_HAVE_CUDART_LAUNCH
	cr_assert_fail("cudart_launch was not built (nvcc not found): the runtime path is untested");
#else
	struct run r;
	/* cudart_launch never loads a libcuda: cudaLaunchKernel alone is probed. */
	char *argv[] = { NULL, "trace", "--json", "--runtime", "-o", NULL,
			 "--", CUDART_LAUNCH, "5", NULL };
	size_t i, rt = 0;
	uint64_t stub;
	json_t *ev;
	char *line;

	run_init(&r);
	argv[5] = r.events;
	run_cuprobe(&r, argv);
	cr_assert_eq(r.status, 0, "cuprobe exited %d; stderr:\n%s", r.status, r.err_text);
	r.json = load_json_lines(r.events);
	line = find_line(r.out_text, "cudart_launch: pid=", 0);
	cr_assert_not_null(line, "cudart_launch printed no summary; output:\n%s", r.out_text);
	cr_assert_not_null(strstr(line, "stub=0x"), "%s", line);
	stub = parse_hex(strndup(strstr(line, "stub=") + 5, strcspn(strstr(line, "stub=") + 5, " ")));
	cr_assert_eq(line_value(line, "attempts"), 5);
	json_array_foreach(r.json, i, ev) {
		if (!is(ev, "type", "rt_launch"))
			continue;
		rt++;
		cr_assert(is(ev, "api", "cudaLaunchKernel"));
		cr_assert(is(ev, "mangled", "_Z15rt_probe_kernelPfi"), "mangled %s",
			  json_dumps(json_object_get(ev, "mangled"), JSON_ENCODE_ANY));
		cr_assert(is(ev, "kernel", "rt_probe_kernel(float*, int)"));
		cr_assert_eq(jhex(ev, "stub"), stub, "stub %s, cudart_launch printed %#llx",
			     jstr(ev, "stub"), (unsigned long long)stub);
		cr_assert(jdims_equal(ev, "grid", 2, 1, 1));
		cr_assert(jdims_equal(ev, "block", 64, 1, 1));
		cr_assert_eq(jint(ev, "pid"), line_value(line, "pid"));
	}
	cr_assert_eq(rt, 5);
	free(line);
	run_free(&r);
#endif
}

Test(trace, runtime_probe_on_a_dynamic_executable_is_quiet, .timeout = 120)
{
#ifndef CUPROBE_HAVE_CUDART_LAUNCH
	cr_assert_fail("cudart_launch was not built (nvcc not found)");
#else
	/*
	 * cudart_launch only imports cudaLaunchKernel from libcudart.so.13; trying
	 * the executable too (for static cudart) must not turn into an error.
	 */
	struct run r;
	char *argv[] = { NULL, "trace", "--json", "--runtime", "--lib", CUDA_SIM_LIB, "-o", NULL,
			 "--", CUDART_LAUNCH, "1", NULL };

	run_init(&r);
	argv[7] = r.events;
	run_cuprobe(&r, argv);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_null(strstr(r.err_text, "cannot"), "a successful run reported an error:\n%s",
		       r.err_text);
	cr_assert_null(strstr(r.err_text, "Unknown error"), "%s", r.err_text);
	run_free(&r);
#endif
}

/* ---- errors: non-zero exit, exactly one "cuprobe: " line on stderr ----------- */

static void assert_one_error_line(struct run *r, const char *needle)
{
	cr_assert_neq(r->status, 0, "cuprobe succeeded; stderr:\n%s", r->err_text);
	cr_assert_eq(count_lines(r->err_text), 1, "want exactly one line on stderr, got:\n%s",
		     r->err_text);
	cr_assert_eq(strncmp(r->err_text, "cuprobe: ", 9), 0, "stderr: %s", r->err_text);
	if (needle)
		cr_assert_not_null(strstr(r->err_text, needle), "\"%s\" not in: %s", needle, r->err_text);
}

Test(trace_errors, unknown_option)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--bogus-option", NULL };

	run_init(&r);
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "--bogus-option");
	cr_assert_eq(r.status, 2);
	run_free(&r);
}

Test(trace_errors, bad_pid_value)
{
	struct run r;
	char *argv[] = { NULL, "trace", "-p", "12abc", NULL };

	run_init(&r);
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "12abc");
	cr_assert_eq(r.status, 2);
	run_free(&r);
}

Test(trace_errors, pid_that_does_not_exist)
{
	struct run r;
	char pid_text[16], *argv[] = { NULL, "trace", "-p", pid_text, NULL };
	int status;
	pid_t pid;

	run_init(&r);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	snprintf(pid_text, sizeof(pid_text), "%d", pid);
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, pid_text);
	run_free(&r);
}

Test(trace_errors, live_process_without_cuda_own_pid)
{
	struct run r;
	char pid_text[16], *argv[] = { NULL, "trace", "-p", pid_text, NULL };

	run_init(&r);
	snprintf(pid_text, sizeof(pid_text), "%d", getpid());
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "CUDA");
	run_free(&r);
}

Test(trace_errors, live_process_without_cuda_sleep)
{
	struct run r;
	char *sleep_argv[] = { "/bin/sleep", "30", NULL };
	char pid_text[16], *argv[] = { NULL, "trace", "-p", pid_text, NULL };
	int status;
	pid_t pid;

	run_init(&r);
	pid = start_background(sleep_argv);
	snprintf(pid_text, sizeof(pid_text), "%d", pid);
	run_cuprobe(&r, argv);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	assert_one_error_line(&r, pid_text);
	cr_assert_not_null(strstr(r.err_text, "CUDA"), "%s", r.err_text);
	run_free(&r);
}

/*
 * A kernel thread runs no CUDA, ever: -p of one is bad usage (with --lib it
 * was traced until killed). kthreadd is pid 2 in every pid namespace the
 * kernel starts.
 */
Test(trace_errors, a_kernel_thread_is_refused, .timeout = 60)
{
	char *argv[] = { NULL, "trace", "-p", "2", "--lib", CUDA_SIM_LIB, NULL };
	char *status_text = read_text("/proc/2/status"), *name;
	struct run r;

	run_init(&r);
	name = status_text ? find_line(status_text, "Name:\tkthreadd", 0) : NULL;
	cr_assert_not_null(name, "pid 2 is not kthreadd");
	free(name);
	free(status_text);
	run_cuprobe_within(&r, argv, 20);
	cr_assert_neq(r.status, -1, "still tracing the kernel thread after 20 s");
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err_text);
	assert_one_error_line(&r, "PID 2 is a kernel thread");
	run_free(&r);
}

/* A zombie has exited: refused as one, not traced "still running" (it exited 0). */
Test(trace_errors, a_zombie_is_refused, .timeout = 60)
{
	char pid_text[16], *argv[] = { NULL, "trace", "-p", pid_text, "--lib", CUDA_SIM_LIB, NULL };
	struct run r;
	int status;
	pid_t zombie;

	run_init(&r);
	zombie = fork();
	cr_assert_geq(zombie, 0);
	if (zombie == 0)
		_exit(0);
	/* Not reaped: a zombie until the waitpid below. */
	for (int i = 0; i < 200; i++) {
		char path[64], *stat_text;
		bool dead;

		snprintf(path, sizeof(path), "/proc/%d/stat", zombie);
		stat_text = read_text(path);
		dead = stat_text && strstr(stat_text, ") Z ");
		free(stat_text);
		if (dead)
			break;
		usleep(10000);
	}
	snprintf(pid_text, sizeof(pid_text), "%d", zombie);
	run_cuprobe_within(&r, argv, 20);
	cr_assert_eq(waitpid(zombie, &status, 0), zombie);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err_text);
	assert_one_error_line(&r, "has exited (a zombie");
	cr_assert(strstr(r.err_text, pid_text), "%s", r.err_text);
	run_free(&r);
}

Test(trace_errors, command_not_found)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--json", "--", "/nonexistent/prog", "-x", NULL };

	run_init(&r);
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "/nonexistent/prog");
	cr_assert_eq(r.status, 127);
	run_free(&r);
}

/* A COMMAND that exists but cannot be run exits 126, as a shell's would; 127 is "not found". */
Test(trace_errors, command_not_executable)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--json", "--", NULL, NULL };
	char *plain;

	run_init(&r);
	plain = path_join(r.dir, "not-executable");
	cr_assert(write_text(plain, "#!/bin/sh\nexit 0\n"));
	cr_assert_eq(chmod(plain, 0644), 0);
	argv[4] = plain;
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "not-executable: permission denied");
	cr_assert_eq(r.status, 126);
	free(plain);
	run_free(&r);
}

/* Execute bits on a file the kernel cannot run: execve fails after the fork, still 126. */
Test(trace_errors, command_in_no_executable_format, .timeout = 120)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB, "--", NULL,
			 NULL };
	char *text;

	run_init(&r);
	text = path_join(r.dir, "just-text");
	cr_assert(write_text(text, "neither ELF nor #!\n"));
	cr_assert_eq(chmod(text, 0755), 0);
	argv[4] = r.events;
	argv[8] = text;
	run_cuprobe(&r, argv);
	cr_assert_eq(r.status, 126, "cuprobe exited %d; stderr:\n%s", r.status, r.err_text);
	cr_assert_not_null(strstr(r.err_text, "just-text: Exec format error"), "%s", r.err_text);
	free(text);
	run_free(&r);
}

Test(trace_errors, lib_that_does_not_exist)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--lib", "/nonexistent/libcuda.so.1", NULL };

	run_init(&r);
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "/nonexistent/libcuda.so.1");
	run_free(&r);
}

Test(trace_errors, ring_size_not_a_power_of_two)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--ring-size", "3000", "--lib", CUDA_SIM_LIB, NULL };

	run_init(&r);
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "3000");
	cr_assert_eq(r.status, 2);
	run_free(&r);
}

Test(trace_errors, not_root)
{
	struct run r;
	char *copy, *argv[] = { NULL, "trace", "--lib", CUDA_SIM_LIB, "-d", "0.1", NULL };
	char *cp_argv[] = { "/bin/cp", CUPROBE_BIN, NULL, NULL };
	struct run_opts o;

	run_init(&r);
	/* A copy in a directory everyone can reach: the build tree may not be. */
	cr_assert_eq(chmod(r.dir, 0755), 0);
	copy = path_join(r.dir, "cuprobe");
	cp_argv[2] = copy;
	cr_assert_eq(run_program(cp_argv, NULL, NULL), 0);
	cr_assert_eq(chmod(copy, 0755), 0);
	/* stdout/stderr files are opened before the uid changes. */
	o = (struct run_opts){ .stdout_path = r.out, .stderr_path = r.err, .as_nobody = true };
	argv[0] = copy;
	r.status = run_program(argv, &o, NULL);
	r.out_text = read_text(r.out);
	r.err_text = read_text(r.err);
	cr_assert_neq(r.status, 125, "could not become uid 65534");
	cr_assert_neq(r.status, 127, "uid 65534 could not execute %s", copy);
	assert_one_error_line(&r, "must run as root");
	free(copy);
	run_free(&r);
}

/* ---- -o ------------------------------------------------------------------------ */

Test(trace_output, refuses_an_existing_symlink)
{
	struct run r;
	char *target, *link_path, *marker, *script;
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB,
			 "--", "/bin/sh", "-c", NULL, NULL };
	struct stat st;
	char *content;

	run_init(&r);
	target = path_join(r.dir, "precious.txt");
	link_path = path_join(r.dir, "events-link.json");
	marker = path_join(r.dir, "command-ran");
	cr_assert(write_text(target, "keep me\n"));
	cr_assert_eq(symlink(target, link_path), 0);
	cr_assert(asprintf(&script, "touch '%s'", marker) > 0);
	argv[4] = link_path;
	argv[10] = script;
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, "events-link.json");
	content = read_text(target);
	cr_assert_str_eq(content, "keep me\n", "the symlink's target was written to");
	cr_assert_eq(lstat(link_path, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the symlink was replaced");
	cr_assert_neq(access(marker, F_OK), 0, "the command ran although the output was refused");
	free(content);
	free(target);
	free(link_path);
	free(marker);
	free(script);
	run_free(&r);
}

Test(trace_output, refuses_a_dangling_symlink)
{
	struct run r;
	char *target, *link_path;
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB,
			 "--", "/bin/true", NULL };

	run_init(&r);
	target = path_join(r.dir, "would-be-created");
	link_path = path_join(r.dir, "events-link.json");
	cr_assert_eq(symlink(target, link_path), 0);
	argv[4] = link_path;
	run_cuprobe(&r, argv);
	assert_one_error_line(&r, NULL);
	cr_assert_neq(access(target, F_OK), 0, "a file was created through the symlink");
	free(target);
	free(link_path);
	run_free(&r);
}

Test(trace_output, file_and_command_belong_to_the_sudo_user, .timeout = 120)
{
	struct run r;
	char *uid_file, *script;
	char *env[] = { "SUDO_UID=65534", "SUDO_GID=65534", NULL };
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB,
			 "--", "/bin/sh", "-c", NULL, NULL };
	struct stat st;
	char *ids;

	run_init(&r);
	cr_assert_eq(chmod(r.dir, 0777), 0);
	uid_file = path_join(r.dir, "ids.txt");
	cr_assert(asprintf(&script, "{ id -u; id -g; } > '%s'", uid_file) > 0);
	argv[4] = r.events;
	argv[10] = script;
	run_cuprobe_env(&r, argv, env, false);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_eq(stat(r.events, &st), 0, "no -o file");
	cr_assert_eq(st.st_uid, 65534, "-o file owned by uid %d", (int)st.st_uid);
	cr_assert_eq(st.st_gid, 65534, "-o file owned by gid %d", (int)st.st_gid);
	ids = read_text(uid_file);
	cr_assert_not_null(ids, "the command did not run (or not as a user who can write there)");
	cr_assert_str_eq(ids, "65534\n65534\n", "the command ran with ids:\n%s", ids);
	cr_assert_eq(stat(uid_file, &st), 0);
	cr_assert_eq(st.st_uid, 65534);
	/* The events file is still valid JSON lines, with the shell's exit. */
	r.json = load_json_lines(r.events);
	cr_assert_geq(count_events(r.json, "process", "sched_process_exit"), 1);
	free(ids);
	free(uid_file);
	free(script);
	run_free(&r);
}

/*
 * A user made for one test (useradd), with a group of its own as a
 * supplementary group, removed by the fini even when the test fails.
 */
static char test_user[32], test_group[32];

static void remove_test_user(void)
{
	char *userdel[] = { "/usr/sbin/userdel", test_user, NULL };
	char *groupdel[] = { "/usr/sbin/groupdel", test_group, NULL };

	if (test_user[0])
		run_program(userdel, NULL, NULL);
	if (test_group[0])
		run_program(groupdel, NULL, NULL);
}

/* The groups `id -G` printed, as a set: true when they are exactly a and b. */
static bool groups_are(const char *line, gid_t a, gid_t b)
{
	unsigned long g;
	bool seen_a = false, seen_b = false;
	char *end;

	while (*line && *line != '\n') {
		g = strtoul(line, &end, 10);
		if (end == line)
			return false;
		if (g == a)
			seen_a = true;
		else if (g == b)
			seen_b = true;
		else
			return false;
		line = end + strspn(end, " ");
	}
	return seen_a && seen_b;
}

/* text has a line that is name ("HOME=") followed by value. */
static void assert_line(const char *text, const char *name, const char *value)
{
	char *line = find_line(text, name, 0);

	cr_assert_not_null(line, "no %s line in:\n%s", name, text);
	cr_assert_str_eq(line + strlen(name), value, "%s, want %s%s", line, name, value);
	free(line);
}

/*
 * --run-as-root runs COMMAND as root and nothing else: the -o file is still
 * created as the invoking user (it was created as root).
 */
Test(trace_output, run_as_root_runs_only_the_command_as_root, .timeout = 120)
{
	struct run r;
	char *uid_file, *script;
	char *env[] = { "SUDO_UID=65534", "SUDO_GID=65534", NULL };
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--run-as-root", "--lib", CUDA_SIM_LIB,
			 "--", "/bin/sh", "-c", NULL, NULL };
	struct stat st;
	char *ids;

	run_init(&r);
	cr_assert_eq(chmod(r.dir, 0777), 0);
	uid_file = path_join(r.dir, "ids.txt");
	cr_assert(asprintf(&script, "{ id -u; id -g; } > '%s'", uid_file) > 0);
	argv[4] = r.events;
	argv[11] = script;
	run_cuprobe_env(&r, argv, env, false);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	ids = read_text(uid_file);
	cr_assert_not_null(ids, "the command did not run");
	cr_assert_str_eq(ids, "0\n0\n", "the command ran with ids:\n%s", ids);
	cr_assert_eq(stat(r.events, &st), 0, "no -o file");
	cr_assert_eq(st.st_uid, 65534, "-o file owned by uid %d, not the invoking user's", (int)st.st_uid);
	cr_assert_eq(st.st_gid, 65534, "-o file owned by gid %d", (int)st.st_gid);
	free(ids);
	free(uid_file);
	free(script);
	run_free(&r);
}

/* SUDO_UID without SUDO_GID (or the reverse) is refused; it meant root, silently. */
Test(trace_output, sudo_uid_without_sudo_gid_is_refused, .timeout = 60)
{
	char *uid_only[] = { "SUDO_UID=65534", NULL }, *gid_only[] = { "SUDO_GID=65534", NULL };
	char **envs[] = { uid_only, gid_only };
	size_t i;

	for (i = 0; i < 2; i++) {
		char *argv[] = { NULL, "trace", "--", "/bin/sh", "-c", NULL, NULL };
		char *mark, *script;
		struct run r;

		run_init(&r);
		mark = path_join(r.dir, "ran");
		cr_assert(asprintf(&script, "touch '%s'", mark) > 0);
		argv[5] = script;
		run_cuprobe_env(&r, argv, envs[i], false);
		cr_assert_eq(r.status, 2, "%s: exit %d: %s", envs[i][0], r.status, r.err_text);
		cr_assert(strstr(r.err_text, "SUDO_UID and SUDO_GID come together"), "%s", r.err_text);
		cr_assert_eq(count_lines(r.err_text), 1, "%s", r.err_text);
		cr_assert_neq(access(mark, F_OK), 0, "COMMAND ran");
		free(mark);
		free(script);
		run_free(&r);
	}
}

Test(trace_output, command_gets_the_sudo_users_groups_and_environment, .timeout = 120,
     .fini = remove_test_user)
{
	struct run r;
	char *useradd[] = { "/usr/sbin/useradd", "-M", "-N", "-g", "65534", "-G", test_group,
			    "-d", NULL, "-s", "/usr/sbin/nologin", test_user, NULL };
	char *groupadd[] = { "/usr/sbin/groupadd", test_group, NULL };
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB,
			 "--", NULL, NULL };
	char *home, *script, *text, uid_env[32], *env[] = { uid_env, "SUDO_GID=65534", NULL };
	struct passwd *pw;
	struct group *gr;

	run_init(&r);
	cr_assert_eq(chmod(r.dir, 0777), 0);
	snprintf(test_group, sizeof(test_group), "cpg%d", (int)getpid());
	cr_assert_eq(run_program(groupadd, NULL, NULL), 0, "groupadd %s failed", test_group);
	snprintf(test_user, sizeof(test_user), "cpu%d", (int)getpid());
	home = path_join(r.dir, "home");
	useradd[8] = home;
	cr_assert_eq(run_program(useradd, NULL, NULL), 0, "useradd %s failed", test_user);
	pw = getpwnam(test_user);
	gr = getgrnam(test_group);
	cr_assert(pw && gr, "%s or %s not found after useradd", test_user, test_group);
	snprintf(uid_env, sizeof(uid_env), "SUDO_UID=%u", (unsigned int)pw->pw_uid);

	/* Only the supplementary group may execute COMMAND: cuprobe must see that too. */
	script = path_join(r.dir, "show-identity");
	cr_assert(write_text(script, "#!/bin/sh\nid -G\necho \"HOME=$HOME\"\necho \"USER=$USER\"\n"
			     "echo \"LOGNAME=$LOGNAME\"\necho \"SHELL=$SHELL\"\n"));
	cr_assert_eq(chown(script, 0, gr->gr_gid), 0);
	cr_assert_eq(chmod(script, 0750), 0);
	argv[4] = r.events;
	argv[8] = script;
	run_cuprobe_env(&r, argv, env, false);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	text = r.out_text;
	cr_assert(groups_are(text, 65534, gr->gr_gid), "groups %.*s, want 65534 and %u",
		  (int)strcspn(text, "\n"), text, (unsigned int)gr->gr_gid);
	assert_line(text, "HOME=", home);
	assert_line(text, "USER=", test_user);
	assert_line(text, "LOGNAME=", test_user);
	assert_line(text, "SHELL=", "/usr/sbin/nologin");
	free(script);
	free(home);
	run_free(&r);
}

Test(trace_output, command_of_a_uid_without_passwd_entry_keeps_the_environment, .timeout = 120)
{
	struct run r;
	char *env[] = { "SUDO_UID=3999999", "SUDO_GID=3999998", NULL };
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB,
			 "--", "/bin/sh", "-c", "id -G; echo \"HOME=$HOME\"", NULL };

	run_init(&r);
	cr_assert_null(getpwuid(3999999), "uid 3999999 has a passwd entry on this machine");
	cr_assert_eq(chmod(r.dir, 0777), 0);
	argv[4] = r.events;
	run_cuprobe_env(&r, argv, env, false);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_eq(strncmp(r.out_text, "3999998\n", 8), 0, "groups: %s", r.out_text);
	assert_line(r.out_text, "HOME=", getenv("HOME") ? getenv("HOME") : "");
	run_free(&r);
}

/* ---- system-wide ---------------------------------------------------------------- */

Test(trace_system_wide, duration_ends_the_trace, .timeout = 120)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB, "-d", "0.5", NULL };
	struct cuprobe_summary s;

	run_init(&r);
	argv[4] = r.events;
	run_cuprobe(&r, argv);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_geq(r.elapsed, 0.5, "ended after %.2f s, before its duration", r.elapsed);
	/* Loading and unloading ~30 uprobes takes seconds; other tracers queue with it. */
	cr_assert_lt(r.elapsed, 30.0, "took %.1f s to end", r.elapsed);
	cr_assert(parse_cuprobe_summary(r.err_text, &s), "no summary:\n%s", r.err_text);
	r.json = load_json_lines(r.events);
	cr_assert_eq(s.delivered, json_array_size(r.json));
	run_free(&r);
}

Test(trace_system_wide, sees_a_process_it_did_not_start, .timeout = 120)
{
	struct run r;
	char *argv[] = { CUPROBE_BIN, "trace", "-v", "--json", "-o", NULL, "--lib", CUDA_SIM_LIB,
			 "-d", "4", NULL };
	char *drv_argv[] = { DRV_LAUNCH, "7", NULL };
	struct run_opts o;
	size_t i, launches = 0;
	int status, waited;
	pid_t tracer, drv;
	json_t *ev;
	char *err;

	run_init(&r);
	argv[5] = r.events;
	o = (struct run_opts){ .stdout_path = r.out, .stderr_path = r.err };
	tracer = fork();
	cr_assert_geq(tracer, 0);
	if (tracer == 0)
		_exit(run_program(argv, &o, NULL));
	/* -v says "tracing (N probes)" once everything is attached. */
	for (waited = 0; waited < 400; waited++) {
		err = read_text(r.err);
		if (err && strstr(err, "tracing ("))
			break;
		free(err);
		err = NULL;
		usleep(25 * 1000);
	}
	cr_assert_not_null(err, "cuprobe never said it was tracing");
	free(err);
	drv = start_background(drv_argv);
	cr_assert_eq(waitpid(drv, &status, 0), drv);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cr_assert_eq(waitpid(tracer, &status, 0), tracer);
	r.err_text = read_text(r.err);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x; stderr:\n%s", status,
		  r.err_text);
	r.json = load_json_lines(r.events);
	json_array_foreach(r.json, i, ev) {
		if (is(ev, "type", "launch") && jint(ev, "pid") == drv) {
			launches++;
			cr_assert(is(ev, "kernel", "vec_add"));
		}
	}
	cr_assert_eq(launches, 7, "system-wide trace saw %zu of drv_launch's 7 launches", launches);
	run_free(&r);
}

/*
 * Late attach: drv_launch looked its kernel up before cuprobe attached, so
 * no naming probe saw it; the handle is named from the driver's record (the
 * simulated driver keeps the name pointer where driver 580 keeps it).
 */
Test(late_attach, handles_from_before_the_attach_are_named_from_the_driver_record, .timeout = 120)
{
	char *target_argv[] = { DRV_LAUNCH, "100000000", NULL };
	char pid_text[32];
	struct run r;
	char *argv[] = { NULL, "trace", "-v", "--json", "-o", NULL, "-d", "1", "-p", pid_text, NULL };
	size_t i, launches = 0, from_driver = 0;
	pid_t target;
	int status;

	run_init(&r);
	target = start_background(target_argv);
	usleep(300000); /* past cuModuleGetFunction: launching */
	snprintf(pid_text, sizeof(pid_text), "%d", target);
	argv[5] = r.events;
	run_cuprobe(&r, argv);
	kill(target, SIGKILL);
	waitpid(target, &status, 0);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	r.json = load_json_lines(r.events);
	for (i = 0; i < json_array_size(r.json); i++) {
		json_t *e = json_array_get(r.json, i);

		if (strcmp(jstr(e, "type"), "launch"))
			continue;
		launches++;
		cr_assert_str_eq(jstr(e, "kernel"), "vec_add");
		if (json_object_get(e, "name_source") &&
		    !strcmp(jstr(e, "name_source"), "driver"))
			from_driver++;
	}
	cr_assert_gt(launches, 100, "too few launches seen in a second: %zu", launches);
	cr_assert_eq(from_driver, launches, "every launch's name came from the driver record");
	cr_assert_not_null(strstr(r.err_text, "0 of "), "unknown names reported:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "kernels named from the driver's records"), "%s",
			   r.err_text);
	run_free(&r);
}

/*
 * Without -o, text events and COMMAND's own output share stdout: every line
 * must stay whole (seen once as the workload's summary line inside an event
 * line).
 */
Test(trace_output, text_events_and_command_output_share_stdout_line_by_line, .timeout = 120)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--", DRV_LAUNCH, "2000", NULL };
	char *line, *save = NULL;
	size_t events = 0, workload_lines = 0;

	run_init(&r);
	run_cuprobe(&r, argv);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	for (line = strtok_r(r.out_text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "drv_launch:", 11)) {
			workload_lines++;
			continue;
		}
		/* "    0.000412    6466    6467 cuLaunchKernel ..." or the header */
		cr_assert(strstr(line, "TIME") || (strchr(line, '.') && (strstr(line, " cu") ||
			  strstr(line, " sched_process"))), "a broken line: %s", line);
		events++;
	}
	cr_assert_eq(workload_lines, 1);
	cr_assert_gt(events, 2000);
	run_free(&r);
}

/*
 * JSON on stdout stays parseable with a COMMAND: the command's own stdout
 * goes to cuprobe's stderr, as --help and the README say.
 */
Test(trace_output, json_on_stdout_gets_the_commands_output_moved_to_stderr, .timeout = 120)
{
	struct run r;
	char *argv[] = { NULL, "trace", "--json", "--", DRV_LAUNCH, "2000", NULL };
	char *line, *save = NULL;
	size_t events = 0;

	run_init(&r);
	run_cuprobe(&r, argv);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "drv_launch: pid="), "the command's output is on stderr");
	for (line = strtok_r(r.out_text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_error_t error;
		json_t *event = json_loads(line, 0, &error);

		cr_assert_not_null(event, "not JSON on stdout: %s (%s)", line, error.text);
		json_decref(event);
		events++;
	}
	cr_assert_gt(events, 2000);
	run_free(&r);
}
