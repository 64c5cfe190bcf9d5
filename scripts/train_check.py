"""`rwkvzip train` on data of one kind, measured on held-back files of the same kind.

    python scripts/train_check.py [--kinds jsonl,pypi] [--time 600] [--level N]
        [--sample-bytes 1048576] [--dict-size BYTES] [--out DIR]

Two kinds are made here, neither seen by the shipped priors: JSON lines from a seeded
generator (service logs), and the Python source tree of a PyPI release that is not in the
pre-training corpus (networkx). Each kind is cut into samples (about --sample-bytes) and
held-back files; the prior is trained on the samples with training.train (what `rwkvzip
train` runs), then every held-back file is compressed at the level with its shipped start,
with the new prior, and with the new prior's weights alone (no dictionary: what the
dictionary is worth). Prints one table row per file and the totals; --json writes them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from rwkvzip import api, dictionary, priors, training
from rwkvzip.recipe import DEFAULT_LEVEL

PYPI_KIND = "networkx==3.3"


def jsonl_lines(seed: int, n: int) -> list[str]:
    """Service log records: timestamps, levels, users, paths, latencies, a few messages."""
    rng = np.random.default_rng(seed)
    paths = ["/api/v1/orders", "/api/v1/users", "/api/v2/search", "/health", "/login",
             "/api/v1/orders/{id}/items", "/static/app.js", "/api/v2/reports"]
    events = ["request", "request", "request", "cache_miss", "retry", "error"]
    msgs = ["upstream timed out", "invalid token", "rate limited", "ok", "not found"]
    t = 1_764_547_200 + int(rng.integers(0, 86400))
    out = []
    for _ in range(n):
        t += int(rng.exponential(0.8)) + 1
        ev = events[int(rng.integers(len(events)))]
        rec = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)),
               "level": "ERROR" if ev == "error" else "INFO",
               "event": ev, "user": f"u{int(rng.zipf(1.6)) % 5000:04d}",
               "path": paths[int(rng.integers(len(paths)))].replace(
                   "{id}", str(int(rng.integers(1, 99999)))),
               "status": 500 if ev == "error" else int(rng.choice([200, 200, 200, 304, 404])),
               "latency_ms": round(float(rng.lognormal(3.0, 0.8)), 1)}
        if ev in ("error", "retry"):
            rec["msg"] = msgs[int(rng.integers(len(msgs)))]
        out.append(json.dumps(rec, separators=(",", ":")))
    return out


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
            rows.append({"file": f.name, "bytes": len(data), "shipped": base, "trained": mine,
                         "weights_only": plain})
            print(f"  {f.name}: {len(data):,} bytes -> {base:,} (shipped start) / {mine:,} "
                  f"(trained prior), {mine / base:.3f}x; {plain:,} without its dictionary",
                  flush=True)
        tb, tm = sum(x["shipped"] for x in rows), sum(x["trained"] for x in rows)
        tw = sum(x["weights_only"] for x in rows)
        print(f"  total: {tb:,} -> {tm:,} bytes, {tm / tb:.3f}x ({100 * (1 - tm / tb):.1f} % "
              f"smaller); without the dictionary {tw:,} bytes, {tw / tb:.3f}x", flush=True)
        report.append({"kind": kind, "train_seconds": round(took, 1),
                       "val_before": r.val_before, "val_after": r.val_after,
                       "epochs": r.epochs, "dictionary_bytes": r.dictionary_bytes,
                       "rows": rows})
    if a.json:
        a.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
