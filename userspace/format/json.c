// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON format: one object a line for records, reports and the rest.
 * The schema is in the README; handles and addresses are hex strings, since
 * JSON numbers lose precision past 2^53.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "output.h"

/*
 * ,"key":value, key a string literal: hex strings, numbers, and names of
 * cuprobe's own (enum names: nothing to escape).
 */
#define put_json_hex(out, key, v) \
	(put_lit(out, ",\"" key "\":\""), put_hex(out, v), put_lit(out, "\""))
#define put_json_u64(out, key, v) (put_lit(out, ",\"" key "\":"), put_u64(out, v))
#define put_json_i64(out, key, v) (put_lit(out, ",\"" key "\":"), put_i64(out, v))
#define put_json_name(out, key, v) \
	(put_lit(out, ",\"" key "\":\""), put_str(out, v), put_lit(out, "\""))

/* "kernel" and "mangled" of a launch: the forms escaped when the name was learned. */
static void put_json_kernel_names(struct cp_sink *out, const struct cp_name_entry *name)
{
	const struct cp_name_forms *forms;

	if (!name) {
		put_lit(out, ",\"kernel\":null,\"mangled\":null");
		return;
	}
	forms = cp_names__forms(name);
	put_lit(out, ",\"kernel\":");
	put_bytes(out, forms->json_display, forms->json_display_len);
	put_lit(out, ",\"mangled\":");
	put_bytes(out, forms->json_mangled, forms->json_mangled_len);
}

static void put_json_dims(struct cp_sink *out, const char *key, const __u32 dims[3])
{
	put_lit(out, ",\"");
	put_str(out, key);
	put_lit(out, "\":[");
	put_u64(out, dims[0]);
	put_lit(out, ",");
	put_u64(out, dims[1]);
	put_lit(out, ",");
	put_u64(out, dims[2]);
	put_lit(out, "]");
}

/* A wait status (as the kernel keeps it), by cp_exit__decode: "signal" or "exit_status". */
static void put_json_exit(struct cp_sink *out, int wait_status)
{
	struct cp_exit e = cp_exit__decode(wait_status);

	if (e.signal)
		put(out, ",\"signal\":%d", e.signal);
	else
		put(out, ",\"exit_status\":%d", e.status);
}

/* ---- records ---------------------------------------------------------------------- */

static bool json_launch(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_event_header *hdr = &event->hdr;
	const struct cp_name_entry *name;
	const struct cp_launch_event *e = &event->launch;

	if (e->flags & CP_LAUNCH_GRAPH) {
		put(out, ",\"graph_exec\":\"0x%llx\",\"stream\":\"0x%llx\"",
		    (unsigned long long)e->function, (unsigned long long)e->stream);
		return false;
	}
	if (e->flags & CP_LAUNCH_HOST_FUNC) {
		put(out, ",\"host_function\":\"0x%llx\",\"stream\":\"0x%llx\"",
		    (unsigned long long)e->function, (unsigned long long)e->stream);
		return false;
	}
	name = cp_names__lookup(names, hdr->pid, e->function);
	put_json_hex(out, "function", e->function);
	put_json_kernel_names(out, name);
	if (name && name->source != CP_NAME_FROM_PROBE)
		put_json_name(out, "name_source", cp_name_source__name(name->source));
	put_json_dims(out, "grid", e->grid);
	put_json_dims(out, "block", e->block);
	put_json_u64(out, "shared_mem_bytes", e->shared_mem_bytes);
	put_json_hex(out, "stream", e->stream);
	put_json_i64(out, "device", e->device);
	if (e->flags & CP_LAUNCH_COOPERATIVE)
		put(out, ",\"cooperative\":true");
	if (e->flags & CP_LAUNCH_CONFIG_FAULT)
		put(out, ",\"config_unreadable\":true");
	if (e->flags & CP_LAUNCH_LEGACY)
		put(out, ",\"legacy\":true");
	if (e->nccl_call)
		put_json_u64(out, "nccl_call", e->nccl_call);
	return false;
}

static bool json_alloc(struct cp_sink *out, const union cp_event *event,
		       const struct cp_names *names)
{
	const struct cp_alloc_event *e = &event->alloc;

	put_json_hex(out, "ptr", e->ptr);
	put_json_u64(out, "bytes", e->bytes);
	put_json_name(out, "kind", cp_mem_kind__name(e->kind));
	put_json_i64(out, "result", e->result);
	if (e->kind == CP_MEM_DEVICE_ASYNC)
		put_json_hex(out, "stream", e->stream);
	return true;
}

static bool json_free(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_free_event *e = &event->free;

	put(out, ",\"ptr\":\"0x%llx\",\"kind\":\"%s\"", (unsigned long long)e->ptr,
	    cp_mem_kind__name(e->kind));
	if (e->kind == CP_MEM_DEVICE_ASYNC)
		put(out, ",\"stream\":\"0x%llx\"", (unsigned long long)e->stream);
	return false;
}

