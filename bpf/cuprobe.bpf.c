// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cuprobe's BPF programs: uprobes on the CUDA driver API (libcuda.so.1) and
 * cudaLaunchKernel (libcudart), plus the fork/exit tracepoints that keep the
 * set of traced processes current.
 *
 * One program serves every symbol of the same signature; the attach cookie
 * carries the enum cp_api id (and, for copies, direction and async flag).
 * The hot path (launches, copies, syncs, frees) is one entry probe per call;
 * only calls that return something through a pointer (allocations, name
 * look-ups) add a return probe.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cuprobe_events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

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
	__u64 out_ptr;   /* where the call writes its result */
	__u64 arg2;      /* pitch pointer / CUkernel / library */
	__u64 arg3;      /* name pointer / width / stream */
	__u64 arg4;      /* height */
	__s64 stack_id;  /* allocating user stack, when record_stacks */
	__u64 caller;    /* return address of the call, when record_stacks */
	__u32 api;
	__u32 pad;
};

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
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct call_start);
} call_starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct pending_call);
} pending SEC(".maps");

/* Cookie layout: bits 0-15 api, 16-23 copy direction, bit 24 async. */
#define COOKIE_API(c)       ((__u32)((c) & 0xffff))
#define COOKIE_DIR(c)       ((__u32)(((c) >> 16) & 0xff))
#define COOKIE_ASYNC(c)     ((__u32)(((c) >> 24) & 0x1))

static __always_inline void count(__u32 slot)
{
	__u32 zero = 0;
	struct counter_slots *slots = bpf_map_lookup_elem(&counters, &zero);

	if (slots && slot < CP_CNT_MAX)
		slots->slot[slot] += 1;
}

/* The hot path counts twice (the API hit, the record attempted): one look-up. */
static __always_inline struct counter_slots *cpu_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
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

static __always_inline void *reserve(__u64 size)
{
	void *record;

	count(CP_CNT_RECORDS_ATTEMPTED);
	record = bpf_ringbuf_reserve(&events, size, 0);
	if (!record)
		count(CP_CNT_RECORDS_LOST);
	return record;
}

