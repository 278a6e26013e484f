// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Perfetto trace writer (userspace/format/chrome_trace.c) fed records and
 * intervals by hand: what each becomes, read back with a real parser
 * (jansson). The end-to-end trace, against the DevTools engine, is
 * tests/root_perfetto.c.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "cuprobe_internal.h"
#include "helpers.h"

/* Above PID_MAX_LIMIT: no /proc entry, so the names are the fallbacks. */
#define PID 4999999u
#define TID 5000001u
#define BASE_NS 1000000000ull
#define STREAM 0x7f0000001000ull
#define FUNCTION 0x5500001000ull

struct writer {
	struct cp_names *names;
	struct cp_chrome_trace *ct;
	struct cp_text text;
};

static void writer_init(struct writer *w)
{
	w->names = cp_names__new(NULL);
	cr_assert_not_null(w->names);
	cr_assert_eq(cp_names__set(w->names, PID, FUNCTION, "vec_add"), 0);
	w->ct = cp_chrome_trace__new(w->names, BASE_NS);
	cr_assert_not_null(w->ct);
	memset(&w->text, 0, sizeof(w->text));
}

static void feed(struct writer *w, const union cp_event *event)
{
	cr_assert_eq(cp_chrome_trace__record(w->ct, event, &w->text), 0);
}

/* Finishes the trace and parses all of it: the array of events. */
static json_t *finish(struct writer *w)
{
	json_error_t error;
	json_t *events;

	cr_assert_eq(cp_chrome_trace__finish(w->ct, &w->text), 0);
	events = json_loads(w->text.data, JSON_REJECT_DUPLICATES, &error);
	cr_assert_not_null(events, "not JSON (%s at %d): %s", error.text, error.position, w->text.data);
	cr_assert(json_is_array(events));
	return events;
}

static void writer_free(struct writer *w)
{
	cp_chrome_trace__free(w->ct);
	cp_names__free(w->names);
	cp_text__free(&w->text);
}

static union cp_event record(enum cp_event_type type, enum cp_api api, uint64_t time_ns)
{
	union cp_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = type;
	ev.hdr.api = api;
	ev.hdr.pid = PID;
	ev.hdr.tid = TID;
	ev.hdr.time_ns = time_ns;
	return ev;
}

static union cp_event returned(enum cp_api api, uint64_t entry_ns, uint64_t return_ns, int result)
{
	union cp_event ev = record(CP_EV_RETURN, api, return_ns);

	ev.ret.entry_ns = entry_ns;
	ev.ret.result = result;
	return ev;
}

/* The nth event (0-based) with phase ph and, when given, name. */
static json_t *find(json_t *events, const char *ph, const char *name, size_t nth)
{
	json_t *ev;
	size_t i;

	json_array_foreach(events, i, ev) {
		if (strcmp(json_string_value(json_object_get(ev, "ph")), ph))
			continue;
		if (name && strcmp(json_string_value(json_object_get(ev, "name")), name))
			continue;
		if (nth-- == 0)
			return ev;
	}
	return NULL;
}

static size_t count(json_t *events, const char *ph, const char *name)
{
	size_t n = 0;

	while (find(events, ph, name, n))
		n++;
	return n;
}

/* ts in ns from the trace's base, as written ("1234.567" us). */
static long long ts_ns(json_t *ev, const char *key)
{
	return (long long)(json_number_value(json_object_get(ev, key)) * 1000 + 0.5);
}

static json_t *arg(json_t *ev, const char *key)
{
	return json_object_get(json_object_get(ev, "args"), key);
}

