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
this script ("launches_by_line": each launch placed by time under the
innermost op or Python call of its thread that stands on a line of the
script), to set against cuprobe's count on the same run.

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
    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        with_stack=True)
    profiler.start()
    return profiler


LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def script_line_of(event, script):
    """The line of this script an event stands on: the innermost frame of its
    stack in the script (an op recorded with with_stack), or, for the Python
    tracer's call events ("path(line): function", the call site), its own."""
    for frame in getattr(event, "stack", None) or []:
        # "path(line): function", innermost first
        where, _, _ = frame.partition(": ")
        file, _, number = where.rpartition("(")
        if number.endswith(")") and number[:-1].isdigit() and os.path.abspath(file) == script:
            return int(number[:-1])
    where, _, _ = event.name.partition(": ")
    file, _, number = where.rpartition("(")
    if number.endswith(")") and number[:-1].isdigit() and file and os.path.abspath(file) == script:
        return int(number[:-1])
    return None


def write_profile(profiler, path, start_ns, end_ns):
    """Each launch the profiler saw, by the line of this script it happened under.

    The profiler's runtime events (cudaLaunchKernel) carry no stack and, on
    recent torch, no cpu_parent: a launch is placed by time instead, under the
    innermost event of the same thread whose span holds the launch's start and
    that stands on a line of this script (an op with a stack, or a Python call)."""
    script = os.path.abspath(__file__)
    launches, placers = [], {}
    for event in profiler.events():
        if event.name in LAUNCH_NAMES:
            launches.append(event)
            continue
        line = script_line_of(event, script)
        if line is not None:
            span = event.time_range
            placers.setdefault(event.thread, []).append((span.start, -span.end, line))
    for spans in placers.values():
        spans.sort()
    starts = {thread: [s[0] for s in spans] for thread, spans in placers.items()}
    by_line, unplaced = {}, 0
    for launch in launches:
        at, line = launch.time_range.start, None
        spans = placers.get(launch.thread, [])
        # the latest-starting span that holds the launch is the innermost
        i = bisect.bisect_right(starts.get(launch.thread, []), at) - 1
        while i >= 0 and line is None:
            span_start, negative_end, span_line = spans[i]
            if -negative_end >= at:
                line = span_line
            i -= 1
        if line is None:
            unplaced += 1
        else:
            by_line[line] = by_line.get(line, 0) + 1
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"start_ns": start_ns, "end_ns": end_ns, "launches": len(launches),
                   "launches_unplaced": unplaced,
                   "events_on_script_lines": sum(len(s) for s in placers.values()),
                   "launches_by_line": {str(k): v for k, v in by_line.items()}}, out)


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
        profiler.stop()
        write_profile(profiler, args.profile, start_ns, end_ns)
    del value
    print(f"torch_item_loop: pid={os.getpid()} python={sys.version_info.major}.{sys.version_info.minor} "
          f"steps={args.steps} warmup={args.warmup} item_every={args.item_every} tiny={args.tiny} "
          f"loop_s={loop_s:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
