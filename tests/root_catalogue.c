// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The probe catalogue and attach events end to end, as root, with the real
 * cuprobe and the simulated driver:
 *  - every family the simulated driver implements, counted exactly per API
 *    (drv_apis says what it called), decoded right, VMM memory back to 0;
 *  - driver files that appear after cuprobe started: a copy in another
 *    directory and a private copy in another mount namespace (system-wide),
 *    a command tree with no driver known at start (and what -v says of it),
 *    a fresh copy whose process calls cuInit at once (held: nothing missed),
 *    tracefs mounted by cuprobe where it was not (in a mount namespace of the
 *    test's own), and the guardian that continues a held process when
 *    cuprobe is killed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cuprobe.h"
#include "helpers.h"

struct run {
	char *dir;
	char *events;
	char *out;
	char *err;
	char *out_text;
	char *err_text;
	json_t *json;
	int status;
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

static void run_read(struct run *r)
{
	r->out_text = read_text(r->out);
	r->err_text = read_text(r->err);
	cr_assert_not_null(r->out_text);
	cr_assert_not_null(r->err_text);
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

static void run_cuprobe(struct run *r, char **argv, int expect)
{
	struct run_opts o = { .stdout_path = r->out, .stderr_path = r->err };

	argv[0] = CUPROBE_BIN;
	r->status = run_program(argv, &o, NULL);
	run_read(r);
	cr_assert_eq(r->status, expect, "cuprobe exited %d (want %d); stderr:\n%s", r->status, expect,
		     r->err_text);
}

/* The "drv_apis: api=NAME calls=N" lines of the workload's output. */
static long workload_calls(const char *out_text, const char *api)
{
	char needle[128];
	const char *at;

	snprintf(needle, sizeof(needle), "drv_apis: api=%s calls=", api);
	at = strstr(out_text, needle);
	return at ? atol(at + strlen(needle)) : 0;
}

/* ---- every family, counted and decoded ----------------------------------------- */

Test(families, every_catalogued_api_the_workload_called_is_counted_exactly, .timeout = 120)
{
	char *argv[] = { NULL, "stats", "--json", "-o", NULL, "--", DRV_APIS, "5", NULL };
	const struct cp_catalogue_entry *entries;
	size_t count, i, compared = 0;
	json_t *stats = NULL, *ev, *apis, *api, *memory;
	char *summary;
	struct run r;

	run_init(&r);
	argv[4] = r.events;
	run_cuprobe(&r, argv, 0);
	summary = find_line(r.out_text, "drv_apis: pid=", 0);
	cr_assert_not_null(summary, "drv_apis printed no summary:\n%s", r.out_text);
	r.json = load_json_lines(r.events);
	json_array_foreach(r.json, i, ev)
		if (!strcmp(jstr(ev, "type"), "stats") && jint(ev, "pid") == line_value(summary, "pid"))
			stats = ev;
	cr_assert_not_null(stats, "no stats report for drv_apis");
	apis = json_object_get(stats, "apis");

	/* Both ways: what the workload called, cuprobe counted; and nothing else. */
	count = cp_catalogue__entries(&entries);
	for (i = 0; i < count; i++) {
		long want = workload_calls(r.out_text, entries[i].symbol), got = 0;
		size_t j;

		if (!entries[i].probed)
			continue;
		json_array_foreach(apis, j, api)
			if (!strcmp(jstr(api, "api"), entries[i].symbol))
				got = jint(api, "calls");
		cr_assert_eq(got, want, "%s: the workload made %ld calls, cuprobe counted %ld",
			     entries[i].symbol, want, got);
		compared += want > 0;
	}
	cr_assert_geq(compared, 60, "only %zu catalogued APIs exercised", compared);

	memory = json_object_get(stats, "memory");
	cr_assert_eq(jint(memory, "peak_bytes"), line_value(summary, "peak_device_bytes"),
		     "peak device bytes (VMM physical memory included)");
	cr_assert_eq(jint(memory, "live_bytes"), 0, "device memory back to 0 at exit");
	cr_assert_eq(jint(memory, "vmm_live_bytes"), 0, "VMM physical memory back to 0 at exit");
	cr_assert_eq(jint(memory, "reserved_bytes"), 0, "address ranges freed");
	cr_assert_eq(jint(memory, "host_live_bytes"), 0);
	cr_assert_eq(jint(memory, "unknown_frees"), 0);
	cr_assert_eq(jint(memory, "allocations"), jint(memory, "frees"));
	cr_assert_null(strstr(r.err_text, "warning"), "%s", r.err_text);
	free(summary);
	run_free(&r);
}

static json_t *first_event(json_t *events, const char *api, const char *key, const char *value)
{
	json_t *ev;
	size_t i;

	json_array_foreach(events, i, ev) {
		json_t *v = key ? json_object_get(ev, key) : NULL;

		if (strcmp(jstr(ev, "api"), api))
			continue;
		if (!key || (json_is_string(v) && !strcmp(json_string_value(v), value)))
			return ev;
	}
	cr_assert_fail("no %s event%s%s%s", api, key ? " with " : "", key ? key : "", key ? value : "");
	return NULL;
}

/*
 * cudart on driver 580 makes a thread's context current by the retain alone,
 * and the driver sets it current from inside the retain: the probe sees that
 * cuCtxSetCurrent return before the retain has told it the context's
 * device. The main thread (which retained first) and the launching thread
 * must both have their work on device 0.
 */
Test(families, a_context_made_current_inside_the_retain_has_its_device, .timeout = 120)
{
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--", DRV_LAUNCH, "40", "1",
			 "--retain-only", NULL };
	size_t i, launches = 0, syncs = 0, inner_sets = 0;
	json_t *ev;
	struct run r;

	run_init(&r);
	argv[4] = r.events;
	run_cuprobe(&r, argv, 0);
	r.json = load_json_lines(r.events);
	json_array_foreach(r.json, i, ev) {
		const char *type = jstr(ev, "type");

		if (!strcmp(type, "context") && !strcmp(jstr(ev, "api"), "cuCtxSetCurrent") &&
		    jint(ev, "device") == -1)
			inner_sets++; /* the first one: its context not known yet */
		if (strcmp(type, "launch") && strcmp(type, "sync"))
			continue;
		cr_assert_eq(jint(ev, "device"), 0, "%s of tid %lld on device %lld", jstr(ev, "api"),
			     jint(ev, "tid"), jint(ev, "device"));
		launches += !strcmp(type, "launch");
		syncs += !strcmp(type, "sync") && jint(ev, "tid") == jint(ev, "pid");
	}
	cr_assert_eq(inner_sets, 1, "the set inside the first retain was not seen first");
	cr_assert_eq(launches, 40);
	cr_assert_gt(syncs, 0, "no main-thread syncs (blocking copies) to check");
	run_free(&r);
}

Test(families, records_carry_the_decoded_arguments, .timeout = 120)
{
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--", DRV_APIS, "1", NULL };
	long long granularity = 2 << 20;
	json_t *ev;
	struct run r;
	size_t i, physical_freed = 0;

	run_init(&r);
	argv[4] = r.events;
	run_cuprobe(&r, argv, 0);
	r.json = load_json_lines(r.events);

	ev = first_event(r.json, "cuMemsetD2D16_v2", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), 64 * 2 * 8, "64 16-bit elements x 8 rows");
	cr_assert_eq(jint(ev, "pitch"), 512);
	cr_assert_eq(jint(ev, "element_size"), 2);
	cr_assert_eq(jint(ev, "value"), 8);
	ev = first_event(r.json, "cuMemsetD32Async", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), 4096);
	cr_assert(json_is_true(json_object_get(ev, "async")));

	ev = first_event(r.json, "cuMemcpy2D_v2", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), 256 * 8);
	cr_assert_str_eq(jstr(ev, "direction"), "DtoH");
	ev = first_event(r.json, "cuMemcpy3D_v2", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), 128 * 4 * 2);
	cr_assert_str_eq(jstr(ev, "direction"), "HtoD");
	ev = first_event(r.json, "cuMemcpyBatchAsync_v2", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), 1000 + 512 + 24);
	cr_assert_eq(jint(ev, "count"), 3);
	ev = first_event(r.json, "cuMemcpyPeerAsync", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "direction"), "peer");
	cr_assert_eq(jint(ev, "bytes"), 4096);

	ev = first_event(r.json, "cuEventRecord", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "op"), "record");
	ev = first_event(r.json, "cuStreamWaitEvent", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "op"), "wait");
	/* Context-wide: the handle is the context the workload passed, not a stream. */
	ev = first_event(r.json, "cuCtxRecordEvent", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "op"), "record_context");
	cr_assert_not_null(json_object_get(ev, "context"));
	cr_assert_null(json_object_get(ev, "stream"));
	ev = first_event(r.json, "cuCtxWaitEvent", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "op"), "wait_context");
	cr_assert_str_eq(jstr(ev, "context"), jstr(first_event(r.json, "cuCtxRecordEvent", NULL, NULL), "context"));
	ev = first_event(r.json, "cuEventQuery", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "kind"), "event_query");
	cr_assert_eq(jint(ev, "result"), 0);
	ev = first_event(r.json, "cuCtxSynchronize_v2", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "kind"), "context");

	ev = first_event(r.json, "cuLaunchHostFunc", NULL, NULL);
	cr_assert_not_null(json_object_get(ev, "host_function"));
	ev = first_event(r.json, "cuLaunchCooperativeKernel", NULL, NULL);
	cr_assert(json_is_true(json_object_get(ev, "cooperative")));
	cr_assert_str_eq(jstr(ev, "kernel"), "vec_add");

	ev = first_event(r.json, "cuMemAllocFromPoolAsync", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), 12288);
	cr_assert_str_eq(jstr(ev, "kind"), "device_async");
	ev = first_event(r.json, "cuModuleLoad", NULL, NULL);
	cr_assert_str_eq(jstr(ev, "op"), "module_load");
	cr_assert_not_null(strstr(jstr(ev, "path"), "/vec_add.ptx"), "%s", jstr(ev, "path"));
	cr_assert_neq(jhex(ev, "handle"), 0);

	/* VMM: two handles made live, both freed: one by the unmap, one by the last release. */
	ev = first_event(r.json, "cuMemCreate", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), granularity);
	cr_assert_eq(jint(ev, "device"), 0);
	ev = first_event(r.json, "cuMemUnmap", NULL, NULL);
	cr_assert_eq(jint(ev, "bytes"), 2 * granularity, "one unmap over both mappings");
	json_array_foreach(r.json, i, ev) {
		json_t *freed = json_object_get(ev, "physical_bytes");

		if (json_is_integer(freed) && strcmp(jstr(ev, "api"), "cuMemCreate"))
			physical_freed += json_integer_value(freed);
	}
	cr_assert_eq(physical_freed, 2 * granularity, "every physical byte freed once");
	run_free(&r);
}

