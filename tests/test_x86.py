"""The x86 model (cm/x86.py): its length decoder finds the instructions of x86-64 and i386
code, it is live on code with calls and nowhere else (text and other binary data code
exactly as without it), its calls' transform is one to one and decodes, and it codes x86
code better."""

from dataclasses import replace

import numpy as np
from mixing_probe import coded_as_learned, fed, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import exe, x86
from rwkvzip.cm.context import S_CTX
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.coding import codec, coder
from rwkvzip.recipe import Recipe

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21, 22, 24), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
X86 = replace(SMALL, x86=True)
TEXT = b"Instructions have fields; the decoder follows them. " * 40

# x86-64 instructions, one a row (hand-assembled; lengths from the Intel SDM's maps)
X86_64 = [
    "55",  # push rbp
    "48 89 e5",  # mov rbp, rsp
    "48 83 ec 10",  # sub rsp, 0x10
    "89 7d fc",  # mov [rbp-4], edi
    "e8 10 00 00 00",  # call rel32
    "48 8d 05 00 01 00 00",  # lea rax, [rip+0x100]
    "48 8b 04 24",  # mov rax, [rsp]            (SIB)
    "48 8b 44 24 08",  # mov rax, [rsp+8]       (SIB, disp8)
    "48 8b 84 24 00 01 00 00",  # mov rax, [rsp+0x100]
    "8b 04 25 10 00 00 00",  # mov eax, [0x10]  (SIB, no base: disp32)
    "c7 45 f8 01 00 00 00",  # mov dword [rbp-8], 1
    "66 c7 45 f8 01 00",  # mov word [rbp-8], 1
    "48 b8 01 02 03 04 05 06 07 08",  # mov rax, imm64
    "b8 01 00 00 00",  # mov eax, 1
    "0f 84 00 02 00 00",  # je rel32
    "74 05",  # je rel8
    "0f b6 45 ff",  # movzx eax, byte [rbp-1]
    "66 0f 6f 45 f0",  # movdqa xmm0, [rbp-16]
    "66 0f 3a 0f c1 08",  # palignr xmm0, xmm1, 8
    "66 0f 38 00 c1",  # pshufb xmm0, xmm1
    "c5 f8 77",  # vzeroupper
    "c4 e2 79 18 45 f0",  # vbroadcastss xmm0, [rbp-16]
    "c4 e3 79 0f c1 08",  # vpalignr xmm0, xmm0, xmm1, 8
    "62 f1 7c 48 10 45 01",  # vmovups zmm0, [rbp+0x40]
    "f6 45 ff 01",  # test byte [rbp-1], 1
    "f7 c0 01 00 00 00",  # test eax, 1
    "f7 d8",  # neg eax
    "f3 0f 1e fa",  # endbr64
    "0f 1f 44 00 00",  # nop dword [rax+rax]
    "a1 00 00 00 00 00 00 00 00",  # mov eax, [moffs64]
    "c8 10 00 00",  # enter 16, 0
    "c2 08 00",  # ret 8
    "e9 00 01 00 00",  # jmp rel32
    "f0 48 0f b1 0a",  # lock cmpxchg [rdx], rcx
    "c3",  # ret
]
# i386: 40-4F are inc/dec, and a moffs is 4 bytes
I386 = [
    "55", "89 e5", "53", "e8 00 00 00 00", "81 c3 10 00 00 00", "83 ec 14", "8b 45 08",
    "40", "89 04 24", "48", "e8 20 00 00 00", "a1 10 20 30 40", "c9", "c3",
]


def instruction_bytes(rows: list[str]) -> bytes:
    return b"".join(bytes.fromhex(row) for row in rows)


def lengths(data: bytes, mode64: bool) -> list[int]:
    """The instructions' lengths the length decoder finds in data."""
    S = MixArrays(X86, 1).S
    S[x86.S_X86_MODE] = x86.MODE_64_AT * 2 if mode64 else 0
    found, start, hist = [], 0, 0
    for n, c in enumerate(data, 1):
        hist = ((hist << 8) | c) & ((1 << 48) - 1)
        x86.read_byte(S, c, hist, n)
        if S[x86.S_X86_STAGE] == x86.ST_OP and S[x86.S_X86_NPFX] == 0:
            found.append(n - start)
            start = n
    return found


