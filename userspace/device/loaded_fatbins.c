// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The fatbins of the loaded objects (loaded_fatbins.h). The section headers
 * are read with <elf.h>'s structs, as fatbin.c reads cubins: this file runs
 * in the preload library, which links nothing but libc, LZ4 and ZSTD. Only
 * three things are read from a file (its header, its section headers, their
 * names), each size checked; the fatbins themselves are read where the
 * loader mapped them, inside the object's own loaded segments.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loaded_fatbins.h"

#define FATBIN_SECTION ".nv_fatbin"
#define FATBIN_HEADER_SIZE 16u
/* More section names than this: not an object nvcc's host compiler made. */
#define MAX_SECTION_NAMES (16u << 20)
/* An ELF entry may be padded past the cubin's own end (the fatbin aligns entries to 8). */
#define ENTRY_PADDING 16u

struct cp_fatbin_section {
	char *file;                 /* dlpi_name ("" for the program) */
	uintptr_t base;             /* dlpi_addr */
	const unsigned char *start; /* NULL: no .nv_fatbin, or its file could not be read */
	size_t size;
};

/* One loaded object, as dl_iterate_phdr showed it. */
struct object {
	char *file;
	uintptr_t base;
	const ElfW(Phdr) *phdr;
	ElfW(Half) phnum;
};

struct objects {
	struct object *list;
	size_t count, capacity;
	bool failed;
};

const char *cp_cubin_origin__name(enum cp_cubin_origin origin)
{
	switch (origin) {
	case CP_CUBIN_BY_ADDRESS:
		return "by address";
	case CP_CUBIN_BY_BYTES:
		return "by bytes";
	case CP_CUBIN_BY_KERNELS:
		return "by kernel names";
	}
	return "?";
}

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct objects *objects = data;
	struct object *grown;

	(void)size;
	if (objects->count == objects->capacity) {
		size_t capacity = objects->capacity ? objects->capacity * 2 : 64;

		grown = realloc(objects->list, capacity * sizeof(*grown));
		if (!grown) {
			objects->failed = true;
			return 1;
		}
		objects->list = grown;
		objects->capacity = capacity;
	}
	grown = &objects->list[objects->count];
	grown->file = strdup(info->dlpi_name ? info->dlpi_name : "");
	if (!grown->file) {
		objects->failed = true;
		return 1;
	}
	grown->base = info->dlpi_addr;
	grown->phdr = info->dlpi_phdr;
	grown->phnum = info->dlpi_phnum;
	objects->count++;
	return 0;
}

static void free_objects(struct objects *objects)
{
	size_t i;

	for (i = 0; i < objects->count; i++)
		free(objects->list[i].file);
	free(objects->list);
}

static bool read_at(int fd, void *buf, size_t len, off_t offset)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done, offset + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

/* The address and size .nv_fatbin has in the file's own terms (sh_addr); false when none. */
static bool fatbin_section_of(const char *file, ElfW(Addr) *addr, size_t *size)
{
	Elf64_Ehdr header;
	Elf64_Shdr *sections = NULL;
	char *names = NULL;
	bool found = false;
	size_t i;
	int fd = open(*file ? file : "/proc/self/exe", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (!read_at(fd, &header, sizeof(header), 0) || memcmp(header.e_ident, ELFMAG, SELFMAG) ||
	    header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_shentsize != sizeof(Elf64_Shdr) ||
	    !header.e_shnum || header.e_shstrndx >= header.e_shnum)
		goto out;
	sections = calloc(header.e_shnum, sizeof(*sections));
	if (!sections || !read_at(fd, sections, header.e_shnum * sizeof(*sections), (off_t)header.e_shoff))
		goto out;
	if (sections[header.e_shstrndx].sh_size > MAX_SECTION_NAMES)
		goto out;
	names = calloc(1, sections[header.e_shstrndx].sh_size + 1);
	if (!names || !read_at(fd, names, sections[header.e_shstrndx].sh_size,
			       (off_t)sections[header.e_shstrndx].sh_offset))
		goto out;
	for (i = 0; i < header.e_shnum && !found; i++) {
		const Elf64_Shdr *s = &sections[i];

		if (s->sh_name < sections[header.e_shstrndx].sh_size &&
		    !strcmp(names + s->sh_name, FATBIN_SECTION) && (s->sh_flags & SHF_ALLOC) &&
		    s->sh_type == SHT_PROGBITS && s->sh_size) {
			*addr = s->sh_addr;
			*size = s->sh_size;
			found = true;
		}
	}
out:
	free(names);
	free(sections);
	close(fd);
	return found;
}

/* Does a readable loaded segment of the object hold [addr, addr + size) from its file? */
static bool mapped(const struct object *o, ElfW(Addr) addr, size_t size)
{
	ElfW(Half) i;

	for (i = 0; i < o->phnum; i++) {
		const ElfW(Phdr) *ph = &o->phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && addr >= ph->p_vaddr &&
		    addr - ph->p_vaddr <= ph->p_filesz && size <= ph->p_filesz - (addr - ph->p_vaddr))
			return true;
	}
	return false;
}