/* ---- attach events ------------------------------------------------------------- */

/* A system-wide cuprobe, started and ready (its probes and tracepoints are in). */
static pid_t start_system_wide(struct run *r)
{
	char *argv[] = { CUPROBE_BIN, "trace", "-v", "--json", "-o", r->events, "-d", "60", NULL };
	struct run_opts o = { .stdout_path = r->out, .stderr_path = r->err };
	pid_t pid = spawn_program(argv, &o);

	cr_assert(wait_for_text(r->err, "tracing (", 20), "cuprobe did not start:\n%s",
		  read_text(r->err));
	return pid;
}

static void stop_system_wide(struct run *r, pid_t pid)
{
	kill(pid, SIGINT);
	cr_assert_eq(wait_program(pid, 20), 0, "cuprobe did not stop cleanly");
	run_read(r);
	r->json = load_json_lines(r->events);
}

/* Launch records of pid. */
static size_t launches_of(json_t *events, long long pid)
{
	size_t i, n = 0;
	json_t *ev;

	json_array_foreach(events, i, ev)
		if (!strcmp(jstr(ev, "type"), "launch") && jint(ev, "pid") == pid)
			n++;
	return n;
}

/* The attach record for pid: the file it mapped was probed while tracing. */
static json_t *attach_of(json_t *events, long long pid)
{
	size_t i;
	json_t *ev;

	json_array_foreach(events, i, ev)
		if (!strcmp(jstr(ev, "type"), "attach") && jint(ev, "pid") == pid)
			return ev;
	return NULL;
}

