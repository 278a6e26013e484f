// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * In-process embedding: a CUDA program traces itself. The probes are still
 * kernel uprobes and the agent still blocks on the ring buffer fd; nothing
 * is shared with the traced code but the process. Stop order is the agent's
 * contract: request, wake, drain, join, and only then free the agent and
 * the tracer, so a stop from atexit or a destructor cannot race teardown.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuprobe_internal.h"

struct cp_self_trace {
	struct cp_tracer *tracer;
	struct cp_agent *agent;
};

struct cp_self_trace *cp_self_trace__start(const struct cp_self_trace_opts *caller_opts)
{
	CP_OPTS(cp_tracer_opts, tracer_opts);
	CP_OPTS(cp_agent_opts, agent_opts);
	struct cp_self_trace_opts known;
	const struct cp_self_trace_opts *opts = &known;
	struct cp_self_trace *self;
	struct cp_lib_set *libs;
	size_t i, attached = 0;
	int err;

	if (CP_OPTS_COPY(known, caller_opts) || !opts->on_event) {
		errno = EINVAL;
		return NULL;
	}
	self = calloc(1, sizeof(*self));
	libs = cp_lib_set__new();
	if (!self || !libs) {
		err = -ENOMEM;
		goto err_free;
	}
	err = cp_discover__process(libs, getpid(), opts->library ? opts->library : "libcuda.so.1");
	if (err < 0)
		goto err_free;
	if (!cp_lib_set__count(libs)) {
		err = -ENOENT;
		goto err_free;
	}
	tracer_opts.ring_bytes = opts->ring_bytes;
	tracer_opts.log = opts->log;
	tracer_opts.log_ctx = opts->log_ctx;
	self->tracer = cp_tracer__open(&tracer_opts);
	if (!self->tracer) {
		err = -errno;
		goto err_free;
	}
	for (i = 0; i < cp_lib_set__count(libs); i++)
		if (!cp_tracer__attach_driver(self->tracer, cp_lib_set__path(libs, i), NULL))
			attached++;
	if (!attached) {
		err = -ENOENT;
		goto err_free;
	}
	err = cp_tracer__add_pid(self->tracer, getpid());
	if (err)
		goto err_free;
	agent_opts.on_event = opts->on_event;
	agent_opts.ctx = opts->ctx;
	self->agent = cp_agent__new(cp_tracer__ring_fd(self->tracer), &agent_opts);
	if (!self->agent) {
		err = -errno;
		goto err_free;
	}
	err = cp_agent__start(self->agent);
	if (err)
		goto err_free;
	cp_lib_set__free(libs);
	return self;

err_free:
	cp_lib_set__free(libs);
	if (self) {
		cp_agent__free(self->agent);
		cp_tracer__free(self->tracer);
		free(self);
	}
	errno = -err;
	return NULL;
}

void cp_self_trace__request_stop(struct cp_self_trace *self)
{
	if (self)
		cp_agent__request_stop(self->agent);
}

int cp_self_trace__stop(struct cp_self_trace *self)
{
	return self ? cp_agent__stop(self->agent) : -EINVAL;
}

void cp_self_trace__stats(const struct cp_self_trace *self, struct cp_agent_stats *agent_stats,
			  struct cp_counters *counters)
{
	if (agent_stats)
		cp_agent__stats(self ? self->agent : NULL, agent_stats);
	if (counters && (!self || cp_tracer__read_counters(self->tracer, counters)))
		*counters = (struct cp_counters){ 0 };
}

void cp_self_trace__free(struct cp_self_trace *self)
{
	if (!self)
		return;
	/* The agent first: it is joined before the ring it reads goes away. */
	cp_agent__free(self->agent);
	cp_tracer__free(self->tracer);
	free(self);
}
