// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* C++ demangling through libiberty (the GNU toolchain's own demangler). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "cuprobe_internal.h"

/*
 * nvcc names a kernel of internal linkage (static, or in an anonymous
 * namespace) "__nv_static_<N>__<N characters of the file's tag>" followed by
 * its Itanium name: NCCL's oneRankReduce kernels are such. The name after
 * the tag, or NULL.
 */
static const char *nv_static_name(const char *name)
{
	static const char prefix[] = "__nv_static_";
	unsigned long tag_len;
	char *end;

	if (strncmp(name, prefix, sizeof(prefix) - 1) || !isdigit((unsigned char)name[sizeof(prefix) - 1]))
		return NULL;
	tag_len = strtoul(name + sizeof(prefix) - 1, &end, 10);
	if (strncmp(end, "__", 2) || strnlen(end + 2, tag_len) < tag_len)
		return NULL;
	end += 2 + tag_len;
	return !strncmp(end, "_Z", 2) ? end : NULL;
}

int cp_demangle(const char *mangled, char *out, size_t out_len)
{
	char *demangled = NULL;
	const char *text, *itanium;
	size_t len;

	if (!mangled || !out || !out_len)
		return -EINVAL;
	itanium = nv_static_name(mangled);
	if (!itanium)
		itanium = mangled;
	/* Only Itanium-ABI names are handed over; plain C names stay as they are. */
	if (!strncmp(itanium, "_Z", 2))
		demangled = cplus_demangle(itanium, DMGL_PARAMS | DMGL_ANSI);
	text = demangled ? demangled : mangled;
	len = strlen(text);
	if (len >= out_len) {
		memcpy(out, text, out_len - 1);
		out[out_len - 1] = '\0';
	} else {
		memcpy(out, text, len + 1);
	}
	free(demangled);
	return len >= out_len ? -ENOSPC : 0;
}

int cp_demangle_name(const char *mangled, char *out, size_t out_len)
{
	char *demangled = NULL;
	const char *text;
	size_t len;

	if (!mangled || !out || !out_len)
		return -EINVAL;
	/* Without DMGL_PARAMS libiberty leaves out the parameters and a template's return type. */
	if (!strncmp(mangled, "_Z", 2))
		demangled = cplus_demangle(mangled, DMGL_ANSI);
	text = demangled ? demangled : mangled;
	len = strlen(text);
	snprintf(out, out_len, "%s", text);
	free(demangled);
	return len >= out_len ? -ENOSPC : 0;
}
