// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe stats`: counting in BPF maps, reports per process every interval
 * and when a process exits, leak reports for device memory still live at
 * exit. Only names and lifecycle records cross the ring buffer.
 *
 * Two threads report: the agent (a process exited: its final report, then
 * its rows are removed) and the main thread (interval ticks). One lock
 * keeps their output and the name table whole.
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
#include "cuprobe.h"
#include "output_file.h"
#include "session.h"
#include "stats.h"

#define TOP_KERNELS_SHOWN 10
#define LEAK_SITES_SHOWN 10
#define MAX_COMMS 1024

struct comm_entry {
	uint32_t pid;
	char comm[17];
};

struct stats_ctx {
	struct cp_session *session;
	struct cp_names *names;
	struct cp_proc_maps *maps;
	FILE *out;
	bool json;
	bool latency;
	bool stacks;
	unsigned long long start_ns;
	pthread_mutex_t lock;
	struct comm_entry comms[MAX_COMMS];
	unsigned long long reports;
	unsigned long long leak_reports;
	int write_error;
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
	char path[64];
	FILE *file;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	file = fopen(path, "re");
	if (file) {
		char name[sizeof(slot->comm)] = "";

		if (fgets(name, sizeof(name), file)) {
			name[strcspn(name, "\n")] = '\0';
			slot->pid = pid;
			memcpy(slot->comm, name, sizeof(slot->comm));
		}
		fclose(file);
	}
	return slot->pid == pid ? slot->comm : "?";
}

static void json_string(FILE *out, const char *key, const char *value, bool comma)
{
	char escaped[4096];

	if (!value) {
		fprintf(out, "%s\"%s\":null", comma ? "," : "", key);
		return;
	}
	if (cp_json__escape(value, escaped, sizeof(escaped)) < 0)
		snprintf(escaped, sizeof(escaped), "(too long)");
	fprintf(out, "%s\"%s\":\"%s\"", comma ? "," : "", key, escaped);
}

static void json_element(FILE *out, const char *value, bool comma)
{
	char escaped[4096];

	if (cp_json__escape(value, escaped, sizeof(escaped)) < 0)
		snprintf(escaped, sizeof(escaped), "(too long)");
	fprintf(out, "%s\"%s\"", comma ? "," : "", escaped);
}

static int by_launches_desc(const void *a, const void *b)
{
	const struct cp_kernel_row *x = a, *y = b;

	return x->stat.launches < y->stat.launches ? 1 : x->stat.launches > y->stat.launches ? -1 : 0;
}

static int by_calls_desc(const void *a, const void *b)
{
	const struct cp_api_row *x = a, *y = b;

	return x->stat.calls < y->stat.calls ? 1 : x->stat.calls > y->stat.calls ? -1 : 0;
}

static const char *kernel_label(struct stats_ctx *ctx, const struct cp_kernel_row *row,
				const char **mangled, char *buf, size_t len)
{
	const struct cp_name_entry *name = cp_names__lookup(ctx->names, row->pid, row->handle);

	*mangled = name ? name->mangled : NULL;
	if (row->stat.graph)
		snprintf(buf, len, "<graph 0x%llx>", row->handle);
	else if (name)
		return name->display;
	else
		snprintf(buf, len, "<unnamed function 0x%llx>", row->handle);
	return buf;
}

static void human_bytes(unsigned long long bytes, char *buf, size_t len)
{
	if (bytes >= (1ull << 30))
		snprintf(buf, len, "%.2f GiB", bytes / (double)(1ull << 30));
	else if (bytes >= (1ull << 20))
		snprintf(buf, len, "%.2f MiB", bytes / (double)(1ull << 20));
	else if (bytes >= (1ull << 10))
		snprintf(buf, len, "%.2f KiB", bytes / 1024.0);
	else
		snprintf(buf, len, "%llu B", bytes);
}

static void human_ns(unsigned long long ns, char *buf, size_t len)
{
	if (!ns)
		snprintf(buf, len, "-");
	else if (ns >= 1000000000ull)
		snprintf(buf, len, "%.1fs", ns / 1e9);
	else if (ns >= 1000000ull)
		snprintf(buf, len, "%.1fms", ns / 1e6);
	else if (ns >= 1000ull)
		snprintf(buf, len, "%.1fus", ns / 1e3);
	else
		snprintf(buf, len, "%lluns", ns);
}

