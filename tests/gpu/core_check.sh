#!/bin/bash
# GPU check for the cuprobe core (issue 2), run on the H200 through the device
# with a static build in gpu-bundle/ (see tests/gpu/README.md):
#   gpu-bundle/cuprobe  gpu-bundle/bin/{vec_add,vec_add_shared,drv_launch}
# Prints a table last; exits non-zero when a check fails.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${BUNDLE:-$here/gpu-bundle}
out=${OUT:-/tmp/cuprobe-gpu-check}
mkdir -p "$out"
work=$(mktemp -d)
cuprobe=$bundle/bin/cuprobe; [ -x "$cuprobe" ] || cuprobe=$bundle/cuprobe
fail=0
rows=()

row() { rows+=("$(printf '| %-44s | %-10s | %-10s | %-4s |' "$1" "$2" "$3" "$4")"); [ "$4" = ok ] || fail=1; }

# count FILE PID-or-empty: prints launches named unnamed ex
count() {
	python3 - "$1" "${2:-}" <<'PY'
import json, sys
path, pid = sys.argv[1], sys.argv[2]
launches = named = ex = 0
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    e = json.loads(line)
    if e["type"] != "launch" or (pid and str(e["pid"]) != pid):
        continue
    if "graph_exec" in e:
        continue
    launches += 1
    named += e.get("kernel") is not None
    ex += e["api"].startswith("cuLaunchKernelEx")
print(launches, named, launches - named, ex)
PY
}

lost_of() { sed -n 's/.* delivered, \([0-9]*\) lost.*/\1/p' "$1" | tail -1; }

nvidia-smi -L | head -2
echo "libcuda: $(ls -l /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null || ldconfig -p | grep libcuda.so.1)"

# 1. vec_add (static cudart), 10000 launches, traced from the start.
"$cuprobe" trace --json -o "$work/vec_add.json" -- "$bundle/bin/vec_add" 10000 >"$work/vec_add.out" 2>"$work/vec_add.err"
rc=$?
read -r n named unnamed ex < <(count "$work/vec_add.json")
lost=$(lost_of "$work/vec_add.err")
cat "$work/vec_add.out" "$work/vec_add.err"
row "vec_add 10000: exit status" "$rc" "0" "$([ "$rc" = 0 ] && echo ok || echo FAIL)"
row "vec_add 10000: launch events" "$n" "10000" "$([ "$n" = 10000 ] && echo ok || echo FAIL)"
row "vec_add 10000: launches with unknown names" "$unnamed" "0" "$([ "$unnamed" = 0 ] && echo ok || echo FAIL)"
row "vec_add 10000: records lost" "${lost:-?}" "0" "$([ "${lost:-x}" = 0 ] && echo ok || echo FAIL)"
grep -m1 '"type":"launch"' "$work/vec_add.json"

# 2. vec_add with shared cudart.
LD_LIBRARY_PATH=$bundle/lib "$cuprobe" trace --json -o "$work/vec_add_shared.json" -- "$bundle/bin/vec_add_shared" 1000 >"$work/vs.out" 2>"$work/vs.err"
rc=$?
read -r n named unnamed ex < <(count "$work/vec_add_shared.json")
row "vec_add_shared 1000: launches / unnamed" "$n/$unnamed" "1000/0" "$([ "$rc/$n/$unnamed" = 0/1000/0 ] && echo ok || echo FAIL)"

# 3. drv_launch through the real driver: 4 threads x 250, cuLaunchKernelEx and cuLibraryGetKernel.
"$cuprobe" trace --json -o "$work/drv.json" -- "$bundle/bin/drv_launch" 250 4 --ex --library >"$work/drv.out" 2>"$work/drv.err"
rc=$?
cat "$work/drv.out" "$work/drv.err"
read -r n named unnamed ex < <(count "$work/drv.json")
row "drv_launch 250x4 --ex --library: launches" "$n/$unnamed" "1000/0" "$([ "$rc/$n/$unnamed" = 0/1000/0 ] && echo ok || echo FAIL)"
row "drv_launch: via cuLaunchKernelEx" "$ex" "1000" "$([ "$ex" = 1000 ] && echo ok || echo FAIL)"

# 4. System-wide: a PyTorch matmul loop started after cuprobe attached.
"$cuprobe" trace --json -v -o "$work/sys.json" >"$work/sys.out" 2>"$work/sys.err" &
cp_pid=$!
for _ in $(seq 100); do grep -q "tracing" "$work/sys.err" && break; sleep 0.1; done
python3 "$here/gpu/torch_matmul.py" --iterations 500 --size 2048 --dtype bfloat16 >"$work/torch.out" 2>&1
torch_rc=$?
sleep 0.5
kill -INT "$cp_pid"; wait "$cp_pid"; sys_rc=$?
cat "$work/torch.out"; grep -v "probe symbols absent" "$work/sys.err" | tail -3
torch_pid=$(sed -n 's/.*torch_matmul: pid=\([0-9]*\).*/\1/p' "$work/torch.out" | head -1)
read -r n named unnamed ex < <(count "$work/sys.json" "$torch_pid")
row "system-wide: torch exit / cuprobe exit" "$torch_rc/$sys_rc" "0/0" "$([ "$torch_rc/$sys_rc" = 0/0 ] && echo ok || echo FAIL)"
row "system-wide: torch launches seen" "$n" ">= 500" "$([ "${n:-0}" -ge 500 ] && echo ok || echo FAIL)"
row "system-wide: of them cuLaunchKernelEx (cuBLAS)" "$ex" ">= 500" "$([ "${ex:-0}" -ge 500 ] && echo ok || echo FAIL)"
row "system-wide: torch launches unnamed" "$unnamed" "(info)" "ok"
python3 - "$work/sys.json" "$torch_pid" <<'PY' > "$out/torch_kernels.txt"
import collections, json, sys
c = collections.Counter()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["type"] == "launch" and str(e["pid"]) == sys.argv[2] and "graph_exec" not in e:
        c[(e["api"], (e.get("kernel") or "<unnamed>")[:90])] += 1
for (api, k), v in c.most_common(8):
    print(f"{v:7d} {api:22s} {k}")
PY
cat "$out/torch_kernels.txt"
cp "$work"/*.err "$out/" 2>/dev/null

echo
echo "| check                                        | measured   | expected   |      |"
echo "|----------------------------------------------|------------|------------|------|"
printf '%s\n' "${rows[@]}"
exit $fail