static char *copy_driver(const char *dir)
{
	char *copy = path_join(dir, "libcuda.so.1"), command[1024];

	snprintf(command, sizeof(command), "cp '%s' '%s'", CUDA_SIM_LIB, copy);
	cr_assert_eq(system(command), 0);
	return copy;
}

/*
 * drv_launch (argv) run under a system-wide cuprobe with a copy of the driver
 * in r's folder (its path in *copy): the workload's summary line, its pid in it.
 */
static char *system_wide_with_a_copied_driver(struct run *r, char **argv, char **copy)
{
	char env_line[512], *env[] = { env_line, NULL }, *workload_out, *line;
	pid_t tracer;

	run_init(r);
	*copy = copy_driver(r->dir);
	snprintf(env_line, sizeof(env_line), "LD_LIBRARY_PATH=%s", r->dir);
	workload_out = path_join(r->dir, "workload.txt");
	tracer = start_system_wide(r);
	{
		struct run_opts o = { .stdout_path = workload_out, .extra_env = env };

		cr_assert_eq(run_program(argv, &o, NULL), 0);
	}
	stop_system_wide(r, tracer);
	line = find_line(read_text(workload_out), "drv_launch: pid=", 0);
	cr_assert_not_null(line);
	free(workload_out);
	return line;
}

