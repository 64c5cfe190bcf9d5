"""Where a cold start goes: compile every kernel one level runs, in an empty kernel cache,
and report each jitted function's compile time (self: without the functions it compiled in
turn; total: with them) and how many times it was compiled (once per type signature and
form: a count above 1 is a function typed by two kinds of argument, or one that Python
calls and other kernels call too, ops/callee.py).

    python scripts/compile_times.py [--level 4] [--decode] [--file F] [--top 25] [--json OUT]

The level codes a few KB (of F, by default the golden input the package ships, which holds
text, a bitmap, a worksheet and code: every model speaks) and decodes them with --decode, in
this process,
with numba's compile events recorded; a fresh NUMBA_CACHE_DIR is set before rwkvzip loads,
so nothing comes from an earlier run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "rwkvzip" / "golden" / "input-exe.bin"


def record_compiles() -> list[dict]:
    """Install a listener for numba's compile events; returns the list it fills."""
    from numba.core import event

    rows: list[dict] = []
    stack: list[list] = []

    class Listener(event.Listener):
        def on_start(self, ev):
            fn = ev.data["dispatcher"].py_func
            stack.append([f"{fn.__module__}.{fn.__qualname__}", time.perf_counter(), 0.0])

        def on_end(self, ev):
            name, t0, inner = stack.pop()
            total = time.perf_counter() - t0
            rows.append({"kernel": name, "self_s": total - inner, "total_s": total})
            if stack:
                stack[-1][2] += total

    event.register("numba:compile", Listener())
    return rows


def measure(level: int, decode: bool, data: bytes) -> dict:
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="rwkvzip-compile-times-")
    rows = record_compiles()
    from rwkvzip import api

    t0 = time.perf_counter()
    blob = api.compress(data, level)
    if decode and api.decompress(blob) != data:
        raise SystemExit("compile_times: decoding did not give the data back")
    wall = time.perf_counter() - t0
    return {"level": level, "decode": decode, "bytes": len(data), "wall_s": wall,
            "compiled": len(rows), "compile_s": sum(r["self_s"] for r in rows),
            "kernels": by_function(rows)}


def by_function(rows: list[dict]) -> list[dict]:
    """One row per function (its compilations summed), the costliest first."""
    funcs: dict[str, dict] = {}
    for r in rows:
        f = funcs.setdefault(r["kernel"], {"kernel": r["kernel"], "self_s": 0.0,
                                           "total_s": 0.0, "compilations": 0})
        f["self_s"] += r["self_s"]
        f["total_s"] += r["total_s"]
        f["compilations"] += 1
    return sorted(funcs.values(), key=lambda f: f["self_s"], reverse=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", type=int, default=4)
    ap.add_argument("--decode", action="store_true", help="decode too (its kernels)")
    ap.add_argument("--file", type=Path, default=SAMPLE, help="the data coded (its start)")
    ap.add_argument("--bytes", type=int, default=3000, help="bytes of the file coded")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if "rwkvzip" in sys.modules:
        raise SystemExit("compile_times: run it in a fresh process (rwkvzip is loaded)")
    report = measure(args.level, args.decode, args.file.read_bytes()[:args.bytes])
    print(f"level {report['level']}: {report['wall_s']:.1f} s, {report['compiled']} "
          f"compilations, {report['compile_s']:.1f} s compiling")
    print(f"{'self s':>8} {'total s':>8} {'times':>5}  kernel")
    for r in report["kernels"][:args.top]:
        print(f"{r['self_s']:8.2f} {r['total_s']:8.2f} {r['compilations']:5d}  {r['kernel']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
