// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU timeline from host evidence: each launch gets a bound
 * [start_after, done_by] on when its kernel ran, from the earliest later
 * evidence that it completed (a sync on its stream or context returning, an
 * event recorded after it being synchronized or found complete, its stream
 * found idle, a blocking copy on the legacy stream returning, the process's
 * exit), and from queries that found earlier work still running (a lower
 * bound on when later work could start). No GPU clock is read: every bound
 * holds whatever the GPU did, as long as streams run in order.
 *
 * What a record proves, and for which launches:
 *  - a launch is covered by a call made at time T by thread t when it was
 *    made by t before T, or when its own call had returned before T (a
 *    later record of its thread says so): only then is it surely enqueued;
 *  - the evidence's return time R is then an upper bound on its end, and on
 *    the end of everything enqueued on its stream before it.
 * Memory is bounded: pending launches per stream are capped (the oldest are
 * reported without a bound, counted), busy-time unions are folded into
 * totals behind a watermark, and a process is forgotten on request.
 */
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"

#define DEFAULT_MAX_PENDING 65536
#define STREAM_LEGACY 0ull
#define STREAM_PER_THREAD 2ull
/*
 * A sync that returned within this much of the fastest one found the work
 * already done, or nearly: IMMEDIATE_SLACK_NS, or a twentieth of the time
 * since the process's previous sync returned (the queue then held at most a
 * twentieth of what the CPU took to launch it).
 */
#define IMMEDIATE_SLACK_NS 20000ull
#define IMMEDIATE_SHARE 20

struct launch {
	uint64_t seq;
	uint64_t launch_ns;
	uint64_t returned_by_ns; /* 0: its call may still be running */
	uint64_t start_after_ns;
	uint64_t function;
	uint64_t stream;         /* as the call passed it */
	uint32_t tid;
	uint32_t api;
	uint32_t nccl_call;
	bool graph;
	uint64_t py_stack;       /* the launching Python stack (--python); 0: none */
};

/* Disjoint spans, sorted, of time; what lies wholly before a watermark is folded into total. */
struct span_union {
	struct { uint64_t lo, hi; } *spans;
	size_t count, capacity;
	uint64_t total_ns;
};

struct stream {
	int32_t device;
	uint64_t key;            /* the handle; STREAM_LEGACY; per-thread: tid << 8 | STREAM_PER_THREAD */
	uint64_t raw;            /* the handle as passed */
	struct launch *queue;    /* a ring of pending launches in enqueue order */
	size_t head, count, capacity;
	uint64_t busy_after_ns;  /* later work starts after this (a query found work running) */
	struct span_union busy_max;
	struct cp_gpu_summary summary;
};

struct recorded_event {
	uint64_t handle;
	struct stream *stream;
	uint64_t record_ns;
	uint32_t tid;
};

/* A device's share of a process: its streams' bounds and the waits for its work. */
struct device_time {
	int32_t device;
	struct span_union busy_max, busy_wait;
	struct cp_gpu_summary summary;
};

struct thread {
	uint32_t tid;
	struct stream *stream;   /* its last launch, not known returned */
	uint64_t seq;
};

struct process {
	uint32_t pid;
	uint64_t seq;
	struct stream **streams;
	size_t stream_count, stream_capacity;
	struct device_time *devices;
	size_t device_count, device_capacity;
	void *events;            /* tsearch tree of struct recorded_event */
	void *threads;           /* tsearch tree of struct thread */
	struct span_union busy_max, busy_wait;
	struct cp_gpu_summary summary;
	uint64_t fastest_sync_ns;
	uint64_t last_sync_return_ns;
};

struct cp_timeline {
	cp_interval_fn on_interval;
	void *ctx;
	size_t max_pending;
	void *processes;         /* tsearch tree of struct process */
};

/* ---- span unions ------------------------------------------------------------------- */

