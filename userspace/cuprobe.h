/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libcuprobe: load cuprobe's BPF programs, attach them to CUDA libraries,
 * and deliver their records to consumers through the GPU agent thread.
 *
 * Shaped like libbpf: opaque objects with object__verb names, options
 * structs that start with their size, negative errno from int functions,
 * NULL with errno set from pointer functions. Nothing here prints or exits;
 * messages go to the log callback given in the options. libbpf's own
 * messages go through libbpf_set_print(), which belongs to the application:
 * this library never calls it (libbpf's default printer writes its warnings
 * and info to stderr; the cuprobe command line sets one that shows them from
 * -vv on).
 *
 * Installed as <prefix>/include/cuprobe/cuprobe.h, with the record format
 * it includes (cuprobe_events.h, cuprobe_catalogue.h); build and link with
 * `pkg-config --cflags --libs cuprobe`. Everything declared here is
 * CUPROBE_API, exported from libcuprobe.so.0; nothing else is.
 */
#ifndef CUPROBE_H
#define CUPROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "cuprobe_events.h"

struct btf;

#ifndef CUPROBE_API
#define CUPROBE_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Options structs (struct cp_tracer_opts, cp_agent_opts, cp_self_trace_opts)
 * start with size_t sz, the size of the struct the caller was built with:
 * a program built against an older, smaller struct keeps working (the
 * fields it lacks read as zero), and one built against a newer, larger
 * struct is accepted when every byte this library does not know is zero
 * (else -EINVAL). sz 0 is refused. Zero the whole struct, padding included,
 * before setting fields: CP_OPTS does.
 *
 *	CP_OPTS(cp_tracer_opts, opts, .aggregate = true, .ring_bytes = 1 << 24);
 *	struct cp_tracer *tracer = cp_tracer__open(&opts);
 */
#define CP_OPTS(TYPE, NAME, ...)						\
	struct TYPE NAME = __extension__ ({					\
		memset(&NAME, 0, sizeof(struct TYPE));				\
		(struct TYPE){ .sz = sizeof(struct TYPE), __VA_ARGS__ };	\
	})

/*
 * Every record the agent hands out, decoded and checked: a member per
 * record type (CP_RECORD_TYPES of cuprobe_events.h: launch, alloc, free,
 * copy, sync, name, proc, rt_launch, memset, event, module, vmm, attach,
 * context, ret, xid, py_stack).
 */
#define CP_EVENT_MEMBER(NAME, value, member, type, name) struct type member;
union cp_event {
	struct cp_event_header hdr;
	CP_RECORD_TYPES(CP_EVENT_MEMBER)
};
#undef CP_EVENT_MEMBER

/*
 * Check one raw ring-buffer record and copy it into *out. The kernel's bytes
 * are not trusted: an unknown type or a record shorter than its type needs
 * gives -EPROTO; names are NUL-terminated, name_len and a Python stack's
 * depth clamped.
 */
CUPROBE_API int cp_event__decode(const void *data, size_t size, union cp_event *out);

CUPROBE_API const char *cp_event_type__name(enum cp_event_type type);
/* The Python stack id a record carries (launch, sync, copy, allocation), or 0. */
CUPROBE_API uint64_t cp_event__py_stack(const union cp_event *event);
CUPROBE_API const char *cp_api__name(enum cp_api api);
CUPROBE_API const char *cp_mem_kind__name(enum cp_mem_kind kind);
CUPROBE_API const char *cp_copy_dir__name(enum cp_copy_dir dir);
CUPROBE_API const char *cp_sync_kind__name(enum cp_sync_kind kind);
CUPROBE_API const char *cp_event_op__name(enum cp_event_op op);
CUPROBE_API const char *cp_module_op__name(enum cp_module_op op);
CUPROBE_API const char *cp_vmm_op__name(enum cp_vmm_op op);
CUPROBE_API const char *cp_attach_status__name(enum cp_attach_status status);
CUPROBE_API const char *cp_context_op__name(enum cp_context_op op);
CUPROBE_API const char *cp_family__name(enum cp_family family);
/* "driver", "runtime", "nccl". */
CUPROBE_API const char *cp_library__name(enum cp_library library);
CUPROBE_API const char *cp_nccl_op__name(enum cp_nccl_op op);
/* "int8", "float32", ...: NCCL's ncclDataType_t; "unknown" beyond them. */
CUPROBE_API const char *cp_nccl_datatype__name(uint32_t datatype);
/* "sum", "prod", "max", "min", "avg"; "custom" for ops made by ncclRedOpCreatePreMulSum. */
CUPROBE_API const char *cp_nccl_redop__name(uint32_t redop);
/* Whether users' programs may attach to the family (SEC("cuda/FAMILY")). */
CUPROBE_API bool cp_family__programmable(enum cp_family family);
/* CP_FAMILY_NONE when no family has that name. */
CUPROBE_API enum cp_family cp_family__by_name(const char *name);
/* The family of an API (CP_FAMILY_NONE for the lifecycle slots). */
CUPROBE_API enum cp_family cp_api__family(enum cp_api api);
/* The API of a catalogued symbol name, or CP_API_UNKNOWN. */
CUPROBE_API enum cp_api cp_api__by_name(const char *name);

/* ---- the probe catalogue (bpf/cuprobe_catalogue.h) ------------------------ */

struct cp_catalogue_entry {
	const char *symbol;
	enum cp_family family;
	bool runtime;               /* probed in libcudart / static cudart, not libcuda */
	bool probed;                /* false: exported but deliberately not probed */
	const char *program;        /* BPF program at entry (probed only) */
	const char *return_program; /* BPF program at return, or "none" */
	const char *reason;         /* why it is not probed (excluded only) */
	enum cp_library library;    /* which library's table (driver, runtime, nccl) */
};

/* Every catalogue line, probed and excluded, driver first: returns how many. */
CUPROBE_API size_t cp_catalogue__entries(const struct cp_catalogue_entry **entries);
/* The line of symbol, or NULL when the catalogue does not name it. */
CUPROBE_API const struct cp_catalogue_entry *cp_catalogue__find(const char *symbol);
/* The traced family whose export-name prefix symbol has, or CP_FAMILY_NONE. */
CUPROBE_API enum cp_family cp_catalogue__family_of_export(const char *symbol);
/*
 * An alias's catalogued name (CP_ALIAS_PREFIXES: pncclAllReduce ->
 * ncclAllReduce) written to buf; NULL when symbol is no alias (or buf is
 * too small).
 */
CUPROBE_API const char *cp_catalogue__canonical(const char *symbol, char *buf, size_t size);

