// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Discovery: which libcuda.so.1 files the probes go on. A uprobe is set on
 * a file (an inode), so every distinct file a traced process may load is a
 * candidate: the ones already mapped (through /proc/PID/root, so container
 * paths work), and the ones a command about to start would find.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include "cuprobe_internal.h"

extern char **environ;

struct lib_file {
	char *path;
	dev_t dev;
	ino_t ino;
};

struct cp_lib_set {
	struct lib_file *files;
	size_t count;
	size_t capacity;
};

struct cp_lib_set *cp_lib_set__new(void)
{
	return calloc(1, sizeof(struct cp_lib_set));
}

void cp_lib_set__free(struct cp_lib_set *set)
{
	size_t i;

	if (!set)
		return;
	for (i = 0; i < set->count; i++)
		free(set->files[i].path);
	free(set->files);
	free(set);
}

int cp_lib_set__add(struct cp_lib_set *set, const char *path)
{
	struct stat st;
	size_t i;

	if (!set || !path || !*path)
		return -EINVAL;
	if (stat(path, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	for (i = 0; i < set->count; i++)
		if (set->files[i].dev == st.st_dev && set->files[i].ino == st.st_ino)
			return 0;
	if (CP_ARRAY_RESERVE(set->files, set->capacity, set->count + 1, 8))
		return -ENOMEM;
	set->files[set->count].path = strdup(path);
	if (!set->files[set->count].path)
		return -ENOMEM;
	set->files[set->count].dev = st.st_dev;
	set->files[set->count].ino = st.st_ino;
	set->count++;
	return 1;
}

size_t cp_lib_set__count(const struct cp_lib_set *set)
{
	return set ? set->count : 0;
}

const char *cp_lib_set__path(const struct cp_lib_set *set, size_t index)
{
	return set && index < set->count ? set->files[index].path : NULL;
}

int cp_maps__parse_line(char *line, struct cp_maps_entry *entry)
{
	unsigned long long start, end, offset, inode;
	unsigned int major, minor;
	char perms[5];
	int path_at = -1;
	size_t len;

	if (!line || !entry)
		return -EINVAL;
	len = strlen(line);
	if (len && line[len - 1] == '\n')
		line[--len] = '\0';
	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &offset,
		   &major, &minor, &inode, &path_at) < 7)
		return -EINVAL;
	if (end < start || strlen(perms) != 4)
		return -EINVAL;
	memset(entry, 0, sizeof(*entry));
	entry->start = start;
	entry->end = end;
	entry->offset = offset;
	entry->inode = inode;
	entry->dev_major = major;
	entry->dev_minor = minor;
	memcpy(entry->perms, perms, sizeof(perms));
	entry->path = path_at >= 0 && (size_t)path_at <= len ? line + path_at : line + len;
	return 0;
}

bool cp_path__is_library(const char *path, const char *soname)
{
	const char *base, *rest;
	size_t n;

	if (!path || !soname || !*soname)
		return false;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	/*
	 * Match on the stem before the version numbers: maps show the file a
	 * symlink resolved to, so libcuda.so.1 appears as libcuda.so.580.159.04.
	 */
	n = strlen(soname);
	while (n > 0 && (isdigit((unsigned char)soname[n - 1]) || soname[n - 1] == '.')) {
		size_t dot = n;

		while (dot > 0 && isdigit((unsigned char)soname[dot - 1]))
			dot--;
		if (dot == 0 || soname[dot - 1] != '.' || dot == n)
			break;
		n = dot - 1; /* drop ".<digits>" */
	}
	if (strncmp(base, soname, n))
		return false;
	rest = base + n;
	return *rest == '\0' || *rest == '.';
}

