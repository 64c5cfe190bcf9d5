"""Context mixing: roundtrips in every training mode, bounded memory, the models' evidence,
the exact gradient the mixer hands to the network, and the recipe/header plumbing."""

from dataclasses import replace

import numpy as np
import pytest
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, exe, mixer
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.coding.codec import Predictor
from rwkvzip.net import common
from rwkvzip.net.gdn.model import GdnConfig
from rwkvzip.ops import ALPHABET
from rwkvzip.recipe import (
    DEFAULT_PRESET,
    PROB_FLOOR,
    Recipe,
    RecipeError,
    preset_by_name,
    with_overrides,
)

from conftest import TINY_CONFIG

SMALL_MIX = MixConfig(table_bits=12, match_bits=14)
TEXT = (b"The mixer learns which context to trust. " * 3
        + b"Context models count what followed each context; the network generalises. " * 4
        + bytes(range(40, 120)) + b"The mixer learns which context to trust. " * 2)


def mixed(bptt=8, arch="rwkv7", network=True, selectors=1, **kw):
    model = TINY_CONFIG if arch == "rwkv7" else GdnConfig(hidden=32, layers=1, key_heads=1,
                                                          value_heads=2, key_dim=16,
                                                          value_dim=16, mlp=64)
    return Recipe(arch=arch, model=model, bptt=bptt, ckpt=4, lr=0.002,
                  mix=replace(SMALL_MIX, network=network, selectors=selectors), **kw)


@pytest.mark.parametrize("bptt", [0, 1, 8], ids=["head", "bptt1", "tbptt8-ckpt4"])
@pytest.mark.parametrize("arch", ["rwkv7", "gdn"])
def test_roundtrip_every_training_mode(arch, bptt):
    recipe = mixed(bptt, arch)
    blob = api.compress(TEXT, recipe)
    assert api.decompress(blob) == TEXT
    assert api.compress(TEXT, recipe) == blob  # deterministic


def test_two_selectors_roundtrip_and_learn():
    two = mixed(8, selectors=2)
    blob = api.compress(TEXT * 3, two)
    assert api.decompress(blob) == TEXT * 3
    assert api.compress(TEXT * 3, two) == blob
    alone = replace(mixed(network=False), mix=replace(SMALL_MIX, network=False, selectors=2))
    assert api.decompress(api.compress(TEXT * 3, alone)) == TEXT * 3


def test_context_models_alone_roundtrip_and_beat_the_tiny_network():
    cm = api.compress(TEXT * 4, mixed(network=False))
    assert api.decompress(cm) == TEXT * 4
    neural = api.compress(TEXT * 4, replace(mixed(), mix=None))
    assert len(cm) < 0.6 * len(neural)


def test_stored_frames_are_learned_by_the_mixer_too():
    """(The network learns its output layer only: what is tested is the mixer's.)"""
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, 70_000, dtype=np.uint8).tobytes() + TEXT * 20
    assert api.decompress(api.compress(data, mixed(0, "gdn"))) == data


def _costs(data: bytes, recipe: Recipe) -> np.ndarray:
    """Bits each byte of data costs under the recipe, from a fresh predictor."""
    p = Predictor(recipe)
    probs = np.empty((len(data), 256), dtype=np.float32)
    symbols = np.frombuffer(data, dtype=np.uint8).copy()
    p.run_block(symbols, probs)
    return -np.log2(probs[np.arange(len(data)), symbols].astype(np.float64))


def test_match_model_codes_a_long_repeat_almost_for_free():
    block = np.random.default_rng(2).integers(0, 256, 4000, dtype=np.uint8)
    bits = _costs(np.concatenate([block, block]).tobytes(), mixed(network=False))
    assert bits[:4000].mean() > 7.5  # random bytes: nothing to predict
    assert bits[4000:].mean() < 0.5  # the repeat: the match model predicts it


def test_memory_is_fixed_by_the_recipe_not_the_input():
    cfg = MixConfig(table_bits=12, match_bits=14)
    arrays = MixArrays(cfg, 1)
    size = arrays.CT.nbytes + arrays.HB.nbytes
    p = Predictor(Recipe(model=TINY_CONFIG, mix=cfg))
    p.encode_frame(np.random.default_rng(3).integers(0, 256, 60_000, np.uint8).tobytes())
    assert p.mixing[0].nbytes + p.mixing[1].nbytes == size
    assert size <= cfg.memory_bytes() + 4096


