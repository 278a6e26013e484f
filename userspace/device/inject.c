// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libcuprobe_inject.so: the one piece of cuprobe that runs inside a traced
 * process. `cuprobe run PROG -- COMMAND` preloads it into COMMAND when PROG
 * has device programs (SEC("gpu/GLOB"), SEC("gpu.exit/GLOB")); nothing else
 * in cuprobe puts code into a process.
 *
 * What it does, all on the threads COMMAND calls the driver from (it starts
 * no thread of its own):
 *  - at load: reads the plan cuprobe passed (inject_protocol.h), maps each
 *    BPF map the programs use (MAP_SHARED on the inherited map fd: the
 *    memory belongs to the kernel map, so this process exiting cannot pull
 *    it from under cuprobe) and the launch-slot map;
 *  - module loads (cuModuleLoad*, cuLibraryLoad*, cuLink*): finds the PTX
 *    the device can JIT in the image (fatbin.h), rewrites the kernels the
 *    programs' globs match (ptx_rewrite.h) and loads the result through the
 *    driver's own entry point; an image with no matching kernel is passed
 *    on as it came, byte for byte; matching kernels without usable PTX are
 *    reported by name;
 *  - kernel handles (cuModuleGetFunction, cuLibraryGetKernel, ...): those of
 *    instrumented kernels are remembered;
 *  - launches of those (every launch entry point, _ptsz twins, graph kernel
 *    nodes): one more parameter, the device address of a launch slot; the
 *    slot's header (cp_launch_slot_header) sits just before the new
 *    kernelParams array, where cuprobe's BPF launch program reads it;
 *  - the maps and the slots are registered with the driver
 *    (cuMemHostRegister, DEVICEMAP | PORTABLE) once a context is current.
 *
 * The driver is reached both ways programs reach it: by symbol (our
 * exports interpose libcuda's) and through cuGetProcAddress, which cudart
 * resolves from dlsym on libcuda's handle (so dlsym is wrapped too).
 * Reports go to cuprobe over the inherited report socket; nothing is
 * printed.
 */
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
#define HOOKS(X)								\
	X(cuModuleLoad, 2000, 0) X(cuModuleLoadData, 2000, 0)			\
	X(cuModuleLoadDataEx, 2010, 0) X(cuModuleLoadFatBinary, 2000, 0)	\
	X(cuModuleUnload, 2000, 0) X(cuModuleGetFunction, 2000, 0)		\
	X(cuModuleEnumerateFunctions, 12040, 0)					\
	X(cuLibraryLoadData, 12000, 0) X(cuLibraryLoadFromFile, 12000, 0)	\
	X(cuLibraryUnload, 12000, 0) X(cuLibraryGetKernel, 12000, 0)		\
	X(cuLibraryGetModule, 12000, 0) X(cuLibraryEnumerateKernels, 12040, 0)	\
	X(cuKernelGetFunction, 12000, 0)					\
	X(cuLinkCreate, 5050, 0) X(cuLinkCreate_v2, 6050, 0)			\
	X(cuLinkAddData, 5050, 0) X(cuLinkAddData_v2, 6050, 0)			\
	X(cuLinkAddFile, 5050, 0) X(cuLinkAddFile_v2, 6050, 0)			\
	X(cuLinkComplete, 5050, 0) X(cuLinkDestroy, 5050, 0)			\
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
	X(cuGraphNodeSetParams, 12020, 0) X(cuGraphExecNodeSetParams, 12020, 0)	\
	X(cuGetProcAddress, 11030, 0) X(cuGetProcAddress_v2, 12000, 0)

/* Called, not wrapped. */
#define HELPERS(X)								\
	X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuDeviceGet) X(cuDeviceGetCount)	\
	X(cuDeviceGetAttribute) X(cuMemHostRegister_v2)				\
	X(cuMemHostGetDevicePointer_v2) X(cuStreamIsCapturing)			\
	X(cuStreamIsCapturing_ptsz) X(cuParamSetv) X(cuFuncGetName)		\
	X(cuKernelGetName) X(cuGetErrorName)

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

#define HOOK_DECLARE(name, since, ptsz) static __typeof__(name) wrap_##name;
HOOKS(HOOK_DECLARE)
#undef HOOK_DECLARE

