// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reading the aggregation maps: per (pid, kernel) launches, per (pid, API)
 * calls and latency histograms, per-process device memory and the live
 * allocations with their stacks. Rows of exited processes are removed by
 * cp_tracer__forget_pid once their final report has been read.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cuprobe_internal.h"
#include "tracer_internal.h"

/* Walks a hash map, copying (key, value) pairs into a growing array of rows. */
static int collect_rows(int map_fd, size_t key_size, size_t value_size, size_t row_size,
			size_t key_at, size_t value_at, uint32_t pid, void **rows_out, size_t *count_out)
{
	char key[64], next[64], value[512];
	size_t count = 0, capacity = 0;
	char *rows = NULL;
	void *cursor = NULL;
	int err = 0;

	if (key_size > sizeof(key) || value_size > sizeof(value))
		return -E2BIG;
	while (!bpf_map_get_next_key(map_fd, cursor, next)) {
		memcpy(key, next, key_size);
		cursor = key;
		/* Every key here starts with its pid. */
		if (pid && *(uint32_t *)key != pid)
			continue;
		if (bpf_map_lookup_elem(map_fd, key, value))
			continue; /* deleted between the two calls */
		err = cp_array__reserve(&rows, &capacity, count + 1, row_size, 64);
		if (err)
			break;
		memset(rows + count * row_size, 0, row_size);
		memcpy(rows + count * row_size + key_at, key, key_size);
		memcpy(rows + count * row_size + value_at, value, value_size);
		count++;
	}
	if (err) {
		free(rows);
		return err;
	}
	*rows_out = rows;
	*count_out = count;
	return 0;
}

/*
 * The maps' (key, value) pairs as collect_rows lays them out; the public rows
 * (cuprobe.h) are then copied from them field by field.
 */
struct kernel_row_image { struct cp_kernel_key key; struct cp_kernel_stat stat; };
struct api_row_image { struct cp_api_key key; struct cp_api_stat stat; };
struct mem_row_image { uint32_t pid; uint32_t pad; struct cp_mem_stat stat; };
struct alloc_row_image { struct cp_alloc_key key; struct cp_alloc_info info; };
struct device_mem_image { struct cp_device_key key; struct cp_device_mem_stat stat; };
struct copy_image { struct cp_copy_key key; struct cp_copy_stat stat; };
struct nccl_image { struct cp_nccl_key key; struct cp_nccl_stat stat; };

static void kernel_row(struct cp_kernel_row *row, const struct kernel_row_image *image)
{
	row->pid = image->key.pid;
	row->graph = image->stat.graph ? 1 : 0;
	row->handle = image->key.handle;
	row->launches = image->stat.launches;
	row->threads = image->stat.threads;
	row->device = image->key.device;
}

static void api_row(struct cp_api_row *row, const struct api_row_image *image)
{
	int b;

	row->pid = image->key.pid;
	row->api = image->key.api;
	row->calls = image->stat.calls;
	row->timed = image->stat.timed;
	row->errors = image->stat.errors;
	row->total_ns = image->stat.total_ns;
	for (b = 0; b < CP_HIST_BUCKETS; b++)
		row->histogram[b] = image->stat.histogram[b];
}

static void mem_row(struct cp_mem_row *row, const struct mem_row_image *image)
{
	row->pid = image->pid;
	row->live_bytes = image->stat.live_bytes;
	row->peak_bytes = image->stat.peak_bytes;
	row->live_allocations = image->stat.live_allocations;
	row->host_live_bytes = image->stat.host_live_bytes;
	row->allocations = image->stat.allocations;
	row->frees = image->stat.frees;
	row->unknown_frees = image->stat.unknown_frees;
	row->vmm_live_bytes = image->stat.vmm_live_bytes;
	row->reserved_bytes = image->stat.reserved_bytes;
	row->host_live_allocations = image->stat.host_live_allocations;
	row->vmm_peak_bytes = image->stat.vmm_peak_bytes;
}

static void alloc_row(struct cp_live_alloc *row, const struct alloc_row_image *image)
{
	row->pid = image->key.pid;
	row->kind = image->info.kind;
	row->ptr = image->key.ptr;
	row->bytes = image->info.bytes;
	row->stack_id = image->info.stack_id;
	row->caller = image->info.caller;
	row->time_ns = image->info.time_ns;
	row->api = image->info.api;
}

