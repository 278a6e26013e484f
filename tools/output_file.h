/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Where a command's records go: -o FILE or standard output, every write checked. */
#ifndef CUPROBE_OUTPUT_FILE_H
#define CUPROBE_OUTPUT_FILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "spawn.h"

/*
 * -o FILE is written as a temporary file beside FILE, created as the invoking
 * user (effective ids switched for the open, so permissions are theirs and
 * the file is owned by them), and renamed over FILE once tracing has
 * started: a start that fails leaves an existing FILE as it was. A FILE that
 * is a symbolic link or a directory is refused.
 *
 * Only whole records stay in the output: what one cp_output__write is
 * given (whole records, or the end of one begun by cp_output__write_part)
 * is buffered whole and written with write(2), and when a write is cut
 * short (a full disk) a regular file is truncated back to where the
 * unfinished record began, so the file ends with the last record that fit.
 */
struct cp_output {
	bool open;                /* from a successful open to the close */
	int fd;                   /* where records go: the temporary file, or standard output */
	bool is_file;             /* a regular file: a cut write can be taken back */
	bool write_through;       /* every write at once (stdout shared with COMMAND) */
	char *buffer;             /* writes not yet written */
	size_t capacity;          /* the buffer's size: 0 for a terminal (every write at once) */
	size_t buffered;
	size_t buffered_whole;    /* of those, the bytes up to the last record's end */
	off_t record_start;       /* a file: where a record partly written began; -1: none */
	const char *path;         /* -o FILE; NULL for standard output */
	char *temp_path;          /* until committed */
	const struct cp_identity *identity;
	pthread_mutex_t lock;     /* writers of two threads (stats' main and agent threads) */
	int error;                /* the first failed write's errno; 0 when none */
	bool abandoned;           /* blocked at the stop: what was not written is dropped */
	int writing;              /* writes in progress (atomic: a watcher reads it) */
	unsigned long writes;     /* writes finished (atomic) */
};

/* Opens the output (stdout when path is NULL): 0, or -errno with nothing left behind. */
int cp_output__open(struct cp_output *out, const char *path, const struct cp_identity *id);
/* Whether the output is open (between a successful open and the close). */
bool cp_output__is_open(const struct cp_output *out);
/*
 * Every write goes out at once instead of being buffered: for a stdout
 * that COMMAND writes to as well, so that its lines land between records.
 */
void cp_output__write_through(struct cp_output *out);
/* Tracing has started: the temporary file becomes FILE. 0 or -errno. */
int cp_output__commit(struct cp_output *out);
/*
 * Writes len bytes, whole records (then flushes, if asked); false, errno
 * set, when it failed or the output had failed already. Every write to an
 * output goes through here, so a stop can find a blocked one.
 */
bool cp_output__write(struct cp_output *out, const void *data, size_t len, bool flush);
/*
 * Writes len bytes of a record whose end a later write brings (a large map
 * streamed a part at a time); false, errno set, as cp_output__write.
 */
bool cp_output__write_part(struct cp_output *out, const void *data, size_t len);
/* Whether a write has been in progress since the last call saw `writes` at *seen. */
bool cp_output__stalled(struct cp_output *out, unsigned long *seen);
/* Notes a failed write (errno, or EIO); returns true the first time. */
bool cp_output__failed(struct cp_output *out, int err);
/*
 * Its writer was blocked when tracing stopped (a pipe nobody reads, a
 * terminal stopped with Ctrl-S): later writes fail and close drops what is
 * buffered instead of blocking again.
 */
void cp_output__abandon(struct cp_output *out);
/*
 * Flushes and closes; a temporary file never committed is removed. Returns
 * 0, or the errno of the first write that failed (earlier or now).
 */
int cp_output__close(struct cp_output *out);

#endif
