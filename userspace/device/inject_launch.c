// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Launches of instrumented kernels and graph kernel nodes: the launch slot (inject_internal.h). */
#include "inject_internal.h"

/* What a launch of an instrumented kernel passes when it has no slot: seq unknown (0). */
static const uint64_t no_slot;

/* ---- launches -------------------------------------------------------------------------------- */

/*
 * The instrumented kernel a function handle launches, and the module or
 * library it came from (owner, when asked), or false. Copied under the lock.
 */
static bool instrumented_from(const void *f, struct kernel_info *out, const void **owner)
{
	struct handle_entry *e;

	if (!inject.active || !f)
		return false;
	pthread_rwlock_rdlock(&inject.lock);
	e = table_find(&inject.functions, f);
	if (e) {
		*out = *(struct kernel_info *)e->value;
		if (owner)
			*owner = e->owner;
	}
	pthread_rwlock_unlock(&inject.lock);
	return e != NULL;
}

static bool instrumented(const void *f, struct kernel_info *out)
{
	return instrumented_from(f, out, NULL);
}

/*
 * The new parameters of one launch, built in one block: the slot header,
 * then the kernelParams array (the caller's N pointers and one to
 * slot_address), then slot_address, the device address of the slot the
 * kernel reads its seq from (0 when it has none).
 */
struct launch_block {
	struct cp_launch_slot_header header;
	void *params[]; /* N + 1, then the slot's address (one more void * worth) */
};

/* Extra-array launches: the caller's buffer copied with the slot's address after it. */
struct launch_extra {
	struct cp_launch_slot_header header; /* just before extra, where the BPF side looks */
	void *extra[5];
	size_t size;
	unsigned char buffer[];
};

struct launch {
	struct launch_block *block;
	struct launch_extra *extra_block;
	void **params;     /* what the driver gets */
	void **extra;
	bool on_heap;
	union {
		struct launch_block block;
		unsigned char bytes[sizeof(struct launch_block) + (STACK_PARAMS + 2) * sizeof(void *)];
	} stack;
};

static uint64_t take_slot(void)
{
	uint64_t *slots = inject.slots.base;
	uint64_t count = inject.plan.launch_slot_count;

	if (!slots || count < 2)
		return 0;
	/* Slot 0 counts; shared memory, so forked processes never hand out one slot twice at once. */
	return 1 + __atomic_fetch_add(&slots[0], 1, __ATOMIC_RELAXED) % (count - 1);
}

static bool capturing(CUstream stream, bool ptsz)
{
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult rc = ptsz ? HELPER(cuStreamIsCapturing_ptsz, stream, &status) :
			     HELPER(cuStreamIsCapturing, stream, &status);

	/* A captured launch is replayed later, and its slot would be stale by then. */
	return rc == CUDA_SUCCESS ? status != CU_STREAM_CAPTURE_STATUS_NONE : false;
}

/* The launch's parameters with the slot's address added: CUDA_SUCCESS, or why it cannot launch. */
static void finish_launch(struct launch *l);

/*
 * The launch's parameters with the slot's address added: CUDA_SUCCESS, or
 * why it cannot launch (nothing to free then).
 */
static CUresult prepare_launch(struct launch *l, const struct kernel_info *k, void **params, void **extra,
			       bool with_slot)
{
	size_t n = k->param_count, i;
	uint64_t index = with_slot ? take_slot() : 0;
	uint64_t address = index ? (uint64_t)(uintptr_t)((uint64_t *)inject.slots.base + index) : 0;
	struct cp_launch_slot_header header = { .magic = inject.plan.magic, .index = index };

	memset(l, 0, offsetof(struct launch, stack));
	/* kernelParams (a kernel launched with neither array has no parameters of its own). */
	if (params || !extra) {
		if (n <= STACK_PARAMS) {
			l->block = &l->stack.block;
		} else {
			l->block = malloc(sizeof(*l->block) + (n + 2) * sizeof(void *));
			if (!l->block)
				return CUDA_ERROR_OUT_OF_MEMORY;
			l->on_heap = true;
		}
		l->block->header = header;
		for (i = 0; params && i < n; i++)
			l->block->params[i] = params[i];
		memcpy(&l->block->params[n + 1], &address, sizeof(address));
		l->block->params[n] = &l->block->params[n + 1];
		l->params = l->block->params;
	}
	if (extra) {
		/* CU_LAUNCH_PARAM_BUFFER_POINTER p, CU_LAUNCH_PARAM_BUFFER_SIZE &size, END. */
		void *buffer = NULL;
		size_t *size = NULL, room = (k->param_bytes + 7) / 8 * 8 + 8;
		CUresult rc = CUDA_SUCCESS;

		for (i = 0; extra[i] != CU_LAUNCH_PARAM_END && rc == CUDA_SUCCESS; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buffer = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				size = extra[i + 1];
			else
				rc = CUDA_ERROR_NOT_SUPPORTED;
		}
		if (rc == CUDA_SUCCESS && (!buffer || !size))
			rc = CUDA_ERROR_INVALID_VALUE;
		if (rc == CUDA_SUCCESS && !(l->extra_block = calloc(1, sizeof(*l->extra_block) + room)))
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		if (rc != CUDA_SUCCESS) {
			finish_launch(l);
			return rc;
		}
		l->extra_block->header = header;
		memcpy(l->extra_block->buffer, buffer, *size < k->param_bytes ? *size : k->param_bytes);
		memcpy(l->extra_block->buffer + room - 8, &address, sizeof(address));
		l->extra_block->size = room;
		l->extra_block->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
		l->extra_block->extra[1] = l->extra_block->buffer;
		l->extra_block->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
		l->extra_block->extra[3] = &l->extra_block->size;
		l->extra_block->extra[4] = CU_LAUNCH_PARAM_END;
		l->extra = l->extra_block->extra;
	}
	return CUDA_SUCCESS;
}

