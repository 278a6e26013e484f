#!/bin/bash
# What tracing costs a PyTorch training step: gpu/torch_mlp.py (an MLP whose
# every step synchronizes) run untraced, under `cuprobe trace --json -o
# /dev/null` and under `cuprobe stats`, round by round, the order rotated each
# round so that a drift of the machine falls on every mode alike. Prints, and
# writes to OUT/torch-overhead.md, each round's us_per_step, the medians, the
# slowdown (the traced rounds' median against the untraced rounds' median,
# and the median of each round's own traced/untraced ratio) and the noise of
# the untraced rounds beside it: their spread (max - min) and their median
# absolute deviation, both in % of their median. A slowdown inside that
# noise is not measured, only bounded.
#
# usage: sudo bench/torch_overhead.sh [--cuprobe PATH] [--rounds N]
#                                     [--iterations N] [--out DIR] [--modes LIST]
# Needs python3 with torch and a GPU. Defaults: build/bin/cuprobe of this
# checkout, 8 rounds, 2000 steps a run, OUT /tmp/cuprobe-torch-overhead,
# modes untraced,trace,stats (also: trace-wake1s, trace with --wakeup-latency 1000000).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cuprobe=$here/build/bin/cuprobe
rounds=8
iterations=2000
out=/tmp/cuprobe-torch-overhead
invoked="$0 $*"
modes_list=untraced,trace,stats

usage() { sed -n 's/^# \{0,1\}//; 13,17p' "$0"; }
while [ $# -gt 0 ]; do
	case "$1" in
	--cuprobe) cuprobe=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--iterations) iterations=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--modes) modes_list=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "torch_overhead.sh: unknown option '$1' (--help lists them)" >&2; exit 2 ;;
	esac
done
case "$rounds$iterations" in
*[!0-9]*) echo "torch_overhead.sh: --rounds and --iterations take positive integers" >&2; exit 2 ;;
esac
[ "$rounds" -ge 2 ] && [ "$iterations" -ge 1 ] ||
	{ echo "torch_overhead.sh: --rounds must be at least 2, --iterations at least 1" >&2; exit 2; }
"$cuprobe" --version >/dev/null 2>&1 || { echo "torch_overhead.sh: $cuprobe does not run" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

workload=(python3 "$here/gpu/torch_mlp.py" --iterations "$iterations")
IFS=, read -r -a modes <<<"$modes_list"
case ",$modes_list," in *,untraced,*) ;; *) echo "torch_overhead.sh: --modes must include untraced (the baseline)" >&2; exit 2 ;; esac
for m in "${modes[@]}"; do
	case "$m" in untraced | trace | trace-wake1s | stats) ;;
	*) echo "torch_overhead.sh: unknown mode '$m' (untraced, trace, trace-wake1s, stats)" >&2; exit 2 ;; esac
done
run_mode() { # mode: prints the run's us_per_step
	local log=$work/run.out
	case "$1" in
	untraced) "${workload[@]}" >"$log" 2>&1 ;;
	trace) "$cuprobe" trace --json -o /dev/null -- "${workload[@]}" >"$log" 2>"$work/cuprobe.err" ;;
	trace-wake1s) "$cuprobe" trace --json --wakeup-latency 1000000 -o /dev/null -- "${workload[@]}" \
		>"$log" 2>"$work/cuprobe.err" ;;
	stats) "$cuprobe" stats -o /dev/null -- "${workload[@]}" >"$log" 2>"$work/cuprobe.err" ;;
	esac || { echo "torch_overhead.sh: the $1 run failed:" >&2; cat "$log" "$work/cuprobe.err" >&2 2>/dev/null; exit 1; }
	sed -n 's/.*us_per_step=\([0-9.]*\).*/\1/p' "$log" | tail -1 | grep . ||
		{ echo "torch_overhead.sh: no us_per_step in the $1 run's output:" >&2; cat "$log" >&2; exit 1; }
}

"${workload[@]}" --iterations 50 >/dev/null 2>&1 # warm caches (Triton/cuBLAS, the page cache)
: >"$work/samples"
for r in $(seq "$rounds"); do
	for i in "${!modes[@]}"; do
		mode=${modes[$(((r + i) % ${#modes[@]}))]}
		echo "$r $mode $(run_mode "$mode")" >>"$work/samples"
	done
done

python3 - "$work/samples" "$out/torch-overhead.md" "$invoked" "$iterations" "$modes_list" <<'PY'
import statistics as st, sys
samples, md, invoked, iterations, modes = sys.argv[1:6]
modes = modes.split(",")
names = {"untraced": "untraced", "trace": "cuprobe trace --json -o /dev/null",
         "trace-wake1s": "cuprobe trace --json --wakeup-latency 1000000 -o /dev/null",
         "stats": "cuprobe stats"}
short = {"untraced": "untraced", "trace": "trace --json", "trace-wake1s": "trace, wakeup 1 s",
         "stats": "stats"}
by = {}
for line in open(samples):
    r, mode, us = line.split()
    by.setdefault(mode, {})[int(r)] = float(us)
rounds = sorted(by["untraced"])
base = [by["untraced"][r] for r in rounds]
b = st.median(base)
mad = st.median(abs(x - b) for x in base)
lines = [
    f"PyTorch MLP step (gpu/torch_mlp.py, {iterations} synchronizing steps a run), "
    f"{len(rounds)} rounds, modes interleaved with the order rotated each round.",
    "", f"command: `{invoked}`", "",
    "| round | " + " | ".join(f"{short[m]} us/step" for m in modes) + " |",
    "| ---: | " + " | ".join("---:" for m in modes) + " |",
]
lines += ["| " + " | ".join([str(r)] + [f"{by[m][r]:.1f}" for m in modes]) + " |" for r in rounds]
lines += ["", "| mode | median us/step | slowdown: against the untraced median | slowdown: median of the rounds' own ratios | noise of the untraced rounds |",
          "| --- | ---: | ---: | ---: | --- |",
          f"| untraced | {b:.1f} | - | - | spread {100 * (max(base) - min(base)) / b:.2f}%, MAD {100 * mad / b:.2f}% |"]
for mode in (m for m in modes if m != "untraced"):
    name = names[mode]
    m = st.median(by[mode].values())
    paired = st.median(by[mode][r] / by["untraced"][r] for r in rounds)
    lines.append(f"| {name} | {m:.1f} | {100 * (m - b) / b:+.2f}% | {100 * (paired - 1):+.2f}% | |")
text = "\n".join(lines) + "\n"
open(md, "w").write(text)
print(text, end="")
PY
