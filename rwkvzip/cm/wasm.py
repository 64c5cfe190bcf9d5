"""The WebAssembly model: contexts for the code section of WebAssembly modules.

A module's code section is a vector of function bodies: each a LEB128 size, its locals
(a count, then runs of a count and a value type) and its instructions, ending with `end`
(0x0B) at the size's last byte. An instruction is an opcode (0xFC, 0xFD and 0xFE: a prefix
and a LEB128 sub-opcode) and immediates: LEB128 indexes, offsets and constants, 4- or
8-byte floats, 16-byte vectors, lane bytes. The model parses them byte by byte
(`read_byte`), so it knows each byte's place: the opcode, which immediate and which of its
bytes. While it follows code it gives the slots of the word, text and spreadsheet kinds
(follow.takes_slot) contexts of that place: the opcode and the immediate's bytes so far,
with the opcodes before and the last immediate the same opcode had (the local a
local.get read, the function a call called). The second mixer's weight set and the second
APM's row follow the place. It runs in recipes with the mix field `wasm`.

It finds the code from the module's header (the magic and version, then the sections), or
in the middle of a stream from the bodies themselves: after an `end`, a LEB128 size
followed by a small count of local runs announces where the next body's own `end` will
be; an `end` exactly there confirms it, and from the third confirmation in a row (each
within SEEN_SPAN bytes of the last) the parser follows the bodies from the next one. An
opcode it does not know skips the rest of its body (the size says where the next begins);
a body that does not end with `end`, or a size or locals beyond all reason, ends the parse
until the next header or confirmations. While not live it changes nothing, and while it
follows code the models that read other structures step aside (exe.structure_known). The
model changes no byte. Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import follow
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# The places the parser tells apart: a section's id, its size and its other bytes; the
# code section's function count; a body's size, its locals' count, a run's count and
# type; an opcode, a LEB128 immediate, fixed immediate bytes; the rest of a body not
# understood
(NONE, SEC_ID, SEC_SIZE, SEC_BODY, FN_COUNT, FN_SIZE, LOCALS, LOCAL_N, LOCAL_TYPE, OPCODE,
 LEB, FIXED, SKIP) = range(13)
# an opcode's immediates (IMMEDIATES[op]): a number of LEB128s (0 ... 2), or one of these
VEC, VEC_PLUS, F32, F64, PREFIX, INVALID = 8, 9, 10, 11, 12, -1
IMMEDIATES = np.full(256, INVALID, dtype=np.int64)
for _op in (0x00, 0x01, 0x05, 0x0A, 0x0B, 0x0F, 0x19, 0x1A, 0x1B, 0xD1, 0xD3, 0xD4,
            *range(0x45, 0xC5)):
    IMMEDIATES[_op] = 0
for _op in (0x02, 0x03, 0x04, 0x06, 0x07, 0x08, 0x09, 0x0C, 0x0D, 0x10, 0x12, 0x14, 0x15,
            0x18, *range(0x20, 0x27), 0x3F, 0x40, 0x41, 0x42, 0xD0, 0xD2, 0xD5, 0xD6):
    IMMEDIATES[_op] = 1
for _op in (0x11, 0x13, *range(0x28, 0x3F)):
    IMMEDIATES[_op] = 2
IMMEDIATES[0x0E] = VEC_PLUS  # br_table: the labels and the default
IMMEDIATES[0x1C] = VEC  # select t: the types
IMMEDIATES[0x43] = F32
IMMEDIATES[0x44] = F64
for _op in (0xFC, 0xFD, 0xFE):
    IMMEDIATES[_op] = PREFIX
VALUE_TYPES = (0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F)
CODE_SECTION = 10
MAGIC = 0x61736D01000000  # the last 7 bytes of the header: 'asm', version 1 (little-endian)
LEB_MAX = 10  # bytes of a LEB128 (a 64-bit constant)
BODY_MAX = 1 << 22  # a longer body, or a section, ends the parse
LOCALS_MAX = 50000
CHECKS = 4096  # announced ends of bodies remembered while searching for code
SEEN_SPAN = 65536  # confirmations this far apart or nearer count in a row ...
CONFIRMATIONS = 3  # ... and this many start the parse
LOCAL_RUNS_LIKELY = 16  # a candidate body's count of local runs is below this

# fields of context.STATE: on (mix field wasm), the selector (-1: none); the current place,
# where it starts, its value so far and its bits; where the current section and body end,
# the code section's bodies left (-1: not known), the locals' runs left; the opcode, its
# sub-opcode (-1: none), the last three opcodes, the immediate's number, the LEB128s left,
# the fixed bytes after them, the first immediate of the last instruction that had one;
# the search: where a candidate body started (-1: none) and its size so far and bits (once
# the size is in: where its end will be, and bits -1), where
# the last confirmation was, confirmations in a row; per opcode, its first two immediates'
# last values; the announced ends
(S_W_ON, S_W_SEL, S_W_PLACE, S_W_AT, S_W_VAL, S_W_SHIFT, S_W_SEC_END, S_W_BODY_END, S_W_FNS,
 S_W_RUNS, S_W_OP, S_W_SUB, S_W_OPS, S_W_IMM, S_W_LEBS, S_W_FIXED, S_W_PREV_IMM, S_W_CAND,
 S_W_CAND_VAL, S_W_CAND_SHIFT, S_W_SEEN, S_W_HITS) = cx.STATE.offsets(*(
     f"wasm.{name}" for name in (
         "on", "sel", "place", "at", "val", "shift", "sec_end", "body_end", "fns", "runs",
         "op", "sub", "ops", "imm", "lebs", "fixed", "prev_imm", "cand", "cand_val",
         "cand_shift", "seen", "hits")))
S_W_LAST = cx.STATE.offset("wasm.last")
S_W_ENDS = cx.STATE.offset("wasm.ends")
assert cx.STATE.length("wasm.last") == 512 and cx.STATE.length("wasm.ends") == CHECKS


def start_state(S: np.ndarray, on: bool) -> None:
    """The model's fields of a new stream's state: no code followed, none searched."""
    S[S_W_ON] = int(on)
    S[S_W_SEL] = S[S_W_CAND] = S[S_W_SEEN] = -1
    S[S_W_PLACE] = NONE


@jit(inline="always")
def following(S):
    """Whether code is being followed (a body's bytes, known place by place)."""
    return FN_SIZE <= S[S_W_PLACE] <= FIXED


@jit(inline="always")
def enter(S, place, n):
    S[S_W_PLACE] = place
    S[S_W_AT] = n
    S[S_W_VAL] = S[S_W_SHIFT] = 0


@jit
def next_body(S, n):
    """A body is done (or the code section's count is in): the next body, or the section."""
    if S[S_W_FNS] == 0:
        next_section(S, n)
        return
    if S[S_W_FNS] > 0:
        S[S_W_FNS] -= 1
    enter(S, FN_SIZE, n)


@jit
def next_section(S, n):
    if S[S_W_SEC_END] >= 0 and n != S[S_W_SEC_END]:
        S[S_W_PLACE] = NONE
        return
    enter(S, SEC_ID, n)


@jit
def next_instruction(S, n):
    """An instruction is done: the next, or the body ends (with end, else the parse)."""
    if n < S[S_W_BODY_END]:
        enter(S, OPCODE, n)
    elif n == S[S_W_BODY_END] and S[S_W_OPS] & 0xFF == 0x0B and S[S_W_SUB] < 0:
        next_body(S, n)
    else:
        S[S_W_PLACE] = NONE


@jit
def next_immediate(S, n):
    """An immediate is done: the next LEB128, the fixed bytes, or the next instruction."""
    if S[S_W_LEBS] > 0:
        S[S_W_LEBS] -= 1
        S[S_W_IMM] += 1
        enter(S, LEB, n)
    elif S[S_W_FIXED] > 0:
        enter(S, FIXED, n)
    else:
        next_instruction(S, n)


@jit
def sub_immediates(S, v):
    """A prefixed opcode's sub-opcode v is in: its LEB128s and fixed bytes (False: not
    known)."""
    p = S[S_W_OP]
    lebs, fixed = 0, 0
    if p == 0xFC:
        if v <= 7:
            lebs = 0
        elif v in (8, 10, 12, 14):
            lebs = 2
        elif v <= 17:
            lebs = 1
        else:
            return False
    elif p == 0xFD:
        if v <= 11 or v in (92, 93):
            lebs = 2
        elif v in (12, 13):
            fixed = 16
        elif 21 <= v <= 34:
            fixed = 1
        elif 84 <= v <= 91:
            lebs, fixed = 2, 1
        elif v > 0x113:
            return False
    elif v == 3:
        fixed = 1
    elif v <= 2 or 0x10 <= v <= 0x4E:
        lebs = 2
    else:
        return False
    S[S_W_LEBS] = lebs
    S[S_W_FIXED] = fixed
    return True


@jit
def skip(S, n):
    """An instruction not understood: the rest of the body is skipped (none left: the
    parse ends)."""
    if n < S[S_W_BODY_END]:
        enter(S, SKIP, n)
    else:
        S[S_W_PLACE] = NONE


@jit
def read_opcode(S, op, n):
    S[S_W_OPS] = ((S[S_W_OPS] << 8) | op) & 0xFFFFFF
    S[S_W_OP] = op
    S[S_W_SUB] = -1
    S[S_W_IMM] = -1
    S[S_W_FIXED] = 0
    kind = IMMEDIATES[op]
    if kind == INVALID:
        skip(S, n)
        return
    if kind in (F32, F64):
        S[S_W_LEBS] = 0
        S[S_W_FIXED] = 4 if kind == F32 else 8
    elif kind == PREFIX:
        S[S_W_LEBS] = 1  # the sub-opcode
    elif kind in (VEC, VEC_PLUS):
        S[S_W_LEBS] = 1  # the count
    else:
        S[S_W_LEBS] = kind
    next_immediate(S, n)


@jit
def read_leb(S, v, n):
    """A LEB128 immediate is in (v, unsigned)."""
    op = S[S_W_OP]
    kind = IMMEDIATES[op]
    k = S[S_W_IMM]
    if kind == PREFIX and k == 0:
        S[S_W_SUB] = v
        if not sub_immediates(S, v):
            skip(S, n)
            return
    elif (kind in (VEC, VEC_PLUS)) and k == 0:
        if v > BODY_MAX:
            S[S_W_PLACE] = NONE
            return
        S[S_W_LEBS] = v + (kind == VEC_PLUS)
    else:
        k -= kind == PREFIX  # (a prefixed opcode's sub-opcode is immediate 0)
        if k <= 1:
            S[S_W_LAST + 2 * op + k] = v & 0xFFFFFFFF
        if k == 0:
            S[S_W_PREV_IMM] = v & 0xFFFFFFFF
    next_immediate(S, n)


@jit
def read_field(S, place, v, n):
    """A LEB128 field or a byte field (place) ended with v: choose the next place."""
    if place == SEC_ID:
        S[S_W_OPS] = v  # (the section's id, until the section's size is in)
        enter(S, SEC_SIZE, n)
    elif place == SEC_SIZE:
        if v < 0 or v > BODY_MAX * 16:  # (negative: a LEB128 beyond 63 bits)
            S[S_W_PLACE] = NONE
            return
        S[S_W_SEC_END] = n + v
        if S[S_W_OPS] == CODE_SECTION:
            enter(S, FN_COUNT, n)
        else:
            enter(S, SEC_BODY, n)
            if v == 0:
                next_section(S, n)
    elif place == FN_COUNT:
        S[S_W_FNS] = v
        next_body(S, n)
    elif place == FN_SIZE:
        if v < 2 or v > BODY_MAX:
            S[S_W_PLACE] = NONE
            return
        S[S_W_BODY_END] = n + v
        S[S_W_OPS] = 0
        enter(S, LOCALS, n)
    elif place == LOCALS:
        if v > LOCALS_MAX:
            S[S_W_PLACE] = NONE
            return
        S[S_W_RUNS] = v
        if v > 0:
            enter(S, LOCAL_N, n)
        else:
            next_instruction(S, n)
    elif place == LOCAL_N:
        enter(S, LOCAL_TYPE, n)
    elif place == LOCAL_TYPE:
        if v not in VALUE_TYPES:
            S[S_W_PLACE] = NONE
            return
        S[S_W_RUNS] -= 1
        if S[S_W_RUNS] > 0:
            enter(S, LOCAL_N, n)
        else:
            next_instruction(S, n)
    elif place == OPCODE:
        read_opcode(S, v, n)
    elif place == LEB:
        read_leb(S, v, n)


@jit
def search(S, byte, n):
    """Looking for code in the middle of a stream: a candidate body starts after each end;
    its size announces where the body's end will be; an end there confirms it."""
    cand = S[S_W_CAND]
    if cand >= 0 and S[S_W_CAND_SHIFT] < 0:  # the size is in; the locals' count is next
        end = S[S_W_CAND_VAL]
        if byte < LOCAL_RUNS_LIKELY:
            S[S_W_ENDS + (hash32(end) >> 20)] = end
        S[S_W_CAND] = -1
    elif cand >= 0:
        S[S_W_CAND_VAL] |= (byte & 0x7F) << S[S_W_CAND_SHIFT]
        S[S_W_CAND_SHIFT] += 7
        if byte < 0x80:
            size = S[S_W_CAND_VAL]
            if 2 <= size <= BODY_MAX:
                S[S_W_CAND_VAL] = n + size  # where its end will be
                S[S_W_CAND_SHIFT] = -1
            else:
                S[S_W_CAND] = -1
        elif S[S_W_CAND_SHIFT] > 21:
            S[S_W_CAND] = -1
    if byte != 0x0B:
        return
    if S[S_W_ENDS + (hash32(n) >> 20)] == n:  # an announced end
        if S[S_W_SEEN] >= 0 and n - S[S_W_SEEN] <= SEEN_SPAN:
            S[S_W_HITS] += 1
        else:
            S[S_W_HITS] = 1
        S[S_W_SEEN] = n
        if S[S_W_HITS] >= CONFIRMATIONS and S[S_W_PLACE] == NONE:
            S[S_W_FNS] = -1
            S[S_W_SEC_END] = -1
            enter(S, FN_SIZE, n)
            return
    S[S_W_CAND] = n
    S[S_W_CAND_VAL] = S[S_W_CAND_SHIFT] = 0


@jit
def read_byte(S, byte, n):
    """The parser takes the byte at n - 1 (and what ends with it)."""
    place = S[S_W_PLACE]
    if place in (NONE, SEC_BODY, SKIP):
        if S[cx.S_HIST] == MAGIC and place == NONE:
            S[S_W_SEC_END] = n
            next_section(S, n)
            return
        if place == SEC_BODY and n == S[S_W_SEC_END]:
            next_section(S, n)
        elif place == SKIP and n == S[S_W_BODY_END]:
            next_body(S, n)
        elif place == NONE:
            search(S, byte, n)
        return
    j = n - 1 - S[S_W_AT]
    if place == FIXED:
        if n - S[S_W_AT] == S[S_W_FIXED]:
            S[S_W_FIXED] = 0
            next_instruction(S, n)
        return
    if place in (OPCODE, LOCAL_TYPE, SEC_ID):
        read_field(S, place, byte, n)
        return
    S[S_W_VAL] |= (byte & 0x7F) << S[S_W_SHIFT]
    S[S_W_SHIFT] = min(S[S_W_SHIFT] + 7, 56)
    if byte >= 0x80:
        if j + 1 >= LEB_MAX:
            S[S_W_PLACE] = NONE
        return
    read_field(S, place, S[S_W_VAL], n)


@jit
def is_live(S):
    return following(S) and (S[S_W_SEEN] < 0 or S[S_W_HITS] >= CONFIRMATIONS
                             or S[S_W_FNS] >= 0)


@jit
def next_contexts(S, HB):
    """After pyc.next_contexts: follow the code and, while in a body, set the place's
    contexts for the next byte in the slots the instruction models take, and the
    selector."""
    if S[S_W_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]
    read_byte(S, hist & 0xFF, n)
    if not is_live(S):
        S[S_W_SEL] = -1
        return
    place = S[S_W_PLACE]
    j = min(n - S[S_W_AT], 3)
    op = S[S_W_OP]
    if place in (LEB, FIXED):
        where = place | j << 4 | (S[S_W_IMM] + 1) << 6 | op << 10 | (S[S_W_SUB] & 0x3FF) << 18
    else:
        where = place | j << 4
    part = (S[S_W_VAL] & 0xFFFF) | (min(S[S_W_SHIFT], 14) << 16)
    ops = S[S_W_OPS]
    if place == OPCODE:  # the last first immediate of the opcode before
        last = S[S_W_LAST + 2 * (ops & 0xFF)]
    else:
        last = S[S_W_LAST + 2 * op + min(max(S[S_W_IMM] - (IMMEDIATES[op] == PREFIX), 0), 1)]
    S[S_W_SEL] = place | (hash32(where) >> 28) << 4
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if not follow.takes_slot(k):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0x1F83D9AB), where), part)
        if k == cx.KIND_SHEET_FIELD:
            pass
        elif k == cx.KIND_SHEET_COL:  # the last immediate of this opcode (of the last)
            h = cx.mixh(h, last)
        elif k == cx.KIND_SHEET_ABOVE:  # the opcode before
            h = cx.mixh(h, ops & 0xFFFF)
        elif k == cx.KIND_SHEET_LEFT:
            h = cx.mixh(cx.mixh(h, ops & 0xFFFF), last)
        elif k == cx.KIND_WORD_TRIGRAM:
            h = cx.mixh(h, ops)
        elif k == cx.KIND_WORD_SKIP:  # the last instruction's first immediate
            h = cx.mixh(cx.mixh(h, S[S_W_PREV_IMM]), ops & 0xFF)
        elif k == cx.KIND_WORD_BIGRAM:
            h = cx.mixh(h, hist & 0xFFFF)
        elif k == cx.WORD_ORDER:
            h = cx.mixh(h, hist & 0xFF)
        else:
            h = cx.mixh(h, hist & 0xFFFFFF)
        S[cx.S_CTX + m] = h
