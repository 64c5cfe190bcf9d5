"""The class-file model: contexts for Java class files, and a transform of their constant
pool's references.

A class file is a tree of fields whose sizes the bytes before them tell (JVMS chapter 4):
the constant pool (a tag, then a string or references to other entries), the class's
fields and methods, their attributes, and in each method's Code attribute the bytecode,
its exception table and its tables of lines and local variables. The model parses it byte
by byte from the magic number CAFEBABE (`read_byte`), so it knows each byte's field, and
while it follows a class it gives the slots of the word, text and spreadsheet kinds
(follow.takes_slot) contexts of that field: the field and the bytes of it so far, with the
field's last value, the field before, the last tags or opcodes, the operand of the last
instruction with the same opcode, the attribute's name. The second mixer's weight set and
the second APM's row follow the field. Strings of the constant pool are left to the text
models (the model speaks for no slot there). It runs in recipes with the mix field `jvm`.

While it follows a class, the context models that read other structures step aside
(exe.structure_known): no x86, word or sparse contexts inside a class.

Evidence: the magic CAFEBABE and a major version of 45 ... 100 (a Mach-O universal binary
has the same magic, then a small count of architectures). A field that breaks the grammar
(an unknown tag, a Code attribute whose parts do not add up to its length) ends the parse
until the next magic: a misparse costs a class at most, and text never starts one.

The constant pool's references are coded relative to the entry's own index (stored as
index - the entry's index, mod 2**16): a compiler writes an entry's parts right after it,
so the same small numbers repeat in every class where the absolute indexes never do.
Likewise a method's name and descriptor and a line table's pc and line are coded relative
to the last of their kind, and a local variable's length to the code after its start
(RELATIVE). The parser knows at a field's first byte how it is coded, so the encoder
rewrites both bytes, and the decoder turns them back after the second; the parser adds
the base back to read the value. Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import follow
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# The fields of a class file the parser tells apart (each below 64; FIELD_BYTES: their
# sizes, 0 for the variable ones, whose size the field before gave)
(NONE, MINOR, MAJOR, CP_COUNT, TAG, UTF_LEN, UTF, CLASS_NAME, STRING, METHOD_TYPE, MODULE,
 REF_CLASS, REF_NAT, NAT_NAME, NAT_DESC, DYN_BOOT, DYN_NAT, MH_KIND, MH_REF, NUM4, NUM8,
 ACCESS, THIS, SUPER, I_COUNT, INTERFACE, M_COUNT, M_ACCESS, M_NAME, M_DESC, A_COUNT,
 A_NAME, A_LEN, A_BODY, MAX_STACK, MAX_LOCALS, CODE_LEN, OPCODE, OPERAND, SW_PAD, SW_INT,
 EX_COUNT, EX_ENTRY, LNT_COUNT, LNT_PC, LNT_LINE, LVT_COUNT, LVT_PC, LVT_LEN, LVT_NAME,
 LVT_DESC, LVT_SLOT, N_FIELDS) = range(53)
FIELD_BYTES = np.full(N_FIELDS, 2, dtype=np.int64)
for _f in (UTF, A_BODY, OPERAND, SW_PAD):
    FIELD_BYTES[_f] = 0
for _f in (TAG, MH_KIND, OPCODE):
    FIELD_BYTES[_f] = 1
for _f in (NUM4, A_LEN, CODE_LEN, SW_INT):
    FIELD_BYTES[_f] = 4
FIELD_BYTES[NUM8] = 8
FIELD_BYTES[NONE] = 0
# The u2 fields coded relative to a base (RELATIVE[field]): the constant pool's references
# to their entry's index (TO_ENTRY), a method's name and descriptor and a line table's pc
# and line to the field's last value (TO_LAST), a local variable's range to the code after
# its start (TO_CODE_END: most span the rest of the method)
KEPT, TO_ENTRY, TO_LAST, TO_CODE_END = range(4)
RELATIVE = np.full(N_FIELDS, KEPT, dtype=np.int64)
for _f in (CLASS_NAME, STRING, METHOD_TYPE, MODULE, REF_CLASS, REF_NAT, NAT_NAME, NAT_DESC,
           DYN_NAT, MH_REF):
    RELATIVE[_f] = TO_ENTRY
for _f in (M_NAME, M_DESC, LNT_PC, LNT_LINE):
    RELATIVE[_f] = TO_LAST
RELATIVE[LVT_LEN] = TO_CODE_END

# bytecode: each opcode's operand bytes (tableswitch, lookupswitch and wide aside)
OPERAND_BYTES = np.zeros(256, dtype=np.int64)
for _op in (0x10, 0x12, 0x15, 0x16, 0x17, 0x18, 0x19, 0x36, 0x37, 0x38, 0x39, 0x3A, 0xA9,
            0xBC):
    OPERAND_BYTES[_op] = 1
for _op in (0x11, 0x13, 0x14, 0x84, *range(0x99, 0xA9), 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7,
            0xB8, 0xBB, 0xBD, 0xC0, 0xC1, 0xC6, 0xC7):
    OPERAND_BYTES[_op] = 2
OPERAND_BYTES[0xC5] = 3
for _op in (0xB9, 0xBA, 0xC8, 0xC9):
    OPERAND_BYTES[_op] = 4
OP_TABLESWITCH, OP_LOOKUPSWITCH, OP_WIDE, OP_IINC = 0xAA, 0xAB, 0xC4, 0x84

MAGIC = 0xCAFEBABE
MAJOR_MIN, MAJOR_MAX = 45, 100  # JDK 1.0.2 ... far beyond today's 69
STRINGS = 4096  # the hash of each of the first STRINGS entries' string (attribute names)
ATTR_LEN_MAX = 1 << 26  # a longer attribute is a misparse
CODE_MAX = 65535  # and longer bytecode (JVMS: code_length < 65536)
SWITCH_MAX = 1 << 16  # a switch with more cases than this is a misparse
LEVELS = 3  # attributes of the class, of a field or method, of a Code attribute


def string_hash(s: bytes) -> int:
    """`read_byte`'s hash of a constant-pool string (with its length): attribute names."""
    h = 0
    for b in s:
        h = (h * 0x01000193 + b + 1) & 0xFFFFFFFF
    return (h ^ (len(s) << 20)) & 0xFFFFFFFF


