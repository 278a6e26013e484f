"""The judgement of tests/gpu/device_check.sh, from what its runs left in WORK.

usage: python3 device_check.py WORK OUT SIZES ROUNDS LAUNCHES COVERAGE_ELEMENTS
WORK holds, per run NAME, NAME.status, NAME.out, NAME.err and (under cuprobe)
NAME.json; writes OUT/results-device-h200.md, prints the table, exits 1 when
a check failed.
"""
import json
import os
import re
import statistics
import sys

from checks import finish, note, row

BUDGET_S = 200
TRITON_KERNEL = "add_kernel"  # gpu/triton_add.py's, which gpu/device_coverage.py launches
EVENT_RESOLUTION_NS = 1000  # CUDA events: about 0.5 us; the globaltimer's own step
GOALS = {"empty": 1.05, "counter": 1.2, "ring": 1.5}
ANCHORS = {  # published, vec_add on an RTX 5090
    "empty": "bpftime empty probe +19-21%; NVBit empty tool 1.56-1.71x",
    "timer": "bpftime globaltimer +33-36%",
    "counter": "bpftime GPU array 2.1-5x",
    "ring": "bpftime ring 2-6.3x",
    "ring_full": "bpftime ring 2-6.3x",
}
PROBES = (("empty", "an empty entry probe"), ("timer", "a globaltimer read"),
          ("counter", "a counter (one add per thread, aggregated per warp)"),
          ("ring", "one ring record per warp, a round's records held by the ring until its sync moves them"),
          ("ring_full", "one ring record per warp into a ring too small (each record counted lost on the GPU)"))
# device_overhead.bpf.c's programs' kernels, sorted.
OVERHEAD_KERNELS = ["vec_add_counter", "vec_add_empty", "vec_add_ring", "vec_add_ring_full", "vec_add_timer"]
# Variants with no program yet: a row saying so, never a pass.
NOT_BUILT = {}


class Run:
    """One run's files: status, stdout, stderr and the --json records."""

    def __init__(self, work, name):
        self.path = f"{work}/{name}"
        self.present = os.path.exists(f"{self.path}.status")
        self.status = self._read("status").strip()
        self.out = self._read("out")
        self.err = self._read("err")
        self.records = []
        for line in self._read("json").splitlines():
            if line.startswith("{"):
                try:
                    self.records.append(json.loads(line))
                except ValueError:
                    pass

    def _read(self, ext):
        try:
            with open(f"{self.path}.{ext}", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def map_entries(self, name):
        """The final dump's entries of map NAME (key: value), or None when not printed."""
        found = [r for r in self.records if r.get("type") == "map" and r.get("map") == name]
        if not found:
            return None
        return {e["key"]: e["value"] for e in found[-1].get("entries", [])}

    def counter(self, name):
        """A one-slot counter's value: 0 when the dump skipped it as zero, None when absent."""
        entries = self.map_entries(name)
        return None if entries is None else sum(entries.values())

    def kernels(self):
        """Kernel names by report kind (instrumented, no_ptx, refused), and each one's details."""
        kinds, details = {}, {}
        for r in self.records:
            if r.get("type") == "device" and r.get("event") in ("instrumented", "no_ptx", "refused"):
                kinds.setdefault(r["event"], set()).add(r.get("kernel", ""))
                if r["event"] != "instrumented":
                    details.setdefault(r.get("detail", ""), set()).add(r.get("kernel", ""))
        return kinds, details

    def lines(self, prefix):
        """The workload's summary lines beginning with prefix, as dicts of their key=value fields."""
        return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in self.out.splitlines()
                if line.startswith(prefix)]

    def refusals(self):
        return [line for line in self.err.splitlines()
                if "not instrumentable" in line or "matched no kernel" in line
                or "never loaded" in line or "device programs:" in line and "pid" in line]


def fmt_ns(ns):
    if ns is None:
        return "-"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns < 1000:
        return f"{sign}{ns} ns"
    return sign + (f"{ns / 1000:.1f} us" if ns < 1e6 else f"{ns / 1e6:.1f} ms")


