// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * NCCL calls by the seq their launches carry (cp_launch_event.nccl_call):
 * a bounded table of the recent calls that own launches, a collective or
 * send/recv by its own seq, a group by the group's, so that a kernel's
 * bound on the timeline can be joined to the collective it was the work of
 * after the fact (the Perfetto writer's collective slices, stats' GPU time
 * per communicator and op). A group's calls come before its ncclGroupEnd's
 * record (each is written when it returns): they are summed into the group
 * as they come.
 */
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"

#define DEFAULT_MAX 65536

struct cp_nccl_calls {
	void *tree;                   /* tsearch tree of struct cp_nccl_call */
	struct cp_nccl_call **ring;   /* in the order made, for the oldest to go first */
	size_t max, head, count;
	uint64_t evicted;
};

static int by_link(const void *a, const void *b)
{
	const struct cp_nccl_call *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->link < y->link ? -1 : x->link > y->link;
}

struct cp_nccl_calls *cp_nccl_calls__new(size_t max)
{
	struct cp_nccl_calls *calls = calloc(1, sizeof(*calls));

	if (!calls)
		return NULL;
	calls->max = max ? max : DEFAULT_MAX;
	calls->ring = calloc(calls->max, sizeof(*calls->ring));
	if (!calls->ring) {
		free(calls);
		return NULL;
	}
	return calls;
}

/* Out of the tree (the ring slot is cleared by the caller). */
static void drop(struct cp_nccl_calls *calls, struct cp_nccl_call *call)
{
	tdelete(call, &calls->tree, by_link);
	free(call);
}

void cp_nccl_calls__free(struct cp_nccl_calls *calls)
{
	size_t i;

	if (!calls)
		return;
	for (i = 0; i < calls->max; i++)
		if (calls->ring[i])
			drop(calls, calls->ring[i]);
	free(calls->ring);
	free(calls);
}

struct cp_nccl_call *cp_nccl_calls__find(struct cp_nccl_calls *calls, uint32_t pid, uint32_t link)
{
	struct cp_nccl_call key = { .pid = pid, .link = link }, **found;

	if (!calls || !link)
		return NULL;
	found = tfind(&key, &calls->tree, by_link);
	return found ? *found : NULL;
}

/* The call of (pid, link), made when new (the oldest going when the table is full). */
static struct cp_nccl_call *call_of(struct cp_nccl_calls *calls, uint32_t pid, uint32_t link)
{
	struct cp_nccl_call *call = cp_nccl_calls__find(calls, pid, link), **slot;

	if (call)
		return call;
	slot = &calls->ring[(calls->head + calls->count) % calls->max];
	if (calls->count == calls->max) {
		drop(calls, calls->ring[calls->head]);
		calls->ring[calls->head] = NULL;
		calls->head = (calls->head + 1) % calls->max;
		calls->count--;
		calls->evicted++;
		slot = &calls->ring[(calls->head + calls->count) % calls->max];
	}
	call = calloc(1, sizeof(*call));
	if (!call)
		return NULL;
	call->pid = pid;
	call->link = link;
	call->op = CP_NCCL_GROUP_END;
	if (!tsearch(call, &calls->tree, by_link)) {
		free(call);
		return NULL;
	}
	*slot = call;
	calls->count++;
	return call;
}