CODE, LINES, LOCALS, LOCAL_TYPES = (string_hash(s) for s in (
    b"Code", b"LineNumberTable", b"LocalVariableTable", b"LocalVariableTypeTable"))

# fields of context.STATE: on (mix field jvm), the selector for the next byte (-1: none);
# the current field, where it starts, its size, its bytes so far (a string's: their hash);
# the last field's value and number; the constant pool's size and the current entry's
# index, the last tags; interfaces, fields or methods left, which of the two (0, 1), the
# attribute level, its name's string hash; where the code starts and ends, the last
# opcodes, whether a wide prefix came, the switch's stage, its low bound and ints left, the
# table entries left; the reference the transform marked (-1: none) and its base; per
# level, the attributes left and where the current one ends; per field, its last value; per
# opcode, its last operand; per entry (the first STRINGS), its string's hash
(S_J_ON, S_J_SEL, S_J_FIELD, S_J_AT, S_J_LEN, S_J_VAL, S_J_PREV, S_J_PREV_FIELD,
 S_J_CP_COUNT, S_J_CP_INDEX, S_J_TAGS, S_J_LEFT, S_J_PHASE, S_J_LEVEL, S_J_ATTR,
 S_J_CODE_AT, S_J_CODE_END, S_J_OPS, S_J_WIDE, S_J_SW_STAGE, S_J_SW_LOW, S_J_SW_LEFT,
 S_J_ROWS, S_J_MARK_AT, S_J_MARK_BASE) = cx.STATE.offsets(*(f"jvm.{name}" for name in (
     "on", "sel", "field", "at", "len", "val", "prev", "prev_field", "cp_count", "cp_index",
     "tags", "left", "phase", "level", "attr", "code_at", "code_end", "ops", "wide",
     "sw_stage", "sw_low", "sw_left", "rows", "mark_at", "mark_base")))
S_J_ATTRS_LEFT = cx.STATE.offset("jvm.attrs_left")
S_J_ATTR_END = cx.STATE.offset("jvm.attr_end")
S_J_LAST = cx.STATE.offset("jvm.last")
S_J_OPERANDS = cx.STATE.offset("jvm.operands")
S_J_STRINGS = cx.STATE.offset("jvm.strings")
assert cx.STATE.length("jvm.last") >= N_FIELDS and cx.STATE.length("jvm.strings") == STRINGS


