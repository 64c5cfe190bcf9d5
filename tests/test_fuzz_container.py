"""Hostile input: random bytes, bit flips, truncation, forged lengths -> always a FormatError
(or the right data), promptly, never a crash, hang or huge allocation."""

import io

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from rwkvzip import api, container
from rwkvzip.container import FormatError
from rwkvzip.recipe import Recipe
from rwkvzip.rwkv7 import Rwkv7Config

RECIPE = Recipe(model=Rwkv7Config(hidden=64, layers=1, ffn=64, decay_rank=8, a_rank=8,
                                  v_rank=8, g_rank=8), optimizer="sgd", lr=0.01, seed=1)
DATA = b"hostile input must fail cleanly, " * 4
BLOB = api.compress(DATA, RECIPE)
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


def decode_or_error(blob: bytes) -> bytes | None:
    """The decoded bytes, or None after a clean FormatError; anything else fails the test."""
    try:
        return api.decompress(blob)
    except FormatError:
        return None


@seed(0)
@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(blob):
    decode_or_error(blob)


@seed(1)
@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_after_a_valid_header(tail):
    decode_or_error(container.encode_header(RECIPE) + tail)


@seed(2)
@FUZZ
@given(st.integers(0, len(BLOB) * 8 - 1))
def test_single_bit_flips(bit):
    bad = bytearray(BLOB)
    bad[bit // 8] ^= 1 << (bit % 8)
    # a flip may land in the range coder's unused final bits; then CRC and lengths
    # guarantee the original data came back
    assert decode_or_error(bytes(bad)) in (None, DATA)


@pytest.mark.parametrize("cut", range(len(BLOB)))
def test_truncation_everywhere(cut):
    with pytest.raises(FormatError):
        api.decompress(BLOB[:cut])


@seed(3)
@FUZZ
@given(st.integers(0, 2**64), st.integers(0, 2**64))
def test_forged_frame_lengths_are_refused_before_reading(raw_len, field):
    header = container.encode_header(RECIPE)
    forged = (header + container.encode_varint(raw_len) + container.encode_varint(field)
              + b"\0" * 12)
    decode_or_error(forged)


def test_forged_lengths_never_allocate():
    """A frame claiming 2**60 bytes fails on the bound, not on reading or allocating."""
    forged = (container.encode_header(RECIPE) + container.encode_varint(2**60)
              + container.encode_varint(2**61))
    with pytest.raises(FormatError, match="claims"):
        list(container.read_frames(_after_header(forged)))


def _after_header(blob):
    f = io.BytesIO(blob)
    container.read_header(f)
    return f
