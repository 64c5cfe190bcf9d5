"""Prove that x86-64 and AArch64 write and read the same files: a Debian arm64 root under
qemu-user, rwkvzip installed there with `pip install .`, every level on both sides.

    sudo python scripts/cross_arch.py [--root DIR] [--levels 1,2,...,9] [--head BYTES]
        [--out DIR] [--dry-run] [FILE ...]

Steps (each skipped when already done, so a second run reuses the root and its install):
  1. `debootstrap --arch=arm64 --variant=minbase` builds a bookworm root in DIR (with
     python3, venv, pip), once;
  2. binfmt_misc is mounted and `update-binfmts --enable qemu-aarch64` lets the kernel run
     the root's programs through qemu-user-static;
  3. the working tree is copied to DIR/opt/rwkvzip and `pip install .` runs there in a venv
     (its log: OUT/cross-arch-install.log; constriction has no wheel there, so the numba
     twin encodes);
  4. `rwkvzip selftest` runs there;
  5. each FILE (default: a text, a binary and a CRLF file of the corpus, their first
     --head bytes) is compressed at each level on both sides; the files must be identical,
     and each side decodes the other's to the input.
Writes OUT/cross-arch.json and OUT/cross-arch.md (OUT: docs/bench): the table of level x
file x direction, the versions of Python, numba and LLVM on both sides, the timings. Needs
root (debootstrap, chroot, mounts) and the Debian packages debootstrap, qemu-user-static
and binfmt-support. Exit status 1 on any mismatch. Emulation is slow: the kernels of a level
compile in minutes there, so this is not part of the test suite (its smoke test runs
--dry-run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness import CORPUS, ROOT, input_path

DEFAULT_ROOT = Path("/var/tmp/rwkvzip-arm64")
MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"
# a text, a binary and a CRLF text file of the corpus
DEFAULT_FILES = ("canterbury/fields.c", "canterbury/sum", "canterbury/alice29.txt")
LEVELS = tuple(range(1, 10))
INSIDE = Path("/opt/rwkvzip")  # the project, in the root
VENV = Path("/opt/venv")
MOUNTS = ("proc", "sys", "dev")
# copied from this machine into the root: name resolution, and the certificates it trusts
# (a proxy to PyPI may sign with a CA of its own)
HOST_FILES = ("/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt")
VERSIONS = ("import platform, numba, llvmlite.binding as b; "
            "print(platform.machine(), platform.python_version(), numba.__version__, "
            "'.'.join(map(str, b.llvm_version_info)))")
EXCLUDE = (".git", ".venv", "build", "__pycache__", "*.egg-info")


class Plan:
    """What a run does, command by command; a dry run prints them instead."""

    def __init__(self, root: Path, dry_run: bool):
        self.root, self.dry_run = root, dry_run
        self.log: list[str] = []

    def run(self, argv: list[str], *, stdin: bytes | None = None, check: bool = True,
            log: Path | None = None) -> subprocess.CompletedProcess:
        self.log.append(shlex.join(argv))
        if self.dry_run:
            print("+", shlex.join(argv))
            return subprocess.CompletedProcess(argv, 0, b"", b"")
        proc = subprocess.run(argv, input=stdin, capture_output=True)
        if log is not None:
            log.write_bytes(proc.stdout + proc.stderr)
        if check and proc.returncode:
            raise SystemExit(f"cross_arch: {shlex.join(argv)} failed:\n"
                             f"{proc.stderr.decode(errors='replace')[-3000:]}")
        return proc

    def inside(self, command: str, **kw) -> subprocess.CompletedProcess:
        """A shell command in the arm64 root (its programs run under qemu-aarch64)."""
        return self.run(["chroot", str(self.root), "/bin/sh", "-c", command], **kw)


def check_tools(plan: Plan) -> None:
    missing = [t for t in ("debootstrap", "update-binfmts", "chroot")
               if shutil.which(t) is None]
    if missing and not plan.dry_run:
        raise SystemExit(f"cross_arch: missing {', '.join(missing)} (apt-get install "
                         "debootstrap qemu-user-static binfmt-support)")
    if os.geteuid() != 0 and not plan.dry_run:
        raise SystemExit("cross_arch: needs root (debootstrap, chroot and mounts)")


def build_root(plan: Plan) -> None:
    if (plan.root / "usr" / "bin" / "python3").exists():
        return
    plan.run(["debootstrap", "--arch=arm64", "--variant=minbase", f"--include={PACKAGES}",
              SUITE, str(plan.root), MIRROR])


def enable_emulation(plan: Plan) -> None:
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    if not (binfmt / "register").exists():
        plan.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)])
    plan.run(["update-binfmts", "--enable", "qemu-aarch64"])


def mount_system(plan: Plan) -> list[Path]:
    mounted = []
    for name in MOUNTS:
        target = plan.root / name
        if not plan.dry_run and os.path.ismount(target):
            continue
        plan.run(["mount", "--bind", f"/{name}", str(target)])
        mounted.append(target)
    if not plan.dry_run:  # the root resolves names and trusts certificates as this machine
        for name in HOST_FILES:
            shutil.copy(name, plan.root / name.lstrip("/"))
    return mounted


def install(plan: Plan, out: Path) -> None:
    """The working tree into the root, then `pip install .` there (skipped when the same
    tree is installed already)."""
    target = plan.root / INSIDE.relative_to("/")
    stamp = plan.root / VENV.relative_to("/") / "rwkvzip-tree"
    tree = _tree_digest()
    if not plan.dry_run and stamp.exists() and stamp.read_text() == tree:
        return
    if not plan.dry_run:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(*EXCLUDE))
    plan.inside(f"python3 -m venv {VENV} && {VENV}/bin/pip install --no-cache-dir "
                f"{INSIDE}", log=out / "cross-arch-install.log")
    if not plan.dry_run:
        stamp.write_text(tree)


def _tree_digest() -> str:
    """What is installed: HEAD and the diff of the working tree."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    diff = subprocess.run(["git", "-C", str(ROOT), "diff", "HEAD"], capture_output=True).stdout
    return f"{head} {hashlib.sha256(diff).hexdigest()}"


