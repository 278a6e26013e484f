// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CUDA calls added up by the Python line that made them (cuprobe stats
 * --python): launches, syncs and the time blocked in them, allocations and
 * copies, and with the timeline the bounds of the kernels each line
 * launched. Calls are summed per (pid, stack id) as they arrive, cheaply;
 * a report resolves each stack once through cp_python and merges the stacks
 * that end on the same line (the innermost frame, or the innermost outside
 * site-packages and the standard library).
 */
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"

/* One stack's sums. */
struct stack_sums {
	uint32_t pid;
	uint64_t stack_id;         /* 0: calls that carried no Python stack */
	struct cp_py_line_sums sums;
};

/* A process's window: its first record to its last (or its last kernel's bound). */
struct window {
	uint32_t pid;
	uint64_t first_ns, last_ns;
};

struct cp_py_sites {
	struct cp_python *python;
	enum cp_py_site_by by;
	void *stacks;              /* tsearch tree of struct stack_sums, to find one */
	struct stack_sums **all;   /* the same, to go through them */
	size_t stack_count, stack_capacity;
	void *windows;             /* tsearch tree of struct window */
};

static int by_pid_stack(const void *a, const void *b)
{
	const struct stack_sums *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

static int by_window_pid(const void *a, const void *b)
{
	uint32_t x = ((const struct window *)a)->pid, y = ((const struct window *)b)->pid;

	return x < y ? -1 : x > y;
}

struct cp_py_sites *cp_py_sites__new(struct cp_python *python, enum cp_py_site_by by)
{
	struct cp_py_sites *sites;

	if (!python || (by != CP_PY_SITE_INNERMOST && by != CP_PY_SITE_OWN_CODE)) {
		errno = EINVAL;
		return NULL;
	}
	sites = calloc(1, sizeof(*sites));
	if (!sites)
		return NULL;
	sites->python = python;
	sites->by = by;
	return sites;
}

void cp_py_sites__free(struct cp_py_sites *sites)
{
	if (!sites)
		return;
	tdestroy(sites->stacks, free);
	free(sites->all);
	tdestroy(sites->windows, free);
	free(sites);
}

/* The node of key, made when new; NULL when out of memory. */
static void *find_or_add(void **root, const void *key, size_t size,
			 int (*compare)(const void *, const void *))
{
	void **node = tfind(key, root, compare);
	void *fresh;

	if (node)
		return *node;
	fresh = malloc(size);
	if (!fresh)
		return NULL;
	memcpy(fresh, key, size);
	node = tsearch(fresh, root, compare);
	if (!node || *node != fresh) {
		free(fresh);
		return NULL;
	}
	return fresh;
}

static void note_time(struct cp_py_sites *sites, uint32_t pid, uint64_t from_ns, uint64_t to_ns)
{
	struct window key = { .pid = pid, .first_ns = from_ns, .last_ns = to_ns };
	struct window *w = find_or_add(&sites->windows, &key, sizeof(key), by_window_pid);

	if (!w)
		return;
	if (from_ns && (!w->first_ns || from_ns < w->first_ns))
		w->first_ns = from_ns;
	if (to_ns > w->last_ns)
		w->last_ns = to_ns;
}

static struct cp_py_line_sums *sums_of(struct cp_py_sites *sites, uint32_t pid, uint64_t stack_id)
{
	struct stack_sums key = { .pid = pid, .stack_id = stack_id }, *s;
	void **node = tfind(&key, &sites->stacks, by_pid_stack);

	if (node)
		return &((struct stack_sums *)*node)->sums;
	/* New: listed first, so that the tree never holds one the list lacks. */
	if (CP_ARRAY_RESERVE(sites->all, sites->stack_capacity, sites->stack_count + 1, 64))
		return NULL;
	s = find_or_add(&sites->stacks, &key, sizeof(key), by_pid_stack);
	if (!s)
		return NULL;
	sites->all[sites->stack_count++] = s;
	return &s->sums;
}

int cp_py_sites__observe(struct cp_py_sites *sites, const union cp_event *event)
{
	const struct cp_event_header *hdr = &event->hdr;
	struct cp_py_line_sums *sums;

	switch (hdr->type) {
	case CP_EV_LAUNCH: case CP_EV_SYNC: case CP_EV_COPY: case CP_EV_ALLOC:
		break;
	default:
		return 0;
	}
	sums = sums_of(sites, hdr->pid, cp_event__py_stack(event));
	if (!sums)
		return -ENOMEM;
	switch (hdr->type) {
	case CP_EV_LAUNCH:
		sums->launches++;
		break;
	case CP_EV_SYNC:
		sums->syncs++;
		if (hdr->time_ns > event->sync.entry_ns && event->sync.entry_ns)
			sums->blocked_ns += hdr->time_ns - event->sync.entry_ns;
		break;
	case CP_EV_COPY:
		sums->copies++;
		sums->copy_bytes += event->copy.bytes;
		break;
	case CP_EV_ALLOC:
		if (event->alloc.ptr) {
			sums->allocations++;
			sums->alloc_bytes += event->alloc.bytes;
		}
		break;
	}
	note_time(sites, hdr->pid, hdr->type == CP_EV_SYNC && event->sync.entry_ns ?
		  event->sync.entry_ns : hdr->time_ns, hdr->time_ns);
	return 0;
}

int cp_py_sites__interval(struct cp_py_sites *sites, const struct cp_gpu_interval *interval)
{
	struct cp_py_line_sums *sums;

	if (interval->evidence == CP_DONE_NONE)
		return 0;
	sums = sums_of(sites, interval->pid, interval->py_stack);
	if (!sums)
		return -ENOMEM;
	sums->kernels++;
	sums->gpu_max_ns += interval->done_by_ns - interval->start_after_ns;
	if (!sums->gpu_start_ns || interval->start_after_ns < sums->gpu_start_ns)
		sums->gpu_start_ns = interval->start_after_ns;
	if (interval->done_by_ns > sums->gpu_end_ns)
		sums->gpu_end_ns = interval->done_by_ns;
	note_time(sites, interval->pid, 0, interval->done_by_ns);
	return 0;
}

/* ---- reports ------------------------------------------------------------------------ */

/* Code of the interpreter's own library or an installed package, not the program's. */
static bool is_library_file(const char *file)
{
	return strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
	       strstr(file, "/lib/python3") || file[0] == '<';
}

/* The frame a stack is reported by: the innermost, or the innermost of the program's own. */
static int key_frame(struct cp_py_sites *sites, uint32_t pid, uint64_t stack_id,
		     struct cp_py_frame *out, bool *truncated)
{
	struct cp_py_frame frames[CP_PY_STACK_MAX];
	struct cp_py_stack_info info;
	int depth = cp_python__frames(sites->python, pid, stack_id, frames, CP_PY_STACK_MAX, &info);
	int i;

	if (depth <= 0)
		return -ENOENT;
	if (depth > CP_PY_STACK_MAX)
		depth = CP_PY_STACK_MAX;
	*truncated = info.truncated;
	*out = frames[0];
	if (sites->by == CP_PY_SITE_OWN_CODE)
		for (i = 0; i < depth; i++)
			if (!is_library_file(frames[i].file)) {
				*out = frames[i];
				break;
			}
	return 0;
}

static void add_sums(struct cp_py_line_sums *to, const struct cp_py_line_sums *from)
{
	to->launches += from->launches;
	to->kernels += from->kernels;
	to->gpu_max_ns += from->gpu_max_ns;
	if (from->gpu_start_ns && (!to->gpu_start_ns || from->gpu_start_ns < to->gpu_start_ns))
		to->gpu_start_ns = from->gpu_start_ns;
	if (from->gpu_end_ns > to->gpu_end_ns)
		to->gpu_end_ns = from->gpu_end_ns;
	to->syncs += from->syncs;
	to->blocked_ns += from->blocked_ns;
	to->allocations += from->allocations;
	to->alloc_bytes += from->alloc_bytes;
	to->copies += from->copies;
	to->copy_bytes += from->copy_bytes;
}

/*
 * A line's verdict, as the process's (cp_gpu_summary) over the line's own
 * share of the window: the CPU blocked on this line, or this line's kernels
 * kept the GPU, at least half the time: GPU-bound; neither reached a fifth
 * (blocked) or a half (kernels): launch-bound; else mixed. Without a
 * timeline's bounds, unknown.
 */
static enum cp_gpu_verdict line_verdict(const struct cp_py_line_row *row, bool bounds)
{
	uint64_t window = row->window_ns;

	if (!bounds || !window || (!row->sums.kernels && !row->sums.syncs))
		return CP_GPU_VERDICT_UNKNOWN;
	if (row->sums.blocked_ns * 2 >= window || row->sums.gpu_max_ns * 2 >= window)
		return CP_GPU_VERDICT_GPU_BOUND;
	if (row->sums.blocked_ns * 5 < window && row->sums.gpu_max_ns * 2 < window)
		return CP_GPU_VERDICT_LAUNCH_BOUND;
	return CP_GPU_VERDICT_MIXED;
}

/* The stack's sums into the row of its line, a row made when new: 0 or -ENOMEM. */
static int add_stack_row(struct cp_py_sites *sites, const struct stack_sums *s,
			 struct cp_py_line_row **rows, size_t *count, size_t *capacity)
{
	struct cp_py_frame frame = { .file = "", .function = "" };
	bool truncated = false, resolved;
	size_t i;

	resolved = s->stack_id && !key_frame(sites, s->pid, s->stack_id, &frame, &truncated);
	for (i = 0; i < *count; i++) {
		struct cp_py_line_row *r = &(*rows)[i];

		if (r->resolved == resolved && r->line == frame.line &&
		    !strcmp(r->file, frame.file) && !strcmp(r->function, frame.function) &&
		    (resolved || r->no_stack == !s->stack_id))
			break;
	}
	if (i == *count) {
		if (CP_ARRAY_RESERVE(*rows, *capacity, *count + 1, 16))
			return -ENOMEM;
		(*rows)[(*count)++] = (struct cp_py_line_row){
			.pid = s->pid, .file = frame.file, .line = frame.line,
			.function = frame.function, .resolved = resolved, .no_stack = !s->stack_id,
		};
	}
	(*rows)[i].stacks++;
	if (truncated)
		(*rows)[i].calls_truncated += s->sums.launches + s->sums.syncs + s->sums.copies +
					      s->sums.allocations;
	add_sums(&(*rows)[i].sums, &s->sums);
	return 0;
}

int cp_py_sites__rows(struct cp_py_sites *sites, uint32_t pid, bool bounds,
		      struct cp_py_line_row **rows, size_t *count)
{
	struct window key = { .pid = pid };
	void **w = tfind(&key, &sites->windows, by_window_pid);
	size_t capacity = 0, i;
	uint64_t window = 0;

	*rows = NULL;
	*count = 0;
	if (w) {
		const struct window *found = *w;

		window = found->last_ns > found->first_ns ? found->last_ns - found->first_ns : 0;
	}
	for (i = 0; i < sites->stack_count; i++)
		if (sites->all[i]->pid == pid &&
		    add_stack_row(sites, sites->all[i], rows, count, &capacity)) {
			free(*rows);
			*rows = NULL;
			*count = 0;
			return -ENOMEM;
		}
	for (i = 0; i < *count; i++) {
		(*rows)[i].window_ns = window;
		(*rows)[i].verdict = line_verdict(&(*rows)[i], bounds);
	}
	return 0;
}

void cp_py_sites__forget_pid(struct cp_py_sites *sites, uint32_t pid)
{
	struct window wkey = { .pid = pid };
	void **w = tfind(&wkey, &sites->windows, by_window_pid);
	size_t i, kept = 0;

	if (w) {
		struct window *found = *w;

		tdelete(found, &sites->windows, by_window_pid);
		free(found);
	}
	for (i = 0; i < sites->stack_count; i++) {
		struct stack_sums *s = sites->all[i];

		if (s->pid != pid) {
			sites->all[kept++] = s;
			continue;
		}
		tdelete(s, &sites->stacks, by_pid_stack);
		free(s);
	}
	sites->stack_count = kept;
}
