// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attach events: the kernel says a process mapped a CUDA library file that
 * no probe covers (bpf/cuprobe.bpf.c, file_mapped); the agent thread calls
 * cp_tracer__handle_attach, which reaches the file through that process,
 * attaches the catalogue to it, marks its inode covered for the BPF side
 * and continues the process if the kernel held it.
 *
 * A held process is stopped (SIGSTOP) until then. If cuprobe dies while one
 * is held, nothing here would continue it: a guardian process, forked at
 * open, waits for our end of a pipe to close (which the kernel does even on
 * SIGKILL) and then continues every process still in the held map.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cuprobe.h"
#include "tracer_internal.h"

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The bookkeeping row of (dev, inode), created when new. Called with tracer->lock held. */
struct tracked_file *cp_tracer__track(struct cp_tracer *tracer, uint32_t dev, uint64_t inode)
{
	struct tracked_file *file;
	size_t i;

	for (i = 0; i < tracer->file_count; i++)
		if (tracer->files[i].info.dev == dev && tracer->files[i].info.inode == inode)
			return &tracer->files[i];
	if (CP_ARRAY_RESERVE(tracer->files, tracer->file_capacity, tracer->file_count + 1, 16))
		return NULL;
	file = &tracer->files[tracer->file_count++];
	memset(file, 0, sizeof(*file));
	file->info.dev = dev;
	file->info.inode = inode;
	return file;
}

int cp_tracer__mark_covered(struct cp_tracer *tracer, uint32_t dev, uint64_t inode)
{
	struct cp_file_key key = { .dev = dev, .inode = inode };
	uint8_t one = 1;

	return bpf_map__update_elem(tracer->skel->maps.covered_files, &key, sizeof(key), &one,
				    sizeof(one), BPF_ANY);
}

/* Whether path names the file (dev, inode): stat follows /proc's magic links. */
static bool is_file(const char *path, uint32_t dev, uint64_t inode)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && st.st_ino == inode &&
	       cp_kernel_dev(st.st_dev) == dev;
}

/*
 * A path to the mapped file that works from here, whatever mount namespace
 * the process lives in, and the path as the process sees it (for people).
 * Its mappings first (map_files stays valid while the file is mapped, then
 * the path under its root), then the fd it mapped (gone once the loader
 * closed it, unless the process is held), then, at exec, its executable.
 * Last, an executable mapping of the same name: on overlayfs the mapping
 * shows the lower file.
 */
static int reach_file(const struct cp_attach_event *event, char *path, size_t len,
		      char *shown, size_t shown_len)
{
	char maps_path[64], line[PATH_MAX + 256], by_name[PATH_MAX] = "";
	char by_name_shown[PATH_MAX] = "";
	struct cp_maps_entry entry;
	pid_t pid = (pid_t)event->hdr.pid;
	ssize_t n;
	FILE *maps;

	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	maps = fopen(maps_path, "re");
	while (maps && fgets(line, sizeof(line), maps)) {
		const char *base;

		if (cp_maps__parse_line(line, &entry) || entry.path[0] != '/')
			continue;
		if (entry.inode == event->inode &&
		    ((entry.dev_major << 20) | entry.dev_minor) == event->dev) {
			snprintf(shown, shown_len, "%s", entry.path);
			snprintf(path, len, "/proc/%d/map_files/%llx-%llx", pid,
				 (unsigned long long)entry.start, (unsigned long long)entry.end);
			if (is_file(path, event->dev, event->inode))
				goto found;
			snprintf(path, len, "/proc/%d/root%s", pid, entry.path);
			if (is_file(path, event->dev, event->inode))
				goto found;
		}
		base = strrchr(entry.path, '/');
		if (!by_name[0] && entry.perms[2] == 'x' && base && !strcmp(base + 1, event->name)) {
			snprintf(by_name, sizeof(by_name), "/proc/%d/map_files/%llx-%llx", pid,
				 (unsigned long long)entry.start, (unsigned long long)entry.end);
			snprintf(by_name_shown, sizeof(by_name_shown), "%s", entry.path);
		}
	}
	if (maps)
		fclose(maps);
	if (event->fd >= 0 || (event->flags & CP_ATTACH_EXEC)) {
		if (event->flags & CP_ATTACH_EXEC)
			snprintf(path, len, "/proc/%d/exe", pid);
		else
			snprintf(path, len, "/proc/%d/fd/%d", pid, event->fd);
		n = readlink(path, shown, shown_len - 1);
		if (n > 0 && is_file(path, event->dev, event->inode)) {
			shown[n] = '\0';
			return 0;
		}
	}
	if (by_name[0] && !access(by_name, R_OK)) {
		snprintf(path, len, "%s", by_name);
		snprintf(shown, shown_len, "%s", by_name_shown);
		return 0;
	}
	return maps ? -ENOENT : -ESRCH;
found:
	fclose(maps);
	return 0;
}

