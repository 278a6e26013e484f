// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The simulated driver's virtual GPU clock, checked against its own truth
 * file (CUDA_SIM_TIMELINE). Two halves:
 *
 *   drv_launch   the workload the tracer tests run: kernels in launch order
 *                for exactly their time, syncs that return after the last
 *                end, event queries, a launch-bound loop, threads, --fork.
 *   in process   this test links the simulated driver and calls it: CUDA's
 *                default-stream rules (legacy, blocking, non-blocking,
 *                per-thread, _ptsz), events, copies, destroyed streams.
 *
 * Every start and end is compared exactly, from the truth lines; the only
 * timing assumptions are "a call made right after a launch of tens of
 * milliseconds comes before that kernel ends", and they say so.
 * Needs no root.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <cuda.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"
#include "vec_add_ptx.h"

/* The simulated driver's per-thread entry points: cuda.h declares them only for per-thread builds. */
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				     unsigned int gridDimZ, unsigned int blockDimX,
				     unsigned int blockDimY, unsigned int blockDimZ,
				     unsigned int sharedMemBytes, CUstream hStream,
				     void **kernelParams, void **extra);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream);

#define US 1000ull
#define MS 1000000ull
#define MAX_LINES 1024

/* ---- the truth file ------------------------------------------------------ */

#define KERNEL_FORMAT "kernel pid=%ld tid=%ld stream=0x%" PRIx64 " function=0x%" PRIx64 \
	" launch_ns=%" PRIu64 " start_ns=%" PRIu64 " end_ns=%" PRIu64
#define KERNEL_SCAN "kernel pid=%ld tid=%ld stream=0x%" SCNx64 " function=0x%" SCNx64 \
	" launch_ns=%" SCNu64 " start_ns=%" SCNu64 " end_ns=%" SCNu64 "%n"
#define SYNC_FORMAT "sync pid=%ld tid=%ld api=%s entry_ns=%" PRIu64 " return_ns=%" PRIu64 \
	" until_ns=%" PRIu64 " handle=0x%" PRIx64
#define SYNC_SCAN "sync pid=%ld tid=%ld api=%63s entry_ns=%" SCNu64 " return_ns=%" SCNu64 \
	" until_ns=%" SCNu64 " handle=0x%" SCNx64 "%n"
#define EVENT_FORMAT "event pid=%ld tid=%ld stream=0x%" PRIx64 " event=0x%" PRIx64 \
	" record_ns=%" PRIu64 " ready_ns=%" PRIu64
#define EVENT_SCAN "event pid=%ld tid=%ld stream=0x%" SCNx64 " event=0x%" SCNx64 \
	" record_ns=%" SCNu64 " ready_ns=%" SCNu64 "%n"

struct kernel_line {
	long pid, tid;
	uint64_t stream, function, launch, start, end;
};

struct sync_line {
	long pid, tid;
	char api[64];
	uint64_t entry, ret, until, handle;
};

struct event_line {
	long pid, tid;
	uint64_t stream, event, record, ready;
};

struct truth {
	struct kernel_line kernels[MAX_LINES];
	struct sync_line syncs[MAX_LINES];
	struct event_line events[MAX_LINES];
	size_t nkernels, nsyncs, nevents;
};

/* Every line is one of the three kinds and prints back to itself exactly. */
static struct truth *read_truth(const char *path)
{
	struct truth *t = calloc(1, sizeof(*t));
	char *text = read_text(path), *line, *save = NULL, again[512];
	int used;

	cr_assert_not_null(t);
	cr_assert_not_null(text, "no truth file %s", path);
	cr_assert(!*text || text[strlen(text) - 1] == '\n', "the last line is cut:\n%s", text);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		used = -1;
		if (!strncmp(line, "kernel ", 7)) {
			struct kernel_line *k = &t->kernels[t->nkernels];

			cr_assert_lt(t->nkernels, MAX_LINES);
			cr_assert_eq(sscanf(line, KERNEL_SCAN, &k->pid, &k->tid, &k->stream,
					    &k->function, &k->launch, &k->start, &k->end, &used), 7,
				     "bad line: %s", line);
			snprintf(again, sizeof(again), KERNEL_FORMAT, k->pid, k->tid, k->stream,
				 k->function, k->launch, k->start, k->end);
			t->nkernels++;
		} else if (!strncmp(line, "sync ", 5)) {
			struct sync_line *s = &t->syncs[t->nsyncs];

			cr_assert_lt(t->nsyncs, MAX_LINES);
			cr_assert_eq(sscanf(line, SYNC_SCAN, &s->pid, &s->tid, s->api, &s->entry,
					    &s->ret, &s->until, &s->handle, &used), 7,
				     "bad line: %s", line);
			snprintf(again, sizeof(again), SYNC_FORMAT, s->pid, s->tid, s->api, s->entry,
				 s->ret, s->until, s->handle);
			t->nsyncs++;
		} else if (!strncmp(line, "event ", 6)) {
			struct event_line *e = &t->events[t->nevents];

			cr_assert_lt(t->nevents, MAX_LINES);
			cr_assert_eq(sscanf(line, EVENT_SCAN, &e->pid, &e->tid, &e->stream, &e->event,
					    &e->record, &e->ready, &used), 6, "bad line: %s", line);
			snprintf(again, sizeof(again), EVENT_FORMAT, e->pid, e->tid, e->stream,
				 e->event, e->record, e->ready);
			t->nevents++;
		} else {
			cr_assert_fail("unknown truth line: %s", line);
		}
		cr_assert_eq((size_t)used, strlen(line), "trailing text: %s", line);
		cr_assert_str_eq(again, line, "the line does not print back to itself");
	}
	free(text);
	return t;
}

