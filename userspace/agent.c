// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU agent: one thread blocked in epoll_wait on the ring buffer's epoll
 * fd and an eventfd. No shared memory with any traced process, no polled
 * flag: a stop request writes the eventfd, the thread drains what was
 * committed, returns, is joined, and only then is anything freed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuprobe_internal.h"

#define DEFAULT_BUSY_TIMEOUT_MS 1
#define DEFAULT_IDLE_TIMEOUT_MS 1000

/* Another ring (a user's program's): its records go to fn as bytes. */
struct extra_ring {
	struct cp_agent *agent;
	cp_record_fn fn;
	void *ctx;
};

/* An fd that is not a ring (a socket COMMAND reports on): fn reads it when it is readable. */
struct watched_fd {
	int fd;
	cp_fd_fn fn;
	void *ctx;
	bool finished;
};

struct cp_agent {
	struct ring_buffer *ring;      /* the tracer's ring, and every ring added, on one epoll */
	struct extra_ring **extra;
	size_t extra_count, extra_capacity;
	/* Watched fds, on the same epoll (data.ptr: the watched_fd; the rings' and wake's: NULL). */
	pthread_mutex_t fds_lock;
	struct watched_fd **fds;
	size_t fd_count, fd_capacity;
	int epoll_fd;
	int wake_fd;
	cp_event_fn on_event;
	void *ctx;
	struct cp_tracer *tracer; /* handles attach events before on_event, when set */
	struct cp_python *python; /* looks at processes and resolves Python stacks, when set */
	int busy_timeout_ms;
	int idle_timeout_ms;

	pthread_mutex_t lifecycle; /* serializes start/stop between threads */
	pthread_t thread;
	pid_t owner_pid;           /* a forked child holds no thread of ours */
	bool started;
	bool joined;

	atomic_bool stop_requested;
	atomic_uint_fast64_t delivered;
	atomic_uint_fast64_t malformed;
	atomic_uint_fast64_t wakeups;
	atomic_int callback_error;
	atomic_int thread_error;
};

/* The agent whose thread this is, if any: a stop from its own callback must not wait. */
static __thread const struct cp_agent *this_threads_agent;

/* A callback's error (< 0) is kept, the first one only, and stops the agent. */
static int callback_result(struct cp_agent *agent, int err)
{
	int none = 0;

	if (err >= 0)
		return 0;
	atomic_compare_exchange_strong(&agent->callback_error, &none, err);
	atomic_store(&agent->stop_requested, true);
	return err;
}

static int handle_record(void *ctx, void *data, size_t size)
{
	struct cp_agent *agent = ctx;
	union cp_event event;
	int err;

	if (cp_event__decode(data, size, &event)) {
		atomic_fetch_add(&agent->malformed, 1);
		return 0;
	}
	atomic_fetch_add(&agent->delivered, 1);
	/* A new CUDA library file: its probes go in before anyone hears of it. */
	if (event.hdr.type == CP_EV_ATTACH && agent->tracer)
		cp_tracer__handle_attach(agent->tracer, &event.attach);
	/* A GPU error: the process it hit, from the driver's log line. */
	if (event.hdr.type == CP_EV_XID && agent->tracer)
		cp_tracer__handle_xid(agent->tracer, &event.xid);
	/* Python: a process to look at, a stack to resolve while its process lives (or is held). */
	if (agent->python)
		cp_python__observe(agent->python, &event);
	err = agent->on_event ? agent->on_event(agent->ctx, &event) : 0;
	return callback_result(agent, err);
}

static int handle_extra_record(void *ctx, void *data, size_t size)
{
	struct extra_ring *ring = ctx;
	struct cp_agent *agent = ring->agent;
	int err;

	atomic_fetch_add(&agent->delivered, 1);
	err = ring->fn(ring->ctx, data, size);
	return callback_result(agent, err);
}

int cp_agent__add_ring(struct cp_agent *agent, int ring_fd, cp_record_fn fn, void *ctx)
{
	struct extra_ring *ring;
	int err = 0;

	if (!agent || ring_fd < 0 || !fn)
		return -EINVAL;
	pthread_mutex_lock(&agent->lifecycle);
	if (agent->started) {
		err = -EBUSY;
		goto out_unlock;
	}
	ring = calloc(1, sizeof(*ring));
	if (!ring || CP_ARRAY_RESERVE(agent->extra, agent->extra_capacity, agent->extra_count + 1, 4)) {
		free(ring);
		err = -ENOMEM;
		goto out_unlock;
	}
	*ring = (struct extra_ring){ .agent = agent, .fn = fn, .ctx = ctx };
	err = ring_buffer__add(agent->ring, ring_fd, handle_extra_record, ring);
	if (err) {
		free(ring);
		goto out_unlock;
	}
	agent->extra[agent->extra_count++] = ring;
out_unlock:
	pthread_mutex_unlock(&agent->lifecycle);
	return err;
}

