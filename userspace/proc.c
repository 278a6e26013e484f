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
