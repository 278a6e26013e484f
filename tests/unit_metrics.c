// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The exporter's metric store and expositions (tools/exporter/): series found again, exact text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "exposition.h"
#include "helpers.h"

/* ---- metric families: the index finds every series, whatever their number ---- */

Test(metrics, find_returns_the_same_series_for_the_same_labels)
{
	static const char *const names[] = { "pid", "api" };
	struct cp_metric_family f = { .name = "t", .help = "h", .type = CP_METRIC_COUNTER,
				      .label_names = names, .label_count = 2 };
	char pid[16], api[16];
	size_t i;

	/* Enough series for the index to be rebuilt several times. */
	for (i = 0; i < 20000; i++) {
		const char *values[2] = { pid, api };
		struct cp_metric_sample *s;

		snprintf(pid, sizeof(pid), "%zu", i / 7);
		snprintf(api, sizeof(api), "a%zu", i % 7);
		s = cp_metric_family__find(&f, values);
		cr_assert_not_null(s);
		s->value += 1;
	}
	cr_assert_eq(f.sample_count, 20000);
	for (i = 0; i < 20000; i += 97) {
		const char *values[2] = { pid, api };

		snprintf(pid, sizeof(pid), "%zu", i / 7);
		snprintf(api, sizeof(api), "a%zu", i % 7);
		cr_assert_eq(cp_metric_family__find(&f, values)->value, 1.0);
	}
	cr_assert_eq(f.sample_count, 20000, "finding existing series added some");
	/* Values that concatenate alike are different series ("1","12" vs "11","2"). */
	{
		const char *a[2] = { "1", "12" }, *b[2] = { "11", "2" }, *null_value[2] = { NULL, "" };

		cr_assert_neq(cp_metric_family__find(&f, a), cp_metric_family__find(&f, b));
		/* NULL is the empty value. */
		cr_assert_eq(cp_metric_family__find(&f, null_value),
			     cp_metric_family__find(&f, (const char *[]){ "", "" }));
	}
	cp_metric_family__clear(&f);
	cr_assert_eq(f.sample_count, 0);
	{
		const char *values[2] = { "1", "a1" };

		cr_assert_eq(cp_metric_family__find(&f, values)->value, 0.0, "cleared, then found again");
		cr_assert_eq(f.sample_count, 1);
	}
	cp_metric_family__release(&f);
	cr_assert_null(f.samples);
	cr_assert_null(f.index);
}

/* ---- metric expositions: the exact text of each format ---------------------------- */

static const char *const golden_labels[] = { "pid", "kernel" };

/* A counter (one value escaped), a gauge without labels, and a histogram. */
static void golden_families(struct cp_metric_family f[3])
{
	const char *a[2] = { "42", "vec_add<\"x\\y\n>" }, *b[2] = { "7", "" };
	struct cp_metric_sample *s;

	memset(f, 0, 3 * sizeof(*f));
	f[0] = (struct cp_metric_family){ .name = "t_launches", .help = "Launches (kernel=\"other\" \\ rest)",
					  .type = CP_METRIC_COUNTER,
					  .label_names = golden_labels, .label_count = 2 };
	f[1] = (struct cp_metric_family){ .name = "t_live_bytes", .help = "Live", .unit = "bytes",
					  .type = CP_METRIC_GAUGE };
	f[2] = (struct cp_metric_family){ .name = "t_latency_seconds", .help = "Latency", .unit = "seconds",
					  .type = CP_METRIC_HISTOGRAM, .label_names = golden_labels,
					  .label_count = 2 };
	cp_metric_family__find(&f[0], a)->value = 1234567;
	cp_metric_family__find(&f[0], b)->value = 0.5;
	cp_metric_family__find(&f[1], (const char *[]){ NULL })->value = -3;
	s = cp_metric_family__find(&f[2], b);
	s->buckets[0] = 1;
	s->buckets[3] = 2;
	s->buckets[CP_HIST_BUCKETS - 1] = 1;
	s->count = 4;
	s->sum = 2.25;
}

static char *exposition(enum cp_exposition e, size_t *len)
{
	struct cp_metric_family f[3];
	struct cp_text text = { 0 };
	char *copy;
	int i;

	golden_families(f);
	cr_assert_eq(cp_format__metrics(&text, e, f, 3), 0);
	for (i = 0; i < 3; i++)
		cp_metric_family__release(&f[i]);
	copy = malloc(text.len + 1);
	cr_assert_not_null(copy);
	memcpy(copy, text.data, text.len);
	copy[text.len] = '\0';
	*len = text.len;
	cp_text__free(&text);
	return copy;
}

