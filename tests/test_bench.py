"""scripts/bench.py on a tiny input: every compressor, verified roundtrips, the three outputs
and the README's results table; reports merged by --render; the published figures.

Needs the `bench` extra, which the README's test command (CI) installs; skipped without it."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest

from rwkvzip.recipe import LEVELS

from conftest import ROOT, load_script


@pytest.fixture(scope="module")
def bench():
    """The script (the test command installs the bench extra: missing, the test fails)."""
    yield load_script("bench")
    del sys.modules["bench_script"]


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes((ROOT / "README.md").read_bytes()[:3000])
    return path


README_TEXT = "# x\n\nbefore\n\n<!-- results -->\nold table\n<!-- /results -->\n\nafter\n"


def test_every_compressor_roundtrips_and_the_report_is_written(bench, sample, tmp_path):
    out = tmp_path / "out"
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    assert bench.main(["--levels", "1", "--repeat", "2", "--out", str(out), "--readme",
                       str(readme), str(sample)]) == 0
    report = json.loads((out / "benchmarks.json").read_text())
    assert report["complete"]
    rows = report["results"]
    assert [r["codec"] for r in rows] == ["rwkvzip-1", *bench.DEFAULT_CLASSICAL]
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
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n\n<!-- results -->\n| files | bytes | ")
    assert text.endswith("<!-- /results -->\n\nafter\n") and "old table" not in text
    table = text.split("<!-- results -->\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split(" | ")[2:] == [r["label"] for r in rows[:-1]] + [rows[-1]["label"] + " |"]
    assert table[2].replace("*", "").startswith(
        f"| other files (1) | 3,000 | {rows[0]['bpb']:.3f} | ")
    assert [line.split(" | ")[0] for line in table[3:]] == ["| compress KB/s",
                                                             "| decompress KB/s"]
    assert "paq8px" not in text  # no published figure for this file
    assert f"Written by `python {bench.os.path.relpath(bench.__file__)} --levels 1" in text
    assert "[BENCHMARKS.md](out/BENCHMARKS.md)" in text and "## Results" in md


def test_paq8px_runs_as_a_program_beside_the_others(bench, sample):
    """The --classical paq8px column: ../shared/tools' paq8px v216 from file to file, its
    CPU time counted (a child process's)."""
    data = sample.read_bytes()
    row = bench.measure(bench.CLASSICAL["paq8px"], data, 1)
    assert row["ok"], row["errors"]
    xz = bench.measure(bench.CLASSICAL["xz"], data, 1)
    assert 0 < row["bpb"] < xz["bpb"]  # the strongest context mixer beats xz on text
    assert row["compress_cpu_s"] > 0.1 and row["label"] == "paq8px v216 -8"
    assert "paq8px" not in bench.DEFAULT_CLASSICAL


def test_the_results_table_merges_runs_and_says_what_each_ran(bench, tmp_path):
    """--render: a compressor's rows come from the reports naming it with the same label,
    the later one winning; another label for the same key (a level that ran another card)
    replaces them. The table covers a group only where a compressor ran all its files, names
    failed files, and marks a level's card that is no longer the level's."""
    corpus = tmp_path / "corpus"
    names = ["canterbury/grammar.lsp", "canterbury/xargs.1", "large/bible.txt"]
    for i, name in enumerate(names):
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_bytes(b"some text, some more text %d\n" % i * 40)
    gzip = bench.CLASSICAL["gzip"]
    old = replace(gzip, key="rwkvzip-6", label="rwkvzip -6 (mix-v1)")
    new = replace(gzip, key="rwkvzip-6", label=f"rwkvzip -6 ({LEVELS[6]})")

    def report(codecs, files, command, broken=()):
        rows = []
        for path in files:
            name, group = bench.display_name(corpus / path, corpus)
            for codec in codecs:
                row = {"file": name, **bench.measure(codec, (corpus / path).read_bytes(), 1)}
                if (codec.key, path) in broken:
                    row.update(ok=False, errors=["roundtrip failed: 0 bytes came back"])
                rows.append(row)
        files = [{"name": n, "group": n.split("/")[0], "bytes": (corpus / n).stat().st_size}
                 for n in files]
        return {"command": command, "date": "2026-12-06T00:00:00+00:00",
                "machine": bench.machine_info(), "load_average_start": None,
                "settings": {"repeat": 1, "rwkvzip_repeat": 1, "jobs": 1},
                "codecs": [{"key": c.key, "label": c.label, "call": c.call, "note": c.note}
                           for c in codecs], "files": files, "results": rows,
                "complete": True}

    paths = []
    for i, r in enumerate([report([old, gzip], names, "first"),
                           report([new], names[:2], "second"),
                           report([bench.CLASSICAL["bzip2"]], names, "third",
                                  broken={("bzip2", "canterbury/xargs.1")})]):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(r))
    out, readme = tmp_path / "out", tmp_path / "README.md"
    readme.write_text(README_TEXT)
    assert bench.main(["--render", *map(str, paths), "--out", str(out), "--no-plot",
                       "--readme", str(readme)]) == 0
    merged = json.loads((out / "benchmarks.json").read_text())
    assert [s["command"] for s in merged["sources"]] == ["first", "second", "third"]
    assert [c["label"] for c in merged["codecs"]] == [new.label, "gzip -9", "bzip2 -9"]
    assert {r["file"] for r in merged["results"] if r["codec"] == "rwkvzip-6"} == set(names[:2])
    table = readme.read_text().split("<!-- results -->\n")[1].split("<!-- /results -->")[0]
    rows = {line.split(" | ")[0]: line.split(" | ")[2:] for line in table.splitlines()
            if line.startswith("| ")}
    assert rows["| files"] == [new.label, "gzip -9", "bzip2 -9 |"]
    bzip2_grammar = next(r["compressed"] / r["bytes"] for r in merged["results"]
                         if r["codec"] == "bzip2" and r["file"] == names[0])
    canterbury, large = ([cell.rstrip(" |").strip("*") for cell in rows[group]]
                         for group in ("| canterbury (2)", "| large (1)"))
    assert canterbury[0] == canterbury[1]  # gzip's figure, under -6's key
    assert large[0] == "–"
    note = canterbury[2][-1]  # bzip2's figure is over grammar.lsp alone
    assert note in "¹²³" and canterbury[2][:-1] == f"{8 * bzip2_grammar:.3f}"
    assert f"\n{note} bzip2 -9: over the other files; canterbury/xargs.1 failed" in table
    assert f"{new.label}: speeds over the 2 files it ran (canterbury)" in table
    assert "from 3 benches of 2026-12-06" in table
    # the same level measured with a card it no longer runs says so
    bench.main(["--render", str(paths[0]), "--out", str(out), "--no-plot", "--readme",
                str(readme)])
    assert f"`-6` ran `mix-v1` in this bench; the level now runs `{LEVELS[6]}`" in (
        readme.read_text())
    with pytest.raises(SystemExit):  # a file without the markers is refused before any run
        bench.main(["--render", str(paths[0]), "--out", str(out), "--readme", str(out / "x")])


