#!/bin/bash
# GPU acceptance for cuprobe on a real GPU (issue 6): real workloads traced
# exactly, late attach, system-wide, and overhead against untraced runs
# interleaved in the same call. Run on a machine with a GPU, with a static
# build copied into gpu-bundle/ (tests/gpu/README.md says how to make it):
#   gpu-bundle/bin/{cuprobe,vec_add,vec_add_shared,drv_launch,graph_replay,gemm_loop}
#   gpu-bundle/lib/libcudart.so.13
# gemm_loop and vec_add_shared find libcublas/libcudart in PyTorch's
# nvidia/cu13/lib (or gpu-bundle/lib) through LD_LIBRARY_PATH, set for them alone.
# Prints a table last; exits non-zero when a check fails.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${BUNDLE:-$here/gpu-bundle}
out=${OUT:-/tmp/cuprobe-acceptance}
rounds=${ROUNDS:-3}
mkdir -p "$out"
work=$(mktemp -d)
cuprobe=$bundle/bin/cuprobe
bin=$bundle/bin
nvlib=$(python3 -c 'import os, torch; print(os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cu13", "lib")))' 2>/dev/null)
libs="$bundle/lib:$nvlib"
fail=0
rows=()

row() { # check measured expected verdict
	rows+=("$(printf '| %-52s | %-14s | %-12s | %-4s |' "$1" "$2" "$3" "$4")")
	[ "$4" = ok ] || [ "$4" = info ] || fail=1
}
verdict() { if eval "$1"; then echo ok; else echo FAIL; fi; }

# launches FILE [PID] [KERNEL-SUBSTRING]: "launches named graphs lost_marker"
count() {
	python3 - "$@" <<'PY'
import json, sys
path = sys.argv[1]
pid = sys.argv[2] if len(sys.argv) > 2 else ""
kernel = sys.argv[3] if len(sys.argv) > 3 else ""
launches = named = graphs = 0
for line in open(path):
    try:
        e = json.loads(line)
    except json.JSONDecodeError:
        continue
    if e["type"] != "launch" or (pid and str(e["pid"]) != pid):
        continue
    if "graph_exec" in e:
        graphs += 1
        continue
    if kernel and kernel not in (e.get("mangled") or ""):
        continue
    launches += 1
    named += e.get("kernel") is not None
print(launches, named, graphs)
PY
}
lost_of() { sed -n 's/.* delivered, \([0-9]*\) lost.*/\1/p' "$1" | tail -1; }
value_of() { sed -n "s/.*$2=\([0-9.]*\).*/\1/p" "$1" | head -1; }

nvidia-smi -L | head -1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'

