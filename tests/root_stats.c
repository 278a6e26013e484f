// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe stats` end to end against the simulated driver: exact launch
 * counts per kernel, exact live bytes after a known alloc/free pattern, a
 * deliberate leak reported with its size and the leaking function, latency
 * histograms that sum to the call counts, and --json parsed by jansson.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cuprobe.h"
#include "helpers.h"

struct stats_run {
	char *dir;
	char *reports;   /* -o file */
	char *out_text;  /* cuprobe's stdout: the workload's summary line */
	char *err_text;
	int status;
	json_t *lines;
};

/*
 * Runs `[launcher...] cuprobe stats --json -o F [extra...] -- [wrapper...]
 * drv_launch ARGS...`.
 */
static void run_stats_as(struct stats_run *run, const char *const *launcher,
			 const char *const *extra, const char *const *wrapper,
			 const char *const *workload)
{
	char *argv[48];
	char *out_path, *err_path;
	struct run_opts opts = { 0 };
	int n = 0, i;

	require_root();
	memset(run, 0, sizeof(*run));
	run->dir = make_tmpdir();
	run->reports = path_join(run->dir, "reports.json");
	out_path = path_join(run->dir, "stdout");
	err_path = path_join(run->dir, "stderr");
	for (i = 0; launcher && launcher[i]; i++)
		argv[n++] = (char *)launcher[i];
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "stats";
	argv[n++] = "--json";
	argv[n++] = "-o";
	argv[n++] = run->reports;
	for (i = 0; extra && extra[i]; i++)
		argv[n++] = (char *)extra[i];
	argv[n++] = "--";
	for (i = 0; wrapper && wrapper[i]; i++)
		argv[n++] = (char *)wrapper[i];
	argv[n++] = DRV_LAUNCH;
	for (i = 0; workload[i]; i++)
		argv[n++] = (char *)workload[i];
	argv[n] = NULL;
	opts.stdout_path = out_path;
	opts.stderr_path = err_path;
	run->status = run_program(argv, &opts, NULL);
	run->out_text = read_text(out_path);
	run->err_text = read_text(err_path);
	run->lines = load_json_lines(run->reports);
	free(out_path);
	free(err_path);
}

/* Whether one frame of a JSON stack names both function and file. */
static bool stack_names(json_t *stack, const char *function, const char *file)
{
	size_t i;

	cr_assert(json_is_array(stack), "no stack with --stacks");
	for (i = 0; i < json_array_size(stack); i++) {
		const char *frame = json_string_value(json_array_get(stack, i));

		if (frame && strstr(frame, function) && strstr(frame, file))
			return true;
	}
	return false;
}

static void run_stats(struct stats_run *run, const char *const *extra, const char *const *workload)
{
	run_stats_as(run, NULL, extra, NULL, workload);
}

static void free_run(struct stats_run *run)
{
	json_decref(run->lines);
	free(run->out_text);
	free(run->err_text);
	free(run->reports);
	remove_tree(run->dir);
	free(run->dir);
}

/* The nth line of a given type whose pid is pid (any pid when 0). */
static json_t *nth_of(json_t *lines, const char *type, long long pid, int nth)
{
	size_t i;

	for (i = 0; i < json_array_size(lines); i++) {
		json_t *line = json_array_get(lines, i);

		if (strcmp(jstr(line, "type"), type) || (pid && jint(line, "pid") != pid))
			continue;
		if (nth-- == 0)
			return line;
	}
	return NULL;
}

static json_t *api_entry(json_t *report, const char *api)
{
	json_t *apis = json_object_get(report, "apis");
	size_t i;

	for (i = 0; i < json_array_size(apis); i++)
		if (!strcmp(jstr(json_array_get(apis, i), "api"), api))
			return json_array_get(apis, i);
	return NULL;
}

static long long workload_value(const struct stats_run *run, int nth, const char *key)
{
	char *line = find_line(run->out_text, "drv_launch:", nth);
	long long value;

	cr_assert_not_null(line, "no drv_launch summary line in: %s", run->out_text);
	value = line_value(line, key);
	free(line);
	return value;
}

