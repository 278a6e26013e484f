// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe's BPF programs: uprobes on the CUDA driver API (libcuda.so.1) and
 * cudaLaunchKernel (libcudart), the fork/exit tracepoints that keep the set
 * of traced processes current, and the mmap/exec tracepoints that tell the
 * agent a process mapped a CUDA library file no probe covers yet.
 *
 * Which program goes on which symbol, and the cookie each gets, come from
 * the catalogue (cuprobe_catalogue.h). One program serves every symbol of
 * the same signature; the cookie carries the API id, the family, a kind
 * (memory kind, copy direction, ...) and where the arguments are. The hot
 * path (launches, copies, syncs, frees) is one entry probe per call; only
 * calls that return something through a pointer, or whose result matters,
 * add a return probe.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cuprobe_events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define SIGSTOP_ 19
#define PROT_EXEC_ 0x4
#define NR_MMAP_X86_64 9

/* Set by the loader before load. */
const volatile bool filter_by_pid = false;
const volatile __u64 wakeup_threshold_bytes = CP_DEFAULT_WAKEUP_BYTES;
const volatile __u64 wakeup_latency_ns = CP_DEFAULT_WAKEUP_NS;
/* cuprobe stats/top: count in maps; with stream_events off, stream only names and lifecycle. */
const volatile bool stream_events = true;
const volatile bool aggregate = false;
const volatile bool record_stacks = false;
const volatile bool measure_latency = false;
/* For the bench: wake the consumer on every record, the policy the default avoids. */
const volatile bool wake_every_record = false;
/* Attach events: report new driver files (and runtimes, with watch_runtime). */
const volatile bool watch_mappings = false;
const volatile bool watch_runtime = false;
/* Stop a traced process that maps an uncovered file until the agent attached. */
const volatile bool hold_new_mappers = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024); /* resized by the loader */
} events SEC(".maps");

/*
 * Thread group ids being traced when filter_by_pid. System-wide, the CUDA
 * processes known so far (seeded by the loader, grown by cuInit), so that
 * exits are reported for them and not for every process on the host.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} target_pids SEC(".maps");

/*
 * Per-CPU counters: probe hits per API, records attempted/lost, overflows.
 * One entry holding every slot, so a probe looks it up once.
 */
struct counter_slots {
	__u64 slot[CP_CNT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counter_slots);
} counters SEC(".maps");

/* When the consumer was last woken; shared by all CPUs, races are harmless. */
__u64 last_wakeup_ns = 0;

/* State carried from an entry probe to its return probe, per thread. */
struct pending_call {
	__u64 cookie;
	__u64 a, b, c, bytes, stream; /* the arguments the cookie points at */
	__s64 stack_id;  /* allocating user stack, when record_stacks */
	__u64 caller;    /* return address of the call, when record_stacks */
};

/*
 * Entry state is keyed by thread and stack pointer: at the return probe the
 * stack pointer is the entry's plus the popped return address, so a probed
 * call made inside another (nesting, recursion) keeps its own state. LRU:
 * state whose return never comes (longjmp, exceptions) ages out.
 */
struct call_key {
	__u64 pid_tgid;
	__u64 sp;       /* the stack pointer at entry */
};

static __always_inline struct call_key entry_key(struct pt_regs *regs, __u64 pid_tgid)
{
	struct call_key key = { .pid_tgid = pid_tgid, .sp = PT_REGS_SP(regs) };

	return key;
}

static __always_inline struct call_key return_key(struct pt_regs *regs, __u64 pid_tgid)
{
	struct call_key key = { .pid_tgid = pid_tgid, .sp = PT_REGS_SP(regs) - 8 };

	return key;
}

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct call_key);
	__type(value, struct pending_call);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cp_kernel_key);
	__type(value, struct cp_kernel_stat);
} kernel_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct cp_api_key);
	__type(value, struct cp_api_stat);
} api_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct cp_mem_stat);
} mem_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cp_alloc_key);
	__type(value, struct cp_alloc_info);
} live_allocs SEC(".maps");

/* VMM: physical handles, mappings and reserved ranges of traced processes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cp_vmm_key);
	__type(value, struct cp_vmm_handle);
} vmm_handles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cp_vmm_key);
	__type(value, struct cp_vmm_mapping);
} vmm_mappings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cp_vmm_key);
	__type(value, __u64);
} vmm_ranges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 4096);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, CP_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

/* When each thread entered the call being timed (measure_latency). */
struct call_start {
	__u64 time_ns;
	__u32 api;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct call_key);
	__type(value, struct call_start);
} call_starts SEC(".maps");

/*
 * CUDA library files already probed (or known to need none), filled by the
 * agent: a mapping of one of them is not an attach event.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct cp_file_key);
	__type(value, __u8);
} covered_files SEC(".maps");

/* Processes stopped by hold_new_mappers, until the agent (or its guardian) continues them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct cp_file_key);
} held_pids SEC(".maps");

/* ---- helpers shared by every program ------------------------------------- */

static __always_inline struct counter_slots *cpu_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

static __always_inline void count_in(struct counter_slots *slots, __u32 slot)
{
	if (slots && slot < CP_CNT_MAX)
		slots->slot[slot] += 1;
}

static __always_inline void count(__u32 slot)
{
	count_in(cpu_counters(), slot);
}

/*
 * The row of key in a hash map, created from init when absent (another CPU
 * may create it first: then that row). NULL, counted in full_slot, when the
 * map is full.
 */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *init,
					    __u32 full_slot)
{
	void *row = bpf_map_lookup_elem(map, key);

	if (row)
		return row;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	row = bpf_map_lookup_elem(map, key);
	if (!row)
		count(full_slot);
	return row;
}

/* True when this process is one we were asked to trace. */
static __always_inline bool traced(__u32 tgid)
{
	if (!filter_by_pid)
		return true;
	if (bpf_map_lookup_elem(&target_pids, &tgid))
		return true;
	count(CP_CNT_FILTERED);
	return false;
}

/* What every probe of a traced call knows once it has entered. */
struct call {
	struct pt_regs *regs;
	__u64 pid_tgid;
	__u64 cookie;
	__u64 now;
	__u32 api;
	struct counter_slots *slots;
	__u64 args[8];  /* the register arguments, once load_args has run */
};

static __always_inline struct cp_api_stat *api_row(__u32 tgid, __u32 api)
{
	struct cp_api_key key = { .pid = tgid, .api = api };
	static const struct cp_api_stat empty;

	return lookup_or_init(&api_stats, &key, &empty, CP_CNT_API_STATS_FULL);
}

static __always_inline struct cp_mem_stat *mem_row(__u32 tgid)
{
	static const struct cp_mem_stat empty;

	return lookup_or_init(&mem_stats, &tgid, &empty, CP_CNT_MEM_STATS_FULL);
}

/*
 * The entry of every probed call: the pid filter, the API hit counted, the
 * clock read once, the (pid, API) call counted and the start noted when
 * timing. False when the process is not traced.
 */