Test(chrome_trace, launch_slice_flow_and_kernel_bound)
{
	struct writer w;
	union cp_event launch = record(CP_EV_LAUNCH, CP_API_cuLaunchKernel, BASE_NS + 1000);
	union cp_event ret = returned(CP_API_cuLaunchKernel, BASE_NS + 1000, BASE_NS + 3000, 0);
	struct cp_gpu_interval interval = {
		.pid = PID, .tid = TID, .device = 0, .api = CP_API_cuLaunchKernel, .stream = STREAM,
		.function = FUNCTION, .seq = 1, .launch_ns = BASE_NS + 1000,
		.start_after_ns = BASE_NS + 1000, .done_by_ns = BASE_NS + 9000,
		.evidence = CP_DONE_STREAM_SYNC, .evidence_api = CP_API_cuStreamSynchronize,
	};
	struct cp_chrome_trace_stats stats;
	json_t *events, *x, *s, *b, *f, *e, *depth;

	writer_init(&w);
	launch.launch.function = FUNCTION;
	launch.launch.stream = STREAM;
	launch.launch.grid[0] = 4;
	launch.launch.block[0] = 256;
	feed(&w, &launch);
	feed(&w, &ret);
	cr_assert_eq(cp_chrome_trace__interval(w.ct, &interval, &w.text), 0);
	events = finish(&w);

	cr_assert_str_eq(json_string_value(arg(find(events, "M", "process_name", 0), "name")),
			 "pid 4999999");
	x = find(events, "X", "cuLaunchKernel", 0);
	cr_assert_not_null(x);
	cr_assert_eq(ts_ns(x, "ts"), 1000);
	cr_assert_eq(ts_ns(x, "dur"), 2000);
	/* The args are the launch record as --json writes it. */
	cr_assert_str_eq(json_string_value(arg(x, "kernel")), "vec_add");
	cr_assert_str_eq(json_string_value(arg(x, "type")), "launch");
	cr_assert_null(arg(x, "result"), "a call that succeeded shows no result");
	cr_assert(json_is_true(json_object_get(x, "flow_out")));
	/* The flow: from the slice (same place) to the kernel, one id throughout. */
	s = find(events, "s", NULL, 0);
	b = find(events, "b", "vec_add", 0);
	f = find(events, "f", NULL, 0);
	e = find(events, "e", "vec_add", 0);
	cr_assert(s && b && f && e);
	cr_assert_eq(ts_ns(s, "ts"), ts_ns(x, "ts"));
	cr_assert_eq(json_integer_value(json_object_get(s, "tid")), TID);
	cr_assert_str_eq(json_string_value(json_object_get(s, "id")),
			 json_string_value(json_object_get(x, "bind_id")));
	cr_assert_str_eq(json_string_value(json_object_get(b, "id")),
			 json_string_value(json_object_get(x, "bind_id")));
	cr_assert_str_eq(json_string_value(json_object_get(f, "id")),
			 json_string_value(json_object_get(x, "bind_id")));
	cr_assert_str_eq(json_string_value(json_object_get(b, "bind_id")),
			 json_string_value(json_object_get(x, "bind_id")));
	cr_assert(json_is_true(json_object_get(b, "flow_in")));
	/* The bound: from 1 ns after the launch's entry (flow ends apart) to the evidence. */
	cr_assert_eq(ts_ns(b, "ts"), 1001);
	cr_assert_eq(ts_ns(f, "ts"), 1001);
	cr_assert_eq(ts_ns(e, "ts"), 9000);
	cr_assert_str_eq(json_string_value(arg(b, "evidence")), "stream_sync");
	/* On the stream's own track, named for it and its process. */
	cr_assert_geq(json_integer_value(json_object_get(b, "pid")), 1 << 30);
	cr_assert_eq(json_integer_value(json_object_get(b, "pid")),
		     json_integer_value(json_object_get(f, "pid")));
	cr_assert_str_eq(json_string_value(arg(find(events, "M", "process_name", 1), "name")),
			 "GPU stream 0x7f0000001000 (device 0), pid 4999999");
	/* The queue: one launch pending, then none. */
	depth = find(events, "C", "queue", 0);
	cr_assert_eq(json_integer_value(arg(depth, "depth")), 1);
	cr_assert_eq(ts_ns(depth, "ts"), 1000);
	depth = find(events, "C", "queue", 1);
	cr_assert_eq(json_integer_value(arg(depth, "depth")), 0);
	cr_assert_eq(ts_ns(depth, "ts"), 9000);
	cp_chrome_trace__stats(w.ct, &stats);
	cr_assert_eq(stats.calls, 1);
	cr_assert_eq(stats.flows, 1);
	cr_assert_eq(stats.kernels, 1);
	cr_assert_eq(stats.events, json_array_size(events));
	json_decref(events);
	writer_free(&w);
}

