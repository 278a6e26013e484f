/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `cuprobe exporter`, the node agent, in four files:
 *   exporter.c   the command: options, the agent's records, the refresh, the end
 *   processes.c  what a process is (pid, comm, container, cgroup, pod, GPUs,
 *                kernels named), its exit and its folding into its cgroup's totals
 *   families.c   the metric families, one table: a new metric is one row
 *   http.c       libmicrohttpd's side: the expositions served on /metrics, and
 *                which connections stay (with admission.c, route.c, listen.c)
 */
#ifndef CUPROBE_EXPORTER_H
#define CUPROBE_EXPORTER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cuprobe_internal.h"
#include "exposition.h"
#include "listen.h"
#include "metric_store.h"
#include "record_path.h"

/* ---- the pure parts, for the unit test ----------------------------------------------- */

/*
 * The container id and Kubernetes pod uid of a cgroup path ("" when none):
 * docker, containerd and CRI-O ids are 64 hex digits, pod uids come with
 * dashes (cgroupfs) or underscores (systemd slices), written back as dashes.
 */
void cp_exporter__container_of(const char *cgroup, char *container, size_t container_len, char *pod,
			       size_t pod_len);

/* The cgroup path of /proc/PID/cgroup's text: the v2 line ("0::"), else the last v1 line. */
void cp_exporter__cgroup_of(const char *text, char *out, size_t len);

/* Field 22 of /proc/PID/stat's text (start time, clock ticks since boot); 0 when malformed. */
unsigned long long cp_exporter__start_time(const char *stat);

/*
 * The bound on the folded totals of exited processes, which live as long as
 * the exporter: at most max_cgroups cgroups keep their own series (the rest
 * fold into one row with container, cgroup and pod ""), and at most
 * max_kernels kernel names within each (the rest fold into kernel="other").
 * A cgroup or kernel once given its own series keeps it: counters never go
 * backwards.
 */
struct cp_fold_cgroup {
	char *cgroup;
	char **kernels;
	size_t kernel_count, kernel_capacity;
};

struct cp_fold_bound {
	size_t max_cgroups, max_kernels;
	struct cp_fold_cgroup *cgroups;
	size_t cgroup_count, cgroup_capacity;
};

/*
 * Whether cgroup keeps its own folded series (*at: its place, for
 * cp_fold_bound__kernel); false: it goes into the overflow row.
 */
bool cp_fold_bound__cgroup(struct cp_fold_bound *bound, const char *cgroup, size_t *at);
/* The kernel label of a folded series of the cgroup at `at`: kernel, or "other". */
const char *cp_fold_bound__kernel(struct cp_fold_bound *bound, size_t at, const char *kernel);
void cp_fold_bound__release(struct cp_fold_bound *bound);

#ifndef CUPROBE_NO_EXPORTER

#define MAX_GPUS 64
/* Cgroups whose exited processes keep their own folded series (the rest: one overflow row). */
#define FOLDED_CGROUPS_MAX 500
/*
 * HTTP: connections kept at once, and from one address (admission.h says
 * which close past these); the time a whole request has, from the
 * connection ready for it to its answer sent.
 */
#define HTTP_CONNECTIONS_KEPT 64
#define HTTP_CONNECTIONS_PER_ADDRESS 16
#define HTTP_REQUEST_DEADLINE_S 10
/* A process whose /proc entry is gone this long with no exit record: its exit was lost. */
#define LOST_EXIT_WAIT_NS (10 * 1000000000ull)

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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
	size_t kernel_count, kernel_capacity;
	struct cp_metric_family xids; /* its Xid errors, labelled as its other series */
	/* Once exited: its final rows, names resolved. */
	struct cp_stats_snapshot final;
	char **final_kernel_names;
	struct process *next;
};

struct exporter {
	struct cp_session *session;
	struct cp_record_path path;  /* every record: names observed, exits forgotten (by us, later) */
	bool latency;
	size_t max_kernels;
	uint64_t keep_exited_ns;    /* --keep-exited: how long an exited process keeps its pid */
	pthread_mutex_t lock;       /* the agent (exits, Xids, attaches) and the main thread */
	struct process *processes;
	struct gpu_info gpus[MAX_GPUS];
	size_t gpu_count;
	/*
	 * What outlives the processes, one family per row of the table (see
	 * families.c): the folded totals of exited processes (pid="").
	 */
	struct cp_metric_family *folded;
	struct cp_fold_bound bound;  /* which cgroups and kernels keep folded series of their own */
	/* Counted as the agent's records come, and by the folding. */
	struct cp_metric_family unattributed_xids, fold_overflow, attaches, attach_delay;
	/*
	 * The series of the latest refresh, and the expositions made from them:
	 * each format is built at its first scrape after a refresh (a scraper asks
	 * for one format; building all three every interval was most of the work).
	 */
	pthread_mutex_t served_lock;
	struct cp_metric_family *series;
	uint64_t generation;        /* refreshes so far */
	struct cp_text served[3];
	uint64_t served_generation[3];
	struct http_server *http;
	uint64_t scrapes, refused;  /* atomic: the server's threads count */
	uint64_t closed_at_deadline, closed_crowded;
};