static __always_inline bool enter(struct pt_regs *regs, struct call *c)
{
	c->pid_tgid = bpf_get_current_pid_tgid();
	if (!traced(c->pid_tgid >> 32))
		return false;
	c->regs = regs;
	c->cookie = bpf_get_attach_cookie(regs);
	c->api = CP_COOKIE_API(c->cookie);
	c->slots = cpu_counters();
	if (c->slots && c->api < CP_API_MAX)
		c->slots->slot[c->api] += 1;
	c->now = bpf_ktime_get_ns();
	if (aggregate) {
		struct cp_api_stat *row = api_row(c->pid_tgid >> 32, c->api);

		if (row)
			__sync_fetch_and_add(&row->calls, 1);
	}
	if (measure_latency) {
		struct call_start start = { .time_ns = c->now, .api = c->api };
		struct call_key key = entry_key(regs, c->pid_tgid);

		if (bpf_map_update_elem(&call_starts, &key, &start, BPF_ANY))
			count_in(c->slots, CP_CNT_CALL_START_FULL);
	}
	return true;
}

static __always_inline void *reserve(struct counter_slots *slots, __u64 size)
{
	void *record;

	count_in(slots, CP_CNT_RECORDS_ATTEMPTED);
	record = bpf_ringbuf_reserve(&events, size, 0);
	if (!record)
		count_in(slots, CP_CNT_RECORDS_LOST);
	return record;
}

/*
 * Submit without waking the consumer unless enough unread data piled up or
 * the latency bound has passed since the last wakeup: a wakeup costs ~1.4 us
 * inside the probe (DESIGN.md). Lifecycle and attach records force one.
 */
