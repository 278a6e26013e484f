// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * nccl_loop: every NCCL call cuprobe traces, a known number of times, with
 * known counts and datatypes: each collective, ncclBcast (which NCCL makes
 * through ncclBroadcast), a send/recv pair and two collectives in groups, a
 * reduction op of its own, the queries, a split; then, with --ranks N, a
 * communicator of N ranks in this one thread (ncclCommInitAll) and grouped
 * collectives and a ring of sends across them. It prints what it did, per
 * NCCL operation and per exported call, so a test can compare:
 *
 *   nccl_loop: op=NAME calls=N bytes=B launches=L copies=C no_gpu_work=I
 *   nccl_loop: api=NAME calls=N
 *   nccl_loop: pid=P comm=0x... comm_id=0x... ranks=R ... result=ok
 *
 * (launches and copies: those the calls made, as one-rank NCCL does them;
 * no_gpu_work: ungrouped collectives that made neither: in place, one rank).
 *
 * --wait-signal: one uncounted round, "ready", then the counted run once
 * SIGUSR1 comes (a tracer attaches in between). --start-delay MS: a pause
 * before the first call. Its RUNPATH finds the simulated driver and the
 * simulated libnccl in the build tree.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "nccl_sim/nccl.h"

#define MAX_RANKS 8
#define MAX_NAMES 48

static const char *program = "nccl_loop";

struct tally {
	const char *name;
	unsigned long long calls, bytes, launches, copies, no_gpu_work;
};

/* Per NCCL operation (as cuprobe names them) and per exported call. */
static struct tally ops[MAX_NAMES], apis[MAX_NAMES];
static size_t op_count, api_count;
static bool counting = true;

static struct tally *tally_of(struct tally *table, size_t *count, const char *name)
{
	size_t i;

	for (i = 0; i < *count && strcmp(table[i].name, name); i++)
		;
	if (i == *count) {
		if (*count == MAX_NAMES) {
			fprintf(stderr, "%s: too many names\n", program);
			exit(1);
		}
		table[(*count)++].name = name;
	}
	return &table[i];
}

static void nccl_check(ncclResult_t rc, const char *api)
{
	if (rc != ncclSuccess) {
		fprintf(stderr, "%s: %s failed: %s\n", program, api, ncclGetErrorString(rc));
		exit(1);
	}
	if (counting)
		tally_of(apis, &api_count, api)->calls++;
}

static void cuda_check(CUresult rc, const char *api)
{
	const char *name = NULL;

	if (rc == CUDA_SUCCESS)
		return;
	cuGetErrorName(rc, &name);
	fprintf(stderr, "%s: %s failed: %s\n", program, api, name ? name : "?");
	exit(1);
}

/*
 * One call of an NCCL operation made (its bytes as NCCL counts them), the
 * kernels it launched and the copies it made.
 */
static void did(const char *op, unsigned long long bytes, unsigned int launches, unsigned int copies)
{
	struct tally *t;

	if (!counting)
		return;
	t = tally_of(ops, &op_count, op);
	t->calls++;
	t->bytes += bytes;
	t->launches += launches;
	t->copies += copies;
}

/* An ungrouped collective that left nothing on the GPU (one rank, in place). */
static void did_nothing(const char *op, unsigned long long bytes)
{
	did(op, bytes, 0, 0);
	if (counting)
		tally_of(ops, &op_count, op)->no_gpu_work++;
}

#define CALL(api, ...) nccl_check(api(__VA_ARGS__), #api)

/*
 * NCCL's hash of a unique id (what NCCL_DEBUG=INFO prints as "commId
 * 0x..."): NCCL's getHash, eatHash over 8-byte chunks then digestHash.
 */
static uint64_t id_hash(const ncclUniqueId *id)
{
	uint64_t acc[2] = { 1, 1 }, x, h;
	size_t at;

	acc[0] ^= sizeof(id->internal);
	for (at = 0; at < sizeof(id->internal); at += 8) {
		acc[0] += acc[1];
		acc[1] ^= acc[0];
		acc[0] ^= acc[0] >> 31;
		acc[0] *= 0x9de62bbc8cef3ce3ull;
		acc[1] ^= acc[1] >> 32;
		acc[1] *= 0x485cd6311b599e79ull;
		memcpy(&x, id->internal + at, sizeof(x));
		acc[0] += x;
	}
	h = acc[0];
	h ^= h >> 31;
	h *= 0xbac3bd562846de6bull;
	h += acc[1];
	h ^= h >> 32;
	h *= 0x995a187a14e7b445ull;
	return h;
}

static CUdeviceptr alloc(size_t bytes)
{
	CUdeviceptr p;

	cuda_check(cuMemAlloc(&p, bytes), "cuMemAlloc");
	cuda_check(cuMemsetD8(p, 0, bytes), "cuMemsetD8");
	return p;
}