/*
 * Submit without waking the consumer unless enough unread data piled up or
 * the latency bound has passed since the last wakeup: a wakeup costs ~1.4 us
 * inside the probe (DESIGN.md). Lifecycle records force one.
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

/* The same reservation as reserve(), counted through counters already looked up. */
static __always_inline void *reserve_counted(struct counter_slots *slots, __u64 size)
{
	void *record;

	if (slots)
		slots->slot[CP_CNT_RECORDS_ATTEMPTED] += 1;
	record = bpf_ringbuf_reserve(&events, size, 0);
	if (!record && slots)
		slots->slot[CP_CNT_RECORDS_LOST] += 1;
	return record;
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

/*
 * The sixth integer argument (r9): libbpf 1.1's BPF_KPROBE stops at five.
 * The probes are x86-64 only, like the ABI decoding around them.
 */
static __always_inline __u64 sixth_arg(struct pt_regs *ctx)
{
	return ctx->r9;
}

/* The n-th (1-based) 8-byte stack slot above the return address. */
static __always_inline __u64 stack_arg(struct pt_regs *ctx, int slot, bool *fault)
{
	__u64 value = 0;

	if (bpf_probe_read_user(&value, sizeof(value), (void *)(PT_REGS_SP(ctx) + 8 * slot)))
		*fault = true;
	return value;
}

/* ---- aggregation ------------------------------------------------------------ */

static __always_inline struct cp_api_stat *api_row(__u32 tgid, __u32 api)
{
	struct cp_api_key key = { .pid = tgid, .api = api };
	struct cp_api_stat *row = bpf_map_lookup_elem(&api_stats, &key);
	static const struct cp_api_stat empty;

	if (row)
		return row;
	if (bpf_map_update_elem(&api_stats, &key, &empty, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&api_stats, &key)) {
		count(CP_CNT_API_STATS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&api_stats, &key);
}

static __always_inline struct cp_mem_stat *mem_row(__u32 tgid)
{
	struct cp_mem_stat *row = bpf_map_lookup_elem(&mem_stats, &tgid);
	static const struct cp_mem_stat empty;

	if (row)
		return row;
	if (bpf_map_update_elem(&mem_stats, &tgid, &empty, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&mem_stats, &tgid)) {
		count(CP_CNT_MEM_STATS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&mem_stats, &tgid);
}

/* Every traced entry: a call counted, and its start time noted when timing. */
static __always_inline void entered(__u64 pid_tgid, __u32 api, __u64 now)
{
	if (aggregate) {
		struct cp_api_stat *row = api_row(pid_tgid >> 32, api);

		if (row)
			__sync_fetch_and_add(&row->calls, 1);
	}
	if (measure_latency) {
		struct call_start start = { .time_ns = now, .api = api };

		if (bpf_map_update_elem(&call_starts, &pid_tgid, &start, BPF_ANY))
			count(CP_CNT_CALL_START_FULL);
	}
}

static __always_inline __u32 log2_bucket(__u64 ns)
{
	__u32 bucket = 0;

	if (ns >> 32) { ns >>= 32; bucket += 32; }
	if (ns >> 16) { ns >>= 16; bucket += 16; }
	if (ns >> 8) { ns >>= 8; bucket += 8; }
	if (ns >> 4) { ns >>= 4; bucket += 4; }
	if (ns >> 2) { ns >>= 2; bucket += 2; }
	if (ns >> 1) { bucket += 1; }
	bucket += ns ? 1 : 0; /* [2^(b-1), 2^b) lands in bucket b; 0 ns in bucket 0 */
	return bucket < CP_HIST_BUCKETS ? bucket : CP_HIST_BUCKETS - 1;
}

/* A timed call returned: latency into the (pid, api) histogram, errors counted. */
static __always_inline void returned(__u64 pid_tgid, int result)
{
	struct call_start *start;
	struct cp_api_stat *row;
	__u64 elapsed;
	__u32 bucket;

	if (!measure_latency)
		return;
	start = bpf_map_lookup_elem(&call_starts, &pid_tgid);
	if (!start)
		return;
	elapsed = bpf_ktime_get_ns() - start->time_ns;
	row = aggregate ? api_row(pid_tgid >> 32, start->api) : NULL;
	bpf_map_delete_elem(&call_starts, &pid_tgid);
	if (!row)
		return;
	bucket = log2_bucket(elapsed);
	__sync_fetch_and_add(&row->timed, 1);
	__sync_fetch_and_add(&row->total_ns, elapsed);
	if (result != 0)
		__sync_fetch_and_add(&row->errors, 1);
	if (bucket < CP_HIST_BUCKETS)
		__sync_fetch_and_add(&row->histogram[bucket], 1);
}

static __always_inline void count_launch(__u32 tgid, __u64 handle, __u64 threads, bool graph)
{
	struct cp_kernel_key key = { .pid = tgid, .handle = handle };
	struct cp_kernel_stat *row = bpf_map_lookup_elem(&kernel_stats, &key);
	struct cp_kernel_stat fresh = { .launches = 1, .threads = threads, .graph = graph };

	if (row) {
		__sync_fetch_and_add(&row->launches, 1);
		__sync_fetch_and_add(&row->threads, threads);
		return;
	}
	if (!bpf_map_update_elem(&kernel_stats, &key, &fresh, BPF_NOEXIST))
		return;
	row = bpf_map_lookup_elem(&kernel_stats, &key);
	if (!row) {
		count(CP_CNT_KERNEL_STATS_FULL);
		return;
	}
	/* Another CPU created the row first. */
	__sync_fetch_and_add(&row->launches, 1);
	__sync_fetch_and_add(&row->threads, threads);
}

/* Generic return probe, for timing calls whose entry probe has no return twin. */
SEC("uretprobe")
int BPF_KRETPROBE(api_return, int result)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (!traced(pid_tgid >> 32))
		return 0;
	returned(pid_tgid, result);
	return 0;
}

/*
 * cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sharedMem, hStream, params, extra)
 * cuLaunchCooperativeKernel has the same first nine arguments. The first six
 * travel in registers, blockDimZ, sharedMemBytes and hStream on the stack.
 */
SEC("uprobe")
int BPF_KPROBE(launch_kernel, __u64 function, __u64 gx, __u64 gy, __u64 gz, __u64 bx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 api = COOKIE_API(bpf_get_attach_cookie(ctx));
	struct counter_slots *slots;
	struct cp_launch_event *event;
	__u64 on_stack[3] = {}; /* blockDimZ, sharedMemBytes, hStream */
	bool fault;
	__u64 now, by;

	if (!traced(pid_tgid >> 32))
		return 0;
	slots = cpu_counters();
	if (slots && api < CP_API_MAX)
		slots->slot[api] += 1;
	now = bpf_ktime_get_ns();
	entered(pid_tgid, api, now);
	by = sixth_arg(ctx);
	/* One read for the three stack arguments above the return address. */
	fault = bpf_probe_read_user(on_stack, sizeof(on_stack), (void *)(PT_REGS_SP(ctx) + 8)) != 0;
	if (aggregate)
		count_launch(pid_tgid >> 32, function,
			     (__u64)(__u32)gx * (__u32)gy * (__u32)gz * (__u32)bx * (__u32)by *
			     (__u32)on_stack[0], false);
	if (!stream_events)
		return 0;
	event = reserve_counted(slots, sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_LAUNCH, api, pid_tgid, now);
	event->function = function;
	event->grid[0] = gx;
	event->grid[1] = gy;
	event->grid[2] = gz;
	event->block[0] = bx;
	event->block[1] = by;
	event->block[2] = on_stack[0];
	event->shared_mem_bytes = on_stack[1];
	event->stream = on_stack[2];
	event->flags = 0;
	if (api == CP_API_cuLaunchCooperativeKernel || api == CP_API_cuLaunchCooperativeKernel_ptsz)
		event->flags |= CP_LAUNCH_COOPERATIVE;
	if (fault)
		event->flags |= CP_LAUNCH_CONFIG_FAULT;
	submit(event, now, false);
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
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 api = COOKIE_API(bpf_get_attach_cookie(ctx));
	struct launch_config_prefix cfg = {};
	struct cp_launch_event *event;
	bool fault;
	__u64 now;
	int i;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(api);
	now = bpf_ktime_get_ns();
	entered(pid_tgid, api, now);
	fault = bpf_probe_read_user(&cfg, sizeof(cfg), (void *)config) != 0;
	if (aggregate)
		count_launch(pid_tgid >> 32, function,
			     (__u64)cfg.grid[0] * cfg.grid[1] * cfg.grid[2] * cfg.block[0] *
			     cfg.block[1] * cfg.block[2], false);
	if (!stream_events)
		return 0;
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_LAUNCH, api, pid_tgid, now);
	event->flags = CP_LAUNCH_EX | (fault ? CP_LAUNCH_CONFIG_FAULT : 0);
	event->function = function;
	for (i = 0; i < 3; i++) {
		event->grid[i] = cfg.grid[i];
		event->block[i] = cfg.block[i];
	}
	event->shared_mem_bytes = cfg.shared_mem_bytes;
	event->stream = cfg.stream;
	submit(event, now, false);
	return 0;
}

/* cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) */
SEC("uprobe")
int BPF_KPROBE(graph_launch, __u64 graph_exec, __u64 stream)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 api = COOKIE_API(bpf_get_attach_cookie(ctx));
	struct cp_launch_event *event;
	__u64 now;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(api);
	now = bpf_ktime_get_ns();
	entered(pid_tgid, api, now);
	if (aggregate)
		count_launch(pid_tgid >> 32, graph_exec, 0, true);
	if (!stream_events)
		return 0;
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_LAUNCH, api, pid_tgid, now);
	event->function = graph_exec;
	event->stream = stream;
	event->flags = CP_LAUNCH_GRAPH;
	submit(event, now, false);
	return 0;
}

