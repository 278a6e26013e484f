// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter's HTTP side: libmicrohttpd's own thread answers /metrics
 * with the exposition of the latest series the scraper asks for (built at
 * its first scrape after a refresh), / with a line, anything else with a
 * refusal. A scrape never touches a BPF map or waits on the agent.
 *
 * No client holds the server: which connections stay is admission.c's
 * (told of each connection's start, request, answer and close by
 * libmicrohttpd's callbacks, in its thread), and a watchdog thread of ours
 * shuts down each connection whose request is past its deadline. A
 * connection shut down is one libmicrohttpd then reads the end of and
 * closes: its close callback, which forgets it under the same lock, comes
 * before its descriptor is closed, so no shutdown reaches a descriptor
 * used again. Where each request goes is route.c's, from the request
 * line's bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "admission.h"
#include "exporter.h"
#include "route.h"
#include "session.h"

#ifndef CUPROBE_NO_EXPORTER
#include <microhttpd.h>

/*
 * libmicrohttpd's own limit: room for connections accepted before the ones
 * they displace are closed (it accepts at most 10 at a time, and stops
 * accepting at the limit until some close).
 */
#define HTTP_CONNECTIONS_MAX (2 * HTTP_CONNECTIONS_KEPT)
#define HTTP_IDLE_TIMEOUT_S 10
#define HTTP_CONNECTION_MEMORY 16384

struct http_client {
	struct cp_admission_client admission; /* first: admission.c hands it back */
	int fd;
	/* The request line's target as it came (libmicrohttpd's buffer), and its route. */
	const char *target;
	size_t target_len;
	enum cp_route target_route;
};

struct http_server {
	struct MHD_Daemon *daemon;
	struct exporter *x;
	pthread_mutex_t lock;       /* the admission, between libmicrohttpd's thread and the watchdog */
	pthread_cond_t wake;        /* the watchdog: a new connection, or stop */
	pthread_t watchdog;
	bool watching, stop;
	struct cp_admission admission;
};

static struct http_client *client_of(struct MHD_Connection *connection)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

/* Closed by us: its client reads the end, libmicrohttpd closes it (lock held). */
static void close_client(struct http_server *s, struct cp_admission_client *closing, bool deadline)
{
	shutdown(((struct http_client *)closing)->fd, SHUT_RDWR);
	__atomic_add_fetch(deadline ? &s->x->closed_at_deadline : &s->x->closed_crowded, 1,
			   __ATOMIC_RELAXED);
}

/* The watchdog: each connection whose request is past its deadline is shut down. */
static void *watch_deadlines(void *arg)
{
	struct http_server *s = arg;
	struct cp_admission_client *expired;
	struct timespec until;
	uint64_t next;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		while ((expired = cp_admission__expired(&s->admission, exporter__now_ns(), &next)))
			close_client(s, expired, true);
		if (next == UINT64_MAX) {
			pthread_cond_wait(&s->wake, &s->lock);
			continue;
		}
		until.tv_sec = (time_t)(next / 1000000000ull);
		until.tv_nsec = (long)(next % 1000000000ull);
		pthread_cond_timedwait(&s->wake, &s->lock, &until);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void on_connection(void *arg, struct MHD_Connection *connection, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct http_server *s = arg;
	struct http_client *client = *socket_context;
	const union MHD_ConnectionInfo *fd, *address;
	struct cp_admission_client *closing;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!client)
			return;
		pthread_mutex_lock(&s->lock);
		cp_admission__remove(&s->admission, &client->admission);
		pthread_mutex_unlock(&s->lock);
		free(client);
		*socket_context = NULL;
		return;
	}
	fd = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
	address = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	client = calloc(1, sizeof(*client));
	if (!client || !fd) {
		/* Not known, not kept: its requests are refused (on_request) and it goes. */
		if (fd)
			shutdown(fd->connect_fd, SHUT_RDWR);
		free(client);
		return;
	}
	client->fd = fd->connect_fd;
	cp_admission__set_address(&client->admission, address ? address->client_addr : NULL);
	pthread_mutex_lock(&s->lock);
	closing = cp_admission__add(&s->admission, &client->admission, exporter__now_ns());
	if (closing)
		close_client(s, closing, false);
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	*socket_context = client;
}

/* The request line's target, before libmicrohttpd cuts its query off and decodes it. */
static void *on_target(void *arg, const char *uri, struct MHD_Connection *connection)
{
	struct http_client *client = client_of(connection);

	(void)arg;
	if (client) {
		client->target = uri;
		client->target_len = strlen(uri);
		client->target_route = cp_route__target(uri, client->target_len);
	}
	return NULL;
}

