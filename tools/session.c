// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What every cuprobe command that traces does before and after its own work:
 * check privileges, resolve COMMAND, discover libcuda (and libnccl), open and attach the
 * tracer, add the targets, open the output, start the agent and COMMAND
 * once everything is attached, wait for the end (COMMAND's tree, every -p
 * target gone, --duration, a signal, the output failing), with an optional
 * periodic tick for interval output, and turn how it ended into an exit
 * status.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <sys/stat.h>

#include "output_file.h"
#include "session.h"
#include "warnings.h"

#define LIBCUDA "libcuda.so.1"
#define LIBNCCL "libnccl.so.2"
#define MAX_SEEDED_PIDS 4096

int cp_verbosity;

void cp_say(const char *fmt, ...)
{
	va_list ap;

	fputs("cuprobe: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *cp_file_problem(int err)
{
	switch (err) {
	case -EINVAL: return "not a regular file";
	case -ENOEXEC: return "not an ELF file";
	case -EBADMSG: return "a truncated or damaged ELF file";
	default: return strerror(-err);
	}
}

void cp_log_to_stderr(void *ctx, enum cp_log_level level, const char *message)
{
	if ((int)level <= cp_verbosity)
		cp_say("%s", message);
}

static int libbpf_to_stderr(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's own chatter (missing symbols included) only at -vv. */
	if (cp_verbosity < 2 || (level == LIBBPF_DEBUG && cp_verbosity < 3))
		return 0;
	return vfprintf(stderr, fmt, ap);
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
		cp_say("must run as root (loading BPF needs CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN); try sudo");
		return -EPERM;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		cp_say("the kernel has no BTF (/sys/kernel/btf/vmlinux missing): CONFIG_DEBUG_INFO_BTF=y is required");
		return -ENOTSUP;
	}
	return 0;
}

/* The thread group (process) a task id belongs to: the Tgid of /proc/PID/status, or -1. */
static pid_t thread_group_of(pid_t tid)
{
	char path[64], line[128];
	pid_t tgid = -1;
	FILE *status;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	status = fopen(path, "re");
	if (!status)
		return -1;
	while (fgets(line, sizeof(line), status))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	fclose(status);
	return tgid;
}

/* Libraries to attach the driver probes to; -ESRCH etc. already reported. */
static int discover_driver(const struct cp_common_options *opts, const char *command_path,
			   struct cp_lib_set *libs)
{
	size_t i;
	int n;

	for (i = 0; i < opts->lib_count; i++) {
		n = cp_lib_set__add(libs, opts->libs[i]);
		if (n < 0) {
			cp_say("--lib %s: %s", opts->libs[i], cp_file_problem(n));
			return CP_EXIT_USAGE;
		}
	}
	for (i = 0; i < opts->pid_count; i++) {
		pid_t pid = opts->pids[i], leader = thread_group_of(pid);
		struct cp_proc_stat stat;
		bool known = !cp_proc__stat(pid, &stat);

		if (leader > 0 && leader != pid) {
			cp_say("PID %d is a thread of process %d: give -p %d", pid, leader, leader);
			return CP_EXIT_USAGE;
		}
		if (known && (stat.flags & CP_PROC_KTHREAD)) {
			cp_say("PID %d is a kernel thread: it runs no CUDA", pid);
			return CP_EXIT_USAGE;
		}
		if (known && stat.state == 'Z') {
			cp_say("PID %d has exited (a zombie its parent has not reaped): nothing to trace",
			       pid);
			return CP_EXIT_SETUP;
		}
		n = cp_discover__process(libs, pid, LIBCUDA);
		if (n == -ESRCH || !process_exists(pid)) {
			cp_say("PID %d: no such process", pid);
			return CP_EXIT_SETUP;
		}
		if (n < 0) {
			cp_say("PID %d: cannot read its memory maps: %s", pid, strerror(-n));
			return CP_EXIT_SETUP;
		}
		if (n == 0 && !opts->lib_count) {
			struct cp_lib_set *own = cp_lib_set__new();
			bool uses = own && cp_discover__process(own, pid, LIBCUDA) > 0;

			cp_lib_set__free(own);
			if (!uses) {
				cp_say("PID %d does not use CUDA: no %s mapped (use --lib PATH if it loads one later)",
				    pid, LIBCUDA);
				return CP_EXIT_SETUP;
			}
		}
	}
	if (command_path)
		cp_discover__for_exec(libs, LIBCUDA, command_path, getenv("LD_LIBRARY_PATH"));
	if (!opts->pid_count && !command_path) {
		cp_discover__all_processes(libs, LIBCUDA);
		cp_discover__for_exec(libs, LIBCUDA, NULL, NULL);
	}
	if (!cp_lib_set__count(libs) && cp_verbosity)
		cp_say("no %s found yet (looked in %s, the ld.so cache and the standard library directories): waiting for a process to map one",
		       LIBCUDA, command_path ? "LD_LIBRARY_PATH, the command's RUNPATH" : "every process's maps");
	return 0;
}

/* Files for the runtime probe; a --cudart PATH that is not a file to read is said: 0 or 2. */
static int discover_runtime(const struct cp_common_options *opts, const char *command_path,
			    const char *const *paths, size_t path_count, struct cp_lib_set *cudarts)
{
	static const char *const sonames[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0" };
	size_t i, j;
	int n;

	for (i = 0; i < path_count; i++) {
		n = cp_lib_set__add(cudarts, paths[i]);
		if (n < 0) {
			cp_say("--cudart %s: %s", paths[i], cp_file_problem(n));
			return CP_EXIT_USAGE;
		}
	}
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
	return 0;
}

/*
 * NCCL files to probe now: those the targets have mapped, those COMMAND
 * would load, every process's and the system's when system-wide. A copy
 * mapped later (a pip wheel's, dlopen'd by a framework) comes as an attach
 * event.
 */
static void discover_nccl(const struct cp_common_options *opts, const char *command_path,
			  struct cp_lib_set *nccls)
{
	size_t i;

	for (i = 0; i < opts->pid_count; i++)
		cp_discover__process(nccls, opts->pids[i], LIBNCCL);
	if (command_path)
		cp_discover__for_exec(nccls, LIBNCCL, command_path, getenv("LD_LIBRARY_PATH"));
	if (!opts->pid_count && !command_path) {
		cp_discover__all_processes(nccls, LIBNCCL);
		cp_discover__for_exec(nccls, LIBNCCL, NULL, NULL);
	}
}

/* Whether path is one of the files the user named (--lib, --cudart). */
static bool named_by_user(const char *const *named, size_t count, const char *path)
{
	struct stat a, b;
	size_t i;

	if (stat(path, &a))
		return false;
	for (i = 0; i < count; i++)
		if (!stat(named[i], &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return true;
	return false;
}

static int attach_all(const struct cp_session *s, struct cp_tracer *tracer,
		      const struct cp_lib_set *libs, const struct cp_lib_set *cudarts,
		      const struct cp_lib_set *nccls)
{
	const struct cp_common_options *opts = s->opts;
	struct cp_attach_report report;
	unsigned int attached_libs = 0, attached_runtimes = 0;
	size_t i;
	int err;

	for (i = 0; i < cp_lib_set__count(libs); i++) {
		const char *path = cp_lib_set__path(libs, i);

		err = cp_tracer__attach_driver(tracer, path, &report);
		if (err && named_by_user(opts->libs, opts->lib_count, path)) {
			/* A path the user gave that cannot be probed is a mistake to say, not skip. */
			cp_say("--lib %s: cannot be probed: %s", path,
			       err == -ENOENT ? "none of the CUDA driver symbols found" :
			       cp_file_problem(err));
			return CP_EXIT_USAGE;
		}
		if (err) {
			cp_say("%s: no probe attached: %s", path,
			    err == -ENOENT ? "none of the CUDA driver symbols found" : strerror(-err));
			continue;
		}
		attached_libs++;
		if (cp_verbosity)
			cp_say("%s: %u probes attached", path, report.attached);
		if (report.missing && cp_verbosity)
			cp_say("%s: %u catalogued symbols not exported by this driver: %s", path,
			       report.missing, report.missing_names);
	}
	if (!attached_libs && cp_lib_set__count(libs)) {
		/*
		 * System-wide, a file found in some process's maps may be gone by now
		 * (its process exited, its mount namespace went): the next mapping of
		 * a driver is an attach event like any other.
		 */
		if (!opts->pid_count && !opts->command && !opts->lib_count) {
			cp_say("no %s found could be probed yet: waiting for a process to map one",
			       LIBCUDA);
		} else {
			cp_say("no %s could be probed", LIBCUDA);
			return CP_EXIT_SETUP;
		}
	}
	for (i = 0; cudarts && i < cp_lib_set__count(cudarts); i++) {
		const char *path = cp_lib_set__path(cudarts, i);

		err = cp_tracer__attach_runtime(tracer, path, &report);
		if (err && named_by_user(s->cudart_paths, s->cudart_count, path)) {
			/* As for --lib: a file the user gave that cannot be probed is a mistake. */
			cp_say("--cudart %s: cannot be probed: %s", path,
			       err == -ENOENT ? "no cudaLaunchKernel in it" : cp_file_problem(err));
			return CP_EXIT_USAGE;
		}
		if (!err) {
			attached_runtimes++;
			if (cp_verbosity)
				cp_say("%s: cudaLaunchKernel probed", path);
		} else if (err != -ENOENT) {
			cp_say("%s: cannot probe cudaLaunchKernel: %s", path, strerror(-err));
		}
	}
	/* A file named like NCCL without its exports is not one: said at -v only. */
	for (i = 0; i < cp_lib_set__count(nccls); i++) {
		const char *path = cp_lib_set__path(nccls, i);

		err = cp_tracer__attach_nccl(tracer, path, &report);
		if (err && (err != -ENOENT || cp_verbosity))
			cp_say("%s: no NCCL probe attached: %s", path,
			       err == -ENOENT ? "none of the NCCL symbols found" : strerror(-err));
		else if (!err && cp_verbosity)
			cp_say("%s: %u NCCL probes attached", path, report.attached);
	}
	return 0;
}

static int seed_known_processes(struct cp_tracer *tracer, struct cp_python *python)
{
	pid_t *pids = calloc(MAX_SEEDED_PIDS, sizeof(*pids));
	int n, i;

	if (!pids)
		return -ENOMEM;
	n = cp_discover__processes_using(LIBCUDA, pids, MAX_SEEDED_PIDS);
	for (i = 0; i < n; i++) {
		cp_tracer__add_pid(tracer, pids[i]);
		if (python)
			cp_python__add_pid(python, pids[i]);
	}
	free(pids);
	return n < 0 ? n : 0;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* COMMAND's exit code when it cannot start: 126 found but not executable, else 127. */
static int command_exit_code(int err)
{
	return err == -EACCES || err == -ENOEXEC || err == -EISDIR ? CP_EXIT_CANNOT_EXECUTE :
	       CP_EXIT_NOT_FOUND;
}

int cp_session__open(struct cp_session *s, const struct cp_common_options *opts)
{
	int err;

	memset(s, 0, sizeof(*s));
	s->opts = opts;
	s->signal_fd = s->timer_fd = s->tick_fd = s->grace_fd = s->stop_fd = -1;
	s->child.pid = -1;
	s->child_pid = -1;
	cp_verbosity = opts->verbose;
	libbpf_set_print(libbpf_to_stderr);

	err = cp_identity__from_env(&s->identity);
	if (err) {
		cp_say(err == -ENODATA ? "SUDO_UID and SUDO_GID come together: one is set without the other" :
		       "SUDO_UID/SUDO_GID are not valid ids");
		return CP_EXIT_USAGE;
	}
	/* --run-as-root: COMMAND runs as root; outputs and PROG stay the invoking user's. */
	if (!opts->run_as_root)
		s->command_identity = s->identity;
	if (opts->command) {
		err = cp_resolve_command(opts->command[0], &s->command_identity, s->command_path,
					 sizeof(s->command_path));
		if (err) {
			cp_say("%s: %s", opts->command[0],
			       err == -ENOENT ? "command not found" :
			       err == -EACCES ? "permission denied" :
			       err == -EISDIR ? "is a directory" : strerror(-err));
			return command_exit_code(err);
		}
	}
	if (check_privileges())
		return CP_EXIT_SETUP;

	s->libs = cp_lib_set__new();
	s->cudarts = cp_lib_set__new();
	s->nccls = cp_lib_set__new();
	s->symbolizer = cp_symbolizer__new();
	s->names = s->symbolizer ? cp_names__new(s->symbolizer) : NULL;
	if (!s->libs || !s->cudarts || !s->nccls || !s->names) {
		cp_say("out of memory");
		return CP_EXIT_SETUP;
	}
	/* Handles made before we attached are named from the driver's own records. */
	cp_names__read_driver_records(s->names, true);
	if (opts->command)
		cp_symbolizer__add_file(s->symbolizer, s->command_path);
	discover_nccl(opts, opts->command ? s->command_path : NULL, s->nccls);
	return discover_driver(opts, opts->command ? s->command_path : NULL, s->libs);
}

int cp_session__probe_runtime(struct cp_session *s, const char *const *paths, size_t count)
{
	s->runtime = true;
	s->cudart_paths = paths;
	s->cudart_count = count;
	return discover_runtime(s->opts, s->opts->command ? s->command_path : NULL, paths, count,
				s->cudarts);
}

static int make_fd(int fd, const char *what)
{
	if (fd < 0)
		cp_say("cannot set up %s: %s", what, strerror(errno));
	return fd;
}

/* The last lines of the verifier's log (it ends with the refusal). */
static void say_log_tail(const char *log, int lines)
{
	const char *start = log + strlen(log);

	while (start > log && (start[-1] == '\n' || start[-1] == ' '))
		start--;
	while (start > log && lines > 0)
		if (*--start == '\n')
			lines--;
	if (*start == '\n')
		start++;
	fprintf(stderr, "cuprobe: the verifier's log, last lines:\n%s\n", start);
}

/* cuprobe run: the user's object; a bad one is a usage error, said in one line. */
static int load_program(struct cp_session *s)
{
	static char log[1 << 20];
	char error[1024];
	CP_OPTS(cp_program_opts, opts, .name = s->program_name,
		.log_buf = log, .log_size = sizeof(log),
		.error = error, .error_size = sizeof(error),
		.settings = s->program_settings,
		.setting_count = s->program_setting_count);

	s->program = cp_tracer__load_program(s->tracer, s->program_elf, s->program_size, &opts);
	if (s->program)
		return 0;
	/* One line; the log's tail is what -v adds. */
	cp_say("%s%s", error[0] ? error : strerror(errno),
	       log[0] && !cp_verbosity ? " (run with -v to see the end of the verifier's log)" : "");
	if (log[0] && cp_verbosity)
		say_log_tail(log, 20);
	return CP_EXIT_USAGE;
}

int cp_session__attach(struct cp_session *s, struct cp_tracer_opts *tracer_opts)
{
	const struct cp_common_options *opts = s->opts;
	sigset_t handled;
	size_t i;
	int err, code;

	/* Signals are read from a signalfd by the main thread; the command gets the old mask. */
	sigemptyset(&handled);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGHUP);
	sigaddset(&handled, SIGCHLD);
	/* (SIGPIPE is ignored from main: a closed pipe shows up as EPIPE on write.) */
	pthread_sigmask(SIG_BLOCK, &handled, &s->original_mask);
	s->mask_changed = true;
	if (make_fd(s->signal_fd = signalfd(-1, &handled, SFD_CLOEXEC), "signal handling") < 0 ||
	    make_fd(s->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), "timers") < 0 ||
	    make_fd(s->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), "timers") < 0 ||
	    make_fd(s->grace_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), "timers") < 0 ||
	    make_fd(s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "stop requests") < 0)
		return CP_EXIT_SETUP;

	tracer_opts->system_wide = !opts->pid_count && !opts->command;
	tracer_opts->ring_bytes = opts->ring_bytes;
	tracer_opts->wakeup_latency_ns = opts->wakeup_latency_ns;
	tracer_opts->log = cp_log_to_stderr;
	/*
	 * Driver files mapped later are attached to as they appear; a traced
	 * process (not system-wide) that maps one is held until its probes are live.
	 */
	tracer_opts->attach_events = !s->program_load_only; /* run --ptx: PROG loaded, nothing else */
	tracer_opts->hold_new_mappers = !tracer_opts->system_wide && !s->program_load_only;
	tracer_opts->runtime_attach = s->runtime;
	/* Processes already running made handles no naming probe saw: their first launches name them. */
	tracer_opts->name_late_handles = opts->pid_count || tracer_opts->system_wide;
	/* --python: COMMAND's processes are held until their interpreter and each new stack are read. */
	tracer_opts->python_stacks = opts->python;
	if (opts->python && opts->command)
		tracer_opts->hold_for_stacks = true;
	/* A user's program (run): until their memory map is read, so the stacks it records are named. */
	tracer_opts->hold_at_init = s->program_elf && opts->command && !s->program_load_only;
	s->system_wide = tracer_opts->system_wide;
	s->tracer = cp_tracer__open(tracer_opts);
	if (!s->tracer) {
		cp_say("cannot load the BPF programs: %s", strerror(errno));
		return CP_EXIT_SETUP;
	}
	if (opts->python) {
		CP_OPTS(cp_python_opts, python_opts, .log = cp_log_to_stderr);

		s->python = cp_python__new(s->tracer, &python_opts);
		if (!s->python) {
			cp_say("out of memory");
			return CP_EXIT_SETUP;
		}
	}
	if (s->program_elf) {
		code = load_program(s);
		if (code || s->program_load_only)
			return code;
	}
	code = attach_all(s, s->tracer, s->libs, s->runtime ? s->cudarts : NULL, s->nccls);
	if (code)
		return code;

	for (i = 0; i < opts->pid_count; i++) {
		err = cp_tracer__add_pid(s->tracer, opts->pids[i]);
		if (err) {
			cp_say("PID %d: cannot add it to the traced set: %s", opts->pids[i], strerror(-err));
			return CP_EXIT_SETUP;
		}
		s->pid_fds[i] = pidfd_open_(opts->pids[i]);
		if (s->pid_fds[i] < 0) {
			cp_say("PID %d: %s", opts->pids[i], strerror(errno));
			return CP_EXIT_SETUP;
		}
		s->pid_fd_count = i + 1;
		if (s->python && cp_python__add_pid(s->python, opts->pids[i]) < 0)
			cp_say("warning: PID %d: cannot tell whether it runs Python", opts->pids[i]);
	}
	if (s->system_wide && seed_known_processes(s->tracer, s->python))
		cp_say("warning: could not list the running CUDA processes; their exits are not reported");

	/* Last, so that no failure above can have touched an existing -o FILE. */
	err = cp_output__open(&s->output, opts->output, &s->identity);
	if (err) {
		cp_say("cannot create %s: %s", opts->output,
		       err == -ELOOP ? "it is a symbolic link" : strerror(-err));
		return CP_EXIT_SETUP;
	}
	if (s->perfetto_path) {
		err = opts->output && !strcmp(opts->output, s->perfetto_path) ? -EEXIST :
		      cp_output__open(&s->perfetto, s->perfetto_path, &s->identity);
		if (err) {
			cp_say("cannot create %s: %s", s->perfetto_path,
			       err == -EEXIST ? "it is also the -o FILE" :
			       err == -ELOOP ? "it is a symbolic link" : strerror(-err));
			return err == -EEXIST ? CP_EXIT_USAGE : CP_EXIT_SETUP;
		}
	}
	/*
	 * COMMAND writing to the same stdout: whole lines only, or its output
	 * would land inside an event line at a buffer boundary.
	 */
	if (!opts->output && opts->command)
		cp_output__write_through(&s->output);
	return 0;
}

int cp_session__start_agent(struct cp_session *s, cp_event_fn on_event, void *ctx)
{
	CP_OPTS(cp_agent_opts, agent_opts, .on_event = on_event, .ctx = ctx, .tracer = s->tracer,
		.python = s->python);
	size_t i;
	int err;

	s->agent = cp_agent__new(cp_tracer__ring_fd(s->tracer), &agent_opts);
	if (!s->agent) {
		cp_say("cannot start the GPU agent: %s", strerror(errno));
		return CP_EXIT_SETUP;
	}
	for (i = 0; i < s->ring_count; i++) {
		err = cp_agent__add_ring(s->agent, s->rings[i].fd, s->rings[i].on_record,
					 s->rings[i].ctx);
		if (err) {
			cp_say("cannot read ring %zu: %s", i, strerror(-err));
			return CP_EXIT_SETUP;
		}
	}
	err = cp_agent__start(s->agent);
	if (err) {
		cp_say("cannot start the GPU agent: %s", strerror(-err));
		return CP_EXIT_SETUP;
	}
	s->stall_watch = cp_stall_watch__start(&s->output, &s->perfetto);
	return 0;
}

/* Records for a program (JSON, ...) on a stdout COMMAND shares: the command's own stdout goes to stderr. */
static bool command_output_to_stderr(const struct cp_session *s)
{
	return s->opts->format != CP_FORMAT_TEXT && !s->opts->output;
}

int cp_session__start_command(struct cp_session *s)
{
	int err;

	if (s->opts->command) {
		/*
		 * COMMAND's orphans come to us, so the wait can follow the whole
		 * tree and reap it (the guardian is not our child).
		 */
		if (!s->opts->exit_with_command && prctl(PR_SET_CHILD_SUBREAPER, 1))
			cp_say("warning: cannot follow COMMAND's orphans: %s", strerror(errno));
		err = cp_child__prepare_with(&s->child, s->command_path, s->opts->command,
					     &s->command_identity, &s->original_mask,
					     command_output_to_stderr(s), s->command_extras);
		if (!err) {
			s->child_pid = s->child.pid;
			err = cp_tracer__add_pid(s->tracer, s->child.pid);
			if (err) {
				cp_child__abort(&s->child);
				s->child_pid = -1;
				cp_say("cannot trace the command: %s", strerror(-err));
				return CP_EXIT_SETUP;
			}
			err = cp_child__release(&s->child);
		}
		if (err) {
			if (s->child_pid > 0)
				waitpid(s->child_pid, &s->child_status, 0);
			s->child_pid = -1;
			cp_say("%s: %s", s->opts->command[0], strerror(-err));
			return command_exit_code(err);
		}
		if (cp_verbosity)
			cp_say("started %s as pid %d", s->command_path, s->child_pid);
	}
	err = cp_output__commit(&s->output);
	if (err) {
		cp_say("cannot create %s: %s", s->opts->output, strerror(-err));
		return CP_EXIT_SETUP;
	}
	err = cp_output__is_open(&s->perfetto) ? cp_output__commit(&s->perfetto) : 0;
	if (err) {
		cp_say("cannot create %s: %s", s->perfetto_path, strerror(-err));
		return CP_EXIT_SETUP;
	}
	return 0;
}

static void arm(int fd, uint64_t ms, bool repeat)
{
	struct itimerspec when = {
		.it_value = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 },
	};

	if (repeat)
		when.it_interval = when.it_value;
	timerfd_settime(fd, 0, &when, NULL);
}