/*
 * What a driver exports in a traced family without a probe: for each such
 * export, calls fn with the symbol and its catalogue line (the exclusion and
 * its reason), or NULL when the catalogue does not know it at all.
 * Returns how many exports were in traced families, or a negative errno.
 */
typedef void (*cp_unprobed_fn)(void *ctx, const char *symbol,
			       const struct cp_catalogue_entry *excluded);
CUPROBE_API int cp_catalogue__unprobed(const char *const *exports, size_t count, cp_unprobed_fn fn,
				       void *ctx);

/* ---- logging ------------------------------------------------------------ */

enum cp_log_level { CP_LOG_WARN = 0, CP_LOG_INFO = 1, CP_LOG_DEBUG = 2 };
typedef void (*cp_log_fn)(void *ctx, enum cp_log_level level, const char *message);

/* ---- discovery: which libcuda.so.1 files to attach to ------------------- */

/* A set of distinct library files, deduplicated by (device, inode). */
struct cp_lib_set;

CUPROBE_API struct cp_lib_set *cp_lib_set__new(void);
CUPROBE_API void cp_lib_set__free(struct cp_lib_set *set);
/* Adds path if it is a regular file not already in the set: 1 added, 0 known, <0 error. */
CUPROBE_API int cp_lib_set__add(struct cp_lib_set *set, const char *path);
CUPROBE_API size_t cp_lib_set__count(const struct cp_lib_set *set);
CUPROBE_API const char *cp_lib_set__path(const struct cp_lib_set *set, size_t index);

/*
 * Every file named `soname` that process pid has mapped, reached through
 * /proc/PID/root so paths inside containers work. Returns how many were
 * added, or -ESRCH when the process is gone, -EACCES/-EPERM without rights.
 */
CUPROBE_API int cp_discover__process(struct cp_lib_set *set, pid_t pid, const char *soname);
/* The same for every process on the host; processes that vanish are skipped. */
CUPROBE_API int cp_discover__all_processes(struct cp_lib_set *set, const char *soname);
/*
 * Where a program started now would find soname: the LD_LIBRARY_PATH given,
 * the executable's DT_RPATH/DT_RUNPATH (with $ORIGIN), the ld.so cache and
 * the standard directories. executable and ld_library_path may be NULL.
 */
CUPROBE_API int cp_discover__for_exec(struct cp_lib_set *set, const char *soname,
				      const char *executable, const char *ld_library_path);

/* The pids of processes that have soname mapped now: returns how many (up to max). */
CUPROBE_API int cp_discover__processes_using(const char *soname, pid_t *pids, size_t max);

/* ---- the tracer: BPF object, probes, target set -------------------------- */

struct cp_tracer;

struct cp_tracer_opts {
	size_t sz;                  /* sizeof(struct cp_tracer_opts): see CP_OPTS */
	bool system_wide;           /* every process; else only added pids and their forks */
	size_t ring_bytes;          /* ring buffer size, a power of two >= page size; 0 = 8 MiB */
	uint64_t wakeup_bytes;      /* wake the agent once this much is unread; 0 = default */
	uint64_t wakeup_latency_ns; /* ... or once this long passed since the last wakeup */
	bool wake_every_record;     /* wake on every record instead (costs ~1.4 us a record) */
	bool classic_uprobes;       /* one perf-event uprobe per symbol even where the kernel
				     * has uprobe_multi links (6.6+) */
	/* Aggregation (cuprobe stats/top): counts in BPF maps instead of a record per call. */
	bool aggregate;             /* per-kernel, per-API and memory maps */
	bool no_call_records;       /* stream only names and lifecycle records */
	bool measure_latency;       /* return probes on every API: latency histograms, errors */
	bool record_stacks;         /* allocating user stacks (frame pointers needed) */
	/* A CP_EV_RETURN record at every API's return: calls as slices (--perfetto). */
	bool return_records;
	/* Benches only: parts of the launch probe left out (enum cp_bench_omit); 0 always else. */
	uint32_t bench_omit;
	cp_log_fn log;
	void *log_ctx;
	/*
	 * Attach events: the kernel reports CUDA driver files mapped after the
	 * start, and the agent given this tracer attaches the catalogue to them.
	 */
	bool attach_events;
	/*
	 * With attach events and not system_wide: a traced process that maps a
	 * driver file no probe covers is stopped (SIGSTOP) until its probes are
	 * live, then continued (SIGCONT), so none of its calls is missed. A
	 * guardian process continues held processes if cuprobe dies.
	 */
	bool hold_new_mappers;
	/*
	 * With record_stacks and not system_wide: a traced process is stopped at
	 * its first recorded stack, and again at the first one after it maps new
	 * code, until the consumer has read its memory map (a process that exits
	 * at once would leave its stacks unnamed) and calls
	 * cp_tracer__maps_read. Use it for processes cuprobe started: a
	 * job-control shell would see its job stop.
	 */
	bool hold_for_stacks;
	/*
	 * Not system_wide: a traced process is stopped at cuInit until the
	 * consumer has read its memory map at the CP_PROC_CUDA_INIT record and
	 * calls cp_tracer__maps_read, so the stacks a user's program records
	 * (cuprobe run) are named after it exits. For processes cuprobe started.
	 */
	bool hold_at_init;
	/* With attach events: also libcudart files and executables (static cudart). */
	bool runtime_attach;
	/*
	 * cuprobe's own programs only on these families (bit 1 << enum
	 * cp_family; 0 = all): cuprobe run keeps the naming, context and
	 * cuInit probes its users' programs rely on.
	 */
	uint64_t families;
	/*
	 * Python stacks at launches, syncs, copies and allocations of the
	 * processes a cp_python (below) found to be CPython: records carry a
	 * stack id, and CP_EV_PY_STACK records the frames of each new one.
	 * With hold_for_stacks (and not system_wide), a process is also held
	 * at cuInit until it is checked, and at each new stack until it is
	 * resolved: the agent given the cp_python does both.
	 */
	bool python_stacks;
	/*
	 * cuprobe run with device programs: the launch-slot map's entries and
	 * the magic its launch path writes before a launch's parameters; the
	 * launch probe then puts each launch's seq in its slot. 0: none.
	 */
	uint32_t launch_slots;
	uint64_t launch_slot_magic;
	/*
	 * For processes traced after they started (-p, system-wide): a handle's
	 * first launch reads its name from the driver's record while the
	 * process is inside the call, into a CP_EV_NAME record whose api is the
	 * launch's (cp_names__observe checks it), so a handle made before the
	 * attach is named even when its process exits before its records are
	 * read. One hash look-up per launch.
	 */
	bool name_late_handles;
	/*
	 * With no_call_records: still stream the records that prove kernels
	 * done (stream, context and event syncs, completed queries, blocking
	 * copies), each waking the agent: cuprobe run reads device rings then.
	 */
	bool stream_proving;
};

