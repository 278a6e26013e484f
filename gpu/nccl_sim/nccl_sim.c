// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * nccl_sim: a simulated NCCL, built as libnccl.so.2.
 *
 * THIS IS A TEST DOUBLE for machines without a GPU, beside the simulated
 * driver (gpu/cuda_sim). It exists so cuprobe's NCCL probes have NCCL's
 * exported symbols to attach to, called with NCCL's real signatures
 * (nccl.h, written from NCCL's documented API, is compiled against every
 * definition here), and so the launches a collective makes can be linked
 * to it as on a GPU.
 *
 * The work is done on the CPU, through the simulated driver: "device"
 * buffers are that driver's host memory, moved and reduced with memmove
 * and loops when the data is due (at the call, or at ncclGroupEnd for
 * grouped calls, once every rank of the communicator has made its call);
 * then, as real NCCL does, a kernel is launched on the call's stream
 * through the driver (cuLaunchKernelEx): one per ungrouped collective
 * (ncclDevKernel_<Function>), one per communicator at ncclGroupEnd
 * (ncclDevKernel_Generic, or ncclDevKernel_SendRecv for point to point
 * alone). The simulated driver gives each its time on the stream. A
 * collective of a one-rank communicator is done at the call, grouped or
 * not, as NCCL's ncclLaunchOneRank does it: a pre-multiplied sum (avg on a
 * floating type, or a ncclRedOpCreatePreMulSum op) launches oneRankReduce,
 * any other copies the buffer when out of place (cuMemcpyAsync on the
 * stream) and does nothing in place, and a count of 0 does nothing.
 *
 * What it does like NCCL: ncclBcast calls ncclBroadcast; pnccl* are ELF
 * aliases of the nccl* functions; groups nest and belong to their thread;
 * ranks of one communicator may live in one thread (ncclCommInitAll, calls
 * grouped) or in several (ncclCommInitRank waits until all have joined; a
 * collective is done when the last rank's call arrives). What it does not:
 * networks, several processes, non-blocking communicators, float16,
 * bfloat16 and float8 reductions across ranks (copies only), device-side
 * scalars of ncclRedOpCreatePreMulSum. Every simulated GPU is device 0 of
 * the simulated driver (it has one): several ranks may share it.
 *
 * Only the workloads load it, through their RUNPATH ($ORIGIN/../lib/nccl-sim).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "nccl.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Built with -fvisibility=hidden: only what is marked is exported. */
#define SIM_EXPORT __attribute__((visibility("default")))
/* NCCL's profiling names: another name of the same function, one address. */
#define SIM_ALIAS(name) \
	extern __typeof__(name) p##name __attribute__((alias(#name), visibility("default")));

#define SIM_COMM_MAGIC 0x6e63636cu /* "nccl" */
#define SIM_COMM_DEAD 0
#define SIM_MAX_RANKS 64
#define SIM_CUSTOM_OPS 16
#define SIM_INIT_WAIT_S 30

/* ---- kernels ----------------------------------------------------------------------- */

/*
 * Named as NCCL names its kernels (ncclDevKernel_..., taking the argument
 * storage struct), mangled, so the tracer's demangling is exercised.
 */
enum sim_kernel {
	SIM_KERNEL_ALL_REDUCE,
	SIM_KERNEL_BROADCAST,
	SIM_KERNEL_REDUCE,
	SIM_KERNEL_ALL_GATHER,
	SIM_KERNEL_REDUCE_SCATTER,
	SIM_KERNEL_ALL_TO_ALL,
	SIM_KERNEL_GATHER,
	SIM_KERNEL_SCATTER,
	SIM_KERNEL_SEND_RECV,
	SIM_KERNEL_GENERIC,
	SIM_KERNEL_ONE_RANK_REDUCE,
	SIM_KERNEL_COUNT,
};

static const char *const kernel_names[SIM_KERNEL_COUNT] = {
	"ncclDevKernel_AllReduce", "ncclDevKernel_Broadcast", "ncclDevKernel_Reduce",
	"ncclDevKernel_AllGather", "ncclDevKernel_ReduceScatter", "ncclDevKernel_AlltoAll",
	"ncclDevKernel_Gather", "ncclDevKernel_Scatter", "ncclDevKernel_SendRecv",
	"ncclDevKernel_Generic", "oneRankReduce",
};

#define SIM_KERNEL_THREADS 512

static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;
static CUresult kernels_rc = CUDA_ERROR_NOT_INITIALIZED;
static CUmodule kernels_module;
static CUfunction kernels[SIM_KERNEL_COUNT];

/* "_Z<len>NAME24ncclDevKernelArgsStorageILm4096EE": NAME(ncclDevKernelArgsStorage<4096ul>). */
static void mangled(enum sim_kernel kernel, char *out, size_t size)
{
	/* NCCL's one-rank kernel: oneRankReduce<FuncPreMulSum<float>>(void*, void*, unsigned long, unsigned long, bool). */
	if (kernel == SIM_KERNEL_ONE_RANK_REDUCE) {
		snprintf(out, size, "_Z13oneRankReduceI13FuncPreMulSumIfEEvPvS2_mmb");
		return;
	}
	snprintf(out, size, "_Z%zu%s24ncclDevKernelArgsStorageILm4096EE",
		 strlen(kernel_names[kernel]), kernel_names[kernel]);
}

static void load_kernels(void)
{
	char ptx[4096], name[128];
	size_t used;
	int k;

	used = (size_t)snprintf(ptx, sizeof(ptx),
				"// the simulated libnccl's kernels (bodies are not simulated)\n"
				".version 7.5\n.target sm_75\n.address_size 64\n");
	for (k = 0; k < SIM_KERNEL_COUNT; k++) {
		mangled(k, name, sizeof(name));
		used += (size_t)snprintf(ptx + used, sizeof(ptx) - used,
					 ".visible .entry %s(.param .align 8 .b8 args[4096])\n{\n\tret;\n}\n",
					 name);
	}
	kernels_rc = cuModuleLoadData(&kernels_module, ptx);
	for (k = 0; kernels_rc == CUDA_SUCCESS && k < SIM_KERNEL_COUNT; k++) {
		mangled(k, name, sizeof(name));
		kernels_rc = cuModuleGetFunction(&kernels[k], kernels_module, name);
	}
}

/* ---- communicators, cliques and the work between them ------------------------------- */

enum sim_func {
	SIM_ALL_REDUCE, SIM_BROADCAST, SIM_REDUCE, SIM_ALL_GATHER, SIM_REDUCE_SCATTER,
	SIM_ALL_TO_ALL, SIM_GATHER, SIM_SCATTER, SIM_SEND, SIM_RECV,
};

struct sim_op {
	enum sim_func func;
	const void *send;
	void *recv;
	size_t count;
	ncclDataType_t type;
	ncclRedOp_t op;
	int root;                  /* root, or the peer of a send/recv */
	struct ncclComm *comm;
	cudaStream_t stream;
	struct sim_op *next;
};

struct sim_custom_op {
	bool used;
	double scalar;
	ncclDataType_t type;
};

struct sim_clique;

struct ncclComm {
	uint32_t magic;
	int rank;
	int nranks;
	int device;
	struct sim_clique *clique;
	struct sim_custom_op custom[SIM_CUSTOM_OPS];
	ncclResult_t async_error;  /* a mismatch found when the ranks' calls met */
};

/* The ranks of one communicator, met in this process, with their calls not yet done. */
struct sim_clique {
	ncclUniqueId id;
	int nranks;
	int joined;
	int live;                  /* ranks not yet destroyed */
	struct ncclComm *ranks[SIM_MAX_RANKS];
	/* Collective calls of each rank, in order; sends and receives by (rank, peer). */
	struct sim_op *colls[SIM_MAX_RANKS];
	struct sim_op *sends[SIM_MAX_RANKS][SIM_MAX_RANKS];
	struct sim_op *recvs[SIM_MAX_RANKS][SIM_MAX_RANKS];
	struct sim_clique *next;
};

static pthread_mutex_t cliques_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cliques_changed = PTHREAD_COND_INITIALIZER;
static struct sim_clique *cliques;
static unsigned long long ids_made;

/* Each thread's group: depth and the calls it holds until ncclGroupEnd. */
static _Thread_local int group_depth;
static _Thread_local struct sim_op *group_head, *group_tail;

static size_t type_size(ncclDataType_t type)
{
	switch (type) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
	case ncclFloat16: case ncclBfloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
	default: return 0;
	}
}

