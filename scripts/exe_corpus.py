"""Build the executables corpus from installable packages, split by package into a tuning
half and a test half (the data is never committed: this script and its manifest rebuild it).

    python scripts/exe_corpus.py [--manifest scripts/exe_corpus.json] [--out DIR]
        [--only debian,debian_pool,debian_java,pypi,npm,pyc] [--dry-run]

Sources (scripts/exe_corpus.json names every package, its half and its version or suite):
  debian       `apt-get download PKG:ARCH` for each architecture (dpkg learns the foreign
               architectures and apt updates its lists once; needs root), `dpkg-deb -x`;
               ELF programs and libraries
  debian_pool  the same packages for architectures the host's suite lacks (riscv64 is in
               trixie, not bookworm): the suite's Packages index is read from the mirror,
               each .deb fetched from its pool and checked against its SHA-256, `dpkg-deb -x`
               (no root, no change to apt); `renames` maps a package to its name there
  debian_java  a Debian Java package's jars; their .class files, joined per jar
  pypi         `pip download --platform P --only-binary=:all: --no-deps` for Windows and
               macOS; the wheels' PE (.pyd) and Mach-O (.so) files
  npm          `npm pack`; the packages' WebAssembly modules
  pyc          modules of Python's standard library compiled to .pyc, joined per package
From each package and architecture the largest files of a known container are kept (ELF,
PE, Mach-O, wasm, class, pyc by their magic bytes; `select` in the manifest: at least
min_bytes, files_per_package of them). A file larger than slice_bytes also gives one slice of
that size from its middle. Everything lands in OUT/{tune,test}/KIND-ARCH/PACKAGE/NAME, and
OUT/manifest.json lists each file: half, source, package, architecture, container, bytes,
SHA-256 (OUT: ../exe-corpus beside the repository; kept out of git by being outside it).
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import lzma
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

from harness import ROOT

MANIFEST = Path(__file__).with_name("exe_corpus.json")
DEFAULT_OUT = ROOT.parent / "exe-corpus"
HALVES = ("tune", "test")
SOURCES = ("debian", "debian_pool", "debian_java", "pypi", "npm", "pyc")


def container_of(head: bytes) -> str | None:
    """The container a file's first bytes name (None: not one the corpus keeps)."""
    if head[:4] == b"\x7fELF":
        return "elf"
    if head[:2] == b"MZ":
        return "pe"
    if head[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf",
                    b"\xfe\xed\xfa\xce"):
        return "macho"
    if head[:4] == b"\xca\xfe\xba\xbe":  # a Mach-O universal binary, or a Java class
        return "class" if int.from_bytes(head[4:8], "big") >= 45 else "macho"
    if head[:4] == b"\x00asm":
        return "wasm"
    return None


