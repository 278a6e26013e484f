// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU timeline against an exact truth: the simulated driver's virtual
 * GPU clock runs each kernel a known time on its stream and writes when it
 * really started and ended (CUDA_SIM_TIMELINE). Every kernel's true interval
 * must lie inside cuprobe's bound; GPU busy time must lie between cuprobe's
 * bounds; a GPU-bound loop and a launch-bound loop must get their verdicts.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "helpers.h"

#define MAX_KERNELS 4096

struct kernel_truth {
	unsigned long long pid, tid, launch_ns, start_ns, end_ns;
	bool matched;
};

struct timeline_run {
	char *dir;
	int status;
	char *out_text, *err_text;
	json_t *lines;
	struct kernel_truth truth[MAX_KERNELS];
	size_t truth_count;
	/*
	 * The time syncs took to return after the work they waited for was done
	 * (the sim's return_ns - max(until_ns, entry_ns), summed), and how many
	 * waited: the resume delay a busy-at-least bound cannot see.
	 */
	unsigned long long resume_late_ns;
	unsigned long long waits;
	/* Every synchronization of the truth, in order; and their time blocked (all, and waiting ones). */
	struct sync_truth { unsigned long long tid, entry_ns, return_ns; } syncs[MAX_KERNELS];
	size_t sync_count;
	unsigned long long blocked_ns, blocked_waiting_ns, syncs_waiting;
};

/* `cuprobe COMMAND --timeline --json -o F -- drv_launch ARGS`, the sim writing its truth. */
static void run_timeline(struct timeline_run *r, const char *command, const char *const *workload)
{
	char *argv[48], *out = NULL, *err = NULL, *output, *truth_path, env_var[512], *text, *line;
	char *env[] = { env_var, NULL };
	struct run_opts opts = { 0 };
	int n = 0, i;

	require_root();
	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	output = path_join(r->dir, "records.json");
	truth_path = path_join(r->dir, "truth.txt");
	out = path_join(r->dir, "stdout");
	err = path_join(r->dir, "stderr");
	snprintf(env_var, sizeof(env_var), "CUDA_SIM_TIMELINE=%s", truth_path);
	argv[n++] = CUPROBE_BIN;
	argv[n++] = (char *)command;
	argv[n++] = "--timeline";
	argv[n++] = "--json";
	argv[n++] = "-o";
	argv[n++] = output;
	argv[n++] = "--";
	argv[n++] = DRV_LAUNCH;
	for (i = 0; workload[i]; i++)
		argv[n++] = (char *)workload[i];
	argv[n] = NULL;
	opts.stdout_path = out;
	opts.stderr_path = err;
	opts.extra_env = env;
	r->status = run_program(argv, &opts, NULL);
	r->out_text = read_text(out);
	r->err_text = read_text(err);
	cr_assert_eq(r->status, 0, "status %d: %s", r->status, r->err_text);
	r->lines = load_json_lines(output);
	text = read_text(truth_path);
	cr_assert_not_null(text, "the simulated driver wrote no truth");
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		struct kernel_truth *k = &r->truth[r->truth_count];

		if (!strncmp(line, "sync ", 5)) {
			unsigned long long entry = strtoull(strstr(line, "entry_ns=") + 9, NULL, 10);
			unsigned long long ret = strtoull(strstr(line, "return_ns=") + 10, NULL, 10);
			unsigned long long until = strtoull(strstr(line, "until_ns=") + 9, NULL, 10);
			unsigned long long done = until > entry ? until : entry;

			if (until > entry)
				r->waits++;
			/* A synchronization (not a blocking copy, whose until is its own end) that waited. */
			if (until > entry && strstr(line, "Synchronize")) {
				r->syncs_waiting++;
				r->blocked_waiting_ns += ret - entry;
			}
			r->blocked_ns += ret - entry;
			r->resume_late_ns += ret > done ? ret - done : 0;
			cr_assert_lt(r->sync_count, MAX_KERNELS);
			cr_assert_eq(sscanf(strstr(line, "tid="), "tid=%llu", &r->syncs[r->sync_count].tid), 1);
			r->syncs[r->sync_count].entry_ns = entry;
			r->syncs[r->sync_count].return_ns = ret;
			r->sync_count++;
			continue;
		}
		if (strncmp(line, "kernel ", 7))
			continue;
		cr_assert_lt(r->truth_count, MAX_KERNELS);
		cr_assert_eq(sscanf(strstr(line, "pid="), "pid=%llu tid=%llu", &k->pid, &k->tid), 2, "%s", line);
		k->launch_ns = strtoull(strstr(line, "launch_ns=") + 10, NULL, 10);
		k->start_ns = strtoull(strstr(line, "start_ns=") + 9, NULL, 10);
		k->end_ns = strtoull(strstr(line, "end_ns=") + 7, NULL, 10);
		r->truth_count++;
	}
	free(text);
	free(output);
	free(truth_path);
	free(out);
	free(err);
}

