// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU timeline fed records by hand: which evidence bounds which launch,
 * and the busy time, waits and verdicts per process, device and stream.
 * (root_timeline checks the same against the simulated driver's clock.)
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "cuprobe_internal.h"

#define PID 4000
#define MAIN_TID 4000
#define OTHER_TID 4001
#define STREAM_A 0xa000ull
#define STREAM_B 0xb000ull
#define EVENT 0xe000ull
#define US 1000ull

struct seen {
	struct cp_gpu_interval intervals[64];
	size_t count;
};

static void on_interval(void *ctx, const struct cp_gpu_interval *interval)
{
	struct seen *seen = ctx;

	cr_assert_lt(seen->count, 64);
	seen->intervals[seen->count++] = *interval;
}

static struct cp_timeline *timeline(struct seen *seen, size_t max_pending)
{
	struct cp_timeline_opts opts = { .sz = sizeof(opts), .on_interval = on_interval, .ctx = seen,
					 .max_pending = max_pending };
	struct cp_timeline *tl;

	memset(seen, 0, sizeof(*seen));
	tl = cp_timeline__new(&opts);
	cr_assert_not_null(tl);
	return tl;
}

static union cp_event record(enum cp_event_type type, enum cp_api api, uint32_t tid, uint64_t time_ns)
{
	union cp_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = type;
	ev.hdr.api = api;
	ev.hdr.pid = PID;
	ev.hdr.tid = tid;
	ev.hdr.time_ns = time_ns;
	return ev;
}

/* A launch on stream of device at t (its call returns before the thread's next record). */
static void launch(struct cp_timeline *tl, uint32_t tid, uint64_t t, uint64_t stream, int32_t device)
{
	union cp_event ev = record(CP_EV_LAUNCH, CP_API_cuLaunchKernel, tid, t);

	ev.launch.function = 0xf00;
	ev.launch.stream = stream;
	ev.launch.device = device;
	cp_timeline__observe(tl, &ev);
}

/* A sync of kind on handle, entered at entry, returned at ret (with result). */
static void sync_call(struct cp_timeline *tl, uint32_t tid, enum cp_api api, enum cp_sync_kind kind,
		      uint64_t handle, int32_t device, uint64_t entry, uint64_t ret, int result)
{
	union cp_event ev = record(CP_EV_SYNC, api, tid, ret);

	ev.sync.kind = kind;
	ev.sync.handle = handle;
	ev.sync.entry_ns = entry;
	ev.sync.result = result;
	ev.sync.device = device;
	cp_timeline__observe(tl, &ev);
}

static void event_op(struct cp_timeline *tl, uint32_t tid, uint64_t t, enum cp_event_op op, uint64_t stream)
{
	union cp_event ev = record(CP_EV_EVENT, CP_API_cuEventRecord, tid, t);

	ev.event.op = op;
	ev.event.event = EVENT;
	ev.event.stream = stream;
	ev.event.device = 0;
	cp_timeline__observe(tl, &ev);
}

static void process_exit(struct cp_timeline *tl, uint64_t t)
{
	union cp_event ev = record(CP_EV_PROC, CP_API_sched_process_exit, MAIN_TID, t);

	ev.proc.kind = CP_PROC_EXIT;
	cp_timeline__observe(tl, &ev);
}

Test(evidence, a_stream_sync_bounds_the_launches_before_it_on_its_stream_only)
{
	struct seen seen;
	struct cp_timeline *tl = timeline(&seen, 0);

	launch(tl, MAIN_TID, 100 * US, STREAM_A, 0);
	launch(tl, MAIN_TID, 110 * US, STREAM_B, 0);
	launch(tl, MAIN_TID, 120 * US, STREAM_A, 0);
	sync_call(tl, MAIN_TID, CP_API_cuStreamSynchronize, CP_SYNC_STREAM, STREAM_A, 0, 130 * US,
		  900 * US, 0);
	cr_assert_eq(seen.count, 2, "stream B's launch is not bounded by A's sync");
	cr_assert_eq(seen.intervals[0].launch_ns, 100 * US);
	cr_assert_eq(seen.intervals[1].launch_ns, 120 * US);
	cr_assert_eq(seen.intervals[1].done_by_ns, 900 * US);
	cr_assert_eq(seen.intervals[1].evidence, CP_DONE_STREAM_SYNC);
	cr_assert_eq(seen.intervals[1].stream, STREAM_A);
	/* The process's exit bounds what is left. */
	process_exit(tl, 2000 * US);
	cr_assert_eq(seen.count, 3);
	cr_assert_eq(seen.intervals[2].stream, STREAM_B);
	cr_assert_eq(seen.intervals[2].evidence, CP_DONE_PROCESS_EXIT);
	cr_assert_eq(seen.intervals[2].done_by_ns, 2000 * US);
	cp_timeline__free(tl);
}

Test(evidence, a_launch_of_another_thread_whose_call_may_still_run_is_not_covered)
{
	struct seen seen;
	struct cp_timeline *tl = timeline(&seen, 0);

	/* The other thread's launch call has no later record: it may not be enqueued yet. */
	launch(tl, OTHER_TID, 100 * US, STREAM_A, 0);
	sync_call(tl, MAIN_TID, CP_API_cuStreamSynchronize, CP_SYNC_STREAM, STREAM_A, 0, 150 * US,
		  200 * US, 0);
	cr_assert_eq(seen.count, 0);
	/* A later record of the other thread says its call returned: the next sync covers it. */
	sync_call(tl, OTHER_TID, CP_API_cuStreamQuery, CP_SYNC_QUERY_STREAM, STREAM_B, 0, 210 * US,
		  215 * US, 0);
	sync_call(tl, MAIN_TID, CP_API_cuStreamSynchronize, CP_SYNC_STREAM, STREAM_A, 0, 300 * US,
		  400 * US, 0);
	cr_assert_eq(seen.count, 1);
	cr_assert_eq(seen.intervals[0].tid, OTHER_TID);
	cr_assert_eq(seen.intervals[0].done_by_ns, 400 * US);
	cr_assert_eq(seen.intervals[0].evidence_tid, MAIN_TID);
	cp_timeline__free(tl);
}

Test(evidence, a_context_sync_covers_its_devices_streams_and_not_another_devices)
{
	struct seen seen;
	struct cp_timeline *tl = timeline(&seen, 0);

	launch(tl, MAIN_TID, 100 * US, STREAM_A, 0);
	launch(tl, MAIN_TID, 110 * US, STREAM_B, 0);
	launch(tl, MAIN_TID, 120 * US, STREAM_A, 1);
	sync_call(tl, MAIN_TID, CP_API_cuCtxSynchronize, CP_SYNC_CONTEXT, 0, 0, 130 * US, 500 * US, 0);
	cr_assert_eq(seen.count, 2);
	cr_assert_eq(seen.intervals[0].device, 0);
	cr_assert_eq(seen.intervals[1].device, 0);
	cr_assert_eq(seen.intervals[1].evidence, CP_DONE_CONTEXT_SYNC);
	/* A failed sync proves nothing. */
	sync_call(tl, MAIN_TID, CP_API_cuCtxSynchronize, CP_SYNC_CONTEXT, 0, 1, 600 * US, 700 * US, 999);
	cr_assert_eq(seen.count, 2);
	cp_timeline__free(tl);
}

Test(evidence, events_recorded_after_a_launch_bound_it_when_synchronized_or_found_complete)
{
	struct seen seen;
	struct cp_timeline *tl = timeline(&seen, 0);

	/* Synchronizing an event recorded before tracing saw it proves nothing. */
	launch(tl, MAIN_TID, 100 * US, STREAM_A, 0);
	sync_call(tl, MAIN_TID, CP_API_cuEventSynchronize, CP_SYNC_EVENT, EVENT, 0, 105 * US, 106 * US, 0);
	cr_assert_eq(seen.count, 0);
	event_op(tl, MAIN_TID, 110 * US, CP_EVENT_RECORD, STREAM_A);
	launch(tl, MAIN_TID, 120 * US, STREAM_A, 0);
	/* Not ready: work launched after the query starts no earlier than it. */
	sync_call(tl, MAIN_TID, CP_API_cuEventQuery, CP_SYNC_QUERY_EVENT, EVENT, 0, 130 * US, 131 * US, 600);
	launch(tl, MAIN_TID, 140 * US, STREAM_A, 0);
	sync_call(tl, MAIN_TID, CP_API_cuEventQuery, CP_SYNC_QUERY_EVENT, EVENT, 0, 300 * US, 301 * US, 0);
	cr_assert_eq(seen.count, 1, "the query covers the launch before the record only");
	cr_assert_eq(seen.intervals[0].launch_ns, 100 * US);
	cr_assert_eq(seen.intervals[0].done_by_ns, 301 * US);
	cr_assert_eq(seen.intervals[0].evidence, CP_DONE_EVENT_QUERY);
	/* A context-wide record names a context: it is not evidence for the stream. */
	event_op(tl, MAIN_TID, 310 * US, CP_EVENT_RECORD_CONTEXT, 0xc0);
	sync_call(tl, MAIN_TID, CP_API_cuEventSynchronize, CP_SYNC_EVENT, EVENT, 0, 320 * US, 330 * US, 0);
	cr_assert_eq(seen.count, 1, "the event still stands where it was recorded on stream A");
	process_exit(tl, 1000 * US);
	cr_assert_eq(seen.count, 3);
	/* The launch after the unready query: its start is no earlier than the query. */
	cr_assert_eq(seen.intervals[2].launch_ns, 140 * US);
	cr_assert_eq(seen.intervals[2].start_after_ns, 140 * US);
	cp_timeline__free(tl);
}

Test(memory, a_full_queue_drops_the_oldest_launch_counted)
{
	struct seen seen;
	struct cp_timeline *tl = timeline(&seen, 4);
	struct cp_gpu_summary sum;
	uint64_t t;

	for (t = 1; t <= 6; t++)
		launch(tl, MAIN_TID, t * 100 * US, STREAM_A, 0);
	cr_assert_eq(seen.count, 2);
	cr_assert_eq(seen.intervals[0].evidence, CP_DONE_NONE);
	cr_assert_eq(seen.intervals[0].done_by_ns, 0);
	cr_assert_eq(cp_timeline__summary(tl, PID, &sum), 0);
	cr_assert_eq(sum.dropped, 2);
	cr_assert_eq(sum.pending, 4);
	cr_assert_eq(sum.launches, 6);
	cr_assert_eq(cp_timeline__summary(tl, PID + 1, &sum), -ENOENT);
	cp_timeline__forget_pid(tl, PID);
	cr_assert_eq(cp_timeline__summary(tl, PID, &sum), -ENOENT);
	cp_timeline__free(tl);
}

/*
 * Two devices: device 0 is kept busy (the CPU waits 800 us of every 1000),
 * device 1 gets a kernel now and then that is done when synchronized.
 */
Test(summaries, per_process_device_and_stream)
{
	struct cp_gpu_device devices[4];
	struct cp_gpu_stream streams[4];
	struct cp_gpu_summary sum;
	struct seen seen;
	struct cp_timeline *tl = timeline(&seen, 0);
	uint64_t t0, i;
	size_t n;

	/* The fastest sync (the driver's own return time): 2 us. */
	launch(tl, MAIN_TID, 10 * US, STREAM_B, 1);
	sync_call(tl, MAIN_TID, CP_API_cuStreamSynchronize, CP_SYNC_STREAM, STREAM_B, 1, 500 * US,
		  502 * US, 0);
	for (i = 0; i < 10; i++) {
		t0 = 1000 * US + i * 1000 * US;
		launch(tl, MAIN_TID, t0, STREAM_A, 0);
		sync_call(tl, MAIN_TID, CP_API_cuStreamSynchronize, CP_SYNC_STREAM, STREAM_A, 0,
			  t0 + 100 * US, t0 + 900 * US, 0);
	}
	cr_assert_eq(seen.count, 11);

	cr_assert_eq(cp_timeline__summary(tl, PID, &sum), 0);
	cr_assert_eq(sum.launches, 11);
	cr_assert_eq(sum.syncs_waited, 11);
	cr_assert_eq(sum.sync_wait_ns, 10 * 800 * US + 2 * US);
	cr_assert_eq(sum.sync_overhead_ns, 2 * US);

	n = cp_timeline__devices(tl, PID, devices, 4);
	cr_assert_eq(n, 2);
	cr_assert_eq(devices[0].device, 1, "devices in the order first seen");
	cr_assert_eq(devices[1].device, 0);
	/* Device 0: waits of 800 us, less 2 us of driver return each; bounds 900 us each. */
	cr_assert_eq(devices[1].summary.launches, 10);
	cr_assert_eq(devices[1].summary.syncs_waited, 10);
	cr_assert_eq(devices[1].summary.sync_wait_ns, 10 * 800 * US);
	cr_assert_eq(devices[1].summary.busy_min_ns, 10 * (800 - 2) * US);
	cr_assert_eq(devices[1].summary.busy_max_ns, 10 * 900 * US);
	cr_assert_eq(devices[1].summary.verdict, CP_GPU_VERDICT_GPU_BOUND);
	/* Device 1: one launch, bounded 10 us to 502 us, a 2 us wait: busy at least 0. */
	cr_assert_eq(devices[0].summary.launches, 1);
	cr_assert_eq(devices[0].summary.busy_max_ns, 492 * US);
	cr_assert_eq(devices[0].summary.busy_min_ns, 0);
	cr_assert_eq(devices[0].summary.sync_wait_ns, 2 * US);

	n = cp_timeline__streams(tl, PID, streams, 4);
	cr_assert_eq(n, 2);
	cr_assert_eq(streams[1].stream, STREAM_A);
	cr_assert_eq(streams[1].summary.syncs_waited, 10);
	cr_assert_eq(streams[1].summary.sync_wait_ns, 10 * 800 * US);
	cr_assert_eq(streams[1].summary.busy_max_ns, 10 * 900 * US);
	cp_timeline__free(tl);
}
