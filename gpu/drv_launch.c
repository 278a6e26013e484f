// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * drv_launch: a CUDA driver API workload whose every call is counted, so a
 * test can compare what it did with what cuprobe saw.
 *
 * It loads vec_add from embedded PTX, launches it from one or more threads
 * (each on its own stream), checks the result and prints one summary line
 * per process. Its RUNPATH is $ORIGIN/../lib/cuda-sim: in the build tree it
 * picks up the simulated driver (a test double); a copy taken alone to a
 * GPU machine uses the system's libcuda.so.1 and really runs on the GPU.
 *
 * The timing options (--kernel-us, --host-us, --sync-every, --event-query)
 * shape a GPU timeline: how long the simulated driver's kernels take, how
 * fast the host launches, and which host-side evidence (stream syncs, event
 * queries) says that they are done.
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KERNEL_NAME		"vec_add"
#define BLOCK_THREADS		256u
#define DEFAULT_ELEMENTS	1024L
#define MAX_ELEMENTS		(1L << 26)	/* 256 MiB per buffer */
#define MAX_THREADS		256L
#define MAX_ITERATIONS		1000000000L
#define MAX_TIMING_US		10000000L	/* 10 s: --kernel-us, --host-us */
#define EVENT_POLL_NS		20000L		/* --event-query: sleep between polls */

#include "cuda_setup.h"
#include "vec_add_ptx.h"
#include "workload_args.h"

struct options {
	long iterations;
	long threads;
	long elements;
	int exit_code;
	bool use_launch_ex;	/* cuLaunchKernelEx instead of cuLaunchKernel */
	bool use_library;	/* cuLibrary* + cuKernelGetFunction */
	bool fork_first;	/* parent and child both run the workload */
	long leak_bytes;	/* --leak N: one device allocation never freed */
	long start_delay_ms;	/* --start-delay MS: sleep before cuInit */
	long kernel_us;		/* --kernel-us N: CUDA_SIM_KERNEL_NS; -1: not given */
	long host_us;		/* --host-us N: busy host time between launches */
	long sync_every;	/* --sync-every K: a wait after every K launches; 0: none */
	bool event_query;	/* --event-query: wait by event record + cuEventQuery polls */
	bool timing;		/* any timing option: the summary line gets its fields */
	bool window;		/* --window: the summary line gets the launch loop's times */
	bool retain_only;	/* --retain-only: contexts made current by the retain alone */
	bool exit_in_destructor; /* --exit-in-destructor: exit() again from a destructor */
	const char *proved_path; /* --proved FILE: launches a returned sync covered, added there */
};

/* Calls this process made, for the summary line. */
struct counts {
	unsigned long launches;
	unsigned long allocs;		/* cuMemAlloc */
	unsigned long alloc_bytes;	/* bytes asked of cuMemAlloc */
	unsigned long host_allocs;	/* cuMemAllocHost (each freed by cuMemFreeHost) */
	unsigned long frees;		/* cuMemFree */
	unsigned long htod;
	unsigned long dtoh;
	unsigned long dtod;
	unsigned long copy_bytes;	/* all three copy directions */
	unsigned long syncs;		/* cuStreamSynchronize + cuCtxSynchronize */
	unsigned long leaked_bytes;	/* --leak: allocated, never freed */
	unsigned long event_records;	/* --event-query: cuEventRecord */
	unsigned long event_queries;	/* cuEventQuery, whatever it returned */
	unsigned long event_not_ready;	/* of which CUDA_ERROR_NOT_READY */
	unsigned long long sync_return_ns; /* the latest return of a thread's final stream sync */
};

/* What every launching thread shares; read-only once the threads start. */
struct workload {
	const struct options *options;
	CUcontext context;
	CUfunction function;
	CUdeviceptr a, b, c;
	int elements;
	unsigned int grid;
};

struct worker {
	pthread_t thread;
	const struct workload *workload;
	unsigned long launches;
	unsigned long syncs;
	unsigned long event_records;
	unsigned long event_queries;
	unsigned long event_not_ready;
	unsigned long long sync_return_ns;	/* CLOCK_MONOTONIC after the final sync */
	unsigned long unproved;			/* launches since the last stream sync returned */
	bool ok;
};

/* --proved FILE: one 8-byte counter shared by every process that names the file. */
static uint64_t *proved_launches;

static const char *program = "drv_launch";

/* With --fork, the parent's pid for its child; 0 in the child. */
static pid_t child_pid;

