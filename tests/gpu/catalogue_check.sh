#!/bin/bash
# The probe catalogue and attach events on a machine with a GPU and its real
# driver: every family of drv_apis counted exactly, torch.cuda.synchronize()
# counted exactly, VMM memory of PyTorch's expandable segments against
# torch.cuda.max_memory_reserved(), driver files copied elsewhere and into a
# private mount namespace after a system-wide trace started, and the attach
# delay of a new driver file over 20 runs.
#
# Needs a static cuprobe and the workloads in BUNDLE (default gpu-bundle/ of this
# checkout; tests/gpu/README.md says how to build them):
#   BUNDLE/bin/{cuprobe,drv_launch,drv_apis}
# and python3 with torch. Writes results-catalogue.md to OUT (default
# /tmp/cuprobe-catalogue), prints the table last, exits 1 when a check fails.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${BUNDLE:-$here/gpu-bundle}
out=${OUT:-/tmp/cuprobe-catalogue}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cuprobe=$bundle/bin/cuprobe
bin=$bundle/bin
fail=0
rows=()

row() { # check measured expected verdict
	rows+=("$(printf '| %-60s | %-22s | %-16s | %-4s |' "$1" "$2" "$3" "$4")")
	[ "$4" = ok ] || [ "$4" = info ] || fail=1
}
verdict() { if eval "$1"; then echo ok; else echo FAIL; fi; }

