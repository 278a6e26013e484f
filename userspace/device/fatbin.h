/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CUDA module images, as cuModuleLoadData and its siblings receive them:
 * PTX text, a fatbin (several PTX and ELF entries, each for one
 * architecture, maybe compressed), the wrapper cudart registers (pointing at
 * a fatbin), or an ELF cubin. Parsed to list what is inside and to find the
 * PTX a device can JIT. Nothing here prints or exits.
 *
 * The fatbin layout is NVIDIA's, undocumented; what this file reads was
 * checked against nvcc 13.0's output (compressed with LZ4 by
 * --compress-mode=speed, with ZSTD by default, size and balance):
 *
 *   header (16 bytes): u32 magic 0xba55ed50, u16 version 1, u16 header
 *     size (where the first entry starts), u64 size of the entries after it.
 *   entry: u16 kind (1 PTX, 2 ELF), u16 version 0x101, u32 header size
 *     (64, 80 or 112: newer toolkits extend it), u64 payload size as stored
 *     (padded to 8), u32 compressed size (0: not compressed), u32, u16 code
 *     minor, u16 code major, u32 architecture (90: sm_90 / compute_90),
 *     u32 name offset, u32 name size, u64 flags, u64, u64 uncompressed size.
 *     The payload follows the entry header; the next entry follows the
 *     payload.
 */
#ifndef CUPROBE_DEVICE_FATBIN_H
#define CUPROBE_DEVICE_FATBIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CP_FATBIN_MAGIC 0xba55ed50u
#define CP_FATBIN_WRAPPER_MAGIC 0x466243b1u

enum cp_image_kind {
	CP_IMAGE_UNKNOWN,
	CP_IMAGE_PTX,
	CP_IMAGE_FATBIN,
	CP_IMAGE_FATBIN_WRAPPER,
	CP_IMAGE_ELF,
};

enum cp_fatbin_entry_kind {
	CP_FATBIN_ENTRY_PTX = 1,
	CP_FATBIN_ENTRY_ELF = 2,
};

/* Entry flags, as far as they are known. */
#define CP_FATBIN_FLAG_64BIT 0x1ull
#define CP_FATBIN_FLAG_DEBUG 0x2ull
#define CP_FATBIN_FLAG_LINUX 0x10ull
#define CP_FATBIN_FLAG_LZ4 0x2000ull
#define CP_FATBIN_FLAG_ZSTD 0x8000ull
#define CP_FATBIN_FLAG_ARCH_SPECIFIC 0x100000ull /* sm_90a: that architecture only */
#define CP_FATBIN_FLAG_FAMILY 0x200000ull        /* sm_100f: that family */

/* Decompressed payloads larger than this are refused (a corrupt header, not a module). */
#define CP_FATBIN_MAX_PAYLOAD (1ull << 30)

struct cp_fatbin_entry {
	unsigned int kind;            /* enum cp_fatbin_entry_kind, or what was found */
	unsigned int arch;            /* 90 for sm_90 / compute_90 */
	uint64_t flags;               /* CP_FATBIN_FLAG_* */
	const unsigned char *payload; /* as stored: compressed when the flags say so */
	size_t payload_size;
	size_t uncompressed_size;     /* compressed entries: the size after decompression */
};

struct cp_image {
	enum cp_image_kind kind;
	const unsigned char *data; /* the image; for a wrapper, the fatbin it points at */
	size_t size;               /* its bytes (PTX: with the terminating NUL) */
	unsigned int elf_arch;     /* CP_IMAGE_ELF: the cubin's architecture */
	struct cp_fatbin_entry *entries;
	size_t entry_count;
};

/*
 * What image is, and for a fatbin its entries. bound: how many bytes at
 * image may be read (SIZE_MAX for an image a driver call was handed, whose
 * size only its own headers give). 0, or a negative errno with one line in
 * error: -ENOEXEC when the image is no kind known here, -EINVAL when its
 * headers do not fit in bound or contradict each other, -ENOMEM.
 */
int cp_image__parse(const void *image, size_t bound, struct cp_image *out, char *error,
		    size_t error_size);
void cp_image__release(struct cp_image *image);

/* "PTX", "ELF", or "kind N". */
const char *cp_fatbin_entry__kind_name(unsigned int kind);

/*
 * An entry's payload, decompressed (LZ4 or ZSTD as its flags say), in a new
 * buffer with one NUL byte after its size (PTX text without its padding
 * NULs). The caller frees *out. 0, -ENOTSUP (an unknown compression),
 * -EINVAL (corrupt), -EFBIG or -ENOMEM.
 */
int cp_fatbin_entry__payload(const struct cp_fatbin_entry *entry, unsigned char **out,
			     size_t *out_size);

/*
 * The PTX of image that a device of compute capability device_arch (90 for
 * 9.0) can JIT: the image's own text, or the fatbin's PTX entry of the
 * highest architecture <= device_arch (sm_XYa entries only for XY itself,
 * sm_XYf only within the family). A new NUL-terminated buffer the caller
 * frees, its length (without the NUL) and the PTX's architecture.
 * -ENOENT when there is none (an ELF cubin, a fatbin of SASS only).
 */
int cp_image__ptx_for(const struct cp_image *image, unsigned int device_arch, char **ptx,
		      size_t *len, unsigned int *ptx_arch);

/*
 * The kernels (entry functions) of the image's ELF code: a cubin's, or
 * those of a fatbin's ELF entries for the highest architecture <= arch
 * (every entry when none is; arch 0: every entry), each name once: the
 * architectures of one fatbin hold the same kernels, and decompressing one
 * is enough. For saying which kernels had no PTX. A malloc'd array of
 * malloc'd names (cp_image__free_names); 0 or a negative errno.
 */
int cp_image__elf_kernels(const struct cp_image *image, unsigned int arch, char ***names,
			  size_t *count);
void cp_image__free_names(char **names, size_t count);

#ifdef __cplusplus
}
#endif

#endif
