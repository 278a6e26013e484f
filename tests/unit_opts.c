// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Options structs across releases (libbpf's OPTS rule): a caller built
 * against an older, smaller struct is accepted with the fields it lacks
 * zero; a newer, larger one only when everything this library does not
 * know is zero; sz 0 never. First the one helper every __open/__new/__start
 * uses (cp_opts__copy), then the public functions themselves, on paths that
 * need no BPF.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cuprobe_internal.h"

/* One options struct in three releases: the library knows v2. */
struct opts_v1 {
	size_t sz;
	int a;
};

struct opts_v2 {
	size_t sz;
	int a;
	int b;
	uint64_t c;
};

struct opts_v3 {
	size_t sz;
	int a;
	int b;
	uint64_t c;
	uint64_t d;
};

/* A library-side struct full of garbage: the copy must overwrite every byte. */
static void scribble(struct opts_v2 *local)
{
	memset(local, 0xa5, sizeof(*local));
}

Test(opts, exact_size_is_copied)
{
	CP_OPTS(opts_v2, caller, .a = 1, .b = 2, .c = 3);
	struct opts_v2 local;

	scribble(&local);
	cr_assert_eq(CP_OPTS_COPY(local, &caller), 0);
	cr_assert_eq(local.sz, sizeof(struct opts_v2));
	cr_assert_eq(local.a, 1);
	cr_assert_eq(local.b, 2);
	cr_assert_eq(local.c, 3);
}

Test(opts, older_smaller_size_reads_the_rest_as_zero)
{
	CP_OPTS(opts_v1, old, .a = 7);
	struct opts_v2 local;

	cr_assert_eq(old.sz, sizeof(struct opts_v1));
	scribble(&local);
	cr_assert_eq(CP_OPTS_COPY(local, &old), 0);
	cr_assert_eq(local.sz, sizeof(struct opts_v2));
	cr_assert_eq(local.a, 7);
	cr_assert_eq(local.b, 0);
	cr_assert_eq(local.c, 0);
}

Test(opts, bytes_beyond_a_smaller_size_are_never_read)
{
	/* Set in memory, but past the sz the caller declared: not the caller's fields. */
	CP_OPTS(opts_v2, caller, .a = 1, .b = 2, .c = 3);
	struct opts_v2 local;

	caller.sz = offsetof(struct opts_v2, b);
	scribble(&local);
	cr_assert_eq(CP_OPTS_COPY(local, &caller), 0);
	cr_assert_eq(local.a, 1);
	cr_assert_eq(local.b, 0);
	cr_assert_eq(local.c, 0);
}

Test(opts, larger_size_with_a_zero_tail_is_accepted)
{
	CP_OPTS(opts_v3, newer, .a = 1, .b = 2, .c = 3, .d = 0);
	struct opts_v2 local;

	scribble(&local);
	cr_assert_eq(CP_OPTS_COPY(local, &newer), 0);
	cr_assert_eq(local.sz, sizeof(struct opts_v2));
	cr_assert_eq(local.a, 1);
	cr_assert_eq(local.b, 2);
	cr_assert_eq(local.c, 3);
}

Test(opts, larger_size_with_a_non_zero_tail_is_refused)
{
	CP_OPTS(opts_v3, newer, .a = 1, .d = 1);
	struct opts_v2 local;

	cr_assert_eq(CP_OPTS_COPY(local, &newer), -EINVAL);
	/* The last byte alone counts too. */
	newer.d = 1ull << 63;
	cr_assert_eq(CP_OPTS_COPY(local, &newer), -EINVAL);
}

Test(opts, size_zero_or_too_small_for_sz_is_refused)
{
	CP_OPTS(opts_v2, caller, .a = 1);
	struct opts_v2 local;

	caller.sz = 0;
	cr_assert_eq(CP_OPTS_COPY(local, &caller), -EINVAL);
	caller.sz = sizeof(size_t) - 1;
	cr_assert_eq(CP_OPTS_COPY(local, &caller), -EINVAL);
	/* Exactly sz: an empty struct of the oldest release. */
	caller.sz = sizeof(size_t);
	scribble(&local);
	cr_assert_eq(CP_OPTS_COPY(local, &caller), 0);
	cr_assert_eq(local.a, 0);
}