void cp_session__request_stop(struct cp_session *s)
{
	uint64_t one = 1;
	ssize_t ignored = write(s->stop_fd, &one, sizeof(one));

	(void)ignored;
}

void cp_session__output_failed(struct cp_session *s, int err)
{
	if (cp_output__failed(&s->output, err))
		cp_session__request_stop(s);
}

bool cp_session__write_text(struct cp_session *s, struct cp_output *out, const struct cp_text *text,
			    bool flush)
{
	if (!text->failed && cp_output__write(out, text->data, text->len, flush))
		return true;
	if (cp_output__failed(out, text->failed ? ENOMEM : errno))
		cp_session__request_stop(s);
	return false;
}

/*
 * Reaps what ended among our children: COMMAND (its status kept), and with
 * the subreaper, orphans of its tree. True when the targets are done: COMMAND
 * alone with --exit-with-command, else no child left at all.
 */
static bool reap(struct cp_session *s)
{
	bool any_left = true;
	int status;
	pid_t pid;

	for (;;) {
		pid = waitpid(-1, &status, WNOHANG);
		if (pid == 0)
			break;
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			any_left = false; /* ECHILD: the tree is empty */
			break;
		}
		if (pid == s->child_pid) {
			s->child_status = status;
			s->child_done = true;
		}
	}
	if (!s->child_done)
		return false;
	return s->opts->exit_with_command || !any_left;
}

