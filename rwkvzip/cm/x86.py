"""The x86 model: contexts for x86 and x86-64 machine code, and its calls' transform.

x86 code is a stream of variable-length instructions: prefixes, an opcode of one to three
bytes, a ModRM byte, a SIB byte, a displacement and an immediate, each present or not by
the opcode. A byte there depends on which of those fields it is, on the opcode and on the
instruction before, which contexts that count back a fixed number of bytes cannot see. The
model follows the instructions with a length decoder (`read_byte`, on the opcode maps
below) and, while the data is x86 code, gives the slots of the word, text and spreadsheet
kinds (words, lines and records mean nothing in code) contexts of the instruction: the field
and the opcode, the opcodes before (the last two with their ModRMs' mod and reg), the same
place of the last instruction with the same opcode, the last bytes coded at the same place
of any instruction (the field, the byte in it and REX.W; a displacement's base and size, an
immediate's opcode class: paq8px's ExeModel keeps such a history for each state), the bytes
two to five back read as an instruction's start (two prefixes, an opcode, ModRM's mod and
rm; paq8px's exeCxt) and the last byte after two bytes read as prefixes (its exeCxt(3)); the
second mixer's weight set and the second APM's row follow the field. It runs in recipes
with the mix field `x86` (needs `exe`, whose measure of binary data it shares).

Evidence comes from the stream: a call (E8) or jump (E9) whose 32-bit displacement is near
(its top byte 00 or FF) and lands where an earlier one landed, twice within SEEN_SPAN bytes;
functions are called from many places, and random data repeats a 25-bit target by chance
once in millions of bytes, text never (its bytes are never 00 or FF). It stays live
SEEN_SPAN bytes after the last evidence while no model that knows the data's structure
speaks for it, nor the word model of exe.py, also over the strings and tables between
code (keeping to exe.py's measure of binary data there, as the word model does, measured
3.9 % worse on the tuning slices: the instruction contexts and the transform do better in
an executable's data than the text contexts). While not live it changes nothing: text and
other data code exactly as without it.

While live, near calls and jumps (E8, E9) are coded with their target in place of their
displacement (`calls_before_byte`, the idea of xz's x86 BCJ filter applied inside the
model), and so are x86-64's RIP-relative operands ([rip + disp32], counted from the
instruction's end) and, in i386 position-independent code, the `add REG, imm32` after
`call __x86.get_pc_thunk.REG` (`adds_to_the_pc`: the GOT's address, counted from the
call's end): calls of one function and uses of one global look alike wherever they are,
so the match model and the contexts learn them. Conditional jumps (0F 80-8F) keep
their displacement: they stay inside their function, and copies of a function (inlined or
specialised code) then match byte for byte (by target: 0.2 % worse on the x86 tuning
slices, 1 % on the duplicated code of a brotli module). The transform is a bijection of the near
displacements for each place, so the decoder turns it back once the four bytes are in.

Whether 0x40-0x4F are REX prefixes (x86-64) or one-byte instructions (i386) is measured
from the stream (`mode_event`): x86-64 code puts REX.W before most moves and arithmetic.
Everything is integer. On the executables corpus's tuning slices (x86-64 and i386 ELF,
Mach-O, PE; 7 x 128 KB) it takes the default level from 3.34 to 2.71 bpb, in steps: the
contexts to 3.03, calls by target to 2.87, RIP-relative operands to 2.83, the word kind's
slot to 2.82, live without exe.py's control-byte condition to 2.71, the place's last bytes
(in four of the slots; a displacement's by its ModRM, an immediate's by its opcode) to 2.67,
i386's GOT adds by the GOT's address to 2.66, the bytes two to five back read as an
instruction's start, in place of the last two bytes with the last at the place, to 2.63
(the same bytes unread: 2.65; five to two bytes and seven to four both: 2.63), the last
byte after bytes three and two read as prefixes, in place of ModRM with the same place of
the last instruction with this opcode, to 2.628 (i386 -0.2 %), the last two opcodes with
their ModRMs' mod and reg, in place of the opcode before and the field's bytes so far, to
2.624 (i386 -0.2 %; the last three: 2.625, their whole ModRMs: 2.626).
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import exe, follow
from rwkvzip.cm.history import byte_back, hash32
from rwkvzip.ops.jit import jit

# --- The opcode maps: for each opcode, whether a ModRM byte follows and the immediate's kind.
HAS_MODRM = 1
IMM_SHIFT = 1  # the immediate's kind, in bits 1-3:
IMM_NONE, IMM_8, IMM_16, IMM_Z, IMM_ENTER, IMM_V, IMM_ADDR, IMM_GROUP3 = range(8)
# IMM_Z: 4 bytes (2 with a 66 prefix); IMM_ENTER: 3; IMM_V: 4, 8 with REX.W (2 with 66);
# IMM_ADDR: an address, 8 bytes in x86-64 (4 in i386); IMM_GROUP3: F6/F7's test has an
# immediate (1 byte for F6, IMM_Z for F7) when ModRM's reg field is 0 or 1
IS_PREFIX = 16
IS_REX = 32  # 0x40-0x4F in x86-64
IS_VEX = 64  # C4, C5 (VEX) and 62 (EVEX) in x86-64: payload bytes, then an opcode


def _one_byte_map() -> np.ndarray:
    m = np.zeros(256, dtype=np.int64)

    def put(codes, modrm=False, imm=IMM_NONE, flags=0):
        for c in codes:
            m[c] = int(modrm) | (imm << IMM_SHIFT) | flags

    for row in range(0, 0x40, 8):  # add, or, adc, sbb, and, sub, xor, cmp
        put(range(row, row + 4), modrm=True)
        put([row + 4], imm=IMM_8)
        put([row + 5], imm=IMM_Z)
    put([0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65, 0x66, 0x67, 0xF0, 0xF2, 0xF3], flags=IS_PREFIX)
    put(range(0x40, 0x50), flags=IS_REX)
    put([0x62, 0x63, *range(0x84, 0x90), 0xC4, 0xC5, *range(0xD0, 0xD4), *range(0xD8, 0xE0),
         0xFE, 0xFF], modrm=True)
    put([0x62, 0xC4, 0xC5], modrm=True, flags=IS_VEX)
    put([0x68, 0xA9, *range(0xE8, 0xEA)], imm=IMM_Z)
    put([0x6A, *range(0x70, 0x80), 0xA8, *range(0xB0, 0xB8), 0xCD, *range(0xD4, 0xD6),
         *range(0xE0, 0xE8), 0xEB], imm=IMM_8)
    put([0x69, 0x81, 0xC7], modrm=True, imm=IMM_Z)
    put([0x6B, 0x80, 0x82, 0x83, 0xC0, 0xC1, 0xC6], modrm=True, imm=IMM_8)
    put([0xA0, 0xA1, 0xA2, 0xA3], imm=IMM_ADDR)
    put(range(0xB8, 0xC0), imm=IMM_V)
    put([0xC2, 0xCA], imm=IMM_16)
    put([0xC8], imm=IMM_ENTER)
    put([0xF6, 0xF7], modrm=True, imm=IMM_GROUP3)
    return m


def _two_byte_map() -> np.ndarray:
    """0F xx (and VEX/EVEX map 1)."""
    m = np.full(256, HAS_MODRM, dtype=np.int64)  # most two-byte opcodes have ModRM
    none = [0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0E, *range(0x30, 0x38),
            0x39, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F, 0x77, 0xA0, 0xA1, 0xA2, 0xA8, 0xA9, 0xAA,
            *range(0xC8, 0xD0)]
    m[none] = 0
    m[[0x0F, 0x3A, 0x70, 0x71, 0x72, 0x73, 0xA4, 0xAC, 0xBA, 0xC2, 0xC4, 0xC5, 0xC6]] = (
        HAS_MODRM | (IMM_8 << IMM_SHIFT))
    m[0x80:0x90] = IMM_Z << IMM_SHIFT  # jcc rel32
    return m


ONE_BYTE = _one_byte_map()
TWO_BYTE = _two_byte_map()
MAP_0F38, MAP_0F3A = 2, 3  # three-byte maps: ModRM always; 0F 3A has an 8-bit immediate

# --- The length decoder's state: what the next byte is.
(ST_OP, ST_OP2, ST_OP3, ST_VEX, ST_MODRM, ST_SIB, ST_DISP, ST_IMM) = range(8)
# prefixes seen (a bit each)
P_66, P_67, P_F2, P_F3, P_REX, P_REX_W, P_SEG, P_LOCK = (1 << i for i in range(8))
MAX_PREFIXES = 8  # more prefixes in a row than this are data: start over
OP_BITS = 10  # an opcode as a number: its map (0-3) << 8 | its byte
N_LAST = 1 << OP_BITS  # the position of each opcode's last instruction

# fields of context.STATE: on (mix field x86), the selector for the next byte (-1: not
# live), where the last evidence was (-1: none), how many in a row, where the word the calls'
# transform marked starts (-1: none), the measure of x86-64 code; the length decoder: stage,
# bytes left in the field, the opcode, its map (VEX payloads), prefixes, ModRM (-1: none),
# the immediate's bytes to come, where the opcode byte and the current field are, the last
# four opcodes (OP_BITS each), where the last instruction with this opcode was (its opcode
# byte, -1: none), the last two instructions' ModRMs (modrm_class each, the last in the low
# byte); the call targets seen (a hash table of targets + 1)
(S_X86_ON, S_X86_SEL, S_X86_SEEN, S_X86_HITS, S_X86_CALL_AT, S_X86_CALL_END, S_X86_MODE,
 S_X86_STAGE, S_X86_LEFT, S_X86_OP, S_X86_MAP, S_X86_PFX, S_X86_NPFX, S_X86_MODRM, S_X86_IMM,
 S_X86_OP_AT, S_X86_FIELD_AT, S_X86_OPS, S_X86_SAME, S_X86_MODRMS) = cx.STATE.offsets(*(
    f"x86.{name}" for name in ("on", "sel", "seen", "hits", "call_at", "call_end", "mode",
                               "stage",
                               "left", "op", "map", "pfx", "npfx", "modrm", "imm", "op_at",
                               "field_at", "ops", "same", "modrms")))
S_X86_LAST = cx.STATE.offset("x86.last")
S_X86_PLACE = cx.STATE.offset("x86.place")
S_X86_PLACE_BYTES = cx.STATE.offset("x86.place_bytes")
S_X86_TARGETS = cx.STATE.offset("x86.targets")
TARGET_BITS = 12
assert cx.STATE.length("x86.last") == N_LAST
N_PLACES = 1 << 12  # a place (place_of): 7 bits of field and REX.W, 5 of ModRM or opcode
assert cx.STATE.length("x86.place_bytes") == N_PLACES
assert cx.STATE.length("x86.targets") == 1 << TARGET_BITS

SEEN_SPAN = 65536  # live this long after the last evidence ...
LIVE_HITS = 2  # ... once this many calls in a row landed on a known target
NEAR_BITS = 25  # a near displacement: top byte 00 or FF, i.e. a signed 25-bit number
NEAR_MASK = (1 << NEAR_BITS) - 1
NEAR_SIGN = 0xFE000000  # bits 31 ... 25: copies of bit 24
MODE_SHIFT = 8  # the x86-64 measure moves 1/256 of the way at each instruction ...
MODE_ONE = 1 << 12  # ... toward MODE_ONE << MODE_SHIFT on a REX.W pair (below)
MODE_64_AT = (MODE_ONE << MODE_SHIFT) // 50  # x86-64 from one REX.W pair in 50 instructions


def _rex_w_followers() -> np.ndarray:
    """Opcodes x86-64 code puts after REX.W (48/4C/49/4D) most: moves, lea, arithmetic, test,
    shifts, movsxd; in i386 code a dec before them is rare."""
    t = np.zeros(256, dtype=np.int64)
    t[[0x01, 0x03, 0x09, 0x0B, 0x21, 0x23, 0x29, 0x2B, 0x31, 0x33, 0x39, 0x3B, 0x63, 0x81,
       0x83, 0x85, 0x89, 0x8B, 0x8D, 0xC1, 0xC7, 0xD1, 0xD3, 0xF7]] = 1
    return t


REX_W_FOLLOWERS = _rex_w_followers()


def start_state(S: np.ndarray, on: bool) -> None:
    """The model's fields of a new stream's state: not live, no evidence, x86-64 assumed."""
    S[S_X86_ON] = int(on)
    S[S_X86_SEL] = S[S_X86_SEEN] = S[S_X86_CALL_AT] = S[S_X86_MODRM] = S[S_X86_SAME] = -1
    S[S_X86_MODE] = MODE_64_AT * 2
    S[S_X86_STAGE] = ST_OP
    S[S_X86_LAST:S_X86_LAST + N_LAST] = -1


@jit(inline="always")
def is_64(S):
    return S[S_X86_MODE] >= MODE_64_AT


@jit(inline="always")
def modrm_class(modrm):
    """An instruction's ModRM as its mod and reg fields (rm: the address's register, changes
    most), and 1 for a ModRM (0: none)."""
    return (modrm & 0xF8) | 1 if modrm >= 0 else 0


@jit
def start_instruction(S, n):
    """The next byte (at n) starts an instruction; the one that ends here joins the last
    instructions' ModRMs."""
    S[S_X86_MODRMS] = ((S[S_X86_MODRMS] << 8) | modrm_class(S[S_X86_MODRM])) & 0xFFFF
    S[S_X86_STAGE] = ST_OP
    S[S_X86_PFX] = 0
    S[S_X86_NPFX] = 0
    S[S_X86_MAP] = 0
    S[S_X86_MODRM] = -1
    S[S_X86_IMM] = 0
    S[S_X86_FIELD_AT] = n


