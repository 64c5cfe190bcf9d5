"""Benchmark rwkvzip against gzip, bzip2, xz, zstd, brotli, PPMd (and paq8px): bpb and KB/s.

    python scripts/bench.py [--levels 1,2] [--repeat 3] [--rwkvzip-repeat 1]
        [--classical gzip,bzip2,xz,zstd,brotli,ppmd] [--head BYTES] [--corpus DIR]
        [--out DIR] [--no-plot] [--readme README.md] [FILE ...]
    python scripts/bench.py --render REPORT.json [REPORT.json ...] [--out DIR]
        [--no-plot] [--readme README.md]

Every compressor runs in this process through its Python module, on one thread: rwkvzip
through `rwkvzip.api` at each chosen level, the others as listed in CLASSICAL below (needs
the `bench` extra: pip install -e ".[bench]"). Without FILE (or --files) it takes every file
of ../shared/corpus. Each file is compressed and decompressed `--repeat` times (rwkvzip:
`--rwkvzip-repeat` times, it is slow); speeds are the median wall time (time.perf_counter),
process CPU times are recorded too. Every decompressed output is compared with the input
byte for byte, and repeated compressions must give identical bytes.

Writes OUT/BENCHMARKS.md (tables; nothing else writes that file), OUT/benchmarks.json
(everything, raw timings included) and OUT/docs/bench/pareto.png (bits per byte against
compress speed, one panel per file); OUT is the repository root by default. With --readme
it also rewrites the results table between the `<!-- results -->` and `<!-- /results -->`
markers of that file: total bits per byte per group of files, one column per compressor,
beside the published figures of paq8px and cmix (PUBLISHED below). --render measures
nothing: it writes the same outputs from saved reports (benchmarks.json of earlier runs,
merged when there are several, e.g. one run per level). Exit status 1 if any roundtrip
failed or any compressor raised an error.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import importlib.util
import io
import json
import lzma
import math
import multiprocessing
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness import CORPUS, ROOT, cpu_name

try:
    import brotli
    import pyppmd
    import zstandard
except ImportError as exc:
    raise SystemExit(f'{exc}: the benchmark needs the bench extra, pip install -e ".[bench]"'
                     ) from None

DEFAULT_CORPUS = CORPUS
PAQ8PX = Path(os.environ.get("PAQ8PX", CORPUS.parent / "tools" / "paq8px"))
PLOT_PATH = Path("docs") / "bench" / "pareto.png"
ALL = "all files"
# Thread pools some libraries could start; rwkvzip uses none of them, this makes sure.
SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                     "NUMBA_NUM_THREADS")
# PPMd order 6 with 16 MiB (7-Zip's PPMd default level), variant I as pyppmd.compress makes
# it: the variant whose results the corpus README and the targets quote (alice29.txt
# 2.039 bpb; variant H gives 2.044).
PPMD_ORDER = 6
PPMD_MEM = 16 << 20
# Warm-up input: compiles (or loads from numba's cache) every kernel before timing starts.
WARMUP = b"The quick brown fox jumps over the lazy dog. " * 40 + bytes(range(256)) * 4
# The README's results table goes between these markers (--readme); its rows, the corpus's
# folders in this order (others after them)
RESULTS_BEGIN, RESULTS_END = "<!-- results -->", "<!-- /results -->"
GROUP_ORDER = ("canterbury", "large", "artificial")

# Published bits per byte of the strongest context-mixing compressors on the Canterbury
# files, copied from ../shared/corpus/README.md ("Published results of the strongest
# context-mixing compressors": paq8px v216's README, results verified May 2026; cmix v21
# without its English dictionary), with the speeds it gives (one core, compressing). They
# were not measured here: the tables mark them "published" and give no decompress speed.
PUBLISHED_BYTES = {
    "canterbury/alice29.txt": 152_089, "canterbury/asyoulik.txt": 125_179,
    "canterbury/cp.html": 24_603, "canterbury/fields.c": 11_150,
    "canterbury/grammar.lsp": 3_721, "canterbury/kennedy.xls": 1_029_744,
    "canterbury/lcet10.txt": 426_754, "canterbury/plrabn12.txt": 481_861,
    "canterbury/ptt5": 513_216, "canterbury/sum": 38_240, "canterbury/xargs.1": 4_227,
}
PUBLISHED = {  # label -> (compress KB/s, bpb per file in PUBLISHED_BYTES's order)
    "paq8px -8": (10.8, (1.740, 2.014, 1.758, 1.454, 1.851, 0.063, 1.483, 1.950, 0.306,
                         1.394, 2.451)),
    "paq8px -12L": (3.8, (1.729, 2.009, 1.754, 1.448, 1.853, 0.061, 1.477, 1.938, 0.306,
                          1.389, 2.447)),
    "cmix v21": (0.84, (1.755, 2.024, 1.781, 1.497, 1.879, 0.062, 1.491, 1.942, 0.335,
                        1.458, 2.510)),
}
# the corpus README's "all 11 (total bytes)" row, which the per-file figures reproduce
PUBLISHED_TOTALS = {"paq8px -8": 0.869, "paq8px -12L": 0.864, "cmix v21": 0.876}
PUBLISHED_SOURCE = ("paq8px v216 (its README, verified May 2026) and cmix v21 (without its "
                    "English dictionary), as ../shared/corpus/README.md quotes them")


@dataclass(frozen=True)
class Codec:
    """One compressor at one setting: how it is called and how to undo it."""

    key: str  # names it on the command line and in the JSON
    label: str  # names it in tables and plots
    call: str  # the exact call, for the report
    note: str  # what else a reader needs to know about the setting
    compress: Callable[[bytes], bytes]
    decompress: Callable[[bytes, int], bytes]  # (compressed, original length) -> bytes


def _zstd_compress(data: bytes) -> bytes:
    # As the zstd command line: content size and XXH64 checksum in the frame.
    comp = zstandard.ZstdCompressor(level=19, threads=0, write_checksum=True,
                                    write_content_size=True)
    return comp.compress(data)


def _paq8px(args: list[str], data: bytes) -> bytes:
    """Run the paq8px program (PAQ8PX, default ../shared/tools/paq8px) from file to file."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in", Path(tmp) / "out"
        src.write_bytes(data)
        proc = subprocess.run([str(PAQ8PX), *args, str(src), str(dst)], capture_output=True,
                              text=True)
        if proc.returncode or not dst.exists():
            raise RuntimeError(f"paq8px {' '.join(args)} failed: {proc.stdout[-300:]}")
        return dst.read_bytes()


