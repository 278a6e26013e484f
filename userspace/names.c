// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The name table: (pid, handle) -> kernel name. Names come from the naming
 * probes (cuModuleGetFunction, cuLibraryGetKernel, cuKernelGetFunction) and,
 * for handles created before cuprobe attached, from cudaLaunchKernel's host
 * stub paired with the next launch on the same thread. A launch whose handle
 * has no name is counted, never guessed.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "cuprobe_internal.h"
#include "format/escape.h"

/* KEY_*_UNRESOLVED remember a failed look-up, so it is not repeated per launch. */
enum key_kind { KEY_HANDLE = 0, KEY_STUB = 1, KEY_STUB_UNRESOLVED = 2, KEY_DRIVER_UNRESOLVED = 3 };

/* Where the driver's CUkernel record keeps its name pointer (driver 580). */
#define DRIVER_KERNEL_NAME_OFFSET 8

struct name_node {
	struct name_node *next;
	uint32_t pid;
	uint32_t kind;
	uint64_t handle;
	struct cp_name_entry entry;
	struct cp_name_forms forms;
	char *strings; /* one block: mangled, display and the forms */
};

/* The stub a thread passed to cudaLaunchKernel, waiting for its driver launch. */
struct pending_stub {
	uint32_t pid;
	uint32_t tid;
	uint64_t stub;
};

#define PENDING_SLOTS 1024

struct cp_names {
	struct name_node **buckets;
	size_t bucket_count;
	size_t count;
	struct cp_symbolizer *symbolizer;
	struct pending_stub pending[PENDING_SLOTS];
	struct cp_names_stats stats;
	bool driver_records;       /* read names from CUkernel records (and still trust them) */
};

static size_t hash_key(uint32_t pid, uint32_t kind, uint64_t handle)
{
	uint64_t h = handle ^ ((uint64_t)pid << 32) ^ kind;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h;
}

struct cp_names *cp_names__new(struct cp_symbolizer *symbolizer)
{
	struct cp_names *names = calloc(1, sizeof(*names));

	if (!names)
		return NULL;
	names->bucket_count = 256;
	names->buckets = calloc(names->bucket_count, sizeof(*names->buckets));
	if (!names->buckets) {
		free(names);
		return NULL;
	}
	names->symbolizer = symbolizer;
	return names;
}

static void free_node(struct name_node *node)
{
	free(node->strings);
	free(node);
}

const struct cp_name_forms *cp_names__forms(const struct cp_name_entry *entry)
{
	return &((const struct name_node *)((const char *)entry - offsetof(struct name_node, entry)))->forms;
}

/* Appends text (len bytes and a NUL) at *at; returns where it starts. */
static const char *take(char **at, const char *text, size_t len)
{
	char *start = *at;

	memcpy(start, text, len);
	start[len] = '\0';
	*at += len + 1;
	return start;
}

/* A JSON string of text, quotes included, into buf (6 bytes per byte in, and 3): its length. */
static size_t json_form(const char *text, char *buf, size_t len)
{
	int n;

	buf[0] = '"';
	n = cp_json__escape(text, buf + 1, len - 2);
	if (n < 0)
		n = 0;
	buf[n + 1] = '"';
	buf[n + 2] = '\0';
	return (size_t)n + 2;
}

/* Fills node's names and their forms from mangled, in one allocation. */
static int fill_names(struct name_node *node, const char *mangled)
{
	char display[1024];
	size_t mangled_len = strlen(mangled), display_len, room, json_room;
	char *json, *text, *strings, *at;
	int err = -ENOMEM;

	cp_demangle(mangled, display, sizeof(display));
	display_len = strlen(display);
	json_room = (mangled_len > display_len ? mangled_len : display_len) * 6 + 3;
	json = malloc(json_room);
	text = malloc(display_len * 4 + 1);
	if (!json || !text)
		goto out;
	node->forms.text_display_len = (size_t)cp_text__escape(display, text, display_len * 4 + 1);
	room = mangled_len + display_len + node->forms.text_display_len + 3 + 2 * json_room;
	strings = at = malloc(room);
	if (!strings)
		goto out;
	free(node->strings);
	node->strings = strings;
	node->entry.mangled = take(&at, mangled, mangled_len);
	node->entry.display = take(&at, display, display_len);
	node->forms.text_display = take(&at, text, node->forms.text_display_len);
	node->forms.json_display_len = json_form(display, json, json_room);
	node->forms.json_display = take(&at, json, node->forms.json_display_len);
	node->forms.json_mangled_len = json_form(mangled, json, json_room);
	node->forms.json_mangled = take(&at, json, node->forms.json_mangled_len);
	err = 0;
out:
	free(json);
	free(text);
	return err;
}