static struct hook hooks[HOOK_MAX] = {
#define HOOK_ENTRY(fn, since_version, is_ptsz)					\
	[HOOK_##fn] = { .name = #fn, .wrapper = (void *)wrap_##fn, .since = since_version, .ptsz = is_ptsz },
	HOOKS(HOOK_ENTRY)
#undef HOOK_ENTRY
};

static const char *const helper_names[HELPER_MAX] = {
#define HELPER_NAME(name) #name,
	HELPERS(HELPER_NAME)
#undef HELPER_NAME
};
static _Atomic(void *) helpers[HELPER_MAX];

/* dlsym itself, from libc: ours is what the program sees. */
static void *(*libc_dlsym)(void *, const char *);

static void *libcuda(void)
{
	return dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
}

static void resolve_libc_dlsym(void)
{
	if (!libc_dlsym)
		libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (!libc_dlsym)
		libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
}

/* The driver's own function: from libcuda.so.1 as loaded, looked up once. */
static void *driver_symbol(const char *name)
{
	void *handle, *fn;

	resolve_libc_dlsym();
	handle = libcuda();
	if (!handle || !libc_dlsym)
		return NULL;
	fn = libc_dlsym(handle, name);
	dlclose(handle);
	return fn;
}

static void *real(enum hook_id id)
{
	void *fn = atomic_load(&hooks[id].real), *none = NULL;

	if (fn)
		return fn;
	fn = driver_symbol(hooks[id].name);
	if (fn && fn != hooks[id].wrapper)
		atomic_compare_exchange_strong(&hooks[id].real, &none, fn);
	return atomic_load(&hooks[id].real);
}

static void *helper(enum helper_id id)
{
	void *fn = atomic_load(&helpers[id]);

	if (!fn) {
		fn = driver_symbol(helper_names[id]);
		atomic_store(&helpers[id], fn);
	}
	return fn;
}

/* Calls the driver's NAME with ARGS; CUDA_ERROR_NOT_FOUND when the driver lacks it. */
#define REAL(name, ...)								\
	({									\
		__typeof__(name) *fn_ = (__typeof__(name) *)real(HOOK_##name);	\
		fn_ ? fn_(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND;			\
	})
#define HELPER(name, ...)							\
	({									\
		__typeof__(name) *fn_ = (__typeof__(name) *)helper(HELPER_##name); \
		fn_ ? fn_(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND;			\
	})

/* ---- state ------------------------------------------------------------------------ */

/* One instrumented kernel of a loaded module. */
struct kernel_info {
	char *name;
	uint64_t probes;
	unsigned int param_count;
	size_t param_bytes;
};

/* A module or library with instrumented kernels (or a cubin a rewritten link made). */
struct module_info {
	struct kernel_info *kernels;
	size_t kernel_count;
	const char *api;
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

static struct {
	bool active;
	struct cp_inject_plan plan;
	/* The report socket as it was at the start: the fd number may be reused if the program closes it. */
	dev_t report_dev;
	ino_t report_ino;
	struct cp_ptx_probe *probes;
	char *prelude;              /* map declarations and the programs' functions */
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
} inject = {
	.fatbins = CP_LOADED_FATBINS_INIT,
	.register_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_RWLOCK_INITIALIZER,
};

/* What a launch of an instrumented kernel passes when it has no slot: seq unknown (0). */
static const uint64_t no_slot;

/* ---- reports ---------------------------------------------------------------------- */

static void report(enum cp_inject_report_kind kind, const char *api, const char *name,
		   uint64_t probes, unsigned int arch, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static void report(enum cp_inject_report_kind kind, const char *api, const char *name,
		   uint64_t probes, unsigned int arch, const char *fmt, ...)
{
	char detail[1024] = "", buf[CP_INJECT_REPORT_MAX];
	struct cp_inject_report r = { .kind = kind, .pid = (uint32_t)getpid(), .arch = arch,
				      .probes = probes, .api = api ? api : "", .name = name ? name : "",
				      .detail = detail };
	struct stat st;
	size_t len;
	va_list ap;

	if (inject.plan.report_fd < 0 || fstat(inject.plan.report_fd, &st) ||
	    st.st_dev != inject.report_dev || st.st_ino != inject.report_ino)
		return;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	len = cp_inject_report__encode(&r, buf, sizeof(buf));
	/* Blocking: reports are few (per module), and cuprobe reads them as they come. */
	while (len && send(inject.plan.report_fd, buf, len, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static const char *result_name(CUresult rc)
{
	const char *name = NULL;

	if (HELPER(cuGetErrorName, rc, &name) != CUDA_SUCCESS || !name)
		return "an unknown CUresult";
	return name;
}

/* ---- handle tables ------------------------------------------------------------------ */

static size_t slot_of(const struct handle_table *t, const void *handle)
{
	uintptr_t h = (uintptr_t)handle;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	return h & (t->capacity - 1);
}

/* The entry of handle, or NULL. Open addressing: NULL handles end a probe, tombstones do not. */
#define TOMBSTONE ((const void *)1)

static struct handle_entry *table_find(const struct handle_table *t, const void *handle)
{
	size_t i, n;

	if (!t->capacity || !handle)
		return NULL;
	for (i = slot_of(t, handle), n = 0; n < t->capacity; i = (i + 1) & (t->capacity - 1), n++) {
		if (!t->entries[i].handle)
			return NULL;
		if (t->entries[i].handle == handle)
			return &t->entries[i];
	}
	return NULL;
}

static int table_put(struct handle_table *t, const void *handle, void *value, const void *owner);

static int table_grow(struct handle_table *t)
{
	struct handle_table bigger = { .capacity = t->capacity ? t->capacity * 2 : 64 };
	size_t i;

	bigger.entries = calloc(bigger.capacity, sizeof(*bigger.entries));
	if (!bigger.entries)
		return -ENOMEM;
	for (i = 0; i < t->capacity; i++)
		if (t->entries[i].handle && t->entries[i].handle != TOMBSTONE)
			table_put(&bigger, t->entries[i].handle, t->entries[i].value, t->entries[i].owner);
	free(t->entries);
	*t = bigger;
	return 0;
}

static int table_put(struct handle_table *t, const void *handle, void *value, const void *owner)
{
	struct handle_entry *e = table_find(t, handle);
	size_t i;

	if (e) {
		e->value = value;
		e->owner = owner;
		return 0;
	}
	if ((t->count + 1) * 2 > t->capacity && table_grow(t))
		return -ENOMEM;
	for (i = slot_of(t, handle);; i = (i + 1) & (t->capacity - 1))
		if (!t->entries[i].handle || t->entries[i].handle == TOMBSTONE)
			break;
	t->entries[i] = (struct handle_entry){ .handle = handle, .value = value, .owner = owner };
	t->count++;
	return 0;
}

/* Every entry whose owner is owner goes (a module's functions when it is unloaded). */
static void table_remove_owned(struct handle_table *t, const void *owner)
{
	size_t i;

	for (i = 0; i < t->capacity; i++)
		if (t->entries[i].handle && t->entries[i].handle != TOMBSTONE &&
		    t->entries[i].owner == owner) {
			t->entries[i].handle = TOMBSTONE;
			t->entries[i].value = NULL;
		}
}

static void module_info_free(struct module_info *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->kernel_count; i++)
		free(m->kernels[i].name);
	for (i = 0; i < m->image_count; i++)
		free(m->images[i]);
	free(m->kernels);
	free(m->images);
	free(m);
}

/* *image is m's now (NULL after): it stays as long as m. */
static void keep_image(struct module_info *m, char **image)
{
	char **grown;

	if (!*image)
		return;
	grown = realloc(m->images, (m->image_count + 1) * sizeof(*grown));
	if (!grown)
		return; /* the caller frees it: a preserved binary would be the driver's problem then */
	m->images = grown;
	m->images[m->image_count++] = *image;
	*image = NULL;
}

static struct kernel_info *module_kernel(const struct module_info *m, const char *name)
{
	size_t i;

	for (i = 0; m && name && i < m->kernel_count; i++)
		if (!strcmp(m->kernels[i].name, name))
			return &m->kernels[i];
	return NULL;
}

/* ---- the device ----------------------------------------------------------------------- */

static unsigned int arch_of(CUdevice dev)
{
	int major = 0, minor = 0;

	if (HELPER(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
	    HELPER(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
		return 0;
	return (unsigned int)(major * 10 + minor);
}

/*
 * The architecture the module's PTX must suit: the current context's
 * device, else (a library loads for every device) the oldest device's.
 */
static unsigned int device_arch(void)
{
	unsigned int arch, oldest = 0;
	CUcontext ctx = NULL;
	CUdevice dev;
	int count = 0, i;

	if (!HELPER(cuCtxGetCurrent, &ctx) && ctx && !HELPER(cuCtxGetDevice, &dev))
		return arch_of(dev);
	if (HELPER(cuDeviceGetCount, &count))
		return 0;
	for (i = 0; i < count; i++)
		if (!HELPER(cuDeviceGet, &dev, i) && (arch = arch_of(dev)) && (!oldest || arch < oldest))
			oldest = arch;
	return oldest;
}

/* The maps and the slots, registered with the driver once a context is current. */
static CUresult register_region(const struct region *r)
{
	CUdeviceptr device_address = 0;
	CUresult rc;

	rc = HELPER(cuMemHostRegister_v2, r->base, r->size,
		    CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE |
		    (r->read_only ? CU_MEMHOSTREGISTER_READ_ONLY : 0));
	if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		return rc;
	rc = HELPER(cuMemHostGetDevicePointer_v2, &device_address, r->base, 0);
	if (rc != CUDA_SUCCESS)
		return rc;
	/* The module's declarations hold the host address: the device must use it as is. */
	return device_address == (CUdeviceptr)(uintptr_t)r->base ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult ensure_registered(void)
{
	CUcontext ctx = NULL;
	CUdevice dev;
	CUresult rc = CUDA_SUCCESS;
	int host_pointer = 0;
	size_t i;

	if (atomic_load(&inject.registered))
		return inject.register_result;
	if (HELPER(cuCtxGetCurrent, &ctx) || !ctx)
		return CUDA_ERROR_INVALID_CONTEXT; /* later, at the launch */
	pthread_mutex_lock(&inject.register_lock);
	if (atomic_load(&inject.registered)) {
		pthread_mutex_unlock(&inject.register_lock);
		return inject.register_result;
	}
	if (HELPER(cuCtxGetDevice, &dev) ||
	    HELPER(cuDeviceGetAttribute, &host_pointer,
		   CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, dev) || !host_pointer) {
		rc = CUDA_ERROR_NOT_SUPPORTED;
		report(CP_INJECT_ERROR, NULL, NULL, 0, 0,
		       "the device cannot use registered host memory at its host address: device programs cannot reach their maps");
	}
	for (i = 0; rc == CUDA_SUCCESS && i < inject.plan.map_count; i++) {
		rc = register_region(&inject.maps[i]);
		if (rc != CUDA_SUCCESS)
			report(CP_INJECT_ERROR, NULL, NULL, 0, 0,
			       "cannot register map %s with the driver (cuMemHostRegister): %s",
			       inject.plan.maps[i].name, result_name(rc));
	}
	if (rc == CUDA_SUCCESS && inject.slots.base) {
		rc = register_region(&inject.slots);
		if (rc != CUDA_SUCCESS)
			report(CP_INJECT_ERROR, NULL, NULL, 0, 0,
			       "cannot register the launch slots with the driver (cuMemHostRegister): %s",
			       result_name(rc));
	}
	inject.register_result = rc;
	atomic_store(&inject.registered, true);
	pthread_mutex_unlock(&inject.register_lock);
	return rc;
}

/* ---- module loads --------------------------------------------------------------------- */

static void report_names(enum cp_inject_report_kind kind, const char *api, char **names, size_t count,
			 unsigned int arch, const char *detail)
{
	size_t i, j;

	for (i = 0; i < count; i++) {
		uint64_t probes = 0;

		for (j = 0; j < inject.plan.program_count; j++)
			if (cp_ptx__glob_matches(inject.plan.programs[j].glob, names[i]))
				probes |= 1ull << j;
		if (probes)
			report(kind, api, names[i], probes, arch, "%s", detail);
	}
}

/* Does any program's glob match one of the kernels? */
static bool any_matches(char *const *names, size_t count)
{
	size_t i, j;

	for (i = 0; i < count; i++)
		for (j = 0; j < inject.plan.program_count; j++)
			if (cp_ptx__glob_matches(inject.plan.programs[j].glob, names[i]))
				return true;
	return false;
}

/*
 * A cubin has no PTX, but the fatbin it was picked from may (cudart loads
 * the cubin for the device, never the fatbin): that fatbin's PTX for the
 * device, when some program's glob matches one of the cubin's kernels.
 * -ENODATA: none matches (nothing to say); -ENOENT: no fatbin with PTX.
 */
static int ptx_of_cubin(const struct cp_image *cubin, unsigned int arch, char **ptx, size_t *len,
			char *origin, size_t origin_size)
{
	struct cp_cubin_fatbin from;
	struct cp_image fatbin;
	char **names = NULL;
	size_t count = 0;
	int err;

	err = cp_image__elf_kernels(cubin, arch, &names, &count);
	if (err)
		return err;
	if (!any_matches(names, count)) {
		cp_image__free_names(names, count);
		return -ENODATA;
	}
	err = cp_loaded_fatbins__find(&inject.fatbins, cubin, names, count, arch, &from);
	cp_image__free_names(names, count);
	if (err)
		return err;
	err = cp_image__parse(from.fatbin, from.size, &fatbin, NULL, 0);
	if (err)
		return -ENOENT;
	err = cp_image__ptx_for(&fatbin, arch, ptx, len, NULL);
	cp_image__release(&fatbin);
	if (!err)
		snprintf(origin, origin_size, "PTX from the fatbin its cubin came from (%s, %s)",
			 *from.object ? from.object : "the program", cp_cubin_origin__name(from.origin));
	return err;
}

/*
 * What to load in place of image (bound: how many bytes may be read; SIZE_MAX
 * for a pointer a driver call was handed): the rewritten PTX (the caller frees
 * it) and what it instruments in *info; NULL to load image unchanged.
 */
static char *instrument(const char *api, const void *image, size_t bound, struct module_info **info)
{
	struct cp_ptx_rewrite_opts opts = { .probes = inject.probes,
					    .probe_count = inject.plan.program_count,
					    .prelude = inject.prelude };
	struct cp_ptx_rewrite rewrite;
	struct cp_image parsed;
	char error[512], origin[320] = "", *ptx = NULL, **names = NULL, *text = NULL;
	unsigned int arch, ptx_arch = 0;
	size_t len, count = 0, i, n = 0;
	int err;

	*info = NULL;
	if (!inject.active || !image)
		return NULL;
	err = cp_image__parse(image, bound, &parsed, error, sizeof(error));
	if (err) {
		/* Not an image we know: the driver decides what it is. */
		if (err != -ENOEXEC)
			report(CP_INJECT_ERROR, api, NULL, 0, 0, "cannot read the module image: %s", error);
		return NULL;
	}
	arch = device_arch();
	err = cp_image__ptx_for(&parsed, arch, &ptx, &len, &ptx_arch);
	if (err == -ENOENT && parsed.kind == CP_IMAGE_ELF) {
		err = ptx_of_cubin(&parsed, arch, &ptx, &len, origin, sizeof(origin));
		if (err == -ENODATA) {
			cp_image__release(&parsed);
			return NULL;
		}
	}
	if (err) {
		if (err == -ENOENT && !cp_image__elf_kernels(&parsed, arch, &names, &count)) {
			char detail[64];

			snprintf(detail, sizeof(detail), "no PTX for sm_%u", arch);
			report_names(CP_INJECT_NO_PTX, api, names, count, arch, detail);
		} else if (err != -ENOENT) {
			report(CP_INJECT_ERROR, api, NULL, 0, arch, "cannot extract the module's PTX: %s",
			       strerror(-err));
		}
		cp_image__free_names(names, count);
		cp_image__release(&parsed);
		return NULL;
	}
	cp_image__release(&parsed);
	err = cp_ptx__rewrite(ptx, len, &opts, &rewrite, error, sizeof(error));
	free(ptx);
	if (err) {
		for (i = 0; i < rewrite.kernel_count; i++)
			if (rewrite.kernels[i].probes)
				report(CP_INJECT_REFUSED, api, rewrite.kernels[i].name,
				       rewrite.kernels[i].probes, arch, "%s", error);
		if (!rewrite.kernel_count || err == -ENOMEM)
			report(CP_INJECT_ERROR, api, NULL, 0, arch, "cannot rewrite the module: %s", error);
		cp_ptx_rewrite__release(&rewrite);
		return NULL;
	}
	if (!rewrite.text) {
		cp_ptx_rewrite__release(&rewrite);
		return NULL;
	}
	*info = calloc(1, sizeof(**info));
	if (*info)
		(*info)->kernels = calloc(rewrite.kernel_count, sizeof(*(*info)->kernels));
	if (!*info || !(*info)->kernels) {
		report(CP_INJECT_ERROR, api, NULL, 0, arch, "out of memory: the module is loaded as it was");
		goto fail;
	}
	(*info)->api = api;
	snprintf((*info)->origin, sizeof((*info)->origin), "%s", origin);
	for (i = 0; i < rewrite.kernel_count; i++) {
		struct cp_ptx_kernel *k = &rewrite.kernels[i];

		if (!k->probes || !k->defined)
			continue;
		(*info)->kernels[n] = (struct kernel_info){ .name = k->name, .probes = k->probes,
							    .param_count = k->param_count,
							    .param_bytes = k->param_bytes };
		k->name = NULL; /* now the module_info's */
		n++;
	}
	(*info)->kernel_count = n;
	text = rewrite.text;
	rewrite.text = NULL;
	cp_ptx_rewrite__release(&rewrite);
	return text;
fail:
	module_info_free(*info);
	*info = NULL;
	cp_ptx_rewrite__release(&rewrite);
	return NULL;
}

/* The module is loaded: its instrumented kernels are told to cuprobe, its handle remembered. */
static void loaded(const void *handle, struct module_info *info, char **image)
{
	size_t i;

	keep_image(info, image);
	pthread_rwlock_wrlock(&inject.lock);
	if (table_put(&inject.modules, handle, info, handle)) {
		pthread_rwlock_unlock(&inject.lock);
		report(CP_INJECT_ERROR, info->api, NULL, 0, 0,
		       "out of memory: the instrumented module's kernels will launch without their parameter");
		return;
	}
	pthread_rwlock_unlock(&inject.lock);
	for (i = 0; i < info->kernel_count; i++)
		report(CP_INJECT_INSTRUMENTED, info->api, info->kernels[i].name, info->kernels[i].probes,
		       device_arch(), "%s", info->origin);
	/* A context now? Then the maps are registered before anything launches. */
	ensure_registered();
}

/*
 * The driver refused the rewritten module: said, and the original is
 * loaded instead (the program runs as it would have, without probes).
 */
static void rewrite_refused(const char *api, struct module_info *info, CUresult rc)
{
	size_t i;

	for (i = 0; i < info->kernel_count; i++)
		report(CP_INJECT_REFUSED, api, info->kernels[i].name, info->kernels[i].probes, device_arch(),
		       "the driver refused the instrumented module (%s); loaded as it was", result_name(rc));
	module_info_free(info);
}

/* Whole files: read, so that their image can be looked at (cuModuleLoad, cuLibraryLoadFromFile...). */
static void *read_file(const char *path, size_t *size)
{
	struct stat st;
	void *data = NULL;
	ssize_t n;
	size_t got = 0;
	int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;

	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && st.st_size > 0 && (uint64_t)st.st_size < CP_INJECT_PLAN_MAX * 16ull &&
	    (data = malloc((size_t)st.st_size + 1))) {
		while (got < (size_t)st.st_size && (n = read(fd, (char *)data + got, (size_t)st.st_size - got)) > 0)
			got += (size_t)n;
		((char *)data)[got] = '\0';
		*size = got;
	}
	close(fd);
	return data;
}

/* The linked cubin of a rewritten link: modules loaded from it get its kernels. */
static struct module_info *linked_cubin(const void *image)
{
	struct handle_entry *e;
	struct module_info *copy = NULL, *m;
	size_t i;

	pthread_rwlock_rdlock(&inject.lock);
	e = table_find(&inject.links, image);
	m = e ? e->value : NULL;
	if (m && (copy = calloc(1, sizeof(*copy))) &&
	    (copy->kernels = calloc(m->kernel_count ? m->kernel_count : 1, sizeof(*copy->kernels)))) {
		copy->api = m->api;
		for (i = 0; i < m->kernel_count; i++) {
			struct kernel_info *k = &copy->kernels[copy->kernel_count];

			*k = m->kernels[i];
			k->name = strdup(m->kernels[i].name);
			copy->kernel_count += k->name != NULL;
		}
	} else if (copy) {
		free(copy);
		copy = NULL;
	}
	pthread_rwlock_unlock(&inject.lock);
	return copy;
}

static void unloaded(const void *handle)
{
	struct handle_entry *e;
	struct module_info *owned = NULL;
	size_t i;

	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.modules, handle);
	if (e && e->owner == handle)
		owned = e->value;
	if (e) {
		table_remove_owned(&inject.functions, handle);
		/* Modules a library lent (cuLibraryGetModule) go with it, and their functions. */
		for (i = 0; i < inject.modules.capacity; i++) {
			struct handle_entry *alias = &inject.modules.entries[i];

			if (alias->handle && alias->handle != TOMBSTONE && alias->owner == handle &&
			    alias->handle != handle)
				table_remove_owned(&inject.functions, alias->handle);
		}
		table_remove_owned(&inject.modules, handle);
	}
	pthread_rwlock_unlock(&inject.lock);
	module_info_free(owned);
}

static CUresult CUDAAPI wrap_cuModuleLoadData(CUmodule *module, const void *image)
{
	struct module_info *info = linked_cubin(image);
	char *text = info ? NULL : instrument("cuModuleLoadData", image, SIZE_MAX, &info);
	CUresult rc = REAL(cuModuleLoadData, module, text ? text : image);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoadData", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoadData, module, image);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text);
	else
		module_info_free(info);
	free(text);
	return rc;
}

static CUresult CUDAAPI wrap_cuModuleLoadDataEx(CUmodule *module, const void *image,
						       unsigned int numOptions, CUjit_option *options,
						       void **optionValues)
{
	struct module_info *info = linked_cubin(image);
	char *text = info ? NULL : instrument("cuModuleLoadDataEx", image, SIZE_MAX, &info);
	CUresult rc = REAL(cuModuleLoadDataEx, module, text ? text : image, numOptions, options,
			   optionValues);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoadDataEx", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoadDataEx, module, image, numOptions, options, optionValues);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text);
	else
		module_info_free(info);
	free(text);
	return rc;
}

/* A rewritten fatbin is PTX text now, which cuModuleLoadData takes. */
static CUresult CUDAAPI wrap_cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	struct module_info *info;
	char *text = instrument("cuModuleLoadFatBinary", fatCubin, SIZE_MAX, &info);
	CUresult rc = text ? REAL(cuModuleLoadData, module, text) : REAL(cuModuleLoadFatBinary, module, fatCubin);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoadFatBinary", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoadFatBinary, module, fatCubin);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text);
	else
		module_info_free(info);
	free(text);
	return rc;
}

static CUresult CUDAAPI wrap_cuModuleLoad(CUmodule *module, const char *fname)
{
	struct module_info *info = NULL;
	size_t size = 0;
	void *file = inject.active ? read_file(fname, &size) : NULL;
	char *text = file ? instrument("cuModuleLoad", file, size + 1, &info) : NULL;
	CUresult rc = text ? REAL(cuModuleLoadData, module, text) : REAL(cuModuleLoad, module, fname);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuModuleLoad", info, rc);
		info = NULL;
		rc = REAL(cuModuleLoad, module, fname);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*module, info, &text);
	else
		module_info_free(info);
	free(text);
	free(file);
	return rc;
}

static CUresult CUDAAPI wrap_cuModuleUnload(CUmodule hmod)
{
	CUresult rc = REAL(cuModuleUnload, hmod);

	if (rc == CUDA_SUCCESS)
		unloaded(hmod);
	return rc;
}

static CUresult CUDAAPI wrap_cuLibraryLoadData(CUlibrary *library, const void *code,
						      CUjit_option *jitOptions, void **jitOptionsValues,
						      unsigned int numJitOptions,
						      CUlibraryOption *libraryOptions,
						      void **libraryOptionValues,
						      unsigned int numLibraryOptions)
{
	struct module_info *info = linked_cubin(code);
	char *text = info ? NULL : instrument("cuLibraryLoadData", code, SIZE_MAX, &info);
	CUresult rc = REAL(cuLibraryLoadData, library, text ? text : code, jitOptions, jitOptionsValues,
			   numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);

	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuLibraryLoadData", info, rc);
		info = NULL;
		rc = REAL(cuLibraryLoadData, library, code, jitOptions, jitOptionsValues, numJitOptions,
			  libraryOptions, libraryOptionValues, numLibraryOptions);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*library, info, &text);
	else
		module_info_free(info);
	free(text);
	return rc;
}

static CUresult CUDAAPI wrap_cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
							  CUjit_option *jitOptions,
							  void **jitOptionsValues,
							  unsigned int numJitOptions,
							  CUlibraryOption *libraryOptions,
							  void **libraryOptionValues,
							  unsigned int numLibraryOptions)
{
	struct module_info *info = NULL;
	size_t size = 0;
	void *file = inject.active ? read_file(fileName, &size) : NULL;
	char *text = file ? instrument("cuLibraryLoadFromFile", file, size + 1, &info) : NULL;
	CUresult rc;

	if (text)
		rc = REAL(cuLibraryLoadData, library, text, jitOptions, jitOptionsValues, numJitOptions,
			  libraryOptions, libraryOptionValues, numLibraryOptions);
	else
		rc = REAL(cuLibraryLoadFromFile, library, fileName, jitOptions, jitOptionsValues,
			  numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);
	if (text && rc != CUDA_SUCCESS) {
		rewrite_refused("cuLibraryLoadFromFile", info, rc);
		info = NULL;
		rc = REAL(cuLibraryLoadFromFile, library, fileName, jitOptions, jitOptionsValues,
			  numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);
	}
	if (info && rc == CUDA_SUCCESS)
		loaded(*library, info, &text);
	else
		module_info_free(info);
	free(text);
	free(file);
	return rc;
}

static CUresult CUDAAPI wrap_cuLibraryUnload(CUlibrary library)
{
	CUresult rc = REAL(cuLibraryUnload, library);

	if (rc == CUDA_SUCCESS)
		unloaded(library);
	return rc;
}

/* ---- linking --------------------------------------------------------------------- */

static void link_created(CUlinkState state)
{
	struct module_info *m = calloc(1, sizeof(*m));

	if (!m)
		return;
	m->api = "cuLinkAddData";
	pthread_rwlock_wrlock(&inject.lock);
	if (table_put(&inject.links, state, m, state))
		module_info_free(m);
	pthread_rwlock_unlock(&inject.lock);
}

static CUresult CUDAAPI wrap_cuLinkCreate(unsigned int numOptions, CUjit_option *options,
						 void **optionValues, CUlinkState *stateOut)
{
	CUresult rc = REAL(cuLinkCreate, numOptions, options, optionValues, stateOut);

	if (rc == CUDA_SUCCESS && inject.active)
		link_created(*stateOut);
	return rc;
}

static CUresult CUDAAPI wrap_cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options,
						    void **optionValues, CUlinkState *stateOut)
{
	CUresult rc = REAL(cuLinkCreate_v2, numOptions, options, optionValues, stateOut);

	if (rc == CUDA_SUCCESS && inject.active)
		link_created(*stateOut);
	return rc;
}

/* A rewritten input's kernels (and its text) join its link's. */
static void link_added(CUlinkState state, struct module_info *info, char **image)
{
	struct handle_entry *e;
	struct module_info *link;
	struct kernel_info *grown;

	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.links, state);
	link = e ? e->value : NULL;
	grown = link ? realloc(link->kernels, (link->kernel_count + info->kernel_count) * sizeof(*grown)) : NULL;
	if (grown) {
		memcpy(grown + link->kernel_count, info->kernels, info->kernel_count * sizeof(*grown));
		link->kernels = grown;
		link->kernel_count += info->kernel_count;
		info->kernel_count = 0;
		keep_image(link, image);
	}
	pthread_rwlock_unlock(&inject.lock);
	if (!grown)
		report(CP_INJECT_ERROR, "cuLinkAddData", NULL, 0, 0,
		       "a link cuprobe did not see created: its instrumented kernels will launch without their parameter");
}

/* Inputs of kinds that can hold PTX (PTX, fatbin) are rewritten; cubins, objects and libraries pass. */
static char *link_input(const char *api, CUjitInputType type, const void *data, size_t size,
			struct module_info **info)
{
	*info = NULL;
	if (type != CU_JIT_INPUT_PTX && type != CU_JIT_INPUT_FATBINARY && type != CU_JIT_INPUT_CUBIN)
		return NULL;
	return instrument(api, data, type == CU_JIT_INPUT_PTX && size ? size : SIZE_MAX, info);
}

static CUresult link_add(enum hook_id id, CUlinkState state, CUjitInputType type, void *data, size_t size,
			 const char *name, unsigned int numOptions, CUjit_option *options,
			 void **optionValues)
{
	__typeof__(cuLinkAddData_v2) *add = (__typeof__(cuLinkAddData_v2) *)real(id);
	struct module_info *info;
	char *text = add ? link_input(hooks[id].name, type, data, size, &info) : NULL;
	CUresult rc;

	if (!add)
		return CUDA_ERROR_NOT_FOUND;
	if (!text)
		return add(state, type, data, size, name, numOptions, options, optionValues);
	rc = add(state, CU_JIT_INPUT_PTX, text, strlen(text) + 1, name, numOptions, options, optionValues);
	if (rc == CUDA_SUCCESS) {
		link_added(state, info, &text);
		module_info_free(info);
	} else {
		rewrite_refused(hooks[id].name, info, rc);
		rc = add(state, type, data, size, name, numOptions, options, optionValues);
	}
	free(text);
	return rc;
}

static CUresult CUDAAPI wrap_cuLinkAddData(CUlinkState state, CUjitInputType type, void *data,
						  size_t size, const char *name, unsigned int numOptions,
						  CUjit_option *options, void **optionValues)
{
	return link_add(HOOK_cuLinkAddData, state, type, data, size, name, numOptions, options,
			optionValues);
}

static CUresult CUDAAPI wrap_cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data,
						     size_t size, const char *name,
						     unsigned int numOptions, CUjit_option *options,
						     void **optionValues)
{
	return link_add(HOOK_cuLinkAddData_v2, state, type, data, size, name, numOptions, options,
			optionValues);
}

static CUresult link_add_file(enum hook_id file_id, enum hook_id data_id, CUlinkState state,
			      CUjitInputType type, const char *path, unsigned int numOptions,
			      CUjit_option *options, void **optionValues)
{
	__typeof__(cuLinkAddFile_v2) *add_file = (__typeof__(cuLinkAddFile_v2) *)real(file_id);
	size_t size = 0;
	void *file = inject.active && (type == CU_JIT_INPUT_PTX || type == CU_JIT_INPUT_FATBINARY) ?
		     read_file(path, &size) : NULL;
	struct module_info *info = NULL;
	char *text = file ? instrument(hooks[file_id].name, file, size + 1, &info) : NULL;
	CUresult rc;

	free(file);
	if (!add_file) {
		free(text);
		module_info_free(info);
		return CUDA_ERROR_NOT_FOUND;
	}
	if (!text)
		return add_file(state, type, path, numOptions, options, optionValues);
	rc = ((__typeof__(cuLinkAddData_v2) *)real(data_id))(state, CU_JIT_INPUT_PTX, text,
							      strlen(text) + 1, path, numOptions,
							      options, optionValues);
	if (rc == CUDA_SUCCESS) {
		link_added(state, info, &text);
		module_info_free(info);
	} else {
		rewrite_refused(hooks[file_id].name, info, rc);
		rc = add_file(state, type, path, numOptions, options, optionValues);
	}
	free(text);
	return rc;
}

static CUresult CUDAAPI wrap_cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
						  unsigned int numOptions, CUjit_option *options,
						  void **optionValues)
{
	return link_add_file(HOOK_cuLinkAddFile, HOOK_cuLinkAddData, state, type, path, numOptions,
			     options, optionValues);
}

static CUresult CUDAAPI wrap_cuLinkAddFile_v2(CUlinkState state, CUjitInputType type,
						     const char *path, unsigned int numOptions,
						     CUjit_option *options, void **optionValues)
{
	return link_add_file(HOOK_cuLinkAddFile_v2, HOOK_cuLinkAddData_v2, state, type, path, numOptions,
			     options, optionValues);
}

static CUresult CUDAAPI wrap_cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	CUresult rc = REAL(cuLinkComplete, state, cubinOut, sizeOut);
	struct handle_entry *e;

	if (rc != CUDA_SUCCESS || !cubinOut || !*cubinOut)
		return rc;
	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.links, state);
	/* The cubin stands for the link's kernels until the link is destroyed. */
	if (e && ((struct module_info *)e->value)->kernel_count)
		table_put(&inject.links, *cubinOut, e->value, state);
	pthread_rwlock_unlock(&inject.lock);
	return rc;
}

static CUresult CUDAAPI wrap_cuLinkDestroy(CUlinkState state)
{
	struct handle_entry *e;
	struct module_info *m = NULL;

	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.links, state);
	if (e) {
		m = e->value;
		table_remove_owned(&inject.links, state);
	}
	pthread_rwlock_unlock(&inject.lock);
	module_info_free(m);
	return REAL(cuLinkDestroy, state);
}

