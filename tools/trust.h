/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Whether a file may be loaded as root: changed by nobody but root and the invoking user. */
#ifndef CUPROBE_TRUST_H
#define CUPROBE_TRUST_H

#include <stddef.h>

#include "spawn.h"

/*
 * Checks path (a regular file, symbolic links resolved) and each directory
 * above it up to /: owned by root or id's user, group-writable only by group
 * 0 or id's group, writable by others only for a directory with the sticky
 * bit. 0, or -errno with one line in why: -EINVAL not a regular file,
 * -EPERM someone else could change it, else why it cannot be looked at.
 */
int cp_trust__check(const char *path, const struct cp_identity *id, char *why, size_t why_len);

#endif
