// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Host-stub symbolization: cudaLaunchKernel's func is the host stub, whose
 * ELF symbol is the kernel's mangled name. The BPF side records the stub's
 * file identity and offset from its VMA, so the name can be found here even
 * after the process is gone, provided the file is known (added up front, or
 * seen in the process's maps while it lived).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include "cuprobe.h"

struct known_file {
	char *path;
	uint32_t dev;   /* kernel encoding */
	uint64_t inode;
};

struct cp_symbolizer {
	struct known_file *files;
	size_t count;
	size_t capacity;
};

static uint32_t kernel_dev(unsigned int dev_major, unsigned int dev_minor)
{
	return (dev_major << 20) | (dev_minor & 0xfffff);
}

struct cp_symbolizer *cp_symbolizer__new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	return calloc(1, sizeof(struct cp_symbolizer));
}

void cp_symbolizer__free(struct cp_symbolizer *symbolizer)
{
	size_t i;

	if (!symbolizer)
		return;
	for (i = 0; i < symbolizer->count; i++)
		free(symbolizer->files[i].path);
	free(symbolizer->files);
	free(symbolizer);
}

static const char *find_known(const struct cp_symbolizer *symbolizer, uint32_t dev, uint64_t inode)
{
	size_t i;

	for (i = 0; i < symbolizer->count; i++)
		if (symbolizer->files[i].dev == dev && symbolizer->files[i].inode == inode)
			return symbolizer->files[i].path;
	return NULL;
}

static int remember(struct cp_symbolizer *symbolizer, const char *path, uint32_t dev, uint64_t inode)
{
	if (find_known(symbolizer, dev, inode))
		return 0;
	if (symbolizer->count == symbolizer->capacity) {
		size_t capacity = symbolizer->capacity ? symbolizer->capacity * 2 : 16;
		struct known_file *files = realloc(symbolizer->files, capacity * sizeof(*files));

		if (!files)
			return -ENOMEM;
		symbolizer->files = files;
		symbolizer->capacity = capacity;
	}
	symbolizer->files[symbolizer->count].path = strdup(path);
	if (!symbolizer->files[symbolizer->count].path)
		return -ENOMEM;
	symbolizer->files[symbolizer->count].dev = dev;
	symbolizer->files[symbolizer->count].inode = inode;
	symbolizer->count++;
	return 0;
}

int cp_symbolizer__add_file(struct cp_symbolizer *symbolizer, const char *path)
{
	struct stat st;

	if (!symbolizer || !path)
		return -EINVAL;
	if (stat(path, &st))
		return -errno;
	return remember(symbolizer, path, kernel_dev(major(st.st_dev), minor(st.st_dev)), st.st_ino);
}

/* Learns every file-backed mapping of pid (while it still exists). */
static int learn_process_files(struct cp_symbolizer *symbolizer, pid_t pid)
{
	char maps_path[64], line[PATH_MAX + 256], path[PATH_MAX + 64];
	struct cp_maps_entry entry;
	FILE *maps;

	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	maps = fopen(maps_path, "re");
	if (!maps)
		return -errno;
	while (fgets(line, sizeof(line), maps)) {
		if (cp_maps__parse_line(line, &entry) || entry.path[0] != '/' || !entry.inode)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, entry.path);
		if (remember(symbolizer, path, kernel_dev(entry.dev_major, entry.dev_minor),
			     entry.inode)) {
			fclose(maps);
			return -ENOMEM;
		}
	}
	fclose(maps);
	return 0;
}

int cp_symbolizer__resolve(struct cp_symbolizer *symbolizer, pid_t pid, uint32_t dev,
			   uint64_t inode, uint64_t file_offset, char *out, size_t out_len)
{
	const char *path;

	if (!symbolizer || !out || !out_len || !inode)
		return -EINVAL;
	path = find_known(symbolizer, dev, inode);
	if (!path && pid > 0 && !learn_process_files(symbolizer, pid))
		path = find_known(symbolizer, dev, inode);
	if (!path)
		return -ENOENT;
	return cp_elf__symbol_at_offset(path, file_offset, out, out_len);
}