/* ---- kernel handles ------------------------------------------------------------------------ */

/* handle is name's in module (or library) owner: remembered when it is instrumented there. */
static void name_handle(const void *owner, const void *handle, const char *name)
{
	struct handle_entry *e;
	struct kernel_info *k;

	if (!handle || !name)
		return;
	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.modules, owner);
	k = e ? module_kernel(e->value, name) : NULL;
	if (k && table_put(&inject.functions, handle, k, e->owner == owner ? owner : e->owner)) {
		pthread_rwlock_unlock(&inject.lock);
		report(CP_INJECT_ERROR, NULL, name, k->probes, 0,
		       "out of memory: this kernel will launch without its parameter");
		return;
	}
	pthread_rwlock_unlock(&inject.lock);
}

static bool has_instrumented(const void *owner)
{
	bool found;

	pthread_rwlock_rdlock(&inject.lock);
	found = table_find(&inject.modules, owner) != NULL;
	pthread_rwlock_unlock(&inject.lock);
	return found;
}

static CUresult CUDAAPI wrap_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	CUresult rc = REAL(cuModuleGetFunction, hfunc, hmod, name);

	if (rc == CUDA_SUCCESS && has_instrumented(hmod))
		name_handle(hmod, *hfunc, name);
	return rc;
}

