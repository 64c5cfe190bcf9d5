"""The fast predictor (recipe field `counts`): count models of several orders, a word and a
match model, linearly mixed. Roundtrips, determinism, a valid distribution, the recipe's
JSON and validation, fixed memory, and that it predicts text."""

import json
from dataclasses import replace

import numpy as np
import pytest

from rwkvzip import api
from rwkvzip.cm import counts
from rwkvzip.cm.fastcm import CountArrays, CountsConfig
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import coder, container
from rwkvzip.coding.codec import CountsPredictor, Predictor
from rwkvzip.recipe import PROB_FLOOR, Recipe, RecipeError, preset_by_name, preset_id_of

from conftest import CODE_SAMPLE

SMALL = CountsConfig(orders=(0, 1, 2, 3, 4), table_bits=10, match_bits=12)
RECIPE = Recipe(counts=SMALL)
TEXT = (b"Count models remember what followed each context; the mixer learns whom to trust. "
        * 6 + bytes(range(32, 127)) + b"Whom to trust is learned online, byte by byte.\n" * 5)


def rows_of(cfg: CountsConfig, data: bytes) -> np.ndarray:
    """The distribution the coder gets for every byte of data."""
    a = CountArrays(cfg, PROB_FLOOR)
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    probs = np.empty((len(buf), 256), dtype=np.float32)
    counts.run(buf, probs, coder.RECORD, a.C, a.S, a.W, a.HB, coder.no_decoder())
    return probs


def code_bits(cfg: CountsConfig, data: bytes) -> float:
    probs = rows_of(cfg, data).astype(np.float64)
    sym = np.frombuffer(data, dtype=np.uint8)
    return float(-np.log2(probs[np.arange(len(sym)), sym] / probs.sum(1)).sum())


@pytest.mark.parametrize("data", [b"", b"x", TEXT, bytes(np.random.default_rng(0).integers(
    0, 256, 3000, dtype=np.uint8))], ids=["empty", "one", "text", "random"])
def test_roundtrip_and_deterministic(data):
    blob = api.compress(data, RECIPE)
    assert api.decompress(blob) == data
    assert api.compress(data, RECIPE) == blob


def test_stored_frames_advance_the_model_too():
    """A random frame is stored uncoded (learn_frame); the text after it must still decode."""
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, container.MAX_FRAME, dtype=np.uint8).tobytes() + TEXT * 30
    blob = api.compress(data, RECIPE)
    assert api.decompress(blob) == data
    assert len(blob) < container.MAX_FRAME + len(TEXT) * 3  # the text was coded, not stored


def test_predictor_of_a_counts_recipe_and_its_first_prediction():
    p = Predictor(RECIPE)
    assert isinstance(p, CountsPredictor)
    assert p.probs.dtype == np.float32 and p.probs.flags.c_contiguous
    np.testing.assert_allclose(p.probs, 1.0 / 256, rtol=1e-5)  # nothing seen: uniform


def test_distribution_is_valid_and_the_same_twice():
    data = TEXT + bytes(range(256)) + TEXT
    probs = rows_of(SMALL, data)
    assert np.isfinite(probs).all() and probs.min() >= PROB_FLOOR
    np.testing.assert_allclose(probs.astype(np.float64).sum(1), 1.0, atol=1e-4)
    assert np.array_equal(probs, rows_of(SMALL, data))  # bit for bit


def test_beats_order_0_on_text_and_the_match_model_codes_a_repeat():
    text = CODE_SAMPLE.read_bytes()[:20_000]
    seen, order0 = np.ones(256), 0.0  # an adaptive order-0 model (Laplace's rule)
    for byte in text:
        order0 -= np.log2(seen[byte] / seen.sum())
        seen[byte] += 1
    assert code_bits(SMALL, text) < 0.75 * order0
    block = np.random.default_rng(2).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    probs = rows_of(SMALL, block * 2).astype(np.float64)
    sym = np.frombuffer(block * 2, dtype=np.uint8)
    bits = -np.log2(probs[np.arange(len(sym)), sym])
    assert bits[:3000].mean() > 7.5 and bits[3100:].mean() < 0.5


def test_recipe_json_roundtrip_and_older_recipes_keep_their_encoding():
    assert Recipe.from_json(RECIPE.to_json()) == RECIPE
    d = json.loads(RECIPE.to_json())
    assert d["counts"]["orders"] == [0, 1, 2, 3, 4] and "mix" not in d
    assert b"counts" not in Recipe().to_json()  # absent field: the encoding of before
    card = preset_by_name("fast-v2")
    assert preset_id_of(card.recipe) == card.id and card.recipe.counts is not None


@pytest.mark.parametrize("change, message", [
    ({"orders": [2, 1]}, "ascending"),
    ({"orders": []}, "at least one"),
    ({"orders": [0, 8]}, "0..7"),
    ({"orders": [0, 1.5]}, "list of integers"),
    ({"table_bits": 7}, "table_bits"),
    ({"limit": 1}, "limit"),
    ({"match_bits": 30}, "match_bits"),
    ({"match_min": 1}, "match_min"),
    ({"lr": 0.0}, "lr"),
    ({"word": 1}, "wrong type"),
    ({"extra": 1}, "unknown"),
])
def test_invalid_counts_are_refused(change, message):
    d = json.loads(RECIPE.to_json())
    d["counts"].update(change)
    with pytest.raises(RecipeError, match=message):
        Recipe.from_dict(d)


def test_counts_excludes_mix_and_a_missing_field_is_refused():
    with pytest.raises(RecipeError, match="not both"):
        replace(RECIPE, mix=MixConfig()).validate()
    d = json.loads(RECIPE.to_json())
    del d["counts"]["lr"]
    with pytest.raises(RecipeError, match="missing"):
        Recipe.from_dict(d)


def test_memory_is_fixed_by_the_recipe_and_counted():
    p = Predictor(RECIPE)
    a = p.arrays
    size = a.C.nbytes + a.S.nbytes + a.W.nbytes + a.HB.nbytes
    p.encode_frame(np.random.default_rng(3).integers(0, 256, 20_000, np.uint8).tobytes())
    assert a.C.nbytes + a.S.nbytes + a.W.nbytes + a.HB.nbytes == size
    assert api.model_bytes(RECIPE) == SMALL.memory_bytes() == size
    huge = replace(RECIPE, counts=replace(SMALL, orders=(0, 1, 2, 3, 4, 5, 6, 7),
                                          table_bits=22))
    with pytest.raises(RecipeError, match="memory"):
        api.check_model_size(huge)


def test_a_damaged_file_is_an_error_not_a_crash():
    blob = bytearray(api.compress(TEXT * 4, RECIPE))
    for at in (len(blob) // 2, len(blob) - 12):
        bad = bytearray(blob)
        bad[at] ^= 0x55
        with pytest.raises(ValueError):  # FormatError or CoderError: the frame is refused
            api.decompress(bytes(bad))