int cp_discover__process(struct cp_lib_set *set, pid_t pid, const char *soname)
{
	char maps_path[64], line[PATH_MAX + 256], lib_path[PATH_MAX + 64];
	struct cp_maps_entry entry;
	int added = 0, err;
	FILE *maps;

	if (!set || pid <= 0 || !soname)
		return -EINVAL;
	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	maps = fopen(maps_path, "re");
	if (!maps)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), maps)) {
		if (cp_maps__parse_line(line, &entry) || entry.path[0] != '/')
			continue;
		if (strstr(entry.path, " (deleted)") || !cp_path__is_library(entry.path, soname))
			continue;
		snprintf(lib_path, sizeof(lib_path), "/proc/%d/root%s", pid, entry.path);
		err = cp_lib_set__add(set, lib_path);
		if (err > 0)
			added++;
	}
	fclose(maps);
	return added;
}

static bool is_pid_name(const char *name)
{
	if (!*name)
		return false;
	for (; *name; name++)
		if (!isdigit((unsigned char)*name))
			return false;
	return true;
}

int cp_discover__all_processes(struct cp_lib_set *set, const char *soname)
{
	struct dirent *dent;
	int added = 0, n;
	DIR *proc;

	if (!set || !soname)
		return -EINVAL;
	proc = opendir("/proc");
	if (!proc)
		return -errno;
	while ((dent = readdir(proc))) {
		if (!is_pid_name(dent->d_name))
			continue;
		n = cp_discover__process(set, atoi(dent->d_name), soname);
		if (n > 0)
			added += n;
	}
	closedir(proc);
	return added;
}

int cp_discover__processes_using(const char *soname, pid_t *pids, size_t max)
{
	struct dirent *dent;
	struct cp_lib_set *set;
	size_t found = 0;
	DIR *proc;

	if (!soname || (!pids && max))
		return -EINVAL;
	proc = opendir("/proc");
	if (!proc)
		return -errno;
	while (found < max && (dent = readdir(proc))) {
		if (!is_pid_name(dent->d_name))
			continue;
		set = cp_lib_set__new();
		if (!set)
			break;
		/* A fresh set per process: the same file in two processes counts for both. */
		if (cp_discover__process(set, atoi(dent->d_name), soname) > 0)
			pids[found++] = atoi(dent->d_name);
		cp_lib_set__free(set);
	}
	closedir(proc);
	return (int)found;
}

/* Tries dir/soname; empty entries of a search path mean the current directory. */
static int add_from_dir(struct cp_lib_set *set, const char *dir, size_t dir_len, const char *soname)
{
	char path[PATH_MAX];
	int n;

	if (!dir_len) {
		dir = ".";
		dir_len = 1;
	}
	n = snprintf(path, sizeof(path), "%.*s/%s", (int)dir_len, dir, soname);
	if (n < 0 || (size_t)n >= sizeof(path))
		return 0;
	return cp_lib_set__add(set, path) > 0;
}

static int add_from_search_path(struct cp_lib_set *set, const char *search, const char *origin,
				const char *soname)
{
	char expanded[PATH_MAX];
	const char *p = search, *end;
	int added = 0;

	while (p && *p) {
		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		if (origin && !strncmp(p, "$ORIGIN", 7) && p + 7 <= end) {
			snprintf(expanded, sizeof(expanded), "%s%.*s", origin, (int)(end - p - 7), p + 7);
			added += add_from_dir(set, expanded, strlen(expanded), soname);
		} else if (origin && !strncmp(p, "${ORIGIN}", 9) && p + 9 <= end) {
			snprintf(expanded, sizeof(expanded), "%s%.*s", origin, (int)(end - p - 9), p + 9);
			added += add_from_dir(set, expanded, strlen(expanded), soname);
		} else {
			added += add_from_dir(set, p, end - p, soname);
		}
		p = *end ? end + 1 : end;
	}
	return added;
}

/* DT_RPATH and DT_RUNPATH of an ELF executable, read with libelf. */
static int add_from_elf_paths(struct cp_lib_set *set, const char *executable, const char *soname)
{
	char resolved[PATH_MAX], *slash;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	GElf_Dyn dyn;
	int fd, added = 0;
	size_t i;
	Elf *elf;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if (!realpath(executable, resolved))
		return -errno;
	fd = open(resolved, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		close(fd);
		return -EINVAL;
	}
	slash = strrchr(resolved, '/');
	if (slash)
		*slash = '\0';
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNAMIC)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !shdr.sh_entsize)
			continue;
		for (i = 0; i < shdr.sh_size / shdr.sh_entsize; i++) {
			const char *value;

			if (!gelf_getdyn(data, i, &dyn))
				break;
			if (dyn.d_tag != DT_RPATH && dyn.d_tag != DT_RUNPATH)
				continue;
			value = elf_strptr(elf, shdr.sh_link, dyn.d_un.d_val);
			if (value)
				added += add_from_search_path(set, value, resolved, soname);
		}
	}
	elf_end(elf);
	close(fd);
	return added;
}

/* The ld.so cache, as ldconfig -p lists it (no hand-written cache parser). */
static int add_from_ld_cache(struct cp_lib_set *set, const char *soname)
{
	static const char *const ldconfigs[] = { "/sbin/ldconfig", "/usr/sbin/ldconfig" };
	char *argv[] = { "ldconfig", "-p", NULL };
	char line[PATH_MAX + 128], *arrow;
	const char *ldconfig = NULL;
	posix_spawn_file_actions_t actions;
	int pipe_fds[2], status, added = 0;
	size_t i, n;
	FILE *out;
	pid_t pid;

	for (i = 0; i < sizeof(ldconfigs) / sizeof(ldconfigs[0]); i++)
		if (!access(ldconfigs[i], X_OK))
			ldconfig = ldconfigs[i];
	if (!ldconfig)
		return 0;
	if (pipe2(pipe_fds, O_CLOEXEC))
		return -errno;
	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, ldconfig, &actions, NULL, argv, environ)) {
		posix_spawn_file_actions_destroy(&actions);
		close(pipe_fds[0]);
		close(pipe_fds[1]);
		return 0;
	}
	posix_spawn_file_actions_destroy(&actions);
	close(pipe_fds[1]);
	out = fdopen(pipe_fds[0], "r");
	if (!out) {
		close(pipe_fds[0]);
		waitpid(pid, &status, 0);
		return -ENOMEM;
	}
	n = strlen(soname);
	while (fgets(line, sizeof(line), out)) {
		char *name = line, *end;

		while (*name == ' ' || *name == '\t')
			name++;
		if (strncmp(name, soname, n) || name[n] != ' ')
			continue;
		/* 64-bit entries only: a 32-bit libcuda cannot be the one we trace. */
		if (!strstr(name, "x86-64"))
			continue;
		arrow = strstr(name, "=> ");
		if (!arrow)
			continue;
		arrow += 3;
		end = arrow + strcspn(arrow, "\n");
		*end = '\0';
		added += cp_lib_set__add(set, arrow) > 0;
	}
	fclose(out);
	waitpid(pid, &status, 0);
	return added;
}

static const char *const standard_dirs[] = {
	"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib",
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
	"/usr/lib/wsl/lib",
	"/usr/local/cuda/compat",
};

int cp_discover__for_exec(struct cp_lib_set *set, const char *soname, const char *executable,
			  const char *ld_library_path)
{
	int added = 0, n;
	size_t i;

	if (!set || !soname)
		return -EINVAL;
	if (ld_library_path)
		added += add_from_search_path(set, ld_library_path, NULL, soname);
	if (executable) {
		n = add_from_elf_paths(set, executable, soname);
		if (n > 0)
			added += n;
	}
	n = add_from_ld_cache(set, soname);
	if (n > 0)
		added += n;
	for (i = 0; i < sizeof(standard_dirs) / sizeof(standard_dirs[0]); i++)
		added += add_from_dir(set, standard_dirs[i], strlen(standard_dirs[i]), soname);
	return added;
}
