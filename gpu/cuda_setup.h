/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUDA setup the driver-API workloads share: a failed call said the one
 * way tests grep for ("PROGRAM: CALL failed: CUDA_ERROR_..."), cuInit and
 * device 0, its primary context, vec_add loaded from its PTX.
 */
#ifndef CUPROBE_GPU_CUDA_SETUP_H
#define CUPROBE_GPU_CUDA_SETUP_H

#include <stdbool.h>

#include <cuda.h>

/* How a workload checks a call that must succeed (cu_check, or its own counting one). */
typedef void cu_check_fn(CUresult rc, const char *call);

/* Says a failed call on stderr, named by the program: false when rc is an error. */
bool cu_ok(CUresult rc, const char *call);
/* For calls that must succeed: a failure is said and ends the process (exit status 1). */
void cu_check(CUresult rc, const char *call);

/* cuInit, then device 0. */
CUdevice cu_setup_device(cu_check_fn *check);
/* The device's primary context, retained; made current when asked. */
CUcontext cu_setup_primary_context(CUdevice device, bool make_current, cu_check_fn *check);
/* vec_add (gpu/vec_add_ptx.h) loaded in the current context: its function; *module set. */
CUfunction cu_setup_vec_add(CUmodule *module, cu_check_fn *check);

#endif
