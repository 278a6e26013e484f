#!/bin/bash
# NCCL on a machine with one GPU: torch.distributed on the NCCL backend with
# one rank (gpu/torch_nccl.py: all_reduce SUM and AVG, broadcast,
# all_gather_into_tensor, reduce_scatter_tensor SUM and AVG, known sizes),
# traced four ways at once and one after the other:
#   trace --timeline --perfetto -- the script (libnccl comes from the wheel,
#     mapped at `import torch`: an attach event, the process held until probed);
#   stats --timeline and the exporter, system-wide, watching that same run;
#   trace -p on a second run, attached while it waits (exact from then on).
# Checked: per operation, calls and bytes exactly the script's; the
# communicator's rank, size and NCCL's commId hash (against NCCL_DEBUG=INFO's
# "commId 0x..."); the kernels NCCL launches (one-rank NCCL launches only
# for AVG, its PreMulSum: oneRankReduce) named and linked to their
# collective, the other collectives linked to none; the Perfetto collective
# slices; the wheel's libnccl: every export probed or excluded, the pnccl*
# names aliases of the nccl* ones.
#
# Needs BUNDLE/bin/{cuprobe,cuprobe-dyn} (tests/gpu/README.md) and python3
# with torch and its NCCL (nvidia-nccl-cu13). Writes results-nccl.md to OUT
# (default /tmp/cuprobe-nccl), prints the table last, exits 1 when a check
# fails.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
. "$(dirname "$0")/common.sh" nccl
port=${PORT:-19468}
iterations=${ITERATIONS:-20}

nvidia-smi -L | head -1
libnccl=$(python3 -c 'import nvidia.nccl, os; d = os.path.join(list(nvidia.nccl.__path__)[0], "lib"); print(os.path.join(d, "libnccl.so.2"))')
echo "libnccl: $libnccl"
"$cuprobe" probes --lib "$libnccl" > "$work/probes.txt" 2>&1
tail -1 "$work/probes.txt"

start_watcher exporter "$bundle/bin/cuprobe-dyn" exporter -i 1 --listen "127.0.0.1:$port" -v
start_watcher stats "$cuprobe" stats --json --timeline -o "$work/stats.json" -v
wait_attached exporter stats
"$cuprobe" trace --json --timeline -o "$work/trace.json" --perfetto "$work/trace.perfetto.json" -- \
	python3 "$here/gpu/torch_nccl.py" --iterations "$iterations" > "$work/run.txt" 2> "$work/run.err" ||
	{ echo "the traced run failed:"; tail -20 "$work/run.err"; }
cat "$work/run.txt"
sleep 3
curl -s "http://127.0.0.1:$port/metrics" > "$work/metrics.txt"
stop_watchers

# The late attach: a second run waits for a file; cuprobe attaches by pid, then the file comes.
rm -f "$work/go"
python3 "$here/gpu/torch_nccl.py" --iterations "$iterations" --wait-file "$work/go" \
	> "$work/late.txt" 2> "$work/late.err" &
late=$!
for i in $(seq 1 600); do grep -q ready "$work/late.txt" && break; sleep 0.1; done
late_pid=$(sed -n 's/.*ready pid=\([0-9]*\).*/\1/p' "$work/late.txt")
"$cuprobe" trace --json -v -o "$work/late.json" -p "$late_pid" 2> "$work/late.cuprobe.err" &
tracer=$!
for i in $(seq 1 600); do grep -q "tracing (" "$work/late.cuprobe.err" && break; sleep 0.1; done
touch "$work/go"
wait "$late"
wait "$tracer"
cat "$work/late.txt"

python3 - "$work" "$out" "$libnccl" <<'PY'
import json, re, struct, sys
from checks import finish, note, row
work, out, libnccl = sys.argv[1:4]

def workload(path):
    text = open(path).read()
    ops = {m[0]: (int(m[1]), int(m[2]), int(m[3]))
           for m in re.findall(r"torch_nccl: op=(\w+) calls=(\d+) bytes=(\d+) kernels=(\d+)", text)}
    m = re.search(r"torch_nccl: pid=(\d+) .*nccl=(\S+) window_start_ns=(\d+) window_end_ns=(\d+) result=ok", text)
    return ops, m

def records(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]

