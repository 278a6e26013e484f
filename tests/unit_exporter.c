// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exporter's pure parts (tools/exporter/exporter.h): the container and
 * pod of real-looking cgroup paths (v2 and v1; docker, containerd, CRI-O,
 * Kubernetes in its systemd and cgroupfs layouts; and paths of no
 * container), the cgroup line chosen from /proc/PID/cgroup, the start time
 * of /proc/PID/stat that tells a reused pid, and the bound on the folded
 * totals of exited processes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "exporter.h"

#define ID64 "4f1d2c3b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff001"
#define ID64B "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define UID "6b3e5a2c-1f4d-4e8a-9b7c-0d2e4f6a8b1c"
#define UID_ "6b3e5a2c_1f4d_4e8a_9b7c_0d2e4f6a8b1c"

static void expect(const char *cgroup, const char *container, const char *pod)
{
	char got_container[80], got_pod[80];

	cp_exporter__container_of(cgroup, got_container, sizeof(got_container), got_pod,
				  sizeof(got_pod));
	cr_expect_str_eq(got_container, container, "%s: container %s, not %s", cgroup, got_container,
			 container);
	cr_expect_str_eq(got_pod, pod, "%s: pod %s, not %s", cgroup, got_pod, pod);
}

Test(container_of, docker_v2_and_v1)
{
	cr_assert_eq(strlen(ID64), 64);
	cr_assert_eq(strlen(ID64B), 64);
	expect("/system.slice/docker-" ID64 ".scope", ID64, "");
	expect("/docker/" ID64, ID64, "");
	/* Docker in docker: the first id is the outer container. */
	expect("/docker/" ID64 "/docker/" ID64B, ID64, "");
}

Test(container_of, containerd_and_crio)
{
	expect("/system.slice/cri-containerd-" ID64 ".scope", ID64, "");
	expect("/machine.slice/crio-" ID64B ".scope", ID64B, "");
}