static __always_inline void submit(void *record, __u64 now, bool urgent)
{
	bool wake = urgent || wake_every_record;

	if (!wake && now - last_wakeup_ns >= wakeup_latency_ns)
		wake = true;
	if (!wake && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_threshold_bytes)
		wake = true;
	if (wake)
		last_wakeup_ns = now;
	bpf_ringbuf_submit(record, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

static __always_inline void fill_header(struct cp_event_header *hdr, __u32 type, __u32 api,
					__u64 pid_tgid, __u64 now)
{
	hdr->type = type;
	hdr->api = api;
	hdr->pid = pid_tgid >> 32;
	hdr->tid = (__u32)pid_tgid;
	hdr->time_ns = now;
}

/* A record of this call, counted; NULL when records are off or the ring is full. */
static __always_inline void *call_record(struct call *c, __u32 type, __u64 size)
{
	void *record;

	if (!stream_events)
		return NULL;
	record = reserve(c->slots, size);
	if (record)
		fill_header(record, type, c->api, c->pid_tgid, c->now);
	return record;
}

/*
 * The integer arguments, x86-64 SysV: six registers, then the stack slots
 * above the return address. The registers are copied out once, each load
 * pinned (barrier_var) so the compiler cannot fold them into a computed
 * context offset, which the verifier refuses.
 */
static __always_inline void load_args(struct call *c)
{
	__u64 a1 = PT_REGS_PARM1(c->regs), a2 = PT_REGS_PARM2(c->regs), a3 = PT_REGS_PARM3(c->regs);
	__u64 a4 = PT_REGS_PARM4(c->regs), a5 = PT_REGS_PARM5(c->regs), a6 = c->regs->r9;

	barrier_var(a1);
	barrier_var(a2);
	barrier_var(a3);
	barrier_var(a4);
	barrier_var(a5);
	barrier_var(a6);
	c->args[0] = a1;
	c->args[1] = a2;
	c->args[2] = a3;
	c->args[3] = a4;
	c->args[4] = a5;
	c->args[5] = a6;
}

/* The n-th (1-based) argument; 0 for position 0 (absent). load_args first. */
static __always_inline __u64 arg_at(struct call *c, __u32 n)
{
	__u64 value = 0;

	if (n == 0)
		return 0;
	if (n <= 6)
		return c->args[(n - 1) & 7]; /* the mask bounds the index for the verifier */
	bpf_probe_read_user(&value, sizeof(value), (void *)(PT_REGS_SP(c->regs) + 8 * (n - 6)));
	return value;
}

static __always_inline __u64 cookie_arg(struct call *c, __u32 shift)
{
	return arg_at(c, CP_COOKIE_ARG(c->cookie, shift));
}

/* ---- aggregation ------------------------------------------------------------ */

/* A timed call returned: latency into the (pid, api) histogram, errors counted. */
static __always_inline void returned(struct pt_regs *regs, __u64 pid_tgid, int result)
{
	struct call_key key = return_key(regs, pid_tgid);
	struct call_start *start;
	struct cp_api_stat *row;
	__u64 elapsed;

	if (!measure_latency)
		return;
	start = bpf_map_lookup_elem(&call_starts, &key);
	if (!start)
		return;
	elapsed = bpf_ktime_get_ns() - start->time_ns;
	row = aggregate ? api_row(pid_tgid >> 32, start->api) : NULL;
	bpf_map_delete_elem(&call_starts, &key);
	if (!row)
		return;
	__sync_fetch_and_add(&row->timed, 1);
	__sync_fetch_and_add(&row->total_ns, elapsed);
	if (result != 0)
		__sync_fetch_and_add(&row->errors, 1);
	__sync_fetch_and_add(&row->histogram[cp_log2_bucket(elapsed) & (CP_HIST_BUCKETS - 1)], 1);
}

static __always_inline void count_launch(__u32 tgid, __u64 handle, __u64 threads, bool graph)
{
	struct cp_kernel_key key = { .pid = tgid, .handle = handle };
	struct cp_kernel_stat empty = { .graph = graph };
	struct cp_kernel_stat *row;

	row = lookup_or_init(&kernel_stats, &key, &empty, CP_CNT_KERNEL_STATS_FULL);
	if (!row)
		return;
	__sync_fetch_and_add(&row->launches, 1);
	__sync_fetch_and_add(&row->threads, threads);
}

/* Live device bytes grew by bytes: the peak follows. */
static __always_inline void grow_live(struct cp_mem_stat *mem, __u64 bytes)
{
	__u64 live = __sync_fetch_and_add(&mem->live_bytes, bytes) + bytes;

	__sync_fetch_and_add(&mem->live_allocations, 1);
	if (live > mem->peak_bytes)
		mem->peak_bytes = live; /* a racing update may keep the smaller: harmless */
}

/* Generic return probe, for timing calls whose entry probe has no return twin. */
SEC("uretprobe")
int BPF_KRETPROBE(api_return, int result)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (!traced(pid_tgid >> 32))
		return 0;
	returned(ctx, pid_tgid, result);
	return 0;
}

/* ---- launches ------------------------------------------------------------- */

/*
 * cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sharedMem, hStream, params, extra)
 * cuLaunchCooperativeKernel has the same first nine arguments. The first six
 * travel in registers, blockDimZ, sharedMemBytes and hStream on the stack.
 */
SEC("uprobe")
int BPF_KPROBE(launch_kernel, __u64 function, __u64 gx, __u64 gy, __u64 gz, __u64 bx)
{
	struct cp_launch_event *event;
	__u64 on_stack[3] = {}; /* blockDimZ, sharedMemBytes, hStream */
	struct call c;
	bool fault;
	__u64 by;

	if (!enter(ctx, &c))
		return 0;
	by = ctx->r9;
	/* One read for the three stack arguments above the return address. */
	fault = bpf_probe_read_user(on_stack, sizeof(on_stack), (void *)(PT_REGS_SP(ctx) + 8)) != 0;
	if (aggregate)
		count_launch(c.pid_tgid >> 32, function,
			     (__u64)(__u32)gx * (__u32)gy * (__u32)gz * (__u32)bx * (__u32)by *
			     (__u32)on_stack[0], false);
	event = call_record(&c, CP_EV_LAUNCH, sizeof(*event));
	if (!event)
		return 0;
	event->function = function;
	event->grid[0] = gx;
	event->grid[1] = gy;
	event->grid[2] = gz;
	event->block[0] = bx;
	event->block[1] = by;
	event->block[2] = on_stack[0];
	event->shared_mem_bytes = on_stack[1];
	event->stream = on_stack[2];
	event->flags = (CP_COOKIE_KIND(c.cookie) == CP_LAUNCH_KIND_COOPERATIVE ? CP_LAUNCH_COOPERATIVE : 0) |
		       (fault ? CP_LAUNCH_CONFIG_FAULT : 0);
	submit(event, c.now, false);
	return 0;
}

/* The leading fields of CUlaunchConfig, as cuda.h lays them out. */
struct launch_config_prefix {
	__u32 grid[3];
	__u32 block[3];
	__u32 shared_mem_bytes;
	__u32 pad;
	__u64 stream;
};

/* cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) */
SEC("uprobe")
int BPF_KPROBE(launch_kernel_ex, __u64 config, __u64 function)
{
	struct launch_config_prefix cfg = {};
	struct cp_launch_event *event;
	struct call c;
	bool fault;
	int i;

	if (!enter(ctx, &c))
		return 0;
	fault = bpf_probe_read_user(&cfg, sizeof(cfg), (void *)config) != 0;
	if (aggregate)
		count_launch(c.pid_tgid >> 32, function,
			     (__u64)cfg.grid[0] * cfg.grid[1] * cfg.grid[2] * cfg.block[0] *
			     cfg.block[1] * cfg.block[2], false);
	event = call_record(&c, CP_EV_LAUNCH, sizeof(*event));
	if (!event)
		return 0;
	event->flags = CP_LAUNCH_EX | (fault ? CP_LAUNCH_CONFIG_FAULT : 0);
	event->function = function;
	for (i = 0; i < 3; i++) {
		event->grid[i] = cfg.grid[i];
		event->block[i] = cfg.block[i];
	}
	event->shared_mem_bytes = cfg.shared_mem_bytes;
	event->stream = cfg.stream;
	submit(event, c.now, false);
	return 0;
}

/*
 * cuGraphLaunch(exec, stream), cuLaunchHostFunc(stream, fn, data) and the
 * legacy cuLaunch(f) / cuLaunchGrid(f, w, h) / cuLaunchGridAsync(f, w, h, stream):
 * the cookie says where the handle (A), the grid (B, C) and the stream are.
 */
SEC("uprobe")
int BPF_KPROBE(launch_other)
{
	struct cp_launch_event *event;
	__u32 kind, flags = 0;
	__u64 function;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	kind = CP_COOKIE_KIND(c.cookie);
	function = cookie_arg(&c, CP_SHIFT_A);
	if (kind == CP_LAUNCH_KIND_GRAPH)
		flags = CP_LAUNCH_GRAPH;
	else if (kind == CP_LAUNCH_KIND_HOST_FUNC)
		flags = CP_LAUNCH_HOST_FUNC;
	else
		flags = CP_LAUNCH_LEGACY;
	if (aggregate && kind != CP_LAUNCH_KIND_HOST_FUNC)
		count_launch(c.pid_tgid >> 32, function, 0, kind == CP_LAUNCH_KIND_GRAPH);
	event = call_record(&c, CP_EV_LAUNCH, sizeof(*event));
	if (!event)
		return 0;
	__builtin_memset((char *)event + sizeof(event->hdr), 0, sizeof(*event) - sizeof(event->hdr));
	event->function = function;
	event->stream = cookie_arg(&c, CP_SHIFT_STREAM);
	event->flags = flags;
	if (kind == CP_LAUNCH_KIND_LEGACY) {
		event->grid[0] = CP_COOKIE_ARG(c.cookie, CP_SHIFT_B) ? cookie_arg(&c, CP_SHIFT_B) : 1;
		event->grid[1] = CP_COOKIE_ARG(c.cookie, CP_SHIFT_C) ? cookie_arg(&c, CP_SHIFT_C) : 1;
		event->grid[2] = 1;
	}
	submit(event, c.now, false);
	return 0;
}

/* ---- calls whose result is read on return ---------------------------------- */

/* Takes the entry state of this thread's returning call; false when there is none. */
static __always_inline bool take_call(struct pt_regs *regs, __u64 pid_tgid,
				      struct pending_call *call)
{
	struct call_key key = return_key(regs, pid_tgid);
	struct pending_call *found = bpf_map_lookup_elem(&pending, &key);

	if (!found) {
		count(CP_CNT_PENDING_MISSED);
		return false;
	}
	*call = *found;
	bpf_map_delete_elem(&pending, &key);
	return true;
}

static __always_inline void keep_call(struct call *c, struct pending_call *call)
{
	struct call_key key = entry_key(c->regs, c->pid_tgid);

	if (bpf_map_update_elem(&pending, &key, call, BPF_ANY))
		count_in(c->slots, CP_CNT_PENDING_OVERFLOW);
}

/*
 * Allocations, VMM operations, completion queries and module loads: the
 * arguments the cookie names are kept until the call returns (and, for
 * allocations with record_stacks, the allocating user stack).
 */
SEC("uprobe")
int BPF_KPROBE(call_entry)
{
	struct pending_call call = {};
	struct call c;
	__u32 family;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	family = CP_COOKIE_FAMILY(c.cookie);
	call.cookie = c.cookie;
	call.a = cookie_arg(&c, CP_SHIFT_A);
	call.b = cookie_arg(&c, CP_SHIFT_B);
	call.c = cookie_arg(&c, CP_SHIFT_C);
	call.bytes = cookie_arg(&c, CP_SHIFT_BYTES);
	call.stream = cookie_arg(&c, CP_SHIFT_STREAM);
	call.stack_id = -1;
	if (record_stacks && (family == CP_FAMILY_alloc ||
			      (family == CP_FAMILY_vmm && CP_COOKIE_KIND(c.cookie) == CP_VMM_CREATE))) {
		/* At entry the caller's frames are intact: the allocating code path. */
		call.stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		if (call.stack_id < 0)
			count_in(c.slots, CP_CNT_STACKS_LOST);
		bpf_probe_read_user(&call.caller, sizeof(call.caller), (void *)PT_REGS_SP(ctx));
	}
	keep_call(&c, &call);
	return 0;
}

/*
 * A successful allocation joins the live set and the process's totals:
 * device memory (and its allocation count) apart from pinned host memory.
 */
static __always_inline void track_alloc(__u32 tgid, __u64 ptr, __u64 bytes, __u32 kind,
					__u32 api, __s64 stack_id, __u64 caller, __u64 now)
{
	struct cp_alloc_key key = { .pid = tgid, .ptr = ptr };
	struct cp_alloc_info info = {
		.bytes = bytes, .stack_id = stack_id, .caller = caller, .time_ns = now, .kind = kind,
		.api = api,
	};
	struct cp_mem_stat *mem = mem_row(tgid);

	if (!mem)
		return;
	if (kind != CP_MEM_HOST)
		__sync_fetch_and_add(&mem->allocations, 1);
	if (bpf_map_update_elem(&live_allocs, &key, &info, BPF_ANY)) {
		count(CP_CNT_LIVE_ALLOCS_FULL);
		return; /* not tracked: its free will count as unknown */
	}
	if (kind == CP_MEM_HOST) {
		__sync_fetch_and_add(&mem->host_live_bytes, bytes);
		__sync_fetch_and_add(&mem->host_live_allocations, 1);
		return;
	}
	grow_live(mem, bytes);
}

/* A free leaves the live set; a device pointer never seen allocated is counted apart. */
static __always_inline void track_free(__u32 tgid, __u64 ptr, __u32 kind)
{
	struct cp_alloc_key key = { .pid = tgid, .ptr = ptr };
	struct cp_mem_stat *mem;
	struct cp_alloc_info *info;

	if (!ptr)
		return;
	mem = mem_row(tgid);
	if (!mem)
		return;
	if (kind != CP_MEM_HOST)
		__sync_fetch_and_add(&mem->frees, 1);
	info = bpf_map_lookup_elem(&live_allocs, &key);
	if (!info) {
		if (kind != CP_MEM_HOST)
			__sync_fetch_and_add(&mem->unknown_frees, 1);
		return;
	}
	if (info->kind == CP_MEM_HOST) {
		__sync_fetch_and_sub(&mem->host_live_bytes, info->bytes);
		__sync_fetch_and_sub(&mem->host_live_allocations, 1);
	} else {
		__sync_fetch_and_sub(&mem->live_bytes, info->bytes);
		__sync_fetch_and_sub(&mem->live_allocations, 1);
	}
	bpf_map_delete_elem(&live_allocs, &key);
}

static __always_inline void alloc_returned(struct call *c, struct pending_call *call, int result)
{
	__u32 kind = CP_COOKIE_KIND(call->cookie);
	struct cp_alloc_event *event;
	__u64 pitch = 0, ptr = 0, bytes;

	if (CP_COOKIE_VARIANT(call->cookie) == CP_ALLOC_PITCH) {
		if (result == 0)
			bpf_probe_read_user(&pitch, sizeof(pitch), (void *)call->b);
		bytes = pitch * call->c;
	} else {
		bytes = call->bytes;
	}
	if (result == 0 && bpf_probe_read_user(&ptr, sizeof(ptr), (void *)call->a))
		ptr = 0;
	if (aggregate && result == 0 && ptr)
		track_alloc(c->pid_tgid >> 32, ptr, bytes, kind, c->api, call->stack_id,
			    call->caller, c->now);
	event = call_record(c, CP_EV_ALLOC, sizeof(*event));
	if (!event)
		return;
	event->kind = kind;
	event->result = result;
	event->ptr = ptr;
	event->bytes = bytes;
	event->stream = CP_COOKIE_ASYNC(call->cookie) ? call->stream : 0;
	submit(event, c->now, false);
}

/*
 * A VMM handle is freed once released and unmapped everywhere: whichever
 * call sees both counts at zero frees it, exactly once. Returns the
 * physical bytes freed.
 */
static __always_inline __u64 maybe_free_handle(__u32 tgid, struct cp_vmm_key *key,
					       struct cp_vmm_handle *handle)
{
	struct cp_mem_stat *mem;
	__u64 bytes = handle->bytes;

	if (handle->refs > 0 || handle->maps > 0)
		return 0;
	if (__sync_lock_test_and_set(&handle->freed, 1))
		return 0;
	mem = aggregate ? mem_row(tgid) : NULL;
	if (mem) {
		__sync_fetch_and_sub(&mem->live_bytes, bytes);
		__sync_fetch_and_sub(&mem->vmm_live_bytes, bytes);
		__sync_fetch_and_sub(&mem->live_allocations, 1);
		__sync_fetch_and_add(&mem->frees, 1);
	}
	bpf_map_delete_elem(&vmm_handles, key);
	return bytes;
}

#define UNMAP_MAPPINGS_MAX 16

/*
 * VMM bookkeeping for a successful call, kept in every mode (the records
 * say which call freed physical memory); the process's totals only when
 * aggregating. Returns the physical bytes made live or freed.
 */
static __always_inline __u64 track_vmm(__u32 tgid, __u32 op, __u64 handle, __u64 ptr, __u64 bytes)
{
	struct cp_vmm_key key = { .pid = tgid };
	struct cp_vmm_handle *h, fresh = { .bytes = bytes, .refs = 1 };
	struct cp_vmm_mapping *m, mapping = { .handle = handle, .bytes = bytes };
	struct cp_mem_stat *mem;
	__u64 freed = 0, *range;
	int i;

	switch (op) {
	case CP_VMM_CREATE:
		key.id = handle;
		if (bpf_map_update_elem(&vmm_handles, &key, &fresh, BPF_ANY)) {
			count(CP_CNT_VMM_FULL);
			return 0;
		}
		mem = aggregate ? mem_row(tgid) : NULL;
		if (mem) {
			__u64 vmm_live = __sync_fetch_and_add(&mem->vmm_live_bytes, bytes) + bytes;

			__sync_fetch_and_add(&mem->allocations, 1);
			if (vmm_live > mem->vmm_peak_bytes)
				mem->vmm_peak_bytes = vmm_live;
			grow_live(mem, bytes);
		}
		return bytes;
	case CP_VMM_RETAIN:
	case CP_VMM_RELEASE:
		key.id = handle;
		h = bpf_map_lookup_elem(&vmm_handles, &key);
		if (!h) {
			count(CP_CNT_VMM_UNKNOWN);
			return 0;
		}
		__sync_fetch_and_add(&h->refs, op == CP_VMM_RETAIN ? 1 : -1);
		return op == CP_VMM_RELEASE ? maybe_free_handle(tgid, &key, h) : 0;
	case CP_VMM_MAP:
		key.id = handle;
		h = bpf_map_lookup_elem(&vmm_handles, &key);
		if (!h) {
			count(CP_CNT_VMM_UNKNOWN);
			return 0;
		}
		key.id = ptr;
		if (bpf_map_update_elem(&vmm_mappings, &key, &mapping, BPF_ANY)) {
			count(CP_CNT_VMM_FULL);
			return 0;
		}
		__sync_fetch_and_add(&h->maps, 1);
		return 0;
	case CP_VMM_UNMAP:
		/* The range may cover several mappings, one after another. */
		for (i = 0; i < UNMAP_MAPPINGS_MAX && bytes; i++) {
			struct cp_vmm_key handle_key = { .pid = tgid };
			__u64 mapped;

			key.id = ptr;
			m = bpf_map_lookup_elem(&vmm_mappings, &key);
			if (!m) {
				count(CP_CNT_VMM_UNKNOWN);
				break;
			}
			handle_key.id = m->handle;
			mapped = m->bytes;
			bpf_map_delete_elem(&vmm_mappings, &key);
			h = bpf_map_lookup_elem(&vmm_handles, &handle_key);
			if (h) {
				__sync_fetch_and_add(&h->maps, -1);
				freed += maybe_free_handle(tgid, &handle_key, h);
			}
			if (!mapped || mapped >= bytes)
				break;
			ptr += mapped;
			bytes -= mapped;
		}
		return freed;
	case CP_VMM_RESERVE:
		key.id = ptr;
		if (bpf_map_update_elem(&vmm_ranges, &key, &bytes, BPF_ANY)) {
			count(CP_CNT_VMM_FULL);
			return 0;
		}
		mem = aggregate ? mem_row(tgid) : NULL;
		if (mem)
			__sync_fetch_and_add(&mem->reserved_bytes, bytes);
		return 0;
	case CP_VMM_ADDRESS_FREE:
		key.id = ptr;
		range = bpf_map_lookup_elem(&vmm_ranges, &key);
		if (!range) {
			count(CP_CNT_VMM_UNKNOWN);
			return 0;
		}
		mem = aggregate ? mem_row(tgid) : NULL;
		if (mem)
			__sync_fetch_and_sub(&mem->reserved_bytes, *range);
		bpf_map_delete_elem(&vmm_ranges, &key);
		return 0;
	}
	return 0;
}

/* The location id in a CUmemAllocationProp: {type, handle types, {location type, id}}. */
#define ALLOC_PROP_LOCATION_ID 12

static __always_inline void vmm_returned(struct call *c, struct pending_call *call, int result)
{
	__u32 op = CP_COOKIE_KIND(call->cookie);
	struct cp_vmm_event *event;
	__u64 handle = call->c, ptr = call->b, physical = 0;
	__s32 device = -1;

	/* Calls that hand something back through a pointer: the handle or the range. */
	if (result == 0 && (op == CP_VMM_CREATE || op == CP_VMM_RETAIN) &&
	    bpf_probe_read_user(&handle, sizeof(handle), (void *)call->a))
		handle = 0;
	if (result == 0 && op == CP_VMM_RESERVE &&
	    bpf_probe_read_user(&ptr, sizeof(ptr), (void *)call->a))
		ptr = 0;
	if (op == CP_VMM_CREATE &&
	    bpf_probe_read_user(&device, sizeof(device), (void *)(call->c + ALLOC_PROP_LOCATION_ID)))
		device = -1;
	if (result == 0)
		physical = track_vmm(c->pid_tgid >> 32, op, handle, ptr, call->bytes);
	event = call_record(c, CP_EV_VMM, sizeof(*event));
	if (!event)
		return;
	event->op = op;
	event->result = result;
	event->handle = op == CP_VMM_CREATE || op == CP_VMM_RETAIN || op == CP_VMM_RELEASE ||
			op == CP_VMM_MAP ? handle : 0;
	event->ptr = op == CP_VMM_CREATE || op == CP_VMM_RELEASE ? 0 : ptr;
	event->bytes = call->bytes;
	event->physical_bytes = physical;
	event->device = device;
	event->pad = 0;
	submit(event, c->now, false);
}

static __always_inline void query_returned(struct call *c, struct pending_call *call, int result)
{
	struct cp_sync_event *event = call_record(c, CP_EV_SYNC, sizeof(*event));

	if (!event)
		return;
	event->kind = CP_COOKIE_KIND(call->cookie);
	event->handle = call->a;
	event->result = result;
	submit(event, c->now, false);
}

static __always_inline void module_returned(struct call *c, struct pending_call *call, int result)
{
	__u32 op = CP_COOKIE_KIND(call->cookie);
	struct cp_module_event *event;
	long len = 0;

	event = call_record(c, CP_EV_MODULE, sizeof(*event));
	if (!event)
		return;
	event->op = op;
	event->result = result;
	event->handle = call->c;
	event->pad = 0;
	event->path[0] = '\0';
	if ((op == CP_MODULE_LOAD || op == CP_LIBRARY_LOAD) &&
	    (result != 0 || bpf_probe_read_user(&event->handle, sizeof(event->handle), (void *)call->a)))
		event->handle = 0;
	if (CP_COOKIE_VARIANT(call->cookie) == CP_MODULE_FROM_FILE) {
		len = bpf_probe_read_user_str(event->path, sizeof(event->path), (void *)call->b);
		if (len < 1) {
			event->path[0] = '\0';
			len = 1;
		}
	}
	event->path_len = len > 0 ? len - 1 : 0;
	submit(event, c->now, false);
}

SEC("uretprobe")
int BPF_KRETPROBE(call_return, int result)
{
	struct pending_call call;
	struct call c = {};

	c.pid_tgid = bpf_get_current_pid_tgid();
	if (!traced(c.pid_tgid >> 32))
		return 0;
	returned(ctx, c.pid_tgid, result);
	if (!take_call(ctx, c.pid_tgid, &call))
		return 0;
	c.regs = ctx;
	c.cookie = call.cookie;
	c.api = CP_COOKIE_API(call.cookie);
	c.slots = cpu_counters();
	c.now = bpf_ktime_get_ns();
	switch (CP_COOKIE_FAMILY(call.cookie)) {
	case CP_FAMILY_alloc:
		alloc_returned(&c, &call, result);
		break;
	case CP_FAMILY_vmm:
		vmm_returned(&c, &call, result);
		break;
	case CP_FAMILY_sync:
		query_returned(&c, &call, result);
		break;
	case CP_FAMILY_module:
		module_returned(&c, &call, result);
		break;
	}
	return 0;
}

/* ---- frees, copies, memsets, syncs, events ---------------------------------- */

/* cuMemFree_v2(dptr), cuMemFreeAsync(dptr, stream), cuMemFreeHost(void *p) */
SEC("uprobe")
int BPF_KPROBE(free_entry)
{
	struct cp_free_event *event;
	struct call c;
	__u64 ptr;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	ptr = cookie_arg(&c, CP_SHIFT_A);
	if (aggregate)
		track_free(c.pid_tgid >> 32, ptr, CP_COOKIE_KIND(c.cookie));
	event = call_record(&c, CP_EV_FREE, sizeof(*event));
	if (!event)
		return 0;
	event->ptr = ptr;
	event->pad = 0;
	event->kind = CP_COOKIE_KIND(c.cookie);
	event->stream = cookie_arg(&c, CP_SHIFT_STREAM);
	submit(event, c.now, false);
	return 0;
}

/* 1D copies between pointers and arrays: the cookie says where dst, src, bytes and stream are. */
SEC("uprobe")
int BPF_KPROBE(copy_entry)
{
	struct cp_copy_event *event;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	event = call_record(&c, CP_EV_COPY, sizeof(*event));
	if (!event)
		return 0;
	event->dst = cookie_arg(&c, CP_SHIFT_A);
	event->src = cookie_arg(&c, CP_SHIFT_B);
	event->bytes = cookie_arg(&c, CP_SHIFT_BYTES);
	event->stream = cookie_arg(&c, CP_SHIFT_STREAM);
	event->direction = CP_COOKIE_KIND(c.cookie);
	event->async = CP_COOKIE_ASYNC(c.cookie);
	event->count = 1;
	event->flags = 0;
	submit(event, c.now, false);
	return 0;
}

/* CUmemorytype: 1 host, 2 device, 3 array, 4 unified. */
static __always_inline __u32 copy_direction(__u32 src_type, __u32 dst_type)
{
	if (src_type == 4 || dst_type == 4)
		return CP_COPY_DEFAULT;
	switch (src_type * 8 + dst_type) {
	case 1 * 8 + 2: return CP_COPY_HTOD;
	case 2 * 8 + 1: return CP_COPY_DTOH;
	case 2 * 8 + 2: return CP_COPY_DTOD;
	case 1 * 8 + 1: return CP_COPY_HTOH;
	case 1 * 8 + 3: return CP_COPY_HTOA;
	case 3 * 8 + 1: return CP_COPY_ATOH;
	case 2 * 8 + 3: return CP_COPY_DTOA;
	case 3 * 8 + 2: return CP_COPY_ATOD;
	case 3 * 8 + 3: return CP_COPY_ATOA;
	}
	return CP_COPY_DEFAULT;
}

/* One side of a 2D/3D copy: memory type, then host, device and array pointers. */
struct copy_side {
	__u32 type;
	__u32 pad;
	__u64 host, device, array;
};

static __always_inline __u64 side_address(const struct copy_side *side)
{
	return side->type == 1 ? side->host : side->type == 3 ? side->array : side->device;
}

/* Offsets in CUDA_MEMCPY2D (128 bytes) and CUDA_MEMCPY3D / CUDA_MEMCPY3D_PEER (200 bytes). */
#define COPY2D_SRC 16
#define COPY2D_DST 72
#define COPY2D_EXTENT 112
#define COPY3D_SRC 32
#define COPY3D_DST 120
#define COPY3D_EXTENT 176

/*
 * Copies described by a struct (2D, 3D, 3D peer) or by arrays (batches):
 * the description is read from the caller's memory at entry.
 */
SEC("uprobe")
int BPF_KPROBE(copy_struct)
{
	struct copy_side src = {}, dst = {};
	__u64 extent[3] = { 0, 1, 1 }, desc, sizes[8];
	struct cp_copy_event *event;
	__u32 variant, flags = 0, count = 1;
	__u64 bytes = 0, n;
	struct call c;
	int i, j;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	if (!stream_events)
		return 0;
	variant = CP_COOKIE_VARIANT(c.cookie);
	desc = cookie_arg(&c, CP_SHIFT_A);
	if (variant == CP_COPY_VARIANT_2D || variant == CP_COPY_VARIANT_3D) {
		bool flat = variant == CP_COPY_VARIANT_2D;

		if (bpf_probe_read_user(&src, sizeof(src), (void *)(desc + (flat ? COPY2D_SRC : COPY3D_SRC))) ||
		    bpf_probe_read_user(&dst, sizeof(dst), (void *)(desc + (flat ? COPY2D_DST : COPY3D_DST))) ||
		    bpf_probe_read_user(extent, flat ? 16 : 24, (void *)(desc + (flat ? COPY2D_EXTENT : COPY3D_EXTENT))))
			flags |= CP_COPY_UNREADABLE;
		bytes = extent[0] * extent[1] * extent[2];
	} else if (variant == CP_COPY_VARIANT_BATCH) {
		/* sizes (C) summed over count (BYTES) entries, up to CP_COPY_BATCH_READ_MAX */
		n = cookie_arg(&c, CP_SHIFT_BYTES);
		count = n;
		bpf_probe_read_user(&dst.device, sizeof(dst.device), (void *)cookie_arg(&c, CP_SHIFT_A));
		bpf_probe_read_user(&src.device, sizeof(src.device), (void *)cookie_arg(&c, CP_SHIFT_B));
		desc = cookie_arg(&c, CP_SHIFT_C);
		for (i = 0; i < CP_COPY_BATCH_READ_MAX / 8; i++) {
			if ((__u64)i * 8 >= n)
				break;
			if (bpf_probe_read_user(sizes, sizeof(sizes), (void *)(desc + i * sizeof(sizes)))) {
				/* a short array at the end of a page: one at a time */
				for (j = 0; j < 8; j++)
					if (bpf_probe_read_user(&sizes[j], 8, (void *)(desc + (i * 8 + j) * 8)))
						sizes[j] = 0;
			}
			for (j = 0; j < 8; j++)
				if ((__u64)(i * 8 + j) < n)
					bytes += sizes[j];
		}
		if (n > CP_COPY_BATCH_READ_MAX)
			flags |= CP_COPY_TRUNCATED;
	} else {
		count = cookie_arg(&c, CP_SHIFT_BYTES);
		flags |= CP_COPY_BYTES_UNKNOWN;
	}
	event = call_record(&c, CP_EV_COPY, sizeof(*event));
	if (!event)
		return 0;
	event->direction = variant == CP_COPY_VARIANT_2D || variant == CP_COPY_VARIANT_3D ?
			   copy_direction(src.type, dst.type) : CP_COPY_BATCH;
	event->dst = variant == CP_COPY_VARIANT_BATCH ? dst.device : side_address(&dst);
	event->src = variant == CP_COPY_VARIANT_BATCH ? src.device : side_address(&src);
	if (variant == CP_COPY_VARIANT_BATCH_3D)
		event->dst = event->src = 0;
	event->bytes = bytes;
	event->stream = cookie_arg(&c, CP_SHIFT_STREAM);
	event->async = CP_COOKIE_ASYNC(c.cookie);
	event->count = count;
	event->flags = flags;
	submit(event, c.now, false);
	return 0;
}

/* cuMemsetD<N>[Async](dst, value, count[, stream]), cuMemsetD2D<N>[Async](dst, pitch, value, width, height[, stream]) */
SEC("uprobe")
int BPF_KPROBE(memset_entry)
{
	struct cp_memset_event *event;
	__u32 size;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	event = call_record(&c, CP_EV_MEMSET, sizeof(*event));
	if (!event)
		return 0;
	size = CP_COOKIE_KIND(c.cookie);
	event->dst = cookie_arg(&c, CP_SHIFT_A);
	event->value = cookie_arg(&c, CP_SHIFT_B);
	event->element_size = size;
	event->bytes = cookie_arg(&c, CP_SHIFT_BYTES) * size;
	event->pitch = 0;
	if (CP_COOKIE_VARIANT(c.cookie) == CP_MEMSET_2D) {
		event->pitch = cookie_arg(&c, CP_SHIFT_C);
		event->bytes *= c.args[4]; /* height */
	}
	event->stream = cookie_arg(&c, CP_SHIFT_STREAM);
	event->async = CP_COOKIE_ASYNC(c.cookie);
	event->pad = 0;
	submit(event, c.now, false);
	return 0;
}

/* cuCtxSynchronize(void), cuCtxSynchronize_v2(ctx), cuStreamSynchronize(stream), cuEventSynchronize(event) */
SEC("uprobe")
int BPF_KPROBE(sync_entry)
{
	struct cp_sync_event *event;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	event = call_record(&c, CP_EV_SYNC, sizeof(*event));
	if (!event)
		return 0;
	event->kind = CP_COOKIE_KIND(c.cookie);
	event->handle = cookie_arg(&c, CP_SHIFT_A);
	event->result = 0;
	submit(event, c.now, false);
	return 0;
}

/* cuEventRecord[WithFlags](event, stream[, flags]), cuStreamWaitEvent(stream, event, flags) */
SEC("uprobe")
int BPF_KPROBE(event_entry)
{
	struct cp_event_event *event;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	load_args(&c);
	event = call_record(&c, CP_EV_EVENT, sizeof(*event));
	if (!event)
		return 0;
	event->op = CP_COOKIE_KIND(c.cookie);
	event->event = cookie_arg(&c, CP_SHIFT_A);
	event->stream = cookie_arg(&c, CP_SHIFT_STREAM);
	event->flags = cookie_arg(&c, CP_SHIFT_C);
	submit(event, c.now, false);
	return 0;
}

/* ---- names and process lifecycle ----------------------------------------------- */

/*
 * cuModuleGetFunction(CUfunction *out, CUmodule, const char *name),
 * cuLibraryGetKernel(CUkernel *out, CUlibrary, const char *name),
 * cuKernelGetFunction(CUfunction *out, CUkernel kernel).
 * Names are streamed in every mode: they are rare, and stats need them too.
 */
SEC("uprobe")
int BPF_KPROBE(name_entry, __u64 out_ptr, __u64 arg2, __u64 name_ptr)
{
	struct pending_call call = {};
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	call.cookie = c.cookie;
	call.a = out_ptr;
	call.b = arg2;
	call.c = name_ptr;
	call.stack_id = -1;
	keep_call(&c, &call);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(name_return, int result)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct cp_name_event *event;
	struct pending_call call;
	long len = 0;
	__u64 now;

	if (!traced(pid_tgid >> 32))
		return 0;
	returned(ctx, pid_tgid, result);
	if (!take_call(ctx, pid_tgid, &call))
		return 0;
	now = bpf_ktime_get_ns();
	event = reserve(cpu_counters(), sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_NAME, CP_COOKIE_API(call.cookie), pid_tgid, now);
	event->result = result;
	event->handle = 0;
	event->alias_of = 0;
	event->name[0] = '\0';
	if (result == 0)
		bpf_probe_read_user(&event->handle, sizeof(event->handle), (void *)call.a);
	if (CP_COOKIE_KIND(call.cookie) == CP_NAME_ALIAS) {
		event->alias_of = call.b;
	} else {
		len = bpf_probe_read_user_str(event->name, sizeof(event->name), (void *)call.c);
		if (len < 1) {
			event->name[0] = '\0';
			len = 1;
		}
	}
	event->name_len = len > 0 ? len - 1 : 0;
	submit(event, now, false);
	return 0;
}

/* cuInit(flags): the process has started using CUDA. */
SEC("uprobe")
int BPF_KPROBE(init_entry)
{
	struct cp_proc_event *event;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	if (!filter_by_pid) {
		__u32 tgid = c.pid_tgid >> 32;
		__u8 one = 1;

		if (bpf_map_update_elem(&target_pids, &tgid, &one, BPF_ANY))
			count_in(c.slots, CP_CNT_TARGETS_OVERFLOW);
	}
	event = reserve(c.slots, sizeof(*event));
	if (!event)
		return 0;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_PROC, c.api, c.pid_tgid, c.now);
	event->kind = CP_PROC_CUDA_INIT;
	submit(event, c.now, true);
	return 0;
}

