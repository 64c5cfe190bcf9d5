"""Hostile input: random bytes, bit flips anywhere, truncation at every frame boundary and
inside frames, forged lengths and sizes, files from a newer format or for a model this
version does not have. Always a FormatError (or the right data), promptly, never a crash,
hang or allocation sized by a forged number. Fixed seeds and bounded example counts."""

import functools
import io
import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from rwkvzip import api
from rwkvzip.coding import container
from rwkvzip.coding.codec import Predictor
from rwkvzip.coding.container import FormatError
from rwkvzip.net.rwkv7.model import Rwkv7Config
from rwkvzip.recipe import Recipe, preset_cards

RECIPE = Recipe(model=Rwkv7Config(hidden=64, layers=1, ffn=64, decay_rank=8, a_rank=8,
                                  v_rank=8, g_rank=8), optimizer="sgd", lr=0.01, seed=1)
DATA = b"hostile input must fail cleanly, " * 4
# positions drawn by the fuzz tests, reduced modulo the sample's size (the samples are coded
# on first use, not at import: collecting the tests compiles no kernel)
ANYWHERE = st.integers(0, 2**24)
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def framed(recipe: Recipe, pieces: list[bytes]) -> bytes:
    """One member with a frame per piece (the encoder itself only cuts at 64 KiB)."""
    pred = Predictor(recipe)
    out = [container.encode_header(recipe)]
    for raw in pieces:
        payload = pred.encode_frame(raw)
        out.append(container.encode_frame(raw, payload if len(payload) < len(raw) else None))
    out.append(container.encode_trailer(sum(map(len, pieces))))
    return b"".join(out)


# Two members; the first has coded, stored and coded frames, the second one coded frame.
PIECES = [b"the first frame is coded, the first frame is coded. " * 3,
          bytes(range(7, 256, 2)),  # incompressible: stored
          b"and the third frame is coded again, coded again. " * 4]
TAIL = b"second member, one frame, one frame"
MULTI_DATA = b"".join(PIECES) + TAIL


@functools.cache
def blob_sample() -> bytes:
    """DATA in one member of one frame."""
    return api.compress(DATA, RECIPE)


@functools.cache
def multi_sample() -> bytes:
    """MULTI_DATA in two members, the first of three frames."""
    return framed(RECIPE, PIECES) + framed(RECIPE, [TAIL])


def members_and_frames(blob: bytes) -> list[tuple[int, int, int]]:
    """(member, start, end) of every header, frame head, payload and trailer."""
    f, spans, member = io.BytesIO(blob), [], 0
    while True:
        start = f.tell()
        if container.read_header(f, first=member == 0) is None:
            return spans
        spans.append((member, start, f.tell()))
        index, total = 0, 0
        while True:
            start = f.tell()
            head = container.read_frame_head(f, index, total)
            spans.append((member, start, f.tell()))
            if head is None:
                break
            start = f.tell()
            f.read(head.payload_len)
            spans.append((member, start, f.tell()))
            index, total = index + 1, total + head.raw_len
        member += 1


def decode_or_error(blob: bytes) -> bytes | None:
    """The decoded bytes, or None after a clean FormatError; anything else fails the test."""
    try:
        return api.decompress(blob)
    except FormatError:
        return None


def decode_in_pieces(blob: bytes, cuts: list[int]) -> bytes | None:
    """The same through Decompressor objects fed at the given cut points."""
    bounds = sorted({0, len(blob), *(c % (len(blob) + 1) for c in cuts)})
    try:
        pieces = (blob[a:b] for a, b in zip(bounds, bounds[1:], strict=False))
        return b"".join(api.decompress_chunks(pieces))
    except FormatError:
        return None


