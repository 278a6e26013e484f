/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The end-of-run warnings: what the BPF side and the agent could not
 * record, from one table, so every command words the same counter the
 * same way.
 */
#ifndef CUPROBE_WARNINGS_H
#define CUPROBE_WARNINGS_H

#include <stdio.h>

#include "cuprobe.h"

/*
 * One "cuprobe: [warning: ]..." line on out for each loss counted: the
 * counters (NULL: unreadable), the agent's stats (NULL: no agent). Returns
 * how many lines were written.
 */
int cp_warnings__print(FILE *out, const struct cp_counters *counters,
		       const struct cp_agent_stats *agent);

#endif