@jit
def immediate_bytes(S, kind, reg):
    """Bytes of the immediate of this kind, given the prefixes (and ModRM's reg field for
    IMM_GROUP3)."""
    pfx = S[S_X86_PFX]
    if kind == IMM_8:
        return 1
    if kind == IMM_16:
        return 2
    if kind == IMM_ENTER:
        return 3
    if kind == IMM_Z:
        return 2 if pfx & P_66 else 4
    if kind == IMM_V:
        if pfx & P_REX_W:
            return 8
        return 2 if pfx & P_66 else 4
    if kind == IMM_ADDR:
        return 8 if is_64(S) else 4
    if kind == IMM_GROUP3:
        if reg > 1:
            return 0
        return 1 if (S[S_X86_OP] & 0xFF) == 0xF6 else (2 if pfx & P_66 else 4)
    return 0


@jit
def format_of(op_map, c):
    if op_map == 0:
        return ONE_BYTE[c]
    if op_map == 1:
        return TWO_BYTE[c]
    if op_map == MAP_0F3A:
        return HAS_MODRM | (IMM_8 << IMM_SHIFT)
    return HAS_MODRM


@jit
def after_fields(S, n):
    """ModRM and SIB are read: the displacement, the immediate or the next instruction."""
    if S[S_X86_LEFT] > 0:
        S[S_X86_STAGE] = ST_DISP
    else:
        after_displacement(S, n)


