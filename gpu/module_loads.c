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
 *   --launches N   vec_add launches per step that has it (default 2)
 *   --ex           launch with cuLaunchKernelEx
 *   --cooperative  launch with cuLaunchCooperativeKernel
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
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static bool use_ex, use_cooperative;

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

/* The driver's entry points as cudart finds them: dlsym, then cuGetProcAddress. */
static bool resolve(struct driver *d)
{
	__typeof__(cuGetProcAddress_v2) *get_proc;
	void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (!libcuda)
		return false;
	get_proc = (__typeof__(cuGetProcAddress_v2) *)dlsym(libcuda, "cuGetProcAddress_v2");
	return get_proc &&
	       check(get_proc("cuModuleLoadData", (void **)&d->module_load_data, CUDA_VERSION, 0, NULL),
		     "cuGetProcAddress") &&
	       check(get_proc("cuModuleGetFunction", (void **)&d->module_get_function, CUDA_VERSION, 0,
			      NULL), "cuGetProcAddress") &&
	       check(get_proc("cuLaunchKernel", (void **)&d->launch_kernel, CUDA_VERSION, 0, NULL),
		     "cuGetProcAddress");
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
	    strncmp(arg, "linkfile=", 9) && !(file = read_file(path, &size)))
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
	} else if (!strcmp(arg, "proc")) {
		struct driver resolved;

		ok = resolve(&resolved) &&
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
		} else if (!strcmp(argv[i], "--launches") && i + 1 < argc) {
			launches = strtol(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "usage: module_loads [--launches N] [--ex|--cooperative] STEP...\n");
			return 2;
		}
	}
	if (i == argc) {
		fprintf(stderr, "usage: module_loads [--launches N] [--ex] STEP...\n");
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