static bool json_copy(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_copy_event *e = &event->copy;

	put_json_hex(out, "dst", e->dst);
	put_json_hex(out, "src", e->src);
	put_json_u64(out, "bytes", e->bytes);
	put_json_name(out, "direction", cp_copy_dir__name(e->direction));
	if (e->async) {
		put_lit(out, ",\"async\":true");
		put_json_hex(out, "stream", e->stream);
	} else {
		put_lit(out, ",\"async\":false");
	}
	if (e->count != 1)
		put(out, ",\"count\":%u", e->count);
	if (e->flags & CP_COPY_UNREADABLE)
		put(out, ",\"unreadable\":true");
	if (e->flags & CP_COPY_BYTES_UNKNOWN)
		put(out, ",\"bytes_unknown\":true");
	if (e->flags & CP_COPY_TRUNCATED)
		put(out, ",\"bytes_of_first\":%u", CP_COPY_BATCH_READ_MAX);
	if (e->nccl_call)
		put_json_u64(out, "nccl_call", e->nccl_call);
	return false;
}

static bool json_sync(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_event_header *hdr = &event->hdr;
	const struct cp_sync_event *e = &event->sync;

	put_json_name(out, "kind", cp_sync_kind__name(e->kind));
	put_json_hex(out, "handle", e->handle);
	put_json_u64(out, "entry_ns", e->entry_ns);
	put_json_u64(out, "waited_ns", hdr->time_ns > e->entry_ns ? hdr->time_ns - e->entry_ns : 0);
	put_json_i64(out, "result", e->result);
	put_json_i64(out, "device", e->device);
	return true;
}

static bool json_memset(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_memset_event *e = &event->memset;

	put(out, ",\"dst\":\"0x%llx\",\"bytes\":%llu,\"value\":%u,\"element_size\":%u,"
	    "\"async\":%s", (unsigned long long)e->dst, (unsigned long long)e->bytes, e->value,
	    e->element_size, e->async ? "true" : "false");
	if (e->pitch)
		put(out, ",\"pitch\":%llu", (unsigned long long)e->pitch);
	if (e->async)
		put(out, ",\"stream\":\"0x%llx\"", (unsigned long long)e->stream);
	return false;
}

static bool json_event(struct cp_sink *out, const union cp_event *event,
		       const struct cp_names *names)
{
	const struct cp_event_event *e = &event->event;

	put(out, ",\"op\":\"%s\",\"event\":\"0x%llx\",\"%s\":\"0x%llx\",\"device\":%d",
	    cp_event_op__name(e->op), (unsigned long long)e->event, cp_format__event_scope(e->op),
	    (unsigned long long)e->stream, e->device);
	return false;
}

static bool json_module(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_module_event *e = &event->module;

	put(out, ",\"op\":\"%s\",\"handle\":\"0x%llx\",\"result\":%d",
	    cp_module_op__name(e->op), (unsigned long long)e->handle, e->result);
	if (e->path_len)
		put_json_string(out, "path", e->path);
	return true;
}

static bool json_vmm(struct cp_sink *out, const union cp_event *event,
		     const struct cp_names *names)
{
	const struct cp_vmm_event *e = &event->vmm;

	put(out, ",\"op\":\"%s\",\"result\":%d,\"bytes\":%llu", cp_vmm_op__name(e->op),
	    e->result, (unsigned long long)e->bytes);
	if (e->op == CP_VMM_CREATE || e->op == CP_VMM_RELEASE || e->op == CP_VMM_RETAIN ||
	    e->op == CP_VMM_MAP)
		put(out, ",\"handle\":\"0x%llx\"", (unsigned long long)e->handle);
	if (e->op != CP_VMM_CREATE && e->op != CP_VMM_RELEASE)
		put(out, ",\"ptr\":\"0x%llx\"", (unsigned long long)e->ptr);
	if (e->op == CP_VMM_CREATE)
		put(out, ",\"device\":%d", e->device);
	if (e->op == CP_VMM_CREATE || e->op == CP_VMM_RELEASE || e->op == CP_VMM_UNMAP)
		put(out, ",\"physical_bytes\":%llu", (unsigned long long)e->physical_bytes);
	return true;
}

static bool json_context(struct cp_sink *out, const union cp_event *event,
			 const struct cp_names *names)
{
	const struct cp_context_event *e = &event->context;

	put(out, ",\"op\":\"%s\",\"context\":\"0x%llx\",\"device\":%d,\"result\":%d",
	    cp_context_op__name(e->op), (unsigned long long)e->context, e->device, e->result);
	return true;
}

