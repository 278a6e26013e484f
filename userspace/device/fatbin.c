// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CUDA module images: PTX, fatbins (and cudart's wrapper around one), ELF
 * cubins. The layout is described in fatbin.h. Every size read from an
 * image is checked against the bound the caller gave and against overflow
 * before anything is read through it.
 *
 * ELF cubins are read with <elf.h>'s structs rather than libelf: this file
 * is also linked into the preload library (libcuprobe_inject.so), and
 * Debian's libelf.a is not position-independent; an image in memory also
 * has no size but the one its own headers give.
 */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <zstd.h>

#include "fatbin.h"
#include "inject_protocol.h"

#define FATBIN_HEADER_SIZE 16u
#define FATBIN_ENTRY_MIN_SIZE 64u
#define FATBIN_ENTRY_MAX_HEADER 4096u
/* A cubin's entry functions carry this in st_other (the CUDA ABI's STO_CUDA_ENTRY). */
#define STO_CUDA_ENTRY 0x10
/* e_ident[EI_OSABI] of cubins from CUDA 12.8 on: the architecture moved up a byte in e_flags. */
#define ELFOSABI_CUDA_V2 0x41

struct fatbin_wrapper {
	uint32_t magic;
	uint32_t version;
	const void *data;
	const void *filename_or_fatbins;
};