/*
 * The kernels one thread launched, in file (= launch) order. drv_launch's
 * threads each have a stream of their own, and a thread's tid, unlike a
 * stream handle, is not reused by the next thread nor shared with a fork.
 */
static size_t thread_kernels(const struct truth *t, long pid, long tid,
			     const struct kernel_line **out, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < t->nkernels; i++)
		if (t->kernels[i].pid == pid && t->kernels[i].tid == tid) {
			cr_assert_lt(n, max);
			out[n++] = &t->kernels[i];
		}
	for (i = 1; i < n; i++)
		cr_assert_eq(out[i]->stream, out[0]->stream, "one stream per thread");
	return n;
}

/*
 * The FIFO rule of a stream with nothing else to wait for: each kernel starts
 * at its launch or at the end of the one before, whichever is later, and
 * takes exactly duration_ns. Implies launch order, no overlap, start >= launch.
 */
static void assert_fifo(const struct kernel_line *const *k, size_t n, uint64_t duration_ns)
{
	uint64_t previous_end = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t expected = k[i]->launch > previous_end ? k[i]->launch : previous_end;

		if (i)
			cr_assert_geq(k[i]->launch, k[i - 1]->launch, "kernel %zu launched out of order", i);
		cr_assert_eq(k[i]->start, expected, "kernel %zu: start %" PRIu64 ", want max(launch %"
			     PRIu64 ", previous end %" PRIu64 ")", i, k[i]->start, k[i]->launch,
			     previous_end);
		cr_assert_eq(k[i]->end - k[i]->start, duration_ns, "kernel %zu took %" PRIu64 " ns", i,
			     k[i]->end - k[i]->start);
		previous_end = k[i]->end;
	}
}

/* The nth sync line of api from thread tid (-1: any thread). */
static const struct sync_line *find_sync(const struct truth *t, const char *api, long tid, int nth)
{
	size_t i;

	for (i = 0; i < t->nsyncs; i++)
		if (!strcmp(t->syncs[i].api, api) && (tid < 0 || t->syncs[i].tid == tid) && nth-- == 0)
			return &t->syncs[i];
	return NULL;
}

static size_t count_syncs(const struct truth *t, const char *api, long tid)
{
	size_t i, n = 0;

	for (i = 0; i < t->nsyncs; i++)
		n += !strcmp(t->syncs[i].api, api) && (tid < 0 || t->syncs[i].tid == tid);
	return n;
}

/* ---- drv_launch ------------------------------------------------------------ */

struct drv_run {
	char *dir;
	char *truth_path;
	char *out_text;
	char *summary;		/* the first summary line */
	double elapsed_s;
	struct truth *truth;
};

/* drv_launch ARGS with CUDA_SIM_TIMELINE (and env, NULL-terminated, may be NULL); must succeed. */
static void run_drv(struct drv_run *r, const char *const *env, const char *const *args)
{
	char *argv[32], *extra[8], *out_path, timeline[512];
	struct run_opts opts = { 0 };
	int n = 0, e = 0, status;

	memset(r, 0, sizeof(*r));
	r->dir = make_tmpdir();
	r->truth_path = path_join(r->dir, "truth");
	out_path = path_join(r->dir, "stdout");
	snprintf(timeline, sizeof(timeline), "CUDA_SIM_TIMELINE=%s", r->truth_path);
	extra[e++] = timeline;
	while (env && *env)
		extra[e++] = (char *)*env++;
	extra[e] = NULL;
	argv[n++] = DRV_LAUNCH;
	while (*args)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	opts.stdout_path = out_path;
	opts.extra_env = extra;
	unsetenv("CUDA_SIM_KERNEL_NS");
	unsetenv("CUDA_SIM_NS_PER_BLOCK");
	status = run_program(argv, &opts, &r->elapsed_s);
	r->out_text = read_text(out_path);
	cr_assert_eq(status, 0, "drv_launch exited %d:\n%s", status, r->out_text);
	r->summary = find_line(r->out_text, "drv_launch: pid=", 0);
	cr_assert_not_null(r->summary, "no summary line:\n%s", r->out_text);
	r->truth = read_truth(r->truth_path);
	free(out_path);
}