static CUresult CUDAAPI wrap_cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	CUresult rc = REAL(cuLibraryGetKernel, pKernel, library, name);

	if (rc == CUDA_SUCCESS && has_instrumented(library))
		name_handle(library, *pKernel, name);
	return rc;
}

/* A CUkernel's per-context function is the same kernel. */
static CUresult CUDAAPI wrap_cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	CUresult rc = REAL(cuKernelGetFunction, pFunc, kernel);
	struct handle_entry *e;

	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.functions, kernel);
	if (e)
		table_put(&inject.functions, *pFunc, e->value, e->owner);
	pthread_rwlock_unlock(&inject.lock);
	return rc;
}

/* A library's module in the current context: its functions are the library's kernels. */
static CUresult CUDAAPI wrap_cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	CUresult rc = REAL(cuLibraryGetModule, pMod, library);
	struct handle_entry *e;

	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_rwlock_wrlock(&inject.lock);
	e = table_find(&inject.modules, library);
	if (e && *pMod != (CUmodule)library)
		table_put(&inject.modules, *pMod, e->value, library);
	pthread_rwlock_unlock(&inject.lock);
	return rc;
}

static CUresult CUDAAPI wrap_cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
							       CUmodule mod)
{
	CUresult rc = REAL(cuModuleEnumerateFunctions, functions, numFunctions, mod);
	unsigned int i;

	for (i = 0; rc == CUDA_SUCCESS && functions && has_instrumented(mod) && i < numFunctions; i++) {
		const char *name = NULL;
		CUresult named = HELPER(cuFuncGetName, &name, functions[i]);

		if (named == CUDA_SUCCESS)
			name_handle(mod, functions[i], name);
		else
			report(CP_INJECT_ERROR, "cuModuleEnumerateFunctions", NULL, 0, 0,
			       "cannot name a function (cuFuncGetName: %s): if it is instrumented, its launches fault",
			       result_name(named));
	}
	return rc;
}

