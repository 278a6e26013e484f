// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The one record path of a tracing session (record_path.h says what it does, in what order). */
#include "record_path.h"

/* What every command needs of a record before it sees it. */
static void observe(struct cp_record_path *path, const union cp_event *event)
{
	struct cp_session *s = path->session;
	uint32_t pid = event->hdr.pid;

	cp_names__observe(s->names, event);
	if (event->hdr.type == CP_EV_PROC && (event->proc.kind == CP_PROC_CUDA_INIT ||
					      event->proc.kind == CP_PROC_HELD_FOR_STACKS)) {
		/*
		 * Alive (in cuInit, or held): its libraries are mapped. Read now,
		 * they still name its stacks and stubs after it exits.
		 */
		cp_tracer__maps_reading(s->tracer, pid);
		cp_symbolizer__refresh(s->symbolizer, pid);
		cp_tracer__maps_read(s->tracer, pid);
	}
}

static bool is_exit(const union cp_event *event)
{
	return event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT;
}

static int on_event(void *ctx, const union cp_event *event)
{
	struct cp_record_path *path = ctx;
	int err = 0;

	if (path->lock)
		pthread_mutex_lock(path->lock);
	observe(path, event);
	if (path->on_record)
		err = path->on_record(path->ctx, event);
	if (err >= 0)
		cp_timeline__observe(path->timeline, event);
	if (err >= 0 && path->on_settled)
		err = path->on_settled(path->ctx, event);
	/* Once the command has seen the exit (its report, its last record written). */
	if (err >= 0 && is_exit(event) && !path->forget_later)
		cp_record_path__forget(path, event->hdr.pid);
	if (path->lock)
		pthread_mutex_unlock(path->lock);
	return err;
}

int cp_record_path__start(struct cp_record_path *path, struct cp_session *session)
{
	path->session = session;
	return cp_session__start_agent(session, on_event, path);
}

/* Everything but the tracer's rows. */
static void forget_here(struct cp_record_path *path, uint32_t pid)
{
	cp_names__forget_pid(path->session->names, pid);
	cp_python__forget_pid(path->session->python, pid);
	cp_symbolizer__forget(path->session->symbolizer, (pid_t)pid);
	cp_timeline__forget_pid(path->timeline, pid);
}

void cp_record_path__forget(struct cp_record_path *path, uint32_t pid)
{
	/* Read, reported: now it goes, so the maps and tables stay bounded by live processes. */
	cp_tracer__forget_pid(path->session->tracer, pid);
	forget_here(path, pid);
}

int cp_record_path__forget_pids(struct cp_record_path *path, const uint32_t *pids, size_t count)
{
	int err = count ? cp_tracer__forget_pids(path->session->tracer, pids, count) : 0;
	size_t i;

	for (i = 0; i < count; i++)
		forget_here(path, pids[i]);
	return err;
}