static int span_add(struct span_union *u, uint64_t lo, uint64_t hi)
{
	size_t i, j;

	if (hi <= lo)
		return 0;
	/* Find the first span that ends at or after lo; merge every one that overlaps. */
	for (i = 0; i < u->count && u->spans[i].hi < lo; i++)
		;
	for (j = i; j < u->count && u->spans[j].lo <= hi; j++) {
		lo = u->spans[j].lo < lo ? u->spans[j].lo : lo;
		hi = u->spans[j].hi > hi ? u->spans[j].hi : hi;
	}
	if (j == i) {
		if (CP_ARRAY_RESERVE(u->spans, u->capacity, u->count + 1, 16))
			return -ENOMEM;
		memmove(&u->spans[i + 1], &u->spans[i], (u->count - i) * sizeof(*u->spans));
		u->count++;
	} else if (j > i + 1) {
		memmove(&u->spans[i + 1], &u->spans[j], (u->count - j) * sizeof(*u->spans));
		u->count -= j - i - 1;
	}
	u->spans[i].lo = lo;
	u->spans[i].hi = hi;
	return 0;
}

/* Spans ending before the watermark never grow again: their length goes into the total. */
static void span_fold(struct span_union *u, uint64_t watermark)
{
	size_t n = 0;

	while (n < u->count && u->spans[n].hi < watermark) {
		u->total_ns += u->spans[n].hi - u->spans[n].lo;
		n++;
	}
	if (!n)
		return; /* nothing to fold (and spans may be NULL: memmove must not see it) */
	memmove(u->spans, &u->spans[n], (u->count - n) * sizeof(*u->spans));
	u->count -= n;
}

static uint64_t span_measure(const struct span_union *u)
{
	uint64_t total = u->total_ns;
	size_t i;

	for (i = 0; i < u->count; i++)
		total += u->spans[i].hi - u->spans[i].lo;
	return total;
}

static void span_free(struct span_union *u)
{
	free(u->spans);
	memset(u, 0, sizeof(*u));
}

/* ---- trees --------------------------------------------------------------------------- */

/* Processes and threads are ordered by their pid and tid, recorded events by their handle. */
static struct process *find_process(const struct cp_timeline *tl, uint32_t pid)
{
	return cp_tree__find(&tl->processes, &pid, cp_tree__by_u32);
}

static struct process *process_of(struct cp_timeline *tl, uint32_t pid)
{
	struct process key = { .pid = pid };

	return cp_tree__add(&tl->processes, &key, sizeof(key), cp_tree__by_u32, NULL);
}

uint64_t cp_stream__key(uint64_t handle, uint32_t api, uint32_t tid)
{
	const char *name = cp_api__name((enum cp_api)api);
	size_t len = strlen(name);
	bool per_thread_api = len > 5 && (!strcmp(name + len - 5, "_ptsz") ||
					  !strcmp(name + len - 5, "_ptds"));

	if (handle == STREAM_PER_THREAD || (handle == 0 && per_thread_api))
		return (uint64_t)tid << 8 | STREAM_PER_THREAD;
	if (handle == 0 || handle == 1) /* 0 and CU_STREAM_LEGACY */
		return STREAM_LEGACY;
	return handle;
}

uint32_t cp_stream__per_thread_tid(uint64_t key)
{
	return (key & 0xff) == STREAM_PER_THREAD && key != STREAM_PER_THREAD ? (uint32_t)(key >> 8) : 0;
}

static struct stream *stream_of(struct process *p, int32_t device, uint64_t key, uint64_t raw,
				bool create)
{
	struct stream *s;
	size_t i;

	for (i = 0; i < p->stream_count; i++)
		if (p->streams[i]->device == device && p->streams[i]->key == key)
			return p->streams[i];
	if (!create)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s || CP_ARRAY_RESERVE(p->streams, p->stream_capacity, p->stream_count + 1, 4)) {
		free(s);
		return NULL;
	}
	s->device = device;
	s->key = key;
	s->raw = raw;
	p->streams[p->stream_count++] = s;
	return s;
}

