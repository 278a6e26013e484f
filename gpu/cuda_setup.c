// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_setup.h"
#include "vec_add_ptx.h"

bool cu_ok(CUresult rc, const char *call)
{
	const char *name = NULL;

	if (rc == CUDA_SUCCESS)
		return true;
	if (cuGetErrorName(rc, &name) == CUDA_SUCCESS && name)
		fprintf(stderr, "%s: %s failed: %s\n", program_invocation_short_name, call, name);
	else
		fprintf(stderr, "%s: %s failed: CUresult %d\n", program_invocation_short_name, call,
			(int)rc);
	return false;
}

void cu_check(CUresult rc, const char *call)
{
	if (!cu_ok(rc, call))
		exit(1);
}

CUdevice cu_setup_device(cu_check_fn *check)
{
	CUdevice device = 0;

	check(cuInit(0), "cuInit");
	check(cuDeviceGet(&device, 0), "cuDeviceGet");
	return device;
}

CUcontext cu_setup_primary_context(CUdevice device, bool make_current, cu_check_fn *check)
{
	CUcontext context = NULL;

	check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
	if (make_current)
		check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
	return context;
}

CUfunction cu_setup_vec_add(CUmodule *module, cu_check_fn *check)
{
	CUfunction function = NULL;

	check(cuModuleLoadData(module, vec_add_ptx), "cuModuleLoadData");
	check(cuModuleGetFunction(&function, *module, "vec_add"), "cuModuleGetFunction");
	return function;
}
