"""A prior's dictionary learnt once per process (coding/snapshot.py): every stream after the
first starts from the kept state, and writes exactly the bytes a fresh start writes, in
compress/decompress, Compressor/Decompressor, the command line over many files and -T
workers; coding never changes the kept state."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

import rwkvzip
from rwkvzip import api, priors
from rwkvzip.coding import snapshot
from rwkvzip.coding.codec import Predictor
from rwkvzip.recipe import DEFAULT_LEVEL, level_recipe

BOILER = b'import os\nfrom dataclasses import dataclass\n\n\n@dataclass\nclass Row:\n'
DICTIONARY = b"".join(BOILER + b"    field_%d: int = %d\n" % (i, i * i) for i in range(120))
FILES = [BOILER + b"".join(b"    field_%d: int = %d\n" % (k * 50 + i, i * (k + 3))
                           for i in range(60)) for k in range(3)]


def level_prior(path, level: int, dictionary: bytes = DICTIONARY) -> priors.Prior:
    """The level's shipped prior with `dictionary` added: what `rwkvzip train` makes."""
    shipped = priors.resolve(level_recipe(level))
    path.write_bytes(priors.prior_bytes(shipped.model, shipped.W, "ab" * 32, {}, dictionary))
    return priors.load_prior(path)


def fresh_start(recipe, prior):
    """api.start_predictor as it was: every stream learns the dictionary itself."""
    predictor = Predictor(recipe, None if prior is None else prior.W)
    if prior is not None and prior.dictionary:
        snapshot.learn_dictionary(predictor, recipe, prior.dictionary)
    return predictor


@pytest.fixture
def default_prior(tmp_path):
    snapshot.forget()
    yield level_prior(tmp_path / "default.prior", DEFAULT_LEVEL)
    snapshot.forget()


def fresh_bytes(monkeypatch, data: bytes, prior, **kw) -> bytes:
    with monkeypatch.context() as m:
        m.setattr(api, "start_predictor", fresh_start)
        return rwkvzip.compress(data, prior=prior, **kw)


def test_many_streams_write_a_fresh_start_bytes_and_leave_the_state_as_kept(
        default_prior, monkeypatch):
    """A, B, A again in one process: each is what a fresh start writes (the kept state is
    never changed by coding), and each decodes with the kept state too."""
    fresh = [fresh_bytes(monkeypatch, f, default_prior) for f in FILES]
    assert len(fresh[0]) < len(fresh_bytes(monkeypatch, FILES[0], None)) - 20  # it helps
    for k in (0, 1, 0, 2, 1):
        blob = rwkvzip.compress(FILES[k], prior=default_prior)
        assert blob == fresh[k]
        assert rwkvzip.decompress(blob, prior=default_prior) == FILES[k]
    kept = snapshot._kept[1]
    assert all(not c.rows.flags.writeable for c in kept.changes)
    # the tables are hundreds of MB; what the dictionary changed in them is kept
    assert 0 < kept.nbytes < api.model_bytes(level_recipe(DEFAULT_LEVEL)) // 10


