// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The exporter's expositions (exposition.h): Prometheus text, OpenMetrics, protobuf. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exposition.h"
#include "metrics.pb-c.h"

/* Appenders over the text: a failed one sets text->failed, and the later ones do nothing. */
static void put_bytes(struct cp_text *out, const char *bytes, size_t n)
{
	cp_text__append(out, bytes, n);
}

static void put_str(struct cp_text *out, const char *s)
{
	cp_text__append(out, s, strlen(s));
}

static void put_u64(struct cp_text *out, uint64_t value)
{
	cp_text__appendf(out, "%llu", (unsigned long long)value);
}

enum cp_exposition cp_exposition__from_accept(const char *accept)
{
	if (accept && strstr(accept, "application/vnd.google.protobuf") &&
	    strstr(accept, "io.prometheus.client.MetricFamily"))
		return CP_EXPOSITION_PROTOBUF;
	if (accept && strstr(accept, "application/openmetrics-text"))
		return CP_EXPOSITION_OPENMETRICS;
	return CP_EXPOSITION_PROMETHEUS_TEXT;
}

const char *cp_exposition__content_type(enum cp_exposition exposition)
{
	switch (exposition) {
	case CP_EXPOSITION_PROTOBUF:
		return "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
	case CP_EXPOSITION_OPENMETRICS:
		return "application/openmetrics-text; version=1.0.0; charset=utf-8";
	default:
		return "text/plain; version=0.0.4; charset=utf-8";
	}
}