/* ---- one process's report ------------------------------------------------------ */

struct exit_info {
	bool exited;
	int exit_code; /* wait status as the kernel keeps it */
};

static void report_process(struct stats_ctx *ctx, const struct cp_stats_snapshot *snap, uint32_t pid,
			   const struct exit_info *exit_info, bool final)
{
	struct cp_kernel_row *kernels = calloc(snap->kernel_count + 1, sizeof(*kernels));
	struct cp_api_row *apis = calloc(snap->api_count + 1, sizeof(*apis));
	const struct cp_mem_stat *mem = NULL;
	size_t nk = 0, na = 0, i;
	const char *comm = comm_of(ctx, pid);
	unsigned long long rel = monotonic_ns() - ctx->start_ns;
	FILE *out = ctx->out;
	char label[128], a[32], b[32], c[32], d[32];

	if (!kernels || !apis)
		goto out;
	for (i = 0; i < snap->kernel_count; i++)
		if (snap->kernels[i].pid == pid)
			kernels[nk++] = snap->kernels[i];
	for (i = 0; i < snap->api_count; i++)
		if (snap->apis[i].pid == pid)
			apis[na++] = snap->apis[i];
	for (i = 0; i < snap->mem_count; i++)
		if (snap->mems[i].pid == pid)
			mem = &snap->mems[i].stat;
	qsort(kernels, nk, sizeof(*kernels), by_launches_desc);
	qsort(apis, na, sizeof(*apis), by_calls_desc);
	ctx->reports++;

	if (ctx->json) {
		fprintf(out, "{\"type\":\"stats\",\"time_ns\":%llu,\"pid\":%u", monotonic_ns(), pid);
		json_string(out, "comm", comm, true);
		fprintf(out, ",\"final\":%s,\"exited\":%s", final ? "true" : "false",
			exit_info->exited ? "true" : "false");
		if (exit_info->exited) {
			if (exit_info->exit_code & 0x7f)
				fprintf(out, ",\"signal\":%d", exit_info->exit_code & 0x7f);
			else
				fprintf(out, ",\"exit_status\":%d", (exit_info->exit_code >> 8) & 0xff);
		}
		fprintf(out, ",\"kernels\":[");
		for (i = 0; i < nk; i++) {
			const char *mangled, *shown = kernel_label(ctx, &kernels[i], &mangled, label,
								  sizeof(label));

			fprintf(out, "%s{\"handle\":\"0x%llx\"", i ? "," : "", kernels[i].handle);
			json_string(out, "kernel", shown, true);
			json_string(out, "mangled", mangled, true);
			fprintf(out, ",\"launches\":%llu,\"threads\":%llu,\"graph\":%s}",
				kernels[i].stat.launches, kernels[i].stat.threads,
				kernels[i].stat.graph ? "true" : "false");
		}
		fprintf(out, "],\"apis\":[");
		for (i = 0; i < na; i++) {
			const struct cp_api_stat *st = &apis[i].stat;
			int bucket, first = 1;

			fprintf(out, "%s{\"api\":\"%s\",\"calls\":%llu", i ? "," : "",
				cp_api__name(apis[i].api), st->calls);
			if (ctx->latency) {
				fprintf(out, ",\"timed\":%llu,\"errors\":%llu"
					",\"mean_ns\":%llu,\"p50_ns\":%llu,\"p90_ns\":%llu"
					",\"p99_ns\":%llu,\"max_ns\":%llu,\"histogram\":[",
					st->timed, st->errors, st->timed ? st->total_ns / st->timed : 0,
					cp_histogram__percentile(st->histogram, 0.5),
					cp_histogram__percentile(st->histogram, 0.9),
					cp_histogram__percentile(st->histogram, 0.99),
					cp_histogram__percentile(st->histogram, 1.0));
				for (bucket = 0; bucket < CP_HIST_BUCKETS; bucket++) {
					if (!st->histogram[bucket])
						continue;
					fprintf(out, "%s{\"le_ns\":%llu,\"count\":%llu}",
						first ? "" : ",", bucket ? 1ull << bucket : 1ull,
						st->histogram[bucket]);
					first = 0;
				}
				fprintf(out, "]");
			}
			fprintf(out, "}");
		}
		fprintf(out, "]");
		if (mem)
			fprintf(out, ",\"memory\":{\"live_bytes\":%llu,\"peak_bytes\":%llu"
				",\"live_allocations\":%llu,\"vmm_live_bytes\":%llu"
				",\"vmm_peak_bytes\":%llu"
				",\"reserved_bytes\":%llu,\"host_live_bytes\":%llu"
				",\"host_live_allocations\":%llu"
				",\"allocations\":%llu,\"frees\":%llu"
				",\"unknown_frees\":%llu}",
				mem->live_bytes, mem->peak_bytes, mem->live_allocations,
				mem->vmm_live_bytes, mem->vmm_peak_bytes, mem->reserved_bytes,
				mem->host_live_bytes,
				mem->host_live_allocations, mem->allocations, mem->frees,
				mem->unknown_frees);
		else
			fprintf(out, ",\"memory\":null");
		fprintf(out, "}\n");
		goto out;
	}

	if (exit_info->exited && (exit_info->exit_code & 0x7f))
		fprintf(out, "== pid %u (%s) exited on signal %d, at %.3f s ==\n", pid, comm,
			exit_info->exit_code & 0x7f, rel / 1e9);
	else if (exit_info->exited)
		fprintf(out, "== pid %u (%s) exited with status %d, at %.3f s ==\n", pid, comm,
			(exit_info->exit_code >> 8) & 0xff, rel / 1e9);
	else
		fprintf(out, "== pid %u (%s)%s at %.3f s ==\n", pid, comm, final ? " when tracing stopped," : "",
			rel / 1e9);
	fprintf(out, "  kernels: %zu%s\n", nk, nk > TOP_KERNELS_SHOWN ? " (top 10 by launches)" : "");
	if (nk)
		fprintf(out, "    %12s %16s  %s\n", "launches", "threads", "kernel");
	for (i = 0; i < nk && i < TOP_KERNELS_SHOWN; i++) {
		const char *mangled;

		fprintf(out, "    %12llu %16llu  %s\n", kernels[i].stat.launches,
			kernels[i].stat.threads, kernel_label(ctx, &kernels[i], &mangled, label,
							      sizeof(label)));
	}
	fprintf(out, "  api calls:\n");
	if (ctx->latency)
		fprintf(out, "    %12s %8s %9s %9s %9s %9s  %s\n", "calls", "errors", "mean", "p50<=",
			"p99<=", "max<=", "api");
	else if (na)
		fprintf(out, "    %12s  %s\n", "calls", "api");
	for (i = 0; i < na; i++) {
		const struct cp_api_stat *st = &apis[i].stat;

		if (!ctx->latency) {
			fprintf(out, "    %12llu  %s\n", st->calls, cp_api__name(apis[i].api));
			continue;
		}
		human_ns(st->timed ? st->total_ns / st->timed : 0, a, sizeof(a));
		human_ns(cp_histogram__percentile(st->histogram, 0.5), b, sizeof(b));
		human_ns(cp_histogram__percentile(st->histogram, 0.99), c, sizeof(c));
		human_ns(cp_histogram__percentile(st->histogram, 1.0), d, sizeof(d));
		fprintf(out, "    %12llu %8llu %9s %9s %9s %9s  %s\n", st->calls,
			st->errors, a, b, c, d, cp_api__name(apis[i].api));
	}
	if (mem) {
		human_bytes(mem->live_bytes, a, sizeof(a));
		human_bytes(mem->peak_bytes, b, sizeof(b));
		fprintf(out, "  device memory: %s live in %llu allocations, peak %s", a,
			mem->live_allocations, b);
		if (mem->vmm_live_bytes || mem->reserved_bytes) {
			human_bytes(mem->vmm_live_bytes, c, sizeof(c));
			human_bytes(mem->reserved_bytes, d, sizeof(d));
			fprintf(out, " (VMM physical %s live, %s of addresses reserved)", c, d);
		}
		fprintf(out, "; %llu allocations, %llu frees", mem->allocations, mem->frees);
		if (mem->unknown_frees)
			fprintf(out, " (%llu of pointers allocated before tracing)",
				mem->unknown_frees);
		fputc('\n', out);
		human_bytes(mem->host_live_bytes, c, sizeof(c));
		fprintf(out, "  pinned host memory: %s live in %llu allocations\n", c,
			mem->host_live_allocations);
	}
out:
	free(kernels);
	free(apis);
	if (ferror(out) && !ctx->write_error)
		ctx->write_error = errno ? errno : EIO;
}