@jit
def after_displacement(S, n):
    if S[S_X86_IMM] > 0:
        S[S_X86_STAGE] = ST_IMM
        S[S_X86_LEFT] = S[S_X86_IMM]
        S[S_X86_FIELD_AT] = n
    else:
        start_instruction(S, n)


@jit
def read_opcode(S, op_map, c, n):
    """The opcode byte c (of map op_map) was at n - 1."""
    op = (op_map << 8) | c
    S[S_X86_OP] = op
    S[S_X86_OP_AT] = n - 1
    S[S_X86_OPS] = ((S[S_X86_OPS] << OP_BITS) | op) & ((1 << (4 * OP_BITS)) - 1)
    S[S_X86_SAME] = S[S_X86_LAST + op]
    S[S_X86_LAST + op] = n - 1
    f = format_of(op_map, c)
    kind = (f >> IMM_SHIFT) & 7
    S[S_X86_FIELD_AT] = n
    if f & HAS_MODRM:
        S[S_X86_IMM] = kind  # the kind until ModRM's reg field is known
        S[S_X86_STAGE] = ST_MODRM
        return
    S[S_X86_IMM] = immediate_bytes(S, kind, 0)
    after_displacement(S, n)


@jit
def mode_event(S, c, hist):
    """At an opcode c: follow the measure of x86-64 code (a REX.W pair is an event)."""
    pair = ((hist >> 8) & 0xFA) == 0x48 and REX_W_FOLLOWERS[c] != 0
    S[S_X86_MODE] += np.int64(pair) * MODE_ONE - (S[S_X86_MODE] >> MODE_SHIFT)


