/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The exporter's --listen HOST:PORT into the socket address it serves on,
 * and whether that is loopback (anything else needs --allow-remote).
 */
#ifndef CUPROBE_LISTEN_H
#define CUPROBE_LISTEN_H

#include <stdbool.h>
#include <sys/socket.h>

struct cp_listen {
	struct sockaddr_storage addr;
	socklen_t len;
	/* Every address HOST stands for is loopback: 127.0.0.0/8, ::1, ::ffff:127.x.y.z. */
	bool loopback;
	char shown[64];   /* the address served on, as text ("127.0.0.1:9466", "[::1]:9466") */
};

/*
 * HOST is an IPv4 address, an IPv6 address in brackets, or a name, resolved
 * (all its addresses must be loopback for loopback to be said); PORT 1 to
 * 65535. A v4-mapped IPv6 address is served as the IPv4 address it maps,
 * and a name on its first IPv4 address, else its first IPv6 one.
 * 0; -EINVAL for text of another form; -ENOENT for a name that does not
 * resolve (*gai_error: getaddrinfo's code, for gai_strerror).
 */
int cp_listen__parse(const char *text, struct cp_listen *out, int *gai_error);

#endif
