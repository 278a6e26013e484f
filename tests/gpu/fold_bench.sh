#!/bin/bash
# What a device counter costs in each memory design a map could use, on a
# machine with a GPU (gpu/fold_bench.cu says what each variant is): a red
# per warp into host memory mapped to the GPU (device maps before their
# shadows), and device-memory shadows folded into the host word once per
# launch, by the launch's last warp (completion counted per warp, or per
# block in groups, as built, or with one counter) or by a one-warp kernel
# after each launch. Hand-written CUDA, not the translator:
# the numbers choose a design for device programs' maps
# (docs/device-programs.md).
#
# Needs BUNDLE/bin/fold_bench (tests/gpu/README.md). SIZES (default
# "65536 1048576 16777216"): vec_add's elements. Writes
# results-fold-h200.md to OUT (default /tmp/cuprobe-fold), prints the table
# last, exits 1 when a folding variant is not exact.
set -u
. "$(dirname "$0")/common.sh" fold
sizes=${SIZES:-65536 1048576 16777216}

nvidia-smi -L | head -1
# shellcheck disable=SC2086 # the sizes are words
"$bundle/bin/fold_bench" $sizes > "$work/bench.txt" 2> "$work/bench.err"
status=$?
cat "$work/bench.txt" "$work/bench.err"
python3 - "$work" "$out" "$status" <<'PY'
import re, sys
from checks import finish, row

work, out, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
what = {
    "host": "a red per warp into host memory mapped to the GPU (device maps before the shadows)",
    "device": "a red per warp into one word of device memory (not folded)",
    "replicas": "a red per warp into 128 device words by SM (not folded: the floor)",
    "warp_done": "replicas, completion counted per warp in 512 groups, folded by the last warp",
    "block_done": "replicas, completion counted per block in shared memory, blocks in 512 groups, folded by the last warp (the design built)",
    "block_one_counter": "replicas, completion counted per block in shared memory, one counter for all blocks, folded by the last warp",
    "fold_kernel": "replicas, folded by a one-warp kernel after each launch",
}
lines = [dict(re.findall(r"(\w+)=(\S+)", l)) for l in open(f"{work}/bench.txt")
         if l.startswith("fold_bench: elements=")]
row("fold_bench: exit status, results", f"{status}, {len(lines)}", "0, 8 per size",
    status == 0 and lines and len(lines) % 8 == 0)
for l in lines:
    if l["variant"] == "plain":
        row(f"vec_add of {l['elements']} elements: the kernel alone, per launch",
            f"{int(l['per_launch_ns']) / 1000:.1f} us", "median of 5 rounds", None)
        continue
    exact = l["exact"]
    row(f"vec_add of {l['elements']} elements: {what[l['variant']]}: ratio to the kernel alone; "
        f"count exact", f"{float(l['ratio']):.3f}x; {exact}",
        "information; exact: yes where it folds", exact != "no" if exact != "n/a" else None)
finish(f"{out}/results-fold-h200.md", "What a device counter costs, by memory design",
       "tests/gpu/fold_bench.sh on a machine with a GPU: gpu/fold_bench.cu, vec_add in blocks of "
       "256 with one counter add per warp (the translator's aggregation), in each design; GPU "
       "time by CUDA events, the median of 5 interleaved rounds.")
PY