struct stub_location {
	__u64 file_offset;
	__u64 inode;
	__u32 dev;
	__u32 found;
};

static long locate_stub(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct stub_location *where = data;
	struct file *file = BPF_CORE_READ(vma, vm_file);
	__u64 addr = where->file_offset; /* carries the address in */

	if (!file)
		return 0;
	where->file_offset = addr - BPF_CORE_READ(vma, vm_start) +
			     (BPF_CORE_READ(vma, vm_pgoff) << 12);
	where->inode = BPF_CORE_READ(file, f_inode, i_ino);
	where->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	where->found = 1;
	return 0;
}

/*
 * cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
 *                  size_t sharedMem, cudaStream_t stream)
 * A dim3 is 12 bytes of integers, so each one travels in two registers:
 * grid in rsi (x,y) and rdx (z), block in rcx (x,y) and r8 (z).
 */
SEC("uprobe")
int BPF_KPROBE(rt_launch, __u64 stub, __u64 grid_xy, __u64 grid_z, __u64 block_xy, __u64 block_z)
{
	struct stub_location where = { .file_offset = stub };
	struct stub_location caller_where = {};
	struct cp_rt_launch_event *event;
	__u64 caller = 0;
	struct call c;
	__u64 on_stack[2] = {};

	if (!enter(ctx, &c))
		return 0;
	event = reserve(c.slots, sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_RT_LAUNCH, c.api, c.pid_tgid, c.now);
	event->stub = stub;
	event->grid[0] = (__u32)grid_xy;
	event->grid[1] = grid_xy >> 32;
	event->grid[2] = (__u32)grid_z;
	event->block[0] = (__u32)block_xy;
	event->block[1] = block_xy >> 32;
	event->block[2] = (__u32)block_z;
	event->flags = 0;
	if (bpf_probe_read_user(on_stack, sizeof(on_stack), (void *)(PT_REGS_SP(ctx) + 8)))
		event->flags |= CP_RT_STACK_FAULT;
	event->shared_mem_bytes = on_stack[0];
	event->stream = on_stack[1];
	event->pad = 0;
	bpf_find_vma(bpf_get_current_task_btf(), stub, locate_stub, &where, 0);
	if (where.found) {
		event->file_offset = where.file_offset;
		event->inode = where.inode;
		event->dev = where.dev;
	} else {
		event->file_offset = 0;
		event->inode = 0;
		event->dev = 0;
		event->flags |= CP_RT_NO_VMA;
	}
	/* The return address: at the first instruction it is at the top of the stack. */
	if (bpf_probe_read_user(&caller, sizeof(caller), (void *)PT_REGS_SP(ctx)))
		caller = 0;
	caller_where.file_offset = caller;
	if (caller)
		bpf_find_vma(bpf_get_current_task_btf(), caller, locate_stub, &caller_where, 0);
	event->caller = caller;
	event->pad2 = 0;
	if (caller_where.found) {
		event->caller_file_offset = caller_where.file_offset;
		event->caller_inode = caller_where.inode;
		event->caller_dev = caller_where.dev;
	} else {
		event->caller_file_offset = 0;
		event->caller_inode = 0;
		event->caller_dev = 0;
		event->flags |= CP_RT_CALLER_NO_VMA;
	}
	submit(event, c.now, false);
	return 0;
}

