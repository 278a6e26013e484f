// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter under churn: thousands of short CUDA processes (drv_launch 1,
 * four at a time) for two minutes while Prometheus scrapes every second,
 * exited processes folded after 5 s (--keep-exited 5). Asserts that the
 * exporter's RSS and its BPF maps' occupancy stay flat (the end against the
 * end of the warm-up), that no scrape failed and no map overflowed, that no
 * counter ever went down (the sum over all series polled every few seconds,
 * and resets() over the whole run) while processes exited and were folded,
 * and that no launch was lost (the total grew by at least the launches made).
 *
 * SOAK_SECONDS overrides the two minutes of churn. The numbers are printed.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <criterion/criterion.h>

#include "helpers.h"
#include "prom.h"

#define WORKERS 4
#define PAUSE_US 50000       /* between the runs of a worker: ~60 processes a second */
#define WARMUP_S 20
#define SAMPLE_S 5

static char *dir;
static struct exporter_proc exporter;
static struct prometheus_proc prometheus;
static pid_t workers[WORKERS];

static void setup(void)
{
	require_root();
	dir = make_tmpdir();
	memset(&exporter, 0, sizeof(exporter));
	memset(&prometheus, 0, sizeof(prometheus));
	memset(workers, 0, sizeof(workers));
}

static void teardown(void)
{
	int i;

	for (i = 0; i < WORKERS; i++)
		if (workers[i] > 0) {
			kill(workers[i], SIGKILL);
			waitpid(workers[i], NULL, 0);
		}
	prometheus_stop(&prometheus);
	exporter_stop(&exporter);
	remove_tree(dir);
	free(dir);
	free(exporter.err_path);
	free(prometheus.err_path);
}

/* VmRSS of pid in KiB. */
static long rss_kib(pid_t pid)
{
	char path[64], *text, *at;
	long kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	text = read_text(path);
	cr_assert_not_null(text, "%s: the exporter is gone", path);
	at = strstr(text, "\nVmRSS:");
	if (at)
		kib = strtol(at + 7, NULL, 10);
	free(text);
	cr_assert_gt(kib, 0);
	return kib;
}

/* Entries of the exporter's aggregation maps, found through its fds (fdinfo's map_id). */
static const char *const stats_maps[] = { "kernel_stats", "api_stats", "mem_stats", "live_allocs",
					  "device_mem_stat", "copy_stats" };
#define STATS_MAPS (sizeof(stats_maps) / sizeof(stats_maps[0]))

static void map_entries(pid_t pid, long entries[STATS_MAPS], long max_entries[STATS_MAPS])
{
	char path[64];
	struct dirent *d;
	DIR *fds;
	size_t found = 0, m;

	for (m = 0; m < STATS_MAPS; m++)
		entries[m] = -1;
	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)pid);
	fds = opendir(path);
	cr_assert_not_null(fds, "%s: %s", path, strerror(errno));
	while ((d = readdir(fds))) {
		char info_path[sizeof(path) + 256 + 2], *text, *id_at;
		struct bpf_map_info info = { 0 };
		__u32 len = sizeof(info);
		char key[256], next[256];
		void *cursor = NULL;
		long count = 0;
		int fd;

		if (d->d_name[0] == '.')
			continue;
		snprintf(info_path, sizeof(info_path), "%s/%s", path, d->d_name);
		text = read_text(info_path);
		id_at = text ? strstr(text, "map_id:") : NULL;
		fd = id_at ? bpf_map_get_fd_by_id((__u32)strtoul(id_at + 7, NULL, 10)) : -1;
		free(text);
		if (fd < 0)
			continue;
		if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.key_size > sizeof(key)) {
			close(fd);
			continue;
		}
		for (m = 0; m < STATS_MAPS && strcmp(info.name, stats_maps[m]); m++)
			;
		if (m < STATS_MAPS) {
			while (!bpf_map_get_next_key(fd, cursor, next)) {
				memcpy(key, next, info.key_size);
				cursor = key;
				count++;
			}
			entries[m] = count;
			max_entries[m] = info.max_entries;
			found++;
		}
		close(fd);
	}
	closedir(fds);
	cr_assert_eq(found, STATS_MAPS, "the exporter's maps were not all found");
}

