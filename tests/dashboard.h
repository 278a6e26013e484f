/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tools/deploy/grafana/cuprobe.json as the dashboard tests read it (with
 * jansson): every query of every panel, with Grafana's variables replaced as
 * Grafana would send the query with every variable at "All".
 */
#ifndef CUPROBE_TEST_DASHBOARD_H
#define CUPROBE_TEST_DASHBOARD_H

#include <stddef.h>

#include <jansson.h>

/* The dashboard parsed; fails the test when the file is not JSON. */
json_t *dashboard_load(const char *path);

struct dashboard_query {
	const char *panel;      /* the panel's title */
	const char *ref_id;
	const char *expr;       /* as written */
	char *promql;           /* variables replaced (malloc'd) */
};

/*
 * Every target of every panel (rows' nested panels too), in order. Fails the
 * test on a target without expr or refId, or on a variable that is neither
 * the dashboard's nor one of Grafana's built-ins that the queries may use.
 */
struct dashboard_query *dashboard_queries(json_t *dashboard, size_t *count);
void dashboard_queries_free(struct dashboard_query *queries, size_t count);

/*
 * text with Grafana's variables replaced: $name, ${name} and ${name:format}
 * of the dashboard's variables by ".*" (the "All" of every one, which each
 * sets as its allValue), $__rate_interval by 1m, $__interval by 15s, $__range
 * by 5m. "$1" (label_replace's group) is no variable and stays. NULL (and
 * *unknown set to the name, malloc'd) for a name that is none of these.
 */
char *dashboard_substitute(json_t *dashboard, const char *text, char **unknown);

#endif
