// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Python stacks end to end: the walker in the kernel, cp_python in the
 * agent, against gpu/py_launch.py run by a real CPython (Debian's
 * python3.11 by default; CUPROBE_TEST_PYTHON names another) on the
 * simulated driver. Every call the workload makes on a marked line is
 * counted by that line, exactly: started by the tracer (held until checked
 * and at each new stack), and attached to later (-p), from the attach on.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuprobe.h"
#include "helpers.h"

#define ITERATIONS 25
#define THREADS 12
#define THREAD_ITERATIONS 20
#define DEPTH 80
/* py_launch.py's own constants. */
#define SYNC_EVERY 10
#define ALLOCS 3
#define DEEP_CALLS 2

#define CALLS_MAX 256

static const char *python_bin(void)
{
	const char *override = getenv("CUPROBE_TEST_PYTHON");

	return override && *override ? override : PYTHON_BIN;
}

/* Records of the target, counted by (type, sync kind, stack id). */
struct call_count {
	uint32_t type;
	uint32_t kind;     /* CP_EV_SYNC: the sync kind */
	uint64_t stack;
	unsigned long count;
};

struct collected {
	pthread_mutex_t lock;
	pid_t target;
	struct call_count calls[CALLS_MAX];
	size_t call_count;
	unsigned long without_stack; /* launches, syncs, copies, allocations with no stack id */
	unsigned long new_stacks;
	bool overflow;
};

static int collect(void *ctx, const union cp_event *event)
{
	struct collected *c = ctx;
	uint32_t kind = 0;
	uint64_t stack;
	size_t i;

	if (event->hdr.pid != (uint32_t)c->target)
		return 0;
	switch (event->hdr.type) {
	case CP_EV_LAUNCH:
		stack = event->launch.py_stack;
		break;
	case CP_EV_SYNC:
		stack = event->sync.py_stack;
		kind = event->sync.kind;
		break;
	case CP_EV_COPY:
		stack = event->copy.py_stack;
		break;
	case CP_EV_ALLOC:
		stack = event->alloc.py_stack;
		break;
	case CP_EV_PY_STACK:
		pthread_mutex_lock(&c->lock);
		c->new_stacks++;
		pthread_mutex_unlock(&c->lock);
		return 0;
	default:
		return 0;
	}
	pthread_mutex_lock(&c->lock);
	if (!stack)
		c->without_stack++;
	for (i = 0; i < c->call_count; i++)
		if (c->calls[i].type == event->hdr.type && c->calls[i].kind == kind &&
		    c->calls[i].stack == stack)
			break;
	if (i == c->call_count && i < CALLS_MAX)
		c->calls[c->call_count++] = (struct call_count){ event->hdr.type, kind, stack, 0 };
	if (i < CALLS_MAX)
		c->calls[i].count++;
	else
		c->overflow = true;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* The lines of py_launch.py's marked calls: "# @name" ends each (a name may mark several lines). */
#define MARKED_MAX 32

struct marked {
	char name[32];
	int line;
};

static size_t find_markers(const char *path, struct marked *out)
{
	char *text = read_text(path), *line, *next;
	size_t count = 0;
	int number = 1;

	cr_assert_not_null(text, "cannot read %s", path);
	for (line = text; *line && count < MARKED_MAX; line = next, number++) {
		char *at;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		else
			next = line + strlen(line);
		at = strstr(line, "  # @");
		if (!at)
			continue;
		snprintf(out[count].name, sizeof(out[count].name), "%s", at + 5);
		out[count].line = number;
		count++;
	}
	free(text);
	return count;
}

static bool line_is(const struct marked *marks, size_t count, const char *name, int line)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (!strcmp(marks[i].name, name) && marks[i].line == line)
			return true;
	return false;
}

/* What the calls of one marked name add up to, resolved through cp_python. */
struct site {
	unsigned long calls;
	unsigned long truncated;  /* calls whose stack was cut */
	uint32_t depth;           /* of the last stack seen */
	const char *function;     /* innermost frame's */
	const char *caller;       /* the frame below's */
	const char *file;
};