static void drv_free(struct drv_run *r)
{
	free(r->truth);
	free(r->summary);
	free(r->out_text);
	free(r->truth_path);
	remove_tree(r->dir);
	free(r->dir);
}

/* The one launching thread's kernels (drv_launch ITERATIONS with 1 thread). */
static size_t only_stream(const struct drv_run *r, const struct kernel_line **k, size_t max)
{
	size_t n;

	cr_assert_gt(r->truth->nkernels, 0);
	n = thread_kernels(r->truth, r->truth->kernels[0].pid, r->truth->kernels[0].tid, k, max);
	cr_assert_eq(n, r->truth->nkernels, "one launching thread expected");
	return n;
}

Test(drv_launch, kernels_run_in_launch_order_for_exactly_their_time)
{
	const char *args[] = { "20", "--kernel-us", "2000", NULL };
	const struct kernel_line *k[64];
	const struct sync_line *sync, *ctx;
	struct drv_run r;
	size_t n, i, queued = 0;

	run_drv(&r, NULL, args);
	n = only_stream(&r, k, 64);
	cr_assert_eq(n, 20);
	assert_fifo(k, n, 2000 * US);
	for (i = 0; i < n; i++) {
		cr_assert_neq(k[i]->tid, k[i]->pid, "launched by the worker thread, not main");
		queued += k[i]->start > k[i]->launch;
	}
	/* 20 launches take far less than 2 ms each: the stream's queue builds up. */
	cr_assert_gt(queued, 0, "no kernel ever waited for the one before");

	/* The worker's final cuStreamSynchronize waited for the last end, and returned after it. */
	cr_assert_eq(count_syncs(r.truth, "cuStreamSynchronize", k[0]->tid), 1);
	sync = find_sync(r.truth, "cuStreamSynchronize", k[0]->tid, 0);
	cr_assert_eq(sync->handle, k[0]->stream);
	cr_assert_eq(sync->until, k[n - 1]->end);
	cr_assert_geq(sync->ret, k[n - 1]->end);
	cr_assert_geq((uint64_t)line_value(r.summary, "sync_return_ns"), k[n - 1]->end,
		      "%s", r.summary);
	/* cuCtxSynchronize came after: nothing left to wait for, the same end. */
	ctx = find_sync(r.truth, "cuCtxSynchronize", k[0]->pid, 0);
	cr_assert_not_null(ctx);
	cr_assert_eq(ctx->until, k[n - 1]->end);
	cr_assert_geq(ctx->entry, sync->ret);
	cr_assert_geq(r.elapsed_s, 20 * 0.002, "the run was shorter than its kernels");
	cr_assert_eq(line_value(r.summary, "launches"), 20);
	cr_assert_eq(line_value(r.summary, "syncs"), 2);
	cr_assert_eq(line_value(r.summary, "kernel_us"), 2000);
	drv_free(&r);
}

Test(drv_launch, a_launch_bound_loop_leaves_the_stream_idle)
{
	const char *args[] = { "10", "--host-us", "500", "--kernel-us", "50", NULL };
	const struct kernel_line *k[16];
	struct drv_run r;
	size_t n, i;

	run_drv(&r, NULL, args);
	n = only_stream(&r, k, 16);
	cr_assert_eq(n, 10);
	assert_fifo(k, n, 50 * US);
	for (i = 0; i < n; i++) {
		cr_assert_eq(k[i]->start, k[i]->launch, "kernel %zu waited on an idle stream", i);
		if (i)
			cr_assert_geq(k[i]->launch - k[i - 1]->launch, 500 * US,
				      "launches %zu and %zu closer than --host-us", i - 1, i);
	}
	cr_assert_eq(line_value(r.summary, "host_us"), 500);
	drv_free(&r);
}

Test(drv_launch, event_queries_see_the_kernel_running_then_done)
{
	const char *args[] = { "3", "--kernel-us", "30000", "--event-query", NULL };
	const struct kernel_line *k[4];
	struct drv_run r;
	size_t n, i;

	run_drv(&r, NULL, args);
	n = only_stream(&r, k, 4);
	cr_assert_eq(n, 3);
	assert_fifo(k, n, 30 * MS);
	cr_assert_eq(r.truth->nevents, 3);
	for (i = 0; i < n; i++) {
		const struct event_line *e = &r.truth->events[i];

		cr_assert_eq(e->tid, k[i]->tid);
		cr_assert_eq(e->stream, k[i]->stream);
		cr_assert_geq(e->record, k[i]->launch);
		/* Recorded while kernel i ran: ready exactly when it ends. */
		cr_assert_eq(e->ready, k[i]->end, "event %zu", i);
		/* The host polled until then, so the next launch found the stream idle. */
		if (i + 1 < n)
			cr_assert_geq(k[i + 1]->launch, e->ready);
	}
	cr_assert_eq(line_value(r.summary, "event_records"), 3);
	/* Each record ends with exactly one CUDA_SUCCESS; a 30 ms kernel is polled running. */
	cr_assert_geq(line_value(r.summary, "event_not_ready"), 1, "%s", r.summary);
	cr_assert_eq(line_value(r.summary, "event_queries"),
		     line_value(r.summary, "event_not_ready") + 3, "%s", r.summary);
	cr_assert_eq(line_value(r.summary, "syncs"), 2, "events replace the periodic syncs only");
	drv_free(&r);
}

