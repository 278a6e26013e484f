// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuprobe_events.h"
#include "device/gpu_ring.h"
#include "warnings.h"

#define COUNTER(field) offsetof(struct cp_counters, field)
#define NO_COUNTER SIZE_MAX

/*
 * Every counter of a loss, in the order they are said. A line says one
 * counter, or two that belong together (second); a warning is a count of
 * what was lost, the others say what was left out on purpose.
 */
static const struct counter_line {
	size_t counter;
	size_t second;
	bool warning;
	const char *text;       /* printf: %llu for the counter (and the second) */
} counter_lines[] = {
	{ COUNTER(records_lost), NO_COUNTER, true,
	  "%llu records were lost to a full ring buffer; try --ring-size" },
	{ COUNTER(pending_overflow), COUNTER(pending_missed), true,
	  "%llu allocation/name calls lost their return state, %llu returns unmatched" },
	{ COUNTER(targets_overflow), NO_COUNTER, true, "%llu processes did not fit in the traced set" },
	{ COUNTER(hold_failed), NO_COUNTER, true,
	  "%llu processes mapping a new driver file could not be held" },
	{ COUNTER(kernel_stats_full), NO_COUNTER, true,
	  "%llu launches of kernels that did not fit in the kernel map" },
	{ COUNTER(api_stats_full), NO_COUNTER, true, "%llu calls that did not fit in the API map" },
	{ COUNTER(mem_stats_full), NO_COUNTER, true,
	  "%llu memory updates for processes that did not fit in the memory map" },
	{ COUNTER(device_stats_full), NO_COUNTER, true,
	  "%llu per-GPU memory or copy updates that did not fit in their maps" },
	{ COUNTER(live_allocs_full), NO_COUNTER, true,
	  "%llu allocations not tracked (live allocation map full): live bytes undercount" },
	{ COUNTER(vmm_full), NO_COUNTER, true, "%llu VMM handles or mappings not tracked (maps full)" },
	{ COUNTER(vmm_unknown), NO_COUNTER, false,
	  "%llu VMM releases/unmaps of handles made before tracing began (not counted)" },
	{ COUNTER(stacks_lost), NO_COUNTER, true, "%llu allocation stacks not captured" },
	{ COUNTER(call_start_full), NO_COUNTER, true, "%llu calls not timed (start map full)" },
	{ COUNTER(nccl_too_deep), NO_COUNTER, true,
	  "%llu NCCL calls nested deeper than a thread's stack of calls (not recorded)" },
	{ COUNTER(nccl_unmatched), NO_COUNTER, true,
	  "%llu NCCL calls whose entry or return was not seen (not recorded)" },
	{ COUNTER(nccl_comms_full), NO_COUNTER, true,
	  "%llu NCCL communicators not kept (map full): their rank and size unknown" },
	{ COUNTER(nccl_stats_full), NO_COUNTER, true,
	  "%llu NCCL calls that did not fit in the NCCL map" },
	/* --python */
	{ COUNTER(py_truncated), NO_COUNTER, false,
	  "%llu Python stacks deeper than 64 frames: the innermost 64 kept" },
	{ COUNTER(py_unreadable), NO_COUNTER, true,
	  "%llu Python stacks stopped at memory that could not be read" },
	{ COUNTER(py_stacks_lost), NO_COUNTER, true,
	  "%llu calls without their Python stack: its frames did not fit in the ring buffer" },
	{ COUNTER(py_collisions), NO_COUNTER, true,
	  "%llu calls without their Python stack: another stack had its id" },
	{ COUNTER(py_busy), NO_COUNTER, true,
	  "%llu calls without their Python stack: a walk preempted on their CPU held the scratch" },
};

static unsigned long long counter_at(const struct cp_counters *counters, size_t offset)
{
	uint64_t value;

	memcpy(&value, (const char *)counters + offset, sizeof(value));
	return value;
}

int cp_warnings__print(FILE *out, const struct cp_counters *counters,
		       const struct cp_agent_stats *agent)
{
	size_t i;
	int lines = 0;

	for (i = 0; counters && i < sizeof(counter_lines) / sizeof(counter_lines[0]); i++) {
		const struct counter_line *l = &counter_lines[i];
		unsigned long long value = counter_at(counters, l->counter);
		unsigned long long second = l->second == NO_COUNTER ? 0 : counter_at(counters, l->second);

		if (!value && !second)
			continue;
		fprintf(out, "cuprobe: %s", l->warning ? "warning: " : "");
		fprintf(out, l->text, value, second);
		fputc('\n', out);
		lines++;
	}
	if (agent && agent->malformed) {
		fprintf(out, "cuprobe: warning: %llu malformed records dropped\n",
			(unsigned long long)agent->malformed);
		lines++;
	}
	if (agent && agent->thread_error) {
		fprintf(out, "cuprobe: warning: the agent stopped on an error: %s\n",
			strerror(-agent->thread_error));
		lines++;
	}
	return lines;
}

int cp_warnings__device_ring(FILE *out, const char *ring, uint32_t capacity,
			     const struct cp_gpu_ring_counts *c)
{
	int lines = 1;

	fprintf(out, "cuprobe: device ring %s: %llu records produced, %llu delivered, %llu lost, %llu abandoned\n",
		ring, (unsigned long long)c->produced, (unsigned long long)c->delivered,
		(unsigned long long)c->lost, (unsigned long long)c->abandoned);
	if (c->lost) {
		/* On the GPU the slots are split in segments (cuprobe_events.h), each of which fills alone. */
		fprintf(out, "cuprobe: warning: %llu records of device ring %s lost to a full ring (%u slots; on the GPU %u segment(s) of %u, moved at syncs that leave no kernel running): give it more slots, sync more often, or print less\n",
			(unsigned long long)c->lost, ring, capacity, CUPROBE_GPU_RING_SEGMENTS(capacity),
			CUPROBE_GPU_RING_SEGMENT_SLOTS(capacity));
		lines++;
	}
	if (c->abandoned) {
		fprintf(out, "cuprobe: warning: %llu records of device ring %s abandoned: slots reserved by a process that ended before it wrote them\n",
			(unsigned long long)c->abandoned, ring);
		lines++;
	}
	if (c->pending) {
		fprintf(out, "cuprobe: warning: %llu records of device ring %s reserved and never written\n",
			(unsigned long long)c->pending, ring);
		lines++;
	}
	return lines;
}
