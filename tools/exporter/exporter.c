// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe exporter`: the node agent. Every CUDA process on the host counted
 * in BPF maps; every interval the main thread reads the maps, names what it
 * reads (processes, containers, GPUs, kernels: processes.c) and gathers the
 * series (the table of families.c); libmicrohttpd's own thread serves the
 * latest ones on /metrics (http.c).
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
 * at a scrape, from the latest series, so the agent (exits, names) never
 * waits on a build.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_options.h"
#include "exporter.h"
#include "session.h"

#ifdef CUPROBE_NO_EXPORTER
int cp_cmd_exporter(const union cp_options *opts)
{
	(void)opts;
	cp_say("this cuprobe was built static (CUPROBE_STATIC), without the exporter's HTTP server: use a regular build");
	return CP_EXIT_SETUP;
}
#else

#define DEFAULT_LISTEN "127.0.0.1:9466"
#define DEFAULT_INTERVAL_MS 5000
#define DEFAULT_MAX_KERNELS 50
#define DEFAULT_KEEP_EXITED_MS (300 * 1000ull)

uint64_t exporter__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* ---- the agent's records -------------------------------------------------------------- */

static void count_attach(struct exporter *x, const struct cp_attach_event *attach)
{
	const char *values[] = { cp_attach_status__name(attach->status) };

	family__add(&x->attaches, values, 1);
	if (attach->status == CP_ATTACH_ATTACHED && attach->probes_live_ns > attach->hdr.time_ns) {
		struct cp_metric_sample *s = cp_metric_family__find(&x->attach_delay, values);
		uint64_t delay = attach->probes_live_ns - attach->hdr.time_ns;

		if (s) {
			s->buckets[cp_log2_bucket(delay)]++;
			s->count++;
			s->sum += delay / 1e9;
		}
	}
}

static void count_xid(struct exporter *x, const struct cp_xid_event *xid)
{
	struct process *p = processes__of_xid(x, cp_xid__process(xid));
	const char *values[CP_METRIC_LABELS_MAX];
	char pid[16], code[16];

	snprintf(code, sizeof(code), "%u", xid->error_code);
	if (p)
		process__label_values(p, false, pid, values);
	else
		values[0] = values[1] = values[2] = values[3] = values[4] = "";
	values[5] = xid->dev;
	values[6] = code;
	family__add(p ? &p->xids : &x->unattributed_xids, values, 1);
}

/* The record path holds x->lock around this and has observed the names. */
static int on_record(void *arg, const union cp_event *event)
{
	struct exporter *x = arg;

	switch (event->hdr.type) {
	case CP_EV_PROC:
		processes__on_record(x, &event->proc, event->hdr.pid);
		break;
	case CP_EV_ATTACH:
		count_attach(x, &event->attach);
		break;
	case CP_EV_XID:
		count_xid(x, &event->xid);
		break;
	default:
		break;
	}
	return 0;
}

/* ---- the refresh (main thread, every interval) ---------------------------------------- */

/* Reads the maps and gathers the series; they replace the served ones at the end. */
static void refresh(struct exporter *x)
{
	struct cp_metric_family *f = families__new(), *old;
	struct cp_stats_snapshot snap;
	struct cp_counters counters;
	struct process *p;
	uint64_t now = exporter__now_ns(), running = 0, kept = 0;
	bool have_counters;

	if (!f) {
		cp_say("warning: the metrics could not be read (out of memory)");
		return;
	}
	pthread_mutex_lock(&x->lock);
	gpus__read(x);
	if (!cp_tracer__snapshot(x->session->tracer, 0, &snap)) {
		size_t i;

		rows__sort(&snap);
		/* Processes with rows: known, or new. */
		for (i = 0; i < snap.api_count; i++)
			if (!i || snap.apis[i].pid != snap.apis[i - 1].pid)
				process__live(x, snap.apis[i].pid);
		processes__retire_exited(x, &snap, now);
		for (p = x->processes; p; p = p->next)
			if (!p->exited)
				families__fill_process(f, &(struct process_rows){ .x = x, .p = p,
										.snap = &snap });
		cp_stats_snapshot__release(&snap);
	}
	processes__fold_expired(x, now);
	for (p = x->processes; p; p = p->next) {
		if (!p->exited) {
			running++;
			continue;
		}
		kept++;
		families__fill_process(f, &(struct process_rows){ .x = x, .p = p, .snap = &p->final,
								  .kernel_names = p->final_kernel_names });
	}
	have_counters = !cp_tracer__read_counters(x->session->tracer, &counters);
	families__fill_host(f, x, have_counters ? &counters : NULL, running, kept);
	pthread_mutex_unlock(&x->lock);
	/* Swapped under the served lock: a scrape builds from the latest. */
	pthread_mutex_lock(&x->served_lock);
	old = x->series;
	x->series = f;
	x->generation++;
	pthread_mutex_unlock(&x->served_lock);
	families__free(old);
}

