#!/bin/bash
# Python stacks (--python) on a machine with a GPU: the walker on the
# machine's CPython (3.12 on the H200) and PyTorch. Three PyTorch processes
# in all (importing torch takes seconds each), under two minutes:
#
#  1. gpu/torch_item_loop.py --profile under `cuprobe trace --json --python`:
#     every frame resolved, the main thread's launches all with a stack, and
#     in the SAME run the launches set against what torch.profiler
#     (with_stack=True) saw over the profiled loop: in all, and per function
#     on the main thread (the profiler's frames carry each function's first
#     line, not the line running, so it cannot say the line).
#  2. The loop under `cuprobe stats --json --python --timeline`: the .item()
#     line has one sync per .item(), the most time blocked of any line, and
#     its share of the wall time and verdict are one row of the report.
#  3. The walker's cost in ONE process: the launch-bound loop (--tiny, K
#     adds a step) runs for a while, and cuprobe attaches to it (-p) in
#     turns: untraced, traced, traced with --python, three rounds. Steps per
#     second in each window give the cost per launch and the overhead
#     against Ingero's claimed 0.4-1.7% with stacks on.
#
# Needs the static cuprobe in BUNDLE (default gpu-bundle/ of this checkout;
# tests/gpu/README.md) and python3 with torch. Writes results-python-h200.md
# to OUT (default /tmp/cuprobe-python), prints the table last, exits 1 when
# a check fails. EXPECT_PYTHON (default 3.12) is the CPython it must find.
set -u
. "$(dirname "$0")/common.sh" python
nvidia-smi -L | head -1
script="$here/gpu/torch_item_loop.py"
steps=${STEPS:-200}
every=${ITEM_EVERY:-10}
tiny=${TINY:-20}
rounds=${ROUNDS:-3}
window_s=${WINDOW_S:-3}

# 1. The stacks, and torch.profiler's launches per line in the same run.
"$cuprobe" trace --json --python -o "$work/trace.json" -- \
	python3 "$script" --steps "$steps" --item-every "$every" --profile "$work/profile.json" \
	> "$work/trace.txt" 2> "$work/trace.err" ||
	{ echo "trace --python failed:"; cat "$work/trace.err"; }
cat "$work/trace.txt"

# 2. The lines, as stats reports them.
"$cuprobe" stats --json --python --timeline -o "$work/stats.json" -- \
	python3 "$script" --steps "$steps" --item-every "$every" \
	> "$work/stats.txt" 2> "$work/stats.err" ||
	{ echo "stats --python failed:"; cat "$work/stats.err"; }

# 3. The cost: one process, cuprobe attached and detached in turns.
monotonic_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }
# Longer than the turns can take: it is stopped after the last.
python3 "$script" --tiny "$tiny" --rate-seconds 120 > "$work/rate.txt" 2>&1 &
rate_pid=$!
for _ in $(seq 1 300); do
	grep -q "rate t_ns" "$work/rate.txt" && break
	sleep 0.1
done
: > "$work/windows.txt"
for r in $(seq 1 "$rounds"); do
	for mode in none off on; do
		if [ "$mode" = none ]; then
			start=$(monotonic_ns)
			sleep "$window_s"
			echo "$mode $r $start $(monotonic_ns)" >> "$work/windows.txt"
			continue
		fi
		flags=()
		[ "$mode" = on ] && flags=(--python)
		"$cuprobe" trace -v "${flags[@]}" -p "$rate_pid" -d "$window_s" -o /dev/null \
			2> "$work/cost.$mode.$r.err" &
		tracer=$!
		for _ in $(seq 1 300); do
			grep -q "tracing (" "$work/cost.$mode.$r.err" && break
			sleep 0.05
		done
		start=$(monotonic_ns)
		wait "$tracer" || echo "cuprobe trace -p ($mode) failed: $(cat "$work/cost.$mode.$r.err")"
		echo "$mode $r $start $(monotonic_ns)" >> "$work/windows.txt"
	done
done
kill "$rate_pid" 2>/dev/null
wait "$rate_pid" 2>/dev/null

python3 - "$work" "$out" "$script" "$steps" "$every" "$tiny" "${EXPECT_PYTHON:-3.12}" <<'PY'
import ast, collections, json, re, statistics, sys
from checks import finish, note, row
work, out, script, steps, every, tiny, expect_python = sys.argv[1:8]
steps, every, tiny = int(steps), int(every), int(tiny)
results = f"{out}/results-python-h200.md"
title = "Python stacks on a GPU"

