#!/usr/bin/env python3
"""timeline_truth: three GPU loops run under torch.profiler, for checking
cuprobe's kernel bounds against CUPTI's kernel times.

usage: python3 gpu/timeline_truth.py --workload mlp|mlpq|gemm|tiny --profile OUT.json
                                     [--iterations N]

  mlp   forward and backward passes of a small MLP (PyTorch's usual kernels)
  gemm  large cuBLAS matrix multiplications back to back (GPU-bound)
  tiny  one-element additions, a synchronization every 50 (launch-bound)
  mlpq  the MLP step, then an event recorded and polled with event.query()
        until complete (cuEventQuery), as code that checks progress without
        blocking does

It warms up, then profiles the loop (CPU and CUDA activities) and writes
the profiler's Chrome trace to OUT.json. It prints
"timeline_truth: pid=P workload=W window_start_ns=S window_end_ns=E"
where S and E are CLOCK_MONOTONIC nanoseconds (the clock of cuprobe's
records) read just before the profiler starts and after it stops, then
" query_ns=Q": the mean time of event.query() on a completed event over
20000 calls, timed after the profiler stopped (the cost a cuEventQuery
probe adds shows as the difference between a traced and an untraced run).
"""
import argparse
import os
import sys
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile


def mlp_step(state):
    model, optimizer, x, y = state
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()


def make_mlp():
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    return model, optimizer, x, y


def gemm_step(state):
    a, b, c = state
    torch.matmul(a, b, out=c)


def make_gemm():
    return tuple(torch.randn(4096, 4096, device="cuda") for _ in range(3))


def tiny_step(state):
    state[0].add_(1)
    state[1][0] += 1
    if state[1][0] % 50 == 0:
        torch.cuda.synchronize()


def mlpq_step(state):
    mlp_step(state[:4])
    state[4].record()
    while not state[4].query():
        pass


def make_mlpq():
    return make_mlp() + (torch.cuda.Event(),)


def query_ns():
    event = torch.cuda.Event()
    event.record()
    event.synchronize()
    start = time.perf_counter_ns()
    for _ in range(20000):
        event.query()
    return (time.perf_counter_ns() - start) / 20000


def make_tiny():
    return [torch.zeros(1, device="cuda"), [0]]


WORKLOADS = {"mlp": (make_mlp, mlp_step, 200), "gemm": (make_gemm, gemm_step, 200),
             "tiny": (make_tiny, tiny_step, 2000), "mlpq": (make_mlpq, mlpq_step, 200)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--iterations", type=int)
    args = parser.parse_args()
    make, step, default_iterations = WORKLOADS[args.workload]
    iterations = args.iterations or default_iterations
    state = make()
    for _ in range(5):
        step(state)
    torch.cuda.synchronize()
    start = time.monotonic_ns()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            step(state)
        torch.cuda.synchronize()
    end = time.monotonic_ns()
    prof.export_chrome_trace(args.profile)
    print(f"timeline_truth: pid={os.getpid()} workload={args.workload} "
          f"window_start_ns={start} window_end_ns={end} query_ns={query_ns():.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
