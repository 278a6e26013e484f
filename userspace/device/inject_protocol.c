// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The plan and the reports as bytes (inject_protocol.h): little-endian
 * integers, strings as a length and their bytes. Decoding checks every
 * length against what is left.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject_protocol.h"

static const char plan_magic[16] = "cuprobe-plan\0\0\0\2";

struct writer {
	unsigned char *buf;
	size_t len, capacity;
	bool failed;
};

static void put(struct writer *w, const void *data, size_t n)
{
	if (w->failed)
		return;
	if (w->len + n > w->capacity) {
		size_t capacity = w->capacity ? w->capacity : 4096;
		unsigned char *grown;

		while (capacity < w->len + n)
			capacity *= 2;
		grown = realloc(w->buf, capacity);
		if (!grown) {
			w->failed = true;
			return;
		}
		w->buf = grown;
		w->capacity = capacity;
	}
	memcpy(w->buf + w->len, data, n);
	w->len += n;
}

static void put_u32(struct writer *w, uint32_t v)
{
	put(w, &v, sizeof(v));
}

static void put_u64(struct writer *w, uint64_t v)
{
	put(w, &v, sizeof(v));
}

static void put_str(struct writer *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	put_u32(w, (uint32_t)n);
	put(w, s, n);
}

int cp_inject_plan__encode(const struct cp_inject_plan *plan, void **buf, size_t *len)
{
	struct writer w = { 0 };
	size_t i;

	if (!plan || !buf || !len || plan->program_count > CP_INJECT_MAX_PROGRAMS ||
	    plan->map_count > CP_INJECT_MAX_MAPS)
		return -EINVAL;
	put(&w, plan_magic, sizeof(plan_magic));
	put_u64(&w, plan->magic);
	put_u32(&w, (uint32_t)plan->report_fd);
	put_u32(&w, (uint32_t)plan->launch_slots_fd);
	put_u32(&w, plan->launch_slot_count);
	put_u32(&w, (uint32_t)plan->program_count);
	put_u32(&w, (uint32_t)plan->map_count);
	for (i = 0; i < plan->program_count; i++) {
		const struct cp_inject_program *p = &plan->programs[i];

		put_str(&w, p->name);
		put_str(&w, p->glob);
		put_str(&w, p->function);
		put_u32(&w, p->at_exit);
		put_u32(&w, p->uses_shadow);
	}
	for (i = 0; i < plan->map_count; i++) {
		const struct cp_inject_map *m = &plan->maps[i];

		if (m->index >= CP_INJECT_MAX_MAP_INDEX) {
			free(w.buf);
			return -EINVAL;
		}
		put_u32(&w, m->index);
		put_u32(&w, (uint32_t)m->fd);
		put_u32(&w, m->value_size);
		put_u32(&w, m->max_entries);
		put_u32(&w, m->read_only);
		put_str(&w, m->name);
	}
	put_str(&w, plan->functions);
	if (w.failed || w.len > CP_INJECT_PLAN_MAX) {
		free(w.buf);
		return w.failed ? -ENOMEM : -EFBIG;
	}
	*buf = w.buf;
	*len = w.len;
	return 0;
}

struct reader {
	const unsigned char *buf;
	size_t len, at;
	bool failed;
};

static void get(struct reader *r, void *out, size_t n)
{
	if (r->failed || n > r->len - r->at) {
		r->failed = true;
		memset(out, 0, n);
		return;
	}
	memcpy(out, r->buf + r->at, n);
	r->at += n;
}

static uint32_t get_u32(struct reader *r)
{
	uint32_t v;

	get(r, &v, sizeof(v));
	return v;
}

static uint64_t get_u64(struct reader *r)
{
	uint64_t v;

	get(r, &v, sizeof(v));
	return v;
}

