// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cp_compare: what the kernel-assisted design costs per call and what it
 * buys, against the alternatives, measured in one run (never asserted).
 *
 * Contenders, on the same driver calls and the same records:
 *   baseline         untraced
 *   empty-uprobe     a uprobe running an empty BPF program on cuLaunchKernel
 *                    (tools/bench/empty_uprobe.bpf.c): the floor
 *   cuprobe          cuprobe's probes + BPF ring buffer + the blocking agent,
 *                    the agent running here, outside the traced process
 *   cuprobe-wake250us the same with the wakeup latency bound at 250 us
 *                    (cp_tracer_opts.wakeup_latency_ns) set explicitly; since the default
 *                    became 250 us (CP_DEFAULT_WAKEUP_NS) it matches "cuprobe"
 *   exporter         the real `cuprobe exporter` (counting in maps, no --latency,
 *                    default interval) running system-wide while the workload
 *                    runs; delivered = the launches its /metrics counts for the pid
 *   preload-poll1ms  LD_PRELOAD interposer, shm ring, flag polled every 1 ms
 *   preload-busy     the same, consumer busy-polling
 *   preload-eventfd  the same, consumer woken through an eventfd
 *                    (interposers/preload_ring.c)
 *   bpftrace         Debian's bpftrace, a uprobe printf per launch
 *   cupti            a CUPTI callback subscriber (interposers/
 *                    cupti_subscriber.c): real driver only
 *
 * Each round runs every contender once, in turn, each in a fresh process
 * (baseline first), so ratios compare runs made minutes apart at most.
 * Per call: the workload's own timing of its loop (cp_bench_load, gemm_loop
 * print ns_per_call=), else wall time / calls. Latency: record time_ns
 * (CLOCK_MONOTONIC) to the consumer's clock when it handles the record.
 * Consumer CPU: the agent thread here, the consumer thread in the process
 * (its CPU clock), bpftrace's threads (schedstat). Idle: one run of
 * cp_bench_load that sleeps without calls. Exit safety: runs of
 * cp_bench_load --exit-race (main returns right after its loop), counting
 * signal deaths and hangs; cuprobe's runs go through the real `cuprobe
 * trace -- COMMAND`.
 *
 * Writes the markdown table to stdout and to DIR/compare-TAG-table.md, raw
 * data and a gnuplot script (compare.gp) to DIR/compare-TAG-data/
 * (drawing DIR/compare-TAG.png). tools/bench/compare.sh runs it all.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cp_bench_stats.h"
#include "cuprobe_internal.h"
#include "empty_uprobe.skel.h"

#define MAX_ROUNDS 64
/* The exporter contender: its default interval, how long its count may take to show, its idle run. */
#define EXPORTER_INTERVAL "5"
#define EXPORTER_WAIT_MS 8000
#define EXPORTER_IDLE_MS 10000
#define OUT_MAX    (64 * 1024)

enum kind { K_BASE, K_EMPTY, K_CUPROBE, K_EXPORTER, K_PRELOAD, K_BPFTRACE, K_CUPTI };

struct contender {
	const char *name;
	enum kind kind;
	const char *so_name;   /* preload/cupti: file in the lib dir */
	uint64_t wakeup_ns;    /* cuprobe: the tracer's wakeup latency bound; 0 = its default */
	char so_path[PATH_MAX];
	char skip[200];        /* why it did not run; "" when it did */
	bool enabled;
	/* per-call runs */
	double per_call[MAX_ROUNDS];
	double base_of_round[MAX_ROUNDS];
	int rounds;
	struct cp_bench_hist *hist;
	uint64_t produced, delivered, lost, undelivered, cpu_ns;
	int failed_runs;
	int measured_crashes;  /* measured runs that died by a signal after their loop */
	/* idle */
	bool idle_done;
	double idle_cpu_ms_per_s;
	/* exit race */
	int exit_runs, exit_crashes, exit_hangs, exit_failures;
	uint64_t exit_produced, exit_undelivered;
	char exit_note[160];
};

static struct contender contenders[] = {
	{ .name = "baseline", .kind = K_BASE },
	{ .name = "empty-uprobe", .kind = K_EMPTY },
	{ .name = "cuprobe", .kind = K_CUPROBE },
	{ .name = "cuprobe-wake250us", .kind = K_CUPROBE, .wakeup_ns = 250000 },
	{ .name = "exporter", .kind = K_EXPORTER },
	{ .name = "preload-poll1ms", .kind = K_PRELOAD, .so_name = "libcp_preload_poll1ms.so" },
	{ .name = "preload-busy", .kind = K_PRELOAD, .so_name = "libcp_preload_busy.so" },
	{ .name = "preload-eventfd", .kind = K_PRELOAD, .so_name = "libcp_preload_eventfd.so" },
	{ .name = "bpftrace", .kind = K_BPFTRACE },
	{ .name = "cupti", .kind = K_CUPTI, .so_name = "libcp_cupti_subscriber.so" },
};
#define N_CONTENDERS (sizeof(contenders) / sizeof(contenders[0]))

struct options {
	const char *workload;
	int rounds;
	long calls;
	int exit_runs;
	long exit_calls;
	long idle_ms;
	const char *out_dir;
	const char *tag;
	const char *only;
	char bin_dir[PATH_MAX];
	char lib_dir[PATH_MAX];
	char cuprobe[PATH_MAX];
	char bpftrace[PATH_MAX];
	char load[PATH_MAX];      /* cp_bench_load */
	char workload_exe[PATH_MAX];
	char cuda_lib[PATH_MAX];  /* the libcuda.so.1 the workload loads */
	bool sim;                 /* ... is the simulated driver */
	bool workload_times_itself;
};

static struct options opt;

/* ---- small helpers ---------------------------------------------------------- */

static void die(const char *what, int err)
{
	fprintf(stderr, "cp_compare: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* snprintf that refuses to cut: a path or message too long for its buffer ends the run. */
#define format_into(buf, len, ...)                                                         \
	do {                                                                               \
		int format_n_ = snprintf((buf), (len), __VA_ARGS__);                        \
		if (format_n_ < 0 || (size_t)format_n_ >= (size_t)(len))                    \
			die("text too long for its buffer", ENAMETOOLONG);                  \
	} while (0)

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *values, int n)
{
	double sorted[MAX_ROUNDS];

	if (n <= 0)
		return 0;
	memcpy(sorted, values, (size_t)n * sizeof(*values));
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
	return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* CPU time of every thread of pid except skip_tid, from schedstat (ns). */
static uint64_t threads_cpu_ns(pid_t pid, pid_t skip_tid)
{
	char path[64];
	struct dirent *entry;
	uint64_t sum = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((entry = readdir(dir))) {
		char stat_path[128];
		unsigned long long ns;
		FILE *file;

		if (entry->d_name[0] == '.' || atoi(entry->d_name) == skip_tid)
			continue;
		format_into(stat_path, sizeof(stat_path), "/proc/%d/task/%s/schedstat", (int)pid,
			 entry->d_name);
		file = fopen(stat_path, "r");
		if (!file)
			continue;
		if (fscanf(file, "%llu", &ns) == 1)
			sum += ns;
		fclose(file);
	}
	closedir(dir);
	return sum;
}

static bool file_exists(const char *path, int mode)
{
	return access(path, mode) == 0;
}


/* ---- children: started held, released, waited for with a timeout ----------- */

struct child {
	pid_t pid;
	int gate_fd;
	int out_fd;
	uint64_t released_ns;
	uint64_t wall_ns;
	int status;
	bool hung;
	char out[OUT_MAX];
	size_t out_len;
};

/* Forks a child that waits for child_release() before exec. env: NAME=VALUE strings. */
static void child_spawn(struct child *child, char *const argv[], char *const env[], bool keep_stderr)
{
	int gate[2], out[2];

	memset(child, 0, sizeof(*child));
	if (pipe2(gate, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		die("pipe", errno);
	child->pid = fork();
	if (child->pid < 0)
		die("fork", errno);
	if (child->pid == 0) {
		char byte;
		int i;

		dup2(out[1], STDOUT_FILENO);
		if (keep_stderr) {
			dup2(out[1], STDERR_FILENO);
		} else {
			int null_fd = open("/dev/null", O_WRONLY);

			dup2(null_fd, STDERR_FILENO);
		}
		if (read(gate[0], &byte, 1) != 1)
			_exit(125);
		for (i = 0; env && env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(gate[0]);
	close(out[1]);
	child->gate_fd = gate[1];
	child->out_fd = out[0];
}

static void child_release(struct child *child)
{
	child->released_ns = cp_bench_now_ns();
	if (write(child->gate_fd, "g", 1) != 1)
		die("release child", errno);
	close(child->gate_fd);
	child->gate_fd = -1;
}

/* Reads its output until it exits; a child alive after timeout_ms is killed and marked hung. */
static void child_wait(struct child *child, long timeout_ms)
{
	uint64_t deadline = cp_bench_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	bool reaped = false, eof = false;

	while (!reaped || !eof) {
		struct pollfd pfd = { .fd = child->out_fd, .events = POLLIN };

		if (!eof && poll(&pfd, 1, reaped ? 200 : 20) > 0) {
			ssize_t n = read(child->out_fd, child->out + child->out_len,
					 sizeof(child->out) - 1 - child->out_len);

			if (n <= 0 || child->out_len + (size_t)n >= sizeof(child->out) - 1)
				eof = true;
			if (n > 0)
				child->out_len += (size_t)n;
		} else if (reaped) {
			eof = true; /* a grandchild holds the pipe: stop reading */
		} else if (eof) {
			sleep_ms(5);
		}
		if (!reaped && waitpid(child->pid, &child->status, WNOHANG) == child->pid) {
			reaped = true;
			child->wall_ns = cp_bench_now_ns() - child->released_ns;
		}
		if (!reaped && cp_bench_now_ns() > deadline) {
			child->hung = true;
			kill(child->pid, SIGKILL);
			waitpid(child->pid, &child->status, 0);
			child->wall_ns = cp_bench_now_ns() - child->released_ns;
			reaped = true;
		}
	}
	child->out[child->out_len] = '\0';
	close(child->out_fd);
	child->out_fd = -1;
}

static bool child_ok(const struct child *child)
{
	return !child->hung && WIFEXITED(child->status) && WEXITSTATUS(child->status) == 0;
}

/* ---- the workload ------------------------------------------------------------ */

static char arg_buf[8][32];

/* The measured workload's argv for `calls` calls. */
static void workload_argv(char **argv, long calls)
{
	int n = 0;

	snprintf(arg_buf[0], sizeof(arg_buf[0]), "%ld", calls);
	argv[n++] = opt.workload_exe;
	if (!strcmp(opt.workload, "load")) {
		/* 100 ms asleep before the timed loop: consumer threads get placed on a CPU first. */
		argv[n++] = "--calls";
		argv[n++] = arg_buf[0];
		argv[n++] = "--idle-ms";
		argv[n++] = "100";
	} else if (!strcmp(opt.workload, "drv_launch")) {
		argv[n++] = arg_buf[0];
		argv[n++] = "1";
		argv[n++] = "--elements";
		argv[n++] = "32";
	} else if (!strcmp(opt.workload, "vec_add")) {
		argv[n++] = arg_buf[0];
		argv[n++] = "32";
	} else { /* gemm */
		argv[n++] = arg_buf[0];
		argv[n++] = "256";
	}
	argv[n] = NULL;
}

/* cp_bench_load for the idle and exit-race runs. */
static void load_argv(char **argv, long calls, long idle_ms, bool exit_race)
{
	int n = 0;

	snprintf(arg_buf[1], sizeof(arg_buf[1]), "%ld", calls);
	snprintf(arg_buf[2], sizeof(arg_buf[2]), "%ld", idle_ms);
	argv[n++] = opt.load;
	argv[n++] = "--calls";
	argv[n++] = arg_buf[1];
	argv[n++] = "--idle-ms";
	argv[n++] = arg_buf[2];
	if (exit_race)
		argv[n++] = "--exit-race";
	argv[n] = NULL;
}

/* ns per call from the child's output, or wall time / calls. */
static double per_call_of(const struct child *child, long calls)
{
	const char *field = strstr(child->out, "ns_per_call=");

	if (field)
		return strtod(field + strlen("ns_per_call="), NULL);
	return calls ? (double)child->wall_ns / (double)calls : 0;
}

/* ---- what the in-process contenders report ---------------------------------- */

struct stats_line {
	bool found;
	uint64_t produced, delivered, lost, cpu_ns, alive_ns;
	struct cp_bench_hist hist;
};

static uint64_t field_u64(const char *line, const char *name)
{
	const char *at = strstr(line, name);

	return at ? strtoull(at + strlen(name), NULL, 10) : 0;
}

/* Reads the stats line of pid from path (cp_bench_stats.h), then removes the file. */
static void read_stats(const char *path, pid_t pid, struct stats_line *out)
{
	static char line[CP_BENCH_HIST_BUCKETS * 24 + 512];
	char pid_field[32];
	FILE *file = fopen(path, "r");

	memset(out, 0, sizeof(*out));
	if (!file)
		return;
	snprintf(pid_field, sizeof(pid_field), " pid=%d ", (int)pid);
	while (fgets(line, sizeof(line), file)) {
		const char *hist;

		if (strncmp(line, "cp_bench_stats ", 15) || !strstr(line, pid_field))
			continue;
		out->found = true;
		out->produced = field_u64(line, " produced=");
		out->delivered = field_u64(line, " delivered=");
		out->lost = field_u64(line, " lost=");
		out->cpu_ns = field_u64(line, " cpu_ns=");
		out->alive_ns = field_u64(line, " alive_ns=");
		out->hist.max = field_u64(line, " max_ns=");
		hist = strstr(line, " hist=");
		if (hist) {
			const char *p = hist + 6;

			while (*p && *p != '\n') {
				char *end;
				unsigned long index = strtoul(p, &end, 10);
				unsigned long long count;

				if (*end != ':')
					break;
				count = strtoull(end + 1, &end, 10);
				if (index < CP_BENCH_HIST_BUCKETS) {
					out->hist.count[index] += count;
					out->hist.total += count;
				}
				p = *end == ',' ? end + 1 : end;
			}
		}
	}
	fclose(file);
	unlink(path);
}

static void cleanup_shm(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/shm/cp_preload.%d", (int)pid);
	unlink(path);
	snprintf(path, sizeof(path), "/dev/shm/cp_cupti.%d", (int)pid);
	unlink(path);
}

/* ---- cuprobe, in this process ------------------------------------------------- */

struct cuprobe_sink {
	pid_t pid;
	struct cp_bench_hist *hist;
	_Atomic uint64_t delivered;
};

static int cuprobe_on_event(void *ctx, const union cp_event *event)
{
	struct cuprobe_sink *sink = ctx;
	uint64_t now = cp_bench_now_ns();

	if (event->hdr.pid != (uint32_t)sink->pid)
		return 0;
	cp_bench_hist_add(sink->hist, now > event->hdr.time_ns ? now - event->hdr.time_ns : 0);
	atomic_fetch_add_explicit(&sink->delivered, 1, memory_order_relaxed);
	return 0;
}

struct cuprobe_run {
	struct cp_tracer *tracer;
	struct cp_agent *agent;
	struct cuprobe_sink sink;
};

static int cuprobe_start(struct cuprobe_run *run, pid_t pid, struct cp_bench_hist *hist,
			 uint64_t wakeup_ns)
{
	struct cp_tracer_opts tracer_opts = { .sz = sizeof(tracer_opts), .wakeup_latency_ns = wakeup_ns };
	struct cp_agent_opts agent_opts = { .sz = sizeof(agent_opts), .on_event = cuprobe_on_event };
	int err;

	memset(run, 0, sizeof(*run));
	run->sink.pid = pid;
	run->sink.hist = hist;
	agent_opts.ctx = &run->sink;
	run->tracer = cp_tracer__open(&tracer_opts);
	if (!run->tracer)
		return -errno;
	err = cp_tracer__attach_driver(run->tracer, opt.cuda_lib, NULL);
	if (!err)
		err = cp_tracer__add_pid(run->tracer, pid);
	if (!err) {
		run->agent = cp_agent__new(cp_tracer__ring_fd(run->tracer), &agent_opts);
		if (!run->agent || cp_agent__start(run->agent))
			err = -errno ? -errno : -EIO;
	}
	if (err) {
		cp_agent__free(run->agent);
		cp_tracer__free(run->tracer);
		run->agent = NULL;
		run->tracer = NULL;
	}
	return err;
}

/* Waits until every record the BPF side wrote for the child is delivered (or 3 s). */
static void cuprobe_drain(struct cuprobe_run *run, struct cp_counters *counters)
{
	uint64_t deadline = cp_bench_now_ns() + 3000000000ull;

	/* The agent wakes at the latest after its idle timeout (1 s): wait longer than that. */
	for (;;) {
		cp_tracer__read_counters(run->tracer, counters);
		if (atomic_load(&run->sink.delivered) + counters->records_lost >=
		    counters->records_attempted || cp_bench_now_ns() > deadline)
			break;
		sleep_ms(2);
	}
}

static void cuprobe_finish(struct cuprobe_run *run)
{
	cp_agent__stop(run->agent);
	cp_agent__free(run->agent);
	cp_tracer__free(run->tracer);
}

/* ---- the bare uprobe ------------------------------------------------------------ */

static struct empty_uprobe_bpf *empty_start(int *err)
{
	const char *names[] = { "cuLaunchKernel" };
	uint64_t offset = 0;
	struct empty_uprobe_bpf *skel = empty_uprobe_bpf__open_and_load();
	LIBBPF_OPTS(bpf_uprobe_opts, uprobe_opts);

	*err = 0;
	if (!skel) {
		*err = -errno;
		return NULL;
	}
	if (cp_elf__function_offsets(opt.cuda_lib, names, 1, &offset) != 1 || !offset) {
		*err = -ENOENT;
		empty_uprobe_bpf__destroy(skel);
		return NULL;
	}
	skel->links.empty_uprobe = bpf_program__attach_uprobe_opts(skel->progs.empty_uprobe, -1,
								   opt.cuda_lib, offset, &uprobe_opts);
	if (!skel->links.empty_uprobe) {
		*err = -errno;
		empty_uprobe_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/* ---- bpftrace ---------------------------------------------------------------------- */

struct bpftrace_run {
	pid_t pid;
	int out_fd;
	pthread_t reader;
	struct cp_bench_hist *hist;
	_Atomic uint64_t lines;
	_Atomic uint64_t lost;
	_Atomic bool ready;
	_Atomic bool gone;
};

static void *bpftrace_reader(void *arg)
{
	struct bpftrace_run *run = arg;
	static char buf[1 << 16];
	size_t used = 0;

	for (;;) {
		ssize_t n = read(run->out_fd, buf + used, sizeof(buf) - 1 - used);
		uint64_t now = cp_bench_now_ns();
		char *line, *newline;

		if (n <= 0)
			break;
		used += (size_t)n;
		buf[used] = '\0';
		line = buf;
		while ((newline = strchr(line, '\n'))) {
			*newline = '\0';
			if (!strcmp(line, "ready")) {
				atomic_store(&run->ready, true);
			} else if (!strncmp(line, "Lost ", 5)) {
				atomic_fetch_add(&run->lost, strtoull(line + 5, NULL, 10));
			} else if (line[0] >= '0' && line[0] <= '9') {
				uint64_t then = strtoull(line, NULL, 10);

				if (run->hist)
					cp_bench_hist_add(run->hist, now > then ? now - then : 0);
				atomic_fetch_add(&run->lines, 1);
			}
			line = newline + 1;
		}
		used = strlen(line);
		memmove(buf, line, used);
		if (used >= sizeof(buf) - 1)
			used = 0;
	}
	atomic_store(&run->gone, true);
	return NULL;
}

/* Starts bpftrace on the workload's cuLaunchKernel, filtered by pid (or comm when pid is 0). */
static int bpftrace_start(struct bpftrace_run *run, pid_t pid, const char *comm, struct cp_bench_hist *hist)
{
	static char program[2048];
	char filter[64];
	char *argv[] = { opt.bpftrace, "-B", "line", "-e", program, NULL };
	uint64_t deadline;
	int out[2];

	memset(run, 0, sizeof(*run));
	run->hist = hist;
	if (pid)
		snprintf(filter, sizeof(filter), "pid == %d", (int)pid);
	else
		snprintf(filter, sizeof(filter), "comm == \"%s\"", comm);
	/* The same fields as cuprobe's launch record; sargN are the stack arguments. */
	format_into(program, sizeof(program),
		 "BEGIN { printf(\"ready\\n\"); }\n"
		 "uprobe:%s:cuLaunchKernel /%s/ {\n"
		 "  printf(\"%%llu %%d %%d %%llx %%u %%u %%u %%u %%u %%u %%u %%llx\\n\", nsecs, pid, tid,\n"
		 "         arg0, arg1, arg2, arg3, arg4, arg5, sarg0, sarg1, sarg2);\n"
		 "}\n", opt.cuda_lib, filter);
	if (pipe2(out, O_CLOEXEC))
		return -errno;
	run->pid = fork();
	if (run->pid < 0)
		return -errno;
	if (run->pid == 0) {
		int null_fd = open("/dev/null", O_WRONLY);

		dup2(out[1], STDOUT_FILENO);
		dup2(null_fd, STDERR_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	run->out_fd = out[0];
	if (pthread_create(&run->reader, NULL, bpftrace_reader, run))
		return -EAGAIN;
	deadline = cp_bench_now_ns() + 30000000000ull;
	while (!atomic_load(&run->ready) && !atomic_load(&run->gone) && cp_bench_now_ns() < deadline)
		sleep_ms(10);
	if (!atomic_load(&run->ready)) {
		kill(run->pid, SIGKILL);
		waitpid(run->pid, NULL, 0);
		pthread_join(run->reader, NULL);
		close(run->out_fd);
		return -ETIMEDOUT;
	}
	return 0;
}

/* Waits until `expected` lines came (or no new one for 1 s). */
static void bpftrace_drain(struct bpftrace_run *run, uint64_t expected)
{
	uint64_t last = atomic_load(&run->lines), last_change = cp_bench_now_ns();

	while (atomic_load(&run->lines) < expected && !atomic_load(&run->gone)) {
		uint64_t now_lines = atomic_load(&run->lines);

		if (now_lines != last) {
			last = now_lines;
			last_change = cp_bench_now_ns();
		} else if (cp_bench_now_ns() - last_change > 1000000000ull) {
			break;
		}
		sleep_ms(5);
	}
}

/* SIGINT, then SIGKILL after 5 s. Returns true when it was still running before the signal. */
static bool bpftrace_stop(struct bpftrace_run *run)
{
	bool alive = waitpid(run->pid, NULL, WNOHANG) == 0;
	uint64_t deadline = cp_bench_now_ns() + 5000000000ull;
	int status;

	kill(run->pid, SIGINT);
	while (waitpid(run->pid, &status, WNOHANG) == 0) {
		if (cp_bench_now_ns() > deadline) {
			kill(run->pid, SIGKILL);
			waitpid(run->pid, &status, 0);
			break;
		}
		sleep_ms(10);
	}
	pthread_join(run->reader, NULL);
	close(run->out_fd);
	return alive;
}

/* ---- cuprobe exporter, the command line -------------------------------------------- */

/*
 * `cuprobe exporter` counting only (no --latency), system-wide on the
 * workload's driver file, at its default interval; its counts are read back
 * from /metrics as a scraper would.
 */
struct exporter_run {
	pid_t pid;
	int err_fd;
	int port;
};

static int loopback_port(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&addr, sizeof(addr)) &&
	    !getsockname(fd, (struct sockaddr *)&addr, &len))
		port = ntohs(addr.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Starts it; returns once it says it serves (0), or -errno. */
static int exporter_start(struct exporter_run *run, const char *interval)
{
	char listen[64], said[4096];
	char *argv[] = { opt.cuprobe, "exporter", "--lib", opt.cuda_lib, "--listen", listen,
			 "-i", (char *)interval, NULL };
	size_t used = 0;
	uint64_t deadline;
	int err[2];

	memset(run, 0, sizeof(*run));
	run->port = loopback_port();
	if (run->port < 0)
		return -EADDRNOTAVAIL;
	format_into(listen, sizeof(listen), "127.0.0.1:%d", run->port);
	if (pipe2(err, O_CLOEXEC))
		return -errno;
	run->pid = fork();
	if (run->pid < 0)
		return -errno;
	if (run->pid == 0) {
		int null_fd = open("/dev/null", O_RDWR);

		dup2(null_fd, STDIN_FILENO);
		dup2(null_fd, STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(err[1]);
	run->err_fd = err[0];
	deadline = cp_bench_now_ns() + 60000000000ull;
	while (cp_bench_now_ns() < deadline) {
		struct pollfd pfd = { .fd = run->err_fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(run->err_fd, said + used, sizeof(said) - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
		said[used] = '\0';
		if (strstr(said, "serving metrics on"))
			return 0;
		if (used >= sizeof(said) - 1)
			break;
	}
	kill(run->pid, SIGKILL);
	waitpid(run->pid, NULL, 0);
	close(run->err_fd);
	return -ETIMEDOUT;
}

/* SIGTERM (it exits 0), SIGKILL after 20 s. True when it ended by itself with 0. */
static bool exporter_stop(struct exporter_run *run)
{
	uint64_t deadline = cp_bench_now_ns() + 20000000000ull;
	int status = 0;

	kill(run->pid, SIGTERM);
	while (waitpid(run->pid, &status, WNOHANG) == 0) {
		if (cp_bench_now_ns() > deadline) {
			kill(run->pid, SIGKILL);
			waitpid(run->pid, &status, 0);
			break;
		}
		sleep_ms(10);
	}
	close(run->err_fd);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* GET /metrics (Prometheus text) into a malloc'd string, or NULL. */
static char *exporter_scrape(const struct exporter_run *run)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)run->port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static const char request[] = "GET /metrics HTTP/1.0\r\n\r\n";
	size_t used = 0, capacity = 1 << 16;
	char *text = malloc(capacity);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (!text || fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    write(fd, request, sizeof(request) - 1) != (ssize_t)sizeof(request) - 1) {
		free(text);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	for (;;) {
		ssize_t n;

		if (used + 1 >= capacity) {
			char *bigger = realloc(text, capacity * 2);

			if (!bigger)
				break;
			text = bigger;
			capacity *= 2;
		}
		n = read(fd, text + used, capacity - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	text[used] = '\0';
	return text;
}

/* The sum of cuprobe_kernel_launches_total over pid's series in a scrape. */
static uint64_t exporter_launches(const char *text, pid_t pid)
{
	char prefix[64];
	uint64_t sum = 0;
	const char *at = text;

	snprintf(prefix, sizeof(prefix), "\ncuprobe_kernel_launches_total{pid=\"%d\",", (int)pid);
	while ((at = strstr(at, prefix))) {
		const char *value = strchr(at + 1, '\n');

		/* The value follows the last space of the line. */
		for (value = value ? value : at + strlen(at); value > at && value[-1] != ' '; value--)
			;
		sum += strtoull(value, NULL, 10);
		at++;
	}
	return sum;
}

/* Waits (up to timeout_ms: the exporter reads its maps every interval) for want launches of pid. */
static uint64_t exporter_wait_launches(const struct exporter_run *run, pid_t pid, uint64_t want,
				       long timeout_ms)
{
	uint64_t deadline = cp_bench_now_ns() + (uint64_t)timeout_ms * 1000000ull, got = 0;

	do {
		char *text = exporter_scrape(run);

		got = text ? exporter_launches(text, pid) : 0;
		free(text);
		if (got >= want)
			break;
		sleep_ms(100);
	} while (cp_bench_now_ns() < deadline);
	return got;
}

/* ---- one measured run of one contender ------------------------------------------ */

static void note_skip(struct contender *c, const char *why)
{
	if (!c->skip[0])
		snprintf(c->skip, sizeof(c->skip), "%s", why);
	c->enabled = false;
}

static void run_measured(struct contender *c, int round, double base)
{
	char stats_path[PATH_MAX + 32], stats_env[PATH_MAX + 48], so_env[PATH_MAX + 48];
	char *argv[16], *env[4] = { NULL };
	struct empty_uprobe_bpf *empty = NULL;
	struct cuprobe_run cuprobe;
	struct bpftrace_run bpftrace;
	struct exporter_run exporter;
	struct cp_counters counters;
	struct stats_line stats;
	struct child child;
	uint64_t cpu_before = 0, cpu_after = 0;
	int err = 0;

	workload_argv(argv, opt.calls);
	snprintf(stats_path, sizeof(stats_path), "%s/.cp_compare_stats.%d", opt.out_dir, (int)getpid());
	unlink(stats_path);
	if (c->kind == K_PRELOAD || c->kind == K_CUPTI) {
		snprintf(stats_env, sizeof(stats_env), "CP_BENCH_STATS=%s", stats_path);
		snprintf(so_env, sizeof(so_env), "%s=%s",
			 c->kind == K_PRELOAD ? "LD_PRELOAD" : "CUDA_INJECTION64_PATH", c->so_path);
		env[0] = so_env;
		env[1] = stats_env;
	}
	child_spawn(&child, argv, env, false);
	switch (c->kind) {
	case K_EMPTY:
		empty = empty_start(&err);
		break;
	case K_CUPROBE:
		err = cuprobe_start(&cuprobe, child.pid, c->hist, c->wakeup_ns);
		if (!err)
			cpu_before = threads_cpu_ns(getpid(), (pid_t)syscall(SYS_gettid));
		break;
	case K_BPFTRACE:
		err = bpftrace_start(&bpftrace, child.pid, NULL, c->hist);
		if (!err)
			cpu_before = threads_cpu_ns(bpftrace.pid, 0);
		break;
	case K_EXPORTER:
		err = exporter_start(&exporter, EXPORTER_INTERVAL);
		if (!err)
			cpu_before = threads_cpu_ns(exporter.pid, 0);
		break;
	default:
		break;
	}
	if (err) {
		char why[200];

		snprintf(why, sizeof(why), "setup failed: %s", strerror(-err));
		kill(child.pid, SIGKILL);
		waitpid(child.pid, NULL, 0);
		close(child.gate_fd);
		close(child.out_fd);
		note_skip(c, why);
		return;
	}
	child_release(&child);
	child_wait(&child, 300000);
	switch (c->kind) {
	case K_EMPTY:
		empty_uprobe_bpf__destroy(empty);
		break;
	case K_CUPROBE:
		cuprobe_drain(&cuprobe, &counters);
		cpu_after = threads_cpu_ns(getpid(), (pid_t)syscall(SYS_gettid));
		cuprobe_finish(&cuprobe);
		c->produced += counters.records_attempted;
		c->lost += counters.records_lost;
		c->delivered += atomic_load(&cuprobe.sink.delivered);
		if (counters.records_attempted > counters.records_lost + atomic_load(&cuprobe.sink.delivered))
			c->undelivered += counters.records_attempted - counters.records_lost -
					  atomic_load(&cuprobe.sink.delivered);
		c->cpu_ns += cpu_after - cpu_before;
		break;
	case K_EXPORTER: {
		uint64_t counted;

		/* Its CPU while the workload ran; then its counts, at its next read of the maps. */
		cpu_after = threads_cpu_ns(exporter.pid, 0);
		counted = exporter_wait_launches(&exporter, child.pid, (uint64_t)opt.calls, EXPORTER_WAIT_MS);
		if (!exporter_stop(&exporter))
			c->failed_runs++;
		c->produced += (uint64_t)opt.calls;
		c->delivered += counted;
		if ((uint64_t)opt.calls > counted)
			c->undelivered += (uint64_t)opt.calls - counted;
		c->cpu_ns += cpu_after - cpu_before;
		break;
	}
	case K_BPFTRACE:
		bpftrace_drain(&bpftrace, (uint64_t)opt.calls);
		cpu_after = threads_cpu_ns(bpftrace.pid, 0);
		bpftrace_stop(&bpftrace);
		c->produced += (uint64_t)opt.calls;
		c->delivered += atomic_load(&bpftrace.lines);
		c->lost += atomic_load(&bpftrace.lost);
		if ((uint64_t)opt.calls > atomic_load(&bpftrace.lines) + atomic_load(&bpftrace.lost))
			c->undelivered += (uint64_t)opt.calls - atomic_load(&bpftrace.lines) -
					  atomic_load(&bpftrace.lost);
		c->cpu_ns += cpu_after - cpu_before;
		break;
	case K_PRELOAD:
	case K_CUPTI:
		read_stats(stats_path, child.pid, &stats);
		cleanup_shm(child.pid);
		if (stats.found) {
			c->produced += stats.produced;
			c->delivered += stats.delivered;
			c->lost += stats.lost;
			if (stats.produced > stats.lost + stats.delivered)
				c->undelivered += stats.produced - stats.lost - stats.delivered;
			c->cpu_ns += stats.cpu_ns;
			cp_bench_hist_merge(c->hist, &stats.hist);
		}
		break;
	default:
		break;
	}
	/* A run that finished its loop counts, even when it died at exit (counted apart). */
	if (!child.hung && WIFSIGNALED(child.status))
		c->measured_crashes++;
	if (child.hung || (!child_ok(&child) && !WIFSIGNALED(child.status)) ||
	    (!strstr(child.out, "ns_per_call=") && !strstr(child.out, "result=ok"))) {
		c->failed_runs++;
		return;
	}
	c->per_call[c->rounds] = per_call_of(&child, opt.calls);
	c->base_of_round[c->rounds] = base > 0 ? base : c->per_call[c->rounds];
	c->rounds++;
	(void)round;
}

/* ---- idle consumer CPU ------------------------------------------------------------ */

static void run_idle(struct contender *c)
{
	char stats_path[PATH_MAX + 32], stats_env[PATH_MAX + 48], so_env[PATH_MAX + 48];
	char *argv[16], *env[4] = { NULL };
	struct cuprobe_run cuprobe;
	struct bpftrace_run bpftrace;
	struct exporter_run exporter;
	struct stats_line stats;
	struct child child;
	struct cp_bench_hist scratch;
	uint64_t before = 0, after = 0;
	pid_t self_tid = (pid_t)syscall(SYS_gettid);

	if (c->kind == K_BASE || c->kind == K_EMPTY || !c->enabled)
		return;
	memset(&scratch, 0, sizeof(scratch));
	/* The exporter's work is one read of the maps per interval: idle over two of them. */
	load_argv(argv, 0, c->kind == K_EXPORTER && opt.idle_ms < EXPORTER_IDLE_MS ? EXPORTER_IDLE_MS :
		  opt.idle_ms, false);
	snprintf(stats_path, sizeof(stats_path), "%s/.cp_compare_stats.%d", opt.out_dir, (int)getpid());
	unlink(stats_path);
	if (c->kind == K_PRELOAD || c->kind == K_CUPTI) {
		snprintf(stats_env, sizeof(stats_env), "CP_BENCH_STATS=%s", stats_path);
		snprintf(so_env, sizeof(so_env), "%s=%s",
			 c->kind == K_PRELOAD ? "LD_PRELOAD" : "CUDA_INJECTION64_PATH", c->so_path);
		env[0] = so_env;
		env[1] = stats_env;
	}
	child_spawn(&child, argv, env, false);
	if (c->kind == K_CUPROBE && cuprobe_start(&cuprobe, child.pid, &scratch, c->wakeup_ns)) {
		kill(child.pid, SIGKILL);
		waitpid(child.pid, NULL, 0);
		return;
	}
	if (c->kind == K_BPFTRACE && bpftrace_start(&bpftrace, child.pid, NULL, NULL)) {
		kill(child.pid, SIGKILL);
		waitpid(child.pid, NULL, 0);
		return;
	}
	if (c->kind == K_EXPORTER && exporter_start(&exporter, EXPORTER_INTERVAL)) {
		kill(child.pid, SIGKILL);
		waitpid(child.pid, NULL, 0);
		return;
	}
	if (c->kind == K_CUPROBE)
		before = threads_cpu_ns(getpid(), self_tid);
	if (c->kind == K_BPFTRACE)
		before = threads_cpu_ns(bpftrace.pid, 0);
	if (c->kind == K_EXPORTER)
		before = threads_cpu_ns(exporter.pid, 0);
	child_release(&child);
	child_wait(&child, 60000);
	if (c->kind == K_EXPORTER) {
		after = threads_cpu_ns(exporter.pid, 0);
		exporter_stop(&exporter);
		c->idle_cpu_ms_per_s = (double)(after - before) / 1e6 / ((double)child.wall_ns / 1e9);
		c->idle_done = true;
	} else if (c->kind == K_CUPROBE) {
		after = threads_cpu_ns(getpid(), self_tid);
		cuprobe_finish(&cuprobe);
		c->idle_cpu_ms_per_s = (double)(after - before) / 1e6 / ((double)child.wall_ns / 1e9);
		c->idle_done = true;
	} else if (c->kind == K_BPFTRACE) {
		after = threads_cpu_ns(bpftrace.pid, 0);
		bpftrace_stop(&bpftrace);
		c->idle_cpu_ms_per_s = (double)(after - before) / 1e6 / ((double)child.wall_ns / 1e9);
		c->idle_done = true;
	} else {
		read_stats(stats_path, child.pid, &stats);
		cleanup_shm(child.pid);
		if (stats.found && stats.alive_ns) {
			c->idle_cpu_ms_per_s = (double)stats.cpu_ns / 1e6 / ((double)stats.alive_ns / 1e9);
			c->idle_done = true;
		}
	}
}

/* ---- exit races ------------------------------------------------------------------- */

static void count_exit(struct contender *c, const struct child *child, bool via_cli)
{
	c->exit_runs++;
	if (child->hung)
		c->exit_hangs++;
	else if (WIFSIGNALED(child->status) || (via_cli && WIFEXITED(child->status) &&
						WEXITSTATUS(child->status) >= 128))
		c->exit_crashes++;
	else if (!WIFEXITED(child->status) || WEXITSTATUS(child->status))
		c->exit_failures++;
}

static void run_exit_races(struct contender *c)
{
	char stats_path[PATH_MAX + 32], stats_env[PATH_MAX + 48], so_env[PATH_MAX + 48];
	char *argv[24], *env[4] = { NULL };
	struct bpftrace_run bpftrace;
	struct exporter_run exporter;
	struct stats_line stats;
	struct child child;
	pid_t *exporter_pids = NULL;
	int i;

	if (!c->enabled || c->kind == K_EMPTY)
		return;
	if (c->kind == K_CUPROBE && c->wakeup_ns) {
		format_into(c->exit_note, sizeof(c->exit_note), "as cuprobe (only the wakeup bound differs)");
		return;
	}
	snprintf(stats_path, sizeof(stats_path), "%s/.cp_compare_stats.%d", opt.out_dir, (int)getpid());
	if (c->kind == K_PRELOAD || c->kind == K_CUPTI) {
		snprintf(stats_env, sizeof(stats_env), "CP_BENCH_STATS=%s", stats_path);
		snprintf(so_env, sizeof(so_env), "%s=%s",
			 c->kind == K_PRELOAD ? "LD_PRELOAD" : "CUDA_INJECTION64_PATH", c->so_path);
		env[0] = so_env;
		env[1] = stats_env;
	}
	if (c->kind == K_BPFTRACE && bpftrace_start(&bpftrace, 0, "cp_bench_load", NULL)) {
		snprintf(c->exit_note, sizeof(c->exit_note), "bpftrace did not start");
		return;
	}
	if (c->kind == K_CUPROBE && !file_exists(opt.cuprobe, X_OK)) {
		format_into(c->exit_note, sizeof(c->exit_note), "no cuprobe binary");
		return;
	}
	if (c->kind == K_EXPORTER) {
		exporter_pids = calloc((size_t)opt.exit_runs + 1, sizeof(*exporter_pids));
		if (!exporter_pids)
			die("calloc", ENOMEM);
		if (exporter_start(&exporter, EXPORTER_INTERVAL)) {
			format_into(c->exit_note, sizeof(c->exit_note), "the exporter did not start");
			free(exporter_pids);
			return;
		}
	}
	for (i = 0; i < opt.exit_runs; i++) {
		if (c->kind == K_CUPROBE) {
			char *load[8];
			int n = 0, j;

			load_argv(load, opt.exit_calls, 0, true);
			argv[n++] = opt.cuprobe;
			argv[n++] = "trace";
			argv[n++] = "-o";
			argv[n++] = "/dev/null";
			argv[n++] = "--";
			for (j = 0; load[j]; j++)
				argv[n++] = load[j];
			argv[n] = NULL;
			child_spawn(&child, argv, NULL, true);
		} else {
			load_argv(argv, opt.exit_calls, 0, true);
			unlink(stats_path);
			child_spawn(&child, argv, env, false);
		}
		child_release(&child);
		child_wait(&child, c->kind == K_CUPROBE ? 60000 : 20000);
		count_exit(c, &child, c->kind == K_CUPROBE);
		c->exit_produced += (uint64_t)opt.exit_calls;
		if (exporter_pids)
			exporter_pids[i] = child.pid;
		if (c->kind == K_PRELOAD || c->kind == K_CUPTI) {
			read_stats(stats_path, child.pid, &stats);
			cleanup_shm(child.pid);
			if (stats.found && stats.produced > stats.delivered)
				c->exit_undelivered += stats.produced - stats.delivered;
			else if (!stats.found)
				c->exit_undelivered += (uint64_t)opt.exit_calls;
		} else if (c->kind == K_CUPROBE) {
			/* "cuprobe: N events delivered, L lost, ..." */
			const char *line = strstr(child.out, "events delivered");

			if (line) {
				const char *start = line;
				unsigned long long got;

				while (start > child.out && start[-1] != ':' && start[-1] != '\n')
					start--;
				got = strtoull(start, NULL, 10);
				/* setup and exit records come on top of the launches */
				if (got < (unsigned long long)opt.exit_calls)
					c->exit_undelivered += (uint64_t)opt.exit_calls - got;
			} else {
				c->exit_undelivered += (uint64_t)opt.exit_calls;
			}
		}
	}
	if (c->kind == K_BPFTRACE) {
		uint64_t expected = (uint64_t)opt.exit_calls * (uint64_t)opt.exit_runs;
		bool alive;

		bpftrace_drain(&bpftrace, expected);
		alive = bpftrace_stop(&bpftrace);
		if (atomic_load(&bpftrace.lines) < expected)
			c->exit_undelivered += expected - atomic_load(&bpftrace.lines);
		snprintf(c->exit_note, sizeof(c->exit_note), "one bpftrace for all runs, %s at the end",
			 alive ? "alive" : "dead");
	}
	if (exporter_pids) {
		/* One exporter for all runs: each run's launches, kept under its pid after its exit. */
		for (i = 0; i < opt.exit_runs; i++) {
			uint64_t got = exporter_wait_launches(&exporter, exporter_pids[i],
							      (uint64_t)opt.exit_calls,
							      i ? 1000 : EXPORTER_WAIT_MS);

			if (got < (uint64_t)opt.exit_calls)
				c->exit_undelivered += (uint64_t)opt.exit_calls - got;
		}
		snprintf(c->exit_note, sizeof(c->exit_note), "one exporter for all runs, %s",
			 exporter_stop(&exporter) ? "exited 0 at SIGTERM" : "did not exit 0 at SIGTERM");
		free(exporter_pids);
	}
}

/* ---- output -------------------------------------------------------------------- */

static const char *fmt_ns(double ns, char *buf, size_t len)
{
	if (ns < 0) {
		char positive[32];

		snprintf(buf, len, "-%s", fmt_ns(-ns, positive, sizeof(positive)));
	} else if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.1f µs", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}

static void paired(const struct contender *c, double *ratio, double *added)
{
	double ratios[MAX_ROUNDS], adds[MAX_ROUNDS];
	int r;

	for (r = 0; r < c->rounds; r++) {
		ratios[r] = c->per_call[r] / c->base_of_round[r];
		adds[r] = c->per_call[r] - c->base_of_round[r];
	}
	*ratio = median(ratios, c->rounds);
	*added = median(adds, c->rounds);
}

static struct contender *find(const char *name)
{
	size_t i;

	for (i = 0; i < N_CONTENDERS; i++)
		if (!strcmp(contenders[i].name, name))
			return &contenders[i];
	return NULL;
}

static void print_table(FILE *out)
{
	struct contender *empty = find("empty-uprobe");
	double empty_ratio = 0, empty_added = 0;
	size_t i;

	if (empty->rounds)
		paired(empty, &empty_ratio, &empty_added);
	fprintf(out,
		"| contender | per call vs baseline | added per call | per call | added vs bare uprobe "
		"| latency p50 | p99 | max | consumer CPU per 1M events | consumer CPU idle "
		"| delivered / produced (lost) | exit races: crashes | hangs |\n"
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (i = 0; i < N_CONTENDERS; i++) {
		struct contender *c = &contenders[i];
		char a[32], b[32], d[32], e[32], f[32], g[32], h[48];
		double ratio, added;

		if (c->skip[0] || !c->rounds) {
			fprintf(out, "| %s | skipped: %s | | | | | | | | | | | |\n", c->name,
				c->skip[0] ? c->skip : "no successful run");
			continue;
		}
		paired(c, &ratio, &added);
		fprintf(out, "| %s | %.2fx | %s | %s | ", c->name, ratio,
			c->kind == K_BASE ? "0 ns" : fmt_ns(added, a, sizeof(a)),
			fmt_ns(median(c->per_call, c->rounds), b, sizeof(b)));
		if (c->kind != K_BASE && c->kind != K_EMPTY && empty->rounds && empty_added > 0)
			fprintf(out, "%.2fx | ", added / empty_added);
		else
			fprintf(out, "%s | ", c->kind == K_EMPTY ? "1.00x" : "");
		if (c->hist->total)
			fprintf(out, "%s | %s | %s | ", fmt_ns((double)cp_bench_hist_percentile(c->hist, 0.5), d, sizeof(d)),
				fmt_ns((double)cp_bench_hist_percentile(c->hist, 0.99), e, sizeof(e)),
				fmt_ns((double)c->hist->max, f, sizeof(f)));
		else
			fprintf(out, "%s | | | ", c->kind == K_BASE || c->kind == K_EMPTY ? "no consumer" :
				c->kind == K_EXPORTER ? "n/a (counts)" : "none delivered");
		if (c->delivered)
			fprintf(out, "%.1f ms | ", (double)c->cpu_ns / 1e6 / ((double)c->delivered / 1e6));
		else
			fprintf(out, " | ");
		if (c->idle_done)
			fprintf(out, "%.2f ms/s | ", c->idle_cpu_ms_per_s);
		else
			fprintf(out, " | ");
		if (c->kind == K_BASE || c->kind == K_EMPTY)
			fprintf(out, " | ");
		else {
			snprintf(g, sizeof(g), "%llu / %llu", (unsigned long long)c->delivered,
				 (unsigned long long)c->produced);
			snprintf(h, sizeof(h), " (%llu lost%s%llu undelivered)", (unsigned long long)c->lost,
				 ", ", (unsigned long long)c->undelivered);
			fprintf(out, "%s%s | ", g, h);
		}
		if (c->exit_runs)
			fprintf(out, "%d of %d | %d of %d |\n", c->exit_crashes, c->exit_runs, c->exit_hangs,
				c->exit_runs);
		else
			fprintf(out, "%s | |\n", c->kind == K_EMPTY ? "n/a (no consumer)" :
				c->exit_note[0] ? c->exit_note : "not run");
	}
}

static void print_notes(FILE *out)
{
	struct contender *base = find("baseline"), *empty = find("empty-uprobe"),
			 *cuprobe = find("cuprobe"), *bpftrace = find("bpftrace"),
			 *poll = find("preload-poll1ms");
	double r, empty_added = 0, cuprobe_added = 0, bpftrace_added = 0;
	char a[32], b[32];
	size_t i;

	fprintf(out, "\nGoals (reported, never asserted):\n\n");
	if (empty->rounds)
		paired(empty, &r, &empty_added);
	if (cuprobe->rounds)
		paired(cuprobe, &r, &cuprobe_added);
	if (bpftrace->rounds)
		paired(bpftrace, &r, &bpftrace_added);
	if (empty->rounds && cuprobe->rounds && empty_added > 0)
		fprintf(out, "- cuprobe's added cost per launch is %.2fx a bare empty uprobe's (%s vs %s; goal <= 1.1x): %s\n",
			cuprobe_added / empty_added, fmt_ns(cuprobe_added, a, sizeof(a)),
			fmt_ns(empty_added, b, sizeof(b)), cuprobe_added <= 1.1 * empty_added ? "met" : "NOT met");
	else
		fprintf(out, "- cuprobe vs bare uprobe: not measured (%s)\n",
			cuprobe->skip[0] ? cuprobe->skip : empty->skip);
	if (cuprobe->hist->total)
		fprintf(out, "- cuprobe's delivery latency p99 %s (goal <= 1 ms): %s; its agent idles at %.3f ms CPU per s (goal ~0)\n",
			fmt_ns((double)cp_bench_hist_percentile(cuprobe->hist, 0.99), a, sizeof(a)),
			cp_bench_hist_percentile(cuprobe->hist, 0.99) <= 1000000 ? "met" : "NOT met",
			cuprobe->idle_cpu_ms_per_s);
	if (find("cuprobe-wake250us")->hist->total) {
		struct contender *fast = find("cuprobe-wake250us");
		double fast_added;

		paired(fast, &r, &fast_added);
		fprintf(out, "- with the wakeup bound set to 250 µs explicitly (the default since it was measured here): p99 %s, added per call %s\n",
			fmt_ns((double)cp_bench_hist_percentile(fast->hist, 0.99), a, sizeof(a)),
			fmt_ns(fast_added, b, sizeof(b)));
	}
	{
		struct contender *exporter = find("exporter");
		double exporter_added;

		if (exporter->rounds && empty->rounds && empty_added > 0) {
			char c_[32];

			paired(exporter, &r, &exporter_added);
			fprintf(out, "- the exporter (counting in maps, no --latency) adds %s per launch: %.2fx a bare empty uprobe's (%s)%s%s%s; "
				"its whole process idles at %.3f ms CPU per s (one read of the maps every %s s)\n",
				fmt_ns(exporter_added, a, sizeof(a)), exporter_added / empty_added,
				fmt_ns(empty_added, b, sizeof(b)),
				cuprobe->rounds ? ", against cuprobe's ring records " : "",
				cuprobe->rounds ? fmt_ns(cuprobe_added, c_, sizeof(c_)) : "",
				cuprobe->rounds ? "" : "", exporter->idle_cpu_ms_per_s, EXPORTER_INTERVAL);
		} else if (exporter->skip[0]) {
			fprintf(out, "- exporter: %s\n", exporter->skip);
		}
	}
	if (bpftrace->rounds && cuprobe->rounds)
		fprintf(out, "- bpftrace adds %s per event, %.2fx cuprobe's (goal: no cheaper than cuprobe): %s\n",
			fmt_ns(bpftrace_added, a, sizeof(a)), cuprobe_added > 0 ? bpftrace_added / cuprobe_added : 0,
			bpftrace_added >= cuprobe_added ? "met" : "NOT met");
	else
		fprintf(out, "- bpftrace: %s\n", bpftrace->skip[0] ? bpftrace->skip : "not measured");
	if (poll->hist->total)
		fprintf(out, "- the polled-flag design (preload-poll1ms): latency p50 %s, p99 %s; idle consumer %.3f ms CPU per s\n",
			fmt_ns((double)cp_bench_hist_percentile(poll->hist, 0.5), a, sizeof(a)),
			fmt_ns((double)cp_bench_hist_percentile(poll->hist, 0.99), b, sizeof(b)), poll->idle_cpu_ms_per_s);
	fprintf(out, "- exit races (%d runs each, target exits right after %ld calls):", opt.exit_runs,
		opt.exit_calls);
	for (i = 0; i < N_CONTENDERS; i++) {
		struct contender *c = &contenders[i];

		if (c->exit_runs)
			fprintf(out, " %s %d crashed, %d hung%s;", c->name, c->exit_crashes, c->exit_hangs,
				c->exit_failures ? " (+ other failures)" : "");
	}
	fprintf(out, "\n");
	fprintf(out, "\nNotes:\n\n");
	/* The file's name, not where it lies on this machine. */
	{
		char resolved[PATH_MAX];
		const char *name = realpath(opt.cuda_lib, resolved) ? resolved : opt.cuda_lib;

		name = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
		fprintf(out, "- workload `%s`, %ld calls per run, %d rounds (contenders interleaved, baseline first in each round); libcuda: `%s`%s\n",
			opt.workload, opt.calls, base->rounds, name,
			opt.sim ? " (the simulated driver, lib/cuda-sim/ of the build)" : " (the real driver)");
	}
	fprintf(out, "- ratios and added ns are medians over rounds of (contender / baseline of the same round); "
		"latency over every record of every round (log-linear histogram, <3.2%% error; max exact)\n");
	fprintf(out, "- consumer CPU: cuprobe's agent thread (in cp_compare), the interposers' consumer thread, "
		"all of bpftrace's threads, the whole exporter process; idle: cp_bench_load sleeping %ld ms "
		"with no calls (the exporter: %d ms, two of its intervals)\n", opt.idle_ms,
		opt.idle_ms < EXPORTER_IDLE_MS ? EXPORTER_IDLE_MS : (int)opt.idle_ms);
	fprintf(out, "- exporter: `cuprobe exporter --lib LIBCUDA --listen 127.0.0.1:PORT -i %s`, started before "
		"each measured run and stopped after it; delivered = the launches its /metrics counts "
		"for the run's pid (read as a scraper would, once the next interval has read the maps); "
		"its consumer CPU is the process's while the workload ran (it does no work per call: "
		"that is a read of the maps per interval, divided by the run's calls)\n",
		EXPORTER_INTERVAL);
	fprintf(out, "- bpftrace traces cuLaunchKernel only (printf of the launch record's fields, stack arguments through sarg0..2); "
		"the others record the setup calls too (allocs, copies, syncs)\n");
	fprintf(out, "- exit races use cp_bench_load --exit-race; cuprobe's through `cuprobe trace -o /dev/null -- ...` "
		"(a crash = a signal death of cuprobe or the target); undelivered = records of the run's calls that "
		"no consumer handled\n");
	for (i = 0; i < N_CONTENDERS; i++) {
		struct contender *c = &contenders[i];

		if (c->measured_crashes)
			fprintf(out, "- %s: %d of %d measured runs died by a signal while exiting, after their loop "
				"(their per-call time is kept)\n", c->name, c->measured_crashes,
				c->rounds + c->failed_runs);
		if (c->failed_runs)
			fprintf(out, "- %s: %d measured runs failed (non-zero exit or signal) and were left out\n",
				c->name, c->failed_runs);
		if (c->exit_failures)
			fprintf(out, "- %s: %d exit-race runs exited non-zero without a signal\n", c->name,
				c->exit_failures);
	}
}

static void write_data(void)
{
	char path[PATH_MAX + 64], dir[PATH_MAX + 32];
	FILE *file, *gp;
	size_t i;
	int r, plotted = 0;

	snprintf(dir, sizeof(dir), "%s/compare-%s-data", opt.out_dir, opt.tag);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/per_call.tsv", dir);
	file = fopen(path, "w");
	if (!file)
		die(path, errno);
	fprintf(file, "# contender\tround\tns_per_call\tbaseline_ns_per_call_same_round\n");
	for (i = 0; i < N_CONTENDERS; i++)
		for (r = 0; r < contenders[i].rounds; r++)
			fprintf(file, "%s\t%d\t%.1f\t%.1f\n", contenders[i].name, r, contenders[i].per_call[r],
				contenders[i].base_of_round[r]);
	fclose(file);

	snprintf(path, sizeof(path), "%s/added.tsv", dir);
	file = fopen(path, "w");
	if (!file)
		die(path, errno);
	fprintf(file, "# contender\tadded_ns_median\tadded_ns_min\tadded_ns_max\n");
	for (i = 1; i < N_CONTENDERS; i++) {
		struct contender *c = &contenders[i];
		double lo = 1e18, hi = -1e18, ratio, added;

		if (!c->rounds)
			continue;
		paired(c, &ratio, &added);
		for (r = 0; r < c->rounds; r++) {
			double d = c->per_call[r] - c->base_of_round[r];

			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
		fprintf(file, "%s\t%.1f\t%.1f\t%.1f\n", c->name, added, lo, hi);
	}
	fclose(file);

	for (i = 0; i < N_CONTENDERS; i++) {
		struct contender *c = &contenders[i];
		uint64_t seen = 0;
		unsigned int b;

		if (!c->hist->total)
			continue;
		snprintf(path, sizeof(path), "%s/latency-%s.tsv", dir, c->name);
		file = fopen(path, "w");
		if (!file)
			die(path, errno);
		fprintf(file, "# latency_us\tfraction_at_or_below\n");
		for (b = 0; b < CP_BENCH_HIST_BUCKETS; b++) {
			if (!c->hist->count[b])
				continue;
			seen += c->hist->count[b];
			fprintf(file, "%.3f\t%.6f\n", (double)cp_bench_hist_value(b) / 1e3,
				(double)seen / (double)c->hist->total);
		}
		fclose(file);
	}

	snprintf(path, sizeof(path), "%s/compare.gp", dir);
	gp = fopen(path, "w");
	if (!gp)
		die(path, errno);
	fprintf(gp, "# generated by cp_compare; run from %s: gnuplot compare-%s-data/compare.gp\n",
		opt.out_dir, opt.tag);
	fprintf(gp, "set terminal pngcairo size 1500,620 font ',10'\n");
	fprintf(gp, "set output 'compare-%s.png'\n", opt.tag);
	fprintf(gp, "set datafile separator '\\t'\n");
	fprintf(gp, "set multiplot layout 1,2 title 'cuprobe vs alternatives: workload %s, %ld calls x %d rounds%s'\n",
		opt.workload, opt.calls, opt.rounds, opt.sim ? " (simulated driver)" : "");
	fprintf(gp, "set title 'added time per traced call (median, min-max over rounds)'\n");
	fprintf(gp, "set ylabel 'ns per call over baseline'\nset style fill solid 0.6 border -1\n");
	fprintf(gp, "set boxwidth 0.6\nset grid ytics\nset xtics rotate by -30\nset yrange [0:*]\n");
	fprintf(gp, "plot 'compare-%s-data/added.tsv' using 0:2:xtic(1) with boxes lc rgb '#4a7ab5' notitle, "
		"'' using 0:2:3:4 with yerrorbars lc rgb 'black' pt 0 notitle, "
		"'' using 0:2:(sprintf('%%.0f', $2)) with labels offset 0,1 notitle\n", opt.tag);
	fprintf(gp, "unset xtics\nset xtics\nset title 'delivery latency, call -> consumer (CDF)'\n");
	fprintf(gp, "set logscale x\nset xlabel 'latency (µs)'\nset ylabel 'fraction of records'\n");
	fprintf(gp, "set yrange [0:1.02]\nset key bottom right\nunset style\n");
	fprintf(gp, "plot ");
	for (i = 0; i < N_CONTENDERS; i++) {
		if (!contenders[i].hist->total)
			continue;
		fprintf(gp, "%s'compare-%s-data/latency-%s.tsv' using 1:2 with steps lw 2 title '%s'",
			plotted ? ", " : "", opt.tag, contenders[i].name, contenders[i].name);
		plotted++;
	}
	if (!plotted)
		fprintf(gp, "0 notitle");
	fprintf(gp, "\nunset multiplot\n");
	fclose(gp);
}

/* ---- setup ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: cp_compare [--workload load|drv_launch|vec_add|gemm] [--rounds N] [--calls N]\n"
		"                  [--exit-runs N] [--exit-calls N] [--idle-ms MS] [--quick]\n"
		"                  [--out DIR] [--tag TAG] [--only NAME,NAME...]\n"
		"                  [--bin DIR] [--lib DIR] [--cuprobe PATH] [--bpftrace PATH]\n"
		"contenders: baseline empty-uprobe cuprobe cuprobe-wake250us exporter preload-poll1ms preload-busy\n"
		"            preload-eventfd bpftrace cupti\n");
}

static bool find_in_path(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096], *dir, *save = NULL;

	snprintf(dirs, sizeof(dirs), "%s:/usr/bin:/usr/sbin:/usr/local/bin", path ? path : "");
	for (dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", dir, name);
		if (file_exists(out, X_OK))
			return true;
	}
	out[0] = '\0';
	return false;
}

static void setup(int argc, char **argv)
{
	char self[PATH_MAX], *slash;
	bool quick = false;
	struct cp_lib_set *libs;
	int i, found;

	opt.workload = "load";
	opt.rounds = 5;
	opt.calls = 200000;
	opt.exit_runs = 50;
	opt.exit_calls = 20000;
	opt.idle_ms = 1000;
	opt.out_dir = ".";
	opt.tag = "local";
	if (readlink("/proc/self/exe", self, sizeof(self) - 1) < 0)
		die("readlink /proc/self/exe", errno);
	self[sizeof(self) - 1] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	snprintf(opt.bin_dir, sizeof(opt.bin_dir), "%s", self);
	format_into(opt.lib_dir, sizeof(opt.lib_dir), "%s/../lib", self);
	format_into(opt.cuprobe, sizeof(opt.cuprobe), "%s/cuprobe", self);
	find_in_path("bpftrace", opt.bpftrace, sizeof(opt.bpftrace));
	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(arg, "--quick")) {
			quick = true;
			continue;
		}
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!value) {
			usage(stderr);
			exit(2);
		}
		i++;
		if (!strcmp(arg, "--workload"))
			opt.workload = value;
		else if (!strcmp(arg, "--rounds"))
			opt.rounds = atoi(value);
		else if (!strcmp(arg, "--calls"))
			opt.calls = atol(value);
		else if (!strcmp(arg, "--exit-runs"))
			opt.exit_runs = atoi(value);
		else if (!strcmp(arg, "--exit-calls"))
			opt.exit_calls = atol(value);
		else if (!strcmp(arg, "--idle-ms"))
			opt.idle_ms = atol(value);
		else if (!strcmp(arg, "--out"))
			opt.out_dir = value;
		else if (!strcmp(arg, "--tag"))
			opt.tag = value;
		else if (!strcmp(arg, "--only"))
			opt.only = value;
		else if (!strcmp(arg, "--bin"))
			snprintf(opt.bin_dir, sizeof(opt.bin_dir), "%s", value);
		else if (!strcmp(arg, "--lib"))
			snprintf(opt.lib_dir, sizeof(opt.lib_dir), "%s", value);
		else if (!strcmp(arg, "--cuprobe"))
			snprintf(opt.cuprobe, sizeof(opt.cuprobe), "%s", value);
		else if (!strcmp(arg, "--bpftrace"))
			snprintf(opt.bpftrace, sizeof(opt.bpftrace), "%s", value);
		else {
			usage(stderr);
			exit(2);
		}
	}
	if (quick) {
		opt.rounds = opt.rounds < 2 ? opt.rounds : 2;
		opt.calls = opt.calls < 20000 ? opt.calls : 20000;
		opt.exit_runs = opt.exit_runs < 10 ? opt.exit_runs : 10;
		opt.exit_calls = opt.exit_calls < 10000 ? opt.exit_calls : 10000;
		opt.idle_ms = opt.idle_ms < 300 ? opt.idle_ms : 300;
	}
	if (opt.rounds < 1 || opt.rounds > MAX_ROUNDS || opt.calls < 1 || opt.exit_runs < 0 ||
	    opt.exit_calls < 1 || opt.idle_ms < 0) {
		fprintf(stderr, "cp_compare: rounds 1..%d, calls >= 1, exit-calls >= 1\n", MAX_ROUNDS);
		exit(2);
	}
	format_into(opt.load, sizeof(opt.load), "%s/cp_bench_load", opt.bin_dir);
	if (!strcmp(opt.workload, "load"))
		snprintf(opt.workload_exe, sizeof(opt.workload_exe), "%s", opt.load);
	else if (!strcmp(opt.workload, "drv_launch") || !strcmp(opt.workload, "vec_add"))
		format_into(opt.workload_exe, sizeof(opt.workload_exe), "%s/%s", opt.bin_dir, opt.workload);
	else if (!strcmp(opt.workload, "gemm"))
		format_into(opt.workload_exe, sizeof(opt.workload_exe), "%s/gemm_loop", opt.bin_dir);
	else {
		usage(stderr);
		exit(2);
	}
	if (!file_exists(opt.workload_exe, X_OK) || !file_exists(opt.load, X_OK)) {
		fprintf(stderr, "cp_compare: %s or %s is missing\n", opt.workload_exe, opt.load);
		exit(1);
	}
	if (geteuid()) {
		fprintf(stderr, "cp_compare: must run as root\n");
		exit(1);
	}
	mkdir(opt.out_dir, 0755);

	/* The libcuda.so.1 the workload will load; a runtime-API workload dlopen()s it. */
	libs = cp_lib_set__new();
	if (!libs)
		die("cp_lib_set__new", errno);
	found = cp_discover__for_exec(libs, "libcuda.so.1", opt.workload_exe, getenv("LD_LIBRARY_PATH"));
	if (found <= 0) {
		fprintf(stderr, "cp_compare: no libcuda.so.1 found for %s\n", opt.workload_exe);
		exit(1);
	}
	if (!realpath(cp_lib_set__path(libs, 0), opt.cuda_lib))
		snprintf(opt.cuda_lib, sizeof(opt.cuda_lib), "%s", cp_lib_set__path(libs, 0));
	cp_lib_set__free(libs);
	opt.sim = strstr(opt.cuda_lib, "cuda-sim") != NULL;

	for (i = 0; i < (int)N_CONTENDERS; i++) {
		struct contender *c = &contenders[i];

		c->enabled = true;
		c->hist = calloc(1, sizeof(*c->hist));
		if (!c->hist)
			die("calloc", ENOMEM);
		if (opt.only && c->kind != K_BASE) {
			char list[1024], *name, *save = NULL;
			bool listed = false;

			snprintf(list, sizeof(list), "%s", opt.only);
			for (name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
				listed |= !strcmp(name, c->name);
			if (!listed) {
				note_skip(c, "not asked for (--only)");
				continue;
			}
		}
		if (c->so_name) {
			format_into(c->so_path, sizeof(c->so_path), "%s/%s", opt.lib_dir, c->so_name);
			if (!file_exists(c->so_path, R_OK)) {
				char why[200];

				snprintf(why, sizeof(why), "%s not built (no CUPTI headers/library?)", c->so_name);
				note_skip(c, why);
			}
		}
		if (c->kind == K_BPFTRACE && !opt.bpftrace[0])
			note_skip(c, "no bpftrace on this machine");
		if (c->kind == K_CUPTI && opt.sim)
			note_skip(c, "needs the real driver: the simulated one has no CUPTI");
	}
}

int main(int argc, char **argv)
{
	char path[PATH_MAX + 64];
	FILE *table;
	size_t i;
	int round;

	setup(argc, argv);
	libbpf_set_print(NULL);
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "cp_compare: workload %s, libcuda %s, %d rounds of %ld calls\n", opt.workload,
		opt.cuda_lib, opt.rounds, opt.calls);

	for (round = 0; round < opt.rounds; round++) {
		struct contender *base = &contenders[0];
		double base_now;

		run_measured(base, round, 0);
		base_now = base->rounds ? base->per_call[base->rounds - 1] : 0;
		for (i = 1; i < N_CONTENDERS; i++)
			if (contenders[i].enabled)
				run_measured(&contenders[i], round, base_now);
		fprintf(stderr, "cp_compare: round %d of %d done\n", round + 1, opt.rounds);
	}
	for (i = 0; i < N_CONTENDERS; i++)
		run_idle(&contenders[i]);
	fprintf(stderr, "cp_compare: idle runs done\n");
	if (opt.exit_runs) {
		for (i = 0; i < N_CONTENDERS; i++)
			run_exit_races(&contenders[i]);
		fprintf(stderr, "cp_compare: exit races done\n");
	}

	print_table(stdout);
	print_notes(stdout);
	snprintf(path, sizeof(path), "%s/compare-%s-table.md", opt.out_dir, opt.tag);
	table = fopen(path, "w");
	if (!table)
		die(path, errno);
	print_table(table);
	print_notes(table);
	fclose(table);
	write_data();
	return 0;
}