static CUresult CUDAAPI wrap_cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
							      CUlibrary lib)
{
	CUresult rc = REAL(cuLibraryEnumerateKernels, kernels, numKernels, lib);
	unsigned int i;

	for (i = 0; rc == CUDA_SUCCESS && kernels && has_instrumented(lib) && i < numKernels; i++) {
		const char *name = NULL;
		CUresult named = HELPER(cuKernelGetName, &name, kernels[i]);

		if (named == CUDA_SUCCESS)
			name_handle(lib, kernels[i], name);
		else
			report(CP_INJECT_ERROR, "cuLibraryEnumerateKernels", NULL, 0, 0,
			       "cannot name a kernel (cuKernelGetName: %s): if it is instrumented, its launches fault",
			       result_name(named));
	}
	return rc;
}

/* ---- launches -------------------------------------------------------------------------------- */

/* The instrumented kernel a function handle launches, or NULL. Copied under the lock. */
static bool instrumented(const void *f, struct kernel_info *out)
{
	struct handle_entry *e;

	if (!inject.active || !f)
		return false;
	pthread_rwlock_rdlock(&inject.lock);
	e = table_find(&inject.functions, f);
	if (e)
		*out = *(struct kernel_info *)e->value;
	pthread_rwlock_unlock(&inject.lock);
	return e != NULL;
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
	static CUresult CUDAAPI wrapper(CUfunction f, unsigned int gridDimX,	\
					       unsigned int gridDimY, unsigned int gridDimZ, \
					       unsigned int blockDimX, unsigned int blockDimY, \
					       unsigned int blockDimZ,		\
					       unsigned int sharedMemBytes, CUstream hStream, \
					       void **kernelParams, void **extra)	\
	{									\
		struct kernel_info k;						\
		struct launch l;						\
		CUresult rc;							\
										\
		if (!instrumented(f, &k))					\
			return REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, \
				    blockDimZ, sharedMemBytes, hStream, kernelParams, extra); \
		rc = launch_allowed(&k);					\
		if (rc == CUDA_SUCCESS)						\
			rc = prepare_launch(&l, &k, kernelParams, extra,	\
					    !capturing(hStream, ptsz_twin));	\
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		rc = REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
			  sharedMemBytes, hStream, l.params, l.extra);		\
		finish_launch(&l);						\
		return rc;							\
	}