static uint16_t u16_at(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t u32_at(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t u64_at(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* a + b <= limit, without overflow. */
static bool fits(uint64_t a, uint64_t b, uint64_t limit)
{
	return a <= limit && b <= limit - a;
}

const char *cp_fatbin_entry__kind_name(unsigned int kind)
{
	static __thread char other[24];

	if (kind == CP_FATBIN_ENTRY_PTX)
		return "PTX";
	if (kind == CP_FATBIN_ENTRY_ELF)
		return "ELF";
	snprintf(other, sizeof(other), "kind %u", kind);
	return other;
}

static int parse_fatbin(const unsigned char *data, size_t bound, struct cp_image *out, char *error,
			size_t error_size)
{
	uint64_t header_size, entries_size, end, at;
	size_t count = 0, capacity = 0;

	if (bound < FATBIN_HEADER_SIZE)
		return cp_device__fail(error, error_size, -EINVAL, "fatbin: shorter than its header");
	if (u16_at(data + 4) != 1)
		return cp_device__fail(error, error_size, -EINVAL, "fatbin: version %u, not 1", u16_at(data + 4));
	header_size = u16_at(data + 6);
	entries_size = u64_at(data + 8);
	if (header_size < FATBIN_HEADER_SIZE || !fits(header_size, entries_size, bound))
		return cp_device__fail(error, error_size, -EINVAL,
			    "fatbin: header says %llu + %llu bytes, more than the image holds",
			    (unsigned long long)header_size, (unsigned long long)entries_size);
	end = header_size + entries_size;
	out->kind = CP_IMAGE_FATBIN;
	out->data = data;
	out->size = end;
	for (at = header_size; at < end;) {
		const unsigned char *e = data + at;
		struct cp_fatbin_entry *entry;
		uint64_t entry_header, stored, compressed;

		if (!fits(at, FATBIN_ENTRY_MIN_SIZE, end))
			return cp_device__fail(error, error_size, -EINVAL, "fatbin: entry %zu cut short", count);
		entry_header = u32_at(e + 4);
		stored = u64_at(e + 8);
		compressed = u32_at(e + 16);
		if (entry_header < FATBIN_ENTRY_MIN_SIZE || entry_header > FATBIN_ENTRY_MAX_HEADER ||
		    !fits(at + entry_header, stored, end))
			return cp_device__fail(error, error_size, -EINVAL,
				    "fatbin: entry %zu: header %llu and payload %llu bytes overrun the fatbin",
				    count, (unsigned long long)entry_header, (unsigned long long)stored);
		if (count == capacity) {
			struct cp_fatbin_entry *grown;

			capacity = capacity ? capacity * 2 : 8;
			grown = realloc(out->entries, capacity * sizeof(*grown));
			if (!grown)
				return cp_device__fail(error, error_size, -ENOMEM, "out of memory");
			out->entries = grown;
		}
		entry = &out->entries[count++];
		memset(entry, 0, sizeof(*entry));
		entry->kind = u16_at(e);
		entry->arch = u32_at(e + 28);
		entry->flags = u64_at(e + 40);
		entry->payload = e + entry_header;
		entry->payload_size = stored;
		if (entry->flags & (CP_FATBIN_FLAG_LZ4 | CP_FATBIN_FLAG_ZSTD)) {
			if (!compressed || compressed > stored)
				return cp_device__fail(error, error_size, -EINVAL,
					    "fatbin: entry %zu: compressed size %llu outside its %llu bytes",
					    count - 1, (unsigned long long)compressed,
					    (unsigned long long)stored);
			entry->payload_size = compressed;
			entry->uncompressed_size = u64_at(e + 56);
		}
		out->entry_count = count;
		at += entry_header + stored;
	}
	return 0;
}

/* The end of the last byte an ELF64 image's headers describe. */
static int elf_extent(const unsigned char *data, size_t bound, size_t *size)
{
	Elf64_Ehdr header;
	uint64_t end, i;

	if (bound < sizeof(header))
		return -EINVAL;
	memcpy(&header, data, sizeof(header));
	if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB)
		return -ENOTSUP;
	end = sizeof(header);
	if (header.e_phnum && (header.e_phentsize != sizeof(Elf64_Phdr) ||
			       !fits(header.e_phoff, (uint64_t)header.e_phnum * sizeof(Elf64_Phdr), bound)))
		return -EINVAL;
	if (header.e_shnum && (header.e_shentsize != sizeof(Elf64_Shdr) ||
			       !fits(header.e_shoff, (uint64_t)header.e_shnum * sizeof(Elf64_Shdr), bound)))
		return -EINVAL;
	if (header.e_phnum && header.e_phoff + header.e_phnum * sizeof(Elf64_Phdr) > end)
		end = header.e_phoff + header.e_phnum * sizeof(Elf64_Phdr);
	if (header.e_shnum && header.e_shoff + header.e_shnum * sizeof(Elf64_Shdr) > end)
		end = header.e_shoff + header.e_shnum * sizeof(Elf64_Shdr);
	for (i = 0; i < header.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, data + header.e_phoff + i * sizeof(ph), sizeof(ph));
		if (!fits(ph.p_offset, ph.p_filesz, bound))
			return -EINVAL;
		if (ph.p_offset + ph.p_filesz > end)
			end = ph.p_offset + ph.p_filesz;
	}
	for (i = 0; i < header.e_shnum; i++) {
		Elf64_Shdr sh;

		memcpy(&sh, data + header.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
			continue;
		if (!fits(sh.sh_offset, sh.sh_size, bound))
			return -EINVAL;
		if (sh.sh_offset + sh.sh_size > end)
			end = sh.sh_offset + sh.sh_size;
	}
	*size = end;
	return 0;
}

static unsigned int elf_arch(const unsigned char *data)
{
	uint32_t flags;

	memcpy(&flags, data + offsetof(Elf64_Ehdr, e_flags), sizeof(flags));
	return data[EI_OSABI] == ELFOSABI_CUDA_V2 ? (flags >> 8) & 0xff : flags & 0xff;
}

int cp_image__parse(const void *image, size_t bound, struct cp_image *out, char *error,
		    size_t error_size)
{
	const unsigned char *data = image;
	int err;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (error && error_size)
		error[0] = '\0';
	if (!image || bound < 4)
		return cp_device__fail(error, error_size, -ENOEXEC, "empty image");
	if (u32_at(data) == CP_FATBIN_WRAPPER_MAGIC) {
		struct fatbin_wrapper wrapper;

		/* Its pointer means something only in the process that handed it to the driver. */
		if (bound != SIZE_MAX)
			return cp_device__fail(error, error_size, -EINVAL,
				    "fatbin wrapper: holds a pointer, so only a driver call's image can be one");
		memcpy(&wrapper, data, sizeof(wrapper));
		if (wrapper.version != 1 && wrapper.version != 2)
			return cp_device__fail(error, error_size, -EINVAL, "fatbin wrapper: version %u, not 1 or 2",
				    wrapper.version);
		/* What it points at lies outside the bound given: only its own header bounds it. */
		if (!wrapper.data || u32_at(wrapper.data) != CP_FATBIN_MAGIC)
			return cp_device__fail(error, error_size, -EINVAL, "fatbin wrapper: does not point at a fatbin");
		err = parse_fatbin(wrapper.data, SIZE_MAX, out, error, error_size);
		if (!err)
			out->kind = CP_IMAGE_FATBIN_WRAPPER;
	} else if (u32_at(data) == CP_FATBIN_MAGIC) {
		err = parse_fatbin(data, bound, out, error, error_size);
	} else if (!memcmp(data, ELFMAG, SELFMAG)) {
		size_t size;

		err = elf_extent(data, bound, &size);
		if (err)
			return cp_device__fail(error, error_size, err, "ELF image: %s",
				    err == -ENOTSUP ? "not 64-bit little-endian" : "headers beyond the image");
		out->kind = CP_IMAGE_ELF;
		out->data = data;
		out->size = size;
		out->elf_arch = elf_arch(data);
		return 0;
	} else {
		/* PTX: text up to its NUL, which must lie within the bound. */
		const unsigned char *nul = memchr(data, '\0', bound == SIZE_MAX ? strlen(image) + 1 : bound);

		if (!nul)
			return cp_device__fail(error, error_size, -ENOEXEC, "not a module image (no NUL-terminated text)");
		out->kind = CP_IMAGE_PTX;
		out->data = data;
		out->size = (size_t)(nul - data) + 1;
		return 0;
	}
	if (err) {
		cp_image__release(out);
		memset(out, 0, sizeof(*out));
	}
	return err;
}

void cp_image__release(struct cp_image *image)
{
	if (!image)
		return;
	free(image->entries);
	image->entries = NULL;
	image->entry_count = 0;
}

int cp_fatbin_entry__payload(const struct cp_fatbin_entry *entry, unsigned char **out,
			     size_t *out_size)
{
	unsigned char *buf;
	size_t size;

	if (!entry || !out || !out_size)
		return -EINVAL;
	*out = NULL;
	*out_size = 0;
	if (entry->flags & CP_FATBIN_FLAG_LZ4 && entry->flags & CP_FATBIN_FLAG_ZSTD)
		return -ENOTSUP;
	size = entry->flags & (CP_FATBIN_FLAG_LZ4 | CP_FATBIN_FLAG_ZSTD) ? entry->uncompressed_size :
									  entry->payload_size;
	if (size > CP_FATBIN_MAX_PAYLOAD)
		return -EFBIG;
	buf = malloc(size + 1);
	if (!buf)
		return -ENOMEM;
	if (entry->flags & CP_FATBIN_FLAG_LZ4) {
		int n;

		if (entry->payload_size > (size_t)LZ4_MAX_INPUT_SIZE || size > (size_t)INT32_MAX)
			goto corrupt;
		/* A raw LZ4 block of exactly the size the header gives. */
		n = LZ4_decompress_safe((const char *)entry->payload, (char *)buf,
					(int)entry->payload_size, (int)size);
		if (n < 0 || (size_t)n != size)
			goto corrupt;
	} else if (entry->flags & CP_FATBIN_FLAG_ZSTD) {
		size_t n = ZSTD_decompress(buf, size, entry->payload, entry->payload_size);

		if (ZSTD_isError(n) || n != size)
			goto corrupt;
	} else {
		memcpy(buf, entry->payload, size);
	}
	/* PTX is padded with NULs to 8 bytes: the text ends at the first. */
	if (entry->kind == CP_FATBIN_ENTRY_PTX) {
		unsigned char *nul = memchr(buf, '\0', size);

		if (nul)
			size = (size_t)(nul - buf);
	}
	buf[size] = '\0';
	*out = buf;
	*out_size = size;
	return 0;
corrupt:
	free(buf);
	return -EINVAL;
}

/*
 * The architecture a PTX text's .target names, and its suffix ('a', 'f'
 * or 0); 0 when there is none. ".target sm_90a, debug" gives 90 and 'a'.
 */
static unsigned int ptx_target(const char *ptx, char *suffix)
{
	const char *p = ptx;
	unsigned int arch = 0;

	*suffix = 0;
	while ((p = strstr(p, ".target")) != NULL) {
		p += 7;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "sm_", 3))
			continue;
		p += 3;
		while (*p >= '0' && *p <= '9')
			arch = arch * 10 + (unsigned int)(*p++ - '0');
		if (*p == 'a' || *p == 'f')
			*suffix = *p;
		return arch;
	}
	return 0;
}

