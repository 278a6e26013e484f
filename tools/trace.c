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
#include "spawn.h"
#include "trace.h"

#define LIBCUDA "libcuda.so.1"
#define EXIT_SETUP 1
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 127
#define MAX_SEEDED_PIDS 4096

static int verbosity;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("cuprobe: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void log_to_stderr(void *ctx, enum cp_log_level level, const char *message)
{
	if ((int)level <= verbosity)
		say("%s", message);
}

static int libbpf_to_stderr(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's own chatter (missing symbols included) only at -vv. */
	if (verbosity < 2 || (level == LIBBPF_DEBUG && verbosity < 3))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

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

static bool process_exists(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d", pid);
	return !access(path, F_OK);
}

static int check_privileges(void)
{
	if (geteuid() != 0) {
		say("must run as root (loading BPF needs CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN); try sudo");
		return -EPERM;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		say("the kernel has no BTF (/sys/kernel/btf/vmlinux missing): CONFIG_DEBUG_INFO_BTF=y is required");
		return -ENOTSUP;
	}
	return 0;
}

/* Libraries to attach the driver probes to; -ESRCH etc. already reported. */
static int discover_driver(const struct cp_trace_options *opts, const char *command_path,
			   struct cp_lib_set *libs)
{
	size_t i;
	int n;

	for (i = 0; i < opts->lib_count; i++) {
		n = cp_lib_set__add(libs, opts->libs[i]);
		if (n < 0) {
			say("--lib %s: %s", opts->libs[i],
			    n == -EINVAL ? "not a regular file" : strerror(-n));
			return EXIT_USAGE;
		}
	}
	for (i = 0; i < opts->pid_count; i++) {
		pid_t pid = opts->pids[i];

		n = cp_discover__process(libs, pid, LIBCUDA);
		if (n == -ESRCH || !process_exists(pid)) {
			say("PID %d: no such process", pid);
			return EXIT_SETUP;
		}
		if (n < 0) {
			say("PID %d: cannot read its memory maps: %s", pid, strerror(-n));
			return EXIT_SETUP;
		}
		if (n == 0 && !opts->lib_count) {
			struct cp_lib_set *own = cp_lib_set__new();
			bool uses = own && cp_discover__process(own, pid, LIBCUDA) > 0;

			cp_lib_set__free(own);
			if (!uses) {
				say("PID %d does not use CUDA: no %s mapped (use --lib PATH if it loads one later)",
				    pid, LIBCUDA);
				return EXIT_SETUP;
			}
		}
	}
	if (command_path)
		cp_discover__for_exec(libs, LIBCUDA, command_path, getenv("LD_LIBRARY_PATH"));
	if (!opts->pid_count && !command_path) {
		cp_discover__all_processes(libs, LIBCUDA);
		cp_discover__for_exec(libs, LIBCUDA, NULL, NULL);
	}
	if (!cp_lib_set__count(libs) && !opts->runtime) {
		say("no %s found (looked in %s, the ld.so cache and the standard library directories); use --lib PATH",
		    LIBCUDA, opts->pid_count ? "the target's maps" :
		    command_path ? "LD_LIBRARY_PATH, the command's RUNPATH" : "every process's maps");
		return EXIT_SETUP;
	}
	return 0;
}

static void discover_runtime(const struct cp_trace_options *opts, const char *command_path,
			     struct cp_lib_set *cudarts)
{
	static const char *const sonames[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0" };
	size_t i, j;

	for (i = 0; i < opts->cudart_count; i++)
		cp_lib_set__add(cudarts, opts->cudarts[i]);
	for (i = 0; i < opts->pid_count; i++) {
		char exe[64];

		cp_discover__process(cudarts, opts->pids[i], "libcudart.so");
		/* Static cudart lives in the executable itself. */
		snprintf(exe, sizeof(exe), "/proc/%d/exe", opts->pids[i]);
		cp_lib_set__add(cudarts, exe);
	}
	if (command_path) {
		cp_lib_set__add(cudarts, command_path);
		for (j = 0; j < sizeof(sonames) / sizeof(sonames[0]); j++)
			cp_discover__for_exec(cudarts, sonames[j], command_path,
					      getenv("LD_LIBRARY_PATH"));
	}
	if (!opts->pid_count && !command_path)
		cp_discover__all_processes(cudarts, "libcudart.so");
}

static int attach_all(struct cp_tracer *tracer, const struct cp_lib_set *libs,
		      const struct cp_lib_set *cudarts)
{
	struct cp_attach_report report;
	unsigned int attached_libs = 0, attached_runtimes = 0;
	size_t i;
	int err;

	if (!cp_lib_set__count(libs))
		say("no %s found: tracing cudaLaunchKernel only", LIBCUDA);
	for (i = 0; i < cp_lib_set__count(libs); i++) {
		const char *path = cp_lib_set__path(libs, i);

		err = cp_tracer__attach_driver(tracer, path, &report);
		if (err) {
			say("%s: no probe attached: %s", path,
			    err == -ENOENT ? "none of the CUDA driver symbols found" : strerror(-err));
			continue;
		}
		attached_libs++;
		if (verbosity)
			say("%s: %u probes attached", path, report.attached);
		if (report.missing)
			say("%s: %u probe symbols absent, skipped%s%s", path, report.missing,
			    verbosity ? ": " : " (-v lists them)",
			    verbosity ? report.missing_names : "");
	}
	if (!attached_libs && cp_lib_set__count(libs)) {
		say("no %s could be probed", LIBCUDA);
		return EXIT_SETUP;
	}
	for (i = 0; cudarts && i < cp_lib_set__count(cudarts); i++) {
		const char *path = cp_lib_set__path(cudarts, i);

		err = cp_tracer__attach_runtime(tracer, path, &report);
		if (!err) {
			attached_runtimes++;
			if (verbosity)
				say("%s: cudaLaunchKernel probed", path);
		} else if (err != -ENOENT) {
			say("%s: cannot probe cudaLaunchKernel: %s", path, strerror(-err));
		}
	}
	if (!attached_libs && !attached_runtimes) {
		say("no %s and no cudaLaunchKernel found to probe; use --lib PATH or --cudart PATH",
		    LIBCUDA);
		return EXIT_SETUP;
	}
	return 0;
}

/* Exit status of a wait status, as a shell reports it. */
static int shell_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_SETUP;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

struct wait_state {
	int signal_fd;
	int timer_fd;
	int pid_fds[CP_CLI_MAX_PIDS];
	size_t pid_fd_count;
	pid_t child;
	int child_status;
	bool child_done;
};

/* Blocks until the command ends, every -p target ends, the duration passes or a signal. */
static void wait_for_end(const struct cp_trace_options *opts, struct wait_state *ws)
{
	struct pollfd fds[2 + CP_CLI_MAX_PIDS];
	size_t live = ws->pid_fd_count, i;
	bool forwarded = false;

	for (;;) {
		nfds_t n = 0;

		fds[n++] = (struct pollfd){ .fd = ws->signal_fd, .events = POLLIN };
		fds[n++] = (struct pollfd){ .fd = ws->timer_fd, .events = POLLIN };
		for (i = 0; i < ws->pid_fd_count; i++)
			fds[n++] = (struct pollfd){ .fd = ws->pid_fds[i], .events = POLLIN };
		if (poll(fds, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (fds[1].revents)
			return; /* --duration */
		for (i = 0; i < ws->pid_fd_count; i++) {
			if (ws->pid_fds[i] >= 0 && fds[2 + i].revents) {
				close(ws->pid_fds[i]);
				ws->pid_fds[i] = -1;
				live--;
			}
		}
		if (ws->pid_fd_count && !live)
			return; /* every -p target is gone */
		if (fds[0].revents) {
			struct signalfd_siginfo info;

			if (read(ws->signal_fd, &info, sizeof(info)) != sizeof(info))
				continue;
			if (info.ssi_signo == SIGCHLD) {
				if (ws->child > 0 && waitpid(ws->child, &ws->child_status, WNOHANG) == ws->child) {
					ws->child_done = true;
					return;
				}
				continue;
			}
			/* SIGINT/SIGTERM/SIGHUP: a command gets it passed on once; then we stop. */
			if (ws->child > 0 && !forwarded) {
				kill(ws->child, info.ssi_signo);
				forwarded = true;
				continue;
			}
			return;
		}
	}
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
		say("warning: %llu records were lost to a full ring buffer; try --ring-size",
		    (unsigned long long)counters.records_lost);
	if (stats.malformed)
		say("warning: %llu malformed records dropped", (unsigned long long)stats.malformed);
	if (have_counters && (counters.pending_overflow || counters.pending_missed))
		say("warning: %llu allocation/name calls lost their return state, %llu returns unmatched",
		    (unsigned long long)counters.pending_overflow,
		    (unsigned long long)counters.pending_missed);
	if (have_counters && counters.targets_overflow)
		say("warning: %llu processes did not fit in the traced set",
		    (unsigned long long)counters.targets_overflow);
	if (name_stats.stubs_unresolved)
		say("warning: %llu host stubs could not be named", (unsigned long long)name_stats.stubs_unresolved);
	if (stats.thread_error)
		say("warning: the agent stopped on an error: %s", strerror(-stats.thread_error));
}

static int seed_known_processes(struct cp_tracer *tracer)
{
	pid_t *pids = calloc(MAX_SEEDED_PIDS, sizeof(*pids));
	int n, i;

	if (!pids)
		return -ENOMEM;
	n = cp_discover__processes_using(LIBCUDA, pids, MAX_SEEDED_PIDS);
	for (i = 0; i < n; i++)
		cp_tracer__add_pid(tracer, pids[i]);
	free(pids);
	return n < 0 ? n : 0;
}

int cp_cmd_trace(int argc, char **argv)
{
	struct cp_tracer_opts tracer_opts = { .sz = sizeof(tracer_opts) };
	struct cp_agent_opts agent_opts = { .sz = sizeof(agent_opts) };
	struct trace_output output = { .out = stdout };
	struct wait_state ws = { .signal_fd = -1, .timer_fd = -1, .child = -1 };
	struct cp_lib_set *libs = NULL, *cudarts = NULL;
	struct cp_symbolizer *symbolizer = NULL;
	struct cp_trace_options opts;
	struct cp_tracer *tracer = NULL;
	struct cp_agent *agent = NULL;
	struct cp_identity identity;
	struct cp_child child = { .pid = -1 };
	char command_path[PATH_MAX], error[256];
	sigset_t handled, original;
	int exit_code = EXIT_SETUP, err, out_fd = -1;
	size_t i;

	switch (cp_trace_options__parse(argc, argv, &opts, error, sizeof(error))) {
	case CP_PARSE_HELP:
		fputs(cp_trace_usage, stdout);
		return 0;
	case CP_PARSE_ERROR:
		say("%s (see cuprobe trace --help)", error);
		return EXIT_USAGE;
	default:
		break;
	}
	verbosity = opts.verbose;
	libbpf_set_print(libbpf_to_stderr);

	if (cp_identity__from_env(&identity, opts.run_as_root)) {
		say("SUDO_UID/SUDO_GID are not valid ids");
		return EXIT_USAGE;
	}
	if (opts.command) {
		err = cp_resolve_command(opts.command[0], &identity, command_path, sizeof(command_path));
		if (err) {
			say("%s: %s", opts.command[0],
			    err == -ENOENT ? "command not found" : "permission denied");
			return EXIT_NOT_FOUND;
		}
	}
	if (check_privileges())
		return EXIT_SETUP;

	libs = cp_lib_set__new();
	cudarts = cp_lib_set__new();
	symbolizer = cp_symbolizer__new();
	output.names = cp_names__new(symbolizer);
	if (!libs || !cudarts || !symbolizer || !output.names) {
		say("out of memory");
		goto cleanup;
	}
	exit_code = discover_driver(&opts, opts.command ? command_path : NULL, libs);
	if (exit_code)
		goto cleanup;
	exit_code = EXIT_SETUP;
	if (opts.runtime)
		discover_runtime(&opts, opts.command ? command_path : NULL, cudarts);
	if (opts.command)
		cp_symbolizer__add_file(symbolizer, command_path);

	if (opts.output) {
		out_fd = cp_output_file__open(opts.output, &identity);
		if (out_fd < 0) {
			say("cannot create %s: %s", opts.output,
			    out_fd == -ELOOP ? "it is a symbolic link" : strerror(-out_fd));
			goto cleanup;
		}
		output.out = fdopen(out_fd, "w");
		if (!output.out) {
			say("cannot open %s: %s", opts.output, strerror(errno));
			close(out_fd);
			output.out = stdout;
			goto cleanup;
		}
	}
	output.json = opts.json;

	/* Signals are read from a signalfd by the main thread; the command gets the old mask. */
	sigemptyset(&handled);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGHUP);
	sigaddset(&handled, SIGCHLD);
	sigaddset(&handled, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &handled, &original);
	sigdelset(&handled, SIGPIPE); /* a closed pipe shows up as EPIPE on write */
	ws.signal_fd = signalfd(-1, &handled, SFD_CLOEXEC);
	ws.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (ws.signal_fd < 0 || ws.timer_fd < 0) {
		say("cannot set up signal handling: %s", strerror(errno));
		goto cleanup;
	}

	tracer_opts.system_wide = !opts.pid_count && !opts.command;
	tracer_opts.ring_bytes = opts.ring_bytes;
	tracer_opts.log = log_to_stderr;
	tracer = cp_tracer__open(&tracer_opts);
	if (!tracer) {
		say("cannot load the BPF programs: %s", strerror(errno));
		goto cleanup;
	}
	if (attach_all(tracer, libs, opts.runtime ? cudarts : NULL))
		goto cleanup;

	for (i = 0; i < opts.pid_count; i++) {
		err = cp_tracer__add_pid(tracer, opts.pids[i]);
		if (err) {
			say("PID %d: cannot add it to the traced set: %s", opts.pids[i], strerror(-err));
			goto cleanup;
		}
		ws.pid_fds[i] = pidfd_open_(opts.pids[i]);
		if (ws.pid_fds[i] < 0) {
			say("PID %d: %s", opts.pids[i], strerror(errno));
			ws.pid_fd_count = i;
			goto cleanup;
		}
		ws.pid_fd_count = i + 1;
	}
	if (tracer_opts.system_wide && seed_known_processes(tracer))
		say("warning: could not list the running CUDA processes; their exits are not reported");

	output.start_ns = monotonic_ns();
	agent_opts.on_event = on_event;
	agent_opts.ctx = &output;
	agent = cp_agent__new(cp_tracer__ring_fd(tracer), &agent_opts);
	if (!agent || cp_agent__start(agent)) {
		say("cannot start the GPU agent: %s", strerror(errno));
		goto cleanup;
	}
	if (!opts.json)
		fprintf(output.out, "%s\n", cp_format__text_header());

	if (opts.command) {
		err = cp_child__prepare(&child, command_path, opts.command, &identity, &original);
		if (!err) {
			ws.child = child.pid;
			err = cp_tracer__add_pid(tracer, child.pid);
			if (err) {
				cp_child__abort(&child);
				ws.child = -1;
				say("cannot trace the command: %s", strerror(-err));
				goto cleanup;
			}
			err = cp_child__release(&child);
		}
		if (err) {
			if (ws.child > 0)
				waitpid(ws.child, &ws.child_status, 0);
			ws.child = -1;
			say("%s: %s", opts.command[0], strerror(-err));
			exit_code = EXIT_NOT_FOUND;
			goto cleanup;
		}
		if (verbosity)
			say("started %s as pid %d", command_path, child.pid);
	}
	if (opts.duration_ms) {
		struct itimerspec when = {
			.it_value = { .tv_sec = opts.duration_ms / 1000,
				      .tv_nsec = (opts.duration_ms % 1000) * 1000000 },
		};
		timerfd_settime(ws.timer_fd, 0, &when, NULL);
	}
	if (verbosity)
		say("tracing (%u probes, %u links); Ctrl-C stops", cp_tracer__probe_count(tracer),
		    cp_tracer__link_count(tracer));
	wait_for_end(&opts, &ws);
	exit_code = 0;

	/* Wake, drain, join: every record committed so far is delivered before the summary. */
	cp_agent__stop(agent);
	if (output.write_error)
		say("cannot write events: %s", strerror(output.write_error));
	print_summary(tracer, agent, output.names);
	if (opts.command) {
		if (!ws.child_done) {
			/* Stopped early (duration or a second signal): the command keeps running. */
			say("stopped before the command (pid %d) ended; it keeps running untraced", ws.child);
			exit_code = 0;
		} else {
			exit_code = shell_status(ws.child_status);
		}
	}

cleanup:
	cp_agent__free(agent);
	cp_tracer__free(tracer);
	if (output.out && output.out != stdout) {
		if (fclose(output.out) && !exit_code) {
			say("cannot write %s: %s", opts.output, strerror(errno));
			exit_code = EXIT_SETUP;
		}
	} else {
		fflush(stdout);
	}
	for (i = 0; i < ws.pid_fd_count; i++)
		if (ws.pid_fds[i] >= 0)
			close(ws.pid_fds[i]);
	if (ws.signal_fd >= 0)
		close(ws.signal_fd);
	if (ws.timer_fd >= 0)
		close(ws.timer_fd);
	cp_names__free(output.names);
	cp_symbolizer__free(symbolizer);
	cp_lib_set__free(cudarts);
	cp_lib_set__free(libs);
	return exit_code;
}