static bool comm_ok(const struct ncclComm *comm)
{
	return comm && comm->magic == SIM_COMM_MAGIC;
}

/* Appends op to a list kept by its head. */
static void append(struct sim_op **head, struct sim_op *op)
{
	while (*head)
		head = &(*head)->next;
	op->next = NULL;
	*head = op;
}

static struct sim_op *pop(struct sim_op **head)
{
	struct sim_op *op = *head;

	if (op)
		*head = op->next;
	return op;
}

/* ---- reductions ---------------------------------------------------------------------- */

#define REDUCE_LOOP(T)								\
	do {									\
		T *o = (T *)out;						\
		const T *x = (const T *)in;					\
		size_t i;							\
		for (i = 0; i < count; i++) {					\
			T v = custom ? (T)(x[i] * scalar) : x[i];		\
			if (first)						\
				o[i] = v;					\
			else if (op == ncclProd)				\
				o[i] = o[i] * v;				\
			else if (op == ncclMax)					\
				o[i] = v > o[i] ? v : o[i];			\
			else if (op == ncclMin)					\
				o[i] = v < o[i] ? v : o[i];			\
			else							\
				o[i] = o[i] + v;				\
		}								\
	} while (0)

#define DIVIDE_LOOP(T)								\
	do {									\
		T *o = (T *)out;						\
		size_t i;							\
		for (i = 0; i < count; i++)					\
			o[i] = (T)(o[i] / nranks);				\
	} while (0)

