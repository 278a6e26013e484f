// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The writer of cuprobe trace --perfetto: which Chrome trace-event JSON
 * events the records and the timeline's intervals become, in what order,
 * with the little state that takes (format.h says what is kept), and the
 * events themselves, their args as --json writes the records (json.c).
 * Streamed: nothing grows with the length of the trace, only with what is
 * alive in it.
 *
 * An API call's slice comes from its CP_EV_RETURN (entry_ns to return). Its
 * args come from the call's own record: written at entry (launches, copies,
 * memsets, frees, events: the same tid, hdr.time_ns == entry_ns, before the
 * return), or at return (allocations, syncs, VMM, modules, contexts, names,
 * NCCL calls: the same tid and API, right after the return). An NCCL
 * collective (or group) also gets a slice on its stream's track, over the
 * bounds of the kernels it launched, once the last of them is known.
 */
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

/* ---- the events, written ------------------------------------------------------------ */

/*
 * The events of one JSON array, streamed: the first event opens the array
 * ("[") and each later one follows ",\n", so a file cut after any event
 * holds whole events only (the Perfetto UI opens an unterminated array);
 * chrome_close ends it. "ts" is in microseconds with ns precision
 * ("1234.567"), from base_ns.
 */
struct cp_chrome_out {
	struct cp_text *text;  /* where the next events are appended */
	uint64_t base_ns;      /* CLOCK_MONOTONIC of ts 0 */
	uint64_t events;       /* written so far */
	struct cp_python *python; /* --python: calls' args carry their frames; may be NULL */
};

/* Timestamps are microseconds with ns precision, from out->base_ns. */
static void put_chrome_us(struct cp_sink *out, uint64_t ns)
{
	put(out, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

/*
 * Opens one event: "[" before the first, ",\n" before every later one, so
 * that a file cut after any event holds whole events only.
 */
static void put_chrome_start(struct cp_sink *out, struct cp_chrome_out *chrome, const char *phase,
			     const char *cat, uint32_t pid, uint32_t tid, uint64_t time_ns)
{
	put(out, "%s{\"ph\":\"%s\",\"cat\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
	    chrome->events ? ",\n" : "[\n", phase, cat, pid, tid);
	put_chrome_us(out, time_ns > chrome->base_ns ? time_ns - chrome->base_ns : 0);
	chrome->events++;
}

static void put_chrome_metadata(struct cp_sink *out, struct cp_chrome_out *chrome, bool process,
				uint32_t pid, uint32_t tid, const char *name)
{
	put_chrome_start(out, chrome, "M", "__metadata", pid, tid, chrome->base_ns);
	put(out, ",\"name\":\"%s\",\"args\":{\"name\":", process ? "process_name" : "thread_name");
	put_json_value(out, name);
	put(out, "}}");
}

/* "comm (id)", or "pid id" / "tid id" when the command name is not known. */
static void task_name(char *buf, size_t len, const char *comm, const char *kind, uint32_t id)
{
	if (comm && comm[0])
		snprintf(buf, len, "%s (%u)", comm, id);
	else
		snprintf(buf, len, "%s %u", kind, id);
}

/* "M" events: a process "comm (pid)", a thread "comm (tid)" ("pid N"/"tid N" without comm). */
static int chrome_process_name(struct cp_chrome_out *chrome, uint32_t pid, const char *comm)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	char name[64];

	task_name(name, sizeof(name), comm, "pid", pid);
	put_chrome_metadata(&out, chrome, true, pid, pid, name);
	return cp_sink__text_done(&out);
}

static int chrome_thread_name(struct cp_chrome_out *chrome, uint32_t pid, uint32_t tid,
			      const char *comm)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	char name[64];

	task_name(name, sizeof(name), comm, "tid", tid);
	put_chrome_metadata(&out, chrome, false, pid, tid, name);
	return cp_sink__text_done(&out);
}

/*
 * A GPU stream's own process and thread, track_pid (both ids): named
 * "GPU stream 0x... (device N), comm (pid)" and "GPU stream 0x... (device N)".
 */
static int chrome_stream_name(struct cp_chrome_out *chrome, uint32_t track_pid,
			      const struct cp_gpu_stream *stream, uint32_t pid, const char *comm)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	char label[128], device[24], name[224];

	if (stream->device >= 0)
		snprintf(device, sizeof(device), "device %d", stream->device);
	else
		snprintf(device, sizeof(device), "device ?");
	if (stream->per_thread_tid)
		snprintf(label, sizeof(label), "GPU stream 0x%llx of thread %u (%s)",
			 (unsigned long long)stream->stream, stream->per_thread_tid, device);
	else
		snprintf(label, sizeof(label), "GPU stream 0x%llx (%s)",
			 (unsigned long long)stream->stream, device);
	if (comm && comm[0])
		snprintf(name, sizeof(name), "%s, %s (%u)", label, comm, pid);
	else
		snprintf(name, sizeof(name), "%s, pid %u", label, pid);
	put_chrome_metadata(&out, chrome, true, track_pid, track_pid, name);
	put_chrome_metadata(&out, chrome, false, track_pid, track_pid, label);
	return cp_sink__text_done(&out);
}