def test_the_length_decoder_finds_every_instruction():
    for rows, mode64 in ((X86_64, True), (I386, False)):
        expected = [len(bytes.fromhex(row)) for row in rows]
        assert lengths(instruction_bytes(rows) * 2, mode64) == expected * 2


def calling_code(functions: int = 60, seed: int = 3) -> bytes:
    """x86-64-like functions that call a few common ones: each call's displacement differs
    with its place, its target does not."""
    rng = np.random.default_rng(seed)
    body = [bytes.fromhex(row) for row in X86_64 if not row.startswith(("e8", "e9", "0f 84"))]
    out, starts, calls = bytearray(), [], []
    for _ in range(functions):
        starts.append(len(out))
        out += bytes.fromhex("55 48 89 e5")
        for _ in range(4 + int(rng.integers(10))):
            if rng.random() < 0.35:
                out += b"\xe8"
                calls.append((len(out), int(rng.integers(5))))  # one of five favourites
                out += bytes(4)
            else:
                out += body[int(rng.integers(len(body)))]
        out += bytes.fromhex("5d c3")
    for at, callee in calls:
        out[at:at + 4] = ((starts[callee] - (at + 4)) & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(out)


def test_live_on_x86_code_and_not_on_text_or_other_data():
    S = fed(TEXT + calling_code(), X86).S
    assert S[x86.S_X86_SEL] >= 0 and x86.is_64(S)
    assert payload(TEXT, X86) == payload(TEXT, SMALL)
    rng = np.random.default_rng(5)  # random bytes and little-endian integers: no evidence
    other = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    other += np.cumsum(rng.integers(0, 90, 3000)).astype("<i4").tobytes()
    assert fed(other, X86).S[x86.S_X86_SEEN] == -1
    assert payload(other, X86) == payload(other, SMALL)


def test_i386_code_is_told_from_x86_64():
    code32 = instruction_bytes(I386) * 200
    S = fed(code32, X86).S
    assert not x86.is_64(S)
    assert x86.is_64(fed(calling_code(), X86).S)


def test_yields_to_the_word_model():
    from make_golden import code  # SPARC code: exe.py's words

    S = fed(calling_code() + code(), X86).S
    assert S[exe.S_EXE_SEL] >= 0 and S[x86.S_X86_SEL] == -1


def test_near_displacements_take_their_targets_one_to_one():
    for v in (0, 1, 0x00FFFFFF, 0xFF000000, 0xFFFFFFFF, 0x00123456, 0xFFABCDEF):
        assert x86.near_value(v)
        for at in (0, 5, 1 << 20, (1 << 33) + 7):
            target = x86.to_near(v + at)
            assert x86.near_value(target) and x86.to_near(target - at) == v
    # one function called from three places: three displacements, one target
    assert len({x86.to_near(((1000 - at) & 0xFFFFFFFF) + at) for at in (7, 300, 900)}) == 1
    for v in (0x01000000, 0xFE000000, 0x80000000, 0x7FFFFFFF):
        assert not x86.near_value(v)


def test_calls_code_smaller_by_their_targets_and_decode():
    data = TEXT + calling_code(240)
    assert len(payload(data, X86)) < 0.9 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=X86))) == data
    block = np.frombuffer(data, dtype=np.uint8).copy()  # the encoder's view: targets
    predictor = codec.Predictor(Recipe(mix=X86))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    seen = block.tobytes()
    calls = [i + 1 for i in range(len(TEXT), len(data) - 5) if data[i] == 0xE8
             and data[i + 4] == 0xFF]  # the backward calls (the forward ones may be 00 ...)
    rip = [i + 3 for i in range(len(TEXT), len(data) - 7) if data[i:i + 3] == b"\x48\x8d\x05"]
    for places in (calls, rip):  # most are coded as targets (the first few, before the
        changed = sum(seen[i:i + 4] != data[i:i + 4] for i in places)  # evidence, are not)
        assert changed > 0.8 * len(places) > 10


