"""The mixer: combines the context models, the match model and the network at every node of
the byte's binary tree, refines the result with two or three APM/SSE stages, and turns the 255 node
probabilities into the distribution of the 256 bytes that the coder uses.

Mixing is logistic (a weighted sum of stretched probabilities, squashed). Inputs (columns of
X) at each node: each context model's counter (K columns), the same counters through
adaptive maps (K), the match model, a bias and, optionally, the network, the image and
column-delta models, each model's byte history (K, mix field runs) and the expected byte.
The weight vector is chosen by the node, the match state and how many models know their
context, and learns online by gradient steps on the coded bits' log loss. With two selectors
(S_SEL = 2) a second mixer's weights are chosen by the previous byte (second_selector: a
record field while the spreadsheet model follows records, a word's fields while the
executable model is live) and the node, each mixer learns from its own error, and a final
mixer (two weights per node) combines their logits; with three (S_SEL = 3) a third mixer's
weights are chosen by the byte before the previous one, and the final mixer has three
weights per node; with four, a fourth mixer's by how steadily the contexts had predicted
the last byte where the data is binary, else by a(3) (fourth_selector), and the final mixer
has four weights per node of its own (final_weights). The network's input at a node is
ln(Q1 / Q0), the log-odds of its softmax
mass under the node's two children; the mixer loss's gradient with respect to it is carried
back to the network's logits (`learn`).

Floats live in one float32 array MX (offsets in S, see `layout`); the arithmetic is
float32/float64 in a fixed order, so it obeys the determinism contract.
"""

from __future__ import annotations

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
    steps,
    thumb,
    wasm,
    x86,
)
from rwkvzip.cm.context import (
    S_EXPECT,
    S_K,
    S_LEN,
    S_SLOTS,
    match_inputs,
    match_learn,
    node_inputs,
    update_models,
)
from rwkvzip.cm.history import text_class
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.jit import jit
from rwkvzip.ops.mathf import log64, log_positive_array, sigmoid64, sigmoid64_vector
from rwkvzip.ops.prefetch import prefetch

# The mixer's fields of the context models' state (context.STATE): its inputs, the network
# input's kind, the bases in MX of its weights, APMs, inputs, ...;
# S[S_A3]: the order-2 APM's rows in MX (0: none, mix field sse2); S[S_A3_ROW] its context;
# with three selectors, the third mixer's weights, its final-mixer weight and its outputs;
# with four, the fourth's; with more, the depth mixers' weights (depth_sets), all the
# final mixer's weights (MAX_SELECTORS per node, text's then binary data's) and their
# outputs;
# S[S_CNT]: each weight set's update count (0: none, mix field set_decay);
# S[S_ORDER_SETS] 1: on binary data the first mixer's set counts known byte orders only;
# S[S_FILLER_SETS] 1: and has sets of its own after a filler byte (mix field filler_sets)
(S_NIN, S_NET, S_W, S_A1, S_A2, S_X, S_DOT, S_PM, S_SUM, S_GM, S_SM, S_SEL, S_W2, S_WF,
 S_ZS, S_GATE, S_A3, S_A3_ROW, S_W3, S_WF3, S_ZS3, S_CNT, S_ORDER_SETS,
 S_FILLER_SETS, S_W4, S_WF4, S_ZS4, S_W5, S_WF5, S_ZS5) = cx.STATE.offsets(
    "mixer.nin", "mixer.net", "mixer.w", "mixer.a1", "mixer.a2", "mixer.x", "mixer.dot",
    "mixer.pm", "mixer.sum", "mixer.gm", "mixer.sm", "mixer.sel", "mixer.w2", "mixer.wf",
    "mixer.zs", "mixer.gate", "mixer.a3", "mixer.a3_row", "mixer.w3", "mixer.wf3",
    "mixer.zs3", "mixer.cnt", "mixer.order_sets", "mixer.filler_sets", "mixer.w4",
    "mixer.wf4", "mixer.zs4", "mixer.w5", "mixer.wf5", "mixer.zs5")
# with filler_sets, the first mixer's sets after a filler byte start this far after the
# known-count ones (above any count of byte orders, 0 ... 7)
FILLER_SETS_AT = cx.MAX_BYTE_ORDER + 1
# S[cx.S_READY + R_... + i]: block i of the second, third and fourth mixers' weights, the
# second APM's rows (by selector byte) and the order-2 APM's (by context) built (ready_rows)
R_W2, R_W3, R_A2, R_W4, R_A3 = (cx.S_READY + i * ALPHABET for i in range(5))
# S[S_GATE] 1: the network's input is scaled by text_gate (mix field net_gate)
# S[S_NET]: no network input; a network that learns (the mixer's gradient flows back to its
# logits); a frozen one (an input only)
NET_OFF, NET_LEARNS, NET_FROZEN = 0, 1, 2
# MX slots of float settings
(MX_LR, MX_LR_MIN, MX_LR_DECAY, MX_APM_RATE, MX_SEEN, MX_MAP_RATE, MX_NET_INIT, MX_TEXT,
 MX_CTX_INIT, MX_TEXT_INIT, MX_SET_DECAY) = range(11)
N_MX_HEAD = 11

APM_CELLS = 33  # interpolation points over stretch(p) in [-8, 8]
MAX_LOGIT = 30.0
NET_CLAMP = 16.0
P_MIN = 1.0 / 65536.0
W_INIT_MATCH = (0.3, 0.6)  # ... of the match model, in short and long matches
W_INIT_IMAGE = 0.3  # ... of the image model
W_INIT_EXPECT = 0.3  # ... of the spreadsheet model's expected byte
W_INIT_FINAL = 0.5  # ... of each selector's mixer in the final mixer (two selectors)
W_INIT_FINAL3 = 1.0 / 3.0  # ... (three selectors)
W_INIT_FINAL4 = 0.25  # ... (four selectors: final weights of their own, final_weights)
# the fourth mixer's weight sets per node: binary data's runs 0 ... 15 (longer ones 15),
# then text's 16 values of a(3)'s top nibble
RUN_SETS = 16
FOURTH_SETS = 2 * RUN_SETS
# selectors 5 ... 8 add depth mixers (depth_set), heard on binary data only: each has a
# weight set per value of its selector (DEPTH_VALUES[e] of them) and node depth, not per
# node as the first four; DEPTH_FIRST[e]: the first of mixer e's values in one numbering
MAX_SELECTORS = 8
DEPTH_VALUES = (64, 64, 48, 64)
DEPTH_FIRST = tuple(sum(DEPTH_VALUES[:e]) for e in range(len(DEPTH_VALUES)))


