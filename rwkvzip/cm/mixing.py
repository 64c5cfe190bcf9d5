"""Context mixing settings (part of the recipe) and the arrays the mixing kernels work on."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import (
    delta,
    exe,
    image,
    jvm,
    pyc,
    riscv,
    runs,
    s390x,
    sheet,
    sparse,
    steps,
    syntax,
    thumb,
    wasm,
    x86,
)
from rwkvzip.cm import mixer as mx
from rwkvzip.ops import memory

# Fields added after the first mixing cards: left out of a recipe's JSON at their default.
OPTIONAL_FIELDS = ("selectors", "net_init", "net_gate", "image", "sheet_expect", "sse2",
                   "ways", "ctx_init", "text_init", "set_decay", "exe", "path_coding", "delta",
                   "syntax", "nest", "exe_calls", "exe_words", "x86", "exe_le", "sparse",
                   "riscv", "s390x", "thumb", "jvm", "pyc", "wasm", "order1_bits", "sse2_bits",
                   "match_recover", "binary_count_limit", "delta_carry",
                   "delta_max", "delta_binary", "delta_select", "delta_nonzero",
                   "delta_switch", "delta_recent", "rec_stable", "delta_apm",
                   "order_sets", "sparse_le", "rec_follow", "delta_ff", "filler_sets",
                   "step_expect", "sparse_binary", "sparse_nibbles", "match_context",
                   "chart_bits", "runs")

# order0_binary's table: its one context's 17 nibble slots (2**10 slots hold them)
ORDER0_BITS = 10


@dataclass(frozen=True)
class MixConfig:
    """Which context models feed the mixer and how big their tables are.

    orders: the context kinds, by code (named in a recipe's JSON: context.KIND_CODES): 1..7
    the last k bytes, 0 the current word (for
    text), 8 order 0, 9 byte -2, 10 bytes -3 and -4, 11 position in a 4-byte word with byte
    -4 (fixed-width code), 12..15 records of r bytes, r detected from the data (bitmaps,
    tables): 12 the byte above and the byte to the left, 13 the two bytes above, 14 the row
    above around this column, 15 the column and the byte above; 16..19 fields of
    spreadsheet (BIFF) records (cm/sheet.py): 16 record type and offset with the last byte,
    17 with the cell's column, 18 with that column's last cell, 19 with the column and the
    record before (docs/FORMAT.md); 20..23 text: the word with the word before it (20), the
    two before it (21), the one before those (22), and the byte at this column of the line
    above (23), the column (24); 25 indirect: the last byte with the two bytes that
    followed the last two bytes the last two times they occurred; 26 ... 28 binary data
    only: the byte that followed the last three bytes' shape the last time (26: their top 3
    bits, with a(2); 27: their top 5 bits, with that shape), 28 order 0 (its table
    2**ORDER0_BITS slots); table_bits:
    each model's table holds 2**table_bits slots of 64 bytes; order1_bits: order 1's, which
    holds 256 contexts x 17 nibbles at most, at most 2**order1_bits (0: table_bits; 15
    holds them all and keeps 14 MB of 16 out of memory); chart_bits: the same for kinds
    26 and 27, whose contexts are few (on binary data 16, 4 MiB each, within 0.02 % of 18's;
    14, 1 MiB, 0.07 %); match_bits: 2**match_bits bytes of history (and as many hash
    entries) for the match model; network: whether the neural
    network is one of the mixer's inputs (False: context models alone); selectors: 1, one
    mixer (weights by node, match state and known models), or 2, a second mixer whose
    weights are chosen by the previous byte and node, and a final mixer of the two, or 3, a
    third mixer by the byte before the previous one too, or 4 (needs runs and exe), a fourth
    by the longest run among the contexts that the last byte continued where the data is
    binary, else by a(3) (mixer.fourth_selector), or 5 ... 8, one to four depth mixers
    too, heard on binary data only (mixer.depth_selector);
    net_init: every mixer's initial weight of the network's input (higher for a prior that
    already predicts well); net_gate: scale the network's input by how text-like the recent
    bytes are (cm/mixer.py, text_gate), for a prior that learned text; image: the 1-bit image
    model (cm/image.py: pixels from their neighbours in rows of the detected length);
    sheet_expect: one more input from the spreadsheet model, the byte its column's last two
    cells extrapolate to (cm/sheet.py, expect; needs a kind 16...19); sse2: a third APM
    stage by the last two bytes (hashed to sse2_bits bits: 10, 33 MB; each bit fewer halves
    it) and node; ways: 1, 2 or 4 slots a context may own
    (an aligned group; a new context takes the one used least); ctx_init, text_init: every
    mixer's initial weight of each context model's two inputs, and of a text kind's (20 ...
    23); set_decay: 0, every weight set learns at the mixer-wide rate (lr decayed by the bytes
    seen), or each set learns at lr / sqrt(1 + n / set_decay), n its own updates so far, but
    never slower than the mixer-wide rate (rarely chosen sets keep learning fast); exe: the
    executable model (cm/exe.py): while the data is binary, kind 11's and the text kinds'
    slots carry contexts of aligned 32-bit words and the second selector follows a word's
    fields (text codes exactly as without it); path_coding: a byte's share of the coder's
    range is found by splitting it at the nodes of the byte's path alone, so only those 8 of
    the 255 nodes are mixed (the same model and node probabilities, a different stream;
    coding/stepper.py, take_path); delta: the column-delta model (cm/delta.py): while the
    data is binary records, four histograms of the steps a column takes from the byte
    above are four more inputs, and a switch after the APMs mixes their distributions with
    the mixer's by column (needs exe, whose measure of binary data it uses); syntax: the
    syntax model (cm/syntax.py): the slots of kinds 16, 17 and 18, while no spreadsheet
    record chain is followed, carry the last punctuation bytes of the line or string with
    the current token, with the last byte, and with the token's length (needs the three
    kinds in the orders); nest: the syntax model also sets kind 19's slot to the bracket
    depth, whether a quote is open and the current token (needs syntax and kind 19);
    exe_calls: while the executable model is live in code, a near SPARC call is coded with
    its target in place of its displacement (cm/exe.py, the calls' transform; needs exe);
    exe_words: while it is live, the slots of kinds 22 and 24 carry the previous word's top
    half with the fields of the two words before it, and the byte one record back (needs
    exe); x86: the x86 model (cm/x86.py): while the data is x86 code, the word, text and
    spreadsheet kinds' slots carry contexts of the instruction (its field, opcode, the
    opcodes before, the same place of the last instruction with the same opcode), the second
    selector follows the instruction's field, and near calls, jumps and RIP-relative
    operands are coded with their target in place of their displacement (needs exe);
    exe_le: the executable model also finds little-endian words (AArch64, POWER little-endian)
    by their signature words and reads their class from their top byte, and with exe_calls
    AArch64's near bl and adrp take their targets (needs exe); sparse: the sparse model
    (cm/sparse.py): while the data is binary and no other model reads its structure, the
    word, text and spreadsheet kinds' slots carry contexts of bytes further back and pairs
    with gaps (needs exe); riscv: the RISC-V model (cm/riscv.py): while the data is RISC-V
    code, those slots carry contexts of the instruction (its place and bytes so far, the
    classes before, the same place of the last one with its first byte), the second selector
    follows the place and class, and jal and auipc are coded with their target (needs exe);
    s390x: the z/Architecture model (cm/s390x.py), the same for s390x code, with brasl,
    larl and the C4/C6 families' offsets coded as targets (needs exe); thumb: the Thumb-2
    model (cm/thumb.py), the same for ARM Thumb-2 code, with bl coded by target (needs exe);
    jvm: the class-file model (cm/jvm.py): while a Java class file is followed, those slots
    carry contexts of its field (the field and its bytes so far, its last value, the field,
    tags or opcodes before), the second selector follows the field, and the constant
    pool's references are coded relative to their entry; pyc: the .pyc model (cm/pyc.py),
    the same for compiled Python modules (CPython 3.11 on: marshal objects, bytecode, line
    tables); wasm: the WebAssembly model (cm/wasm.py), the same for the function bodies of
    WebAssembly code (opcodes and their immediates), found from a module's header or from
    the bodies' sizes; match_recover: while the data is binary (a control byte in the last
    exe.BINARY_SPAN), a miss suspends the match model's match instead of ending it, and the
    byte after the missed one brings it back (context.recover_match; needs exe);
    binary_count_limit: 0, or the counters' count limit while the data is binary (tables and
    code change their statistics faster than text; needs exe); delta_carry: the delta
    model's contexts also tell how the byte to the left compares with the one above it (a
    carry into a growing number; needs delta); delta_max: one of its histograms counts the
    steps from the column's largest recent byte, not from the byte above (a lookup table's
    next new block number; needs delta); delta_binary: the delta model is live wherever
    the data is binary (a control byte in the last exe.BINARY_SPAN), not only where one byte
    in six is a control byte (a table of printable bytes; needs delta); delta_select: while
    the delta model is heard, the third mixer's weight set is chosen by the next byte's
    column (needs delta and three selectors); delta_nonzero: where the byte above is 0, the
    delta model's fourth histogram counts the steps from the column's last nonzero byte (a
    sparse table's next entry goes on from its last one; needs delta); delta_switch: the delta
    model's switch starts every column trusting the mixer and lets a weight fall to 1/1024
    of the mass, not 1/256 (needs delta); delta_recent: its histograms count a column's
    last dozen steps or so, halved past RECENT_LIMIT (needs delta); rec_stable: in the
    record-length detection a vote for one candidate takes one from the other
    (context.take_vote); delta_apm: while the delta model is heard, the second APM's row is
    chosen by the next byte's column (needs delta); order_sets: while the data is binary,
    the first mixer's weight set counts the byte orders whose context is known, not every
    model's (mixer.known_models; needs exe); sparse_le: the sparse model is live over the
    executable model's little-endian words too (sparse.is_live; needs sparse and exe_le);
    rec_follow: while a record length is known, the sparse model's slot of a(2), a(4) holds
    the column and what followed a(1) beside the byte above it (sparse.follow_context;
    needs sparse); delta_ff: with delta_nonzero, a byte 0xFF is an empty entry's too
    (delta.empty; needs delta_nonzero); filler_sets: with order_sets, on binary data the
    first mixer has weight sets of its own after a(1) = 0 or 0xFF (mixer.filler_sets);
    step_expect: while the data is binary and the spreadsheet model expects no byte, its
    input carries the byte that the last step of an array of 16- or 32-bit little-endian
    numbers predicts (cm/steps.py; needs sheet_expect and exe); sparse_binary: the sparse
    model is also live where the data is binary (a control byte in the last
    exe.BINARY_SPAN) and less than 3/4 of the recent bytes are printable, not only where one
    byte in six is a control byte (sparse.is_live; needs sparse); sparse_nibbles: while the
    sparse model is live over little-endian words, kind 19's slot carries the place in the
    word and the top nibbles of the last four bytes (sparse.nibbles; needs sparse_le);
    match_context: while the data is binary and the match model expects a byte, order 4's
    slot holds that byte and the match's mode (context.match_context; needs exe and order
    4); runs: every model's contexts keep a byte history (the last byte that followed, the
    one before it, the run; cm/runs.py), whose predicted bit is one more mixer input per
    model.
    A field at its default is left out of the recipe's JSON (recipes from before it keep theirs).
    """

    orders: tuple[int, ...] = (1, 2, 3, 4, 6, 0)
    table_bits: int = 18
    order1_bits: int = 0
    chart_bits: int = 0
    match_bits: int = 22
    count_limit: int = 30
    lr: float = 0.005
    lr_min: float = 0.001
    lr_decay: float = 65536.0
    apm_rate: float = 0.02
    map_rate: float = 0.005
    network: bool = True
    selectors: int = 1
    net_init: float = 0.3
    net_gate: bool = False
    image: bool = False
    sheet_expect: bool = False
    sse2: bool = False
    sse2_bits: int = cx.SSE2_BITS
    match_recover: bool = False
    binary_count_limit: int = 0
    ways: int = 1
    ctx_init: float = 0.15
    text_init: float = 0.05
    set_decay: float = 0.0
    exe: bool = False
    path_coding: bool = False
    delta: bool = False
    delta_carry: bool = False
    delta_max: bool = False
    delta_binary: bool = False
    delta_select: bool = False
    delta_nonzero: bool = False
    delta_switch: bool = False
    delta_recent: bool = False
    rec_stable: bool = False
    delta_apm: bool = False
    order_sets: bool = False
    sparse_le: bool = False
    rec_follow: bool = False
    delta_ff: bool = False
    filler_sets: bool = False
    step_expect: bool = False
    sparse_binary: bool = False
    sparse_nibbles: bool = False
    match_context: bool = False
    runs: bool = False
    syntax: bool = False
    nest: bool = False
    exe_calls: bool = False
    exe_words: bool = False
    x86: bool = False
    exe_le: bool = False
    sparse: bool = False
    riscv: bool = False
    s390x: bool = False
    thumb: bool = False
    jvm: bool = False
    pyc: bool = False
    wasm: bool = False

    def validate(self) -> None:
        if not 1 <= len(self.orders) <= cx.MAX_MODELS:
            raise ValueError(f"mixing needs 1 to {cx.MAX_MODELS} context orders")
        if (any(not 0 <= k <= cx.MAX_KIND for k in self.orders)
                or len(set(self.orders)) != len(self.orders)):
            raise ValueError(f"context orders must be distinct, in 0..{cx.MAX_KIND} "
                             "(1..7: order-k, 0: word, 8 and up: see docs/FORMAT.md)")
        if self.order_sets and not self.exe:
            raise ValueError("order_sets needs exe (the executable model's measure of binary "
                             "data)")
        if self.delta and not self.exe:
            raise ValueError("delta needs exe (the executable model's measure of binary data)")
        if (self.delta_carry or self.delta_max or self.delta_binary or self.delta_nonzero
                or self.delta_switch or self.delta_recent or self.delta_apm) and not self.delta:
            raise ValueError("delta_carry, delta_max, delta_binary, delta_nonzero, delta_switch, "
                             "delta_recent and delta_apm need delta")
        if self.filler_sets and not (self.order_sets and sum(
                1 <= k <= cx.MAX_BYTE_ORDER for k in self.orders) + mx.FILLER_SETS_AT
                <= len(self.orders)):
            raise ValueError("filler_sets needs order_sets and at least 8 more models than "
                             "byte orders (the first mixer's sets)")
        if self.sparse_binary and not self.sparse:
            raise ValueError("sparse_binary needs sparse")
        if self.match_context and not (self.exe and cx.MATCH_CONTEXT_ORDER in self.orders):
            raise ValueError("match_context needs exe (its measure of binary data) and "
                             "order4 (whose slot it takes)")
        if self.sparse_nibbles and not self.sparse_le:
            raise ValueError("sparse_nibbles needs sparse_le")
        if self.sparse_le and not (self.sparse and self.exe_le):
            raise ValueError("sparse_le needs sparse and exe_le")
        if self.rec_follow and not self.sparse:
            raise ValueError("rec_follow needs sparse")
        if self.step_expect and not (self.sheet_expect and self.exe):
            raise ValueError("step_expect needs sheet_expect (its input) and exe")
        if self.delta_ff and not self.delta_nonzero:
            raise ValueError("delta_ff needs delta_nonzero")
        if self.delta_select and not (self.delta and self.selectors > 2):
            raise ValueError("delta_select needs delta and three selectors")
        if (self.exe_calls or self.exe_words or self.x86 or self.exe_le or self.sparse
                or self.riscv or self.s390x or self.thumb or self.match_recover
                or self.binary_count_limit) and not self.exe:
            raise ValueError("exe_calls, exe_words, exe_le, x86, riscv, s390x, thumb, "
                             "sparse, match_recover and binary_count_limit need exe (the "
                             "executable model)")
        if self.syntax and not syntax.enabled(self.orders):
            raise ValueError("syntax needs the spreadsheet kinds 16, 17 and 18 in the "
                             "orders (it takes their slots)")
        if self.nest and not (self.syntax and syntax.nest_enabled(self.orders)):
            raise ValueError("nest needs syntax and the spreadsheet kind 19 in the orders "
                             "(it takes its slot)")
        if self.sheet_expect and not sheet.enabled(self.orders):
            raise ValueError("sheet_expect needs a spreadsheet kind (16...19) in the orders")
        if not 10 <= self.table_bits <= 24:
            raise ValueError("table_bits must be in 10..24")
        if self.order1_bits and not 10 <= self.order1_bits <= 24:
            raise ValueError("order1_bits must be 0 (table_bits) or in 10..24")
        if self.chart_bits and not 10 <= self.chart_bits <= 24:
            raise ValueError("chart_bits must be 0 (table_bits) or in 10..24")
        if not 4 <= self.sse2_bits <= cx.SSE2_BITS:
            raise ValueError(f"sse2_bits must be in 4..{cx.SSE2_BITS}")
        if not 0.0 <= self.net_init <= 4.0:
            raise ValueError("net_init must be in [0, 4]")
        if not (0.0 <= self.ctx_init <= 1.0 and 0.0 <= self.text_init <= 1.0):
            raise ValueError("ctx_init and text_init must be in [0, 1]")
        if not 0.0 <= self.set_decay <= 65536.0:
            raise ValueError("set_decay must be in [0, 65536]")
        if self.ways not in (1, 2, 4):
            raise ValueError("ways must be 1, 2 or 4")
        if not 1 <= self.selectors <= mx.MAX_SELECTORS:
            raise ValueError(f"selectors must be 1 ... {mx.MAX_SELECTORS}")
        if self.selectors >= 4 and not (self.runs and self.exe):
            raise ValueError("selectors 4 and more need runs and exe")
        if not 12 <= self.match_bits <= 28:
            raise ValueError("match_bits must be in 12..28")
        if not 1 <= self.count_limit <= cx.COUNT_LIMIT_MAX:
            raise ValueError(f"count_limit must be in 1..{cx.COUNT_LIMIT_MAX}")
        if not 0 <= self.binary_count_limit <= cx.COUNT_LIMIT_MAX:
            raise ValueError(f"binary_count_limit must be in 0..{cx.COUNT_LIMIT_MAX}")
        if not (0.0 < self.lr <= 1.0 and 0.0 <= self.lr_min <= 1.0 and self.lr_decay > 0.0
                and 0.0 < self.apm_rate <= 1.0 and 0.0 < self.map_rate <= 1.0):
            raise ValueError("mixer rates must be in (0, 1]")

    def table_bits_of(self) -> list[int]:
        """Each order's table size in bits: table_bits; order 1's at most order1_bits, the
        chart kinds' at most chart_bits, order0_binary's ORDER0_BITS."""
        def bits(k: int) -> int:
            if k == cx.KIND_ORDER0_BINARY:
                return min(ORDER0_BITS, self.table_bits)
            if k == 1 and self.order1_bits:
                return min(self.order1_bits, self.table_bits)
            if cx.KIND_CHART <= k <= cx.KIND_CHART_FINE and self.chart_bits:
                return min(self.chart_bits, self.table_bits)
            return self.table_bits
        return [bits(k) for k in self.orders]

    def memory_bytes(self, bptt: int = 1) -> int:
        """Bytes of every table: context slots, history, match hashes, the mixer's floats."""
        tables = sum((4 * cx.SLOT << b) + ((4 << b) >> runs.SHRINK) * self.runs
                     for b in self.table_bits_of()) + (5 << self.match_bits)
        tables += 4 * (image.table_size() * self.image + sheet.EXPECT_COUNTERS * self.sheet_expect
                       + steps.COUNTERS * self.step_expect + delta.table_size() * self.delta
                       + sparse.table_size(self.rec_follow))
        return tables + 4 * self.layout(bptt)[1]

    def layout(self, bptt: int) -> tuple[dict, int]:
        """The mixer's float array layout (mixer.layout) for these settings."""
        return mx.layout(len(self.orders), self.network, bptt, self.selectors, self.image,
                         self.sheet_expect, self.sse2, self.set_decay > 0.0, self.delta,
                         self.sse2_bits, self.runs)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["orders"] = [cx.KIND_NAMES[k] for k in self.orders]
        for name in OPTIONAL_FIELDS:
            if d[name] == getattr(MixConfig, name):
                del d[name]
        return d


