"""Try candidate recipes on many files at once; the numbers behind the preset cards.

    python scripts/tune.py [--base CARD] [--set text|binary|all] [--head BYTES]
        [--json OUT] --try SPEC [--try SPEC ...] [FILE ...]

A SPEC is the base card with some settings changed, comma-separated `name=value`:
recipe and model fields (`hidden=128,layers=2,bptt=8,arch=gdn`), context-mixing fields as
`mix.NAME` (`mix.orders=order1-order2-word-rec_two,mix.table_bits=20`), count-model fields as
`counts.NAME` (`counts.table_bits=16`), `net=0` for the context models without the
network, `mix=0` for the network without mixing, `prior=FILE` to start the network from a
prior file (it takes the prior's architecture and size; `lr=0` keeps it frozen). `-` is
the base card itself.

Every candidate compresses every file (the first BYTES of it with --head) through the
real codec; bits per byte are charged a one-byte card header, as a shipped card would be
(a spelled-out recipe's JSON header says nothing about how well it models). Speed is
compress KB per second of process CPU time, which other jobs on the machine do not
inflate (wall-clock KB/s is recorded in the JSON too). The summary gives, per candidate,
the total (all bits over all bytes) and the mean of the files' bpb, so a change that helps
one file and hurts the rest shows. With --decompress every file is also decompressed,
checked and timed (decompression is the same computation, so tuning can usually skip it).
"""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import replace
from pathlib import Path

from harness import CORPUS, input_path, roundtrip

from rwkvzip.api import compress_stream
from rwkvzip.cm.fastcm import CountsConfig
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.priors import Prior, load_prior, with_prior
from rwkvzip.recipe import (
    DEFAULT_PRESET,
    Recipe,
    kind_codes,
    parse_settings,
    preset_by_name,
    with_overrides,
)

TEXT = ["canterbury/alice29.txt", "canterbury/asyoulik.txt", "canterbury/cp.html",
        "canterbury/fields.c", "canterbury/grammar.lsp", "canterbury/lcet10.txt",
        "canterbury/plrabn12.txt", "canterbury/xargs.1", "large/bible.txt",
        "large/world192.txt"]
BINARY = ["canterbury/kennedy.xls", "canterbury/ptt5", "canterbury/sum"]
SETS = {"text": TEXT, "binary": BINARY, "all": TEXT + BINARY}


def candidate(base: Recipe, spec: str) -> tuple[Recipe, Prior | None]:
    """The base recipe with the SPEC's settings applied (see the module docstring), and the
    prior file it names (None: the base's own start)."""
    if spec == "-":
        return base, None
    settings = parse_settings(spec)
    prior = settings.pop("prior", None)
    prior = None if prior is None else load_prior(str(prior))
    if prior is not None:
        base = with_prior(base, prior)
    groups = {group: _fields(settings, group) for group in ("mix", "counts")}
    net = settings.pop("net", None)
    mixing = settings.pop("mix", None)
    rest = {k: v for k, v in settings.items() if "." not in k}
    recipe = with_overrides(base, **rest)
    if mixing == 0:
        return replace(recipe, mix=None), prior
    if groups["counts"]:
        recipe = replace(recipe, counts=replace(recipe.counts, **groups["counts"]))
    if groups["mix"] or net is not None:
        mix = replace(recipe.mix or MixConfig(), **groups["mix"])
        if net is not None:
            mix = replace(mix, network=bool(net))
        recipe = replace(recipe, mix=mix)
    recipe.validate()
    return recipe, prior


def _fields(settings: dict, group: str) -> dict:
    """The `group.NAME=value` settings, typed as the config's fields (orders: mix kinds
    by name, order1-word; count orders as numbers, 1-2-3)."""
    config = MixConfig if group == "mix" else CountsConfig
    out = {}
    for key, value in settings.items():
        if key.startswith(group + "."):
            name = key[len(group) + 1:]
            want = type(getattr(config, name))
            if name == "orders" and group == "mix":  # context kinds by name
                value = tuple(kind_codes(str(value).split("-")))
            elif name == "orders":
                value = tuple(int(k) for k in str(value).split("-"))
            elif want is bool:
                value = _boolean(key, value)
            elif want is float:
                value = float(value)
            out[name] = value
    return out