/* Whether the simulator can reduce type across ranks (its CPU has no float16 or float8). */
static bool reducible(ncclDataType_t type)
{
	return type != ncclFloat16 && type != ncclBfloat16 && type != ncclFloat8e4m3 &&
	       type != ncclFloat8e5m2;
}

/* out (op)= in, element by element: first copies; a custom op multiplies by its scalar, then sums. */
static void reduce_into(void *out, const void *in, size_t count, ncclDataType_t type,
			ncclRedOp_t op, const struct ncclComm *comm, bool first)
{
	bool custom = op >= ncclNumOps;
	double scalar = custom ? comm->custom[(op - ncclNumOps) % SIM_CUSTOM_OPS].scalar : 1;

	if (!reducible(type)) {
		if (first)
			memmove(out, in, count * type_size(type));
		return;
	}
	switch (type) {
	case ncclInt8: REDUCE_LOOP(int8_t); break;
	case ncclUint8: REDUCE_LOOP(uint8_t); break;
	case ncclInt32: REDUCE_LOOP(int32_t); break;
	case ncclUint32: REDUCE_LOOP(uint32_t); break;
	case ncclInt64: REDUCE_LOOP(int64_t); break;
	case ncclUint64: REDUCE_LOOP(uint64_t); break;
	case ncclFloat32: REDUCE_LOOP(float); break;
	case ncclFloat64: REDUCE_LOOP(double); break;
	default: break;
	}
}

static void finish_average(void *out, size_t count, ncclDataType_t type, ncclRedOp_t op, int nranks)
{
	if (op != ncclAvg || nranks == 1 || !reducible(type))
		return;
	switch (type) {
	case ncclInt8: DIVIDE_LOOP(int8_t); break;
	case ncclUint8: DIVIDE_LOOP(uint8_t); break;
	case ncclInt32: DIVIDE_LOOP(int32_t); break;
	case ncclUint32: DIVIDE_LOOP(uint32_t); break;
	case ncclInt64: DIVIDE_LOOP(int64_t); break;
	case ncclUint64: DIVIDE_LOOP(uint64_t); break;
	case ncclFloat32: DIVIDE_LOOP(float); break;
	case ncclFloat64: DIVIDE_LOOP(double); break;
	default: break;
	}
}

/* ---- doing the work, once every rank's call is in -------------------------------------- */

/*
 * One collective across the ranks: ops[r] is rank r's call. The results go
 * to a scratch first, so buffers that overlap (in place) read what they held.
 */
