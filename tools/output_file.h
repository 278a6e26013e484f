/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_OUTPUT_FILE_H
#define CUPROBE_OUTPUT_FILE_H

#include "spawn.h"

/*
 * Creates or truncates path for writing as the invoking user would: the
 * effective ids are switched to id for the open(2), so permissions are the
 * user's and a new file is owned by them; O_NOFOLLOW refuses a symlink.
 * Returns the fd, or -errno.
 */
int cp_output_file__open(const char *path, const struct cp_identity *id);

#endif
