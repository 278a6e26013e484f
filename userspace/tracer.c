// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tracer: cuprobe's BPF skeleton through its whole lifecycle
 * (open -> configure -> load -> attach -> destroy), the probe table that
 * says which program goes on which CUDA symbol, and the target pid set.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cuprobe.h"
#include "cuprobe.skel.h"
#include "tracer_internal.h"

#define DEFAULT_RING_BYTES (8u * 1024 * 1024)
#define DESTROY_THREADS 32

/* Cookie layout shared with bpf/cuprobe.bpf.c. */
#define COPY_COOKIE(api, dir, async) ((uint64_t)(api) | ((uint64_t)(dir) << 16) | \
				      ((uint64_t)(async) << 24))

struct probe_spec {
	const char *symbol;
	const char *program;   /* BPF program name in the object */
	const char *return_program; /* NULL: entry only */
	uint64_t cookie;
};

#define PROBE(sym, prog) { #sym, prog, NULL, CP_API_##sym }
#define PROBE_RET(sym, prog, ret) { #sym, prog, ret, CP_API_##sym }
#define COPY(sym, dir, async) { #sym, "copy_entry", NULL, COPY_COOKIE(CP_API_##sym, dir, async) }

static const struct probe_spec driver_probes[] = {
	PROBE(cuLaunchKernel, "launch_kernel"),
	PROBE(cuLaunchKernel_ptsz, "launch_kernel"),
	PROBE(cuLaunchCooperativeKernel, "launch_kernel"),
	PROBE(cuLaunchCooperativeKernel_ptsz, "launch_kernel"),
	PROBE(cuLaunchKernelEx, "launch_kernel_ex"),
	PROBE(cuLaunchKernelEx_ptsz, "launch_kernel_ex"),
	PROBE(cuGraphLaunch, "graph_launch"),
	PROBE(cuGraphLaunch_ptsz, "graph_launch"),
	PROBE_RET(cuMemAlloc_v2, "alloc_entry", "alloc_return"),
	PROBE_RET(cuMemAllocManaged, "alloc_entry", "alloc_return"),
	PROBE_RET(cuMemAllocPitch_v2, "alloc_entry", "alloc_return"),
	PROBE_RET(cuMemAllocAsync, "alloc_entry", "alloc_return"),
	PROBE_RET(cuMemAllocAsync_ptsz, "alloc_entry", "alloc_return"),
	PROBE_RET(cuMemAllocHost_v2, "alloc_entry", "alloc_return"),
	PROBE_RET(cuMemHostAlloc, "alloc_entry", "alloc_return"),
	PROBE(cuMemFree_v2, "free_entry"),
	PROBE(cuMemFreeAsync, "free_entry"),
	PROBE(cuMemFreeAsync_ptsz, "free_entry"),
	PROBE(cuMemFreeHost, "free_entry"),
	COPY(cuMemcpy, CP_COPY_DEFAULT, 0),
	COPY(cuMemcpy_ptds, CP_COPY_DEFAULT, 0),
	COPY(cuMemcpyAsync, CP_COPY_DEFAULT, 1),
	COPY(cuMemcpyAsync_ptsz, CP_COPY_DEFAULT, 1),
	COPY(cuMemcpyHtoD_v2, CP_COPY_HTOD, 0),
	COPY(cuMemcpyHtoD_v2_ptds, CP_COPY_HTOD, 0),
	COPY(cuMemcpyDtoH_v2, CP_COPY_DTOH, 0),
	COPY(cuMemcpyDtoH_v2_ptds, CP_COPY_DTOH, 0),
	COPY(cuMemcpyDtoD_v2, CP_COPY_DTOD, 0),
	COPY(cuMemcpyDtoD_v2_ptds, CP_COPY_DTOD, 0),
	COPY(cuMemcpyHtoDAsync_v2, CP_COPY_HTOD, 1),
	COPY(cuMemcpyHtoDAsync_v2_ptsz, CP_COPY_HTOD, 1),
	COPY(cuMemcpyDtoHAsync_v2, CP_COPY_DTOH, 1),
	COPY(cuMemcpyDtoHAsync_v2_ptsz, CP_COPY_DTOH, 1),
	COPY(cuMemcpyDtoDAsync_v2, CP_COPY_DTOD, 1),
	COPY(cuMemcpyDtoDAsync_v2_ptsz, CP_COPY_DTOD, 1),
	PROBE(cuCtxSynchronize, "sync_entry"),
	PROBE(cuStreamSynchronize, "sync_entry"),
	PROBE(cuStreamSynchronize_ptsz, "sync_entry"),
	PROBE(cuEventSynchronize, "sync_entry"),
	PROBE_RET(cuModuleGetFunction, "name_entry", "name_return"),
	PROBE_RET(cuLibraryGetKernel, "name_entry", "name_return"),
	PROBE_RET(cuKernelGetFunction, "name_entry", "name_return"),
	PROBE(cuInit, "init_entry"),
};