/* Converts a file offset to the virtual address its PT_LOAD segment gives it. */
static int offset_to_vaddr(Elf *elf, uint64_t file_offset, uint64_t *vaddr)
{
	size_t count, i;
	GElf_Phdr phdr;

	if (elf_getphdrnum(elf, &count))
		return -EINVAL;
	for (i = 0; i < count; i++) {
		if (!gelf_getphdr(elf, i, &phdr) || phdr.p_type != PT_LOAD)
			continue;
		if (file_offset >= phdr.p_offset && file_offset < phdr.p_offset + phdr.p_filesz) {
			*vaddr = file_offset - phdr.p_offset + phdr.p_vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

/* Looks through one symbol table (SHT_SYMTAB or SHT_DYNSYM) for vaddr. */
static int find_in_table(Elf *elf, GElf_Word type, uint64_t vaddr, char *out, size_t out_len,
			 uint64_t *symbol_start)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	GElf_Sym sym;
	size_t i;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != type || !shdr.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		for (i = 0; i < shdr.sh_size / shdr.sh_entsize; i++) {
			const char *name;
			uint64_t size;

			if (!gelf_getsym(data, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF)
				continue;
			size = sym.st_size ? sym.st_size : 1;
			if (vaddr < sym.st_value || vaddr >= sym.st_value + size)
				continue;
			name = elf_strptr(elf, shdr.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (strlen(name) >= out_len)
				return -ENAMETOOLONG;
			strcpy(out, name);
			if (symbol_start)
				*symbol_start = sym.st_value;
			return 0;
		}
	}
	return -ENOENT;
}

int cp_elf__symbolize(const char *path, uint64_t file_offset, char *out, size_t out_len,
		      uint64_t *offset_in_symbol)
{
	uint64_t vaddr, start = 0;
	int fd, err;
	Elf *elf;

	if (!path || !out || !out_len)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out_end;
	}
	err = offset_to_vaddr(elf, file_offset, &vaddr);
	if (err)
		goto out_end;
	err = find_in_table(elf, SHT_SYMTAB, vaddr, out, out_len, &start);
	if (err == -ENOENT)
		err = find_in_table(elf, SHT_DYNSYM, vaddr, out, out_len, &start);
	if (!err && offset_in_symbol)
		*offset_in_symbol = vaddr - start;
out_end:
	elf_end(elf); /* NULL-safe; a handle on a non-ELF file is ended too */
	close(fd);
	return err;
}

int cp_elf__symbol_at_offset(const char *path, uint64_t file_offset, char *out, size_t out_len)
{
	return cp_elf__symbolize(path, file_offset, out, out_len, NULL);
}

/* File offset of a defined function symbol: its address within its section. */
static bool symbol_file_offset(Elf *elf, const GElf_Sym *sym, uint64_t *offset)
{
	Elf_Scn *scn = elf_getscn(elf, sym->st_shndx);
	GElf_Shdr shdr;

	if (!scn || !gelf_getshdr(scn, &shdr) || sym->st_value < shdr.sh_addr ||
	    sym->st_value >= shdr.sh_addr + shdr.sh_size)
		return false;
	*offset = sym->st_value - shdr.sh_addr + shdr.sh_offset;
	return true;
}

int cp_elf__function_offsets(const char *path, const char *const *names, size_t count,
			     uint64_t *offsets)
{
	static const GElf_Word tables[] = { SHT_DYNSYM, SHT_SYMTAB };
	size_t found = 0, t, i, j;
	int fd, err = 0;
	Elf *elf;

	if (!path || !names || !offsets)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	memset(offsets, 0, count * sizeof(*offsets));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out_end;
	}
	for (t = 0; t < sizeof(tables) / sizeof(tables[0]) && found < count; t++) {
		Elf_Scn *scn = NULL;
		GElf_Shdr shdr;
		GElf_Sym sym;

		while ((scn = elf_nextscn(elf, scn))) {
			Elf_Data *data;

			if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != tables[t] || !shdr.sh_entsize)
				continue;
			data = elf_getdata(scn, NULL);
			if (!data)
				continue;
			for (i = 0; i < shdr.sh_size / shdr.sh_entsize; i++) {
				const char *name;

				if (!gelf_getsym(data, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
				    sym.st_shndx == SHN_UNDEF || !sym.st_value)
					continue;
				name = elf_strptr(elf, shdr.sh_link, sym.st_name);
				if (!name)
					continue;
				for (j = 0; j < count; j++) {
					if (offsets[j] || strcmp(name, names[j]))
						continue;
					if (symbol_file_offset(elf, &sym, &offsets[j]))
						found++;
					break;
				}
			}
		}
	}
out_end:
	elf_end(elf); /* NULL-safe */
	close(fd);
	return err ? err : (int)found;
}

void cp_elf__free_names(char **names, size_t count)
{
	size_t i;

	for (i = 0; names && i < count; i++)
		free(names[i]);
	free(names);
}

int cp_elf__exported_functions(const char *path, char ***names_out, size_t *count_out)
{
	size_t count = 0, capacity = 0, i;
	Elf_Scn *scn = NULL;
	char **names = NULL;
	GElf_Shdr shdr;
	GElf_Sym sym;
	int fd, err = 0;
	Elf *elf;

	if (!path || !names_out || !count_out)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out_end;
	}
	while (!err && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNSYM || !shdr.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (i = 0; data && i < shdr.sh_size / shdr.sh_entsize; i++) {
			const char *name;

			if (!gelf_getsym(data, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF || GELF_ST_BIND(sym.st_info) == STB_LOCAL)
				continue;
			name = elf_strptr(elf, shdr.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (count == capacity) {
				size_t grown = capacity ? capacity * 2 : 256;
				char **bigger = realloc(names, grown * sizeof(*names));

				if (!bigger) {
					err = -ENOMEM;
					break;
				}
				names = bigger;
				capacity = grown;
			}
			names[count] = strdup(name);
			if (!names[count]) {
				err = -ENOMEM;
				break;
			}
			count++;
		}
	}
out_end:
	elf_end(elf);
	close(fd);
	if (err) {
		cp_elf__free_names(names, count);
		return err;
	}
	*names_out = names;
	*count_out = count;
	return 0;
}
