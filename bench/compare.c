// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cp_compare: what the kernel-assisted design costs per call and what it
 * buys, against the alternatives, measured in one run (never asserted).
 *
 * Contenders, on the same driver calls and the same records:
 *   baseline         untraced
 *   empty-uprobe     a uprobe running an empty BPF program on cuLaunchKernel
 *                    (bench/empty_uprobe.bpf.c): the floor
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
 * (drawing DIR/compare-TAG.png). bench/compare.sh runs it all.
 *
 * This file is the driver: options, rounds, the table, the files. Each
 * contender is a file of its own behind the interface of compare.h:
 * contender_uprobe.c (empty-uprobe), contender_cuprobe.c (cuprobe,
 * cuprobe-wake250us), contender_exporter.c, contender_interposers.c
 * (preload-*, cupti), contender_bpftrace.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "compare.h"
#include "cuprobe_internal.h"

/* The reference: the workload untraced, run first in every round. */
static const struct contender_ops baseline_ops = { .no_consumer = true };

static struct contender contenders[] = {
	{ .name = "baseline", .ops = &baseline_ops },
	{ .name = "empty-uprobe", .ops = &contender_uprobe_ops },
	{ .name = "cuprobe", .ops = &contender_cuprobe_ops },
	{ .name = "cuprobe-wake250us", .ops = &contender_cuprobe_ops, .wakeup_ns = 250000 },
	{ .name = "exporter", .ops = &contender_exporter_ops },
	{ .name = "preload-poll1ms", .ops = &contender_interposer_ops, .so_name = "libcp_preload_poll1ms.so",
	  .so_variable = "LD_PRELOAD" },
	{ .name = "preload-busy", .ops = &contender_interposer_ops, .so_name = "libcp_preload_busy.so",
	  .so_variable = "LD_PRELOAD" },
	{ .name = "preload-eventfd", .ops = &contender_interposer_ops, .so_name = "libcp_preload_eventfd.so",
	  .so_variable = "LD_PRELOAD" },
	{ .name = "bpftrace", .ops = &contender_bpftrace_ops },
	{ .name = "cupti", .ops = &contender_interposer_ops, .so_name = "libcp_cupti_subscriber.so",
	  .so_variable = CUPTI_INJECTION_VARIABLE },
};
#define N_CONTENDERS (sizeof(contenders) / sizeof(contenders[0]))
static struct contender *const baseline = &contenders[0];

static struct options opt;

/* ---- small helpers (compare.h) ------------------------------------------------ */

