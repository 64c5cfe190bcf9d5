"""Count-based context models: order-k, word, sparse and record (2-D) contexts hashed into
bounded tables (and the spreadsheet kinds', which sheet.py sets; exe.py replaces some on
binary words), and a match model for long repeats. Every number here is an integer, so they
are exact everywhere.

The next byte is seen as 8 binary decisions down a tree (heap node 2**d + prefix at depth
d). For every order, a context owns one table slot for the high nibble (15 tree nodes) and
one slot per high-nibble value for the low nibble, so the distribution of all 256 bytes
can be read (the mixer needs every node, the coder every byte). A slot is 16 uint32: a
check word (0 = free) and 15 adaptive counters (22-bit probability, 10-bit count). A
context whose slot holds another check is unknown: its nodes give no evidence.

State lives in one int64 array S (slots below); the tables in one uint32 array CT (the
orders' slots, then the match model's hash table of positions); the history ring in HB.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import runs
from rwkvzip.cm.history import (
    MATCH_MAX,
    extend_match,
    hash32,
    is_word_byte,
    match_bucket,
    next_word,
    verified_length,
    word_context,
)
from rwkvzip.cm.layout import StateLayout
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.jit import jit
from rwkvzip.ops.mathf import sigmoid64
from rwkvzip.ops.prefetch import prefetch

SLOT = 16  # uint32 per table slot: check word + 15 nibble-tree counters
P_BITS = 22  # counter probability bits (the low 10 bits count updates)
P_HALF = 1 << (P_BITS - 1 + 10)  # a fresh counter: p = 1/2, count 0
MATCH_MIN = 6  # bytes hashed to find a match candidate
MATCH_TRIAL = 3  # a recovered match's bytes on trial (mix field match_recover)
WORD_ORDER = 0  # an "order" of 0 in the recipe's list means the word context
COUNT_LIMIT_MAX = 1023
# a slot's check word: 17 bits of check, then (tables of 2 or 4 ways) how often its context
# was learnt in
CHECK_MASK = (1 << 17) - 1
USES_SHIFT = 17
USE = 1 << USES_SHIFT
USES_MAX = 0xFFFFFFFF - USE  # the use count saturates below 2**15

# The context models' state S (int64), every slot by name (layout.py): the core models',
# then each model's own fields (bound to S_* constants in its module: mixer.py, image.py,
# sheet.py, exe.py, delta.py, syntax.py), then the large tables. MixArrays fills it.
MAX_MODELS = 20
SHEET_COLUMNS, SHEET_CELL_BYTES = 256, 16
SSE2_BITS = 10  # the most bits of the order-2 APM's contexts (mix sse2_bits)
STATE = StateLayout("the context models' state S")
# position, history, word hash, match pointer and length, the match's expected byte; the
# settings: models, count limit, history and match hash bits, the tables' bases
# in HB, the ways a context may own (mix ways), the order-2 APM's context bits (mix sse2_bits)
(S_POS, S_HIST, S_WORD, S_PTR, S_LEN, S_EXPECT, S_K, S_LIMIT, S_HBITS, S_MBITS,
 S_MATCH_BASE, S_MCOUNT_BASE, S_WAYS, S_SSE2_BITS) = STATE.add_each(
    "pos", "hist", "word", "ptr", "len", "expect", "models", "count_limit",
    "history_bits", "match_bits", "match_base", "match_count_base", "ways", "sse2_bits")
STATE.add_each(*(f"mixer.{name}" for name in (
    "nin", "net", "w", "a1", "a2", "x", "dot", "pm", "sum", "gm", "sm", "sel", "w2", "wf", "zs",
    "gate", "a3", "a3_row", "w3", "wf3", "zs3", "cnt", "order_sets",
    "filler_sets", "w4", "wf4", "zs4", "w5", "wf5", "zs5")))
# whether the next byte is binary (exe.next_contexts sets it: a control byte within
# exe.BINARY_SPAN; 0 without exe), the counters' count limit there (mix field
# binary_count_limit; 0: count_limit everywhere) and the limit for the next byte's update
# (exe.next_contexts sets it)
S_BINARY, S_LIMIT_BIN, S_LIMIT_NOW = STATE.add_each(
    "binary", "binary_count_limit", "count_limit_now")
# the match model's recovery (mix field match_recover; recover_match): on, the length of the
# match a miss suspended (0: none) and where it would go on, the recovered match's bytes
# left on trial
S_MREC_ON, S_MBAK_LEN, S_MBAK_PTR, S_MTRIAL = STATE.add_each(
    "match.recover", "match.bak_len", "match.bak_ptr", "match.trial")
# the match model's context (mix field match_context; match_context): 1 + the model whose
# slot holds it while the data is binary and a byte is expected (0: off)
S_MCTX_SLOT = STATE.add("match.context_slot")
# the contexts' byte histories (mix field runs; cm/runs.py): the mixer's column of model 0's
# history input (0: off), where in CT the history tables start, where in SM the maps are
S_RUNS_COL, S_RUNS_BASE, S_RUNS_SM = STATE.add_each("runs.col", "runs.base", "runs.sm")
# the longest run, among the models' contexts, that the byte just coded continued or began
# (0: no model had a context; update_models sets it with runs): the fourth mixer's selector
S_RUNS_CODED = STATE.add("runs.coded")
S_ORDERS = STATE.add("orders", MAX_MODELS)  # S[S_ORDERS + o]: model o's kind
S_CTX = STATE.add("ctx", MAX_MODELS)  # S[S_CTX + o]: hash of model o's current context
# S[S_TBASE + o]: model o's first slot in CT; S[S_TBITS + o]: its table holds 2**that slots
S_TBASE = STATE.add("table_base", MAX_MODELS)
S_TBITS = STATE.add("table_bits", MAX_MODELS)
# S[S_SLOTS + 17 * o + j]: model o's slot of nibble j (0: high, 1 + h: low) or -1
S_SLOTS = STATE.add("slots", 17 * MAX_MODELS)
# record-length detection (the record kinds): the length r (0: none yet), then two candidates
# and their votes (vote), whether a record kind or model needs it and whether a vote takes
# one from the rival candidate (mix field rec_stable)
S_REC, S_REC_C1, S_REC_N1, S_REC_C2, S_REC_N2, S_REC_ON, S_REC_STABLE = STATE.add_each(
    "rec", "rec.c1", "rec.n1", "rec.c2", "rec.n2", "rec.on", "rec.stable")
S_CPOS = STATE.add("cpos", ALPHABET)  # S[S_CPOS + c]: 1 + position of the last byte c (0: not seen)
S_CDIST = STATE.add("cdist", ALPHABET)  # S[S_CDIST + c]: distance between the last two bytes c
S_CRUN = STATE.add("crun", ALPHABET)  # S[S_CRUN + c]: how many times in a row it repeated
S_IMAGE_ON = STATE.add_each(*(f"image.{name}" for name in (
    "on", "base", "mx", "r", "u1", "u2", "u3", "u4", "left", "text")))[0]
S_IMAGE_REC = STATE.add("image.rec", 5)  # the image model's own record detector (as rec)
STATE.add_each(*(f"sheet.{name}" for name in (
    "on", "next", "start", "prev", "type", "col", "last_col", "records", "sel", "x_on",
    "x_byte", "x_counter", "x_hits", "x_base")))
for name in ("cells", "cells2", "hits"):  # per column: its last cell's bytes, ...
    STATE.add(f"sheet.{name}", SHEET_COLUMNS * SHEET_CELL_BYTES)
STATE.add("sheet.succ", SHEET_COLUMNS)
# the text kinds' (20 ... 24): the two words before the current one (their hashes, 0: none
# yet) and where the current and the previous line start
S_WORD1, S_WORD2, S_LINE, S_LINE_PREV = STATE.add_each("word1", "word2", "line", "line_prev")
STATE.add_each(*(f"exe.{name}" for name in (
    "on", "control", "sel", "phase", "seen", "run_phase", "run_end", "run", "calls", "words",
    "call_at", "le", "isa", "le_run_phase", "le_run_end", "le_run", "call_isa", "toc_at",
    "last_control")))
# the x86 model's (x86.py): its settings and evidence, the length decoder's state, the last
# instructions' ModRMs, where each opcode's last instruction was, the next byte's place and
# each place's last bytes, the call targets seen
STATE.add_each(*(f"x86.{name}" for name in (
    "on", "sel", "seen", "hits", "call_at", "call_end", "mode", "stage", "left", "op", "map",
    "pfx", "npfx", "modrm", "imm", "op_at", "field_at", "ops", "same", "modrms")))
STATE.add("x86.last", 1 << 10)
STATE.add("x86.place")  # the next byte's place (x86.place_of)
STATE.add("x86.place_bytes", 1 << 12)  # the last two bytes coded at each place
STATE.add("x86.targets", 1 << 12)
# the RISC-V model's (riscv.py): its setting and evidence, the instruction follower's state,
# where the last instruction with each first byte started
STATE.add_each(*(f"rv.{name}" for name in (
    "on", "sel", "seen", "run_parity", "run_end", "run", "start", "len", "prev", "classes",
    "same", "mark_at", "mark_op")))
STATE.add("rv.last", 256)
# the z/Architecture model's (s390x.py): as the RISC-V model's
STATE.add_each(*(f"s390x.{name}" for name in (
    "on", "sel", "seen", "run_parity", "run_end", "run", "start", "len", "ops", "same",
    "mark_at")))
STATE.add("s390x.last", 256)
# the Thumb-2 model's (thumb.py): as the RISC-V model's, with the bl targets seen
STATE.add_each(*(f"thumb.{name}" for name in (
    "on", "sel", "seen", "hits", "start", "len", "class", "classes", "same", "mark_at")))
STATE.add("thumb.last", 1 << 11)
STATE.add("thumb.targets", 1 << 12)
# the class-file model's (jvm.py): its setting, the parser's state, per attribute level,
# per field, per opcode and per constant-pool entry (the first 4096) its fields
STATE.add_each(*(f"jvm.{name}" for name in (
    "on", "sel", "field", "at", "len", "val", "prev", "prev_field", "cp_count", "cp_index",
    "tags", "left", "phase", "level", "attr", "code_at", "code_end", "ops", "wide",
    "sw_stage", "sw_low", "sw_left", "rows", "mark_at", "mark_base")))
STATE.add("jvm.attrs_left", 3)
STATE.add("jvm.attr_end", 3)
STATE.add("jvm.last", 64)
STATE.add("jvm.operands", 256)
STATE.add("jvm.strings", 1 << 12)
# the .pyc model's (pyc.py): its setting, the parser's state, per depth the container, per
# role the last type byte and length
STATE.add_each(*(f"pyc.{name}" for name in (
    "on", "sel", "field", "at", "len", "val", "type", "role", "prev_type", "depth",
    "lt", "lt_first", "lt_prev", "lt_left", "lt_at", "lt_unit", "lt_len", "lt_cols", "op")))
for name in ("kind", "left", "roles", "code_at"):
    STATE.add(f"pyc.{name}", 32)
STATE.add("pyc.last", 32)
STATE.add("pyc.last_len", 32)
STATE.add("pyc.args", 256)
# the WebAssembly model's (wasm.py): its setting, the parser's and the search's state, per
# opcode its last immediate, the announced ends of bodies
STATE.add_each(*(f"wasm.{name}" for name in (
    "on", "sel", "place", "at", "val", "shift", "sec_end", "body_end", "fns", "runs", "op",
    "sub", "ops", "imm", "lebs", "fixed", "prev_imm", "cand", "cand_val", "cand_shift", "seen",
    "hits")))
STATE.add("wasm.last", 512)
STATE.add("wasm.ends", 1 << 12)
STATE.add_each("sparse.on", "sparse.live", "sparse.le", "sparse.follow",  # sparse.py's ...
               "sparse.binary", "sparse.printable", "sparse.nibbles")
STATE.add("sparse.ends", ALPHABET)  # ... and for each byte the two that ended its last runs
STATE.add_each(*(f"steps.{name}" for name in (
    "on", "byte", "counter", "base", "run2", "run4")))  # steps.py's
STATE.add_each(*(f"delta.{name}" for name in (
    "on", "carry", "max", "binary", "select", "apm", "nonzero", "ff", "switch", "step", "limit",
    "base", "t", "live", "above", "peak", "heard", "score", "mx", "col", "nonzero_base")))
STATE.add("delta.row", 4)  # the next byte's histograms' rows, one a delta.INPUTS
STATE.add("delta.last_nonzero", ALPHABET)  # each column's last nonempty byte (delta_nonzero)
STATE.add_each(*(f"syntax.{name}" for name in (
    "on", "path", "token", "length", "nest_on", "depth", "quote")))
# the indirect kind's: on (a recipe with kind 25), then for every two bytes (c2, c1) the
# two bytes that followed their last two occurrences (16 bits, the later one low)
S_IND_ON = STATE.add("indirect.on")
S_IND = STATE.add("indirect", 1 << 16)
# the chart kinds': on (a recipe with kind 26, 27), then for every shape of three bytes
# (chart_shape, 9 bits; chart_fine_shape, 15 bits) the byte that followed it last
S_CHART_ON = STATE.add("chart.on")
S_CHART = STATE.add("chart.follow", 1 << 9)
S_CHART_FINE_ON = STATE.add("chart_fine.on")
S_CHART_FINE = STATE.add("chart_fine.follow", 1 << 15)
# the mixer's blocks of rows built on first use (mixer.ready_rows): 1 once built; a block per
# selector byte for the second and third mixers and the second APM, per set of the fourth
# mixer, per context of the order-2 APM (its contexts: a(1), a(2) hashed to SSE2_BITS bits)
N_S_READY = 4 * ALPHABET + (1 << SSE2_BITS)
S_READY = STATE.add("ready", N_S_READY)
N_S = STATE.size
REC_RUN = 2  # a distance seen this many more times in a row is a record-length candidate ...
REC_RUN_SHORT = 4  # ... (this many for distances below REC_SHORT: text has short ones by chance)
REC_SHORT = 16
REC_VOTES = 16  # ... and a candidate with this many votes becomes the record length
IMAGE_REC_RUN = 1  # the image model's detector: a repeat once is enough, and ...
IMAGE_REC_VOTES = 4  # ... this many votes
REC_MAX = 65535  # longest record length detected (and at most a quarter of the history)

# Context kinds: the codes of MixConfig.orders (CountsConfig.orders has its own, counts.py;
# both are stored in released cards). 1..7: the last k bytes; 0: the current word;
# 8 and up: no bytes (order 0), sparse bytes, the position in a 4-byte word, and the record
# (2-D) structure. a(d) is the byte d back (a(1) the last one), r the detected record
# length (S[S_REC]; while it is 0 every record kind is a single context, like order 0).
MAX_BYTE_ORDER = 7  # kinds 1 ... 7: the last k bytes
KIND_ORDER0 = 8  # nothing: one context for every byte
KIND_SPARSE2 = 9  # a(2)
KIND_SPARSE34 = 10  # a(3), a(4)
KIND_WORD4 = 11  # pos mod 4, a(4): the same byte of the previous 4-byte word
KIND_REC_ABOVE = 12  # r, a(r), a(1): the byte above and the one to the left
KIND_REC_TWO = 13  # r, a(r), a(2r): the two bytes above
KIND_REC_ROW = 14  # r, a(r - 1), a(r), a(r + 1): the row above around this column
KIND_REC_COL = 15  # r, pos mod r, a(r): the column and the byte above
# 16 and up: fields of spreadsheet (BIFF) records, from sheet.py's parser; a context is
# absent (no evidence, nothing learnt) while no record stream is being followed, unless the
# syntax model (syntax.py, mix field syntax) takes the slots of 16, 17 and 18 meanwhile
KIND_SHEET_FIELD = 16  # the record's type and the byte's offset in it, a(1)
KIND_SHEET_COL = 17  # type, offset and the cell's column
KIND_SHEET_ABOVE = 18  # type, offset, column and the same byte of that column's last cell
KIND_SHEET_LEFT = 19  # type, offset, column and the same byte of the record before
# 20 and up: text. The word context (current word and a(1)) with the words before it, the
# line above and the column: wN is the hash of the N-th whole word back (letters as in the
# word context)
KIND_WORD_BIGRAM = 20  # the word context and w1
KIND_WORD_TRIGRAM = 21  # the word context, w1 and w2
KIND_WORD_SKIP = 22  # the word context and w2 (w1 skipped)
KIND_LINE_ABOVE = 23  # the byte at this column of the line above, and a(1)
KIND_COLUMN = 24  # the next byte's column in its line, and a(1) with every word byte one value
# 25: indirect (paq8's indirect model): what followed the last two bytes the last times
KIND_INDIRECT = 25  # a(1) and the two bytes that followed a(2) a(1) the last two times
# 26 and up: binary data only (absent on text, and while sheet.py follows a record chain).
# The byte that followed the last three bytes' shape the last time (paq8px's chart model's
# sparse indirect contexts):
KIND_CHART = 26  # shape: top 3 bits of each byte; with a(2)
KIND_CHART_FINE = 27  # shape: top 5 bits of each byte; with the shape itself
# One context for every byte of binary data (order 0 there): its counters are the bytes'
# order-0 statistics, its byte history (runs) the run of the last byte
KIND_ORDER0_BINARY = 28
MAX_KIND = 28
# The names recipes give the kinds (a card's JSON names them; MixConfig and the kernels hold
# the codes)
KIND_CODES = {"word": 0, **{f"order{k}": k for k in range(1, MAX_BYTE_ORDER + 1)},
              "order0": KIND_ORDER0,
              "sparse2": KIND_SPARSE2, "sparse34": KIND_SPARSE34, "word4": KIND_WORD4,
              "rec_above": KIND_REC_ABOVE, "rec_two": KIND_REC_TWO, "rec_row": KIND_REC_ROW,
              "rec_col": KIND_REC_COL, "sheet_field": KIND_SHEET_FIELD,
              "sheet_col": KIND_SHEET_COL, "sheet_above": KIND_SHEET_ABOVE,
              "sheet_left": KIND_SHEET_LEFT, "word_bigram": KIND_WORD_BIGRAM,
              "word_trigram": KIND_WORD_TRIGRAM, "word_skip": KIND_WORD_SKIP,
              "line_above": KIND_LINE_ABOVE, "column": KIND_COLUMN, "indirect": KIND_INDIRECT,
              "chart": KIND_CHART, "chart_fine": KIND_CHART_FINE,
              "order0_binary": KIND_ORDER0_BINARY}
KIND_NAMES = {code: name for name, code in KIND_CODES.items()}
COLUMN_CAP = 255  # KIND_COLUMN's columns beyond this are one
WORD_BYTE = 256  # KIND_COLUMN's a(1) when it is a word byte (a letter, or >= 128)
ABSENT = -1  # S[S_CTX + o] of a model without a context for the next byte
MATCH_BUCKETS = 32  # match-length buckets of the match model's counters
MATCH_CONTEXT_ORDER = 4  # match_context takes this byte order's slot
MAP_COUNTS = 16  # adaptive maps: cells per update count (capped) ...
MAP_P_BITS = 6  # ... and per probability (its top bits)

# reciprocal table for the counters' adaptive rate: DT[n] = 2**16 / (n + 1.5)
DT = np.array([int(65536 / (n + 1.5)) for n in range(COUNT_LIMIT_MAX + 1)], dtype=np.int64)


@jit
def slot_hash(ctx, j):
    return hash32(ctx + (j + 1) * 0x9E3779B1)


@jit
def slot_address(S, o, j):
    """Where nibble j of model o's context lives: its table index (the first of the group
    of `ways` it may own is that index with the low bits cleared) and the check word."""
    h = slot_hash(S[S_CTX + o], j)
    return S[S_TBASE + o] + (h >> (32 - S[S_TBITS + o])), (h & 0xFFFF) + 1


@jit
def find_slot(CT, S, o, j):
    """Slot index of nibble j of model o's context if that context owns it, else -1."""
    idx, check = slot_address(S, o, j)
    ways = S[S_WAYS]
    if ways < 2:
        return idx * SLOT if np.int64(CT[idx * SLOT]) == check else -1
    for i in range(ways):
        b = (idx ^ i) * SLOT
        if np.int64(CT[b]) & CHECK_MASK == check:
            return b
    return -1


