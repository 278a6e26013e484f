// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter's processes: what each is (pid, comm, container, cgroup, pod,
 * the GPUs its device ordinals name, its kernels named), read once; its exit
 * (the agent's record, or /proc and the start time when the record was
 * lost); and, once kept --keep-exited seconds with its pid, its folding into
 * its cgroup's totals (pid=""), bounded by cp_fold_bound.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter.h"
#include "session.h"

/* ---- the pure parts (exporter.h; unit_exporter tests them) ------------------------ */

void cp_exporter__container_of(const char *cgroup, char *container, size_t container_len, char *pod,
			       size_t pod_len)
{
	const char *p, *at;
	size_t n;

	container[0] = pod[0] = '\0';
	/* docker-ID.scope, /docker/ID, cri-containerd-ID.scope, crio-ID.scope, /kubepods/.../ID. */
	for (p = cgroup; *p; p++) {
		for (n = 0; isxdigit((unsigned char)p[n]); n++)
			;
		if (n == 64 && (p == cgroup || !isxdigit((unsigned char)p[-1]))) {
			snprintf(container, container_len, "%.64s", p);
			break;
		}
		if (n)
			p += n - 1;
	}
	/* kubepods-...-pod<uid>.slice (uid's dashes written as underscores), /kubepods/.../pod<uid>/. */
	at = strstr(cgroup, "pod");
	while (at) {
		const char *uid = at + 3;

		for (n = 0; isxdigit((unsigned char)uid[n]) || uid[n] == '-' || uid[n] == '_'; n++)
			;
		if (n >= 32) {
			snprintf(pod, pod_len, "%.*s", (int)(n < pod_len ? n : pod_len - 1), uid);
			for (char *c = pod; *c; c++)
				if (*c == '_')
					*c = '-';
			break;
		}
		at = strstr(uid, "pod");
	}
}

/*
 * cgroup v2 (and the hybrid layout): the "0::" line. v1 only: the last line,
 * which is hierarchy 1 (name=systemd where systemd runs), the one whose path
 * says most; docker and Kubernetes name the container in every hierarchy.
 */
void cp_exporter__cgroup_of(const char *text, char *out, size_t len)
{
	const char *line = text;

	out[0] = '\0';
	while (line && *line) {
		const char *end = strchr(line, '\n'), *first = strchr(line, ':'), *path;

		if (!end)
			end = line + strlen(line);
		path = first && first < end ? memchr(first + 1, ':', (size_t)(end - first - 1)) : NULL;
		if (path) {
			snprintf(out, len, "%.*s", (int)(end - path - 1), path + 1);
			if (!strncmp(line, "0::", 3))
				return;
		}
		line = *end ? end + 1 : NULL;
	}
}