def test_the_multi_frame_sample_is_what_it_claims():
    assert api.decompress(multi_sample()) == MULTI_DATA
    frames = list(container.read_frames(_after_header(multi_sample())))
    assert [f.stored for f in frames] == [False, True, False]


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
@given(ANYWHERE)
def test_single_bit_flips(bit):
    bad = bytearray(blob_sample())
    bit %= len(bad) * 8
    bad[bit // 8] ^= 1 << (bit % 8)
    # a flip may land in the range coder's unused final bits; then CRC and lengths
    # guarantee the original data came back
    assert decode_or_error(bytes(bad)) in (None, DATA)


@seed(4)
@FUZZ
@given(st.lists(ANYWHERE, min_size=1, max_size=3))
def test_bit_flips_anywhere_in_several_members_and_frames(bits):
    bad = bytearray(multi_sample())
    for bit in bits:
        bit %= len(bad) * 8
        bad[bit // 8] ^= 1 << (bit % 8)
    assert decode_or_error(bytes(bad)) in (None, MULTI_DATA)


@seed(5)
@FUZZ
@given(ANYWHERE, st.integers(0, 8), st.binary(max_size=8))
def test_bytes_inserted_or_deleted(at, length, insert):
    multi = multi_sample()
    at %= len(multi) + 1
    bad = multi[:at] + insert + multi[at + length:]
    assert decode_or_error(bad) in (None, MULTI_DATA)


def test_truncation_everywhere():
    blob = blob_sample()
    for cut in range(len(blob)):
        with pytest.raises(FormatError):
            api.decompress(blob[:cut])


def test_truncation_at_every_frame_boundary_and_inside_every_frame():
    multi = multi_sample()
    spans = members_and_frames(multi)
    assert len(spans) == (1 + 2 * 3 + 1) + (1 + 2 * 1 + 1)  # headers, frames, trailers
    first_member_end = max(end for member, _, end in spans if member == 0)
    boundaries = {start for _, start, _ in spans}
    inside = {cut for _, start, end in spans for cut in range(start + 1, end)}
    assert boundaries | inside | {len(multi)} == set(range(len(multi) + 1))
    for cut in sorted(boundaries | inside):
        if cut == first_member_end:  # a whole member is a whole stream
            assert api.decompress(multi[:cut]) == b"".join(PIECES)
            continue
        with pytest.raises(FormatError, match="truncated|empty"):
            api.decompress(multi[:cut])


@seed(6)
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 10_000), max_size=6), ANYWHERE)
def test_pieces_fed_to_decompressor_objects_give_the_same_outcome(cuts, bit):
    bad = bytearray(multi_sample())
    bit %= len(bad) * 8 + 1  # the last one: no flip
    if bit < len(bad) * 8:
        bad[bit // 8] ^= 1 << (bit % 8)
    assert decode_in_pieces(bytes(bad), cuts) == decode_or_error(bytes(bad))


LENGTHS = st.one_of(st.integers(0, 300), st.integers(0, 2**70))


@seed(3)
@FUZZ
@given(LENGTHS, LENGTHS)
def test_forged_frame_lengths_are_refused_before_reading(raw_len, field):
    header = container.encode_header(RECIPE)
    forged = (header + container.encode_varint(raw_len) + container.encode_varint(field)
              + b"\0" * 12)
    decode_or_error(forged)


@seed(7)
@FUZZ
@given(st.sampled_from(["raw_len", "field", "total", "json_len"]), LENGTHS,
       st.integers(0, 2))
def test_forged_lengths_and_sizes_in_a_valid_stream(what, value, frame):
    """Rebuild the multi-frame stream with one length replaced by a forged one."""
    pieces = PIECES
    blob = framed(RECIPE, pieces)
    f = io.BytesIO(blob)
    container.read_header(f)
    out = bytearray(blob[:f.tell()])
    if what == "json_len":
        raw = RECIPE.to_json()
        out = bytearray(container.MAGIC + bytes([1, 0]) + container.encode_varint(value) + raw)
    index, total = 0, 0
    while (head := container.read_frame_head(f, index, total)) is not None:
        payload = f.read(head.payload_len)
        raw_len, fld = head.raw_len, 2 * head.payload_len + head.stored
        if index == frame and what == "raw_len":
            raw_len = value
        if index == frame and what == "field":
            fld = value
        out += (container.encode_varint(raw_len) + container.encode_varint(fld)
                + head.crc.to_bytes(4, "little") + payload)
        index, total = index + 1, total + head.raw_len
    out += container.encode_trailer(value if what == "total" else total)
    assert decode_or_error(bytes(out)) in (None, b"".join(pieces))


MODEL_FIELDS = ["hidden", "layers", "ffn", "decay_rank", "a_rank", "v_rank", "g_rank"]


@seed(8)
@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(MODEL_FIELDS + ["bptt", "ckpt", "seed", "lr", "contract", "arch"]),
       st.one_of(st.integers(-2**65, 2**65), st.floats(allow_nan=True), st.text(max_size=5),
                 st.none(), st.booleans()))