@jit
def read_byte(S, c, hist, n):
    """The length decoder takes byte c (at n - 1): the stage the next byte is in."""
    stage = S[S_X86_STAGE]
    if stage == ST_OP:
        f = ONE_BYTE[c]
        mode64 = is_64(S)
        if f & IS_PREFIX or (f & IS_REX and mode64):
            S[S_X86_NPFX] += 1
            if S[S_X86_NPFX] > MAX_PREFIXES:
                start_instruction(S, n)
                return
            if f & IS_REX:
                S[S_X86_PFX] |= P_REX | (P_REX_W if c & 8 else 0)
            elif c == 0x66:
                S[S_X86_PFX] |= P_66
            elif c == 0x67:
                S[S_X86_PFX] |= P_67
            elif c == 0xF2:
                S[S_X86_PFX] |= P_F2
            elif c == 0xF3:
                S[S_X86_PFX] |= P_F3
            elif c == 0xF0:
                S[S_X86_PFX] |= P_LOCK
            else:
                S[S_X86_PFX] |= P_SEG
            S[S_X86_FIELD_AT] = n
            return
        mode_event(S, c, hist)
        if c == 0x0F:
            S[S_X86_STAGE] = ST_OP2
            S[S_X86_FIELD_AT] = n
            return
        if f & IS_VEX and mode64:
            S[S_X86_STAGE] = ST_VEX
            S[S_X86_MAP] = 1
            S[S_X86_LEFT] = 1 if c == 0xC5 else (2 if c == 0xC4 else 3)
            S[S_X86_OP] = c  # which payload, until the opcode
            S[S_X86_FIELD_AT] = n
            return
        read_opcode(S, 0, c, n)
    elif stage == ST_OP2:
        if c == 0x38 or c == 0x3A:
            S[S_X86_STAGE] = ST_OP3
            S[S_X86_MAP] = MAP_0F38 if c == 0x38 else MAP_0F3A
            S[S_X86_FIELD_AT] = n
            return
        read_opcode(S, 1, c, n)
    elif stage == ST_OP3:
        read_opcode(S, S[S_X86_MAP], c, n)
    elif stage == ST_VEX:
        kind = S[S_X86_OP]
        first = n - 1 == S[S_X86_FIELD_AT]
        if first and kind == 0xC4:
            S[S_X86_MAP] = min(c & 0x1F, MAP_0F3A)
        elif first and kind == 0x62:
            S[S_X86_MAP] = min(c & 3, MAP_0F3A)
        elif kind != 0xC5 and n - 1 == S[S_X86_FIELD_AT] + 1 and c & 0x80:  # W
            S[S_X86_PFX] |= P_REX_W
        S[S_X86_LEFT] -= 1
        if S[S_X86_LEFT] == 0:
            S[S_X86_STAGE] = ST_OP3
    elif stage == ST_MODRM:
        S[S_X86_MODRM] = c
        mod, reg, rm = c >> 6, (c >> 3) & 7, c & 7
        S[S_X86_IMM] = immediate_bytes(S, S[S_X86_IMM], reg)
        S[S_X86_FIELD_AT] = n
        if mod != 3 and rm == 4:
            S[S_X86_STAGE] = ST_SIB
            return
        S[S_X86_LEFT] = 1 if mod == 1 else (4 if mod == 2 or (mod == 0 and rm == 5) else 0)
        after_fields(S, n)
    elif stage == ST_SIB:
        mod = S[S_X86_MODRM] >> 6
        S[S_X86_LEFT] = 1 if mod == 1 else (4 if mod == 2 or (mod == 0 and (c & 7) == 5) else 0)
        S[S_X86_FIELD_AT] = n
        after_fields(S, n)
    else:  # ST_DISP, ST_IMM
        S[S_X86_LEFT] -= 1
        if S[S_X86_LEFT] > 0:
            return
        if stage == ST_DISP:
            after_displacement(S, n)
        else:
            start_instruction(S, n)