@jit
def prefetch_slots(CT, S, groups):
    """Start loading the first `groups` slot groups that node_inputs will read for the next
    byte (the network's forward runs meanwhile, so the table reads mostly hit the cache):
    all 17, or with path coding the high nibble's alone (of the low nibble's 16 it reads
    one; loading them all measured slower)."""
    ways = max(S[S_WAYS], 1)
    for o in range(S[S_K]):
        if S[S_CTX + o] == ABSENT:
            continue
        for j in range(groups):
            idx, _ = slot_address(S, o, j)
            first = (idx & ~(ways - 1)) * SLOT
            for i in range(ways):
                prefetch(CT, first + i * SLOT)


@jit
def claim_slot(CT, S, o, j):
    """The slot for nibble j of model o's context, taken over (reset) if another held it.
    With W ways (mix field ways), the context may own any slot of its aligned group of W;
    a new context takes the one used least (the use count in the check word's high bits,
    the first on a tie). Halving the others' counts at each take (ageing) measured no
    better."""
    idx, check = slot_address(S, o, j)
    ways = S[S_WAYS]
    if ways < 2:
        base = idx * SLOT
        if np.int64(CT[base]) != check:
            reset_slot(CT, base, check)
        return base
    take = -1
    least = np.int64(1) << 40
    for i in range(ways):
        b = (idx ^ i) * SLOT
        v = np.int64(CT[b])
        if v & CHECK_MASK == check:
            if v < USES_MAX:
                CT[b] = np.uint32(v + USE)
            return b
        if v >> USES_SHIFT < least:
            least = v >> USES_SHIFT
            take = b
    reset_slot(CT, take, check)
    return take


