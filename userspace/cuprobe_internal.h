/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libcuprobe's internal interface: what the library's own files, the
 * cuprobe command line (tools/) and the tests share beyond the public API
 * (cuprobe.h). Not installed, not exported from libcuprobe.so: these are
 * reachable only by linking the static libcuprobe.a, and may change at any
 * time.
 */
#ifndef CUPROBE_INTERNAL_H
#define CUPROBE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>

#include "cuprobe.h"

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

/* ---- escaping and the report formatters (cuprobe stats) ---------------------- */

/*
 * Writes src into buf as a JSON string body (escaped, no quotes): valid UTF-8
 * as it is, bytes that are not part of valid UTF-8 as \u00XX of the byte.
 * Returns the length written, -ENOSPC or -EINVAL.
 */
int cp_json__escape(const char *src, char *buf, size_t len);
/*
 * Copies src to buf for a terminal or a text file: control characters
 * (bytes < 0x20 and 0x7f) become \xNN. Returns the length, or -ENOSPC (buf
 * then holds what fit).
 */
int cp_text__escape(const char *src, char *buf, size_t len);

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

/* A growable string the report formatters append to (they never print). */
struct cp_text {
	char *data;
	size_t len;
	size_t capacity;
	bool failed;     /* out of memory: data holds what fit */
};
void cp_text__clear(struct cp_text *text);
void cp_text__free(struct cp_text *text);

/*
 * Users' programs (cuprobe run): their records and maps printed from BTF.
 * Types cuprobe.bpf.h declares print their meaning: cuprobe_kernel_t as
 * the kernel's name and cuprobe_stack_t as symbolized frames (both of the
 * process in an integer member "pid" beside them, or in the map's key, else
 * of names->pid), struct cuprobe_hist as a log2 histogram.
 */
struct cp_btf_names {
	struct cp_names *names;            /* kernel names; may be NULL */
	struct cp_symbolizer *symbolizer;  /* stack frames; may be NULL */
	const struct cp_tracer *tracer;    /* where stacks are read; may be NULL */
	uint32_t pid;                      /* when no "pid" is beside a value; 0 = none */
};
/* One record of a ring, a text line or a JSON object (newline-terminated), appended to text. */
int cp_format__program_record(struct cp_text *text, bool json, const struct btf *btf,
			      const struct cp_program_ring_info *ring, const void *data, size_t size,
			      const struct cp_btf_names *names);
/* One map's entries: a header line and a line (or block) per entry, or one JSON object. */
int cp_format__program_map(struct cp_text *text, bool json, const struct btf *btf,
			   const struct cp_program_map_info *map, const struct cp_map_entries *entries,
			   const struct cp_btf_names *names);
/* The line before the maps printed at one moment (final: at exit). */
int cp_format__program_maps_header(struct cp_text *text, bool json, uint64_t elapsed_ns, bool final);
/* A map that cannot be read (err from cp_program__read_map). */
int cp_format__program_map_unreadable(struct cp_text *text, bool json,
				      const struct cp_program_map_info *map, int err);

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

/* One process's counts, as cuprobe stats reports them. */
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
};
/* Appends the report as text lines, or as one JSON object and a newline. 0 or -ENOMEM. */
int cp_format__report_text(const struct cp_report *report, struct cp_names *names,
			   struct cp_text *out);
int cp_format__report_json(const struct cp_report *report, struct cp_names *names,
			   struct cp_text *out);

/* One launch's bound as a trace line, or a JSON object (type gpu_interval); newline-terminated. */
int cp_format__interval(struct cp_text *text, bool json, const struct cp_gpu_interval *interval,
			struct cp_names *names, uint64_t start_ns);
/* After an Xid: the kernels its process had in flight (known: the process was traced). */
/* A driver or runtime file probed while tracing ran, as one JSON line (type "driver_file"). */
int cp_format__traced_file_json(struct cp_text *text, const struct cp_traced_file *file);
int cp_format__xid_in_flight(struct cp_text *text, bool json, const struct cp_xid_event *xid,
			     const struct cp_gpu_interval *in_flight, size_t count, bool known,
			     struct cp_names *names);

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

/* ---- Chrome trace-event JSON (cuprobe trace --perfetto) ------------------------- */

/*
 * The events of one JSON array, streamed: the first event opens the array
 * ("[") and each later one follows ",\n", so a file cut after any event
 * holds whole events only (the Perfetto UI opens an unterminated array);
 * cp_format__chrome_close ends it. "ts" is in microseconds with ns
 * precision ("1234.567"), from base_ns. Names and labels are all written
 * here; which events to write is the writer's (cp_chrome_trace below).
 */
struct cp_chrome_out {
	struct cp_text *text;  /* where the next events are appended */
	uint64_t base_ns;      /* CLOCK_MONOTONIC of ts 0 */
	uint64_t events;       /* written so far */
};
/* "M" events: a process "comm (pid)", a thread "comm (tid)" ("pid N"/"tid N" without comm). */
int cp_format__chrome_process_name(struct cp_chrome_out *chrome, uint32_t pid, const char *comm);
int cp_format__chrome_thread_name(struct cp_chrome_out *chrome, uint32_t pid, uint32_t tid,
				  const char *comm);