static void put_chrome_flow_id(struct cp_sink *out, const char *key, uint64_t flow_id)
{
	put(out, ",\"%s\":\"0x%llx\"", key, (unsigned long long)flow_id);
}

/* Opens one end ("b" or "e") of an async slice on a stream's track: its name and id. */
static void put_chrome_async(struct cp_sink *out, struct cp_chrome_out *chrome, const char *phase,
			     const char *cat, uint32_t track_pid, uint64_t time_ns, const char *name,
			     uint64_t id)
{
	put_chrome_start(out, chrome, phase, cat, track_pid, track_pid, time_ns);
	put(out, ",\"name\":");
	put_json_value(out, name);
	put_chrome_flow_id(out, "id", id);
}

/*
 * An API call, an "X" slice from its entry to its return on its thread;
 * args: record (the call's entry or return-side record; NULL: ret itself) as
 * --json writes it, with ret's result. A flow_id (non-zero) starts the flow
 * to its kernel: bind_id/flow_out (Perfetto) and an "s" (DevTools).
 */
static int chrome_call(struct cp_chrome_out *chrome, const struct cp_return_event *ret,
		       const union cp_event *record, const struct cp_names *names,
		       uint64_t flow_id)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	const struct cp_event_header *hdr = &ret->hdr;

	put_chrome_start(&out, chrome, "X", "cuda", hdr->pid, hdr->tid, ret->entry_ns);
	put(&out, ",\"dur\":");
	put_chrome_us(&out, hdr->time_ns > ret->entry_ns ? hdr->time_ns - ret->entry_ns : 0);
	put(&out, ",\"name\":\"%s\"", cp_api__name(hdr->api));
	if (flow_id) {
		/* Perfetto binds a flow by these (its JSON "v2" flows)... */
		put_chrome_flow_id(&out, "bind_id", flow_id);
		put(&out, ",\"flow_out\":true");
	}
	/* The args: the call's record as --json writes it, and what the call returned. */
	put(&out, ",\"args\":");
	if (!cp_json__record_fields(&out, record ? record : (const union cp_event *)ret, names,
				    chrome->python) &&
	    ret->result)
		put(&out, ",\"result\":%d", ret->result);
	put(&out, "}}");
	if (flow_id) {
		/* ...the DevTools trace engine by an "s" of the same ts, pid, tid and cat. */
		put_chrome_start(&out, chrome, "s", "cuda", hdr->pid, hdr->tid, ret->entry_ns);
		put(&out, ",\"name\":\"launch\"");
		put_chrome_flow_id(&out, "id", flow_id);
		put(&out, "}");
	}
	return cp_sink__text_done(&out);
}

/*
 * A kernel's bound on its stream's track (pid and tid track_pid): "b"/"e"
 * with id flow_id, named by the kernel, args the gpu_interval record, and
 * the end of the flow from its launch ("f", bind_id/flow_in). Without a
 * bound (CP_DONE_NONE), an instant "dropped" at its launch.
 */
