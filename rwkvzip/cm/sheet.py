"""The spreadsheet record model: contexts for the fields of Excel BIFF records.

A BIFF stream (Excel 2 ... 2003 workbooks, e.g. kennedy.xls) is a chain of records: a
16-bit type, a 16-bit length, then that many bytes; a cell record's body starts with its
row and column (16 bits each). Bytes at a fixed distance or a fixed position mod a record
length cannot say which cell a byte belongs to (records differ in length, so phases shift);
following the chain can. A cell's value depends most on its record type and its column:
on kennedy.xls the context (type, column) alone, as a sparse context a(11), a(4), a(5),
took 0.122 to 0.103 bpb (models/README.md).

The parser follows the chain from a BOF record (type 0x0009, 0x0209, 0x0409 or 0x0809,
length 4 ... 32) and drops it at a header no BIFF record has (length over 8224, type from
0x2000); while it follows none, the four kinds' contexts are absent (context.ABSENT), so
on other data they cost nothing and give no evidence. Everything is integer.

Kinds (context.KIND_SHEET_*), for the next byte at offset o of its record (the header's
four bytes are offsets 0 ... 3; o capped at OFFSET_CAP), each on (o, the record type; in
the first two header bytes, the type of the record before, flagged): FIELD with the last
byte; COL with the cell's column (from offset 8 on, before that the last cell's column + 1);
ABOVE with that and the byte at offset o of that column's last cell (kept for 256 columns,
columns mod 256, offsets 0 ... 15: the cell one row up); LEFT with the column and the byte
at offset o of the record before. While a chain is followed, the byte that chooses the
second mixer's weights and the second APM's row is (o, type) instead of the last byte
(mixer.second_selector). On kennedy.xls over cm-v2 with the image model: 0.1223 bpb; FIELD,
COL, ABOVE 0.0860; the type before in the header 0.0840; LEFT 0.0824; the selector 0.0802.

With the mix field sheet_expect the mixer also hears the expected byte (`expect`): the
column's last two cells extrapolated, which predicts what no context does, a row number
that counts up (on kennedy.xls, mix-v10 0.0798 to mix-v13 0.0764).
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# fields of context.STATE: on (the recipe has a sheet kind), where the next
# record starts (-1: no chain followed), the current record's start, the one before's, the
# current type, its column (-1 until read) and the last cell's, records followed, the
# selector (below; -1 while no chain is followed); the expected byte's: on (mix field
# sheet_expect), the byte (-1: none), its counter, its hit history's slot, the counters'
# base in CT; then the column memory
(S_SH_ON, S_SH_NEXT, S_SH_START, S_SH_PREV, S_SH_TYPE, S_SH_COL, S_SH_LAST_COL,
 S_SH_RECORDS, S_SH_SEL, S_SH_X_ON, S_SH_X_BYTE, S_SH_X_COUNTER, S_SH_X_HITS,
 S_SH_X_BASE) = cx.STATE.offsets(*(f"sheet.{name}" for name in (
    "on", "next", "start", "prev", "type", "col", "last_col", "records", "sel", "x_on",
    "x_byte", "x_counter", "x_hits", "x_base")))
CELL_BYTES = cx.SHEET_CELL_BYTES  # offsets of a cell record kept per column
COLUMNS = cx.SHEET_COLUMNS
# S[S_SH_CELLS + 16 * (column & 255) + o]: the column's last cell's byte o; at S_SH_CELLS2
# the cell's before it; at S_SH_HITS whether the expected bytes there were right (2 bits);
# S[S_SH_SUCC + (column & 255)]: the column of the cell that came after it last (-1: none)
S_SH_CELLS, S_SH_CELLS2, S_SH_HITS, S_SH_SUCC = cx.STATE.offsets(
    "sheet.cells", "sheet.cells2", "sheet.hits", "sheet.succ")
# the expected byte's counters: by offset (< CELL_BYTES), the type's low 3 bits, whether
# the cell before the last is known, and the hit history
EXPECT_COUNTERS = CELL_BYTES * 8 * 2 * 4
BOF_TYPE_LO = 0x09  # a BOF record's type: 0x09 and a version byte (BIFF2 ... BIFF8)
BOF_VERSIONS = (0x00, 0x02, 0x04, 0x08)
BOF_LEN_MIN, BOF_LEN_MAX = 4, 32
LEN_MAX = 8224  # the longest BIFF record body
TYPE_END = 0x2000  # no BIFF record type is this or above
OFFSET_CAP = 31  # offsets from here on share contexts (long records: strings, tables)
COL_AT = 6  # a cell record's column: offsets 6, 7 (after type, length, row)


def enabled(orders) -> bool:
    """Whether a recipe's context kinds need the parser."""
    return any(cx.KIND_SHEET_FIELD <= k <= cx.KIND_SHEET_LEFT for k in orders)


