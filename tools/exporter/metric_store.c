// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The exporter's metric store (metric_store.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "metric_store.h"

/* FNV-1a over the label values, each ended by a byte no UTF-8 text holds. */
static size_t labels_hash(const struct cp_metric_family *family, const char *const *values)
{
	uint64_t hash = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < family->label_count; i++) {
		const unsigned char *p = (const unsigned char *)(values[i] ? values[i] : "");

		for (; *p; p++)
			hash = (hash ^ *p) * 1099511628211ull;
		hash = (hash ^ 0xff) * 1099511628211ull;
	}
	return (size_t)hash;
}

static bool labels_equal(const struct cp_metric_family *family, const struct cp_metric_sample *s,
			 const char *const *values)
{
	size_t i;

	for (i = 0; i < family->label_count; i++)
		if (strcmp(s->values[i], values[i] ? values[i] : ""))
			return false;
	return true;
}

static void index_insert(struct cp_metric_family *family, size_t position)
{
	size_t mask = family->index_capacity - 1,
	       slot = labels_hash(family, (const char *const *)family->samples[position].values) & mask;

	while (family->index[slot])
		slot = (slot + 1) & mask;
	family->index[slot] = position + 1;
}

/* Keeps the index at most half full: rebuilt twice as large when it would not be. */
static int index_reserve(struct cp_metric_family *family, size_t count)
{
	size_t capacity = family->index_capacity ? family->index_capacity : 64, i;
	size_t *grown;

	if (count * 2 <= family->index_capacity)
		return 0;
	while (count * 2 > capacity)
		capacity *= 2;
	grown = calloc(capacity, sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	free(family->index);
	family->index = grown;
	family->index_capacity = capacity;
	for (i = 0; i < family->sample_count; i++)
		index_insert(family, i);
	return 0;
}

static struct cp_metric_sample *add_sample(struct cp_metric_family *family, const char *const *values)
{
	struct cp_metric_sample *sample;
	size_t i;

	if (index_reserve(family, family->sample_count + 1))
		return NULL;
	if (family->sample_count == family->sample_capacity) {
		size_t capacity = family->sample_capacity ? family->sample_capacity * 2 : 16;
		struct cp_metric_sample *grown = realloc(family->samples, capacity * sizeof(*grown));

		if (!grown)
			return NULL;
		family->samples = grown;
		family->sample_capacity = capacity;
	}
	sample = &family->samples[family->sample_count];
	memset(sample, 0, sizeof(*sample));
	for (i = 0; i < family->label_count && i < CP_METRIC_LABELS_MAX; i++) {
		sample->values[i] = strdup(values[i] ? values[i] : "");
		if (!sample->values[i]) {
			while (i--)
				free(sample->values[i]);
			return NULL;
		}
	}
	index_insert(family, family->sample_count);
	family->sample_count++;
	return sample;
}

struct cp_metric_sample *cp_metric_family__add(struct cp_metric_family *family,
					       const char *const *values)
{
	return family && values ? add_sample(family, values) : NULL;
}

struct cp_metric_sample *cp_metric_family__find(struct cp_metric_family *family,
						const char *const *values)
{
	size_t mask, slot;

	if (!family || !values)
		return NULL;
	if (family->index_capacity) {
		mask = family->index_capacity - 1;
		for (slot = labels_hash(family, values) & mask; family->index[slot];
		     slot = (slot + 1) & mask) {
			struct cp_metric_sample *s = &family->samples[family->index[slot] - 1];

			if (labels_equal(family, s, values))
				return s;
		}
	}
	return add_sample(family, values);
}

void cp_metric_family__clear(struct cp_metric_family *family)
{
	size_t i, j;

	if (!family)
		return;
	for (i = 0; i < family->sample_count; i++)
		for (j = 0; j < family->label_count; j++)
			free(family->samples[i].values[j]);
	family->sample_count = 0;
	if (family->index)
		memset(family->index, 0, family->index_capacity * sizeof(*family->index));
}

void cp_metric_family__release(struct cp_metric_family *family)
{
	if (!family)
		return;
	cp_metric_family__clear(family);
	free(family->samples);
	free(family->index);
	family->samples = NULL;
	family->index = NULL;
	family->sample_capacity = family->index_capacity = 0;
}