@jit
def reset_slot(CT, base, check):
    CT[base] = np.uint32(check)
    for i in range(1, SLOT):
        CT[base + i] = np.uint32(P_HALF)


@jit
def update_counter(CT, i, bit, limit):
    v = np.int64(CT[i])
    n = v & 1023
    p = v >> 10
    p += (((bit << P_BITS) - p) * DT[n]) >> 16
    if n < limit:
        n += 1
    CT[i] = np.uint32((p << 10) | n)


@jit
def counter_p12(CT, i):
    """The counter's probability of a 1 as a 12-bit index (for the stretch table)."""
    return np.int64(CT[i]) >> 20


@jit(inline="always")
def history_address(S, o):
    """Where model o's context's history lives in CT (its table follows runs.SHRINK bits of
    the slot table's size) and its check."""
    h = runs.history_hash(S[S_CTX + o])
    bits = S[S_TBITS + o] - runs.SHRINK
    return S[S_RUNS_BASE] + (S[S_TBASE + o] >> runs.SHRINK) + (h >> (32 - bits)), h & 0xFF


@jit(inline="always")
def byte_history(CT, S, o):
    """Model o's context's byte history (0: none, or the entry is another context's)."""
    if S[S_CTX + o] == ABSENT:
        return 0
    at, check = history_address(S, o)
    v = np.int64(CT[at])
    return v & 0xFFFFFF if v >> 24 == check else 0