/* A string without NULs, in a new NUL-terminated buffer; NULL (and failed) otherwise. */
static char *get_str(struct reader *r)
{
	uint32_t n = get_u32(r);
	char *s;

	if (r->failed || n > r->len - r->at || memchr(r->buf + r->at, '\0', n)) {
		r->failed = true;
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (!s) {
		r->failed = true;
		return NULL;
	}
	memcpy(s, r->buf + r->at, n);
	s[n] = '\0';
	r->at += n;
	return s;
}

static int plan_error(char *error, size_t error_size, const char *what)
{
	if (error && error_size)
		snprintf(error, error_size, "the plan cuprobe passed is unreadable: %s", what);
	return -EINVAL;
}

int cp_inject_plan__decode(const void *buf, size_t len, struct cp_inject_plan *plan, char *error,
			   size_t error_size)
{
	struct reader r = { .buf = buf, .len = len };
	char magic[sizeof(plan_magic)];
	uint32_t programs, maps, i;

	if (!buf || !plan)
		return -EINVAL;
	memset(plan, 0, sizeof(*plan));
	get(&r, magic, sizeof(magic));
	if (r.failed || memcmp(magic, plan_magic, sizeof(magic)))
		return plan_error(error, error_size, "not a plan of this cuprobe version");
	plan->magic = get_u64(&r);
	plan->report_fd = (int)get_u32(&r);
	plan->launch_slots_fd = (int)get_u32(&r);
	plan->launch_slot_count = get_u32(&r);
	programs = get_u32(&r);
	maps = get_u32(&r);
	if (r.failed || programs > CP_INJECT_MAX_PROGRAMS || maps > CP_INJECT_MAX_MAPS)
		return plan_error(error, error_size, "too many programs or maps");
	plan->programs = calloc(programs ? programs : 1, sizeof(*plan->programs));
	plan->maps = calloc(maps ? maps : 1, sizeof(*plan->maps));
	if (!plan->programs || !plan->maps) {
		cp_inject_plan__release(plan);
		return plan_error(error, error_size, "out of memory");
	}
	for (i = 0; i < programs && !r.failed; i++) {
		struct cp_inject_program *p = &plan->programs[plan->program_count++];

		p->name = get_str(&r);
		p->glob = get_str(&r);
		p->function = get_str(&r);
		p->at_exit = get_u32(&r) != 0;
		p->uses_shadow = get_u32(&r) != 0;
	}
	for (i = 0; i < maps && !r.failed; i++) {
		struct cp_inject_map *m = &plan->maps[plan->map_count++];

		m->index = get_u32(&r);
		m->fd = (int)get_u32(&r);
		m->value_size = get_u32(&r);
		m->max_entries = get_u32(&r);
		m->read_only = get_u32(&r) != 0;
		m->name = get_str(&r);
	}
	plan->functions = get_str(&r);
	if (r.failed || r.at != r.len) {
		cp_inject_plan__release(plan);
		return plan_error(error, error_size, r.failed ? "cut short" : "bytes after its end");
	}
	for (i = 0; i < plan->map_count; i++)
		if (plan->maps[i].index >= CP_INJECT_MAX_MAP_INDEX) {
			cp_inject_plan__release(plan);
			return plan_error(error, error_size, "a map index out of range");
		}
	return 0;
}

void cp_inject_plan__release(struct cp_inject_plan *plan)
{
	size_t i;

	if (!plan)
		return;
	for (i = 0; i < plan->program_count; i++) {
		free(plan->programs[i].name);
		free(plan->programs[i].glob);
		free(plan->programs[i].function);
	}
	for (i = 0; i < plan->map_count; i++)
		free(plan->maps[i].name);
	free(plan->programs);
	free(plan->maps);
	free(plan->functions);
	memset(plan, 0, sizeof(*plan));
}

/* ---- reports ----------------------------------------------------------------------- */

#define REPORT_FIXED 24u /* kind, pid, arch, pad (u32 each), probes (u64) */

const char *cp_inject_report__kind_name(enum cp_inject_report_kind kind)
{
	static const char *const names[] = {
#define CP_INJECT_REPORT_NAME(kind, text) text,
		CP_INJECT_REPORT_KINDS(CP_INJECT_REPORT_NAME)
#undef CP_INJECT_REPORT_NAME
	};

	return kind < CP_INJECT_REPORT_KIND_MAX ? names[kind] : "unknown";
}

/* A string as a u16 length and its bytes, cut to what room is left (keeping 2 bytes a string). */
static size_t put_report_str(unsigned char *buf, size_t at, size_t size, const char *s, size_t reserve)
{
	size_t n = s ? strlen(s) : 0;
	uint16_t len16;

	if (at + 2 + reserve > size)
		return at;
	if (n > size - at - 2 - reserve)
		n = size - at - 2 - reserve;
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	len16 = (uint16_t)n;
	memcpy(buf + at, &len16, 2);
	memcpy(buf + at + 2, s, n);
	return at + 2 + n;
}

size_t cp_inject_report__encode(const struct cp_inject_report *report, void *out, size_t size)
{
	unsigned char *buf = out;
	uint32_t fixed[4] = { report->kind, report->pid, report->arch, 0 };
	size_t at;

	if (size > CP_INJECT_REPORT_MAX)
		size = CP_INJECT_REPORT_MAX;
	if (size < REPORT_FIXED + 6)
		return 0;
	memcpy(buf, fixed, sizeof(fixed));
	memcpy(buf + 16, &report->probes, sizeof(report->probes));
	at = put_report_str(buf, REPORT_FIXED, size, report->api, 4);
	at = put_report_str(buf, at, size, report->name, 2);
	return put_report_str(buf, at, size, report->detail, 0);
}

/* One string of a report, copied NUL-terminated to *text, which moves past it. */
static const char *get_report_str(const unsigned char *buf, size_t len, size_t *at, char **text)
{
	uint16_t n;
	char *s = *text;

	if (len - *at < 2)
		return NULL;
	memcpy(&n, buf + *at, 2);
	*at += 2;
	if (n > len - *at || memchr(buf + *at, '\0', n))
		return NULL;
	memcpy(s, buf + *at, n);
	s[n] = '\0';
	*at += n;
	*text += n + 1;
	return s;
}

int cp_inject_report__decode(const void *in, size_t len, struct cp_inject_report *report,
			     char *strings, size_t strings_size)
{
	const unsigned char *buf = in;
	char *text = strings;
	uint32_t fixed[4];
	size_t at = REPORT_FIXED;

	if (!in || !report || !strings || len < REPORT_FIXED || len > CP_INJECT_REPORT_MAX ||
	    strings_size < len)
		return -EINVAL;
	memcpy(fixed, buf, sizeof(fixed));
	if (fixed[0] >= CP_INJECT_REPORT_KIND_MAX)
		return -EINVAL;
	memset(report, 0, sizeof(*report));
	report->kind = fixed[0];
	report->pid = fixed[1];
	report->arch = fixed[2];
	memcpy(&report->probes, buf + 16, sizeof(report->probes));
	report->api = get_report_str(buf, len, &at, &text);
	report->name = report->api ? get_report_str(buf, len, &at, &text) : NULL;
	report->detail = report->name ? get_report_str(buf, len, &at, &text) : NULL;
	if (!report->detail || at != len)
		return -EINVAL;
	return 0;
}

int cp_device__fail(char *error, size_t error_size, int err, const char *fmt, ...)
{
	va_list ap;

	if (error && error_size) {
		va_start(ap, fmt);
		vsnprintf(error, error_size, fmt, ap);
		va_end(ap);
	}
	return err;
}