static int chrome_kernel(struct cp_chrome_out *chrome, const struct cp_gpu_interval *interval,
			 uint32_t track_pid, uint64_t flow_id, struct cp_names *names)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	const char *shown;
	uint64_t start;
	char label[64];

	shown = cp_format__kernel_label(names, interval->pid, interval->function, interval->graph,
					NULL, label, sizeof(label));
	if (interval->evidence == CP_DONE_NONE || interval->done_by_ns < interval->launch_ns) {
		/* No bound: nothing to draw but where it was launched. */
		put_chrome_start(&out, chrome, "i", "cuda.event", track_pid, track_pid,
				 interval->launch_ns);
		put(&out, ",\"name\":\"dropped\",\"s\":\"p\",\"args\":");
		cp_json__interval(&out, interval, shown);
		put(&out, "}");
		return cp_sink__text_done(&out);
	}
	/*
	 * The kernel ran somewhere in [start_after, done_by]. The slice starts
	 * 1 ns after the launch call's entry at the earliest: the flow's two
	 * ends must have distinct timestamps for the DevTools engine, and no
	 * kernel starts the very nanosecond its launch call is entered.
	 */
	start = interval->start_after_ns > interval->launch_ns ? interval->start_after_ns :
		interval->launch_ns + 1;
	if (start > interval->done_by_ns)
		start = interval->done_by_ns;
	put_chrome_async(&out, chrome, "b", "cuda", track_pid, start, shown, flow_id);
	if (flow_id) {
		put_chrome_flow_id(&out, "bind_id", flow_id);
		put(&out, ",\"flow_in\":true");
	}
	put(&out, ",\"args\":");
	cp_json__interval(&out, interval, shown);
	put(&out, "}");
	if (flow_id) {
		/*
		 * The DevTools engine binds the flow's end to the event of the
		 * same ts, pid, tid and cat: the "b". No "bp":"e": Perfetto would
		 * look for an enclosing slice on this pid's thread track (a
		 * kernel is an async slice, never there) and count an error;
		 * it draws the arrow from bind_id/flow_in instead.
		 */
		put_chrome_start(&out, chrome, "f", "cuda", track_pid, track_pid, start);
		put(&out, ",\"name\":\"launch\"");
		put_chrome_flow_id(&out, "id", flow_id);
		put(&out, "}");
	}
	put_chrome_async(&out, chrome, "e", "cuda", track_pid, interval->done_by_ns, shown, flow_id);
	put(&out, "}");
	return cp_sink__text_done(&out);
}

/*
 * An NCCL collective (or group) over its kernels' bounds on the stream's
 * track: "b"/"e" of category nccl, named by the operation and its bytes,
 * args its record as --json writes it, with the group's calls and bytes.
 */
static int chrome_collective(struct cp_chrome_out *chrome, const struct cp_nccl_call *call,
			     uint32_t track_pid, uint64_t id, const struct cp_names *names)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	char name[96], size[32];
	bool group = call->record.op == CP_NCCL_GROUP_END;

	cp_format__bytes(call->bytes, true, size, sizeof(size));
	if (group && call->op != CP_NCCL_GROUP_END)
		snprintf(name, sizeof(name), "nccl group: %u %s, %s", call->calls,
			 cp_nccl_op__name(call->op), size);
	else if (group)
		snprintf(name, sizeof(name), "nccl group: %u calls, %s", call->calls, size);
	else
		snprintf(name, sizeof(name), "%s %s", cp_nccl_op__name(call->op), size);
	put_chrome_async(&out, chrome, "b", "nccl", track_pid, call->gpu_start_ns, name, id);
	put(&out, ",\"args\":");
	cp_json__record_fields(&out, (const union cp_event *)&call->record, names, chrome->python);
	put(&out, ",\"calls\":%u,\"calls_bytes\":%llu,\"kernels\":%u,\"kernels_bounded\":%u}}",
	    call->calls, (unsigned long long)call->bytes, call->kernels_seen,
	    call->kernels_bounded);
	put_chrome_async(&out, chrome, "e", "nccl", track_pid, call->gpu_end_ns, name, id);
	put(&out, "}");
	return cp_sink__text_done(&out);
}

/* A "C" sample of one series of a process counter. */
static int chrome_counter(struct cp_chrome_out *chrome, uint32_t pid, uint64_t time_ns,
			  const char *name, const char *series, uint64_t value)
{
	struct cp_sink out = cp_sink__text(chrome->text);

	put_chrome_start(&out, chrome, "C", "cuda.counter", pid, pid, time_ns);
	put(&out, ",\"name\":");
	put_json_value(&out, name);
	put(&out, ",\"args\":{");
	put_json_value(&out, series);
	put(&out, ":%llu}}", (unsigned long long)value);
	return cp_sink__text_done(&out);
}

/*
 * A record as an "i" instant, args the record as --json writes it: process
 * start (cuInit), fork, exit, Xid. On pid's process track ("s":"p"), or
 * global ("s":"g") for an Xid whose process is not traced.
 */
