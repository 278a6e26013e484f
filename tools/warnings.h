/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The end-of-run warnings: what the BPF side and the agent could not
 * record, from one table, so every command words the same counter the
 * same way.
 */
#ifndef CUPROBE_WARNINGS_H
#define CUPROBE_WARNINGS_H

#include <stdint.h>
#include <stdio.h>

#include "cuprobe.h"

/*
 * One "cuprobe: [warning: ]..." line on out for each loss counted: the
 * counters (NULL: unreadable), the agent's stats (NULL: no agent). Returns
 * how many lines were written.
 */
int cp_warnings__print(FILE *out, const struct cp_counters *counters,
		       const struct cp_agent_stats *agent);

struct cp_gpu_ring_counts;
/*
 * A device ring's counts at the end (always one line: produced, delivered,
 * lost, abandoned), then a warning for each kind of record not delivered.
 * Returns how many lines were written.
 */
int cp_warnings__device_ring(FILE *out, const char *ring, uint32_t capacity,
			     const struct cp_gpu_ring_counts *counts);

#endif
