// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What the library and the CLI read of a process in /proc, read in one place. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuprobe_internal.h"

int cp_proc__comm(uint32_t pid, uint32_t tid, char *out, size_t len)
{
	char path[64];
	ssize_t n;
	int fd, err;

	if (!len)
		return -EINVAL;
	out[0] = '\0';
	if (tid)
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, out, len - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (n <= 0) {
		out[0] = '\0';
		return err ? err : -ENODATA;
	}
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

int cp_proc__stat(uint32_t pid, struct cp_proc_stat *out)
{
	char path[64], text[1024], *after_comm;
	ssize_t n;
	int fd, err;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (n <= 0)
		return err ? err : -ENODATA;
	text[n] = '\0';
	/* "PID (COMM) S PPID PGRP SESSION TTY TPGID FLAGS ...": COMM may hold ") ". */
	after_comm = strrchr(text, ')');
	if (!after_comm || sscanf(after_comm + 1, " %c %*d %*d %*d %*d %*d %u", &out->state,
				  &out->flags) != 2)
		return -EINVAL;
	return 0;
}