/* Fails the process, but never leaves a forked child behind unreaped. */
static void fail(void)
{
	if (child_pid > 0)
		waitpid(child_pid, NULL, 0);
	exit(EXIT_FAILURE);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s ITERATIONS [THREADS] [--ex] [--library] [--fork]\n"
		"       [--exit-code N] [--elements N] [--leak BYTES] [--start-delay MS]\n"
		"       [--kernel-us N] [--host-us N] [--sync-every K] [--event-query]\n"
		"       [--window] [--retain-only] [--proved FILE]\n"
		"  ITERATIONS    launches per thread (0..%ld)\n"
		"  THREADS       launching threads, each on its own stream (1..%ld, default 1)\n"
		"  --ex          launch with cuLaunchKernelEx\n"
		"  --library     load with cuLibraryLoadData/cuLibraryGetKernel/cuKernelGetFunction\n"
		"  --fork        fork before cuInit; parent and child both run the workload\n"
		"  --exit-code N exit status on success (0..255, default 0)\n"
		"  --exit-in-destructor  after main returns, a destructor calls exit() again\n"
		"                (a library's destructor ending the process its own way)\n"
		"  --elements N  floats per buffer (1..%ld, default %ld)\n"
		"  --leak BYTES  allocate BYTES of device memory in leak_device_buffer()\n"
		"                and never free them (for leak reports)\n"
		"  --start-delay MS  sleep MS milliseconds before cuInit (the driver is\n"
		"                mapped at start: time for a system-wide tracer to attach)\n"
		"  --kernel-us N set CUDA_SIM_KERNEL_NS=N*1000 before cuInit: each kernel\n"
		"                takes N us on the simulated driver (0..%ld; a real GPU\n"
		"                ignores it and runs the kernel for its real time)\n"
		"  --host-us N   spin N us of host time between consecutive launches\n"
		"                (0..%ld; launch-bound when N exceeds the kernel time)\n"
		"  --sync-every K  cuStreamSynchronize after every K launches, besides\n"
		"                the final one (1..%ld)\n"
		"  --event-query wait by cuEventRecord + cuEventQuery polls (20 us apart)\n"
		"                instead: after every launch, or every K with --sync-every\n"
		"  With a timing option the summary line ends with kernel_us= host_us=\n"
		"  sync_every= event_records= event_queries= event_not_ready= sync_return_ns=\n"
		"  --window      end the summary line with launch_start_ns= launch_end_ns=\n"
		"                (CLOCK_MONOTONIC: the threads' start, all joined): rates\n"
		"                across processes, from the launches' own window\n"
		"  --retain-only each thread gets its context from cuDevicePrimaryCtxRetain\n"
		"                alone, no cuCtxSetCurrent: as cudart does on a driver that\n"
		"                makes it current inside the retain (driver 580 does; the\n"
		"                simulated driver with CUDA_SIM_RETAIN_SETS_CURRENT=1, which\n"
		"                this sets)\n"
		"  --proved FILE after each cuStreamSynchronize returns, add the launches it\n"
		"                covered to the 8-byte counter in FILE (made when missing,\n"
		"                shared by every process naming it): what a test may\n"
		"                expect delivered even if the process is killed later\n",
		program, MAX_ITERATIONS, MAX_THREADS, MAX_ELEMENTS,
		DEFAULT_ELEMENTS, MAX_TIMING_US, MAX_TIMING_US, MAX_ITERATIONS);
}

/* For the main thread: any CUDA error ends the process (once a forked child is reaped). */
static void check_or_fail(CUresult rc, const char *call)
{
	if (!cu_ok(rc, call))
		fail();
}

static void bad_arguments(const char *why, const char *arg)
{
	fprintf(stderr, "%s: %s%s%s\n", program, why, arg ? ": " : "",
		arg ? arg : "");
	usage(stderr);
	exit(2);
}