def test_order1_and_sse2_tables_take_the_size_their_fields_give():
    """order1_bits packs order 1's table (it holds 256 x 17 nibble contexts at most) and the
    next order starts after it; sse2_bits sizes the order-2 APM; both are what memory
    counts, and a coded stream's order-1 slots stay inside the small table."""
    full = MixConfig(orders=(1, 2), table_bits=12, match_bits=14, sse2=True)
    small = replace(full, order1_bits=10, sse2_bits=7)
    S = MixArrays(small, 1).S
    assert [S[context.S_TBITS + o] for o in range(2)] == [10, 12]
    assert [S[context.S_TBASE + o] for o in range(2)] == [0, 1 << 10]
    assert S[context.S_MATCH_BASE] == ((1 << 10) + (1 << 12)) * context.SLOT
    a3 = mixer.APM_CELLS * 256 * ((1 << 10) - (1 << 7)) * 4
    assert full.memory_bytes() - small.memory_bytes() == 4 * context.SLOT * 3 * (1 << 10) + a3
    p = Predictor(Recipe(model=TINY_CONFIG, mix=small))
    p.encode_frame(TEXT)
    order1 = p.mixing.S[context.S_SLOTS:context.S_SLOTS + 17]
    assert (order1 >= 0).any() and (order1 < (1 << 10) * context.SLOT).all()
    CT = p.mixing.CT
    assert CT[:(1 << 10) * context.SLOT].any()
    shrunk = replace(small, order1_bits=15)  # at most table_bits: a card's tables shrink
    assert shrunk.table_bits_of() == [12, 12]
    with pytest.raises(ValueError, match="order1_bits"):
        replace(full, order1_bits=9).validate()
    with pytest.raises(ValueError, match="sse2_bits"):
        replace(full, sse2_bits=11).validate()


def test_unknown_context_gives_no_evidence_and_a_seen_one_does():
    arrays = MixArrays(MixConfig(table_bits=12, match_bits=14, network=False), 1)
    S, CT, MX = arrays.S, arrays.CT, arrays.MX
    K = int(S[context.S_K])
    X = np.zeros((256, 2 * K), dtype=np.float32)
    sm = MX[S[mixer.S_SM]:]
    context.node_inputs(CT, S, arrays.ST, sm, X, 0)
    assert not X.any()
    for byte in b"abcabcabcab":
        mixer.learn(byte, CT, S, MX, arrays.ST, np.zeros(256, np.float32))
        context.next_contexts(S, arrays.HB, byte)
        context.match_update(S, arrays.HB, CT)
    context.node_inputs(CT, S, arrays.ST, sm, X, 0)
    node, c = 1, ord("c")  # after "...ab" every model that knows the context predicts 'c'
    for d in range(8):
        bit = (c >> (7 - d)) & 1
        assert (X[node, :K] * (1 if bit else -1) > 0).sum() >= 3
        node = 2 * node + bit


GATED_HISTORY = b"\0" * 21  # text-likeness 1 -> 0.85: the gate half open


def _mixer_loss_and_gradient(z, symbol, selectors=1, gate=False):
    """The mixer's loss -sum ln p_mix(bit) on the symbol's path, given network logits z."""
    arrays = MixArrays(replace(SMALL_MIX, network=True, selectors=selectors, net_gate=gate), 1)
    history = b"some history so the models know things, some history"
    for byte in history + (GATED_HISTORY if gate else b""):
        mixer.learn(byte, arrays.CT, arrays.S, arrays.MX, arrays.ST, np.zeros(256, np.float32))
        context.next_contexts(arrays.S, arrays.HB, byte)
        context.match_update(arrays.S, arrays.HB, arrays.CT)
    q = np.exp(z - z.max())
    q = (q / q.sum()).astype(np.float32)
    P = np.zeros(256, dtype=np.float32)
    mixer.predict(q, arrays.CT, arrays.S, arrays.MX, arrays.ST, 2.0**-20, P)
    pm = arrays.MX[arrays.S[mixer.S_PM]:arrays.S[mixer.S_PM] + 256].astype(np.float64)
    loss, node = 0.0, 1
    for d in range(8):
        bit = (symbol >> (7 - d)) & 1
        loss -= np.log(pm[node] if bit else 1.0 - pm[node])
        node = 2 * node + bit
    gz = np.zeros(256, dtype=np.float32)
    mixer.learn(symbol, arrays.CT, arrays.S, arrays.MX, arrays.ST, gz)
    return loss, gz.astype(np.float64)