static const struct probe_spec runtime_probes[] = {
	PROBE(cudaLaunchKernel, "rt_launch"),
};

static void logf_(const struct cp_tracer *tracer, enum cp_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void logf_(const struct cp_tracer *tracer, enum cp_log_level level, const char *fmt, ...)
{
	char message[512];
	va_list ap;

	if (!tracer->log)
		return;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	tracer->log(tracer->log_ctx, level, message);
}

static int keep_link(struct cp_tracer *tracer, struct bpf_link *link)
{
	if (tracer->link_count == tracer->link_capacity) {
		size_t capacity = tracer->link_capacity ? tracer->link_capacity * 2 : 64;
		struct bpf_link **links = realloc(tracer->links, capacity * sizeof(*links));

		if (!links)
			return -ENOMEM;
		tracer->links = links;
		tracer->link_capacity = capacity;
	}
	tracer->links[tracer->link_count++] = link;
	return 0;
}

/* uapi values of kernels 6.6+, absent from older headers such as Debian 12's. */
#define CP_BPF_TRACE_UPROBE_MULTI 48
#define CP_BPF_F_UPROBE_MULTI_RETURN 1u

/* The BPF_LINK_CREATE attribute for a uprobe_multi link, laid out as in 6.6+. */
struct uprobe_multi_link_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 count;
	__u32 multi_flags;
	__u32 pid;
	__u32 pad;
};

