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
#include <string.h>

#include "cuprobe.h"

struct out_buf {
	char *buf;
	size_t len;
	size_t used;
	bool overflow;
};

static void put(struct out_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out_buf *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (out->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(out->buf + out->used, out->len - out->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= out->len - out->used) {
		out->overflow = true;
		return;
	}
	out->used += n;
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

static void put_json_string(struct out_buf *out, const char *key, const char *value)
{
	char escaped[CP_NAME_MAX * 8];

	if (!value) {
		put(out, ",\"%s\":null", key);
		return;
	}
	if (cp_json__escape(value, escaped, sizeof(escaped)) < 0) {
		out->overflow = true;
		return;
	}
	put(out, ",\"%s\":\"%s\"", key, escaped);
}

static void put_json_dims(struct out_buf *out, const char *key, const __u32 dims[3])
{
	put(out, ",\"%s\":[%u,%u,%u]", key, dims[0], dims[1], dims[2]);
}

static const char *proc_kind_name(__u32 kind)
{
	switch (kind) {
	case CP_PROC_CUDA_INIT: return "cuda_init";
	case CP_PROC_FORK: return "fork";
	case CP_PROC_EXIT: return "exit";
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
		if (e->kind == CP_PROC_EXIT) {
			if (e->exit_code & 0x7f)
				put(&out, ",\"signal\":%d", e->exit_code & 0x7f);
			else
				put(&out, ",\"exit_status\":%d", (e->exit_code >> 8) & 0xff);
		}
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
		name = cp_names__lookup(names, hdr->pid, e->function);
		put(&out, " ");
		if (name)
			put_text_string(&out, name->display);
		else
			put(&out, "<unnamed function 0x%llx>", (unsigned long long)e->function);
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
		else if (e->kind == CP_PROC_EXIT && (e->exit_code & 0x7f))
			put(&out, " exit signal=%d", e->exit_code & 0x7f);
		else if (e->kind == CP_PROC_EXIT)
			put(&out, " exit status=%d", (e->exit_code >> 8) & 0xff);
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
