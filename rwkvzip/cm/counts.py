"""Byte-oriented count models, linearly mixed: the fast predictor (recipe field `counts`).

For every context order k, a table of rows of 256 integer counts (how often each byte
followed a context) gives the distribution counts/total. The coded distribution is a
weighted sum of these distributions, a match model's vote for the byte that followed the
last occurrence of the current context, and the uniform distribution:

    P(x) = floor + (1 - 256 floor) * (sum_i w_i q_i(x)) / (sum_i w_i)

Each input's weight w_i is read from a table chosen by the input's confidence context (its
row's total, and whether one byte or how large a share the largest count has; or the match
length), by the highest order whose context is known and by the class of the last byte
(letter, space, digit, other), so at most K + 2 weights take part per byte; they learn
online by the multiplicative rule w_i <- w_i (1 + r (q_i(y) / P(y) - 1)) (a damped Bayesian
update: r = 1 is Bayes' rule for a mixture), clamped to [W_MIN, W_MAX], with the rate
r = max(lr, LR_BOOST / (n + LR_BOOST_N)) falling with the weight's number of updates n.

Everything that decides a count is an integer; the float arithmetic runs in a fixed order
(sequential loops, no reductions LLVM may reorder), so every CPU computes the same bits.

Arrays (allocated by rwkvzip.cm.fastcm.CountArrays):
  C   uint16 (rows, ROW): row r holds 256 counts, then its check value, total, number of
      distinct bytes and largest count. Row 0 is order 0, rows 1..256 order 1 (by the last
      byte), then 2**bits rows for each hashed input (higher orders, the word context),
      handed out in order of need (so a small input touches little memory).
  S   int64: the state (history, match, current rows), settings, from S_MT on the match
      model's hash table (position after each hashed match_min-byte context), then each
      hashed input's table of 2**bits slots (row + 1, or 0). A context's hash names two
      slots; the one whose row holds its check value is its own, and an unknown context
      (predicting nothing) takes over an empty slot or the one with the smaller total.
  W   float32: W[0:256] the distribution of the next byte (what the coder uses), W[W_Z]
      the sum of the weights in use, settings, then the weight tables, then as many update
      counts (the weight at index j has its count at j + S[S_NW]).
  HB  uint8: the history ring of the match model.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm.history import (
    M32,
    extend_match,
    hash32,
    match_bucket,
    next_word,
    verified_length,
    word_context,
)
from rwkvzip.cm.layout import StateLayout
from rwkvzip.coding import coder
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.jit import jit

ROW = ALPHABET + 4  # uint16 per row: 256 counts, check, total, distinct, largest count
R_CHECK, R_TOTAL, R_DISTINCT, R_MAX = range(ALPHABET, ALPHABET + 4)
MAX_ORDERS = 9  # byte orders 0 ... 7 and the word context
WORD = 8  # the "order" of the word context: the current word's letters and the last byte
# (CountsConfig.orders: 0 ... 7 bytes, 8 the word. MixConfig.orders has its own codes, 0 the
# word and 8 no bytes: context.py. Both are stored in released cards, so both stay.)
NCONF = 64  # confidence contexts per input (count/distinct buckets, match lengths)

# The state S, every slot by name (layout.py); the match hash table and the inputs' hash
# tables follow its N_S slots
STATE = StateLayout("the count models' state S")
(S_POS, S_HIST, S_K, S_LIMIT, S_MBITS, S_MMIN, S_PTR, S_LEN, S_EXPECT, S_WORD,
 S_HBITS, S_NW) = STATE.add_each("pos", "hist", "inputs", "limit", "match_bits", "match_min",
                                 "ptr", "len", "expect", "word", "history_bits", "weight_count")
S_ORDER = STATE.add("order", MAX_ORDERS)  # context length of input i (ascending; WORD last)
S_BASE = STATE.add("base", MAX_ORDERS)  # first row of input i's rows in C
# log2 slots of input i's hash table (0: direct rows, orders 0 and 1)
S_BITS = STATE.add("table_bits", MAX_ORDERS)
# row of input i's current context, or -1 (unknown: no row holds it)
S_ROW = STATE.add("row", MAX_ORDERS)
S_CHK = STATE.add("check", MAX_ORDERS)  # check value of input i's current context
# weight index in use for input i (counts, then match, then uniform), or -1
S_WI = STATE.add("weight_index", MAX_ORDERS + 2)
# where input i's hash table starts in S (slot -> row + 1, 0: empty)
S_TAB = STATE.add("table", MAX_ORDERS)
S_SLOT = STATE.add("slot", MAX_ORDERS)  # the slot an unknown context takes over when learned
# rows of input i handed out so far (rows are handed out in order of need)
S_NEXT = STATE.add("next_row", MAX_ORDERS)
N_S = S_MT = STATE.size  # the match hash table starts here (then the inputs' hash tables)

# W slots
W_Z, W_LR, W_MIN_, W_MAX_, W_FLOOR = range(ALPHABET, ALPHABET + 5)
W_BASE = ALPHABET + 8  # the weight sets start here
W_MIN = 1.0 / 4096.0
W_MAX = 4096.0
LR_BOOST, LR_BOOST_N = 2.0, 4.0  # a weight's first updates are faster (see the top)
COUNT_CAP = 1000.0  # update counts stop here
BYTE_CLASSES = 4  # of the last byte, for choosing the weight set


def weight_sets(n_inputs: int) -> int:
    """Weight sets: by the highest known order (or none) and the last byte's class."""
    return BYTE_CLASSES * (n_inputs + 1)


