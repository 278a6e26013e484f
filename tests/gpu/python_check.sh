#!/bin/bash
# Python stacks (--python) on a machine with a GPU: the walker on the
# machine's CPython (3.12 on the H200) and PyTorch, started by cuprobe.
#
#  1. gpu/torch_item_loop.py (an MLP training loop, loss.item() every N
#     steps) under `cuprobe trace --json --python`: the process is walked
#     (py_stack records, every frame resolved), every launch of the main
#     thread carries a stack, the launches and syncs are counted by the
#     line of the script they come from (the innermost frame in it), and
#     the .item() line has exactly one sync per .item() and the time blocked.
#  2. The walker's cost, side by side in the same run: the loop untraced,
#     traced, and traced with --python, rounds interleaved, for the MLP and
#     for a launch-bound loop of tiny kernels (--tiny): loop time on/off as
#     a ratio, and the added time per launch.
#
# Needs the static cuprobe in BUNDLE (default gpu-bundle/ of this checkout;
# tests/gpu/README.md) and python3 with torch. Writes results-python.md to
# OUT (default /tmp/cuprobe-python), prints the table last, exits 1 when a
# check fails.
set -u
. "$(dirname "$0")/common.sh" python
nvidia-smi -L | head -1
script="$here/gpu/torch_item_loop.py"
steps=${STEPS:-200}
every=${ITEM_EVERY:-10}
rounds=${ROUNDS:-5}

# 1. The stacks.
"$cuprobe" trace --json --python -o "$work/trace.json" -- \
	python3 "$script" --steps "$steps" --item-every "$every" > "$work/trace.txt" 2> "$work/trace.err" ||
	{ echo "trace --python failed:"; cat "$work/trace.err"; }
cat "$work/trace.txt"

# 2. The cost: untraced, traced, traced --python, interleaved.
for r in $(seq 1 "$rounds"); do
	for w in mlp tiny; do
		args=(--steps "$steps" --item-every "$every")
		[ "$w" = tiny ] && args=(--steps 2000 --item-every 100 --tiny 20)
		python3 "$script" "${args[@]}" > "$work/$w.untraced.$r.txt" 2>&1
		"$cuprobe" trace --json -o "$work/$w.off.$r.json" -- python3 "$script" "${args[@]}" \
			> "$work/$w.off.$r.txt" 2> "$work/$w.off.$r.err"
		"$cuprobe" trace --python --json -o "$work/$w.on.$r.json" -- python3 "$script" "${args[@]}" \
			> "$work/$w.on.$r.txt" 2> "$work/$w.on.$r.err"
	done
done

python3 - "$work" "$out" "$script" "$steps" "$every" "$rounds" <<'PY'
import collections, json, re, statistics, sys
from checks import finish, note, row
work, out, script, steps, every, rounds = sys.argv[1:7]
steps, every, rounds = int(steps), int(every), int(rounds)

markers = collections.defaultdict(set)
for number, text in enumerate(open(script), 1):
    m = re.search(r"  # @([\w-]+)$", text.rstrip("\n"))
    if m:
        markers[m.group(1)].add(number)
line_name = {line: name for name, lines in markers.items() for line in lines}

def summary(path):
    m = re.search(r"torch_item_loop: pid=(\d+) python=(\S+) steps=(\d+) warmup=(\d+) item_every=(\d+) "
                  r"tiny=(\d+) loop_s=([0-9.]+)", open(path).read())
    return m and {"pid": int(m.group(1)), "python": m.group(2), "warmup": int(m.group(4)),
                  "loop_s": float(m.group(7))}

run = summary(f"{work}/trace.txt")
if not run:
    row("the loop ran under trace --python", "no", "yes", False)
    finish(f"{out}/results-python.md", "Python stacks on a GPU")
pid = run["pid"]
records = [json.loads(l) for l in open(f"{work}/trace.json") if l.startswith("{")]
stacks = {r["stack_id"]: r for r in records if r["type"] == "py_stack" and r["pid"] == pid}
row(f"CPython {run['python']}: stacks found", len(stacks), "> 0", len(stacks) > 0)
unresolved = sum(1 for s in stacks.values() if s.get("unresolved"))
unreadable = sum(1 for s in stacks.values() for f in s["frames"] if f.get("unreadable"))
row("stacks resolved, frames readable", f"{unresolved} unresolved, {unreadable} frames unreadable",
    "0, 0", unresolved == 0 and unreadable == 0)
