"""The executable model (cm/exe.py): live on SPARC code and the binary words around it, found
by its signature words or a big-endian ELF header, and nowhere else (text and other binary
data code exactly as without it); it yields to the spreadsheet model, reads SPARC's fields,
and codes machine code better."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from mixing_probe import coded_as_learned, fed, payload

from rwkvzip import api
from rwkvzip.cm import context, exe, sheet
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import codec, coder
from rwkvzip.recipe import Recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_golden import code, golden_input  # noqa: E402
from make_golden import sheet as worksheet  # noqa: E402

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21), table_bits=11, match_bits=14,
                  network=False, selectors=2)
EXE = replace(SMALL, exe=True)
TEXT = golden_input()[:600] + b"Words have letters; machine code has fields. " * 40


def contexts(S) -> list[int]:
    return list(S[context.S_CTX:context.S_CTX + S[context.S_K]])


def test_live_on_machine_code_and_not_on_text():
    data = TEXT + code()  # 4-aligned: len(TEXT) % 4 == 0
    live, plain = fed(data, EXE).S, fed(data, SMALL).S
    assert live[exe.S_EXE_SEL] >> exe.SEL_FIELD_BITS == live[context.S_POS] % 4
    changed = [a != b for a, b in zip(contexts(live), contexts(plain), strict=True)]
    assert changed == [False] * 5 + [True] * 3  # kind 11's and the text kinds' slots
    S = fed(code() + TEXT, EXE).S  # back to text: silent again
    assert S[exe.S_EXE_SEL] == -1 and contexts(S) == contexts(fed(code() + TEXT, SMALL).S)


def test_on_text_and_other_binary_data_the_payload_is_unchanged():
    assert payload(TEXT, EXE) == payload(TEXT, SMALL)
    rng = np.random.default_rng(5)  # little-endian integers and x86-like bytes: no evidence
    other = np.cumsum(rng.integers(0, 90, 900)).astype("<i4").tobytes()
    other += bytes([0x48, 0x89, 0xE5, 0xE8, 0, 0, 0, 0, 0xC3, 0x90] * 60)
    assert fed(other, EXE).S[exe.S_EXE_SEEN] == -1
    assert payload(other, EXE) == payload(other, SMALL)


def test_found_at_any_phase_and_by_an_elf_header():
    S = fed(b"x" + code(), EXE).S  # words start at 1 mod 4
    assert S[exe.S_EXE_PHASE] == 1
    assert S[exe.S_EXE_SEL] >> exe.SEL_FIELD_BITS == (S[context.S_POS] - 1) % 4
    header = b"\x7fELF\x01\x02\x01" + bytes(9) + bytes([0, 2, 0, 2]) + bytes(300)
    S = fed(b"ab" + header, EXE).S
    assert S[exe.S_EXE_PHASE] == 2 and S[exe.S_EXE_SEL] >= 0
    little = header[:5] + b"\x01" + header[6:]  # a little-endian ELF: not words of ours
    assert fed(little, EXE).S[exe.S_EXE_SEEN] == -1


def test_yields_to_the_spreadsheet_model():
    both = replace(EXE, orders=EXE.orders + (16, 17))
    S = fed(worksheet()[:-4], both).S  # inside the record chain: binary, but the sheet's
    assert S[sheet.S_SH_NEXT] >= 0 and S[exe.S_EXE_SEL] == -1
    assert fed(code(), both).S[exe.S_EXE_SEL] >= 0  # no chain: the words'


def test_sparc_fields():
    assert exe.fields(0x40000097) == 64  # call
    assert exe.fields(0x11000012) == 128 + 4  # sethi
    assert exe.fields(0x10800005) == 128 + 2  # ba (branch, op2 2)
    assert exe.fields(0x9DE3BF98) == (2 << 6) | 0x3C  # save
    assert exe.fields(0xD0062008) == (3 << 6) | 0x00  # ld
    for j in range(4):
        for hist in (0, 0x9DE3BF98, 0x0123456789ABCD):
            assert exe.next_selector(j, hist) >> exe.SEL_FIELD_BITS == j
    assert exe.word_before(bytes(range(8)), 255, 8) == 0x04050607
    assert exe.word_before(bytes(range(8)), 255, 3) == 0


def test_machine_code_is_coded_better_and_decodes():
    data = TEXT + code()
    assert len(payload(data, EXE)) < 0.95 * len(payload(data, SMALL))
    blob = api.compress(data, Recipe(mix=EXE))
    assert api.decompress(blob) == data


def test_the_golden_input_of_its_cards_has_live_words():
    """The cards' vectors (selftest.EXE_INPUT) code machine code with the model live."""
    from make_golden import bitmap

    from rwkvzip.recipe import DEFAULT_PRESET, preset_by_name

    mix = replace(preset_by_name(DEFAULT_PRESET).recipe.mix, network=False)
    data = golden_input() + bitmap() + worksheet() + code()
    assert len(data) % 4 == 0 and fed(data, mix).S[exe.S_EXE_SEL] >= 0


