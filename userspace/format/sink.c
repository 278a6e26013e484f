// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The byte sink of the output wing (sink.h), and the growable cp_text it fills. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink.h"

bool cp_sink__grow(struct cp_sink *out, size_t need)
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

int cp_sink__text_done(struct cp_sink *out)
{
	if (out->overflow) {
		out->text->failed = true;
		return -ENOMEM;
	}
	return 0;
}

static void put_va(struct cp_sink *out, const char *fmt, va_list args)
{
	va_list ap;
	int n;

	if (out->overflow)
		return;
	for (;;) {
		va_copy(ap, args);
		n = out->len > out->used ?
		    vsnprintf(out->buf + out->used, out->len - out->used, fmt, ap) : -1;
		va_end(ap);
		if (n >= 0 && (size_t)n < out->len - out->used)
			break;
		if (!out->text || !cp_sink__grow(out, out->used + (n > 0 ? (size_t)n : 0) + 256)) {
			out->overflow = true;
			return;
		}
	}
	out->used += n;
	if (out->text)
		out->text->len = out->used;
}

void put(struct cp_sink *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	put_va(out, fmt, ap);
	va_end(ap);
}

void cp_sink__bytes_growing(struct cp_sink *out, const char *s, size_t n)
{
	if (out->overflow)
		return;
	if (out->used + n + 1 > out->len && (!out->text || !cp_sink__grow(out, out->used + n + 256))) {
		out->overflow = true;
		return;
	}
	memcpy(out->buf + out->used, s, n);
	out->used += n;
	out->buf[out->used] = '\0';
	if (out->text)
		out->text->len = out->used;
}

void put_json_value(struct cp_sink *out, const char *value)
{
	size_t room;
	int n;

	if (!value) {
		put_lit(out, "null");
		return;
	}
	/* Escaped in place: at most six bytes out per byte in, and the quotes. */
	room = strlen(value) * 6 + 3;
	if (out->overflow ||
	    (out->used + room > out->len && (!out->text || !cp_sink__grow(out, out->used + room + 256)))) {
		out->overflow = true;
		return;
	}
	out->buf[out->used++] = '"';
	n = cp_json__escape(value, out->buf + out->used, out->len - out->used);
	if (n < 0) {
		out->overflow = true;
		return;
	}
	out->used += (size_t)n;
	put_lit(out, "\"");
}

void put_json_string(struct cp_sink *out, const char *key, const char *value)
{
	put_lit(out, ",\"");
	put_str(out, key);
	put_lit(out, "\":");
	put_json_value(out, value);
}

void put_text_string(struct cp_sink *out, const char *s)
{
	int n;

	if (out->overflow)
		return;
	/* Escaped in place; a growable sink grows for the worst case (4 bytes per byte) and again. */
	while ((n = out->len > out->used ?
		    cp_text__escape(s, out->buf + out->used, out->len - out->used) : -ENOSPC) < 0) {
		if (n != -ENOSPC || !out->text ||
		    !cp_sink__grow(out, out->used + strlen(s) * 4 + 256)) {
			out->overflow = true;
			return;
		}
	}
	out->used += (size_t)n;
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

int cp_text__append(struct cp_text *text, const void *bytes, size_t n)
{
	struct cp_sink out = cp_sink__text(text);

	if (text->failed)
		return -ENOMEM;
	put_bytes(&out, (const char *)bytes, n);
	return cp_sink__text_done(&out);
}

int cp_text__appendf(struct cp_text *text, const char *fmt, ...)
{
	struct cp_sink out = cp_sink__text(text);
	va_list ap;

	if (text->failed)
		return -ENOMEM;
	va_start(ap, fmt);
	put_va(&out, fmt, ap);
	va_end(ap);
	return cp_sink__text_done(&out);
}
