/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libcuprobe's internal interface: what the library's own files, the
 * cuprobe command line (tools/) and the tests share beyond the public API
 * (cuprobe.h). Not installed, not exported from libcuprobe.so: these are
 * reachable only by linking the static libcuprobe.a, and may change at any
 * time. The output wing's part (formats, reports, the Chrome trace writer)
 * is format/format.h, included here.
 */
#ifndef CUPROBE_INTERNAL_H
#define CUPROBE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuprobe.h"
#include "format/format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options structs (libbpf's OPTS_VALID/OPTS_GET, in one place) -------- */

/*
 * Copies the caller's options struct opts (a struct of any cuprobe release,
 * starting with its size_t sz) into local, the library's own struct of
 * local_sz bytes, zeroed first: a smaller, older struct leaves the fields it
 * lacks zero. NULL opts gives all zeroes. -EINVAL when sz cannot even hold
 * sz, or when the caller's struct is larger and a byte beyond local_sz is
 * not zero (a field this library does not know was set). local->sz is then
 * local_sz.
 */
int cp_opts__copy(void *local, size_t local_sz, const void *opts);

/* cp_opts__copy into a local struct of the library's own type. */
#define CP_OPTS_COPY(local, opts) cp_opts__copy(&(local), sizeof(local), (opts))

/* ---- growable arrays ---------------------------------------------------------- */

/*
 * Room for needed elements of size bytes in the array *array points to
 * (NULL at first), which holds *capacity of them: when there is not, it is
 * reallocated to twice its capacity (first: `first`) until there is.
 * 0, or -ENOMEM with the array and its capacity as they were.
 */
int cp_array__reserve(void *array, size_t *capacity, size_t needed, size_t size, size_t first);
/* cp_array__reserve for a typed array: CP_ARRAY_RESERVE(set->files, set->capacity, n + 1, 8). */
#define CP_ARRAY_RESERVE(array, capacity, needed, first) \
	cp_array__reserve(&(array), &(capacity), (needed), sizeof(*(array)), (first))

/* ---- search trees ------------------------------------------------------------- */

/* Orders tsearch entries by the key they begin with: a uint32_t (a pid, a tid), a uint64_t. */
typedef int cp_tree_order(const void *a, const void *b);
int cp_tree__by_u32(const void *a, const void *b);
int cp_tree__by_u64(const void *a, const void *b);
/* The entry of *tree equal to *key under order, or NULL. */
void *cp_tree__find(void *const *tree, const void *key, cp_tree_order *order);
/* Takes the entry equal to *key out of *tree: it (the caller's to free), or NULL. */
void *cp_tree__take(void **tree, const void *key, cp_tree_order *order);
/*
 * The entry equal to *key, or, where there is none, a copy of *key (size
 * bytes) added to *tree, *added (where not NULL) telling which. NULL (the
 * tree as it was) when memory ran out.
 */
void *cp_tree__add(void **tree, const void *key, size_t size, cp_tree_order *order, bool *added);

/* ---- file descriptors, condition variables -------------------------------------- */

/* Closes *fd where it is open (>= 0), and marks it closed (-1). */
static inline void cp_fd__close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* A condition variable whose timed waits count on CLOCK_MONOTONIC (a clock change moves no deadline). */
static inline int cp_cond__init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t monotonic;
	int err = pthread_condattr_init(&monotonic);

	if (err)
		return err;
	err = pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
	if (!err)
		err = pthread_cond_init(cond, &monotonic);
	pthread_condattr_destroy(&monotonic);
	return err;
}

/* ---- /proc ---------------------------------------------------------------------- */

/*
 * The command name of process pid (tid 0), or of its thread tid, from
 * /proc/PID/comm or /proc/PID/task/TID/comm, newline cut: 0, or -errno
 * with out "" (the process is gone, say).
 */
int cp_proc__comm(uint32_t pid, uint32_t tid, char *out, size_t len);
/* Of /proc/PID/stat: the state letter (R, S, Z...) and the kernel's PF_* flags. */
struct cp_proc_stat {
	char state;
	unsigned int flags;
};
/* A kernel thread's flag (PF_KTHREAD, include/linux/sched.h). */
#define CP_PROC_KTHREAD 0x00200000u
/* 0, or -errno (-ENOENT: no such process). */
int cp_proc__stat(uint32_t pid, struct cp_proc_stat *out);

