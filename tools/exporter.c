// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe exporter`: the node agent. Every CUDA process on the host counted
 * in BPF maps; every interval the main thread reads the maps, names what it
 * reads (processes, containers, GPUs, kernels) and builds the three
 * expositions; libmicrohttpd's own thread serves the latest ones on
 * /metrics. A scrape never touches a BPF map or waits on the agent.
 *
 * Counters never go backwards: when a process exits, the agent marks it;
 * the next refresh takes its final rows from the snapshot it reads anyway,
 * keeps them (labelled with its pid) for --keep-exited seconds, then folds
 * them into its cgroup's totals (pid=""), which are bounded (fold); the BPF
 * rows of every exit of the interval go in one walk of each map. A pid
 * reused meanwhile (its exit seen, or its start time changed) retires the
 * old process at once.
 *
 * The agent thread and the main thread share one lock. The main thread holds
 * it only to read the maps and gather the series; the expositions are built
 * after it is released, so the agent (exits, names) never waits on a build.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef CUPROBE_NO_EXPORTER
#include <microhttpd.h>
#endif

#include "cli_options.h"
#include "cuprobe_internal.h"
#include "exporter.h"
#include "exposition.h"
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
	struct cp_fold_cgroup *grown;
	size_t i;

	for (i = 0; i < bound->cgroup_count; i++)
		if (!strcmp(bound->cgroups[i].cgroup, cgroup)) {
			*at = i;
			return true;
		}
	if (bound->cgroup_count >= bound->max_cgroups)
		return false;
	grown = realloc(bound->cgroups, (bound->cgroup_count + 1) * sizeof(*grown));
	if (!grown)
		return false;
	bound->cgroups = grown;
	grown[i] = (struct cp_fold_cgroup){ .cgroup = strdup(cgroup) };
	if (!grown[i].cgroup)
		return false;
	bound->cgroup_count++;
	*at = i;
	return true;
}

const char *cp_fold_bound__kernel(struct cp_fold_bound *bound, size_t at, const char *kernel)
{
	struct cp_fold_cgroup *c = &bound->cgroups[at];
	char **grown;
	size_t i;

	if (!strcmp(kernel, "other"))
		return "other";
	for (i = 0; i < c->kernel_count; i++)
		if (!strcmp(c->kernels[i], kernel))
			return c->kernels[i];
	if (c->kernel_count >= bound->max_kernels)
		return "other";
	grown = realloc(c->kernels, (c->kernel_count + 1) * sizeof(*grown));
	if (!grown)
		return "other";
	c->kernels = grown;
	grown[i] = strdup(kernel);
	if (!grown[i])
		return "other";
	return grown[c->kernel_count++];
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

#ifdef CUPROBE_NO_EXPORTER
int cp_cmd_exporter(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	cp_say("this cuprobe was built static (CUPROBE_STATIC), without the exporter's HTTP server: use a regular build");
	return CP_EXIT_SETUP;
}
#else

#define DEFAULT_LISTEN "127.0.0.1:9466"
#define DEFAULT_INTERVAL_MS 5000
#define DEFAULT_MAX_KERNELS 50
#define DEFAULT_KEEP_EXITED_MS (300 * 1000ull)
#define LOST_EXIT_WAIT_NS (10 * 1000000000ull)
#define MAX_GPUS 64
/* Cgroups whose exited processes keep their own folded series (the rest: one overflow row). */
#define FOLDED_CGROUPS_MAX 500
#define HTTP_CONNECTIONS_MAX 64
#define HTTP_TIMEOUT_S 10
#define HTTP_CONNECTION_MEMORY 16384

/* ---- what a process is: labels read once ---------------------------------------- */

struct families;

struct gpu_info {
	char uuid[256];
	char bus[256];
};

struct named_kernel {
	int32_t device;
	uint64_t handle;
	char *name;
};

struct process {
	uint32_t pid;
	unsigned long long start_time; /* /proc/PID/stat's: a pid used again has another */
	uint64_t gone_since_ns;     /* /proc/PID missing, its exit record not read yet */
	bool exit_pending;          /* its exit record came: retired at the next refresh */
	bool exited;
	uint64_t exited_ns;
	char comm[17];
	char cgroup[256];
	char container[80];
	char pod[80];
	char *visible_devices;      /* CUDA_VISIBLE_DEVICES of its environment, or NULL */
	/* The kernels named in its series (name_kernels; the rest go to kernel="other"). */
	struct named_kernel *kernels;
	size_t kernel_count;
	struct cp_metric_family xids; /* its Xid errors, labelled as its other series */
	/* Once exited: its final rows, names resolved. */
	struct cp_stats_snapshot final;
	char **final_kernel_names;
	struct process *next;
};

struct exporter {
	struct cp_session *session;
	bool latency;
	size_t max_kernels;
	uint64_t keep_exited_ns;    /* --keep-exited: how long an exited process keeps its pid */
	pthread_mutex_t lock;       /* the agent (exits, Xids, attaches) and the main thread */
	struct process *processes;
	struct gpu_info gpus[MAX_GPUS];
	size_t gpu_count;
	/* Folded totals of exited processes (pid=""), and counters of events. */
	struct cp_metric_family folded_launches, folded_calls, folded_errors, folded_latency,
		folded_copies, folded_copy_bytes, folded_allocations, folded_frees, folded_xids;
	struct cp_fold_bound bound;  /* which cgroups and kernels keep folded series of their own */
	struct cp_metric_family fold_overflow, attaches, attach_delay;
	/*
	 * The series of the latest refresh, and the expositions made from them:
	 * each format is built at its first scrape after a refresh (a scraper asks
	 * for one format; building all three every interval was most of the work).
	 */
	pthread_mutex_t served_lock;
	struct families *series;
	uint64_t generation;        /* refreshes so far */
	struct cp_text served[3];
	uint64_t served_generation[3];
	struct MHD_Daemon *http;
	uint64_t scrapes, refused;
};

static const char *const process_labels[] = { "pid", "comm", "container", "cgroup", "pod" };
static const char *const device_labels[] = { "pid", "comm", "container", "cgroup", "pod", "gpu",
					     "gpu_uuid" };
static const char *const kernel_labels[] = { "pid", "comm", "container", "cgroup", "pod", "gpu",
					     "gpu_uuid", "kernel" };
static const char *const api_labels[] = { "pid", "comm", "container", "cgroup", "pod", "api" };
static const char *const copy_labels[] = { "pid", "comm", "container", "cgroup", "pod", "gpu",
					   "gpu_uuid", "direction" };
static const char *const xid_labels[] = { "pid", "comm", "container", "cgroup", "pod", "pci", "xid" };
static const char *const attach_labels[] = { "status" };
static const char *const map_labels[] = { "map" };
static const char *const limit_labels[] = { "limit" };
#define CP_STR(x) #x
#define CP_XSTR(x) CP_STR(x)
#define FOLDED_OVERFLOW_HELP "Exited processes folded into the overflow rows: limit=\"containers\" (cgroups beyond the first " CP_XSTR(FOLDED_CGROUPS_MAX) " fold into container=\"\", cgroup=\"\", pod=\"\", kernel=\"other\"), limit=\"kernels\" (kernels beyond --max-kernels per cgroup into kernel=\"other\")"
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The first line of a /proc file, newline cut. */
static bool read_line(const char *path, char *out, size_t len)
{
	FILE *file = fopen(path, "re");
	bool ok;

	if (!file)
		return false;
	ok = fgets(out, (int)len, file) != NULL;
	fclose(file);
	if (ok)
		out[strcspn(out, "\n")] = '\0';
	return ok;
}

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
static unsigned long long pid_start_time(uint32_t pid)
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

	p->start_time = pid_start_time(p->pid);
	snprintf(path, sizeof(path), "/proc/%u/comm", p->pid);
	if (!read_line(path, p->comm, sizeof(p->comm)))
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

static void read_gpus(struct exporter *x)
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
static const char *gpu_uuid(const struct exporter *x, const struct process *p, int32_t device)
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
	unsigned long long now = pid_start_time(p->pid);

	return p->start_time && now && now != p->start_time;
}

