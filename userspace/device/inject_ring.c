// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Device rings moved into the kernel's ring maps (inject_internal.h).
 *
 * A ring's records are written on the GPU into its segments in the
 * module's device memory (ptx_jit.h): a reservation is one relaxed atomic
 * in the GPU's own memory (a position), the record and its commit plain
 * stores. A position that finds its segment full is counted lost there and
 * left as a hole. Nothing orders a record before its commit, so a segment
 * is read only when no kernel that writes it can be running: the drain
 * (inject_drain.c) moves the rings at a proof that left no launch of the
 * context unproved, and before a module or context goes (after a
 * synchronization). Then, on the program's own thread and our own stream,
 * each segment's counters are copied, then its slots from released up to
 * head (at most a segment's worth: positions beyond found it full); each
 * committed record is appended to the kernel's ring map by the ring's
 * protocol with CPU atomics (this process one of its producers, cuprobe
 * its reader: struct cuprobe_gpu_ring_control), every other position was
 * counted lost; released becomes head on the GPU (its slots free again);
 * what the segments lost is added to the map's counts, per launch.
 *
 * On the GPU a record names its launch by the address of the launch's slot
 * (no read over PCIe for each record); the seq is read there when the
 * record is moved (a slot is reused after 65,535 later launches).
 *
 * The drain ends with a synchronization of our stream: a call cuprobe's
 * uprobes see, which wakes the GPU agent once the records are in the map.
 */
#include "cuprobe_events.h"
#include "inject_internal.h"

/* A segment's words a drain reads each time: magic to released. */
#define HEAD_BYTES offsetof(struct cuprobe_gpu_ring_control, lost_by_launch)
#define BUCKETS_BYTES sizeof(((struct cuprobe_gpu_ring_control *)0)->lost_by_launch)

struct drain_ring {
	struct cp_ptx_ring layout;
	struct cuprobe_gpu_ring_control *map_control; /* the kernel's maps, as mapped here */
	unsigned char *map_slots;
	uint32_t map_capacity;
	CUdeviceptr control, slots;                   /* the module's segments */
	/* Pinned, one allocation: */
	unsigned char *pinned;
	unsigned char *heads;                         /* segments x HEAD_BYTES */
	unsigned char *buckets;                       /* segments x BUCKETS_BYTES */
	unsigned char *slot_copy;                     /* segments x slots_stride */
	uint64_t *released;                           /* per segment: positions moved (the HtoD's source) */
	/* Ours: */
	uint64_t *lost_seen;                          /* per segment: its lost at the last look */
	uint64_t *bucket_seen;                        /* per segment and bucket */
};

struct drain_rings {
	struct drain_ring *rings;
	size_t count;
	bool asked;          /* the counters' copies are on the stream */
	bool failure_said;
};

static void ring_release(struct drain_ring *r, bool context_alive)
{
	if (context_alive && r->pinned)
		HELPER(cuMemFreeHost, r->pinned);
	free(r->lost_seen);
	free(r->bucket_seen);
}

void drain_rings_free(struct drain_rings *rings, bool context_alive)
{
	size_t i;

	if (!rings)
		return;
	for (i = 0; i < rings->count; i++)
		ring_release(&rings->rings[i], context_alive);
	free(rings->rings);
	free(rings);
}

/* One ring's segments in module: CUDA_SUCCESS, CUDA_ERROR_NOT_FOUND (not in it), or why not. */
static CUresult ring_find(struct drain_ring *r, CUmodule module, const struct cp_ptx_ring *layout,
			  const size_t *region_of)
{
	const struct region *control = &inject.maps[region_of[layout->control]];
	const struct region *slots = &inject.maps[region_of[layout->slots]];
	uint32_t capacity = inject.plan.maps[region_of[layout->slots]].max_entries;
	size_t bytes = 0, pinned;
	char name[64];
	CUresult rc;

	*r = (struct drain_ring){ .layout = *layout, .map_control = control->base,
				  .map_slots = slots->base, .map_capacity = capacity };
	if (control->read_only || slots->read_only || control->size < sizeof(*r->map_control) ||
	    slots->size < (size_t)capacity * layout->slot_bytes)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, sizeof(name), CP_PTX_RING_CONTROL_PREFIX "%zu", layout->control);
	rc = HELPER(cuModuleGetGlobal_v2, &r->control, &bytes, module, name);
	if (rc != CUDA_SUCCESS)
		return rc; /* CUDA_ERROR_NOT_FOUND: no kernel of this module writes it */
	if (bytes < layout->segments * layout->control_stride)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, sizeof(name), CP_PTX_RING_SLOTS_PREFIX "%zu", layout->slots);
	rc = HELPER(cuModuleGetGlobal_v2, &r->slots, &bytes, module, name);
	if (rc == CUDA_SUCCESS && bytes < layout->segments * layout->slots_stride)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc != CUDA_SUCCESS)
		return rc == CUDA_ERROR_NOT_FOUND ? CUDA_ERROR_INVALID_VALUE : rc;
	r->lost_seen = calloc(layout->segments, sizeof(uint64_t));
	r->bucket_seen = calloc((size_t)layout->segments * CUPROBE_GPU_RING_LAUNCH_BUCKETS, sizeof(uint64_t));
	if (!r->lost_seen || !r->bucket_seen)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pinned = layout->segments * (HEAD_BYTES + BUCKETS_BYTES + layout->slots_stride + sizeof(uint64_t));
	rc = HELPER(cuMemAllocHost_v2, (void **)&r->pinned, pinned);
	if (rc != CUDA_SUCCESS)
		return rc;
	memset(r->pinned, 0, pinned);
	r->slot_copy = r->pinned;
	r->heads = r->slot_copy + layout->segments * layout->slots_stride;
	r->buckets = r->heads + layout->segments * HEAD_BYTES;
	r->released = (uint64_t *)(void *)(r->buckets + layout->segments * BUCKETS_BYTES);
	return CUDA_SUCCESS;
}