void cp_session__wait(struct cp_session *s, const struct cp_wait_hooks *hooks)
{
	struct pollfd fds[6 + CP_CLI_MAX_PIDS];
	size_t live = s->pid_fd_count, i;
	bool stopping = false;
	enum { SIGNALS, DURATION, TICK, GRACE, STOP, EXTRA, PIDS };

	if (s->opts->duration_ms)
		arm(s->timer_fd, s->opts->duration_ms, false);
	if (hooks && hooks->tick && hooks->tick_ms)
		arm(s->tick_fd, hooks->tick_ms, true);
	/* COMMAND may have ended before we got here. */
	if (s->child_pid > 0 && reap(s)) {
		s->end = CP_END_TARGETS;
		return;
	}
	for (;;) {
		fds[SIGNALS] = (struct pollfd){ .fd = s->signal_fd, .events = POLLIN };
		fds[DURATION] = (struct pollfd){ .fd = s->timer_fd, .events = POLLIN };
		fds[TICK] = (struct pollfd){ .fd = s->tick_fd, .events = POLLIN };
		fds[GRACE] = (struct pollfd){ .fd = s->grace_fd, .events = POLLIN };
		fds[STOP] = (struct pollfd){ .fd = s->stop_fd, .events = POLLIN };
		fds[EXTRA] = (struct pollfd){ .fd = hooks && hooks->on_extra ? hooks->extra_fd : -1,
					      .events = POLLIN };
		for (i = 0; i < s->pid_fd_count; i++)
			fds[PIDS + i] = (struct pollfd){ .fd = s->pid_fds[i], .events = POLLIN };
		if (poll(fds, PIDS + s->pid_fd_count, -1) < 0) {
			if (errno == EINTR)
				continue;
			s->end = CP_END_SIGNAL;
			return;
		}
		if (fds[STOP].revents) {
			s->end = CP_END_OUTPUT;
			return;
		}
		if (fds[DURATION].revents) {
			s->end = CP_END_DURATION;
			return;
		}
		if (fds[GRACE].revents) {
			s->end = CP_END_SIGNAL; /* COMMAND did not end in time: stop without it */
			return;
		}
		if (fds[TICK].revents) {
			uint64_t expirations;

			if (read(s->tick_fd, &expirations, sizeof(expirations)) > 0)
				hooks->tick(hooks->ctx);
		}
		if (fds[EXTRA].revents && hooks->on_extra(hooks->ctx)) {
			s->end = CP_END_HOOK;
			return;
		}
		for (i = 0; i < s->pid_fd_count; i++) {
			if (s->pid_fds[i] >= 0 && fds[PIDS + i].revents) {
				close(s->pid_fds[i]);
				s->pid_fds[i] = -1;
				live--;
			}
		}
		if (s->pid_fd_count && !live) {
			s->end = CP_END_TARGETS; /* every -p target is gone */
			return;
		}
		if (!fds[SIGNALS].revents)
			continue;
		{
			struct signalfd_siginfo info;

			if (read(s->signal_fd, &info, sizeof(info)) != sizeof(info))
				continue;
			if (info.ssi_signo == SIGCHLD) {
				if (s->child_pid > 0 && reap(s)) {
					s->end = CP_END_TARGETS;
					return;
				}
				/* Stopping: COMMAND itself ending is enough. */
				if (stopping && s->child_done) {
					s->end = CP_END_SIGNAL;
					return;
				}
				continue;
			}
			s->stop_signal = (int)info.ssi_signo;
			cp_stall_watch__stop_wanted(s->stall_watch);
			/* Without a COMMAND, or at the second request: stop now. */
			if (s->child_pid <= 0 || s->child_done || stopping) {
				s->end = CP_END_SIGNAL;
				return;
			}
			/*
			 * A signal from the terminal (SI_KERNEL) went to the whole
			 * foreground process group, COMMAND included: do not send it
			 * twice. One from a process was meant for us: pass it on.
			 * A process's kill of our whole group reached COMMAND too, but
			 * its siginfo is that of a kill of our pid alone (SI_USER, the
			 * sender's pid): COMMAND then gets it twice, as --help says.
			 */
			if (info.ssi_code != SI_KERNEL)
				kill(s->child_pid, (int)info.ssi_signo);
			stopping = true;
			arm(s->grace_fd, CP_STOP_GRACE_MS, false);
		}
	}
}

