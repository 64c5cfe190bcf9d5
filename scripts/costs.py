"""Where a recipe's bits go in a file: every byte's ideal code length (-log2 of the
probability the coder gave it), summed over regions of the file and, for record-structured
data, over the phases of a record. The study a new context model starts from: which bytes
cost, before guessing which context would predict them (models/README.md).

    python scripts/costs.py [--base CARD] [--try SPEC] [--chunk BYTES] [--period R]
        [--save COSTS.npy] FILE

SPEC is tune.py's (the base card with settings changed; `-` is the card itself). The costs
come from the codec's own block kernel over the whole file, so their sum is the payload's
size to within the range coder's few bytes (frames and header aside). --period R adds a
table by position mod R (a record's fields when records of R bytes start at a multiple of
R); --save writes the per-byte costs (float32, bits) for studies of your own.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from harness import input_path
from tune import candidate


def byte_costs(data: bytes, recipe, prior=None) -> np.ndarray:
    """Bits each byte of `data` costs under the recipe, from a fresh predictor, frame by
    frame as the compressor cuts them (a CR that a frame of CRLF text drops costs 0; a frame
    that bypasses the models, with the recipe field bypass, 8 bits a byte)."""
    from rwkvzip.api import frames_of, new_predictor
    from rwkvzip.coding import bypass, eol
    from rwkvzip.coding.codec import frame_blocks

    predictor = new_predictor(recipe, prior)
    skip = bypass.Bypass(bypass.history_bytes(recipe)) if recipe.bypass else None
    costs = []
    for raw in frames_of(data, recipe):
        if skip is not None and skip.decide(raw):
            costs.append(np.full(len(raw), 8.0))
            continue
        coded, crlf = eol.coded_view(raw, recipe.eol)
        buf = np.frombuffer(coded, dtype=np.uint8).copy()
        bits = -np.log2(np.concatenate([predictor.byte_shares(block)
                                        for block in frame_blocks(buf)]))
        if crlf:
            spread = np.zeros(len(raw))
            spread[np.frombuffer(raw, dtype=np.uint8) != eol.CR] = bits
            bits = spread
        costs.append(bits)
    return np.concatenate(costs).astype(np.float32) if costs else np.empty(0, np.float32)


def table(costs: np.ndarray, groups: np.ndarray, n: int, label: str) -> list[str]:
    """Markdown rows: for each group 0..n-1, its bytes, bits as bytes, bpb and share."""
    bits = np.bincount(groups, weights=costs.astype(np.float64), minlength=n)
    count = np.bincount(groups, minlength=n)
    total = max(bits.sum(), 1e-9)
    lines = [f"| {label} | bytes | costs (bytes) | bpb | share |", "|---|---:|---:|---:|---:|"]
    for g in range(n):
        if count[g]:
            lines.append(f"| {g} | {count[g]} | {bits[g] / 8:,.0f} | {bits[g] / count[g]:.3f} "
                         f"| {100 * bits[g] / total:.1f} % |")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", type=Path,
                    help="a path, or a name under the corpus (canterbury/sum)")
    ap.add_argument("--base", help="preset card the spec starts from (default: the default "
                    "level's)")
    ap.add_argument("--try", dest="spec", default="-", help="tune.py's SPEC (default: the card)")
    ap.add_argument("--chunk", type=int, default=0,
                    help="region size in bytes (default: the file in 16 regions)")
    ap.add_argument("--period", type=int, default=0, help="also sum by position mod R")
    ap.add_argument("--save", type=Path, help="write the per-byte costs here (.npy)")
    args = ap.parse_args(argv)
    from rwkvzip.recipe import DEFAULT_PRESET, RecipeError, preset_by_name

    args.base = args.base or DEFAULT_PRESET

    if args.chunk < 0 or args.period < 0:
        raise SystemExit("--chunk and --period must be positive")
    args.file = input_path(args.file)
    try:
        data = args.file.read_bytes()
        recipe, prior = candidate(preset_by_name(args.base).recipe, args.spec)
    except (OSError, RecipeError, ValueError) as exc:
        raise SystemExit(f"costs.py: {exc}") from None
    if not data:
        raise SystemExit(f"{args.file}: empty file")
    costs = byte_costs(data, recipe, prior)
    if args.save:
        np.save(args.save, costs)
    total = float(costs.sum(dtype=np.float64))
    print(f"{args.file.name}: {len(data):,} bytes, {total / 8:,.0f} bytes coded, "
          f"{total / len(data):.4f} bpb ({args.base} {args.spec})\n")
    chunk = args.chunk or max(1, -(-len(data) // 16))
    positions = np.arange(len(data))
    for line in table(costs, positions // chunk, -(-len(data) // chunk),
                      f"region (× {chunk:,} bytes)"):
        print(line)
    if args.period:
        print()
        for line in table(costs, positions % args.period, args.period,
                          f"position mod {args.period}"):
            print(line)


if __name__ == "__main__":
    main()