/* ---- leak reports ---------------------------------------------------------------- */

struct leak_site {
	long long stack_id;
	unsigned long long caller;
	uint32_t kind;
	uint32_t api;
	unsigned long long allocations;
	unsigned long long bytes;
};

static int by_bytes_desc(const void *a, const void *b)
{
	const struct leak_site *x = a, *y = b;

	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static void report_leaks(struct stats_ctx *ctx, uint32_t pid)
{
	struct cp_live_alloc *allocs = NULL;
	struct leak_site *sites;
	size_t count = 0, site_count = 0, i, j;
	unsigned long long total_bytes = 0, total = 0;
	const char *comm = comm_of(ctx, pid);
	FILE *out = ctx->out;

	if (cp_tracer__live_allocs(ctx->session->tracer, pid, &allocs, &count) || !count) {
		free(allocs);
		return;
	}
	sites = calloc(count, sizeof(*sites));
	if (!sites) {
		free(allocs);
		return;
	}
	/* Grouped by allocating stack (or by API when stacks are off). */
	for (i = 0; i < count; i++) {
		const struct cp_alloc_info *info = &allocs[i].info;

		if (info->kind == CP_MEM_HOST)
			continue; /* pinned host memory is not device memory */
		total++;
		total_bytes += info->bytes;
		for (j = 0; j < site_count; j++)
			if (sites[j].stack_id == info->stack_id && sites[j].api == info->api &&
			    sites[j].caller == info->caller)
				break;
		if (j == site_count)
			sites[site_count++] = (struct leak_site){ .stack_id = info->stack_id,
								  .caller = info->caller,
								  .kind = info->kind, .api = info->api };
		sites[j].allocations++;
		sites[j].bytes += info->bytes;
	}
	if (!total)
		goto out;
	ctx->leak_reports++;
	qsort(sites, site_count, sizeof(*sites), by_bytes_desc);
	if (ctx->json) {
		fprintf(out, "{\"type\":\"leak_report\",\"pid\":%u", pid);
		json_string(out, "comm", comm, true);
		fprintf(out, ",\"allocations\":%llu,\"bytes\":%llu,\"sites\":[", total,
			total_bytes);
	} else {
		fprintf(out, "  LEAK: %llu device allocations, %llu"
			" bytes still live when pid %u (%s) exited\n", total, total_bytes, pid, comm);
	}
	for (i = 0; i < site_count && i < LEAK_SITES_SHOWN; i++) {
		__u64 walked[CP_STACK_DEPTH], ips[CP_STACK_DEPTH + 1];
		int walked_depth = sites[i].stack_id >= 0 ?
			cp_tracer__stack(ctx->session->tracer, sites[i].stack_id, walked,
					 CP_STACK_DEPTH) : -1;
		int depth = -1, w;

		/* The walk from an entry probe skips the immediate caller: put it back. */
		if (walked_depth > 0) {
			ips[0] = walked[0];
			depth = 1;
			if (sites[i].caller)
				ips[depth++] = sites[i].caller;
			for (w = 1; w < walked_depth; w++)
				ips[depth++] = walked[w];
		}
		char frame[1024];
		int f;

		if (ctx->json) {
			fprintf(out, "%s{\"allocations\":%llu,\"bytes\":%llu"
				",\"kind\":\"%s\",\"api\":\"%s\",\"stack\":", i ? "," : "",
				sites[i].allocations, sites[i].bytes, cp_mem_kind__name(sites[i].kind),
				cp_api__name(sites[i].api));
			if (depth < 0) {
				fprintf(out, "null}");
				continue;
			}
			fputc('[', out);
			for (f = 0; f < depth; f++) {
				cp_proc_maps__symbolize(ctx->maps, pid, ips[f], frame, sizeof(frame));
				json_element(out, frame, f > 0);
			}
			fprintf(out, "]}");
			continue;
		}
		fprintf(out, "    %llu bytes in %llu allocations (%s, %s)%s\n",
			sites[i].bytes, sites[i].allocations, cp_mem_kind__name(sites[i].kind),
			cp_api__name(sites[i].api), depth < 0 ? ctx->stacks ?
			" stack not captured" : " (--stacks shows where)" : "");
		for (f = 0; f < depth; f++) {
			cp_proc_maps__symbolize(ctx->maps, pid, ips[f], frame, sizeof(frame));
			fprintf(out, "        #%d %s\n", f, frame);
		}
	}
	if (ctx->json)
		fprintf(out, "]}\n");
out:
	free(sites);
	free(allocs);
}

/* ---- the two reporting threads ------------------------------------------------------ */

static int on_event(void *arg, const union cp_event *event)
{
	struct stats_ctx *ctx = arg;
	struct cp_stats_snapshot snap;

	pthread_mutex_lock(&ctx->lock);
	/* An exit is reported before the name table forgets the process. */
	if (!(event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT))
		cp_names__observe(ctx->names, event);
	if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_CUDA_INIT) {
		/* Alive and in cuInit: its libraries are mapped; keep them for leak stacks. */
		cp_proc_maps__refresh(ctx->maps, event->hdr.pid);
		comm_of(ctx, event->hdr.pid);
	} else if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT) {
		struct exit_info info = { .exited = true, .exit_code = event->proc.exit_code };
		uint32_t pid = event->hdr.pid;

		if (!cp_tracer__snapshot(ctx->session->tracer, pid, &snap)) {
			if (snap.kernel_count || snap.api_count || snap.mem_count) {
				report_process(ctx, &snap, pid, &info, true);
				report_leaks(ctx, pid);
				fflush(ctx->out);
			}
			cp_stats_snapshot__release(&snap);
		}
		/* Read, reported: now its rows go, so the maps stay bounded by live processes. */
		cp_tracer__forget_pid(ctx->session->tracer, pid);
		cp_proc_maps__forget(ctx->maps, pid);
		cp_names__observe(ctx->names, event);
	}
	pthread_mutex_unlock(&ctx->lock);
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
				cp_proc_maps__refresh(ctx->maps, pids[i]);
			report_process(ctx, &snap, pids[i], &alive, final);
		}
		cp_stats_snapshot__release(&snap);
		fflush(ctx->out);
	}
	pthread_mutex_unlock(&ctx->lock);
}