def n_weights(n_inputs: int) -> int:
    return weight_sets(n_inputs) * (n_inputs + 2) * NCONF


def weights_size(n_inputs: int) -> int:
    """Floats in W: the distribution, settings, the weights and their update counts."""
    return W_BASE + 2 * n_weights(n_inputs)


@jit
def total_bucket(t):
    if t < 4:
        return t - 1
    if t < 6:
        return 3
    if t < 10:
        return 4
    if t < 20:
        return 5
    if t < 50:
        return 6
    return 7


@jit
def shape_bucket(C, r, t):
    """0: one byte seen in this context; 1 ... 7: the largest count's share of the total."""
    if C[r, R_DISTINCT] == 1:
        return 0
    return 1 + min(6, (8 * np.int64(C[r, R_MAX])) // t)


@jit
def byte_class(c):
    """0: a letter (or any byte >= 128), 1: space, 2: digit, 3: anything else."""
    if (97 <= c <= 122) or (65 <= c <= 90) or c >= 128:
        return 0
    if c == 32:
        return 1
    if 48 <= c <= 57:
        return 2
    return 3


@jit
def contexts(C, S):
    """Rows of every input's current context (from the history), and where an unknown
    context would go: of the two slots its hash names, an empty one, else the one whose row
    has the smaller total."""
    hist = S[S_HIST]
    for i in range(S[S_K]):
        k = S[S_ORDER + i]
        bits = S[S_BITS + i]
        if bits == 0:  # direct: order 0 has one row, order 1 one per last byte
            S[S_ROW + i] = S[S_BASE + i] + (hist & 0xFF if k == 1 else 0)
            continue
        if k == WORD:
            h = word_context(S[S_WORD], hist & 0xFF)
        else:
            h = hash32(k * 0x9E3779B1 + 0x5BD1E995)
            for j in range(k):
                h = hash32(h * 0x01000193 + ((hist >> (8 * j)) & 0xFF) + 1)
        chk = h & 0xFFFF
        S[S_CHK + i] = chk
        tab = S[S_TAB + i]
        slot = h >> (32 - bits)
        r0 = S[tab + slot] - 1
        r1 = S[tab + (slot ^ 1)] - 1
        if r0 >= 0 and np.int64(C[r0, R_CHECK]) == chk:
            S[S_ROW + i] = r0
        elif r1 >= 0 and np.int64(C[r1, R_CHECK]) == chk:
            S[S_ROW + i] = r1
        else:
            S[S_ROW + i] = -1
            if r0 >= 0 and (r1 < 0 or C[r1, R_TOTAL] < C[r0, R_TOTAL]):
                slot ^= 1
            S[S_SLOT + i] = slot


@jit
def known(C, S, i):
    """Whether a row holds input i's current context."""
    return S[S_ROW + i] >= 0


@jit
def predict(C, S, W):
    """The distribution of the next byte into W[0:256]; records the weights in use."""
    K = S[S_K]
    nin = K + 2
    h = 0
    for i in range(K):
        if S[S_ORDER + i] != WORD and known(C, S, i) and C[S[S_ROW + i], R_TOTAL] > 0:
            h = i
    wset = W_BASE + (BYTE_CLASSES * h + byte_class(S[S_HIST] & 0xFF)) * nin * NCONF
    P = W[:ALPHABET]
    wu = W[wset + (K + 1) * NCONF]
    S[S_WI + K + 1] = wset + (K + 1) * NCONF
    z = np.float64(wu)
    u = np.float32(wu) / np.float32(ALPHABET)
    for x in range(ALPHABET):
        P[x] = u
    for i in range(K):
        S[S_WI + i] = -1
        r = S[S_ROW + i]
        if not known(C, S, i):
            continue
        t = np.int64(C[r, R_TOTAL])
        if t == 0:
            continue
        wi = wset + i * NCONF + total_bucket(t) * 8 + shape_bucket(C, r, t)
        S[S_WI + i] = wi
        w = W[wi]
        z += w
        s = w / np.float32(t)
        row = C[r]
        for x in range(ALPHABET):
            P[x] += s * np.float32(row[x])
    S[S_WI + K] = -1
    e = S[S_EXPECT]
    if e >= 0:
        wi = wset + K * NCONF + match_bucket(S[S_LEN], NCONF)
        S[S_WI + K] = wi
        z += W[wi]
        P[e] += W[wi]
    W[W_Z] = z
    floor = W[W_FLOOR]
    scale = np.float32((1.0 - ALPHABET * floor) / z)
    for x in range(ALPHABET):
        P[x] = floor + scale * P[x]


@jit
def input_q(C, S, i, y):
    """Input i's probability of byte y (orders, then match, then uniform)."""
    K = S[S_K]
    if i == K + 1:
        return 1.0 / ALPHABET
    if i == K:
        return 1.0 if S[S_EXPECT] == y else 0.0
    r = S[S_ROW + i]
    return np.float64(C[r, y]) / np.float64(C[r, R_TOTAL])


@jit
def learn_weights(C, S, W, y):
    """Move the weights in use towards the inputs that gave the coded byte y more mass."""
    n = S[S_K] + 2
    num = 0.0
    for i in range(n):
        wi = S[S_WI + i]
        if wi >= 0:
            num += W[wi] * input_q(C, S, i, y)
    inv = np.float64(W[W_Z]) / num  # 1 / P(y) of the mixture before the floor
    lr = np.float64(W[W_LR])
    nw = S[S_NW]
    for i in range(n):
        wi = S[S_WI + i]
        if wi >= 0:
            updates = np.float64(W[wi + nw])
            if updates < COUNT_CAP:
                W[wi + nw] = updates + 1.0
            rate = max(lr, LR_BOOST / (updates + LR_BOOST_N))
            w = np.float64(W[wi]) * (1.0 + rate * (input_q(C, S, i, y) * inv - 1.0))
            W[wi] = min(max(w, W_MIN), W_MAX)


@jit
def learn_counts(C, S, y):
    limit = S[S_LIMIT]
    for i in range(S[S_K]):
        r = S[S_ROW + i]
        if r < 0:  # a row for this context: the slot's (taken over) or the next free one
            slot = S[S_TAB + i] + S[S_SLOT + i]
            r = S[slot] - 1
            if r < 0:
                r = S[S_BASE + i] + S[S_NEXT + i]
                S[S_NEXT + i] += 1
                S[slot] = r + 1
            row = C[r]
            for x in range(ROW):
                row[x] = 0
            row[R_CHECK] = np.uint16(S[S_CHK + i])
        row = C[r]
        c = np.int64(row[y])
        if c == 0:
            row[R_DISTINCT] += np.uint16(1)
        row[y] = np.uint16(c + 1)
        if c + 1 > np.int64(row[R_MAX]):
            row[R_MAX] = np.uint16(c + 1)
        t = np.int64(row[R_TOTAL]) + 1
        row[R_TOTAL] = np.uint16(t)
        if t > limit:
            t = 0
            d = 0
            for x in range(ALPHABET):
                v = np.int64(row[x]) >> 1
                row[x] = np.uint16(v)
                t += v
                d += v > 0
            row[R_TOTAL] = np.uint16(t)
            row[R_DISTINCT] = np.uint16(d)
            row[R_MAX] = row[R_MAX] >> 1


@jit
def learn_match(S, HB, y):
    """Append y to the history; extend or drop the match, then look for a new one."""
    hmask = (1 << S[S_HBITS]) - 1
    pos = S[S_POS]
    HB[pos & hmask] = np.uint8(y)
    pos += 1
    S[S_POS] = pos
    S[S_HIST] = ((S[S_HIST] << 8) | y) & 0xFFFFFFFFFFFFFF  # the last 7 bytes
    S[S_WORD] = next_word(S[S_WORD], y)
    extend_match(S, S_LEN, S_PTR, S_EXPECT, y)
    mmin = S[S_MMIN]
    if pos >= mmin:
        key = S[S_HIST] & ((1 << (8 * mmin)) - 1)
        h = hash32(hash32(key & M32) + (key >> 32))
        idx = S_MT + (h >> (32 - S[S_MBITS]))
        if S[S_LEN] == 0:
            cand = S[idx]
            if cand > 0 and pos - cand < hmask:
                n = verified_length(HB, cand, pos, hmask)
                if n >= mmin:
                    S[S_LEN] = n
                    S[S_PTR] = cand
        S[idx] = pos
    S[S_EXPECT] = np.int64(HB[S[S_PTR] & hmask]) if S[S_LEN] > 0 else -1


@jit
def learn(y, C, S, W, HB):
    """Learn the coded byte y, then predict the next one into W[0:256]."""
    learn_weights(C, S, W, y)
    learn_counts(C, S, y)
    learn_match(S, HB, y)
    contexts(C, S)
    predict(C, S, W)


@jit
def begin(C, S, W):
    """The prediction for the first byte (empty history)."""
    contexts(C, S)
    predict(C, S, W)


@jit
def run(data, probs, io, C, S, W, HB, decoder):
    """Advance over a block of bytes, doing `io` with each (coder.take_byte: record its
    distribution, or decode it first); returns the bytes advanced over (fewer only when a
    decoded stream is corrupt)."""
    P = W[:ALPHABET]
    for t in range(data.shape[0]):
        if not coder.take_byte(io, t, data, probs, P, decoder):
            return t
        learn(np.int64(data[t]), C, S, W, HB)
    return data.shape[0]
