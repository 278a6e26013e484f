/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Starting COMMAND: held until every probe is attached, then run as the invoking user. */
#ifndef CUPROBE_SPAWN_H
#define CUPROBE_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <sys/types.h>

struct cp_child {
	pid_t pid;
	int go_fd;    /* write end: one byte lets the child exec */
	int error_fd; /* read end: the child's exec errno, or EOF on success */
};

/*
 * Who cuprobe acts for: the invoking user (SUDO_UID/SUDO_GID under sudo),
 * as whom outputs are created, PROG is read and compiled, and COMMAND runs
 * (unless --run-as-root); root itself when drop is false.
 */
struct cp_identity {
	bool drop;
	uid_t uid;
	gid_t gid;
};

/*
 * The invoking user, from SUDO_UID/SUDO_GID when running as root: 0, or
 * -EINVAL for bad values, -ENODATA for one of the two without the other.
 */
int cp_identity__from_env(struct cp_identity *id);
/* id's groups as initgroups would set them (gid first); the caller frees *groups. 0 or -ENOMEM. */
int cp_identity__groups(const struct cp_identity *id, gid_t **groups, int *count);

/*
 * Resolves COMMAND like execvp would, as id would see it (with the user's
 * supplementary groups): a name with a '/' is taken as is, others are looked
 * up in PATH. 0 with the path in out, or -ENOENT / -EACCES / -EISDIR (a
 * path to a directory) / -ENOMEM.
 */
int cp_resolve_command(const char *name, const struct cp_identity *id, char *out, size_t out_len);

/*
 * Forks a child that waits for cp_child__release, then drops to id as
 * `sudo -u` does (the user's groups as initgroups sets them; HOME, USER,
 * LOGNAME and SHELL from its passwd entry, when it has one), restores
 * child_mask and execs path with argv (its stdout on our stderr when
 * stdout_to_stderr). The parent can add the pid to the traced set before
 * anything runs.
 */
int cp_child__prepare(struct cp_child *child, const char *path, char **argv,
		      const struct cp_identity *id, const sigset_t *child_mask,
		      bool stdout_to_stderr);

/* What COMMAND gets beyond its argv (cuprobe run with device programs). */
struct cp_child_extras {
	char *const *env;  /* "NAME=value" entries, NULL-terminated: they replace same-named ones */
	const int *fds;    /* fds COMMAND inherits (close-on-exec cleared in the child only) */
	size_t fd_count;
};
/* cp_child__prepare with extras (NULL: none). */
int cp_child__prepare_with(struct cp_child *child, const char *path, char **argv,
			   const struct cp_identity *id, const sigset_t *child_mask,
			   bool stdout_to_stderr, const struct cp_child_extras *extras);
/* Lets the child exec: 0 when exec succeeded, else the child's -errno (it then exits 127). */
int cp_child__release(struct cp_child *child);
/* Kills and reaps a child that will not be released. */
void cp_child__abort(struct cp_child *child);

/*
 * As id (its groups; stderr inherited): runs path with argv, or, with argv
 * NULL, reads the file at path; returns what it wrote to stdout (at most
 * max bytes, else -EFBIG) in *out (the caller frees it) and its wait status
 * in *status: exit 127 when path does not exist, 126 when it cannot be run
 * or read as id, 124 when (argv NULL) path is not a regular file. 0 or a
 * negative errno of our own.
 */
int cp_capture_as_user(const struct cp_identity *id, const char *path, char **argv, size_t max,
		       void **out, size_t *out_size, int *status);

#endif
