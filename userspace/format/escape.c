// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Escaping for JSON strings and text lines (escape.h): a leaf, calling
 * nothing of cuprobe's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"

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
/* Bytes JSON takes as they are: printable ASCII other than '"' and '\\'. */
static bool json_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

int cp_json__escape(const char *src, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)src;
	size_t used = 0, run;

	if (!src || !buf || !len)
		return -EINVAL;
	while (*p) {
		/*
		 * The common case, names and paths: a run copied at once; and a
		 * valid UTF-8 sequence as it is.
		 */
		for (run = 0; json_plain(p[run]); run++)
			;
		if (!run && *p >= 0x80)
			run = utf8_sequence_len(p);
		if (run) {
			if (used + run >= len)
				return -ENOSPC;
			memcpy(buf + used, p, run);
			used += run;
			p += run;
			continue;
		}
		if (used + 6 >= len)
			return -ENOSPC;
		buf[used++] = '\\';
		switch (*p) {
		case '"': buf[used++] = '"'; break;
		case '\\': buf[used++] = '\\'; break;
		case '\n': buf[used++] = 'n'; break;
		case '\r': buf[used++] = 'r'; break;
		case '\t': buf[used++] = 't'; break;
		default:
			/* Control bytes, and bytes that are not valid UTF-8: \u00XX of the byte. */
			buf[used++] = 'u';
			buf[used++] = '0';
			buf[used++] = '0';
			buf[used++] = hex[*p >> 4];
			buf[used++] = hex[*p & 15];
		}
		p++;
	}
	buf[used] = '\0';
	return (int)used;
}

/*
 * A name or path in a text line: control bytes (< 0x20, 0x7f) as \xNN, so
 * that a record stays one line and its strings cannot drive the terminal.
 */
int cp_text__escape(const char *src, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t used = 0, n;
	int escaped;

	if (!src || !buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	while (*p) {
		for (n = 0; p[n] >= 0x20 && p[n] != 0x7f; n++)
			;
		if (n) {
			if (used + n + 1 > len)
				return -ENOSPC;
			memcpy(buf + used, p, n);
			used += n;
			buf[used] = '\0';
			p += n;
		}
		if (!*p)
			break;
		/* What fits of the escape is left in buf, as snprintf cuts it. */
		escaped = snprintf(buf + used, len - used, "\\x%02x", *p++);
		if (escaped < 0 || (size_t)escaped >= len - used)
			return -ENOSPC;
		used += (size_t)escaped;
	}
	return (int)used;
}
