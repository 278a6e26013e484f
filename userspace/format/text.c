// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The text format: a line per record under cp_format__text_header's
 * columns, reports as indented blocks. Names and paths are escaped
 * (cp_text__escape): a record stays one line, and its strings cannot drive
 * the terminal.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "output.h"

/* ---- records ---------------------------------------------------------------------- */

/* " key=value", the details of a record line; key a string literal. */
#define put_field_u64(out, key, v) (put_lit(out, " " key "="), put_u64(out, v))
#define put_field_i64(out, key, v) (put_lit(out, " " key "="), put_i64(out, v))
#define put_field_hex(out, key, v) (put_lit(out, " " key "="), put_hex(out, v))
#define put_field_str(out, key, v) (put_lit(out, " " key "="), put_str(out, v))
#define put_field_dims(out, key, v) (put_lit(out, " " key "="), put_dims(out, v))

/* "(x,y,z)" */
static void put_dims(struct cp_sink *out, const __u32 dims[3])
{
	put_lit(out, "(");
	put_u64(out, dims[0]);
	put_lit(out, ",");
	put_u64(out, dims[1]);
	put_lit(out, ",");
	put_u64(out, dims[2]);
	put_lit(out, ")");
}

static void text_launch(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_event_header *hdr = &event->hdr;
	const struct cp_launch_event *e = &event->launch;

	if (e->flags & CP_LAUNCH_GRAPH) {
		put(out, " graph=0x%llx stream=0x%llx", (unsigned long long)e->function,
		    (unsigned long long)e->stream);
		return;
	}
	if (e->flags & CP_LAUNCH_HOST_FUNC) {
		put(out, " host_function=0x%llx stream=0x%llx", (unsigned long long)e->function,
		    (unsigned long long)e->stream);
		return;
	}
	{
		const struct cp_name_entry *name =
			cp_names__resolve((struct cp_names *)names, hdr->pid, e->function);
		char label[64];

		put_lit(out, " ");
		if (name) {
			const struct cp_name_forms *forms = cp_names__forms(name);

			put_bytes(out, forms->text_display, forms->text_display_len);
		} else {
			put_text_string(out, cp_format__kernel_label(NULL, hdr->pid, e->function,
								    false, NULL, label,
								    sizeof(label)));
		}
	}
	put_field_dims(out, "grid", e->grid);
	put_field_dims(out, "block", e->block);
	put_field_u64(out, "smem", e->shared_mem_bytes);
	put_field_hex(out, "stream", e->stream);
	if (e->flags & CP_LAUNCH_CONFIG_FAULT)
		put(out, " (config unreadable)");
	if (e->nccl_call)
		put_field_u64(out, "nccl", e->nccl_call);
}

static void text_alloc(struct cp_sink *out, const union cp_event *event,
		       const struct cp_names *names)
{
	const struct cp_alloc_event *e = &event->alloc;

	put_field_hex(out, "ptr", e->ptr);
	put_field_u64(out, "bytes", e->bytes);
	put_field_str(out, "kind", cp_mem_kind__name(e->kind));
	if (e->result) {
		put_field_i64(out, "failed", e->result);
	}
}

static void text_free(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	put(out, " ptr=0x%llx kind=%s", (unsigned long long)event->free.ptr,
	    cp_mem_kind__name(event->free.kind));
}

static void text_copy(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_copy_event *e = &event->copy;

	put_lit(out, " ");
	put_str(out, cp_copy_dir__name(e->direction));
	put_field_u64(out, "bytes", e->bytes);
	put_field_hex(out, "dst", e->dst);
	put_field_hex(out, "src", e->src);
	if (e->async) {
		put_field_hex(out, "stream", e->stream);
	}
	if (e->count != 1)
		put(out, " count=%u", e->count);
	if (e->nccl_call)
		put_field_u64(out, "nccl", e->nccl_call);
}