/* The device's share of p, made on first use; NULL when out of memory (its share goes uncounted). */
static struct device_time *device_of(struct process *p, int32_t device)
{
	size_t i;

	for (i = 0; i < p->device_count; i++)
		if (p->devices[i].device == device)
			return &p->devices[i];
	if (CP_ARRAY_RESERVE(p->devices, p->device_capacity, p->device_count + 1, 2))
		return NULL;
	memset(&p->devices[p->device_count], 0, sizeof(p->devices[0]));
	p->devices[p->device_count].device = device;
	return &p->devices[p->device_count++];
}

static struct launch *nth(struct stream *s, size_t i)
{
	return &s->queue[(s->head + i) % s->capacity];
}

/* ---- completion ----------------------------------------------------------------------- */

static void note_window(struct cp_gpu_summary *sum, uint64_t lo, uint64_t hi)
{
	if (!sum->window_start_ns || lo < sum->window_start_ns)
		sum->window_start_ns = lo;
	if (hi > sum->window_end_ns)
		sum->window_end_ns = hi;
}

/* The oldest launch still pending in p: no later bound starts before it. */
static uint64_t watermark(const struct process *p)
{
	uint64_t oldest = UINT64_MAX;
	size_t i;

	for (i = 0; i < p->stream_count; i++)
		if (p->streams[i]->count) {
			struct stream *s = p->streams[i];
			uint64_t t = nth(s, 0)->launch_ns;

			if (t < oldest)
				oldest = t;
		}
	return oldest;
}

/* Reports a launch and removes it (it is at index i of its stream's queue). */
static void complete(struct cp_timeline *tl, struct process *p, struct stream *s, size_t i,
		     uint64_t done_by, enum cp_done_evidence evidence, uint32_t evidence_api,
		     uint32_t evidence_tid)
{
	struct launch *l = nth(s, i);
	struct device_time *d = device_of(p, s->device);
	struct cp_gpu_interval interval = {
		.pid = p->pid, .tid = l->tid, .device = s->device, .api = l->api,
		.stream = l->stream, .function = l->function, .seq = l->seq,
		.launch_ns = l->launch_ns, .start_after_ns = l->start_after_ns,
		.done_by_ns = done_by, .evidence = evidence, .evidence_api = evidence_api,
		.evidence_tid = evidence_tid, .graph = l->graph, .nccl_call = l->nccl_call,
		.py_stack = l->py_stack,
	};
	size_t j;

	if (done_by) {
		if (interval.start_after_ns > done_by)
			interval.start_after_ns = done_by;
		span_add(&s->busy_max, interval.start_after_ns, done_by);
		span_add(&p->busy_max, interval.start_after_ns, done_by);
		note_window(&s->summary, l->launch_ns, done_by);
		note_window(&p->summary, l->launch_ns, done_by);
		s->summary.bounded++;
		p->summary.bounded++;
		if (d) {
			span_add(&d->busy_max, interval.start_after_ns, done_by);
			note_window(&d->summary, l->launch_ns, done_by);
			d->summary.bounded++;
		}
	} else {
		s->summary.dropped++;
		p->summary.dropped++;
		if (d)
			d->summary.dropped++;
	}
	if (tl->on_interval)
		tl->on_interval(tl->ctx, &interval);
	/* Out of the ring, order kept. */
	for (j = i; j > 0; j--)
		*nth(s, j) = *nth(s, j - 1);
	s->head = (s->head + 1) % s->capacity;
	s->count--;
}

/*
 * Evidence that everything enqueued on s before a call made at cut_ns by
 * cut_tid is done by done_by: the launches it covers, and every launch
 * enqueued before one of them. Returns how many completed.
 */
static size_t settle(struct cp_timeline *tl, struct process *p, struct stream *s, uint64_t cut_ns,
		     uint32_t cut_tid, bool everything, uint64_t done_by,
		     enum cp_done_evidence evidence, uint32_t api, uint32_t tid)
{
	uint64_t latest = 0;
	uint32_t latest_tid = 0;
	size_t i, done = 0;

