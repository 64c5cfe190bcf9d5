"""The Thumb-2 model: contexts for ARM Thumb-2 machine code (armhf), and its calls'
transform.

Thumb-2 mixes 16-bit instructions with 32-bit ones, both little-endian halfwords; the
first halfword's top five bits tell the length (11101, 11110, 11111: 32 bits). The model
follows them (`read_byte`) and, while the data is Thumb-2 code, gives the slots of the word,
text and spreadsheet kinds contexts of the instruction: its place and bytes so far, the
classes (top ten bits of the first halfword) of the instructions before, and the same place
of the last instruction of this one's class; the second mixer's weight set and the second
APM's row follow the place and the class. It runs in recipes with the mix field `thumb`
(needs `exe`; it gives way to exe.py's words and the x86, RISC-V and s390x models).

Evidence comes from the stream, as x86.py's does: a bl whose target lands where an earlier
one landed (a table of TARGET_BITS), twice within SEEN_SPAN bytes. Functions are called from
many places; text cannot produce a bl (its first halfword's high byte is F0-F7 and its
second's D0-DF or F0-FF, which UTF-8 never puts two bytes apart). Thumb-2 has no signature
word short enough to be safe: bx lr is "pG" in ASCII.

While live, bl (and blx) is coded with its target in place of its offset (xz's ARM-Thumb
BCJ filter, applied inside the model): calls of one function look alike wherever they are.
A bl's first halfword is only known once its two bytes are in, so every instruction start
is marked (both sides can), the encoder transforms the four bytes when they are a bl, the
mark is dropped after the second byte unless the first halfword begins a bl, and the decoder
turns a bl back after the fourth byte. The transform is a bijection of the 24-bit offset
(S, I1, I2, imm10, imm11) for each place, and keeps every bit that says "bl". Everything is
integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import exe, follow, riscv, s390x, x86
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# fields of context.STATE: on (mix field thumb), the selector for the next byte (-1: not
# live), where the last evidence was (-1: none), how many in a row; where the current
# instruction starts and its length (0 until its first halfword is in), its class, the
# classes of the last four (CLASS_BITS each), where the last instruction of this class
# started (-1: none), where the instruction the transform marked starts (-1: none); where the
# last instruction of each class started, the bl targets seen (a hash table of targets + 1)
(S_T_ON, S_T_SEL, S_T_SEEN, S_T_HITS, S_T_START, S_T_LEN, S_T_CLASS, S_T_CLASSES, S_T_SAME,
 S_T_MARK_AT) = cx.STATE.offsets(*(
    f"thumb.{name}" for name in ("on", "sel", "seen", "hits", "start", "len", "class",
                                 "classes", "same", "mark_at")))
S_T_LAST = cx.STATE.offset("thumb.last")
S_T_TARGETS = cx.STATE.offset("thumb.targets")
CLASS_BITS = 11  # the first halfword's top ten bits, and 1024 for 32-bit instructions
N_CLASSES = 1 << CLASS_BITS
TARGET_BITS = 12
assert cx.STATE.length("thumb.last") == N_CLASSES
assert cx.STATE.length("thumb.targets") == 1 << TARGET_BITS

SEEN_SPAN = 65536  # live this long after the last evidence ...
LIVE_HITS = 2  # ... once this many bls in a row landed on a known target
OFFSET_MASK = (1 << 24) - 1


def start_state(S: np.ndarray, on: bool) -> None:
    """The model's fields of a new stream's state: not live, no evidence, an instruction
    starts at the first byte."""
    S[S_T_ON] = int(on)
    S[S_T_SEL] = S[S_T_SEEN] = S[S_T_SAME] = S[S_T_MARK_AT] = -1
    S[S_T_LAST:S_T_LAST + N_CLASSES] = -1


@jit(inline="always")
def is_wide(h1):
    """Whether the instruction whose first halfword is h1 is 32 bits long."""
    top = h1 >> 11
    return top == 0x1D or top == 0x1E or top == 0x1F


@jit(inline="always")
def begins_bl(h1):
    return (h1 & 0xF800) == 0xF000


@jit(inline="always")
def is_bl(h1, h2):
    """bl and blx: 11110 S imm10, then 11 J1 x J2 imm11 with bit 14 set (bit 12 clear: blx)."""
    return begins_bl(h1) and (h2 & 0xC000) == 0xC000


@jit(inline="always")
def bl_offset(h1, h2):
    """A bl's 24-bit offset in halfwords, S:I1:I2:imm10:imm11 with Ik = NOT(Jk XOR S)."""
    s = (h1 >> 10) & 1
    i1 = 1 - (((h2 >> 13) & 1) ^ s)
    i2 = 1 - (((h2 >> 11) & 1) ^ s)
    return (s << 23) | (i1 << 22) | (i2 << 21) | ((h1 & 0x3FF) << 11) | (h2 & 0x7FF)