/* Per-device rows: allocations by device, copies by device and direction. */
static int device_rows(const struct cp_tracer *tracer, uint32_t pid, struct cp_stats_snapshot *out)
{
	struct device_mem_image *mems = NULL;
	struct copy_image *copies = NULL;
	size_t mem_count = 0, copy_count = 0, i;
	int err;

	err = collect_rows(bpf_map__fd(tracer->skel->maps.device_mem_stats),
			   sizeof(struct cp_device_key), sizeof(struct cp_device_mem_stat),
			   sizeof(*mems), 0, offsetof(struct device_mem_image, stat), pid,
			   (void **)&mems, &mem_count);
	if (!err)
		err = collect_rows(bpf_map__fd(tracer->skel->maps.copy_stats), sizeof(struct cp_copy_key),
				   sizeof(struct cp_copy_stat), sizeof(*copies), 0,
				   offsetof(struct copy_image, stat), pid, (void **)&copies, &copy_count);
	if (!err) {
		out->device_mems = calloc(mem_count ? mem_count : 1, sizeof(*out->device_mems));
		out->copies = calloc(copy_count ? copy_count : 1, sizeof(*out->copies));
		if (!out->device_mems || !out->copies)
			err = -ENOMEM;
	}
	for (i = 0; !err && i < mem_count; i++)
		out->device_mems[i] = (struct cp_device_mem_row){
			.pid = mems[i].key.pid, .device = mems[i].key.device,
			.live_bytes = mems[i].stat.live_bytes, .peak_bytes = mems[i].stat.peak_bytes,
			.allocations = mems[i].stat.allocations, .frees = mems[i].stat.frees,
		};
	for (i = 0; !err && i < copy_count; i++)
		out->copies[i] = (struct cp_copy_row){
			.pid = copies[i].key.pid, .device = copies[i].key.device,
			.direction = copies[i].key.direction, .copies = copies[i].stat.copies,
			.bytes = copies[i].stat.bytes,
		};
	if (!err) {
		out->device_mem_count = mem_count;
		out->copy_count = copy_count;
	}
	free(mems);
	free(copies);
	return err;
}

/* NCCL rows: (pid, communicator, op). */
static int nccl_rows(const struct cp_tracer *tracer, uint32_t pid, struct cp_stats_snapshot *out)
{
	struct nccl_image *images = NULL;
	size_t count = 0, i;
	int err;

	err = collect_rows(bpf_map__fd(tracer->skel->maps.nccl_stats), sizeof(struct cp_nccl_key),
			   sizeof(struct cp_nccl_stat), sizeof(*images), 0,
			   offsetof(struct nccl_image, stat), pid, (void **)&images, &count);
	if (err)
		return err;
	out->nccls = calloc(count ? count : 1, sizeof(*out->nccls));
	if (!out->nccls) {
		free(images);
		return -ENOMEM;
	}
	for (i = 0; i < count; i++)
		out->nccls[i] = (struct cp_nccl_row){
			.pid = images[i].key.pid, .op = images[i].key.op, .comm = images[i].key.comm,
			.comm_id = images[i].stat.comm_id, .rank = images[i].stat.rank,
			.nranks = images[i].stat.nranks, .device = images[i].stat.device,
			.calls = images[i].stat.calls, .errors = images[i].stat.errors,
			.bytes = images[i].stat.bytes, .enqueue_ns = images[i].stat.enqueue_ns,
			.launches = images[i].stat.launches, .copies = images[i].stat.copies,
			.no_gpu_work = images[i].stat.no_gpu_work,
		};
	out->nccl_count = count;
	free(images);
	return 0;
}

int cp_tracer__snapshot(const struct cp_tracer *tracer, uint32_t pid,
			struct cp_stats_snapshot *out)
{
	struct kernel_row_image *kernels = NULL;
	struct api_row_image *apis = NULL;
	struct mem_row_image *mems = NULL;
	size_t kernel_count = 0, api_count = 0, mem_count = 0, i;
	int err;