static void note_early_process(struct tracked_file *file, pid_t pid, bool held)
{
	unsigned int i, known = file->info.early_processes < TRACKED_PIDS_MAX ?
				file->info.early_processes : TRACKED_PIDS_MAX;

	for (i = 0; i < known; i++)
		if (file->early_pids[i] == pid)
			return;
	if (known < TRACKED_PIDS_MAX)
		file->early_pids[known] = pid;
	file->info.early_processes++;
	if (held)
		file->info.held_processes++;
}

/* Continues a held process and forgets it. */
static void release(struct cp_tracer *tracer, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	bpf_map__delete_elem(tracer->skel->maps.held_pids, &key, sizeof(key), 0);
	kill(pid, SIGCONT);
}

int cp_tracer__handle_attach(struct cp_tracer *tracer, struct cp_attach_event *event)
{
	enum cp_library library = event->flags & CP_ATTACH_RUNTIME ? CP_LIBRARY_runtime :
				  event->flags & CP_ATTACH_NCCL ? CP_LIBRARY_nccl : CP_LIBRARY_driver;
	struct cp_attach_report report = { 0 };
	struct tracked_file *file;
	char path[CP_PATH_MAX], shown[CP_PATH_MAX] = "";
	int err = 0;

	if (!tracer || !event || event->hdr.type != CP_EV_ATTACH)
		return -EINVAL;
	pthread_mutex_lock(&tracer->lock);
	file = cp_tracer__track(tracer, event->dev, event->inode);
	if (!file) {
		pthread_mutex_unlock(&tracer->lock);
		err = -ENOMEM;
		goto out_release;
	}
	if (file->info.status != CP_ATTACH_PENDING) {
		/* Covered meanwhile (an earlier event, or the start): nothing to attach. */
		if (!file->info.at_start && event->hdr.time_ns < file->info.probes_live_ns)
			note_early_process(file, event->hdr.pid, event->flags & CP_ATTACH_HELD);
		snprintf(event->path, sizeof(event->path), "%s", file->info.path);
		event->status = CP_ATTACH_COVERED;
		event->probes_live_ns = file->info.probes_live_ns;
		pthread_mutex_unlock(&tracer->lock);
		goto out_release;
	}
	file->info.library = library;
	file->info.runtime = library == CP_LIBRARY_runtime;
	file->info.first_mapped_ns = event->hdr.time_ns;
	note_early_process(file, event->hdr.pid, event->flags & CP_ATTACH_HELD);
	pthread_mutex_unlock(&tracer->lock);

	err = reach_file(event, path, sizeof(path), shown, sizeof(shown));
	if (!err)
		err = cp_tracer__attach_file(tracer, path, library, &report);

	pthread_mutex_lock(&tracer->lock);
	file = cp_tracer__track(tracer, event->dev, event->inode);
	if (file) {
		snprintf(file->info.path, sizeof(file->info.path), "%s", shown[0] ? shown : path);
		file->info.status = !err ? CP_ATTACH_ATTACHED : err == -ENOENT && report.missing ?
				    CP_ATTACH_NOTHING : CP_ATTACH_FAILED;
		file->info.error = file->info.status == CP_ATTACH_FAILED ? err : 0;
		file->info.probes = report.attached;
		file->info.probes_live_ns = file->info.status == CP_ATTACH_ATTACHED ? monotonic_ns() : 0;
		event->status = file->info.status;
		event->probes_live_ns = file->info.probes_live_ns;
		event->probes = report.attached;
		event->error = file->info.error;
		snprintf(event->path, sizeof(event->path), "%s", file->info.path);
	}
	pthread_mutex_unlock(&tracer->lock);
	/* Covered whatever happened, so the kernel stops asking (and holding) for it. */
	cp_tracer__mark_covered(tracer, event->dev, event->inode);
	if (event->status == CP_ATTACH_FAILED)
		cp_tracer__log(tracer, CP_LOG_WARN, "%s (pid %u): cannot probe it: %s", event->name,
			       event->hdr.pid, strerror(-err));
	else if (event->status == CP_ATTACH_ATTACHED)
		cp_tracer__log(tracer, CP_LOG_INFO, "%s: %u probes attached, %.3f ms after pid %u mapped it",
			       event->path, report.attached,
			       (event->probes_live_ns - event->hdr.time_ns) / 1e6, event->hdr.pid);
	err = event->status == CP_ATTACH_FAILED ? err : 0;
out_release:
	if (event->flags & CP_ATTACH_HELD)
		release(tracer, (pid_t)event->hdr.pid);
	return err;
}

int cp_tracer__maps_reading(struct cp_tracer *tracer, uint32_t pid)
{
	uint8_t one = 1;

	if (!tracer || !tracer->skel)
		return -EINVAL;
	return bpf_map__update_elem(tracer->skel->maps.maps_read, &pid, sizeof(pid), &one,
				    sizeof(one), BPF_ANY);
}

