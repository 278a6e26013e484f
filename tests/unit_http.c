// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter's HTTP decisions without sockets (tools/exporter/route.h,
 * admission.h, listen.h): where each request line goes, NULs and escapes
 * included; which connection is closed when one address or all of them hold
 * too many, and when a request's deadline passes; what --listen takes. root_exporter runs the same against
 * the real server.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <criterion/criterion.h>

#include "admission.h"
#include "listen.h"
#include "route.h"

#define S(literal) literal, sizeof(literal) - 1

static enum cp_route route(const char *method, size_t method_len, const char *target,
			   size_t target_len)
{
	return cp_route__request(method, method_len, target, target_len);
}

Test(route, the_two_paths_and_their_escapes)
{
	cr_expect_eq(route(S("GET"), S("/")), CP_ROUTE_INDEX);
	cr_expect_eq(route(S("HEAD"), S("/")), CP_ROUTE_INDEX);
	cr_expect_eq(route(S("GET"), S("/metrics")), CP_ROUTE_METRICS);
	cr_expect_eq(route(S("HEAD"), S("/metrics")), CP_ROUTE_METRICS);
	/* Exactly these after decoding: escapes of plain letters are the same path. */
	cr_expect_eq(route(S("GET"), S("/%6detrics")), CP_ROUTE_METRICS);
	cr_expect_eq(route(S("GET"), S("/%6Detrics")), CP_ROUTE_METRICS);
	cr_expect_eq(route(S("GET"), S("%2f")), CP_ROUTE_INDEX);
	/* The query is not read. */
	cr_expect_eq(route(S("GET"), S("/metrics?x=1")), CP_ROUTE_METRICS);
	cr_expect_eq(route(S("GET"), S("/metrics?%00")), CP_ROUTE_METRICS);
	cr_expect_eq(route(S("GET"), S("/?")), CP_ROUTE_INDEX);
}

Test(route, any_other_path_is_not_found)
{
	static const char *const paths[] = {
		"/metrics/", "/metrics/extra", "/metricsx", "/metric", "//metrics", "/metrics%3f",
		"/metrics%20", "/metrics ", "/metrics#x", "http://x/metrics", "*", "", "metrics",
		"/metrics.html", "/METRICS", "/nope", "/%e2%82%ac", "/metrics\xff",
	};
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		cr_expect_eq(route(S("GET"), paths[i], strlen(paths[i])), CP_ROUTE_NOT_FOUND, "%s",
			     paths[i]);
}

/* Issue 25: /metrics%00.html and /%00 were served, cut at the NUL. */
Test(route, a_nul_or_control_byte_raw_or_escaped_is_a_bad_request)
{
	cr_expect_eq(route(S("GET"), S("/metrics%00.html")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/%00")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/metrics%00")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/metrics\0.html")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/\0")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/metrics%0a")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/metrics%7F")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/metrics\t")), CP_ROUTE_BAD_REQUEST);
	/* However long the path: the check goes to its end. */
	cr_expect_eq(route(S("GET"), S("/a-path-longer-than-any-served%00")), CP_ROUTE_BAD_REQUEST);
	/* A '%' not followed by two hex digits. */
	cr_expect_eq(route(S("GET"), S("/metrics%")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/metrics%4")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/metrics%zz")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("GET"), S("/%6")), CP_ROUTE_BAD_REQUEST);
	/* In the method too. */
	cr_expect_eq(route(S("GET\0"), S("/metrics")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S("G\0ET"), S("/metrics")), CP_ROUTE_BAD_REQUEST);
	cr_expect_eq(route(S(""), S("/metrics")), CP_ROUTE_BAD_REQUEST);
	/* A NUL of the method wins over a method not allowed. */
	cr_expect_eq(route(S("POST\0"), S("/metrics")), CP_ROUTE_BAD_REQUEST);
}

Test(route, methods_other_than_get_and_head_are_not_allowed_whatever_the_path)
{
	cr_expect_eq(route(S("POST"), S("/metrics")), CP_ROUTE_NOT_ALLOWED);
	cr_expect_eq(route(S("POST"), S("/nope")), CP_ROUTE_NOT_ALLOWED);
	cr_expect_eq(route(S("get"), S("/metrics")), CP_ROUTE_NOT_ALLOWED);
	cr_expect_eq(route(S("GETX"), S("/metrics")), CP_ROUTE_NOT_ALLOWED);
	cr_expect_eq(route(S("DELETE"), S("/")), CP_ROUTE_NOT_ALLOWED);
	cr_expect_eq(route(S("POST"), S("/%00")), CP_ROUTE_BAD_REQUEST);
}

/* ---- admission ------------------------------------------------------------------------ */

#define SECOND 1000000000ull

static struct cp_admission admission;
static struct cp_admission_client clients[64];

