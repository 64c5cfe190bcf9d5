"""Online training through the whole network: modes, optimizers, scopes, clipping, schedule."""

import numpy as np
import pytest

from rwkvzip import api
from rwkvzip.coding import coder, container, stepper
from rwkvzip.coding.codec import Predictor
from rwkvzip.net import optim
from rwkvzip.net.gdn.model import GdnConfig
from rwkvzip.ops.linalg import refresh_twins
from rwkvzip.recipe import Recipe, RecipeError, with_overrides

from conftest import TINY_CONFIG, helper_compiles

TEXT = (b"Alice was beginning to get very tired of sitting by her sister on the bank, "
        b"and of having nothing to do: once or twice she had peeped into the book her "
        b"sister was reading, but it had no pictures or conversations in it. ") * 6


TINY_GDN = GdnConfig(hidden=32, layers=2, key_heads=1, value_heads=2, key_dim=16,
                     value_dim=16, conv_kernel=4, mlp=64)


def recipe(**kw) -> Recipe:
    base = dict(model=TINY_CONFIG, optimizer="adam", lr=0.003, seed=5)
    base.update(kw)
    if base.get("arch") == "gdn":
        base["model"] = TINY_GDN
    return Recipe(**base)


MODES = [
    dict(bptt=0),
    dict(bptt=1),
    dict(bptt=4, ckpt=4),  # one chunk: the live traces are reused
    dict(bptt=6, ckpt=4),  # two chunks: the first one is replayed from its checkpoint
]


@pytest.mark.parametrize("arch", ["rwkv7", "gdn"])
@pytest.mark.parametrize("optimizer,lr", [("adam", 0.003), ("sgd", 0.05)])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(f"{k}{v}" for k, v in m.items()))
def test_roundtrip_each_mode_and_optimizer(mode, optimizer, lr, arch):
    r = recipe(optimizer=optimizer, lr=lr, arch=arch, **mode)
    data = TEXT * 3
    blob = api.compress(data, r)
    assert api.decompress(blob) == data
    payload = len(blob) - len(container.encode_header(r))
    # it learned: the output layer alone only learns byte statistics, the network the repeats
    assert payload < (0.75 if mode["bptt"] == 0 else 0.6) * len(data)


def run_bytes(pred: Predictor, data: bytes, record: bool = True) -> np.ndarray:
    rows = np.zeros((len(data), 256), dtype=np.float32)
    pred.advance(np.frombuffer(data, dtype=np.uint8).copy(), rows,
                 coder.RECORD if record else coder.ADVANCE, coder.no_decoder())
    return rows


def segment_loss(rows: np.ndarray, data: bytes) -> float:
    return float(np.mean(-np.log(rows[np.arange(len(data)), list(data)].astype(np.float64))))


def restart(pred: Predictor) -> Predictor:
    """Same recipe at the first byte, with pred's current weights and lr 0."""
    fresh = Predictor(with_overrides(pred.recipe, lr=0.0))
    fresh.W[:] = pred.W
    fresh.state[:] = 0
    fresh.begin()
    return fresh


@pytest.mark.parametrize("ckpt", [8, 3])
def test_tbptt_sgd_step_lowers_that_segments_loss(ckpt):
    T = 8
    segment = TEXT[:T]
    pred = Predictor(recipe(optimizer="sgd", lr=0.05, bptt=T, ckpt=ckpt))
    W0 = pred.W.copy()
    before = segment_loss(run_bytes(pred, segment), segment)  # the update fires at byte T
    assert not np.array_equal(W0, pred.W)
    after = segment_loss(run_bytes(restart(pred), segment), segment)
    assert after < before


def test_replay_from_checkpoints_gives_the_same_update_as_stored_traces():
    """K < T replays chunks from checkpoints; K = T keeps every trace: identical weights."""
    a = Predictor(recipe(bptt=6, ckpt=6))
    b = Predictor(recipe(bptt=6, ckpt=2))
    run_bytes(a, TEXT[:30])
    run_bytes(b, TEXT[:30])
    assert np.array_equal(a.W, b.W) and np.array_equal(a.O, b.O)
    assert np.array_equal(a.probs, b.probs)


