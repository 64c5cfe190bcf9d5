"""scripts/bench.py on a tiny input: every compressor, verified roundtrips, the three outputs.

Skipped unless the `bench` extra is installed (CI installs only `test`)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest

from rwkvzip.recipe import LEVELS

from conftest import ROOT, load_script

BENCH_EXTRA = ("pyppmd", "brotli", "zstandard", "matplotlib")


@pytest.fixture(scope="module")
def bench():
    for name in BENCH_EXTRA:
        pytest.importorskip(name)
    yield load_script("bench")
    del sys.modules["bench_script"]


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes((ROOT / "README.md").read_bytes()[:3000])
    return path


def test_every_compressor_roundtrips_and_the_report_is_written(bench, sample, tmp_path):
    out = tmp_path / "out"
    assert bench.main(["--levels", "1", "--repeat", "2", "--out", str(out), str(sample)]) == 0
    report = json.loads((out / "benchmarks.json").read_text())
    assert report["complete"]
    rows = report["results"]
    assert [r["codec"] for r in rows] == ["rwkvzip-1", *bench.CLASSICAL]
    for r in rows:
        assert r["ok"] and r["errors"] == [], r
        assert r["bytes"] == 3000 and 0 < r["bpb"] < 8
        assert len(r["runs"]["compress_wall_s"]) == r["repeat"]
        assert r["compress_kBps"] > 0 and r["decompress_kBps"] > 0
    assert {r["codec"]: r["repeat"] for r in rows}["rwkvzip-1"] == 1
    assert {r["repeat"] for r in rows[1:]} == {2}
    assert report["pareto"][str(sample)]  # someone is on the front
    summary = {r["codec"]: r for r in report["summary"]}
    assert len(summary) == len(report["summary"]) == len(rows)  # one group: no "all files"
    for r in rows:
        assert summary[r["codec"]]["group"] == "other files"
        assert summary[r["codec"]]["total_bpb"] == pytest.approx(r["bpb"])
    md = (out / "BENCHMARKS.md").read_text()
    assert f"### {sample} (3,000 bytes)" in md and "## Errors" not in md
    for r in rows:
        assert f"| {r['label']} | {r['bpb']:.3f} |" in md
    assert (out / bench.PLOT_PATH).read_bytes().startswith(b"\x89PNG")


def test_a_failed_roundtrip_or_a_raising_compressor_is_an_error(bench, sample, tmp_path,
                                                                monkeypatch):
    def explode(data):
        raise ValueError("no luck")

    gzip, xz = bench.CLASSICAL["gzip"], bench.CLASSICAL["xz"]
    monkeypatch.setitem(bench.CLASSICAL, "gzip", replace(gzip, decompress=lambda b, n: b"x"))
    monkeypatch.setitem(bench.CLASSICAL, "xz", replace(xz, compress=explode))
    out = tmp_path / "out"
    argv = ["--levels", "", "--classical", "gzip,bzip2,xz", "--repeat", "1", "--no-plot",
            "--out", str(out), str(sample)]
    assert bench.main(argv) == 1
    rows = {r["codec"]: r for r in json.loads((out / "benchmarks.json").read_text())["results"]}
    assert rows["gzip"]["errors"] == ["roundtrip failed: 1 bytes came back (a wrong length)"]
    assert rows["xz"]["errors"] == ["ValueError: no luck"] and rows["xz"]["bpb"] is None
    assert rows["bzip2"]["ok"]
    md = (out / "BENCHMARKS.md").read_text()
    assert "## Errors" in md and "| gzip -9 | **error** |" in md
    assert not (out / bench.PLOT_PATH).exists()


def test_default_levels_are_one_per_preset_card(bench):
    levels, notes = bench.distinct_levels()
    assert notes == []
    assert sorted(LEVELS[level] for level in levels) == sorted(set(LEVELS.values()))
    for level in levels:
        assert level == min(k for k, card in LEVELS.items() if card == LEVELS[level])
    twins = [(a, b) for a in LEVELS for b in LEVELS if a < b and LEVELS[a] == LEVELS[b]]
    if twins:
        a, b = twins[0]
        assert bench.distinct_levels([a, b]) == ([a], [
            f"level {b} is the same card as level {a} ({LEVELS[a]}): not run twice"])


def test_pareto_front(bench):
    # (speed, bpb): the fast one and the small one are on it; slower-and-larger ones are not
    points = [(100.0, 3.0), (10.0, 2.0), (50.0, 3.5), (10.0, 2.5), (1.0, 2.0), (None, 1.0)]
    assert bench.pareto_front(points) == {0, 1}
