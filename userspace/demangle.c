// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* C++ demangling through libiberty (the GNU toolchain's own demangler). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "cuprobe_internal.h"

int cp_demangle(const char *mangled, char *out, size_t out_len)
{
	char *demangled = NULL;
	const char *text;
	size_t len;

	if (!mangled || !out || !out_len)
		return -EINVAL;
	/* Only Itanium-ABI names are handed over; plain C names stay as they are. */
	if (!strncmp(mangled, "_Z", 2))
		demangled = cplus_demangle(mangled, DMGL_PARAMS | DMGL_ANSI);
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