static void text_sync(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	if (event->sync.kind == CP_SYNC_CONTEXT && !event->sync.handle)
		put(out, " context");
	else if (event->sync.kind == CP_SYNC_COPY)
		put(out, " blocking copy returned");
	else {
		put_lit(out, " ");
		put_str(out, cp_sync_kind__name(event->sync.kind));
		put_lit(out, "=");
		put_hex(out, event->sync.handle);
	}
	if (event->sync.kind == CP_SYNC_QUERY_STREAM || event->sync.kind == CP_SYNC_QUERY_EVENT ||
	    event->sync.result)
		put_field_i64(out, "result", event->sync.result);
	put_lit(out, " waited=");
	put_u64(out, event->hdr.time_ns > event->sync.entry_ns ?
		      (event->hdr.time_ns - event->sync.entry_ns) / 1000 : 0);
	put_lit(out, "us");
}

static void text_memset(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_memset_event *e = &event->memset;

	put(out, " dst=0x%llx bytes=%llu value=%u size=%u", (unsigned long long)e->dst,
	    (unsigned long long)e->bytes, e->value, e->element_size);
	if (e->pitch)
		put(out, " pitch=%llu", (unsigned long long)e->pitch);
	if (e->async)
		put(out, " stream=0x%llx", (unsigned long long)e->stream);
}

static void text_event(struct cp_sink *out, const union cp_event *event,
		       const struct cp_names *names)
{
	put(out, " %s event=0x%llx %s=0x%llx", cp_event_op__name(event->event.op),
	    (unsigned long long)event->event.event, cp_format__event_scope(event->event.op),
	    (unsigned long long)event->event.stream);
}

static void text_module(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_module_event *e = &event->module;

	put(out, " %s handle=0x%llx", cp_module_op__name(e->op), (unsigned long long)e->handle);
	if (e->path_len) {
		put(out, " path=");
		put_text_string(out, e->path);
	}
	if (e->result)
		put(out, " failed=%d", e->result);
}

static void text_vmm(struct cp_sink *out, const union cp_event *event,
		     const struct cp_names *names)
{
	const struct cp_vmm_event *e = &event->vmm;

	put(out, " %s bytes=%llu", cp_vmm_op__name(e->op), (unsigned long long)e->bytes);
	if (e->op == CP_VMM_CREATE || e->op == CP_VMM_RELEASE || e->op == CP_VMM_RETAIN ||
	    e->op == CP_VMM_MAP)
		put(out, " handle=0x%llx", (unsigned long long)e->handle);
	if (e->op != CP_VMM_CREATE && e->op != CP_VMM_RELEASE)
		put(out, " ptr=0x%llx", (unsigned long long)e->ptr);
	if (e->physical_bytes)
		put(out, " physical=%llu", (unsigned long long)e->physical_bytes);
	if (e->result)
		put(out, " failed=%d", e->result);
}

static void text_context(struct cp_sink *out, const union cp_event *event,
			 const struct cp_names *names)
{
	put(out, " %s context=0x%llx device=%d", cp_context_op__name(event->context.op),
	    (unsigned long long)event->context.context, event->context.device);
	if (event->context.result)
		put(out, " failed=%d", event->context.result);
}

static void text_attach(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names)
{
	const struct cp_attach_event *e = &event->attach;

	put(out, " ");
	put_text_string(out, e->name);
	put(out, " %s", cp_attach_status__name(e->status));
	if (e->status == CP_ATTACH_ATTACHED)
		put(out, " probes=%u after=%.3fms", e->probes,
		    (e->probes_live_ns - e->hdr.time_ns) / 1e6);
	if (e->flags & CP_ATTACH_HELD)
		put(out, " (held)");
	if (e->status == CP_ATTACH_FAILED)
		put(out, " error=%s", cp_format__errno_text(e->error));
}

static void text_name(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_name_event *e = &event->name;
	char display[1024];

	if (e->result) {
		put(out, " failed=%d", e->result);
		return;
	}
	if (e->hdr.api == CP_API_cuKernelGetFunction) {
		put(out, " function=0x%llx from kernel=0x%llx", (unsigned long long)e->handle,
		    (unsigned long long)e->alias_of);
		return;
	}
	cp_demangle(e->name, display, sizeof(display));
	put(out, " handle=0x%llx ", (unsigned long long)e->handle);
	put_text_string(out, display);
	if (cp_name_event__from_driver_record(e))
		put(out, " (the driver's record)");
}

