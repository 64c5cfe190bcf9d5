"""Smoke tests of the measuring scripts that share scripts/harness.py: tune.py,
compare_mixing.py, compare_training.py, roundtrip_corpus.py, compile_times.py, costs.py, on
a small file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, load_script

TEXT = b"the scripts share one harness: time, roundtrip, bits per byte; " * 40


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(TEXT)
    return path


def test_harness_roundtrip_times_and_verifies():
    from rwkvzip.recipe import level_recipe

    harness = load_script("harness")
    r = harness.roundtrip(TEXT, level_recipe(1))
    assert r.ok and r.bytes == len(TEXT) and 0 < r.compressed < len(TEXT)
    assert r.bpb == 8 * r.compressed / len(TEXT) and r.card_bpb < r.bpb
    assert r.compress_kbps > 0 and r.decompress_kbps > 0
    row = r.row(file="x")
    assert row["file"] == "x" and row["compress_kBps"] == r.compress_kbps
    assert harness.corpus_files(harness.CORPUS) or not harness.CORPUS.exists()


def test_tune_compares_candidates_on_a_file(sample, tmp_path, capsys):
    tune = load_script("tune")
    out = tmp_path / "t.json"
    tune.main(["--base", "fast-v2", "--try", "-", "--try", "counts.table_bits=12",
               "--decompress", "--json", str(out), str(sample)])
    results = json.loads(out.read_text())["results"]
    assert [r["spec"] for r in results] == ["-", "counts.table_bits=12"]
    assert results[1]["recipe"]["counts"]["table_bits"] == 12
    for r in results:
        row = r["rows"][0]
        assert row["bytes"] == len(TEXT) and 0 < r["total_bpb"] < 8
        assert row["decompress_cpu_s"] > 0
    assert "| `counts.table_bits=12` |" in capsys.readouterr().out


def test_tune_reads_booleans_and_refuses_other_words():
    tune = load_script("tune")
    from rwkvzip.recipe import preset_by_name

    base = preset_by_name("mix-v70").recipe
    no_exe = "mix.exe=0,mix.delta=false,mix.exe_calls=false,mix.exe_words=false"
    assert tune.candidate(base, "mix.image=false," + no_exe)[0].mix.image is False
    without = tune.candidate(base, no_exe)[0]
    assert without.mix.exe is False
    assert tune.candidate(without, "mix.exe=true")[0].mix.exe is True
    with pytest.raises(SystemExit, match="not a boolean"):
        tune.candidate(base, "mix.image=no")


def test_compare_mixing_writes_a_part_and_tables_it(sample, tmp_path, capsys):
    compare = load_script("compare_mixing")
    out = tmp_path / "cm.json"
    compare.main(["--part", "cm", "--preset", "mix-v70", "--json", str(out), str(sample)])
    part = json.loads(out.read_text())
    assert part["part"] == "cm" and part["rows"][0]["bytes"] == len(TEXT)
    compare.main(["--table", str(out)])
    assert "| sample.txt |" in capsys.readouterr().out


def test_compare_training_measures_a_mode(sample, tmp_path):
    compare = load_script("compare_training")
    out = tmp_path / "tr.json"
    compare.main(["--modes", "head-only", "--hidden", "16", "--set",
                  "arch=gdn,key_heads=1,value_heads=1,key_dim=16,value_dim=16,mlp=32",
                  "--json", str(out), str(sample)])
    (row,) = json.loads(out.read_text())
    assert row["mode"] == "head-only" and 0 < row["bpb"] < 8 and row["compress_kBps"] > 0


def test_roundtrip_corpus_checks_files_and_edge_inputs(sample, tmp_path):
    script = load_script("roundtrip_corpus")
    out = tmp_path / "rt.json"
    assert script.main(["--preset", "fast-v2", "--json", str(out), str(sample)]) == 0
    rows = json.loads(out.read_text())
    assert [r["bytes"] for r in rows] == [len(TEXT), 0, 1] and all(r["ok"] for r in rows)


def test_compile_times_reports_each_kernel_of_a_cold_level(tmp_path):
    """In its own process (it needs an empty kernel cache before rwkvzip loads): level 1,
    the count models, compiles in seconds."""
    out = tmp_path / "ct.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_times.py"),
                           "--level", "1", "--bytes", "300", "--json", str(out)],
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    report = json.loads(out.read_text())
    names = {r["kernel"] for r in report["kernels"]}
    assert "rwkvzip.cm.counts.run" in names
    assert sum(r["compilations"] for r in report["kernels"]) == report["compiled"]
    assert 0 < report["compile_s"] <= report["wall_s"] + 1e-6
    assert b"compilations" in proc.stdout


def test_costs_sum_to_the_payload_and_table_by_phase(sample, tmp_path, capsys):
    from rwkvzip.api import compress
    from rwkvzip.recipe import preset_by_name

    costs = load_script("costs")
    saved = tmp_path / "c.npy"
    costs.main(["--base", "fast-v2", "--period", "4", "--chunk", "1000", "--save", str(saved),
                str(sample)])
    bits = np.load(saved)
    assert bits.shape == (len(TEXT),) and (bits > 0).all()
    packed = compress(TEXT, preset_by_name("fast-v2").recipe)
    assert abs(bits.sum() / 8 - len(packed)) < 0.02 * len(packed) + 40  # header and frames
    out = capsys.readouterr().out
    assert "| position mod 4 |" in out and "| 1 | 1000 |" in out and "| 2 | 520 |" in out
    with pytest.raises(SystemExit, match="unknown preset"):
        costs.main(["--base", "no-such-card", str(sample)])
    with pytest.raises(SystemExit, match="costs.py: .*no-such-file"):
        costs.main(["--base", "fast-v2", "canterbury/no-such-file"])


def test_a_file_argument_may_name_a_corpus_file(sample, tmp_path):
    harness = load_script("harness")
    assert harness.input_path(sample) == sample
    assert harness.input_path(Path("canterbury/sum"), tmp_path) == tmp_path / "canterbury/sum"


def test_costs_of_a_bypassed_frame_are_its_bytes():
    from dataclasses import replace

    from rwkvzip.coding.container import MAX_FRAME
    from rwkvzip.recipe import preset_by_name

    costs = load_script("costs")
    recipe = replace(preset_by_name("fast-v2").recipe, bypass=True)
    noise = np.random.default_rng(1).integers(0, 256, MAX_FRAME, dtype=np.uint8).tobytes()
    bits = costs.byte_costs(noise + TEXT, recipe)
    assert (bits[:MAX_FRAME] == 8).all() and bits[MAX_FRAME:].mean() < 6