static bool kernel_has_uprobe_multi(void)
{
	struct utsname uts;
	unsigned int major = 0, minor = 0;

	if (uname(&uts) || sscanf(uts.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 6);
}

static bool is_uprobe_program(struct bpf_program *program)
{
	return bpf_program__type(program) == BPF_PROG_TYPE_KPROBE;
}

static bool is_power_of_two(size_t value)
{
	return value && !(value & (value - 1));
}

struct cp_tracer *cp_tracer__open(const struct cp_tracer_opts *opts)
{
	size_t ring_bytes, page = (size_t)sysconf(_SC_PAGESIZE);
	struct cp_tracer *tracer;
	struct bpf_link *link;
	int err;

	if (!opts || opts->sz < sizeof(*opts)) {
		errno = EINVAL;
		return NULL;
	}
	ring_bytes = opts->ring_bytes ? opts->ring_bytes : DEFAULT_RING_BYTES;
	if (!is_power_of_two(ring_bytes) || ring_bytes < page || ring_bytes > (1ul << 31)) {
		errno = EINVAL;
		return NULL;
	}
	tracer = calloc(1, sizeof(*tracer));
	if (!tracer)
		return NULL;
	tracer->log = opts->log;
	tracer->log_ctx = opts->log_ctx;

	tracer->skel = cuprobe_bpf__open();
	if (!tracer->skel) {
		err = -errno;
		logf_(tracer, CP_LOG_WARN, "cannot open the BPF object: %s", strerror(-err));
		goto err_free_tracer;
	}
	tracer->skel->rodata->filter_by_pid = !opts->system_wide;
	if (opts->wakeup_bytes)
		tracer->skel->rodata->wakeup_threshold_bytes = opts->wakeup_bytes;
	if (opts->wakeup_latency_ns)
		tracer->skel->rodata->wakeup_latency_ns = opts->wakeup_latency_ns;
	tracer->skel->rodata->wake_every_record = opts->wake_every_record;
	tracer->skel->rodata->aggregate = opts->aggregate;
	tracer->skel->rodata->stream_events = !opts->no_call_records;
	tracer->skel->rodata->measure_latency = opts->measure_latency;
	tracer->skel->rodata->record_stacks = opts->record_stacks;
	tracer->measure_latency = opts->measure_latency;
	err = bpf_map__set_max_entries(tracer->skel->maps.events, ring_bytes);
	if (err)
		goto err_destroy_skel;

	/*
	 * uprobe_multi links (one per program and library) attach and detach
	 * far faster than one perf event per symbol; programs must be loaded
	 * for that attach type, so the choice is made here, before load.
	 */
	tracer->use_multi = !opts->classic_uprobes && kernel_has_uprobe_multi();
	if (tracer->use_multi) {
		struct bpf_program *program;

		bpf_object__for_each_program(program, tracer->skel->obj)
			if (is_uprobe_program(program))
				bpf_program__set_expected_attach_type(program, CP_BPF_TRACE_UPROBE_MULTI);
	}
	err = cuprobe_bpf__load(tracer->skel);
	if (err) {
		logf_(tracer, CP_LOG_WARN, "cannot load the BPF programs: %s", strerror(-err));
		goto err_destroy_skel;
	}

	/* Lifecycle tracepoints: attached once, whatever libraries come later. */
	link = bpf_program__attach(tracer->skel->progs.process_fork);
	if (!link || keep_link(tracer, link)) {
		err = link ? -ENOMEM : -errno;
		bpf_link__destroy(link);
		goto err_destroy_links;
	}
	link = bpf_program__attach(tracer->skel->progs.process_exit);
	if (!link || keep_link(tracer, link)) {
		err = link ? -ENOMEM : -errno;
		bpf_link__destroy(link);
		goto err_destroy_links;
	}
	return tracer;

err_destroy_links:
	logf_(tracer, CP_LOG_WARN, "cannot attach the process tracepoints: %s", strerror(-err));
	while (tracer->link_count)
		bpf_link__destroy(tracer->links[--tracer->link_count]);
	free(tracer->links);
err_destroy_skel:
	cuprobe_bpf__destroy(tracer->skel);
err_free_tracer:
	free(tracer);
	errno = -err;
	return NULL;
}

struct link_destroyer {
	pthread_t thread;
	struct cp_tracer *tracer;
	size_t first;
	size_t stride;
};

static void *destroy_links(void *arg)
{
	struct link_destroyer *job = arg;
	size_t i;

	for (i = job->first; i < job->tracer->link_count; i += job->stride)
		bpf_link__destroy(job->tracer->links[i]);
	for (i = job->first; i < job->tracer->multi_count; i += job->stride)
		close(job->tracer->multi_fds[i]);
	return NULL;
}

/*
 * Each uprobe detach waits for an RCU-tasks grace period in the kernel
 * (~75 ms in these VMs). Perf-event uprobes detach one after another under
 * the kernel's event_mutex; uprobe_multi links do not, so their grace
 * periods overlap when a few threads close them at once. All are joined
 * before this returns.
 */
static void destroy_all_links(struct cp_tracer *tracer)
{
	struct link_destroyer jobs[DESTROY_THREADS];
	size_t most = tracer->link_count > tracer->multi_count ? tracer->link_count : tracer->multi_count;
	size_t threads = most < DESTROY_THREADS ? most : DESTROY_THREADS;
	size_t i, started = 0;

	for (i = 0; i < threads; i++) {
		jobs[i] = (struct link_destroyer){ .tracer = tracer, .first = i, .stride = threads };
		if (pthread_create(&jobs[i].thread, NULL, destroy_links, &jobs[i]))
			break;
		started++;
	}
	/* Whatever no thread took (pthread_create failed) is destroyed here. */
	for (i = started; i < threads; i++)
		destroy_links(&jobs[i]);
	for (i = 0; i < started; i++)
		pthread_join(jobs[i].thread, NULL);
	tracer->link_count = 0;
	tracer->multi_count = 0;
}

void cp_tracer__free(struct cp_tracer *tracer)
{
	if (!tracer)
		return;
	destroy_all_links(tracer);
	free(tracer->links);
	free(tracer->multi_fds);
	cuprobe_bpf__destroy(tracer->skel);
	free(tracer);
}

static void note_missing(struct cp_attach_report *report, const char *symbol)
{
	size_t used = strlen(report->missing_names);
	size_t room = sizeof(report->missing_names) - used;
	int n;

	report->missing++;
	if (room < 5 || (used >= 3 && !strcmp(report->missing_names + used - 3, "...")))
		return;
	n = snprintf(report->missing_names + used, room, "%s%s", used ? "," : "", symbol);
	if (n < 0 || (size_t)n >= room)
		strcpy(report->missing_names + sizeof(report->missing_names) - 4, "...");
}

/* Classic uprobe: one perf event per symbol, attached by file offset. */
static int attach_one(struct cp_tracer *tracer, const char *path, uint64_t offset,
		      const char *program_name, bool retprobe, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = retprobe, .bpf_cookie = cookie);
	struct bpf_program *program;
	struct bpf_link *link;
	int err;

	program = bpf_object__find_program_by_name(tracer->skel->obj, program_name);
	if (!program)
		return -EINVAL;
	/* pid -1: every process; the BPF-side pid set does the filtering and follows forks. */
	link = bpf_program__attach_uprobe_opts(program, -1, path, offset, &opts);
	if (!link)
		return -errno;
	err = keep_link(tracer, link);
	if (err)
		bpf_link__destroy(link);
	return err;
}

