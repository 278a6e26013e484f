// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Python stacks' pure parts: the line-table decoders against the lines
 * real interpreters give their own code objects (test data written at
 * build time by tests/python/dump_lines.py, with Debian's python3.11 and
 * any other CPython the build machine has), the per-version layouts, the
 * checks on an interpreter's _Py_DebugOffsets, versions from file names.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"

static size_t unhex(const char *hex, uint8_t *out, size_t max)
{
	size_t n = 0;
	unsigned int byte;

	while (hex[0] && hex[1] && n < max && sscanf(hex, "%2x", &byte) == 1) {
		out[n++] = (uint8_t)byte;
		hex += 2;
	}
	return n;
}

struct checked {
	unsigned long codes, instructions, mismatches;
};

/* One data file: every instruction of every range decoded and compared. */
static void check_file(const char *path, struct checked *total)
{
	FILE *in = fopen(path, "r");
	static char line[1 << 20];
	static uint8_t table[1 << 19];
	unsigned int major = 0, minor = 0;
	size_t table_len = 0;
	int firstlineno = 0;

	cr_assert_not_null(in, "%s: %s", path, strerror(errno));
	cr_assert_not_null(fgets(line, sizeof(line), in));
	cr_assert_eq(sscanf(line, "version %u %u", &major, &minor), 2, "%s: %s", path, line);
	while (fgets(line, sizeof(line), in)) {
		long start, end, expected;

		if (!strncmp(line, "code ", 5)) {
			char *hex = strchr(line + 5, ' ');

			cr_assert_eq(sscanf(line, "code %d", &firstlineno), 1, "%s: %s", path, line);
			table_len = hex ? unhex(hex + 1, table, sizeof(table)) : 0;
			total->codes++;
			continue;
		}
		cr_assert_eq(sscanf(line, "range %ld %ld %ld", &start, &end, &expected), 3, "%s: %s",
			     path, line);
		for (; start < end; start += 2) {
			int got = cp_py_lines__line(CP_PY_VERSION(major, minor), table, table_len,
						    firstlineno, (int32_t)(start / 2));

			total->instructions++;
			if (got != expected && total->mismatches++ < 5)
				cr_log_error("%s: %u.%u first line %d, byte %ld: line %d, the interpreter says %ld",
					     path, major, minor, firstlineno, start, got, expected);
		}
	}
	fclose(in);
}

Test(python_lines, decoded_as_the_interpreters_decode_them)
{
	struct checked total = { 0 };
	DIR *dir = opendir(LINES_DIR);
	struct dirent *entry;
	bool have_311 = false;

	cr_assert_not_null(dir, "%s: %s", LINES_DIR, strerror(errno));
	while ((entry = readdir(dir))) {
		char path[4096];

		if (strncmp(entry->d_name, "python-lines-", 13))
			continue;
		have_311 |= !strcmp(entry->d_name, "python-lines-3.11.txt");
		snprintf(path, sizeof(path), "%s/%s", LINES_DIR, entry->d_name);
		check_file(path, &total);
	}
	closedir(dir);
	cr_assert(have_311, "no data from python3.11 in %s", LINES_DIR);
	cr_assert_gt(total.codes, 500, "code objects checked: %lu", total.codes);
	cr_assert_gt(total.instructions, 10000);
	cr_assert_eq(total.mismatches, 0, "%lu of %lu instructions on another line", total.mismatches,
		     total.instructions);
}

Test(python_lines, before_the_first_instruction_and_beyond_the_table)
{
	/* 3.11: one entry, 2 code units, line +1 (one-line form 11); then none. */
	static const uint8_t table[] = { 0x80 | 11 << 3 | 1, 0, 0 };

	cr_expect_eq(cp_py_lines__line(CP_PY_VERSION(3, 11), table, sizeof(table), 7, -1), 7);
	cr_expect_eq(cp_py_lines__line(CP_PY_VERSION(3, 11), table, sizeof(table), 7, 0), 8);
	cr_expect_eq(cp_py_lines__line(CP_PY_VERSION(3, 11), table, sizeof(table), 7, 1), 8);
	cr_expect_eq(cp_py_lines__line(CP_PY_VERSION(3, 11), table, sizeof(table), 7, 2), -1);
	cr_expect_eq(cp_py_lines__line(CP_PY_VERSION(3, 11), NULL, 0, 7, 0), -1);
	cr_expect_eq(cp_py_lines__line(CP_PY_VERSION(3, 10), NULL, 0, 7, -1), 7);
	cr_expect_eq(cp_py_lines__line(CP_PY_VERSION(3, 10), NULL, 5, 7, 0), -EINVAL);
}