void cp_names__free(struct cp_names *names)
{
	size_t i;

	if (!names)
		return;
	for (i = 0; i < names->bucket_count; i++) {
		struct name_node *node = names->buckets[i], *next;

		for (; node; node = next) {
			next = node->next;
			free_node(node);
		}
	}
	free(names->buckets);
	free(names);
}

static struct name_node *find(const struct cp_names *names, uint32_t pid, uint32_t kind,
			      uint64_t handle)
{
	struct name_node *node = names->buckets[hash_key(pid, kind, handle) % names->bucket_count];

	for (; node; node = node->next)
		if (node->pid == pid && node->kind == kind && node->handle == handle)
			return node;
	return NULL;
}

static void grow(struct cp_names *names)
{
	size_t count = names->bucket_count * 2, i;
	struct name_node **buckets = calloc(count, sizeof(*buckets));

	if (!buckets)
		return; /* longer chains, still correct */
	for (i = 0; i < names->bucket_count; i++) {
		struct name_node *node = names->buckets[i], *next;

		for (; node; node = next) {
			size_t slot = hash_key(node->pid, node->kind, node->handle) % count;

			next = node->next;
			node->next = buckets[slot];
			buckets[slot] = node;
		}
	}
	free(names->buckets);
	names->buckets = buckets;
	names->bucket_count = count;
}

static int set_name_from(struct cp_names *names, uint32_t pid, uint32_t kind, uint64_t handle,
			 const char *mangled, enum cp_name_source source)
{
	struct name_node *node = find(names, pid, kind, handle);
	size_t slot;

	if (node && !strcmp(node->entry.mangled, mangled))
		return 0;
	if (node) {
		/* A handle value reused for another kernel (module unloaded, reloaded). */
		if (fill_names(node, mangled))
			return -ENOMEM;
		node->entry.source = source;
		return 0;
	}
	node = calloc(1, sizeof(*node));
	if (!node || fill_names(node, mangled)) {
		free(node);
		return -ENOMEM;
	}
	node->pid = pid;
	node->kind = kind;
	node->handle = handle;
	node->entry.source = source;
	if (names->count >= names->bucket_count * 2)
		grow(names);
	slot = hash_key(pid, kind, handle) % names->bucket_count;
	node->next = names->buckets[slot];
	names->buckets[slot] = node;
	names->count++;
	return 0;
}

static int set_name(struct cp_names *names, uint32_t pid, uint32_t kind, uint64_t handle,
		    const char *mangled)
{
	return set_name_from(names, pid, kind, handle, mangled, CP_NAME_FROM_PROBE);
}

const char *cp_name_source__name(enum cp_name_source source)
{
	switch (source) {
	case CP_NAME_FROM_PROBE: return "probe";
	case CP_NAME_FROM_STUB: return "stub";
	case CP_NAME_FROM_DRIVER: return "driver";
	default: return "unknown";
	}
}

void cp_names__read_driver_records(struct cp_names *names, bool enable)
{
	if (names)
		names->driver_records = enable;
}

/* A symbol's shape: an identifier of C/C++ linker names, nothing else. */
static bool looks_like_symbol(const char *text, size_t len)
{
	size_t i;

	if (!len || !(isalpha((unsigned char)text[0]) || text[0] == '_'))
		return false;
	for (i = 0; i < len; i++)
		if (!(isalnum((unsigned char)text[i]) || text[i] == '_' || text[i] == '$' || text[i] == '.'))
			return false;
	return true;
}