Test(attach, system_wide_sees_a_driver_copied_to_another_directory, .timeout = 120)
{
	char *drv[] = { DRV_LAUNCH, "300", "--start-delay", "500", NULL };
	char *copy, *line;
	struct run r;
	json_t *attach;

	line = system_wide_with_a_copied_driver(&r, drv, &copy);
	cr_assert_eq(launches_of(r.json, line_value(line, "pid")), 300, "stderr:\n%s", r.err_text);
	attach = attach_of(r.json, line_value(line, "pid"));
	cr_assert_not_null(attach, "no attach record");
	cr_assert_str_eq(jstr(attach, "status"), "attached");
	cr_assert_str_eq(jstr(attach, "path"), copy);
	cr_assert(json_is_false(json_object_get(attach, "held")), "system-wide never holds");
	cr_assert_gt(jint(attach, "delay_ns"), 0);
	cr_assert_not_null(strstr(r.err_text, "attached while tracing"), "%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "1 process mapped it before then (0 held"), "%s",
			   r.err_text);
	/* The same, in the JSON output: one driver_file record for the copy. */
	{
		json_t *ev, *file = NULL;
		size_t i;

		json_array_foreach(r.json, i, ev)
			if (!strcmp(jstr(ev, "type"), "driver_file") && !strcmp(jstr(ev, "path"), copy)) {
				cr_assert_null(file, "two driver_file records for %s", copy);
				file = ev;
			}
		cr_assert_not_null(file, "no driver_file record for %s", copy);
		cr_assert_str_eq(jstr(file, "status"), "attached");
		cr_assert_eq(jint(file, "early_processes"), 1);
		cr_assert_eq(jint(file, "held_processes"), 0);
		cr_assert_eq(jint(file, "unheld_processes"), 1);
		cr_assert_eq(jint(file, "attach_delay_ns"), jint(file, "probes_live_ns") - jint(file, "first_mapped_ns"));
		cr_assert_gt(jint(file, "attach_delay_ns"), 0);
	}
	free(line);
	free(copy);
	run_free(&r);
}

/* Its cuInit may come before the probes are live: its exit is seen all the same. */
Test(attach, system_wide_sees_the_exit_of_a_process_that_mapped_a_driver_before_its_probes, .timeout = 120)
{
	char *drv[] = { DRV_LAUNCH, "20", NULL };
	char *copy, *line;
	long long pid;
	size_t exits = 0, i;
	struct run r;
	json_t *ev;

	line = system_wide_with_a_copied_driver(&r, drv, &copy);
	pid = line_value(line, "pid");
	cr_assert_not_null(attach_of(r.json, pid), "no attach record");
	json_array_foreach(r.json, i, ev)
		if (!strcmp(jstr(ev, "type"), "process") && !strcmp(jstr(ev, "kind"), "exit") &&
		    jint(ev, "pid") == pid)
			exits++;
	cr_assert_eq(exits, 1, "exit records of pid %lld: %zu\nstderr:\n%s", pid, exits, r.err_text);
	free(line);
	free(copy);
	run_free(&r);
}

Test(attach, system_wide_sees_a_private_copy_in_its_own_mount_namespace, .timeout = 120)
{
	char script[2048], *argv[] = { "/usr/bin/unshare", "-m", "/bin/sh", "-c", script, NULL };
	char *workload_out, *line, *mnt;
	struct run r;
	json_t *attach;
	pid_t tracer;

	run_init(&r);
	mnt = path_join(r.dir, "private");
	cr_assert_eq(mkdir(mnt, 0755), 0);
	workload_out = path_join(r.dir, "workload.txt");
	/* Only the new namespace sees the tmpfs, and the driver copied into it. */
	snprintf(script, sizeof(script),
		 "mount -t tmpfs cuprobe-test '%s' && cp '%s' '%s/' && LD_LIBRARY_PATH='%s' exec '%s' 400 --start-delay 500",
		 mnt, CUDA_SIM_LIB, mnt, mnt, DRV_LAUNCH);
	tracer = start_system_wide(&r);
	{
		struct run_opts o = { .stdout_path = workload_out };

		cr_assert_eq(run_program(argv, &o, NULL), 0);
	}
	stop_system_wide(&r, tracer);
	cr_assert_neq(access(path_join(mnt, "libcuda.so.1"), F_OK), 0,
		      "the copy must not be visible outside its namespace");
	line = find_line(read_text(workload_out), "drv_launch: pid=", 0);
	cr_assert_not_null(line);
	cr_assert_eq(launches_of(r.json, line_value(line, "pid")), 400, "stderr:\n%s", r.err_text);
	attach = attach_of(r.json, line_value(line, "pid"));
	cr_assert_not_null(attach);
	cr_assert_str_eq(jstr(attach, "status"), "attached");
	free(line);
	free(mnt);
	free(workload_out);
	run_free(&r);
}

Test(attach, a_command_tree_without_a_driver_known_at_start, .timeout = 120)
{
	char script[1024];
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--", "/bin/sh", "-c", script, NULL };
	long long pids[2] = { 0, 0 };
	size_t i, launches = 0;
	json_t *ev;
	struct run r;

	run_init(&r);
	argv[4] = r.events;
	snprintf(script, sizeof(script), "'%s' 50; '%s' 70", DRV_LAUNCH, DRV_LAUNCH);
	run_cuprobe(&r, argv, 0);
	r.json = load_json_lines(r.events);
	json_array_foreach(r.json, i, ev) {
		if (strcmp(jstr(ev, "type"), "launch"))
			continue;
		launches++;
		if (!pids[0])
			pids[0] = jint(ev, "pid");
		else if (jint(ev, "pid") != pids[0])
			pids[1] = jint(ev, "pid");
	}
	cr_assert_eq(launches, 120, "stderr:\n%s", r.err_text);
	cr_assert(pids[0] && pids[1] && pids[0] != pids[1], "launches from two processes");
	cr_assert_eq(launches_of(r.json, pids[0]), 50);
	cr_assert_eq(launches_of(r.json, pids[1]), 70);
	ev = attach_of(r.json, pids[0]);
	cr_assert_not_null(ev, "the first process's mapping is the attach event");
	cr_assert(json_is_true(json_object_get(ev, "held")));
	cr_assert_null(attach_of(r.json, pids[1]), "the second maps a covered file: no event");
	/* Said only with -v (the next test has it): nothing is wrong. */
	cr_assert_null(strstr(r.err_text, "waiting for a process to map one"), "%s", r.err_text);
	run_free(&r);
}

#define NO_DRIVER_YET "cuprobe: no libcuda.so.1 found yet (looked in LD_LIBRARY_PATH, " \
	"the command's RUNPATH, the ld.so cache and the standard library directories): " \
	"waiting for a process to map one\n"

Test(attach, with_v_a_command_tree_without_a_driver_says_it_waits_for_one, .timeout = 120)
{
	char script[1024];
	char *argv[] = { NULL, "trace", "-v", "--json", "-o", NULL, "--", "/bin/sh", "-c", script, NULL };
	char *line;
	struct run r;

	run_init(&r);
	argv[5] = r.events;
	snprintf(script, sizeof(script), "exec '%s' 30", DRV_LAUNCH);
	run_cuprobe(&r, argv, 0);
	cr_assert_not_null(strstr(r.err_text, NO_DRIVER_YET), "stderr:\n%s", r.err_text);
	/* Waiting, and then found: the launches are all there. */
	r.json = load_json_lines(r.events);
	line = find_line(r.out_text, "drv_launch: pid=", 0);
	cr_assert_not_null(line, "%s", r.out_text);
	cr_assert_eq(launches_of(r.json, line_value(line, "pid")), 30, "stderr:\n%s", r.err_text);
	free(line);
	run_free(&r);
}

Test(attach, a_fresh_copy_whose_process_launches_at_once_is_held_so_nothing_is_missed, .timeout = 120)
{
	char script[2048];
	char *argv[] = { NULL, "trace", "--json", "-o", NULL, "--", "/bin/sh", "-c", script, NULL };
	char *line, *fresh;
	struct run r;

	run_init(&r);
	argv[4] = r.events;
	fresh = path_join(r.dir, "fresh");
	cr_assert_eq(mkdir(fresh, 0755), 0);
	/* The copy is made after cuprobe started: a new inode nobody could know. */
	snprintf(script, sizeof(script), "cp '%s' '%s/' && LD_LIBRARY_PATH='%s' exec '%s' 100",
		 CUDA_SIM_LIB, fresh, fresh, DRV_LAUNCH);
	run_cuprobe(&r, argv, 0);
	r.json = load_json_lines(r.events);
	line = find_line(r.out_text, "drv_launch: pid=", 0);
	cr_assert_not_null(line, "%s", r.out_text);
	cr_assert_eq(launches_of(r.json, line_value(line, "pid")), 100, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "(1 held until then)"), "%s", r.err_text);
	free(line);
	free(fresh);
	run_free(&r);
}