unsigned long long cp_exporter__start_time(const char *stat)
{
	/* "PID (COMM) S ...": COMM may hold spaces and parentheses; field 3 follows the last ')'. */
	const char *p = strrchr(stat, ')');
	unsigned long long value;
	char *end;
	int field;

	if (!p || p[1] != ' ')
		return 0;
	p++;
	for (field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	if (*p != ' ' || !isdigit((unsigned char)p[1]))
		return 0;
	value = strtoull(p + 1, &end, 10);
	return *end == ' ' || *end == '\n' || *end == '\0' ? value : 0;
}

bool cp_fold_bound__cgroup(struct cp_fold_bound *bound, const char *cgroup, size_t *at)
{
	size_t i;

	for (i = 0; i < bound->cgroup_count; i++)
		if (!strcmp(bound->cgroups[i].cgroup, cgroup)) {
			*at = i;
			return true;
		}
	if (bound->cgroup_count >= bound->max_cgroups)
		return false;
	if (CP_ARRAY_RESERVE(bound->cgroups, bound->cgroup_capacity, bound->cgroup_count + 1, 16))
		return false;
	bound->cgroups[i] = (struct cp_fold_cgroup){ .cgroup = strdup(cgroup) };
	if (!bound->cgroups[i].cgroup)
		return false;
	bound->cgroup_count++;
	*at = i;
	return true;
}

const char *cp_fold_bound__kernel(struct cp_fold_bound *bound, size_t at, const char *kernel)
{
	struct cp_fold_cgroup *c = &bound->cgroups[at];
	size_t i;

	if (!strcmp(kernel, "other"))
		return "other";
	for (i = 0; i < c->kernel_count; i++)
		if (!strcmp(c->kernels[i], kernel))
			return c->kernels[i];
	if (c->kernel_count >= bound->max_kernels)
		return "other";
	if (CP_ARRAY_RESERVE(c->kernels, c->kernel_capacity, c->kernel_count + 1, 16))
		return "other";
	c->kernels[i] = strdup(kernel);
	if (!c->kernels[i])
		return "other";
	return c->kernels[c->kernel_count++];
}

void cp_fold_bound__release(struct cp_fold_bound *bound)
{
	size_t i, k;

	for (i = 0; i < bound->cgroup_count; i++) {
		for (k = 0; k < bound->cgroups[i].kernel_count; k++)
			free(bound->cgroups[i].kernels[k]);
		free(bound->cgroups[i].kernels);
		free(bound->cgroups[i].cgroup);
	}
	free(bound->cgroups);
	bound->cgroups = NULL;
	bound->cgroup_count = 0;
}

#ifndef CUPROBE_NO_EXPORTER

/* ---- what a process is: labels read once ---------------------------------------- */

/* The whole of a small /proc file, NUL-terminated; false when unreadable. */
static bool read_small(const char *path, char *out, size_t len)
{
	FILE *file = fopen(path, "re");
	size_t n;

	if (!file)
		return false;
	n = fread(out, 1, len - 1, file);
	fclose(file);
	out[n] = '\0';
	return n > 0;
}

/* The start time of a running pid (0: gone): a pid used again has another. */
unsigned long long process__start_time(uint32_t pid)
{
	char path[64], stat[1024];

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	return read_small(path, stat, sizeof(stat)) ? cp_exporter__start_time(stat) : 0;
}

static void read_process(struct process *p)
{
	char path[64], text[4096], environ_buf[65536];
	FILE *file;
	size_t n;

	p->start_time = process__start_time(p->pid);
	if (cp_proc__comm(p->pid, 0, p->comm, sizeof(p->comm)))
		snprintf(p->comm, sizeof(p->comm), "?");
	snprintf(path, sizeof(path), "/proc/%u/cgroup", p->pid);
	if (read_small(path, text, sizeof(text)))
		cp_exporter__cgroup_of(text, p->cgroup, sizeof(p->cgroup));
	cp_exporter__container_of(p->cgroup, p->container, sizeof(p->container), p->pod, sizeof(p->pod));
	/* Device ordinals are the process's own: CUDA_VISIBLE_DEVICES maps them. */
	snprintf(path, sizeof(path), "/proc/%u/environ", p->pid);
	file = fopen(path, "re");
	n = file ? fread(environ_buf, 1, sizeof(environ_buf) - 1, file) : 0;
	if (file)
		fclose(file);
	environ_buf[n] = '\0';
	for (size_t at = 0; at < n; at += strlen(environ_buf + at) + 1)
		if (!strncmp(environ_buf + at, "CUDA_VISIBLE_DEVICES=", 21)) {
			free(p->visible_devices);
			p->visible_devices = strdup(environ_buf + at + 21);
		}
}

/*
 * The machine's GPUs in the driver's (PCI bus) order, nvidia-smi's: the UUID
 * of each, from /proc/driver/nvidia/gpus/BUS/information.
 */
static int by_bus(const void *a, const void *b)
{
	return strcmp(((const struct gpu_info *)a)->bus, ((const struct gpu_info *)b)->bus);
}

void gpus__read(struct exporter *x)
{
	DIR *dir = opendir("/proc/driver/nvidia/gpus");
	struct dirent *entry;

	x->gpu_count = 0;
	while (dir && (entry = readdir(dir)) && x->gpu_count < MAX_GPUS) {
		struct gpu_info *gpu = &x->gpus[x->gpu_count];
		char path[PATH_MAX], line[256];
		FILE *file;

		if (entry->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/driver/nvidia/gpus/%s/information", entry->d_name);
		file = fopen(path, "re");
		if (!file)
			continue;
		gpu->uuid[0] = '\0';
		snprintf(gpu->bus, sizeof(gpu->bus), "%s", entry->d_name);
		while (fgets(line, sizeof(line), file))
			if (!strncmp(line, "GPU UUID:", 9)) {
				char *uuid = line + 9;

				while (*uuid == ' ' || *uuid == '\t')
					uuid++;
				uuid[strcspn(uuid, " \t\n")] = '\0';
				snprintf(gpu->uuid, sizeof(gpu->uuid), "%s", uuid);
			}
		fclose(file);
		x->gpu_count++;
	}
	if (dir)
		closedir(dir);
	qsort(x->gpus, x->gpu_count, sizeof(x->gpus[0]), by_bus);
}

/* The UUID of a process's device ordinal: through CUDA_VISIBLE_DEVICES when set. */
const char *gpus__uuid(const struct exporter *x, const struct process *p, int32_t device)
{
	char list[512], *item, *save = NULL;
	int32_t index = 0;
	size_t i;

	if (device < 0)
		return "";
	if (!p->visible_devices)
		return (size_t)device < x->gpu_count ? x->gpus[device].uuid : "";
	snprintf(list, sizeof(list), "%s", p->visible_devices);
	for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save), index++) {
		if (index != device)
			continue;
		if (!strncmp(item, "GPU-", 4)) {
			/* A UUID, or its unique prefix. */
			for (i = 0; i < x->gpu_count; i++)
				if (!strncmp(x->gpus[i].uuid, item, strlen(item)))
					return x->gpus[i].uuid;
			return "";
		}
		i = strtoul(item, NULL, 10);
		return i < x->gpu_count ? x->gpus[i].uuid : "";
	}
	return "";
}

