"""scripts/exe_corpus.py's smoke test: the manifest's split, the containers it recognises,
what it keeps of a package, and a dry run (fetching needs the network and root)."""

from __future__ import annotations

import json

import pytest

from conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("exe_corpus")


def test_the_shipped_manifest_splits_by_package(script):
    spec = json.loads(script.MANIFEST.read_text())
    script.check_manifest(spec)
    halves = [h for s in script.SOURCES
              for h in spec[s].get("packages", spec[s].get("stdlib", {})).values()]
    assert set(halves) == {"tune", "test"}
    both = json.loads(script.MANIFEST.read_text())
    both["npm"]["packages"]["busybox"] = "tune"  # busybox is a test package of debian's
    with pytest.raises(SystemExit, match="busybox is in both halves"):
        script.check_manifest(both)


def test_containers_are_known_by_their_magic(script):
    assert script.container_of(b"\x7fELF\x02\x01\x01\x00") == "elf"
    assert script.container_of(b"MZ\x90\x00\x03\x00\x00\x00") == "pe"
    assert script.container_of(b"\xcf\xfa\xed\xfe\x0c\x00\x00\x01") == "macho"
    assert script.container_of(b"\xca\xfe\xba\xbe\x00\x00\x00\x02") == "macho"  # universal
    assert script.container_of(b"\xca\xfe\xba\xbe\x00\x00\x00\x37") == "class"  # Java 11
    assert script.container_of(b"\x00asm\x01\x00\x00\x00") == "wasm"
    assert script.container_of(b"#!/bin/sh") is None


def test_a_package_keeps_its_largest_binaries_and_a_slice_of_a_large_one(script, tmp_path):
    spec = json.loads(script.MANIFEST.read_text())
    spec["select"] = {"min_bytes": 100, "files_per_package": 2, "slice_bytes": 1000}
    builder = script.Builder(spec, tmp_path, dry_run=False)
    files = [("usr/bin/big", b"\x7fELF" + bytes(5000)), ("usr/bin/small", b"\x7fELF" + bytes(300)),
             ("usr/bin/tiny", b"\x7fELF" + bytes(10)), ("usr/share/doc", b"text " * 400),
             ("usr/lib/mid", b"\x7fELF" + bytes(900))]
    builder.keep(files, "test", "debian", "pkg", "arm64")
    kept = {e["path"]: e for e in builder.entries}
    assert sorted(kept) == ["test/debian-arm64/pkg/big", "test/debian-arm64/pkg/big.slice2002",
                            "test/debian-arm64/pkg/mid"]
    assert kept["test/debian-arm64/pkg/big.slice2002"]["bytes"] == 1000
    assert all(e["container"] == "elf" and e["half"] == "test" for e in kept.values())
    assert (tmp_path / "test/debian-arm64/pkg/mid").stat().st_size == 904


def test_a_dry_run_prints_the_fetches(script, tmp_path, capsys):
    assert script.main(["--dry-run", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "apt-get download -q busybox:ppc64el" in printed
    assert "--platform win_amd64" in printed and "npm pack --silent sql.js@1.13.0" in printed
    assert "binary-riscv64/Packages.xz" in printed and "libssl3t64:riscv64" in printed
    assert not list(tmp_path.iterdir())
    with pytest.raises(SystemExit):
        script.main(["--dry-run", "--only", "debian,floppies"])


def test_a_packages_index_gives_each_package_its_pool_file(script):
    index = script._packages_index(
        b"Package: bash\nVersion: 5.2\nDescription: shell\n multi-line: text\n"
        b"Filename: pool/main/b/bash/bash_5.2_riscv64.deb\nSHA256: ab12\n\n"
        b"Package: zstd\nFilename: pool/main/libz/zstd.deb\nSHA256: cd34\n\n"
        b"Package: virtual-only\nVersion: 1\n")
    assert index == {"bash": ("pool/main/b/bash/bash_5.2_riscv64.deb", "ab12"),
                     "zstd": ("pool/main/libz/zstd.deb", "cd34")}
