/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The fatbins of the objects loaded in this process, for the cubins a
 * runtime hands the driver: cudart 13 registers each object's fatbin, picks
 * the ELF cubin for the device from it and loads that (cuLibraryLoadData),
 * never the fatbin itself. The cubin has no PTX; the fatbin it came from
 * may. Part of the preload library (inject.c).
 *
 * An object's fatbins are its .nv_fatbin section, found through the
 * section headers of its file (the section has no program header or
 * dynamic symbol of its own; nvcc's wrappers that point at it are local
 * symbols) and then read in memory, where the loader mapped it. A cubin is
 * traced back to its fatbin
 *   1. by address: it lies inside an uncompressed ELF entry (cudart passes
 *      a pointer into the section);
 *   2. by bytes: it equals an ELF entry once decompressed (cudart's copy of
 *      a compressed entry), same architecture and size first;
 *   3. by kernels: a fatbin with an ELF entry of the cubin's architecture
 *      holding the same kernels, and PTX defining them all (a cubin that
 *      was changed on its way, or linked from the fatbin's).
 * Nothing here prints; nothing is written to the objects.
 */
#ifndef CUPROBE_DEVICE_LOADED_FATBINS_H
#define CUPROBE_DEVICE_LOADED_FATBINS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fatbin.h"

#ifdef __cplusplus
extern "C" {
#endif

enum cp_cubin_origin {
	CP_CUBIN_BY_ADDRESS = 1,
	CP_CUBIN_BY_BYTES,
	CP_CUBIN_BY_KERNELS,
};

/* Where each object's .nv_fatbin is, read once per object (by its file and load address). */
struct cp_fatbin_section;

struct cp_loaded_fatbins {
	pthread_mutex_t lock;
	struct cp_fatbin_section *sections;
	size_t count, capacity;
};

#define CP_LOADED_FATBINS_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* The fatbin a cubin came from. */
struct cp_cubin_fatbin {
	const unsigned char *fatbin; /* in the object's memory */
	size_t size;                 /* header and entries */
	enum cp_cubin_origin origin;
	char object[256];            /* the object's file ("" for the program itself) */
};

/*
 * The loaded fatbin that holds or held cubin (a parsed CP_IMAGE_ELF). For
 * the third way, kernels: the cubin's entry functions (mangled), and
 * device_arch: what its PTX must suit. 0, -ENOENT when none, -EINVAL,
 * -ENOMEM.
 */
int cp_loaded_fatbins__find(struct cp_loaded_fatbins *loaded, const struct cp_image *cubin,
			    char *const *kernels, size_t kernel_count, unsigned int device_arch,
			    struct cp_cubin_fatbin *out);
/* What the cache holds; the memory it described stays the objects'. */
void cp_loaded_fatbins__release(struct cp_loaded_fatbins *loaded);

/* "by address", "by bytes", "by kernel names". */
const char *cp_cubin_origin__name(enum cp_cubin_origin origin);

#ifdef __cplusplus
}
#endif

#endif
