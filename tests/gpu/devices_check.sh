#!/bin/bash
# Device attribution on a machine with one GPU (the two-GPU checks need a
# machine with two): one process selects device 0 explicitly and runs two
# contexts on it from two threads (its own cuCtxCreate, and the primary
# context pushed); `cuprobe stats` and the exporter, both system-wide, must
# put every launch, allocation and copy on device 0, with exact counts.
#
# Needs BUNDLE/bin/{cuprobe,cuprobe-dyn,two_contexts} (tests/gpu/README.md).
# Writes results-devices.md to OUT (default /tmp/cuprobe-devices), prints the
# table last, exits 1 when a check fails.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. "$(dirname "$0")/common.sh" devices
port=${PORT:-19467}

nvidia-smi -L | tee "$work/smi.txt"
start_watcher exporter "$bundle/bin/cuprobe-dyn" exporter -i 1 --listen "127.0.0.1:$port" -v
start_watcher stats "$cuprobe" stats --json -o "$work/stats.json" -v
wait_attached exporter stats
"$bundle/bin/two_contexts" 500 > "$work/two.txt"
cat "$work/two.txt"
sleep 3
curl -s "http://127.0.0.1:$port/metrics" > "$work/metrics.txt"
stop_watchers

python3 - "$work" "$out" <<'PY'
import json, re, sys
from checks import finish, note, row
work, out = sys.argv[1:3]

uuid = re.search(r"UUID: (GPU-[0-9a-f-]+)", open(f"{work}/smi.txt").read()).group(1)
line = open(f"{work}/two.txt").read()
want = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
pid = want["pid"]
stats = [json.loads(l) for l in open(f"{work}/stats.json") if l.startswith("{")]
report = [s for s in stats if s["type"] == "stats" and s["pid"] == pid][-1]
by_device = {}
for k in report["kernels"]:
    by_device[k["device"]] = by_device.get(k["device"], 0) + k["launches"]
row("stats: launches by device (two contexts on device 0)", json.dumps(by_device), f'{{"0": {want["launches"]}}}',
    by_device == {0: want["launches"]})
series = []
for l in open(f"{work}/metrics.txt"):
    m = re.match(r'(\w+)\{(.*)\} (\S+)$', l.strip())
    if m:
        series.append((m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2))), float(m.group(3))))

def total(metric, **labels):
    acc = {}
    for name, l, v in series:
        if name == metric and l.get("pid") == str(pid) and all(l.get(k) == x for k, x in labels.items()):
            key = (l.get("gpu"), l.get("gpu_uuid"))
            acc[key] = acc.get(key, 0) + int(v)
    return acc

expected = {("0", uuid): want["launches"]}
row("exporter: launches by GPU", total("cuprobe_kernel_launches_total"), expected,
    total("cuprobe_kernel_launches_total") == expected)
row("exporter: device allocations by GPU", total("cuprobe_device_allocations_total"), {("0", uuid): want["allocs"]},
    total("cuprobe_device_allocations_total") == {("0", uuid): want["allocs"]})
for direction, key in (("HtoD", "htod"), ("DtoH", "dtoh")):
    got = total("cuprobe_copies_total", direction=direction)
    row(f"exporter: {direction} copies by GPU", got, {("0", uuid): want[key]}, got == {("0", uuid): want[key]})
note("two GPUs: two processes each on its own GPU, one process on both, NCCL all-reduce", "not run",
     "blocked: no machine with two GPUs was available")
finish(f"{out}/results-devices.md", "Device attribution on one GPU")
PY