@jit
def depth_sets(mixers: int) -> int:
    """How many weight sets the first `mixers` depth mixers have together."""
    n = 0
    for e in range(mixers):
        n += DEPTH_VALUES[e]
    return 8 * n


# The text gate: MX[MX_TEXT] follows how text-like the recent bytes are (printable ASCII,
# tab, CR, LF count 1, bytes >= 128 one half, other control bytes 0) at TEXT_RATE a byte; the
# network's input is scaled by (text - GATE_LO) / (GATE_HI - GATE_LO) clamped to [0, 1], so
# a network that learned text (a prior) is heard on text and silenced on binary data, where
# its confident guesses would cost bits until the mixer unlearnt them.
TEXT_RATE = 1.0 / 128.0
GATE_LO, GATE_HI = 0.75, 0.95
# with the order-2 APM (sse2) a node's probability is this blend of the mixer's and the three
# APMs' (0.4, 0.2, 0.2, 0.2 measured 0.06 % worse on the corpus texts)
SSE_P, SSE_A1, SSE_A2, SSE_A3 = 0.3, 0.2, 0.2, 0.3


def layout(n_models: int, net: bool, bptt: int, selectors: int = 1,
           image_model: bool = False, sheet_expect: bool = False,
           sse2: bool = False, set_counts: bool = False,
           delta_model: bool = False, sse2_bits: int = cx.SSE2_BITS,
           runs_model: bool = False) -> tuple[dict, int]:
    """Offsets into MX of every float array, and its size. A second selector adds its weights
    (by previous byte and node), the final mixer's weights and each node's two mixer outputs
    at the end, so a one-selector layout is unchanged; the image model's inputs come after
    the others, then the column-delta model's, the spreadsheet model's expected byte last.
    set_counts: one update count per weight set of every mixer (mix field set_decay), last;
    sse2_bits: the order-2 APM has 2**sse2_bits contexts; runs_model: each model's byte
    history is one more input (after the column-delta model's; "runs_col" its first column,
    0 without) and has a map (cm/runs.py), then a fourth selector's weights (by
    fourth_selector and node), the final mixer's four weights per node and its outputs; with
    selectors 5 ... 8 the depth mixers' weights, MAX_SELECTORS final weights per node for
    text and as many for binary data, and their outputs."""
    # counters, their maps, match, bias, network, image templates, column-delta histograms,
    # byte histories, sheet's expected byte
    runs_col = (2 * n_models + 2 + int(net) + image.IMAGE_INPUTS * int(image_model)
                + delta.INPUTS * int(delta_model))
    nin = runs_col + n_models * int(runs_model) + int(sheet_expect)
    two = selectors > 1
    three = selectors > 2
    four = selectors > 3
    depth = max(selectors - 4, 0)  # depth mixers
    sizes = [("sm", n_models * cx.MAP_COUNTS << cx.MAP_P_BITS),
             ("w", 3 * (n_models + 1) * ALPHABET * nin),
             ("a1", ALPHABET * APM_CELLS), ("a2", ALPHABET * ALPHABET * APM_CELLS),
             ("x", ALPHABET * nin), ("dot", ALPHABET), ("pm", ALPHABET), ("sum", 2 * ALPHABET),
             ("gm", max(bptt, 1) * ALPHABET),
             ("w2", ALPHABET * ALPHABET * nin * two), ("wf", 2 * ALPHABET * two),
             ("zs", 2 * ALPHABET * two), ("img", image.weights_size() * image_model),
             ("a3", (ALPHABET << sse2_bits) * APM_CELLS * sse2),
             ("w3", ALPHABET * ALPHABET * nin * three), ("wf3", ALPHABET * three),
             ("zs3", ALPHABET * three),
             ("cnt", (3 * (n_models + 1) * ALPHABET + ALPHABET * ALPHABET * (two + three)
                      + FOURTH_SETS * ALPHABET * four + depth_sets(depth)) * set_counts),
             ("dl", delta.weights_size() * delta_model),
             ("rm", n_models * runs.CELLS * runs_model),
             ("w4", FOURTH_SETS * ALPHABET * nin * four), ("wf4", 4 * ALPHABET * four),
             ("zs4", ALPHABET * four), ("w5", depth_sets(depth) * nin),
             ("wf5", 2 * MAX_SELECTORS * ALPHABET * (depth > 0)), ("zs5", ALPHABET * depth)]
    offsets, at = {"nin": nin, "runs_col": runs_col * int(runs_model)}, N_MX_HEAD
    for name, n in sizes:
        offsets[name] = at
        at += n
    return offsets, at


@jit
def initial_weight(S, MX, c, long_match):
    """A mixer weight's value before any learning: that of input column c (long_match: of a
    weight set chosen in a long match)."""
    K = S[S_K]
    if c < 2 * K:
        return MX[MX_TEXT_INIT] if cx.is_text_kind(S[cx.S_ORDERS + c % K]) else MX[MX_CTX_INIT]
    if c == 2 * K:
        return W_INIT_MATCH[1] if long_match else W_INIT_MATCH[0]
    if c == 2 * K + 1:
        return 0.0  # bias
    if S[S_NET] != NET_OFF and c == 2 * K + 2:
        return MX[MX_NET_INIT]
    image_end = image_column(S) + image.IMAGE_INPUTS * S[image.S_IMG_ON]
    if c < image_end:  # (the columns before the image model's are all above)
        return W_INIT_IMAGE
    if c < image_end + delta.INPUTS * S[delta.S_DL_ON]:
        return delta.W_INIT
    if S[cx.S_RUNS_COL] and c < S[cx.S_RUNS_COL] + K:
        return MX[MX_CTX_INIT]  # as the counters' (0 measured worse: -0.47 % against -0.63 %)
    return W_INIT_EXPECT  # the spreadsheet model's expected byte, the last column


