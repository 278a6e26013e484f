// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Device rings on cuprobe's side: the slots and the control block mapped
 * from the kernel maps (the same memory COMMAND's processes map and the GPU
 * writes), read in order. The GPU only ever writes reserved, head, lost and
 * the slots; cuprobe only the description and released (see struct
 * cuprobe_gpu_ring_control), so no word needs an atomic of both sides.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <linux/types.h>

#include "cuprobe_events.h"
#include "cuprobe_internal.h"
#include "gpu_ring.h"

#define CONTROL_SUFFIX "__control"
#define SLOT_TYPE_PREFIX "cuprobe_gpu_ring_slot__"

struct launch_count {
	uint64_t launch_seq;
	uint64_t delivered;
	uint64_t lost;
};

struct cp_gpu_ring {
	struct cp_gpu_ring_info info;
	struct cuprobe_gpu_ring_control *control;
	unsigned char *slots;
	size_t slots_bytes;
	uint32_t slot_bytes;
	uint64_t tail;         /* the next position to read */
	uint64_t delivered, abandoned;
	uint64_t bucket_seen[CUPROBE_GPU_RING_LAUNCH_BUCKETS]; /* lost counts attributed */
	struct launch_count *launches;
	size_t launch_count, launch_capacity;
	size_t last_launch;    /* where the last record's launch was: records come in runs */
};

static size_t page_rounded(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (bytes + page - 1) / page * page;
}

/* The slot type's "record" member: its BTF type, 0 when the program has no BTF for it. */
static uint32_t record_type(const struct btf *btf, uint32_t slot_type_id, uint32_t *bytes)
{
	const struct btf_type *t = btf ? btf__type_by_id(btf, slot_type_id) : NULL;
	const struct btf_member *m;
	const char *name;
	int i;

	if (!t || !btf_is_struct(t))
		return 0;
	name = btf__name_by_offset(btf, t->name_off);
	if (!name || strncmp(name, SLOT_TYPE_PREFIX, strlen(SLOT_TYPE_PREFIX)))
		return 0;
	m = btf_members(t);
	for (i = 0; i < btf_vlen(t); i++, m++) {
		name = btf__name_by_offset(btf, m->name_off);
		if (name && !strcmp(name, "record")) {
			*bytes = (uint32_t)(t->size - btf_member_bit_offset(t, i) / 8);
			return m->type;
		}
	}
	return 0;
}

/* The program's map named name: its index among the device maps, or -1. */
static long device_map_named(const struct cp_program *program, const char *name,
			     struct cp_device_map_info *out)
{
	size_t i, count = cp_program__device_map_count(program);

	for (i = 0; i < count; i++)
		if (!cp_program__device_map(program, i, out) && !strcmp(out->name, name))
			return (long)i;
	return -1;
}

static int program_map_named(const struct cp_program *program, const char *name,
			     struct cp_program_map_info *out)
{
	size_t i, count = cp_program__map_count(program);

	for (i = 0; i < count; i++)
		if (!cp_program__map(program, i, out) && !strcmp(out->name, name))
			return 0;
	return -ENOENT;
}

static void ring_free(struct cp_gpu_ring *ring)
{
	if (!ring)
		return;
	if (ring->control)
		munmap(ring->control, page_rounded(sizeof(*ring->control)));
	if (ring->slots)
		munmap(ring->slots, ring->slots_bytes);
	free((char *)ring->info.name);
	free(ring->launches);
	free(ring);
}

/* The ring whose control map is control (device map control_index). */
static int ring_open(const struct cp_program *program, const struct cp_device_map_info *control,
		     struct cp_gpu_ring **out)
{
	size_t name_len = strlen(control->name) - strlen(CONTROL_SUFFIX);
	struct cp_program_map_info slots_info;
	struct cp_device_map_info slots;
	struct cp_gpu_ring *ring;
	void *mapped;
	long slots_index;
	char *name;