int cp_tracer__maps_read(struct cp_tracer *tracer, uint32_t pid)
{
	struct cp_file_key held;

	if (!tracer || !tracer->skel)
		return -EINVAL;
	if (!bpf_map__lookup_elem(tracer->skel->maps.held_pids, &pid, sizeof(pid), &held,
				  sizeof(held), 0))
		release(tracer, (pid_t)pid);
	return 0;
}

int cp_tracer__release_python_hold(struct cp_tracer *tracer, uint32_t pid)
{
	struct cp_file_key held;

	if (!tracer || !tracer->skel)
		return -EINVAL;
	if (bpf_map__lookup_elem(tracer->skel->maps.held_pids, &pid, sizeof(pid), &held,
				 sizeof(held), 0) || held.inode != CP_PY_HOLD_INODE)
		return 0;
	release(tracer, (pid_t)pid);
	return 1;
}

int cp_tracer__release_held(struct cp_tracer *tracer)
{
	uint32_t key, next, *cursor = NULL;
	int fd, released = 0;

	if (!tracer || !tracer->skel)
		return 0;
	fd = bpf_map__fd(tracer->skel->maps.held_pids);
	/* Continue first, then delete: deleting while walking would skip keys. */
	while (!bpf_map_get_next_key(fd, cursor, &next)) {
		key = next;
		cursor = &key;
		kill((pid_t)key, SIGCONT);
		released++;
	}
	while (!bpf_map_get_next_key(fd, NULL, &next))
		bpf_map_delete_elem(fd, &next);
	return released;
}

int cp_tracer__live_targets(const struct cp_tracer *tracer)
{
	uint32_t key, next, *cursor = NULL;
	int fd, live = 0;

	if (!tracer)
		return -EINVAL;
	fd = bpf_map__fd(tracer->skel->maps.cuprobe_targets);
	while (!bpf_map_get_next_key(fd, cursor, &next)) {
		key = next;
		cursor = &key;
		/* The BPF side removes a process at its exit; check it still exists all the same. */
		if (!kill((pid_t)key, 0) || errno == EPERM)
			live++;
	}
	return live;
}

size_t cp_tracer__files(struct cp_tracer *tracer, struct cp_traced_file *out, size_t max)
{
	size_t i, count;

	if (!tracer)
		return 0;
	pthread_mutex_lock(&tracer->lock);
	count = tracer->file_count;
	for (i = 0; out && i < count && i < max; i++)
		out[i] = tracer->files[i].info;
	pthread_mutex_unlock(&tracer->lock);
	return count;
}

/* ---- the guardian ------------------------------------------------------------ */

static void close_all_but(int keep_a, int keep_b)
{
	int low = keep_a < keep_b ? keep_a : keep_b, high = keep_a < keep_b ? keep_b : keep_a;

	if (low > 0)
		syscall(SYS_close_range, 0u, (unsigned int)low - 1, 0u);
	if (high > low + 1)
		syscall(SYS_close_range, (unsigned int)low + 1, (unsigned int)high - 1, 0u);
	syscall(SYS_close_range, (unsigned int)high + 1, ~0u, 0u);
}

/* The guardian's whole life: wait for the pipe to close, continue whoever is held, exit. */
static void __attribute__((noreturn)) guardian_main(int pipe_fd, int held_fd)
{
	uint32_t key, next, *cursor = NULL;
	sigset_t all;
	char byte;

	close_all_but(pipe_fd, held_fd);
	prctl(PR_SET_NAME, "cuprobe-guard");
	/* Ctrl-C and kills of the process group are for cuprobe, not for us. */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigprocmask(SIG_SETMASK, &all, NULL);
	while (read(pipe_fd, &byte, 1) < 0 && errno == EINTR)
		;
	while (!bpf_map_get_next_key(held_fd, cursor, &next)) {
		key = next;
		cursor = &key;
		kill((pid_t)key, SIGCONT);
	}
	_exit(0);
}

/*
 * The guardian is forked twice, so that it is not our child: a caller that
 * reaps every child it has (a subreaper following a command's tree) must
 * not wait for it, and it outlives us by design.
 */
int cp_tracer__start_guardian(struct cp_tracer *tracer)
{
	int pipe_fds[2], held_fd = bpf_map__fd(tracer->skel->maps.held_pids), status, err = 0;
	pid_t pid;

	if (pipe2(pipe_fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid == 0) {
		pid_t guardian = fork();

		if (guardian == 0)
			guardian_main(pipe_fds[0], held_fd);
		_exit(guardian < 0 ? 1 : 0);
	}
	if (pid < 0)
		err = -errno;
	else if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		err = -ECHILD;
	close(pipe_fds[0]);
	if (err) {
		close(pipe_fds[1]);
		return err;
	}
	tracer->guardian_fd = pipe_fds[1];
	return 0;
}

/* Our end closed: the guardian continues whoever is still held (nobody, normally) and exits. */
void cp_tracer__stop_guardian(struct cp_tracer *tracer)
{
	if (tracer->guardian_fd < 0)
		return;
	close(tracer->guardian_fd);
	tracer->guardian_fd = -1;
}
