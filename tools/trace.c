// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe trace`: discover libcuda, load and attach, start the GPU agent,
 * start or watch the targets, and stream every record as text or JSON.
 * All printing and exit codes of the trace command live here.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cli_options.h"
#include "cuprobe_internal.h"
#include "output_file.h"
#include "record_path.h"
#include "session.h"
#include "warnings.h"


/* Kernels in flight listed after an Xid, at most. */
#define XID_IN_FLIGHT_MAX 64

/* What the agent's callback needs: runs on the agent thread only. */
struct trace_output {
	struct cp_session *session;
	enum cp_format format;
	bool failed;
	bool intervals;            /* --timeline: a gpu_interval record per launch */
	uint64_t start_ns;
	uint64_t written;
	struct cp_timeline *timeline; /* always: an Xid names the kernels in flight */
	struct cp_text text;
	/* --perfetto FILE: its writer and what it appends before each write */
	struct cp_chrome_trace *perfetto;
	struct cp_text perfetto_text;
	bool perfetto_failed;
};

/* Writes a formatted piece; a failed write stops the session. */
static void write_text(struct trace_output *output, struct cp_text *text)
{
	if (!output->failed && text->len &&
	    !cp_session__write_text(output->session, &output->session->output, text, false))
		output->failed = true; /* ENOSPC, EPIPE...: nothing more can be written */
}

/* Writes what the Perfetto trace's writer appended; a failed write stops the session. */
static void write_perfetto(struct trace_output *output)
{
	struct cp_text *text = &output->perfetto_text;

	if (!output->perfetto_failed && text->len &&
	    !cp_session__write_text(output->session, &output->session->perfetto, text, false))
		output->perfetto_failed = true;
	cp_text__clear(text);
}

static void on_interval(void *ctx, const struct cp_gpu_interval *interval)
{
	struct trace_output *output = ctx;
	struct cp_text text = { 0 };

	if (output->failed)
		return; /* as for records: the session is stopping */
	if (output->perfetto && !output->perfetto_failed) {
		cp_chrome_trace__interval(output->perfetto, interval, &output->perfetto_text);
		write_perfetto(output);
	}
	if (!output->intervals || output->failed)
		return;
	cp_format__interval(&text, output->format, interval, output->session->names, output->start_ns);
	write_text(output, &text);
	cp_text__free(&text);
}

/* After an Xid: what its process had on the GPU. */
static void write_in_flight(struct trace_output *output, const struct cp_xid_event *xid)
{
	struct cp_gpu_interval in_flight[XID_IN_FLIGHT_MAX];
	struct cp_gpu_summary summary;
	uint32_t pid = cp_xid__process(xid);
	bool known = !cp_timeline__summary(output->timeline, pid, &summary);
	size_t count = known ? cp_timeline__in_flight(output->timeline, pid, in_flight,
						       XID_IN_FLIGHT_MAX) : 0;

	cp_text__clear(&output->text);
	cp_format__xid_in_flight(&output->text, output->format, xid, in_flight,
				 count < XID_IN_FLIGHT_MAX ? count : XID_IN_FLIGHT_MAX, known,
				 output->session->names);
	write_text(output, &output->text);
}

/* A record, as the format writes it, and its Perfetto events: names already learned from it. */
static int on_record(void *ctx, const union cp_event *event)
{
	struct trace_output *output = ctx;
	struct cp_names *names = output->session->names;
	char line[8192];
	int n;

	if (output->failed)
		return 0; /* the output is gone: records are counted, tracing is stopping */
	/* --python: a new stack, resolved by the agent; its calls carry its frames. */
	if (event->hdr.type == CP_EV_PY_STACK)
		return 0;
	if (output->session->python && cp_event__py_stack(event)) {
		/* A call with its Python stack: up to 64 frames, more than a line buffer holds. */
		cp_text__clear(&output->text);
		/* Out of memory leaves text->failed set: the write then stops the session. */
		if (!cp_format__record_python(&output->text, output->format, event, names,
					      output->session->python, output->start_ns))
			cp_text__append(&output->text, "\n", 1);
		write_text(output, &output->text);
		if (output->failed)
			return 0;
	} else {
		/* Returns are recorded for --perfetto's slices only: the output stays as without it. */
		n = event->hdr.type == CP_EV_RETURN ? -1 :
		    cp_format__record(output->format, event, names, output->start_ns, line, sizeof(line));
		if (n >= 0)
			line[n++] = '\n'; /* the formatter leaves room: n < sizeof(line) */
		if (n >= 0 && !cp_output__write(&output->session->output, line, (size_t)n, false)) {
			/* ENOSPC, EPIPE...: nothing more can be written; the session stops. */
			output->failed = true;
			cp_session__output_failed(output->session, errno);
			return 0;
		}
	}
	/* Before the timeline: a launch is in the trace before the interval it gets. */
	if (output->perfetto && !output->perfetto_failed) {
		cp_chrome_trace__record(output->perfetto, event, &output->perfetto_text);
		write_perfetto(output);
	}
	output->written++;
	return 0;
}