@pytest.mark.parametrize(("selectors", "gate"), [(1, False), (2, False), (2, True)])
def test_gradient_to_the_network_is_the_derivative_of_the_mixer_loss(selectors, gate):
    rng = np.random.default_rng(4)
    z = rng.normal(0.0, 1.5, 256)
    symbol = ord("h")
    _, gz = _mixer_loss_and_gradient(z, symbol, selectors, gate)
    assert abs(gz.sum()) < 1e-5  # a softmax shift changes nothing
    checked = 0
    for s in [symbol, ord("s"), ord(" "), int(np.argmax(np.abs(gz)))] + list(rng.choice(256, 3)):
        eps = 1e-2
        zp, zm = z.copy(), z.copy()
        zp[s] += eps
        zm[s] -= eps
        fd = (_mixer_loss_and_gradient(zp, symbol, selectors, gate)[0]
              - _mixer_loss_and_gradient(zm, symbol, selectors, gate)[0])
        fd /= 2 * eps
        assert abs(fd - gz[s]) <= 2e-3 + 0.02 * abs(gz[s]), (s, fd, gz[s])
        checked += abs(gz[s]) > 1e-3
    assert checked >= 3


def test_text_gate_silences_the_network_on_binary_data():
    arrays = MixArrays(replace(SMALL_MIX, network=True, net_gate=True), 1)
    S, MX = arrays.S, arrays.MX
    q = np.zeros(256, np.float32)
    q[ord("e")] = 0.9
    q[:] += 0.1 / 256
    col = 2 * len(SMALL_MIX.orders) + 2
    X = MX[S[mixer.S_X]:S[mixer.S_X] + 256 * S[mixer.S_NIN]].reshape((256, -1))
    P = np.zeros(256, np.float32)
    mixer.predict(q, arrays.CT, S, MX, arrays.ST, 2.0**-20, P)
    heard = X[1:, col].copy()
    assert np.abs(heard).max() > 1.0  # at the start a stream counts as text
    for byte in bytes(range(256)) * 2 + b"\0" * 200:  # binary data
        mixer.learn(byte, arrays.CT, S, MX, arrays.ST, np.zeros(256, np.float32))
        context.next_contexts(S, arrays.HB, byte)
    mixer.predict(q, arrays.CT, S, MX, arrays.ST, 2.0**-20, P)
    assert np.all(X[1:, col] == 0.0) and mixer.text_gate(S, MX) == 0.0
    for byte in b"plain text again, line after line.\n" * 12:
        mixer.learn(byte, arrays.CT, S, MX, arrays.ST, np.zeros(256, np.float32))
        context.next_contexts(S, arrays.HB, byte)
    mixer.predict(q, arrays.CT, S, MX, arrays.ST, 2.0**-20, P)
    assert mixer.text_gate(S, MX) == 1.0 and np.array_equal(X[1:, col], heard)


def test_network_learns_from_its_loss_plus_the_mixers():
    """With mixing, the logit gradient of the network's step is its own loss's plus the
    mixer's (the row mixer.learn left in GM)."""
    p = Predictor(mixed(1))
    p.encode_frame(TEXT[:200])
    V = 256
    q = common.gslice(p.trace, p.index, common.T_Q, V).astype(np.float64)
    pr = common.gslice(p.trace, p.index, common.T_P, V).astype(np.float64)
    y = TEXT[200]
    keep = 1.0 - V * PROB_FLOOR
    own = keep * q[y] / pr[y] * q
    own[y] -= keep * q[y] / pr[y]
    p.learn_frame(TEXT[200:201])
    S, MX = p.mixing[2], p.mixing[3]
    from_mixer = MX[S[mixer.S_GM]:S[mixer.S_GM] + V].astype(np.float64)
    used = common.gslice(p.trace, p.index, common.T_GLOGITS, V).astype(np.float64)
    assert np.abs(from_mixer).max() > 1e-3
    np.testing.assert_allclose(used, own + from_mixer, rtol=1e-4, atol=1e-6)