/* ---- discovery helpers ---------------------------------------------------- */

/* One line of /proc/PID/maps, parsed. */
struct cp_maps_entry {
	uint64_t start, end, offset, inode;
	unsigned int dev_major, dev_minor;
	char perms[5];
	const char *path; /* points into the line; "" for anonymous mappings */
};

/* Parses a maps line in place (trailing newline removed): 0 or -EINVAL. */
int cp_maps__parse_line(char *line, struct cp_maps_entry *entry);

/*
 * True when the file name of path is the library soname names, whatever its
 * version suffix: libcuda.so.1 matches libcuda.so, libcuda.so.1 and
 * libcuda.so.580.159.04 (maps show the file a symlink resolved to).
 */
bool cp_path__is_library(const char *path, const char *library_soname);

/* ---- ELF symbols ------------------------------------------------------------ */

/*
 * Opens path for reading if it is a regular file, without waiting on it (a
 * FIFO or a device from a user would block the open or the read): the fd,
 * or -errno, -EINVAL for a file of another type.
 */
int cp_file__open_regular(const char *path);

/*
 * The ELF readers below: -EINVAL when path is not a regular file, -ENOEXEC
 * when it is not ELF, -EBADMSG when it is a truncated or damaged one (its
 * headers or sections reach past its end).
 *
 * File offsets of the named function symbols of an ELF file (.dynsym, then
 * .symtab); 0 where a name is absent. Returns how many were found.
 */
int cp_elf__function_offsets(const char *path, const char *const *names, size_t count,
			     uint64_t *offsets);
/* The function symbol containing file_offset, and how far into it the offset is. */
int cp_elf__symbolize(const char *path, uint64_t file_offset, char *out, size_t out_len,
		      uint64_t *offset_in_symbol);
/* The function symbol at file_offset in the ELF file at path. */
int cp_elf__symbol_at_offset(const char *path, uint64_t file_offset, char *out, size_t out_len);
/* The defined, exported function symbols of an ELF file (malloc'd array of malloc'd names). */
int cp_elf__exported_functions(const char *path, char ***names, size_t *count);
void cp_elf__free_names(char **names, size_t count);

/* ---- Python lines (python_sites.c): stats --python ------------------------------ */

/* What the calls of one Python stack, or line, add up to. */
struct cp_py_line_sums {
	uint64_t launches;
	uint64_t kernels;          /* launches whose kernel got a bound (the timeline's) */
	uint64_t gpu_max_ns;       /* the sum of those bounds: at most this much GPU time */
	uint64_t gpu_start_ns;     /* the earliest a kernel of its started */
	uint64_t gpu_end_ns;       /* the latest one had ended by */
	uint64_t syncs;            /* syncs, queries and blocking copies' returns */
	uint64_t blocked_ns;       /* time the calling thread spent in those */
	uint64_t allocations;      /* that succeeded */
	uint64_t alloc_bytes;
	uint64_t copies;
	uint64_t copy_bytes;
};

/* Which frame names a call's line. */
enum cp_py_site_by {
	CP_PY_SITE_INNERMOST,      /* the innermost frame */
	CP_PY_SITE_OWN_CODE,       /* the innermost outside site-packages and the standard library */
};

/* One line of a process: the stacks that end there, summed. */
struct cp_py_line_row {
	uint32_t pid;
	const char *file;          /* as the interpreter names it; "" when not resolved */
	int32_t line;
	const char *function;
	bool resolved;             /* false: the stack could not be resolved, or there was none */
	bool no_stack;             /* calls that carried no Python stack (not Python, or lost) */
	uint64_t stacks;           /* distinct stacks merged here */
	uint64_t calls_truncated;  /* calls whose stack was cut at CP_PY_STACK_MAX frames */
	uint64_t window_ns;        /* the process's: its first record to its last */
	enum cp_gpu_verdict verdict; /* this line's (python_sites.c says how) */
	struct cp_py_line_sums sums;
};