def versions(plan: Plan) -> dict:
    host = subprocess.run([sys.executable, "-c", VERSIONS], capture_output=True, text=True)
    arm = plan.inside(f"{VENV}/bin/python -c {shlex.quote(VERSIONS)}")
    keys = ("machine", "python", "numba", "llvm")
    return {"x86-64": dict(zip(keys, host.stdout.split(), strict=False)),
            "aarch64": dict(zip(keys, arm.stdout.decode().split(), strict=False))}


def host_rwkvzip(args: list[str], data: bytes) -> tuple[bytes, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rwkvzip", *args], input=data,
                          capture_output=True)
    if proc.returncode:
        raise SystemExit(f"cross_arch: rwkvzip {' '.join(args)} failed here: "
                         f"{proc.stderr.decode()[-2000:]}")
    return proc.stdout, time.perf_counter() - start


def arm_rwkvzip(plan: Plan, args: list[str], data: bytes) -> tuple[bytes, float]:
    start = time.perf_counter()
    proc = plan.inside(f"{VENV}/bin/rwkvzip {shlex.join(args)}", stdin=data)
    return proc.stdout, time.perf_counter() - start


def compare(plan: Plan, files: list[Path], levels: list[int], head: int | None) -> list[dict]:
    rows = []
    if plan.dry_run:
        for path in files:
            print(f"+ compare {path} at levels {levels} (first {head or 'all'} bytes): "
                  "compress on both sides, decode each side's file on the other")
        return rows
    for path in files:
        data = path.read_bytes()[:head] if head else path.read_bytes()
        for level in levels:
            host_blob, host_s = host_rwkvzip([f"-{level}", "-c"], data)
            arm_blob, arm_s = arm_rwkvzip(plan, [f"-{level}", "-c"], data)
            arm_reads, arm_read_s = arm_rwkvzip(plan, ["-d", "-c"], host_blob)
            host_reads, host_read_s = host_rwkvzip(["-d", "-c"], arm_blob)
            row = {"file": path.name, "bytes": len(data), "level": level,
                   "compressed": len(host_blob), "same_bytes": host_blob == arm_blob,
                   "aarch64_decodes_x86": arm_reads == data,
                   "x86_decodes_aarch64": host_reads == data,
                   "seconds": {"x86 compress": host_s, "aarch64 compress": arm_s,
                               "aarch64 decompress": arm_read_s,
                               "x86 decompress": host_read_s}}
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    marks = ["same bytes" if row["same_bytes"] else "DIFFERENT BYTES",
             "arm reads x86" if row["aarch64_decodes_x86"] else "ARM CANNOT READ x86",
             "x86 reads arm" if row["x86_decodes_aarch64"] else "x86 CANNOT READ ARM"]
    return f"{row['file']:<12} -{row['level']}  {row['compressed']:>7,}  {', '.join(marks)}"


