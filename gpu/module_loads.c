// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * module_loads: loads CUDA modules every way a program can hand one to the
 * driver, and launches vec_add from each that has it, checking the result.
 * For the device-program tests (tests/root_inject.c): what reached the
 * driver is compared with what this program passed.
 *
 * usage: module_loads [--launches N] [--ex|--cooperative] STEP...
 *   ptx            cuModuleLoadData of the embedded vec_add PTX (vec_add_ptx.h)
 *   ptx-ex         cuModuleLoadDataEx of it, with a JIT option
 *   library        cuLibraryLoadData of it; cuLibraryGetKernel
 *   link           cuLinkCreate/cuLinkAddData(PTX)/cuLinkComplete, then cuModuleLoadData
 *   proc           the ptx step through entry points from cuGetProcAddress
 *                  (found with dlsym on libcuda.so.1, as cudart does)
 *   load=FILE      cuModuleLoadData of FILE's bytes (PTX, fatbin or cubin)
 *   fatbin=FILE    cuModuleLoadFatBinary of FILE's bytes
 *   wrapper=FILE   cuModuleLoadData of a fatbin wrapper pointing at FILE's bytes
 *   module=FILE    cuModuleLoad(FILE)
 *   libfile=FILE   cuLibraryLoadFromFile(FILE)
 *   linkfile=FILE  cuLinkAddFile(FILE as a fatbin), then cuModuleLoadData
 *   cudart=LIB     as cudart 13 loads a kernel: LIB (built by nvcc) opened, its
 *                  fatbin registered with this program (__cudaRegisterFatBinary),
 *                  the cubin for the device taken from it and cuLibraryLoadData'd:
 *                  a pointer into the fatbin, or a decompressed copy
 *   cudart-copy=LIB      the same with the cubin always copied
 *   cudart-patched=LIB   the same with a copy whose ELF padding differs
 *   --launches N   vec_add launches per step that has it (default 2)
 *   --ex           launch with cuLaunchKernelEx
 *   --cooperative  launch with cuLaunchCooperativeKernel
 *   --no-sync      end without synchronizing (and without checking the sums)
 *   proc-v1        the ptx step through cuGetProcAddress (CUDA 11.3's), as
 *                  cudart resolves it at version 11030
 * prints one line per step: STEP vec_add=launched|absent; exit 1 on any error.
 *
 * Its RUNPATH finds the simulated driver in the build tree; copied alone to
 * a GPU machine it uses the real one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "vec_add_ptx.h"

#define ELEMENTS 1024
#define BLOCK 256u

struct driver {
	__typeof__(cuModuleLoadData) *module_load_data;
	__typeof__(cuModuleGetFunction) *module_get_function;
	__typeof__(cuLaunchKernel) *launch_kernel;
};

static struct driver exported = { cuModuleLoadData, cuModuleGetFunction, cuLaunchKernel };
static long launches = 2;
static bool use_ex, use_cooperative, no_sync;

static bool check(CUresult rc, const char *what)
{
	const char *name = NULL;

	if (rc == CUDA_SUCCESS)
		return true;
	cuGetErrorName(rc, &name);
	fprintf(stderr, "module_loads: %s: %s\n", what, name ? name : "unknown error");
	return false;
}

static void *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *data = NULL;
	long n;

	if (!f) {
		fprintf(stderr, "module_loads: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
	    (data = calloc(1, (size_t)n + 1)) && fread(data, 1, (size_t)n, f) == (size_t)n) {
		*size = (size_t)n;
	} else {
		free(data);
		data = NULL;
		fprintf(stderr, "module_loads: %s: cannot read it\n", path);
	}
	fclose(f);
	return data;
}

/* launches of vec_add through f, then the sums checked. */
static bool run_vec_add(const struct driver *d, CUfunction f)
{
	static float a[ELEMENTS], b[ELEMENTS], c[ELEMENTS];
	CUdeviceptr da, db, dc;
	int n = ELEMENTS, i;
	void *params[] = { &da, &db, &dc, &n };
	unsigned int grid = (ELEMENTS + BLOCK - 1) / BLOCK;
	bool ok;
	long k;

	for (i = 0; i < n; i++) {
		a[i] = (float)i;
		b[i] = (float)(2 * i);
		c[i] = 0;
	}
	ok = check(cuMemAlloc(&da, sizeof(a)), "cuMemAlloc") && check(cuMemAlloc(&db, sizeof(b)), "cuMemAlloc") &&
	     check(cuMemAlloc(&dc, sizeof(c)), "cuMemAlloc") &&
	     check(cuMemcpyHtoD(da, a, sizeof(a)), "cuMemcpyHtoD") &&
	     check(cuMemcpyHtoD(db, b, sizeof(b)), "cuMemcpyHtoD");
	for (k = 0; ok && k < launches; k++) {
		if (use_ex) {
			CUlaunchConfig config = { .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
						  .blockDimX = BLOCK, .blockDimY = 1, .blockDimZ = 1 };

			ok = check(cuLaunchKernelEx(&config, f, params, NULL), "cuLaunchKernelEx");
		} else if (use_cooperative) {
			ok = check(cuLaunchCooperativeKernel(f, grid, 1, 1, BLOCK, 1, 1, 0, NULL, params),
				   "cuLaunchCooperativeKernel");
		} else {
			ok = check(d->launch_kernel(f, grid, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL),
				   "cuLaunchKernel");
		}
	}
	if (no_sync)
		return ok;
	ok = ok && check(cuCtxSynchronize(), "cuCtxSynchronize") &&
	     check(cuMemcpyDtoH(c, dc, sizeof(c)), "cuMemcpyDtoH");
	for (i = 0; ok && i < n; i++)
		if (c[i] != a[i] + b[i]) {
			fprintf(stderr, "module_loads: vec_add: wrong sum at %d\n", i);
			ok = false;
		}
	cuMemFree(da);
	cuMemFree(db);
	cuMemFree(dc);
	return ok;
}

/* The step's module loaded: vec_add launched from it when it has one. */
static bool finish_module(const char *step, const struct driver *d, CUmodule module)
{
	CUfunction f;
	CUresult rc = d->module_get_function(&f, module, "vec_add");
	bool ok = true;

	if (rc == CUDA_SUCCESS)
		ok = run_vec_add(d, f);
	else if (rc != CUDA_ERROR_NOT_FOUND)
		ok = check(rc, "cuModuleGetFunction");
	printf("%s vec_add=%s\n", step, rc == CUDA_SUCCESS ? "launched" : "absent");
	return ok && check(cuModuleUnload(module), "cuModuleUnload");
}

static bool finish_library(const char *step, CUlibrary library)
{
	CUkernel kernel;
	CUresult rc = cuLibraryGetKernel(&kernel, library, "vec_add");
	bool ok = true;

	if (rc == CUDA_SUCCESS)
		ok = run_vec_add(&exported, (CUfunction)kernel);
	else if (rc != CUDA_ERROR_NOT_FOUND)
		ok = check(rc, "cuLibraryGetKernel");
	printf("%s vec_add=%s\n", step, rc == CUDA_SUCCESS ? "launched" : "absent");
	return ok && check(cuLibraryUnload(library), "cuLibraryUnload");
}

static bool link_step(const char *step, CUjitInputType type, const void *data, size_t size,
		      const char *path)
{
	CUlinkState link;
	CUmodule module;
	void *cubin;
	size_t cubin_size;
	bool ok;

	if (!check(cuLinkCreate(0, NULL, NULL, &link), "cuLinkCreate"))
		return false;
	ok = path ? check(cuLinkAddFile(link, type, path, 0, NULL, NULL), "cuLinkAddFile") :
		    check(cuLinkAddData(link, type, (void *)data, size, "vec_add.ptx", 0, NULL, NULL),
			  "cuLinkAddData");
	ok = ok && check(cuLinkComplete(link, &cubin, &cubin_size), "cuLinkComplete") &&
	     check(cuModuleLoadData(&module, cubin), "cuModuleLoadData") &&
	     finish_module(step, &exported, module);
	return check(cuLinkDestroy(link), "cuLinkDestroy") && ok;
}

/* The first cuGetProcAddress (CUDA 11.3): cuda.h names only its successor. */
typedef CUresult CUDAAPI get_proc_v1_fn(const char *symbol, void **pfn, int cudaVersion,
					cuuint64_t flags);

/*
 * The driver's entry points as cudart 13 finds them: dlsym of
 * cuGetProcAddress_v2 on libcuda's handle; through it, cuGetProcAddress
 * itself, at version 11030 (the first one) and 12000 (_v2); every other
 * entry point through what those returned.
 */
static bool resolve(struct driver *d, bool v1)
{
	__typeof__(cuGetProcAddress_v2) *get_proc, *get_proc_12000 = NULL;
	get_proc_v1_fn *get_proc_11030 = NULL;
	void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	const char *names[] = { "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel" };
	void **slots[] = { (void **)&d->module_load_data, (void **)&d->module_get_function,
			   (void **)&d->launch_kernel };
	size_t i;

	if (!libcuda)
		return false;
	get_proc = (__typeof__(cuGetProcAddress_v2) *)dlsym(libcuda, "cuGetProcAddress_v2");
	if (!get_proc ||
	    !check(get_proc("cuGetProcAddress", (void **)&get_proc_11030, 11030, 0, NULL), "cuGetProcAddress") ||
	    !check(get_proc("cuGetProcAddress", (void **)&get_proc_12000, 12000, 0, NULL), "cuGetProcAddress"))
		return false;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!check(v1 ? get_proc_11030(names[i], slots[i], 12000, 0) :
				get_proc_12000(names[i], slots[i], CUDA_VERSION, 0, NULL),
			   "cuGetProcAddress"))
			return false;
	return true;
}