Test(stats, exact_launch_count_per_kernel, .timeout = 120)
{
	const char *const workload[] = { "1000", NULL };
	struct stats_run run;
	json_t *report, *kernels, *kernel, *launch_api;

	run_stats(&run, NULL, workload);
	cr_assert_eq(run.status, 0, "cuprobe stats exited %d: %s", run.status, run.err_text);
	report = nth_of(run.lines, "stats", workload_value(&run, 0, "pid"), 0);
	cr_assert_not_null(report, "no report for the workload");
	cr_assert(json_is_true(json_object_get(report, "final")));
	cr_assert(json_is_true(json_object_get(report, "exited")));
	cr_assert_eq(jint(report, "exit_status"), 0);
	kernels = json_object_get(report, "kernels");
	cr_assert_eq(json_array_size(kernels), 1);
	kernel = json_array_get(kernels, 0);
	cr_assert_str_eq(jstr(kernel, "kernel"), "vec_add");
	cr_assert_eq(jint(kernel, "launches"), 1000);
	/* grid 4 x block 256 per launch (1024 elements) */
	cr_assert_eq(jint(kernel, "threads"), 1000LL * 4 * 256);
	launch_api = api_entry(report, "cuLaunchKernel");
	cr_assert_not_null(launch_api);
	cr_assert_eq(jint(launch_api, "calls"), 1000);
	cr_assert_null(nth_of(run.lines, "leak_report", 0, 0), "a clean run was reported leaking");
	free_run(&run);
}

Test(stats, threads_and_forks_are_counted_per_process, .timeout = 120)
{
	const char *const workload[] = { "50", "3", "--fork", "--ex", "--library", NULL };
	struct stats_run run;
	int p;

	run_stats(&run, NULL, workload);
	cr_assert_eq(run.status, 0, "%s", run.err_text);
	for (p = 0; p < 2; p++) {
		long long pid = workload_value(&run, p, "pid");
		json_t *report = nth_of(run.lines, "stats", pid, 0);
		json_t *kernel;

		cr_assert_not_null(report, "no report for pid %lld", pid);
		kernel = json_array_get(json_object_get(report, "kernels"), 0);
		cr_assert_not_null(kernel);
		cr_assert_str_eq(jstr(kernel, "kernel"), "vec_add");
		cr_assert_eq(jint(kernel, "launches"), 150);
		cr_assert_eq(jint(api_entry(report, "cuLaunchKernelEx"), "calls"), 150);
	}
	free_run(&run);
}

Test(stats, exact_live_bytes_and_a_leak_named_by_its_function, .timeout = 120)
{
	const char *const extra[] = { "--stacks", NULL };
	const char *const workload[] = { "10", "1", "--leak", "65536", NULL };
	struct stats_run run;
	json_t *report, *memory, *leak, *site;

	run_stats(&run, extra, workload);
	cr_assert_eq(run.status, 0, "%s", run.err_text);
	report = nth_of(run.lines, "stats", workload_value(&run, 0, "pid"), 0);
	cr_assert_not_null(report);
	memory = json_object_get(report, "memory");
	cr_assert_not_null(memory);
	/* Three 4096-byte buffers allocated and freed, one host buffer, then the leak. */
	cr_assert_eq(jint(memory, "live_bytes"), 65536);
	cr_assert_eq(jint(memory, "live_allocations"), 1);
	cr_assert_eq(jint(memory, "peak_bytes"), 65536);
	cr_assert_eq(jint(memory, "host_live_bytes"), 0);
	/* Device allocations and frees only: the pinned host buffer is counted apart. */
	cr_assert_eq(workload_value(&run, 0, "host_allocs"), 1);
	cr_assert_eq(jint(memory, "allocations"), workload_value(&run, 0, "allocs"));
	cr_assert_eq(jint(memory, "frees"), workload_value(&run, 0, "frees"));
	cr_assert_eq(jint(memory, "host_live_allocations"), 0);
	cr_assert_eq(jint(memory, "unknown_frees"), 0);

	leak = nth_of(run.lines, "leak_report", workload_value(&run, 0, "pid"), 0);
	cr_assert_not_null(leak, "no leak report: %s", run.err_text);
	cr_assert_eq(jint(leak, "allocations"), 1);
	cr_assert_eq(jint(leak, "bytes"), workload_value(&run, 0, "leaked_bytes"));
	site = json_array_get(json_object_get(leak, "sites"), 0);
	cr_assert_not_null(site);
	cr_assert_eq(jint(site, "bytes"), 65536);
	cr_assert_str_eq(jstr(site, "api"), "cuMemAlloc_v2");
	cr_assert(stack_names(json_object_get(site, "stack"), "leak_device_buffer+", "drv_launch"),
		  "the leak's stack does not name leak_device_buffer in drv_launch");
	free_run(&run);
}