def start_state(S: np.ndarray, on: bool) -> None:
    """The model's fields of a new stream's state: no class followed."""
    S[S_J_ON] = int(on)
    S[S_J_SEL] = S[S_J_MARK_AT] = -1
    S[S_J_FIELD] = NONE


@jit(inline="always")
def following(S):
    """Whether a class is being followed (its structure known, byte by byte)."""
    return S[S_J_FIELD] != NONE


@jit(inline="always")
def enter(S, field, n, size):
    S[S_J_FIELD] = field
    S[S_J_AT] = n
    S[S_J_LEN] = size
    S[S_J_VAL] = 0


@jit(inline="always")
def enter_fixed(S, field, n):
    enter(S, field, n, FIELD_BYTES[field])


@jit
def next_entry(S, n, slots):
    """The constant-pool entry is done (it took `slots` indexes): the next, or the class."""
    S[S_J_CP_INDEX] += slots
    if S[S_J_CP_INDEX] >= S[S_J_CP_COUNT]:
        enter_fixed(S, ACCESS, n)
    else:
        enter_fixed(S, TAG, n)


@jit
def next_member(S, n):
    """A field or method is done: the next, or the methods, or the class's attributes."""
    if S[S_J_LEFT] > 0:
        enter_fixed(S, M_ACCESS, n)
    elif S[S_J_PHASE] == 0:
        S[S_J_PHASE] = 1
        enter_fixed(S, M_COUNT, n)
    else:
        S[S_J_LEVEL] = 0
        enter_fixed(S, A_COUNT, n)


@jit
def next_attribute(S, n, counted):
    """An attribute is done (or, `counted`, the attribute count): the next at its level, or
    what the level belongs to is done. An attribute that did not end where its length said
    ends the parse."""
    level = S[S_J_LEVEL]
    if not counted and n != S[S_J_ATTR_END + level]:
        S[S_J_FIELD] = NONE
        return
    if level == 2 and S[S_J_ATTRS_LEFT + 2] == 0:  # the Code attribute is done
        level = S[S_J_LEVEL] = 1
        if n != S[S_J_ATTR_END + 1]:
            S[S_J_FIELD] = NONE
            return
    if S[S_J_ATTRS_LEFT + level] > 0:
        S[S_J_ATTRS_LEFT + level] -= 1
        enter_fixed(S, A_NAME, n)
    elif level == 1:
        next_member(S, n)
    else:
        S[S_J_FIELD] = NONE  # the class is done


@jit
def next_op(S, n):
    if n < S[S_J_CODE_END]:
        enter_fixed(S, OPCODE, n)
    elif n == S[S_J_CODE_END]:
        enter_fixed(S, EX_COUNT, n)
    else:
        S[S_J_FIELD] = NONE


@jit
def next_row(S, n, first, last):
    """A table's field is done (a row is first ... last): the row's next field, or the next
    row, or the table (an attribute) is done."""
    f = S[S_J_FIELD]
    if first <= f < last:
        enter_fixed(S, f + 1, n)
        return
    S[S_J_ROWS] -= 1
    if S[S_J_ROWS] > 0:
        enter_fixed(S, first, n)
    else:
        next_attribute(S, n, False)


