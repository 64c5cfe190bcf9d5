"""The z/Architecture model (cm/s390x.py): it follows s390x's 2-, 4- and 6-byte
instructions, it is live on code with epilogues and nowhere else (text and other binary data
code exactly as without it), its relative operands' transform is one to one and decodes,
and it codes s390x code better."""

from dataclasses import replace

import numpy as np
from mixing_probe import coded_as_learned, fed, instruction_lengths, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import exe, riscv, s390x
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import codec, coder
from rwkvzip.recipe import Recipe

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21, 22, 24), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
S390X = replace(SMALL, s390x=True)
TEXT = b"Instructions come in three lengths; the follower reads them. " * 40

# s390x instructions (hand-assembled from the Principles of Operation's formats)
BODY = [
    bytes.fromhex("eb6ff0300024"),  # stmg %r6, %r15, 48(%r15)
    bytes.fromhex("b90400ef"),  # lgr %r14, %r15
    bytes.fromhex("a7fbff60"),  # aghi %r15, -160
    bytes.fromhex("e310b0080004"),  # lg %r1, 8(%r11)
    bytes.fromhex("1812"),  # lr %r1, %r2
    bytes.fromhex("a7280000"),  # lhi %r2, 0
    bytes.fromhex("ec12000a007e"),  # cij %r1, 0, 8, +10
    bytes.fromhex("b9140022"),  # lgfr %r2, %r2
    bytes.fromhex("0707"),  # nopr %r7
]
EPILOGUE = bytes.fromhex("eb6ff0a00004 07fe")  # lmg %r6, %r15, 160(%r15); br %r14


def ril(first: int, x: int, offset_halfwords: int) -> bytes:
    return bytes([first, x]) + (offset_halfwords & 0xFFFFFFFF).to_bytes(4, "big")