/* The name in the driver's record for kernel handle, read from process pid. */
static int read_driver_name(pid_t pid, uint64_t handle, char *out, size_t out_len)
{
	uint64_t name_ptr = 0;
	struct iovec local = { &name_ptr, sizeof(name_ptr) };
	struct iovec remote = { (void *)(uintptr_t)(handle + DRIVER_KERNEL_NAME_OFFSET), sizeof(name_ptr) };
	size_t got = 0;

	if (!handle || process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof(name_ptr) ||
	    name_ptr < 4096)
		return -ENOENT;
	/* In pieces: the string may end just before an unmapped page. */
	while (got + 1 < out_len) {
		size_t want = out_len - 1 - got < 64 ? out_len - 1 - got : 64;
		ssize_t n;

		local = (struct iovec){ out + got, want };
		remote = (struct iovec){ (void *)(uintptr_t)(name_ptr + got), want };
		n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		if (n <= 0)
			break;
		if (memchr(out + got, '\0', (size_t)n)) {
			got += strnlen(out + got, (size_t)n);
			out[got] = '\0';
			return looks_like_symbol(out, got) ? 0 : -EINVAL;
		}
		got += (size_t)n;
	}
	return -ENOENT;
}

/* Names handle from the driver's record, once; a failure is remembered. */
static const struct cp_name_entry *name_from_driver(struct cp_names *names, uint32_t pid,
						    uint64_t handle)
{
	char name[CP_NAME_MAX];

	if (!names->driver_records || find(names, pid, KEY_DRIVER_UNRESOLVED, handle))
		return NULL;
	if (read_driver_name((pid_t)pid, handle, name, sizeof(name)) ||
	    set_name_from(names, pid, KEY_HANDLE, handle, name, CP_NAME_FROM_DRIVER)) {
		set_name(names, pid, KEY_DRIVER_UNRESOLVED, handle, "?");
		return NULL;
	}
	names->stats.driver_named++;
	return cp_names__lookup(names, pid, handle);
}

/* A driver record's name against a probe's, for the same handle: one disagreement, no more reading. */
static void compare_driver_name(struct cp_names *names, const char *driver_name,
				const char *probe_name)
{
	names->stats.driver_checked++;
	if (strcmp(driver_name, probe_name)) {
		names->stats.driver_mismatches++;
		names->driver_records = false; /* the layout is not what was measured: stop */
	}
}

/* A probe named a CUkernel: does the driver's record say the same? */
static void check_driver_record(struct cp_names *names, uint32_t pid, uint64_t handle,
				const char *probe_name)
{
	char name[CP_NAME_MAX];

	if (!names->driver_records || read_driver_name((pid_t)pid, handle, name, sizeof(name)))
		return;
	compare_driver_name(names, name, probe_name);
}

bool cp_name_event__from_driver_record(const struct cp_name_event *event)
{
	return cp_api__family(event->hdr.api) == CP_FAMILY_launch;
}

/*
 * The launch probe read the handle's driver record at its first launch
 * (cp_tracer_opts.name_late_handles): a name where no probe gave one, a
 * check where one did. An empty or odd one leaves the handle to
 * name_from_driver.
 */
static void observe_driver_record(struct cp_names *names, const struct cp_name_event *event)
{
	const struct cp_name_entry *known = cp_names__lookup(names, event->hdr.pid, event->handle);

	if (!names->driver_records || !event->handle || event->name_len >= CP_NAME_MAX ||
	    !looks_like_symbol(event->name, event->name_len))
		return;
	if (known) {
		if (known->source == CP_NAME_FROM_PROBE)
			compare_driver_name(names, event->name, known->mangled);
		return;
	}
	if (!set_name_from(names, event->hdr.pid, KEY_HANDLE, event->handle, event->name,
			   CP_NAME_FROM_DRIVER))
		names->stats.driver_named++;
}

int cp_names__set(struct cp_names *names, uint32_t pid, uint64_t handle, const char *mangled)
{
	if (!names || !mangled || !*mangled)
		return -EINVAL;
	return set_name(names, pid, KEY_HANDLE, handle, mangled);
}