@jit
def done(S, f, v, n):
    """The field f ended with value v (the next field starts at n): choose the next."""
    if f == MINOR:
        enter_fixed(S, MAJOR, n)
    elif f == MAJOR:
        if MAJOR_MIN <= v <= MAJOR_MAX:
            enter_fixed(S, CP_COUNT, n)
        else:
            S[S_J_FIELD] = NONE
    elif f == CP_COUNT:
        S[S_J_CP_COUNT] = v
        S[S_J_CP_INDEX] = 0
        next_entry(S, n, 1)
    elif f == TAG:
        S[S_J_TAGS] = ((S[S_J_TAGS] << 5) | (v & 31)) & 0xFFFFF
        if v == 1:
            enter_fixed(S, UTF_LEN, n)
        elif v == 3 or v == 4:
            enter_fixed(S, NUM4, n)
        elif v == 5 or v == 6:
            enter_fixed(S, NUM8, n)
        elif v == 7:
            enter_fixed(S, CLASS_NAME, n)
        elif v == 8:
            enter_fixed(S, STRING, n)
        elif v == 16:
            enter_fixed(S, METHOD_TYPE, n)
        elif v == 19 or v == 20:
            enter_fixed(S, MODULE, n)
        elif 9 <= v <= 11:
            enter_fixed(S, REF_CLASS, n)
        elif v == 12:
            enter_fixed(S, NAT_NAME, n)
        elif v == 15:
            enter_fixed(S, MH_KIND, n)
        elif v == 17 or v == 18:
            enter_fixed(S, DYN_BOOT, n)
        else:
            S[S_J_FIELD] = NONE
    elif f == UTF_LEN:
        enter(S, UTF, n, v)
    elif f == UTF:
        if S[S_J_CP_INDEX] < STRINGS:
            S[S_J_STRINGS + S[S_J_CP_INDEX]] = (v ^ (S[S_J_LAST + UTF_LEN] << 20)) & 0xFFFFFFFF
        next_entry(S, n, 1)
    elif f == NUM8:
        next_entry(S, n, 2)
    elif f in (REF_CLASS, NAT_NAME, DYN_BOOT, MH_KIND):
        enter_fixed(S, f + 1, n)
    elif f <= MH_REF or f == NUM4:
        next_entry(S, n, 1)
    elif f in (ACCESS, THIS, SUPER):
        enter_fixed(S, f + 1, n)
    elif f in (I_COUNT, INTERFACE):
        if f == I_COUNT:
            S[S_J_LEFT] = v
        if S[S_J_LEFT] > 0:
            S[S_J_LEFT] -= 1
            enter_fixed(S, INTERFACE, n)
        else:
            S[S_J_PHASE] = 0
            enter_fixed(S, M_COUNT, n)
    elif f == M_COUNT:
        S[S_J_LEFT] = v
        next_member(S, n)
    elif f == M_ACCESS:
        S[S_J_LEFT] -= 1
        enter_fixed(S, M_NAME, n)
    elif f == M_NAME:
        enter_fixed(S, M_DESC, n)
    elif f == M_DESC:
        S[S_J_LEVEL] = 1
        enter_fixed(S, A_COUNT, n)
    elif f == A_COUNT:
        S[S_J_ATTRS_LEFT + S[S_J_LEVEL]] = v
        next_attribute(S, n, True)
    elif f == A_NAME:
        S[S_J_ATTR] = S[S_J_STRINGS + v] if v < STRINGS else 0
        enter_fixed(S, A_LEN, n)
    elif f == A_LEN:
        if v > ATTR_LEN_MAX:
            S[S_J_FIELD] = NONE
            return
        S[S_J_ATTR_END + S[S_J_LEVEL]] = n + v
        attr = S[S_J_ATTR]
        if attr == CODE and S[S_J_LEVEL] == 1:
            enter_fixed(S, MAX_STACK, n)
        elif attr == LINES:
            enter_fixed(S, LNT_COUNT, n)
        elif attr in (LOCALS, LOCAL_TYPES):
            enter_fixed(S, LVT_COUNT, n)
        else:
            enter(S, A_BODY, n, v)
    elif f == A_BODY:
        next_attribute(S, n, False)
    elif f in (MAX_STACK, MAX_LOCALS):
        enter_fixed(S, f + 1, n)
    elif f == CODE_LEN:
        if v > CODE_MAX:
            S[S_J_FIELD] = NONE
            return
        S[S_J_CODE_AT] = n
        S[S_J_CODE_END] = n + v
        S[S_J_WIDE] = 0
        next_op(S, n)
    elif f == OPCODE:
        S[S_J_OPS] = ((S[S_J_OPS] << 8) | v) & 0xFFFFFF
        if S[S_J_WIDE] != 0:
            S[S_J_WIDE] = 0
            enter(S, OPERAND, n, 4 if v == OP_IINC else 2)
        elif v == OP_WIDE:
            S[S_J_WIDE] = 1
            next_op(S, n)
        elif v in (OP_TABLESWITCH, OP_LOOKUPSWITCH):
            S[S_J_SW_STAGE] = 0
            enter(S, SW_PAD, n, (S[S_J_CODE_AT] - n) & 3)
        elif OPERAND_BYTES[v] > 0:
            enter(S, OPERAND, n, OPERAND_BYTES[v])
        else:
            next_op(S, n)
    elif f == OPERAND:
        S[S_J_OPERANDS + (S[S_J_OPS] & 0xFF)] = v
        next_op(S, n)
    elif f == SW_PAD:
        enter_fixed(S, SW_INT, n)
    elif f == SW_INT:
        switch_int(S, v - ((v >> 31) << 32), n)
    elif f in (EX_COUNT, EX_ENTRY):  # four u2 a row
        if f == EX_COUNT:
            S[S_J_ROWS] = 4 * v
        if S[S_J_ROWS] > 0:
            S[S_J_ROWS] -= 1
            enter_fixed(S, EX_ENTRY, n)
        else:
            S[S_J_LEVEL] = 2
            enter_fixed(S, A_COUNT, n)
    elif f in (LNT_COUNT, LVT_COUNT):
        S[S_J_ROWS] = v + 1
        S[S_J_FIELD] = LNT_LINE if f == LNT_COUNT else LVT_SLOT  # as if a row had ended
        if f == LNT_COUNT:
            next_row(S, n, LNT_PC, LNT_LINE)
        else:
            next_row(S, n, LVT_PC, LVT_SLOT)
    elif LNT_PC <= f <= LNT_LINE:
        next_row(S, n, LNT_PC, LNT_LINE)
    elif LVT_PC <= f <= LVT_SLOT:
        next_row(S, n, LVT_PC, LVT_SLOT)
    else:
        S[S_J_FIELD] = NONE