static void on_tick(void *arg)
{
	report_all(arg, false);
}

static void warn_overflows(const struct cp_tracer *tracer)
{
	struct cp_counters c;

	if (cp_tracer__read_counters(tracer, &c))
		return;
	if (c.targets_overflow)
		cp_say("warning: %llu processes did not fit in the traced set",
		       (unsigned long long)c.targets_overflow);
	if (c.pending_overflow || c.pending_missed)
		cp_say("warning: %llu allocation calls lost their return state, %llu returns unmatched",
		       (unsigned long long)c.pending_overflow, (unsigned long long)c.pending_missed);
	if (c.kernel_stats_full)
		cp_say("warning: %llu launches of kernels that did not fit in the kernel map",
		       (unsigned long long)c.kernel_stats_full);
	if (c.api_stats_full)
		cp_say("warning: %llu calls that did not fit in the API map",
		       (unsigned long long)c.api_stats_full);
	if (c.mem_stats_full)
		cp_say("warning: %llu memory updates for processes that did not fit in the memory map",
		       (unsigned long long)c.mem_stats_full);
	if (c.live_allocs_full)
		cp_say("warning: %llu allocations not tracked (live allocation map full): live bytes undercount",
		       (unsigned long long)c.live_allocs_full);
	if (c.stacks_lost)
		cp_say("warning: %llu allocation stacks not captured", (unsigned long long)c.stacks_lost);
	if (c.call_start_full)
		cp_say("warning: %llu calls not timed (start map full)",
		       (unsigned long long)c.call_start_full);
	if (c.records_lost)
		cp_say("warning: %llu name/lifecycle records lost to a full ring buffer",
		       (unsigned long long)c.records_lost);
}

