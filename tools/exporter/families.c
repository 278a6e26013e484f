// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter's metric families, one table: a row is a family (name, help,
 * unit, type, labels) and how it is filled. A per-process fill reads one
 * process's rows of the maps' snapshot (live, kept with its pid after its
 * exit, or folded into its cgroup's totals); a host fill reads what is not
 * one process's. The table's order is the exposition's. A new metric is one
 * row and, when no fill reads its value yet, its fill.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter.h"

#ifndef CUPROBE_NO_EXPORTER

static const char *const process_labels[] = { "pid", "comm", "container", "cgroup", "pod" };
static const char *const device_labels[] = { "pid", "comm", "container", "cgroup", "pod", "gpu",
					     "gpu_uuid" };
static const char *const kernel_labels[] = { "pid", "comm", "container", "cgroup", "pod", "gpu",
					     "gpu_uuid", "kernel" };
static const char *const api_labels[] = { "pid", "comm", "container", "cgroup", "pod", "api" };
static const char *const copy_labels[] = { "pid", "comm", "container", "cgroup", "pod", "gpu",
					   "gpu_uuid", "direction" };
static const char *const nccl_labels[] = { "pid", "comm", "container", "cgroup", "pod", "gpu",
					   "gpu_uuid", "op" };
static const char *const xid_labels[] = { "pid", "comm", "container", "cgroup", "pod", "pci", "xid" };
static const char *const status_labels[] = { "status" };
static const char *const map_labels[] = { "map" };
static const char *const limit_labels[] = { "limit" };
static const char *const reason_labels[] = { "reason" };
/* A row's family: name (base units; counters without _total), help, unit, type, labels. */
#define FAMILY(n, h, u, t, labels) \
	.family = { .name = (n), .help = (h), .unit = (u), .type = CP_METRIC_##t, labels }
#define LABELS(names) .label_names = (names), .label_count = COUNT(names)
#define NO_LABELS .label_names = NULL, .label_count = 0
#define CP_STR(x) #x
#define CP_XSTR(x) CP_STR(x)

/* ---- a row of the table ---------------------------------------------------------------- */

/* The rows of the maps' snapshot a family reads: per process, and a key of their own. */
enum row_kind {
	NO_ROWS,
	KERNEL_ROWS,            /* by GPU and kernel */
	API_ROWS,               /* by API */
	COPY_ROWS,              /* by GPU and direction */
	DEVICE_MEMORY_ROWS,     /* by GPU (the cuMemAlloc* family) */
	MEMORY_ROWS,            /* the process's (VMM included) */
	NCCL_ROWS,              /* by GPU (the communicator's) and NCCL operation */
};

struct family_row;
struct process_rows;
/* Fills one process's series of the row's family. */
typedef void per_process_fill(struct cp_metric_family *f, const struct family_row *row,
			      const struct process_rows *rows);
/* What a host fill reads. */
struct host_state {
	struct exporter *x;
	const struct cp_counters *counters; /* NULL: unreadable */
	uint64_t running, kept;             /* processes with counts */
};
typedef void host_fill(struct cp_metric_family *f, const struct host_state *host);

struct family_row {
	struct cp_metric_family family; /* as served: its series made at each refresh */
	/*
	 * Per process (counters and histograms of live, kept and folded
	 * processes; gauges of live ones): fill_rows reads the value at `value`
	 * in each of its rows (a histogram, the API rows' latency).
	 */
	per_process_fill *per_process;
	enum row_kind rows;
	size_t value;
	bool with_latency;      /* filled with --latency only (return probes count it) */
	bool counted_only;      /* a series only for rows that count something (bytes of a data op) */
	host_fill *host;        /* host-wide, after every process's */
};

/* fill_rows of a member of a row type: KERNELS(launches) reads cp_kernel_row's launches. */
#define KERNELS(member) fill_rows, KERNEL_ROWS, offsetof(struct cp_kernel_row, member)
#define APIS(member) fill_rows, API_ROWS, offsetof(struct cp_api_row, member)
#define COPIES(member) fill_rows, COPY_ROWS, offsetof(struct cp_copy_row, member)
#define DEVICE_MEMORY(member) fill_rows, DEVICE_MEMORY_ROWS, offsetof(struct cp_device_mem_row, member)
#define MEMORY(member) fill_rows, MEMORY_ROWS, offsetof(struct cp_mem_row, member)
#define NCCLS(member) fill_rows, NCCL_ROWS, offsetof(struct cp_nccl_row, member)

void family__add(struct cp_metric_family *f, const char *const *values, double value)
{
	struct cp_metric_sample *s = cp_metric_family__find(f, values);

	if (s)
		s->value += value;
}

/* Adds every series of src into dst (kept counts into this refresh's families). */
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

/* ---- per-process fills: values[0..4] are the process's labels ------------------------- */

static void label_process(const struct process_rows *r, char *pid, const char **values)
{
	process__label_values(r->p, r->folded, pid, values);
}

/* values[5] and [6]: the GPU of a row, its ordinal ("" when unknown) and its UUID. */
static void label_gpu(const struct process_rows *r, int32_t device, char *gpu, const char **values)
{
	snprintf(gpu, 16, "%d", device);
	values[5] = device >= 0 ? gpu : "";
	values[6] = gpus__uuid(r->x, r->p, device);
}

/* The snapshot's rows of a kind: the array, how many, the size of one. */
static const void *rows_of_kind(const struct cp_stats_snapshot *snap, enum row_kind kind,
				size_t *count, size_t *size)
{
	switch (kind) {
	case KERNEL_ROWS:
		*count = snap->kernel_count, *size = sizeof(*snap->kernels);
		return snap->kernels;
	case API_ROWS:
		*count = snap->api_count, *size = sizeof(*snap->apis);
		return snap->apis;
	case COPY_ROWS:
		*count = snap->copy_count, *size = sizeof(*snap->copies);
		return snap->copies;
	case DEVICE_MEMORY_ROWS:
		*count = snap->device_mem_count, *size = sizeof(*snap->device_mems);
		return snap->device_mems;
	case MEMORY_ROWS:
		*count = snap->mem_count, *size = sizeof(*snap->mems);
		return snap->mems;
	case NCCL_ROWS:
		*count = snap->nccl_count, *size = sizeof(*snap->nccls);
		return snap->nccls;
	default:
		*count = *size = 0;
		return NULL;
	}
}

/* values[5...]: what tells a row from the process's others (i: its index, for kernel names). */
static void label_row(const struct process_rows *r, enum row_kind kind, const void *row, size_t i,
		      char *gpu, const char **values)
{
	const struct cp_kernel_row *k = row;
	const struct cp_copy_row *c = row;

	switch (kind) {
	case KERNEL_ROWS:
		label_gpu(r, k->device, gpu, values);
		values[7] = r->kernel_names ? r->kernel_names[i] :
			    process__kernel_label(r->p, k->device, k->handle);
		break;
	case API_ROWS:
		values[5] = cp_api__name(((const struct cp_api_row *)row)->api);
		break;
	case COPY_ROWS:
		label_gpu(r, c->device, gpu, values);
		values[7] = cp_copy_dir__name(c->direction);
		break;
	case DEVICE_MEMORY_ROWS:
		label_gpu(r, ((const struct cp_device_mem_row *)row)->device, gpu, values);
		break;
	case NCCL_ROWS:
		label_gpu(r, ((const struct cp_nccl_row *)row)->device, gpu, values);
		values[7] = cp_nccl_op__name(((const struct cp_nccl_row *)row)->op);
		break;
	default:
		break;
	}
}

/* A row's histogram (the API rows' latency) into its series. */
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

/* The process's rows of the row's kind, each a series: the value at row->value. */
static void fill_rows(struct cp_metric_family *f, const struct family_row *row,
		      const struct process_rows *r)
{
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], gpu[16];
	size_t count, size, i, end;
	const char *rows = rows_of_kind(r->snap, row->rows, &count, &size);

	label_process(r, pid, values);
	rows__of(rows, count, size, r->p->pid, &i, &end);
	if (row->rows == KERNEL_ROWS && !r->kernel_names) {
		if (r->folded)
			return; /* its names could not be kept (out of memory): its launches are lost */
		process__name_kernels(r->x, r->p, r->snap->kernels + i, end - i);
	}
	for (; i < end; i++) {
		const void *at = rows + i * size;

		if (row->counted_only && !*(const uint64_t *)((const char *)at + row->value))
			continue;
		label_row(r, row->rows, at, i, gpu, values);
		if (row->family.type == CP_METRIC_HISTOGRAM)
			add_histogram(f, values, at);
		else
			family__add(f, values, (double)*(const uint64_t *)((const char *)at + row->value));
	}
}

/* The process's Xids (counted as they came), labelled as it is here (folded: its cgroup's). */
static void fill_xids(struct cp_metric_family *f, const struct family_row *row,
		      const struct process_rows *r)
{
	const struct cp_metric_family *xids = &r->p->xids;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16];
	size_t i, j;

	for (i = 0; i < xids->sample_count; i++) {
		for (j = 0; j < xids->label_count; j++)
			values[j] = xids->samples[i].values[j];
		label_process(r, pid, values);
		family__add(f, values, xids->samples[i].value);
	}
}