/* opts may be NULL: every option zero. */
CUPROBE_API struct cp_tracer *cp_tracer__open(const struct cp_tracer_opts *opts);
CUPROBE_API void cp_tracer__free(struct cp_tracer *tracer);

/* What attaching to one library did. */
struct cp_attach_report {
	unsigned int attached;  /* probes attached */
	unsigned int missing;   /* symbols the library lacks (skipped, not fatal) */
	char missing_names[1024]; /* comma-separated, truncated with "..." */
};

/* Attach every driver-API probe to one libcuda file. -ENOENT when no probe attached. */
CUPROBE_API int cp_tracer__attach_driver(struct cp_tracer *tracer, const char *lib_path,
					 struct cp_attach_report *report);
/* Attach the cudaLaunchKernel probe to a libcudart file or an executable with static cudart. */
CUPROBE_API int cp_tracer__attach_runtime(struct cp_tracer *tracer, const char *path,
					  struct cp_attach_report *report);
/* Attach the NCCL probes (the nccl family) to a libnccl file. -ENOENT when none attached. */
CUPROBE_API int cp_tracer__attach_nccl(struct cp_tracer *tracer, const char *path,
				       struct cp_attach_report *report);
/* Add a process to the traced set (its later forks follow). */
CUPROBE_API int cp_tracer__add_pid(struct cp_tracer *tracer, pid_t pid);
CUPROBE_API int cp_tracer__ring_fd(const struct cp_tracer *tracer);
/* Kernel links held (a uprobe_multi link covers many symbols). */
CUPROBE_API unsigned int cp_tracer__link_count(const struct cp_tracer *tracer);
/* Probes attached: symbols, entry and return probes counted apart. */
CUPROBE_API unsigned int cp_tracer__probe_count(const struct cp_tracer *tracer);

/* Sums of the BPF-side per-CPU counters. */
struct cp_counters {
	uint64_t api_hits[CP_API_MAX];
	uint64_t records_attempted;
	uint64_t records_lost;
	uint64_t pending_overflow;
	uint64_t pending_missed;
	uint64_t targets_overflow;
	uint64_t filtered;
	uint64_t kernel_stats_full;
	uint64_t api_stats_full;
	uint64_t mem_stats_full;
	uint64_t live_allocs_full;
	uint64_t stacks_lost;
	uint64_t call_start_full;
	uint64_t vmm_full;
	uint64_t vmm_unknown;
	uint64_t device_stats_full;  /* per-device memory or copy updates that did not fit */
	uint64_t hold_failed;
	uint64_t driver_mappings;   /* attach events the BPF side emitted */
	uint64_t nccl_too_deep;     /* NCCL calls nested past a thread's stack (not recorded) */
	uint64_t nccl_unmatched;    /* NCCL returns whose entry was lost, entries whose return was */
	uint64_t nccl_comms_full;   /* NCCL communicators not kept: rank and size unknown */
	uint64_t nccl_stats_full;   /* NCCL calls of (pid, communicator, op) rows that did not fit */
	/* --python (enum cp_counter's CP_CNT_PY_* say what each counts). */
	uint64_t py_walks;
	uint64_t py_no_frames;
	uint64_t py_truncated;
	uint64_t py_unreadable;
	uint64_t py_new_stacks;
	uint64_t py_stacks_lost;
	uint64_t py_seen_full;
	uint64_t py_collisions;
	uint64_t py_busy;
};
CUPROBE_API int cp_tracer__read_counters(const struct cp_tracer *tracer, struct cp_counters *out);

/*
 * Handle one attach event (the agent does this when given the tracer):
 * reach the file through the process (/proc/PID/fd, map_files, root),
 * attach the driver catalogue (or the runtime probe) unless its inode is
 * already covered, mark it covered for the BPF side, and continue the
 * process if it was held. Fills the event's outcome fields. 0 or -errno.
 */
CUPROBE_API int cp_tracer__handle_attach(struct cp_tracer *tracer, struct cp_attach_event *event);
/* Processes of the traced set still alive (COMMAND's tree, -p targets and their forks). */
CUPROBE_API int cp_tracer__live_targets(const struct cp_tracer *tracer);
/*
 * hold_for_stacks: the consumer is about to read pid's memory map (call it
 * before reading, so code mapped meanwhile still counts as new)...
 */
CUPROBE_API int cp_tracer__maps_reading(struct cp_tracer *tracer, uint32_t pid);
/* ... and has read it: continue pid if a stack held it. */
CUPROBE_API int cp_tracer__maps_read(struct cp_tracer *tracer, uint32_t pid);
/* Continue every process still held (no attach will come for it). Returns how many. */
CUPROBE_API int cp_tracer__release_held(struct cp_tracer *tracer);

/* ---- users' programs (cuprobe run) --------------------------------------- */

/*
 * A user's BPF object: programs in SEC("cuda/FAMILY") or
 * SEC("cuda.return/FAMILY") (bpf/cuprobe.bpf.h), attached with the
 * tracer's own programs to every variant of the family's APIs in every
 * driver file, including the ones attach events bring later.
 */
struct cp_program;

struct cp_program_opts {
	size_t sz;             /* sizeof(struct cp_program_opts): see CP_OPTS */
	const char *name;      /* in messages (the file name); default "program" */
	char *log_buf;         /* the verifier's log when it refuses a program */
	size_t log_size;
	char *error;           /* one line saying why loading failed */
	size_t error_size;
	/* "NAME=VALUE": a const volatile integer of the object set before the load. */
	const char *const *settings;
	size_t setting_count;
};

/*
 * Checks, opens and loads the object at elf (copied), sharing the
 * runtime's maps. Call before attaching any library. The tracer owns the
 * program (freed by cp_tracer__free). NULL with errno set and opts->error
 * filled when it is not a BPF object, has no BTF or no CUDA programs, uses
 * an unknown section, or the kernel refuses it.
 */
CUPROBE_API struct cp_program *cp_tracer__load_program(struct cp_tracer *tracer, const void *elf,
						       size_t size,
						       const struct cp_program_opts *opts);
/* The object's BTF: the types of its records and maps. */
CUPROBE_API const struct btf *cp_program__btf(const struct cp_program *program);