	/* The last launch the evidence covers directly. */
	for (i = 0; !everything && i < s->count; i++) {
		struct launch *l = nth(s, i);

		if (l->launch_ns < cut_ns &&
		    (l->tid == cut_tid || (l->returned_by_ns && l->returned_by_ns <= cut_ns)) &&
		    l->launch_ns >= latest) {
			latest = l->launch_ns;
			latest_tid = l->tid;
		}
	}
	if (!latest && !everything)
		return 0;
	/*
	 * In stream order, what was enqueued before it is done too: its thread's
	 * earlier launches, and launches whose call returned before it began.
	 */
	for (i = 0; i < s->count;) {
		struct launch *l = nth(s, i);

		if (everything || (l->tid == latest_tid && l->launch_ns <= latest) ||
		    (l->returned_by_ns && l->returned_by_ns <= latest) ||
		    (l->launch_ns < cut_ns &&
		     (l->tid == cut_tid || (l->returned_by_ns && l->returned_by_ns <= cut_ns)))) {
			/* Out of the queue: the launches after it move down one place. */
			complete(tl, p, s, i, done_by, evidence, api, tid);
			done++;
			continue;
		}
		i++;
	}
	return done;
}

/* A query found work enqueued before cut_ns still running: what comes after starts later. */
static void still_running(struct stream *s, uint64_t cut_ns)
{
	size_t i;

	if (cut_ns > s->busy_after_ns)
		s->busy_after_ns = cut_ns;
	for (i = 0; i < s->count; i++) {
		struct launch *l = nth(s, i);

		if (l->launch_ns >= cut_ns && l->start_after_ns < cut_ns)
			l->start_after_ns = cut_ns;
	}
}

/* ---- records ----------------------------------------------------------------------------- */

static void note_returned(struct process *p, uint32_t tid, uint64_t time_ns)
{
	struct thread *t = cp_tree__find(&p->threads, &tid, cp_tree__by_u32);
	size_t i;

	if (!t || !t->stream)
		return;
	for (i = t->stream->count; i > 0; i--) {
		struct launch *l = nth(t->stream, i - 1);

		if (l->seq == t->seq) {
			if (!l->returned_by_ns)
				l->returned_by_ns = time_ns;
			break;
		}
	}
	t->stream = NULL;
}

static void on_launch(struct cp_timeline *tl, struct process *p, const struct cp_launch_event *e)
{
	struct stream *s;
	struct launch *l;
	struct device_time *d;
	struct thread key = { .tid = e->hdr.tid }, *t;

	if (e->flags & CP_LAUNCH_HOST_FUNC)
		return;
	s = stream_of(p, e->device, cp_stream__key(e->stream, e->hdr.api, e->hdr.tid), e->stream, true);
	if (!s)
		return;
	if (s->count == s->capacity && s->capacity >= tl->max_pending)
		/* Full: the oldest goes out without a bound, counted. */
		complete(tl, p, s, 0, 0, CP_DONE_NONE, 0, 0);
	if (s->count == s->capacity) {
		size_t capacity = s->capacity ? s->capacity * 2 : 64, i;
		struct launch *grown;

		if (capacity > tl->max_pending)
			capacity = tl->max_pending;
		grown = malloc(capacity * sizeof(*grown));
		if (!grown)
			return;
		for (i = 0; i < s->count; i++)
			grown[i] = *nth(s, i);
		free(s->queue);
		s->queue = grown;
		s->head = 0;
		s->capacity = capacity;
	}
	l = nth(s, s->count++);
	*l = (struct launch){
		.seq = ++p->seq, .launch_ns = e->hdr.time_ns, .function = e->function,
		.stream = e->stream, .tid = e->hdr.tid, .api = e->hdr.api,
		.graph = e->flags & CP_LAUNCH_GRAPH, .nccl_call = e->nccl_call,
		.py_stack = e->py_stack,
		.start_after_ns = e->hdr.time_ns > s->busy_after_ns ? e->hdr.time_ns : s->busy_after_ns,
	};
	s->summary.launches++;
	p->summary.launches++;
	note_window(&s->summary, e->hdr.time_ns, e->hdr.time_ns);
	note_window(&p->summary, e->hdr.time_ns, e->hdr.time_ns);
	d = device_of(p, s->device);
	if (d) {
		d->summary.launches++;
		note_window(&d->summary, e->hdr.time_ns, e->hdr.time_ns);
	}
	/* Its call returns before this thread's next record: remembered until then. */
	t = cp_tree__add(&p->threads, &key, sizeof(key), cp_tree__by_u32, NULL);
	if (t) {
		t->stream = s;
		t->seq = l->seq;
	}
}

