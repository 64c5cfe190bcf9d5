"""The .pyc model: contexts for compiled Python modules (CPython 3.11 and later).

A .pyc is a 16-byte header (the version's magic, ending 0D 0A, flags, and the source's
date and size or hash) and one marshal object, the module's code object: a type byte
(bit 7: the object may be referred back to), then by type an int, a length and bytes, a
count and that many objects, or a code object's fixed fields (five ints, its bytecode,
constants, names, local names and kinds, file name, name, qualified name, first line, line
table and exception table). The model parses it byte by byte from the header (`read_byte`)
with a stack of the containers it is in, so it knows each byte's field and its role (which
field of which code object, or an element of which tuple). While it follows a module it
gives the slots of the word, text and spreadsheet kinds (follow.takes_slot) contexts of
that field: its role and the bytes so far, with the type before, the last value of the
field, and in the bytecode the instruction, in the line table the entry's form and the
place in it. The second mixer's weight set and the second APM's row follow the field.
Strings and docstrings are left to the text models. It runs in recipes with the mix field
`pyc`.

While it follows a module the models that read other structures step aside
(exe.structure_known).

Evidence: a header whose magic (little-endian, then 0D 0A) is a version from 3.11 on
(MAGIC_MIN ... MAGIC_MAX), whose flags are below 4, and whose object is a code object. An
unknown type byte, a string longer than LENGTH_MAX or containers nested deeper than DEPTH
end the parse until the next header: a misparse costs a module at most.

The model changes no byte (coding back-references relative to the count of objects, as the
class-file model codes its references, cost 3 % on the tuning module: a name's absolute
index repeats within a module, its distance does not). Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import follow
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# The fields the parser tells apart (each below 16)
(NONE, HEADER, TYPE, INT, REF, LEN1, LEN4, BODY, FLOAT, LONG_LEN, LONG_DIGITS, CODE_INTS,
 FIRST_LINE) = range(13)
# Roles: what an object is in its container. 0: the module's code object; ROLE_FIELD + k:
# field k of a code object (1: the bytecode ... 11: the exception table, CODE_FIELDS);
# ROLE_ITEM + r: an item of a tuple, list, set or dict whose own role was r
ROLE_FIELD, ROLE_ITEM = 1, 16
(F_CODE, F_CONSTS, F_NAMES, F_LOCALS, F_KINDS, F_FILENAME, F_NAME, F_QUALNAME, F_FIRST_LINE,
 F_LINES, F_EXCEPTIONS) = range(1, 12)
CODE_FIELDS = 11  # after the five ints
# the line table's parser (PEP 657's location entries): the next byte is an entry's first
# (LT_FIRST), the varints of the long form (LT_LONG), the no-column form's one (LT_LINE),
# the one-line form's two columns (LT_COLUMNS), the short form's column byte (LT_SHORT)
LT_FIRST, LT_LONG, LT_LINE, LT_COLUMNS, LT_SHORT = range(5)
DEPTH = 32  # containers nested deeper end the parse
LENGTH_MAX = 1 << 26  # a longer string or container ends the parse
MAGIC_MIN, MAGIC_MAX = 3495, 3700  # CPython 3.11's magic on (3.14 is 3620-ish)
KINDS = np.zeros(128, dtype=np.int64)  # the type bytes: what follows each (0: unknown)
(T_NOTHING, T_INT, T_REF, T_FLOAT8, T_FLOAT16, T_LONG, T_SHORT_STR, T_STR, T_SMALL_TUPLE,
 T_SEQ, T_DICT, T_CODE, T_NULL) = range(1, 14)
for _c in "NTF.S":
    KINDS[ord(_c)] = T_NOTHING
KINDS[ord("0")] = T_NULL
KINDS[ord("i")] = T_INT
KINDS[ord("r")] = T_REF
KINDS[ord("g")] = T_FLOAT8
KINDS[ord("y")] = T_FLOAT16
KINDS[ord("l")] = T_LONG
for _c in "zZ":
    KINDS[ord(_c)] = T_SHORT_STR
for _c in "aAuts":
    KINDS[ord(_c)] = T_STR
KINDS[ord(")")] = T_SMALL_TUPLE
for _c in "([<>":
    KINDS[ord(_c)] = T_SEQ
KINDS[ord("{")] = T_DICT
KINDS[ord("c")] = T_CODE
C_SEQ, C_DICT, C_CODE = 1, 2, 3  # the containers on the stack

# fields of context.STATE: on (mix field pyc), the selector (-1: none); the current field,
# where it starts, its size, its value so far; the current object's type byte and role, the
# type before; the depth; the line table's state: its part, the current entry's first
# byte and the one before, the varints or bytes left, the bytes into the part, the code
# unit the entry covers and its length, the columns of the last entry that had them (start,
# end·256); the last three opcodes; per depth, the container, its items or fields left (for
# a code object the field it is at), its role, and for a code object where its bytecode
# starts; per role, the last type byte and length; per opcode, its last argument
(S_P_ON, S_P_SEL, S_P_FIELD, S_P_AT, S_P_LEN, S_P_VAL, S_P_TYPE, S_P_ROLE, S_P_PREV_TYPE,
 S_P_DEPTH, S_P_LT, S_P_LT_FIRST, S_P_LT_PREV, S_P_LT_LEFT, S_P_LT_AT, S_P_LT_UNIT,
 S_P_LT_LEN, S_P_LT_COLS, S_P_OP) = cx.STATE.offsets(*(f"pyc.{name}" for name in (
     "on", "sel", "field", "at", "len", "val", "type", "role", "prev_type", "depth",
     "lt", "lt_first", "lt_prev", "lt_left", "lt_at", "lt_unit", "lt_len", "lt_cols", "op")))
S_P_KIND = cx.STATE.offset("pyc.kind")
S_P_LEFT = cx.STATE.offset("pyc.left")
S_P_ROLES = cx.STATE.offset("pyc.roles")
S_P_CODE_AT = cx.STATE.offset("pyc.code_at")
S_P_LAST = cx.STATE.offset("pyc.last")
S_P_LAST_LEN = cx.STATE.offset("pyc.last_len")
S_P_ARGS = cx.STATE.offset("pyc.args")
assert cx.STATE.length("pyc.kind") == DEPTH and cx.STATE.length("pyc.last") == 2 * ROLE_ITEM


def start_state(S: np.ndarray, on: bool) -> None:
    """The model's fields of a new stream's state: no module followed."""
    S[S_P_ON] = int(on)
    S[S_P_SEL] = -1
    S[S_P_FIELD] = NONE


@jit(inline="always")
def following(S):
    """Whether a module is being followed."""
    return S[S_P_FIELD] != NONE


@jit(inline="always")
def enter(S, field, n, size):
    S[S_P_FIELD] = field
    S[S_P_AT] = n
    S[S_P_LEN] = size
    S[S_P_VAL] = 0


@jit(inline="always")
def stop(S):
    S[S_P_FIELD] = NONE


@jit
def next_role(S):
    """The role of the object whose type byte comes next."""
    d = S[S_P_DEPTH]
    if d == 0:
        return 0
    if S[S_P_KIND + d - 1] == C_CODE:
        return ROLE_FIELD + S[S_P_LEFT + d - 1]
    return ROLE_ITEM + min(S[S_P_ROLES + d - 1], ROLE_ITEM - 1)


@jit
def next_object(S, n):
    """An object is done: its container takes the next (a type byte, or a code object's
    first line), or is done in turn; the module is done when the stack is empty."""
    while True:
        d = S[S_P_DEPTH]
        if d == 0:
            stop(S)
            return
        top = d - 1
        kind = S[S_P_KIND + top]
        if kind == C_DICT:  # ends with a NULL type byte
            enter(S, TYPE, n, 1)
            return
        if kind == C_SEQ:
            if S[S_P_LEFT + top] > 0:
                S[S_P_LEFT + top] -= 1
                enter(S, TYPE, n, 1)
                return
        else:  # a code object: its next field
            k = S[S_P_LEFT + top] + 1
            S[S_P_LEFT + top] = k
            if k == F_FIRST_LINE:
                enter(S, FIRST_LINE, n, 4)
                return
            if k <= CODE_FIELDS:
                enter(S, TYPE, n, 1)
                return
        S[S_P_DEPTH] = top  # the container is done


@jit
def push(S, n, kind, left):
    d = S[S_P_DEPTH]
    if d >= DEPTH:
        stop(S)
        return
    S[S_P_KIND + d] = kind
    S[S_P_LEFT + d] = left
    S[S_P_ROLES + d] = S[S_P_ROLE]
    S[S_P_DEPTH] = d + 1
    if kind == C_CODE:
        enter(S, CODE_INTS, n, 20)
    else:
        next_object(S, n)


@jit
def read_type(S, v, n):
    """A type byte is in: what the object holds follows (a module is a code object)."""
    if S[S_P_DEPTH] == 0 and KINDS[v & 0x7F] != T_CODE:
        stop(S)
        return
    S[S_P_PREV_TYPE] = S[S_P_TYPE]
    S[S_P_TYPE] = v
    S[S_P_ROLE] = next_role(S)
    kind = KINDS[v & 0x7F]
    if kind == T_NOTHING:
        next_object(S, n)
    elif kind == T_NULL:
        d = S[S_P_DEPTH]
        if d > 0 and S[S_P_KIND + d - 1] == C_DICT:
            S[S_P_DEPTH] = d - 1  # the dict is done
        next_object(S, n)
    elif kind == T_INT:
        enter(S, INT, n, 4)
    elif kind == T_REF:
        enter(S, REF, n, 4)
    elif kind in (T_FLOAT8, T_FLOAT16):
        enter(S, FLOAT, n, 8 if kind == T_FLOAT8 else 16)
    elif kind == T_LONG:
        enter(S, LONG_LEN, n, 4)
    elif kind in (T_SHORT_STR, T_SMALL_TUPLE):
        enter(S, LEN1, n, 1)
    elif kind in (T_STR, T_SEQ):
        enter(S, LEN4, n, 4)
    elif kind == T_DICT:
        push(S, n, C_DICT, 0)
    elif kind == T_CODE:
        push(S, n, C_CODE, 0)
    else:
        stop(S)


@jit
def read_length(S, v, n):
    """A length or count is in: the string's bytes, or the container's items."""
    if v >= LENGTH_MAX:
        stop(S)
        return
    kind = KINDS[S[S_P_TYPE] & 0x7F]
    if kind in (T_SMALL_TUPLE, T_SEQ):
        push(S, n, C_SEQ, v)
        return
    if S[S_P_ROLE] == ROLE_FIELD + F_CODE:
        S[S_P_CODE_AT + S[S_P_DEPTH] - 1] = n
    elif S[S_P_ROLE] == ROLE_FIELD + F_LINES:
        S[S_P_LT] = LT_FIRST
        S[S_P_LT_AT] = S[S_P_LT_UNIT] = S[S_P_LT_LEN] = 0
    enter(S, BODY, n, v)
    if v == 0:
        next_object(S, n)


@jit
def read_line_table(S, b):
    """The line table's parser takes byte b (PEP 657: an entry is a first byte 1cccclll, code
    c and length l + 1 code units, then by c: 15 nothing, 14 four varints, 13 one, 10-12
    two column bytes, 0-9 one; varints go on while bit 6 is set)."""
    part = S[S_P_LT]
    S[S_P_LT_AT] += 1
    if part == LT_FIRST:
        S[S_P_LT_PREV] = S[S_P_LT_FIRST]
        S[S_P_LT_FIRST] = b
        S[S_P_LT_UNIT] += S[S_P_LT_LEN]
        S[S_P_LT_LEN] = (b & 7) + 1
        code = (b >> 3) & 15
        S[S_P_LT_AT] = 0
        if code == 15 or b < 0x80:
            return
        if code == 14:
            S[S_P_LT] = LT_LONG
            S[S_P_LT_LEFT] = 4
        elif code == 13:
            S[S_P_LT] = LT_LINE
            S[S_P_LT_LEFT] = 1
        elif code >= 10:
            S[S_P_LT] = LT_COLUMNS
            S[S_P_LT_LEFT] = 2
        else:
            S[S_P_LT] = LT_SHORT
            S[S_P_LT_LEFT] = 1
        return
    if part in (LT_LONG, LT_LINE) and b & 0x40:
        return  # the varint goes on
    S[S_P_LT_LEFT] -= 1
    if part == LT_SHORT:  # the columns: start code·8 + high nibble, end start + low nibble
        start = ((S[S_P_LT_FIRST] >> 3) & 15) * 8 + (b >> 4)
        S[S_P_LT_COLS] = start | (start + (b & 15)) << 8
    elif part == LT_COLUMNS:  # start, then end
        if S[S_P_LT_LEFT] == 1:
            S[S_P_LT_COLS] = b
        else:
            S[S_P_LT_COLS] |= b << 8
    if S[S_P_LT_LEFT] <= 0:
        S[S_P_LT] = LT_FIRST


@jit
def read_byte(S, byte, n):
    """The parser takes the byte at n - 1 (and what ends with it)."""
    f = S[S_P_FIELD]
    if f == NONE:
        h = S[cx.S_HIST]
        magic = ((h >> 24) & 0xFF) | (((h >> 16) & 0xFF) << 8)  # little-endian, then 0D 0A
        if h & 0xFFFF == 0x0D0A and MAGIC_MIN <= magic <= MAGIC_MAX:
            S[S_P_DEPTH] = S[S_P_TYPE] = 0
            enter(S, HEADER, n, 12)
        return
    j = n - 1 - S[S_P_AT]
    if f == BODY:
        if S[S_P_ROLE] == ROLE_FIELD + F_LINES:
            read_line_table(S, byte)
        elif S[S_P_ROLE] == ROLE_FIELD + F_CODE:
            if j & 1 == 0:
                S[S_P_OP] = ((S[S_P_OP] << 8) | byte) & 0xFFFFFF
            else:
                S[S_P_ARGS + (S[S_P_OP] & 0xFF)] = byte
        S[S_P_VAL] = ((S[S_P_VAL] << 8) | byte) & 0xFFFFFFFF
    elif j < 4:
        S[S_P_VAL] |= byte << (8 * j)  # little-endian (a value is in the first 4 bytes)
    if n - S[S_P_AT] < S[S_P_LEN]:
        return
    v = S[S_P_VAL]
    if f == TYPE:
        S[S_P_LAST + next_role(S)] = v
        read_type(S, v, n)
    elif f in (LEN1, LEN4):
        S[S_P_LAST_LEN + S[S_P_ROLE]] = v
        read_length(S, v, n)
    elif f == LONG_LEN:
        v = v - ((v >> 31) << 32)
        if abs(v) >= LENGTH_MAX:
            stop(S)
        else:
            enter(S, LONG_DIGITS, n, 2 * abs(v))
            if v == 0:
                next_object(S, n)
    elif f == HEADER:
        if v < 4:  # the flags
            enter(S, TYPE, n, 1)
        else:
            stop(S)
    else:
        next_object(S, n)


@jit(inline="always")
def text_body(S):
    """Whether the next byte is a string's (names, docstrings, constants): the text
    models' (bytecode, line tables, exception tables and local kinds are not)."""
    role = S[S_P_ROLE]
    return S[S_P_FIELD] == BODY and not (
        role == ROLE_FIELD + F_CODE or role == ROLE_FIELD + F_LINES
        or role == ROLE_FIELD + F_EXCEPTIONS or role == ROLE_FIELD + F_KINDS)


