"""The RISC-V model (cm/riscv.py): it follows RV64GC's 16- and 32-bit instructions, it is
live on code with rets and nowhere else (text and other binary data code exactly as without
it), its jumps' transform is one to one and decodes, and it codes RISC-V code better."""

from dataclasses import replace

import numpy as np
from mixing_probe import coded_as_learned, fed, instruction_lengths, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import exe, riscv, x86
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import codec, coder
from rwkvzip.recipe import Recipe

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21, 22, 24), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
RISCV = replace(SMALL, riscv=True)
TEXT = b"Instructions come in two lengths; the follower reads them. " * 40


def jal(rd: int, offset: int) -> bytes:
    """jal rd, offset (bytes, even): imm[20|10:1|11|19:12] in bits 31-12."""
    imm = offset & 0x1FFFFF
    field = (((imm >> 20) & 1) << 19 | ((imm >> 1) & 0x3FF) << 9 | ((imm >> 11) & 1) << 8
             | (imm >> 12) & 0xFF)
    return (field << 12 | rd << 7 | riscv.OP_JAL).to_bytes(4, "little")


def auipc(rd: int, page: int) -> bytes:
    return ((page & 0xFFFFF) << 12 | rd << 7 | riscv.OP_AUIPC).to_bytes(4, "little")


def half(h: int) -> bytes:
    return h.to_bytes(2, "little")


def word(w: int) -> bytes:
    return w.to_bytes(4, "little")


# RV64GC instructions of a function's body (hand-assembled from the ISA manual's formats)
BODY = [
    word(0xFE010113),  # addi sp, sp, -32
    word(0x00113C23),  # sd ra, 24(sp)
    word(0x00853503),  # ld a0, 8(a0)
    word(0x00A50533),  # add a0, a0, a0
    word(0x02B50063),  # beq a0, a1, +32
    half(0x4501),  # c.li a0, 0
    half(0x8522),  # c.mv a0, s0
    half(0x0505),  # c.addi a0, 1
    half(0xC11C),  # c.sw a5, 0(a0)
    word(0x0007C783),  # lbu a5, 0(a5)
    half(0x60E2),  # c.ldsp ra, 24(sp)
]


def calling_code(functions: int = 60, seed: int = 3) -> bytes:
    """RISC-V functions that call a few common ones and load their globals with auipc: each
    call's offset differs with its place, its target does not."""
    rng = np.random.default_rng(seed)
    out, starts, calls = bytearray(), [], []
    for _ in range(functions):
        starts.append(len(out))
        out += word(0xFE010113) + word(0x00113C23)
        for _ in range(4 + int(rng.integers(10))):
            r = rng.random()
            if r < 0.3:
                calls.append((len(out), int(rng.integers(5))))  # one of five favourites
                out += bytes(4)
            elif r < 0.4:
                out += auipc(10, (0x2000 - (len(out) >> 12)) + int(rng.integers(3)))
            else:
                out += BODY[int(rng.integers(len(BODY)))]
        out += half(0x60E2) + half(0x6105) + half(riscv.C_RET)  # c.ldsp, c.addi16sp, c.ret
    for at, callee in calls:
        out[at:at + 4] = jal(1, starts[callee] - at)
    return bytes(out)


def lengths(data: bytes) -> list[int]:
    """The instructions' lengths the follower finds in data."""
    return instruction_lengths(data, RISCV, riscv.read_byte, riscv.S_RV_START)


def test_the_follower_finds_every_instruction():
    assert lengths(b"".join(BODY) * 2) == [len(i) for i in BODY] * 2


def test_the_follower_gets_in_step_at_a_ret():
    """Started in the middle of an instruction, it is in step after the evidence."""
    code = calling_code(20)
    S = fed(b"\x13" + code, RISCV).S  # one byte off: the rets put it right
    assert S[riscv.S_RV_SEL] >= 0
    assert (len(code) + 1 - S[riscv.S_RV_START]) % 2 == 0


def test_live_on_riscv_code_and_not_on_text_or_other_data():
    S = fed(TEXT + calling_code(), RISCV).S
    assert S[riscv.S_RV_SEL] >= 0
    assert payload(TEXT, RISCV) == payload(TEXT, SMALL)
    rng = np.random.default_rng(5)  # random bytes and little-endian integers: no evidence
    other = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    other += np.cumsum(rng.integers(0, 90, 3000)).astype("<i4").tobytes()
    assert fed(other, RISCV).S[riscv.S_RV_SEEN] == -1
    assert payload(other, RISCV) == payload(other, SMALL)