static void free_run(struct timeline_run *r)
{
	json_decref(r->lines);
	free(r->out_text);
	free(r->err_text);
	remove_tree(r->dir);
	free(r->dir);
}

/* The nth (0-based) truth kernel of thread tid. */
static struct kernel_truth *truth_of(struct timeline_run *r, unsigned long long tid, size_t nth)
{
	size_t i;

	for (i = 0; i < r->truth_count; i++)
		if (r->truth[i].tid == tid && nth-- == 0)
			return &r->truth[i];
	return NULL;
}

/*
 * When the earliest synchronization of k's thread that entered after k's
 * launch (and so proves k done) is followed by another: that one's entry.
 * A bound taken from the first sync ends before it; one taken from a later
 * sync (evidence missed) ends after. ULLONG_MAX when there is no such pair.
 */
static unsigned long long next_sync_entry(const struct timeline_run *r, const struct kernel_truth *k)
{
	size_t i;

	for (i = 0; i < r->sync_count; i++)
		if (r->syncs[i].tid == k->tid && r->syncs[i].entry_ns >= k->launch_ns)
			break;
	for (i++; i < r->sync_count; i++)
		if (r->syncs[i].tid == k->tid)
			return r->syncs[i].entry_ns;
	return ULLONG_MAX;
}

/*
 * Every gpu_interval against its kernel's truth (the nth launch of a thread
 * is its nth kernel): the bound contains the truth, and closes at the
 * earliest evidence (no later than the first sync after the launch).
 * Returns how many.
 */
static size_t assert_bounds_hold(struct timeline_run *r, size_t *by_evidence_query)
{
	size_t counts[MAX_KERNELS] = { 0 }, checked = 0, i;
	unsigned long long tids[MAX_KERNELS];
	size_t tid_count = 0, t;
	json_t *line;

	json_array_foreach(r->lines, i, line) {
		struct kernel_truth *k;
		long long tid;

		if (strcmp(jstr(line, "type"), "gpu_interval"))
			continue;
		tid = jint(line, "tid");
		for (t = 0; t < tid_count && tids[t] != (unsigned long long)tid; t++)
			;
		if (t == tid_count)
			tids[tid_count++] = tid;
		/* Intervals come out in completion order; a thread's launches in order within it. */
		k = truth_of(r, tid, counts[t]++);
		cr_assert_not_null(k, "an interval of tid %lld without a kernel in the truth", tid);
		cr_assert_str_neq(jstr(line, "evidence"), "none", "a launch without a bound");
		cr_assert_leq((unsigned long long)jint(line, "launch_ns"), k->launch_ns,
			      "cuprobe saw the launch after the driver did");
		cr_assert_leq((unsigned long long)jint(line, "start_after_ns"), k->start_ns,
			      "seq %lld: start_after %lld > true start %llu", jint(line, "seq"),
			      jint(line, "start_after_ns"), k->start_ns);
		cr_assert_geq((unsigned long long)jint(line, "done_by_ns"), k->end_ns,
			      "seq %lld: done_by %lld < true end %llu (%s)", jint(line, "seq"),
			      jint(line, "done_by_ns"), k->end_ns, jstr(line, "evidence"));
		cr_assert_lt((unsigned long long)jint(line, "done_by_ns"), next_sync_entry(r, k),
			     "seq %lld: done_by %lld is after the sync following the one that proved it done",
			     jint(line, "seq"), jint(line, "done_by_ns"));
		if (by_evidence_query && !strcmp(jstr(line, "evidence"), "event_query"))
			(*by_evidence_query)++;
		k->matched = true;
		checked++;
	}
	for (i = 0; i < r->truth_count; i++)
		cr_assert(r->truth[i].matched, "kernel %zu of the truth has no interval", i);
	return checked;
}