static struct site site_of(struct cp_python *py, struct collected *c, const struct marked *marks,
			   size_t mark_count, const char *name, uint32_t type, uint32_t kind)
{
	struct cp_py_frame frames[CP_PY_STACK_MAX];
	struct site site = { 0 };
	size_t i;

	for (i = 0; i < c->call_count; i++) {
		struct cp_py_stack_info info;
		int depth;

		if (c->calls[i].type != type || c->calls[i].kind != kind || !c->calls[i].stack)
			continue;
		depth = cp_python__frames(py, (uint32_t)c->target, c->calls[i].stack, frames,
					  CP_PY_STACK_MAX, &info);
		cr_assert_gt(depth, 0, "stack %#llx of pid %d not resolved",
			     (unsigned long long)c->calls[i].stack, c->target);
		if (!line_is(marks, mark_count, name, frames[0].line) ||
		    !strstr(frames[0].file, "py_launch.py"))
			continue;
		site.calls += c->calls[i].count;
		site.truncated += info.truncated ? c->calls[i].count : 0;
		site.depth = info.depth;
		site.function = frames[0].function;
		site.caller = depth > 1 ? frames[1].function : NULL;
		site.file = frames[0].file;
	}
	return site;
}

static struct cp_tracer *open_tracer(bool hold)
{
	CP_OPTS(cp_tracer_opts, opts, .python_stacks = true, .hold_for_stacks = hold);
	struct cp_tracer *tracer;

	require_root();
	libbpf_set_print(NULL); /* the simulator lacks many symbols: libbpf would list each */
	tracer = cp_tracer__open(&opts);
	cr_assert_not_null(tracer, "cp_tracer__open: %s", strerror(errno));
	cr_assert_eq(cp_tracer__attach_driver(tracer, CUDA_SIM_LIB, NULL), 0);
	return tracer;
}

struct run {
	struct cp_tracer *tracer;
	struct cp_python *python;
	struct cp_agent *agent;
	struct collected collected;
};

static void start_agent(struct run *r)
{
	CP_OPTS(cp_python_opts, python_opts);
	CP_OPTS(cp_agent_opts, agent_opts, .on_event = collect, .ctx = &r->collected,
		.tracer = r->tracer);

	pthread_mutex_init(&r->collected.lock, NULL);
	r->python = cp_python__new(r->tracer, &python_opts);
	cr_assert_not_null(r->python);
	agent_opts.python = r->python;
	r->agent = cp_agent__new(cp_tracer__ring_fd(r->tracer), &agent_opts);
	cr_assert_not_null(r->agent);
	cr_assert_eq(cp_agent__start(r->agent), 0);
}

static void finish(struct run *r)
{
	cp_agent__free(r->agent);
	cp_python__free(r->python);
	cp_tracer__free(r->tracer);
	pthread_mutex_destroy(&r->collected.lock);
}