def test_conditional_jumps_keep_their_displacement():
    """jcc rel32 stays inside its function: copies of a function match byte for byte."""
    jcc = bytes.fromhex("0f 84 10 00 00 00 48 89 e5")  # je +16; mov rbp, rsp
    data = TEXT + calling_code(240) + jcc * 50 + calling_code(20, seed=9)
    block = np.frombuffer(data, dtype=np.uint8).copy()
    predictor = codec.Predictor(Recipe(mix=X86))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    assert fed(data[:len(data) - 200], X86).S[x86.S_X86_SEL] >= 0  # live there
    at = len(TEXT) + len(calling_code(240))
    assert block.tobytes()[at:at + 50 * len(jcc)] == jcc * 50
    assert api.decompress(api.compress(data, Recipe(mix=X86))) == data


def test_calls_across_kernel_blocks_are_left_alike_by_every_side():
    """A displacement that straddles two of the codec's blocks stays as it is: coding a
    frame and learning it uncoded (a stored frame) leave the same model, and it decodes."""
    data = bytearray(calling_code(400))
    for at in range(codec.ENCODE_BLOCK - 3, len(data) - 8, codec.ENCODE_BLOCK):
        data[at - 1:at + 4] = b"\xe8" + (at & 0xFFFF).to_bytes(4, "little")  # straddles
    assert coded_as_learned(bytes(data), Recipe(mix=X86))


def test_the_contexts_follow_the_instruction():
    """Live, the word and text kinds' slots carry instruction contexts; the others are
    untouched."""
    data = TEXT + calling_code()
    assert slots_changed(data, X86, SMALL) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]


def slot_context(kind: int, instructions: list[str]) -> int:
    """The context the live model gives kind's slot (added to X86's kinds if missing) after
    text, calling code and these instructions."""
    mix = X86 if kind in X86.orders else replace(X86, orders=X86.orders + (kind,))
    S = fed(TEXT + calling_code() + instruction_bytes(instructions), mix).S
    assert S[x86.S_X86_SEL] >= 0
    return int(S[S_CTX + mix.orders.index(kind)])


def test_a_slot_reads_the_bytes_two_to_five_back_as_an_instruction_start():
    """Kind 19's slot (sheet_left) takes bytes 5 and 4 back as prefixes (0F, 66, 67 or
    none), byte 3 whole and byte 2's ModRM mod and rm, never the last byte (often an
    immediate's or a displacement's)."""

    def context(tail: str) -> int:  # after mov eax, imm32: the same place and opcode
        return slot_context(19, [tail])

    first = context("b8 11 22 33 44")
    assert context("b8 11 22 33 55") == first  # the last byte
    assert context("b8 12 22 33 44") == first  # another byte that is no prefix
    assert context("b8 11 22 0b 44") == first  # ModRM's reg field (0x33 ^ 0x38)
    for other in ("b8 0f 22 33 44", "b8 66 22 33 44", "b8 11 23 33 44", "b8 11 22 73 44"):
        assert context(other) != first, other


def test_a_slot_reads_the_last_byte_after_two_prefix_classes():
    """Kind 18's slot (sheet_above) takes the last byte whole and bytes 3 and 2 back only as
    prefixes (0F, 66, 67 or none): the short instruction start the other slot skips."""

    def context(tail: str) -> int:  # after mov eax, imm32: the same place and opcode
        return slot_context(18, [tail])

    first = context("b8 11 22 33 44")
    assert context("b8 11 23 34 44") == first  # bytes 3 and 2 that are no prefix
    for other in ("b8 11 22 33 45", "b8 11 22 0f 44", "b8 11 66 33 44", "b8 11 22 67 44"):
        assert context(other) != first, other


