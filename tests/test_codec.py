"""Roundtrips through the codec and the online learning of the output layer."""

import io
import os

import numpy as np
import pytest

from rwkvzip import api
from rwkvzip.coding import container
from rwkvzip.coding.codec import Predictor
from rwkvzip.net import common
from rwkvzip.recipe import PROB_FLOOR, Recipe

from conftest import CODE_SAMPLE, MIXED_SAMPLE

SAMPLES = {"mixed": MIXED_SAMPLE.read_bytes(), "code": CODE_SAMPLE.read_bytes()[:12000],
           "one-byte-repeated": b"a"}


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_roundtrip_default_recipe(name):
    data = SAMPLES[name]
    assert api.decompress(api.compress(data)) == data


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff", bytes(range(256)) * 3],
                         ids=["empty", "zero", "ff", "all-bytes"])
def test_edge_inputs_roundtrip(data, tiny_recipe):
    assert api.decompress(api.compress(data, tiny_recipe)) == data


def test_random_70k_roundtrip(tiny_recipe):
    data = np.random.default_rng(5).integers(0, 256, 70_000, dtype=np.uint8).tobytes()
    blob = api.compress(data, tiny_recipe)
    assert api.decompress(blob) == data
    header = len(container.encode_header(tiny_recipe))
    assert len(blob) < len(data) + header + 32  # incompressible frames are stored as they are
    frames = list(container.read_frames(_after_header(blob)))
    assert [f.stored for f in frames] == [True, True]


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.05), ("adam", 0.002)])
def test_each_optimizer_roundtrips_and_learns(optimizer, lr, tiny_recipe):
    recipe = Recipe(model=tiny_recipe.model, optimizer=optimizer, lr=lr, seed=1)
    data = b"abracadabra, abracadabra! " * 150
    blob = api.compress(data, recipe)
    assert api.decompress(blob) == data
    assert len(blob) < len(data) / 3  # it learned the repetition


def test_compressing_twice_gives_identical_bytes(tiny_recipe):
    data = os.urandom(2000) + b"text " * 300
    assert api.compress(data, tiny_recipe) == api.compress(data, tiny_recipe)


def test_seed_changes_the_stream(tiny_recipe):
    data = b"hello world " * 20
    other = Recipe(model=tiny_recipe.model, seed=tiny_recipe.seed + 1)
    assert api.compress(data, tiny_recipe) != api.compress(data, other)


def _after_header(blob):
    f = io.BytesIO(blob)
    container.read_header(f)
    return f


def _restart(pred: Predictor, W: np.ndarray) -> Predictor:
    """A predictor of the same recipe at the first byte, with weights W."""
    fresh = Predictor(pred.recipe)
    fresh.W[:] = W
    fresh.state[:] = 0
    fresh.begin()
    return fresh


def test_head_gradient_is_exact_derivative_of_coded_log_loss(tiny_recipe):
    """The logit gradient used for learning equals a finite difference of -ln p_coded."""
    # lr 0 would freeze the network (no gradient at all); a negligible rate keeps the step
    pred = Predictor(Recipe(model=tiny_recipe.model, optimizer="sgd", lr=1e-12, seed=3))
    model = pred.model
    lo = model.trace_global[common.T_LOGITS]
    logits = pred.trace[lo:lo + 256].astype(np.float64)
    floor = PROB_FLOOR

    def coded_loss(z, y):
        q = np.exp(z - z.max())
        q /= q.sum()
        return -np.log((1 - 256 * floor) * q[y] + floor)

    y = 101
    pred.learn_frame(bytes([y]))
    g0 = model.trace_global[common.T_GLOGITS]
    grad = pred.trace[g0:g0 + 256].astype(np.float64)
    eps = 1e-4
    for j in (0, 7, y, 200, 255):
        e = np.zeros(256)
        e[j] = eps
        fd = (coded_loss(logits + e, y) - coded_loss(logits - e, y)) / (2 * eps)
        assert grad[j] == pytest.approx(fd, rel=1e-3, abs=1e-7)


@pytest.mark.parametrize("bptt", [0, 1])
def test_sgd_step_lowers_the_loss_of_the_byte(tiny_recipe, bptt):
    pred = Predictor(Recipe(model=tiny_recipe.model, optimizer="sgd", lr=0.5, seed=3,
                            bptt=bptt))
    W_before = pred.W.copy()
    y = 42
    before = -np.log(np.float64(pred.probs[y]))
    pred.learn_frame(bytes([y]))
    changed = np.flatnonzero(W_before != pred.W)
    lay = pred.model.layout
    head, bias = lay.by_name["lm_head.weight"], lay.by_name["lm_head.bias"]
    if bptt == 0:  # output layer only
        assert changed.min() >= head.offset and changed.max() < bias.offset + bias.size
    else:  # whole network, embedding of the input byte (0) included
        emb = lay.by_name["model.embeddings.weight"]
        assert changed.min() == emb.offset
        assert len(changed) > 0.5 * lay.size
    after = -np.log(np.float64(_restart(pred, pred.W).probs[y]))
    assert after < before


def test_warm_up_compiles_what_each_kind_of_level_runs():
    """warm_up readies the kernels coding and decoding call: count models at -1, the
    fixed-network kernels (no training code) at -4, the default and -7, the learning one at
    -9."""
    from rwkvzip.cm import counts
    from rwkvzip.coding import codec, stepper
    from rwkvzip.recipe import level_recipe

    for level, kernels in ((1, [counts.run]), (4, [stepper.run_fixed_gdn_path]),
                           (6, [stepper.run_fixed_gdn_path]), (7, [stepper.run_fixed_gdn_path]),
                           (9, [stepper.run_gdn_path])):
        codec.warm_up(level_recipe(level))
        assert all(k.signatures for k in kernels), level