CUresult drain_rings_find(CUmodule module, struct drain_rings **out)
{
	struct drain_rings *rings;
	struct cp_ptx_map *shapes;
	size_t *region_of = NULL, count = 0, i;
	CUresult rc = CUDA_SUCCESS;

	*out = NULL;
	shapes = inject_map_shapes(&count, &region_of);
	rings = calloc(1, sizeof(*rings));
	if (!shapes || !rings || !(rings->rings = calloc(count ? count : 1, sizeof(*rings->rings))))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	for (i = 0; rc == CUDA_SUCCESS && i < count; i++) {
		struct cp_ptx_ring layout;

		if (!shapes[i].name || !cp_ptx__ring_of(shapes, count, i, &layout) || layout.control != i)
			continue;
		rc = ring_find(&rings->rings[rings->count], module, &layout, region_of);
		if (rc == CUDA_SUCCESS) {
			rings->count++;
		} else {
			ring_release(&rings->rings[rings->count], true);
			if (rc == CUDA_ERROR_NOT_FOUND)
				rc = CUDA_SUCCESS;
		}
	}
	free(shapes);
	free(region_of);
	if (rc != CUDA_SUCCESS || !rings->count) {
		drain_rings_free(rings, true);
		return rc;
	}
	*out = rings;
	return CUDA_SUCCESS;
}

static CUresult copy_rows(void *host, size_t host_pitch, CUdeviceptr device, size_t device_pitch,
			  size_t width, size_t rows, bool to_device, CUstream stream)
{
	CUDA_MEMCPY2D copy = { .WidthInBytes = width, .Height = rows };

	if (to_device) {
		copy.srcMemoryType = CU_MEMORYTYPE_HOST;
		copy.srcHost = host;
		copy.srcPitch = host_pitch;
		copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		copy.dstDevice = device;
		copy.dstPitch = device_pitch;
	} else {
		copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
		copy.srcDevice = device;
		copy.srcPitch = device_pitch;
		copy.dstMemoryType = CU_MEMORYTYPE_HOST;
		copy.dstHost = host;
		copy.dstPitch = host_pitch;
	}
	return HELPER(cuMemcpy2DAsync_v2, &copy, stream);
}

/* The seq in the launch slot at address slot (what the GPU recorded); 0 when it is none. */
static uint64_t launch_seq_at(uint64_t slot)
{
	uintptr_t base = (uintptr_t)inject.slots.base;

	if (!base || slot < base || slot % 8 || slot - base >= inject.slots.size)
		return 0;
	return __atomic_load_n((const uint64_t *)(uintptr_t)slot, __ATOMIC_RELAXED);
}

