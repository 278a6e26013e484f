// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * NCCL calls joined to their kernels (userspace/nccl.c) fed records and
 * intervals by hand: a collective by its seq, a group by its group's, its
 * calls summed; a kernel's bound added to its call; the table's bound.
 * And the communicator id: NCCL's hash of a ncclUniqueId
 * (bpf/cuprobe_nccl_hash.h) against values worked out from NCCL's getHash.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "cuprobe_internal.h"
#include "cuprobe_nccl_hash.h"
#include "helpers.h"

#define PID 4242u

static union cp_event nccl(uint32_t op, uint32_t seq, uint32_t group, uint64_t comm, uint64_t bytes,
			   uint32_t launches)
{
	union cp_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = CP_EV_NCCL;
	ev.hdr.pid = PID;
	ev.nccl.op = op;
	ev.nccl.seq = seq;
	ev.nccl.group = group;
	ev.nccl.comm = comm;
	ev.nccl.bytes = bytes;
	ev.nccl.launches = launches;
	return ev;
}

static struct cp_gpu_interval kernel(uint32_t link, uint64_t start, uint64_t end)
{
	struct cp_gpu_interval interval = {
		.pid = PID, .nccl_call = link, .stream = 0x10, .start_after_ns = start,
		.done_by_ns = end, .evidence = end ? CP_DONE_STREAM_SYNC : CP_DONE_NONE,
	};

	return interval;
}

Test(nccl_calls, a_collective_and_its_kernels)
{
	struct cp_nccl_calls *calls = cp_nccl_calls__new(0);
	union cp_event ev = nccl(CP_NCCL_ALL_REDUCE, 5, 0, 0xc0, 4096, 2);
	struct cp_gpu_interval k1 = kernel(5, 100, 300), k2 = kernel(5, 200, 500);
	struct cp_nccl_call *call;

	cr_assert_not_null(calls);
	cp_nccl_calls__observe(calls, &ev);
	call = cp_nccl_calls__find(calls, PID, 5);
	cr_assert_not_null(call);
	cr_assert(call->recorded);
	cr_assert_eq(call->op, CP_NCCL_ALL_REDUCE);
	cr_assert_eq(call->launches, 2);
	cr_assert_eq(cp_nccl_calls__kernel(calls, &k1), call);
	cr_assert_eq(cp_nccl_calls__kernel(calls, &k2), call);
	cr_assert_eq(call->kernels_seen, 2);
	cr_assert_eq(call->kernels_bounded, 2);
	cr_assert_eq(call->gpu_start_ns, 100);
	cr_assert_eq(call->gpu_end_ns, 500);
	cr_assert_null(cp_nccl_calls__find(calls, PID + 1, 5), "another process's seq");
	cp_nccl_calls__forget(calls, call);
	cr_assert_null(cp_nccl_calls__find(calls, PID, 5));
	/* A collective that launched nothing (its group's end did) is no owner. */
	ev = nccl(CP_NCCL_BROADCAST, 9, 0, 0xc0, 64, 0);
	cp_nccl_calls__observe(calls, &ev);
	cr_assert_null(cp_nccl_calls__find(calls, PID, 9));
	cp_nccl_calls__free(calls);
}

Test(nccl_calls, a_group_sums_its_calls_under_the_groups_seq)
{
	struct cp_nccl_calls *calls = cp_nccl_calls__new(0);
	union cp_event a = nccl(CP_NCCL_ALL_REDUCE, 11, 10, 0xc0, 100, 0);
	union cp_event b = nccl(CP_NCCL_ALL_REDUCE, 12, 10, 0xc0, 200, 0);
	union cp_event inner_end = nccl(CP_NCCL_GROUP_END, 13, 10, 0, 0, 0);
	union cp_event end = nccl(CP_NCCL_GROUP_END, 14, 10, 0, 0, 1);
	union cp_event other = nccl(CP_NCCL_SEND, 21, 20, 0xc1, 8, 0);
	union cp_event mixed = nccl(CP_NCCL_RECV, 22, 20, 0xc2, 8, 0);
	union cp_event empty_end = nccl(CP_NCCL_GROUP_END, 23, 20, 0, 0, 0);
	struct cp_nccl_call *call;

	end.nccl.flags = CP_NCCL_GROUP_OUTERMOST;
	empty_end.nccl.flags = CP_NCCL_GROUP_OUTERMOST;
	cp_nccl_calls__observe(calls, &a);
	cp_nccl_calls__observe(calls, &b);
	cp_nccl_calls__observe(calls, &inner_end); /* not the outermost: nothing yet */
	call = cp_nccl_calls__find(calls, PID, 10);
	cr_assert_not_null(call);
	cr_assert_not(call->recorded);
	cp_nccl_calls__observe(calls, &end);
	cr_assert(call->recorded);
	cr_assert_eq(call->calls, 2);
	cr_assert_eq(call->bytes, 300);
	cr_assert_eq(call->op, CP_NCCL_ALL_REDUCE, "one op: the group's is that op");
	cr_assert_eq(call->comm, 0xc0, "one communicator: the group's is that one");
	cr_assert_eq(call->launches, 1);
	/* Several ops and communicators: the group as such; an end that launched nothing goes. */
	cp_nccl_calls__observe(calls, &other);
	cp_nccl_calls__observe(calls, &mixed);
	call = cp_nccl_calls__find(calls, PID, 20);
	cr_assert_eq(call->op, CP_NCCL_GROUP_END);
	cr_assert_eq(call->comm, 0);
	cp_nccl_calls__observe(calls, &empty_end);
	cr_assert_null(cp_nccl_calls__find(calls, PID, 20));
	cp_nccl_calls__free(calls);
}

