// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Python stacks (--python): which traced processes run CPython and how the
 * walker (bpf/cuprobe_python.bpf.h) reads them, and the stacks it sends
 * resolved into frames {file, line, function}.
 *
 * Detection. A process's memory map names the file its interpreter is in
 * (libpython3.X.so, else the executable). That file's _PyRuntime,
 * Py_Version and PyCode_Type symbols (libelf; each file read once) place
 * the runtime, say the version (3.10 has no Py_Version: the file name does)
 * and give the type every code object has. The layout (python_layout.c) is
 * checked on the live process before the walker gets it: every thread
 * state of the interpreter must point back at it, and the first frame
 * found must hold a code object. A process that is not Python is written
 * to the kernel too (version 0), so it is not held or looked at again.
 *
 * Resolution. Each CP_EV_PY_STACK is read from the process when it
 * arrives (process_vm_readv): every frame's code object, its file name,
 * qualified name and line table, kept per code object. A code object
 * cached is checked again whenever a stack that uses it arrives, by one
 * batched read of the stack's code headers: the addresses of its name,
 * file and line table, and its first line, must be unchanged. When another
 * code object is found there, the address was freed and reused: the new
 * one is read, and the stacks resolved with the old one are taken out of
 * the kernel's seen map, so the next call that has one of them sends it
 * (and it is resolved) again. Calls between the reuse and that check carry
 * the old resolution: the window is a stack's, not the process's. When
 * something other than a code object is there (freed, the process exiting
 * or gone), the one cached was the last code object there and stays.
 *
 * Exits. With hold_for_stacks the kernel stops a process at cuInit until
 * it is checked and at each new stack until it is resolved (the record is
 * in the ring before the process can go on), so a process that exits at
 * once still has its last stacks named; without it (-p, system-wide) a
 * stack is resolved as soon as the agent reads it. What is resolved stays
 * after the exit until cp_python__forget_pid.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuprobe_internal.h"
#include "tracer_internal.h"

#define CODE_HEADER_MAX 256      /* bytes of a code object read to check it */
#define STRING_CHARS_MAX 4096    /* characters of a file or function name kept */
#define LINETABLE_MAX (1u << 20)
#define THREADS_CHECKED_MAX 4096
#define VALIDATE_TRIES 3

/* ---- a small chained hash table: nodes start with struct node -------------- */

struct node {
	struct node *next;
	uint64_t key;
};

struct table {
	struct node **buckets;
	size_t bucket_count;
	size_t count;
};

static size_t slot_of(const struct table *t, uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (size_t)(key % t->bucket_count);
}

static struct node *table_find(const struct table *t, uint64_t key)
{
	struct node *n;

	if (!t->bucket_count)
		return NULL;
	for (n = t->buckets[slot_of(t, key)]; n; n = n->next)
		if (n->key == key)
			return n;
	return NULL;
}

static int table_add(struct table *t, struct node *n)
{
	size_t i, slot;

	if (t->count >= t->bucket_count) {
		size_t count = t->bucket_count ? t->bucket_count * 2 : 64;
		struct node **buckets = calloc(count, sizeof(*buckets));
		struct table grown = { .buckets = buckets, .bucket_count = count };

		if (!buckets)
			return -ENOMEM;
		for (i = 0; i < t->bucket_count; i++) {
			while (t->buckets[i]) {
				struct node *moved = t->buckets[i];

				t->buckets[i] = moved->next;
				slot = slot_of(&grown, moved->key);
				moved->next = buckets[slot];
				buckets[slot] = moved;
			}
		}
		free(t->buckets);
		t->buckets = buckets;
		t->bucket_count = count;
	}
	slot = slot_of(t, n->key);
	n->next = t->buckets[slot];
	t->buckets[slot] = n;
	t->count++;
	return 0;
}

static struct node *table_take(struct table *t, uint64_t key)
{
	struct node **at, *n;

	if (!t->bucket_count)
		return NULL;
	for (at = &t->buckets[slot_of(t, key)]; (n = *at); at = &n->next) {
		if (n->key == key) {
			*at = n->next;
			t->count--;
			return n;
		}
	}
	return NULL;
}

static void table_free(struct table *t, void (*free_node)(struct node *))
{
	size_t i;

	for (i = 0; i < t->bucket_count; i++) {
		while (t->buckets[i]) {
			struct node *n = t->buckets[i];

			t->buckets[i] = n->next;
			free_node(n);
		}
	}
	free(t->buckets);
	memset(t, 0, sizeof(*t));
}

static void free_plain(struct node *n)
{
	free(n);
}