static __always_inline void remember_call(__u64 pid_tgid, __u32 api, __u64 out_ptr, __u64 arg2,
					  __u64 arg3, __u64 arg4, __s64 stack_id, __u64 caller)
{
	struct pending_call call = {
		.out_ptr = out_ptr, .arg2 = arg2, .arg3 = arg3, .arg4 = arg4, .api = api,
		.stack_id = stack_id, .caller = caller,
	};

	if (bpf_map_update_elem(&pending, &pid_tgid, &call, BPF_ANY))
		count(CP_CNT_PENDING_OVERFLOW);
}

/* Takes the entry state of this thread's call; false when there is none. */
static __always_inline bool take_call(__u64 pid_tgid, struct pending_call *call)
{
	struct pending_call *found = bpf_map_lookup_elem(&pending, &pid_tgid);

	if (!found) {
		count(CP_CNT_PENDING_MISSED);
		return false;
	}
	*call = *found;
	bpf_map_delete_elem(&pending, &pid_tgid);
	return true;
}

/*
 * cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes), cuMemAllocManaged(dptr, bytes, flags),
 * cuMemAllocAsync(dptr, bytes, stream), cuMemAllocHost_v2(void **pp, bytes),
 * cuMemHostAlloc(pp, bytes, flags), and
 * cuMemAllocPitch_v2(dptr, size_t *pitch, width, height, elementSize).
 */