int cp_agent__add_fd(struct cp_agent *agent, int fd, cp_fd_fn fn, void *ctx)
{
	struct epoll_event event = { .events = EPOLLIN };
	struct watched_fd *watched;
	int err = 0;

	if (!agent || fd < 0 || !fn)
		return -EINVAL;
	watched = calloc(1, sizeof(*watched));
	if (!watched)
		return -ENOMEM;
	*watched = (struct watched_fd){ .fd = fd, .fn = fn, .ctx = ctx };
	pthread_mutex_lock(&agent->fds_lock);
	if (CP_ARRAY_RESERVE(agent->fds, agent->fd_capacity, agent->fd_count + 1, 4)) {
		err = -ENOMEM;
		goto out_unlock;
	}
	event.data.ptr = watched;
	if (epoll_ctl(agent->epoll_fd, EPOLL_CTL_ADD, fd, &event)) {
		err = -errno;
		goto out_unlock;
	}
	agent->fds[agent->fd_count++] = watched;
	watched = NULL;
out_unlock:
	pthread_mutex_unlock(&agent->fds_lock);
	free(watched);
	return err;
}

/* A watched fd is readable (or, at the stop, may be): its reader runs; finished ones leave the epoll. */
static int read_watched(struct cp_agent *agent, struct watched_fd *watched)
{
	int got;

	if (watched->finished)
		return 0;
	got = watched->fn(watched->ctx, watched->fd);
	if (got > 0) {
		watched->finished = true;
		epoll_ctl(agent->epoll_fd, EPOLL_CTL_DEL, watched->fd, NULL);
		return 0;
	}
	return callback_result(agent, got);
}

/* At the stop: whatever the watched fds still hold. */
static void drain_watched(struct cp_agent *agent)
{
	size_t i;

	pthread_mutex_lock(&agent->fds_lock);
	for (i = 0; i < agent->fd_count && !atomic_load(&agent->callback_error); i++)
		read_watched(agent, agent->fds[i]);
	pthread_mutex_unlock(&agent->fds_lock);
}

static void *agent_thread(void *arg)
{
	struct cp_agent *agent = arg;
	struct epoll_event ready[8];
	int timeout = agent->idle_timeout_ms;
	int n, got, i;

	this_threads_agent = agent;
	while (!atomic_load(&agent->stop_requested)) {
		n = epoll_wait(agent->epoll_fd, ready, 8, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			atomic_store(&agent->thread_error, -errno);
			return NULL;
		}
		atomic_fetch_add(&agent->wakeups, 1);
		for (i = 0; i < n; i++)
			if (ready[i].data.ptr && read_watched(agent, ready[i].data.ptr) < 0)
				return NULL;
		got = ring_buffer__consume(agent->ring);
		if (got < 0) {
			if (!atomic_load(&agent->callback_error))
				atomic_store(&agent->thread_error, got);
			return NULL;
		}
		/* Records come in bursts under latency-bounded wakeups: look again soon. */
		timeout = got > 0 ? agent->busy_timeout_ms : agent->idle_timeout_ms;
	}
	/* Stop requested: everything committed before now is still delivered. */
	if (!atomic_load(&agent->callback_error)) {
		got = ring_buffer__consume(agent->ring);
		if (got < 0 && !atomic_load(&agent->callback_error))
			atomic_store(&agent->thread_error, got);
	}
	drain_watched(agent);
	return NULL;
}

struct cp_agent *cp_agent__new(int ring_fd, const struct cp_agent_opts *caller_opts)
{
	struct epoll_event wake = { .events = EPOLLIN };
	struct epoll_event ring = { .events = EPOLLIN };
	struct cp_agent_opts known;
	const struct cp_agent_opts *opts = &known;
	struct cp_agent *agent;
	int err;

	if (ring_fd < 0 || CP_OPTS_COPY(known, caller_opts) || !opts->on_event ||
	    opts->busy_timeout_ms < 0 || opts->idle_timeout_ms < -1) {
		errno = EINVAL;
		return NULL;
	}
	agent = calloc(1, sizeof(*agent));
	if (!agent)
		return NULL;
	agent->on_event = opts->on_event;
	agent->ctx = opts->ctx;
	agent->tracer = opts->tracer;
	agent->python = opts->python;
	agent->busy_timeout_ms = opts->busy_timeout_ms ? opts->busy_timeout_ms : DEFAULT_BUSY_TIMEOUT_MS;
	agent->idle_timeout_ms = opts->idle_timeout_ms ? opts->idle_timeout_ms : DEFAULT_IDLE_TIMEOUT_MS;
	agent->epoll_fd = -1;
	agent->wake_fd = -1;
	pthread_mutex_init(&agent->lifecycle, NULL);
	pthread_mutex_init(&agent->fds_lock, NULL);