@jit(inline="always")
def history_input(S, SM, o, h, node, d):
    """Model o's history input at a node: its map cell's logit, 0 off the history's bytes."""
    c = runs.cell(h, node, d)
    return SM[S[S_RUNS_SM] + o * runs.CELLS + c] if c >= 0 else 0.0


@jit
def history_inputs(CT, S, SM, X, o):
    """X[node, S_RUNS_COL + o] for every node: nonzero on the paths of the history's two
    bytes only."""
    c = S[S_RUNS_COL] + o
    for m in range(1, ALPHABET):
        X[m, c] = 0.0
    h = byte_history(CT, S, o)
    if h == 0:
        return
    for b in (h & 0xFF, (h >> 8) & 0xFF):
        node = 1
        for d in range(8):
            X[node, c] = history_input(S, SM, o, h, node, d)
            node = 2 * node + ((b >> (7 - d)) & 1)


@jit
def learn_history(CT, S, SM, o, symbol, rate):
    """Model o's history map learns the coded byte's bits where it gave an input, and the
    history takes the byte; returns its run now."""
    h = byte_history(CT, S, o)
    at = S[S_RUNS_SM] + o * runs.CELLS
    node = 1
    for d in range(8):
        bit = (symbol >> (7 - d)) & 1
        c = runs.cell(h, node, d)
        if c >= 0:
            SM[at + c] += rate * (bit - sigmoid64(SM[at + c]))
        node = 2 * node + bit
    where, check = history_address(S, o)
    h = runs.after(h, symbol)
    CT[where] = np.uint32((check << 24) | h)
    return h >> 16