	if (!tracer || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	err = collect_rows(bpf_map__fd(tracer->skel->maps.kernel_stats), sizeof(struct cp_kernel_key),
			   sizeof(struct cp_kernel_stat), sizeof(*kernels), 0,
			   offsetof(struct kernel_row_image, stat), pid, (void **)&kernels, &kernel_count);
	if (!err)
		err = collect_rows(bpf_map__fd(tracer->skel->maps.api_stats), sizeof(struct cp_api_key),
				   sizeof(struct cp_api_stat), sizeof(*apis), 0,
				   offsetof(struct api_row_image, stat), pid, (void **)&apis, &api_count);
	if (!err)
		err = collect_rows(bpf_map__fd(tracer->skel->maps.mem_stats), sizeof(uint32_t),
				   sizeof(struct cp_mem_stat), sizeof(*mems), 0,
				   offsetof(struct mem_row_image, stat), pid, (void **)&mems, &mem_count);
	if (err)
		goto err_free;
	out->kernels = calloc(kernel_count ? kernel_count : 1, sizeof(*out->kernels));
	out->apis = calloc(api_count ? api_count : 1, sizeof(*out->apis));
	out->mems = calloc(mem_count ? mem_count : 1, sizeof(*out->mems));
	if (!out->kernels || !out->apis || !out->mems) {
		err = -ENOMEM;
		cp_stats_snapshot__release(out);
		goto err_free;
	}
	for (i = 0; i < kernel_count; i++)
		kernel_row(&out->kernels[i], &kernels[i]);
	for (i = 0; i < api_count; i++)
		api_row(&out->apis[i], &apis[i]);
	for (i = 0; i < mem_count; i++)
		mem_row(&out->mems[i], &mems[i]);
	out->kernel_count = kernel_count;
	out->api_count = api_count;
	out->mem_count = mem_count;
	err = device_rows(tracer, pid, out);
	if (!err)
		err = nccl_rows(tracer, pid, out);
	if (err)
		cp_stats_snapshot__release(out);
err_free:
	free(kernels);
	free(apis);
	free(mems);
	return err;
}

void cp_stats_snapshot__release(struct cp_stats_snapshot *snapshot)
{
	if (!snapshot)
		return;
	free(snapshot->kernels);
	free(snapshot->apis);
	free(snapshot->mems);
	free(snapshot->device_mems);
	free(snapshot->copies);
	free(snapshot->nccls);
	memset(snapshot, 0, sizeof(*snapshot));
}

int cp_tracer__live_allocs(const struct cp_tracer *tracer, uint32_t pid,
			   struct cp_live_alloc **rows, size_t *count)
{
	struct alloc_row_image *images = NULL;
	size_t n = 0, i;
	int err;