uint64_t exporter__now_ns(void);

/* ---- processes.c ---------------------------------------------------------------------- */

/* The start time of a running pid (0: gone): a pid used again has another. */
unsigned long long process__start_time(uint32_t pid);
struct process *process__find(struct exporter *x, uint32_t pid, bool exited);
/* The live process of pid, read from /proc when new; NULL when out of memory. */
struct process *process__live(struct exporter *x, uint32_t pid);
/* Names the kernels of p's rows that get a series of their own (--max-kernels). */
void process__name_kernels(struct exporter *x, struct process *p, const struct cp_kernel_row *rows,
			   size_t count);
/* The kernel label of a launch row (name_kernels has seen it): its name, or "other". */
const char *process__kernel_label(struct process *p, int32_t device, uint64_t handle);
/* Label values of a process (pid="" and comm="" for a container's folded totals). */
void process__label_values(const struct process *p, bool folded, char *pid, const char **values);
/* The agent's process records: a start (cuInit) or an exit. */
void processes__on_record(struct exporter *x, const struct cp_proc_event *proc, uint32_t pid);
/* The Xid's process, known or found alive; NULL: none (counted unattributed). */
struct process *processes__of_xid(struct exporter *x, uint32_t pid);
/* The exited processes retire: their final rows from snap (sorted), their BPF rows removed. */
void processes__retire_exited(struct exporter *x, const struct cp_stats_snapshot *snap,
			      uint64_t now);
/* Exited processes kept past --keep-exited fold into their cgroup's totals and go. */
void processes__fold_expired(struct exporter *x, uint64_t now);
void processes__free(struct exporter *x);

/* The machine's GPUs, in the driver's (PCI bus) order. */
void gpus__read(struct exporter *x);
/* The UUID of a process's device ordinal: through CUDA_VISIBLE_DEVICES when set. */
const char *gpus__uuid(const struct exporter *x, const struct process *p, int32_t device);

/* Rows of a snapshot, sorted by pid once, so a process's rows are one range. */
void rows__sort(struct cp_stats_snapshot *snap);
void rows__of(const void *rows, size_t count, size_t size, uint32_t pid, size_t *begin, size_t *end);
#define ROWS_OF(array, count, pid, begin, end) \
	rows__of((array), (count), sizeof(*(array)), (pid), (begin), (end))

/* ---- families.c ----------------------------------------------------------------------- */

/* What a family's per-process fill reads: one process's rows and labels. */
struct process_rows {
	struct exporter *x;
	struct process *p;          /* its labels (as folded, when folding) */
	const struct cp_stats_snapshot *snap; /* rows sorted by pid */
	char **kernel_names;        /* an exited process's kernel labels, by row; NULL while it lives */
	bool folded;                /* into its cgroup's totals: pid="" */
};

/* How many families the table has: the length of every families array. */
size_t families__count(void);
/* Families, one per row, named and labelled as their row says; NULL when out of memory. */
struct cp_metric_family *families__new(void);
void families__free(struct cp_metric_family *families);
/*
 * The series of one process into families (one per row): counters and
 * histograms always, gauges while it lives (not exited, not folded).
 */
void families__fill_process(struct cp_metric_family *families, const struct process_rows *rows);
/* The host-wide series: the folded totals, the agent's counts, the maps' state. */
void families__fill_host(struct cp_metric_family *families, struct exporter *x,
			 const struct cp_counters *counters, uint64_t running, uint64_t kept);
/* The families counted as records come (Xids, attaches) and folds happen: init, release. */
void families__init_counts(struct exporter *x);
void families__release_counts(struct exporter *x);
/* A process's own Xid family (labelled as the row of Xids). */
void families__init_xids(struct cp_metric_family *xids);
/* Adds value to the series of these label values. */
void family__add(struct cp_metric_family *f, const char *const *values, double value);

/* ---- http.c --------------------------------------------------------------------------- */

/*
 * Serves the latest series on listen's address from libmicrohttpd's own
 * thread, a watchdog thread closing requests past their deadline: 0, or -1
 * with errno.
 */
int http__serve(struct exporter *x, const struct cp_listen *listen);
/* The server's threads stopped and joined (nothing when it never started). */
void http__stop(struct exporter *x);

#endif /* CUPROBE_NO_EXPORTER */
#endif