@jit(inline="always")
def is_branch(op):
    """call and jmp rel32 (E8, E9), jcc rel32 (0F 80-8F)."""
    return op == 0xE8 or op == 0xE9 or (op >> 4) == 0x18


@jit(inline="always")
def is_call_or_jump(op):
    """call and jmp rel32 (E8, E9): the branches the transform codes by target."""
    return op == 0xE8 or op == 0xE9


@jit(inline="always")
def near_value(v):
    """Whether a 32-bit displacement is near (a signed 25-bit number)."""
    top = v >> 24
    return top == 0 or top == 0xFF


@jit(inline="always")
def to_near(v):
    v &= NEAR_MASK
    return v | NEAR_SIGN if v >> (NEAR_BITS - 1) else v


@jit
def follow_evidence(S, hist, n):
    """After byte n - 1: a near call or jump just ended; whether its target (the
    displacement from n, or the transformed target itself) landed on a known one."""
    if S[S_X86_STAGE] != ST_OP or S[S_X86_OP_AT] != n - 5 or not is_branch(S[S_X86_OP]):
        return
    v = ((hist & 0xFF) << 24) | ((hist & 0xFF00) << 8) | ((hist >> 8) & 0xFF00) | (
        (hist >> 24) & 0xFF)
    if not near_value(v):
        return
    target = v if S[S_X86_CALL_AT] == n - 4 else to_near(v + n)
    follow.target_hit(S, S_X86_TARGETS, TARGET_BITS, target, n, S_X86_SEEN, S_X86_HITS,
                      SEEN_SPAN, LIVE_HITS)