const struct cp_name_entry *cp_names__lookup(const struct cp_names *names, uint32_t pid,
					     uint64_t handle)
{
	struct name_node *node = names ? find(names, pid, KEY_HANDLE, handle) : NULL;

	return node ? &node->entry : NULL;
}

const struct cp_name_entry *cp_names__resolve(struct cp_names *names, uint32_t pid, uint64_t handle)
{
	const struct cp_name_entry *name = cp_names__lookup(names, pid, handle);

	return name || !names ? name : name_from_driver(names, pid, handle);
}

const struct cp_name_entry *cp_names__lookup_stub(const struct cp_names *names, uint32_t pid,
						  uint64_t stub)
{
	struct name_node *node = names ? find(names, pid, KEY_STUB, stub) : NULL;

	return node ? &node->entry : NULL;
}

void cp_names__forget_pid(struct cp_names *names, uint32_t pid)
{
	size_t i;

	if (!names)
		return;
	for (i = 0; i < names->bucket_count; i++) {
		struct name_node **link = &names->buckets[i];

		while (*link) {
			struct name_node *node = *link;

			if (node->pid != pid) {
				link = &node->next;
				continue;
			}
			*link = node->next;
			free_node(node);
			names->count--;
		}
	}
	for (i = 0; i < PENDING_SLOTS; i++)
		if (names->pending[i].pid == pid)
			memset(&names->pending[i], 0, sizeof(names->pending[i]));
}

size_t cp_names__count(const struct cp_names *names)
{
	return names ? names->count : 0;
}

void cp_names__stats(const struct cp_names *names, struct cp_names_stats *out)
{
	if (!out)
		return;
	if (!names) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = names->stats;
}

static void observe_name(struct cp_names *names, const struct cp_name_event *event)
{
	const struct cp_name_entry *target;

	if (event->result != 0 || !event->handle)
		return;
	if (cp_name_event__from_driver_record(event)) {
		observe_driver_record(names, event);
		return;
	}
	if (event->hdr.api == CP_API_cuKernelGetFunction) {
		/* cuBLAS asks again for every GEMM: an alias already known is done with. */
		const struct cp_name_entry *known = cp_names__lookup(names, event->hdr.pid, event->handle);

		target = cp_names__lookup(names, event->hdr.pid, event->alias_of);
		if (known && target && !strcmp(known->mangled, target->mangled))
			return;
		/* A CUkernel from before the attach: its record may still say its name. */
		if (!target)
			target = name_from_driver(names, event->hdr.pid, event->alias_of);
		if (target && !set_name_from(names, event->hdr.pid, KEY_HANDLE, event->handle,
					     target->mangled, target->source))
			names->stats.names_learned++;
		/* A CUfunction's record too must agree, or it is never read again. */
		if (target && target->source == CP_NAME_FROM_PROBE)
			check_driver_record(names, event->hdr.pid, event->handle, target->mangled);
		return;
	}
	if (event->name_len && !set_name(names, event->hdr.pid, KEY_HANDLE, event->handle,
					 event->name))
		names->stats.names_learned++;
	if (event->name_len)
		check_driver_record(names, event->hdr.pid, event->handle, event->name);
}

/*
 * The kernel's mangled name inside a device-stub symbol: nvcc names the stub
 * of kernel _Z14vec_add_kernelPKfS0_Pfi "__device_stub__Z14vec_add_kernelPKfS0_Pfi",
 * itself mangled with a length prefix (_Z41__device_stub__Z14...PKfS0_Pfi,
 * or inside _ZN2at6native..._E for a namespace). Only that exact shape is
 * accepted: any other caller of cudaLaunchKernel names nothing.
 */