/* count records of launch seq lost; ticket_taken: they took the map's tickets already. */
static void map_lost(struct cuprobe_gpu_ring_control *c, uint64_t seq, uint64_t count, bool ticket_taken)
{
	struct cuprobe_gpu_ring_launch_lost *bucket = &c->lost_by_launch[seq % CUPROBE_GPU_RING_LAUNCH_BUCKETS];

	__atomic_store_n(&bucket->launch_seq, seq, __ATOMIC_RELAXED);
	__atomic_fetch_add(&bucket->lost, count, __ATOMIC_RELEASE);
	/* Tickets before lost: a producer reading both between the two errs on the full side. */
	if (!ticket_taken)
		__atomic_fetch_add(&c->reserved, count, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&c->lost, count, __ATOMIC_SEQ_CST);
}

/*
 * count records into the kernel's ring map: the slots a segment's copy
 * holds for positions from, from + 1, ... (as the GPU wrote them), with one
 * reservation for all, as count producers would take their tickets one
 * after the other: those that find the map full are counted lost.
 */
static void map_append_run(struct drain_ring *r, const unsigned char *segment, uint64_t from,
			   uint64_t count)
{
	struct cuprobe_gpu_ring_control *c = r->map_control;
	uint64_t released = __atomic_load_n(&c->released, __ATOMIC_ACQUIRE);
	uint64_t lost = __atomic_load_n(&c->lost, __ATOMIC_ACQUIRE), ticket, in_use, taken, position = 0, k;

	ticket = __atomic_fetch_add(&c->reserved, count, __ATOMIC_SEQ_CST);
	in_use = ticket - lost - released; /* at most: both were read first */
	taken = in_use >= r->map_capacity ? 0 : r->map_capacity - in_use;
	if (taken > count)
		taken = count;
	if (taken)
		position = __atomic_fetch_add(&c->head, taken, __ATOMIC_SEQ_CST);
	for (k = 0; k < count; k++) {
		const struct cuprobe_gpu_ring_slot *from_slot = (const void *)(
			segment + (size_t)((from + k) & (r->layout.segment_slots - 1)) * r->layout.slot_bytes);
		uint64_t seq = launch_seq_at(from_slot->launch_seq);
		struct cuprobe_gpu_ring_slot *slot;

		if (k >= taken) {
			map_lost(c, seq, 1, true);
			continue;
		}
		slot = (void *)(r->map_slots + (size_t)((position + k) % r->map_capacity) * r->layout.slot_bytes);
		slot->launch_seq = seq;
		memcpy(slot + 1, from_slot + 1, r->layout.slot_bytes - sizeof(*slot));
		__atomic_store_n(&slot->commit, position + k + 1, __ATOMIC_RELEASE);
	}
}

/* The positions a segment may hold records for: from released, at most a segment's worth. */
static uint64_t movable(const struct cp_ptx_ring *l, uint64_t head, uint64_t released)
{
	uint64_t pending = head - released;

	return pending > l->segment_slots ? l->segment_slots : pending;
}

/*
 * What one ring's segments hold, moved, their counters copied already and
 * no kernel writing them: CUDA_SUCCESS or the first failure; *moved when
 * anything was.
 */
