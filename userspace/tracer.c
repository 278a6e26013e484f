// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tracer: cuprobe's BPF skeleton through its whole lifecycle
 * (open -> configure -> load -> attach -> destroy), the probe table that
 * says which program goes on which CUDA symbol, and the target pid set.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cuprobe.h"
#include "cuprobe.skel.h"
#include "tracer_internal.h"

#define DEFAULT_RING_BYTES (8u * 1024 * 1024)
#define DESTROY_THREADS 32
#define TRACEFS "/sys/kernel/tracing"

struct probe_spec {
	const char *symbol;
	const char *program;   /* BPF program name in the object */
	const char *return_program; /* "none": entry only */
	uint64_t cookie;
};

/* The probe tables: the catalogue's probed lines, cookies completed with API id and family. */
#define PROBE_ROW(sym, family, prog, ret, bits) \
	{ #sym, #prog, #ret, (uint64_t)CP_API_##sym | (bits) | CP_FAMILY_BITS(CP_FAMILY_##family) },
#define PROBE_SKIP(sym, family, reason)
#define PROBE_TABLE(lib, table, prefix) static const struct probe_spec lib##_probes[] = { table(PROBE_ROW, PROBE_SKIP) };
CP_LIBRARIES(PROBE_TABLE)
#undef PROBE_TABLE
#undef PROBE_ROW
#undef PROBE_SKIP

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Each library's table. */
#define TABLE_OF(lib, table, prefix) [CP_LIBRARY_##lib] = { lib##_probes, ARRAY_LEN(lib##_probes) },
static const struct {
	const struct probe_spec *probes;
	size_t count;
} library_tables[CP_LIBRARY_MAX] = { CP_LIBRARIES(TABLE_OF) };
#undef TABLE_OF

void cp_tracer__log(const struct cp_tracer *tracer, enum cp_log_level level, const char *fmt, ...)
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

#define logf_ cp_tracer__log

uint32_t cp_kernel_dev(dev_t dev)
{
	return (uint32_t)(major(dev) << 20 | minor(dev));
}

/*
 * Keeps what an attach returned, for cp_tracer__free: NULL is the attach's
 * failure (-errno); a link that cannot be kept is destroyed, not leaked.
 */
static int keep_link(struct cp_tracer *tracer, struct bpf_link *link)
{
	if (!link)
		return -errno;
	if (CP_ARRAY_RESERVE(tracer->links, tracer->link_capacity, tracer->link_count + 1, 64)) {
		bpf_link__destroy(link);
		return -ENOMEM;
	}
	tracer->links[tracer->link_count++] = link;
	return 0;
}

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

/*
 * Whether the kernel has uprobe_multi links, found by asking it: a trivial
 * program loaded for that attach type, linked to a path that cannot work
 * ("/"). A kernel that knows the link type fails the path with EBADF;
 * anything else (EINVAL, the load itself refused) means no.
 */
static bool kernel_has_uprobe_multi(void)
{
	static const struct bpf_insn return_zero[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, load_opts, .expected_attach_type = CP_BPF_TRACE_UPROBE_MULTI);
	struct uprobe_multi_link_attr attr;
	uint64_t offset = 0;
	int prog_fd, link_fd, err;

	prog_fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "cp_multi_probe", "GPL", return_zero,
				ARRAY_LEN(return_zero), &load_opts);
	if (prog_fd < 0)
		return false;
	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = prog_fd;
	attr.attach_type = CP_BPF_TRACE_UPROBE_MULTI;
	attr.path = (uintptr_t)"/";
	attr.offsets = (uintptr_t)&offset;
	attr.count = 1;
	link_fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	err = link_fd < 0 ? errno : 0;
	if (link_fd >= 0)
		close(link_fd);
	close(prog_fd);
	return err == EBADF;
}

static bool is_uprobe_program(struct bpf_program *program)
{
	return bpf_program__type(program) == BPF_PROG_TYPE_KPROBE;
}

static bool is_power_of_two(size_t value)
{
	return value && !(value & (value - 1));
}

