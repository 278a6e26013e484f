#!/bin/bash
# Device programs on a machine with a GPU, a first smoke (issue 21): an entry
# and an exit counter (tests/gpu/device_count.bpf.c) on vec_add must count
# exactly grid x block threads per launch, through each way a kernel gets
# to the GPU:
#   vec_add          the CUDA runtime (static cudart 13: a fatbin with sm_90
#                    SASS and compute_90 PTX, loaded by cuLibraryLoadData,
#                    launched by cuLaunchKernel through cuGetProcAddress)
#   drv_launch       the driver API: PTX (gpu/vec_add_ptx.h) by cuModuleLoadData
#   drv_launch --library   the same PTX by cuLibraryLoadData, CUkernel launches
#   drv_launch --ex        launched by cuLaunchKernelEx
# and each run must exit 0 with "1 kernel instrumented" (no refusal line).
#
# Needs a static cuprobe, the workloads and the counter compiled to .bpf.o in
# BUNDLE (default gpu-bundle/ of this checkout; tests/gpu/README.md says how):
#   BUNDLE/bin/{cuprobe,vec_add,drv_launch}, BUNDLE/examples/device_count.bpf.o
# Writes results-device-smoke.md to OUT (default /tmp/cuprobe-device-smoke),
# prints the table last, exits 1 when a check fails.
set -u
. "$(dirname "$0")/common.sh" device-smoke
iterations=${ITERATIONS:-20}
elements=${ELEMENTS:-1000}  # not a multiple of the block: threads past n still enter and exit
program=$bundle/examples/device_count.bpf.o

nvidia-smi -L | head -1
run_case() { # NAME COMMAND...: cuprobe run with the counters, JSON in $work/NAME.json
	local name=$1
	shift
	echo "== $name: $*"
	"$cuprobe" run "$program" --json -o "$work/$name.json" -- "$@" \
		> "$work/$name.out" 2> "$work/$name.err"
	echo $? > "$work/$name.status"
	cat "$work/$name.out" "$work/$name.err"
}

run_case runtime "$bundle/bin/vec_add" "$iterations" "$elements"
run_case driver_ptx "$bundle/bin/drv_launch" "$iterations" --elements "$elements"
run_case driver_library "$bundle/bin/drv_launch" "$iterations" --elements "$elements" --library
run_case driver_ex "$bundle/bin/drv_launch" "$iterations" --elements "$elements" --ex

python3 - "$work" "$out" "$iterations" "$elements" <<'PY'
import json, sys
from checks import finish, row
work, out, iterations, elements = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
block = 256
threads = iterations * ((elements + block - 1) // block) * block

def final(name, map_name):
    try:
        maps = [json.loads(l) for l in open(f"{work}/{name}.json") if l.startswith("{")]
    except OSError:
        return None
    found = [m for m in maps if m.get("type") == "map" and m.get("map") == map_name]
    return sum(e["value"] for e in found[-1]["entries"]) if found else None

for name, what in (("runtime", "vec_add (cudart, fatbin)"), ("driver_ptx", "drv_launch (PTX, cuModuleLoadData)"),
                   ("driver_library", "drv_launch --library (cuLibraryLoadData)"),
                   ("driver_ex", "drv_launch --ex (cuLaunchKernelEx)")):
    status = open(f"{work}/{name}.status").read().strip()
    err = open(f"{work}/{name}.err").read()
    instrumented = "1 kernel instrumented" in err
    row(f"{what}: exit status, kernels instrumented", f"{status}, {'1' if instrumented else 'none'}",
        "0, 1", status == "0" and instrumented)
    for map_name in ("entries", "exits"):
        got = final(name, map_name)
        row(f"{what}: {map_name} counted", f"{got}", f"{threads} ({iterations} x grid x {block})",
            got == threads)
finish(f"{out}/results-device-smoke.md", "Device programs: a first smoke on the GPU",
       "An entry and an exit counter on vec_add, per way a kernel reaches the GPU; "
       f"{iterations} launches of {elements} elements, blocks of {block}.")
PY