def _ppmd_compress(data: bytes) -> bytes:
    return pyppmd.compress(data, max_order=PPMD_ORDER, mem_size=PPMD_MEM)


def _ppmd_decompress(blob: bytes, length: int) -> bytes:
    return pyppmd.decompress(blob, max_order=PPMD_ORDER, mem_size=PPMD_MEM)


CLASSICAL: dict[str, Codec] = {c.key: c for c in (
    Codec("gzip", "gzip -9", "gzip.compress(data, compresslevel=9, mtime=0)", "",
          lambda d: gzip.compress(d, compresslevel=9, mtime=0),
          lambda b, n: gzip.decompress(b)),
    Codec("bzip2", "bzip2 -9", "bz2.compress(data, 9)", "",
          lambda d: bz2.compress(d, 9), lambda b, n: bz2.decompress(b)),
    Codec("xz", "xz -9e",
          "lzma.compress(data, format=FORMAT_XZ, check=CHECK_CRC64, preset=9 | PRESET_EXTREME)",
          "as the xz command line: CRC-64 check",
          lambda d: lzma.compress(d, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                                  preset=9 | lzma.PRESET_EXTREME),
          lambda b, n: lzma.decompress(b, format=lzma.FORMAT_XZ)),
    Codec("zstd", "zstd -19",
          "zstandard.ZstdCompressor(level=19, threads=0, write_checksum=True, "
          "write_content_size=True).compress(data)",
          "as the zstd command line: content size and XXH64 checksum in the frame",
          _zstd_compress, lambda b, n: zstandard.ZstdDecompressor().decompress(b)),
    Codec("brotli", "brotli 11", "brotli.compress(data, quality=11)",
          "window 2^22 (the module's default), larger than every corpus file",
          lambda d: brotli.compress(d, quality=11), lambda b, n: brotli.decompress(b)),
    Codec("ppmd", "PPMd o6",
          f"pyppmd.compress(data, max_order={PPMD_ORDER}, mem_size={PPMD_MEM})",
          "PPMd variant I (pyppmd's default) with an end mark, order 6, 16 MiB as 7-Zip's "
          "default level; the variant of the corpus README's and the issue's PPMd figures",
          _ppmd_compress, _ppmd_decompress),
    Codec("paq8px", "paq8px v216 -8", "paq8px -8 IN OUT (the program, from file to file)",
          "paq8px v216 as ../shared/tools holds it (PAQ8PX names another); about 10 KB/s and "
          "2 GB of memory, so not among the defaults: --classical ...,paq8px",
          lambda d: _paq8px(["-8"], d), lambda b, n: _paq8px(["-d"], b)),
)}
# what --classical means without the option: every one but paq8px (slow, and a program)
DEFAULT_CLASSICAL = [key for key in CLASSICAL if key != "paq8px"]


def rwkvzip_codec(level: int) -> Codec:
    from rwkvzip.api import compress_stream, decompress_stream
    from rwkvzip.recipe import LEVELS

    def compress(data: bytes) -> bytes:
        out = io.BytesIO()
        compress_stream(io.BytesIO(data), out, level=level)
        return out.getvalue()

    def decompress(blob: bytes, length: int) -> bytes:
        out = io.BytesIO()
        decompress_stream(io.BytesIO(blob), out)
        return out.getvalue()

    return Codec(f"rwkvzip-{level}", f"rwkvzip -{level} ({LEVELS[level]})",
                 f"rwkvzip.api.compress_stream(fin, fout, level={level})",
                 f"preset card {LEVELS[level]}", compress, decompress)


def distinct_levels(wanted: list[int] | None = None) -> tuple[list[int], list[str]]:
    """The levels to run, one per preset card (the lowest level naming it), and notes on the
    levels left out because they name a card already run."""
    from rwkvzip.recipe import LEVELS, RecipeError

    levels = sorted(LEVELS) if wanted is None else wanted
    first: dict[str, int] = {}
    notes = []
    for level in levels:
        if level not in LEVELS:
            raise RecipeError(f"compression level must be one of {sorted(LEVELS)}, got {level}")
        card = LEVELS[level]
        if card in first:
            if wanted is not None:
                notes.append(f"level {level} is the same card as level {first[card]} ({card}): "
                             "not run twice")
            continue
        first[card] = level
    return list(first.values()), notes


def _kbps(nbytes: int, seconds: float) -> float | None:
    return nbytes / 1e3 / seconds if seconds > 0 and nbytes > 0 else None


