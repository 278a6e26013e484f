/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The tracer's insides, shared by tracer.c, attach.c, stats.c and python.c only (not installed). */
#ifndef CUPROBE_TRACER_INTERNAL_H
#define CUPROBE_TRACER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuprobe_internal.h"
#include "cuprobe.skel.h"
#include "device/ptx_jit.h"

/* One file of the tracer's bookkeeping, with the pids seen mapping it early. */
#define TRACKED_PIDS_MAX 64

struct tracked_file {
	struct cp_traced_file info;
	pid_t early_pids[TRACKED_PIDS_MAX];
};

/* uapi values of kernels 6.6+, absent from older headers such as Debian 12's. */
#define CP_BPF_TRACE_UPROBE_MULTI 48
#define CP_BPF_F_UPROBE_MULTI_RETURN 1u

/* A user's program (cuprobe run): one BPF program and the family it goes on. */
struct cp_program_binding {
	const char *program;       /* its name in the object */
	enum cp_family family;
	bool retprobe;             /* cuda.return/FAMILY */
};

struct cp_program_ring {
	char name[64];
	int fd;
	__u32 type_id;             /* of cuprobe_record__NAME; 0 when not declared */
	size_t record_size;
	long lost_offset;          /* of cuprobe_lost__NAME in .bss; -1 when absent */
};

/* A user's device program: verified with the object, then translated to PTX. */
struct cp_device_program {
	const char *program;       /* its name in the object */
	const char *section;
	const char *glob;          /* in section */
	bool at_exit;
	bool uses_shadow;          /* it adds into a map's device-memory shadow or writes a ring (ptx_jit.h) */
	char function[160];        /* the PTX function's name */
	char *ptx;
};

/* A user's BPF object, loaded with the runtime's shared maps; the tracer owns it. */
struct cp_program {
	struct cp_tracer *tracer;
	char object_name[32];
	void *elf;                 /* a copy: the classic twin is opened from it */
	size_t elf_size;
	struct bpf_object *obj;    /* loaded for uprobe_multi where the kernel has it */
	struct bpf_object *classic_obj; /* its twin for classic uprobes, made on demand */
	struct cp_program_binding *bindings;
	size_t binding_count;
	struct cp_program_ring *rings;
	size_t ring_count;
	struct bpf_map **maps;     /* the maps to print: not rings, internal or shared ones */
	size_t map_count;
	struct bpf_map *bss;
	struct cp_device_program *devices;
	size_t device_count;
	struct cp_ptx_map *device_maps; /* every map of obj, as the PTX indexes them */
	bool *device_map_used;
	size_t device_map_count;
};

void cp_program__destroy(struct cp_program *program);
int cp_program__ensure_classic(struct cp_program *program);

struct cp_tracer {
	struct cuprobe_bpf *skel;
	/*
	 * Programs loaded for classic (perf-event) uprobes, sharing every map
	 * of skel: made when a uprobe_multi attach fails at run time.
	 */
	struct cuprobe_bpf *classic_skel;
	struct bpf_link **links;   /* tracepoints, and classic uprobes */
	size_t link_count;
	size_t link_capacity;
	int *multi_fds;            /* uprobe_multi links: one per (program, library, entry/return) */
	size_t multi_count;
	size_t multi_capacity;
	unsigned int probe_count;  /* symbols probed, entry and return counted apart */
	bool measure_latency;      /* every probe gets a return probe (api_return if none) */
	bool return_records;       /* ... and the return is recorded (CP_EV_RETURN) */
	bool watch_xid;            /* nvidia:nvidia_dev_xid exists and is attached */
	int kmsg_fd;               /* /dev/kmsg from the start, to attribute Xids; -1 when not */
	bool use_multi;
	bool hold;                 /* hold_new_mappers or hold_for_stacks */
	/* The built-in programs' families (a bit per enum cp_family); users' programs. */
	uint64_t builtin_families;
	struct cp_program **programs;
	size_t program_count, program_capacity;
	cp_log_fn log;
	void *log_ctx;
	/* Attach bookkeeping: the agent thread adds, the main thread reads. */
	pthread_mutex_t lock;
	struct tracked_file *files;
	size_t file_count;
	size_t file_capacity;
	/* The guardian (not our child): continues held processes if this process dies. */
	int guardian_fd;           /* the pipe's write end; its closing wakes the guardian */
};

void cp_tracer__log(const struct cp_tracer *tracer, enum cp_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The kernel's encoding of a stat() st_dev: major << 20 | minor. */
uint32_t cp_kernel_dev(dev_t dev);

/* attach.c: the file bookkeeping and the guardian. */
struct tracked_file *cp_tracer__track(struct cp_tracer *tracer, uint32_t dev, uint64_t inode);
int cp_tracer__mark_covered(struct cp_tracer *tracer, uint32_t dev, uint64_t inode);
int cp_tracer__start_guardian(struct cp_tracer *tracer);
void cp_tracer__stop_guardian(struct cp_tracer *tracer);
/* xid.c: the kernel log, read to name the process an Xid hit. */
void cp_tracer__open_kmsg(struct cp_tracer *tracer);
void cp_tracer__close_kmsg(struct cp_tracer *tracer);
/*
 * attach.c: continues pid if the Python walker holds it (held_pids marked
 * CP_PY_HOLD_INODE; a hold for another reason is left to its own release):
 * 1 continued, 0 not held so, -errno.
 */
int cp_tracer__release_python_hold(struct cp_tracer *tracer, uint32_t pid);
/* tracer.c: attach a library's table of the catalogue to the file at path. */
int cp_tracer__attach_file(struct cp_tracer *tracer, const char *path, enum cp_library library,
			   struct cp_attach_report *report);

#endif