/* s with the characters of escaped (backslash, newline, double quote) backslash-escaped. */
static void put_escaped(struct cp_text *out, const char *s, const char *escaped)
{
	const char *p = s;

	while (*p) {
		size_t plain = strcspn(p, escaped);

		put_bytes(out, p, plain);
		p += plain;
		if (!*p)
			break;
		put_str(out, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n");
		p++;
	}
}

/* A label value: backslash, double quote and newline escaped (both text formats). */
static void put_label_value(struct cp_text *out, const char *value)
{
	put_escaped(out, value, "\\\"\n");
}

/* {a="x",b="y"} with an extra label (le) when given; nothing for no labels. */
static void put_labels(struct cp_text *out, const struct cp_metric_family *f,
		       const struct cp_metric_sample *s, const char *extra_name, const char *extra_value)
{
	size_t i;

	if (!f->label_count && !extra_name)
		return;
	put_str(out, "{");
	for (i = 0; i < f->label_count; i++) {
		if (i)
			put_str(out, ",");
		put_str(out, f->label_names[i]);
		put_str(out, "=\"");
		put_label_value(out, s->values[i]);
		put_str(out, "\"");
	}
	if (extra_name) {
		if (f->label_count)
			put_str(out, ",");
		put_str(out, extra_name);
		put_str(out, "=\"");
		put_str(out, extra_value);
		put_str(out, "\"");
	}
	put_str(out, "}");
}

/* A float the way both formats read it: integers plain, the rest %.17g. */
static void put_number(struct cp_text *out, double value)
{
	if (value == (double)(long long)value && value < 9e15 && value > -9e15) {
		if (value < 0)
			put_str(out, "-");
		put_u64(out, (uint64_t)(value < 0 ? -(long long)value : (long long)value));
	} else {
		cp_text__appendf(out, "%.17g", value);
	}
}

/* The upper bound of log2 bucket b in seconds: 2^b ns. */
static double bucket_le_seconds(int b)
{
	return (double)(1ull << b) * 1e-9;
}

/*
 * HELP text and its newline: backslash and newline escaped in both formats,
 * the double quote too in OpenMetrics (its HELP is an escaped string).
 */
static void put_help(struct cp_text *out, const char *help, bool openmetrics)
{
	put_escaped(out, help, openmetrics ? "\\\n\"" : "\\\n");
	put_str(out, "\n");
}

/* One line: name, labels (with le when given), a space, the value, a newline. */
static void put_sample_line(struct cp_text *out, const struct cp_metric_family *f,
			    const struct cp_metric_sample *s, const char *suffix, const char *le,
			    uint64_t count, const double *value)
{
	put_str(out, f->name);
	put_str(out, suffix);
	put_labels(out, f, s, le ? "le" : NULL, le);
	put_str(out, " ");
	if (value)
		put_number(out, *value);
	else
		put_u64(out, count);
	put_str(out, "\n");
}

static void put_text_family(struct cp_text *out, const struct cp_metric_family *f, bool openmetrics)
{
	const char *suffix = f->type == CP_METRIC_COUNTER ? "_total" : "";
	const char *type = f->type == CP_METRIC_COUNTER ? "counter" :
			   f->type == CP_METRIC_GAUGE ? "gauge" : "histogram";
	char le[CP_HIST_BUCKETS][32];
	size_t i;
	int b;

	/* OpenMetrics names the family without _total; Prometheus text names the series. */
	if (openmetrics) {
		cp_text__appendf(out, "# TYPE %s %s\n", f->name, type);
		if (f->unit)
			cp_text__appendf(out, "# UNIT %s %s\n", f->name, f->unit);
		cp_text__appendf(out, "# HELP %s ", f->name);
		put_help(out, f->help, true);
	} else {
		cp_text__appendf(out, "# HELP %s%s ", f->name, suffix);
		put_help(out, f->help, false);
		cp_text__appendf(out, "# TYPE %s%s %s\n", f->name, suffix, type);
	}
	if (f->type == CP_METRIC_HISTOGRAM)
		for (b = 0; b < CP_HIST_BUCKETS - 1; b++)
			snprintf(le[b], sizeof(le[b]), "%.17g", bucket_le_seconds(b));
	for (i = 0; i < f->sample_count; i++) {
		const struct cp_metric_sample *s = &f->samples[i];
		uint64_t cumulative = 0;

		if (f->type != CP_METRIC_HISTOGRAM) {
			put_sample_line(out, f, s, suffix, NULL, 0, &s->value);
			continue;
		}
		/* Exact classic buckets: le = 2^b ns; the last bucket is +Inf. */
		for (b = 0; b < CP_HIST_BUCKETS - 1; b++) {
			cumulative += s->buckets[b];
			put_sample_line(out, f, s, "_bucket", le[b], cumulative, NULL);
		}
		put_sample_line(out, f, s, "_bucket", "+Inf", s->count, NULL);
		put_sample_line(out, f, s, "_count", NULL, s->count, NULL);
		put_sample_line(out, f, s, "_sum", NULL, 0, &s->sum);
	}
}

/* ---- protobuf (io.prometheus.client.MetricFamily, length-delimited) ---- */

/* A native histogram of schema 0 from log2 ns buckets: one span, counts as deltas. */
static int native_histogram(Io__Prometheus__Client__Histogram *h, const struct cp_metric_sample *s,
			    Io__Prometheus__Client__BucketSpan *span, int64_t *deltas,
			    Io__Prometheus__Client__BucketSpan **spans)
{
	int first = -1, last = -1, b;
	int64_t previous = 0;

	for (b = 0; b < CP_HIST_BUCKETS; b++)
		if (s->buckets[b]) {
			if (first < 0)
				first = b;
			last = b;
		}
	h->has_schema = true;
	h->schema = 0;
	h->has_zero_threshold = true;
	h->zero_threshold = 0;
	h->has_zero_count = true;
	h->zero_count = 0;
	if (first < 0)
		return 0;
	/*
	 * Native bucket i holds (2^(i-1), 2^i] s; 2^b ns = 2^(b - 29.9) s lies in
	 * bucket b - 29: each log2 bucket is counted where its upper bound falls.
	 */
	io__prometheus__client__bucket_span__init(span);
	span->has_offset = true;
	span->offset = first - 29;
	span->has_length = true;
	span->length = (uint32_t)(last - first + 1);
	for (b = first; b <= last; b++) {
		deltas[b - first] = (int64_t)s->buckets[b] - previous;
		previous = (int64_t)s->buckets[b];
	}
	spans[0] = span;
	h->n_positive_span = 1;
	h->positive_span = spans;
	h->n_positive_delta = (size_t)(last - first + 1);
	h->positive_delta = deltas;
	return 0;
}

static size_t varint(uint8_t *out, uint64_t value)
{
	size_t n = 0;

	do {
		out[n] = (uint8_t)(value & 0x7f);
		value >>= 7;
		if (value)
			out[n] |= 0x80;
		n++;
	} while (value);
	return n;
}

static int put_protobuf_family(struct cp_text *out, const struct cp_metric_family *f)
{
	Io__Prometheus__Client__MetricFamily family = IO__PROMETHEUS__CLIENT__METRIC_FAMILY__INIT;
	size_t n = f->sample_count, i, j, labels = f->label_count, size;
	Io__Prometheus__Client__Metric *metrics = calloc(n ? n : 1, sizeof(*metrics));
	Io__Prometheus__Client__Metric **metric_ptrs = calloc(n ? n : 1, sizeof(*metric_ptrs));
	Io__Prometheus__Client__LabelPair *pairs = calloc((n ? n : 1) * (labels ? labels : 1), sizeof(*pairs));
	Io__Prometheus__Client__LabelPair **pair_ptrs = calloc((n ? n : 1) * (labels ? labels : 1),
							       sizeof(*pair_ptrs));
	Io__Prometheus__Client__Counter *counters = calloc(n ? n : 1, sizeof(*counters));
	Io__Prometheus__Client__Gauge *gauges = calloc(n ? n : 1, sizeof(*gauges));
	Io__Prometheus__Client__Histogram *histograms = calloc(n ? n : 1, sizeof(*histograms));
	Io__Prometheus__Client__Bucket *buckets = calloc((n ? n : 1) * CP_HIST_BUCKETS, sizeof(*buckets));
	Io__Prometheus__Client__Bucket **bucket_ptrs = calloc((n ? n : 1) * CP_HIST_BUCKETS,
							      sizeof(*bucket_ptrs));
	Io__Prometheus__Client__BucketSpan *spans = calloc(n ? n : 1, sizeof(*spans));
	Io__Prometheus__Client__BucketSpan **span_ptrs = calloc(n ? n : 1, sizeof(*span_ptrs));
	int64_t *deltas = calloc((n ? n : 1) * CP_HIST_BUCKETS, sizeof(*deltas));
	char name[256];
	uint8_t prefix[10], *packed = NULL;
	int err = -ENOMEM;

	if (!metrics || !metric_ptrs || !pairs || !pair_ptrs || !counters || !gauges || !histograms ||
	    !buckets || !bucket_ptrs || !spans || !span_ptrs || !deltas)
		goto out_free;
	snprintf(name, sizeof(name), "%s%s", f->name, f->type == CP_METRIC_COUNTER ? "_total" : "");
	family.name = name;
	family.help = (char *)f->help;
	family.has_type = true;
	family.type = f->type == CP_METRIC_COUNTER ? IO__PROMETHEUS__CLIENT__METRIC_TYPE__COUNTER :
		      f->type == CP_METRIC_GAUGE ? IO__PROMETHEUS__CLIENT__METRIC_TYPE__GAUGE :
		      IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM;
	for (i = 0; i < n; i++) {
		const struct cp_metric_sample *s = &f->samples[i];
		Io__Prometheus__Client__Metric *m = &metrics[i];
		uint64_t cumulative = 0;
		int b;

		io__prometheus__client__metric__init(m);
		for (j = 0; j < labels; j++) {
			Io__Prometheus__Client__LabelPair *pair = &pairs[i * labels + j];

			io__prometheus__client__label_pair__init(pair);
			pair->name = (char *)f->label_names[j];
			pair->value = s->values[j];
			pair_ptrs[i * labels + j] = pair;
		}
		m->n_label = labels;
		m->label = &pair_ptrs[i * labels];
		if (f->type == CP_METRIC_COUNTER) {
			io__prometheus__client__counter__init(&counters[i]);
			counters[i].has_value = true;
			counters[i].value = s->value;
			m->counter = &counters[i];
		} else if (f->type == CP_METRIC_GAUGE) {
			io__prometheus__client__gauge__init(&gauges[i]);
			gauges[i].has_value = true;
			gauges[i].value = s->value;
			m->gauge = &gauges[i];
		} else {
			Io__Prometheus__Client__Histogram *h = &histograms[i];

			io__prometheus__client__histogram__init(h);
			h->has_sample_count = true;
			h->sample_count = s->count;
			h->has_sample_sum = true;
			h->sample_sum = s->sum;
			for (b = 0; b < CP_HIST_BUCKETS - 1; b++) {
				Io__Prometheus__Client__Bucket *bucket = &buckets[i * CP_HIST_BUCKETS + b];

				io__prometheus__client__bucket__init(bucket);
				cumulative += s->buckets[b];
				bucket->has_cumulative_count = true;
				bucket->cumulative_count = cumulative;
				bucket->has_upper_bound = true;
				bucket->upper_bound = bucket_le_seconds(b);
				bucket_ptrs[i * CP_HIST_BUCKETS + b] = bucket;
			}
			h->n_bucket = CP_HIST_BUCKETS - 1;
			h->bucket = &bucket_ptrs[i * CP_HIST_BUCKETS];
			native_histogram(h, s, &spans[i], &deltas[i * CP_HIST_BUCKETS], &span_ptrs[i]);
			m->histogram = h;
		}
		metric_ptrs[i] = m;
	}
	family.n_metric = n;
	family.metric = metric_ptrs;
	size = io__prometheus__client__metric_family__get_packed_size(&family);
	packed = malloc(size ? size : 1);
	if (!packed)
		goto out_free;
	io__prometheus__client__metric_family__pack(&family, packed);
	put_bytes(out, (const char *)prefix, varint(prefix, size));
	put_bytes(out, (const char *)packed, size);
	err = out->failed ? -ENOMEM : 0;
out_free:
	free(packed);
	free(metrics);
	free(metric_ptrs);
	free(pairs);
	free(pair_ptrs);
	free(counters);
	free(gauges);
	free(histograms);
	free(buckets);
	free(bucket_ptrs);
	free(spans);
	free(span_ptrs);
	free(deltas);
	return err;
}

int cp_format__metrics(struct cp_text *text, enum cp_exposition exposition,
		       const struct cp_metric_family *families, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++) {
		if (exposition == CP_EXPOSITION_PROTOBUF) {
			if (put_protobuf_family(text, &families[i])) {
				text->failed = true;
				break;
			}
			continue;
		}
		put_text_family(text, &families[i], exposition == CP_EXPOSITION_OPENMETRICS);
	}
	if (exposition == CP_EXPOSITION_OPENMETRICS)
		cp_text__appendf(text, "# EOF\n");
	return text->failed ? -ENOMEM : 0;
}