def test_forged_recipe_values_are_refused_or_run_within_bounds(name, value):
    d = json.loads(RECIPE.to_json())
    (d["model"] if name in MODEL_FIELDS else d)[name] = value
    raw = json.dumps(d).encode()
    blob = (container.MAGIC + bytes([1, 0]) + container.encode_varint(len(raw)) + raw
            + container.encode_trailer(0))
    assert decode_or_error(blob) in (None, b"")


FORGED = {
    "frame of 2**60 bytes": container.encode_varint(2**60) + container.encode_varint(2**61),
    "payload of 2**62 bytes": container.encode_varint(100) + container.encode_varint(2**63),
    "stored payload longer than its frame": container.encode_varint(5)
    + container.encode_varint(2 * 60_000 + 1),
    "trailer total of 2**62": container.encode_varint(0) + container.encode_varint(2**62),
    "varint of 11 bytes": b"\xff" * 10 + b"\x01",
}


@pytest.mark.parametrize("name", FORGED)
def test_forged_lengths_never_allocate(name):
    """The bound is checked first: nothing is allocated or read from a forged number."""
    blob = container.encode_header(RECIPE) + FORGED[name] + b"\0" * 64
    assert_small_peak(blob)


def test_a_forged_recipe_length_or_giant_model_never_allocates():
    huge = json.loads(RECIPE.to_json())
    huge["model"].update(hidden=2**40, layers=64, ffn=16384)
    raw = json.dumps(huge).encode()
    assert_small_peak(container.MAGIC + bytes([1, 0]) + container.encode_varint(len(raw)) + raw
                      + container.encode_trailer(0), match="MiB")
    assert_small_peak(container.MAGIC + bytes([1, 0]) + container.encode_varint(2**62)
                      + b"{}", match="too long")


def assert_small_peak(blob: bytes, match: str | None = None) -> None:
    tracemalloc.start()  # numpy reports its allocations to tracemalloc too
    try:
        with pytest.raises(FormatError, match=match):
            api.decompress(blob)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak  # the forged sizes ask for gigabytes


class DecodingStartedError(Exception):
    """Raised in place of building a model."""


@pytest.fixture
def no_decoding(monkeypatch):
    """Building a model (the first step of decoding) fails the test."""
    def refuse(recipe, weights=None):
        raise DecodingStartedError

    monkeypatch.setattr(api, "Predictor", refuse)


@pytest.mark.parametrize("version", [0, 3, 255])
def test_a_newer_format_version_is_refused_before_decoding(version, no_decoding):
    blob = bytearray(blob_sample())
    blob[4] = version
    with pytest.raises(FormatError, match=f"format version {version} needs a newer rwkvzip"):
        api.decompress(bytes(blob))


@pytest.mark.parametrize("change,message", [
    ({"arch": "mamba3"}, "unknown architecture"),
    ({"contract": 4}, "numeric contract 4 needs a newer rwkvzip"),
    ({"future_field": 1}, "unknown"),
    ({"model": {"hidden": 64, "layers": 1}}, "missing"),
    ({"model": {"hidden": 16384, "layers": 64, "ffn": 16384, "decay_rank": 8, "a_rank": 8,
                "v_rank": 8, "g_rank": 8}}, "MiB"),
])
def test_a_model_this_version_does_not_have_is_refused_before_decoding(change, message,
                                                                         no_decoding):
    d = json.loads(RECIPE.to_json())
    d.update(change)
    raw = json.dumps(d).encode()
    tail = blob_sample()[len(container.encode_header(RECIPE)):]  # the real frames follow
    blob = container.MAGIC + bytes([1, 0]) + container.encode_varint(len(raw)) + raw + tail
    with pytest.raises(FormatError, match=message):
        api.decompress(blob)


def test_an_unknown_preset_card_is_refused_before_decoding(no_decoding):
    newer = max(preset_cards()) + 1
    blob = container.MAGIC + bytes([1]) + container.encode_varint(newer) + blob_sample()[6:]
    with pytest.raises(FormatError, match=f"unknown preset card {newer}: .*newer rwkvzip"):
        api.decompress(blob)
    with pytest.raises(DecodingStartedError):  # the fixture does stop real decoding
        api.decompress(blob_sample())


def _after_header(blob):
    f = io.BytesIO(blob)
    container.read_header(f)
    return f
