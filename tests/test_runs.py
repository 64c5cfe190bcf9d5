"""Byte histories of contexts (mix field runs, cm/runs.py): what a history holds after each
byte, which map cell each tree node reads, the tables' size, and that values a context keeps
for a while and then changes cost less with them; text and binary data roundtrip."""

from dataclasses import replace

import numpy as np
import pytest
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, mixer, runs
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.recipe import Recipe

MIX = MixConfig(orders=(1, 2, 3, 0), table_bits=12, match_bits=14, network=False,
                count_limit=15, ways=4)
RUNS = replace(MIX, runs=True)


def history(last: int, before: int, run: int) -> int:
    return last | (before << 8) | (run << 16)


def test_a_history_keeps_the_last_byte_the_one_before_and_the_run():
    h = runs.after(0, 0x41)
    assert h == history(0x41, 0x41, 1)  # one byte seen: it is both
    h = runs.after(runs.after(h, 0x41), 0x41)
    assert h == history(0x41, 0x41, 3)
    h = runs.after(h, 0x42)
    assert h == history(0x42, 0x41, 1)
    h = runs.after(h, 0x43)
    assert h == history(0x43, 0x42, 1)
    for _ in range(300):
        h = runs.after(h, 0x43)
    assert h == history(0x43, 0x42, 255)  # the run saturates


def test_each_node_on_a_history_byte_s_path_reads_its_own_cell():
    assert runs.cell(0, 1, 0) == -1  # no history
    last, before = 0b10110010, 0b10100001
    h = history(last, before, 5)
    cells = set()
    node = 1
    for d in range(8):  # the last byte's path: cells by run, depth, "another came", bit
        c = runs.cell(h, node, d)
        bit = (last >> (7 - d)) & 1
        assert c == ((5 * 4 + runs.depth_group(d)) * 2 + 1) * 2 + bit
        cells.add(c)
        node = 2 * node + bit
    # the byte before, once it has left the last byte's path (after 101, at depth 4 on):
    # cells by depth and bit
    node = (before | 256) >> 4  # 1 1010
    assert runs.cell(h, node, 4) == runs.SECOND + runs.depth_group(4) * 2 + 0
    assert runs.cell(h, (before | 256) >> 1, 7) == runs.SECOND + 3 * 2 + 1
    assert runs.cell(h, 0b10, 1) == -1  # off both paths (their first bit is 1)
    # a context that saw one byte only has no second path; a long run shares RUN_MAX's cells
    assert runs.cell(history(last, last, 5), node, 4) == -1
    top = runs.cell(history(last, before, 255), 1, 0)
    assert top == runs.cell(history(last, before, runs.RUN_MAX), 1, 0) < runs.SECOND
    assert max(cells) < runs.SECOND and runs.SECOND + 8 == runs.CELLS


def test_the_models_histories_follow_the_coded_bytes():
    """After "xy" twenty times order 1's context x remembers y 20 times in a row, order 2's
    "yx" 19 times; after "xz" too, x remembers z after y, and "zx" is new."""
    o1, o2 = RUNS.orders.index(1), RUNS.orders.index(2)
    arrays = fed(b"xy" * 20 + b"x", RUNS)
    assert context.byte_history(arrays.CT, arrays.S, o1) == history(ord("y"), ord("y"), 20)
    assert context.byte_history(arrays.CT, arrays.S, o2) == history(ord("y"), ord("y"), 19)
    arrays = fed(b"xy" * 20 + b"xzx", RUNS)
    assert context.byte_history(arrays.CT, arrays.S, o1) == history(ord("z"), ord("y"), 1)
    assert context.byte_history(arrays.CT, arrays.S, o2) == 0


def test_the_history_tables_are_an_eighth_of_the_slot_tables():
    plain, with_runs = MixConfig(table_bits=14, order1_bits=12), MixConfig(
        table_bits=14, order1_bits=12, runs=True)
    slots = sum(1 << b for b in plain.table_bits_of())
    assert with_runs.memory_bytes() - plain.memory_bytes() == (
        4 * (slots >> runs.SHRINK)  # the history tables
        + 4 * (with_runs.layout(1)[1] - plain.layout(1)[1]))  # the maps and more weights
    a, b = MixArrays(plain, 1), MixArrays(with_runs, 1)
    assert b.CT.size - a.CT.size == slots >> runs.SHRINK
    assert b.S[context.S_RUNS_COL] > 0 == a.S[context.S_RUNS_COL]


