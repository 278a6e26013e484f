/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A shared-memory ring of cuprobe records (bpf/cuprobe_events.h layouts),
 * for the in-process contenders of the comparison bench: many producers
 * (the traced CUDA calls, on any thread) and one consumer thread.
 *
 * It is a bounded MPMC queue in Vyukov's style used with one consumer:
 * every slot has a sequence number; a producer claims slot `pos` with a CAS
 * on head when seq == pos and publishes with seq = pos + 1 (release); the
 * consumer takes it when seq == tail + 1 and hands it back with
 * seq = tail + slots. A full ring refuses the record and counts it lost,
 * like bpf_ringbuf_reserve failing.
 *
 * The segment lives in /dev/shm (shm_open + mmap MAP_SHARED), the way
 * injected userspace runtimes share their rings with an outside agent.
 * `flag` and `consumer_waiting` are the two wakeup protocols the designs use:
 * a polled "records pending" flag, or a "consumer is asleep, write the
 * eventfd" handshake.
 */
#ifndef CP_SHM_RING_H
#define CP_SHM_RING_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuprobe_events.h"

#define CP_SHM_SLOT_BYTES 128u
#define CP_SHM_SLOTS      65536u /* 8 MiB of slots: the size of cuprobe's default ring */
#define CP_SHM_MAGIC      0x63707368u /* "cpsh" */

union cp_shm_record {
	struct cp_event_header hdr;
	struct cp_launch_event launch;
	struct cp_alloc_event alloc;
	struct cp_free_event free;
	struct cp_copy_event copy;
	struct cp_sync_event sync;
	unsigned char bytes[CP_SHM_SLOT_BYTES - 16];
};

struct cp_shm_slot {
	_Atomic uint64_t seq;
	uint64_t size;
	union cp_shm_record record;
};

_Static_assert(sizeof(struct cp_shm_slot) == CP_SHM_SLOT_BYTES, "slot size");

struct cp_shm_segment {
	uint32_t magic;
	uint32_t slots;
	_Alignas(64) _Atomic uint64_t head;         /* next position producers claim */
	_Alignas(64) _Atomic uint64_t tail;         /* next position the consumer reads */
	_Alignas(64) _Atomic uint32_t flag;         /* poll1ms: set by producers, cleared by the watcher */
	_Atomic uint32_t consumer_waiting;          /* eventfd: the consumer is (about to be) asleep */
	_Atomic uint64_t produced;                  /* records tried */
	_Atomic uint64_t lost;                      /* records refused: ring full */
	_Alignas(64) struct cp_shm_slot slot[];
};

static inline uint64_t cp_shm_segment__bytes(uint32_t slots)
{
	return sizeof(struct cp_shm_segment) + (uint64_t)slots * sizeof(struct cp_shm_slot);
}

static inline void cp_shm_segment__init(struct cp_shm_segment *seg, uint32_t slots)
{
	uint32_t i;

	seg->magic = CP_SHM_MAGIC;
	seg->slots = slots;
	for (i = 0; i < slots; i++)
		atomic_store_explicit(&seg->slot[i].seq, i, memory_order_relaxed);
	atomic_store_explicit(&seg->head, 0, memory_order_relaxed);
	atomic_store_explicit(&seg->tail, 0, memory_order_release);
}

/* Claims a slot, or NULL (counted lost) when the ring is full. */
/*
 * Creates, sizes, maps and initializes the named segment; NULL on any
 * failure (the name is unlinked again). *bytes gets the mapped size.
 */
static inline struct cp_shm_segment *cp_shm_segment__create(const char *name, uint32_t slots,
							    uint64_t *bytes)
{
	struct cp_shm_segment *seg;
	int fd;

	*bytes = cp_shm_segment__bytes(slots);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)*bytes)) {
		close(fd);
		shm_unlink(name);
		return NULL;
	}
	seg = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (seg == MAP_FAILED) {
		shm_unlink(name);
		return NULL;
	}
	cp_shm_segment__init(seg, slots);
	return seg;
}

