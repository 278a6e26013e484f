// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe probes`: the probe catalogue, and what a given libcuda or libnccl exports
 * in a traced family that cuprobe does not probe. Reads files only: no BPF,
 * no root.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cuprobe_internal.h"
#include "session.h"

static void list_catalogue(void)
{
	const struct cp_catalogue_entry *entries;
	size_t count = cp_catalogue__entries(&entries), i, probed = 0, excluded = 0;

	printf("%-36s %-8s %-8s %s\n", "API", "FAMILY", "LIBRARY", "PROGRAMS");
	for (i = 0; i < count; i++) {
		const struct cp_catalogue_entry *e = &entries[i];

		if (!e->probed)
			continue;
		probed++;
		printf("%-36s %-8s %-8s %s%s%s\n", e->symbol, cp_family__name(e->family),
		       cp_library__name(e->library), e->program,
		       strcmp(e->return_program, "none") ? " + " : "",
		       strcmp(e->return_program, "none") ? e->return_program : "");
	}
	printf("\nexported but not probed:\n");
	for (i = 0; i < count; i++) {
		if (entries[i].probed)
			continue;
		excluded++;
		printf("%-36s %-8s %s\n", entries[i].symbol, cp_family__name(entries[i].family),
		       entries[i].reason);
	}
	printf("\n%zu APIs probed, %zu exports excluded\n", probed, excluded);
}

struct unprobed_count {
	unsigned int excluded;
	unsigned int unknown;
};

static void print_unprobed(void *ctx, const char *symbol, const struct cp_catalogue_entry *excluded)
{
	struct unprobed_count *counts = ctx;

	if (excluded) {
		counts->excluded++;
		printf("  %-36s excluded: %s\n", symbol, excluded->reason);
	} else {
		counts->unknown++;
		printf("  %-36s NOT IN THE CATALOGUE (family %s)\n", symbol,
		       cp_family__name(cp_catalogue__family_of_export(symbol)));
	}
}

static int check_file(const char *path)
{
	const struct cp_catalogue_entry *entries;
	struct unprobed_count counts = { 0 };
	size_t count, i, j, entry_count, lacking = 0;
	enum cp_library library = CP_LIBRARY_driver;
	char **names;
	int err, in_families;

	err = cp_elf__exported_functions(path, &names, &count);
	if (err) {
		cp_say("%s: %s", path, cp_file_problem(err));
		return CP_EXIT_SETUP;
	}
	printf("%s: %zu exported functions\n", path, count);
	in_families = cp_catalogue__unprobed((const char *const *)names, count, print_unprobed,
					     &counts);
	entry_count = cp_catalogue__entries(&entries);
	/* The file's library: the one whose probed symbols it exports (libcuda when none). */
	for (i = 0; i < entry_count && library == CP_LIBRARY_driver; i++)
		for (j = 0; entries[i].probed && j < count; j++)
			if (!strcmp(names[j], entries[i].symbol)) {
				library = entries[i].library;
				break;
			}
	for (i = 0; i < entry_count; i++) {
		if (!entries[i].probed || entries[i].library != library)
			continue;
		for (j = 0; j < count && strcmp(names[j], entries[i].symbol); j++)
			;
		lacking += j == count;
	}
	printf("%s: %d exports in traced families: %d probed, %u excluded, %u not in the catalogue; %zu catalogued APIs not exported\n",
	       path, in_families, in_families - (int)(counts.excluded + counts.unknown),
	       counts.excluded, counts.unknown, lacking);
	cp_elf__free_names(names, count);
	return 0;
}

int cp_cmd_probes(const union cp_options *options)
{
	const struct cp_probes_options *opts = &options->probes;
	int code = 0;
	size_t i;

	if (!opts->common.lib_count) {
		list_catalogue();
	} else {
		for (i = 0; i < opts->common.lib_count; i++)
			if (check_file(opts->common.libs[i]))
				code = CP_EXIT_SETUP;
	}
	if (fflush(stdout) || ferror(stdout)) {
		cp_say("cannot write standard output: %s", strerror(errno));
		return CP_EXIT_SETUP;
	}
	return code;
}
