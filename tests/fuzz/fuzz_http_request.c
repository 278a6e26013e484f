// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter's request handling without sockets: the route of a request
 * line (tools/exporter/route.c, as the server calls it with the method's and
 * target's lengths) and the exposition an Accept header asks for.
 *
 * Input: the method, a NUL, the target, a NUL, the Accept header (a missing
 * part is empty). The NULs separate the parts; the input from the target on
 * is also taken as one target, NULs in, which must then be a bad request.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exposition.h"
#include "route.h"

/* Bytes before the first c (or all len). */
static size_t strcspn_len(const char *s, size_t len, char c)
{
	const char *at = memchr(s, c, len);

	return at ? (size_t)(at - s) : len;
}

static bool has_control(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return true;
	return false;
}

static bool has_escaped_nul(const char *s, size_t len)
{
	for (size_t i = 0; i + 2 < len; i++)
		if (s[i] == '%' && s[i + 1] == '0' && s[i + 2] == '0')
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *target, *accept;
	size_t method_len, target_len, accept_len, rest_len;
	enum cp_route route;
	char *header;

	target = memchr(text, '\0', size);
	method_len = target ? (size_t)(target - text) : size;
	target = target ? target + 1 : text + size;
	accept = memchr(target, '\0', size - (size_t)(target - text));
	target_len = accept ? (size_t)(accept - target) : size - (size_t)(target - text);
	accept = accept ? accept + 1 : text + size;
	accept_len = size - (size_t)(accept - text);

	route = cp_route__request(text, method_len, target, target_len);
	if (route > CP_ROUTE_BAD_REQUEST)
		abort();
	/* Served: GET or HEAD, and a path of no control byte nor escaped one. */
	if (route == CP_ROUTE_INDEX || route == CP_ROUTE_METRICS) {
		size_t path_len = strcspn_len(target, target_len, '?');

		if (cp_route__method(text, method_len) != CP_ROUTE_METRICS ||
		    has_control(target, path_len) || has_escaped_nul(target, path_len))
			abort();
	}
	/* The rest of the input as one target: a NUL in its path makes it a bad request. */
	rest_len = size - (size_t)(target - text);
	if (memchr(target, '\0', strcspn_len(target, rest_len, '?')) &&
	    cp_route__target(target, rest_len) != CP_ROUTE_BAD_REQUEST)
		abort();

	header = malloc(accept_len + 1);
	if (!header)
		abort();
	memcpy(header, accept, accept_len);
	header[accept_len] = '\0';
	cp_exposition__content_type(cp_exposition__from_accept(header));
	free(header);
	return 0;
}