/*
 * The syscalls:sys_enter_mmap tracepoint is found through tracefs, which
 * is not always mounted: mount it where the kernel expects it. False when
 * it cannot be had (then the raw syscall tracepoint, which needs none, is used).
 */
static bool have_mmap_tracepoint(const struct cp_tracer *tracer)
{
	static const char id_file[] = TRACEFS "/events/syscalls/sys_enter_mmap/id";

	if (!access(id_file, R_OK) || !access("/sys/kernel/debug/tracing/events/syscalls", R_OK))
		return true;
	if (mount("nodev", TRACEFS, "tracefs", 0, NULL)) {
		logf_(tracer, CP_LOG_INFO, "cannot mount tracefs on %s (%s): watching mmap through raw_syscalls",
		      TRACEFS, strerror(errno));
		return false;
	}
	logf_(tracer, CP_LOG_INFO, "mounted tracefs on %s", TRACEFS);
	return !access(id_file, R_OK);
}

/*
 * The NVIDIA driver's Xid tracepoint, when this machine has one: where its
 * fields are, from its tracefs format ("field:__data_loc char[] dev;
 * offset:8; ..."). False without the driver (or tracefs).
 */
static bool xid_fields(__u32 *dev, __u32 *code, __u32 *msg)
{
	FILE *format = fopen(TRACEFS "/events/nvidia/nvidia_dev_xid/format", "re");
	char line[256];
	int found = 0;

	if (!format)
		return false;
	while (fgets(line, sizeof(line), format)) {
		unsigned int offset;
		char *at = strstr(line, "offset:");

		if (!at || sscanf(at, "offset:%u;", &offset) != 1)
			continue;
		if (strstr(line, " dev;"))
			*dev = offset, found |= 1;
		else if (strstr(line, " error_code;"))
			*code = offset, found |= 2;
		else if (strstr(line, " msg;"))
			*msg = offset, found |= 4;
	}
	fclose(format);
	return found == 7;
}

/* The rodata every instance of the object gets (the primary and a classic one alike). */
static void configure(struct cuprobe_bpf *skel, const struct cp_tracer_opts *opts)
{
	skel->rodata->filter_by_pid = !opts->system_wide;
	if (opts->wakeup_bytes)
		skel->rodata->wakeup_threshold_bytes = opts->wakeup_bytes;
	if (opts->wakeup_latency_ns)
		skel->rodata->wakeup_latency_ns = opts->wakeup_latency_ns;
	skel->rodata->wake_every_record = opts->wake_every_record;
	skel->rodata->aggregate = opts->aggregate;
	skel->rodata->stream_events = !opts->no_call_records;
	skel->rodata->stream_proving = opts->stream_proving;
	skel->rodata->measure_latency = opts->measure_latency;
	skel->rodata->return_records = opts->return_records;
	skel->rodata->bench_omit = opts->bench_omit;
	skel->rodata->record_stacks = opts->record_stacks;
	skel->rodata->watch_mappings = opts->attach_events;
	skel->rodata->watch_runtime = opts->attach_events && opts->runtime_attach;
	skel->rodata->watch_nccl = opts->attach_events;
	skel->rodata->hold_new_mappers = opts->attach_events && opts->hold_new_mappers &&
					 !opts->system_wide;
	skel->rodata->hold_for_stacks = opts->hold_for_stacks && opts->record_stacks &&
					!opts->system_wide;
	skel->rodata->hold_at_init = opts->hold_at_init && !opts->system_wide;
	skel->rodata->launch_slot_magic = opts->launch_slots ? opts->launch_slot_magic : 0;
	skel->rodata->name_late_handles = opts->name_late_handles;
	skel->rodata->python_stacks = opts->python_stacks;
	skel->rodata->hold_for_python = opts->python_stacks && opts->hold_for_stacks &&
					!opts->system_wide;
}

static int attach_tracepoint(struct cp_tracer *tracer, struct bpf_program *program)
{
	return keep_link(tracer, bpf_program__attach(program));
}

