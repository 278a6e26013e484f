// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
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

/* A new file in dir, named name; -errno, or the open fd. */
static int create_exclusive(const char *dir, const char *name, char *path, size_t len)
{
	int fd;

	if (snprintf(path, len, "%s/%s", dir, name) >= (int)len)
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	return fd < 0 ? -errno : fd;
}

/*
 * A new file beside path, named so nobody mistakes it for the result
 * (.FILE.cuprobe-RANDOM, or .cuprobe-RANDOM where FILE's name is too long
 * for that); or, when path is a device or a FIFO (/dev/null, a pipe), path
 * itself.
 */
static int create_temp(void *arg)
{
	struct create_job *job = arg;
	char dir_copy[PATH_MAX], base_copy[PATH_MAX], name[NAME_MAX + 32];
	const char *dir, *base;
	unsigned int attempt, nonce;
	struct stat st;
	int fd;

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
		snprintf(name, sizeof(name), ".%.*s.cuprobe-%08x", NAME_MAX, base, nonce);
		fd = create_exclusive(dir, name, job->temp, sizeof(job->temp));
		/* FILE's own name fits where ours, 18 bytes longer, may not. */
		if (fd == -ENAMETOOLONG) {
			snprintf(name, sizeof(name), ".cuprobe-%08x", nonce);
			fd = create_exclusive(dir, name, job->temp, sizeof(job->temp));
		}
		if (fd >= 0) {
			job->fd = fd;
			return 0;
		}
		if (fd != -EEXIST)
			return fd;
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

/*
 * How much whole writes gather before they go out together: as stdio
 * would buffer the file (its st_blksize), and nothing for a terminal, which
 * stdio buffers a line at a time, so records show as they come.
 */
static size_t buffer_size(int fd, const struct stat *st)
{
	if (isatty(fd))
		return 0;
	if (st->st_blksize < 4096)
		return 8192;
	return st->st_blksize > (1 << 20) ? 1 << 20 : (size_t)st->st_blksize;
}

int cp_output__open(struct cp_output *out, const char *path, const struct cp_identity *id)
{
	struct create_job job = { .path = path, .fd = -1 };
	struct stat st;
	int err;

	memset(out, 0, sizeof(*out));
	out->identity = id;
	if (path && !*path)
		return -EINVAL;
	if (path) {
		err = as_user(id, create_temp, &job);
		if (err)
			return err;
	} else {
		job.fd = STDOUT_FILENO;
		job.direct = true;
	}
	if (fstat(job.fd, &st))
		memset(&st, 0, sizeof(st));
	out->capacity = buffer_size(job.fd, &st);
	out->buffer = malloc(out->capacity ? out->capacity : 1);
	out->temp_path = job.direct ? NULL : strdup(job.temp);
	if (!out->buffer || (!job.direct && !out->temp_path)) {
		if (job.fd != STDOUT_FILENO)
			close(job.fd);
		if (!job.direct)
			as_user(id, unlink_file, job.temp);
		free(out->buffer);
		free(out->temp_path);
		memset(out, 0, sizeof(*out));
		return -ENOMEM;
	}
	out->fd = job.fd;
	out->open = true;
	out->record_start = -1;
	out->is_file = S_ISREG(st.st_mode);
	out->write_through = !out->capacity;
	out->path = path;
	pthread_mutex_init(&out->lock, NULL);
	return 0;
}

bool cp_output__is_open(const struct cp_output *out)
{
	return out->open;
}

void cp_output__write_through(struct cp_output *out)
{
	out->write_through = true;
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

/* Where the next write lands in a regular file (its end, with O_APPEND); -1 when unknown. */
static off_t next_offset(const struct cp_output *out)
{
	struct stat st;

	if (!out->is_file)
		return -1;
	if (fcntl(out->fd, F_GETFL) & O_APPEND)
		return fstat(out->fd, &st) ? -1 : st.st_size;
	return lseek(out->fd, 0, SEEK_CUR);
}

/*
 * Writes len bytes to the output's fd, all of them (a pipe may take a part
 * at a time); the first whole of them end records, the rest begin one.
 * Cut short, a regular file is truncated back to where the unfinished
 * record began: a full disk leaves the last whole record at the end, not
 * part of the next. 0 or -errno.
 */
static int write_out(struct cp_output *out, const char *data, size_t len, size_t whole)
{
	off_t start = next_offset(out), back;
	size_t done = 0;
	ssize_t n;
	int err;

	while (done < len) {
		n = write(out->fd, data + done, len - done);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		/* Interrupted: only the stall watcher does that, once it has abandoned the output. */
		if (n < 0 && errno == EINTR && !__atomic_load_n(&out->abandoned, __ATOMIC_SEQ_CST))
			continue;
		err = n < 0 ? errno : EIO;
		back = out->record_start >= 0 ? out->record_start : start;
		if (back >= 0 && (done || out->record_start >= 0) && !ftruncate(out->fd, back))
			lseek(out->fd, back, SEEK_SET);
		return -err;
	}
	/* A record left unfinished: where it began, in case its end does not fit. */
	if (whole == len)
		out->record_start = -1;
	else if (start >= 0 && (whole || out->record_start < 0))
		out->record_start = start + (off_t)whole;
	return 0;
}

static int flush_buffer(struct cp_output *out)
{
	int err = out->buffered ? write_out(out, out->buffer, out->buffered, out->buffered_whole) : 0;

	out->buffered = 0;
	out->buffered_whole = 0;
	return err;
}

/* len bytes, ending a record or not (a part of one whose end follows). */
static bool append(struct cp_output *out, const void *data, size_t len, bool ends_record,
		   bool flush)
{
	int err;

	pthread_mutex_lock(&out->lock);
	err = __atomic_load_n(&out->error, __ATOMIC_SEQ_CST);
	if (err) {
		pthread_mutex_unlock(&out->lock);
		errno = err;
		return false;
	}
	__atomic_add_fetch(&out->writing, 1, __ATOMIC_RELAXED);
	/* What is buffered goes first; data whole, into the buffer or straight out. */
	if (out->buffered + len > out->capacity)
		err = flush_buffer(out);
	if (!err && (out->write_through || len > out->capacity)) {
		err = flush_buffer(out);
		if (!err)
			err = write_out(out, data, len, ends_record ? len : 0);
	} else if (!err) {
		memcpy(out->buffer + out->buffered, data, len);
		out->buffered += len;
		if (ends_record)
			out->buffered_whole = out->buffered;
		if (flush)
			err = flush_buffer(out);
	}
	__atomic_add_fetch(&out->writes, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&out->writing, 1, __ATOMIC_RELAXED);
	if (err)
		cp_output__failed(out, -err);
	pthread_mutex_unlock(&out->lock);
	if (err)
		errno = -err;
	return !err;
}

bool cp_output__write(struct cp_output *out, const void *data, size_t len, bool flush)
{
	return append(out, data, len, true, flush);
}

bool cp_output__write_part(struct cp_output *out, const void *data, size_t len)
{
	return append(out, data, len, false, false);
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

	if (!out->open)
		return 0;
	pthread_mutex_lock(&out->lock);
	__atomic_add_fetch(&out->writing, 1, __ATOMIC_RELAXED); /* the last flush can block too */
	/* Abandoned, what is buffered is dropped: flushing would block again. */
	if (!__atomic_load_n(&out->error, __ATOMIC_SEQ_CST))
		err = flush_buffer(out);
	if (out->fd != STDOUT_FILENO && close(out->fd) && !err)
		err = -errno;
	__atomic_add_fetch(&out->writes, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&out->writing, 1, __ATOMIC_RELAXED);
	if (err)
		cp_output__failed(out, -err);
	out->open = false;
	free(out->buffer);
	out->buffer = NULL;
	out->buffered = 0;
	out->buffered_whole = 0;
	pthread_mutex_unlock(&out->lock);
	pthread_mutex_destroy(&out->lock);
	if (out->temp_path) {
		as_user(out->identity, unlink_file, out->temp_path);
		free(out->temp_path);
		out->temp_path = NULL;
	}
	return __atomic_load_n(&out->error, __ATOMIC_SEQ_CST);
}
