"""Pure network vs context models alone vs both mixed, on the same files.

    python scripts/compare_mixing.py --part neural|cm|mixed [--preset CARD] --json OUT FILE...
        [--orders order1,order2,word,rec_two] [--mix lr=0.02 --mix count_limit=15]
    python scripts/compare_mixing.py --table A.json B.json C.json

Each part runs in its own process so its peak RSS is its own. Speeds are KB per second of
this process's CPU time (so other jobs on the machine do not distort them); every
roundtrip is verified. The table charges every part the header of a preset card (a recipe
that is not a card spells itself out in JSON, a few hundred bytes that say nothing about
how well it models). Peak RSS includes numba's compiler when the kernel cache was cold.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
from dataclasses import replace
from pathlib import Path

from harness import roundtrip

from rwkvzip.api import compress_stream
from rwkvzip.coding import container
from rwkvzip.recipe import DEFAULT_PRESET, kind_codes, preset_by_name


def part_recipe(preset: str, part: str, orders: str | None = None, mix: tuple = ()):
    recipe = preset_by_name(preset).recipe
    changes = {} if orders is None else {"orders": tuple(kind_codes(orders.split(",")))}
    for item in mix:
        key, _, value = item.partition("=")
        kind = type(getattr(recipe.mix, key))
        changes[key] = value.lower() in ("1", "true") if kind is bool else kind(value)
    if changes:
        recipe = replace(recipe, mix=replace(recipe.mix, **changes))
        recipe.validate()
    if part == "neural":
        return replace(recipe, mix=None)
    if part == "cm":
        return replace(recipe, mix=replace(recipe.mix, network=False), prior="")
    return recipe


def measure(path: Path, recipe) -> dict:
    """One verified roundtrip; speeds in KB per second of this process's CPU time."""
    r = roundtrip(path.read_bytes(), recipe)
    if not r.ok:
        raise SystemExit(f"roundtrip failed for {path}")
    return {"file": path.name, "bytes": r.bytes, "compressed": r.compressed,
            "header": r.header, "bpb": r.bpb,
            "compress_kBps": r.bytes / 1e3 / r.compress_cpu_s,
            "decompress_kBps": r.bytes / 1e3 / r.decompress_cpu_s}


def table(paths: list[Path]) -> None:
    parts = {}
    for p in paths:
        d = json.loads(p.read_text())
        parts[d["part"]] = d
    names = [r["file"] for r in next(iter(parts.values()))["rows"]]
    card_header = len(container.encode_header(preset_by_name(DEFAULT_PRESET).recipe))
    order = [p for p in ("neural", "cm", "mixed") if p in parts]
    print("| file | " + " | ".join(f"{p} bpb | {p} KB/s (c/d)" for p in order) + " |")
    print("|---|" + "---:|---:|" * len(order))
    for i, name in enumerate(names):
        cells = []
        for p in order:
            r = parts[p]["rows"][i]
            bpb = 8 * (r["compressed"] - r["header"] + card_header) / r["bytes"]
            cells.append(f"{bpb:.3f} | {r['compress_kBps']:.1f} / {r['decompress_kBps']:.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\npeak RSS (MiB): " + ", ".join(f"{p} {parts[p]['max_rss_mib']:.0f}" for p in order))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--part", choices=["neural", "cm", "mixed"])
    ap.add_argument("--preset", default=DEFAULT_PRESET, help="the base card (the default's)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--orders", help="the preset's context kinds replaced, e.g. "
                    "order1,order2,word,rec_two")
    ap.add_argument("--mix", action="append", default=[], metavar="FIELD=VALUE",
                    help="another MixConfig field of the preset changed (repeatable)")
    ap.add_argument("--table", action="store_true", help="print the table of JSON files")
    args = ap.parse_args(argv)
    if args.table:
        table(args.files)
        return
    recipe = part_recipe(args.preset, args.part, args.orders, args.mix)
    compress_stream(io.BytesIO(b"warm-up: load or compile the kernels " * 50), io.BytesIO(),
                    recipe=recipe)
    rows = []
    for path in args.files:
        r = measure(path, recipe)
        rows.append(r)
        print(f"{args.part} {r['file']}: {r['bpb']:.3f} bpb, {r['compress_kBps']:.1f} / "
              f"{r['decompress_kBps']:.1f} KB/s", flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        args.json.write_text(json.dumps({"part": args.part, "preset": args.preset,
                                         "max_rss_mib": rss, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
