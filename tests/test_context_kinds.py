"""Context kinds beyond order-k and word (codes >= 8 in MixConfig.orders): they roundtrip,
bad codes are refused, the record length is found in planted records, and the recipes
and cards written before them keep their exact JSON."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, history
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.coding import container
from rwkvzip.recipe import Recipe, RecipeError, preset_cards

from target_probe import record_table

ROOT = Path(__file__).resolve().parents[1]
NEW_KINDS = tuple(range(8, context.MAX_KIND + 1))


def records(width, rows, seed, noise=0.1):
    """A table of `rows` records of `width` bytes: one random row, changed here and there."""
    rng = np.random.default_rng(seed)
    row = rng.integers(0, 256, width, dtype=np.uint8)
    out = np.tile(row, rows)
    flip = rng.random(out.size) < noise
    out[flip] = rng.integers(0, 256, int(flip.sum()), dtype=np.uint8)
    return out.tobytes()


def detected_lengths(data, orders=(1, 12), **fields):
    """The detected record length after every byte of `data`."""
    arrays = MixArrays(MixConfig(orders=orders, table_bits=10, match_bits=14, network=False,
                                 **fields), 1)
    lengths = np.zeros(len(data), dtype=np.int64)
    for i, byte in enumerate(data):
        context.next_contexts(arrays.S, arrays.HB, byte)
        lengths[i] = arrays.S[context.S_REC]
    return lengths


def detected_length(data, orders=(1, 12)):
    return int(detected_lengths(data, orders)[-1])


def test_every_new_kind_roundtrips_and_is_deterministic():
    data = records(37, 40, 1) + b"The record model reads the byte above. " * 20 + records(12, 50, 2)
    for first in range(0, len(NEW_KINDS), 6):
        orders = (1, 2, 0) + NEW_KINDS[first:first + 6]
        recipe = Recipe(mix=MixConfig(orders=orders, table_bits=11, match_bits=14,
                                      network=False))
        blob = api.compress(data, recipe)
        assert api.decompress(blob) == data
        assert api.compress(data, recipe) == blob


def test_record_contexts_model_a_table_better_than_orders_alone():
    data = records(53, 120, 3, noise=0.3)
    plain = MixConfig(orders=(1, 2, 3), table_bits=12, match_bits=14, network=False)
    rec = replace(plain, orders=(1, 2, 3, context.KIND_REC_ABOVE, context.KIND_REC_TWO))
    sizes = [len(api.compress(data, r)) - len(container.encode_header(r))
             for r in (Recipe(mix=plain), Recipe(mix=rec))]
    assert sizes[1] < 0.9 * sizes[0]


@pytest.mark.parametrize("width", [2, 7, 37, 216, 1000])
def test_record_length_detection_finds_a_planted_period(width):
    assert detected_length(records(width, max(40, 40_000 // width), width)) == width


def test_record_length_follows_a_new_period_and_ignores_noise():
    assert detected_length(record_table()) == 45  # the cross-target probe's table
    assert detected_length(records(37, 60, 4) + records(50, 80, 5)) == 50
    noise = np.random.default_rng(6).integers(0, 256, 50_000, dtype=np.uint8).tobytes()
    assert detected_length(noise) == 0
    assert detected_length(b"\0" * 10_000) == 0  # runs of one byte are no records
    # only recipes with a new kind pay for the detection
    assert detected_length(records(37, 60, 4), orders=(1, 2, 0)) == 0


def test_rec_stable_keeps_a_length_that_a_rarer_rival_gathers_votes_against():
    """A table of 3-byte records whose counter wraps every 768 bytes: each counter byte
    comes back 768 bytes later, so 768 gathers votes too, and without rec_stable wins
    whenever it reaches the count first, for a third of the table; with it, every vote for 3
    takes one from 768. The length is still found and followed to a new table."""
    rng = np.random.default_rng(9)
    table = b"".join(bytes([(i + 1) & 255, 4, int(rng.integers(0, 2))]) for i in range(2000))
    plain, stable = detected_lengths(table), detected_lengths(table, rec_stable=True)
    first = int(np.argmax(stable == 3))
    assert first == int(np.argmax(plain == 3)) < 100
    assert (stable[first:] == 3).all()
    assert (plain[first:] == 768).sum() > len(table) // 5  # measured 1,813 of 6,000
    assert detected_lengths(table + records(50, 80, 5), rec_stable=True)[-1] == 50
    mix = MixConfig(orders=(1, 2, context.KIND_REC_ABOVE), table_bits=11, match_bits=14,
                    network=False, rec_stable=True)
    assert api.decompress(api.compress(table, Recipe(mix=mix))) == table


@pytest.mark.parametrize("orders, message", [
    ((1, context.MAX_KIND + 1), "distinct"), ((1, -1), "distinct"), ((12, 12), "distinct"),
    ((), f"1 to {context.MAX_MODELS}"), (tuple(range(1, context.MAX_MODELS + 2)), "1 to")])
def test_bad_kind_codes_are_refused(orders, message):
    with pytest.raises(ValueError, match=message):
        MixConfig(orders=orders).validate()
    d = Recipe(mix=MixConfig()).to_dict()
    d["mix"]["orders"] = list(orders)
    with pytest.raises(RecipeError):
        Recipe.from_dict(d)


def test_cards_and_old_recipes_keep_their_exact_json():
    assert list(MixConfig().to_dict()) == ["orders", "table_bits", "match_bits", "count_limit",
                                           "lr", "lr_min", "lr_decay", "apm_rate", "map_rate",
                                           "network"]
    for card in preset_cards().values():
        shipped = json.loads((ROOT / "models" / f"{card.name}.json").read_text())["recipe"]
        assert card.recipe.to_json() == json.dumps(shipped, sort_keys=True,
                                                   separators=(",", ":")).encode()
    old = Recipe(mix=MixConfig(orders=(1, 2, 3, 0, context.KIND_INDIRECT), table_bits=12))
    assert b'"orders":["order1","order2","order3","word","indirect"]' in old.to_json()
    assert Recipe.from_json(old.to_json()) == old
    assert sorted(context.KIND_CODES.values()) == list(range(context.MAX_KIND + 1))


@pytest.mark.parametrize("orders, message", [
    ([1, 2, 3, 0], "integer codes were written by rwkvzip 0.x"),
    (["order1", "order9"], "unknown context kind 'order9'"), ("order1", "list of")])
def test_a_recipe_names_its_context_kinds(orders, message):
    d = Recipe(mix=MixConfig()).to_dict()
    d["mix"]["orders"] = orders
    with pytest.raises(RecipeError, match=message):
        Recipe.from_dict(d)


def shifting_successors(n: int = 12000, seed: int = 3) -> bytes:
    """16 letters where the one after each pair follows a table redrawn every 1,500 bytes
    (nine times in ten): what followed a pair last time says more than its old counts."""
    rng = np.random.default_rng(seed)
    out = [0, 1]
    for i in range(n):
        if i % 1500 == 0:
            table = rng.integers(0, 16, (16, 16))
        out.append(int(table[out[-2], out[-1]] if rng.random() < 0.9 else rng.integers(0, 16)))
    return bytes(97 + b for b in out)


def test_the_indirect_context_is_what_followed_the_last_two_bytes():
    mix = MixConfig(orders=(1, 2, context.KIND_INDIRECT), table_bits=11, match_bits=14,
                    network=False)
    S = fed(b"abX..abY..ab", mix).S
    h = history.hash32(context.KIND_INDIRECT * 0x2545F491 + 0x6A09E667)
    want = context.mixh(context.mixh(h, ord("b")), (ord("X") << 8) | ord("Y"))
    assert S[context.S_CTX + 2] == want
    S = fed(b"..ab", mix).S  # never followed: 0
    assert S[context.S_CTX + 2] == context.mixh(context.mixh(h, ord("b")), 0)


def test_the_indirect_kind_models_changing_successors_better():
    data = shifting_successors()
    word4 = MixConfig(orders=(1, 2, 3, 0, 11), table_bits=11, match_bits=14, network=False)
    indirect = replace(word4, orders=(1, 2, 3, 0, context.KIND_INDIRECT))
    assert len(payload(data, indirect)) < 0.99 * len(payload(data, word4))  # measured 0.976


def separated_records(n: int = 2000, seed: int = 3) -> bytes:
    """Records of one to three bytes (the last below 0x80, the others above), then a
    separator of three bytes that changes every 50 records."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for k in range(n):
        if k % 50 == 0:
            separator = bytes([int(rng.integers(0, 256)), 4, 1])
        width = int(rng.integers(1, 4))
        out += bytes(rng.integers(0x80, 0x100, width - 1, dtype=np.uint8))
        out += bytes([int(rng.integers(0, 0x80))]) + separator
    return bytes(out)