def start_state(S: np.ndarray, orders: tuple[int, ...], expect: bool, expect_base: int) -> None:
    """The model's fields of a new stream's state: no record chain followed, no column or
    cell known; the expected byte's input on with `expect`, its counters at expect_base."""
    S[S_SH_ON] = int(enabled(orders))
    S[S_SH_NEXT] = S[S_SH_COL] = S[S_SH_LAST_COL] = -1
    S[S_SH_CELLS:S_SH_HITS] = -1  # both cells of every column unknown
    S[S_SH_SUCC:S_SH_SUCC + COLUMNS] = -1
    S[S_SH_X_ON] = int(expect)
    S[S_SH_X_BYTE] = -1
    S[S_SH_X_BASE] = expect_base


@jit
def byte_at(HB, hmask, i):
    return np.int64(HB[i & hmask])


@jit
def follow(S, HB, hmask):
    """Move the parser over the byte just appended (at S[S_POS] - 1)."""
    p = S[cx.S_POS] - 1
    b = byte_at(HB, hmask, p)
    nxt = S[S_SH_NEXT]
    if nxt < 0:  # look for a BOF record's header ending here
        if (p >= 3 and b == 0 and byte_at(HB, hmask, p - 3) == BOF_TYPE_LO
                and BOF_LEN_MIN <= byte_at(HB, hmask, p - 1) <= BOF_LEN_MAX):
            v = byte_at(HB, hmask, p - 2)
            if v == BOF_VERSIONS[0] or v == BOF_VERSIONS[1] or v == BOF_VERSIONS[2] \
                    or v == BOF_VERSIONS[3]:
                begin(S, p - 3, BOF_TYPE_LO | (v << 8), byte_at(HB, hmask, p - 1))
                S[S_SH_LAST_COL] = -1
                S[S_SH_RECORDS] = 1
        return
    if p == nxt + 3:  # the next record's header is complete
        rtype = byte_at(HB, hmask, nxt) | (byte_at(HB, hmask, nxt + 1) << 8)
        length = byte_at(HB, hmask, nxt + 2) | (b << 8)
        if length > LEN_MAX or rtype >= TYPE_END:
            S[S_SH_NEXT] = -1  # not a record: the chain is lost
            return
        begin(S, nxt, rtype, length)
        S[S_SH_RECORDS] += 1
        return
    if p >= nxt:  # inside the next record's header
        return
    o = p - S[S_SH_START]
    if o == COL_AT + 1:  # the column is read: its last cell moves back, keep the header
        col = byte_at(HB, hmask, p - 1) | (b << 8)
        if S[S_SH_LAST_COL] >= 0:
            S[S_SH_SUCC + (S[S_SH_LAST_COL] & (COLUMNS - 1))] = col
        S[S_SH_COL] = col
        S[S_SH_LAST_COL] = col
        c = CELL_BYTES * (col & (COLUMNS - 1))
        for i in range(CELL_BYTES):
            S[S_SH_CELLS2 + c + i] = S[S_SH_CELLS + c + i]
        for i in range(COL_AT + 2):
            S[S_SH_CELLS + c + i] = byte_at(HB, hmask, S[S_SH_START] + i)
    elif COL_AT + 1 < o < CELL_BYTES and S[S_SH_COL] >= 0:
        S[S_SH_CELLS + CELL_BYTES * (S[S_SH_COL] & (COLUMNS - 1)) + o] = b


@jit
def following(S):
    """Whether a record chain is followed (the sheet kinds have contexts for the next byte)."""
    return S[S_SH_ON] != 0 and S[S_SH_NEXT] >= 0


@jit
def begin(S, start, rtype, length):
    S[S_SH_PREV] = S[S_SH_START]
    S[S_SH_START] = start
    S[S_SH_TYPE] = rtype
    S[S_SH_NEXT] = start + 4 + length
    S[S_SH_COL] = -1


