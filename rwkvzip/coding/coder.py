"""The range coder: constriction's encoder, its numba twin, and a decoder inside numba.

The format is constriction 0.5's `RangeEncoder` (32-bit words, 64-bit state, 24-bit
probabilities) with `Categorical(perfect=False)`, the fast lazy quantiser of float32 rows
(the exact one costs ~100 us a symbol; both sides must use the same). The encoder is
constriction's, one batched call per block of rows, wherever constriction installs; where
it does not (it publishes no wheel for Linux on ARM), `TwinEncoder` writes the same words
step for step in numba. The decoder is ours (`decode_symbol`), the same integer and float32
arithmetic, so the decoding loop runs inside the model's kernel: no Python call and no
model object per byte. Tests check both twins against constriction on random and extreme
rows.

Rows handed in are float32, contiguous and strictly positive.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.ops.jit import jit

try:
    import constriction
except ImportError:  # Linux on ARM: the twin encodes (pyproject's marker on the dependency)
    constriction = None

PRECISION = 24  # bits of a quantised probability
WORD_BITS = 32  # bits of a stream word; the state holds two
TOTAL = 1 << PRECISION
# decoder state slots (uint64): the interval [lower, lower + range), the stream's point in it,
# and the next word to read
D_LOWER, D_RANGE, D_POINT, D_POS = range(4)
N_DECODER_STATE = 4
# encoder state slots (uint64, TwinEncoder): the interval, and constriction's "inverted
# situation" (a carry may still reach words held back): how many words are held back
# (0: none) and the first of them
E_LOWER, E_RANGE, E_INVERTED, E_FIRST = range(4)
N_ENCODER_STATE = 4
_U64 = np.uint64
_EPS32 = np.float32(np.finfo(np.float32).eps)
_MASK64 = (1 << 64) - 1
_WORD_MAX = (1 << WORD_BITS) - 1


class CoderError(ValueError):
    """The payload cannot be a range-coder stream."""


class ConstrictionEncoder:
    """constriction's RangeEncoder with the lazy quantiser: the reference encoder."""

    def __init__(self):
        self._encoder = constriction.stream.queue.RangeEncoder()
        self._family = constriction.stream.model.Categorical(perfect=False)

    def encode_rows(self, symbols: np.ndarray, probs: np.ndarray) -> None:
        self._encoder.encode(symbols.astype(np.int32, copy=False), self._family, probs)

    def finish(self) -> bytes:
        return self._encoder.get_compressed().astype("<u4", copy=False).tobytes()


class TwinEncoder:
    """The same words as ConstrictionEncoder, from numba (encode_symbols) and, to seal the
    stream, the same one or two final words (seal_words)."""

    def __init__(self):
        self._state = np.zeros(N_ENCODER_STATE, dtype=np.uint64)
        self._state[E_RANGE] = _MASK64
        self._parts: list[np.ndarray] = []

    def encode_rows(self, symbols: np.ndarray, probs: np.ndarray) -> None:
        # each symbol writes at most one word, and words held back come out at most once
        out = np.empty(len(symbols) + int(self._state[E_INVERTED]) + 1, dtype=np.uint32)
        n = encode_symbols(symbols.astype(np.int64, copy=False), probs, self._state, out)
        self._parts.append(out[:n])

    def finish(self) -> bytes:
        words = np.concatenate([*self._parts, seal_words(self._state)])
        return words.astype("<u4", copy=False).tobytes()


Encoder = ConstrictionEncoder | TwinEncoder


def new_encoder() -> Encoder:
    """constriction's encoder where it is installed, else its twin (the same bytes)."""
    return ConstrictionEncoder() if constriction is not None else TwinEncoder()


def encode_rows(symbols: np.ndarray, probs: np.ndarray, encoder: Encoder) -> None:
    """Encode symbols[t] with distribution probs[t] (one batched call)."""
    encoder.encode_rows(symbols, probs)


def finish(encoder: Encoder) -> bytes:
    """The stream's words, sealed (an empty stream for no symbols)."""
    return encoder.finish()


@jit
def symbol_interval(P, symbol):
    """The quantised units [left, left + width) of `symbol` under the lazy quantiser:
    quantile_symbol's arithmetic, from the symbol's side."""
    n = P.shape[0]
    total = np.float32(0.0)
    for i in range(n):
        total += P[i]
    scale = np.float32(TOTAL - n) / total
    left_f = np.float32(0.0)
    for i in range(symbol):
        left_f = left_f + P[i]
    left = np.int64(left_f * scale) + symbol
    if symbol == n - 1:
        return left, TOTAL - left
    right = np.int64((left_f + P[symbol]) * scale) + symbol + 1
    return left, right - left


@jit
def encode_symbols(symbols, probs, state, out):
    """Encode symbols[t] with rows probs[t] into out (words), as constriction's
    RangeEncoder.encode_symbol does; the number of words written."""
    lower, rng = state[E_LOWER], state[E_RANGE]
    inverted, first = state[E_INVERTED], state[E_FIRST]
    word_shift = _U64(64 - WORD_BITS)
    n_out = 0
    for t in range(symbols.shape[0]):
        left, width = symbol_interval(probs[t], symbols[t])
        scale = rng >> _U64(PRECISION)
        rng = scale * _U64(width)
        new_lower = lower + scale * _U64(left)  # wraps modulo 2^64, as constriction's
        if inverted != _U64(0) and new_lower + rng > new_lower:  # back to normal: a carry
            if new_lower < lower:  # reached the held-back words, or did not
                out[n_out] = np.uint32((first + _U64(1)) & _U64(_WORD_MAX))
                rest = np.uint32(0)
            else:
                out[n_out] = np.uint32(first)
                rest = np.uint32(_WORD_MAX)
            n_out += 1
            for _ in range(1, np.int64(inverted)):
                out[n_out] = rest
                n_out += 1
            inverted = _U64(0)
        lower = new_lower
        if rng < (_U64(1) << word_shift):
            rng = rng << _U64(WORD_BITS)
            lower_word = lower >> word_shift
            lower = lower << _U64(WORD_BITS)
            if inverted != _U64(0):
                inverted += _U64(1)
            elif lower + rng > lower:
                out[n_out] = np.uint32(lower_word)
                n_out += 1
            else:
                inverted = _U64(1)
                first = lower_word
    state[E_LOWER], state[E_RANGE] = lower, rng
    state[E_INVERTED], state[E_FIRST] = inverted, first
    return n_out


def seal_words(state: np.ndarray) -> np.ndarray:
    """The words that end the stream (constriction's seal): the held-back words resolved,
    a point inside the final interval, and a zero word where one more is needed to
    identify it; none if nothing was encoded."""
    lower, rng = int(state[E_LOWER]), int(state[E_RANGE])
    inverted, first = int(state[E_INVERTED]), int(state[E_FIRST])
    if rng == _MASK64:
        return np.zeros(0, dtype=np.uint32)
    shift = 64 - WORD_BITS
    point = (lower + (1 << shift) - 1) & _MASK64
    words = []
    if inverted:
        if point >= lower:
            words += [first] + [_WORD_MAX] * (inverted - 1)
        else:  # the addition wrapped
            words += [(first + 1) & _WORD_MAX] + [0] * (inverted - 1)
    point_word = point >> shift
    words.append(point_word)
    if ((lower + rng) & _MASK64) >> shift == point_word:
        words.append(0)
    return np.array(words, dtype=np.uint32)


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
