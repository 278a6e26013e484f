// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter's HTTP side: libmicrohttpd's own thread answers /metrics
 * with the exposition of the latest series the scraper asks for (built at
 * its first scrape after a refresh), / with a line, anything else with a
 * refusal. A scrape never touches a BPF map or waits on the agent.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exporter.h"
#include "session.h"

#ifndef CUPROBE_NO_EXPORTER
#include <microhttpd.h>

#define HTTP_CONNECTIONS_MAX 64
#define HTTP_TIMEOUT_S 10
#define HTTP_CONNECTION_MEMORY 16384

/* The exposition e of the latest series, built unless it already was (served_lock held). */
static void build_exposition(struct exporter *x, enum cp_exposition e)
{
	if (!x->series || x->served_generation[e] == x->generation)
		return;
	cp_text__free(&x->served[e]);
	/* The families in the table's order: the exposition's. */
	if (cp_format__metrics(&x->served[e], e, x->series, families__count())) {
		cp_say("warning: the metrics could not be built (out of memory)");
		cp_text__free(&x->served[e]);
		return;
	}
	x->served_generation[e] = x->generation;
}

static enum MHD_Result reply(struct MHD_Connection *connection, unsigned int status,
			     const char *type, const void *body, size_t len, const char *allow)
{
	struct MHD_Response *response = MHD_create_response_from_buffer(len, (void *)body,
									 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result result;

	if (!response)
		return MHD_NO;
	MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (allow)
		MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
	result = MHD_queue_response(connection, status, response);
	MHD_destroy_response(response);
	return result;
}

/*
 * Every request is answered at the first call, which sees the headers only:
 * a response can be queued then and only then (once a body is being received
 * MHD refuses it and drops the connection), and a body is never read.
 */
static enum MHD_Result on_request(void *arg, struct MHD_Connection *connection, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **state)
{
	static const char index[] = "cuprobe exporter: metrics on /metrics\n";
	struct exporter *x = arg;
	enum cp_exposition exposition;
	enum MHD_Result result;

	(void)version;
	(void)upload_data;
	(void)upload_size;
	(void)state;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		__atomic_add_fetch(&x->refused, 1, __ATOMIC_RELAXED);
		return reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9,
			     "GET, HEAD");
	}
	if (!strcmp(url, "/"))
		return reply(connection, MHD_HTTP_OK, "text/plain", index, sizeof(index) - 1, NULL);
	if (strcmp(url, "/metrics")) {
		__atomic_add_fetch(&x->refused, 1, __ATOMIC_RELAXED);
		return reply(connection, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n", 10, NULL);
	}
	exposition = cp_exposition__from_accept(MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
									    MHD_HTTP_HEADER_ACCEPT));
	__atomic_add_fetch(&x->scrapes, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&x->served_lock);
	build_exposition(x, exposition);
	result = reply(connection, MHD_HTTP_OK, cp_exposition__content_type(exposition),
		       x->served[exposition].data ? x->served[exposition].data : "",
		       x->served[exposition].len, NULL);
	pthread_mutex_unlock(&x->served_lock);
	return result;
}

int http__parse_listen(const char *text, struct sockaddr_storage *addr, bool *loopback)
{
	char host[128];
	const char *colon = strrchr(text, ':');
	unsigned long port;
	char *end;

	if (!colon || colon == text || (size_t)(colon - text) >= sizeof(host))
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (*end || colon[1] < '0' || colon[1] > '9' || port == 0 || port > 65535)
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - text), text);
	memset(addr, 0, sizeof(*addr));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;

		host[strlen(host) - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
			return -EINVAL;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
		return 0;
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)addr;

		if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
			return -EINVAL;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
		return 0;
	}
}

int http__serve(struct exporter *x, const struct sockaddr_storage *addr)
{
	x->http = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
				   (addr->ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				   0, NULL, NULL, on_request, x,
				   MHD_OPTION_SOCK_ADDR, (struct sockaddr *)addr,
				   MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONNECTIONS_MAX,
				   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_TIMEOUT_S,
				   MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
				   MHD_OPTION_END);
	return x->http ? 0 : -1;
}

void http__stop(struct exporter *x)
{
	if (x->http)
		MHD_stop_daemon(x->http);
	x->http = NULL;
}

#endif /* CUPROBE_NO_EXPORTER */