Test(python_layout, tables_for_the_versions_without_debug_offsets)
{
	struct cp_py_proc l;
	uint32_t version;

	for (version = CP_PY_VERSION(3, 10); version <= CP_PY_VERSION(3, 12); version++) {
		cr_assert_eq(cp_py_layout__table(version, &l), 0, "%#x", version);
		cr_expect_eq(l.version, version);
		cr_expect_leq(l.frame_read_size, CP_PY_FRAME_READ_MAX);
		cr_expect_leq(l.frame_read_start, l.frame_code);
		cr_expect_lt(l.frame_code, l.frame_read_start + l.frame_read_size);
		cr_expect_lt(l.frame_previous, l.frame_read_start + l.frame_read_size);
		cr_expect_lt(l.frame_instr, l.frame_read_start + l.frame_read_size);
	}
	cr_assert_eq(cp_py_layout__table(CP_PY_VERSION(3, 10), &l), 0);
	cr_expect(l.flags & CP_PY_FRAME_OBJECTS);
	cr_expect_eq(l.frame_owner, CP_PY_NO_OFFSET);
	cr_expect_eq(l.code_qualname, CP_PY_NO_OFFSET);
	cr_assert_eq(cp_py_layout__table(CP_PY_VERSION(3, 12), &l), 0);
	cr_expect(l.flags & CP_PY_CFRAME);
	cr_expect_eq(l.frame_read_start, 0);
	cr_expect_eq(l.frame_read_size, 71, "f_code at 0 to the owner at 70");
	cr_expect_eq(cp_py_layout__table(CP_PY_VERSION(3, 9), &l), -ENOTSUP);
	cr_expect_eq(cp_py_layout__table(CP_PY_VERSION(3, 13), &l), -ENOTSUP,
		     "3.13 says its own offsets");
}

Test(python_layout, debug_offsets_are_checked)
{
	size_t size = cp_py_layout__debug_offsets_size();
	uint8_t *blob = calloc(1, size);
	struct cp_py_proc l;
	uint64_t version = 0x030d00f0; /* 3.13.0 final */

	cr_assert_not_null(blob);
	cr_expect_eq(cp_py_layout__from_debug_offsets(blob, size, CP_PY_VERSION(3, 13), &l), -EPROTO,
		     "no cookie");
	memcpy(blob, "xdebugpy", 8);
	memcpy(blob + 8, &version, 8);
	cr_expect_eq(cp_py_layout__from_debug_offsets(blob, size, CP_PY_VERSION(3, 12), &l), -EPROTO,
		     "another version than the one found");
	cr_expect_eq(cp_py_layout__from_debug_offsets(blob, size, CP_PY_VERSION(3, 13), &l), -EPROTO,
		     "offsets outside their structs (all sizes 0)");
	blob[16] = 1; /* free_threaded */
	cr_expect_eq(cp_py_layout__from_debug_offsets(blob, size, CP_PY_VERSION(3, 13), &l), -ENOTSUP);
	cr_expect_eq(cp_py_layout__from_debug_offsets(blob, 16, CP_PY_VERSION(3, 13), &l), -EINVAL);
	free(blob);
}

Test(python_layout, versions_from_file_names)
{
	uint32_t version = 0;

	cr_expect_eq(cp_py_layout__version_of_name("libpython3.10.so.1.0", &version), 0);
	cr_expect_eq(version, CP_PY_VERSION(3, 10));
	cr_expect_eq(cp_py_layout__version_of_name("python3.12", &version), 0);
	cr_expect_eq(version, CP_PY_VERSION(3, 12));
	cr_expect_eq(cp_py_layout__version_of_name("libpython3.13t.so", &version), 0);
	cr_expect_eq(version, CP_PY_VERSION(3, 13));
	cr_expect_eq(cp_py_layout__version_of_name("python3", &version), -ENOENT);
	cr_expect_eq(cp_py_layout__version_of_name("python3.x", &version), -ENOENT);
	cr_expect_eq(cp_py_layout__version_of_name("python3.12-config", &version), -ENOENT);
	cr_expect_eq(cp_py_layout__version_of_name(NULL, &version), -ENOENT);
}
