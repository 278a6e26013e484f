/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The exporter's expositions of its metric families: Prometheus text,
 * OpenMetrics and Prometheus's protobuf (io.prometheus.client.MetricFamily,
 * with native histograms). The protobuf code (protobuf-c, generated from the
 * schema Debian ships with the client model) is linked by the command line
 * only: libcuprobe does not depend on it.
 */
#ifndef CUPROBE_EXPOSITION_H
#define CUPROBE_EXPOSITION_H

#include "cuprobe_internal.h"
#include "metric_store.h"

enum cp_exposition {
	CP_EXPOSITION_PROMETHEUS_TEXT, /* text/plain; version=0.0.4 */
	CP_EXPOSITION_OPENMETRICS,     /* application/openmetrics-text; version=1.0.0 */
	CP_EXPOSITION_PROTOBUF,        /* delimited io.prometheus.client.MetricFamily */
};
/* What a scraper's Accept header asks for (NULL: Prometheus text). */
enum cp_exposition cp_exposition__from_accept(const char *accept);
const char *cp_exposition__content_type(enum cp_exposition exposition);
/*
 * Every family in one exposition, appended to out (binary for protobuf:
 * out->len counts the bytes). Histograms are exact classic ones (le at
 * each 2^b ns) in every format; protobuf adds a native histogram of schema
 * 0, each log2 bucket counted in the native bucket holding its upper bound.
 * 0 or -ENOMEM.
 */
int cp_format__metrics(struct cp_text *out, enum cp_exposition exposition,
		       const struct cp_metric_family *families, size_t count);

#endif