/*
 * The request's route from the line's bytes. libmicrohttpd hands the method,
 * target and version as strings in its one buffer of the line: METHOD NUL
 * spaces TARGET NUL VERSION (it writes the NULs over the spaces it cuts at).
 * Any other byte between the pieces is a NUL the client sent inside one,
 * which the strings would hide: a bad request.
 */
static enum cp_route route_of(const struct http_client *client, const char *method,
			      const char *version)
{
	size_t method_len = strlen(method);
	const char *p = method + method_len + 1;
	enum cp_route method_route = cp_route__method(method, method_len);

	if (!client->target || p > client->target)
		return CP_ROUTE_BAD_REQUEST;
	for (; p < client->target; p++)
		if (*p != ' ')
			method_route = CP_ROUTE_BAD_REQUEST;
	if (version[0] && version != client->target + client->target_len + 1)
		return CP_ROUTE_BAD_REQUEST;
	return cp_route__combine(method_route, client->target_route);
}

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
	struct http_server *s = arg;
	struct exporter *x = s->x;
	struct http_client *client = client_of(connection);
	enum cp_exposition exposition;
	enum MHD_Result result;

	(void)url; /* decoded and cut at a NUL: the route is taken from the line's bytes */
	(void)upload_data;
	(void)upload_size;
	(void)state;
	if (!client)
		return MHD_NO;
	pthread_mutex_lock(&s->lock);
	cp_admission__answering(&client->admission);
	pthread_mutex_unlock(&s->lock);
	switch (route_of(client, method, version)) {
	case CP_ROUTE_INDEX:
		return reply(connection, MHD_HTTP_OK, "text/plain", index, sizeof(index) - 1, NULL);
	case CP_ROUTE_METRICS:
		break;
	case CP_ROUTE_NOT_FOUND:
		__atomic_add_fetch(&x->refused, 1, __ATOMIC_RELAXED);
		return reply(connection, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n", 10, NULL);
	case CP_ROUTE_NOT_ALLOWED:
		__atomic_add_fetch(&x->refused, 1, __ATOMIC_RELAXED);
		return reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9,
			     "GET, HEAD");
	default:
		__atomic_add_fetch(&x->refused, 1, __ATOMIC_RELAXED);
		return reply(connection, MHD_HTTP_BAD_REQUEST, "text/plain", "bad request\n", 12, NULL);
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

/* A request answered (or ended): its connection is ready for the next, from now. */
static void on_completed(void *arg, struct MHD_Connection *connection, void **state,
			 enum MHD_RequestTerminationCode code)
{
	struct http_server *s = arg;
	struct http_client *client = client_of(connection);

	(void)state;
	(void)code;
	if (!client)
		return;
	client->target = NULL;
	pthread_mutex_lock(&s->lock);
	cp_admission__answered(&client->admission, exporter__now_ns());
	pthread_mutex_unlock(&s->lock);
}

static void free_server(struct http_server *s)
{
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	cp_admission__release(&s->admission);
	free(s);
}

int http__serve(struct exporter *x, const struct cp_listen *listen)
{
	struct http_server *s = calloc(1, sizeof(*s));
	int err;

	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	s->x = x;
	pthread_mutex_init(&s->lock, NULL);
	cp_cond__init_monotonic(&s->wake);
	if (cp_admission__init(&s->admission, HTTP_CONNECTIONS_MAX, HTTP_CONNECTIONS_KEPT,
			       HTTP_CONNECTIONS_PER_ADDRESS, HTTP_REQUEST_DEADLINE_S * 1000000000ull)) {
		free_server(s);
		errno = ENOMEM;
		return -1;
	}
	err = pthread_create(&s->watchdog, NULL, watch_deadlines, s);
	if (err) {
		free_server(s);
		errno = err;
		return -1;
	}
	s->watching = true;
	s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
				     (listen->addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				     0, NULL, NULL, on_request, s,
				     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&listen->addr,
				     MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONNECTIONS_MAX,
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_IDLE_TIMEOUT_S,
				     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
				     MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				     MHD_OPTION_URI_LOG_CALLBACK, on_target, s,
				     MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				     MHD_OPTION_END);
	x->http = s;
	if (!s->daemon) {
		err = errno ? errno : EADDRINUSE;
		http__stop(x);
		errno = err;
		return -1;
	}
	return 0;
}

void http__stop(struct exporter *x)
{
	struct http_server *s = x->http;

	if (!s)
		return;
	/* libmicrohttpd's thread first: its close callbacks forget every connection. */
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	if (s->watching) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->watchdog, NULL);
	}
	free_server(s);
	x->http = NULL;
}

#endif /* CUPROBE_NO_EXPORTER */
