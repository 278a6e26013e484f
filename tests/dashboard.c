// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dashboard.h"

json_t *dashboard_load(const char *path)
{
	json_error_t error;
	json_t *dashboard = json_load_file(path, JSON_REJECT_DUPLICATES, &error);

	cr_assert_not_null(dashboard, "%s is no JSON: line %d: %s", path, error.line, error.text);
	return dashboard;
}

/* Grafana's built-in variables the queries use, and what a test sends for them. */
static const struct {
	const char *name, *value;
} builtins[] = {
	{ "__rate_interval", "1m" },
	{ "__interval", "15s" },
	{ "__range", "5m" },
};

static bool is_variable(json_t *dashboard, const char *name, size_t len)
{
	json_t *list = json_object_get(json_object_get(dashboard, "templating"), "list"), *var;
	size_t i;

	json_array_foreach(list, i, var) {
		const char *have = json_string_value(json_object_get(var, "name"));

		if (have && strlen(have) == len && !strncmp(have, name, len))
			return true;
	}
	return false;
}

char *dashboard_substitute(json_t *dashboard, const char *text, char **unknown)
{
	char *out = NULL;
	size_t out_len = 0;
	FILE *mem = open_memstream(&out, &out_len);
	const char *p = text;

	cr_assert_not_null(mem);
	*unknown = NULL;
	while (*p) {
		const char *name, *end;
		size_t len, i;
		bool braced = p[0] == '$' && p[1] == '{';

		if (p[0] != '$' || !(braced || isalpha((unsigned char)p[1]) || p[1] == '_')) {
			fputc(*p++, mem); /* "$1" and the like: no variable */
			continue;
		}
		name = p + (braced ? 2 : 1);
		for (len = 0; isalnum((unsigned char)name[len]) || name[len] == '_'; len++)
			;
		end = name + len;
		if (braced) {
			end = strchr(name, '}');
			cr_assert_not_null(end, "an unclosed ${ in: %s", text);
			end++;
		}
		for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
			if (strlen(builtins[i].name) == len && !strncmp(builtins[i].name, name, len))
				break;
		if (i < sizeof(builtins) / sizeof(builtins[0])) {
			fputs(builtins[i].value, mem);
		} else if (is_variable(dashboard, name, len)) {
			fputs(".*", mem);
		} else {
			*unknown = strndup(name, len);
			fclose(mem);
			free(out);
			return NULL;
		}
		p = end;
	}
	fclose(mem);
	return out;
}

static void collect(json_t *dashboard, json_t *panels, struct dashboard_query **queries,
		    size_t *count, size_t *capacity)
{
	json_t *panel, *target;
	size_t i, t;

	json_array_foreach(panels, i, panel) {
		const char *title = json_string_value(json_object_get(panel, "title"));

		collect(dashboard, json_object_get(panel, "panels"), queries, count, capacity);
		json_array_foreach(json_object_get(panel, "targets"), t, target) {
			struct dashboard_query *q;
			char *unknown;

			if (*count == *capacity) {
				*capacity = *capacity ? *capacity * 2 : 32;
				*queries = realloc(*queries, *capacity * sizeof(**queries));
				cr_assert_not_null(*queries);
			}
			q = &(*queries)[(*count)++];
			q->panel = title ? title : "(untitled)";
			q->ref_id = json_string_value(json_object_get(target, "refId"));
			q->expr = json_string_value(json_object_get(target, "expr"));
			cr_assert(q->ref_id && *q->ref_id, "a target of panel \"%s\" has no refId", q->panel);
			cr_assert(q->expr && *q->expr, "target %s of panel \"%s\" has no expr", q->ref_id,
				  q->panel);
			q->promql = dashboard_substitute(dashboard, q->expr, &unknown);
			cr_assert_not_null(q->promql, "target %s of panel \"%s\" uses $%s, no variable of the dashboard",
					   q->ref_id, q->panel, unknown);
		}
	}
}

struct dashboard_query *dashboard_queries(json_t *dashboard, size_t *count)
{
	struct dashboard_query *queries = NULL;
	size_t capacity = 0;

	*count = 0;
	collect(dashboard, json_object_get(dashboard, "panels"), &queries, count, &capacity);
	return queries;
}

void dashboard_queries_free(struct dashboard_query *queries, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(queries[i].promql);
	free(queries);
}