/* Every marked site, counted exactly; the walker's and the resolver's counters clean. */
static void check_sites(struct run *r)
{
	struct marked marks[MARKED_MAX];
	size_t mark_count = find_markers(PY_LAUNCH, marks);
	struct cp_python_stats stats;
	struct cp_counters counters;
	struct site s;

	cr_assert_geq(mark_count, 12, "py_launch.py's markers");
	cr_assert(!r->collected.overflow);
	cr_assert_eq(r->collected.without_stack, 0, "%lu calls carried no Python stack",
		     r->collected.without_stack);

	s = site_of(r->python, &r->collected, marks, mark_count, "launch-a", CP_EV_LAUNCH, 0);
	cr_expect_eq(s.calls, ITERATIONS);
	cr_expect_str_eq(s.function, "main_loop");
	cr_expect_str_eq(s.caller, "main");
	s = site_of(r->python, &r->collected, marks, mark_count, "launch-b", CP_EV_LAUNCH, 0);
	cr_expect_eq(s.calls, (ITERATIONS + 2) / 3);
	s = site_of(r->python, &r->collected, marks, mark_count, "copy", CP_EV_COPY, 0);
	cr_expect_eq(s.calls, (ITERATIONS + 3) / 4);
	/* A blocking copy's return is a sync record too, on the same line. */
	s = site_of(r->python, &r->collected, marks, mark_count, "copy", CP_EV_SYNC, CP_SYNC_COPY);
	cr_expect_eq(s.calls, (ITERATIONS + 3) / 4);
	s = site_of(r->python, &r->collected, marks, mark_count, "sync", CP_EV_SYNC, CP_SYNC_STREAM);
	cr_expect_eq(s.calls, ITERATIONS / SYNC_EVERY + 1);
	s = site_of(r->python, &r->collected, marks, mark_count, "alloc", CP_EV_ALLOC, 0);
	cr_expect_eq(s.calls, ALLOCS);
	cr_expect(s.function && strstr(s.function, "nested"), "the nested function: %s", s.function);
	cr_expect_str_eq(s.caller, "allocate");
	s = site_of(r->python, &r->collected, marks, mark_count, "thread-launch", CP_EV_LAUNCH, 0);
	cr_expect_eq(s.calls, THREADS * THREAD_ITERATIONS);
	cr_expect_str_eq(s.function, "thread_main");
	s = site_of(r->python, &r->collected, marks, mark_count, "thread-sync", CP_EV_SYNC,
		    CP_SYNC_STREAM);
	cr_expect_eq(s.calls, THREADS);
	s = site_of(r->python, &r->collected, marks, mark_count, "deep-launch", CP_EV_LAUNCH, 0);
	cr_expect_eq(s.calls, DEEP_CALLS);
	cr_expect_eq(s.truncated, DEEP_CALLS, "the deep stacks are marked cut");
	cr_expect_eq(s.depth, CP_PY_STACK_MAX);
	cr_expect_str_eq(s.caller, "recurse");
	/* Names of 1, 2 and 4 bytes a character, as UTF-8. */
	s = site_of(r->python, &r->collected, marks, mark_count, "latin1-launch", CP_EV_LAUNCH, 0);
	cr_expect_eq(s.calls, 1);
	cr_expect_str_eq(s.function, "caf\xc3\xa9");
	s = site_of(r->python, &r->collected, marks, mark_count, "ucs2-launch", CP_EV_LAUNCH, 0);
	cr_expect_eq(s.calls, 1);
	cr_expect_str_eq(s.function, "\xe5\x90\xaf\xe5\x8a\xa8_\xce\xbb");
	s = site_of(r->python, &r->collected, marks, mark_count, "ucs4-launch", CP_EV_LAUNCH, 0);
	cr_expect_eq(s.calls, 1);
	cr_expect_str_eq(s.function, "\xf0\xa0\x80\x80");
	cr_expect(s.file && s.file[0] == '/', "the file as the interpreter named it: %s", s.file);

	cr_assert_eq(cp_tracer__read_counters(r->tracer, &counters), 0);
	cr_expect_eq(counters.py_truncated, DEEP_CALLS, "cut stacks counted");
	cr_expect_eq(counters.py_unreadable, 0);
	cr_expect_eq(counters.py_stacks_lost, 0);
	cr_expect_eq(counters.py_collisions, 0);
	cr_expect_eq(counters.py_new_stacks, r->collected.new_stacks);
	cp_python__stats(r->python, &stats);
	cr_expect_eq(stats.processes, 1);
	cr_expect_eq(stats.processes_unknown, 0);
	cr_expect_eq(stats.stacks_unresolved, 0);
	cr_expect_eq(stats.frames_unreadable, 0);
	cr_expect_geq(stats.stacks, 12);
}

static char *workload_args[24];

static char *const *workload(const char *wait_file)
{
	static char iterations[16], threads[16], thread_iterations[16], depth[16];
	int n = 0;

	snprintf(iterations, sizeof(iterations), "%d", ITERATIONS);
	snprintf(threads, sizeof(threads), "%d", THREADS);
	snprintf(thread_iterations, sizeof(thread_iterations), "%d", THREAD_ITERATIONS);
	snprintf(depth, sizeof(depth), "%d", DEPTH);
#ifdef ASAN_RUNTIME
	/*
	 * The sanitizer build's simulated driver is instrumented: the interpreter
	 * that loads it needs the sanitizer's runtime first, and its own
	 * allocations are not the test's to check for leaks.
	 */
	workload_args[n++] = "/usr/bin/env";
	workload_args[n++] = "LD_PRELOAD=" ASAN_RUNTIME;
	workload_args[n++] = "ASAN_OPTIONS=detect_leaks=0";
#endif
	workload_args[n++] = (char *)python_bin();
	workload_args[n++] = PY_LAUNCH;
	workload_args[n++] = CUDA_SIM_LIB;
	workload_args[n++] = iterations;
	workload_args[n++] = "--threads";
	workload_args[n++] = threads;
	workload_args[n++] = "--thread-iterations";
	workload_args[n++] = thread_iterations;
	workload_args[n++] = "--depth";
	workload_args[n++] = depth;
	if (wait_file) {
		workload_args[n++] = "--wait-file";
		workload_args[n++] = (char *)wait_file;
	}
	workload_args[n] = NULL;
	return workload_args;
}