/* ---- what is kept ------------------------------------------------------------------- */

/* A string interned: file and function names live until cp_python__free. */
struct py_string {
	struct node node;  /* key: the text's hash */
	char text[];
};

/* An ELF file that may hold an interpreter: read once. */
struct py_file {
	struct node node;  /* key: dev << 40 ^ inode */
	uint32_t dev;
	uint64_t inode;
	int error;         /* it could not be read */
	uint64_t load_vaddr; /* the page of the segment at file offset 0 */
	uint64_t runtime, py_version, code_type; /* symbol values; 0 when absent */
};

/* What identifies a code object at an address (the fields of its header the resolution uses). */
struct code_fingerprint {
	uint64_t type, filename, name, qualname, linetable;
	int32_t firstlineno;
};

struct py_code {
	struct node node;  /* key: the code object's address */
	struct code_fingerprint fingerprint;
	const char *file;
	const char *function;
	uint8_t *lines;    /* co_linetable */
	size_t lines_len;
	bool unreadable;
};

struct py_stack {
	struct node node;  /* key: the stack id */
	uint32_t depth;
	bool truncated;
	bool unreadable;
	uint64_t code[CP_PY_STACK_MAX];
	struct cp_py_frame frames[CP_PY_STACK_MAX];
};

struct py_process {
	struct node node;  /* key: pid */
	struct cp_py_proc layout;
	struct table codes;
	struct table stacks;
};

struct cp_python {
	struct cp_tracer *tracer;  /* may be NULL: nothing written to the kernel */
	cp_log_fn log;
	void *log_ctx;
	pthread_mutex_t lock;
	struct table processes;
	struct table files;
	struct table strings;
	struct cp_python_stats stats;
	uint8_t headers[CP_PY_STACK_MAX][CODE_HEADER_MAX]; /* a stack's code headers, read at once */
};