markers = collections.defaultdict(set)
for number, text in enumerate(open(script), 1):
    m = re.search(r"  # @([\w-]+)$", text.rstrip("\n"))
    if m:
        markers[m.group(1)].add(number)
line_name = {line: name for name, lines in markers.items() for line in lines}

def summary(path):
    try:
        text = open(path).read()
    except OSError:
        return None
    m = re.search(r"torch_item_loop: pid=(\d+) python=(\S+) steps=(\d+) warmup=(\d+) ", text)
    return m and {"pid": int(m.group(1)), "python": m.group(2), "warmup": int(m.group(4))}

# ---- 1. trace --json --python, and torch.profiler in the same run
run = summary(f"{work}/trace.txt")
if not run:
    row("the loop ran under trace --python", "no", "yes", False)
    finish(results, title)
pid = run["pid"]
row("CPython the walker read", run["python"], expect_python, run["python"] == expect_python)
records = [json.loads(l) for l in open(f"{work}/trace.json") if l.startswith("{")]
calls = [r for r in records if r.get("pid") == pid and r.get("type") in ("launch", "sync", "copy", "alloc")]
stacked = [r for r in calls if "py_stack" in r]
unresolved = sum(1 for r in calls if r.get("py_stack_unresolved"))
unreadable = sum(1 for r in stacked for f in r["py_stack"] if f.get("unreadable"))
row("calls with frames; stacks unresolved, frames unreadable",
    f"{len(stacked)} of {len(calls)}; {unresolved}, {unreadable}", "> 0; 0, 0",
    stacked and unresolved == 0 and unreadable == 0)
main_launches = [r for r in calls if r["type"] == "launch" and r["tid"] == pid]
row("main-thread launches with a Python stack",
    f"{sum(1 for r in main_launches if 'py_stack' in r)} of {len(main_launches)}", "all",
    main_launches and all("py_stack" in r for r in main_launches))
other = [r for r in calls if r["type"] == "launch" and r["tid"] != pid]
note("launches from other threads (autograd's: no Python frames)",
     f"{sum(1 for r in other if 'py_stack' in r)} of {len(other)} with a stack", "info")
depths = [len(r["py_stack"]) for r in stacked]
if depths:
    note("stack depths (min / median / max), cut at 64",
         f"{min(depths)} / {statistics.median(depths):.0f} / {max(depths)}, "
         f"{sum(1 for r in stacked if r.get('py_stack_truncated'))} calls cut", "info")

def script_line(record):
    """The innermost frame in the script, or None."""
    for frame in record.get("py_stack", []):
        if frame["file"] == script:
            return frame["line"]
    return None

def script_function(record):
    """The function of the innermost frame in the script, or None."""
    for frame in record.get("py_stack", []):
        if frame["file"] == script:
            return frame["function"]
    return None

try:
    profile = json.load(open(f"{work}/profile.json"))
except (OSError, ValueError):
    profile = None
if not profile:
    row("torch.profiler's launches per line (same run)", "no profile written", "a profile", False)