LAUNCH_KERNEL(wrap_cuLaunchKernel, cuLaunchKernel, false)
LAUNCH_KERNEL(wrap_cuLaunchKernel_ptsz, cuLaunchKernel_ptsz, true)

#define LAUNCH_KERNEL_EX(wrapper, hook, ptsz_twin)				\
	static CUresult CUDAAPI wrapper(const CUlaunchConfig *config, CUfunction f, \
					       void **kernelParams, void **extra)	\
	{									\
		struct kernel_info k;						\
		struct launch l;						\
		CUresult rc;							\
										\
		if (!instrumented(f, &k) || !config)				\
			return REAL(hook, config, f, kernelParams, extra);	\
		rc = launch_allowed(&k);					\
		if (rc == CUDA_SUCCESS)						\
			rc = prepare_launch(&l, &k, kernelParams, extra,	\
					    !capturing(config->hStream, ptsz_twin)); \
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		rc = REAL(hook, config, f, l.params, l.extra);			\
		finish_launch(&l);						\
		return rc;							\
	}

LAUNCH_KERNEL_EX(wrap_cuLaunchKernelEx, cuLaunchKernelEx, false)
LAUNCH_KERNEL_EX(wrap_cuLaunchKernelEx_ptsz, cuLaunchKernelEx_ptsz, true)