static ncclResult_t run_collective(struct sim_op **ops, int nranks)
{
	const struct sim_op *o = ops[0];
	size_t bytes = o->count * type_size(o->type), total = bytes * (size_t)nranks;
	const struct sim_op *root_op = NULL;
	unsigned char *scratch;
	int r, k;

	for (r = 0; r < nranks; r++) {
		if (ops[r]->func != o->func || ops[r]->count != o->count || ops[r]->type != o->type ||
		    ops[r]->root != o->root)
			return ncclInvalidUsage;
		if (ops[r]->comm->rank == o->root)
			root_op = ops[r];
	}
	scratch = malloc(total ? total : 1);
	if (!scratch)
		return ncclSystemError;
	switch (o->func) {
	case SIM_ALL_REDUCE:
	case SIM_REDUCE:
		for (r = 0; r < nranks; r++)
			reduce_into(scratch, ops[r]->send, o->count, o->type, ops[r]->op, ops[r]->comm, !r);
		finish_average(scratch, o->count, o->type, o->op, nranks);
		for (r = 0; r < nranks; r++)
			if (o->func == SIM_ALL_REDUCE || ops[r] == root_op)
				memmove(ops[r]->recv, scratch, bytes);
		break;
	case SIM_BROADCAST:
		if (!root_op)
			goto bad_root;
		memmove(scratch, root_op->send, bytes);
		for (r = 0; r < nranks; r++)
			memmove(ops[r]->recv, scratch, bytes);
		break;
	case SIM_ALL_GATHER:
	case SIM_GATHER:
		for (k = 0; k < nranks; k++)
			memmove(scratch + (size_t)ops[k]->comm->rank * bytes, ops[k]->send, bytes);
		if (o->func == SIM_GATHER && !root_op)
			goto bad_root;
		for (r = 0; r < nranks; r++)
			if (o->func == SIM_ALL_GATHER || ops[r] == root_op)
				memmove(ops[r]->recv, scratch, total);
		break;
	case SIM_REDUCE_SCATTER:
		for (r = 0; r < nranks; r++) {
			size_t at = (size_t)ops[r]->comm->rank * bytes;

			for (k = 0; k < nranks; k++)
				reduce_into(scratch + at, (const unsigned char *)ops[k]->send + at, o->count,
					    o->type, ops[k]->op, ops[k]->comm, !k);
			finish_average(scratch + at, o->count, o->type, o->op, nranks);
		}
		for (r = 0; r < nranks; r++)
			memmove(ops[r]->recv, scratch + (size_t)ops[r]->comm->rank * bytes, bytes);
		break;
	case SIM_SCATTER:
		if (!root_op)
			goto bad_root;
		memmove(scratch, root_op->send, total);
		for (r = 0; r < nranks; r++)
			memmove(ops[r]->recv, scratch + (size_t)ops[r]->comm->rank * bytes, bytes);
		break;
	case SIM_ALL_TO_ALL:
		free(scratch);
		scratch = malloc(total ? total * (size_t)nranks : 1);
		if (!scratch)
			return ncclSystemError;
		/* Rank r receives at k*count what rank k sent at r*count. */
		for (r = 0; r < nranks; r++)
			for (k = 0; k < nranks; k++)
				memmove(scratch + (size_t)ops[r]->comm->rank * total + (size_t)ops[k]->comm->rank * bytes,
					(const unsigned char *)ops[k]->send + (size_t)ops[r]->comm->rank * bytes,
					bytes);
		for (r = 0; r < nranks; r++)
			memmove(ops[r]->recv, scratch + (size_t)ops[r]->comm->rank * total, total);
		break;
	default:
		break;
	}
	free(scratch);
	return ncclSuccess;
bad_root:
	free(scratch);
	return ncclInvalidArgument;
}

static void fail_comms(struct sim_op **ops, int n, ncclResult_t rc)
{
	int r;

	for (r = 0; r < n; r++)
		if (rc != ncclSuccess)
			ops[r]->comm->async_error = rc;
}

/* Whatever calls of the clique can now meet, done. Called with cliques_lock held. */
static void progress(struct sim_clique *c)
{
	struct sim_op *ops[SIM_MAX_RANKS], *send, *recv;
	bool ready;
	int r, p;

	for (;;) {
		ready = true;
		for (r = 0; r < c->nranks && ready; r++)
			ready = c->colls[r] != NULL;
		if (!ready)
			break;
		for (r = 0; r < c->nranks; r++)
			ops[r] = pop(&c->colls[r]);
		fail_comms(ops, c->nranks, run_collective(ops, c->nranks));
		for (r = 0; r < c->nranks; r++)
			free(ops[r]);
	}
	for (r = 0; r < c->nranks; r++)
		for (p = 0; p < c->nranks; p++)
			while (c->sends[r][p] && c->recvs[p][r]) {
				send = pop(&c->sends[r][p]);
				recv = pop(&c->recvs[p][r]);
				if (send->count != recv->count || send->type != recv->type)
					send->comm->async_error = recv->comm->async_error = ncclInvalidUsage;
				else
					memmove(recv->recv, send->send, send->count * type_size(send->type));
				free(send);
				free(recv);
			}
}

/* A call's data is due: queued with its clique, done once its peers' calls are in. */
static void submit(struct sim_op *op)
{
	struct sim_clique *c = op->comm->clique;
	int rank = op->comm->rank;

	pthread_mutex_lock(&cliques_lock);
	if (op->func == SIM_SEND)
		append(&c->sends[rank][op->root], op);
	else if (op->func == SIM_RECV)
		append(&c->recvs[rank][op->root], op);
	else
		append(&c->colls[rank], op);
	progress(c);
	pthread_mutex_unlock(&cliques_lock);
}

/* The GPU's part: a kernel on the stream, launched through the driver. */
static ncclResult_t launch(enum sim_kernel kernel, cudaStream_t stream)
{
	CUlaunchConfig config = {
		.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
		.blockDimX = SIM_KERNEL_THREADS, .blockDimY = 1, .blockDimZ = 1,
		.hStream = stream,
	};
	unsigned char storage[64] = { 0 };
	void *params[] = { storage };

	if (kernels_rc != CUDA_SUCCESS)
		return ncclUnhandledCudaError;
	return cuLaunchKernelEx(&config, kernels[kernel], params, NULL) == CUDA_SUCCESS ?
	       ncclSuccess : ncclUnhandledCudaError;
}

