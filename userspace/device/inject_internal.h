/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libcuprobe_inject.so's insides, shared by its files (inject.c says what the
 * library does): inject.c (the driver's functions, how programs find them,
 * the plan read at start), inject_device.c (reports, the device, the maps
 * registered with the driver), inject_handles.c (handle tables, kernel
 * handles), inject_loads.c (module loads and links), inject_launch.c
 * (launches, graph kernel nodes), inject_drain.c (counters' shadows moved
 * into the maps at the calls that prove kernels done), inject_ring.c (device
 * rings' segments moved into the ring maps, by the same drain). Built with
 * hidden visibility: nothing here is exported.
 */
#ifndef CUPROBE_INJECT_INTERNAL_H
#define CUPROBE_INJECT_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL /* both the plain and the _v2/_ptsz declarations */
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fatbin.h"
#include "inject_protocol.h"
#include "loaded_fatbins.h"
#include "ptx_jit.h"
#include "ptx_rewrite.h"

#define PAGE_ROUND(n) (((n) + 4095ul) & ~4095ul)
/* Launches with more parameters than this build their arrays on the heap. */
#define STACK_PARAMS 64

/* ---- the driver's functions --------------------------------------------------------- */

/*
 * Every function this library wraps: its exported name, the CUDA version
 * from which cuGetProcAddress hands out this variant (a fallback only: the
 * pointer the driver returns normally identifies the variant), and whether
 * it is a per-thread-stream twin.
 */
#define LOAD_HOOKS(X)		/* inject_loads.c */			\
	X(cuModuleLoad, 2000, 0) X(cuModuleLoadData, 2000, 0)			\
	X(cuModuleLoadDataEx, 2010, 0) X(cuModuleLoadFatBinary, 2000, 0)	\
	X(cuModuleUnload, 2000, 0)						\
	X(cuLibraryLoadData, 12000, 0) X(cuLibraryLoadFromFile, 12000, 0)	\
	X(cuLibraryUnload, 12000, 0)						\
	X(cuLinkCreate, 5050, 0) X(cuLinkCreate_v2, 6050, 0)			\
	X(cuLinkAddData, 5050, 0) X(cuLinkAddData_v2, 6050, 0)			\
	X(cuLinkAddFile, 5050, 0) X(cuLinkAddFile_v2, 6050, 0)			\
	X(cuLinkComplete, 5050, 0) X(cuLinkDestroy, 5050, 0)
#define HANDLE_HOOKS(X)		/* inject_handles.c */			\
	X(cuModuleGetFunction, 2000, 0) X(cuModuleEnumerateFunctions, 12040, 0)	\
	X(cuLibraryGetKernel, 12000, 0) X(cuLibraryGetModule, 12000, 0)		\
	X(cuLibraryEnumerateKernels, 12040, 0) X(cuKernelGetFunction, 12000, 0)
#define LAUNCH_HOOKS(X)		/* inject_launch.c */			\
	X(cuLaunchKernel, 4000, 0) X(cuLaunchKernel_ptsz, 7000, 1)		\
	X(cuLaunchKernelEx, 11060, 0) X(cuLaunchKernelEx_ptsz, 11060, 1)	\
	X(cuLaunchCooperativeKernel, 9000, 0)					\
	X(cuLaunchCooperativeKernel_ptsz, 9000, 1)				\
	X(cuLaunchCooperativeKernelMultiDevice, 9000, 0)			\
	X(cuParamSetSize, 2000, 0)						\
	X(cuGraphAddKernelNode, 10000, 0) X(cuGraphAddKernelNode_v2, 12000, 0)	\
	X(cuGraphKernelNodeSetParams, 10000, 0)					\
	X(cuGraphKernelNodeSetParams_v2, 12000, 0)				\
	X(cuGraphExecKernelNodeSetParams, 10010, 0)				\
	X(cuGraphExecKernelNodeSetParams_v2, 12000, 0)				\
	X(cuGraphAddNode, 12020, 0) X(cuGraphAddNode_v2, 12030, 0)		\
	X(cuGraphNodeSetParams, 12020, 0) X(cuGraphExecNodeSetParams, 12020, 0)
#define DRAIN_HOOKS(X)		/* inject_drain.c: calls that prove kernels done, contexts going */ \
	X(cuCtxSynchronize, 2000, 0) X(cuCtxSynchronize_v2, 13000, 0)		\
	X(cuStreamSynchronize, 2000, 0) X(cuStreamSynchronize_ptsz, 7000, 1)	\
	X(cuStreamQuery, 2000, 0) X(cuStreamQuery_ptsz, 7000, 1)		\
	X(cuEventSynchronize, 2000, 0) X(cuEventQuery, 2000, 0)			\
	X(cuMemcpyHtoD_v2, 3020, 0) X(cuMemcpyHtoD_v2_ptds, 7000, 1)		\
	X(cuMemcpyDtoH_v2, 3020, 0) X(cuMemcpyDtoH_v2_ptds, 7000, 1)		\
	X(cuCtxDestroy_v2, 4000, 0) X(cuDevicePrimaryCtxRelease_v2, 11000, 0)	\
	X(cuDevicePrimaryCtxReset_v2, 11000, 0)					\
	X(cuGraphLaunch, 10000, 0) X(cuGraphLaunch_ptsz, 10000, 1)
#define RESOLVE_HOOKS(X)	/* inject.c */				\
	X(cuGetProcAddress, 11030, 0) X(cuGetProcAddress_v2, 12000, 0)
#define HOOKS(X) LOAD_HOOKS(X) HANDLE_HOOKS(X) LAUNCH_HOOKS(X) DRAIN_HOOKS(X) RESOLVE_HOOKS(X)

/*
 * The exported names are the wrappers (one definition each, under the
 * driver's names): each file exports its own list, after its wrappers.
 */
#define HOOK_EXPORT(fn, since, ptsz) \
	extern __typeof__(fn) fn __attribute__((alias("wrap_" #fn), visibility("default")));

/* Called, not wrapped. */
#define HELPERS(X)								\
	X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuDeviceGet) X(cuDeviceGetCount)	\
	X(cuDeviceGetAttribute) X(cuMemHostRegister_v2)				\
	X(cuMemHostGetDevicePointer_v2) X(cuStreamIsCapturing)			\
	X(cuStreamIsCapturing_ptsz) X(cuParamSetv) X(cuFuncGetName)		\
	X(cuKernelGetName) X(cuGetErrorName) X(cuModuleGetGlobal_v2)		\
	X(cuMemAllocHost_v2) X(cuMemFreeHost) X(cuStreamCreate)			\
	X(cuStreamDestroy_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpy2DAsync_v2)	\
	X(cuThreadExchangeStreamCaptureMode) X(cuCtxPushCurrent_v2)		\
	X(cuCtxPopCurrent_v2) X(cuDevicePrimaryCtxGetState)			\
	X(cuDevicePrimaryCtxRetain)

enum hook_id {
#define HOOK_ENUM(name, since, ptsz) HOOK_##name,
	HOOKS(HOOK_ENUM)
#undef HOOK_ENUM
	HOOK_MAX,
};

enum helper_id {
#define HELPER_ENUM(name) HELPER_##name,
	HELPERS(HELPER_ENUM)
#undef HELPER_ENUM
	HELPER_MAX,
};

struct hook {
	const char *name;
	void *wrapper;
	int since;
	bool ptsz;
	_Atomic(void *) real;
};

#define HOOK_DECLARE(name, since, ptsz) __typeof__(name) wrap_##name;
HOOKS(HOOK_DECLARE)
#undef HOOK_DECLARE

/* Every hook, by id (inject.c). */
extern struct hook hooks[HOOK_MAX];

/* Calls the driver's NAME with ARGS; CUDA_ERROR_NOT_FOUND when the driver lacks it. */
#define REAL(name, ...)								\
	({									\
		__typeof__(name) *fn_ = (__typeof__(name) *)inject_real(HOOK_##name);	\
		fn_ ? fn_(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND;			\
	})
#define HELPER(name, ...)							\
	({									\
		__typeof__(name) *fn_ = (__typeof__(name) *)inject_helper(HELPER_##name); \
		fn_ ? fn_(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND;			\
	})

/* ---- state ------------------------------------------------------------------------ */

/* One instrumented kernel of a loaded module. */
struct kernel_info {
	char *name;
	uint64_t probes;
	unsigned int param_count;
	size_t param_bytes;
	bool uses_shadow;  /* a program it runs adds into a shadow or writes a ring: its launches are drained */
};

/* A module or library with instrumented kernels (or a cubin a rewritten link made). */
struct module_info {
	struct kernel_info *kernels;
	size_t kernel_count;
	const char *api;
	bool library;      /* a CUlibrary: its module differs by context */
	/*
	 * The rewritten images the driver got, kept until the module is
	 * unloaded (or the link destroyed): a library loaded with
	 * CU_LIBRARY_BINARY_IS_PRESERVED keeps using its image.
	 */
	char **images;
	size_t image_count;
	/* Where a cubin's PTX came from (its fatbin), said with each instrumented kernel; or "". */
	char origin[320];
};

/* A handle (module, library, function, kernel, link state, cubin) and what it stands for. */
struct handle_entry {
	const void *handle;
	void *value;       /* struct module_info * or struct kernel_info * */
	const void *owner; /* the module or library it came from (functions, aliases) */
};

struct handle_table {
	struct handle_entry *entries;
	size_t count, capacity;
};

struct region {
	void *base;
	size_t size;
	bool read_only;
};

struct inject_state {
	bool active;
	struct cp_inject_plan plan;
	/* The report socket as it was at the start: the fd number may be reused if the program closes it. */
	dev_t report_dev;
	ino_t report_ino;
	struct cp_ptx_probe *probes;
	char *prelude;              /* map declarations and the programs' functions */
	bool shadowed;              /* some map has a shadow or a ring's segments (inject_drain.c drains them) */
	struct region *maps;
	struct region slots;        /* the launch-slot map: u64 values, slot 0 the allocation counter */
	pthread_mutex_t register_lock;
	atomic_bool registered;     /* set once registration succeeded or failed for good */
	CUresult register_result;
	atomic_bool register_reported;
	/* Handles, under lock: launches only read. */
	pthread_rwlock_t lock;
	struct handle_table modules;   /* CUmodule/CUlibrary -> module_info (owner: itself or its library) */
	struct handle_table functions; /* CUfunction/CUkernel -> kernel_info (owner: the module) */
	struct handle_table links;     /* CUlinkState and linked cubins -> module_info */
	/* The loaded objects' fatbins, where the PTX of the cubins cudart loads is. */
	struct cp_loaded_fatbins fatbins;
};

/* The library's one state (inject.c). */
extern struct inject_state inject;

/*
 * inject.c: the plan's maps as the translator saw them (name, array, value
 * size, entries), by the index it named them by; *region_of maps that index
 * to the plan's (and inject.maps') index. NULL when out of memory.
 */
struct cp_ptx_map *inject_map_shapes(size_t *count, size_t **region_of);
/* inject.c: the driver's function behind a hook, a helper the library calls (NULL: none). */
void *inject_real(enum hook_id id);
void *inject_helper(enum helper_id id);

/* inject_device.c: reports to cuprobe, the device, the maps registered with the driver. */
void report(enum cp_inject_report_kind kind, const char *api, const char *name,
		   uint64_t probes, unsigned int arch, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
const char *result_name(CUresult rc);
unsigned int device_arch(void);
/* Registers the maps and the launch slots once a context is current: CUDA_SUCCESS or why not. */
CUresult ensure_registered(void);

/* inject_handles.c: handle tables and what modules keep; a removed entry's handle. */
#define TOMBSTONE ((const void *)1)
struct handle_entry *table_find(const struct handle_table *t, const void *handle);
int table_put(struct handle_table *t, const void *handle, void *value, const void *owner);
void table_remove_owned(struct handle_table *t, const void *owner);
void module_info_free(struct module_info *m);
void keep_image(struct module_info *m, char **image);

/*
 * inject_drain.c: the counters' shadows moved into the maps. A launch of a
 * kernel with uses_shadow is noted (handle: the CUfunction or CUkernel;
 * owner: the module or library it came from), before it is made; a proof
 * drains the context's shadows while some launch in it is not proved done,
 * and moves its device rings when none may still be running.
 */
enum drain_proof {
	DRAIN_PROOF_CONTEXT, /* every launch of the context done */
	DRAIN_PROOF_STREAM,  /* every launch of the stream done */
	DRAIN_PROOF_OTHER,   /* some launches done (an event's) */
};
enum drain_launch {
	DRAIN_LAUNCH,        /* launched now, on stream */
	DRAIN_IN_GRAPH,      /* a graph's node (launched with the graph, cuGraphLaunch) */
	DRAIN_LEGACY,        /* set up for cuLaunch or cuLaunchGrid, whose launches are not seen */
};
void drain_note_launch(const void *handle, const void *owner, CUstream stream, bool per_thread,
		       enum drain_launch how);
/*
 * noted_before: launches noted before the proving call (one noted since was
 * not proved); blocking: the call may wait (not a query).
 */
void drain_after_proof(enum drain_proof proof, CUcontext context, CUstream stream, bool per_thread,
		       uint64_t noted_before, bool blocking);
/* Before a module or library is unloaded: its shadows drained, forgotten. */
void drain_before_unload(const void *owner);
void drain_before_context_goes(CUcontext context);
/* A forked child has none of its parent's contexts: nothing to drain, a lock of its own. */
void drain_after_fork_in_child(void);

/*
 * inject_ring.c: a module's device-ring segments (in the current context),
 * moved into the kernel's ring maps by the drain. find: CUDA_SUCCESS with
 * *rings NULL when the module writes none. ask: the segments' counters
 * copied on stream (ours); move, once the stream is synchronized: the
 * committed records moved. Said once when it fails.
 */
struct drain_rings;
CUresult drain_rings_find(CUmodule module, struct drain_rings **rings);
CUresult drain_rings_ask(struct drain_rings *rings, CUstream stream);
CUresult drain_rings_move(struct drain_rings *rings, CUstream stream);
void drain_rings_free(struct drain_rings *rings, bool context_alive);

#endif /* CUPROBE_INJECT_INTERNAL_H */
