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
_Static_assert(sizeof(struct cp_memset_event) % 8 == 0, "memset alignment");
_Static_assert(sizeof(struct cp_event_event) % 8 == 0, "event alignment");
_Static_assert(sizeof(struct cp_module_event) % 8 == 0, "module alignment");
_Static_assert(sizeof(struct cp_vmm_event) % 8 == 0, "vmm alignment");
_Static_assert(sizeof(struct cp_attach_event) % 8 == 0, "attach alignment");
_Static_assert(sizeof(struct cp_context_event) % 8 == 0, "context alignment");
_Static_assert(sizeof(struct cp_return_event) % 8 == 0, "return alignment");
_Static_assert(sizeof(struct cp_xid_event) % 8 == 0, "xid alignment");
_Static_assert(CP_API_MAX < 0x10000, "API ids fit the cookie's 16 bits");
_Static_assert(CP_FAMILY_MAX < 0x100, "families fit the cookie's 8 bits");

/*
 * Bytes the kernel writes for each type. An attach record's kernel part ends
 * where the agent's outcome fields begin.
 */
static const size_t record_sizes[CP_EV_TYPE_MAX] = {
	[CP_EV_LAUNCH] = sizeof(struct cp_launch_event),
	[CP_EV_ALLOC] = sizeof(struct cp_alloc_event),
	[CP_EV_FREE] = sizeof(struct cp_free_event),
	[CP_EV_COPY] = sizeof(struct cp_copy_event),
	[CP_EV_SYNC] = sizeof(struct cp_sync_event),
	[CP_EV_NAME] = sizeof(struct cp_name_event),
	[CP_EV_PROC] = sizeof(struct cp_proc_event),
	[CP_EV_RT_LAUNCH] = sizeof(struct cp_rt_launch_event),
	[CP_EV_MEMSET] = sizeof(struct cp_memset_event),
	[CP_EV_EVENT] = sizeof(struct cp_event_event),
	[CP_EV_MODULE] = sizeof(struct cp_module_event),
	[CP_EV_VMM] = sizeof(struct cp_vmm_event),
	[CP_EV_ATTACH] = sizeof(struct cp_attach_event),
	[CP_EV_CONTEXT] = sizeof(struct cp_context_event),
	[CP_EV_RETURN] = sizeof(struct cp_return_event),
	[CP_EV_XID] = sizeof(struct cp_xid_event),
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
	switch (hdr.type) {
	case CP_EV_NAME:
		out->name.name[CP_NAME_MAX - 1] = '\0';
		out->name.name_len = strnlen(out->name.name, CP_NAME_MAX - 1);
		break;
	case CP_EV_MODULE:
		out->module.path[CP_PATH_MAX - 1] = '\0';
		out->module.path_len = strnlen(out->module.path, CP_PATH_MAX - 1);
		break;
	case CP_EV_ATTACH:
		out->attach.name[CP_FILE_NAME_MAX - 1] = '\0';
		out->attach.path[CP_PATH_MAX - 1] = '\0';
		break;
	case CP_EV_XID:
		out->xid.dev[CP_XID_DEV_MAX - 1] = '\0';
		out->xid.msg[CP_XID_MSG_MAX - 1] = '\0';
		break;
	}
	return 0;
}

static const char *const type_names[CP_EV_TYPE_MAX] = {
	[CP_EV_LAUNCH] = "launch", [CP_EV_ALLOC] = "alloc", [CP_EV_FREE] = "free",
	[CP_EV_COPY] = "copy", [CP_EV_SYNC] = "sync", [CP_EV_NAME] = "name",
	[CP_EV_PROC] = "process", [CP_EV_RT_LAUNCH] = "rt_launch", [CP_EV_MEMSET] = "memset",
	[CP_EV_EVENT] = "event", [CP_EV_MODULE] = "module", [CP_EV_VMM] = "vmm",
	[CP_EV_ATTACH] = "attach", [CP_EV_CONTEXT] = "context", [CP_EV_RETURN] = "return",
	[CP_EV_XID] = "xid",
};

const char *cp_event_type__name(enum cp_event_type type)
{
	if ((unsigned int)type >= CP_EV_TYPE_MAX || !type_names[type])
		return "unknown";
	return type_names[type];
}

/* The API name and family tables, generated from the catalogue. */
#define API_ROW(sym, family, prog, ret, bits) [CP_API_##sym] = { #sym, CP_FAMILY_##family },
#define API_SKIP(sym, family, reason)
#define API_PSEUDO(name) [CP_API_##name] = { #name, CP_FAMILY_NONE },
static const struct {
	const char *name;
	enum cp_family family;
} api_table[CP_API_MAX] = {
	[CP_API_UNKNOWN] = { "unknown", CP_FAMILY_NONE },
	CP_DRIVER_APIS(API_ROW, API_SKIP)
	CP_RUNTIME_APIS(API_ROW, API_SKIP)
	CP_PSEUDO_APIS(API_PSEUDO)
};
#undef API_ROW
#undef API_SKIP
#undef API_PSEUDO

const char *cp_api__name(enum cp_api api)
{
	if ((unsigned int)api >= CP_API_MAX || !api_table[api].name)
		return "unknown";
	return api_table[api].name;
}