static void on_event_record(struct process *p, const struct cp_event_event *e)
{
	struct recorded_event key = { .handle = e->event }, *r;
	struct stream *s;

	/*
	 * Context-wide records (cuCtxRecordEvent) name a context, not the
	 * calling thread's: which device's streams it covers is not known here,
	 * so they are left out as evidence (bounds stay true, only wider).
	 */
	if (e->op != CP_EVENT_RECORD)
		return;
	s = stream_of(p, e->device, cp_stream__key(e->stream, e->hdr.api, e->hdr.tid), e->stream, true);
	if (!s)
		return;
	r = cp_tree__add(&p->events, &key, sizeof(key), cp_tree__by_u64, NULL);
	if (!r)
		return;
	/* Re-recording an event moves it: the latest record is what a wait or query sees. */
	r->stream = s;
	r->record_ns = e->hdr.time_ns;
	r->tid = e->hdr.tid;
}

/*
 * What lies wholly before the oldest pending launch never grows again: into
 * the totals, for the process, its devices and its streams (memory stays
 * bounded however long the trace).
 */
static void fold_spans(struct process *p)
{
	uint64_t mark = watermark(p);
	size_t i;

	span_fold(&p->busy_max, mark);
	span_fold(&p->busy_wait, mark);
	for (i = 0; i < p->device_count; i++) {
		span_fold(&p->devices[i].busy_max, mark);
		span_fold(&p->devices[i].busy_wait, mark);
	}
	for (i = 0; i < p->stream_count; i++)
		span_fold(&p->streams[i]->busy_max, mark);
}