class Builder:
    """Fetches and extracts; in a dry run prints the commands it would run."""

    def __init__(self, spec: dict, out: Path, dry_run: bool):
        self.spec, self.out, self.dry_run = spec, out, dry_run
        self.select = spec["select"]
        self.entries: list[dict] = []

    def run(self, argv: list[str], cwd: Path | None = None, check: bool = True) -> None:
        if self.dry_run:
            print("+", " ".join(argv))
            return
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        if proc.returncode and check:
            raise SystemExit(f"exe_corpus: {' '.join(argv)} failed: {proc.stderr[-2000:]}")
        if proc.returncode:
            print(f"exe_corpus: warning: {' '.join(argv)}: {proc.stderr.strip()[-500:]}",
                  file=sys.stderr)

    def keep(self, files: list[tuple[str, bytes]], half: str, source: str, package: str,
             arch: str) -> None:
        """The largest files of a known container (and a slice of each large one)."""
        typed = [(name, data, container_of(data[:8])) for name, data in files
                 if len(data) >= self.select["min_bytes"]]
        typed = sorted((t for t in typed if t[2]), key=lambda t: -len(t[1]))
        folder = self.out / half / f"{source}-{arch}" / package.replace("/", "_")
        for name, data, container in typed[:self.select["files_per_package"]]:
            parts = [(Path(name).name, data)]
            size = self.select["slice_bytes"]
            if len(data) > 2 * size:
                start = (len(data) - size) // 2
                parts.append((f"{Path(name).name}.slice{start}", data[start:start + size]))
            for stored, blob in parts:
                path = folder / stored
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(blob)
                self.entries.append({
                    "path": str(path.relative_to(self.out)), "half": half, "source": source,
                    "package": package, "arch": arch, "container": container,
                    "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest(),
                    "slice": stored != Path(name).name})

    # -- sources -------------------------------------------------------------------------------

    def debian(self, work: Path) -> None:
        spec = self.spec["debian"]
        for arch in spec["archs"]:
            self.run(["dpkg", "--add-architecture", arch])
        # a list that fails (a security mirror mid-sync) is a warning: the packages come
        # from the suite's main lists, and a download that then fails is an error
        self.run(["apt-get", "update", "-q"], check=False)
        for package, half in spec["packages"].items():
            for arch in spec["archs"]:
                where = work / f"{package}-{arch}"
                where.mkdir(parents=True, exist_ok=True)
                self.run(["apt-get", "download", "-q", f"{package}:{arch}"], cwd=where)
                if self.dry_run:
                    continue
                for deb in where.glob("*.deb"):
                    self.run(["dpkg-deb", "-x", str(deb), str(where / "x")])
                self.keep(list(_files_under(where / "x")), half, "debian", package, arch)

    def debian_pool(self, work: Path) -> None:
        spec, packages = self.spec["debian_pool"], self.spec["debian"]["packages"]
        for arch in spec["archs"]:
            index_url = f"{spec['mirror']}/dists/{spec['suite']}/main/binary-{arch}/Packages.xz"
            if self.dry_run:
                print(f"+ read {index_url}")
                index = {}
            else:
                index = _packages_index(lzma.decompress(_fetch(index_url)))
            for package, half in packages.items():
                name = spec.get("renames", {}).get(package, package)
                if self.dry_run:
                    print(f"+ fetch {name}:{arch} from {spec['mirror']}/pool, dpkg-deb -x")
                    continue
                if name not in index:
                    raise SystemExit(f"exe_corpus: {name} is not in {spec['suite']} {arch}")
                filename, sha256 = index[name]
                blob = _fetch(f"{spec['mirror']}/{filename}")
                if hashlib.sha256(blob).hexdigest() != sha256:
                    raise SystemExit(f"exe_corpus: {filename}: SHA-256 differs from the index")
                where = work / f"{package}-{arch}"
                where.mkdir(parents=True, exist_ok=True)
                deb = where / Path(filename).name
                deb.write_bytes(blob)
                self.run(["dpkg-deb", "-x", str(deb), str(where / "x")])
                self.keep(list(_files_under(where / "x")), half, "debian", package, arch)

    def debian_java(self, work: Path) -> None:
        for package, half in self.spec["debian_java"]["packages"].items():
            where = work / package
            where.mkdir(parents=True, exist_ok=True)
            self.run(["apt-get", "download", "-q", package], cwd=where)
            if self.dry_run:
                continue
            for deb in where.glob("*.deb"):
                self.run(["dpkg-deb", "-x", str(deb), str(where / "x")])
            joined = []
            for jar in sorted((where / "x").rglob("*.jar")):
                if jar.is_symlink():
                    continue
                with zipfile.ZipFile(jar) as z:
                    classes = b"".join(z.read(n) for n in sorted(z.namelist())
                                       if n.endswith(".class"))
                if classes:
                    joined.append((f"{jar.stem}.classes", classes))
            self.keep(joined, half, "debian_java", package, "jvm")

    def pypi(self, work: Path) -> None:
        spec = self.spec["pypi"]
        for package, half in spec["packages"].items():
            for platform in spec["platforms"]:
                where = work / f"{package}-{platform}"
                self.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                          "--only-binary=:all:", "--platform", platform, "--python-version",
                          spec["python"], "-d", str(where), package])
                if self.dry_run:
                    continue
                files = []
                for wheel in where.glob("*.whl"):
                    with zipfile.ZipFile(wheel) as z:
                        files += [(n, z.read(n)) for n in z.namelist()
                                  if n.endswith((".pyd", ".so", ".dll", ".dylib"))]
                self.keep(files, half, "pypi", package.split("==")[0], platform)

    def npm(self, work: Path) -> None:
        for package, half in self.spec["npm"]["packages"].items():
            where = work / package.replace("/", "_")
            where.mkdir(parents=True, exist_ok=True)
            self.run(["npm", "pack", "--silent", package], cwd=where)
            if self.dry_run:
                continue
            files = []
            for tgz in where.glob("*.tgz"):
                with tarfile.open(tgz) as t:
                    files += [(m.name, t.extractfile(m).read()) for m in t.getmembers()
                              if m.isfile() and m.name.endswith(".wasm")]
            self.keep(files, half, "npm", package.split("@")[0] or package, "wasm")

    def pyc(self, work: Path) -> None:
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        for package, half in self.spec["pyc"]["stdlib"].items():
            if self.dry_run:
                print(f"+ compile {stdlib / package} to .pyc")
                continue
            target = work / package
            shutil.copytree(stdlib / package, target, ignore=shutil.ignore_patterns(
                "__pycache__", "test*"))
            compileall.compile_dir(str(target), quiet=1, legacy=True)
            joined = b"".join(p.read_bytes() for p in sorted(target.rglob("*.pyc")))
            self._keep_pyc(joined, half, package)  # (a .pyc's magic is its version's)

    def _keep_pyc(self, joined: bytes, half: str, package: str) -> None:
        folder = self.out / half / "pyc" / package
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{package}.pyc-joined"
        path.write_bytes(joined)
        self.entries.append({"path": str(path.relative_to(self.out)), "half": half,
                             "source": "pyc", "package": package,
                             "arch": f"cpython{sys.version_info[0]}{sys.version_info[1]}",
                             "container": "pyc", "bytes": len(joined),
                             "sha256": hashlib.sha256(joined).hexdigest(), "slice": False})


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def _packages_index(text: bytes) -> dict[str, tuple[str, str]]:
    """A Debian Packages index: each package's pool file and its SHA-256."""
    index = {}
    for stanza in text.decode("utf-8", "replace").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if "Package" in fields and "Filename" in fields:
            index[fields["Package"]] = (fields["Filename"], fields["SHA256"])
    return index