struct cp_program_ring_info {
	const char *name;
	int fd;
	uint32_t type_id;      /* BTF type of its records (CUPROBE_RING); 0: not declared */
	size_t record_size;
	uint64_t lost;         /* records that did not fit (cuprobe_ring_reserve/output) */
	bool lost_counted;     /* false: written without the SDK's helpers, losses unknown */
};
CUPROBE_API size_t cp_program__ring_count(const struct cp_program *program);
CUPROBE_API int cp_program__ring(const struct cp_program *program, size_t index,
				 struct cp_program_ring_info *out);

/* A map of the program other than rings, internal and shared maps. */
struct cp_program_map_info {
	const char *name;
	int type;              /* enum bpf_map_type */
	int fd;
	uint32_t key_size, value_size, max_entries;
	uint32_t key_type_id, value_type_id; /* BTF; 0 when not declared */
	bool per_cpu;
};
CUPROBE_API size_t cp_program__map_count(const struct cp_program *program);
CUPROBE_API int cp_program__map(const struct cp_program *program, size_t index,
				struct cp_program_map_info *out);

/* Entries of a map: count keys and values; per-CPU values cpus each. */
struct cp_map_entries {
	size_t count;
	uint32_t key_size, value_size;
	size_t value_stride;   /* bytes between per-CPU copies of a value */
	size_t cpus;           /* 1, or the possible CPUs of a per-CPU map */
	unsigned char *keys;   /* count * key_size */
	unsigned char *values; /* count * cpus * value_stride */
};

/*
 * A map read a batch at a time, in the map's order, so that memory stays
 * bounded whatever its size (an array of millions of large values).
 */
struct cp_map_reader;
struct cp_map_reader_opts {
	size_t sz;             /* sizeof(struct cp_map_reader_opts): see CP_OPTS */
	size_t batch_bytes;    /* keys and values read at a time, about; 0 = 1 MiB */
	/*
	 * Leave out an array's entries whose value is all zero (on every CPU):
	 * an array has every key, and such an entry was never written.
	 */
	bool skip_zero;
};
/* NULL with errno set: -EOPNOTSUPP for map types whose entries cannot be read this way. */
CUPROBE_API struct cp_map_reader *cp_program__map_reader(const struct cp_program *program,
							 size_t index,
							 const struct cp_map_reader_opts *opts);
/*
 * The next entries into *out, valid until the next call or the free: how
 * many (0 at the end), or -errno. A key deleted meanwhile is skipped.
 */
CUPROBE_API int cp_map_reader__next(struct cp_map_reader *reader, struct cp_map_entries *out);
CUPROBE_API void cp_map_reader__free(struct cp_map_reader *reader);

/* A CUDA library file the tracer probed or considered. */
struct cp_traced_file {
	char path[CP_PATH_MAX];
	uint32_t dev;             /* the kernel's dev_t */
	uint64_t inode;
	bool runtime;             /* cudaLaunchKernel probe, not the driver catalogue */
	enum cp_library library;  /* which table of the catalogue it got */
	bool at_start;            /* attached before tracing started */
	enum cp_attach_status status;
	int error;                /* negative errno when status is FAILED */
	unsigned int probes;
	uint64_t first_mapped_ns; /* attach events: the first mapping (CLOCK_MONOTONIC) */
	uint64_t probes_live_ns;  /* when its probes were live */
	unsigned int early_processes; /* processes that mapped it before its probes were live */
	unsigned int held_processes;  /* of those, held until they were (none missed) */
};
/* The files attached or considered so far: copies up to max, returns how many there are. */
CUPROBE_API size_t cp_tracer__files(struct cp_tracer *tracer, struct cp_traced_file *out,
				    size_t max);
/* How uprobes are attached: "uprobe_multi" or "classic". */
CUPROBE_API const char *cp_tracer__attach_mode(const struct cp_tracer *tracer);

/* ---- aggregation: reading the BPF maps ------------------------------------ */

/*
 * Rows of the aggregation maps, copied field by field from the BPF side's
 * values: their layout is this header's, whatever the BPF maps hold.
 */

/* Launches of one kernel (or CUDA graph) handle by one process. */
struct cp_kernel_row {
	uint32_t pid;
	uint32_t graph;           /* 1 when handle is a CUgraphExec */
	uint64_t handle;          /* the CUfunction/CUkernel launched, or the CUgraphExec */
	uint64_t launches;
	uint64_t threads;         /* sum of grid x block over the launches */
	int32_t device;           /* of the launching threads' current context; -1 when not known */
	uint32_t pad;
};

/* One process's allocations on one device (the cuMemAlloc* family; VMM is per process). */
struct cp_device_mem_row {
	uint32_t pid;
	int32_t device;           /* -1 when not known */
	uint64_t live_bytes;
	uint64_t peak_bytes;
	uint64_t allocations;
	uint64_t frees;
};

/* One process's NCCL calls of one operation on one communicator (calls as the program made them). */
struct cp_nccl_row {
	uint32_t pid;
	uint32_t op;              /* enum cp_nccl_op */
	uint64_t comm;            /* ncclComm_t; 0 for group calls */
	uint64_t comm_id;         /* NCCL's hash of its unique id; 0 when not known */
	int32_t rank, nranks;     /* -1 when not known */
	int32_t device;           /* the communicator's device; -1 when not known */
	uint32_t pad;
	uint64_t calls;
	uint64_t errors;          /* calls that returned other than ncclSuccess */
	uint64_t bytes;           /* count x datatype size, summed */
	uint64_t enqueue_ns;      /* entry to return, summed */
	uint64_t launches;        /* launches made inside the calls */
	uint64_t copies;          /* copies made inside the calls (one-rank NCCL's) */
	uint64_t no_gpu_work;     /* ungrouped collectives that launched and copied nothing */
};

/* One process's copies in one direction, issued with a device current. */
struct cp_copy_row {
	uint32_t pid;
	int32_t device;
	uint32_t direction;       /* enum cp_copy_dir */
	uint32_t pad;
	uint64_t copies;          /* a batch counts each of its copies */
	uint64_t bytes;
};

/* Calls of one API by one process. */
struct cp_api_row {
	uint32_t pid;
	uint32_t api;             /* enum cp_api */
	uint64_t calls;
	uint64_t timed;           /* calls whose return was seen (measure_latency) */
	uint64_t errors;          /* of those, returned a CUresult other than 0 */
	uint64_t total_ns;        /* time in those calls */
	uint64_t histogram[CP_HIST_BUCKETS]; /* their durations, log2 buckets of ns */
};

/*
 * Device memory of one process: cuMemAlloc*, managed and stream-ordered
 * allocations, and the physical memory of VMM handles (live from
 * cuMemCreate until the handle is released and every mapping of it
 * unmapped). Reserved address ranges and page-locked host memory are
 * counted apart.
 */