static void finish_launch(struct launch *l)
{
	if (l->on_heap)
		free(l->block);
	free(l->extra_block);
}

/*
 * Before an instrumented kernel launches: its maps must be registered.
 * When that failed the launch is refused (the kernel would fault on them),
 * said once.
 */
static CUresult launch_allowed(const struct kernel_info *k)
{
	CUresult rc = ensure_registered();
	bool no = false;

	if (rc == CUDA_SUCCESS)
		return rc;
	if (atomic_compare_exchange_strong(&inject.register_reported, &no, true))
		report(CP_INJECT_ERROR, NULL, k->name, k->probes, 0,
		       "instrumented kernels are not launched: their maps are not registered with the driver (%s)",
		       result_name(rc));
	return rc == CUDA_ERROR_INVALID_CONTEXT ? rc : CUDA_ERROR_NOT_SUPPORTED;
}

#define LAUNCH_KERNEL(wrapper, hook, ptsz_twin)					\
	CUresult CUDAAPI wrapper(CUfunction f, unsigned int gridDimX,	\
					       unsigned int gridDimY, unsigned int gridDimZ, \
					       unsigned int blockDimX, unsigned int blockDimY, \
					       unsigned int blockDimZ,		\
					       unsigned int sharedMemBytes, CUstream hStream, \
					       void **kernelParams, void **extra)	\
	{									\
		struct kernel_info k;						\
		const void *owner = NULL;					\
		struct launch l;						\
		bool captured;							\
		CUresult rc;							\
										\
		if (!instrumented_from(f, &k, &owner))				\
			return REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, \
				    blockDimZ, sharedMemBytes, hStream, kernelParams, extra); \
		captured = capturing(hStream, ptsz_twin);			\
		rc = launch_allowed(&k);					\
		if (rc == CUDA_SUCCESS)						\
			rc = prepare_launch(&l, &k, kernelParams, extra, !captured); \
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		/* Noted first: a drain meanwhile never takes the kernel for done. */ \
		if (k.uses_shadow)						\
			drain_note_launch(f, owner, hStream, ptsz_twin,		\
					  captured ? DRAIN_IN_GRAPH : DRAIN_LAUNCH); \
		rc = REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
			  sharedMemBytes, hStream, l.params, l.extra);		\
		finish_launch(&l);						\
		return rc;							\
	}

LAUNCH_KERNEL(wrap_cuLaunchKernel, cuLaunchKernel, false)
LAUNCH_KERNEL(wrap_cuLaunchKernel_ptsz, cuLaunchKernel_ptsz, true)

#define LAUNCH_KERNEL_EX(wrapper, hook, ptsz_twin)				\
	CUresult CUDAAPI wrapper(const CUlaunchConfig *config, CUfunction f, \
					       void **kernelParams, void **extra)	\
	{									\
		struct kernel_info k;						\
		const void *owner = NULL;					\
		struct launch l;						\
		bool captured;							\
		CUresult rc;							\
										\
		if (!config || !instrumented_from(f, &k, &owner))		\
			return REAL(hook, config, f, kernelParams, extra);	\
		captured = capturing(config->hStream, ptsz_twin);		\
		rc = launch_allowed(&k);					\
		if (rc == CUDA_SUCCESS)						\
			rc = prepare_launch(&l, &k, kernelParams, extra, !captured); \
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		/* Noted first: a drain meanwhile never takes the kernel for done. */ \
		if (k.uses_shadow)						\
			drain_note_launch(f, owner, config->hStream, ptsz_twin,		\
					  captured ? DRAIN_IN_GRAPH : DRAIN_LAUNCH); \
		rc = REAL(hook, config, f, l.params, l.extra);			\
		finish_launch(&l);						\
		return rc;							\
	}

