// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kernel_timing: what device programs cost, timed on the GPU itself
 * (tests/gpu/device_check.sh). Every kernel is timed by a pair of CUDA
 * events around it on one stream, never by the process's wall clock.
 *
 *   kernel_timing overhead ROUNDS LAUNCHES ELEMENTS VARIANT...
 *	The vec_add kernels vec_add_VARIANT (plain, empty, timer, counter,
 *	ring, ring_full: the same code under names that device programs tell
 *	apart),
 *	launched in turn, one of each then again, LAUNCHES of each per round,
 *	all of a round queued before the GPU starts them (struct gate).
 *	Prints per round and variant the median and the minimum of the
 *	per-launch GPU times:
 *	  kernel_timing: overhead round=R kernel=vec_add_V launches=L median_ns=M min_ns=N
 *	then "kernel_timing: overhead elements=E grid=G block=256 result=ok".
 *
 *   kernel_timing syncs ROUNDS LAUNCHES ELEMENTS VARIANT...
 *	The same kernels, each launch followed by cudaStreamSynchronize (a
 *	call that proves kernels done, where cuprobe's injection drains the
 *	counters' shadows and moves the device rings' records), LAUNCHES of a
 *	variant then the next, timed by the process's clock, per round and
 *	variant the mean of launch + sync, and each kernel by events on the
 *	GPU (the median), each launch queued before the GPU starts it:
 *	  kernel_timing: syncs round=R kernel=vec_add_V launches=L per_sync_ns=N median_ns=M
 *
 *   kernel_timing exact LAUNCHES ELEMENTS WIDTH HEIGHT
 *	vec_add_kernel (1D, ELEMENTS, blocks of 256) and add_2d_kernel (a
 *	WIDTH x HEIGHT matrix, blocks of 16 x 8), LAUNCHES each, every launch
 *	between two globaltimer_stamp kernels (one thread each, reading
 *	%globaltimer) and two events. Prints per kernel its shape and the
 *	last launch's bounds (what a per-block map holds at the end):
 *	  kernel_timing: exact kernel=K grid=GXxGYxGZ block=BXxBYxBZ launches=L
 *	    threads_per_launch=T stamp_before_ns=S0 stamp_after_ns=S1 event_ns=E result=ok
 *
 *   kernel_timing load FATBIN REPEATS
 *	Loads FATBIN (a file) REPEATS times each with cuModuleLoadData and
 *	cuLibraryLoadData, each load timed with every function fetched
 *	(cuModuleGetFunction / cuLibraryGetKernel + cuKernelGetFunction on
 *	each kernel) and then unloaded:
 *	  kernel_timing: load api=A repeat=R kernels=K load_ns=T with_functions_ns=F
 *
 * Bad arguments print usage and exit 2; a failed CUDA call, a wrong sum or
 * a round whose launches the host could not queue within 5 s (the gate
 * opened itself) prints one line and exits 1.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define BLOCK_THREADS 256
#define BLOCK_2D_X 16
#define BLOCK_2D_Y 8
#define MAX_ELEMENTS (1L << 26)
#define MAX_LAUNCHES 10000L
#define MAX_ROUNDS 1000L
#define MAX_SIDE 16384L
#define MAX_REPEATS 100L
#define MAX_FATBIN_BYTES (1L << 30)
#define GATE_TIMEOUT_NS 5000000000ull

/* One body, several names: what the overhead run's device programs tell apart. */
#define VEC_ADD(name)								\
	__global__ void name(const float *a, const float *b, float *c, int n)	\
	{									\
		int i = blockIdx.x * blockDim.x + threadIdx.x;			\
		if (i < n)							\
			c[i] = a[i] + b[i];					\
	}
VEC_ADD(vec_add_kernel)
VEC_ADD(vec_add_plain)
VEC_ADD(vec_add_empty)
VEC_ADD(vec_add_timer)
VEC_ADD(vec_add_counter)
VEC_ADD(vec_add_ring)
VEC_ADD(vec_add_ring_full)

/* Threads outside the matrix return early: exits on two paths. */
__global__ void add_2d_kernel(const float *a, const float *b, float *c, int width, int height)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;

	if (x >= width || y >= height)
		return;
	c[y * width + x] = a[y * width + x] + b[y * width + x];
}

