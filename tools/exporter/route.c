// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Where a request to the exporter goes (route.h). */
#include <stdbool.h>
#include <string.h>

#include "route.h"

static bool is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool equals(const char *bytes, size_t len, const char *word)
{
	return len == strlen(word) && !memcmp(bytes, word, len);
}

enum cp_route cp_route__method(const char *method, size_t len)
{
	size_t i;

	if (!method || !len)
		return CP_ROUTE_BAD_REQUEST;
	for (i = 0; i < len; i++)
		if (is_control((unsigned char)method[i]))
			return CP_ROUTE_BAD_REQUEST;
	if (equals(method, len, "GET") || equals(method, len, "HEAD"))
		return CP_ROUTE_METRICS;
	return CP_ROUTE_NOT_ALLOWED;
}

enum cp_route cp_route__target(const char *target, size_t len)
{
	/* Longer than any path served: decoded no further, but still checked. */
	char path[sizeof("/metrics")];
	size_t i, n = 0;
	bool longer = false;

	if (!target)
		return CP_ROUTE_BAD_REQUEST;
	for (i = 0; i < len && target[i] != '?'; i++) {
		unsigned char c = (unsigned char)target[i];

		if (c == '%') {
			int high = i + 2 < len ? hex_value((unsigned char)target[i + 1]) : -1;
			int low = i + 2 < len ? hex_value((unsigned char)target[i + 2]) : -1;

			if (high < 0 || low < 0)
				return CP_ROUTE_BAD_REQUEST;
			c = (unsigned char)(high << 4 | low);
			i += 2;
		}
		if (is_control(c))
			return CP_ROUTE_BAD_REQUEST;
		if (n < sizeof(path))
			path[n++] = (char)c;
		else
			longer = true;
	}
	if (longer)
		return CP_ROUTE_NOT_FOUND;
	if (equals(path, n, "/"))
		return CP_ROUTE_INDEX;
	if (equals(path, n, "/metrics"))
		return CP_ROUTE_METRICS;
	return CP_ROUTE_NOT_FOUND;
}

enum cp_route cp_route__combine(enum cp_route method, enum cp_route target)
{
	if (method == CP_ROUTE_BAD_REQUEST || target == CP_ROUTE_BAD_REQUEST)
		return CP_ROUTE_BAD_REQUEST;
	if (method != CP_ROUTE_METRICS)
		return method;
	return target;
}

enum cp_route cp_route__request(const char *method, size_t method_len, const char *target,
				size_t target_len)
{
	return cp_route__combine(cp_route__method(method, method_len),
				 cp_route__target(target, target_len));
}
