"""Measure rwkvzip.dask on a local Dask cluster: one worker, two workers, and `-T` beside them.

    python scripts/cluster.py FILE [-N LEVEL] [--block-size SIZE] [--workers 1,2] [--out DIR]

For each worker count a `distributed.LocalCluster` (worker processes, one thread each) is
started and warmed up (every worker loads the level's kernels), then FILE is compressed and
decompressed with rwkvzip.dask.compress_file / decompress_file, timing the wall clock. The
same block size runs through `-T 1` and `-T 2` in this process (api.compress_stream). Every
output must equal `-T 2`'s bytes and decode to FILE. The scheduler's overhead per block is
the wall time of the one-worker run less the time its tasks computed (Dask's task stream),
over the number of blocks. Writes OUT/cluster-NAME-LEVEL.json and .md (OUT: docs/bench);
exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from harness import ROOT, cpu_name

sys.path.insert(0, str(ROOT))

from distributed import Client, LocalCluster, get_task_stream  # noqa: E402

import rwkvzip.dask as rd  # noqa: E402
from rwkvzip import api  # noqa: E402
from rwkvzip.coding import blocks, codec  # noqa: E402
from rwkvzip.recipe import DEFAULT_LEVEL, level_recipe  # noqa: E402


def on_cluster(path: Path, level: int, block_size: int, workers: int, work: Path) -> dict:
    """Compress and decompress on a cluster of `workers` processes; wall times, the tasks'
    compute time and the output."""
    packed, unpacked = work / f"w{workers}.rwkz", work / f"w{workers}.out"
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        rd.warm_up(client, level)
        with get_task_stream(client) as stream:
            start = time.perf_counter()
            stats = rd.compress_file(path, packed, client=client, level=level,
                                     block_size=block_size, overwrite=True)
            compress_s = time.perf_counter() - start
        compute_s = sum(ss["stop"] - ss["start"] for task in stream.data
                        for ss in task["startstops"] if ss["action"] == "compute")
        start = time.perf_counter()
        rd.decompress_file(packed, unpacked, client=client, overwrite=True)
        decompress_s = time.perf_counter() - start
    return {"config": f"cluster, {workers} worker{'s' * (workers > 1)}", "workers": workers,
            "compress_s": compress_s, "decompress_s": decompress_s, "compute_s": compute_s,
            "blocks": stats.members, "blob": packed.read_bytes(),
            "roundtrip": unpacked.read_bytes() == path.read_bytes()}


def with_threads(path: Path, level: int, block_size: int, threads: int) -> dict:
    """The same blocks through -T THREADS in this process (warm kernels, forked workers)."""
    codec.warm_up(level_recipe(level), decoding=True)
    data = path.read_bytes()
    start = time.perf_counter()
    blob = api.compress(data, level, threads=threads, block_size=block_size)
    compress_s = time.perf_counter() - start
    start = time.perf_counter()
    back = api.decompress(blob, threads=threads)
    decompress_s = time.perf_counter() - start
    return {"config": f"-T {threads}", "workers": threads, "compress_s": compress_s,
            "decompress_s": decompress_s, "blob": blob, "roundtrip": back == data}


def measure(path: Path, level: int, block_size: int, worker_counts: list[int]) -> dict:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in (1, 2):
            rows.append(with_threads(path, level, block_size, threads))
            print(_line(rows[-1]), flush=True)
        for workers in worker_counts:
            rows.append(on_cluster(path, level, block_size, workers, Path(tmp)))
            print(_line(rows[-1]), flush=True)
    reference = rows[1]["blob"]  # -T 2
    for row in rows:
        row["same_as_threads"] = row.pop("blob") == reference
    one = next((r for r in rows if r.get("workers") == 1 and "compute_s" in r), None)
    result = {"file": path.name, "bytes": path.stat().st_size, "level": level,
              "block_size": block_size, "blocks": rows[-1].get("blocks"),
              "compressed": len(reference), "cpu": cpu_name(), "cpus": blocks.cpu_count(),
              "rows": rows}
    if one is not None:
        result["overhead_per_block_s"] = (one["compress_s"] - one["compute_s"]) / one["blocks"]
        for row in rows:
            row["compress_vs_one_worker"] = row["compress_s"] / one["compress_s"]
            row["decompress_vs_one_worker"] = row["decompress_s"] / one["decompress_s"]
    return result


def _line(row: dict) -> str:
    ok = "ok" if row["roundtrip"] else "ROUNDTRIP FAILED"
    return f"{row['config']:<20} {row['compress_s']:8.2f} s / {row['decompress_s']:8.2f} s  {ok}"


def markdown(result: dict) -> str:
    lines = [f"# {result['file']} on a local Dask cluster, level {result['level']}", "",
             f"{result['bytes']:,} bytes in {result['blocks']} blocks of "
             f"{result['block_size'] >> 10} KiB, {result['compressed']:,} compressed; "
             f"{result['cpu']}, {result['cpus']} CPUs.", "",
             "| run | compress s | decompress s | compress ÷ one worker | same bytes as -T 2 |"
             " decodes |", "|---|---:|---:|---:|---|---|"]
    for row in result["rows"]:
        ratio = row.get("compress_vs_one_worker")
        lines.append(f"| {row['config']} | {row['compress_s']:.2f} | {row['decompress_s']:.2f} "
                     f"| {'' if ratio is None else f'{ratio:.2f}'} | "
                     f"{'yes' if row['same_as_threads'] else 'NO'} | "
                     f"{'yes' if row['roundtrip'] else 'NO'} |")
    if "overhead_per_block_s" in result:
        lines += ["", f"Scheduler overhead per block (one worker: wall time less the tasks' "
                      f"compute time, over the blocks): {result['overhead_per_block_s']:.3f} s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("-N", "--level", type=int, default=DEFAULT_LEVEL)
    ap.add_argument("--block-size", type=blocks.parse_size, default=None,
                    help="block size (default: a quarter of the file, at least 64K)")
    ap.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    args = ap.parse_args(argv)
    size = args.file.stat().st_size
    block = args.block_size or max(blocks.MIN_BLOCK_SIZE, -(-size // 4))
    result = measure(args.file, args.level, block, [int(w) for w in args.workers.split(",")])
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"cluster-{args.file.stem}-{args.level}"
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))
    ok = all(r["roundtrip"] and r["same_as_threads"] for r in result["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