static void say(const struct cp_python *py, enum cp_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(const struct cp_python *py, enum cp_log_level level, const char *fmt, ...)
{
	char message[512];
	va_list ap;

	if (!py->log)
		return;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	py->log(py->log_ctx, level, message);
}

static uint64_t hash_bytes(const char *text, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (uint8_t)text[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static const char *intern(struct cp_python *py, const char *text, size_t len)
{
	uint64_t key = hash_bytes(text, len);
	struct py_string *s;
	struct node *n;

	for (n = py->strings.bucket_count ? py->strings.buckets[slot_of(&py->strings, key)] : NULL;
	     n; n = n->next) {
		s = (struct py_string *)n;
		if (n->key == key && !strncmp(s->text, text, len) && !s->text[len])
			return s->text;
	}
	s = malloc(sizeof(*s) + len + 1);
	if (!s)
		return NULL;
	s->node.key = key;
	memcpy(s->text, text, len);
	s->text[len] = '\0';
	if (table_add(&py->strings, &s->node)) {
		free(s);
		return NULL;
	}
	return s->text;
}

static void free_code(struct node *n)
{
	free(((struct py_code *)n)->lines);
	free(n);
}

static void free_process(struct node *n)
{
	struct py_process *p = (struct py_process *)n;

	table_free(&p->codes, free_code);
	table_free(&p->stacks, free_plain);
	free(p);
}

struct cp_python *cp_python__new(struct cp_tracer *tracer, const struct cp_python_opts *caller_opts)
{
	struct cp_python_opts opts;
	struct cp_python *py;

	if (CP_OPTS_COPY(opts, caller_opts)) {
		errno = EINVAL;
		return NULL;
	}
	py = calloc(1, sizeof(*py));
	if (!py)
		return NULL;
	py->tracer = tracer;
	py->log = opts.log;
	py->log_ctx = opts.log_ctx;
	pthread_mutex_init(&py->lock, NULL);
	return py;
}

void cp_python__free(struct cp_python *py)
{
	if (!py)
		return;
	table_free(&py->processes, free_process);
	table_free(&py->files, free_plain);
	table_free(&py->strings, free_plain);
	pthread_mutex_destroy(&py->lock);
	free(py);
}

/* ---- reading the process ---------------------------------------------------------------- */

static int read_memory(pid_t pid, uint64_t address, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)address, .iov_len = len };
	ssize_t n;

	if (!address)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static uint64_t read_u64(pid_t pid, uint64_t address)
{
	uint64_t value = 0;

	return read_memory(pid, address, &value, sizeof(value)) ? 0 : value;
}

static uint64_t field_u64(const uint8_t *header, uint32_t offset)
{
	uint64_t value;

	memcpy(&value, header + offset, sizeof(value));
	return value;
}

static void put_utf8(char *out, size_t *len, uint32_t c)
{
	if (c >= 0xd800 && c <= 0xdfff)
		c = 0xfffd; /* a lone surrogate has no UTF-8 form */
	if (c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x80) {
		out[(*len)++] = (char)c;
	} else if (c < 0x800) {
		out[(*len)++] = (char)(0xc0 | c >> 6);
		out[(*len)++] = (char)(0x80 | (c & 0x3f));
	} else if (c < 0x10000) {
		out[(*len)++] = (char)(0xe0 | c >> 12);
		out[(*len)++] = (char)(0x80 | (c >> 6 & 0x3f));
		out[(*len)++] = (char)(0x80 | (c & 0x3f));
	} else {
		out[(*len)++] = (char)(0xf0 | c >> 18);
		out[(*len)++] = (char)(0x80 | (c >> 12 & 0x3f));
		out[(*len)++] = (char)(0x80 | (c >> 6 & 0x3f));
		out[(*len)++] = (char)(0x80 | (c & 0x3f));
	}
}

/*
 * A str of the process as UTF-8, interned: a compact string (every name a
 * code object has), ASCII or one, two or four bytes a character. NULL when
 * it cannot be read.
 */
static const char *read_string(struct cp_python *py, pid_t pid, const struct cp_py_proc *l,
			       uint64_t address)
{
	uint8_t header[128];
	uint32_t state, kind, i;
	int64_t length;
	uint8_t *chars = NULL;
	char *utf8 = NULL;
	const char *interned = NULL;
	size_t len = 0;
	bool ascii;

	if (l->unicode_compact_data > sizeof(header) ||
	    read_memory(pid, address, header, l->unicode_compact_data))
		return NULL;
	memcpy(&length, header + l->unicode_length, sizeof(length));
	memcpy(&state, header + l->unicode_state, sizeof(state));
	kind = state >> 2 & 7;
	ascii = state >> 6 & 1;
	if (!(state >> 5 & 1) || length < 0 || (kind != 1 && kind != 2 && kind != 4))
		return NULL; /* not compact: not a name the compiler made */
	if (length > STRING_CHARS_MAX)
		length = STRING_CHARS_MAX;
	chars = malloc((size_t)length * kind + 1);
	utf8 = malloc((size_t)length * 4 + 1);
	if (!chars || !utf8)
		goto out;
	if (length && read_memory(pid, address + (ascii ? l->unicode_ascii_data : l->unicode_compact_data),
				  chars, (size_t)length * kind))
		goto out;
	for (i = 0; i < (uint32_t)length; i++) {
		uint32_t c;

		if (kind == 1) {
			c = chars[i];
		} else if (kind == 2) {
			uint16_t u;

			memcpy(&u, chars + 2 * i, 2);
			c = u;
		} else {
			memcpy(&c, chars + 4 * i, 4);
		}
		put_utf8(utf8, &len, c);
	}
	interned = intern(py, utf8, len);
out:
	free(chars);
	free(utf8);
	return interned;
}

/* A bytes object of the process, copied (malloc'd): 0, or -errno. */
static int read_bytes(pid_t pid, const struct cp_py_proc *l, uint64_t address, uint8_t **out,
		      size_t *out_len)
{
	int64_t size = 0;
	uint8_t *data;
	int err;

	err = read_memory(pid, address + l->bytes_size, &size, sizeof(size));
	if (err)
		return err;
	if (size < 0 || size > LINETABLE_MAX)
		return -EPROTO;
	data = malloc(size ? (size_t)size : 1);
	if (!data)
		return -ENOMEM;
	err = size ? read_memory(pid, address + l->bytes_data, data, (size_t)size) : 0;
	if (err) {
		free(data);
		return err;
	}
	*out = data;
	*out_len = (size_t)size;
	return 0;
}

/* ---- detection ------------------------------------------------------------------------------ */

/* The symbols of an ELF file that may hold an interpreter, and where its first page loads. */
static int read_file(struct py_file *f, const char *path)
{
	size_t i, count, phnum;
	GElf_Ehdr ehdr;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd, err = 0;
	bool load_found = false;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || !gelf_getehdr(elf, &ehdr) || elf_getphdrnum(elf, &phnum)) {
		err = -ENOEXEC;
		goto out;
	}
	for (i = 0; i < phnum; i++) {
		GElf_Phdr phdr;

		if (gelf_getphdr(elf, (int)i, &phdr) && phdr.p_type == PT_LOAD && phdr.p_offset == 0) {
			f->load_vaddr = phdr.p_vaddr & ~0xfffull;
			load_found = true;
			break;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &shdr) || (shdr.sh_type != SHT_DYNSYM && shdr.sh_type != SHT_SYMTAB) ||
		    !shdr.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		count = data ? shdr.sh_size / shdr.sh_entsize : 0;
		for (i = 0; i < count; i++) {
			const char *name;
			GElf_Sym sym;

			if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
				continue;
			name = elf_strptr(elf, shdr.sh_link, sym.st_name);
			if (!name || (name[0] != '_' && name[0] != 'P'))
				continue;
			if (!strcmp(name, "_PyRuntime"))
				f->runtime = sym.st_value;
			else if (!strcmp(name, "Py_Version"))
				f->py_version = sym.st_value;
			else if (!strcmp(name, "PyCode_Type"))
				f->code_type = sym.st_value;
		}
	}
	if (!load_found)
		err = -ENOEXEC;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return err;
}

/* One mapped file of the process: its first mapping (file offset 0). */
struct mapped {
	uint64_t start, end;
	uint32_t dev;
	uint64_t inode;
	char path[PATH_MAX];
};

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The file the interpreter is in: a libpython mapped (preferred), else the executable. */
static int find_interpreter_file(pid_t pid, struct mapped *library, struct mapped *executable)
{
	char maps_path[64], exe_path[64], exe[PATH_MAX], line[PATH_MAX + 256];
	bool have_library = false, have_executable = false;
	ssize_t exe_len;
	FILE *maps;

	snprintf(exe_path, sizeof(exe_path), "/proc/%d/exe", pid);
	exe_len = readlink(exe_path, exe, sizeof(exe) - 1);
	exe[exe_len > 0 ? exe_len : 0] = '\0';
	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	maps = fopen(maps_path, "re");
	if (!maps)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), maps)) {
		struct cp_maps_entry entry;
		struct mapped *into = NULL;

		if (cp_maps__parse_line(line, &entry) || entry.offset || !entry.inode || entry.path[0] != '/')
			continue;
		if (!have_library && !strncmp(base_name(entry.path), "libpython3.", 11)) {
			into = library;
			have_library = true;
		} else if (!have_executable && exe[0] && !strcmp(entry.path, exe)) {
			into = executable;
			have_executable = true;
		}
		if (!into)
			continue;
		into->start = entry.start;
		into->end = entry.end;
		into->dev = (uint32_t)(entry.dev_major << 20 | entry.dev_minor);
		into->inode = entry.inode;
		snprintf(into->path, sizeof(into->path), "%s", entry.path);
	}
	fclose(maps);
	return (have_library ? 1 : 0) | (have_executable ? 2 : 0);
}