/* One worker: drv_launch 1 again and again until stop_at; its own exit status is the verdict. */
static pid_t start_worker(double stop_at, const char *count_path)
{
	pid_t pid = fork();

	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		char *argv[] = { DRV_LAUNCH, "1", NULL };
		struct run_opts opts = { 0 };
		long runs = 0, failed = 0;
		FILE *out;

		prctl(PR_SET_PDEATHSIG, SIGKILL);

		while (now_seconds() < stop_at) {
			if (run_program(argv, &opts, NULL))
				failed++;
			runs++;
			usleep(PAUSE_US);
		}
		out = fopen(count_path, "we");
		if (!out || fprintf(out, "%ld %ld\n", runs, failed) < 0 || fclose(out))
			_exit(3);
		_exit(failed ? 1 : 0);
	}
	return pid;
}

/* The sum over every series; before any, 0 only when none is allowed yet. */
static double total_launches(bool none_yet)
{
	double value = 0;

	if (!prom_value(prometheus.port, "sum(cuprobe_kernel_launches_total)", &value))
		cr_assert(none_yet, "no cuprobe_kernel_launches_total in Prometheus");
	return value;
}

static double must_query(const char *promql)
{
	double value = 0;

	cr_assert(prom_value(prometheus.port, promql, &value), "no value for %s", promql);
	return value;
}

TestSuite(soak, .init = setup, .fini = teardown);