@jit
def map_index(CT, i, o):
    """Cell of model o's adaptive map for counter i: its update count and probability."""
    v = np.int64(CT[i])
    count = min(v & 1023, MAP_COUNTS - 1)
    return ((o * MAP_COUNTS + count) << MAP_P_BITS) + (v >> (32 - MAP_P_BITS))


@jit
def node_inputs(CT, S, ST, SM, X, col):
    """For every tree node: X[node, col + o] = stretch of model o's counter, and
    X[node, col + K + o] = its adaptive map's value for that counter's count and probability
    (which learns how far counters seen n times can be trusted). Unknown contexts give 0.
    With runs, each model's byte history too (history_inputs)."""
    K = S[S_K]
    for o in range(K):
        c = col + o
        if S[S_RUNS_COL]:
            history_inputs(CT, S, SM, X, o)
        if S[S_CTX + o] == ABSENT:
            for j in range(17):
                S[S_SLOTS + 17 * o + j] = -1
            for m in range(1, ALPHABET):
                X[m, c] = 0.0
                X[m, c + K] = 0.0
            continue
        base = find_slot(CT, S, o, 0)
        S[S_SLOTS + 17 * o] = base
        for m in range(1, 16):
            if base >= 0:
                X[m, c] = ST[counter_p12(CT, base + m)]
                X[m, c + K] = SM[map_index(CT, base + m, o)]
            else:
                X[m, c] = 0.0
                X[m, c + K] = 0.0
        for hi in range(16):
            b = find_slot(CT, S, o, 1 + hi)
            S[S_SLOTS + 17 * o + 1 + hi] = b
            for e in range(4):
                for r in range(1 << e):
                    node = (1 << (4 + e)) + (hi << e) + r
                    if b >= 0:
                        i = b + (1 << e) + r
                        X[node, c] = ST[counter_p12(CT, i)]
                        X[node, c + K] = SM[map_index(CT, i, o)]
                    else:
                        X[node, c] = 0.0
                        X[node, c + K] = 0.0


@jit
def find_group_slots(CT, S, j):
    """Path coding (mix field path_coding): the slot of nibble group j of every model's
    context, as node_inputs finds it (-1: unknown or absent), read when the coded path
    enters the group."""
    for o in range(S[S_K]):
        S[S_SLOTS + 17 * o + j] = -1 if S[S_CTX + o] == ABSENT else find_slot(CT, S, o, j)


@jit(inline="always")
def node_counter(node, d):
    """Which of its slot's 15 counters a tree node of depth d reads (nodes 1..15: the high
    nibble's slot; 16..255: the low nibble's slot of the high nibble on their path)."""
    if d < 4:
        return node
    e = d - 4
    return (1 << e) + (node & ((1 << e) - 1))


@jit
def node_inputs_at(CT, S, ST, SM, X, col, node, d, j):
    """node_inputs for one node of depth d, from the slots of its group j
    (find_group_slots)."""
    K = S[S_K]
    m = node_counter(node, d)
    for o in range(K):
        if S[S_RUNS_COL]:
            X[node, S[S_RUNS_COL] + o] = history_input(S, SM, o, byte_history(CT, S, o), node, d)
        b = S[S_SLOTS + 17 * o + j]
        if b >= 0:
            X[node, col + o] = ST[counter_p12(CT, b + m)]
            X[node, col + K + o] = SM[map_index(CT, b + m, o)]
        else:
            X[node, col + o] = 0.0
            X[node, col + K + o] = 0.0


@jit(inline="always")
def expected_byte_input(CT, ST, e, i, node, d):
    """expected_byte_inputs' value at one node of depth d."""
    if e < 0 or (node ^ ((e | ALPHABET) >> (8 - d))) != 0:
        return 0.0
    st = ST[counter_p12(CT, i)]
    return st if (e >> (7 - d)) & 1 else -st


@jit
def match_input(CT, S, ST, node, d):
    """match_inputs' value at one node of depth d."""
    e = S[S_EXPECT]
    i = match_counter(S) if e >= 0 else 0
    return expected_byte_input(CT, ST, e, i, node, d)


@jit(inline="always")
def match_counter(S):
    """The match model's counter: by the match's length; a suspended match's next byte
    (bucket 1) and a recovered match's bytes on trial (2 ... 1 + MATCH_TRIAL) have their own.
    No match is shorter than MATCH_MIN, so those buckets are free."""
    if S[S_LEN] == 0:
        return S[S_MCOUNT_BASE] + 1
    if S[S_MTRIAL] > 0:
        return S[S_MCOUNT_BASE] + 1 + S[S_MTRIAL]
    return S[S_MCOUNT_BASE] + match_bucket(S[S_LEN], MATCH_BUCKETS)


