"""The column-delta model: a byte of a binary record predicted as the byte above it plus a
learnt step.

Tables of fixed-size records (an executable's symbol, relocation and debug tables) hold
numbers that grow from one record to the next by varying steps: string offsets, line
numbers, addresses. The record kinds (context.py, 12 ... 15) see the byte above, but learn
each of its values apart; the step (this byte minus the byte r back, mod 256, r the
detected record length) repeats across values. The model counts the steps taken in four
contexts of the column (pos mod r): the column alone, with the step it took the record
before, with the byte to the left, with the byte three back (a 32-bit field's top byte, for
its last). With the mix field `delta_carry` the second and the fourth also tell whether the
byte to the left is below, equal to or above the byte above it: in a table of growing
little-endian numbers (offsets, addresses) that is the carry into this byte, which makes its
step (0 or 1) certain (the Unicode-table tuning slices: -1.4 %; in the second alone: -1.0 %;
in all four: -1.6 %, but an AArch64 slice of crypto code +0.4 %, where two are +0.0 %).
With the mix field `delta_max` the third counts its steps from the column's largest byte in
the last PEAK_RECORDS records (the peak), in the context of the column (and the carry), in
place of the byte to the left: a multi-stage lookup table numbers its blocks in the order it
first uses them, so its next value is often a repeat or the largest so far plus one (the
Unicode-table tuning slices: -1.0 % more; the peak of 64 records: -0.8 %).
With the mix field `delta_nonzero`, where the byte above is 0 the fourth counts its steps
from the column's last nonzero byte, and its context says so: a sparse table (runs of zero
entries between growing offsets, as unicodedata's decomposition index) goes on from its
last entry, which the byte above, 0, does not tell (the Unicode-table tuning slices -0.2 %,
sum -0.4 %). With `delta_ff` as well a byte 0xFF is empty too: lookup stages whose unset
entries are -1 (libunistring's: its tuning slices -0.5 to -1.0 %; the other tuning slices
the same bytes).
With the mix field `delta_recent` a step counts RECENT_STEP and a histogram is halved past
RECENT_LIMIT, so it holds its context's last dozen steps or so: an executable's tables share
record lengths and columns but each numbers its entries its own way, which counts of the
whole stream mix up (the Unicode-table tuning slices -0.76 %; 16 steps with a smaller
share for the +1 of every count: -0.72 %; the column's histogram kept slow: -0.53 %).
With the mix field `delta_switch` the switch starts every column's weights with TRUST_INIT
for the mixer (which hears the histograms too) and keeps each weight above SWITCH_SHARE /
EXPERTS: a column seen for the first time, as after the record length changed, coded at a
fifth of the mixer's probability, about 2.3 bits a byte for a record's length (-0.09 %;
the share: -0.15 % more).
With the mix field `delta_apm`, while the model is heard, the second APM's row is chosen
by the next byte's column in place of the second mixer's selector byte (the Unicode-table
tuning slices -0.20 %, every slice better).
Shifted by its base (the byte above, the peak, or the last nonzero byte), each histogram is
a distribution of the next byte, used twice:

* as four mixer inputs: at every node of the byte's tree the log-odds of the histogram's
  mass under the node's two children (as the network's input);
* in the switch, after the APMs: the coded distribution is a mixture of the mixer's and the
  four histograms', with weights by column that follow each one's likelihood of the coded
  bytes (Bayes, with a share for each so that none is lost for good). The mixer learns
  which input to trust by node and context, slowly; the switch learns it by column, within
  a few records (sum's debug table: 1,301 -> 1,262 bytes on top of the inputs).

Counts and subtree sums are integers; the inputs go through the stretch table, the
switch's arithmetic is float64 in a fixed order (weights stored as float32).

The model runs in recipes with the mix field `delta` (which needs `exe`). It is live while a
record length in 2 ... MAX_R is detected and the data is binary by the executable model's
measure (exe.py: a control byte in LIVE_CONTROL of the recent ones; with the mix field
delta_binary, one in the last BINARY_SPAN, so that a table of printable bytes, such as
unicodedata's 16-bit offsets from 0x2000 up, keeps the model: the Unicode-table tuning
slices -1.0 %; the sparse model live there too, -1.1 %, but sum +0.5 %) and no model that knows
the data's structure speaks for it (exe.structure_known: a spreadsheet's record chain, a
1-bit image of long rows: there it cost kennedy.xls 4.5 % and ptt5 1.2 %), and heard (its inputs
and the switch) while the column histogram has lately given the coded bytes a fair
probability (HEARD_AT), which the steps of real records do and a chance record length in
machine code does not. Text has no control bytes: it codes exactly as without the model.
"""


