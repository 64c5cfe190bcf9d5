"""The step model: the byte that an array of little-endian numbers' last step predicts, as an
expected byte (mix field `step_expect`).

Tables of offsets, code points and indexes rise by steps: 0x29C7, 0x29C9, 0x29CB, ... The
sparse model's step contexts (sparse.step_context) hold the predicted byte in a context
hash, so each value must be learnt on its own; an expected byte (as the match model's)
generalises at once: one counter per kind of evidence learns how often the step comes true.
The prediction itself (`predicted`) is the one the sparse model's step contexts hold.

For each width w of 2 and 4 bytes (numbers aligned with the position), `run` counts how
many of the last whole numbers met their step (last + (last - before)); the width with the
longer run speaks for the next byte: the byte of last + step at its place j, after this
number's bytes so far (a carry out of them moves it). Its counter is chosen by the width,
j, whether the bytes so far kept to the step and the run (capped at RUN_CAP).

It takes the spreadsheet model's expected-byte column (mix field sheet_expect) while that
model has no byte of its own, and speaks only while the data is binary (a control byte in
the last exe.BINARY_SPAN), so text codes exactly as without it and no input is added.
Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import sheet
from rwkvzip.ops.jit import jit

WIDTHS = (2, 4)
RUN_CAP = 7  # runs of whole numbers that met the step, counted up to this
# counters: by width (2 or 4), place j (0..3), kept (0, 1) and run (0..RUN_CAP)
COUNTERS = 2 * 4 * 2 * (RUN_CAP + 1)

# fields of context.STATE: on (the mix field), the expected byte (-1: none) and its counter,
# where the counters start in CT, and each width's run
S_ST_ON, S_ST_BYTE, S_ST_COUNTER, S_ST_BASE, S_ST_RUN2, S_ST_RUN4 = cx.STATE.offsets(
    "steps.on", "steps.byte", "steps.counter", "steps.base", "steps.run2", "steps.run4")


def start_state(S: np.ndarray, on: bool, base: int) -> None:
    """The model's fields of a new stream: on with the mix field, its counters at `base` in
    CT (COUNTERS of them, initialised as the other expected bytes' counters)."""
    S[S_ST_ON] = int(on)
    S[S_ST_BYTE] = -1
    S[S_ST_COUNTER] = S[S_ST_BASE] = base
    S[S_ST_RUN2] = S[S_ST_RUN4] = 0


@jit(inline="always")
def run_field(width):
    return S_ST_RUN2 if width == 2 else S_ST_RUN4


@jit
def met_step(HB, hmask, end, width):
    """Whether the number that ends at `end` is the last one plus the step before it."""
    mask = (np.int64(1) << (8 * width)) - 1
    now = number_at(HB, hmask, end - width, width)
    last = number_at(HB, hmask, end - 2 * width, width)
    before = number_at(HB, hmask, end - 3 * width, width)
    return ((now - last) & mask) == ((last - before) & mask)


@jit(inline="always")
def number_at(HB, hmask, start, width):
    """The little-endian number of `width` bytes from position `start` of the history."""
    v = np.int64(0)
    for i in range(width - 1, -1, -1):
        v = (v << 8) | np.int64(HB[(start + i) & hmask])
    return v


@jit
def predicted(HB, hmask, n, width):
    """(byte, kept, still) at position n: the byte of the last number plus its step at n's
    place, moved by the miss of this number's bytes so far (a carry out of them), whether
    they kept to the step, and whether the step is 0; (-1, 0, 0) before two whole numbers."""
    j = n % width
    start = n - j
    if start < 2 * width:
        return -1, 0, 0
    mask = (np.int64(1) << (8 * width)) - 1
    last = number_at(HB, hmask, start - width, width)
    step = (last - number_at(HB, hmask, start - 2 * width, width)) & mask
    expected = (last + step) & mask
    kept = 1
    if j > 0:
        low = np.int64(1) << (8 * j)
        miss = (number_at(HB, hmask, start, j) - expected) & (low - 1)
        if miss >= low >> 1:
            miss -= low
        expected = (expected + miss) & mask
        kept = int(miss == 0)
    return (expected >> (8 * j)) & 0xFF, kept, int(step == 0)


@jit
def next_expected(S, HB):
    """After the byte at S[S_POS] - 1: each width's run, then the next byte's expected byte
    and counter (none on text or while the spreadsheet model expects one)."""
    if S[S_ST_ON] == 0:
        return
    n = S[cx.S_POS]
    hmask = (1 << S[cx.S_HBITS]) - 1
    for width in WIDTHS:
        if n % width == 0 and n >= 3 * width:
            f = run_field(width)
            S[f] = min(S[f] + 1, RUN_CAP) if met_step(HB, hmask, n, width) else 0
    S[S_ST_BYTE] = -1
    if S[cx.S_BINARY] == 0 or S[sheet.S_SH_X_BYTE] >= 0:
        return
    width = 4 if S[S_ST_RUN4] >= S[S_ST_RUN2] else 2
    byte, kept, _ = predicted(HB, hmask, n, width)
    if byte < 0:
        return
    S[S_ST_BYTE] = byte
    S[S_ST_COUNTER] = S[S_ST_BASE] + (((((width >> 2) * 4 + n % width) * 2 + kept)
                                        * (RUN_CAP + 1)) + S[run_field(width)])


@jit
def learn(CT, S, symbol):
    """Its counter learns whether the expected byte's bits came true."""
    if S[S_ST_BYTE] >= 0:
        cx.learn_expected_byte(CT, S[S_ST_COUNTER], S[S_ST_BYTE], symbol)
