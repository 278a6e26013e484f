/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which of the exporter's HTTP connections stay, decided without sockets:
 * the server tells it what happens to each connection, and shuts down the
 * ones it names (libmicrohttpd then closes them as closed by their client).
 *
 * A connection is ready for a request from its accept, and again once its
 * previous answer is sent; from then it has the deadline to send the whole
 * request and read the whole answer, idle or not (a client trickling a line
 * at a time holds it no longer than a silent one).
 *
 * Past max_per_address connections from one address, or max_total in all,
 * one is closed: among that address's connections, else among those of the
 * addresses holding the most, the one ready the longest of those still
 * waiting for their request; one being answered only when none waits. A
 * scraper's request comes with its connection, so a new scraper is never
 * the one closed while slow or silent connections wait: it is answered
 * whatever they do, from its own address or from others.
 */
#ifndef CUPROBE_ADMISSION_H
#define CUPROBE_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;

/* One connection, inside the server's own record of it. */
struct cp_admission_client {
	unsigned char address[16]; /* the peer's address; IPv4 as ::ffff:a.b.c.d */
	uint64_t ready_ns;         /* when its current request could start */
	bool answering;            /* its request came: being answered */
	bool closing;              /* named to close: counts for nothing until removed */
};

struct cp_admission {
	size_t max_total, max_per_address;
	uint64_t deadline_ns;
	struct cp_admission_client **clients;
	size_t *same;              /* choosing: kept connections from each one's address */
	size_t count, capacity;
};

/* capacity: connections tracked at most (the server's own hard limit). 0 or -ENOMEM. */
int cp_admission__init(struct cp_admission *a, size_t capacity, size_t max_total,
		       size_t max_per_address, uint64_t deadline_ns);
void cp_admission__release(struct cp_admission *a);

/* The client's address from a socket address (IPv4, IPv6; anything else: all zero). */
void cp_admission__set_address(struct cp_admission_client *client, const struct sockaddr *addr);

/*
 * A new connection, ready at now_ns: the connection to close for it (marked
 * closing; client itself when it cannot be kept), or NULL.
 */
struct cp_admission_client *cp_admission__add(struct cp_admission *a,
					      struct cp_admission_client *client, uint64_t now_ns);
/* Its request came (being answered), or its answer was sent at now_ns (ready again). */
void cp_admission__answering(struct cp_admission_client *client);
void cp_admission__answered(struct cp_admission_client *client, uint64_t now_ns);
/* Closed: forgotten (a client not tracked is ignored). */
void cp_admission__remove(struct cp_admission *a, struct cp_admission_client *client);

/*
 * A connection past its deadline at now_ns (marked closing), or NULL; then
 * *next_ns is the next deadline (UINT64_MAX: none).
 */
struct cp_admission_client *cp_admission__expired(struct cp_admission *a, uint64_t now_ns,
						  uint64_t *next_ns);

#endif