def _cpu_time() -> float:
    """CPU seconds of this process and of the programs it ran (paq8px)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(codec: Codec, data: bytes, repeat: int) -> dict:
    """Compress and decompress `repeat` times each; verify every output. Never raises for a
    compressor's failure: the row then carries the errors."""
    errors: list[str] = []
    runs: dict[str, list[float]] = {"compress_wall_s": [], "compress_cpu_s": [],
                                    "decompress_wall_s": [], "decompress_cpu_s": []}
    blob = None
    try:
        for _ in range(repeat):
            w0, c0 = time.perf_counter(), _cpu_time()
            out = codec.compress(data)
            runs["compress_wall_s"].append(time.perf_counter() - w0)
            runs["compress_cpu_s"].append(_cpu_time() - c0)
            if blob is None:
                blob = out
            elif out != blob:
                errors.append("compressed output differs between runs")
        for _ in range(repeat):
            w0, c0 = time.perf_counter(), _cpu_time()
            back = codec.decompress(blob, len(data))
            runs["decompress_wall_s"].append(time.perf_counter() - w0)
            runs["decompress_cpu_s"].append(_cpu_time() - c0)
            if back != data:
                what = "different bytes" if len(back) == len(data) else "a wrong length"
                errors.append(f"roundtrip failed: {len(back)} bytes came back ({what})")
    except Exception as exc:  # a compressor's own error is a result, not a crash
        errors.append(f"{type(exc).__name__}: {exc}")
    row: dict = {"codec": codec.key, "label": codec.label, "bytes": len(data),
                 "compressed": len(blob) if blob is not None else None, "repeat": repeat,
                 "ok": not errors, "errors": sorted(set(errors), key=errors.index), "runs": runs}
    row["bpb"] = 8 * len(blob) / len(data) if blob is not None and data else None
    for kind in ("compress", "decompress"):
        for clock in ("wall", "cpu"):
            times = runs[f"{kind}_{clock}_s"]
            median = statistics.median(times) if len(times) == repeat else None
            row[f"{kind}_{clock}_s"] = median
            suffix = "" if clock == "wall" else "_cpu"
            row[f"{kind}_kBps{suffix}"] = _kbps(len(data), median) if median else None
    return row


def pareto_front(points: list[tuple[float | None, float | None]]) -> set[int]:
    """Indices of the (speed, bpb) points no other point beats on both (faster or as fast,
    and smaller or as small, one of them strictly). Points with a missing value are out."""
    front = set()
    valid = [i for i, (s, b) in enumerate(points) if s is not None and b is not None]
    for i in valid:
        si, bi = points[i]
        dominated = any(points[j][0] >= si and points[j][1] <= bi
                        and (points[j][0] > si or points[j][1] < bi) for j in valid)
        if not dominated:
            front.add(i)
    return front


def summarize(rows: list[dict], codecs: list[Codec], files: list[dict]) -> list[dict]:
    """Per group of files (corpus folder; then all files, if there are several groups) and
    compressor, over the files where it succeeded: mean of the files' bpb, bpb of all their
    bytes together, and speed as total bytes over total median time."""
    groups: dict[str, set[str]] = {}
    for f in files:
        groups.setdefault(f["group"], set()).add(f["name"])
    if len(groups) != 1:
        groups[ALL] = {f["name"] for f in files}
    out = []
    for group, names in groups.items():
        for codec in codecs:
            mine = [r for r in rows if r["codec"] == codec.key and r["file"] in names]
            good = [r for r in mine if r["ok"]]
            total = sum(r["bytes"] for r in good)
            packed = sum(r["compressed"] for r in good)
            bpbs = [r["bpb"] for r in good if r["bpb"] is not None]
            comp = sum(r["compress_wall_s"] for r in good)
            dec = sum(r["decompress_wall_s"] for r in good)
            out.append({"group": group, "codec": codec.key, "label": codec.label,
                        "files": len(good), "failed": len(mine) - len(good),
                        "bytes": total, "compressed": packed,
                        "mean_bpb": statistics.fmean(bpbs) if bpbs else None,
                        "total_bpb": 8 * packed / total if total else None,
                        "compress_kBps": _kbps(total, comp),
                        "decompress_kBps": _kbps(total, dec)})
    return out


def machine_info() -> dict:
    import numba
    import numpy

    import rwkvzip

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpu": cpu_name(), "logical_cpus": os.cpu_count(), "usable_cpus": usable,
            "platform": platform.platform(), "python": platform.python_version(),
            "numba": numba.__version__, "numpy": numpy.__version__,
            "rwkvzip": rwkvzip.__version__, "git": _git_commit(),
            "libraries": {"zlib": __import__("zlib").ZLIB_RUNTIME_VERSION,
                          "zstandard": f"{zstandard.__version__} (libzstd "
                                       f"{'.'.join(map(str, zstandard.ZSTD_VERSION))})",
                          "brotli": brotli.__version__, "pyppmd": pyppmd.__version__}}


def _git_commit() -> str | None:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + (" (with uncommitted changes)" if dirty else "")


def _load() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def display_name(path: Path, corpus: Path) -> tuple[str, str]:
    """A file's name in the report (relative to the corpus if it is in it) and its group (the
    corpus folder it is in, or "other files")."""
    try:
        relative = path.resolve().relative_to(corpus.resolve())
    except ValueError:
        return str(path), "other files"
    return relative.as_posix(), relative.parts[0] if len(relative.parts) > 1 else "corpus"