struct cp_py_sites;

/* Lines named through python (which must outlive it); NULL+errno. */
struct cp_py_sites *cp_py_sites__new(struct cp_python *python, enum cp_py_site_by by);
void cp_py_sites__free(struct cp_py_sites *sites);
/* Every record (launches, syncs, copies and allocations are counted): 0 or -ENOMEM. */
int cp_py_sites__observe(struct cp_py_sites *sites, const union cp_event *event);
/* A launch's bound (the timeline's): its line's kernels and GPU time. 0 or -ENOMEM. */
int cp_py_sites__interval(struct cp_py_sites *sites, const struct cp_gpu_interval *interval);
/*
 * pid's lines, each stack resolved now (calls without a stack: one row,
 * no_stack); bounds: the timeline ran (else verdicts are unknown). *rows
 * malloc'd (the caller frees it), its strings python's. 0 or -ENOMEM.
 */
int cp_py_sites__rows(struct cp_py_sites *sites, uint32_t pid, bool bounds,
		      struct cp_py_line_row **rows, size_t *count);
void cp_py_sites__forget_pid(struct cp_py_sites *sites, uint32_t pid);

/* ---- Python (python_layout.c, python_lines.c) -------------------------------- */

/* The walker's layout of a CPython 3.10-3.12 from cuprobe's tables: 0, -ENOTSUP. */
int cp_py_layout__table(uint32_t version, struct cp_py_proc *out);
/* How many bytes of _Py_DebugOffsets cp_py_layout__from_debug_offsets reads. */
size_t cp_py_layout__debug_offsets_size(void);
/*
 * The walker's layout from an interpreter's _Py_DebugOffsets (3.13, 3.14):
 * 0; -EPROTO when they are not debug offsets, not of version, or not
 * self-consistent; -ENOTSUP for other versions and free-threaded builds.
 */
int cp_py_layout__from_debug_offsets(const void *data, size_t size, uint32_t version,
				     struct cp_py_proc *out);
/* CP_PY_VERSION from a file name (libpython3.10.so.1.0, python3.10): 0 or -ENOENT. */
int cp_py_layout__version_of_name(const char *name, uint32_t *version);
/*
 * The line of the instruction at code unit lasti of a code object whose
 * co_linetable is table and co_firstlineno firstlineno, as
 * PyCode_Addr2Line(code, lasti * 2) answers: 3.10's format, or 3.11's
 * location table for later versions. -1 when the instruction has no line
 * (or lies beyond the table), firstlineno for lasti < 0.
 */
int cp_py_lines__line(uint32_t version, const uint8_t *table, size_t len, int firstlineno,
		      int32_t lasti);

/* ---- names ------------------------------------------------------------------ */

/*
 * The kernel's mangled name embedded in an nvcc device-stub symbol
 * (_Z41__device_stub__Z14vec_add_kernelPKfS0_PfiPKfS0_Pfi -> _Z14vec_add_kernelPKfS0_Pfi);
 * -ENOENT for any other symbol.
 */
int cp_kernel_name_from_device_stub(const char *symbol, char *out, size_t out_len);

/* Demangles an Itanium C++ ABI name into out; a plain C name is copied as is. */
int cp_demangle(const char *mangled, char *out, size_t out_len);
/*
 * The demangled name without its parameters (and a template's return type):
 * _ZN2ns4gemmIfEEvPT_i -> ns::gemm<float>; a plain C name as it is.
 */
int cp_demangle_name(const char *mangled, char *out, size_t out_len);

/* ---- names as the formats write them ------------------------------------------ */

/*
 * A learned name as the record formatters write it, escaped once when the
 * name is learned rather than at every launch: JSON strings with their
 * quotes, the display name as a text line shows it. For entries of a
 * cp_names table only (cp_names__lookup, __resolve, __lookup_stub).
 */