/* ---- host fills ------------------------------------------------------------------------- */

static void fill_unattributed_xids(struct cp_metric_family *f, const struct host_state *h)
{
	merge(f, &h->x->unattributed_xids);
}

static void fill_attaches(struct cp_metric_family *f, const struct host_state *h)
{
	merge(f, &h->x->attaches);
}

static void fill_attach_delay(struct cp_metric_family *f, const struct host_state *h)
{
	merge(f, &h->x->attach_delay);
}

static void fill_records_lost(struct cp_metric_family *f, const struct host_state *h)
{
	if (h->counters)
		family__add(f, (const char *[1]){ NULL }, (double)h->counters->records_lost);
}

static void fill_map_full(struct cp_metric_family *f, const struct host_state *h)
{
	static const struct { const char *map; size_t offset; } full[] = {
		{ "kernel_stats", offsetof(struct cp_counters, kernel_stats_full) },
		{ "api_stats", offsetof(struct cp_counters, api_stats_full) },
		{ "mem_stats", offsetof(struct cp_counters, mem_stats_full) },
		{ "live_allocs", offsetof(struct cp_counters, live_allocs_full) },
		{ "vmm", offsetof(struct cp_counters, vmm_full) },
		{ "device_stats", offsetof(struct cp_counters, device_stats_full) },
		{ "targets", offsetof(struct cp_counters, targets_overflow) },
		{ "call_starts", offsetof(struct cp_counters, call_start_full) },
		{ "nccl_comms", offsetof(struct cp_counters, nccl_comms_full) },
		{ "nccl_stats", offsetof(struct cp_counters, nccl_stats_full) },
	};
	size_t i;

	for (i = 0; h->counters && i < COUNT(full); i++)
		family__add(f, &full[i].map,
			    (double)*(const uint64_t *)((const char *)h->counters + full[i].offset));
}