/* ---- cudart's part, stood in for: fatbins registered by nvcc's host code ---- */

#define MAX_REGISTERED 16

/* The fatbin wrapper nvcc's host code registers (fatbin.h names its layout). */
struct fatbin_wrapper {
	unsigned int magic, version;
	const unsigned char *data;
	const void *unused;
};

static const struct fatbin_wrapper *registered[MAX_REGISTERED];
static size_t registered_count;

/* What nvcc's host code calls when its object loads; exported (-rdynamic). */
void **__cudaRegisterFatBinary(void *fatCubin)
{
	if (registered_count == MAX_REGISTERED)
		return NULL;
	registered[registered_count] = fatCubin;
	return (void **)&registered[registered_count++];
}

void __cudaRegisterFatBinaryEnd(void **handle)
{
	(void)handle;
}

void __cudaUnregisterFatBinary(void **handle)
{
	(void)handle;
}

void __cudaRegisterFunction(void **handle, const char *host, char *device, const char *name,
			    int thread_limit, void *tid, void *bid, void *block, void *grid, int *warp)
{
	(void)handle, (void)host, (void)device, (void)name, (void)thread_limit;
	(void)tid, (void)bid, (void)block, (void)grid, (void)warp;
}

/* Launches through cudart's own path: never taken here (the kernels launch by the driver). */
int __cudaLaunchKernel(void)
{
	return 1;
}

