"""Measure -T N: wall time, bits per byte and peak memory per thread count and block size.

    python scripts/threads.py FILE [-N LEVEL] [--configs 1:-,1:2M,2:2M,2:1M] [--out DIR]

Each config THREADS:BLOCK ('-': no block size, so -T 1 writes one block) runs the command
line as a user would (`python -m rwkvzip -N -T THREADS [--block-size BLOCK] -c FILE`, then
`-d -T THREADS`) in its own process group, timing the wall clock and sampling the memory of
the whole group (the sum of PSS over the command and its workers, so pages the workers
share are counted once) every 0.1 s. Every output is decoded and compared with the input;
configs with the same block size must give identical bytes, whatever the thread count.
Each block restart is compared with the one-block file frame by frame: the extra bytes the
restarted models cost after 256 KiB, 512 KiB, 1 MiB and the whole block (what sets the
default block size). Writes OUT/threads-NAME-LEVEL.json and .md (OUT: docs/bench); exit
status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

from rwkvzip.coding import blocks, container  # noqa: E402

SAMPLE_SECONDS = 0.1
MARKS = (4, 8, 16)  # frames of 64 KiB after a restart: 256 KiB, 512 KiB, 1 MiB


def group_memory(pgid: int) -> int:
    """Bytes of memory the process group holds: the sum of its processes' PSS (RSS where
    the kernel has no smaps_rollup; 0 for a process ending meanwhile)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            total += _pss(entry)
        except (OSError, ValueError, IndexError):
            continue
    return total


def _pss(pid: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        key = "Pss:"
    except OSError:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        key = "VmRSS:"
    return next((int(line.split()[1]) * 1024 for line in lines if line.startswith(key)), 0)


def run_measured(args: list[str], stdin: Path, stdout: Path) -> tuple[float, int]:
    """Run the command line; its wall time and the group's peak memory."""
    with open(stdin, "rb") as fin, open(stdout, "wb") as fout:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "rwkvzip", *args], stdin=fin,
                                stdout=fout, stderr=subprocess.PIPE, start_new_session=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, group_memory(proc.pid))
            time.sleep(SAMPLE_SECONDS)
        seconds = time.perf_counter() - start
        err = proc.stderr.read().decode()
    if proc.returncode:
        raise SystemExit(f"rwkvzip {' '.join(args)} failed: {err.strip()}")
    return seconds, peak


def member_frames(blob: bytes) -> list[list[tuple[int, int]]]:
    """The raw and payload sizes of every frame, member by member."""
    f, members = io.BytesIO(blob), []
    while (recipe := container.read_header(f, first=not members)) is not None:
        members.append([(frame.raw_len, len(frame.payload))
                        for frame in container.read_frames(f, recipe.eol, recipe.bypass)])
    return members


def restart_costs(blocked: bytes, whole: bytes) -> list[dict]:
    """Per block after the first (block sizes a whole number of frames, so frames line up):
    extra compressed bytes against the one-block file over the same frames, after 256 KiB,
    512 KiB, 1 MiB and the whole block."""
    (single,) = member_frames(whole)
    costs, pos = [], 0
    for frames in member_frames(blocked):
        same = single[pos:pos + len(frames)]
        if [raw for raw, _ in frames] != [raw for raw, _ in same]:
            return []  # a frame was cut a byte short (a CR LF across the cut, eol recipes)
        if pos:
            extra = [a - b for (_, a), (_, b) in zip(frames, same, strict=True)]
            row = {"after_kib": pos * 64, "block_kib": len(frames) * 64,
                   "extra": {f"{k * 64}K": sum(extra[:k]) for k in MARKS if k < len(frames)}}
            row["extra"]["block"] = sum(extra)
            row["pct_of_block"] = 100 * sum(extra) / sum(payload for _, payload in same)
            costs.append(row)
        pos += len(frames)
    return costs


def parse_configs(text: str) -> list[tuple[int, int | None]]:
    configs = []
    for item in text.split(","):
        threads, _, size = item.partition(":")
        block = None if size in ("", "-") else blocks.parse_size(size)
        configs.append((int(threads), block))
    return configs