@jit
def next_contexts(S, HB):
    """After context.next_contexts: follow the record chain and set the sheet kinds'
    contexts for the next byte (and while it follows one, the text and chart kinds' are
    absent)."""
    if S[S_SH_ON] == 0:
        return
    hmask = (1 << S[cx.S_HBITS]) - 1
    follow(S, HB, hmask)
    n = S[cx.S_POS]  # the next byte's position
    nxt = S[S_SH_NEXT]
    live = nxt >= 0
    guessed = True  # col is the last cell's column + 1, not yet read
    if not live:
        o = 0
        rtype = -1
        col = -1
        left = -1
    elif n >= nxt:  # the next record's header: its type once both bytes are in
        o = n - nxt
        if o >= 2:
            rtype = byte_at(HB, hmask, nxt) | (byte_at(HB, hmask, nxt + 1) << 8)
        else:  # not read yet: the record before's type
            rtype = S[S_SH_TYPE] | 0x10000
        col = S[S_SH_LAST_COL] + 1
        left = byte_at(HB, hmask, S[S_SH_START] + o)
    else:
        o = n - S[S_SH_START]
        rtype = S[S_SH_TYPE]
        guessed = S[S_SH_COL] < 0
        col = S[S_SH_LAST_COL] + 1 if guessed else S[S_SH_COL]
        left = byte_at(HB, hmask, S[S_SH_PREV] + o) if S[S_SH_PREV] + o < S[S_SH_START] else -1
    oc = min(o, OFFSET_CAP)
    S[S_SH_SEL] = (oc | ((rtype & 7) << 5)) if live else -1
    c = CELL_BYTES * (col & (COLUMNS - 1)) + o  # the column memory's slot of this byte
    above = S[S_SH_CELLS + c] if o < CELL_BYTES else -1
    if S[S_SH_X_ON] != 0:
        if guessed and S[S_SH_LAST_COL] >= 0:  # the column that followed the last one
            succ = S[S_SH_SUCC + (S[S_SH_LAST_COL] & (COLUMNS - 1))]
            if succ >= 0:
                c = CELL_BYTES * (succ & (COLUMNS - 1)) + o
        expect(S, c, o, rtype, S[S_SH_CELLS + c] if live and o < CELL_BYTES else -1)
    last = byte_at(HB, hmask, n - 1)
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        # words, lines and shapes of bytes mean nothing inside records (kennedy.xls: the
        # chart kinds live there cost 0.6 %)
        if live and (cx.is_text_kind(k) or cx.is_binary_kind(k)):
            S[cx.S_CTX + m] = cx.ABSENT
            continue
        if not cx.is_sheet_kind(k):
            continue
        if not live:
            S[cx.S_CTX + m] = cx.ABSENT
            continue
        h = mix(mix(hash32(k * 0x2545F491 + 0x3C6EF372), oc), rtype)
        if k == cx.KIND_SHEET_FIELD:
            h = mix(h, last)
        else:
            h = mix(h, col & 0xFFFF)
            if k == cx.KIND_SHEET_ABOVE:
                h = mix(h, above)
            elif k == cx.KIND_SHEET_LEFT:
                h = mix(h, left)
        S[cx.S_CTX + m] = h


@jit(inline="always")
def mix(h, x):
    """h extended by x >= -1."""
    return hash32(h * 0x01000193 + x + 2)


@jit
def expect(S, c, o, rtype, above):
    """The expected byte at column-memory slot c (offset o): the column's last two cells
    extrapolated, 2 above - above2 (mod 256; a row number that counts up, a value that
    repeats or steps), or above alone while the cell before it is unknown."""
    if above < 0:
        S[S_SH_X_BYTE] = -1
        return
    above2 = S[S_SH_CELLS2 + c]
    known = int(above2 >= 0)
    S[S_SH_X_BYTE] = (2 * above - above2) & 0xFF if known else above
    S[S_SH_X_HITS] = S_SH_HITS + c
    S[S_SH_X_COUNTER] = S[S_SH_X_BASE] + (((o * 8 + (rtype & 7)) * 2 + known) * 4
                                          + S[S_SH_HITS + c])


@jit
def expect_learn(CT, S, symbol):
    """Its counter learns whether the expected byte's bits came true; the slot's hits too."""
    e = S[S_SH_X_BYTE]
    if S[S_SH_X_ON] == 0 or e < 0:
        return
    cx.learn_expected_byte(CT, S[S_SH_X_COUNTER], e, symbol)
    h = S[S_SH_X_HITS]
    S[h] = ((S[h] << 1) | int(symbol == e)) & 3
