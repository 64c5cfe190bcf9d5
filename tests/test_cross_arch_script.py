"""scripts/cross_arch.py's smoke test: its arguments and the plan of a dry run (the run
itself needs root and minutes of emulation: docs/DETERMINISM.md has its results)."""

from __future__ import annotations

import pytest

from conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("cross_arch")


def test_a_dry_run_prints_every_step_and_runs_nothing(script, tmp_path, capsys):
    root = tmp_path / "arm64"
    assert script.main(["--dry-run", "--root", str(root), "--levels", "1,6",
                        "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert f"debootstrap --arch=arm64 --variant=minbase --include={script.PACKAGES} " \
           f"bookworm {root}" in printed
    assert "update-binfmts --enable qemu-aarch64" in printed
    assert f"chroot {root} /bin/sh -c 'python3 -m venv /opt/venv && " in printed
    assert "pip install --no-cache-dir /opt/rwkvzip" in printed
    assert "/opt/venv/bin/rwkvzip selftest" in printed
    assert printed.count("+ compare ") == 3 and "at levels [1, 6]" in printed
    assert not root.exists() and not (tmp_path / "out" / "cross-arch.json").exists()


def test_bad_arguments_are_refused(script):
    with pytest.raises(SystemExit) as exc:
        script.main(["--dry-run", "--levels", "0,10"])
    assert exc.value.code == 2