static void on_tick(void *arg)
{
	refresh(arg);
}

int cp_cmd_exporter(const union cp_options *options)
{
	const struct cp_exporter_options *opts = &options->exporter;
	const char *listen = opts->listen ? opts->listen : DEFAULT_LISTEN;
	CP_OPTS(cp_tracer_opts, tracer_opts, .aggregate = true, .no_call_records = true);
	struct cp_wait_hooks hooks = { 0 };
	struct exporter x = { 0 };
	struct cp_session session;
	struct cp_listen address;
	int exit_code, gai_error;

	switch (cp_listen__parse(listen, &address, &gai_error)) {
	case 0:
		break;
	case -ENOENT:
		cp_say("--listen %s: the name does not resolve (%s)", listen, gai_strerror(gai_error));
		return CP_EXIT_USAGE;
	default:
		cp_say("invalid --listen '%s': expected ADDR:PORT, ADDR an IPv4 address, an IPv6 address in brackets or a host name, PORT 1 to 65535",
		       listen);
		return CP_EXIT_USAGE;
	}
	if (!address.loopback && !opts->allow_remote) {
		cp_say("--listen %s is not a loopback address: add --allow-remote to serve it (anyone who reaches it reads every CUDA process's metrics)",
		       listen);
		return CP_EXIT_USAGE;
	}
	x.latency = opts->latency;
	x.max_kernels = opts->max_kernels ? opts->max_kernels : DEFAULT_MAX_KERNELS;
	x.keep_exited_ns = (opts->keep_exited_set ? opts->keep_exited_ms : DEFAULT_KEEP_EXITED_MS) * 1000000ull;
	pthread_mutex_init(&x.lock, NULL);
	pthread_mutex_init(&x.served_lock, NULL);
	x.folded = families__new();
	families__init_counts(&x);
	x.bound.max_cgroups = FOLDED_CGROUPS_MAX;
	x.bound.max_kernels = x.max_kernels;
	tracer_opts.measure_latency = opts->latency;
	x.session = &session;
	exit_code = cp_session__open(&session, &opts->common);
	if (!exit_code && !x.folded) {
		cp_say("out of memory");
		exit_code = CP_EXIT_SETUP;
	}
	if (!exit_code)
		exit_code = cp_session__attach(&session, &tracer_opts);
	if (!exit_code) {
		/* Exited processes keep their rows until folded: forgotten by processes.c. */
		x.path = (struct cp_record_path){ .on_record = on_record, .ctx = &x, .lock = &x.lock,
						  .forget_later = true };
		exit_code = cp_record_path__start(&x.path, &session);
	}
	if (exit_code)
		goto cleanup;
	refresh(&x);
	if (http__serve(&x, &address)) {
		cp_say("cannot serve on %s: %s", address.shown, strerror(errno ? errno : EADDRINUSE));
		exit_code = CP_EXIT_SETUP;
		goto cleanup;
	}
	/* A name is served on one of its addresses: which one is said. */
	if (strcmp(listen, address.shown))
		cp_say("serving metrics on http://%s/metrics (%s); Ctrl-C stops", listen, address.shown);
	else
		cp_say("serving metrics on http://%s/metrics; Ctrl-C stops", listen);
	hooks.tick_ms = opts->interval_ms ? opts->interval_ms : DEFAULT_INTERVAL_MS;
	hooks.tick = on_tick;
	hooks.ctx = &x;
	cp_session__wait(&session, &hooks);
	/* The server's thread first, then the agent: nothing reads what is freed below. */
	http__stop(&x);
	cp_session__stop_agent(&session);
	exit_code = cp_session__finish(&session);
	/* Stopped by a signal is how an exporter ends: not a failure. */
	if (exit_code >= 128 && session.end == CP_END_SIGNAL)
		exit_code = 0;
cleanup:
	http__stop(&x);
	cp_session__close(&session);
	processes__free(&x);
	families__free(x.folded);
	families__release_counts(&x);
	cp_fold_bound__release(&x.bound);
	for (int e = 0; e < 3; e++)
		cp_text__free(&x.served[e]);
	families__free(x.series);
	pthread_mutex_destroy(&x.lock);
	pthread_mutex_destroy(&x.served_lock);
	return exit_code;
}
#endif /* CUPROBE_NO_EXPORTER */