/* The file's symbols, read once per file (by its identity). */
static struct py_file *file_of(struct cp_python *py, pid_t pid, const struct mapped *m)
{
	uint64_t key = (uint64_t)m->dev << 40 ^ m->inode;
	char path[PATH_MAX + 64];
	struct py_file *f;
	struct node *n;

	for (n = py->files.bucket_count ? py->files.buckets[slot_of(&py->files, key)] : NULL; n; n = n->next) {
		f = (struct py_file *)n;
		if (n->key == key && f->dev == m->dev && f->inode == m->inode)
			return f;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->node.key = key;
	f->dev = m->dev;
	f->inode = m->inode;
	/* Through the process: its mount namespace, and a file deleted since it was mapped. */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	f->error = read_file(f, path);
	if (f->error) {
		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
		f->error = read_file(f, path);
	}
	if (table_add(&py->files, &f->node)) {
		free(f);
		return NULL;
	}
	return f;
}

/*
 * Checks a layout on the live process: the runtime's newest interpreter
 * and every thread state of it pointing back at it, and a code object in
 * the first frame found. 0, or -EPROTO when it does not hold.
 */
static int validate(pid_t pid, const struct cp_py_proc *l)
{
	uint64_t interp, tstate, frame, code, mask = l->flags & CP_PY_TAGGED_CODE ? ~3ull : ~0ull;
	unsigned int threads = 0, frames;
	bool code_checked = false;
	uint8_t owner;

	interp = read_u64(pid, l->runtime + l->runtime_interpreters_head);
	if (!interp)
		return -EPROTO;
	for (tstate = read_u64(pid, interp + l->interp_threads_head); tstate && threads < THREADS_CHECKED_MAX;
	     tstate = read_u64(pid, tstate + l->tstate_next), threads++) {
		if (read_u64(pid, tstate + l->tstate_interp) != interp)
			return -EPROTO;
		if (code_checked)
			continue;
		frame = read_u64(pid, tstate + l->tstate_frame);
		if (frame && (l->flags & CP_PY_CFRAME))
			frame = read_u64(pid, frame + l->cframe_current_frame);
		for (frames = 0; frame && frames < 16 && !code_checked; frames++) {
			owner = 0;
			if (l->frame_owner != CP_PY_NO_OFFSET &&
			    read_memory(pid, frame + l->frame_owner, &owner, 1))
				return -EPROTO;
			if (owner < 3) {
				code = read_u64(pid, frame + l->frame_code) & mask;
				if (!code || read_u64(pid, code + 8) != l->code_type)
					return -EPROTO;
				code_checked = true;
			}
			frame = read_u64(pid, frame + l->frame_previous);
		}
	}
	return threads ? 0 : -EPROTO;
}

/* The layout of pid's interpreter: 0 (Python), -ENOENT (not Python), or another -errno. */
static int detect(struct cp_python *py, pid_t pid, struct cp_py_proc *out, char *what, size_t what_len)
{
	struct mapped library, executable;
	const struct mapped *m = NULL;
	struct py_file *f = NULL;
	uint64_t bias, hex;
	uint32_t version;
	uint8_t *debug;
	size_t debug_len;
	int found, err, i;

	found = find_interpreter_file(pid, &library, &executable);
	if (found < 0)
		return found;
	for (i = 0; i < 2 && !m; i++) {
		const struct mapped *candidate = i == 0 ? &library : &executable;

		if (!(found & (1 << i)))
			continue;
		f = file_of(py, pid, candidate);
		if (f && !f->error && f->runtime)
			m = candidate;
	}
	if (!m)
		return -ENOENT;
	snprintf(what, what_len, "%s", base_name(m->path));
	bias = m->start - f->load_vaddr;
	if (f->py_version) {
		hex = read_u64(pid, bias + f->py_version);
		if (hex >> 24 != 3)
			return -EPROTO;
		version = CP_PY_VERSION(3, hex >> 16 & 0xff);
	} else if (cp_py_layout__version_of_name(base_name(m->path), &version)) {
		return -EPROTO;
	}
	if (version >= CP_PY_VERSION(3, 13)) {
		debug_len = cp_py_layout__debug_offsets_size();
		debug = malloc(debug_len);
		if (!debug)
			return -ENOMEM;
		err = read_memory(pid, bias + f->runtime, debug, debug_len);
		if (!err)
			err = cp_py_layout__from_debug_offsets(debug, debug_len, version, out);
		free(debug);
	} else {
		err = cp_py_layout__table(version, out);
	}
	if (err) {
		out->version = version;
		return err == -ENOMEM ? err : -ENOTSUP;
	}
	out->runtime = bias + f->runtime;
	out->code_type = f->code_type ? bias + f->code_type : 0;
	if (!out->code_type)
		return -ENOTSUP;
	/* The process runs meanwhile: a thread list changing under a read is tried again. */
	for (i = 0, err = -EPROTO; i < VALIDATE_TRIES && err; i++)
		err = validate(pid, out);
	return err ? -ENOTSUP : 0;
}

static void kernel_write(struct cp_python *py, uint32_t pid, const struct cp_py_proc *layout)
{
	int err;

	if (!py->tracer)
		return;
	err = bpf_map__update_elem(py->tracer->skel->maps.py_procs, &pid, sizeof(pid), layout,
				   sizeof(*layout), BPF_ANY);
	if (err)
		say(py, CP_LOG_WARN, "pid %u: cannot tell the walker about it: %s", pid, strerror(-err));
}

static struct py_process *process_of(const struct cp_python *py, uint32_t pid)
{
	return (struct py_process *)table_find(&py->processes, pid);
}

/* A fresh state for pid, replacing any (a process that exec'd, a reused pid). */
static struct py_process *new_process(struct cp_python *py, uint32_t pid, const struct cp_py_proc *layout)
{
	struct py_process *p = calloc(1, sizeof(*p)), *old;