struct cp_mem_row {
	uint32_t pid;
	uint32_t pad;
	uint64_t live_bytes;            /* device memory, VMM physical memory included */
	uint64_t peak_bytes;
	uint64_t live_allocations;      /* device allocations live (a VMM handle counts as one) */
	uint64_t host_live_bytes;       /* page-locked host memory */
	uint64_t allocations;           /* device allocation calls that succeeded (cuMemCreate too) */
	uint64_t frees;                 /* device frees, and VMM handles freed */
	uint64_t unknown_frees;         /* device frees of pointers allocated before tracing */
	uint64_t vmm_live_bytes;        /* of live_bytes, physical memory of VMM handles */
	uint64_t reserved_bytes;        /* virtual address ranges reserved (cuMemAddressReserve) */
	uint64_t host_live_allocations; /* page-locked host allocations live */
	uint64_t vmm_peak_bytes;        /* the most VMM physical memory live at once */
};

/* One allocation still live. */
struct cp_live_alloc {
	uint32_t pid;
	uint32_t kind;            /* enum cp_mem_kind */
	uint64_t ptr;
	uint64_t bytes;
	int64_t stack_id;         /* for cp_tracer__stack; < 0 when not captured */
	/*
	 * The return address of the allocation call: the stack walk starts from
	 * the caller's frame and so skips the caller itself; this is that frame.
	 */
	uint64_t caller;
	uint64_t time_ns;         /* CLOCK_MONOTONIC of the allocation */
	uint32_t api;             /* enum cp_api */
	uint32_t pad;
};

/* One consistent-enough read of the aggregation maps (rows of one pid, or all when 0). */
struct cp_stats_snapshot {
	struct cp_kernel_row *kernels;
	size_t kernel_count;
	struct cp_api_row *apis;
	size_t api_count;
	struct cp_mem_row *mems;
	size_t mem_count;
	struct cp_device_mem_row *device_mems;
	size_t device_mem_count;
	struct cp_copy_row *copies;
	size_t copy_count;
	struct cp_nccl_row *nccls;
	size_t nccl_count;
};

CUPROBE_API int cp_tracer__snapshot(const struct cp_tracer *tracer, uint32_t pid,
				    struct cp_stats_snapshot *out);
CUPROBE_API void cp_stats_snapshot__release(struct cp_stats_snapshot *snapshot);
/* Live allocations of pid (all pids when 0), malloc'd into *rows. */
CUPROBE_API int cp_tracer__live_allocs(const struct cp_tracer *tracer, uint32_t pid,
				       struct cp_live_alloc **rows, size_t *count);
/* The user stack stack_id, innermost first: returns the depth, or -ENOENT. */
CUPROBE_API int cp_tracer__stack(const struct cp_tracer *tracer, int64_t stack_id, uint64_t *ips,
				 size_t max);
/*
 * With python_stacks and aggregate: the Python stack id of pid's most recent
 * launch that had one (resolve it with cp_python__frames). -ENOENT when none.
 */
CUPROBE_API int cp_tracer__python_launch_stack(const struct cp_tracer *tracer, uint32_t pid,
					       uint64_t *stack_id);
/* Removes every aggregation row of pid (after its final report was read). */
CUPROBE_API int cp_tracer__forget_pid(struct cp_tracer *tracer, uint32_t pid);

/*
 * The p-th fraction (0..1] of a log2 histogram: the upper bound, in ns, of
 * the bucket that reaches it (bucket b holds (2^(b-1), 2^b], cp_log2_bucket).
 * 0 when empty.
 */
CUPROBE_API uint64_t cp_histogram__percentile(const uint64_t histogram[CP_HIST_BUCKETS], double p);
CUPROBE_API uint64_t cp_histogram__total(const uint64_t histogram[CP_HIST_BUCKETS]);

/* ---- the GPU agent ------------------------------------------------------- */

/*
 * The agent is a thread that blocks in epoll_wait on the ring buffer's fd
 * and an eventfd; it holds no shared memory with any traced process, so no
 * teardown of a traced program can unmap something under it.
 *
 * The lifecycle contract (kept true by tests/root_lifecycle.c and, under
 * ThreadSanitizer, tests/agent_stress.c):
 *
 * Who may ask it to stop:
 *  - any thread, a signal handler, an atexit handler or a library destructor
 *    through cp_agent__request_stop(), which is async-signal-safe (an atomic
 *    store and a write(2) to the eventfd);
 *  - a consumer callback, by returning a negative value (filters return 0);
 *  - any thread but the agent's own through cp_agent__stop() (from a
 *    callback it only requests, and returns -EDEADLK).
 *
 * What stop guarantees:
 *  - every record committed to the ring before the stop request is
 *    delivered exactly once (unless a callback asked to stop: then nothing
 *    after that callback is delivered);
 *  - then the thread returns and is joined; only cp_agent__free(), after
 *    that join, frees what the thread used;
 *  - stop is idempotent, and free stops first; a stopped agent never touches
 *    freed memory. Records still in the ring stay there for the next agent.
 *
 * After fork(): the child holds no running agent (threads do not survive
 * fork); cp_agent__free() there only releases the copy's fds and memory
 * without joining, and the child may start an agent of its own.
 */
struct cp_agent;

typedef int (*cp_event_fn)(void *ctx, const union cp_event *event);

struct cp_agent_opts {
	size_t sz;               /* sizeof(struct cp_agent_opts): see CP_OPTS */
	cp_event_fn on_event;    /* called on the agent thread, in ring order */
	void *ctx;
	int busy_timeout_ms;     /* epoll timeout after a drain that found records; 0 = 1 ms */
	int idle_timeout_ms;     /* epoll timeout after an empty drain; 0 = 1000 ms, -1 = forever */
	/*
	 * When set, attach events are handled (cp_tracer__handle_attach) on the
	 * agent thread before on_event sees them with their outcome filled in.
	 */
	struct cp_tracer *tracer;
	/*
	 * When set, every record goes through cp_python__observe before
	 * on_event: processes are checked for Python and new Python stacks
	 * resolved (and the processes held for them continued) at once.
	 */
	struct cp_python *python;
};

CUPROBE_API struct cp_agent *cp_agent__new(int ring_fd, const struct cp_agent_opts *opts);
/*
 * Before the start: another ring buffer (a user's program's), consumed on
 * the same epoll by the same thread; each record is handed to fn as bytes.
 * A negative return from fn stops the agent, as from on_event.
 */