static void parse_options(int argc, char **argv, struct options *options)
{
	int positional = 0;
	long value;
	int i;

	*options = (struct options){
		.threads = 1,
		.elements = DEFAULT_ELEMENTS,
		.kernel_us = -1,
	};
	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(arg, "--ex") == 0) {
			options->use_launch_ex = true;
		} else if (strcmp(arg, "--library") == 0) {
			options->use_library = true;
		} else if (strcmp(arg, "--fork") == 0) {
			options->fork_first = true;
		} else if (strcmp(arg, "--exit-in-destructor") == 0) {
			options->exit_in_destructor = true;
		} else if (strcmp(arg, "--retain-only") == 0) {
			options->retain_only = true;
		} else if (strcmp(arg, "--exit-code") == 0) {
			if (!parse_long(i + 1 < argc ? argv[++i] : NULL, 0, 255, &value))
				bad_arguments("--exit-code needs 0..255", argv[i]);
			options->exit_code = (int)value;
		} else if (strcmp(arg, "--leak") == 0) {
			if (!parse_long(i + 1 < argc ? argv[++i] : NULL, 1, MAX_ELEMENTS * 4,
					&options->leak_bytes))
				bad_arguments("bad --leak", argv[i]);
		} else if (strcmp(arg, "--start-delay") == 0) {
			if (!parse_long(i + 1 < argc ? argv[++i] : NULL, 0, 60000,
					&options->start_delay_ms))
				bad_arguments("--start-delay needs 0..60000", argv[i]);
		} else if (strcmp(arg, "--kernel-us") == 0) {
			if (!parse_long(i + 1 < argc ? argv[++i] : NULL, 0, MAX_TIMING_US,
					&options->kernel_us))
				bad_arguments("bad --kernel-us", argv[i]);
			options->timing = true;
		} else if (strcmp(arg, "--host-us") == 0) {
			if (!parse_long(i + 1 < argc ? argv[++i] : NULL, 0, MAX_TIMING_US,
					&options->host_us))
				bad_arguments("bad --host-us", argv[i]);
			options->timing = true;
		} else if (strcmp(arg, "--sync-every") == 0) {
			if (!parse_long(i + 1 < argc ? argv[++i] : NULL, 1, MAX_ITERATIONS,
					&options->sync_every))
				bad_arguments("bad --sync-every", argv[i]);
			options->timing = true;
		} else if (strcmp(arg, "--proved") == 0) {
			if (i + 1 >= argc || !argv[i + 1][0])
				bad_arguments("--proved needs a file", NULL);
			options->proved_path = argv[++i];
		} else if (strcmp(arg, "--window") == 0) {
			options->window = true;
		} else if (strcmp(arg, "--event-query") == 0) {
			options->event_query = true;
			options->timing = true;
		} else if (strcmp(arg, "--elements") == 0) {
			if (!parse_long(i + 1 < argc ? argv[++i] : NULL, 1,
					MAX_ELEMENTS, &options->elements))
				bad_arguments("bad --elements", argv[i]);
		} else if (arg[0] == '-' && arg[1] == '-') {
			bad_arguments("unknown option", arg);
		} else if (positional == 0) {
			if (!parse_long(arg, 0, MAX_ITERATIONS, &options->iterations))
				bad_arguments("bad ITERATIONS", arg);
			positional++;
		} else if (positional == 1) {
			if (!parse_long(arg, 1, MAX_THREADS, &options->threads))
				bad_arguments("bad THREADS", arg);
			positional++;
		} else {
			bad_arguments("unexpected argument", arg);
		}
	}
	if (positional == 0)
		bad_arguments("ITERATIONS is required", NULL);
}

static unsigned long long monotonic_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec;
}

/* --host-us: host work between launches, burning CPU (not sleeping) for us of wall time. */
static void spin_us(long us)
{
	unsigned long long until = monotonic_ns() + (unsigned long long)us * 1000ull;

	while (monotonic_ns() < until)
		;
}

/* --event-query: record an event after the stream's work so far and poll until it is done. */
static bool wait_by_event(struct worker *worker, CUstream stream, CUevent event)
{
	const struct timespec poll = { .tv_nsec = EVENT_POLL_NS };
	CUresult rc;

	if (!cu_ok(cuEventRecord(event, stream), "cuEventRecord"))
		return false;
	worker->event_records++;
	for (;;) {
		rc = cuEventQuery(event);
		worker->event_queries++;
		if (rc == CUDA_SUCCESS)
			return true;
		if (rc != CUDA_ERROR_NOT_READY)
			return cu_ok(rc, "cuEventQuery");
		worker->event_not_ready++;
		nanosleep(&poll, NULL);
	}
}

/* A stream sync returned: the launches before it are done (and, under cuprobe, drained). */
static void note_proved(struct worker *worker)
{
	if (proved_launches)
		__atomic_fetch_add(proved_launches, worker->unproved, __ATOMIC_SEQ_CST);
	worker->unproved = 0;
}

/* The shared counter of --proved: exits on failure. */
static void open_proved(const char *path)
{
	void *mapped;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0 || ftruncate(fd, sizeof(uint64_t)) != 0 ||
	    (mapped = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
		    MAP_FAILED) {
		fprintf(stderr, "%s: --proved %s: %s\n", program, path, strerror(errno));
		exit(1);
	}
	close(fd);
	proved_launches = mapped;
}

