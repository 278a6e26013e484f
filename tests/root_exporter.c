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
#include <poll.h>
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
	size_t at = 0, families = 0, text_families = 0;
	const char *line;
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
	/* A # TYPE line a family: what the protobuf exposition must hold as many messages of. */
	for (line = strstr(r.body, "# TYPE "); line; line = strstr(line + 1, "\n# TYPE "))
		text_families++;
	cr_assert_geq(text_families, 23, "the families of the table");
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
	cr_assert_eq(families, text_families, "one message per family");
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

/* A connection to 127.0.0.1:port from source (a loopback address; NULL: the kernel's choice). */
static int connect_from(int port, const char *source)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	if (source) {
		struct sockaddr_in from = { .sin_family = AF_INET };

		cr_assert_eq(inet_pton(AF_INET, source, &from.sin_addr), 1);
		cr_assert_eq(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0, "bind %s: %s", source,
			     strerror(errno));
	}
	cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0, "connect: %s",
		     strerror(errno));
	return fd;
}

/* A counter of the exporter's own, as served once the next refresh has counted it (-1: never). */
static double wait_counter(const char *series, double at_least)
{
	double value = -1, deadline = now_seconds() + 10;

	while ((value = scrape_value(series)) < at_least && now_seconds() < deadline)
		usleep(200000);
	return value;
}

#define TRICKLING 70
#define SILENT 100

/*
 * Issue 25: 70 connections trickling a header line every 3 s and 100
 * silent ones held the server (its connections full, each only idle-timed):
 * three scrapes in a row timed out. Now each scrape is answered within 1 s,
 * the attackers on the scraper's own address or on 170 others.
 */
static void scrapes_answered_while_held(bool many_addresses)
{
	int trickling[TRICKLING], silent[SILENT], round, i;
	char source[32], line[64];

	start_exporter();
	for (i = 0; i < TRICKLING + SILENT; i++) {
		snprintf(source, sizeof(source), "127.0.%d.%d", 1 + i / 250, 1 + i % 250);
		if (i < TRICKLING) {
			trickling[i] = connect_from(exporter.port, many_addresses ? source : NULL);
			/* Refused or not: the attack goes on, as an attacker's would. */
			send(trickling[i], "GET /metrics HTTP/1.1\r\nHost: x\r\n", 32, MSG_NOSIGNAL);
		} else {
			silent[i - TRICKLING] = connect_from(exporter.port, many_addresses ? source : NULL);
		}
	}
	for (round = 0; round < 3; round++) {
		double begin = now_seconds(), start, took;

		for (i = 0; i < TRICKLING; i++) {
			snprintf(line, sizeof(line), "X-Trickle-%d: %d\r\n", round, i);
			send(trickling[i], line, strlen(line), MSG_NOSIGNAL);
		}
		start = now_seconds();
		expect_metrics_served();
		took = now_seconds() - start;
		cr_assert_lt(took, 1.0, "scrape %d took %.2f s with %d trickling and %d silent connections open",
			     round, took, TRICKLING, SILENT);
		while (now_seconds() < begin + 3)
			usleep(100000);
	}
	for (i = 0; i < TRICKLING; i++)
		close(trickling[i]);
	for (i = 0; i < SILENT; i++)
		close(silent[i]);
	/* The connections closed to make room are counted. */
	cr_assert_geq(wait_counter("cuprobe_http_connections_closed_total{reason=\"crowded\"}", 1), 1);
}

Test(http, scrapes_are_answered_within_1s_while_one_address_holds_170_connections, .timeout = 90)
{
	scrapes_answered_while_held(false);
}

Test(http, scrapes_are_answered_within_1s_while_170_addresses_hold_a_connection_each, .timeout = 90)
{
	scrapes_answered_while_held(true);
}

