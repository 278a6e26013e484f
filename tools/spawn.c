// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_options.h"
#include "cuprobe_internal.h"
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

int cp_identity__from_env(struct cp_identity *id)
{
	const char *uid_text = getenv("SUDO_UID"), *gid_text = getenv("SUDO_GID");
	unsigned int uid, gid;

	memset(id, 0, sizeof(*id));
	if (geteuid() != 0 || (!uid_text && !gid_text))
		return 0;
	/* One without the other is not sudo's doing: root, silently, would be a guess. */
	if (!uid_text || !gid_text)
		return -ENODATA;
	if (parse_id(uid_text, &uid) || parse_id(gid_text, &gid))
		return -EINVAL;
	if (uid == 0)
		return 0;
	id->drop = true;
	id->uid = uid;
	id->gid = gid;
	return 0;
}

/*
 * The groups id runs with, as initgroups(name, gid) would set them: gid and
 * the user's supplementary groups, or gid alone for a uid without a passwd
 * entry. The caller frees *groups. 0 or -ENOMEM.
 */
static int user_groups(const struct cp_identity *id, const struct passwd *pw, gid_t **groups,
		       int *count)
{
	int n = pw ? 32 : 1, tries;

	for (tries = 0; tries < 4; tries++) {
		*groups = malloc(n * sizeof(**groups));
		if (!*groups)
			return -ENOMEM;
		**groups = id->gid;
		*count = 1;
		if (!pw)
			return 0;
		/* n becomes the size needed when the list did not fit. */
		if (getgrouplist(pw->pw_name, id->gid, *groups, &n) >= 0) {
			*count = n;
			return 0;
		}
		free(*groups);
	}
	return -ENOMEM;
}

int cp_identity__groups(const struct cp_identity *id, gid_t **groups, int *count)
{
	return user_groups(id, getpwuid(id->uid), groups, count);
}

/* Whether id, with its groups, may execute path: mode bits checked as that user would be. */
static bool executable_by(const char *path, const struct cp_identity *id, const gid_t *groups,
			  int group_count)
{
	struct stat st;
	int i;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return false;
	if (!id->drop)
		return st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH);
	if (st.st_uid == id->uid)
		return st.st_mode & S_IXUSR;
	for (i = 0; i < group_count; i++)
		if (st.st_gid == groups[i])
			return st.st_mode & S_IXGRP;
	return st.st_mode & S_IXOTH;
}

int cp_resolve_command(const char *name, const struct cp_identity *id, char *out, size_t out_len)
{
	const char *path_env, *p, *end;
	char candidate[PATH_MAX];
	bool exists = false;
	gid_t *groups = NULL;
	int group_count = 0, err = -ENOENT;

	if (!name || !*name)
		return -ENOENT;
	if (id->drop && user_groups(id, getpwuid(id->uid), &groups, &group_count))
		return -ENOMEM;
	if (strchr(name, '/')) {
		struct stat st;

		if (stat(name, &st))
			goto out;
		err = S_ISDIR(st.st_mode) ? -EISDIR : -EACCES;
		if (executable_by(name, id, groups, group_count)) {
			snprintf(out, out_len, "%s", name);
			err = 0;
		}
		goto out;
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
		if (executable_by(candidate, id, groups, group_count)) {
			snprintf(out, out_len, "%s", candidate);
			err = 0;
			goto out;
		}
	}
	err = exists ? -EACCES : -ENOENT;
out:
	free(groups);
	return err;
}

/*
 * What the child needs to become id as `sudo -u` makes it, prepared before
 * the fork: the process has threads, so the child may only make
 * async-signal-safe calls, which NSS look-ups and malloc are not.
 */
struct user_setup {
	gid_t *groups;
	int group_count;
	char **env;     /* environ with the user's HOME, USER, LOGNAME, SHELL; NULL: environ */
	char *vars[4];
};

static void user_setup__free(struct user_setup *u)
{
	size_t i;

	free(u->groups);
	free(u->env);
	for (i = 0; i < sizeof(u->vars) / sizeof(u->vars[0]); i++)
		free(u->vars[i]);
}

/* "NAME=value" in a new string, or NULL. */
static char *env_var(const char *name, const char *value)
{
	size_t len = strlen(name) + strlen(value) + 2;
	char *var = malloc(len);

	if (var)
		snprintf(var, len, "%s=%s", name, value);
	return var;
}

/* The length of "NAME=" in an environment entry, 0 when it has no '='. */
static size_t env_name_len(const char *entry)
{
	const char *equals = strchr(entry, '=');

	return equals ? (size_t)(equals - entry) + 1 : 0;
}

/* Is entry replaced by one of extra (same NAME=)? */
static bool replaced(const char *entry, char *const *extra)
{
	size_t n = env_name_len(entry);

	for (; n && extra && *extra; extra++)
		if (env_name_len(*extra) == n && !strncmp(*extra, entry, n))
			return true;
	return false;
}