def shape_threads(fields):
    grid = [int(v) for v in fields["grid"].split("x")]
    block = [int(v) for v in fields["block"].split("x")]
    return grid, block, grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]


def check_exact(run):
    status = run.status
    kinds, _ = run.kernels()
    instrumented = sorted(kinds.get("instrumented", ()))
    row("exact run (kernel_timing exact): exit status, kernels instrumented, refusals",
        f"{status or 'not run'}, {'/'.join(instrumented) or 'none'}, {len(run.refusals())}",
        "0, add_2d_kernel/vec_add_kernel, 0",
        status == "0" and instrumented == ["add_2d_kernel", "vec_add_kernel"] and not run.refusals())
    shapes = {f.get("kernel"): f for f in run.lines("kernel_timing: exact ")}
    for kernel, dims, suffix in (("vec_add_kernel", "1D", "1d"), ("add_2d_kernel", "2D", "2d")):
        fields = shapes.get(kernel)
        if not fields:
            row(f"{kernel} ({dims}): the workload's line", "missing", "kernel_timing: exact ...", False)
            continue
        grid, block, blocks, per_block = shape_threads(fields)
        launches = int(fields["launches"])
        threads = launches * blocks * per_block
        what = f"{kernel} ({dims}, grid {fields['grid']} x block {fields['block']}, {launches} launches)"
        for counter in ("entries", "exits"):
            got = run.counter(f"{counter}_{suffix}")
            row(f"{what}: {counter} counted", f"{got}",
                f"{threads} (launches x grid x block)", got == threads)
        check_spans(run, what, suffix, fields, blocks)


def check_spans(run, what, suffix, fields, blocks):
    spans = run.map_entries(f"spans_{suffix}") or {}
    before, after = int(fields["stamp_before_ns"]), int(fields["stamp_after_ns"])
    event = int(fields["event_ns"])
    values = list(spans.values())
    seqs = {v.get("launch_seq") for v in values}
    row(f"{what}: blocks with a span, all of one launch (seq)",
        f"{len(values)} of {blocks}, seqs {sorted(seqs)[:3]}{'...' if len(seqs) > 3 else ''}",
        f"{blocks}, one seq > 0", len(values) == blocks and len(seqs) == 1 and 0 not in seqs)
    if not values:
        return
    starts = [v["start_ns"] for v in values]
    ends = [v["end_ns"] for v in values]
    longest = max(e - s for s, e in zip(starts, ends))
    inside = sum(1 for s, e in zip(starts, ends) if before <= s <= e <= after)
    row(f"{what}: block spans inside the globaltimer stamps around the launch",
        f"{inside} of {len(values)} (first start {fmt_ns(min(starts) - before)} after the stamp, "
        f"last end {fmt_ns(after - max(ends))} before the next)",
        "all: stamp before <= start <= end <= stamp after", inside == len(values))
    row(f"{what}: longest block span, all blocks' span, against the kernel's event time",
        f"{fmt_ns(longest)}, {fmt_ns(max(ends) - min(starts))}, {fmt_ns(event)}",
        f"both <= event time + {fmt_ns(EVENT_RESOLUTION_NS)} (its resolution)",
        max(ends) - min(starts) <= event + EVENT_RESOLUTION_NS)
    leftover = sum(1 for v in values if v.get("exited"))
    past = run.counter("blocks_past_max")
    row(f"{what}: blocks whose last exit was missed, blocks with no slot",
        f"{leftover}, {past}", "0, 0", leftover == 0 and past == 0)