static bool json_attach(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_attach_event *e = &event->attach;

	put(out, ",\"library\":\"%s\"", e->flags & CP_ATTACH_RUNTIME ? "runtime" :
	    e->flags & CP_ATTACH_NCCL ? "nccl" : "driver");
	put_json_string(out, "file", e->name);
	put(out, ",\"dev\":%u,\"inode\":%llu,\"held\":%s,\"status\":\"%s\",\"probes\":%u",
	    e->dev, (unsigned long long)e->inode, e->flags & CP_ATTACH_HELD ? "true" : "false",
	    cp_attach_status__name(e->status), e->probes);
	if (e->path[0])
		put_json_string(out, "path", e->path);
	if (e->probes_live_ns)
		put(out, ",\"probes_live_ns\":%llu", (unsigned long long)e->probes_live_ns);
	if (e->probes_live_ns >= e->hdr.time_ns && e->status == CP_ATTACH_ATTACHED)
		put(out, ",\"delay_ns\":%llu",
		    (unsigned long long)(e->probes_live_ns - e->hdr.time_ns));
	if (e->status == CP_ATTACH_FAILED)
		put(out, ",\"error\":\"%s\"", cp_format__errno_text(e->error));
	return false;
}

static bool json_name(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_name_event *e = &event->name;
	char display[1024];

	put(out, ",\"handle\":\"0x%llx\",\"result\":%d", (unsigned long long)e->handle,
	    e->result);
	if (e->hdr.api == CP_API_cuKernelGetFunction) {
		put(out, ",\"alias_of\":\"0x%llx\"", (unsigned long long)e->alias_of);
		return true;
	}
	cp_demangle(e->name, display, sizeof(display));
	put_json_string(out, "name", display);
	put_json_string(out, "mangled", e->name);
	if (cp_name_event__from_driver_record(e))
		put_json_string(out, "source", "driver_record");
	return true;
}

static bool json_proc(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_proc_event *e = &event->proc;

	put(out, ",\"kind\":\"%s\"", cp_format__proc_kind_name(e->kind));
	if (e->kind == CP_PROC_FORK)
		put(out, ",\"child_pid\":%u", e->child_pid);
	if (e->kind == CP_PROC_EXIT)
		put_json_exit(out, e->exit_code);
	return false;
}

static bool json_ret(struct cp_sink *out, const union cp_event *event,
		     const struct cp_names *names)
{
	const struct cp_event_header *hdr = &event->hdr;

	put(out, ",\"entry_ns\":%llu,\"duration_ns\":%llu,\"result\":%d",
	    (unsigned long long)event->ret.entry_ns,
	    (unsigned long long)(hdr->time_ns - event->ret.entry_ns), event->ret.result);
	return true;
}

static bool json_xid(struct cp_sink *out, const union cp_event *event,
		     const struct cp_names *names)
{
	put(out, ",\"xid\":%u,\"process\":%u", event->xid.error_code, cp_xid__process(&event->xid));
	put_json_string(out, "dev", event->xid.dev);
	put_json_string(out, "message", event->xid.msg);
	return false;
}

static bool json_nccl(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_nccl_event *e = &event->nccl;

	put_json_name(out, "op", cp_nccl_op__name(e->op));
	put_json_u64(out, "seq", e->seq);
	put_json_u64(out, "group", e->group);
	put_json_hex(out, "comm", e->comm);
	put_json_hex(out, "comm_id", e->comm_id);
	put_json_i64(out, "rank", e->rank);
	put_json_i64(out, "nranks", e->nranks);
	put_json_i64(out, "device", e->device);
	if (CP_NCCL_MOVES_DATA(e->op)) {
		put_json_u64(out, "count", e->count);
		put_json_name(out, "datatype", cp_nccl_datatype__name(e->datatype));
		put_json_u64(out, "bytes", e->bytes);
		if (e->op == CP_NCCL_ALL_REDUCE || e->op == CP_NCCL_REDUCE ||
		    e->op == CP_NCCL_REDUCE_SCATTER) {
			put_json_name(out, "redop", cp_nccl_redop__name(e->redop));
			if (e->redop >= 5)
				put_json_u64(out, "redop_handle", e->redop);
		}
		if (e->root >= 0) {
			if (e->op == CP_NCCL_SEND || e->op == CP_NCCL_RECV)
				put_json_i64(out, "peer", e->root);
			else
				put_json_i64(out, "root", e->root);
		}
		put_json_hex(out, "stream", e->stream);
	}
	if (e->parent)
		put_json_hex(out, "parent", e->parent);
	put_json_u64(out, "launches", e->launches);
	put_json_u64(out, "copies", e->copies);
	put_json_u64(out, "entry_ns", e->entry_ns);
	put_json_u64(out, "duration_ns", e->hdr.time_ns - e->entry_ns);
	put_json_i64(out, "result", e->result);
	if (e->flags & CP_NCCL_BAD_DATATYPE)
		put_lit(out, ",\"bad_datatype\":true");
	if (e->flags & CP_NCCL_COMM_UNKNOWN)
		put_lit(out, ",\"comm_unknown\":true");
	if (e->flags & CP_NCCL_ID_UNREADABLE)
		put_lit(out, ",\"id_unreadable\":true");
	if (e->flags & CP_NCCL_GROUP_OUTERMOST)
		put_lit(out, ",\"outermost\":true");
	return true;
}