	if (!p)
		return NULL;
	old = (struct py_process *)table_take(&py->processes, pid);
	if (old)
		free_process(&old->node);
	p->node.key = pid;
	p->layout = *layout;
	if (table_add(&py->processes, &p->node)) {
		free(p);
		return NULL;
	}
	return p;
}

/* Looks at pid and tells the walker: 1 Python, 0 not, or -errno (locked). */
static int look_at(struct cp_python *py, uint32_t pid)
{
	struct cp_py_proc layout = { 0 };
	char what[PATH_MAX] = "";
	int err;

	err = detect(py, (pid_t)pid, &layout, what, sizeof(what));
	if (err == -ESRCH)
		return err;
	if (err) {
		if (err == -ENOTSUP) {
			py->stats.processes_unknown++;
			say(py, CP_LOG_WARN, "pid %u: %s: CPython %u.%u %s: no Python stacks", pid, what,
			    layout.version >> 8, layout.version & 0xff,
			    layout.version && (layout.version < CP_PY_VERSION(3, 10) ||
					       layout.version > CP_PY_VERSION(3, 14)) ?
			    "is not one the walker knows" : "has a layout the walker does not recognize");
		}
		memset(&layout, 0, sizeof(layout)); /* version 0: not Python, not asked again */
		kernel_write(py, pid, &layout);
		/* Python no more (an exec): its stacks are of another program. */
		if (process_of(py, pid))
			free_process(table_take(&py->processes, pid));
		return err == -ENOENT || err == -ENOTSUP || err == -EPROTO ? 0 : err;
	}
	if (getrandom(&layout.seed, sizeof(layout.seed), GRND_NONBLOCK) != sizeof(layout.seed))
		layout.seed = (uint64_t)pid << 32 ^ layout.runtime;
	if (!new_process(py, pid, &layout))
		return -ENOMEM;
	py->stats.processes++;
	say(py, CP_LOG_INFO, "pid %u: CPython %u.%u (%s): Python stacks on", pid, layout.version >> 8,
	    layout.version & 0xff, what);
	kernel_write(py, pid, &layout);
	return 1;
}

int cp_python__add_pid(struct cp_python *py, pid_t pid)
{
	int ret;

	if (!py || pid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&py->lock);
	ret = look_at(py, (uint32_t)pid);
	pthread_mutex_unlock(&py->lock);
	return ret;
}

/* The state of pid, from the kernel's entry when this process did not look at it (a fork). */
static struct py_process *known_process(struct cp_python *py, uint32_t pid)
{
	struct py_process *p = process_of(py, pid);
	struct cp_py_proc layout;

