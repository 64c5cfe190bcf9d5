"""The step model (cm/steps.py, mix field step_expect): the byte that an array of
little-endian numbers' last step predicts, as an expected byte."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, steps
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.recipe import Recipe

# the sheet kinds (16 ... 19) give the expected-byte column that the step model borrows
PLAIN = MixConfig(orders=(1, 2, 3, 0, 16, 17, 18, 19), table_bits=11, match_bits=14,
                  network=False, selectors=2, exe=True, sheet_expect=True)
STEPS = replace(PLAIN, step_expect=True)
TEXT = b"A table of code points rises by steps; text has words instead. " * 40


def numbers(values, width: int) -> bytes:
    return b"".join(int(v).to_bytes(width, "little") for v in values)


def stepping_table(seed: int = 4) -> bytes:
    """Runs of 16- and 32-bit numbers, each run with its own start and step (a Unicode
    table's ranges, offsets into a string pool): no value repeats, so no context of past
    bytes knows the next one."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for i in range(60):
        width = 2 if i % 2 else 4
        start = int(rng.integers(0, 1 << (8 * width - 2)))
        step = int(rng.integers(1, 40))
        out += numbers(start + step * np.arange(int(rng.integers(8, 24))), width)
    return bytes(out)


def history(data: bytes) -> tuple[np.ndarray, int]:
    S = MixArrays(STEPS, 1).S
    HB = np.zeros(1 << STEPS.match_bits, np.uint8)
    HB[:len(data)] = np.frombuffer(data, np.uint8)
    return HB, (1 << S[context.S_HBITS]) - 1


def test_predicted_byte_follows_the_last_step_with_its_carry():
    table = numbers([0x29FB, 0x29FD, 0x29FF], 2)  # the next number is 0x2A01
    HB, hmask = history(table + bytes([0x01]))
    n = len(table)
    assert steps.predicted(HB, hmask, n, 2) == (0x01, 1, 0)
    assert steps.predicted(HB, hmask, n + 1, 2) == (0x2A, 1, 0)  # the carry moved it
    HB[n] = 0x02  # one more than the step: the miss carries into the next byte
    assert steps.predicted(HB, hmask, n + 1, 2) == (0x2A, 0, 0)
    assert steps.predicted(HB, hmask, 3, 2) == (-1, 0, 0)  # before two whole numbers
    assert steps.met_step(HB, hmask, n, 2)
    assert not steps.met_step(HB, hmask, n, 4)


def test_next_expected_takes_the_width_with_the_longer_run_and_only_on_binary_data():
    table = numbers(0x00100000 + 0x300 * np.arange(6), 4)
    arrays = fed(table, STEPS)
    S = arrays.S
    assert S[context.S_BINARY] == 1  # the numbers' zero bytes are control bytes
    assert S[steps.S_ST_RUN4] == 4 and S[steps.S_ST_RUN2] == 0
    assert S[steps.S_ST_BYTE] == 0x00  # the low byte of 0x00101200
    base = S[steps.S_ST_BASE]
    assert S[steps.S_ST_COUNTER] == base + ((1 * 4 + 0) * 2 + 1) * (steps.RUN_CAP + 1) + 4
    assert base + steps.COUNTERS <= len(arrays.CT)
    assert fed(TEXT, STEPS).S[steps.S_ST_BYTE] == -1  # text: no control byte, no evidence
    assert fed(table, PLAIN).S[steps.S_ST_BYTE] == -1  # off without the field


def test_step_expect_codes_stepping_tables_smaller_and_text_the_same():
    data = stepping_table()
    assert len(payload(data, STEPS)) < 0.6 * len(payload(data, PLAIN))
    assert payload(TEXT, STEPS) == payload(TEXT, PLAIN)
    assert api.decompress(api.compress(TEXT + data, Recipe(mix=STEPS))) == TEXT + data
    path = replace(STEPS, path_coding=True)
    assert api.decompress(api.compress(data, Recipe(mix=path))) == data
    with pytest.raises(ValueError, match="step_expect"):
        replace(STEPS, sheet_expect=False).validate()