int cp_cmd_stats(int argc, char **argv)
{
	struct cp_tracer_opts tracer_opts = { .sz = sizeof(tracer_opts) };
	struct cp_agent_opts agent_opts = { .sz = sizeof(agent_opts) };
	struct cp_wait_hooks hooks = { 0 };
	struct stats_ctx ctx = { .out = stdout };
	struct cp_symbolizer *symbolizer = NULL;
	struct cp_trace_options opts;
	struct cp_agent *agent = NULL;
	struct cp_session session;
	int exit_code;

	exit_code = cp_session__parse(CP_CMD_STATS, argc, argv, &opts);
	if (exit_code >= 0)
		return exit_code;
	pthread_mutex_init(&ctx.lock, NULL);
	tracer_opts.aggregate = true;
	tracer_opts.no_call_records = true;
	tracer_opts.measure_latency = opts.latency;
	tracer_opts.record_stacks = opts.stacks;
	exit_code = cp_session__open(&session, &opts);
	if (exit_code)
		goto cleanup;
	exit_code = CP_EXIT_SETUP;
	ctx.session = &session;
	ctx.json = opts.json;
	ctx.latency = opts.latency;
	ctx.stacks = opts.stacks;
	symbolizer = cp_symbolizer__new();
	ctx.names = cp_names__new(symbolizer);
	ctx.maps = cp_proc_maps__new();
	if (!symbolizer || !ctx.names || !ctx.maps) {
		cp_say("out of memory");
		goto cleanup;
	}
	cp_names__read_driver_records(ctx.names, true);
	ctx.out = cp_session__open_output(&session, opts.output);
	if (!ctx.out) {
		ctx.out = stdout;
		goto cleanup;
	}
	exit_code = cp_session__attach(&session, &tracer_opts);
	if (exit_code)
		goto cleanup;
	exit_code = CP_EXIT_SETUP;
	for (size_t i = 0; i < opts.pid_count; i++) {
		cp_proc_maps__refresh(ctx.maps, opts.pids[i]);
		comm_of(&ctx, opts.pids[i]);
	}
	ctx.start_ns = monotonic_ns();
	agent_opts.on_event = on_event;
	agent_opts.tracer = session.tracer;
	agent_opts.ctx = &ctx;
	agent = cp_agent__new(cp_tracer__ring_fd(session.tracer), &agent_opts);
	if (!agent || cp_agent__start(agent)) {
		cp_say("cannot start the GPU agent: %s", strerror(errno));
		goto cleanup;
	}
	exit_code = cp_session__start_command(&session);
	if (exit_code)
		goto cleanup;
	hooks.tick_ms = opts.interval_ms;
	hooks.tick = on_tick;
	hooks.ctx = &ctx;
	cp_session__wait(&session, &hooks);

	/* Drain first: exits already recorded get their final reports and leak checks. */
	cp_agent__stop(agent);
	report_all(&ctx, true);
	warn_overflows(session.tracer);
	cp_session__report_files(&session);
	fprintf(stderr, "cuprobe: %llu reports, %llu leak reports\n",
		(unsigned long long)ctx.reports, (unsigned long long)ctx.leak_reports);
	if (ctx.write_error)
		cp_say("cannot write reports: %s", strerror(ctx.write_error));
	exit_code = cp_session__exit_code(&session);

cleanup:
	cp_agent__free(agent);
	cp_session__close(&session);
	exit_code = cp_session__close_output(ctx.out, opts.output, exit_code);
	cp_proc_maps__free(ctx.maps);
	cp_names__free(ctx.names);
	cp_symbolizer__free(symbolizer);
	pthread_mutex_destroy(&ctx.lock);
	return exit_code;
}
