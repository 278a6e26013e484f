/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a request to the exporter goes, decided from the request line's
 * bytes alone (no socket, no libmicrohttpd: its fuzz harness calls it as the
 * server does). A request's method and target are taken as sent, lengths
 * counted: a NUL inside either is seen, not cut at.
 */
#ifndef CUPROBE_ROUTE_H
#define CUPROBE_ROUTE_H

#include <stddef.h>

enum cp_route {
	CP_ROUTE_INDEX,       /* GET or HEAD "/": a line saying where the metrics are */
	CP_ROUTE_METRICS,     /* GET or HEAD "/metrics" */
	CP_ROUTE_NOT_FOUND,   /* any other path: 404 */
	CP_ROUTE_NOT_ALLOWED, /* a method other than GET and HEAD: 405 */
	CP_ROUTE_BAD_REQUEST, /* a NUL or control byte, raw or %-escaped, or a bad %-escape: 400 */
};

/*
 * The method's verdict: CP_ROUTE_METRICS for GET and HEAD (the target
 * decides), CP_ROUTE_NOT_ALLOWED for other tokens, CP_ROUTE_BAD_REQUEST for
 * a method holding a NUL or control byte.
 */
enum cp_route cp_route__method(const char *method, size_t len);
/*
 * The target's verdict: its path (the bytes before '?'; the query is not
 * read) %-decoded must be exactly "/" or "/metrics". CP_ROUTE_BAD_REQUEST
 * when the path, raw or decoded, holds a NUL or another control byte, or a
 * '%' not followed by two hex digits.
 */
enum cp_route cp_route__target(const char *target, size_t len);
/* Both: a bad request first, then the method (405 before 404), then the target. */
enum cp_route cp_route__combine(enum cp_route method, enum cp_route target);
/* cp_route__combine of the two verdicts. */
enum cp_route cp_route__request(const char *method, size_t method_len, const char *target,
				size_t target_len);

#endif
