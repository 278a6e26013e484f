// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The probe catalogue held against a real driver's export list
 * (tests/data/libcuda-580.159.04-exports.txt, driver 580.159.04) and a real
 * NCCL's (tests/data/libnccl-2.28.9-exports.txt, NCCL 2.28.9 for CUDA 13):
 * every export of a traced family is probed or excluded with a reason,
 * every probed symbol exists, and the generated tables agree with each
 * other and with the BPF object. Also the log2 bucket rule shared with the
 * BPF side.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "cuprobe.h"
#include "cuprobe.skel.h"
#include "helpers.h"

static char **exports;
static size_t export_count;

static void load_exports(void)
{
	char *text = read_text(EXPORT_LIST), *line, *save = NULL;

	cr_assert_not_null(text, "cannot read %s", EXPORT_LIST);
	exports = calloc(1024, sizeof(*exports));
	cr_assert_not_null(exports);
	export_count = 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cr_assert_lt(export_count, 1024);
		exports[export_count++] = strdup(line);
	}
	free(text);
	cr_assert_eq(export_count, 682, "driver 580.159.04 exports 682 cu* functions");
}

static void free_exports(void)
{
	size_t i;

	for (i = 0; i < export_count; i++)
		free(exports[i]);
	free(exports);
}

TestSuite(catalogue, .init = load_exports, .fini = free_exports);

struct coverage {
	size_t excluded;
	size_t unknown;
	char unknown_names[4096];
};

static void note(void *ctx, const char *symbol, const struct cp_catalogue_entry *excluded)
{
	struct coverage *c = ctx;

	if (excluded) {
		c->excluded++;
		cr_assert(excluded->reason && *excluded->reason, "%s excluded without a reason", symbol);
		/* The exclusions, listed in the test's output. */
		printf("excluded: %-36s %s\n", symbol, excluded->reason);
		return;
	}
	c->unknown++;
	strncat(c->unknown_names, symbol, sizeof(c->unknown_names) - strlen(c->unknown_names) - 2);
	strcat(c->unknown_names, " ");
}

Test(catalogue, every_export_of_a_traced_family_is_probed_or_excluded)
{
	struct coverage c = { 0 };
	int in_families;

	in_families = cp_catalogue__unprobed((const char *const *)exports, export_count, note, &c);
	cr_assert_eq(c.unknown, 0, "exports of traced families the catalogue does not name: %s",
		     c.unknown_names);
	cr_assert_gt(in_families, 150, "the traced families cover %d exports", in_families);
	printf("%d exports in traced families: %zu probed, %zu excluded\n", in_families,
	       in_families - c.excluded, c.excluded);
	fflush(stdout);
}

Test(catalogue, every_probed_driver_symbol_is_a_real_export)
{
	const struct cp_catalogue_entry *entries;
	size_t count = cp_catalogue__entries(&entries), i, j;

	for (i = 0; i < count; i++) {
		if (entries[i].library != CP_LIBRARY_driver)
			continue;
		for (j = 0; j < export_count && strcmp(exports[j], entries[i].symbol); j++)
			;
		cr_assert_lt(j, export_count, "%s is in the catalogue but driver 580 does not export it",
			     entries[i].symbol);
	}
}

Test(catalogue, the_versions_the_issue_names_are_probed)
{
	static const char *const wanted[] = {
		"cuCtxSynchronize_v2", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
		"cuMemAddressReserve", "cuMemAddressFree", "cuMemAllocFromPoolAsync",
		"cuLaunchHostFunc", "cuMemsetD8_v2", "cuMemsetD2D32Async", "cuMemcpy3DPeer",
		"cuMemcpyBatchAsync_v2", "cuEventRecordWithFlags", "cuEventQuery",
		"cuStreamWaitEvent_ptsz", "cuModuleLoad", "cuLibraryLoadFromFile", "cuInit",
	};
	size_t i;

	for (i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		const struct cp_catalogue_entry *e = cp_catalogue__find(wanted[i]);

		cr_assert_not_null(e, "%s is not in the catalogue", wanted[i]);
		cr_assert(e->probed, "%s is excluded", wanted[i]);
	}
}

Test(catalogue, one_line_per_symbol_and_tables_that_agree)
{
	const struct cp_catalogue_entry *entries;
	size_t count = cp_catalogue__entries(&entries), i, j;

	for (i = 0; i < count; i++) {
		for (j = i + 1; j < count; j++)
			cr_assert(strcmp(entries[i].symbol, entries[j].symbol), "%s twice",
				  entries[i].symbol);
		if (!entries[i].probed)
			continue;
		/* enum, name table and family table come from the same line */
		cr_assert_neq(cp_api__by_name(entries[i].symbol), CP_API_UNKNOWN, "%s has no API id",
			      entries[i].symbol);
		cr_assert_str_eq(cp_api__name(cp_api__by_name(entries[i].symbol)), entries[i].symbol);
		cr_assert_eq(cp_api__family(cp_api__by_name(entries[i].symbol)), entries[i].family);
	}
}

