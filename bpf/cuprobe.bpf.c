// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe's BPF programs: uprobes on the CUDA driver API (libcuda.so.1),
 * cudaLaunchKernel (libcudart) and NCCL (libnccl.so.2), the fork/exit tracepoints that keep the set
 * of traced processes current, and the mmap/exec tracepoints that tell the
 * agent a process mapped a CUDA library file no probe covers yet.
 *
 * Which program goes on which symbol, and the cookie each gets, come from
 * the catalogue (cuprobe_catalogue.h). The calls are decoded by the same
 * code users' programs get (cuprobe.bpf.h): one program per family serves
 * every variant, the cookie saying which API, what kind and where the
 * arguments are. The hot path (launches, copies, syncs, frees) is one entry
 * probe per call; only calls that return something through a pointer, or
 * whose result matters, add a return probe.
 */
#include "vmlinux.h"
#include "cuprobe.bpf.h"

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
/*
 * cuprobe run with device rings: with stream_events off, still the records
 * that prove kernels done (syncs, completed queries, blocking copies), each
 * waking the agent, which reads the device rings then.
 */
const volatile bool stream_proving = false;
const volatile bool aggregate = false;
const volatile bool record_stacks = false;
const volatile bool measure_latency = false;
/* For the bench: wake the consumer on every record, the policy the default avoids. */
const volatile bool wake_every_record = false;
/* Attach events: report new driver files (and runtimes, with watch_runtime). */
const volatile bool watch_mappings = false;
const volatile bool watch_runtime = false;
const volatile bool watch_nccl = false;
/* Stop a traced process that maps an uncovered file until the agent attached. */
const volatile bool hold_new_mappers = false;
const volatile bool hold_for_stacks = false;
const volatile bool hold_at_init = false;
/* A CP_EV_RETURN record at every API's return (--perfetto's slices). */
const volatile bool return_records = false;
/* Python stacks at launches, syncs, copies and allocations (cuprobe_python.bpf.h). */
const volatile bool python_stacks = false;
/* ... and a process stopped at cuInit and at each new stack until the agent has read it. */
const volatile bool hold_for_python = false;
/* Benches only: parts of the launch probe left out (enum cp_bench_omit). */
const volatile __u32 bench_omit = 0;
/* Where nvidia:nvidia_dev_xid keeps its fields (from its tracefs format). */
const volatile __u32 xid_dev_offset = 8;
const volatile __u32 xid_code_offset = 12;
const volatile __u32 xid_msg_offset = 16;
/* cuprobe run with device programs: the magic of the session's launch slot headers; 0: none. */
const volatile __u64 launch_slot_magic = 0;
/* Late attach (-p, system-wide): a handle's first launch reads its driver record. */
const volatile bool name_late_handles = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024); /* resized by the loader */
} events SEC(".maps");

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

/*
 * Device programs' launch slots (userspace/device/inject_protocol.h): the
 * launch program writes each instrumented launch's seq into the slot the
 * launch path named; COMMAND maps the array and its kernels read the slot.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, __u32);
	__type(value, __u64);
} launch_slots SEC(".maps");

/*
 * Per process, with device programs: its kernel and graph launches so far
 * (the timeline's seq); gone when the process exits.
 */
CUPROBE_LRU_HASH(launch_seqs, __u32, __u64, 16384);

/* When the consumer was last woken; shared by all CPUs, races are harmless. */
__u64 last_wakeup_ns = 0;

CUPROBE_HASH(kernel_stats, struct cp_kernel_key, struct cp_kernel_stat, 16384);
CUPROBE_HASH(api_stats, struct cp_api_key, struct cp_api_stat, 8192);
CUPROBE_HASH(mem_stats, __u32, struct cp_mem_stat, 4096);
/* --python with the aggregates (top): the Python stack id of each process's most recent launch. */
CUPROBE_HASH(py_launch_stacks, __u32, __u64, 4096);
CUPROBE_HASH(live_allocs, struct cp_alloc_key, struct cp_alloc_info, 65536);

/* Per (process, device): allocations and live bytes; copies by direction. */
CUPROBE_HASH(device_mem_stats, struct cp_device_key, struct cp_device_mem_stat, 8192);
CUPROBE_HASH(copy_stats, struct cp_copy_key, struct cp_copy_stat, 16384);

/* VMM: physical handles, mappings and reserved ranges of traced processes. */
CUPROBE_HASH(vmm_handles, struct cp_vmm_key, struct cp_vmm_handle, 65536);
CUPROBE_HASH(vmm_mappings, struct cp_vmm_key, struct cp_vmm_mapping, 65536);
CUPROBE_HASH(vmm_ranges, struct cp_vmm_key, __u64, 16384);

/*
 * The built-in programs' entry state, deleted at the return that reads it
 * (users' return programs read cuprobe_calls, which call_stash fills).
 */
CUPROBE_LRU_HASH(pending, struct cuprobe_call_key, struct cuprobe_call, 16384);

/* When each thread entered the call being timed (measure_latency). */
struct call_start {
	__u64 time_ns;
	__u32 api;
	__u32 pad;
};

CUPROBE_LRU_HASH(call_starts, struct cuprobe_call_key, struct call_start, 16384);

/*
 * CUDA library files already probed (or known to need none), filled by the
 * agent: a mapping of one of them is not an attach event.
 */
CUPROBE_LRU_HASH(covered_files, struct cp_file_key, __u8, 8192);

/* Processes stopped by hold_new_mappers, until the agent (or its guardian) continues them. */
CUPROBE_HASH(held_pids, __u32, struct cp_file_key, 1024);

/*
 * Processes whose memory map the agent read after their last executable
 * mapping (hold_for_stacks): their stacks can be named even if they exit
 * before the agent reads the records.
 */
CUPROBE_LRU_HASH(maps_read, __u32, __u8, 8192);

/*
 * NCCL: each thread's NCCL calls in flight (an export can call another:
 * ncclBcast calls ncclBroadcast), and the group it is in. A launch made
 * while a collective (or ncclGroupEnd) is in flight on its thread is that
 * call's work: it carries the call's seq; so does a copy (one-rank NCCL
 * copies an out-of-place collective's buffer instead of launching).
 */
#define NCCL_DEPTH 4

struct nccl_open_call {
	struct cuda_nccl call;
	__u64 sp;        /* the stack pointer at entry: matches the return to it */
	__u64 entry_ns;
	__u64 py_stack;  /* the calling Python stack (--python) */
	__u32 seq;
	__u32 group;
	__u32 launches;  /* made inside it */
	__u32 nested;    /* inside another NCCL call: part of that one, not recorded */
	__u32 copies;    /* made inside it */
	__u32 pad;
};

struct nccl_thread {
	__u32 depth;       /* calls in flight */
	__u32 group_depth; /* ncclGroupStart calls not yet ended */
	__u32 group;       /* the seq of the outermost group open */
	__u32 pad;
	struct nccl_open_call calls[NCCL_DEPTH];
};

CUPROBE_TASK_STORAGE(nccl_threads, struct nccl_thread);

CUPROBE_HASH(nccl_stats, struct cp_nccl_key, struct cp_nccl_stat, 8192);

/* The last seq handed out (all processes: a record is told apart by its pid and seq). */
__u64 nccl_last_seq = 0;
/* Collectives and group ends in flight anywhere: while 0, a launch looks for none. */
__u64 nccl_open_calls = 0;

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

