"""The 1-bit image model (cm/image.py): silent on text (the same payload as without it),
live on a bitmap after its rows are found, a large gain there, indices inside its tables,
and a row length's multiples kept as that row."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, image
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.recipe import Recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_golden import bitmap, golden_input  # noqa: E402

SMALL = MixConfig(orders=(1, 2, 3, 0, 13), table_bits=11, match_bits=14, network=False,
                  selectors=2)


def test_on_text_the_model_is_silent_and_the_payload_unchanged():
    text = golden_input() + b"A record length can be found in text too. " * 60
    assert payload(text, replace(SMALL, image=True)) == payload(text, SMALL)


def test_a_bitmap_is_found_and_coded_far_better():
    data = golden_input()[:200] + bitmap()
    with_image, without = payload(data, replace(SMALL, image=True)), payload(data, SMALL)
    assert len(with_image) < 0.8 * len(without)
    blob = api.compress(data, Recipe(mix=replace(SMALL, image=True)))
    assert api.decompress(blob) == data
    arrays = fed(golden_input() + bitmap(), replace(SMALL, image=True))
    assert arrays.S[image.S_IMG_R] == 24 and image.live(arrays.S)


def test_the_row_detector_is_quicker_than_the_record_models():
    arrays = fed(bitmap()[:24 * 24], replace(SMALL, image=True))
    assert arrays.S[context.S_IMAGE_REC] == 24
    assert arrays.S[context.S_REC] != 24  # the record model has not decided yet


def test_a_multiple_of_the_row_length_stays_that_row():
    arrays = fed(bitmap(), replace(SMALL, image=True))
    S = arrays.S
    S[context.S_IMAGE_REC] = 48
    image.next_pixels(S, arrays.HB)
    assert S[image.S_IMG_R] == 24
    S[context.S_IMAGE_REC] = 30
    image.next_pixels(S, arrays.HB)
    assert S[image.S_IMG_R] == 30


def test_every_template_index_is_inside_its_table():
    rng = np.random.default_rng(5)
    S = np.zeros(context.N_S, dtype=np.int64)
    A = np.zeros(image.N_TEMPLATES, dtype=np.int64)
    out = np.zeros(image.N_TEMPLATES, dtype=np.int64)
    for _ in range(300):
        for slot in (image.S_IMG_U1, image.S_IMG_U2, image.S_IMG_U3, image.S_IMG_U4):
            S[slot] = rng.integers(0, 1 << 24)
        S[image.S_IMG_LEFT] = rng.integers(0, 1 << 16)
        d = int(rng.integers(0, 8))
        image.neighbourhood(S, d, A)
        image.templates(A, (int(S[image.S_IMG_LEFT]) << d) | int(rng.integers(0, 1 << d)), out)
        for i, bits in enumerate(image.TEMPLATE_BITS):
            assert 0 <= out[i] < 1 << bits
    assert image.table_size() == sum(1 << b for b in image.TEMPLATE_BITS)
