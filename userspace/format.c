// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Output formats: one text line or one JSON object per record, written into
 * a caller's buffer (the library never prints). The JSON schema is in the
 * README; handles and addresses are hex strings, since JSON numbers lose
 * precision past 2^53.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cuprobe.h"

/*
 * Where a formatter writes: a caller's fixed buffer (one record), or a
 * growable cp_text (reports). One put() for both.
 */
struct out_buf {
	char *buf;
	size_t len;
	size_t used;
	bool overflow;
	struct cp_text *text;  /* growable: buf/len/used mirror it */
};

static bool grow(struct out_buf *out, size_t need)
{
	struct cp_text *text = out->text;
	size_t capacity = text->capacity ? text->capacity : 1024;
	char *bigger;

	while (capacity < need)
		capacity *= 2;
	bigger = realloc(text->data, capacity);
	if (!bigger)
		return false;
	text->data = out->buf = bigger;
	text->capacity = out->len = capacity;
	return true;
}

static void put(struct out_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out_buf *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (out->overflow)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = out->len > out->used ?
		    vsnprintf(out->buf + out->used, out->len - out->used, fmt, ap) : -1;
		va_end(ap);
		if (n >= 0 && (size_t)n < out->len - out->used)
			break;
		if (!out->text || !grow(out, out->used + (n > 0 ? (size_t)n : 0) + 256)) {
			out->overflow = true;
			return;
		}
	}
	out->used += n;
	if (out->text)
		out->text->len = out->used;
}

void cp_text__clear(struct cp_text *text)
{
	text->len = 0;
	text->failed = false;
	if (text->data)
		text->data[0] = '\0';
}

void cp_text__free(struct cp_text *text)
{
	free(text->data);
	memset(text, 0, sizeof(*text));
}

/* An out_buf appending to text. */
static struct out_buf text_out(struct cp_text *text)
{
	struct out_buf out = { .buf = text->data, .len = text->capacity, .used = text->len,
			       .text = text };

	return out;
}

static int text_done(struct out_buf *out)
{
	if (out->overflow) {
		out->text->failed = true;
		return -ENOMEM;
	}
	return 0;
}

/*
 * The length of the well-formed UTF-8 sequence that starts at p (2 to 4),
 * or 0: the ranges of the second byte rule out overlong forms, surrogates
 * (U+D800..U+DFFF) and code points past U+10FFFF (Unicode, table 3-7).
 */
