// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_options.h"
#include "spawn.h"

extern char **environ;

static int parse_id(const char *text, unsigned int *value)
{
	pid_t parsed;

	if (!strcmp(text, "0")) {
		*value = 0;
		return 0;
	}
	if (cp_parse_pid(text, &parsed))
		return -EINVAL;
	*value = (unsigned int)parsed;
	return 0;
}

int cp_identity__from_env(struct cp_identity *id, bool keep_root)
{
	const char *uid_text = getenv("SUDO_UID"), *gid_text = getenv("SUDO_GID");
	unsigned int uid, gid;

	memset(id, 0, sizeof(*id));
	if (keep_root || geteuid() != 0 || !uid_text || !gid_text)
		return 0;
	if (parse_id(uid_text, &uid) || parse_id(gid_text, &gid))
		return -EINVAL;
	if (uid == 0)
		return 0;
	id->drop = true;
	id->uid = uid;
	id->gid = gid;
	return 0;
}

/* Whether id may execute path: mode bits checked as that user would be. */
static bool executable_by(const char *path, const struct cp_identity *id)
{
	struct stat st;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return false;
	if (!id->drop)
		return st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH);
	if (st.st_uid == id->uid)
		return st.st_mode & S_IXUSR;
	if (st.st_gid == id->gid)
		return st.st_mode & S_IXGRP;
	return st.st_mode & S_IXOTH;
}

int cp_resolve_command(const char *name, const struct cp_identity *id, char *out, size_t out_len)
{
	const char *path_env, *p, *end;
	char candidate[PATH_MAX];
	bool exists = false;

	if (!name || !*name)
		return -ENOENT;
	if (strchr(name, '/')) {
		if (access(name, F_OK))
			return -ENOENT;
		if (!executable_by(name, id))
			return -EACCES;
		snprintf(out, out_len, "%s", name);
		return 0;
	}
	path_env = getenv("PATH");
	if (!path_env || !*path_env)
		path_env = "/usr/local/bin:/usr/bin:/bin";
	for (p = path_env; *p; p = *end ? end + 1 : end) {
		int n;

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		n = snprintf(candidate, sizeof(candidate), "%.*s/%s", end == p ? 1 : (int)(end - p),
			     end == p ? "." : p, name);
		if (n < 0 || (size_t)n >= sizeof(candidate))
			continue;
		if (access(candidate, F_OK))
			continue;
		exists = true;
		if (executable_by(candidate, id)) {
			snprintf(out, out_len, "%s", candidate);
			return 0;
		}
	}
	return exists ? -EACCES : -ENOENT;
}

int cp_child__prepare(struct cp_child *child, const char *path, char **argv,
		      const struct cp_identity *id, const sigset_t *child_mask, bool stdout_to_stderr)
{
	int go[2], report[2];
	char byte;
	int err;

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(report, O_CLOEXEC)) {
		err = -errno;
		close(go[0]);
		close(go[1]);
		return err;
	}
	child->pid = fork();
	if (child->pid < 0) {
		err = -errno;
		close(go[0]);
		close(go[1]);
		close(report[0]);
		close(report[1]);
		return err;
	}
	if (child->pid == 0) {
		close(go[1]);
		close(report[0]);
		/* Wait for the tracer: nothing of COMMAND runs before the probes are in. */
		if (read(go[0], &byte, 1) != 1)
			_exit(127);
		err = 0;
		if (id->drop && (setgroups(1, &id->gid) || setgid(id->gid) || setuid(id->uid)))
			err = errno;
		if (!err && stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			err = errno;
		if (!err) {
			sigprocmask(SIG_SETMASK, child_mask, NULL);
			execve(path, argv, environ);
			err = errno;
		}
		if (write(report[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(report[1]);
	child->go_fd = go[1];
	child->error_fd = report[0];
	return 0;
}

int cp_child__release(struct cp_child *child)
{
	char go = 1;
	int child_errno = 0;
	ssize_t n;

	if (write(child->go_fd, &go, 1) != 1) {
		close(child->go_fd);
		close(child->error_fd);
		return -EPIPE;
	}
	close(child->go_fd);
	do {
		n = read(child->error_fd, &child_errno, sizeof(child_errno));
	} while (n < 0 && errno == EINTR);
	close(child->error_fd);
	if (n == (ssize_t)sizeof(child_errno))
		return child_errno ? -child_errno : -EIO;
	return 0; /* EOF: the close-on-exec pipe closed, exec succeeded */
}

void cp_child__abort(struct cp_child *child)
{
	int status;

	close(child->go_fd);
	close(child->error_fd);
	kill(child->pid, SIGKILL);
	waitpid(child->pid, &status, 0);
}
