"""Golden vectors and `rwkvzip selftest`: every preset card and architecture is pinned, the
self-test says plainly when a machine disagrees, and adding vectors never rewrites one."""

import io
import json
import shutil
import subprocess
import sys

import pytest

from rwkvzip import api, selftest
from rwkvzip.recipe import ARCHS, preset_cards

from conftest import load_script


def test_every_preset_card_and_architecture_has_a_golden_vector():
    data, vectors = selftest.load()
    todo = [name for name, _, _, _ in selftest.missing(vectors)]
    assert todo == [], f"no golden vector for {todo}: run `python scripts/make_golden.py`"
    released = {c.name for c in preset_cards().values() if not c.draft}
    drafts = {c.name for c in preset_cards().values() if c.draft}
    assert {v.preset for v in vectors} >= released
    assert not drafts & {v.preset for v in vectors}  # a draft gets its vector at release
    assert {v.recipe.arch for v in vectors} == set(ARCHS)
    assert 1000 <= len(data) <= 2048
    for v in vectors:  # shipped beside the manifest, inside the package
        assert (selftest.golden_dir() / v.blob_name()).is_file()


def test_the_cpu_target_probe_runs_every_kernel_a_released_card_runs():
    """tests/test_targets.py codes with the probe's recipes: among them, every entry point
    (block kernel) a golden vector's card codes with."""
    from rwkvzip.cm import counts
    from rwkvzip.coding import codec

    from target_probe import RECIPES

    def kernel(recipe):
        return counts.run if recipe.counts is not None else codec.entry_point(recipe)

    released = {kernel(v.recipe) for v in selftest.load()[1]}
    probed = {kernel(recipe) for recipe in RECIPES.values()}
    assert released - probed == set(), sorted(k.__name__ for k in released - probed)


def test_selftest_command_passes_on_this_machine():
    proc = subprocess.run([sys.executable, "-m", "rwkvzip", "selftest"], capture_output=True,
                          timeout=600)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out + proc.stderr.decode()
    assert "selftest passed: this machine writes and reads the same files" in out
    assert all(v.name in out for v in selftest.load()[1])


def test_a_vector_with_other_bytes_fails_plainly(tmp_path):
    golden = tmp_path / "golden"
    shutil.copytree(selftest.golden_dir(), golden)
    manifest = json.loads((golden / selftest.MANIFEST).read_text())
    manifest["vectors"] = manifest["vectors"][:1]  # the fastest one is enough here
    manifest["vectors"][0]["sha256"] = "0" * 64
    (golden / selftest.MANIFEST).write_text(json.dumps(manifest))
    out = io.StringIO()
    assert not selftest.run(directory=golden, out=out)
    text = out.getvalue()
    assert "selftest FAILED" in text and "compresses to different bytes" in text
    assert "does NOT produce or read the same files" in text


def test_reading_differently_or_a_damaged_file_fails(tmp_path, monkeypatch):
    data, vectors = selftest.load()
    vector = vectors[0]
    monkeypatch.setattr(selftest.api, "compress", lambda d, recipe: _blob(vector))
    monkeypatch.setattr(selftest.api, "decompress", lambda b: data[:-1])
    assert selftest.check(vector, data) == ["decompresses the shipped file to different data"]
    golden = tmp_path / "golden"
    shutil.copytree(selftest.golden_dir(), golden)
    (golden / vector.blob_name()).write_bytes(b"RWKZ broken")
    assert selftest.check(vector, data, golden) == [
        f"shipped file {vector.blob_name()} is damaged"]


def _blob(vector):
    return (selftest.golden_dir() / vector.blob_name()).read_bytes()


def test_make_golden_adds_what_is_missing_and_never_rewrites(tmp_path, monkeypatch, capsys):
    make_golden = load_script("make_golden")
    golden = tmp_path / "golden"
    shutil.copytree(selftest.golden_dir(), golden)
    manifest = json.loads((golden / selftest.MANIFEST).read_text())
    kept = manifest["vectors"][1:]
    kept[0]["sha256"] = "f" * 64  # stands for a vector that no longer matches
    manifest["vectors"] = kept
    (golden / selftest.MANIFEST).write_text(json.dumps(manifest))
    dropped = selftest.load()[1][0]
    (golden / dropped.blob_name()).unlink()
    monkeypatch.setattr(sys, "argv", ["make_golden.py", "--dir", str(golden)])
    make_golden.main()
    assert capsys.readouterr().out.strip() == f"added: {dropped.name}"
    after = json.loads((golden / selftest.MANIFEST).read_text())["vectors"]
    assert after[:len(kept)] == kept  # untouched, even the one that no longer matches
    assert after[-1]["name"] == dropped.name and after[-1]["sha256"] == dropped.sha256
    assert (golden / dropped.blob_name()).read_bytes() == _blob(dropped)
    make_golden.main()
    assert "every card and architecture has a vector" in capsys.readouterr().out
    assert json.loads((golden / selftest.MANIFEST).read_text())["vectors"] == after
    # a file on disk that the manifest does not list is never overwritten
    after.pop()
    (golden / selftest.MANIFEST).write_text(json.dumps({**manifest, "vectors": after}))
    with pytest.raises(FileExistsError, match="not in"):
        make_golden.main()


def test_golden_input_is_coded_by_every_vector_not_stored():
    data, vectors = selftest.load()
    for v in vectors:
        assert not selftest._stores_raw(_blob(v)), v.name
        assert len(_blob(v)) < len(selftest.load_input(selftest.golden_dir(), v.input))
    assert api.decompress(_blob(vectors[-1])) == data  # net-rwkv7 codes the plain input
