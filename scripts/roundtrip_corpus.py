"""Roundtrip every file of the corpus (or the given files) through rwkvzip; report bpb, KB/s.

    python scripts/roundtrip_corpus.py [--preset NAME] [--set k=v,...] [--corpus DIR]
        [--json OUT] [FILE ...]
Exit status 1 if any file does not come back bit-exactly.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

from rwkvzip.api import compress_stream, decompress_stream
from rwkvzip.recipe import Recipe, default_recipe, parse_settings, preset_by_name, with_overrides

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def roundtrip(path: Path, recipe: Recipe) -> dict:
    data = path.read_bytes()
    packed = io.BytesIO()
    t0 = time.perf_counter()
    compress_stream(io.BytesIO(data), packed, recipe)
    t1 = time.perf_counter()
    out = io.BytesIO()
    decompress_stream(io.BytesIO(packed.getvalue()), out)
    t2 = time.perf_counter()
    n = max(len(data), 1)
    return {"file": str(path), "bytes": len(data), "compressed": len(packed.getvalue()),
            "bpb": 8 * len(packed.getvalue()) / n, "ok": out.getvalue() == data,
            "compress_kBps": len(data) / 1e3 / (t1 - t0),
            "decompress_kBps": len(data) / 1e3 / (t2 - t1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--preset", help="preset card (default: the default recipe)")
    ap.add_argument("--set", default="", help="recipe settings on top, e.g. bptt=1,lr=0.001")
    args = ap.parse_args()
    base = preset_by_name(args.preset).recipe if args.preset else default_recipe()
    recipe = with_overrides(base, **parse_settings(args.set))
    print(f"recipe: {recipe.to_json().decode()}")
    files = args.files or sorted(p for p in args.corpus.rglob("*")
                                 if p.is_file() and p.parent != args.corpus)
    rows = []
    print(f"{'file':34} {'bytes':>9} {'bpb':>7} {'comp KB/s':>10} {'dec KB/s':>9} ok")
    for path in files:
        r = roundtrip(path, recipe)
        rows.append(r)
        name = str(path.relative_to(args.corpus)) if path.is_relative_to(args.corpus) else path
        print(f"{name!s:34} {r['bytes']:>9} {r['bpb']:>7.3f} {r['compress_kBps']:>10.1f} "
              f"{r['decompress_kBps']:>9.1f} {'yes' if r['ok'] else 'NO'}", flush=True)
    for data, label in ((b"", "(empty input)"), (b"x", "(1 byte)")):
        tmp = Path("/tmp") / f"rwkvzip-edge-{len(data)}"
        tmp.write_bytes(data)
        r = roundtrip(tmp, recipe)
        rows.append(r)
        print(f"{label:34} {r['bytes']:>9} {'-':>7} {'-':>10} {'-':>9} "
              f"{'yes' if r['ok'] else 'NO'} ({r['compressed']} bytes out)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