Test(soak, thousands_of_short_processes_leave_the_exporter_flat, .timeout = 290)
{
	static const char *const args[] = { "-i", "0.5", "--keep-exited", "5", NULL };
	double churn_s = getenv("SOAK_SECONDS") ? atof(getenv("SOAK_SECONDS")) : 120;
	double start, stop_at, previous_total, total_before, next_sample, scrapes, longest_scrape;
	long rss_warm, rss_peak = 0, rss_end, rss_after, runs = 0, failed = 0;
	long warm[STATS_MAPS], peak[STATS_MAPS] = { 0 }, end[STATS_MAPS], after[STATS_MAPS], cap[STATS_MAPS];
	char promql[256], *count_paths[WORKERS], *metrics_text;
	struct http_reply r;
	int i, samples = 0, window;
	size_t m;

	cr_assert_gt(churn_s, 0);
	exporter_start(&exporter, dir, args);
	prometheus_start(&prometheus, dir, exporter.port);
	start = now_seconds();
	cr_assert_eq(prom_wait_value(prometheus.port, "up{job=\"cuprobe\"}", 1, 30), 1,
		     "Prometheus never scraped the exporter");
	total_before = previous_total = total_launches(true);
	stop_at = now_seconds() + WARMUP_S + churn_s;
	for (i = 0; i < WORKERS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "worker%d", i);
		count_paths[i] = path_join(dir, name);
		workers[i] = start_worker(stop_at, count_paths[i]);
	}
	/* Warm-up: the churn reaches its steady state (processes kept 5 s, then folded). */
	sleep(WARMUP_S);
	rss_warm = rss_kib(exporter.pid);
	map_entries(exporter.pid, warm, cap);
	next_sample = now_seconds();
	while (now_seconds() < stop_at) {
		double total;
		long entries[STATS_MAPS], rss;

		if (now_seconds() < next_sample) {
			usleep(100000);
			continue;
		}
		next_sample += SAMPLE_S;
		rss = rss_kib(exporter.pid);
		rss_peak = rss > rss_peak ? rss : rss_peak;
		map_entries(exporter.pid, entries, cap);
		for (m = 0; m < STATS_MAPS; m++)
			peak[m] = entries[m] > peak[m] ? entries[m] : peak[m];
		total = total_launches(false);
		cr_assert_geq(total, previous_total, "the sum of cuprobe_kernel_launches_total went down: "
			      "%.0f after %.0f", total, previous_total);
		previous_total = total;
		samples++;
	}
	rss_end = rss_kib(exporter.pid);
	map_entries(exporter.pid, end, cap);
	for (i = 0; i < WORKERS; i++) {
		long worker_runs = 0, worker_failed = 0;
		char *text;
		int status = wait_program(workers[i], 60);

		workers[i] = 0;
		text = read_text(count_paths[i]);
		cr_assert_not_null(text, "worker %d wrote no count (exit %d)", i, status);
		cr_assert_eq(sscanf(text, "%ld %ld", &worker_runs, &worker_failed), 2);
		cr_assert_eq(status, 0, "worker %d: %ld of %ld drv_launch runs failed", i, worker_failed,
			     worker_runs);
		runs += worker_runs;
		failed += worker_failed;
		free(text);
		free(count_paths[i]);
	}
	/* Every process has exited: after 5 s kept, a refresh and a scrape, all are folded. */
	sleep(8);
	rss_after = rss_kib(exporter.pid);
	map_entries(exporter.pid, after, cap);
	window = (int)(now_seconds() - start) + 1;

	printf("soak_exporter: %ld processes (drv_launch 1, %d at a time) in %.0f s of churn after %d s of warm-up; %d samples\n",
	       runs, WORKERS, churn_s, WARMUP_S, samples);
	printf("soak_exporter: exporter RSS KiB: after warm-up %ld, peak %ld, end of churn %ld, 8 s after %ld\n",
	       rss_warm, rss_peak, rss_end, rss_after);
	for (m = 0; m < STATS_MAPS; m++)
		printf("soak_exporter: map %-16s entries: after warm-up %ld, peak %ld, end of churn %ld, 8 s after %ld (of %ld)\n",
		       stats_maps[m], warm[m], peak[m], end[m], after[m], cap[m]);

	/* Counters: never down, nothing lost. */
	cr_assert_geq(total_launches(false), previous_total);
	cr_assert_geq(total_launches(false) - total_before, (double)runs,
		      "launches lost: the total grew by %.0f for %ld processes of one launch each",
		      total_launches(false) - total_before, runs);
	snprintf(promql, sizeof(promql), "sum(resets(cuprobe_kernel_launches_total[%ds])) or vector(0)", window);
	cr_assert_eq(must_query(promql), 0, "%s", promql);
	snprintf(promql, sizeof(promql), "sum(resets(cuprobe_api_calls_total[%ds])) or vector(0)", window);
	cr_assert_eq(must_query(promql), 0, "%s", promql);
	snprintf(promql, sizeof(promql), "sum(resets(cuprobe_copy_bytes_total[%ds])) or vector(0)", window);
	cr_assert_eq(must_query(promql), 0, "%s", promql);
	/* Scrapes: every one succeeded. */
	snprintf(promql, sizeof(promql), "min_over_time(up{job=\"cuprobe\"}[%ds])", window);
	cr_assert_eq(must_query(promql), 1, "a scrape failed: %s", promql);
	snprintf(promql, sizeof(promql), "max_over_time(scrape_duration_seconds{job=\"cuprobe\"}[%ds])", window);
	longest_scrape = must_query(promql);
	snprintf(promql, sizeof(promql), "count_over_time(up{job=\"cuprobe\"}[%ds])", window);
	scrapes = must_query(promql);
	printf("soak_exporter: %.0f scrapes in %d s, all up; longest %.3f s\n", scrapes, window, longest_scrape);
	cr_assert_geq(scrapes, 0.8 * (window - 5), "scrapes missing");
	cr_assert(http_get(prometheus.port, "/metrics", NULL, &r) && r.status == 200);
	metrics_text = r.body;
	for (char *line = metrics_text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (!strncmp(line, "prometheus_target_scrapes_", 26)) {
			char *value = strchr(line, ' ');

			cr_assert_not_null(value);
			cr_assert_eq(strtod(value, NULL), 0, "Prometheus counted failed scrapes: %.*s",
				     (int)strcspn(line, "\n"), line);
		}
	}
	http_reply_free(&r);
	/* The exporter's own account: nothing lost, no map full. */
	cr_assert_eq(must_query("sum(cuprobe_map_full_total)"), 0, "a BPF map overflowed");
	cr_assert_eq(must_query("sum(cuprobe_records_lost_total)"), 0);
	/* Flat: RSS and maps at the end as after the warm-up (other hosts' CUDA processes allowed for). */
	cr_assert_leq(rss_end, rss_warm + rss_warm / 4 + 4096, "RSS grew: %ld KiB after warm-up, %ld at the end",
		      rss_warm, rss_end);
	cr_assert_leq(rss_after, rss_warm + rss_warm / 4 + 4096, "RSS grew: %ld KiB after warm-up, %ld after",
		      rss_warm, rss_after);
	for (m = 0; m < STATS_MAPS; m++) {
		cr_assert_leq(end[m], 2 * warm[m] + 200, "map %s grew: %ld entries after warm-up, %ld at the end",
			      stats_maps[m], warm[m], end[m]);
		cr_assert_leq(after[m], warm[m] + 200, "map %s kept rows: %ld entries after warm-up, %ld after",
			      stats_maps[m], warm[m], after[m]);
		cr_assert_lt(peak[m], cap[m] / 2, "map %s was more than half full (%ld of %ld)", stats_maps[m],
			     peak[m], cap[m]);
	}
	cr_assert_eq(failed, 0);
	cr_assert_gt(runs, 1000, "too few processes for a soak: %ld", runs);
}
