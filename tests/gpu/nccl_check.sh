#!/bin/bash
# NCCL on a machine with one GPU: torch.distributed on the NCCL backend with
# one rank (gpu/torch_nccl.py: all_reduce SUM and AVG, broadcast,
# all_gather_into_tensor, reduce_scatter_tensor SUM and AVG, known sizes),
# traced four ways at once and one after the other:
#   trace --timeline --perfetto -- the script (libnccl comes from the wheel,
#     mapped at `import torch`: an attach event, the process held until probed);
#   stats --timeline and the exporter, system-wide, watching that same run;
#   trace -p on a second run, attached while it waits (exact from then on).
# The reference is NCCL's own log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL:
# a line per collective call with its op, count, datatype, reduction,
# buffers, communicator and stream; "commId 0x..." at init). Checked:
#   - per operation, cuprobe's calls and bytes exactly NCCL's (in the script's
#     window for trace and the late attach, the whole run for stats and the
#     exporter); the script's own count only for the operations torch hands to
#     NCCL: one torch does not forward is reported by name, not failed;
#   - the GPU work one-rank NCCL does at the call (ncclLaunchOneRank): a
#     kernel, oneRankReduce, for a pre-multiplied sum (AVG on a floating
#     type), a copy for any other call out of place, nothing in place. Each
#     collective is linked to its kernel or its copy, or counted with no GPU
#     work: each kind counted and shown, none unlinked;
#   - the communicator's rank, size and commId hash, the Perfetto collective
#     slices, the wheel's libnccl (every export probed or excluded, the
#     pnccl* names aliases of the nccl* ones).
#
# Needs BUNDLE/bin/{cuprobe,cuprobe-dyn} (tests/gpu/README.md) and python3
# with torch and its NCCL (nvidia-nccl-cu13). Writes results-nccl-h200.md
# to OUT (default /tmp/cuprobe-nccl), prints the table last, exits 1 when a
# check fails. About 60 s (two torch processes).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL
unset NCCL_DEBUG_FILE
. "$(dirname "$0")/common.sh" nccl
port=${PORT:-19468}
iterations=${ITERATIONS:-10}

nvidia-smi -L | head -1
libnccl=$(python3 -c 'import nvidia.nccl, os; d = os.path.join(list(nvidia.nccl.__path__)[0], "lib"); print(os.path.join(d, "libnccl.so.2"))')
echo "libnccl: $libnccl"
"$cuprobe" probes --lib "$libnccl" > "$work/probes.txt" 2>&1
tail -1 "$work/probes.txt"

start_watcher exporter "$bundle/bin/cuprobe-dyn" exporter -i 1 --listen "127.0.0.1:$port" -v
start_watcher stats "$cuprobe" stats --json --timeline -o "$work/stats.json" -v
wait_attached exporter stats
# NCCL logs to stdout, between the script's window lines.
"$cuprobe" trace --json --timeline -o "$work/trace.json" --perfetto "$work/trace.perfetto.json" -- \
	python3 "$here/gpu/torch_nccl.py" --iterations "$iterations" > "$work/run.txt" 2> "$work/run.err" ||
	{ echo "the traced run failed:"; tail -20 "$work/run.err"; }
grep "^torch_nccl:" "$work/run.txt"
sleep 3
curl -s "http://127.0.0.1:$port/metrics" > "$work/metrics.txt"
stop_watchers

# The late attach: a second run waits for a file; cuprobe attaches by pid, then the file comes.
rm -f "$work/go"
python3 "$here/gpu/torch_nccl.py" --iterations "$iterations" --wait-file "$work/go" \
	> "$work/late.txt" 2> "$work/late.err" &
late=$!
for _ in $(seq 1 600); do grep -q ready "$work/late.txt" && break; sleep 0.1; done
late_pid=$(sed -n 's/.*ready pid=\([0-9]*\).*/\1/p' "$work/late.txt")
"$cuprobe" trace --json -v -o "$work/late.json" -p "$late_pid" 2> "$work/late.cuprobe.err" &
tracer=$!
for _ in $(seq 1 600); do grep -q "tracing (" "$work/late.cuprobe.err" && break; sleep 0.1; done
touch "$work/go"
wait "$late"
wait "$tracer"
grep "^torch_nccl:" "$work/late.txt"

python3 - "$work" "$out" "$libnccl" <<'PY'
import json, re, struct, sys
from checks import finish, note, row
work, out, libnccl = sys.argv[1:4]

