#!/usr/bin/env python3
"""torch_item_loop: a PyTorch training loop whose loss.item() every N steps waits for the GPU.

usage: python3 gpu/torch_item_loop.py [--steps S] [--item-every N] [--warmup W]
                                      [--size D] [--batch B] [--tiny K]
                                      [--profile FILE] [--rate-seconds T]

Each step (train_step) runs the model forward, the loss, backward and the
optimizer; every N-th step of the measured loop reads the loss with
.item(), a device-to-host copy and a stream sync: the wait the --python
checks blame on that line. --tiny K replaces the step by K in-place adds
on a small tensor (a launch-bound loop: the walker's cost per call shows).
The calls the checks count are made on lines that end with "# @" and a
name (forward, loss, backward, step, tiny, item, final-sync); W warm-up
steps run train_step (or the tiny step) first, without .item().

Prints "torch_item_loop: pid=P python=X.Y steps=S warmup=W item_every=N
tiny=K loop_s=T", T the measured loop's time up to its final sync.

--profile FILE runs the measured loop under torch.profiler with
with_stack=True and writes FILE, JSON: the loop's CLOCK_MONOTONIC bounds
(start_ns, end_ns) and the kernel launches the profiler saw per line of
this script ("launches_by_line", and per system thread id in
"launches_by_thread_and_line": each launch placed by time under the
innermost op of its thread whose stack stands on a line of the script), to
set against cuprobe's count on the same run ("main_thread": the key of the
main thread). The profiler's frames carry
each function's first line, not the line running: its "lines" are the
functions' def lines.

--rate-seconds T runs the step for T seconds instead and prints, every
0.2 s, "torch_item_loop: rate t_ns=N steps=S" (CLOCK_MONOTONIC at the end
of the sample, steps in it; each sample ends with a sync): a tracer
attached and detached meanwhile shows what it costs, in one process.
"""
import argparse
import bisect
import json
import os
import sys
import time

import torch


def train_step(model, optimizer, x, target):
    optimizer.zero_grad(set_to_none=True)
    y = model(x)  # @forward
    loss = torch.nn.functional.mse_loss(y, target)  # @loss
    loss.backward()  # @backward
    optimizer.step()  # @step
    return loss


def tiny_step(t, count):
    for _ in range(count):
        t.add_(1.0)  # @tiny
    return t.sum()


def rate(step, seconds):
    """Steps in samples of 0.2 s, each ended by a sync, for seconds."""
    print(f"torch_item_loop: rate pid={os.getpid()} python={sys.version_info.major}."
          f"{sys.version_info.minor}", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sample_end, steps = time.monotonic() + 0.2, 0
        while time.monotonic() < sample_end:
            step()
            steps += 1
        torch.cuda.synchronize()
        print(f"torch_item_loop: rate t_ns={time.monotonic_ns()} steps={steps}", flush=True)
    return 0


def start_profiler():
    # with_stack alone gives empty stacks on torch 2.0 to 2.3 and, measured,
    # on the H200's torch: the Python frames reach the events only with the
    # experimental config's verbose set (pytorch/pytorch#100253, #127951).
    extra = {}
    config = getattr(getattr(torch._C, "_profiler", None), "_ExperimentalConfig", None)
    if config is not None:
        extra["experimental_config"] = config(verbose=True)
    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        with_stack=True, **extra)
    profiler.start()
    return profiler


MAIN_MARKER = "torch_item_loop: main thread"
LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def is_script(file, script):
    """The profiler writes paths relative to the sys.path entry they were found under."""
    return file == script or script.endswith(os.sep + file)


def script_line_of(event, script):
    """The innermost frame of an op's stack (with_stack) in this script: its line, or None."""
    for frame in getattr(event, "stack", None) or []:
        # "path(line): function", innermost first
        where, _, _ = frame.partition(": ")
        file, _, number = where.rpartition("(")
        if number.endswith(")") and number[:-1].isdigit() and is_script(file, script):
            return int(number[:-1])
    return None


def innermost_line(spans, starts, at):
    """The line of the latest-starting span (start, -end, line) that holds at: the innermost."""
    i = bisect.bisect_right(starts, at) - 1
    while i >= 0:
        if -spans[i][1] >= at:
            return spans[i][2]
        i -= 1
    return None


