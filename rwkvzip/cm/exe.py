"""The executable model: contexts for binary data made of aligned 32-bit big-endian words.

Machine code of a fixed-width instruction set (SPARC, MIPS, PowerPC: one instruction is one
aligned word) and the tables around it in an executable (ELF's symbol, relocation and debug
tables: records of 32-bit fields) are words. A byte there depends on its place in the word
and on the word's bytes before it (an instruction's opcode fields come first), and on the
word before (the instruction before, the field before): contexts that count back a fixed
number of bytes mix those up, since they do not know where a word starts.

The model runs in recipes with the mix field `exe`. Words are found by evidence in the
stream: two of SPARC's signature words (`is_signature`) at one phase mod 4 within
SIGNATURE_GAP bytes, or a big-endian ELF header; words then start at that phase. It is live
for SEEN_SPAN bytes after the last evidence while the data looks binary: more than one byte
in LIVE_CONTROL of the recent ones (an average over about 32 bytes) is a control byte
(history.text_class 0), which text in any encoding does not have (an executable's strings
and debug strings are left to the text models); and while no other model that knows the
data's structure speaks for it (a spreadsheet record chain followed, sheet.py; a 1-bit image
of long rows, image.py). While it is not live it changes nothing: text, and binary data
without the evidence (x86 code, little-endian tables, bytecode: the word contexts made them
0.3-4.8 % worse), code exactly as without it. While it is live, slots whose contexts mean
little in binary words carry word contexts instead (no slot is added, so text pays nothing):

* KIND_WORD4's (pos mod 4 and a(4)) and KIND_INDIRECT's: the next byte's place j in its
  word and the word's bytes so far;
* the text kinds' (words and lines mean nothing here): KIND_WORD_BIGRAM's j, the bytes so far
  and the previous word's opcode fields (`fields`); KIND_WORD_TRIGRAM's the same and that
  word's destination register (bits 29-25); the others' (the skip, the line above, the
  column) j, the bytes so far and the previous word's top 16 bits;
* with the syntax model (syntax.py), whose slots words leave idle: KIND_SHEET_FIELD's j,
  the bytes so far and the opcode fields of the two words before; KIND_SHEET_COL's j, the
  bytes so far and the byte at place j of the word before; KIND_SHEET_ABOVE's j, the bytes
  so far and the top 16 bits of the word two before;
* the second mixer's weight set and the second APM's row are chosen by j and the fields
  read so far (`next_selector`) instead of by the last byte.

The opcode fields are SPARC's, the instruction set the corpus has (sum): op (bits 31-30),
then op2 (24-22) for format 2 or op3 (24-19) for formats 3; a call (op 1) is one field. On
sum the model takes mix-v25 from 1.798 to 1.706 bpb (models/README.md). Everything is integer.

Two additions, each a mix field: exe_words gives two more idle slots word contexts (kind
22's: the word before with the fields of the two before it; kind 24's: the byte one record
back, where the record model found records of whole words), and exe_calls codes a call in
code with its target in place of its displacement (`calls_before_byte`, below), so calls of
one function look alike wherever they are. On sum at -7 they take mix-v46 from 7,446 to
7,353 bytes (ideal code length; models/README.md).

With the mix field exe_le the model also reads little-endian words, the fixed-width ISAs of
today's machines: AArch64 and POWER little-endian, found by their own signature words
(`le_signature`: function prologues and epilogues, ret and nop; the ISA is the one whose
signature it was). Their words are read little-endian, a word's class is its top byte (the
last in the stream: AArch64's op0 and the bits that split it, POWER's primary opcode), and
with exe_calls AArch64's near bl and POWER's bl take their target and AArch64's adrp its
target page (loads of one global from anywhere look alike). They are live without the
control-byte condition (the words' contexts do better than the text contexts in the strings
between code). On the executables corpus's tuning slices they take AArch64 from 3.32 to 3.07
bpb and POWER from 2.71 to 2.61 at the default level, POWER's bl by target to 2.40 and its
TOC pairs by the TOC to 2.37.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import image, jvm, pyc, sheet, syntax, wasm
from rwkvzip.cm.history import hash32, text_class
from rwkvzip.ops.jit import jit

# fields of context.STATE: on (the recipe's mix field exe), the average of
# control bytes (fixed point), the selector for the next byte (-1: not live), where words
# start (mod 4) and where the last evidence of them ended (-1: none yet), and the current run
# of signature words: its phase, where its last one ended, how many; the mix fields
# exe_calls and exe_words (0 or 1), and where the word the calls' transform marked starts
# (-1: none)
(S_EXE_ON, S_EXE_CONTROL, S_EXE_SEL, S_EXE_PHASE, S_EXE_SEEN, S_EXE_RUN_PHASE, S_EXE_RUN_END,
 S_EXE_RUN, S_EXE_CALLS, S_EXE_WORDS, S_EXE_CALL_AT) = cx.STATE.offsets(*(
    f"exe.{name}" for name in ("on", "control", "sel", "phase", "seen", "run_phase", "run_end",
                               "run", "calls", "words", "call_at")))
# the mix field exe_le, which words the evidence found (ISA_*, below), the run of
# little-endian signature words (as the run above), the marked word's ISA
(S_EXE_LE, S_EXE_ISA, S_EXE_LE_RUN_PHASE, S_EXE_LE_RUN_END, S_EXE_LE_RUN,
 S_EXE_CALL_ISA) = cx.STATE.offsets(*(
    f"exe.{name}" for name in ("le", "isa", "le_run_phase", "le_run_end", "le_run", "call_isa")))
# where the POWER TOC pair the transform marked starts (-1: none); where the last control
# byte was coded (its position + 1; 0: none yet)
S_EXE_TOC_AT, S_EXE_LAST_CONTROL = cx.STATE.offsets("exe.toc_at", "exe.last_control")
# SPARC's big-endian words; little-endian words: AArch64's, POWER's (classes from the top
# byte alike; calls and pages by target in AArch64 alone)
ISA_BE, ISA_AARCH64, ISA_POWER_LE = 0, 1, 2


def start_state(S: np.ndarray, on: bool, calls: bool, words: bool, le: bool = False) -> None:
    """The model's fields of a new stream's state: not live, no words seen (the mix fields
    exe, exe_calls, exe_words and exe_le)."""
    S[S_EXE_ON] = int(on)
    S[S_EXE_SEL] = S[S_EXE_SEEN] = S[S_EXE_CALL_AT] = S[S_EXE_TOC_AT] = -1
    S[S_EXE_CALLS] = int(calls)
    S[S_EXE_WORDS] = int(words)
    S[S_EXE_LE] = int(le)


CONTROL_SHIFT = 5  # the average moves 1/32 of the way to each byte (~32 bytes' memory)
CONTROL_ONE = 1 << 16  # a control byte's weight (fixed point)
LIVE_CONTROL = 6  # live from one control byte in 6 (the average's steady state is 32x it)
LIVE_AT = (CONTROL_ONE << CONTROL_SHIFT) // LIVE_CONTROL
IMAGE_ROW_MIN = 128  # a 1-bit image with rows at least this long takes precedence
SIGNATURE_GAP = 4096  # two signature words at one phase at most this far apart are evidence
SEEN_SPAN = 65536  # the model stays live this long after the last evidence
BINARY_SPAN = 4096  # the data is binary within this many bytes of a control byte: the match
# model recovers there (mix field match_recover; context.recover_match), the counters
# adapt by their own limit outside a known grid of cells (mix field binary_count_limit;
# cells_known: a spreadsheet's cells keep the slower counters), and a stretch of text
# inside a binary (an executable's strings) keeps both
ELF_MAGIC = 0x7F454C46  # an ELF header's first four bytes; its sixth is 2 for big-endian
SEL_FIELD_BITS = 6  # the selector: j in its top 2 bits, the fields read so far (hashed) below


@jit
def fields(w):
    """A SPARC instruction word's opcode fields as one number below 256: a call (op 1) 64,
    format 2 (op 0) 128 + op2, formats 3 (op 2, 3) op << 6 | op3."""
    op = w >> 30
    if op == 1:
        return 64
    if op == 0:
        return 128 + ((w >> 22) & 7)
    return (op << 6) | ((w >> 19) & 63)


@jit
def word_before(HB, hmask, start):
    """The whole word that ends at `start` (0 before the stream's first word)."""
    if start < 4:
        return 0
    w = 0
    for i in range(start - 4, start):
        w = (w << 8) | np.int64(HB[i & hmask])
    return w


@jit
def is_signature(w):
    """SPARC's ret, retl, restore and save %sp, -x, %sp: the words every function's epilogue
    and prologue have, and no other data by chance at one phase twice in a few KB."""
    return (w == 0x81C7E008 or w == 0x81C3E008 or w == 0x81E80000
            or (w & 0xFFFFE000) == 0x9DE3A000)


@jit
def follow_evidence(S, hist, n):
    """After byte n - 1: a big-endian ELF header's identification, or a second signature word
    at one phase within SIGNATURE_GAP, is evidence that aligned words follow."""
    if ((hist >> 16) & 0xFFFFFFFF) == ELF_MAGIC and (hist & 0xFF) == 2:
        S[S_EXE_SEEN] = n
        S[S_EXE_PHASE] = (n - 6) & 3
        S[S_EXE_ISA] = ISA_BE
    isa = le_signature(swap32(hist & 0xFFFFFFFF)) if S[S_EXE_LE] != 0 and n >= 4 else 0
    if isa != 0 and follow_run(S, S_EXE_LE_RUN, S_EXE_LE_RUN_PHASE, S_EXE_LE_RUN_END, n):
        S[S_EXE_ISA] = isa
    if n < 4 or not is_signature(hist & 0xFFFFFFFF):
        return
    if follow_run(S, S_EXE_RUN, S_EXE_RUN_PHASE, S_EXE_RUN_END, n):
        S[S_EXE_ISA] = ISA_BE


@jit
def follow_run(S, run, run_phase, run_end, n):
    """A signature word ended at n: a second one at its phase within SIGNATURE_GAP of the
    last is evidence (True) that words start there."""
    if S[run] > 0 and S[run_phase] == n & 3 and n - S[run_end] <= SIGNATURE_GAP:
        S[run] += 1
    else:
        S[run] = 1
        S[run_phase] = n & 3
    S[run_end] = n
    if S[run] < 2:
        return False
    S[S_EXE_SEEN] = n
    S[S_EXE_PHASE] = n & 3
    return True


@jit
def le_signature(w):
    """Which little-endian ISA's signature word w is (0: none): words every function has,
    and no other data by chance at one phase twice in a few KB. ISA_AARCH64: ret, nop,
    paciasp, autiasp, bti c, stp x29, x30, [sp, #-n]! and ldp x29, x30, [sp], #n (the frame
    record) and mov x29, sp; ISA_POWER_LE: blr, mflr r0 and mtlr r0."""
    if (w == 0xD65F03C0 or w == 0xD503201F or w == 0xD503233F or w == 0xD50323BF
            or w == 0xD503245F or (w & 0xFFC07FFF) == 0xA9807BFD
            or (w & 0xFFC07FFF) == 0xA8C07BFD or w == 0x910003FD):
        return ISA_AARCH64
    if w == 0x4E800020 or w == 0x7C0802A6 or w == 0x7C0803A6:
        return ISA_POWER_LE
    return 0


@jit(inline="always")
def swap32(w):
    """A 32-bit word read in the other byte order."""
    return (((w & 0xFF) << 24) | ((w & 0xFF00) << 8) | ((w >> 8) & 0xFF00)
            | ((w >> 24) & 0xFF))


@jit(inline="always")
def le_fields(w):
    """A little-endian ISA's word's class: its top byte (AArch64's op0 and the bits that
    split it: branches, loads and stores, data processing; POWER's primary opcode)."""
    return w >> 24


@jit
def cells_known(S):
    """Whether the data is cells of a known grid: a spreadsheet record chain followed
    (sheet.py) or a 1-bit image of long rows (image.py)."""
    return sheet.following(S) or (image.live(S) and S[image.S_IMG_R] >= IMAGE_ROW_MIN)


@jit
def structure_known(S):
    """Whether a model that knows the data's structure speaks for it: cells_known, or a
    class file (jvm.py), compiled Python module (pyc.py) or WebAssembly code (wasm.py)."""
    return cells_known(S) or jvm.following(S) or pyc.following(S) or wasm.following(S)


@jit
def is_live(S):
    if S[S_EXE_SEEN] < 0 or S[cx.S_POS] - S[S_EXE_SEEN] > SEEN_SPAN:
        return False
    if S[S_EXE_CONTROL] < LIVE_AT and S[S_EXE_ISA] == ISA_BE:  # little-endian words: no
        return False  # need (0.4 % better without it on the tuning slices)
    return not structure_known(S)


@jit
def next_selector(j, hist):
    """The second mixer's weight set (and the second APM's row) for byte j of a word: at a
    word's start the previous word's fields, then the bits of the word read so far that
    hold its fields (op and rd; op3 and rs1 with them)."""
    if j == 0:
        x = fields(hist & 0xFFFFFFFF)
    elif j == 1:
        return (1 << SEL_FIELD_BITS) | ((hist & 0xFF) >> 2)
    elif j == 2:
        x = (hist & 0xFFFF) >> 3
    else:
        x = (hist & 0xFFFFFF) >> 13
    return (j << SEL_FIELD_BITS) | (hash32(x + j * 7919) >> (32 - SEL_FIELD_BITS))


@jit
def next_le_selector(j, hist, before):
    """next_selector for little-endian words, whose class comes last: the previous word's
    class, and at the last byte the bits read so far next to it (AArch64's bits 23-16)."""
    x = le_fields(before)
    if j == 3:
        x = (x << 8) | (hist & 0xFF)
    return (j << SEL_FIELD_BITS) | (hash32(x + j * 7919) >> (32 - SEL_FIELD_BITS))


@jit
def next_contexts(S, HB):
    """After sheet.next_contexts: follow the control bytes and, while live, set the word
    contexts for the next byte (in KIND_WORD4's and the text kinds' slots) and the selector."""
    if S[S_EXE_ON] == 0:
        return
    hist = S[cx.S_HIST]
    n = S[cx.S_POS]  # the next byte's position
    control = text_class(hist & 0xFF) == 0
    S[S_EXE_CONTROL] += np.int64(control) * CONTROL_ONE - (S[S_EXE_CONTROL] >> CONTROL_SHIFT)
    if control:
        S[S_EXE_LAST_CONTROL] = n
    S[cx.S_BINARY] = int(S[S_EXE_LAST_CONTROL] > 0 and n - S[S_EXE_LAST_CONTROL] <= BINARY_SPAN)
    fast = S[cx.S_BINARY] != 0 and S[cx.S_LIMIT_BIN] > 0 and not cells_known(S)
    S[cx.S_LIMIT_NOW] = S[cx.S_LIMIT_BIN] if fast else S[cx.S_LIMIT]
    follow_evidence(S, hist, n)
    if not is_live(S):
        S[S_EXE_SEL] = -1
        return
    j = (n - S[S_EXE_PHASE]) & 3
    part = (hist & ((1 << (8 * j)) - 1)) | (1 << (8 * j))  # the word's bytes so far
    hmask = (1 << S[cx.S_HBITS]) - 1
    before = word_before(HB, hmask, n - j)
    before2 = word_before(HB, hmask, n - j - 4)
    le = S[S_EXE_ISA] != ISA_BE
    if le:
        before, before2 = swap32(before), swap32(before2)
        S[S_EXE_SEL] = next_le_selector(j, hist, before)
        f1, f2, rd = le_fields(before), le_fields(before2), before & 31
    else:
        S[S_EXE_SEL] = next_selector(j, hist)
        f1, f2, rd = fields(before), fields(before2), (before >> 25) & 31
    syntax_slots = S[syntax.S_SY_ON] != 0
    words = S[S_EXE_WORDS] != 0
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        word4 = k == cx.KIND_WORD4 or k == cx.KIND_INDIRECT  # noqa: SIM109 - numba: ints
        if (not word4 and not cx.is_text_kind(k)
                and not (syntax_slots and syntax.is_syntax_kind(k))):
            continue
        h = cx.mixh(cx.mixh(hash32(k * 0x2545F491 + 0x3C6EF372), j), part)
        if k == cx.KIND_WORD_BIGRAM:
            h = cx.mixh(h, f1)
        elif k == cx.KIND_WORD_TRIGRAM:
            h = cx.mixh(h, rd | (f1 << 5))
        elif k == cx.KIND_SHEET_FIELD:
            h = cx.mixh(h, f1 | (f2 << 8))
        elif k == cx.KIND_SHEET_COL:
            h = cx.mixh(h, (before >> (24 - 8 * j)) & 0xFF)
        elif k == cx.KIND_SHEET_ABOVE:
            h = cx.mixh(h, before2 >> 16)
        elif words and k == cx.KIND_WORD_SKIP:
            before3 = word_before(HB, hmask, n - j - 8)
            f3 = le_fields(swap32(before3)) if le else fields(before3)
            h = cx.mixh(cx.mixh(h, before >> 16), f2 | (f3 << 8))
        elif words and k == cx.KIND_COLUMN:
            h = cx.mixh(cx.mixh(h, S[cx.S_REC]), record_above(S, HB, hmask, n, j))
        elif not word4:
            h = cx.mixh(h, before >> 16)
        S[cx.S_CTX + m] = h


@jit
def record_above(S, HB, hmask, n, j):
    """The byte at place j of the word one record back, where the record model (context.py,
    S_REC) has found records of whole words (256: it has not)."""
    r = S[cx.S_REC]
    if r < 8 or r % 4 != 0 or n < r:
        return 256
    return np.int64(HB[(n - r) & hmask])


# The calls' transform (mix field exe_calls): SPARC's call is op 1 and a 30-bit word
# displacement from the call itself, so calls of one function from different places differ
# in every byte. While the model is live and within SIGNATURE_GAP of the last signature word
# (in code: the tables after it have words of that form too, e.g. a debug record's type
# 0x40), a call with a near displacement (|d| < 2**22 words, the only kind real code has; the
# top ten bits are 0x100 or 0x1FF) is coded with the target in place of the displacement,
# (word index + d) mod 2**23 sign-extended the same way: a bijection of those words for each
# place, so the decoder turns it back once the word's four bytes are in. Every model sees
# the targets, which repeat (the match model finds calling sequences again, the word
# contexts learn the functions called).
NEAR_FORWARD, NEAR_BACKWARD = 0x100, 0x1FF  # a near call's top ten bits
CALL_FIELD = (1 << 23) - 1
CALL_SIGN_BITS = 0x3F800000  # bits 29 ... 23: copies of the field's sign bit 22
CALL_OP = 0x40000000


@jit(inline="always")
def is_near(w, forward, backward):
    """Whether a call word's top ten bits are those of a near one (forward or backward)."""
    top = w >> 22
    return top == forward or top == backward  # noqa: SIM109 - numba: ints


@jit(inline="always")
def near_word(field, op, sign_bits):
    """A near call's word: its opcode bits, the 23-bit field, and the field's sign bit
    copied into the bits between (sign_bits)."""
    field &= CALL_FIELD
    return op | field | (sign_bits if field >> 22 else 0)


@jit(inline="always")
def is_near_call(w):
    return is_near(w, NEAR_FORWARD, NEAR_BACKWARD)


@jit(inline="always")
def call_word(field):
    """A near call's word with the 23-bit field (its sign bit copied into bits 29 ... 23)."""
    return near_word(field, CALL_OP, CALL_SIGN_BITS)


@jit(inline="always")
def call_target(w, at):
    """The near call word w at stream position `at` with its target in place of its
    displacement."""
    return call_word((at >> 2) + (w & CALL_FIELD))


@jit(inline="always")
def call_displacement(w, at):
    """call_target's inverse."""
    return call_word((w & CALL_FIELD) - (at >> 2))


@jit(inline="always")
def block_word(data, t):
    return ((np.int64(data[t]) << 24) | (np.int64(data[t + 1]) << 16)
            | (np.int64(data[t + 2]) << 8) | np.int64(data[t + 3]))


@jit(inline="always")
def put_block_word(data, t, w):
    for i in range(4):
        data[t + i] = np.uint8((w >> (24 - 8 * i)) & 0xFF)


# AArch64's bl is 100101 and a 26-bit word displacement: near ones (|d| < 2**22 words, the
# top ten bits 0x250 or 0x25F) take their target the same way, with exe_le
BL_NEAR_FORWARD, BL_NEAR_BACKWARD = 0x250, 0x25F
BL_SIGN_BITS = 0x03800000  # bits 25 ... 23: copies of the field's sign bit 22
BL_OP = 0x94000000


@jit(inline="always")
def is_near_bl(w):
    return is_near(w, BL_NEAR_FORWARD, BL_NEAR_BACKWARD)


@jit(inline="always")
def bl_word(field):
    return near_word(field, BL_OP, BL_SIGN_BITS)


# AArch64's adrp (bit 31 set, bits 28-24 10000) holds a 21-bit page displacement, immlo in
# bits 30-29 and immhi in bits 23-5: every adrp takes its target page, (the word's page +
# displacement) mod 2**21, so loads of one global from anywhere look alike
ADRP_MASK, ADRP_OP = 0x9F000000, 0x90000000
PAGE_FIELD = (1 << 21) - 1


@jit(inline="always")
def is_adrp(w):
    return (w & ADRP_MASK) == ADRP_OP


@jit(inline="always")
def adrp_word(w, page):
    """The adrp word w with its page displacement moved by `page` (mod 2**21)."""
    imm = (((w >> 5) & 0x7FFFF) << 2) | ((w >> 29) & 3)
    imm = (imm + page) & PAGE_FIELD
    return (w & 0x9F00001F) | ((imm & 3) << 29) | ((imm >> 2) << 5)


# POWER's bl is primary opcode 18 with AA 0 and LK 1 and a 24-bit word displacement
# (bits 25-2): every bl takes its target, (word index + displacement) mod 2**24, a bijection
# of the field for each place (POWER's calls are `bl f; nop` even across the whole program)
POWER_BL_MASK, POWER_BL = 0xFC000003, 0x48000001
POWER_FIELD = (1 << 24) - 1


@jit(inline="always")
def is_power_bl(w):
    return (w & POWER_BL_MASK) == POWER_BL


@jit(inline="always")
def power_bl_word(w, words):
    """The bl word w with its displacement moved by `words` (mod 2**24)."""
    return POWER_BL | ((((w >> 2) + words) & POWER_FIELD) << 2)


# A POWER (ELFv2) function's global entry sets its TOC pointer from its own address:
# addis r2, r12, ha; addi r2, r2, lo, with ha:lo = TOC - entry. The pair takes the TOC itself
# (entry + ha:lo, mod 2**32, split back into ha and lo), the same in every function.
TOC_ADDIS, TOC_ADDI, TOC_MASK = 0x3C4C0000, 0x38420000, 0xFFFF0000


@jit(inline="always")
def is_toc_pair(w1, w2):
    return (w1 & TOC_MASK) == TOC_ADDIS and (w2 & TOC_MASK) == TOC_ADDI


@jit(inline="always")
def toc_pair(w1, w2, shift):
    """The TOC pair w1, w2 with its value ha * 65536 + lo (lo signed) moved by `shift`."""
    lo = w2 & 0xFFFF
    v = (((w1 & 0xFFFF) << 16) + (lo - 0x10000 if lo & 0x8000 else lo) + shift) & 0xFFFFFFFF
    return (w1 & TOC_MASK) | (((v + 0x8000) >> 16) & 0xFFFF), (w2 & TOC_MASK) | (v & 0xFFFF)


@jit(inline="always")
def block_le(data, t):
    """The little-endian 32-bit word at data[t]."""
    return (np.int64(data[t]) | (np.int64(data[t + 1]) << 8) | (np.int64(data[t + 2]) << 16)
            | (np.int64(data[t + 3]) << 24))


@jit(inline="always")
def put_block_le(data, t, v):
    for i in range(4):
        data[t + i] = np.uint8((v >> (8 * i)) & 0xFF)


@jit
def calls_before_byte(S, data, t, encoding):
    """Before byte t of the block is coded: at the start of a word while the model is live in
    code, with the word's four bytes in the block (the codec hands every side the same
    blocks), mark the word; the encoder puts a near call's target in place (in data). In
    POWER code every word start also marks the 8 bytes from it as a TOC pair, dropped after
    its first word unless that is the pair's addis."""
    at = S[cx.S_POS]
    if S[S_EXE_TOC_AT] >= 0 and at == S[S_EXE_TOC_AT] + 4 and (
            swap32(S[cx.S_HIST] & 0xFFFFFFFF) & TOC_MASK) != TOC_ADDIS:
        S[S_EXE_TOC_AT] = -1
    if S[S_EXE_CALLS] == 0 or S[S_EXE_SEL] < 0 or t + 4 > data.shape[0]:
        return
    isa = S[S_EXE_ISA]
    le = isa != ISA_BE
    if (at - S[S_EXE_PHASE]) & 3 != 0 or at - S[S_EXE_LE_RUN_END if le else S_EXE_RUN_END] > (
            SIGNATURE_GAP):
        return
    S[S_EXE_CALL_AT] = at
    S[S_EXE_CALL_ISA] = isa
    if isa == ISA_POWER_LE and S[S_EXE_TOC_AT] < 0 and t + 8 <= data.shape[0]:
        S[S_EXE_TOC_AT] = at
        w1, w2 = block_le(data, t), block_le(data, t + 4)
        if encoding and is_toc_pair(w1, w2):
            w1, w2 = toc_pair(w1, w2, at)
            put_block_le(data, t, w1)
            put_block_le(data, t + 4, w2)
    if encoding and isa == ISA_POWER_LE:
        w = block_le(data, t)
        if is_power_bl(w):
            put_block_le(data, t, power_bl_word(w, at >> 2))
    elif encoding and le:
        w = block_le(data, t)
        if is_near_bl(w):
            put_block_le(data, t, bl_word((at >> 2) + (w & CALL_FIELD)))
        elif is_adrp(w):
            put_block_le(data, t, adrp_word(w, at >> 12))
    elif encoding:
        w = block_word(data, t)
        if is_near_call(w):
            put_block_word(data, t, call_target(w, at))


@jit
def calls_after_byte(S, data, t, decoding):
    """After byte t of the block: the marked word's last byte is in; the decoder turns a
    target back into the call's displacement, and a marked TOC pair's TOC back into its
    offset."""
    toc = S[S_EXE_TOC_AT]
    if toc >= 0 and S[cx.S_POS] == toc + 8:
        S[S_EXE_TOC_AT] = -1
        w1, w2 = block_le(data, t - 7), block_le(data, t - 3)
        if decoding and is_toc_pair(w1, w2):
            w1, w2 = toc_pair(w1, w2, -toc)
            put_block_le(data, t - 7, w1)
            put_block_le(data, t - 3, w2)
    at = S[S_EXE_CALL_AT]
    if at < 0 or S[cx.S_POS] != at + 4:
        return
    S[S_EXE_CALL_AT] = -1
    if decoding and S[S_EXE_CALL_ISA] == ISA_POWER_LE:
        w = block_le(data, t - 3)
        if is_power_bl(w):
            put_block_le(data, t - 3, power_bl_word(w, -(at >> 2)))
    elif decoding and S[S_EXE_CALL_ISA] == ISA_AARCH64:
        w = block_le(data, t - 3)
        if is_near_bl(w):
            put_block_le(data, t - 3, bl_word((w & CALL_FIELD) - (at >> 2)))
        elif is_adrp(w):
            put_block_le(data, t - 3, adrp_word(w, -(at >> 12)))
    elif decoding:
        w = block_word(data, t - 3)
        if is_near_call(w):
            put_block_word(data, t - 3, call_displacement(w, at))