class MixArrays:
    """The context models', match model's and mixer's state for one stream."""

    def __init__(self, cfg: MixConfig, bptt: int, frozen: bool = False):
        """frozen: the network does not learn, so the mixer computes no gradient for it."""
        K = len(cfg.orders)
        S = np.zeros(cx.N_S, dtype=np.int64)
        S[cx.S_K] = K
        S[cx.S_WAYS] = cfg.ways
        S[cx.S_LIMIT] = S[cx.S_LIMIT_NOW] = cfg.count_limit
        S[cx.S_HBITS] = cfg.match_bits
        S[cx.S_MBITS] = cfg.match_bits
        base = 0
        for o, bits in enumerate(cfg.table_bits_of()):
            S[cx.S_TBASE + o], S[cx.S_TBITS + o] = base, bits
            base += 1 << bits
        S[cx.S_MATCH_BASE] = base * cx.SLOT
        S[cx.S_SSE2_BITS] = cfg.sse2_bits
        S[cx.S_MCOUNT_BASE] = S[cx.S_MATCH_BASE] + (1 << cfg.match_bits)
        S[cx.S_EXPECT] = -1
        S[cx.S_MREC_ON] = int(cfg.match_recover)
        S[cx.S_MCTX_SLOT] = (cfg.orders.index(cx.MATCH_CONTEXT_ORDER) + 1
                             if cfg.match_context else 0)
        S[cx.S_LIMIT_BIN] = cfg.binary_count_limit
        S[cx.S_ORDERS:cx.S_ORDERS + K] = cfg.orders
        S[cx.S_REC_STABLE] = int(cfg.rec_stable)
        S[cx.S_REC_ON] = int(cfg.image or cfg.delta or cfg.rec_follow
                             or any(cx.KIND_REC_ABOVE <= k <= cx.KIND_REC_COL for k in cfg.orders))
        S[cx.S_IND_ON] = int(cx.KIND_INDIRECT in cfg.orders)
        S[cx.S_CHART_ON] = int(cx.KIND_CHART in cfg.orders)
        S[cx.S_CHART_FINE_ON] = int(cx.KIND_CHART_FINE in cfg.orders)
        # each model's fields, and where its tables go in CT: after the match counters the
        # image model's, the sheet's expected bytes' counters, the step model's, the delta
        # model's, the sparse model's follow table
        image_base = S[cx.S_MCOUNT_BASE] + cx.MATCH_BUCKETS
        expect_base = image_base + image.table_size() * cfg.image
        image.start_state(S, cfg.image, image_base)
        sheet.start_state(S, cfg.orders, cfg.sheet_expect, expect_base)
        exe.start_state(S, cfg.exe, cfg.exe_calls, cfg.exe_words, cfg.exe_le)
        x86.start_state(S, cfg.x86)
        riscv.start_state(S, cfg.riscv)
        s390x.start_state(S, cfg.s390x)
        thumb.start_state(S, cfg.thumb)
        jvm.start_state(S, cfg.jvm)
        pyc.start_state(S, cfg.pyc)
        wasm.start_state(S, cfg.wasm)
        steps_base = expect_base + sheet.EXPECT_COUNTERS * cfg.sheet_expect
        steps.start_state(S, cfg.step_expect, steps_base)
        delta.start_state(S, cfg, steps_base + steps.COUNTERS * cfg.step_expect)
        follow_base = S[delta.S_DL_BASE] + delta.table_size() * cfg.delta
        sparse.start_state(S, cfg.sparse, cfg.sparse_le, follow_base * cfg.rec_follow,
                           cfg.sparse_binary, cfg.sparse_nibbles)
        syntax.start_state(S, cfg.syntax, cfg.nest)
        # the byte histories' tables last (cm/runs.py), each model's in the slot tables' order
        S[cx.S_RUNS_BASE] = follow_base + sparse.table_size(cfg.rec_follow)
        histories = (S[cx.S_MATCH_BASE] // cx.SLOT >> runs.SHRINK) * cfg.runs
        self.CT = memory.zeros(S[cx.S_RUNS_BASE] + histories, np.uint32)
        self.CT[S[cx.S_MCOUNT_BASE]:S[delta.S_DL_BASE]] = cx.P_HALF  # counters; counts at 0
        self.HB = memory.zeros(1 << cfg.match_bits, np.uint8)
        offsets, size = cfg.layout(bptt)
        S[mx.S_NIN] = offsets["nin"]
        S[cx.S_RUNS_COL] = offsets["runs_col"]
        S[cx.S_RUNS_SM] = offsets["rm"] - offsets["sm"]
        S[mx.S_NET] = (mx.NET_OFF if not cfg.network else mx.NET_FROZEN if frozen
                       else mx.NET_LEARNS)
        S[mx.S_SEL] = cfg.selectors
        S[mx.S_ORDER_SETS] = int(cfg.order_sets)
        S[mx.S_FILLER_SETS] = int(cfg.filler_sets)
        for slot, name in ((mx.S_W, "w"), (mx.S_A1, "a1"), (mx.S_A2, "a2"), (mx.S_X, "x"),
                           (mx.S_DOT, "dot"), (mx.S_PM, "pm"), (mx.S_SUM, "sum"),
                           (mx.S_GM, "gm"), (mx.S_SM, "sm"), (mx.S_W2, "w2"),
                           (mx.S_WF, "wf"), (mx.S_ZS, "zs"), (image.S_IMG_MX, "img"),
                           (delta.S_DL_MX, "dl")):
            S[slot] = offsets[name]
        S[mx.S_A3] = offsets["a3"] if cfg.sse2 else 0
        S[mx.S_W3], S[mx.S_WF3], S[mx.S_ZS3] = offsets["w3"], offsets["wf3"], offsets["zs3"]
        S[mx.S_W4], S[mx.S_WF4], S[mx.S_ZS4] = offsets["w4"], offsets["wf4"], offsets["zs4"]
        S[mx.S_W5], S[mx.S_WF5], S[mx.S_ZS5] = offsets["w5"], offsets["wf5"], offsets["zs5"]
        S[mx.S_CNT] = offsets["cnt"] if cfg.set_decay > 0.0 else 0
        MX = memory.zeros(size, np.float32)
        MX[mx.MX_LR] = cfg.lr
        MX[mx.MX_LR_MIN] = cfg.lr_min
        MX[mx.MX_LR_DECAY] = cfg.lr_decay
        MX[mx.MX_APM_RATE] = cfg.apm_rate
        MX[mx.MX_MAP_RATE] = cfg.map_rate
        MX[mx.MX_NET_INIT] = cfg.net_init
        MX[mx.MX_CTX_INIT] = cfg.ctx_init
        MX[mx.MX_TEXT_INIT] = cfg.text_init
        MX[mx.MX_SET_DECAY] = cfg.set_decay
        MX[mx.MX_TEXT] = 1.0  # a stream starts as text: a prior is heard from the first byte
        S[mx.S_GATE] = int(cfg.net_gate)
        self.S, self.MX = S, MX
        mx.init_tables(S, MX)
        if cfg.image:
            image.init_weights(S, MX)
        if cfg.delta:
            delta.init_weights(S, MX)
        cx.next_contexts_start(S)
        self.ST = stretch_table()


_STRETCH: list[np.ndarray] = []


def stretch_table() -> np.ndarray:
    if not _STRETCH:
        _STRETCH.append(mx.stretch_table(4096))
    return _STRETCH[0]
