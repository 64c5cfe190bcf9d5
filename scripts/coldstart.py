"""Measure start-up per level: the first run on a machine (an empty kernel cache: every kernel
the level calls is compiled) and the next ones (kernels loaded from the cache).

    python scripts/coldstart.py [FILE] [--levels 1,4,7] [--out DIR]

For each level, in a fresh NUMBA_CACHE_DIR: `rwkvzip -N -v -c FILE` twice (cold, then warm)
and `rwkvzip -d -v` once (warm), as a user runs them; the wall time of each process and the
start-up and coding times its -v line reports. FILE defaults to the first 20 KB of
alice29.txt. Writes OUT/coldstart.json and .md (OUT: docs/bench).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import CORPUS, ROOT

DEFAULT_FILE = CORPUS / "canterbury" / "alice29.txt"
DEFAULT_HEAD = 20_000
SUMMARY = re.compile(r"in ([0-9.]+) s(?: \(\+ ([0-9.]+) s start-up\))?")


def run(args: list[str], cache: Path, stdin: bytes) -> dict:
    """One command line run: its wall time and what its -v line says."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rwkvzip", *args], input=stdin,
                          capture_output=True, env=env)
    wall = time.perf_counter() - start
    err = proc.stderr.decode()
    if proc.returncode:
        raise SystemExit(f"rwkvzip {' '.join(args)} failed: {err.strip()}")
    match = SUMMARY.search(err)
    return {"wall_s": wall, "coding_s": float(match.group(1)),
            "start_up_s": float(match.group(2) or 0.0), "out": proc.stdout}


def measure(data: bytes, levels: list[int]) -> list[dict]:
    rows = []
    for level in levels:
        with tempfile.TemporaryDirectory() as cache:
            cold = run([f"-{level}", "-v", "-c"], Path(cache), data)
            warm = run([f"-{level}", "-v", "-c"], Path(cache), data)
            back = run(["-d", "-v", "-c"], Path(cache), warm["out"])
        if back["out"] != data:
            raise SystemExit(f"level {level}: the roundtrip failed")
        row = {"level": level}
        for name, r in (("cold", cold), ("warm", warm), ("decompress_warm", back)):
            row.update({f"{name}_{k}": v for k, v in r.items() if k != "out"})
        rows.append(row)
        print(f"-{level}: cold {cold['wall_s']:.1f} s (start-up {cold['start_up_s']:.1f}), "
              f"warm {warm['wall_s']:.2f} s (start-up {warm['start_up_s']:.2f}), "
              f"decompress warm {back['wall_s']:.2f} s", flush=True)
    return rows


def render(rows: list[dict], name: str, size: int) -> str:
    out = [f"# Start-up per level ({name}, {size:,} bytes)", "",
           "| level | cold: wall s | of which start-up | warm: wall s | of which start-up "
           "| coding s | decompress, warm: wall s | of which start-up |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| -{r['level']} | {r['cold_wall_s']:.1f} | {r['cold_start_up_s']:.1f} | "
                   f"{r['warm_wall_s']:.2f} | {r['warm_start_up_s']:.2f} | "
                   f"{r['warm_coding_s']:.2f} | {r['decompress_warm_wall_s']:.2f} | "
                   f"{r['decompress_warm_start_up_s']:.2f} |")
    out += ["", "wall: the whole process (Python and imports included); start-up: readying "
            "the kernels (compiling them when cold); coding: what -v times."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, nargs="?")
    ap.add_argument("--levels", default="1,4,7")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    args = ap.parse_args(argv)
    path = args.file or DEFAULT_FILE
    data = path.read_bytes() if args.file else path.read_bytes()[:DEFAULT_HEAD]
    rows = measure(data, [int(x) for x in args.levels.split(",")])
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"file": path.name, "bytes": len(data), "rows": rows}
    (args.out / "coldstart.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "coldstart.md").write_text(render(rows, path.name, len(data)))
    print(render(rows, path.name, len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