static CUresult ring_move(struct drain_ring *r, CUstream stream, bool *moved)
{
	const struct cp_ptx_ring *l = &r->layout;
	uint32_t lo = l->segment_slots, hi = 0, s;
	bool wrapped = false, losses = false, raised = false;
	uint64_t position, run;
	CUresult rc = CUDA_SUCCESS;

	for (s = 0; s < l->segments; s++) {
		const struct cuprobe_gpu_ring_control *head = (const void *)(r->heads + s * HEAD_BYTES);
		uint64_t pending = movable(l, head->head, r->released[s]);
		uint32_t start = (uint32_t)(r->released[s] & (l->segment_slots - 1));

		if (pending && start + pending > l->segment_slots)
			wrapped = true;
		if (pending) {
			lo = start < lo ? start : lo;
			hi = start + pending > hi ? (uint32_t)(start + pending) : hi;
		}
		losses |= head->lost != r->lost_seen[s];
	}
	if (wrapped) {
		lo = 0;
		hi = l->segment_slots;
	}
	if (hi > lo)
		rc = copy_rows(r->slot_copy + (size_t)lo * l->slot_bytes, l->slots_stride,
			       r->slots + (size_t)lo * l->slot_bytes, l->slots_stride,
			       (size_t)(hi - lo) * l->slot_bytes, l->segments, false, stream);
	if (rc == CUDA_SUCCESS && losses)
		rc = copy_rows(r->buckets, BUCKETS_BYTES,
			       r->control + offsetof(struct cuprobe_gpu_ring_control, lost_by_launch),
			       l->control_stride, BUCKETS_BYTES, l->segments, false, stream);
	if (rc == CUDA_SUCCESS && (hi > lo || losses))
		rc = REAL(cuStreamSynchronize, stream);
	if (rc != CUDA_SUCCESS)
		return rc;
	for (s = 0; s < l->segments; s++) {
		const struct cuprobe_gpu_ring_control *head = (const void *)(r->heads + s * HEAD_BYTES);
		const unsigned char *segment = r->slot_copy + s * l->slots_stride;
		uint64_t end = r->released[s] + movable(l, head->head, r->released[s]);

		/* Committed runs in order; a position not committed found its segment full (counted lost). */
		for (position = run = r->released[s]; position <= end; position++) {
			const struct cuprobe_gpu_ring_slot *slot = (const void *)(
				segment + (size_t)(position & (l->segment_slots - 1)) * l->slot_bytes);

			if (position < end && slot->commit == position + 1)
				continue;
			if (position > run)
				map_append_run(r, segment, run, position - run);
			run = position + 1;
		}
		if (head->head != r->released[s]) {
			r->released[s] = head->head;
			raised = true;
		}
	}
	for (s = 0; losses && s < l->segments; s++) {
		const struct cuprobe_gpu_ring_launch_lost *bucket = (const void *)(r->buckets + s * BUCKETS_BYTES);
		uint64_t *seen = &r->bucket_seen[(size_t)s * CUPROBE_GPU_RING_LAUNCH_BUCKETS];
		size_t b;

		for (b = 0; b < CUPROBE_GPU_RING_LAUNCH_BUCKETS; b++)
			if (bucket[b].lost != seen[b]) {
				map_lost(r->map_control, launch_seq_at(bucket[b].launch_seq),
					 bucket[b].lost - seen[b], false);
				seen[b] = bucket[b].lost;
			}
		r->lost_seen[s] = ((const struct cuprobe_gpu_ring_control *)(void *)(r->heads + s * HEAD_BYTES))->lost;
	}
	/* The GPU's side of released: one word a segment, nothing else of the block written. */
	if (raised)
		rc = copy_rows(r->released, sizeof(uint64_t), r->control +
			       offsetof(struct cuprobe_gpu_ring_control, released),
			       l->control_stride, sizeof(uint64_t), l->segments, true, stream);
	*moved |= raised || losses;
	return rc;
}

static void say_failure(struct drain_rings *rings, CUresult rc)
{
	if (rings->failure_said)
		return;
	rings->failure_said = true;
	report(CP_INJECT_ERROR, NULL, NULL, 0, 0,
	       "cannot move the device rings' records into the maps (%s): they stay on the GPU until a drain succeeds",
	       result_name(rc));
}

CUresult drain_rings_ask(struct drain_rings *rings, CUstream stream)
{
	CUresult rc = CUDA_SUCCESS;
	size_t i;

	/* Each segment's counters, one row each: read when the stream is synchronized. */
	for (i = 0; i < rings->count && rc == CUDA_SUCCESS; i++)
		rc = copy_rows(rings->rings[i].heads, HEAD_BYTES, rings->rings[i].control,
			       rings->rings[i].layout.control_stride, HEAD_BYTES,
			       rings->rings[i].layout.segments, false, stream);
	rings->asked = rc == CUDA_SUCCESS;
	if (rc != CUDA_SUCCESS)
		say_failure(rings, rc);
	return rc;
}

CUresult drain_rings_move(struct drain_rings *rings, CUstream stream)
{
	CUresult rc = CUDA_SUCCESS;
	bool moved = false;
	size_t i;

	if (!rings->asked)
		return CUDA_ERROR_NOT_READY;
	rings->asked = false;
	for (i = 0; i < rings->count && rc == CUDA_SUCCESS; i++)
		rc = ring_move(&rings->rings[i], stream, &moved);
	/* Also what wakes cuprobe's reader: a synchronization its uprobes see, the records in the map. */
	if (moved && rc == CUDA_SUCCESS)
		rc = REAL(cuStreamSynchronize, stream);
	if (rc != CUDA_SUCCESS)
		say_failure(rings, rc);
	return rc;
}
