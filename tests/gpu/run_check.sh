#!/bin/bash
# cuprobe run on a machine with a GPU: every example of bpf/examples/ run
# system-wide, all at once, beside a system-wide `cuprobe stats`, while a
# PyTorch training loop runs; then the examples' numbers against stats':
#   launch_dims      per kernel, launches == stats' launches of that kernel
#   stream_launches  launches summed over streams and seconds == stats' launches
#   slow_syncs       (--set min_us=0) records per API == stats' calls of that API
#   alloc_sizes      device allocations (every non-host kind) == stats' allocations
#   copy_sizes       copies == stats' cuMemcpy* calls of the process
#
# Needs a static cuprobe and the examples compiled to .bpf.o in BUNDLE
# (default gpu-bundle/ of this checkout; tests/gpu/README.md says how):
#   BUNDLE/bin/cuprobe, BUNDLE/examples/*.bpf.o
# and python3 with torch. Writes results-run.md to OUT (default
# /tmp/cuprobe-run), prints the table last, exits 1 when a check fails.
set -u
. "$(dirname "$0")/common.sh" run
iterations=${ITERATIONS:-300}

nvidia-smi -L | head -1
examples="launch_dims stream_launches slow_syncs alloc_sizes copy_sizes"

# Everything system-wide, started first; each says "Ctrl-C stops" once attached.
start_watcher stats "$cuprobe" stats --json -o "$work/stats.json" -v
for e in $examples; do
	extra=()
	[ "$e" = slow_syncs ] && extra=(--set min_us=0)
	start_watcher "$e" "$cuprobe" run "$bundle/examples/$e.bpf.o" "${extra[@]}" --json -o "$work/$e.json" -v
done
wait_attached stats $examples

python3 "$here/gpu/torch_mlp.py" --iterations "$iterations" --synchronize 20 > "$work/torch.txt" 2>&1
cat "$work/torch.txt"
sleep 1
stop_watchers
clang_here=$(command -v clang || command -v clang-14 || echo none)

python3 - "$work" "$out" "$clang_here" "$iterations" <<'PY'
import json, re, sys
from checks import finish, note, row
work, out, clang, iterations = sys.argv[1:5]
pid = int(re.search(r"torch_mlp: pid=(\d+)", open(f"{work}/torch.txt").read()).group(1))

def lines(name):
    return [json.loads(l) for l in open(f"{work}/{name}.json") if l.startswith("{")]

def final_map(name, map_name):
    found = [l for l in lines(name) if l["type"] == "map" and l["map"] == map_name]
    return found[-1]["entries"]

stats = [s for s in lines("stats") if s["type"] == "stats" and s["pid"] == pid]
report = stats[-1]
kernels = {}
for k in report["kernels"]:
    if not k["graph"]:
        kernels[k["kernel"]] = kernels.get(k["kernel"], 0) + k["launches"]
all_launches = sum(k["launches"] for k in report["kernels"])
calls = {a["api"]: a["calls"] for a in report["apis"]}

# launch_dims: per kernel name, launches == stats.
dims = {}
for e in final_map("launch_dims", "launch_dims"):
    if e["key"]["pid"] == pid:
        name = e["key"]["kernel"]
        dims[name] = dims.get(name, 0) + e["value"]["blocks_per_grid"]["count"]
off = [f"{n}: {dims.get(n)} vs {c}" for n, c in kernels.items() if dims.get(n) != c]
off += [f"{n}: {c} vs none" for n, c in dims.items() if n not in kernels]
row("launch_dims: launches per kernel == cuprobe stats", f"{len(kernels)} kernels, {len(off)} off, {sum(dims.values())} launches",
    "0 off", not off and len(kernels) > 5)
for o in off[:5]:
    print("launch_dims mismatch:", o)

# stream_launches: every launch (graphs too) over streams and seconds.
streams, total = set(), 0
for e in final_map("stream_launches", "launches"):
    if e["key"]["pid"] == pid:
        streams.add(e["key"]["stream"])
        total += e["value"]
row("stream_launches: launches over streams and seconds == stats", f"{total} on {len(streams)} streams", f"{all_launches}",
    total == all_launches and total > 0)

# slow_syncs at min_us=0: one record per blocking sync call.
records = {}
for l in lines("slow_syncs"):
    if l["type"] == "record" and l["record"]["pid"] == pid:
        api = l["record"]["api"]
        records[api] = records.get(api, 0) + 1
want = {a: c for a, c in calls.items() if re.match(r"cu(Ctx|Stream|Event)Synchronize", a)}
row("slow_syncs (min_us=0): records per sync API == stats calls", json.dumps(records, sort_keys=True),
    json.dumps(want, sort_keys=True), records == want and sum(want.values()) >= 20)
stacks = [l["record"]["stack"] for l in lines("slow_syncs") if l["type"] == "record" and l["record"]["pid"] == pid]
named = sum(1 for s in stacks if s and any("libtorch" in f or "python" in f for f in s))
note("slow_syncs: stacks reaching libtorch or python (frame pointers permitting)", f"{named} of {len(stacks)}", "info")

# alloc_sizes: successful device allocations of every non-host kind.
device = sum(e["value"]["allocations"] for e in final_map("alloc_sizes", "alloc_sizes")
             if e["key"]["pid"] == pid and e["key"]["kind"] != "host")
row("alloc_sizes: device allocations == stats allocations", device, report["memory"]["allocations"],
    device == report["memory"]["allocations"] and device > 0)

# copy_sizes: no pid in its key, and nothing else on the machine copies.
copies = sum(e["value"]["copies"] for e in final_map("copy_sizes", "copy_sizes"))
want_copies = sum(c for a, c in calls.items() if a.startswith("cuMemcpy"))
row("copy_sizes: copies == stats cuMemcpy* calls", copies, want_copies, copies == want_copies and copies > 0)

for name in ["launch_dims", "stream_launches", "slow_syncs", "alloc_sizes", "copy_sizes"]:
    err = open(f"{work}/{name}.err").read()
    lost = re.findall(r"ring \S+: \d+ records printed, (\d+) lost, (\d+) short", err)
    if lost:
        row(f"{name}: ring records lost / short", f"{lost[0][0]} / {lost[0][1]}", "0 / 0", lost[0] == ("0", "0"))
note("clang on this machine (examples compiled elsewhere to .bpf.o)", clang, "info")

finish(f"{out}/results-run.md", "cuprobe run on a GPU: the examples against cuprobe stats",
       f"PyTorch training loop (gpu/torch_mlp.py --iterations {iterations} --synchronize 20), "
       "every example and cuprobe stats system-wide at once.")
PY