@jit(inline="always")
def covered_opcode(S, HB, n, unit):
    """The opcode at code unit `unit` of the code object whose line table this is (256:
    out of the history or of the code)."""
    at = S[S_P_CODE_AT + S[S_P_DEPTH] - 1] + 2 * unit
    if at >= S[S_P_AT] or n - at > (1 << S[cx.S_HBITS]) - 1:
        return 256
    return np.int64(HB[at & ((1 << S[cx.S_HBITS]) - 1)])


@jit
def next_contexts(S, HB):
    """After jvm.next_contexts: follow the module and, while in its structure, set the
    field's contexts for the next byte in the slots the instruction models take, and the
    selector (strings are left to the text models)."""
    if S[S_P_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]
    read_byte(S, hist & 0xFF, n)
    f = S[S_P_FIELD]
    if f == NONE or text_body(S):
        S[S_P_SEL] = -1
        return
    j = n - S[S_P_AT]
    role = S[S_P_ROLE]
    part = (S[S_P_VAL] & 0xFFFF) | (min(j, 2) << 16)  # the field's bytes so far
    if f == TYPE:
        role = next_role(S)
        where = TYPE | (role << 4)
        a = S[S_P_TYPE]
        b = S[S_P_LAST + role]
        c = S[S_P_DEPTH]
    elif f == BODY and role == ROLE_FIELD + F_CODE:
        where = BODY | (j & 1) << 4 | 1 << 5
        part = 0
        a = S[S_P_OP] & 0xFF
        b = S[S_P_OP] | S[S_P_ARGS + a] << 24 if j & 1 else S[S_P_OP]
        c = b
    elif f == BODY and role == ROLE_FIELD + F_LINES:
        where = BODY | S[S_P_LT] << 4 | min(S[S_P_LT_AT], 3) << 8 | S[S_P_LT_LEFT] << 10 | 1 << 14
        part = 0
        unit = S[S_P_LT_UNIT] + (S[S_P_LT_LEN] if S[S_P_LT] == LT_FIRST else 0)
        a = covered_opcode(S, HB, n, unit)
        b = S[S_P_LT_FIRST] | S[S_P_LT_PREV] << 8
        c = S[S_P_LT_COLS] | S[S_P_LT_FIRST] << 16
    else:
        where = f | min(j, 31) << 4 | role << 9 | (S[S_P_TYPE] & 0x7F) << 15
        a = S[S_P_PREV_TYPE]
        b = S[S_P_LAST_LEN + role]
        c = S[S_P_DEPTH]
    S[S_P_SEL] = f | (hash32(where) >> 28) << 4
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if not follow.takes_slot(k):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0x510E527F), where), part)
        if k == cx.KIND_SHEET_FIELD:
            pass
        elif k == cx.KIND_SHEET_COL:
            h = cx.mixh(h, a)
        elif k == cx.KIND_SHEET_ABOVE:
            h = cx.mixh(h, b)
        elif k == cx.KIND_SHEET_LEFT:
            h = cx.mixh(cx.mixh(h, a), b)
        elif k == cx.KIND_WORD_BIGRAM:
            h = cx.mixh(h, hist & 0xFF)
        elif k == cx.KIND_WORD_TRIGRAM:
            h = cx.mixh(h, hist & 0xFFFF)
        elif k == cx.KIND_WORD_SKIP:
            h = cx.mixh(cx.mixh(h, hist & 0xFF), a)
        elif k == cx.WORD_ORDER:
            h = cx.mixh(cx.mixh(h, c), a)
        else:
            h = cx.mixh(h, hist & 0xFFFFFF)
        S[cx.S_CTX + m] = h