/* After launch number `launched`: the periodic wait of --sync-every / --event-query. */
static bool periodic_wait(struct worker *worker, CUstream stream, CUevent event, long launched)
{
	const struct options *options = worker->workload->options;

	if (options->sync_every ? launched % options->sync_every != 0 : !options->event_query)
		return true;
	if (options->event_query)
		return wait_by_event(worker, stream, event);
	if (!cu_ok(cuStreamSynchronize(stream), "cuStreamSynchronize"))
		return false;
	worker->syncs++;
	note_proved(worker);
	return true;
}

static void *launch_thread(void *arg)
{
	struct worker *worker = arg;
	const struct workload *w = worker->workload;
	CUdeviceptr a = w->a, b = w->b, c = w->c;
	int n = w->elements;
	void *params[] = { &a, &b, &c, &n };
	CUevent event = NULL;
	CUstream stream;
	long i;

	/* The current context is per thread: bind the primary one here too. */
	if ((w->options->retain_only ?
	     !cu_ok(cuDevicePrimaryCtxRetain(&(CUcontext){ NULL }, 0), "cuDevicePrimaryCtxRetain") :
	     !cu_ok(cuCtxSetCurrent(w->context), "cuCtxSetCurrent")) ||
	    !cu_ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
		return NULL;
	if (w->options->event_query &&
	    !cu_ok(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate"))
		return NULL;

	for (i = 0; i < w->options->iterations; i++) {
		if (i > 0 && w->options->host_us)
			spin_us(w->options->host_us);
		if (w->options->use_launch_ex) {
			CUlaunchConfig config = {
				.gridDimX = w->grid, .gridDimY = 1, .gridDimZ = 1,
				.blockDimX = BLOCK_THREADS, .blockDimY = 1, .blockDimZ = 1,
				.sharedMemBytes = 0,
				.hStream = stream,
				.attrs = NULL,
				.numAttrs = 0,
			};

			if (!cu_ok(cuLaunchKernelEx(&config, w->function, params, NULL),
				   "cuLaunchKernelEx"))
				return NULL;
		} else {
			if (!cu_ok(cuLaunchKernel(w->function, w->grid, 1, 1,
						  BLOCK_THREADS, 1, 1, 0, stream,
						  params, NULL),
				   "cuLaunchKernel"))
				return NULL;
		}
		worker->launches++;
		worker->unproved++;
		if (!periodic_wait(worker, stream, event, i + 1))
			return NULL;
	}

	if (!cu_ok(cuStreamSynchronize(stream), "cuStreamSynchronize"))
		return NULL;
	worker->sync_return_ns = monotonic_ns();
	worker->syncs++;
	note_proved(worker);
	if (event && !cu_ok(cuEventDestroy(event), "cuEventDestroy"))
		return NULL;
	if (!cu_ok(cuStreamDestroy(stream), "cuStreamDestroy"))
		return NULL;
	worker->ok = true;
	return NULL;
}

static void load_kernel(const struct options *options, CUmodule *module,
			CUlibrary *library, CUfunction *function)
{
	CUkernel kernel;

	if (options->use_library) {
		check_or_fail(cuLibraryLoadData(library, vec_add_ptx, NULL, NULL, 0,
						NULL, NULL, 0), "cuLibraryLoadData");
		check_or_fail(cuLibraryGetKernel(&kernel, *library, KERNEL_NAME),
			      "cuLibraryGetKernel");
		check_or_fail(cuKernelGetFunction(function, kernel), "cuKernelGetFunction");
	} else {
		*function = cu_setup_vec_add(module, check_or_fail);
	}
}

static void *xcalloc(size_t count, size_t size)
{
	void *memory = calloc(count, size);

	if (!memory) {
		fprintf(stderr, "%s: out of host memory\n", program);
		fail();
	}
	return memory;
}

/* The whole workload for one process; exits 1 on any failure. */

/*
 * The deliberate leak of --leak: its own function, kept out of line with a
 * frame, so a leak report's stack names it.
 */
static __attribute__((noinline)) void leak_device_buffer(size_t bytes)
{
	CUdeviceptr leaked;

	check_or_fail(cuMemAlloc(&leaked, bytes), "cuMemAlloc");
	__asm__ volatile("" ::: "memory"); /* not a tail call: keep this frame */
}

static void run_workload(const struct options *options)
{
	const size_t bytes = (size_t)options->elements * sizeof(float);
	struct counts counts = { 0 };
	struct workload w = {
		.options = options,
		.elements = (int)options->elements,
		.grid = (unsigned int)((options->elements + BLOCK_THREADS - 1) /
				       BLOCK_THREADS),
	};
	CUmodule module = NULL;
	CUlibrary library = NULL;
	struct worker *workers;
	unsigned long long launch_start_ns, launch_end_ns;
	float *host_a, *host_b, *host_c;
	void *pinned;
	CUdevice device;
	bool threads_ok = true;
	long i;
	int rc;

	host_a = xcalloc((size_t)options->elements, sizeof(float));
	host_b = xcalloc((size_t)options->elements, sizeof(float));
	host_c = xcalloc((size_t)options->elements, sizeof(float));
	for (i = 0; i < options->elements; i++) {
		/* Small integers: the sums are exact on any IEEE device. */
		host_a[i] = (float)(i % 1000);
		host_b[i] = (float)(2 * (i % 1000) + 1);
	}

	if (options->start_delay_ms) {
		struct timespec delay = { .tv_sec = options->start_delay_ms / 1000,
					  .tv_nsec = options->start_delay_ms % 1000 * 1000000L };

		while (nanosleep(&delay, &delay) && errno == EINTR)
			;
	}
	if (options->retain_only && setenv("CUDA_SIM_RETAIN_SETS_CURRENT", "1", 1)) {
		fprintf(stderr, "%s: setenv: %s\n", program, strerror(errno));
		fail();
	}
	if (options->kernel_us >= 0) {
		/* Read by the simulated driver at cuInit; a real driver ignores it. */
		char kernel_ns[32];

		snprintf(kernel_ns, sizeof(kernel_ns), "%lld", (long long)options->kernel_us * 1000);
		if (setenv("CUDA_SIM_KERNEL_NS", kernel_ns, 1)) {
			fprintf(stderr, "%s: setenv: %s\n", program, strerror(errno));
			fail();
		}
	}
	device = cu_setup_device(check_or_fail);
	w.context = cu_setup_primary_context(device, !options->retain_only, check_or_fail);
	load_kernel(options, &module, &library, &w.function);

	check_or_fail(cuMemAlloc(&w.a, bytes), "cuMemAlloc");
	check_or_fail(cuMemAlloc(&w.b, bytes), "cuMemAlloc");
	check_or_fail(cuMemAlloc(&w.c, bytes), "cuMemAlloc");
	counts.allocs += 3;
	counts.alloc_bytes += 3 * bytes;

	check_or_fail(cuMemcpyHtoD(w.a, host_a, bytes), "cuMemcpyHtoD");
	check_or_fail(cuMemcpyHtoD(w.b, host_b, bytes), "cuMemcpyHtoD");
	counts.htod += 2;
	counts.copy_bytes += 2 * bytes;

	/* Page-locked memory is allocated and freed once, for the alloc probes. */
	check_or_fail(cuMemAllocHost(&pinned, bytes), "cuMemAllocHost");
	counts.host_allocs++;
	memset(pinned, 0, bytes);
	check_or_fail(cuMemFreeHost(pinned), "cuMemFreeHost");

	/* c starts as a copy of a, so a kernel that never ran fails the check. */
	check_or_fail(cuMemcpyDtoD(w.c, w.a, bytes), "cuMemcpyDtoD");
	counts.dtod++;
	counts.copy_bytes += bytes;

	workers = xcalloc((size_t)options->threads, sizeof(*workers));
	launch_start_ns = monotonic_ns();
	for (i = 0; i < options->threads; i++) {
		workers[i].workload = &w;
		rc = pthread_create(&workers[i].thread, NULL, launch_thread,
				    &workers[i]);
		if (rc) {
			fprintf(stderr, "%s: pthread_create: %s\n", program,
				strerror(rc));
			fail();
		}
	}
	for (i = 0; i < options->threads; i++) {
		rc = pthread_join(workers[i].thread, NULL);
		if (rc) {
			fprintf(stderr, "%s: pthread_join: %s\n", program,
				strerror(rc));
			fail();
		}
		threads_ok &= workers[i].ok;
		counts.launches += workers[i].launches;
		counts.syncs += workers[i].syncs;
		counts.event_records += workers[i].event_records;
		counts.event_queries += workers[i].event_queries;
		counts.event_not_ready += workers[i].event_not_ready;
		if (workers[i].sync_return_ns > counts.sync_return_ns)
			counts.sync_return_ns = workers[i].sync_return_ns;
	}
	launch_end_ns = monotonic_ns();
	free(workers);
	if (!threads_ok)
		fail();	/* the failing thread said why */

	check_or_fail(cuCtxSynchronize(), "cuCtxSynchronize");
	counts.syncs++;
	check_or_fail(cuMemcpyDtoH(host_c, w.c, bytes), "cuMemcpyDtoH");
	counts.dtoh++;
	counts.copy_bytes += bytes;

	for (i = 0; i < options->elements; i++) {
		float expected = host_a[i] + host_b[i];

		/* With no launches, c is still the copy of a. */
		if (options->iterations == 0)
			expected = host_a[i];
		if (host_c[i] != expected) {
			fprintf(stderr, "%s: wrong result at element %ld: %g, expected %g\n",
				program, i, (double)host_c[i], (double)expected);
			fail();
		}
	}

	check_or_fail(cuMemFree(w.a), "cuMemFree");
	check_or_fail(cuMemFree(w.b), "cuMemFree");
	check_or_fail(cuMemFree(w.c), "cuMemFree");
	counts.frees += 3;
	if (options->leak_bytes) {
		leak_device_buffer((size_t)options->leak_bytes);
		counts.allocs++;
		counts.alloc_bytes += options->leak_bytes;
		counts.leaked_bytes += options->leak_bytes;
	}

	if (library)
		check_or_fail(cuLibraryUnload(library), "cuLibraryUnload");
	if (module)
		check_or_fail(cuModuleUnload(module), "cuModuleUnload");
	check_or_fail(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
	free(host_a);
	free(host_b);
	free(host_c);

	printf("%s: pid=%ld kernel=%s launches=%lu threads=%ld allocs=%lu "
	       "alloc_bytes=%lu host_allocs=%lu frees=%lu htod=%lu dtoh=%lu "
	       "dtod=%lu copy_bytes=%lu syncs=%lu leaked_bytes=%lu result=ok",
	       program, (long)getpid(), KERNEL_NAME, counts.launches,
	       options->threads, counts.allocs, counts.alloc_bytes,
	       counts.host_allocs, counts.frees, counts.htod, counts.dtoh,
	       counts.dtod, counts.copy_bytes, counts.syncs, counts.leaked_bytes);
	/* The timing fields come last, and only with a timing option: the line stays as it was. */
	if (options->timing)
		printf(" kernel_us=%ld host_us=%ld sync_every=%ld event_records=%lu "
		       "event_queries=%lu event_not_ready=%lu sync_return_ns=%llu",
		       options->kernel_us, options->host_us, options->sync_every,
		       counts.event_records, counts.event_queries, counts.event_not_ready,
		       counts.sync_return_ns);
	if (options->window)
		printf(" launch_start_ns=%llu launch_end_ns=%llu", launch_start_ns, launch_end_ns);
	printf("\n");
	fflush(stdout);
}

/* The child succeeds by exiting with the same status the parent will. */
static void wait_for_child(pid_t child, int expected_status)
{
	int status;

	child_pid = 0;	/* reaped here, whatever happens */
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "%s: waitpid: %s\n", program, strerror(errno));
			fail();
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == expected_status)
		return;
	if (WIFSIGNALED(status))
		fprintf(stderr, "%s: child pid=%ld killed by signal %d\n", program,
			(long)child, WTERMSIG(status));
	else
		fprintf(stderr, "%s: child pid=%ld exited with %d, expected %d\n",
			program, (long)child, WEXITSTATUS(status), expected_status);
	fail();
}

static int destructor_exit_code = -1;

/* --exit-in-destructor: exit() called inside exit's own destructors, as some libraries do. */
__attribute__((destructor)) static void exit_from_destructor(void)
{
	if (destructor_exit_code >= 0)
		exit(destructor_exit_code);
}

int main(int argc, char **argv)
{
	struct options options;

	parse_options(argc, argv, &options);
	if (options.proved_path)
		open_proved(options.proved_path);
	if (options.exit_in_destructor)
		destructor_exit_code = options.exit_code;

	if (options.fork_first) {
		/* Nothing is buffered yet, but do not let the child inherit it. */
		fflush(NULL);
		child_pid = fork();
		if (child_pid < 0) {
			fprintf(stderr, "%s: fork: %s\n", program, strerror(errno));
			return EXIT_FAILURE;
		}
	}

	run_workload(&options);

	if (child_pid > 0)
		wait_for_child(child_pid, options.exit_code);
	return options.exit_code;
}