# ---- 1. traced from the start: exact counts, names, nothing lost --------------
trace_from_start() { # name expected-launches kernel-substring command...
	local name=$1 expect=$2 kernel=$3; shift 3
	"$cuprobe" trace --json -o "$work/$name.json" -- "$@" >"$work/$name.out" 2>"$work/$name.err"
	local rc=$? lost
	lost=$(lost_of "$work/$name.err")
	read -r n named graphs < <(count "$work/$name.json" "" "$kernel")
	read -r all all_named _ < <(count "$work/$name.json")
	row "$name: exit status, records lost" "$rc, ${lost:-?}" "0, 0" "$(verdict "[ $rc = 0 ] && [ '${lost:-x}' = 0 ]")"
	if [ "$expect" = any ]; then
		row "$name: launches seen" "$all" "> 0" "$(verdict "[ $all -gt 0 ]")"
	else
		row "$name: launches of its kernel" "$n" "$expect" "$(verdict "[ $n = $expect ]")"
	fi
	row "$name: launches with unknown names" "$((all - all_named))" "0" "$(verdict "[ $all = $all_named ]")"
	echo "$graphs" > "$work/$name.graphs"
}
trace_from_start vec_add 5000 vec_add_kernel "$bin/vec_add" 5000
trace_from_start vec_add_shared 5000 vec_add_kernel env LD_LIBRARY_PATH="$libs" "$bin/vec_add_shared" 5000
trace_from_start drv_launch_4x4 2000 vec_add "$bin/drv_launch" 500 4
streams=$(python3 -c "
import json; s=set()
for l in open('$work/drv_launch_4x4.json'):
    e=json.loads(l)
    if e['type']=='launch': s.add((e['tid'], e['stream']))
print(len({t for t,_ in s}), len({st for _,st in s}))")
row "drv_launch 500x4: threads, streams launching" "$streams" "4 4" "$(verdict "[ '$streams' = '4 4' ]")"
trace_from_start graph_replay 5 graph_step_kernel "$bin/graph_replay" 1000 4
graphs=$(cat "$work/graph_replay.graphs")
row "graph_replay 1000: cuGraphLaunch events" "$graphs" "1000" "$(verdict "[ $graphs = 1000 ]")"
trace_from_start gemm_loop any "" env LD_LIBRARY_PATH="$nvlib" "$bin/gemm_loop" 2000 512
trace_from_start torch_mlp any "" python3 "$here/gpu/torch_mlp.py" --iterations 200
trace_from_start triton_add 1001 add_kernel python3 "$here/gpu/triton_add.py" --iterations 1000

# Device memory back to 0 at a clean exit (cuprobe stats, counted in maps).
for w in "vec_add $bin/vec_add 2000" "drv_launch $bin/drv_launch 200 2" "graph_replay $bin/graph_replay 100" "gemm_loop env LD_LIBRARY_PATH=$nvlib $bin/gemm_loop 200 512"; do
	set -- $w
	name=$1; shift
	"$cuprobe" stats --json -o "$work/$name.stats.json" -- "$@" >/dev/null 2>"$work/$name.stats.err"
	live=$(python3 -c "
import json
for l in open('$work/$name.stats.json'):
    e=json.loads(l)
    if e['type']=='stats' and e['exited'] and e.get('memory'): print(e['memory']['live_bytes'], e['memory']['peak_bytes']); break")
	row "$name: live device bytes at exit (peak)" "${live:-none}" "0 (...)" "$(verdict "[ '${live%% *}' = 0 ]")"
done

# ---- 2. late attach to a PyTorch loop already running ---------------------------
python3 "$here/gpu/torch_mlp.py" --duration 25 >"$work/late.out" 2>&1 &
t_pid=$!
for _ in $(seq 300); do grep -q ready "$work/late.out" && break; sleep 0.1; done
sleep 2
"$cuprobe" trace -p "$t_pid" --runtime --json -o "$work/late.json" -d 5 2>"$work/late.err"
late_rc=$?
kill "$t_pid" 2>/dev/null; wait "$t_pid" 2>/dev/null
read -r late_total late_after late_named_after < <(python3 - "$work/late.json" "$t_pid" <<'PY'
import json, sys
launch = []
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == "launch" and "graph_exec" not in e and str(e["pid"]) == sys.argv[2]:
        launch.append(e)
t0 = launch[0]["time_ns"] if launch else 0
after = [e for e in launch if e["time_ns"] - t0 >= 1e9]
print(len(launch), len(after), sum(e.get("kernel") is not None for e in after))
PY
)
pct=$(python3 -c "print(f'{100.0 * $late_named_after / max($late_after, 1):.1f}')")
row "late attach: cuprobe exit, launches seen in 5 s" "$late_rc, $late_total" "0, > 0" "$(verdict "[ $late_rc = 0 ] && [ $late_total -gt 0 ]")"
row "late attach: named after the first second" "$pct%" ">= 95%" "$(verdict "python3 -c 'import sys; sys.exit(0 if $pct >= 95 else 1)'")"
grep -E "driver's records|could not be named|delivered" "$work/late.err"

# ---- 3. system-wide, everything at once ---------------------------------------------
"$cuprobe" trace --json -v -o "$work/sys.json" >/dev/null 2>"$work/sys.err" &
cp_pid=$!
for _ in $(seq 100); do grep -q tracing "$work/sys.err" && break; sleep 0.1; done
"$bin/vec_add" 5000 >"$work/s_vec.out" & p1=$!
"$bin/drv_launch" 500 4 >"$work/s_drv.out" & p2=$!
"$bin/graph_replay" 1000 4 >"$work/s_graph.out" & p3=$!
LD_LIBRARY_PATH="$nvlib" "$bin/gemm_loop" 2000 512 >"$work/s_gemm.out" & p4=$!
python3 "$here/gpu/triton_add.py" --iterations 1000 >"$work/s_triton.out" & p5=$!
python3 "$here/gpu/torch_mlp.py" --iterations 200 >"$work/s_mlp.out" & p6=$!
wait $p1 $p2 $p3 $p4 $p5 $p6
sleep 0.5
kill -INT "$cp_pid"; wait "$cp_pid"
sys_lost=$(lost_of "$work/sys.err")
read -r n _ _ < <(count "$work/sys.json" "$p1" vec_add_kernel)
row "system-wide: vec_add launches" "$n" "5000" "$(verdict "[ $n = 5000 ]")"
read -r n _ _ < <(count "$work/sys.json" "$p2" vec_add)
row "system-wide: drv_launch launches" "$n" "2000" "$(verdict "[ $n = 2000 ]")"
read -r _ _ g < <(count "$work/sys.json" "$p3")
row "system-wide: graph_replay cuGraphLaunch" "$g" "1000" "$(verdict "[ $g = 1000 ]")"
tpid=$(value_of "$work/s_triton.out" pid)
read -r n _ _ < <(count "$work/sys.json" "$tpid" add_kernel)
row "system-wide: triton add_kernel launches" "$n" "1001" "$(verdict "[ $n = 1001 ]")"
read -r n named _ < <(count "$work/sys.json" "$p4")
read -r n2 named2 _ < <(count "$work/sys.json" "$(value_of "$work/s_mlp.out" pid)")
row "system-wide: gemm, torch launches (unnamed)" "$n ($((n - named))), $n2 ($((n2 - named2)))" "> 0 (0)" "$(verdict "[ $n -gt 0 ] && [ $n2 -gt 0 ] && [ $n = $named ] && [ $n2 = $named2 ]")"
row "system-wide: records lost" "${sys_lost:-?}" "0" "$(verdict "[ '${sys_lost:-x}' = 0 ]")"

# ---- 4. overhead, untraced and traced runs interleaved --------------------------------
overhead() { # name field command...: prints base_median traced_median
	local name=$1 field=$2; shift 2
	local r base=() traced=()
	for r in $(seq "$rounds"); do
		"$@" >"$work/o.out" 2>/dev/null; base+=("$(value_of "$work/o.out" "$field")")
		"$cuprobe" trace --json -o /dev/null -- "$@" >"$work/o.out" 2>/dev/null; traced+=("$(value_of "$work/o.out" "$field")")
	done
	python3 -c "
import statistics as s
b=[float(x) for x in '${base[*]}'.split()]; t=[float(x) for x in '${traced[*]}'.split()]
print(f'{s.median(b):.1f} {s.median(t):.1f}')"
}
read -r b t < <(overhead vec_add ns_per_call "$bin/vec_add" 20000)
row "empty-kernel launch: ns untraced / traced" "$b / $t" "(info)" info
row "empty-kernel launch: added per launch" "$(python3 -c "print(f'{$t - $b:.0f} ns, {$t / $b:.2f}x')")" "(info)" info
read -r b t < <(overhead gemm ns_per_call env LD_LIBRARY_PATH="$nvlib" "$bin/gemm_loop" 2000 1024)
row "cuBLAS SGEMM 1024: slowdown" "$(python3 -c "print(f'{100 * ($t - $b) / $b:.2f}%')")" "(info)" info
read -r b t < <(overhead torch us_per_step python3 "$here/gpu/torch_mlp.py" --iterations 300)
row "PyTorch MLP step ($b us untraced): slowdown" "$(python3 -c "print(f'{100 * ($t - $b) / $b:.2f}%')")" "(info)" info

cp "$work"/*.err "$out/" 2>/dev/null
echo
echo "| check                                                | measured       | expected     |      |"
echo "|------------------------------------------------------|----------------|--------------|------|"
printf '%s\n' "${rows[@]}"
exit $fail
