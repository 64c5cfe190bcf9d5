"""Container v1: sizes, concatenation, and clean refusals of foreign, corrupt, truncated input."""

import io
import random

import pytest

from rwkvzip import api
from rwkvzip.coding import container
from rwkvzip.coding.container import FormatError
from rwkvzip.recipe import Recipe, default_recipe


def test_overhead_for_empty_and_one_byte_inputs_with_default_recipe():
    assert len(api.compress(b"")) <= 24
    assert len(api.compress(b"x")) <= 24
    assert api.decompress(api.compress(b"")) == b""
    assert api.decompress(api.compress(b"x")) == b"x"


def test_default_recipe_is_named_by_a_one_byte_preset_id():
    header = container.encode_header(default_recipe())
    assert header[:4] == container.MAGIC and len(header) == 6
    assert container.read_header(io.BytesIO(header)) == default_recipe()


def test_explicit_recipe_roundtrips_through_header(tiny_recipe):
    header = container.encode_header(tiny_recipe)
    assert header[5] == 0  # spelled out, not a preset
    assert container.read_header(io.BytesIO(header)) == tiny_recipe


def test_concatenated_streams_decompress_to_concatenated_data(tiny_recipe):
    a = api.compress(b"first part, ", tiny_recipe)
    b = api.compress(b"second part", Recipe(model=tiny_recipe.model, seed=99))
    assert api.decompress(a + b) == b"first part, second part"
    assert api.decompress(a + api.compress(b"", tiny_recipe) + a) == b"first part, " * 2


def test_frames_split_at_64k_and_state_carries_across(tiny_recipe):
    rng = random.Random(1)
    words = [bytes(rng.choices(b"etaoinshrdlu", k=rng.randint(2, 7))) for _ in range(300)]
    data = b" ".join(rng.choices(words, k=20000))[:70000]
    blob = api.compress(data, tiny_recipe)
    frames = list(container.read_frames(_after_header(blob)))
    assert [f.raw_len for f in frames] == [65536, 70000 - 65536]
    assert api.decompress(blob) == data
    # the second frame is coded by the model trained on the first: cheaper than from scratch
    fresh = list(container.read_frames(_after_header(api.compress(data[65536:], tiny_recipe))))
    assert len(frames[1].payload) < len(fresh[0].payload)


def _after_header(blob):
    f = io.BytesIO(blob)
    container.read_header(f)
    return f


@pytest.mark.parametrize("blob,message", [
    (b"", "empty input"),
    (b"RW", "truncated"),
    (b"PK\x03\x04 some zip file", "bad magic"),
    (b"RWKZ\x09\x01", "format version 9 needs a newer rwkvzip"),
    (b"RWKZ\x01\x7f", "unknown preset card 127: .*newer rwkvzip"),
    (b"RWKZ\x01\x01", "preset card 1 is retired"),
    (b"RWKZ\x01\x00\x05{}", "truncated"),
    (b"RWKZ\x01\x00\x02{}", "missing"),
    (b"RWKZ\x01\x00\x03{]}", "not valid JSON"),
    (b"RWKZ\x01\x00\xff\xff\xff\x7f", "recipe too long"),
    (b"RWKZ\x01\x4d", "truncated"),  # card 77, the fastest
    (b"RWKZ\x01\x4d\xff\xff\xff\x0f", "claims"),
    (b"RWKZ\x01\x4d\x01\xfd\xff\x03", "bad payload length"),
    (b"RWKZ\x01\x4d\x00\x05", "trailer says 5"),
])
def test_bad_headers_and_frames_are_clean_errors(blob, message):
    with pytest.raises(FormatError, match=message):
        api.decompress(blob)


def test_truncation_anywhere_is_an_error(tiny_recipe):
    blob = api.compress(b"hello hello hello hello", tiny_recipe)
    for cut in range(len(blob)):
        with pytest.raises(FormatError):
            api.decompress(blob[:cut])


def test_bit_flips_in_payload_are_caught_by_crc(tiny_recipe):
    data = b"The cat sat on the mat. " * 20
    blob = bytearray(api.compress(data, tiny_recipe))
    header_len = len(container.encode_header(tiny_recipe))
    caught = 0
    for pos in range(header_len + 8, len(blob) - 3, 7):
        bad = bytearray(blob)
        bad[pos] ^= 0x10
        try:
            out = api.decompress(bytes(bad))
        except FormatError:
            caught += 1
        else:
            assert out == data  # a flip in padding bits of the last word may be harmless
    assert caught > 0


def test_trailing_garbage_is_an_error(tiny_recipe):
    blob = api.compress(b"data", tiny_recipe)
    with pytest.raises(FormatError, match="trailing garbage"):
        api.decompress(blob + b"junk")