static void fill_processes(struct cp_metric_family *f, const struct host_state *h)
{
	family__add(f, (const char *[]){ "running" }, (double)h->running);
	family__add(f, (const char *[]){ "exited" }, (double)h->kept);
}

static void fill_http_requests(struct cp_metric_family *f, const struct host_state *h)
{
	family__add(f, (const char *[]){ "answered" },
		    (double)__atomic_load_n(&h->x->scrapes, __ATOMIC_RELAXED));
	family__add(f, (const char *[]){ "refused" },
		    (double)__atomic_load_n(&h->x->refused, __ATOMIC_RELAXED));
}

static void fill_http_closed(struct cp_metric_family *f, const struct host_state *h)
{
	family__add(f, (const char *[]){ "deadline" },
		    (double)__atomic_load_n(&h->x->closed_at_deadline, __ATOMIC_RELAXED));
	family__add(f, (const char *[]){ "crowded" },
		    (double)__atomic_load_n(&h->x->closed_crowded, __ATOMIC_RELAXED));
}

static void fill_folded_overflow(struct cp_metric_family *f, const struct host_state *h)
{
	merge(f, &h->x->fold_overflow);
}

/* ---- the table: the exposition's order -------------------------------------------------- */

static const struct family_row family_rows[] = {
	{ FAMILY("cuprobe_kernel_launches",
		 "Kernel launches, per process, GPU and kernel (up to --max-kernels named, the most launched first, the rest kernel=\"other\"; graph launches by their graph)",
		 NULL, COUNTER, LABELS(kernel_labels)), KERNELS(launches) },
	{ FAMILY("cuprobe_api_calls", "CUDA driver API calls, per process and API",
		 NULL, COUNTER, LABELS(api_labels)), APIS(calls) },
	{ FAMILY("cuprobe_api_errors", "API calls that returned an error (with --latency)",
		 NULL, COUNTER, LABELS(api_labels)), APIS(errors), .with_latency = true },
	{ FAMILY("cuprobe_api_latency_seconds", "Time in API calls, entry to return (with --latency)",
		 "seconds", HISTOGRAM, LABELS(api_labels)), APIS(histogram), .with_latency = true },
	{ FAMILY("cuprobe_copies", "Memory copies, per process, GPU and direction",
		 NULL, COUNTER, LABELS(copy_labels)), COPIES(copies) },
	{ FAMILY("cuprobe_copy_bytes", "Bytes copied, per process, GPU and direction",
		 "bytes", COUNTER, LABELS(copy_labels)), COPIES(bytes) },
	{ FAMILY("cuprobe_device_allocations",
		 "Device allocations that succeeded (cuMemAlloc* family), per process and GPU",
		 NULL, COUNTER, LABELS(device_labels)), DEVICE_MEMORY(allocations) },
	{ FAMILY("cuprobe_device_frees", "Device frees of tracked allocations, per process and GPU",
		 NULL, COUNTER, LABELS(device_labels)), DEVICE_MEMORY(frees) },
	{ FAMILY("cuprobe_device_memory_live_bytes",
		 "Device memory allocated and not freed (cuMemAlloc* family), per process and GPU",
		 "bytes", GAUGE, LABELS(device_labels)), DEVICE_MEMORY(live_bytes) },
	{ FAMILY("cuprobe_device_memory_peak_bytes",
		 "The most device memory live at once, per process and GPU",
		 "bytes", GAUGE, LABELS(device_labels)), DEVICE_MEMORY(peak_bytes) },
	{ FAMILY("cuprobe_process_memory_live_bytes",
		 "Device memory live, per process, virtual memory management (cuMemCreate) included",
		 "bytes", GAUGE, LABELS(process_labels)), MEMORY(live_bytes) },
	{ FAMILY("cuprobe_process_memory_peak_bytes",
		 "The most device memory live at once, per process, VMM included",
		 "bytes", GAUGE, LABELS(process_labels)), MEMORY(peak_bytes) },
	{ FAMILY("cuprobe_nccl_calls",
		 "NCCL calls, per process, GPU (the communicator's) and operation: collectives, send/recv, groups, communicator calls (ncclBcast's own ncclBroadcast not counted)",
		 NULL, COUNTER, LABELS(nccl_labels)), NCCLS(calls) },
	{ FAMILY("cuprobe_nccl_bytes",
		 "Bytes NCCL calls moved (count x datatype size, count as the call takes it: per rank for all_gather and reduce_scatter), per process, GPU and operation",
		 "bytes", COUNTER, LABELS(nccl_labels)), NCCLS(bytes), .counted_only = true },
	{ FAMILY("cuprobe_xid_errors",
		 "GPU errors the NVIDIA driver reported (Xid), per process and GPU (PCI address)",
		 NULL, COUNTER, LABELS(xid_labels)), fill_xids, .host = fill_unattributed_xids },
	{ FAMILY("cuprobe_attach_events", "CUDA driver files mapped after the start, by outcome",
		 NULL, COUNTER, LABELS(status_labels)), .host = fill_attaches },
	{ FAMILY("cuprobe_attach_delay_seconds",
		 "From a new driver file's first mapping to its probes being live",
		 "seconds", HISTOGRAM, NO_LABELS), .host = fill_attach_delay },
	{ FAMILY("cuprobe_records_lost",
		 "Records (names, process events) that did not fit in the ring buffer",
		 NULL, COUNTER, NO_LABELS), .host = fill_records_lost },
	{ FAMILY("cuprobe_map_full", "Updates that did not fit in a BPF map (that count is then short)",
		 NULL, COUNTER, LABELS(map_labels)), .host = fill_map_full },
	{ FAMILY("cuprobe_processes", "CUDA processes with counts: running, and exited but kept",
		 NULL, GAUGE, LABELS(status_labels)), .host = fill_processes },
	{ FAMILY("cuprobe_http_requests", "HTTP requests answered, and refused",
		 NULL, COUNTER, LABELS(status_labels)), .host = fill_http_requests },
	{ FAMILY("cuprobe_http_connections_closed",
		 "HTTP connections the exporter closed: reason=\"deadline\" (a request not sent and answered within " CP_XSTR(HTTP_REQUEST_DEADLINE_S) " s of the connection being ready for it), reason=\"crowded\" (the one waiting longest for its request, when an address held " CP_XSTR(HTTP_CONNECTIONS_PER_ADDRESS) " connections or all held " CP_XSTR(HTTP_CONNECTIONS_KEPT) ")",
		 NULL, COUNTER, LABELS(reason_labels)), .host = fill_http_closed },
	{ FAMILY("cuprobe_folded_overflow",
		 "Exited processes folded into the overflow rows: limit=\"containers\" (cgroups beyond the first " CP_XSTR(FOLDED_CGROUPS_MAX) " fold into container=\"\", cgroup=\"\", pod=\"\", kernel=\"other\"), limit=\"kernels\" (kernels beyond --max-kernels per cgroup into kernel=\"other\")",
		 NULL, COUNTER, LABELS(limit_labels)), .host = fill_folded_overflow },
};

