// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one symbolizer: ELF function symbols of the files traced processes
 * map, each file opened and read once (sorted symbols, load segments), and
 * the executable mappings of each process, kept after it exits. It names
 * host stubs (cudaLaunchKernel's func, found by file identity and offset
 * from its VMA) and the frames of allocation stacks (by address in a pid).
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

#include "cuprobe_internal.h"

struct elf_symbol {
	uint64_t start;  /* virtual address */
	uint64_t size;   /* 0 is taken as 1: the exact address only */
	unsigned int rank; /* .symtab before .dynsym for the same address */
	char *name;
};

struct elf_segment {
	uint64_t offset, filesz, vaddr;
};

/* One ELF file, by identity, read on first use. */
struct elf_file {
	char *path;          /* how to open it from here */
	uint32_t dev;        /* kernel encoding */
	uint64_t inode;
	bool loaded;
	int error;           /* why it could not be read (then nothing is tried again) */
	struct elf_symbol *symbols;
	size_t symbol_count;
	struct elf_segment *segments;
	size_t segment_count;
};

/* An executable file mapping of a process. */
struct mapping {
	pid_t pid;
	uint64_t start, end, offset;
	size_t file;         /* index in files */
	char *shown;         /* the path as the process saw it */
};

struct cp_symbolizer {
	struct elf_file *files;
	size_t file_count, file_capacity;
	struct mapping *mappings;
	size_t mapping_count, mapping_capacity;
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

static void unload(struct elf_file *file)
{
	size_t i;

	for (i = 0; i < file->symbol_count; i++)
		free(file->symbols[i].name);
	free(file->symbols);
	free(file->segments);
	free(file->path);
}

void cp_symbolizer__free(struct cp_symbolizer *symbolizer)
{
	size_t i;

	if (!symbolizer)
		return;
	for (i = 0; i < symbolizer->file_count; i++)
		unload(&symbolizer->files[i]);
	for (i = 0; i < symbolizer->mapping_count; i++)
		free(symbolizer->mappings[i].shown);
	free(symbolizer->files);
	free(symbolizer->mappings);
	free(symbolizer);
}

static long find_file(const struct cp_symbolizer *symbolizer, uint32_t dev, uint64_t inode)
{
	size_t i;

	for (i = 0; i < symbolizer->file_count; i++)
		if (symbolizer->files[i].dev == dev && symbolizer->files[i].inode == inode)
			return (long)i;
	return -1;
}

/* The index of (dev, inode), remembered with path when new; -ENOMEM. */
static long remember(struct cp_symbolizer *symbolizer, const char *path, uint32_t dev, uint64_t inode)
{
	long known = find_file(symbolizer, dev, inode);
	struct elf_file *file;

	if (known >= 0)
		return known;
	if (CP_ARRAY_RESERVE(symbolizer->files, symbolizer->file_capacity,
			     symbolizer->file_count + 1, 16))
		return -ENOMEM;
	file = &symbolizer->files[symbolizer->file_count];
	memset(file, 0, sizeof(*file));
	file->path = strdup(path);
	if (!file->path)
		return -ENOMEM;
	file->dev = dev;
	file->inode = inode;
	return (long)symbolizer->file_count++;
}

int cp_symbolizer__add_file(struct cp_symbolizer *symbolizer, const char *path)
{
	struct stat st;
	long index;

	if (!symbolizer || !path)
		return -EINVAL;
	if (stat(path, &st))
		return -errno;
	index = remember(symbolizer, path, kernel_dev(major(st.st_dev), minor(st.st_dev)), st.st_ino);
	return index < 0 ? (int)index : 0;
}

static int by_address(const void *a, const void *b)
{
	const struct elf_symbol *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (int)x->rank - (int)y->rank;
}

typedef int function_symbol_fn(void *ctx, const GElf_Sym *sym, const char *name);

/*
 * Calls fn for each named function symbol defined in the tables of type
 * (SHT_SYMTAB or SHT_DYNSYM), until fn returns non-zero: that, or 0.
 */
static int each_function_symbol(Elf *elf, GElf_Word type, function_symbol_fn *fn, void *ctx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	GElf_Sym sym;
	size_t i;
	int err;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != type || !shdr.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (i = 0; data && i < shdr.sh_size / shdr.sh_entsize; i++) {
			const char *name;

			if (!gelf_getsym(data, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, shdr.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			err = fn(ctx, &sym, name);
			if (err)
				return err;
		}
	}
	return 0;
}

struct table_read {
	struct elf_file *file;
	size_t *capacity;
	unsigned int rank;
};

static int add_symbol(void *ctx, const GElf_Sym *sym, const char *name)
{
	struct table_read *read = ctx;
	struct elf_file *file = read->file;

	if (!sym->st_value)
		return 0;
	if (CP_ARRAY_RESERVE(file->symbols, *read->capacity, file->symbol_count + 1, 256))
		return -ENOMEM;
	file->symbols[file->symbol_count] = (struct elf_symbol){
		.start = sym->st_value, .size = sym->st_size, .rank = read->rank, .name = strdup(name) };
	if (!file->symbols[file->symbol_count].name)
		return -ENOMEM;
	file->symbol_count++;
	return 0;
}

/* Reads the function symbols of one table (SHT_SYMTAB or SHT_DYNSYM) into file. */
static int read_table(Elf *elf, GElf_Word type, unsigned int rank, struct elf_file *file,
		      size_t *capacity)
{
	struct table_read read = { .file = file, .capacity = capacity, .rank = rank };

	return each_function_symbol(elf, type, add_symbol, &read);
}

/* Opens the file once: its load segments and function symbols, sorted by address. */
static int load(struct elf_file *file)
{
	size_t capacity = 0, count, i;
	GElf_Phdr phdr;
	int fd, err = 0;
	Elf *elf;

	if (file->loaded)
		return file->error;
	file->loaded = true;
	fd = open(file->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return file->error = -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &count)) {
		err = -ENOEXEC;
		goto out;
	}
	file->segments = calloc(count ? count : 1, sizeof(*file->segments));
	if (!file->segments) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < count; i++)
		if (gelf_getphdr(elf, (int)i, &phdr) && phdr.p_type == PT_LOAD)
			file->segments[file->segment_count++] = (struct elf_segment){
				.offset = phdr.p_offset, .filesz = phdr.p_filesz, .vaddr = phdr.p_vaddr };
	err = read_table(elf, SHT_SYMTAB, 0, file, &capacity);
	if (!err)
		err = read_table(elf, SHT_DYNSYM, 1, file, &capacity);
	if (!err && file->symbol_count)
		qsort(file->symbols, file->symbol_count, sizeof(*file->symbols), by_address);
out:
	elf_end(elf);
	close(fd);
	return file->error = err;
}

