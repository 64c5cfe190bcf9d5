"""The spreadsheet record model (cm/sheet.py): it follows a BIFF record chain from its BOF
record, keeps each column's last cell, drops the chain at a header no record has, is absent
on other data (the same payload as without it) and codes a worksheet far better."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from mixing_probe import fed, payload

from rwkvzip import api, selftest
from rwkvzip.cm import context, sheet
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.recipe import Recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_golden import bitmap, golden_input  # noqa: E402
from make_golden import sheet as worksheet  # noqa: E402

SMALL = MixConfig(orders=(1, 2, 3, 0, 13), table_bits=11, match_bits=14, network=False,
                  selectors=2)
SHEET = replace(SMALL, orders=SMALL.orders + (16, 17, 18, 19))
EXPECT = replace(SHEET, sheet_expect=True)
RECORDS = 1 + 12 * 10 + 1  # BOF, the cells, EOF


def sheet_contexts(S) -> np.ndarray:
    K = S[context.S_K]
    return S[context.S_CTX + K - 4:context.S_CTX + K]


def test_the_chain_is_followed_to_the_end_and_columns_kept():
    text = golden_input()
    data = text + worksheet()
    S = fed(data, SHEET).S
    assert S[sheet.S_SH_RECORDS] == RECORDS
    assert S[sheet.S_SH_NEXT] == len(data)  # just after the EOF record
    for col in (1, 4, 7):  # integer columns: the last row's type and column
        cell = S[sheet.S_SH_CELLS + sheet.CELL_BYTES * col:][:8]
        assert list(cell) == [2, 0, 9, 0, 11, 0, col, 0]
    assert S[sheet.S_SH_CELLS + sheet.CELL_BYTES * 2] == 5  # a blank column
    cell = S[sheet.S_SH_CELLS2 + sheet.CELL_BYTES * 4:][:8]  # the cell before: a row up
    assert list(cell) == [2, 0, 9, 0, 10, 0, 4, 0]


def test_absent_on_text_and_after_a_header_no_record_has():
    S = fed(golden_input(), SHEET).S
    assert S[sheet.S_SH_NEXT] == -1 and (sheet_contexts(S) == context.ABSENT).all()
    S = fed(worksheet() + b"\xff" * 8 + b"more bytes after it", SHEET).S
    assert S[sheet.S_SH_NEXT] == -1 and (sheet_contexts(S) == context.ABSENT).all()
    S = fed(worksheet()[:-4], SHEET).S  # inside the chain: every kind has a context
    assert S[sheet.S_SH_NEXT] >= 0 and (sheet_contexts(S) >= 0).all()


def test_the_chart_kinds_stand_aside_while_the_chain_is_followed():
    """The chart kinds (binary data only) have no context inside a record chain, and have
    one on the binary data after it."""
    charts = replace(SHEET, orders=(context.KIND_CHART, context.KIND_CHART_FINE) + SHEET.orders,
                     exe=True)
    S = fed(worksheet()[:-4], charts).S
    assert S[sheet.S_SH_NEXT] >= 0 and S[context.S_BINARY] == 1
    assert S[context.S_CTX] == S[context.S_CTX + 1] == context.ABSENT
    S = fed(worksheet() + b"\xff" * 8 + bytes(range(40)), charts).S
    assert S[sheet.S_SH_NEXT] == -1 and S[context.S_BINARY] == 1
    assert S[context.S_CTX] >= 0 and S[context.S_CTX + 1] >= 0


def test_on_text_the_payload_is_unchanged():
    text = golden_input() + b"Cells have rows and columns; text has neither. " * 40
    assert payload(text, SHEET) == payload(text, SMALL)


def test_the_expected_byte_counts_rows_up_and_costs_nothing_on_text():
    """The row field is the column's last row + 1: extrapolated from two cells it is always
    right (its hit history full), and it saves bytes; on text it never has a byte."""
    data = golden_input()[:300] + worksheet(rows=40)
    S = fed(data, EXPECT).S
    for col in range(10):
        assert S[sheet.S_SH_HITS + sheet.CELL_BYTES * col + 4] == 3  # the row's low byte
    assert len(payload(data, EXPECT)) < 0.97 * len(payload(data, SHEET))
    text = golden_input() + b"Cells have rows and columns; text has neither. " * 40
    assert payload(text, EXPECT) == payload(text, SMALL)


def test_a_worksheet_is_coded_far_better_and_decodes():
    data = golden_input()[:300] + worksheet(rows=40)
    assert len(payload(data, SHEET)) < 0.85 * len(payload(data, SMALL))
    for mix in (SHEET, EXPECT):
        blob = api.compress(data, Recipe(mix=mix))
        assert api.decompress(blob) == data


def test_the_golden_executable_input_exercises_the_model():
    """The cards' vectors code EXE_INPUT: the golden input, a bitmap, a worksheet (whose
    records the model follows to its end) and code."""
    data = selftest.load_input(selftest.golden_dir(), selftest.EXE_INPUT)
    sheet_end = len(golden_input() + bitmap() + worksheet())
    assert data[:sheet_end] == golden_input() + bitmap() + worksheet()
    S = fed(data[:sheet_end], SHEET).S
    assert S[sheet.S_SH_RECORDS] == RECORDS and S[sheet.S_SH_NEXT] == sheet_end
