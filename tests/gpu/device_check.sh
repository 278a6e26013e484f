#!/bin/bash
# Device programs on a machine with a GPU, the acceptance (issue 22): exact,
# what they reach, what they cost, what loading them costs. Under 200 s.
#
#  1. Exact (gpu/kernel_timing exact, tests/gpu/device_exact.bpf.c): entry
#     and exit counts equal grid x block per launch for vec_add_kernel (1D)
#     and add_2d_kernel (2D, threads outside the matrix returning early); and
#     every block's globaltimer span (its leader's entry to its last exit,
#     the last launch's, kept per block in a map) lies inside the kernel:
#     after a globaltimer stamp taken by a one-thread kernel just before it on
#     the stream and before one just after it (the GPU's own clock, so no
#     conversion between clocks), and no longer than the kernel's time by
#     the CUDA events around it. CUPTI is not used: its kernel records are
#     in CUPTI's timestamp base, not the globaltimer's, and converting the
#     two clocks would add an error as large as the spans themselves.
#  2. Coverage, by name, with counts (kernels seen: reported instrumented,
#     no PTX or refused; instrumented):
#     - a CUDA C++ program, runtime API (vec_add, static cudart);
#     - a driver-API module loaded from PTX (drv_launch, cuModuleLoadData);
#     - a CuPy RawKernel compiled to PTX (gpu/cupy_rawkernel.py), when CuPy
#       is installed: else "not run: cupy not installed" (neither a pass
#       nor a failure);
#     - PyTorch and Triton kernels in one process (gpu/device_coverage.py,
#       a program on every kernel, tests/gpu/device_coverage.bpf.c):
#       cubins without PTX, expected listed and not instrumented.
#  3. Overhead, side by side in one run (gpu/kernel_timing overhead,
#     tests/gpu/device_overhead.bpf.c): the same vec_add under several
#     names, launched interleaved, each timed by CUDA events on the GPU;
#     per round the median of each, its ratio to the uninstrumented
#     vec_add_plain of the same module and run, the median over rounds:
#     an empty entry probe, a globaltimer read, a counter (aggregated per
#     warp), one ring record per warp (a ring that holds a round's records
#     until its sync moves them), the same into a ring too small (each
#     record counted lost on the GPU); and with a sync after each launch
#     (kernel_timing syncs, timed by events too): the counter's drain per
#     sync, and one ring record per warp with every record moved to the
#     ring's map at its sync. A round's launches are queued behind a gate
#     kernel the host opens once they all are, so that the events time the
#     kernels, not the host's launch path. Also the same kernels
#     without cuprobe (nvcc's SASS; under cuprobe the whole module is JIT
#     compiled from its PTX). Beside the published anchors and the goals.
#  4. Attach cost: module load time (gpu/kernel_timing load: cuModuleLoadData
#     and cuLibraryLoadData with every function fetched) of kernel_timing's
#     fatbin (sm_90 SASS + PTX) and of its PTX alone, with and without
#     `cuprobe run` (CUDA_MODULE_LOADING=EAGER, CUDA_CACHE_DISABLE=1: every
#     load compiled, none from the JIT cache).
#
# Needs the static cuprobe, the workloads and the programs compiled to .bpf.o
# in BUNDLE (default gpu-bundle/ of this checkout; tests/gpu/README.md):
# BUNDLE/bin/{cuprobe,vec_add,drv_launch,kernel_timing},
# BUNDLE/share/kernel_timing{,-ptx}.fatbin,
# BUNDLE/examples/{device_exact,device_overhead,device_coverage,device_count}.bpf.o;
# python3 with torch (and Triton) for step 2. Writes results-device-h200.md
# to OUT (default /tmp/cuprobe-device-check), prints the table last, exits 1
# when a check fails.
set -u
. "$(dirname "$0")/common.sh" device-check
started=$(date +%s)
rounds=${ROUNDS:-5}                        # more than 3: runs of one binary differ by 0.1-0.3x in the ring
launches=${LAUNCHES:-20}                   # of each variant, per round
sizes=${SIZES:-1048576}                    # vec_add elements, overhead runs
sync_launches=${SYNC_LAUNCHES:-200}        # launch + sync pairs per variant and round
ring_sync_launches=${RING_SYNC_LAUNCHES:-40} # the same with the ring (32,768 records a launch at 1M)
exact_launches=${EXACT_LAUNCHES:-10}
exact_elements=${EXACT_ELEMENTS:-100000}   # 391 blocks of 256, the last one partial
exact_width=${EXACT_WIDTH:-500}            # 32 x 26 blocks of 16 x 8, partial at both edges
exact_height=${EXACT_HEIGHT:-203}
coverage_iterations=${COVERAGE_ITERATIONS:-20}
coverage_elements=${COVERAGE_ELEMENTS:-1000}
load_repeats=${LOAD_REPEATS:-3}
python_timeout=${PYTHON_TIMEOUT:-90}       # the PyTorch/Triton run, seconds
examples=$bundle/examples
timing=$bundle/bin/kernel_timing