void cp_session__warn_python(const struct cp_session *s)
{
	struct cp_python_stats stats;

	if (!s->python)
		return;
	cp_python__stats(s->python, &stats);
	if (cp_verbosity)
		cp_say("Python: %llu processes walked, %llu stacks", (unsigned long long)stats.processes,
		       (unsigned long long)stats.stacks);
	if (stats.processes_unknown)
		cp_say("warning: %llu Python processes of a version or layout the walker does not know: no stacks",
		       (unsigned long long)stats.processes_unknown);
	if (stats.stacks_unresolved || stats.frames_unreadable)
		cp_say("warning: %llu Python stacks not resolved (their process gone), %llu frames whose code could not be read",
		       (unsigned long long)stats.stacks_unresolved, (unsigned long long)stats.frames_unreadable);
}

void cp_session__stop_agent(struct cp_session *s)
{
	cp_stall_watch__stop_wanted(s->stall_watch);
	/* Wake, drain, join: every record committed so far is delivered (or, output blocked, dropped). */
	if (s->agent)
		cp_agent__stop(s->agent);
}

void cp_session__run(struct cp_session *s, const struct cp_wait_hooks *hooks, const char *doing_format, ...)
{
	char doing[PATH_MAX + 64];
	va_list args;

	if (doing_format && cp_verbosity) {
		va_start(args, doing_format);
		vsnprintf(doing, sizeof(doing), doing_format, args);
		va_end(args);
		cp_say("%s (%u probes, %u links); Ctrl-C stops", doing, cp_tracer__probe_count(s->tracer),
		       cp_tracer__link_count(s->tracer));
	}
	cp_session__wait(s, hooks);
	cp_session__stop_agent(s);
}

