// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The output wing's front: the table of formats (output.h) and the entry
 * points every caller uses (format.h, and cp_format__text/json of
 * cuprobe.h), doing what the formats share before calling the one asked
 * for: argument checks, the sink, report rows sorted, kernel labels.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

/* What an event record's handle names: a stream, or a whole context for cuCtxRecordEvent and kin. */
const char *cp_format__event_scope(uint32_t op)
{
	return op == CP_EVENT_RECORD_CONTEXT || op == CP_EVENT_WAIT_CONTEXT ? "context" : "stream";
}

const char *cp_format__proc_kind_name(uint32_t kind)
{
	switch (kind) {
	case CP_PROC_CUDA_INIT: return "cuda_init";
	case CP_PROC_FORK: return "fork";
	case CP_PROC_EXIT: return "exit";
	case CP_PROC_HELD_FOR_STACKS: return "held_for_stacks";
	default: return "unknown";
	}
}

const char *cp_format__errno_text(int32_t negative_errno)
{
	/* Negated as a wider type: -INT32_MIN does not fit an int. */
	int64_t error = -(int64_t)negative_errno;

	return error <= INT32_MAX ? strerror((int)error) : "unknown error";
}

const char *cp_format__kernel_label(struct cp_names *names, uint32_t pid, uint64_t handle,
				    bool graph, const char **mangled, char *buf, size_t len)
{
	const struct cp_name_entry *name = graph ? NULL : cp_names__resolve(names, pid, handle);

	if (mangled)
		*mangled = name ? name->mangled : NULL;
	if (name)
		return name->display;
	snprintf(buf, len, graph ? "<graph 0x%llx>" : "<unnamed function 0x%llx>",
		 (unsigned long long)handle);
	return buf;
}

/* The formats, by enum cp_format, from CP_FORMATS. */
static const struct cp_format_ops *const formats[CP_FORMAT_MAX] = {
#define FORMAT_ROW(NAME, name) [CP_FORMAT_##NAME] = &cp_format_##name##_ops,
	CP_FORMATS(FORMAT_ROW)
#undef FORMAT_ROW
};

static const struct cp_format_ops *ops_of(enum cp_format format)
{
	return (unsigned int)format < CP_FORMAT_MAX ? formats[format] : NULL;
}

const char *cp_format__name(enum cp_format format)
{
	return ops_of(format) ? ops_of(format)->name : "unknown";
}

enum cp_format cp_format__by_name(const char *name)
{
	unsigned int format;

	for (format = 0; name && format < CP_FORMAT_MAX; format++)
		if (!strcmp(formats[format]->name, name))
			return (enum cp_format)format;
	return CP_FORMAT_MAX;
}

const char *cp_format__header(enum cp_format format)
{
	return ops_of(format) ? ops_of(format)->header : NULL;
}

/*
 * Appends to text what format's writer (a member of its ops) writes of the
 * arguments: 0, -ENOMEM or -EINVAL (an unknown format). A format without
 * that writer writes nothing.
 */
#define WRITE_TEXT(text, format, writer, ...)						\
	__extension__ ({								\
		const struct cp_format_ops *ops_ = ops_of(format);			\
		struct cp_sink out_ = cp_sink__text(text);				\
											\
		if (ops_ && ops_->writer)						\
			ops_->writer(&out_, __VA_ARGS__);				\
		ops_ ? cp_sink__text_done(&out_) : -EINVAL;				\
	})

/* ---- records ------------------------------------------------------------------------ */