	agent->ring = ring_buffer__new(ring_fd, handle_record, agent, NULL);
	if (!agent->ring) {
		err = -errno;
		goto err_free_agent;
	}
	agent->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	agent->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (agent->wake_fd < 0 || agent->epoll_fd < 0) {
		err = -errno;
		goto err_close_fds;
	}
	/* data.ptr NULL: not a watched fd; the rings are consumed at every wakeup. */
	wake.data.ptr = NULL;
	ring.data.ptr = NULL;
	if (epoll_ctl(agent->epoll_fd, EPOLL_CTL_ADD, agent->wake_fd, &wake) ||
	    epoll_ctl(agent->epoll_fd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(agent->ring), &ring)) {
		err = -errno;
		goto err_close_fds;
	}
	return agent;

err_close_fds:
	cp_fd__close(&agent->epoll_fd);
	cp_fd__close(&agent->wake_fd);
	ring_buffer__free(agent->ring);
err_free_agent:
	pthread_mutex_destroy(&agent->fds_lock);
	pthread_mutex_destroy(&agent->lifecycle);
	free(agent);
	errno = -err;
	return NULL;
}

int cp_agent__start(struct cp_agent *agent)
{
	int err = 0;

	if (!agent)
		return -EINVAL;
	pthread_mutex_lock(&agent->lifecycle);
	if (agent->started) {
		err = -EALREADY;
		goto out_unlock;
	}
	err = -pthread_create(&agent->thread, NULL, agent_thread, agent);
	if (!err) {
		agent->started = true;
		agent->owner_pid = getpid();
	}
out_unlock:
	pthread_mutex_unlock(&agent->lifecycle);
	return err;
}

void cp_agent__request_stop(struct cp_agent *agent)
{
	uint64_t one = 1;
	ssize_t ignored;

	if (!agent)
		return;
	atomic_store(&agent->stop_requested, true);
	/* write(2) is async-signal-safe; a full counter still leaves it readable. */
	ignored = write(agent->wake_fd, &one, sizeof(one));
	(void)ignored;
}

int cp_agent__stop(struct cp_agent *agent)
{
	int err = 0;

	if (!agent)
		return -EINVAL;
	cp_agent__request_stop(agent);
	/*
	 * From a callback: the request is made and the thread ends on return.
	 * Checked before the lock, which a stop from another thread holds while
	 * it joins this one: waiting for it here would never end.
	 */
	if (this_threads_agent == agent)
		return -EDEADLK;
	pthread_mutex_lock(&agent->lifecycle);
	if (!agent->started || agent->joined)
		goto out_unlock;
	if (agent->owner_pid != getpid()) {
		/* After fork() the thread does not exist in this process. */
		agent->joined = true;
		goto out_unlock;
	}
	err = -pthread_join(agent->thread, NULL);
	if (!err)
		agent->joined = true;
out_unlock:
	pthread_mutex_unlock(&agent->lifecycle);
	return err;
}

void cp_agent__free(struct cp_agent *agent)
{
	if (!agent)
		return;
	if (cp_agent__stop(agent) == -EDEADLK)
		return; /* never free under our own running thread */
	close(agent->epoll_fd);
	close(agent->wake_fd);
	ring_buffer__free(agent->ring);
	while (agent->extra_count)
		free(agent->extra[--agent->extra_count]);
	free(agent->extra);
	while (agent->fd_count)
		free(agent->fds[--agent->fd_count]);
	free(agent->fds);
	pthread_mutex_destroy(&agent->fds_lock);
	pthread_mutex_destroy(&agent->lifecycle);
	free(agent);
}

void cp_agent__stats(const struct cp_agent *agent, struct cp_agent_stats *out)
{
	struct cp_agent *mutable_agent = (struct cp_agent *)agent;

	memset(out, 0, sizeof(*out));
	if (!agent)
		return;
	out->delivered = atomic_load(&mutable_agent->delivered);
	out->malformed = atomic_load(&mutable_agent->malformed);
	out->wakeups = atomic_load(&mutable_agent->wakeups);
	out->callback_error = atomic_load(&mutable_agent->callback_error);
	out->thread_error = atomic_load(&mutable_agent->thread_error);
}