LAUNCH_KERNEL_EX(wrap_cuLaunchKernelEx, cuLaunchKernelEx, false)
LAUNCH_KERNEL_EX(wrap_cuLaunchKernelEx_ptsz, cuLaunchKernelEx_ptsz, true)

#define LAUNCH_COOPERATIVE(wrapper, hook, ptsz_twin)				\
	CUresult CUDAAPI wrapper(CUfunction f, unsigned int gridDimX,	\
					       unsigned int gridDimY, unsigned int gridDimZ, \
					       unsigned int blockDimX, unsigned int blockDimY, \
					       unsigned int blockDimZ,		\
					       unsigned int sharedMemBytes, CUstream hStream, \
					       void **kernelParams)			\
	{									\
		struct kernel_info k;						\
		const void *owner = NULL;					\
		struct launch l;						\
		bool captured;							\
		CUresult rc;							\
										\
		if (!instrumented_from(f, &k, &owner))				\
			return REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, \
				    blockDimZ, sharedMemBytes, hStream, kernelParams);	\
		captured = capturing(hStream, ptsz_twin);			\
		rc = launch_allowed(&k);					\
		if (rc == CUDA_SUCCESS)						\
			rc = prepare_launch(&l, &k, kernelParams, NULL, !captured); \
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		/* Noted first: a drain meanwhile never takes the kernel for done. */ \
		if (k.uses_shadow)						\
			drain_note_launch(f, owner, hStream, ptsz_twin,		\
					  captured ? DRAIN_IN_GRAPH : DRAIN_LAUNCH); \
		rc = REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
			  sharedMemBytes, hStream, l.params);			\
		finish_launch(&l);						\
		return rc;							\
	}

LAUNCH_COOPERATIVE(wrap_cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, false)
LAUNCH_COOPERATIVE(wrap_cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel_ptsz, true)

/* Deprecated: instrumented kernels are refused here, said once. */
CUresult CUDAAPI wrap_cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
									 unsigned int numDevices,
									 unsigned int flags)
{
	static atomic_bool said;
	struct kernel_info k;
	unsigned int i;
	bool no = false;

	for (i = 0; launchParamsList && i < numDevices; i++)
		if (instrumented(launchParamsList[i].function, &k)) {
			if (atomic_compare_exchange_strong(&said, &no, true))
				report(CP_INJECT_ERROR, "cuLaunchCooperativeKernelMultiDevice", k.name, k.probes, 0,
				       "instrumented kernels cannot be launched through this deprecated entry point: refused");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	return REAL(cuLaunchCooperativeKernelMultiDevice, launchParamsList, numDevices, flags);
}

/* The legacy parameter API: the block grows by the slot's address, set to 0 (seq unknown). */
CUresult CUDAAPI wrap_cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
	struct kernel_info k;
	const void *owner = NULL;
	unsigned int at;
	CUresult rc;

	if (!instrumented_from(hfunc, &k, &owner))
		return REAL(cuParamSetSize, hfunc, numbytes);
	/* Its launches (cuLaunch, cuLaunchGrid) are not seen: its shadows drain at every proof. */
	if (k.uses_shadow)
		drain_note_launch(hfunc, owner, NULL, false, DRAIN_LEGACY);
	at = (unsigned int)((k.param_bytes + 7) / 8 * 8);
	rc = REAL(cuParamSetSize, hfunc, at + 8);
	if (rc == CUDA_SUCCESS)
		rc = HELPER(cuParamSetv, hfunc, (int)at, (void *)&no_slot, sizeof(no_slot));
	return rc;
}

/* ---- graph kernel nodes -------------------------------------------------------------------- */

/*
 * A graph node's parameters are copied at creation and replayed at every
 * launch of the graph: its slot address is 0 (seq unknown) rather than a
 * slot that later launches would reuse. The node keeps its own copy, so the
 * arrays made here live only through the call.
 */
struct node_params {
	void **params;
	void **extra;
	struct launch launch;
	bool changed;
};

static CUresult node_prepare(struct node_params *np, CUfunction func, CUkernel kern, void **params,
			     void **extra)
{
	struct kernel_info k;
	const void *owner = NULL, *handle = func;
	CUresult rc;

	memset(np, 0, sizeof(*np));
	np->params = params;
	np->extra = extra;
	if (!instrumented_from(func, &k, &owner) && !instrumented_from(handle = kern, &k, &owner))
		return CUDA_SUCCESS;
	/* Its launches (the graph's) are not seen: its shadows drain at every proof. */
	if (k.uses_shadow)
		drain_note_launch(handle, owner, NULL, false, DRAIN_IN_GRAPH);
	rc = launch_allowed(&k);
	if (rc == CUDA_SUCCESS)
		rc = prepare_launch(&np->launch, &k, params, extra, false);
	if (rc != CUDA_SUCCESS)
		return rc;
	np->params = np->launch.params;
	np->extra = np->launch.extra;
	np->changed = true;
	return CUDA_SUCCESS;
}