@jit
def switch_int(S, v, n):
    """A switch's int is in (signed v): tableswitch has default, low, high, then
    high - low + 1 offsets; lookupswitch default, npairs, then npairs pairs."""
    stage = S[S_J_SW_STAGE]
    S[S_J_SW_STAGE] = stage + 1
    table = (S[S_J_OPS] & 0xFF) == OP_TABLESWITCH
    if stage == 1:
        if table:
            S[S_J_SW_LOW] = v
        else:
            S[S_J_SW_LEFT] = 2 * v
    elif stage == 2 and table:
        S[S_J_SW_LEFT] = v - S[S_J_SW_LOW] + 1
    if stage >= 1 + table:
        left = S[S_J_SW_LEFT]
        if left < 0 or left > 2 * SWITCH_MAX:
            S[S_J_FIELD] = NONE
            return
        if left == 0:
            next_op(S, n)
            return
        S[S_J_SW_LEFT] = left - 1
    enter_fixed(S, SW_INT, n)


@jit
def read_byte(S, byte, n):
    """The parser takes the byte at n - 1 (and what ends with it)."""
    f = S[S_J_FIELD]
    if f == NONE:
        if S[cx.S_HIST] & 0xFFFFFFFF == MAGIC:
            S[S_J_LEVEL] = 0
            S[S_J_OPS] = S[S_J_TAGS] = 0
            enter_fixed(S, MINOR, n)
        return
    if f == UTF:
        S[S_J_VAL] = (S[S_J_VAL] * 0x01000193 + byte + 1) & 0xFFFFFFFF
    else:
        S[S_J_VAL] = ((S[S_J_VAL] << 8) | byte) & 0xFFFFFFFFFFFF
    if n - S[S_J_AT] < S[S_J_LEN]:
        return
    v = S[S_J_VAL]
    if S[S_J_MARK_AT] == S[S_J_AT]:  # a field the encoder coded relative
        v = (v + S[S_J_MARK_BASE]) & 0xFFFF
    S[S_J_LAST + f] = v
    S[S_J_PREV] = v
    S[S_J_PREV_FIELD] = f
    done(S, f, v, n)
    while S[S_J_FIELD] != NONE and S[S_J_LEN] == 0:  # empty fields end where they start
        done(S, S[S_J_FIELD], 0, n)


