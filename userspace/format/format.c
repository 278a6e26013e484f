// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The output wing's front: the table of formats (output.h) and the entry
 * points every caller uses (format.h, and cp_format__text/json of
 * cuprobe.h), doing what the formats share before calling the one asked
 * for: argument checks, the sink, report rows sorted, kernel labels.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "cuprobe_internal.h"
#include "output.h"
#include "metrics.pb-c.h"

/* What an event record's handle names: a stream, or a whole context for cuCtxRecordEvent and kin. */
const char *cp_format__event_scope(uint32_t op)
{
	return op == CP_EVENT_RECORD_CONTEXT || op == CP_EVENT_WAIT_CONTEXT ? "context" : "stream";
}

const char *cp_format__proc_kind_name(uint32_t kind)
{
	switch (kind) {
	case CP_PROC_CUDA_INIT: return "cuda_init";
	case CP_PROC_FORK: return "fork";
	case CP_PROC_EXIT: return "exit";
	case CP_PROC_HELD_FOR_STACKS: return "held_for_stacks";
	default: return "unknown";
	}
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

/* The formats, by enum cp_format: a new one is a file and a row. */
static const struct cp_format_ops *const formats[CP_FORMAT_MAX] = {
	[CP_FORMAT_TEXT] = &cp_format_text_ops,
	[CP_FORMAT_JSON] = &cp_format_json_ops,
};

static const struct cp_format_ops *ops_of(enum cp_format format)
{
	return (unsigned int)format < CP_FORMAT_MAX ? formats[format] : NULL;
}

const char *cp_format__name(enum cp_format format)
{
	return ops_of(format) ? ops_of(format)->name : "unknown";
}

const char *cp_format__header(enum cp_format format)
{
	return ops_of(format) ? ops_of(format)->header : NULL;
}

/* ---- records ------------------------------------------------------------------------ */

int cp_format__record(enum cp_format format, const union cp_event *event,
		      const struct cp_names *names, uint64_t start_ns, char *buf, size_t len)
{
	const struct cp_format_ops *ops = ops_of(format);
	struct cp_sink out = { .buf = buf, .len = len };

	if (!ops || !event || !buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	ops->record(&out, event, names, start_ns);
	return cp_sink__finish(&out);
}

int cp_format__json(const union cp_event *event, const struct cp_names *names,
		    char *buf, size_t len)
{
	return cp_format__record(CP_FORMAT_JSON, event, names, 0, buf, len);
}

int cp_format__text(const union cp_event *event, const struct cp_names *names,
		    uint64_t start_ns, char *buf, size_t len)
{
	return cp_format__record(CP_FORMAT_TEXT, event, names, start_ns, buf, len);
}

const char *cp_format__text_header(void)
{
	return cp_format_text_ops.header;
}

/* ---- per-process reports (cuprobe stats) --------------------------------------- */

static int by_launches_desc(const void *a, const void *b)
{
	const struct cp_kernel_row *x = a, *y = b;

	return x->launches < y->launches ? 1 : x->launches > y->launches ? -1 : 0;
}

static int by_calls_desc(const void *a, const void *b)
{
	const struct cp_api_row *x = a, *y = b;

	return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

int cp_format__report(struct cp_text *text, enum cp_format format, const struct cp_report *report,
		      struct cp_names *names)
{
	const struct cp_format_ops *ops = ops_of(format);
	struct cp_sink out = cp_sink__text(text);
	struct cp_report sorted = *report;
	struct cp_kernel_row *kernels;
	struct cp_api_row *apis;

	if (!ops)
		return -EINVAL;
	/* Most used first, in copies: the caller's arrays stay as they are. */
	kernels = calloc(report->kernel_count + 1, sizeof(*kernels));
	apis = calloc(report->api_count + 1, sizeof(*apis));
	if (!kernels || !apis) {
		free(kernels);
		free(apis);
		return -ENOMEM;
	}
	memcpy(kernels, report->kernels, report->kernel_count * sizeof(*kernels));
	memcpy(apis, report->apis, report->api_count * sizeof(*apis));
	qsort(kernels, report->kernel_count, sizeof(*kernels), by_launches_desc);
	qsort(apis, report->api_count, sizeof(*apis), by_calls_desc);
	sorted.kernels = kernels;
	sorted.apis = apis;
	if (ops->report)
		ops->report(&out, &sorted, names);
	free(kernels);
	free(apis);
	return cp_sink__text_done(&out);
}

int cp_format__leak(struct cp_text *text, enum cp_format format, const struct cp_leak *leak)
{
	const struct cp_format_ops *ops = ops_of(format);
	struct cp_sink out = cp_sink__text(text);

	if (!ops)
		return -EINVAL;
	if (ops->leak)
		ops->leak(&out, leak);
	return cp_sink__text_done(&out);
}

/* ---- the GPU timeline, Xid and traced files ---------------------------------------- */

int cp_format__interval(struct cp_text *text, enum cp_format format,
			const struct cp_gpu_interval *interval, struct cp_names *names,
			uint64_t start_ns)
{
	const struct cp_format_ops *ops = ops_of(format);
	struct cp_sink out = cp_sink__text(text);
	char label[64];

	if (!ops)
		return -EINVAL;
	if (ops->interval)
		ops->interval(&out, interval,
			      cp_format__kernel_label(names, interval->pid, interval->function,
						      interval->graph, NULL, label, sizeof(label)),
			      start_ns);
	return cp_sink__text_done(&out);
}

int cp_format__xid_in_flight(struct cp_text *text, enum cp_format format,
			     const struct cp_xid_event *xid, const struct cp_gpu_interval *in_flight,
			     size_t count, bool known, struct cp_names *names)
{
	const struct cp_format_ops *ops = ops_of(format);
	struct cp_sink out = cp_sink__text(text);

	if (!ops)
		return -EINVAL;
	if (ops->xid_in_flight)
		ops->xid_in_flight(&out, xid, cp_xid__process(xid), in_flight, count, known, names);
	return cp_sink__text_done(&out);
}

int cp_format__traced_file(struct cp_text *text, enum cp_format format,
			   const struct cp_traced_file *file)
{
	const struct cp_format_ops *ops = ops_of(format);
	struct cp_sink out = cp_sink__text(text);

	if (!ops)
		return -EINVAL;
	if (ops->traced_file)
		ops->traced_file(&out, file);
	return cp_sink__text_done(&out);
}

/* ---- users' programs (cuprobe run): records and maps from their BTF ----------------- */

#define HIST_BAR_WIDTH 40
#define STACK_FRAMES_MAX 32

struct btf_walk {
	struct cp_sink *out;
	const struct btf *btf;
	const struct cp_btf_names *names;
	bool json;
	uint32_t pid;       /* the "pid" beside the value being printed, else names->pid */
	const char *indent; /* text blocks (histograms, stacks) start their lines with it */
};

/* Through typedefs other than cuprobe's, and qualifiers: the type the bytes have. */
static const struct btf_type *resolved(const struct btf *btf, __u32 *type_id)
{
	const struct btf_type *type = btf__type_by_id(btf, *type_id);

	while (type && (btf_is_const(type) || btf_is_volatile(type) || btf_is_restrict(type) ||
			btf_kind(type) == BTF_KIND_TYPE_TAG ||
			(btf_is_typedef(type) && strncmp(btf__name_by_offset(btf, type->name_off),
							 "cuprobe_", 8)))) {
		*type_id = type->type;
		type = btf__type_by_id(btf, *type_id);
	}
	return type;
}

static const char *type_name(const struct btf *btf, const struct btf_type *type)
{
	return type ? btf__name_by_offset(btf, type->name_off) : "";
}

static bool is_hist(const struct btf *btf, const struct btf_type *type)
{
	return type && btf_is_struct(type) && !strcmp(type_name(btf, type), "cuprobe_hist");
}

static bool is_typedef_named(const struct btf *btf, const struct btf_type *type, const char *name)
{
	return type && btf_is_typedef(type) && !strcmp(type_name(btf, type), name);
}

/* An integer of size bytes at data, sign-extended when signed. */
static uint64_t load_int(const void *data, size_t size, bool is_signed)
{
	uint64_t v = 0;

	memcpy(&v, data, size < sizeof(v) ? size : sizeof(v));
	if (is_signed && size < 8 && (v >> (size * 8 - 1)) & 1)
		v |= ~0ull << (size * 8);
	return v;
}

static bool is_char_array(const struct btf *btf, const struct btf_type *type)
{
	const struct btf_array *array;
	const struct btf_type *element;
	__u32 element_id;

	if (!type || !btf_is_array(type))
		return false;
	array = btf_array(type);
	element_id = array->type;
	element = resolved(btf, &element_id);
	return element && btf_is_int(element) && element->size == 1 &&
	       (btf_int_encoding(element) & BTF_INT_CHAR || !strcmp(type_name(btf, element), "char"));
}

/* A string value: a JSON string, or in text quoted with control bytes escaped. */
static void put_walk_string(struct btf_walk *w, const char *s)
{
	if (w->json) {
		put_json_value(w->out, s);
	} else {
		put_lit(w->out, "\"");
		put_text_string(w->out, s);
		put_lit(w->out, "\"");
	}
}

static void put_string_value(struct btf_walk *w, const char *data, size_t size)
{
	char copy[4096];
	size_t n = size < sizeof(copy) - 1 ? size : sizeof(copy) - 1;

	memcpy(copy, data, n);
	copy[n] = '\0';
	put_walk_string(w, copy);
}

static void put_kernel(struct btf_walk *w, uint64_t handle)
{
	char buf[64];
	const char *label = w->names && w->names->names ?
			    cp_format__kernel_label(w->names->names, w->pid, handle, false, NULL,
						    buf, sizeof(buf)) : NULL;

	if (!label) {
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)handle);
		label = buf;
	}
	put_walk_string(w, label);
}

/* A user stack id: its frames, symbolized in the process named by the pid beside it. */
static void put_stack(struct btf_walk *w, int64_t stack_id)
{
	uint64_t ips[STACK_FRAMES_MAX];
	char frame[512];
	int depth = -1, i;

	if (stack_id >= 0 && w->names && w->names->tracer)
		depth = cp_tracer__stack(w->names->tracer, stack_id, ips, STACK_FRAMES_MAX);
	if (depth < 0) {
		if (w->json)
			put(w->out, "null");
		else
			put(w->out, "(no stack: %s)", stack_id < 0 ? "not captured" : "gone");
		return;
	}
	if (w->json)
		put(w->out, "[");
	else
		put(w->out, "%d frames", depth);
	for (i = 0; i < depth; i++) {
		if (w->names->symbolizer)
			cp_symbolizer__symbolize(w->names->symbolizer, (pid_t)w->pid, ips[i], frame,
						 sizeof(frame));
		else
			snprintf(frame, sizeof(frame), "0x%llx", (unsigned long long)ips[i]);
		if (w->json) {
			put(w->out, "%s", i ? "," : "");
			put_json_value(w->out, frame);
		} else {
			put(w->out, "\n%s#%d ", w->indent, i);
			put_text_string(w->out, frame);
		}
	}
	if (w->json)
		put(w->out, "]");
}

/* The bounds of log2 bucket b: 0 and 1, then 2^(b-1)+1 to 2^b. */
static void hist_bounds(size_t b, unsigned long long *low, unsigned long long *high)
{
	*low = b == 0 ? 0 : b == 1 ? 2 : (1ull << (b - 1)) + 1;
	*high = b == 0 ? 1 : b >= 64 ? ~0ull : 1ull << b;
}

static void put_hist(struct btf_walk *w, const __u64 *buckets, size_t count)
{
	unsigned long long total = 0, most = 0, low, high;
	size_t b, first = count, last = 0;
	char range[64];
	int bar;

	for (b = 0; b < count; b++) {
		total += buckets[b];
		if (buckets[b] > most)
			most = buckets[b];
		if (buckets[b] && first == count)
			first = b;
		if (buckets[b])
			last = b;
	}
	if (w->json) {
		put(w->out, "{\"count\":%llu,\"buckets\":[", total);
		for (b = first; b < count && b <= last; b++) {
			if (!buckets[b])
				continue;
			hist_bounds(b, &low, &high);
			put(w->out, "%s{\"low\":%llu,\"high\":%llu,\"count\":%llu}",
			    b == first ? "" : ",", low, high, (unsigned long long)buckets[b]);
		}
		put(w->out, "]}");
		return;
	}
	put(w->out, "%llu values", total);
	for (b = first; b < count && b <= last; b++) {
		hist_bounds(b, &low, &high);
		snprintf(range, sizeof(range), "[%llu, %llu]", low, high);
		bar = most ? (int)((buckets[b] * HIST_BAR_WIDTH + most - 1) / most) : 0;
		put(w->out, "\n%s%-24s %10llu |%.*s%*s|", w->indent, range,
		    (unsigned long long)buckets[b], bar,
		    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@", HIST_BAR_WIDTH - bar, "");
	}
}

static void put_btf_value(struct btf_walk *w, __u32 type_id, const unsigned char *data, size_t avail);

/* cuprobe's enums print as cuprobe's own names for them ("cuStreamSynchronize", "htod"). */
static const char *cuprobe_enum_name(const char *enum_name, int64_t value)
{
	static const struct {
		const char *name;
		const char *(*label)(int value);
	} labels[] = {
		{ "cp_api", (const char *(*)(int))cp_api__name },
		{ "cp_mem_kind", (const char *(*)(int))cp_mem_kind__name },
		{ "cp_copy_dir", (const char *(*)(int))cp_copy_dir__name },
		{ "cp_sync_kind", (const char *(*)(int))cp_sync_kind__name },
		{ "cp_event_op", (const char *(*)(int))cp_event_op__name },
		{ "cp_module_op", (const char *(*)(int))cp_module_op__name },
		{ "cp_vmm_op", (const char *(*)(int))cp_vmm_op__name },
		{ "cp_context_op", (const char *(*)(int))cp_context_op__name },
		{ "cp_family", (const char *(*)(int))cp_family__name },
	};
	size_t i;

	for (i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
		if (!strcmp(enum_name, labels[i].name))
			return labels[i].label((int)value);
	return NULL;
}

/* The value of a member named "pid", if the struct has an integer one. */
static bool struct_pid(const struct btf *btf, const struct btf_type *type, const unsigned char *data,
		       size_t avail, uint32_t *pid)
{
	const struct btf_member *member = btf_members(type);
	__u16 i;

	for (i = 0; i < btf_vlen(type); i++, member++) {
		__u32 member_id = member->type;
		const struct btf_type *member_type = resolved(btf, &member_id);
		size_t offset = btf_member_bit_offset(type, i) / 8;

		if (strcmp(btf__name_by_offset(btf, member->name_off), "pid") || !member_type ||
		    !btf_is_int(member_type) || btf_member_bitfield_size(type, i) ||
		    offset + member_type->size > avail || member_type->size > 8)
			continue;
		*pid = (uint32_t)load_int(data + offset, member_type->size, false);
		return true;
	}
	return false;
}

static void put_struct(struct btf_walk *w, const struct btf_type *type, const unsigned char *data,
		       size_t avail)
{
	const struct btf_member *member = btf_members(type);
	uint32_t saved_pid = w->pid, pid;
	const char *saved_indent = w->indent;
	char deeper[64];
	bool first = true;
	__u16 i;

	if (struct_pid(w->btf, type, data, avail, &pid))
		w->pid = pid;
	snprintf(deeper, sizeof(deeper), "%s  ", w->indent);
	put(w->out, w->json ? "{" : "{");
	for (i = 0; i < btf_vlen(type); i++, member++) {
		const char *name = btf__name_by_offset(w->btf, member->name_off);
		size_t bit_offset = btf_member_bit_offset(type, i);
		__u32 bits = btf_member_bitfield_size(type, i);

		if (!name || !name[0] || !strncmp(name, "pad", 3) || !strncmp(name, "__pad", 5))
			continue; /* padding says nothing */
		if (w->json)
			put(w->out, "%s\"%s\":", first ? "" : ",", name);
		else
			put(w->out, "%s%s=", first ? "" : " ", name);
		first = false;
		if (bits) {
			uint64_t word = 0, value;
			size_t byte = bit_offset / 8;

			memcpy(&word, data + byte, avail > byte ? (avail - byte < 8 ? avail - byte : 8) : 0);
			value = (word >> (bit_offset % 8)) & (bits >= 64 ? ~0ull : (1ull << bits) - 1);
			put(w->out, "%llu", (unsigned long long)value);
			continue;
		}
		w->indent = deeper;
		put_btf_value(w, member->type, data + bit_offset / 8,
			      avail > bit_offset / 8 ? avail - bit_offset / 8 : 0);
		w->indent = saved_indent;
	}
	put(w->out, "}");
	w->pid = saved_pid;
}

static void put_btf_value(struct btf_walk *w, __u32 type_id, const unsigned char *data, size_t avail)
{
	const struct btf_type *type = resolved(w->btf, &type_id);
	__s64 size = btf__resolve_size(w->btf, type_id);
	size_t i;

	if (!type || size < 0 || (size_t)size > avail) {
		put(w->out, w->json ? "null" : "?");
		return;
	}
	if (is_typedef_named(w->btf, type, "cuprobe_kernel_t")) {
		put_kernel(w, load_int(data, (size_t)size, false));
		return;
	}
	if (is_typedef_named(w->btf, type, "cuprobe_stack_t")) {
		put_stack(w, (int64_t)load_int(data, (size_t)size, true));
		return;
	}
	if (is_typedef_named(w->btf, type, "cuprobe_addr_t")) {
		put(w->out, w->json ? "\"0x%llx\"" : "0x%llx",
		    (unsigned long long)load_int(data, (size_t)size, false));
		return;
	}
	if (btf_is_typedef(type)) {
		put_btf_value(w, type->type, data, avail);
		return;
	}
	if (is_hist(w->btf, type) && btf_vlen(type) == 1) {
		const struct btf_member *member = btf_members(type);
		__u32 array_id = member->type;
		const struct btf_type *array = resolved(w->btf, &array_id);

		if (array && btf_is_array(array)) {
			put_hist(w, (const __u64 *)data, btf_array(array)->nelems);
			return;
		}
	}
	switch (btf_kind(type)) {
	case BTF_KIND_INT: {
		__u8 encoding = btf_int_encoding(type);
		uint64_t v;

		if (type->size > 8) {
			put(w->out, w->json ? "\"0x" : "0x");
			for (i = type->size; i > 0; i--)
				put(w->out, "%02x", data[i - 1]);
			put(w->out, w->json ? "\"" : "");
			break;
		}
		v = load_int(data, type->size, encoding & BTF_INT_SIGNED);
		if (encoding & BTF_INT_BOOL)
			put(w->out, "%s", v ? "true" : "false");
		else if (encoding & BTF_INT_SIGNED)
			put(w->out, "%lld", (long long)v);
		else
			put(w->out, "%llu", (unsigned long long)v);
		break;
	}
	case BTF_KIND_ENUM: {
		const struct btf_enum *e = btf_enum(type);
		int64_t v = (int64_t)load_int(data, type->size, true);
		const char *name = cuprobe_enum_name(type_name(w->btf, type), v);

		for (i = 0; !name && i < btf_vlen(type); i++)
			if (e[i].val == v)
				name = btf__name_by_offset(w->btf, e[i].name_off);
		if (name && w->json)
			put(w->out, "\"%s\"", name);
		else if (name)
			put(w->out, "%s", name);
		else
			put(w->out, "%lld", (long long)v);
		break;
	}
	case BTF_KIND_PTR:
		put(w->out, w->json ? "\"0x%llx\"" : "0x%llx",
		    (unsigned long long)load_int(data, (size_t)size, false));
		break;
	case BTF_KIND_FLOAT: {
		double v = 0;

		if (type->size == 4) {
			float f;

			memcpy(&f, data, sizeof(f));
			v = f;
		} else if (type->size == 8) {
			memcpy(&v, data, sizeof(v));
		}
		put(w->out, "%g", v);
		break;
	}
	case BTF_KIND_ARRAY: {
		const struct btf_array *array = btf_array(type);
		__s64 element = btf__resolve_size(w->btf, array->type);

		if (is_char_array(w->btf, type)) {
			put_string_value(w, (const char *)data, strnlen((const char *)data, array->nelems));
			break;
		}
		put(w->out, "[");
		for (i = 0; element > 0 && i < array->nelems; i++) {
			put(w->out, "%s", i ? (w->json ? "," : " ") : "");
			put_btf_value(w, array->type, data + i * element, (size_t)element);
		}
		put(w->out, "]");
		break;
	}
	case BTF_KIND_STRUCT:
		put_struct(w, type, data, (size_t)size);
		break;
	default:
		/* Unions and the rest: the bytes, as the kernel handed them. */
		put(w->out, w->json ? "\"0x" : "0x");
		for (i = 0; i < (size_t)size; i++)
			put(w->out, "%02x", data[i]);
		put(w->out, w->json ? "\"" : "");
		break;
	}
}

/* Bytes without a type: hex. */
static void put_raw(struct cp_sink *out, bool json, const unsigned char *data, size_t size)
{
	size_t i;

	put(out, json ? "\"" : "");
	for (i = 0; i < size; i++)
		put(out, "%02x", data[i]);
	put(out, json ? "\"" : "");
}

static bool needs_block(const struct btf *btf, __u32 type_id, int depth);
static void put_value_lines(struct btf_walk *w, __u32 type_id, const unsigned char *data, size_t size);

static void put_typed(struct btf_walk *w, __u32 type_id, const unsigned char *data, size_t size)
{
	if (type_id)
		put_btf_value(w, type_id, data, size);
	else
		put_raw(w->out, w->json, data, size);
}

int cp_format__program_record(struct cp_text *text, bool json, const struct btf *btf,
			      const struct cp_program_ring_info *ring, const void *data, size_t size,
			      const struct cp_btf_names *names)
{
	struct cp_sink out = cp_sink__text(text);
	struct btf_walk w = { .out = &out, .btf = btf, .names = names, .json = json,
			      .pid = names ? names->pid : 0, .indent = "    " };

	if (!btf || !ring || !data)
		return -EINVAL;
	if (json) {
		put(&out, "{\"type\":\"record\",\"ring\":");
		put_json_value(&out, ring->name);
		put(&out, ",\"record\":");
		put_typed(&w, ring->type_id, data, size);
		put(&out, "}\n");
		return cp_sink__text_done(&out);
	}
	put_text_string(&out, ring->name);
	put(&out, ":");
	/* A record with a stack or a histogram: a member a line, the blocks drawn below. */
	if (ring->type_id && needs_block(btf, ring->type_id, 0)) {
		put_value_lines(&w, ring->type_id, data, size);
	} else {
		put(&out, " ");
		put_typed(&w, ring->type_id, data, size);
	}
	put(&out, "\n");
	return cp_sink__text_done(&out);
}

static const char *map_type_name(int type)
{
	const char *name = libbpf_bpf_map_type_str((enum bpf_map_type)type);

	return name ? name : "unknown";
}

/*
 * A per-CPU value summed over the CPUs when every leaf of its type is an
 * integer (counters, histograms); NULL otherwise (then CPU 0's is shown).
 */
static bool all_integers(const struct btf *btf, __u32 type_id, int depth)
{
	const struct btf_type *type = resolved(btf, &type_id);
	const struct btf_member *member;
	__u16 i;

	if (!type || depth > 8)
		return false;
	if (btf_is_typedef(type))
		return all_integers(btf, type->type, depth + 1);
	if (btf_is_int(type))
		return type->size == 8 || type->size == 4 || type->size == 2 || type->size == 1;
	if (btf_is_array(type))
		return all_integers(btf, btf_array(type)->type, depth + 1);
	if (!btf_is_struct(type))
		return false;
	member = btf_members(type);
	for (i = 0; i < btf_vlen(type); i++, member++)
		if (btf_member_bitfield_size(type, i) || !all_integers(btf, member->type, depth + 1))
			return false;
	return true;
}

/* Adds src into dst leaf by leaf (the value's integers, little-endian). */
static void add_integers(const struct btf *btf, __u32 type_id, unsigned char *dst,
			 const unsigned char *src)
{
	const struct btf_type *type = resolved(btf, &type_id);
	const struct btf_member *member;
	size_t i;

	if (btf_is_typedef(type)) {
		add_integers(btf, type->type, dst, src);
	} else if (btf_is_int(type)) {
		uint64_t a = load_int(dst, type->size, false), b = load_int(src, type->size, false);

		a += b;
		memcpy(dst, &a, type->size);
	} else if (btf_is_array(type)) {
		__s64 element = btf__resolve_size(btf, btf_array(type)->type);

		for (i = 0; element > 0 && i < btf_array(type)->nelems; i++)
			add_integers(btf, btf_array(type)->type, dst + i * element, src + i * element);
	} else if (btf_is_struct(type)) {
		member = btf_members(type);
		for (i = 0; i < btf_vlen(type); i++, member++)
			add_integers(btf, member->type, dst + btf_member_bit_offset(type, i) / 8,
				     src + btf_member_bit_offset(type, i) / 8);
	}
}

/* Whether a value prints as lines of its own (a histogram or a stack, at any depth). */
static bool needs_block(const struct btf *btf, __u32 type_id, int depth)
{
	const struct btf_type *type = resolved(btf, &type_id);
	const struct btf_member *member;
	__u16 i;

	if (!type || depth > 8)
		return false;
	if (is_hist(btf, type) || is_typedef_named(btf, type, "cuprobe_stack_t"))
		return true;
	if (btf_is_typedef(type))
		return needs_block(btf, type->type, depth + 1);
	if (!btf_is_struct(type))
		return false;
	member = btf_members(type);
	for (i = 0; i < btf_vlen(type); i++, member++)
		if (needs_block(btf, member->type, depth + 1))
			return true;
	return false;
}

/* A struct value in text blocks: one member a line, histograms and stacks drawn below. */
static void put_value_lines(struct btf_walk *w, __u32 type_id, const unsigned char *data, size_t size)
{
	__u32 id = type_id;
	const struct btf_type *type = resolved(w->btf, &id);
	const struct btf_member *member;
	uint32_t saved_pid = w->pid, pid;
	__u16 i;

	if (!type || !btf_is_struct(type) || is_hist(w->btf, type)) {
		w->indent = "      ";
		put(w->out, "\n    ");
		put_btf_value(w, type_id, data, size);
		return;
	}
	if (struct_pid(w->btf, type, data, size, &pid))
		w->pid = pid;
	member = btf_members(type);
	for (i = 0; i < btf_vlen(type); i++, member++) {
		const char *name = btf__name_by_offset(w->btf, member->name_off);
		size_t offset = btf_member_bit_offset(type, i) / 8;

		if (!name || !name[0] || !strncmp(name, "pad", 3) || btf_member_bitfield_size(type, i))
			continue;
		put(w->out, "\n    %s: ", name);
		w->indent = "      ";
		put_btf_value(w, member->type, data + offset, size > offset ? size - offset : 0);
	}
	w->pid = saved_pid;
}

int cp_format__program_map(struct cp_text *text, bool json, const struct btf *btf,
			   const struct cp_program_map_info *map, const struct cp_map_entries *entries,
			   const struct cp_btf_names *names)
{
	struct cp_sink out = cp_sink__text(text);
	struct btf_walk w = { .out = &out, .btf = btf, .names = names, .json = json,
			      .pid = names ? names->pid : 0, .indent = "    " };
	unsigned char *value = NULL;
	bool summed, blocks;
	size_t i, cpu;

	if (!btf || !map || !entries)
		return -EINVAL;
	summed = map->per_cpu && map->value_type_id && all_integers(btf, map->value_type_id, 0);
	blocks = !json && map->value_type_id && needs_block(btf, map->value_type_id, 0);
	if (entries->count && !(value = calloc(1, entries->value_stride ? entries->value_stride : 1)))
		return -ENOMEM;
	if (json) {
		put(&out, "{\"type\":\"map\",\"map\":");
		put_json_value(&out, map->name);
		put(&out, ",\"map_type\":\"%s\",\"entries\":[", map_type_name(map->type));
	} else {
		put_text_string(&out, map->name);
		put(&out, " (%s, %zu entries)\n", map_type_name(map->type), entries->count);
	}
	for (i = 0; i < entries->count; i++) {
		const unsigned char *key = entries->keys + i * entries->key_size;
		const unsigned char *values = entries->values + i * entries->cpus * entries->value_stride;
		uint32_t key_pid;
		__u32 key_id = map->key_type_id;
		const struct btf_type *key_type = key_id ? resolved(btf, &key_id) : NULL;

		/* A pid in the key names the value's kernels and stacks too. */
		w.pid = names ? names->pid : 0;
		if (key_type && btf_is_struct(key_type) &&
		    struct_pid(btf, key_type, key, entries->key_size, &key_pid))
			w.pid = key_pid;
		memcpy(value, values, entries->value_size);
		for (cpu = 1; summed && cpu < entries->cpus; cpu++)
			add_integers(btf, map->value_type_id, value, values + cpu * entries->value_stride);
		if (json) {
			put(&out, "%s{\"key\":", i ? "," : "");
			put_typed(&w, map->key_type_id, key, entries->key_size);
			put(&out, ",\"value\":");
			put_typed(&w, map->value_type_id, value, entries->value_size);
			put(&out, "}");
			continue;
		}
		put(&out, "  ");
		put_typed(&w, map->key_type_id, key, entries->key_size);
		put(&out, ":");
		if (blocks) {
			put_value_lines(&w, map->value_type_id, value, entries->value_size);
		} else {
			put(&out, " ");
			w.indent = "    ";
			put_typed(&w, map->value_type_id, value, entries->value_size);
		}
		if (map->per_cpu && !summed)
			put(&out, " (CPU 0 of %zu)", entries->cpus);
		put(&out, "\n");
	}
	put(&out, json ? "]}\n" : "");
	free(value);
	return cp_sink__text_done(&out);
}

int cp_format__program_map_unreadable(struct cp_text *text, bool json,
				      const struct cp_program_map_info *map, int err)
{
	struct cp_sink out = cp_sink__text(text);

	if (json) {
		put(&out, "{\"type\":\"map\",\"map\":");
		put_json_value(&out, map->name);
		put(&out, ",\"map_type\":\"%s\",\"error\":", map_type_name(map->type));
		put_json_value(&out, err == -EOPNOTSUPP ? "map type not printed" : strerror(-err));
		put(&out, "}\n");
	} else {
		put_text_string(&out, map->name);
		put(&out, " (%s): %s\n", map_type_name(map->type),
		    err == -EOPNOTSUPP ? "not printed (cuprobe cannot read this map type)" :
		    strerror(-err));
	}
	return cp_sink__text_done(&out);
}

int cp_format__program_maps_header(struct cp_text *text, bool json, uint64_t elapsed_ns, bool final)
{
	struct cp_sink out = cp_sink__text(text);

	if (json)
		put(&out, "{\"type\":\"maps\",\"elapsed_ns\":%llu,\"final\":%s}\n",
		    (unsigned long long)elapsed_ns, final ? "true" : "false");
	else if (final)
		put(&out, "maps at exit (%.3f s):\n", elapsed_ns / 1e9);
	else
		put(&out, "maps at %.3f s:\n", elapsed_ns / 1e9);
	return cp_sink__text_done(&out);
}

/* ---- the GPU timeline ------------------------------------------------------------------- */

uint32_t cp_xid__process(const struct cp_xid_event *xid)
{
	const char *at = xid ? strstr(xid->msg, "pid=") : NULL;
	unsigned long pid;
	char *end;

	if (!xid)
		return 0;
	if (xid->process)
		return xid->process;
	/* Some Xid messages name the process: "pid=1234, name=python, ...". */
	if (at) {
		pid = strtoul(at + 4, &end, 10);
		if (end != at + 4 && pid > 0 && pid <= UINT32_MAX)
			return (uint32_t)pid;
	}
	return xid->hdr.pid;
}

/* ---- metrics: the exporter's expositions ------------------------------------------------ */

/* FNV-1a over the label values, each ended by a byte no UTF-8 text holds. */
static size_t labels_hash(const struct cp_metric_family *family, const char *const *values)
{
	uint64_t hash = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < family->label_count; i++) {
		const unsigned char *p = (const unsigned char *)(values[i] ? values[i] : "");

		for (; *p; p++)
			hash = (hash ^ *p) * 1099511628211ull;
		hash = (hash ^ 0xff) * 1099511628211ull;
	}
	return (size_t)hash;
}

static bool labels_equal(const struct cp_metric_family *family, const struct cp_metric_sample *s,
			 const char *const *values)
{
	size_t i;

	for (i = 0; i < family->label_count; i++)
		if (strcmp(s->values[i], values[i] ? values[i] : ""))
			return false;
	return true;
}

static void index_insert(struct cp_metric_family *family, size_t position)
{
	size_t mask = family->index_capacity - 1,
	       slot = labels_hash(family, (const char *const *)family->samples[position].values) & mask;

	while (family->index[slot])
		slot = (slot + 1) & mask;
	family->index[slot] = position + 1;
}

/* Keeps the index at most half full: rebuilt twice as large when it would not be. */
static int index_reserve(struct cp_metric_family *family, size_t count)
{
	size_t capacity = family->index_capacity ? family->index_capacity : 64, i;
	size_t *grown;

	if (count * 2 <= family->index_capacity)
		return 0;
	while (count * 2 > capacity)
		capacity *= 2;
	grown = calloc(capacity, sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	free(family->index);
	family->index = grown;
	family->index_capacity = capacity;
	for (i = 0; i < family->sample_count; i++)
		index_insert(family, i);
	return 0;
}

static struct cp_metric_sample *add_sample(struct cp_metric_family *family, const char *const *values)
{
	struct cp_metric_sample *sample;
	size_t i;

	if (index_reserve(family, family->sample_count + 1))
		return NULL;
	if (family->sample_count == family->sample_capacity) {
		size_t capacity = family->sample_capacity ? family->sample_capacity * 2 : 16;
		struct cp_metric_sample *grown = realloc(family->samples, capacity * sizeof(*grown));

		if (!grown)
			return NULL;
		family->samples = grown;
		family->sample_capacity = capacity;
	}
	sample = &family->samples[family->sample_count];
	memset(sample, 0, sizeof(*sample));
	for (i = 0; i < family->label_count && i < CP_METRIC_LABELS_MAX; i++) {
		sample->values[i] = strdup(values[i] ? values[i] : "");
		if (!sample->values[i]) {
			while (i--)
				free(sample->values[i]);
			return NULL;
		}
	}
	index_insert(family, family->sample_count);
	family->sample_count++;
	return sample;
}

struct cp_metric_sample *cp_metric_family__add(struct cp_metric_family *family,
					       const char *const *values)
{
	return family && values ? add_sample(family, values) : NULL;
}

struct cp_metric_sample *cp_metric_family__find(struct cp_metric_family *family,
						const char *const *values)
{
	size_t mask, slot;

	if (!family || !values)
		return NULL;
	if (family->index_capacity) {
		mask = family->index_capacity - 1;
		for (slot = labels_hash(family, values) & mask; family->index[slot];
		     slot = (slot + 1) & mask) {
			struct cp_metric_sample *s = &family->samples[family->index[slot] - 1];

			if (labels_equal(family, s, values))
				return s;
		}
	}
	return add_sample(family, values);
}

void cp_metric_family__clear(struct cp_metric_family *family)
{
	size_t i, j;

	if (!family)
		return;
	for (i = 0; i < family->sample_count; i++)
		for (j = 0; j < family->label_count; j++)
			free(family->samples[i].values[j]);
	family->sample_count = 0;
	if (family->index)
		memset(family->index, 0, family->index_capacity * sizeof(*family->index));
}

void cp_metric_family__release(struct cp_metric_family *family)
{
	if (!family)
		return;
	cp_metric_family__clear(family);
	free(family->samples);
	free(family->index);
	family->samples = NULL;
	family->index = NULL;
	family->sample_capacity = family->index_capacity = 0;
}

enum cp_exposition cp_exposition__from_accept(const char *accept)
{
	if (accept && strstr(accept, "application/vnd.google.protobuf") &&
	    strstr(accept, "io.prometheus.client.MetricFamily"))
		return CP_EXPOSITION_PROTOBUF;
	if (accept && strstr(accept, "application/openmetrics-text"))
		return CP_EXPOSITION_OPENMETRICS;
	return CP_EXPOSITION_PROMETHEUS_TEXT;
}

const char *cp_exposition__content_type(enum cp_exposition exposition)
{
	switch (exposition) {
	case CP_EXPOSITION_PROTOBUF:
		return "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
	case CP_EXPOSITION_OPENMETRICS:
		return "application/openmetrics-text; version=1.0.0; charset=utf-8";
	default:
		return "text/plain; version=0.0.4; charset=utf-8";
	}
}

/* A label value: backslash, double quote and newline escaped (both text formats). */
static void put_label_value(struct cp_sink *out, const char *value)
{
	const char *p = value;

	while (*p) {
		size_t plain = strcspn(p, "\\\"\n");

		put_bytes(out, p, plain);
		p += plain;
		if (!*p)
			break;
		put_str(out, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n");
		p++;
	}
}

/* {a="x",b="y"} with an extra label (le) when given; nothing for no labels. */
static void put_labels(struct cp_sink *out, const struct cp_metric_family *f,
		       const struct cp_metric_sample *s, const char *extra_name, const char *extra_value)
{
	size_t i;

	if (!f->label_count && !extra_name)
		return;
	put_str(out, "{");
	for (i = 0; i < f->label_count; i++) {
		if (i)
			put_str(out, ",");
		put_str(out, f->label_names[i]);
		put_str(out, "=\"");
		put_label_value(out, s->values[i]);
		put_str(out, "\"");
	}
	if (extra_name) {
		if (f->label_count)
			put_str(out, ",");
		put_str(out, extra_name);
		put_str(out, "=\"");
		put_str(out, extra_value);
		put_str(out, "\"");
	}
	put_str(out, "}");
}

/* A float the way both formats read it: integers plain, the rest %.17g. */
static void put_number(struct cp_sink *out, double value)
{
	if (value == (double)(long long)value && value < 9e15 && value > -9e15) {
		if (value < 0)
			put_str(out, "-");
		put_u64(out, (uint64_t)(value < 0 ? -(long long)value : (long long)value));
	} else {
		put(out, "%.17g", value);
	}
}

/* The upper bound of log2 bucket b in seconds: 2^b ns. */
static double bucket_le_seconds(int b)
{
	return (double)(1ull << b) * 1e-9;
}

/*
 * HELP text and its newline: backslash and newline escaped in both formats,
 * the double quote too in OpenMetrics (its HELP is an escaped string).
 */
static void put_help(struct cp_sink *out, const char *help, bool openmetrics)
{
	const char *p = help;

	while (*p) {
		size_t plain = strcspn(p, openmetrics ? "\\\n\"" : "\\\n");

		put_bytes(out, p, plain);
		p += plain;
		if (!*p)
			break;
		put_str(out, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n");
		p++;
	}
	put_str(out, "\n");
}

/* One line: name, labels (with le when given), a space, the value, a newline. */
static void put_sample_line(struct cp_sink *out, const struct cp_metric_family *f,
			    const struct cp_metric_sample *s, const char *suffix, const char *le,
			    uint64_t count, const double *value)
{
	put_str(out, f->name);
	put_str(out, suffix);
	put_labels(out, f, s, le ? "le" : NULL, le);
	put_str(out, " ");
	if (value)
		put_number(out, *value);
	else
		put_u64(out, count);
	put_str(out, "\n");
}

static void put_text_family(struct cp_sink *out, const struct cp_metric_family *f, bool openmetrics)
{
	const char *suffix = f->type == CP_METRIC_COUNTER ? "_total" : "";
	const char *type = f->type == CP_METRIC_COUNTER ? "counter" :
			   f->type == CP_METRIC_GAUGE ? "gauge" : "histogram";
	char le[CP_HIST_BUCKETS][32];
	size_t i;
	int b;

	/* OpenMetrics names the family without _total; Prometheus text names the series. */
	if (openmetrics) {
		put(out, "# TYPE %s %s\n", f->name, type);
		if (f->unit)
			put(out, "# UNIT %s %s\n", f->name, f->unit);
		put(out, "# HELP %s ", f->name);
		put_help(out, f->help, true);
	} else {
		put(out, "# HELP %s%s ", f->name, suffix);
		put_help(out, f->help, false);
		put(out, "# TYPE %s%s %s\n", f->name, suffix, type);
	}
	if (f->type == CP_METRIC_HISTOGRAM)
		for (b = 0; b < CP_HIST_BUCKETS - 1; b++)
			snprintf(le[b], sizeof(le[b]), "%.17g", bucket_le_seconds(b));
	for (i = 0; i < f->sample_count; i++) {
		const struct cp_metric_sample *s = &f->samples[i];
		uint64_t cumulative = 0;

		if (f->type != CP_METRIC_HISTOGRAM) {
			put_sample_line(out, f, s, suffix, NULL, 0, &s->value);
			continue;
		}
		/* Exact classic buckets: le = 2^b ns; the last bucket is +Inf. */
		for (b = 0; b < CP_HIST_BUCKETS - 1; b++) {
			cumulative += s->buckets[b];
			put_sample_line(out, f, s, "_bucket", le[b], cumulative, NULL);
		}
		put_sample_line(out, f, s, "_bucket", "+Inf", s->count, NULL);
		put_sample_line(out, f, s, "_count", NULL, s->count, NULL);
		put_sample_line(out, f, s, "_sum", NULL, 0, &s->sum);
	}
}

/* ---- protobuf (io.prometheus.client.MetricFamily, length-delimited) ---- */

/* A native histogram of schema 0 from log2 ns buckets: one span, counts as deltas. */
static int native_histogram(Io__Prometheus__Client__Histogram *h, const struct cp_metric_sample *s,
			    Io__Prometheus__Client__BucketSpan *span, int64_t *deltas,
			    Io__Prometheus__Client__BucketSpan **spans)
{
	int first = -1, last = -1, b;
	int64_t previous = 0;

	for (b = 0; b < CP_HIST_BUCKETS; b++)
		if (s->buckets[b]) {
			if (first < 0)
				first = b;
			last = b;
		}
	h->has_schema = true;
	h->schema = 0;
	h->has_zero_threshold = true;
	h->zero_threshold = 0;
	h->has_zero_count = true;
	h->zero_count = 0;
	if (first < 0)
		return 0;
	/*
	 * Native bucket i holds (2^(i-1), 2^i] s; 2^b ns = 2^(b - 29.9) s lies in
	 * bucket b - 29: each log2 bucket is counted where its upper bound falls.
	 */
	io__prometheus__client__bucket_span__init(span);
	span->has_offset = true;
	span->offset = first - 29;
	span->has_length = true;
	span->length = (uint32_t)(last - first + 1);
	for (b = first; b <= last; b++) {
		deltas[b - first] = (int64_t)s->buckets[b] - previous;
		previous = (int64_t)s->buckets[b];
	}
	spans[0] = span;
	h->n_positive_span = 1;
	h->positive_span = spans;
	h->n_positive_delta = (size_t)(last - first + 1);
	h->positive_delta = deltas;
	return 0;
}

static size_t varint(uint8_t *out, uint64_t value)
{
	size_t n = 0;

	do {
		out[n] = (uint8_t)(value & 0x7f);
		value >>= 7;
		if (value)
			out[n] |= 0x80;
		n++;
	} while (value);
	return n;
}

static int put_protobuf_family(struct cp_sink *out, const struct cp_metric_family *f)
{
	Io__Prometheus__Client__MetricFamily family = IO__PROMETHEUS__CLIENT__METRIC_FAMILY__INIT;
	size_t n = f->sample_count, i, j, labels = f->label_count, size;
	Io__Prometheus__Client__Metric *metrics = calloc(n ? n : 1, sizeof(*metrics));
	Io__Prometheus__Client__Metric **metric_ptrs = calloc(n ? n : 1, sizeof(*metric_ptrs));
	Io__Prometheus__Client__LabelPair *pairs = calloc((n ? n : 1) * (labels ? labels : 1), sizeof(*pairs));
	Io__Prometheus__Client__LabelPair **pair_ptrs = calloc((n ? n : 1) * (labels ? labels : 1),
							       sizeof(*pair_ptrs));
	Io__Prometheus__Client__Counter *counters = calloc(n ? n : 1, sizeof(*counters));
	Io__Prometheus__Client__Gauge *gauges = calloc(n ? n : 1, sizeof(*gauges));
	Io__Prometheus__Client__Histogram *histograms = calloc(n ? n : 1, sizeof(*histograms));
	Io__Prometheus__Client__Bucket *buckets = calloc((n ? n : 1) * CP_HIST_BUCKETS, sizeof(*buckets));
	Io__Prometheus__Client__Bucket **bucket_ptrs = calloc((n ? n : 1) * CP_HIST_BUCKETS,
							      sizeof(*bucket_ptrs));
	Io__Prometheus__Client__BucketSpan *spans = calloc(n ? n : 1, sizeof(*spans));
	Io__Prometheus__Client__BucketSpan **span_ptrs = calloc(n ? n : 1, sizeof(*span_ptrs));
	int64_t *deltas = calloc((n ? n : 1) * CP_HIST_BUCKETS, sizeof(*deltas));
	char name[256];
	uint8_t prefix[10], *packed = NULL;
	int err = -ENOMEM;

	if (!metrics || !metric_ptrs || !pairs || !pair_ptrs || !counters || !gauges || !histograms ||
	    !buckets || !bucket_ptrs || !spans || !span_ptrs || !deltas)
		goto out_free;
	snprintf(name, sizeof(name), "%s%s", f->name, f->type == CP_METRIC_COUNTER ? "_total" : "");
	family.name = name;
	family.help = (char *)f->help;
	family.has_type = true;
	family.type = f->type == CP_METRIC_COUNTER ? IO__PROMETHEUS__CLIENT__METRIC_TYPE__COUNTER :
		      f->type == CP_METRIC_GAUGE ? IO__PROMETHEUS__CLIENT__METRIC_TYPE__GAUGE :
		      IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM;
	for (i = 0; i < n; i++) {
		const struct cp_metric_sample *s = &f->samples[i];
		Io__Prometheus__Client__Metric *m = &metrics[i];
		uint64_t cumulative = 0;
		int b;

		io__prometheus__client__metric__init(m);
		for (j = 0; j < labels; j++) {
			Io__Prometheus__Client__LabelPair *pair = &pairs[i * labels + j];

			io__prometheus__client__label_pair__init(pair);
			pair->name = (char *)f->label_names[j];
			pair->value = s->values[j];
			pair_ptrs[i * labels + j] = pair;
		}
		m->n_label = labels;
		m->label = &pair_ptrs[i * labels];
		if (f->type == CP_METRIC_COUNTER) {
			io__prometheus__client__counter__init(&counters[i]);
			counters[i].has_value = true;
			counters[i].value = s->value;
			m->counter = &counters[i];
		} else if (f->type == CP_METRIC_GAUGE) {
			io__prometheus__client__gauge__init(&gauges[i]);
			gauges[i].has_value = true;
			gauges[i].value = s->value;
			m->gauge = &gauges[i];
		} else {
			Io__Prometheus__Client__Histogram *h = &histograms[i];

			io__prometheus__client__histogram__init(h);
			h->has_sample_count = true;
			h->sample_count = s->count;
			h->has_sample_sum = true;
			h->sample_sum = s->sum;
			for (b = 0; b < CP_HIST_BUCKETS - 1; b++) {
				Io__Prometheus__Client__Bucket *bucket = &buckets[i * CP_HIST_BUCKETS + b];

				io__prometheus__client__bucket__init(bucket);
				cumulative += s->buckets[b];
				bucket->has_cumulative_count = true;
				bucket->cumulative_count = cumulative;
				bucket->has_upper_bound = true;
				bucket->upper_bound = bucket_le_seconds(b);
				bucket_ptrs[i * CP_HIST_BUCKETS + b] = bucket;
			}
			h->n_bucket = CP_HIST_BUCKETS - 1;
			h->bucket = &bucket_ptrs[i * CP_HIST_BUCKETS];
			native_histogram(h, s, &spans[i], &deltas[i * CP_HIST_BUCKETS], &span_ptrs[i]);
			m->histogram = h;
		}
		metric_ptrs[i] = m;
	}
	family.n_metric = n;
	family.metric = metric_ptrs;
	size = io__prometheus__client__metric_family__get_packed_size(&family);
	packed = malloc(size ? size : 1);
	if (!packed)
		goto out_free;
	io__prometheus__client__metric_family__pack(&family, packed);
	put_bytes(out, (const char *)prefix, varint(prefix, size));
	put_bytes(out, (const char *)packed, size);
	err = out->overflow ? -ENOMEM : 0;
out_free:
	free(packed);
	free(metrics);
	free(metric_ptrs);
	free(pairs);
	free(pair_ptrs);
	free(counters);
	free(gauges);
	free(histograms);
	free(buckets);
	free(bucket_ptrs);
	free(spans);
	free(span_ptrs);
	free(deltas);
	return err;
}

int cp_format__metrics(struct cp_text *text, enum cp_exposition exposition,
		       const struct cp_metric_family *families, size_t count)
{
	struct cp_sink out = cp_sink__text(text);
	size_t i;

	for (i = 0; i < count; i++) {
		if (exposition == CP_EXPOSITION_PROTOBUF) {
			if (put_protobuf_family(&out, &families[i])) {
				out.overflow = true;
				break;
			}
			continue;
		}
		put_text_family(&out, &families[i], exposition == CP_EXPOSITION_OPENMETRICS);
	}
	if (exposition == CP_EXPOSITION_OPENMETRICS)
		put(&out, "# EOF\n");
	return cp_sink__text_done(&out);
}

/* ---- Chrome trace-event JSON (cuprobe trace --perfetto) ---------------------------------- */

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

int cp_format__chrome_process_name(struct cp_chrome_out *chrome, uint32_t pid, const char *comm)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	char name[64];

	task_name(name, sizeof(name), comm, "pid", pid);
	put_chrome_metadata(&out, chrome, true, pid, pid, name);
	return cp_sink__text_done(&out);
}

int cp_format__chrome_thread_name(struct cp_chrome_out *chrome, uint32_t pid, uint32_t tid,
				  const char *comm)
{
	struct cp_sink out = cp_sink__text(chrome->text);
	char name[64];

	task_name(name, sizeof(name), comm, "tid", tid);
	put_chrome_metadata(&out, chrome, false, pid, tid, name);
	return cp_sink__text_done(&out);
}

int cp_format__chrome_stream_name(struct cp_chrome_out *chrome, uint32_t track_pid,
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

/* Whether --json writes a "result" for records of this type. */
static bool json_has_result(enum cp_event_type type)
{
	switch (type) {
	case CP_EV_ALLOC: case CP_EV_SYNC: case CP_EV_NAME: case CP_EV_MODULE:
	case CP_EV_VMM: case CP_EV_CONTEXT: case CP_EV_RETURN:
		return true;
	default:
		return false;
	}
}

static void put_chrome_flow_id(struct cp_sink *out, const char *key, uint64_t flow_id)
{
	put(out, ",\"%s\":\"0x%llx\"", key, (unsigned long long)flow_id);
}

int cp_format__chrome_call(struct cp_chrome_out *chrome, const struct cp_return_event *ret,
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
	cp_json__record_fields(&out, record ? record : (const union cp_event *)ret, names);
	if (record && !json_has_result(record->hdr.type) && ret->result)
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

int cp_format__chrome_kernel(struct cp_chrome_out *chrome, const struct cp_gpu_interval *interval,
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
	put_chrome_start(&out, chrome, "b", "cuda", track_pid, track_pid, start);
	put(&out, ",\"name\":");
	put_json_value(&out, shown);
	put_chrome_flow_id(&out, "id", flow_id);
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
	put_chrome_start(&out, chrome, "e", "cuda", track_pid, track_pid, interval->done_by_ns);
	put(&out, ",\"name\":");
	put_json_value(&out, shown);
	put_chrome_flow_id(&out, "id", flow_id);
	put(&out, "}");
	return cp_sink__text_done(&out);
}

int cp_format__chrome_counter(struct cp_chrome_out *chrome, uint32_t pid, uint64_t time_ns,
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

int cp_format__chrome_instant(struct cp_chrome_out *chrome, const union cp_event *event,
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
	cp_json__record_fields(&out, event, names);
	put(&out, "}}");
	return cp_sink__text_done(&out);
}

int cp_format__chrome_close(struct cp_chrome_out *chrome)
{
	struct cp_sink out = cp_sink__text(chrome->text);

	put(&out, chrome->events ? "\n]\n" : "[]\n");
	return cp_sink__text_done(&out);
}