def _files_under(root: Path) -> Iterator[tuple[str, bytes]]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield str(path.relative_to(root)), path.read_bytes()


def check_manifest(spec: dict) -> None:
    """Every package in one half, and no package in both."""
    seen: dict[str, str] = {}
    for source in SOURCES:
        section = spec.get(source, {})
        packages = section.get("packages", section.get("stdlib", {}))
        for package, half in packages.items():
            if half not in HALVES:
                raise SystemExit(f"exe_corpus: {source} {package}: half must be tune or test")
            name = package.split("==")[0].split("@")[0] or package
            if seen.setdefault(name, half) != half:
                raise SystemExit(f"exe_corpus: {name} is in both halves")


def summary(entries: list[dict]) -> str:
    rows: dict[tuple, list[int]] = {}
    for e in entries:
        key = (e["half"], e["container"], e["arch"])
        rows.setdefault(key, [0, 0])
        rows[key][0] += 1
        rows[key][1] += e["bytes"]
    lines = ["| half | container | architecture | files | bytes |", "|---|---|---|---:|---:|"]
    lines += [f"| {h} | {c} | {a} | {n} | {b:,} |" for (h, c, a), (n, b) in sorted(rows.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", default=",".join(SOURCES),
                    help=f"sources to build, comma-separated ({', '.join(SOURCES)})")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, fetch nothing")
    args = ap.parse_args(argv)
    spec = json.loads(args.manifest.read_text())
    check_manifest(spec)
    only = args.only.split(",")
    if unknown := set(only) - set(SOURCES):
        ap.error(f"unknown sources: {', '.join(sorted(unknown))}")
    builder = Builder(spec, args.out, args.dry_run)
    with tempfile.TemporaryDirectory() as tmp:
        for source in only:
            getattr(builder, source)(Path(tmp) / source)
    if args.dry_run:
        return 0
    listing = args.out / "manifest.json"
    old = json.loads(listing.read_text())["files"] if listing.exists() else []
    kept = {e["path"]: e for e in old if e["source"] not in only}
    kept.update({e["path"]: e for e in builder.entries})
    files = sorted(kept.values(), key=lambda e: e["path"])
    listing.write_text(json.dumps({"manifest": spec, "files": files}, indent=1) + "\n")
    (args.out / "summary.md").write_text(summary(files))
    print(summary(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