static int chrome_instant(struct cp_chrome_out *chrome, const union cp_event *event,
			  uint32_t pid, bool global, const struct cp_names *names)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	char name[64];

	switch (event->hdr.type) {
	case CP_EV_XID:
		snprintf(name, sizeof(name), "Xid %u", event->xid.error_code);
		break;
	case CP_EV_PROC:
		if (event->proc.kind == CP_PROC_CUDA_INIT)
			snprintf(name, sizeof(name), "process start (cuInit)");
		else if (event->proc.kind == CP_PROC_FORK)
			snprintf(name, sizeof(name), "fork %u", event->proc.child_pid);
		else if (event->proc.kind == CP_PROC_EXIT && cp_exit__decode(event->proc.exit_code).signal)
			snprintf(name, sizeof(name), "exit (signal %d)",
				 cp_exit__decode(event->proc.exit_code).signal);
		else if (event->proc.kind == CP_PROC_EXIT)
			snprintf(name, sizeof(name), "exit (status %d)",
				 cp_exit__decode(event->proc.exit_code).status);
		else
			snprintf(name, sizeof(name), "%s", cp_format__proc_kind_name(event->proc.kind));
		break;
	default:
		snprintf(name, sizeof(name), "%s", cp_event_type__name(event->hdr.type));
		break;
	}
	put_chrome_start(&out, chrome, "i", "cuda.event", pid, global ? event->hdr.tid : pid,
			 event->hdr.time_ns);
	put(&out, ",\"name\":");
	put_json_value(&out, name);
	put(&out, ",\"s\":\"%s\",\"args\":", global ? "g" : "p");
	cp_json__record_fields(&out, event, names, chrome->python);
	put(&out, "}}");
	return cp_sink__text_done(&out);
}

/* Ends the array ("[]" when no event was written). */
static int chrome_close(struct cp_chrome_out *chrome)
{
	struct cp_sink out = cp_sink__text(chrome->text);

	put(&out, chrome->events ? "\n]\n" : "[]\n");
	return cp_sink__text_done(&out);
}

/* ---- the writer's state --------------------------------------------------------------- */

/* GPU streams get processes of their own: above any pid (PID_MAX_LIMIT is 2^22). */
#define STREAM_PID_BASE (1u << 30)
/* A launch's id: the process's serial above its seq. */
#define SERIAL_SHIFT 40
/* Live allocations tracked per process for the memory counter. */
#define MAX_ALLOCATIONS 65536
/* The latest top-level slices per thread, checked for overlap. */
#define MAX_SPANS 8
#define COMM_MAX 16

struct span {
	uint64_t start, end;
};

struct thread {
	uint32_t tid;
	bool has_entry;            /* entry: a call's entry record, its return not seen yet */
	bool has_return;           /* ret: a return whose call writes its record next */
	uint64_t entry_seq;        /* the entry is a kernel or graph launch: its seq */
	union cp_event entry;
	struct cp_return_event ret;
	struct span spans[MAX_SPANS]; /* disjoint, by start: what a later slice may not cut */
	size_t span_count;
};

struct stream {
	int32_t device;
	uint64_t key;              /* cp_stream__key */
	uint32_t track_pid;        /* its own process's (and thread's) id in the trace */
	uint64_t depth;            /* launches without their interval yet */
};

struct allocation {
	uint64_t ptr, bytes;
};

struct process {
	uint32_t pid;
	uint32_t serial;           /* from 1, in the order processes are seen */
	uint64_t launches;         /* kernel and graph launch records: the timeline's seq */
	char comm[COMM_MAX];
	void *threads;             /* tsearch tree of struct thread */
	struct stream *streams;
	size_t stream_count, stream_capacity;
	void *allocations;         /* tsearch tree of struct allocation: live device memory */
	size_t allocation_count;
	uint64_t allocated_bytes;  /* cuMemAlloc* not freed */
	uint64_t physical_bytes;   /* VMM physical memory live */
};

struct cp_chrome_trace {
	struct cp_names *names;
	struct cp_nccl_calls *nccl;  /* NCCL calls waiting for their kernels' bounds */
	struct cp_chrome_out out;
	void *processes;           /* tsearch tree of struct process */
	uint32_t serials;          /* processes seen */
	uint32_t streams;          /* streams seen */
	uint64_t now_ns;           /* the latest record time */
	struct cp_chrome_trace_stats stats;
};

/* ---- trees ------------------------------------------------------------------------------ */

/* Processes and threads are ordered by their pid and tid, allocations by their address. */
static struct process *find_process(const struct cp_chrome_trace *ct, uint32_t pid)
{
	return cp_tree__find(&ct->processes, &pid, cp_tree__by_u32);
}

/* The process, met for the first time when need be: named once, as it is now or else comm. */
static struct process *process_of(struct cp_chrome_trace *ct, uint32_t pid, const char *comm)
{
	struct process key = { .pid = pid }, *p;
	bool added;

	p = cp_tree__add(&ct->processes, &key, sizeof(key), cp_tree__by_u32, &added);
	if (!p || !added)
		return p;
	p->serial = ++ct->serials;
	cp_proc__comm(pid, 0, p->comm, sizeof(p->comm));
	if (!p->comm[0] && comm)
		snprintf(p->comm, sizeof(p->comm), "%s", comm);
	chrome_process_name(&ct->out, pid, p->comm);
	return p;
}