	if (p || !py->tracer)
		return p;
	if (bpf_map__lookup_elem(py->tracer->skel->maps.py_procs, &pid, sizeof(pid), &layout,
				 sizeof(layout), 0) || !layout.version)
		return NULL;
	return new_process(py, pid, &layout);
}

/* ---- resolution ---------------------------------------------------------------------------- */

static size_t code_header_len(const struct cp_py_proc *l)
{
	uint32_t fields[] = { l->code_filename, l->code_name, l->code_qualname, l->code_linetable,
			      l->code_firstlineno };
	size_t i, end = 16;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (fields[i] != CP_PY_NO_OFFSET && fields[i] + 8u > end)
			end = fields[i] + 8u;
	return end <= CODE_HEADER_MAX ? end : 0;
}

static struct code_fingerprint fingerprint_of(const struct cp_py_proc *l, const uint8_t *header)
{
	struct code_fingerprint fp = {
		.type = field_u64(header, 8),
		.filename = field_u64(header, l->code_filename),
		.name = field_u64(header, l->code_name),
		.qualname = l->code_qualname != CP_PY_NO_OFFSET ? field_u64(header, l->code_qualname) : 0,
		.linetable = field_u64(header, l->code_linetable),
	};

	memcpy(&fp.firstlineno, header + l->code_firstlineno, sizeof(fp.firstlineno));
	return fp;
}

static bool same_code(const struct code_fingerprint *a, const struct code_fingerprint *b)
{
	return a->type == b->type && a->filename == b->filename && a->name == b->name &&
	       a->qualname == b->qualname && a->linetable == b->linetable &&
	       a->firstlineno == b->firstlineno;
}

/* A code object read from its header: names and line table (what cannot be read is marked). */
static struct py_code *read_code(struct cp_python *py, struct py_process *p, uint64_t address,
				 const struct code_fingerprint *fp)
{
	const struct cp_py_proc *l = &p->layout;
	pid_t pid = (pid_t)p->node.key;
	struct py_code *code = calloc(1, sizeof(*code));

	if (!code)
		return NULL;
	code->node.key = address;
	code->fingerprint = *fp;
	if (fp->type != l->code_type) {
		code->unreadable = true; /* not a code object (any more) */
		return code;
	}
	code->file = read_string(py, pid, l, fp->filename);
	code->function = read_string(py, pid, l, fp->qualname ? fp->qualname : fp->name);
	if (!code->file || !code->function ||
	    read_bytes(pid, l, fp->linetable, &code->lines, &code->lines_len))
		code->unreadable = true;
	return code;
}

/* The line of a frame: 0 when the instruction has none, or is not known. */
static int32_t line_of(const struct cp_py_proc *l, const struct py_code *code, uint32_t instr)
{
	int64_t lasti;
	int line;

	if (l->flags & CP_PY_FRAME_OBJECTS) {
		lasti = (int32_t)instr; /* f_lasti: -1 before the first instruction */
	} else {
		if (instr == CP_PY_INSTR_UNKNOWN)
			return 0;
		lasti = ((int64_t)instr - l->code_adaptive) / 2;
		if (lasti < 0)
			lasti = -1; /* before the first instruction: the function's first line */
	}
	if (lasti > INT32_MAX)
		return 0;
	line = cp_py_lines__line(l->version, code->lines, code->lines_len, code->fingerprint.firstlineno,
				 (int32_t)lasti);
	return line > 0 ? line : 0;
}

/* Stacks resolved with the code object at address: sent again by the kernel when next seen. */
static void forget_stacks_with(struct cp_python *py, struct py_process *p, uint64_t address)
{
	size_t i;
	uint32_t f;

	for (i = 0; i < p->stacks.bucket_count; i++) {
		struct node *n;

		for (n = p->stacks.buckets[i]; n; n = n->next) {
			struct py_stack *s = (struct py_stack *)n;

			for (f = 0; f < s->depth && s->code[f] != address; f++)
				;
			if (f < s->depth && py->tracer)
				bpf_map__delete_elem(py->tracer->skel->maps.py_stacks_seen, &n->key,
						     sizeof(n->key), 0);
		}
	}
}

/* The stack's code headers, read in one call; a frame whose read failed is zeroed. */
static void read_headers(struct cp_python *py, pid_t pid, const struct cp_py_stack_event *e, size_t len)
{
	struct iovec local[CP_PY_STACK_MAX], remote[CP_PY_STACK_MAX];
	uint32_t i, depth = e->depth;
	ssize_t n;

	for (i = 0; i < depth; i++) {
		local[i] = (struct iovec){ .iov_base = py->headers[i], .iov_len = len };
		remote[i] = (struct iovec){ .iov_base = (void *)(uintptr_t)e->code[i], .iov_len = len };
	}
	n = depth ? process_vm_readv(pid, local, depth, remote, depth, 0) : 0;
	if (n == (ssize_t)(len * depth))
		return;
	/* It stops at the first frame it cannot read: the rest one by one. */
	for (i = n > 0 ? (uint32_t)((size_t)n / len) : 0; i < depth; i++)
		if (read_memory(pid, e->code[i], py->headers[i], len))
			memset(py->headers[i], 0, len);
}

static void resolve(struct cp_python *py, struct py_process *p, const struct cp_py_stack_event *e)
{
	const struct cp_py_proc *l = &p->layout;
	size_t len = code_header_len(l);
	struct py_stack *s, *old;
	uint32_t i;

	s = calloc(1, sizeof(*s));
	if (!s || !len) {
		free(s);
		py->stats.stacks_unresolved++;
		return;
	}
	s->node.key = e->stack_id;
	s->depth = e->depth;
	s->truncated = e->flags & CP_PY_STACK_TRUNCATED;
	s->unreadable = e->flags & CP_PY_STACK_UNREADABLE;
	read_headers(py, (pid_t)p->node.key, e, len);
	for (i = 0; i < e->depth; i++) {
		struct code_fingerprint fp = fingerprint_of(l, py->headers[i]);
		struct py_code *code = (struct py_code *)table_find(&p->codes, e->code[i]);
		struct cp_py_frame *frame = &s->frames[i];

		s->code[i] = e->code[i];
		/*
		 * Another code object at the address: the one cached was freed and the
		 * address reused. Anything else there (memory freed, the process gone):
		 * the one cached is the last code object it held.
		 */
		if (code && !same_code(&code->fingerprint, &fp) && fp.type == l->code_type) {
			py->stats.code_reused++;
			forget_stacks_with(py, p, e->code[i]);
			free_code(table_take(&p->codes, e->code[i]));
			code = NULL;
		}
		if (!code) {
			code = read_code(py, p, e->code[i], &fp);
			/* Kept once read whole; what could not be is tried again by the next stack. */
			if (code && (code->unreadable || table_add(&p->codes, &code->node))) {
				free_code(&code->node);
				code = NULL;
			}
		}
		if (!code) {
			frame->file = "";
			frame->function = "";
			frame->flags = CP_PY_FRAME_UNREADABLE;
			py->stats.frames_unreadable++;
			continue;
		}
		frame->file = code->file;
		frame->function = code->function;
		frame->line = line_of(l, code, e->instr[i]);
	}
	/* Sent again (evicted from the seen map, two threads at once, a code object reused): replaced. */
	old = (struct py_stack *)table_take(&p->stacks, e->stack_id);
	if (table_add(&p->stacks, &s->node)) {
		free(s);
		free(old);
		py->stats.stacks_unresolved++;
		return;
	}
	if (!old)
		py->stats.stacks++;
	free(old);
}

/* ---- the records ----------------------------------------------------------------------------- */

static void release_hold(struct cp_python *py, uint32_t pid)
{
	if (py->tracer)
		cp_tracer__release_python_hold(py->tracer, pid);
}

/* Whether the kernel has an entry (Python or not) for pid. */
static bool kernel_knows(const struct cp_python *py, uint32_t pid)
{
	struct cp_py_proc layout;

	return py->tracer && !bpf_map__lookup_elem(py->tracer->skel->maps.py_procs, &pid, sizeof(pid),
						   &layout, sizeof(layout), 0);
}

void cp_python__observe(struct cp_python *py, const union cp_event *event)
{
	uint32_t pid;

	if (!py || !event)
		return;
	pid = event->hdr.pid;
	pthread_mutex_lock(&py->lock);
	switch (event->hdr.type) {
	case CP_EV_PY_STACK: {
		struct py_process *p = known_process(py, pid);

		if (p)
			resolve(py, p, &event->py_stack);
		else
			py->stats.stacks_unresolved++;
		break;
	}
	case CP_EV_ATTACH:
		/* A process mapping a CUDA library: its interpreter is mapped already. */
		if (!process_of(py, pid) && !kernel_knows(py, pid))
			look_at(py, pid);
		break;
	case CP_EV_PROC:
		if (event->proc.kind == CP_PROC_CUDA_INIT && !kernel_knows(py, pid)) {
			look_at(py, pid);
		} else if (event->proc.kind == CP_PROC_FORK) {
			struct py_process *parent = process_of(py, pid);

			/* The child runs its parent's interpreter (the kernel gave it a seed of its own). */
			if (parent && !process_of(py, event->proc.child_pid))
				new_process(py, event->proc.child_pid, &parent->layout);
		}
		break;
	}
	pthread_mutex_unlock(&py->lock);
	/* Held for this record (cuInit, a new stack): it has been read. */
	if (event->hdr.type == CP_EV_PY_STACK ||
	    (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_CUDA_INIT))
		release_hold(py, pid);
}

int cp_python__frames(struct cp_python *py, uint32_t pid, uint64_t stack_id, struct cp_py_frame *frames,
		      size_t max, struct cp_py_stack_info *info)
{
	struct py_process *p;
	struct py_stack *s;
	int depth = -ENOENT;

	if (!py || (max && !frames))
		return -EINVAL;
	pthread_mutex_lock(&py->lock);
	p = process_of(py, pid);
	s = p ? (struct py_stack *)table_find(&p->stacks, stack_id) : NULL;
	if (s) {
		memcpy(frames, s->frames, (max < s->depth ? max : s->depth) * sizeof(*frames));
		if (info) {
			info->depth = s->depth;
			info->truncated = s->truncated;
			info->unreadable = s->unreadable;
		}
		depth = (int)s->depth;
	}
	pthread_mutex_unlock(&py->lock);
	return depth;
}

uint32_t cp_python__version(struct cp_python *py, uint32_t pid)
{
	struct py_process *p;
	uint32_t version;

	if (!py)
		return 0;
	pthread_mutex_lock(&py->lock);
	p = process_of(py, pid);
	version = p ? p->layout.version : 0;
	pthread_mutex_unlock(&py->lock);
	return version;
}

void cp_python__forget_pid(struct cp_python *py, uint32_t pid)
{
	struct node *n;

	if (!py)
		return;
	pthread_mutex_lock(&py->lock);
	n = table_take(&py->processes, pid);
	if (n)
		free_process(n);
	pthread_mutex_unlock(&py->lock);
}

void cp_python__stats(struct cp_python *py, struct cp_python_stats *out)
{
	if (!py || !out)
		return;
	pthread_mutex_lock(&py->lock);
	*out = py->stats;
	pthread_mutex_unlock(&py->lock);
}
