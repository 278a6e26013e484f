// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The exporter's --listen HOST:PORT (listen.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listen.h"

static bool is_loopback(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr) >> 24) == 127;
	if (addr->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)addr)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* addr (IPv4 or IPv6) with port into out; a v4-mapped address as its IPv4 one. */
static void set_address(struct cp_listen *out, const struct sockaddr *addr, uint16_t port)
{
	char text[INET6_ADDRSTRLEN];

	memset(&out->addr, 0, sizeof(out->addr));
	if (addr->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)addr)->sin6_addr)) {
		struct sockaddr_in *in = (struct sockaddr_in *)&out->addr;

		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, &((const struct sockaddr_in6 *)addr)->sin6_addr.s6_addr[12], 4);
	} else if (addr->sa_family == AF_INET) {
		memcpy(&out->addr, addr, sizeof(struct sockaddr_in));
	} else {
		memcpy(&out->addr, addr, sizeof(struct sockaddr_in6));
		((struct sockaddr_in6 *)&out->addr)->sin6_flowinfo = 0;
	}
	if (out->addr.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&out->addr;

		in->sin_port = htons(port);
		out->len = sizeof(*in);
		inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
		snprintf(out->shown, sizeof(out->shown), "%s:%u", text, port);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->addr;

		in6->sin6_port = htons(port);
		out->len = sizeof(*in6);
		inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
		snprintf(out->shown, sizeof(out->shown), "[%s]:%u", text, port);
	}
}

int cp_listen__parse(const char *text, struct cp_listen *out, int *gai_error)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *found = NULL, *ai, *chosen = NULL;
	const char *colon = text ? strrchr(text, ':') : NULL;
	char host[256];
	unsigned long port;
	char *end;
	int err;

	memset(out, 0, sizeof(*out));
	*gai_error = 0;
	if (!colon || colon == text || (size_t)(colon - text) >= sizeof(host))
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (*end || colon[1] < '0' || colon[1] > '9' || port == 0 || port > 65535)
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - text), text);
	if (host[0] == '[') {
		/* An IPv6 address, and nothing else, in brackets. */
		struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

		if (host[strlen(host) - 1] != ']')
			return -EINVAL;
		host[strlen(host) - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &in6.sin6_addr) != 1)
			return -EINVAL;
		out->loopback = is_loopback((struct sockaddr *)&in6);
		set_address(out, (struct sockaddr *)&in6, (uint16_t)port);
		return 0;
	}
	if (strchr(host, ':') || strchr(host, '[') || strchr(host, ']'))
		return -EINVAL; /* an IPv6 address wants its brackets */
	err = getaddrinfo(host, NULL, &hints, &found);
	if (err) {
		*gai_error = err;
		return -ENOENT;
	}
	out->loopback = true;
	for (ai = found; ai; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		out->loopback = out->loopback && is_loopback(ai->ai_addr);
		if (!chosen || (chosen->ai_family != AF_INET && ai->ai_family == AF_INET))
			chosen = ai;
	}
	if (!chosen) {
		freeaddrinfo(found);
		*gai_error = EAI_NONAME;
		return -ENOENT;
	}
	set_address(out, chosen->ai_addr, (uint16_t)port);
	freeaddrinfo(found);
	return 0;
}
