#!/bin/bash
# cuprobe exporter on a machine with a GPU: a PyTorch training loop and a
# Triton loop run at once while the exporter and `cuprobe stats` both watch
# the whole host; then the exporter's per-kernel launch counts against
# stats', and its GPU labels against nvidia-smi.
#
# Needs a static cuprobe in BUNDLE (default gpu-bundle/ of this checkout;
# tests/gpu/README.md), python3 with torch and triton, curl. Writes
# results-exporter.md to OUT (default /tmp/cuprobe-exporter), prints the
# table last, exits 1 when a check fails.
set -u
. "$(dirname "$0")/common.sh" exporter
port=${PORT:-19466}

nvidia-smi -L | tee "$work/smi.txt"
start_watcher exporter "${EXPORTER:-$bundle/bin/cuprobe-dyn}" exporter -i 1 --listen "127.0.0.1:$port" -v
start_watcher stats "$cuprobe" stats --json -o "$work/stats.json" -v
wait_attached exporter stats

python3 "$here/gpu/torch_mlp.py" --iterations 300 > "$work/torch.txt" 2>&1 &
torch=$!
python3 "$here/gpu/triton_add.py" --iterations 2000 > "$work/triton.txt" 2>&1 &
triton=$!
wait $torch $triton
cat "$work/torch.txt" "$work/triton.txt"
sleep 3 # two refreshes of the exporter after both exited
curl -s "http://127.0.0.1:$port/metrics" > "$work/metrics.txt"
curl -s -H 'Accept: application/openmetrics-text; version=1.0.0' "http://127.0.0.1:$port/metrics" \
	> "$work/openmetrics.txt"
stop_watchers
cp "$work/metrics.txt" "$work/exporter.err" "$out/" 2>/dev/null

python3 - "$work" "$out" <<'PY'
import json, re, sys
from checks import finish, note, row
work, out = sys.argv[1:3]

uuid = re.search(r"UUID: (GPU-[0-9a-f-]+)", open(f"{work}/smi.txt").read()).group(1)
pids = {}
for name in ("torch", "triton"):
    m = re.search(r"pid=(\d+)", open(f"{work}/{name}.txt").read().split("ready")[-1])
    pids[name] = int(m.group(1))

series = []
for line in open(f"{work}/metrics.txt"):
    m = re.match(r'(\w+)\{(.*)\} (\S+)$', line.strip())
    if m:
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        series.append((m.group(1), labels, float(m.group(3))))

stats = [json.loads(l) for l in open(f"{work}/stats.json") if l.startswith("{")]
for name, pid in pids.items():
    report = [s for s in stats if s["type"] == "stats" and s["pid"] == pid][-1]
    want = {}
    for k in report["kernels"]:
        want[k["kernel"]] = want.get(k["kernel"], 0) + k["launches"]
    got, gpus = {}, set()
    for metric, labels, value in series:
        if metric == "cuprobe_kernel_launches_total" and labels.get("pid") == str(pid):
            got[labels["kernel"]] = got.get(labels["kernel"], 0) + int(value)
            gpus.add((labels["gpu"], labels["gpu_uuid"]))
    off = [f"{k}: {got.get(k)} vs {v}" for k, v in want.items() if got.get(k) != v]
    row(f"{name}: launches per kernel, exporter == cuprobe stats",
        f"{len(want)} kernels, {sum(got.values())} launches, {len(off)} off", "0 off", not off and want)
    for o in off[:3]:
        print(name, "mismatch:", o)
    row(f"{name}: GPU labels of its launches", ", ".join(f"gpu={g} {u}" for g, u in sorted(gpus)),
        f"gpu=0 {uuid}", gpus == {("0", uuid)})
    by_device = {}
    for k in report["kernels"]:
        by_device[k["device"]] = by_device.get(k["device"], 0) + k["launches"]
    row(f"{name}: cuprobe stats, launches by device", json.dumps(by_device, sort_keys=True),
        json.dumps({"0": sum(by_device.values())}), set(by_device) == {0})
    calls = sum(v for m, l, v in series if m == "cuprobe_api_calls_total" and l.get("pid") == str(pid))
    row(f"{name}: API calls counted", int(calls), "> 0", calls > 0)
    allocs = [(l["gpu"], l["gpu_uuid"], v) for m, l, v in series
              if m == "cuprobe_device_allocations_total" and l.get("pid") == str(pid)]
    row(f"{name}: device allocations and their GPU", ", ".join(f"{int(v)} on gpu={g}" for g, u, v in allocs),
        f"on gpu=0 {uuid}", bool(allocs) and all(g == "0" and u == uuid for g, u, v in allocs))
openmetrics = open(f"{work}/openmetrics.txt").read()
row("OpenMetrics exposition ends with # EOF", openmetrics.rstrip().splitlines()[-1] if openmetrics else "empty",
    "# EOF", openmetrics.rstrip().endswith("# EOF"))
lost = [v for m, l, v in series if m == "cuprobe_records_lost_total"]
row("records lost", int(sum(lost)), "0", sum(lost) == 0)

finish(f"{out}/results-exporter.md", "cuprobe exporter on a GPU: a PyTorch loop and a Triton loop at once")
PY