/* A request has 10 s, idle or not: a line a second does not keep it open. */
Test(http, a_request_trickled_a_line_a_second_is_closed_at_its_deadline, .timeout = 60)
{
	double start, took;
	char line[64];
	int fd, n = 0;

	start_exporter();
	fd = connect_from(exporter.port, NULL);
	start = now_seconds();
	send(fd, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char byte;

		if (poll(&pfd, 1, 1000) > 0 && recv(fd, &byte, 1, MSG_DONTWAIT) <= 0)
			break;
		snprintf(line, sizeof(line), "X-Line-%d: y\r\n", n++);
		if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0)
			break;
		cr_assert_lt(now_seconds() - start, 14, "still open after 14 s, a line a second");
	}
	took = now_seconds() - start;
	close(fd);
	cr_assert(took >= 9.5 && took < 12, "closed after %.1f s, not at its 10 s deadline", took);
	cr_assert_geq(wait_counter("cuprobe_http_connections_closed_total{reason=\"deadline\"}", 1), 1);
	expect_metrics_served();
}

/* Issue 25: /metrics%00.html and /%00 were served (200), the path cut at the NUL. */
Test(http, a_nul_in_the_request_line_is_a_bad_request, .timeout = 60)
{
	static const struct {
		const char *request;
		size_t len;
		int status;
	} requests[] = {
#define REQUEST(text, status) { text, sizeof(text) - 1, status }
		REQUEST("GET /metrics%00.html HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET /%00 HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET /metrics%00 HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET /metrics\0.html HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET /metrics\0 HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET\0 /metrics HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET /metrics%0a HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET /metrics%zz HTTP/1.0\r\n\r\n", 400),
		REQUEST("GET /metrics.html HTTP/1.0\r\n\r\n", 404),
		/* The same paths, escaped: served. */
		REQUEST("GET /%6detrics HTTP/1.0\r\n\r\n", 200),
		REQUEST("GET /metrics?x=%00 HTTP/1.0\r\n\r\n", 200),
		REQUEST("GET %2F HTTP/1.0\r\n\r\n", 200),
#undef REQUEST
	};
	size_t i;

	start_exporter();
	for (i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		struct http_reply r;

		cr_assert(http_raw(exporter.port, requests[i].request, requests[i].len, 10, &r),
			  "no answer to request %zu", i);
		cr_assert_eq(r.status, requests[i].status, "request %zu (%.*s): %d", i,
			     (int)strcspn(requests[i].request, "\r"), requests[i].request, r.status);
		http_reply_free(&r);
	}
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
	expect_usage_error("::1:9466", "invalid --listen");
	expect_usage_error("127.0.0.1:0", "invalid --listen");
	expect_usage_error("127.0.0.1:65536", "invalid --listen");
}

/*
 * `cuprobe exporter --listen LISTEN` in a mount namespace of its own whose
 * /etc/hosts is hosts and whose name service is that file alone, with
 * stderr in exporter.err_path; started (its pid in exporter, which the
 * teardown stops) or run to its end (wait: its exit status).
 */
static int exporter_with_hosts(const char *listen, const char *hosts, bool wait)
{
	char *hosts_path = path_join(dir, "hosts"), *nss_path = path_join(dir, "nsswitch.conf");
	char *argv[] = { "/usr/bin/unshare", "-m", "/bin/sh", "-c",
			 "mount --bind \"$1\" /etc/hosts && mount --bind \"$2\" /etc/nsswitch.conf && "
			 "shift 2 && exec \"$@\"",
			 "sh", hosts_path, nss_path, CUPROBE_BIN, "exporter", "--listen", (char *)listen,
			 "--lib", CUDA_SIM_LIB, "-i", "0.5", NULL };
	struct run_opts opts = { 0 };
	static int runs;
	char name[32];
	int status = 0;

	write_text(hosts_path, hosts);
	write_text(nss_path, "hosts: files\n");
	/* A file a run: what an earlier one said is not taken for this one's. */
	snprintf(name, sizeof(name), "exporter-%d.err", runs++);
	free(exporter.err_path);
	exporter.err_path = path_join(dir, name);
	opts.stderr_path = exporter.err_path;
	if (wait)
		status = run_program(argv, &opts, NULL);
	else
		exporter.pid = spawn_program(argv, &opts);
	free(hosts_path);
	free(nss_path);
	return status;
}