Test(container_of, kubernetes_systemd_slices)
{
	expect("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	       ".slice/cri-containerd-" ID64 ".scope", ID64, UID);
	expect("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	       ".slice/crio-" ID64B ".scope", ID64B, UID);
	/* Guaranteed pods sit directly under kubepods.slice. */
	expect("/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" ID64 ".scope", ID64, UID);
	/* The pod's own slice, no container yet. */
	expect("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice", "", UID);
}

Test(container_of, kubernetes_cgroupfs)
{
	expect("/kubepods/burstable/pod" UID "/" ID64, ID64, UID);
	expect("/kubepods/besteffort/pod" UID "/" ID64B, ID64B, UID);
	expect("/kubepods/pod" UID "/" ID64, ID64, UID);
}

Test(container_of, no_container)
{
	expect("/user.slice/user-1000.slice/session-3.scope", "", "");
	expect("/user.slice/user-0.slice/user@0.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-5d0c1a8e-3f2b-4c6d-9e7f-a1b2c3d4e5f6.scope",
	       "", "");
	expect("/system.slice/ssh.service", "", "");
	expect("/", "", "");
	expect("", "", "");
	/* 63 and 65 hex digits are no container id; "kubepods" alone is no pod. */
	expect("/system.slice/docker-" "4f1d2c3b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff00" ".scope",
	       "", "");
	expect("/docker/" ID64 "0", "", "");
	expect("/kubepods.slice/kubepods-burstable.slice", "", "");
}

static void expect_cgroup(const char *text, const char *want)
{
	char got[256];

	cp_exporter__cgroup_of(text, got, sizeof(got));
	cr_expect_str_eq(got, want, "cgroup of %s: %s, not %s", text, got, want);
}

Test(cgroup_of, v2_hybrid_and_v1)
{
	expect_cgroup("0::/system.slice/docker-" ID64 ".scope\n", "/system.slice/docker-" ID64 ".scope");
	/* Hybrid: the unified line wins wherever it is. */
	expect_cgroup("1:name=systemd:/user.slice/user-0.slice/session-1.scope\n0::/kubepods/pod" UID "/" ID64 "\n",
		      "/kubepods/pod" UID "/" ID64);
	expect_cgroup("0::/a\n1:name=systemd:/b\n", "/a");
	/* v1 only: the last line, hierarchy 1 (name=systemd). */
	expect_cgroup("12:pids:/docker/" ID64 "\n11:memory:/docker/" ID64 "\n1:name=systemd:/docker/" ID64B "\n",
		      "/docker/" ID64B);
	/* A path may hold colons; a last line without its newline. */
	expect_cgroup("3:cpu,cpuacct:/a:b", "/a:b");
	expect_cgroup("", "");
	expect_cgroup("garbage\n", "");
}

Test(start_time, field_22_after_any_comm)
{
	char stat[512];
	FILE *file;
	size_t n;

	cr_expect_eq(cp_exporter__start_time("1234 (drv_launch) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345678 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"),
		     987654ull);
	/* A comm of spaces and parentheses (up to 15 bytes) cannot shift the fields. */
	cr_expect_eq(cp_exporter__start_time("77 (a) b ) (c d) R 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 1 2 3\n"),
		     42ull);
	cr_expect_eq(cp_exporter__start_time("77 (x) R 1 2 3"), 0, "too short");
	cr_expect_eq(cp_exporter__start_time("77 (x)"), 0);
	cr_expect_eq(cp_exporter__start_time("no parenthesis"), 0);
	cr_expect_eq(cp_exporter__start_time("1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12ab 1\n"), 0,
		     "not a number");
	/* This very process: the same as /proc/self/stat read by hand, and not 0. */
	file = fopen("/proc/self/stat", "re");
	cr_assert_not_null(file);
	n = fread(stat, 1, sizeof(stat) - 1, file);
	fclose(file);
	stat[n] = '\0';
	{
		unsigned long long want = 0;
		char *p = strrchr(stat, ')') + 2;
		int field;

		for (field = 3; field < 22; field++)
			p = strchr(p, ' ') + 1;
		want = strtoull(p, NULL, 10);
		cr_assert_gt(want, 0);
		cr_expect_eq(cp_exporter__start_time(stat), want);
	}
}

Test(fold_bound, cgroups_and_kernels_beyond_the_bound_overflow)
{
	struct cp_fold_bound bound = { .max_cgroups = 2, .max_kernels = 2 };
	size_t a, b, at;

	cr_assert(cp_fold_bound__cgroup(&bound, "/docker/" ID64, &a));
	cr_assert(cp_fold_bound__cgroup(&bound, "/user.slice", &b));
	cr_assert_neq(a, b);
	/* Full: a third cgroup overflows, every time; the two first keep their places. */
	cr_assert_not(cp_fold_bound__cgroup(&bound, "/docker/" ID64B, &at));
	cr_assert_not(cp_fold_bound__cgroup(&bound, "/docker/" ID64B, &at));
	cr_assert(cp_fold_bound__cgroup(&bound, "/user.slice", &at));
	cr_assert_eq(at, b);
	cr_assert(cp_fold_bound__cgroup(&bound, "/docker/" ID64, &at));
	cr_assert_eq(at, a);
	cr_assert_eq(bound.cgroup_count, 2);

	/* Kernels: two names per cgroup; "other" takes no place; a name once kept stays. */
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, a, "other"), "other");
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, a, "gemm"), "gemm");
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, a, "softmax"), "softmax");
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, a, "layernorm"), "other");
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, a, "gemm"), "gemm");
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, a, "softmax"), "softmax");
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, a, "layernorm"), "other");
	/* Each cgroup has its own places. */
	cr_assert_str_eq(cp_fold_bound__kernel(&bound, b, "layernorm"), "layernorm");
	cr_assert_eq(bound.cgroups[a].kernel_count, 2);
	cr_assert_eq(bound.cgroups[b].kernel_count, 1);
	cp_fold_bound__release(&bound);
	cr_assert_eq(bound.cgroup_count, 0);
}

/* Many cgroups through a bound of 500 (the exporter's): the places stay 500. */
Test(fold_bound, churn_stays_bounded)
{
	struct cp_fold_bound bound = { .max_cgroups = 500, .max_kernels = 50 };
	char cgroup[64], kernel[32];
	size_t at, own = 0, i, k;

	for (i = 0; i < 5000; i++) {
		snprintf(cgroup, sizeof(cgroup), "/kubepods/pod%zu", i);
		if (!cp_fold_bound__cgroup(&bound, cgroup, &at))
			continue;
		own++;
		for (k = 0; k < 60; k++) {
			snprintf(kernel, sizeof(kernel), "k%zu_%zu", i, k);
			cr_assert_str_eq(cp_fold_bound__kernel(&bound, at, kernel), k < 50 ? kernel : "other");
		}
	}
	cr_assert_eq(own, 500);
	cr_assert_eq(bound.cgroup_count, 500);
	for (i = 0; i < bound.cgroup_count; i++)
		cr_assert_eq(bound.cgroups[i].kernel_count, 50);
	cp_fold_bound__release(&bound);
}
