"""Index-table conventions and the output stage (forward and backward) shared by every model.

The int64 table I starts with N_DIMS dims (the first few common, the rest per architecture),
then the parameter offsets (global slots, then per-layer slots), then the trace offsets
(global slots, then per-layer slots); I[D_TB] says where the trace offsets start.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.net.gradrec import no_record, weight_gradient
from rwkvzip.ops.jit import jit
from rwkvzip.ops.linalg import (
    input_gradient,
    layer_norm,
    layer_norm_backward,
    matvec,
    softmax_with_floor,
    vec_acc,
)

# dims shared by all architectures (the architectures' own dims use slots 4..13)
D_C, D_L, D_V, D_TB = 0, 1, 2, 3
D_LP, D_LT = 14, 15  # parameter slots and trace slots per layer
N_DIMS = 16

# global parameter slots
P_EMB, P_LNO_W, P_LNO_B, P_HEAD, P_BIAS = range(5)
N_GLOBAL = 5

# global trace slots
T_XOUT, T_XN, T_LOGITS, T_Q, T_P, T_GLOGITS, T_VFIRST = range(7)
NT_GLOBAL = 7

LAYER_NORM_EPS = 1e-5


@jit
def goff(I, slot):
    """Offset of a global parameter tensor in W."""
    return I[N_DIMS + slot]


@jit
def loff(I, layer, slot):
    """Offset of a per-layer parameter tensor in W."""
    return I[N_DIMS + N_GLOBAL + layer * I[D_LP] + slot]


@jit
def gparam(W, I, slot, n):
    """View of a global parameter tensor of n entries."""
    o = goff(I, slot)
    return W[o:o + n]


@jit
def lparam(W, I, layer, slot, n):
    """View of a per-layer parameter tensor of n entries."""
    o = loff(I, layer, slot)
    return W[o:o + n]


@jit
def tslice(tr, I, layer, slot, n):
    """View of a per-layer trace slot of length n."""
    o = I[I[D_TB] + NT_GLOBAL + layer * I[D_LT] + slot]
    return tr[o:o + n]


@jit
def gslice(tr, I, slot, n):
    """View of a global trace slot of length n."""
    o = I[I[D_TB] + slot]
    return tr[o:o + n]


@jit
def embed(token, W, I, x):
    C = I[D_C]
    row = gparam(W, I, P_EMB, I[D_V] * C)[token * C:(token + 1) * C]
    for c in range(C):
        x[c] = row[c]


@jit
def weights_matvec(W, W16, o, x, n_in, n_out, y):
    """y = x · the input-major (n_in, n_out) matrix at W[o:], read from W16, W's bfloat16
    copy (ops/bf16.py: the same values, half the bytes to stream), when the codec keeps one
    (a frozen network whose matrices are bfloat16 values), else from W."""
    n = n_in * n_out
    if W16.shape[0] > 0:
        matvec(W16[o:o + n], x, n_in, n_out, y)
    else:
        matvec(W[o:o + n], x, n_in, n_out, y)


@jit
def head_forward(W, W16, tr, I, floor):
    """Final norm of T_XOUT, LM head plus output bias, softmax and the coded distribution
    (W16: see weights_matvec)."""
    C = I[D_C]
    V = I[D_V]
    xn = gslice(tr, I, T_XN, C)
    layer_norm(gslice(tr, I, T_XOUT, C), gparam(W, I, P_LNO_W, C), gparam(W, I, P_LNO_B, C),
               LAYER_NORM_EPS, C, xn)
    logits = gslice(tr, I, T_LOGITS, V)
    weights_matvec(W, W16, goff(I, P_HEAD), xn, C, V, logits)
    bias = gparam(W, I, P_BIAS, V)
    for j in range(V):
        logits[j] += bias[j]
    softmax_with_floor(logits, floor, gslice(tr, I, T_Q, V), gslice(tr, I, T_P, V))


@jit
def logit_gradient(symbol, tr, I, floor):
    """d(-ln p[symbol]) / d logits for the floored p that coded the byte, into T_GLOGITS.

    p = keep * softmax(z) + floor, so the gradient is s * (q - onehot) with
    s = keep * q[symbol] / p[symbol] (s = 1 without a floor). symbol < 0: T_GLOGITS already
    holds dL/dlogits, put there by the caller (the mixer's gradient, see stepper).
    """
    V = I[D_V]
    g = gslice(tr, I, T_GLOGITS, V)
    if symbol < 0:  # the caller has already put dL/dlogits there (the mixer's gradient)
        return g
    q = gslice(tr, I, T_Q, V)
    p = gslice(tr, I, T_P, V)
    keep = 1.0 - V * floor
    s = keep * q[symbol] / p[symbol]
    for j in range(V):
        g[j] = s * q[j]
    g[symbol] -= s
    return g


def dense_matrices() -> tuple:
    """The `matrices` argument of a backward pass that reads its matrices from W itself and
    adds their gradients into G."""
    return np.zeros(0, dtype=np.float32), no_record()


@jit
def head_backward(symbol, W, G, tr, I, floor, gt, gx, matrices):
    """Back through head_forward for the loss -ln p[symbol]: bias, LM head, final norm.

    Adds the output stage's parameter gradients into G (the head's: see matrices) and sets
    gx = dL/d(T_XOUT); gt (C entries) is scratch. T_GLOGITS gets dL/dlogits. matrices: see
    the backward_step kernels.
    """
    C = I[D_C]
    V = I[D_V]
    WT, rec = matrices
    glog = logit_gradient(symbol, tr, I, floor)
    vec_acc(gparam(G, I, P_BIAS, V), glog, V)
    weight_gradient(G, goff(I, P_HEAD), gslice(tr, I, T_XN, C), glog, C, V, rec)
    input_gradient(gparam(W, I, P_HEAD, C * V), gparam(WT, I, P_HEAD, C * V), glog, C, V, gt)
    for c in range(C):
        gx[c] = 0.0
    layer_norm_backward(gslice(tr, I, T_XOUT, C), gparam(W, I, P_LNO_W, C), gt,
                        LAYER_NORM_EPS, C, gx, gparam(G, I, P_LNO_W, C),
                        gparam(G, I, P_LNO_B, C))


@jit
def projection_backward(W, G, I, l, slot, x, g, n_in, n_out, gx, matrices):
    """Back through y = x · M of the layer's matrix `slot`: its gradient x g^T (into G or the
    record), and gx = M g (from its output-major twin where there is one)."""
    WT, rec = matrices
    off = loff(I, l, slot)
    n = n_in * n_out
    weight_gradient(G, off, x, g, n_in, n_out, rec)
    input_gradient(W[off:off + n], WT[off:off + n], g, n_in, n_out, gx)


@jit
def embed_backward(token, G, I, gx):
    """Add dL/d(embedding of token) = gx into the token's row of the embedding gradient."""
    C = I[D_C]
    row = gparam(G, I, P_EMB, I[D_V] * C)[token * C:(token + 1) * C]
    vec_acc(row, gx, C)