/* Can a device of device_arch JIT PTX built for arch with these flags? */
static bool usable(unsigned int arch, uint64_t flags, unsigned int device_arch)
{
	if (arch > device_arch)
		return false;
	if (flags & CP_FATBIN_FLAG_ARCH_SPECIFIC)
		return arch == device_arch;
	if (flags & CP_FATBIN_FLAG_FAMILY)
		return arch / 10 == device_arch / 10;
	return true;
}

int cp_image__ptx_for(const struct cp_image *image, unsigned int device_arch, char **ptx,
		      size_t *len, unsigned int *ptx_arch)
{
	const struct cp_fatbin_entry *best = NULL;
	unsigned char *text;
	size_t i, size;
	int err;

	if (!image || !ptx || !len)
		return -EINVAL;
	*ptx = NULL;
	*len = 0;
	if (image->kind == CP_IMAGE_PTX) {
		char suffix;
		unsigned int arch = ptx_target((const char *)image->data, &suffix);
		uint64_t flags = suffix == 'a' ? CP_FATBIN_FLAG_ARCH_SPECIFIC :
				 suffix == 'f' ? CP_FATBIN_FLAG_FAMILY : 0;

		if (arch && !usable(arch, flags, device_arch))
			return -ENOENT;
		*ptx = malloc(image->size);
		if (!*ptx)
			return -ENOMEM;
		memcpy(*ptx, image->data, image->size);
		*len = image->size - 1;
		if (ptx_arch)
			*ptx_arch = arch;
		return 0;
	}
	if (image->kind != CP_IMAGE_FATBIN && image->kind != CP_IMAGE_FATBIN_WRAPPER)
		return -ENOENT;
	for (i = 0; i < image->entry_count; i++) {
		const struct cp_fatbin_entry *e = &image->entries[i];

		if (e->kind == CP_FATBIN_ENTRY_PTX && usable(e->arch, e->flags, device_arch) &&
		    (!best || e->arch > best->arch))
			best = e;
	}
	if (!best)
		return -ENOENT;
	err = cp_fatbin_entry__payload(best, &text, &size);
	if (err)
		return err;
	*ptx = (char *)text;
	*len = size;
	if (ptx_arch)
		*ptx_arch = best->arch;
	return 0;
}

