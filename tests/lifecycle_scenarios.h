/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Agent lifecycle scenarios shared by root_lifecycle (Criterion) and
 * agent_stress (standalone, for ThreadSanitizer). Each returns 0, or -1
 * with the reason in why.
 */
#ifndef CUPROBE_LIFECYCLE_SCENARIOS_H
#define CUPROBE_LIFECYCLE_SCENARIOS_H

#include <stddef.h>

struct cp_tracer;

/* Once per process: root check, simulated driver context, module, buffers. */
int lifecycle_setup(char *why, size_t len);
void lifecycle_launch_once(void);
struct cp_tracer *lifecycle_open_tracer(size_t ring_bytes, char *why, size_t len);

/* start/stop cycles while 4 threads keep producing; exact accounting after. */
int scenario_start_stop_cycles(int cycles, char *why, size_t len);
/* cp_agent__request_stop from a SIGUSR1 handler, then join; exact accounting. */
int scenario_stop_from_signal_handler(char *why, size_t len);
/* The 500th callback returns negative: exactly 500 delivered, the thread ends. */
int scenario_stop_from_callback(char *why, size_t len);
/* A one-page ring and a slow consumer: records lost, produced == delivered + lost. */
int scenario_tiny_ring_accounting(char *why, size_t len);
/* After fork the child frees the parent's agent without joining and runs its own. */
int scenario_fork_child_starts_its_own(char *why, size_t len);

#endif