void die(const char *what, int err)
{
	fprintf(stderr, "cp_compare: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

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

void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

uint64_t threads_cpu_ns(pid_t pid, pid_t skip_tid)
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

bool file_exists(const char *path, int mode)
{
	return access(path, mode) == 0;
}

double cpu_ms_per_s(uint64_t cpu_ns, uint64_t wall_ns)
{
	return (double)cpu_ns / 1e6 / ((double)wall_ns / 1e9);
}

void note_skip(struct contender *c, const char *why)
{
	if (!c->skip[0])
		snprintf(c->skip, sizeof(c->skip), "%s", why);
	c->enabled = false;
}

void contender_count(struct contender *c, uint64_t produced, uint64_t delivered, uint64_t lost,
		     uint64_t cpu_ns)
{
	c->produced += produced;
	c->delivered += delivered;
	c->lost += lost;
	if (produced > lost + delivered)
		c->undelivered += produced - lost - delivered;
	c->cpu_ns += cpu_ns;
}

void contender_exit_shortfall(struct contender *c, uint64_t expected, uint64_t delivered)
{
	if (delivered < expected)
		c->exit_undelivered += expected - delivered;
}

/* ---- children (compare.h) ---------------------------------------------------- */

void child_spawn(struct child *child, const char *const argv[], char *const env[], bool keep_stderr)
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
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(gate[0]);
	close(out[1]);
	child->gate_fd = gate[1];
	child->out_fd = out[0];
}

void child_release(struct child *child)
{
	child->released_ns = cp_bench_now_ns();
	if (write(child->gate_fd, "g", 1) != 1)
		die("release child", errno);
	close(child->gate_fd);
	child->gate_fd = -1;
}

void child_wait(struct child *child, long timeout_ms)
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

void child_abort(struct child *child)
{
	kill(child->pid, SIGKILL);
	waitpid(child->pid, NULL, 0);
	close(child->gate_fd);
	close(child->out_fd);
}

pid_t process_start(const char *const argv[], int piped, int *read_fd)
{
	pid_t pid;
	int pipe_fds[2];

	if (pipe2(pipe_fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null_fd = open("/dev/null", O_RDWR);

		dup2(null_fd, STDIN_FILENO);
		dup2(null_fd, piped == STDOUT_FILENO ? STDERR_FILENO : STDOUT_FILENO);
		dup2(pipe_fds[1], piped);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pipe_fds[1]);
	*read_fd = pipe_fds[0];
	return pid;
}

int process_stop(pid_t pid, int sig, long timeout_ms)
{
	uint64_t deadline = cp_bench_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int status = 0;

	kill(pid, sig);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (cp_bench_now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		sleep_ms(10);
	}
	return status;
}

static bool child_ok(const struct child *child)
{
	return !child->hung && WIFEXITED(child->status) && WEXITSTATUS(child->status) == 0;
}

/* ---- the workload ------------------------------------------------------------ */

static char arg_buf[8][32];

/* The measured workload's argv for `calls` calls. */
static void workload_argv(const char **argv, long calls)
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

void load_argv(const struct options *options, const char **argv, long calls, long idle_ms, bool exit_race)
{
	int n = 0;

	snprintf(arg_buf[1], sizeof(arg_buf[1]), "%ld", calls);
	snprintf(arg_buf[2], sizeof(arg_buf[2]), "%ld", idle_ms);
	argv[n++] = options->load;
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

/* ---- one measured run of one contender ------------------------------------------ */

static void run_measured(struct contender *c, double base)
{
	const struct contender_ops *ops = c->ops;
	struct workload_env env = { .vars = { NULL } };
	const char *argv[16];
	struct child child;
	uint64_t cpu_before = 0;
	int err = 0;

	workload_argv(argv, opt.calls);
	if (ops->workload_env)
		ops->workload_env(c, &opt, &env);
	child_spawn(&child, argv, env.vars, false);
	if (ops->start)
		err = ops->start(c, &opt, child.pid, c->hist);
	if (!err && ops->consumer_cpu_ns)
		cpu_before = ops->consumer_cpu_ns(c);
	if (err) {
		char why[200];

		snprintf(why, sizeof(why), "setup failed: %s", strerror(-err));
		child_abort(&child);
		note_skip(c, why);
		return;
	}
	child_release(&child);
	child_wait(&child, 300000);
	if (ops->after_measured)
		ops->after_measured(c, &opt, &child, cpu_before);
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
}

/* ---- idle consumer CPU ------------------------------------------------------------ */

static void run_idle(struct contender *c)
{
	const struct contender_ops *ops = c->ops;
	struct workload_env env = { .vars = { NULL } };
	struct cp_bench_hist scratch;
	const char *argv[16];
	struct child child;
	uint64_t before = 0, after;

	if ((!ops->consumer_cpu_ns && !ops->after_idle) || !c->enabled)
		return;
	memset(&scratch, 0, sizeof(scratch));
	load_argv(&opt, argv, 0, opt.idle_ms < ops->min_idle_ms ? ops->min_idle_ms : opt.idle_ms, false);
	if (ops->workload_env)
		ops->workload_env(c, &opt, &env);
	child_spawn(&child, argv, env.vars, false);
	if (ops->start && ops->start(c, &opt, child.pid, &scratch)) {
		child_abort(&child);
		return;
	}
	if (ops->consumer_cpu_ns)
		before = ops->consumer_cpu_ns(c);
	child_release(&child);
	child_wait(&child, 60000);
	if (ops->after_idle) {
		ops->after_idle(c, &opt, &child);
		return;
	}
	after = ops->consumer_cpu_ns(c);
	ops->stop(c);
	c->idle_cpu_ms_per_s = cpu_ms_per_s(after - before, child.wall_ns);
	c->idle_done = true;
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
	const struct contender_ops *ops = c->ops;
	/* Through the contender's command line: a crash is its own or the target's. */
	bool via_cli = ops->exit_argv != NULL;
	const char *argv[24];
	struct child child;
	int i;

	if (!c->enabled || ops->no_exit_races)
		return;
	if (ops->before_exit_races && !ops->before_exit_races(c, &opt))
		return;
	for (i = 0; i < opt.exit_runs; i++) {
		if (via_cli) {
			ops->exit_argv(c, &opt, argv);
			child_spawn(&child, argv, NULL, true);
		} else {
			struct workload_env env = { .vars = { NULL } };

			load_argv(&opt, argv, opt.exit_calls, 0, true);
			if (ops->workload_env)
				ops->workload_env(c, &opt, &env);
			child_spawn(&child, argv, env.vars, false);
		}
		child_release(&child);
		child_wait(&child, via_cli ? 60000 : 20000);
		count_exit(c, &child, via_cli);
		c->exit_produced += (uint64_t)opt.exit_calls;
		if (ops->after_exit_run)
			ops->after_exit_run(c, &opt, i, &child);
	}
	if (ops->after_exit_races)
		ops->after_exit_races(c, &opt);
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
			c == baseline ? "0 ns" : fmt_ns(added, a, sizeof(a)),
			fmt_ns(median(c->per_call, c->rounds), b, sizeof(b)));
		if (c != baseline && c != empty && empty->rounds && empty_added > 0)
			fprintf(out, "%.2fx | ", added / empty_added);
		else
			fprintf(out, "%s | ", c == empty ? "1.00x" : "");
		if (c->hist->total)
			fprintf(out, "%s | %s | %s | ", fmt_ns((double)cp_bench_hist_percentile(c->hist, 0.5), d, sizeof(d)),
				fmt_ns((double)cp_bench_hist_percentile(c->hist, 0.99), e, sizeof(e)),
				fmt_ns((double)c->hist->max, f, sizeof(f)));
		else
			fprintf(out, "%s | | | ", c->ops->no_consumer ? "no consumer" :
				c->ops->latency_note ? c->ops->latency_note : "none delivered");
		if (c->delivered)
			fprintf(out, "%.1f ms | ", (double)c->cpu_ns / 1e6 / ((double)c->delivered / 1e6));
		else
			fprintf(out, " | ");
		if (c->idle_done)
			fprintf(out, "%.2f ms/s | ", c->idle_cpu_ms_per_s);
		else
			fprintf(out, " | ");
		if (c->ops->no_consumer)
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
			fprintf(out, "%s | |\n", c->ops->no_exit_races ? c->ops->no_exit_races :
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
	fprintf(gp, "# generated by cp_compare; run from the folder that holds compare-%s-data/: "
		"gnuplot compare-%s-data/compare.gp\n", opt.tag, opt.tag);
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
		if (opt.only && c != baseline) {
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
		if (c->ops->prepare)
			c->ops->prepare(c, &opt);
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
		struct contender *base = baseline;
		double base_now;

		run_measured(base, 0);
		base_now = base->rounds ? base->per_call[base->rounds - 1] : 0;
		for (i = 1; i < N_CONTENDERS; i++)
			if (contenders[i].enabled)
				run_measured(&contenders[i], base_now);
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