def elf_functions(path):
    """Dynamic function symbols of an ELF64 file: name -> address (.dynsym, by its section header)."""
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = {}
    for s in sections:
        if s[1] != 11:  # SHT_DYNSYM
            continue
        strtab = sections[s[6]]
        for off in range(s[4], s[4] + s[5], 24):
            name, info, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", data, off)
            if info & 0xf == 2 and shndx and value:  # STT_FUNC, defined
                end = data.index(b"\0", strtab[4] + name)
                out[data[strtab[4] + name:end].decode()] = value
    return out

# The wheel's libnccl: every export probed or excluded; pnccl* at the nccl* addresses.
probes = open(f"{work}/probes.txt").read()
m = re.search(r"(\d+) exports in traced families: (\d+) probed, (\d+) excluded, (\d+) not in the catalogue", probes)
row("libnccl: exports not in the catalogue", m.group(4) if m else "?", "0", bool(m) and m.group(4) == "0")
functions = elf_functions(libnccl)
aliases = [n for n in functions if n.startswith("pnccl") and n[1:] in functions]
same = [n for n in aliases if functions[n] == functions[n[1:]]]
row("libnccl: pnccl* aliases at their nccl* address", f"{len(same)} of {len(aliases)}", f"{len(aliases)}",
    bool(aliases) and len(same) == len(aliases))

ops, summary = workload(f"{work}/run.txt")
if not summary:
    row("torch_nccl ran", "no", "yes", False)
    finish(f"{out}/results-nccl.md", "NCCL on one GPU")
pid, t0, t1 = int(summary.group(1)), int(summary.group(3)), int(summary.group(4))
note("versions", f"NCCL {summary.group(2)} (torch), {libnccl}", "info")
trace = records(f"{work}/trace.json")
nccl = [r for r in trace if r["type"] == "nccl" and r["pid"] == pid]
window = [r for r in nccl if t0 <= r["entry_ns"] <= t1]

for op, (calls, nbytes, kernels) in sorted(ops.items()):
    got = [r for r in window if r["op"] == op]
    row(f"trace: {op} calls", len(got), calls, len(got) == calls)
    row(f"trace: {op} bytes", sum(r.get("bytes", 0) for r in got), nbytes,
        sum(r.get("bytes", 0) for r in got) == nbytes)
    row(f"trace: {op} kernels linked", sum(r["launches"] for r in got), kernels,
        sum(r["launches"] for r in got) == kernels)
others = sorted({r["op"] for r in window} - set(ops))
note("trace: NCCL calls of torch's own in the window", ", ".join(others) or "none", "info")

# The communicator: NCCL's own log says its commId hash, rank and size.
log = open(f"{work}/run.txt").read() + open(f"{work}/run.err").read()  # NCCL logs to stdout
ids = re.findall(r"rank (\d+) nranks (\d+) cudaDev \d+ nvmlDev \d+ busId \S+ commId (0x[0-9a-f]+)", log)
inits = [r for r in nccl if r["op"] == "comm_init"]
if ids and inits:
    rank, nranks, commid = ids[0]
    row("comm: id (NCCL_DEBUG=INFO commId)", inits[0]["comm_id"], commid,
        int(inits[0]["comm_id"], 16) == int(commid, 16))
    row("comm: rank/nranks", f'{inits[0]["rank"]}/{inits[0]["nranks"]}', f"{rank}/{nranks}",
        (inits[0]["rank"], inits[0]["nranks"]) == (int(rank), int(nranks)))
    row("comm: collectives carry it", sum(1 for r in window if r["comm_id"] == inits[0]["comm_id"]), len(window),
        all(r["comm_id"] == inits[0]["comm_id"] for r in window))
else:
    row("comm: made and logged", f"{len(inits)} comm_init, {len(ids)} log lines", "1 and 1", False)
note("comm: calls that made it", ", ".join(sorted({r["api"] for r in inits})) or "none", "info")

# Every launch inside a collective names it; NCCL's kernels named.
launches = [r for r in trace if r["type"] == "launch" and r["pid"] == pid and r.get("nccl_call")]
seqs = {r["seq"]: r for r in nccl}
owners = [seqs.get(l["nccl_call"]) for l in launches]
row("links: launches linked to an NCCL call", len(launches), sum(k for _, _, k in ops.values()),
    len(launches) == sum(k for _, _, k in ops.values()))
row("links: each to a call of this process", sum(1 for o in owners if o), len(launches), all(owners))
names = sorted({l.get("kernel") or "?" for l in launches})
row("links: kernels named", "; ".join(n[:90] for n in names), "oneRankReduce",
    bool(names) and all("oneRankReduce" in n for n in names))
