#!/usr/bin/env python3
"""torch_matmul: a PyTorch matmul loop on the GPU, for tracing real workloads.

usage: python3 gpu/torch_matmul.py --iterations N --size S [--duration SECONDS]
                                   [--dtype float32|bfloat16] [--start-delay SECONDS]

After warm-up it prints "torch_matmul: ready pid=P" (flushed), so a tracer
started system-wide can wait for it; --start-delay gives that tracer time
to attach before the measured loop starts. It then runs N matmuls, or with
--duration, as many as fit in that many seconds, synchronizes, and prints
"torch_matmul: pid=P iterations=N size=S".
"""
import argparse
import sys
import time

import torch

from workload import add_loop_arguments, cuda_device, positive_int, say, say_done, say_ready

# Bounds how far the CPU may queue ahead of the GPU, so --duration is honest.
SYNC_EVERY = 64
WARMUP_ITERATIONS = 3
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def parse_args():
    parser = argparse.ArgumentParser(description="PyTorch matmul loop on cuda")
    add_loop_arguments(parser, "matmuls to run")
    parser.add_argument("--size", type=positive_int, default=1024,
                        help="square matrix size (default 1024)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    return parser.parse_args()


def main():
    args = parse_args()
    device = cuda_device("torch_matmul")
    if device is None:
        return 1
    dtype = DTYPES[args.dtype]
    a = torch.randn(args.size, args.size, device=device, dtype=dtype)
    b = torch.randn(args.size, args.size, device=device, dtype=dtype)

    # Warm-up loads cuBLAS and its kernels before the tracer is told to look.
    for _ in range(WARMUP_ITERATIONS):
        c = a @ b
    torch.cuda.synchronize()
    say_ready("torch_matmul")
    if args.start_delay:
        time.sleep(args.start_delay)

    iterations = 0
    deadline = time.monotonic() + args.duration if args.duration is not None else None
    while True:
        if deadline is None:
            if iterations >= args.iterations:
                break
        elif iterations % SYNC_EVERY == 0 and time.monotonic() >= deadline:
            break
        c = a @ b
        iterations += 1
        if iterations % SYNC_EVERY == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()

    if not torch.isfinite(c.float()).all():
        say("torch_matmul", "non-finite result", error=True)
        return 1
    say_done("torch_matmul", iterations=iterations, size=args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