def check_counting(run, label, iterations_key, per_launch):
    """A coverage row for a run of device_count.bpf.o (entries and exits at vec_add*)."""
    kinds, details = run.kernels()
    instrumented = sorted(kinds.get("instrumented", ()))
    seen = instrumented + sorted(set().union(*[kinds.get(k, set()) for k in ("no_ptx", "refused")]))
    summary = run.lines(iterations_key)
    launches = int(summary[-1].get("launches", 0)) if summary else 0
    threads = launches * per_launch
    entries, exits = run.counter("entries"), run.counter("exits")
    row(f"coverage: {label}: exit status, kernels seen / instrumented, entries, exits",
        f"{run.status or 'not run'}, {len(seen)} / {len(instrumented)} ({'/'.join(instrumented) or '-'}), "
        f"{entries}, {exits}",
        f"0, 1 / 1, {threads} each ({launches} launches x grid x block)",
        run.status == "0" and len(seen) == 1 and len(instrumented) == 1 and launches > 0
        and entries == threads and exits == threads)
    for detail, names in sorted(details.items()):
        note(f"coverage: {label}: not instrumentable", f"{detail}: {', '.join(sorted(names))}", "info")


def check_ring(run, blocks_per_launch):
    """gpu_warp_exits on vec_add: every (launch, block, warp) delivered once through the device ring."""
    summary = run.lines("vec_add: ")
    launches = int(summary[-1].get("launches", 0)) if summary else 0
    expected = launches * blocks_per_launch * 8
    records = [r for r in run.records if r.get("type") == "device_record"]
    keys = {(r.get("launch_seq"), r["record"].get("block"), r["record"].get("warp"))
            for r in records if isinstance(r.get("record"), dict)}
    totals = [r for r in run.records if r.get("type") == "device_ring"]
    lost = sum(int(t.get("lost", 0)) for t in totals)
    abandoned = sum(int(t.get("abandoned", 0)) for t in totals)
    row("device ring: gpu_warp_exits on vec_add: exit status, records, distinct (launch, block, warp), lost, abandoned",
        f"{run.status or 'not run'}, {len(records)}, {len(keys)}, {lost}, {abandoned}",
        f"0, {expected} ({launches} launches x {blocks_per_launch} blocks x 8 warps) each, 0, 0",
        run.status == "0" and launches > 0 and len(records) == expected and len(keys) == expected
        and lost == 0 and abandoned == 0 and len(totals) > 0)


def check_python(run, seconds):
    if not run.present:
        note("coverage: PyTorch and Triton (gpu/device_coverage.py)", "torch not installed",
             "not run: torch not installed")
        return
    summary = run.lines("device_coverage: ")
    fields = summary[-1] if summary else {}
    timed_out = run.status in ("124", "137")
    row("coverage: PyTorch and Triton: the run (one process), its time",
        f"status {run.status}{' (timed out)' if timed_out else ''}, "
        f"{fields.get('result', 'no summary line')}, {seconds:.0f} s" if seconds is not None else run.status,
        "result=ok (status 1: kernels not instrumented, expected)",
        fields.get("result") == "ok" and not timed_out)
    kinds, details = run.kernels()
    every = set().union(*kinds.values()) if kinds else set()
    triton_state = fields.get("triton", "?")
    for label, mine in (("PyTorch kernels", lambda k: k != TRITON_KERNEL),
                        (f"Triton kernel {TRITON_KERNEL}", lambda k: k == TRITON_KERNEL)):
        seen = sorted(k for k in every if mine(k))
        instrumented = sorted(k for k in kinds.get("instrumented", ()) if mine(k))
        if label.startswith("Triton") and triton_state != "ok":
            note(f"coverage: {label}", "triton not installed", "not run: triton not installed")
            continue
        reasons = sorted({d for d, names in details.items() if any(mine(k) for k in names)})
        shown = ", ".join(seen[:4]) + (f", ... ({len(seen) - 4} more)" if len(seen) > 4 else "")
        row(f"coverage: {label}: kernels seen / instrumented (why not)",
            f"{len(seen)} / {len(instrumented)} ({'; '.join(reasons) or '-'}): {shown or 'none'}",
            "seen >= 1, listed by name (expected: not instrumentable, cubins without PTX)",
            len(seen) >= 1)
    row("coverage: PyTorch and Triton: threads, blocks counted in instrumented kernels",
        f"{run.counter('threads_entered')}, {run.counter('blocks_entered')}",
        "information (0 when none was instrumented)", None)


def round_medians(run):
    """{round: {variant: median_ns}} from kernel_timing's overhead lines."""
    result = {}
    for f in run.lines("kernel_timing: overhead round="):
        result.setdefault(int(f["round"]), {})[f["kernel"].removeprefix("vec_add_")] = int(f["median_ns"])
    return result


