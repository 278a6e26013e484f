/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Device rings (CUPROBE_GPU_RING): records GPU threads write into a kernel
 * map, read by cuprobe in order, without polling, when a call proves
 * kernels done or a process exits. The layout and the protocol are
 * struct cuprobe_gpu_ring_control's (bpf/cuprobe_events.h).
 */
#ifndef CUPROBE_GPU_RING_H
#define CUPROBE_GPU_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_program;
struct cp_gpu_ring;

/* Every ring of a loaded program, mapped and described in its control block. 0 or -errno. */
int cp_gpu_rings__open(const struct cp_program *program, struct cp_gpu_ring ***rings,
		       size_t *count);
void cp_gpu_rings__close(struct cp_gpu_ring **rings, size_t count);

struct cp_gpu_ring_info {
	const char *name;
	uint32_t record_type_id;   /* BTF of the program; 0 when unknown */
	uint32_t record_bytes;
	uint32_t capacity;
};
void cp_gpu_ring__info(const struct cp_gpu_ring *ring, struct cp_gpu_ring_info *out);

/* One record, as the GPU committed it. A non-zero return stops the drain. */
typedef int (*cp_gpu_record_fn)(void *ctx, const struct cp_gpu_ring *ring, uint64_t launch_seq,
				const void *record, size_t size);

/*
 * Reads the committed records in order, hands each to fn and gives their
 * slots back. Positions below abandon_below reserved and not committed
 * are skipped, counted as abandoned: their writers are gone (the caller
 * knows). 0: none. Returns the records read.
 */
uint64_t cp_gpu_ring__drain(struct cp_gpu_ring *ring, uint64_t abandon_below, cp_gpu_record_fn fn,
			    void *ctx);
/* Positions handed out so far. */
uint64_t cp_gpu_ring__head(const struct cp_gpu_ring *ring);

struct cp_gpu_ring_counts {
	uint64_t produced;   /* delivered + lost + abandoned + committed and not read yet */
	uint64_t delivered;
	uint64_t lost;       /* the ring was full */
	uint64_t abandoned;  /* reserved by a thread whose process ended before it committed */
	uint64_t pending;    /* reserved, not read */
};
void cp_gpu_ring__counts(const struct cp_gpu_ring *ring, struct cp_gpu_ring_counts *out);

/* Per launch (by the launch's seq; 0: unknown), in the order first seen. */
size_t cp_gpu_ring__launch_count(const struct cp_gpu_ring *ring);
int cp_gpu_ring__launch(const struct cp_gpu_ring *ring, size_t index, uint64_t *launch_seq,
			uint64_t *delivered, uint64_t *lost);

#endif