/* An empty family named and labelled as proto (the table's, or the kept counts'). */
static void family_init(struct cp_metric_family *f, const struct cp_metric_family *proto)
{
	*f = (struct cp_metric_family){ .name = proto->name, .help = proto->help, .unit = proto->unit,
					.type = proto->type, .label_names = proto->label_names,
					.label_count = proto->label_count };
}

size_t families__count(void)
{
	return COUNT(family_rows);
}

struct cp_metric_family *families__new(void)
{
	struct cp_metric_family *families = calloc(COUNT(family_rows), sizeof(*families));
	size_t i;

	for (i = 0; families && i < COUNT(family_rows); i++) {
		family_init(&families[i], &family_rows[i].family);
	}
	return families;
}

void families__free(struct cp_metric_family *families)
{
	size_t i;

	for (i = 0; families && i < COUNT(family_rows); i++)
		cp_metric_family__release(&families[i]);
	free(families);
}

void families__fill_process(struct cp_metric_family *families, const struct process_rows *rows)
{
	bool live = !rows->folded && !rows->p->exited;
	size_t i;

	for (i = 0; i < COUNT(family_rows); i++) {
		const struct family_row *row = &family_rows[i];

		if (row->per_process && (live || row->family.type != CP_METRIC_GAUGE) &&
		    (rows->x->latency || !row->with_latency))
			row->per_process(&families[i], row, rows);
	}
}