/* A traced process that forks a new process (not a thread) makes it traced too. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	__u32 child_pid = BPF_CORE_READ(child, pid);
	struct cp_proc_event *event;
	__u8 one = 1;
	__u64 now;

	if (!filter_by_pid || child_pid != child_tgid)
		return 0;
	if (!bpf_map_lookup_elem(&target_pids, &parent_tgid))
		return 0;
	if (bpf_map_update_elem(&target_pids, &child_tgid, &one, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&target_pids, &child_tgid)) {
		count(CP_CNT_TARGETS_OVERFLOW);
		return 0;
	}
	count(CP_API_sched_process_fork);
	now = bpf_ktime_get_ns();
	event = reserve(cpu_counters(), sizeof(*event));
	if (!event)
		return 0;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_PROC, CP_API_sched_process_fork,
		    ((__u64)parent_tgid << 32) | BPF_CORE_READ(parent, pid), now);
	event->kind = CP_PROC_FORK;
	event->child_pid = child_tgid;
	submit(event, now, true);
	return 0;
}

/*
 * The last thread of a traced process exits. signal->live was decremented
 * before this tracepoint, so zero means the whole group is gone.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit, struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	__u32 pid = BPF_CORE_READ(task, pid);
	struct cp_proc_event *event;
	__u64 now;

	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	if (!bpf_map_lookup_elem(&target_pids, &tgid))
		return 0;
	bpf_map_delete_elem(&target_pids, &tgid);
	bpf_map_delete_elem(&held_pids, &tgid);
	count(CP_API_sched_process_exit);
	now = bpf_ktime_get_ns();
	event = reserve(cpu_counters(), sizeof(*event));
	if (!event)
		return 0;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_PROC, CP_API_sched_process_exit,
		    ((__u64)tgid << 32) | pid, now);
	event->kind = CP_PROC_EXIT;
	event->exit_code = BPF_CORE_READ(task, exit_code);
	submit(event, now, true);
	return 0;
}

/* ---- attach events: a process mapped a CUDA library file ------------------------ */