def test_tbptt1_and_bptt1_take_the_same_first_step():
    """See coding/stepper.py: identical first update; afterwards TBPTT recomputes the live
    state with the new weights and bptt=1 does not, so their streams part by design."""
    one = Predictor(recipe(bptt=1))
    seg = Predictor(recipe(bptt=2, ckpt=2))  # buffers for T = 2; begin is the same for T = 1
    seg.F[optim.F_BPTT] = 1
    seg.F[optim.F_CKPT] = 1
    assert seg.F[optim.F_MODE] == stepper.MODE_TBPTT
    run_bytes(one, TEXT[:1])
    run_bytes(seg, TEXT[:1])
    assert np.array_equal(one.W, seg.W) and np.array_equal(one.O, seg.O)
    run_bytes(one, TEXT[1:3])
    run_bytes(seg, TEXT[1:3])
    assert not np.array_equal(one.W, seg.W)


@pytest.mark.parametrize("ckpt", [6, 4])
def test_tbptt_without_recompute_goes_on_from_the_live_state(ckpt):
    """The first segment's steps read the start and bytes 0 .. T - 2; reading byte T - 1 the
    update fires. With recompute the new weights then reread the segment from its start
    state; without, the state the old weights' forward passes left goes on. Either way the
    new weights then read byte T - 1 and predict byte T. (run_bytes records each byte's row
    before reading the byte.)"""
    T = 6
    data = TEXT[:T + 1]
    for recompute in (True, False):
        pred = Predictor(recipe(bptt=T, ckpt=ckpt, recompute=recompute))
        old = restart(pred)  # the starting weights, frozen
        live = restart(pred)
        rows = run_bytes(pred, data)
        assert np.array_equal(rows[:T], run_bytes(old, data[:T]))
        new = restart(pred)  # the updated weights, frozen
        if recompute:
            run_bytes(new, data[:T])
            expect = run_bytes(new, data[T:])
        else:
            run_bytes(live, data[:T - 1])
            new.state[:] = live.state
            expect = run_bytes(new, data[T - 1:])[1:]
        assert np.array_equal(rows[T:], expect)


@pytest.mark.parametrize("scope,groups", [
    ("attn", {"attn"}),
    ("ffn+bias", {"ffn", "bias"}),
    ("embed+norm", {"embed", "norm"}),
])
def test_scope_masks_which_parameters_train(scope, groups):
    pred = Predictor(recipe(bptt=1, scope=scope))
    W0 = pred.W.copy()
    run_bytes(pred, TEXT[:20])
    for spec in pred.model.layout.specs:
        moved = not np.array_equal(W0[spec.offset:spec.offset + spec.size],
                                   pred.W[spec.offset:spec.offset + spec.size])
        if spec.group not in groups:
            assert not moved, spec.name
    trained = [s for s in pred.model.layout.specs if s.group in groups]
    assert any(not np.array_equal(W0[s.offset:s.offset + s.size],
                                  pred.W[s.offset:s.offset + s.size]) for s in trained)


def test_clipping_bounds_every_sgd_step():
    lr, clip = 0.1, 1e-4
    pred = Predictor(recipe(optimizer="sgd", lr=lr, bptt=1, clip=clip))
    W0 = pred.W.copy()
    run_bytes(pred, TEXT[:1])
    step = np.abs(pred.W.astype(np.float64) - W0)
    assert step.max() <= lr * clip * 1.01  # float32 rounding of w - step
    assert step.max() >= lr * clip * 0.99  # some gradients were larger than the clip


