"""Frames that do not compress bypass the models (recipe field bypass, coding/bypass.py):
random data is stored at once, with the bit in its frame head, and decoded without a
model; data that compresses, even a little, is coded as without the field."""

import gzip
import io
import os
from dataclasses import replace

import numpy as np
import pytest

from rwkvzip import api
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import bypass, container
from rwkvzip.recipe import Recipe, RecipeError

PLAIN = Recipe(mix=MixConfig(orders=(1, 2, 3, 0), table_bits=12, match_bits=16,
                             network=False))
BYPASS = replace(PLAIN, bypass=True)
FRAME = container.MAX_FRAME
TEXT = (b"Frames that compress are coded; frames that do not are stored at once. " * 2000)


def frames(blob: bytes, recipe: Recipe) -> list[container.Frame]:
    f = io.BytesIO(blob)
    assert container.read_header(f) == recipe
    return list(container.read_frames(f, recipe.eol, recipe.bypass))


def payloads(data: bytes, recipe: Recipe) -> list[bytes]:
    """The frames' payloads (the heads differ by the bypass bit)."""
    return [f.payload for f in frames(api.compress(data, recipe=recipe), recipe)]


def random_bytes(n: int, seed: int = 1) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_random_frames_bypass_and_decode_without_a_model():
    data = random_bytes(3 * FRAME + 20000)  # the last frame's 20 KB are random enough
    blob = api.compress(data, recipe=BYPASS)
    assert [f.bypassed for f in frames(blob, BYPASS)] == [True] * 4
    header = len(api.compress(b"", recipe=BYPASS))  # a spelled-out recipe's
    assert len(blob) - header - len(data) <= 0.001 * len(data)
    decoder = api.Decompressor()
    assert decoder.decompress(blob) == data and decoder.eof
    assert decoder._predictor is None  # no model was built
    assert api.decompress(blob) == data


def test_text_and_mixed_data_code_as_without_the_field():
    data = TEXT[:FRAME] + random_bytes(FRAME) + TEXT[FRAME:2 * FRAME]
    blob = api.compress(data, recipe=BYPASS)
    assert [f.bypassed for f in frames(blob, BYPASS)] == [False, True, False]
    assert api.decompress(blob) == data
    assert payloads(TEXT, BYPASS) == payloads(TEXT, PLAIN)


def test_what_compresses_a_little_is_not_bypassed():
    """Concatenated gzip members (their headers repeat) and a random block seen before,
    within the match model's reach, keep what the models gain on them."""
    rng = np.random.default_rng(4)
    words = ["".join(chr(97 + c) for c in rng.integers(0, 26, 1 + i % 9)) for i in range(3000)]
    prose = " ".join(rng.choice(words, 120_000)).encode()
    members = b"".join(gzip.compress(prose[i:i + 3000], 9, mtime=0)
                       for i in range(0, len(prose), 3000))[:2 * FRAME]
    counts = np.bincount(np.frombuffer(members[:FRAME], np.uint8), minlength=256) / FRAME
    assert -(counts * np.log2(counts)).sum() > 7.9  # nearly flat bytes: the repeats decide
    blob = api.compress(members, recipe=BYPASS)
    assert not any(f.bypassed for f in frames(blob, BYPASS))
    assert payloads(members, BYPASS) == payloads(members, PLAIN)
    seen = random_bytes(4000, seed=2)
    data = TEXT[:FRAME - 4000] + seen + random_bytes(FRAME - 4000, seed=3) + seen
    blob = api.compress(data, recipe=BYPASS)
    assert [f.bypassed for f in frames(blob, BYPASS)] == [False, False]
    assert len(blob) < len(data) - 3000  # the second copy coded from the first
    assert api.decompress(blob) == data


def test_the_test_remembers_only_what_the_models_saw_within_their_reach():
    test = bypass.Bypass(history=2 * FRAME)
    block = random_bytes(FRAME)
    assert test.decide(block) and test.decide(block)  # bypassed: never seen by the models
    text = bytearray(TEXT[:FRAME])
    text[:4000] = block[:4000]
    assert not test.decide(bytes(text))  # modelled, and remembered
    assert not test.decide(block)  # repeats what the models saw
    for seed in (5, 6):
        assert not test.decide(TEXT[seed:seed + FRAME])  # two more frames: out of reach
    assert test.decide(block)


def test_frame_heads_carry_the_bit():
    raw = b"abc"
    for eol in (False, True):
        bypassed = container.encode_frame(raw, None, eol=eol, bypass=True, bypassed=True)
        stored = container.encode_frame(raw, None, eol=eol, bypass=True)
        for frame, flag in ((bypassed, True), (stored, False)):
            head = container.read_frame_head(io.BytesIO(frame), 0, 0, eol, True)
            assert head.stored and head.bypassed == flag and head.raw_len == 3
        # without the field the head is as before
        assert (container.encode_frame(raw, None, eol=eol)
                == container.encode_frame(raw, None, eol=eol, bypass=False))
    with pytest.raises(ValueError):
        container.encode_frame(raw, b"1234", bypass=True, bypassed=True)  # coded
    with pytest.raises(ValueError):
        container.encode_frame(raw, None, bypassed=True)  # the recipe has no bit
    forged = container.encode_varint(3) + container.encode_varint((3 << 2) | 2) + bytes(7)
    with pytest.raises(container.FormatError, match="bypassed but not stored"):
        container.read_frame_head(io.BytesIO(forged), 0, 0, bypass=True)


def test_the_field_is_a_recipe_field():
    assert "bypass" not in PLAIN.to_dict() and BYPASS.to_dict()["bypass"] is True
    assert Recipe.from_json(BYPASS.to_json()) == BYPASS
    with pytest.raises(RecipeError):
        Recipe.from_dict({**BYPASS.to_dict(), "bypass": 1})


def test_the_cli_stores_random_data_fast(tmp_path):
    """The draft default card has the field: random data goes through the command line."""
    from clitools import rwkvzip

    data = os.urandom(2 * FRAME)
    src = tmp_path / "random.bin"
    src.write_bytes(data)
    assert rwkvzip("-k", str(src)).returncode == 0
    packed = tmp_path / "random.bin.rwkz"
    assert len(packed.read_bytes()) - len(data) < 100
    src.unlink()
    assert rwkvzip("-d", str(packed)).returncode == 0 and src.read_bytes() == data