def markdown(result: dict) -> str:
    v = result["versions"]
    lines = ["# x86-64 and AArch64: the same files", "",
             f"x86-64: Python {v['x86-64'].get('python')}, numba {v['x86-64'].get('numba')}, "
             f"LLVM {v['x86-64'].get('llvm')}; aarch64 (Debian {SUITE} under qemu-user): "
             f"Python {v['aarch64'].get('python')}, numba {v['aarch64'].get('numba')}, "
             f"LLVM {v['aarch64'].get('llvm')}. Selftest on aarch64: "
             f"{result['selftest']} ({result['selftest_s']:.0f} s).", "",
             "| file | bytes | level | compressed | x86-64 → file ← aarch64 | aarch64 decodes "
             "x86-64's | x86-64 decodes aarch64's | compress s x86 / arm |",
             "|---|---:|---:|---:|---|---|---|---:|"]
    for r in result["rows"]:
        s = r["seconds"]
        lines.append(f"| {r['file']} | {r['bytes']:,} | -{r['level']} | {r['compressed']:,} | "
                     f"{'identical' if r['same_bytes'] else 'DIFFERENT'} | "
                     f"{'yes' if r['aarch64_decodes_x86'] else 'NO'} | "
                     f"{'yes' if r['x86_decodes_aarch64'] else 'NO'} | "
                     f"{s['x86 compress']:.1f} / {s['aarch64 compress']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                    help=f"the arm64 root (built once; default {DEFAULT_ROOT})")
    ap.add_argument("--levels", default=",".join(map(str, LEVELS)))
    ap.add_argument("--head", type=int, default=16384,
                    help="only the first HEAD bytes of each file (0: whole files)")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    if not all(1 <= level <= 9 for level in levels):
        ap.error("levels are 1 ... 9")
    files = args.files or [input_path(Path(f), args.corpus) for f in DEFAULT_FILES]
    plan = Plan(args.root, args.dry_run)
    check_tools(plan)
    args.out.mkdir(parents=True, exist_ok=True)
    build_root(plan)
    enable_emulation(plan)
    mounted = mount_system(plan)
    try:
        install(plan, args.out)
        start = time.perf_counter()
        selftest = plan.inside(f"{VENV}/bin/rwkvzip selftest", check=False)
        selftest_s = time.perf_counter() - start
        result = {"versions": versions(plan) if not plan.dry_run else {},
                  "selftest": "passed" if selftest.returncode == 0 else "FAILED",
                  "selftest_s": selftest_s,
                  "rows": compare(plan, files, levels, args.head or None)}
    finally:
        for target in reversed(mounted):
            plan.run(["umount", "--lazy", str(target)], check=False)
    if plan.dry_run:
        return 0
    (args.out / "cross-arch.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "cross-arch.md").write_text(markdown(result))
    print(markdown(result))
    ok = result["selftest"] == "passed" and all(
        r["same_bytes"] and r["aarch64_decodes_x86"] and r["x86_decodes_aarch64"]
        for r in result["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