Test(attach, a_fresh_runtime_copy_gets_the_runtime_probe, .timeout = 120)
{
#ifndef CUPROBE_HAVE_CUDART_LAUNCH
	cr_assert_fail("cudart_launch was not built (nvcc not found): the runtime path is untested");
#else
	char script[2048];
	char *argv[] = { NULL, "trace", "--json", "--runtime", "-o", NULL, "--", "/bin/sh", "-c",
			 script, NULL };
	struct cp_lib_set *cudarts = cp_lib_set__new();
	size_t i, rt = 0;
	char *fresh;
	json_t *ev;
	struct run r;

	run_init(&r);
	argv[5] = r.events;
	cr_assert_geq(cp_discover__for_exec(cudarts, "libcudart.so.13", CUDART_LAUNCH, NULL), 1);
	fresh = path_join(r.dir, "fresh");
	cr_assert_eq(mkdir(fresh, 0755), 0);
	snprintf(script, sizeof(script), "cp -L '%s' '%s/libcudart.so.13' && LD_LIBRARY_PATH='%s' exec '%s' 5",
		 cp_lib_set__path(cudarts, 0), fresh, fresh, CUDART_LAUNCH);
	run_cuprobe(&r, argv, 0);
	r.json = load_json_lines(r.events);
	json_array_foreach(r.json, i, ev) {
		if (!strcmp(jstr(ev, "type"), "rt_launch"))
			rt++;
		if (!strcmp(jstr(ev, "type"), "attach") && !strcmp(jstr(ev, "library"), "runtime") &&
		    strstr(jstr(ev, "file"), "libcudart"))
			cr_assert_str_eq(jstr(ev, "status"), "attached");
	}
	cr_assert_eq(rt, 5, "stderr:\n%s", r.err_text);
	cr_assert_not_null(strstr(r.err_text, "runtime file"), "%s", r.err_text);
	cp_lib_set__free(cudarts);
	free(fresh);
	run_free(&r);
#endif
}

