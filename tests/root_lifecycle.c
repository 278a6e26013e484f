// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU agent's lifecycle contract (userspace/cuprobe.h), under stress:
 * start/stop cycles with records in flight, stops from a signal handler and
 * from a callback, exact accounting with a ring that overflows, fork, a
 * program tracing itself while exiting, and cuprobe killed while tracing.
 *
 * The producers are this test process's own threads calling the simulated
 * driver (linked in, found through RUNPATH), so every record is real: a
 * kernel uprobe hit written into the BPF ring buffer.
 * Needs root; run with --jobs 1 (the SIGKILL test counts BPF objects).
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <criterion/criterion.h>

#include "cuprobe.h"
#include "helpers.h"
#include "vec_add_ptx.h"

#define ELEMENTS 32
#define MAX_PRODUCERS 8

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static CUfunction function;
static CUdeviceptr buffers[3];
static CUcontext context;

static void setup_cuda(void)
{
	CUmodule module;
	CUdevice device;
	int i;

	cr_assert_eq(cuInit(0), CUDA_SUCCESS);
	cr_assert_eq(cuDeviceGet(&device, 0), CUDA_SUCCESS);
	cr_assert_eq(cuDevicePrimaryCtxRetain(&context, device), CUDA_SUCCESS);
	cr_assert_eq(cuCtxSetCurrent(context), CUDA_SUCCESS);
	cr_assert_eq(cuModuleLoadData(&module, vec_add_ptx), CUDA_SUCCESS);
	cr_assert_eq(cuModuleGetFunction(&function, module, "vec_add"), CUDA_SUCCESS);
	for (i = 0; i < 3; i++)
		cr_assert_eq(cuMemAlloc(&buffers[i], ELEMENTS * sizeof(float)), CUDA_SUCCESS);
}

static void launch_once(void)
{
	int n = ELEMENTS;
	void *params[] = { &buffers[0], &buffers[1], &buffers[2], &n };

	cuLaunchKernel(function, 1, 1, 1, ELEMENTS, 1, 1, 0, NULL, params, NULL);
}

/* ---- producers ---------------------------------------------------------------- */

struct producers {
	pthread_t threads[MAX_PRODUCERS];
	int count;
	long per_thread; /* 0: until stopped */
	atomic_bool stop;
	atomic_long launched;
};

static void *produce(void *arg)
{
	struct producers *p = arg;
	long i;

	cuCtxSetCurrent(context);
	for (i = 0; !atomic_load(&p->stop) && (!p->per_thread || i < p->per_thread); i++) {
		launch_once();
		atomic_fetch_add(&p->launched, 1);
	}
	return NULL;
}

static void start_producers(struct producers *p, int count, long per_thread)
{
	int i;

	p->count = count;
	p->per_thread = per_thread;
	atomic_store(&p->stop, false);
	atomic_store(&p->launched, 0);
	for (i = 0; i < count; i++)
		cr_assert_eq(pthread_create(&p->threads[i], NULL, produce, p), 0);
}

/* Waits for the producers; those running until stopped are told to stop first. */
static void join_producers(struct producers *p)
{
	int i;

	if (!p->per_thread)
		atomic_store(&p->stop, true);
	for (i = 0; i < p->count; i++)
		pthread_join(p->threads[i], NULL);
}

/* ---- tracer and counting ------------------------------------------------------ */

static struct cp_tracer *open_self_tracer(size_t ring_bytes)
{
	struct cp_tracer_opts opts = { .sz = sizeof(opts), .ring_bytes = ring_bytes };
	struct cp_tracer *tracer;

	require_root();
	libbpf_set_print(NULL); /* the simulated driver lacks many symbols */
	tracer = cp_tracer__open(&opts);
	cr_assert_not_null(tracer, "cp_tracer__open: %s", strerror(errno));
	cr_assert_eq(cp_tracer__attach_driver(tracer, CUDA_SIM_LIB, NULL), 0);
	cr_assert_eq(cp_tracer__add_pid(tracer, getpid()), 0);
	return tracer;
}