int __cudaGetKernel(void)
{
	return 1;
}

char __cudaInitModule(void **handle)
{
	(void)handle;
	return 0;
}

unsigned int __cudaPopCallConfiguration(void)
{
	return 1;
}

enum cubin_hand { CUBIN_AS_IT_IS, CUBIN_COPIED, CUBIN_PATCHED };

/*
 * The ELF entry of the fatbin for the device's architecture: a pointer to
 * it when it is stored uncompressed, else a decompressed copy (*copy then).
 * Entry layout: u16 kind (2: ELF), u32 header size at 4, u64 stored size at
 * 8, u32 compressed size at 16, u32 architecture at 28, u64 flags at 40
 * (0x8000: ZSTD), u64 uncompressed size at 56.
 */
static const void *device_cubin(const unsigned char *fatbin, unsigned int arch, void **copy,
				size_t *cubin_size)
{
	uint64_t entries, stored, flags, size;
	uint32_t header, entry_arch, compressed;
	uint16_t fatbin_header, kind;
	const unsigned char *e, *end;

	memcpy(&fatbin_header, fatbin + 6, sizeof(fatbin_header));
	memcpy(&entries, fatbin + 8, sizeof(entries));
	end = fatbin + fatbin_header + entries;
	for (e = fatbin + fatbin_header; e + 64 <= end; e += header + stored) {
		memcpy(&kind, e, sizeof(kind));
		memcpy(&header, e + 4, sizeof(header));
		memcpy(&stored, e + 8, sizeof(stored));
		memcpy(&compressed, e + 16, sizeof(compressed));
		memcpy(&entry_arch, e + 28, sizeof(entry_arch));
		memcpy(&flags, e + 40, sizeof(flags));
		memcpy(&size, e + 56, sizeof(size));
		if (kind != 2 || entry_arch != arch)
			continue;
		if (!(flags & 0x8000)) {
			*cubin_size = stored;
			return e + header;
		}
		*cubin_size = size;
		*copy = malloc(size);
		if (*copy && ZSTD_decompress(*copy, size, e + header, compressed) == size)
			return *copy;
		free(*copy);
		*copy = NULL;
		return NULL;
	}
	return NULL;
}