/* The tracefs and debugfs lines of this process's mountinfo (malloc'd, "" when none). */
static char *tracing_mounts(void)
{
	char *all = read_text("/proc/self/mountinfo"), *line, *save = NULL, *out;
	size_t used = 0;

	cr_assert_not_null(all);
	out = calloc(1, strlen(all) + 1);
	cr_assert_not_null(out);
	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, " - tracefs ") || strstr(line, " - debugfs "))
			used += (size_t)sprintf(out + used, "%s\n", line);
	free(all);
	return out;
}

/*
 * Attach events need the syscalls:sys_enter_mmap tracepoint, found through
 * tracefs; where tracefs is not mounted, cuprobe mounts it on
 * /sys/kernel/tracing (and leaves it there: it never unmounts it). All in a
 * mount namespace of the test's own (unshare -m, private propagation): the
 * unmounts there never reach the tests and tracers of the host, and there is
 * nothing to put back. debugfs goes too, since looking into its tracing
 * directory would mount tracefs again (an automount) before cuprobe could.
 */
Test(attach, tracefs_is_mounted_where_it_is_not, .timeout = 120)
{
	char script[4096], *after_path, *after, *before_host, *after_host, *line, *save = NULL;
	char *argv[] = { NULL, "--propagation", "private", "-m", "/bin/sh", "-c", script, NULL };
	size_t i, launches = 0;
	long long first = 0;
	json_t *ev;
	struct run r;

	run_init(&r);
	after_path = path_join(r.dir, "after.txt");
	before_host = tracing_mounts();
	snprintf(script, sizeof(script),
		 "for m in $(findmnt -rn -t tracefs,debugfs -o TARGET | sort -r); do umount -l \"$m\" || exit 90; done\n"
		 "findmnt -rn -t tracefs,debugfs && exit 91\n"
		 "test -e /sys/kernel/tracing/events && exit 92\n"
		 "'%s' trace -v --json -o '%s' -- /bin/sh -c \"'%s' 50; '%s' 70\"\n"
		 "rc=$?\n"
		 "findmnt -rn -t tracefs -o TARGET > '%s'\n"
		 "exit $rc\n",
		 CUPROBE_BIN, r.events, DRV_LAUNCH, DRV_LAUNCH, after_path);
	/* run_cuprobe runs argv[0]: unshare here, which runs cuprobe in the namespace. */
	{
		struct run_opts o = { .stdout_path = r.out, .stderr_path = r.err };

		argv[0] = "/usr/bin/unshare";
		r.status = run_program(argv, &o, NULL);
		run_read(&r);
	}
	cr_assert_neq(r.status, 90, "could not unmount tracefs in the namespace:\n%s", r.err_text);
	cr_assert_neq(r.status, 91, "tracefs still mounted in the namespace:\n%s", r.err_text);
	cr_assert_neq(r.status, 92, "tracefs still visible in the namespace:\n%s", r.err_text);
	cr_assert_eq(r.status, 0, "stderr:\n%s", r.err_text);

	/* What says it was mounted: without it, raw_syscalls would see the mappings all the same. */
	cr_assert_not_null(strstr(r.err_text, "cuprobe: mounted tracefs on /sys/kernel/tracing\n"),
			   "stderr:\n%s", r.err_text);
	cr_assert_null(strstr(r.err_text, "cannot mount tracefs"), "%s", r.err_text);
	after = read_text(after_path);
	cr_assert_str_eq(after, "/sys/kernel/tracing\n", "tracefs mounted in the namespace after the run");
	/* The attach event came through the tracepoint on that tracefs: nothing missed. */
	r.json = load_json_lines(r.events);
	json_array_foreach(r.json, i, ev) {
		if (strcmp(jstr(ev, "type"), "launch"))
			continue;
		launches++;
		if (!first)
			first = jint(ev, "pid");
	}
	cr_assert_eq(launches, 120, "stderr:\n%s", r.err_text);
	cr_assert_eq(launches_of(r.json, first), 50);
	ev = attach_of(r.json, first);
	cr_assert_not_null(ev, "the first process's mapping is the attach event");
	cr_assert(json_is_true(json_object_get(ev, "held")));
	/*
	 * None of the host's tracing mounts went (one may have come: another
	 * test's cuprobe mounts tracefs on a host without it).
	 */
	after_host = tracing_mounts();
	for (line = strtok_r(before_host, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		cr_assert_not_null(strstr(after_host, line), "the host lost a mount: %s\nnow:\n%s",
				   line, after_host);
	free(after);
	free(after_path);
	free(before_host);
	free(after_host);
	run_free(&r);
}

Test(attach, the_guardian_continues_a_held_process_when_cuprobe_is_killed, .timeout = 120)
{
	char script[2048], *fresh;
	char *argv[] = { CUPROBE_BIN, "trace", "--json", "-o", NULL, "--", "/bin/sh", "-c", script, NULL };
	struct run_opts o;
	pid_t cuprobe, shell = 0, workload = 0;
	int status, i;
	struct run r;

	run_init(&r);
	argv[4] = r.events;
	o = (struct run_opts){ .stdout_path = r.out, .stderr_path = r.err };
	fresh = path_join(r.dir, "fresh");
	cr_assert_eq(mkdir(fresh, 0755), 0);
	snprintf(script, sizeof(script), "sleep 1; cp '%s' '%s/' && LD_LIBRARY_PATH='%s' '%s' 10",
		 CUDA_SIM_LIB, fresh, fresh, DRV_LAUNCH);
	/* Orphans come to us, so the shell's exit status can still be read. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	cuprobe = spawn_program(argv, &o);
	shell = child_named(cuprobe, "sh", 5);
	cr_assert_neq(shell, 0, "the command did not start");
	/* cuprobe cannot handle the attach event now: the process stays held. */
	kill(cuprobe, SIGSTOP);
	workload = child_named(shell, "drv_launch", 10);
	cr_assert_neq(workload, 0, "drv_launch did not start");
	for (i = 0; i < 500 && process_state(workload) != 'T'; i++)
		usleep(10000);
	cr_assert_eq(process_state(workload), 'T', "the mapping process is held (stopped)");
	kill(cuprobe, SIGKILL);
	cr_assert_eq(waitpid(cuprobe, &status, 0), cuprobe);
	/* The guardian continues it: it runs to the end, untraced. */
	cr_assert_eq(wait_program(shell, 30), 0, "the held command did not finish after cuprobe died");
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	free(fresh);
	run_free(&r);
}

Test(probes, the_simulated_driver_exports_nothing_the_catalogue_does_not_know)
{
	char *argv[] = { NULL, "probes", "--lib", CUDA_SIM_LIB, NULL };
	struct run r;

	run_init(&r);
	run_cuprobe(&r, argv, 0);
	cr_assert_not_null(strstr(r.out_text, "0 not in the catalogue"), "%s", r.out_text);
	run_free(&r);
}

Test(probes, a_file_that_is_not_elf_is_refused)
{
	char *argv[] = { NULL, "probes", "--lib", "/etc/hostname", NULL };
	struct run r;

	run_init(&r);
	run_cuprobe(&r, argv, 1);
	cr_assert_not_null(strstr(r.err_text, "not an ELF file"), "%s", r.err_text);
	run_free(&r);
}