static size_t utf8_sequence_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (*p >= 0xc2 && *p <= 0xdf)
		n = 2;
	else if (*p >= 0xe0 && *p <= 0xef)
		n = 3;
	else if (*p >= 0xf0 && *p <= 0xf4)
		n = 4;
	else
		return 0;
	if (*p == 0xe0)
		lo = 0xa0;
	else if (*p == 0xed)
		hi = 0x9f;
	else if (*p == 0xf0)
		lo = 0x90;
	else if (*p == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	/* A NUL fails here first, so nothing past the string is read. */
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/*
 * Valid UTF-8 goes out as it is. A byte that is not part of valid UTF-8 is
 * written as \u00XX of its value, so the output is always valid UTF-8 (and
 * JSON); a decoder then reads it as U+0080..U+00FF, not as the raw byte.
 */
int cp_json__escape(const char *src, char *buf, size_t len)
{
	size_t used = 0, step;
	const unsigned char *p;

	if (!src || !buf || !len)
		return -EINVAL;
	for (p = (const unsigned char *)src; *p; p += step) {
		char piece[8];
		size_t n;

		step = 1;
		switch (*p) {
		case '"': strcpy(piece, "\\\""); break;
		case '\\': strcpy(piece, "\\\\"); break;
		case '\n': strcpy(piece, "\\n"); break;
		case '\r': strcpy(piece, "\\r"); break;
		case '\t': strcpy(piece, "\\t"); break;
		default:
			if (*p >= 0x80)
				step = utf8_sequence_len(p);
			if (*p < 0x20 || *p == 0x7f || !step) {
				snprintf(piece, sizeof(piece), "\\u%04x", *p);
				step = 1;
			} else {
				memcpy(piece, p, step);
				piece[step] = '\0';
			}
		}
		n = strlen(piece);
		if (used + n >= len)
			return -ENOSPC;
		memcpy(buf + used, piece, n);
		used += n;
	}
	buf[used] = '\0';
	return (int)used;
}

/* The one JSON string writer: a quoted, escaped value, or null. */
static void put_json_value(struct out_buf *out, const char *value)
{
	char escaped[CP_NAME_MAX * 8];

	if (!value) {
		put(out, "null");
		return;
	}
	if (cp_json__escape(value, escaped, sizeof(escaped)) < 0) {
		out->overflow = true;
		return;
	}
	put(out, "\"%s\"", escaped);
}

static void put_json_string(struct out_buf *out, const char *key, const char *value)
{
	put(out, ",\"%s\":", key);
	put_json_value(out, value);
}

/*
 * A name or path in a text line: control bytes (< 0x20, 0x7f) as \xNN, so
 * that a record stays one line and its strings cannot drive the terminal.
 */
static void put_text_string(struct out_buf *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	while (*p) {
		for (n = 0; p[n] >= 0x20 && p[n] != 0x7f; n++)
			;
		if (n)
			put(out, "%.*s", (int)n, (const char *)p);
		p += n;
		if (*p)
			put(out, "\\x%02x", *p++);
	}
}

int cp_text__escape(const char *src, char *buf, size_t len)
{
	struct out_buf out = { .buf = buf, .len = len };

	if (!src || !buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	put_text_string(&out, src);
	return out.overflow ? -ENOSPC : (int)out.used;
}

static void put_json_dims(struct out_buf *out, const char *key, const __u32 dims[3])
{
	put(out, ",\"%s\":[%u,%u,%u]", key, dims[0], dims[1], dims[2]);
}

/* The one decoder of a wait status (as the kernel keeps it): "signal" or "exit_status". */
static void put_json_exit(struct out_buf *out, int wait_status)
{
	if (WIFSIGNALED(wait_status))
		put(out, ",\"signal\":%d", WTERMSIG(wait_status));
	else
		put(out, ",\"exit_status\":%d", WEXITSTATUS(wait_status));
}

const char *cp_format__kernel_label(struct cp_names *names, uint32_t pid, uint64_t handle,
				    bool graph, const char **mangled, char *buf, size_t len)
{
	const struct cp_name_entry *name = graph ? NULL : cp_names__resolve(names, pid, handle);

	if (mangled)
		*mangled = name ? name->mangled : NULL;
	if (name)
		return name->display;
	snprintf(buf, len, graph ? "<graph 0x%llx>" : "<unnamed function 0x%llx>",
		 (unsigned long long)handle);
	return buf;
}

static const char *proc_kind_name(__u32 kind)
{
	switch (kind) {
	case CP_PROC_CUDA_INIT: return "cuda_init";
	case CP_PROC_FORK: return "fork";
	case CP_PROC_EXIT: return "exit";
	case CP_PROC_HELD_FOR_STACKS: return "held_for_stacks";
	default: return "unknown";
	}
}

static int finish(struct out_buf *out)
{
	return out->overflow ? -ENOSPC : (int)out->used;
}

int cp_format__json(const union cp_event *event, const struct cp_names *names,
		    char *buf, size_t len)
{
	struct out_buf out = { .buf = buf, .len = len };
	const struct cp_event_header *hdr = &event->hdr;
	const struct cp_name_entry *name;

	if (!event || !buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	put(&out, "{\"time_ns\":%llu,\"pid\":%u,\"tid\":%u,\"type\":\"%s\",\"api\":\"%s\"",
	    (unsigned long long)hdr->time_ns, hdr->pid, hdr->tid,
	    cp_event_type__name(hdr->type), cp_api__name(hdr->api));
	switch (hdr->type) {
	case CP_EV_LAUNCH: {
		const struct cp_launch_event *e = &event->launch;

		if (e->flags & CP_LAUNCH_GRAPH) {
			put(&out, ",\"graph_exec\":\"0x%llx\",\"stream\":\"0x%llx\"",
			    (unsigned long long)e->function, (unsigned long long)e->stream);
			break;
		}
		if (e->flags & CP_LAUNCH_HOST_FUNC) {
			put(&out, ",\"host_function\":\"0x%llx\",\"stream\":\"0x%llx\"",
			    (unsigned long long)e->function, (unsigned long long)e->stream);
			break;
		}
		name = cp_names__lookup(names, hdr->pid, e->function);
		put(&out, ",\"function\":\"0x%llx\"", (unsigned long long)e->function);
		put_json_string(&out, "kernel", name ? name->display : NULL);
		put_json_string(&out, "mangled", name ? name->mangled : NULL);
		if (name && name->source != CP_NAME_FROM_PROBE)
			put(&out, ",\"name_source\":\"%s\"", cp_name_source__name(name->source));
		put_json_dims(&out, "grid", e->grid);
		put_json_dims(&out, "block", e->block);
		put(&out, ",\"shared_mem_bytes\":%u,\"stream\":\"0x%llx\"", e->shared_mem_bytes,
		    (unsigned long long)e->stream);
		if (e->flags & CP_LAUNCH_COOPERATIVE)
			put(&out, ",\"cooperative\":true");
		if (e->flags & CP_LAUNCH_CONFIG_FAULT)
			put(&out, ",\"config_unreadable\":true");
		if (e->flags & CP_LAUNCH_LEGACY)
			put(&out, ",\"legacy\":true");
		break;
	}
	case CP_EV_ALLOC: {
		const struct cp_alloc_event *e = &event->alloc;

		put(&out, ",\"ptr\":\"0x%llx\",\"bytes\":%llu,\"kind\":\"%s\",\"result\":%d",
		    (unsigned long long)e->ptr, (unsigned long long)e->bytes,
		    cp_mem_kind__name(e->kind), e->result);
		if (e->kind == CP_MEM_DEVICE_ASYNC)
			put(&out, ",\"stream\":\"0x%llx\"", (unsigned long long)e->stream);
		break;
	}
	case CP_EV_FREE: {
		const struct cp_free_event *e = &event->free;

		put(&out, ",\"ptr\":\"0x%llx\",\"kind\":\"%s\"", (unsigned long long)e->ptr,
		    cp_mem_kind__name(e->kind));
		if (e->kind == CP_MEM_DEVICE_ASYNC)
			put(&out, ",\"stream\":\"0x%llx\"", (unsigned long long)e->stream);
		break;
	}
	case CP_EV_COPY: {
		const struct cp_copy_event *e = &event->copy;

		put(&out, ",\"dst\":\"0x%llx\",\"src\":\"0x%llx\",\"bytes\":%llu,"
		    "\"direction\":\"%s\",\"async\":%s",
		    (unsigned long long)e->dst, (unsigned long long)e->src,
		    (unsigned long long)e->bytes, cp_copy_dir__name(e->direction),
		    e->async ? "true" : "false");
		if (e->async)
			put(&out, ",\"stream\":\"0x%llx\"", (unsigned long long)e->stream);
		if (e->count != 1)
			put(&out, ",\"count\":%u", e->count);
		if (e->flags & CP_COPY_UNREADABLE)
			put(&out, ",\"unreadable\":true");
		if (e->flags & CP_COPY_BYTES_UNKNOWN)
			put(&out, ",\"bytes_unknown\":true");
		if (e->flags & CP_COPY_TRUNCATED)
			put(&out, ",\"bytes_of_first\":%u", CP_COPY_BATCH_READ_MAX);
		break;
	}
	case CP_EV_SYNC: {
		const struct cp_sync_event *e = &event->sync;

		put(&out, ",\"kind\":\"%s\",\"handle\":\"0x%llx\"", cp_sync_kind__name(e->kind),
		    (unsigned long long)e->handle);
		if (e->kind == CP_SYNC_QUERY_STREAM || e->kind == CP_SYNC_QUERY_EVENT)
			put(&out, ",\"result\":%d", e->result);
		break;
	}
	case CP_EV_MEMSET: {
		const struct cp_memset_event *e = &event->memset;

		put(&out, ",\"dst\":\"0x%llx\",\"bytes\":%llu,\"value\":%u,\"element_size\":%u,"
		    "\"async\":%s", (unsigned long long)e->dst, (unsigned long long)e->bytes, e->value,
		    e->element_size, e->async ? "true" : "false");
		if (e->pitch)
			put(&out, ",\"pitch\":%llu", (unsigned long long)e->pitch);
		if (e->async)
			put(&out, ",\"stream\":\"0x%llx\"", (unsigned long long)e->stream);
		break;
	}
	case CP_EV_EVENT: {
		const struct cp_event_event *e = &event->event;

		put(&out, ",\"op\":\"%s\",\"event\":\"0x%llx\",\"stream\":\"0x%llx\"",
		    cp_event_op__name(e->op), (unsigned long long)e->event,
		    (unsigned long long)e->stream);
		break;
	}
	case CP_EV_MODULE: {
		const struct cp_module_event *e = &event->module;

		put(&out, ",\"op\":\"%s\",\"handle\":\"0x%llx\",\"result\":%d",
		    cp_module_op__name(e->op), (unsigned long long)e->handle, e->result);
		if (e->path_len)
			put_json_string(&out, "path", e->path);
		break;
	}
	case CP_EV_VMM: {
		const struct cp_vmm_event *e = &event->vmm;

		put(&out, ",\"op\":\"%s\",\"result\":%d,\"bytes\":%llu", cp_vmm_op__name(e->op),
		    e->result, (unsigned long long)e->bytes);
		if (e->op == CP_VMM_CREATE || e->op == CP_VMM_RELEASE || e->op == CP_VMM_RETAIN ||
		    e->op == CP_VMM_MAP)
			put(&out, ",\"handle\":\"0x%llx\"", (unsigned long long)e->handle);
		if (e->op != CP_VMM_CREATE && e->op != CP_VMM_RELEASE)
			put(&out, ",\"ptr\":\"0x%llx\"", (unsigned long long)e->ptr);
		if (e->op == CP_VMM_CREATE)
			put(&out, ",\"device\":%d", e->device);
		if (e->op == CP_VMM_CREATE || e->op == CP_VMM_RELEASE || e->op == CP_VMM_UNMAP)
			put(&out, ",\"physical_bytes\":%llu", (unsigned long long)e->physical_bytes);
		break;
	}
	case CP_EV_CONTEXT: {
		const struct cp_context_event *e = &event->context;

		put(&out, ",\"op\":\"%s\",\"context\":\"0x%llx\",\"device\":%d,\"result\":%d",
		    cp_context_op__name(e->op), (unsigned long long)e->context, e->device, e->result);
		break;
	}
	case CP_EV_ATTACH: {
		const struct cp_attach_event *e = &event->attach;

		put(&out, ",\"library\":\"%s\"", e->flags & CP_ATTACH_RUNTIME ? "runtime" : "driver");
		put_json_string(&out, "file", e->name);
		put(&out, ",\"dev\":%u,\"inode\":%llu,\"held\":%s,\"status\":\"%s\",\"probes\":%u",
		    e->dev, (unsigned long long)e->inode, e->flags & CP_ATTACH_HELD ? "true" : "false",
		    cp_attach_status__name(e->status), e->probes);
		if (e->path[0])
			put_json_string(&out, "path", e->path);
		if (e->probes_live_ns)
			put(&out, ",\"probes_live_ns\":%llu", (unsigned long long)e->probes_live_ns);
		if (e->probes_live_ns >= e->hdr.time_ns && e->status == CP_ATTACH_ATTACHED)
			put(&out, ",\"delay_ns\":%llu",
			    (unsigned long long)(e->probes_live_ns - e->hdr.time_ns));
		if (e->status == CP_ATTACH_FAILED)
			put(&out, ",\"error\":\"%s\"", strerror(-e->error));
		break;
	}
	case CP_EV_NAME: {
		const struct cp_name_event *e = &event->name;
		char display[1024];

		put(&out, ",\"handle\":\"0x%llx\",\"result\":%d", (unsigned long long)e->handle,
		    e->result);
		if (e->hdr.api == CP_API_cuKernelGetFunction) {
			put(&out, ",\"alias_of\":\"0x%llx\"", (unsigned long long)e->alias_of);
			break;
		}
		cp_demangle(e->name, display, sizeof(display));
		put_json_string(&out, "name", display);
		put_json_string(&out, "mangled", e->name);
		break;
	}
	case CP_EV_PROC: {
		const struct cp_proc_event *e = &event->proc;

		put(&out, ",\"kind\":\"%s\"", proc_kind_name(e->kind));
		if (e->kind == CP_PROC_FORK)
			put(&out, ",\"child_pid\":%u", e->child_pid);
		if (e->kind == CP_PROC_EXIT)
			put_json_exit(&out, e->exit_code);
		break;
	}
	case CP_EV_RT_LAUNCH: {
		const struct cp_rt_launch_event *e = &event->rt_launch;

		name = cp_names__lookup_stub(names, hdr->pid, e->stub);
		put(&out, ",\"stub\":\"0x%llx\"", (unsigned long long)e->stub);
		put_json_string(&out, "kernel", name ? name->display : NULL);
		put_json_string(&out, "mangled", name ? name->mangled : NULL);
		put_json_dims(&out, "grid", e->grid);
		put_json_dims(&out, "block", e->block);
		put(&out, ",\"shared_mem_bytes\":%u,\"stream\":\"0x%llx\"", e->shared_mem_bytes,
		    (unsigned long long)e->stream);
		break;
	}
	default:
		break;
	}
	put(&out, "}");
	return finish(&out);
}

const char *cp_format__text_header(void)
{
	return "        TIME     PID     TID API                        DETAILS";
}

int cp_format__text(const union cp_event *event, const struct cp_names *names,
		    uint64_t start_ns, char *buf, size_t len)
{
	struct out_buf out = { .buf = buf, .len = len };
	const struct cp_event_header *hdr = &event->hdr;
	const struct cp_name_entry *name;
	uint64_t rel;

	if (!event || !buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	rel = hdr->time_ns >= start_ns ? hdr->time_ns - start_ns : 0;
	put(&out, "%5llu.%06llu %7u %7u %-26s", (unsigned long long)(rel / 1000000000ull),
	    (unsigned long long)(rel % 1000000000ull / 1000), hdr->pid, hdr->tid,
	    cp_api__name(hdr->api));
	switch (hdr->type) {
	case CP_EV_LAUNCH: {
		const struct cp_launch_event *e = &event->launch;

		if (e->flags & CP_LAUNCH_GRAPH) {
			put(&out, " graph=0x%llx stream=0x%llx", (unsigned long long)e->function,
			    (unsigned long long)e->stream);
			break;
		}
		if (e->flags & CP_LAUNCH_HOST_FUNC) {
			put(&out, " host_function=0x%llx stream=0x%llx", (unsigned long long)e->function,
			    (unsigned long long)e->stream);
			break;
		}
		{
			char label[64];

			put(&out, " ");
			put_text_string(&out, cp_format__kernel_label((struct cp_names *)names, hdr->pid,
								    e->function, false, NULL, label,
								    sizeof(label)));
		}
		put(&out, " grid=(%u,%u,%u) block=(%u,%u,%u) smem=%u stream=0x%llx",
		    e->grid[0], e->grid[1], e->grid[2], e->block[0], e->block[1], e->block[2],
		    e->shared_mem_bytes, (unsigned long long)e->stream);
		if (e->flags & CP_LAUNCH_CONFIG_FAULT)
			put(&out, " (config unreadable)");
		break;
	}
	case CP_EV_ALLOC: {
		const struct cp_alloc_event *e = &event->alloc;

		put(&out, " ptr=0x%llx bytes=%llu kind=%s", (unsigned long long)e->ptr,
		    (unsigned long long)e->bytes, cp_mem_kind__name(e->kind));
		if (e->result)
			put(&out, " failed=%d", e->result);
		break;
	}
	case CP_EV_FREE:
		put(&out, " ptr=0x%llx kind=%s", (unsigned long long)event->free.ptr,
		    cp_mem_kind__name(event->free.kind));
		break;
	case CP_EV_COPY: {
		const struct cp_copy_event *e = &event->copy;

		put(&out, " %s bytes=%llu dst=0x%llx src=0x%llx", cp_copy_dir__name(e->direction),
		    (unsigned long long)e->bytes, (unsigned long long)e->dst,
		    (unsigned long long)e->src);
		if (e->async)
			put(&out, " stream=0x%llx", (unsigned long long)e->stream);
		if (e->count != 1)
			put(&out, " count=%u", e->count);
		break;
	}
	case CP_EV_SYNC:
		if (event->sync.kind == CP_SYNC_CONTEXT && !event->sync.handle)
			put(&out, " context");
		else
			put(&out, " %s=0x%llx", cp_sync_kind__name(event->sync.kind),
			    (unsigned long long)event->sync.handle);
		if (event->sync.kind == CP_SYNC_QUERY_STREAM || event->sync.kind == CP_SYNC_QUERY_EVENT)
			put(&out, " result=%d", event->sync.result);
		break;
	case CP_EV_MEMSET: {
		const struct cp_memset_event *e = &event->memset;

		put(&out, " dst=0x%llx bytes=%llu value=%u size=%u", (unsigned long long)e->dst,
		    (unsigned long long)e->bytes, e->value, e->element_size);
		if (e->pitch)
			put(&out, " pitch=%llu", (unsigned long long)e->pitch);
		if (e->async)
			put(&out, " stream=0x%llx", (unsigned long long)e->stream);
		break;
	}
	case CP_EV_EVENT:
		put(&out, " %s event=0x%llx stream=0x%llx", cp_event_op__name(event->event.op),
		    (unsigned long long)event->event.event, (unsigned long long)event->event.stream);
		break;
	case CP_EV_MODULE: {
		const struct cp_module_event *e = &event->module;

		put(&out, " %s handle=0x%llx", cp_module_op__name(e->op), (unsigned long long)e->handle);
		if (e->path_len) {
			put(&out, " path=");
			put_text_string(&out, e->path);
		}
		if (e->result)
			put(&out, " failed=%d", e->result);
		break;
	}
	case CP_EV_VMM: {
		const struct cp_vmm_event *e = &event->vmm;

		put(&out, " %s bytes=%llu", cp_vmm_op__name(e->op), (unsigned long long)e->bytes);
		if (e->op == CP_VMM_CREATE || e->op == CP_VMM_RELEASE || e->op == CP_VMM_RETAIN ||
		    e->op == CP_VMM_MAP)
			put(&out, " handle=0x%llx", (unsigned long long)e->handle);
		if (e->op != CP_VMM_CREATE && e->op != CP_VMM_RELEASE)
			put(&out, " ptr=0x%llx", (unsigned long long)e->ptr);
		if (e->physical_bytes)
			put(&out, " physical=%llu", (unsigned long long)e->physical_bytes);
		if (e->result)
			put(&out, " failed=%d", e->result);
		break;
	}
	case CP_EV_CONTEXT:
		put(&out, " %s context=0x%llx device=%d", cp_context_op__name(event->context.op),
		    (unsigned long long)event->context.context, event->context.device);
		if (event->context.result)
			put(&out, " failed=%d", event->context.result);
		break;
	case CP_EV_ATTACH: {
		const struct cp_attach_event *e = &event->attach;

		put(&out, " ");
		put_text_string(&out, e->name);
		put(&out, " %s", cp_attach_status__name(e->status));
		if (e->status == CP_ATTACH_ATTACHED)
			put(&out, " probes=%u after=%.3fms", e->probes,
			    (e->probes_live_ns - e->hdr.time_ns) / 1e6);
		if (e->flags & CP_ATTACH_HELD)
			put(&out, " (held)");
		if (e->status == CP_ATTACH_FAILED)
			put(&out, " error=%s", strerror(-e->error));
		break;
	}
	case CP_EV_NAME: {
		const struct cp_name_event *e = &event->name;
		char display[1024];

		if (e->result) {
			put(&out, " failed=%d", e->result);
			break;
		}
		if (e->hdr.api == CP_API_cuKernelGetFunction) {
			put(&out, " function=0x%llx from kernel=0x%llx", (unsigned long long)e->handle,
			    (unsigned long long)e->alias_of);
			break;
		}
		cp_demangle(e->name, display, sizeof(display));
		put(&out, " handle=0x%llx ", (unsigned long long)e->handle);
		put_text_string(&out, display);
		break;
	}
	case CP_EV_PROC: {
		const struct cp_proc_event *e = &event->proc;

		if (e->kind == CP_PROC_FORK)
			put(&out, " child=%u", e->child_pid);
		else if (e->kind == CP_PROC_EXIT && WIFSIGNALED(e->exit_code))
			put(&out, " exit signal=%d", WTERMSIG(e->exit_code));
		else if (e->kind == CP_PROC_EXIT)
			put(&out, " exit status=%d", WEXITSTATUS(e->exit_code));
		break;
	}
	case CP_EV_RT_LAUNCH: {
		const struct cp_rt_launch_event *e = &event->rt_launch;

		name = cp_names__lookup_stub(names, hdr->pid, e->stub);
		put(&out, " ");
		if (name)
			put_text_string(&out, name->display);
		else
			put(&out, "<unnamed stub 0x%llx>", (unsigned long long)e->stub);
		put(&out, " grid=(%u,%u,%u) block=(%u,%u,%u) smem=%u stream=0x%llx",
		    e->grid[0], e->grid[1], e->grid[2], e->block[0], e->block[1], e->block[2],
		    e->shared_mem_bytes, (unsigned long long)e->stream);
		break;
	}
	default:
		break;
	}
	return finish(&out);
}

/* ---- per-process reports (cuprobe stats) --------------------------------------- */

static int by_launches_desc(const void *a, const void *b)
{
	const struct cp_kernel_row *x = a, *y = b;

	return x->stat.launches < y->stat.launches ? 1 : x->stat.launches > y->stat.launches ? -1 : 0;
}

static int by_calls_desc(const void *a, const void *b)
{
	const struct cp_api_row *x = a, *y = b;

	return x->stat.calls < y->stat.calls ? 1 : x->stat.calls > y->stat.calls ? -1 : 0;
}

/* The report's rows, most used first (copies: the caller's arrays stay as they are). */
static int sorted_rows(const struct cp_report *r, struct cp_kernel_row **kernels,
		       struct cp_api_row **apis)
{
	*kernels = calloc(r->kernel_count + 1, sizeof(**kernels));
	*apis = calloc(r->api_count + 1, sizeof(**apis));
	if (!*kernels || !*apis) {
		free(*kernels);
		free(*apis);
		return -ENOMEM;
	}
	memcpy(*kernels, r->kernels, r->kernel_count * sizeof(**kernels));
	memcpy(*apis, r->apis, r->api_count * sizeof(**apis));
	qsort(*kernels, r->kernel_count, sizeof(**kernels), by_launches_desc);
	qsort(*apis, r->api_count, sizeof(**apis), by_calls_desc);
	return 0;
}

static void human_bytes(unsigned long long bytes, char *buf, size_t len)
{
	if (bytes >= (1ull << 30))
		snprintf(buf, len, "%.2f GiB", bytes / (double)(1ull << 30));
	else if (bytes >= (1ull << 20))
		snprintf(buf, len, "%.2f MiB", bytes / (double)(1ull << 20));
	else if (bytes >= (1ull << 10))
		snprintf(buf, len, "%.2f KiB", bytes / 1024.0);
	else
		snprintf(buf, len, "%llu B", bytes);
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

int cp_format__report_text(const struct cp_report *r, struct cp_names *names, struct cp_text *text)
{
	struct out_buf out = text_out(text);
	struct cp_kernel_row *kernels;
	struct cp_api_row *apis;
	const struct cp_mem_stat *mem = r->memory;
	char label[128], a[32], b[32], c[32], d[32];
	size_t i;

	if (sorted_rows(r, &kernels, &apis))
		return -ENOMEM;
	put(&out, "== pid %u (", r->pid);
	put_text_string(&out, r->comm ? r->comm : "?");
	if (r->exited && WIFSIGNALED(r->exit_code))
		put(&out, ") exited on signal %d, at %.3f s ==\n", WTERMSIG(r->exit_code),
		    r->since_start_s);
	else if (r->exited)
		put(&out, ") exited with status %d, at %.3f s ==\n", WEXITSTATUS(r->exit_code),
		    r->since_start_s);
	else
		put(&out, ")%s at %.3f s%s ==\n", r->final ? " when tracing stopped," : "",
		    r->since_start_s,
		    r->live ? " (read while it runs: tables may differ by the calls made during the read)" : "");
	put(&out, "  kernels: %zu%s\n", r->kernel_count,
	    r->kernel_count > REPORT_KERNELS_SHOWN ? " (top 10 by launches)" : "");
	if (r->kernel_count)
		put(&out, "    %12s %16s  %s\n", "launches", "threads", "kernel");
	for (i = 0; i < r->kernel_count && i < REPORT_KERNELS_SHOWN; i++) {
		const char *shown = cp_format__kernel_label(names, r->pid, kernels[i].handle,
							    kernels[i].stat.graph, NULL, label,
							    sizeof(label));

		put(&out, "    %12llu %16llu  ", (unsigned long long)kernels[i].stat.launches,
		    (unsigned long long)kernels[i].stat.threads);
		put_text_string(&out, shown);
		put(&out, "\n");
	}
	put(&out, "  api calls:\n");
	if (r->latency)
		put(&out, "    %12s %8s %9s %9s %9s %9s  %s\n", "calls", "errors", "mean", "p50<=",
		    "p99<=", "max<=", "api");
	else if (r->api_count)
		put(&out, "    %12s  %s\n", "calls", "api");
	for (i = 0; i < r->api_count; i++) {
		const struct cp_api_stat *st = &apis[i].stat;

		if (!r->latency) {
			put(&out, "    %12llu  %s\n", (unsigned long long)st->calls,
			    cp_api__name(apis[i].api));
			continue;
		}
		human_ns(st->timed ? st->total_ns / st->timed : 0, a, sizeof(a));
		human_ns(cp_histogram__percentile(st->histogram, 0.5), b, sizeof(b));
		human_ns(cp_histogram__percentile(st->histogram, 0.99), c, sizeof(c));
		human_ns(cp_histogram__percentile(st->histogram, 1.0), d, sizeof(d));
		put(&out, "    %12llu %8llu %9s %9s %9s %9s  %s\n", (unsigned long long)st->calls,
		    (unsigned long long)st->errors, a, b, c, d, cp_api__name(apis[i].api));
	}
	if (mem) {
		human_bytes(mem->live_bytes, a, sizeof(a));
		human_bytes(mem->peak_bytes, b, sizeof(b));
		put(&out, "  device memory: %s live in %llu allocations, peak %s", a,
		    (unsigned long long)mem->live_allocations, b);
		if (mem->vmm_live_bytes || mem->vmm_peak_bytes || mem->reserved_bytes) {
			human_bytes(mem->vmm_live_bytes, c, sizeof(c));
			human_bytes(mem->reserved_bytes, d, sizeof(d));
			put(&out, " (VMM physical %s live, %s of addresses reserved)", c, d);
		}
		put(&out, "; %llu allocations, %llu frees", (unsigned long long)mem->allocations,
		    (unsigned long long)mem->frees);
		if (mem->unknown_frees)
			put(&out, " (%llu of pointers allocated before tracing)",
			    (unsigned long long)mem->unknown_frees);
		human_bytes(mem->host_live_bytes, c, sizeof(c));
		put(&out, "\n  pinned host memory: %s live in %llu allocations\n", c,
		    (unsigned long long)mem->host_live_allocations);
	}
	free(kernels);
	free(apis);
	return text_done(&out);
}

int cp_format__report_json(const struct cp_report *r, struct cp_names *names, struct cp_text *text)
{
	struct out_buf out = text_out(text);
	struct cp_kernel_row *kernels;
	struct cp_api_row *apis;
	const struct cp_mem_stat *mem = r->memory;
	char label[128];
	size_t i;
	int bucket;

	if (sorted_rows(r, &kernels, &apis))
		return -ENOMEM;
	put(&out, "{\"type\":\"stats\",\"time_ns\":%llu,\"pid\":%u", (unsigned long long)r->time_ns,
	    r->pid);
	put_json_string(&out, "comm", r->comm);
	put(&out, ",\"final\":%s,\"exited\":%s,\"live_read\":%s", r->final ? "true" : "false",
	    r->exited ? "true" : "false", r->live ? "true" : "false");
	if (r->exited)
		put_json_exit(&out, r->exit_code);
	put(&out, ",\"kernels\":[");
	for (i = 0; i < r->kernel_count; i++) {
		const char *mangled, *shown = cp_format__kernel_label(names, r->pid, kernels[i].handle,
								     kernels[i].stat.graph, &mangled,
								     label, sizeof(label));

		put(&out, "%s{\"handle\":\"0x%llx\"", i ? "," : "", (unsigned long long)kernels[i].handle);
		put_json_string(&out, "kernel", shown);
		put_json_string(&out, "mangled", mangled);
		put(&out, ",\"launches\":%llu,\"threads\":%llu,\"graph\":%s}",
		    (unsigned long long)kernels[i].stat.launches,
		    (unsigned long long)kernels[i].stat.threads, kernels[i].stat.graph ? "true" : "false");
	}
	put(&out, "],\"apis\":[");
	for (i = 0; i < r->api_count; i++) {
		const struct cp_api_stat *st = &apis[i].stat;
		bool first = true;

		put(&out, "%s{\"api\":\"%s\",\"calls\":%llu", i ? "," : "", cp_api__name(apis[i].api),
		    (unsigned long long)st->calls);
		if (r->latency) {
			put(&out, ",\"timed\":%llu,\"errors\":%llu,\"mean_ns\":%llu,\"p50_ns\":%llu,"
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
				put(&out, "%s{\"le_ns\":%llu,\"count\":%llu}", first ? "" : ",",
				    bucket ? 1ull << bucket : 1ull,
				    (unsigned long long)st->histogram[bucket]);
				first = false;
			}
			put(&out, "]");
		}
		put(&out, "}");
	}
	put(&out, "]");
	if (mem)
		put(&out, ",\"memory\":{\"live_bytes\":%llu,\"peak_bytes\":%llu,\"live_allocations\":%llu,"
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
		put(&out, ",\"memory\":null");
	put(&out, "}\n");
	free(kernels);
	free(apis);
	return text_done(&out);
}

int cp_format__leak_text(const struct cp_leak *leak, struct cp_text *text)
{
	struct out_buf out = text_out(text);
	size_t i, f;

	put(&out, "  LEAK: %llu device allocations, %llu bytes still live when pid %u (",
	    (unsigned long long)leak->allocations, (unsigned long long)leak->bytes, leak->pid);
	put_text_string(&out, leak->comm ? leak->comm : "?");
	put(&out, ") exited\n");
	for (i = 0; i < leak->site_count; i++) {
		const struct cp_leak_site *site = &leak->sites[i];

		put(&out, "    %llu bytes in %llu allocations (%s, %s)%s\n",
		    (unsigned long long)site->bytes, (unsigned long long)site->allocations,
		    cp_mem_kind__name(site->kind), cp_api__name(site->api),
		    site->frames ? "" : leak->stacks ? " stack not captured" : " (--stacks shows where)");
		for (f = 0; site->frames && f < site->frame_count; f++) {
			put(&out, "        #%zu ", f);
			put_text_string(&out, site->frames[f]);
			put(&out, "\n");
		}
	}
	return text_done(&out);
}

int cp_format__leak_json(const struct cp_leak *leak, struct cp_text *text)
{
	struct out_buf out = text_out(text);
	size_t i, f;

	put(&out, "{\"type\":\"leak_report\",\"pid\":%u", leak->pid);
	put_json_string(&out, "comm", leak->comm);
	put(&out, ",\"allocations\":%llu,\"bytes\":%llu,\"sites\":[",
	    (unsigned long long)leak->allocations, (unsigned long long)leak->bytes);
	for (i = 0; i < leak->site_count; i++) {
		const struct cp_leak_site *site = &leak->sites[i];

		put(&out, "%s{\"allocations\":%llu,\"bytes\":%llu,\"kind\":\"%s\",\"api\":\"%s\",\"stack\":",
		    i ? "," : "", (unsigned long long)site->allocations,
		    (unsigned long long)site->bytes, cp_mem_kind__name(site->kind),
		    cp_api__name(site->api));
		if (!site->frames) {
			put(&out, "null}");
			continue;
		}
		put(&out, "[");
		for (f = 0; f < site->frame_count; f++) {
			put(&out, "%s", f ? "," : "");
			put_json_value(&out, site->frames[f]);
		}
		put(&out, "]}");
	}
	put(&out, "]}\n");
	return text_done(&out);
}