Test(drv_launch, sync_every_k_waits_for_the_kth_kernel)
{
	const char *args[] = { "6", "--kernel-us", "1000", "--sync-every", "2", NULL };
	const struct kernel_line *k[8];
	const struct sync_line *sync;
	struct drv_run r;
	size_t n;
	int i;

	run_drv(&r, NULL, args);
	n = only_stream(&r, k, 8);
	cr_assert_eq(n, 6);
	assert_fifo(k, n, 1000 * US);
	/* Three periodic syncs and the final one. */
	cr_assert_eq(count_syncs(r.truth, "cuStreamSynchronize", k[0]->tid), 4);
	for (i = 0; i < 3; i++) {
		sync = find_sync(r.truth, "cuStreamSynchronize", k[0]->tid, i);
		cr_assert_eq(sync->until, k[2 * i + 1]->end, "sync %d", i);
		cr_assert_geq(sync->ret, sync->until);
		/* The launch after a sync finds the stream idle. */
		if (i < 2) {
			cr_assert_geq(k[2 * i + 2]->launch, sync->ret);
			cr_assert_eq(k[2 * i + 2]->start, k[2 * i + 2]->launch);
		}
	}
	sync = find_sync(r.truth, "cuStreamSynchronize", k[0]->tid, 3);
	cr_assert_eq(sync->until, k[5]->end);
	cr_assert_eq(line_value(r.summary, "syncs"), 5, "%s", r.summary);
	drv_free(&r);
}

Test(drv_launch, sync_every_k_with_event_queries_records_every_kth)
{
	const char *args[] = { "6", "--kernel-us", "1000", "--sync-every", "3", "--event-query", NULL };
	const struct kernel_line *k[8];
	struct drv_run r;

	run_drv(&r, NULL, args);
	cr_assert_eq(only_stream(&r, k, 8), 6);
	cr_assert_eq(r.truth->nevents, 2);
	cr_assert_eq(r.truth->events[0].ready, k[2]->end);
	cr_assert_eq(r.truth->events[1].ready, k[5]->end);
	cr_assert_eq(line_value(r.summary, "event_records"), 2);
	cr_assert_eq(line_value(r.summary, "syncs"), 2);
	drv_free(&r);
}

Test(drv_launch, threads_keep_their_own_streams_and_the_context_waits_for_all)
{
	const char *args[] = { "10", "3", "--kernel-us", "300", NULL };
	const struct kernel_line *k[16];
	long tids[3] = { 0 };
	uint64_t last_end = 0;
	const struct sync_line *sync;
	struct drv_run r;
	size_t i, j, nthreads = 0;

	run_drv(&r, NULL, args);
	cr_assert_eq(r.truth->nkernels, 30);
	for (i = 0; i < r.truth->nkernels; i++) {
		for (j = 0; j < nthreads && tids[j] != r.truth->kernels[i].tid; j++)
			;
		if (j == nthreads) {
			cr_assert_lt(nthreads, 3, "more than 3 launching threads");
			tids[nthreads++] = r.truth->kernels[i].tid;
		}
	}
	cr_assert_eq(nthreads, 3);
	for (j = 0; j < nthreads; j++) {
		size_t n = thread_kernels(r.truth, r.truth->kernels[0].pid, tids[j], k, 16);

		cr_assert_eq(n, 10);
		/* Non-blocking streams: nothing but their own FIFO. */
		assert_fifo(k, n, 300 * US);
		sync = find_sync(r.truth, "cuStreamSynchronize", tids[j], 0);
		cr_assert_eq(sync->handle, k[0]->stream);
		cr_assert_eq(sync->until, k[n - 1]->end);
		if (k[n - 1]->end > last_end)
			last_end = k[n - 1]->end;
	}
	sync = find_sync(r.truth, "cuCtxSynchronize", -1, 0);
	cr_assert_not_null(sync);
	cr_assert_eq(sync->until, last_end);
	cr_assert_geq(sync->ret, last_end);
	drv_free(&r);
}