/* The return probe a symbol gets: its own, or the generic timer when measuring latency. */
static const char *return_program_of(const struct cp_tracer *tracer, const struct probe_spec *probe)
{
	if (probe->return_program)
		return probe->return_program;
	return tracer->measure_latency ? "api_return" : NULL;
}

static int keep_multi_fd(struct cp_tracer *tracer, int fd)
{
	if (tracer->multi_count == tracer->multi_capacity) {
		size_t capacity = tracer->multi_capacity ? tracer->multi_capacity * 2 : 32;
		int *fds = realloc(tracer->multi_fds, capacity * sizeof(*fds));

		if (!fds)
			return -ENOMEM;
		tracer->multi_fds = fds;
		tracer->multi_capacity = capacity;
	}
	tracer->multi_fds[tracer->multi_count++] = fd;
	return 0;
}

static int create_multi_link(struct cp_tracer *tracer, const char *path, const char *program_name,
			     bool retprobe, const uint64_t *offsets, const uint64_t *cookies,
			     size_t count)
{
	struct bpf_program *program = bpf_object__find_program_by_name(tracer->skel->obj, program_name);
	struct uprobe_multi_link_attr attr;
	int fd, err;

	if (!program)
		return -EINVAL;
	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = bpf_program__fd(program);
	attr.attach_type = CP_BPF_TRACE_UPROBE_MULTI;
	attr.path = (uintptr_t)path;
	attr.offsets = (uintptr_t)offsets;
	attr.cookies = (uintptr_t)cookies;
	attr.count = (__u32)count;
	attr.multi_flags = retprobe ? CP_BPF_F_UPROBE_MULTI_RETURN : 0;
	attr.pid = 0; /* every process; the BPF-side pid set filters and follows forks */
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (fd < 0)
		return -errno;
	err = keep_multi_fd(tracer, fd);
	if (err)
		close(fd);
	return err;
}

