// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe stats`: counting in BPF maps, reports per process every interval
 * and when a process exits, leak reports for device memory still live at
 * exit. Only names and lifecycle records cross the ring buffer (with
 * --timeline, the calls too: the kernels' bounds, joined to the NCCL calls
 * that launched them, are added up here per communicator and op).
 *
 * With --python the calls cross too: each is added to the Python line that
 * made it (cp_py_sites), and a report lists the lines.
 *
 * Two threads report: the agent (a process exited: its final report, then
 * the session's record path removes its rows) and the main thread
 * (interval ticks). One lock keeps their output and the name table whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_options.h"
#include "cuprobe_internal.h"
#include "output_file.h"
#include "record_path.h"
#include "session.h"

#define MAX_COMMS 1024
#define GPU_STREAMS_SHOWN 64
#define GPU_DEVICES_SHOWN 16
#define XID_IN_FLIGHT_MAX 64

struct comm_entry {
	uint32_t pid;
	char comm[17];
};

/* --timeline: the bounds of the kernels NCCL calls launched, per (pid, communicator, op). */
struct nccl_gpu {
	uint32_t pid;
	uint32_t op;
	uint64_t comm;
	uint64_t kernels;
	uint64_t gpu_max_ns;
	uint64_t gpu_start_ns, gpu_end_ns;
};

struct stats_ctx {
	struct cp_session *session;
	enum cp_format format;
	bool latency;
	bool stacks;
	struct cp_timeline *timeline; /* --timeline */
	struct cp_nccl_calls *nccl;   /* --timeline: NCCL calls waiting for their kernels' bounds */
	struct cp_py_sites *python;   /* --python: calls by Python line */
	enum cp_py_site_by python_by;
	unsigned long long python_lost; /* calls not added to a line (out of memory) */
	struct nccl_gpu *nccl_gpu;
	size_t nccl_gpu_count, nccl_gpu_capacity;
	unsigned long long start_ns;
	pthread_mutex_t lock;
	struct comm_entry comms[MAX_COMMS];
	struct cp_text text;
	unsigned long long reports;
	unsigned long long leak_reports;
};

static unsigned long long monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The process's command name, read while it lives and remembered after. */
static const char *comm_of(struct stats_ctx *ctx, uint32_t pid)
{
	struct comm_entry *slot = &ctx->comms[pid % MAX_COMMS];
	char name[sizeof(slot->comm)];

	if (!cp_proc__comm(pid, 0, name, sizeof(name))) {
		slot->pid = pid;
		memcpy(slot->comm, name, sizeof(slot->comm));
	}
	return slot->pid == pid ? slot->comm : "?";
}

/* Writes what the formatter made; a failed write ends the session. */
static void emit(struct stats_ctx *ctx)
{
	if (ctx->text.len && !cp_output__write(&ctx->session->output, ctx->text.data, ctx->text.len, true))
		cp_session__output_failed(ctx->session, errno);
	cp_text__clear(&ctx->text);
}

/* ---- one process's report ------------------------------------------------------ */

struct exit_info {
	bool exited;
	int exit_code; /* wait status as the kernel keeps it */
};

static void report_process(struct stats_ctx *ctx, const struct cp_stats_snapshot *snap, uint32_t pid,
			   const struct exit_info *exit_info, bool final)
{
	struct cp_report report = {
		.pid = pid,
		.comm = comm_of(ctx, pid),
		.time_ns = monotonic_ns(),
		.since_start_s = (monotonic_ns() - ctx->start_ns) / 1e9,
		.final = final,
		.exited = exit_info->exited,
		.exit_code = exit_info->exit_code,
		/* An exited process's rows no longer change: only a live one is read unevenly. */
		.live = !exit_info->exited,
		.latency = ctx->latency,
	};
	struct cp_gpu_stream streams[GPU_STREAMS_SHOWN];
	struct cp_gpu_device devices[GPU_DEVICES_SHOWN];
	struct cp_gpu_summary gpu;
	struct cp_kernel_row *kernels = calloc(snap->kernel_count + 1, sizeof(*kernels));
	struct cp_api_row *apis = calloc(snap->api_count + 1, sizeof(*apis));
	struct cp_nccl_report_row *nccl = calloc(snap->nccl_count + 1, sizeof(*nccl));
	struct cp_nccl_report_row *row;
	struct cp_py_line_row *python_lines = NULL;
	size_t i, j;
	int err;

	if (!kernels || !apis || !nccl)
		goto out;
	if (ctx->python) {
		report.python_asked = true;
		report.python_own_code = ctx->python_by == CP_PY_SITE_OWN_CODE;
		report.python_bounds = ctx->timeline != NULL;
		if (cp_py_sites__rows(ctx->python, pid, report.python_bounds, &python_lines,
				      &report.python_count))
			cp_say("warning: the Python lines of pid %u left out: out of memory", pid);
		report.python = python_lines;
	}
	for (i = 0; i < snap->nccl_count; i++) {
		if (snap->nccls[i].pid != pid)
			continue;
		row = &nccl[report.nccl_count++];
		row->row = snap->nccls[i];
		for (j = 0; j < ctx->nccl_gpu_count; j++) {
			const struct nccl_gpu *g = &ctx->nccl_gpu[j];

			if (g->pid != pid || g->op != row->row.op || g->comm != row->row.comm)
				continue;
			row->kernels = g->kernels;
			row->gpu_max_ns = g->gpu_max_ns;
			row->gpu_start_ns = g->gpu_start_ns;
			row->gpu_end_ns = g->gpu_end_ns;
		}
	}
	report.nccl = nccl;
	report.nccl_gpu = ctx->timeline != NULL;
	for (i = 0; i < snap->kernel_count; i++)
		if (snap->kernels[i].pid == pid)
			kernels[report.kernel_count++] = snap->kernels[i];
	for (i = 0; i < snap->api_count; i++)
		if (snap->apis[i].pid == pid)
			apis[report.api_count++] = snap->apis[i];
	for (i = 0; i < snap->mem_count; i++)
		if (snap->mems[i].pid == pid)
			report.memory = &snap->mems[i];
	report.kernels = kernels;
	report.apis = apis;
	if (ctx->timeline && !cp_timeline__summary(ctx->timeline, pid, &gpu)) {
		report.gpu = &gpu;
		report.gpu_streams = streams;
		report.gpu_stream_count = cp_timeline__streams(ctx->timeline, pid, streams,
							       GPU_STREAMS_SHOWN);
		if (report.gpu_stream_count > GPU_STREAMS_SHOWN)
			report.gpu_stream_count = GPU_STREAMS_SHOWN;
		report.gpu_devices = devices;
		report.gpu_device_count = cp_timeline__devices(ctx->timeline, pid, devices,
							       GPU_DEVICES_SHOWN);
		if (report.gpu_device_count > GPU_DEVICES_SHOWN)
			report.gpu_device_count = GPU_DEVICES_SHOWN;
	}
	ctx->reports++;
	err = cp_format__report(&ctx->text, ctx->format, &report, ctx->session->names);
	if (err)
		cp_say("warning: a report of pid %u was cut short: %s", pid, strerror(-err));
	emit(ctx);
out:
	free(kernels);
	free(apis);
	free(nccl);
	free(python_lines);
}

/*
 * --timeline: a kernel's bound, added to the (communicator, op) of the NCCL
 * call that launched it (a group's: its calls' op and communicator when all
 * share both, else the groups' own row); the call is forgotten with its
 * last kernel.
 */
static void on_interval(void *arg, const struct cp_gpu_interval *interval)
{
	struct stats_ctx *ctx = arg;
	struct cp_nccl_call *call = cp_nccl_calls__kernel(ctx->nccl, interval);
	struct nccl_gpu *g = NULL;
	size_t i;

	if (ctx->python && cp_py_sites__interval(ctx->python, interval))
		ctx->python_lost++;
	if (!call || !call->recorded)
		return;
	if (interval->evidence != CP_DONE_NONE) {
		bool group = call->record.op == CP_NCCL_GROUP_END;
		/* A group of one op on one communicator counts as that op; any other, as the group. */
		bool shared = !group || (call->op != CP_NCCL_GROUP_END && call->comm);
		uint32_t op = shared ? call->op : CP_NCCL_GROUP_END;
		uint64_t comm = shared ? call->comm : 0;

		for (i = 0; i < ctx->nccl_gpu_count && !g; i++)
			if (ctx->nccl_gpu[i].pid == call->pid && ctx->nccl_gpu[i].op == op &&
			    ctx->nccl_gpu[i].comm == comm)
				g = &ctx->nccl_gpu[i];
		if (!g && !CP_ARRAY_RESERVE(ctx->nccl_gpu, ctx->nccl_gpu_capacity,
					    ctx->nccl_gpu_count + 1, 16)) {
			g = &ctx->nccl_gpu[ctx->nccl_gpu_count++];
			*g = (struct nccl_gpu){ .pid = call->pid, .op = op, .comm = comm };
		}
		if (g) {
			g->kernels++;
			g->gpu_max_ns += interval->done_by_ns - interval->start_after_ns;
			if (!g->gpu_start_ns || interval->start_after_ns < g->gpu_start_ns)
				g->gpu_start_ns = interval->start_after_ns;
			if (interval->done_by_ns > g->gpu_end_ns)
				g->gpu_end_ns = interval->done_by_ns;
		}
	}
	if (call->kernels_seen >= call->launches)
		cp_nccl_calls__forget(ctx->nccl, call);
}

/* An exited process's NCCL sums go once its final report is out. */
static void forget_nccl(struct stats_ctx *ctx, uint32_t pid)
{
	size_t i, kept = 0;

	cp_nccl_calls__forget_pid(ctx->nccl, pid);
	for (i = 0; i < ctx->nccl_gpu_count; i++)
		if (ctx->nccl_gpu[i].pid != pid)
			ctx->nccl_gpu[kept++] = ctx->nccl_gpu[i];
	ctx->nccl_gpu_count = kept;
}

/* ---- leak reports ---------------------------------------------------------------- */

#define LEAK_SITES_SHOWN 10

struct leak_group {
	struct cp_leak_site site;
	long long stack_id;
	unsigned long long caller;
	char *frame_text[CP_STACK_DEPTH + 1];
	const char *frames[CP_STACK_DEPTH + 1];
};

static int by_bytes_desc(const void *a, const void *b)
{
	const struct leak_group *x = a, *y = b;

	return x->site.bytes < y->site.bytes ? 1 : x->site.bytes > y->site.bytes ? -1 : 0;
}

/* The allocating stack of a group, symbolized (the walk skips the caller: put it back). */
static void symbolize_group(struct stats_ctx *ctx, uint32_t pid, struct leak_group *group)
{
	uint64_t walked[CP_STACK_DEPTH], ips[CP_STACK_DEPTH + 1];
	int walked_depth = group->stack_id >= 0 ?
		cp_tracer__stack(ctx->session->tracer, group->stack_id, walked, CP_STACK_DEPTH) : -1;
	size_t depth = 0, f;
	int w;

	if (walked_depth <= 0)
		return;
	ips[depth++] = walked[0];
	if (group->caller)
		ips[depth++] = group->caller;
	for (w = 1; w < walked_depth; w++)
		ips[depth++] = walked[w];
	for (f = 0; f < depth; f++) {
		group->frame_text[f] = malloc(1024);
		if (!group->frame_text[f])
			break;
		cp_symbolizer__symbolize(ctx->session->symbolizer, pid, ips[f], group->frame_text[f], 1024);
		group->frames[f] = group->frame_text[f];
	}
	group->site.frames = group->frames;
	group->site.frame_count = f;
}

static void report_leaks(struct stats_ctx *ctx, uint32_t pid)
{
	struct cp_leak leak = { .pid = pid, .comm = comm_of(ctx, pid), .stacks = ctx->stacks };
	struct cp_leak_site shown[LEAK_SITES_SHOWN];
	struct cp_live_alloc *allocs = NULL;
	struct leak_group *groups;
	size_t count = 0, group_count = 0, i, j, f;
	int err;

	if (cp_tracer__live_allocs(ctx->session->tracer, pid, &allocs, &count) || !count) {
		free(allocs);
		return;
	}
	groups = calloc(count, sizeof(*groups));
	if (!groups) {
		free(allocs);
		return;
	}
	/* Grouped by allocating stack (or by API when stacks are off); pinned host memory is not a device leak. */
	for (i = 0; i < count; i++) {
		const struct cp_live_alloc *info = &allocs[i];

		if (info->kind == CP_MEM_HOST)
			continue;
		leak.allocations++;
		leak.bytes += info->bytes;
		for (j = 0; j < group_count; j++)
			if (groups[j].stack_id == info->stack_id && groups[j].site.api == info->api &&
			    groups[j].caller == info->caller)
				break;
		if (j == group_count)
			groups[group_count++] = (struct leak_group){
				.stack_id = info->stack_id, .caller = info->caller,
				.site = { .kind = info->kind, .api = info->api } };
		groups[j].site.allocations++;
		groups[j].site.bytes += info->bytes;
	}
	if (!leak.allocations)
		goto out;
	ctx->leak_reports++;
	qsort(groups, group_count, sizeof(*groups), by_bytes_desc);
	for (i = 0; i < group_count && i < LEAK_SITES_SHOWN; i++) {
		symbolize_group(ctx, pid, &groups[i]);
		shown[i] = groups[i].site;
	}
	leak.sites = shown;
	leak.site_count = i;
	err = cp_format__leak(&ctx->text, ctx->format, &leak);
	if (err)
		cp_say("warning: the leak report of pid %u was cut short: %s", pid, strerror(-err));
	emit(ctx);
out:
	for (i = 0; i < group_count; i++)
		for (f = 0; f <= CP_STACK_DEPTH; f++)
			free(groups[i].frame_text[f]);
	free(groups);
	free(allocs);
}

/* A GPU error: the record, and what its process had in flight (with --timeline). */
static void report_xid(struct stats_ctx *ctx, const struct cp_xid_event *xid)
{
	struct cp_gpu_interval in_flight[XID_IN_FLIGHT_MAX];
	struct cp_gpu_summary summary;
	uint32_t pid = cp_xid__process(xid);
	bool known = ctx->timeline && !cp_timeline__summary(ctx->timeline, pid, &summary);
	size_t count = known ? cp_timeline__in_flight(ctx->timeline, pid, in_flight,
						       XID_IN_FLIGHT_MAX) : 0;
	char line[1024];
	int n;

	n = cp_format__record(ctx->format, (const union cp_event *)xid, ctx->session->names,
			      ctx->start_ns, line, sizeof(line));
	if (n >= 0) {
		line[n++] = '\n'; /* the formatter leaves room: n < sizeof(line) */
		if (!cp_output__write(&ctx->session->output, line, (size_t)n, false))
			cp_session__output_failed(ctx->session, errno);
	}
	cp_format__xid_in_flight(&ctx->text, ctx->format, xid, in_flight,
				 count < XID_IN_FLIGHT_MAX ? count : XID_IN_FLIGHT_MAX, known,
				 ctx->session->names);
	emit(ctx);
}

/* ---- the two reporting threads ------------------------------------------------------ */

/* A process starting or mapping a CUDA library: its command name, read while it lives. */
static int on_record(void *arg, const union cp_event *event)
{
	struct stats_ctx *ctx = arg;

	if ((event->hdr.type == CP_EV_PROC && (event->proc.kind == CP_PROC_CUDA_INIT ||
					       event->proc.kind == CP_PROC_HELD_FOR_STACKS)) ||
	    event->hdr.type == CP_EV_ATTACH)
		comm_of(ctx, event->hdr.pid);
	cp_nccl_calls__observe(ctx->nccl, event);
	if (ctx->python && cp_py_sites__observe(ctx->python, event))
		ctx->python_lost++;
	return 0;
}

/*
 * The timeline has the record: an Xid's report, and an exit's final report
 * and leak check (then the session forgets the process, rows included).
 */
static int on_settled(void *arg, const union cp_event *event)
{
	struct stats_ctx *ctx = arg;
	struct cp_stats_snapshot snap;

	if (event->hdr.type == CP_EV_XID)
		report_xid(ctx, &event->xid);
	if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT) {
		struct exit_info info = { .exited = true, .exit_code = event->proc.exit_code };
		uint32_t pid = event->hdr.pid;

		if (!cp_tracer__snapshot(ctx->session->tracer, pid, &snap)) {
			if (snap.kernel_count || snap.api_count || snap.mem_count) {
				report_process(ctx, &snap, pid, &info, true);
				report_leaks(ctx, pid);
			}
			cp_stats_snapshot__release(&snap);
		}
		forget_nccl(ctx, pid);
		if (ctx->python)
			cp_py_sites__forget_pid(ctx->python, pid);
	}
	return 0;
}