/*
 * Holds the stream until the host has queued what follows it (struct gate).
 * Opens itself after GATE_TIMEOUT_NS, saying so, so that a host that cannot
 * queue a round (a full launch queue) never waits on it forever.
 */
__global__ void launch_gate(const volatile unsigned int *open, unsigned int ticket,
			    unsigned int *opened_itself)
{
	unsigned long long started, now;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(started));
	while (*open < ticket) {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
		if (now - started > GATE_TIMEOUT_NS) {
			*opened_itself = 1;
			return;
		}
		__nanosleep(1000);
	}
}

/* The GPU's clock between two kernels of the stream: bounds in the globaltimer's own clock. */
__global__ void globaltimer_stamp(unsigned long long *out)
{
	unsigned long long now;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	*out = now;
}

static const char *const variant_names[] = { "plain", "empty", "timer", "counter", "ring", "ring_full" };
static void (*const variant_kernels[])(const float *, const float *, float *, int) = {
	vec_add_plain, vec_add_empty, vec_add_timer, vec_add_counter, vec_add_ring, vec_add_ring_full
};
#define VARIANTS (sizeof(variant_names) / sizeof(variant_names[0]))

static void fail_cuda(const char *call, const char *error)
{
	fprintf(stderr, "kernel_timing: %s failed: %s\n", call, error);
	exit(EXIT_FAILURE);
}

static void rt(cudaError_t rc, const char *call)
{
	if (rc != cudaSuccess)
		fail_cuda(call, cudaGetErrorName(rc));
}

static void drv(CUresult rc, const char *call)
{
	const char *name = NULL;

	if (rc == CUDA_SUCCESS)
		return;
	cuGetErrorName(rc, &name);
	fail_cuda(call, name ? name : "unknown error");
}

/*
 * What the events time is the kernels alone: the launches of a round (or
 * one launch) are queued behind launch_gate, which the host opens once they
 * all are. Without it, on a GPU that waits for work, a start event is
 * stamped as soon as it is queued and the host's time until the kernel
 * follows it is counted as the kernel's: the driver's launch path, and
 * under cuprobe a launch's uprobe and the injection's wrapper.
 */
struct gate {
	unsigned int *words;        /* pinned, mapped: [0] open up to, [1] opened itself */
	unsigned int *words_device;
	unsigned int ticket;
};

static void gate_make(struct gate *g)
{
	rt(cudaHostAlloc(&g->words, 2 * sizeof(*g->words), cudaHostAllocMapped), "cudaHostAlloc");
	g->words[0] = g->words[1] = 0;
	rt(cudaHostGetDevicePointer(&g->words_device, g->words, 0), "cudaHostGetDevicePointer");
	g->ticket = 0;
}

static void gate_close(struct gate *g)
{
	launch_gate<<<1, 1>>>(g->words_device, ++g->ticket, g->words_device + 1);
	rt(cudaGetLastError(), "launch_gate<<<>>>");
}

static void gate_open(struct gate *g)
{
	__atomic_store_n(&g->words[0], g->ticket, __ATOMIC_RELEASE);
}

/* After a synchronization: a gate that opened itself timed nothing right. */
static void gate_check(const struct gate *g)
{
	if (__atomic_load_n(&g->words[1], __ATOMIC_ACQUIRE)) {
		fprintf(stderr, "kernel_timing: the launch gate opened itself after %llu s: the host "
			"could not queue a round's launches in time; fewer LAUNCHES\n",
			GATE_TIMEOUT_NS / 1000000000ull);
		exit(EXIT_FAILURE);
	}
}

static void gate_free(struct gate *g)
{
	rt(cudaFreeHost(g->words), "cudaFreeHost");
}

static void usage(void)
{
	fprintf(stderr,
		"usage: kernel_timing overhead ROUNDS LAUNCHES ELEMENTS VARIANT...\n"
		"       kernel_timing syncs ROUNDS LAUNCHES ELEMENTS VARIANT...\n"
		"       kernel_timing exact LAUNCHES ELEMENTS WIDTH HEIGHT\n"
		"       kernel_timing load FATBIN REPEATS\n"
		"  VARIANT: plain, empty, timer, counter, ring, ring_full (vec_add_VARIANT)\n"
		"  ROUNDS 1..%ld, LAUNCHES 1..%ld, ELEMENTS 1..%ld, WIDTH/HEIGHT 1..%ld, REPEATS 1..%ld\n",
		MAX_ROUNDS, MAX_LAUNCHES, MAX_ELEMENTS, MAX_SIDE, MAX_REPEATS);
	exit(2);
}

