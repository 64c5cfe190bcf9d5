"""Optimizer updates on the flat parameter vector (SGD, bias-corrected Adam), with per-element
gradient clipping and a learning-rate schedule by bytes seen.

Hyper-parameters and counters travel in one float64 array F (slots below) so kernels take
few arguments; Adam's moments are the two rows of O, shaped (2, n_params). Which parameters
train is a table R of [start, end, train] rows (the recipe's scope): rows with train = 0 only
have their accumulated gradient cleared; with a gradient record (net/gradrec.py) a table RV
of the rows without the matrices does that for G, and the matrices' gradients come from the
record.
"""

from __future__ import annotations

import math

import numpy as np

from rwkvzip.net.common import (
    D_C,
    D_V,
    N_DIMS,
    P_BIAS,
    P_HEAD,
    T_XN,
    gslice,
    logit_gradient,
)
from rwkvzip.net.gradrec import add_rows_gradient, block_at
from rwkvzip.ops.jit import jit

# F slots
(F_LR, F_BETA1, F_BETA2, F_EPS, F_OPT, F_STEP, F_B1POW, F_B2POW, F_FLOOR, F_CLIP, F_WARMUP,
 F_DECAY, F_LR_MIN, F_SEEN, F_MODE, F_BPTT, F_CKPT, F_SEGPOS, F_MIX, F_RECOMPUTE) = range(20)
N_F = 24
OPT_SGD, OPT_ADAM = 0, 1
TINY = 1e-30  # values below this are flushed to zero (see apply_update)
NO_CLIP = 3.0e38  # clip bound standing for "no clipping" (finite: the ninf flag forbids inf)


@jit(inline="always")
def scheduled_lr(F):
    """lr / sqrt(1 + seen / decay), floored at lr_min, times a linear warm-up."""
    seen = F[F_SEEN]
    lr = F[F_LR]
    if F[F_DECAY] > 0.0:
        lr = lr / math.sqrt(1.0 + seen / F[F_DECAY])
        if lr < F[F_LR_MIN]:
            lr = F[F_LR_MIN]
    if F[F_WARMUP] > 0.0 and seen < F[F_WARMUP]:
        lr = lr * (seen + 1.0) / F[F_WARMUP]
    return lr


@jit(inline="always")
def begin_step(F):
    """Advance Adam's step counter and bias corrections; return (lr, bc1, bc2) of this step."""
    F[F_STEP] += 1.0
    F[F_B1POW] *= F[F_BETA1]
    F[F_B2POW] *= F[F_BETA2]
    return scheduled_lr(F), 1.0 - F[F_B1POW], 1.0 - F[F_B2POW]


@jit
def apply_update(w, O, off, g, scale, n, F, lr, bc1, bc2, clear):
    """w[j] -= step(clip(scale * g[j])) for j < n; w = W[off:off + n], moments O[:, off:].

    With `clear`, g[j] is zeroed as it is read (g is then a gradient accumulator).
    float32 throughout: twice the SIMD width of float64, and just as reproducible.
    """
    scale = np.float32(scale)
    clip = np.float32(F[F_CLIP]) if F[F_CLIP] > 0.0 else np.float32(NO_CLIP)
    zero = np.float32(0.0)
    if F[F_OPT] == OPT_ADAM:
        b1 = np.float32(F[F_BETA1])
        c1 = np.float32(1.0 - F[F_BETA1])
        b2 = np.float32(F[F_BETA2])
        c2 = np.float32(1.0 - F[F_BETA2])
        eps = np.float32(F[F_EPS])
        lr_t = np.float32(lr / bc1)
        inv_bc2 = np.float32(1.0 / bc2)
        tiny = np.float32(TINY)
        m = O[0, off:off + n]
        v = O[1, off:off + n]
        for j in range(n):
            gj = min(max(scale * g[j], -clip), clip)
            if clear:
                g[j] = zero
            mj = b1 * m[j] + c1 * gj
            vj = b2 * v[j] + c2 * (gj * gj)
            # Moments below TINY are flushed to zero in the code itself: denormal arithmetic
            # is ~100x slower on x86, and an explicit rule keeps every target bit-identical.
            m[j] = mj if abs(mj) >= tiny else zero
            v[j] = vj if vj >= tiny else zero
            w[j] -= lr_t * mj / (np.sqrt(vj * inv_bc2) + eps)
    else:
        lr32 = np.float32(lr)
        for j in range(n):
            gj = min(max(scale * g[j], -clip), clip)
            if clear:
                g[j] = zero
            w[j] -= lr32 * gj


@jit
def trains(R, off):
    """Whether the scope table R trains the parameter at offset `off`."""
    for row in range(R.shape[0]):
        if R[row, 0] <= off < R[row, 1]:
            return R[row, 2] != 0
    return False


@jit
def apply_gradients(W, O, G, scope, F, scale, rec, steps):
    """One optimizer step from the gradient (times `scale`), which G accumulated, or for the
    matrices a record of `steps` backward steps holds (net/gradrec.py: the gradient of each
    few weight rows is formed in their zero rows of G just before their update, while they
    are in cache).
    G is left zero.

    scope: (R, RV), the scope table over all parameters and over all but the matrices."""
    R, RV = scope
    lr, bc1, bc2 = begin_step(F)
    rows = R
    if rec[0].shape[0] > 0:
        rows = RV
        TAB, CUR = rec[1], rec[2]
        for m in range(CUR[2]):
            off, n_in, n_out = TAB[m, 0], TAB[m, 1], TAB[m, 2]
            if not trains(R, off):
                continue
            i = 0
            while i < n_in:
                block = block_at(i, n_in)
                a = off + i * n_out
                b = a + block * n_out
                add_rows_gradient(rec, m, i, block, steps, G[a:b])
                apply_update(W[a:b], O, a, G[a:b], scale, b - a, F, lr, bc1, bc2, True)
                i += block
    for row in range(rows.shape[0]):
        a = rows[row, 0]
        b = rows[row, 1]
        if rows[row, 2]:
            apply_update(W[a:b], O, a, G[a:b], scale, b - a, F, lr, bc1, bc2, True)
        else:
            g = G[a:b]
            for j in range(b - a):
                g[j] = 0.0


@jit
def learn_head(symbol, W, O, tr, I, F):
    """Exact gradient step on the LM head and output bias for the byte just coded.

    The head's gradient is the outer product x_n g, applied row by row as it is formed, so
    this output-layer-only mode needs no gradient buffer.
    """
    C = I[D_C]
    V = I[D_V]
    g = logit_gradient(symbol, tr, I, F[F_FLOOR])
    xn = gslice(tr, I, T_XN, C)
    lr, bc1, bc2 = begin_step(F)
    head = I[N_DIMS + P_HEAD]
    for c in range(C):
        off = head + c * V
        apply_update(W[off:off + V], O, off, g, xn[c], V, F, lr, bc1, bc2, False)
    bias = I[N_DIMS + P_BIAS]
    apply_update(W[bias:bias + V], O, bias, g, 1.0, V, F, lr, bc1, bc2, False)
