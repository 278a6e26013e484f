#!/bin/bash
# Experiment for late attach on the GPU machine: where kernel names can come
# from when cuprobe attaches to a PyTorch process that already runs.
#   1. traced from the start: which naming APIs PyTorch's kernels go through,
#      and (driver_layout_probe.py) whether the driver's handle points at the name;
#   2. attached late with --runtime: how many launches the device-stub fallback names.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${BUNDLE:-$here/gpu-bundle}
cuprobe=$bundle/bin/cuprobe; [ -x "$cuprobe" ] || cuprobe=$bundle/cuprobe
work=$(mktemp -d)

echo "== 1. traced from the start"
"$cuprobe" trace --json -o "$work/start.json" -- python3 "$here/gpu/torch_mlp.py" --duration 25 --start-delay 0 >"$work/start.out" 2>"$work/start.err" &
cp_pid=$!
for _ in $(seq 300); do grep -q "ready" "$work/start.out" && break; sleep 0.1; done
sleep 3
pid=$(sed -n 's/.*ready pid=\([0-9]*\).*/\1/p' "$work/start.out")
python3 "$here/tests/gpu/driver_layout_probe.py" "$work/start.json" "$pid"
python3 - "$work/start.json" "$pid" <<'PY'
import collections, json, sys
apis = collections.Counter(); unnamed = 0; launches = 0
for l in open(sys.argv[1]):
    try: e = json.loads(l)
    except json.JSONDecodeError: continue
    if e["pid"] != int(sys.argv[2]): continue
    if e["type"] == "name": apis[e["api"]] += 1
    if e["type"] == "launch" and "graph_exec" not in e:
        launches += 1; unnamed += e.get("kernel") is None
print("naming calls:", dict(apis), "launches so far:", launches, "unnamed:", unnamed)
PY
wait $cp_pid; tail -1 "$work/start.err"
nm -D --defined-only $(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"))') 2>/dev/null | grep -c device_stub
nm $(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"))') 2>&1 | grep -c device_stub

echo "== 2. attached late with --runtime"
python3 "$here/gpu/torch_mlp.py" --duration 20 >"$work/late.out" 2>&1 &
t_pid=$!
for _ in $(seq 300); do grep -q "ready" "$work/late.out" && break; sleep 0.1; done
sleep 2
"$cuprobe" trace -p "$t_pid" --runtime --json -v -o "$work/late.json" -d 6 2>"$work/late.err"
grep -v "absent" "$work/late.err" | tail -4
python3 - "$work/late.json" "$t_pid" <<'PY'
import collections, json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
launch = [e for e in ev if e["type"] == "launch" and "graph_exec" not in e and e["pid"] == int(sys.argv[2])]
rt = [e for e in ev if e["type"] == "rt_launch"]
t0 = launch[0]["time_ns"] if launch else 0
late = [e for e in launch if e["time_ns"] - t0 > 1e9]
by_api = collections.Counter((e["api"], e.get("kernel") is not None) for e in launch)
print("launches", len(launch), "named", sum(e.get("kernel") is not None for e in launch),
      "after 1 s:", len(late), "named", sum(e.get("kernel") is not None for e in late))
print("rt_launch", len(rt), "rt named", sum(e.get("kernel") is not None for e in rt))
print("by api (api, named):", dict(by_api))
un = collections.Counter(e["function"] for e in late if e.get("kernel") is None)
print("distinct unnamed handles after 1 s:", len(un))
PY
wait $t_pid