@jit
def init_tables(S, MX):
    """Initial mixer weights, adaptive maps and the first APM (all identity maps). The blocks
    of rows chosen by a byte are built when first used (ready_rows): a small file reads a
    few of their 64 MB."""
    nin = S[S_NIN]
    K = S[S_K]
    w = MX[S[S_W]:S[S_W] + 3 * (K + 1) * ALPHABET * nin]
    for c in range(nin):
        short = initial_weight(S, MX, c, False)
        long = initial_weight(S, MX, c, True)
        for i in range(3 * (K + 1) * ALPHABET):
            w[i * nin + c] = long if i >= 2 * (K + 1) * ALPHABET else short
    if S[S_SEL] > 1:
        final = W_INIT_FINAL if S[S_SEL] == 2 else W_INIT_FINAL3
        for i in range(512):
            MX[S[S_WF] + i] = final
        if S[S_SEL] > 2:
            for i in range(ALPHABET):
                MX[S[S_WF3] + i] = final
        if S[S_SEL] > 3:
            for i in range(4 * ALPHABET):
                MX[S[S_WF4] + i] = W_INIT_FINAL4
        if S[S_SEL] > 4:  # the final mixer's four weights on text, all on binary data
            for i in range(MAX_SELECTORS * ALPHABET):
                MX[S[S_WF5] + i] = W_INIT_FINAL4 if i % MAX_SELECTORS < 4 else 0.0
                MX[S[S_WF5] + MAX_SELECTORS * ALPHABET + i] = 1.0 / S[S_SEL]
            for c in range(nin):
                v = initial_weight(S, MX, c, False)
                for i in range(depth_sets(S[S_SEL] - 4)):
                    MX[S[S_W5] + i * nin + c] = v
    sm = MX[S[S_SM]:]
    cells = 1 << cx.MAP_P_BITS
    for cell in range(K * cx.MAP_COUNTS * cells):
        p = ((cell & (cells - 1)) + 0.5) / cells  # the centre of the cell's probabilities
        sm[cell] = log64(p) - log64(1.0 - p)
    init_apm(MX, S[S_A1], ALPHABET)


@jit
def init_apm(MX, base, rows):
    """rows APM rows from `base`, each the identity map."""
    for j in range(APM_CELLS):
        v = sigmoid64((j - 16) * 0.5)
        for i in range(rows):
            MX[base + i * APM_CELLS + j] = v


@jit
def init_weight_rows(S, MX, base):
    """A selector byte's block of ALPHABET weight rows from `base`: the first weight set's
    starting weights (short matches), as the second and third mixers start."""
    nin = S[S_NIN]
    for c in range(nin):
        v = initial_weight(S, MX, c, False)
        for i in range(ALPHABET):
            MX[base + i * nin + c] = v


@jit
def ready_rows(S, MX):
    """Build, on first use, the blocks of rows the next byte reads: the second and third
    mixers' weights and the second APM's rows for their selector bytes, the order-2 APM's
    for its context. Called before any node of a byte is mixed (predict, prepare); learn
    reads the same rows."""
    nin = S[S_NIN]
    ca = apm_selector(S)
    if S[R_A2 + ca] == 0:
        init_apm(MX, S[S_A2] + (ca << 8) * APM_CELLS, ALPHABET)
        S[R_A2 + ca] = 1
    c1 = second_selector(S)
    if S[S_SEL] > 1 and S[R_W2 + c1] == 0:
        init_weight_rows(S, MX, S[S_W2] + (c1 << 8) * nin)
        S[R_W2 + c1] = 1
    c2 = third_selector(S)
    if S[S_SEL] > 2 and S[R_W3 + c2] == 0:
        init_weight_rows(S, MX, S[S_W3] + (c2 << 8) * nin)
        S[R_W3 + c2] = 1
    if S[S_SEL] > 3:
        c4 = fourth_selector(S)
        if S[R_W4 + c4] == 0:
            init_weight_rows(S, MX, S[S_W4] + (c4 << 8) * nin)
            S[R_W4 + c4] = 1
    if S[S_A3] != 0:
        h = sse2_context(S)
        if S[R_A3 + h] == 0:
            init_apm(MX, S[S_A3] + (h << 8) * APM_CELLS, ALPHABET)
            S[R_A3 + h] = 1


@jit
def image_column(S):
    """The image model's first input column (after the network's, if any)."""
    return 2 * S[S_K] + 2 + int(S[S_NET] != NET_OFF)


@jit
def delta_column(S):
    """The column-delta model's first input column (after the image model's, if any)."""
    return image_column(S) + image.IMAGE_INPUTS * S[image.S_IMG_ON]


@jit
def slot_group(node):
    """Which nibble slot a tree node reads: 0 (high nibble) or 1 + the high nibble."""
    if node < 16:
        return 0
    d = 4
    while node >= (2 << d):
        d += 1
    return 1 + ((node >> (d - 4)) & 15)


@jit
def match_state(S):
    return 0 if S[S_EXPECT] < 0 else (1 if S[S_LEN] < 16 else 2)


@jit
def known_models(S, j):
    """How many context models own their slot for nibble slot j of the current context; with
    order_sets while the data is binary, how many byte orders do (there the other kinds,
    sparse and record contexts, are nearly always known and say nothing of how long a
    context the data repeats: the Unicode-table tuning slices -0.35 %, text worse)."""
    only_orders = S[S_ORDER_SETS] != 0 and S[cx.S_BINARY] != 0
    known = 0
    for o in range(S[S_K]):
        if only_orders and not 1 <= S[cx.S_ORDERS + o] <= cx.MAX_BYTE_ORDER:
            continue
        known += S[S_SLOTS + 17 * o + j] >= 0
    return known


@jit(inline="always")
def filler_sets(S):
    """With filler_sets on binary data: FILLER_SETS_AT after a(1) = 0 or 0xFF (a table's
    empty entries and padding, the high bytes of small numbers), else 0 (the Unicode-table
    tuning slices -0.12 %, other binaries -0.03 %)."""
    if S[S_FILLER_SETS] != 0 and S[cx.S_BINARY] != 0:
        a1 = S[cx.S_HIST] & 0xFF
        if a1 == 0 or a1 == 0xFF:
            return FILLER_SETS_AT
    return 0


@jit(inline="always")
def set_base(S):
    """The first of the first mixer's weight sets for the next byte before the count of
    known models: by match state (and with filler_sets whether a(1) is a filler byte)."""
    return match_state(S) * (S[S_K] + 1) + filler_sets(S)