static int user_setup__prepare(struct user_setup *u, const struct cp_identity *id,
			       char *const *extra_env)
{
	static const char *const names[] = { "HOME=", "USER=", "LOGNAME=", "SHELL=" };
	const struct passwd *pw = NULL;
	size_t n = 0, extra = 0, i, j, out = 0;

	memset(u, 0, sizeof(*u));
	while (extra_env && extra_env[extra])
		extra++;
	if (!id->drop && !extra)
		return 0;
	if (id->drop) {
		pw = getpwuid(id->uid);
		if (user_groups(id, pw, &u->groups, &u->group_count))
			return -ENOMEM;
	}
	/* A uid without a passwd entry has no home or name to give: the environment stays. */
	if (pw) {
		u->vars[0] = env_var("HOME", *pw->pw_dir ? pw->pw_dir : "/");
		u->vars[1] = env_var("USER", pw->pw_name);
		u->vars[2] = env_var("LOGNAME", pw->pw_name);
		u->vars[3] = env_var("SHELL", *pw->pw_shell ? pw->pw_shell : "/bin/sh");
		if (!u->vars[0] || !u->vars[1] || !u->vars[2] || !u->vars[3]) {
			user_setup__free(u);
			return -ENOMEM;
		}
	}
	while (environ[n])
		n++;
	u->env = calloc(n + extra + 5, sizeof(*u->env));
	if (!u->env) {
		user_setup__free(u);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		for (j = 0; pw && j < 4; j++)
			if (!strncmp(environ[i], names[j], strlen(names[j])))
				break;
		if ((!pw || j == 4) && !replaced(environ[i], extra_env))
			u->env[out++] = environ[i];
	}
	for (j = 0; pw && j < 4; j++)
		u->env[out++] = u->vars[j];
	for (i = 0; i < extra; i++)
		u->env[out++] = extra_env[i];
	return 0;
}

int cp_child__prepare(struct cp_child *child, const char *path, char **argv,
		      const struct cp_identity *id, const sigset_t *child_mask, bool stdout_to_stderr)
{
	return cp_child__prepare_with(child, path, argv, id, child_mask, stdout_to_stderr, NULL);
}

int cp_child__prepare_with(struct cp_child *child, const char *path, char **argv,
			   const struct cp_identity *id, const sigset_t *child_mask,
			   bool stdout_to_stderr, const struct cp_child_extras *extras)
{
	struct user_setup user;
	int go[2], report[2];
	size_t i;
	char byte;
	int err;

	err = user_setup__prepare(&user, id, extras ? extras->env : NULL);
	if (err)
		return err;
	if (pipe2(go, O_CLOEXEC)) {
		err = -errno;
		goto free_user;
	}
	if (pipe2(report, O_CLOEXEC)) {
		err = -errno;
		goto close_go;
	}
	child->pid = fork();
	if (child->pid < 0) {
		err = -errno;
		goto close_report;
	}
	if (child->pid == 0) {
		close(go[1]);
		close(report[0]);
		/* Wait for the tracer: nothing of COMMAND runs before the probes are in. */
		if (read(go[0], &byte, 1) != 1)
			_exit(127);
		err = 0;
		if (id->drop && (setgroups(user.group_count, user.groups) || setgid(id->gid) ||
				 setuid(id->uid)))
			err = errno;
		if (!err && stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			err = errno;
		for (i = 0; !err && extras && i < extras->fd_count; i++)
			if (fcntl(extras->fds[i], F_SETFD, 0))
				err = errno;
		if (!err) {
			/* cuprobe ignores SIGPIPE (a closed output is an error it says); COMMAND must not. */
			signal(SIGPIPE, SIG_DFL);
			sigprocmask(SIG_SETMASK, child_mask, NULL);
			execve(path, argv, user.env ? user.env : environ);
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
	user_setup__free(&user);
	return 0;

close_report:
	close(report[0]);
	close(report[1]);
close_go:
	close(go[0]);
	close(go[1]);
free_user:
	user_setup__free(&user);
	return err;
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

/* The child of cp_capture_as_user: as id, exec argv or copy the file to stdout. */
static void __attribute__((noreturn)) capture_child(const struct cp_identity *id,
						   const struct user_setup *user, int out_fd,
						   const char *path, char **argv)
{
	char buf[65536];
	struct stat st;
	ssize_t n;
	int fd;

	if (id->drop && (setgroups(user->group_count, user->groups) || setgid(id->gid) ||
			 setuid(id->uid)))
		_exit(126);
	if (dup2(out_fd, STDOUT_FILENO) < 0)
		_exit(126);
	if (argv) {
		signal(SIGPIPE, SIG_DFL);
		execve(path, argv, user->env ? user->env : environ);
		_exit(errno == ENOENT ? 127 : 126);
	}
	/* Without waiting on a FIFO; only a regular file is read. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		_exit(errno == ENOENT ? 127 : errno == EACCES ? 126 : 125);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		_exit(124);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(STDOUT_FILENO, buf, (size_t)n) != n)
			_exit(125);
	_exit(n < 0 ? 125 : 0);
}

int cp_capture_as_user(const struct cp_identity *id, const char *path, char **argv, size_t max,
		       void **out, size_t *out_size, int *status)
{
	struct user_setup user;
	unsigned char *data = NULL;
	size_t size = 0, capacity = 0;
	int pipe_fds[2], err = 0;
	pid_t pid;
	ssize_t n;

	*out = NULL;
	*out_size = 0;
	err = user_setup__prepare(&user, id, NULL);
	if (err)
		return err;
	if (pipe2(pipe_fds, O_CLOEXEC)) {
		err = -errno;
		goto free_user;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(pipe_fds[0]);
		close(pipe_fds[1]);
		goto free_user;
	}
	if (pid == 0)
		capture_child(id, &user, pipe_fds[1], path, argv);
	close(pipe_fds[1]);
	for (;;) {
		if (size == capacity) {
			err = size >= max ? -EFBIG : cp_array__reserve(&data, &capacity, size + 1, 1, 65536);
			if (err)
				break;
		}
		n = read(pipe_fds[0], data + size, capacity - size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				err = -errno;
			break;
		}
		size += (size_t)n;
	}
	close(pipe_fds[0]);
	if (err)
		kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	if (err) {
		free(data);
		goto free_user;
	}
	*out = data;
	*out_size = size;
free_user:
	user_setup__free(&user);
	return err;
}