@jit
def recover_match(S, symbol):
    """extend_match with paq8px's recovery, for data where one byte differs in a long repeat
    (a table's changed entry, an instruction's other address): a miss suspends the match,
    whose next byte is still expected; if it comes, the match goes on at its old length,
    its next MATCH_TRIAL bytes on trial (their own counters). If not, the match ends."""
    length = S[S_LEN]
    if length > 0:
        if S[S_EXPECT] == symbol:
            S[S_PTR] += 1
            S[S_LEN] = min(length + 1, MATCH_MAX)
            S[S_MTRIAL] = max(S[S_MTRIAL] - 1, 0)
        else:
            S[S_MTRIAL] = 0
            S[S_MBAK_LEN] = length
            S[S_MBAK_PTR] = S[S_PTR] + 1
            S[S_LEN] = 0
    elif S[S_MBAK_LEN] > 0:
        if S[S_EXPECT] == symbol:
            S[S_LEN] = S[S_MBAK_LEN]
            S[S_PTR] = S[S_MBAK_PTR] + 1
            S[S_MTRIAL] = MATCH_TRIAL
        S[S_MBAK_LEN] = 0


@jit
def update_models(CT, S, SM, symbol, map_rate):
    """Learn the coded byte in every model's counters (claiming their slots) and maps, and
    with runs its byte history (and S_RUNS_CODED)."""
    K = S[S_K]
    limit = S[S_LIMIT_NOW]
    hi = symbol >> 4
    longest = 0
    for o in range(K):
        if S[S_CTX + o] == ABSENT:
            continue
        if S[S_RUNS_COL]:
            longest = max(longest, learn_history(CT, S, SM, o, symbol, map_rate))
        for half in range(2):
            j = 0 if half == 0 else 1 + hi
            known = S[S_SLOTS + 17 * o + j] >= 0
            base = claim_slot(CT, S, o, j)
            nib = hi if half == 0 else symbol & 15
            m = 1
            for k in range(3, -1, -1):
                bit = (nib >> k) & 1
                if known:
                    cell = map_index(CT, base + m, o)
                    SM[cell] += map_rate * (bit - sigmoid64(SM[cell]))
                update_counter(CT, base + m, bit, limit)
                m = 2 * m + bit
    S[S_RUNS_CODED] = longest


@jit
def back(HB, pos, hmask, d):
    """a(d): the byte d positions back (d = 1: the last byte)."""
    return np.int64(HB[(pos - d) & hmask])


@jit
def record_update(S, pos, symbol, hmask):
    """Record-length detection (paq8's record model): when byte `symbol` comes back at the
    same distance as its last REC_RUN times (REC_RUN_SHORT times for a short distance),
    that distance votes for the record length; the length follows a candidate with
    REC_VOTES votes. With the image model on, a quicker second detector (IMAGE_REC_*) votes
    with every nonzero byte: a bitmap's rows show few repeated bytes before its content."""
    last = S[S_CPOS + symbol]
    S[S_CPOS + symbol] = pos + 1
    if last == 0:
        return
    d = pos + 1 - last
    if d == S[S_CDIST + symbol]:
        S[S_CRUN + symbol] += 1
    else:
        S[S_CDIST + symbol] = d
        S[S_CRUN + symbol] = 0
        return
    if d < 2 or d > REC_MAX or 4 * d > hmask:
        return
    run = S[S_CRUN + symbol]
    if run >= (REC_RUN_SHORT if d < REC_SHORT else REC_RUN):
        if S[S_REC_STABLE]:
            take_vote(S, S_REC, d)
        vote(S, S_REC, d, REC_VOTES)
    if (S[S_IMAGE_ON] != 0 and symbol != 0
            and run >= (REC_RUN_SHORT if d < REC_SHORT else IMAGE_REC_RUN)):
        vote(S, S_IMAGE_REC, d, IMAGE_REC_VOTES)


@jit(inline="always")
def take_vote(S, R, d):
    """With rec_stable, before d votes: a vote for one candidate takes one from the other,
    so a rival length must gather votes faster than the one followed, not only as many over
    any time (a table of 3-byte records whose counter wraps every 768 bytes switched to 768
    and back)."""
    if d == S[R + 1]:
        S[R + 4] = max(S[R + 4] - 1, 0)
    elif d == S[R + 3]:
        S[R + 2] = max(S[R + 2] - 1, 0)


@jit
def vote(S, R, d, votes):
    """Distance d votes in the detector whose slots start at R: its length S[R], then two
    candidates and their votes (S[R + 1 ... R + 4])."""
    if d == S[R + 1]:
        S[R + 2] += 1
    elif d == S[R + 3]:
        S[R + 4] += 1
    elif S[R + 2] > S[R + 4]:
        S[R + 3] = d
        S[R + 4] = 1
    else:
        S[R + 1] = d
        S[R + 2] = 1
    if S[R + 2] >= votes and S[R] != S[R + 1]:
        S[R] = S[R + 1]
        S[R + 2] = 0
        S[R + 4] = 0
    if S[R + 4] >= votes and S[R] != S[R + 3]:
        S[R] = S[R + 3]
        S[R + 2] = 0
        S[R + 4] = 0


@jit(inline="always")
def is_sheet_kind(k):
    """Kinds 16 ... 19: set by sheet.next_contexts, absent while no record chain is followed
    (but see syntax.py)."""
    return KIND_SHEET_FIELD <= k <= KIND_SHEET_LEFT


@jit(inline="always")
def is_text_kind(k):
    """Kinds 20 ... 24: words and lines (absent while sheet.py follows a record chain)."""
    return KIND_WORD_BIGRAM <= k <= KIND_COLUMN


@jit
def is_binary_kind(k):
    """Kinds 26 ... 28: binary data only (absent while sheet.py follows a record chain)."""
    return KIND_CHART <= k <= KIND_ORDER0_BINARY


@jit
def mixh(h, x):
    return hash32(h * 0x01000193 + x + 1)