/* The status of GET /metrics at ip:port (-1: no answer). */
static int status_at(const char *ip, int port)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char reply[64] = "";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), status = -1;

	cr_assert(fd >= 0);
	cr_assert_eq(inet_pton(AF_INET, ip, &addr.sin_addr), 1);
	if (!connect(fd, (struct sockaddr *)&addr, sizeof(addr)) &&
	    send(fd, "GET /metrics HTTP/1.0\r\n\r\n", 25, MSG_NOSIGNAL) == 25 &&
	    recv(fd, reply, sizeof(reply) - 1, MSG_WAITALL) > 12)
		sscanf(reply, "HTTP/1.%*d %d", &status);
	close(fd);
	return status;
}

static void expect_serving(const char *listen, const char *hosts, const char *ip, const char *said)
{
	char *err;

	exporter_with_hosts(listen, hosts, false);
	cr_assert(wait_for_text(exporter.err_path, "serving metrics on", 60), "--listen %s: %s", listen,
		  read_text(exporter.err_path));
	err = read_text(exporter.err_path);
	cr_assert_not_null(strstr(err, said), "--listen %s: \"%s\" lacks \"%s\"", listen, err, said);
	free(err);
	cr_assert_eq(status_at(ip, exporter.port), 200, "--listen %s: no metrics on %s", listen, ip);
	cr_assert_eq(exporter_stop(&exporter), 0);
}

/* Issue 25: localhost and [::ffff:127.0.0.1] were refused as not loopback. */
Test(http, names_resolving_to_loopback_only_and_v4_mapped_loopback_are_loopback, .timeout = 120)
{
	static const char hosts[] = "127.0.0.1 localhost\n127.0.0.2 loop-only.test\n"
				    "127.0.0.1 mixed.test\n192.0.2.7 mixed.test\n";
	char listen[64], said[96];
	char *err;

	exporter.port = free_port();
	snprintf(listen, sizeof(listen), "localhost:%d", exporter.port);
	snprintf(said, sizeof(said), "http://localhost:%d/metrics (127.0.0.1:%d)", exporter.port,
		 exporter.port);
	expect_serving(listen, hosts, "127.0.0.1", said);
	snprintf(listen, sizeof(listen), "loop-only.test:%d", exporter.port);
	snprintf(said, sizeof(said), "(127.0.0.2:%d)", exporter.port);
	expect_serving(listen, hosts, "127.0.0.2", said);
	snprintf(listen, sizeof(listen), "[::ffff:127.0.0.1]:%d", exporter.port);
	snprintf(said, sizeof(said), "(127.0.0.1:%d)", exporter.port);
	expect_serving(listen, hosts, "127.0.0.1", said);
	/* A name that is also another address is not loopback; one that does not resolve, nothing. */
	snprintf(listen, sizeof(listen), "mixed.test:%d", exporter.port);
	cr_assert_eq(exporter_with_hosts(listen, hosts, true), 2);
	err = read_text(exporter.err_path);
	cr_assert_eq(count_lines(err), 1, "%s", err);
	cr_assert_not_null(strstr(err, "--allow-remote"), "%s", err);
	free(err);
	snprintf(listen, sizeof(listen), "nosuch.test:%d", exporter.port);
	cr_assert_eq(exporter_with_hosts(listen, hosts, true), 2);
	err = read_text(exporter.err_path);
	cr_assert_eq(count_lines(err), 1, "%s", err);
	cr_assert_not_null(strstr(err, "does not resolve"), "%s", err);
	free(err);
}
