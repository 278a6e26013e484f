// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Reports to cuprobe, the device, and the maps registered with the driver (inject_internal.h). */
#include "inject_internal.h"


/* ---- reports ---------------------------------------------------------------------- */

void report(enum cp_inject_report_kind kind, const char *api, const char *name,
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

const char *result_name(CUresult rc)
{
	const char *name = NULL;

	if (HELPER(cuGetErrorName, rc, &name) != CUDA_SUCCESS || !name)
		return "an unknown CUresult";
	return name;
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
unsigned int device_arch(void)
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

CUresult ensure_registered(void)
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