static void text_proc(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_proc_event *e = &event->proc;

	if (e->kind == CP_PROC_FORK)
		put(out, " child=%u", e->child_pid);
	else if (e->kind == CP_PROC_EXIT && cp_exit__decode(e->exit_code).signal)
		put(out, " exit signal=%d", cp_exit__decode(e->exit_code).signal);
	else if (e->kind == CP_PROC_EXIT)
		put(out, " exit status=%d", cp_exit__decode(e->exit_code).status);
}

static void text_ret(struct cp_sink *out, const union cp_event *event,
		     const struct cp_names *names)
{
	const struct cp_event_header *hdr = &event->hdr;

	put(out, " returned result=%d after %lluus", event->ret.result,
	    (unsigned long long)((hdr->time_ns - event->ret.entry_ns) / 1000));
}

static void text_xid(struct cp_sink *out, const union cp_event *event,
		     const struct cp_names *names)
{
	put(out, " Xid %u process=%u dev=", event->xid.error_code, cp_xid__process(&event->xid));
	put_text_string(out, event->xid.dev);
	put(out, " ");
	put_text_string(out, event->xid.msg);
}

static void text_nccl(struct cp_sink *out, const union cp_event *event,
		      const struct cp_names *names)
{
	const struct cp_nccl_event *e = &event->nccl;

	put_lit(out, " ");
	put_str(out, cp_nccl_op__name(e->op));
	if (CP_NCCL_MOVES_DATA(e->op)) {
		put_field_u64(out, "count", e->count);
		put_lit(out, " ");
		put_str(out, cp_nccl_datatype__name(e->datatype));
		put_field_u64(out, "bytes", e->bytes);
		if (e->op == CP_NCCL_ALL_REDUCE || e->op == CP_NCCL_REDUCE ||
		    e->op == CP_NCCL_REDUCE_SCATTER)
			put_field_str(out, "op", cp_nccl_redop__name(e->redop));
		if (e->root >= 0 && (e->op == CP_NCCL_SEND || e->op == CP_NCCL_RECV))
			put_field_i64(out, "peer", e->root);
		else if (e->root >= 0)
			put_field_i64(out, "root", e->root);
		put_field_hex(out, "stream", e->stream);
	}
	if (e->comm) {
		put_field_hex(out, "comm", e->comm);
		if (e->rank >= 0 || e->nranks >= 0)
			put(out, " rank=%d/%d", e->rank, e->nranks);
		if (e->comm_id)
			put_field_hex(out, "id", e->comm_id);
		if (e->device >= 0)
			put_field_i64(out, "device", e->device);
	}
	if (e->parent)
		put_field_hex(out, "parent", e->parent);
	put_field_u64(out, "seq", e->seq);
	if (e->group && e->group != e->seq)
		put_field_u64(out, "group", e->group);
	if (e->launches)
		put_field_u64(out, "launches", e->launches);
	if (e->copies)
		put_field_u64(out, "copies", e->copies);
	put(out, " took=%lluus", (unsigned long long)((e->hdr.time_ns - e->entry_ns) / 1000));
	if (e->result)
		put_field_i64(out, "failed", e->result);
}

static void text_rt_launch(struct cp_sink *out, const union cp_event *event,
			   const struct cp_names *names)
{
	const struct cp_rt_launch_event *e = &event->rt_launch;
	const struct cp_name_entry *name = cp_names__lookup_stub(names, e->hdr.pid, e->stub);

	put(out, " ");
	if (name)
		put_text_string(out, name->display);
	else
		put(out, "<unnamed stub 0x%llx>", (unsigned long long)e->stub);
	put_field_dims(out, "grid", e->grid);
	put_field_dims(out, "block", e->block);
	put(out, " smem=%u stream=0x%llx", e->shared_mem_bytes, (unsigned long long)e->stream);
}

static void text_py_stack(struct cp_sink *out, const union cp_event *event,
			  const struct cp_names *names)
{
	put(out, " python stack 0x%llx depth=%u%s", (unsigned long long)event->py_stack.stack_id,
	    event->py_stack.depth, event->py_stack.flags & CP_PY_STACK_TRUNCATED ? " (cut)" : "");
}

/* Each record type's own details: text_MEMBER for each line of CP_RECORD_TYPES. */
typedef void (*text_record_writer)(struct cp_sink *out, const union cp_event *event,
				   const struct cp_names *names);