	if (!tracer || !rows || !count)
		return -EINVAL;
	err = collect_rows(bpf_map__fd(tracer->skel->maps.live_allocs), sizeof(struct cp_alloc_key),
			   sizeof(struct cp_alloc_info), sizeof(*images), 0,
			   offsetof(struct alloc_row_image, info), pid, (void **)&images, &n);
	if (err)
		return err;
	*rows = calloc(n ? n : 1, sizeof(**rows));
	if (!*rows) {
		free(images);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		alloc_row(&(*rows)[i], &images[i]);
	*count = n;
	free(images);
	return 0;
}

int cp_tracer__stack(const struct cp_tracer *tracer, int64_t stack_id, uint64_t *ips, size_t max)
{
	__u64 frames[CP_STACK_DEPTH] = { 0 };
	uint32_t key = (uint32_t)stack_id;
	size_t depth;

	if (!tracer || !ips || stack_id < 0)
		return -EINVAL;
	if (bpf_map_lookup_elem(bpf_map__fd(tracer->skel->maps.cuprobe_stacks), &key, frames))
		return -ENOENT;
	for (depth = 0; depth < CP_STACK_DEPTH && depth < max && frames[depth]; depth++)
		ips[depth] = frames[depth];
	return (int)depth;
}

static int cmp_pid(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool pid_in(uint32_t pid, const uint32_t *sorted, size_t count)
{
	return bsearch(&pid, sorted, count, sizeof(*sorted), cmp_pid) != NULL;
}

/*
 * Deletes every key of map whose leading pid is one of sorted[]: the map is
 * walked once, keys gathered first, then deleted.
 */
static void delete_pid_rows(int map_fd, size_t key_size, const uint32_t *sorted, size_t pid_count)
{
	char key[64], next[64];
	char *doomed = NULL;
	size_t count = 0, capacity = 0, i;
	void *cursor = NULL;

	while (!bpf_map_get_next_key(map_fd, cursor, next)) {
		memcpy(key, next, key_size);
		cursor = key;
		if (!pid_in(*(uint32_t *)key, sorted, pid_count))
			continue;
		if (cp_array__reserve(&doomed, &capacity, count + 1, key_size, 64))
			break;
		memcpy(doomed + count * key_size, key, key_size);
		count++;
	}
	for (i = 0; i < count; i++)
		bpf_map_delete_elem(map_fd, doomed + i * key_size);
	free(doomed);
}

int cp_tracer__forget_pids(struct cp_tracer *tracer, const uint32_t *pids, size_t pid_count)
{
	struct cp_live_alloc *allocs = NULL;
	uint32_t *sorted;
	size_t count = 0, i;

	if (!tracer || (!pids && pid_count))
		return -EINVAL;
	if (!pid_count)
		return 0;
	sorted = malloc(pid_count * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, pids, pid_count * sizeof(*sorted));
	qsort(sorted, pid_count, sizeof(*sorted), cmp_pid);
	/* The stacks of their live allocations go too: a dead process's stacks serve nobody. */
	if (!cp_tracer__live_allocs(tracer, pid_count == 1 ? sorted[0] : 0, &allocs, &count)) {
		for (i = 0; i < count; i++) {
			uint32_t id = (uint32_t)allocs[i].stack_id;

			if (allocs[i].stack_id >= 0 && pid_in(allocs[i].pid, sorted, pid_count))
				bpf_map_delete_elem(bpf_map__fd(tracer->skel->maps.cuprobe_stacks), &id);
		}
		free(allocs);
	}
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.kernel_stats), sizeof(struct cp_kernel_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.api_stats), sizeof(struct cp_api_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.mem_stats), sizeof(uint32_t), sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.py_launch_stacks), sizeof(uint32_t), sorted,
			pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.device_mem_stats), sizeof(struct cp_device_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.copy_stats), sizeof(struct cp_copy_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.live_allocs), sizeof(struct cp_alloc_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.vmm_handles), sizeof(struct cp_vmm_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.vmm_mappings), sizeof(struct cp_vmm_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.vmm_ranges), sizeof(struct cp_vmm_key),
			sorted, pid_count);
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.nccl_stats), sizeof(struct cp_nccl_key),
			sorted, pid_count);
	/* Communicators of a process that exited without destroying them. */
	delete_pid_rows(bpf_map__fd(tracer->skel->maps.cuprobe_nccl_comms),
			sizeof(struct cuprobe_nccl_comm_key), sorted, pid_count);
	free(sorted);
	return 0;
}

int cp_tracer__python_launch_stack(const struct cp_tracer *tracer, uint32_t pid,
				   uint64_t *stack_id)
{
	if (!tracer || !pid || !stack_id)
		return -EINVAL;
	if (bpf_map__lookup_elem(tracer->skel->maps.py_launch_stacks, &pid, sizeof(pid), stack_id,
				 sizeof(*stack_id), 0))
		return -ENOENT;
	return 0;
}

int cp_tracer__forget_pid(struct cp_tracer *tracer, uint32_t pid)
{
	if (!tracer || !pid)
		return -EINVAL;
	return cp_tracer__forget_pids(tracer, &pid, 1);
}

uint64_t cp_histogram__total(const uint64_t histogram[CP_HIST_BUCKETS])
{
	uint64_t total = 0;
	int b;

	for (b = 0; b < CP_HIST_BUCKETS; b++)
		total += histogram[b];
	return total;
}

uint64_t cp_histogram__percentile(const uint64_t histogram[CP_HIST_BUCKETS], double p)
{
	uint64_t total = cp_histogram__total(histogram), seen = 0, want;
	int b;

	if (!total || p <= 0)
		return 0;
	if (p > 1)
		p = 1;
	want = (uint64_t)(p * (double)total + 0.999999);
	if (!want)
		want = 1;
	for (b = 0; b < CP_HIST_BUCKETS; b++) {
		seen += histogram[b];
		if (seen >= want)
			return b ? 1ull << b : 1;
	}
	return 1ull << (CP_HIST_BUCKETS - 1);
}