# NCCL's ncclDataType_t sizes and its log's op names, as cuprobe names the operations.
TYPE_SIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}
FLOATING = {6, 7, 8, 9, 10, 11}
OP_OF = {"AllReduce": "all_reduce", "Broadcast": "broadcast", "Reduce": "reduce",
         "AllGather": "all_gather", "ReduceScatter": "reduce_scatter", "AlltoAll": "all_to_all",
         "Gather": "gather", "Scatter": "scatter", "Send": "send", "Recv": "recv"}
NCCL_AVG = 4
COLL = re.compile(r"NCCL INFO (\w+): opCount \w+ sendbuff (\S+) recvbuff (\S+) count (\d+) "
                  r"datatype (\d+) op (\d+) root (-?\d+) comm (\S+) \[nranks=(\d+)\] stream (\S+)")


def gpu_work(line):
    """What one-rank NCCL does at the call (ncclLaunchOneRank): kernel, copy or none."""
    op, send, recv, count, dtype, redop = line["name"], line["send"], line["recv"], line["count"], line["datatype"], line["redop"]
    if line["nranks"] != 1 or op in ("send", "recv"):
        return "other"
    if count == 0:
        return "none"
    reduces = op in ("all_reduce", "reduce", "reduce_scatter")
    if reduces and (redop >= 5 or (redop == NCCL_AVG and dtype in FLOATING)):
        return "kernel"
    return "copy" if send != recv else "none"


def nccl_log(path):
    """NCCL's collective lines: the whole run and the script's window; its init lines."""
    whole, window, inits, inside = [], [], [], False
    for text in open(path, errors="replace"):
        if "torch_nccl: window begin" in text:
            inside = True
        elif "torch_nccl: window end" in text:
            inside = False
        m = COLL.search(text)
        if m:
            line = {"name": OP_OF.get(m[1], m[1]), "send": m[2], "recv": m[3], "count": int(m[4]),
                    "datatype": int(m[5]), "redop": int(m[6]), "root": int(m[7]), "comm": m[8],
                    "nranks": int(m[9]), "stream": m[10]}
            line["bytes"] = line["count"] * TYPE_SIZE.get(line["datatype"], 0)
            line["work"] = gpu_work(line)
            whole.append(line)
            if inside:
                window.append(line)
        m = re.search(r"comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) cudaDev \d+ nvmlDev \d+ busId \S+ commId (0x[0-9a-f]+)", text)
        if m:
            inits.append(m.groups())
    return whole, window, inits


def per_op(lines):
    out = {}
    for l in lines:
        t = out.setdefault(l["name"], {"calls": 0, "bytes": 0, "kernel": 0, "copy": 0, "none": 0, "other": 0})
        t["calls"] += 1
        t["bytes"] += l["bytes"]
        t[l["work"]] += 1
    return out


def workload(path):
    text = open(path, errors="replace").read()
    ops = {m[0]: (int(m[1]), int(m[2])) for m in re.findall(r"torch_nccl: op=(\w+) calls=(\d+) bytes=(\d+)", text)}
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


def cuprobe_work(recs):
    """Per op: calls, bytes, launches, copies and calls that left nothing on the GPU, from nccl records."""
    out = {}
    for r in recs:
        if "bytes" not in r:
            continue
        t = out.setdefault(r["op"], {"calls": 0, "bytes": 0, "launches": 0, "copies": 0, "none": 0})
        t["calls"] += 1
        t["bytes"] += r["bytes"]
        t["launches"] += r["launches"]
        t["copies"] += r.get("copies", 0)
        t["none"] += not r.get("group") and not r["launches"] and not r.get("copies") and not r["result"]
    return out


def against_nccl(label, mine, theirs, gpu=True):
    """cuprobe's per-op calls and bytes (and GPU work) against NCCL's log lines."""
    for op in sorted(set(mine) | set(theirs)):
        m = mine.get(op, {"calls": 0, "bytes": 0, "launches": 0, "copies": 0, "none": 0})
        t = theirs.get(op, {"calls": 0, "bytes": 0, "kernel": 0, "copy": 0, "none": 0})
        row(f"{label}: {op} calls, bytes (NCCL's log)", f'{m["calls"]}, {m["bytes"]}', f'{t["calls"]}, {t["bytes"]}',
            (m["calls"], m["bytes"]) == (t["calls"], t["bytes"]))
        if gpu:
            row(f"{label}: {op} kernels, copies, no GPU work", f'{m["launches"]}, {m["copies"]}, {m["none"]}',
                f'{t["kernel"]}, {t["copy"]}, {t["none"]}', (m["launches"], m["copies"], m["none"]) == (t["kernel"], t["copy"], t["none"]))


