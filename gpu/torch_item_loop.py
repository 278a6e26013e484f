#!/usr/bin/env python3
"""torch_item_loop: a PyTorch training loop whose loss.item() every N steps waits for the GPU.

usage: python3 gpu/torch_item_loop.py [--steps S] [--item-every N] [--warmup W]
                                      [--size D] [--batch B] [--tiny K]

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
"""
import argparse
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
    value = None
    start = time.perf_counter()
    for s in range(args.steps):
        loss = step()
        if (s + 1) % args.item_every == 0:
            value = loss.item()  # @item
    torch.cuda.synchronize()  # @final-sync
    loop_s = time.perf_counter() - start
    del value
    print(f"torch_item_loop: pid={os.getpid()} python={sys.version_info.major}.{sys.version_info.minor} "
          f"steps={args.steps} warmup={args.warmup} item_every={args.item_every} tiny={args.tiny} "
          f"loop_s={loop_s:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
