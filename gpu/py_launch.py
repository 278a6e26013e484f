#!/usr/bin/env python3
"""py_launch: a Python program on the CUDA driver API (through ctypes), for --python.

usage: py_launch.py LIBCUDA ITERATIONS [--threads N] [--thread-iterations N]
                    [--depth N] [--wait-file PATH]

Every CUDA call the tests count is made on a line that ends with a marker
comment, "# @" and a name: the tests find each call's line by its marker,
and know from the arguments how many times it runs:

  launch-a        ITERATIONS launches, main thread
  launch-b        one launch in three of those iterations (i % 3 == 0)
  copy            one host-to-device copy in four (i % 4 == 0)
  sync            a stream sync every SYNC_EVERY launches, and one at the end
  alloc           ALLOCS allocations, from a function nested in another
  thread-launch   THREAD_ITERATIONS launches in each of N threads (default 12)
  thread-sync     one sync at the end of each thread
  deep-launch     DEEP_CALLS launches from DEPTH recursive calls down (> 64 frames)
  latin1-launch   a launch from café()   (a 1-byte-per-character name)
  ucs2-launch     a launch from 启动_λ()  (2 bytes)
  ucs4-launch     a launch from 𠀀()      (4 bytes)

With --wait-file it sets the driver up, prints "py_launch: ready pid=P",
and waits for PATH to exist before the counted calls (a tracer attaches
to the running process meanwhile); once done, for PATH to be gone before
it exits (its code objects live until the tracer has read them). It
prints "py_launch: done" after the counted calls.

With --rate it makes ITERATIONS launches from DEPTH calls down instead, in
a loop kept lean (the walker's bench), and prints "py_launch: rate
launches=N seconds=S".
"""
import argparse
import ctypes
import os
import sys
import threading
import time

SYNC_EVERY = 10
ALLOCS = 3
DEEP_CALLS = 2
ELEMENTS = 256
PTX = (b".version 7.5\n.target sm_75\n.address_size 64\n"
       b".visible .entry vec_add(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)\n"
       b"{\n\tret;\n}\n")


