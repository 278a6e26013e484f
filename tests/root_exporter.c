// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe exporter` end to end: the real exporter on the simulated driver,
 * scraped by Debian's real Prometheus (protobuf, native histograms), its
 * counts read back through Prometheus's query API and compared with the
 * workloads' own summaries; the text expositions checked by promtool and by
 * their framing; and the requests it must refuse without stopping serving.
 * Every process a test starts is stopped and reaped in its fixture's
 * teardown, failed test or not.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"
#include "prom.h"

static char *dir;
static struct exporter_proc exporter;
static struct prometheus_proc prometheus;
static pid_t kernels_child;

static void setup(void)
{
	require_root();
	dir = make_tmpdir();
	memset(&exporter, 0, sizeof(exporter));
	memset(&prometheus, 0, sizeof(prometheus));
}

static void teardown(void)
{
	if (kernels_child > 0) {
		kill(kernels_child, SIGKILL);
		waitpid(kernels_child, NULL, 0);
		kernels_child = 0;
	}
	prometheus_stop(&prometheus);
	exporter_stop(&exporter);
	remove_tree(dir);
	free(dir);
	free(exporter.err_path);
	free(prometheus.err_path);
}

TestSuite(exporter, .init = setup, .fini = teardown);
TestSuite(http, .init = setup, .fini = teardown);

struct workload {
	pid_t pid;
	char *out_path;
	long long launches, allocs, frees, htod, dtoh, dtod, copy_bytes;
	int status;
};

static void workload_start(struct workload *w, const char *name, const char *iterations,
			   const char *threads)
{
	char *argv[] = { DRV_LAUNCH, (char *)iterations, (char *)threads, NULL };
	struct run_opts opts = { 0 };

	memset(w, 0, sizeof(*w));
	w->out_path = path_join(dir, name);
	opts.stdout_path = w->out_path;
	w->pid = spawn_program(argv, &opts);
}

static long long summary_value(const char *text, const char *key)
{
	char *line = find_line(text, "drv_launch:", 0);
	long long value;

	cr_assert_not_null(line, "no drv_launch summary line in: %s", text ? text : "(nothing)");
	value = line_value(line, key);
	free(line);
	cr_assert_geq(value, 0, "no %s= on the summary line", key);
	return value;
}

static void workload_wait(struct workload *w)
{
	char *text;

	w->status = wait_program(w->pid, 120);
	cr_assert_eq(w->status, 0, "drv_launch exited with %d", w->status);
	text = read_text(w->out_path);
	cr_assert_eq(summary_value(text, "pid"), w->pid);
	w->launches = summary_value(text, "launches");
	w->allocs = summary_value(text, "allocs");
	w->frees = summary_value(text, "frees");
	w->htod = summary_value(text, "htod");
	w->dtoh = summary_value(text, "dtoh");
	w->dtod = summary_value(text, "dtod");
	w->copy_bytes = summary_value(text, "copy_bytes");
	free(text);
	free(w->out_path);
}