/*
 * A GPU stream's own process and thread, track_pid (both ids): named
 * "GPU stream 0x... (device N), comm (pid)" and "GPU stream 0x... (device N)".
 */
int cp_format__chrome_stream_name(struct cp_chrome_out *chrome, uint32_t track_pid,
				  const struct cp_gpu_stream *stream, uint32_t pid, const char *comm);
/*
 * An API call, an "X" slice from its entry to its return on its thread;
 * args: record (the call's entry or return-side record; NULL: ret itself) as
 * --json writes it, with ret's result. A flow_id (non-zero) starts the flow
 * to its kernel: bind_id/flow_out (Perfetto) and an "s" (DevTools).
 */
int cp_format__chrome_call(struct cp_chrome_out *chrome, const struct cp_return_event *ret,
			   const union cp_event *record, const struct cp_names *names,
			   uint64_t flow_id);
/*
 * A kernel's bound on its stream's track (pid and tid track_pid): "b"/"e"
 * with id flow_id, named by the kernel, args the gpu_interval record, and
 * the end of the flow from its launch ("f", bind_id/flow_in). Without a
 * bound (CP_DONE_NONE), an instant "dropped" at its launch.
 */
int cp_format__chrome_kernel(struct cp_chrome_out *chrome, const struct cp_gpu_interval *interval,
			     uint32_t track_pid, uint64_t flow_id, struct cp_names *names);
/* A "C" sample of one series of a process counter. */
int cp_format__chrome_counter(struct cp_chrome_out *chrome, uint32_t pid, uint64_t time_ns,
			      const char *name, const char *series, uint64_t value);
/*
 * A record as an "i" instant, args the record as --json writes it: process
 * start (cuInit), fork, exit, Xid. On pid's process track ("s":"p"), or
 * global ("s":"g") for an Xid whose process is not traced.
 */
int cp_format__chrome_instant(struct cp_chrome_out *chrome, const union cp_event *event,
			      uint32_t pid, bool global, const struct cp_names *names);
/* Ends the array ("[]" when no event was written). */
int cp_format__chrome_close(struct cp_chrome_out *chrome);

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
};

/* base_ns: CLOCK_MONOTONIC of ts 0, no later than any record (taken before attaching). */
struct cp_chrome_trace *cp_chrome_trace__new(struct cp_names *names, uint64_t base_ns);
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
int cp_format__leak_text(const struct cp_leak *leak, struct cp_text *out);
int cp_format__leak_json(const struct cp_leak *leak, struct cp_text *out);

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

/* ---- metrics (cuprobe exporter): OpenMetrics, Prometheus text and protobuf --- */

enum cp_metric_type { CP_METRIC_COUNTER, CP_METRIC_GAUGE, CP_METRIC_HISTOGRAM };

#define CP_METRIC_LABELS_MAX 12

/* One series: its label values (in the family's label order) and its value. */
struct cp_metric_sample {
	char *values[CP_METRIC_LABELS_MAX];
	double value;                   /* counters and gauges */
	/* Histograms: log2 buckets of nanoseconds (bucket b: (2^(b-1), 2^b] ns, the
	 * last one everything above), their count and their sum in seconds. */
	uint64_t buckets[CP_HIST_BUCKETS];
	uint64_t count;
	double sum;
};

struct cp_metric_family {
	const char *name;               /* base units; counters without _total */
	const char *help;
	const char *unit;               /* "seconds", "bytes", or NULL */
	enum cp_metric_type type;
	const char *const *label_names;
	size_t label_count;
	struct cp_metric_sample *samples;
	size_t sample_count, sample_capacity;
	/* Open-addressing index over the label values: sample position + 1, 0 empty. */
	size_t *index;
	size_t index_capacity;          /* a power of two, at least twice sample_count */
};

/* A new series (label values copied); NULL when out of memory. */
struct cp_metric_sample *cp_metric_family__add(struct cp_metric_family *family,
					       const char *const *values);
/* The series with these label values (found through the index), added when new. */
struct cp_metric_sample *cp_metric_family__find(struct cp_metric_family *family,
						const char *const *values);
/* Every series removed (the arrays kept for reuse). */
void cp_metric_family__clear(struct cp_metric_family *family);
/* Every series removed and the arrays freed. */
void cp_metric_family__release(struct cp_metric_family *family);

enum cp_exposition {
	CP_EXPOSITION_PROMETHEUS_TEXT, /* text/plain; version=0.0.4 */
	CP_EXPOSITION_OPENMETRICS,     /* application/openmetrics-text; version=1.0.0 */
	CP_EXPOSITION_PROTOBUF,        /* delimited io.prometheus.client.MetricFamily */
};
/* What a scraper's Accept header asks for (NULL: Prometheus text). */
enum cp_exposition cp_exposition__from_accept(const char *accept);
const char *cp_exposition__content_type(enum cp_exposition exposition);
/*
 * Every family in one exposition, appended to out (binary for protobuf:
 * out->len counts the bytes). Histograms are exact classic ones (le at
 * each 2^b ns) in every format; protobuf adds a native histogram of schema
 * 0, each log2 bucket counted in the native bucket holding its upper bound.
 * 0 or -ENOMEM.
 */
int cp_format__metrics(struct cp_text *out, enum cp_exposition exposition,
		       const struct cp_metric_family *families, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* CUPROBE_INTERNAL_H */