@jit
def weight_set(S, node):
    """Weights are chosen by tree node, match state and how many models know the context
    (set_base, known_models)."""
    return (set_base(S) + known_models(S, slot_group(node))) * ALPHABET + node


@jit
def weight_sets(S, out):
    """weight_set for every node 1..255 at once (the slot groups' counts computed once)."""
    base = set_base(S)
    known = np.empty(17, dtype=np.int64)
    for j in range(17):
        known[j] = known_models(S, j)
    for n in range(1, ALPHABET):
        out[n] = (base + known[slot_group(n)]) * ALPHABET + n


@jit
def apm_point(dot):
    u = (min(max(dot, -7.999), 7.999) + 8.0) * 2.0
    j = int(np.floor(u))
    return j, u - j


@jit
def apm_rows(S, node):
    c1 = apm_selector(S)
    return S[S_A1] + node * APM_CELLS, S[S_A2] + ((c1 << 8) | node) * APM_CELLS


@jit(inline="always")
def apm_selector(S):
    """The byte that chooses the second APM's row: the second mixer's, or while the
    column-delta model is heard with delta_apm, the next byte's column."""
    column = delta.apm_selector(S)
    if column >= 0:
        return column
    return second_selector(S)


@jit(inline="always")
def second_selector(S):
    """The byte that chooses the second mixer's weight set and the second APM's row: the
    previous byte, or while a record chain is followed, the next byte's field (sheet.py), or
    while the data is words, the fields of the word read so far (exe.py), while it is x86
    code, the instruction's field (x86.py), while it is RISC-V, s390x or Thumb-2 code,
    the instruction's place and class (riscv.py, s390x.py, thumb.py); inside a class file, a
    compiled Python module or WebAssembly code its field (jvm.py, pyc.py, wasm.py)."""
    if S[sheet.S_SH_ON] != 0 and S[sheet.S_SH_SEL] >= 0:
        return S[sheet.S_SH_SEL]
    if S[jvm.S_J_SEL] >= 0:
        return S[jvm.S_J_SEL]
    if S[pyc.S_P_SEL] >= 0:
        return S[pyc.S_P_SEL]
    if S[wasm.S_W_SEL] >= 0:
        return S[wasm.S_W_SEL]
    if S[exe.S_EXE_SEL] >= 0:
        return S[exe.S_EXE_SEL]
    if S[x86.S_X86_SEL] >= 0:
        return S[x86.S_X86_SEL]
    if S[riscv.S_RV_SEL] >= 0:
        return S[riscv.S_RV_SEL]
    if S[s390x.S_Z_SEL] >= 0:
        return S[s390x.S_Z_SEL]
    if S[thumb.S_T_SEL] >= 0:
        return S[thumb.S_T_SEL]
    return S[cx.S_HIST] & 0xFF


@jit(inline="always")
def third_selector(S):
    """The byte that chooses the third mixer's weight set: a(2), the one before the last, or
    while the column-delta model is heard with delta_select, the next byte's column."""
    column = delta.selector(S)
    if column >= 0:
        return column
    return (S[cx.S_HIST] >> 8) & 0xFF


@jit(inline="always")
def fourth_selector(S):
    """The fourth mixer's weight set: while the next byte is binary, the longest run, among
    the models' contexts, that the last byte continued or began (cx.S_RUNS_CODED, capped):
    how steadily the contexts had been predicting (the Unicode-table tuning slices -0.36 %;
    the same with the number of contexts that had predicted it -0.28 %, the next byte's
    contexts' agreement on their predicted byte +0.14 %); on text, a(3)'s top nibble (the
    Canterbury texts -0.01 to -0.37 %; the run there: -0.02 % on the small ones)."""
    if S[cx.S_BINARY] != 0:
        return min(S[cx.S_RUNS_CODED], RUN_SETS - 1)
    return RUN_SETS + ((S[cx.S_HIST] >> 20) & 15)


@jit(inline="always")
def depth_selector(S, node, d, e):
    """Depth mixer e's selector value at a node of depth d (paq8px's mixer contexts, whose
    sets are not per node: four of them took the Unicode-table tuning slices -1.60 %):
    0: the byte's place in a 4-byte word and a(1)'s top nibble;
    1: how many models know the context (known_models, at most 7; on binary data with
    order_sets the byte orders), a(1)'s top two bits, whether a(1) = a(2);
    2: the match model's state at this node: no match, off its expected byte's path (by
    length), or on it (by length and the expected bit);
    3: a(3)'s top six bits."""
    hist = S[cx.S_HIST]
    if e == 0:
        return ((S[cx.S_POS] & 3) << 4) | ((hist & 0xFF) >> 4)
    if e == 1:
        a1 = hist & 0xFF
        return (min(known_models(S, slot_group(node)), 7) * 8 + (a1 >> 6) * 2
                + int(a1 == ((hist >> 8) & 0xFF)))
    if e == 2:
        expected = S[cx.S_EXPECT]
        if expected < 0:
            return 0
        length = min(S[cx.S_LEN], 15)
        if node - (1 << d) != expected >> (8 - d):
            return 1 + length
        return 17 + 2 * length + ((expected >> (7 - d)) & 1)
    return (hist >> 18) & 63


@jit(inline="always")
def depth_set(S, node, d, e):
    """Depth mixer e's weight set at a node of depth d: its selector's value and d."""
    return ((DEPTH_FIRST[e] + depth_selector(S, node, d, e)) << 3) | d


@jit(inline="always")
def apm_learn(MX, r, j, f, bit, rate):
    """The two cells around the point move toward the bit, by their share of it."""
    MX[r + j] += rate * (1.0 - f) * (bit - MX[r + j])
    MX[r + j + 1] += rate * f * (bit - MX[r + j + 1])


@jit
def sse2_context(S):
    """The order-2 APM's context for the next byte: a(1) and a(2) hashed (to mix sse2_bits)."""
    return cx.hash32((S[cx.S_HIST] & 0xFFFF) * 0x2C1B3C6D + 0x7F4A7C15) >> (32 - S[cx.S_SSE2_BITS])


@jit
def sse2_row(S):
    """The order-2 APM's first row for the next byte."""
    return S[S_A3] + (sse2_context(S) << 8) * APM_CELLS


@jit(inline="always")
def text_gate(S, MX):
    """The network input's scale: 1 without the gate, else by how text-like the data is."""
    if S[S_GATE] == 0:
        return 1.0
    g = (MX[MX_TEXT] - GATE_LO) / (GATE_HI - GATE_LO)
    return min(max(g, 0.0), 1.0)