void cp_session__report_files(struct cp_session *s, enum cp_format format)
{
	struct cp_text text = { 0 };
	struct cp_traced_file files[64];
	size_t count, i;

	count = cp_tracer__files(s->tracer, files, sizeof(files) / sizeof(files[0]));
	for (i = 0; i < count && i < sizeof(files) / sizeof(files[0]); i++) {
		const struct cp_traced_file *f = &files[i];
		const char *what = f->library == CP_LIBRARY_nccl ? "NCCL file" :
				   f->runtime ? "runtime file" : "driver file";

		if (f->at_start)
			continue;
		if (!s->output.error) {
			cp_text__clear(&text);
			if (cp_format__traced_file(&text, format, f) ||
			    (text.len && !cp_output__write(&s->output, text.data, text.len, false)))
				cp_session__output_failed(s, text.failed ? ENOMEM : errno);
		}
		if (f->status == CP_ATTACH_FAILED) {
			cp_say("warning: %s %s could not be probed (%s): %u processes that mapped it are not traced",
			       what, f->path[0] ? f->path : "(unreachable)", strerror(-f->error),
			       f->early_processes);
			continue;
		}
		if (f->status != CP_ATTACH_ATTACHED)
			continue;
		cp_say("%s %s attached while tracing: probes live %.3f ms after its first mapping; %u process%s mapped it before then (%u held until then)",
		       what, f->path, (f->probes_live_ns - f->first_mapped_ns) / 1e6, f->early_processes,
		       f->early_processes == 1 ? "" : "es", f->held_processes);
		if (f->early_processes > f->held_processes)
			cp_say("warning: calls made by %u of them before the probes were live may not have been seen",
			       f->early_processes - f->held_processes);
	}
	if (count > sizeof(files) / sizeof(files[0]))
		cp_say("(%zu more library files not listed)", count - sizeof(files) / sizeof(files[0]));
	cp_text__free(&text);
}