/* Its pid belongs to another process now (its exit record was lost). */
static bool start_time_changed(const struct process *p)
{
	unsigned long long now = process__start_time(p->pid);

	return p->start_time && now && now != p->start_time;
}

struct process *process__find(struct exporter *x, uint32_t pid, bool exited)
{
	struct process *p;

	for (p = x->processes; p; p = p->next)
		if (p->pid == pid && p->exited == exited)
			return p;
	return NULL;
}

struct process *process__live(struct exporter *x, uint32_t pid)
{
	struct process *p = process__find(x, pid, false);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	families__init_xids(&p->xids);
	read_process(p);
	p->next = x->processes;
	x->processes = p;
	return p;
}

static struct named_kernel *named(struct process *p, int32_t device, uint64_t handle)
{
	size_t i;

	for (i = 0; i < p->kernel_count; i++)
		if (p->kernels[i].handle == handle && p->kernels[i].device == device)
			return &p->kernels[i];
	return NULL;
}

static int by_launches(const void *a, const void *b)
{
	const struct cp_kernel_row *x = *(const struct cp_kernel_row *const *)a;
	const struct cp_kernel_row *y = *(const struct cp_kernel_row *const *)b;

	if (x->launches != y->launches)
		return x->launches > y->launches ? -1 : 1;
	return x->handle < y->handle ? -1 : x->handle > y->handle;
}

/*
 * Which kernels of p get a series of their own (--max-kernels N), from its
 * rows at a refresh (cumulative launch counts). Its counters never go
 * backwards, so a kernel once named stays named and one once counted in
 * kernel="other" stays there (naming it later would take its launches out
 * of "other"). Hence the rule: the kernels a refresh sees for the first time
 * take the free places, the most launched first; once N are named, every
 * later kernel is "other" for the process's life. The N named are its N most
 * launched when they had all appeared by the refresh that filled the last
 * place, and the sum over its kernels is always its total.
 */