static void node_finish(struct node_params *np)
{
	if (np->changed)
		finish_launch(&np->launch);
}

#define KERNEL_NODE_V1(wrapper, hook, ...)					\
	{									\
		CUDA_KERNEL_NODE_PARAMS_v1 copy;				\
		struct node_params np;						\
		CUresult rc;							\
										\
		if (!nodeParams)						\
			return REAL(hook, __VA_ARGS__, nodeParams);		\
		copy = *nodeParams;						\
		rc = node_prepare(&np, copy.func, NULL, copy.kernelParams, copy.extra); \
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		copy.kernelParams = np.params;					\
		copy.extra = np.extra;						\
		rc = REAL(hook, __VA_ARGS__, &copy);				\
		node_finish(&np);						\
		return rc;							\
	}

#define KERNEL_NODE_V2(wrapper, hook, ...)					\
	{									\
		CUDA_KERNEL_NODE_PARAMS_v2 copy;				\
		struct node_params np;						\
		CUresult rc;							\
										\
		if (!nodeParams)						\
			return REAL(hook, __VA_ARGS__, nodeParams);		\
		copy = *nodeParams;						\
		rc = node_prepare(&np, copy.func, copy.kern, copy.kernelParams, copy.extra); \
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		copy.kernelParams = np.params;					\
		copy.extra = np.extra;						\
		rc = REAL(hook, __VA_ARGS__, &copy);				\
		node_finish(&np);						\
		return rc;							\
	}

CUresult CUDAAPI wrap_cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
							 const CUgraphNode *dependencies,
							 size_t numDependencies,
							 const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
KERNEL_NODE_V1(wrap_cuGraphAddKernelNode, cuGraphAddKernelNode, phGraphNode, hGraph, dependencies,
	       numDependencies)

CUresult CUDAAPI wrap_cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
							    const CUgraphNode *dependencies,
							    size_t numDependencies,
							    const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
KERNEL_NODE_V2(wrap_cuGraphAddKernelNode_v2, cuGraphAddKernelNode_v2, phGraphNode, hGraph, dependencies,
	       numDependencies)

CUresult CUDAAPI wrap_cuGraphKernelNodeSetParams(CUgraphNode hNode,
							       const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
KERNEL_NODE_V1(wrap_cuGraphKernelNodeSetParams, cuGraphKernelNodeSetParams, hNode)

CUresult CUDAAPI wrap_cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
								  const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
KERNEL_NODE_V2(wrap_cuGraphKernelNodeSetParams_v2, cuGraphKernelNodeSetParams_v2, hNode)

CUresult CUDAAPI wrap_cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
								   const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
KERNEL_NODE_V1(wrap_cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams, hGraphExec, hNode)

CUresult CUDAAPI wrap_cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec,
								      CUgraphNode hNode,
								      const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
KERNEL_NODE_V2(wrap_cuGraphExecKernelNodeSetParams_v2, cuGraphExecKernelNodeSetParams_v2, hGraphExec,
	       hNode)

/* The generic node API: kernel nodes only are touched. */
#define GRAPH_NODE(hook, ...)							\
	{									\
		CUgraphNodeParams copy;						\
		struct node_params np;						\
		CUresult rc;							\
										\
		if (!nodeParams || nodeParams->type != CU_GRAPH_NODE_TYPE_KERNEL) \
			return REAL(hook, __VA_ARGS__, nodeParams);		\
		copy = *nodeParams;						\
		rc = node_prepare(&np, copy.kernel.func, copy.kernel.kern, copy.kernel.kernelParams, \
				  copy.kernel.extra);				\
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		copy.kernel.kernelParams = np.params;				\
		copy.kernel.extra = np.extra;					\
		rc = REAL(hook, __VA_ARGS__, &copy);				\
		node_finish(&np);						\
		return rc;							\
	}

CUresult CUDAAPI wrap_cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
						   const CUgraphNode *dependencies, size_t numDependencies,
						   CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphAddNode, phGraphNode, hGraph, dependencies, numDependencies)

CUresult CUDAAPI wrap_cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
						      const CUgraphNode *dependencies,
						      const CUgraphEdgeData *dependencyData,
						      size_t numDependencies, CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphAddNode_v2, phGraphNode, hGraph, dependencies, dependencyData, numDependencies)

CUresult CUDAAPI wrap_cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphNodeSetParams, hNode)

CUresult CUDAAPI wrap_cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
							     CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphExecNodeSetParams, hGraphExec, hNode)

LAUNCH_HOOKS(HOOK_EXPORT)