static enum sim_kernel kernel_of(enum sim_func func)
{
	static const enum sim_kernel of[] = {
		[SIM_ALL_REDUCE] = SIM_KERNEL_ALL_REDUCE, [SIM_BROADCAST] = SIM_KERNEL_BROADCAST,
		[SIM_REDUCE] = SIM_KERNEL_REDUCE, [SIM_ALL_GATHER] = SIM_KERNEL_ALL_GATHER,
		[SIM_REDUCE_SCATTER] = SIM_KERNEL_REDUCE_SCATTER,
		[SIM_ALL_TO_ALL] = SIM_KERNEL_ALL_TO_ALL, [SIM_GATHER] = SIM_KERNEL_GATHER,
		[SIM_SCATTER] = SIM_KERNEL_SCATTER, [SIM_SEND] = SIM_KERNEL_SEND_RECV,
		[SIM_RECV] = SIM_KERNEL_SEND_RECV,
	};

	return of[func];
}

/* A pre-multiplied sum: what NCCL makes of avg on floating types and of ncclRedOpCreatePreMulSum ops. */
static bool premul_sum(const struct sim_op *call)
{
	bool reduces = call->func == SIM_ALL_REDUCE || call->func == SIM_REDUCE ||
		       call->func == SIM_REDUCE_SCATTER;
	bool floating = call->type == ncclFloat16 || call->type == ncclFloat32 ||
			call->type == ncclFloat64 || call->type == ncclBfloat16 ||
			call->type == ncclFloat8e4m3 || call->type == ncclFloat8e5m2;

	return reduces && (call->op >= ncclNumOps || (call->op == ncclAvg && floating));
}

/* A collective of a one-rank communicator, at the call (see the top of this file). */
static ncclResult_t one_rank(const struct sim_op *call)
{
	size_t bytes = call->count * type_size(call->type);

	if (!call->count)
		return ncclSuccess;
	if (premul_sum(call)) {
		reduce_into(call->recv, call->send, call->count, call->type, call->op, call->comm, true);
		return launch(SIM_KERNEL_ONE_RANK_REDUCE, call->stream);
	}
	if (call->send == call->recv)
		return ncclSuccess;
	return cuMemcpyAsync((CUdeviceptr)(uintptr_t)call->recv, (CUdeviceptr)(uintptr_t)call->send,
			     bytes, call->stream) == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

/*
 * Every collective and send/recv: its arguments checked (as NCCL's argcheck
 * does), then done now by one rank, held by the thread's group, or due now
 * with its kernel.
 */
static ncclResult_t enqueue(const struct sim_op *call)
{
	struct sim_op *op;
	size_t size = type_size(call->type);

	if (!comm_ok(call->comm))
		return ncclInvalidArgument;
	if (!size || (call->op >= ncclNumOps &&
		      (call->op - ncclNumOps >= SIM_CUSTOM_OPS ||
		       !call->comm->custom[call->op - ncclNumOps].used)) || call->op < 0)
		return ncclInvalidArgument;
	if ((call->func == SIM_BROADCAST || call->func == SIM_REDUCE || call->func == SIM_GATHER ||
	     call->func == SIM_SCATTER || call->func == SIM_SEND || call->func == SIM_RECV) &&
	    (call->root < 0 || call->root >= call->comm->nranks))
		return ncclInvalidArgument;
	if (call->count && (((call->func != SIM_RECV && call->func != SIM_SCATTER) ||
			     call->comm->rank == call->root) && !call->send && call->func != SIM_RECV))
		return ncclInvalidArgument;
	if (call->count && !call->recv && call->func != SIM_SEND &&
	    !((call->func == SIM_REDUCE || call->func == SIM_GATHER) && call->comm->rank != call->root))
		return ncclInvalidArgument;
	if (call->comm->nranks > 1 && !reducible(call->type) &&
	    (call->func == SIM_ALL_REDUCE || call->func == SIM_REDUCE ||
	     call->func == SIM_REDUCE_SCATTER))
		return ncclInvalidArgument;
	if (call->comm->nranks == 1 && call->func != SIM_SEND && call->func != SIM_RECV)
		return one_rank(call);
	op = malloc(sizeof(*op));
	if (!op)
		return ncclSystemError;
	*op = *call;
	op->next = NULL;
	if (group_depth > 0) {
		if (group_tail)
			group_tail->next = op;
		else
			group_head = op;
		group_tail = op;
		return ncclSuccess;
	}
	submit(op);
	return launch(kernel_of(call->func), call->stream);
}

#define SIM_OP(...) (&(const struct sim_op){ __VA_ARGS__ })

/* ---- the API ---------------------------------------------------------------------------- */

SIM_EXPORT ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	struct timespec now;
	uint64_t magic;

	if (!uniqueId)
		return ncclInvalidArgument;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&cliques_lock);
	magic = (uint64_t)getpid() << 32 ^ (uint64_t)now.tv_nsec ^ ++ids_made << 48;
	pthread_mutex_unlock(&cliques_lock);
	memset(uniqueId, 0, sizeof(*uniqueId));
	/* Like NCCL's bootstrap handle: a random magic, then a socket address (here made up). */
	memcpy(uniqueId->internal, &magic, sizeof(magic));
	snprintf(uniqueId->internal + 8, sizeof(uniqueId->internal) - 8, "sim:%d:%llu", (int)getpid(),
		 ids_made);
	return ncclSuccess;
}