def corpus_files(corpus: Path) -> list[Path]:
    """Every file in the corpus's sub-folders (its own README and checksums left out)."""
    return sorted(p for p in corpus.rglob("*") if p.is_file() and p.parent != corpus)


def read_input(path: Path, head: int | None) -> bytes:
    data = path.read_bytes()
    return data[:head] if head is not None else data


def codec_by_key(key: str) -> Codec:
    return rwkvzip_codec(int(key.split("-")[1])) if key.startswith("rwkvzip-") else CLASSICAL[key]


def _warm_worker(levels: list[int]) -> None:
    """Load (or compile) rwkvzip's kernels in a worker before any timed run."""
    for level in levels:
        measure(rwkvzip_codec(level), WARMUP, 1)


def _measure_task(key: str, path: Path, head: int | None, repeat: int) -> dict:
    return measure(codec_by_key(key), read_input(path, head), repeat)


def _start_pool(codecs: list[Codec], files: list[Path], levels: list[int], jobs: int,
                repeat: int, rwkvzip_repeat: int, head: int | None) -> dict | None:
    """With jobs > 1: every (compressor, file) run submitted to `jobs` worker processes, the
    slowest first (rwkvzip's highest levels on the largest files), so the pool ends evenly.
    Returns the futures by (codec key, path); None for jobs = 1 (runs happen in order)."""
    if jobs <= 1:
        return None
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_warm_worker, initargs=(levels,))
    tasks = [(c, p) for p in files for c in codecs]
    cost = {c.key: (1000 * (levels.index(int(c.key.split("-")[1])) + 1)
                    if c.key.startswith("rwkvzip-") else 1) for c in codecs}
    tasks.sort(key=lambda t: -cost[t[0].key] * t[1].stat().st_size)
    futures = {}
    for codec, path in tasks:
        n = rwkvzip_repeat if codec.key.startswith("rwkvzip") else repeat
        futures[(codec.key, path)] = pool.submit(_measure_task, codec.key, path, head, n)
    pool.shutdown(wait=False)  # runs on; results are collected in order
    return futures


def run_bench(files: list[Path], levels: list[int], classical: list[str], repeat: int,
              rwkvzip_repeat: int, head: int | None = None, corpus: Path = DEFAULT_CORPUS,
              on_file: Callable[[dict], None] | None = None, jobs: int = 1) -> dict:
    """Run every compressor on every file; the report (what benchmarks.json holds).
    `on_file` is called with the report so far after each file. With jobs > 1 the runs are
    spread over that many processes (one thread each), started at once."""
    codecs = [rwkvzip_codec(level) for level in levels] + [CLASSICAL[k] for k in classical]
    report: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "machine": machine_info(), "load_average_start": _load(),
                    "settings": {"levels": levels, "classical": classical, "repeat": repeat,
                                 "rwkvzip_repeat": rwkvzip_repeat, "head": head,
                                 "jobs": jobs,
                                 "clock": "time.perf_counter (wall), time.process_time (CPU)",
                                 "kB": 1000},
                    "codecs": [{"key": c.key, "label": c.label, "call": c.call,
                                "note": c.note} for c in codecs],
                    "warmup_s": {}, "files": [], "results": [], "complete": False}
    for codec in codecs[:len(levels)]:  # rwkvzip: compile or load the kernels, untimed
        t0 = time.perf_counter()
        row = {"file": "(warm-up)", **measure(codec, WARMUP, 1)}
        report["warmup_s"][codec.key] = time.perf_counter() - t0
        print(f"warm-up {codec.label}: {report['warmup_s'][codec.key]:.1f} s", flush=True)
        if not row["ok"]:  # reported with the results, so it cannot go unnoticed
            report["results"].append(row)
            print(_progress_line(row), flush=True)
    width = max((len(display_name(p, corpus)[0]) for p in files), default=0) + 25 * bool(head)
    pool = _start_pool(codecs, files, levels, jobs, repeat, rwkvzip_repeat, head)
    for path in files:
        name, group = display_name(path, corpus)
        size = path.stat().st_size
        if head is not None and size > head:
            size = head
            name += f" (first {head} bytes)"
        report["files"].append({"name": name, "group": group, "path": str(path),
                                "bytes": size})
        for codec in codecs:
            n = rwkvzip_repeat if codec.key.startswith("rwkvzip") else repeat
            if pool is None:
                row = {"file": name, **measure(codec, read_input(path, head), n)}
            else:
                row = {"file": name, **pool[(codec.key, path)].result()}
            report["results"].append(row)
            print(_progress_line(row, width), flush=True)
        if on_file is not None:
            on_file(report)
    report["load_average_end"] = _load()
    report["cpu_over_wall"] = _cpu_over_wall(report["results"])
    report["summary"] = summarize(report["results"], codecs, report["files"])
    report["pareto"] = {f["name"]: _front_keys(report["results"], f["name"])
                        for f in report["files"]}
    report["complete"] = True
    return report


def _front_keys(rows: list[dict], name: str) -> list[str]:
    mine = [r for r in rows if r["file"] == name and r["ok"]]
    front = pareto_front([(r["compress_kBps"], r["bpb"]) for r in mine])
    return [mine[i]["codec"] for i in sorted(front)]


def published_bpb(label: str, files: list[dict]) -> float | None:
    """A published compressor's bits per byte over these files together (its per-file figures
    weighted by their bytes), or None unless every one is a whole Canterbury file it has a
    figure for."""
    names = list(PUBLISHED_BYTES)
    bpbs = PUBLISHED[label][1]
    if not files or any(PUBLISHED_BYTES.get(f["name"]) != f["bytes"] for f in files):
        return None
    total = sum(f["bytes"] for f in files)
    return sum(bpbs[names.index(f["name"])] * f["bytes"] for f in files) / total


