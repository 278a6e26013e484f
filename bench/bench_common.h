/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the benches that read the kernel's per-program stats share. */
#ifndef CUPROBE_BENCH_COMMON_H
#define CUPROBE_BENCH_COMMON_H

#include "cuprobe.h"

/* Rounds a bench keeps per measure (the median's bound). */
#define MAX_ROUNDS 32

/* An agent's on_event that drops every record (the cost measured is the probes'). */
int bench_discard(void *ctx, const union cp_event *event);
/* The median of values[0..n), n at most MAX_ROUNDS. */
double bench_median(const double *values, int n);
/*
 * Average run time of the program name of the tracer's object, from the
 * kernel's stats (BPF_ENABLE_STATS); 0 when it never ran. *runs (may be
 * NULL) gets its run count.
 */
double bench_program_ns(struct cp_tracer *tracer, const char *name, unsigned long long *runs);

#endif