void process__name_kernels(struct exporter *x, struct process *p, const struct cp_kernel_row *rows,
			   size_t count)
{
	const struct cp_kernel_row **fresh;
	size_t i, n = 0, room;

	if (p->kernel_count >= x->max_kernels || !count)
		return;
	fresh = calloc(count, sizeof(*fresh));
	if (!fresh)
		return;
	for (i = 0; i < count; i++)
		if (!named(p, rows[i].device, rows[i].handle))
			fresh[n++] = &rows[i];
	room = x->max_kernels - p->kernel_count;
	if (n > room)
		qsort(fresh, n, sizeof(*fresh), by_launches);
	else
		room = n;
	if (room && CP_ARRAY_RESERVE(p->kernels, p->kernel_capacity, p->kernel_count + room, 16))
		room = 0; /* out of memory: named at the next refresh */
	for (i = 0; i < room; i++) {
		const struct cp_kernel_row *k = fresh[i];
		const char *mangled;
		char buf[64];
		const char *label = cp_format__kernel_label(x->session->names, p->pid, k->handle,
							    k->graph, &mangled, buf, sizeof(buf));
		char *copy = strdup(label);

		if (!copy)
			break; /* out of memory: named at the next refresh */
		p->kernels[p->kernel_count++] = (struct named_kernel){ .device = k->device,
								       .handle = k->handle,
								       .name = copy };
	}
	free(fresh);
}

/* The kernel label of a launch row (name_kernels has seen it). */
const char *process__kernel_label(struct process *p, int32_t device, uint64_t handle)
{
	struct named_kernel *k = named(p, device, handle);

	return k ? k->name : "other";
}

static void free_process(struct process *p)
{
	size_t i;

	for (i = 0; i < p->kernel_count; i++)
		free(p->kernels[i].name);
	free(p->kernels);
	for (i = 0; p->final_kernel_names && i < p->final.kernel_count; i++)
		free(p->final_kernel_names[i]);
	free(p->final_kernel_names);
	cp_stats_snapshot__release(&p->final);
	cp_metric_family__release(&p->xids);
	free(p->visible_devices);
	free(p);
}

void process__label_values(const struct process *p, bool folded, char *pid, const char **values)
{
	snprintf(pid, 16, "%u", p->pid);
	values[0] = folded ? "" : pid;
	values[1] = folded ? "" : p->comm;
	values[2] = p->container;
	values[3] = p->cgroup;
	values[4] = p->pod;
}

/* ---- a process's rows ---------------------------------------------------------------- */

/*
 * Rows of one process. Every row type starts with its pid, and the rows of a
 * snapshot are sorted by it once (rows__sort), so a process's rows are one
 * range found by binary search: a refresh costs rows log rows, not
 * processes x rows.
 */
_Static_assert(offsetof(struct cp_kernel_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_api_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_mem_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_device_mem_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_copy_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_nccl_row, pid) == 0, "rows start with their pid");