def write_profile(profiler, path, start_ns, end_ns):
    """Each launch the profiler saw, by the line of this script it happened under.

    The profiler's runtime events (cudaLaunchKernel) carry no stack and, on
    recent torch, no cpu_parent: a launch is placed by time, under the
    innermost op of its thread whose span holds the launch's start and whose
    stack stands on a line of this script. Ops name their thread by the
    profiler's own small numbers, runtime events by the system's: each op
    thread is taken for the system thread most of whose launches its ops hold.
    (The Python tracer's call events are no help: they name the callee's
    first line, not the line that called it.)"""
    script = os.path.abspath(__file__)
    launches, ops, with_stack, sample = {}, {}, 0, None
    main_op_thread = None
    for event in profiler.events():
        if event.name == MAIN_MARKER:
            main_op_thread = event.thread
            continue
        if event.name in LAUNCH_NAMES:
            launches.setdefault(event.thread, []).append(event.time_range.start)
            continue
        if getattr(event, "stack", None):
            with_stack += 1
            sample = sample or event.stack[:3]
        line = script_line_of(event, script)
        if line is not None:
            ops.setdefault(event.thread, []).append((event.time_range.start, -event.time_range.end, line))
    starts = {}
    for thread, spans in ops.items():
        spans.sort()
        starts[thread] = [span[0] for span in spans]
    threads = {}
    for op_thread, spans in ops.items():
        held = {tid: sum(innermost_line(spans, starts[op_thread], at) is not None for at in ats)
                for tid, ats in launches.items()}
        best = max(held, key=held.get, default=None)
        if best is not None and held[best] > 0:
            threads.setdefault(best, []).append(op_thread)
    by_line, by_thread, unplaced = {}, {}, 0
    for tid, ats in launches.items():
        for at in ats:
            line = None
            for op_thread in threads.get(tid, []):
                line = line or innermost_line(ops[op_thread], starts[op_thread], at)
            if line is None:
                unplaced += 1
                continue
            by_line[line] = by_line.get(line, 0) + 1
            lines = by_thread.setdefault(str(tid), {})
            lines[str(line)] = lines.get(str(line), 0) + 1
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"start_ns": start_ns, "end_ns": end_ns,
                   "launches": sum(len(ats) for ats in launches.values()),
                   "launches_unplaced": unplaced,
                   "events_with_a_stack": with_stack, "a_stack": sample,
                   "events_on_script_lines": sum(len(s) for s in ops.values()),
                   "threads": {str(k): v for k, v in threads.items()},
                   "main_thread": next((str(tid) for tid, op_threads in threads.items()
                                        if main_op_thread in op_threads), None),
                   "launches_by_line": {str(k): v for k, v in by_line.items()},
                   "launches_by_thread_and_line": by_thread}, out)


def positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text}")
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=positive, default=200)
    parser.add_argument("--item-every", type=positive, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--size", type=positive, default=1024)
    parser.add_argument("--batch", type=positive, default=256)
    parser.add_argument("--tiny", type=int, default=0)
    parser.add_argument("--profile")
    parser.add_argument("--rate-seconds", type=float, default=0)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("torch_item_loop: no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    d = args.size
    model = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.ReLU(), torch.nn.Linear(d, d)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, d, device=device)
    target = torch.randn(args.batch, d, device=device)
    small = torch.zeros(16, device=device)

    def step():
        if args.tiny:
            return tiny_step(small, args.tiny)
        return train_step(model, optimizer, x, target)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    if args.rate_seconds:
        return rate(step, args.rate_seconds)
    profiler = start_profiler() if args.profile else None
    # An op of the main thread around the loop: it tells the main thread among the profiler's threads
    marker = torch.profiler.record_function(MAIN_MARKER) if profiler else None
    if marker:
        marker.__enter__()
    start_ns = time.monotonic_ns()
    value = None
    start = time.perf_counter()
    for s in range(args.steps):
        loss = step()
        if (s + 1) % args.item_every == 0:
            value = loss.item()  # @item
    torch.cuda.synchronize()  # @final-sync
    loop_s = time.perf_counter() - start
    end_ns = time.monotonic_ns()
    if profiler:
        marker.__exit__(None, None, None)
        profiler.stop()
        write_profile(profiler, args.profile, start_ns, end_ns)
    del value
    print(f"torch_item_loop: pid={os.getpid()} python={sys.version_info.major}.{sys.version_info.minor} "
          f"steps={args.steps} warmup={args.warmup} item_every={args.item_every} tiny={args.tiny} "
          f"loop_s={loop_s:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