from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import exe
from rwkvzip.cm.history import hash32
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.jit import jit

if TYPE_CHECKING:
    from rwkvzip.cm.mixing import MixConfig

INPUTS = 4  # histograms, each one column of the mixer
ROW_BITS = 14  # 2**ROW_BITS histograms of 256 counts (hashed contexts)
MAX_R = 255  # longest record the model follows
STEP = 64  # a step's count grows by this; every count starts at 0 and weighs 1 more
ROW_LIMIT = 1 << 22  # a histogram whose total passes this is halved
RECENT_STEP, RECENT_LIMIT = 128, 1 << 11  # ... with the mix field delta_recent
TRUST_INIT = 0.9  # with the mix field delta_switch: the switch's first weight of the mixer
W_INIT = 0.2  # every mixer's initial weight of each input
SCORE_SHIFT = 5  # the score: the column histogram's probability of the coded bytes (16-bit
HEARD_AT = (1 << (16 + SCORE_SHIFT)) // 8  # fixed point), averaged over ~32 live bytes;
# the mixer hears the model while it is at least this
PEAK_INPUT = 2  # with the mix field delta_max, the histogram that counts steps from the peak
PEAK_RECORDS = 32  # the peak: the largest byte of the column in this many records before
NONZERO_INPUT = 3  # with the mix field delta_nonzero, the histogram whose base skips zeros
# fields of context.STATE: on (mix fields delta, delta_carry, delta_max, delta_binary,
# delta_select, delta_apm, delta_nonzero, delta_ff, delta_switch), a step's count and the
# total past which a histogram is halved (STEP and ROW_LIMIT, or with delta_recent
# RECENT_*), the histograms' base in CT, the subtree sums' base in CT (INPUTS x 512),
# whether the next byte is live, the byte above it, the peak's step base (PEAK_INPUT's
# shift), whether it is heard, the score, the switch's base in MX, the next byte's column,
# NONZERO_INPUT's step base, the histograms' rows (INPUTS) and each column's last nonempty
# byte (ALPHABET; `empty`)
(S_DL_ON, S_DL_CARRY, S_DL_MAX, S_DL_BINARY, S_DL_SELECT, S_DL_APM, S_DL_NONZERO,
 S_DL_FF, S_DL_SWITCH, S_DL_STEP, S_DL_LIMIT, S_DL_BASE, S_DL_T, S_DL_LIVE, S_DL_ABOVE,
 S_DL_PEAK, S_DL_HEARD, S_DL_SCORE, S_DL_MX, S_DL_COL, S_DL_NZ_BASE, S_DL_ROW,
 S_DL_LAST_NZ) = cx.STATE.offsets(*(f"delta.{name}" for name in (
     "on", "carry", "max", "binary", "select", "apm", "nonzero", "ff", "switch", "step", "limit",
     "base", "t", "live", "above", "peak", "heard", "score", "mx", "col", "nonzero_base", "row",
     "last_nonzero")))
assert cx.STATE.length("delta.row") == INPUTS


# The switch: the coded distribution is a mixture of the mixer's and the histograms', with
# weights by column that follow each one's likelihood of the coded bytes (Bayes), every one
# kept above SHARE / EXPERTS. In MX: the mixer's probability at each node of the byte (after
# the APMs), then the weights.
EXPERTS = INPUTS + 1
SHARE = 1.0 / 256.0
SWITCH_SHARE = 1.0 / 1024.0  # ... with the mix field delta_switch
MX_PF, MX_W = 0, ALPHABET


def weights_size() -> int:
    """float32s the model keeps in MX."""
    return MX_W + (MAX_R + 1) * EXPERTS