static struct thread *thread_of(struct cp_chrome_trace *ct, struct process *p, uint32_t tid)
{
	struct thread key = { .tid = tid }, *t;
	char comm[COMM_MAX];
	bool added;

	t = cp_tree__add(&p->threads, &key, sizeof(key), cp_tree__by_u32, &added);
	if (!t || !added)
		return t;
	cp_proc__comm(p->pid, tid, comm, sizeof(comm));
	chrome_thread_name(&ct->out, p->pid, tid, comm[0] ? comm : p->comm);
	return t;
}

/* The stream's track, made (and named) at its first launch or interval. */
static struct stream *stream_of(struct cp_chrome_trace *ct, struct process *p, int32_t device,
				uint64_t handle, uint32_t api, uint32_t tid)
{
	uint64_t key = cp_stream__key(handle, api, tid);
	struct cp_gpu_stream named = { 0 };
	struct stream *s;
	size_t i;

	for (i = 0; i < p->stream_count; i++)
		if (p->streams[i].device == device && p->streams[i].key == key)
			return &p->streams[i];
	if (CP_ARRAY_RESERVE(p->streams, p->stream_capacity, p->stream_count + 1, 4))
		return NULL;
	s = &p->streams[p->stream_count++];
	*s = (struct stream){ .device = device, .key = key,
			      .track_pid = STREAM_PID_BASE + ++ct->streams };
	named.device = device;
	named.stream = handle;
	named.per_thread_tid = cp_stream__per_thread_tid(key);
	chrome_stream_name(&ct->out, s->track_pid, &named, p->pid, p->comm);
	return s;
}

/* ---- API calls ---------------------------------------------------------------------------- */

static uint64_t flow_id(const struct process *p, uint64_t seq)
{
	return (uint64_t)p->serial << SERIAL_SHIFT | seq;
}

/*
 * Whether [start, end] may go on the thread's track: a thread is in one call
 * at a time, so a slice contains, follows or lies inside the others, never
 * cuts one. Kept slices are the thread's latest top-level ones.
 */
static bool fits(struct thread *t, uint64_t start, uint64_t end)
{
	size_t i, kept = 0;

	for (i = 0; i < t->span_count; i++) {
		const struct span *s = &t->spans[i];

		if ((start < s->start && end > s->start && end < s->end) ||
		    (start > s->start && start < s->end && end > s->end))
			return false;
	}
	for (i = 0; i < t->span_count; i++)
		if (start >= t->spans[i].start && end <= t->spans[i].end)
			return true; /* nested in one: nothing new at the top */
	/* It contains the ones it overlaps (its calls): it replaces them. */
	for (i = 0; i < t->span_count; i++)
		if (!(start <= t->spans[i].start && end >= t->spans[i].end))
			t->spans[kept++] = t->spans[i];
	t->span_count = kept;
	if (t->span_count == MAX_SPANS) {
		memmove(&t->spans[0], &t->spans[1], (MAX_SPANS - 1) * sizeof(t->spans[0]));
		t->span_count--;
	}
	for (i = t->span_count; i > 0 && t->spans[i - 1].start > start; i--)
		t->spans[i] = t->spans[i - 1];
	t->spans[i] = (struct span){ start, end };
	t->span_count++;
	return true;
}

static void write_call(struct cp_chrome_trace *ct, struct process *p, struct thread *t,
		       const struct cp_return_event *ret, const union cp_event *record,
		       uint64_t seq)
{
	uint64_t id = seq ? flow_id(p, seq) : 0;

	if (ret->hdr.time_ns < ret->entry_ns || !fits(t, ret->entry_ns, ret->hdr.time_ns)) {
		ct->stats.calls_overlapping++;
		return;
	}
	chrome_call(&ct->out, ret, record, ct->names, id);
	ct->stats.calls++;
	ct->stats.flows += id != 0;
}

/* Calls whose record comes at their return (after the CP_EV_RETURN). */
static bool records_at_return(uint32_t api)
{
	switch (cp_api__family((enum cp_api)api)) {
	case CP_FAMILY_alloc: case CP_FAMILY_vmm: case CP_FAMILY_sync: case CP_FAMILY_module:
	case CP_FAMILY_context: case CP_FAMILY_name: case CP_FAMILY_nccl:
		return true;
	default:
		return false;
	}
}

