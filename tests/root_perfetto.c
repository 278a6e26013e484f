// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe trace --perfetto FILE` end to end, as root: drv_launch on the
 * simulated driver, and FILE read by two parsers cuprobe does not own.
 * jansson, strictly, for the structure: the array streamed an event a line
 * (so a file cut after any line holds whole events), names before first
 * uses, every "b" with its "e", every "s" with its "f" at both bound ends,
 * the slices of a thread in order and never cutting each other. Chrome
 * DevTools' trace engine (tests/perfetto_check.mjs, npm @paulirish/trace_engine)
 * for what a viewer finds: processes and threads by name, API slices per
 * thread, kernel slices, flows bound at both ends, counters and instants,
 * all held against the workload's own summary line.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"

#define ENGINE_PACKAGE NPM_DIR "/node_modules/@paulirish/trace_engine/package.json"

/* One cuprobe run: the trace, cuprobe's output, and what both parsers made of the trace. */
struct run {
	char *dir;
	char *trace;
	char *records;    /* --json's records, when asked */
	char *out;
	char *err;
	char *out_text;
	char *err_text;
	json_t *events;   /* the trace's events, as jansson read them */
	json_t *facts;    /* perfetto_check.mjs's findings */
};

/* What the structure check counted. */
struct shape {
	size_t slices, kernels, flows;
};

static void run_free(struct run *r)
{
	json_decref(r->events);
	json_decref(r->facts);
	remove_tree(r->dir);
	free(r->dir);
	free(r->trace);
	free(r->records);
	free(r->out);
	free(r->err);
	free(r->out_text);
	free(r->err_text);
}

static long long ns_of(json_t *event, const char *key)
{
	json_t *v = json_object_get(event, key);

	cr_assert(json_is_number(v), "\"%s\" missing or not a number: %s", key,
		  json_dumps(event, JSON_COMPACT));
	cr_assert_geq(json_number_value(v), 0, "negative %s", key);
	return llround(json_number_value(v) * 1000);
}

static const char *str_of(json_t *event, const char *key)
{
	json_t *v = json_object_get(event, key);

	cr_assert(json_is_string(v), "\"%s\" missing or not a string: %s", key,
		  json_dumps(event, JSON_COMPACT));
	return json_string_value(v);
}