def check_overhead(runs, sizes, rounds, launches):
    for size in sizes:
        probed, plain = runs(f"overhead.{size}"), runs(f"overhead_plain.{size}")
        fields = (probed.lines("kernel_timing: overhead elements=") or [{}])[-1]
        grid = int(fields.get("grid", 0))
        kinds, _ = probed.kernels()
        instrumented = sorted(kinds.get("instrumented", ()))
        label = f"overhead, vec_add of {size} elements ({grid} blocks of 256)"
        row(f"{label}: runs with and without cuprobe: exit status, kernels instrumented",
            f"{probed.status or 'not run'} and {plain.status or 'not run'}, {'/'.join(instrumented) or 'none'}",
            "0 and 0, " + "/".join(OVERHEAD_KERNELS),
            probed.status == "0" and plain.status == "0" and fields.get("result") == "ok"
            and instrumented == OVERHEAD_KERNELS)
        by_round, plain_rounds = round_medians(probed), round_medians(plain)
        base = [r["plain"] for r in by_round.values() if "plain" in r]
        sass = [r["plain"] for r in plain_rounds.values() if "plain" in r]
        row(f"{label}: vec_add_plain per launch, under cuprobe (PTX JIT) / without (nvcc SASS)",
            f"{fmt_ns(statistics.median(base)) if base else '-'} / "
            f"{fmt_ns(statistics.median(sass)) if sass else '-'}",
            f"{rounds} rounds x {launches} launches, medians", None)
        for variant, what in PROBES:
            if variant in NOT_BUILT:
                note(f"{label}: {what}", NOT_BUILT[variant] + f"; goal <= {GOALS[variant]}x, {ANCHORS[variant]}",
                     "not built yet")
                continue
            ratios = [r[variant] / r["plain"] for r in by_round.values()
                      if r.get("plain") and variant in r]
            versus_sass = [r[variant] / statistics.median(sass) for r in by_round.values()
                           if variant in r] if sass else []
            ratio = statistics.median(ratios) if ratios else None
            measured = (f"{ratio:.3f}x (rounds {', '.join(f'{x:.2f}' for x in ratios)}); "
                        f"vs nvcc SASS {statistics.median(versus_sass):.3f}x" if ratio and versus_sass
                        else f"{ratio:.3f}x" if ratio else "-")
            goal = GOALS.get(variant)
            expected = (f"goal <= {goal}x; " if goal else "") + f"anchors: {ANCHORS[variant]}"
            row(f"{label}: {what}, ratio to vec_add_plain", measured, expected,
                (ratio is not None and ratio <= goal) if goal else (None if ratio else False))
        counted = probed.counter("threads_counted")
        expected_threads = (1 + rounds * launches) * grid * 256
        row(f"{label}: the counter's count", f"{counted}",
            f"{expected_threads} ((1 warm-up + {rounds} x {launches}) launches x grid x block)",
            counted == expected_threads)
        zero_reads = probed.counter("timer_read_zero")
        row(f"{label}: globaltimer reads that gave 0", f"{zero_reads}", "0", zero_reads == 0)
        expected_records = (1 + rounds * launches) * grid * 8
        for ring, what in (("warp_records", "held"), ("full_records", "too small")):
            t = ring_totals(probed, ring)
            row(f"{label}: ring {ring} ({what}): records produced, delivered, lost, abandoned",
                f"{t['produced']}, {t['delivered']}, {t['lost']}, {t['abandoned']}" if t else "no device_ring summary",
                f"{expected_records} produced ((1 warm-up + {rounds} x {launches}) launches x grid x 8 warps) "
                "= delivered + lost + abandoned" + (", lost > 0" if ring == "full_records" else ""),
                bool(t) and t["produced"] == expected_records
                and t["produced"] == t["delivered"] + t["lost"] + t["abandoned"]
                and (ring != "full_records" or t["lost"] > 0))
        syncs = runs(f"syncs.{size}")
        per_round = {}
        for f in syncs.lines("kernel_timing: syncs round="):
            per_round.setdefault(int(f["round"]), {})[f["kernel"].removeprefix("vec_add_")] = float(f["per_sync_ns"])
        pairs = [(r["plain"], r["counter"]) for r in per_round.values() if "plain" in r and "counter" in r]
        if syncs.status != "0" or not pairs:
            row(f"{label}: launch + cudaStreamSynchronize, counter vs plain", f"status {syncs.status or 'not run'}",
                "a time per variant and round", False)
        else:
            plain_ns = statistics.median(p for p, _ in pairs)
            counter_ns = statistics.median(c for _, c in pairs)
            row(f"{label}: launch + cudaStreamSynchronize, counter vs plain (the drain at each sync), "
                f"process clock", f"{fmt_ns(counter_ns)} vs {fmt_ns(plain_ns)} (+{fmt_ns(counter_ns - plain_ns)}, "
                f"{counter_ns / plain_ns:.2f}x; rounds {', '.join(f'{c / p:.2f}' for p, c in pairs)})",
                "information: the drain's copy per sync", None)
            launches_synced = sum(int(f["launches"]) for f in syncs.lines("kernel_timing: syncs round=")
                                  if f["kernel"] == "vec_add_counter")
            counted = syncs.counter("threads_counted")
            expected_threads = (1 + launches_synced) * grid * 256
            row(f"{label}: the counter's count after launch + sync pairs", f"{counted}",
                f"{expected_threads} ((1 warm-up + {launches_synced}) launches x grid x block)",
                counted == expected_threads)
        check_ring_syncs(runs(f"ring_syncs.{size}"), label, grid)