SEC("uprobe")
int BPF_KPROBE(alloc_entry, __u64 out_ptr, __u64 arg2, __u64 arg3, __u64 arg4)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 api = COOKIE_API(bpf_get_attach_cookie(ctx));
	__s64 stack_id = -1;
	__u64 caller = 0;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(api);
	entered(pid_tgid, api, bpf_ktime_get_ns());
	if (record_stacks) {
		/* At entry the caller's frames are intact: the allocating code path. */
		stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		if (stack_id < 0)
			count(CP_CNT_STACKS_LOST);
		bpf_probe_read_user(&caller, sizeof(caller), (void *)PT_REGS_SP(ctx));
	}
	remember_call(pid_tgid, api, out_ptr, arg2, arg3, arg4, stack_id, caller);
	return 0;
}

static __always_inline __u32 alloc_kind(__u32 api)
{
	switch (api) {
	case CP_API_cuMemAllocManaged:
		return CP_MEM_MANAGED;
	case CP_API_cuMemAllocHost_v2:
	case CP_API_cuMemHostAlloc:
		return CP_MEM_HOST;
	case CP_API_cuMemAllocAsync:
	case CP_API_cuMemAllocAsync_ptsz:
		return CP_MEM_DEVICE_ASYNC;
	default:
		return CP_MEM_DEVICE;
	}
}

/* A successful allocation joins the live set and the process's totals. */
static __always_inline void track_alloc(__u32 tgid, __u64 ptr, __u64 bytes, __u32 kind,
					__u32 api, __s64 stack_id, __u64 caller, __u64 now)
{
	struct cp_alloc_key key = { .pid = tgid, .ptr = ptr };
	struct cp_alloc_info info = {
		.bytes = bytes, .stack_id = stack_id, .caller = caller, .time_ns = now, .kind = kind,
		.api = api,
	};
	struct cp_mem_stat *mem = mem_row(tgid);
	__u64 live;

	if (!mem)
		return;
	__sync_fetch_and_add(&mem->allocations, 1);
	if (bpf_map_update_elem(&live_allocs, &key, &info, BPF_ANY)) {
		count(CP_CNT_LIVE_ALLOCS_FULL);
		return; /* not tracked: its free will count as unknown */
	}
	if (kind == CP_MEM_HOST) {
		__sync_fetch_and_add(&mem->host_live_bytes, bytes);
		return;
	}
	__sync_fetch_and_add(&mem->live_allocations, 1);
	live = __sync_fetch_and_add(&mem->live_bytes, bytes) + bytes;
	if (live > mem->peak_bytes)
		mem->peak_bytes = live; /* a racing update may keep the smaller: harmless */
}