/*
 * The agent may read a record only after its process is gone (a loaded
 * machine). Pinned to one CPU with the workload real-time, the agent cannot
 * run at all until the workload stops: the first stack holds it until its
 * memory map is read, so the leak is still named.
 */
Test(stats, a_process_gone_before_the_agent_reads_still_has_its_stacks_named, .timeout = 120)
{
	const char *const launcher[] = { "/usr/bin/taskset", "-c", "0", NULL };
	const char *const extra[] = { "--stacks", "--lib", CUDA_SIM_LIB, NULL };
	const char *const wrapper[] = { "chrt", "-f", "10", NULL };
	const char *const workload[] = { "10", "1", "--leak", "65536", NULL };
	struct stats_run run;
	json_t *leak, *site;

	run_stats_as(&run, launcher, extra, wrapper, workload);
	cr_assert_eq(run.status, 0, "%s", run.err_text);
	leak = nth_of(run.lines, "leak_report", workload_value(&run, 0, "pid"), 0);
	cr_assert_not_null(leak, "no leak report: %s", run.err_text);
	site = json_array_get(json_object_get(leak, "sites"), 0);
	cr_assert_not_null(site);
	cr_assert_eq(jint(site, "bytes"), 65536);
	cr_assert(stack_names(json_object_get(site, "stack"), "leak_device_buffer+", "drv_launch"),
		  "the leak's stack does not name leak_device_buffer in drv_launch");
	free_run(&run);
}

Test(stats, latency_histograms_sum_to_the_call_counts, .timeout = 120)
{
	const char *const extra[] = { "--latency", NULL };
	const char *const workload[] = { "300", "2", NULL };
	struct stats_run run;
	json_t *report, *apis;
	size_t i, j;

	run_stats(&run, extra, workload);
	cr_assert_eq(run.status, 0, "%s", run.err_text);
	report = nth_of(run.lines, "stats", workload_value(&run, 0, "pid"), 0);
	cr_assert_not_null(report);
	apis = json_object_get(report, "apis");
	cr_assert_gt(json_array_size(apis), 5);
	for (i = 0; i < json_array_size(apis); i++) {
		json_t *api = json_array_get(apis, i);
		json_t *histogram = json_object_get(api, "histogram");
		long long sum = 0, previous_bound = 0;

		cr_assert(json_is_array(histogram), "%s has no histogram", jstr(api, "api"));
		for (j = 0; j < json_array_size(histogram); j++) {
			json_t *bucket = json_array_get(histogram, j);

			cr_assert_gt(jint(bucket, "le_ns"), previous_bound, "buckets out of order");
			previous_bound = jint(bucket, "le_ns");
			sum += jint(bucket, "count");
		}
		cr_assert_eq(sum, jint(api, "timed"), "%s: histogram sums to %lld, timed %lld",
			     jstr(api, "api"), sum, jint(api, "timed"));
		cr_assert_eq(jint(api, "timed"), jint(api, "calls"), "%s: calls not all timed",
			     jstr(api, "api"));
		cr_assert_eq(jint(api, "errors"), 0);
		cr_assert_leq(jint(api, "p50_ns"), jint(api, "p99_ns"));
		cr_assert_leq(jint(api, "p99_ns"), jint(api, "max_ns"));
	}
	cr_assert_eq(jint(api_entry(report, "cuLaunchKernel"), "calls"), 600);
	free_run(&run);
}