struct cp_tracer *cp_tracer__open(const struct cp_tracer_opts *caller_opts)
{
	size_t ring_bytes, page = (size_t)sysconf(_SC_PAGESIZE);
	struct cp_tracer_opts known;
	const struct cp_tracer_opts *opts = &known;
	struct bpf_program *mmap_program = NULL;
	struct cp_tracer *tracer;
	int err;

	if (CP_OPTS_COPY(known, caller_opts)) {
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
	tracer->guardian_fd = -1;
	tracer->kmsg_fd = -1;
	pthread_mutex_init(&tracer->lock, NULL);

	tracer->skel = cuprobe_bpf__open();
	if (!tracer->skel) {
		err = -errno;
		logf_(tracer, CP_LOG_WARN, "cannot open the BPF object: %s", strerror(-err));
		goto err_free_tracer;
	}
	configure(tracer->skel, opts);
	tracer->measure_latency = opts->measure_latency;
	tracer->return_records = opts->return_records;
	tracer->builtin_families = opts->families ? opts->families : ~0ull;
	tracer->hold = tracer->skel->rodata->hold_new_mappers || tracer->skel->rodata->hold_for_stacks ||
		       tracer->skel->rodata->hold_at_init ||
		       tracer->skel->rodata->hold_for_python;
	err = bpf_map__set_max_entries(tracer->skel->maps.events, ring_bytes);
	if (!err)
		err = bpf_map__set_max_entries(tracer->skel->maps.launch_slots,
					       opts->launch_slots ? opts->launch_slots : 1);
	if (err)
		goto err_destroy_skel;

	/* One mmap program, or none: the syscalls tracepoint, or raw_syscalls without tracefs. */
	if (opts->attach_events)
		mmap_program = have_mmap_tracepoint(tracer) ? tracer->skel->progs.driver_mmap :
				tracer->skel->progs.driver_mmap_raw;
	bpf_program__set_autoload(tracer->skel->progs.driver_mmap,
				  mmap_program == tracer->skel->progs.driver_mmap);
	bpf_program__set_autoload(tracer->skel->progs.driver_mmap_raw,
				  mmap_program == tracer->skel->progs.driver_mmap_raw);
	bpf_program__set_autoload(tracer->skel->progs.process_exec,
				  tracer->skel->rodata->watch_runtime || opts->python_stacks);
	/* GPU errors, where the NVIDIA driver is loaded (its tracefs format read before load). */
	tracer->watch_xid = xid_fields((__u32 *)&tracer->skel->rodata->xid_dev_offset,
				       (__u32 *)&tracer->skel->rodata->xid_code_offset,
				       (__u32 *)&tracer->skel->rodata->xid_msg_offset);
	bpf_program__set_autoload(tracer->skel->progs.gpu_xid, tracer->watch_xid);

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

	/* Users' programs (cuprobe run) read the filter from a map, not from our rodata. */
	{
		struct cuprobe_config config = { .filter_by_pid = !opts->system_wide };
		__u32 zero = 0;

		err = bpf_map__update_elem(tracer->skel->maps.cuprobe_config, &zero, sizeof(zero),
					   &config, sizeof(config), BPF_ANY);
		if (err) {
			logf_(tracer, CP_LOG_WARN, "cannot configure the target filter: %s",
			      strerror(-err));
			goto err_destroy_skel;
		}
	}

	/* Lifecycle and attach-event tracepoints: attached once, whatever libraries come later. */
	err = attach_tracepoint(tracer, tracer->skel->progs.process_fork);
	if (!err)
		err = attach_tracepoint(tracer, tracer->skel->progs.process_exit);
	if (err) {
		logf_(tracer, CP_LOG_WARN, "cannot attach the process tracepoints: %s", strerror(-err));
		goto err_destroy_links;
	}
	if (tracer->watch_xid && attach_tracepoint(tracer, tracer->skel->progs.gpu_xid))
		logf_(tracer, CP_LOG_WARN, "cannot attach nvidia:nvidia_dev_xid: GPU errors not recorded");
	else if (tracer->watch_xid)
		cp_tracer__open_kmsg(tracer);
	if (tracer->watch_xid)
		logf_(tracer, CP_LOG_INFO, "recording GPU errors (nvidia:nvidia_dev_xid)%s",
		      tracer->kmsg_fd < 0 ? "; without /dev/kmsg, processes named only by the tracepoint" : "");
	if (opts->python_stacks && !tracer->skel->rodata->watch_runtime) {
		err = attach_tracepoint(tracer, tracer->skel->progs.process_exec);
		if (err) {
			logf_(tracer, CP_LOG_WARN, "cannot attach the exec tracepoint: %s", strerror(-err));
			goto err_destroy_links;
		}
	}
	if (mmap_program) {
		err = attach_tracepoint(tracer, mmap_program);
		if (!err && tracer->skel->rodata->watch_runtime)
			err = attach_tracepoint(tracer, tracer->skel->progs.process_exec);
		if (err) {
			logf_(tracer, CP_LOG_WARN, "cannot attach the mmap/exec tracepoints: %s",
			      strerror(-err));
			goto err_destroy_links;
		}
	}
	if (tracer->hold) {
		err = cp_tracer__start_guardian(tracer);
		if (err) {
			logf_(tracer, CP_LOG_WARN, "cannot start the guardian process: %s", strerror(-err));
			goto err_destroy_links;
		}
	}
	return tracer;

err_destroy_links:
	while (tracer->link_count)
		bpf_link__destroy(tracer->links[--tracer->link_count]);
	free(tracer->links);
err_destroy_skel:
	cuprobe_bpf__destroy(tracer->skel);
err_free_tracer:
	pthread_mutex_destroy(&tracer->lock);
	free(tracer);
	errno = -err;
	return NULL;
}

/*
 * A second instance of the programs, loaded for classic uprobes, every map
 * shared with the first: where a uprobe_multi attach fails at run time
 * (the kernel refuses it for this file), its symbols get classic probes.
 */
static int ensure_classic(struct cp_tracer *tracer)
{
	struct cuprobe_bpf *classic;
	struct bpf_program *program;
	struct bpf_map *map;
	int err;

	if (tracer->classic_skel || !tracer->use_multi)
		return 0;
	classic = cuprobe_bpf__open();
	if (!classic)
		return -errno;
	bpf_object__for_each_map(map, classic->obj) {
		struct bpf_map *shared = bpf_object__find_map_by_name(tracer->skel->obj,
								       bpf_map__name(map));

		err = shared ? bpf_map__reuse_fd(map, bpf_map__fd(shared)) : -ENOENT;
		if (err)
			goto err_destroy;
	}
	bpf_object__for_each_program(program, classic->obj)
		bpf_program__set_autoload(program, is_uprobe_program(program));
	err = cuprobe_bpf__load(classic);
	if (err)
		goto err_destroy;
	tracer->classic_skel = classic;
	logf_(tracer, CP_LOG_INFO, "classic uprobes loaded beside uprobe_multi");
	return 0;

err_destroy:
	cuprobe_bpf__destroy(classic);
	return err;
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
	/* Nobody will attach for a held process any more: let it go first. */
	cp_tracer__release_held(tracer);
	cp_tracer__stop_guardian(tracer);
	destroy_all_links(tracer);
	cp_tracer__close_kmsg(tracer);
	free(tracer->links);
	free(tracer->multi_fds);
	/* Detached above: now their objects can go. */
	while (tracer->program_count)
		cp_program__destroy(tracer->programs[--tracer->program_count]);
	free(tracer->programs);
	cuprobe_bpf__destroy(tracer->classic_skel);
	cuprobe_bpf__destroy(tracer->skel);
	free(tracer->files);
	pthread_mutex_destroy(&tracer->lock);
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
static int attach_one(struct cp_tracer *tracer, struct bpf_program *program, const char *path,
		      uint64_t offset, bool retprobe, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = retprobe, .bpf_cookie = cookie);

	/* pid -1: every process; the BPF-side pid set does the filtering and follows forks. */
	return keep_link(tracer, bpf_program__attach_uprobe_opts(program, -1, path, offset, &opts));
}

static int keep_multi_fd(struct cp_tracer *tracer, int fd)
{
	if (CP_ARRAY_RESERVE(tracer->multi_fds, tracer->multi_capacity, tracer->multi_count + 1, 32))
		return -ENOMEM;
	tracer->multi_fds[tracer->multi_count++] = fd;
	return 0;
}

static int create_multi_link(struct cp_tracer *tracer, struct bpf_program *program, const char *path,
			     bool retprobe, const uint64_t *offsets, const uint64_t *cookies,
			     size_t count)
{
	struct uprobe_multi_link_attr attr;
	int fd, err;

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

/*
 * One BPF program and the symbols of a table it goes on: cuprobe's own
 * (the catalogue's program column names it), the entry-state stash for a
 * family users' return programs read, or a user's program (its family).
 */
struct probe_group {
	const char *program;
	bool retprobe;
	enum cp_family family;      /* CP_FAMILY_NONE: the catalogue names the program */
	struct cp_program *owner;   /* a user's program; NULL: cuprobe's own object */
};

/* The return probe a symbol gets: its own, or the generic timer when measuring latency. */
static const char *return_program_of(const struct cp_tracer *tracer, const struct probe_spec *probe)
{
	if (strcmp(probe->return_program, "none"))
		return probe->return_program;
	return tracer->measure_latency || tracer->return_records ? "api_return" : NULL;
}

static bool builtin_family(const struct cp_tracer *tracer, uint64_t cookie)
{
	return tracer->builtin_families & (1ull << CP_COOKIE_FAMILY(cookie));
}

static bool in_group(const struct cp_tracer *tracer, const struct probe_group *group,
		     const struct probe_spec *probe)
{
	const char *uses;

	if (group->family != CP_FAMILY_NONE)
		return CP_COOKIE_FAMILY(probe->cookie) == group->family;
	if (!builtin_family(tracer, probe->cookie))
		return false;
	uses = group->retprobe ? return_program_of(tracer, probe) : probe->program;
	return uses && !strcmp(uses, group->program);
}

static int add_group(struct probe_group **groups, size_t *count, size_t *capacity,
		     const struct probe_group *group)
{
	size_t i;

	for (i = 0; i < *count; i++)
		if ((*groups)[i].owner == group->owner && (*groups)[i].retprobe == group->retprobe &&
		    (*groups)[i].family == group->family && !strcmp((*groups)[i].program, group->program))
			return 0;
	if (CP_ARRAY_RESERVE(*groups, *capacity, *count + 1, 16))
		return -ENOMEM;
	(*groups)[(*count)++] = *group;
	return 0;
}

/*
 * The groups for a table: cuprobe's programs on its families, every user's
 * program, the stash on each family a user's return program reads, and
 * with --python the walker on each family a user's program is on (a group
 * whose family has no symbol in the table attaches nothing).
 */
static int table_groups(const struct cp_tracer *tracer, const struct probe_spec *table,
			size_t count, struct probe_group **groups, size_t *group_count)
{
	struct probe_group group;
	size_t i, p, b, capacity = 0;
	int err = 0;

	*groups = NULL;
	*group_count = 0;
	for (i = 0; !err && i < 2 * count; i++) {
		const struct probe_spec *probe = &table[i % count];

		group = (struct probe_group){ .retprobe = i >= count, .family = CP_FAMILY_NONE };
		group.program = group.retprobe ? return_program_of(tracer, probe) : probe->program;
		if (group.program && builtin_family(tracer, probe->cookie))
			err = add_group(groups, group_count, &capacity, &group);
	}
	for (p = 0; !err && p < tracer->program_count; p++) {
		struct cp_program *program = tracer->programs[p];

		for (b = 0; !err && b < program->binding_count; b++) {
			const struct cp_program_binding *binding = &program->bindings[b];

			if (binding->retprobe) {
				group = (struct probe_group){ .program = "call_stash", .family = binding->family };
				err = add_group(groups, group_count, &capacity, &group);
			}
			group = (struct probe_group){ .program = binding->program, .owner = program,
						      .retprobe = binding->retprobe,
						      .family = binding->family };
			if (!err)
				err = add_group(groups, group_count, &capacity, &group);
		}
	}
	/*
	 * --python: the walk, at the entry of each family a user's program is
	 * on, attached after every user's program: a probe's programs run
	 * newest first, so the stack id is there for their entry programs too.
	 */
	for (p = 0; !err && tracer->skel->rodata->python_stacks && p < tracer->program_count; p++) {
		struct cp_program *program = tracer->programs[p];

		for (b = 0; !err && b < program->binding_count; b++) {
			group = (struct probe_group){ .program = "python_stash",
						      .family = program->bindings[b].family };
			err = add_group(groups, group_count, &capacity, &group);
		}
	}
	return err;
}

/* The group's program as loaded for uprobe_multi (multi) or for classic uprobes. */
static struct bpf_program *group_program(struct cp_tracer *tracer, const struct probe_group *group,
					 bool multi)
{
	struct bpf_object *obj;

	if (group->owner)
		obj = multi || !tracer->use_multi ? group->owner->obj : group->owner->classic_obj;
	else if (multi || !tracer->use_multi)
		obj = tracer->skel->obj;
	else
		obj = tracer->classic_skel ? tracer->classic_skel->obj : NULL;
	return obj ? bpf_object__find_program_by_name(obj, group->program) : NULL;
}

static int ensure_group_classic(struct cp_tracer *tracer, const struct probe_group *group)
{
	return group->owner ? cp_program__ensure_classic(group->owner) : ensure_classic(tracer);
}

/* Classic probes for one group's symbols of this file. */
static int attach_group_classic(struct cp_tracer *tracer, const char *path,
				const struct probe_group *group, const uint64_t *offsets,
				const uint64_t *cookies, size_t count, unsigned int *attached)
{
	struct bpf_program *program = group_program(tracer, group, false);
	int err, first_error = 0;
	size_t i;

	if (!program)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		err = attach_one(tracer, program, path, offsets[i], group->retprobe, cookies[i]);
		/* The file is gone (its process exited before we got to it): nothing more to try. */
		if (err == -ENOENT || err == -ESRCH)
			return err;
		if (err) {
			logf_(tracer, CP_LOG_WARN, "%s: cannot attach %s%s at 0x%llx: %s", path,
			      group->program, group->retprobe ? " (return)" : "",
			      (unsigned long long)offsets[i], strerror(-err));
			if (!first_error)
				first_error = err;
			continue;
		}
		(*attached)++;
	}
	return first_error;
}

/*
 * Every group of a table on the file at path: one uprobe_multi link per
 * group where the kernel has them, classic uprobes where it has not or
 * where the multi link is refused. The one attach path of cuprobe's own
 * programs and its users'.
 */
static int attach_table(struct cp_tracer *tracer, const char *path,
			const struct probe_spec *table, size_t count,
			struct cp_attach_report *report)
{
	struct cp_attach_report local;
	struct probe_group *groups = NULL;
	const char **names = NULL;
	uint64_t *offsets = NULL, *group_offsets = NULL, *group_cookies = NULL;
	size_t i, j, n, group_count = 0;
	int err = 0, found, first_error = 0;
	unsigned int attached = 0;