/* The value of a query that must have one sample; fails the test after 30 s without. */
static double query(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static double query(const char *fmt, ...)
{
	char promql[512];
	double value = 0, deadline = now_seconds() + 30;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(promql, sizeof(promql), fmt, ap);
	va_end(ap);
	while (!prom_value(prometheus.port, promql, &value)) {
		cr_assert_lt(now_seconds(), deadline, "no sample for %s in 30 s", promql);
		usleep(250000);
	}
	return value;
}

static void start_both(void)
{
	static const char *const args[] = { "-i", "0.5", "--latency", NULL };

	exporter_start(&exporter, dir, args);
	prometheus_start(&prometheus, dir, exporter.port);
	cr_assert_eq(prom_wait_value(prometheus.port, "up{job=\"cuprobe\"}", 1, 30), 1,
		     "Prometheus never scraped the exporter: %s", read_text(prometheus.err_path));
}

/* ---- the counts, through Prometheus ------------------------------------------------------- */

Test(exporter, prometheus_reads_the_exact_counts_of_each_workload, .timeout = 180)
{
	struct workload w[2];
	char launches_query[128];
	int i;

	start_both();
	/* Two processes at once, one with two threads. */
	workload_start(&w[0], "a.out", "300", "2");
	workload_start(&w[1], "b.out", "200", "1");
	workload_wait(&w[0]);
	workload_wait(&w[1]);
	cr_assert_eq(w[0].launches, 600);
	cr_assert_eq(w[1].launches, 200);
	for (i = 0; i < 2; i++) {
		long long pid = w[i].pid;

		/* Scrapes are 1 s apart and the exporter reads its maps every 0.5 s: wait for them. */
		snprintf(launches_query, sizeof(launches_query),
			 "sum(cuprobe_kernel_launches_total{pid=\"%lld\"})", pid);
		cr_assert_eq(prom_wait_value(prometheus.port, launches_query, (double)w[i].launches, 30),
			     (double)w[i].launches, "%s", launches_query);
		cr_assert_eq(query("sum(cuprobe_kernel_launches_total{pid=\"%lld\",kernel=\"vec_add\"})", pid),
			     (double)w[i].launches);
		cr_assert_eq(query("sum(cuprobe_api_calls_total{pid=\"%lld\",api=\"cuLaunchKernel\"})", pid),
			     (double)w[i].launches);
		cr_assert_eq(query("sum(cuprobe_api_calls_total{pid=\"%lld\",api=\"cuInit\"})", pid), 1);
		cr_assert_eq(query("sum(cuprobe_api_errors_total{pid=\"%lld\"})", pid), 0);
		cr_assert_eq(query("sum(cuprobe_device_allocations_total{pid=\"%lld\"})", pid),
			     (double)w[i].allocs);
		cr_assert_eq(query("sum(cuprobe_device_frees_total{pid=\"%lld\"})", pid), (double)w[i].frees);
		cr_assert_eq(query("sum(cuprobe_copies_total{pid=\"%lld\",direction=\"HtoD\"})", pid),
			     (double)w[i].htod);
		cr_assert_eq(query("sum(cuprobe_copies_total{pid=\"%lld\",direction=\"DtoH\"})", pid),
			     (double)w[i].dtoh);
		cr_assert_eq(query("sum(cuprobe_copies_total{pid=\"%lld\",direction=\"DtoD\"})", pid),
			     (double)w[i].dtod);
		cr_assert_eq(query("count(cuprobe_copies_total{pid=\"%lld\"})", pid), 3,
			     "copies in a direction drv_launch does not make");
		cr_assert_eq(query("sum(cuprobe_copy_bytes_total{pid=\"%lld\"})", pid), (double)w[i].copy_bytes);
		/* The native histogram (protobuf) was ingested: its count is the launches. */
		cr_assert_eq(query("histogram_count(sum(cuprobe_api_latency_seconds{api=\"cuLaunchKernel\",pid=\"%lld\"}))", pid),
			     (double)w[i].launches);
		cr_assert_gt(query("histogram_sum(sum(cuprobe_api_latency_seconds{api=\"cuLaunchKernel\",pid=\"%lld\"}))", pid),
			     0);
		/* Labels read from /proc at cuInit. */
		cr_assert_eq(query("count(cuprobe_kernel_launches_total{pid=\"%lld\",comm=\"drv_launch\",gpu=\"0\"})", pid), 1);
	}
	cr_assert_eq(query("up{job=\"cuprobe\"}"), 1);
	cr_assert_eq(query("sum(cuprobe_records_lost_total)"), 0);
	cr_assert_eq(query("sum(cuprobe_map_full_total)"), 0);
	cr_assert_geq(query("cuprobe_processes{status=\"exited\"}"), 2, "exited processes are kept");
	cr_assert_eq(exporter_stop(&exporter), 0, "SIGTERM must end the exporter with status 0: %s",
		     read_text(exporter.err_path));
}

/* ---- the expositions ---------------------------------------------------------------------- */

static void run_small_workload(void)
{
	struct workload w;

	workload_start(&w, "w.out", "20", "1");
	workload_wait(&w);
	usleep(1200000); /* a refresh (0.5 s) has read it */
}

Test(http, promtool_accepts_the_text_exposition, .timeout = 120)
{
	static const char *const args[] = { "-i", "0.5", "--latency", NULL };
	char *path = path_join(dir, "metrics.txt"), *out_path = path_join(dir, "promtool.out"), *type;
	char *argv[] = { "/bin/sh", "-c", "exec " PROMTOOL_BIN " check metrics < \"$0\"", path, NULL };
	struct run_opts opts = { .stdout_path = out_path, .stderr_path = out_path };
	struct http_reply r;
	char *out;
	int status;

	exporter_start(&exporter, dir, args);
	run_small_workload();
	cr_assert(http_get(exporter.port, "/metrics", NULL, &r));
	cr_assert_eq(r.status, 200);
	type = http_header(&r, "Content-Type");
	cr_assert_str_eq(type, "text/plain; version=0.0.4; charset=utf-8");
	free(type);
	/* Every kind of series is there: counters, gauges, histograms. */
	cr_assert_not_null(strstr(r.body, "\ncuprobe_kernel_launches_total{"));
	cr_assert_not_null(strstr(r.body, "\ncuprobe_api_latency_seconds_bucket{"));
	cr_assert_not_null(strstr(r.body, "\ncuprobe_processes{status=\"exited\"}"));
	cr_assert(write_text(path, r.body));
	status = run_program(argv, &opts, NULL);
	out = read_text(out_path);
	cr_assert_eq(status, 0, "promtool check metrics: %s", out ? out : "");
	cr_assert(!out || !*out, "promtool had something to say: %s", out);
	free(out);
	http_reply_free(&r);
	free(path);
	free(out_path);
}

Test(http, openmetrics_and_protobuf_are_served_as_asked, .timeout = 120)
{
	static const char *const args[] = { "-i", "0.5", "--latency", NULL };
	struct http_reply r;
	size_t at = 0, families = 0;
	char *type;

	exporter_start(&exporter, dir, args);
	run_small_workload();
	cr_assert(http_get(exporter.port, "/metrics", "application/openmetrics-text; version=1.0.0", &r));
	cr_assert_eq(r.status, 200);
	type = http_header(&r, "Content-Type");
	cr_assert_not_null(type);
	cr_assert_eq(strncmp(type, "application/openmetrics-text", 28), 0, "Content-Type %s", type);
	free(type);
	cr_assert_geq(r.body_len, 6);
	cr_assert_str_eq(r.body + r.body_len - 6, "# EOF\n", "OpenMetrics must end with # EOF");
	cr_assert_eq(strstr(r.body, "# EOF"), r.body + r.body_len - 6, "# EOF before the end");
	cr_assert_not_null(strstr(r.body, "# TYPE cuprobe_kernel_launches counter\n"));
	cr_assert_not_null(strstr(r.body, "\ncuprobe_kernel_launches_total{"));
	http_reply_free(&r);

	cr_assert(http_get(exporter.port, "/metrics",
			   "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited",
			   &r));
	cr_assert_eq(r.status, 200);
	type = http_header(&r, "Content-Type");
	cr_assert_not_null(type);
	cr_assert_not_null(strstr(type, "proto=io.prometheus.client.MetricFamily"), "Content-Type %s", type);
	free(type);
	/* Length-delimited MetricFamily messages, one per family, nothing left over. */
	while (at < r.body_len) {
		uint64_t size = 0;
		int shift = 0;

		while (at < r.body_len && ((unsigned char)r.body[at] & 0x80)) {
			size |= (uint64_t)((unsigned char)r.body[at++] & 0x7f) << shift;
			shift += 7;
		}
		cr_assert_lt(at, r.body_len);
		size |= (uint64_t)(unsigned char)r.body[at++] << shift;
		cr_assert_leq(at + size, r.body_len, "a message runs past the end");
		at += size;
		families++;
	}
	cr_assert_eq(families, 22, "one message per family");
	http_reply_free(&r);
}

/* ---- --max-kernels: the most launched named, the rest "other" ------------------------------ */

/*
 * Kernels of other names than drv_launch's one: a child of this test calls
 * the simulated driver itself (dlopen), loading a PTX image of several
 * entries. The simulator runs only vec_add, so the other launches fail
 * (CUDA_ERROR_NOT_SUPPORTED); cuprobe counts a launch at its entry anyway.
 */
static const char kernels_ptx[] =
	".version 7.5\n.target sm_75\n.address_size 64\n"
	".visible .entry k_hot()\n{\n\tret;\n}\n"
	".visible .entry k_warm()\n{\n\tret;\n}\n"
	".visible .entry k_mild()\n{\n\tret;\n}\n"
	".visible .entry k_cold()\n{\n\tret;\n}\n"
	".visible .entry k_late()\n{\n\tret;\n}\n";

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_primary_retain_fn)(void **, int);
typedef int (*cu_ctx_set_fn)(void *);
typedef int (*cu_module_load_fn)(void **, const void *);
typedef int (*cu_module_function_fn)(void **, void *, const char *);
typedef int (*cu_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			    unsigned, void *, void **, void **);

