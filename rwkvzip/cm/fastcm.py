"""The fast predictor's settings (recipe field `counts`) and the arrays its kernels work on:
byte-oriented count models of several orders and a match model, linearly mixed
(cm/counts.py). No network runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rwkvzip.cm import counts as ck
from rwkvzip.ops import ALPHABET, memory

W_INIT_ORDER = 1.0  # initial weight of every order's distribution
W_INIT_MATCH = 2.0  # ... of the match model
W_INIT_UNIFORM = 0.2  # ... of the uniform distribution
MATCH_HASH_SHIFT = 2  # the match model hashes 2**(match_bits - 2) contexts


@dataclass(frozen=True)
class CountsConfig:
    """orders: context lengths in bytes, ascending (0 … 7; orders 0 and 1 are indexed
    directly, higher ones hashed into 2**table_bits rows of 256 counts each); limit: a row's
    counts are halved when their total exceeds it; match_bits: 2**match_bits bytes of history
    for the match model, which finds the last occurrence of the current match_min bytes
    through a hash table of 2**(match_bits - 2) positions; lr: the weights' learning rate;
    word: one more count model whose context is the current word (letters, case-folded) and
    the byte before."""

    orders: tuple[int, ...] = (0, 1, 2, 3, 4)
    table_bits: int = 16
    limit: int = 255
    match_bits: int = 22
    match_min: int = 6
    lr: float = 0.02
    word: bool = True

    def validate(self) -> None:
        o = self.orders
        if not o:
            raise ValueError("counts needs at least one order")
        if any(not 0 <= k <= 7 for k in o) or list(o) != sorted(set(o)):
            raise ValueError("count orders must be distinct and ascending, in 0..7")
        if not 8 <= self.table_bits <= 22:
            raise ValueError("counts table_bits must be in 8..22")
        if not 2 <= self.limit <= 65000:
            raise ValueError("counts limit must be in 2..65000")
        if not 12 <= self.match_bits <= 26:
            raise ValueError("counts match_bits must be in 12..26")
        if not 2 <= self.match_min <= 7:
            raise ValueError("counts match_min must be in 2..7")
        if not 0.0 < self.lr <= 1.0:
            raise ValueError("counts lr must be in (0, 1]")

    def inputs(self) -> tuple[int, ...]:
        """The count models' context lengths, the word context last (counts.WORD)."""
        return self.orders + ((ck.WORD,) if self.word else ())

    def rows(self) -> int:
        return sum(1 if k == 0 else ALPHABET if k == 1 else 1 << self.table_bits
                   for k in self.inputs())

    def slots(self) -> int:
        """Hash-table slots of the hashed inputs (orders 2 and up, the word context)."""
        return sum(1 << self.table_bits for k in self.inputs() if k >= 2)

    def memory_bytes(self) -> int:
        """Bytes of every array: count rows, match hash table and history, weights."""
        return (2 * ck.ROW * self.rows() + 8 * (ck.N_S + self.match_entries() + self.slots())
                + (1 << self.match_bits) + 4 * ck.weights_size(len(self.inputs())))

    def match_entries(self) -> int:
        return 1 << (self.match_bits - MATCH_HASH_SHIFT)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["orders"] = list(self.orders)
        return d


class CountArrays:
    """The count tables, state, weights and history of one stream."""

    def __init__(self, cfg: CountsConfig, floor: float):
        K = len(cfg.inputs())
        S = memory.zeros(ck.N_S + cfg.match_entries() + cfg.slots(), np.int64)
        S[ck.S_K] = K
        S[ck.S_LIMIT] = cfg.limit
        S[ck.S_MBITS] = cfg.match_bits - MATCH_HASH_SHIFT
        S[ck.S_HBITS] = cfg.match_bits
        S[ck.S_MMIN] = cfg.match_min
        S[ck.S_EXPECT] = -1
        base, tab = 0, ck.N_S + cfg.match_entries()
        for i, k in enumerate(cfg.inputs()):
            S[ck.S_ORDER + i] = k
            S[ck.S_BASE + i] = base
            S[ck.S_BITS + i] = 0 if k <= 1 else cfg.table_bits
            S[ck.S_TAB + i] = tab
            base += 1 if k == 0 else ALPHABET if k == 1 else 1 << cfg.table_bits
            tab += 0 if k <= 1 else 1 << cfg.table_bits
        self.C = memory.zeros(base * ck.ROW, np.uint16).reshape(base, ck.ROW)
        W = np.zeros(ck.weights_size(K), dtype=np.float32)
        W[ck.W_LR] = cfg.lr
        W[ck.W_FLOOR] = floor
        S[ck.S_NW] = ck.n_weights(K)
        sets = W[ck.W_BASE:ck.W_BASE + ck.n_weights(K)].reshape(ck.weight_sets(K), K + 2,
                                                                 ck.NCONF)
        sets[:, :K] = W_INIT_ORDER
        sets[:, K] = W_INIT_MATCH
        sets[:, K + 1] = W_INIT_UNIFORM
        self.S, self.W = S, W
        self.HB = memory.zeros(1 << cfg.match_bits, np.uint8)
        self.probs = W[:ALPHABET]  # the distribution of the next byte, kept current by the kernels
        ck.begin(self.C, S, W)