static bool json_rt_launch(struct cp_sink *out, const union cp_event *event,
			   const struct cp_names *names)
{
	const struct cp_rt_launch_event *e = &event->rt_launch;
	const struct cp_name_entry *name = cp_names__lookup_stub(names, e->hdr.pid, e->stub);

	put_json_hex(out, "stub", e->stub);
	put_json_kernel_names(out, name);
	put_json_dims(out, "grid", e->grid);
	put_json_dims(out, "block", e->block);
	put(out, ",\"shared_mem_bytes\":%u,\"stream\":\"0x%llx\"", e->shared_mem_bytes,
	    (unsigned long long)e->stream);
	return false;
}

static bool json_py_stack(struct cp_sink *out, const union cp_event *event,
			  const struct cp_names *names)
{
	put_json_hex(out, "stack_id", event->py_stack.stack_id);
	put_json_u64(out, "depth", event->py_stack.depth);
	put(out, ",\"truncated\":%s", event->py_stack.flags & CP_PY_STACK_TRUNCATED ? "true" : "false");
	return false;
}

/* A frame as {file, line, function} (and "unreadable" when its code could not be read). */
static void put_json_py_frame(struct cp_sink *out, const struct cp_py_frame *frame)
{
	put_lit(out, "{\"file\":");
	put_json_value(out, frame->file);
	put(out, ",\"line\":%d,\"function\":", frame->line);
	put_json_value(out, frame->function);
	put_str(out, frame->flags & CP_PY_FRAME_UNREADABLE ? ",\"unreadable\":true}" : "}");
}

/*
 * A call's Python stack: "py_stack", its frames innermost first, with
 * "py_stack_truncated" when it was cut at CP_PY_STACK_MAX frames; a stack
 * python could not resolve (its process gone first): "py_stack_unresolved".
 */
static void put_json_py_frames(struct cp_sink *out, struct cp_python *python, uint32_t pid,
			       uint64_t stack_id)
{
	struct cp_py_frame frames[CP_PY_STACK_MAX];
	struct cp_py_stack_info info;
	int depth = cp_python__frames(python, pid, stack_id, frames, CP_PY_STACK_MAX, &info), i;

	if (depth < 0) {
		put_lit(out, ",\"py_stack_unresolved\":true");
		return;
	}
	put_lit(out, ",\"py_stack\":[");
	for (i = 0; i < depth && i < CP_PY_STACK_MAX; i++) {
		if (i)
			put_lit(out, ",");
		put_json_py_frame(out, &frames[i]);
	}
	put_lit(out, "]");
	if (info.truncated)
		put_lit(out, ",\"py_stack_truncated\":true");
}

/*
 * Each record type's own fields: json_MEMBER for each line of
 * CP_RECORD_TYPES. Each says whether it wrote the call's "result" (the
 * Chrome trace adds the return's when it did not).
 */
typedef bool (*json_record_writer)(struct cp_sink *out, const union cp_event *event,
				   const struct cp_names *names);
#define JSON_WRITER(NAME, value, member, type, name) [CP_EV_##NAME] = json_##member,
static const json_record_writer json_records[CP_EV_TYPE_MAX] = { CP_RECORD_TYPES(JSON_WRITER) };
#undef JSON_WRITER

/*
 * A record's fields as --json writes them, the object left open for the
 * caller to close: the one JSON writer of records (a JSON line, and the args
 * of a Perfetto trace event).
 */
bool cp_json__record_fields(struct cp_sink *out, const union cp_event *event,
			    const struct cp_names *names, struct cp_python *python)
{
	const struct cp_event_header *hdr = &event->hdr;
	bool result;

	put_lit(out, "{\"time_ns\":");
	put_u64(out, hdr->time_ns);
	put_lit(out, ",\"pid\":");
	put_u64(out, hdr->pid);
	put_lit(out, ",\"tid\":");
	put_u64(out, hdr->tid);
	put_lit(out, ",\"type\":\"");
	put_str(out, cp_event_type__name(hdr->type));
	put_lit(out, "\",\"api\":\"");
	put_str(out, cp_api__name(hdr->api));
	put_lit(out, "\"");
	result = hdr->type < CP_EV_TYPE_MAX && json_records[hdr->type] &&
		 json_records[hdr->type](out, event, names);
	/* --python: the calling Python stack's id, and its frames when python resolved it. */
	if (cp_event__py_stack(event)) {
		put_json_hex(out, "py_stack_id", cp_event__py_stack(event));
		if (python)
			put_json_py_frames(out, python, hdr->pid, cp_event__py_stack(event));
	}
	return result;
}