def calling_code(functions: int = 60, seed: int = 3) -> bytes:
    """s390x functions that call a few common ones (brasl) and address a few globals (larl):
    each offset differs with its place, its target does not."""
    rng = np.random.default_rng(seed)
    out, starts, relative = bytearray(), [], []
    for _ in range(functions):
        starts.append(len(out))
        out += BODY[0]
        for _ in range(4 + int(rng.integers(10))):
            r = rng.random()
            if r < 0.3:
                relative.append((len(out), 0xE5, int(rng.integers(5))))  # brasl %r14
                out += bytes(6)
            elif r < 0.4:
                relative.append((len(out), 0x10, -1 - int(rng.integers(3))))  # larl %r1
                out += bytes(6)
            else:
                out += BODY[int(rng.integers(len(BODY)))]
        out += EPILOGUE
    globals_ = [len(out) + 64 * i for i in range(3)]
    for at, x, callee in relative:
        target = starts[callee] if callee >= 0 else globals_[-1 - callee]
        out[at:at + 6] = ril(0xC0, x, (target - at) // 2)
    return bytes(out)


def lengths(data: bytes) -> list[int]:
    """The instructions' lengths the follower finds in data."""
    return instruction_lengths(data, S390X, s390x.read_byte, s390x.S_Z_START)


def test_the_follower_finds_every_instruction():
    assert lengths(b"".join(BODY) * 2) == [len(i) for i in BODY] * 2


def test_opcodes_take_the_extension_their_format_has():
    assert s390x.opcode(0xC0, 0xE5, 0) == 0xC005  # RIL: the second byte's low half
    assert s390x.opcode(0xB9, 0x04, 0) == 0xB904  # RRE: the second byte
    assert s390x.opcode(0xE3, 0x10, 0x04) == 0xE304  # RXY: the last byte
    assert s390x.opcode(0x18, 0x12, 0) == 0x1800


def test_live_on_s390x_code_and_not_on_text_or_other_data():
    S = fed(TEXT + calling_code(), S390X).S
    assert S[s390x.S_Z_SEL] >= 0
    assert payload(TEXT, S390X) == payload(TEXT, SMALL)
    rng = np.random.default_rng(5)  # random bytes and big-endian integers: no evidence
    other = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    other += np.cumsum(rng.integers(0, 90, 3000)).astype(">i4").tobytes()
    assert fed(other, S390X).S[s390x.S_Z_SEEN] == -1
    assert payload(other, S390X) == payload(other, SMALL)


def test_one_epilogue_is_not_evidence_nor_two_far_apart():
    one = bytes(100) + EPILOGUE + bytes(100)
    assert fed(one, S390X).S[s390x.S_Z_SEEN] == -1
    assert fed(one + bytes(s390x.SIGNATURE_GAP) + EPILOGUE, S390X).S[s390x.S_Z_SEEN] == -1
    assert fed(one + EPILOGUE, S390X).S[s390x.S_Z_SEEN] > 0


def test_yields_to_the_word_and_riscv_models():
    from make_golden import code  # SPARC code: exe.py's words
    from test_riscv import calling_code as riscv_code

    S = fed(calling_code() + code(), S390X).S
    assert S[exe.S_EXE_SEL] >= 0 and S[s390x.S_Z_SEL] == -1
    S = fed(calling_code() + riscv_code(), replace(S390X, riscv=True)).S
    assert S[riscv.S_RV_SEL] >= 0 and S[s390x.S_Z_SEL] == -1


def test_relative_operands_take_their_targets_one_to_one():
    for v in (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x00123456):
        for at in (0, 2, 1 << 20, (1 << 33) + 6):
            assert s390x.from_target(s390x.to_target(v, at), at) == v
    # one function called from three places: three offsets, one target
    assert len({s390x.to_target(((1000 - at) // 2) & 0xFFFFFFFF, at)
                for at in (6, 300, 900)}) == 1
    assert s390x.is_relative(0xC0, 0xE5) and s390x.is_relative(0xC0, 0x10)  # brasl, larl
    assert s390x.is_relative(0xC4, 0x18) and s390x.is_relative(0xC6, 0x0D)  # lgrl, crl
    assert not s390x.is_relative(0xC0, 0xF4)  # brcl (jg): a jump inside its function


def test_relative_operands_code_smaller_by_their_targets_and_decode():
    code = calling_code(240)
    data = TEXT + code
    assert len(payload(data, S390X)) < 0.9 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=S390X))) == data
    block = np.frombuffer(data, dtype=np.uint8).copy()  # the encoder's view: targets
    predictor = codec.Predictor(Recipe(mix=S390X))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    seen = block.tobytes()
    starts = len(TEXT) + np.cumsum([0, *lengths(code)])
    rel = [i for i in starts[:-1] if data[i] == 0xC0]
    changed = sum(seen[i + 2:i + 6] != data[i + 2:i + 6] for i in rel)
    assert changed > 0.8 * len(rel) > 10  # (the first few, before the evidence, are not)
    assert all(seen[i:i + 2] == data[i:i + 2] for i in rel)  # the opcode is never changed


def test_operands_across_kernel_blocks_are_left_alike_by_every_side():
    """An offset that straddles two of the codec's blocks stays as it is: coding a frame and
    learning it uncoded (a stored frame) leave the same model, and it decodes."""
    code = calling_code(400)
    data, boundary, at = bytearray(), codec.ENCODE_BLOCK, 0
    for n in lengths(code):
        if len(data) + n > boundary - 4:
            while len(data) < boundary - 4:
                data += BODY[-1]  # nopr (2 bytes)
            data += ril(0xC0, 0xE5, -len(data) // 2)  # offset: two bytes here, two in the next
            boundary += codec.ENCODE_BLOCK
        data += code[at:at + n]
        at += n
    assert boundary > 3 * codec.ENCODE_BLOCK
    assert coded_as_learned(bytes(data), Recipe(mix=S390X))


def test_the_contexts_follow_the_instruction():
    """Live, the word and text kinds' slots carry instruction contexts; the others are
    untouched."""
    data = TEXT + calling_code()
    assert slots_changed(data, S390X, SMALL) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