static struct process *find_process(struct exporter *x, uint32_t pid, bool exited)
{
	struct process *p;

	for (p = x->processes; p; p = p->next)
		if (p->pid == pid && p->exited == exited)
			return p;
	return NULL;
}

static struct process *live_process(struct exporter *x, uint32_t pid)
{
	struct process *p = find_process(x, pid, false);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->xids.name = p->xids.help = "";
	p->xids.type = CP_METRIC_COUNTER;
	p->xids.label_names = xid_labels;
	p->xids.label_count = COUNT(xid_labels);
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
static void name_kernels(struct exporter *x, struct process *p, const struct cp_kernel_row *rows,
			 size_t count)
{
	const struct cp_kernel_row **fresh;
	struct named_kernel *grown;
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
	grown = room ? realloc(p->kernels, (p->kernel_count + room) * sizeof(*grown)) : NULL;
	if (grown) {
		p->kernels = grown;
		for (i = 0; i < room; i++) {
			const struct cp_kernel_row *k = fresh[i];
			const char *mangled;
			char buf[64];
			const char *label = cp_format__kernel_label(x->session->names, p->pid, k->handle,
								    k->graph, &mangled, buf, sizeof(buf));
			char *copy = strdup(label);

			if (!copy)
				break; /* out of memory: named at the next refresh */
			grown[p->kernel_count++] = (struct named_kernel){ .device = k->device,
									  .handle = k->handle,
									  .name = copy };
		}
	}
	free(fresh);
}

/* The kernel label of a launch row (name_kernels has seen it). */
static const char *kernel_label(struct process *p, int32_t device, uint64_t handle)
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

/* ---- series from rows --------------------------------------------------------------- */

struct families {
	struct cp_metric_family launches, calls, errors, latency, copies, copy_bytes, allocations,
		frees, live_bytes, peak_bytes, process_live_bytes, process_peak_bytes, xids,
		attaches, attach_delay, lost, map_full, processes, scrapes, folded_overflow;
};

/* Label values of a process (pid="" for a container's folded totals). */
static void process_values(const struct process *p, bool folded, char *pid, const char **values)
{
	snprintf(pid, 16, "%u", p->pid);
	values[0] = folded ? "" : pid;
	values[1] = folded ? "" : p->comm;
	values[2] = p->container;
	values[3] = p->cgroup;
	values[4] = p->pod;
}

static void add_value(struct cp_metric_family *f, const char *const *values, double value)
{
	struct cp_metric_sample *s = cp_metric_family__find(f, values);

	if (s)
		s->value += value;
}

static void add_histogram(struct cp_metric_family *f, const char *const *values,
			  const struct cp_api_row *row)
{
	struct cp_metric_sample *s = cp_metric_family__find(f, values);
	int b;

	if (!s)
		return;
	for (b = 0; b < CP_HIST_BUCKETS; b++)
		s->buckets[b] += row->histogram[b];
	s->count += row->timed;
	s->sum += row->total_ns / 1e9;
}

/*
 * Rows of one process. Every row type starts with its pid, and the rows of a
 * snapshot are sorted by it once (sort_rows), so a process's rows are one
 * range found by binary search: a refresh costs rows log rows, not
 * processes x rows.
 */
_Static_assert(offsetof(struct cp_kernel_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_api_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_mem_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_device_mem_row, pid) == 0, "rows start with their pid");
_Static_assert(offsetof(struct cp_copy_row, pid) == 0, "rows start with their pid");

static int by_pid(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void sort_rows(struct cp_stats_snapshot *snap)
{
	qsort(snap->kernels, snap->kernel_count, sizeof(*snap->kernels), by_pid);
	qsort(snap->apis, snap->api_count, sizeof(*snap->apis), by_pid);
	qsort(snap->mems, snap->mem_count, sizeof(*snap->mems), by_pid);
	qsort(snap->device_mems, snap->device_mem_count, sizeof(*snap->device_mems), by_pid);
	qsort(snap->copies, snap->copy_count, sizeof(*snap->copies), by_pid);
}

/* [*begin, *end): the rows of pid in a sorted array of count rows of size bytes. */
static void rows_of(const void *rows, size_t count, size_t size, uint32_t pid, size_t *begin,
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

#define ROWS_OF(array, count, pid, begin, end) \
	rows_of((array), (count), sizeof(*(array)), (pid), (begin), (end))

/* A copy of pid's rows range into *out (one process's final rows). */
static int copy_range(const void *rows, size_t count, size_t size, uint32_t pid, void **out,
		      size_t *out_count)
{
	size_t begin, end;

	rows_of(rows, count, size, pid, &begin, &end);
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
	int err;

	memset(out, 0, sizeof(*out));
	err = copy_range(snap->kernels, snap->kernel_count, sizeof(*snap->kernels), pid,
			 (void **)&out->kernels, &out->kernel_count);
	if (!err)
		err = copy_range(snap->apis, snap->api_count, sizeof(*snap->apis), pid,
				 (void **)&out->apis, &out->api_count);
	if (!err)
		err = copy_range(snap->mems, snap->mem_count, sizeof(*snap->mems), pid,
				 (void **)&out->mems, &out->mem_count);
	if (!err)
		err = copy_range(snap->device_mems, snap->device_mem_count, sizeof(*snap->device_mems),
				 pid, (void **)&out->device_mems, &out->device_mem_count);
	if (!err)
		err = copy_range(snap->copies, snap->copy_count, sizeof(*snap->copies), pid,
				 (void **)&out->copies, &out->copy_count);
	if (err)
		cp_stats_snapshot__release(out);
	return err;
}

/*
 * The counter rows of one process (live, or exited with its final rows) into
 * families; folded = a container's totals. kernel_names: the exited
 * process's resolved labels (by row), NULL while it lives.
 */
static void add_counters(struct exporter *x, struct process *p, const struct cp_stats_snapshot *snap,
			 char **kernel_names, bool folded, struct cp_metric_family *launches,
			 struct cp_metric_family *calls, struct cp_metric_family *errors,
			 struct cp_metric_family *latency, struct cp_metric_family *copies,
			 struct cp_metric_family *copy_bytes, struct cp_metric_family *allocations,
			 struct cp_metric_family *frees)
{
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], gpu[16];
	size_t i, end;

	process_values(p, folded, pid, values);
	ROWS_OF(snap->kernels, snap->kernel_count, p->pid, &i, &end);
	if (!kernel_names && folded)
		i = end; /* its names could not be kept (out of memory): its launches are lost */
	else if (!kernel_names)
		name_kernels(x, p, snap->kernels + i, end - i);
	for (; i < end; i++) {
		const struct cp_kernel_row *k = &snap->kernels[i];

		snprintf(gpu, sizeof(gpu), "%d", k->device);
		values[5] = k->device >= 0 ? gpu : "";
		values[6] = gpu_uuid(x, p, k->device);
		values[7] = kernel_names ? kernel_names[i] :
			    kernel_label(p, k->device, k->handle);
		add_value(launches, values, (double)k->launches);
	}
	for (ROWS_OF(snap->apis, snap->api_count, p->pid, &i, &end); i < end; i++) {
		const struct cp_api_row *a = &snap->apis[i];

		values[5] = cp_api__name(a->api);
		add_value(calls, values, (double)a->calls);
		if (x->latency) {
			add_value(errors, values, (double)a->errors);
			add_histogram(latency, values, a);
		}
	}
	for (ROWS_OF(snap->copies, snap->copy_count, p->pid, &i, &end); i < end; i++) {
		const struct cp_copy_row *c = &snap->copies[i];

		snprintf(gpu, sizeof(gpu), "%d", c->device);
		values[5] = c->device >= 0 ? gpu : "";
		values[6] = gpu_uuid(x, p, c->device);
		values[7] = cp_copy_dir__name(c->direction);
		add_value(copies, values, (double)c->copies);
		add_value(copy_bytes, values, (double)c->bytes);
	}
	for (ROWS_OF(snap->device_mems, snap->device_mem_count, p->pid, &i, &end); i < end; i++) {
		const struct cp_device_mem_row *m = &snap->device_mems[i];

		snprintf(gpu, sizeof(gpu), "%d", m->device);
		values[5] = m->device >= 0 ? gpu : "";
		values[6] = gpu_uuid(x, p, m->device);
		add_value(allocations, values, (double)m->allocations);
		add_value(frees, values, (double)m->frees);
	}
}

/*
 * An exited process's final rows and Xids go into its cgroup's totals; then
 * it is gone. The totals are bounded (x->bound): a cgroup beyond
 * FOLDED_CGROUPS_MAX folds into the row of container, cgroup and pod "",
 * a kernel beyond --max-kernels within its cgroup into kernel="other"; each
 * process that met a bound is counted in cuprobe_folded_overflow.
 */
static void fold(struct exporter *x, struct process *p)
{
	struct process as = *p; /* its labels, as folded: the struct's pointers only read */
	const char *values[CP_METRIC_LABELS_MAX];
	const char **names = NULL;
	bool own, kernels_over = false;
	size_t at = 0, i, j;

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
	add_counters(x, &as, &p->final, (char **)names, true, &x->folded_launches,
		     &x->folded_calls, &x->folded_errors, &x->folded_latency, &x->folded_copies,
		     &x->folded_copy_bytes, &x->folded_allocations, &x->folded_frees);
	free(names);
	for (i = 0; i < p->xids.sample_count; i++) {
		const struct cp_metric_sample *xid = &p->xids.samples[i];

		for (j = 0; j < p->xids.label_count; j++)
			values[j] = xid->values[j];
		process_values(&as, true, (char[16]){ 0 }, values);
		add_value(&x->folded_xids, values, xid->value);
	}
	if (!own) {
		values[0] = "containers";
		add_value(&x->fold_overflow, values, 1);
	} else if (kernels_over) {
		values[0] = "kernels";
		add_value(&x->fold_overflow, values, 1);
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
	struct process *old = find_process(x, p->pid, true);
	size_t i;

	if (old) {
		/* The same pid exited twice within the time kept: the older goes first. */
		unlink_process(x, old);
		fold(x, old);
		free_process(old);
	}
	p->final = *final;
	name_kernels(x, p, p->final.kernels, p->final.kernel_count);
	p->final_kernel_names = calloc(p->final.kernel_count + 1, sizeof(char *));
	for (i = 0; p->final_kernel_names && i < p->final.kernel_count; i++) {
		const struct cp_kernel_row *k = &p->final.kernels[i];

		p->final_kernel_names[i] = strdup(kernel_label(p, k->device, k->handle));
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
		sort_rows(&final);
		mark_exited(x, p, &final, monotonic_ns());
	} else {
		p->exit_pending = false;
		p->exited = true; /* its counts are lost: folded as nothing */
		p->exited_ns = monotonic_ns();
	}
	cp_tracer__forget_pid(x->session->tracer, p->pid);
	cp_names__forget_pid(x->session->names, p->pid);
}

/* ---- the agent's records -------------------------------------------------------------- */

static int on_event(void *arg, const union cp_event *event)
{
	struct exporter *x = arg;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], code[16];
	struct process *p;

	pthread_mutex_lock(&x->lock);
	cp_names__observe(x->session->names, event);
	switch (event->hdr.type) {
	case CP_EV_PROC:
		p = find_process(x, event->hdr.pid, false);
		if (event->proc.kind == CP_PROC_CUDA_INIT) {
			/*
			 * A pid used again before its predecessor's exit was handled, or
			 * with its exit record lost (another start time).
			 */
			if (p && (p->exit_pending || start_time_changed(p)))
				retire_now(x, p);
			live_process(x, event->hdr.pid);
		} else if (event->proc.kind == CP_PROC_EXIT && p) {
			p->exit_pending = true; /* the next refresh reads its final rows */
		}
		break;
	case CP_EV_ATTACH:
		values[0] = cp_attach_status__name(event->attach.status);
		add_value(&x->attaches, values, 1);
		if (event->attach.status == CP_ATTACH_ATTACHED &&
		    event->attach.probes_live_ns > event->hdr.time_ns) {
			struct cp_metric_sample *s = cp_metric_family__find(&x->attach_delay, values);
			uint64_t delay = event->attach.probes_live_ns - event->hdr.time_ns;

			if (s) {
				s->buckets[cp_log2_bucket(delay)]++;
				s->count++;
				s->sum += delay / 1e9;
			}
		}
		break;
	case CP_EV_XID: {
		uint32_t who = cp_xid__process(&event->xid);

		/*
		 * Counted with the process, folded with it into its cgroup's totals; a
		 * process gone already (or none named) goes straight to the
		 * unattributed row, so no per-pid series outlives its process.
		 */
		p = find_process(x, who, false);
		if (!p)
			p = find_process(x, who, true);
		if (!p && who && pid_start_time(who))
			p = live_process(x, who);
		snprintf(code, sizeof(code), "%u", event->xid.error_code);
		if (p)
			process_values(p, false, pid, values);
		else
			values[0] = values[1] = values[2] = values[3] = values[4] = "";
		values[5] = event->xid.dev;
		values[6] = code;
		add_value(p ? &p->xids : &x->folded_xids, values, 1);
		break;
	}
	default:
		break;
	}
	pthread_mutex_unlock(&x->lock);
	return 0;
}

/* ---- building the expositions (main thread, every interval) ---------------------------------- */

static void init_family(struct cp_metric_family *f, const char *name, const char *help,
			const char *unit, enum cp_metric_type type, const char *const *labels,
			size_t label_count)
{
	memset(f, 0, sizeof(*f));
	f->name = name;
	f->help = help;
	f->unit = unit;
	f->type = type;
	f->label_names = labels;
	f->label_count = label_count;
}

/* Adds every series of src into dst (the folded totals into this build's families). */
static void merge(struct cp_metric_family *dst, const struct cp_metric_family *src)
{
	size_t i;
	int b;

	for (i = 0; i < src->sample_count; i++) {
		const struct cp_metric_sample *from = &src->samples[i];
		struct cp_metric_sample *to = cp_metric_family__find(dst, (const char *const *)from->values);

		if (!to)
			continue;
		to->value += from->value;
		to->count += from->count;
		to->sum += from->sum;
		for (b = 0; b < CP_HIST_BUCKETS; b++)
			to->buckets[b] += from->buckets[b];
	}
}

static void add_gauges(struct exporter *x, struct process *p, const struct cp_stats_snapshot *snap,
		       struct families *f)
{
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], gpu[16];
	size_t i, end;

	process_values(p, false, pid, values);
	for (ROWS_OF(snap->mems, snap->mem_count, p->pid, &i, &end); i < end; i++) {
		add_value(&f->process_live_bytes, values, (double)snap->mems[i].live_bytes);
		add_value(&f->process_peak_bytes, values, (double)snap->mems[i].peak_bytes);
	}
	for (ROWS_OF(snap->device_mems, snap->device_mem_count, p->pid, &i, &end); i < end; i++) {
		const struct cp_device_mem_row *m = &snap->device_mems[i];

		snprintf(gpu, sizeof(gpu), "%d", m->device);
		values[5] = m->device >= 0 ? gpu : "";
		values[6] = gpu_uuid(x, p, m->device);
		add_value(&f->live_bytes, values, (double)m->live_bytes);
		add_value(&f->peak_bytes, values, (double)m->peak_bytes);
	}
}

static void init_families(struct families *f)
{
	init_family(&f->launches, "cuprobe_kernel_launches", "Kernel launches, per process, GPU and kernel (up to --max-kernels named, the most launched first, the rest kernel=\"other\"; graph launches by their graph)",
		    NULL, CP_METRIC_COUNTER, kernel_labels, COUNT(kernel_labels));
	init_family(&f->calls, "cuprobe_api_calls", "CUDA driver API calls, per process and API",
		    NULL, CP_METRIC_COUNTER, api_labels, COUNT(api_labels));
	init_family(&f->errors, "cuprobe_api_errors", "API calls that returned an error (with --latency)",
		    NULL, CP_METRIC_COUNTER, api_labels, COUNT(api_labels));
	init_family(&f->latency, "cuprobe_api_latency_seconds", "Time in API calls, entry to return (with --latency)",
		    "seconds", CP_METRIC_HISTOGRAM, api_labels, COUNT(api_labels));
	init_family(&f->copies, "cuprobe_copies", "Memory copies, per process, GPU and direction",
		    NULL, CP_METRIC_COUNTER, copy_labels, COUNT(copy_labels));
	init_family(&f->copy_bytes, "cuprobe_copy_bytes", "Bytes copied, per process, GPU and direction",
		    "bytes", CP_METRIC_COUNTER, copy_labels, COUNT(copy_labels));
	init_family(&f->allocations, "cuprobe_device_allocations", "Device allocations that succeeded (cuMemAlloc* family), per process and GPU",
		    NULL, CP_METRIC_COUNTER, device_labels, COUNT(device_labels));
	init_family(&f->frees, "cuprobe_device_frees", "Device frees of tracked allocations, per process and GPU",
		    NULL, CP_METRIC_COUNTER, device_labels, COUNT(device_labels));
	init_family(&f->live_bytes, "cuprobe_device_memory_live_bytes", "Device memory allocated and not freed (cuMemAlloc* family), per process and GPU",
		    "bytes", CP_METRIC_GAUGE, device_labels, COUNT(device_labels));
	init_family(&f->peak_bytes, "cuprobe_device_memory_peak_bytes", "The most device memory live at once, per process and GPU",
		    "bytes", CP_METRIC_GAUGE, device_labels, COUNT(device_labels));
	init_family(&f->process_live_bytes, "cuprobe_process_memory_live_bytes", "Device memory live, per process, virtual memory management (cuMemCreate) included",
		    "bytes", CP_METRIC_GAUGE, process_labels, COUNT(process_labels));
	init_family(&f->process_peak_bytes, "cuprobe_process_memory_peak_bytes", "The most device memory live at once, per process, VMM included",
		    "bytes", CP_METRIC_GAUGE, process_labels, COUNT(process_labels));
	init_family(&f->xids, "cuprobe_xid_errors", "GPU errors the NVIDIA driver reported (Xid), per process and GPU (PCI address)",
		    NULL, CP_METRIC_COUNTER, xid_labels, COUNT(xid_labels));
	init_family(&f->attaches, "cuprobe_attach_events", "CUDA driver files mapped after the start, by outcome",
		    NULL, CP_METRIC_COUNTER, attach_labels, COUNT(attach_labels));
	init_family(&f->attach_delay, "cuprobe_attach_delay_seconds", "From a new driver file's first mapping to its probes being live",
		    "seconds", CP_METRIC_HISTOGRAM, NULL, 0);
	init_family(&f->lost, "cuprobe_records_lost", "Records (names, process events) that did not fit in the ring buffer",
		    NULL, CP_METRIC_COUNTER, NULL, 0);
	init_family(&f->map_full, "cuprobe_map_full", "Updates that did not fit in a BPF map (that count is then short)",
		    NULL, CP_METRIC_COUNTER, map_labels, COUNT(map_labels));
	init_family(&f->processes, "cuprobe_processes", "CUDA processes with counts: running, and exited but kept",
		    NULL, CP_METRIC_GAUGE, attach_labels, COUNT(attach_labels));
	init_family(&f->scrapes, "cuprobe_http_requests", "HTTP requests answered, and refused",
		    NULL, CP_METRIC_COUNTER, attach_labels, COUNT(attach_labels));
	init_family(&f->folded_overflow, "cuprobe_folded_overflow", FOLDED_OVERFLOW_HELP,
		    NULL, CP_METRIC_COUNTER, limit_labels, COUNT(limit_labels));
}

static void free_families(struct families *f)
{
	struct cp_metric_family *all = &f->launches;
	size_t i, n = sizeof(*f) / sizeof(*all);

	for (i = 0; i < n; i++)
		cp_metric_family__release(&all[i]);
}

/*
 * The processes whose exit came (or whose /proc entry has been gone for
 * LOST_EXIT_WAIT_NS: an exit record lost to a full ring; or whose pid has
 * another start time: lost, and the pid used again) take their final rows
 * from snap; their BPF rows then go, every map walked once. A pid used again
 * within the interval gives its first rows to its predecessor: BPF rows are
 * keyed by pid alone.
 */
static void retire_exited(struct exporter *x, const struct cp_stats_snapshot *snap, uint64_t now)
{
	uint32_t *pids = NULL;
	size_t count = 0, capacity = 0;
	struct process *p;

	for (p = x->processes; p; p = p->next) {
		struct cp_stats_snapshot final;

		if (p->exited)
			continue;
		if (!p->exit_pending) {
			unsigned long long start = pid_start_time(p->pid);

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
		if (count == capacity) {
			size_t grown = capacity ? capacity * 2 : 64;
			uint32_t *bigger = realloc(pids, grown * sizeof(*bigger));

			if (!bigger)
				break; /* the rest wait for the next refresh */
			pids = bigger;
			capacity = grown;
		}
		if (copy_rows(snap, p->pid, &final))
			break;
		pids[count++] = p->pid;
		mark_exited(x, p, &final, now);
	}
	if (count && cp_tracer__forget_pids(x->session->tracer, pids, count))
		cp_say("warning: the rows of %zu exited processes could not be removed (out of memory)",
		       count);
	while (count--)
		cp_names__forget_pid(x->session->names, pids[count]);
	free(pids);
}

/* Reads the maps and gathers the series; they replace the served ones at the end. */
static void refresh(struct exporter *x)
{
	struct families *f = malloc(sizeof(*f)), *old;
	struct cp_stats_snapshot snap;
	struct cp_counters counters;
	struct process *p, *next;
	uint64_t now = monotonic_ns(), running = 0, kept = 0;
	const char *values[CP_METRIC_LABELS_MAX];

	if (!f) {
		cp_say("warning: the metrics could not be read (out of memory)");
		return;
	}
	init_families(f);
	pthread_mutex_lock(&x->lock);
	read_gpus(x);
	if (!cp_tracer__snapshot(x->session->tracer, 0, &snap)) {
		size_t i;

		sort_rows(&snap);
		/* Processes with rows: known, or new. */
		for (i = 0; i < snap.api_count; i++)
			if (!i || snap.apis[i].pid != snap.apis[i - 1].pid)
				live_process(x, snap.apis[i].pid);
		retire_exited(x, &snap, now);
		for (p = x->processes; p; p = p->next) {
			if (p->exited)
				continue;
			add_counters(x, p, &snap, NULL, false, &f->launches, &f->calls, &f->errors,
				     &f->latency, &f->copies, &f->copy_bytes, &f->allocations, &f->frees);
			add_gauges(x, p, &snap, f);
		}
		cp_stats_snapshot__release(&snap);
	}
	for (p = x->processes; p; p = next) {
		next = p->next;
		if (!p->exited) {
			running++;
			merge(&f->xids, &p->xids);
			continue;
		}
		/* exited_ns may be after now: retire_now runs on the agent thread. */
		if (now >= p->exited_ns && now - p->exited_ns >= x->keep_exited_ns) {
			unlink_process(x, p);
			fold(x, p);
			free_process(p);
			continue;
		}
		kept++;
		merge(&f->xids, &p->xids);
		add_counters(x, p, &p->final, p->final_kernel_names, false, &f->launches, &f->calls,
			     &f->errors, &f->latency, &f->copies, &f->copy_bytes, &f->allocations, &f->frees);
	}
	merge(&f->launches, &x->folded_launches);
	merge(&f->calls, &x->folded_calls);
	merge(&f->errors, &x->folded_errors);
	merge(&f->latency, &x->folded_latency);
	merge(&f->copies, &x->folded_copies);
	merge(&f->copy_bytes, &x->folded_copy_bytes);
	merge(&f->allocations, &x->folded_allocations);
	merge(&f->frees, &x->folded_frees);
	merge(&f->xids, &x->folded_xids);
	merge(&f->folded_overflow, &x->fold_overflow);
	/* The agent's families, copied: the build below runs without the lock. */
	merge(&f->attaches, &x->attaches);
	merge(&f->attach_delay, &x->attach_delay);
	if (!cp_tracer__read_counters(x->session->tracer, &counters)) {
		static const struct { const char *map; size_t offset; } full[] = {
			{ "kernel_stats", offsetof(struct cp_counters, kernel_stats_full) },
			{ "api_stats", offsetof(struct cp_counters, api_stats_full) },
			{ "mem_stats", offsetof(struct cp_counters, mem_stats_full) },
			{ "live_allocs", offsetof(struct cp_counters, live_allocs_full) },
			{ "vmm", offsetof(struct cp_counters, vmm_full) },
			{ "device_stats", offsetof(struct cp_counters, device_stats_full) },
			{ "targets", offsetof(struct cp_counters, targets_overflow) },
			{ "call_starts", offsetof(struct cp_counters, call_start_full) },
		};
		size_t i;

		add_value(&f->lost, values, (double)counters.records_lost);
		for (i = 0; i < COUNT(full); i++) {
			values[0] = full[i].map;
			add_value(&f->map_full, values,
				  (double)*(const uint64_t *)((const char *)&counters + full[i].offset));
		}
	}
	pthread_mutex_unlock(&x->lock);
	values[0] = "running";
	add_value(&f->processes, values, (double)running);
	values[0] = "exited";
	add_value(&f->processes, values, (double)kept);
	values[0] = "answered";
	add_value(&f->scrapes, values, (double)__atomic_load_n(&x->scrapes, __ATOMIC_RELAXED));
	values[0] = "refused";
	add_value(&f->scrapes, values, (double)__atomic_load_n(&x->refused, __ATOMIC_RELAXED));
	/* Swapped under the served lock: a scrape builds from the latest. */
	pthread_mutex_lock(&x->served_lock);
	old = x->series;
	x->series = f;
	x->generation++;
	pthread_mutex_unlock(&x->served_lock);
	if (old) {
		free_families(old);
		free(old);
	}
}

/* The exposition e of the latest series, built unless it already was (served_lock held). */
static void build_exposition(struct exporter *x, enum cp_exposition e)
{
	struct families *f = x->series;

	if (!f || x->served_generation[e] == x->generation)
		return;
	cp_text__free(&x->served[e]);
	{
		/* The order of the exposition. */
		struct cp_metric_family *all[] = {
			&f->launches, &f->calls, &f->errors, &f->latency, &f->copies, &f->copy_bytes,
			&f->allocations, &f->frees, &f->live_bytes, &f->peak_bytes, &f->process_live_bytes,
			&f->process_peak_bytes, &f->xids, &f->attaches, &f->attach_delay, &f->lost,
			&f->map_full, &f->processes, &f->scrapes, &f->folded_overflow,
		};
		struct cp_metric_family flat[COUNT(all)];
		size_t i;

		for (i = 0; i < COUNT(all); i++)
			flat[i] = *all[i];
		if (cp_format__metrics(&x->served[e], e, flat, COUNT(all))) {
			cp_say("warning: the metrics could not be built (out of memory)");
			cp_text__free(&x->served[e]);
			return;
		}
	}
	x->served_generation[e] = x->generation;
}

static void on_tick(void *arg)
{
	refresh(arg);
}

/* ---- HTTP (libmicrohttpd's thread) --------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *connection, unsigned int status,
			     const char *type, const void *body, size_t len, const char *allow)
{
	struct MHD_Response *response = MHD_create_response_from_buffer(len, (void *)body,
									 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result result;

	if (!response)
		return MHD_NO;
	MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (allow)
		MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
	result = MHD_queue_response(connection, status, response);
	MHD_destroy_response(response);
	return result;
}

/*
 * Every request is answered at the first call, which sees the headers only:
 * a response can be queued then and only then (once a body is being received
 * MHD refuses it and drops the connection), and a body is never read.
 */
static enum MHD_Result on_request(void *arg, struct MHD_Connection *connection, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **state)
{
	static const char index[] = "cuprobe exporter: metrics on /metrics\n";
	struct exporter *x = arg;
	enum cp_exposition exposition;
	enum MHD_Result result;

	(void)version;
	(void)upload_data;
	(void)upload_size;
	(void)state;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		__atomic_add_fetch(&x->refused, 1, __ATOMIC_RELAXED);
		return reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9,
			     "GET, HEAD");
	}
	if (!strcmp(url, "/"))
		return reply(connection, MHD_HTTP_OK, "text/plain", index, sizeof(index) - 1, NULL);
	if (strcmp(url, "/metrics")) {
		__atomic_add_fetch(&x->refused, 1, __ATOMIC_RELAXED);
		return reply(connection, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n", 10, NULL);
	}
	exposition = cp_exposition__from_accept(MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
									    MHD_HTTP_HEADER_ACCEPT));
	__atomic_add_fetch(&x->scrapes, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&x->served_lock);
	build_exposition(x, exposition);
	result = reply(connection, MHD_HTTP_OK, cp_exposition__content_type(exposition),
		       x->served[exposition].data ? x->served[exposition].data : "",
		       x->served[exposition].len, NULL);
	pthread_mutex_unlock(&x->served_lock);
	return result;
}