static void json_record(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names, struct cp_python *python, uint64_t start_ns)
{
	cp_json__record_fields(out, event, names, python);
	put_lit(out, "}");
}

/* ---- reports (cuprobe stats) ---------------------------------------------------------- */

static void put_gpu_json(struct cp_sink *out, const struct cp_report *r)
{
	const struct cp_gpu_summary *g = r->gpu;
	size_t i;

	put(out, ",\"gpu\":{\"window_start_ns\":%llu,\"window_end_ns\":%llu,\"launches\":%llu,"
	    "\"bounded\":%llu,\"pending\":%llu,\"dropped\":%llu,\"busy_min_ns\":%llu,"
	    "\"busy_max_ns\":%llu,\"sync_wait_ns\":%llu,\"syncs\":%llu,\"syncs_waited\":%llu,"
	    "\"waits_immediate\":%llu,\"sync_overhead_ns\":%llu,\"verdict\":\"%s\",\"streams\":[",
	    (unsigned long long)g->window_start_ns, (unsigned long long)g->window_end_ns,
	    (unsigned long long)g->launches, (unsigned long long)g->bounded,
	    (unsigned long long)g->pending, (unsigned long long)g->dropped,
	    (unsigned long long)g->busy_min_ns, (unsigned long long)g->busy_max_ns,
	    (unsigned long long)g->sync_wait_ns, (unsigned long long)g->syncs,
	    (unsigned long long)g->syncs_waited, (unsigned long long)g->waits_immediate,
	    (unsigned long long)g->sync_overhead_ns, cp_gpu_verdict__name(g->verdict));
	for (i = 0; i < r->gpu_stream_count; i++) {
		const struct cp_gpu_stream *st = &r->gpu_streams[i];

		put(out, "%s{\"stream\":\"0x%llx\",\"device\":%d,\"per_thread_tid\":%u,"
		    "\"launches\":%llu,\"bounded\":%llu,\"busy_max_ns\":%llu,"
		    "\"syncs\":%llu,\"syncs_waited\":%llu,\"sync_wait_ns\":%llu,"
		    "\"window_start_ns\":%llu,\"window_end_ns\":%llu}", i ? "," : "",
		    (unsigned long long)st->stream, st->device, st->per_thread_tid,
		    (unsigned long long)st->summary.launches, (unsigned long long)st->summary.bounded,
		    (unsigned long long)st->summary.busy_max_ns,
		    (unsigned long long)st->summary.syncs,
		    (unsigned long long)st->summary.syncs_waited,
		    (unsigned long long)st->summary.sync_wait_ns,
		    (unsigned long long)st->summary.window_start_ns,
		    (unsigned long long)st->summary.window_end_ns);
	}
	put(out, "],\"devices\":[");
	for (i = 0; i < r->gpu_device_count; i++) {
		const struct cp_gpu_summary *d = &r->gpu_devices[i].summary;

		put(out, "%s{\"device\":%d,\"launches\":%llu,\"bounded\":%llu,\"pending\":%llu,"
		    "\"dropped\":%llu,\"busy_min_ns\":%llu,\"busy_max_ns\":%llu,"
		    "\"sync_wait_ns\":%llu,\"syncs\":%llu,\"syncs_waited\":%llu,"
		    "\"waits_immediate\":%llu,\"window_start_ns\":%llu,\"window_end_ns\":%llu,"
		    "\"verdict\":\"%s\"}", i ? "," : "", r->gpu_devices[i].device,
		    (unsigned long long)d->launches, (unsigned long long)d->bounded,
		    (unsigned long long)d->pending, (unsigned long long)d->dropped,
		    (unsigned long long)d->busy_min_ns, (unsigned long long)d->busy_max_ns,
		    (unsigned long long)d->sync_wait_ns, (unsigned long long)d->syncs,
		    (unsigned long long)d->syncs_waited, (unsigned long long)d->waits_immediate,
		    (unsigned long long)d->window_start_ns, (unsigned long long)d->window_end_ns,
		    cp_gpu_verdict__name(d->verdict));
	}
	put(out, "]}");
}