@jit
def is_live(S):
    if (S[S_X86_HITS] < LIVE_HITS or S[S_X86_SEEN] < 0
            or S[cx.S_POS] - S[S_X86_SEEN] > SEEN_SPAN):
        return False
    return S[exe.S_EXE_SEL] < 0 and not exe.structure_known(S)


@jit
def field_place(S, n):
    """The next byte's stage and its place in its field (0 ... 7), as one number."""
    return S[S_X86_STAGE] * 8 + min(n - S[S_X86_FIELD_AT], 7)


@jit
def place_of(S, n):
    """The next byte's place for its history of bytes: the field and the byte in it, with
    REX.W (64-bit operands); in a displacement also ModRM's mod and rm (locals, arguments
    and globals are addressed apart), in an immediate its opcode (hashed to 8 classes)."""
    place = field_place(S, n) | (64 if S[S_X86_PFX] & P_REX_W else 0)
    stage = S[S_X86_STAGE]
    if stage == ST_DISP:
        modrm = S[S_X86_MODRM]
        place |= (1 + (modrm & 7) + 8 * (modrm >> 6)) << 7
    elif stage == ST_IMM:
        place |= (1 + (hash32(S[S_X86_OP]) >> 29)) << 7
    return place & (N_PLACES - 1)


@jit
def place_update(S, c):
    """Byte c was coded at the place S[S_X86_PLACE]: it joins that place's last bytes."""
    at = S_X86_PLACE_BYTES + S[S_X86_PLACE]
    S[at] = ((S[at] << 8) | c) & 0xFFFF