def ring_totals(run, ring):
    """The run's end-of-run device_ring record of ring, or None."""
    return next((r for r in run.records if r.get("type") == "device_ring" and r.get("ring") == ring), None)


def check_ring_syncs(run, label, grid):
    """One ring record per warp with a sync after each launch: GPU time against plain, every record counted."""
    per_round = {}
    for f in run.lines("kernel_timing: syncs round="):
        if "median_ns" in f:
            per_round.setdefault(int(f["round"]), {})[f["kernel"].removeprefix("vec_add_")] = f
    pairs = [(float(r["plain"]["median_ns"]), float(r["ring"]["median_ns"]),
              float(r["plain"]["per_sync_ns"]), float(r["ring"]["per_sync_ns"]))
             for r in per_round.values() if "plain" in r and "ring" in r]
    if run.status != "0" or not pairs:
        row(f"{label}: one ring record per warp, a sync after each launch", f"status {run.status or 'not run'}",
            "a time per variant and round", False)
        return
    ratios = [ring / plain for plain, ring, _, _ in pairs]
    ratio = statistics.median(ratios)
    row(f"{label}: one ring record per warp, a sync after each launch (every record moved to the map), "
        "ratio to vec_add_plain (GPU time)",
        f"{ratio:.3f}x (rounds {', '.join(f'{x:.2f}' for x in ratios)})",
        f"goal <= {GOALS['ring']}x; anchors: {ANCHORS['ring']}", ratio <= GOALS["ring"])
    plain_sync = statistics.median(p for _, _, p, _ in pairs)
    ring_sync = statistics.median(r for _, _, _, r in pairs)
    row(f"{label}: launch + cudaStreamSynchronize, ring vs plain (the move at each sync), process clock",
        f"{fmt_ns(ring_sync)} vs {fmt_ns(plain_sync)} (+{fmt_ns(ring_sync - plain_sync)})",
        "information: copying and appending a launch's records", None)
    launches = sum(int(f["launches"]) for f in run.lines("kernel_timing: syncs round=")
                   if f["kernel"] == "vec_add_ring")
    t = ring_totals(run, "warp_records")
    expected = (1 + launches) * grid * 8
    if not t:
        row(f"{label}: the ring's records after launch + sync pairs", "no device_ring summary",
            f"{expected} produced", False)
        return
    row(f"{label}: the ring's records after launch + sync pairs: produced, delivered, lost, abandoned",
        f"{t['produced']}, {t['delivered']}, {t['lost']}, {t['abandoned']}",
        f"{expected} produced ((1 warm-up + {launches}) launches x grid x 8 warps) = delivered + lost + abandoned",
        t["produced"] == expected and t["produced"] == t["delivered"] + t["lost"] + t["abandoned"])