class Driver:
    """The few driver entry points used, with their C signatures."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        u32, ptr = ctypes.c_uint, ctypes.c_void_p
        self.signatures = {
            "cuInit": [u32],
            "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ptr), ctypes.c_int],
            "cuCtxSetCurrent": [ptr],
            "cuModuleLoadData": [ctypes.POINTER(ptr), ctypes.c_char_p],
            "cuModuleGetFunction": [ctypes.POINTER(ptr), ptr, ctypes.c_char_p],
            "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t],
            "cuMemcpyHtoD_v2": [ctypes.c_uint64, ptr, ctypes.c_size_t],
            "cuStreamCreate": [ctypes.POINTER(ptr), u32],
            "cuStreamSynchronize": [ptr],
            "cuLaunchKernel": [ptr, u32, u32, u32, u32, u32, u32, u32, ptr,
                               ctypes.POINTER(ptr), ctypes.POINTER(ptr)],
        }
        for name, argtypes in self.signatures.items():
            function = getattr(lib, name)
            function.argtypes = argtypes
            function.restype = ctypes.c_int
            setattr(self, name, function)


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed: CUresult {result}")


class Workload:
    def __init__(self, cu):
        self.cu = cu
        check(cu.cuInit(0), "cuInit")
        device = ctypes.c_int()
        check(cu.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device.value),
              "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        module = ctypes.c_void_p()
        check(cu.cuModuleLoadData(ctypes.byref(module), PTX), "cuModuleLoadData")
        self.function = ctypes.c_void_p()
        check(cu.cuModuleGetFunction(ctypes.byref(self.function), module, b"vec_add"),
              "cuModuleGetFunction")
        self.buffers = [ctypes.c_uint64() for _ in range(3)]
        for buffer in self.buffers:
            check(cu.cuMemAlloc_v2(ctypes.byref(buffer), ELEMENTS * 4), "cuMemAlloc")
        self.n = ctypes.c_uint(ELEMENTS)
        self.values = [ctypes.c_void_p(ctypes.addressof(b)) for b in self.buffers]
        self.values.append(ctypes.c_void_p(ctypes.addressof(self.n)))
        self.params = (ctypes.c_void_p * 4)(*self.values)
        self.host = (ctypes.c_float * ELEMENTS)()
        self.stream = self.new_stream()

    def new_stream(self):
        stream = ctypes.c_void_p()
        check(self.cu.cuStreamCreate(ctypes.byref(stream), 0), "cuStreamCreate")
        return stream

    def launch_args(self, stream):
        return (self.function, 1, 1, 1, ELEMENTS, 1, 1, 0, stream, self.params, None)


def allocate(work, count):
    """Allocations from a function nested in another."""
    def nested():
        buffer = ctypes.c_uint64()
        check(work.cu.cuMemAlloc_v2(ctypes.byref(buffer), 4096), "cuMemAlloc")  # @alloc
    for _ in range(count):
        nested()


def thread_main(work, iterations, errors):
    try:
        check(work.cu.cuCtxSetCurrent(work.context), "cuCtxSetCurrent")
        stream = work.new_stream()
        for _ in range(iterations):
            check(work.cu.cuLaunchKernel(*work.launch_args(stream)), "launch")  # @thread-launch
        check(work.cu.cuStreamSynchronize(stream), "sync")  # @thread-sync
    except Exception as error:  # reported by the main thread
        errors.append(error)


def recurse(work, depth):
    if depth:
        return recurse(work, depth - 1)
    check(work.cu.cuLaunchKernel(*work.launch_args(work.stream)), "launch")  # @deep-launch


def café(work):
    check(work.cu.cuLaunchKernel(*work.launch_args(work.stream)), "launch")  # @latin1-launch


def 启动_λ(work):
    check(work.cu.cuLaunchKernel(*work.launch_args(work.stream)), "launch")  # @ucs2-launch


def 𠀀(work):
    check(work.cu.cuLaunchKernel(*work.launch_args(work.stream)), "launch")  # @ucs4-launch


def rate(work, launches, depth):
    if depth:
        return rate(work, launches, depth - 1)
    launch, args = work.cu.cuLaunchKernel, work.launch_args(work.stream)
    start = time.perf_counter()
    for _ in range(launches):
        launch(*args)  # @rate-launch
    seconds = time.perf_counter() - start
    check(work.cu.cuStreamSynchronize(work.stream), "sync")
    print(f"py_launch: rate launches={launches} seconds={seconds:.6f}", flush=True)


def main_loop(work, iterations):
    cu = work.cu
    for i in range(iterations):
        check(cu.cuLaunchKernel(*work.launch_args(work.stream)), "launch")  # @launch-a
        if i % 3 == 0:
            check(cu.cuLaunchKernel(*work.launch_args(work.stream)), "launch")  # @launch-b
        if i % 4 == 0:
            check(cu.cuMemcpyHtoD_v2(work.buffers[0].value, work.host, ELEMENTS * 4), "copy")  # @copy
        if (i + 1) % SYNC_EVERY == 0:
            check(cu.cuStreamSynchronize(work.stream), "sync")  # @sync
    check(cu.cuStreamSynchronize(work.stream), "sync")  # @sync


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libcuda")
    parser.add_argument("iterations", type=int)
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument("--thread-iterations", type=int, default=20)
    parser.add_argument("--depth", type=int, default=80)
    parser.add_argument("--wait-file")
    parser.add_argument("--rate", action="store_true")
    args = parser.parse_args()
    if args.iterations < 0 or args.threads < 0 or args.thread_iterations < 0 or args.depth < 0:
        parser.error("counts must be >= 0")
    return args


def main():
    args = parse_args()
    work = Workload(Driver(args.libcuda))
    if args.wait_file:
        print(f"py_launch: ready pid={os.getpid()}", flush=True)
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    if args.rate:
        rate(work, args.iterations, args.depth)
        return 0
    main_loop(work, args.iterations)
    allocate(work, ALLOCS)
    errors = []
    threads = [threading.Thread(target=thread_main, args=(work, args.thread_iterations, errors))
               for _ in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        print(f"py_launch: {errors[0]}", file=sys.stderr)
        return 1
    for _ in range(DEEP_CALLS):
        recurse(work, args.depth)
    café(work)
    启动_λ(work)
    𠀀(work)
    print("py_launch: done", flush=True)
    while args.wait_file and os.path.exists(args.wait_file):
        time.sleep(0.01)
    return 0


if __name__ == "__main__":
    sys.exit(main())