def init_weights(S: np.ndarray, MX: np.ndarray) -> None:
    """Every column's switch weights: all alike, or with delta_switch the mixer's TRUST_INIT
    (it hears the histograms too; a column seen for the first time, as after the record
    length changed, would otherwise code at a fifth of the mixer's probability)."""
    w = MX[S[S_DL_MX] + MX_W:S[S_DL_MX] + weights_size()]
    if S[S_DL_SWITCH]:
        w[:] = (1.0 - TRUST_INIT) / INPUTS
        w[::EXPERTS] = TRUST_INIT
    else:
        w[:] = 1.0 / EXPERTS


def table_size() -> int:
    """uint32 counts and subtree sums the model appends to CT."""
    return (ALPHABET << ROW_BITS) + INPUTS * 2 * ALPHABET


def start_state(S: np.ndarray, cfg: MixConfig, base: int) -> None:
    """The model's fields of a new stream's state from the recipe's MixConfig `cfg` (its
    fields delta, delta_carry, delta_max, delta_binary, delta_select, delta_apm,
    delta_nonzero, delta_ff, delta_switch, delta_recent): the counts at `base` in CT, the
    subtree sums after them (table_size in all)."""
    S[S_DL_ON] = int(cfg.delta)
    S[S_DL_CARRY] = int(cfg.delta_carry)
    S[S_DL_MAX] = int(cfg.delta_max)
    S[S_DL_BINARY] = int(cfg.delta_binary)
    S[S_DL_SELECT] = int(cfg.delta_select)
    S[S_DL_APM] = int(cfg.delta_apm)
    S[S_DL_NONZERO] = int(cfg.delta_nonzero)
    S[S_DL_FF] = int(cfg.delta_ff)
    S[S_DL_SWITCH] = int(cfg.delta_switch)
    S[S_DL_STEP], S[S_DL_LIMIT] = ((RECENT_STEP, RECENT_LIMIT) if cfg.delta_recent
                                   else (STEP, ROW_LIMIT))
    S[S_DL_BASE] = base
    S[S_DL_T] = base + (ALPHABET << ROW_BITS)


@jit
def row_of(S, h, k):
    return S[S_DL_BASE] + (hash32(h * 0x2C1B3C6D + k) >> (32 - ROW_BITS)) * ALPHABET


@jit(inline="always")
def heard_column(S, field):
    """While the model is heard and the mix field at S[field] is on: the next byte's column
    (mod 256); else -1."""
    if S[field] != 0 and S[S_DL_HEARD] != 0:
        return S[S_DL_COL] & 0xFF
    return -1


@jit(inline="always")
def selector(S):
    """With delta_select: the column that chooses the third mixer's weight set
    (mixer.third_selector), or -1."""
    return heard_column(S, S_DL_SELECT)


@jit(inline="always")
def apm_selector(S):
    """With delta_apm: the column that chooses the second APM's row (mixer.apm_selector),
    or -1."""
    return heard_column(S, S_DL_APM)


@jit(inline="always")
def binary_enough(S):
    """Whether the data is binary enough for the model: one byte in exe.LIVE_CONTROL of the
    recent ones a control byte; with delta_binary, one in the last exe.BINARY_SPAN."""
    if S[S_DL_BINARY]:
        return S[cx.S_BINARY] != 0
    return S[exe.S_EXE_CONTROL] >= exe.LIVE_AT


@jit(inline="always")
def carry_in(HB, n, hmask, r):
    """How the byte to the left compares with the one above it: 0 equal, 1 below (a growing
    little-endian number carried into this byte), 2 above."""
    left, left_above = cx.back(HB, n, hmask, 1), cx.back(HB, n, hmask, r + 1)
    return 0 if left == left_above else (1 if left < left_above else 2)