/* The measure of the union of the truth's kernel intervals clipped to [lo, hi]. */
static unsigned long long true_busy(const struct timeline_run *r, unsigned long long lo,
				    unsigned long long hi)
{
	unsigned long long total = 0, cur_lo = 0, cur_hi = 0;
	struct kernel_truth sorted[MAX_KERNELS];
	size_t i, j;

	memcpy(sorted, r->truth, r->truth_count * sizeof(*sorted));
	for (i = 1; i < r->truth_count; i++)
		for (j = i; j > 0 && sorted[j - 1].start_ns > sorted[j].start_ns; j--) {
			struct kernel_truth tmp = sorted[j];

			sorted[j] = sorted[j - 1];
			sorted[j - 1] = tmp;
		}
	for (i = 0; i < r->truth_count; i++) {
		unsigned long long a = sorted[i].start_ns < lo ? lo : sorted[i].start_ns;
		unsigned long long b = sorted[i].end_ns > hi ? hi : sorted[i].end_ns;

		if (b <= a)
			continue;
		if (!cur_hi || a > cur_hi) {
			total += cur_hi - cur_lo;
			cur_lo = a;
			cur_hi = b;
		} else if (b > cur_hi) {
			cur_hi = b;
		}
	}
	return total + (cur_hi - cur_lo);
}

/* The final stats report's gpu object of the workload. */
static json_t *gpu_report(struct timeline_run *r)
{
	char *line = find_line(r->out_text, "drv_launch:", 0);
	long long pid;
	json_t *report = NULL, *item;
	size_t i;

	cr_assert_not_null(line, "no workload summary: %s", r->out_text);
	pid = line_value(line, "pid");
	free(line);
	json_array_foreach(r->lines, i, item)
		if (!strcmp(jstr(item, "type"), "stats") && jint(item, "pid") == pid &&
		    json_is_true(json_object_get(item, "final")))
			report = item;
	cr_assert_not_null(report, "no final report: %s", r->err_text);
	return json_object_get(report, "gpu");
}

static void assert_busy_between(struct timeline_run *r, json_t *gpu)
{
	unsigned long long lo = jint(gpu, "window_start_ns"), hi = jint(gpu, "window_end_ns");
	unsigned long long busy = true_busy(r, lo, hi);
	/*
	 * busy_min counts a wait as busy until it returned (less the fastest
	 * sync): it assumes the thread resumes as the work completes, which a
	 * CPU-starved thread does not (README). The bound must hold up to the
	 * resume delays the sim saw, plus 50 us a wait for the return probe's
	 * trap: no more.
	 */
	unsigned long long allowance = r->resume_late_ns + r->waits * 50000ull;

	cr_assert_leq((unsigned long long)jint(gpu, "busy_min_ns"), busy + allowance,
		      "busy at least %lld > truth %llu + resume delays %llu (%llu waits)",
		      jint(gpu, "busy_min_ns"), busy, r->resume_late_ns, r->waits);
	cr_assert_geq((unsigned long long)jint(gpu, "busy_max_ns"), busy,
		      "busy at most %lld < truth %llu", jint(gpu, "busy_max_ns"), busy);
	/*
	 * Time blocked in syncs that waited for work: each is timed from its
	 * entry probe to its return probe, around the sim's own stamps, so at
	 * least the truth's; at most every sync's time, plus 200 us a sync for
	 * the traps (and some slack for a preempted probe).
	 */
	cr_assert_geq((unsigned long long)jint(gpu, "sync_wait_ns"), r->blocked_waiting_ns,
		      "waited in syncs %lld < truth %llu", jint(gpu, "sync_wait_ns"), r->blocked_waiting_ns);
	cr_assert_leq((unsigned long long)jint(gpu, "sync_wait_ns"),
		      r->blocked_ns + r->blocked_ns / 5 + r->sync_count * 200000ull + 5000000ull,
		      "waited in syncs %lld, truth %llu over %zu syncs", jint(gpu, "sync_wait_ns"),
		      r->blocked_ns, r->sync_count);
	cr_assert_geq((unsigned long long)jint(gpu, "syncs_waited"), r->syncs_waiting,
		      "%lld syncs counted as waiting, the truth has %llu", jint(gpu, "syncs_waited"),
		      r->syncs_waiting);
	cr_log_info("busy: at least %.3f ms, truth %.3f ms, at most %.3f ms, window %.3f ms, "
		    "resume delays %.3f ms over %llu waits",
		    jint(gpu, "busy_min_ns") / 1e6, busy / 1e6, jint(gpu, "busy_max_ns") / 1e6,
		    (hi - lo) / 1e6, r->resume_late_ns / 1e6, r->waits);
}

/*
 * One device (the simulated driver has one): its summary is the process's,
 * field for field. The one stream's own waits are the waits for its work.
 */