def test_the_restored_state_is_the_learnt_one_bit_for_bit(default_prior):
    recipe = priors.with_prior(level_recipe(DEFAULT_LEVEL), default_prior)
    learnt = fresh_start(recipe, default_prior)
    for _ in range(2):
        restored = api.start_predictor(recipe, default_prior)
        for a, b in zip(learnt.state_arrays(), restored.state_arrays(), strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_members_and_decompressors_in_turn_decode_with_the_kept_state(default_prior):
    blobs = [rwkvzip.compress(f, prior=default_prior) for f in FILES]
    assert rwkvzip.decompress(b"".join(blobs), prior=default_prior) == b"".join(FILES)
    for blob, data in zip(blobs * 2, FILES * 2, strict=True):
        dec = rwkvzip.Decompressor(prior=default_prior)
        assert dec.decompress(blob[:7]) + dec.decompress(blob[7:]) == data and dec.eof
    comp = rwkvzip.Compressor(prior=default_prior)
    assert comp.compress(FILES[2]) + comp.flush() == blobs[2]


def test_another_prior_or_dictionary_gets_its_own_state(default_prior, tmp_path,
                                                        monkeypatch):
    """One state is kept: a prior with another dictionary (even one made in memory under the
    same digest) is learnt afresh, and switching back learns the first again."""
    other = level_prior(tmp_path / "other.prior", DEFAULT_LEVEL, FILES[1] * 3)
    forged = replace(default_prior, dictionary=FILES[2] * 3)
    expect = {id(p): fresh_bytes(monkeypatch, FILES[0], p)
              for p in (default_prior, other, forged)}
    for p in (default_prior, other, forged, default_prior):
        assert rwkvzip.compress(FILES[0], prior=p) == expect[id(p)]
    assert snapshot._kept[0][2] == default_prior.dictionary


def test_a_learning_network_keeps_its_weights_and_optimizer(tmp_path, monkeypatch):
    """-9's network learns (TBPTT, Adam): its weights, moments and segment buffers are part
    of the kept state (smaller tables keep the test quick)."""
    snapshot.forget()
    card = level_recipe(9)
    assert card.lr > 0 and card.bptt >= 2
    prior = level_prior(tmp_path / "nine.prior", 9, DICTIONARY[:3000])
    recipe = replace(priors.with_prior(card, prior),
                     mix=replace(card.mix, table_bits=12, match_bits=14))
    fresh = {k: [] for k in range(2)}
    with monkeypatch.context() as m:
        m.setattr(api, "start_predictor", fresh_start)
        for k in fresh:
            fresh[k] = rwkvzip.compress(FILES[k][:800], recipe=recipe, prior=prior)
    learnt = fresh_start(recipe, prior)
    assert not np.array_equal(learnt.W, prior.W)  # the dictionary moved the weights
    for k in (0, 1, 0):
        assert rwkvzip.compress(FILES[k][:800], recipe=recipe, prior=prior) == fresh[k]
    snapshot.forget()


def test_threads_workers_learn_it_once_each_and_write_the_same_blocks(default_prior,
                                                                      monkeypatch):
    data = b"".join(FILES) * 15  # three 64 KiB blocks
    expect = fresh_bytes(monkeypatch, data, default_prior, block_size=65536)
    snapshot.forget()  # the workers learn it themselves
    assert rwkvzip.compress(data, prior=default_prior, threads=2, block_size=65536) == expect
    assert rwkvzip.decompress(expect, prior=default_prior, threads=2) == data
    assert not snapshot._kept  # learnt in the workers, not here
    assert rwkvzip.compress(data, prior=default_prior, block_size=65536) == expect


def test_the_command_line_over_many_files_writes_a_fresh_start_bytes(default_prior, tmp_path,
                                                                    monkeypatch):
    """`rwkvzip -D PRIOR A B C A2`, a new process: every file as compressed alone."""
    names = []
    for k, data in enumerate(FILES + FILES[:1]):
        (tmp_path / f"f{k}.py").write_bytes(data)
        names.append(f"f{k}.py")
    prior = tmp_path / "default.prior"
    run = [sys.executable, "-m", "rwkvzip", "-q", "-k", "-D", str(prior)]
    proc = subprocess.run(run + names, cwd=tmp_path, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for name in names:
        data = (tmp_path / name).read_bytes()
        assert (tmp_path / f"{name}.rwkz").read_bytes() == fresh_bytes(monkeypatch, data,
                                                                       default_prior)
        (tmp_path / name).unlink()
    proc = subprocess.run(run + ["-d"] + [f"{n}.rwkz" for n in names], cwd=tmp_path,
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert [(tmp_path / n).read_bytes() for n in names] == FILES + FILES[:1]


class _Arrays:
    def __init__(self, *arrays):
        self.arrays = list(arrays)

    def state_arrays(self):
        return self.arrays


def test_a_snapshot_keeps_bits_not_values():
    """-0.0 against 0.0, and NaN payloads, are changes; unchanged chunks are not kept."""
    big = np.zeros(1 << 15, dtype=np.float32)  # chunked (over WHOLE_BYTES)
    small = np.zeros(5, dtype=np.float64)  # kept whole
    learnt = _Arrays(big.copy(), small.copy(), np.zeros(3, np.uint8))
    learnt.arrays[0][[7, 5000, len(big) - 1]] = (-0.0, np.float32(np.nan), 1.0)
    learnt.arrays[1][2] = -0.0
    kept = snapshot.Snapshot(learnt, _Arrays(big, small, np.zeros(3, np.uint8)))
    assert [c.at for c in kept.changes] == [0, 1]
    assert len(kept.changes[0].chunks) == 3  # 16-float slots
    target = _Arrays(np.zeros_like(big), np.zeros_like(small), np.zeros(3, np.uint8))
    kept.restore(target)
    for a, b in zip(learnt.arrays, target.arrays, strict=True):
        assert a.tobytes() == b.tobytes()
    with pytest.raises(ValueError, match="its own recipe"):
        kept.restore(_Arrays(np.zeros(4, np.float32)))
