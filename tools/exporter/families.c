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
static const char *const xid_labels[] = { "pid", "comm", "container", "cgroup", "pod", "pci", "xid" };
static const char *const status_labels[] = { "status" };
static const char *const map_labels[] = { "map" };
static const char *const limit_labels[] = { "limit" };
#define LABELS(names) names, COUNT(names)
#define NO_LABELS NULL, 0
/* Where a per-process fill reads the value: a member of a row type. */
#define OF(type, member) offsetof(struct type, member)
#define CP_STR(x) #x
#define CP_XSTR(x) CP_STR(x)

/* ---- a row of the table ---------------------------------------------------------------- */

struct family_row;
/* Reads the row's value (at row->value in its row type) from one process's rows. */
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
	const char *name;       /* base units; counters without _total */
	const char *help;
	const char *unit;       /* "seconds", "bytes", or NULL */
	enum cp_metric_type type;
	const char *const *labels;
	size_t label_count;
	/*
	 * Per process: counters and histograms of live, kept and folded
	 * processes, gauges of live ones; value says where in its row type.
	 */
	per_process_fill *per_process;
	size_t value;
	bool with_latency;      /* filled with --latency only (return probes count it) */
	host_fill *host;        /* host-wide, after every process's */
};

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

/* The value at offset in a row, as a sample's. */
static double value_at(const void *row, size_t offset)
{
	return (double)*(const uint64_t *)((const char *)row + offset);
}

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

/* Kernel rows, by GPU and kernel (named as name_kernels decided). */
static void fill_kernels(struct cp_metric_family *f, const struct family_row *row,
			 const struct process_rows *r)
{
	const struct cp_stats_snapshot *snap = r->snap;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], gpu[16];
	size_t i, end;

	label_process(r, pid, values);
	ROWS_OF(snap->kernels, snap->kernel_count, r->p->pid, &i, &end);
	if (!r->kernel_names && r->folded)
		return; /* its names could not be kept (out of memory): its launches are lost */
	if (!r->kernel_names)
		process__name_kernels(r->x, r->p, snap->kernels + i, end - i);
	for (; i < end; i++) {
		const struct cp_kernel_row *k = &snap->kernels[i];

		label_gpu(r, k->device, gpu, values);
		values[7] = r->kernel_names ? r->kernel_names[i] :
			    process__kernel_label(r->p, k->device, k->handle);
		family__add(f, values, value_at(k, row->value));
	}
}

/* API rows, by API. */
static void fill_apis(struct cp_metric_family *f, const struct family_row *row,
		      const struct process_rows *r)
{
	const struct cp_stats_snapshot *snap = r->snap;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16];
	size_t i, end;

	label_process(r, pid, values);
	for (ROWS_OF(snap->apis, snap->api_count, r->p->pid, &i, &end); i < end; i++) {
		values[5] = cp_api__name(snap->apis[i].api);
		family__add(f, values, value_at(&snap->apis[i], row->value));
	}
}

/* The API rows' latency histograms, by API. */
static void fill_api_latency(struct cp_metric_family *f, const struct family_row *row,
			     const struct process_rows *r)
{
	const struct cp_stats_snapshot *snap = r->snap;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16];
	size_t i, end;
	int b;

	label_process(r, pid, values);
	for (ROWS_OF(snap->apis, snap->api_count, r->p->pid, &i, &end); i < end; i++) {
		const struct cp_api_row *a = &snap->apis[i];
		struct cp_metric_sample *s;

		values[5] = cp_api__name(a->api);
		s = cp_metric_family__find(f, values);
		if (!s)
			continue;
		for (b = 0; b < CP_HIST_BUCKETS; b++)
			s->buckets[b] += a->histogram[b];
		s->count += a->timed;
		s->sum += a->total_ns / 1e9;
	}
}