@jit(inline="always")
def text_likeness(byte):
    return 0.5 * text_class(byte)  # 1.0, 0.5 or 0.0


@jit
def subtree_sums(q, S, MX):
    """T[n] (in MX): the network's softmax mass under tree node n (T[256 + s] = q[s])."""
    T = MX[S[S_SUM]:S[S_SUM] + 512]
    for s in range(ALPHABET):
        T[ALPHABET + s] = q[s]
    for n in range(255, 0, -1):
        T[n] = T[2 * n] + T[2 * n + 1]
    return T


@jit
def net_inputs(q, S, MX, X, col):
    """X[node, col] = ln(Q1 / Q0) from the network's softmax q; subtree sums kept in MX."""
    T = subtree_sums(q, S, MX)
    r = np.empty(512, dtype=np.float64)  # ratios at nodes 1..255 (0 is a spare), scratch
    for n in range(ALPHABET):
        r[n] = max(T[2 * n + 1], 1e-30) / max(T[2 * n], 1e-30)
    log_positive_array(r[:ALPHABET], r[ALPHABET:])  # = log64 of each ratio, vectorised
    if S[S_GATE] == 0:
        for n in range(1, ALPHABET):
            X[n, col] = min(max(r[n], -NET_CLAMP), NET_CLAMP)
    else:
        g = text_gate(S, MX)
        for n in range(1, ALPHABET):
            X[n, col] = min(max(r[n], -NET_CLAMP), NET_CLAMP) * g


@jit
def node_dots(MX, X, base, rows, nin, out):
    """out[n] = sum_c w_n[c] * X[n, c] for nodes 1..255, w_n the weight row rows[n] at
    `base`; each sum in input order (float32 products, float64 sum), four nodes side by
    side so their dependency chains overlap (same bits as one node at a time)."""
    n = 1
    while n + 3 < ALPHABET:
        a0 = base + rows[n] * nin
        a1 = base + rows[n + 1] * nin
        a2 = base + rows[n + 2] * nin
        a3 = base + rows[n + 3] * nin
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for c in range(nin):
            s0 += MX[a0 + c] * X[n, c]
            s1 += MX[a1 + c] * X[n + 1, c]
            s2 += MX[a2 + c] * X[n + 2, c]
            s3 += MX[a3 + c] * X[n + 3, c]
        out[n] = s0
        out[n + 1] = s1
        out[n + 2] = s2
        out[n + 3] = s3
        n += 4
    while n < ALPHABET:
        a0 = base + rows[n] * nin
        s0 = 0.0
        for c in range(nin):
            s0 += MX[a0 + c] * X[n, c]
        out[n] = s0
        n += 1


@jit(inline="always")
def final_weights(S, node, four):
    """Where the final mixer's weights of a node's mixers lie: the first two's and the
    third's, or with four selectors a set of four of their own (each starting at
    W_INIT_FINAL4: the four summing to 1 measured better than a fourth added to three that
    do, -0.37 % against -0.25 % on the Unicode-table tuning slices)."""
    if S[S_SEL] > 4:  # the depth mixers' weights follow (depth_weight)
        f = final_row(S, node)
        return f, f + 1, f + 2, f + 3
    if four:
        f = S[S_WF4] + 4 * node
        return f, f + 1, f + 2, f + 3
    f = S[S_WF] + 2 * node
    return f, f + 1, S[S_WF3] + node, 0


@jit(inline="always")
def final_row(S, node):
    """With depth mixers, where a node's final weights lie: text's row (the first four
    mixers', as with four selectors, so text codes as it did: with them on text too, small
    files were up to 0.9 % worse) or binary data's."""
    return S[S_WF5] + MAX_SELECTORS * (node + ALPHABET * S[cx.S_BINARY])


@jit(inline="always")
def depth_mixers(S):
    """How many depth mixers are heard for the next byte: none on text."""
    return max(S[S_SEL] - 4, 0) if S[cx.S_BINARY] != 0 else 0


@jit(inline="always")
def depth_weight(S, node, e):
    """Where depth mixer e's weight in the final mixer at a node lies."""
    return final_row(S, node) + 4 + e


@jit(inline="always")
def depth_output(S, node, e):
    """Where depth mixer e's sum at a node is kept (predict and node_probability write it,
    final_logit clamps it, learn reads it)."""
    return S[S_ZS5] + e * ALPHABET + node


@jit
def depth_dots(S, MX, X, node, d, nin):
    """Each depth mixer's sum at a node of depth d, kept at depth_output."""
    for e in range(depth_mixers(S)):
        MX[depth_output(S, node, e)] = row_dot(MX, X, S[S_W5] + depth_set(S, node, d, e) * nin,
                                               node, nin)


@jit(inline="always")
def final_logit(S, MX, X, node, d, z1, z2, z3, z4, selectors, four, image_live):
    """A node's logit from its mixers' sums (z2, z3, z4: with two, three or four
    selectors; the depth mixers' at depth_output): each clamped, the final mixer's blend of
    them clamped (their outputs kept in MX for learn), then the image model's switch while
    it is live (image.live; the flags read once a byte by the caller, which keeps its loop
    over nodes free of them)."""
    z = min(max(z1, -MAX_LOGIT), MAX_LOGIT)
    if selectors > 1:
        z2 = min(max(z2, -MAX_LOGIT), MAX_LOGIT)
        MX[S[S_ZS] + 2 * node] = z
        MX[S[S_ZS] + 2 * node + 1] = z2
        f1, f2, f3, f4 = final_weights(S, node, four)
        z = MX[f1] * z + MX[f2] * z2
        if selectors > 2:
            z3 = min(max(z3, -MAX_LOGIT), MAX_LOGIT)
            MX[S[S_ZS3] + node] = z3
            z += MX[f3] * z3
        if four:
            z4 = min(max(z4, -MAX_LOGIT), MAX_LOGIT)
            MX[S[S_ZS4] + node] = z4
            z += MX[f4] * z4
        for e in range(depth_mixers(S)):
            at = depth_output(S, node, e)
            ze = min(max(MX[at], -MAX_LOGIT), MAX_LOGIT)
            MX[at] = ze
            z += MX[depth_weight(S, node, e)] * ze
        z = min(max(z, -MAX_LOGIT), MAX_LOGIT)
    if image_live:
        z = image.switch(S, MX, X, image_column(S), node, d, z)
    return z