static long number(const char *text, long min, long max)
{
	char *end;
	long value;

	errno = 0;
	value = strtol(text, &end, 10);
	if (!*text || errno || *end || value < min || value > max)
		usage();
	return value;
}

/* Device buffers a, b, c of n floats, a and b of small integers (exact sums). */
struct buffers {
	std::vector<float> a, b;
	float *dev_a, *dev_b, *dev_c;
	int n;
};

static void buffers_make(struct buffers *buf, int n)
{
	size_t bytes = (size_t)n * sizeof(float);

	buf->n = n;
	buf->a.resize(n);
	buf->b.resize(n);
	for (int i = 0; i < n; i++) {
		buf->a[i] = (float)(i % 1000);
		buf->b[i] = (float)(2 * (i % 1000) + 1);
	}
	rt(cudaMalloc(&buf->dev_a, bytes), "cudaMalloc");
	rt(cudaMalloc(&buf->dev_b, bytes), "cudaMalloc");
	rt(cudaMalloc(&buf->dev_c, bytes), "cudaMalloc");
	rt(cudaMemcpy(buf->dev_a, buf->a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
	rt(cudaMemcpy(buf->dev_b, buf->b.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

/* c == a + b over the first n elements (c zeroed before the exact runs: a kernel that never ran fails). */
static void buffers_check(const struct buffers *buf, int n, const char *kernel)
{
	std::vector<float> c(n);

	rt(cudaMemcpy(c.data(), buf->dev_c, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost),
	   "cudaMemcpy");
	for (int i = 0; i < n; i++)
		if (c[i] != buf->a[i] + buf->b[i]) {
			fprintf(stderr, "kernel_timing: %s: wrong sum at %d: %g\n", kernel, i,
				(double)c[i]);
			exit(EXIT_FAILURE);
		}
}

static void buffers_free(struct buffers *buf)
{
	rt(cudaFree(buf->dev_a), "cudaFree");
	rt(cudaFree(buf->dev_b), "cudaFree");
	rt(cudaFree(buf->dev_c), "cudaFree");
}

static unsigned long long event_ns(cudaEvent_t start, cudaEvent_t stop)
{
	float ms;

	rt(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
	return (unsigned long long)(ms * 1e6 + 0.5);
}

/* MODE ROUNDS LAUNCHES ELEMENTS VARIANT...: the numbers, and the variants by index. */
static void variant_args(int argc, char **argv, long *rounds, long *launches, long *elements,
			 std::vector<size_t> *chosen)
{
	if (argc < 6)
		usage();
	*rounds = number(argv[2], 1, MAX_ROUNDS);
	*launches = number(argv[3], 1, MAX_LAUNCHES);
	*elements = number(argv[4], 1, MAX_ELEMENTS);
	for (int i = 5; i < argc; i++) {
		size_t v = 0;

		while (v < VARIANTS && strcmp(argv[i], variant_names[v]))
			v++;
		if (v == VARIANTS)
			usage();
		chosen->push_back(v);
	}
}

static int overhead(int argc, char **argv)
{
	long rounds, launches, elements;
	std::vector<size_t> chosen;
	struct buffers buf;

	variant_args(argc, argv, &rounds, &launches, &elements, &chosen);

	const int n = (int)elements;
	const unsigned int grid = (unsigned int)((n + BLOCK_THREADS - 1) / BLOCK_THREADS);
	const size_t count = chosen.size();
	std::vector<cudaEvent_t> starts(count * launches), stops(count * launches);
	struct gate gate;

	buffers_make(&buf, n);
	gate_make(&gate);
	for (size_t i = 0; i < starts.size(); i++) {
		rt(cudaEventCreate(&starts[i]), "cudaEventCreate");
		rt(cudaEventCreate(&stops[i]), "cudaEventCreate");
	}
	/* A launch of each first: modules loaded, clocks up, nothing of it timed. */
	for (size_t k = 0; k < count; k++)
		variant_kernels[chosen[k]]<<<grid, BLOCK_THREADS>>>(buf.dev_a, buf.dev_b, buf.dev_c, n);
	rt(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

	for (long round = 1; round <= rounds; round++) {
		gate_close(&gate);
		/* Interleaved: one launch of each variant, then again. */
		for (long l = 0; l < launches; l++)
			for (size_t k = 0; k < count; k++) {
				size_t slot = k * launches + l;

				rt(cudaEventRecord(starts[slot]), "cudaEventRecord");
				variant_kernels[chosen[k]]<<<grid, BLOCK_THREADS>>>(buf.dev_a, buf.dev_b,
										   buf.dev_c, n);
				rt(cudaGetLastError(), "vec_add_<variant><<<>>>");
				rt(cudaEventRecord(stops[slot]), "cudaEventRecord");
			}
		gate_open(&gate);
		rt(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
		gate_check(&gate);
		for (size_t k = 0; k < count; k++) {
			std::vector<unsigned long long> ns(launches);

			for (long l = 0; l < launches; l++)
				ns[l] = event_ns(starts[k * launches + l], stops[k * launches + l]);
			std::sort(ns.begin(), ns.end());
			printf("kernel_timing: overhead round=%ld kernel=vec_add_%s launches=%ld "
			       "median_ns=%llu min_ns=%llu\n", round, variant_names[chosen[k]], launches,
			       ns[launches / 2], ns[0]);
		}
	}
	buffers_check(&buf, n, "vec_add");
	for (size_t i = 0; i < starts.size(); i++) {
		rt(cudaEventDestroy(starts[i]), "cudaEventDestroy");
		rt(cudaEventDestroy(stops[i]), "cudaEventDestroy");
	}
	gate_free(&gate);
	buffers_free(&buf);
	printf("kernel_timing: overhead elements=%d grid=%u block=%d result=ok\n", n, grid,
	       BLOCK_THREADS);
	return 0;
}

/* Launch and synchronize, LAUNCHES times a variant: what a proof (and its drain) costs. */
static int syncs(int argc, char **argv)
{
	long rounds, launches, elements;
	std::vector<size_t> chosen;
	struct buffers buf;

	variant_args(argc, argv, &rounds, &launches, &elements, &chosen);

	const int n = (int)elements;
	const unsigned int grid = (unsigned int)((n + BLOCK_THREADS - 1) / BLOCK_THREADS);

	std::vector<cudaEvent_t> starts(launches), stops(launches);
	std::vector<unsigned long long> kernel_ns(launches);
	struct gate gate;

	buffers_make(&buf, n);
	gate_make(&gate);
	for (long l = 0; l < launches; l++) {
		rt(cudaEventCreate(&starts[l]), "cudaEventCreate");
		rt(cudaEventCreate(&stops[l]), "cudaEventCreate");
	}
	for (size_t k = 0; k < chosen.size(); k++)
		variant_kernels[chosen[k]]<<<grid, BLOCK_THREADS>>>(buf.dev_a, buf.dev_b, buf.dev_c, n);
	rt(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	for (long round = 1; round <= rounds; round++)
		for (size_t k = 0; k < chosen.size(); k++) {
			auto started = std::chrono::steady_clock::now();

			for (long l = 0; l < launches; l++) {
				gate_close(&gate);
				rt(cudaEventRecord(starts[l]), "cudaEventRecord");
				variant_kernels[chosen[k]]<<<grid, BLOCK_THREADS>>>(buf.dev_a, buf.dev_b,
										   buf.dev_c, n);
				rt(cudaGetLastError(), "vec_add_<variant><<<>>>");
				rt(cudaEventRecord(stops[l]), "cudaEventRecord");
				gate_open(&gate);
				rt(cudaStreamSynchronize(0), "cudaStreamSynchronize");
				gate_check(&gate);
			}
			double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() -
									     started).count();
			for (long l = 0; l < launches; l++)
				kernel_ns[l] = event_ns(starts[l], stops[l]);
			std::sort(kernel_ns.begin(), kernel_ns.end());
			printf("kernel_timing: syncs round=%ld kernel=vec_add_%s launches=%ld per_sync_ns=%.0f "
			       "median_ns=%llu\n", round, variant_names[chosen[k]], launches,
			       ns / (double)launches, kernel_ns[launches / 2]);
		}
	buffers_check(&buf, n, "vec_add");
	for (long l = 0; l < launches; l++) {
		rt(cudaEventDestroy(starts[l]), "cudaEventDestroy");
		rt(cudaEventDestroy(stops[l]), "cudaEventDestroy");
	}
	gate_free(&gate);
	buffers_free(&buf);
	printf("kernel_timing: syncs elements=%d grid=%u block=%d result=ok\n", n, grid, BLOCK_THREADS);
	return 0;
}

/* LAUNCHES of one kernel, each between two stamps and two events; prints the last one's bounds. */
template <typename Launch>
static void exact_one(const char *name, long launches, dim3 grid, dim3 block, Launch launch)
{
	unsigned long long *dev_stamps, stamps[2];
	cudaEvent_t start, stop;

	rt(cudaMalloc(&dev_stamps, sizeof(stamps)), "cudaMalloc");
	rt(cudaEventCreate(&start), "cudaEventCreate");
	rt(cudaEventCreate(&stop), "cudaEventCreate");
	for (long l = 0; l < launches; l++) {
		globaltimer_stamp<<<1, 1>>>(dev_stamps);
		rt(cudaEventRecord(start), "cudaEventRecord");
		launch();
		rt(cudaGetLastError(), name);
		rt(cudaEventRecord(stop), "cudaEventRecord");
		globaltimer_stamp<<<1, 1>>>(dev_stamps + 1);
	}
	rt(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	rt(cudaMemcpy(stamps, dev_stamps, sizeof(stamps), cudaMemcpyDeviceToHost), "cudaMemcpy");
	printf("kernel_timing: exact kernel=%s grid=%ux%ux%u block=%ux%ux%u launches=%ld "
	       "threads_per_launch=%llu stamp_before_ns=%llu stamp_after_ns=%llu event_ns=%llu "
	       "result=ok\n", name, grid.x, grid.y, grid.z, block.x, block.y, block.z, launches,
	       (unsigned long long)grid.x * grid.y * grid.z * block.x * block.y * block.z,
	       stamps[0], stamps[1], event_ns(start, stop));
	rt(cudaEventDestroy(start), "cudaEventDestroy");
	rt(cudaEventDestroy(stop), "cudaEventDestroy");
	rt(cudaFree(dev_stamps), "cudaFree");
}

static int exact(int argc, char **argv)
{
	long launches, elements, width, height;
	struct buffers buf;

	if (argc != 6)
		usage();
	launches = number(argv[2], 1, MAX_LAUNCHES);
	elements = number(argv[3], 1, MAX_ELEMENTS);
	width = number(argv[4], 1, MAX_SIDE);
	height = number(argv[5], 1, MAX_SIDE);
	if (width * height > MAX_ELEMENTS)
		usage();

	const int n = (int)elements, w = (int)width, h = (int)height;
	buffers_make(&buf, std::max(n, w * h));

	dim3 grid_1d((n + BLOCK_THREADS - 1) / BLOCK_THREADS), block_1d(BLOCK_THREADS);
	rt(cudaMemset(buf.dev_c, 0, (size_t)buf.n * sizeof(float)), "cudaMemset");
	exact_one("vec_add_kernel", launches, grid_1d, block_1d, [&] {
		vec_add_kernel<<<grid_1d, block_1d>>>(buf.dev_a, buf.dev_b, buf.dev_c, n);
	});
	buffers_check(&buf, n, "vec_add_kernel");

	dim3 block_2d(BLOCK_2D_X, BLOCK_2D_Y);
	dim3 grid_2d((w + BLOCK_2D_X - 1) / BLOCK_2D_X, (h + BLOCK_2D_Y - 1) / BLOCK_2D_Y);
	rt(cudaMemset(buf.dev_c, 0, (size_t)buf.n * sizeof(float)), "cudaMemset");
	exact_one("add_2d_kernel", launches, grid_2d, block_2d, [&] {
		add_2d_kernel<<<grid_2d, block_2d>>>(buf.dev_a, buf.dev_b, buf.dev_c, w, h);
	});
	buffers_check(&buf, w * h, "add_2d_kernel");
	buffers_free(&buf);
	return 0;
}

/* The items of a loaded module or library, by its count and enumeration calls. */
template <typename Handle, typename Item>
static std::vector<Item> enumerate(CUresult (*count_items)(unsigned int *, Handle),
				   CUresult (*list_items)(Item *, unsigned int, Handle), Handle handle)
{
	unsigned int count;

	drv(count_items(&count, handle), "count of a module's functions");
	std::vector<Item> items(count);
	drv(list_items(items.data(), count, handle), "enumeration of a module's functions");
	return items;
}

/* Each function of a loaded module fetched by name: what makes a lazy load do its work. */
static unsigned int fetch_module_functions(CUmodule module)
{
	std::vector<CUfunction> functions = enumerate(cuModuleGetFunctionCount,
						      cuModuleEnumerateFunctions, module);

	for (CUfunction f : functions) {
		const char *name;
		CUfunction again;

		drv(cuFuncGetName(&name, f), "cuFuncGetName");
		drv(cuModuleGetFunction(&again, module, name), "cuModuleGetFunction");
	}
	return (unsigned int)functions.size();
}

/* Each kernel of a loaded library as a function of the current context. */
static unsigned int fetch_library_kernels(CUlibrary library)
{
	std::vector<CUkernel> kernels = enumerate(cuLibraryGetKernelCount, cuLibraryEnumerateKernels,
						  library);

	for (CUkernel k : kernels) {
		CUfunction f;

		drv(cuKernelGetFunction(&f, k), "cuKernelGetFunction");
	}
	return (unsigned int)kernels.size();
}

static double since_ns(std::chrono::steady_clock::time_point start)
{
	return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
		.count();
}

static int load(int argc, char **argv)
{
	long repeats;
	FILE *file;
	long size;

	if (argc != 4)
		usage();
	repeats = number(argv[3], 1, MAX_REPEATS);
	file = fopen(argv[2], "rb");
	if (!file || fseek(file, 0, SEEK_END) || (size = ftell(file)) <= 0 ||
	    size > MAX_FATBIN_BYTES || fseek(file, 0, SEEK_SET)) {
		fprintf(stderr, "kernel_timing: %s: cannot read: %s\n", argv[2],
			file ? "empty or too large" : strerror(errno));
		return 1;
	}
	std::vector<char> image(size + 1); /* a NUL after it, should it be PTX text */
	if (fread(image.data(), 1, size, file) != (size_t)size) {
		fprintf(stderr, "kernel_timing: %s: short read\n", argv[2]);
		return 1;
	}
	fclose(file);
	rt(cudaFree(0), "cudaFree(0)"); /* the primary context, current: not part of a load */

	for (long r = 1; r <= repeats; r++) {
		CUmodule module;
		CUlibrary library;
		auto started = std::chrono::steady_clock::now();
		double loaded;
		unsigned int count;

		drv(cuModuleLoadData(&module, image.data()), "cuModuleLoadData");
		loaded = since_ns(started);
		count = fetch_module_functions(module);
		printf("kernel_timing: load api=cuModuleLoadData repeat=%ld kernels=%u load_ns=%.0f "
		       "with_functions_ns=%.0f\n", r, count, loaded, since_ns(started));
		drv(cuModuleUnload(module), "cuModuleUnload");

		started = std::chrono::steady_clock::now();
		drv(cuLibraryLoadData(&library, image.data(), NULL, NULL, 0, NULL, NULL, 0),
		    "cuLibraryLoadData");
		loaded = since_ns(started);
		count = fetch_library_kernels(library);
		printf("kernel_timing: load api=cuLibraryLoadData repeat=%ld kernels=%u load_ns=%.0f "
		       "with_functions_ns=%.0f\n", r, count, loaded, since_ns(started));
		drv(cuLibraryUnload(library), "cuLibraryUnload");
	}
	printf("kernel_timing: load file=%s bytes=%ld repeats=%ld result=ok\n", argv[2], size,
	       repeats);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "overhead"))
		return overhead(argc, argv);
	if (!strcmp(argv[1], "syncs"))
		return syncs(argc, argv);
	if (!strcmp(argv[1], "exact"))
		return exact(argc, argv);
	if (!strcmp(argv[1], "load"))
		return load(argc, argv);
	usage();
}
