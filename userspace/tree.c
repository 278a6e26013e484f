// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Search trees (tsearch) of structs that begin with their key: one way to
 * find, add and order the processes, threads, handles and addresses the
 * library keeps per key.
 */
#include <search.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"

int cp_tree__by_u32(const void *a, const void *b)
{
	uint32_t x, y;

	memcpy(&x, a, sizeof(x));
	memcpy(&y, b, sizeof(y));
	return x < y ? -1 : x > y;
}

int cp_tree__by_u64(const void *a, const void *b)
{
	uint64_t x, y;

	memcpy(&x, a, sizeof(x));
	memcpy(&y, b, sizeof(y));
	return x < y ? -1 : x > y;
}

void *cp_tree__find(void *const *tree, const void *key, cp_tree_order *order)
{
	void *const *found = tfind(key, tree, order);

	return found ? *found : NULL;
}

void *cp_tree__take(void **tree, const void *key, cp_tree_order *order)
{
	void *entry = cp_tree__find(tree, key, order);

	if (entry)
		tdelete(key, tree, order);
	return entry;
}

void *cp_tree__add(void **tree, const void *key, size_t size, cp_tree_order *order, bool *added)
{
	void **found = tsearch(key, tree, order);
	void *entry;

	if (added)
		*added = false;
	if (!found)
		return NULL;
	if (*found != key)
		return *found;
	/* key itself went in: its place takes a copy that outlives the caller's. */
	entry = malloc(size);
	if (!entry) {
		tdelete(key, tree, order);
		return NULL;
	}
	memcpy(entry, key, size);
	*found = entry;
	if (added)
		*added = true;
	return entry;
}
