// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output_file.h"

#define MAX_GROUPS 256

int cp_output_file__open(const char *path, const struct cp_identity *id)
{
	const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC;
	gid_t saved_groups[MAX_GROUPS];
	int group_count = 0, fd = -1, err;
	struct stat st;

	if (!path || !*path)
		return -EINVAL;
	if (id->drop) {
		group_count = getgroups(MAX_GROUPS, saved_groups);
		if (group_count < 0)
			return -errno;
		if (setgroups(1, &id->gid) || setegid(id->gid) || seteuid(id->uid)) {
			err = -errno;
			goto restore;
		}
	}
	fd = open(path, flags, 0644);
	err = fd < 0 ? -errno : 0;
restore:
	if (id->drop) {
		/* Back to root; failing here would leave us half-privileged, so give up. */
		if (seteuid(0) || setegid(0) || setgroups(group_count, saved_groups))
			abort();
	}
	if (err)
		return err == -ELOOP ? -ELOOP : err;
	if (fstat(fd, &st) || S_ISDIR(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	return fd;
}
