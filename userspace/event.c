// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Decoding and naming of the records the BPF side writes. */
#include <errno.h>
#include <string.h>

#include "cuprobe.h"

_Static_assert(sizeof(struct cp_event_header) == 24, "header layout");
_Static_assert(sizeof(struct cp_launch_event) % 8 == 0, "launch alignment");
_Static_assert(sizeof(struct cp_alloc_event) % 8 == 0, "alloc alignment");
_Static_assert(sizeof(struct cp_free_event) % 8 == 0, "free alignment");
_Static_assert(sizeof(struct cp_copy_event) % 8 == 0, "copy alignment");
_Static_assert(sizeof(struct cp_sync_event) % 8 == 0, "sync alignment");
_Static_assert(sizeof(struct cp_name_event) % 8 == 0, "name alignment");
_Static_assert(sizeof(struct cp_proc_event) % 8 == 0, "proc alignment");
_Static_assert(sizeof(struct cp_rt_launch_event) % 8 == 0, "rt launch alignment");

static const size_t record_sizes[CP_EV_TYPE_MAX] = {
	[CP_EV_LAUNCH] = sizeof(struct cp_launch_event),
	[CP_EV_ALLOC] = sizeof(struct cp_alloc_event),
	[CP_EV_FREE] = sizeof(struct cp_free_event),
	[CP_EV_COPY] = sizeof(struct cp_copy_event),
	[CP_EV_SYNC] = sizeof(struct cp_sync_event),
	[CP_EV_NAME] = sizeof(struct cp_name_event),
	[CP_EV_PROC] = sizeof(struct cp_proc_event),
	[CP_EV_RT_LAUNCH] = sizeof(struct cp_rt_launch_event),
};

int cp_event__decode(const void *data, size_t size, union cp_event *out)
{
	struct cp_event_header hdr;
	size_t need;

	if (!data || !out || size < sizeof(hdr))
		return -EPROTO;
	memcpy(&hdr, data, sizeof(hdr));
	if (hdr.type == 0 || hdr.type >= CP_EV_TYPE_MAX || hdr.api >= CP_API_MAX)
		return -EPROTO;
	need = record_sizes[hdr.type];
	if (size < need)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	memcpy(out, data, need);
	if (hdr.type == CP_EV_NAME) {
		struct cp_name_event *name = &out->name;

		name->name[CP_NAME_MAX - 1] = '\0';
		name->name_len = strnlen(name->name, CP_NAME_MAX - 1);
	}
	return 0;
}

const char *cp_event_type__name(enum cp_event_type type)
{
	switch (type) {
	case CP_EV_LAUNCH: return "launch";
	case CP_EV_ALLOC: return "alloc";
	case CP_EV_FREE: return "free";
	case CP_EV_COPY: return "copy";
	case CP_EV_SYNC: return "sync";
	case CP_EV_NAME: return "name";
	case CP_EV_PROC: return "process";
	case CP_EV_RT_LAUNCH: return "rt_launch";
	default: return "unknown";
	}
}

#define API_NAME(n) [CP_API_##n] = #n
static const char *const api_names[CP_API_MAX] = {
	[CP_API_UNKNOWN] = "unknown",
	API_NAME(cuLaunchKernel), API_NAME(cuLaunchKernel_ptsz),
	API_NAME(cuLaunchKernelEx), API_NAME(cuLaunchKernelEx_ptsz),
	API_NAME(cuLaunchCooperativeKernel), API_NAME(cuLaunchCooperativeKernel_ptsz),
	API_NAME(cuGraphLaunch), API_NAME(cuGraphLaunch_ptsz),
	API_NAME(cuMemAlloc_v2), API_NAME(cuMemAllocManaged), API_NAME(cuMemAllocPitch_v2),
	API_NAME(cuMemAllocAsync), API_NAME(cuMemAllocAsync_ptsz),
	API_NAME(cuMemAllocHost_v2), API_NAME(cuMemHostAlloc),
	API_NAME(cuMemFree_v2), API_NAME(cuMemFreeAsync), API_NAME(cuMemFreeAsync_ptsz),
	API_NAME(cuMemFreeHost),
	API_NAME(cuMemcpy), API_NAME(cuMemcpy_ptds),
	API_NAME(cuMemcpyAsync), API_NAME(cuMemcpyAsync_ptsz),
	API_NAME(cuMemcpyHtoD_v2), API_NAME(cuMemcpyHtoD_v2_ptds),
	API_NAME(cuMemcpyDtoH_v2), API_NAME(cuMemcpyDtoH_v2_ptds),
	API_NAME(cuMemcpyDtoD_v2), API_NAME(cuMemcpyDtoD_v2_ptds),
	API_NAME(cuMemcpyHtoDAsync_v2), API_NAME(cuMemcpyHtoDAsync_v2_ptsz),
	API_NAME(cuMemcpyDtoHAsync_v2), API_NAME(cuMemcpyDtoHAsync_v2_ptsz),
	API_NAME(cuMemcpyDtoDAsync_v2), API_NAME(cuMemcpyDtoDAsync_v2_ptsz),
	API_NAME(cuCtxSynchronize), API_NAME(cuStreamSynchronize),
	API_NAME(cuStreamSynchronize_ptsz), API_NAME(cuEventSynchronize),
	API_NAME(cuModuleGetFunction), API_NAME(cuLibraryGetKernel), API_NAME(cuKernelGetFunction),
	API_NAME(cuInit), API_NAME(cudaLaunchKernel),
	API_NAME(sched_process_fork), API_NAME(sched_process_exit),
};

const char *cp_api__name(enum cp_api api)
{
	if ((unsigned int)api >= CP_API_MAX || !api_names[api])
		return "unknown";
	return api_names[api];
}

const char *cp_mem_kind__name(enum cp_mem_kind kind)
{
	switch (kind) {
	case CP_MEM_DEVICE: return "device";
	case CP_MEM_MANAGED: return "managed";
	case CP_MEM_HOST: return "host";
	case CP_MEM_DEVICE_ASYNC: return "device_async";
	default: return "unknown";
	}
}

const char *cp_copy_dir__name(enum cp_copy_dir dir)
{
	switch (dir) {
	case CP_COPY_DEFAULT: return "default";
	case CP_COPY_HTOD: return "HtoD";
	case CP_COPY_DTOH: return "DtoH";
	case CP_COPY_DTOD: return "DtoD";
	default: return "unknown";
	}
}

const char *cp_sync_kind__name(enum cp_sync_kind kind)
{
	switch (kind) {
	case CP_SYNC_CONTEXT: return "context";
	case CP_SYNC_STREAM: return "stream";
	case CP_SYNC_EVENT: return "event";
	default: return "unknown";
	}
}