def test_recipe_json_and_overrides():
    recipe = mixed()
    assert Recipe.from_json(recipe.to_json()) == recipe
    plain = replace(recipe, mix=None)
    assert b"mix" not in plain.to_json()  # recipes without mixing keep their old encoding
    assert with_overrides(plain, mix=True).mix == MixConfig()
    assert with_overrides(recipe, mix=True).mix == recipe.mix
    assert with_overrides(recipe, mix=False).mix is None
    bad = recipe.to_dict()
    bad["mix"]["orders"] = [1, 1]
    with pytest.raises(RecipeError):
        Recipe.from_dict(bad)
    bad["mix"] = {"orders": ["order1"]}
    with pytest.raises(RecipeError, match="missing"):
        Recipe.from_dict(bad)
    # a field added later is left out at its default, so older recipes keep their JSON
    assert b"selectors" not in recipe.to_json()
    two = replace(recipe, mix=replace(recipe.mix, selectors=2))
    assert b'"selectors":2' in two.to_json() and Recipe.from_json(two.to_json()) == two
    with pytest.raises(RecipeError, match="selectors"):
        Recipe.from_dict({**two.to_dict(), "mix": {**two.mix.to_dict(), "selectors": 4}})


def test_context_inputs_initial_weight_is_a_recipe_field():
    """ctx_init / text_init: the mixers' first weights of the context models' inputs. Old
    recipes (no field) keep 0.15 and 0.05."""
    recipe = mixed()
    assert b"ctx_init" not in recipe.to_json() and b"text_init" not in recipe.to_json()
    arrays = MixArrays(recipe.mix, 1)
    K, nin = arrays.S[context.S_K], arrays.S[mixer.S_NIN]
    first = arrays.MX[arrays.S[mixer.S_W]:arrays.S[mixer.S_W] + nin]
    assert np.all(first[:2 * K] == np.float32(0.15))
    low = replace(recipe, mix=replace(recipe.mix, ctx_init=0.075))
    assert Recipe.from_json(low.to_json()) == low and b'"ctx_init":0.075' in low.to_json()
    arrays = MixArrays(low.mix, 1)
    first = arrays.MX[arrays.S[mixer.S_W]:arrays.S[mixer.S_W] + nin]
    assert np.all(first[:2 * K] == np.float32(0.075))
    assert preset_by_name(DEFAULT_PRESET).recipe.mix.ctx_init == 0.06  # the card's start
    with pytest.raises(RecipeError, match="ctx_init"):
        Recipe.from_dict({**low.to_dict(), "mix": {**low.mix.to_dict(), "ctx_init": 2.0}})


