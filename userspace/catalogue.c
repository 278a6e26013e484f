// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The probe catalogue as data: every line of bpf/cuprobe_catalogue.h,
 * probed or excluded, and the export-name prefixes of the traced families,
 * for the coverage check of a driver's exports (`cuprobe probes`).
 */
#include <errno.h>
#include <string.h>

#include "cuprobe.h"

#define ROW_DRIVER(sym, family, prog, ret, bits) \
	{ #sym, CP_FAMILY_##family, false, true, #prog, #ret, NULL },
#define ROW_RUNTIME(sym, family, prog, ret, bits) \
	{ #sym, CP_FAMILY_##family, true, true, #prog, #ret, NULL },
#define ROW_EXCLUDED(sym, family, reason) { #sym, CP_FAMILY_##family, false, false, NULL, NULL, reason },
static const struct cp_catalogue_entry entries[] = {
	CP_DRIVER_APIS(ROW_DRIVER, ROW_EXCLUDED)
	CP_RUNTIME_APIS(ROW_RUNTIME, ROW_EXCLUDED)
};
#undef ROW_DRIVER
#undef ROW_RUNTIME
#undef ROW_EXCLUDED

#define PREFIX_ROW(family, prefix) { CP_FAMILY_##family, prefix },
static const struct {
	enum cp_family family;
	const char *prefix;
} prefixes[] = { CP_FAMILY_PREFIXES(PREFIX_ROW) };
#undef PREFIX_ROW

#define ENTRY_COUNT (sizeof(entries) / sizeof(entries[0]))

size_t cp_catalogue__entries(const struct cp_catalogue_entry **out)
{
	if (out)
		*out = entries;
	return ENTRY_COUNT;
}

const struct cp_catalogue_entry *cp_catalogue__find(const char *symbol)
{
	size_t i;

	for (i = 0; symbol && i < ENTRY_COUNT; i++)
		if (!strcmp(entries[i].symbol, symbol))
			return &entries[i];
	return NULL;
}

enum cp_family cp_catalogue__family_of_export(const char *symbol)
{
	size_t i;

	for (i = 0; symbol && i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(symbol, prefixes[i].prefix, strlen(prefixes[i].prefix)))
			return prefixes[i].family;
	return CP_FAMILY_NONE;
}

int cp_catalogue__unprobed(const char *const *exports, size_t count, cp_unprobed_fn fn, void *ctx)
{
	const struct cp_catalogue_entry *entry;
	int in_families = 0;
	size_t i;

	if (!exports && count)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		entry = cp_catalogue__find(exports[i]);
		/* In a traced family by its name, or a variant of a catalogued API. */
		if (cp_catalogue__family_of_export(exports[i]) == CP_FAMILY_NONE && !entry)
			continue;
		in_families++;
		if (entry && entry->probed && !entry->runtime)
			continue;
		if (fn)
			fn(ctx, exports[i], entry && !entry->probed ? entry : NULL);
	}
	return in_families;
}