static __always_inline bool has_prefix(const char *name, const char *prefix, int len)
{
	int i;

	for (i = 0; i < len; i++)
		if (name[i] != prefix[i])
			return false;
	return true;
}

/*
 * file was mapped executable (or exec'd) by the current process. When it is
 * a CUDA library no probe covers yet, tell the agent, and in targeted mode
 * stop the process (SIGSTOP is taken on the way back to user space, before
 * any of the file's code can run) until the agent has attached and
 * continues it.
 */
static __always_inline void file_mapped(struct file *file, int fd, __u32 flags)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct cp_file_key key = {};
	struct cp_attach_event *event;
	char name[CP_FILE_NAME_MAX];
	const unsigned char *dname;
	__u64 now;

	if (!file || (filter_by_pid && !bpf_map_lookup_elem(&target_pids, &tgid)))
		return;
	dname = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	if (bpf_probe_read_kernel_str(name, sizeof(name), dname) < 1)
		return;
	if (!(flags & CP_ATTACH_EXEC)) {
		if (has_prefix(name, "libcuda.so", 10))
			flags &= ~CP_ATTACH_RUNTIME;
		else if (watch_runtime && has_prefix(name, "libcudart.so", 12))
			flags |= CP_ATTACH_RUNTIME;
		else
			return;
	}
	key.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	key.inode = BPF_CORE_READ(file, f_inode, i_ino);
	if (bpf_map_lookup_elem(&covered_files, &key))
		return;
	if (hold_new_mappers && filter_by_pid) {
		if (!bpf_send_signal(SIGSTOP_) && !bpf_map_update_elem(&held_pids, &tgid, &key, BPF_ANY))
			flags |= CP_ATTACH_HELD;
		else
			count(CP_CNT_HOLD_FAILED);
	}
	count(CP_API_driver_mapped);
	now = bpf_ktime_get_ns();
	event = reserve(cpu_counters(), sizeof(*event));
	if (!event)
		return;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_ATTACH, CP_API_driver_mapped, pid_tgid, now);
	event->dev = key.dev;
	event->inode = key.inode;
	event->fd = fd;
	event->flags = flags;
	__builtin_memcpy(event->name, name, sizeof(name));
	submit(event, now, true);
}