int cp_format__record(enum cp_format format, const union cp_event *event,
		      const struct cp_names *names, uint64_t start_ns, char *buf, size_t len)
{
	const struct cp_format_ops *ops = ops_of(format);
	struct cp_sink out = { .buf = buf, .len = len };

	if (!ops || !event || !buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	ops->record(&out, event, names, NULL, start_ns);
	return cp_sink__finish(&out);
}

int cp_format__record_python(struct cp_text *text, enum cp_format format,
			     const union cp_event *event, const struct cp_names *names,
			     struct cp_python *python, uint64_t start_ns)
{
	if (!event)
		return -EINVAL;
	return WRITE_TEXT(text, format, record, event, names, python, start_ns);
}

int cp_format__json(const union cp_event *event, const struct cp_names *names,
		    char *buf, size_t len)
{
	return cp_format__record(CP_FORMAT_JSON, event, names, 0, buf, len);
}

int cp_format__text(const union cp_event *event, const struct cp_names *names,
		    uint64_t start_ns, char *buf, size_t len)
{
	return cp_format__record(CP_FORMAT_TEXT, event, names, start_ns, buf, len);
}

const char *cp_format__text_header(void)
{
	return cp_format_text_ops.header;
}

/* ---- per-process reports (cuprobe stats) --------------------------------------- */

static int by_launches_desc(const void *a, const void *b)
{
	const struct cp_kernel_row *x = a, *y = b;

	return x->launches < y->launches ? 1 : x->launches > y->launches ? -1 : 0;
}

static int by_calls_desc(const void *a, const void *b)
{
	const struct cp_api_row *x = a, *y = b;

	return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

/* The line blocked longest first, then the one that launched most, then allocated most. */
static int by_blocked_desc(const void *a, const void *b)
{
	const struct cp_py_line_sums *x = &((const struct cp_py_line_row *)a)->sums;
	const struct cp_py_line_sums *y = &((const struct cp_py_line_row *)b)->sums;

	if (x->blocked_ns != y->blocked_ns)
		return x->blocked_ns < y->blocked_ns ? 1 : -1;
	if (x->launches != y->launches)
		return x->launches < y->launches ? 1 : -1;
	return x->alloc_bytes < y->alloc_bytes ? 1 : x->alloc_bytes > y->alloc_bytes ? -1 : 0;
}

/* By communicator, then by operation (groups, communicator 0, first). */
static int by_comm_op(const void *a, const void *b)
{
	const struct cp_nccl_row *x = &((const struct cp_nccl_report_row *)a)->row;
	const struct cp_nccl_row *y = &((const struct cp_nccl_report_row *)b)->row;

	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

int cp_format__report(struct cp_text *text, enum cp_format format, const struct cp_report *report,
		      struct cp_names *names)
{
	struct cp_report sorted = *report;
	struct cp_kernel_row *kernels;
	struct cp_api_row *apis;
	struct cp_nccl_report_row *nccl;
	struct cp_py_line_row *python;
	int err;

	/* Most used first, in copies: the caller's arrays stay as they are. */
	kernels = calloc(report->kernel_count + 1, sizeof(*kernels));
	apis = calloc(report->api_count + 1, sizeof(*apis));
	nccl = calloc(report->nccl_count + 1, sizeof(*nccl));
	python = calloc(report->python_count + 1, sizeof(*python));
	if (!kernels || !apis || !nccl || !python) {
		free(kernels);
		free(apis);
		free(nccl);
		free(python);
		return -ENOMEM;
	}
	if (report->python_count)
		memcpy(python, report->python, report->python_count * sizeof(*python));
	qsort(python, report->python_count, sizeof(*python), by_blocked_desc);
	sorted.python = python;
	memcpy(kernels, report->kernels, report->kernel_count * sizeof(*kernels));
	memcpy(apis, report->apis, report->api_count * sizeof(*apis));
	if (report->nccl_count)
		memcpy(nccl, report->nccl, report->nccl_count * sizeof(*nccl));
	qsort(kernels, report->kernel_count, sizeof(*kernels), by_launches_desc);
	qsort(apis, report->api_count, sizeof(*apis), by_calls_desc);
	qsort(nccl, report->nccl_count, sizeof(*nccl), by_comm_op);
	sorted.kernels = kernels;
	sorted.apis = apis;
	sorted.nccl = nccl;
	err = WRITE_TEXT(text, format, report, &sorted, names);
	free(kernels);
	free(apis);
	free(nccl);
	free(python);
	return err;
}

int cp_format__leak(struct cp_text *text, enum cp_format format, const struct cp_leak *leak)
{
	return WRITE_TEXT(text, format, leak, leak);
}

/* ---- the GPU timeline, Xid and traced files ---------------------------------------- */

int cp_format__interval(struct cp_text *text, enum cp_format format,
			const struct cp_gpu_interval *interval, struct cp_names *names,
			uint64_t start_ns)
{
	char label[64];
	const char *kernel = cp_format__kernel_label(names, interval->pid, interval->function,
						     interval->graph, NULL, label, sizeof(label));

	return WRITE_TEXT(text, format, interval, interval, kernel, start_ns);
}

int cp_format__xid_in_flight(struct cp_text *text, enum cp_format format,
			     const struct cp_xid_event *xid, const struct cp_gpu_interval *in_flight,
			     size_t count, bool known, struct cp_names *names)
{
	return WRITE_TEXT(text, format, xid_in_flight, xid, cp_xid__process(xid), in_flight, count,
			  known, names);
}

int cp_format__py_stack(struct cp_text *text, enum cp_format format,
			const struct cp_py_stack_event *stack, struct cp_python *python)
{
	struct cp_py_frame frames[CP_PY_STACK_MAX];
	int depth = cp_python__frames(python, stack->hdr.pid, stack->stack_id, frames,
				      CP_PY_STACK_MAX, NULL);

	return WRITE_TEXT(text, format, py_stack, stack, frames,
			  depth < CP_PY_STACK_MAX ? depth : CP_PY_STACK_MAX);
}

int cp_format__traced_file(struct cp_text *text, enum cp_format format,
			   const struct cp_traced_file *file)
{
	return WRITE_TEXT(text, format, traced_file, file);
}