Test(chrome_trace, return_side_records_and_live_memory)
{
	struct writer w;
	union cp_event alloc_ret = returned(CP_API_cuMemAlloc_v2, BASE_NS + 100, BASE_NS + 200, 0);
	union cp_event alloc = record(CP_EV_ALLOC, CP_API_cuMemAlloc_v2, BASE_NS + 201);
	union cp_event free_ev = record(CP_EV_FREE, CP_API_cuMemFree_v2, BASE_NS + 300);
	union cp_event free_ret = returned(CP_API_cuMemFree_v2, BASE_NS + 300, BASE_NS + 350, 0);
	union cp_event create = record(CP_EV_VMM, CP_API_cuMemCreate, BASE_NS + 400);
	union cp_event create_ret = returned(CP_API_cuMemCreate, BASE_NS + 380, BASE_NS + 399, 0);
	union cp_event bare = returned(CP_API_cuMemcpyHtoD_v2, BASE_NS + 500, BASE_NS + 600, 700);
	json_t *events, *x;

	writer_init(&w);
	alloc.alloc.ptr = 0xd000;
	alloc.alloc.bytes = 4096;
	alloc.alloc.kind = CP_MEM_DEVICE;
	free_ev.free.ptr = 0xd000;
	free_ev.free.kind = CP_MEM_DEVICE;
	create.vmm.op = CP_VMM_CREATE;
	create.vmm.physical_bytes = 2 << 20;
	feed(&w, &alloc_ret);  /* the return first: its record follows */
	feed(&w, &alloc);
	feed(&w, &free_ev);
	feed(&w, &free_ret);
	feed(&w, &create_ret);
	feed(&w, &create);
	feed(&w, &bare);       /* no record of it: the return alone */
	events = finish(&w);

	x = find(events, "X", "cuMemAlloc_v2", 0);
	cr_assert_eq(json_integer_value(arg(x, "bytes")), 4096);
	cr_assert_str_eq(json_string_value(arg(x, "ptr")), "0xd000");
	cr_assert_eq(ts_ns(x, "ts"), 100);
	x = find(events, "X", "cuMemFree_v2", 0);
	cr_assert_str_eq(json_string_value(arg(x, "type")), "free");
	x = find(events, "X", "cuMemCreate", 0);
	cr_assert_str_eq(json_string_value(arg(x, "op")), "create");
	x = find(events, "X", "cuMemcpyHtoD_v2", 0);
	cr_assert_str_eq(json_string_value(arg(x, "type")), "return");
	cr_assert_eq(json_integer_value(arg(x, "result")), 700);
	/* Live device memory: the allocation, its free, then VMM physical memory. */
	cr_assert_eq(count(events, "C", "live device memory"), 3);
	cr_assert_eq(json_integer_value(arg(find(events, "C", "live device memory", 0), "bytes")), 4096);
	cr_assert_eq(json_integer_value(arg(find(events, "C", "live device memory", 1), "bytes")), 0);
	cr_assert_eq(json_integer_value(arg(find(events, "C", "live device memory", 2), "bytes")),
		     2 << 20);
	json_decref(events);
	writer_free(&w);
}

Test(chrome_trace, a_slice_cutting_another_is_left_out)
{
	struct writer w;
	union cp_event first = returned(CP_API_cuCtxSynchronize, BASE_NS + 100, BASE_NS + 200, 0);
	union cp_event second = returned(CP_API_cuCtxSynchronize, BASE_NS + 300, BASE_NS + 400, 0);
	/* An entry time gone wrong: it starts inside the first and ends after it. */
	union cp_event cutting = returned(CP_API_cuStreamQuery, BASE_NS + 150, BASE_NS + 500, 0);
	/* One that contains them both is a caller: kept. */
	union cp_event outer = returned(CP_API_cuCtxSetCurrent, BASE_NS + 50, BASE_NS + 600, 0);
	struct cp_chrome_trace_stats stats;
	json_t *events;

	writer_init(&w);
	feed(&w, &first);
	feed(&w, &second);
	feed(&w, &cutting);
	feed(&w, &outer);
	events = finish(&w); /* the held syncs' slices are written at the end */
	cp_chrome_trace__stats(w.ct, &stats);
	cr_assert_eq(stats.calls_overlapping, 1);
	cr_assert_eq(stats.calls, 3);
	cr_assert_eq(count(events, "X", NULL), 3);
	cr_assert_eq(count(events, "X", "cuStreamQuery"), 0);
	json_decref(events);
	writer_free(&w);
}