/* The symbol containing file_offset: 0, or -ENOENT. */
static int lookup(struct elf_file *file, uint64_t file_offset, const struct elf_symbol **found,
		  uint64_t *vaddr_out)
{
	size_t low = 0, high, i, scanned;
	uint64_t vaddr = 0;
	bool mapped = false;
	int err = load(file);

	if (err)
		return err;
	for (i = 0; i < file->segment_count; i++) {
		const struct elf_segment *seg = &file->segments[i];

		if (file_offset >= seg->offset && file_offset < seg->offset + seg->filesz) {
			vaddr = file_offset - seg->offset + seg->vaddr;
			mapped = true;
			break;
		}
	}
	if (!mapped || !file->symbol_count)
		return -ENOENT;
	/* The last symbol starting at or before vaddr... */
	high = file->symbol_count;
	while (low < high) {
		size_t mid = low + (high - low) / 2;

		if (file->symbols[mid].start <= vaddr)
			low = mid + 1;
		else
			high = mid;
	}
	/* ...then back to the first (best ranked) of those that contain it. */
	for (i = low, scanned = 0; i > 0 && scanned < 64; i--, scanned++) {
		const struct elf_symbol *sym = &file->symbols[i - 1];
		uint64_t size = sym->size ? sym->size : 1;

		if (vaddr < sym->start + size) {
			while (i > 1 && file->symbols[i - 2].start == sym->start &&
			       vaddr < file->symbols[i - 2].start +
				       (file->symbols[i - 2].size ? file->symbols[i - 2].size : 1))
				sym = &file->symbols[--i - 1];
			*found = sym;
			*vaddr_out = vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

static bool shares_our_root(pid_t pid)
{
	struct stat ours, theirs;
	char root[64];

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	return !stat("/", &ours) && !stat(root, &theirs) && ours.st_dev == theirs.st_dev &&
	       ours.st_ino == theirs.st_ino;
}

static bool mapping_known(const struct cp_symbolizer *symbolizer, pid_t pid, uint64_t start,
			  uint64_t end)
{
	size_t i;

	for (i = 0; i < symbolizer->mapping_count; i++)
		if (symbolizer->mappings[i].pid == pid && symbolizer->mappings[i].start == start &&
		    symbolizer->mappings[i].end == end)
			return true;
	return false;
}

int cp_symbolizer__refresh(struct cp_symbolizer *symbolizer, pid_t pid)
{
	char maps_path[64], line[PATH_MAX + 256], path[PATH_MAX + 64];
	struct cp_maps_entry entry;
	bool same_root;
	FILE *maps;
	int err = 0;

	if (!symbolizer || pid <= 0)
		return -EINVAL;
	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	maps = fopen(maps_path, "re");
	if (!maps)
		return errno == ENOENT ? -ESRCH : -errno;
	/* A process sharing our root: its paths still open after it exits. */
	same_root = shares_our_root(pid);
	while (!err && fgets(line, sizeof(line), maps)) {
		struct mapping *m;
		long file;

		if (cp_maps__parse_line(line, &entry) || entry.path[0] != '/' || !entry.inode)
			continue;
		if (same_root)
			snprintf(path, sizeof(path), "%s", entry.path);
		else
			snprintf(path, sizeof(path), "/proc/%d/root%s", pid, entry.path);
		file = remember(symbolizer, path, kernel_dev(entry.dev_major, entry.dev_minor),
				entry.inode);
		if (file < 0) {
			err = (int)file;
			break;
		}
		if (entry.perms[2] != 'x' || mapping_known(symbolizer, pid, entry.start, entry.end))
			continue;
		err = CP_ARRAY_RESERVE(symbolizer->mappings, symbolizer->mapping_capacity,
				       symbolizer->mapping_count + 1, 64);
		if (err)
			break;
		m = &symbolizer->mappings[symbolizer->mapping_count];
		*m = (struct mapping){ .pid = pid, .start = entry.start, .end = entry.end,
				       .offset = entry.offset, .file = (size_t)file,
				       .shown = strdup(entry.path) };
		if (!m->shown) {
			err = -ENOMEM;
			break;
		}
		symbolizer->mapping_count++;
	}
	fclose(maps);
	return err;
}

void cp_symbolizer__forget(struct cp_symbolizer *symbolizer, pid_t pid)
{
	size_t i, kept = 0;

	if (!symbolizer)
		return;
	for (i = 0; i < symbolizer->mapping_count; i++) {
		if (symbolizer->mappings[i].pid == pid)
			free(symbolizer->mappings[i].shown);
		else
			symbolizer->mappings[kept++] = symbolizer->mappings[i];
	}
	symbolizer->mapping_count = kept;
}

int cp_symbolizer__resolve(struct cp_symbolizer *symbolizer, pid_t pid, uint32_t dev,
			   uint64_t inode, uint64_t file_offset, char *out, size_t out_len)
{
	const struct elf_symbol *sym;
	uint64_t vaddr;
	long file;
	int err;

	if (!symbolizer || !out || !out_len || !inode)
		return -EINVAL;
	file = find_file(symbolizer, dev, inode);
	if (file < 0 && pid > 0 && !cp_symbolizer__refresh(symbolizer, pid))
		file = find_file(symbolizer, dev, inode);
	if (file < 0)
		return -ENOENT;
	err = lookup(&symbolizer->files[file], file_offset, &sym, &vaddr);
	if (err)
		return err;
	if (strlen(sym->name) >= out_len)
		return -ENAMETOOLONG;
	strcpy(out, sym->name);
	return 0;
}

void cp_symbolizer__symbolize(struct cp_symbolizer *symbolizer, pid_t pid, uint64_t ip,
			      char *out, size_t out_len)
{
	const struct elf_symbol *sym;
	char shown[1024];
	uint64_t vaddr;
	size_t i;

	if (!out || !out_len)
		return;
	for (i = 0; symbolizer && i < symbolizer->mapping_count; i++) {
		const struct mapping *m = &symbolizer->mappings[i];
		uint64_t file_offset = ip - m->start + m->offset;

		if (m->pid != pid || ip < m->start || ip >= m->end)
			continue;
		if (!lookup(&symbolizer->files[m->file], file_offset, &sym, &vaddr)) {
			cp_demangle(sym->name, shown, sizeof(shown));
			snprintf(out, out_len, "%s+0x%llx (%s)", shown,
				 (unsigned long long)(vaddr - sym->start), m->shown);
		} else {
			snprintf(out, out_len, "0x%llx (%s+0x%llx)", (unsigned long long)ip, m->shown,
				 (unsigned long long)file_offset);
		}
		return;
	}
	snprintf(out, out_len, "0x%llx", (unsigned long long)ip);
}

/* One lookup in one file, through the symbolizer's own loading and search (nothing cached). */
int cp_elf__symbolize(const char *path, uint64_t file_offset, char *out, size_t out_len,
		      uint64_t *offset_in_symbol)
{
	struct elf_file file = { 0 };
	const struct elf_symbol *sym;
	uint64_t vaddr;
	int err;

	if (!path || !out || !out_len)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	file.path = strdup(path);
	if (!file.path)
		return -ENOMEM;
	err = lookup(&file, file_offset, &sym, &vaddr);
	if (!err && strlen(sym->name) >= out_len)
		err = -ENAMETOOLONG;
	if (!err) {
		strcpy(out, sym->name);
		if (offset_in_symbol)
			*offset_in_symbol = vaddr - sym->start;
	}
	unload(&file);
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

int cp_file__open_regular(const char *path)
{
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* Whether [offset, offset + size) lies inside a file of file_size bytes. */
static bool inside(uint64_t offset, uint64_t size, uint64_t file_size)
{
	return offset <= file_size && size <= file_size - offset;
}

/*
 * An ELF file opened for reading: 0 with *fd and *elf, or -errno as the
 * readers say. libelf takes a file cut short for one without sections, so
 * the headers and each section are checked against the file's size.
 */
static int open_elf(const char *path, int *fd, Elf **elf)
{
	GElf_Ehdr header;
	GElf_Shdr section_header;
	Elf_Scn *section = NULL;
	struct stat st;
	int err = 0;

	*elf = NULL;
	*fd = cp_file__open_regular(path);
	if (*fd < 0)
		return *fd;
	*elf = elf_begin(*fd, ELF_C_READ, NULL);
	if (!*elf || elf_kind(*elf) != ELF_K_ELF || !gelf_getehdr(*elf, &header))
		err = -ENOEXEC;
	else if (fstat(*fd, &st) ||
		 !inside(header.e_phoff, (uint64_t)header.e_phnum * header.e_phentsize, st.st_size) ||
		 !inside(header.e_shoff, (uint64_t)header.e_shnum * header.e_shentsize, st.st_size) ||
		 (header.e_shoff && !elf_nextscn(*elf, NULL)))
		err = -EBADMSG;
	while (!err && (section = elf_nextscn(*elf, section)))
		if (!gelf_getshdr(section, &section_header) ||
		    (section_header.sh_type != SHT_NOBITS &&
		     !inside(section_header.sh_offset, section_header.sh_size, st.st_size)))
			err = -EBADMSG;
	if (err) {
		elf_end(*elf); /* NULL-safe */
		close(*fd);
		*elf = NULL;
		*fd = -1;
	}
	return err;
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
	err = open_elf(path, &fd, &elf);
	if (err)
		return err;
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
	elf_end(elf);
	close(fd);
	return (int)found;
}

void cp_elf__free_names(char **names, size_t count)
{
	size_t i;

	for (i = 0; names && i < count; i++)
		free(names[i]);
	free(names);
}

struct name_list {
	char **names;
	size_t count, capacity;
};

static int add_exported(void *ctx, const GElf_Sym *sym, const char *name)
{
	struct name_list *list = ctx;

	if (GELF_ST_BIND(sym->st_info) == STB_LOCAL)
		return 0;
	if (CP_ARRAY_RESERVE(list->names, list->capacity, list->count + 1, 256))
		return -ENOMEM;
	list->names[list->count] = strdup(name);
	if (!list->names[list->count])
		return -ENOMEM;
	list->count++;
	return 0;
}

int cp_elf__exported_functions(const char *path, char ***names_out, size_t *count_out)
{
	struct name_list list = { 0 };
	int fd, err;
	Elf *elf;

	if (!path || !names_out || !count_out)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	err = open_elf(path, &fd, &elf);
	if (err)
		return err;
	err = each_function_symbol(elf, SHT_DYNSYM, add_exported, &list);
	elf_end(elf);
	close(fd);
	if (err) {
		cp_elf__free_names(list.names, list.count);
		return err;
	}
	*names_out = list.names;
	*count_out = list.count;
	return 0;
}