void cp_session__warn_losses(const struct cp_session *s)
{
	struct cp_counters counters;
	struct cp_agent_stats agent;
	bool have_counters = s->tracer && !cp_tracer__read_counters(s->tracer, &counters);

	if (s->agent)
		cp_agent__stats(s->agent, &agent);
	cp_warnings__print(stderr, have_counters ? &counters : NULL, s->agent ? &agent : NULL);
}

/* Exit status of a wait status, as a shell reports it. */
static int shell_status(int status)
{
	struct cp_exit e = cp_exit__decode(status);

	return e.signal ? 128 + e.signal : e.status;
}

int cp_session__finish(struct cp_session *s)
{
	int left = s->tracer && !s->system_wide ? cp_tracer__live_targets(s->tracer) : 0;
	int output_error, perfetto_error, code = 0;

	cp_stall_watch__stop_wanted(s->stall_watch);
	output_error = cp_output__close(&s->output);
	perfetto_error = cp_output__is_open(&s->perfetto) ? cp_output__close(&s->perfetto) : 0;
	cp_stall_watch__free(s->stall_watch);
	s->stall_watch = NULL;

	if (s->opts->command && s->child_done)
		code = shell_status(s->child_status);
	if (s->opts->command && !s->child_done) {
		cp_say("stopped before the command (pid %d) ended: it keeps running, untraced",
		       s->child_pid);
		/* Cut short by a signal: the shell convention, whatever COMMAND does next. */
		code = s->end == CP_END_SIGNAL ? 128 + s->stop_signal : 0;
	}
	if (left > 0 && (!s->opts->command || !s->child_done || s->end != CP_END_TARGETS ||
			 s->opts->exit_with_command))
		cp_say("%d traced process%s still running, untraced from now on", left,
		       left == 1 ? " is" : "es are");
	if (output_error && s->output.abandoned) {
		cp_say("%s was blocked when tracing stopped: the records not written by then are dropped",
		       s->opts->output ? s->opts->output : "standard output");
		code = CP_EXIT_SETUP;
	} else if (output_error) {
		cp_say("cannot write %s: %s", s->opts->output ? s->opts->output : "standard output",
		       strerror(output_error));
		code = CP_EXIT_SETUP;
	}
	if (perfetto_error) {
		cp_say("cannot write %s: %s", s->perfetto_path, strerror(perfetto_error));
		code = CP_EXIT_SETUP;
	}
	return code;
}

