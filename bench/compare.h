/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cp_compare in parts: the driver (compare.c: options, rounds, the table,
 * the files) and one file per contender (contender_*.c). They meet here: the
 * contender interface, and the helpers both sides use (workloads started
 * held, CPU clocks, cp_bench_load's command line).
 *
 * A run, as the driver makes it: the workload is forked held (environment
 * from workload_env), start() watches its pid, consumer_cpu_ns() is read, the
 * workload is released and waited for; then after_measured() drains, stops
 * and counts (contender_count()), and in an idle run stop() or after_idle().
 * Exit races: before_exit_races(), then each run (cp_bench_load --exit-race,
 * or exit_argv()'s command) and after_exit_run(), then after_exit_races(). A
 * NULL hook does nothing; a contender keeps what one run needs in c->run
 * between start and stop (or its after_* hook).
 */
#ifndef CP_COMPARE_H
#define CP_COMPARE_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cp_bench_stats.h"

#define MAX_ROUNDS 64
#define OUT_MAX    (64 * 1024)
/* The exporter contender: its default interval, and its idle run (two intervals). */
#define EXPORTER_INTERVAL "5"
#define EXPORTER_IDLE_MS 10000
/* What loads a CUPTI subscriber: read by the real driver only (the simulated one has no CUPTI). */
#define CUPTI_INJECTION_VARIABLE "CUDA_INJECTION64_PATH"

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

/* The workload's environment: NAME=VALUE strings (NULL-terminated), in room of its own. */
struct workload_env {
	char *vars[4];
	char room[2][PATH_MAX + 48];
};

/* Forks a child that waits for child_release() before exec. env: NAME=VALUE strings. */
void child_spawn(struct child *child, const char *const argv[], char *const env[], bool keep_stderr);
void child_release(struct child *child);
/* Reads its output until it exits; a child alive after timeout_ms is killed and marked hung. */
void child_wait(struct child *child, long timeout_ms);
/* Kills a child never released. */
void child_abort(struct child *child);

/*
 * Starts argv now with one of its streams (STDOUT_FILENO or STDERR_FILENO)
 * into a pipe, whose reading end goes to *read_fd, the others on /dev/null.
 * Its pid, or -errno.
 */
pid_t process_start(const char *const argv[], int piped, int *read_fd);
/* Signals pid, then SIGKILLs it after timeout_ms; its wait status (0 where there was none). */
int process_stop(pid_t pid, int sig, long timeout_ms);

/* cp_bench_load's argv (for the idle and exit-race runs). */
void load_argv(const struct options *opt, const char **argv, long calls, long idle_ms, bool exit_race);

/* ---- contenders ----------------------------------------------------------------- */

struct contender;

struct contender_ops {
	/* Nothing is delivered (the baseline, the bare uprobe): no latency, no counts. */
	bool no_consumer;
	/* What the latency column says where it keeps none ("none delivered" otherwise). */
	const char *latency_note;
	/* Why it has no exit races, said in their column (they run otherwise). */
	const char *no_exit_races;
	/* Its idle runs last at least this long. */
	long min_idle_ms;

	/* At setup: note_skip() when it cannot run on this machine. */
	void (*prepare)(struct contender *c, const struct options *opt);
	/* Before each start of the workload: its environment. */
	void (*workload_env)(struct contender *c, const struct options *opt, struct workload_env *env);
	/* Measured and idle runs: watches the held workload pid, latencies into hist. 0 or -errno. */
	int (*start)(struct contender *c, const struct options *opt, pid_t pid, struct cp_bench_hist *hist);
	/* The CPU time its consumer has used so far (ns), where it is not the workload's own. */
	uint64_t (*consumer_cpu_ns)(struct contender *c);
	/* Stops what start started, counting nothing (idle runs, with consumer_cpu_ns). */
	void (*stop)(struct contender *c);
	/* After a measured run: drains, stops, adds to c's counts. */
	void (*after_measured)(struct contender *c, const struct options *opt, const struct child *child,
			       uint64_t cpu_before);
	/* After an idle run, where the consumer's CPU comes from the workload: sets c->idle_*.
	 * Idle runs are made for the contenders that have this or consumer_cpu_ns. */
	void (*after_idle)(struct contender *c, const struct options *opt, const struct child *child);
	/* Exit races: false (with c->exit_note) to run none. */
	bool (*before_exit_races)(struct contender *c, const struct options *opt);
	/* A run's command when cp_bench_load is started through the contender's own command line. */
	void (*exit_argv)(struct contender *c, const struct options *opt, const char **argv);
	void (*after_exit_run)(struct contender *c, const struct options *opt, int run, const struct child *child);
	void (*after_exit_races)(struct contender *c, const struct options *opt);
};

struct contender {
	const char *name;
	const struct contender_ops *ops;
	const char *so_name;   /* preload/cupti: file in the lib dir */
	const char *so_variable; /* ... and the variable that loads it (LD_PRELOAD, CUPTI_INJECTION_VARIABLE) */
	uint64_t wakeup_ns;    /* cuprobe: the tracer's wakeup latency bound; 0 = its default */
	char so_path[PATH_MAX];
	char skip[200];        /* why it did not run; "" when it did */
	bool enabled;
	void *run;             /* the contender's own, during a run */
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

extern const struct contender_ops contender_uprobe_ops;     /* contender_uprobe.c */
extern const struct contender_ops contender_cuprobe_ops;    /* contender_cuprobe.c */
extern const struct contender_ops contender_exporter_ops;   /* contender_exporter.c */
extern const struct contender_ops contender_interposer_ops; /* contender_interposers.c */
extern const struct contender_ops contender_bpftrace_ops;   /* contender_bpftrace.c */

/* Marks it not run, keeping the first reason. */
void note_skip(struct contender *c, const char *why);
/* Adds a measured run's records (undelivered: produced - lost - delivered) and consumer CPU. */
void contender_count(struct contender *c, uint64_t produced, uint64_t delivered, uint64_t lost,
		     uint64_t cpu_ns);
/* Exit races: what fell short of the records expected (delivered < expected) is undelivered. */
void contender_exit_shortfall(struct contender *c, uint64_t expected, uint64_t delivered);

/* ---- small helpers ---------------------------------------------------------- */

void die(const char *what, int err) __attribute__((noreturn));

/* snprintf that refuses to cut: a path or message too long for its buffer ends the run. */
#define format_into(buf, len, ...)                                                         \
	do {                                                                               \
		int format_n_ = snprintf((buf), (len), __VA_ARGS__);                        \
		if (format_n_ < 0 || (size_t)format_n_ >= (size_t)(len))                    \
			die("text too long for its buffer", ENAMETOOLONG);                  \
	} while (0)

void sleep_ms(long ms);
/* CPU time of every thread of pid except skip_tid, from schedstat (ns). */
uint64_t threads_cpu_ns(pid_t pid, pid_t skip_tid);
bool file_exists(const char *path, int mode);
/* CPU ms per second of wall time. */
double cpu_ms_per_s(uint64_t cpu_ns, uint64_t wall_ns);

#endif