/* The fatbin LIB registered when it was opened (the first time: opened again, it registers nothing). */
static const struct fatbin_wrapper *registered_by(const char *path)
{
	static struct {
		void *lib;
		const struct fatbin_wrapper *wrapper;
	} opened[MAX_REGISTERED];
	static size_t opened_count;
	size_t before = registered_count, i;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		fprintf(stderr, "module_loads: %s\n", dlerror());
		return NULL;
	}
	for (i = 0; i < opened_count; i++)
		if (opened[i].lib == lib)
			return opened[i].wrapper;
	if (registered_count == before || opened_count == MAX_REGISTERED) {
		fprintf(stderr, "module_loads: %s: registered no fatbin\n", path);
		return NULL;
	}
	opened[opened_count].lib = lib;
	opened[opened_count].wrapper = registered[registered_count - 1];
	return opened[opened_count++].wrapper;
}

static bool cudart_step(const char *step, const char *path, enum cubin_hand hand)
{
	const struct fatbin_wrapper *wrapper = registered_by(path);
	void *copy = NULL;
	const void *cubin;
	CUlibrary library;
	int major = 0, minor = 0;
	size_t size = 0;
	bool ok;

	if (!wrapper)
		return false;
	check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), "cuDeviceGetAttribute");
	check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), "cuDeviceGetAttribute");
	cubin = device_cubin(wrapper->data, (unsigned int)(major * 10 + minor), &copy, &size);
	if (cubin && hand != CUBIN_AS_IT_IS && !copy) {
		if ((copy = malloc(size)))
			memcpy(copy, cubin, size);
		cubin = copy;
	}
	/* Bytes that change nothing the driver reads: the ELF identification's padding. */
	if (cubin && hand == CUBIN_PATCHED)
		((unsigned char *)copy)[EI_PAD + 6] ^= 1;
	if (!cubin) {
		fprintf(stderr, "module_loads: %s: no cubin for sm_%d%d in its fatbin\n", path, major, minor);
		return false;
	}
	ok = check(cuLibraryLoadData(&library, cubin, NULL, NULL, 0, NULL, NULL, 0), "cuLibraryLoadData") &&
	     finish_library(step, library);
	free(copy);
	return ok;
}