struct cp_name_forms {
	const char *json_display;
	const char *json_mangled;
	const char *text_display;
	size_t json_display_len;
	size_t json_mangled_len;
	size_t text_display_len;
};
const struct cp_name_forms *cp_names__forms(const struct cp_name_entry *entry);
/* A name the launch probe read from the driver's record (cp_tracer_opts.name_late_handles). */
bool cp_name_event__from_driver_record(const struct cp_name_event *event);

/*
 * The one decoder of a wait status (waitpid's, or exit_code as the kernel
 * keeps it): the signal that ended the process, or 0 and its exit status.
 */
struct cp_exit {
	int signal;
	int status;
};

static inline struct cp_exit cp_exit__decode(int wait_status)
{
	if (WIFSIGNALED(wait_status))
		return (struct cp_exit){ .signal = WTERMSIG(wait_status) };
	return (struct cp_exit){ .status = WEXITSTATUS(wait_status) };
}

/*
 * The stream a call names, as the timeline keys streams: the handle, except
 * that 0 and CU_STREAM_LEGACY (1) are the legacy default stream (0), and a
 * per-thread default stream (CU_STREAM_PER_THREAD, or 0 passed to a _ptsz or
 * _ptds variant) is its thread's own: tid << 8 | 2 (a real handle is a
 * pointer, never 2 in its low byte).
 */
uint64_t cp_stream__key(uint64_t handle, uint32_t api, uint32_t tid);
/* The thread whose per-thread default stream key is, or 0. */
uint32_t cp_stream__per_thread_tid(uint64_t key);

/* ---- map rows ------------------------------------------------------------------ */

/*
 * cp_tracer__forget_pid for many processes at once: each map is walked once,
 * whatever the number of pids (the exporter retires every exit of an
 * interval together). 0, -EINVAL or -ENOMEM.
 */
int cp_tracer__forget_pids(struct cp_tracer *tracer, const uint32_t *pids, size_t count);

/*
 * cuprobe run: the ring of the kernel handles users' programs found
 * unnamed (cuprobe_kernel_name()), and the answer to one of its records:
 * the name names has or reads from the driver's record, written into the
 * map the programs read; an empty name when there is none, so the handle
 * is not asked about again. 0 or -errno.
 */
int cp_tracer__name_request_fd(const struct cp_tracer *tracer);
/*
 * Another fd the GPU agent's epoll watches (the socket COMMAND's preload
 * library reports on): fn runs on the agent thread when fd is readable,
 * and once more when the agent stops; it reads what is there and returns
 * 0 to keep watching, 1 when fd is finished (EOF: it leaves the epoll), or
 * a negative errno, which stops the agent. May be added while the agent
 * runs; the caller closes fd after cp_agent__free.
 */
typedef int (*cp_fd_fn)(void *ctx, int fd);
int cp_agent__add_fd(struct cp_agent *agent, int fd, cp_fd_fn fn, void *ctx);

/* cuprobe run with device programs: the launch-slot map (opts.launch_slots entries of u64). */
int cp_tracer__launch_slots_fd(const struct cp_tracer *tracer);
int cp_tracer__answer_name_request(struct cp_tracer *tracer, struct cp_names *names,
				   const void *record, size_t size);

/*
 * cuprobe run: a user's device programs (SEC("gpu/GLOB"), SEC("gpu.exit/GLOB")),
 * verified by the kernel with the rest of the object and translated to PTX
 * (userspace/device/ptx_jit.h) when it was loaded.
 */
struct cp_device_program_info {
	const char *name;          /* the BPF program's */
	const char *section;       /* "gpu/vec_add" */
	const char *glob;          /* "vec_add": fnmatch(3) on the kernel's name */
	bool at_exit;              /* gpu.exit/: before each exit; else at the entry */
	bool uses_shadow;          /* adds into a map's device-memory shadow or writes a ring (device/ptx_jit.h) */
	const char *function;      /* the PTX function's name (.func NAME (.param .b64 launch)) */
	const char *ptx;           /* its .func definitions, callees first */
};
size_t cp_program__device_count(const struct cp_program *program);
/*
 * Does a BPF object (ELF bytes, not loaded) hold device programs, sections
 * beginning with "gpu" (malformed ones included: the load refuses those)?
 * 1, 0, or a negative errno. For what must be set before the load.
 */