/* The child: launches as its parent says, one byte a phase; answers each with one byte. */
static void kernels_workload(int in, int out)
{
	static const char *const names[] = { "k_hot", "k_warm", "k_mild", "k_cold", "k_late" };
	/* Phase 1: the most launched first (any refresh in between sees the ranking so far). */
	static const int first[] = { 40, 30, 20, 10, 0 };
	/* Phase 2: k_cold becomes the most launched, k_late is new: neither takes a name. */
	static const int second[] = { 0, 0, 0, 100, 5 };
	/* Phase 3: a process whose own two most launched are k_mild and k_cold. */
	static const int third[] = { 0, 0, 20, 10, 0 };
	void *lib = dlopen(CUDA_SIM_LIB, RTLD_NOW), *ctx, *module, *functions[5];
	cu_launch_fn launch;
	int device, k, i;
	char phase;

	if (!lib)
		_exit(10);
	if (((cu_init_fn)dlsym(lib, "cuInit"))(0) ||
	    ((cu_device_get_fn)dlsym(lib, "cuDeviceGet"))(&device, 0) ||
	    ((cu_primary_retain_fn)dlsym(lib, "cuDevicePrimaryCtxRetain"))(&ctx, device) ||
	    ((cu_ctx_set_fn)dlsym(lib, "cuCtxSetCurrent"))(ctx) ||
	    ((cu_module_load_fn)dlsym(lib, "cuModuleLoadData"))(&module, kernels_ptx))
		_exit(11);
	for (k = 0; k < 5; k++)
		if (((cu_module_function_fn)dlsym(lib, "cuModuleGetFunction"))(&functions[k], module,
									      names[k]))
			_exit(12);
	launch = (cu_launch_fn)dlsym(lib, "cuLaunchKernel");
	if (write(out, "r", 1) != 1)
		_exit(13);
	while (read(in, &phase, 1) == 1 && phase != 'q') {
		const int *counts = phase == '1' ? first : phase == '2' ? second : third;

		for (k = 0; k < 5; k++)
			for (i = 0; i < counts[k]; i++)
				launch(functions[k], 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
		if (write(out, &phase, 1) != 1)
			_exit(13);
	}
	_exit(0);
}

/* The launches of pid ("": folded), by kernel label, from one text scrape; returns their number. */
static size_t scrape_launches(const char *pid, char labels[][64], double *values, size_t max)
{
	char needle[32];
	struct http_reply r;
	const char *line;
	size_t n = 0;

	snprintf(needle, sizeof(needle), "{pid=\"%s\",", pid);
	cr_assert(http_get(exporter.port, "/metrics", NULL, &r));
	cr_assert_eq(r.status, 200);
	for (line = r.body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *kernel, *end;

		if (strncmp(line, "cuprobe_kernel_launches_total{", 30) ||
		    strncmp(line + 29, needle, strlen(needle)))
			continue;
		kernel = strstr(line, ",kernel=\"");
		cr_assert_not_null(kernel, "no kernel label: %.200s", line);
		kernel += 9;
		end = strchr(kernel, '"');
		cr_assert_lt(n, max, "more series than expected");
		snprintf(labels[n], 64, "%.*s", (int)(end - kernel), kernel);
		values[n] = strtod(strchr(end, ' ') + 1, NULL);
		n++;
	}
	http_reply_free(&r);
	return n;
}

/* Waits for pid's launches to sum to total, then wants exactly the series given. */
static void expect_launches(pid_t pid, double total, double hot, double warm, double other)
{
	char labels[8][64], pid_text[16];
	double values[8], sum = 0, deadline = now_seconds() + 20;
	size_t n, i;

	if (pid > 0)
		snprintf(pid_text, sizeof(pid_text), "%d", (int)pid);
	else
		pid_text[0] = '\0';
	for (;;) {
		n = scrape_launches(pid_text, labels, values, 8);
		for (sum = 0, i = 0; i < n; i++)
			sum += values[i];
		if (sum == total)
			break;
		cr_assert_lt(now_seconds(), deadline, "pid %d's launches sum to %.0f, not %.0f", (int)pid,
			     sum, total);
		usleep(100000);
	}
	cr_assert_eq(n, 3, "pid %d: %zu series, not k_hot, k_warm and other", (int)pid, n);
	for (i = 0; i < n; i++) {
		double want = !strcmp(labels[i], "k_hot") ? hot : !strcmp(labels[i], "k_warm") ? warm :
			      !strcmp(labels[i], "other") ? other : -1;

		cr_assert_eq(values[i], want, "kernel=\"%s\" %.0f, want %.0f", labels[i], values[i], want);
	}
}

static void kernels_phase(int to, int from, char phase)
{
	char answer;

	cr_assert_eq(write(to, &phase, 1), 1);
	cr_assert_eq(read(from, &answer, 1), 1, "the workload died in phase %c", phase);
	cr_assert_eq(answer, phase);
}

/*
 * The child started, its names (records of cuModuleGetFunction) read by the
 * exporter before any launch; *to and *from are the parent's ends.
 */
static void kernels_start(int *to, int *from)
{
	int to_child[2], from_child[2];
	char ready;

	cr_assert_eq(pipe(to_child), 0);
	cr_assert_eq(pipe(from_child), 0);
	kernels_child = fork();
	cr_assert_geq(kernels_child, 0);
	if (!kernels_child) {
		close(to_child[1]);
		close(from_child[0]);
		kernels_workload(to_child[0], from_child[1]);
	}
	close(to_child[0]);
	close(from_child[1]);
	*to = to_child[1];
	*from = from_child[0];
	cr_assert_eq(read(*from, &ready, 1), 1, "the workload did not start");
	usleep(1000000);
}

/* The child told to quit, and reaped: it exited 0. */
static void kernels_quit(int to, int from)
{
	int status;

	cr_assert_eq(write(to, "q", 1), 1);
	cr_assert_eq(waitpid(kernels_child, &status, 0), kernels_child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the workload: status %#x", status);
	close(to);
	close(from);
}

/* One child through the given phases, then gone (reaped). */
static void kernels_run(const char *phases)
{
	int to, from;

	kernels_start(&to, &from);
	for (; *phases; phases++)
		kernels_phase(to, from, *phases);
	kernels_quit(to, from);
	kernels_child = 0;
}

/* The value of an unlabelled-or-labelled series line of one text scrape; -1 when absent. */
static double scrape_value(const char *series)
{
	struct http_reply r;
	const char *at;
	double value = -1;

	cr_assert(http_get(exporter.port, "/metrics", NULL, &r));
	at = strstr(r.body, series);
	if (at && (at == r.body || at[-1] == '\n') && at[strlen(series)] == ' ')
		value = strtod(at + strlen(series) + 1, NULL);
	http_reply_free(&r);
	return value;
}

/*
 * The folded totals keep --max-kernels names per cgroup: a second process of
 * the same cgroup whose kernels are others folds them into kernel="other",
 * and cuprobe_folded_overflow counts it.
 */
Test(exporter, folded_totals_keep_max_kernels_names_per_cgroup, .timeout = 120)
{
	static const char *const args[] = { "-i", "0.3", "--max-kernels", "2", "--keep-exited", "0", NULL };

	exporter_start(&exporter, dir, args);
	kernels_run("1");
	expect_launches(0, 100, 40, 30, 30);
	cr_assert_lt(scrape_value("cuprobe_folded_overflow_total{limit=\"kernels\"}"), 0,
		     "nothing overflowed yet");
	kernels_run("3");
	/* Its k_mild and k_cold had names of their own while it ran; folded, they are "other". */
	expect_launches(0, 130, 40, 30, 60);
	cr_assert_eq(scrape_value("cuprobe_folded_overflow_total{limit=\"kernels\"}"), 1);
}

Test(exporter, max_kernels_names_the_most_launched_and_keeps_its_names, .timeout = 120)
{
	static const char *const args[] = { "-i", "0.3", "--max-kernels", "2", NULL };
	int to, from;

	exporter_start(&exporter, dir, args);
	kernels_start(&to, &from);
	/* 40, 30, 20, 10 launches: the two most launched named, 30 in "other". */
	kernels_phase(to, from, '1');
	expect_launches(kernels_child, 100, 40, 30, 30);
	/* k_cold is now the most launched: it stays in "other" (which must not go back). */
	kernels_phase(to, from, '2');
	expect_launches(kernels_child, 205, 40, 30, 135);
	/* Exited: its final rows, the same labels. */
	kernels_quit(to, from);
	usleep(1500000); /* refreshes (0.3 s) have retired it */
	expect_launches(kernels_child, 205, 40, 30, 135);
	kernels_child = 0;
}

/* ---- requests refused, serving goes on ---------------------------------------------------- */

static void start_exporter(void)
{
	static const char *const args[] = { "-i", "0.5", NULL };

	exporter_start(&exporter, dir, args);
}

static void expect_metrics_served(void)
{
	struct http_reply r;

	cr_assert(http_get(exporter.port, "/metrics", NULL, &r), "the exporter stopped answering");
	cr_assert_eq(r.status, 200);
	cr_assert_not_null(r.body);
	cr_assert_not_null(strstr(r.body, "# TYPE cuprobe_kernel_launches_total counter"));
	http_reply_free(&r);
}

Test(http, an_unknown_path_is_404, .timeout = 60)
{
	struct http_reply r;

	start_exporter();
	cr_assert(http_get(exporter.port, "/nope", NULL, &r));
	cr_assert_eq(r.status, 404);
	http_reply_free(&r);
	cr_assert(http_get(exporter.port, "/metrics/extra", NULL, &r));
	cr_assert_eq(r.status, 404);
	http_reply_free(&r);
	cr_assert(http_get(exporter.port, "/", NULL, &r));
	cr_assert_eq(r.status, 200, "/ says where the metrics are");
	http_reply_free(&r);
	expect_metrics_served();
}

Test(http, post_and_other_methods_are_405, .timeout = 60)
{
	static const char *const requests[] = {
		"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
		"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
		"PUT /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
		"DELETE /metrics HTTP/1.0\r\n\r\n",
		"POST /nope HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi",
	};
	size_t i;

	start_exporter();
	for (i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		struct http_reply r;
		char *allow;

		cr_assert(http_raw(exporter.port, requests[i], strlen(requests[i]), 10, &r),
			  "no answer to %s", requests[i]);
		cr_assert_eq(r.status, 405, "%s got %d (%s)", requests[i], r.status, r.head ? r.head : "no reply");
		allow = http_header(&r, "Allow");
		cr_assert_not_null(allow, "a 405 names the methods allowed");
		cr_assert_str_eq(allow, "GET, HEAD");
		free(allow);
		http_reply_free(&r);
	}
	expect_metrics_served();
}

Test(http, a_64k_header_is_refused_and_serving_goes_on, .timeout = 60)
{
	size_t big = 64 * 1024, len;
	char *request = malloc(big + 256);
	struct http_reply r;

	cr_assert_not_null(request);
	len = (size_t)sprintf(request, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(request + len, 'a', big);
	len += big;
	len += (size_t)sprintf(request + len, "\r\nConnection: close\r\n\r\n");
	start_exporter();
	cr_assert(http_raw(exporter.port, request, len, 10, &r), "no answer to a 64 KiB header");
	cr_assert(r.status >= 400 && r.status < 500, "a 64 KiB header got status %d", r.status);
	http_reply_free(&r);
	free(request);
	expect_metrics_served();
}

/* A connection that says nothing (or half a request) holds no other scrape back. */
Test(http, a_silent_client_does_not_block_a_scrape, .timeout = 60)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int silent[8], i;
	double start;

	start_exporter();
	addr.sin_port = htons((uint16_t)exporter.port);
	for (i = 0; i < 8; i++) {
		silent[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert(silent[i] >= 0);
		cr_assert_eq(connect(silent[i], (struct sockaddr *)&addr, sizeof(addr)), 0,
			     "connect: %s", strerror(errno));
		if (i % 2)
			cr_assert_gt(send(silent[i], "GET /metrics HTTP/1.1\r\nHost:", 28, MSG_NOSIGNAL), 0);
	}
	start = now_seconds();
	expect_metrics_served();
	cr_assert_lt(now_seconds() - start, 2.0, "a scrape waited %.1f s behind silent clients",
		     now_seconds() - start);
	for (i = 0; i < 8; i++)
		close(silent[i]);
	expect_metrics_served();
}

/* ---- the command line ------------------------------------------------------------------- */

static void expect_usage_error(const char *listen, const char *needle)
{
	char *err_path = path_join(dir, "err"), *err;
	char *argv[] = { CUPROBE_BIN, "exporter", "--listen", (char *)listen, NULL };
	struct run_opts opts = { .stderr_path = err_path };
	int status = run_program(argv, &opts, NULL);

	err = read_text(err_path);
	cr_assert_eq(status, 2, "--listen %s: exit %d, %s", listen, status, err ? err : "");
	cr_assert_not_null(err);
	cr_assert_eq(count_lines(err), 1, "not one line: %s", err);
	cr_assert_eq(strncmp(err, "cuprobe: ", 9), 0, "%s", err);
	cr_assert_not_null(strstr(err, needle), "\"%s\" lacks \"%s\"", err, needle);
	free(err);
	free(err_path);
}

Test(http, a_listen_address_beyond_loopback_needs_allow_remote, .timeout = 60)
{
	char listen[64];
	int port = free_port();

	snprintf(listen, sizeof(listen), "0.0.0.0:%d", port);
	expect_usage_error(listen, "--allow-remote");
	snprintf(listen, sizeof(listen), "[::]:%d", port);
	expect_usage_error(listen, "--allow-remote");
	snprintf(listen, sizeof(listen), "192.0.2.1:%d", port);
	expect_usage_error(listen, "--allow-remote");
	expect_usage_error("localhost:9466", "invalid --listen");
	expect_usage_error("127.0.0.1:0", "invalid --listen");
	expect_usage_error("127.0.0.1:65536", "invalid --listen");
}
