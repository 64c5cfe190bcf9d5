"""The RISC-V model: contexts for RISC-V machine code (RV64GC), and its jumps' transform.

RISC-V code with the C extension mixes 32-bit instructions with 16-bit compressed ones, so
its instructions are not aligned words (exe.py) but a stream of parcels whose length the
first byte tells: low two bits 11, four bytes; otherwise two. The model follows them
(`read_byte`) and, while the data is RISC-V code, gives the slots of the word, text and
spreadsheet kinds (words, lines and records mean nothing in code) contexts of the
instruction: its place and bytes so far, the classes (opcode and funct3) of the
instructions before, the register the last one wrote, and the same place of the last
instruction that began with the same byte; the second mixer's weight set and the second APM's
row follow the place and the class read so far. It runs in recipes with the mix field
`riscv` (needs `exe`; it gives way to exe.py's words and x86.py's instructions).

Evidence comes from the stream: `ret`, which every function ends with, twice within
SIGNATURE_GAP bytes at one parity: jalr x0, 0(ra), or c.jr ra (the halfword 8082) after an
instruction that closes a frame (`closes_frame`: on the tuning slices 80-90 % of c.rets
have one). Text cannot produce it (UTF-8 has the bytes 82 80 in U+3080, U+B080 and other
CJK and Hangul characters, but after a lead byte, never after those halfwords); the
instruction stream is put back in step at each piece of evidence (the next instruction
starts after the ret). It stays live SEEN_SPAN
bytes after the last evidence while no model that knows the data's structure speaks for it.
While not live it changes nothing: text and other data code exactly as without it.

While live, jal (pc-relative calls and jumps) is coded with its target in place of its
offset, and auipc with its target page (the idea of xz's RISC-V BCJ filter, applied inside
the model): calls of one function and uses of one global look alike wherever they are.
Each is a bijection of the 20-bit field for each place (the target is stored as a plain
20-bit number in bits 31-12; opcode and rd are kept), so the decoder turns it back once the
instruction's bytes are in. Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import exe, follow, x86
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# fields of context.STATE: on (mix field riscv), the selector for the next byte (-1: not
# live), where the last evidence was (-1: none), the current run of rets: its parity, where
# the last one ended, how many; where the current instruction starts and its length (0 until
# its first byte is in), the last instruction (its word), the classes of the last four
# (CLASS_BITS each), where the last instruction with this first byte started (-1: none),
# where the field the jumps' transform marked starts (-1: none) and its kind; where the last
# instruction with each first byte started
(S_RV_ON, S_RV_SEL, S_RV_SEEN, S_RV_RUN_PARITY, S_RV_RUN_END, S_RV_RUN, S_RV_START, S_RV_LEN,
 S_RV_PREV, S_RV_CLASSES, S_RV_SAME, S_RV_MARK_AT, S_RV_MARK_OP) = cx.STATE.offsets(*(
    f"rv.{name}" for name in ("on", "sel", "seen", "run_parity", "run_end", "run", "start",
                              "len", "prev", "classes", "same", "mark_at", "mark_op")))
S_RV_LAST = cx.STATE.offset("rv.last")
assert cx.STATE.length("rv.last") == 256

SIGNATURE_GAP = 4096  # two rets at one parity at most this far apart are evidence
SEEN_SPAN = 65536  # the model stays live this long after the last evidence
CLASS_BITS = 11  # an instruction's class: 32-bit: 1 << 10 | funct3 << 7 | opcode; 16-bit:
CLASS_MASK = (1 << CLASS_BITS) - 1  # funct3 << 2 | op
C_RET = 0x8082  # c.jr ra
RET = 0x00008067  # jalr x0, 0(ra)
OP_JAL, OP_AUIPC = 0x6F, 0x17
FIELD_MASK = (1 << 20) - 1  # jal's and auipc's 20-bit field (bits 31-12)


def start_state(S: np.ndarray, on: bool) -> None:
    """The model's fields of a new stream's state: not live, no evidence, an instruction
    starts at the first byte."""
    S[S_RV_ON] = int(on)
    S[S_RV_SEL] = S[S_RV_SEEN] = S[S_RV_SAME] = S[S_RV_MARK_AT] = -1
    S[S_RV_LAST:S_RV_LAST + 256] = -1


@jit(inline="always")
def instruction_class(w, length):
    """The opcode and funct3 of an instruction word (the 16 or 32 bits of it) as a number
    below 2 ** CLASS_BITS."""
    if length == 4:
        return 1024 | (((w >> 12) & 7) << 7) | (w & 0x7F)
    return (((w >> 13) & 7) << 2) | (w & 3)


@jit(inline="always")
def destination(w, length):
    """The register an instruction writes (bits 11-7; in most compressed formats too)."""
    return (w >> 7) & 31


@jit
def read_byte(S, hist, n):
    """The instruction follower takes the byte at n - 1: whether an instruction is complete,
    its class, and the evidence."""
    at = S[S_RV_START]
    if n - at == 1:
        S[S_RV_LEN] = 4 if hist & 3 == 3 else 2
        first = hist & 0xFF
        S[S_RV_SAME] = S[S_RV_LAST + first]
        S[S_RV_LAST + first] = at
    length = S[S_RV_LEN]
    if n - at == length:
        w = exe.swap32(hist & 0xFFFFFFFF) if length == 4 else (
            ((hist & 0xFF) << 8) | ((hist >> 8) & 0xFF))
        S[S_RV_PREV] = w | (length << 32)
        S[S_RV_CLASSES] = (((S[S_RV_CLASSES] << CLASS_BITS) | instruction_class(w, length))
                           & ((1 << (4 * CLASS_BITS)) - 1))
        S[S_RV_START] = n
        S[S_RV_LEN] = 0
    if hist & 0xFFFFFFFF == 0x67800000 or (
            hist & 0xFFFF == 0x8280 and closes_frame(((hist >> 24) & 0xFF)
                                                     | (hist & 0xFF0000) >> 8)):
        follow.follow_run(S, S_RV_RUN, S_RV_RUN_PARITY, S_RV_RUN_END, S_RV_SEEN, S_RV_START,
                          S_RV_LEN, n, SIGNATURE_GAP)  # ret, or c.ret after an epilogue


@jit(inline="always")
def closes_frame(h):
    """Whether the halfword h is what a function's epilogue puts before c.ret: c.addi16sp
    or c.addi sp (the frame freed), c.li or c.mv (the result set). Text cannot put it there:
    UTF-8's 82 80 follow a lead byte E0-EF (U+3080, U+B080 ... in CJK and Hangul) or a
    continuation byte after F0-F4, neither of which these are."""
    return ((h & 0xEF83) == 0x6101 or (h & 0xEF83) == 0x0101 or (h & 0xE003) == 0x4001
            or (h & 0xF003) == 0x8002)


@jit
def is_live(S):
    if S[S_RV_SEEN] < 0 or S[cx.S_POS] - S[S_RV_SEEN] > SEEN_SPAN:
        return False
    return S[exe.S_EXE_SEL] < 0 and S[x86.S_X86_SEL] < 0 and not exe.structure_known(S)


@jit
def next_contexts(S, HB):
    """After x86.next_contexts: follow the instructions and, while live, set the instruction
    contexts for the next byte in the text and spreadsheet kinds' slots, and the selector."""
    if S[S_RV_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]
    read_byte(S, hist, n)
    if not is_live(S):
        S[S_RV_SEL] = -1
        return
    j = n - S[S_RV_START]
    part = (hist & ((1 << (8 * j)) - 1)) | (1 << (8 * j))  # the instruction's bytes so far
    place = j | (S[S_RV_LEN] << 2)
    classes = S[S_RV_CLASSES]
    c1 = classes & CLASS_MASK
    prev = S[S_RV_PREV]
    rd = destination(prev & 0xFFFFFFFF, prev >> 32)
    hmask = (1 << S[cx.S_HBITS]) - 1
    same = follow.same_place(S, HB, hmask, n, S_RV_SAME, S_RV_START)
    if j == 0:  # the class before
        key = c1
    elif j == 1:  # the first byte
        key = 2048 | (hist & 0xFF)
    else:  # the opcode and funct3
        key = 4096 | ((hist >> (8 * (j - 1))) & 0x7F) | (((hist >> (8 * j - 12)) & 7) << 7)
    S[S_RV_SEL] = (j << 6) | (hash32(key) >> 26)
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if not follow.takes_slot(k):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0xBB67AE85), place), part)
        if k == cx.KIND_WORD_BIGRAM:  # the class before
            h = cx.mixh(h, c1)
        elif k == cx.KIND_WORD_TRIGRAM:  # the two classes before
            h = cx.mixh(h, classes & ((1 << (2 * CLASS_BITS)) - 1))
        elif k == cx.KIND_WORD_SKIP:  # the class before and the register it wrote
            h = cx.mixh(h, c1 | (rd << CLASS_BITS))
        elif k == cx.KIND_COLUMN:  # the same place of the last one with this first byte
            h = cx.mixh(h, same)
        elif k == cx.KIND_SHEET_FIELD:  # the last four classes
            h = cx.mixh(h, classes)
        elif k == cx.KIND_SHEET_COL:  # the whole instruction before
            h = cx.mixh(h, prev)
        elif k == cx.KIND_SHEET_ABOVE:  # the same place, and the class before
            h = cx.mixh(cx.mixh(h, same), c1)
        elif k == cx.WORD_ORDER:  # the last two bytes
            h = cx.mixh(h, hist & 0xFFFF)
        else:  # the last four bytes
            h = cx.mixh(h, hist & 0xFFFFFFFF)
        S[cx.S_CTX + m] = h