@jit
def kind_hash(S, HB, k, pos, hmask):
    """Context hash of a kind >= 8 (see the KIND_ constants) after `pos` bytes."""
    h = hash32(k * 0x2545F491 + 0x6A09E667)
    if k == KIND_ORDER0:
        return h
    if k == KIND_SPARSE2:
        return mixh(h, back(HB, pos, hmask, 2))
    if k == KIND_SPARSE34:
        return mixh(mixh(h, back(HB, pos, hmask, 3)), back(HB, pos, hmask, 4))
    if k == KIND_WORD4:
        return mixh(mixh(h, pos & 3), back(HB, pos, hmask, 4))
    if k == KIND_INDIRECT:
        last2 = S[S_HIST] & 0xFFFF
        return mixh(mixh(h, last2 & 0xFF), S[S_IND + last2])
    if KIND_WORD_BIGRAM <= k <= KIND_WORD_SKIP:
        h = mixh(h, word_context(S[S_WORD], back(HB, pos, hmask, 1)))
        if k != KIND_WORD_SKIP:
            h = mixh(h, S[S_WORD1])
        if k != KIND_WORD_BIGRAM:
            h = mixh(h, S[S_WORD2])
        return h
    if k == KIND_LINE_ABOVE:
        return mixh(mixh(h, line_above(S, HB, pos, hmask)), back(HB, pos, hmask, 1))
    if k == KIND_COLUMN:
        return mixh(mixh(h, column(S, pos)), column_last(back(HB, pos, hmask, 1)))
    r = S[S_REC]
    if r == 0:  # no record length detected yet: one context
        return h
    h = mixh(h, r)
    above = back(HB, pos, hmask, r)
    if k == KIND_REC_ABOVE:
        return mixh(mixh(h, above), back(HB, pos, hmask, 1))
    if k == KIND_REC_TWO:
        return mixh(mixh(h, above), back(HB, pos, hmask, 2 * r))
    if k == KIND_REC_ROW:
        return mixh(mixh(mixh(h, above), back(HB, pos, hmask, r - 1)),
                    back(HB, pos, hmask, r + 1))
    return mixh(mixh(h, pos % r), above)  # KIND_REC_COL


@jit(inline="always")
def column(S, pos):
    """The next byte's column: bytes since the last LF (capped at COLUMN_CAP). Where text is
    wrapped at a width, this tells a line's last word from the others."""
    return min(pos - S[S_LINE], COLUMN_CAP)


@jit(inline="always")
def column_last(a1):
    """KIND_COLUMN's view of a(1): a word byte is WORD_BYTE (inside a word the column matters
    little), any other byte itself."""
    return WORD_BYTE if is_word_byte(a1) else a1


@jit
def line_above(S, HB, pos, hmask):
    """The byte at the next byte's column in the line above (256: that line is shorter, or
    there is none, or it has left the history)."""
    src = S[S_LINE_PREV] + pos - S[S_LINE]
    if src >= S[S_LINE] or pos - src > hmask:
        return 256
    return back(HB, pos, hmask, pos - src)


@jit
def next_text(S, pos, symbol, word):
    """Keep the words before the current one and the lines' starts (byte at `pos` coded)."""
    if word == 0 and S[S_WORD] != 0:  # a word just ended
        S[S_WORD2] = S[S_WORD1]
        S[S_WORD1] = S[S_WORD]
    if symbol == 10:
        S[S_LINE_PREV] = S[S_LINE]
        S[S_LINE] = pos + 1


@jit
def next_contexts(S, HB, byte):
    """Append the byte to the history and recompute every model's context hash."""
    symbol = np.int64(byte)
    hmask = (1 << S[S_HBITS]) - 1
    pos = S[S_POS]
    HB[pos & hmask] = np.uint8(symbol)
    S[S_POS] = pos + 1
    S[S_HIST] = ((S[S_HIST] << 8) | symbol) & 0xFFFFFFFFFFFFFF  # last 7 bytes
    word = next_word(S[S_WORD], symbol)
    next_text(S, pos, symbol, word)
    S[S_WORD] = word
    if S[S_REC_ON] != 0:  # only recipes with a record kind pay for the detection
        record_update(S, pos, symbol, hmask)
    if S[S_IND_ON] != 0:
        follow = S_IND + ((S[S_HIST] >> 8) & 0xFFFF)  # the two bytes before this one
        S[follow] = ((S[follow] << 8) | symbol) & 0xFFFF
    if S[S_CHART_ON] != 0 and pos >= 4:
        S[S_CHART + chart_shape(S[S_HIST] >> 8)] = symbol
    if S[S_CHART_FINE_ON] != 0 and pos >= 4:
        S[S_CHART_FINE + chart_fine_shape(S[S_HIST] >> 8)] = symbol
    for o in range(S[S_K]):
        k = S[S_ORDERS + o]
        if k == WORD_ORDER:
            h = word_context(S[S_WORD], S[S_HIST] & 0xFF)
        elif k <= 7:
            h = k
            for i in range(k):
                h = hash32(h * 0x01000193 + ((S[S_HIST] >> (8 * i)) & 0xFF) + 1)
        elif is_sheet_kind(k):
            continue  # sheet.next_contexts sets it
        elif k == KIND_CHART:
            h = chart_context(S)
        elif k == KIND_CHART_FINE:
            h = chart_fine_context(S)
        elif k == KIND_ORDER0_BINARY:
            h = ABSENT if S[S_BINARY] == 0 else chart_hash(5 << 40)
        else:
            h = kind_hash(S, HB, k, pos + 1, hmask)
        S[S_CTX + o] = h


@jit(inline="always")
def chart_shape(hist):
    """The shape of the last three bytes of hist: their top 3 bits (small numbers and
    control bytes, printable ranges, high bytes), 9 bits."""
    return (((hist >> 5) & 7) | (((hist >> 13) & 7) << 3) | (((hist >> 21) & 7) << 6))