Test(chrome_trace, lifecycle_and_xid_instants)
{
	struct writer w;
	union cp_event init = record(CP_EV_PROC, CP_API_cuInit, BASE_NS + 10);
	union cp_event sync_ret = returned(CP_API_cuStreamSynchronize, BASE_NS + 20, BASE_NS + 30, 0);
	union cp_event xid_known = record(CP_EV_XID, CP_API_nvidia_dev_xid, BASE_NS + 40);
	union cp_event xid_other = record(CP_EV_XID, CP_API_nvidia_dev_xid, BASE_NS + 50);
	union cp_event exit_ev = record(CP_EV_PROC, CP_API_sched_process_exit, BASE_NS + 60);
	json_t *events, *ev;

	writer_init(&w);
	init.proc.kind = CP_PROC_CUDA_INIT;
	/* Its name is in the record: the process (a pid past pid_max) is gone when it is read. */
	snprintf(init.proc.comm, sizeof(init.proc.comm), "app");
	xid_known.xid.error_code = 79;
	snprintf(xid_known.xid.msg, sizeof(xid_known.xid.msg), "pid=%u, name=app, Ch 00000008", PID);
	xid_other.xid.error_code = 13;
	xid_other.hdr.pid = 77;
	snprintf(xid_other.xid.msg, sizeof(xid_other.xid.msg), "Graphics Exception");
	exit_ev.proc.kind = CP_PROC_EXIT;
	exit_ev.proc.exit_code = 3 << 8;
	feed(&w, &init);
	feed(&w, &sync_ret);   /* held for its sync record, which never comes */
	feed(&w, &xid_known);
	feed(&w, &xid_other);
	feed(&w, &exit_ev);    /* the exit settles it */
	cp_chrome_trace__forget_pid(w.ct, PID);
	events = finish(&w);

	cr_assert_not_null(find(events, "i", "process start (cuInit)", 0));
	ev = find(events, "M", "process_name", 0);
	cr_assert_str_eq(json_string_value(arg(ev, "name")), "app (4999999)");
	cr_assert_null(find(events, "M", "process_name", 1), "named twice");
	ev = find(events, "i", "exit (status 3)", 0);
	cr_assert_not_null(ev);
	cr_assert_str_eq(json_string_value(json_object_get(ev, "s")), "p");
	cr_assert_eq(json_integer_value(arg(ev, "exit_status")), 3);
	/* The Xid of a traced process is on its track; another's is global. */
	ev = find(events, "i", "Xid 79", 0);
	cr_assert_str_eq(json_string_value(json_object_get(ev, "s")), "p");
	cr_assert_eq(json_integer_value(json_object_get(ev, "pid")), PID);
	cr_assert_eq(json_integer_value(arg(ev, "process")), PID);
	ev = find(events, "i", "Xid 13", 0);
	cr_assert_str_eq(json_string_value(json_object_get(ev, "s")), "g");
	cr_assert_str_eq(json_string_value(arg(ev, "message")), "Graphics Exception");
	/* The held return got its slice at the exit, before the process went. */
	cr_assert_not_null(find(events, "X", "cuStreamSynchronize", 0));
	json_decref(events);
	writer_free(&w);
}

Test(chrome_trace, unbounded_launch_is_an_instant_and_an_empty_trace_is_an_array)
{
	struct writer w;
	union cp_event launch = record(CP_EV_LAUNCH, CP_API_cuLaunchKernel, BASE_NS + 1000);
	struct cp_gpu_interval dropped = {
		.pid = PID, .tid = TID, .api = CP_API_cuLaunchKernel, .stream = STREAM,
		.function = FUNCTION, .seq = 1, .launch_ns = BASE_NS + 1000,
		.start_after_ns = BASE_NS + 1000, .evidence = CP_DONE_NONE,
	};
	json_t *events, *ev;

	writer_init(&w);
	launch.launch.function = FUNCTION;
	launch.launch.stream = STREAM;
	feed(&w, &launch);
	cr_assert_eq(cp_chrome_trace__interval(w.ct, &dropped, &w.text), 0);
	events = finish(&w);
	cr_assert_eq(count(events, "b", NULL), 0);
	ev = find(events, "i", "dropped", 0);
	cr_assert_not_null(ev);
	cr_assert_eq(ts_ns(ev, "ts"), 1000);
	cr_assert_str_eq(json_string_value(arg(ev, "evidence")), "none");
	cr_assert_eq(json_integer_value(arg(find(events, "C", "queue", 1), "depth")), 0);
	json_decref(events);
	writer_free(&w);

	writer_init(&w);
	events = finish(&w);
	cr_assert_str_eq(w.text.data, "[]\n");
	cr_assert_eq(json_array_size(events), 0);
	json_decref(events);
	writer_free(&w);
}

