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
#include "cuprobe.h"
#include "output_file.h"
#include "session.h"
#include "trace.h"


/* What the agent's callback needs: runs on the agent thread only. */
struct trace_output {
	FILE *out;
	struct cp_names *names;
	bool json;
	uint64_t start_ns;
	uint64_t written;
	int write_error;
};

static int on_event(void *ctx, const union cp_event *event)
{
	struct trace_output *output = ctx;
	char line[8192];
	int n;

	cp_names__observe(output->names, event);
	if (output->json)
		n = cp_format__json(event, output->names, line, sizeof(line));
	else
		n = cp_format__text(event, output->names, output->start_ns, line, sizeof(line));
	if (n < 0)
		return 0; /* cannot happen with this buffer; never stop the agent for it */
	if (fputs(line, output->out) == EOF || fputc('\n', output->out) == EOF) {
		output->write_error = errno ? errno : EIO;
		return -output->write_error; /* stops the agent: output is gone (EPIPE, ENOSPC) */
	}
	output->written++;
	return 0;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void print_summary(const struct cp_tracer *tracer, const struct cp_agent *agent,
			  const struct cp_names *names)
{
	struct cp_agent_stats stats;
	struct cp_names_stats name_stats;
	struct cp_counters counters;
	bool have_counters = !cp_tracer__read_counters(tracer, &counters);

	cp_agent__stats(agent, &stats);
	cp_names__stats(names, &name_stats);
	fprintf(stderr, "cuprobe: %llu events delivered, %llu lost, %llu of %llu launches with unknown names\n",
		(unsigned long long)stats.delivered,
		have_counters ? (unsigned long long)counters.records_lost : 0ull,
		(unsigned long long)name_stats.launches_unnamed,
		(unsigned long long)name_stats.launches);
	if (have_counters && counters.records_lost)
		cp_say("warning: %llu records were lost to a full ring buffer; try --ring-size",
		    (unsigned long long)counters.records_lost);
	if (stats.malformed)
		cp_say("warning: %llu malformed records dropped", (unsigned long long)stats.malformed);
	if (have_counters && (counters.pending_overflow || counters.pending_missed))
		cp_say("warning: %llu allocation/name calls lost their return state, %llu returns unmatched",
		    (unsigned long long)counters.pending_overflow,
		    (unsigned long long)counters.pending_missed);
	if (have_counters && counters.targets_overflow)
		cp_say("warning: %llu processes did not fit in the traced set",
		    (unsigned long long)counters.targets_overflow);
	if (name_stats.driver_named || name_stats.driver_checked)
		cp_say("%llu kernels named from the driver's records (%llu probe-learned names checked against them, %llu disagreed%s)",
		       (unsigned long long)name_stats.driver_named,
		       (unsigned long long)name_stats.driver_checked,
		       (unsigned long long)name_stats.driver_mismatches,
		       name_stats.driver_mismatches ? ": records no longer read" : "");
	if (name_stats.stubs_unresolved)
		cp_say("warning: %llu host stubs could not be named", (unsigned long long)name_stats.stubs_unresolved);
	if (stats.thread_error)
		cp_say("warning: the agent stopped on an error: %s", strerror(-stats.thread_error));
}

int cp_cmd_trace(int argc, char **argv)
{
	struct cp_tracer_opts tracer_opts = { .sz = sizeof(tracer_opts) };
	struct cp_agent_opts agent_opts = { .sz = sizeof(agent_opts) };
	struct trace_output output = { .out = stdout };
	struct cp_symbolizer *symbolizer = NULL;
	struct cp_trace_options opts;
	struct cp_agent *agent = NULL;
	struct cp_session session;
	int exit_code;

	exit_code = cp_session__parse(CP_CMD_TRACE, argc, argv, &opts);
	if (exit_code >= 0)
		return exit_code;
	exit_code = cp_session__open(&session, &opts);
	if (exit_code)
		goto cleanup;
	exit_code = CP_EXIT_SETUP;
	symbolizer = cp_symbolizer__new();
	output.names = cp_names__new(symbolizer);
	if (!symbolizer || !output.names) {
		cp_say("out of memory");
		goto cleanup;
	}
	cp_names__read_driver_records(output.names, true);
	if (opts.command)
		cp_symbolizer__add_file(symbolizer, session.command_path);
	output.out = cp_session__open_output(&session, opts.output);
	if (!output.out) {
		output.out = stdout;
		goto cleanup;
	}
	output.json = opts.json;
	exit_code = cp_session__attach(&session, &tracer_opts);
	if (exit_code)
		goto cleanup;
	exit_code = CP_EXIT_SETUP;

	output.start_ns = monotonic_ns();
	agent_opts.on_event = on_event;
	agent_opts.tracer = session.tracer;
	agent_opts.ctx = &output;
	agent = cp_agent__new(cp_tracer__ring_fd(session.tracer), &agent_opts);
	if (!agent || cp_agent__start(agent)) {
		cp_say("cannot start the GPU agent: %s", strerror(errno));
		goto cleanup;
	}
	if (!opts.json)
		fprintf(output.out, "%s\n", cp_format__text_header());
	exit_code = cp_session__start_command(&session);
	if (exit_code)
		goto cleanup;
	if (cp_verbosity)
		cp_say("tracing (%u probes, %u links); Ctrl-C stops", cp_tracer__probe_count(session.tracer),
		       cp_tracer__link_count(session.tracer));
	cp_session__wait(&session, NULL);

	/* Wake, drain, join: every record committed so far is delivered before the summary. */
	cp_agent__stop(agent);
	if (output.write_error)
		cp_say("cannot write events: %s", strerror(output.write_error));
	print_summary(session.tracer, agent, output.names);
	cp_session__report_files(&session);
	exit_code = cp_session__exit_code(&session);

cleanup:
	cp_agent__free(agent);
	cp_session__close(&session);
	exit_code = cp_session__close_output(output.out, opts.output, exit_code);
	cp_names__free(output.names);
	cp_symbolizer__free(symbolizer);
	return exit_code;
}