nvidia-smi -L | head -1
run_case() { # NAME PROGRAM COMMAND...: cuprobe run -v --json, status and output in $work/NAME.*
	local name=$1 program=$2
	shift 2
	echo "== $name: $(basename "$program") -- $*"
	"$cuprobe" run "$program" -v --json --max-entries 0 -o "$work/$name.json" -- "$@" \
		> "$work/$name.out" 2> "$work/$name.err"
	echo $? > "$work/$name.status"
	tail -n 5 "$work/$name.out" "$work/$name.err"
}
plain_case() { # NAME COMMAND...: the same without cuprobe
	local name=$1
	shift
	echo "== $name (no cuprobe): $*"
	"$@" > "$work/$name.out" 2> "$work/$name.err"
	echo $? > "$work/$name.status"
	tail -n 5 "$work/$name.out" "$work/$name.err"
}

# 1. Exact.
run_case exact "$examples/device_exact.bpf.o" \
	"$timing" exact "$exact_launches" "$exact_elements" "$exact_width" "$exact_height"

# 2. Coverage.
run_case runtime "$examples/device_count.bpf.o" "$bundle/bin/vec_add" "$coverage_iterations" "$coverage_elements"
run_case driver_ptx "$examples/device_count.bpf.o" \
	"$bundle/bin/drv_launch" "$coverage_iterations" --elements "$coverage_elements"
# The device ring, exact: one record per warp of vec_add (blocks of 256: 8 warps a block).
run_case ring "$examples/gpu_warp_exits.bpf.o" "$bundle/bin/vec_add" "$coverage_iterations" "$coverage_elements"
installed() { # MODULE: found by Python, without importing it (importing torch takes seconds)
	python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"
}
if installed cupy; then
	run_case cupy "$examples/device_count.bpf.o" python3 "$here/gpu/cupy_rawkernel.py" \
		--iterations "$coverage_iterations" --elements "$coverage_elements"
fi
if installed torch; then
	python_started=$(date +%s.%N)
	# timeout stops Python (SIGINT, KILL 10 s later) should the search for PTX take too long.
	run_case python "$examples/device_coverage.bpf.o" timeout -k 10 -s INT "$python_timeout" \
		python3 "$here/gpu/device_coverage.py" --iterations "$coverage_iterations"
	echo "$python_started $(date +%s.%N)" > "$work/python.seconds"
fi

# 3. Overhead: one run per size with every probe, one without cuprobe.
variants=(plain empty timer counter ring ring_full)
for size in $sizes; do
	run_case "overhead.$size" "$examples/device_overhead.bpf.o" \
		"$timing" overhead "$rounds" "$launches" "$size" "${variants[@]}"
	plain_case "overhead_plain.$size" "$timing" overhead "$rounds" "$launches" "$size" "${variants[@]}"
	# A launch and its synchronization: the counter's kernels drain at every sync.
	run_case "syncs.$size" "$examples/device_overhead.bpf.o" \
		"$timing" syncs "$rounds" "$sync_launches" "$size" plain counter
	# One ring record per warp, each launch's records moved to the map at its sync.
	run_case "ring_syncs.$size" "$examples/device_overhead.bpf.o" \
		"$timing" syncs "$rounds" "$ring_sync_launches" "$size" plain ring
done

# 4. Attach cost, the runs with and without probes alternated.
for image in kernel_timing kernel_timing-ptx; do
	export CUDA_MODULE_LOADING=EAGER CUDA_CACHE_DISABLE=1
	plain_case "load_plain.$image" "$timing" load "$bundle/share/$image.fatbin" "$load_repeats"
	run_case "load_probes.$image" "$examples/device_overhead.bpf.o" \
		"$timing" load "$bundle/share/$image.fatbin" "$load_repeats"
	unset CUDA_MODULE_LOADING CUDA_CACHE_DISABLE
done

echo "$started $(date +%s)" > "$work/total.seconds"
python3 "$here/tests/gpu/device_check.py" "$work" "$out" "$sizes" "$rounds" "$launches" "$coverage_elements"