static void on_sync(struct cp_timeline *tl, struct process *p, const struct cp_sync_event *e)
{
	uint64_t waited = e->hdr.time_ns > e->entry_ns ? e->hdr.time_ns - e->entry_ns : 0;
	const struct recorded_event *recorded;
	enum cp_done_evidence evidence = CP_DONE_NONE;
	struct stream *s, *target = NULL; /* the one stream the call waited for, when it is one */
	int32_t device = e->device;       /* whose work it waited for */
	struct device_time *d;
	size_t done = 0, i;

	if (!p->fastest_sync_ns || waited < p->fastest_sync_ns)
		p->fastest_sync_ns = waited;
	p->summary.syncs++;
	switch (e->kind) {
	case CP_SYNC_STREAM:
	case CP_SYNC_QUERY_STREAM:
	case CP_SYNC_COPY:
		evidence = e->kind == CP_SYNC_STREAM ? CP_DONE_STREAM_SYNC :
			   e->kind == CP_SYNC_COPY ? CP_DONE_BLOCKING_COPY : CP_DONE_STREAM_QUERY;
		s = stream_of(p, e->device, cp_stream__key(e->handle, e->hdr.api, e->hdr.tid),
			      e->handle, false);
		if (!s)
			break;
		target = s;
		if (e->result == 0)
			done = settle(tl, p, s, e->entry_ns, e->hdr.tid, false, e->hdr.time_ns, evidence,
				      e->hdr.api, e->hdr.tid);
		else if (e->kind == CP_SYNC_QUERY_STREAM)
			still_running(s, e->entry_ns);
		break;
	case CP_SYNC_CONTEXT:
		evidence = CP_DONE_CONTEXT_SYNC;
		if (e->result)
			break;
		for (i = 0; i < p->stream_count; i++)
			if (p->streams[i]->device == e->device)
				done += settle(tl, p, p->streams[i], e->entry_ns, e->hdr.tid, false,
					       e->hdr.time_ns, evidence, e->hdr.api, e->hdr.tid);
		break;
	case CP_SYNC_EVENT:
	case CP_SYNC_QUERY_EVENT:
		evidence = e->kind == CP_SYNC_EVENT ? CP_DONE_EVENT_SYNC : CP_DONE_EVENT_QUERY;
		recorded = cp_tree__find(&p->events, &e->handle, cp_tree__by_u64);
		if (!recorded)
			break; /* recorded before tracing began: it proves nothing we can place */
		target = recorded->stream;
		device = target->device;
		if (e->result == 0)
			done = settle(tl, p, recorded->stream, recorded->record_ns, recorded->tid, false,
				      e->hdr.time_ns, evidence, e->hdr.api, e->hdr.tid);
		else if (e->kind == CP_SYNC_QUERY_EVENT)
			still_running(recorded->stream, e->entry_ns);
		break;
	}
	/* A wait for pending work: the CPU blocked on the GPU meanwhile. */
	if (done && (e->kind == CP_SYNC_STREAM || e->kind == CP_SYNC_CONTEXT ||
		     e->kind == CP_SYNC_EVENT || e->kind == CP_SYNC_COPY)) {
		uint64_t since = p->last_sync_return_ns && e->entry_ns > p->last_sync_return_ns ?
				 e->entry_ns - p->last_sync_return_ns : 0;
		uint64_t slack = since / IMMEDIATE_SHARE > IMMEDIATE_SLACK_NS ?
				 since / IMMEDIATE_SHARE : IMMEDIATE_SLACK_NS;

		bool immediate = waited <= p->fastest_sync_ns + slack;

		p->summary.syncs_waited++;
		p->summary.sync_wait_ns += waited;
		span_add(&p->busy_wait, e->entry_ns, e->hdr.time_ns);
		p->summary.waits_immediate += immediate;
		d = device_of(p, target ? target->device : device);
		if (d) {
			d->summary.syncs_waited++;
			d->summary.sync_wait_ns += waited;
			span_add(&d->busy_wait, e->entry_ns, e->hdr.time_ns);
			d->summary.waits_immediate += immediate;
		}
		if (target) {
			target->summary.syncs_waited++;
			target->summary.sync_wait_ns += waited;
			target->summary.waits_immediate += immediate;
		}
	}
	d = device_of(p, target ? target->device : device);
	if (d)
		d->summary.syncs++;
	if (target)
		target->summary.syncs++;
	if (e->kind != CP_SYNC_QUERY_EVENT && e->kind != CP_SYNC_QUERY_STREAM)
		p->last_sync_return_ns = e->hdr.time_ns;
	fold_spans(p);
}

static void on_exit_record(struct cp_timeline *tl, struct process *p, uint64_t time_ns, uint32_t api)
{
	size_t i;

	/* Its context is gone: nothing of it runs after the exit. */
	for (i = 0; i < p->stream_count; i++)
		settle(tl, p, p->streams[i], 0, 0, true, time_ns, CP_DONE_PROCESS_EXIT, api, 0);
	p->summary.exited = true;
}

