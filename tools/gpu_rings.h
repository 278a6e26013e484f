/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cuprobe run's device rings (CUPROBE_GPU_RING): read on the agent thread
 * when a record proves kernels done (a sync, a completed query, a blocking
 * copy) or a process exits, each record printed through the format wing;
 * at the end, produced = delivered + lost (+ abandoned) for each ring, per
 * launch with --json.
 */
#ifndef CUPROBE_GPU_RINGS_H
#define CUPROBE_GPU_RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuprobe_internal.h"
#include "session.h"

struct cp_gpu_ring;

struct cp_run_gpu_rings {
	struct cp_session *session;
	enum cp_format format;
	struct cp_gpu_ring **rings;
	size_t count;
	struct cp_text text;
	bool failed;            /* the output failed: reading goes on, printing stops */
	/*
	 * Processes that may write the rings (instrumented kernels, or a sync)
	 * and have not exited; the last ones that exited, whose late reports
	 * must not make them live again.
	 */
	uint32_t *live;
	size_t live_count, live_capacity;
	uint32_t exited[64];
	size_t exited_count;
	/*
	 * Per ring, the head when the last such process exited and none was
	 * left: a slot below it still not committed at the next sync or
	 * exit was its, and is abandoned then. 0: none.
	 */
	uint64_t *abandon_below;
};

/* After the program is loaded: its rings mapped and described. 0 or an exit code. */
int cp_run_gpu_rings__open(struct cp_run_gpu_rings *r, struct cp_session *session,
			   enum cp_format format);
/* Every record of the record path (the lock that guards the output held). */
void cp_run_gpu_rings__observe(struct cp_run_gpu_rings *r, const union cp_event *event);
/* A process got instrumented kernels (cp_device_run's on_instrumented; the lock held). */
void cp_run_gpu_rings__instrumented(void *r, uint32_t pid);
/* After the agent stopped: the last records, and the counts. True when some were lost. */
bool cp_run_gpu_rings__finish(struct cp_run_gpu_rings *r);
void cp_run_gpu_rings__close(struct cp_run_gpu_rings *r);

#endif