def _codec_order(key: str) -> tuple:
    if key.startswith("rwkvzip-"):
        return (0, int(key.split("-")[1]), "")
    return (1, list(CLASSICAL).index(key), "") if key in CLASSICAL else (2, 0, key)


def merge_reports(reports: list[dict]) -> dict:
    """One report from several (the benchmarks.json of separate runs, e.g. one per level).
    A compressor is known by its key (rwkvzip-6, gzip) and its label, which names the card a
    level ran: its rows are those of every report naming it with the same label, the later
    report winning for a file measured twice; a later report naming the key with another
    label (the level ran another card) replaces the earlier label's rows. Files are the
    union, by name; the summary and the Pareto fronts are computed again."""
    rows: dict[tuple[str, str], dict] = {}
    labels: dict[str, str] = {}
    codecs: dict[str, dict] = {}
    files: dict[str, dict] = {}
    for report in reports:
        if not report.get("complete"):
            raise ValueError(f"the report of {report.get('command')!r} is not complete")
        for c in report["codecs"]:
            if labels.get(c["key"]) not in (None, c["label"]):
                rows = {k: r for k, r in rows.items() if k[0] != c["key"]}
            labels[c["key"]] = c["label"]
            codecs[c["key"]] = c
        for f in report["files"]:
            files[f["name"]] = f
        for r in report["results"]:
            if r["file"] != "(warm-up)":
                rows[(r["codec"], r["file"])] = r
    keys = sorted(codecs, key=_codec_order)
    names = sorted(n for n in files if any(k[1] == n for k in rows))
    sources = [s for r in reports for s in r.get("sources", [_source(r)])]
    merged: dict = {
        "date": max(s["date"] for s in sources), "machine": sources[-1]["machine"],
        "settings": {"levels": [int(k.split("-")[1]) for k in keys if k.startswith("rwkvzip-")],
                     "classical": [k for k in keys if k in CLASSICAL]},
        "codecs": [codecs[k] for k in keys], "files": [files[n] for n in names],
        "results": [rows[(k, n)] for n in names for k in keys if (k, n) in rows],
        "sources": sources, "complete": True}
    merged["cpu_over_wall"] = _cpu_over_wall(merged["results"])
    shims = [_Shim(c["key"], c["label"]) for c in merged["codecs"]]
    merged["summary"] = summarize(merged["results"], shims, merged["files"])
    merged["pareto"] = {n: _front_keys(merged["results"], n) for n in names}
    return merged


@dataclass(frozen=True)
class _Shim:
    """What summarize reads of a compressor, for reports read back from JSON."""

    key: str
    label: str


def _source(report: dict) -> dict:
    """What a report says of how it was made (a merged report lists one per run)."""
    return {k: report.get(k) for k in ("command", "date", "machine", "settings",
                                       "load_average_start", "load_average_end",
                                       "cpu_over_wall")}


def _cpu_over_wall(results: list[dict]) -> float | None:
    timed = [r for r in results if r["file"] != "(warm-up)"]
    wall = sum(sum(r["runs"][f"{k}_wall_s"]) for r in timed for k in ("compress", "decompress"))
    cpu = sum(sum(r["runs"][f"{k}_cpu_s"]) for r in timed for k in ("compress", "decompress"))
    return cpu / wall if wall > 0 else None


