// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Grafana dashboard and the alert rules against the real exporter on the
 * simulated driver and Debian's real Prometheus, twice: one Prometheus with
 * native histograms, one with the classic _bucket series (each panel's
 * histogram query has a form for each). Every query of every panel, its
 * variables at "All", must return series on both; the few panels whose
 * metric needs what CI cannot make (an Xid needs the NVIDIA driver's
 * tracepoint) must at least evaluate, on metrics the exporter serves.
 * Panels are checked for what they show (a stuck sync, a launch rate, an
 * attach), and the rules, loaded into both, evaluate without error; the
 * stuck-sync alert's expression finds the stuck process.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dashboard.h"
#include "helpers.h"
#include "prom.h"

static char *dir;
static struct exporter_proc exporter;
static struct prometheus_proc native, classic;
static pid_t busy, stuck;

static void setup(void)
{
	require_root();
	dir = make_tmpdir();
	memset(&exporter, 0, sizeof(exporter));
	memset(&native, 0, sizeof(native));
	memset(&classic, 0, sizeof(classic));
	busy = stuck = 0;
}

static void kill_child(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

static void teardown(void)
{
	kill_child(&busy);
	kill_child(&stuck);
	prometheus_stop(&native);
	prometheus_stop(&classic);
	exporter_stop(&exporter);
	remove_tree(dir);
	free(dir);
	free(exporter.err_path);
	free(native.err_path);
	free(classic.err_path);
}

TestSuite(dashboard, .init = setup, .fini = teardown);

static char *subdir(const char *name)
{
	char *path = path_join(dir, name);

	cr_assert_eq(mkdir(path, 0700), 0, "mkdir %s: %s", path, strerror(errno));
	return path;
}

/* ---- the metrics the exporter serves ------------------------------------------------ */

struct families {
	char names[64][64];
	bool histogram[64];
	size_t count;
};

static void read_families(struct families *f)
{
	struct http_reply r;
	const char *line;

	memset(f, 0, sizeof(*f));
	cr_assert(http_get(exporter.port, "/metrics", NULL, &r) && r.status == 200);
	for (line = r.body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char name[64], type[32];

		if (sscanf(line, "# TYPE %63s %31s", name, type) != 2)
			continue;
		cr_assert_lt(f->count, 64);
		snprintf(f->names[f->count], sizeof(f->names[0]), "%s", name);
		f->histogram[f->count++] = !strcmp(type, "histogram");
	}
	http_reply_free(&r);
	cr_assert_gt(f->count, 10, "no families in the exposition");
}

static bool served(const struct families *f, const char *name, size_t len)
{
	static const char *const suffixes[] = { "_bucket", "_count", "_sum" };
	size_t i, s;

	for (i = 0; i < f->count; i++) {
		size_t n = strlen(f->names[i]);

		if (n == len && !strncmp(f->names[i], name, len))
			return true;
		for (s = 0; f->histogram[i] && s < 3; s++)
			if (n + strlen(suffixes[s]) == len && !strncmp(f->names[i], name, n) &&
			    !strncmp(name + n, suffixes[s], len - n))
				return true;
	}
	return false;
}

/* Every cuprobe_ metric a query names is one the exporter serves (a histogram's series included). */
static void expect_served_metrics(const struct families *f, const struct dashboard_query *q)
{
	const char *p = q->expr;

	while ((p = strstr(p, "cuprobe_"))) {
		size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_");

		cr_assert(served(f, p, len), "panel \"%s\" %s: the exporter serves no %.*s", q->panel,
			  q->ref_id, (int)len, p);
		p += len;
	}
}

/* ---- queries -------------------------------------------------------------------------- */

/* Panels on metrics CI cannot make: an Xid needs the NVIDIA driver's tracepoint. */
static bool needs_a_gpu(const struct dashboard_query *q)
{
	return strstr(q->expr, "cuprobe_xid_errors_total") != NULL;
}

/* Polls until the query returns series (or, for needs_a_gpu, evaluates): fails after the deadline. */
static void expect_series(int port, const char *which, const struct dashboard_query *q, double deadline)
{
	for (;;) {
		json_t *result = prom_query(port, q->promql);
		bool ok = result && json_is_array(result) && (needs_a_gpu(q) || json_array_size(result) > 0);

		json_decref(result);
		if (ok)
			return;
		cr_assert_lt(now_seconds(), deadline, "%s Prometheus: panel \"%s\" %s returns %s:\n%s",
			     which, q->panel, q->ref_id, result ? "no series" : "an error", q->promql);
		usleep(250000);
	}
}

static const struct dashboard_query *find_query(const struct dashboard_query *queries, size_t count,
						const char *panel, const char *ref_id)
{
	for (size_t i = 0; i < count; i++)
		if (!strcmp(queries[i].panel, panel) && !strcmp(queries[i].ref_id, ref_id))
			return &queries[i];
	cr_assert_fail("no panel \"%s\" with a target %s", panel, ref_id);
	return NULL;
}

/* The value of the series of promql whose label is value; NAN when there is none. */
static double series_value(int port, const char *promql, const char *label, const char *value)
{
	json_t *result = prom_query(port, promql), *series;
	double found = NAN;
	size_t i;

	json_array_foreach(result, i, series) {
		json_t *metric = json_object_get(series, "metric");
		const char *have = json_string_value(json_object_get(metric, label));

		if (have && !strcmp(have, value))
			found = strtod(json_string_value(json_array_get(json_object_get(series, "value"), 1)),
				       NULL);
	}
	json_decref(result);
	return found;
}

/* Polls series_value until it passes min (inclusive); returns the last value. */
static double wait_series_value(int port, const char *promql, const char *label, const char *value,
				double min, double timeout_s)
{
	double deadline = now_seconds() + timeout_s, v;

	do {
		v = series_value(port, promql, label, value);
		if (v >= min)
			return v;
		usleep(250000);
	} while (now_seconds() < deadline);
	return v;
}

/* ---- the rules ------------------------------------------------------------------------- */

/* The rules Prometheus loaded (data.groups), once every one has been evaluated. */
static json_t *evaluated_rules(int port, const char *which)
{
	double deadline = now_seconds() + 30;

	for (;;) {
		struct http_reply r;
		json_t *doc = NULL, *groups, *group, *rule;
		size_t g, i, rules = 0, pending = 0;

		if (http_get(port, "/api/v1/rules", NULL, &r) && r.status == 200)
			doc = json_loads(r.body, 0, NULL);
		http_reply_free(&r);
		cr_assert_not_null(doc, "%s Prometheus: /api/v1/rules answered no JSON", which);
		groups = json_object_get(json_object_get(doc, "data"), "groups");
		json_array_foreach(groups, g, group)
			json_array_foreach(json_object_get(group, "rules"), i, rule) {
				const char *health = json_string_value(json_object_get(rule, "health"));
				const char *name = json_string_value(json_object_get(rule, "name"));

				rules++;
				cr_assert(health && strcmp(health, "err"),
					  "%s Prometheus: rule %s fails to evaluate: %s", which, name,
					  json_string_value(json_object_get(rule, "lastError")));
				pending += strcmp(health, "ok") != 0;
			}
		if (rules && !pending) {
			json_incref(groups);
			json_decref(doc);
			return groups;
		}
		json_decref(doc);
		cr_assert_lt(now_seconds(), deadline, "%s Prometheus: %zu of %zu rules never evaluated",
			     which, pending, rules);
		usleep(250000);
	}
}

static const char *rule_query(json_t *groups, const char *name)
{
	json_t *group, *rule;
	size_t g, i;

	json_array_foreach(groups, g, group)
		json_array_foreach(json_object_get(group, "rules"), i, rule)
			if (!strcmp(json_string_value(json_object_get(rule, "name")) ?: "", name))
				return json_string_value(json_object_get(rule, "query"));
	cr_assert_fail("no rule %s loaded", name);
	return NULL;
}

static size_t rule_count(json_t *groups)
{
	json_t *group;
	size_t g, n = 0;

	json_array_foreach(groups, g, group)
		n += json_array_size(json_object_get(group, "rules"));
	return n;
}

/* ---- the test ------------------------------------------------------------------------- */

static pid_t spawn_workload(char **argv, char **env, const char *out_name)
{
	char *out = path_join(dir, out_name);
	struct run_opts opts = { .stdout_path = out, .extra_env = env };
	pid_t pid = spawn_program(argv, &opts);

	free(out);
	return pid;
}

Test(dashboard, every_panel_returns_series_on_native_and_classic_histograms, .timeout = 240)
{
	static const char *const args[] = { "-i", "0.5", "--latency", NULL };
	char *busy_argv[] = { DRV_LAUNCH, "1000000", "2", "--host-us", "2000", "--sync-every", "20", NULL };
	/* Six kernels of 10 s queued on a stream: its final sync waits a minute. */
	char *stuck_argv[] = { DRV_LAUNCH, "6", "1", "--kernel-us", "10000000", NULL };
	char *attach_argv[] = { DRV_LAUNCH, "20", "1", "--start-delay", "500", NULL };
	char *apis_argv[] = { DRV_APIS, "2", NULL };
	char env_line[512], *env[] = { env_line, NULL }, *lib_dir, copy[1024], pid_text[2][16];
	struct prometheus_opts native_opts = { .rule_file = RULES },
			       classic_opts = { .classic_histograms = true, .rule_file = RULES };
	struct prometheus_proc *proms[] = { &native, &classic };
	const char *names[] = { "native", "classic" };
	struct dashboard_query *queries;
	struct families families;
	json_t *dashboard;
	size_t count, i, p;
	double deadline;

	dashboard = dashboard_load(DASHBOARD);
	queries = dashboard_queries(dashboard, &count);
	exporter_start(&exporter, dir, args);
	/* Stuck before Prometheus starts: every scrape sees its sync in progress, none returned. */
	stuck = spawn_workload(stuck_argv, NULL, "stuck.out");
	usleep(1500000);
	prometheus_start_with(&native, subdir("native"), exporter.port, &native_opts);
	prometheus_start_with(&classic, subdir("classic"), exporter.port, &classic_opts);
	busy = spawn_workload(busy_argv, NULL, "busy.out");
	/* A driver file of its own (another inode) mapped after the start: an attach event. */
	lib_dir = subdir("lib");
	snprintf(copy, sizeof(copy), "cp '%s' '%s/libcuda.so.1'", CUDA_SIM_LIB, lib_dir);
	cr_assert_eq(system(copy), 0);
	snprintf(env_line, sizeof(env_line), "LD_LIBRARY_PATH=%s", lib_dir);
	cr_assert_eq(wait_program(spawn_workload(attach_argv, env, "attach.out"), 60), 0);
	cr_assert_eq(wait_program(spawn_workload(apis_argv, NULL, "apis.out"), 60), 0);
	snprintf(pid_text[0], sizeof(pid_text[0]), "%d", (int)busy);
	snprintf(pid_text[1], sizeof(pid_text[1]), "%d", (int)stuck);

	read_families(&families);
	for (i = 0; i < count; i++)
		expect_served_metrics(&families, &queries[i]);
	for (p = 0; p < 2; p++) {
		cr_assert_eq(prom_wait_value(proms[p]->port, "up{job=\"cuprobe\"}", 1, 30), 1,
			     "%s Prometheus never scraped the exporter", names[p]);
		deadline = now_seconds() + 60;
		for (i = 0; i < count; i++)
			expect_series(proms[p]->port, names[p], &queries[i], deadline);
	}

	for (p = 0; p < 2; p++) {
		int port = proms[p]->port;
		double in_progress;
		json_t *rules;

		/* What the panels show: the busy process's launches and memory, the stuck sync, the attach. */
		cr_assert_gt(wait_series_value(port, find_query(queries, count, "Launches / s by process", "A")->promql,
					       "pid", pid_text[0], 1, 30), 0, "%s: busy's launch rate", names[p]);
		cr_assert_gt(wait_series_value(port, find_query(queries, count, "Device memory live by process (VMM included)", "A")->promql,
					       "pid", pid_text[0], 1, 30), 0, "%s: busy's device memory", names[p]);
		cr_assert_eq(wait_series_value(port, find_query(queries, count, "Synchronization calls in progress", "A")->promql,
					       "pid", pid_text[1], 1, 30), 1, "%s: the stuck sync", names[p]);
		in_progress = series_value(port, find_query(queries, count, "Synchronization calls in progress", "A")->promql,
					   "pid", pid_text[0]);
		cr_assert(in_progress >= 0 && in_progress <= 2, "%s: busy's two threads have %g syncs in progress",
			  names[p], in_progress);
		cr_assert_geq(wait_series_value(port, find_query(queries, count, "Attach events by outcome", "A")->promql,
						"status", "attached", 1, 30), 1, "%s: the attach event", names[p]);
		cr_assert_gt(wait_series_value(port, find_query(queries, count, "API latency p99 and p50 by API", "A")->promql,
					       "api", "cuLaunchKernel", 0, 30), 0, "%s: cuLaunchKernel's p99", names[p]);

		/* The rules evaluate on these series; the stuck-sync alert's expression finds the stuck process. */
		rules = evaluated_rules(port, names[p]);
		cr_assert_eq(rule_count(rules), 8, "%s: the rules file's 8 rules", names[p]);
		{
			char *query = strdup(rule_query(rules, "CuprobeProcessStuckInSync"));

			cr_assert_eq(wait_series_value(port, query, "pid", pid_text[1], 1, 30), 1,
				     "%s: CuprobeProcessStuckInSync's expression misses the stuck process", names[p]);
			cr_assert(isnan(series_value(port, query, "pid", pid_text[0])),
				  "%s: CuprobeProcessStuckInSync's expression takes the busy process for stuck", names[p]);
			free(query);
		}
		json_decref(rules);
	}
	dashboard_queries_free(queries, count);
	json_decref(dashboard);
}
