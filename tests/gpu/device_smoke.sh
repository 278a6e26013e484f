#!/bin/bash
# Device programs on a machine with a GPU, a first smoke (issue 21): counters
# at the entry and before the exits of vec_add must count exactly grid x
# block threads per launch, through each way a kernel gets to the GPU:
#   vec_add          the CUDA runtime (static cudart 13: a fatbin with sm_90
#                    SASS and compute_90 PTX; cudart loads the sm_90 cubin
#                    with cuLibraryLoadData, resolved through cuGetProcAddress,
#                    and cuprobe rewrites the PTX of the fatbin it came from)
#                    with the example bpf/examples/gpu_threads.bpf.c (threads
#                    entered) and with tests/gpu/device_count.bpf.c (entries
#                    and exits)
#   drv_launch       the driver API: PTX (gpu/vec_add_ptx.h) by cuModuleLoadData
#   drv_launch --library   the same PTX by cuLibraryLoadData, CUkernel launches
#   drv_launch --ex        launched by cuLaunchKernelEx
# and each run must exit 0 with "1 kernel instrumented" (no refusal line).
# For vec_add the table also says what cudart handed cuLibraryLoadData: the
# static cudart nvcc links hands the fatbin itself (seen on the H200 with
# CUDA 13: "a fatbin"); a cudart that hands the cubin it picked (PyTorch's)
# is traced to its fatbin ("by address": nvcc stores the cubin uncompressed).
#
# Needs a static cuprobe, the workloads and the programs compiled to .bpf.o
# in BUNDLE (default gpu-bundle/ of this checkout; tests/gpu/README.md says
# how): BUNDLE/bin/{cuprobe,vec_add,drv_launch},
# BUNDLE/examples/{device_count,device_graph,gpu_threads}.bpf.o, BUNDLE/bin/{graph_replay,two_contexts}
# Writes results-device-smoke-h200.md to OUT (default /tmp/cuprobe-device-smoke),
# prints the table last, exits 1 when a check fails.
set -u
. "$(dirname "$0")/common.sh" device-smoke
iterations=${ITERATIONS:-20}
elements=${ELEMENTS:-1000}  # not a multiple of the block: threads past n still enter and exit
counters=$bundle/examples/device_count.bpf.o
threads=$bundle/examples/gpu_threads.bpf.o

nvidia-smi -L | head -1
run_case() { # NAME PROGRAM COMMAND...: cuprobe run -v, JSON in $work/NAME.json
	local name=$1 program=$2
	shift 2
	echo "== $name: $(basename "$program") -- $*"
	"$cuprobe" run "$program" -v --json -o "$work/$name.json" -- "$@" \
		> "$work/$name.out" 2> "$work/$name.err"
	echo $? > "$work/$name.status"
	cat "$work/$name.out" "$work/$name.err"
}

run_case runtime_threads "$threads" "$bundle/bin/vec_add" "$iterations" "$elements"
run_case runtime "$counters" "$bundle/bin/vec_add" "$iterations" "$elements"
run_case driver_ptx "$counters" "$bundle/bin/drv_launch" "$iterations" --elements "$elements"
run_case driver_library "$counters" "$bundle/bin/drv_launch" "$iterations" --elements "$elements" --library
run_case driver_ex "$counters" "$bundle/bin/drv_launch" "$iterations" --elements "$elements" --ex
# A captured graph replayed: its kernels' launches are not seen (cuGraphLaunch), their adds drain at the syncs.
replays=${REPLAYS:-50}
run_case graph "$bundle/examples/device_graph.bpf.o" "$bundle/bin/graph_replay" "$replays" 4
# Two threads, two contexts (one created, one the primary): each context's modules drained in it.
run_case two_contexts "$threads" "$bundle/bin/two_contexts" "$iterations"

python3 - "$work" "$out" "$iterations" "$elements" "$replays" <<'PY'
import json, re, sys
from checks import finish, row
work, out, iterations, elements = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
replays = int(sys.argv[5])
block = 256
threads = iterations * ((elements + block - 1) // block) * block

def records(name):
    try:
        return [json.loads(l) for l in open(f"{work}/{name}.json") if l.startswith("{")]
    except (OSError, ValueError):
        return []

def final(name, map_name):
    found = [m for m in records(name) if m.get("type") == "map" and m.get("map") == map_name]
    return sum(e["value"] for e in found[-1]["entries"]) if found else None

cases = (("runtime_threads", "vec_add, gpu_threads.bpf.c (cudart)", ("threads_entered",)),
         ("runtime", "vec_add, device_count.bpf.c (cudart)", ("entries", "exits")),
         ("driver_ptx", "drv_launch (PTX, cuModuleLoadData)", ("entries", "exits")),
         ("driver_library", "drv_launch --library (cuLibraryLoadData)", ("entries", "exits")),
         ("driver_ex", "drv_launch --ex (cuLaunchKernelEx)", ("entries", "exits")),
         ("graph", f"graph_replay {replays} 4 (a captured graph of 4 kernels, replayed)", ("entries", "exits")),
         ("two_contexts", f"two_contexts {iterations} (two threads, a created and the primary context), "
          "gpu_threads.bpf.c", ("threads_entered",)))
for name, what, maps in cases:
    status = open(f"{work}/{name}.status").read().strip()
    err = open(f"{work}/{name}.err").read()
    instrumented = "1 kernel instrumented" in err
    refusals = [l for l in err.splitlines() if "not instrumentable" in l or "matched no kernel" in l
                or "never loaded" in l]
    row(f"{what}: exit status, kernels instrumented, refusals",
        f"{status}, {'1' if instrumented else 'none'}, {len(refusals)}", "0, 1, 0",
        status == "0" and instrumented and not refusals)
    for map_name in maps:
        got = final(name, map_name)
        if name == "two_contexts":
            # ITERATIONS launches in each context of 1024 elements in blocks of 256.
            expected = 2 * iterations * 1024
            row(f"{what}: {map_name} counted", f"{got}", f"{expected} (2 x {iterations} launches x 1024)",
                got == expected)
            continue
        if name == "graph":
            # One direct launch, then the replays; 4096 elements in blocks of 256.
            expected = (1 + replays * 4) * 4096
            row(f"{what}: {map_name} counted", f"{got}", f"{expected} ((1 + {replays} x 4) launches x 4096)",
                got == expected)
            continue
        row(f"{what}: {map_name} counted", f"{got}", f"{threads} ({iterations} x grid x {block})",
            got == threads)
    if name.startswith("runtime"):
        details = [r.get("detail", "") for r in records(name)
                   if r.get("type") == "device" and r.get("event") == "instrumented"]
        ways = sorted({m.group(1) for d in details for m in [re.search(r", (by [a-z ]+)\)$", d)] if m})
        apis = sorted({r.get("api") for r in records(name) if r.get("type") == "device"
                       and r.get("event") == "instrumented"})
        row(f"{what}: entry point, cubin traced to its fatbin",
            f"{'/'.join(apis) or 'none'}, {'/'.join(ways) or 'a fatbin'}",
            "cuLibraryLoadData, a fatbin or by address",
            apis == ["cuLibraryLoadData"] and ways in ([], ["by address"]))
finish(f"{out}/results-device-smoke-h200.md", "Device programs: a first smoke on the GPU",
       "Counters at the entry and exits of vec_add, per way a kernel reaches the GPU; "
       f"{iterations} launches of {elements} elements, blocks of {block}; and of a graph's kernels, "
       f"{replays} replays of 4.")
PY