struct tally {
	atomic_ulong records;
	atomic_ulong launches;
	unsigned long stop_after;  /* the callback asks to stop at this record; 0 = never */
	unsigned int slow_us;      /* per-record delay: a consumer slower than the producers */
};

static int tally_event(void *ctx, const union cp_event *event)
{
	struct tally *t = ctx;
	unsigned long n = atomic_fetch_add(&t->records, 1) + 1;

	if (event->hdr.type == CP_EV_LAUNCH)
		atomic_fetch_add(&t->launches, 1);
	if (t->slow_us)
		usleep(t->slow_us);
	if (t->stop_after && n >= t->stop_after)
		return -ECANCELED;
	return 0;
}

static struct cp_agent *new_agent(struct cp_tracer *tracer, struct tally *t)
{
	struct cp_agent_opts opts = { .sz = sizeof(opts), .on_event = tally_event, .ctx = t };
	struct cp_agent *agent = cp_agent__new(cp_tracer__ring_fd(tracer), &opts);

	cr_assert_not_null(agent, "cp_agent__new: %s", strerror(errno));
	return agent;
}

/* Delivers whatever is still in the ring: an agent asked to stop before it starts. */
static uint64_t drain_rest(struct cp_tracer *tracer, struct tally *t)
{
	struct cp_agent *agent = new_agent(tracer, t);
	struct cp_agent_stats stats;

	t->stop_after = 0;
	t->slow_us = 0;
	cp_agent__request_stop(agent);
	cr_assert_eq(cp_agent__start(agent), 0);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cp_agent__stats(agent, &stats);
	cr_assert_eq(stats.malformed, 0);
	cp_agent__free(agent);
	return stats.delivered;
}

/* The BPF side's count of records produced equals delivered + lost, exactly. */
static void assert_accounting(struct cp_tracer *tracer, uint64_t delivered)
{
	struct cp_counters counters;

	cr_assert_eq(cp_tracer__read_counters(tracer, &counters), 0);
	cr_assert_eq(counters.records_attempted, delivered + counters.records_lost,
		     "produced %llu != delivered %llu + lost %llu",
		     (unsigned long long)counters.records_attempted, (unsigned long long)delivered,
		     (unsigned long long)counters.records_lost);
}

TestSuite(lifecycle, .init = setup_cuda, .timeout = 120);

Test(lifecycle, thousand_start_stop_cycles_with_records_in_flight)
{
	struct cp_tracer *tracer = open_self_tracer(1u << 20);
	struct producers producers = { 0 };
	struct tally t = { 0 };
	uint64_t delivered = 0;
	int cycle;

	start_producers(&producers, 4, 0);
	for (cycle = 0; cycle < 1000; cycle++) {
		struct cp_agent *agent = new_agent(tracer, &t);
		struct cp_agent_stats stats;

		cr_assert_eq(cp_agent__start(agent), 0);
		if (cycle % 3)
			usleep(cycle % 200);
		cr_assert_eq(cp_agent__stop(agent), 0);
		cr_assert_eq(cp_agent__stop(agent), 0, "a second stop is a no-op");
		cp_agent__stats(agent, &stats);
		cr_assert_eq(stats.thread_error, 0);
		cr_assert_eq(stats.callback_error, 0);
		delivered += stats.delivered;
		cp_agent__free(agent);
	}
	join_producers(&producers);
	delivered += drain_rest(tracer, &t);
	cr_assert_gt(atomic_load(&producers.launched), 1000, "the producers barely ran");
	cr_assert_eq(atomic_load(&t.records), delivered, "a record was delivered twice or not counted");
	assert_accounting(tracer, delivered);
	cp_tracer__free(tracer);
}

static struct cp_agent *signal_target;

static void stop_on_signal(int signo)
{
	cp_agent__request_stop(signal_target); /* async-signal-safe by contract */
}