CALLS = replace(EXE, exe_calls=True)
NEAR_CALLS = (0x40000000, 0x40000001, 0x403FFFFF, 0x7FC00000, 0x7FFFFFFF, 0x7FFFFFF0)


def calling_code(functions: int = 48, seed: int = 11) -> bytes:
    """SPARC-like functions that call a few common ones (as code calls printf or malloc):
    each call's displacement differs with its place, its target does not."""
    rng = np.random.default_rng(seed)
    words, calls, starts = [], [], []
    for _ in range(functions):
        starts.append(len(words))
        words.append(0x9DE3BF98)  # save %sp, -104, %sp
        for _ in range(4 + int(rng.integers(12))):
            if rng.random() < 0.3:
                calls.append((len(words), int(rng.integers(5))))  # one of five favourites
                words.append(0)
            else:
                words.append(int(rng.choice([0x01000000, 0xD0062008, 0x90102001, 0x92100008])))
        words += [0x81C7E008, 0x81E80000]  # ret; restore
    for at, callee in calls:
        words[at] = 0x40000000 | ((starts[callee] - at) & 0x3FFFFFFF)
    return b"".join(w.to_bytes(4, "big") for w in words)


def test_near_calls_take_their_targets_one_to_one():
    for w in NEAR_CALLS:
        for at in (0, 4, 7, 1 << 20, (1 << 40) + 3):
            target = exe.call_target(w, at)
            assert exe.is_near_call(target) and exe.call_displacement(target, at) == w
    # one function called from three places: three displacements, one target
    assert len({exe.call_target(0x40000000 | ((100 - i) & 0x3FFFFFFF), 4 * i)
                for i in (3, 50, 400)}) == 1
    for w in (0x40400000, 0x7FBFFFFF, 0x01000000, 0x9DE3BF98, 0):  # far calls, other words
        assert not exe.is_near_call(w)


def test_calls_code_smaller_by_their_targets_and_decode():
    data = TEXT + calling_code()
    assert payload(TEXT, CALLS) == payload(TEXT, EXE)  # text: nothing transformed
    assert len(payload(data, CALLS)) < 0.95 * len(payload(data, EXE))
    assert api.decompress(api.compress(data, Recipe(mix=CALLS))) == data


def test_calls_across_kernel_blocks_are_left_alike_by_every_side():
    """A word that straddles two of the codec's blocks stays as it is: coding a frame and
    learning it uncoded (a stored frame) leave the same model, and the data decodes."""
    data = bytearray(b"x" + calling_code() * 4)  # words start at 1 mod 4
    for at in range(codec.ENCODE_BLOCK - 3, len(data) - 4, codec.ENCODE_BLOCK):
        data[at:at + 4] = (0x40000000 | (at * 7 & 0x3FFFFF)).to_bytes(4, "big")  # straddles
    assert coded_as_learned(bytes(data), Recipe(mix=CALLS))