@jit(inline="always")
def with_offset(h1, h2, v):
    """The halfwords h1, h2 of a bl with the 24-bit offset v in place of theirs."""
    s = (v >> 23) & 1
    j1 = 1 - (((v >> 22) & 1) ^ s)
    j2 = 1 - (((v >> 21) & 1) ^ s)
    h1 = (h1 & 0xF800) | (s << 10) | ((v >> 11) & 0x3FF)
    h2 = (h2 & 0xD000) | (j1 << 13) | (j2 << 11) | (v & 0x7FF)
    return h1, h2


@jit
def read_byte(S, hist, n):
    """The instruction follower takes the byte at n - 1: the instruction's length once its
    first halfword is in, its end, and the evidence."""
    at = S[S_T_START]
    if n - at == 2:
        h1 = ((hist & 0xFF) << 8) | ((hist >> 8) & 0xFF)
        S[S_T_LEN] = 4 if is_wide(h1) else 2
        cls = (h1 >> 6) | (1024 if S[S_T_LEN] == 4 else 0)
        S[S_T_CLASS] = cls
        S[S_T_SAME] = S[S_T_LAST + cls]
        S[S_T_LAST + cls] = at
    if S[S_T_LEN] > 0 and n - at == S[S_T_LEN]:
        if S[S_T_LEN] == 4:
            follow_evidence(S, hist, n, at)
        S[S_T_CLASSES] = ((S[S_T_CLASSES] << CLASS_BITS) | S[S_T_CLASS]) & (
            (1 << (4 * CLASS_BITS)) - 1)
        S[S_T_START] = n
        S[S_T_LEN] = 0


@jit
def follow_evidence(S, hist, n, at):
    """A 32-bit instruction ended at n: if it is a bl, whether its target (the offset from
    its start, or the transformed target itself) landed on a known one."""
    h1 = (((hist >> 16) & 0xFF) << 8) | ((hist >> 24) & 0xFF)
    h2 = ((hist & 0xFF) << 8) | ((hist >> 8) & 0xFF)
    if not is_bl(h1, h2):
        return
    v = bl_offset(h1, h2)
    target = v if S[S_T_MARK_AT] == at else (v + (at >> 1)) & OFFSET_MASK
    follow.target_hit(S, S_T_TARGETS, TARGET_BITS, target, n, S_T_SEEN, S_T_HITS, SEEN_SPAN,
                      LIVE_HITS)


@jit
def is_live(S):
    if S[S_T_HITS] < LIVE_HITS or S[S_T_SEEN] < 0 or S[cx.S_POS] - S[S_T_SEEN] > SEEN_SPAN:
        return False
    return (S[exe.S_EXE_SEL] < 0 and S[x86.S_X86_SEL] < 0 and S[riscv.S_RV_SEL] < 0
            and S[s390x.S_Z_SEL] < 0 and not exe.structure_known(S))