intervals = [r for r in trace if r["type"] == "gpu_interval" and r["pid"] == pid and r.get("nccl_call")]
row("timeline: linked kernels bounded", sum(1 for r in intervals if r["evidence"] != "none"), len(launches),
    sum(1 for r in intervals if r["evidence"] != "none") == len(launches))
copies = [r for r in trace if r["type"] == "copy" and r["pid"] == pid and t0 <= r["time_ns"] <= t1]
inside = [c for c in copies if any(n["tid"] == c["tid"] and n["entry_ns"] <= c["time_ns"] <= n["time_ns"] for n in window)]
note("copies NCCL made inside collectives (out of place, one rank: a memcpy, not linked)", len(inside), "info")

perfetto = json.load(open(f"{work}/trace.perfetto.json"))
slices = [e for e in perfetto if e.get("ph") == "b" and e.get("cat") == "nccl"]
want = sum(1 for r in nccl if r["launches"] and (r["op"] != "group_end" or r.get("outermost")))
row("perfetto: collective slices, over bounded kernels", len(slices), want,
    len(slices) == want and all(e["args"]["kernels_bounded"] == e["args"]["launches"] for e in slices))

# stats, system-wide, the same run.
stats = [s for s in records(f"{work}/stats.json") if s["type"] == "stats" and s["pid"] == pid]
if stats:
    rows = stats[-1].get("nccl", [])
    for op, (calls, nbytes, kernels) in sorted(ops.items()):
        got = [r for r in rows if r["op"] == op]
        c, b = sum(r["calls"] for r in got), sum(r["bytes"] for r in got)
        # stats counts the whole run: the script's calls are all in its window.
        row(f"stats: {op} calls, bytes", f"{c}, {b}", f"{calls}, {nbytes}", (c, b) == (calls, nbytes))
        row(f"stats --timeline: {op} kernels bounded", sum(r.get("kernels", 0) for r in got), kernels,
            sum(r.get("kernels", 0) for r in got) == kernels)
else:
    row("stats: a report of the run", "none", "one", False)

series = []
for l in open(f"{work}/metrics.txt"):
    m = re.match(r'(\w+)\{(.*)\} (\S+)$', l.strip())
    if m:
        series.append((m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2))), float(m.group(3))))
for op, (calls, nbytes, _) in sorted(ops.items()):
    c = sum(v for n, l, v in series if n == "cuprobe_nccl_calls_total" and l.get("pid") == str(pid) and l.get("op") == op)
    b = sum(v for n, l, v in series if n == "cuprobe_nccl_bytes_total" and l.get("pid") == str(pid) and l.get("op") == op)
    gpus = sorted({l.get("gpu") for n, l, v in series if n == "cuprobe_nccl_calls_total" and l.get("pid") == str(pid) and l.get("op") == op})
    row(f"exporter: {op} calls, bytes (gpu)", f"{int(c)}, {int(b)} ({','.join(gpus)})", f"{calls}, {nbytes} (0)",
        (int(c), int(b), gpus) == (calls, nbytes, ["0"]))

# The late attach: exact from the attach on (the communicator was made before: no id).
late_ops, late_summary = workload(f"{work}/late.txt")
if late_summary:
    lpid = int(late_summary.group(1))
    late = [r for r in records(f"{work}/late.json") if r["type"] == "nccl" and r["pid"] == lpid]
    for op, (calls, nbytes, kernels) in sorted(late_ops.items()):
        got = [r for r in late if r["op"] == op]
        row(f"late attach: {op} calls, bytes, kernels", f'{len(got)}, {sum(r.get("bytes", 0) for r in got)}, {sum(r["launches"] for r in got)}',
            f"{calls}, {nbytes}, {kernels}",
            (len(got), sum(r.get("bytes", 0) for r in got), sum(r["launches"] for r in got)) == (calls, nbytes, kernels))
    err = open(f"{work}/late.cuprobe.err").read()
    row("late attach: the wheel's libnccl found in the process's maps", "yes" if "NCCL probes attached" in err else "no",
        "yes", "NCCL probes attached" in err)
else:
    row("late attach: torch_nccl ran", "no", "yes", False)
note("two ranks (two GPUs): peers, all-reduce across processes", "not run", "blocked: one GPU")
finish(f"{out}/results-nccl.md", "NCCL on one GPU",
       "torch.distributed, NCCL backend, world size 1: gpu/torch_nccl.py, traced by cuprobe (tests/gpu/nccl_check.sh).")
PY
