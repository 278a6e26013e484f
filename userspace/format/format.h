/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The output wing (userspace/format/): what its callers use. Internal to
 * libcuprobe and its command line, like cuprobe_internal.h (which includes
 * this header); nothing here is exported from libcuprobe.so. The formatters
 * never print: they append to a caller's buffer or cp_text.
 */
#ifndef CUPROBE_FORMAT_H
#define CUPROBE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuprobe.h"
#include "escape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A growable string the formatters append to (they never print). */
struct cp_text {
	char *data;
	size_t len;
	size_t capacity;
	bool failed;     /* out of memory: data holds what fit */
};
void cp_text__clear(struct cp_text *text);
void cp_text__free(struct cp_text *text);
/*
 * Appending from outside the wing (the exporter's expositions): 0, or
 * -ENOMEM with text->failed set (then nothing more is appended).
 */
int cp_text__append(struct cp_text *text, const void *bytes, size_t n);
int cp_text__appendf(struct cp_text *text, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The formats, a line each: its enum value and name (--format NAME), whose
 * file in userspace/format/ defines cp_format_NAME_ops (output.h says how).
 * A new format is its file and its line here. Every formatter below takes
 * one; the commands pick it from their options.
 */
#define CP_FORMATS(X)									\
	X(TEXT, text)   /* lines for a terminal or a text file */			\
	X(JSON, json)   /* one JSON object a line (schema in docs/json.md) */

enum cp_format {
#define CP_FORMAT_ENUM(NAME, name) CP_FORMAT_##NAME,
	CP_FORMATS(CP_FORMAT_ENUM)
#undef CP_FORMAT_ENUM
	CP_FORMAT_MAX,
};
const char *cp_format__name(enum cp_format format);
/* The format called name, or CP_FORMAT_MAX when there is none. */
enum cp_format cp_format__by_name(const char *name);
/* Bytes for a person: "1.50 MiB", compact "1.5M" (under a KiB: "512 B", "512"), into buf. */
const char *cp_format__bytes(uint64_t bytes, bool compact, char *buf, size_t len);
/* The line a format writes before its records (the text columns), or NULL. */
const char *cp_format__header(enum cp_format format);

/*
 * One record in format, no newline, into buf: the length written, or
 * -ENOSPC when it does not fit (then buf holds no valid line), -EINVAL.
 * Kernel names come from names (may be NULL); start_ns is subtracted from
 * the record's time where the format shows relative times.
 * (cp_format__text and cp_format__json of cuprobe.h are these two.)
 */
int cp_format__record(enum cp_format format, const union cp_event *event,
		      const struct cp_names *names, uint64_t start_ns, char *buf, size_t len);
/*
 * The same record appended to text (no newline), with its Python stack
 * (--python) as python resolved it: JSON, "py_stack" (the frames,
 * innermost first, each {file, line, function}) beside "py_stack_id";
 * text, the innermost frame " py FILE:LINE FUNCTION". 0, -ENOMEM, -EINVAL.
 */
int cp_format__record_python(struct cp_text *text, enum cp_format format,
			     const union cp_event *event, const struct cp_names *names,
			     struct cp_python *python, uint64_t start_ns);

/*
 * The formatters below append to text, growing it: 0, -ENOMEM (text->failed
 * set, text holds what fit) or -EINVAL for an unknown format. What they
 * write ends with a newline; a format with nothing to say of a kind writes
 * nothing.
 */

/* One process's counts, as cuprobe stats reports them. */
/*
 * NCCL in a report: a row per (communicator, op), with --timeline the
 * bounds of the kernels its calls launched (cp_nccl_calls__kernel).
 */
struct cp_nccl_report_row {
	struct cp_nccl_row row;
	uint64_t kernels;          /* its kernels whose bound the timeline gave */
	uint64_t gpu_max_ns;       /* the sum of those bounds: at most this much GPU time */
	uint64_t gpu_start_ns;     /* the earliest a kernel of its started */
	uint64_t gpu_end_ns;       /* the latest one had ended by */
};

struct cp_report {
	uint32_t pid;
	const char *comm;
	uint64_t time_ns;        /* CLOCK_MONOTONIC when the rows were read */
	double since_start_s;    /* for the text header */
	bool final;              /* its last report */
	bool exited;
	int exit_code;           /* wait status, when exited */
	bool live;               /* read while it ran: tables may differ by the calls made meanwhile */
	bool latency;            /* the API rows carry timings */
	const struct cp_kernel_row *kernels;
	size_t kernel_count;
	const struct cp_api_row *apis;
	size_t api_count;
	const struct cp_mem_row *memory; /* NULL when none */
	/* --timeline: the process's GPU time and its streams; NULL when not asked. */
	const struct cp_gpu_summary *gpu;
	const struct cp_gpu_stream *gpu_streams;
	size_t gpu_stream_count;
	const struct cp_gpu_device *gpu_devices;
	size_t gpu_device_count;
	/* NCCL calls by communicator and operation (nccl_gpu: with their kernels' bounds). */
	const struct cp_nccl_report_row *nccl;
	size_t nccl_count;
	bool nccl_gpu;
	/*
	 * --python: the calls by Python line (python_own_code: named by the
	 * program's own innermost frame, CP_PY_SITE_OWN_CODE); python_bounds: the lines carry the timeline's kernel bounds
	 * and verdicts. Rows most blocking first, then most launching.
	 */
	const struct cp_py_line_row *python;
	size_t python_count;
	bool python_asked;
	bool python_bounds;
	bool python_own_code;
};
/* Text lines, or one JSON object; rows most used first (the caller's arrays untouched). */
int cp_format__report(struct cp_text *text, enum cp_format format, const struct cp_report *report,
		      struct cp_names *names);

/* Device memory still live when a process exited, by allocating site. */
struct cp_leak_site {
	uint64_t allocations;
	uint64_t bytes;
	uint32_t kind;             /* enum cp_mem_kind */
	uint32_t api;
	const char *const *frames; /* symbolized, innermost first; NULL when not captured */
	size_t frame_count;
};

struct cp_leak {
	uint32_t pid;
	const char *comm;
	uint64_t allocations;
	uint64_t bytes;
	bool stacks;               /* stacks were asked for */
	const struct cp_leak_site *sites;
	size_t site_count;
};
int cp_format__leak(struct cp_text *text, enum cp_format format, const struct cp_leak *leak);

/* One launch's bound as a trace line, or a JSON object (type gpu_interval). */
int cp_format__interval(struct cp_text *text, enum cp_format format,
			const struct cp_gpu_interval *interval, struct cp_names *names,
			uint64_t start_ns);
/* After an Xid: the kernels its process had in flight (known: the process was traced). */
int cp_format__xid_in_flight(struct cp_text *text, enum cp_format format,
			     const struct cp_xid_event *xid, const struct cp_gpu_interval *in_flight,
			     size_t count, bool known, struct cp_names *names);
/* A driver or runtime file probed while tracing ran (JSON: type "driver_file"; text: nothing). */
int cp_format__traced_file(struct cp_text *text, enum cp_format format,
			   const struct cp_traced_file *file);
/*
 * A new Python stack (CP_EV_PY_STACK) with its frames as python resolved
 * them: JSON, a py_stack record with "frames", innermost first, each
 * {file, line, function} ("unresolved": true when python has not); text:
 * nothing (its calls name the stack).
 */
int cp_format__py_stack(struct cp_text *text, enum cp_format format,
			const struct cp_py_stack_event *stack, struct cp_python *python);

/*
 * Users' programs (cuprobe run): their records and maps printed from BTF,
 * as JSON, or as text in the other formats. Types cuprobe.bpf.h declares
 * print their meaning: cuprobe_kernel_t as the kernel's name and
 * cuprobe_stack_t as symbolized frames (both of the process in an integer
 * member "pid" beside them, or in the map's key, else of names->pid),
 * struct cuprobe_hist as a log2 histogram.
 */
struct cp_btf_names {
	struct cp_names *names;            /* kernel names; may be NULL */
	struct cp_symbolizer *symbolizer;  /* stack frames; may be NULL */
	const struct cp_tracer *tracer;    /* where stacks are read; may be NULL */
	struct cp_python *python;          /* Python stacks' frames (--python); may be NULL */
	uint32_t pid;                      /* when no "pid" is beside a value; 0 = none */
};
/* One record of a ring, a text line or a JSON object. */
int cp_format__program_record(struct cp_text *text, enum cp_format format, const struct btf *btf,
			      const struct cp_program_ring_info *ring, const void *data, size_t size,
			      const struct cp_btf_names *names);
/* A device ring at the end of a run: produced = delivered + lost + abandoned + pending. */
struct cp_device_ring_launch {
	uint64_t launch_seq;    /* 0: unknown */
	uint64_t delivered, lost;
};
struct cp_device_ring_summary {
	const char *ring;
	uint64_t produced, delivered, lost, abandoned, pending;
	struct cp_device_ring_launch *launches;
	size_t launch_count;
};
/* {"type":"device_ring","ring":...,"produced":...,...,"launches":[{...}]}, one line (JSON only). */
int cp_format__device_ring_summary(struct cp_text *text, const struct cp_device_ring_summary *s);
/*
 * One record of a device ring (CUPROBE_GPU_RING), of BTF type type_id, from
 * the launch with that seq (0: unknown): "RING launch SEQ: {...}", or
 * {"type":"device_record","ring":...,"launch_seq":...,"record":{...}}.
 */
int cp_format__device_record(struct cp_text *text, enum cp_format format, const struct btf *btf,
			     const char *ring, uint32_t type_id, uint64_t launch_seq,
			     const void *data, size_t size, const struct cp_btf_names *names);
/*
 * One map, in pieces so that a map of any size streams through a bounded
 * text: begin (a header line, or the start of one JSON object), the
 * entries a batch at a time (a line, or block, per entry; printed_before
 * entries came in earlier batches), then end: how many were left out
 * (text: a line when some were; JSON: "not_printed") and, when reading
 * stopped with err, why.
 */
int cp_format__program_map_begin(struct cp_text *text, enum cp_format format,
				 const struct cp_program_map_info *map);
int cp_format__program_map_entries(struct cp_text *text, enum cp_format format,
				   const struct btf *btf, const struct cp_program_map_info *map,
				   const struct cp_map_entries *entries, size_t printed_before,
				   const struct cp_btf_names *names);
int cp_format__program_map_end(struct cp_text *text, enum cp_format format,
			       const struct cp_program_map_info *map, size_t printed,
			       uint64_t not_printed, int err);
/* The line before the maps printed at one moment (final: at exit). */
int cp_format__program_maps_header(struct cp_text *text, enum cp_format format,
				   uint64_t elapsed_ns, bool final);
/* A map that cannot be read (errno from cp_program__map_reader, negated). */
int cp_format__program_map_unreadable(struct cp_text *text, enum cp_format format,
				      const struct cp_program_map_info *map, int err);

/* ---- Chrome trace-event JSON (cuprobe trace --perfetto): format/chrome_trace.c ---- */

/*
 * The writer of a Chrome trace-event JSON file (cuprobe trace --perfetto):
 * fed every record in ring order (before the timeline sees it) and every
 * interval of the timeline, it appends events to a caller's text. Memory is
 * bounded by what lives: per process (its name, launch count, live
 * allocations, up to a cap), per thread (its name, at most one entry record
 * waiting for its call's return, or one return waiting for the record its
 * call writes at return, and its latest slices), per stream (its queue
 * depth); a process's state goes with cp_chrome_trace__forget_pid.
 *
 * Layout: per process "comm (pid)", its threads with an "X" per API call
 * (from CP_EV_RETURN: the tracer needs return_records), counters of live
 * device memory; per GPU stream a process of its own (pid 2^30 + n, never a
 * real pid) whose async slices are the kernels' bounds, with a flow from
 * each launch call; instants for process start, fork, exit and Xid errors.
 * A launch's flow and slice id is (process serial << 40 | its seq), unique
 * in the trace: seq counts the process's kernel and graph launches from 1,
 * as the timeline numbers them.
 */
struct cp_chrome_trace;

struct cp_chrome_trace_stats {
	uint64_t events;              /* trace events written */
	uint64_t calls;               /* API slices */
	uint64_t calls_overlapping;   /* returns left out: their slice would partly overlap an
				       * earlier one of the thread (an entry time gone wrong) */
	uint64_t flows;               /* launch slices with a flow to their kernel */
	uint64_t kernels;             /* kernel slices */
	uint64_t kernels_unbounded;   /* launches without a bound (instants "dropped") */
	uint64_t allocations_untracked; /* allocations past a process's cap: not in the counter */
	uint64_t collectives;         /* NCCL calls (or groups) drawn over their kernels' bounds */
	uint64_t collectives_unbounded; /* ... left out: no kernel of theirs had a bound */
};

/* base_ns: CLOCK_MONOTONIC of ts 0, no later than any record (taken before attaching). */
struct cp_chrome_trace *cp_chrome_trace__new(struct cp_names *names, uint64_t base_ns);
/* --python: each call's args carry its Python stack ("py_stack", as --json writes it). */
void cp_chrome_trace__set_python(struct cp_chrome_trace *ct, struct cp_python *python);
void cp_chrome_trace__free(struct cp_chrome_trace *ct);
/* Each returns 0, or -ENOMEM (text->failed set). */
int cp_chrome_trace__record(struct cp_chrome_trace *ct, const union cp_event *event,
			    struct cp_text *text);
int cp_chrome_trace__interval(struct cp_chrome_trace *ct, const struct cp_gpu_interval *interval,
			      struct cp_text *text);
/* After pid's exit record and the intervals it settled: its state goes. */
void cp_chrome_trace__forget_pid(struct cp_chrome_trace *ct, uint32_t pid);
/* Tracing ended: the calls still waiting for their record are written, the array closed. */
int cp_chrome_trace__finish(struct cp_chrome_trace *ct, struct cp_text *text);
void cp_chrome_trace__stats(const struct cp_chrome_trace *ct, struct cp_chrome_trace_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* CUPROBE_FORMAT_H */