@jit
def next_contexts(S, HB):
    """After s390x.next_contexts: follow the instructions and, while live, set the
    instruction contexts for the next byte in the text and spreadsheet kinds' slots, and the
    selector."""
    if S[S_T_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]
    read_byte(S, hist, n)
    if not is_live(S):
        S[S_T_SEL] = -1
        return
    j = n - S[S_T_START]
    part = (hist & ((1 << (8 * j)) - 1)) | (1 << (8 * j))  # the instruction's bytes so far
    place = j | (S[S_T_LEN] << 2)
    classes = S[S_T_CLASSES]
    c1 = classes & (N_CLASSES - 1)
    cls = S[S_T_CLASS] if j >= 2 else N_CLASSES
    hmask = (1 << S[cx.S_HBITS]) - 1
    same = follow.same_place(S, HB, hmask, n, S_T_SAME, S_T_START) if j >= 2 else 256
    S[S_T_SEL] = (j << 6) | (hash32(c1 if j < 2 else cls + N_CLASSES) >> 26)
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if not follow.takes_slot(k):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0x510E527F), place), part)
        if k == cx.KIND_WORD_BIGRAM:  # the class before
            h = cx.mixh(h, c1)
        elif k == cx.KIND_WORD_TRIGRAM:  # the two classes before
            h = cx.mixh(h, classes & ((1 << (2 * CLASS_BITS)) - 1))
        elif k == cx.KIND_WORD_SKIP:  # this class and the one before
            h = cx.mixh(h, cls | (c1 << CLASS_BITS))
        elif k == cx.KIND_COLUMN:  # the same place of the last one of this class
            h = cx.mixh(h, same)
        elif k == cx.KIND_SHEET_FIELD:  # the last four classes
            h = cx.mixh(h, classes)
        elif k == cx.KIND_SHEET_COL:  # the last two bytes
            h = cx.mixh(h, hist & 0xFFFF)
        elif k == cx.KIND_SHEET_ABOVE:  # the same place, and the class before
            h = cx.mixh(cx.mixh(h, same), c1)
        elif k == cx.WORD_ORDER:  # the last three bytes
            h = cx.mixh(h, hist & 0xFFFFFF)
        else:  # the last four bytes
            h = cx.mixh(h, hist & 0xFFFFFFFF)
        S[cx.S_CTX + m] = h


# --- The calls' transform.
@jit
def calls_before_byte(S, data, t, encoding):
    """Before byte t of the block is coded: at an instruction's start while the model is
    live, with four bytes in the block, mark it; the encoder puts a bl's target in place of
    its offset. After its second byte a mark that does not begin a bl is dropped."""
    if S[S_T_ON] == 0:
        return
    at = S[cx.S_POS]
    mark = S[S_T_MARK_AT]
    if mark >= 0 and at == mark + 2:
        hist = S[cx.S_HIST]
        if begins_bl(((hist & 0xFF) << 8) | ((hist >> 8) & 0xFF)):
            return
        S[S_T_MARK_AT] = -1  # (and the next instruction may start here)
    if S[S_T_SEL] < 0 or t + 4 > data.shape[0] or at != S[S_T_START]:
        return
    S[S_T_MARK_AT] = at
    if encoding:
        h1 = np.int64(data[t]) | (np.int64(data[t + 1]) << 8)
        h2 = np.int64(data[t + 2]) | (np.int64(data[t + 3]) << 8)
        if is_bl(h1, h2):
            put_bl(data, t, h1, h2, (bl_offset(h1, h2) + (at >> 1)) & OFFSET_MASK)


@jit
def calls_after_byte(S, data, t, decoding):
    """After byte t of the block: the marked bl's last byte is in; the decoder turns its
    target back into the offset."""
    at = S[S_T_MARK_AT]
    if at < 0 or S[cx.S_POS] != at + 4:
        return
    S[S_T_MARK_AT] = -1
    if decoding:
        h1 = np.int64(data[t - 3]) | (np.int64(data[t - 2]) << 8)
        h2 = np.int64(data[t - 1]) | (np.int64(data[t]) << 8)
        if is_bl(h1, h2):
            put_bl(data, t - 3, h1, h2, (bl_offset(h1, h2) - (at >> 1)) & OFFSET_MASK)


@jit(inline="always")
def put_bl(data, t, h1, h2, v):
    h1, h2 = with_offset(h1, h2, v)
    data[t] = np.uint8(h1 & 0xFF)
    data[t + 1] = np.uint8(h1 >> 8)
    data[t + 2] = np.uint8(h2 & 0xFF)
    data[t + 3] = np.uint8(h2 >> 8)
