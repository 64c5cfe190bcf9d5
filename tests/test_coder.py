"""The range decoder inside the kernels reads constriction's streams symbol for symbol: the
same quantiser arithmetic and the same coder state, on rows of every shape the models give
(flat, peaked at the probability floor, spread over many decades, unnormalised)."""

from __future__ import annotations

import os
import subprocess
import sys

import constriction
import numpy as np
import pytest

from rwkvzip import api
from rwkvzip.coding import coder
from rwkvzip.ops.jit import jit

from conftest import MIXED_SAMPLE

RANGE_DECODER = constriction.stream.queue.RangeDecoder
Categorical = constriction.stream.model.Categorical  # the reference quantiser


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
        assert [ref.decode(Categorical(P[t], perfect=False)) for t in range(n)] \
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


# -- the twin encoder (Linux on ARM, where constriction has no wheel) ---------------------------

def model_rows(P: np.ndarray) -> np.ndarray:
    """Rows as the models give them: normalised, floored at 2^-20 (raw rows spanning more
    decades can leave the last symbol no unit, which constriction itself refuses)."""
    P = np.maximum(P / P.sum(1, keepdims=True, dtype=np.float64), 2.0**-20)
    return np.ascontiguousarray(P, dtype=np.float32)


def twin_encode(symbols: np.ndarray, P: np.ndarray, cuts=()) -> bytes:
    """The twin's stream, handed the rows in blocks cut at `cuts` (its state carries over)."""
    enc = coder.TwinEncoder()
    bounds = [0, *cuts, len(symbols)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        enc.encode_rows(symbols[a:b], P[a:b])
    return enc.finish()


@pytest.mark.parametrize("kind", ["flat", "peaked", "decades", "unnormalised"])
def test_the_twin_encoder_writes_constrictions_words(kind):
    rng = np.random.default_rng(100 + len(kind))
    for n, drawn in ((0, True), (1, True), (2, False), (3, True), (700, True), (2500, True),
                     (2500, False)):
        P = model_rows(rows_of(kind, n, rng))
        symbols = draw(P, rng) if drawn else rng.integers(0, 256, n).astype(np.uint8)
        reference = encode(symbols, P)
        assert twin_encode(symbols, P) == reference, n
        cuts = sorted(rng.choice(n + 1, size=min(n, 5), replace=False).tolist())
        assert twin_encode(symbols, P, cuts) == reference, (n, cuts)


def test_the_twin_encoder_on_a_long_stream_of_mixed_rows():
    rng = np.random.default_rng(21)
    P = np.concatenate([rows_of(kind, 10_000, rng) for kind in ("flat", "peaked")])
    order = rng.permutation(len(P))
    P = np.ascontiguousarray(P[order])
    symbols = draw(P, rng)
    assert twin_encode(symbols, P, [4096, 8192, 12288]) == encode(symbols, P)


def test_the_twin_encoder_on_every_interval_width_and_on_path_rows():
    symbols = np.arange(256, dtype=np.uint8).repeat(2)
    P = np.full((512, 256), 2.0**-20, dtype=np.float32)
    P[np.arange(0, 512, 2), symbols[::2]] = 1.0
    P[np.arange(1, 512, 2), (symbols[1::2].astype(int) + 1) % 256] = 1.0
    assert twin_encode(symbols, P) == encode(symbols, P)
    rng = np.random.default_rng(3)  # path coding's three-entry rows
    rows = np.empty((4000, coder.PATH_ROW), dtype=np.float32)
    for t in range(len(rows)):
        left = int(rng.integers(coder.PATH_LEFT, coder.TOTAL - 300))
        coder.path_row(left, int(rng.integers(1, min(coder.TOTAL - 2 - left, 1 << 23))),
                       rows[t])
    path = np.full(len(rows), coder.PATH_SYMBOL, dtype=np.uint8)
    assert twin_encode(path, rows) == encode(path, rows)


def test_the_twin_encoder_resolves_held_back_words_both_ways():
    """constriction's "inverted situation" (the interval straddles a word boundary, so a
    carry may still reach words already shifted out) arises, and ends with and without a
    carry, within a stream and at its end; the words stay constriction's."""
    rng = np.random.default_rng(11)
    seen = {"carry": 0, "no carry": 0, "at the end": 0}
    for trial in range(300):
        n = int(rng.integers(1, 40))
        P = model_rows(rows_of("decades", n, rng))
        symbols = draw(P, rng)
        enc = coder.TwinEncoder()
        for t in range(n):
            held, first = int(enc._state[coder.E_INVERTED]), int(enc._state[coder.E_FIRST])
            enc.encode_rows(symbols[t:t + 1], P[t:t + 1])
            written = enc._parts[-1]
            if held and len(written):  # resolved: the first held word, plus one if a carry
                seen["carry" if written[0] == (first + 1) % 2**32 else "no carry"] += 1
                assert written[0] in (first, (first + 1) % 2**32)
        seen["at the end"] += bool(int(enc._state[coder.E_INVERTED]))
        assert enc.finish() == encode(symbols, P), trial
    assert all(seen.values()), seen


BLOCK_CONSTRICTION = "import sys\nsys.modules['constriction'] = None  # import fails\n"


def test_without_constriction_the_twin_writes_every_cards_golden_files(tmp_path):
    """A process where importing constriction fails (as on Linux on ARM): the twin encodes,
    selftest writes and reads every golden vector, and the command line's files are the
    bytes constriction writes here."""
    (tmp_path / "sitecustomize.py").write_text(BLOCK_CONSTRICTION)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    probe = subprocess.run([sys.executable, "-c", "from rwkvzip.coding import coder; "
                            "print(type(coder.new_encoder()).__name__)"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert probe.stdout.strip() == "TwinEncoder", probe.stderr
    selftest = subprocess.run([sys.executable, "-m", "rwkvzip", "selftest"],
                              capture_output=True, text=True, env=env, timeout=900)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    data = MIXED_SAMPLE.read_bytes()
    for level in (1, 6):
        out = subprocess.run([sys.executable, "-m", "rwkvzip", f"-{level}", "-c"], input=data,
                             capture_output=True, env=env, timeout=900)
        assert out.returncode == 0 and out.stdout == api.compress(data, level), out.stderr