	if (!tracer || !path || !count)
		return -EINVAL;
	if (access(path, R_OK))
		return -errno;
	if (!report)
		report = &local;
	memset(report, 0, sizeof(*report));
	names = calloc(count, sizeof(*names));
	offsets = calloc(count, sizeof(*offsets));
	group_offsets = calloc(count, sizeof(*group_offsets));
	group_cookies = calloc(count, sizeof(*group_cookies));
	if (!names || !offsets || !group_offsets || !group_cookies ||
	    table_groups(tracer, table, count, &groups, &group_count)) {
		err = -ENOMEM;
		goto out_free;
	}
	/* Symbols are resolved here (libelf), so a missing or undefined one is plainly absent. */
	for (i = 0; i < count; i++)
		names[i] = table[i].symbol;
	found = cp_elf__function_offsets(path, names, count, offsets);
	if (found < 0) {
		err = found;
		goto out_free;
	}
	for (i = 0; i < count; i++) {
		if (!offsets[i])
			note_missing(report, table[i].symbol);
		/* Two catalogued names of one function (an alias): probed once, under the first. */
		for (j = 0; offsets[i] && j < i; j++)
			if (offsets[j] == offsets[i])
				offsets[i] = 0;
	}
	for (i = 0; i < group_count; i++) {
		const struct probe_group *group = &groups[i];

		for (n = 0, j = 0; j < count; j++) {
			if (!offsets[j] || !in_group(tracer, group, &table[j]))
				continue;
			group_offsets[n] = offsets[j];
			group_cookies[n] = table[j].cookie;
			n++;
		}
		if (!n)
			continue;
		if (tracer->use_multi) {
			struct bpf_program *program = group_program(tracer, group, true);

			err = program ? create_multi_link(tracer, program, path, group->retprobe,
							  group_offsets, group_cookies, n) : -EINVAL;
			if (!err) {
				attached += n;
				continue;
			}
			if (err == -ENOENT || err == -ESRCH) {
				first_error = err; /* the file is gone: classic probes would not find it either */
				break;
			}
			logf_(tracer, CP_LOG_INFO, "%s: uprobe_multi refused for %s (%zu symbols): %s; using classic uprobes",
			      path, group->program, n, strerror(-err));
			err = ensure_group_classic(tracer, group);
			if (err) {
				logf_(tracer, CP_LOG_WARN, "%s: cannot load classic uprobes: %s", path,
				      strerror(-err));
				if (!first_error)
					first_error = err;
				continue;
			}
		}
		err = attach_group_classic(tracer, path, group, group_offsets, group_cookies, n,
					   &attached);
		if (err && !first_error)
			first_error = err;
		if (err == -ENOENT || err == -ESRCH)
			break;
	}
	err = 0;
	report->attached = attached;
	tracer->probe_count += attached;
	if (report->missing)
		logf_(tracer, CP_LOG_INFO, "%s: %u probe symbols absent: %s", path,
		      report->missing, report->missing_names);
out_free:
	free(groups);
	free(names);
	free(offsets);
	free(group_offsets);
	free(group_cookies);
	if (err)
		return err;
	if (!report->attached)
		return first_error ? first_error : -ENOENT;
	return 0;
}

int cp_tracer__attach_file(struct cp_tracer *tracer, const char *path, enum cp_library library,
			   struct cp_attach_report *report)
{
	int err;

