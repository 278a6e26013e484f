#!/bin/bash
# The GPU timeline on a machine with a GPU: cuprobe's kernel bounds against
# the kernel times torch.profiler (CUPTI) reports for the same run, for a
# PyTorch MLP loop, a cuBLAS GEMM loop and a launch-bound loop of tiny
# kernels; then an Xid from a kernel writing through a bad pointer,
# attributed to its process and kernel.
#
# Per workload: the share of kernels whose true interval lies inside
# cuprobe's bound (must be 100%), the median and p90 of the bound's width
# over the true duration, GPU busy time bounds against the truth, and the
# verdict against the profiler's GPU idle share. Clocks: the profiler's
# timestamps are mapped to CLOCK_MONOTONIC by the offsets consistent with
# every launch (cuprobe's cuLaunchKernel entry lies inside the profiler's
# launch API call); a kernel counts as inside only for every such offset.
#
# Needs a static cuprobe and xid_fault in BUNDLE (default gpu-bundle/ of this
# checkout; tests/gpu/README.md), python3 with torch. Writes
# results-timeline.md to OUT (default /tmp/cuprobe-timeline), prints the
# table last, exits 1 when a check fails.
set -u
. "$(dirname "$0")/common.sh" timeline
nvidia-smi -L | head -1

for w in mlp gemm tiny mlpq; do
	"$cuprobe" trace --timeline --json -o "$work/$w.cuprobe.json" -- \
		python3 "$here/gpu/timeline_truth.py" --workload "$w" --profile "$work/$w.prof.json" \
		> "$work/$w.txt" 2> "$work/$w.err" || { echo "$w failed:"; cat "$work/$w.err"; }
	cat "$work/$w.txt"
done

# What the cuEventQuery probes cost: the same query loop untraced.
python3 "$here/gpu/timeline_truth.py" --workload mlpq --iterations 20 --profile "$work/untraced.prof.json" \
	> "$work/untraced.txt" 2>&1

# The Xid: trace and stats at once, system-wide stats with --timeline.
"$cuprobe" trace --timeline --json -o "$work/xid.json" -- "$bundle/bin/xid_fault" \
	> "$work/xid.txt" 2> "$work/xid.err"
cat "$work/xid.txt"
dmesg 2>/dev/null | grep -i "xid" | tail -3 > "$work/dmesg.txt"

python3 - "$work" "$out" <<'PY'
import bisect, json, re, statistics, sys
from checks import finish, note, row
work, out = sys.argv[1:3]

def union(spans):
    total, cur_lo, cur_hi = 0, None, None
    for lo, hi in sorted(spans):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total

def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] if values else float("nan")