void families__fill_host(struct cp_metric_family *families, struct exporter *x,
			 const struct cp_counters *counters, uint64_t running, uint64_t kept)
{
	struct host_state h = { .x = x, .counters = counters, .running = running, .kept = kept };
	size_t i;

	for (i = 0; i < COUNT(family_rows); i++) {
		merge(&families[i], &x->folded[i]); /* the folded totals of exited processes */
		if (family_rows[i].host)
			family_rows[i].host(&families[i], &h);
	}
}

/* The family of the row whose host fill is fill: what the agent's counts are kept as. */
static const struct cp_metric_family *family_filled_by(host_fill *fill)
{
	size_t i;

	for (i = 0; i < COUNT(family_rows); i++)
		if (family_rows[i].host == fill)
			return &family_rows[i].family;
	return NULL;
}

void families__init_counts(struct exporter *x)
{
	family_init(&x->unattributed_xids, family_filled_by(fill_unattributed_xids));
	family_init(&x->fold_overflow, family_filled_by(fill_folded_overflow));
	family_init(&x->attaches, family_filled_by(fill_attaches));
	family_init(&x->attach_delay, family_filled_by(fill_attach_delay));
}

void families__release_counts(struct exporter *x)
{
	cp_metric_family__release(&x->unattributed_xids);
	cp_metric_family__release(&x->fold_overflow);
	cp_metric_family__release(&x->attaches);
	cp_metric_family__release(&x->attach_delay);
}

void families__init_xids(struct cp_metric_family *xids)
{
	family_init(xids, family_filled_by(fill_unattributed_xids));
}

#endif /* CUPROBE_NO_EXPORTER */
