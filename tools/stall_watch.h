/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The stall watcher: a thread that ends writes blocked at a stop (a pipe
 * nobody reads, a terminal stopped with Ctrl-S), so a stop is a stop
 * whatever the outputs do.
 */
#ifndef CUPROBE_STALL_WATCH_H
#define CUPROBE_STALL_WATCH_H

#include "output_file.h"

struct cp_stall_watch;

/*
 * Starts watching output and second (another output, --perfetto: abandoned
 * with the first once it has been written to). Both must stay valid until
 * cp_stall_watch__free; only their atomics are read, so they may be closed
 * meanwhile. NULL when the thread cannot start: a stop then waits for a
 * blocked output.
 */
struct cp_stall_watch *cp_stall_watch__start(struct cp_output *output, struct cp_output *second);
/* A stop has begun: from now on a blocked write is given up (NULL: nothing to do). */
void cp_stall_watch__stop_wanted(struct cp_stall_watch *w);
/* Tells the watcher to end and joins it (before a fork, or the outputs' end); NULL is fine. */
void cp_stall_watch__free(struct cp_stall_watch *w);

#endif
