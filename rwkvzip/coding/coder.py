"""The range coder: constriction's encoder, and a decoder of the same streams inside numba.

The format is constriction 0.5's `RangeEncoder` (32-bit words, 64-bit state, 24-bit
probabilities) with `Categorical(perfect=False)`, the fast lazy quantiser of float32 rows
(the exact one costs ~100 us a symbol; both sides must use the same). The encoder is
constriction's, one batched call per block of rows. The decoder is ours (`decode_symbol`),
the same integer and float32 arithmetic step for step, so the decoding loop runs inside the
model's kernel: no Python call and no model object per byte. Tests check it against
constriction's own decoder on random and extreme rows.

Rows handed in are float32, contiguous and strictly positive.
"""

from __future__ import annotations

import constriction
import numpy as np

from rwkvzip.ops.jit import jit

Categorical = constriction.stream.model.Categorical
RangeEncoder = constriction.stream.queue.RangeEncoder

_FAMILY = Categorical(perfect=False)

PRECISION = 24  # bits of a quantised probability
WORD_BITS = 32  # bits of a stream word; the state holds two
TOTAL = 1 << PRECISION
# decoder state slots (uint64): the interval [lower, lower + range), the stream's point in it,
# and the next word to read
D_LOWER, D_RANGE, D_POINT, D_POS = range(4)
N_DECODER_STATE = 4
_U64 = np.uint64
_EPS32 = np.float32(np.finfo(np.float32).eps)


class CoderError(ValueError):
    """The payload cannot be a range-coder stream."""


def encode_rows(symbols: np.ndarray, probs: np.ndarray, encoder: RangeEncoder) -> None:
    """Encode symbols[t] with distribution probs[t] (one batched call)."""
    encoder.encode(symbols.astype(np.int32, copy=False), _FAMILY, probs)


def new_encoder() -> RangeEncoder:
    return RangeEncoder()


def finish(encoder: RangeEncoder) -> bytes:
    return encoder.get_compressed().astype("<u4", copy=False).tobytes()


