"""What the Python workloads of gpu/ share: argument types and the lines they
print, "NAME: ready pid=P" once warm and "NAME: pid=P key=value ..." at the end
(the GPU scripts read both)."""
import argparse
import os
import sys


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text}")
    return value


def non_negative_float(text):
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
    return value


def add_loop_arguments(parser, iterations_help):
    """--iterations N (default 100), or --duration SECONDS instead; --start-delay
    SECONDS after the ready line (a tracer started system-wide attaches then)."""
    parser.add_argument("--iterations", type=positive_int, default=100,
                        help=f"{iterations_help} (default 100)")
    parser.add_argument("--duration", type=non_negative_float,
                        help="run for this many seconds instead of --iterations")
    parser.add_argument("--start-delay", type=non_negative_float, default=0.0,
                        help="seconds to wait after the ready line (default 0)")


def cuda_device(name):
    """The CUDA device torch uses, or None (said on stderr) when there is none."""
    import torch  # here: what parses arguments needs no torch

    if not torch.cuda.is_available():
        say(name, "no CUDA device available", error=True)
        return None
    return torch.device("cuda")


def say(name, *fields, error=False):
    """One line "NAME: FIELD FIELD ...", flushed (stderr when error)."""
    print(f"{name}: " + " ".join(str(field) for field in fields),
          file=sys.stderr if error else sys.stdout, flush=True)


def say_ready(name):
    say(name, f"ready pid={os.getpid()}")


def say_done(name, **values):
    say(name, f"pid={os.getpid()}", *(f"{key}={value}" for key, value in values.items()))
