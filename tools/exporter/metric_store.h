/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The exporter's metric store: families of series, each series found by its
 * label values through an open-addressing index (thousands of processes'
 * series are looked up every refresh). Part of the command line, not the
 * library.
 */
#ifndef CUPROBE_METRIC_STORE_H
#define CUPROBE_METRIC_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "cuprobe.h"

enum cp_metric_type { CP_METRIC_COUNTER, CP_METRIC_GAUGE, CP_METRIC_HISTOGRAM };

#define CP_METRIC_LABELS_MAX 12

/* One series: its label values (in the family's label order) and its value. */
struct cp_metric_sample {
	char *values[CP_METRIC_LABELS_MAX];
	double value;                   /* counters and gauges */
	/* Histograms: log2 buckets of nanoseconds (bucket b: (2^(b-1), 2^b] ns, the
	 * last one everything above), their count and their sum in seconds. */
	uint64_t buckets[CP_HIST_BUCKETS];
	uint64_t count;
	double sum;
};

struct cp_metric_family {
	const char *name;               /* base units; counters without _total */
	const char *help;
	const char *unit;               /* "seconds", "bytes", or NULL */
	enum cp_metric_type type;
	const char *const *label_names;
	size_t label_count;
	struct cp_metric_sample *samples;
	size_t sample_count, sample_capacity;
	/* Open-addressing index over the label values: sample position + 1, 0 empty. */
	size_t *index;
	size_t index_capacity;          /* a power of two, at least twice sample_count */
};

/* A new series (label values copied); NULL when out of memory. */
struct cp_metric_sample *cp_metric_family__add(struct cp_metric_family *family,
					       const char *const *values);
/* The series with these label values (found through the index), added when new. */
struct cp_metric_sample *cp_metric_family__find(struct cp_metric_family *family,
						const char *const *values);
/* Every series removed (the arrays kept for reuse). */
void cp_metric_family__clear(struct cp_metric_family *family);
/* Every series removed and the arrays freed. */
void cp_metric_family__release(struct cp_metric_family *family);

#endif