/* Whether event is the record the held return's call wrote. */
static bool is_return_record(const struct cp_return_event *ret, const union cp_event *event)
{
	if (event->hdr.api != ret->hdr.api || event->hdr.time_ns < ret->hdr.time_ns)
		return false;
	switch (event->hdr.type) {
	case CP_EV_SYNC:
		return event->sync.entry_ns == ret->entry_ns;
	case CP_EV_ALLOC: case CP_EV_VMM: case CP_EV_MODULE: case CP_EV_CONTEXT: case CP_EV_NAME:
	case CP_EV_NCCL:
		return true;
	default:
		return false;
	}
}

/* A record of the thread: the return it held gets its slice, with this record if it is its own. */
static void settle_return(struct cp_chrome_trace *ct, struct process *p, struct thread *t,
			  const union cp_event *event)
{
	if (!t->has_return)
		return;
	t->has_return = false;
	write_call(ct, p, t, &t->ret, event && is_return_record(&t->ret, event) ? event : NULL, 0);
}

static void on_return(struct cp_chrome_trace *ct, struct process *p, struct thread *t,
		      const struct cp_return_event *ret)
{
	if (t->has_entry && t->entry.hdr.time_ns == ret->entry_ns &&
	    t->entry.hdr.api == ret->hdr.api) {
		t->has_entry = false;
		write_call(ct, p, t, ret, &t->entry, t->entry_seq);
		return;
	}
	if (records_at_return(ret->hdr.api)) {
		t->ret = *ret;
		t->has_return = true;
		return;
	}
	write_call(ct, p, t, ret, NULL, 0);
}

/* ---- counters ------------------------------------------------------------------------------ */

static void write_memory(struct cp_chrome_trace *ct, struct process *p, uint64_t time_ns)
{
	chrome_counter(&ct->out, p->pid, time_ns, "live device memory", "bytes",
		       p->allocated_bytes + p->physical_bytes);
}

static bool device_kind(uint32_t kind)
{
	return kind == CP_MEM_DEVICE || kind == CP_MEM_MANAGED || kind == CP_MEM_DEVICE_ASYNC;
}

static void forget_allocation(struct process *p, uint64_t ptr, bool *changed)
{
	struct allocation *a = cp_tree__take(&p->allocations, &ptr, cp_tree__by_u64);

	if (!a)
		return; /* made before tracing began, or past the cap */
	p->allocated_bytes -= a->bytes;
	p->allocation_count--;
	free(a);
	*changed = true;
}

static void on_alloc(struct cp_chrome_trace *ct, struct process *p, const struct cp_alloc_event *e)
{
	struct allocation key = { .ptr = e->ptr, .bytes = e->bytes };
	bool changed = false, added = false;

	if (e->result || !e->ptr || !device_kind(e->kind))
		return;
	forget_allocation(p, e->ptr, &changed); /* its free was not seen */
	if (p->allocation_count < MAX_ALLOCATIONS)
		cp_tree__add(&p->allocations, &key, sizeof(key), cp_tree__by_u64, &added);
	if (added) {
		p->allocation_count++;
		p->allocated_bytes += key.bytes;
		changed = true;
	} else {
		ct->stats.allocations_untracked++;
	}
	if (changed)
		write_memory(ct, p, e->hdr.time_ns);
}

static void on_free(struct cp_chrome_trace *ct, struct process *p, const struct cp_free_event *e)
{
	bool changed = false;

	if (!device_kind(e->kind))
		return;
	forget_allocation(p, e->ptr, &changed);
	if (changed)
		write_memory(ct, p, e->hdr.time_ns);
}

static void on_vmm(struct cp_chrome_trace *ct, struct process *p, const struct cp_vmm_event *e)
{
	if (e->result || !e->physical_bytes)
		return;
	if (e->op == CP_VMM_CREATE)
		p->physical_bytes += e->physical_bytes;
	else if (e->op == CP_VMM_RELEASE || e->op == CP_VMM_UNMAP)
		p->physical_bytes -= e->physical_bytes < p->physical_bytes ? e->physical_bytes :
				     p->physical_bytes;
	else
		return;
	write_memory(ct, p, e->hdr.time_ns);
}

static void write_depth(struct cp_chrome_trace *ct, const struct stream *s, uint64_t time_ns)
{
	chrome_counter(&ct->out, s->track_pid, time_ns, "queue", "depth", s->depth);
}

static void on_launch(struct cp_chrome_trace *ct, struct process *p, struct thread *t,
		      const struct cp_launch_event *e)
{
	struct stream *s;

	if (e->flags & CP_LAUNCH_HOST_FUNC)
		return; /* not a kernel: the timeline does not count it */
	t->entry_seq = ++p->launches;
	s = stream_of(ct, p, e->device, e->stream, e->hdr.api, e->hdr.tid);
	if (!s)
		return;
	s->depth++;
	write_depth(ct, s, e->hdr.time_ns);
}