/* Copy rows, by GPU and direction. */
static void fill_copies(struct cp_metric_family *f, const struct family_row *row,
			const struct process_rows *r)
{
	const struct cp_stats_snapshot *snap = r->snap;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], gpu[16];
	size_t i, end;

	label_process(r, pid, values);
	for (ROWS_OF(snap->copies, snap->copy_count, r->p->pid, &i, &end); i < end; i++) {
		const struct cp_copy_row *c = &snap->copies[i];

		label_gpu(r, c->device, gpu, values);
		values[7] = cp_copy_dir__name(c->direction);
		family__add(f, values, value_at(c, row->value));
	}
}

/* Per-GPU memory rows (the cuMemAlloc* family), by GPU. */
static void fill_device_memory(struct cp_metric_family *f, const struct family_row *row,
			       const struct process_rows *r)
{
	const struct cp_stats_snapshot *snap = r->snap;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], gpu[16];
	size_t i, end;

	label_process(r, pid, values);
	for (ROWS_OF(snap->device_mems, snap->device_mem_count, r->p->pid, &i, &end); i < end; i++) {
		label_gpu(r, snap->device_mems[i].device, gpu, values);
		family__add(f, values, value_at(&snap->device_mems[i], row->value));
	}
}

/* The process's memory row (VMM included). */
static void fill_memory(struct cp_metric_family *f, const struct family_row *row,
			const struct process_rows *r)
{
	const struct cp_stats_snapshot *snap = r->snap;
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16];
	size_t i, end;

	label_process(r, pid, values);
	for (ROWS_OF(snap->mems, snap->mem_count, r->p->pid, &i, &end); i < end; i++)
		family__add(f, values, value_at(&snap->mems[i], row->value));
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

static void fill_folded_overflow(struct cp_metric_family *f, const struct host_state *h)
{
	merge(f, &h->x->fold_overflow);
}

/* ---- the table -------------------------------------------------------------------------- */