/* A free leaves the live set; a pointer never seen allocated is counted apart. */
static __always_inline void track_free(__u32 tgid, __u64 ptr)
{
	struct cp_alloc_key key = { .pid = tgid, .ptr = ptr };
	struct cp_mem_stat *mem;
	struct cp_alloc_info *info;

	if (!ptr)
		return;
	mem = mem_row(tgid);
	if (!mem)
		return;
	__sync_fetch_and_add(&mem->frees, 1);
	info = bpf_map_lookup_elem(&live_allocs, &key);
	if (!info) {
		__sync_fetch_and_add(&mem->unknown_frees, 1);
		return;
	}
	if (info->kind == CP_MEM_HOST) {
		__sync_fetch_and_sub(&mem->host_live_bytes, info->bytes);
	} else {
		__sync_fetch_and_sub(&mem->live_bytes, info->bytes);
		__sync_fetch_and_sub(&mem->live_allocations, 1);
	}
	bpf_map_delete_elem(&live_allocs, &key);
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, int result)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct cp_alloc_event *event;
	struct pending_call call;
	__u64 now, pitch = 0, ptr = 0, bytes, stream = 0;
	__u32 kind;

	if (!traced(pid_tgid >> 32))
		return 0;
	returned(pid_tgid, result);
	if (!take_call(pid_tgid, &call))
		return 0;
	now = bpf_ktime_get_ns();
	kind = alloc_kind(call.api);
	if (call.api == CP_API_cuMemAllocPitch_v2) {
		if (result == 0)
			bpf_probe_read_user(&pitch, sizeof(pitch), (void *)call.arg2);
		bytes = pitch * call.arg4;
	} else {
		bytes = call.arg2;
		if (kind == CP_MEM_DEVICE_ASYNC)
			stream = call.arg3;
	}
	if (result == 0 && bpf_probe_read_user(&ptr, sizeof(ptr), (void *)call.out_ptr))
		ptr = 0;
	if (aggregate && result == 0 && ptr)
		track_alloc(pid_tgid >> 32, ptr, bytes, kind, call.api, call.stack_id, call.caller, now);
	if (!stream_events)
		return 0;
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_ALLOC, call.api, pid_tgid, now);
	event->kind = kind;
	event->result = result;
	event->ptr = ptr;
	event->bytes = bytes;
	event->stream = stream;
	submit(event, now, false);
	return 0;
}

/* cuMemFree_v2(dptr), cuMemFreeAsync(dptr, stream), cuMemFreeHost(void *p) */
SEC("uprobe")
int BPF_KPROBE(free_entry, __u64 ptr, __u64 stream)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 api = COOKIE_API(bpf_get_attach_cookie(ctx));
	struct cp_free_event *event;
	__u64 now;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(api);
	now = bpf_ktime_get_ns();
	entered(pid_tgid, api, now);
	if (aggregate)
		track_free(pid_tgid >> 32, ptr);
	if (!stream_events)
		return 0;
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_FREE, api, pid_tgid, now);
	event->ptr = ptr;
	event->pad = 0;
	event->stream = 0;
	if (api == CP_API_cuMemFreeHost) {
		event->kind = CP_MEM_HOST;
	} else if (api == CP_API_cuMemFreeAsync || api == CP_API_cuMemFreeAsync_ptsz) {
		event->kind = CP_MEM_DEVICE_ASYNC;
		event->stream = stream;
	} else {
		event->kind = CP_MEM_DEVICE;
	}
	submit(event, now, false);
	return 0;
}

/* Every copy here is (dst, src, bytes[, stream]); the cookie says which one it is. */
SEC("uprobe")
int BPF_KPROBE(copy_entry, __u64 dst, __u64 src, __u64 bytes, __u64 stream)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 api = COOKIE_API(cookie);
	struct cp_copy_event *event;
	__u64 now;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(api);
	now = bpf_ktime_get_ns();
	entered(pid_tgid, api, now);
	if (!stream_events)
		return 0;
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_COPY, api, pid_tgid, now);
	event->dst = dst;
	event->src = src;
	event->bytes = bytes;
	event->direction = COOKIE_DIR(cookie);
	event->async = COOKIE_ASYNC(cookie);
	event->stream = event->async ? stream : 0;
	submit(event, now, false);
	return 0;
}