# The real driver: where the loader finds libcuda.so.1 here.
driver=$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64/ { print $NF; exit }')
if [ -z "$driver" ]; then
	for d in ${LD_LIBRARY_PATH//:/ } /usr/lib/x86_64-linux-gnu /usr/lib64; do
		[ -e "$d/libcuda.so.1" ] && driver=$d/libcuda.so.1 && break
	done
fi
driver=$(readlink -f "$driver")
driver_dir=$(dirname "$driver")
echo "driver: $(basename "$driver")"
nvidia-smi -L | head -1

# Every catalogued API drv_apis called, counted exactly by cuprobe stats.
compare_apis() { # stats.json workload.txt catalogue.txt -> "compared mismatches peak_ok live"
	python3 - "$1" "$2" "$3" <<'PY'
import json, re, sys
stats = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
text = open(sys.argv[2]).read()
# Probed driver APIs: the first table of "cuprobe probes" (API FAMILY LIBRARY PROGRAMS...).
probed = set()
for line in open(sys.argv[3]):
    if not line.strip():
        break  # the exclusions follow
    f = line.split()
    if len(f) >= 4 and f[2] == "libcuda":
        probed.add(f[0])
work = {m.group(1): int(m.group(2)) for m in re.finditer(r"drv_apis: api=(\S+) calls=(\d+)", text)}
summary = re.search(r"drv_apis: pid=(\d+) .*peak_device_bytes=(\d+)", text)
pid, peak = int(summary.group(1)), int(summary.group(2))
report = [s for s in stats if s["type"] == "stats" and s["pid"] == pid][-1]
seen = {a["api"]: a["calls"] for a in report["apis"]}
# Both ways: every probed API the workload called is counted exactly, and nothing else is counted.
keys = sorted((set(work) & probed) | set(seen))
mismatches = [f"{k}:{work.get(k, 0)}/{seen.get(k, 0)}" for k in keys if work.get(k, 0) != seen.get(k, 0)]
print(len(keys), len(mismatches), int(report["memory"]["peak_bytes"] == peak),
      report["memory"]["live_bytes"], " ".join(mismatches))
PY
}
"$cuprobe" probes > "$work/catalogue.txt"
"$cuprobe" stats --json -o "$work/apis.json" -- "$bin/drv_apis" 3 > "$work/apis.txt" 2> "$work/apis.err"
read -r compared mismatches peak_ok live rest < <(compare_apis "$work/apis.json" "$work/apis.txt" "$work/catalogue.txt")
[ -n "$rest" ] && echo "mismatches: $rest"
row "drv_apis x3: catalogued APIs counted exactly" "$compared APIs, $mismatches off" "0 off" "$(verdict "[ ${mismatches:-1} = 0 ] && [ ${compared:-0} -gt 50 ]")"
row "drv_apis x3: peak device bytes (VMM included) exact" "$peak_ok" "1" "$(verdict "[ ${peak_ok:-0} = 1 ]")"
row "drv_apis x3: live device bytes at exit" "$live" "0" "$(verdict "[ ${live:-1} = 0 ]")"

# torch.cuda.synchronize(): the difference between 110 and 10 calls is 100.
syncs_of() { # stats.json -> context syncs of the python process
	python3 - "$1" <<'PY'
import json, sys
stats = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
total = 0
for s in stats:
    if s["type"] == "stats" and s["final"]:
        total += sum(a["calls"] for a in s["apis"] if a["api"].startswith("cuCtxSynchronize"))
print(total)
PY
}
for n in 10 110; do
	"$cuprobe" stats --json -o "$work/sync$n.json" -- python3 "$here/gpu/torch_mlp.py" \
		--iterations 20 --synchronize $n > "$work/sync$n.txt" 2>&1
done
s10=$(syncs_of "$work/sync10.json"); s110=$(syncs_of "$work/sync110.json")
apis110=$(python3 -c "
import json
for l in open('$work/sync110.json'):
    s = json.loads(l)
    if s['type'] == 'stats' and s['final']:
        print(' '.join(f\"{a['api']}={a['calls']}\" for a in s['apis'] if 'Synchronize' in a['api']))" | head -1)
echo "syncs: 10 -> $s10, 110 -> $s110 ($apis110)"
row "torch.cuda.synchronize() x100 more: context syncs more" "$((s110 - s10))" "100" "$(verdict "[ $((s110 - s10)) = 100 ]")"

# PyTorch's expandable segments (cuMemCreate/cuMemMap) against its own count.
# PyTorch's allocator is the only VMM user in the process, so VMM physical
# memory is exactly what it reserved; device memory also holds what cuBLAS
# allocates for itself (cublasCreate), live until exit, which the leak report
# at exit names.
vmm_run() { # tag alloc-conf -> "peak vmm_peak reserved live vmm_live outside pct_vmm pct_total"
	PYTORCH_CUDA_ALLOC_CONF=$2 "$cuprobe" stats --stacks --json -o "$work/$1.json" -- \
		python3 "$here/gpu/torch_mlp.py" --iterations 50 --batch 4096 --hidden 4096 --release \
		> "$work/$1.txt" 2>&1
	python3 - "$work/$1.json" "$work/$1.txt" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
text = open(sys.argv[2]).read()
reserved = int(re.search(r"max_memory_reserved=(\d+)", text).group(1))
pid = int(re.search(r"torch_mlp: pid=(\d+)", text).group(1))
mem = [s for s in lines if s["type"] == "stats" and s["pid"] == pid][-1]["memory"]
# Live at exit, by who allocated it: the leak report's stacks.
outside = sum(site["bytes"] for l in lines if l["type"] == "leak_report" and l["pid"] == pid
              for site in l["sites"] if any("cublasCreate" in f for f in site["stack"] or []))
pct = lambda v: f"{100.0 * (v - reserved) / reserved:.2f}"
print(mem["peak_bytes"], mem["vmm_peak_bytes"], reserved, mem["live_bytes"], mem["vmm_live_bytes"],
      outside, pct(mem["vmm_peak_bytes"]), pct(mem["peak_bytes"] - outside))
PY
}
within5() { python3 -c "import sys; sys.exit(0 if abs(float('$1')) <= 5 else 1)"; }
read -r peak vmm_peak reserved live vmm_live outside pct_vmm pct_total < <(vmm_run expandable expandable_segments:True)
row "expandable segments: peak VMM physical vs max_memory_reserved" "$vmm_peak vs $reserved ($pct_vmm%)" "within 5%" "$(verdict "within5 $pct_vmm")"
row "expandable segments: VMM physical bytes live at exit" "$vmm_live" "0" "$(verdict "[ ${vmm_live:-1} = 0 ]")"
row "expandable segments: peak device bytes minus cuBLAS's own" "$((peak - outside)) ($pct_total%)" "within 5%" "$(verdict "within5 $pct_total")"
row "expandable segments: live at exit, all from cublasCreate" "$live ($outside cuBLAS)" "equal" "$(verdict "[ ${live:-0} = ${outside:-1} ]")"
read -r peak vmm_peak reserved live vmm_live outside pct_vmm pct_total < <(vmm_run default "")
row "default allocator: peak device bytes minus cuBLAS's own" "$((peak - outside)) vs $reserved ($pct_total%)" "within 5%" "$(verdict "within5 $pct_total")"
row "default allocator: live at exit, all from cublasCreate" "$live ($outside cuBLAS)" "equal" "$(verdict "[ ${live:-0} = ${outside:-1} ]")"

# A system-wide trace first; then a driver copied to another directory, and a
# private copy in another mount namespace: exact launch counts for both.
launches_of() { # events.json pid
	python3 -c "
import json, sys
n = 0
for l in open('$1'):
    e = json.loads(l)
    n += e['type'] == 'launch' and e['pid'] == $2
print(n)"
}
delay_of() { # events.json pid -> ms
	python3 -c "
import json
for l in open('$1'):
    e = json.loads(l)
    if e['type'] == 'attach' and e['pid'] == $2 and 'delay_ns' in e:
        print(f\"{e['delay_ns'] / 1e6:.2f}\"); break
else:
    print('none')"
}
mkdir -p "$work/copy" "$work/private"
cp "$driver" "$work/copy/libcuda.so.1"
"$cuprobe" trace -v --json -o "$work/sw.json" -d 300 2> "$work/sw.err" &
tracer=$!
for _ in $(seq 200); do grep -q "tracing (" "$work/sw.err" && break; sleep 0.1; done
LD_LIBRARY_PATH="$work/copy:$driver_dir" "$bin/drv_launch" 300 --start-delay 500 > "$work/copy.txt"
unshare -m sh -c "mount -t tmpfs cuprobe-check '$work/private' && cp '$driver' '$work/private/libcuda.so.1' && \
	LD_LIBRARY_PATH='$work/private:$driver_dir' exec '$bin/drv_launch' 400 --start-delay 500" > "$work/private.txt"
kill -INT $tracer; wait $tracer
copy_pid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$work/copy.txt")
private_pid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$work/private.txt")
n=$(launches_of "$work/sw.json" "$copy_pid")
row "system-wide, then a driver copied elsewhere: launches" "$n (attach $(delay_of "$work/sw.json" "$copy_pid") ms)" "300" "$(verdict "[ $n = 300 ]")"
n=$(launches_of "$work/sw.json" "$private_pid")
row "system-wide, then a private copy (unshare -m): launches" "$n (attach $(delay_of "$work/sw.json" "$private_pid") ms)" "400" "$(verdict "[ $n = 400 ]")"

# The attach delay of a new driver file, 20 runs; the mapping process is held
# (a command's tree), so each run's 20 launches are all seen.
delays=()
exact=0
for i in $(seq 20); do
	mkdir -p "$work/fresh$i"
	"$cuprobe" trace --json -o "$work/fresh$i.json" -- sh -c \
		"cp '$driver' '$work/fresh$i/libcuda.so.1' && LD_LIBRARY_PATH='$work/fresh$i:$driver_dir' exec '$bin/drv_launch' 20" \
		> "$work/fresh$i.txt" 2> "$work/fresh$i.err"
	d=$(sed -n 's/.*probes live \([0-9.]*\) ms after its first mapping.*/\1/p' "$work/fresh$i.err" | head -1)
	[ -n "$d" ] && delays+=("$d")
	pid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$work/fresh$i.txt")
	[ "$(launches_of "$work/fresh$i.json" "${pid:-0}")" = 20 ] && exact=$((exact + 1))
	rm -f "$work/fresh$i/libcuda.so.1"
done
read -r p50 p99 < <(printf '%s\n' "${delays[@]}" | sort -g | awk '{ v[NR] = $1 } END {
	if (!NR) { print "none none"; exit } i = int(0.5 * NR + 0.5); j = int(0.99 * NR + 0.99);
	if (i < 1) i = 1; if (j > NR) j = NR; print v[i], v[j] }')
row "new driver file, held process: runs with all 20 launches" "$exact of 20" "20 of 20" "$(verdict "[ $exact = 20 ]")"
row "attach delay of a new driver file, ${#delays[@]} runs: p50 / p99" "$p50 / $p99 ms" "-" info

{
	echo "# Probe catalogue and attach events on a machine with a GPU"
	echo
	echo "- $(nvidia-smi -L | head -1 | sed 's/ (UUID.*//'); driver $(basename "$driver"); $(uname -sr)"
	echo "- $(python3 -c 'import torch; print("torch", torch.__version__)')"
	echo "- command: \`bash tests/gpu/catalogue_check.sh\` (static cuprobe and workloads in gpu-bundle/, see tests/gpu/README.md)"
	echo
	echo "| check | measured | expected | |"
	echo "|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} > "$out/results-catalogue.md"
cat "$out/results-catalogue.md"
exit $fail