Test(nccl_calls, bounded_the_oldest_go_first_and_a_process_is_forgotten)
{
	struct cp_nccl_calls *calls = cp_nccl_calls__new(4);
	struct cp_gpu_interval unbounded = kernel(6, 0, 0);
	union cp_event ev;
	uint32_t seq;

	for (seq = 1; seq <= 6; seq++) {
		ev = nccl(CP_NCCL_ALL_REDUCE, seq, 0, 0xc0, 8, 1);
		cp_nccl_calls__observe(calls, &ev);
	}
	cr_assert_eq(cp_nccl_calls__evicted(calls), 2);
	cr_assert_null(cp_nccl_calls__find(calls, PID, 1));
	cr_assert_null(cp_nccl_calls__find(calls, PID, 2));
	cr_assert_not_null(cp_nccl_calls__find(calls, PID, 3));
	/* A kernel with no bound is seen, not bounded. */
	cr_assert_eq(cp_nccl_calls__kernel(calls, &unbounded)->kernels_bounded, 0);
	cr_assert_eq(cp_nccl_calls__find(calls, PID, 6)->kernels_seen, 1);
	/* Forgetting one from the middle keeps the order of the rest. */
	cp_nccl_calls__forget(calls, cp_nccl_calls__find(calls, PID, 4));
	ev = nccl(CP_NCCL_ALL_REDUCE, 7, 0, 0xc0, 8, 1);
	cp_nccl_calls__observe(calls, &ev);
	ev = nccl(CP_NCCL_ALL_REDUCE, 8, 0, 0xc0, 8, 1);
	cp_nccl_calls__observe(calls, &ev);
	cr_assert_null(cp_nccl_calls__find(calls, PID, 3), "the oldest went");
	cr_assert_not_null(cp_nccl_calls__find(calls, PID, 5));
	cp_nccl_calls__forget_pid(calls, PID);
	cr_assert_null(cp_nccl_calls__find(calls, PID, 8));
	cp_nccl_calls__free(calls);
}

/* The hash of 128 id bytes, word by word as the probe reads them. */
static uint64_t id_hash(const unsigned char id[CP_NCCL_UNIQUE_ID_BYTES])
{
	struct cp_nccl_hash h;
	uint64_t word;
	size_t i;

	cp_nccl_hash_begin(&h, CP_NCCL_UNIQUE_ID_BYTES);
	for (i = 0; i < CP_NCCL_UNIQUE_ID_BYTES; i += 8) {
		memcpy(&word, id + i, sizeof(word));
		cp_nccl_hash_word(&h, word);
	}
	return cp_nccl_hash_end(&h);
}

/*
 * Expected values worked out from NCCL's getHash (its bitops.h) apart from
 * cuprobe: acc = {1, 1}; acc[0] ^= 128; per 8 bytes (little-endian) mix
 * then add; digest. Byte i of the second id is (37 i + 0x80) mod 256,
 * half of them 0x80 or more, where a signed char would change the sum:
 * the old hashUniqueId of the same bytes, 0x33d64fb4c8961eb7, is not it.
 */
Test(nccl_id, hash_is_nccls_get_hash_of_the_unique_id)
{
	unsigned char id[CP_NCCL_UNIQUE_ID_BYTES] = { 0 };
	size_t i;

	cr_assert_eq(id_hash(id), 0xcc976ec6c24bb53cull, "all zero: 0x%llx",
		     (unsigned long long)id_hash(id));
	for (i = 0; i < sizeof(id); i++)
		id[i] = (unsigned char)(37 * i + 0x80);
	cr_assert_eq(id[0], 0x80);
	cr_assert_eq(id[1], 0xa5);
	cr_assert_eq(id_hash(id), 0x6cae82980cb42130ull, "0x%llx", (unsigned long long)id_hash(id));
	cr_assert_neq(id_hash(id), 0x33d64fb4c8961eb7ull);
}
