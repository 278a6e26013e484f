// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fold_bench: what a device counter costs in each memory design a device
 * program's map could use (tests/gpu/fold_bench.sh, docs/device-programs.md).
 * Hand-written CUDA, no cuprobe: it measures the designs, not the translator.
 *
 *   fold_bench [ELEMENTS...]     (default 65536 1048576 16777216)
 *
 * Each variant is vec_add (blocks of 256) whose every warp adds its active
 * thread count to one counter, the way the translator's per-warp
 * aggregation does; the counter's final home is a word of host memory
 * mapped to the GPU (where a kernel BPF map's values are). Variants:
 *
 *   plain       vec_add alone (the baseline)
 *   host        a red per warp straight into the host word (device maps before
 *               their shadows)
 *   device      a red per warp into one word of device memory (never folded:
 *               contention alone)
 *   replicas    a red per warp into one of 128 device words picked by the SM
 *               (never folded: the floor of any shadow design)
 *   warp_done   replicas + each warp counts its threads into one of 512 per-group
 *               counters (groups of blocks); the warp that completes its group
 *               counts groups; the last warp of the launch folds the replicas
 *               into the host word
 *   block_done  replicas + each block counts its warps in shared memory (set up
 *               by its first thread, one barrier at entry); the block that
 *               completes its group counts groups; the last warp folds
 *   block_one_counter  block_done with one counter for all the launch's
 *               blocks instead of groups
 *   fold_kernel replicas + a one-warp kernel after each launch on the stream folds
 *
 * Every variant that folds is checked exact: the host word must equal
 * launches x elements. GPU time by CUDA events over a run of launches,
 * variants interleaved, the median of ROUNDS rounds. Prints one line a
 * variant and size:
 *   fold_bench: elements=E variant=V per_launch_ns=T ratio=R exact=yes|no|n/a
 * Exit status 1 when a CUDA call fails or a folding variant is not exact.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define REPLICAS 128
#define REPLICA_STRIDE 16 /* u64 words: one 128-byte line each */
#define GROUPS 512
#define ROUNDS 5
#define BLOCK 256

enum variant {
	PLAIN, HOST, DEVICE, REPLICAS_ONLY, WARP_DONE, BLOCK_DONE, BLOCK_ONE_COUNTER, FOLD_KERNEL, VARIANTS
};
static const char *const variant_names[VARIANTS] = {
	"plain", "host", "device", "replicas", "warp_done", "block_done", "block_one_counter",
	"fold_kernel",
};

__device__ unsigned long long shadow[REPLICAS * REPLICA_STRIDE];
__device__ unsigned long long one_word;
__device__ unsigned int group_count[GROUPS];
__device__ unsigned int groups_done;

__device__ __forceinline__ unsigned int sm_id(void)
{
	unsigned int id;

	asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
	return id;
}

/* The replicas' sum moved into the host word by the warp's active lanes. */
__device__ void fold(unsigned int mask, unsigned long long *host)
{
	int lane = threadIdx.x & 31, active = __popc(mask), rank = __popc(mask & ((1u << lane) - 1));
	unsigned long long sum = 0;

	__threadfence();
	for (int r = rank; r < REPLICAS; r += active)
		sum += atomicExch(&shadow[r * REPLICA_STRIDE], 0ull);
	for (int offset = 16; offset; offset >>= 1)
		sum += __shfl_xor_sync(mask, sum, offset);
	if (rank == 0 && sum)
		atomicAdd(host, sum);
}

/* Counted a group done; true in the warp that completed the launch's last group. */
__device__ bool group_done(unsigned int total_blocks)
{
	unsigned int groups = total_blocks < GROUPS ? total_blocks : GROUPS;

	__threadfence();
	if (atomicAdd(&groups_done, 1u) + 1 != groups)
		return false;
	groups_done = 0;
	return true;
}

template <int VARIANT>
__global__ void counted_vec_add(const float *a, const float *b, float *c, int n,
				unsigned long long *host)
{
	__shared__ unsigned int block_threads_done;
	unsigned int total_blocks = gridDim.x, group = blockIdx.x % GROUPS;
	unsigned int blocks_in_group = total_blocks / GROUPS + (group < total_blocks % GROUPS);
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (VARIANT == BLOCK_DONE || VARIANT == BLOCK_ONE_COUNTER) {
		if (threadIdx.x == 0)
			block_threads_done = 0;
		__syncthreads();
	}
	if (i < n)
		c[i] = a[i] + b[i];
	if (VARIANT == PLAIN)
		return;

	unsigned int mask = __activemask(), count = __popc(mask);
	int lane = threadIdx.x & 31, leader = __ffs(mask) - 1;
	bool last = false;

	if (lane == leader) {
		switch (VARIANT) {
		case HOST: atomicAdd(host, (unsigned long long)count); break;
		case DEVICE: atomicAdd(&one_word, (unsigned long long)count); break;
		default: atomicAdd(&shadow[(sm_id() % REPLICAS) * REPLICA_STRIDE], (unsigned long long)count);
		}
		if (VARIANT == WARP_DONE) {
			unsigned int want = blocks_in_group * blockDim.x;

			__threadfence();
			if (atomicAdd(&group_count[group], count) + count == want) {
				group_count[group] = 0;
				last = group_done(total_blocks);
			}
		} else if (VARIANT == BLOCK_ONE_COUNTER) {
			__threadfence_block();
			if (atomicAdd(&block_threads_done, count) + count == blockDim.x) {
				__threadfence();
				if (atomicAdd(&groups_done, 1u) + 1 == total_blocks) {
					groups_done = 0;
					last = true;
				}
			}
		} else if (VARIANT == BLOCK_DONE) {
			__threadfence_block();
			if (atomicAdd(&block_threads_done, count) + count == blockDim.x &&
			    atomicAdd(&group_count[group], 1u) + 1 == blocks_in_group) {
				group_count[group] = 0;
				last = group_done(total_blocks);
			}
		}
	}
	if (VARIANT == WARP_DONE || VARIANT == BLOCK_DONE || VARIANT == BLOCK_ONE_COUNTER) {
		if (__shfl_sync(mask, (int)last, leader))
			fold(mask, host);
	}
}

__global__ void fold_kernel(unsigned long long *host)
{
	fold(0xffffffffu, host);
}

#define CHECK(call)								\
	do {									\
		cudaError_t err_ = (call);					\
		if (err_ != cudaSuccess) {					\
			fprintf(stderr, "fold_bench: %s: %s\n", #call, cudaGetErrorString(err_)); \
			exit(1);						\
		}								\
	} while (0)

typedef void (*kernel_fn)(const float *, const float *, float *, int, unsigned long long *);
static const kernel_fn kernels[VARIANTS] = {
	counted_vec_add<PLAIN>, counted_vec_add<HOST>, counted_vec_add<DEVICE>,
	counted_vec_add<REPLICAS_ONLY>, counted_vec_add<WARP_DONE>, counted_vec_add<BLOCK_DONE>,
	counted_vec_add<BLOCK_ONE_COUNTER>, counted_vec_add<REPLICAS_ONLY>,
};

static void launch(int v, int blocks, const float *a, const float *b, float *c, int n,
		   unsigned long long *host)
{
	kernels[v]<<<blocks, BLOCK>>>(a, b, c, n, host);
	if (v == FOLD_KERNEL)
		fold_kernel<<<1, 32>>>(host);
}

static bool folds(int v)
{
	return v == WARP_DONE || v == BLOCK_DONE || v == BLOCK_ONE_COUNTER || v == FOLD_KERNEL;
}

static int run_size(int n)
{
	int blocks = (n + BLOCK - 1) / BLOCK, failed = 0;
	/* The host design costs some microseconds a warp: fewer launches, same median. */
	int launches_of[VARIANTS];
	std::vector<float> times[VARIANTS];
	unsigned long long *host, *host_device, zero[REPLICAS * REPLICA_STRIDE] = { 0 };
	unsigned long long launched[VARIANTS] = { 0 };
	bool exact[VARIANTS];
	float *a, *b, *c;
	cudaEvent_t start, stop;

	for (int v = 0; v < VARIANTS; v++) {
		launches_of[v] = v == HOST ? 3 : 50;
		exact[v] = true;
	}
	CHECK(cudaMalloc(&a, (size_t)n * 4));
	CHECK(cudaMalloc(&b, (size_t)n * 4));
	CHECK(cudaMalloc(&c, (size_t)n * 4));
	CHECK(cudaMemset(a, 0, (size_t)n * 4));
	CHECK(cudaMemset(b, 0, (size_t)n * 4));
	CHECK(cudaHostAlloc(&host, sizeof(*host), cudaHostAllocMapped));
	CHECK(cudaHostGetDevicePointer(&host_device, host, 0));
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	for (int round = 0; round < ROUNDS; round++) {
		for (int v = 0; v < VARIANTS; v++) {
			float ms;

			/* Each variant starts from empty replicas and a zero host word. */
			CHECK(cudaDeviceSynchronize());
			CHECK(cudaMemcpyToSymbol(shadow, zero, sizeof(zero)));
			*host = 0;
			launch(v, blocks, a, b, c, n, host_device); /* warm-up */
			CHECK(cudaEventRecord(start));
			for (int l = 0; l < launches_of[v]; l++)
				launch(v, blocks, a, b, c, n, host_device);
			CHECK(cudaEventRecord(stop));
			CHECK(cudaEventSynchronize(stop));
			CHECK(cudaGetLastError());
			CHECK(cudaEventElapsedTime(&ms, start, stop));
			times[v].push_back(ms * 1e6f / launches_of[v]);
			launched[v] = launches_of[v] + 1;
			if ((folds(v) || v == HOST) &&
			    *(volatile unsigned long long *)host != launched[v] * (unsigned long long)n)
				exact[v] = false;
		}
	}
	std::sort(times[PLAIN].begin(), times[PLAIN].end());
	float plain = times[PLAIN][ROUNDS / 2];
	for (int v = 0; v < VARIANTS; v++) {
		std::sort(times[v].begin(), times[v].end());
		float median = times[v][ROUNDS / 2];
		bool checked = folds(v) || v == HOST;

		printf("fold_bench: elements=%d variant=%s per_launch_ns=%.0f ratio=%.3f exact=%s\n", n,
		       variant_names[v], median, median / plain,
		       checked ? (exact[v] ? "yes" : "no") : "n/a");
		if (checked && !exact[v])
			failed = 1;
	}
	CHECK(cudaFree(a));
	CHECK(cudaFree(b));
	CHECK(cudaFree(c));
	CHECK(cudaFreeHost(host));
	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	return failed;
}

int main(int argc, char **argv)
{
	std::vector<int> sizes;
	int failed = 0;

	for (int i = 1; i < argc; i++) {
		char *end;
		long n = strtol(argv[i], &end, 10);

		if (*end || n < 1 || n > (1 << 28)) {
			fprintf(stderr, "usage: fold_bench [ELEMENTS...] (each 1 to %d)\n", 1 << 28);
			return 2;
		}
		sizes.push_back((int)n);
	}
	if (sizes.empty())
		sizes = { 65536, 1048576, 16777216 };
	for (int n : sizes)
		failed |= run_size(n);
	return failed;
}