Test(drv_launch, forked_processes_and_threads_append_whole_lines)
{
	const char *args[] = { "100", "2", "--fork", "--kernel-us", "1", NULL };
	const struct kernel_line *k[128];
	long pids[2] = { 0 };
	struct drv_run r;
	size_t i, n;

	run_drv(&r, NULL, args);	/* read_truth checks every line whole */
	cr_assert_eq(r.truth->nkernels, 400);
	for (i = 0; i < r.truth->nkernels; i++) {
		long pid = r.truth->kernels[i].pid;

		if (!pids[0])
			pids[0] = pid;
		else if (pid != pids[0] && !pids[1])
			pids[1] = pid;
		cr_assert(pid == pids[0] || pid == pids[1], "a third pid");
	}
	cr_assert_neq(pids[1], 0, "both processes wrote");
	for (i = 0; i < r.truth->nkernels; i++) {
		n = thread_kernels(r.truth, r.truth->kernels[i].pid, r.truth->kernels[i].tid, k, 128);
		cr_assert_eq(n, 100);
		assert_fifo(k, n, 1 * US);
	}
	drv_free(&r);
}

Test(drv_launch, without_a_kernel_time_kernels_take_no_time)
{
	const char *args[] = { "10", NULL };
	const struct kernel_line *k[16];
	struct drv_run r;
	size_t n, i, len;

	run_drv(&r, NULL, args);
	n = only_stream(&r, k, 16);
	cr_assert_eq(n, 10);
	for (i = 0; i < n; i++) {
		cr_assert_eq(k[i]->start, k[i]->launch);
		cr_assert_eq(k[i]->end, k[i]->start);
	}
	/* No timing option: the summary line is the one it always was. */
	len = strlen(r.summary);
	cr_assert(len > 10 && !strcmp(r.summary + len - 10, " result=ok"), "%s", r.summary);
	cr_assert_eq(line_value(r.summary, "kernel_us"), -1);
	drv_free(&r);
}

Test(drv_launch, ns_per_block_adds_to_the_kernel_time)
{
	/* 2560 elements: a grid of 10 blocks of 256. */
	const char *env[] = { "CUDA_SIM_NS_PER_BLOCK=1000", NULL };
	const char *args[] = { "4", "--kernel-us", "5", "--elements", "2560", NULL };
	const struct kernel_line *k[8];
	struct drv_run r;

	run_drv(&r, env, args);
	cr_assert_eq(only_stream(&r, k, 8), 4);
	assert_fifo(k, 4, 5 * US + 10 * 1000);
	drv_free(&r);
}

Test(drv_launch, a_malformed_kernel_time_fails_cuInit)
{
	char *argv[] = { DRV_LAUNCH, "1", NULL };
	char *env[] = { "CUDA_SIM_KERNEL_NS=20us", NULL };
	struct run_opts opts = { .extra_env = env };
	char *dir = make_tmpdir(), *err_path = path_join(dir, "stderr"), *err;

	opts.stderr_path = err_path;
	cr_assert_eq(run_program(argv, &opts, NULL), 1);
	err = read_text(err_path);
	cr_assert_not_null(strstr(err, "cuInit failed: CUDA_ERROR_INVALID_VALUE"), "%s", err);
	free(err);
	free(err_path);
	remove_tree(dir);
	free(dir);
}

/* ---- in process: CUDA's stream rules -------------------------------------- */

#define CHECK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s", #call)

struct sim {
	char *dir, *truth_path;
	CUcontext context;
	CUmodule module;
	CUfunction function;
	CUdeviceptr a, b, c;
	int n;
	void *params[4];
	float host[1024];
};

/* cuInit with kernel_ns per kernel and a truth file, the primary context, vec_add, 3 buffers. */
static void sim_start(struct sim *s, unsigned long long kernel_ns)
{
	char value[32];
	CUdevice device;

	memset(s, 0, sizeof(*s));
	s->dir = make_tmpdir();
	s->truth_path = path_join(s->dir, "truth");
	snprintf(value, sizeof(value), "%llu", kernel_ns);
	cr_assert_eq(setenv("CUDA_SIM_KERNEL_NS", value, 1), 0);
	cr_assert_eq(setenv("CUDA_SIM_TIMELINE", s->truth_path, 1), 0);
	unsetenv("CUDA_SIM_NS_PER_BLOCK");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&device, 0));
	CHECK(cuDevicePrimaryCtxRetain(&s->context, device));
	CHECK(cuCtxSetCurrent(s->context));
	CHECK(cuModuleLoadData(&s->module, vec_add_ptx));
	CHECK(cuModuleGetFunction(&s->function, s->module, "vec_add"));
	s->n = 1024;
	CHECK(cuMemAlloc(&s->a, sizeof(s->host)));
	CHECK(cuMemAlloc(&s->b, sizeof(s->host)));
	CHECK(cuMemAlloc(&s->c, sizeof(s->host)));
	s->params[0] = &s->a;
	s->params[1] = &s->b;
	s->params[2] = &s->c;
	s->params[3] = &s->n;
}

static void sim_launch(struct sim *s, CUstream stream)
{
	CHECK(cuLaunchKernel(s->function, 4, 1, 1, 256, 1, 1, 0, stream, s->params, NULL));
}