void cp_image__free_names(char **names, size_t count)
{
	size_t i;

	for (i = 0; names && i < count; i++)
		free(names[i]);
	free(names);
}

static int add_name(char ***names, size_t *count, const char *name, size_t len)
{
	char **grown, *copy;
	size_t i;

	for (i = 0; i < *count; i++)
		if (strlen((*names)[i]) == len && !memcmp((*names)[i], name, len))
			return 0;
	copy = strndup(name, len);
	grown = copy ? realloc(*names, (*count + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(copy);
		return -ENOMEM;
	}
	*names = grown;
	(*names)[(*count)++] = copy;
	return 0;
}

/* The entry functions of one cubin of size bytes (already checked by elf_extent). */
static int cubin_kernels(const unsigned char *data, size_t size, char ***names, size_t *count)
{
	Elf64_Ehdr header;
	size_t i, s;
	int err;

	if (elf_extent(data, size, &s))
		return -EINVAL;
	memcpy(&header, data, sizeof(header));
	for (i = 0; i < header.e_shnum; i++) {
		Elf64_Shdr symtab, strtab;
		size_t n, j;

		memcpy(&symtab, data + header.e_shoff + i * sizeof(symtab), sizeof(symtab));
		if (symtab.sh_type != SHT_SYMTAB || symtab.sh_link >= header.e_shnum)
			continue;
		memcpy(&strtab, data + header.e_shoff + symtab.sh_link * sizeof(strtab), sizeof(strtab));
		if (strtab.sh_type != SHT_STRTAB || !strtab.sh_size ||
		    data[strtab.sh_offset + strtab.sh_size - 1] != '\0')
			return -EINVAL;
		n = symtab.sh_size / sizeof(Elf64_Sym);
		for (j = 0; j < n; j++) {
			Elf64_Sym sym;
			const char *name;

			memcpy(&sym, data + symtab.sh_offset + j * sizeof(sym), sizeof(sym));
			if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & STO_CUDA_ENTRY) ||
			    sym.st_name >= strtab.sh_size)
				continue;
			name = (const char *)data + strtab.sh_offset + sym.st_name;
			err = add_name(names, count, name, strlen(name));
			if (err)
				return err;
		}
	}
	return 0;
}

int cp_image__elf_kernels(const struct cp_image *image, unsigned int arch, char ***names,
			  size_t *count)
{
	unsigned int chosen = 0;
	size_t i;
	int err = 0;

	if (!image || !names || !count)
		return -EINVAL;
	*names = NULL;
	*count = 0;
	if (image->kind == CP_IMAGE_ELF)
		err = cubin_kernels(image->data, image->size, names, count);
	for (i = 0; arch && i < image->entry_count; i++)
		if (image->entries[i].kind == CP_FATBIN_ENTRY_ELF && image->entries[i].arch <= arch &&
		    image->entries[i].arch > chosen)
			chosen = image->entries[i].arch;
	for (i = 0; !err && i < image->entry_count; i++) {
		const struct cp_fatbin_entry *e = &image->entries[i];
		unsigned char *elf;
		size_t size;

		if (e->kind != CP_FATBIN_ENTRY_ELF || (chosen && e->arch != chosen))
			continue;
		err = cp_fatbin_entry__payload(e, &elf, &size);
		if (!err) {
			err = size >= SELFMAG && !memcmp(elf, ELFMAG, SELFMAG) ?
			      cubin_kernels(elf, size, names, count) : -EINVAL;
			free(elf);
		}
	}
	if (err) {
		cp_image__free_names(*names, *count);
		*names = NULL;
		*count = 0;
	}
	return err;
}