Test(lifecycle, stop_requested_from_a_signal_handler)
{
	struct sigaction action = { .sa_handler = stop_on_signal };
	struct cp_tracer *tracer = open_self_tracer(1u << 20);
	struct producers producers = { 0 };
	struct cp_agent_stats stats;
	struct tally t = { 0 };
	uint64_t delivered;

	signal_target = new_agent(tracer, &t);
	sigemptyset(&action.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &action, NULL), 0);
	start_producers(&producers, 2, 0);
	cr_assert_eq(cp_agent__start(signal_target), 0);
	while (atomic_load(&t.records) < 2000)
		usleep(1000);
	cr_assert_eq(kill(getpid(), SIGUSR1), 0);
	cr_assert_eq(cp_agent__stop(signal_target), 0);
	cp_agent__stats(signal_target, &stats);
	cr_assert_eq(stats.thread_error, 0);
	delivered = stats.delivered;
	cp_agent__free(signal_target);
	signal_target = NULL;
	join_producers(&producers);
	delivered += drain_rest(tracer, &t);
	assert_accounting(tracer, delivered);
	cp_tracer__free(tracer);
}

Test(lifecycle, stop_requested_by_a_callback)
{
	struct cp_tracer *tracer = open_self_tracer(1u << 20);
	struct producers producers = { 0 };
	struct cp_agent_stats stats;
	struct tally t = { .stop_after = 500 };
	struct cp_agent *agent = new_agent(tracer, &t);
	uint64_t delivered;

	start_producers(&producers, 2, 0);
	cr_assert_eq(cp_agent__start(agent), 0);
	/* The thread ends on its own once the callback says so. */
	while (atomic_load(&t.records) < 500)
		usleep(1000);
	usleep(20000);
	cp_agent__stats(agent, &stats);
	cr_assert_eq(stats.delivered, 500, "records were handed out after the callback stopped");
	cr_assert_eq(stats.callback_error, -ECANCELED);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cp_agent__stats(agent, &stats);
	cr_assert_eq(stats.delivered, 500);
	delivered = stats.delivered;
	cp_agent__free(agent);
	join_producers(&producers);
	delivered += drain_rest(tracer, &t);
	assert_accounting(tracer, delivered);
	cp_tracer__free(tracer);
}

Test(lifecycle, exact_accounting_when_a_tiny_ring_overflows)
{
	struct cp_tracer *tracer = open_self_tracer((size_t)sysconf(_SC_PAGESIZE));
	struct producers producers = { 0 };
	struct cp_counters counters;
	struct cp_agent_stats stats;
	struct tally t = { .slow_us = 20 };
	struct cp_agent *agent = new_agent(tracer, &t);
	uint64_t delivered;

	cr_assert_eq(cp_agent__start(agent), 0);
	start_producers(&producers, 4, 5000);
	join_producers(&producers);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cp_agent__stats(agent, &stats);
	delivered = stats.delivered;
	cp_agent__free(agent);
	delivered += drain_rest(tracer, &t);
	cr_assert_eq(cp_tracer__read_counters(tracer, &counters), 0);
	cr_assert_gt(counters.records_lost, 0,
		     "a one-page ring with a slow consumer lost nothing (attempted %llu, delivered %llu, launched %ld)",
		     (unsigned long long)counters.records_attempted, (unsigned long long)delivered,
		     atomic_load(&producers.launched));
	cr_assert_eq(atomic_load(&producers.launched), 20000);
	/* Each launch is one record, kept or counted lost; the rest are init/name/alloc records. */
	cr_assert_geq(atomic_load(&t.launches) + counters.records_lost, 20000);
	assert_accounting(tracer, delivered);
	cp_tracer__free(tracer);
}