static void sim_stop(struct sim *s)
{
	remove_tree(s->dir);
	free(s->truth_path);
	free(s->dir);
}

static long gettid_long(void)
{
	return (long)syscall(SYS_gettid);
}

static uint64_t monotonic_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a > b ? a : b;

	return m > c ? m : c;
}

Test(streams, the_legacy_stream_and_blocking_streams_wait_for_each_other)
{
	const struct kernel_line *k;
	CUstream blocking, non_blocking;
	struct truth *t;
	struct sim s;
	int i;

	sim_start(&s, 5 * MS);
	CHECK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
	CHECK(cuStreamCreate(&non_blocking, CU_STREAM_NON_BLOCKING));
	for (i = 0; i < 4; i++)
		sim_launch(&s, non_blocking);	/* 0-3: busy longest, ignored by the legacy stream */
	sim_launch(&s, blocking);		/* 4 */
	sim_launch(&s, NULL);			/* 5: legacy, after 4 (not after 3) */
	sim_launch(&s, blocking);		/* 6: after 5 */
	sim_launch(&s, CU_STREAM_LEGACY);	/* 7: legacy again, after 6 */
	sim_launch(&s, non_blocking);		/* 8: after 3 only */
	CHECK(cuCtxSynchronize());
	t = read_truth(s.truth_path);
	cr_assert_eq(t->nkernels, 9);
	k = t->kernels;
	for (i = 1; i < 4; i++)
		cr_assert_eq(k[i].start, max3(k[i].launch, k[i - 1].end, 0));
	cr_assert_eq(k[4].start, k[4].launch, "a fresh blocking stream after an idle legacy stream");
	/* The legacy stream waits for the blocking stream, not for the non-blocking one. */
	cr_assert_eq(k[5].stream, 0);
	cr_assert_eq(k[5].start, max3(k[5].launch, k[4].end, 0));
	cr_assert_lt(k[5].start, k[3].end, "launched within 15 ms of kernel 0");
	cr_assert_eq(k[6].start, max3(k[6].launch, k[5].end, 0), "blocking waits for legacy");
	cr_assert_eq(k[7].stream, (uint64_t)(uintptr_t)CU_STREAM_LEGACY);
	cr_assert_eq(k[7].start, max3(k[7].launch, k[6].end, 0));
	cr_assert_eq(k[8].start, max3(k[8].launch, k[3].end, 0), "non-blocking waits for nobody");
	/* cuCtxSynchronize waited for every stream, non-blocking included. */
	cr_assert_eq(find_sync(t, "cuCtxSynchronize", -1, 0)->until,
		     k[7].end > k[8].end ? k[7].end : k[8].end);
	CHECK(cuStreamDestroy(blocking));
	CHECK(cuStreamDestroy(non_blocking));
	free(t);
	sim_stop(&s);
}

struct per_thread_run {
	struct sim *sim;
	pthread_barrier_t *barrier;
	long tid;
};

/* Launches 2 kernels on its per-thread stream, lets main go on, then 1 more after main's. */
static void *per_thread_worker(void *arg)
{
	struct per_thread_run *run = arg;
	struct sim *s = run->sim;

	run->tid = gettid_long();
	CHECK(cuCtxSetCurrent(s->context));
	sim_launch(s, CU_STREAM_PER_THREAD);
	sim_launch(s, CU_STREAM_PER_THREAD);
	pthread_barrier_wait(run->barrier);	/* main launches */
	pthread_barrier_wait(run->barrier);
	sim_launch(s, CU_STREAM_PER_THREAD);	/* after main's legacy kernel */
	CHECK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	return NULL;
}