Test(stats, interval_reports_then_a_final_one, .timeout = 120)
{
	const char *const extra[] = { "--interval", "0.05", NULL };
	const char *const workload[] = { "60000", NULL };
	struct stats_run run;
	json_t *first, *last = NULL, *line;
	long long pid;
	int n = 0;

	run_stats(&run, extra, workload);
	cr_assert_eq(run.status, 0, "%s", run.err_text);
	pid = workload_value(&run, 0, "pid");
	first = nth_of(run.lines, "stats", pid, 0);
	cr_assert_not_null(first);
	while ((line = nth_of(run.lines, "stats", pid, n)))
		last = line, n++;
	cr_assert_geq(n, 2, "one report only: the interval never fired");
	cr_assert(json_is_false(json_object_get(first, "final")));
	cr_assert(json_is_true(json_object_get(last, "final")));
	cr_assert_eq(jint(json_array_get(json_object_get(last, "kernels"), 0), "launches"), 60000);
	free_run(&run);
}

Test(stats, command_exit_status_is_passed_on, .timeout = 120)
{
	const char *const workload[] = { "5", "1", "--exit-code", "5", NULL };
	struct stats_run run;

	run_stats(&run, NULL, workload);
	cr_assert_eq(run.status, 5);
	cr_assert_eq(jint(nth_of(run.lines, "stats", workload_value(&run, 0, "pid"), 0),
			  "exit_status"), 5);
	free_run(&run);
}

Test(stats, options_of_other_commands_are_refused)
{
	char *stats_runtime[] = { CUPROBE_BIN, "stats", "--runtime", "--", DRV_LAUNCH, "1", NULL };
	char *top_pid[] = { CUPROBE_BIN, "top", "-p", "1", NULL };
	char *trace_latency[] = { CUPROBE_BIN, "trace", "--latency", "--", DRV_LAUNCH, "1", NULL };
	char *bad_interval[] = { CUPROBE_BIN, "stats", "--interval", "0", "--", DRV_LAUNCH, "1", NULL };

	cr_assert_eq(run_program(stats_runtime, NULL, NULL), 2);
	cr_assert_eq(run_program(top_pid, NULL, NULL), 2);
	cr_assert_eq(run_program(trace_latency, NULL, NULL), 2);
	cr_assert_eq(run_program(bad_interval, NULL, NULL), 2);
}

Test(stats, top_without_a_terminal_says_so)
{
	char *argv[] = { CUPROBE_BIN, "top", NULL };
	char *dir = make_tmpdir(), *err_path = path_join(dir, "err"), *text;
	struct run_opts opts = { .stderr_path = err_path };

	cr_assert_eq(run_program(argv, &opts, NULL), 2);
	text = read_text(err_path);
	cr_assert_not_null(strstr(text, "needs a terminal"), "%s", text);
	cr_assert_eq(count_lines(text), 1);
	free(text);
	free(err_path);
	remove_tree(dir);
	free(dir);
}

Test(histogram, percentiles_of_log2_buckets)
{
	uint64_t h[CP_HIST_BUCKETS] = { 0 };

	cr_assert_eq(cp_histogram__percentile(h, 0.5), 0, "empty histogram");
	h[10] = 90; /* (512, 1024] ns */
	h[20] = 10; /* (512K, 1M] ns */
	cr_assert_eq(cp_histogram__total(h), 100);
	cr_assert_eq(cp_histogram__percentile(h, 0.5), 1024);
	cr_assert_eq(cp_histogram__percentile(h, 0.9), 1024);
	cr_assert_eq(cp_histogram__percentile(h, 0.91), 1u << 20);
	cr_assert_eq(cp_histogram__percentile(h, 1.0), 1u << 20);
}