CHART_BASE = MixConfig(orders=(1, 2, 3, 4, 6, 0, 13), table_bits=12, match_bits=14,
                       network=False, selectors=2, exe=True)
CHART = replace(CHART_BASE, orders=CHART_BASE.orders + (context.KIND_CHART,))


def chart_hash(x: int) -> int:
    """The chart kinds' hash of x, in the kernel's int64 arithmetic (which wraps)."""
    v = (x * 0x2545F491 + 0x6A09E667) % (1 << 64)
    return history.hash32(np.int64(v - (1 << 64) if v >> 63 else v))


def test_the_chart_context_is_what_followed_the_last_shape_with_the_byte_two_back():
    """After each byte the shape of the three before it (top 3 bits each) learns it; the
    context is what followed the current shape last, with a(2), on binary data only."""
    data = separated_records()
    S = fed(data, CHART).S
    hist = int(S[context.S_HIST])
    assert S[context.S_CHART + context.chart_shape(hist >> 8)] == data[-1]
    assert context.chart_shape(0xE0_40_20) == 0b111_010_001
    x = (3 << 40) | (int(S[context.S_CHART + context.chart_shape(hist)]) << 8) | data[-2]
    assert S[context.S_CTX + 7] == chart_hash(x)
    S = fed(b"Text has no control bytes, so the chart kind is absent. " * 20, CHART).S
    assert S[context.S_BINARY] == 0 and S[context.S_CTX + 7] == context.ABSENT


