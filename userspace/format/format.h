/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The output wing (userspace/format/): what its callers use. Internal to
 * libcuprobe and its command line, like cuprobe_internal.h (which includes
 * this header); nothing here is exported from libcuprobe.so. The formatters
 * never print: they append to a caller's buffer or cp_text.
 */
#ifndef CUPROBE_FORMAT_H
#define CUPROBE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuprobe.h"
#include "escape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A growable string the formatters append to. */
struct cp_text {
	char *data;
	size_t len;
	size_t capacity;
	bool failed;     /* out of memory: data holds what fit */
};
void cp_text__clear(struct cp_text *text);
void cp_text__free(struct cp_text *text);

#ifdef __cplusplus
}
#endif

#endif /* CUPROBE_FORMAT_H */