static bool step(const char *arg)
{
	const char *equals = strchr(arg, '='), *path = equals ? equals + 1 : NULL;
	CUjit_option option = CU_JIT_OPTIMIZATION_LEVEL;
	void *option_value = (void *)(uintptr_t)3;
	struct {
		unsigned int magic, version;
		const void *data;
		const void *unused;
	} wrapper;
	CUlibrary library;
	CUmodule module;
	size_t size = 0;
	void *file = NULL;
	bool ok = false;

	if (path && strncmp(arg, "module=", 7) && strncmp(arg, "libfile=", 8) &&
	    strncmp(arg, "linkfile=", 9) && strncmp(arg, "cudart", 6) && !(file = read_file(path, &size)))
		return false;
	if (!strcmp(arg, "ptx")) {
		ok = check(cuModuleLoadData(&module, vec_add_ptx), "cuModuleLoadData") &&
		     finish_module(arg, &exported, module);
	} else if (!strcmp(arg, "ptx-ex")) {
		ok = check(cuModuleLoadDataEx(&module, vec_add_ptx, 1, &option, &option_value),
			   "cuModuleLoadDataEx") && finish_module(arg, &exported, module);
	} else if (!strcmp(arg, "library")) {
		ok = check(cuLibraryLoadData(&library, vec_add_ptx, NULL, NULL, 0, NULL, NULL, 0),
			   "cuLibraryLoadData") && finish_library(arg, library);
	} else if (!strcmp(arg, "link")) {
		ok = link_step(arg, CU_JIT_INPUT_PTX, vec_add_ptx, sizeof(vec_add_ptx), NULL);
	} else if (!strcmp(arg, "proc") || !strcmp(arg, "proc-v1")) {
		struct driver resolved;

		ok = resolve(&resolved, !strcmp(arg, "proc-v1")) &&
		     check(resolved.module_load_data(&module, vec_add_ptx), "cuModuleLoadData") &&
		     finish_module(arg, &resolved, module);
	} else if (!strncmp(arg, "load=", 5)) {
		ok = check(cuModuleLoadData(&module, file), "cuModuleLoadData") &&
		     finish_module("load", &exported, module);
	} else if (!strncmp(arg, "fatbin=", 7)) {
		ok = check(cuModuleLoadFatBinary(&module, file), "cuModuleLoadFatBinary") &&
		     finish_module("fatbin", &exported, module);
	} else if (!strncmp(arg, "wrapper=", 8)) {
		wrapper.magic = 0x466243b1;
		wrapper.version = 1;
		wrapper.data = file;
		wrapper.unused = NULL;
		ok = check(cuModuleLoadData(&module, &wrapper), "cuModuleLoadData") &&
		     finish_module("wrapper", &exported, module);
	} else if (!strncmp(arg, "module=", 7)) {
		ok = check(cuModuleLoad(&module, path), "cuModuleLoad") &&
		     finish_module("module", &exported, module);
	} else if (!strncmp(arg, "libfile=", 8)) {
		ok = check(cuLibraryLoadFromFile(&library, path, NULL, NULL, 0, NULL, NULL, 0),
			   "cuLibraryLoadFromFile") && finish_library("libfile", library);
	} else if (!strncmp(arg, "linkfile=", 9)) {
		ok = link_step("linkfile", CU_JIT_INPUT_FATBINARY, NULL, 0, path);
	} else if (!strncmp(arg, "cudart=", 7)) {
		ok = cudart_step("cudart", path, CUBIN_AS_IT_IS);
	} else if (!strncmp(arg, "cudart-copy=", 12)) {
		ok = cudart_step("cudart-copy", path, CUBIN_COPIED);
	} else if (!strncmp(arg, "cudart-patched=", 15)) {
		ok = cudart_step("cudart-patched", path, CUBIN_PATCHED);
	} else {
		fprintf(stderr, "module_loads: unknown step %s\n", arg);
	}
	free(file);
	return ok;
}

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUdevice dev;
	int i = 1;
	bool ok = true;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--ex")) {
			use_ex = true;
		} else if (!strcmp(argv[i], "--cooperative")) {
			use_cooperative = true;
		} else if (!strcmp(argv[i], "--no-sync")) {
			no_sync = true;
		} else if (!strcmp(argv[i], "--launches") && i + 1 < argc) {
			launches = strtol(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "usage: module_loads [--launches N] [--ex|--cooperative] [--no-sync] STEP...\n");
			return 2;
		}
	}
	if (i == argc) {
		fprintf(stderr, "usage: module_loads [--launches N] [--ex|--cooperative] [--no-sync] STEP...\n");
		return 2;
	}
	if (!check(cuInit(0), "cuInit") || !check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
	    !check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
	    !check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
		return 1;
	for (; i < argc; i++)
		ok = step(argv[i]) && ok;
	fflush(stdout);
	return ok ? 0 : 1;
}