/* The object's .nv_fatbin, from the cache or read now; NULL only when out of memory. */
static const struct cp_fatbin_section *section_of(struct cp_loaded_fatbins *loaded,
						  const struct object *o)
{
	struct cp_fatbin_section *s;
	ElfW(Addr) addr = 0;
	size_t i, size = 0;

	for (i = 0; i < loaded->count; i++)
		if (loaded->sections[i].base == o->base && !strcmp(loaded->sections[i].file, o->file))
			return &loaded->sections[i];
	if (loaded->count == loaded->capacity) {
		size_t capacity = loaded->capacity ? loaded->capacity * 2 : 64;

		s = realloc(loaded->sections, capacity * sizeof(*s));
		if (!s)
			return NULL;
		loaded->sections = s;
		loaded->capacity = capacity;
	}
	s = &loaded->sections[loaded->count];
	memset(s, 0, sizeof(*s));
	s->file = strdup(o->file);
	if (!s->file)
		return NULL;
	s->base = o->base;
	/* The vDSO and objects without a readable file have no section to find. */
	if (fatbin_section_of(o->file, &addr, &size) && mapped(o, addr, size)) {
		s->start = (const unsigned char *)(o->base + addr);
		s->size = size;
	}
	loaded->count++;
	return s;
}

/* The length of a fatbin at p (header and entries), when one starts there and fits in room. */
static size_t fatbin_at(const unsigned char *p, size_t room)
{
	uint32_t magic;
	uint16_t version, header;
	uint64_t entries;

	if (room < FATBIN_HEADER_SIZE)
		return 0;
	memcpy(&magic, p, sizeof(magic));
	memcpy(&version, p + 4, sizeof(version));
	memcpy(&header, p + 6, sizeof(header));
	memcpy(&entries, p + 8, sizeof(entries));
	if (magic != CP_FATBIN_MAGIC || version != 1 || header < FATBIN_HEADER_SIZE || header > room ||
	    entries > room - header)
		return 0;
	return header + entries;
}

/* The fatbin after offset *at in the section (8-byte aligned, as nvcc places them); 0 at the end. */
static size_t next_fatbin(const struct cp_fatbin_section *s, size_t *at, const unsigned char **fatbin)
{
	size_t len;

	while (*at + FATBIN_HEADER_SIZE <= s->size) {
		len = fatbin_at(s->start + *at, s->size - *at);
		if (len) {
			*fatbin = s->start + *at;
			*at += (len + 7) & ~(size_t)7;
			return len;
		}
		*at += 8;
	}
	return 0;
}

static void found(struct cp_cubin_fatbin *out, const struct cp_fatbin_section *s,
		  const unsigned char *fatbin, size_t len, enum cp_cubin_origin origin)
{
	out->fatbin = fatbin;
	out->size = len;
	out->origin = origin;
	snprintf(out->object, sizeof(out->object), "%s", s->file);
}

/* 1. The cubin lies inside an uncompressed ELF entry of a fatbin of s. */
static bool by_address(const struct cp_fatbin_section *s, const struct cp_image *cubin,
		       struct cp_cubin_fatbin *out)
{
	const unsigned char *fatbin, *p = cubin->data;
	struct cp_image image;
	size_t at = 0, len, i;
	bool hit = false;

	if (!s->start || p < s->start || p >= s->start + s->size)
		return false;
	while (!hit && (len = next_fatbin(s, &at, &fatbin))) {
		if (p < fatbin || p >= fatbin + len)
			continue;
		if (cp_image__parse(fatbin, len, &image, NULL, 0))
			return false;
		for (i = 0; i < image.entry_count && !hit; i++) {
			const struct cp_fatbin_entry *e = &image.entries[i];

			hit = e->kind == CP_FATBIN_ENTRY_ELF &&
			      !(e->flags & (CP_FATBIN_FLAG_LZ4 | CP_FATBIN_FLAG_ZSTD)) &&
			      p >= e->payload && p < e->payload + e->payload_size;
		}
		cp_image__release(&image);
		if (hit)
			found(out, s, fatbin, len, CP_CUBIN_BY_ADDRESS);
		return hit; /* the fatbin holding the address was this one */
	}
	return false;
}

/* Is entry, decompressed, the cubin's bytes? Same architecture and size first. */
static bool same_bytes(const struct cp_fatbin_entry *e, const struct cp_image *cubin)
{
	bool compressed = e->flags & (CP_FATBIN_FLAG_LZ4 | CP_FATBIN_FLAG_ZSTD);
	size_t n = compressed ? e->uncompressed_size : e->payload_size;
	unsigned char *bytes;
	size_t size;
	bool same;

	if (e->kind != CP_FATBIN_ENTRY_ELF || e->arch != cubin->elf_arch || n < cubin->size ||
	    n - cubin->size >= ENTRY_PADDING)
		return false;
	if (!compressed)
		return !memcmp(e->payload, cubin->data, cubin->size);
	if (cp_fatbin_entry__payload(e, &bytes, &size))
		return false;
	same = size >= cubin->size && !memcmp(bytes, cubin->data, cubin->size);
	free(bytes);
	return same;
}

