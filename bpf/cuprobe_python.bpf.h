/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CPython frame walker (--python), part of cuprobe.bpf.c (included
 * there, after the helpers it uses): at a launch, sync, copy or allocation
 * of a Python process, the calling thread's Python frames are read and
 * named by a stack id.
 *
 * The thread's state is found in the interpreters' thread lists by its
 * pthread id, which on x86-64 is the thread's fs base: the GIL holder is
 * not asked (PyTorch releases the GIL around CUDA calls), nor a native
 * thread id (another pid namespace numbers it otherwise). Each thread
 * keeps what it found in task storage, checked by one read per call; a
 * thread without a Python state is remembered too, until the thread list
 * changes. Frames are followed through `previous` (f_back in 3.10), the
 * interpreter's own shim frames (owner C stack or interpreter) skipped,
 * up to CP_PY_STACK_MAX kept; bpf_loop bounds every walk, so the verifier
 * sees one step, not every depth.
 *
 * The stack id is a hash of the frames (code object, instruction) salted
 * by the process's detection: a new id (not in py_stacks_seen) sends its
 * frames in a CP_EV_PY_STACK record before the call's own record, so a
 * consumer always meets the frames before the id. With hold_for_python
 * the process is stopped until the agent has resolved them (it releases
 * what CP_PY_HOLD_INODE marks), so a process that exits at once still has
 * its stacks named.
 */
#ifndef CUPROBE_PYTHON_BPF_H
#define CUPROBE_PYTHON_BPF_H

/* The processes found to be Python, and how to read them (the agent fills it). */
CUPROBE_HASH(py_procs, __u32 /* thread group id */, struct cp_py_proc, 8192);

/* What is kept of a stack already sent: enough to tell two stacks of one id apart. */
struct py_seen {
	__u64 code0;
	__u32 instr0;
	__u32 depth;
};

/* Stack ids already sent. LRU: a stack that comes back after eviction is sent again. */
CUPROBE_LRU_HASH(py_stacks_seen, __u64, struct py_seen, 16384);

/* Each thread's Python thread state, as last found. */
struct py_thread {
	__u64 seed;   /* of the detection it was found under: an exec or a new process misses */
	__u64 tstate; /* 0: the thread had none ... */
	__u64 head;   /* ... while the thread list began here */
};

CUPROBE_TASK_STORAGE(py_threads, struct py_thread);

/* A frame's fields are read at once into chunk (a power of two: offsets are masked by it). */
#define PY_CHUNK CP_PY_FRAME_READ_MAX
/* Frames followed in one walk, shim frames included. */
#define PY_RAW_FRAMES_MAX 512
/* Thread states (and interpreters) looked at to find the calling thread's. */
#define PY_THREADS_MAX 65536
#define PY_INTERPRETERS_MAX 64
/* Owners of a _PyInterpreterFrame from which on it is the interpreter's own (3.12+). */
#define PY_OWNER_SHIM 3

/*
 * 3.11+: the frames of a thread lie one after another in its data stack,
 * the innermost highest: one read of the window below a frame holds the
 * next frames too (some 20 to 30 of them), taken from it, not read alone.
 * A frame below the window gets a window of its own.
 */
#define PY_WINDOW 4096

/*
 * A walk's state, in the per-CPU scratch rather than on the stack: values
 * loaded from a map are unknown to the verifier, so one pass over the
 * frame step stands for every depth (on the stack each depth would be a
 * state of its own, and the walk too long to verify).
 */
struct py_walk {
	__u64 frame;
	__u64 window_start, window_end; /* the window read, [start, end); empty: none */
	__u64 chunk;        /* the data stack chunk the innermost frame is in; 0: none */
	__u64 hash;
	__u64 code_mask;
	__u32 depth;
	__u32 flags;        /* CP_PY_STACK_* */
	__u32 read_start, read_size;
	/* Offsets in the fields read. */
	__u32 code, previous, instr, owner;
	__u32 has_owner;
	__u32 instr_is_index; /* 3.10: f_lasti */
};

struct py_scan {
	__u64 interp;       /* the next interpreter to enter */
	__u64 tstate;       /* the next thread state to look at; 0: enter the next interpreter */
	__u64 fsbase;       /* the calling thread's pthread id */
	__u64 found;
	__u32 interp_next, interp_threads_head, tstate_next, tstate_thread_id;
	__u32 interpreters;
	__u32 unreadable;
};

/*
 * python_stack's state, here rather than on its stack: it runs inside
 * programs whose stacks are large already (the limit is for them together).
 */
