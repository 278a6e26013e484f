// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Users' programs (cuprobe run): their records and maps printed from the
 * object's BTF, as text or JSON. The types cuprobe.bpf.h declares print
 * their meaning (format.h says which); the rest prints as C would show it,
 * padding left out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "output.h"

#define HIST_BAR_WIDTH 40
#define STACK_FRAMES_MAX 32
/*
 * How deep a value is followed: a BTF libbpf parsed but no kernel checked
 * may nest a struct in itself or chain typedefs in a circle (libbpf's own
 * bound on typedef chains is 32).
 */
#define DEPTH_MAX 32

struct btf_walk {
	struct cp_sink *out;
	const struct btf *btf;
	const struct cp_btf_names *names;
	bool json;          /* else text */
	uint32_t pid;       /* the "pid" beside the value being printed, else names->pid */
	const char *indent; /* text blocks (histograms, stacks) start their lines with it */
	int depth;          /* values being printed, one inside the other */
};

/* A name of the BTF: "" for an offset outside its strings. */
static const char *name_of(const struct btf *btf, __u32 name_off)
{
	const char *name = btf__name_by_offset(btf, name_off);

	return name ? name : "";
}

/* Through typedefs other than cuprobe's, and qualifiers: the type the bytes have. */
static const struct btf_type *resolved(const struct btf *btf, __u32 *type_id)
{
	const struct btf_type *type = btf__type_by_id(btf, *type_id);
	int depth = 0;

	while (type && (btf_is_const(type) || btf_is_volatile(type) || btf_is_restrict(type) ||
			btf_kind(type) == BTF_KIND_TYPE_TAG ||
			(btf_is_typedef(type) && strncmp(name_of(btf, type->name_off), "cuprobe_", 8)))) {
		if (++depth > DEPTH_MAX)
			return NULL;
		*type_id = type->type;
		type = btf__type_by_id(btf, *type_id);
	}
	return type;
}