void cp_timeline__observe(struct cp_timeline *tl, const union cp_event *event)
{
	struct process *p;

	if (!tl || !event)
		return;
	switch (event->hdr.type) {
	case CP_EV_LAUNCH:
	case CP_EV_SYNC:
	case CP_EV_EVENT:
		p = process_of(tl, event->hdr.pid);
		break;
	default:
		p = find_process(tl, event->hdr.pid);
		break;
	}
	if (!p)
		return;
	/* Any record of a thread: its last launch call has returned. */
	note_returned(p, event->hdr.tid, event->hdr.time_ns);
	switch (event->hdr.type) {
	case CP_EV_LAUNCH:
		on_launch(tl, p, &event->launch);
		break;
	case CP_EV_EVENT:
		on_event_record(p, &event->event);
		break;
	case CP_EV_SYNC:
		on_sync(tl, p, &event->sync);
		break;
	case CP_EV_PROC:
		if (event->proc.kind == CP_PROC_EXIT)
			on_exit_record(tl, p, event->hdr.time_ns, event->hdr.api);
		break;
	default:
		break;
	}
}

/* ---- summaries ------------------------------------------------------------------------------ */

static void verdict(struct cp_gpu_summary *s)
{
	uint64_t window = s->window_end_ns > s->window_start_ns ? s->window_end_ns - s->window_start_ns : 0;

	s->verdict = CP_GPU_VERDICT_UNKNOWN;
	if (!window || !s->bounded)
		return;
	/* The CPU waited on the GPU for at least half the time: the queue never ran dry. */
	if (s->busy_min_ns * 2 >= window)
		s->verdict = CP_GPU_VERDICT_GPU_BOUND;
	/* The GPU was surely idle half the time, or most waits found the work done. */
	else if ((window - s->busy_max_ns) * 2 >= window ||
		 (s->syncs_waited && s->waits_immediate * 2 >= s->syncs_waited &&
		  s->busy_min_ns * 5 < window))
		s->verdict = CP_GPU_VERDICT_LAUNCH_BOUND;
	else
		s->verdict = CP_GPU_VERDICT_MIXED;
}

/*
 * Busy at most: the union of the kernels' bounds. Busy at least: while the
 * CPU waited for pending work, less the driver's own return time on each
 * wait (the process's fastest sync). Then the verdict.
 */
static void finish_summary(const struct process *p, struct cp_gpu_summary *out,
			   const struct span_union *busy_max, const struct span_union *busy_wait)
{
	uint64_t overhead = p->fastest_sync_ns * out->syncs_waited, lower = span_measure(busy_wait);

	out->busy_max_ns = span_measure(busy_max);
	out->busy_min_ns = lower > overhead ? lower - overhead : 0;
	if (out->busy_min_ns > out->busy_max_ns)
		out->busy_min_ns = out->busy_max_ns;
	out->sync_overhead_ns = p->fastest_sync_ns;
	verdict(out);
}

int cp_timeline__summary(const struct cp_timeline *tl, uint32_t pid, struct cp_gpu_summary *out)
{
	const struct process *p = find_process(tl, pid);
	size_t i;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!p)
		return -ENOENT;
	*out = p->summary;
	for (i = 0; i < p->stream_count; i++)
		out->pending += p->streams[i]->count;
	finish_summary(p, out, &p->busy_max, &p->busy_wait);
	return 0;
}

size_t cp_timeline__devices(const struct cp_timeline *tl, uint32_t pid, struct cp_gpu_device *out,
			    size_t max)
{
	const struct process *p = tl ? find_process(tl, pid) : NULL;
	size_t i, j;

	if (!p)
		return 0;
	for (i = 0; out && i < p->device_count && i < max; i++) {
		const struct device_time *d = &p->devices[i];

		out[i].device = d->device;
		out[i].summary = d->summary;
		out[i].summary.exited = p->summary.exited;
		for (j = 0; j < p->stream_count; j++)
			if (p->streams[j]->device == d->device)
				out[i].summary.pending += p->streams[j]->count;
		finish_summary(p, &out[i].summary, &d->busy_max, &d->busy_wait);
	}
	return p->device_count;
}

size_t cp_timeline__streams(const struct cp_timeline *tl, uint32_t pid, struct cp_gpu_stream *out,
			    size_t max)
{
	const struct process *p = find_process(tl, pid);
	size_t i;

	if (!p)
		return 0;
	for (i = 0; out && i < p->stream_count && i < max; i++) {
		const struct stream *s = p->streams[i];

		out[i].device = s->device;
		out[i].stream = s->raw;
		out[i].per_thread_tid = cp_stream__per_thread_tid(s->key);
		out[i].summary = s->summary;
		out[i].summary.pending = s->count;
		out[i].summary.busy_max_ns = span_measure(&s->busy_max);
	}
	return p->stream_count;
}

