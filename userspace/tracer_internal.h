/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The tracer's insides, shared by tracer.c and stats.c only (not installed). */
#ifndef CUPROBE_TRACER_INTERNAL_H
#define CUPROBE_TRACER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "cuprobe.h"
#include "cuprobe.skel.h"

struct cp_tracer {
	struct cuprobe_bpf *skel;
	struct bpf_link **links;   /* tracepoints, and uprobes on kernels without uprobe_multi */
	size_t link_count;
	size_t link_capacity;
	int *multi_fds;            /* uprobe_multi links: one per (program, library, entry/return) */
	size_t multi_count;
	size_t multi_capacity;
	unsigned int probe_count;  /* symbols probed, entry and return counted apart */
	bool measure_latency;      /* every probe gets a return probe (api_return if none) */
	bool use_multi;
	cp_log_fn log;
	void *log_ctx;
};

#endif