def check_load(runs):
    for image, what in (("kernel_timing", "fatbin, sm_90 SASS + compute_90 PTX"),
                        ("kernel_timing-ptx", "fatbin, compute_90 PTX only")):
        plain, probed = runs(f"load_plain.{image}"), runs(f"load_probes.{image}")
        kinds, _ = probed.kernels()
        instrumented = sorted(kinds.get("instrumented", ()))
        ok_runs = plain.status == "0" and probed.status == "0" and instrumented == OVERHEAD_KERNELS
        row(f"attach cost, {image}.fatbin ({what}): exit status without / with probes, kernels instrumented",
            f"{plain.status or 'not run'} / {probed.status or 'not run'}, {len(instrumented)}",
            f"0 / 0, {len(OVERHEAD_KERNELS)}", ok_runs)
        for api in ("cuModuleLoadData", "cuLibraryLoadData"):
            def times(run):
                return [float(f["with_functions_ns"]) for f in run.lines("kernel_timing: load api=")
                        if f.get("api") == api]
            without, with_probes = times(plain), times(probed)
            if not without or not with_probes:
                row(f"attach cost, {image}.fatbin, {api}", "no load times", "a time per load", False)
                continue
            a, b = statistics.median(without), statistics.median(with_probes)
            row(f"attach cost, {image}.fatbin, {api} + every function, median of {len(without)}",
                f"{fmt_ns(a)} without probes, {fmt_ns(b)} with (+{fmt_ns(b - a)}, {b / a:.1f}x)",
                "information; anchor: bpftime 5.6-27.9 s for llama.cpp's fatbin", None)


def main():
    work, out, sizes, rounds, launches, elements = sys.argv[1:7]
    sizes, rounds, launches = sizes.split(), int(rounds), int(launches)
    per_launch = (int(elements) + 255) // 256 * 256  # the coverage runs' grid x block

    def runs(name):
        return Run(work, name)
    check_exact(runs("exact"))
    check_counting(runs("runtime"), "CUDA C++, runtime API (vec_add, static cudart)",
                   "vec_add: ", per_launch)
    check_counting(runs("driver_ptx"), "driver API, PTX by cuModuleLoadData (drv_launch)",
                   "drv_launch: ", per_launch)
    check_ring(runs("ring"), per_launch // 256)
    cupy = runs("cupy")
    if cupy.present:
        check_counting(cupy, "CuPy RawKernel compiled to PTX (CUPY_COMPILE_WITH_PTX=1)",
                       "cupy_rawkernel: ", per_launch)
    else:
        note("coverage: CuPy RawKernel compiled to PTX", "cupy not installed",
             "not run: cupy not installed")
    seconds = None
    try:
        with open(f"{work}/python.seconds") as f:
            begin, end = (float(x) for x in f.read().split())
            seconds = end - begin
    except (OSError, ValueError):
        pass
    check_python(runs("python"), seconds)
    check_overhead(runs, sizes, rounds, launches)
    check_load(runs)
    try:
        with open(f"{work}/total.seconds") as f:
            begin, end = (int(x) for x in f.read().split())
        row("the whole check's time", f"{end - begin} s", f"< {BUDGET_S} s", end - begin < BUDGET_S)
    except (OSError, ValueError):
        row("the whole check's time", "unknown", f"< {BUDGET_S} s", False)
    finish(f"{out}/results-device-h200.md", "Device programs on the GPU: exact, coverage, cost",
           "tests/gpu/device_check.sh on a machine with a GPU: counts and block spans, the "
           "programs and kernels reached, the probes' cost as ratios to the same kernel "
           "uninstrumented (GPU time by CUDA events, interleaved, medians), module load "
           "time with and without probes.")


if __name__ == "__main__":
    main()
