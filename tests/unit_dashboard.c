// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tools/deploy/grafana/cuprobe.json against the fields Grafana's classic
 * dashboard model requires (Grafana 11 to 13 import it, by file provisioning
 * or the UI): the dashboard's uid, title and schemaVersion; panels with a
 * type, a title and a gridPos on the 24-column grid, none overlapping; each
 * query panel on the dashboard's Prometheus data source with targets of an
 * expr and a unique refId; the template variables node, namespace, pod and
 * GPU, each with "All" as ".*" and each used. root_dashboard runs every
 * query against a real Prometheus.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dashboard.h"

/* Grafana 13's classic model is schemaVersion 42, its last; 36 made data sources references. */
#define SCHEMA_VERSION_MIN 36
#define SCHEMA_VERSION_MAX 42
#define GRID_COLUMNS 24

static json_t *dashboard;

static void setup(void)
{
	dashboard = dashboard_load(DASHBOARD);
}

static void teardown(void)
{
	json_decref(dashboard);
}

TestSuite(dashboard, .init = setup, .fini = teardown);

static const char *string_of(json_t *obj, const char *key, const char *what)
{
	const char *value = json_string_value(json_object_get(obj, key));

	cr_assert(value && *value, "%s: no \"%s\" string", what, key);
	return value;
}

static json_int_t integer_of(json_t *obj, const char *key, const char *what)
{
	json_t *value = json_object_get(obj, key);

	cr_assert(json_is_integer(value), "%s: no \"%s\" integer", what, key);
	return json_integer_value(value);
}

Test(dashboard, has_the_fields_of_a_grafana_dashboard)
{
	const char *uid = string_of(dashboard, "uid", "the dashboard");
	json_int_t version = integer_of(dashboard, "schemaVersion", "the dashboard");
	json_t *time = json_object_get(dashboard, "time");
	size_t i;

	cr_assert(strlen(uid) <= 40, "uid \"%s\": at most 40 characters", uid);
	for (i = 0; uid[i]; i++)
		cr_assert(isalnum((unsigned char)uid[i]) || uid[i] == '-' || uid[i] == '_',
			  "uid \"%s\": letters, digits, - and _ only", uid);
	string_of(dashboard, "title", "the dashboard");
	cr_assert(version >= SCHEMA_VERSION_MIN && version <= SCHEMA_VERSION_MAX,
		  "schemaVersion %lld: a current Grafana's is %d..%d", (long long)version,
		  SCHEMA_VERSION_MIN, SCHEMA_VERSION_MAX);
	cr_assert(json_is_null(json_object_get(dashboard, "id")),
		  "id must be null: Grafana gives one when it imports the dashboard");
	cr_assert(json_is_array(json_object_get(dashboard, "panels")) &&
		  json_array_size(json_object_get(dashboard, "panels")) > 0, "no panels");
	cr_assert(json_is_array(json_object_get(json_object_get(dashboard, "templating"), "list")),
		  "no templating.list");
	cr_assert(json_is_array(json_object_get(json_object_get(dashboard, "annotations"), "list")),
		  "no annotations.list");
	string_of(time, "from", "time");
	string_of(time, "to", "time");
	cr_assert(json_is_boolean(json_object_get(dashboard, "editable")));
	cr_assert(json_is_array(json_object_get(dashboard, "tags")));
}

struct placed {
	json_int_t x, y, w, h;
	const char *title;
};

static void check_datasource(json_t *datasource, const char *what)
{
	cr_assert(json_is_object(datasource), "%s: no datasource object", what);
	cr_assert_str_eq(string_of(datasource, "type", what), "prometheus", "%s", what);
	cr_assert_str_eq(string_of(datasource, "uid", what), "${datasource}",
			 "%s: the dashboard's data source variable, so any Prometheus can be chosen", what);
}

