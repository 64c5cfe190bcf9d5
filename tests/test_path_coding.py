"""Path coding (mix field path_coding): a byte's share of the coder's range is split off at
the nodes of its own path, so only those 8 of the 255 nodes are mixed. The model is the same:
byte and path coding leave every table, weight and network parameter with the same bits and
give each byte the same probability up to rounding; only the stream differs, and it
decodes."""

from dataclasses import replace

import numpy as np
import pytest
from make_golden import bitmap, code, golden_input, sheet
from mixing_probe import payload

from rwkvzip import api
from rwkvzip.cm import image
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import coder
from rwkvzip.coding.codec import Predictor
from rwkvzip.ops.jit import jit
from rwkvzip.recipe import Recipe

from conftest import TINY_CONFIG

# every model and mixer feature the cards use, in small tables
MIX = MixConfig(orders=(1, 2, 3, 4, 6, 0, 13, 11, 16, 17, 18, 19, 20, 21, 22, 28),
                table_bits=10, match_bits=16, count_limit=15, lr=0.02, lr_decay=1024.0,
                selectors=8, net_init=0.45, net_gate=True, image=True, sheet_expect=True, ways=4,
                sse2=True, ctx_init=0.075, set_decay=64.0, exe=True, runs=True)
DATA = golden_input()[:1500] + bitmap()[:1500] + sheet(4) + code(6)
# the mixer's scratch: each node's inputs, logits and probabilities, which the byte path
# fills for all 255 nodes and the path for its own
SCRATCH = ("x", "dot", "pm", "zs", "zs3", "zs4", "zs5")


def path(recipe: Recipe) -> Recipe:
    return replace(recipe, mix=replace(recipe.mix, path_coding=True))


def learnt(recipe: Recipe) -> Predictor:
    p = Predictor(recipe)
    p.byte_shares(np.frombuffer(DATA, dtype=np.uint8).copy())
    return p


@pytest.mark.parametrize("bptt", [0, 8])  # a frozen network (as the default), TBPTT (-7)
def test_path_coding_learns_exactly_what_byte_coding_learns(bptt):
    byte = Recipe(model=TINY_CONFIG, bptt=bptt, lr=3e-4 if bptt else 0.0, mix=MIX)
    a, b = learnt(byte), learnt(path(byte))
    assert np.array_equal(a.W, b.W)
    assert np.array_equal(a.mixing.CT, b.mixing.CT)
    offsets, size = MIX.layout(byte.bptt)
    keep = np.ones(size, dtype=bool)
    starts = sorted(set(v for k, v in offsets.items() if k != "nin")) + [size]
    for name in SCRATCH:
        keep[offsets[name]:starts[starts.index(offsets[name]) + 1]] = False
    at = offsets["img"]  # the image switch's logit at each node is scratch too
    keep[at + image.M_ZMIX:at + image.weights_size()] = False
    assert np.array_equal(a.mixing.MX[keep], b.mixing.MX[keep])


def test_each_byte_costs_what_it_costs_with_byte_coding():
    byte = Recipe(model=TINY_CONFIG, bptt=0, lr=0.0, mix=MIX)
    data = np.frombuffer(DATA, dtype=np.uint8).copy()
    a = -np.log2(Predictor(byte).byte_shares(data))
    b = -np.log2(Predictor(path(byte)).byte_shares(data))
    # both give a byte its share of (1 - 2^-12) of the range above a floor of 2^-20; only
    # the rounding differs (the path's units are truncated at each node: more so in an
    # unlikely byte, whose units are few)
    np.testing.assert_allclose(b, a, rtol=5e-3, atol=1e-3)
    assert abs(b.sum() - a.sum()) < 1e-4 * a.sum()


def test_path_streams_roundtrip_and_differ_from_byte_streams():
    small = replace(MIX, network=False, orders=(1, 2, 3, 0, 11, 20), sheet_expect=False)
    blob = api.compress(DATA, Recipe(mix=replace(small, path_coding=True)))
    assert api.decompress(blob) == DATA
    ours, other = payload(DATA, replace(small, path_coding=True)), payload(DATA, small)
    assert ours != other and abs(len(ours) - len(other)) <= 8
    broken = bytearray(blob)
    broken[len(blob) // 2] ^= 0x10
    with pytest.raises(api.FormatError):
        api.decompress(bytes(broken))


@jit(cache=False)
def split_all(p1, out):
    """Each byte's units when every node at depth d has probability p1[d] of a 1."""
    for s in range(256):
        left = np.int64(coder.PATH_LEFT)
        rest = np.int64(coder.PATH_REST)
        for d in range(8):
            ones, zeros = coder.path_units(rest, p1[d], d)
            if (s >> (7 - d)) & 1:
                left += zeros
                rest = ones
            else:
                rest -= ones
        out[s, 0] = left
        out[s, 1] = coder.PATH_LEAST + rest


@pytest.mark.parametrize("p", [0.5, 2.0**-16, 1.0 - 2.0**-16, 0.3])
def test_the_tree_splits_its_units_in_proportion_above_each_bytes_least(p):
    p1 = np.array([p, 1 - p, p, p, 1 - p, p, p, 1 - p])
    units = np.empty((256, 2), dtype=np.int64)
    split_all(p1, units)
    assert units[0, 0] == coder.PATH_LEFT and units[:, 1].min() >= coder.PATH_LEAST
    assert np.array_equal(units[1:, 0], units[:-1].sum(axis=1))  # contiguous, in order
    assert units[-1].sum() == coder.PATH_LEFT + coder.PATH_UNITS
    bits = (np.arange(256)[:, None] >> np.arange(7, -1, -1)) & 1
    share = np.prod(np.where(bits == 1, p1, 1 - p1), axis=1)  # each byte's probability
    np.testing.assert_allclose(units[:, 1] - coder.PATH_LEAST, coder.PATH_REST * share,
                               atol=8.0)  # one unit truncated a node at most


@jit(cache=False)
def rows_of(units, rows):
    for t in range(units.shape[0]):
        coder.path_row(units[t, 0], units[t, 1], rows[t])


@jit(cache=False)
def quantiles(units, words, state, out):
    for t in range(units.shape[0]):
        out[t] = coder.decode_quantile(state)
        coder.decode_interval(words, state, units[t, 0], units[t, 1])


def test_a_path_row_gives_constriction_exactly_the_bytes_units():
    rng = np.random.default_rng(3)
    left = rng.integers(coder.PATH_LEFT, coder.TOTAL - 4, 3000)
    width = np.minimum(2 + rng.geometric(1e-4, 3000), coder.TOTAL - 2 - left)
    units = np.stack([left, width], axis=1)
    rows = np.empty((len(units), coder.PATH_ROW), dtype=np.float32)
    rows_of(units, rows)
    assert rows.min() >= 1 and np.all(rows.astype(np.int64).sum(axis=1) == coder.TOTAL - 3)
    enc = coder.new_encoder()
    coder.encode_rows(np.full(len(units), coder.PATH_SYMBOL), rows, enc)
    payload = coder.finish(enc)
    import constriction  # the reference (tests/test_coder.py: its numba twins)

    ref = constriction.stream.queue.RangeDecoder(
        np.frombuffer(payload, dtype="<u4").astype(np.uint32))
    lazy = constriction.stream.model.Categorical
    assert all(ref.decode(lazy(r, perfect=False)) == coder.PATH_SYMBOL for r in rows)
    q = np.empty(len(units), dtype=np.int64)
    quantiles(units, *coder.new_decoder(payload), q)
    assert np.all((left <= q) & (q < left + width))
