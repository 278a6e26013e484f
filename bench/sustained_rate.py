#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The sustained-rate bench: PROCESSES drv_launch processes of THREADS threads
launch as fast as the driver lets them, untraced and then traced by one
`cuprobe trace -p ... -o /dev/null` (text, then JSON) with a large ring.

Reports, per mode: launches and their rate over the launches' own window
(drv_launch --window: earliest thread start to latest join, across the
processes), cuprobe's events delivered and lost (its exit summary), and
cuprobe's own CPU time (wait4's rusage of cuprobe alone, not its targets).
Prints a markdown table; exit 1 when a run failed or lost records.

usage: sudo bench/sustained_rate.py [--cuprobe PATH] [--drv-launch PATH]
           [--processes N] [--threads N] [--launches N] [--ring-size SIZE]
           [--start-delay MS]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "build", "bin")


def parse_window(text):
    """launches, start, end of one drv_launch summary line."""
    fields = dict(re.findall(r"(\w+)=(\S+)", text))
    for key in ("launches", "launch_start_ns", "launch_end_ns"):
        if key not in fields or "result" not in fields:
            raise RuntimeError("drv_launch said: " + text.strip()[-300:])
    return int(fields["launches"]), int(fields["launch_start_ns"]), int(fields["launch_end_ns"])


def run_mode(args, mode, workdir):
    """One run: the workloads, traced in mode (None, 'text', 'json')."""
    outs, procs = [], []
    for i in range(args.processes):
        out = open(os.path.join(workdir, f"drv-{mode}-{i}.txt"), "w+")
        outs.append(out)
        procs.append(subprocess.Popen(
            [args.drv_launch, str(args.launches), str(args.threads), "--window",
             "--start-delay", str(args.start_delay)], stdout=out, stderr=subprocess.STDOUT))
    tracer, summary, cpu = None, "", None
    if mode:
        cmd = [args.cuprobe, "trace", "--ring-size", args.ring_size, "-o", "/dev/null"]
        if mode == "json":
            cmd.append("--json")
        for p in procs:
            cmd += ["-p", str(p.pid)]
        err = open(os.path.join(workdir, f"cuprobe-{mode}.err"), "w+")
        tracer = subprocess.Popen(cmd, stderr=err)
    rcs = [p.wait() for p in procs]
    if tracer:
        # cuprobe ends once its -p targets have; wait4 gives its rusage alone.
        _, status, usage = os.wait4(tracer.pid, 0)
        tracer.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        err.seek(0)
        summary = err.read()
        err.close()
    launches, starts, ends = 0, [], []
    for out in outs:
        out.seek(0)
        n, start, end = parse_window(out.read())
        out.close()
        launches += n
        starts.append(start)
        ends.append(end)
    window = (max(ends) - min(starts)) / 1e9
    row = {"mode": mode or "untraced", "launches": launches, "window_s": window,
           "rate": launches / window, "ok": all(rc == 0 for rc in rcs), "cpu_s": cpu}
    if tracer:
        m = re.search(r"(\d+) events delivered, (\d+) lost", summary)
        row["ok"] = row["ok"] and tracer.returncode == 0 and m is not None
        row["delivered"], row["lost"] = (int(m[1]), int(m[2])) if m else (None, None)
        if not m:
            print(f"sustained_rate: cuprobe ({mode}) exited {tracer.returncode}: "
                  f"{summary.strip()[-300:]}", file=sys.stderr)
    return row


def positive(text):
    """An integer of at least 1, for argparse."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not '{text}'")
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cuprobe", default=os.path.join(BUILD, "cuprobe"))
    ap.add_argument("--drv-launch", default=os.path.join(BUILD, "drv_launch"))
    ap.add_argument("--processes", type=positive, default=4)
    ap.add_argument("--threads", type=positive, default=8)
    ap.add_argument("--launches", type=positive, default=125000, help="per thread")
    ap.add_argument("--ring-size", default="64M")
    ap.add_argument("--start-delay", type=positive, default=1500,
                    help="ms each workload sleeps before cuInit (time to attach)")
    args = ap.parse_args()
    for path in (args.cuprobe, args.drv_launch):
        if not os.access(path, os.X_OK):
            sys.exit(f"sustained_rate: {path}: not an executable")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sustained-") as workdir:
        for mode in (None, "text", "json"):
            try:
                rows.append(run_mode(args, mode, workdir))
            except (RuntimeError, OSError) as err:
                print(f"sustained_rate: {mode or 'untraced'} run: {err}", file=sys.stderr)
                return 1
    print(f"{args.processes} processes x {args.threads} threads x {args.launches} launches, "
          f"ring {args.ring_size}\n")
    print("| run | launches | window | launches/s | delivered | lost | cuprobe CPU | per event | share of one core |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ok = True
    for r in rows:
        ok = ok and r["ok"] and not r.get("lost")
        if r["cpu_s"] is None:
            tail = "| - | - | - | - | - |"
        else:
            per = r["cpu_s"] / r["delivered"] * 1e9 if r.get("delivered") else float("nan")
            tail = (f"| {r['delivered']} | {r['lost']} | {r['cpu_s']:.2f} s | {per:.0f} ns "
                    f"| {100 * r['cpu_s'] / r['window_s']:.0f}% |")
        print(f"| {r['mode']} | {r['launches']} | {r['window_s']:.2f} s | {r['rate'] / 1000:.0f}k "
              + tail + ("" if r["ok"] else " FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