#define PTR(p) ((void *)(uintptr_t)(p))

/*
 * One round of every operation on a communicator of one rank: done at the
 * call as NCCL does (a kernel for a pre-multiplied sum, a copy out of
 * place, nothing in place), grouped or not.
 */
static void one_rank_round(ncclComm_t comm, CUstream stream, size_t n, ncclRedOp_t premul,
			   CUdeviceptr f32a, CUdeviceptr f32b, CUdeviceptr big, CUdeviceptr i64,
			   CUdeviceptr f64, CUdeviceptr bytes_buf)
{
	CALL(ncclAllReduce, PTR(f32a), PTR(f32b), n, ncclFloat32, ncclSum, comm, stream);
	did("all_reduce", n * 4, 0, 1);
	CALL(ncclAllReduce, PTR(f32b), PTR(f32b), n, ncclFloat32, ncclAvg, comm, stream);
	did("all_reduce", n * 4, 1, 0);
	CALL(ncclAllReduce, PTR(f32a), PTR(f32b), n, ncclFloat32, premul, comm, stream);
	did("all_reduce", n * 4, 1, 0);
	/* A count of 0: NCCL drops it. */
	CALL(ncclAllReduce, PTR(f32a), PTR(f32b), 0, ncclFloat32, ncclSum, comm, stream);
	did_nothing("all_reduce", 0);
	CALL(ncclBroadcast, PTR(i64), PTR(i64), n, ncclInt32, 0, comm, stream);
	did_nothing("broadcast", n * 4);
	/* ncclBcast is made through ncclBroadcast: one broadcast, as the program called it. */
	CALL(ncclBcast, PTR(f64), n, ncclFloat64, 0, comm, stream);
	did_nothing("broadcast", n * 8);
	CALL(ncclReduce, PTR(i64), PTR(big), n, ncclInt64, ncclMax, 0, comm, stream);
	did("reduce", n * 8, 0, 1);
	CALL(ncclAllGather, PTR(f32a), PTR(big), n, ncclFloat32, comm, stream);
	did("all_gather", n * 4, 0, 1);
	CALL(ncclReduceScatter, PTR(big), PTR(f32b), n, ncclFloat32, ncclSum, comm, stream);
	did("reduce_scatter", n * 4, 0, 1);
	CALL(ncclReduceScatter, PTR(big), PTR(f32b), n, ncclFloat32, ncclAvg, comm, stream);
	did("reduce_scatter", n * 4, 1, 0);
	CALL(ncclAlltoAll, PTR(bytes_buf), PTR(big), n, ncclUint8, comm, stream);
	did("all_to_all", n, 0, 1);
	CALL(ncclGather, PTR(f32a), PTR(big), n, ncclInt32, 0, comm, stream);
	did("gather", n * 4, 0, 1);
	CALL(ncclScatter, PTR(big), PTR(f32b), n, ncclInt32, 0, comm, stream);
	did("scatter", n * 4, 0, 1);
	/* A send to itself and its receive, in flight together: one kernel at the group's end. */
	CALL(ncclGroupStart);
	did("group_start", 0, 0, 0);
	CALL(ncclSend, PTR(f32a), n, ncclFloat16, 0, comm, stream);
	did("send", n * 2, 0, 0);
	CALL(ncclRecv, PTR(f32b), n, ncclFloat16, 0, comm, stream);
	did("recv", n * 2, 0, 0);
	CALL(ncclGroupEnd);
	did("group_end", 0, 1, 0);
	/* Two collectives in a group (one nested in another: one group): one rank does them at the call. */
	CALL(ncclGroupStart);
	did("group_start", 0, 0, 0);
	CALL(ncclAllReduce, PTR(f32a), PTR(f32b), n / 2, ncclBfloat16, ncclSum, comm, stream);
	did("all_reduce", n / 2 * 2, 0, 1);
	CALL(ncclGroupStart);
	did("group_start", 0, 0, 0);
	CALL(ncclAllReduce, PTR(f64), PTR(f64), n, ncclFloat64, ncclProd, comm, stream);
	did("all_reduce", n * 8, 0, 0);
	CALL(ncclGroupEnd);
	did("group_end", 0, 0, 0);
	CALL(ncclGroupEnd);
	did("group_end", 0, 0, 0);
}