/* One uprobe_multi link for each program (entry and return apart) over this file. */
static int attach_table_multi(struct cp_tracer *tracer, const char *path,
			      const struct probe_spec *table, size_t count,
			      struct cp_attach_report *report)
{
	const char *names[64];
	uint64_t offsets[64], group_offsets[64], group_cookies[64];
	int found, err, first_error = 0;
	size_t i, j, n;

	if (count > 64)
		return -E2BIG;
	for (i = 0; i < count; i++)
		names[i] = table[i].symbol;
	found = cp_elf__function_offsets(path, names, count, offsets);
	if (found < 0)
		return found;
	for (i = 0; i < count; i++)
		if (!offsets[i])
			note_missing(report, table[i].symbol);
	/* Each program once, for entries, then for the return probes that use it. */
	for (i = 0; i < 2 * count; i++) {
		bool retprobe = i >= count;
		const struct probe_spec *lead = &table[i % count];
		const char *program = retprobe ? return_program_of(tracer, lead) : lead->program;
		bool seen = false;

		if (!program)
			continue;
		for (j = 0; j < i; j++) {
			const struct probe_spec *earlier = &table[j % count];
			const char *earlier_program = j >= count ? return_program_of(tracer, earlier) :
							earlier->program;

			if ((j >= count) == retprobe && earlier_program && !strcmp(earlier_program, program))
				seen = true;
		}
		if (seen)
			continue;
		for (n = 0, j = 0; j < count; j++) {
			const char *uses = retprobe ? return_program_of(tracer, &table[j]) : table[j].program;

			if (!offsets[j] || !uses || strcmp(uses, program))
				continue;
			group_offsets[n] = offsets[j];
			group_cookies[n] = table[j].cookie;
			n++;
		}
		if (!n)
			continue;
		err = create_multi_link(tracer, path, program, retprobe, group_offsets, group_cookies, n);
		if (err) {
			logf_(tracer, CP_LOG_WARN, "%s: cannot attach %s (%zu symbols): %s", path, program,
			      n, strerror(-err));
			if (!first_error)
				first_error = err;
			continue;
		}
		report->attached += n;
		tracer->probe_count += n;
	}
	return first_error;
}

static int attach_table(struct cp_tracer *tracer, const char *path,
			const struct probe_spec *table, size_t count,
			struct cp_attach_report *report)
{
	struct cp_attach_report local;
	const char *names[64];
	uint64_t offsets[64];
	int err, found, first_error = 0;
	size_t i;

	if (!tracer || !path || count > 64)
		return -EINVAL;
	if (access(path, R_OK))
		return -errno;
	if (!report)
		report = &local;
	memset(report, 0, sizeof(*report));
	if (tracer->use_multi) {
		first_error = attach_table_multi(tracer, path, table, count, report);
		goto out_report;
	}
	/* Symbols are resolved here (libelf), so a missing or undefined one is plainly absent. */
	for (i = 0; i < count && i < 64; i++)
		names[i] = table[i].symbol;
	found = cp_elf__function_offsets(path, names, count, offsets);
	if (found < 0)
		return found;
	for (i = 0; i < count; i++) {
		const struct probe_spec *probe = &table[i];

		if (!offsets[i]) {
			note_missing(report, probe->symbol);
			continue;
		}
		err = attach_one(tracer, path, offsets[i], probe->program, false, probe->cookie);
		if (err) {
			logf_(tracer, CP_LOG_WARN, "%s: cannot attach to %s: %s", path,
			      probe->symbol, strerror(-err));
			if (!first_error)
				first_error = err;
			continue;
		}
		report->attached++;
		tracer->probe_count++;
		if (!return_program_of(tracer, probe))
			continue;
		err = attach_one(tracer, path, offsets[i], return_program_of(tracer, probe), true,
				 probe->cookie);
		if (err) {
			logf_(tracer, CP_LOG_WARN, "%s: cannot attach the return probe of %s: %s",
			      path, probe->symbol, strerror(-err));
			if (!first_error)
				first_error = err;
			continue;
		}
		report->attached++;
		tracer->probe_count++;
	}
out_report:
	if (report->missing)
		logf_(tracer, CP_LOG_INFO, "%s: %u probe symbols absent: %s", path,
		      report->missing, report->missing_names);
	if (!report->attached)
		return first_error ? first_error : -ENOENT;
	return 0;
}