Test(streams, per_thread_streams_wait_only_for_the_legacy_stream)
{
	struct per_thread_run run;
	pthread_barrier_t barrier;
	const struct kernel_line *k;
	const struct sync_line *sync;
	pthread_t thread;
	struct truth *t;
	struct sim s;

	sim_start(&s, 10 * MS);
	pthread_barrier_init(&barrier, NULL, 2);
	run = (struct per_thread_run){ .sim = &s, .barrier = &barrier };
	cr_assert_eq(pthread_create(&thread, NULL, per_thread_worker, &run), 0);
	pthread_barrier_wait(&barrier);
	/* 2: main's per-thread stream (0 to a _ptsz entry point) ignores the worker's. */
	CHECK(cuLaunchKernel_ptsz(s.function, 4, 1, 1, 256, 1, 1, 0, NULL, s.params, NULL));
	cr_assert_eq(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY, "a 10 ms kernel just launched");
	/* 3: the legacy stream waits for both per-thread streams. */
	sim_launch(&s, NULL);
	pthread_barrier_wait(&barrier);
	cr_assert_eq(pthread_join(thread, NULL), 0);
	/* 5: main's per-thread stream now waits for the legacy kernel (3). */
	CHECK(cuLaunchKernel_ptsz(s.function, 4, 1, 1, 256, 1, 1, 0, NULL, s.params, NULL));
	CHECK(cuStreamSynchronize_ptsz(NULL));
	cr_assert_eq(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_SUCCESS);

	t = read_truth(s.truth_path);
	cr_assert_eq(t->nkernels, 6);
	k = t->kernels;
	cr_assert_eq(k[0].tid, run.tid);
	cr_assert_eq(k[0].stream, (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD);
	cr_assert_eq(k[1].start, max3(k[1].launch, k[0].end, 0));
	cr_assert_eq(k[2].tid, gettid_long());
	cr_assert_eq(k[2].stream, 0, "the handle as the API received it");
	cr_assert_eq(k[2].start, k[2].launch, "per-thread streams do not wait for each other");
	cr_assert_eq(k[3].start, max3(k[1].end, k[2].end, k[3].launch));
	cr_assert_eq(k[4].tid, run.tid);
	cr_assert_eq(k[4].start, max3(k[4].launch, k[3].end, k[1].end),
		     "the worker's per-thread stream waits for the legacy one");
	cr_assert_gt(k[4].start, k[4].launch, "launched within 10 ms of the legacy kernel");
	cr_assert_eq(k[5].tid, gettid_long());
	cr_assert_eq(k[5].start, max3(k[5].launch, k[3].end, k[2].end));
	sync = find_sync(t, "cuStreamSynchronize_ptsz", gettid_long(), 0);
	cr_assert_eq(sync->until, k[5].end);
	sync = find_sync(t, "cuStreamSynchronize", run.tid, 0);
	cr_assert_eq(sync->until, k[4].end);
	cr_assert_eq(sync->handle, (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD);
	pthread_barrier_destroy(&barrier);
	free(t);
	sim_stop(&s);
}

static void *launch_and_exit(void *arg)
{
	struct sim *s = arg;

	CHECK(cuCtxSetCurrent(s->context));
	sim_launch(s, CU_STREAM_PER_THREAD);
	return NULL;
}

Test(streams, the_context_waits_for_destroyed_streams_and_exited_threads)
{
	const struct sync_line *sync;
	CUstream stream;
	pthread_t thread;
	struct truth *t;
	struct sim s;

	sim_start(&s, 30 * MS);
	CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	sim_launch(&s, stream);
	CHECK(cuStreamDestroy(stream));	/* returns at once; the kernel still runs */
	cr_assert_eq(pthread_create(&thread, NULL, launch_and_exit, &s), 0);
	cr_assert_eq(pthread_join(thread, NULL), 0);
	CHECK(cuCtxSynchronize_v2(s.context));
	t = read_truth(s.truth_path);
	cr_assert_eq(t->nkernels, 2);
	sync = find_sync(t, "cuCtxSynchronize_v2", -1, 0);
	cr_assert_eq(sync->handle, (uint64_t)(uintptr_t)s.context);
	cr_assert_eq(sync->until, t->kernels[0].end > t->kernels[1].end ? t->kernels[0].end
									  : t->kernels[1].end);
	cr_assert_geq(sync->ret, sync->until);
	free(t);
	sim_stop(&s);
}

Test(events, record_query_synchronize_and_stream_wait)
{
	CUstream producer, consumer;
	CUevent event, never_recorded;
	const struct kernel_line *k;
	const struct sync_line *sync;
	struct truth *t;
	struct sim s;

	sim_start(&s, 20 * MS);
	CHECK(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventCreate(&never_recorded, CU_EVENT_DEFAULT));
	cr_assert_eq(cuEventQuery(never_recorded), CUDA_SUCCESS, "as in CUDA");

	sim_launch(&s, producer);			/* 0 */
	CHECK(cuEventRecord(event, producer));
	sim_launch(&s, producer);			/* 1: not captured */
	CHECK(cuStreamWaitEvent(consumer, event, 0));
	sim_launch(&s, consumer);			/* 2: after 0, not 1 */
	cr_assert_eq(cuEventQuery(event), CUDA_ERROR_NOT_READY, "a 20 ms kernel just launched");
	cr_assert_eq(cuStreamQuery(consumer), CUDA_ERROR_NOT_READY);
	CHECK(cuEventSynchronize(event));
	cr_assert_eq(cuEventQuery(event), CUDA_SUCCESS);
	CHECK(cuEventSynchronize(never_recorded));
	CHECK(cuStreamSynchronize(consumer));
	cr_assert_eq(cuStreamQuery(consumer), CUDA_SUCCESS);

	t = read_truth(s.truth_path);
	k = t->kernels;
	cr_assert_eq(t->nkernels, 3);
	cr_assert_eq(t->nevents, 1);
	cr_assert_eq(t->events[0].event, (uint64_t)(uintptr_t)event);
	cr_assert_eq(t->events[0].ready, k[0].end, "the record captures the work before it");
	cr_assert_eq(k[1].start, max3(k[1].launch, k[0].end, 0));
	cr_assert_eq(k[2].start, max3(k[2].launch, k[0].end, 0),
		     "the consumer waits for the event, not for kernel 1");
	cr_assert_gt(k[2].start, k[2].launch, "launched within 20 ms of kernel 0");
	sync = find_sync(t, "cuEventSynchronize", -1, 0);
	cr_assert_eq(sync->handle, (uint64_t)(uintptr_t)event);
	cr_assert_eq(sync->until, k[0].end);
	cr_assert_geq(sync->ret, k[0].end);
	sync = find_sync(t, "cuEventSynchronize", -1, 1);
	cr_assert_eq(sync->until, 0, "a never-recorded event waits for nothing");
	cr_assert_eq(find_sync(t, "cuStreamSynchronize", -1, 0)->until, k[2].end);
	CHECK(cuEventDestroy(event));
	CHECK(cuEventDestroy(never_recorded));
	CHECK(cuStreamDestroy(producer));
	CHECK(cuStreamDestroy(consumer));
	free(t);
	sim_stop(&s);
}

Test(copies, synchronous_copies_wait_like_the_legacy_stream)
{
	const struct kernel_line *k;
	const struct sync_line *sync;
	CUstream blocking, non_blocking;
	uint64_t dtod_return;
	struct truth *t;
	struct sim s;

	sim_start(&s, 20 * MS);
	CHECK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
	CHECK(cuStreamCreate(&non_blocking, CU_STREAM_NON_BLOCKING));
	sim_launch(&s, blocking);			/* 0 */
	/* Device to device: no host-side synchronization. */
	CHECK(cuMemcpyDtoD(s.c, s.a, sizeof(s.host)));
	dtod_return = monotonic_ns();
	CHECK(cuMemcpyDtoH(s.host, s.c, sizeof(s.host)));	/* waits for 0 */
	sim_launch(&s, non_blocking);			/* 1 */
	CHECK(cuMemcpyHtoD(s.a, s.host, sizeof(s.host)));	/* does not wait for 1 */
	CHECK(cuMemcpyAsync(s.b, s.a, sizeof(s.host), non_blocking));
	sim_launch(&s, non_blocking);			/* 2: after 1 */
	CHECK(cuCtxSynchronize());

	t = read_truth(s.truth_path);
	k = t->kernels;
	cr_assert_eq(t->nkernels, 3);
	cr_assert_lt(dtod_return, k[0].end, "cuMemcpyDtoD returned within 20 ms of the launch");
	cr_assert_eq(count_syncs(t, "cuMemcpyDtoD_v2", -1), 0, "the host never waits for it");
	sync = find_sync(t, "cuMemcpyDtoH_v2", -1, 0);
	cr_assert_eq(sync->until, k[0].end, "the copy waited for the blocking stream's kernel");
	cr_assert_geq(sync->ret, k[0].end);
	sync = find_sync(t, "cuMemcpyHtoD_v2", -1, 0);
	cr_assert_lt(sync->until, k[1].end, "a non-blocking stream is not waited for");
	cr_assert_eq(k[2].start, max3(k[2].launch, k[1].end, 0));
	CHECK(cuStreamDestroy(blocking));
	CHECK(cuStreamDestroy(non_blocking));
	free(t);
	sim_stop(&s);
}

Test(streams, handles_are_not_reused_soon_and_stale_ones_are_refused)
{
	static CUstream seen[5000];
	CUstream stream;
	struct sim s;
	int i, j;

	sim_start(&s, 0);
	/* Created and destroyed one at a time, the worst case for reuse. */
	for (i = 0; i < 5000; i++) {
		CHECK(cuStreamCreate(&stream, i % 2 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
		seen[i] = stream;
		CHECK(cuStreamDestroy(stream));
		cr_assert_eq(cuStreamDestroy(stream), CUDA_ERROR_INVALID_HANDLE);
		cr_assert_eq(cuStreamSynchronize(stream), CUDA_ERROR_INVALID_HANDLE);
	}
	for (i = 1; i < 4096; i++)
		for (j = i - 1; j >= 0 && j > i - 64; j--)
			cr_assert_neq(seen[i], seen[j], "stream %d reused the handle of stream %d", i, j);
	cr_assert_eq(seen[4096], seen[0], "the table wrapped after 4096 creations");
	cr_assert_eq(cuStreamQuery((CUstream)&s), CUDA_ERROR_INVALID_HANDLE, "not a stream");
	sim_stop(&s);
}

Test(streams, stream_calls_before_cuInit_are_refused)
{
	CUdeviceptr pointer;

	cr_assert_eq(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_INITIALIZED);
	cr_assert_eq(cuStreamSynchronize_ptsz(NULL), CUDA_ERROR_NOT_INITIALIZED);
	cr_assert_eq(cuMemAllocAsync(&pointer, 256, CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_INITIALIZED);
	cr_assert_eq(cuCtxSynchronize(), CUDA_ERROR_NOT_INITIALIZED);
}
