// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output_file.h"

#define MAX_GROUPS 256

/*
 * Runs fn(arg) with the effective ids and groups of id (when it drops), so
 * a directory writable through one of the user's groups works, then back
 * to root.
 */
static int as_user(const struct cp_identity *id, int (*fn)(void *), void *arg)
{
	gid_t saved_groups[MAX_GROUPS], *groups;
	int group_count = 0, user_group_count, err;

	if (!id->drop)
		return fn(arg);
	group_count = getgroups(MAX_GROUPS, saved_groups);
	if (group_count < 0)
		return -errno;
	err = cp_identity__groups(id, &groups, &user_group_count);
	if (err)
		return err;
	if (setgroups(user_group_count, groups) || setegid(id->gid) || seteuid(id->uid))
		err = -errno;
	else
		err = fn(arg);
	free(groups);
	/* Back to root; failing here would leave us half-privileged, so give up. */
	if (seteuid(0) || setegid(0) || setgroups(group_count, saved_groups))
		abort();
	return err;
}

struct create_job {
	const char *path;
	char temp[PATH_MAX];
	int fd;
	bool direct;   /* an existing device or FIFO: written in place, never replaced */
};

/*
 * A new file beside path, named so nobody mistakes it for the result; or,
 * when path is a device or a FIFO (/dev/null, a pipe), path itself.
 */
static int create_temp(void *arg)
{
	struct create_job *job = arg;
	char dir_copy[PATH_MAX], base_copy[PATH_MAX];
	const char *dir, *base;
	unsigned int attempt, nonce;
	struct stat st;

	if (!lstat(job->path, &st)) {
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		if (!S_ISREG(st.st_mode)) {
			job->direct = true;
			job->fd = open(job->path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
			return job->fd < 0 ? -errno : 0;
		}
	} else if (errno != ENOENT) {
		return -errno;
	}
	snprintf(dir_copy, sizeof(dir_copy), "%s", job->path);
	snprintf(base_copy, sizeof(base_copy), "%s", job->path);
	dir = dirname(dir_copy);
	base = basename(base_copy);
	for (attempt = 0; attempt < 100; attempt++) {
		if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
			nonce = (unsigned int)getpid() * 2654435761u + attempt;
		if (snprintf(job->temp, sizeof(job->temp), "%s/.%s.cuprobe-%08x", dir, base, nonce) >=
		    (int)sizeof(job->temp))
			return -ENAMETOOLONG;
		job->fd = open(job->temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (job->fd >= 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

struct rename_job {
	const char *from;
	const char *to;
};

static int rename_file(void *arg)
{
	struct rename_job *job = arg;
	struct stat st;

	/* rename(2) replaces a symlink instead of following it; still, never over one. */
	if (!lstat(job->to, &st) && (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)))
		return S_ISLNK(st.st_mode) ? -ELOOP : -EISDIR;
	return rename(job->from, job->to) ? -errno : 0;
}

static int unlink_file(void *arg)
{
	return unlink(arg) ? -errno : 0;
}

int cp_output__open(struct cp_output *out, const char *path, const struct cp_identity *id)
{
	struct create_job job = { .path = path, .fd = -1 };
	int err;

	memset(out, 0, sizeof(*out));
	out->identity = id;
	if (!path) {
		out->stream = stdout;
		return 0;
	}
	if (!*path)
		return -EINVAL;
	err = as_user(id, create_temp, &job);
	if (err)
		return err;
	out->stream = fdopen(job.fd, "w");
	out->temp_path = job.direct ? NULL : strdup(job.temp);
	if (!out->stream || (!job.direct && !out->temp_path)) {
		err = -ENOMEM;
		if (out->stream)
			fclose(out->stream);
		else
			close(job.fd);
		if (!job.direct)
			as_user(id, unlink_file, job.temp);
		free(out->temp_path);
		memset(out, 0, sizeof(*out));
		return err;
	}
	out->path = path;
	return 0;
}

int cp_output__commit(struct cp_output *out)
{
	struct rename_job job = { .from = out->temp_path, .to = out->path };
	int err;

	if (!out->temp_path)
		return 0;
	err = as_user(out->identity, rename_file, &job);
	if (err)
		return err;
	free(out->temp_path);
	out->temp_path = NULL;
	return 0;
}

bool cp_output__failed(struct cp_output *out, int err)
{
	int none = 0;

	return __atomic_compare_exchange_n(&out->error, &none, err ? err : EIO, false,
					   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

bool cp_output__write(struct cp_output *out, const void *data, size_t len, bool flush)
{
	bool ok;

	if (__atomic_load_n(&out->error, __ATOMIC_RELAXED)) {
		errno = __atomic_load_n(&out->error, __ATOMIC_RELAXED);
		return false;
	}
	__atomic_add_fetch(&out->writing, 1, __ATOMIC_RELAXED);
	/* ferror too: a line-buffered stream takes the line and fails at its flush. */
	ok = fwrite(data, 1, len, out->stream) == len && (!flush || !fflush(out->stream)) &&
	     !ferror(out->stream);
	__atomic_add_fetch(&out->writes, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&out->writing, 1, __ATOMIC_RELAXED);
	if (!ok && !errno)
		errno = EIO;
	return ok;
}

bool cp_output__stalled(struct cp_output *out, unsigned long *seen)
{
	unsigned long writes = __atomic_load_n(&out->writes, __ATOMIC_RELAXED);
	bool stalled = __atomic_load_n(&out->writing, __ATOMIC_RELAXED) && writes == *seen;

	*seen = writes;
	return stalled;
}

void cp_output__abandon(struct cp_output *out)
{
	__atomic_store_n(&out->abandoned, true, __ATOMIC_SEQ_CST);
	cp_output__failed(out, EAGAIN);
}

int cp_output__close(struct cp_output *out)
{
	int err = 0;

	if (!out->stream)
		return 0;
	if (__atomic_load_n(&out->abandoned, __ATOMIC_SEQ_CST))
		__fpurge(out->stream); /* flushing would block again */
	__atomic_add_fetch(&out->writing, 1, __ATOMIC_RELAXED); /* the last flush can block too */
	if (out->stream == stdout) {
		if (fflush(stdout) || ferror(stdout))
			err = errno ? errno : EIO;
	} else if (fclose(out->stream)) {
		err = errno ? errno : EIO;
	}
	__atomic_add_fetch(&out->writes, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&out->writing, 1, __ATOMIC_RELAXED);
	if (err)
		cp_output__failed(out, err);
	out->stream = NULL;
	if (out->temp_path) {
		as_user(out->identity, unlink_file, out->temp_path);
		free(out->temp_path);
		out->temp_path = NULL;
	}
	return __atomic_load_n(&out->error, __ATOMIC_SEQ_CST);
}