#define TEXT_WRITER(NAME, value, member, type, name) [CP_EV_##NAME] = text_##member,
static const text_record_writer text_records[CP_EV_TYPE_MAX] = { CP_RECORD_TYPES(TEXT_WRITER) };
#undef TEXT_WRITER

/*
 * --python: the call's innermost Python frame, " py FILE:LINE FUNCTION"
 * (the stack cut at CP_PY_STACK_MAX frames: "(cut)" after; not resolved:
 * its id).
 */
static void text_py_frame(struct cp_sink *out, struct cp_python *python, uint32_t pid,
			  uint64_t stack_id)
{
	struct cp_py_frame inner;
	struct cp_py_stack_info info;

	if (cp_python__frames(python, pid, stack_id, &inner, 1, &info) < 1) {
		put(out, " py <stack 0x%llx>", (unsigned long long)stack_id);
		return;
	}
	put_lit(out, " py ");
	put_str(out, inner.file);
	put(out, ":%d ", inner.line);
	put_str(out, inner.function);
	if (info.truncated)
		put_lit(out, " (cut)");
}

static void text_record(struct cp_sink *out, const union cp_event *event,
			const struct cp_names *names, struct cp_python *python, uint64_t start_ns)
{
	const struct cp_event_header *hdr = &event->hdr;
	uint64_t rel = hdr->time_ns >= start_ns ? hdr->time_ns - start_ns : 0;
	uint64_t micros = rel % 1000000000ull / 1000;
	const char *api = cp_api__name(hdr->api);
	size_t api_len = strlen(api);
	char fraction[7];
	int i;

	/* "%5llu.%06llu %7u %7u %-26s", by hand: this line is the hot path. */
	put_u64_width(out, rel / 1000000000ull, 5);
	for (i = 5; i >= 0; i--, micros /= 10)
		fraction[i] = (char)('0' + micros % 10);
	fraction[6] = '\0';
	put_lit(out, ".");
	put_bytes(out, fraction, 6);
	put_lit(out, " ");
	put_u64_width(out, hdr->pid, 7);
	put_lit(out, " ");
	put_u64_width(out, hdr->tid, 7);
	put_lit(out, " ");
	put_bytes(out, api, api_len);
	if (api_len < 26)
		put_spaces(out, 26 - api_len);
	if (hdr->type < CP_EV_TYPE_MAX && text_records[hdr->type])
		text_records[hdr->type](out, event, names);
	if (python && cp_event__py_stack(event))
		text_py_frame(out, python, hdr->pid, cp_event__py_stack(event));
}

/* ---- reports (cuprobe stats) ---------------------------------------------------------- */

const char *cp_format__bytes(uint64_t bytes, bool compact, char *buf, size_t len)
{
	static const struct {
		uint64_t size;
		const char *name, *letter;
	} units[] = { { 1ull << 30, "GiB", "G" }, { 1ull << 20, "MiB", "M" }, { 1ull << 10, "KiB", "K" } };
	size_t i;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (bytes >= units[i].size) {
			snprintf(buf, len, compact ? "%.1f%s" : "%.2f %s", bytes / (double)units[i].size,
				 compact ? units[i].letter : units[i].name);
			return buf;
		}
	snprintf(buf, len, compact ? "%llu" : "%llu B", (unsigned long long)bytes);
	return buf;
}

static void human_ns(unsigned long long ns, char *buf, size_t len)
{
	if (!ns)
		snprintf(buf, len, "-");
	else if (ns >= 1000000000ull)
		snprintf(buf, len, "%.1fs", ns / 1e9);
	else if (ns >= 1000000ull)
		snprintf(buf, len, "%.1fms", ns / 1e6);
	else if (ns >= 1000ull)
		snprintf(buf, len, "%.1fus", ns / 1e3);
	else
		snprintf(buf, len, "%lluns", ns);
}

#define REPORT_KERNELS_SHOWN 10