	if ((unsigned int)library >= CP_LIBRARY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&tracer->lock);
	err = attach_table(tracer, path, library_tables[library].probes,
			   library_tables[library].count, report);
	pthread_mutex_unlock(&tracer->lock);
	return err;
}

/* Attached before tracing: the file is covered, so mapping it raises no attach event. */
static int attach_at_start(struct cp_tracer *tracer, const char *path, enum cp_library library,
			   struct cp_attach_report *report)
{
	struct cp_attach_report local;
	struct tracked_file *file;
	struct stat st;
	int err;

	if (!tracer || !path)
		return -EINVAL;
	if (!report)
		report = &local;
	if (stat(path, &st))
		return -errno;
	err = cp_tracer__attach_file(tracer, path, library, report);
	pthread_mutex_lock(&tracer->lock);
	file = cp_tracer__track(tracer, cp_kernel_dev(st.st_dev), st.st_ino);
	if (file && file->info.status == CP_ATTACH_PENDING) {
		snprintf(file->info.path, sizeof(file->info.path), "%s", path);
		file->info.library = library;
		file->info.runtime = library == CP_LIBRARY_runtime;
		file->info.at_start = true;
		file->info.status = !err ? CP_ATTACH_ATTACHED : err == -ENOENT ? CP_ATTACH_NOTHING :
				    CP_ATTACH_FAILED;
		file->info.error = err;
		file->info.probes = report->attached;
	}
	pthread_mutex_unlock(&tracer->lock);
	if (!err || err == -ENOENT)
		cp_tracer__mark_covered(tracer, cp_kernel_dev(st.st_dev), st.st_ino);
	return err;
}

int cp_tracer__attach_driver(struct cp_tracer *tracer, const char *lib_path,
			     struct cp_attach_report *report)
{
	return attach_at_start(tracer, lib_path, CP_LIBRARY_driver, report);
}

int cp_tracer__attach_runtime(struct cp_tracer *tracer, const char *path,
			      struct cp_attach_report *report)
{
	return attach_at_start(tracer, path, CP_LIBRARY_runtime, report);
}

int cp_tracer__attach_nccl(struct cp_tracer *tracer, const char *path,
			   struct cp_attach_report *report)
{
	return attach_at_start(tracer, path, CP_LIBRARY_nccl, report);
}

const char *cp_tracer__attach_mode(const struct cp_tracer *tracer)
{
	return tracer && tracer->use_multi ? "uprobe_multi" : "classic";
}

int cp_tracer__add_pid(struct cp_tracer *tracer, pid_t pid)
{
	uint32_t key = (uint32_t)pid;
	uint8_t one = 1;

	if (!tracer || pid <= 0)
		return -EINVAL;
	return bpf_map__update_elem(tracer->skel->maps.cuprobe_targets, &key, sizeof(key), &one,
				    sizeof(one), BPF_ANY);
}

int cp_tracer__ring_fd(const struct cp_tracer *tracer)
{
	return tracer ? bpf_map__fd(tracer->skel->maps.events) : -EINVAL;
}

int cp_tracer__name_request_fd(const struct cp_tracer *tracer)
{
	return tracer ? bpf_map__fd(tracer->skel->maps.cuprobe_name_requests) : -EINVAL;
}

int cp_tracer__launch_slots_fd(const struct cp_tracer *tracer)
{
	return tracer ? bpf_map__fd(tracer->skel->maps.launch_slots) : -EINVAL;
}

int cp_tracer__answer_name_request(struct cp_tracer *tracer, struct cp_names *names,
				   const void *record, size_t size)
{
	const struct cp_name_entry *name;
	struct cuprobe_kernel_name value;
	struct cuprobe_name_key key;

	if (!tracer || size < sizeof(key))
		return -EINVAL;
	memcpy(&key, record, sizeof(key));
	key.pad = 0;
	/* Handles made before the attach: the driver's record, read once. */
	name = cp_names__resolve(names, key.pid, key.handle);
	memset(&value, 0, sizeof(value));
	if (name)
		snprintf(value.name, sizeof(value.name), "%s", name->mangled);
	/* A probe's name that arrived meanwhile is not replaced by "not known". */
	if (bpf_map_update_elem(bpf_map__fd(tracer->skel->maps.cuprobe_kernel_names), &key, &value,
				name ? BPF_ANY : BPF_NOEXIST) && errno != EEXIST)
		return -errno;
	return 0;
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
	out->vmm_full = sums[CP_CNT_VMM_FULL];
	out->vmm_unknown = sums[CP_CNT_VMM_UNKNOWN];
	out->device_stats_full = sums[CP_CNT_DEVICE_STATS_FULL];
	out->hold_failed = sums[CP_CNT_HOLD_FAILED];
	out->driver_mappings = sums[CP_API_driver_mapped];
	out->nccl_too_deep = sums[CP_CNT_NCCL_TOO_DEEP];
	out->nccl_unmatched = sums[CP_CNT_NCCL_UNMATCHED];
	out->nccl_comms_full = sums[CP_CNT_NCCL_COMMS_FULL];
	out->nccl_stats_full = sums[CP_CNT_NCCL_STATS_FULL];
	out->py_walks = sums[CP_CNT_PY_WALKS];
	out->py_no_frames = sums[CP_CNT_PY_NO_FRAMES];
	out->py_truncated = sums[CP_CNT_PY_TRUNCATED];
	out->py_unreadable = sums[CP_CNT_PY_UNREADABLE];
	out->py_new_stacks = sums[CP_CNT_PY_NEW_STACKS];
	out->py_stacks_lost = sums[CP_CNT_PY_STACKS_LOST];
	out->py_seen_full = sums[CP_CNT_PY_SEEN_FULL];
	out->py_collisions = sums[CP_CNT_PY_COLLISIONS];
	out->py_busy = sums[CP_CNT_PY_BUSY];
	return 0;
}
