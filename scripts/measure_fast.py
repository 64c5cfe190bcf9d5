"""Bits per byte and speed of one recipe (a preset card, optionally with count-model
settings changed) on files, beside gzip -9.

    python scripts/measure_fast.py [--card fast-v1] [--counts table_bits=16,lr=0.03] FILE...

Sizes are whole compressed files (`rwkvzip.api.compress`: header, frames, trailer); a recipe
that is not a card is charged a one-byte preset header like a card, not its spelled-out
JSON. Speeds are KB/s (1000 bytes) of this process's CPU time and of wall-clock time, on
warm kernels (a small file is compressed and decompressed first). Every roundtrip is checked.
"""

from __future__ import annotations

import argparse
import gzip
import time
from dataclasses import replace
from pathlib import Path

from rwkvzip import api, container
from rwkvzip.recipe import parse_settings, preset_by_name, preset_id_of


def timed(fn, *args):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", default="fast-v1")
    parser.add_argument("--counts", default="", help="count-model settings to change")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    recipe = preset_by_name(args.card).recipe
    if args.counts:
        settings = parse_settings(args.counts)
        if "orders" in settings:
            settings["orders"] = tuple(int(k) for k in str(settings["orders"]).split("/"))
        recipe = replace(recipe, counts=replace(recipe.counts, **settings))
        recipe.validate()
    extra = 0 if preset_id_of(recipe) is not None else (
        len(container.encode_header(recipe)) - len(container.encode_header(
            preset_by_name(args.card).recipe)))
    warm = b"warm the kernels up " * 50
    assert api.decompress(api.compress(warm, recipe)) == warm
    print(f"{'file':<16}{'bytes':>10}{'bpb':>8}{'gzip-9':>8}{'comp cpu':>10}{'wall':>7}"
          f"{'dec cpu':>9}{'wall':>7}   (KB/s)")
    for path in args.files:
        data = path.read_bytes()
        blob, cc, cw = timed(api.compress, data, recipe)
        out, dc, dw = timed(api.decompress, blob)
        assert out == data, f"{path}: roundtrip failed"
        n = max(len(data), 1)
        bpb = 8 * (len(blob) - extra) / n
        gz = 8 * len(gzip.compress(data, 9, mtime=0)) / n
        kb = len(data) / 1000
        print(f"{path.name:<16}{len(data):>10}{bpb:>8.3f}{gz:>8.3f}{kb / cc:>10.0f}{kb / cw:>7.0f}"
              f"{kb / dc:>9.0f}{kb / dw:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