static const struct family_row family_rows[] = {
	{ "cuprobe_kernel_launches",
	  "Kernel launches, per process, GPU and kernel (up to --max-kernels named, the most launched first, the rest kernel=\"other\"; graph launches by their graph)",
	  NULL, CP_METRIC_COUNTER, LABELS(kernel_labels), fill_kernels, OF(cp_kernel_row, launches) },
	{ "cuprobe_api_calls", "CUDA driver API calls, per process and API",
	  NULL, CP_METRIC_COUNTER, LABELS(api_labels), fill_apis, OF(cp_api_row, calls) },
	{ "cuprobe_api_errors", "API calls that returned an error (with --latency)",
	  NULL, CP_METRIC_COUNTER, LABELS(api_labels), fill_apis, OF(cp_api_row, errors), .with_latency = true },
	{ "cuprobe_api_latency_seconds", "Time in API calls, entry to return (with --latency)",
	  "seconds", CP_METRIC_HISTOGRAM, LABELS(api_labels), fill_api_latency, .with_latency = true },
	{ "cuprobe_copies", "Memory copies, per process, GPU and direction",
	  NULL, CP_METRIC_COUNTER, LABELS(copy_labels), fill_copies, OF(cp_copy_row, copies) },
	{ "cuprobe_copy_bytes", "Bytes copied, per process, GPU and direction",
	  "bytes", CP_METRIC_COUNTER, LABELS(copy_labels), fill_copies, OF(cp_copy_row, bytes) },
	{ "cuprobe_device_allocations",
	  "Device allocations that succeeded (cuMemAlloc* family), per process and GPU",
	  NULL, CP_METRIC_COUNTER, LABELS(device_labels), fill_device_memory,
	  OF(cp_device_mem_row, allocations) },
	{ "cuprobe_device_frees", "Device frees of tracked allocations, per process and GPU",
	  NULL, CP_METRIC_COUNTER, LABELS(device_labels), fill_device_memory, OF(cp_device_mem_row, frees) },
	{ "cuprobe_device_memory_live_bytes",
	  "Device memory allocated and not freed (cuMemAlloc* family), per process and GPU",
	  "bytes", CP_METRIC_GAUGE, LABELS(device_labels), fill_device_memory,
	  OF(cp_device_mem_row, live_bytes) },
	{ "cuprobe_device_memory_peak_bytes", "The most device memory live at once, per process and GPU",
	  "bytes", CP_METRIC_GAUGE, LABELS(device_labels), fill_device_memory,
	  OF(cp_device_mem_row, peak_bytes) },
	{ "cuprobe_process_memory_live_bytes",
	  "Device memory live, per process, virtual memory management (cuMemCreate) included",
	  "bytes", CP_METRIC_GAUGE, LABELS(process_labels), fill_memory, OF(cp_mem_row, live_bytes) },
	{ "cuprobe_process_memory_peak_bytes",
	  "The most device memory live at once, per process, VMM included",
	  "bytes", CP_METRIC_GAUGE, LABELS(process_labels), fill_memory, OF(cp_mem_row, peak_bytes) },
	{ "cuprobe_xid_errors",
	  "GPU errors the NVIDIA driver reported (Xid), per process and GPU (PCI address)",
	  NULL, CP_METRIC_COUNTER, LABELS(xid_labels), fill_xids, .host = fill_unattributed_xids },
	{ "cuprobe_attach_events", "CUDA driver files mapped after the start, by outcome",
	  NULL, CP_METRIC_COUNTER, LABELS(status_labels), .host = fill_attaches },
	{ "cuprobe_attach_delay_seconds",
	  "From a new driver file's first mapping to its probes being live",
	  "seconds", CP_METRIC_HISTOGRAM, NO_LABELS, .host = fill_attach_delay },
	{ "cuprobe_records_lost",
	  "Records (names, process events) that did not fit in the ring buffer",
	  NULL, CP_METRIC_COUNTER, NO_LABELS, .host = fill_records_lost },
	{ "cuprobe_map_full", "Updates that did not fit in a BPF map (that count is then short)",
	  NULL, CP_METRIC_COUNTER, LABELS(map_labels), .host = fill_map_full },
	{ "cuprobe_processes", "CUDA processes with counts: running, and exited but kept",
	  NULL, CP_METRIC_GAUGE, LABELS(status_labels), .host = fill_processes },
	{ "cuprobe_http_requests", "HTTP requests answered, and refused",
	  NULL, CP_METRIC_COUNTER, LABELS(status_labels), .host = fill_http_requests },
	{ "cuprobe_folded_overflow",
	  "Exited processes folded into the overflow rows: limit=\"containers\" (cgroups beyond the first " CP_XSTR(FOLDED_CGROUPS_MAX) " fold into container=\"\", cgroup=\"\", pod=\"\", kernel=\"other\"), limit=\"kernels\" (kernels beyond --max-kernels per cgroup into kernel=\"other\")",
	  NULL, CP_METRIC_COUNTER, LABELS(limit_labels), .host = fill_folded_overflow },
};

static void family_init(struct cp_metric_family *f, const char *name, const char *help,
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

size_t families__count(void)
{
	return COUNT(family_rows);
}

struct cp_metric_family *families__new(void)
{
	struct cp_metric_family *families = calloc(COUNT(family_rows), sizeof(*families));
	size_t i;

	for (i = 0; families && i < COUNT(family_rows); i++) {
		const struct family_row *row = &family_rows[i];

		family_init(&families[i], row->name, row->help, row->unit, row->type, row->labels,
			    row->label_count);
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

		if (row->per_process && (live || row->type != CP_METRIC_GAUGE) &&
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

void families__init_counts(struct exporter *x)
{
	family_init(&x->unattributed_xids, "", "", NULL, CP_METRIC_COUNTER, LABELS(xid_labels));
	family_init(&x->fold_overflow, "", "", NULL, CP_METRIC_COUNTER, LABELS(limit_labels));
	family_init(&x->attaches, "", "", NULL, CP_METRIC_COUNTER, LABELS(status_labels));
	family_init(&x->attach_delay, "", "", NULL, CP_METRIC_HISTOGRAM, NO_LABELS);
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
	family_init(xids, "", "", NULL, CP_METRIC_COUNTER, LABELS(xid_labels));
}

#endif /* CUPROBE_NO_EXPORTER */