static void admission_setup(void)
{
	memset(clients, 0, sizeof(clients));
	/* Room for 12, keeping 6 in all and 3 an address, 10 s each request. */
	cr_assert_eq(cp_admission__init(&admission, 12, 6, 3, 10 * SECOND), 0);
}

static void admission_teardown(void)
{
	cp_admission__release(&admission);
}

TestSuite(admission, .init = admission_setup, .fini = admission_teardown);

static struct cp_admission_client *from(int i, const char *ipv4)
{
	struct sockaddr_in in = { .sin_family = AF_INET };

	cr_assert_eq(inet_pton(AF_INET, ipv4, &in.sin_addr), 1);
	cp_admission__set_address(&clients[i], (struct sockaddr *)&in);
	return &clients[i];
}

static struct cp_admission_client *add(int i, const char *ipv4, uint64_t now)
{
	return cp_admission__add(&admission, from(i, ipv4), now);
}

Test(admission, one_address_keeps_its_three_closing_its_longest_waiting)
{
	cr_assert_null(add(0, "127.0.0.1", 1));
	cr_assert_null(add(1, "127.0.0.1", 2));
	cr_assert_null(add(2, "127.0.0.1", 3));
	/* A fourth from the same address: the one waiting the longest goes. */
	cr_assert_eq(add(3, "127.0.0.1", 4), &clients[0]);
	cr_assert(clients[0].closing);
	/* Closing, it counts for nothing: the next closes the next longest waiting. */
	cr_assert_eq(add(4, "127.0.0.1", 5), &clients[1]);
	/* Others' addresses are not its. */
	cr_assert_null(add(5, "127.0.0.2", 6));
	cp_admission__remove(&admission, &clients[0]);
	cp_admission__remove(&admission, &clients[1]);
	cr_assert_eq(admission.count, 4);
}

Test(admission, a_connection_being_answered_goes_only_when_none_waits)
{
	add(0, "127.0.0.1", 1);
	add(1, "127.0.0.1", 2);
	add(2, "127.0.0.1", 3);
	cp_admission__answering(&clients[0]);
	cp_admission__answering(&clients[1]);
	/* The oldest waiting, not the oldest. */
	cr_assert_eq(add(3, "127.0.0.1", 4), &clients[2]);
	cp_admission__answering(&clients[3]);
	/* Every other one answering: the newcomer is the one that waits. */
	cr_assert_eq(add(4, "127.0.0.1", 5), &clients[4]);
	/* Its answer sent, a connection waits again, from then. */
	cp_admission__answered(&clients[0], 6);
	cr_assert_eq(add(5, "127.0.0.1", 7), &clients[0]);
}

Test(admission, past_the_total_the_address_holding_the_most_loses_its_longest_waiting)
{
	add(0, "127.0.0.9", 1);
	add(1, "127.0.0.1", 2);
	add(2, "127.0.0.1", 3);
	add(3, "127.0.0.2", 4);
	add(4, "127.0.0.2", 5);
	cr_assert_null(add(5, "127.0.0.3", 6));
	/* A seventh: .1 and .2 hold two each, .1's oldest waits the longest. */
	cr_assert_eq(add(6, "127.0.0.4", 7), &clients[1]);
	/* Now .2 alone holds two. */
	cr_assert_eq(add(7, "127.0.0.5", 8), &clients[3]);
}

/* Many addresses, one connection each: the longest waiting goes, never the new scraper. */
Test(admission, a_scraper_is_kept_whether_the_others_come_from_its_address_or_not)
{
	char ip[32];
	int i;

	for (i = 0; i < 6; i++) {
		snprintf(ip, sizeof(ip), "127.0.1.%d", i);
		cr_assert_null(add(i, ip, (uint64_t)i));
	}
	for (i = 6; i < 40; i++) {
		struct cp_admission_client *closed;

		snprintf(ip, sizeof(ip), "127.0.1.%d", i);
		closed = add(i, ip, (uint64_t)i);
		cr_assert_not_null(closed);
		cr_assert_neq(closed, &clients[i], "a newcomer closed while older ones waited");
		cp_admission__remove(&admission, closed);
	}
	/* The scraper: from 127.0.0.1, with the six kept waiting. */
	cr_assert_neq(add(40, "127.0.0.1", 100), &clients[40]);
	/* And from an address that holds three already. */
	cp_admission__release(&admission);
	admission_setup();
	for (i = 0; i < 20; i++) {
		struct cp_admission_client *closed = add(i, "127.0.0.1", (uint64_t)i);

		cr_assert_neq(closed, &clients[i]);
		if (closed)
			cp_admission__remove(&admission, closed);
	}
	cr_assert_neq(add(20, "127.0.0.1", 100), &clients[20]);
}

