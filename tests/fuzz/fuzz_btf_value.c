// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The BTF value printer of cuprobe run over a user's object: the object's
 * BTF, parsed by libbpf as run's loading does, and bytes of a record or of
 * a map's entries printed through it in every format.
 *
 * Input: a little-endian u32 BTF length, the BTF, then
 *   u32 record type, u32 key type, u32 value type, u8 flags (bit 0 per-CPU,
 *   bit 1 two CPUs, bits 2-3 the map type: hash, array, per-CPU array, LRU;
 *   bits 4-7 entries said left out, bit 7 also a read that failed), and the
 *   data: all of it a record of the record type, and as many map entries
 *   (key, value, each of its type's size) as it holds, at most 16, printed
 *   in two batches as run streams a map.
 * A type id beyond the BTF's is taken modulo its count (0: untyped, raw bytes).
 * What JSON writes must parse.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>
#include <linux/bpf.h>

#include "cuprobe_internal.h"
#include "json_check.h"

static uint32_t u32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A type id of btf (0 stays 0), and the size a map declared with it would have (0: none). */
static uint32_t type_of(const struct btf *btf, uint32_t id, uint32_t *size)
{
	uint32_t types = btf__type_cnt(btf);
	long long resolved;

	*size = 0;
	if (!id || types < 2)
		return 0;
	id = 1 + id % (types - 1);
	resolved = btf__resolve_size(btf, id);
	if (resolved > 0 && resolved <= 4096)
		*size = (uint32_t)resolved;
	return id;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int map_types[] = { BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_ARRAY,
					 BPF_MAP_TYPE_PERCPU_ARRAY, BPF_MAP_TYPE_LRU_HASH };
	struct cp_program_ring_info ring = { .name = "events" };
	struct cp_program_map_info map = { .name = "counts" };
	struct cp_map_entries entries = { 0 };
	struct cp_btf_names names = { .pid = 1 };
	uint32_t btf_len, record_size, key_size, value_size;
	struct cp_text text = { 0 };
	const uint8_t *rest;
	struct btf *btf;
	size_t rest_len, entry, i;
	enum cp_format f;
	uint8_t flags;

	if (size < 4)
		return 0;
	btf_len = u32_at(data);
	if (btf_len > size - 4 || size - 4 - btf_len < 13)
		return 0;
	btf = btf__new(data + 4, btf_len);
	if (!btf)
		return 0;
	rest = data + 4 + btf_len;
	rest_len = size - 4 - btf_len;
	ring.type_id = type_of(btf, u32_at(rest), &record_size);
	map.key_type_id = type_of(btf, u32_at(rest + 4), &key_size);
	map.value_type_id = type_of(btf, u32_at(rest + 8), &value_size);
	flags = rest[12];
	rest += 13;
	rest_len -= 13;
	names.names = cp_names__new(NULL);

	/* A record: whatever size the program wrote. */
	ring.record_size = record_size;
	for (f = 0; f < CP_FORMAT_MAX; f++) {
		cp_format__program_record(&text, f, btf, &ring, rest, rest_len, &names);
		if (f == CP_FORMAT_JSON)
			json_check_lines(text.data, text.len);
		cp_text__clear(&text);
	}

	/* A map: the sizes its BTF types give (a map of types of no size is untyped). */
	if (!key_size || !value_size) {
		map.key_type_id = map.value_type_id = 0;
		key_size = key_size ? key_size : 4;
		value_size = value_size ? value_size : 8;
	}
	map.type = map_types[(flags >> 2) & 3];
	map.per_cpu = flags & 1;
	map.key_size = entries.key_size = key_size;
	map.value_size = entries.value_size = value_size;
	entries.value_stride = (value_size + 7) / 8 * 8;
	entries.cpus = map.per_cpu && (flags & 2) ? 2 : 1;
	entry = key_size + entries.cpus * entries.value_stride;
	entries.count = rest_len / entry < 16 ? rest_len / entry : 16;
	entries.keys = malloc(entries.count * key_size + 1);
	entries.values = calloc(1, entries.count * entries.cpus * entries.value_stride + 1);
	if (!entries.keys || !entries.values)
		abort();
	for (i = 0; i < entries.count; i++) {
		const uint8_t *e = rest + i * entry;

		memcpy(entries.keys + i * key_size, e, key_size);
		memcpy(entries.values + i * entries.cpus * entries.value_stride, e + key_size,
		       entries.cpus * entries.value_stride);
	}
	/* As run streams a map: two batches, some entries said to be left out. */
	for (f = 0; f < CP_FORMAT_MAX; f++) {
		struct cp_map_entries first = entries, second = entries;

		first.count = entries.count / 2;
		second.count = entries.count - first.count;
		second.keys += first.count * key_size;
		second.values += first.count * entries.cpus * entries.value_stride;
		cp_format__program_map_begin(&text, f, &map);
		cp_format__program_map_entries(&text, f, btf, &map, &first, 0, &names);
		cp_format__program_map_entries(&text, f, btf, &map, &second, first.count, &names);
		cp_format__program_map_end(&text, f, &map, entries.count, flags >> 4,
					   flags & 0x80 ? -EIO : 0);
		if (f == CP_FORMAT_JSON)
			json_check_lines(text.data, text.len);
		cp_text__clear(&text);
	}

	free(entries.keys);
	free(entries.values);
	cp_names__free(names.names);
	cp_text__free(&text);
	btf__free(btf);
	return 0;
}
