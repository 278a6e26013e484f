// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The device-program smoke's counters for kernels launched from a CUDA graph
 * (tests/gpu/device_smoke.sh, gpu/graph_replay.cu): device_count.bpf.c's
 * entry and exit counts, for graph_step_kernel, whose launches cuprobe never
 * sees (cuGraphLaunch replays them), so each replay of a graph of K kernels
 * adds K x grid x block to both.
 */
#define COUNTED_KERNELS "graph_step*"
#include "device_count.bpf.c"
