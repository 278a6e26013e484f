/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The output interface (internal to userspace/format/), after bpftrace's
 * src/output/: one struct of writers, a file per format implementing it
 * (text.c, json.c). Adding a format is a file defining its struct
 * cp_format_ops, cp_format_NAME_ops, and its line in CP_FORMATS (format.h):
 * the enum value, this declaration, format.c's table and --format follow.
 * A writer left NULL means the format writes nothing of that kind. Inside a format, records go through a table by record type
 * generated from CP_RECORD_TYPES (cuprobe_events.h): a writer per type.
 * format.c does what every format shares (argument checks, the sink,
 * sorting report rows, kernel labels) before it calls them. The BTF values
 * of cuprobe run (btf.c) and the Chrome trace (chrome_trace.c) are formats
 * of their own kind, with their own entry points in format.h.
 */
#ifndef CUPROBE_FORMAT_OUTPUT_H
#define CUPROBE_FORMAT_OUTPUT_H

#include "cuprobe_internal.h"
#include "sink.h"

struct cp_format_ops {
	const char *name;
	/* The line before the records, or NULL. */
	const char *header;
	/*
	 * One record, no newline; start_ns: when tracing started, for relative
	 * times; python (may be NULL): resolves the record's Python stack.
	 */
	void (*record)(struct cp_sink *out, const union cp_event *event,
		       const struct cp_names *names, struct cp_python *python, uint64_t start_ns);
	/* A process's report (its rows already sorted, most used first), newline-terminated. */
	void (*report)(struct cp_sink *out, const struct cp_report *report, struct cp_names *names);
	void (*leak)(struct cp_sink *out, const struct cp_leak *leak);
	/* A launch's bound; kernel: its label (cp_format__kernel_label). */
	void (*interval)(struct cp_sink *out, const struct cp_gpu_interval *interval,
			 const char *kernel, uint64_t start_ns);
	/* After an Xid of process pid: its kernels in flight (known: the process was traced). */
	void (*xid_in_flight)(struct cp_sink *out, const struct cp_xid_event *xid, uint32_t pid,
			      const struct cp_gpu_interval *in_flight, size_t count, bool known,
			      struct cp_names *names);
	/* A library file probed while tracing ran. */
	void (*traced_file)(struct cp_sink *out, const struct cp_traced_file *file);
	/* A new Python stack with its frames as resolved (depth < 0: not resolved). */
	void (*py_stack)(struct cp_sink *out, const struct cp_py_stack_event *stack,
			 const struct cp_py_frame *frames, int depth);
};

#define CP_FORMAT_OPS(NAME, name) extern const struct cp_format_ops cp_format_##name##_ops;
CP_FORMATS(CP_FORMAT_OPS)
#undef CP_FORMAT_OPS

/* Shared by the formats. */
const char *cp_format__proc_kind_name(uint32_t kind);
/* strerror of a record's negative errno (any int: a record is not trusted to hold one). */
const char *cp_format__errno_text(int32_t negative_errno);
/* What an event record's handle names: a stream, or a whole context (cuCtxRecordEvent and kin). */
const char *cp_format__event_scope(uint32_t op);

/*
 * The JSON writers the Chrome trace's events reuse for their args: a
 * record's fields as --json writes them (the object left open for the
 * caller to close; true when they include the call's "result"; with python,
 * its Python stack's frames), and a
 * launch's bound as a gpu_interval record (closed).
 */
bool cp_json__record_fields(struct cp_sink *out, const union cp_event *event,
			    const struct cp_names *names, struct cp_python *python);
void cp_json__interval(struct cp_sink *out, const struct cp_gpu_interval *interval,
		       const char *kernel);

#endif
