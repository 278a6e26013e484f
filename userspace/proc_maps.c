// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * File mappings of traced processes, kept past their exit: a leak report is
 * made when the process is gone, so the maps are read while it lives (at
 * cuInit and on every refresh) and symbolization uses what was kept.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cuprobe.h"

struct mapping {
	pid_t pid;
	uint64_t start, end, offset;
	char *path; /* readable after exit when the process shares our root; else via /proc/PID/root */
	char *shown; /* the path as the process saw it */
};

struct cp_proc_maps {
	struct mapping *mappings;
	size_t count;
	size_t capacity;
};

struct cp_proc_maps *cp_proc_maps__new(void)
{
	return calloc(1, sizeof(struct cp_proc_maps));
}

static void drop(struct mapping *m)
{
	free(m->path);
	free(m->shown);
}

void cp_proc_maps__free(struct cp_proc_maps *maps)
{
	size_t i;

	if (!maps)
		return;
	for (i = 0; i < maps->count; i++)
		drop(&maps->mappings[i]);
	free(maps->mappings);
	free(maps);
}

static bool known(const struct cp_proc_maps *maps, pid_t pid, uint64_t start, uint64_t end)
{
	size_t i;

	for (i = 0; i < maps->count; i++)
		if (maps->mappings[i].pid == pid && maps->mappings[i].start == start &&
		    maps->mappings[i].end == end)
			return true;
	return false;
}

/* Whether pid sees the same / as we do (then its paths stay valid after it exits). */
static bool shares_our_root(pid_t pid)
{
	struct stat ours, theirs;
	char root[64];

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	return !stat("/", &ours) && !stat(root, &theirs) && ours.st_dev == theirs.st_dev &&
	       ours.st_ino == theirs.st_ino;
}

int cp_proc_maps__refresh(struct cp_proc_maps *maps, pid_t pid)
{
	bool same_root;
	char maps_path[64], line[PATH_MAX + 256], root_path[PATH_MAX + 64];
	struct cp_maps_entry entry;
	FILE *file;
	int err = 0;

	if (!maps || pid <= 0)
		return -EINVAL;
	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	file = fopen(maps_path, "re");
	if (!file)
		return errno == ENOENT ? -ESRCH : -errno;
	same_root = shares_our_root(pid);
	while (fgets(line, sizeof(line), file)) {
		struct mapping *m;

		if (cp_maps__parse_line(line, &entry) || entry.perms[2] != 'x' || entry.path[0] != '/')
			continue;
		if (known(maps, pid, entry.start, entry.end))
			continue;
		if (maps->count == maps->capacity) {
			size_t grown = maps->capacity ? maps->capacity * 2 : 64;
			struct mapping *bigger = realloc(maps->mappings, grown * sizeof(*bigger));

			if (!bigger) {
				err = -ENOMEM;
				break;
			}
			maps->mappings = bigger;
			maps->capacity = grown;
		}
		if (same_root)
			snprintf(root_path, sizeof(root_path), "%s", entry.path);
		else
			snprintf(root_path, sizeof(root_path), "/proc/%d/root%s", pid, entry.path);
		m = &maps->mappings[maps->count];
		m->pid = pid;
		m->start = entry.start;
		m->end = entry.end;
		m->offset = entry.offset;
		m->path = strdup(root_path);
		m->shown = strdup(entry.path);
		if (!m->path || !m->shown) {
			drop(m);
			err = -ENOMEM;
			break;
		}
		maps->count++;
	}
	fclose(file);
	return err;
}

void cp_proc_maps__forget(struct cp_proc_maps *maps, pid_t pid)
{
	size_t i, kept = 0;

	if (!maps)
		return;
	for (i = 0; i < maps->count; i++) {
		if (maps->mappings[i].pid == pid)
			drop(&maps->mappings[i]);
		else
			maps->mappings[kept++] = maps->mappings[i];
	}
	maps->count = kept;
}

void cp_proc_maps__symbolize(const struct cp_proc_maps *maps, pid_t pid, uint64_t ip,
			     char *out, size_t out_len)
{
	char symbol[512], shown[1024];
	uint64_t offset;
	size_t i;

	if (!out || !out_len)
		return;
	for (i = 0; maps && i < maps->count; i++) {
		const struct mapping *m = &maps->mappings[i];

		if (m->pid != pid || ip < m->start || ip >= m->end)
			continue;
		if (!cp_elf__symbolize(m->path, ip - m->start + m->offset, symbol, sizeof(symbol),
				       &offset)) {
			cp_demangle(symbol, shown, sizeof(shown));
			snprintf(out, out_len, "%s+0x%llx (%s)", shown, (unsigned long long)offset,
				 m->shown);
		} else {
			snprintf(out, out_len, "0x%llx (%s+0x%llx)", (unsigned long long)ip, m->shown,
				 (unsigned long long)(ip - m->start + m->offset));
		}
		return;
	}
	snprintf(out, out_len, "0x%llx", (unsigned long long)ip);
}