def test_published_figures_are_the_corpus_readmes(bench):
    files = [{"name": n, "bytes": b} for n, b in bench.PUBLISHED_BYTES.items()]
    for label, total in bench.PUBLISHED_TOTALS.items():
        assert round(bench.published_bpb(label, files), 3) == total
    assert bench.published_bpb("paq8px -8", files[:1]) == 1.740
    assert bench.published_bpb("paq8px -8", [{"name": files[0]["name"], "bytes": 2000}]) is None
    text = (bench.CORPUS / "README.md").read_text()  # ../shared/corpus, as the run command
    for name, size in bench.PUBLISHED_BYTES.items():
        assert f"| {name} | {size:,} |" in text
        row = next(line for line in text.splitlines()
                   if line.startswith(f"| {name.split('/')[1]} |"))
        figures = [float(x) for x in row.strip("| ").split(" | ")[1:]]
        i = list(bench.PUBLISHED_BYTES).index(name)
        assert figures == [bench.PUBLISHED[label][1][i] for label in bench.PUBLISHED]
    totals = " | ".join(f"{bench.PUBLISHED_TOTALS[label]:.3f}" for label in bench.PUBLISHED)
    assert f"| all 11 (total bytes) | {totals} |" in text
    for kbps, _ in bench.PUBLISHED.values():
        assert f"{kbps} KB/s" in text


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
