"""The sparse model (cm/sparse.py): live on binary data no other model reads, silent on text
and where the x86 or word models speak (with sparse_le, live over little-endian words; with
rec_follow, records' follow contexts), and it codes bytecode-like data better."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from mixing_probe import fed, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import context, exe, sparse, x86
from rwkvzip.cm.history import hash32
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.recipe import Recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_golden import code  # noqa: E402  (SPARC words)
from test_exe import arm64_code  # noqa: E402  (AArch64 words)
from test_x86 import calling_code  # noqa: E402  (x86-64 code)

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 20, 21, 22, 24), table_bits=11, match_bits=14,
                  network=False, selectors=2, exe=True, x86=True)
SPARSE = replace(SMALL, sparse=True)
TEXT = b"Bytecode has fields of two bytes; text has words. " * 40


def bytecode(n: int = 4000, seed: int = 9) -> bytes:
    """Instructions of four bytes: an opcode, an operand, a byte that depends on the opcode,
    an operand: the byte two back tells what the last one cannot."""
    rng = np.random.default_rng(seed)
    ops = rng.integers(0, 16, n)
    fields = [ops, rng.integers(0, 256, n), (ops * 13 + 1) % 256, rng.integers(0, 8, n)]
    return np.stack(fields, axis=1).astype(np.uint8).tobytes()


def contexts(S) -> list[int]:
    return list(S[context.S_CTX:context.S_CTX + S[context.S_K]])


def test_live_on_binary_data_and_not_on_text():
    S = fed(TEXT + bytecode(), SPARSE).S
    assert S[sparse.S_SP_LIVE] == 1
    changed = [a != b for a, b in zip(contexts(S), contexts(fed(TEXT + bytecode(), SMALL).S),
                                      strict=True)]
    assert changed == [False] * 3 + [True, False] + [True] * 4
    assert payload(TEXT, SPARSE) == payload(TEXT, SMALL)


def test_silent_where_the_instruction_and_word_models_speak():
    for data, model_sel in ((code(), exe.S_EXE_SEL), (calling_code(), x86.S_X86_SEL)):
        S = fed(data, SPARSE).S
        assert S[model_sel] >= 0 and S[sparse.S_SP_LIVE] == 0


def test_sparse_le_is_live_over_little_endian_words_only():
    """With sparse_le the model is live over AArch64 words (the executable model's word
    contexts give way to it, its selector stays), not over SPARC's big-endian ones."""
    words = replace(SPARSE, exe_calls=True, exe_le=True)
    le = replace(words, sparse_le=True)
    data = TEXT + arm64_code()
    S = fed(data, le).S
    assert S[exe.S_EXE_SEL] >= 0 and S[sparse.S_SP_LIVE] == 1
    assert fed(data, words).S[sparse.S_SP_LIVE] == 0
    S = fed(code(), le).S
    assert S[exe.S_EXE_SEL] >= 0 and S[sparse.S_SP_LIVE] == 0
    assert payload(code(), le) == payload(code(), words)
    assert payload(data, le) != payload(data, words)
    assert api.decompress(api.compress(data, Recipe(mix=le))) == data
    with pytest.raises(ValueError, match="sparse_le"):
        replace(SPARSE, sparse_le=True).validate()


def test_sparse_nibbles_give_little_endian_words_a_slot_of_their_top_nibbles():
    """With sparse_nibbles, while the model is live over little-endian words, kind 19's slot
    holds the place in the word and the top nibbles of a(1) ... a(4); nothing else moves,
    and big-endian words and text code as without it."""
    words = replace(SPARSE, orders=(1, 2, 3, 0, 13, 19, 20, 21, 22, 24), exe_calls=True,
                    exe_le=True, sparse_le=True)
    nibbles = replace(words, sparse_nibbles=True)
    data = TEXT + arm64_code()
    S = fed(data, nibbles).S
    assert S[sparse.S_SP_LIVE] == 1 and S[exe.S_EXE_SEL] >= 0
    assert slots_changed(data, nibbles, words) == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    a = [(S[context.S_HIST] >> (8 * i)) & 0xFF for i in range(4)]
    j = (S[context.S_POS] - S[exe.S_EXE_PHASE]) & 3
    x = (13 << 24) | (j << 16) | sparse.nibbles(*a)
    assert S[context.S_CTX + 5] == hash32(x * 0x2545F491 + 0x6A09E667)
    assert sparse.nibbles(0x12, 0x34, 0x56, 0x78) == 0x7531
    assert payload(code(), nibbles) == payload(code(), words)  # SPARC's big-endian words
    assert payload(TEXT, nibbles) == payload(TEXT, words)
    assert api.decompress(api.compress(data, Recipe(mix=nibbles))) == data
    with pytest.raises(ValueError, match="sparse_nibbles"):
        replace(SPARSE, sparse_nibbles=True).validate()