@jit
def same_byte(S, HB, hmask, n):
    """The byte at this offset from the opcode in the last instruction with the same
    opcode (256: none, or out of the history)."""
    at = S[S_X86_SAME]
    if at < 0 or S[S_X86_STAGE] <= ST_VEX:
        return 256
    d = n - S[S_X86_OP_AT]
    if d > 15 or n - at > hmask:
        return 256
    return np.int64(HB[(at + d) & hmask])


@jit(inline="always")
def prefix_class(b):
    """A byte read as a prefix: 0F (two-byte opcodes), 66 (16-bit operands), 67 (32-bit
    addresses) or none; paq8px's ExeModel reads the bytes before an opcode so."""
    return 1 if b == 0x0F else (2 if b == 0x66 else (3 if b == 0x67 else 0))


@jit(inline="always")
def prefix_pair(hist, k):
    """Bytes k and k - 1 back read as prefixes (prefix_class), as one number (0 ... 15)."""
    return prefix_class(byte_back(hist, k)) * 4 + prefix_class(byte_back(hist, k - 1))


@jit
def next_contexts(S, HB):
    """After exe.next_contexts: follow the instructions and, while live, set the
    instruction contexts for the next byte in the text and syntax kinds' slots, and the
    selector."""
    if S[S_X86_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]
    place_update(S, hist & 0xFF)
    read_byte(S, hist & 0xFF, hist, n)
    follow_evidence(S, hist, n)
    S[S_X86_PLACE] = place_of(S, n)
    if not is_live(S):
        S[S_X86_SEL] = -1
        return
    stage = S[S_X86_STAGE]
    place = S[S_X86_PLACE] & 63  # field_place, as place_of set it
    op = S[S_X86_OP]  # before an opcode: the last instruction's
    ops = S[S_X86_OPS]
    pfx = S[S_X86_PFX]
    modrm = S[S_X86_MODRM] + 1
    part = hist & ((1 << (8 * min(n - S[S_X86_FIELD_AT], 3))) - 1)  # the field's bytes so far
    hmask = (1 << S[cx.S_HBITS]) - 1
    same = same_byte(S, HB, hmask, n)
    at_place = S[S_X86_PLACE_BYTES + S[S_X86_PLACE]]  # the last two bytes at this place
    if stage <= ST_VEX:
        S[S_X86_SEL] = stage * 32 + (hash32(ops & 0xFFFFF) >> 27)
    else:
        S[S_X86_SEL] = stage * 32 + (hash32(op * 8 + min(n - S[S_X86_FIELD_AT], 7)) >> 27)
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if not follow.takes_slot(k):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0x7F4A7C15), place), op)
        if k == cx.KIND_WORD_BIGRAM:  # the field, the opcode, prefixes, ModRM, bytes so far
            h = cx.mixh(cx.mixh(h, pfx * 512 + modrm), part)
        elif k == cx.KIND_WORD_TRIGRAM:  # prefixes, ModRM; the last two opcodes and ModRMs
            h = cx.mixh(cx.mixh(cx.mixh(h, pfx * 512 + modrm),
                                ops & ((1 << (2 * OP_BITS)) - 1)), S[S_X86_MODRMS])
        elif k == cx.KIND_WORD_SKIP:  # the last two bytes at this place
            h = cx.mixh(h, at_place)
        elif k == cx.KIND_COLUMN:  # the same place in the last instruction with this opcode
            h = cx.mixh(cx.mixh(h, same), n - S[S_X86_OP_AT] if stage > ST_VEX else 0)
        elif k == cx.KIND_SHEET_FIELD:  # the last four opcodes
            h = cx.mixh(h, ops)
        elif k == cx.KIND_SHEET_COL:  # the last byte, and the last at this place
            h = cx.mixh(cx.mixh(h, pfx), (hist & 0xFF) | (at_place & 0xFF) << 8)
        elif k == cx.KIND_SHEET_ABOVE:  # bytes 3 and 2 back as prefixes, the last byte
            h = cx.mixh(cx.mixh(h, prefix_pair(hist, 3)), hist & 0xFF)
        elif k == cx.WORD_ORDER:  # ModRM, the last two opcodes, the last byte at this place
            h = cx.mixh(cx.mixh(cx.mixh(h, modrm), ops & ((1 << (2 * OP_BITS)) - 1)),
                        at_place & 0xFF)
        else:  # bytes 5 ... 2 back read as an instruction's start (not the last byte)
            h = cx.mixh(cx.mixh(h, prefix_pair(hist, 5)),
                        byte_back(hist, 3) << 8 | (byte_back(hist, 2) & 0xC7))
        S[cx.S_CTX + m] = h


