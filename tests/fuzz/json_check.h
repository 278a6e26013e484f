/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the harnesses ask of any JSON cuprobe writes, whatever went in: each
 * line a JSON value a parser takes (jansson, as the tests read it). A line
 * that is not aborts, so libFuzzer keeps the input. Integers are read as
 * reals: JSON bounds no number, and a u64 past 2^63 is one jansson refuses
 * as an integer.
 */
#ifndef CUPROBE_FUZZ_JSON_CHECK_H
#define CUPROBE_FUZZ_JSON_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Every non-empty line of text[0, len) parses as JSON. */
static inline void json_check_lines(const char *text, size_t len)
{
	while (len) {
		const char *end = memchr(text, '\n', len);
		size_t line = end ? (size_t)(end - text) : len;
		json_error_t error;
		json_t *value;

		if (line) {
			value = json_loadb(text, line, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &error);
			if (!value) {
				fprintf(stderr, "not JSON (%s): %.*s\n", error.text, (int)line, text);
				abort();
			}
			json_decref(value);
		}
		text += line + (end ? 1 : 0);
		len -= line + (end ? 1 : 0);
	}
}

/* text[0, len) is one JSON value (a whole document, lines and all). */
static inline void json_check_document(const char *text, size_t len)
{
	json_error_t error;
	json_t *value = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &error);

	if (!value) {
		fprintf(stderr, "not JSON (%s, line %d): %.*s\n", error.text, error.line, (int)len,
			text);
		abort();
	}
	json_decref(value);
}

#endif