def test_sparse_binary_is_live_over_binary_tables_with_few_control_bytes_not_strings():
    """With sparse_binary the model is live on binary data (a control byte in the last
    exe.BINARY_SPAN) whose recent bytes are less than 3/4 printable, though one byte in six
    is not a control byte: a table of 16-bit code points 0x29xx; not in a string table."""
    binary = replace(SPARSE, sparse_binary=True)
    header = bytes(range(16))  # control bytes: the data is binary from here on
    table = header + b"".join((0x2921 + 2 * k).to_bytes(2, "little") for k in range(100))
    S = fed(table, binary).S
    assert S[exe.S_EXE_CONTROL] < exe.LIVE_AT and S[sparse.S_SP_LIVE] == 1
    assert fed(table, SPARSE).S[sparse.S_SP_LIVE] == 0
    strings = header + b".rodata\0.got\0.dynamic\0.text\0.bss\0" * 20
    S = fed(strings, binary).S
    assert S[sparse.S_SP_PRINTABLE] >= sparse.PRINTABLE_MAX and S[context.S_BINARY] == 1
    live = sparse.is_live(S)
    S[sparse.S_SP_BINARY] = 0
    assert sparse.is_live(S) == live  # strings: as without the field
    assert payload(TEXT, binary) == payload(TEXT, SPARSE)
    assert payload(table, binary) != payload(table, SPARSE)
    assert api.decompress(api.compress(table, Recipe(mix=binary))) == table
    with pytest.raises(ValueError, match="sparse_binary"):
        replace(SMALL, sparse_binary=True).validate()


def test_bytecode_codes_smaller_and_decodes():
    data = TEXT + bytecode()
    assert len(payload(data, SPARSE)) < 0.97 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=SPARSE))) == data


