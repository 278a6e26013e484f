"""torch.distributed on the NCCL backend with one rank, known collectives.

    python3 gpu/torch_nccl.py --iterations N [--elements E] [--wait-file PATH]

One process, world size 1 (rendezvous on 127.0.0.1, init_process_group
with device_id: the communicator is made at once). Each iteration makes,
on tensors of E elements:

    all_reduce       float32, SUM   (in place)
    all_reduce       float32, AVG
    broadcast        int32, src 0   (in place)
    all_gather_into_tensor  bfloat16, E per rank (out of place)
    reduce_scatter_tensor   float32, SUM, E per rank (out of place)
    reduce_scatter_tensor   float32, AVG

It prints, per NCCL operation as cuprobe names it, what it asked torch for:

    torch_nccl: op=NAME calls=N bytes=B

(bytes as NCCL would count them: count x datatype size, the count as the
call takes it), then "torch_nccl: pid=P ... result=ok". Whether torch hands
each to NCCL is torch's choice: NCCL's own log (NCCL_DEBUG=INFO,
NCCL_DEBUG_SUBSYS=COLL, on stdout) says which it did; the counted
iterations lie between the lines "torch_nccl: window begin" and
"torch_nccl: window end", flushed so that NCCL's lines fall between them.
With --wait-file it does one uncounted iteration, prints "torch_nccl: ready
pid=P" and waits for PATH to exist before the counted ones (a tracer
attaches in between).
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--wait-file")
    args = parser.parse_args()
    e = args.elements

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    torch.cuda.set_device(0)
    device = torch.device("cuda", 0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)

    f32 = torch.ones(e, device=device)
    i32 = torch.ones(e, dtype=torch.int32, device=device)
    bf16 = torch.ones(e, dtype=torch.bfloat16, device=device)
    gathered = torch.empty(e, dtype=torch.bfloat16, device=device)
    scatter_in = torch.ones(e, device=device)
    scatter_out = torch.empty(e, device=device)
    counts = {}

    def did(op, bytes_):
        calls, total = counts.get(op, (0, 0))
        counts[op] = (calls + 1, total + bytes_)

    def iteration():
        dist.all_reduce(f32, op=dist.ReduceOp.SUM)
        did("all_reduce", e * 4)
        dist.all_reduce(f32, op=dist.ReduceOp.AVG)
        did("all_reduce", e * 4)
        dist.broadcast(i32, src=0)
        did("broadcast", e * 4)
        dist.all_gather_into_tensor(gathered, bf16)
        did("all_gather", e * 2)
        dist.reduce_scatter_tensor(scatter_out, scatter_in, op=dist.ReduceOp.SUM)
        did("reduce_scatter", e * 4)
        dist.reduce_scatter_tensor(scatter_out, scatter_in, op=dist.ReduceOp.AVG)
        did("reduce_scatter", e * 4)

    if args.wait_file:
        iteration()
        torch.cuda.synchronize()
        counts.clear()
        print(f"torch_nccl: ready pid={os.getpid()}", flush=True)
        while not os.path.exists(args.wait_file):
            time.sleep(0.05)
    print("torch_nccl: window begin", flush=True)
    start = time.monotonic_ns()
    for _ in range(args.iterations):
        iteration()
    torch.cuda.synchronize()
    end = time.monotonic_ns()
    print("torch_nccl: window end", flush=True)
    if f32[0].item() != 1.0 or scatter_out[0].item() != 1.0 or gathered[0].item() != 1.0:
        print("torch_nccl: wrong results", file=sys.stderr)
        return 1
    for op, (calls, total) in counts.items():
        print(f"torch_nccl: op={op} calls={calls} bytes={total}")
    print(f"torch_nccl: pid={os.getpid()} iterations={args.iterations} elements={e} "
          f"nccl={'.'.join(map(str, torch.cuda.nccl.version()))} window_start_ns={start} "
          f"window_end_ns={end} result=ok", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