@jit
def next_contexts(S, HB):
    """After syntax.next_contexts: follow the class and, while in its structure, set the
    field's contexts for the next byte in the slots the instruction models take, and the
    selector (a string's bytes are left to the text models)."""
    if S[S_J_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]
    read_byte(S, hist & 0xFF, n)
    f = S[S_J_FIELD]
    if f in (NONE, UTF):
        S[S_J_SEL] = -1
        return
    j = n - S[S_J_AT]
    part = (S[S_J_VAL] & 0xFFFF) | (min(j, 2) << 16)  # the field's bytes so far
    if f == OPERAND:
        group = (S[S_J_OPS] & 0xFF) | 256
    elif f == A_BODY or A_COUNT <= f <= A_LEN:
        group = (S[S_J_ATTR] & 0xFFFFF) << 2 | S[S_J_LEVEL]
    elif M_COUNT <= f <= M_DESC:
        group = S[S_J_PHASE]
    else:
        group = 0
    where = f | (min(j, 7) << 6) | (group << 9)
    if f in (A_BODY, SW_INT):
        where = cx.mixh(where, min(j, 15))
    if OPCODE <= f <= SW_INT:
        near = S[S_J_OPS] & 0xFFFF
        far = S[S_J_OPS]
    elif TAG <= f <= NUM8:
        near = S[S_J_TAGS] & 0x3FF
        far = S[S_J_TAGS]
    else:
        near = S[S_J_PREV_FIELD]
        far = S[S_J_LAST + M_ACCESS] if M_COUNT <= f <= M_DESC else S[S_J_PREV]
    last = S[S_J_OPERANDS + (S[S_J_OPS] & 0xFF)] if f == OPERAND else S[S_J_LAST + f]
    S[S_J_SEL] = f | (min(j, 3) << 6)
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if not follow.takes_slot(k):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0x3C6EF372), where), part)
        if k == cx.KIND_SHEET_FIELD:  # the field so far
            pass
        elif k == cx.KIND_SHEET_COL:  # and its last value
            h = cx.mixh(h, last)
        elif k == cx.KIND_SHEET_ABOVE:  # and the field before
            h = cx.mixh(cx.mixh(h, S[S_J_PREV_FIELD]), S[S_J_PREV])
        elif k == cx.KIND_SHEET_LEFT:  # and the last tags, opcodes or the field before
            h = cx.mixh(h, near)
        elif k == cx.KIND_WORD_TRIGRAM:
            h = cx.mixh(h, far)
        elif k == cx.KIND_WORD_SKIP:
            h = cx.mixh(cx.mixh(h, last), near)
        elif k == cx.KIND_WORD_BIGRAM:
            h = cx.mixh(h, hist & 0xFFFF)
        elif k == cx.WORD_ORDER:
            h = cx.mixh(h, hist & 0xFF)
        else:
            h = cx.mixh(h, hist & 0xFFFFFF)
        S[cx.S_CTX + m] = h


@jit
def calls_before_byte(S, data, t, encoding):
    """Before byte t of the block is coded: at the first byte of a field coded relative
    (RELATIVE), with both in the block, mark it; the encoder codes it as its value minus
    the base, mod 2**16."""
    if S[S_J_ON] == 0 or t + 2 > data.shape[0]:
        return
    f = S[S_J_FIELD]
    at = S[cx.S_POS]
    mode = RELATIVE[f]
    if mode == KEPT or S[S_J_AT] != at:
        return
    if mode == TO_ENTRY:
        base = S[S_J_CP_INDEX]
    elif mode == TO_LAST:
        base = S[S_J_LAST + f]
    else:
        base = S[S_J_LAST + CODE_LEN] - S[S_J_LAST + LVT_PC]
    S[S_J_MARK_AT] = at
    S[S_J_MARK_BASE] = base
    if encoding:
        v = ((np.int64(data[t]) << 8) | np.int64(data[t + 1])) - base
        data[t] = np.uint8((v >> 8) & 0xFF)
        data[t + 1] = np.uint8(v & 0xFF)


@jit
def calls_after_byte(S, data, t, decoding):
    """After byte t of the block: the marked field's second byte is in; the decoder turns it
    back."""
    at = S[S_J_MARK_AT]
    if at < 0 or S[cx.S_POS] != at + 2:
        return
    S[S_J_MARK_AT] = -1
    if decoding:
        v = ((np.int64(data[t - 1]) << 8) | np.int64(data[t])) + S[S_J_MARK_BASE]
        data[t - 1] = np.uint8((v >> 8) & 0xFF)
        data[t] = np.uint8(v & 0xFF)
