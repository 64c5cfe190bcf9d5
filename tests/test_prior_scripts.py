"""Smoke tests of the prior scripts: pretrain.py (train, resume, export with its check) on a
tiny corpus, and train_check.py on a little generated JSON (no downloads)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rwkvzip import corpus, priors

from conftest import load_script

GDN_TINY = "hidden=16,layers=1,key_heads=1,value_heads=1,key_dim=16,value_dim=16,mlp=32"


@pytest.fixture(scope="module")
def pretrain():
    return load_script("pretrain")


def tiny_corpus(path):
    rng = np.random.default_rng(1)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"the", b"of", b"and", b"prior"]
    docs = []
    for i in range(24):
        text = b" ".join(words[int(k)] for k in rng.integers(0, len(words), 400)) + b"\n"
        docs.append(corpus.Document("words", f"doc{i}", text, "val" if i % 6 == 0 else "train"))
    return corpus.save(docs, path, [{"name": "words", "bytes": sum(len(d.data) for d in docs)}])


def test_pretrain_trains_resumes_and_exports(pretrain, tmp_path, capsys):
    man = tiny_corpus(tmp_path / "corpus")
    work = tmp_path / "work"
    args = ["--corpus", str(tmp_path / "corpus"), "--name", "t", "--work", str(work)]
    pretrain.main(["train", *args, "--arch", "gdn", "--set", GDN_TINY, "--epochs", "1",
                   "--average", "20000"])
    info = json.loads((work / "t.json").read_text())
    assert info["manifest"] == man["digest"] and info["bytes_trained"] == man["train_bytes"]
    pretrain.main(["train", *args, "--epochs", "2"])  # resumes: one more epoch
    assert "resumed at epoch 1" in capsys.readouterr().out
    run_log = (work / "t.log").read_text()  # both runs' lines, appended
    assert run_log.count("; validation {") == 2 and "resumed at epoch 1" in run_log
    out = tmp_path / "t.safetensors"
    pretrain.main(["export", *args, "-o", str(out)])
    p = priors.load_prior(out)
    assert p.metadata[priors.KEY_MANIFEST] == man["digest"]
    assert p.training["bytes_trained"] == 2 * man["train_bytes"]
    assert "reproduce" not in capsys.readouterr().out


def test_pretrain_corpus_filters(pretrain):
    lines = {b"x" * 50}
    assert pretrain.overlaps_eval(b"x" * 50 + b"\nshort\n", lines)
    assert not pretrain.overlaps_eval(b"y" * 50 + b"\n", lines)
    assert corpus.is_skipped_name("LICENSE.txt") and corpus.is_skipped_name("COPYING")
    assert not corpus.is_skipped_name("licensing.md") and not corpus.is_skipped_name("main.py")


def test_train_check_on_json_lines(tmp_path, capsys):
    check = load_script("train_check")
    check.main(["--kinds", "jsonl", "--time", "20", "--epochs", "1", "--sample-bytes", "30000",
                "--held-scale", "0.02", "--dict-size", "4096", "--fields", "--out", str(tmp_path),
                "--json", str(tmp_path / "r.json")])
    report = json.loads((tmp_path / "r.json").read_text())
    assert report[0]["kind"] == "jsonl" and len(report[0]["rows"]) == 3
    assert all(r["trained"] > 0 and r["shipped"] > 0 and r["weights_only"] > 0
               for r in report[0]["rows"])
    assert 0 < report[0]["dictionary_bytes"] <= 4096
    assert all(0 < r["entropy"] < min(r["trained"], r["shipped"]) for r in report[0]["rows"])
    fields = report[0]["fields"]
    assert fields["coded"].keys() >= {"ts", "user", "latency_ms", "syntax"}
    assert all(bits > 0 for bits in fields["coded"].values())
    out = capsys.readouterr().out
    assert "total:" in out and "the generator's entropy:" in out and "latency_ms:" in out


def test_the_json_generators_entropy_matches_its_draws():
    """jsonl_field_bits against plug-in entropies of 400,000 draws of each field (a path's
    {id}, a uniform draw of ~10^5 values, too many to count: log2 of their number), and
    jsonl_entropy_bits as their sum."""
    check = load_script("train_check")
    rng = np.random.default_rng(1)
    n = 400_000

    def plug_in(values) -> float:
        _, counts = np.unique(values, return_counts=True)
        p = counts / counts.sum()
        return float(-(p * np.log2(p)).sum())

    events = np.array(check.EVENTS)[rng.integers(len(check.EVENTS), size=n)]
    paths = rng.integers(len(check.PATHS), size=n)
    statuses = rng.choice(check.STATUSES, size=n)  # drawn when the event is not an error
    msgs = rng.integers(len(check.MSGS), size=n)  # drawn for errors and retries
    not_error, with_msg = events != "error", np.isin(events, ["error", "retry"])
    sampled = {
        "ts": plug_in(rng.exponential(check.GAP_SCALE, size=n).astype(int)),
        "event": plug_in(events),
        "user": plug_in(rng.zipf(check.USER_ZIPF, size=n) % check.USERS),
        "path": plug_in(paths) + np.mean(["{id}" in check.PATHS[i] for i in paths])
        * math.log2(check.ID_HIGH - check.ID_LOW),
        "status": plug_in(statuses[not_error]) * np.mean(not_error),
        "latency_ms": plug_in(np.round(rng.lognormal(check.LATENCY_MU, check.LATENCY_SIGMA,
                                                     size=n), 1)),
        "msg": plug_in(msgs[with_msg]) * np.mean(with_msg),
    }
    exact = check.jsonl_field_bits()
    assert exact.keys() == sampled.keys()
    for field, bits in exact.items():
        assert abs(sampled[field] - bits) < 0.005 * bits + 0.01, (field, sampled[field], bits)
    per_record = sum(exact.values())
    assert check.jsonl_entropy_bits(10) == pytest.approx(
        10 * per_record + math.log2(check.START_SPAN))
