/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What cuprobe and the preload library (libcuprobe_inject.so, in COMMAND)
 * tell each other. Both sides are built from one tree, but the bytes cross
 * a process boundary: every decode checks every size.
 *
 * cuprobe -> COMMAND: the plan, in an inherited memfd named by
 * CUPROBE_INJECT_PLAN=FD: the device programs (glob, entry or exit, the
 * name of their .func), their PTX, the maps they use (inherited BPF map
 * fds), the launch-slot map and the session's magic, and the fd of the
 * report socket.
 *
 * COMMAND -> cuprobe: reports, one per message on an inherited
 * SOCK_SEQPACKET socket the GPU agent's epoll watches: which kernels got
 * probes, which matching kernels could not (no PTX for the device, a
 * module the rewriter refused), errors.
 */
#ifndef CUPROBE_DEVICE_INJECT_PROTOCOL_H
#define CUPROBE_DEVICE_INJECT_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CP_INJECT_PLAN_ENV "CUPROBE_INJECT_PLAN"
/* A plan larger than this is refused (PTX of every program included). */
#define CP_INJECT_PLAN_MAX (64u << 20)
/* Device programs in one plan: a kernel's matches are a 64-bit mask. */
#define CP_INJECT_MAX_PROGRAMS 64
#define CP_INJECT_MAX_MAPS 64
/* A map's symbol index (its place among the object's maps) is below this. */
#define CP_INJECT_MAX_MAP_INDEX 4096

/*
 * Launch slots: the launch path writes this header (the session's magic,
 * then the slot's index) just before the kernelParams (or extra) array it
 * passes; the BPF launch program reads it and writes the launch's seq into
 * slot `index` of the launch-slot map, whose address the kernel was given.
 * Slot 0 is the allocation counter shared by COMMAND's processes.
 */
struct cp_launch_slot_header {
	uint64_t magic;
	uint64_t index;
};

struct cp_inject_map {
	uint32_t index;          /* the PTX reaches it as __cuprobe_map_<index> */
	int fd;                  /* the BPF map, inherited by COMMAND */
	uint32_t value_size;
	uint32_t max_entries;
	bool read_only;          /* frozen (.rodata): mapped read-only */
	char *name;
};

struct cp_inject_program {
	char *name;              /* the BPF program's, for reports */
	char *glob;
	char *function;          /* its .func in the plan's PTX */
	bool at_exit;
	bool uses_shadow;        /* it adds into a map's shadow or writes a ring: its launches are drained */
};

struct cp_inject_plan {
	uint64_t magic;          /* the session's: launch slot headers carry it */
	int report_fd;           /* SOCK_SEQPACKET, inherited */
	int launch_slots_fd;     /* the launch-slot map (u64 values), inherited */
	uint32_t launch_slot_count;
	struct cp_inject_program *programs;
	size_t program_count;
	struct cp_inject_map *maps; /* the maps the programs use, each named by its index */
	size_t map_count;
	char *functions;         /* the programs' .func definitions, PTX */
};

/* The plan as bytes (a malloc'd buffer the caller frees): 0 or -EINVAL/-ENOMEM. */
int cp_inject_plan__encode(const struct cp_inject_plan *plan, void **buf, size_t *len);
/* Bytes back into a plan (every field owned by it): 0, or -EINVAL with one line in error. */
int cp_inject_plan__decode(const void *buf, size_t len, struct cp_inject_plan *plan, char *error,
			   size_t error_size);
void cp_inject_plan__release(struct cp_inject_plan *plan);

/* ---- reports ----------------------------------------------------------------------- */

#define CP_INJECT_REPORT_MAX 8192

#define CP_INJECT_REPORT_KINDS(X)						\
	X(READY, "ready")                 /* the library read its plan and mapped the maps */ \
	X(INSTRUMENTED, "instrumented")   /* name: a kernel that got probes */	\
	X(NO_PTX, "no_ptx")               /* name: a matching kernel without PTX for the device */ \
	X(REFUSED, "refused")             /* name: a matching kernel whose module was not rewritten */ \
	X(ERROR, "error")                 /* detail: anything else that went wrong */ \
	X(NOTE, "note")                   /* detail: worth knowing, nothing went wrong */

enum cp_inject_report_kind {
#define CP_INJECT_REPORT_ENUM(kind, text) CP_INJECT_##kind,
	CP_INJECT_REPORT_KINDS(CP_INJECT_REPORT_ENUM)
#undef CP_INJECT_REPORT_ENUM
	CP_INJECT_REPORT_KIND_MAX,
};

struct cp_inject_report {
	enum cp_inject_report_kind kind;
	uint32_t pid;
	uint32_t arch;          /* the device's (90 for 9.0); NO_PTX: what was missing */
	uint64_t probes;        /* INSTRUMENTED, NO_PTX, REFUSED: bit i: plan program i matched */
	const char *api;        /* the entry point that loaded the module ("cuModuleLoadData") */
	const char *name;       /* the kernel (mangled), or "" */
	const char *detail;     /* why, for REFUSED and ERROR; "" otherwise */
};

const char *cp_inject_report__kind_name(enum cp_inject_report_kind kind);
/*
 * One report as one message into buf (at most CP_INJECT_REPORT_MAX bytes;
 * long names and details are cut to fit). Returns the length.
 */
size_t cp_inject_report__encode(const struct cp_inject_report *report, void *buf, size_t size);
/*
 * A message back into a report, its strings copied into strings (at least
 * len bytes: the three lengths make room for the three NULs): 0 or -EINVAL.
 */
int cp_inject_report__decode(const void *buf, size_t len, struct cp_inject_report *report,
			     char *strings, size_t strings_size);

/* One line into error (when there is room for it): returns err, for `return cp_device__fail(...)`. */
int cp_device__fail(char *error, size_t error_size, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif
