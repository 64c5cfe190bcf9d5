"""Optimizer updates on the flat parameter vector (SGD, bias-corrected Adam).

Hyper-parameters and counters travel in one float64 array F (slots below) so kernels take
few arguments; Adam's moments are the two rows of O, shaped (2, n_params).
"""

from __future__ import annotations

import numpy as np

from rwkvzip.kernels.common import (
    D_C,
    D_V,
    N_DIMS,
    P_BIAS,
    P_HEAD,
    T_XN,
    gslice,
    logit_gradient,
)
from rwkvzip.kernels.jit import jit

# F slots
F_LR, F_BETA1, F_BETA2, F_EPS, F_OPT, F_STEP, F_B1POW, F_B2POW, F_FLOOR = range(9)
N_F = 16
OPT_SGD, OPT_ADAM = 0, 1
TINY = 1e-30  # values below this are flushed to zero (see apply_scaled)


@jit(inline="always")
def begin_step(F):
    """Advance the step counter and Adam's running bias-correction powers."""
    F[F_STEP] += 1.0
    F[F_B1POW] *= F[F_BETA1]
    F[F_B2POW] *= F[F_BETA2]


@jit(inline="always")
def apply_scaled(w, O, off, g, scale, n, F, lr, bc1, bc2):
    """w[j] -= step(scale * g[j]) for j < n, with w = W[off:off + n] and moments O[:, off:]."""
    # float32 throughout: twice the SIMD width of float64, and just as reproducible.
    scale = np.float32(scale)
    if F[F_OPT] == OPT_ADAM:
        b1 = np.float32(F[F_BETA1])
        c1 = np.float32(1.0 - F[F_BETA1])
        b2 = np.float32(F[F_BETA2])
        c2 = np.float32(1.0 - F[F_BETA2])
        eps = np.float32(F[F_EPS])
        lr_t = np.float32(lr / bc1)
        inv_bc2 = np.float32(1.0 / bc2)
        tiny = np.float32(TINY)
        zero = np.float32(0.0)
        m = O[0, off:off + n]
        v = O[1, off:off + n]
        for j in range(n):
            gj = scale * g[j]
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
            w[j] -= lr32 * (scale * g[j])


@jit(inline="always")
def learn_head(symbol, W, O, tr, I, F):
    """Exact gradient step on the LM head and output bias for the byte just coded."""
    C = I[D_C]
    V = I[D_V]
    g = logit_gradient(symbol, tr, I, F[F_FLOOR])
    xn = gslice(tr, I, T_XN, C)
    begin_step(F)
    lr = F[F_LR]
    bc1 = 1.0 - F[F_B1POW]
    bc2 = 1.0 - F[F_B2POW]
    head = I[N_DIMS + P_HEAD]
    for c in range(C):
        off = head + c * V
        apply_scaled(W[off:off + V], O, off, g, xn[c], V, F, lr, bc1, bc2)
    bias = I[N_DIMS + P_BIAS]
    apply_scaled(W[bias:bias + V], O, bias, g, 1.0, V, F, lr, bc1, bc2)