static __always_inline struct file *fd_file(int fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **table = BPF_CORE_READ(fdt, fd);
	struct file *file = NULL;

	if (fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	bpf_probe_read_kernel(&file, sizeof(file), &table[fd]);
	return file;
}

/* mmap(addr, len, prot, flags, fd, off) with PROT_EXEC: a library's code going in. */
SEC("tracepoint/syscalls/sys_enter_mmap")
int driver_mmap(struct trace_event_raw_sys_enter *ctx)
{
	int fd = (int)ctx->args[4];

	if (!watch_mappings || !(ctx->args[2] & PROT_EXEC_) || fd < 0)
		return 0;
	file_mapped(fd_file(fd), fd, 0);
	return 0;
}

/* The same through the raw syscall tracepoint, where tracefs cannot be mounted. */
SEC("tp_btf/sys_enter")
int BPF_PROG(driver_mmap_raw, struct pt_regs *regs, long id)
{
	int fd;

	if (!watch_mappings || id != NR_MMAP_X86_64 || !(BPF_CORE_READ(regs, dx) & PROT_EXEC_))
		return 0;
	fd = (int)BPF_CORE_READ(regs, r8);
	if (fd < 0)
		return 0;
	file_mapped(fd_file(fd), fd, 0);
	return 0;
}

/* exec: an executable may carry static cudart (--runtime). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(process_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	if (!watch_runtime)
		return 0;
	file_mapped(BPF_CORE_READ(bprm, file), -1, CP_ATTACH_RUNTIME | CP_ATTACH_EXEC);
	return 0;
}