/* A communicator of ranks ranks in this thread: each collective and the ring of sends in a group. */
static void all_ranks_round(ncclComm_t *comms, int ranks, CUstream stream, size_t n,
			    CUdeviceptr *send, CUdeviceptr *recv, CUdeviceptr *gathered)
{
	int r;

	CALL(ncclGroupStart);
	did("group_start", 0, 0, 0);
	for (r = 0; r < ranks; r++) {
		CALL(ncclAllReduce, PTR(send[r]), PTR(recv[r]), n, ncclFloat32, ncclSum, comms[r], stream);
		did("all_reduce", n * 4, 0, 0);
	}
	CALL(ncclGroupEnd);
	did("group_end", 0, ranks, 0);
	CALL(ncclGroupStart);
	did("group_start", 0, 0, 0);
	for (r = 0; r < ranks; r++) {
		CALL(ncclSend, PTR(send[r]), n, ncclInt32, (r + 1) % ranks, comms[r], stream);
		did("send", n * 4, 0, 0);
		CALL(ncclRecv, PTR(recv[r]), n, ncclInt32, (r + ranks - 1) % ranks, comms[r], stream);
		did("recv", n * 4, 0, 0);
	}
	for (r = 0; r < ranks; r++) {
		CALL(ncclAllGather, PTR(send[r]), PTR(gathered[r]), n, ncclInt32, comms[r], stream);
		did("all_gather", n * 4, 0, 0);
	}
	CALL(ncclGroupEnd);
	did("group_end", 0, ranks, 0);
}