Test(admission, ipv4_and_its_v4_mapped_form_are_one_address)
{
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

	add(0, "127.0.0.1", 1);
	add(1, "127.0.0.1", 2);
	add(2, "127.0.0.1", 3);
	cr_assert_eq(inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr), 1);
	cp_admission__set_address(&clients[3], (struct sockaddr *)&in6);
	cr_assert_eq(cp_admission__add(&admission, &clients[3], 4), &clients[0]);
	cr_assert_eq(inet_pton(AF_INET6, "::1", &in6.sin6_addr), 1);
	cp_admission__set_address(&clients[4], (struct sockaddr *)&in6);
	cr_assert_null(cp_admission__add(&admission, &clients[4], 5));
}

Test(admission, a_request_has_its_deadline_from_when_the_connection_was_ready)
{
	uint64_t next;

	add(0, "127.0.0.1", 1 * SECOND);
	add(1, "127.0.0.2", 2 * SECOND);
	cr_assert_null(cp_admission__expired(&admission, 5 * SECOND, &next));
	cr_assert_eq(next, 11 * SECOND);
	/* Answering changes nothing: the whole exchange has the deadline. */
	cp_admission__answering(&clients[0]);
	cr_assert_eq(cp_admission__expired(&admission, 11 * SECOND, &next), &clients[0]);
	cr_assert(clients[0].closing);
	cr_assert_null(cp_admission__expired(&admission, 11 * SECOND, &next));
	cr_assert_eq(next, 12 * SECOND);
	/* Answered, the next request has its own. */
	cp_admission__answered(&clients[1], 11 * SECOND);
	cr_assert_null(cp_admission__expired(&admission, 12 * SECOND, &next));
	cr_assert_eq(next, 21 * SECOND);
	cp_admission__remove(&admission, &clients[0]);
	cp_admission__remove(&admission, &clients[1]);
	cr_assert_null(cp_admission__expired(&admission, 30 * SECOND, &next));
	cr_assert_eq(next, UINT64_MAX);
}

Test(admission, a_connection_beyond_the_capacity_is_closed_itself)
{
	char ip[32];
	int i;

	for (i = 0; i < 12; i++) {
		snprintf(ip, sizeof(ip), "127.0.2.%d", i);
		add(i, ip, (uint64_t)i);
	}
	cr_assert_eq(admission.count, 12);
	cr_assert_eq(add(12, "127.0.3.1", 20), &clients[12]);
	cr_assert_eq(admission.count, 12);
	/* Removing one not tracked changes nothing. */
	cp_admission__remove(&admission, &clients[12]);
	cr_assert_eq(admission.count, 12);
}

/* ---- --listen -------------------------------------------------------------------------- */

static void expect_listen(const char *text, int err, bool loopback, const char *shown)
{
	struct cp_listen l;
	int gai_error;

	cr_expect_eq(cp_listen__parse(text, &l, &gai_error), err, "%s", text);
	if (err)
		return;
	cr_expect_eq(l.loopback, loopback, "%s: loopback %d", text, l.loopback);
	cr_expect_str_eq(l.shown, shown, "%s served on %s", text, l.shown);
}

Test(listen, addresses_and_their_loopback)
{
	expect_listen("127.0.0.1:9466", 0, true, "127.0.0.1:9466");
	expect_listen("127.0.0.2:1", 0, true, "127.0.0.2:1");
	expect_listen("[::1]:9466", 0, true, "[::1]:9466");
	expect_listen("0.0.0.0:9466", 0, false, "0.0.0.0:9466");
	expect_listen("192.0.2.1:65535", 0, false, "192.0.2.1:65535");
	expect_listen("[::]:9466", 0, false, "[::]:9466");
	expect_listen("[2001:db8::1]:80", 0, false, "[2001:db8::1]:80");
}

/* Issue 25: these were refused as not loopback. */
Test(listen, v4_mapped_loopback_is_loopback_served_as_ipv4)
{
	expect_listen("[::ffff:127.0.0.1]:9466", 0, true, "127.0.0.1:9466");
	expect_listen("[::ffff:127.9.8.7]:9466", 0, true, "127.9.8.7:9466");
	expect_listen("[::ffff:192.0.2.1]:9466", 0, false, "192.0.2.1:9466");
}

Test(listen, a_name_resolving_to_loopback_only_is_loopback)
{
	struct cp_listen l;
	int gai_error;

	/* localhost is 127.0.0.1 (and ::1 where it is configured): its IPv4 address is served. */
	cr_assert_eq(cp_listen__parse("localhost:9466", &l, &gai_error), 0);
	cr_expect(l.loopback);
	cr_expect_str_eq(l.shown, "127.0.0.1:9466");
}

Test(listen, malformed_is_refused)
{
	static const char *const bad[] = {
		"9466", ":9466", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
		"127.0.0.1:+1", "127.0.0.1: 1", "127.0.0.1:1x", "::1:9466", "[::1:9466", "::1]:9466",
		"[127.0.0.1]:9466", "[]:9466", "[::1]x:9466",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_listen(bad[i], -EINVAL, false, "");
}