/* --python: "python_lines", one object per line, most blocking first. */
static void put_python_json(struct cp_sink *out, const struct cp_report *r)
{
	size_t i;

	put(out, ",\"python_by\":\"%s\",\"python_lines\":[",
	    r->python_own_code ? "own_code" : "innermost");
	for (i = 0; i < r->python_count; i++) {
		const struct cp_py_line_row *row = &r->python[i];
		const struct cp_py_line_sums *sums = &row->sums;

		put_str(out, i ? ",{" : "{");
		if (row->resolved) {
			put_lit(out, "\"file\":");
			put_json_value(out, row->file);
			put(out, ",\"line\":%d,\"function\":", row->line);
			put_json_value(out, row->function);
		} else {
			put(out, "\"file\":null,\"line\":null,\"function\":null,\"%s\":true",
			    row->no_stack ? "no_stack" : "unresolved");
		}
		{
			const struct { const char *key; uint64_t value; } counts[] = {
				{ "stacks", row->stacks }, { "calls_truncated", row->calls_truncated },
				{ "launches", sums->launches }, { "syncs", sums->syncs },
				{ "blocked_ns", sums->blocked_ns }, { "window_ns", row->window_ns },
				{ "allocations", sums->allocations }, { "alloc_bytes", sums->alloc_bytes },
				{ "copies", sums->copies }, { "copy_bytes", sums->copy_bytes },
			};
			size_t c;

			for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
				put(out, ",\"%s\":%llu", counts[c].key, (unsigned long long)counts[c].value);
		}
		if (r->python_bounds) {
			put_json_u64(out, "kernels", sums->kernels);
			put_json_u64(out, "gpu_max_ns", sums->gpu_max_ns);
			put_json_u64(out, "gpu_start_ns", sums->gpu_start_ns);
			put_json_u64(out, "gpu_end_ns", sums->gpu_end_ns);
			put(out, ",\"verdict\":\"%s\"", cp_gpu_verdict__name(row->verdict));
		}
		put_lit(out, "}");
	}
	put_lit(out, "]");
}

static void json_report(struct cp_sink *out, const struct cp_report *r, struct cp_names *names)
{
	const struct cp_kernel_row *kernels = r->kernels;
	const struct cp_api_row *apis = r->apis;
	const struct cp_mem_row *mem = r->memory;
	char label[128];
	size_t i;
	int bucket;

	put(out, "{\"type\":\"stats\",\"time_ns\":%llu,\"pid\":%u", (unsigned long long)r->time_ns,
	    r->pid);
	put_json_string(out, "comm", r->comm);
	put(out, ",\"final\":%s,\"exited\":%s,\"live_read\":%s", r->final ? "true" : "false",
	    r->exited ? "true" : "false", r->live ? "true" : "false");
	if (r->exited)
		put_json_exit(out, r->exit_code);
	put(out, ",\"kernels\":[");
	for (i = 0; i < r->kernel_count; i++) {
		const char *mangled, *shown = cp_format__kernel_label(names, r->pid, kernels[i].handle,
								     kernels[i].graph, &mangled,
								     label, sizeof(label));

		put(out, "%s{\"handle\":\"0x%llx\"", i ? "," : "", (unsigned long long)kernels[i].handle);
		put_json_string(out, "kernel", shown);
		put_json_string(out, "mangled", mangled);
		put(out, ",\"launches\":%llu,\"threads\":%llu,\"graph\":%s,\"device\":%d}",
		    (unsigned long long)kernels[i].launches,
		    (unsigned long long)kernels[i].threads, kernels[i].graph ? "true" : "false",
		    kernels[i].device);
	}
	put(out, "],\"apis\":[");
	for (i = 0; i < r->api_count; i++) {
		const struct cp_api_row *st = &apis[i];
		bool first = true;

		put(out, "%s{\"api\":\"%s\",\"calls\":%llu", i ? "," : "", cp_api__name(apis[i].api),
		    (unsigned long long)st->calls);
		if (r->latency) {
			put(out, ",\"timed\":%llu,\"errors\":%llu,\"mean_ns\":%llu,\"p50_ns\":%llu,"
			    "\"p90_ns\":%llu,\"p99_ns\":%llu,\"max_ns\":%llu,\"histogram\":[",
			    (unsigned long long)st->timed, (unsigned long long)st->errors,
			    (unsigned long long)(st->timed ? st->total_ns / st->timed : 0),
			    (unsigned long long)cp_histogram__percentile(st->histogram, 0.5),
			    (unsigned long long)cp_histogram__percentile(st->histogram, 0.9),
			    (unsigned long long)cp_histogram__percentile(st->histogram, 0.99),
			    (unsigned long long)cp_histogram__percentile(st->histogram, 1.0));
			for (bucket = 0; bucket < CP_HIST_BUCKETS; bucket++) {
				if (!st->histogram[bucket])
					continue;
				put(out, "%s{\"le_ns\":%llu,\"count\":%llu}", first ? "" : ",",
				    bucket ? 1ull << bucket : 1ull,
				    (unsigned long long)st->histogram[bucket]);
				first = false;
			}
			put(out, "]");
		}
		put(out, "}");
	}
	put(out, "]");
	if (mem)
		put(out, ",\"memory\":{\"live_bytes\":%llu,\"peak_bytes\":%llu,\"live_allocations\":%llu,"
		    "\"vmm_live_bytes\":%llu,\"vmm_peak_bytes\":%llu,\"reserved_bytes\":%llu,"
		    "\"host_live_bytes\":%llu,\"host_live_allocations\":%llu,\"allocations\":%llu,"
		    "\"frees\":%llu,\"unknown_frees\":%llu}",
		    (unsigned long long)mem->live_bytes, (unsigned long long)mem->peak_bytes,
		    (unsigned long long)mem->live_allocations, (unsigned long long)mem->vmm_live_bytes,
		    (unsigned long long)mem->vmm_peak_bytes, (unsigned long long)mem->reserved_bytes,
		    (unsigned long long)mem->host_live_bytes,
		    (unsigned long long)mem->host_live_allocations,
		    (unsigned long long)mem->allocations, (unsigned long long)mem->frees,
		    (unsigned long long)mem->unknown_frees);
	else
		put(out, ",\"memory\":null");
	if (r->nccl_count) {
		put(out, ",\"nccl\":[");
		for (i = 0; i < r->nccl_count; i++) {
			const struct cp_nccl_report_row *n = &r->nccl[i];
			const struct cp_nccl_row *row = &n->row;

			put(out, "%s{\"comm\":\"0x%llx\",\"comm_id\":\"0x%llx\",\"rank\":%d,\"nranks\":%d,"
			    "\"device\":%d,\"op\":\"%s\",\"calls\":%llu,\"errors\":%llu,\"bytes\":%llu,"
			    "\"enqueue_ns\":%llu,\"launches\":%llu,\"copies\":%llu,\"no_gpu_work\":%llu",
			    i ? "," : "",
			    (unsigned long long)row->comm, (unsigned long long)row->comm_id, row->rank,
			    row->nranks, row->device, cp_nccl_op__name(row->op),
			    (unsigned long long)row->calls, (unsigned long long)row->errors,
			    (unsigned long long)row->bytes, (unsigned long long)row->enqueue_ns,
			    (unsigned long long)row->launches, (unsigned long long)row->copies,
			    (unsigned long long)row->no_gpu_work);
			if (r->nccl_gpu)
				put(out, ",\"kernels\":%llu,\"gpu_max_ns\":%llu,\"gpu_start_ns\":%llu,"
				    "\"gpu_end_ns\":%llu", (unsigned long long)n->kernels,
				    (unsigned long long)n->gpu_max_ns, (unsigned long long)n->gpu_start_ns,
				    (unsigned long long)n->gpu_end_ns);
			put(out, "}");
		}
		put(out, "]");
	}
	if (r->python_asked)
		put_python_json(out, r);
	if (r->gpu)
		put_gpu_json(out, r);
	put(out, "}\n");
}

