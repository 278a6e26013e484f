#!/usr/bin/env python3
"""triton_add: a Triton kernel launched in a loop (Triton launches through the
driver API with its own cuModuleLoadData/cuModuleGetFunction, not cudart).

usage: python3 gpu/triton_add.py --iterations N [--size S]
prints "triton_add: ready pid=P" after compiling, then
"triton_add: pid=P launches=N kernel=add_kernel result=ok"
"""
import argparse
import sys

import torch
import triton
import triton.language as tl

from workload import cuda_device, positive_int, say, say_done, say_ready


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) +
             tl.load(y_ptr + offsets, mask=mask), mask=mask)


def main():
    parser = argparse.ArgumentParser(description="Triton vector add loop")
    parser.add_argument("--iterations", type=positive_int, default=1000)
    parser.add_argument("--size", type=positive_int, default=1 << 16)
    args = parser.parse_args()
    device = cuda_device("triton_add")
    if device is None:
        return 1
    x = torch.rand(args.size, device=device)
    y = torch.rand(args.size, device=device)
    out = torch.empty_like(x)
    grid = (triton.cdiv(args.size, 1024),)
    add_kernel[grid](x, y, out, args.size, BLOCK=1024)  # compile + first launch
    torch.cuda.synchronize()
    say_ready("triton_add")
    for _ in range(args.iterations):
        add_kernel[grid](x, y, out, args.size, BLOCK=1024)
    torch.cuda.synchronize()
    if not torch.allclose(out, x + y):
        say("triton_add", "wrong result", error=True)
        return 1
    say_done("triton_add", launches=args.iterations + 1, kernel="add_kernel", result="ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
