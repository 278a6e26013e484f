/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one record path of a tracing session (after perf's struct perf_tool):
 * every record the GPU agent hands out goes through it, and each command
 * gives only its own part. For each record, with the command's lock held
 * when it gives one:
 *
 *  1. the session observes it: the names it teaches (cp_names__observe),
 *     and at a process's start (cuInit, or held for its stacks) the
 *     process's mappings, read for the symbolizer while it lives (then it
 *     is continued if it was held for them);
 *  2. on_record sees it, names known (a command formats it here);
 *  3. the timeline, when the command has one, observes it: the bounds it
 *     settles come out through the timeline's on_interval after the record;
 *  4. on_settled sees it, the timeline up to date (Xid and exit reports);
 *  5. at a process's exit, after the command has seen it, the process is
 *     forgotten everywhere, once: names, symbolizer, timeline and the
 *     tracer's rows; unless the command keeps exited processes
 *     (forget_later) and forgets them itself, later.
 *
 * A negative return from a callback stops the agent (the steps after it are
 * skipped for that record).
 */
#ifndef CUPROBE_RECORD_PATH_H
#define CUPROBE_RECORD_PATH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "session.h"

struct cp_record_path {
	/* The command's part; either may be NULL. */
	int (*on_record)(void *ctx, const union cp_event *event);
	int (*on_settled)(void *ctx, const union cp_event *event);
	void *ctx;
	/* Fed every record between the two; may be NULL. The command owns it. */
	struct cp_timeline *timeline;
	/* Held around each record when another thread reads what it feeds; may be NULL. */
	pthread_mutex_t *lock;
	/*
	 * The command forgets exited processes itself (cp_record_path__forget):
	 * run keeps the latest ones' names for the maps it prints later.
	 */
	bool forget_later;
	/* Set by cp_record_path__start. */
	struct cp_session *session;
};

/*
 * Starts the session's agent, every record going through path (which must
 * outlive the agent: cp_session__close joins it): 0 or an exit code.
 */
int cp_record_path__start(struct cp_record_path *path, struct cp_session *session);
/* pid goes from the names, the symbolizer, the timeline and the tracer's rows (lock held). */
void cp_record_path__forget(struct cp_record_path *path, uint32_t pid);
/*
 * The same for many processes at once, the tracer's maps walked once: 0, or
 * a negative errno when their rows could not be removed (the rest is).
 */
int cp_record_path__forget_pids(struct cp_record_path *path, const uint32_t *pids, size_t count);

#endif