static int by_pid(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void rows__sort(struct cp_stats_snapshot *snap)
{
	qsort(snap->kernels, snap->kernel_count, sizeof(*snap->kernels), by_pid);
	qsort(snap->apis, snap->api_count, sizeof(*snap->apis), by_pid);
	qsort(snap->mems, snap->mem_count, sizeof(*snap->mems), by_pid);
	qsort(snap->device_mems, snap->device_mem_count, sizeof(*snap->device_mems), by_pid);
	qsort(snap->copies, snap->copy_count, sizeof(*snap->copies), by_pid);
	qsort(snap->nccls, snap->nccl_count, sizeof(*snap->nccls), by_pid);
}

/* [*begin, *end): the rows of pid in a sorted array of count rows of size bytes. */
void rows__of(const void *rows, size_t count, size_t size, uint32_t pid, size_t *begin,
	      size_t *end)
{
	size_t low = 0, high = count;

	while (low < high) {
		size_t mid = low + (high - low) / 2;

		if (*(const uint32_t *)((const char *)rows + mid * size) < pid)
			low = mid + 1;
		else
			high = mid;
	}
	*begin = *end = low;
	while (*end < count && *(const uint32_t *)((const char *)rows + *end * size) == pid)
		(*end)++;
}

/* A copy of pid's rows range into *out (one process's final rows). */
static int copy_range(const void *rows, size_t count, size_t size, uint32_t pid, void **out,
		      size_t *out_count)
{
	size_t begin, end;

	rows__of(rows, count, size, pid, &begin, &end);
	*out = calloc(end > begin ? end - begin : 1, size);
	if (!*out)
		return -ENOMEM;
	if (end > begin)
		memcpy(*out, (const char *)rows + begin * size, (end - begin) * size);
	*out_count = end - begin;
	return 0;
}

static int copy_rows(const struct cp_stats_snapshot *snap, uint32_t pid, struct cp_stats_snapshot *out)
{
	int err = 0;

	memset(out, 0, sizeof(*out));
	/* Each table of the snapshot: its rows of pid, in order, until one fails. */
#define COPY_PID_ROWS(rows, count)                                                        \
	do {                                                                              \
		if (!err)                                                                 \
			err = copy_range(snap->rows, snap->count, sizeof(*snap->rows), pid,     \
					 (void **)&out->rows, &out->count);                     \
	} while (0)
	COPY_PID_ROWS(kernels, kernel_count);
	COPY_PID_ROWS(apis, api_count);
	COPY_PID_ROWS(mems, mem_count);
	COPY_PID_ROWS(device_mems, device_mem_count);
	COPY_PID_ROWS(copies, copy_count);
	COPY_PID_ROWS(nccls, nccl_count);
#undef COPY_PID_ROWS
	if (err)
		cp_stats_snapshot__release(out);
	return err;
}

/*
 * The counter rows of one process (live, or exited with its final rows) into
 * families; folded = a container's totals. kernel_names: the exited
 * process's resolved labels (by row), NULL while it lives.

 */
static void fold(struct exporter *x, struct process *p)
{
	struct process as = *p; /* its labels, as folded: the struct's pointers only read */
	struct process_rows rows = { .x = x, .p = &as, .snap = &p->final, .folded = true };
	const char *values[CP_METRIC_LABELS_MAX];
	const char **names = NULL;
	bool own, kernels_over = false;
	size_t at = 0, i;

	own = cp_fold_bound__cgroup(&x->bound, p->cgroup, &at);
	if (!own)
		as.container[0] = as.cgroup[0] = as.pod[0] = '\0';
	if (p->final_kernel_names) {
		names = calloc(p->final.kernel_count + 1, sizeof(*names));
		for (i = 0; names && i < p->final.kernel_count; i++) {
			const char *name = p->final_kernel_names[i];

			names[i] = own ? cp_fold_bound__kernel(&x->bound, at, name) : "other";
			if (strcmp(names[i], name))
				kernels_over = true;
		}
	}
	/* Its final rows and its Xids, labelled as its cgroup's (its kernels as the bound says). */
	rows.kernel_names = (char **)names;
	families__fill_process(x->folded, &rows);
	free(names);
	if (!own) {
		values[0] = "containers";
		family__add(&x->fold_overflow, values, 1);
	} else if (kernels_over) {
		values[0] = "kernels";
		family__add(&x->fold_overflow, values, 1);
	}
}

static void unlink_process(struct exporter *x, struct process *gone)
{
	struct process **at;

	for (at = &x->processes; *at; at = &(*at)->next)
		if (*at == gone) {
			*at = gone->next;
			return;
		}
}

/*
 * p has exited and final holds its rows (sorted by pid, all its own): its
 * kernel labels are resolved, it is kept with its pid from now on. The
 * caller removes its BPF rows and its names.
 */
static void mark_exited(struct exporter *x, struct process *p, const struct cp_stats_snapshot *final,
			uint64_t now)
{
	struct process *old = process__find(x, p->pid, true);
	size_t i;

	if (old) {
		/* The same pid exited twice within the time kept: the older goes first. */
		unlink_process(x, old);
		fold(x, old);
		free_process(old);
	}
	p->final = *final;
	process__name_kernels(x, p, p->final.kernels, p->final.kernel_count);
	p->final_kernel_names = calloc(p->final.kernel_count + 1, sizeof(char *));
	for (i = 0; p->final_kernel_names && i < p->final.kernel_count; i++) {
		const struct cp_kernel_row *k = &p->final.kernels[i];

		p->final_kernel_names[i] = strdup(process__kernel_label(p, k->device, k->handle));
		if (!p->final_kernel_names[i])
			p->final_kernel_names[i] = strdup("other");
	}
	p->exited = true;
	p->exit_pending = false;
	p->exited_ns = now;
}

/*
 * At once, for one process (its pid is starting again before the refresh
 * that would have retired it): its own rows read, then removed.
 */
static void retire_now(struct exporter *x, struct process *p)
{
	struct cp_stats_snapshot final;

	if (!cp_tracer__snapshot(x->session->tracer, p->pid, &final)) {
		rows__sort(&final);
		mark_exited(x, p, &final, exporter__now_ns());
	} else {
		p->exit_pending = false;
		p->exited = true; /* its counts are lost: folded as nothing */
		p->exited_ns = exporter__now_ns();
	}
	cp_record_path__forget(&x->path, p->pid);
}

/*
 * The processes whose exit came (or whose /proc entry has been gone for
 * LOST_EXIT_WAIT_NS: an exit record lost to a full ring; or whose pid has
 * another start time: lost, and the pid used again) take their final rows
 * from snap; their BPF rows then go, every map walked once. A pid used again
 * within the interval gives its first rows to its predecessor: BPF rows are
 * keyed by pid alone.
 */
void processes__retire_exited(struct exporter *x, const struct cp_stats_snapshot *snap,
			      uint64_t now)
{
	uint32_t *pids = NULL;
	size_t count = 0, capacity = 0;
	struct process *p;

	for (p = x->processes; p; p = p->next) {
		struct cp_stats_snapshot final;

		if (p->exited)
			continue;
		if (!p->exit_pending) {
			unsigned long long start = process__start_time(p->pid);

			if (start && (!p->start_time || start == p->start_time)) {
				p->gone_since_ns = 0;
				continue;
			}
			if (start) /* another process has the pid: no wait */
				p->gone_since_ns = now - LOST_EXIT_WAIT_NS;
			else if (!p->gone_since_ns)
				p->gone_since_ns = now;
			if (now - p->gone_since_ns < LOST_EXIT_WAIT_NS)
				continue;
		}
		if (CP_ARRAY_RESERVE(pids, capacity, count + 1, 64))
			break; /* the rest wait for the next refresh */
		if (copy_rows(snap, p->pid, &final))
			break;
		pids[count++] = p->pid;
		mark_exited(x, p, &final, now);
	}
	if (count && cp_record_path__forget_pids(&x->path, pids, count))
		cp_say("warning: the rows of %zu exited processes could not be removed (out of memory)",
		       count);
	free(pids);
}

/* ---- the agent's records and the refresh -------------------------------------------- */

void processes__on_record(struct exporter *x, const struct cp_proc_event *proc, uint32_t pid)
{
	struct process *p = process__find(x, pid, false);

	if (proc->kind == CP_PROC_CUDA_INIT) {
		/*
		 * A pid used again before its predecessor's exit was handled, or
		 * with its exit record lost (another start time).
		 */
		if (p && (p->exit_pending || start_time_changed(p)))
			retire_now(x, p);
		p = process__live(x, pid);
		/* Gone before its record was read (a short run, a loaded machine): the name BPF read. */
		if (p && !strcmp(p->comm, "?") && proc->comm[0])
			snprintf(p->comm, sizeof(p->comm), "%s", proc->comm);
	} else if (proc->kind == CP_PROC_EXIT && p) {
		p->exit_pending = true; /* the next refresh reads its final rows */
	}
}

/*
 * Counted with the process, folded with it into its cgroup's totals; a
 * process gone already (or none named) goes straight to the unattributed
 * row, so no per-pid series outlives its process.
 */
struct process *processes__of_xid(struct exporter *x, uint32_t pid)
{
	struct process *p = process__find(x, pid, false);

	if (!p)
		p = process__find(x, pid, true);
	if (!p && pid && process__start_time(pid))
		p = process__live(x, pid);
	return p;
}

void processes__fold_expired(struct exporter *x, uint64_t now)
{
	struct process *p, *next;

	for (p = x->processes; p; p = next) {
		next = p->next;
		/* exited_ns may be after now: retire_now runs on the agent thread. */
		if (p->exited && now >= p->exited_ns && now - p->exited_ns >= x->keep_exited_ns) {
			unlink_process(x, p);
			fold(x, p);
			free_process(p);
		}
	}
}

void processes__free(struct exporter *x)
{
	while (x->processes) {
		struct process *p = x->processes;

		x->processes = p->next;
		free_process(p);
	}
}

#endif /* CUPROBE_NO_EXPORTER */