@jit(inline="always")
def refined(S, MX, node, z, p, sse2):
    """A node's probability of a 1: the mixer's p = sigmoid(z) blended with the APM stages'
    (by node; by the second selector and node; with sse2 by the last two bytes, whose row
    S[S_A3_ROW] is set for the byte), clamped to [P_MIN, 1 - P_MIN]."""
    j, f = apm_point(z)
    r1, r2 = apm_rows(S, node)
    a1 = MX[r1 + j] * (1.0 - f) + MX[r1 + j + 1] * f
    a2 = MX[r2 + j] * (1.0 - f) + MX[r2 + j + 1] * f
    if sse2:
        r3 = S[S_A3_ROW] + node * APM_CELLS
        a3 = MX[r3 + j] * (1.0 - f) + MX[r3 + j + 1] * f
        pf = SSE_P * p + SSE_A1 * a1 + SSE_A2 * a2 + SSE_A3 * a3
    else:
        pf = 0.5 * p + 0.25 * a1 + 0.25 * a2
    return min(max(pf, P_MIN), 1.0 - P_MIN)


@jit(inline="always")
def expected_column(S):
    """The last input's expected byte and its counter (mix field sheet_expect): the
    spreadsheet model's, else the step model's (step_expect); byte -1: none."""
    if S[sheet.S_SH_X_BYTE] >= 0:
        return S[sheet.S_SH_X_BYTE], S[sheet.S_SH_X_COUNTER]
    return S[steps.S_ST_BYTE], S[steps.S_ST_COUNTER]


@jit
def predict(q, CT, S, MX, ST, floor, P):
    """Mix every tree node and write the coded distribution of the next byte into P."""
    ready_rows(S, MX)
    nin = S[S_NIN]
    K = S[S_K]
    X = MX[S[S_X]:S[S_X] + ALPHABET * nin].reshape((ALPHABET, nin))
    node_inputs(CT, S, ST, MX[S[S_SM]:], X, 0)
    match_inputs(CT, S, ST, X, 2 * K)
    for n in range(ALPHABET):
        X[n, 2 * K + 1] = 0.5
    if S[S_NET]:
        net_inputs(q, S, MX, X, 2 * K + 2)
    if S[image.S_IMG_ON]:
        image.image_inputs(CT, S, MX, ST, X, image_column(S))
    if S[delta.S_DL_ON]:
        delta.inputs(CT, S, ST, X, delta_column(S))
    if S[sheet.S_SH_X_ON]:
        e, i = expected_column(S)
        cx.expected_byte_inputs(CT, ST, X, nin - 1, e, i)
    dot = MX[S[S_DOT]:S[S_DOT] + ALPHABET]
    pm = MX[S[S_PM]:S[S_PM] + ALPHABET]
    pr = np.empty(512, dtype=np.float64)
    pr[1] = 1.0
    wset = np.empty(ALPHABET, dtype=np.int64)
    weight_sets(S, wset)
    zf = np.empty(ALPHABET, dtype=np.float64)  # each node's mixed logit, then its sigmoid
    pf64 = np.empty(ALPHABET, dtype=np.float64)
    z1s = np.empty(ALPHABET, dtype=np.float64)
    z2s = np.zeros(ALPHABET, dtype=np.float64)
    z3s = np.zeros(ALPHABET, dtype=np.float64)
    z4s = np.zeros(ALPHABET, dtype=np.float64)
    node_dots(MX, X, S[S_W], wset, nin, z1s)
    if S[S_SEL] > 1:  # a second mixer, weights by previous byte and node
        c1 = second_selector(S)
        for n in range(ALPHABET):
            wset[n] = (c1 << 8) | n
        node_dots(MX, X, S[S_W2], wset, nin, z2s)
    if S[S_SEL] > 2:  # a third, by the byte before the previous one and node
        c2 = third_selector(S)
        for n in range(ALPHABET):
            wset[n] = (c2 << 8) | n
        node_dots(MX, X, S[S_W3], wset, nin, z3s)
    four = S[S_SEL] > 3
    if four:  # a fourth, by fourth_selector and node
        c4 = fourth_selector(S)
        for n in range(ALPHABET):
            wset[n] = (c4 << 8) | n
        node_dots(MX, X, S[S_W4], wset, nin, z4s)
    selectors = S[S_SEL]
    image_live = image.live(S)
    d = 0
    for n in range(1, ALPHABET):
        if n == 2 << d:
            d += 1
        depth_dots(S, MX, X, n, d, nin)
        z = final_logit(S, MX, X, n, d, z1s[n], z2s[n], z3s[n], z4s[n], selectors, four,
                        image_live)
        dot[n] = z
        zf[n] = z  # float64: the float32 MX rounds
    sigmoid64_vector(zf[1:], pf64[1:])  # every node's sigmoid64 in one vector pass
    sse2 = S[S_A3] != 0
    if sse2:
        S[S_A3_ROW] = sse2_row(S)
    delta_on = S[delta.S_DL_ON] != 0
    for n in range(1, ALPHABET):
        pm[n] = pf64[n]
        pf = refined(S, MX, n, zf[n], pf64[n], sse2)
        if delta_on:
            MX[S[delta.S_DL_MX] + delta.MX_PF + n] = pf
        pr[2 * n + 1] = pr[n] * pf
        pr[2 * n] = pr[n] * (1.0 - pf)
    keep = 1.0 - ALPHABET * floor
    if delta_on:
        delta.switch_row(CT, S, MX, pr, P, keep, floor)
        return
    for s in range(ALPHABET):
        P[s] = keep * pr[ALPHABET + s] + floor


@jit
def prepare(q, S, MX):
    """Path coding: what every node of the next byte shares (the network's subtree sums,
    the order-2 APM's row); node_probability then mixes each node of the coded path."""
    ready_rows(S, MX)
    if S[S_NET]:
        subtree_sums(q, S, MX)
    if S[S_A3] != 0:
        S[S_A3_ROW] = sse2_row(S)


@jit(inline="always")
def net_input_at(S, MX, node):
    """net_inputs' value at one node, from the subtree sums prepare kept."""
    T = MX[S[S_SUM]:S[S_SUM] + 512]
    r = max(T[2 * node + 1], 1e-30) / max(T[2 * node], 1e-30)
    v = min(max(log64(r), -NET_CLAMP), NET_CLAMP)
    return v if S[S_GATE] == 0 else v * text_gate(S, MX)