	*out = NULL;
	if (control->value_size < sizeof(struct cuprobe_gpu_ring_control))
		return 0; /* not one of CUPROBE_GPU_RING's */
	name = strndup(control->name, name_len);
	if (!name)
		return -ENOMEM;
	slots_index = device_map_named(program, name, &slots);
	ring = calloc(1, sizeof(*ring));
	if (!ring) {
		free(name);
		return -ENOMEM;
	}
	ring->info.name = name;
	if (slots_index < 0 || program_map_named(program, name, &slots_info) ||
	    !(ring->info.record_type_id = record_type(cp_program__btf(program),
						       slots_info.value_type_id,
						       &ring->info.record_bytes))) {
		ring_free(ring);
		return 0; /* a map that only looks like a ring's control */
	}
	ring->info.capacity = slots.max_entries;
	ring->slot_bytes = (slots.value_size + 7) & ~7u; /* the kernel's array stride */
	ring->slots_bytes = page_rounded((size_t)ring->slot_bytes * slots.max_entries);
	mapped = mmap(NULL, page_rounded(sizeof(*ring->control)), PROT_READ | PROT_WRITE, MAP_SHARED,
		      control->fd, 0);
	if (mapped == MAP_FAILED)
		goto fail;
	ring->control = mapped;
	mapped = mmap(NULL, ring->slots_bytes, PROT_READ, MAP_SHARED, slots.fd, 0);
	if (mapped == MAP_FAILED)
		goto fail;
	ring->slots = mapped;
	/* What the ring is, for whoever finds the control block by its magic (the simulated driver). */
	ring->control->slots_map = (uint32_t)slots_index;
	ring->control->capacity = ring->info.capacity;
	ring->control->slot_bytes = ring->slot_bytes;
	ring->control->record_bytes = ring->info.record_bytes;
	__atomic_store_n(&ring->control->magic, CUPROBE_GPU_RING_MAGIC, __ATOMIC_RELEASE);
	*out = ring;
	return 0;
fail:
	ring_free(ring);
	return -errno;
}

int cp_gpu_rings__open(const struct cp_program *program, struct cp_gpu_ring ***rings,
		       size_t *count)
{
	size_t i, maps = cp_program__device_map_count(program), suffix = strlen(CONTROL_SUFFIX);
	struct cp_gpu_ring **list = calloc(maps ? maps : 1, sizeof(*list)), *ring;
	struct cp_device_map_info map;
	int err = 0;

	*rings = NULL;
	*count = 0;
	if (!list)
		return -ENOMEM;
	for (i = 0; i < maps && !err; i++) {
		size_t len;

		if (cp_program__device_map(program, i, &map))
			continue;
		len = strlen(map.name);
		if (len <= suffix || strcmp(map.name + len - suffix, CONTROL_SUFFIX))
			continue;
		err = ring_open(program, &map, &ring);
		if (!err && ring)
			list[(*count)++] = ring;
	}
	if (err) {
		cp_gpu_rings__close(list, *count);
		*count = 0;
		return err;
	}
	*rings = list;
	return 0;
}

void cp_gpu_rings__close(struct cp_gpu_ring **rings, size_t count)
{
	size_t i;

	for (i = 0; rings && i < count; i++)
		ring_free(rings[i]);
	free(rings);
}

void cp_gpu_ring__info(const struct cp_gpu_ring *ring, struct cp_gpu_ring_info *out)
{
	*out = ring->info;
}

/* The launch's counters, added when new; NULL when out of memory. */
static struct launch_count *launch_of(struct cp_gpu_ring *ring, uint64_t launch_seq)
{
	struct launch_count *grown;
	size_t i;

	if (ring->last_launch < ring->launch_count &&
	    ring->launches[ring->last_launch].launch_seq == launch_seq)
		return &ring->launches[ring->last_launch];
	/* Newest first: a record's launch is nearly always a recent one. */
	for (i = ring->launch_count; i-- > 0;)
		if (ring->launches[i].launch_seq == launch_seq) {
			ring->last_launch = i;
			return &ring->launches[i];
		}
	if (ring->launch_count == ring->launch_capacity) {
		size_t capacity = ring->launch_capacity ? 2 * ring->launch_capacity : 64;

		grown = realloc(ring->launches, capacity * sizeof(*grown));
		if (!grown)
			return NULL;
		ring->launches = grown;
		ring->launch_capacity = capacity;
	}
	ring->last_launch = ring->launch_count++;
	ring->launches[ring->last_launch] = (struct launch_count){ .launch_seq = launch_seq };
	return &ring->launches[ring->last_launch];
}