typedef int (*cp_record_fn)(void *ctx, const void *data, size_t size);
CUPROBE_API int cp_agent__add_ring(struct cp_agent *agent, int ring_fd, cp_record_fn fn,
				   void *ctx);
CUPROBE_API int cp_agent__start(struct cp_agent *agent);
CUPROBE_API void cp_agent__request_stop(struct cp_agent *agent);
CUPROBE_API int cp_agent__stop(struct cp_agent *agent);
CUPROBE_API void cp_agent__free(struct cp_agent *agent);

struct cp_agent_stats {
	uint64_t delivered;     /* records handed to on_event */
	uint64_t malformed;     /* records that failed cp_event__decode */
	uint64_t wakeups;       /* epoll_wait returns */
	int callback_error;     /* first negative callback return, 0 if none */
	int thread_error;       /* an error that ended the thread, 0 if none */
};
/* Safe from any thread; exact once the agent is stopped. */
CUPROBE_API void cp_agent__stats(const struct cp_agent *agent, struct cp_agent_stats *out);

/* ---- the GPU timeline, from host evidence -------------------------------- */

/*
 * Feed it every record in ring order (launches, syncs and queries as they
 * return, event records, exits): each launch gets a bound on when its kernel
 * ran, [start_after_ns, done_by_ns], from the earliest later evidence that it
 * completed; per process, bounds on GPU busy time and a verdict. No GPU clock
 * is read; the bounds hold as long as each stream runs in order.
 */
struct cp_timeline;

enum cp_done_evidence {
	CP_DONE_NONE = 0,         /* no bound: dropped from a full queue */
	CP_DONE_STREAM_SYNC,      /* cuStreamSynchronize on its stream returned */
	CP_DONE_CONTEXT_SYNC,     /* cuCtxSynchronize on its device returned */
	CP_DONE_EVENT_SYNC,       /* cuEventSynchronize of an event recorded after it returned */
	CP_DONE_EVENT_QUERY,      /* ... or cuEventQuery found that event complete */
	CP_DONE_STREAM_QUERY,     /* cuStreamQuery found its stream idle */
	CP_DONE_BLOCKING_COPY,    /* a blocking copy (ordered after the legacy stream) returned */
	CP_DONE_PROCESS_EXIT,     /* its process exited */
};

struct cp_gpu_interval {
	uint32_t pid, tid;
	int32_t device;           /* -1 when not known */
	uint32_t api;             /* enum cp_api of the launch */
	uint64_t stream;          /* as the launch passed it */
	uint64_t function;        /* kernel handle, or the graph's */
	uint64_t seq;             /* the process's launches, from 1 */
	uint64_t launch_ns;       /* the launch call began (CLOCK_MONOTONIC) */
	uint64_t start_after_ns;  /* the kernel started no earlier (>= launch_ns) */
	uint64_t done_by_ns;      /* ... and had ended by then; 0: no evidence (CP_DONE_NONE) */
	enum cp_done_evidence evidence;
	uint32_t evidence_api;    /* the call that proved it (enum cp_api) */
	uint32_t evidence_tid;
	bool graph;               /* a graph launch: the bound covers the whole graph */
	uint32_t nccl_call;       /* the NCCL call it is the work of (its seq), 0 none */
	uint64_t py_stack;        /* the launch's Python stack (python_stacks), 0 none */
};
typedef void (*cp_interval_fn)(void *ctx, const struct cp_gpu_interval *interval);

struct cp_timeline_opts {
	size_t sz;                /* sizeof(struct cp_timeline_opts) */
	cp_interval_fn on_interval; /* each launch once its bound is known (or it is dropped) */
	void *ctx;
	size_t max_pending;       /* launches waiting for evidence per stream; 0 = 65536 */
};

enum cp_gpu_verdict {
	CP_GPU_VERDICT_UNKNOWN = 0, /* no evidence yet */
	CP_GPU_VERDICT_GPU_BOUND,   /* the CPU waited on the GPU at least half the time */
	CP_GPU_VERDICT_LAUNCH_BOUND,/* the GPU was idle half the time, or waits found the work done */
	CP_GPU_VERDICT_MIXED,
};

struct cp_gpu_summary {
	uint64_t window_start_ns, window_end_ns; /* first launch to the last bound */
	uint64_t launches, bounded, pending, dropped;
	/*
	 * GPU busy at least: the CPU's waits for pending launches, less the
	 * driver's return time on each (the fastest sync's). A bound as long as
	 * a waiting thread is woken promptly when the GPU finishes: a CPU too
	 * loaded to run it inflates it.
	 */
	uint64_t busy_min_ns;
	uint64_t busy_max_ns;     /* GPU possibly busy: the union of the kernels' bounds */
	uint64_t syncs;           /* syncs, queries and blocking copies that returned */
	uint64_t syncs_waited;    /* ... that waited for pending launches */
	uint64_t waits_immediate; /* ... of which found the work (nearly) done: returned within
				   * max(20 us, 1/20 of the time since the previous sync)
				   * of the fastest sync */
	uint64_t sync_wait_ns;    /* time blocked in those */
	uint64_t sync_overhead_ns;/* the fastest sync: the driver's own return time */
	bool exited;
	enum cp_gpu_verdict verdict;
};

/* One stream of a process (per device); per-thread default streams name their thread. */
struct cp_gpu_stream {
	int32_t device;
	uint32_t per_thread_tid;  /* the per-thread default stream of this thread; else 0 */
	uint64_t stream;          /* the handle as passed (0: the legacy default stream) */
	/*
	 * Its own syncs and waits (stream syncs, event syncs of events recorded
	 * on it; context syncs count for the device); no busy_min or verdict: a
	 * stream with work queued may be waiting for another's.
	 */
	struct cp_gpu_summary summary;
};

/* One device of a process: its streams' bounds and the waits for its work. */
struct cp_gpu_device {
	int32_t device;           /* -1 when not known */
	struct cp_gpu_summary summary;
};

CUPROBE_API struct cp_timeline *cp_timeline__new(const struct cp_timeline_opts *opts);
CUPROBE_API void cp_timeline__free(struct cp_timeline *timeline);
CUPROBE_API void cp_timeline__observe(struct cp_timeline *timeline, const union cp_event *event);
/* 0, or -ENOENT when the timeline has seen nothing of pid. */
CUPROBE_API int cp_timeline__summary(const struct cp_timeline *timeline, uint32_t pid,
				     struct cp_gpu_summary *out);
/* Fills up to max streams of pid; returns how many it has. */
CUPROBE_API size_t cp_timeline__streams(const struct cp_timeline *timeline, uint32_t pid,
					struct cp_gpu_stream *out, size_t max);