enum cp_family cp_api__family(enum cp_api api)
{
	return (unsigned int)api < CP_API_MAX ? api_table[api].family : CP_FAMILY_NONE;
}

enum cp_api cp_api__by_name(const char *name)
{
	unsigned int api;

	for (api = 1; name && api < CP_API_MAX; api++)
		if (api_table[api].name && !strcmp(api_table[api].name, name))
			return (enum cp_api)api;
	return CP_API_UNKNOWN;
}

#define FAMILY_NAME(f, sdk) [CP_FAMILY_##f] = #f,
static const char *const family_names[CP_FAMILY_MAX] = {
	[CP_FAMILY_NONE] = "none",
	CP_FAMILIES(FAMILY_NAME)
};
#undef FAMILY_NAME

const char *cp_family__name(enum cp_family family)
{
	if ((unsigned int)family >= CP_FAMILY_MAX || !family_names[family])
		return "unknown";
	return family_names[family];
}

#define FAMILY_SDK(f, sdk) [CP_FAMILY_##f] = sdk,
static const bool family_sdk[CP_FAMILY_MAX] = { CP_FAMILIES(FAMILY_SDK) };
#undef FAMILY_SDK

bool cp_family__programmable(enum cp_family family)
{
	return (unsigned int)family < CP_FAMILY_MAX && family_sdk[family];
}

enum cp_family cp_family__by_name(const char *name)
{
	unsigned int family;

	for (family = CP_FAMILY_NONE + 1; name && family < CP_FAMILY_MAX; family++)
		if (family_names[family] && !strcmp(family_names[family], name))
			return (enum cp_family)family;
	return CP_FAMILY_NONE;
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
	static const char *const names[CP_COPY_DIR_MAX] = {
		[CP_COPY_DEFAULT] = "default", [CP_COPY_HTOD] = "HtoD", [CP_COPY_DTOH] = "DtoH",
		[CP_COPY_DTOD] = "DtoD", [CP_COPY_HTOH] = "HtoH", [CP_COPY_PEER] = "peer",
		[CP_COPY_HTOA] = "HtoA", [CP_COPY_ATOH] = "AtoH", [CP_COPY_DTOA] = "DtoA",
		[CP_COPY_ATOD] = "AtoD", [CP_COPY_ATOA] = "AtoA", [CP_COPY_BATCH] = "batch",
	};

	if ((unsigned int)dir >= CP_COPY_DIR_MAX || !names[dir])
		return "unknown";
	return names[dir];
}

const char *cp_sync_kind__name(enum cp_sync_kind kind)
{
	switch (kind) {
	case CP_SYNC_CONTEXT: return "context";
	case CP_SYNC_STREAM: return "stream";
	case CP_SYNC_EVENT: return "event";
	case CP_SYNC_QUERY_STREAM: return "stream_query";
	case CP_SYNC_QUERY_EVENT: return "event_query";
	case CP_SYNC_COPY: return "blocking_copy";
	default: return "unknown";
	}
}

const char *cp_event_op__name(enum cp_event_op op)
{
	switch (op) {
	case CP_EVENT_RECORD: return "record";
	case CP_EVENT_WAIT: return "wait";
	case CP_EVENT_RECORD_CONTEXT: return "record_context";
	case CP_EVENT_WAIT_CONTEXT: return "wait_context";
	default: return "unknown";
	}
}

const char *cp_module_op__name(enum cp_module_op op)
{
	switch (op) {
	case CP_MODULE_LOAD: return "module_load";
	case CP_MODULE_UNLOAD: return "module_unload";
	case CP_LIBRARY_LOAD: return "library_load";
	case CP_LIBRARY_UNLOAD: return "library_unload";
	default: return "unknown";
	}
}

const char *cp_vmm_op__name(enum cp_vmm_op op)
{
	switch (op) {
	case CP_VMM_CREATE: return "create";
	case CP_VMM_RELEASE: return "release";
	case CP_VMM_RETAIN: return "retain";
	case CP_VMM_MAP: return "map";
	case CP_VMM_UNMAP: return "unmap";
	case CP_VMM_RESERVE: return "reserve";
	case CP_VMM_ADDRESS_FREE: return "address_free";
	default: return "unknown";
	}
}

const char *cp_context_op__name(enum cp_context_op op)
{
	switch (op) {
	case CP_CONTEXT_RETAIN: return "retain_primary";
	case CP_CONTEXT_CREATE: return "create";
	case CP_CONTEXT_DESTROY: return "destroy";
	case CP_CONTEXT_SET: return "set_current";
	case CP_CONTEXT_PUSH: return "push";
	case CP_CONTEXT_POP: return "pop";
	default: return "unknown";
	}
}

const char *cp_attach_status__name(enum cp_attach_status status)
{
	switch (status) {
	case CP_ATTACH_PENDING: return "pending";
	case CP_ATTACH_ATTACHED: return "attached";
	case CP_ATTACH_COVERED: return "covered";
	case CP_ATTACH_NOTHING: return "nothing_to_probe";
	case CP_ATTACH_FAILED: return "failed";
	default: return "unknown";
	}
}
