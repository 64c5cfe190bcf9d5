"""Roundtrip every file of the corpus (or the given files) through rwkvzip; report bpb, KB/s.

    python scripts/roundtrip_corpus.py [--preset NAME] [--set k=v,...] [--corpus DIR]
        [--json OUT] [FILE ...]
Exit status 1 if any file does not come back bit-exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness import CORPUS, corpus_files, roundtrip

from rwkvzip.recipe import Recipe, default_recipe, parse_settings, preset_by_name, with_overrides


def measure(path: Path, recipe: Recipe) -> dict:
    return roundtrip(path.read_bytes(), recipe).row(file=str(path))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--preset", help="preset card (default: the default recipe)")
    ap.add_argument("--set", default="", help="recipe settings on top, e.g. bptt=1,lr=0.001")
    args = ap.parse_args(argv)
    base = preset_by_name(args.preset).recipe if args.preset else default_recipe()
    recipe = with_overrides(base, **parse_settings(args.set))
    print(f"recipe: {recipe.to_json().decode()}")
    files = args.files or corpus_files(args.corpus)
    rows = []
    print(f"{'file':34} {'bytes':>9} {'bpb':>7} {'comp KB/s':>10} {'dec KB/s':>9} ok")
    for path in files:
        r = measure(path, recipe)
        rows.append(r)
        name = str(path.relative_to(args.corpus)) if path.is_relative_to(args.corpus) else path
        print(f"{name!s:34} {r['bytes']:>9} {r['bpb']:>7.3f} {r['compress_kBps']:>10.1f} "
              f"{r['decompress_kBps']:>9.1f} {'yes' if r['ok'] else 'NO'}", flush=True)
    for data, label in ((b"", "(empty input)"), (b"x", "(1 byte)")):
        r = roundtrip(data, recipe).row(file=label)
        rows.append(r)
        print(f"{label:34} {r['bytes']:>9} {'-':>7} {'-':>10} {'-':>9} "
              f"{'yes' if r['ok'] else 'NO'} ({r['compressed']} bytes out)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