@jit
def peak_of(HB, n, hmask, r):
    """The largest byte of the next byte's column in the last PEAK_RECORDS records."""
    top = 0
    for i in range(1, min(PEAK_RECORDS, n // r) + 1):
        top = max(top, cx.back(HB, n, hmask, i * r))
    return top


@jit(inline="always")
def empty(S, byte):
    """With delta_nonzero, whether a byte is an empty entry's: 0, and with delta_ff 0xFF too
    (tables whose unset entries are -1)."""
    return byte == 0 or (S[S_DL_FF] != 0 and byte == 255)


@jit(inline="always")
def shift_of(S, k):
    """The byte histogram k counts its steps from: the peak for PEAK_INPUT with delta_max,
    the column's last nonzero byte for NONZERO_INPUT with delta_nonzero (where the byte
    above is 0), else the byte above."""
    if k == PEAK_INPUT and S[S_DL_MAX]:
        return S[S_DL_PEAK]
    if k == NONZERO_INPUT and S[S_DL_NONZERO]:
        return S[S_DL_NZ_BASE]
    return S[S_DL_ABOVE]


@jit
def next_contexts(CT, S, HB):
    """After exe.next_contexts (its control-byte average): whether the next byte is live, and
    if so its histograms' rows and each one's subtree sums, shifted by the byte above."""
    if S[S_DL_ON] == 0:
        return
    S[S_DL_LIVE] = S[S_DL_HEARD] = 0
    r = S[cx.S_REC]
    n = S[cx.S_POS]  # the next byte's position
    if (r < 2 or r > MAX_R or n < 2 * r or not binary_enough(S)
            or exe.structure_known(S)):
        return
    hmask = (1 << S[cx.S_HBITS]) - 1
    above = cx.back(HB, n, hmask, r)
    step = (above - cx.back(HB, n, hmask, 2 * r)) & 255
    col = n % r
    h = cx.mixh(hash32(r * 0x3C6EF372 + 0x5BD1E995), col)
    a3 = cx.back(HB, n, hmask, 3)
    carry = 0
    if S[S_DL_CARRY]:
        carry = carry_in(HB, n, hmask, r)
        step, a3 = step * 4 + carry, a3 * 4 + carry
    S[S_DL_ROW] = row_of(S, h, 0)
    S[S_DL_ROW + 1] = row_of(S, cx.mixh(h, step), 1)
    if S[S_DL_MAX]:  # the column (and the carry): steps from the peak
        S[S_DL_ROW + 2] = row_of(S, cx.mixh(h, 256 + carry), 2)
        S[S_DL_PEAK] = peak_of(HB, n, hmask, r)
    else:
        S[S_DL_ROW + 2] = row_of(S, cx.mixh(h, cx.back(HB, n, hmask, 1)), 2)
    S[S_DL_NZ_BASE] = above
    if S[S_DL_NONZERO]:  # a sparse table's next entry goes on from its last one
        last = S[S_DL_LAST_NZ + col]
        skip = int(empty(S, above) and last != 0)
        if skip:
            S[S_DL_NZ_BASE] = last
        a3 = a3 * 2 + skip
    S[S_DL_ROW + 3] = row_of(S, cx.mixh(h, a3), 3)
    S[S_DL_ABOVE] = above
    S[S_DL_HEARD] = int(S[S_DL_SCORE] >= HEARD_AT)
    S[S_DL_COL] = col
    S[S_DL_LIVE] = 1
    for k in range(INPUTS):
        row = S[S_DL_ROW + k]
        t = S[S_DL_T] + 2 * ALPHABET * k
        shift = shift_of(S, k)
        for x in range(ALPHABET):
            CT[t + ALPHABET + x] = CT[row + ((x - shift) & 255)] + np.uint32(1)
        for node in range(ALPHABET - 1, 0, -1):
            CT[t + node] = CT[t + 2 * node] + CT[t + 2 * node + 1]


@jit(inline="always")
def input_at(CT, S, ST, k, node):
    """Histogram k's log-odds of a 1 at tree node `node` (0 while not heard)."""
    if S[S_DL_HEARD] == 0:
        return 0.0
    t = S[S_DL_T] + 2 * ALPHABET * k
    one = np.int64(CT[t + 2 * node + 1])
    return ST[min((one << 12) // (np.int64(CT[t + 2 * node]) + one), 4095)]


@jit
def inputs(CT, S, ST, X, col):
    """X[node, col + k] = input_at for every node (the mixer's whole-tree path)."""
    for k in range(INPUTS):
        for node in range(1, ALPHABET):
            X[node, col + k] = input_at(CT, S, ST, k, node)


@jit(inline="always")
def mass(CT, S, k, node):
    """Histogram k's share of the bytes under tree node `node`."""
    t = S[S_DL_T] + 2 * ALPHABET * k
    return np.float64(CT[t + node]) / np.float64(CT[t + 1])


@jit(inline="always")
def path_mass(MX, S, node, d):
    """The mixer's probability of the d bits that lead to `node`, from its node
    probabilities kept at MX_PF (in path order)."""
    pf = S[S_DL_MX] + MX_PF
    m = 1.0
    for i in range(d):
        p = np.float64(MX[pf + (node >> (d - i))])
        m *= p if (node >> (d - 1 - i)) & 1 else 1.0 - p
    return m


@jit
def switch_at(CT, S, MX, node, d, p):
    """The coded probability of a 1 at node `node` (depth d): the mixture's, given the
    mixer's p there (kept at MX_PF for the nodes below and for learn). p while not heard."""
    MX[S[S_DL_MX] + MX_PF + node] = p
    if S[S_DL_HEARD] == 0:
        return p
    w = S[S_DL_MX] + MX_W + S[S_DL_COL] * EXPERTS
    m = np.float64(MX[w]) * path_mass(MX, S, node, d)
    one = m * p
    total = m
    for k in range(INPUTS):
        wk = np.float64(MX[w + 1 + k])
        one += wk * mass(CT, S, k, 2 * node + 1)
        total += wk * mass(CT, S, k, node)
    return one / total


@jit
def switch_row(CT, S, MX, pr, P, keep, floor):
    """The whole-tree path: P[s] = keep * the mixture's probability of s + floor, from the
    mixer's byte probabilities pr[256 + s] (its node probabilities already at MX_PF)."""
    if S[S_DL_HEARD] == 0:
        for s in range(ALPHABET):
            P[s] = keep * pr[ALPHABET + s] + floor
        return
    w = S[S_DL_MX] + MX_W + S[S_DL_COL] * EXPERTS
    w0 = np.float64(MX[w])
    for s in range(ALPHABET):
        v = w0 * pr[ALPHABET + s]
        for k in range(INPUTS):
            v += np.float64(MX[w + 1 + k]) * mass(CT, S, k, ALPHABET + s)
        P[s] = keep * v + floor


@jit
def learn_switch(CT, S, MX, symbol):
    """Each weight times its expert's probability of the coded byte, normalised, then mixed
    with the uniform share (so an expert that was wrong for long can come back)."""
    w = S[S_DL_MX] + MX_W + S[S_DL_COL] * EXPERTS
    like = np.empty(EXPERTS, dtype=np.float64)
    like[0] = np.float64(MX[w]) * path_mass(MX, S, ALPHABET + symbol, 8)
    total = like[0]
    for k in range(INPUTS):
        like[1 + k] = np.float64(MX[w + 1 + k]) * mass(CT, S, k, ALPHABET + symbol)
        total += like[1 + k]
    share = SWITCH_SHARE if S[S_DL_SWITCH] else SHARE
    for e in range(EXPERTS):
        MX[w + e] = (1.0 - share) * (like[e] / total) + share / EXPERTS


@jit
def learn(CT, S, MX, symbol):
    """The switch's weights learn the coded byte; then count the step it took in each live
    histogram (halving a full one)."""
    if S[S_DL_ON] == 0 or S[S_DL_LIVE] == 0:
        return
    if S[S_DL_HEARD] != 0:
        learn_switch(CT, S, MX, symbol)
    if S[S_DL_NONZERO] and not empty(S, symbol):
        S[S_DL_LAST_NZ + S[S_DL_COL]] = symbol
    t = S[S_DL_T]
    p16 = (np.int64(CT[t + ALPHABET + symbol]) << 16) // np.int64(CT[t + 1])
    S[S_DL_SCORE] += p16 - (S[S_DL_SCORE] >> SCORE_SHIFT)
    step, limit = S[S_DL_STEP], S[S_DL_LIMIT]
    for k in range(INPUTS):
        row = S[S_DL_ROW + k]
        CT[row + ((symbol - shift_of(S, k)) & 255)] += np.uint32(step)
        total = np.int64(CT[S[S_DL_T] + 2 * ALPHABET * k + 1]) - ALPHABET + step
        if total > limit:
            for x in range(ALPHABET):
                CT[row + x] >>= np.uint32(1)
