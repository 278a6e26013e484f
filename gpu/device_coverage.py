#!/usr/bin/env python3
"""device_coverage: PyTorch and Triton kernels for device programs
(tests/gpu/device_check.sh), in one process: what `cuprobe run` with a
program for every kernel (gpu/*) makes of kernels that ship as cubins.

usage: python3 gpu/device_coverage.py [--iterations N] [--size S]
prints "device_coverage: torch_launches=L triton=ok|not installed: WHY
triton_launches=M result=ok" (launches made by this script's own calls).
The Triton kernel is triton_add.py's add_kernel, told from PyTorch's by name.
"""
import argparse
import sys

import torch

from torch_item_loop import positive  # beside this script

try:
    import triton
    from triton_add import add_kernel  # beside this script
    TRITON_ERROR = None
except ImportError as error:  # reported by name, the PyTorch part still runs
    TRITON_ERROR = str(error)


def main():
    parser = argparse.ArgumentParser(description="PyTorch and Triton kernels")
    parser.add_argument("--iterations", type=positive, default=10, help="launches of each kernel")
    parser.add_argument("--size", type=positive, default=1 << 16, help="elements")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("device_coverage: no CUDA device available", file=sys.stderr)
        return 1
    x = torch.arange(args.size, device="cuda", dtype=torch.float32)
    y = torch.full((args.size,), 2.0, device="cuda")
    out = torch.empty_like(x)
    torch_launches = 3
    for _ in range(args.iterations):
        torch.add(x, y, out=out)
        torch.mul(out, 0.5, out=out)
        torch_launches += 2
    torch.cuda.synchronize()
    if not torch.equal(out, (x + y) * 0.5):
        print("device_coverage: wrong PyTorch result", file=sys.stderr)
        return 1
    triton_launches = 0
    if TRITON_ERROR is None:
        grid = (triton.cdiv(args.size, 1024),)
        for _ in range(args.iterations):
            add_kernel[grid](x, y, out, args.size, BLOCK=1024)
            triton_launches += 1
        torch.cuda.synchronize()
        if not torch.equal(out, x + y):
            print("device_coverage: wrong Triton result", file=sys.stderr)
            return 1
    triton_state = "ok" if TRITON_ERROR is None else f"not installed: {TRITON_ERROR}"
    print(f"device_coverage: torch_launches={torch_launches} triton={triton_state} "
          f"triton_launches={triton_launches} result=ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