def measure(path: Path, level: int, configs: list[tuple[int, int | None]], work: Path) -> dict:
    raw = path.stat().st_size
    rows, digests, blobs = [], {}, {}
    for threads, block in configs:
        size = [] if block is None else ["--block-size", str(block)]
        packed = work / f"t{threads}-{block}.rwkz"
        c_s, c_mem = run_measured([f"-{level}", "-T", str(threads), *size, "-c"], path, packed)
        unpacked = work / "out"
        d_s, d_mem = run_measured(["-d", "-T", str(threads), "-c"], packed, unpacked)
        blob = blobs[block] = packed.read_bytes()
        row = {"threads": threads, "block_size": block, "compressed": len(blob),
               "bpb": 8 * len(blob) / raw, "compress_s": c_s, "decompress_s": d_s,
               "compress_peak_mib": c_mem / 2**20, "decompress_peak_mib": d_mem / 2**20,
               "roundtrip": unpacked.read_bytes() == path.read_bytes(),
               "same_as_other_threads": digests.setdefault(block, blob) == blob}
        rows.append(row)
        print(_line(row), flush=True)
    base = next((r for r in rows if r["threads"] == 1 and r["block_size"] is None), rows[0])
    for row in rows:
        if None in blobs and row["block_size"] and not row["block_size"] % container.MAX_FRAME:
            row["restarts"] = restart_costs(blobs[row["block_size"]], blobs[None])
        row["bpb_cost_pct"] = 100 * (row["bpb"] / base["bpb"] - 1)
        row["compress_vs_base"] = row["compress_s"] / base["compress_s"]
        row["decompress_vs_base"] = row["decompress_s"] / base["decompress_s"]
    return {"file": path.name, "bytes": raw, "level": level, "cpus": blocks.cpu_count(),
            "rows": rows}


def _size(block: int | None) -> str:
    if block is None:
        return "one block"
    return f"{block >> 20} MiB" if block % (1 << 20) == 0 else f"{block >> 10} KiB"


def _line(row: dict) -> str:
    return (f"-T {row['threads']} {_size(row['block_size']):>9}: {row['bpb']:.4f} bpb, "
            f"compress {row['compress_s']:.1f} s ({row['compress_peak_mib']:.0f} MiB), "
            f"decompress {row['decompress_s']:.1f} s ({row['decompress_peak_mib']:.0f} MiB)"
            f"{'' if row['roundtrip'] and row['same_as_other_threads'] else '  MISMATCH'}")


def render(report: dict) -> str:
    out = [f"# -T N on {report['file']} ({report['bytes']:,} bytes), level "
           f"-{report['level']}, {report['cpus']} cores", "",
           "| -T | block size | bpb | cost | compress s | × | peak MiB | decompress s | × "
           "| peak MiB | same bytes as other -T |", "|---:|---|---:|---:|---:|---:|---:|---:|"
           "---:|---:|---|"]
    for r in report["rows"]:
        out.append(f"| {r['threads']} | {_size(r['block_size'])} | {r['bpb']:.4f} | "
                   f"{r['bpb_cost_pct']:+.2f} % | {r['compress_s']:.1f} | "
                   f"{r['compress_vs_base']:.2f} | {r['compress_peak_mib']:.0f} | "
                   f"{r['decompress_s']:.1f} | {r['decompress_vs_base']:.2f} | "
                   f"{r['decompress_peak_mib']:.0f} | "
                   f"{'yes' if r['same_as_other_threads'] else 'NO'} |")
    out += ["", "× : wall time over -T 1 with one block; cost: bpb over that; peak: the sum "
            "of PSS over the command and its workers.", "",
            "Extra bytes a block restart costs against the one-block file, over the same "
            "frames:", "", "| block size | restart after | extra bytes by then | "
            "of the block |", "|---|---:|---|---:|"]
    for r in report["rows"]:
        for c in r.get("restarts", []):
            marks = ", ".join(f"{k}: {v:,}" for k, v in c["extra"].items())
            out.append(f"| {_size(r['block_size'])} | {c['after_kib']:,} KiB | {marks} | "
                       f"{c['pct_of_block']:.2f} % |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("-N", "--level", type=int, default=4)
    ap.add_argument("--configs", default="1:-,1:2M,2:2M,2:1M")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        report = measure(args.file, args.level, parse_configs(args.configs), Path(work))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"threads-{args.file.stem}-{args.level}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    stem.with_suffix(".md").write_text(render(report))
    print(render(report))
    ok = all(r["roundtrip"] and r["same_as_other_threads"] for r in report["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