/* True when this process is one we were asked to trace (rodata: no look-up system-wide). */
static __always_inline bool traced(__u32 tgid)
{
	if (!filter_by_pid || (bench_omit & CP_OMIT_FILTER))
		return true;
	if (bpf_map_lookup_elem(&cuprobe_targets, &tgid))
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
	struct cuprobe_args args;  /* the arguments, once load_args has run */
};

static __always_inline struct cp_api_stat *api_row(__u32 tgid, __u32 api)
{
	struct cp_api_key key = { .pid = tgid, .api = api };
	static const struct cp_api_stat empty;

	return lookup_or_init(&api_stats, &key, &empty, CP_CNT_API_STATS_FULL);
}

static __always_inline struct cp_device_mem_stat *device_mem_row(__u32 tgid, __s32 device)
{
	struct cp_device_key key = { .pid = tgid, .device = device };
	static const struct cp_device_mem_stat empty;

	return lookup_or_init(&device_mem_stats, &key, &empty, CP_CNT_DEVICE_STATS_FULL);
}

static __always_inline struct cp_mem_stat *mem_row(__u32 tgid)
{
	static const struct cp_mem_stat empty;

	return lookup_or_init(&mem_stats, &tgid, &empty, CP_CNT_MEM_STATS_FULL);
}

/*
 * The entry of every probed call: the pid filter, the API hit counted, the
 * clock read once, the (pid, API) call counted and the start noted when
 * timing, the arguments copied out. False when the process is not traced.
 */
