// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The stall watcher. A stop must end cuprobe whatever its output does. If
 * the output blocks (a pipe nobody reads, a terminal stopped with Ctrl-S),
 * the writing thread waits in write(2): the agent draining the ring at the stop, or the main
 * thread writing a report, which then cannot even read the SIGINT. This
 * thread, alive from the agent's start to the outputs' close, watches: once
 * a stop is wanted (a signal waits, or the stop has begun) and a write has
 * made no progress for one period, the output is abandoned and the other
 * threads are interrupted (SIGURG, whose handler does nothing and does not
 * restart calls) while it stays blocked: the write fails, later ones are
 * skipped, and the rest is dropped, as the exit status and a line say.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cuprobe_internal.h"
#include "stall_watch.h"

#define STALL_MS 150
#define INTERRUPT_MS 50

struct cp_stall_watch {
	struct cp_output *output;   /* the records' output */
	struct cp_output *second;   /* another (--perfetto), watched once written to */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int stop_wanted;        /* atomic */
	pid_t self;             /* the watcher's tid */
};

static void on_interrupt(int sig)
{
	(void)sig;
}

/* Calls fn on each thread of ours but self, until fn returns true; returns whether one did. */
static bool any_other_thread(pid_t self, bool (*fn)(pid_t tid))
{
	DIR *tasks = opendir("/proc/self/task");
	struct dirent *entry;
	bool found = false;

	while (tasks && !found && (entry = readdir(tasks))) {
		pid_t tid = (pid_t)strtol(entry->d_name, NULL, 10);

		if (tid > 0 && tid != self)
			found = fn(tid);
	}
	if (tasks)
		closedir(tasks);
	return found;
}

static bool interrupt_thread(pid_t tid)
{
	syscall(SYS_tgkill, getpid(), tid, SIGURG);
	return false; /* all of them */
}

/* SIGURG to every thread of ours but the watcher. */
static void interrupt_other_threads(pid_t self)
{
	any_other_thread(self, interrupt_thread);
}

static void deadline_after(struct timespec *t, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += ms / 1000;
	t->tv_nsec += ms % 1000 * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

/* The stop has begun, or a stop signal waits (the main thread, blocked writing, cannot read it). */
static bool stop_wanted(struct cp_stall_watch *w)
{
	sigset_t pending;

	if (__atomic_load_n(&w->stop_wanted, __ATOMIC_SEQ_CST))
		return true;
	return !sigpending(&pending) && (sigismember(&pending, SIGINT) == 1 ||
					 sigismember(&pending, SIGTERM) == 1 ||
					 sigismember(&pending, SIGHUP) == 1);
}

/* Whether the thread is in write(2) or writev(2) to standard error (/proc's syscall file). */
static bool writing_stderr(pid_t tid)
{
	char path[64], line[256];
	unsigned long nr, fd;
	bool writing = false;
	FILE *file;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	file = fopen(path, "re");
	if (!file)
		return false;
	if (fgets(line, sizeof(line), file) && sscanf(line, "%lu %lx", &nr, &fd) == 2)
		writing = (nr == SYS_write || nr == SYS_writev) && fd == STDERR_FILENO;
	fclose(file);
	return writing;
}

/* Whether a thread of ours is writing to stderr: its messages would hang the exit on a stopped terminal. */
static bool stderr_blocked(pid_t self)
{
	return any_other_thread(self, writing_stderr);
}

/* Standard error from now on to /dev/null: a stopped terminal cannot hang our last words. */
static void drop_stderr(pid_t self)
{
	int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (null_fd < 0)
		return;
	dup2(null_fd, STDERR_FILENO);
	close(null_fd);
	interrupt_other_threads(self);
}

static void *watch_stalls(void *arg)
{
	struct cp_stall_watch *w = arg;
	unsigned long seen = 0, second_seen = 0;
	bool abandoned = false, stderr_dropped = false, stderr_was_blocked = false;
	struct timespec t;

	w->self = (pid_t)syscall(SYS_gettid);
	pthread_mutex_lock(&w->lock);
	while (!w->done) {
		deadline_after(&t, abandoned ? INTERRUPT_MS : STALL_MS);
		if (pthread_cond_timedwait(&w->cond, &w->lock, &t) != ETIMEDOUT || w->done)
			continue;
		/* Two looks in a row at a write to stderr blocked, once stopping: stderr goes. */
		if (!stderr_dropped && __atomic_load_n(&w->stop_wanted, __ATOMIC_SEQ_CST)) {
			bool blocked = stderr_blocked(w->self);

			if (blocked && stderr_was_blocked) {
				stderr_dropped = true;
				drop_stderr(w->self);
			}
			stderr_was_blocked = blocked;
		}
		if (!abandoned) {
			bool stalled = cp_output__stalled(w->output, &seen);

			/* (Only atomics of the outputs here: the main thread closes them meanwhile.) */
			if (cp_output__stalled(w->second, &second_seen))
				stalled = true;
			if (!stalled || !stop_wanted(w))
				continue;
			abandoned = true;
			cp_output__abandon(w->output);
			if (__atomic_load_n(&w->second->writes, __ATOMIC_RELAXED))
				cp_output__abandon(w->second);
		}
		if (__atomic_load_n(&w->output->writing, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&w->second->writing, __ATOMIC_RELAXED))
			interrupt_other_threads(w->self);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

struct cp_stall_watch *cp_stall_watch__start(struct cp_output *output, struct cp_output *second)
{
	struct sigaction interrupt = { .sa_handler = on_interrupt }; /* no SA_RESTART */
	struct cp_stall_watch *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL; /* a stop then waits for a blocked output, as before */
	w->output = output;
	w->second = second;
	pthread_mutex_init(&w->lock, NULL);
	cp_cond__init_monotonic(&w->cond);
	sigemptyset(&interrupt.sa_mask);
	if (sigaction(SIGURG, &interrupt, NULL) || pthread_create(&w->thread, NULL, watch_stalls, w)) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return NULL;
	}
	return w;
}

void cp_stall_watch__stop_wanted(struct cp_stall_watch *w)
{
	if (w)
		__atomic_store_n(&w->stop_wanted, 1, __ATOMIC_SEQ_CST);
}

void cp_stall_watch__free(struct cp_stall_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