/* After the timeline has seen it: an Xid's kernels in flight; an exit's Perfetto state goes. */
static int on_settled(void *ctx, const union cp_event *event)
{
	struct trace_output *output = ctx;

	if (output->failed)
		return 0;
	if (event->hdr.type == CP_EV_XID)
		write_in_flight(output, &event->xid);
	/* Its exit record and the intervals it settled are written: the session forgets the rest. */
	if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT)
		cp_chrome_trace__forget_pid(output->perfetto, event->hdr.pid);
	return 0;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void print_summary(const struct cp_session *s)
{
	struct cp_agent_stats stats;
	struct cp_names_stats name_stats;
	struct cp_counters counters;
	bool have_counters = !cp_tracer__read_counters(s->tracer, &counters);

	cp_agent__stats(s->agent, &stats);
	cp_names__stats(s->names, &name_stats);
	fprintf(stderr, "cuprobe: %llu events delivered, %llu lost, %llu of %llu launches with unknown names\n",
		(unsigned long long)stats.delivered,
		have_counters ? (unsigned long long)counters.records_lost : 0ull,
		(unsigned long long)name_stats.launches_unnamed,
		(unsigned long long)name_stats.launches);
	cp_warnings__print(stderr, have_counters ? &counters : NULL, &stats);
	/* How names were checked is the internals' accounting: -v's, unless they disagreed. */
	if ((name_stats.driver_named || name_stats.driver_checked) &&
	    (cp_verbosity || name_stats.driver_mismatches))
		cp_say("%s%llu kernels named from the driver's records (%llu probe-learned names checked against them, %llu disagreed%s)",
		       name_stats.driver_mismatches ? "warning: " : "",
		       (unsigned long long)name_stats.driver_named,
		       (unsigned long long)name_stats.driver_checked,
		       (unsigned long long)name_stats.driver_mismatches,
		       name_stats.driver_mismatches ? ": records no longer read" : "");
	if (name_stats.stubs_unresolved)
		cp_say("warning: %llu host stubs could not be named", (unsigned long long)name_stats.stubs_unresolved);
	cp_session__warn_python(s);
}

/* Tracing ended (the agent is joined): the Perfetto trace's last slices and its end. */
static void finish_perfetto(struct trace_output *output)
{
	const char *path = output->session->perfetto_path;
	struct cp_chrome_trace_stats stats;

	if (!output->perfetto_failed) {
		cp_chrome_trace__finish(output->perfetto, &output->perfetto_text);
		write_perfetto(output);
	}
	cp_chrome_trace__stats(output->perfetto, &stats);
	if (cp_verbosity)
		cp_say("%s: %llu events: %llu API calls, %llu kernels (%llu more without a bound), %llu flows",
		       path, (unsigned long long)stats.events, (unsigned long long)stats.calls,
		       (unsigned long long)stats.kernels, (unsigned long long)stats.kernels_unbounded,
		       (unsigned long long)stats.flows);
	if (stats.calls_overlapping)
		cp_say("warning: %s: %llu API calls left out: their slices would overlap others of their thread",
		       path, (unsigned long long)stats.calls_overlapping);
	if (stats.allocations_untracked)
		cp_say("warning: %s: %llu allocations left out of live device memory (too many live in one process)",
		       path, (unsigned long long)stats.allocations_untracked);
}

int cp_cmd_trace(const union cp_options *options)
{
	const struct cp_trace_options *opts = &options->trace;
	CP_OPTS(cp_tracer_opts, tracer_opts);
	struct trace_output output = { 0 };
	struct cp_record_path path = { .on_record = on_record, .on_settled = on_settled,
				       .ctx = &output };
	struct cp_session session;
	uint64_t perfetto_base_ns;
	int exit_code;

	exit_code = cp_session__open(&session, &opts->common);
	if (!exit_code && opts->runtime)
		exit_code = cp_session__probe_runtime(&session, opts->cudarts, opts->cudart_count);
	session.perfetto_path = opts->perfetto;
	/* --perfetto: every call's return makes its slice; ts 0 precedes any probe's record. */
	tracer_opts.return_records = opts->perfetto != NULL;
	perfetto_base_ns = monotonic_ns();
	if (!exit_code)
		exit_code = cp_session__attach(&session, &tracer_opts);
	if (exit_code)
		goto cleanup;
	output.session = &session;
	output.format = opts->common.format;
	output.intervals = opts->timeline;
	output.start_ns = monotonic_ns();
	{
		CP_OPTS(cp_timeline_opts, timeline_opts, .on_interval = on_interval, .ctx = &output);

		output.timeline = cp_timeline__new(&timeline_opts);
	}
	if (opts->perfetto)
		output.perfetto = cp_chrome_trace__new(session.names, perfetto_base_ns);
	if (output.perfetto)
		cp_chrome_trace__set_python(output.perfetto, session.python);
	if (!output.timeline || (opts->perfetto && !output.perfetto)) {
		cp_say("out of memory");
		exit_code = CP_EXIT_SETUP;
		goto cleanup;
	}
	path.timeline = output.timeline;
	exit_code = cp_record_path__start(&path, &session);
	if (exit_code)
		goto cleanup;
	if (cp_format__header(output.format)) {
		char header[256];
		int n = snprintf(header, sizeof(header), "%s\n", cp_format__header(output.format));

		/* One write: the agent may be writing records already (system-wide). */
		if (n < 0 || (size_t)n >= sizeof(header) ||
		    !cp_output__write(&session.output, header, (size_t)n, false))
			cp_session__output_failed(&session, n < 0 || (size_t)n >= sizeof(header) ? EOVERFLOW : errno);
	}
	exit_code = cp_session__start_command(&session);
	if (exit_code)
		goto cleanup;
	cp_session__run(&session, NULL, "tracing");
	if (output.perfetto)
		finish_perfetto(&output);
	print_summary(&session);
	cp_session__report_files(&session, output.format);
	exit_code = cp_session__finish(&session);
cleanup:
	/* The agent (which feeds the timeline) is joined by close, before the timeline goes. */
	cp_session__close(&session);
	cp_timeline__free(output.timeline);
	cp_chrome_trace__free(output.perfetto);
	cp_text__free(&output.text);
	cp_text__free(&output.perfetto_text);
	return exit_code;
}