/* Every pid with rows, once each. */
static size_t pids_in(const struct cp_stats_snapshot *snap, uint32_t *pids, size_t max)
{
	size_t n = 0, i, j;

#define ADD_PID(p) do { \
		for (j = 0; j < n && pids[j] != (p); j++) \
			; \
		if (j == n && n < max) \
			pids[n++] = (p); \
	} while (0)
	for (i = 0; i < snap->mem_count; i++)
		ADD_PID(snap->mems[i].pid);
	for (i = 0; i < snap->kernel_count; i++)
		ADD_PID(snap->kernels[i].pid);
	for (i = 0; i < snap->api_count; i++)
		ADD_PID(snap->apis[i].pid);
#undef ADD_PID
	return n;
}

static void report_all(struct stats_ctx *ctx, bool final)
{
	struct exit_info alive = { 0 };
	struct cp_stats_snapshot snap;
	uint32_t pids[1024];
	size_t n, i;

	pthread_mutex_lock(&ctx->lock);
	if (!cp_tracer__snapshot(ctx->session->tracer, 0, &snap)) {
		n = pids_in(&snap, pids, sizeof(pids) / sizeof(pids[0]));
		for (i = 0; i < n; i++) {
			if (ctx->stacks)
				cp_symbolizer__refresh(ctx->session->symbolizer, pids[i]);
			report_process(ctx, &snap, pids[i], &alive, final);
		}
		cp_stats_snapshot__release(&snap);
	}
	pthread_mutex_unlock(&ctx->lock);
}