int cp_tracer__attach_driver(struct cp_tracer *tracer, const char *lib_path,
			     struct cp_attach_report *report)
{
	return attach_table(tracer, lib_path, driver_probes,
			    sizeof(driver_probes) / sizeof(driver_probes[0]), report);
}

int cp_tracer__attach_runtime(struct cp_tracer *tracer, const char *path,
			      struct cp_attach_report *report)
{
	return attach_table(tracer, path, runtime_probes,
			    sizeof(runtime_probes) / sizeof(runtime_probes[0]), report);
}

int cp_tracer__add_pid(struct cp_tracer *tracer, pid_t pid)
{
	uint32_t key = (uint32_t)pid;
	uint8_t one = 1;

	if (!tracer || pid <= 0)
		return -EINVAL;
	return bpf_map__update_elem(tracer->skel->maps.target_pids, &key, sizeof(key), &one,
				    sizeof(one), BPF_ANY);
}

int cp_tracer__ring_fd(const struct cp_tracer *tracer)
{
	return tracer ? bpf_map__fd(tracer->skel->maps.events) : -EINVAL;
}

unsigned int cp_tracer__link_count(const struct cp_tracer *tracer)
{
	return tracer ? (unsigned int)(tracer->link_count + tracer->multi_count) : 0;
}

unsigned int cp_tracer__probe_count(const struct cp_tracer *tracer)
{
	return tracer ? tracer->probe_count : 0;
}

int cp_tracer__read_counters(const struct cp_tracer *tracer, struct cp_counters *out)
{
	int cpus = libbpf_num_possible_cpus();
	uint64_t *values, sums[CP_CNT_MAX] = { 0 };
	uint32_t key = 0, slot;
	int err, cpu;

	if (!tracer || !out)
		return -EINVAL;
	if (cpus <= 0)
		return cpus ? cpus : -EINVAL;
	/* One entry of CP_CNT_MAX slots per CPU (one look-up per probe hit). */
	values = calloc((size_t)cpus * CP_CNT_MAX, sizeof(*values));
	if (!values)
		return -ENOMEM;
	err = bpf_map__lookup_elem(tracer->skel->maps.counters, &key, sizeof(key), values,
				   sizeof(*values) * CP_CNT_MAX * cpus, 0);
	if (!err)
		for (cpu = 0; cpu < cpus; cpu++)
			for (slot = 0; slot < CP_CNT_MAX; slot++)
				sums[slot] += values[(size_t)cpu * CP_CNT_MAX + slot];
	free(values);
	if (err)
		return err;
	memset(out, 0, sizeof(*out));
	memcpy(out->api_hits, sums, sizeof(out->api_hits));
	out->records_attempted = sums[CP_CNT_RECORDS_ATTEMPTED];
	out->records_lost = sums[CP_CNT_RECORDS_LOST];
	out->pending_overflow = sums[CP_CNT_PENDING_OVERFLOW];
	out->pending_missed = sums[CP_CNT_PENDING_MISSED];
	out->targets_overflow = sums[CP_CNT_TARGETS_OVERFLOW];
	out->filtered = sums[CP_CNT_FILTERED];
	out->kernel_stats_full = sums[CP_CNT_KERNEL_STATS_FULL];
	out->api_stats_full = sums[CP_CNT_API_STATS_FULL];
	out->mem_stats_full = sums[CP_CNT_MEM_STATS_FULL];
	out->live_allocs_full = sums[CP_CNT_LIVE_ALLOCS_FULL];
	out->stacks_lost = sums[CP_CNT_STACKS_LOST];
	out->call_start_full = sums[CP_CNT_CALL_START_FULL];
	return 0;
}
