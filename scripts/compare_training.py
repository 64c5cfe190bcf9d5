"""Head-only vs bptt=1 vs TBPTT(T) at one model size: bpb and compress/decompress KB/s.

    python scripts/compare_training.py [--hidden 64 --layers 1] [--modes a,b]
        [--set arch=gdn,key_heads=2,value_heads=4,key_dim=16,value_dim=16,mlp=384] FILE ...
Every roundtrip is verified. Prints a markdown table; --json writes the rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness import roundtrip

from rwkvzip.recipe import default_recipe, parse_settings, with_overrides

MODES = {
    "head-only": dict(bptt=0, lr=0.0005, decay=0),
    "bptt=1": dict(bptt=1, lr=0.001, decay=16384),
    "tbptt(8)": dict(bptt=8, ckpt=8, lr=0.001, decay=16384),
    "tbptt(32)": dict(bptt=32, ckpt=16, lr=0.001, decay=16384),
}


def measure(path: Path, recipe) -> dict:
    r = roundtrip(path.read_bytes(), recipe)
    if not r.ok:
        raise SystemExit(f"roundtrip failed for {path}")
    return {"file": path.name, "bpb": r.bpb, "compress_kBps": r.compress_kbps,
            "decompress_kBps": r.decompress_kbps}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset")
    ap.add_argument("--set", default="", help="more recipe settings, e.g. arch=gdn,mlp=384")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    extra = parse_settings(args.set)
    rows = []
    print("| mode | file | bpb | compress KB/s | decompress KB/s |\n|---|---|---:|---:|---:|")
    for mode in args.modes.split(","):
        recipe = with_overrides(default_recipe(), hidden=args.hidden, layers=args.layers,
                                **{**MODES[mode], **extra})
        for path in args.files:
            r = measure(path, recipe) | {"mode": mode}
            rows.append(r)
            print(f"| {mode} | {r['file']} | {r['bpb']:.3f} | {r['compress_kBps']:.2f} | "
                  f"{r['decompress_kBps']:.2f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