int cp_kernel_name_from_device_stub(const char *symbol, char *out, size_t out_len)
{
	static const char marker[] = "__device_stub_";
	const char *at = symbol ? strstr(symbol, marker) : NULL;
	const char *digits;
	size_t length = 0, scale = 1, kernel_len;

	if (!at || !out || !out_len)
		return -ENOENT;
	/* The identifier's length is the decimal number right before it. */
	for (digits = at; digits > symbol && digits[-1] >= '0' && digits[-1] <= '9'; digits--) {
		length += (size_t)(digits[-1] - '0') * scale;
		scale *= 10;
	}
	if (digits == at || length <= sizeof(marker) - 1 || strlen(at) < length)
		return -ENOENT;
	kernel_len = length - (sizeof(marker) - 1);
	if (strncmp(at + sizeof(marker) - 1, "_Z", 2) || kernel_len >= out_len)
		return -ENOENT;
	memcpy(out, at + sizeof(marker) - 1, kernel_len);
	out[kernel_len] = '\0';
	return 0;
}

static void observe_rt_launch(struct cp_names *names, const struct cp_rt_launch_event *event)
{
	struct pending_stub *slot = &names->pending[event->hdr.tid % PENDING_SLOTS];
	char symbol[CP_NAME_MAX * 2];

	if (!cp_names__lookup_stub(names, event->hdr.pid, event->stub) &&
	    !find(names, event->hdr.pid, KEY_STUB_UNRESOLVED, event->stub)) {
		char caller_symbol[CP_NAME_MAX * 2];
		bool named = false;

		/* The stub's own symbol (the host function is named after the kernel)... */
		if (names->symbolizer && !(event->flags & CP_RT_NO_VMA) &&
		    !cp_symbolizer__resolve(names->symbolizer, event->hdr.pid, event->dev,
					    event->inode, event->file_offset, symbol, sizeof(symbol)))
			named = true;
		/* ...or, when func is a cudaKernel_t handle, the device stub that called. */
		if (!named && names->symbolizer && !(event->flags & CP_RT_CALLER_NO_VMA) &&
		    !cp_symbolizer__resolve(names->symbolizer, event->hdr.pid, event->caller_dev,
					    event->caller_inode, event->caller_file_offset,
					    caller_symbol, sizeof(caller_symbol)) &&
		    !cp_kernel_name_from_device_stub(caller_symbol, symbol, sizeof(symbol)))
			named = true;
		if (named && !set_name(names, event->hdr.pid, KEY_STUB, event->stub, symbol)) {
			names->stats.stubs_resolved++;
		} else {
			names->stats.stubs_unresolved++;
			set_name(names, event->hdr.pid, KEY_STUB_UNRESOLVED, event->stub, "?");
		}
	}
	slot->pid = event->hdr.pid;
	slot->tid = event->hdr.tid;
	slot->stub = event->stub;
}

static void observe_launch(struct cp_names *names, const struct cp_launch_event *event)
{
	struct pending_stub *slot = &names->pending[event->hdr.tid % PENDING_SLOTS];
	const struct cp_name_entry *stub_name;
	bool paired = slot->pid == event->hdr.pid && slot->tid == event->hdr.tid && slot->stub;

	if (event->flags & (CP_LAUNCH_GRAPH | CP_LAUNCH_HOST_FUNC))
		return; /* a graph or a host function: no kernel to name */
	names->stats.launches++;
	if (paired) {
		/* The runtime call that led to this driver launch, on this same thread. */
		stub_name = cp_names__lookup_stub(names, event->hdr.pid, slot->stub);
		if (stub_name && !cp_names__lookup(names, event->hdr.pid, event->function))
			set_name_from(names, event->hdr.pid, KEY_HANDLE, event->function,
				      stub_name->mangled, CP_NAME_FROM_STUB);
		memset(slot, 0, sizeof(*slot));
	}
	/* cudart passes the CUkernel itself as the CUfunction (lazy loading). */
	if (!cp_names__resolve(names, event->hdr.pid, event->function))
		names->stats.launches_unnamed++;
}

void cp_names__observe(struct cp_names *names, const union cp_event *event)
{
	if (!names || !event)
		return;
	switch (event->hdr.type) {
	case CP_EV_NAME:
		observe_name(names, &event->name);
		break;
	case CP_EV_RT_LAUNCH:
		observe_rt_launch(names, &event->rt_launch);
		break;
	case CP_EV_LAUNCH:
		observe_launch(names, &event->launch);
		break;
	default:
		break;
	}
}