def test_the_chart_kind_codes_fields_of_varying_width_and_leaves_text_alone():
    """Binary records whose fields vary in width: 0.96 of the size without it (measured);
    bytecode 0.91; text, where the kind has no input, the same bytes."""
    data = separated_records()
    assert len(payload(data, CHART)) < 0.98 * len(payload(data, CHART_BASE))
    text = b"The chart kind reads binary data; text gives it no input. " * 30
    assert payload(text, CHART) == payload(text, CHART_BASE)
    assert api.decompress(api.compress(data, Recipe(mix=CHART))) == data


CHARTS = replace(CHART, orders=CHART.orders + (context.KIND_CHART_FINE,))


def shaped_fields(n: int = 3000, seed: int = 5) -> bytes:
    """Fields of three bytes whose top 5 bits follow one of 24 patterns (the low 3 bits
    random), each followed by its pattern's tag byte; the tags change every 300 fields."""
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 32, (24, 3))
    out = bytearray()
    for k in range(n):
        if k % 300 == 0:
            tags = rng.integers(0, 256, 24)
        p = int(rng.integers(0, 24))
        out += bytes(int(t) << 3 | int(rng.integers(0, 8)) for t in patterns[p])
        out.append(int(tags[p]))
    return bytes(out)


def test_the_fine_chart_context_is_the_finer_shape_and_what_followed_it():
    """After each byte the finer shape of the three before it (top 5 bits each) learns it;
    the context is the current finer shape with what followed it last, on binary data only."""
    data = shaped_fields()
    S = fed(data, CHARTS).S
    hist = int(S[context.S_HIST])
    assert S[context.S_CHART_FINE + context.chart_fine_shape(hist >> 8)] == data[-1]
    assert context.chart_fine_shape(0xE0_40_28) == (28 << 10) | (8 << 5) | 5
    shape = context.chart_fine_shape(hist)
    x = (4 << 40) | (shape << 16) | int(S[context.S_CHART_FINE + shape])
    assert S[context.S_CTX + 8] == chart_hash(x)
    S = fed(b"Text has no control bytes, so the chart kinds are absent. " * 20, CHARTS).S
    assert S[context.S_BINARY] == 0 and S[context.S_CTX + 8] == context.ABSENT


def test_the_fine_chart_kind_learns_what_follows_a_shape_at_once_and_leaves_text_alone():
    """Fields known by their bytes' top bits alone: the fine chart kind beside the coarse
    one 0.89 of the size without it (measured); text the same bytes."""
    data = shaped_fields()
    assert len(payload(data, CHARTS)) < 0.93 * len(payload(data, CHART))
    text = b"The chart kinds read binary data; text gives them no input. " * 30
    assert payload(text, CHARTS) == payload(text, CHART)
    assert api.decompress(api.compress(data, Recipe(mix=CHARTS))) == data


def test_the_chart_kinds_tables_take_chart_bits():
    """chart_bits sizes the chart kinds' tables alone (their contexts are few), at most
    table_bits; out of range it is refused."""
    mix = replace(CHARTS, table_bits=16, chart_bits=12)
    assert mix.table_bits_of() == [16] * 7 + [12, 12]
    saved = 2 * 4 * context.SLOT * ((1 << 16) - (1 << 12))
    assert mix.memory_bytes() == replace(mix, chart_bits=0).memory_bytes() - saved
    assert replace(CHARTS, table_bits=11, chart_bits=12).table_bits_of()[-1] == 11
    with pytest.raises(ValueError, match="chart_bits"):
        replace(CHARTS, chart_bits=9).validate()