static void check_panels(json_t *panels, struct placed *placed, size_t *placed_count,
			 json_int_t *ids, size_t *id_count)
{
	static const char *const types[] = { "row", "timeseries", "stat", "table", "gauge",
					     "bargauge", "text" };
	json_t *panel;
	size_t i, j;

	json_array_foreach(panels, i, panel) {
		const char *title = string_of(panel, "title", "a panel");
		const char *type = string_of(panel, "type", title);
		json_t *grid = json_object_get(panel, "gridPos"), *targets, *target;
		json_int_t id = integer_of(panel, "id", title);
		struct placed p = { .title = title };
		bool known = false;

		for (j = 0; j < sizeof(types) / sizeof(types[0]); j++)
			known |= !strcmp(type, types[j]);
		cr_assert(known, "panel \"%s\": type %s is none of Grafana's built-in panels", title, type);
		cr_assert_gt(id, 0, "panel \"%s\"", title);
		for (j = 0; j < *id_count; j++)
			cr_assert_neq(ids[j], id, "panel \"%s\": id %lld twice", title, (long long)id);
		cr_assert_lt(*id_count, 256);
		ids[(*id_count)++] = id;

		cr_assert(json_is_object(grid), "panel \"%s\": no gridPos", title);
		p.x = integer_of(grid, "x", title);
		p.y = integer_of(grid, "y", title);
		p.w = integer_of(grid, "w", title);
		p.h = integer_of(grid, "h", title);
		cr_assert(p.x >= 0 && p.y >= 0 && p.w >= 1 && p.h >= 1 && p.x + p.w <= GRID_COLUMNS,
			  "panel \"%s\": gridPos %lld,%lld %lldx%lld off the %d-column grid", title,
			  (long long)p.x, (long long)p.y, (long long)p.w, (long long)p.h, GRID_COLUMNS);
		for (j = 0; j < *placed_count; j++) {
			const struct placed *o = &placed[j];

			cr_assert(p.x + p.w <= o->x || o->x + o->w <= p.x || p.y + p.h <= o->y ||
					  o->y + o->h <= p.y,
				  "panels \"%s\" and \"%s\" overlap", title, o->title);
		}
		cr_assert_lt(*placed_count, 256);
		placed[(*placed_count)++] = p;

		if (!strcmp(type, "row")) {
			json_t *nested = json_object_get(panel, "panels");

			cr_assert(json_is_boolean(json_object_get(panel, "collapsed")), "row \"%s\"", title);
			cr_assert(json_is_array(nested), "row \"%s\": no panels array", title);
			/* An open row's panels follow it at the top level; a collapsed one holds them. */
			if (json_is_false(json_object_get(panel, "collapsed")))
				cr_assert_eq(json_array_size(nested), 0, "open row \"%s\" holds panels", title);
			check_panels(nested, placed, placed_count, ids, id_count);
			continue;
		}
		check_datasource(json_object_get(panel, "datasource"), title);
		cr_assert(json_is_object(json_object_get(panel, "fieldConfig")), "panel \"%s\"", title);
		cr_assert(json_is_object(json_object_get(panel, "options")), "panel \"%s\"", title);
		targets = json_object_get(panel, "targets");
		cr_assert(json_is_array(targets) && json_array_size(targets) > 0,
			  "panel \"%s\": no targets", title);
		json_array_foreach(targets, j, target) {
			const char *ref_id = string_of(target, "refId", title);
			size_t k;

			string_of(target, "expr", title);
			check_datasource(json_object_get(target, "datasource"), title);
			for (k = 0; k < j; k++)
				cr_assert_str_neq(string_of(json_array_get(targets, k), "refId", title), ref_id,
						  "panel \"%s\": refId %s twice", title, ref_id);
		}
	}
}

Test(dashboard, panels_have_a_type_title_place_and_queries)
{
	struct placed placed[256];
	json_int_t ids[256];
	size_t placed_count = 0, id_count = 0;

	check_panels(json_object_get(dashboard, "panels"), placed, &placed_count, ids, &id_count);
	cr_assert_gt(placed_count, 10);
}

static json_t *variable(const char *name)
{
	json_t *list = json_object_get(json_object_get(dashboard, "templating"), "list"), *var;
	size_t i;

	json_array_foreach(list, i, var)
		if (!strcmp(json_string_value(json_object_get(var, "name")) ?: "", name))
			return var;
	return NULL;
}