Test(opts, null_means_all_zero)
{
	struct opts_v2 local;

	scribble(&local);
	cr_assert_eq(CP_OPTS_COPY(local, NULL), 0);
	cr_assert_eq(local.sz, sizeof(struct opts_v2));
	cr_assert_eq(local.a, 0);
	cr_assert_eq(local.b, 0);
	cr_assert_eq(local.c, 0);
}

/* ---- the public functions: each takes its opts through the helper -------------- */

static int ignore_event(void *ctx, const union cp_event *event)
{
	return 0;
}

/* A struct of the next release: one more field than this library knows. */
#define NEWER(TYPE) struct { struct TYPE known; uint64_t added; }

Test(opts, tracer_open_refuses_what_it_cannot_read)
{
	CP_OPTS(cp_tracer_opts, opts);
	NEWER(cp_tracer_opts) newer;

	opts.sz = 0;
	errno = 0;
	cr_assert_null(cp_tracer__open(&opts));
	cr_assert_eq(errno, EINVAL);

	memset(&newer, 0, sizeof(newer));
	newer.known.sz = sizeof(newer);
	newer.added = 1;
	errno = 0;
	cr_assert_null(cp_tracer__open(&newer.known));
	cr_assert_eq(errno, EINVAL);
}

Test(opts, agent_new_refuses_what_it_cannot_read)
{
	CP_OPTS(cp_agent_opts, opts, .on_event = ignore_event);
	NEWER(cp_agent_opts) newer;
	int fd = eventfd(0, EFD_CLOEXEC);

	cr_assert_geq(fd, 0);
	opts.sz = 0;
	errno = 0;
	cr_assert_null(cp_agent__new(fd, &opts));
	cr_assert_eq(errno, EINVAL);

	memset(&newer, 0, sizeof(newer));
	newer.known.sz = sizeof(newer);
	newer.known.on_event = ignore_event;
	newer.added = 1;
	errno = 0;
	cr_assert_null(cp_agent__new(fd, &newer.known));
	cr_assert_eq(errno, EINVAL);
	close(fd);
}

/*
 * cp_self_trace__start reads its options before anything else: accepted
 * options get as far as looking for libcuda.so.1 in this process's maps,
 * which has none (ENOENT); refused ones stop at EINVAL.
 */
static int self_trace_errno(const struct cp_self_trace_opts *opts)
{
	struct cp_self_trace *self;

	errno = 0;
	self = cp_self_trace__start(opts);
	cr_assert_null(self, "this process maps no CUDA driver");
	return errno;
}

Test(opts, self_trace_start_takes_older_and_newer_structs)
{
	CP_OPTS(cp_self_trace_opts, opts, .on_event = ignore_event);
	NEWER(cp_self_trace_opts) newer;

	cr_assert_eq(self_trace_errno(&opts), ENOENT, "exact size accepted");

	/* An older caller's struct: on_event and ctx only. */
	opts.sz = offsetof(struct cp_self_trace_opts, ring_bytes);
	cr_assert_eq(self_trace_errno(&opts), ENOENT, "older size accepted");

	memset(&newer, 0, sizeof(newer));
	newer.known.sz = sizeof(newer);
	newer.known.on_event = ignore_event;
	cr_assert_eq(self_trace_errno(&newer.known), ENOENT, "larger size, zero tail accepted");
	newer.added = 1;
	cr_assert_eq(self_trace_errno(&newer.known), EINVAL, "larger size, non-zero tail refused");

	opts.sz = 0;
	cr_assert_eq(self_trace_errno(&opts), EINVAL, "size 0 refused");
	cr_assert_eq(self_trace_errno(NULL), EINVAL, "no on_event");
}