static inline struct cp_shm_slot *cp_shm__reserve(struct cp_shm_segment *seg, uint64_t *pos_out)
{
	uint64_t pos = atomic_load_explicit(&seg->head, memory_order_relaxed);

	atomic_fetch_add_explicit(&seg->produced, 1, memory_order_relaxed);
	for (;;) {
		struct cp_shm_slot *slot = &seg->slot[pos & (seg->slots - 1)];
		uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
		int64_t diff = (int64_t)(seq - pos);

		if (diff == 0) {
			if (atomic_compare_exchange_weak_explicit(&seg->head, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				*pos_out = pos;
				return slot;
			}
		} else if (diff < 0) {
			atomic_fetch_add_explicit(&seg->lost, 1, memory_order_relaxed);
			return NULL;
		} else {
			pos = atomic_load_explicit(&seg->head, memory_order_relaxed);
		}
	}
}

static inline void cp_shm__commit(struct cp_shm_slot *slot, uint64_t pos, uint64_t size)
{
	slot->size = size;
	atomic_store_explicit(&slot->seq, pos + 1, memory_order_release);
}

/* The consumer's next record, or NULL when the ring is empty. */
static inline const struct cp_shm_slot *cp_shm__peek(struct cp_shm_segment *seg)
{
	uint64_t pos = atomic_load_explicit(&seg->tail, memory_order_relaxed);
	struct cp_shm_slot *slot = &seg->slot[pos & (seg->slots - 1)];

	if (atomic_load_explicit(&slot->seq, memory_order_acquire) != pos + 1)
		return NULL;
	return slot;
}

static inline void cp_shm__release(struct cp_shm_segment *seg, const struct cp_shm_slot *slot)
{
	uint64_t pos = atomic_load_explicit(&seg->tail, memory_order_relaxed);
	struct cp_shm_slot *writable = &seg->slot[pos & (seg->slots - 1)];

	(void)slot;
	atomic_store_explicit(&writable->seq, pos + seg->slots, memory_order_release);
	atomic_store_explicit(&seg->tail, pos + 1, memory_order_release);
}

/* Hands every pending record to deliver, then releases it; how many. */
static inline size_t cp_shm__drain(struct cp_shm_segment *seg,
				   void (*deliver)(const struct cp_shm_slot *slot))
{
	const struct cp_shm_slot *slot;
	size_t n = 0;

	while ((slot = cp_shm__peek(seg))) {
		deliver(slot);
		cp_shm__release(seg, slot);
		n++;
	}
	return n;
}

/*
 * The eventfd handshake, producer side: write the eventfd only when the
 * consumer said it is (about to be) asleep, and only once per sleep.
 */
static inline void cp_shm__notify(struct cp_shm_segment *seg, int wake_fd)
{
	uint64_t one = 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&seg->consumer_waiting, memory_order_relaxed) &&
	    atomic_exchange_explicit(&seg->consumer_waiting, 0, memory_order_acq_rel))
		(void)!write(wake_fd, &one, sizeof(one));
}

/*
 * The eventfd handshake, consumer side: drain, say "asleep", look once
 * more (a record published before the flag was seen), then block on the
 * eventfd; until *stopping, then a last drain.
 */
static inline void cp_shm__consume_until_stopped(struct cp_shm_segment *seg, int wake_fd,
						  _Atomic bool *stopping,
						  void (*deliver)(const struct cp_shm_slot *slot))
{
	uint64_t value;

	for (;;) {
		if (cp_shm__drain(seg, deliver))
			continue;
		if (atomic_load_explicit(stopping, memory_order_acquire))
			break;
		atomic_store_explicit(&seg->consumer_waiting, 1, memory_order_seq_cst);
		if (cp_shm__peek(seg) || atomic_load_explicit(stopping, memory_order_seq_cst)) {
			atomic_store_explicit(&seg->consumer_waiting, 0, memory_order_relaxed);
			continue;
		}
		if (read(wake_fd, &value, sizeof(value)) < 0 && errno != EINTR)
			break;
	}
	cp_shm__drain(seg, deliver);
}

#endif /* CP_SHM_RING_H */