widths_of = {}
for w in ["mlp", "gemm", "tiny", "mlpq"]:
    text = open(f"{work}/{w}.txt").read()
    m = re.search(r"timeline_truth: pid=(\d+) workload=\S+ window_start_ns=(\d+) window_end_ns=(\d+)", text)
    if not m:
        row(f"{w}: workload ran", "no", "yes", False)
        continue
    pid, t0, t1 = int(m.group(1)), int(m.group(2)), int(m.group(3))
    records = [json.loads(l) for l in open(f"{work}/{w}.cuprobe.json") if l.startswith("{")]
    intervals = sorted((r for r in records if r["type"] == "gpu_interval" and r["pid"] == pid
                        and t0 <= r["launch_ns"] <= t1 and not r["graph"]), key=lambda r: r["launch_ns"])
    syncs = [r for r in records if r["type"] == "sync" and r["pid"] == pid and t0 <= r["entry_ns"] <= t1]
    prof = json.load(open(f"{work}/{w}.prof.json"))
    events = prof["traceEvents"] if isinstance(prof, dict) else prof
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "Launch" in e.get("name", "") and "correlation" in e.get("args", {})}
    kernels = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"),
                     key=lambda e: launches[e["args"]["correlation"]]["ts"]
                     if e["args"].get("correlation") in launches else e["ts"])
    kernels = [k for k in kernels if k["args"].get("correlation") in launches]
    row(f"{w}: kernels seen by cuprobe / by the profiler", f"{len(intervals)} / {len(kernels)}", "equal",
        len(intervals) == len(kernels) and len(kernels) > 0)
    n = min(len(intervals), len(kernels))
    if n == 0:
        continue
    # Offsets o (ns) with profiler_time + o = monotonic, consistent with every launch.
    lo, hi = -float("inf"), float("inf")
    for r, k in zip(intervals, kernels):
        api = launches[k["args"]["correlation"]]
        lo = max(lo, r["launch_ns"] - (api["ts"] + api["dur"]) * 1000)
        hi = min(hi, r["launch_ns"] - api["ts"] * 1000)
    consistent = lo <= hi
    spread = lo - hi
    if not consistent:  # some launch disagrees by more than its call's length: take the middle
        lo = hi = statistics.median(r["launch_ns"] - (launches[k["args"]["correlation"]]["ts"] +
                                    launches[k["args"]["correlation"]]["dur"] / 2) * 1000
                                    for r, k in zip(intervals, kernels))
    inside, widths, truth = 0, [], []
    for r, k in zip(intervals, kernels):
        ks, ke = k["ts"] * 1000, (k["ts"] + k["dur"]) * 1000
        truth.append((ks + (lo + hi) / 2, ke + (lo + hi) / 2))
        if r["done_by_ns"] and r["start_after_ns"] <= ks + lo and ke + hi <= r["done_by_ns"]:
            inside += 1
        if k["dur"] > 0 and r["done_by_ns"]:
            widths.append((r["done_by_ns"] - r["start_after_ns"]) / (k["dur"] * 1000))
    row(f"{w}: profiler-to-monotonic offsets consistent with every launch",
        f"yes, {(hi - lo) / 1000:.1f} us wide" if consistent else
        f"no, off by {spread / 1000:.1f} us (median offset used)", "-", None)
    row(f"{w}: true interval inside cuprobe's bound", f"{inside}/{n} ({100.0 * inside / n:.1f}%)", "100%", inside == n)
    row(f"{w}: bound width / true duration, median and p90",
        f"{pct(widths, 0.5):.2f} / {pct(widths, 0.9):.2f}", "-", None)
    widths_of[w] = widths
    evidence = {}
    for r in intervals:
        evidence[r["evidence"]] = evidence.get(r["evidence"], 0) + 1
    row(f"{w}: evidence that bounded the kernels", json.dumps(evidence, sort_keys=True), "-", None)
    # Busy time over the window from the first launch to the last bound, as cuprobe counts it.
    win_lo = intervals[0]["launch_ns"]
    win_hi = max(r["done_by_ns"] for r in intervals)
    window = win_hi - win_lo
    busy_max = union((r["start_after_ns"], r["done_by_ns"]) for r in intervals if r["done_by_ns"])
    waits = [(s["entry_ns"], s["time_ns"]) for s in syncs
             if s["kind"] in ("stream", "context", "event", "blocking_copy") and s["result"] == 0]
    fastest = min((s["time_ns"] - s["entry_ns"] for s in syncs), default=0)
    waited = [(a, b) for a, b in waits if any(a > r["launch_ns"] for r in intervals)]
    busy_min = max(0, union(waited) - fastest * len(waited))
    true_busy = union((max(a, win_lo), min(b, win_hi)) for a, b in truth if b > win_lo and a < win_hi)
    row(f"{w}: GPU busy (ms): cuprobe at least / truth / cuprobe at most",
        f"{busy_min / 1e6:.2f} / {true_busy / 1e6:.2f} / {busy_max / 1e6:.2f}", "min <= truth <= max",
        busy_min <= true_busy <= busy_max)
    # cuprobe's rule: a wait returned within max(20 us, 1/20 of the time since the previous sync).
    immediate, last = 0, None
    for a, b in sorted(waits):
        if (a, b) in waited and b - a <= fastest + max(20000, (a - last) // 20 if last and a > last else 0):
            immediate += 1
        last = b
    verdict = ("gpu-bound" if busy_min * 2 >= window else
               "launch-bound" if (window - busy_max) * 2 >= window or
               (waited and immediate * 2 >= len(waited) and busy_min * 5 < window) else "mixed")
    idle = 1 - true_busy / window if window else 0
    truth_verdict = "launch-bound" if idle >= 0.5 else "gpu-bound"
    row(f"{w}: verdict (truth: GPU idle {100 * idle:.0f}% of the window)", verdict, truth_verdict,
        verdict == truth_verdict or (verdict == "mixed" and 0.3 <= idle <= 0.7))

# What the return of cuEventQuery buys (mlpq against mlp: the same kernels,
# polled each step) and costs (a query's time traced against untraced).
def query_cost(path):
    m = re.search(r"query_ns=([0-9.]+)", open(path).read())
    return float(m.group(1)) if m else float("nan")
if widths_of.get("mlp") and widths_of.get("mlpq"):
    row("event queries: median bound width / true duration, mlp without / mlpq with",
        f"{pct(widths_of['mlp'], 0.5):.2f} / {pct(widths_of['mlpq'], 0.5):.2f}", "-", None)
untraced, traced = query_cost(f"{work}/untraced.txt"), query_cost(f"{work}/mlpq.txt")
row("event queries: ns per event.query(), untraced / traced (the probes' cost)",
    f"{untraced:.0f} / {traced:.0f} (+{traced - untraced:.0f})", "-", None)

# The Xid.
text = open(f"{work}/xid.txt").read()
m = re.search(r"xid_fault: pid=(\d+)", text)
records = [json.loads(l) for l in open(f"{work}/xid.json") if l.startswith("{")]
xids = [r for r in records if r["type"] == "xid"]
in_flight = [r for r in records if r["type"] == "xid_in_flight"]
pid = int(m.group(1)) if m else -1
row("Xid recorded from nvidia:nvidia_dev_xid", ", ".join(f"Xid {x['xid']}" for x in xids) or "none", "at least one",
    len(xids) > 0)
row("Xid attributed to the faulting process", ", ".join(str(x["process"]) for x in xids) or "-", str(pid),
    any(x["process"] == pid for x in xids))
names = [k["kernel"] for r in in_flight if r["pid"] == pid for k in r["kernels"]]
row("kernels in flight at the Xid", ", ".join(sorted(set(n or "?" for n in names))) or "none",
    "write_through_bad_pointer", any(n and "write_through_bad_pointer" in n for n in names))
if xids:
    note("Xid message", xids[0]["message"][:120], "info")

finish(f"{out}/results-timeline.md", "The GPU timeline against torch.profiler (CUPTI), and an Xid")
PY