depths = [s["depth"] for s in stacks.values()]
note("stack depths (min / median / max), cut at 64",
     f"{min(depths)} / {statistics.median(depths):.0f} / {max(depths)}, "
     f"{sum(1 for s in stacks.values() if s['truncated'])} cut", "info")

def script_line(stack_id):
    """The innermost frame in the script: (line, function), or None."""
    stack = stacks.get(stack_id)
    for frame in stack["frames"] if stack else []:
        if frame["file"] == script:
            return frame["line"], frame["function"]
    return None

calls = [r for r in records if r["pid"] == pid and r["type"] in ("launch", "sync", "copy", "alloc")]
main_launches = [r for r in calls if r["type"] == "launch" and r["tid"] == pid]
with_stack = sum(1 for r in main_launches if "py_stack" in r)
row("main-thread launches with a Python stack", f"{with_stack} of {len(main_launches)}",
    "all", main_launches and with_stack == len(main_launches))
other = [r for r in calls if r["type"] == "launch" and r["tid"] != pid]
note("launches from other threads (autograd's), with a stack",
     f"{sum(1 for r in other if 'py_stack' in r)} of {len(other)}", "info")

per_line = collections.defaultdict(lambda: {"launch": 0, "sync": 0, "copy": 0, "alloc": 0, "wait_ns": 0})
innermost = collections.Counter()
for r in calls:
    if "py_stack" not in r:
        continue
    where = script_line(r["py_stack"])
    key = where if where else ("(not in the script)", "")
    per_line[key][r["type"]] += 1
    if r["type"] == "sync":
        per_line[key]["wait_ns"] += r["time_ns"] - r["entry_ns"]
    if r["type"] == "launch":
        frame = stacks[r["py_stack"]]["frames"][0]
        innermost[f"{frame['file'].split('/')[-1]}:{frame['line']} {frame['function']}"] += 1
for (line, function), c in sorted(per_line.items(), key=lambda kv: str(kv[0])):
    name = line_name.get(line, "")
    note(f"line {line} {function} {('@' + name) if name else ''}",
         f"{c['launch']} launches, {c['sync']} syncs ({c['wait_ns'] / 1e6:.1f} ms blocked), "
         f"{c['copy']} copies, {c['alloc']} allocations", "info")
for where, n in innermost.most_common(5):
    note(f"launches by innermost frame: {where}", n, "info")

loop_steps = steps + run["warmup"]
forward = sum(c["launch"] for (line, _), c in per_line.items() if line in markers["forward"])
row("launches at the forward line: a multiple of the steps run", f"{forward} for {loop_steps} steps",
    f"k x {loop_steps}, k >= 1", forward >= loop_steps and forward % loop_steps == 0)
items = sum(c["sync"] for (line, _), c in per_line.items() if line in markers["item"])
row("syncs at the .item() line", items, steps // every, items == steps // every)
item_wait = sum(c["wait_ns"] for (line, _), c in per_line.items() if line in markers["item"])
all_wait = sum(c["wait_ns"] for c in per_line.values())
note("time blocked at the .item() line, of all syncs'", f"{item_wait / 1e6:.1f} of {all_wait / 1e6:.1f} ms",
     "info")

def loop_times(w, kind):
    times = []
    for r in range(1, rounds + 1):
        s = summary(f"{work}/{w}.{kind}.{r}.txt")
        if s:
            times.append(s["loop_s"])
    return times

for w in ["mlp", "tiny"]:
    untraced, off, on = (loop_times(w, k) for k in ("untraced", "off", "on"))
    if not (untraced and off and on):
        row(f"{w}: the cost runs ran", f"{len(untraced)}/{len(off)}/{len(on)} of {rounds}", "all", False)
        continue
    launches = []
    for r in range(1, rounds + 1):
        try:
            launches.append(sum(1 for l in open(f"{work}/{w}.on.{r}.json") if '"type":"launch"' in l))
        except OSError:
            pass
    u, f, n = statistics.median(untraced), statistics.median(off), statistics.median(on)
    per_launch = (n - f) / statistics.median(launches) * 1e9 if launches else float("nan")
    note(f"{w}: loop time untraced / traced / traced --python (median of {rounds})",
         f"{u * 1e3:.1f} / {f * 1e3:.1f} / {n * 1e3:.1f} ms", "info")
    note(f"{w}: --python on/off ratio, and per launch", f"{n / f:.3f}, {per_launch:+.0f} ns "
         f"({statistics.median(launches):.0f} launches a run)", "info")
finish(f"{out}/results-python.md", "Python stacks on a GPU",
       "cuprobe trace --json --python on gpu/torch_item_loop.py; the walker's cost side by side.")
PY
