"""Many small files, each compressed on its own, in one `rwkvzip` process: the per-file cost
of a prior's dictionary (docs/dictionary-once.md).

    python scripts/many_files.py make OUT [--package fontTools]
    python scripts/many_files.py time [--rwkvzip CMD] [--prior FILE] [--level N] FILE...

`make` writes two kinds of data, neither in the shipped priors' training corpus: the Python
modules of an installed package (every other module by name is a training sample, the rest
are held back: up to 50 modules of 2-16 KB in OUT/py/test) and plain-text service logs from
a seeded generator (OUT/log/train, and 24 held-back chunks of 4 KB in OUT/log/test); and,
for the per-file cost, 50 files each of 1, 4 and 16 KB cut from the held-back modules
(OUT/size/1k ...). `time` copies the files to a scratch folder and runs
`rwkvzip -q [-D PRIOR] -k FILE...` on the first file alone and on them all, then
`rwkvzip -d` likewise, and prints one JSON line: seconds for one file and for all, the
per-file cost after the first ((all - one) / (n - 1)), the peak RSS of the runs over all
files (/usr/bin/time, where present), and the compressed bytes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SERVICES = ("api-gateway", "orders", "billing", "auth", "search", "worker")
METHODS = ("GET", "GET", "GET", "POST", "PUT", "DELETE")
ROUTES = ("/api/v1/orders", "/api/v1/orders/{id}", "/api/v1/users/{id}", "/api/v2/search",
          "/healthz", "/api/v1/invoices/{id}/pdf", "/login", "/static/app.{id}.js")
ERRORS = ("upstream connect error or disconnect/reset before headers",
          "context deadline exceeded", "pq: too many connections for role \"svc\"",
          "token expired", "redis: connection pool timeout")
JOBS = ("send_receipt", "reindex_products", "expire_sessions", "sync_inventory")
SIZES = {"1k": 1024, "4k": 4096, "16k": 16384}


def log_lines(seed: int, n: int) -> list[str]:
    """Plain-text service log lines: timestamps, levels, services, HTTP requests with
    latencies, job runs, connection-pool notes and a few errors."""
    rng = np.random.default_rng(seed)
    t = 1_767_225_600.0 + float(rng.integers(0, 86400))
    out = []
    for _ in range(n):
        t += float(rng.exponential(0.4))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"
        svc = SERVICES[int(rng.integers(len(SERVICES)))]
        pid = 1000 + SERVICES.index(svc) * 37
        kind = rng.random()
        if kind < 0.7:
            route = ROUTES[int(rng.integers(len(ROUTES)))].replace(
                "{id}", str(int(rng.integers(1, 99999))))
            status = int(rng.choice([200, 200, 200, 201, 204, 304, 404, 500]))
            level = "ERROR" if status >= 500 else "WARN " if status == 404 else "INFO "
            ms = float(np.round(rng.lognormal(2.5, 0.9), 1))
            out.append(f"{stamp} {level} {svc}[{pid}]: {METHODS[int(rng.integers(6))]} {route} "
                       f"{status} {ms}ms user=u{int(rng.zipf(1.5)) % 5000} "
                       f"req={int(rng.integers(0, 1 << 32)):08x}")
        elif kind < 0.85:
            job = JOBS[int(rng.integers(len(JOBS)))]
            out.append(f"{stamp} INFO  {svc}[{pid}]: job {job} finished in "
                       f"{int(rng.integers(3, 4000))}ms (items={int(rng.integers(0, 500))})")
        elif kind < 0.95:
            out.append(f"{stamp} DEBUG {svc}[{pid}]: pool stats open={int(rng.integers(1, 64))} "
                       f"idle={int(rng.integers(0, 16))} wait={int(rng.integers(0, 9))}")
        else:
            out.append(f"{stamp} ERROR {svc}[{pid}]: {ERRORS[int(rng.integers(len(ERRORS)))]} "
                       f"(attempt {int(rng.integers(1, 4))}/3)")
    return out


def make(out: Path, package: str) -> None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{package} is not an installed package")
    root = Path(next(iter(spec.submodule_search_locations)))
    modules = sorted(p for p in root.rglob("*.py") if "tests" not in p.parts)
    py_train, py_test = out / "py" / "train", out / "py" / "test"
    for d in (py_train, py_test):
        d.mkdir(parents=True, exist_ok=True)
    held = []
    for i, path in enumerate(modules):
        data = path.read_bytes()
        name = "__".join(path.relative_to(root).parts)
        if i % 2 == 0:
            (py_train / name).write_bytes(data)
        else:
            held.append(data)
            if 2048 <= len(data) <= 16384 and len(list(py_test.iterdir())) < 50:
                (py_test / name).write_bytes(data)
    log_train, log_test = out / "log" / "train", out / "log" / "test"
    for d in (log_train, log_test):
        d.mkdir(parents=True, exist_ok=True)
    for k in range(40):
        (log_train / f"part-{k:02d}.log").write_text("\n".join(log_lines(k, 600)) + "\n")
    text = ("\n".join(log_lines(10_000, 2000)) + "\n").encode()
    for k in range(24):
        chunk = text[k * 4096:(k + 1) * 4096]
        (log_test / f"chunk-{k:02d}.log").write_bytes(chunk[:chunk.rindex(b"\n") + 1])
    for label, size in SIZES.items():
        d = out / "size" / label
        d.mkdir(parents=True, exist_ok=True)
        pieces = [m[at:at + size] for m in held for at in range(0, len(m) - size + 1, size)]
        for k, piece in enumerate(pieces[:50]):
            (d / f"{label}-{k:02d}.py").write_bytes(piece)


def run(cmd: list[str], files: list[Path]) -> tuple[float, int | None]:
    """Seconds of `cmd FILE...` and its peak RSS in KB (None without /usr/bin/time)."""
    timer = ["/usr/bin/time", "-f", "RSS %M"] if Path("/usr/bin/time").exists() else []
    t = time.perf_counter()
    done = subprocess.run(timer + cmd + [str(f) for f in files], capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if done.returncode:
        sys.exit(f"{shlex.join(cmd)} failed: {done.stderr.strip()}")
    rss = re.findall(r"RSS (\d+)", done.stderr)
    return seconds, int(rss[-1]) if rss else None


def time_files(rwkvzip: list[str], files: list[Path], prior: Path | None,
               level: int | None) -> dict:
    opts = ["-q", "-f"] + (["-D", str(prior)] if prior else []) + ([f"-{level}"] if level else [])
    row: dict = {"files": len(files), "raw_bytes": sum(f.stat().st_size for f in files),
                 "prior": prior.name if prior else None}
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for f in files:
            shutil.copy(f, Path(tmp) / f.name)
            copies.append(Path(tmp) / f.name)
        packed = [Path(str(c) + ".rwkz") for c in copies]
        one, _ = run(rwkvzip + opts + ["-k"], copies[:1])
        allc, rss_c = run(rwkvzip + opts + ["-k"], copies)
        row["compressed_bytes"] = sum(p.stat().st_size for p in packed)
        for c in copies:
            c.unlink()
        dopts = ["-d", "-q", "-f"] + (["-D", str(prior)] if prior else [])
        oned, _ = run(rwkvzip + dopts + ["-k"], packed[:1])
        alld, rss_d = run(rwkvzip + dopts + ["-k"], packed)
        if any(c.read_bytes() != f.read_bytes() for c, f in zip(copies, files, strict=True)):
            sys.exit("a file did not decompress to its original")
    n = max(len(files) - 1, 1)
    row.update(compress_one_s=round(one, 2), compress_all_s=round(allc, 2),
               compress_per_file_ms=round(1000 * (allc - one) / n, 1), compress_rss_kb=rss_c,
               decompress_one_s=round(oned, 2), decompress_all_s=round(alld, 2),
               decompress_per_file_ms=round(1000 * (alld - oned) / n, 1),
               decompress_rss_kb=rss_d)
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out", type=Path)
    m.add_argument("--package", default="fontTools")
    t = sub.add_parser("time")
    t.add_argument("files", type=Path, nargs="+")
    t.add_argument("--rwkvzip", default=f"{sys.executable} -m rwkvzip")
    t.add_argument("--prior", type=Path)
    t.add_argument("--level", type=int)
    args = ap.parse_args(argv)
    if args.cmd == "make":
        make(args.out, args.package)
    else:
        print(json.dumps(time_files(shlex.split(args.rwkvzip), args.files, args.prior,
                                    args.level)))


if __name__ == "__main__":
    main()