SIM_EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error";
	case ncclInternalError: return "internal error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

/* The driver side a communicator needs: its device's context current, the kernels loaded. */
static ncclResult_t setup_device(int device)
{
	CUcontext current = NULL, primary;
	CUdevice dev;

	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, device) != CUDA_SUCCESS)
		return ncclUnhandledCudaError;
	if (cuCtxGetCurrent(&current) != CUDA_SUCCESS)
		return ncclUnhandledCudaError;
	if (!current) {
		if (cuDevicePrimaryCtxRetain(&primary, dev) != CUDA_SUCCESS ||
		    cuCtxSetCurrent(primary) != CUDA_SUCCESS)
			return ncclUnhandledCudaError;
	}
	pthread_once(&kernels_once, load_kernels);
	return kernels_rc == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

/* The clique of id, made when new. Called with cliques_lock held. */
static struct sim_clique *clique_of(const ncclUniqueId *id, int nranks)
{
	struct sim_clique *c;

	for (c = cliques; c; c = c->next)
		if (!memcmp(&c->id, id, sizeof(*id)) && c->joined < c->nranks)
			return c->nranks == nranks ? c : NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = *id;
	c->nranks = nranks;
	c->next = cliques;
	cliques = c;
	return c;
}

static struct ncclComm *new_comm(struct sim_clique *c, int rank, int device)
{
	struct ncclComm *comm = calloc(1, sizeof(*comm));

	if (!comm)
		return NULL;
	comm->magic = SIM_COMM_MAGIC;
	comm->rank = rank;
	comm->nranks = c->nranks;
	comm->device = device;
	comm->clique = c;
	c->ranks[rank] = comm;
	c->joined++;
	c->live++;
	return comm;
}

/* Joins rank to the clique of id and waits for the other ranks (other threads). */
static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank)
{
	struct timespec deadline;
	struct sim_clique *c;
	struct ncclComm *comm;
	ncclResult_t rc;

	if (!out || nranks < 1 || nranks > SIM_MAX_RANKS || rank < 0 || rank >= nranks || !id)
		return ncclInvalidArgument;
	*out = NULL;
	rc = setup_device(0);
	if (rc != ncclSuccess)
		return rc;
	pthread_mutex_lock(&cliques_lock);
	c = clique_of(id, nranks);
	if (!c || c->ranks[rank]) {
		pthread_mutex_unlock(&cliques_lock);
		return ncclInvalidUsage;
	}
	comm = new_comm(c, rank, 0); /* the simulated driver's one device */
	if (!comm) {
		pthread_mutex_unlock(&cliques_lock);
		return ncclSystemError;
	}
	pthread_cond_broadcast(&cliques_changed);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += SIM_INIT_WAIT_S;
	while (c->joined < c->nranks)
		if (pthread_cond_timedwait(&cliques_changed, &cliques_lock, &deadline) == ETIMEDOUT)
			break;
	rc = c->joined == c->nranks ? ncclSuccess : ncclRemoteError;
	pthread_mutex_unlock(&cliques_lock);
	if (rc == ncclSuccess)
		*out = comm;
	return rc;
}

SIM_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return init_rank(comm, nranks, &commId, rank);
}

SIM_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
					       int rank, ncclConfig_t *config)
{
	(void)config;
	return init_rank(comm, nranks, &commId, rank);
}

