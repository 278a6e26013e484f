/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef CUPROBE_EXPORTER_H
#define CUPROBE_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>

/* ---- the exporter's pure parts, for its unit test ----------------------------------- */

/*
 * The container id and Kubernetes pod uid of a cgroup path ("" when none):
 * docker, containerd and CRI-O ids are 64 hex digits, pod uids come with
 * dashes (cgroupfs) or underscores (systemd slices), written back as dashes.
 */
void cp_exporter__container_of(const char *cgroup, char *container, size_t container_len, char *pod,
			       size_t pod_len);

/* The cgroup path of /proc/PID/cgroup's text: the v2 line ("0::"), else the last v1 line. */
void cp_exporter__cgroup_of(const char *text, char *out, size_t len);

/* Field 22 of /proc/PID/stat's text (start time, clock ticks since boot); 0 when malformed. */
unsigned long long cp_exporter__start_time(const char *stat);

/*
 * The bound on the folded totals of exited processes, which live as long as
 * the exporter: at most max_cgroups cgroups keep their own series (the rest
 * fold into one row with container, cgroup and pod ""), and at most
 * max_kernels kernel names within each (the rest fold into kernel="other").
 * A cgroup or kernel once given its own series keeps it: counters never go
 * backwards.
 */
struct cp_fold_cgroup {
	char *cgroup;
	char **kernels;
	size_t kernel_count;
};

struct cp_fold_bound {
	size_t max_cgroups, max_kernels;
	struct cp_fold_cgroup *cgroups;
	size_t cgroup_count;
};

/*
 * Whether cgroup keeps its own folded series (*at: its place, for
 * cp_fold_bound__kernel); false: it goes into the overflow row.
 */
bool cp_fold_bound__cgroup(struct cp_fold_bound *bound, const char *cgroup, size_t *at);
/* The kernel label of a folded series of the cgroup at `at`: kernel, or "other". */
const char *cp_fold_bound__kernel(struct cp_fold_bound *bound, size_t at, const char *kernel);
void cp_fold_bound__release(struct cp_fold_bound *bound);

#endif
