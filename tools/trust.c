// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Files cuprobe loads as root (run's PROG): nobody but root and the invoking
 * user may be able to change them, as sudo and ssh require of the files they
 * trust. The file and every directory from it up to / must be owned by root
 * or the invoking user, writable by its group only when that group is root's
 * (0) or the invoking user's, and by others not at all; a directory with the
 * sticky bit (/tmp) may be writable by all, since there only an entry's owner
 * may rename or remove it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trust.h"

#define REFUSAL "cuprobe loads as root only files that nobody but root and the invoking user can change"

/* What makes st changeable by someone else, in words; NULL when nothing does. */
static const char *untrusted(const struct stat *st, const struct cp_identity *id, char *buf,
			     size_t len)
{
	uid_t user = id->drop ? id->uid : 0;
	gid_t group = id->drop ? id->gid : 0;
	unsigned int mode = st->st_mode & 07777;

	if (st->st_uid != 0 && st->st_uid != user)
		snprintf(buf, len, "is owned by uid %u", (unsigned int)st->st_uid);
	else if ((mode & S_IWGRP) && st->st_gid != 0 && st->st_gid != group)
		snprintf(buf, len, "is writable by group %u (mode %04o)", (unsigned int)st->st_gid,
			 mode);
	else if ((mode & S_IWOTH) && !(S_ISDIR(st->st_mode) && (mode & S_ISVTX)))
		snprintf(buf, len, "is writable by others (mode %04o%s)", mode,
			 S_ISDIR(st->st_mode) ? ", not sticky" : "");
	else
		return NULL;
	return buf;
}

int cp_trust__check(const char *path, const struct cp_identity *id, char *why, size_t why_len)
{
	char resolved[PATH_MAX], problem[128], *slash;
	struct stat st;

	/* The file as the kernel reaches it: every symbolic link on the way resolved. */
	if (!realpath(path, resolved) || stat(resolved, &st)) {
		int err = errno;

		snprintf(why, why_len, "%s: %s", path, err == ENOENT ? "no such file" : strerror(err));
		return -err;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "%s: not a regular file", path);
		return -EINVAL;
	}
	if (untrusted(&st, id, problem, sizeof(problem))) {
		snprintf(why, why_len, "%s: %s; " REFUSAL, path, problem);
		return -EPERM;
	}
	/* Each directory up to /: "/a/b/f" checks /a/b, /a and /. */
	while ((slash = strrchr(resolved, '/'))) {
		slash[slash == resolved] = '\0';
		if (stat(resolved, &st)) {
			int err = errno;

			snprintf(why, why_len, "%s: its directory %s: %s", path, resolved, strerror(err));
			return -err;
		}
		if (untrusted(&st, id, problem, sizeof(problem))) {
			snprintf(why, why_len, "%s: its directory %s %s; " REFUSAL, path, resolved,
				 problem);
			return -EPERM;
		}
		if (slash == resolved)
			break;
	}
	return 0;
}
