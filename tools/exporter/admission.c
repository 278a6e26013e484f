// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Which of the exporter's HTTP connections stay (admission.h). */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "admission.h"

int cp_admission__init(struct cp_admission *a, size_t capacity, size_t max_total,
		       size_t max_per_address, uint64_t deadline_ns)
{
	memset(a, 0, sizeof(*a));
	a->clients = calloc(capacity ? capacity : 1, sizeof(*a->clients));
	a->same = calloc(capacity ? capacity : 1, sizeof(*a->same));
	if (!a->clients || !a->same) {
		cp_admission__release(a);
		return -ENOMEM;
	}
	a->capacity = capacity;
	a->max_total = max_total;
	a->max_per_address = max_per_address;
	a->deadline_ns = deadline_ns;
	return 0;
}

void cp_admission__release(struct cp_admission *a)
{
	free(a->clients);
	free(a->same);
	memset(a, 0, sizeof(*a));
}

void cp_admission__set_address(struct cp_admission_client *client, const struct sockaddr *addr)
{
	memset(client->address, 0, sizeof(client->address));
	if (addr && addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)addr;

		client->address[10] = client->address[11] = 0xff;
		memcpy(client->address + 12, &in->sin_addr, 4);
	} else if (addr && addr->sa_family == AF_INET6) {
		memcpy(client->address, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
	}
}

static bool same_address(const struct cp_admission_client *a, const struct cp_admission_client *b)
{
	return !memcmp(a->address, b->address, sizeof(a->address));
}

/* Connections kept (not closing) from client's address. */
static size_t from_address(const struct cp_admission *a, const struct cp_admission_client *client)
{
	size_t i, n = 0;

	for (i = 0; i < a->count; i++)
		n += !a->clients[i]->closing && same_address(a->clients[i], client);
	return n;
}

/* Whether c is a better one to close than best: waiting before answering, then ready the longest. */
static bool closes_before(const struct cp_admission_client *c, const struct cp_admission_client *best)
{
	if (!best)
		return true;
	if (c->answering != best->answering)
		return !c->answering;
	return c->ready_ns < best->ready_ns;
}

/*
 * The one to close among the kept connections of client's address (only
 * one address), or of the addresses holding the most (the same scan counts
 * each connection's address: n is the server's hard limit, a hundred or so).
 */
static struct cp_admission_client *choose(struct cp_admission *a,
					  const struct cp_admission_client *client, bool only_one)
{
	struct cp_admission_client *best = NULL;
	size_t i, most = 0;

	for (i = 0; !only_one && i < a->count; i++) {
		a->same[i] = a->clients[i]->closing ? 0 : from_address(a, a->clients[i]);
		if (a->same[i] > most)
			most = a->same[i];
	}
	for (i = 0; i < a->count; i++) {
		struct cp_admission_client *c = a->clients[i];

		if (c->closing || (only_one ? !same_address(c, client) : a->same[i] != most))
			continue;
		if (closes_before(c, best))
			best = c;
	}
	return best;
}

struct cp_admission_client *cp_admission__add(struct cp_admission *a,
					      struct cp_admission_client *client, uint64_t now_ns)
{
	struct cp_admission_client *victim = NULL;
	size_t i, kept = 0;

	client->ready_ns = now_ns;
	client->answering = false;
	client->closing = false;
	if (a->count == a->capacity) {
		client->closing = true;
		return client;
	}
	a->clients[a->count++] = client;
	for (i = 0; i < a->count; i++)
		kept += !a->clients[i]->closing;
	if (from_address(a, client) > a->max_per_address)
		victim = choose(a, client, true);
	else if (kept > a->max_total)
		victim = choose(a, client, false);
	if (victim)
		victim->closing = true;
	return victim;
}

void cp_admission__answering(struct cp_admission_client *client)
{
	client->answering = true;
}

void cp_admission__answered(struct cp_admission_client *client, uint64_t now_ns)
{
	client->answering = false;
	client->ready_ns = now_ns;
}

void cp_admission__remove(struct cp_admission *a, struct cp_admission_client *client)
{
	size_t i;

	for (i = 0; i < a->count; i++) {
		if (a->clients[i] != client)
			continue;
		a->clients[i] = a->clients[--a->count];
		return;
	}
}

struct cp_admission_client *cp_admission__expired(struct cp_admission *a, uint64_t now_ns,
						  uint64_t *next_ns)
{
	size_t i;

	*next_ns = UINT64_MAX;
	for (i = 0; i < a->count; i++) {
		struct cp_admission_client *c = a->clients[i];
		uint64_t deadline = c->ready_ns + a->deadline_ns;

		if (c->closing)
			continue;
		if (deadline <= now_ns) {
			c->closing = true;
			return c;
		}
		if (deadline < *next_ns)
			*next_ns = deadline;
	}
	return NULL;
}