static char *key_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *key_of(const char *fmt, ...)
{
	static char key[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(key, sizeof(key), fmt, ap);
	va_end(ap);
	return key;
}

/* The place (pid, tid, ts) of an event, for matching a flow's end to the event it binds. */
static char *place_of(json_t *event)
{
	return key_of("%lld/%lld/%lld", json_integer_value(json_object_get(event, "pid")),
		      json_integer_value(json_object_get(event, "tid")), ns_of(event, "ts"));
}

/* The file, line by line: "[", one event a line (",\n" between), "]". */
static json_t *load_lines(const char *path)
{
	char *text = read_text(path), *line, *next;
	json_t *events = json_array();
	size_t lineno = 1;

	cr_assert_not_null(text, "no trace written at %s", path);
	cr_assert(!strncmp(text, "[\n", 2), "the trace does not open an array: %.40s", text);
	cr_assert(strlen(text) >= 4 && !strcmp(text + strlen(text) - 3, "\n]\n"),
		  "the trace does not end with \"]\": %s", text + (strlen(text) > 40 ? strlen(text) - 40 : 0));
	text[strlen(text) - 3] = '\0';
	for (line = text + 2; line; line = next) {
		json_error_t error;
		json_t *event;
		size_t len;

		lineno++;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		len = strlen(line);
		/* Every event but the last ends its line with the separator. */
		cr_assert(next ? len && line[len - 1] == ',' : len && line[len - 1] != ',',
			  "line %zu: %s", lineno, line);
		if (next)
			line[len - 1] = '\0';
		event = json_loads(line, JSON_REJECT_DUPLICATES, &error);
		cr_assert_not_null(event, "line %zu is not JSON (%s): %s", lineno, error.text, line);
		cr_assert(json_is_object(event), "line %zu is not an object", lineno);
		json_array_append_new(events, event);
	}
	free(text);
	return events;
}

/*
 * The structure both viewers rely on, checked strictly over every event:
 * names first, async pairs, flows bound at both ends, slices of a thread
 * in order without overlap. Returns what it counted.
 */
static struct shape check_structure(json_t *events)
{
	json_t *named = json_object(), *last_end = json_object(), *pairs = json_object();
	json_t *flows = json_object(), *slice_flows = json_object(), *kernel_flows = json_object();
	struct shape shape = { 0 };
	const char *id;
	json_t *event, *v;
	size_t i;

	json_array_foreach(events, i, event) {
		const char *ph = str_of(event, "ph"), *name = str_of(event, "name");
		long long pid = jint(event, "pid"), tid = jint(event, "tid"), ts = ns_of(event, "ts");

		str_of(event, "cat");
		if (!strcmp(ph, "M")) {
			cr_assert(!strcmp(name, "process_name") || !strcmp(name, "thread_name"), "%s", name);
			str_of(json_object_get(event, "args"), "name");
			json_object_set_new(named, !strcmp(name, "process_name") ? key_of("p%lld", pid) :
					    key_of("t%lld/%lld", pid, tid), json_true());
			continue;
		}
		cr_assert(json_object_get(named, key_of("p%lld", pid)),
			  "event %zu of pid %lld before its process_name", i, pid);
		if (!strcmp(ph, "X")) {
			long long dur = ns_of(event, "dur");
			json_t *end = json_object_get(last_end, key_of("%lld/%lld", pid, tid));

			cr_assert(json_object_get(named, key_of("t%lld/%lld", pid, tid)),
				  "slice of tid %lld before its thread_name", tid);
			/* drv_launch makes no call inside another: in order, one after the other. */
			cr_assert(!end || ts >= json_integer_value(end),
				  "slice %zu (%s at %lld ns) starts before the previous one of tid %lld ends (%lld)",
				  i, name, ts, tid, json_integer_value(end));
			json_object_set_new(last_end, key_of("%lld/%lld", pid, tid),
					    json_integer(ts + dur));
			if ((v = json_object_get(event, "bind_id"))) {
				cr_assert(json_is_true(json_object_get(event, "flow_out")));
				json_object_set_new(slice_flows, str_of(event, "bind_id"),
						    json_string(place_of(event)));
			}
			shape.slices++;
		} else if (!strcmp(ph, "b") || !strcmp(ph, "e")) {
			json_t *pair = json_object_get(pairs, str_of(event, "id"));

			if (!pair) {
				pair = json_object();
				json_object_set_new(pairs, str_of(event, "id"), pair);
			}
			cr_assert_null(json_object_get(pair, ph), "a second \"%s\" of id %s", ph,
				       str_of(event, "id"));
			json_object_set_new(pair, ph, json_incref(event));
			if (!strcmp(ph, "b")) {
				cr_assert_str_eq(str_of(event, "bind_id"), str_of(event, "id"));
				cr_assert(json_is_true(json_object_get(event, "flow_in")));
				json_object_set_new(kernel_flows, str_of(event, "id"),
						    json_string(place_of(event)));
			}
		} else if (!strcmp(ph, "s") || !strcmp(ph, "f")) {
			json_t *flow = json_object_get(flows, str_of(event, "id"));

			if (!flow) {
				flow = json_object();
				json_object_set_new(flows, str_of(event, "id"), flow);
			}
			cr_assert_null(json_object_get(flow, ph), "a second \"%s\" of flow %s", ph,
				       str_of(event, "id"));
			cr_assert_null(json_object_get(event, "bp"));
			json_object_set_new(flow, ph, json_string(place_of(event)));
		} else if (!strcmp(ph, "C")) {
			json_t *args = json_object_get(event, "args");

			cr_assert(json_is_object(args) && json_object_size(args) == 1);
			json_object_foreach(args, id, v)
				cr_assert(json_is_integer(v) && json_integer_value(v) >= 0);
		} else if (!strcmp(ph, "i")) {
			const char *scope = str_of(event, "s");

			cr_assert(!strcmp(scope, "p") || !strcmp(scope, "g"), "scope %s", scope);
		} else {
			cr_assert_fail("unexpected phase %s", ph);
		}
	}
	/* Every kernel's begin has its end, later, on the same track, under the same name. */
	json_object_foreach(pairs, id, v) {
		json_t *b = json_object_get(v, "b"), *e = json_object_get(v, "e");

		cr_assert(b && e, "kernel %s has no %s", id, b ? "end" : "begin");
		cr_assert_eq(jint(b, "pid"), jint(e, "pid"));
		cr_assert_str_eq(str_of(b, "name"), str_of(e, "name"));
		cr_assert_geq(ns_of(e, "ts"), ns_of(b, "ts"), "kernel %s ends before it begins", id);
		shape.kernels++;
	}
	/* Every flow starts where its launch slice does and ends where its kernel begins. */
	json_object_foreach(flows, id, v) {
		json_t *s = json_object_get(v, "s"), *f = json_object_get(v, "f");

		cr_assert(s && f, "flow %s has no %s", id, s ? "end" : "start");
		cr_assert(json_object_get(slice_flows, id), "flow %s: no slice binds it", id);
		cr_assert(json_object_get(kernel_flows, id), "flow %s: no kernel binds it", id);
		cr_assert_str_eq(json_string_value(s), json_string_value(json_object_get(slice_flows, id)),
				 "flow %s does not start at its launch slice", id);
		cr_assert_str_eq(json_string_value(f), json_string_value(json_object_get(kernel_flows, id)),
				 "flow %s does not end at its kernel", id);
		shape.flows++;
	}
	cr_assert_eq(json_object_size(slice_flows), shape.flows);
	cr_assert_eq(json_object_size(kernel_flows), shape.flows);
	json_decref(named);
	json_decref(last_end);
	json_decref(pairs);
	json_decref(flows);
	json_decref(slice_flows);
	json_decref(kernel_flows);
	return shape;
}

/* Chrome DevTools' trace engine on the trace: its findings (perfetto_check.mjs). */
static json_t *engine_facts(struct run *r)
{
	char *out = path_join(r->dir, "engine.json"), *err = path_join(r->dir, "engine.err");
	char *argv[] = { NODE_BIN, PERFETTO_CHECK, NPM_DIR, r->trace, NULL };
	struct run_opts o = { .stdout_path = out, .stderr_path = err };
	char *text, *err_text;
	json_error_t error;
	json_t *facts;
	int status;

	/* Never skipped: CI installs it (tests/install-deps.sh); without it this fails. */
	cr_assert_eq(access(ENGINE_PACKAGE, R_OK), 0,
		     "the DevTools trace engine is not installed at %s (%s): run tests/install-deps.sh",
		     NPM_DIR, strerror(errno));
	status = run_program(argv, &o, NULL);
	text = read_text(out);
	err_text = read_text(err);
	cr_assert_eq(status, 0, "%s %s exited %d:\n%s", NODE_BIN, PERFETTO_CHECK, status,
		     err_text ? err_text : "");
	facts = json_loads(text ? text : "", JSON_REJECT_DUPLICATES, &error);
	cr_assert_not_null(facts, "perfetto_check.mjs printed no JSON (%s): %s", error.text, text);
	free(text);
	free(err_text);
	free(out);
	free(err);
	return facts;
}

/*
 * `cuprobe trace --perfetto TRACE -o /dev/null -- drv_launch ARGS...`, or with
 * json `--json -o r->records`, expected to succeed.
 */
static struct shape trace_drv(struct run *r, bool json, ...)
{
	char *argv[32] = { CUPROBE_BIN, "trace", "--perfetto", NULL, "-o", "/dev/null", "--",
			   DRV_LAUNCH };
	struct run_opts o;
	struct cuprobe_summary summary;
	struct shape shape;
	int n = 8, status;
	va_list ap;
	char *arg;

	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->trace = path_join(r->dir, "trace.json");
	r->out = path_join(r->dir, "stdout.txt");
	r->err = path_join(r->dir, "stderr.txt");
	r->records = path_join(r->dir, "records.json");
	argv[3] = r->trace;
	if (json) {
		argv[5] = r->records;
		argv[6] = "--json";
		argv[7] = "--";
		argv[8] = DRV_LAUNCH;
		n = 9;
	}
	va_start(ap, json);
	while ((arg = va_arg(ap, char *)) && n < 31)
		argv[n++] = arg;
	va_end(ap);
	o = (struct run_opts){ .stdout_path = r->out, .stderr_path = r->err };
	status = run_program(argv, &o, NULL);
	r->out_text = read_text(r->out);
	r->err_text = read_text(r->err);
	cr_assert_not_null(r->out_text);
	cr_assert_not_null(r->err_text);
	cr_assert_eq(status, 0, "cuprobe exited %d; stderr:\n%s", status, r->err_text);
	cr_assert(parse_cuprobe_summary(r->err_text, &summary), "no summary line:\n%s", r->err_text);
	cr_assert_eq(summary.lost, 0, "records lost:\n%s", r->err_text);
	cr_assert_null(strstr(r->err_text, "warning"), "%s", r->err_text);
	r->events = load_lines(r->trace);
	shape = check_structure(r->events);
	r->facts = engine_facts(r);
	return shape;
}

/* The value at a path of keys (NULL-terminated) in root, or NULL. */
static json_t *vpath(json_t *v, va_list ap)
{
	const char *key;

	while (v && (key = va_arg(ap, const char *)))
		v = json_object_get(v, key);
	return v;
}

static json_t *path_get(json_t *root, ...)
{
	va_list ap;
	json_t *v;

	va_start(ap, root);
	v = vpath(root, ap);
	va_end(ap);
	return v;
}

/* An integer the engine found, 0 when it found nothing there. */
static long long fact(json_t *root, ...)
{
	va_list ap;
	json_t *v;

	va_start(ap, root);
	v = vpath(root, ap);
	va_end(ap);
	return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* The API slices the engine found on all threads. */
static size_t engine_slices(json_t *facts)
{
	json_t *threads, *thread;
	const char *pid, *tid;
	size_t total = 0;

	json_object_foreach(json_object_get(facts, "slices"), pid, threads)
		json_object_foreach(threads, tid, thread)
			total += fact(thread, "count", NULL);
	return total;
}

/* The calls drv_launch makes that cuprobe probes, by API, from its summary line. */
static void assert_calls(json_t *facts, const char *line)
{
	long long pid = line_value(line, "pid"), threads = line_value(line, "threads");
	long long launches = line_value(line, "launches"), host = line_value(line, "host_allocs");
	struct { const char *api; long long calls; } expected[] = {
		{ "cuInit", 1 },
		{ "cuDevicePrimaryCtxRetain", 1 },
		{ "cuCtxSetCurrent", threads + 1 }, /* the main thread and each launching one */
		{ "cuModuleLoadData", 1 },
		{ "cuModuleGetFunction", 1 },
		{ "cuMemAlloc_v2", line_value(line, "allocs") },
		{ "cuMemcpyHtoD_v2", line_value(line, "htod") },
		{ "cuMemAllocHost_v2", host },
		{ "cuMemFreeHost", host },
		{ "cuMemcpyDtoD_v2", line_value(line, "dtod") },
		{ "cuLaunchKernel", launches },
		{ "cuMemcpyDtoH_v2", line_value(line, "dtoh") },
		{ "cuMemFree_v2", line_value(line, "frees") },
		{ "cuModuleUnload", 1 },
	};
	json_t *slices = path_get(facts, "slices", key_of("%lld", pid), NULL), *thread;
	long long total = 0, want = 0, syncs = 0, seen;
	const char *key;
	size_t i;

	cr_assert(json_is_object(slices), "the engine found no API slices of pid %lld", pid);
	cr_assert_eq((long long)json_object_size(slices), threads + 1,
		     "slices on %zu threads of pid %lld, %lld expected", json_object_size(slices), pid,
		     threads + 1);
	json_object_foreach(slices, key, thread) {
		total += fact(thread, "count", NULL);
		/* Each launching thread launches its share on its own stream, then syncs it. */
		if (strtoll(key, NULL, 10) != pid)
			cr_assert_eq(fact(thread, "apis", "cuLaunchKernel", NULL), launches / threads,
				     "thread %s", key);
	}
	for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		seen = 0;
		json_object_foreach(slices, key, thread)
			seen += fact(thread, "apis", expected[i].api, NULL);
		cr_assert_eq(seen, expected[i].calls, "%s: %lld slices, the workload made %lld calls",
			     expected[i].api, seen, expected[i].calls);
		want += expected[i].calls;
	}
	json_object_foreach(slices, key, thread)
		syncs += fact(thread, "apis", "cuStreamSynchronize", NULL) +
			 fact(thread, "apis", "cuCtxSynchronize", NULL);
	cr_assert_eq(syncs, line_value(line, "syncs"));
	want += syncs;
	cr_assert_eq(total, want, "%lld API slices in pid %lld, the workload made %lld calls", total,
		     pid, want);
}

/* One drv_launch process: its names, calls, streams, kernels, flows, counters. */
static void assert_process(json_t *facts, const char *line)
{
	long long pid = line_value(line, "pid"), threads = line_value(line, "threads");
	long long launches = line_value(line, "launches");
	json_t *thread_names = path_get(facts, "threads", key_of("%lld", pid), NULL);
	json_t *processes = json_object_get(facts, "processes"), *name;
	long long per_thread = launches / threads, streams = 0, kernels = 0;
	char owner[64], expected[64];
	const char *key;

	snprintf(expected, sizeof(expected), "drv_launch (%lld)", pid);
	cr_assert_str_eq(json_string_value(json_object_get(processes, key_of("%lld", pid))), expected);
	cr_assert(json_is_object(thread_names), "no thread names in pid %lld", pid);
	cr_assert_eq((long long)json_object_size(thread_names), threads + 1);
	json_object_foreach(thread_names, key, name) {
		snprintf(expected, sizeof(expected), "drv_launch (%s)", key);
		cr_assert_str_eq(json_string_value(name), expected);
	}
	assert_calls(facts, line);

	/*
	 * Its streams: a track each, named for the stream and its process. A
	 * thread destroys its stream once done, so a later thread's may get the
	 * same handle: then they are one stream to cuprobe (the driver calls
	 * that create streams are not probed), and one track.
	 */
	snprintf(owner, sizeof(owner), "(device 0), drv_launch (%lld)", pid);
	json_object_foreach(processes, key, name) {
		const char *n = json_string_value(name);
		long long on_track = fact(facts, "kernels", "byPid", key, NULL);

		if (strncmp(n, "GPU stream 0x", 13) || strlen(n) < strlen(owner) ||
		    strcmp(n + strlen(n) - strlen(owner), owner))
			continue;
		streams++;
		kernels += on_track;
		/* Each thread's launches on it, its queue full of them, then empty. */
		cr_assert(on_track > 0 && on_track % per_thread == 0, "%lld kernels on %s", on_track, n);
		cr_assert_eq(fact(facts, "counters", key, "queue depth", "max", NULL), per_thread,
			     "queue depth of %s", n);
		cr_assert_eq(fact(facts, "counters", key, "queue depth", "last", NULL), 0);
	}
	cr_assert(streams >= 1 && streams <= threads, "%lld stream tracks for pid %lld", streams, pid);
	cr_assert_eq(kernels, launches, "%lld kernels on the streams of pid %lld, %lld launches",
		     kernels, pid, launches);

	/* Its start and end on its process's track. */
	cr_assert_eq(fact(facts, "instants", key_of("%lld", pid), "process start (cuInit)@p", NULL), 1);
	cr_assert_eq(fact(facts, "instants", key_of("%lld", pid), "exit (status 0)@p", NULL), 1);

	/* Live device memory: the three buffers at once, then what it leaked. */
	cr_assert_eq(fact(facts, "counters", key_of("%lld", pid), "live device memory bytes", "max", NULL),
		     line_value(line, "alloc_bytes") - line_value(line, "leaked_bytes"));
	cr_assert_eq(fact(facts, "counters", key_of("%lld", pid), "live device memory bytes", "last",
			  NULL), line_value(line, "leaked_bytes"));
}

static char *drv_summary(struct run *r, int nth)
{
	char *line = find_line(r->out_text, "drv_launch: pid=", nth);

	cr_assert_not_null(line, "drv_launch printed no summary line #%d; its output:\n%s", nth,
			   r->out_text);
	cr_assert_not_null(strstr(line, "result=ok"), "%s", line);
	return line;
}

Test(perfetto, threads_streams_kernels_and_flows, .timeout = 120)
{
	struct run r;
	struct shape shape = trace_drv(&r, false, "40", "3", "--leak", "4096", NULL);
	char *line = drv_summary(&r, 0);
	long long launches = line_value(line, "launches");

	cr_assert_eq(launches, 120);
	assert_process(r.facts, line);
	/* Every launch: one kernel slice, one flow bound at both ends, in both parsers. */
	cr_assert_eq(shape.kernels, (size_t)launches);
	cr_assert_eq(shape.flows, (size_t)launches);
	cr_assert_eq(fact(r.facts, "kernels", "begins", NULL), launches);
	cr_assert_eq(fact(r.facts, "kernels", "pairs", NULL), launches);
	cr_assert_eq(fact(r.facts, "kernels", "negative", NULL), 0);
	cr_assert_eq(fact(r.facts, "kernels", "names", "vec_add", NULL), launches);
	cr_assert_eq(fact(r.facts, "flows", "count", NULL), launches);
	cr_assert_eq(fact(r.facts, "flows", "crossing", NULL), launches);
	cr_assert_eq(fact(r.facts, "flows", "shapes", "X:cuLaunchKernel@process -> b:vec_add@stream",
			  NULL), launches);
	cr_assert_eq(shape.slices, engine_slices(r.facts));
	cr_assert_eq(fact(r.facts, "events", NULL), (long long)json_array_size(r.events));
	free(line);
	run_free(&r);
}

/* Whether parent's process has the instant of its fork of child. */
static long long fork_of(json_t *facts, const char *parent, const char *child)
{
	char name[64];

	snprintf(name, sizeof(name), "fork %lld@p", line_value(child, "pid"));
	return fact(facts, "instants", key_of("%lld", line_value(parent, "pid")), name, NULL);
}

Test(perfetto, forked_processes_each_named_with_their_own_ids, .timeout = 120)
{
	struct run r;
	struct shape shape = trace_drv(&r, false, "20", "2", "--fork", NULL);
	char *first = drv_summary(&r, 0), *second = drv_summary(&r, 1);
	long long launches = line_value(first, "launches") + line_value(second, "launches");

	cr_assert_neq(line_value(first, "pid"), line_value(second, "pid"));
	assert_process(r.facts, first);
	assert_process(r.facts, second);
	/* Flow and kernel ids stay unique across the two processes (each id paired once). */
	cr_assert_eq(shape.kernels, (size_t)launches);
	cr_assert_eq(shape.flows, (size_t)launches);
	cr_assert_eq(fact(r.facts, "flows", "crossing", NULL), launches);
	cr_assert_eq(fact(r.facts, "kernels", "pairs", NULL), launches);
	cr_assert_eq(shape.slices, engine_slices(r.facts));
	/* The parent's fork names the child: one of the two. */
	cr_assert_eq(fork_of(r.facts, first, second) + fork_of(r.facts, second, first), 1);
	free(first);
	free(second);
	run_free(&r);
}

Test(perfetto, the_usual_output_is_unchanged_beside_it, .timeout = 120)
{
	struct run r;
	struct shape shape = trace_drv(&r, true, "10", NULL);
	char *line = drv_summary(&r, 0);
	json_t *records = load_json_lines(r.records);

	/* The returns recorded for the slices are not among --json's records. */
	cr_assert_eq(count_events(records, "return", NULL), 0);
	cr_assert_eq((long long)count_events(records, "launch", NULL), line_value(line, "launches"));
	cr_assert_eq(shape.flows, (size_t)line_value(line, "launches"));
	json_decref(records);
	free(line);
	run_free(&r);
}

/*
 * cuprobe's peak resident memory (wait4's, in KiB; the workload's, smaller,
 * counts in it too) for `trace --perfetto` of LAUNCHES launches synchronized
 * every 100, as a long training loop does: nothing lost.
 */
static long traced_peak_kib(const char *launches)
{
	char *argv[] = { CUPROBE_BIN, "trace", "--perfetto", "/dev/null", "--", DRV_LAUNCH,
			 (char *)launches, "--sync-every", "100", NULL };
	char *dir = make_tmpdir(), *err_path = path_join(dir, "stderr"), *err;
	struct run_opts opts = { .stdout_path = "/dev/null", .stderr_path = err_path };
	struct cuprobe_summary summary;
	struct rusage usage;
	int status;

	status = run_program_rusage(argv, &opts, &usage);
	err = read_text(err_path);
	cr_assert_eq(status, 0, "status %d: %s", status, err);
	cr_assert(parse_cuprobe_summary(err, &summary), "no summary: %s", err);
	cr_assert_eq(summary.lost, 0);
	cr_assert_eq(summary.launches, strtoull(launches, NULL, 10));
	free(err);
	free(err_path);
	remove_tree(dir);
	free(dir);
	return usage.ru_maxrss;
}

/* A long trace does not grow cuprobe: 20 times the launches, the same peak (within 4 MiB). */
Test(perfetto, memory_stays_flat_however_long_the_trace, .timeout = 300)
{
	long short_run, long_run;

	require_root();
	short_run = traced_peak_kib("10000");
	long_run = traced_peak_kib("200000");
	cr_log_info("peak RSS: %ld KiB for 10,000 launches, %ld KiB for 200,000", short_run, long_run);
	cr_assert_leq(long_run, short_run + 4096, "peak RSS %ld KiB for 200,000 launches, %ld KiB for 10,000",
		      long_run, short_run);
}
