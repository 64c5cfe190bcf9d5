"""Depth mixers (mix field selectors 5 ... 8, cm/mixer.py): their weight sets by selector
value and node depth, heard on binary data only, so text codes exactly as with four
selectors; binary data codes otherwise and roundtrips."""

from dataclasses import replace

import pytest
from mixing_probe import fed, payload
from test_runs import FOUR, changing_values

from rwkvzip import api
from rwkvzip.cm import context, mixer
from rwkvzip.recipe import Recipe

EIGHT = replace(FOUR, selectors=8)


def test_the_selectors_read_the_word_place_the_known_models_the_match_and_a3():
    data = changing_values(40, 9)
    arrays = fed(data, EIGHT)
    S = arrays.S
    assert S[context.S_BINARY] == 1
    a1, a3 = data[-1], data[-3]
    assert mixer.depth_selector(S, 1, 0, 0) == ((len(data) & 3) << 4) | (a1 >> 4)
    known = mixer.known_models(S, 0)
    assert 0 < known <= 7
    assert mixer.depth_selector(S, 1, 0, 1) == (known * 8 + (a1 >> 6) * 2
                                                + int(a1 == data[-2]))
    assert mixer.depth_selector(S, 1, 0, 3) == a3 >> 2
    for node, d in ((1, 0), (2, 1), (3, 1), (200, 7)):
        for e in range(4):
            assert 0 <= mixer.depth_selector(S, node, d, e) < mixer.DEPTH_VALUES[e]
            assert mixer.depth_set(S, node, d, e) == (
                (mixer.DEPTH_FIRST[e] + mixer.depth_selector(S, node, d, e)) << 3) | d
    assert mixer.depth_sets(4) == 8 * mixer.DEPTH_FIRST[3] + 8 * mixer.DEPTH_VALUES[3]


def test_the_match_selector_tells_the_expected_path_from_the_others():
    arrays = fed(b"\x05\x81\x07\x00" * 30 + b"\x05", EIGHT)
    S = arrays.S
    expected = S[context.S_EXPECT]
    assert expected == 0x81 and S[context.S_LEN] > 0
    length = min(S[context.S_LEN], 15)
    assert mixer.depth_selector(S, 1, 0, 2) == 17 + 2 * length + 1  # on the path, bit 1
    assert mixer.depth_selector(S, 3, 1, 2) == 17 + 2 * length + 0  # "1", then 0
    assert mixer.depth_selector(S, 2, 1, 2) == 1 + length  # "0": off the path
    assert mixer.depth_selector(fed(b"\x01\x02\x03", EIGHT).S, 1, 0, 2) == 0  # no match


@pytest.mark.parametrize("path_coding", [False, True])
def test_text_codes_as_with_four_selectors_and_binary_data_otherwise(path_coding):
    eight = replace(EIGHT, path_coding=path_coding)
    four = replace(eight, selectors=4)
    text = b"Depth mixers are heard on binary data only; text codes as it did. " * 30
    assert payload(text, eight) == payload(text, four)
    binary = changing_values(600, 5)
    for n in (5, 8):
        assert payload(binary, replace(eight, selectors=n)) != payload(binary, four)
    for data in (text, binary, text[:500] + binary + text[:500]):
        assert api.decompress(api.compress(data, Recipe(mix=eight))) == data


def test_each_depth_mixer_costs_a_block_of_weights():
    """Weights, update counts and outputs each; the final mixer's weights once."""
    layouts = [replace(FOUR, selectors=n, set_decay=64.0).layout(1) for n in (4, 5, 8)]
    nin = layouts[0][0]["nin"]
    finals = 2 * mixer.MAX_SELECTORS * mixer.ALPHABET
    assert layouts[1][1] - layouts[0][1] == (
        mixer.depth_sets(1) * (nin + 1) + mixer.ALPHABET + finals)
    assert layouts[2][1] - layouts[1][1] == (
        (mixer.depth_sets(4) - mixer.depth_sets(1)) * (nin + 1) + 3 * mixer.ALPHABET)