struct py_scratch {
	__u64 pid_tgid, now;
	__u64 head;         /* the thread list's head when the thread's state was looked for */
	__u32 api;
	__u32 tgid;
	__u32 unreadable;
	/*
	 * A walk is in progress on this CPU: a probe preempted in its walk
	 * (a preemptible kernel) leaves the scratch to it, and the call that
	 * found it so goes without a stack (counted).
	 */
	__u32 busy;
	struct py_scan scan;
	struct py_walk walk;
	struct py_seen seen;
	struct cp_py_stack_event record;
	__u8 chunk[PY_CHUNK + 8]; /* + 8: a u64 read at any offset below PY_CHUNK fits */
	__u8 window[PY_WINDOW + PY_CHUNK + 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

static const __u32 py_scratch_key = 0;

/* bpf_loop's context: on the stack, as it must be. */
struct py_walk_ctx {
	struct py_scratch *s;
};

static __always_inline __u64 py_mix(__u64 hash, __u64 value)
{
	hash ^= value;
	hash *= 0x9e3779b97f4a7c15ull;
	return hash ^ (hash >> 31);
}

static __always_inline __u64 py_read_u64(__u64 address)
{
	__u64 value = 0;

	if (bpf_probe_read_user(&value, sizeof(value), (void *)address))
		return 0;
	return value;
}

/* ---- finding the calling thread's state ------------------------------------------- */

static long py_scan_step(__u64 index, void *ctx)
{
	struct py_scan *x = &((struct py_walk_ctx *)ctx)->s->scan;
	__u64 thread_id = 0;

	if (!x->tstate) {
		if (!x->interp || ++x->interpreters > PY_INTERPRETERS_MAX)
			return 1;
		if (bpf_probe_read_user(&x->tstate, sizeof(x->tstate),
					(void *)(x->interp + x->interp_threads_head)) ||
		    bpf_probe_read_user(&x->interp, sizeof(x->interp),
					(void *)(x->interp + x->interp_next))) {
			x->unreadable = 1;
			return 1;
		}
		return 0;
	}
	if (bpf_probe_read_user(&thread_id, sizeof(thread_id),
				(void *)(x->tstate + x->tstate_thread_id))) {
		x->unreadable = 1;
		return 1;
	}
	if (thread_id == x->fsbase) {
		x->found = x->tstate;
		return 1;
	}
	if (bpf_probe_read_user(&x->tstate, sizeof(x->tstate), (void *)(x->tstate + x->tstate_next))) {
		x->unreadable = 1;
		return 1;
	}
	return 0;
}

/* The calling thread's PyThreadState, or 0 (s->unreadable set when memory failed us). */
static __always_inline __u64 py_thread_state(const struct cp_py_proc *proc, struct py_scratch *s)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct py_walk_ctx ctx = { .s = s };
	struct py_scan *x = &s->scan;
	struct py_thread *known;

	known = bpf_task_storage_get(&py_threads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (known && known->seed == proc->seed && known->tstate &&
	    py_read_u64(known->tstate + proc->tstate_thread_id) == task->thread.fsbase)
		return known->tstate;
	__builtin_memset(x, 0, sizeof(*x));
	x->fsbase = task->thread.fsbase;
	x->interp_next = proc->interp_next;
	x->interp_threads_head = proc->interp_threads_head;
	x->tstate_next = proc->tstate_next;
	x->tstate_thread_id = proc->tstate_thread_id;
	/* The newest interpreter's thread list: a thread state is added at its head. */
	x->interp = py_read_u64(proc->runtime + proc->runtime_interpreters_head);
	if (!x->interp) {
		s->unreadable = 1;
		return 0;
	}
	s->head = py_read_u64(x->interp + proc->interp_threads_head);
	if (known && known->seed == proc->seed && !known->tstate && known->head == s->head)
		return 0; /* none last time, and no thread state added since */
	bpf_loop(PY_THREADS_MAX, py_scan_step, &ctx, 0);
	if (x->unreadable && !x->found) {
		s->unreadable = 1;
		return 0;
	}
	known = bpf_task_storage_get(&py_threads, task, 0, 0);
	if (known) {
		known->seed = proc->seed;
		known->tstate = x->found;
		known->head = s->head;
	}
	return x->found;
}

/* ---- the frames ------------------------------------------------------------------------- */

static __always_inline __u64 py_chunk_u64(const __u8 *chunk, __u32 offset)
{
	return *(const __u64 *)(chunk + (offset & (PY_CHUNK - 1)));
}

/*
 * The window below the current frame, down to its data stack chunk's
 * start at most. A frame elsewhere (a generator's) is read alone.
 */
static __always_inline void py_read_window(struct py_scratch *s)
{
	struct py_walk *w = &s->walk;
	__u64 end = w->frame + w->read_start + w->read_size, start, size;

	if (!w->chunk || w->chunk > w->frame || w->frame - w->chunk > (1ull << 32))
		return;
	start = end - w->chunk > PY_WINDOW ? end - PY_WINDOW : w->chunk;
	size = end - start;
	if (size == 0 || size > PY_WINDOW || bpf_probe_read_user(s->window, size, (void *)start))
		return;
	w->window_start = start;
	w->window_end = end;
}

static __always_inline bool py_in_window(const struct py_walk *w, __u64 start, __u32 size)
{
	return start >= w->window_start && start + size <= w->window_end;
}

static long py_frame_step(__u64 index, void *ctx)
{
	struct py_scratch *s = ((struct py_walk_ctx *)ctx)->s;
	struct py_walk *w = &s->walk;
	__u32 size = w->read_size, slot, instr;
	const __u8 *fields = s->chunk;
	__u64 code, previous, at, start;

	if (!w->frame)
		return 1;
	start = w->frame + w->read_start;
	if (!py_in_window(w, start, size))
		py_read_window(s);
	if (py_in_window(w, start, size)) {
		fields = s->window + ((start - w->window_start) & (PY_WINDOW - 1));
	} else if (size == 0 || size > PY_CHUNK ||
		   bpf_probe_read_user(s->chunk, size, (void *)start)) {
		w->flags |= CP_PY_STACK_UNREADABLE;
		return 1;
	}
	previous = py_chunk_u64(fields, w->previous);
	if (w->has_owner && fields[w->owner & (PY_CHUNK - 1)] >= PY_OWNER_SHIM) {
		w->frame = previous; /* the interpreter's own frame: no user code */
		return 0;
	}
	if (w->depth >= CP_PY_STACK_MAX) {
		w->flags |= CP_PY_STACK_TRUNCATED;
		return 1;
	}
	code = py_chunk_u64(fields, w->code) & w->code_mask;
	if (w->instr_is_index) {
		instr = *(const __u32 *)(fields + (w->instr & (PY_CHUNK - 1)));
	} else {
		at = py_chunk_u64(fields, w->instr);
		instr = at >= code && at - code < CP_PY_INSTR_UNKNOWN ? at - code : CP_PY_INSTR_UNKNOWN;
	}
	slot = w->depth & (CP_PY_STACK_MAX - 1);
	s->record.code[slot] = code;
	s->record.instr[slot] = instr;
	w->hash = py_mix(py_mix(w->hash, code), instr);
	w->depth++;
	w->frame = previous;
	return 0;
}

/*
 * Stops the process until the agent has read a record about it (the caller
 * submits it after this): marked CP_PY_HOLD_INODE, so the agent releases
 * only Python's holds. A process held already is left to that hold.
 */
static __always_inline void py_hold(__u32 tgid)
{
	struct cp_file_key marker = { .inode = CP_PY_HOLD_INODE };

	if (bpf_map_lookup_elem(&held_pids, &tgid))
		return;
	if (bpf_map_update_elem(&held_pids, &tgid, &marker, BPF_NOEXIST)) {
		count(CP_CNT_HOLD_FAILED);
		return;
	}
	if (bpf_send_signal(SIGSTOP_)) {
		bpf_map_delete_elem(&held_pids, &tgid);
		count(CP_CNT_HOLD_FAILED);
	}
}

/* The walk itself, the scratch its own (python_stack). */
static __always_inline __u64 py_walk_stack(struct py_scratch *s, const struct cp_py_proc *proc,
					   __u64 pid_tgid, __u32 api, __u64 now)
{
	struct cp_py_stack_event *record;
	struct py_seen *seen;
	struct py_walk_ctx ctx;
	struct py_walk *w;
	__u64 tstate;

	s->tgid = pid_tgid >> 32;
	s->pid_tgid = pid_tgid;
	s->api = api;
	s->now = now;
	count(CP_CNT_PY_WALKS);
	s->unreadable = 0;
	w = &s->walk;
	__builtin_memset(w, 0, sizeof(*w));
	tstate = py_thread_state(proc, s);
	if (tstate) {
		w->frame = py_read_u64(tstate + proc->tstate_frame);
		if (w->frame && (proc->flags & CP_PY_CFRAME))
			w->frame = py_read_u64(w->frame + proc->cframe_current_frame);
	}
	if (!w->frame) {
		count(s->unreadable ? CP_CNT_PY_UNREADABLE : CP_CNT_PY_NO_FRAMES);
		return 0;
	}
	w->hash = proc->seed;
	w->code_mask = proc->flags & CP_PY_TAGGED_CODE ? ~3ull : ~0ull;
	w->read_start = proc->frame_read_start;
	w->read_size = proc->frame_read_size;
	w->code = proc->frame_code - proc->frame_read_start;
	w->previous = proc->frame_previous - proc->frame_read_start;
	w->instr = proc->frame_instr - proc->frame_read_start;
	w->has_owner = proc->frame_owner != CP_PY_NO_OFFSET;
	w->owner = w->has_owner ? proc->frame_owner - proc->frame_read_start : 0;
	w->instr_is_index = proc->flags & CP_PY_FRAME_OBJECTS;
	if (proc->tstate_datastack != CP_PY_NO_OFFSET)
		w->chunk = py_read_u64(tstate + proc->tstate_datastack);
	ctx.s = s;
	bpf_loop(PY_RAW_FRAMES_MAX, py_frame_step, &ctx, 0);
	if (w->frame && !(w->flags & (CP_PY_STACK_TRUNCATED | CP_PY_STACK_UNREADABLE)))
		w->flags |= CP_PY_STACK_TRUNCATED; /* more frames than one walk follows */
	if (w->flags & CP_PY_STACK_TRUNCATED)
		count(CP_CNT_PY_TRUNCATED);
	if (w->flags & CP_PY_STACK_UNREADABLE)
		count(CP_CNT_PY_UNREADABLE);
	if (!w->depth) {
		if (!(w->flags & CP_PY_STACK_UNREADABLE))
			count(CP_CNT_PY_NO_FRAMES);
		return 0;
	}
	s->record.stack_id = py_mix(py_mix(w->hash, w->depth), w->flags) ?: 1;
	s->seen.code0 = s->record.code[0];
	s->seen.instr0 = s->record.instr[0];
	s->seen.depth = w->depth;
	seen = bpf_map_lookup_elem(&py_stacks_seen, &s->record.stack_id);
	if (seen) {
		if (seen->code0 == s->seen.code0 && seen->instr0 == s->seen.instr0 &&
		    seen->depth == s->seen.depth)
			return s->record.stack_id;
		count(CP_CNT_PY_COLLISIONS);
		return 0;
	}
	/* New: its frames go out before any record that names it. */
	record = reserve(cpu_counters(), sizeof(*record));
	if (!record) {
		count(CP_CNT_PY_STACKS_LOST);
		return 0;
	}
	fill_header(&s->record.hdr, CP_EV_PY_STACK, s->api, s->pid_tgid, s->now);
	s->record.depth = w->depth;
	s->record.flags = w->flags;
	bpf_probe_read_kernel(record, sizeof(*record), &s->record);
	if (hold_for_python)
		py_hold(s->tgid);
	submit(record, s->now, true);
	count(CP_CNT_PY_NEW_STACKS);
	if (bpf_map_update_elem(&py_stacks_seen, &s->record.stack_id, &s->seen, BPF_ANY))
		count(CP_CNT_PY_SEEN_FULL);
	return s->record.stack_id;
}

/*
 * The calling thread's Python stack id, or 0 when the process is not
 * Python (one look-up), the thread has no Python frames, or the stack could
 * not be sent. A new stack's record goes into the ring first. A function of
 * its own (global, not inlined): the verifier checks it once, not in every
 * program and branch that walks.
 */
__noinline __u64 python_stack(__u64 pid_tgid, __u32 api, __u64 now)
{
	__u32 tgid = pid_tgid >> 32;
	const struct cp_py_proc *proc;
	struct py_scratch *s;
	__u64 id;

	if (!python_stacks)
		return 0;
	proc = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!proc || !proc->version)
		return 0;
	s = bpf_map_lookup_elem(&py_scratch, &py_scratch_key);
	if (!s)
		return 0;
	if (s->busy) {
		count(CP_CNT_PY_BUSY);
		return 0;
	}
	s->busy = 1;
	id = py_walk_stack(s, proc, pid_tgid, api, now);
	s->busy = 0;
	return id;
}

/* A forked process runs the same interpreter: it gets its parent's layout, with a seed of its own. */
static __always_inline void python_fork(__u32 parent_tgid, __u32 child_tgid)
{
	struct cp_py_proc *parent, child;

	if (!python_stacks)
		return;
	parent = bpf_map_lookup_elem(&py_procs, &parent_tgid);
	if (!parent)
		return;
	child = *parent;
	child.seed = py_mix(py_mix(parent->seed, child_tgid), bpf_ktime_get_ns());
	bpf_map_update_elem(&py_procs, &child_tgid, &child, BPF_ANY);
}

#endif /* CUPROBE_PYTHON_BPF_H */