static void json_leak(struct cp_sink *out, const struct cp_leak *leak)
{
	size_t i, f;

	put(out, "{\"type\":\"leak_report\",\"pid\":%u", leak->pid);
	put_json_string(out, "comm", leak->comm);
	put(out, ",\"allocations\":%llu,\"bytes\":%llu,\"sites\":[",
	    (unsigned long long)leak->allocations, (unsigned long long)leak->bytes);
	for (i = 0; i < leak->site_count; i++) {
		const struct cp_leak_site *site = &leak->sites[i];

		put(out, "%s{\"allocations\":%llu,\"bytes\":%llu,\"kind\":\"%s\",\"api\":\"%s\",\"stack\":",
		    i ? "," : "", (unsigned long long)site->allocations,
		    (unsigned long long)site->bytes, cp_mem_kind__name(site->kind),
		    cp_api__name(site->api));
		if (!site->frames) {
			put(out, "null}");
			continue;
		}
		put(out, "[");
		for (f = 0; f < site->frame_count; f++) {
			put(out, "%s", f ? "," : "");
			put_json_value(out, site->frames[f]);
		}
		put(out, "]}");
	}
	put(out, "]}\n");
}

/* ---- the GPU timeline, Xid and traced files ------------------------------------------- */

void cp_json__interval(struct cp_sink *out, const struct cp_gpu_interval *interval,
		       const char *kernel)
{
	put(out, "{\"time_ns\":%llu,\"pid\":%u,\"tid\":%u,\"type\":\"gpu_interval\","
	    "\"api\":\"%s\",\"seq\":%llu,\"function\":\"0x%llx\"",
	    (unsigned long long)interval->done_by_ns, interval->pid, interval->tid,
	    cp_api__name(interval->api), (unsigned long long)interval->seq,
	    (unsigned long long)interval->function);
	put_json_string(out, "kernel", kernel);
	put(out, ",\"graph\":%s,\"stream\":\"0x%llx\",\"device\":%d,\"launch_ns\":%llu,"
	    "\"start_after_ns\":%llu,\"done_by_ns\":%llu,\"evidence\":\"%s\"",
	    interval->graph ? "true" : "false", (unsigned long long)interval->stream,
	    interval->device, (unsigned long long)interval->launch_ns,
	    (unsigned long long)interval->start_after_ns,
	    (unsigned long long)interval->done_by_ns,
	    cp_done_evidence__name(interval->evidence));
	if (interval->evidence != CP_DONE_NONE)
		put(out, ",\"evidence_api\":\"%s\",\"evidence_tid\":%u",
		    cp_api__name(interval->evidence_api), interval->evidence_tid);
	if (interval->nccl_call)
		put(out, ",\"nccl_call\":%u", interval->nccl_call);
	put(out, "}");
}

