// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The probe catalogue as data: every line of bpf/cuprobe_catalogue.h,
 * probed or excluded, and the export-name prefixes of the traced families,
 * for the coverage check of a library's exports (`cuprobe probes`).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cuprobe.h"

/* One block per library of CP_LIBRARIES, each row naming its library (LIBRARY). */
#define ROW_PROBED(sym, family, prog, ret, bits) \
	{ #sym, CP_FAMILY_##family, LIBRARY == CP_LIBRARY_runtime, true, #prog, #ret, NULL, LIBRARY },
#define ROW_EXCLUDED(sym, family, reason) \
	{ #sym, CP_FAMILY_##family, LIBRARY == CP_LIBRARY_runtime, false, NULL, NULL, reason, LIBRARY },
_Static_assert(CP_LIBRARY_MAX == 3, "a block of entries below for each library");
static const struct cp_catalogue_entry entries[] = {
#define LIBRARY CP_LIBRARY_driver
	CP_DRIVER_APIS(ROW_PROBED, ROW_EXCLUDED)
#undef LIBRARY
#define LIBRARY CP_LIBRARY_runtime
	CP_RUNTIME_APIS(ROW_PROBED, ROW_EXCLUDED)
#undef LIBRARY
#define LIBRARY CP_LIBRARY_nccl
	CP_NCCL_APIS(ROW_PROBED, ROW_EXCLUDED)
#undef LIBRARY
};
#undef ROW_PROBED
#undef ROW_EXCLUDED

#define ALIAS_ROW(alias, canonical) { alias, canonical },
static const struct {
	const char *alias;
	const char *canonical;
} aliases[] = { CP_ALIAS_PREFIXES(ALIAS_ROW) };
#undef ALIAS_ROW

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

const char *cp_catalogue__canonical(const char *symbol, char *buf, size_t size)
{
	size_t i, n;

	for (i = 0; symbol && i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		n = strlen(aliases[i].alias);
		if (strncmp(symbol, aliases[i].alias, n))
			continue;
		if ((size_t)snprintf(buf, size, "%s%s", aliases[i].canonical, symbol + n) >= size)
			return NULL;
		return buf;
	}
	return NULL;
}

int cp_catalogue__unprobed(const char *const *exports, size_t count, cp_unprobed_fn fn, void *ctx)
{
	const struct cp_catalogue_entry *entry;
	char canonical[256];
	const char *name;
	int in_families = 0;
	size_t i;

	if (!exports && count)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		/* Another name of a catalogued function: covered by that line. */
		name = cp_catalogue__canonical(exports[i], canonical, sizeof(canonical));
		if (!name)
			name = exports[i];
		entry = cp_catalogue__find(name);
		/* In a traced family by its name, or a variant of a catalogued API. */
		if (cp_catalogue__family_of_export(name) == CP_FAMILY_NONE && !entry)
			continue;
		in_families++;
		if (entry && entry->probed && entry->library != CP_LIBRARY_runtime)
			continue;
		if (fn)
			fn(ctx, exports[i], entry && !entry->probed ? entry : NULL);
	}
	return in_families;
}
