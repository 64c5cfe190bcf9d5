"""The sparse model: contexts of binary data that skip bytes, for data no other model reads.

Bytecode, object code of ISAs without a model of their own (Thumb-2, z/Architecture,
WebAssembly, the JVM's and CPython's bytecode), tables and packed records: a byte there
depends on bytes two, three or four back as much as on the last one, through fields of
fixed or varying width that contexts of the last k bytes dilute with everything between.
paq8's sparse model gives such data contexts of single bytes further back and of pairs with
gaps; this one does the same in the slots of the word, text and spreadsheet kinds (words,
lines and records mean nothing in such data), so it adds no slot and text pays nothing.

It runs in recipes with the mix field `sparse` (needs `exe`, whose measure of binary data it
uses) and is live while the data is binary (exe.py's control-byte measure: a control byte
in LIVE_CONTROL of the recent ones, which text in any encoding does not have), no other
model that knows the data's structure is live (exe.py's words, x86.py's, riscv.py's,
s390x.py's and thumb.py's instructions, the spreadsheet's record chain, a 1-bit image of
long rows) and the last three bytes are not all printable ASCII: inside a binary's strings
the slots keep their word and text contexts (the tuning slices of Unicode tables, 6 x 128 KB
of glib's, PCRE2's, CPython's and unicodedata2's tables: 0.7536 to 0.7520 bpb; the other
binary tuning slices unchanged). With the mix field `sparse_binary` it is also live where
the data is binary and less than 3/4 of the recent bytes are printable (PRINTABLE_MAX): a
table of 16-bit code points 0x29xx has no control byte and kept it off (the Unicode-table
tuning slices -0.2 %, Mach-O's -1.1 %; string tables stay as they were: sum 0.44 % worse
without the printable test). With the mix field `sparse_le` it is live over the
executable model's little-endian words too (AArch64, POWER LE), in place of that model's
word contexts (its selector stays): AArch64 and POWER code of the tuning half -2.1 to
-2.7 % (big-endian words, SPARC's: +0.7 %; x86 and RISC-V code: +2 to +12 %; Thumb-2: the
same). While live it sets, for the next byte, with a(k) the byte k back:

* the word kind: a(1), a(3);       word_bigram: a(2);
* word_trigram: a(1) and the bytes that ended its last two runs (in tables of runs, what
  follows a run; in arrays of numbers, what followed the last zero bytes; in place of a(2),
  a(3): the Unicode-table slices 0.7496 to 0.7462 bpb, the other binary slices 2.3391 to
  2.3389);
* word_skip: a(3);                 column: a(1), a(4);
* sheet_field: a(2), a(4), or with the mix field `rec_follow` while a record length r is
  known, the column and the two bytes that followed (a(1), a(r)) the last two times
  (`follow_context`: tables of records whose rows go through the same values, a Unicode
  table's cases; the Unicode-table tuning slices -0.23 %, every one better);
* sheet_above: a(1), a(2), a(4);
* sheet_left, with the mix field `sparse_nibbles` while it is live over little-endian
  words: the place in the word and the top nibbles of a(1) ... a(4) (AArch64 and POWER
  code of the tuning half -0.16 to -0.32 %; in the step contexts' slots: less);
* sheet_col, and line_above and sheet_left: the byte that the last step of an array of
  32-bit (16-bit) little-endian numbers predicts (`step_context`). Tables of offsets,
  indexes and code points rise by steps. On the tuning slices of Unicode tables
  (unicodedata2's PE .rdata and Mach-O name tables, 3 x 128 KB) they took the default from
  1.4262 to 1.4201 bpb in place of the position's parity with a(2) and of a(1) with the
  bytes since the last zero byte; the other binary tuning slices, where the model is live
  in places (10 x 128 KB), from 2.3641 to 2.3640.

Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import exe, riscv, s390x, steps, thumb, x86
from rwkvzip.cm.history import byte_back, hash32
from rwkvzip.ops.jit import jit

# fields of context.STATE: on (the mix field sparse), whether the model is live for the
# next byte, whether it is live over little-endian words (mix field sparse_le), where in CT
# the follow table starts (mix field rec_follow; 0: none), whether it is live wherever the
# data is binary (mix field sparse_binary) and the recent bytes' printable average (as exe's
# control average), whether words' nibbles take a slot (mix field sparse_nibbles);
# S[S_SP_ENDS + c]: the bytes that came after the last two runs of c (the later one low; a
# run may be one byte long)
(S_SP_ON, S_SP_LIVE, S_SP_LE, S_SP_FOLLOW, S_SP_BINARY, S_SP_PRINTABLE, S_SP_NIBBLES,
 S_SP_ENDS) = cx.STATE.offsets("sparse.on", "sparse.live", "sparse.le", "sparse.follow",
                               "sparse.binary", "sparse.printable", "sparse.nibbles",
                               "sparse.ends")
# sparse_binary: live on binary data whose recent bytes are less than this printable (a table
# of 16-bit code points 0x29xx is half printable; a binary's string tables are not live)
PRINTABLE_MAX = (exe.CONTROL_ONE << exe.CONTROL_SHIFT) * 3 // 4
# rec_follow's table in CT: for each pair (a(1), a(r)), the two bytes that followed it the
# last two times (the later one low)
FOLLOW_SIZE = 1 << 16


def table_size(follow: bool) -> int:
    """uint32 entries the model appends to CT (the follow table with rec_follow)."""
    return FOLLOW_SIZE * int(follow)


def start_state(S: np.ndarray, on: bool, le: bool, follow_base: int, binary: bool,
                nibbles: bool) -> None:
    """The model's fields from the recipe's sparse, sparse_le, (follow_base > 0, its
    table's place in CT) rec_follow, sparse_binary and sparse_nibbles."""
    S[S_SP_ON] = int(on)
    S[S_SP_BINARY] = int(binary)
    S[S_SP_NIBBLES] = int(nibbles)
    S[S_SP_LE] = int(le)
    S[S_SP_FOLLOW] = follow_base


@jit
def is_live(S):
    binary = S[exe.S_EXE_CONTROL] >= exe.LIVE_AT or (
        S[S_SP_BINARY] != 0 and S[cx.S_BINARY] != 0 and S[S_SP_PRINTABLE] < PRINTABLE_MAX)
    if (not binary or S[x86.S_X86_SEL] >= 0
            or S[riscv.S_RV_SEL] >= 0 or S[s390x.S_Z_SEL] >= 0 or S[thumb.S_T_SEL] >= 0):
        return False
    if S[exe.S_EXE_SEL] >= 0 and (S[S_SP_LE] == 0 or S[exe.S_EXE_ISA] == exe.ISA_BE):
        return False
    return not exe.structure_known(S)


@jit(inline="always")
def printable(byte):
    return 0x20 <= byte < 0x7F


@jit
def step_context(HB, n, hmask, width):
    """The next byte's context in an array of `width`-byte little-endian numbers (aligned
    with the position): the byte the last two numbers' step predicts, after this number's
    bytes so far (a carry out of them moves it), whether those bytes kept to the step, the
    byte's place and whether the step is 0 (steps.predicted). Offsets, indexes and code
    points rise by steps the byte contexts see only as pairs they must learn one by one."""
    b, kept, still = steps.predicted(HB, hmask, n, width)
    if b < 0:
        return -1
    return (width << 12) | ((n % width) << 10) | (kept << 9) | (still << 8) | b


@jit(inline="always")
def nibbles(a1, a2, a3, a4):
    """The top nibbles of four bytes (16 bits): an instruction word's opcode bits and the
    class of the words before, without its registers and immediates."""
    return (a1 >> 4) | (a2 & 0xF0) | ((a3 & 0xF0) << 4) | ((a4 & 0xF0) << 8)


@jit
def follow_context(CT, S, HB, n, hmask, a1):
    """rec_follow's context while a record length r is known: the next byte's column and
    the two bytes that followed (a(1), a(r)) the last two times (paq8's record model's
    indirect contexts: in tables of records, what came after this byte beside the one above
    it); -1 without."""
    r = S[cx.S_REC]
    if S[S_SP_FOLLOW] == 0 or r == 0 or n < r:
        return -1
    pair = (a1 << 8) | cx.back(HB, n, hmask, r)
    return (min(n % r, 255) << 16) | np.int64(CT[S[S_SP_FOLLOW] + pair])


@jit
def follow_update(CT, S, HB, n, hmask, a1, a2):
    """rec_follow: the pair (a(1), a(r)) before the byte just coded (a1) learns it."""
    r = S[cx.S_REC]
    if S[S_SP_FOLLOW] == 0 or r == 0 or n <= r + 1:
        return
    i = S[S_SP_FOLLOW] + ((a2 << 8) | cx.back(HB, n, hmask, r + 1))
    CT[i] = np.uint32(((np.int64(CT[i]) << 8) | a1) & 0xFFFF)


@jit
def next_contexts(CT, S, HB):
    """After thumb.next_contexts: while live, the sparse contexts of the next byte."""
    if S[S_SP_ON] == 0:
        return
    hist = S[cx.S_HIST]
    a1, a2, a3, a4 = byte_back(hist, 1), byte_back(hist, 2), byte_back(hist, 3), byte_back(
        hist, 4)
    if a1 != a2:  # a run of a2 ended
        S[S_SP_ENDS + a2] = ((S[S_SP_ENDS + a2] << 8) | a1) & 0xFFFF
    n = S[cx.S_POS]
    hmask = (1 << S[cx.S_HBITS]) - 1
    follow_update(CT, S, HB, n, hmask, a1, a2)
    text = printable(a1) or a1 == 9 or a1 == 10 or a1 == 13
    S[S_SP_PRINTABLE] += (np.int64(text) * exe.CONTROL_ONE
                          - (S[S_SP_PRINTABLE] >> exe.CONTROL_SHIFT))
    S[S_SP_LIVE] = int(is_live(S) and not (printable(a1) and printable(a2) and printable(a3)))
    if S[S_SP_LIVE] == 0:
        return
    words = S[S_SP_NIBBLES] != 0 and S[exe.S_EXE_SEL] >= 0
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if k == cx.WORD_ORDER:
            x = (1 << 16) | (a1 << 8) | a3
        elif k == cx.KIND_WORD_BIGRAM:
            x = (2 << 16) | a2
        elif k == cx.KIND_WORD_TRIGRAM:
            x = (10 << 24) | (a1 << 16) | S[S_SP_ENDS + a1]
        elif k == cx.KIND_WORD_SKIP:
            x = (4 << 16) | a3
        elif k == cx.KIND_COLUMN:
            x = (5 << 16) | (a1 << 8) | a4
        elif k == cx.KIND_SHEET_FIELD:
            follow = follow_context(CT, S, HB, n, hmask, a1)
            x = (12 << 28) | follow if follow >= 0 else (6 << 16) | (a2 << 8) | a4
        elif k == cx.KIND_SHEET_COL:
            x = (7 << 16) | step_context(HB, n, hmask, 4)
        elif k == cx.KIND_SHEET_ABOVE:
            x = (8 << 24) | (a1 << 16) | (a2 << 8) | a4
        elif k == cx.KIND_SHEET_LEFT and words:
            x = (13 << 24) | (((n - S[exe.S_EXE_PHASE]) & 3) << 16) | nibbles(a1, a2, a3, a4)
        elif k == cx.KIND_LINE_ABOVE or k == cx.KIND_SHEET_LEFT:  # noqa: SIM109 - numba
            x = (9 << 16) | step_context(HB, n, hmask, 2)
        else:
            continue
        S[cx.S_CTX + m] = hash32(x * 0x2545F491 + 0x6A09E667)