@jit
def chart_context(S):
    """KIND_CHART's context for the next byte: the byte that followed the last three bytes'
    shape the last time, and a(2); ABSENT unless the byte just coded was binary (as the
    match model's recovery defines it), so text has no input here. Which byte comes after a
    field of this shape (a separator, an opcode after its operands) is learnt at once
    wherever it recurs: the other binary tuning slices -0.59 %, the Unicode tables -0.41 %."""
    if S[S_BINARY] == 0:
        return ABSENT
    hist = S[S_HIST]
    return chart_hash((3 << 40) | (S[S_CHART + chart_shape(hist)] << 8) | ((hist >> 8) & 0xFF))


@jit(inline="always")
def chart_fine_shape(hist):
    """The finer shape of the last three bytes of hist: their top 5 bits, 15 bits."""
    return (((hist >> 3) & 31) | (((hist >> 11) & 31) << 5) | (((hist >> 19) & 31) << 10))


@jit
def chart_fine_context(S):
    """KIND_CHART_FINE's context for the next byte: the last three bytes' finer shape and
    the byte that followed it the last time; ABSENT unless the byte just coded was binary,
    as chart_context. Beside KIND_CHART: the other binary tuning slices -0.31 %, the Unicode
    tables -0.10 %."""
    if S[S_BINARY] == 0:
        return ABSENT
    shape = chart_fine_shape(S[S_HIST])
    return chart_hash((4 << 40) | (shape << 16) | S[S_CHART_FINE + shape])


@jit(inline="always")
def chart_hash(x):
    """The chart kinds' context hash of x (its high bits say which kind)."""
    return hash32(x * 0x2545F491 + 0x6A09E667)


@jit
def match_update(S, HB, CT):
    """After next_contexts: extend, suspend or drop the current match, then look for a new
    one. A suspended match keeps recovering while the data is no longer binary, so a
    recovery that began ends by its own rule. With match_context, on binary data the
    expected byte's context then takes its model's slot."""
    hmask = (1 << S[S_HBITS]) - 1
    pos = S[S_POS]
    symbol = np.int64(HB[(pos - 1) & hmask])
    if (S[S_MREC_ON] != 0 and S[S_BINARY] != 0) or S[S_MBAK_LEN] > 0 or S[S_MTRIAL] > 0:
        recover_match(S, symbol)
    else:
        extend_match(S, S_LEN, S_PTR, S_EXPECT, symbol)
    if pos >= MATCH_MIN:
        h = hash32(S[S_HIST] & 0xFFFFFFFFFFFF) ^ hash32((S[S_HIST] >> 32) & 0xFFFF)
        idx = S[S_MATCH_BASE] + (h >> (32 - S[S_MBITS]))
        if S[S_LEN] == 0:
            cand = np.int64(CT[idx])
            if cand > 0 and pos - cand < hmask:
                n = verified_length(HB, cand, pos, hmask)
                if n >= MATCH_MIN:
                    S[S_LEN] = n
                    S[S_PTR] = cand
                    S[S_MBAK_LEN] = S[S_MTRIAL] = 0
        CT[idx] = np.uint32(pos)
    if S[S_LEN] > 0:
        S[S_EXPECT] = np.int64(HB[S[S_PTR] & hmask])
    elif S[S_MBAK_LEN] > 0:
        S[S_EXPECT] = np.int64(HB[S[S_MBAK_PTR] & hmask])
    else:
        S[S_EXPECT] = -1
    if S[S_MCTX_SLOT] > 0 and S[S_EXPECT] >= 0 and S[S_BINARY] != 0:
        S[S_CTX + S[S_MCTX_SLOT] - 1] = match_context(S)


@jit(inline="always")
def match_mode(S):
    """The match's state in five: suspended, recovered and on trial, shorter than 16 bytes,
    than 32, longer."""
    n = S[S_LEN]
    if n == 0:
        return 0
    if S[S_MTRIAL] > 0:
        return 1
    return 2 if n < 16 else 3 if n < 32 else 4


@jit
def match_context(S):
    """match_context's context for the next byte: the byte the match expects and its mode.
    On binary data, once a match is found, the order-4 context mostly repeats what the match
    says; this one learns which byte comes when the match expects e, right or wrong (an
    entry of a table that grows by one, a field that differs from the last record's:
    paq8px's match model keeps such contexts). The Unicode-table tuning slices -0.10 %."""
    return hash32((((match_mode(S) << 8) | S[S_EXPECT]) << 8) * 0x2545F491 + 0x3C6EF372)


@jit
def match_inputs(CT, S, ST, X, col):
    """X[node, col]: the match model's evidence, +-stretch(p(expected bit is right)) on the
    path of the byte that followed the earlier occurrence, 0 elsewhere."""
    e = S[S_EXPECT]
    i = match_counter(S) if e >= 0 else 0
    expected_byte_inputs(CT, ST, X, col, e, i)


@jit
def expected_byte_inputs(CT, ST, X, col, e, i):
    """X[node, col] = +-stretch(p) of counter i on the path of expected byte e (none if e < 0),
    + where the path goes to 1; 0 off the path."""
    for n in range(X.shape[0]):
        X[n, col] = 0.0
    if e < 0:
        return
    st = ST[counter_p12(CT, i)]
    node = 1
    for d in range(8):
        bit = (e >> (7 - d)) & 1
        X[node, col] = st if bit else -st
        node = 2 * node + bit


@jit
def match_learn(CT, S, symbol):
    """Teach the length bucket's counter whether the expected byte's bits came true."""
    e = S[S_EXPECT]
    if e >= 0:
        learn_expected_byte(CT, match_counter(S), e, symbol)


@jit
def learn_expected_byte(CT, i, e, symbol):
    """Counter i learns, bit by bit down to the first wrong one, whether e's bits came true."""
    for d in range(8):
        ok = ((e >> (7 - d)) & 1) == ((symbol >> (7 - d)) & 1)
        update_counter(CT, i, 1 if ok else 0, COUNT_LIMIT_MAX)
        if not ok:
            return


@jit
def next_contexts_start(S):
    """Context hashes before the first byte (an empty history; no sheet record yet)."""
    for o in range(S[S_K]):
        k = S[S_ORDERS + o]
        S[S_CTX + o] = ABSENT if is_sheet_kind(k) else hash32(k * 0x01000193 + 0x5BD1E995)