def against_script(label, script_ops, theirs):
    """The script's own count, where torch hands the operation to NCCL; the others named."""
    skipped = []
    for op, (calls, nbytes) in sorted(script_ops.items()):
        t = theirs.get(op)
        if not t:
            skipped.append(op)
            continue
        row(f"{label}: {op} calls, bytes NCCL logged (the script's)", f'{t["calls"]}, {t["bytes"]}', f"{calls}, {nbytes}",
            (t["calls"], t["bytes"]) == (calls, nbytes))
    note(f"{label}: operations torch did not hand to NCCL", ", ".join(skipped) or "none", "info")


# The wheel's libnccl: every export probed or excluded; pnccl* at the nccl* addresses.
probes = open(f"{work}/probes.txt").read()
m = re.search(r"(\d+) exports in traced families: (\d+) probed, (\d+) excluded, (\d+) not in the catalogue", probes)
row("libnccl: exports not in the catalogue", m.group(4) if m else "?", "0", bool(m) and m.group(4) == "0")
functions = elf_functions(libnccl)
aliases = [n for n in functions if n.startswith("pnccl") and n[1:] in functions]
same = [n for n in aliases if functions[n] == functions[n[1:]]]
row("libnccl: pnccl* aliases at their nccl* address", f"{len(same)} of {len(aliases)}", f"{len(aliases)}",
    bool(aliases) and len(same) == len(aliases))

script_ops, summary = workload(f"{work}/run.txt")
if not summary:
    row("torch_nccl ran", "no", "yes", False)
    finish(f"{out}/results-nccl-h200.md", "NCCL on one GPU")
pid, t0, t1 = int(summary.group(1)), int(summary.group(3)), int(summary.group(4))
note("versions", f"NCCL {summary.group(2)} (torch), {libnccl}", "info")
whole, window, inits = nccl_log(f"{work}/run.txt")
row("NCCL's log: collective lines (window, run)", f"{len(window)}, {len(whole)}", "> 0", bool(window))
trace = records(f"{work}/trace.json")
nccl = [r for r in trace if r["type"] == "nccl" and r["pid"] == pid]
in_window = [r for r in nccl if t0 <= r["entry_ns"] <= t1]
nccl_window = per_op(window)
against_nccl("trace", cuprobe_work(in_window), nccl_window)
against_script("torch", script_ops, nccl_window)

# The communicator: NCCL's init line says its address, rank, size and commId hash.
made = [r for r in nccl if r["op"] == "comm_init"]
if inits and made:
    comm, rank, nranks, commid = inits[0]
    mine = made[0]
    row("comm: commId (NCCL's init line)", mine["comm_id"], commid, int(mine["comm_id"], 16) == int(commid, 16))
    row("comm: address, rank/nranks", f'{mine["comm"]} {mine["rank"]}/{mine["nranks"]}', f"{comm} {rank}/{nranks}",
        (int(mine["comm"], 16), mine["rank"], mine["nranks"]) == (int(comm, 16), int(rank), int(nranks)))
    row("comm: window's calls carry it", sum(1 for r in in_window if r["comm_id"] == mine["comm_id"]), len(in_window),
        all(r["comm_id"] == mine["comm_id"] for r in in_window))
else:
    row("comm: made and logged", f"{len(made)} comm_init, {len(inits)} init lines", "1 and 1", False)
note("comm: calls that made it", ", ".join(sorted({r["api"] for r in made})) or "none", "info")

# Links: each launch and copy inside a collective names a call of this process; the kernels named.
by_seq = {r["seq"]: r for r in nccl}
launches = [r for r in trace if r["type"] == "launch" and r["pid"] == pid and r.get("nccl_call")]
copies = [r for r in trace if r["type"] == "copy" and r["pid"] == pid and r.get("nccl_call")]
row("links: launches and copies, each to an NCCL call of this process",
    f"{sum(1 for l in launches + copies if l['nccl_call'] in by_seq)} of {len(launches) + len(copies)}",
    f"{len(launches) + len(copies)}", all(l["nccl_call"] in by_seq for l in launches + copies))
row("links: calls' counts are the records naming them",
    f'{sum(r["launches"] for r in nccl)} launches, {sum(r.get("copies", 0) for r in nccl)} copies',
    f"{len(launches)} launches, {len(copies)} copies",
    (sum(r["launches"] for r in nccl), sum(r.get("copies", 0) for r in nccl)) == (len(launches), len(copies)))
names = sorted({l.get("kernel") or "?" for l in launches})
row("links: kernels named", "; ".join(n[:90] for n in names) or "none", "oneRankReduce",
    all("oneRankReduce" in n for n in names))
row("links: copies the size of their call", sum(1 for c in copies if c["bytes"] == by_seq.get(c["nccl_call"], {}).get("bytes")),
    len(copies), all(c["bytes"] == by_seq.get(c["nccl_call"], {}).get("bytes") for c in copies))
