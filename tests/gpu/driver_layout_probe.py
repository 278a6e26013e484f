#!/usr/bin/env python3
"""Where does the driver keep a kernel's name, relative to its handle?

An experiment, run on the GPU machine (tests/gpu/README.md): while a traced
process lives, take the (handle -> name) pairs cuprobe learned from the naming
probes, read the process's memory at each handle (/proc/PID/mem, as root) and
look for pointers to that exact name string, directly (handle+o1 -> name) or
one level down (handle+o1 -> p, p+o2 -> name). Prints the offsets that hold
for every handle, per naming API. Nothing here guesses a name: it measures
whether a layout holds for all handles whose names are known.

usage: driver_layout_probe.py EVENTS.json PID
"""
import collections
import json
import struct
import sys


def read(mem, addr, size):
    try:
        mem.seek(addr)
        return mem.read(size)
    except (OSError, OverflowError, ValueError):
        return None


def words(blob):
    return [struct.unpack_from("<Q", blob, i)[0] for i in range(0, len(blob) - 7, 8)]


def main():
    events, pid = sys.argv[1], int(sys.argv[2])
    named = {}
    for line in open(events):
        if not line.startswith("{"):
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line, still being written
        if e["type"] == "name" and e["pid"] == pid and e.get("mangled") and e["result"] == 0:
            named[int(e["handle"], 16)] = (e["api"], e["mangled"])
    direct = collections.defaultdict(collections.Counter)
    indirect = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for handle, (api, name) in list(named.items())[:300]:
            want = name.encode() + b"\0"
            blob = read(mem, handle, 512)
            if not blob:
                continue
            totals[api] += 1
            for i, value in enumerate(words(blob)):
                if value < 4096:
                    continue
                if read(mem, value, len(want)) == want:
                    direct[api][i * 8] += 1
                inner = read(mem, value, 256)
                if not inner:
                    continue
                for j, v2 in enumerate(words(inner)):
                    if v2 >= 4096 and read(mem, v2, len(want)) == want:
                        indirect[api][(i * 8, j * 8)] += 1
    for api in sorted(totals):
        print(f"{api}: {totals[api]} handles with known names")
        for off, n in direct[api].most_common(3):
            print(f"  direct   handle+{off:#x} -> name: {n}/{totals[api]}")
        for (o1, o2), n in indirect[api].most_common(3):
            print(f"  indirect *(handle+{o1:#x})+{o2:#x} -> name: {n}/{totals[api]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