# --- The calls' transform.
@jit
def adds_to_the_pc(S, at):
    """Whether the immediate at `at` is i386 position-independent code's `add REG, imm32`
    (81 /0 on a register, or 05 on eax) right after a call: `call __x86.get_pc_thunk.REG`
    puts the call's end in REG, and the immediate, the GOT's address minus that end,
    differs in every function while the GOT's address does not."""
    if is_64(S) or (S[S_X86_OPS] >> OP_BITS) & (N_LAST - 1) != 0xE8:
        return False
    op = S[S_X86_OP]
    if op == 0x05:
        return S[S_X86_OP_AT] == at - 1
    return op == 0x81 and S[S_X86_OP_AT] == at - 2 and S[S_X86_MODRM] & 0xF8 == 0xC0


@jit
def calls_before_byte(S, data, t, encoding):
    """Before byte t of the block is coded: at the displacement of a near call or jump, of
    a RIP-relative operand or of i386's GOT add (adds_to_the_pc), while the model is live,
    with its four bytes in the block, mark it; the encoder puts the target (from the
    instruction's end; for the add, from the call's) in its place."""
    if S[S_X86_ON] == 0 or S[S_X86_SEL] < 0 or t + 4 > data.shape[0]:
        return
    at = S[cx.S_POS]
    if S[S_X86_LEFT] != 4 or S[S_X86_FIELD_AT] != at:
        return
    stage = S[S_X86_STAGE]
    if stage == ST_IMM and is_call_or_jump(S[S_X86_OP]) and S[S_X86_OP_AT] == at - 1:
        S[S_X86_CALL_END] = at + 4
    elif stage == ST_DISP and S[S_X86_MODRM] & 0xC7 == 5 and is_64(S):  # [rip + disp32]
        S[S_X86_CALL_END] = at + 4 + S[S_X86_IMM]
    elif stage == ST_IMM and adds_to_the_pc(S, at):  # i386's GOT, from the call's end
        S[S_X86_CALL_END] = S[S_X86_OP_AT]
    else:
        return
    S[S_X86_CALL_AT] = at
    if encoding:
        v = exe.block_le(data, t)
        if near_value(v):
            exe.put_block_le(data, t, to_near(v + S[S_X86_CALL_END]))


@jit
def calls_after_byte(S, data, t, decoding):
    """After byte t of the block: the marked displacement's last byte is in; the decoder
    turns a target back into the displacement."""
    at = S[S_X86_CALL_AT]
    if at < 0 or S[cx.S_POS] != at + 4:
        return
    S[S_X86_CALL_AT] = -1
    if decoding:
        v = exe.block_le(data, t - 3)
        if near_value(v):
            exe.put_block_le(data, t - 3, to_near(v - S[S_X86_CALL_END]))
