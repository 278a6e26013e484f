// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bench_common.h"
#include "cuprobe_internal.h"
#include "tracer_internal.h"

int bench_discard(void *ctx, const union cp_event *event)
{
	(void)ctx;
	(void)event;
	return 0;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(const double *values, int n)
{
	double sorted[MAX_ROUNDS];

	if (n < 1 || n > MAX_ROUNDS)
		return 0;
	memcpy(sorted, values, n * sizeof(*values));
	qsort(sorted, n, sizeof(*sorted), by_value);
	return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

double bench_program_ns(struct cp_tracer *tracer, const char *name, unsigned long long *runs)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(tracer->skel->obj, name);
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (runs)
		*runs = 0;
	if (!prog || bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) || !info.run_cnt)
		return 0;
	if (runs)
		*runs = info.run_cnt;
	return (double)info.run_time_ns / info.run_cnt;
}