size_t cp_timeline__in_flight(const struct cp_timeline *tl, uint32_t pid, struct cp_gpu_interval *out,
			      size_t max)
{
	const struct process *p = tl ? find_process(tl, pid) : NULL;
	size_t total = 0, i, j;

	if (!p)
		return 0;
	for (i = 0; i < p->stream_count; i++) {
		struct stream *s = p->streams[i];

		for (j = 0; j < s->count; j++, total++) {
			const struct launch *l = nth(s, j);

			if (!out || total >= max)
				continue;
			out[total] = (struct cp_gpu_interval){
				.pid = pid, .tid = l->tid, .device = s->device, .api = l->api,
				.stream = l->stream, .function = l->function, .seq = l->seq,
				.launch_ns = l->launch_ns, .start_after_ns = l->start_after_ns,
				.graph = l->graph, .nccl_call = l->nccl_call,
				.py_stack = l->py_stack,
			};
		}
	}
	return total;
}

static void free_stream(struct stream *s)
{
	free(s->queue);
	span_free(&s->busy_max);
	free(s);
}

static void free_process(void *node)
{
	struct process *p = node;
	size_t i;

	for (i = 0; i < p->stream_count; i++)
		free_stream(p->streams[i]);
	free(p->streams);
	tdestroy(p->events, free);
	tdestroy(p->threads, free);
	span_free(&p->busy_max);
	span_free(&p->busy_wait);
	for (i = 0; i < p->device_count; i++) {
		span_free(&p->devices[i].busy_max);
		span_free(&p->devices[i].busy_wait);
	}
	free(p->devices);
	free(p);
}

void cp_timeline__forget_pid(struct cp_timeline *tl, uint32_t pid)
{
	struct process *p = tl ? cp_tree__take(&tl->processes, &pid, cp_tree__by_u32) : NULL;

	if (p)
		free_process(p);
}

struct cp_timeline *cp_timeline__new(const struct cp_timeline_opts *opts)
{
	struct cp_timeline_opts o;
	struct cp_timeline *tl;
	int err = CP_OPTS_COPY(o, opts);

	if (err) {
		errno = -err;
		return NULL;
	}
	tl = calloc(1, sizeof(*tl));
	if (!tl)
		return NULL;
	tl->on_interval = o.on_interval;
	tl->ctx = o.ctx;
	tl->max_pending = o.max_pending ? o.max_pending : DEFAULT_MAX_PENDING;
	return tl;
}

void cp_timeline__free(struct cp_timeline *tl)
{
	if (!tl)
		return;
	tdestroy(tl->processes, free_process);
	free(tl);
}

const char *cp_done_evidence__name(enum cp_done_evidence evidence)
{
	switch (evidence) {
	case CP_DONE_STREAM_SYNC: return "stream_sync";
	case CP_DONE_CONTEXT_SYNC: return "context_sync";
	case CP_DONE_EVENT_SYNC: return "event_sync";
	case CP_DONE_EVENT_QUERY: return "event_query";
	case CP_DONE_STREAM_QUERY: return "stream_query";
	case CP_DONE_BLOCKING_COPY: return "blocking_copy";
	case CP_DONE_PROCESS_EXIT: return "process_exit";
	default: return "none";
	}
}

const char *cp_gpu_verdict__name(enum cp_gpu_verdict verdict)
{
	switch (verdict) {
	case CP_GPU_VERDICT_GPU_BOUND: return "gpu-bound";
	case CP_GPU_VERDICT_LAUNCH_BOUND: return "launch-bound";
	case CP_GPU_VERDICT_MIXED: return "mixed";
	default: return "unknown";
	}
}
