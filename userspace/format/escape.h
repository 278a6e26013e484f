/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Escaping, a leaf of the output wing: strings made safe for a JSON string
 * or a text line. Depends on nothing of cuprobe's, so that the name table
 * (names.c) escapes each name once, when it is learned, and the formats
 * write the escaped forms, with no call going back.
 */
#ifndef CUPROBE_FORMAT_ESCAPE_H
#define CUPROBE_FORMAT_ESCAPE_H

#include <stddef.h>

/*
 * Writes src into buf as a JSON string body (escaped, no quotes): valid UTF-8
 * as it is, bytes that are not part of valid UTF-8 as \u00XX of the byte.
 * Returns the length written, -ENOSPC or -EINVAL.
 */
int cp_json__escape(const char *src, char *buf, size_t len);
/*
 * Copies src to buf for a terminal or a text file: control characters
 * (bytes < 0x20 and 0x7f) become \xNN. Returns the length, or -ENOSPC (buf
 * then holds what fit).
 */
int cp_text__escape(const char *src, char *buf, size_t len);

#endif