else:
    window = [r for r in calls if r["type"] == "launch" and
              profile["start_ns"] <= r["time_ns"] <= profile["end_ns"]]
    row("launches in the profiled loop, every thread: cuprobe vs torch.profiler",
        f"{len(window)} vs {profile['launches']}", "equal (within 2%)",
        profile["launches"] > 0 and abs(len(window) - profile["launches"]) <= max(1, profile["launches"] * 0.02))
    # The profiler's frames carry each function's first line (measured: every
    # launch "at" train_step's def line): compared by function, on the main
    # thread; cuprobe's own lines are set against the loop's structure in 2.
    defs = {}
    for node in ast.walk(ast.parse(open(script).read())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[node.lineno] = node.name
    main = [r for r in window if r["tid"] == pid]
    ours_lines = collections.Counter(script_line(r) for r in main)
    ours_functions = collections.Counter(script_function(r) for r in main)
    theirs_lines = {int(k): v for k, v in profile["launches_by_thread_and_line"].get(profile.get("main_thread"), {}).items()}
    theirs_functions = collections.Counter()
    for line, count in theirs_lines.items():
        theirs_functions[defs.get(line, f"line {line}")] += count
    row("torch.profiler's main-thread lines that are a function's def line (its frames' resolution)",
        f"{sum(1 for l in theirs_lines if l in defs)} of {len(theirs_lines)}: "
        + ", ".join(f"{l} ({defs.get(l, '?')})" for l in sorted(theirs_lines)), "information", None)
    for function in sorted(set(theirs_functions) | {f for f in ours_functions if f}):
        mine, prof = ours_functions.get(function, 0), theirs_functions.get(function, 0)
        row(f"main-thread launches in {function}(): cuprobe vs torch.profiler", f"{mine} vs {prof}",
            "equal (within 2%)", prof > 0 and abs(mine - prof) <= max(1, prof * 0.02))
    row("main-thread launches per line, cuprobe (torch.profiler cannot say the line)",
        ", ".join(f"{l} @{line_name.get(l, '?')}: {n}" for l, n in sorted(ours_lines.items(), key=lambda x: x[0] or 0)),
        "information", None)
    note("profiler launches on no line of the script, of all it saw; its events with a stack, on a "
         "script line; cuprobe's main-thread launches on none",
         f"{profile['launches_unplaced']} of {profile.get('launches', '?')}; "
         f"{profile.get('events_with_a_stack', '?')}, {profile.get('events_on_script_lines', '?')}; "
         f"{ours_lines.get(None, 0)}" + ("" if profile.get("events_on_script_lines") else
                                   f" (a stack it saw: {profile.get('a_stack')})"), "info")

# ---- 2. stats --python --timeline: the .item() line
srun = summary(f"{work}/stats.txt")
reports = []
try:
    reports = [json.loads(l) for l in open(f"{work}/stats.json") if l.startswith("{")]
except OSError:
    pass
final = [r for r in reports if r.get("type") == "stats" and srun and r.get("pid") == srun["pid"]
         and r.get("final")]
if not final or "python_lines" not in final[-1]:
    row("stats --python --timeline report with python_lines", "none", "one", False)
else:
    lines = final[-1]["python_lines"]
    item = [l for l in lines if l["file"] == script and l["line"] in markers["item"]]
    syncs = sum(l["syncs"] for l in item)
    row("syncs at the .item() line (stats --python)", syncs, steps // every, syncs == steps // every)
    top = max(lines, key=lambda l: l["blocked_ns"]) if lines else None
    row("the line blocked longest is the .item() line",
        f"{top['file'].split('/')[-1] if top and top['file'] else '?'}:{top['line'] if top else '?'}",
        f"line {sorted(markers['item'])}", bool(top and top in item))
    for l in item:
        share = l["blocked_ns"] / l["window_ns"] if l["window_ns"] else 0
        row(f"torch_item_loop.py:{l['line']} {l['function']}: blocked, share of the wall time, verdict",
            f"{l['blocked_ns'] / 1e6:.1f} ms, {share:.0%} of {l['window_ns'] / 1e6:.0f} ms, "
            f"{l.get('verdict', '-')}", "> 0", l["blocked_ns"] > 0)

# ---- 3. the cost, in one process
samples, previous = [], None
for text in open(f"{work}/rate.txt"):
    m = re.search(r"rate t_ns=(\d+) steps=(\d+)", text)
    if m:
        t = int(m.group(1))
        if previous:
            samples.append((previous, t, int(m.group(2))))  # (begin, end, steps)
        previous = t
windows = collections.defaultdict(list)
for text in open(f"{work}/windows.txt"):
    mode, _, start, end = text.split()
    # Whole samples inside the window, 0.3 s after it began (the probes settled).
    inside = [(e - b, n) for b, e, n in samples if int(start) + 3e8 <= b and e <= int(end)]
    if inside:
        windows[mode].append(sum(n for _, n in inside) / (sum(d for d, _ in inside) / 1e9))
if not all(windows.get(m) for m in ("none", "off", "on")):
    row("the cost windows ran", {m: len(windows.get(m, [])) for m in ("none", "off", "on")},
        "each", False)
else:
    none, off, on = (statistics.median(windows[m]) for m in ("none", "off", "on"))
    launches_per_step = tiny + 1
    per_launch = (1 / on - 1 / off) / launches_per_step * 1e9
    note(f"launch-bound loop ({tiny} adds a step): steps/s untraced / traced / traced --python "
         f"(median of {len(windows['on'])} windows)", f"{none:.0f} / {off:.0f} / {on:.0f}", "info")
    row("the walker's added time per launch (traced --python vs traced)", f"{per_launch:+.0f} ns",
        "< 2000 ns", per_launch < 2000)
    note("--python's overhead on a launch-bound loop, vs traced and vs untraced "
         "(anchor: Ingero claims 0.4-1.7% with stacks on)",
         f"{off / on - 1:+.1%}, {none / on - 1:+.1%}", "info")
finish(results, title,
       "cuprobe trace --json --python with torch.profiler(with_stack=True) in the same run of "
       "gpu/torch_item_loop.py; cuprobe stats --json --python --timeline; the walker's cost "
       "with cuprobe attached (-p) in turns to one launch-bound loop.")
PY