def results_table(report: dict, benchmarks_link: str | None = "BENCHMARKS.md"
                  ) -> list[str]:
    """The README's results table: total bits per byte of each group of files (then of all
    of them) per compressor, the published figures beside them, and compress / decompress
    speed; notes say where a compressor did not cover a group cleanly, and which command
    and runs gave the figures."""
    from rwkvzip.recipe import LEVELS

    files = report["files"]
    groups: dict[str, list[dict]] = {}
    for f in sorted(files, key=lambda f: (GROUP_ORDER.index(f["group"])
                                          if f["group"] in GROUP_ORDER else len(GROUP_ORDER))):
        groups.setdefault(f["group"], []).append(f)
    if len(groups) != 1:
        groups[ALL] = files
    notes: list[str] = []

    def mark(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return _superscript(notes.index(text) + 1)

    columns = []  # (label, {group: (value, marker)}, compress KB/s, decompress KB/s)
    for c in report["codecs"]:
        label = c["label"]
        if c["key"].startswith("rwkvzip-"):
            level, card = int(c["key"].split("-")[1]), label.split("(")[-1].rstrip(")")
            if LEVELS.get(level) not in (None, card):
                label += mark(f"`-{level}` ran `{card}` in this bench; the level now runs "
                              f"`{LEVELS[level]}`")
        mine = {r["file"]: r for r in report["results"] if r["codec"] == c["key"]}
        cells = {}
        for group, members in groups.items():
            got = [mine[f["name"]] for f in members if f["name"] in mine]
            good = [r for r in got if r["ok"]]
            if len(got) < len(members) or not good:
                cells[group] = (None, "")
                continue
            value = 8 * sum(r["compressed"] for r in good) / sum(r["bytes"] for r in good)
            failed = [r["file"] for r in got if not r["ok"]]
            cells[group] = (value, mark(f"{c['label']}: over the other files; "
                                        f"{', '.join(failed)} failed (BENCHMARKS.md, "
                                        "Errors)") if failed else "")
        good = [r for r in mine.values() if r["ok"]]
        total = sum(r["bytes"] for r in good)
        speeds = [_kbps(total, sum(r[f"{k}_wall_s"] for r in good)) if good else None
                  for k in ("compress", "decompress")]
        ran = {r["file"] for r in mine.values()}
        if good and len(ran) < len(files):
            covered = ", ".join(sorted({f["group"] for f in files if f["name"] in ran}))
            note = mark(f"{c['label']}: speeds over the {len(ran)} files it ran ({covered})")
            speeds = [_speed(v) + note if v is not None else None for v in speeds]
        columns.append((label, cells, *speeds))
    for name, (kbps, _) in PUBLISHED.items():
        cells = {g: (published_bpb(name, m), "") for g, m in groups.items()}
        if any(v is not None for v, _ in cells.values()):
            columns.append((name + mark(f"published: {PUBLISHED_SOURCE}; their compress "
                                        "speed as published, on one core"),
                            cells, f"{kbps:g}", None))
    lines = ["| files | bytes | " + " | ".join(c[0] for c in columns) + " |",
             "|---|---:|" + "---:|" * len(columns)]
    for group, members in groups.items():
        values = [c[1][group][0] for c in columns]
        best = min((v for v in values if v is not None), default=None)
        cells = []
        for (_, col, *_), v in zip(columns, values, strict=True):
            text = _fmt(v, 3) + col[group][1]
            cells.append(f"**{text}**" if v is not None and v == best else text)
        lines.append(f"| {group} ({len(members)}) | {sum(f['bytes'] for f in members):,} | "
                     + " | ".join(cells) + " |")
    for i, what in ((2, "compress"), (3, "decompress")):
        cells = [c[i] if isinstance(c[i], str) else _speed(c[i]) for c in columns]
        lines.append(f"| {what} KB/s | | " + " | ".join(cells) + " |")
    sources = report.get("sources", [_source(report)])
    when = ", ".join(sorted({s["date"][:10] for s in sources}))
    machines = " and ".join(sorted({s["machine"]["cpu"] for s in sources}))
    lines += ["", f"Total bits per byte of each group of files (8 × compressed bytes / original "
              f"bytes, all its files together, headers included; **bold**: the smallest), "
              f"speeds over every file a compressor ran (wall clock, one thread). Written by "
              f"`{report.get('command', 'scripts/bench.py')}` from "
              + (f"{len(sources)} benches" if len(sources) > 1 else "a bench")
              + f" of {when} on {machines}"
              + (f"; every file, run and machine detail: [BENCHMARKS.md]({benchmarks_link})."
                 if benchmarks_link else ".")]
    for i, n in enumerate(notes):
        lines += ["", f"{_superscript(i + 1)} {n}"]
    return lines


def _superscript(n: int) -> str:
    return "".join("⁰¹²³⁴⁵⁶⁷⁸⁹"[int(d)] for d in str(n))


def write_readme_table(path: Path, lines: list[str]) -> None:
    """Put the table lines between the file's results markers, replacing what was there."""
    before, after = _split_markers(path.read_text(), path)
    path.write_text(before + RESULTS_BEGIN + "\n" + "\n".join(lines) + "\n" + RESULTS_END
                    + after)


def _split_markers(text: str, path: Path) -> tuple[str, str]:
    if text.count(RESULTS_BEGIN) != 1 or text.count(RESULTS_END) != 1 or (
            text.index(RESULTS_BEGIN) > text.index(RESULTS_END)):
        raise ValueError(f"{path} needs one {RESULTS_BEGIN} line and one {RESULTS_END} "
                         "line after it")
    before, rest = text.split(RESULTS_BEGIN)
    return before, rest.split(RESULTS_END)[1]


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _speed(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _progress_line(row: dict, width: int = 34) -> str:
    status = "ok" if row["ok"] else "ERROR: " + "; ".join(row["errors"])
    return (f"{row['file']:{width}} {row['label']:24} {_fmt(row['bpb'], 3):>7} bpb "
            f"{_speed(row['compress_kBps']):>8} / {_speed(row['decompress_kBps']):>8} KB/s "
            f"{status}")


def _cell(text: str) -> str:
    """Text for a markdown table cell (a bare | would end the cell, even in code)."""
    return text.replace("|", "\\|")


def _loadavg(values: list[float] | None) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "unknown"


def _run_lines(src: dict) -> list[str]:
    """How one run was made: date, machine, software, its timing settings."""
    m, s = src["machine"], src["settings"]
    load = (f"{_loadavg(src.get('load_average_start'))} at the start, "
            f"{_loadavg(src.get('load_average_end'))} at the end (1, 5, 15 minutes)")
    return [
        f"- date: {src['date']}",
        f"- machine: {m['cpu']}, {m['logical_cpus']} logical CPUs ({m['usable_cpus']} usable), "
        f"{m['platform']}; load average {load}",
        f"- software: Python {m['python']}, numba {m['numba']}, numpy {m['numpy']}, "
        f"rwkvzip {m['rwkvzip']} (git {m['git']}); "
        + ", ".join(f"{k} {v}" for k, v in m["libraries"].items()),
        f"- runs: {s['repeat']} a file for the classical compressors, {s['rwkvzip_repeat']} for "
        "rwkvzip, "
        + ("in one process" if s.get("jobs", 1) == 1 else
           f"in {s['jobs']} worker processes running at once (--jobs)"),
    ]


def render_markdown(report: dict, command: str, plot: Path | None) -> str:
    errors = [r for r in report["results"] if not r["ok"]]
    sources = report.get("sources", [_source(report)])
    lines = ["# Benchmarks", "",
             "Written by `scripts/bench.py`; run it again rather than editing this file.", ""]
    if len(sources) == 1:
        lines += [f"- command: `{sources[0]['command']}`", *_run_lines(sources[0])]
        if command != sources[0]["command"]:
            lines.append(f"- written from its report by `{command}`")
    else:
        lines += [f"- command: `{command}`, from the reports of {len(sources)} runs (each "
                  "compressor's figures from the last run that measured it):"]
        for src in sources:
            lines += [f"- run: `{src['command']}`"] + ["  " + x for x in _run_lines(src)]
    lines += [
        "- timing: wall clock, the median of each file's runs (--repeat for the classical "
        "compressors, --rwkvzip-repeat for rwkvzip), each compressor on one thread, input and "
        "output in memory; rwkvzip's kernels were compiled or loaded before timing. KB = 1000 "
        "bytes. Process CPU time / wall time over all timed runs: "
        f"{_fmt(report.get('cpu_over_wall'), 2)} (well below 1 would mean the process often "
        "waited for a CPU). CPU times and every single run are in benchmarks.json.",
        "- bpb = 8 × compressed bytes / original bytes, with each format's headers and "
        "checksums (PPMd: the bare stream).",
        "- every roundtrip was verified byte for byte"
        + (" (failures are listed under Errors, at the end)." if errors else ": all passed."),
        "",
        "| compressor | called as | note |",
        "|---|---|---|",
    ]
    lines += [f"| {c['label']} | `{_cell(c['call'])}` | {_cell(c['note'])} |"
              for c in report["codecs"]]
    lines += ["", "## Results", "", *results_table(report, None)]
    lines += ["", "## Summary", "",
              "Per folder of the corpus: mean bpb is the mean of the files' bpb, total bpb "
              "counts all their bytes together; speeds are total bytes over total time.",
              "",
              "| files | compressor | mean bpb | total bpb | compress KB/s | decompress KB/s |",
              "|---|---|---:|---:|---:|---:|"]
    for r in report["summary"]:
        failed = f" ({r['failed']} failed)" if r["failed"] else ""
        group = f"{r['group']} ({r['files'] + r['failed']})"
        lines.append(f"| {group} | {r['label']}{failed} | {_fmt(r['mean_bpb'], 3)} | "
                     f"{_fmt(r['total_bpb'], 3)} | {_speed(r['compress_kBps'])} | "
                     f"{_speed(r['decompress_kBps'])} |")
    if plot is not None:
        lines += ["", f"![bits per byte against compress speed]({plot.as_posix()})"]
    lines += ["", "## Per file", "",
              "Pareto: no other compressor is both at least as fast to compress and at least "
              "as small on this file (the highlighted points of the plot).", ""]
    for f in report["files"]:
        front = set(report["pareto"][f["name"]])
        lines += [f"### {f['name']} ({f['bytes']:,} bytes)", "",
                  "| compressor | bpb | compress KB/s | decompress KB/s | Pareto |",
                  "|---|---:|---:|---:|:---:|"]
        for r in (r for r in report["results"] if r["file"] == f["name"]):
            bpb = _fmt(r["bpb"], 3) if r["ok"] else "**error**"
            lines.append(f"| {r['label']} | {bpb} | {_speed(r['compress_kBps'])} | "
                         f"{_speed(r['decompress_kBps'])} | {'●' if r['codec'] in front else ''} |")
        for name, (kbps, _) in PUBLISHED.items():
            bpb = published_bpb(name, [f])
            if bpb is not None:
                lines.append(f"| {name} (published) | {bpb:.3f} | {kbps:g} | – | |")
        lines.append("")
    if errors:
        lines += ["## Errors", ""]
        lines += [f"- {r['file']}, {r['label']}: {'; '.join(r['errors'])}" for r in errors]
        lines.append("")
    return "\n".join(lines)


def plot_pareto(report: dict, path: Path) -> None:
    """bpb against compress KB/s (log), one panel for all files together, one per file; the
    Pareto front highlighted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    last = report["summary"][-1]["group"] if report["summary"] else ALL  # all, or the only one
    panels = [(f"{last} (total)", [{"label": r["label"], "compress_kBps": r["compress_kBps"],
                                    "bpb": r["total_bpb"]}
                                   for r in report["summary"] if r["group"] == last])]
    panels += [(f["name"], [r for r in report["results"] if r["file"] == f["name"] and r["ok"]])
               for f in report["files"]]
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, (title, points) in zip(axes.flat, panels, strict=False):
        points = [p for p in points if p["compress_kBps"] is not None and p["bpb"] is not None]
        front = pareto_front([(p["compress_kBps"], p["bpb"]) for p in points])
        for i, p in enumerate(points):
            on = i in front
            color = "tab:red" if p["label"].startswith("rwkvzip") else "tab:blue"
            ax.scatter(p["compress_kBps"], p["bpb"], s=36 if on else 18, color=color,
                       alpha=1.0 if on else 0.45, edgecolors="black" if on else "none",
                       zorder=3)
            ax.annotate(p["label"].split(" (")[0], (p["compress_kBps"], p["bpb"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        line = sorted((points[i]["compress_kBps"], points[i]["bpb"]) for i in front)
        if line:
            ax.step([x for x, _ in line], [y for _, y in line], where="pre", color="gray",
                    linewidth=1, zorder=2)
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("compress KB/s (log)", fontsize=8)
        ax.set_ylabel("bits per byte", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.2)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("bits per byte against compress speed (outlined: Pareto front; red: rwkvzip)",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_outputs(report: dict, out: Path, command: str, plot: bool,
                  readme: Path | None = None) -> list[Path]:
    """BENCHMARKS.md, benchmarks.json, (if plot) the PNG under out and (if readme) the
    results table in that file; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    report["command"] = command
    written = [out / "benchmarks.json"]
    written[0].write_text(json.dumps(report, indent=1) + "\n")
    if not report["complete"]:
        return written
    if plot:
        plot_pareto(report, out / PLOT_PATH)
        written.append(out / PLOT_PATH)
    (out / "BENCHMARKS.md").write_text(render_markdown(report, command,
                                                       PLOT_PATH if plot else None) + "\n")
    written.append(out / "BENCHMARKS.md")
    if readme is not None:
        link = Path(os.path.relpath((out / "BENCHMARKS.md").resolve(),
                                    readme.resolve().parent)).as_posix()
        write_readme_table(readme, results_table(report, link))
        written.append(readme)
    return written


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _names(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip() and x.strip() != "none"]
    bad = [x for x in names if x not in CLASSICAL]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown compressor {', '.join(bad)} "
                                         f"(known: {', '.join(CLASSICAL)})")
    return names


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="files (default: the whole corpus)")
    ap.add_argument("--files", nargs="+", type=Path, default=[], action="extend",
                    help="files, as the positional arguments")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                    help=f"corpus folder when no file is given (default {DEFAULT_CORPUS})")
    ap.add_argument("--levels", type=_int_list,
                    help="rwkvzip levels, e.g. 1,2 (default: one level per distinct preset "
                         "card among 1..9); empty: no rwkvzip")
    ap.add_argument("--classical", type=_names, default=DEFAULT_CLASSICAL,
                    help=f"other compressors (default: {','.join(DEFAULT_CLASSICAL)}; also: "
                         "paq8px; none: none)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per file for the classical compressors (median; default 3)")
    ap.add_argument("--rwkvzip-repeat", type=int, default=1,
                    help="runs per file for rwkvzip (median; default 1, it is slow)")
    ap.add_argument("--head", type=int, help="only the first HEAD bytes of each file")
    ap.add_argument("--jobs", type=int, default=1,
                    help="worker processes running at once, one thread each (default 1; more "
                         "finishes sooner, and shares the machine's caches and memory)")
    ap.add_argument("--out", type=Path, default=ROOT,
                    help="where BENCHMARKS.md, benchmarks.json and docs/bench/ go "
                         "(default: the repository root)")
    ap.add_argument("--no-plot", action="store_true", help="no PNG (matplotlib not needed)")
    ap.add_argument("--readme", type=Path,
                    help="also rewrite the results table between this file's "
                         f"{RESULTS_BEGIN} and {RESULTS_END} lines (e.g. README.md)")
    ap.add_argument("--render", nargs="+", type=Path, metavar="REPORT",
                    help="measure nothing: write the outputs from these saved reports "
                         "(benchmarks.json of earlier runs; several are merged, a "
                         "compressor's rows coming from the last report that names it)")
    args = ap.parse_args(argv)
    if args.readme is not None:
        try:
            _split_markers(args.readme.read_text(), args.readme)
        except (OSError, ValueError) as exc:
            ap.error(str(exc))
    command = shlex.join(["python", os.path.relpath(__file__), *argv])
    if args.render:
        if args.paths or args.files:
            ap.error("--render takes reports, not files to measure")
        try:
            reports = [json.loads(path.read_text()) for path in args.render]
            report = merge_reports(reports)
        except (OSError, ValueError, KeyError) as exc:
            ap.error(f"cannot render {' '.join(map(str, args.render))}: {exc}")
        for path in write_outputs(report, args.out, command, plot=not args.no_plot,
                                  readme=args.readme):
            print(f"wrote {path}")
        return 0
    if args.repeat < 1 or args.rwkvzip_repeat < 1 or args.jobs < 1:
        ap.error("--repeat, --rwkvzip-repeat and --jobs must be at least 1")
    if args.head is not None and args.head < 1:
        ap.error("--head must be at least 1")
    if not args.no_plot and importlib.util.find_spec("matplotlib") is None:
        ap.error('the plot needs matplotlib (pip install -e ".[bench]"), or give --no-plot')
    try:
        levels, notes = distinct_levels(args.levels)
    except ValueError as exc:  # RecipeError: no such level
        ap.error(str(exc))
    for note in notes:
        print(note)
    files = list(dict.fromkeys([*args.paths, *args.files])) or corpus_files(args.corpus)
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        ap.error(f"not a file: {', '.join(missing)}")
    print(f"{len(files)} files; rwkvzip levels {levels or 'none'}; "
          f"{', '.join(args.classical) or 'no classical compressors'}")

    def save_partial(report: dict) -> None:
        write_outputs(report, args.out, command, plot=False)

    report = run_bench(files, levels, args.classical, args.repeat, args.rwkvzip_repeat,
                       args.head, args.corpus, on_file=save_partial, jobs=args.jobs)
    for path in write_outputs(report, args.out, command, plot=not args.no_plot,
                              readme=args.readme):
        print(f"wrote {path}")
    failed = [r for r in report["results"] if not r["ok"]]
    for r in failed:
        print(f"error: {r['file']}, {r['label']}: {'; '.join(r['errors'])}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    for var in SINGLE_THREAD_ENV:  # before rwkvzip loads numba (and numpy)
        os.environ.setdefault(var, "1")
    sys.exit(main())