#define LAUNCH_COOPERATIVE(wrapper, hook, ptsz_twin)				\
	static CUresult CUDAAPI wrapper(CUfunction f, unsigned int gridDimX,	\
					       unsigned int gridDimY, unsigned int gridDimZ, \
					       unsigned int blockDimX, unsigned int blockDimY, \
					       unsigned int blockDimZ,		\
					       unsigned int sharedMemBytes, CUstream hStream, \
					       void **kernelParams)			\
	{									\
		struct kernel_info k;						\
		struct launch l;						\
		CUresult rc;							\
										\
		if (!instrumented(f, &k))					\
			return REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, \
				    blockDimZ, sharedMemBytes, hStream, kernelParams);	\
		rc = launch_allowed(&k);					\
		if (rc == CUDA_SUCCESS)						\
			rc = prepare_launch(&l, &k, kernelParams, NULL,		\
					    !capturing(hStream, ptsz_twin));	\
		if (rc != CUDA_SUCCESS)						\
			return rc;						\
		rc = REAL(hook, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
			  sharedMemBytes, hStream, l.params);			\
		finish_launch(&l);						\
		return rc;							\
	}

LAUNCH_COOPERATIVE(wrap_cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, false)
LAUNCH_COOPERATIVE(wrap_cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel_ptsz, true)

/* Deprecated: instrumented kernels are refused here, said once. */
static CUresult CUDAAPI wrap_cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
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
static CUresult CUDAAPI wrap_cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
	struct kernel_info k;
	unsigned int at;
	CUresult rc;

	if (!instrumented(hfunc, &k))
		return REAL(cuParamSetSize, hfunc, numbytes);
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
	CUresult rc;

	memset(np, 0, sizeof(*np));
	np->params = params;
	np->extra = extra;
	if (!instrumented(func, &k) && !instrumented(kern, &k))
		return CUDA_SUCCESS;
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

static CUresult CUDAAPI wrap_cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
							 const CUgraphNode *dependencies,
							 size_t numDependencies,
							 const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
KERNEL_NODE_V1(wrap_cuGraphAddKernelNode, cuGraphAddKernelNode, phGraphNode, hGraph, dependencies,
	       numDependencies)

static CUresult CUDAAPI wrap_cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
							    const CUgraphNode *dependencies,
							    size_t numDependencies,
							    const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
KERNEL_NODE_V2(wrap_cuGraphAddKernelNode_v2, cuGraphAddKernelNode_v2, phGraphNode, hGraph, dependencies,
	       numDependencies)

static CUresult CUDAAPI wrap_cuGraphKernelNodeSetParams(CUgraphNode hNode,
							       const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
KERNEL_NODE_V1(wrap_cuGraphKernelNodeSetParams, cuGraphKernelNodeSetParams, hNode)

static CUresult CUDAAPI wrap_cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
								  const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
KERNEL_NODE_V2(wrap_cuGraphKernelNodeSetParams_v2, cuGraphKernelNodeSetParams_v2, hNode)

static CUresult CUDAAPI wrap_cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
								   const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
KERNEL_NODE_V1(wrap_cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams, hGraphExec, hNode)

static CUresult CUDAAPI wrap_cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec,
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

static CUresult CUDAAPI wrap_cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
						   const CUgraphNode *dependencies, size_t numDependencies,
						   CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphAddNode, phGraphNode, hGraph, dependencies, numDependencies)

static CUresult CUDAAPI wrap_cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
						      const CUgraphNode *dependencies,
						      const CUgraphEdgeData *dependencyData,
						      size_t numDependencies, CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphAddNode_v2, phGraphNode, hGraph, dependencies, dependencyData, numDependencies)

static CUresult CUDAAPI wrap_cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphNodeSetParams, hNode)

static CUresult CUDAAPI wrap_cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
							     CUgraphNodeParams *nodeParams)
GRAPH_NODE(cuGraphExecNodeSetParams, hGraphExec, hNode)

/* ---- how programs find the driver's functions ------------------------------------------------ */

/*
 * fn, which the driver (through dlsym or cuGetProcAddress) gave for hook
 * id: ours to hand out instead. The first pointer seen for a hook is the
 * one it calls; another one (a second copy of the driver) is passed on
 * unwrapped, and said.
 */
static void *wrapped(enum hook_id id, void *fn)
{
	void *none = NULL, *known;
	static atomic_bool said;
	bool no = false;

	if (!fn || fn == hooks[id].wrapper)
		return fn;
	if (!atomic_compare_exchange_strong(&hooks[id].real, &none, fn) && (known = atomic_load(&hooks[id].real)) != fn) {
		if (atomic_compare_exchange_strong(&said, &no, true))
			report(CP_INJECT_ERROR, hooks[id].name, NULL, 0, 0,
			       "a second CUDA driver in the process: its modules are not instrumented");
		return fn;
	}
	return hooks[id].wrapper;
}

static int hook_by_name(const char *name)
{
	int i;

	for (i = 0; name && i < HOOK_MAX; i++)
		if (!strcmp(hooks[i].name, name))
			return i;
	return -1;
}

/*
 * cuGetProcAddress("cuLaunchKernel", ...) hands out a variant
 * (cuLaunchKernel_ptsz, ...) by version and flags: the pointer says which,
 * compared with the driver's exports; failing that, the version and the
 * per-thread flag choose.
 */
static void *proc_address(const char *symbol, void *fn, int cuda_version, cuuint64_t flags)
{
	size_t len = symbol ? strlen(symbol) : 0;
	static atomic_bool said;
	bool no = false;
	int i, best = -1;
	bool ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

	if (!inject.active || !fn)
		return fn;
	for (i = 0; i < HOOK_MAX; i++)
		if (fn == hooks[i].wrapper)
			return fn; /* the driver's own table names our export (it interposes) */
	for (i = 0; i < HOOK_MAX; i++) {
		const char *rest = hooks[i].name + len;

		if (strncmp(hooks[i].name, symbol, len) || (*rest && strncmp(rest, "_v", 2) && strncmp(rest, "_ptsz", 5)))
			continue;
		if (driver_symbol(hooks[i].name) == fn || atomic_load(&hooks[i].real) == fn)
			return wrapped((enum hook_id)i, fn);
		if (hooks[i].ptsz == ptsz && hooks[i].since <= cuda_version &&
		    (best < 0 || hooks[i].since > hooks[best].since))
			best = i;
	}
	if (best < 0)
		return fn;
	/* Said once: a driver whose table is not its exports does it for every entry point. */
	if (atomic_compare_exchange_strong(&said, &no, true))
		report(CP_INJECT_NOTE, "cuGetProcAddress", symbol, 0, 0,
		       "the driver's entry point is none of its exports: wrapped as %s by version %d (and so for the others)",
		       hooks[best].name, cuda_version);
	return wrapped((enum hook_id)best, fn);
}

static CUresult CUDAAPI wrap_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
						     cuuint64_t flags)
{
	CUresult rc = REAL(cuGetProcAddress, symbol, pfn, cudaVersion, flags);

	if (rc == CUDA_SUCCESS && pfn)
		*pfn = proc_address(symbol, *pfn, cudaVersion, flags);
	return rc;
}

static CUresult CUDAAPI wrap_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
							cuuint64_t flags,
							CUdriverProcAddressQueryResult *symbolStatus)
{
	CUresult rc = REAL(cuGetProcAddress_v2, symbol, pfn, cudaVersion, flags, symbolStatus);

	if (rc == CUDA_SUCCESS && pfn)
		*pfn = proc_address(symbol, *pfn, cudaVersion, flags);
	return rc;
}