/*
 * An NCCL collective: its call's slice gets the nccl record (written at the
 * return), and once its kernel's bound is known, a slice of its own on the
 * kernel's stream over that bound, named by op and bytes.
 */
Test(chrome_trace, nccl_collective_over_its_kernel)
{
	struct writer w;
	union cp_event launch = record(CP_EV_LAUNCH, CP_API_cuLaunchKernelEx, BASE_NS + 2000);
	union cp_event launch_ret = returned(CP_API_cuLaunchKernelEx, BASE_NS + 2000, BASE_NS + 2500, 0);
	union cp_event nccl_ret = returned(CP_API_ncclAllReduce, BASE_NS + 1000, BASE_NS + 4000, 0);
	union cp_event nccl = record(CP_EV_NCCL, CP_API_ncclAllReduce, BASE_NS + 4000);
	struct cp_gpu_interval interval = {
		.pid = PID, .tid = TID, .device = 0, .api = CP_API_cuLaunchKernelEx, .stream = STREAM,
		.function = FUNCTION, .seq = 1, .launch_ns = BASE_NS + 2000,
		.start_after_ns = BASE_NS + 2000, .done_by_ns = BASE_NS + 9000,
		.evidence = CP_DONE_STREAM_SYNC, .evidence_api = CP_API_cuStreamSynchronize,
		.nccl_call = 7,
	};
	struct cp_chrome_trace_stats stats;
	json_t *events, *x, *b, *e;

	writer_init(&w);
	launch.launch.function = FUNCTION;
	launch.launch.stream = STREAM;
	launch.launch.nccl_call = 7;
	nccl.nccl.entry_ns = BASE_NS + 1000;
	nccl.nccl.op = CP_NCCL_ALL_REDUCE;
	nccl.nccl.seq = 7;
	nccl.nccl.count = 1024;
	nccl.nccl.datatype = 7;
	nccl.nccl.bytes = 4096;
	nccl.nccl.stream = STREAM;
	nccl.nccl.comm = 0x1234;
	nccl.nccl.rank = 0;
	nccl.nccl.nranks = 2;
	nccl.nccl.root = -1;
	nccl.nccl.launches = 1;
	feed(&w, &launch);
	feed(&w, &launch_ret);
	feed(&w, &nccl_ret);
	feed(&w, &nccl);
	cr_assert_eq(cp_chrome_trace__interval(w.ct, &interval, &w.text), 0);
	events = finish(&w);

	x = find(events, "X", "ncclAllReduce", 0);
	cr_assert_not_null(x);
	cr_assert_eq(ts_ns(x, "ts"), 1000);
	cr_assert_eq(ts_ns(x, "dur"), 3000);
	cr_assert_str_eq(json_string_value(arg(x, "op")), "all_reduce");
	cr_assert_eq(json_integer_value(arg(x, "bytes")), 4096);
	b = find(events, "b", "all_reduce 4.0K", 0);
	e = find(events, "e", "all_reduce 4.0K", 0);
	cr_assert(b && e, "no collective slice: %s", w.text.data);
	cr_assert_str_eq(json_string_value(json_object_get(b, "cat")), "nccl");
	cr_assert_eq(ts_ns(b, "ts"), 2000);
	cr_assert_eq(ts_ns(e, "ts"), 9000);
	cr_assert_eq(json_integer_value(arg(b, "nranks")), 2);
	cr_assert_eq(json_integer_value(arg(b, "kernels_bounded")), 1);
	/* On the kernel's stream track. */
	cr_assert_eq(json_integer_value(json_object_get(b, "pid")),
		     json_integer_value(json_object_get(find(events, "b", "vec_add", 0), "pid")));
	cp_chrome_trace__stats(w.ct, &stats);
	cr_assert_eq(stats.collectives, 1);
	cr_assert_eq(stats.collectives_unbounded, 0);
	json_decref(events);
	writer_free(&w);
}
