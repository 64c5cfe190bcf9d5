"""Measure what the numcodecs codec costs per chunk: start-up against coding, by chunk size.

    python scripts/codec_chunks.py [FILE] [--levels 1,6] [--sizes 1,4K,64K,1M] [--repeat 3]
        [--out DIR]

Each chunk is a whole rwkvzip stream (rwkvzip.numcodecs.Rwkvzip), so every chunk pays the
model's start-up: building its tables and loading the prior. For each level and chunk size,
a chunk cut from FILE (default: a random walk of int16, like a sensor's readings) is encoded
and decoded `--repeat` times in this process with warm kernels; the median milliseconds a
chunk and the coding speed. The start-up is the time of a one-byte chunk; the first chunk
of a new process (kernels loaded from numba's cache, the prior read) is timed in a
subprocess. Writes OUT/codec-chunks.json and .md (OUT: docs/bench).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from harness import ROOT, cpu_name

sys.path.insert(0, str(ROOT))

from rwkvzip.coding import blocks  # noqa: E402
from rwkvzip.numcodecs import Rwkvzip  # noqa: E402
from rwkvzip.recipe import DEFAULT_LEVEL, LEVELS  # noqa: E402

FIRST_CHUNK = """
import sys, time
start = time.perf_counter()
import numcodecs
codec = numcodecs.get_codec({"id": "rwkvzip", "level": int(sys.argv[1])})
codec.decode(codec.encode(b"x" * 4096))
print(time.perf_counter() - start)
"""


def sample(path: Path | None, size: int) -> bytes:
    """`size` bytes of FILE (repeated as needed), or of a sensor-like array: a random walk
    of little-endian int16 (seeded)."""
    if path is not None:
        data = path.read_bytes()
        return (data * (size // len(data) + 1))[:size]
    steps = np.random.default_rng(1).integers(-3, 4, size // 2 + 1)
    return np.cumsum(steps).astype("<i2").tobytes()[:size]


def time_chunk(codec: Rwkvzip, chunk: bytes, repeat: int) -> dict:
    codec.decode(codec.encode(chunk))  # warm: kernels and tables of this level
    enc, dec = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        blob = codec.encode(chunk)
        enc.append(time.perf_counter() - start)
        start = time.perf_counter()
        back = codec.decode(blob)
        dec.append(time.perf_counter() - start)
        if bytes(back) != chunk:
            raise SystemExit(f"chunk of {len(chunk)} bytes: roundtrip failed")
    return {"bytes": len(chunk), "compressed": len(blob), "encode_ms": 1e3 * statistics.median(enc),
            "decode_ms": 1e3 * statistics.median(dec)}


def first_chunk_seconds(level: int) -> float:
    """A new process: import, kernels from the cache, the prior, one 4 KiB chunk each way."""
    out = subprocess.run([sys.executable, "-c", FIRST_CHUNK, str(level)], capture_output=True,
                         text=True, timeout=1800, check=True)
    return float(out.stdout.split()[-1])


def measure(path: Path | None, levels: list[int], sizes: list[int], repeat: int) -> dict:
    result = {"file": path.name if path else "int16 random walk", "cpu": cpu_name(),
              "levels": []}
    for level in levels:
        codec = Rwkvzip(level)
        rows = [time_chunk(codec, sample(path, size), repeat) for size in sizes]
        start_up = next((r for r in rows if r["bytes"] == 1), rows[0])
        for row in rows:
            row["start_up_share"] = start_up["encode_ms"] / row["encode_ms"]
            row["encode_kb_s"] = row["bytes"] / 1e3 / (row["encode_ms"] / 1e3)
            row["decode_kb_s"] = row["bytes"] / 1e3 / (row["decode_ms"] / 1e3)
        result["levels"].append({"level": level, "card": LEVELS[level],
                                 "first_chunk_s": first_chunk_seconds(level), "rows": rows})
        print(markdown_level(result["levels"][-1]), flush=True)
    return result


def markdown_level(entry: dict) -> str:
    lines = [f"Level {entry['level']} ({entry['card']}); first chunk of a new process: "
             f"{entry['first_chunk_s']:.2f} s", "",
             "| chunk | compressed | encode ms | decode ms | encode KB/s | decode KB/s "
             "| start-up share |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in entry["rows"]:
        lines.append(f"| {r['bytes']:,} | {r['compressed']:,} | {r['encode_ms']:.1f} | "
                     f"{r['decode_ms']:.1f} | {r['encode_kb_s']:.1f} | {r['decode_kb_s']:.1f} | "
                     f"{100 * r['start_up_share']:.0f} % |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, nargs="?")
    ap.add_argument("--levels", default=f"1,{DEFAULT_LEVEL}")
    ap.add_argument("--sizes", default="1,4K,64K,1M")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    args = ap.parse_args(argv)
    result = measure(args.file, [int(x) for x in args.levels.split(",")],
                     [blocks.parse_size(s) for s in args.sizes.split(",")], args.repeat)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "codec-chunks.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "codec-chunks.md").write_text(
        f"# The numcodecs codec per chunk ({result['file']}, {result['cpu']})\n\n"
        + "\n".join(markdown_level(e) for e in result["levels"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
