"""The range decoder inside the kernels reads constriction's streams symbol for symbol: the
same quantiser arithmetic and the same coder state, on rows of every shape the models give
(flat, peaked at the probability floor, spread over many decades, unnormalised)."""

from __future__ import annotations

import numpy as np
import pytest

from rwkvzip.coding import coder
from rwkvzip.ops.jit import jit

RANGE_DECODER = coder.constriction.stream.queue.RangeDecoder


@jit(cache=False)
def decode_all(rows, words, state, out):
    for t in range(rows.shape[0]):
        out[t] = coder.decode_symbol(rows[t], words, state)


def rows_of(kind: str, n: int, rng) -> np.ndarray:
    if kind == "flat":
        p = rng.random((n, 256)) + 1e-6
    elif kind == "peaked":  # one byte near 1, the rest at the floor 2^-20
        p = np.full((n, 256), 2.0**-20)
        p[np.arange(n), rng.integers(0, 256, n)] = 1.0
    elif kind == "decades":
        p = np.exp(rng.normal(0, 6, (n, 256))) + 2.0**-20
    else:  # "unnormalised": small, far from summing to 1
        p = rng.random((n, 256)) ** 8 * 1e-3 + 1e-9
    return np.ascontiguousarray(p, dtype=np.float32)


def draw(P: np.ndarray, rng) -> np.ndarray:
    c = np.cumsum(P.astype(np.float64), 1)
    return (c / c[:, -1:] < rng.random((len(P), 1))).sum(1).clip(0, 255).astype(np.uint8)


def encode(symbols: np.ndarray, P: np.ndarray) -> bytes:
    enc = coder.new_encoder()
    coder.encode_rows(symbols, P, enc)
    return coder.finish(enc)


@pytest.mark.parametrize("kind", ["flat", "peaked", "decades", "unnormalised"])
def test_decodes_constrictions_streams_symbol_for_symbol(kind):
    rng = np.random.default_rng(len(kind))
    for n, drawn in ((1, True), (2, False), (700, True), (2500, True), (2500, False)):
        P = rows_of(kind, n, rng)
        symbols = draw(P, rng) if drawn else rng.integers(0, 256, n).astype(np.uint8)
        payload = encode(symbols, P)
        out = np.empty(n, dtype=np.int64)
        decode_all(P, *coder.new_decoder(payload), out)
        assert np.array_equal(out, symbols)
        # and constriction's own decoder agrees (the reference the format is)
        ref = RANGE_DECODER(np.frombuffer(payload, dtype="<u4").astype(np.uint32))
        assert [ref.decode(coder.Categorical(P[t], perfect=False)) for t in range(n)] \
            == out.tolist()


def test_every_symbol_of_every_interval_width():
    """Each of the 256 symbols under rows where it is rarest and likeliest."""
    symbols = np.arange(256, dtype=np.uint8).repeat(2)
    P = np.full((512, 256), 2.0**-20, dtype=np.float32)
    P[np.arange(0, 512, 2), symbols[::2]] = 1.0  # likeliest
    P[np.arange(1, 512, 2), (symbols[1::2].astype(int) + 1) % 256] = 1.0  # rarest
    out = np.empty(512, dtype=np.int64)
    decode_all(P, *coder.new_decoder(encode(symbols, P)), out)
    assert np.array_equal(out, symbols)


def test_a_payload_that_is_not_a_stream():
    with pytest.raises(coder.CoderError):
        coder.new_decoder(b"abc")
    words, state = coder.new_decoder(b"")
    assert len(words) == 0 and int(state[coder.D_POS]) == 0
    # garbage decodes to some symbols (the frame's CRC then rejects them), never a crash
    P = rows_of("flat", 300, np.random.default_rng(5))
    out = np.empty(300, dtype=np.int64)
    decode_all(P, *coder.new_decoder(bytes(range(256)) * 4), out)
    assert ((out >= -1) & (out < 256)).all()