Test(catalogue, every_program_it_names_is_in_the_bpf_object)
{
	const struct cp_catalogue_entry *entries;
	size_t count = cp_catalogue__entries(&entries), i;
	struct cuprobe_bpf *skel = cuprobe_bpf__open(); /* open only: no root, nothing loaded */

	cr_assert_not_null(skel);
	for (i = 0; i < count; i++) {
		if (!entries[i].probed)
			continue;
		cr_assert_not_null(bpf_object__find_program_by_name(skel->obj, entries[i].program),
				   "%s: no program %s", entries[i].symbol, entries[i].program);
		if (strcmp(entries[i].return_program, "none"))
			cr_assert_not_null(bpf_object__find_program_by_name(skel->obj,
									    entries[i].return_program),
					   "%s: no program %s", entries[i].symbol,
					   entries[i].return_program);
	}
	cuprobe_bpf__destroy(skel);
}

Test(catalogue, family_prefixes)
{
	cr_assert_eq(cp_catalogue__family_of_export("cuMemcpy3DPeerAsync_ptsz"), CP_FAMILY_copy);
	cr_assert_eq(cp_catalogue__family_of_export("cuGraphLaunch"), CP_FAMILY_launch);
	cr_assert_eq(cp_catalogue__family_of_export("cuMemGetInfo_v2"), CP_FAMILY_NONE);
	cr_assert_eq(cp_catalogue__family_of_export("cuCtxSynchronize_v2"), CP_FAMILY_sync);
}

/* ---- NCCL: its table, its aliases, its argument slots -------------------------------- */

Test(catalogue, nccl_lines_are_the_nccl_library_and_family)
{
	const struct cp_catalogue_entry *entries;
	size_t count = cp_catalogue__entries(&entries), i, nccl = 0;

	for (i = 0; i < count; i++) {
		bool named_nccl = !strncmp(entries[i].symbol, "nccl", 4);

		cr_assert_eq(named_nccl, entries[i].library == CP_LIBRARY_nccl, "%s", entries[i].symbol);
		cr_assert_eq(named_nccl, entries[i].family == CP_FAMILY_nccl, "%s", entries[i].symbol);
		nccl += named_nccl && entries[i].probed;
	}
	cr_assert_geq(nccl, 30, "%zu NCCL calls probed", nccl);
	cr_assert_str_eq(cp_library__name(CP_LIBRARY_nccl), "nccl");
	cr_assert(cp_family__programmable(CP_FAMILY_nccl), "cuprobe run may attach to nccl");
	cr_assert_eq(cp_family__by_name("nccl"), CP_FAMILY_nccl);
}

Test(catalogue, pnccl_names_are_aliases_of_the_nccl_lines)
{
	static const char *const exports_of_nccl[] = {
		"ncclAllReduce", "pncclAllReduce", "ncclGroupEnd", "pncclGroupEnd",
		"ncclCommGetAsyncError", "pncclCommGetAsyncError", "pncclSomethingNew",
	};
	char buf[64];
	struct coverage c = { 0 };
	int in_families;

	cr_assert_str_eq(cp_catalogue__canonical("pncclAllReduce", buf, sizeof(buf)), "ncclAllReduce");
	cr_assert_null(cp_catalogue__canonical("ncclAllReduce", buf, sizeof(buf)));
	cr_assert_null(cp_catalogue__canonical("pncclAllReduce", buf, 4), "too small a buffer");
	in_families = cp_catalogue__unprobed(exports_of_nccl, 7, note, &c);
	cr_assert_eq(in_families, 7);
	/* the watchdog's poll and its alias are excluded; the unknown export is said, under its own name */
	cr_assert_eq(c.excluded, 2);
	cr_assert_eq(c.unknown, 1);
	cr_assert_str_eq(c.unknown_names, "pncclSomethingNew ");
}