/* The share of part in whole, as a percentage (0 for an empty whole). */
static double share(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static const char *verdict_reason(enum cp_gpu_verdict verdict)
{
	switch (verdict) {
	case CP_GPU_VERDICT_GPU_BOUND: return "the CPU waited on the GPU at least half the time";
	case CP_GPU_VERDICT_LAUNCH_BOUND: return "the GPU waited for the CPU: its queue drained";
	case CP_GPU_VERDICT_MIXED: return "neither waited on the other most of the time";
	default: return "no synchronization evidence yet";
	}
}

/* --timeline: GPU busy time bounds, sync waits and the verdict, per process and stream. */
static void put_gpu_text(struct cp_sink *out, const struct cp_report *r)
{
	const struct cp_gpu_summary *g = r->gpu;
	uint64_t window = g->window_end_ns > g->window_start_ns ? g->window_end_ns - g->window_start_ns : 0;
	size_t i;

	put(out, "  gpu time (bounded from host evidence): window %.6f s, %llu launches (%llu bounded, "
	    "%llu pending, %llu dropped)\n", window / 1e9, (unsigned long long)g->launches,
	    (unsigned long long)g->bounded, (unsigned long long)g->pending,
	    (unsigned long long)g->dropped);
	put(out, "    busy at least %.6f s (%.1f%%), at most %.6f s (%.1f%%); waited in syncs %.6f s "
	    "(%llu of %llu syncs waited for launches, %llu found them done)\n", g->busy_min_ns / 1e9,
	    share(g->busy_min_ns, window), g->busy_max_ns / 1e9, share(g->busy_max_ns, window),
	    g->sync_wait_ns / 1e9, (unsigned long long)g->syncs_waited,
	    (unsigned long long)g->syncs, (unsigned long long)g->waits_immediate);
	put(out, "    verdict: %s (%s)\n", cp_gpu_verdict__name(g->verdict), verdict_reason(g->verdict));
	for (i = 0; i < r->gpu_stream_count; i++) {
		const struct cp_gpu_stream *st = &r->gpu_streams[i];

		if (st->per_thread_tid)
			put(out, "    per-thread stream of tid %u", st->per_thread_tid);
		else if (st->stream == 0 || st->stream == 1)
			put(out, "    legacy default stream");
		else
			put(out, "    stream 0x%llx", (unsigned long long)st->stream);
		put(out, " (device %d): %llu launches, busy at most %.6f s, waited in its syncs %.6f s "
		    "(%llu of %llu)\n", st->device, (unsigned long long)st->summary.launches,
		    st->summary.busy_max_ns / 1e9, st->summary.sync_wait_ns / 1e9,
		    (unsigned long long)st->summary.syncs_waited,
		    (unsigned long long)st->summary.syncs);
	}
	for (i = 0; i < r->gpu_device_count; i++) {
		const struct cp_gpu_summary *d = &r->gpu_devices[i].summary;
		uint64_t span = d->window_end_ns > d->window_start_ns ?
				d->window_end_ns - d->window_start_ns : 0;

		put(out, "    device %d: %llu launches, busy at least %.6f s (%.1f%%), at most %.6f s "
		    "(%.1f%%) of %.6f s; waited in syncs %.6f s; verdict: %s\n",
		    r->gpu_devices[i].device, (unsigned long long)d->launches, d->busy_min_ns / 1e9,
		    share(d->busy_min_ns, span), d->busy_max_ns / 1e9, share(d->busy_max_ns, span),
		    span / 1e9, d->sync_wait_ns / 1e9, cp_gpu_verdict__name(d->verdict));
	}
}

/* The NCCL table: per communicator (its rank of its size, its id) and op. */
static void put_nccl_text(struct cp_sink *out, const struct cp_report *r)
{
	char bytes[32], enqueue[32], gpu[32], comm[96];
	uint64_t last_comm = ~0ull;
	size_t i;

	put(out, "  nccl calls:\n    %-44s %-15s %10s %11s %10s %9s %9s %9s", "communicator", "op",
	    "calls", "bytes", "enqueue", "launches", "copies", "no-work");
	if (r->nccl_gpu)
		put(out, " %9s %10s", "kernels", "gpu<=");
	put(out, "\n");
	for (i = 0; i < r->nccl_count; i++) {
		const struct cp_nccl_report_row *n = &r->nccl[i];
		const struct cp_nccl_row *row = &n->row;

		if (row->comm != last_comm) {
			if (!row->comm)
				snprintf(comm, sizeof(comm), "(groups)");
			else if (row->comm_id)
				snprintf(comm, sizeof(comm), "0x%llx %d/%d id 0x%llx",
					 (unsigned long long)row->comm, row->rank, row->nranks,
					 (unsigned long long)row->comm_id);
			else
				snprintf(comm, sizeof(comm), "0x%llx %d/%d", (unsigned long long)row->comm,
					 row->rank, row->nranks);
			last_comm = row->comm;
		} else {
			comm[0] = '\0';
		}
		cp_format__bytes(row->bytes, false, bytes, sizeof(bytes));
		human_ns(row->calls ? row->enqueue_ns / row->calls : 0, enqueue, sizeof(enqueue));
		put(out, "    %-44s %-15s %10llu %11s %10s %9llu %9llu %9llu", comm,
		    cp_nccl_op__name(row->op), (unsigned long long)row->calls,
		    CP_NCCL_MOVES_DATA(row->op) ? bytes : "-", enqueue,
		    (unsigned long long)row->launches, (unsigned long long)row->copies,
		    (unsigned long long)row->no_gpu_work);
		if (r->nccl_gpu) {
			human_ns(n->gpu_max_ns, gpu, sizeof(gpu));
			put(out, " %9llu %10s", (unsigned long long)n->kernels, n->kernels ? gpu : "-");
		}
		if (row->errors)
			put(out, " (%llu failed)", (unsigned long long)row->errors);
		put(out, "\n");
	}
}

/* Python lines shown in a text report, at most (JSON has them all). */
#define PYTHON_LINES_SHOWN 20

/* A share of the window as "41%", "<1%" or "-". */
static void percent_of(uint64_t part, uint64_t whole, char *buf, size_t len)
{
	if (!part || !whole)
		snprintf(buf, len, "-");
	else if (part * 100 < whole)
		snprintf(buf, len, "<1%%");
	else
		snprintf(buf, len, "%llu%%", (unsigned long long)(part * 100 / whole));
}

/*
 * --python: a line per Python line, "FILE:LINE FUNCTION" then its counts,
 * so that "train.py:88 step ... blocked 2.1s 41% ... gpu-bound" is one line.
 */
static void put_python_text(struct cp_sink *out, const struct cp_report *r)
{
	char blocked[32], share[16], gpu[32], gpu_share[16], bytes[32], site[512];
	size_t i;

	put(out, "  python lines (%s):\n    %-48s %9s %8s %11s %6s",
	    r->python_own_code ? "innermost frame of the program's own code" :
	    "innermost frame", "line", "launches", "syncs", "blocked", "%wall");
	if (r->python_bounds)
		put(out, " %8s %10s %6s", "kernels", "gpu<=", "%wall");
	put(out, " %7s %10s", "allocs", "bytes");
	if (r->python_bounds)
		put(out, "  verdict");
	put(out, "\n");
	for (i = 0; i < r->python_count && i < PYTHON_LINES_SHOWN; i++) {
		const struct cp_py_line_row *row = &r->python[i];
		const struct cp_py_line_sums *sums = &row->sums;
		const char *file = strrchr(row->file, '/') ? strrchr(row->file, '/') + 1 : row->file;

		if (row->resolved)
			snprintf(site, sizeof(site), "%s:%d %s", file, row->line, row->function);
		else
			snprintf(site, sizeof(site), "%s", row->no_stack ? "(no Python stack)" :
				 "(stack not resolved)");
		human_ns(sums->blocked_ns, blocked, sizeof(blocked));
		percent_of(sums->blocked_ns, row->window_ns, share, sizeof(share));
		put(out, "    %-48s %9llu %8llu %11s %6s", site, (unsigned long long)sums->launches,
		    (unsigned long long)sums->syncs, blocked, share);
		if (r->python_bounds) {
			human_ns(sums->gpu_max_ns, gpu, sizeof(gpu));
			percent_of(sums->gpu_max_ns, row->window_ns, gpu_share, sizeof(gpu_share));
			put(out, " %8llu %10s %6s", (unsigned long long)sums->kernels, gpu, gpu_share);
		}
		cp_format__bytes(sums->alloc_bytes, true, bytes, sizeof(bytes));
		put(out, " %7llu %10s", (unsigned long long)sums->allocations,
		    sums->allocations ? bytes : "-");
		if (r->python_bounds)
			put(out, "  %s", row->verdict == CP_GPU_VERDICT_UNKNOWN ? "-" :
			    cp_gpu_verdict__name(row->verdict));
		if (row->calls_truncated)
			put(out, " (%llu calls' stacks cut at %d frames)",
			    (unsigned long long)row->calls_truncated, CP_PY_STACK_MAX);
		put(out, "\n");
	}
	if (r->python_count > PYTHON_LINES_SHOWN)
		put(out, "    (%zu more lines; --json lists them all)\n",
		    r->python_count - PYTHON_LINES_SHOWN);
}

static void text_report(struct cp_sink *out, const struct cp_report *r, struct cp_names *names)
{
	const struct cp_kernel_row *kernels = r->kernels;
	const struct cp_api_row *apis = r->apis;
	const struct cp_mem_row *mem = r->memory;
	char label[128], a[32], b[32], c[32], d[32];
	size_t i;

	put(out, "== pid %u (", r->pid);
	put_text_string(out, r->comm ? r->comm : "?");
	if (r->exited && cp_exit__decode(r->exit_code).signal)
		put(out, ") exited on signal %d, at %.3f s ==\n", cp_exit__decode(r->exit_code).signal,
		    r->since_start_s);
	else if (r->exited)
		put(out, ") exited with status %d, at %.3f s ==\n", cp_exit__decode(r->exit_code).status,
		    r->since_start_s);
	else
		put(out, ")%s at %.3f s%s ==\n", r->final ? " when tracing stopped," : "",
		    r->since_start_s,
		    r->live ? " (read while it runs: tables may differ by the calls made during the read)" : "");
	put(out, "  kernels: %zu%s\n", r->kernel_count,
	    r->kernel_count > REPORT_KERNELS_SHOWN ? " (top 10 by launches)" : "");
	if (r->kernel_count)
		put(out, "    %12s %16s  %s\n", "launches", "threads", "kernel");
	for (i = 0; i < r->kernel_count && i < REPORT_KERNELS_SHOWN; i++) {
		const char *shown = cp_format__kernel_label(names, r->pid, kernels[i].handle,
							    kernels[i].graph, NULL, label,
							    sizeof(label));

		put(out, "    %12llu %16llu  ", (unsigned long long)kernels[i].launches,
		    (unsigned long long)kernels[i].threads);
		put_text_string(out, shown);
		put(out, "\n");
	}
	put(out, "  api calls:\n");
	if (r->latency)
		put(out, "    %12s %8s %9s %9s %9s %9s  %s\n", "calls", "errors", "mean", "p50<=",
		    "p99<=", "max<=", "api");
	else if (r->api_count)
		put(out, "    %12s  %s\n", "calls", "api");
	for (i = 0; i < r->api_count; i++) {
		const struct cp_api_row *st = &apis[i];

		if (!r->latency) {
			put(out, "    %12llu  %s\n", (unsigned long long)st->calls,
			    cp_api__name(apis[i].api));
			continue;
		}
		human_ns(st->timed ? st->total_ns / st->timed : 0, a, sizeof(a));
		human_ns(cp_histogram__percentile(st->histogram, 0.5), b, sizeof(b));
		human_ns(cp_histogram__percentile(st->histogram, 0.99), c, sizeof(c));
		human_ns(cp_histogram__percentile(st->histogram, 1.0), d, sizeof(d));
		put(out, "    %12llu %8llu %9s %9s %9s %9s  %s\n", (unsigned long long)st->calls,
		    (unsigned long long)st->errors, a, b, c, d, cp_api__name(apis[i].api));
	}
	if (mem) {
		cp_format__bytes(mem->live_bytes, false, a, sizeof(a));
		cp_format__bytes(mem->peak_bytes, false, b, sizeof(b));
		put(out, "  device memory: %s live in %llu allocations, peak %s", a,
		    (unsigned long long)mem->live_allocations, b);
		if (mem->vmm_live_bytes || mem->vmm_peak_bytes || mem->reserved_bytes) {
			cp_format__bytes(mem->vmm_live_bytes, false, c, sizeof(c));
			cp_format__bytes(mem->reserved_bytes, false, d, sizeof(d));
			put(out, " (VMM physical %s live, %s of addresses reserved)", c, d);
		}
		put(out, "; %llu allocations, %llu frees", (unsigned long long)mem->allocations,
		    (unsigned long long)mem->frees);
		if (mem->unknown_frees)
			put(out, " (%llu of pointers allocated before tracing)",
			    (unsigned long long)mem->unknown_frees);
		cp_format__bytes(mem->host_live_bytes, false, c, sizeof(c));
		put(out, "\n  pinned host memory: %s live in %llu allocations\n", c,
		    (unsigned long long)mem->host_live_allocations);
	}
	if (r->nccl_count)
		put_nccl_text(out, r);
	if (r->python_count)
		put_python_text(out, r);
	if (r->gpu)
		put_gpu_text(out, r);
}

static void text_leak(struct cp_sink *out, const struct cp_leak *leak)
{
	size_t i, f;

	put(out, "  LEAK: %llu device allocations, %llu bytes still live when pid %u (",
	    (unsigned long long)leak->allocations, (unsigned long long)leak->bytes, leak->pid);
	put_text_string(out, leak->comm ? leak->comm : "?");
	put(out, ") exited\n");
	for (i = 0; i < leak->site_count; i++) {
		const struct cp_leak_site *site = &leak->sites[i];

		put(out, "    %llu bytes in %llu allocations (%s, %s)%s\n",
		    (unsigned long long)site->bytes, (unsigned long long)site->allocations,
		    cp_mem_kind__name(site->kind), cp_api__name(site->api),
		    site->frames ? "" : leak->stacks ? " stack not captured" : " (--stacks shows where)");
		for (f = 0; site->frames && f < site->frame_count; f++) {
			put(out, "        #%zu ", f);
			put_text_string(out, site->frames[f]);
			put(out, "\n");
		}
	}
}

/* ---- the GPU timeline and Xid ----------------------------------------------------------- */

static void text_interval(struct cp_sink *out, const struct cp_gpu_interval *interval,
			  const char *kernel, uint64_t start_ns)
{
	put(out, "%12.6f %7u %7u %-26s ", interval->done_by_ns > start_ns ?
	    (interval->done_by_ns - start_ns) / 1e9 : 0.0, interval->pid, interval->tid, "gpu");
	put_text_string(out, kernel);
	if (interval->evidence == CP_DONE_NONE) {
		put(out, " stream=0x%llx launched=%.6f: no bound (dropped from a full queue)\n",
		    (unsigned long long)interval->stream,
		    interval->launch_ns > start_ns ? (interval->launch_ns - start_ns) / 1e9 : 0.0);
		return;
	}
	put(out, " stream=0x%llx ran within [%.6f, %.6f] (%.1f us) by %s\n",
	    (unsigned long long)interval->stream,
	    interval->start_after_ns > start_ns ? (interval->start_after_ns - start_ns) / 1e9 : 0.0,
	    interval->done_by_ns > start_ns ? (interval->done_by_ns - start_ns) / 1e9 : 0.0,
	    (interval->done_by_ns - interval->start_after_ns) / 1e3,
	    cp_done_evidence__name(interval->evidence));
}

static void text_xid_in_flight(struct cp_sink *out, const struct cp_xid_event *xid, uint32_t pid,
			       const struct cp_gpu_interval *in_flight, size_t count, bool known,
			       struct cp_names *names)
{
	char label[64];
	size_t i;

	if (!known) {
		put(out, "  Xid %u: pid %u was not traced: its kernels in flight are unknown\n",
		    xid->error_code, pid);
		return;
	}
	put(out, "  Xid %u: pid %u had %zu kernels in flight (launched, not known complete)%s\n",
	    xid->error_code, pid, count, count ? ":" : "");
	for (i = 0; i < count; i++) {
		const struct cp_gpu_interval *k = &in_flight[i];

		put(out, "    stream 0x%llx: ", (unsigned long long)k->stream);
		put_text_string(out, cp_format__kernel_label(names, pid, k->function, k->graph, NULL,
							     label, sizeof(label)));
		put(out, " (launch #%llu by tid %u)\n", (unsigned long long)k->seq, k->tid);
	}
}

/* Traced files are said on stderr in text (the session's lines), not in the output. */
const struct cp_format_ops cp_format_text_ops = {
	.name = "text", .header = "        TIME     PID     TID API                        DETAILS",
	.record = text_record, .report = text_report, .leak = text_leak,
	.interval = text_interval, .xid_in_flight = text_xid_in_flight,
};