static void on_tick(void *arg)
{
	report_all(arg, false);
}

int cp_cmd_stats(const union cp_options *options)
{
	const struct cp_stats_options *opts = &options->stats;
	CP_OPTS(cp_tracer_opts, tracer_opts);
	struct cp_wait_hooks hooks = { 0 };
	struct stats_ctx ctx = { 0 };
	struct cp_record_path path = { .on_record = on_record, .on_settled = on_settled,
				       .ctx = &ctx, .lock = &ctx.lock };
	struct cp_session session;
	size_t i;
	int exit_code;

	pthread_mutex_init(&ctx.lock, NULL);
	tracer_opts.aggregate = true;
	tracer_opts.no_call_records = true;
	tracer_opts.measure_latency = opts->latency;
	tracer_opts.record_stacks = opts->stacks;
	/* Processes cuprobe started exit at will: hold them until their stacks can be named. */
	tracer_opts.hold_for_stacks = opts->common.command != NULL;
	/* The timeline, and the Python lines, need the launches, syncs and events themselves. */
	tracer_opts.no_call_records = !opts->timeline && !opts->common.python;
	if (opts->timeline) {
		CP_OPTS(cp_timeline_opts, timeline_opts, .on_interval = on_interval, .ctx = &ctx);

		ctx.timeline = cp_timeline__new(&timeline_opts);
		ctx.nccl = cp_nccl_calls__new(0);
		if (!ctx.timeline || !ctx.nccl) {
			cp_timeline__free(ctx.timeline);
			cp_nccl_calls__free(ctx.nccl);
			cp_say("out of memory");
			return CP_EXIT_SETUP;
		}
	}
	ctx.session = &session;
	ctx.format = opts->common.format;
	ctx.latency = opts->latency;
	ctx.stacks = opts->stacks;
	ctx.python_by = opts->python_own ? CP_PY_SITE_OWN_CODE : CP_PY_SITE_INNERMOST;
	exit_code = cp_session__open(&session, &opts->common);
	if (!exit_code)
		exit_code = cp_session__attach(&session, &tracer_opts);
	if (exit_code)
		goto cleanup;
	if (session.python) {
		ctx.python = cp_py_sites__new(session.python, ctx.python_by);
		if (!ctx.python) {
			cp_say("out of memory");
			exit_code = CP_EXIT_SETUP;
			goto cleanup;
		}
	}
	for (i = 0; i < opts->common.pid_count; i++) {
		cp_symbolizer__refresh(session.symbolizer, opts->common.pids[i]);
		comm_of(&ctx, opts->common.pids[i]);
	}
	ctx.start_ns = monotonic_ns();
	path.timeline = ctx.timeline;
	exit_code = cp_record_path__start(&path, &session);
	if (!exit_code)
		exit_code = cp_session__start_command(&session);
	if (exit_code)
		goto cleanup;
	hooks.tick_ms = opts->interval_ms;
	hooks.tick = on_tick;
	hooks.ctx = &ctx;
	/* It drains at the end: exits already recorded get their final reports and leak checks. */
	cp_session__run(&session, &hooks, "counting");
	report_all(&ctx, true);
	cp_session__warn_losses(&session);
	cp_session__warn_python(&session);
	if (ctx.python_lost)
		cp_say("warning: %llu calls left out of the Python lines: out of memory", ctx.python_lost);
	cp_session__report_files(&session, ctx.format);
	fprintf(stderr, "cuprobe: %llu reports, %llu leak reports\n",
		(unsigned long long)ctx.reports, (unsigned long long)ctx.leak_reports);
	exit_code = cp_session__finish(&session);
cleanup:
	/* The agent, which feeds the timeline, is joined by close first. */
	cp_session__close(&session);
	cp_py_sites__free(ctx.python); /* the agent that fed it is joined */
	cp_timeline__free(ctx.timeline);
	cp_nccl_calls__free(ctx.nccl);
	free(ctx.nccl_gpu);
	cp_text__free(&ctx.text);
	pthread_mutex_destroy(&ctx.lock);
	return exit_code;
}