/* The data moved: rank r received rank r-1's values (the ring), and gathered every rank's in order. */
static void check_ring(const CUdeviceptr *recv, const CUdeviceptr *gathered, int ranks, size_t n)
{
	uint32_t *host = malloc(n * 4 * (size_t)ranks);
	size_t i;
	int r, k;

	if (!host)
		exit(1);
	for (r = 0; r < ranks; r++) {
		cuda_check(cuMemcpyDtoH(host, recv[r], n * 4), "cuMemcpyDtoH");
		for (i = 0; i < n; i++)
			if (host[i] != (uint32_t)((r + ranks - 1) % ranks + 1))
				goto wrong;
		cuda_check(cuMemcpyDtoH(host, gathered[r], n * 4 * (size_t)ranks), "cuMemcpyDtoH");
		for (k = 0; k < ranks; k++)
			for (i = 0; i < n; i++)
				if (host[(size_t)k * n + i] != (uint32_t)k + 1)
					goto wrong;
	}
	free(host);
	return;
wrong:
	fprintf(stderr, "%s: rank %d's data is not what its peers sent\n", program, r);
	exit(1);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s ITERATIONS [--ranks N] [--elements N] [--kernel-us N] [--wait-signal]\n"
		"       [--start-delay MS]\n",
		program);
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long long iterations;
	long elements = 1024, ranks = 0, kernel_us = -1, start_delay_ms = 0;
	bool wait_signal = false;
	CUdevice device;
	CUcontext context;
	CUstream stream;
	ncclComm_t comm, child, comms[MAX_RANKS];
	ncclUniqueId id;
	ncclRedOp_t premul;
	float scale = 0.5f;
	int count, rank, cu_device, devlist[MAX_RANKS] = { 0 }, i;
	CUdeviceptr f32a, f32b, big, i64, f64, bytes_buf, send[MAX_RANKS], recv[MAX_RANKS];
	CUdeviceptr gathered[MAX_RANKS];
	unsigned long long launches = 0, copies = 0, it;
	char *end;
	size_t n;

	if (argc < 2)
		usage();
	iterations = strtoull(argv[1], &end, 10);
	if (*end || !iterations)
		usage();
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			ranks = strtol(argv[++i], &end, 10);
		else if (!strcmp(argv[i], "--elements") && i + 1 < argc)
			elements = strtol(argv[++i], &end, 10);
		else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc)
			kernel_us = strtol(argv[++i], &end, 10);
		else if (!strcmp(argv[i], "--start-delay") && i + 1 < argc)
			start_delay_ms = strtol(argv[++i], &end, 10);
		else if (!strcmp(argv[i], "--wait-signal"))
			wait_signal = true, end = "";
		else
			usage();
		if (*end)
			usage();
	}
	if (ranks < 0 || ranks == 1 || ranks > MAX_RANKS || elements < 2 || elements % 2 ||
	    elements > (1 << 24) || start_delay_ms < 0)
		usage();
	/* Time for a tracer started system-wide to attach to the libraries it just mapped. */
	if (start_delay_ms)
		usleep((useconds_t)start_delay_ms * 1000);
	if (kernel_us >= 0) {
		char value[32];

		snprintf(value, sizeof(value), "%ld", kernel_us * 1000);
		setenv("CUDA_SIM_KERNEL_NS", value, 1);
	}
	n = (size_t)elements;

	cuda_check(cuInit(0), "cuInit");
	cuda_check(cuDeviceGet(&device, 0), "cuDeviceGet");
	cuda_check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
	cuda_check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
	cuda_check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	/* Room for any operation of up to MAX_RANKS ranks on n 8-byte elements. */
	f32a = alloc(n * 8);
	f32b = alloc(n * 8);
	big = alloc(n * 8 * MAX_RANKS * MAX_RANKS);
	i64 = alloc(n * 8);
	f64 = alloc(n * 8);
	bytes_buf = alloc(n * MAX_RANKS);

	CALL(ncclGetUniqueId, &id);
	CALL(ncclCommInitRank, &comm, 1, id, 0);
	did("comm_init", 0, 0, 0);
	CALL(ncclRedOpCreatePreMulSum, &premul, &scale, ncclFloat32, ncclScalarHostImmediate, comm);

	if (wait_signal) {
		sigset_t usr1;
		int got;

		/* Before the attach: a round nobody counts, then wait to be told. */
		counting = false;
		one_rank_round(comm, stream, n, premul, f32a, f32b, big, i64, f64, bytes_buf);
		cuda_check(cuStreamSynchronize(stream), "cuStreamSynchronize");
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		sigprocmask(SIG_BLOCK, &usr1, NULL);
		printf("%s: ready pid=%d\n", program, (int)getpid());
		fflush(stdout);
		if (sigwait(&usr1, &got))
			return 1;
		counting = true;
		memset(ops, 0, sizeof(ops));
		memset(apis, 0, sizeof(apis));
		op_count = api_count = 0;
	}
	/* The queries: after a late attach, they tell the tracer what the communicator is. */
	CALL(ncclCommCount, comm, &count);
	did("comm_count", 0, 0, 0);
	CALL(ncclCommUserRank, comm, &rank);
	did("comm_user_rank", 0, 0, 0);
	CALL(ncclCommCuDevice, comm, &cu_device);
	did("comm_cu_device", 0, 0, 0);
	if (count != 1 || rank != 0 || cu_device != 0) {
		fprintf(stderr, "%s: the communicator says %d ranks, rank %d, device %d\n", program,
			count, rank, cu_device);
		return 1;
	}
	for (it = 0; it < iterations; it++)
		one_rank_round(comm, stream, n, premul, f32a, f32b, big, i64, f64, bytes_buf);

	/* A split of the one-rank communicator, used once and destroyed. */
	CALL(ncclCommSplit, comm, 0, 0, &child, NULL);
	did("comm_split", 0, 0, 0);
	CALL(ncclAllReduce, PTR(f32a), PTR(f32b), n, ncclFloat32, ncclMin, child, stream);
	did("all_reduce", n * 4, 0, 1);
	CALL(ncclCommDestroy, child);
	did("comm_destroy", 0, 0, 0);

	if (ranks) {
		for (i = 0; i < ranks; i++) {
			send[i] = alloc(n * 4);
			recv[i] = alloc(n * 4);
			gathered[i] = alloc(n * 4 * (size_t)ranks);
			cuda_check(cuMemsetD32(send[i], (unsigned int)i + 1, n), "cuMemsetD32");
		}
		/* Every rank on the one simulated device. */
		CALL(ncclCommInitAll, comms, (int)ranks, devlist);
		did("comm_init_all", 0, 0, 0);
		for (it = 0; it < iterations; it++)
			all_ranks_round(comms, (int)ranks, stream, n, send, recv, gathered);
		cuda_check(cuStreamSynchronize(stream), "cuStreamSynchronize");
		check_ring(recv, gathered, (int)ranks, n);
		for (i = 0; i < ranks; i++) {
			CALL(ncclCommFinalize, comms[i]);
			did("comm_finalize", 0, 0, 0);
			CALL(ncclCommDestroy, comms[i]);
			did("comm_destroy", 0, 0, 0);
		}
	}
	cuda_check(cuStreamSynchronize(stream), "cuStreamSynchronize");
	CALL(ncclRedOpDestroy, premul, comm);
	CALL(ncclCommFinalize, comm);
	did("comm_finalize", 0, 0, 0);
	CALL(ncclCommDestroy, comm);
	did("comm_destroy", 0, 0, 0);

	for (i = 0; i < (int)op_count; i++) {
		printf("%s: op=%s calls=%llu bytes=%llu launches=%llu copies=%llu no_gpu_work=%llu\n",
		       program, ops[i].name, ops[i].calls, ops[i].bytes, ops[i].launches, ops[i].copies,
		       ops[i].no_gpu_work);
		launches += ops[i].launches;
		copies += ops[i].copies;
	}
	for (i = 0; i < (int)api_count; i++)
		printf("%s: api=%s calls=%llu\n", program, apis[i].name, apis[i].calls);
	printf("%s: pid=%d comm=0x%llx comm_id=0x%016" PRIx64 " ranks=%ld iterations=%llu elements=%zu launches=%llu copies=%llu result=ok\n",
	       program, (int)getpid(), (unsigned long long)(uintptr_t)comm, id_hash(&id), ranks,
	       iterations, n, launches, copies);
	return fflush(stdout) ? 1 : 0;
}