static __always_inline bool enter(struct pt_regs *regs, struct call *c)
{
	c->pid_tgid = bpf_get_current_pid_tgid();
	if (!traced(c->pid_tgid >> 32))
		return false;
	c->regs = regs;
	c->cookie = bpf_get_attach_cookie(regs);
	c->api = CP_COOKIE_API(c->cookie);
	c->slots = bench_omit & CP_OMIT_COUNTERS ? NULL : cpu_counters();
	if (c->slots && c->api < CP_API_MAX)
		c->slots->slot[c->api] += 1;
	c->now = bench_omit & CP_OMIT_CLOCK ? 0 : bpf_ktime_get_ns();
	if (aggregate) {
		struct cp_api_stat *row = api_row(c->pid_tgid >> 32, c->api);

		if (row)
			__sync_fetch_and_add(&row->calls, 1);
	}
	if (measure_latency || return_records) {
		struct call_start start = { .time_ns = c->now, .api = c->api };
		struct cuprobe_call_key key = { .pid_tgid = c->pid_tgid, .sp = PT_REGS_SP(regs) };

		if (bpf_map_update_elem(&call_starts, &key, &start, BPF_ANY))
			count_in(c->slots, CP_CNT_CALL_START_FULL);
	}
	cuprobe_load_args(&c->args, regs, c->cookie);
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
 * the latency bound has passed since the last wakeup: a wakeup is paid inside
 * the traced call (waking on every record cost 7 us more a call than batching
 * on a VM: bench/results/stats-modes-vm.md). Lifecycle and attach
 * records force one.
 */
static __always_inline void submit(void *record, __u64 now, bool urgent)
{
	bool wake = urgent || wake_every_record;

	if (bench_omit & CP_OMIT_WAKEUP) {
		bpf_ringbuf_submit(record, BPF_RB_NO_WAKEUP);
		return;
	}
	if (!wake && now - last_wakeup_ns >= wakeup_latency_ns)
		wake = true;
	if (!wake && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_threshold_bytes)
		wake = true;
	if (wake)
		last_wakeup_ns = now;
	bpf_ringbuf_submit(record, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* A lifecycle record's process name: its main thread's, as /proc/PID/comm says. */
#define PROCESS_COMM(event, task) BPF_CORE_READ_STR_INTO(&(event)->comm, task, group_leader, comm)

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

/* The Python frame walker: after the helpers and maps it uses. */
#include "cuprobe_python.bpf.h"

/* ---- aggregation ------------------------------------------------------------ */

/* A timed call returned: latency into the (pid, api) histogram, errors counted. */
static __always_inline void returned(struct pt_regs *regs, __u64 pid_tgid, int result)
{
	struct cuprobe_call_key key = { .pid_tgid = pid_tgid, .sp = PT_REGS_SP(regs) - 8 };
	struct call_start *start, found;
	struct cp_api_stat *row;
	__u64 now, elapsed;

	if (!measure_latency && !return_records)
		return;
	start = bpf_map_lookup_elem(&call_starts, &key);
	if (!start)
		return;
	found = *start;
	bpf_map_delete_elem(&call_starts, &key);
	now = bpf_ktime_get_ns();
	elapsed = now - found.time_ns;
	if (return_records) {
		struct cp_return_event *event = reserve(cpu_counters(), sizeof(*event));

		if (event) {
			fill_header(&event->hdr, CP_EV_RETURN, found.api, pid_tgid, now);
			event->entry_ns = found.time_ns;
			event->result = result;
			event->pad = 0;
			submit(event, now, false);
		}
	}
	row = measure_latency && aggregate ? api_row(pid_tgid >> 32, found.api) : NULL;
	if (!row)
		return;
	__sync_fetch_and_add(&row->timed, 1);
	__sync_fetch_and_add(&row->total_ns, elapsed);
	if (result != 0)
		__sync_fetch_and_add(&row->errors, 1);
	__sync_fetch_and_add(&row->histogram[cp_log2_bucket(elapsed) & (CP_HIST_BUCKETS - 1)], 1);
}

static __always_inline void count_launch(__u32 tgid, __s32 device, __u64 handle, __u64 threads,
					bool graph)
{
	struct cp_kernel_key key = { .pid = tgid, .device = device, .handle = handle };
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

/* ---- entry probes: one per family ----------------------------------------- */

/*
 * The NCCL call a launch (or, copy, a copy) is the work of: the collective
 * in flight on this thread (its seq), or the group whose ncclGroupEnd is
 * (the group's seq); 0 when none. Counted in that call's launches (copies).
 */
static __always_inline __u32 nccl_link(bool copy)
{
	struct nccl_open_call *outer;
	struct nccl_thread *thread;

	if (!nccl_open_calls)
		return 0;
	thread = bpf_task_storage_get(&nccl_threads, bpf_get_current_task_btf(), 0, 0);
	if (!thread || !thread->depth)
		return 0;
	outer = &thread->calls[0];
	if (outer->call.op != CP_NCCL_GROUP_END && !CP_NCCL_MOVES_DATA(outer->call.op))
		return 0;
	if (copy)
		outer->copies++;
	else
		outer->launches++;
	return outer->call.op == CP_NCCL_GROUP_END ? outer->group : outer->seq;
}

/*
 * Device programs: the launch's seq, counted per process, into the launch
 * slot whose header (magic, index) sits just before the launch's
 * kernelParams (or extra) array; launches without one are only counted.
 * A map update, no write to the process's memory.
 */
static __always_inline void note_launch_seq(const struct call *c, const struct cuda_launch *l)
{
	struct { __u64 magic, index; } header;
	__u32 tgid = c->pid_tgid >> 32, index;
	__u64 arrays[2] = {}, *count, *slot, seq = 0, zero = 0;

	count = bpf_map_lookup_elem(&launch_seqs, &tgid);
	if (!count) {
		bpf_map_update_elem(&launch_seqs, &tgid, &zero, BPF_NOEXIST);
		count = bpf_map_lookup_elem(&launch_seqs, &tgid);
	}
	if (count)
		seq = __sync_fetch_and_add(count, 1) + 1;
	/* kernelParams and extra: stack arguments 10 and 11, or cuLaunchKernelEx's third and fourth. */
	if (l->kind == CP_LAUNCH_KIND_KERNEL)
		bpf_probe_read_user(arrays, sizeof(arrays), (void *)(PT_REGS_SP(c->regs) + 32));
	else if (l->kind == CP_LAUNCH_KIND_COOPERATIVE)
		bpf_probe_read_user(arrays, sizeof(arrays[0]), (void *)(PT_REGS_SP(c->regs) + 32));
	else if (l->kind == CP_LAUNCH_KIND_EX)
		arrays[0] = c->args.reg[2], arrays[1] = c->args.reg[3];
	if (!arrays[0])
		arrays[0] = arrays[1];
	if (!arrays[0] || bpf_probe_read_user(&header, sizeof(header), (void *)(arrays[0] - sizeof(header))) ||
	    header.magic != launch_slot_magic)
		return;
	index = header.index;
	slot = bpf_map_lookup_elem(&launch_slots, &index);
	if (slot)
		*slot = seq; /* 0 when the count could not be kept: unknown */
}

/* Handles whose driver record a launch has read (name_late_handles): each once, the oldest forgotten. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cuprobe_name_key);
	__type(value, __u8);
} driver_records_read SEC(".maps");

/*
 * A handle made before the attach was seen by no naming probe. Its first
 * launch reads its name from the driver's record (the name pointer at
 * offset 8, as driver 580 keeps it; userspace/names.c checks it against the
 * probes' names) into a name record whose api is the launch's, while the
 * process is inside the call: read later by the consumer, the process may
 * have exited and taken the record with it. Before the launch's own record.
 */
static __always_inline void name_late_handle(struct call *c, __u64 handle)
{
	struct cuprobe_name_key key = { .pid = c->pid_tgid >> 32, .handle = handle };
	struct cp_name_event *event;
	__u64 name_ptr = 0;
	__u8 read = 1;
	long len;

	if (!handle || bpf_map_lookup_elem(&driver_records_read, &key))
		return;
	bpf_map_update_elem(&driver_records_read, &key, &read, BPF_ANY);
	if (bpf_probe_read_user(&name_ptr, sizeof(name_ptr), (void *)(handle + 8)) || name_ptr < 4096)
		return;
	event = reserve(c->slots, sizeof(*event));
	if (!event)
		return;
	fill_header(&event->hdr, CP_EV_NAME, c->api, c->pid_tgid, c->now);
	event->handle = handle;
	event->alias_of = 0;
	event->result = 0;
	len = bpf_probe_read_user_str(event->name, sizeof(event->name), (void *)name_ptr);
	if (len < 1) {
		event->name[0] = '\0'; /* unreadable now: the consumer may still read it */
		len = 1;
	}
	event->name_len = len - 1;
	submit(event, c->now, false);
}

/* Every launch family entry point: kernels (cooperative, Ex), graphs, host functions, legacy. */
SEC("uprobe")
int BPF_KPROBE(launch)
{
	struct cp_launch_event *event;
	struct cuda_launch l;
	__u32 nccl_call;
	struct call c;
	__u64 py_stack;
	__s32 device;

	if (!enter(ctx, &c))
		return 0;
	nccl_call = nccl_link(false);
	cuprobe_decode_launch_stack(&c.args, &l, !(bench_omit & CP_OMIT_STACK_ARGS));
	device = bench_omit & CP_OMIT_DEVICE ? -1 : cuprobe_current_device();
	if (launch_slot_magic && l.kind != CP_LAUNCH_KIND_HOST_FUNC)
		note_launch_seq(&c, &l);
	if (aggregate && l.kind != CP_LAUNCH_KIND_HOST_FUNC)
		count_launch(c.pid_tgid >> 32, device, l.function,
			     (__u64)l.grid[0] * l.grid[1] * l.grid[2] * l.block[0] * l.block[1] *
			     l.block[2], l.kind == CP_LAUNCH_KIND_GRAPH);
	py_stack = python_stack(c.pid_tgid, c.api, c.now);
	if (aggregate && py_stack) {
		__u32 tgid = c.pid_tgid >> 32;

		bpf_map_update_elem(&py_launch_stacks, &tgid, &py_stack, BPF_ANY);
	}
	if (bench_omit & CP_OMIT_RECORD)
		return 0;
	/* Names are streamed in every mode (stats name its kernels too). */
	if (name_late_handles && l.kind != CP_LAUNCH_KIND_GRAPH && l.kind != CP_LAUNCH_KIND_HOST_FUNC)
		name_late_handle(&c, l.function);
	event = call_record(&c, CP_EV_LAUNCH, sizeof(*event));
	if (!event)
		return 0;
	event->function = l.function;
	event->stream = l.stream;
	__builtin_memcpy(event->grid, l.grid, sizeof(event->grid));
	__builtin_memcpy(event->block, l.block, sizeof(event->block));
	event->shared_mem_bytes = l.shared_mem_bytes;
	event->flags = l.flags;
	event->device = device;
	event->nccl_call = nccl_call;
	event->py_stack = py_stack;
	submit(event, c.now, false);
	return 0;
}

/* A successful allocation joins the live set and the process's totals (device apart from host). */
static __always_inline void track_alloc(__u32 tgid, __u64 ptr, __u64 bytes, __u32 kind,
					__u32 api, __s64 stack_id, __u64 caller, __u64 now)
{
	struct cp_alloc_key key = { .pid = tgid, .ptr = ptr };
	struct cp_alloc_info info = {
		.bytes = bytes, .stack_id = stack_id, .caller = caller, .time_ns = now, .kind = kind,
		.api = api, .device = cuprobe_current_device(),
	};
	struct cp_mem_stat *mem = mem_row(tgid);
	struct cp_device_mem_stat *per_device = NULL;

	if (!mem)
		return;
	if (kind != CP_MEM_HOST) {
		__sync_fetch_and_add(&mem->allocations, 1);
		per_device = device_mem_row(tgid, info.device);
		if (per_device)
			__sync_fetch_and_add(&per_device->allocations, 1);
	}
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
	if (per_device) {
		__u64 live = __sync_fetch_and_add(&per_device->live_bytes, bytes) + bytes;

		if (live > per_device->peak_bytes)
			per_device->peak_bytes = live; /* a racing update may keep the smaller: harmless */
	}
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
		struct cp_device_mem_stat *per_device = device_mem_row(tgid, info->device);

		__sync_fetch_and_sub(&mem->live_bytes, info->bytes);
		__sync_fetch_and_sub(&mem->live_allocations, 1);
		if (per_device) {
			__sync_fetch_and_sub(&per_device->live_bytes, info->bytes);
			__sync_fetch_and_add(&per_device->frees, 1);
		}
	}
	bpf_map_delete_elem(&live_allocs, &key);
}

/* cuMemFree_v2(dptr), cuMemFreeAsync(dptr, stream), cuMemFreeHost(void *p) */
SEC("uprobe")
int BPF_KPROBE(free_entry)
{
	struct cp_free_event *event;
	struct cuda_free f;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	cuda_decode_free(&c.args, &f);
	if (aggregate)
		track_free(c.pid_tgid >> 32, f.ptr, f.kind);
	event = call_record(&c, CP_EV_FREE, sizeof(*event));
	if (!event)
		return 0;
	event->ptr = f.ptr;
	event->stream = f.stream;
	event->kind = f.kind;
	event->pad = 0;
	submit(event, c.now, false);
	return 0;
}

/* Entry state for the return probe (built-in programs: deleted when read). */
static __always_inline void keep_call(struct call *c, struct cuprobe_call *call)
{
	struct cuprobe_call_key key = cuprobe_entry_key(c->regs);

	if (bpf_map_update_elem(&pending, &key, call, BPF_ANY))
		count_in(c->slots, CP_CNT_PENDING_OVERFLOW);
}

/* 1D copies (pointers, arrays, peers), 2D, 3D and batches. */
SEC("uprobe")
int BPF_KPROBE(copy)
{
	struct cp_copy_event *event;
	struct cuda_copy x;
	struct call c;
	__u64 py_stack;
	__u32 nccl_call;

	if (!enter(ctx, &c))
		return 0;
	nccl_call = nccl_link(true);
	if (!CP_COOKIE_ASYNC(c.cookie) && !CP_COOKIE_VARIANT(c.cookie) &&
	    (CP_COOKIE_KIND(c.cookie) == CP_COPY_HTOD || CP_COOKIE_KIND(c.cookie) == CP_COPY_DTOH)) {
		/* Its return (call_return) says the legacy stream's work before it is done. */
		struct cuprobe_call call = cuprobe_call_of(&c.args, c.now);

		keep_call(&c, &call);
	}
	if (!stream_events && !aggregate)
		return 0;
	cuda_decode_copy(&c.args, &x);
	if (aggregate) {
		struct cp_copy_key key = { .pid = c.pid_tgid >> 32, .device = cuprobe_current_device(),
					   .direction = x.direction };
		static const struct cp_copy_stat empty;
		struct cp_copy_stat *row = lookup_or_init(&copy_stats, &key, &empty,
							  CP_CNT_DEVICE_STATS_FULL);

		if (row) {
			__sync_fetch_and_add(&row->copies, x.count);
			__sync_fetch_and_add(&row->bytes, x.bytes);
		}
	}
	py_stack = python_stack(c.pid_tgid, c.api, c.now);
	event = call_record(&c, CP_EV_COPY, sizeof(*event));
	if (!event)
		return 0;
	event->dst = x.dst;
	event->src = x.src;
	event->bytes = x.bytes;
	event->stream = x.stream;
	event->direction = x.direction;
	event->async = x.async;
	event->count = x.count;
	event->flags = x.flags;
	event->py_stack = py_stack;
	event->nccl_call = nccl_call;
	event->pad = 0;
	submit(event, c.now, false);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(memset_entry)
{
	struct cp_memset_event *event;
	struct cuda_memset m;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	if (!stream_events)
		return 0;
	cuda_decode_memset(&c.args, &m);
	event = call_record(&c, CP_EV_MEMSET, sizeof(*event));
	if (!event)
		return 0;
	event->dst = m.dst;
	event->bytes = m.bytes;
	event->stream = m.stream;
	event->pitch = m.pitch;
	event->value = m.value;
	event->element_size = m.element_size;
	event->async = m.async;
	event->pad = 0;
	submit(event, c.now, false);
	return 0;
}

/*
 * cuEventRecord[WithFlags](event, stream[, flags]), cuStreamWaitEvent(stream, event, flags),
 * cu[Green]CtxRecordEvent / cu[Green]CtxWaitEvent(context, event): the cookie says which is where.
 */
SEC("uprobe")
int BPF_KPROBE(event)
{
	struct cp_event_event *record;
	struct cuda_event e;
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	if (!stream_events)
		return 0;
	cuda_decode_event(&c.args, &e);
	record = call_record(&c, CP_EV_EVENT, sizeof(*record));
	if (!record)
		return 0;
	record->device = cuprobe_current_device();
	record->pad = 0;
	record->op = e.op;
	record->event = e.event;
	record->stream = e.stream;
	record->flags = e.flags;
	submit(record, c.now, false);
	return 0;
}

/* ---- calls whose result is read on return ---------------------------------- */

/* Whether tgid's memory map is to be read before it goes on (a traced process, not held). */
static __always_inline bool maps_unread(__u32 tgid)
{
	return filter_by_pid && !bpf_map_lookup_elem(&maps_read, &tgid) &&
	       !bpf_map_lookup_elem(&held_pids, &tgid);
}

/*
 * Stops the current process (SIGSTOP, taken before the call runs) until the
 * agent has read its memory map and calls cp_tracer__maps_read. The caller
 * has a record reserved, submitted only when this succeeds: a process
 * stopped with nothing saying so would stay stopped.
 */
static __always_inline bool stop_until_maps_read(struct counter_slots *slots, __u32 tgid)
{
	struct cp_file_key none = {};

	if (bpf_map_update_elem(&held_pids, &tgid, &none, BPF_ANY)) {
		count_in(slots, CP_CNT_HOLD_FAILED);
		return false;
	}
	if (bpf_send_signal(SIGSTOP_)) {
		bpf_map_delete_elem(&held_pids, &tgid);
		count_in(slots, CP_CNT_HOLD_FAILED);
		return false;
	}
	return true;
}

/*
 * hold_for_stacks: the first stack of a process whose memory map the agent
 * has not read (since its last executable mapping) stops it and says so;
 * the agent reads the map and continues it. Without this a process exiting
 * at once leaves its stacks unnamed.
 */
static __always_inline void hold_until_maps_read(struct call *c)
{
	__u32 tgid = c->pid_tgid >> 32;
	struct cp_proc_event *event;

	if (!hold_for_stacks || !maps_unread(tgid))
		return;
	event = reserve(c->slots, sizeof(*event));
	if (!event)
		return;
	if (!stop_until_maps_read(c->slots, tgid)) {
		bpf_ringbuf_discard(event, 0);
		return;
	}
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_PROC, c->api, c->pid_tgid, c->now);
	event->kind = CP_PROC_HELD_FOR_STACKS;
	PROCESS_COMM(event, (struct task_struct *)bpf_get_current_task());
	submit(event, c->now, true);
}

/*
 * Allocations, VMM, completion queries, modules and contexts: the arguments
 * the cookie names are kept until the call returns (and, for allocations
 * with record_stacks, the allocating user stack). Also every other family's
 * calls when a user's program (cuprobe run) wants their returns.
 */
SEC("uprobe")
int BPF_KPROBE(call_entry)
{
	struct cuprobe_call call;
	struct call c;
	__u32 family;

	if (!enter(ctx, &c))
		return 0;
	family = CP_COOKIE_FAMILY(c.cookie);
	call = cuprobe_call_of(&c.args, c.now);
	if (record_stacks && (family == CP_FAMILY_alloc ||
			      (family == CP_FAMILY_vmm && CP_COOKIE_KIND(c.cookie) == CP_VMM_CREATE))) {
		/* At entry the caller's frames are intact: the allocating code path. */
		call.stack_id = bpf_get_stackid(ctx, &cuprobe_stacks, BPF_F_USER_STACK);
		if (call.stack_id < 0)
			count_in(c.slots, CP_CNT_STACKS_LOST);
		bpf_probe_read_user(&call.caller, sizeof(call.caller), (void *)PT_REGS_SP(ctx));
		hold_until_maps_read(&c);
	}
	keep_call(&c, &call);
	return 0;
}

/*
 * cuprobe run: the entry state of a family whose returns a user's program
 * reads (cuprobe_returning_call), left in place for every return program
 * of the call; a later call from the same frame replaces it.
 */
SEC("uprobe")
int BPF_KPROBE(call_stash)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct cuprobe_call_key key = cuprobe_entry_key(ctx);
	struct cuprobe_args args;
	struct cuprobe_call call;

	if (!traced(pid_tgid >> 32))
		return 0;
	cuprobe_load_args(&args, ctx, bpf_get_attach_cookie(ctx));
	call = cuprobe_stash_of(&args, bpf_ktime_get_ns());
	if (bpf_map_update_elem(&cuprobe_calls, &key, &call, BPF_ANY))
		count(CP_CNT_PENDING_OVERFLOW);
	return 0;
}

/*
 * cuprobe run --python: the calling thread's Python stack at the entry of
 * a call a user's program is on, for cuprobe_python_stack_id(), with the
 * entry's stack pointer to tell this call from an earlier one.
 */
SEC("uprobe")
int BPF_KPROBE(python_stash)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct cuprobe_python_stack *slot;
	__u64 id;

	if (!traced(pid_tgid >> 32))
		return 0;
	id = python_stack(pid_tgid, CP_COOKIE_API(bpf_get_attach_cookie(ctx)), now);
	/* A thread that never had a stack gets no storage. */
	slot = bpf_task_storage_get(&cuprobe_python_stacks, bpf_get_current_task_btf(), 0,
				    id ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!slot)
		return 0;
	slot->id = id;
	slot->sp = PT_REGS_SP(ctx);
	return 0;
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
static __always_inline __u64 track_vmm(__u32 tgid, const struct cuda_vmm *v)
{
	struct cp_vmm_key key = { .pid = tgid };
	struct cp_vmm_handle *h, fresh = { .bytes = v->bytes, .refs = 1 };
	struct cp_vmm_mapping *m, mapping = { .handle = v->handle, .bytes = v->bytes };
	__u64 freed = 0, *range, ptr = v->ptr, bytes = v->bytes;
	struct cp_mem_stat *mem;
	int i;

	switch (v->op) {
	case CP_VMM_CREATE:
		key.id = v->handle;
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
		key.id = v->handle;
		h = bpf_map_lookup_elem(&vmm_handles, &key);
		if (!h) {
			count(CP_CNT_VMM_UNKNOWN);
			return 0;
		}
		__sync_fetch_and_add(&h->refs, v->op == CP_VMM_RETAIN ? 1 : -1);
		return v->op == CP_VMM_RELEASE ? maybe_free_handle(tgid, &key, h) : 0;
	case CP_VMM_MAP:
		key.id = v->handle;
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

/* The device of a context of the process, or -1. */
static __always_inline __s32 context_device(__u32 tgid, __u64 context)
{
	struct cuprobe_context_key key = { .pid = tgid, .context = context };
	__s32 *device = bpf_map_lookup_elem(&cuprobe_contexts, &key);

	return device ? *device : -1;
}

/* The thread's current context after a successful context call; the context's device kept. */
static __always_inline __s32 track_context(__u64 pid_tgid, const struct cuda_context *x)
{
	struct cuprobe_context_key key = { .pid = pid_tgid >> 32, .context = x->context };
	struct cuprobe_thread_context *thread;
	__u32 tgid = pid_tgid >> 32, top;
	__s32 device = x->device, *known;

	switch (x->op) {
	case CP_CONTEXT_RETAIN:
	case CP_CONTEXT_CREATE:
		if (!x->context)
			return device;
		bpf_map_update_elem(&cuprobe_contexts, &key, &device, BPF_ANY);
		{
			struct cuprobe_process_context last = { .context = key.context, .device = device };

			bpf_map_update_elem(&cuprobe_process_contexts, &tgid, &last, BPF_ANY);
		}
		if (x->op == CP_CONTEXT_RETAIN)
			return device;
		/* cuCtxCreate also pushes the new context on the thread's stack. */
		break;
	case CP_CONTEXT_DESTROY:
		bpf_map_delete_elem(&cuprobe_contexts, &key);
		return -1;
	}
	known = bpf_map_lookup_elem(&cuprobe_contexts, &key);
	if (known)
		device = *known;
	thread = bpf_task_storage_get(&cuprobe_thread_contexts, bpf_get_current_task_btf(), 0,
				      BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!thread) {
		count(CP_CNT_TARGETS_OVERFLOW);
		return device;
	}
	if (x->op == CP_CONTEXT_POP) {
		if (thread->depth > 0)
			thread->depth--;
		top = thread->depth ? (thread->depth - 1) & (CUPROBE_CONTEXT_DEPTH - 1) : 0;
		return thread->depth ? thread->device[top] : -1;
	}
	if (x->op == CP_CONTEXT_SET) {
		if (!thread->depth)
			thread->depth = 1;
	} else if (thread->depth < CUPROBE_CONTEXT_DEPTH) {
		thread->depth++;
	}
	top = (thread->depth - 1) & (CUPROBE_CONTEXT_DEPTH - 1);
	thread->stack[top] = x->context;
	thread->device[top] = device;
	return device;
}

/*
 * At a built-in return probe: the call's entry state, taken (deleted), after
 * the return is timed. False when the process is not traced or the entry was
 * not seen (counted).
 */
static __always_inline bool take_pending(struct pt_regs *ctx, __u64 pid_tgid, int result,
					 struct cuprobe_call *call)
{
	struct cuprobe_call_key key;
	struct cuprobe_call *found;

	if (!traced(pid_tgid >> 32))
		return false;
	returned(ctx, pid_tgid, result);
	key = cuprobe_return_key(ctx);
	found = bpf_map_lookup_elem(&pending, &key);
	if (!found) {
		count(CP_CNT_PENDING_MISSED);
		return false;
	}
	*call = *found;
	bpf_map_delete_elem(&pending, &key);
	return true;
}

SEC("uretprobe")
int BPF_KRETPROBE(call_return, int result)
{
	struct cuprobe_call call;
	struct call c = {};
	__u32 family;

	c.pid_tgid = bpf_get_current_pid_tgid();
	if (!take_pending(ctx, c.pid_tgid, result, &call))
		return 0;
	c.regs = ctx;
	c.cookie = call.cookie;
	c.api = CP_COOKIE_API(call.cookie);
	c.slots = cpu_counters();
	c.now = bpf_ktime_get_ns();
	family = CP_COOKIE_FAMILY(call.cookie);
	if (family == CP_FAMILY_alloc) {
		struct cp_alloc_event *event;
		struct cuda_alloc a;

		cuda_decode_alloc_call(&call, result, &a);
		__u64 py_stack;

		if (aggregate && result == 0 && a.ptr)
			track_alloc(c.pid_tgid >> 32, a.ptr, a.bytes, a.kind, c.api, call.stack_id,
				    call.caller, c.now);
		py_stack = python_stack(c.pid_tgid, c.api, c.now);
		event = call_record(&c, CP_EV_ALLOC, sizeof(*event));
		if (!event)
			return 0;
		event->kind = a.kind;
		event->result = result;
		event->ptr = a.ptr;
		event->bytes = a.bytes;
		event->stream = a.stream;
		event->py_stack = py_stack;
		submit(event, c.now, false);
	} else if (family == CP_FAMILY_vmm) {
		struct cp_vmm_event *event;
		struct cuda_vmm v;
		__u64 physical = 0;
		__s32 device = -1;

		cuda_decode_vmm_call(&call, result, &v);
		if (v.op == CP_VMM_CREATE &&
		    bpf_probe_read_user(&device, sizeof(device),
					(void *)(call.c + CUPROBE_ALLOC_PROP_LOCATION_ID)))
			device = -1;
		if (result == 0)
			physical = track_vmm(c.pid_tgid >> 32, &v);
		event = call_record(&c, CP_EV_VMM, sizeof(*event));
		if (!event)
			return 0;
		event->op = v.op;
		event->result = result;
		event->handle = v.op == CP_VMM_CREATE || v.op == CP_VMM_RETAIN ||
				v.op == CP_VMM_RELEASE || v.op == CP_VMM_MAP ? v.handle : 0;
		event->ptr = v.op == CP_VMM_CREATE || v.op == CP_VMM_RELEASE ? 0 : v.ptr;
		event->bytes = v.bytes;
		event->physical_bytes = physical;
		event->device = device;
		event->pad = 0;
		submit(event, c.now, false);
	} else if (family == CP_FAMILY_sync || family == CP_FAMILY_copy) {
		/* Syncs and blocking copies, when they return: the timeline's evidence. */
		__u64 py_stack = python_stack(c.pid_tgid, c.api, c.now);
		__u32 kind = family == CP_FAMILY_copy ? CP_SYNC_COPY : CP_COOKIE_KIND(call.cookie);
		bool proving = !stream_events && stream_proving;
		struct cp_sync_event *event;

		if (proving) {
			event = reserve(c.slots, sizeof(*event));
			if (event)
				fill_header(&event->hdr, CP_EV_SYNC, c.api, c.pid_tgid, c.now);
		} else {
			event = call_record(&c, CP_EV_SYNC, sizeof(*event));
		}
		if (!event)
			return 0;
		event->kind = kind;
		event->handle = family == CP_FAMILY_copy ? 0 : call.a;
		event->entry_ns = call.start_ns;
		event->result = result;
		event->device = kind == CP_SYNC_CONTEXT && call.a ?
				context_device(c.pid_tgid >> 32, call.a) : cuprobe_current_device();
		event->pad = 0;
		event->py_stack = py_stack;
		submit(event, c.now, proving);
	} else if (family == CP_FAMILY_module) {
		struct cp_module_event *event;
		struct cuda_module m;
		long len = 0;

		cuda_decode_module_call(&call, result, &m);
		event = call_record(&c, CP_EV_MODULE, sizeof(*event));
		if (!event)
			return 0;
		event->op = m.op;
		event->result = result;
		event->handle = m.handle;
		event->pad = 0;
		event->path[0] = '\0';
		if (m.path) {
			len = bpf_probe_read_user_str(event->path, sizeof(event->path), (void *)m.path);
			if (len < 1) {
				event->path[0] = '\0';
				len = 1;
			}
		}
		event->path_len = len > 0 ? len - 1 : 0;
		submit(event, c.now, false);
	} else if (family == CP_FAMILY_context) {
		struct cp_context_event *event;
		struct cuda_context x;
		__s32 device = -1;

		cuda_decode_context_call(&call, result, &x);
		if (result == 0)
			device = track_context(c.pid_tgid, &x);
		event = call_record(&c, CP_EV_CONTEXT, sizeof(*event));
		if (!event)
			return 0;
		event->op = x.op;
		event->context = x.context;
		event->device = device;
		event->result = result;
		event->pad = 0;
		submit(event, c.now, true);
	}
	return 0;
}

/* ---- NCCL ------------------------------------------------------------------------- */

/* The i-th call of a thread's stack (the mask, kept from the compiler, bounds it for the verifier). */
static __always_inline struct nccl_open_call *nccl_slot(struct nccl_thread *thread, __u32 i)
{
	barrier_var(i);
	return &thread->calls[i & (NCCL_DEPTH - 1)];
}

static __always_inline bool nccl_links_launches(__u32 op)
{
	return CP_NCCL_MOVES_DATA(op) || op == CP_NCCL_GROUP_END;
}

/*
 * Every probed NCCL export: the call decoded and kept on its thread's stack
 * of NCCL calls in flight until it returns. A call made inside another
 * (same thread, a lower or equal stack pointer: ncclBcast tail-calls
 * ncclBroadcast) is part of it and not recorded; calls whose return was
 * never seen (a deeper stack pointer than ours) are dropped first.
 */
SEC("uprobe")
int BPF_KPROBE(nccl_entry)
{
	struct nccl_open_call *slot;
	struct nccl_thread *thread;
	__u64 sp = PT_REGS_SP(ctx);
	struct call c;
	__u32 depth;
	int i;

	if (!enter(ctx, &c))
		return 0;
	thread = bpf_task_storage_get(&nccl_threads, bpf_get_current_task_btf(), 0,
				      BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!thread) {
		count_in(c.slots, CP_CNT_NCCL_TOO_DEEP);
		return 0;
	}
	for (i = 0; i < NCCL_DEPTH && thread->depth; i++) {
		slot = nccl_slot(thread, thread->depth - 1);
		if (slot->sp >= sp)
			break;
		if (!slot->nested && nccl_links_launches(slot->call.op))
			__sync_fetch_and_add(&nccl_open_calls, -1);
		thread->depth--;
		count_in(c.slots, CP_CNT_NCCL_UNMATCHED);
	}
	depth = thread->depth;
	if (depth >= NCCL_DEPTH) {
		count_in(c.slots, CP_CNT_NCCL_TOO_DEEP);
		return 0;
	}
	slot = nccl_slot(thread, depth);
	slot->sp = sp;
	slot->entry_ns = c.now;
	slot->launches = 0;
	slot->copies = 0;
	slot->nested = depth > 0;
	thread->depth = depth + 1;
	if (slot->nested) {
		count_in(c.slots, CP_CNT_NCCL_NESTED);
		return 0;
	}
	cuda_decode_nccl(&c.args, &slot->call);
	/* Records carry 32 bits: past 2^32 calls the numbers wrap (0, none, skipped). */
	slot->seq = __sync_fetch_and_add(&nccl_last_seq, 1) + 1;
	if (!slot->seq)
		slot->seq = __sync_fetch_and_add(&nccl_last_seq, 1) + 1;
	if (slot->call.op == CP_NCCL_GROUP_START && !thread->group_depth++)
		thread->group = slot->seq;
	slot->group = thread->group_depth ? thread->group : 0;
	/* Its start not seen (traced from the middle of a group): the end stands for the group. */
	if (slot->call.op == CP_NCCL_GROUP_END && !slot->group)
		slot->group = slot->seq;
	if (nccl_links_launches(slot->call.op))
		__sync_fetch_and_add(&nccl_open_calls, 1);
	slot->py_stack = python_stack(c.pid_tgid, c.api, c.now);
	return 0;
}

/* The communicators a call made or changed, kept for the calls that use them. */
static __always_inline void nccl_track_comms(__u32 tgid, struct cuda_nccl *n, __u64 out_array)
{
	struct cuprobe_nccl_comm_key key = { .pid = tgid, .comm = n->comm };
	struct cuprobe_nccl_comm row = { .id = n->comm_id, .parent = n->parent, .rank = n->rank,
					 .nranks = n->nranks, .device = n->device };
	struct cuprobe_nccl_comm *known;
	__u64 devices = n->parent;
	__s32 device;
	int i;

	/* A non-blocking communicator's init returns ncclInProgress with the communicator made. */
	if (n->result != 0 && n->result != CP_NCCL_IN_PROGRESS)
		return;
	switch (n->op) {
	case CP_NCCL_COMM_INIT:
	case CP_NCCL_COMM_SPLIT:
	case CP_NCCL_COMM_SHRINK:
		if (!n->comm)
			return;
		if (n->op != CP_NCCL_COMM_INIT) {
			/* Its rank and size depend on every rank's arguments: not known here. */
			known = cuprobe_nccl_comm(tgid, n->parent);
			row.device = known ? known->device : cuprobe_current_device();
			n->device = row.device;
		}
		if (bpf_map_update_elem(&cuprobe_nccl_comms, &key, &row, BPF_ANY))
			count(CP_CNT_NCCL_COMMS_FULL);
		return;
	case CP_NCCL_COMM_INIT_ALL:
		/* ncclCommInitAll(comms, ndev, devlist): rank i on devlist[i] (device i without a list). */
		row.parent = 0;
		n->parent = 0;
		for (i = 0; i < CP_NCCL_INIT_ALL_MAX && i < n->nranks; i++) {
			if (bpf_probe_read_user(&key.comm, sizeof(key.comm), (void *)(out_array + 8 * i)) ||
			    !key.comm)
				break;
			device = i;
			if (devices && bpf_probe_read_user(&device, sizeof(device), (void *)(devices + 4 * i)))
				device = -1;
			row.rank = i;
			row.device = device;
			if (!i)
				n->device = device;
			if (bpf_map_update_elem(&cuprobe_nccl_comms, &key, &row, BPF_ANY))
				count(CP_CNT_NCCL_COMMS_FULL);
		}
		return;
	case CP_NCCL_COMM_COUNT:
	case CP_NCCL_COMM_USER_RANK:
	case CP_NCCL_COMM_CU_DEVICE:
		/* The answer also names a communicator made before tracing began. */
		known = cuprobe_nccl_comm(tgid, n->comm);
		if (!known) {
			row = (struct cuprobe_nccl_comm){ .rank = -1, .nranks = -1, .device = -1 };
			if (bpf_map_update_elem(&cuprobe_nccl_comms, &key, &row, BPF_NOEXIST) &&
			    !cuprobe_nccl_comm(tgid, n->comm)) {
				count(CP_CNT_NCCL_COMMS_FULL);
				return;
			}
			known = cuprobe_nccl_comm(tgid, n->comm);
			if (!known)
				return;
		}
		if (n->op == CP_NCCL_COMM_COUNT)
			known->nranks = n->nranks;
		else if (n->op == CP_NCCL_COMM_USER_RANK)
			known->rank = n->rank;
		else
			known->device = n->device;
		return;
	case CP_NCCL_COMM_DESTROY:
	case CP_NCCL_COMM_ABORT:
		bpf_map_delete_elem(&cuprobe_nccl_comms, &key);
		return;
	}
}

static __always_inline void nccl_count(__u32 tgid, const struct nccl_open_call *slot, __u64 now)
{
	struct cp_nccl_key key = { .pid = tgid, .op = slot->call.op, .comm = slot->call.comm };
	static const struct cp_nccl_stat empty;
	struct cp_nccl_stat *row = lookup_or_init(&nccl_stats, &key, &empty, CP_CNT_NCCL_STATS_FULL);

	if (!row)
		return;
	__sync_fetch_and_add(&row->calls, 1);
	if (slot->call.result)
		__sync_fetch_and_add(&row->errors, 1);
	__sync_fetch_and_add(&row->bytes, slot->call.bytes);
	__sync_fetch_and_add(&row->enqueue_ns, now - slot->entry_ns);
	__sync_fetch_and_add(&row->launches, slot->launches);
	__sync_fetch_and_add(&row->copies, slot->copies);
	/* Ungrouped work that left nothing on the GPU: one rank in place, or a count of 0. */
	if (CP_NCCL_MOVES_DATA(slot->call.op) && !slot->group && !slot->call.result &&
	    !slot->launches && !slot->copies)
		__sync_fetch_and_add(&row->no_gpu_work, 1);
	row->comm_id = slot->call.comm_id;
	row->rank = slot->call.rank;
	row->nranks = slot->call.nranks;
	row->device = slot->call.device;
}

/* An NCCL call returned: the communicators it made or ended, its counts, its record. */
SEC("uretprobe")
int BPF_KRETPROBE(nccl_return, int result)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now, out_array;
	struct nccl_open_call *slot;
	struct nccl_thread *thread;
	struct cp_nccl_event *event;
	__u32 depth;

	if (!traced(pid_tgid >> 32))
		return 0;
	returned(ctx, pid_tgid, result);
	thread = bpf_task_storage_get(&nccl_threads, bpf_get_current_task_btf(), 0, 0);
	depth = thread ? thread->depth : 0;
	if (!depth || depth > NCCL_DEPTH) {
		count(CP_CNT_NCCL_UNMATCHED);
		return 0;
	}
	slot = nccl_slot(thread, depth - 1);
	/* Not ours: a call too deep to have been kept. */
	if (slot->sp != PT_REGS_SP(ctx) - 8)
		return 0;
	thread->depth = depth - 1;
	if (slot->nested)
		return 0;
	now = bpf_ktime_get_ns();
	if (nccl_links_launches(slot->call.op))
		__sync_fetch_and_add(&nccl_open_calls, -1);
	if (slot->call.op == CP_NCCL_GROUP_END && (!thread->group_depth || !--thread->group_depth)) {
		thread->group = 0;
		slot->call.flags |= CP_NCCL_GROUP_OUTERMOST;
	}
	out_array = slot->call.comm;
	cuda_nccl_returned(&slot->call, result);
	nccl_track_comms(pid_tgid >> 32, &slot->call, out_array);
	if (aggregate)
		nccl_count(pid_tgid >> 32, slot, now);
	if (!stream_events)
		return 0;
	event = reserve(cpu_counters(), sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_NCCL, slot->call.api, pid_tgid, now);
	event->entry_ns = slot->entry_ns;
	event->comm = slot->call.comm;
	event->comm_id = slot->call.comm_id;
	event->count = slot->call.count;
	event->bytes = slot->call.bytes;
	event->stream = slot->call.stream;
	event->parent = slot->call.parent;
	event->op = slot->call.op;
	event->seq = slot->seq;
	event->group = slot->group;
	event->datatype = slot->call.datatype;
	event->redop = slot->call.redop;
	event->root = slot->call.root;
	event->rank = slot->call.rank;
	event->nranks = slot->call.nranks;
	event->device = slot->call.device;
	event->result = result;
	event->launches = slot->launches;
	event->flags = slot->call.flags;
	event->py_stack = slot->py_stack;
	event->copies = slot->copies;
	event->pad = 0;
	submit(event, now, false);
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
	struct cuprobe_call call = { .stack_id = -1 };
	struct call c;

	if (!enter(ctx, &c))
		return 0;
	call.cookie = c.cookie;
	call.a = out_ptr;
	call.b = arg2;
	call.c = name_ptr;
	call.start_ns = c.now;
	keep_call(&c, &call);
	return 0;
}

/* The kernel names map users' programs read: filled here, where the name is at hand. */
static __always_inline void publish_name(__u32 tgid, __u64 handle, const char *name, __u64 alias_of)
{
	struct cuprobe_name_key key = { .pid = tgid, .handle = alias_of };
	struct cuprobe_kernel_name *known;

	if (alias_of) {
		known = bpf_map_lookup_elem(&cuprobe_kernel_names, &key);
		if (!known)
			return;
		key.handle = handle;
		bpf_map_update_elem(&cuprobe_kernel_names, &key, known, BPF_ANY);
		return;
	}
	key.handle = handle;
	bpf_map_update_elem(&cuprobe_kernel_names, &key, name, BPF_ANY);
}

SEC("uretprobe")
int BPF_KRETPROBE(name_return, int result)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct cuprobe_call call;
	struct cp_name_event *event;
	long len = 0;
	__u64 now;

	if (!take_pending(ctx, pid_tgid, result, &call))
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
	if (result == 0 && event->handle && sizeof(event->name) >= CUPROBE_KERNEL_NAME_MAX)
		publish_name(pid_tgid >> 32, event->handle, event->name, event->alias_of);
	submit(event, now, false);
	return 0;
}

/* cuInit(flags): the process has started using CUDA. */
SEC("uprobe")
int BPF_KPROBE(init_entry)
{
	struct cp_proc_event *event;
	struct call c;
	__u32 tgid;

	if (!enter(ctx, &c))
		return 0;
	tgid = c.pid_tgid >> 32;
	if (!filter_by_pid) {
		__u8 one = 1;

		if (bpf_map_update_elem(&cuprobe_targets, &tgid, &one, BPF_ANY))
			count_in(c.slots, CP_CNT_TARGETS_OVERFLOW);
	}
	event = reserve(c.slots, sizeof(*event));
	if (!event)
		return 0;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_PROC, c.api, c.pid_tgid, c.now);
	event->kind = CP_PROC_CUDA_INIT;
	PROCESS_COMM(event, (struct task_struct *)bpf_get_current_task());
	/*
	 * hold_at_init: the agent reads the memory map at this record, and a
	 * user's program may have stacks to name after the process exits
	 * (cuprobe run). Taken first: Python's release below leaves this hold.
	 */
	if (hold_at_init && maps_unread(tgid))
		stop_until_maps_read(c.slots, tgid);
	/* A process not checked for Python yet waits for the agent to look (this record). */
	if (hold_for_python && !bpf_map_lookup_elem(&py_procs, &tgid))
		py_hold(tgid);
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

	if (child_pid == child_tgid)
		python_fork(parent_tgid, child_tgid);
	if (!filter_by_pid || child_pid != child_tgid)
		return 0;
	if (!bpf_map_lookup_elem(&cuprobe_targets, &parent_tgid))
		return 0;
	if (bpf_map_update_elem(&cuprobe_targets, &child_tgid, &one, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&cuprobe_targets, &child_tgid)) {
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
	PROCESS_COMM(event, parent);
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
	if (python_stacks)
		bpf_map_delete_elem(&py_procs, &tgid); /* forked Python children are not all targets */
	if (!bpf_map_lookup_elem(&cuprobe_targets, &tgid))
		return 0;
	bpf_map_delete_elem(&cuprobe_targets, &tgid);
	bpf_map_delete_elem(&held_pids, &tgid);
	bpf_map_delete_elem(&maps_read, &tgid);
	bpf_map_delete_elem(&cuprobe_process_contexts, &tgid);
	bpf_map_delete_elem(&launch_seqs, &tgid);
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
	PROCESS_COMM(event, task);
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

	if (!file || (filter_by_pid && !bpf_map_lookup_elem(&cuprobe_targets, &tgid)))
		return;
	dname = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	if (bpf_probe_read_kernel_str(name, sizeof(name), dname) < 1)
		return;
	if (!(flags & CP_ATTACH_EXEC)) {
		if (has_prefix(name, "libcuda.so", 10))
			flags &= ~CP_ATTACH_RUNTIME;
		else if (watch_runtime && has_prefix(name, "libcudart.so", 12))
			flags |= CP_ATTACH_RUNTIME;
		else if (watch_nccl && has_prefix(name, "libnccl.so", 10))
			flags |= CP_ATTACH_NCCL;
		else
			return;
	}
	key.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	key.inode = BPF_CORE_READ(file, f_inode, i_ino);
	if (bpf_map_lookup_elem(&covered_files, &key))
		return;
	/*
	 * System-wide, a process that maps a file before its probes are live
	 * may call cuInit unseen: it is a target from its mapping on, so its
	 * exit (reports, leak checks) is not missed either.
	 */
	if (!filter_by_pid) {
		__u8 one = 1;

		if (bpf_map_update_elem(&cuprobe_targets, &tgid, &one, BPF_ANY))
			count(CP_CNT_TARGETS_OVERFLOW);
	}
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

/* New code mapped: the agent's copy of the memory map is stale. */
static __always_inline void maps_changed(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (hold_for_stacks)
		bpf_map_delete_elem(&maps_read, &tgid);
}

/* mmap(addr, len, prot, flags, fd, off) with PROT_EXEC: a library's code going in. */
SEC("tracepoint/syscalls/sys_enter_mmap")
int driver_mmap(struct trace_event_raw_sys_enter *ctx)
{
	int fd = (int)ctx->args[4];

	if (ctx->args[2] & PROT_EXEC_)
		maps_changed();
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

	if (id == NR_MMAP_X86_64 && (BPF_CORE_READ(regs, dx) & PROT_EXEC_))
		maps_changed();
	if (!watch_mappings || id != NR_MMAP_X86_64 || !(BPF_CORE_READ(regs, dx) & PROT_EXEC_))
		return 0;
	fd = (int)BPF_CORE_READ(regs, r8);
	if (fd < 0)
		return 0;
	file_mapped(fd_file(fd), fd, 0);
	return 0;
}

/* exec: an executable may carry static cudart (--runtime); a Python process is one no more. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(process_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (python_stacks)
		bpf_map_delete_elem(&py_procs, &tgid); /* checked again at its cuInit */
	if (!watch_runtime)
		return 0;
	file_mapped(BPF_CORE_READ(bprm, file), -1, CP_ATTACH_RUNTIME | CP_ATTACH_EXEC);
	return 0;
}

/* ---- GPU errors ---------------------------------------------------------------- */

/* A __data_loc string of a tracepoint record: length << 16 | offset from the record's start. */
static __always_inline void data_loc_string(void *record, __u32 field_offset, char *out, __u32 size)
{
	__u32 loc = 0;

	out[0] = '\0';
	if (bpf_probe_read_kernel(&loc, sizeof(loc), record + field_offset))
		return;
	bpf_probe_read_kernel_str(out, size, record + (loc & 0xffff));
}

/*
 * nvidia:nvidia_dev_xid (the NVIDIA driver's own tracepoint): every Xid,
 * whatever process it names; userspace attributes it.
 */
SEC("tracepoint/nvidia/nvidia_dev_xid")
int gpu_xid(void *record)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct cp_xid_event *event = reserve(cpu_counters(), sizeof(*event));

	count(CP_API_nvidia_dev_xid);
	if (!event)
		return 0;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_XID, CP_API_nvidia_dev_xid, pid_tgid, now);
	bpf_probe_read_kernel(&event->error_code, sizeof(event->error_code), record + xid_code_offset);
	data_loc_string(record, xid_dev_offset, event->dev, sizeof(event->dev));
	data_loc_string(record, xid_msg_offset, event->msg, sizeof(event->msg));
	submit(event, now, true);
	return 0;
}
