"""`rwkvzip train` on data of one kind, measured on held-back files of the same kind.

    python scripts/train_check.py [--kinds jsonl,pypi] [--time 600] [--level N]
        [--sample-bytes 1048576] [--dict-size BYTES] [--fields] [--out DIR]

Two kinds are made here, neither seen by the shipped priors: JSON lines from a seeded
generator (service logs), and the Python source tree of a PyPI release that is not in the
pre-training corpus (networkx). Each kind is cut into samples (about --sample-bytes) and
held-back files; the prior is trained on the samples with training.train (what `rwkvzip
train` runs), then every held-back file is compressed at the level with its shipped start,
with the new prior, and with the new prior's weights alone (no dictionary: what the
dictionary is worth). For the JSON lines the generator's entropy (jsonl_entropy_bits) is the
floor beside them, and --fields splits a held-back file's cost by field against it. Prints
one table row per file and the totals; --json writes them.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
from costs import byte_costs

from rwkvzip import api, dictionary, priors, training
from rwkvzip.recipe import DEFAULT_LEVEL, level_recipe

PYPI_KIND = "networkx==3.3"


# The log generator's distributions: jsonl_lines draws from them, jsonl_entropy_bits
# measures them
PATHS = ("/api/v1/orders", "/api/v1/users", "/api/v2/search", "/health", "/login",
         "/api/v1/orders/{id}/items", "/static/app.js", "/api/v2/reports")
EVENTS = ("request", "request", "request", "cache_miss", "retry", "error")
MSGS = ("upstream timed out", "invalid token", "rate limited", "ok", "not found")
STATUSES = (200, 200, 200, 304, 404)  # of an event that is not an error (which is 500)
GAP_SCALE = 0.8  # seconds between records: 1 + the integer part of an exponential draw
USER_ZIPF, USERS = 1.6, 5000  # user ids: a Zipf draw modulo USERS
ID_LOW, ID_HIGH = 1, 99999  # a path's {id}: uniform in [ID_LOW, ID_HIGH)
LATENCY_MU, LATENCY_SIGMA = 3.0, 0.8  # ms, log-normal, rounded to 0.1
START_SPAN = 86400  # a file's first timestamp: a uniform second of the day


def jsonl_lines(seed: int, n: int) -> list[str]:
    """Service log records: timestamps, levels, users, paths, latencies, a few messages."""
    rng = np.random.default_rng(seed)
    t = 1_764_547_200 + int(rng.integers(0, START_SPAN))
    out = []
    for _ in range(n):
        t += int(rng.exponential(GAP_SCALE)) + 1
        ev = EVENTS[int(rng.integers(len(EVENTS)))]
        rec = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)),
               "level": "ERROR" if ev == "error" else "INFO",
               "event": ev, "user": f"u{int(rng.zipf(USER_ZIPF)) % USERS:04d}",
               "path": PATHS[int(rng.integers(len(PATHS)))].replace(
                   "{id}", str(int(rng.integers(ID_LOW, ID_HIGH)))),
               "status": 500 if ev == "error" else int(rng.choice(STATUSES)),
               "latency_ms": round(float(rng.lognormal(LATENCY_MU, LATENCY_SIGMA)), 1)}
        if ev in ("error", "retry"):
            rec["msg"] = MSGS[int(rng.integers(len(MSGS)))]
        out.append(json.dumps(rec, separators=(",", ":")))
    return out


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0] / p.sum()
    return float(-(p * np.log2(p)).sum())


def _choice_entropy(items: tuple) -> float:
    """Bits of a uniform draw from items, equal items being one outcome."""
    return _entropy(np.array([items.count(v) for v in dict.fromkeys(items)], dtype=float))


@functools.cache
def jsonl_field_bits() -> dict[str, float]:
    """Each field's entropy in bits a record, given the fields before it (level follows from
    the event, the status from it when it is an error, the timestamp from the gap; a field
    only some events carry is weighted by how often they occur)."""
    gap_q = math.exp(-1.0 / GAP_SCALE)  # P(integer part = k) = (1 - q) q^k
    k = np.arange(1, 2_000_001)
    zipf = k ** -USER_ZIPF
    zipf_tail = 2_000_000 ** (1 - USER_ZIPF) / (USER_ZIPF - 1)  # mass past k, spread evenly
    with_id = sum("{id}" in p for p in PATHS) / len(PATHS)
    tenths = np.arange(0.5, 100_000.5) / 10.0  # edges between the rounded values
    cdf = 0.5 * (1 + np.array([math.erf((math.log(x) - LATENCY_MU) / (LATENCY_SIGMA
                                                                     * math.sqrt(2)))
                               for x in tenths]))
    p_error = EVENTS.count("error") / len(EVENTS)
    p_msg = sum(EVENTS.count(e) for e in ("error", "retry")) / len(EVENTS)
    return {
        "ts": _entropy((1 - gap_q) * gap_q ** np.arange(400.0)),
        "event": _choice_entropy(EVENTS),
        "user": _entropy(np.bincount(k % USERS, weights=zipf, minlength=USERS)
                         + zipf_tail / USERS),
        "path": _choice_entropy(PATHS) + with_id * math.log2(ID_HIGH - ID_LOW),
        "status": (1 - p_error) * _choice_entropy(STATUSES),
        "latency_ms": _entropy(np.diff(np.concatenate(([0.0], cdf, [1.0])))),
        "msg": p_msg * _choice_entropy(MSGS),
    }


def jsonl_entropy_bits(lines: int) -> float:
    """The generator's entropy for a file of `lines` records, in bits: the expected code
    length of a coder that knew its distributions exactly (every field's text follows from
    its draw, and distinct draws print differently), so no compressor can expect to beat it
    on these files. Fields are drawn independently, so their entropies add."""
    return lines * sum(jsonl_field_bits().values()) + math.log2(START_SPAN)


def jsonl_field_costs(data: bytes, level: int) -> dict[str, float]:
    """Bits a record each field's value bytes cost at the level with its shipped start (keys
    and punctuation as "syntax"): where the coder pays over jsonl_field_bits."""
    bits = byte_costs(data, level_recipe(level)).astype(np.float64)
    field = np.full(len(data), "syntax", dtype=object)
    text = data.decode()
    for m in re.finditer(r'"(\w+)":("?)([^",}\n]*)\2', text):
        field[m.start(3):m.end(3)] = m.group(1)
    records = max(1, data.count(b"\n"))
    return {name: float(bits[field == name].sum()) / records for name in dict.fromkeys(field)}


HELD_LINES = (200, 1500, 6000)  # small, medium and large held-back files of JSON lines


def make_jsonl(root: Path, sample_bytes: int, scale: float = 1.0
               ) -> tuple[list[Path], list[Path]]:
    samples, held = root / "samples", root / "held"
    samples.mkdir(parents=True, exist_ok=True)
    held.mkdir(exist_ok=True)
    n, k = 0, 0
    while n < sample_bytes:
        data = "\n".join(jsonl_lines(100 + k, 800)) + "\n"
        (samples / f"log-{k:03d}.jsonl").write_text(data)
        n += len(data)
        k += 1
    files = []
    for i, lines in enumerate(HELD_LINES):
        f = held / f"held-{i}.jsonl"
        f.write_text("\n".join(jsonl_lines(9000 + i, max(1, int(lines * scale)))) + "\n")
        files.append(f)
    return [samples], files


def make_pypi(root: Path, sample_bytes: int, scale: float = 1.0
              ) -> tuple[list[Path], list[Path]]:
    dl = root / "download"
    dl.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary", ":all:", "-d", str(dl), PYPI_KIND], check=True)
    wheel = next(dl.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        sources = sorted((n, z.read(n)) for n in z.namelist()
                         if n.endswith(".py") and "/tests/" not in n)
    samples, held = root / "samples", root / "held"
    samples.mkdir(exist_ok=True)
    held.mkdir(exist_ok=True)
    # every 8th module (by name) is held back; the rest are samples up to sample_bytes
    files, n = [], 0
    for i, (name, data) in enumerate(sources):
        flat = name.replace("/", "__")
        if i % 8 == 0 and len(data) >= 2000 and len(files) < max(1, int(64 * scale)):
            (held / flat).write_bytes(data)
            files.append(held / flat)
        elif n < sample_bytes:
            (samples / flat).write_bytes(data)
            n += len(data)
    return [samples], files


KINDS = {"jsonl": make_jsonl, "pypi": make_pypi}
# what no compressor can expect to beat on a held-back file of the kind, in bytes, where it
# is known: the generator's entropy for its records (one a line)
FLOORS = {"jsonl": lambda data: jsonl_entropy_bits(data.count(b"\n")) / 8}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="jsonl,pypi")
    ap.add_argument("--time", type=float, default=600.0)
    ap.add_argument("--epochs", type=int, default=training.TRAIN_EPOCHS)
    ap.add_argument("--level", type=int, default=DEFAULT_LEVEL)
    ap.add_argument("--sample-bytes", type=int, default=1 << 20)
    ap.add_argument("--out", type=Path, default=Path("build/train_check"))
    ap.add_argument("--dict-size", type=int, default=dictionary.DEFAULT_SIZE,
                    help="bytes of the prior's dictionary (rwkvzip train --dict-size)")
    ap.add_argument("--held-scale", type=float, default=1.0,
                    help="scale the held-back files (a quick check: 0.05)")
    ap.add_argument("--fields", action="store_true",
                    help="JSON lines: each field's cost a record against its entropy")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    report = []
    for kind in a.kinds.split(","):
        root = a.out / kind
        samples, held = KINDS[kind](root, a.sample_bytes, a.held_scale)
        t0 = time.monotonic()
        r = training.train(samples, root / f"{kind}.prior", level=a.level, seconds=a.time,
                           epochs=a.epochs, dictionary_size=a.dict_size)
        took = time.monotonic() - t0
        print(f"{kind}: trained on {r.train_bytes:,} bytes in {took:.0f} s "
              f"({r.epochs:g} epochs, best {r.best_epoch}); validation {r.val_before:.4f} "
              f"-> {r.val_after:.4f} bpb", flush=True)
        p = priors.load_prior(r.prior)
        weights_only = priors.prior_bytes(p.model, p.W, p.metadata[priors.KEY_MANIFEST],
                                          p.training)
        rows = []
        for f in held:
            data = f.read_bytes()
            base = len(api.compress(data, level=a.level))
            mine = len(api.compress(data, level=a.level, prior=r.prior))
            plain = len(api.compress(data, level=a.level, prior=weights_only))
            row = {"file": f.name, "bytes": len(data), "shipped": base, "trained": mine,
                   "weights_only": plain}
            floor = ""
            if kind in FLOORS:
                row["entropy"] = round(FLOORS[kind](data))
                floor = f"; the generator's entropy {row['entropy']:,}"
            rows.append(row)
            print(f"  {f.name}: {len(data):,} bytes -> {base:,} (shipped start) / {mine:,} "
                  f"(trained prior), {mine / base:.3f}x; {plain:,} without its dictionary"
                  f"{floor}", flush=True)
        tb, tm = sum(x["shipped"] for x in rows), sum(x["trained"] for x in rows)
        tw = sum(x["weights_only"] for x in rows)
        print(f"  total: {tb:,} -> {tm:,} bytes, {tm / tb:.3f}x ({100 * (1 - tm / tb):.1f} % "
              f"smaller); without the dictionary {tw:,} bytes, {tw / tb:.3f}x", flush=True)
        if kind in FLOORS:
            te = sum(x["entropy"] for x in rows)
            print(f"  the generator's entropy: {te:,} bytes ({te / tb:.3f}x the shipped "
                  f"start's bytes, {te / tm:.3f}x the trained prior's)", flush=True)
        fields = {}
        if a.fields and kind == "jsonl":
            f = held[len(held) // 2]
            fields = {"file": f.name, "coded": jsonl_field_costs(f.read_bytes(), a.level),
                      "entropy": jsonl_field_bits()}
            print(f"  {f.name}, bits a record, the shipped start: field, coded, entropy")
            for name, cost in fields["coded"].items():
                print(f"    {name}: {cost:.2f}, {fields['entropy'].get(name, 0.0):.2f}")
        report.append({"kind": kind, "train_seconds": round(took, 1),
                       "val_before": r.val_before, "val_after": r.val_after,
                       "epochs": r.epochs, "dictionary_bytes": r.dictionary_bytes,
                       "rows": rows, "fields": fields})
    if a.json:
        a.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
