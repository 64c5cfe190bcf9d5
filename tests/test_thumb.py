"""The Thumb-2 model (cm/thumb.py): it follows Thumb-2's 16- and 32-bit instructions, it is
live on code whose calls land on known targets and nowhere else (text and other binary data
code exactly as without it), its bl transform is one to one and decodes, and it codes
Thumb-2 code better."""

from dataclasses import replace

import numpy as np
from mixing_probe import coded_as_learned, fed, instruction_lengths, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import thumb
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import codec, coder
from rwkvzip.recipe import Recipe

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21, 22, 24), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
THUMB = replace(SMALL, thumb=True)
TEXT = b"Calls land where calls landed before; the follower reads them. " * 40


def halves(*hs: int) -> bytes:
    return b"".join(h.to_bytes(2, "little") for h in hs)


def bl(offset_halfwords: int) -> bytes:
    """bl <offset> (in halfwords from the instruction + 2)."""
    h1, h2 = thumb.with_offset(0xF000, 0xD000, offset_halfwords & thumb.OFFSET_MASK)
    return halves(h1, h2)


# Thumb-2 instructions of a function's body (from the ARM ARM's encodings)
BODY = [
    halves(0xB580),  # push {r7, lr}
    halves(0x4608),  # mov r0, r1
    halves(0x6840),  # ldr r0, [r0, #4]
    halves(0x2800),  # cmp r0, #0
    halves(0xD001),  # beq +2
    halves(0xF8D0, 0x1004),  # ldr.w r1, [r0, #4]
    halves(0xF04F, 0x0001),  # mov.w r0, #1 (11110 first halfword, not a bl)
    halves(0xE92D, 0x41F0),  # push.w {r4-r8, lr}
    halves(0x3001),  # adds r0, #1
]


def calling_code(functions: int = 60, seed: int = 3) -> bytes:
    """Thumb-2 functions that call a few common ones: each bl's offset differs with its
    place, its target does not."""
    rng = np.random.default_rng(seed)
    out, starts, calls = bytearray(), [], []
    for _ in range(functions):
        starts.append(len(out))
        out += BODY[0]
        for _ in range(4 + int(rng.integers(10))):
            if rng.random() < 0.3:
                calls.append((len(out), int(rng.integers(5))))  # one of five favourites
                out += bytes(4)
            else:
                out += BODY[1 + int(rng.integers(len(BODY) - 1))]
        out += halves(0xBD80)  # pop {r7, pc}
    for at, callee in calls:
        out[at:at + 4] = bl((starts[callee] - at) // 2)
    return bytes(out)


def lengths(data: bytes) -> list[int]:
    """The instructions' lengths the follower finds in data."""
    return instruction_lengths(data, THUMB, thumb.read_byte, thumb.S_T_START)


def test_the_follower_finds_every_instruction():
    assert lengths(b"".join(BODY) * 2) == [len(i) for i in BODY] * 2


def test_bl_offsets_take_their_targets_one_to_one():
    rng = np.random.default_rng(1)
    for v in [0, 1, thumb.OFFSET_MASK, 1 << 23, *rng.integers(0, 1 << 24, 200)]:
        v = int(v)
        for h1, h2 in ((0xF000, 0xD000), (0xF7FF, 0xFFFF), (0xF000, 0xC000)):  # bl, blx
            a, b = thumb.with_offset(h1, h2, v)
            assert thumb.is_bl(a, b) and thumb.bl_offset(a, b) == v
            assert a >> 11 == h1 >> 11 and b & 0xD000 == h2 & 0xD000  # the opcode's bits kept
    assert not thumb.is_bl(0xF04F, 0x0001)  # mov.w: 11110, but not a bl
    h1, h2 = thumb.with_offset(0xF000, 0xD000, (-5) & thumb.OFFSET_MASK)
    assert (h1, h2) == (0xF7FF, 0xFFFB)  # an offset of -5 halfwords, as assemblers write it


def test_live_on_thumb_code_and_not_on_text_or_other_data():
    S = fed(TEXT + calling_code(), THUMB).S
    assert S[thumb.S_T_SEL] >= 0
    assert payload(TEXT, THUMB) == payload(TEXT, SMALL)
    text = ("絵文字 😀🙂 むかしむかし 낀 " * 150).encode()  # 4-byte UTF-8 has F0
    assert fed(text, THUMB).S[thumb.S_T_SEEN] == -1
    assert payload(text, THUMB) == payload(text, SMALL)
    rng = np.random.default_rng(5)  # random bytes and little-endian integers: no evidence
    other = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    other += np.cumsum(rng.integers(0, 90, 3000)).astype("<i4").tobytes()
    assert fed(other, THUMB).S[thumb.S_T_SEEN] == -1
    assert payload(other, THUMB) == payload(other, SMALL)


def test_calls_code_smaller_by_their_targets_and_decode():
    code = calling_code(240)
    data = TEXT + code
    assert len(payload(data, THUMB)) < 0.9 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=THUMB))) == data
    block = np.frombuffer(data, dtype=np.uint8).copy()  # the encoder's view: targets
    predictor = codec.Predictor(Recipe(mix=THUMB))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    seen = block.tobytes()
    sizes = lengths(code)
    places = list(zip(len(TEXT) + np.cumsum([0, *sizes[:-1]]), sizes, strict=True))
    bls = [i for i, n in places if n == 4 and data[i + 1] & 0xF8 == 0xF0
           and data[i + 3] & 0xC0 == 0xC0]
    changed = [i for i, n in places if seen[i:i + n] != data[i:i + n]]
    assert set(changed) <= set(bls)  # mov.w and the rest keep their bits
    assert len(changed) > 0.8 * len(bls) > 10  # (the first few, before the evidence, not)
    assert len({seen[i:i + 4] for i in changed}) <= 5  # one word per callee


def test_calls_across_kernel_blocks_are_left_alike_by_every_side():
    """A bl that straddles two of the codec's blocks stays as it is: coding a frame and
    learning it uncoded (a stored frame) leave the same model, and it decodes."""
    code = calling_code(400)
    data, boundary, at = bytearray(), codec.ENCODE_BLOCK, 0
    for n in lengths(code):
        if len(data) + n > boundary - 2:
            while len(data) < boundary - 2:
                data += BODY[1]  # mov (2 bytes)
            data += bl(-len(data) // 2)  # two bytes in one block, two in the next
            boundary += codec.ENCODE_BLOCK
        data += code[at:at + n]
        at += n
    assert boundary > 3 * codec.ENCODE_BLOCK
    assert coded_as_learned(bytes(data), Recipe(mix=THUMB))


def test_the_contexts_follow_the_instruction():
    """Live, the word and text kinds' slots carry instruction contexts; the others are
    untouched."""
    data = TEXT + calling_code()
    assert slots_changed(data, THUMB, SMALL) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