static void json_interval(struct cp_sink *out, const struct cp_gpu_interval *interval,
			  const char *kernel, uint64_t start_ns)
{
	cp_json__interval(out, interval, kernel);
	put(out, "\n");
}

static void json_xid_in_flight(struct cp_sink *out, const struct cp_xid_event *xid, uint32_t pid,
			       const struct cp_gpu_interval *in_flight, size_t count, bool known,
			       struct cp_names *names)
{
	char label[64];
	size_t i;

	put(out, "{\"time_ns\":%llu,\"pid\":%u,\"type\":\"xid_in_flight\",\"xid\":%u,"
	    "\"known\":%s,\"kernels\":[", (unsigned long long)xid->hdr.time_ns, pid,
	    xid->error_code, known ? "true" : "false");
	for (i = 0; i < count; i++) {
		const struct cp_gpu_interval *k = &in_flight[i];

		put(out, "%s{\"function\":\"0x%llx\"", i ? "," : "",
		    (unsigned long long)k->function);
		put_json_string(out, "kernel", cp_format__kernel_label(names, pid, k->function,
					k->graph, NULL, label, sizeof(label)));
		put(out, ",\"stream\":\"0x%llx\",\"device\":%d,\"tid\":%u,\"launch_ns\":%llu,"
		    "\"start_after_ns\":%llu,\"seq\":%llu}", (unsigned long long)k->stream,
		    k->device, k->tid, (unsigned long long)k->launch_ns,
		    (unsigned long long)k->start_after_ns, (unsigned long long)k->seq);
	}
	put(out, "]}\n");
}

/* A driver or runtime file probed while tracing ran: a "driver_file" record. */
static void json_traced_file(struct cp_sink *out, const struct cp_traced_file *f)
{
	bool live = f->status == CP_ATTACH_ATTACHED && f->probes_live_ns >= f->first_mapped_ns;

	put_lit(out, "{\"type\":\"driver_file\"");
	put_json_string(out, "path", f->path);
	put(out, ",\"runtime\":%s,\"library\":\"%s\",\"dev\":%u,\"inode\":%llu,\"status\":\"%s\","
	    "\"error\":%d,\"probes\":%u,\"first_mapped_ns\":%llu,\"probes_live_ns\":%llu,",
	    f->runtime ? "true" : "false", cp_library__name(f->library), f->dev,
	    (unsigned long long)f->inode,
	    cp_attach_status__name(f->status), f->error, f->probes,
	    (unsigned long long)f->first_mapped_ns, (unsigned long long)f->probes_live_ns);
	if (live)
		put(out, "\"attach_delay_ns\":%llu,",
		    (unsigned long long)(f->probes_live_ns - f->first_mapped_ns));
	else
		put_lit(out, "\"attach_delay_ns\":null,");
	put(out, "\"early_processes\":%u,\"held_processes\":%u,\"unheld_processes\":%u}\n",
	    f->early_processes, f->held_processes,
	    f->early_processes > f->held_processes ? f->early_processes - f->held_processes : 0);
}

/* A new Python stack: its record's fields, then its frames. */
static void json_py_stack_frames(struct cp_sink *out, const struct cp_py_stack_event *stack,
				 const struct cp_py_frame *frames, int depth)
{
	int i;

	cp_json__record_fields(out, (const union cp_event *)stack, NULL, NULL);
	put_lit(out, ",\"frames\":[");
	for (i = 0; i < depth; i++) {
		if (i)
			put_lit(out, ",");
		put_json_py_frame(out, &frames[i]);
	}
	put_str(out, depth < 0 ? "],\"unresolved\":true}\n" : "]}\n");
}

const struct cp_format_ops cp_format_json_ops = {
	.name = "json", .record = json_record, .report = json_report, .leak = json_leak,
	.interval = json_interval, .xid_in_flight = json_xid_in_flight,
	.traced_file = json_traced_file, .py_stack = json_py_stack_frames,
};
