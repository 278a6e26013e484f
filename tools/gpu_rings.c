// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe run's device rings. The GPU agent is woken by the BPF ring buffer
 * (the session's epoll on its fd): a record that proves kernels done means
 * every record those kernels committed is in the device ring now, so it is
 * read then, and at each process exit; nothing polls, and nothing runs in
 * COMMAND. The memory is the kernel map's, so a process that exits,
 * crashes or unmaps it cannot take it from under this reader.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/gpu_ring.h"
#include "gpu_rings.h"
#include "warnings.h"

int cp_run_gpu_rings__open(struct cp_run_gpu_rings *r, struct cp_session *session,
			   enum cp_format format)
{
	int err;

	r->session = session;
	r->format = format;
	err = cp_gpu_rings__open(session->program, &r->rings, &r->count);
	if (!err && !(r->abandon_below = calloc(r->count ? r->count : 1, sizeof(uint64_t))))
		err = -ENOMEM;
	if (err) {
		cp_say("cannot map the device rings: %s", strerror(-err));
		return CP_EXIT_SETUP;
	}
	return 0;
}

struct print_ctx {
	struct cp_run_gpu_rings *r;
	const struct cp_btf_names *names;
};

static int print_record(void *arg, const struct cp_gpu_ring *ring, uint64_t launch_seq,
			const void *record, size_t size)
{
	struct print_ctx *p = arg;
	struct cp_run_gpu_rings *r = p->r;
	struct cp_gpu_ring_info info;

	if (r->failed)
		return 0; /* still read and given back: the GPU is not kept waiting */
	cp_gpu_ring__info(ring, &info);
	cp_text__clear(&r->text);
	cp_format__device_record(&r->text, r->format, cp_program__btf(r->session->program),
				 info.name, info.record_type_id, launch_seq, record, size, p->names);
	if (!cp_session__write_text(r->session, &r->session->output, &r->text, false))
		r->failed = true;
	return 0;
}

/* Every ring read; slots below limit (per ring; NULL: none) still not committed are abandoned. */
static void drain_all(struct cp_run_gpu_rings *r, const uint64_t *limit, uint64_t all)
{
	struct cp_btf_names names = { .names = r->session->names,
				      .symbolizer = r->session->symbolizer,
				      .tracer = r->session->tracer };
	struct print_ctx p = { .r = r, .names = &names };
	uint64_t read = 0;
	size_t i;

	for (i = 0; i < r->count; i++)
		read += cp_gpu_ring__drain(r->rings[i], limit ? limit[i] : all, print_record, &p);
	if (read && !r->failed && !cp_session__write_text(r->session, &r->session->output,
							  &(struct cp_text){ 0 }, true))
		r->failed = true;
}

static bool is_in(const uint32_t *pids, size_t count, uint32_t pid, size_t *at)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (pids[i] == pid) {
			*at = i;
			return true;
		}
	return false;
}

/* A process that may write the rings now, unless it already exited (a late report). */
static void note_live(struct cp_run_gpu_rings *r, uint32_t pid)
{
	size_t at, kept = r->exited_count < 64 ? r->exited_count : 64;
	uint32_t *grown;

	if (is_in(r->live, r->live_count, pid, &at) || is_in(r->exited, kept, pid, &at))
		return;
	if (r->live_count == r->live_capacity) {
		size_t capacity = r->live_capacity ? 2 * r->live_capacity : 16;

		grown = realloc(r->live, capacity * sizeof(*grown));
		if (!grown)
			return; /* it only makes abandoned slots wait longer, for the end at most */
		r->live = grown;
		r->live_capacity = capacity;
	}
	r->live[r->live_count++] = pid;
}

void cp_run_gpu_rings__instrumented(void *arg, uint32_t pid)
{
	struct cp_run_gpu_rings *r = arg;

	if (r->count)
		note_live(r, pid);
}

void cp_run_gpu_rings__observe(struct cp_run_gpu_rings *r, const union cp_event *event)
{
	size_t at, i;

	if (!r->count)
		return;
	if (event->hdr.type == CP_EV_SYNC) {
		/* A query proves nothing unless the work was complete. */
		if ((event->sync.kind == CP_SYNC_QUERY_STREAM || event->sync.kind == CP_SYNC_QUERY_EVENT) &&
		    event->sync.result != 0)
			return;
		note_live(r, event->hdr.pid);
		drain_all(r, r->abandon_below, 0);
		memset(r->abandon_below, 0, r->count * sizeof(*r->abandon_below));
	} else if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT) {
		if (!is_in(r->live, r->live_count, event->hdr.pid, &at)) {
			drain_all(r, NULL, 0); /* a process that never wrote: what is committed */
			return;
		}
		r->live[at] = r->live[--r->live_count];
		r->exited[r->exited_count++ % 64] = event->hdr.pid;
		drain_all(r, r->abandon_below, 0);
		/*
		 * Its kernels are over. With no other writer left, a slot it
		 * reserved and never committed stays so: abandoned at the next
		 * sync or exit (a slot of a process that started since is
		 * committed by its next sync).
		 */
		for (i = 0; i < r->count; i++)
			r->abandon_below[i] = r->live_count ? 0 : cp_gpu_ring__head(r->rings[i]);
	}
}

/* The end of a run: every ring read, its counts said, per launch in JSON. */
bool cp_run_gpu_rings__finish(struct cp_run_gpu_rings *r)
{
	bool losses = false;
	size_t i, j;

	if (!r->count)
		return false;
	drain_all(r, NULL, UINT64_MAX); /* COMMAND is gone: nothing reserved will be committed */
	for (i = 0; i < r->count; i++) {
		struct cp_device_ring_summary summary;
		struct cp_gpu_ring_counts counts;
		struct cp_gpu_ring_info info;

		cp_gpu_ring__info(r->rings[i], &info);
		cp_gpu_ring__counts(r->rings[i], &counts);
		losses |= cp_warnings__device_ring(stderr, info.name, info.capacity, &counts) > 1;
		if (r->format != CP_FORMAT_JSON || r->failed)
			continue;
		summary = (struct cp_device_ring_summary){
			.ring = info.name, .produced = counts.produced, .delivered = counts.delivered,
			.lost = counts.lost, .abandoned = counts.abandoned, .pending = counts.pending,
			.launch_count = cp_gpu_ring__launch_count(r->rings[i]) };
		summary.launches = calloc(summary.launch_count ? summary.launch_count : 1,
					  sizeof(*summary.launches));
		if (!summary.launches) {
			cp_say("out of memory: device ring %s: no per-launch counts", info.name);
			summary.launch_count = 0;
		}
		for (j = 0; j < summary.launch_count; j++)
			cp_gpu_ring__launch(r->rings[i], j, &summary.launches[j].launch_seq,
					    &summary.launches[j].delivered, &summary.launches[j].lost);
		cp_text__clear(&r->text);
		cp_format__device_ring_summary(&r->text, &summary);
		if (!cp_session__write_text(r->session, &r->session->output, &r->text, true))
			r->failed = true;
		free(summary.launches);
	}
	return losses;
}

void cp_run_gpu_rings__close(struct cp_run_gpu_rings *r)
{
	cp_gpu_rings__close(r->rings, r->count);
	r->rings = NULL;
	r->count = 0;
	cp_text__free(&r->text);
	free(r->live);
	r->live = NULL;
	free(r->abandon_below);
	r->abandon_below = NULL;
}