def changing_values(n: int, seed: int) -> bytes:
    """Records of a key (two bytes, one of 8) and its value, a byte that each key keeps
    for a while and changes at one record in four."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 256, (8, 2), dtype=np.uint8)
    values = rng.integers(0, 256, 8, dtype=np.uint8)
    out = bytearray()
    for _ in range(n):
        k = rng.integers(8)
        if rng.random() < 1 / 4:
            values[k] = rng.integers(256)
        out += bytes(keys[k]) + bytes([values[k]])
    return bytes(out)


def test_values_a_context_keeps_for_a_while_cost_less_with_histories():
    """Measured 0.959 of the size without them (the counters average a key's values; a
    history knows its last one and how long it has held)."""
    data = changing_values(3000, 7)
    assert len(payload(data, RUNS)) < 0.975 * len(payload(data, MIX))
    assert api.decompress(api.compress(data, Recipe(mix=RUNS))) == data


@pytest.mark.parametrize("path_coding", [False, True])
def test_histories_roundtrip_on_text_and_binary_data(path_coding):
    mix = replace(RUNS, path_coding=path_coding, exe=True)
    data = (b"Byte histories remember what followed each context last. " * 20
            + bytes(range(256)) * 3 + changing_values(200, 3))
    assert api.decompress(api.compress(data, Recipe(mix=mix))) == data


def test_the_coded_byte_s_longest_run_is_kept_for_the_fourth_mixer():
    """After "xy" twenty times and x: x followed y (order 1) and "xy" (order 2) for the
    20th time; after "xz" and x, every context of that x is new (a run of 1)."""
    arrays = fed(b"xy" * 20 + b"x", RUNS)
    assert arrays.S[context.S_RUNS_CODED] == 20
    assert fed(b"xy" * 20 + b"xzx", RUNS).S[context.S_RUNS_CODED] == 1
    assert fed(b"xy" * 20 + b"x", MIX).S[context.S_RUNS_CODED] == 0  # (no histories)


FOUR = replace(RUNS, exe=True, selectors=4, orders=RUNS.orders + (context.KIND_ORDER0_BINARY,))


def test_the_fourth_mixer_s_set_is_the_run_on_binary_data_and_a3_on_text():
    text = fed(b"the fourth mixer reads a(3) on text", FOUR)
    assert text.S[context.S_BINARY] == 0
    assert mixer.fourth_selector(text.S) == mixer.RUN_SETS + (ord("e") >> 4)  # "...ext"
    binary = fed(b"\x01\x02" * 40 + b"\x01", FOUR)
    assert binary.S[context.S_BINARY] == 1
    assert mixer.fourth_selector(binary.S) == mixer.RUN_SETS - 1  # a run of 40, capped


@pytest.mark.parametrize("path_coding", [False, True])
def test_a_fourth_mixer_changes_text_and_binary_data_and_roundtrips(path_coding):
    four = replace(FOUR, path_coding=path_coding)
    three = replace(four, selectors=3)
    text = b"A fourth mixer, chosen by a(3) on text and by a run on binary data. " * 30
    binary = changing_values(600, 5)
    for data in (text, binary):
        assert payload(data, four) != payload(data, three)
        assert api.decompress(api.compress(data, Recipe(mix=four))) == data


def test_order0_binary_is_one_context_on_binary_data_and_absent_on_text():
    o = FOUR.orders.index(context.KIND_ORDER0_BINARY)
    assert FOUR.table_bits_of()[o] == 10 < FOUR.table_bits
    on_text = fed(b"plain words, nothing binary in them " * 8, FOUR)
    assert on_text.S[context.S_CTX + o] == context.ABSENT
    a, b = fed(changing_values(100, 1), FOUR), fed(changing_values(100, 2), FOUR)
    assert a.S[context.S_CTX + o] == b.S[context.S_CTX + o] != context.ABSENT


@pytest.mark.parametrize("fields, message", [
    ({"selectors": 4, "exe": True}, "selectors 4 and more need runs and exe"),
    ({"selectors": 4, "runs": True}, "selectors 4 and more need runs and exe"),
    ({"selectors": 8, "runs": True}, "selectors 4 and more need runs and exe"),
    ({"selectors": 9, "runs": True, "exe": True}, "selectors must be 1 ... 8")])
def test_a_fourth_selector_needs_the_histories_and_the_binary_test(fields, message):
    with pytest.raises(ValueError, match=message):
        replace(MIX, **fields).validate()