/* Fills up to max devices of pid (each with busy bounds, waits and a verdict); returns how many it has. */
CUPROBE_API size_t cp_timeline__devices(const struct cp_timeline *timeline, uint32_t pid,
					struct cp_gpu_device *out, size_t max);
CUPROBE_API void cp_timeline__forget_pid(struct cp_timeline *timeline, uint32_t pid);
CUPROBE_API const char *cp_done_evidence__name(enum cp_done_evidence evidence);
/*
 * The launches of pid still in flight (launched, no evidence of completion
 * yet), oldest first, up to max: what was on the GPU when an Xid came.
 * Returns how many there are.
 */
CUPROBE_API size_t cp_timeline__in_flight(const struct cp_timeline *timeline, uint32_t pid,
					  struct cp_gpu_interval *out, size_t max);
/*
 * With the tracer given to the agent, each Xid record gets the process the
 * driver's kernel-log line for it names (/dev/kmsg, read from the tracer's
 * start; up to 200 ms waited for it): xid->process. 0, or -ENOENT.
 */
CUPROBE_API int cp_tracer__handle_xid(struct cp_tracer *tracer, struct cp_xid_event *xid);
/* The process an Xid hit: the kernel log's, else "pid=" in its message, else the task current then. */
CUPROBE_API uint32_t cp_xid__process(const struct cp_xid_event *xid);
CUPROBE_API const char *cp_gpu_verdict__name(enum cp_gpu_verdict verdict);

/* ---- Python stacks (cp_tracer_opts.python_stacks) ------------------------ */

/*
 * The userspace half of the Python frame walker: finds which traced
 * processes run CPython 3.10 to 3.14 (x86-64, GIL builds) and how the
 * walker reads each, and resolves the stacks it sends (CP_EV_PY_STACK)
 * into frames while the process lives. Given to the agent
 * (cp_agent_opts.python) it sees every record: cuInit and attach records
 * make it look at a process, a fork gives the child its parent's layout, a
 * new stack is resolved at once. A process's stacks are kept after its
 * exit until cp_python__forget_pid. Thread-safe; the strings it hands out
 * live until cp_python__free.
 */
struct cp_python;

struct cp_python_opts {
	size_t sz;          /* sizeof(struct cp_python_opts): see CP_OPTS */
	cp_log_fn log;      /* a line per process found (INFO), or not walked (WARN) */
	void *log_ctx;
};

/* tracer may be NULL: processes are looked at and stacks resolved, nothing told to the walker. */
CUPROBE_API struct cp_python *cp_python__new(struct cp_tracer *tracer,
					     const struct cp_python_opts *opts);
/* After the agent that uses it is stopped. */
CUPROBE_API void cp_python__free(struct cp_python *python);
/*
 * Looks at pid now (-p targets, the processes already running at a
 * system-wide start) and tells the walker: 1 Python, 0 not (or a version
 * or layout the walker does not know), -ESRCH gone, another -errno.
 */
CUPROBE_API int cp_python__add_pid(struct cp_python *python, pid_t pid);
/* One record, in ring order (the agent calls it when given this object). */
CUPROBE_API void cp_python__observe(struct cp_python *python, const union cp_event *event);

#define CP_PY_FRAME_UNREADABLE (1u << 0) /* its code object could not be read: no file, no line */

struct cp_py_frame {
	const char *file;     /* co_filename, UTF-8 ("" when unreadable) */
	const char *function; /* co_qualname (3.11+), co_name (3.10), UTF-8 */
	int32_t line;         /* of the instruction running; 0 when it has none */
	uint32_t flags;       /* CP_PY_FRAME_* */
};

struct cp_py_stack_info {
	uint32_t depth;       /* frames (at most CP_PY_STACK_MAX) */
	bool truncated;       /* deeper: the outermost frames are not there */
	bool unreadable;      /* the walk stopped at a frame it could not read */
};

/*
 * The frames of stack_id (a record's py_stack) of pid, innermost first:
 * up to max copied into frames, *info (may be NULL) filled. Returns the
 * stack's depth, or -ENOENT when this id of pid was not resolved.
 */
CUPROBE_API int cp_python__frames(struct cp_python *python, uint32_t pid, uint64_t stack_id,
				  struct cp_py_frame *frames, size_t max,
				  struct cp_py_stack_info *info);
/* CP_PY_VERSION of pid's CPython, 0 when it is not known as a Python process. */
CUPROBE_API uint32_t cp_python__version(struct cp_python *python, uint32_t pid);
CUPROBE_API void cp_python__forget_pid(struct cp_python *python, uint32_t pid);

struct cp_python_stats {
	uint64_t processes;         /* found to run a CPython the walker reads */
	uint64_t processes_unknown; /* running CPython, but a version or layout it does not know */
	uint64_t stacks;            /* stacks resolved (each id once) */
	uint64_t stacks_unresolved; /* stacks of processes gone or never known */
	uint64_t frames_unreadable; /* frames whose code object could not be read */
	uint64_t code_reused;       /* code objects found replaced at their address (re-read) */
};
CUPROBE_API void cp_python__stats(struct cp_python *python, struct cp_python_stats *out);

/* ---- self-tracing: a program watching its own CUDA calls ---------------- */

/*
 * Finds the libcuda.so.1 this process has mapped, opens a tracer filtered
 * to this process (and its forks), attaches, and starts an agent calling
 * on_event. Needs the same privileges as cuprobe. Safe to stop and free from
 * atexit handlers and library destructors while other threads still call
 * CUDA: the agent is joined before the tracer and ring are freed.
 */
struct cp_self_trace;

struct cp_self_trace_opts {
	size_t sz;            /* sizeof(struct cp_self_trace_opts): see CP_OPTS */
	cp_event_fn on_event;
	void *ctx;
	size_t ring_bytes;    /* 0 = default */
	const char *library;  /* soname to look for in our maps; NULL = libcuda.so.1 */
	cp_log_fn log;
	void *log_ctx;
};

CUPROBE_API struct cp_self_trace *cp_self_trace__start(const struct cp_self_trace_opts *opts);
/* Async-signal-safe. */
CUPROBE_API void cp_self_trace__request_stop(struct cp_self_trace *self);
CUPROBE_API int cp_self_trace__stop(struct cp_self_trace *self);
CUPROBE_API void cp_self_trace__stats(const struct cp_self_trace *self,
				      struct cp_agent_stats *agent_stats,
				      struct cp_counters *counters);
CUPROBE_API void cp_self_trace__free(struct cp_self_trace *self);

/* ---- names: (pid, handle) -> kernel name -------------------------------- */