Test(dashboard, template_variables_are_complete_and_used)
{
	static const char *const wanted[] = { "datasource", "node", "namespace", "pod", "gpu" };
	json_t *list = json_object_get(json_object_get(dashboard, "templating"), "list"), *var;
	struct dashboard_query *queries;
	size_t count, i, j;

	for (i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++)
		cr_assert_not_null(variable(wanted[i]), "no variable %s", wanted[i]);
	cr_assert_str_eq(string_of(variable("datasource"), "type", "datasource"), "datasource");
	cr_assert_str_eq(string_of(variable("datasource"), "query", "datasource"), "prometheus");
	queries = dashboard_queries(dashboard, &count);
	json_array_foreach(list, i, var) {
		const char *name = string_of(var, "name", "a variable");
		const char *type = string_of(var, "type", name);
		json_t *query = json_object_get(var, "query");
		char *expanded, *unknown, needle[64];
		bool used = false;

		for (j = 0; name[j]; j++)
			cr_assert(isalnum((unsigned char)name[j]) || name[j] == '_', "variable \"%s\"", name);
		for (j = 0; j < i; j++)
			cr_assert_str_neq(string_of(json_array_get(list, j), "name", "a variable"), name,
					  "variable %s twice", name);
		if (!strcmp(type, "datasource"))
			continue;
		cr_assert_str_eq(type, "query", "variable %s", name);
		check_datasource(json_object_get(var, "datasource"), name);
		cr_assert(json_is_object(query) && json_string_value(json_object_get(query, "query")),
			  "variable %s: no query.query", name);
		cr_assert_str_eq(json_string_value(json_object_get(query, "query")),
				 string_of(var, "definition", name), "variable %s: query and definition differ", name);
		/* Its own query may use the variables before it, and no unknown one. */
		expanded = dashboard_substitute(dashboard, string_of(var, "definition", name), &unknown);
		cr_assert_not_null(expanded, "variable %s uses $%s, no variable", name, unknown);
		free(expanded);
		/* "All" is ".*": every series, those without the label too (root_dashboard sends that). */
		cr_assert(json_is_true(json_object_get(var, "includeAll")), "variable %s: no All", name);
		cr_assert_str_eq(string_of(var, "allValue", name), ".*", "variable %s", name);
		snprintf(needle, sizeof(needle), "\"$%s\"", name);
		for (j = 0; j < count && !used; j++)
			used = strstr(queries[j].expr, needle) != NULL;
		cr_assert(used, "variable %s is used by no panel", name);
	}
	dashboard_queries_free(queries, count);
}

/* ---- the substitution the root test relies on --------------------------------------- */

Test(dashboard, variables_are_replaced_as_grafana_sends_all)
{
	char *out, *unknown;

	out = dashboard_substitute(dashboard, "x{instance=~\"$node\", pod=~\"${pod}\", gpu_uuid=~\"${gpu:regex}\"}", &unknown);
	cr_assert_str_eq(out, "x{instance=~\".*\", pod=~\".*\", gpu_uuid=~\".*\"}");
	free(out);
	out = dashboard_substitute(dashboard, "rate(x[$__rate_interval]) offset $__range", &unknown);
	cr_assert_str_eq(out, "rate(x[1m]) offset 5m");
	free(out);
	out = dashboard_substitute(dashboard, "label_replace(x, \"pod\", \"$1\", \"uid\", \"(.+)\")", &unknown);
	cr_assert_str_eq(out, "label_replace(x, \"pod\", \"$1\", \"uid\", \"(.+)\")");
	free(out);
	cr_assert_null(dashboard_substitute(dashboard, "x{a=~\"$nodes\"}", &unknown));
	cr_assert_str_eq(unknown, "nodes");
	free(unknown);
}

Test(dashboard, every_query_has_its_variables)
{
	size_t count;
	struct dashboard_query *queries = dashboard_queries(dashboard, &count);

	cr_assert_gt(count, 20);
	dashboard_queries_free(queries, count);
}