/* Every export of NCCL 2.28.9 (the nccl* names and their pnccl* aliases) is probed or excluded. */
Test(catalogue, every_export_of_nccl_2_28_9_is_probed_or_excluded)
{
	char *text = read_text(NCCL_EXPORT_LIST), *line, *save = NULL;
	const char *names[256];
	struct coverage c = { 0 };
	size_t count = 0;
	int in_families;

	cr_assert_not_null(text, "cannot read %s", NCCL_EXPORT_LIST);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cr_assert_lt(count, 256);
		names[count++] = line;
	}
	cr_assert_eq(count, 105, "NCCL 2.28.9 exports 105 functions");
	in_families = cp_catalogue__unprobed(names, count, note, &c);
	cr_assert_eq(c.unknown, 0, "NCCL exports the catalogue does not name: %s", c.unknown_names);
	cr_assert_eq(in_families, 105);
	/* Probed: 26 of the 52 nccl* names, and their 26 aliases. */
	cr_assert_eq(in_families - (int)c.excluded, 52, "%d probed", in_families - (int)c.excluded);
	free(text);
}

/* The probed NCCL lines 2.28.9 does not export: later releases' (or RCCL's spelling). */
Test(catalogue, every_probed_nccl_symbol_but_the_newer_ones_is_a_real_export)
{
	static const char *const newer[] = {
		"ncclAllReduceConfig", "ncclBroadcastConfig", "ncclReduceConfig", "ncclAllGatherConfig",
		"ncclReduceScatterConfig", "ncclAlltoAllConfig", "ncclGatherConfig", "ncclScatterConfig",
		"ncclAllToAll",
	};
	const struct cp_catalogue_entry *entries;
	size_t count = cp_catalogue__entries(&entries), i, k;
	char *text = read_text(NCCL_EXPORT_LIST), needle[128];

	cr_assert_not_null(text);
	for (i = 0; i < count; i++) {
		bool is_newer = false;

		if (entries[i].library != CP_LIBRARY_nccl || !entries[i].probed)
			continue;
		for (k = 0; k < sizeof(newer) / sizeof(newer[0]); k++)
			is_newer |= !strcmp(newer[k], entries[i].symbol);
		snprintf(needle, sizeof(needle), "\n%s\n", entries[i].symbol);
		cr_assert_eq(strstr(text, needle) != NULL || !strncmp(text, needle + 1, strlen(needle) - 1),
			     !is_newer, "%s: exported by 2.28.9? the catalogue says %s", entries[i].symbol,
			     is_newer ? "no" : "yes");
	}
	free(text);
}

/* One entry and one return program serve every NCCL line (the nesting and the links need both). */
Test(catalogue, every_nccl_line_goes_through_nccl_entry_and_nccl_return)
{
	const struct cp_catalogue_entry *entries;
	size_t count = cp_catalogue__entries(&entries), i;

	for (i = 0; i < count; i++) {
		if (!entries[i].probed || entries[i].library != CP_LIBRARY_nccl)
			continue;
		cr_assert_str_eq(entries[i].program, "nccl_entry", "%s", entries[i].symbol);
		cr_assert_str_eq(entries[i].return_program, "nccl_return", "%s", entries[i].symbol);
	}
}

/* ---- the log2 buckets: (2^(b-1), 2^b], bucket 0 = [0, 1] ---------------------------- */

Test(log2_bucket, bounds)
{
	unsigned int b;

	cr_assert_eq(cp_log2_bucket(0), 0);
	cr_assert_eq(cp_log2_bucket(1), 0);
	cr_assert_eq(cp_log2_bucket(2), 1);
	cr_assert_eq(cp_log2_bucket(3), 2);
	cr_assert_eq(cp_log2_bucket(4), 2);
	cr_assert_eq(cp_log2_bucket(5), 3);
	for (b = 1; b < CP_HIST_BUCKETS; b++) {
		__u64 upper = 1ull << b;

		cr_assert_eq(cp_log2_bucket(upper), b, "2^%u belongs to bucket %u", b, b);
		cr_assert_eq(cp_log2_bucket(upper / 2 + 1), b, "2^%u/2+1 belongs to bucket %u", b, b);
		if (b + 1 < CP_HIST_BUCKETS)
			cr_assert_eq(cp_log2_bucket(upper + 1), b + 1);
	}
	cr_assert_eq(cp_log2_bucket(1ull << 40), CP_HIST_BUCKETS - 1, "the last bucket takes the rest");
	cr_assert_eq(cp_log2_bucket(~0ull), CP_HIST_BUCKETS - 1);
}

Test(log2_bucket, percentiles_are_the_bucket_upper_bounds)
{
	uint64_t h[CP_HIST_BUCKETS] = { 0 };

	h[cp_log2_bucket(1000)]++; /* (512, 1024] */
	h[cp_log2_bucket(1024)]++;
	cr_assert_eq(cp_histogram__percentile(h, 1.0), 1024);
	h[cp_log2_bucket(1025)]++;
	cr_assert_eq(cp_histogram__percentile(h, 1.0), 2048);
}
