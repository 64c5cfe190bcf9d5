"""A segment's weight gradients kept as their factors, for the optimizer to form as it steps.

The gradient of a matrix y = x · M at one backward step is the outer product x g^T of its
input and its output's gradient. Accumulated into G at every step, that reads and writes the
whole gradient buffer T times a segment: the memory traffic was a third of a 64-wide RWKV-7's
backward. Recorded instead, each step's x and g of each matrix go into one row of REC, and
the optimizer forms each weight's gradient just before it updates it (optim.apply_gradients):
the sum over the steps in the backward's order (last step first) from zero, as G received
them, so every bit is the same.

A record is (REC, TAB, CUR):
  REC  float32 (steps, width): row j holds step j's (x, g) of every matrix, side by side in
       the order the backward reaches them (the same in every step)
  TAB  int64 (matrices, 4): rows (offset in W, n_in, n_out, position in a REC row), written
       as the backward reaches each matrix
  CUR  int64[3]: (REC row of the step being recorded, next position, matrices so far)
An empty REC (no_record) sends the gradients into G as they are formed.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.ops.jit import jit
from rwkvzip.ops.linalg import outer_acc


def no_record() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The record argument of a backward pass that accumulates into G."""
    return (np.zeros((0, 0), dtype=np.float32), np.zeros((0, 4), dtype=np.int64),
            np.zeros(3, dtype=np.int64))


def new_record(twin_table: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A record for `steps` backward steps of a model whose matrices twin_table lists (rows
    offset, n_in, n_out: Layout.twin_table)."""
    width = int(twin_table[:, 1].sum() + twin_table[:, 2].sum())
    return (np.zeros((steps, width), dtype=np.float32),
            np.zeros((len(twin_table), 4), dtype=np.int64), np.zeros(3, dtype=np.int64))


@jit
def record_into(rec, row):
    """The backward step about to run records into REC row `row`."""
    CUR = rec[2]
    CUR[0] = row
    CUR[1] = 0
    CUR[2] = 0


@jit
def weight_gradient(G, off, x, g, n_in, n_out, rec):
    """The gradient x g^T of the input-major matrix at W[off:off + n_in * n_out]: added into
    G there, or kept in the record."""
    REC, TAB, CUR = rec
    if REC.shape[0] == 0:
        outer_acc(G[off:off + n_in * n_out], x, g, n_in, n_out)
        return
    pos = CUR[1]
    m = CUR[2]
    xs = REC[CUR[0], pos:pos + n_in]
    gs = REC[CUR[0], pos + n_in:pos + n_in + n_out]
    for i in range(n_in):
        xs[i] = x[i]
    for o in range(n_out):
        gs[o] = g[o]
    TAB[m, 0] = off
    TAB[m, 1] = n_in
    TAB[m, 2] = n_out
    TAB[m, 3] = pos
    CUR[1] = pos + n_in + n_out
    CUR[2] = m + 1


@jit
def add_rows_gradient(rec, m, i, rows, steps, out):
    """out += rows i .. i + rows - 1 of matrix m's gradient (rows 4 or 1; out holds them
    side by side): for each weight the terms of REC rows steps - 1 ... 0 (the backward's
    order) one after another, so on a zero `out` exactly what G would have received.
    Four weight rows and two steps a pass: each step's g is loaded once for four rows and
    `out` a quarter as often (measured 1.5-2x faster than a row and a step a pass)."""
    REC, TAB, _ = rec
    n_in = TAB[m, 1]
    n = TAB[m, 2]
    x = TAB[m, 3] + i  # where row i's input is in each REC row
    lo = TAB[m, 3] + n_in  # and the output gradient
    if rows == 4:
        o0 = out[0:n]
        o1 = out[n:2 * n]
        o2 = out[2 * n:3 * n]
        o3 = out[3 * n:4 * n]
        j = steps - 1
        while j >= 1:
            a0, a1, a2, a3 = REC[j, x], REC[j, x + 1], REC[j, x + 2], REC[j, x + 3]
            b0, b1, b2, b3 = REC[j - 1, x], REC[j - 1, x + 1], REC[j - 1, x + 2], \
                REC[j - 1, x + 3]
            ga = REC[j, lo:lo + n]
            gb = REC[j - 1, lo:lo + n]
            for o in range(n):
                p = ga[o]
                q = gb[o]
                o0[o] = (o0[o] + a0 * p) + b0 * q
                o1[o] = (o1[o] + a1 * p) + b1 * q
                o2[o] = (o2[o] + a2 * p) + b2 * q
                o3[o] = (o3[o] + a3 * p) + b3 * q
            j -= 2
        if j == 0:
            a0, a1, a2, a3 = REC[0, x], REC[0, x + 1], REC[0, x + 2], REC[0, x + 3]
            ga = REC[0, lo:lo + n]
            for o in range(n):
                p = ga[o]
                o0[o] += a0 * p
                o1[o] += a1 * p
                o2[o] += a2 * p
                o3[o] += a3 * p
    else:
        for j in range(steps - 1, -1, -1):
            a0 = REC[j, x]
            ga = REC[j, lo:lo + n]
            for o in range(n):
                out[o] += a0 * ga[o]


@jit
def block_at(i, n_in):
    """Rows in the block of add_rows_gradient that starts at row i: 4 while four remain."""
    return 4 if i + 4 <= n_in else 1


@jit
def flush(rec, steps, G):
    """Add the recorded matrices' gradients into G (a dense gradient, for checks)."""
    TAB, CUR = rec[1], rec[2]
    for m in range(CUR[2]):
        off, n_in, n_out = TAB[m, 0], TAB[m, 1], TAB[m, 2]
        i = 0
        while i < n_in:
            rows = block_at(i, n_in)
            add_rows_gradient(rec, m, i, rows, steps, G[off + i * n_out:off + (i + rows) * n_out])
            i += rows