def test_each_weight_set_learns_at_its_own_rate_with_set_decay():
    """set_decay: a weight set's rate decays with its own updates (never below the
    mixer-wide rate), so the rarely chosen sets of a long stream still learn fast. Old
    recipes (no field) keep one rate for every set and no counts."""
    recipe = mixed(selectors=3)
    assert b"set_decay" not in recipe.to_json()
    assert MixArrays(recipe.mix, 1).S[mixer.S_CNT] == 0
    own = replace(recipe, mix=replace(recipe.mix, set_decay=64.0))
    assert Recipe.from_json(own.to_json()) == own and b'"set_decay":64.0' in own.to_json()
    arrays = MixArrays(own.mix, 1)
    S, MX = arrays.S, arrays.MX
    K = S[context.S_K]
    start = float(MX[mixer.MX_LR])
    sets1 = 3 * (K + 1) * 256
    counts = MX[S[mixer.S_CNT]:]
    assert counts.size == sets1 + 2 * 65536 and not counts.any()
    # a set's first update runs at the starting rate; after 3 * 64 updates at half of it,
    # and never below the mixer-wide rate
    assert mixer.set_rate(MX, S[mixer.S_CNT] + 7, 0.0) == pytest.approx(start)
    MX[S[mixer.S_CNT] + 7] = 192.0
    assert mixer.set_rate(MX, S[mixer.S_CNT] + 7, 0.0) == pytest.approx(start / 2)
    assert mixer.set_rate(MX, S[mixer.S_CNT] + 7, 0.9 * start) == pytest.approx(0.9 * start)
    assert MX[S[mixer.S_CNT] + 7] == 194.0
    # each of the three mixers counts the set it chose: mixer 1 by its set, 2 and 3 by
    # (byte, node)
    S[context.S_HIST] = (0x41 << 8) | 0x62
    MX[S[mixer.S_CNT]:] = 0.0
    lr1, lr2, lr3, lr4 = mixer.set_rates(S, MX, 0.0, 5, 0x62, 9, False)
    assert lr1 == lr2 == lr3 == pytest.approx(start) and lr4 == 0.0  # (no fourth: lr)
    assert counts[5] == 1.0 and counts[sets1 + (0x62 << 8 | 9)] == 1.0
    assert counts[sets1 + 65536 + (0x41 << 8 | 9)] == 1.0 and counts.sum() == 3.0
    blob = api.compress(TEXT, own)
    assert api.decompress(blob) == TEXT and blob != api.compress(TEXT, recipe)
    with pytest.raises(RecipeError, match="set_decay"):
        Recipe.from_dict({**own.to_dict(), "mix": {**own.mix.to_dict(), "set_decay": -1.0}})


def test_rows_built_on_first_use_code_as_if_built_at_the_start():
    """mixer.ready_rows builds a selector byte's block of weight and APM rows (and the
    order-2 APM's block of a context) when a byte first reads it: a predictor whose blocks
    were all built before the first byte gives the same probabilities, and the lazy one
    built only the blocks its data chose."""
    recipe = mixed(selectors=3)
    recipe = replace(recipe, mix=replace(recipe.mix, sse2=True, sse2_bits=9))
    data = np.frombuffer(TEXT * 2 + bytes(range(0, 256, 3)), dtype=np.uint8).copy()
    lazy, eager = Predictor(recipe), Predictor(recipe)
    S, MX = eager.mixing.S, eager.mixing.MX
    nin = S[mixer.S_NIN]
    for c in range(256):
        mixer.init_apm(MX, S[mixer.S_A2] + (c << 8) * mixer.APM_CELLS, 256)
        mixer.init_weight_rows(S, MX, S[mixer.S_W2] + (c << 8) * nin)
        mixer.init_weight_rows(S, MX, S[mixer.S_W3] + (c << 8) * nin)
    for h in range(1 << 9):
        mixer.init_apm(MX, S[mixer.S_A3] + (h << 8) * mixer.APM_CELLS, 256)
    S[context.S_READY:context.S_READY + context.N_S_READY] = 1
    rows = [np.empty((len(data), 256), dtype=np.float32) for _ in range(2)]
    lazy.run_block(data, rows[0])
    eager.run_block(data, rows[1])
    assert np.array_equal(rows[0], rows[1])
    built = lazy.mixing.S[context.S_READY:context.S_READY + context.N_S_READY]
    assert 0 < built[mixer.R_A3 - context.S_READY:].sum() < 1 << 9
    assert 0 < built[:256].sum() < 256


RECOVER = replace(SMALL_MIX, network=False, exe=True, match_recover=True)