@jit(inline="always")
def row_dot(MX, X, at, node, nin):
    """One node's sum as node_dots forms it (input order, float32 products, float64 sum)."""
    s = 0.0
    for c in range(nin):
        s += MX[at + c] * X[node, c]
    return s


@jit
def node_probability(CT, S, MX, ST, node, d):
    """Path coding: the probability that node `node` (depth d) of the coded path is a 1,
    with exactly predict's arithmetic for that node (its inputs, mixers, APMs, kept in MX
    for learn), so a card codes with the same node probabilities either way. The nodes of a
    byte are asked in path order, after prepare; a nibble's slots are found on entering it."""
    nin = S[S_NIN]
    K = S[S_K]
    X = MX[S[S_X]:S[S_X] + ALPHABET * nin].reshape((ALPHABET, nin))
    group = 0 if d < 4 else 1 + ((node >> (d - 4)) & 15)  # slot_group, from the depth
    if d == 0 or d == 4:
        cx.find_group_slots(CT, S, group)
    cx.node_inputs_at(CT, S, ST, MX[S[S_SM]:], X, 0, node, d, group)
    X[node, 2 * K] = cx.match_input(CT, S, ST, node, d)
    X[node, 2 * K + 1] = 0.5
    if S[S_NET]:
        X[node, 2 * K + 2] = net_input_at(S, MX, node)
    if S[image.S_IMG_ON]:
        X[node, image_column(S)] = image.image_input_at(CT, S, MX, ST, node, d)
    if S[delta.S_DL_ON]:
        dc = delta_column(S)
        for k in range(delta.INPUTS):
            X[node, dc + k] = delta.input_at(CT, S, ST, k, node)
    if S[sheet.S_SH_X_ON]:
        e, i = expected_column(S)
        X[node, nin - 1] = cx.expected_byte_input(CT, ST, e, i, node, d)
    z1 = row_dot(MX, X, S[S_W] + weight_set(S, node) * nin, node, nin)
    z2 = z3 = z4 = 0.0
    if S[S_SEL] > 1:
        z2 = row_dot(MX, X, S[S_W2] + ((second_selector(S) << 8) | node) * nin, node, nin)
    if S[S_SEL] > 2:
        z3 = row_dot(MX, X, S[S_W3] + ((third_selector(S) << 8) | node) * nin, node, nin)
    four = S[S_SEL] > 3
    if four:
        z4 = row_dot(MX, X, S[S_W4] + ((fourth_selector(S) << 8) | node) * nin, node, nin)
    depth_dots(S, MX, X, node, d, nin)
    z = final_logit(S, MX, X, node, d, z1, z2, z3, z4, S[S_SEL], four, image.live(S))
    MX[S[S_DOT] + node] = z
    p = sigmoid64(z)
    MX[S[S_PM] + node] = p
    pf = refined(S, MX, node, z, p, S[S_A3] != 0)
    if S[delta.S_DL_ON]:
        pf = min(max(delta.switch_at(CT, S, MX, node, d, pf), P_MIN), 1.0 - P_MIN)
    return pf


@jit
def set_rate(MX, at, lr):
    """A weight set's learning rate: the mixer's starting rate decayed by the set's own update
    count (so a rarely chosen set still learns fast late in a stream), never below the
    mixer-wide rate lr; counts the update."""
    n = MX[at]
    MX[at] = n + 1.0
    return max(MX[MX_LR] / np.sqrt(1.0 + n / MX[MX_SET_DECAY]), lr)


@jit
def set_rates(S, MX, lr, set1, c1, node, four):
    """The mixers' rates at this node (set_decay): by their chosen sets' counts."""
    at = S[S_CNT]
    lr1 = set_rate(MX, at + set1, lr)
    lr2 = lr3 = lr4 = lr
    at += 3 * (S[S_K] + 1) * ALPHABET
    if S[S_SEL] > 1:
        lr2 = set_rate(MX, at + ((c1 << 8) | node), lr)
        at += ALPHABET * ALPHABET
    if S[S_SEL] > 2:
        lr3 = set_rate(MX, at + ((third_selector(S) << 8) | node), lr)
        at += ALPHABET * ALPHABET
    if four:
        lr4 = set_rate(MX, at + ((fourth_selector(S) << 8) | node), lr)
    return lr1, lr2, lr3, lr4


@jit(inline="always")
def depth_counts(S):
    """Where the depth mixers' sets' update counts begin (after the first four mixers')."""
    return (S[S_CNT] + 3 * (S[S_K] + 1) * ALPHABET + 2 * ALPHABET * ALPHABET
            + FOURTH_SETS * ALPHABET)


@jit(inline="always")
def learn_chosen(MX, X, node, nin, ws, z, f, bit, err, lr, rate, dnet, net_col):
    """A chosen mixer (the second, third, fourth or a depth mixer) at a node: its final weight f
    learns from the final error err at the mixer-wide rate lr, its weight row ws from its
    own error at `rate`. Returns dnet with this mixer's term of d(final logit) / d(network
    input) added first (the network's input in column net_col; -1: none or not asked),
    unless its sum was clamped."""
    if net_col >= 0 and abs(z) < MAX_LOGIT:
        dnet += MX[f] * MX[ws + net_col]
    MX[f] += lr * err * z
    own = bit - sigmoid64(z)
    for c in range(nin):
        MX[ws + c] += rate * own * X[node, c]
    return dnet


