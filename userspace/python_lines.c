// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CPython line tables: which source line an instruction of a code object
 * belongs to, from its co_linetable bytes, as PyCode_Addr2Line answers it.
 *
 * 3.10 (PEP 626): pairs of (bytes of code, signed line delta), -128 for
 * "no line". 3.11 and later (the location table of PEP 657): entries whose
 * first byte has bit 7 set, bits 3-6 a code saying how the line changes
 * (15 none, 14 long form and 13 no columns: a signed varint delta, 10-12
 * one-line forms: delta 0-2, 0-9 short forms: same line) and bits 0-2 the
 * length in code units, less one; the bytes after carry columns and
 * varints, none with bit 7 set.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "cuprobe_internal.h"

/* An unsigned varint of the location table: 6 bits a byte, bit 6 says more follow. */
static unsigned int read_varint(const uint8_t *table, size_t len, size_t *at)
{
	unsigned int value = 0, shift = 0;
	uint8_t byte;

	do {
		if (*at >= len || shift > 30)
			return value;
		byte = table[(*at)++];
		value |= (unsigned int)(byte & 63) << shift;
		shift += 6;
	} while (byte & 64);
	return value;
}

static int read_signed_varint(const uint8_t *table, size_t len, size_t *at)
{
	unsigned int value = read_varint(table, len, at);

	return value & 1 ? -(int)(value >> 1) : (int)(value >> 1);
}

/* 3.11+: the entry starting at table[at] (bit 7 set): its line delta and length in bytes of code. */
static void location_entry(const uint8_t *table, size_t len, size_t at, int *delta, unsigned int *bytes,
			   bool *no_line)
{
	unsigned int code = (table[at] >> 3) & 15;
	size_t next = at + 1;

	*bytes = ((table[at] & 7) + 1) * 2;
	*no_line = code == 15;
	if (code == 14 || code == 13)
		*delta = read_signed_varint(table, len, &next);
	else if (code >= 10 && code <= 12)
		*delta = (int)code - 10;
	else
		*delta = 0;
}

static int location_line(const uint8_t *table, size_t len, int firstlineno, uint32_t address)
{
	uint32_t start = 0;
	int line = firstlineno;
	size_t at = 0;

	while (at < len) {
		unsigned int bytes;
		bool no_line;
		int delta;

		if (!(table[at] & 128)) { /* not an entry's first byte: a damaged table */
			at++;
			continue;
		}
		location_entry(table, len, at, &delta, &bytes, &no_line);
		line += delta;
		if (address < start + bytes)
			return no_line ? -1 : line;
		start += bytes;
		for (at++; at < len && !(table[at] & 128); at++)
			;
	}
	return -1;
}

/* 3.10: (bytes, line delta) pairs; a range may be empty, and -128 means no line. */
static int pairs_line(const uint8_t *table, size_t len, int firstlineno, uint32_t address)
{
	uint32_t start = 0;
	int line = firstlineno;
	size_t at;

	for (at = 0; at + 1 < len; at += 2) {
		uint32_t bytes = table[at];
		int8_t delta = (int8_t)table[at + 1];
		bool no_line = delta == -128;

		if (!no_line)
			line += delta;
		if (address < start + bytes)
			return no_line ? -1 : line;
		start += bytes;
	}
	return -1;
}

int cp_py_lines__line(uint32_t version, const uint8_t *table, size_t len, int firstlineno,
		      int32_t lasti)
{
	if (!table && len)
		return -EINVAL;
	if (lasti < 0)
		return firstlineno; /* not started: the function's first line, as CPython says */
	if (version >= CP_PY_VERSION(3, 11))
		return location_line(table, len, firstlineno, (uint32_t)lasti * 2);
	return pairs_line(table, len, firstlineno, (uint32_t)lasti * 2);
}