def test_only_calls_in_code_take_their_targets():
    """In code (within SIGNATURE_GAP of a signature word) a near call's word is replaced by
    its target's before it is coded; in the tables after the code a word of that form (a
    debug record's type 0x40) stays as it is."""
    code_ = calling_code()
    records = b"".join(i.to_bytes(4, "big") + bytes(4) for i in range(1000))  # binary, live
    far = 0x40000123  # a near call's form, 8 KB after the last signature word
    data = code_ + code_ + records + far.to_bytes(4, "big") + bytes(64)
    block = np.frombuffer(data, dtype=np.uint8).copy()
    predictor = codec.Predictor(Recipe(mix=CALLS))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    n = len(code_)  # the second copy: the model is live from its first word
    for at in range(n, 2 * n, 4):
        word, seen = (int.from_bytes(b[at:at + 4], "big") for b in (data, block.tobytes()))
        assert seen == (exe.call_target(word, at) if exe.is_near_call(word) else word)
    assert sum(exe.is_near_call(int.from_bytes(code_[at:at + 4], "big"))
               for at in range(0, n, 4)) > 50
    assert block[2 * n + len(records):].tobytes() == data[2 * n + len(records):]


LE = replace(CALLS, exe_le=True)


def arm64_code(functions: int = 48, seed: int = 7) -> bytes:
    """AArch64-like functions (little-endian words) that call a few common ones."""
    rng = np.random.default_rng(seed)
    words, calls, starts = [], [], []
    for _ in range(functions):
        starts.append(len(words))
        words += [0xA9BE7BFD, 0x910003FD]  # stp x29, x30, [sp, #-32]!; mov x29, sp
        for _ in range(4 + int(rng.integers(12))):
            if rng.random() < 0.3:
                calls.append((len(words), int(rng.integers(5))))
                words.append(0)
            elif rng.random() < 0.2:  # adrp x0, <one of three pages>: ldr x0, [x0, #8]
                page = int(rng.integers(3)) * 5 + 100
                calls.append((len(words), -page))
                words += [0, 0xF9400400]
            else:
                words.append(int(rng.choice([0xF9400BE0, 0xAA1303E0, 0x52800020, 0xB9401A61])))
        words += [0xA8C27BFD, 0xD65F03C0]  # ldp x29, x30, [sp], #32; ret
    for at, callee in calls:
        if callee >= 0:
            words[at] = exe.BL_OP | ((starts[callee] - at) & 0x3FFFFFF)
        else:  # the page's displacement from this word's page (4 KB = 1024 words)
            words[at] = exe.adrp_word(exe.ADRP_OP, -callee - (at >> 10))
    return b"".join(w.to_bytes(4, "little") for w in words)


def test_little_endian_words_are_found_only_with_exe_le():
    data = TEXT + arm64_code()
    S = fed(data, LE).S
    assert S[exe.S_EXE_ISA] == exe.ISA_AARCH64 and S[exe.S_EXE_SEL] >= 0
    assert fed(data, CALLS).S[exe.S_EXE_SEEN] == -1  # SPARC's words alone: not these
    assert payload(TEXT, LE) == payload(TEXT, CALLS)
    S = fed(code(), LE).S  # SPARC code is still SPARC's
    assert S[exe.S_EXE_ISA] == exe.ISA_BE and S[exe.S_EXE_SEL] >= 0


def test_near_bl_takes_its_target_and_decodes():
    for d in (0, 1, -1, (1 << 22) - 1, -(1 << 22)):
        w = exe.BL_OP | (d & 0x3FFFFFF)
        assert exe.is_near_bl(w)
        for at in (0, 8, 1 << 20):
            target = exe.bl_word((at >> 2) + (w & exe.CALL_FIELD))
            assert exe.is_near_bl(target)
            assert exe.bl_word((target & exe.CALL_FIELD) - (at >> 2)) == w
    assert not exe.is_near_bl(exe.BL_OP | (1 << 22))  # far
    for w in (0x90000000, 0xB0000001, 0xF0FFFFE2, 0x90800010):  # adrp, any page and register
        assert exe.is_adrp(w) and not exe.is_near_bl(w)
        for page in (0, 1, 4095, 1 << 30):
            assert exe.adrp_word(exe.adrp_word(w, page), -page) == w
    data = TEXT + arm64_code()
    assert len(payload(data, LE)) < 0.9 * len(payload(data, replace(LE, exe_le=False)))
    assert len(payload(data, LE)) < len(payload(data, replace(LE, exe_calls=False)))
    assert api.decompress(api.compress(data, Recipe(mix=LE))) == data