SIM_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	struct sim_clique *c;
	ncclUniqueId id;
	ncclResult_t rc;
	int i;

	if (!comm || ndev < 1 || ndev > SIM_MAX_RANKS)
		return ncclInvalidArgument;
	for (i = 0; i < ndev; i++)
		comm[i] = NULL;
	rc = setup_device(0);
	if (rc == ncclSuccess)
		rc = ncclGetUniqueId(&id);
	if (rc != ncclSuccess)
		return rc;
	pthread_mutex_lock(&cliques_lock);
	c = clique_of(&id, ndev);
	for (i = 0; c && i < ndev; i++) {
		comm[i] = new_comm(c, i, devlist ? devlist[i] : i);
		if (!comm[i])
			break;
	}
	pthread_mutex_unlock(&cliques_lock);
	return c && i == ndev ? ncclSuccess : ncclSystemError;
}

/* A communicator of its own for every rank that split: ranks of one color keep their order by key. */
SIM_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
				      ncclConfig_t *config)
{
	struct sim_clique *c;
	ncclUniqueId id;

	(void)key;
	(void)config;
	if (!comm_ok(comm) || !newcomm)
		return ncclInvalidArgument;
	*newcomm = NULL;
	if (color == NCCL_SPLIT_NOCOLOR)
		return ncclSuccess;
	/* Every rank of the parent must call it together: one rank alone is what the simulator splits. */
	if (comm->nranks != 1)
		return ncclInvalidUsage;
	if (ncclGetUniqueId(&id) != ncclSuccess)
		return ncclSystemError;
	pthread_mutex_lock(&cliques_lock);
	c = clique_of(&id, 1);
	*newcomm = c ? new_comm(c, 0, comm->device) : NULL;
	pthread_mutex_unlock(&cliques_lock);
	return *newcomm ? ncclSuccess : ncclSystemError;
}

SIM_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}

static void drop(struct sim_op **head)
{
	while (*head)
		free(pop(head));
}

/* A rank leaves: its calls whose peers never came are dropped; the last one frees the clique. */
static ncclResult_t end_comm(ncclComm_t comm)
{
	struct sim_clique *c, **link;
	int rank, p;

	if (!comm_ok(comm))
		return ncclInvalidArgument;
	pthread_mutex_lock(&cliques_lock);
	c = comm->clique;
	rank = comm->rank;
	c->ranks[rank] = NULL;
	comm->magic = SIM_COMM_DEAD;
	drop(&c->colls[rank]);
	for (p = 0; p < c->nranks; p++) {
		drop(&c->sends[rank][p]);
		drop(&c->recvs[rank][p]);
	}
	if (!--c->live) {
		for (link = &cliques; *link && *link != c; link = &(*link)->next)
			;
		if (*link)
			*link = c->next;
		free(c);
	}
	pthread_mutex_unlock(&cliques_lock);
	free(comm);
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	return end_comm(comm);
}

SIM_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	return end_comm(comm);
}

SIM_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!comm_ok(comm) || !asyncError)
		return ncclInvalidArgument;
	*asyncError = comm->async_error;
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm_ok(comm) || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (!comm_ok(comm) || !device)
		return ncclInvalidArgument;
	*device = comm->device;
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm_ok(comm) || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
						 ncclDataType_t datatype,
						 ncclScalarResidence_t residence, ncclComm_t comm)
{
	int i;

	if (!op || !scalar || !comm_ok(comm) || !type_size(datatype))
		return ncclInvalidArgument;
	/* The scalar is read now: a device-resident one would be read by the kernel. */
	if (residence != ncclScalarHostImmediate || (datatype != ncclFloat32 && datatype != ncclFloat64))
		return ncclInvalidArgument;
	for (i = 0; i < SIM_CUSTOM_OPS && comm->custom[i].used; i++)
		;
	if (i == SIM_CUSTOM_OPS)
		return ncclSystemError;
	comm->custom[i].used = true;
	comm->custom[i].type = datatype;
	comm->custom[i].scalar = datatype == ncclFloat32 ? *(float *)scalar : *(double *)scalar;
	*op = (ncclRedOp_t)(ncclNumOps + i);
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	if (!comm_ok(comm) || op < ncclNumOps || op - ncclNumOps >= SIM_CUSTOM_OPS ||
	    !comm->custom[op - ncclNumOps].used)
		return ncclInvalidArgument;
	comm->custom[op - ncclNumOps].used = false;
	return ncclSuccess;
}

SIM_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
				   ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
				   cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_REDUCE, .send = sendbuff, .recv = recvbuff, .count = count,
			      .type = datatype, .op = op, .root = root, .comm = comm, .stream = stream));
}

SIM_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
				      ncclDataType_t datatype, int root, ncclComm_t comm,
				      cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_BROADCAST, .send = sendbuff, .recv = recvbuff,
			      .count = count, .type = datatype, .root = root, .comm = comm,
			      .stream = stream));
}