/* ADDR:PORT (IPv4, or [IPv6]:PORT) into a socket address; loopback said. */
static int parse_listen(const char *text, struct sockaddr_storage *addr, bool *loopback)
{
	char host[128];
	const char *colon = strrchr(text, ':');
	unsigned long port;
	char *end;

	if (!colon || colon == text || (size_t)(colon - text) >= sizeof(host))
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (*end || colon[1] < '0' || colon[1] > '9' || port == 0 || port > 65535)
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - text), text);
	memset(addr, 0, sizeof(*addr));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;

		host[strlen(host) - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
			return -EINVAL;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
		return 0;
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)addr;

		if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
			return -EINVAL;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
		return 0;
	}
}

int cp_cmd_exporter(int argc, char **argv)
{
	CP_OPTS(cp_tracer_opts, tracer_opts, .aggregate = true, .no_call_records = true);
	struct cp_wait_hooks hooks = { 0 };
	struct exporter x = { 0 };
	struct cp_trace_options opts;
	struct cp_session session;
	struct sockaddr_storage addr;
	bool loopback = false;
	int exit_code;

	exit_code = cp_session__parse(CP_CMD_EXPORTER, argc, argv, &opts);
	if (exit_code >= 0)
		return exit_code;
	if (parse_listen(opts.listen ? opts.listen : DEFAULT_LISTEN, &addr, &loopback)) {
		cp_say("invalid --listen '%s': expected IPv4ADDR:PORT or [IPv6ADDR]:PORT", opts.listen);
		return CP_EXIT_USAGE;
	}
	if (!loopback && !opts.allow_remote) {
		cp_say("--listen %s is not a loopback address: add --allow-remote to serve it (anyone who reaches it reads every CUDA process's metrics)",
		       opts.listen);
		return CP_EXIT_USAGE;
	}
	x.latency = opts.latency;
	x.max_kernels = opts.max_kernels ? opts.max_kernels : DEFAULT_MAX_KERNELS;
	x.keep_exited_ns = (opts.keep_exited_set ? opts.keep_exited_ms : DEFAULT_KEEP_EXITED_MS) * 1000000ull;
	pthread_mutex_init(&x.lock, NULL);
	pthread_mutex_init(&x.served_lock, NULL);
	init_family(&x.folded_launches, "", "", NULL, CP_METRIC_COUNTER, kernel_labels, COUNT(kernel_labels));
	init_family(&x.folded_calls, "", "", NULL, CP_METRIC_COUNTER, api_labels, COUNT(api_labels));
	init_family(&x.folded_errors, "", "", NULL, CP_METRIC_COUNTER, api_labels, COUNT(api_labels));
	init_family(&x.folded_latency, "", "", NULL, CP_METRIC_HISTOGRAM, api_labels, COUNT(api_labels));
	init_family(&x.folded_copies, "", "", NULL, CP_METRIC_COUNTER, copy_labels, COUNT(copy_labels));
	init_family(&x.folded_copy_bytes, "", "", NULL, CP_METRIC_COUNTER, copy_labels, COUNT(copy_labels));
	init_family(&x.folded_allocations, "", "", NULL, CP_METRIC_COUNTER, device_labels, COUNT(device_labels));
	init_family(&x.folded_frees, "", "", NULL, CP_METRIC_COUNTER, device_labels, COUNT(device_labels));
	init_family(&x.folded_xids, "", "", NULL, CP_METRIC_COUNTER, xid_labels, COUNT(xid_labels));
	init_family(&x.fold_overflow, "", "", NULL, CP_METRIC_COUNTER, limit_labels, COUNT(limit_labels));
	x.bound.max_cgroups = FOLDED_CGROUPS_MAX;
	x.bound.max_kernels = x.max_kernels;
	init_family(&x.attaches, "cuprobe_attach_events", "CUDA driver files mapped after the start, by outcome",
		    NULL, CP_METRIC_COUNTER, attach_labels, COUNT(attach_labels));
	init_family(&x.attach_delay, "cuprobe_attach_delay_seconds", "From a new driver file's first mapping to its probes being live",
		    "seconds", CP_METRIC_HISTOGRAM, NULL, 0);
	tracer_opts.measure_latency = opts.latency;
	x.session = &session;
	exit_code = cp_session__open(&session, CP_CMD_EXPORTER, &opts);
	if (!exit_code)
		exit_code = cp_session__attach(&session, &tracer_opts);
	if (!exit_code)
		exit_code = cp_session__start_agent(&session, on_event, &x);
	if (exit_code)
		goto cleanup;
	refresh(&x);
	x.http = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
				  (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				  0, NULL, NULL, on_request, &x,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONNECTIONS_MAX,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_TIMEOUT_S,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
				  MHD_OPTION_END);
	if (!x.http) {
		cp_say("cannot serve on %s: %s", opts.listen ? opts.listen : DEFAULT_LISTEN,
		       strerror(errno ? errno : EADDRINUSE));
		exit_code = CP_EXIT_SETUP;
		goto cleanup;
	}
	cp_say("serving metrics on http://%s/metrics; Ctrl-C stops", opts.listen ? opts.listen : DEFAULT_LISTEN);
	hooks.tick_ms = opts.interval_ms ? opts.interval_ms : DEFAULT_INTERVAL_MS;
	hooks.tick = on_tick;
	hooks.ctx = &x;
	cp_session__wait(&session, &hooks);
	/* The server's thread first, then the agent: nothing reads what is freed below. */
	MHD_stop_daemon(x.http);
	x.http = NULL;
	cp_session__stop_agent(&session);
	exit_code = cp_session__finish(&session);
	/* Stopped by a signal is how an exporter ends: not a failure. */
	if (exit_code >= 128 && session.end == CP_END_SIGNAL)
		exit_code = 0;
cleanup:
	if (x.http)
		MHD_stop_daemon(x.http);
	cp_session__close(&session);
	while (x.processes) {
		struct process *p = x.processes;

		x.processes = p->next;
		free_process(p);
	}
	cp_metric_family__release(&x.folded_launches);
	cp_metric_family__release(&x.folded_calls);
	cp_metric_family__release(&x.folded_errors);
	cp_metric_family__release(&x.folded_latency);
	cp_metric_family__release(&x.folded_copies);
	cp_metric_family__release(&x.folded_copy_bytes);
	cp_metric_family__release(&x.folded_allocations);
	cp_metric_family__release(&x.folded_frees);
	cp_metric_family__release(&x.folded_xids);
	cp_metric_family__release(&x.fold_overflow);
	cp_fold_bound__release(&x.bound);
	cp_metric_family__release(&x.attaches);
	cp_metric_family__release(&x.attach_delay);
	for (int e = 0; e < 3; e++)
		cp_text__free(&x.served[e]);
	if (x.series) {
		free_families(x.series);
		free(x.series);
	}
	pthread_mutex_destroy(&x.lock);
	pthread_mutex_destroy(&x.served_lock);
	return exit_code;
}
#endif /* CUPROBE_NO_EXPORTER */