static void assert_device_and_stream(json_t *gpu)
{
	static const char *const same[] = { "launches", "bounded", "pending", "busy_min_ns",
					    "busy_max_ns", "sync_wait_ns", "syncs_waited" };
	json_t *devices = json_object_get(gpu, "devices"), *streams = json_object_get(gpu, "streams");
	json_t *device, *stream;
	size_t i;

	cr_assert_eq(json_array_size(devices), 1, "devices: %zu", json_array_size(devices));
	device = json_array_get(devices, 0);
	cr_assert_eq(jint(device, "device"), 0);
	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		cr_assert_eq(jint(device, same[i]), jint(gpu, same[i]), "device %s %lld, process %lld",
			     same[i], jint(device, same[i]), jint(gpu, same[i]));
	cr_assert_str_eq(jstr(device, "verdict"), jstr(gpu, "verdict"));
	cr_assert_eq(json_array_size(streams), 1);
	stream = json_array_get(streams, 0);
	cr_assert_leq(jint(stream, "sync_wait_ns"), jint(gpu, "sync_wait_ns"));
	cr_assert_leq(jint(stream, "syncs_waited"), jint(gpu, "syncs_waited"));
}

/* ---- bounds ---------------------------------------------------------------------- */

Test(bounds, a_gpu_bound_loop_with_stream_syncs, .timeout = 120)
{
	const char *const workload[] = { "120", "2", "--kernel-us", "300", "--sync-every", "40", NULL };
	struct timeline_run r;

	run_timeline(&r, "trace", workload);
	cr_assert_eq(assert_bounds_hold(&r, NULL), 240);
	free_run(&r);
}

Test(bounds, a_launch_bound_loop, .timeout = 120)
{
	const char *const workload[] = { "100", "--kernel-us", "20", "--host-us", "300", "--sync-every",
					 "25", NULL };
	struct timeline_run r;

	run_timeline(&r, "trace", workload);
	cr_assert_eq(assert_bounds_hold(&r, NULL), 100);
	free_run(&r);
}

Test(bounds, event_queries_bound_kernels_and_not_ready_ones_delay_the_next, .timeout = 120)
{
	const char *const workload[] = { "60", "--kernel-us", "400", "--sync-every", "5", "--event-query",
					 NULL };
	struct timeline_run r;
	size_t by_query = 0;

	run_timeline(&r, "trace", workload);
	cr_assert_eq(assert_bounds_hold(&r, &by_query), 60);
	/* Every fifth launch's event is polled until complete: those bound the launches before. */
	cr_assert_geq(by_query, 50, "only %zu kernels bounded by event queries", by_query);
	free_run(&r);
}

/* ---- busy time and verdicts (cuprobe stats --timeline) ------------------------------------ */

Test(verdicts, a_gpu_bound_loop, .timeout = 120)
{
	const char *const workload[] = { "200", "--kernel-us", "400", "--sync-every", "50", NULL };
	struct timeline_run r;
	json_t *gpu;

	run_timeline(&r, "stats", workload);
	gpu = gpu_report(&r);
	cr_assert_not_null(gpu, "no gpu section with --timeline");
	cr_assert_eq(jint(gpu, "launches"), 200);
	cr_assert_eq(jint(gpu, "bounded"), 200);
	cr_assert_eq(jint(gpu, "pending"), 0);
	assert_busy_between(&r, gpu);
	cr_assert_str_eq(jstr(gpu, "verdict"), "gpu-bound");
	assert_device_and_stream(gpu);
	/* Its syncs are stream syncs: the stream's own waits are all of them. */
	cr_assert_eq(jint(json_array_get(json_object_get(gpu, "streams"), 0), "sync_wait_ns"),
		     jint(gpu, "sync_wait_ns"));
	free_run(&r);
}

Test(verdicts, a_launch_bound_loop, .timeout = 120)
{
	const char *const workload[] = { "200", "--kernel-us", "20", "--host-us", "400", "--sync-every",
					 "20", NULL };
	struct timeline_run r;
	json_t *gpu;

	run_timeline(&r, "stats", workload);
	gpu = gpu_report(&r);
	cr_assert_not_null(gpu);
	cr_assert_eq(jint(gpu, "launches"), 200);
	cr_assert_eq(jint(gpu, "bounded"), 200);
	assert_busy_between(&r, gpu);
	cr_assert_str_eq(jstr(gpu, "verdict"), "launch-bound");
	assert_device_and_stream(gpu);
	free_run(&r);
}
