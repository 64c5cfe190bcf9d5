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
def row_gradient(rec, m, i, steps, out):
    """out += row i of matrix m's gradient over REC rows steps - 1 ... 0 (the backward's
    order): on a zero `out`, exactly what G would have received."""
    REC, TAB, _ = rec
    n_in = TAB[m, 1]
    n_out = TAB[m, 2]
    x = TAB[m, 3] + i
    lo = TAB[m, 3] + n_in
    for j in range(steps - 1, -1, -1):
        xj = REC[j, x]
        gj = REC[j, lo:lo + n_out]
        for o in range(n_out):
            out[o] += xj * gj[o]


@jit
def flush(rec, steps, G):
    """Add the recorded matrices' gradients into G (a dense gradient, for checks)."""
    TAB, CUR = rec[1], rec[2]
    for m in range(CUR[2]):
        off, n_in, n_out = TAB[m, 0], TAB[m, 1], TAB[m, 2]
        for i in range(n_in):
            row_gradient(rec, m, i, steps, G[off + i * n_out:off + (i + 1) * n_out])