/* Does ptx define the kernel `.entry NAME`? */
static bool defines(const char *ptx, const char *name)
{
	size_t len = strlen(name);
	const char *p = ptx;

	while ((p = strstr(p, ".entry"))) {
		p += 6;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, name, len) && (p[len] == '(' || p[len] == ' ' || p[len] == '\t' ||
					       p[len] == '\n' || p[len] == '\r'))
			return true;
	}
	return false;
}

/* The same set of names (each list without repeats). */
static bool same_names(char *const *a, size_t a_count, char *const *b, size_t b_count)
{
	size_t i, j;

	if (a_count != b_count)
		return false;
	for (i = 0; i < a_count; i++) {
		for (j = 0; j < b_count && strcmp(a[i], b[j]); j++)
			;
		if (j == b_count)
			return false;
	}
	return true;
}

/*
 * 3. The fatbin image has an ELF entry of the cubin's architecture with the
 * same kernels, and PTX for the device that defines them all.
 */
static bool same_kernels(const struct cp_image *image, const struct cp_image *cubin,
			 char *const *kernels, size_t kernel_count, unsigned int device_arch)
{
	char **names = NULL, *ptx = NULL;
	size_t count = 0, len, i;
	bool arch = false, same;

	for (i = 0; i < image->entry_count; i++)
		arch |= image->entries[i].kind == CP_FATBIN_ENTRY_ELF &&
			image->entries[i].arch == cubin->elf_arch;
	if (!arch || cp_image__elf_kernels(image, cubin->elf_arch, &names, &count))
		return false;
	same = same_names(kernels, kernel_count, names, count);
	cp_image__free_names(names, count);
	if (!same || cp_image__ptx_for(image, device_arch, &ptx, &len, NULL))
		return false;
	for (i = 0; i < kernel_count && same; i++)
		same = defines(ptx, kernels[i]);
	free(ptx);
	return same;
}

int cp_loaded_fatbins__find(struct cp_loaded_fatbins *loaded, const struct cp_image *cubin,
			    char *const *kernels, size_t kernel_count, unsigned int device_arch,
			    struct cp_cubin_fatbin *out)
{
	struct cp_fatbin_section *sections = NULL;
	struct objects objects = { 0 };
	enum cp_cubin_origin way;
	size_t i, n = 0;
	int err = -ENOENT;

	if (!loaded || !cubin || cubin->kind != CP_IMAGE_ELF || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	/* The objects stay loaded while their module is loaded, as for the runtime reading them. */
	dl_iterate_phdr(collect_object, &objects);
	if (objects.failed) {
		free_objects(&objects);
		return -ENOMEM;
	}
	sections = calloc(objects.count ? objects.count : 1, sizeof(*sections));
	pthread_mutex_lock(&loaded->lock);
	/* Copied: another thread may grow the cache once it is unlocked. */
	for (i = 0; sections && i < objects.count; i++) {
		const struct cp_fatbin_section *s = section_of(loaded, &objects.list[i]);

		if (!s)
			break;
		if (s->start)
			sections[n++] = *s;
	}
	pthread_mutex_unlock(&loaded->lock);
	if (!sections || i < objects.count)
		err = -ENOMEM;
	for (way = CP_CUBIN_BY_ADDRESS; err == -ENOENT && way <= CP_CUBIN_BY_KERNELS; way++) {
		for (i = 0; err == -ENOENT && i < n; i++) {
			const unsigned char *fatbin;
			struct cp_image image;
			size_t at = 0, len, e;

			if (way == CP_CUBIN_BY_ADDRESS) {
				if (by_address(&sections[i], cubin, out))
					err = 0;
				continue;
			}
			while (err == -ENOENT && (len = next_fatbin(&sections[i], &at, &fatbin))) {
				if (cp_image__parse(fatbin, len, &image, NULL, 0))
					continue;
				for (e = 0; way == CP_CUBIN_BY_BYTES && err && e < image.entry_count; e++)
					if (same_bytes(&image.entries[e], cubin))
						err = 0;
				if (way == CP_CUBIN_BY_KERNELS && kernel_count &&
				    same_kernels(&image, cubin, kernels, kernel_count, device_arch))
					err = 0;
				if (!err)
					found(out, &sections[i], fatbin, len, way);
				cp_image__release(&image);
			}
		}
	}
	free(sections);
	free_objects(&objects);
	return err;
}

void cp_loaded_fatbins__release(struct cp_loaded_fatbins *loaded)
{
	size_t i;

	if (!loaded)
		return;
	pthread_mutex_lock(&loaded->lock);
	for (i = 0; i < loaded->count; i++)
		free(loaded->sections[i].file);
	free(loaded->sections);
	loaded->sections = NULL;
	loaded->count = loaded->capacity = 0;
	pthread_mutex_unlock(&loaded->lock);
}