def test_a_match_on_binary_data_goes_on_after_a_changed_byte():
    """A table repeated with one entry changed: the match resumes at the byte after it (the
    recovery's own counters learn that), where without recovery six bytes go by before the
    hash finds it again; both decode."""
    block = np.random.default_rng(4).integers(0, 256, 3000, dtype=np.uint8)
    edited = block.copy()
    edited[100::50] ^= 0x5A  # 58 changed bytes
    data = np.concatenate([block, edited]).tobytes()
    plain = replace(RECOVER, match_recover=False)
    after = [3000 + i + k for i in range(100, 3000, 50) for k in range(1, 7)]
    costs = {mix: _costs(data, Recipe(model=TINY_CONFIG, mix=mix))[after].sum()
             for mix in (RECOVER, plain)}
    assert costs[RECOVER] < 0.25 * costs[plain]
    S = fed(data[:3101], RECOVER).S  # the changed byte suspended the match ...
    assert S[context.S_LEN] == 0 and S[context.S_MBAK_LEN] >= 100
    S = fed(data[:3102], RECOVER).S  # ... and the next one brought it back
    assert S[context.S_LEN] >= 100 and S[context.S_MTRIAL] == context.MATCH_TRIAL
    for mix in (RECOVER, plain):
        assert api.decompress(api.compress(data, Recipe(model=TINY_CONFIG, mix=mix))) == data


def test_match_recovery_leaves_text_as_it_was():
    """Text has no control bytes, so the match model ends a match at a miss as before."""
    text = TEXT * 6
    assert payload(text, RECOVER) == payload(text, replace(RECOVER, match_recover=False))
    with pytest.raises(ValueError, match="match_recover"):
        replace(SMALL_MIX, match_recover=True).validate()


def test_match_context_learns_which_byte_comes_where_the_match_expects_another():
    """Copies of a table alternate between two versions whose marker bytes differ (0x40 in
    one, 0x41 in the other): the match from the copy before always expects the wrong one.
    With match_context, order 4's slot holds the expected byte and the match's mode, whose
    counters learn which byte comes instead; text and data without a match code as before."""
    block = np.random.default_rng(5).integers(0, 256, 1000, dtype=np.uint8)
    block[::25] = 0x40
    other = block.copy()
    other[::25] = 0x41
    data = np.concatenate([block, other] * 4).tobytes()
    aware = replace(RECOVER, match_context=True)
    markers = [k * 1000 + i for k in range(4, 8) for i in range(0, 1000, 25)]
    costs = {mix: _costs(data, Recipe(model=TINY_CONFIG, mix=mix))[markers].sum()
             for mix in (aware, RECOVER)}
    assert costs[aware] < 0.5 * costs[RECOVER]
    S = fed(data[:5010], aware).S  # in the fifth copy, a match expects a byte
    slot = aware.orders.index(context.MATCH_CONTEXT_ORDER)
    assert S[context.S_EXPECT] >= 0 and S[context.S_BINARY] == 1
    assert S[context.S_CTX + slot] == context.match_context(S)
    assert S[context.S_CTX + slot] != fed(data[:5010], RECOVER).S[context.S_CTX + slot]
    assert payload(TEXT * 6, aware) == payload(TEXT * 6, RECOVER)
    assert api.decompress(api.compress(data, Recipe(model=TINY_CONFIG, mix=aware))) == data
    with pytest.raises(ValueError, match="match_context"):
        replace(RECOVER, match_context=True, orders=(1, 2, 3, 6, 0)).validate()


def test_counters_take_the_binary_count_limit_within_reach_of_a_control_byte():
    """Binary data (a control byte within exe.BINARY_SPAN) updates the counters with
    binary_count_limit; text, and text long after the last control byte, with count_limit."""
    fast = replace(SMALL_MIX, network=False, exe=True, binary_count_limit=6)
    table = np.random.default_rng(5).integers(0, 8, 3000, dtype=np.uint8).tobytes()
    assert fed(table, fast).S[context.S_LIMIT_NOW] == 6
    prose = (TEXT * 40)[:exe.BINARY_SPAN + 10]
    assert fed(table + prose, fast).S[context.S_LIMIT_NOW] == fast.count_limit
    assert payload(TEXT * 6, fast) == payload(TEXT * 6, replace(fast, binary_count_limit=0))
    assert payload(table, fast) != payload(table, replace(fast, binary_count_limit=0))
    recipe = Recipe(model=TINY_CONFIG, mix=fast)
    assert api.decompress(api.compress(table + prose, recipe)) == table + prose
    with pytest.raises(ValueError, match="binary_count_limit"):
        replace(SMALL_MIX, binary_count_limit=6).validate()


ORDER_SETS = replace(SMALL_MIX, orders=(1, 2, 3, 4, 6, 0, 13, 25, 20, 21, 22, 24),
                     network=False, selectors=3, exe=True, sparse=True, order_sets=True)