EPILOGUE = half(0x6105) + half(riscv.C_RET)  # c.addi16sp sp, 32; c.ret


def test_one_ret_is_not_evidence_nor_two_far_apart_nor_rets_without_an_epilogue():
    one = bytes(100) + EPILOGUE + bytes(100)
    assert fed(one, RISCV).S[riscv.S_RV_SEEN] == -1
    apart = one + bytes(riscv.SIGNATURE_GAP) + EPILOGUE
    assert fed(apart, RISCV).S[riscv.S_RV_SEEN] == -1
    assert fed(one + EPILOGUE, RISCV).S[riscv.S_RV_SEEN] > 0
    bare = (bytes(10) + half(riscv.C_RET)) * 20  # c.ret after a halfword that frees nothing
    assert fed(bare, RISCV).S[riscv.S_RV_SEEN] == -1


def test_cjk_and_hangul_text_is_not_riscv_code():
    """UTF-8 has the bytes of c.ret (82 80) in U+3080, U+B080 and other characters."""
    text = ("むかしむかし、あるところに。낀 退 " * 120).encode()
    assert text.count(b"\x82\x80") > 200
    assert fed(text, RISCV).S[riscv.S_RV_SEEN] == -1
    assert payload(text, RISCV) == payload(text, SMALL)


def test_yields_to_the_word_and_x86_models():
    from make_golden import code  # SPARC code: exe.py's words
    from test_x86 import calling_code as x86_code

    S = fed(calling_code() + code(), RISCV).S
    assert S[exe.S_EXE_SEL] >= 0 and S[riscv.S_RV_SEL] == -1
    both = replace(RISCV, x86=True)
    S = fed(calling_code() + x86_code(), both).S
    assert S[x86.S_X86_SEL] >= 0 and S[riscv.S_RV_SEL] == -1


def test_jal_and_auipc_take_their_targets_one_to_one():
    rng = np.random.default_rng(1)
    for f in [0, 1, riscv.FIELD_MASK, *rng.integers(0, 1 << 20, 200)]:
        f = int(f)
        assert riscv.jal_field(riscv.jal_offset(f)) == f
        for op in (riscv.OP_JAL, riscv.OP_AUIPC):
            for at in (0, 2, 4094, 1 << 20, (1 << 33) + 6):
                v = riscv.to_target(op, f, at)
                assert 0 <= v <= riscv.FIELD_MASK and riscv.from_target(op, v, at) == f
    # one function called from three places: three offsets, one target
    fields = [int.from_bytes(jal(1, 1000 - at), "little") >> 12 for at in (6, 300, 900)]
    assert len({riscv.to_target(riscv.OP_JAL, f, at)
                for f, at in zip(fields, (6, 300, 900), strict=True)}) == 1


def test_jumps_code_smaller_by_their_targets_and_decode():
    code = calling_code(240)
    data = TEXT + code
    assert len(payload(data, RISCV)) < 0.9 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=RISCV))) == data
    block = np.frombuffer(data, dtype=np.uint8).copy()  # the encoder's view: targets
    predictor = codec.Predictor(Recipe(mix=RISCV))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    seen = block.tobytes()
    starts = len(TEXT) + np.cumsum([0, *lengths(code)])
    jals = [i for i in starts[:-1] if data[i] == 0xEF]  # jal ra
    changed = sum(seen[i + 1:i + 4] != data[i + 1:i + 4] for i in jals)
    assert changed > 0.8 * len(jals) > 10  # (the first few, before the evidence, are not)
    assert all(seen[i] == data[i] for i in jals)  # the first byte is never changed


def test_jumps_across_kernel_blocks_are_left_alike_by_every_side():
    """An instruction that straddles two of the codec's blocks stays as it is: coding a
    frame and learning it uncoded (a stored frame) leave the same model, and it decodes."""
    code = calling_code(400)
    data, boundary, at = bytearray(), codec.ENCODE_BLOCK, 0
    for n in lengths(code):
        if len(data) == boundary - 4 and n == 4:
            data += half(0x0001)  # c.nop
        if len(data) == boundary - 2:
            data += jal(1, -len(data))  # its first two bytes in one block, two in the next
            boundary += codec.ENCODE_BLOCK
        data += code[at:at + n]
        at += n
    assert boundary > 3 * codec.ENCODE_BLOCK
    assert coded_as_learned(bytes(data), Recipe(mix=RISCV))


def test_the_contexts_follow_the_instruction():
    """Live, the word and text kinds' slots carry instruction contexts; the others are
    untouched."""
    data = TEXT + calling_code()
    assert slots_changed(data, RISCV, SMALL) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