/*
 * Releasing a probe waits for an RCU grace period (about 75 ms on these
 * kernels), and exiting would wait for it too. A child holding copies of
 * every fd pays it instead, after we are gone: our own closes then only drop
 * references. It closes the standard streams first (a reader of our stdout
 * sees its end when we exit) and exits when the pipe tells it we have.
 * Called once the agent's thread is joined: this process is single-threaded.
 */
static void release_probes_after_exit(void)
{
	int gate[2];
	char byte;
	pid_t pid;

	if (pipe2(gate, O_CLOEXEC))
		return; /* then we pay the grace period ourselves */
	pid = fork();
	if (pid == 0) {
		close(gate[1]);
		close(STDIN_FILENO);
		close(STDOUT_FILENO);
		close(STDERR_FILENO);
		while (read(gate[0], &byte, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(gate[0]);
	if (pid < 0)
		close(gate[1]);
	/* gate[1] stays open until this process exits: its closing wakes the child. */
}

void cp_session__close(struct cp_session *s)
{
	size_t i;

	cp_stall_watch__stop_wanted(s->stall_watch);
	cp_agent__free(s->agent);
	cp_output__close(&s->output);
	if (cp_output__is_open(&s->perfetto))
		cp_output__close(&s->perfetto);
	/* Before the fork below: this process single-threaded again. */
	cp_stall_watch__free(s->stall_watch);
	s->stall_watch = NULL;
	s->agent = NULL;
	if (s->tracer && cp_tracer__link_count(s->tracer))
		release_probes_after_exit();
	cp_tracer__free(s->tracer);
	s->tracer = NULL;
	for (i = 0; i < s->pid_fd_count; i++)
		cp_fd__close(&s->pid_fds[i]);
	cp_fd__close(&s->signal_fd);
	cp_fd__close(&s->timer_fd);
	cp_fd__close(&s->tick_fd);
	cp_fd__close(&s->grace_fd);
	cp_fd__close(&s->stop_fd);
	if (s->mask_changed)
		pthread_sigmask(SIG_SETMASK, &s->original_mask, NULL);
	cp_python__free(s->python); /* the agent that used it is gone */
	cp_names__free(s->names);
	cp_symbolizer__free(s->symbolizer);
	cp_lib_set__free(s->cudarts);
	cp_lib_set__free(s->nccls);
	cp_lib_set__free(s->libs);
}