#ifndef UNDER_TSAN
/* TSan does not support new threads in a child forked from a threaded process. */
Test(lifecycle, forked_child_holds_no_agent_and_can_start_its_own)
{
	struct cp_tracer *tracer = open_self_tracer(1u << 20);
	struct tally t = { 0 };
	struct cp_agent *agent = new_agent(tracer, &t);
	int status;
	pid_t child;

	cr_assert_eq(cp_agent__start(agent), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct tally mine = { 0 };
		struct cp_agent_opts opts = { .sz = sizeof(opts), .on_event = tally_event, .ctx = &mine };
		struct cp_agent *own;

		/* The parent's agent thread does not exist here: freeing must not join it. */
		cp_agent__free(agent);
		own = cp_agent__new(cp_tracer__ring_fd(tracer), &opts);
		if (!own || cp_agent__start(own))
			_exit(2);
		launch_once();
		if (cp_agent__stop(own))
			_exit(3);
		cp_agent__free(own);
		_exit(0);
	}
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	cr_assert_eq(cp_agent__stop(agent), 0);
	cp_agent__free(agent);
	cp_tracer__free(tracer);
}
#endif

/* ---- a program tracing itself, exiting mid-burst ------------------------------ */

static void run_self_trace(const char *program)
{
	char *out_path, *dir = make_tmpdir(), *text;
	int run, status;

	out_path = path_join(dir, "out");
	for (run = 0; run < 10; run++) {
		char *argv[] = { (char *)program, "4", "1000", NULL };
		struct run_opts opts = { .stdout_path = out_path };
		char *line;

		status = run_program(argv, &opts, NULL);
		text = read_text(out_path);
		cr_assert_eq(status, 0, "%s run %d: exit status %d: %s", program, run, status,
			     text ? text : "");
		line = find_line(text, "self_trace_exit:", 0);
		cr_assert_not_null(line, "%s printed no stats", program);
		cr_assert_geq(line_value(line, "launches_seen"), 1000,
			      "fewer launches seen than made before exit: %s", line);
		cr_assert_eq(line_value(line, "lost"), 0);
		free(line);
		free(text);
	}
	free(out_path);
	remove_tree(dir);
	free(dir);
}

Test(embedding, stop_from_atexit_while_threads_launch)
{
	require_root();
	run_self_trace(SELF_TRACE_ATEXIT);
}

Test(embedding, stop_from_destructor_while_threads_launch)
{
	require_root();
	run_self_trace(SELF_TRACE_DESTRUCTOR);
}

/* ---- the CLI: a target that dies, and cuprobe killed -------------------------- */

static pid_t child_of(pid_t parent)
{
	char path[64], line[512];
	int tries;

	for (tries = 0; tries < 500; tries++) {
		FILE *children;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", parent, parent);
		children = fopen(path, "r");
		if (children) {
			pid_t pid = 0;

			if (fgets(line, sizeof(line), children))
				pid = atoi(line);
			fclose(children);
			if (pid > 0)
				return pid;
		}
		usleep(10000);
	}
	return -1;
}

Test(cli, target_killed_mid_stream_ends_the_trace_with_its_status)
{
	char *dir = make_tmpdir(), *events = path_join(dir, "events.json");
	char *err_path = path_join(dir, "stderr");
	char *argv[] = { CUPROBE_BIN, "trace", "--json", "-o", events, "--", DRV_LAUNCH,
			 "100000000", NULL };
	struct cuprobe_summary summary;
	int status, waited = 0;
	pid_t cuprobe, target;
	json_t *all, *last;
	char *err_text;

	require_root();
	cuprobe = fork();
	cr_assert_geq(cuprobe, 0);
	if (cuprobe == 0) {
		int err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int null_fd = open("/dev/null", O_RDWR);

		dup2(null_fd, STDIN_FILENO);
		dup2(null_fd, STDOUT_FILENO);
		dup2(err_fd, STDERR_FILENO);
		execv(CUPROBE_BIN, argv);
		_exit(127);
	}
	target = child_of(cuprobe);
	cr_assert_gt(target, 0, "cuprobe never started its command");
	usleep(300000);
	cr_assert_eq(kill(target, SIGKILL), 0);
	while (waitpid(cuprobe, &status, WNOHANG) == 0 && waited++ < 1000)
		usleep(10000);
	if (waited > 1000)
		kill(cuprobe, SIGKILL);
	cr_assert(waited <= 1000, "cuprobe hung after its command died");
	cr_assert(WIFEXITED(status), "cuprobe died: status %#x", status);
	cr_assert_eq(WEXITSTATUS(status), 128 + SIGKILL);
	err_text = read_text(err_path);
	cr_assert(parse_cuprobe_summary(err_text, &summary), "no summary: %s", err_text);
	cr_assert_gt(summary.launches, 0);
	all = load_json_lines(events);
	cr_assert_gt(json_array_size(all), 0);
	last = json_array_get(all, json_array_size(all) - 1);
	cr_assert_str_eq(jstr(last, "type"), "process");
	cr_assert_str_eq(jstr(last, "kind"), "exit");
	cr_assert_eq(jint(last, "signal"), SIGKILL);
	cr_assert_eq(jint(last, "pid"), target);
	json_decref(all);
	free(err_text);
	free(err_path);
	free(events);
	remove_tree(dir);
	free(dir);
}

