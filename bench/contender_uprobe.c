// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of cp_compare ("empty-uprobe"): a uprobe on the workload's
 * cuLaunchKernel running an empty BPF program (empty_uprobe.bpf.c). It costs
 * the traced call the trap, the uprobe dispatch and one program run; it has
 * no consumer, so it has no idle or exit-race runs.
 */
#include <errno.h>

#include <bpf/libbpf.h>

#include "compare.h"
#include "cuprobe_internal.h"
#include "empty_uprobe.skel.h"

static int uprobe_start(struct contender *c, const struct options *opt, pid_t pid, struct cp_bench_hist *hist)
{
	const char *names[] = { "cuLaunchKernel" };
	uint64_t offset = 0;
	struct empty_uprobe_bpf *skel = empty_uprobe_bpf__open_and_load();
	LIBBPF_OPTS(bpf_uprobe_opts, uprobe_opts);
	int err;

	if (!skel)
		return -errno;
	if (cp_elf__function_offsets(opt->cuda_lib, names, 1, &offset) != 1 || !offset) {
		empty_uprobe_bpf__destroy(skel);
		return -ENOENT;
	}
	skel->links.empty_uprobe = bpf_program__attach_uprobe_opts(skel->progs.empty_uprobe, -1,
								   opt->cuda_lib, offset, &uprobe_opts);
	if (!skel->links.empty_uprobe) {
		err = -errno;
		empty_uprobe_bpf__destroy(skel);
		return err;
	}
	c->run = skel;
	return 0;
}

static void uprobe_after_measured(struct contender *c, const struct options *opt, const struct child *child,
				  uint64_t cpu_before)
{
	empty_uprobe_bpf__destroy(c->run);
	c->run = NULL;
}

const struct contender_ops contender_uprobe_ops = {
	.no_consumer = true,
	.no_exit_races = "n/a (no consumer)",
	.start = uprobe_start,
	.after_measured = uprobe_after_measured,
};
