/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The byte sink every format writes into (internal to userspace/format/):
 * a caller's fixed buffer (one record line), or a growable cp_text (reports,
 * trace events). One set of put_* appenders for both; a write that does not
 * fit a fixed buffer, or memory that cannot grow, sets overflow and every
 * later write does nothing, so a formatter checks once, at its end.
 */
#ifndef CUPROBE_FORMAT_SINK_H
#define CUPROBE_FORMAT_SINK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format.h"

struct cp_sink {
	char *buf;
	size_t len;
	size_t used;
	bool overflow;
	struct cp_text *text;  /* growable: buf/len/used mirror it; NULL for a fixed buffer */
};

/* A sink appending to text (its bytes kept). */
static inline struct cp_sink cp_sink__text(struct cp_text *text)
{
	struct cp_sink out = { .buf = text->data, .len = text->capacity, .used = text->len,
			       .text = text };

	return out;
}

/* The end of a formatter writing a fixed buffer: the length, or -ENOSPC. */
static inline int cp_sink__finish(const struct cp_sink *out)
{
	return out->overflow ? -ENOSPC : (int)out->used;
}

/* The end of a formatter writing a cp_text: 0, or -ENOMEM with text->failed set. */
int cp_sink__text_done(struct cp_sink *out);
/* Room for need bytes in a growable sink: false when it cannot grow. */
bool cp_sink__grow(struct cp_sink *out, size_t need);
void cp_sink__bytes_growing(struct cp_sink *out, const char *s, size_t n);

/* printf into the sink. */
void put(struct cp_sink *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The hot paths' appenders (a launch line is written a million times a
 * second): bytes, decimal and hex without printf's parsing. Inlined where it
 * fits, so that a literal's copy is a few stores (the call and memcpy's size
 * dispatch were a third of a launch line's time).
 */
static inline __attribute__((always_inline)) void put_bytes(struct cp_sink *out, const char *s,
							    size_t n)
{
	if (__builtin_expect(!out->overflow && out->used + n + 1 <= out->len, 1)) {
		memcpy(out->buf + out->used, s, n);
		out->used += n;
		out->buf[out->used] = '\0';
		if (out->text)
			out->text->len = out->used;
		return;
	}
	cp_sink__bytes_growing(out, s, n);
}

/* A string literal, its length counted by the compiler. */
#define put_lit(out, literal) put_bytes((out), (literal), sizeof(literal) - 1)

static inline void put_str(struct cp_sink *out, const char *s)
{
	put_bytes(out, s, strlen(s));
}

/* Two digits per division: a timestamp has 19. */
static inline void put_u64(struct cp_sink *out, uint64_t v)
{
	static const char pairs[] =
		"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	char digits[24];
	int i = sizeof(digits);

	if (v < 10) {	/* most dims and counts */
		digits[0] = (char)('0' + v);
		put_bytes(out, digits, 1);
		return;
	}
	while (v >= 100) {
		unsigned pair = (unsigned)(v % 100) * 2;

		v /= 100;
		digits[--i] = pairs[pair + 1];
		digits[--i] = pairs[pair];
	}
	if (v >= 10) {
		digits[--i] = pairs[v * 2 + 1];
		digits[--i] = pairs[v * 2];
	} else {
		digits[--i] = (char)('0' + v);
	}
	put_bytes(out, digits + i, sizeof(digits) - i);
}

static inline void put_i64(struct cp_sink *out, int64_t v)
{
	if (v < 0) {
		put_lit(out, "-");
		put_u64(out, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(out, (uint64_t)v);
	}
}

/* "0x..." lowercase, no leading zeros (printf's %#llx but 0x0 for 0). */
static inline void put_hex(struct cp_sink *out, uint64_t v)
{
	static const char hex[] = "0123456789abcdef";
	char digits[20];
	int i = sizeof(digits);

	do {
		digits[--i] = hex[v & 15];
		v >>= 4;
	} while (v);
	digits[--i] = 'x';
	digits[--i] = '0';
	put_bytes(out, digits + i, sizeof(digits) - i);
}

static inline void put_spaces(struct cp_sink *out, size_t n)
{
	static const char spaces[] = "                                ";

	while (n) {
		size_t chunk = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;

		put_bytes(out, spaces, chunk);
		n -= chunk;
	}
}

/* v right-aligned in width columns (space padded), as %*llu. */
static inline void put_u64_width(struct cp_sink *out, uint64_t v, int width)
{
	char digits[24];
	int i = sizeof(digits), n;

	do {
		digits[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	n = (int)sizeof(digits) - i;
	if (n < width)
		put_spaces(out, (size_t)(width - n));
	put_bytes(out, digits + i, sizeof(digits) - i);
}

/* A JSON string value, quoted and escaped (cp_json__escape); null for NULL. */
void put_json_value(struct cp_sink *out, const char *value);
/* ,"key":value with value as put_json_value writes it. */
void put_json_string(struct cp_sink *out, const char *key, const char *value);
/* A name or path in a text line, escaped (cp_text__escape): one line, harmless to a terminal. */
void put_text_string(struct cp_sink *out, const char *s);

#endif