def new_decoder(payload: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The stream's words and a decoder state at its start (for decode_symbol): the point
    is the first two words, zeros standing in for words past the end."""
    if len(payload) % 4:
        raise CoderError("payload length is not a multiple of 4")
    words = np.frombuffer(payload, dtype="<u4").astype(np.uint32)
    first = [int(w) for w in words[:2]] + [0] * (2 - min(2, len(words)))
    state = np.zeros(N_DECODER_STATE, dtype=np.uint64)
    state[D_RANGE] = (1 << 64) - 1
    state[D_POINT] = (first[0] << WORD_BITS) | first[1]
    state[D_POS] = min(2, len(words))
    return words, state


@jit
def quantile_symbol(P, quantile):
    """The symbol whose quantised interval [left, left + width) holds `quantile`, with left
    and width: the lazy fast quantiser's arithmetic (float32 prefix sums in index order,
    scaled by (2^24 - n) / sum and truncated, plus one unit per symbol; the last symbol's
    interval ends at 2^24)."""
    n = P.shape[0]
    total = np.float32(0.0)
    for i in range(n):
        total += P[i]
    scale = np.float32(TOTAL - n) / total
    # skip, by float comparisons alone, symbols that must end before the quantile (the scale
    # enlarged so that rounding can only make the skip shorter)
    enlarged = (np.float32(1.0) + _EPS32 + _EPS32) * scale
    bound = np.float32(max(quantile - n, 0)) / enlarged
    left_f = np.float32(0.0)
    right_f = np.float32(0.0)
    j = 0
    while j < n:
        left_f = right_f
        right_f = right_f + P[j]
        j += 1
        if right_f >= bound:
            break
    left = np.int64(left_f * scale) + j - 1
    while j < n:  # symbol j - 1 ends at right_f
        right = np.int64(right_f * scale) + j
        if right > quantile:
            return j - 1, left, right - left
        left = right
        right_f = right_f + P[j]
        j += 1
    return n - 1, left, TOTAL - left


@jit
def decode_symbol(P, words, state):
    """Decode one symbol with the distribution P (float32[n]) and advance the state; -1 if
    the stream cannot have come from the encoder (its point lies outside every interval)."""
    quantile = decode_quantile(state)
    if quantile < 0:
        return -1
    symbol, left, width = quantile_symbol(P, quantile)
    decode_interval(words, state, left, width)
    return symbol


@jit(inline="always")
def decode_quantile(state):
    """Where the stream's point lies among the 2^24 units of the next symbol (-1: beyond
    them, so not a stream of the encoder)."""
    scale = state[D_RANGE] >> _U64(PRECISION)
    quantile = (state[D_POINT] - state[D_LOWER]) // scale
    return np.int64(quantile) if quantile < _U64(TOTAL) else np.int64(-1)


@jit
def decode_interval(words, state, left, width):
    """Advance the state past the decoded symbol, the units [left, left + width)."""
    lower, rng, point = state[D_LOWER], state[D_RANGE], state[D_POINT]
    scale = rng >> _U64(PRECISION)
    lower = lower + scale * _U64(left)
    rng = scale * _U64(width)
    if rng < (_U64(1) << _U64(WORD_BITS)):  # shift in the next word (zeros past the end)
        lower = lower << _U64(WORD_BITS)
        rng = rng << _U64(WORD_BITS)
        point = point << _U64(WORD_BITS)
        pos = state[D_POS]
        if pos < _U64(words.shape[0]):
            point = point | _U64(words[pos])
            state[D_POS] = pos + _U64(1)
    state[D_LOWER] = lower
    state[D_RANGE] = rng
    state[D_POINT] = point


# Path coding (mix field path_coding): a byte is one symbol whose units are found by
# splitting the tree's units at the nodes of its path alone; the encoder hands constriction
# a three-entry row whose middle symbol has exactly those units (path_row). Every byte keeps
# PATH_LEAST units (2^-20 of the range, as the byte rows' floor); the other PATH_REST are
# shared in proportion to the node probabilities (path_units).
PATH_LEFT = 2  # the tree's units: [2, 2^24 - 2), so every entry of a path row is >= 1
PATH_UNITS = TOTAL - 4
PATH_LEAST = 16
PATH_REST = PATH_UNITS - 256 * PATH_LEAST
PATH_SYMBOL = 1  # the symbol coded: the middle one of the row
PATH_ROW = 3


@jit(inline="always")
def path_units(rest, p1, d):
    """A node of depth d whose subtree has `rest` proportional units, p1 its probability of
    a 1: the 1-branch's proportional units (rest * p1, truncated) and the 0-branch's whole
    width (its leaves' least units and the rest of rest), which comes first."""
    ones = np.int64(np.float64(rest) * p1)
    return ones, (np.int64(PATH_LEAST) << (7 - d)) + rest - ones


@jit(inline="always")
def path_row(left, width, row):
    """The row whose symbol PATH_SYMBOL has units [left, left + width) under the lazy
    quantiser: integer entries (exact in float32) summing to 2^24 - 3, so its scale is 1."""
    row[0] = np.float32(left - 1)
    row[1] = np.float32(width - 1)
    row[2] = np.float32(TOTAL - 1 - left - width)


# What a block kernel does with each byte before it models it (its `io` argument)
ADVANCE, RECORD, DECODE = 0, 1, 2


@jit
def take_byte(io, t, data, probs, P, decoder):
    """Byte t of a block, before the model reads it: RECORD copies its distribution P into
    probs[t] (for the batched encoder), DECODE decodes it into data[t] with
    decoder = (words, state) from new_decoder. False: the stream is corrupt."""
    if io == RECORD:
        for j in range(P.shape[0]):
            probs[t, j] = P[j]
    elif io == DECODE:
        symbol = decode_symbol(P, decoder[0], decoder[1])
        if symbol < 0:
            return False
        data[t] = symbol
    return True


def no_decoder() -> tuple[np.ndarray, np.ndarray]:
    """The decoder argument of a kernel call that decodes nothing."""
    return np.zeros(1, dtype=np.uint32), np.zeros(N_DECODER_STATE, dtype=np.uint64)