/* The histogram's lines of the golden family, in either text format. */
static void expect_histogram_lines(const char *text)
{
	static const uint64_t cumulative_at[] = { 1, 1, 1, 3 }; /* then 3 up to the last bucket */
	char line[256];
	int b;

	for (b = 0; b < CP_HIST_BUCKETS - 1; b++) {
		snprintf(line, sizeof(line), "\nt_latency_seconds_bucket{pid=\"7\",kernel=\"\",le=\"%.17g\"} %llu\n",
			 (double)(1ull << b) * 1e-9,
			 (unsigned long long)(b < 4 ? cumulative_at[b] : 3));
		cr_assert_not_null(strstr(text, line), "missing: %s", line + 1);
	}
	cr_assert_not_null(strstr(text, "\nt_latency_seconds_bucket{pid=\"7\",kernel=\"\",le=\"1.0000000000000001e-09\"} 1\n"));
	cr_assert_not_null(strstr(text, "\nt_latency_seconds_bucket{pid=\"7\",kernel=\"\",le=\"+Inf\"} 4\n"
				   "t_latency_seconds_count{pid=\"7\",kernel=\"\"} 4\n"
				   "t_latency_seconds_sum{pid=\"7\",kernel=\"\"} 2.25\n"));
}

Test(metrics, prometheus_text_exactly)
{
	size_t len;
	char *t = exposition(CP_EXPOSITION_PROMETHEUS_TEXT, &len);
	static const char head[] =
		"# HELP t_launches_total Launches (kernel=\"other\" \\\\ rest)\n"
		"# TYPE t_launches_total counter\n"
		"t_launches_total{pid=\"42\",kernel=\"vec_add<\\\"x\\\\y\\n>\"} 1234567\n"
		"t_launches_total{pid=\"7\",kernel=\"\"} 0.5\n"
		"# HELP t_live_bytes Live\n"
		"# TYPE t_live_bytes gauge\n"
		"t_live_bytes -3\n"
		"# HELP t_latency_seconds Latency\n"
		"# TYPE t_latency_seconds histogram\n";

	cr_assert_eq(strncmp(t, head, sizeof(head) - 1), 0, "got:\n%s", t);
	expect_histogram_lines(t);
	cr_assert_eq(count_lines(t), 9 + CP_HIST_BUCKETS + 2, "got:\n%s", t);
	cr_assert_eq(strlen(t), len, "a NUL inside the text");
	free(t);
}

Test(metrics, openmetrics_exactly)
{
	size_t len;
	char *t = exposition(CP_EXPOSITION_OPENMETRICS, &len);
	static const char head[] =
		"# TYPE t_launches counter\n"
		"# HELP t_launches Launches (kernel=\\\"other\\\" \\\\ rest)\n"
		"t_launches_total{pid=\"42\",kernel=\"vec_add<\\\"x\\\\y\\n>\"} 1234567\n"
		"t_launches_total{pid=\"7\",kernel=\"\"} 0.5\n"
		"# TYPE t_live_bytes gauge\n"
		"# UNIT t_live_bytes bytes\n"
		"# HELP t_live_bytes Live\n"
		"t_live_bytes -3\n"
		"# TYPE t_latency_seconds histogram\n"
		"# UNIT t_latency_seconds seconds\n"
		"# HELP t_latency_seconds Latency\n";

	cr_assert_eq(strncmp(t, head, sizeof(head) - 1), 0, "got:\n%s", t);
	expect_histogram_lines(t);
	cr_assert_eq(count_lines(t), 11 + CP_HIST_BUCKETS + 2 + 1, "got:\n%s", t);
	cr_assert_str_eq(t + len - 6, "# EOF\n");
	free(t);
}

Test(metrics, protobuf_is_length_delimited_families)
{
	size_t len, at = 0, families = 0;
	char *t = exposition(CP_EXPOSITION_PROTOBUF, &len);

	/* varint length, then that many bytes, three times, and nothing after. */
	while (at < len) {
		uint64_t size = 0;
		int shift = 0;

		while ((unsigned char)t[at] & 0x80) {
			size |= (uint64_t)((unsigned char)t[at++] & 0x7f) << shift;
			shift += 7;
		}
		size |= (uint64_t)(unsigned char)t[at++] << shift;
		cr_assert_leq(at + size, len);
		cr_assert_eq(t[at], 0x0a, "a MetricFamily starts with its name (field 1)");
		at += size;
		families++;
	}
	cr_assert_eq(families, 3);
	free(t);
}