/*
 * The one symbolizer: each ELF file read once (its function symbols sorted),
 * and the executable mappings of each process, kept after it exits.
 */
struct cp_symbolizer;

CUPROBE_API struct cp_symbolizer *cp_symbolizer__new(void);
CUPROBE_API void cp_symbolizer__free(struct cp_symbolizer *symbolizer);
/* Make a file known by its identity, for stubs of processes already gone. */
CUPROBE_API int cp_symbolizer__add_file(struct cp_symbolizer *symbolizer, const char *path);
/*
 * Reads /proc/PID/maps and keeps the process's files and executable
 * mappings (read it while the process lives; the result outlives it).
 * 0 or -errno (-ESRCH when it is gone).
 */
CUPROBE_API int cp_symbolizer__refresh(struct cp_symbolizer *symbolizer, pid_t pid);
CUPROBE_API void cp_symbolizer__forget(struct cp_symbolizer *symbolizer, pid_t pid);
/* "function+0x1c (path)", "0xADDR (path+0xOFFSET)" or "0xADDR": always writes out. */
CUPROBE_API void cp_symbolizer__symbolize(struct cp_symbolizer *symbolizer, pid_t pid, uint64_t ip,
					  char *out, size_t out_len);
/*
 * The function symbol containing file_offset in the file (dev, inode),
 * found among the files added or those mapped by pid. dev is the kernel's
 * encoding (major << 20 | minor). Copies the symbol name to out.
 */
CUPROBE_API int cp_symbolizer__resolve(struct cp_symbolizer *symbolizer, pid_t pid, uint32_t dev,
				       uint64_t inode, uint64_t file_offset, char *out,
				       size_t out_len);

struct cp_names;

/* A learned name: the symbol as the driver saw it, and its demangled form. */
/* Where a name came from. */
enum cp_name_source {
	CP_NAME_FROM_PROBE = 0,  /* cuModuleGetFunction / cuLibraryGetKernel / cuKernelGetFunction */
	CP_NAME_FROM_STUB = 1,   /* cudaLaunchKernel's host stub or calling device stub (ELF symbol) */
	CP_NAME_FROM_DRIVER = 2, /* the driver's own CUkernel record, read from the process */
};

struct cp_name_entry {
	const char *mangled;
	const char *display;
	enum cp_name_source source;
};

CUPROBE_API const char *cp_name_source__name(enum cp_name_source source);

struct cp_names_stats {
	uint64_t names_learned;    /* from the naming probes */
	uint64_t driver_named;     /* handles named from the driver's CUkernel record */
	uint64_t driver_checked;   /* probe-learned names compared with that record */
	uint64_t driver_mismatches;/* ... that disagreed: the record is then no longer used */
	uint64_t stubs_resolved;   /* host stubs named through the ELF symbol table */
	uint64_t stubs_unresolved; /* host stubs whose file or symbol was not found */
	uint64_t launches;         /* kernel launches observed (graphs excluded) */
	uint64_t launches_unnamed; /* of those, with a handle nobody named */
};

CUPROBE_API struct cp_names *cp_names__new(struct cp_symbolizer *symbolizer);
CUPROBE_API void cp_names__free(struct cp_names *names);
/*
 * For handles created before cuprobe attached: read the kernel's name from
 * the driver's CUkernel record in the traced process (its name pointer at
 * offset 8, measured on driver 580: tests/gpu/results-late-attach-h200.md).
 * Undocumented, so it is checked: every name a probe learns is compared with
 * the record, and one disagreement turns this source off for the session.
 * Only strings shaped like symbols are taken. Off by default.
 */
CUPROBE_API void cp_names__read_driver_records(struct cp_names *names, bool enable);
/*
 * Learn from one record: names from CP_EV_NAME, stub names from
 * CP_EV_RT_LAUNCH (paired with the next launch of the same thread when that
 * handle has no name), launch handles from the driver's records. Call once
 * per record, in ring order, before formatting it. A process's names are
 * kept after its exit record until cp_names__forget_pid: the caller decides
 * when its last report is out.
 */
CUPROBE_API void cp_names__observe(struct cp_names *names, const union cp_event *event);
/* Name of a driver handle (CUfunction/CUkernel) of pid, or NULL when unknown. */
CUPROBE_API const struct cp_name_entry *cp_names__lookup(const struct cp_names *names, uint32_t pid,
							 uint64_t handle);
/*
 * The one naming path for a handle of pid: a probe-learned or stub name, or,
 * for a handle made before cuprobe attached, the driver's record read from
 * the process (when enabled and the process lives). NULL when unknown.
 */
CUPROBE_API const struct cp_name_entry *cp_names__resolve(struct cp_names *names, uint32_t pid,
							  uint64_t handle);
/* Name of a host stub address of pid, or NULL when unknown. */
CUPROBE_API const struct cp_name_entry *cp_names__lookup_stub(const struct cp_names *names,
							      uint32_t pid, uint64_t stub);
/* Remember a name directly: 0, or -ENOMEM. */
CUPROBE_API int cp_names__set(struct cp_names *names, uint32_t pid, uint64_t handle,
			      const char *mangled);
CUPROBE_API void cp_names__forget_pid(struct cp_names *names, uint32_t pid);
CUPROBE_API size_t cp_names__count(const struct cp_names *names);
CUPROBE_API void cp_names__stats(const struct cp_names *names, struct cp_names_stats *out);


/* ---- output formats ------------------------------------------------------ */

/*
 * Format one record as a line of text or as one JSON object (no newline),
 * into buf. Returns the length written (truncated output is still valid
 * text/JSON up to the cut only when the return is < len), or -ENOSPC.
 * Launch names come from names (may be NULL); start_ns is subtracted from
 * the record time for the text column.
 */
CUPROBE_API int cp_format__text(const union cp_event *event, const struct cp_names *names,
				uint64_t start_ns, char *buf, size_t len);
CUPROBE_API int cp_format__json(const union cp_event *event, const struct cp_names *names,
				char *buf, size_t len);
/* The header line matching cp_format__text's columns. */
CUPROBE_API const char *cp_format__text_header(void);

/*
 * The one label of a kernel: its demangled name (cp_names__resolve), or
 * "<graph 0x...>", or "<unnamed function 0x...>" (into buf). *mangled, when
 * given, gets the mangled name or NULL.
 */
CUPROBE_API const char *cp_format__kernel_label(struct cp_names *names, uint32_t pid,
						uint64_t handle, bool graph, const char **mangled,
						char *buf, size_t len);


#ifdef __cplusplus
}
#endif

#endif /* CUPROBE_H */