/* cuCtxSynchronize(void), cuStreamSynchronize(stream), cuEventSynchronize(event) */
SEC("uprobe")
int BPF_KPROBE(sync_entry, __u64 handle)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 api = COOKIE_API(bpf_get_attach_cookie(ctx));
	struct cp_sync_event *event;
	__u64 now;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(api);
	now = bpf_ktime_get_ns();
	entered(pid_tgid, api, now);
	if (!stream_events)
		return 0;
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_SYNC, api, pid_tgid, now);
	event->pad = 0;
	if (api == CP_API_cuCtxSynchronize) {
		event->kind = CP_SYNC_CONTEXT;
		event->handle = 0;
	} else {
		event->kind = api == CP_API_cuEventSynchronize ? CP_SYNC_EVENT : CP_SYNC_STREAM;
		event->handle = handle;
	}
	submit(event, now, false);
	return 0;
}

/*
 * cuModuleGetFunction(CUfunction *out, CUmodule, const char *name),
 * cuLibraryGetKernel(CUkernel *out, CUlibrary, const char *name),
 * cuKernelGetFunction(CUfunction *out, CUkernel kernel).
 * Names are streamed in every mode: they are rare, and stats need them too.
 */
SEC("uprobe")
int BPF_KPROBE(name_entry, __u64 out_ptr, __u64 arg2, __u64 name_ptr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 api = COOKIE_API(bpf_get_attach_cookie(ctx));

	if (!traced(pid_tgid >> 32))
		return 0;
	count(api);
	entered(pid_tgid, api, bpf_ktime_get_ns());
	remember_call(pid_tgid, api, out_ptr, arg2, name_ptr, 0, -1, 0);
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
	returned(pid_tgid, result);
	if (!take_call(pid_tgid, &call))
		return 0;
	now = bpf_ktime_get_ns();
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_NAME, call.api, pid_tgid, now);
	event->result = result;
	event->handle = 0;
	event->alias_of = 0;
	event->name[0] = '\0';
	if (result == 0)
		bpf_probe_read_user(&event->handle, sizeof(event->handle), (void *)call.out_ptr);
	if (call.api == CP_API_cuKernelGetFunction) {
		event->alias_of = call.arg2;
	} else {
		len = bpf_probe_read_user_str(event->name, sizeof(event->name), (void *)call.arg3);
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
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct cp_proc_event *event;
	__u64 now;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(CP_API_cuInit);
	if (!filter_by_pid) {
		__u32 tgid = pid_tgid >> 32;
		__u8 one = 1;

		if (bpf_map_update_elem(&target_pids, &tgid, &one, BPF_ANY))
			count(CP_CNT_TARGETS_OVERFLOW);
	}
	now = bpf_ktime_get_ns();
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	__builtin_memset(event, 0, sizeof(*event));
	fill_header(&event->hdr, CP_EV_PROC, CP_API_cuInit, pid_tgid, now);
	event->kind = CP_PROC_CUDA_INIT;
	submit(event, now, true);
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
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct stub_location where = { .file_offset = stub };
	struct stub_location caller_where = {};
	struct cp_rt_launch_event *event;
	__u64 caller = 0;
	bool fault = false;
	__u64 now;

	if (!traced(pid_tgid >> 32))
		return 0;
	count(CP_API_cudaLaunchKernel);
	now = bpf_ktime_get_ns();
	entered(pid_tgid, CP_API_cudaLaunchKernel, now);
	event = reserve(sizeof(*event));
	if (!event)
		return 0;
	fill_header(&event->hdr, CP_EV_RT_LAUNCH, CP_API_cudaLaunchKernel, pid_tgid, now);
	event->stub = stub;
	event->grid[0] = (__u32)grid_xy;
	event->grid[1] = grid_xy >> 32;
	event->grid[2] = (__u32)grid_z;
	event->block[0] = (__u32)block_xy;
	event->block[1] = block_xy >> 32;
	event->block[2] = (__u32)block_z;
	event->shared_mem_bytes = stack_arg(ctx, 1, &fault);
	event->stream = stack_arg(ctx, 2, &fault);
	event->flags = fault ? CP_RT_STACK_FAULT : 0;
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
	submit(event, now, false);
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
	event = reserve(sizeof(*event));
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
	count(CP_API_sched_process_exit);
	now = bpf_ktime_get_ns();
	event = reserve(sizeof(*event));
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