@jit
def learn(byte, CT, S, MX, ST, gz):
    """Learn the coded byte: mixer weights, APMs, match and context counters. With the
    network mixed in, gz gets d(mixer loss)/d(network logits)."""
    symbol = np.int64(byte)
    nin = S[S_NIN]
    K = S[S_K]
    X = MX[S[S_X]:S[S_X] + ALPHABET * nin].reshape((ALPHABET, nin))
    dot = MX[S[S_DOT]:S[S_DOT] + ALPHABET]
    pm = MX[S[S_PM]:S[S_PM] + ALPHABET]
    seen = MX[MX_SEEN]
    lr = max(MX[MX_LR] / np.sqrt(1.0 + seen / MX[MX_LR_DECAY]), MX[MX_LR_MIN])
    lr1 = lr2 = lr3 = lr4 = lr
    rate = MX[MX_APM_RATE]
    net = S[S_NET] == NET_LEARNS  # a frozen network (NET_FROZEN) needs no gradient
    gate = text_gate(S, MX)  # the scale predict used (updated at the end)
    if net:
        for s in range(ALPHABET):
            gz[s] = 0.0
        T = MX[S[S_SUM]:S[S_SUM] + 512]
    two = S[S_SEL] > 1
    three = S[S_SEL] > 2
    four = S[S_SEL] > 3
    c1 = second_selector(S)
    image_live = image.live(S)
    node = 1
    for d in range(8):
        bit = (symbol >> (7 - d)) & 1
        set1 = weight_set(S, node)
        ws = S[S_W] + set1 * nin
        if S[S_CNT] != 0:
            lr1, lr2, lr3, lr4 = set_rates(S, MX, lr, set1, c1, node, four)
        err = bit - pm[node]
        if image_live:
            image.learn_switch(S, MX, X, image_column(S), node, d, err)
        if two:
            ws2 = S[S_W2] + ((c1 << 8) | node) * nin
            f1, f2, f3, f4 = final_weights(S, node, four)
            z1 = MX[S[S_ZS] + 2 * node]
            z2 = MX[S[S_ZS] + 2 * node + 1]
            # d(final logit) / d(network input), through each mixer that is not clamped
            dnet = 0.0
            net_col = 2 * K + 2 if net else -1
            if net:
                if abs(z1) < MAX_LOGIT:
                    dnet += MX[f1] * MX[ws + net_col]
                if abs(z2) < MAX_LOGIT:
                    dnet += MX[f2] * MX[ws2 + net_col]
            if four:
                ws4 = S[S_W4] + ((fourth_selector(S) << 8) | node) * nin
                dnet = learn_chosen(MX, X, node, nin, ws4, MX[S[S_ZS4] + node], f4, bit, err,
                                    lr, lr4, dnet, net_col)
            for e in range(depth_mixers(S)):
                set_e = depth_set(S, node, d, e)
                lr_e = lr if S[S_CNT] == 0 else set_rate(MX, depth_counts(S) + set_e, lr)
                dnet = learn_chosen(MX, X, node, nin, S[S_W5] + set_e * nin,
                                    MX[depth_output(S, node, e)], depth_weight(S, node, e), bit,
                                    err, lr, lr_e, dnet, net_col)
            if three:
                ws3 = S[S_W3] + ((third_selector(S) << 8) | node) * nin
                dnet = learn_chosen(MX, X, node, nin, ws3, MX[S[S_ZS3] + node], f3, bit, err,
                                    lr, lr3, dnet, net_col)
            MX[f1] += lr * err * z1
            learn_chosen(MX, X, node, nin, ws2, z2, f2, bit, err, lr, lr2, 0.0, -1)  # (dnet above)
        else:
            dnet = MX[ws + 2 * K + 2] if net else 0.0
        if net and abs(X[node, 2 * K + 2]) < NET_CLAMP * gate:  # a clamped one passes nothing
            g_logodds = -err * dnet * gate  # d(-ln p_mix(bit)) / d(network logits' log-odds)
            lo = (2 * node) << (7 - d)
            width = 1 << (7 - d)
            inv0 = 1.0 / max(T[2 * node], 1e-30)
            inv1 = 1.0 / max(T[2 * node + 1], 1e-30)
            for s in range(width):
                gz[lo - ALPHABET + s] -= g_logodds * T[lo + s] * inv0
                gz[lo - ALPHABET + width + s] += g_logodds * T[lo + width + s] * inv1
        if two:
            err = bit - sigmoid64(MX[S[S_ZS] + 2 * node])  # the first mixer learns alone too
        for c in range(nin):
            MX[ws + c] += lr1 * err * X[node, c]
        j, f = apm_point(dot[node])
        r1, r2 = apm_rows(S, node)
        for r in (r1, r2):
            apm_learn(MX, r, j, f, bit, rate)
        if S[S_A3] != 0:
            apm_learn(MX, S[S_A3_ROW] + node * APM_CELLS, j, f, bit, rate)
        node = 2 * node + bit
    match_learn(CT, S, symbol)
    image.image_learn(CT, S, MX, ST, symbol)
    sheet.expect_learn(CT, S, symbol)
    steps.learn(CT, S, symbol)
    delta.learn(CT, S, MX, symbol)
    update_models(CT, S, MX[S[S_SM]:], symbol, MX[MX_MAP_RATE])
    MX[MX_SEEN] = seen + 1.0
    if S[S_GATE] != 0:
        MX[MX_TEXT] += TEXT_RATE * (text_likeness(symbol) - MX[MX_TEXT])


@jit
def prefetch_rows(S, MX):
    """Start loading the weight rows and APM rows that the byte-chosen mixers and APMs will
    read for the next byte (each a contiguous block of 256 rows); not called with path
    coding, which reads 8 of them (loading them all measured slower)."""
    nin = S[S_NIN]
    c1 = second_selector(S)
    if S[S_SEL] > 1:
        at = S[S_W2] + (c1 << 8) * nin
        for i in range(0, ALPHABET * nin, 16):
            prefetch(MX, at + i)
    if S[S_SEL] > 2:
        at = S[S_W3] + (third_selector(S) << 8) * nin
        for i in range(0, ALPHABET * nin, 16):
            prefetch(MX, at + i)
    if S[S_SEL] > 3:
        at = S[S_W4] + (fourth_selector(S) << 8) * nin
        for i in range(0, ALPHABET * nin, 16):
            prefetch(MX, at + i)
    at = S[S_A2] + (apm_selector(S) << 8) * APM_CELLS
    for i in range(0, ALPHABET * APM_CELLS, 16):
        prefetch(MX, at + i)
    if S[S_A3] != 0:
        at = sse2_row(S)
        for i in range(0, ALPHABET * APM_CELLS, 16):
            prefetch(MX, at + i)


@jit
def stretch_table(n):
    """ST[i] = ln(p / (1 - p)) at the centre of bin i of n, p in (0, 1)."""
    ST = np.empty(n, dtype=np.float32)
    for i in range(n):
        p = (i + 0.5) / n
        ST[i] = log64(p) - log64(1.0 - p)
    return ST
