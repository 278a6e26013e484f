// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Decoding and naming of the records the BPF side writes. */
#include <errno.h>
#include <string.h>

#include "cuprobe.h"

_Static_assert(sizeof(struct cp_event_header) == 24, "header layout");
#define ALIGNED(NAME, value, member, type, name) \
	_Static_assert(sizeof(struct type) % 8 == 0, #member " record alignment");
CP_RECORD_TYPES(ALIGNED)
#undef ALIGNED
/* With CP_EV_TYPE_MAX one past the last line's value, the values are 1, 2, ... in order. */
#define ONE(NAME, value, member, type, name) + 1
_Static_assert(0 CP_RECORD_TYPES(ONE) == CP_EV_TYPE_MAX - 1, "record types numbered from 1, in order");
#undef ONE
_Static_assert(sizeof(struct cp_py_proc) % 8 == 0, "python process alignment");
_Static_assert(CP_API_MAX < 0x10000, "API ids fit the cookie's 16 bits");
_Static_assert(CP_FAMILY_MAX < 0x100, "families fit the cookie's 8 bits");

/* Bytes the kernel writes for each type. */
#define SIZE(NAME, value, member, type, name) [CP_EV_##NAME] = sizeof(struct type),
static const size_t record_sizes[CP_EV_TYPE_MAX] = { CP_RECORD_TYPES(SIZE) };
#undef SIZE

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
	case CP_EV_PROC:
		out->proc.comm[CP_COMM_MAX - 1] = '\0';
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
	case CP_EV_PY_STACK:
		if (out->py_stack.depth > CP_PY_STACK_MAX)
			out->py_stack.depth = CP_PY_STACK_MAX;
		break;
	}
	return 0;
}

uint64_t cp_event__py_stack(const union cp_event *event)
{
	switch (event->hdr.type) {
	case CP_EV_LAUNCH: return event->launch.py_stack;
	case CP_EV_SYNC: return event->sync.py_stack;
	case CP_EV_COPY: return event->copy.py_stack;
	case CP_EV_ALLOC: return event->alloc.py_stack;
	case CP_EV_NCCL: return event->nccl.py_stack;
	default: return 0;
	}
}

/* The name of value in a table of names indexed by value: "unknown" beyond it or where it has none. */
static const char *name_in(const char *const *names, size_t count, unsigned int value)
{
	return value < count && names[value] ? names[value] : "unknown";
}

#define NAME_IN(names, value) name_in((names), sizeof(names) / sizeof((names)[0]), (unsigned int)(value))

#define TYPE_NAME(NAME, value, member, type, name) [CP_EV_##NAME] = name,
static const char *const type_names[CP_EV_TYPE_MAX] = { CP_RECORD_TYPES(TYPE_NAME) };
#undef TYPE_NAME

const char *cp_event_type__name(enum cp_event_type type)
{
	return NAME_IN(type_names, type);
}

/* The API name and family tables, generated from the catalogue. */
#define API_ROW(sym, family, prog, ret, bits) [CP_API_##sym] = { #sym, CP_FAMILY_##family },
#define API_SKIP(sym, family, reason)
#define API_PSEUDO(name) [CP_API_##name] = { #name, CP_FAMILY_NONE },
#define API_TABLE(lib, table, prefix) table(API_ROW, API_SKIP)
static const struct {
	const char *name;
	enum cp_family family;
} api_table[CP_API_MAX] = {
	[CP_API_UNKNOWN] = { "unknown", CP_FAMILY_NONE },
	CP_LIBRARIES(API_TABLE)
	CP_PSEUDO_APIS(API_PSEUDO)
};
#undef API_TABLE
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
	return NAME_IN(family_names, family);
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

#define LIBRARY_NAME(lib, table, prefix) [CP_LIBRARY_##lib] = #lib,
static const char *const library_names[CP_LIBRARY_MAX] = { CP_LIBRARIES(LIBRARY_NAME) };
#undef LIBRARY_NAME

const char *cp_library__name(enum cp_library library)
{
	return NAME_IN(library_names, library);
}

#define NCCL_OP_NAME(NAME, value, name) [CP_NCCL_##NAME] = name,
static const char *const nccl_op_names[CP_NCCL_OP_MAX] = { CP_NCCL_OPS(NCCL_OP_NAME) };
#undef NCCL_OP_NAME

const char *cp_nccl_op__name(enum cp_nccl_op op)
{
	return NAME_IN(nccl_op_names, op);
}

const char *cp_nccl_datatype__name(uint32_t datatype)
{
	static const char *const names[CP_NCCL_DATATYPES] = {
		"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
		"float64", "bfloat16", "float8e4m3", "float8e5m2",
	};

	return NAME_IN(names, datatype);
}

const char *cp_nccl_redop__name(uint32_t redop)
{
	static const char *const names[] = { "sum", "prod", "max", "min", "avg" };

	return redop < sizeof(names) / sizeof(names[0]) ? names[redop] : "custom";
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

	return NAME_IN(names, dir);
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