def power_code(functions: int = 200, straddle: bool = False):
    """POWER LE functions (words, where the calls and the functions are): each with its
    TOC pair, a bl to one of five, stw/stwu words that look like AArch64's bl and adrp.
    With `straddle`, a nop before a function puts its TOC pair across each block boundary."""
    rng = np.random.default_rng(2)
    words, calls, starts = [], [], []
    toc = 0x123456
    per_block = codec.ENCODE_BLOCK // 4
    for _ in range(functions):
        if straddle and len(words) % per_block > per_block - 16:
            words += [0x60000000] * (per_block - 1 - len(words) % per_block)  # nops
        starts.append(len(words))
        v = (toc - 4 * len(words)) & 0xFFFFFFFF  # addis r2, r12, ha; addi r2, r2, lo
        words += [exe.TOC_ADDIS | (((v + 0x8000) >> 16) & 0xFFFF), exe.TOC_ADDI | (v & 0xFFFF)]
        words += [0x7C0802A6, 0x94210000 | int(rng.integers(1 << 16))]  # mflr r0; stwu
        words += [int(rng.integers(1 << 32)) & 0x93FFFFFF for _ in range(6)]  # stw and others
        calls.append(len(words))
        words += [0, 0x60000000]  # bl <one of five>; nop
        words += [0x7C0803A6, 0x4E800020]  # mtlr r0; blr
    for at in calls:
        callee = starts[int(rng.integers(5))]
        words[at] = exe.POWER_BL | (((callee - at) & exe.POWER_FIELD) << 2)
    return b"".join(w.to_bytes(4, "little") for w in words), calls, starts


def test_power_words_keep_their_bits_but_bl_and_the_toc_pair():
    """POWER LE's words are found (their classes read from the top byte); AArch64's bl and
    adrp patterns are other instructions there (stw, stwu) and keep their bits, POWER's own
    bl takes its target, a function's TOC pair the TOC, and it decodes."""
    data, calls, starts = power_code()
    S = fed(data, LE).S
    assert S[exe.S_EXE_ISA] == exe.ISA_POWER_LE and S[exe.S_EXE_SEL] >= 0
    block = np.frombuffer(data, dtype=np.uint8).copy()
    predictor = codec.Predictor(Recipe(mix=LE))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    seen = block.tobytes()
    changed = {i for i in range(0, len(data), 4) if seen[i:i + 4] != data[i:i + 4]}
    bl = {4 * at for at in calls}
    entries = {4 * at for at in starts}
    assert changed <= bl | entries | {i + 4 for i in entries}
    assert len(changed & bl) > 0.8 * len(bl)
    assert len({seen[i:i + 4] for i in changed & bl}) <= 5  # one word per callee
    moved = [i for i in entries if seen[i:i + 8] != data[i:i + 8]]
    assert len(moved) > 0.8 * len(entries)
    assert len({seen[i:i + 8] for i in moved}) == 1  # every function: the one TOC
    w1, w2 = exe.toc_pair(exe.TOC_ADDIS | 0x1234, exe.TOC_ADDI | 0x9ABC, 4096)
    assert exe.is_toc_pair(w1, w2) and exe.toc_pair(w1, w2, -4096) == (
        exe.TOC_ADDIS | 0x1234, exe.TOC_ADDI | 0x9ABC)
    for w in (exe.POWER_BL, 0x4BFFFFFD, 0x48123455):
        assert exe.is_power_bl(w)
        for words_ in (0, 1, 1 << 23, (1 << 30) + 3):
            assert exe.power_bl_word(exe.power_bl_word(w, words_), -words_) == w
    assert not exe.is_power_bl(0x48000000) and not exe.is_power_bl(0x4E800020)
    assert api.decompress(api.compress(data, Recipe(mix=LE))) == data


def test_toc_pairs_across_kernel_blocks_are_left_alike_by_every_side():
    data, _, starts = power_code(300, straddle=True)
    assert sum((4 * at) % codec.ENCODE_BLOCK == codec.ENCODE_BLOCK - 4 for at in starts) >= 3
    assert coded_as_learned(data, Recipe(mix=LE))