/* Ids of the BPF programs (or links) that exist now and are newer than after. */
static size_t bpf_ids_after(bool links, __u32 after, __u32 *ids, size_t max)
{
	__u32 id = after;
	size_t n = 0;

	while (n < max && !(links ? bpf_link_get_next_id(id, &id) : bpf_prog_get_next_id(id, &id)))
		ids[n++] = id;
	return n;
}

static __u32 newest_id(bool links)
{
	__u32 id = 0, next;

	while (!(links ? bpf_link_get_next_id(id, &next) : bpf_prog_get_next_id(id, &next)))
		id = next;
	return id;
}

static bool id_exists(bool links, __u32 id)
{
	int fd = links ? bpf_link_get_fd_by_id(id) : bpf_prog_get_fd_by_id(id);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

Test(cli, sigkill_of_cuprobe_leaves_no_program_or_link_and_the_target_runs_on)
{
	__u32 prog_base = newest_id(false), link_base = newest_id(true);
	__u32 progs[256], links[256];
	size_t prog_count = 0, link_count = 0, i;
	char pid_text[32];
	int status, tries;
	pid_t target, cuprobe;

	require_root();
	{
		char *target_argv[] = { DRV_LAUNCH, "2000000", NULL };

		target = start_background(target_argv);
	}
	usleep(100000);
	snprintf(pid_text, sizeof(pid_text), "%d", target);
	{
		char *argv[] = { CUPROBE_BIN, "trace", "--json", "-o", "/dev/null", "-p", pid_text, NULL };

		cuprobe = start_background(argv);
	}
	/* Attached once its links exist (the two tracepoints and the uprobes). */
	for (tries = 0; tries < 500 && link_count < 3; tries++) {
		usleep(10000);
		link_count = bpf_ids_after(true, link_base, links, 256);
	}
	cr_assert_geq(link_count, 3, "cuprobe never attached");
	usleep(200000);
	prog_count = bpf_ids_after(false, prog_base, progs, 256);
	link_count = bpf_ids_after(true, link_base, links, 256);
	cr_assert_gt(prog_count, 0);
	cr_assert_eq(kill(cuprobe, SIGKILL), 0);
	cr_assert_eq(waitpid(cuprobe, &status, 0), cuprobe);
	/* The kernel releases them with the last fd; allow it a moment. */
	for (tries = 0; tries < 500; tries++) {
		bool any = false;

		for (i = 0; i < prog_count; i++)
			any |= id_exists(false, progs[i]);
		for (i = 0; i < link_count; i++)
			any |= id_exists(true, links[i]);
		if (!any)
			break;
		usleep(10000);
	}
	for (i = 0; i < prog_count; i++)
		cr_assert_not(id_exists(false, progs[i]), "program %u outlived cuprobe", progs[i]);
	for (i = 0; i < link_count; i++)
		cr_assert_not(id_exists(true, links[i]), "link %u outlived cuprobe", links[i]);
	cr_assert_eq(kill(target, 0), 0, "the traced program died with cuprobe");
	cr_assert_eq(waitpid(target, &status, 0), target);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "target status %#x", status);
}
