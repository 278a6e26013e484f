#!/usr/bin/env python3
"""cupy_rawkernel: a CuPy RawKernel compiled to PTX (CUPY_COMPILE_WITH_PTX=1:
NVRTC's PTX, loaded by cuModuleLoadData), for device programs
(tests/gpu/device_check.sh). The kernel is vec_add_cupy, blocks of 256.

usage: python3 gpu/cupy_rawkernel.py [--iterations N] [--elements N]
prints "cupy_rawkernel: launches=L elements=N grid=G block=256 result=ok";
exits 3 with "cupy_rawkernel: cupy not installed: WHY" without CuPy.
"""
import argparse
import os
import sys
import tempfile

BLOCK = 256
SOURCE = r'''
extern "C" __global__ void vec_add_cupy(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}
'''


def main():
    parser = argparse.ArgumentParser(description="a CuPy RawKernel compiled to PTX")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--elements", type=int, default=1000)
    args = parser.parse_args()
    if args.iterations <= 0 or args.elements <= 0:
        print("cupy_rawkernel: --iterations and --elements must be > 0", file=sys.stderr)
        return 2
    # PTX rather than a cubin, compiled afresh (no kernel cache from an earlier run).
    os.environ["CUPY_COMPILE_WITH_PTX"] = "1"
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-cache-")
    try:
        import cupy
        import numpy
    except ImportError as error:
        print(f"cupy_rawkernel: cupy not installed: {error}", file=sys.stderr)
        return 3
    kernel = cupy.RawKernel(SOURCE, "vec_add_cupy")
    a = numpy.arange(args.elements, dtype=numpy.float32) % 1000
    b = 2 * a + 1
    dev_a, dev_b = cupy.asarray(a), cupy.asarray(b)
    dev_c = cupy.asarray(numpy.zeros_like(a))
    grid = (args.elements + BLOCK - 1) // BLOCK
    for _ in range(args.iterations):
        kernel((grid,), (BLOCK,), (dev_a, dev_b, dev_c, numpy.int32(args.elements)))
    cupy.cuda.runtime.deviceSynchronize()
    if not numpy.array_equal(cupy.asnumpy(dev_c), a + b):
        print("cupy_rawkernel: wrong result", file=sys.stderr)
        return 1
    print(f"cupy_rawkernel: launches={args.iterations} elements={args.elements} grid={grid} "
          f"block={BLOCK} result=ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