/* Runs argv held until the tracer knows it (as cuprobe runs COMMAND); its exit status. */
static int run_traced(struct cp_tracer *tracer, pid_t *target, char *const argv[])
{
	int go[2], status;
	char byte = 1;
	pid_t pid;

	cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		if (read(go[0], &byte, 1) != 1)
			_exit(120);
		dup2(null, STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(go[0]);
	*target = pid;
	cr_assert_eq(cp_tracer__add_pid(tracer, pid), 0);
	cr_assert_eq(write(go[1], &byte, 1), 1);
	close(go[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return status;
}

TestSuite(python, .timeout = 120);

Test(python, every_marked_call_counted_by_its_line)
{
	struct run r = { 0 };
	int status;

	r.tracer = open_tracer(true);
	start_agent(&r);
	status = run_traced(r.tracer, &r.collected.target, workload(NULL));
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s py_launch.py: status %#x",
		  python_bin(), status);
	cr_assert_eq(cp_agent__stop(r.agent), 0);
	cr_assert_gt(cp_python__version(r.python, (uint32_t)r.collected.target), CP_PY_VERSION(3, 9));
	check_sites(&r);
	finish(&r);
}

Test(python, attached_to_a_running_process_from_the_attach_on)
{
	char *dir = make_tmpdir(), *go = path_join(dir, "go"), *out = path_join(dir, "out");
	struct run_opts opts = { .stdout_path = out };
	struct run r = { 0 };
	pid_t pid;
	int status, fd;

	require_root();
	/* Running, its driver set up (cuInit, context, module, buffers), before any tracer. */
	pid = spawn_program(workload(go), &opts);
	cr_assert_gt(pid, 0);
	cr_assert(wait_for_text(out, "py_launch: ready", 30), "py_launch.py did not start");
	r.tracer = open_tracer(false);
	cr_assert_eq(cp_tracer__add_pid(r.tracer, pid), 0);
	r.collected.target = pid;
	start_agent(&r);
	cr_assert_eq(cp_python__add_pid(r.python, pid), 1, "a Python process");
	fd = open(go, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	/*
	 * Not held (-p): each new stack is resolved when the agent reads it. The
	 * workload waits, done, until every stack sent has been (the process's
	 * code objects are freed as it exits).
	 */
	cr_assert(wait_for_text(out, "py_launch: done", 60), "py_launch.py did not finish");
	for (;;) {
		struct cp_counters counters;
		unsigned long delivered;

		cr_assert_eq(cp_tracer__read_counters(r.tracer, &counters), 0);
		pthread_mutex_lock(&r.collected.lock);
		delivered = r.collected.new_stacks;
		pthread_mutex_unlock(&r.collected.lock);
		if (delivered == counters.py_new_stacks)
			break;
		usleep(1000);
	}
	cr_assert_eq(unlink(go), 0);
	status = wait_program(pid, 60);
	cr_assert_eq(status, 0, "%s py_launch.py: %d", python_bin(), status);
	cr_assert_eq(cp_agent__stop(r.agent), 0);
	check_sites(&r);
	finish(&r);
	remove_tree(dir);
	free(go);
	free(out);
	free(dir);
}

/* Another process: checked once at cuInit (held meanwhile), then its calls pay one look-up. */
Test(python, a_process_that_is_not_python_runs_unchanged)
{
	char *argv[] = { DRV_LAUNCH, "50", NULL };
	struct run r = { 0 };
	struct cp_counters counters;
	size_t i;
	int status;

	r.tracer = open_tracer(true);
	start_agent(&r);
	status = run_traced(r.tracer, &r.collected.target, argv);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "drv_launch: status %#x", status);
	cr_assert_eq(cp_agent__stop(r.agent), 0);
	cr_expect_eq(cp_python__version(r.python, (uint32_t)r.collected.target), 0);
	for (i = 0; i < r.collected.call_count; i++)
		cr_expect_eq(r.collected.calls[i].stack, 0);
	cr_expect_gt(r.collected.without_stack, 50);
	cr_expect_eq(r.collected.new_stacks, 0);
	cr_assert_eq(cp_tracer__read_counters(r.tracer, &counters), 0);
	cr_expect_eq(counters.py_walks, 0, "no walk in a process that is not Python");
	finish(&r);
}

/* Without python_stacks nothing changes: no stack ids, no stack records, no holds. */
Test(python, off_by_default)
{
	CP_OPTS(cp_tracer_opts, opts, .hold_for_stacks = true);
	struct run r = { 0 };
	struct cp_counters counters;
	size_t i;
	int status;

	require_root();
	libbpf_set_print(NULL);
	r.tracer = cp_tracer__open(&opts);
	cr_assert_not_null(r.tracer);
	cr_assert_eq(cp_tracer__attach_driver(r.tracer, CUDA_SIM_LIB, NULL), 0);
	start_agent(&r);
	status = run_traced(r.tracer, &r.collected.target, workload(NULL));
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	cr_assert_eq(cp_agent__stop(r.agent), 0);
	for (i = 0; i < r.collected.call_count; i++)
		cr_expect_eq(r.collected.calls[i].stack, 0);
	cr_expect_eq(r.collected.new_stacks, 0);
	cr_assert_eq(cp_tracer__read_counters(r.tracer, &counters), 0);
	cr_expect_eq(counters.py_walks, 0);
	finish(&r);
}

/* cuprobe COMMAND-line arguments: prefix, then the workload's. */
static void command_line(char **argv, size_t max, char *const *prefix, char *const *work)
{
	size_t n = 0, i;

	for (i = 0; prefix[i]; i++)
		argv[n++] = prefix[i];
	for (i = 0; work && work[i] && n + 1 < max; i++)
		argv[n++] = work[i];
	argv[n] = NULL;
}

/* Runs prefix (a cuprobe command line up to its "--") on the default workload: its JSON lines. */
static json_t *run_cuprobe_json(char *const *prefix, const char *out, const char *err)
{
	struct run_opts opts = { .stderr_path = err };
	char *argv[40];
	int status;

	require_root();
	command_line(argv, 40, prefix, workload(NULL));
	status = run_program(argv, &opts, NULL);
	cr_assert_eq(status, 0, "cuprobe %s: %d: %s", prefix[1], status, read_text(err));
	return load_json_lines(out);
}

/* The command line: trace --json --python, every launch carrying its frames. */
Test(python, trace_json_gives_each_call_its_frames)
{
	char *dir = make_tmpdir(), *out = path_join(dir, "trace.json"), *err = path_join(dir, "err");
	char *prefix[] = { CUPROBE_BIN, "trace", "--json", "--python", "--lib", CUDA_SIM_LIB, "-o",
			   out, "--", NULL };
	struct marked marks[MARKED_MAX];
	size_t mark_count = find_markers(PY_LAUNCH, marks), i, launch_a = 0, threads = 0;
	size_t deep = 0, with_frames = 0, ucs4 = 0;
	json_t *records, *record;

	records = run_cuprobe_json(prefix, out, err);
	json_array_foreach(records, i, record) {
		const char *type = jstr(record, "type");
		json_t *frames = json_object_get(record, "py_stack"), *inner;
		int line;

		cr_assert(strcmp(type, "py_stack"), "stacks are not records of their own any more");
		if (strcmp(type, "launch") && strcmp(type, "sync") && strcmp(type, "copy") &&
		    strcmp(type, "alloc"))
			continue;
		cr_assert(json_is_array(frames) && json_array_size(frames) > 0,
			  "a %s without its frames", type);
		cr_assert(json_object_get(record, "py_stack_id"));
		with_frames++;
		if (strcmp(type, "launch"))
			continue;
		inner = json_array_get(frames, 0);
		cr_assert(strstr(jstr(inner, "file"), "py_launch.py"));
		line = (int)jint(inner, "line");
		launch_a += line_is(marks, mark_count, "launch-a", line);
		threads += line_is(marks, mark_count, "thread-launch", line);
		if (line_is(marks, mark_count, "deep-launch", line)) {
			cr_expect(json_is_true(json_object_get(record, "py_stack_truncated")));
			cr_expect_eq(json_array_size(frames), CP_PY_STACK_MAX);
			deep++;
		}
		if (line_is(marks, mark_count, "ucs4-launch", line)) {
			cr_expect_str_eq(jstr(inner, "function"), "\xf0\xa0\x80\x80");
			ucs4++;
		}
	}
	cr_expect_eq(launch_a, ITERATIONS);
	cr_expect_eq(threads, THREADS * THREAD_ITERATIONS);
	cr_expect_eq(deep, DEEP_CALLS);
	cr_expect_eq(ucs4, 1);
	cr_expect_gt(with_frames, ITERATIONS + THREADS * THREAD_ITERATIONS);
	json_decref(records);
	remove_tree(dir);
	free(out);
	free(err);
	free(dir);
}

/*
 * What the python_lines rows of a marked name (it may mark several lines)
 * add up to in a stats report: field summed; *function: the first's.
 */
static long long marked_sum(json_t *report, const struct marked *marks, size_t mark_count,
			    const char *name, const char *field, const char **function)
{
	json_t *lines = json_object_get(report, "python_lines"), *row;
	long long sum = 0;
	bool found = false;
	size_t i;

	cr_assert(json_is_array(lines), "no python_lines in the report");
	json_array_foreach(lines, i, row) {
		json_t *file = json_object_get(row, "file");

		if (!json_is_string(file) || !strstr(json_string_value(file), "py_launch.py") ||
		    !line_is(marks, mark_count, name, (int)jint(row, "line")))
			continue;
		if (!found && function)
			*function = jstr(row, "function");
		found = true;
		sum += jint(row, field);
	}
	cr_assert(found, "no python_lines row for %s", name);
	return sum;
}

/* The final stats report of pid in a --json stats output. */
static json_t *final_report(json_t *records, long long pid)
{
	json_t *record;
	size_t i;

	json_array_foreach(records, i, record)
		if (!strcmp(jstr(record, "type"), "stats") && jint(record, "pid") == pid &&
		    json_is_true(json_object_get(record, "final")))
			return record;
	return NULL;
}

/*
 * stats --python's lines, exactly: launches, syncs and their time blocked,
 * allocations in a nested function, 12 threads, cut stacks, UTF-8 names.
 */
static void check_report_lines(json_t *report, bool bounds)
{
	struct marked marks[MARKED_MAX];
	size_t n = find_markers(PY_LAUNCH, marks);
	const char *function = NULL;

#define SUM(name, field) marked_sum(report, marks, n, name, field, &function)
	cr_assert_not_null(report, "no final report of the workload");
	cr_expect_eq(SUM("launch-a", "launches"), ITERATIONS);
	cr_expect_str_eq(function, "main_loop");
	if (bounds) {
		cr_expect_eq(SUM("launch-a", "kernels"), ITERATIONS, "each launch's kernel bounded");
		cr_expect_gt(SUM("launch-a", "gpu_max_ns"), 0);
	}
	cr_expect_eq(SUM("launch-b", "launches"), (ITERATIONS + 2) / 3);
	cr_expect_eq(SUM("sync", "syncs"), ITERATIONS / SYNC_EVERY + 1);
	cr_expect_eq(SUM("sync", "launches"), 0);
	cr_expect_gt(SUM("sync", "blocked_ns"), 0, "time blocked on the sync lines");
	cr_expect_gt(SUM("sync", "window_ns"), SUM("sync", "blocked_ns"));
	cr_expect_eq(SUM("copy", "copies"), (ITERATIONS + 3) / 4);
	cr_expect_eq(SUM("copy", "syncs"), (ITERATIONS + 3) / 4, "a blocking copy's wait");
	cr_expect_eq(SUM("alloc", "allocations"), ALLOCS);
	cr_expect(strstr(function, "nested"), "the nested function: %s", function);
	cr_expect_eq(SUM("alloc", "alloc_bytes"), ALLOCS * 4096);
	cr_expect_eq(SUM("thread-launch", "launches"), THREADS * THREAD_ITERATIONS);
	cr_expect_str_eq(function, "thread_main");
	cr_expect_eq(SUM("thread-sync", "syncs"), THREADS);
	cr_expect_eq(SUM("deep-launch", "launches"), DEEP_CALLS);
	cr_expect_eq(SUM("deep-launch", "calls_truncated"), DEEP_CALLS, "the cut stacks counted");
	cr_expect_eq(SUM("latin1-launch", "launches"), 1);
	cr_expect_str_eq(function, "caf\xc3\xa9");
	cr_expect_eq(SUM("ucs2-launch", "launches"), 1);
	cr_expect_str_eq(function, "\xe5\x90\xaf\xe5\x8a\xa8_\xce\xbb");
	cr_expect_eq(SUM("ucs4-launch", "launches"), 1);
	cr_expect_str_eq(function, "\xf0\xa0\x80\x80");
#undef SUM
}

/* No call of the workload left without its line. */
static void check_no_lost_lines(json_t *report)
{
	json_t *lines = json_object_get(report, "python_lines"), *row;
	size_t i;

	json_array_foreach(lines, i, row)
		cr_expect(!json_object_get(row, "no_stack") && !json_object_get(row, "unresolved"),
			  "calls without their line: %s", json_dumps(row, 0));
}

Test(python, stats_by_line_exactly)
{
	char *dir = make_tmpdir(), *out = path_join(dir, "stats.json"), *err = path_join(dir, "err");
	struct run_opts opts = { .stderr_path = err };
	char *prefix[] = { CUPROBE_BIN, "stats", "--json", "--python", "--timeline", "--lib",
			   CUDA_SIM_LIB, "-o", out, "--", NULL };
	char *argv[40];
	json_t *records, *record, *report = NULL;
	size_t i;
	int status;

	require_root();
	command_line(argv, 40, prefix, workload(NULL));
	status = run_program(argv, &opts, NULL);
	cr_assert_eq(status, 0, "cuprobe stats --python: %d: %s", status, read_text(err));
	records = load_json_lines(out);
	json_array_foreach(records, i, record)
		if (!strcmp(jstr(record, "type"), "stats") &&
		    json_is_true(json_object_get(record, "final")))
			report = record;
	cr_assert_str_eq(jstr(report, "python_by"), "innermost");
	check_report_lines(report, true);
	check_no_lost_lines(report);
	json_decref(records);
	remove_tree(dir);
	free(out);
	free(err);
	free(dir);
}

/* An interval report of pid in stats (being written) whose lines hold its last call, 𠀀's. */
static bool report_has_last_call(const char *stats, long long pid)
{
	char *text = read_text(stats), *line, *save = NULL;
	bool found = false;

	for (line = text ? strtok_r(text, "\n", &save) : NULL; line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *record = json_loads(line, 0, NULL), *row;
		size_t i;

		/* the line being written is not JSON yet */
		if (record && json_is_object(record) && json_is_string(json_object_get(record, "type")) &&
		    !strcmp(jstr(record, "type"), "stats") &&
		    json_integer_value(json_object_get(record, "pid")) == pid)
			json_array_foreach(json_object_get(record, "python_lines"), i, row)
				if (json_is_string(json_object_get(row, "function")) &&
				    !strcmp(jstr(row, "function"), "\xf0\xa0\x80\x80") &&
				    json_integer_value(json_object_get(row, "launches")) > 0)
					found = true;
		json_decref(record);
	}
	free(text);
	return found;
}

static bool wait_for_last_call(const char *stats, long long pid, int seconds)
{
	for (int i = 0; i < seconds * 20; i++) {
		if (report_has_last_call(stats, pid))
			return true;
		usleep(50 * 1000);
	}
	return false;
}

/*
 * Late, system-wide: stats --python started after the workload set its
 * driver up counts every call from the attach on, by line, exactly.
 */
Test(python, stats_by_line_system_wide_from_the_attach_on)
{
	char *dir = make_tmpdir(), *go = path_join(dir, "go"), *out = path_join(dir, "out");
	char *stats = path_join(dir, "stats.json"), *err = path_join(dir, "err");
	struct run_opts work_opts = { .stdout_path = out };
	struct run_opts cuprobe_opts = { .stderr_path = err };
	char *argv[] = { CUPROBE_BIN, "stats", "-v", "--json", "--python", "--lib", CUDA_SIM_LIB,
			 "-i", "0.1", "-o", stats, "-d", "90", NULL };
	json_t *records;
	pid_t pid, tracer;
	int fd;

	require_root();
	pid = spawn_program(workload(go), &work_opts);
	cr_assert_gt(pid, 0);
	cr_assert(wait_for_text(out, "py_launch: ready", 30), "py_launch.py did not start");
	tracer = spawn_program(argv, &cuprobe_opts);
	cr_assert_gt(tracer, 0);
	cr_assert(wait_for_text(err, "counting (", 30), "cuprobe did not start: %s", read_text(err));
	fd = open(go, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert(wait_for_text(out, "py_launch: done", 60), "py_launch.py did not finish");
	/*
	 * Held until an interval report counts its last call (the ring is read in
	 * order, so every call before it was read too): its code objects must
	 * live until the agent has read each new stack.
	 */
	cr_assert(wait_for_last_call(stats, pid, 60), "no report counted the last call: %s",
		  read_text(err));
	cr_assert_eq(unlink(go), 0);
	cr_assert_eq(wait_program(pid, 60), 0, "py_launch.py failed");
	/* Its exit reported, then cuprobe stopped. */
	usleep(500 * 1000);
	kill(tracer, SIGINT);
	cr_assert_eq(wait_program(tracer, 30), 0, "cuprobe stats: %s", read_text(err));
	records = load_json_lines(stats);
	check_report_lines(final_report(records, pid), false);
	json_decref(records);
	remove_tree(dir);
	free(go);
	free(out);
	free(stats);
	free(err);
	free(dir);
}

/*
 * The launches a run --python line counted under pid on the lines of a marked
 * name (by each stack's innermost frame, "FILE:LINE FUNCTION"); *cut: how
 * many of those stacks were shown as cut.
 */
static long long run_counted(json_t *entries, long long pid, const struct marked *marks,
			     size_t mark_count, const char *name, int *cut)
{
	long long sum = 0;
	json_t *entry;
	size_t i;

	json_array_foreach(entries, i, entry) {
		json_t *key = json_object_get(entry, "key");
		const char *stack = jstr(key, "stack"), *at = strstr(stack, "py_launch.py:");

		if (jint(key, "pid") != pid || !at ||
		    !line_is(marks, mark_count, name, atoi(at + strlen("py_launch.py:"))))
			continue;
		sum += jint(entry, "value");
		if (cut)
			*cut += strstr(stack, " (cut)") != NULL;
	}
	return sum;
}

/* cuprobe run --python: bpf/examples/py_launch_lines.bpf.c counts each launch under its stack. */
Test(python, run_hands_programs_the_stack_id)
{
	char *dir = make_tmpdir(), *out = path_join(dir, "run.json"), *err = path_join(dir, "err");
	char *prefix[] = { CUPROBE_BIN, "run", (char *)root_owned_copy(EXAMPLES_DIR
			   "/py_launch_lines.bpf.c"), "--python", "--json", "--lib", CUDA_SIM_LIB,
			   "-o", out, "--", NULL };
	struct marked marks[MARKED_MAX];
	size_t mark_count = find_markers(PY_LAUNCH, marks), i;
	json_t *lines, *line, *entries = NULL;
	long long pid = 0, total = 0;
	int cut = 0;

	lines = run_cuprobe_json(prefix, out, err);
	json_array_foreach(lines, i, line) {
		if (!strcmp(jstr(line, "type"), "map") && !strcmp(jstr(line, "map"), "py_launch_lines"))
			entries = json_object_get(line, "entries");
	}
	cr_assert(json_is_array(entries), "py_launch_lines not printed: %s", read_text(err));
	json_array_foreach(entries, i, line) {
		const char *stack = jstr(json_object_get(line, "key"), "stack");

		/* Every launch is a Python thread's, and every stack was resolved. */
		cr_expect(strstr(stack, "py_launch.py:"), "a stack not resolved: %s", stack);
		pid = jint(json_object_get(line, "key"), "pid");
		total += jint(line, "value");
	}
	cr_expect_eq(run_counted(entries, pid, marks, mark_count, "launch-a", NULL), ITERATIONS);
	cr_expect_eq(run_counted(entries, pid, marks, mark_count, "launch-b", NULL),
		     (ITERATIONS + 2) / 3);
	cr_expect_eq(run_counted(entries, pid, marks, mark_count, "thread-launch", NULL),
		     THREADS * THREAD_ITERATIONS);
	cr_expect_eq(run_counted(entries, pid, marks, mark_count, "deep-launch", &cut), DEEP_CALLS);
	cr_expect_gt(cut, 0, "the deep stacks are shown as cut");
	cr_expect_eq(run_counted(entries, pid, marks, mark_count, "latin1-launch", NULL), 1);
	cr_expect_eq(run_counted(entries, pid, marks, mark_count, "ucs2-launch", NULL), 1);
	cr_expect_eq(run_counted(entries, pid, marks, mark_count, "ucs4-launch", NULL), 1);
	cr_expect_eq(total, ITERATIONS + (ITERATIONS + 2) / 3 + THREADS * THREAD_ITERATIONS +
		     DEEP_CALLS + 3, "launches counted in all");
	json_decref(lines);
	remove_tree(dir);
	free(out);
	free(err);
	free(dir);
}