def test_learning_rate_schedule():
    F = np.zeros(optim.N_F)
    F[optim.F_LR] = 1.0
    F[optim.F_WARMUP] = 10
    F[optim.F_SEEN] = 4
    assert optim.scheduled_lr(F) == pytest.approx(0.5)
    F[optim.F_WARMUP] = 0
    F[optim.F_DECAY] = 16384
    F[optim.F_SEEN] = 16384
    assert optim.scheduled_lr(F) == pytest.approx(2**-0.5)
    F[optim.F_LR_MIN] = 0.9
    assert optim.scheduled_lr(F) == pytest.approx(0.9)


def test_schedule_and_clip_change_the_stream_and_roundtrip():
    base = recipe(bptt=4, ckpt=4)
    variants = [base, with_overrides(base, warmup=100, decay=500, lr_min=1e-4),
                with_overrides(base, clip=0.01)]
    blobs = [api.compress(TEXT, r) for r in variants]
    assert len(set(blobs)) == 3
    assert all(api.decompress(b) == TEXT for b in blobs)


def test_recipe_scope_validation():
    learning = recipe(bptt=1)  # (with bptt 0 only the output layer learns: no scope)
    assert with_overrides(learning, scope="head+attn").scope == "attn+head"
    assert with_overrides(learning, scope="all").scope == "embed+norm+attn+ffn+head+bias"
    with pytest.raises(RecipeError, match="bad train scope"):
        with_overrides(learning, scope="attn+brain")
    with pytest.raises(RecipeError, match="bptt"):
        recipe(bptt=-1).validate()


@pytest.mark.parametrize("arch", ["rwkv7", "gdn"])
def test_the_compile_helper_types_the_backward_step_as_the_block_kernels_do(arch):
    """precompile.compile_backward calls the backward step with the block kernels' argument
    types: after the learning block kernel ran here, the helper process finds the backward
    step in the shared kernel cache and compiles none of it."""
    r = recipe(arch=arch, bptt=4, ckpt=4)
    assert api.decompress(api.compress(TEXT, r)) == TEXT
    compiled = helper_compiles("compile_backward", r)
    assert not [c for c in compiled if c.endswith("backward_step")], compiled


def test_refresh_twins_transposes_every_shape_tiles_and_edges():
    """The twins are copied in 8 x 8 tiles: shapes that are not multiples of the tile must
    have their edge rows and columns copied too, and nothing outside the listed matrices
    may change."""
    shapes = [(3, 5), (8, 8), (13, 24), (24, 13), (64, 17), (9, 1), (1, 9)]
    offsets = np.cumsum([0] + [a * b + 2 for a, b in shapes])  # gaps stay untouched
    table = np.array([(o, a, b) for o, (a, b) in zip(offsets[:-1], shapes, strict=True)],
                     dtype=np.int64)
    W = np.random.default_rng(0).standard_normal(offsets[-1]).astype(np.float32)
    WT = np.full_like(W, 7.0)
    refresh_twins(W, WT, table)
    for off, n_in, n_out in table:
        n = n_in * n_out
        assert np.array_equal(WT[off:off + n], W[off:off + n].reshape(n_in, n_out).T.ravel())
        assert np.all(WT[off + n:off + n + 2] == 7.0)


@pytest.mark.parametrize("arch", ["rwkv7", "gdn"])
def test_tbptt_keeps_output_major_twins_of_the_matrices_in_step(arch):
    """TBPTT's backward reads its input gradients from twins of W's matrices: they must be
    W's matrices transposed after every optimizer step and after W is written from outside
    (weights_changed); modes that step every byte keep none."""
    p = Predictor(recipe(arch=arch, bptt=4, ckpt=4))
    layout = p.model.layout

    def twins_match() -> bool:
        return all(np.array_equal(p.WT[s.offset:s.offset + s.size], layout.get(p.W, s.name).ravel())
                   for s in layout.specs if s.transposed and len(s.shape) == 2)

    assert twins_match()
    p.encode_frame(TEXT)  # many segments: the weights changed
    assert twins_match()
    p.W[:] = np.random.default_rng(0).standard_normal(p.W.size).astype(np.float32)
    p.weights_changed()
    assert twins_match()
    assert Predictor(recipe(arch=arch, bptt=1)).WT.size == 0