# --- The jumps' transform: bits 31-12 of jal and auipc.
@jit(inline="always")
def jal_offset(f):
    """jal's 20-bit field (imm[20|10:1|11|19:12]) as the offset in halfwords (mod 2**20)."""
    return (((f >> 19) & 1) << 19) | ((f & 0xFF) << 11) | (((f >> 8) & 1) << 10) | (
        (f >> 9) & 0x3FF)


@jit(inline="always")
def jal_field(offset):
    """jal_offset's inverse."""
    return (((offset >> 19) & 1) << 19) | ((offset & 0x3FF) << 9) | (((offset >> 10) & 1) << 8) | (
        (offset >> 11) & 0xFF)


@jit(inline="always")
def to_target(op, f, at):
    """The field f of the jal or auipc at `at` with the target in place of the offset: jal's
    target halfword, auipc's target page (each mod 2**20, a plain number)."""
    if op == OP_JAL:
        return (jal_offset(f) + (at >> 1)) & FIELD_MASK
    return (f + (at >> 12)) & FIELD_MASK


@jit(inline="always")
def from_target(op, v, at):
    """to_target's inverse."""
    if op == OP_JAL:
        return jal_field((v - (at >> 1)) & FIELD_MASK)
    return (v - (at >> 12)) & FIELD_MASK