def history(numbers: list[int], width: int, tail: bytes = b"") -> tuple[np.ndarray, int]:
    """A history buffer holding these little-endian numbers and then `tail`; its length."""
    data = b"".join(v.to_bytes(width, "little") for v in numbers) + tail
    HB = np.zeros(1 << 12, dtype=np.uint8)
    HB[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    return HB, len(data)


def predicted(context_value: int) -> tuple[int, int, int, int]:
    """step_context's parts: the byte's place, kept, whether the step is 0, the byte."""
    return ((context_value >> 10) & 3, (context_value >> 9) & 1, (context_value >> 8) & 1,
            context_value & 0xFF)


def test_the_step_context_continues_the_last_step_with_its_carries():
    mask = (1 << 12) - 1
    HB, n = history([0x01F0, 0x01F8], 4)  # step 8: the next is 0x0200
    assert predicted(sparse.step_context(HB, n, mask, 4)) == (0, 1, 0, 0x00)
    HB, n = history([0x01F0, 0x01F8], 4, b"\x00")  # the low byte kept to it: the carry
    assert predicted(sparse.step_context(HB, n, mask, 4)) == (1, 1, 0, 0x02)
    HB, n = history([0x01F0, 0x01F8], 4, b"\xfe")  # 6 short of the step: no carry
    assert predicted(sparse.step_context(HB, n, mask, 4)) == (1, 0, 0, 0x01)
    HB, n = history([0x1234, 0x1234], 2, b"\x34")  # step 0: the same number again
    assert predicted(sparse.step_context(HB, n, mask, 2)) == (1, 1, 1, 0x12)
    HB, n = history([0xFFFF, 0x0001], 2)  # steps wrap around the width
    assert predicted(sparse.step_context(HB, n, mask, 2)) == (0, 1, 0, 0x03)
    assert sparse.step_context(*history([7], 4), mask, 4) == -1  # not two numbers yet


def test_rising_offsets_code_smaller():
    """A table of 32-bit offsets rising by string lengths (as an executable's name tables)."""
    rng = np.random.default_rng(4)
    offsets = np.cumsum(rng.integers(3, 12, 3000)).astype("<u4").tobytes()
    data = TEXT + offsets
    assert len(payload(data, SPARSE)) < 0.9 * len(payload(data, SMALL))


def test_silent_inside_a_string_of_binary_data():
    """Three printable bytes in a row are a string: its slots keep their word contexts."""
    assert fed(bytecode() + b"\x00\x01abc", SPARSE).S[sparse.S_SP_LIVE] == 0
    assert fed(bytecode() + b"\x00\x01ab\x02", SPARSE).S[sparse.S_SP_LIVE] == 1


def test_each_byte_keeps_the_two_that_ended_its_last_runs():
    """01 05 05 07 01 05 09: runs of 05 ended by 07, then 09; of 01 by 05 twice."""
    S = fed(b"\x01\x05\x05\x07\x01\x05\x09", SPARSE).S
    assert S[sparse.S_SP_ENDS + 5] == 0x0709
    assert S[sparse.S_SP_ENDS + 1] == 0x0505
    assert S[sparse.S_SP_ENDS + 7] == 0x01
    assert S[sparse.S_SP_ENDS + 9] == 0  # no run of 09 has ended


FOLLOW = replace(SPARSE, orders=(1, 2, 3, 0, 13, 16, 20, 21, 22, 24), rec_follow=True)


def paired_records(blocks: int = 30, seed: int = 8) -> bytes:
    """A table of 6-byte records in pairs that share a value (a Unicode table's cases): each
    block goes through the same values under its own prefix, so what followed a value
    beside the byte above it says what comes next."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0x20, 0x60, 40)
    out = bytearray()
    for _ in range(blocks):
        p = int(rng.integers(0x10, 0xF0))
        for v in values:
            out += bytes([p, 0x94, 0x07, int(v), 0, 6, p - 1, 0x94, 0x07, int(v), 0, 6])
    return bytes(out)


def test_rec_follow_keeps_the_two_bytes_that_followed_each_pair():
    """The follow table holds, for a pair (a(1), a(r)), the last two bytes after it (the
    later one low); the context is the column and that entry of the pair before the next
    byte; nothing while no record length is known."""
    arrays = MixArrays(FOLLOW, 1)
    CT, S, HB = arrays.CT, arrays.S, arrays.HB
    hmask = (1 << S[context.S_HBITS]) - 1
    base = S[sparse.S_SP_FOLLOW]
    assert base > 0 and MixArrays(replace(FOLLOW, rec_follow=False), 1).S[sparse.S_SP_FOLLOW] == 0
    rows = bytes([7, 1, 2, 3, 4, 5]) * 4 + bytes([7, 1, 2, 9])  # the last row's 9 is new
    HB[:len(rows)] = np.frombuffer(rows, np.uint8)
    S[context.S_REC] = 6
    for n in range(8, len(rows) + 1):  # each byte just coded, rows[n - 1], teaches its pair
        sparse.follow_update(CT, S, HB, n, hmask, rows[n - 1], rows[n - 2])
    assert CT[base + (1 << 8 | 2)] == (2 << 8) | 2  # a 2 after a 1 and below a 2, four times
    assert CT[base + (2 << 8 | 3)] == (3 << 8) | 9  # after a 2 and below a 3: 3s, then 9
    n = len(rows)
    assert sparse.follow_context(CT, S, HB, n, hmask, 9) == (n % 6) << 16 | CT[base + (9 << 8 | 4)]
    S[context.S_REC] = 0
    assert sparse.follow_context(CT, S, HB, n, hmask, 9) == -1


def test_rec_follow_codes_paired_records_smaller_and_text_the_same():
    data = paired_records()
    plain = replace(FOLLOW, rec_follow=False)
    assert len(payload(data, FOLLOW)) < 0.9 * len(payload(data, plain))
    assert payload(TEXT, FOLLOW) == payload(TEXT, plain)
    assert api.decompress(api.compress(TEXT + data, Recipe(mix=FOLLOW))) == TEXT + data
    with pytest.raises(ValueError, match="rec_follow"):
        replace(SMALL, rec_follow=True).validate()