/* The in-place form, which NCCL implements by calling ncclBroadcast: so does the simulator. */
SIM_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
				  ncclComm_t comm, cudaStream_t stream)
{
	return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

SIM_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
				      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
				      cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_ALL_REDUCE, .send = sendbuff, .recv = recvbuff,
			      .count = count, .type = datatype, .op = op, .comm = comm,
			      .stream = stream));
}

SIM_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
					  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
					  cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_REDUCE_SCATTER, .send = sendbuff, .recv = recvbuff,
			      .count = recvcount, .type = datatype, .op = op, .comm = comm,
			      .stream = stream));
}

SIM_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
				      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_ALL_GATHER, .send = sendbuff, .recv = recvbuff,
			      .count = sendcount, .type = datatype, .comm = comm, .stream = stream));
}

SIM_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
				     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_ALL_TO_ALL, .send = sendbuff, .recv = recvbuff,
			      .count = count, .type = datatype, .comm = comm, .stream = stream));
}

SIM_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
				   ncclDataType_t datatype, int root, ncclComm_t comm,
				   cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_GATHER, .send = sendbuff, .recv = recvbuff, .count = count,
			      .type = datatype, .root = root, .comm = comm, .stream = stream));
}

SIM_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
				    ncclDataType_t datatype, int root, ncclComm_t comm,
				    cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_SCATTER, .send = sendbuff, .recv = recvbuff, .count = count,
			      .type = datatype, .root = root, .comm = comm, .stream = stream));
}

SIM_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
				 int peer, ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_SEND, .send = sendbuff, .count = count, .type = datatype,
			      .root = peer, .comm = comm, .stream = stream));
}

SIM_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
				 ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(SIM_OP(.func = SIM_RECV, .recv = recvbuff, .count = count, .type = datatype,
			      .root = peer, .comm = comm, .stream = stream));
}

SIM_EXPORT ncclResult_t ncclGroupStart(void)
{
	group_depth++;
	return ncclSuccess;
}

/*
 * The outermost end: every held call is due (in the order made), then one
 * kernel per communicator, on the stream of its first call in the group.
 */
SIM_EXPORT ncclResult_t ncclGroupEnd(void)
{
	struct {
		struct ncclComm *comm;
		cudaStream_t stream;
		bool p2p_only;
	} plans[SIM_MAX_RANKS];
	ncclResult_t rc = ncclSuccess;
	struct sim_op *op;
	size_t n = 0, i;

	if (group_depth <= 0)
		return ncclInvalidUsage;
	if (--group_depth)
		return ncclSuccess;
	group_tail = NULL;
	while ((op = pop(&group_head))) {
		for (i = 0; i < n && plans[i].comm != op->comm; i++)
			;
		if (i == n) {
			if (n == SIM_MAX_RANKS) {
				free(op);
				rc = ncclInvalidUsage;
				continue;
			}
			plans[n].comm = op->comm;
			plans[n].stream = op->stream;
			plans[n++].p2p_only = true;
		}
		if (op->func != SIM_SEND && op->func != SIM_RECV)
			plans[i].p2p_only = false;
		submit(op);
	}
	for (i = 0; i < n && rc == ncclSuccess; i++)
		rc = launch(plans[i].p2p_only ? SIM_KERNEL_SEND_RECV : SIM_KERNEL_GENERIC, plans[i].stream);
	return rc;
}

SIM_ALIAS(ncclGetVersion)
SIM_ALIAS(ncclGetUniqueId)
SIM_ALIAS(ncclGetErrorString)
SIM_ALIAS(ncclCommInitRank)
SIM_ALIAS(ncclCommInitRankConfig)
SIM_ALIAS(ncclCommInitAll)
SIM_ALIAS(ncclCommSplit)
SIM_ALIAS(ncclCommFinalize)
SIM_ALIAS(ncclCommDestroy)
SIM_ALIAS(ncclCommAbort)
SIM_ALIAS(ncclCommGetAsyncError)
SIM_ALIAS(ncclCommCount)
SIM_ALIAS(ncclCommCuDevice)
SIM_ALIAS(ncclCommUserRank)
SIM_ALIAS(ncclRedOpCreatePreMulSum)
SIM_ALIAS(ncclRedOpDestroy)
SIM_ALIAS(ncclReduce)
SIM_ALIAS(ncclBcast)
SIM_ALIAS(ncclBroadcast)
SIM_ALIAS(ncclAllReduce)
SIM_ALIAS(ncclReduceScatter)
SIM_ALIAS(ncclAllGather)
SIM_ALIAS(ncclAlltoAll)
SIM_ALIAS(ncclGather)
SIM_ALIAS(ncclScatter)
SIM_ALIAS(ncclSend)
SIM_ALIAS(ncclRecv)
SIM_ALIAS(ncclGroupStart)
SIM_ALIAS(ncclGroupEnd)