work_kinds = cuprobe_work(in_window)
k = sum(1 for r in in_window if "bytes" in r and r["launches"])
c = sum(1 for r in in_window if "bytes" in r and not r["launches"] and r.get("copies"))
n = sum(t["none"] for t in work_kinds.values())
total = sum(1 for r in in_window if "bytes" in r)
row("collectives in the window: a kernel, a copy, no GPU work (one rank)", f"{k}, {c}, {n} of {total}",
    f"{total} in all", k + c + n == total)
intervals = [r for r in trace if r["type"] == "gpu_interval" and r["pid"] == pid and r.get("nccl_call")]
row("timeline: linked kernels bounded", sum(1 for r in intervals if r["evidence"] != "none"), len(launches),
    sum(1 for r in intervals if r["evidence"] != "none") == len(launches))

perfetto = json.load(open(f"{work}/trace.perfetto.json"))
slices = [e for e in perfetto if e.get("ph") == "b" and e.get("cat") == "nccl"]
want = sum(1 for r in nccl if r["launches"] and (r["op"] != "group_end" or r.get("outermost")))
row("perfetto: collective slices, over bounded kernels", len(slices), want,
    len(slices) == want and all(e["args"]["kernels_bounded"] == e["args"]["launches"] for e in slices))

# stats, system-wide, the same run: the whole run against NCCL's whole log.
nccl_whole = per_op(whole)
stats = [s for s in records(f"{work}/stats.json") if s["type"] == "stats" and s["pid"] == pid]
if stats:
    rows = {}
    for r in stats[-1].get("nccl", []):
        t = rows.setdefault(r["op"], {"calls": 0, "bytes": 0, "launches": 0, "copies": 0, "none": 0})
        t["calls"] += r["calls"]
        t["bytes"] += r["bytes"]
        t["launches"] += r["launches"]
        t["copies"] += r.get("copies", 0)
        t["none"] += r.get("no_gpu_work", 0)
    against_nccl("stats", {op: t for op, t in rows.items() if op in OP_OF.values()}, nccl_whole)
    kernels = sum(r.get("kernels", 0) for r in stats[-1].get("nccl", []))
    row("stats --timeline: kernels bounded", kernels, sum(t["kernel"] for t in nccl_whole.values()),
        kernels == sum(t["kernel"] for t in nccl_whole.values()))
else:
    row("stats: a report of the run", "none", "one", False)

series = []
for l in open(f"{work}/metrics.txt"):
    m = re.match(r'(\w+)\{(.*)\} (\S+)$', l.strip())
    if m:
        series.append((m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2))), float(m.group(3))))
exported = {}
for name, labels, value in series:
    if labels.get("pid") != str(pid) or labels.get("op") not in OP_OF.values():
        continue
    t = exported.setdefault(labels["op"], {"calls": 0, "bytes": 0, "gpus": set()})
    if name == "cuprobe_nccl_calls_total":
        t["calls"] += int(value)
        t["gpus"].add(labels.get("gpu"))
    elif name == "cuprobe_nccl_bytes_total":
        t["bytes"] += int(value)
against_nccl("exporter", exported, nccl_whole, gpu=False)
row("exporter: GPU label", ",".join(sorted({g for t in exported.values() for g in t["gpus"]})), "0",
    all(t["gpus"] == {"0"} for t in exported.values()) and bool(exported))

# The late attach: exact from the attach on, against NCCL's log of that run's window.
late_ops, late_summary = workload(f"{work}/late.txt")
if late_summary:
    lpid, l0, l1 = int(late_summary.group(1)), int(late_summary.group(3)), int(late_summary.group(4))
    _, late_window, _ = nccl_log(f"{work}/late.txt")
    late = [r for r in records(f"{work}/late.json") if r["type"] == "nccl" and r["pid"] == lpid and l0 <= r["entry_ns"] <= l1]
    against_nccl("late attach", cuprobe_work(late), per_op(late_window))
    err = open(f"{work}/late.cuprobe.err").read()
    row("late attach: the wheel's libnccl found in the process's maps", "yes" if "NCCL probes attached" in err else "no",
        "yes", "NCCL probes attached" in err)
else:
    row("late attach: torch_nccl ran", "no", "yes", False)
note("two ranks (two GPUs): peers, all-reduce across processes", "not run", "blocked: one GPU")
finish(f"{out}/results-nccl-h200.md", "NCCL on one GPU",
       "torch.distributed, NCCL backend, world size 1: gpu/torch_nccl.py, traced by cuprobe (tests/gpu/nccl_check.sh), "
       "against NCCL's own log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL).")
PY