def phrases(n: int = 2500, seed: int = 6) -> bytes:
    """A phrase book's codes: entries of a common 4-byte prefix and one to three codes,
    prefixes and codes of skewed frequency (the sparse and record kinds know almost every
    context there; which byte orders do says how far the entry has come)."""
    rng = np.random.default_rng(seed)
    prefixes = [bytes(rng.integers(0x80, 256, 4, dtype=np.uint8)) for _ in range(6)]
    codes = rng.integers(1, 256, 60, dtype=np.uint8)
    out = bytearray()
    for _ in range(n):
        out += prefixes[int(rng.zipf(1.6)) % 6]
        for _ in range(int(rng.integers(1, 4))):
            out.append(int(codes[min(int(rng.zipf(1.3)), 60) - 1]))
    return bytes(out)


def test_order_sets_count_the_known_byte_orders_on_binary_data():
    """With order_sets the first mixer's weight set counts the byte orders whose context is
    known while the data is binary, every model's elsewhere."""
    S = fed(phrases(400), ORDER_SETS).S
    assert S[context.S_BINARY] == 1
    K = S[context.S_K]
    for j in range(17):
        known = [S[context.S_SLOTS + 17 * o + j] >= 0 for o in range(K)]
        orders = [k for o, k in enumerate(known) if 1 <= S[context.S_ORDERS + o] <= 7]
        assert mixer.known_models(S, j) == sum(orders)
        S[mixer.S_ORDER_SETS] = 0
        assert mixer.known_models(S, j) == sum(known)
        S[context.S_BINARY], S[mixer.S_ORDER_SETS] = 0, 1
        assert mixer.known_models(S, j) == sum(known)
        S[context.S_BINARY] = 1
    assert sum(known) > sum(orders)  # the other kinds were counted before


def test_order_sets_code_binary_data_better_and_text_the_same():
    data = phrases()
    plain = replace(ORDER_SETS, order_sets=False)
    assert len(payload(data, ORDER_SETS)) < 0.997 * len(payload(data, plain))
    assert payload(TEXT * 6, ORDER_SETS) == payload(TEXT * 6, plain)
    recipe = Recipe(model=TINY_CONFIG, mix=ORDER_SETS)
    assert api.decompress(api.compress(data + TEXT, recipe)) == data + TEXT
    with pytest.raises(ValueError, match="order_sets"):
        replace(SMALL_MIX, order_sets=True).validate()


def test_filler_sets_give_the_first_mixer_sets_of_their_own_after_0_or_0xff():
    """With filler_sets on binary data, after a(1) = 0 or 0xFF the first mixer's weight set
    is FILLER_SETS_AT further on (past any count of byte orders); elsewhere, and on text,
    as with order_sets alone."""
    plain_sets = replace(ORDER_SETS, orders=ORDER_SETS.orders + (16, 17, 18, 19))
    filler = replace(plain_sets, filler_sets=True)
    for tail, after_filler in ((b"\x00", True), (b"\xff", True), (b"\x07", False)):
        S = fed(phrases(400) + tail, filler).S
        assert S[context.S_BINARY] == 1
        for node in (1, 2, 9, 200):
            plain = mixer.weight_set(S, node)
            S[mixer.S_FILLER_SETS] = 0
            assert plain - mixer.weight_set(S, node) == (
                mixer.FILLER_SETS_AT * ALPHABET if after_filler else 0)
            S[mixer.S_FILLER_SETS] = 1
    assert payload(TEXT * 6, filler) == payload(TEXT * 6, plain_sets)
    data = phrases() + bytes(300) + b"\xff" * 300 + phrases(seed=7)
    assert payload(data, filler) != payload(data, plain_sets)
    assert api.decompress(api.compress(data, Recipe(model=TINY_CONFIG, mix=filler))) == data
    with pytest.raises(ValueError, match="filler_sets"):
        replace(ORDER_SETS, order_sets=False, filler_sets=True).validate()
    with pytest.raises(ValueError, match="filler_sets"):
        replace(ORDER_SETS, orders=(1, 2, 3, 0), filler_sets=True).validate()