void cp_nccl_calls__observe(struct cp_nccl_calls *calls, const union cp_event *event)
{
	const struct cp_nccl_event *e = &event->nccl;
	struct cp_nccl_call *call;

	if (!calls || event->hdr.type != CP_EV_NCCL)
		return;
	if (CP_NCCL_MOVES_DATA(e->op) && e->launches) {
		/* Its own work: launched inside the call (grouped or not). */
		call = call_of(calls, e->hdr.pid, e->seq);
		if (!call)
			return;
		call->op = e->op;
		call->comm = e->comm;
		call->bytes = e->bytes;
		call->calls = 1;
	} else if (CP_NCCL_MOVES_DATA(e->op) && e->group && e->group != e->seq) {
		/* A call of a group: summed into the group, whose end launches its work. */
		call = call_of(calls, e->hdr.pid, e->group);
		if (!call)
			return;
		if (!call->calls) {
			call->op = e->op;
			call->comm = e->comm;
		}
		if (call->op != e->op)
			call->op = CP_NCCL_GROUP_END; /* several operations */
		if (call->comm != e->comm)
			call->comm = 0;               /* several communicators */
		call->calls++;
		call->bytes += e->bytes;
		return;
	} else if (e->op == CP_NCCL_GROUP_END && (e->flags & CP_NCCL_GROUP_OUTERMOST)) {
		call = e->launches ? call_of(calls, e->hdr.pid, e->group) :
		       cp_nccl_calls__find(calls, e->hdr.pid, e->group);
		if (call && !e->launches) {
			/* Its calls launched their own work, or none: nothing to join. */
			cp_nccl_calls__forget(calls, call);
			return;
		}
		if (!call)
			return;
	} else {
		return;
	}
	call->record = *e;
	call->recorded = true;
	call->launches = e->launches;
}

struct cp_nccl_call *cp_nccl_calls__kernel(struct cp_nccl_calls *calls,
					   const struct cp_gpu_interval *interval)
{
	struct cp_nccl_call *call;

	if (!interval->nccl_call)
		return NULL;
	call = cp_nccl_calls__find(calls, interval->pid, interval->nccl_call);
	if (!call)
		return NULL;
	if (!call->kernels_seen++) {
		call->kernel_stream = interval->stream;
		call->kernel_device = interval->device;
		call->kernel_api = interval->api;
		call->kernel_tid = interval->tid;
	}
	if (interval->evidence == CP_DONE_NONE)
		return call;
	call->kernels_bounded++;
	if (!call->gpu_start_ns || interval->start_after_ns < call->gpu_start_ns)
		call->gpu_start_ns = interval->start_after_ns;
	if (interval->done_by_ns > call->gpu_end_ns)
		call->gpu_end_ns = interval->done_by_ns;
	return call;
}

void cp_nccl_calls__forget(struct cp_nccl_calls *calls, struct cp_nccl_call *call)
{
	size_t i, at;

	if (!calls || !call)
		return;
	/* Its ring slot: the table is small next to the work a call stands for. */
	for (i = 0; i < calls->count; i++) {
		at = (calls->head + i) % calls->max;
		if (calls->ring[at] != call)
			continue;
		/* Close the gap, keeping the order. */
		for (; i + 1 < calls->count; i++) {
			size_t next = (calls->head + i + 1) % calls->max;

			calls->ring[(calls->head + i) % calls->max] = calls->ring[next];
		}
		calls->ring[(calls->head + calls->count - 1) % calls->max] = NULL;
		calls->count--;
		break;
	}
	drop(calls, call);
}

void cp_nccl_calls__forget_pid(struct cp_nccl_calls *calls, uint32_t pid)
{
	size_t i, kept = 0;
	struct cp_nccl_call **order;

	if (!calls || !calls->count)
		return;
	order = malloc(calls->count * sizeof(*order));
	if (!order)
		return;
	for (i = 0; i < calls->count; i++) {
		struct cp_nccl_call *call = calls->ring[(calls->head + i) % calls->max];

		calls->ring[(calls->head + i) % calls->max] = NULL;
		if (call->pid == pid)
			drop(calls, call);
		else
			order[kept++] = call;
	}
	for (i = 0; i < kept; i++)
		calls->ring[(calls->head + i) % calls->max] = order[i];
	calls->count = kept;
	free(order);
}

size_t cp_nccl_calls__each(struct cp_nccl_calls *calls, cp_nccl_call_fn fn, void *ctx)
{
	size_t i;

	for (i = 0; calls && i < calls->count; i++)
		fn(ctx, calls->ring[(calls->head + i) % calls->max]);
	return calls ? calls->count : 0;
}

uint64_t cp_nccl_calls__evicted(const struct cp_nccl_calls *calls)
{
	return calls ? calls->evicted : 0;
}