int cp_program__elf_has_device_programs(const void *elf, size_t size);
int cp_program__device(const struct cp_program *program, size_t index,
		       struct cp_device_program_info *out);

/*
 * The object's maps as the PTX names them: map index is __cuprobe_map_<index>
 * (cp_ptx__map_declarations). Only those used by a device program need an
 * address (all are arrays with BPF_F_MMAPABLE; .rodata's is frozen: map it
 * read-only).
 */
struct cp_device_map_info {
	const char *name;
	int fd;
	uint32_t flags;            /* map_flags */
	uint32_t value_size;
	uint32_t max_entries;
	bool used;                 /* by some device program */
};
size_t cp_program__device_map_count(const struct cp_program *program);
int cp_program__device_map(const struct cp_program *program, size_t index,
			   struct cp_device_map_info *out);
/* What `cuprobe run PROG --ptx` prints: a module ptxas accepts (cp_ptx__module). 0 or -errno. */
int cp_program__ptx_module(const struct cp_program *program, char **ptx);

/* ---- NCCL calls and the kernels they launched (nccl.c) ----------------------------- */

/*
 * A call that owns launches, by the seq they carry (their nccl_call): a
 * collective or send/recv (link = its seq), or a group, whose calls' work
 * its outermost ncclGroupEnd launched (link = the group's seq).
 */
struct cp_nccl_call {
	uint32_t pid;
	uint32_t link;
	uint32_t op;              /* the call's; a group's calls' common op, else CP_NCCL_GROUP_END */
	uint32_t calls;           /* 1, or the group's collectives and sends/receives */
	uint64_t comm;            /* the call's; a group's calls' common communicator, else 0 */
	uint64_t bytes;           /* the call's, or the sum of its group's */
	bool recorded;            /* record holds the call's (the group end's) record */
	uint32_t launches;        /* launches made inside it (from its record) */
	struct cp_nccl_event record;
	/* Its kernels' bounds on the timeline, as cp_nccl_calls__kernel adds them. */
	uint32_t kernels_seen;
	uint32_t kernels_bounded;
	uint64_t gpu_start_ns;    /* the earliest start_after of its kernels */
	uint64_t gpu_end_ns;      /* the latest done_by */
	/* Where its first kernel ran (the interval's stream, as its launch passed it). */
	uint64_t kernel_stream;
	int32_t kernel_device;
	uint32_t kernel_api, kernel_tid;
};

struct cp_nccl_calls;

/* A table of at most max calls (0: 65536), the oldest dropped (and counted) past it. */
struct cp_nccl_calls *cp_nccl_calls__new(size_t max);
void cp_nccl_calls__free(struct cp_nccl_calls *calls);
/* Feed it every record (only NCCL records are kept): a call is known once its record came. */
void cp_nccl_calls__observe(struct cp_nccl_calls *calls, const union cp_event *event);
/* The call a launch's nccl_call names, or NULL. */
struct cp_nccl_call *cp_nccl_calls__find(struct cp_nccl_calls *calls, uint32_t pid, uint32_t link);
/* A kernel's bound, added to the call it was the work of (returned; NULL when none is known). */
struct cp_nccl_call *cp_nccl_calls__kernel(struct cp_nccl_calls *calls,
					   const struct cp_gpu_interval *interval);
void cp_nccl_calls__forget(struct cp_nccl_calls *calls, struct cp_nccl_call *call);
void cp_nccl_calls__forget_pid(struct cp_nccl_calls *calls, uint32_t pid);
typedef void (*cp_nccl_call_fn)(void *ctx, struct cp_nccl_call *call);
/* Calls fn on every call kept, oldest first (fn must not forget it): returns how many. */
size_t cp_nccl_calls__each(struct cp_nccl_calls *calls, cp_nccl_call_fn fn, void *ctx);
/* Calls dropped because the table was full. */
uint64_t cp_nccl_calls__evicted(const struct cp_nccl_calls *calls);

#ifdef __cplusplus
}
#endif

#endif /* CUPROBE_INTERNAL_H */