@jit(inline="always")
def field_of(data, t):
    """Bits 31-12 of the instruction whose bytes 1-3 are data[t:t + 3]."""
    return ((np.int64(data[t]) >> 4) | (np.int64(data[t + 1]) << 4)
            | (np.int64(data[t + 2]) << 12))


@jit(inline="always")
def put_field(data, t, f):
    data[t] = np.uint8((data[t] & 0x0F) | ((f & 0xF) << 4))
    data[t + 1] = np.uint8((f >> 4) & 0xFF)
    data[t + 2] = np.uint8((f >> 12) & 0xFF)


@jit
def calls_before_byte(S, data, t, encoding):
    """Before byte t of the block is coded: at the second byte of a jal or auipc while the
    model is live, with the instruction's last three bytes in the block, mark it; the encoder
    puts the target in place of the offset (bytes 1-3; the first byte is not changed)."""
    if S[S_RV_ON] == 0 or S[S_RV_SEL] < 0 or t + 3 > data.shape[0]:
        return
    at = S[cx.S_POS]
    start = S[S_RV_START]
    op = S[cx.S_HIST] & 0x7F
    if at != start + 1 or S[S_RV_LEN] != 4 or (op != OP_JAL and op != OP_AUIPC):
        return
    S[S_RV_MARK_AT] = at
    S[S_RV_MARK_OP] = op
    if encoding:
        put_field(data, t, to_target(op, field_of(data, t), start))


@jit
def calls_after_byte(S, data, t, decoding):
    """After byte t of the block: the marked instruction's last byte is in; the decoder
    turns the target back into the offset."""
    at = S[S_RV_MARK_AT]
    if at < 0 or S[cx.S_POS] != at + 3:
        return
    S[S_RV_MARK_AT] = -1
    if decoding:
        put_field(data, t - 2, from_target(S[S_RV_MARK_OP], field_of(data, t - 2), at - 1))