/* ---- NCCL collectives ------------------------------------------------------------------------ */

/* A collective whose kernels all have their bound (or the trace ends): its slice, then forgotten. */
static void write_collective(struct cp_chrome_trace *ct, struct cp_nccl_call *call)
{
	struct process *p = find_process(ct, call->pid);
	struct stream *s;

	if (call->kernels_bounded && p) {
		s = stream_of(ct, p, call->kernel_device, call->kernel_stream, call->kernel_api,
			      call->kernel_tid);
		if (s) {
			chrome_collective(&ct->out, call, s->track_pid,
					  (uint64_t)p->serial << SERIAL_SHIFT | 1ull << (SERIAL_SHIFT - 1) |
					  call->link, ct->names);
			ct->stats.collectives++;
		}
	} else {
		ct->stats.collectives_unbounded++;
	}
	cp_nccl_calls__forget(ct->nccl, call);
}

static void maybe_write_collective(struct cp_chrome_trace *ct, struct cp_nccl_call *call)
{
	if (call && call->recorded && call->kernels_seen >= call->launches)
		write_collective(ct, call);
}

struct flush {
	struct cp_chrome_trace *ct;
	uint32_t pid;               /* 0: every process */
	struct cp_nccl_call *calls[256];
	size_t count;
};

static void note_unfinished(void *ctx, struct cp_nccl_call *call)
{
	struct flush *f = ctx;

	if ((!f->pid || call->pid == f->pid) && f->count < sizeof(f->calls) / sizeof(f->calls[0]))
		f->calls[f->count++] = call;
}

/* Collectives still waiting (a process exited, tracing ended): drawn with the kernels known. */
static void flush_collectives(struct cp_chrome_trace *ct, uint32_t pid)
{
	struct flush f;
	size_t i;

	do {
		f = (struct flush){ .ct = ct, .pid = pid };
		cp_nccl_calls__each(ct->nccl, note_unfinished, &f);
		for (i = 0; i < f.count; i++) {
			if (f.calls[i]->recorded)
				write_collective(ct, f.calls[i]);
			else
				cp_nccl_calls__forget(ct->nccl, f.calls[i]);
		}
	} while (f.count == sizeof(f.calls) / sizeof(f.calls[0]));
}

/* ---- records --------------------------------------------------------------------------------- */

struct walk {
	struct cp_chrome_trace *ct;
	struct process *p;
};

static void settle_thread(const void *node, VISIT which, void *ctx)
{
	struct walk *w = ctx;
	struct thread *t = *(struct thread *const *)node;

	if (which != postorder && which != leaf)
		return;
	t->has_entry = false; /* its return will not come */
	settle_return(w->ct, w->p, t, NULL);
}

/* The process exited, or tracing ended: no record of its threads can follow. */
static void settle_threads(struct cp_chrome_trace *ct, struct process *p)
{
	struct walk w = { ct, p };

	twalk_r(p->threads, settle_thread, &w);
}

int cp_chrome_trace__record(struct cp_chrome_trace *ct, const union cp_event *event,
			    struct cp_text *text)
{
	const struct cp_event_header *hdr = &event->hdr;
	struct process *p;
	struct thread *t = NULL;

