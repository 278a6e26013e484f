#!/usr/bin/env python3
"""torch_mlp: forward and backward passes of a small MLP on the GPU.

usage: python3 gpu/torch_mlp.py --iterations N [--batch B] [--hidden H]
                                [--duration SECONDS] [--start-delay SECONDS]
                                [--synchronize N] [--release]

Trains on random data (the point is the kernel, allocation and copy traffic,
not learning). After one warm-up step it prints "torch_mlp: ready pid=P"
(flushed); at the end "torch_mlp: pid=P iterations=N batch=B hidden=H loss=L us_per_step=T"
(T: wall time of the measured loop, after the warm-up step, per step).
With --synchronize N it then calls torch.cuda.synchronize() N more times;
with --release it frees its tensors and empties PyTorch's cache at the end
and prints "torch_mlp: max_memory_reserved=B reserved_after_release=B".
"""
import argparse
import sys
import time

import torch
from torch import nn

from workload import add_loop_arguments, cuda_device, positive_int, say, say_done, say_ready

INPUT_FEATURES = 512
CLASSES = 10
LEARNING_RATE = 1e-3


def parse_args():
    parser = argparse.ArgumentParser(description="small MLP training loop on cuda")
    add_loop_arguments(parser, "training steps")
    parser.add_argument("--batch", type=positive_int, default=256)
    parser.add_argument("--hidden", type=positive_int, default=1024)
    parser.add_argument("--synchronize", type=int, default=0,
                        help="calls of torch.cuda.synchronize() after the loop")
    parser.add_argument("--release", action="store_true",
                        help="free everything and empty the cache at the end")
    return parser.parse_args()


def main():
    args = parse_args()
    device = cuda_device("torch_mlp")
    if device is None:
        return 1
    model = nn.Sequential(
        nn.Linear(INPUT_FEATURES, args.hidden),
        nn.ReLU(),
        nn.Linear(args.hidden, args.hidden),
        nn.ReLU(),
        nn.Linear(args.hidden, CLASSES),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    inputs = torch.randn(args.batch, INPUT_FEATURES, device=device)
    labels = torch.randint(0, CLASSES, (args.batch,), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
        return loss

    # One step loads every kernel the loop uses before the tracer looks.
    step()
    torch.cuda.synchronize()
    say_ready("torch_mlp")
    if args.start_delay:
        time.sleep(args.start_delay)

    iterations = 0
    loss = float("nan")
    started = time.monotonic()
    deadline = time.monotonic() + args.duration if args.duration is not None else None
    while (iterations < args.iterations if deadline is None
           else time.monotonic() < deadline):
        # .item() synchronizes every step, which also paces --duration.
        loss = step().item()
        iterations += 1
    torch.cuda.synchronize()
    elapsed = time.monotonic() - started

    say_done("torch_mlp", iterations=iterations, batch=args.batch, hidden=args.hidden,
             loss=f"{loss:.4f}", us_per_step=f"{elapsed * 1e6 / max(iterations, 1):.1f}")
    for _ in range(args.synchronize):
        torch.cuda.synchronize()
    if args.release:
        reserved_peak = torch.cuda.max_memory_reserved()
        del model, optimizer, inputs, labels
        torch.cuda.synchronize()
        # cuBLAS workspaces come from the caching allocator and stay cached per handle.
        torch._C._cuda_clearCublasWorkspaces()
        torch.cuda.empty_cache()
        say("torch_mlp", f"max_memory_reserved={reserved_peak}",
            f"reserved_after_release={torch.cuda.memory_reserved()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
