// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter contender of cp_compare: `cuprobe exporter` counting only (no
 * --latency), system-wide on the workload's driver file, at its default
 * interval; its counts are read back from /metrics as a scraper would. One
 * exporter per measured or idle run, one for all the exit-race runs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"

/* How long its count of a run may take to show (it reads its maps every interval). */
#define EXPORTER_WAIT_MS 8000

struct exporter_run {
	pid_t pid;
	int err_fd;
	int port;
	pid_t *race_pids;  /* exit races: each run's pid */
	char said[200];    /* its first line, when it ended before serving */
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
static int exporter_launch(struct exporter_run *run, const struct options *opt, const char *interval)
{
	char listen[64], said[4096];
	const char *argv[] = { opt->cuprobe, "exporter", "--lib", opt->cuda_lib, "--listen", listen,
			       "-i", interval, NULL };
	size_t used = 0;
	uint64_t deadline;

	memset(run, 0, sizeof(*run));
	run->port = loopback_port();
	if (run->port < 0)
		return -EADDRNOTAVAIL;
	format_into(listen, sizeof(listen), "127.0.0.1:%d", run->port);
	run->pid = process_start(argv, STDERR_FILENO, &run->err_fd);
	if (run->pid < 0)
		return run->pid;
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
	/* Ended by itself (EOF before serving): keep why, e.g. a build without the exporter. */
	if (used && cp_bench_now_ns() < deadline) {
		format_into(run->said, sizeof(run->said), "%.*s", (int)strcspn(said, "\n"), said);
		return -ENOEXEC;
	}
	return -ETIMEDOUT;
}

/* SIGTERM (it exits 0), SIGKILL after 20 s. True when it ended by itself with 0. */
static bool exporter_terminate(struct exporter_run *run)
{
	int status = process_stop(run->pid, SIGTERM, 20000);

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

/* An exporter for c, in c->run: 0 or -errno. */
static int exporter_open(struct contender *c, const struct options *opt, pid_t *race_pids)
{
	struct exporter_run *run = malloc(sizeof(*run));
	int err;

	if (!run)
		return -ENOMEM;
	err = exporter_launch(run, opt, EXPORTER_INTERVAL);
	if (err) {
		if (run->said[0]) {
			char why[sizeof(run->said) + 32];

			format_into(why, sizeof(why), "it did not start: %s", run->said);
			note_skip(c, why);
		}
		free(run);
		return err;
	}
	run->race_pids = race_pids;
	c->run = run;
	return 0;
}

/* Stops c's exporter and frees the run; true when it exited 0 at SIGTERM. */
static bool exporter_close(struct contender *c)
{
	struct exporter_run *run = c->run;
	bool clean = exporter_terminate(run);

	free(run->race_pids);
	free(run);
	c->run = NULL;
	return clean;
}

static int exporter_start(struct contender *c, const struct options *opt, pid_t pid, struct cp_bench_hist *hist)
{
	return exporter_open(c, opt, NULL);
}

/* The whole exporter process. */
static uint64_t exporter_cpu_ns(struct contender *c)
{
	return threads_cpu_ns(((struct exporter_run *)c->run)->pid, 0);
}

static void exporter_after_measured(struct contender *c, const struct options *opt, const struct child *child,
				    uint64_t cpu_before)
{
	uint64_t cpu_after, counted;

	/* Its CPU while the workload ran; then its counts, at its next read of the maps. */
	cpu_after = exporter_cpu_ns(c);
	counted = exporter_wait_launches(c->run, child->pid, (uint64_t)opt->calls, EXPORTER_WAIT_MS);
	if (!exporter_close(c))
		c->failed_runs++;
	contender_count(c, (uint64_t)opt->calls, counted, 0, cpu_after - cpu_before);
}

static void exporter_stop(struct contender *c)
{
	exporter_close(c);
}

static bool exporter_before_exit_races(struct contender *c, const struct options *opt)
{
	pid_t *race_pids = calloc((size_t)opt->exit_runs + 1, sizeof(*race_pids));

	if (!race_pids)
		die("calloc", ENOMEM);
	if (exporter_open(c, opt, race_pids)) {
		format_into(c->exit_note, sizeof(c->exit_note), "the exporter did not start");
		free(race_pids);
		return false;
	}
	return true;
}

static void exporter_after_exit_run(struct contender *c, const struct options *opt, int run,
				    const struct child *child)
{
	((struct exporter_run *)c->run)->race_pids[run] = child->pid;
}

static void exporter_after_exit_races(struct contender *c, const struct options *opt)
{
	struct exporter_run *run = c->run;
	int i;

	/* One exporter for all runs: each run's launches, kept under its pid after its exit. */
	for (i = 0; i < opt->exit_runs; i++) {
		uint64_t got = exporter_wait_launches(run, run->race_pids[i], (uint64_t)opt->exit_calls,
						      i ? 1000 : EXPORTER_WAIT_MS);

		contender_exit_shortfall(c, (uint64_t)opt->exit_calls, got);
	}
	snprintf(c->exit_note, sizeof(c->exit_note), "one exporter for all runs, %s",
		 exporter_close(c) ? "exited 0 at SIGTERM" : "did not exit 0 at SIGTERM");
}

const struct contender_ops contender_exporter_ops = {
	.latency_note = "n/a (counts)",
	.min_idle_ms = EXPORTER_IDLE_MS,
	.start = exporter_start,
	.consumer_cpu_ns = exporter_cpu_ns,
	.stop = exporter_stop,
	.after_measured = exporter_after_measured,
	.before_exit_races = exporter_before_exit_races,
	.after_exit_run = exporter_after_exit_run,
	.after_exit_races = exporter_after_exit_races,
};