static const char *type_name(const struct btf *btf, const struct btf_type *type)
{
	return type ? name_of(btf, type->name_off) : "";
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
	if (is_signed && size && size < 8 && (v >> (size * 8 - 1)) & 1)
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

/* A Python stack id: "FILE:LINE FUNCTION" of its innermost frame, in the process named by pid. */
static void put_py_stack(struct btf_walk *w, uint64_t stack_id)
{
	struct cp_py_stack_info info = { 0 };
	struct cp_py_frame frame;
	char text[1024];

	if (!stack_id)
		snprintf(text, sizeof(text), "(no Python stack)");
	else if (!w->names || !w->names->python ||
		 cp_python__frames(w->names->python, w->pid, stack_id, &frame, 1, &info) < 1)
		snprintf(text, sizeof(text), "0x%llx", (unsigned long long)stack_id);
	else
		snprintf(text, sizeof(text), "%s:%d %s%s", frame.file, (int)frame.line, frame.function,
			 info.truncated ? " (cut)" : "");
	put_walk_string(w, text);
}

/* The bounds of log2 bucket b: 0 and 1, then 2^(b-1)+1 to 2^b. */
static void hist_bounds(size_t b, unsigned long long *low, unsigned long long *high)
{
	*low = b == 0 ? 0 : b == 1 ? 2 : (1ull << (b - 1)) + 1;
	*high = b == 0 ? 1 : b >= 64 ? ~0ull : 1ull << b;
}

/*
 * The buckets of a struct cuprobe_hist of size bytes: its one member, at
 * offset 0, an array of 8-byte integers within the struct (a BTF can name
 * anything so); 0 when it is not that.
 */
static size_t hist_buckets(const struct btf *btf, const struct btf_type *type, __s64 size)
{
	const struct btf_member *member = btf_members(type);
	__u32 array_id = member->type, element_id;
	const struct btf_type *array = resolved(btf, &array_id), *element;

	if (btf_vlen(type) != 1 || member->offset || !array || !btf_is_array(array))
		return 0;
	element_id = btf_array(array)->type;
	element = resolved(btf, &element_id);
	if (!element || !btf_is_int(element) || element->size != 8 ||
	    btf_array(array)->nelems > (__u64)size / 8)
		return 0;
	return btf_array(array)->nelems;
}

/* Bucket b of the buckets at data (copied: a packed struct may hold them unaligned). */
static __u64 bucket_at(const unsigned char *data, size_t b)
{
	__u64 v;

	memcpy(&v, data + b * sizeof(v), sizeof(v));
	return v;
}

static void put_hist(struct btf_walk *w, const unsigned char *data, size_t count)
{
	unsigned long long total = 0, most = 0, low, high;
	size_t b, first = count, last = 0;
	char range[64];
	int bar;

	for (b = 0; b < count; b++) {
		__u64 v = bucket_at(data, b);

		total += v;
		if (v > most)
			most = v;
		if (v && first == count)
			first = b;
		if (v)
			last = b;
	}
	if (w->json) {
		put(w->out, "{\"count\":%llu,\"buckets\":[", total);
		for (b = first; b < count && b <= last; b++) {
			if (!bucket_at(data, b))
				continue;
			hist_bounds(b, &low, &high);
			put(w->out, "%s{\"low\":%llu,\"high\":%llu,\"count\":%llu}",
			    b == first ? "" : ",", low, high, (unsigned long long)bucket_at(data, b));
		}
		put(w->out, "]}");
		return;
	}
	put(w->out, "%llu values", total);
	for (b = first; b < count && b <= last; b++) {
		hist_bounds(b, &low, &high);
		snprintf(range, sizeof(range), "[%llu, %llu]", low, high);
		bar = most ? (int)((bucket_at(data, b) * HIST_BAR_WIDTH + most - 1) / most) : 0;
		put(w->out, "\n%s%-24s %10llu |%.*s%*s|", w->indent, range,
		    (unsigned long long)bucket_at(data, b), bar,
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

		if (strcmp(name_of(btf, member->name_off), "pid") || !member_type ||
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
		const char *name = name_of(w->btf, member->name_off);
		size_t bit_offset = btf_member_bit_offset(type, i);
		__u32 bits = btf_member_bitfield_size(type, i);

		if (!name[0] || !strncmp(name, "pad", 3) || !strncmp(name, "__pad", 5))
			continue; /* padding says nothing */
		/* Names as the BTF holds them: a compiler's are identifiers, anyone's anything. */
		put(w->out, "%s", first ? "" : w->json ? "," : " ");
		if (w->json) {
			put_json_value(w->out, name);
			put(w->out, ":");
		} else {
			put_text_string(w->out, name);
			put(w->out, "=");
		}
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

static void put_value(struct btf_walk *w, __u32 type_id, const unsigned char *data, size_t avail)
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
	if (is_typedef_named(w->btf, type, "cuprobe_py_stack_t")) {
		put_py_stack(w, load_int(data, (size_t)size, false));
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
	if (is_hist(w->btf, type) && hist_buckets(w->btf, type, size)) {
		put_hist(w, data, hist_buckets(w->btf, type, size));
		return;
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
				name = name_of(w->btf, e[i].name_off);
		if (name && w->json)
			put_json_value(w->out, name);
		else if (name)
			put_text_string(w->out, name);
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

/* A value of type_id within avail bytes at data; "?" (null) beyond DEPTH_MAX. */
static void put_btf_value(struct btf_walk *w, __u32 type_id, const unsigned char *data, size_t avail)
{
	if (w->depth >= DEPTH_MAX) {
		put(w->out, w->json ? "null" : "?");
		return;
	}
	w->depth++;
	put_value(w, type_id, data, avail);
	w->depth--;
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

/* A record of a ring (a program's, or a device ring's with its launch's seq: has_launch). */
static int format_record(struct cp_text *text, enum cp_format format, const struct btf *btf,
			 const char *ring, uint32_t type_id, bool has_launch, uint64_t launch_seq,
			 const void *data, size_t size, const struct cp_btf_names *names)
{
	/* JSON, or text for the other formats. */
	const bool json = format == CP_FORMAT_JSON;
	struct cp_sink out = cp_sink__text(text);
	struct btf_walk w = { .out = &out, .btf = btf, .names = names, .json = json,
			      .pid = names ? names->pid : 0, .indent = "    " };

	if (!btf || !ring || !data)
		return -EINVAL;
	if (json) {
		put(&out, has_launch ? "{\"type\":\"device_record\",\"ring\":" :
				       "{\"type\":\"record\",\"ring\":");
		put_json_value(&out, ring);
		if (has_launch) {
			put(&out, ",\"launch_seq\":");
			put_u64(&out, launch_seq);
		}
		put(&out, ",\"record\":");
		put_typed(&w, type_id, data, size);
		put(&out, "}\n");
		return cp_sink__text_done(&out);
	}
	put_text_string(&out, ring);
	if (has_launch) {
		put(&out, " launch ");
		put_u64(&out, launch_seq);
	}
	put(&out, ":");
	/* A record with a stack or a histogram: a member a line, the blocks drawn below. */
	if (type_id && needs_block(btf, type_id, 0)) {
		put_value_lines(&w, type_id, data, size);
	} else {
		put(&out, " ");
		put_typed(&w, type_id, data, size);
	}
	put(&out, "\n");
	return cp_sink__text_done(&out);
}

int cp_format__program_record(struct cp_text *text, enum cp_format format, const struct btf *btf,
			      const struct cp_program_ring_info *ring, const void *data, size_t size,
			      const struct cp_btf_names *names)
{
	if (!ring)
		return -EINVAL;
	return format_record(text, format, btf, ring->name, ring->type_id, false, 0, data, size,
			     names);
}

int cp_format__device_record(struct cp_text *text, enum cp_format format, const struct btf *btf,
			     const char *ring, uint32_t type_id, uint64_t launch_seq,
			     const void *data, size_t size, const struct cp_btf_names *names)
{
	return format_record(text, format, btf, ring, type_id, true, launch_seq, data, size, names);
}

static void put_count(struct cp_sink *out, const char *key, uint64_t value)
{
	put_str(out, key);
	put_u64(out, value);
}

int cp_format__device_ring_summary(struct cp_text *text, const struct cp_device_ring_summary *s)
{
	struct cp_sink out = cp_sink__text(text);
	size_t i;

	if (!s || !s->ring)
		return -EINVAL;
	put(&out, "{\"type\":\"device_ring\",\"ring\":");
	put_json_value(&out, s->ring);
	put_count(&out, ",\"produced\":", s->produced);
	put_count(&out, ",\"delivered\":", s->delivered);
	put_count(&out, ",\"lost\":", s->lost);
	put_count(&out, ",\"abandoned\":", s->abandoned);
	put_count(&out, ",\"pending\":", s->pending);
	put(&out, ",\"launches\":[");
	for (i = 0; i < s->launch_count; i++) {
		put_count(&out, i ? ",{\"launch_seq\":" : "{\"launch_seq\":", s->launches[i].launch_seq);
		put_count(&out, ",\"delivered\":", s->launches[i].delivered);
		put_count(&out, ",\"lost\":", s->launches[i].lost);
		put(&out, "}");
	}
	put(&out, "]}\n");
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

/*
 * Adds src into dst leaf by leaf (the value's integers, little-endian),
 * within size bytes of each (the BTF's offsets are not trusted to be).
 */
static void add_integers(const struct btf *btf, __u32 type_id, unsigned char *dst,
			 const unsigned char *src, size_t size)
{
	const struct btf_type *type = resolved(btf, &type_id);
	const struct btf_member *member;
	size_t i;

	if (!type)
		return;
	if (btf_is_typedef(type)) {
		add_integers(btf, type->type, dst, src, size);
	} else if (btf_is_int(type) && type->size <= size) {
		uint64_t a = load_int(dst, type->size, false), b = load_int(src, type->size, false);

		a += b;
		memcpy(dst, &a, type->size < sizeof(a) ? type->size : sizeof(a));
	} else if (btf_is_array(type)) {
		__s64 element = btf__resolve_size(btf, btf_array(type)->type);

		for (i = 0; element > 0 && i < btf_array(type)->nelems &&
			    (i + 1) * (size_t)element <= size; i++)
			add_integers(btf, btf_array(type)->type, dst + i * element, src + i * element,
				     (size_t)element);
	} else if (btf_is_struct(type)) {
		member = btf_members(type);
		for (i = 0; i < btf_vlen(type); i++, member++) {
			size_t offset = btf_member_bit_offset(type, i) / 8;

			if (offset < size)
				add_integers(btf, member->type, dst + offset, src + offset, size - offset);
		}
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
		const char *name = name_of(w->btf, member->name_off);
		size_t offset = btf_member_bit_offset(type, i) / 8;

		if (!name[0] || !strncmp(name, "pad", 3) || btf_member_bitfield_size(type, i))
			continue;
		put(w->out, "\n    ");
		put_text_string(w->out, name);
		put(w->out, ": ");
		w->indent = "      ";
		put_btf_value(w, member->type, data + offset, size > offset ? size - offset : 0);
	}
	w->pid = saved_pid;
}

int cp_format__program_map_begin(struct cp_text *text, enum cp_format format,
				 const struct cp_program_map_info *map)
{
	struct cp_sink out = cp_sink__text(text);

	if (!map)
		return -EINVAL;
	if (format == CP_FORMAT_JSON) {
		put(&out, "{\"type\":\"map\",\"map\":");
		put_json_value(&out, map->name);
		put(&out, ",\"map_type\":\"%s\",\"entries\":[", map_type_name(map->type));
	} else {
		put_text_string(&out, map->name);
		put(&out, " (%s)\n", map_type_name(map->type));
	}
	return cp_sink__text_done(&out);
}

int cp_format__program_map_entries(struct cp_text *text, enum cp_format format,
				   const struct btf *btf, const struct cp_program_map_info *map,
				   const struct cp_map_entries *entries, size_t printed_before,
				   const struct cp_btf_names *names)
{
	/* JSON, or text for the other formats. */
	const bool json = format == CP_FORMAT_JSON;
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
			add_integers(btf, map->value_type_id, value, values + cpu * entries->value_stride,
				     entries->value_size);
		if (json) {
			put(&out, "%s{\"key\":", printed_before + i ? "," : "");
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
	free(value);
	return cp_sink__text_done(&out);
}

int cp_format__program_map_end(struct cp_text *text, enum cp_format format,
			       const struct cp_program_map_info *map, size_t printed,
			       uint64_t not_printed, int err)
{
	struct cp_sink out = cp_sink__text(text);

	if (!map)
		return -EINVAL;
	if (format == CP_FORMAT_JSON) {
		put(&out, "],\"not_printed\":%llu", (unsigned long long)not_printed);
		if (err) {
			put(&out, ",\"error\":");
			put_json_value(&out, strerror(-err));
		}
		put(&out, "}\n");
		return cp_sink__text_done(&out);
	}
	if (not_printed)
		put(&out, "  ... %llu more %s not printed\n", (unsigned long long)not_printed,
		    not_printed == 1 ? "entry" : "entries");
	else if (!printed && !err)
		put(&out, "  (no entries)\n");
	if (err)
		put(&out, "  (reading stopped: %s)\n", strerror(-err));
	return cp_sink__text_done(&out);
}

int cp_format__program_map_unreadable(struct cp_text *text, enum cp_format format,
				      const struct cp_program_map_info *map, int err)
{
	/* JSON, or text for the other formats. */
	const bool json = format == CP_FORMAT_JSON;
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

int cp_format__program_maps_header(struct cp_text *text, enum cp_format format,
				   uint64_t elapsed_ns, bool final)
{
	/* JSON, or text for the other formats. */
	const bool json = format == CP_FORMAT_JSON;
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