def test_a_slot_reads_the_last_two_instructions_modrm_mod_and_reg():
    """Kind 21's slot (word_trigram) takes the last two opcodes with their ModRMs' mod and
    reg fields (the registers the code is using), not rm."""

    def context(load: str) -> int:  # the next opcode, after `load` and mov eax, imm32
        return slot_context(21, [load, "b8 11 22 33 44"])

    first = context("8b 45 f0")  # mov eax, [ebp - 16]
    assert context("8b 46 f0") == first  # [esi - 16]: rm
    assert context("8b 45 e0") == first  # the displacement
    for other in ("8b 4d f0", "8b 85 f0 00 00 00", "89 45 f0"):  # reg, mod, the opcode
        assert context(other) != first, other


def test_each_place_keeps_its_last_two_bytes():
    """The bytes coded at one place (the field and the byte in it, REX.W; a displacement's
    ModRM mod and rm; an immediate's opcode class) are that place's last bytes."""
    tail = instruction_bytes(["b8 11 00 00 00", "8b 45 f0", "b8 22 00 00 00",
                              "48 c7 c0 33 00 00 00", "8b 45 e8", "90", "90"])
    S = fed(TEXT + calling_code() + tail, X86).S

    def last(place: int) -> int:
        return S[x86.S_X86_PLACE_BYTES + place]

    mov_imm = 8 * x86.ST_IMM | (1 + (int(x86.hash32(0xB8)) >> 29)) << 7
    assert last(mov_imm) == 0x1122
    mov_rex_w = 8 * x86.ST_IMM | 64 | (1 + (int(x86.hash32(0xC7)) >> 29)) << 7
    assert last(mov_rex_w) & 0xFF == 0x33
    rbp_disp8 = 8 * x86.ST_DISP | (1 + 5 + 8 * 1) << 7  # mod 1, rm 5: [rbp + disp8]
    assert last(rbp_disp8) == 0xF0E8


def pic_code(functions: int = 200, seed: int = 5) -> tuple[bytes, list[int]]:
    """i386 position-independent functions: each calls a thunk that returns its own end,
    adds the GOT's distance from there to ebx (81 c3 imm32) and calls a few favourites;
    the code and where the adds' immediates are."""
    rng = np.random.default_rng(seed)
    body = [bytes.fromhex(row) for row in I386 if not row.startswith(("e8", "81"))]
    out = bytearray(bytes.fromhex("8b 1c 24 c3"))  # the thunk: mov ebx, [esp]; ret
    got, starts, adds = 0x30000, [], []
    for _ in range(functions):
        starts.append(len(out))
        out += bytes.fromhex("55 89 e5 53 e8") + ((-(len(out) + 9)) & 0xFFFFFFFF).to_bytes(4,
                                                                                     "little")
        adds.append(len(out) + 2)
        out += b"\x81\xc3" + ((got - len(out)) & 0xFFFFFFFF).to_bytes(4, "little")
        for _ in range(3 + int(rng.integers(8))):
            if rng.random() < 0.3 and len(starts) > 5:
                callee = starts[int(rng.integers(5))]
                out += b"\xe8" + ((callee - (len(out) + 5)) & 0xFFFFFFFF).to_bytes(4, "little")
            else:
                out += body[int(rng.integers(len(body)))]
        out += bytes.fromhex("5b 5d c3")
    return bytes(out), adds


def test_i386_got_adds_take_the_got_and_decode():
    """`add ebx, imm32` after the thunk's call: the encoder sees the GOT's address (one value)
    in place of each function's distance to it, and the decoder turns it back."""
    code, adds = pic_code()
    data = TEXT + code
    block = np.frombuffer(data, dtype=np.uint8).copy()
    predictor = codec.Predictor(Recipe(mix=X86))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    seen = [block.tobytes()[len(TEXT) + at:len(TEXT) + at + 4] for at in adds]
    got = int(x86.to_near(0x30000 + len(TEXT))).to_bytes(4, "little")  # from the stream
    assert sum(s == got for s in seen) > 0.8 * len(adds)
    assert len(set(code[at:at + 4] for at in adds)) == len(adds)  # as written: all differ
    assert api.decompress(api.compress(data, Recipe(mix=X86))) == data
