"""The z/Architecture model: contexts for s390x machine code, and its relative operands'
transform.

s390x instructions are 2, 4 or 6 bytes long, big-endian, and the first byte's top two bits
give the length (00: 2; 01, 10: 4; 11: 6). The model follows them (`read_byte`) and, while
the data is s390x code, gives the slots of the word, text and spreadsheet kinds (words,
lines and records mean nothing in code) contexts of the instruction: its place and bytes so
far, the opcodes of the instructions before (the first byte with the extension the format
puts in the second or last byte), and the same place of the last instruction that began
with the same byte; the second mixer's weight set and the second APM's row follow the place
and the opcode. It runs in recipes with the mix field `s390x` (needs `exe`; it gives way to
exe.py's words and the x86 and RISC-V models).

Evidence comes from the stream: a function's epilogue, lmg ... ,%r15 (whose last two bytes
are 00 04) then br %r14 (07 FE), twice within SIGNATURE_GAP bytes at one parity; on the
tuning slices four epilogues in five have that pair. Text cannot produce it (07 and 00 are
control bytes); the instruction stream is put back in step at each piece of evidence. It
stays live SEEN_SPAN bytes after the last evidence while no model that knows the data's
structure speaks for it. While not live it changes nothing.

While live, the relative-long operands that name a function or a global (brasl: calls;
larl: addresses; the C4 and C6 families: loads, stores and compares of a global) are coded
with their target in place of their halfword offset (the idea of xz's BCJ filters, applied
inside the model; brcl, a jump inside its function, keeps its offset, as x86's jcc does):
uses of one function or global look alike wherever they are. The transform is a bijection
of the 32-bit field for each place, so the decoder turns it back once the instruction's
bytes are in. Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import exe, follow, riscv, x86
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# fields of context.STATE: on (mix field s390x), the selector for the next byte (-1: not
# live), where the last evidence was (-1: none), the current run of epilogues: its parity,
# where the last one ended, how many; where the current instruction starts and its length,
# the opcodes of the last four instructions (OPCODE_BITS each), where the last instruction
# with this first byte started (-1: none), where the operand the transform marked starts
# (-1: none); where the last instruction with each first byte started
(S_Z_ON, S_Z_SEL, S_Z_SEEN, S_Z_RUN_PARITY, S_Z_RUN_END, S_Z_RUN, S_Z_START, S_Z_LEN,
 S_Z_OPS, S_Z_SAME, S_Z_MARK_AT) = cx.STATE.offsets(*(
    f"s390x.{name}" for name in ("on", "sel", "seen", "run_parity", "run_end", "run", "start",
                                 "len", "ops", "same", "mark_at")))
S_Z_LAST = cx.STATE.offset("s390x.last")
assert cx.STATE.length("s390x.last") == 256

SIGNATURE_GAP = 4096  # two epilogues at one parity at most this far apart are evidence
SEEN_SPAN = 65536  # the model stays live this long after the last evidence
EPILOGUE = 0x000407FE  # lmg's last two bytes, br %r14
OPCODE_BITS = 16
OPCODE_MASK = (1 << OPCODE_BITS) - 1


def start_state(S: np.ndarray, on: bool) -> None:
    """The model's fields of a new stream's state: not live, no evidence, an instruction
    starts at the first byte."""
    S[S_Z_ON] = int(on)
    S[S_Z_SEL] = S[S_Z_SEEN] = S[S_Z_SAME] = S[S_Z_MARK_AT] = -1
    S[S_Z_LAST:S_Z_LAST + 256] = -1


@jit(inline="always")
def length_of(first):
    """An instruction's length from its first byte's top two bits."""
    top = first >> 6
    return 2 if top == 0 else (6 if top == 3 else 4)


@jit
def opcode(first, second, last):
    """An instruction's opcode as one number: the first byte, with the extension its format
    puts in the second byte's low half (RI, RIL), the whole second byte (RRE, S) or the last
    byte (RXY, RSY, RIE, VRX ...)."""
    if first == 0xA5 or first == 0xA7 or (first >= 0xC0 and first <= 0xCC):
        return (first << 8) | (second & 0x0F)
    if first == 0xB2 or first == 0xB3 or first == 0xB9 or first == 0x01:
        return (first << 8) | second
    if first == 0xE3 or first == 0xE6 or first == 0xE7 or first == 0xEB or first == 0xEC or (
            first == 0xED):
        return (first << 8) | last
    return first << 8


@jit
def read_byte(S, hist, n):
    """The instruction follower takes the byte at n - 1: whether an instruction is complete,
    its opcode, and the evidence."""
    at = S[S_Z_START]
    if n - at == 1:
        first = hist & 0xFF
        S[S_Z_LEN] = length_of(first)
        S[S_Z_SAME] = S[S_Z_LAST + first]
        S[S_Z_LAST + first] = at
    length = S[S_Z_LEN]
    if n - at == length:
        first = (hist >> (8 * (length - 1))) & 0xFF
        second = (hist >> (8 * (length - 2))) & 0xFF
        S[S_Z_OPS] = (((S[S_Z_OPS] << OPCODE_BITS) | opcode(first, second, hist & 0xFF))
                      & ((1 << (4 * OPCODE_BITS)) - 1))
        S[S_Z_START] = n
        S[S_Z_LEN] = 0
    if hist & 0xFFFFFFFF == EPILOGUE:
        follow.follow_run(S, S_Z_RUN, S_Z_RUN_PARITY, S_Z_RUN_END, S_Z_SEEN, S_Z_START, S_Z_LEN,
                          n, SIGNATURE_GAP)


@jit
def is_live(S):
    if S[S_Z_SEEN] < 0 or S[cx.S_POS] - S[S_Z_SEEN] > SEEN_SPAN:
        return False
    return (S[exe.S_EXE_SEL] < 0 and S[x86.S_X86_SEL] < 0 and S[riscv.S_RV_SEL] < 0
            and not exe.structure_known(S))


@jit
def next_contexts(S, HB):
    """After riscv.next_contexts: follow the instructions and, while live, set the
    instruction contexts for the next byte in the text and spreadsheet kinds' slots, and the
    selector."""
    if S[S_Z_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]
    read_byte(S, hist, n)
    if not is_live(S):
        S[S_Z_SEL] = -1
        return
    j = min(n - S[S_Z_START], 5)
    part = (hist & ((1 << (8 * min(j, 3))) - 1)) | (1 << (8 * min(j, 3)))  # bytes so far
    place = j | (S[S_Z_LEN] << 3)
    ops = S[S_Z_OPS]
    op1 = ops & OPCODE_MASK
    hmask = (1 << S[cx.S_HBITS]) - 1
    same = follow.same_place(S, HB, hmask, n, S_Z_SAME, S_Z_START)
    first = (hist >> (8 * (j - 1))) & 0xFF if j > 0 else 0
    key = op1 if j == 0 else (first << 8) | (hist & 0x0F if j == 2 else 0x10 + j)
    S[S_Z_SEL] = (j << 5) | (hash32(key) >> 27)
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if not follow.takes_slot(k):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0x3C6EF372), place), part)
        if k == cx.KIND_WORD_BIGRAM:  # the opcode before
            h = cx.mixh(h, op1)
        elif k == cx.KIND_WORD_TRIGRAM:  # the two opcodes before
            h = cx.mixh(h, ops & ((1 << (2 * OPCODE_BITS)) - 1))
        elif k == cx.KIND_WORD_SKIP:  # the first byte, and the last two bytes
            h = cx.mixh(h, (first << 16) | (hist & 0xFFFF))
        elif k == cx.KIND_COLUMN:  # the same place of the last one with this first byte
            h = cx.mixh(h, same)
        elif k == cx.KIND_SHEET_FIELD:  # the last four opcodes
            h = cx.mixh(h, ops)
        elif k == cx.KIND_SHEET_COL:  # the first byte and the last one
            h = cx.mixh(h, (first << 8) | (hist & 0xFF))
        elif k == cx.KIND_SHEET_ABOVE:  # the same place, and the opcode before
            h = cx.mixh(cx.mixh(h, same), op1)
        elif k == cx.WORD_ORDER:  # the first byte and the last three
            h = cx.mixh(h, (first << 24) | (hist & 0xFFFFFF))
        else:  # the last four bytes
            h = cx.mixh(h, hist & 0xFFFFFFFF)
        S[cx.S_CTX + m] = h


# --- The relative operands' transform: bytes 2-5 of brasl, larl and the C4/C6 families.
@jit(inline="always")
def is_relative(first, second):
    """Whether the 6-byte instruction that begins first, second has a 32-bit halfword offset
    to a function or a global: brasl (C0 x5), larl (C0 x0), C4 and C6 (RIL-b loads, stores,
    compares)."""
    if first == 0xC0:
        x = second & 0x0F
        return x == 0 or x == 5
    return first == 0xC4 or first == 0xC6


@jit(inline="always")
def to_target(v, at):
    """The offset v (in halfwords) of the instruction at `at` as its target, mod 2**32."""
    return (v + (at >> 1)) & 0xFFFFFFFF


@jit(inline="always")
def from_target(v, at):
    return (v - (at >> 1)) & 0xFFFFFFFF


@jit
def calls_before_byte(S, data, t, encoding):
    """Before byte t of the block is coded: at the third byte of a relative-long instruction
    that names a function or a global, while the model is live, with its four offset bytes in
    the block, mark it; the encoder puts the target in place of the offset."""
    if S[S_Z_ON] == 0 or S[S_Z_SEL] < 0 or t + 4 > data.shape[0]:
        return
    at = S[cx.S_POS]
    start = S[S_Z_START]
    hist = S[cx.S_HIST]
    if at != start + 2 or S[S_Z_LEN] != 6 or not is_relative((hist >> 8) & 0xFF, hist & 0xFF):
        return
    S[S_Z_MARK_AT] = at
    if encoding:
        exe.put_block_word(data, t, to_target(exe.block_word(data, t), start))


@jit
def calls_after_byte(S, data, t, decoding):
    """After byte t of the block: the marked offset's last byte is in; the decoder turns the
    target back into the offset."""
    at = S[S_Z_MARK_AT]
    if at < 0 or S[cx.S_POS] != at + 4:
        return
    S[S_Z_MARK_AT] = -1
    if decoding:
        exe.put_block_word(data, t - 3, from_target(exe.block_word(data, t - 3), at - 2))
