/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the two interposers (preload_ring.c, cupti_subscriber.c) do alike
 * around their ring (shm_ring.h): a producer stamps each record's header the
 * same way, and a consumer delivers each record the same way (copies it out,
 * times it, counts it), so that they cost the same where they are compared.
 */
#ifndef CP_INTERPOSER_H
#define CP_INTERPOSER_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cp_bench_stats.h"
#include "shm_ring.h"

static __thread uint32_t cp_interposer_tid __attribute__((tls_model("initial-exec")));

/* The calling thread's id, asked of the kernel once per thread. */
static inline uint32_t cp_interposer__tid(void)
{
	if (!cp_interposer_tid)
		cp_interposer_tid = (uint32_t)syscall(SYS_gettid);
	return cp_interposer_tid;
}

/*
 * A slot of seg for a record of type and api by process pid, its header
 * stamped (the calling thread, now); NULL, counted lost, when the ring is
 * full. The rest of the record is the caller's to write.
 */
static inline union cp_shm_record *cp_interposer__begin(struct cp_shm_segment *seg, struct cp_shm_slot **slot,
							uint64_t *pos, enum cp_event_type type,
							enum cp_api api, uint32_t pid)
{
	union cp_shm_record *record;

	*slot = cp_shm__reserve(seg, pos);
	if (!*slot)
		return NULL;
	record = &(*slot)->record;
	record->hdr.type = type;
	record->hdr.api = api;
	record->hdr.pid = pid;
	record->hdr.tid = cp_interposer__tid();
	record->hdr.time_ns = cp_bench_now_ns();
	return record;
}

/* What a consumer counts: written by the consumer thread only, read once it is done. */
struct cp_interposer_delivery {
	struct cp_bench_hist hist;      /* latency: consumer clock - record time_ns */
	_Atomic uint64_t delivered;
	uint64_t by_type[CP_EV_TYPE_MAX];
};

static inline void cp_interposer__deliver(struct cp_interposer_delivery *d, const struct cp_shm_slot *slot)
{
	union cp_shm_record record;
	size_t size = slot->size < sizeof(record) ? slot->size : sizeof(record);
	uint64_t now;

	memcpy(&record, &slot->record, size);
	now = cp_bench_now_ns();
	cp_bench_hist_add(&d->hist, now > record.hdr.time_ns ? now - record.hdr.time_ns : 0);
	if (record.hdr.type < CP_EV_TYPE_MAX)
		d->by_type[record.hdr.type]++;
	atomic_store_explicit(&d->delivered, atomic_load_explicit(&d->delivered, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* CPU time of clock (CLOCK_THREAD_CPUTIME_ID, or a thread's clock), ns; 0 when unreadable. */
static inline uint64_t cp_interposer__cpu_ns(clockid_t clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* CP_INTERPOSER_H */
