#!/usr/bin/env python3
"""dump_lines: line tables of real code objects and the lines the interpreter gives them.

usage: dump_lines.py OUTPUT

Compiles a sample full of line jumps (blank stretches, decorators, calls
over many lines, comprehensions, long functions) and the sources of a few
standard modules, and writes, for every code object in them:

  version MAJOR MINOR                  (once, first)
  code FIRSTLINENO HEX_CO_LINETABLE
  range START END LINE                 (co_lines(): bytes START to END are on LINE; -1: none)

unit_python decodes each table with cuprobe's decoder and checks every
instruction of every range against the interpreter's own answer.
"""
import sys
import types

MODULES = ["argparse", "threading", "json.decoder", "dataclasses", "collections", "inspect"]


def sample():
    gap = "\n" * 300
    return ("import os\n"
            "def decorated(f):\n    return f\n"
            "@decorated\n@decorated\ndef f(a,\n      b=(1 +\n         2),\n      *c):\n"
            "    x = [i * 2\n         for i in range(a)\n         if i]\n"
            "    y = {k: v for k, v in zip(x,\n                           x)}\n"
            "    return (x,\n            y)\n"
            + gap +
            "class C:\n    def m(self):\n        try:\n            pass\n"
            "        except Exception as e:\n            raise\n        finally:\n"
            "            return lambda q: (q,\n                              q)\n"
            + gap + gap +
            "def long():\n" + "".join(f"    v{i} = os.getpid() + {i}\n" for i in range(400))
            + "    return v0\n"
            "async def co():\n    async with x as y:\n        await y\n"
            "def gen():\n    yield 1\n" + gap + "    yield 2\n")


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def main():
    sources = [("<sample>", sample())]
    for name in MODULES:
        module = __import__(name, fromlist=["_"])
        with open(module.__file__, encoding="utf-8") as source:
            sources.append((module.__file__, source.read()))
    with open(sys.argv[1], "w", encoding="ascii") as out:
        out.write(f"version {sys.version_info.major} {sys.version_info.minor}\n")
        for filename, text in sources:
            for code in code_objects(compile(text, filename, "exec")):
                out.write(f"code {code.co_firstlineno} {code.co_linetable.hex()}\n")
                for start, end, line in code.co_lines():
                    out.write(f"range {start} {end} {-1 if line is None else line}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