/*
 * cudart finds cuGetProcAddress with dlsym on libcuda's handle: that lookup
 * comes here. dlsym(RTLD_NEXT, ...) searches after its caller, found from
 * the return address: those go straight on to libc's dlsym by a jump, so
 * the caller's return address is the one libc sees (an entry in assembly:
 * a C tail call is not guaranteed). The others, whose answer does not
 * depend on the caller, come to inject_dlsym. dlvsym is left alone: libc's
 * is how this library finds libc's dlsym.
 */
__attribute__((visibility("hidden"))) void *(*inject_libc_dlsym)(void *, const char *);

__attribute__((visibility("hidden"), used)) void inject_resolve_dl(void)
{
	resolve_libc_dlsym();
	inject_libc_dlsym = libc_dlsym;
}

__attribute__((visibility("hidden"), used)) void *inject_dlsym(void *handle, const char *name)
{
	void *fn;
	int id;

	if (!inject_libc_dlsym)
		inject_resolve_dl();
	if (!inject_libc_dlsym)
		return NULL;
	fn = inject_libc_dlsym(handle, name);
	if (!inject.active || !fn || !name || name[0] != 'c' || name[1] != 'u')
		return fn;
	id = hook_by_name(name);
	return id < 0 ? fn : wrapped((enum hook_id)id, fn);
}

/* dlsym: RTLD_NEXT ((void *)-1) jumps on to libc's, resolving it first if need be. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	cmpq $-1, %rdi\n"
	"	jne inject_dlsym\n"
	"	movq inject_libc_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	jmp *%rax\n"
	"1:	pushq %rdi\n"
	"	pushq %rsi\n"
	"	subq $8, %rsp\n"
	"	call inject_resolve_dl\n"
	"	addq $8, %rsp\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	jmp *inject_libc_dlsym(%rip)\n"
	".size dlsym, .-dlsym\n");

/* The exported names are the wrappers (one definition each, under the driver's names). */
#define HOOK_EXPORT(fn, since, ptsz) \
	extern __typeof__(fn) fn __attribute__((alias("wrap_" #fn), visibility("default")));
HOOKS(HOOK_EXPORT)
#undef HOOK_EXPORT

/* ---- start ------------------------------------------------------------------------------ */

static int map_region(int fd, size_t size, bool read_only, struct region *r)
{
	void *base = mmap(NULL, PAGE_ROUND(size), read_only ? PROT_READ : PROT_READ | PROT_WRITE,
			  MAP_SHARED, fd, 0);

	if (base == MAP_FAILED)
		return -errno;
	r->base = base;
	r->size = PAGE_ROUND(size);
	return 0;
}

/*
 * The prelude every instrumented module gets: the declarations of the maps
 * (each at the address this process mapped it, under the index the
 * translator named it by) and the programs' functions.
 */
static int make_prelude(void)
{
	size_t symbols = 0, i;
	uint64_t *addresses;
	bool *declare;
	char *declarations = NULL;
	int err;

	for (i = 0; i < inject.plan.map_count; i++)
		if (inject.plan.maps[i].index + 1 > symbols)
			symbols = inject.plan.maps[i].index + 1;
	addresses = calloc(symbols ? symbols : 1, sizeof(*addresses));
	declare = calloc(symbols ? symbols : 1, sizeof(*declare));
	err = addresses && declare ? 0 : -ENOMEM;
	for (i = 0; !err && i < inject.plan.map_count; i++) {
		addresses[inject.plan.maps[i].index] = (uint64_t)(uintptr_t)inject.maps[i].base;
		declare[inject.plan.maps[i].index] = true;
	}
	if (!err)
		err = cp_ptx__map_declarations(addresses, declare, symbols, &declarations);
	if (!err && asprintf(&inject.prelude, "%s%s", declarations,
			     inject.plan.functions ? inject.plan.functions : "") < 0) {
		inject.prelude = NULL;
		err = -ENOMEM;
	}
	free(declarations);
	free(addresses);
	free(declare);
	return err;
}

static int start(const char *fd_text)
{
	char error[256], *end;
	struct stat st;
	void *bytes;
	long fd = strtol(fd_text, &end, 10);
	size_t i;
	int err;

	if (*end || fd < 0 || fd > 65535 || fstat((int)fd, &st) || st.st_size <= 0 ||
	    (size_t)st.st_size > CP_INJECT_PLAN_MAX)
		return -EBADF;
	bytes = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, (int)fd, 0);
	if (bytes == MAP_FAILED)
		return -errno;
	err = cp_inject_plan__decode(bytes, (size_t)st.st_size, &inject.plan, error, sizeof(error));
	munmap(bytes, (size_t)st.st_size);
	if (err)
		return err;
	if (!fstat(inject.plan.report_fd, &st) && S_ISSOCK(st.st_mode)) {
		inject.report_dev = st.st_dev;
		inject.report_ino = st.st_ino;
	} else {
		inject.plan.report_fd = -1; /* closed before we came: nothing can be said */
	}
	inject.maps = calloc(inject.plan.map_count ? inject.plan.map_count : 1, sizeof(*inject.maps));
	inject.probes = calloc(inject.plan.program_count ? inject.plan.program_count : 1,
			       sizeof(*inject.probes));
	if (!inject.maps || !inject.probes) {
		report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < inject.plan.map_count; i++) {
		const struct cp_inject_map *m = &inject.plan.maps[i];

		err = map_region(m->fd, (size_t)((m->value_size + 7) / 8 * 8) * m->max_entries, m->read_only,
				 &inject.maps[i]);
		inject.maps[i].read_only = m->read_only;
		if (err) {
			report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "cannot map map %s: %s", m->name, strerror(-err));
			return err;
		}
	}
	if (inject.plan.launch_slot_count) {
		err = map_region(inject.plan.launch_slots_fd, (size_t)inject.plan.launch_slot_count * 8,
				 false, &inject.slots);
		if (err) {
			report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "cannot map the launch slots: %s", strerror(-err));
			return err;
		}
	}
	for (i = 0; i < inject.plan.program_count; i++)
		inject.probes[i] = (struct cp_ptx_probe){ .glob = inject.plan.programs[i].glob,
							  .function = inject.plan.programs[i].function,
							  .at_exit = inject.plan.programs[i].at_exit };
	err = make_prelude();
	if (err)
		report(CP_INJECT_ERROR, NULL, NULL, 0, 0, "out of memory");
	return err;
}

/* A forked child has no CUDA context of its parent's: it registers the maps again. */
static void after_fork_in_child(void)
{
	atomic_store(&inject.registered, false);
	atomic_store(&inject.register_reported, false);
	inject.register_result = CUDA_SUCCESS;
	pthread_mutex_init(&inject.register_lock, NULL);
	pthread_rwlock_init(&inject.lock, NULL);
}

__attribute__((constructor)) static void inject_init(void)
{
	const char *plan = getenv(CP_INJECT_PLAN_ENV);

	inject.plan.report_fd = -1;
	inject_resolve_dl();
	if (!plan)
		return;
	if (start(plan)) {
		/* Inactive: every module passes as it came; cuprobe hears no READY from us. */
		cp_inject_plan__release(&inject.plan);
		inject.plan.report_fd = -1;
		return;
	}
	pthread_atfork(NULL, NULL, after_fork_in_child);
	inject.active = true;
	report(CP_INJECT_READY, NULL, NULL, 0, 0, NULL);
}