/* Records lost since the last look, to the launch each bucket names. */
static void attribute_losses(struct cp_gpu_ring *ring)
{
	size_t b;

	for (b = 0; b < CUPROBE_GPU_RING_LAUNCH_BUCKETS; b++) {
		struct cuprobe_gpu_ring_launch_lost *bucket = &ring->control->lost_by_launch[b];
		uint64_t lost = __atomic_load_n(&bucket->lost, __ATOMIC_ACQUIRE);
		struct launch_count *launch;

		if (lost == ring->bucket_seen[b])
			continue;
		launch = launch_of(ring, __atomic_load_n(&bucket->launch_seq, __ATOMIC_RELAXED));
		if (!launch)
			return; /* tried again at the next drain */
		launch->lost += lost - ring->bucket_seen[b];
		ring->bucket_seen[b] = lost;
	}
}

uint64_t cp_gpu_ring__head(const struct cp_gpu_ring *ring)
{
	return __atomic_load_n(&ring->control->head, __ATOMIC_ACQUIRE);
}

uint64_t cp_gpu_ring__drain(struct cp_gpu_ring *ring, uint64_t abandon_below, cp_gpu_record_fn fn,
			    void *ctx)
{
	uint64_t read = 0;

	for (;;) {
		const unsigned char *at =
			ring->slots + (size_t)(ring->tail % ring->info.capacity) * ring->slot_bytes;
		const struct cuprobe_gpu_ring_slot *slot = (const void *)at;
		struct launch_count *launch;

		/* Acquire: the record the GPU wrote before its commit is seen with it. */
		if (__atomic_load_n(&slot->commit, __ATOMIC_ACQUIRE) != ring->tail + 1) {
			if (ring->tail >= abandon_below || ring->tail >= cp_gpu_ring__head(ring))
				break;
			/* Reserved by a process that is gone: never to be committed. */
			ring->abandoned++;
		} else {
			launch = launch_of(ring, slot->launch_seq);
			if (launch)
				launch->delivered++;
			ring->delivered++;
			read++;
			if (fn && fn(ctx, ring, slot->launch_seq, slot + 1, ring->info.record_bytes)) {
				ring->tail++;
				break;
			}
		}
		ring->tail++;
		/* Given back at once: the GPU may be waiting for room while we print. */
		__atomic_store_n(&ring->control->released, ring->tail, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&ring->control->released, ring->tail, __ATOMIC_RELEASE);
	attribute_losses(ring);
	return read;
}

void cp_gpu_ring__counts(const struct cp_gpu_ring *ring, struct cp_gpu_ring_counts *out)
{
	uint64_t head = __atomic_load_n(&ring->control->head, __ATOMIC_ACQUIRE);

	out->delivered = ring->delivered;
	out->lost = __atomic_load_n(&ring->control->lost, __ATOMIC_ACQUIRE);
	out->abandoned = ring->abandoned;
	out->pending = head > ring->tail ? head - ring->tail : 0;
	out->produced = out->delivered + out->lost + out->abandoned + out->pending;
}

size_t cp_gpu_ring__launch_count(const struct cp_gpu_ring *ring)
{
	return ring->launch_count;
}

int cp_gpu_ring__launch(const struct cp_gpu_ring *ring, size_t index, uint64_t *launch_seq,
			uint64_t *delivered, uint64_t *lost)
{
	if (index >= ring->launch_count)
		return -EINVAL;
	*launch_seq = ring->launches[index].launch_seq;
	*delivered = ring->launches[index].delivered;
	*lost = ring->launches[index].lost;
	return 0;
}