def _boolean(key: str, value) -> bool:
    """true/false, 1/0 (bool("false") would be True)."""
    text = str(value).lower()
    if text in ("1", "true"):
        return True
    if text in ("0", "false"):
        return False
    raise SystemExit(f"tune.py: {key}={value} is not a boolean (true, false, 1 or 0)")


def measure(recipe: Recipe, data: bytes, decompress: bool, prior: Prior | None = None) -> dict:
    """Compressed size with a one-byte card header; CPU and wall seconds of each direction."""
    r = roundtrip(data, recipe, prior, decompress)
    if not r.ok:
        raise SystemExit(f"roundtrip failed: {recipe.to_json().decode()}")
    row = {"compressed": r.compressed - r.header + 1, "cpu_s": r.compress_cpu_s,
           "wall_s": r.compress_wall_s}
    if decompress:
        row.update(decompress_cpu_s=r.decompress_cpu_s, decompress_wall_s=r.decompress_wall_s)
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", type=Path,
                    help="paths, or names under --corpus (canterbury/alice29.txt)")
    ap.add_argument("--base", default=DEFAULT_PRESET,
                    help="preset card the specs start from (the default level's)")
    ap.add_argument("--set", default="text", choices=sorted(SETS),
                    help="corpus files to use when no FILE is given")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--head", type=int, default=0, help="use only the first BYTES of a file")
    ap.add_argument("--try", dest="specs", action="append", required=True)
    ap.add_argument("--decompress", action="store_true",
                    help="also decompress, check and time every file")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    files = [input_path(f, args.corpus) for f in args.files]
    files = files or [args.corpus / name for name in SETS[args.set]]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        ap.error(f"no such file: {', '.join(missing)} (a FILE is a path or a name under "
                 f"{args.corpus})")
    inputs = {f.name: f.read_bytes()[:args.head or None] for f in files}
    base = preset_by_name(args.base).recipe
    results = []
    for spec in args.specs:
        recipe, prior = candidate(base, spec)
        compress_stream(io.BytesIO(b"warm-up " * 256), io.BytesIO(), recipe=recipe, prior=prior)
        rows = []
        for name, data in inputs.items():
            row = {"file": name, "bytes": len(data),
                   **measure(recipe, data, args.decompress, prior)}
            row["bpb"] = 8 * row["compressed"] / max(len(data), 1)
            rows.append(row)
            speeds = [f"{len(data) / 1e3 / max(row[k], 1e-9):.1f}" for k in
                      ("cpu_s", "decompress_cpu_s") if k in row]
            print(f"{spec} {name}: {row['bpb']:.4f} bpb, {' / '.join(speeds)} KB/s (CPU)",
                  flush=True)
        total_bytes = sum(r["bytes"] for r in rows)
        results.append({
            "spec": spec, "recipe": json.loads(recipe.to_json()), "rows": rows,
            "total_bpb": 8 * sum(r["compressed"] for r in rows) / total_bytes,
            "mean_bpb": sum(r["bpb"] for r in rows) / len(rows),
            "kBps": total_bytes / 1e3 / sum(r["cpu_s"] for r in rows)})
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps({"base": args.base, "head": args.head,
                                         "results": results}, indent=1))


def print_table(results: list[dict]) -> None:
    names = [r["file"] for r in results[0]["rows"]]
    print("\n| candidate | " + " | ".join(names) + " | total | mean | KB/s (CPU) |")
    print("|---|" + "---:|" * (len(names) + 3))
    for res in results:
        cells = [f"{r['bpb']:.3f}" for r in res["rows"]]
        print(f"| `{res['spec']}` | " + " | ".join(cells) +
              f" | {res['total_bpb']:.4f} | {res['mean_bpb']:.4f} | {res['kBps']:.1f} |")


if __name__ == "__main__":
    main()
