"""Line ends (recipe field eol, coding/eol.py): a frame of CRLF text is coded as LF text and
decoded back exactly; any other frame as it is; damaged or forged CRLF frames are clean
errors."""

import functools
import io
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from rwkvzip import api, listing
from rwkvzip.coding import container, eol
from rwkvzip.coding.container import FormatError
from rwkvzip.recipe import LEVELS, preset_by_name

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

FAST = preset_by_name("fast-v2").recipe
RECIPE = replace(FAST, counts=replace(FAST.counts, table_bits=12, match_bits=16))
PLAIN = replace(RECIPE, eol=False)
LINES = b"".join(b"line %d of a text written on Windows, with words\r\n" % i
                 for i in range(3000))
LF_LINES = LINES.replace(b"\r\n", b"\n")
FUZZ = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def frames(blob: bytes) -> list[container.Frame]:
    f = io.BytesIO(blob)
    recipe = container.read_header(f)
    return list(container.read_frames(f, recipe.eol))


def test_crlf_text_is_every_cr_before_lf_and_every_lf_after_cr():
    assert eol.crlf_text(b"a\r\nb\r\n")
    assert eol.crlf_text(b"\r\n")
    for other in (b"", b"text", b"a\nb\r\n", b"a\r\nb\r", b"a\rb\r\n", b"\n\r", b"a\r\r\n"):
        assert not eol.crlf_text(other), other
    assert eol.strip(b"a\r\nb\r\n") == b"a\nb\n"
    assert eol.restore(b"a\nb\n") == b"a\r\nb\r\n"
    assert eol.restore(b"a\rb\n") is None and eol.restore(b"no line end") is None


def test_every_level_codes_crlf_text_as_lf_text():
    assert all(preset_by_name(card).recipe.eol for card in LEVELS.values())


CASES = {
    "crlf": (LINES, [True, True, True]),
    "lf": (LF_LINES, [False, False, False]),
    "crlf then lf": (LINES[:70000] + LF_LINES[:70000], [True, False, False]),
    # a CR LF across the 64 KiB mark: the frame ends before the CR, both are CRLF text
    "cut before a CR": (b"x\r\n" * 21845 + b"\r\n" + LINES[:900], [True, True]),
    "lone CR": (b"a\rb\r\n" * 100, [False]),
    "ends in CR": (LINES[:5000] + b"\r", [False]),
    "only line ends": (b"\r\n" * 40000, [True, True]),
    "empty": (b"", []),
}


@pytest.mark.parametrize("name", CASES)
def test_frames_of_crlf_text_are_coded_as_lf_text_and_decode_exactly(name):
    data, crlf = CASES[name]
    blob = api.compress(data, RECIPE)
    assert api.decompress(blob) == data
    got = frames(blob)
    assert [f.crlf for f in got] == crlf
    for frame in got:
        assert (frame.coded_len < frame.raw_len) == frame.crlf
    if name == "cut before a CR":
        assert got[0].raw_len == container.MAX_FRAME - 1
    # pieces of every size through the incremental reader
    dec = api.Decompressor()
    out = b"".join(dec.decompress(blob[i:i + 7]) for i in range(0, len(blob), 7))
    assert out == data and dec.eof


def test_a_frame_of_crlf_text_codes_exactly_as_its_lf_text():
    (crlf,) = frames(api.compress(LINES[:30000], RECIPE))
    (lf,) = frames(api.compress(eol.strip(LINES[:30000]), RECIPE))
    assert crlf.crlf and not lf.crlf
    assert crlf.payload == lf.payload and crlf.coded_len == lf.raw_len


def test_a_stored_crlf_frame_is_learnt_as_lf_text():
    """A frame that coding would not shrink is stored; the models still ran over it without
    its CRs, and so does the decoder."""
    noise = bytes((i * 7919 + 13) % 251 for i in range(3000)).replace(b"\r", b"").replace(
        b"\n", b"") + b"\r\n"
    blob = api.compress(noise + LINES[:3000], RECIPE)
    assert api.decompress(blob) == noise + LINES[:3000]
    pieces = [noise, LINES[:3000]]
    out = [container.encode_header(RECIPE)]
    pred = api.new_predictor(RECIPE)
    for raw in pieces:
        coded = eol.strip(raw)
        pred.encode_frame(coded)
        out.append(container.encode_frame(raw, None, eol=True, coded_len=len(coded)))
    out.append(container.encode_trailer(sum(map(len, pieces))))
    stored = b"".join(out)
    assert [f.stored and f.crlf for f in frames(stored)] == [True, True]
    assert api.decompress(stored) == noise + LINES[:3000]


def test_the_listing_counts_the_raw_bytes():
    blob = api.compress(LINES, RECIPE)
    seen = listing.scan(io.BytesIO(blob))
    assert (seen.raw, seen.frames, seen.compressed) == (len(LINES), 3, len(blob))


def test_costs_follow_the_frames_as_coded():
    from costs import byte_costs

    costs = byte_costs(LINES[:20000], RECIPE)
    assert len(costs) == 20000 and costs[LINES[:20000].index(b"\r")] == 0
    (frame,) = frames(api.compress(LINES[:20000], RECIPE))
    assert abs(costs.sum() / 8 - len(frame.payload)) < 16


def test_a_recipe_without_eol_reads_frame_heads_as_before():
    """The CRLF bit and coded length exist only in the heads of eol recipes' streams."""
    blob = api.compress(LINES, PLAIN)
    assert not any(f.crlf for f in frames(blob))
    assert api.decompress(blob) == LINES
    with pytest.raises(ValueError):
        container.encode_frame(b"a\r\n", None, coded_len=2)


@functools.cache
def sample() -> bytes:
    return api.compress(LINES[:4000], RECIPE)


def decode_or_error(blob: bytes) -> bytes | None:
    try:
        return api.decompress(blob)
    except FormatError:
        return None


@seed(11)
@FUZZ
@given(st.integers(0, 2**24))
def test_bit_flips_in_a_crlf_stream_are_clean_errors(bit):
    bad = bytearray(sample())
    bit %= len(bad) * 8
    bad[bit // 8] ^= 1 << (bit % 8)
    assert decode_or_error(bytes(bad)) in (None, LINES[:4000])


@seed(12)
@FUZZ
@given(st.integers(0, 2**20), st.integers(0, 2**20), st.booleans())
def test_forged_coded_lengths_and_bits_are_clean_errors(coded_len, payload_len, crlf):
    f = io.BytesIO(sample())
    container.read_header(f)
    head = container.read_frame_head(f, 0, 0, eol=True)
    payload = f.read(head.payload_len)
    forged = (container.encode_header(RECIPE) + container.encode_varint(head.raw_len)
              + container.encode_varint(4 * payload_len + 2 * crlf)
              + (container.encode_varint(coded_len) if crlf else b"")
              + head.crc.to_bytes(4, "little") + payload + container.encode_trailer(4000))
    assert decode_or_error(forged) in (None, LINES[:4000])


def test_train_reads_samples_as_the_level_codes_them(tmp_path):
    from rwkvzip.training import sample_documents

    for i in range(4):
        (tmp_path / f"sample{i}.txt").write_bytes(LINES[i * 5000:(i + 1) * 5000])
    card = preset_by_name("mix-v67").recipe
    docs = sample_documents([str(tmp_path)], card)
    assert docs and not any(b"\r" in d.data for d in docs)
    kept = sample_documents([str(tmp_path)], replace(card, eol=False))
    assert all(b"\r\n" in d.data for d in kept)