	ct->out.text = text;
	if (hdr->time_ns > ct->now_ns)
		ct->now_ns = hdr->time_ns;
	switch (hdr->type) {
	case CP_EV_XID: {
		uint32_t pid = cp_xid__process(&event->xid);

		p = find_process(ct, pid);
		chrome_instant(&ct->out, event, p ? pid : hdr->pid, !p, ct->names);
		return text->failed ? -ENOMEM : 0;
	}
	case CP_EV_ATTACH:
		return 0; /* a file mapped, not a call */
	default:
		break;
	}
	/* A lifecycle record carries the name: the process may have exited before it is read. */
	p = process_of(ct, hdr->pid, hdr->type == CP_EV_PROC ? event->proc.comm : NULL);
	if (!p)
		return -ENOMEM;
	/* Lifecycle records come from the kernel's tracepoints: no call of the thread. */
	if (hdr->type != CP_EV_PROC || event->proc.kind == CP_PROC_CUDA_INIT) {
		t = thread_of(ct, p, hdr->tid);
		if (!t)
			return -ENOMEM;
		settle_return(ct, p, t, hdr->type == CP_EV_RETURN ? NULL : event);
	}
	switch (hdr->type) {
	case CP_EV_RETURN:
		on_return(ct, p, t, &event->ret);
		break;
	case CP_EV_LAUNCH:
	case CP_EV_COPY:
	case CP_EV_MEMSET:
	case CP_EV_FREE:
	case CP_EV_EVENT:
	case CP_EV_RT_LAUNCH:
		/* Written at the call's entry: kept until its return. */
		t->entry = *event;
		t->has_entry = true;
		t->entry_seq = 0;
		if (hdr->type == CP_EV_LAUNCH)
			on_launch(ct, p, t, &event->launch);
		else if (hdr->type == CP_EV_FREE)
			on_free(ct, p, &event->free);
		break;
	case CP_EV_ALLOC:
		on_alloc(ct, p, &event->alloc);
		break;
	case CP_EV_VMM:
		on_vmm(ct, p, &event->vmm);
		break;
	case CP_EV_NCCL:
		cp_nccl_calls__observe(ct->nccl, event);
		maybe_write_collective(ct, cp_nccl_calls__find(ct->nccl, hdr->pid,
			event->nccl.op == CP_NCCL_GROUP_END ? event->nccl.group : event->nccl.seq));
		break;
	case CP_EV_PROC:
		if (event->proc.kind == CP_PROC_FORK)
			process_of(ct, event->proc.child_pid, p->comm);
		if (event->proc.kind == CP_PROC_EXIT)
			settle_threads(ct, p);
		if (event->proc.kind != CP_PROC_HELD_FOR_STACKS)
			chrome_instant(&ct->out, event, p->pid, false, ct->names);
		break;
	default:
		break;
	}
	return text->failed ? -ENOMEM : 0;
}

int cp_chrome_trace__interval(struct cp_chrome_trace *ct, const struct cp_gpu_interval *interval,
			      struct cp_text *text)
{
	struct process *p;
	struct stream *s;

	ct->out.text = text;
	p = process_of(ct, interval->pid, NULL);
	s = p ? stream_of(ct, p, interval->device, interval->stream, interval->api, interval->tid) :
	    NULL;
	if (!s)
		return -ENOMEM;
	if (s->depth) {
		s->depth--;
		write_depth(ct, s, interval->evidence != CP_DONE_NONE ? interval->done_by_ns :
			    ct->now_ns > interval->launch_ns ? ct->now_ns : interval->launch_ns);
	}
	chrome_kernel(&ct->out, interval, s->track_pid, flow_id(p, interval->seq), ct->names);
	if (interval->evidence != CP_DONE_NONE)
		ct->stats.kernels++;
	else
		ct->stats.kernels_unbounded++;
	maybe_write_collective(ct, cp_nccl_calls__kernel(ct->nccl, interval));
	return text->failed ? -ENOMEM : 0;
}

static void free_process(void *node)
{
	struct process *p = node;

	tdestroy(p->threads, free);
	tdestroy(p->allocations, free);
	free(p->streams);
	free(p);
}

void cp_chrome_trace__forget_pid(struct cp_chrome_trace *ct, uint32_t pid)
{
	struct process *p = ct ? find_process(ct, pid) : NULL;

	if (!p)
		return;
	flush_collectives(ct, pid);
	tdelete(p, &ct->processes, cp_tree__by_u32);
	free_process(p);
}

static void settle_process(const void *node, VISIT which, void *ctx)
{
	if (which == postorder || which == leaf)
		settle_threads(ctx, *(struct process *const *)node);
}

int cp_chrome_trace__finish(struct cp_chrome_trace *ct, struct cp_text *text)
{
	ct->out.text = text;
	twalk_r(ct->processes, settle_process, ct);
	flush_collectives(ct, 0);
	chrome_close(&ct->out);
	return text->failed ? -ENOMEM : 0;
}

void cp_chrome_trace__stats(const struct cp_chrome_trace *ct, struct cp_chrome_trace_stats *out)
{
	*out = ct->stats;
	out->events = ct->out.events;
}

struct cp_chrome_trace *cp_chrome_trace__new(struct cp_names *names, uint64_t base_ns)
{
	struct cp_chrome_trace *ct = calloc(1, sizeof(*ct));

	if (!ct)
		return NULL;
	ct->nccl = cp_nccl_calls__new(0);
	if (!ct->nccl) {
		free(ct);
		return NULL;
	}
	ct->names = names;
	ct->out.base_ns = base_ns;
	return ct;
}

void cp_chrome_trace__set_python(struct cp_chrome_trace *ct, struct cp_python *python)
{
	ct->out.python = python;
}

void cp_chrome_trace__free(struct cp_chrome_trace *ct)
{
	if (!ct)
		return;
	tdestroy(ct->processes, free_process);
	cp_nccl_calls__free(ct->nccl);
	free(ct);
}
