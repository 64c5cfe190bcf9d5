"""Fixed-order vector kernels shared by every model, forward and backward.

Matrices live in one flat float32 vector, stored input-major (M[i * n_out + o] = W_T[i, o]),
so a matrix-vector product runs in "axpy" form: the outputs are the vectorised inner loop and
each output sums its inputs in index order, whatever the SIMD width. Reductions (norms,
softmax sums) run sequentially in float64.

Kernels take views (W[off:off + n]) and index them only with loop counters: an index that
LLVM cannot prove non-negative gets numba's wrap-around check and the loop stops
vectorising (measured: 3-5x slower matrix-vector products).

The backward helpers (matvec_t, outer_acc, vec_acc, *_backward) are the reverse-mode
counterparts used by every architecture's backward kernel; norm backwards recompute their
statistics exactly as the forward computed them.
"""

from __future__ import annotations

import math

import numpy as np

from rwkvzip.ops.bf16 import as_float32
from rwkvzip.ops.jit import jit
from rwkvzip.ops.mathf import exp32_lane

MATVEC_JAM = 8  # inputs that one sweep over y adds in (matvec)


@jit
def matvec(M, x, n_in, n_out, y):
    """y = x · M, with M the input-major (n_in, n_out) matrix flattened.

    Each sweep over y adds MATVEC_JAM inputs, in index order, so every output sums exactly
    as it would one input a sweep (the same bits) while y is loaded and stored 8 × less
    often: 64 → 512 outputs 2.1 → 1.4 µs, 64 → 256 1.16 → 0.75. M, x and y are float32 (as
    every caller keeps them), so each step of `s` rounds to float32 as `y[o] += …` did.
    M may also be a matrix's bfloat16 copy (uint16, ops/bf16.py): each entry is widened
    exactly, so the result is the same."""
    for o in range(n_out):
        y[o] = 0.0
    i = 0
    while i + MATVEC_JAM <= n_in:
        x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
        x4, x5, x6, x7 = x[i + 4], x[i + 5], x[i + 6], x[i + 7]
        m0 = M[i * n_out:(i + 1) * n_out]
        m1 = M[(i + 1) * n_out:(i + 2) * n_out]
        m2 = M[(i + 2) * n_out:(i + 3) * n_out]
        m3 = M[(i + 3) * n_out:(i + 4) * n_out]
        m4 = M[(i + 4) * n_out:(i + 5) * n_out]
        m5 = M[(i + 5) * n_out:(i + 6) * n_out]
        m6 = M[(i + 6) * n_out:(i + 7) * n_out]
        m7 = M[(i + 7) * n_out:(i + 8) * n_out]
        for o in range(n_out):
            s = y[o] + as_float32(m0[o]) * x0
            s = s + as_float32(m1[o]) * x1
            s = s + as_float32(m2[o]) * x2
            s = s + as_float32(m3[o]) * x3
            s = s + as_float32(m4[o]) * x4
            s = s + as_float32(m5[o]) * x5
            s = s + as_float32(m6[o]) * x6
            y[o] = s + as_float32(m7[o]) * x7
        i += MATVEC_JAM
    while i < n_in:
        xi = x[i]
        for o in range(n_out):
            y[o] += as_float32(M[i * n_out + o]) * xi
        i += 1


@jit
def layer_norm(x, w, b, eps, n, y):
    """y = (x - mean) / sqrt(var + eps) * w + b; statistics in float64, index order."""
    group_norm(x, w, b, eps, 1, n, y)


@jit
def group_norm(x, w, b, eps, groups, size, y):
    """Layer norm applied to each of `groups` consecutive slices of `size` channels."""
    for g in range(groups):
        lo = g * size
        mean = 0.0
        for i in range(lo, lo + size):
            mean += x[i]
        mean /= size
        var = 0.0
        for i in range(lo, lo + size):
            d = x[i] - mean
            var += d * d
        var /= size
        inv = 1.0 / math.sqrt(var + eps)
        for i in range(lo, lo + size):
            y[i] = (x[i] - mean) * inv * w[i] + b[i]


@jit
def l2_normalize(x, groups, size, min_norm, y):
    """Each slice divided by max(its L2 norm, min_norm)."""
    for g in range(groups):
        lo = g * size
        ss = 0.0
        for i in range(lo, lo + size):
            ss += x[i] * x[i]
        norm = math.sqrt(ss)
        if norm < min_norm:
            norm = min_norm
        inv = 1.0 / norm
        for i in range(lo, lo + size):
            y[i] = x[i] * inv


@jit
def softmax_with_floor(logits, floor, q, p):
    """q = softmax(logits); p = (1 - n*floor) * q + floor, the distribution that is coded.

    Every entry of p is finite and at least `floor`, so the range coder can code any byte.
    The exponentials run as one vector pass in float32 lanes (mathf.exp32_lane); only the
    max and the sum are sequential, in index order.
    """
    n = logits.shape[0]
    m = logits[0]
    for i in range(1, n):
        if logits[i] > m:
            m = logits[i]
    for i in range(n):
        e = exp32_lane(logits[i] - m)
        q[i] = e if e >= 1e-30 else 0.0  # no float32 denormals (slow), floor covers it
    total = 0.0
    for i in range(n):
        total += q[i]
    inv = 1.0 / total
    keep = 1.0 - n * floor
    for i in range(n):
        q[i] = q[i] * inv
        p[i] = keep * q[i] + floor


# ---- backward helpers (reverse-mode counterparts of the kernels above) ----


@jit
def matvec_t(M, g, n_in, n_out, x, accumulate):
    """x = M g, or x += M g with `accumulate`: the input gradient of y = x · M (input-major
    M), or any row-major block's row sums against g; each sum in output order, accumulated
    in float32 and then added to or stored in x.

    Four rows run side by side only to overlap their dependency chains; every x[i] is still
    the plain sequential sum over o, so the result equals the one-row-at-a-time loop.
    """
    zero = np.float32(0.0)
    n4 = n_in - n_in % 4
    for i in range(0, n4, 4):
        r0 = M[i * n_out:(i + 1) * n_out]
        r1 = M[(i + 1) * n_out:(i + 2) * n_out]
        r2 = M[(i + 2) * n_out:(i + 3) * n_out]
        r3 = M[(i + 3) * n_out:(i + 4) * n_out]
        s0 = zero
        s1 = zero
        s2 = zero
        s3 = zero
        for o in range(n_out):
            go = g[o]
            s0 += r0[o] * go
            s1 += r1[o] * go
            s2 += r2[o] * go
            s3 += r3[o] * go
        if accumulate:
            x[i] += s0
            x[i + 1] += s1
            x[i + 2] += s2
            x[i + 3] += s3
        else:
            x[i] = s0
            x[i + 1] = s1
            x[i + 2] = s2
            x[i + 3] = s3
    for i in range(n4, n_in):
        s = zero
        for o in range(n_out):
            s += M[i * n_out + o] * g[o]
        if accumulate:
            x[i] += s
        else:
            x[i] = s


@jit
def input_gradient(M, MT, g, n_in, n_out, x):
    """x = M g (the input gradient of y = x · M), each x[i] summed over the outputs in index
    order in float32: from the twin MT where the caller keeps one (MT not empty; the
    forward's own matvec, twice the SIMD width and no conversions), else from M itself;
    both give the same bits."""
    if MT.shape[0] > 0:
        matvec(MT, g, n_out, n_in, x)
    else:
        matvec_t(M, g, n_in, n_out, x, False)


TWIN_TILE = 8


@jit
def refresh_twins(W, WT, table):
    """WT[off:off + n] = the output-major twin of each input-major matrix of W listed in
    table (rows: offset, n_in, n_out), after W changed. A plain copy, so any order gives the
    same bits: tiles of 8 x 8 go through a small buffer, so that both the reads and the writes
    run along contiguous rows (measured at -7's size: 130 -> 40 us a refresh)."""
    B = TWIN_TILE
    tile = np.empty(B * B, dtype=W.dtype)
    for r in range(table.shape[0]):
        off, n_in, n_out = table[r, 0], table[r, 1], table[r, 2]
        M = W[off:off + n_in * n_out]
        MT = WT[off:off + n_in * n_out]
        i_end = n_in - n_in % B
        o_end = n_out - n_out % B
        for i0 in range(0, i_end, B):
            for o0 in range(0, o_end, B):
                for a in range(B):
                    src = M[(i0 + a) * n_out + o0:(i0 + a) * n_out + o0 + B]
                    for b in range(B):
                        tile[b * B + a] = src[b]
                for b in range(B):
                    dst = MT[(o0 + b) * n_in + i0:(o0 + b) * n_in + i0 + B]
                    for a in range(B):
                        dst[a] = tile[b * B + a]
            for o in range(o_end, n_out):
                for i in range(i0, i0 + B):
                    MT[o * n_in + i] = M[i * n_out + o]
        for i in range(i_end, n_in):
            for o in range(n_out):
                MT[o * n_in + i] = M[i * n_out + o]


@jit
def outer_acc(GM, x, g, n_in, n_out):
    """GM += x g^T: the weight gradient of y = x · M (input-major), accumulated."""
    for i in range(n_in):
        xi = x[i]
        for o in range(n_out):
            GM[i * n_out + o] += xi * g[o]


@jit
def vec_acc(Gv, g, n):
    for i in range(n):
        Gv[i] += g[i]


@jit
def layer_norm_backward(x, w, gy, eps, n, gx, Gw, Gb):
    """Back through y = layer_norm(x) * w + b: gx += dL/dx; Gw, Gb += dL/dw, dL/db.

    The statistics are recomputed exactly as the forward computed them (float64, index order).
    """
    mean = 0.0
    sum_g = 0.0
    for i in range(n):  # two independent sums side by side, each in index order
        mean += x[i]
        sum_g += gy[i] * w[i]
    mean /= n
    var = 0.0
    for i in range(n):
        d = x[i] - mean
        var += d * d
    var /= n
    inv = 1.0 / math.sqrt(var + eps)
    sum_gx = 0.0
    for i in range(n):
        xhat = (x[i] - mean) * inv
        sum_gx += (gy[i] * w[i]) * xhat
        Gw[i] += gy[i] * xhat
        Gb[i] += gy[i]
    sum_g /= n
    sum_gx /= n
    for i in range(n):
        xhat = (x[i] - mean) * inv
        gx[i] += (gy[i] * w[i] - sum_g - xhat * sum_gx) * inv


@jit
def rms_norm(x, w, eps, n, y):
    """y = x / sqrt(mean(x^2) + eps) * w; the mean of squares in float64, index order."""
    ss = 0.0
    for i in range(n):
        xi = x[i]
        ss += xi * xi
    inv = 1.0 / math.sqrt(ss / n + eps)
    for i in range(n):
        y[i] = x[i] * inv * w[i]


@jit
def rms_norm_backward(x, w, gy, eps, n, gx, Gw):
    """Back through y = rms_norm(x) * w: gx += dL/dx; Gw += dL/dw.

    With r = 1 / sqrt(mean(x^2) + eps): dL/dx_j = r gw_j - x_j r^3 / n * sum_i gw_i x_i,
    gw = gy * w. The statistic is recomputed exactly as rms_norm computed it.
    """
    ss = 0.0
    dot = 0.0
    for i in range(n):  # the two sums side by side, each in index order
        xi = x[i]
        ss += xi * xi
        dot += (gy[i] * w[i]) * xi
    inv = 1.0 / math.sqrt(ss / n + eps)
    for i in range(n):
        Gw[i] += gy[i] * (x[i] * inv)
    c = dot * inv * inv * inv / n
    for i in range(n):
        gx[i] += gy[i] * w[i] * inv - x[i] * c


@jit
def l2_normalize_backward(x, y, gy, groups, size, min_norm, gx):
    """Back through y = l2_normalize(x): gx = dL/dx (set, not accumulated).

    Per slice with norm = max(|x|, min_norm): gx = (gy - y (gy . y)) / norm, or gy / min_norm
    where the clamp was active (y is then x times a constant). The norm is recomputed exactly
    as l2_normalize computed it.
    """
    for g in range(groups):
        lo = g * size
        xs = x[lo:lo + size]
        ys = y[lo:lo + size]
        gys = gy[lo:lo + size]
        gxs = gx[lo:lo + size]
        ss = 0.0
        for i in range(size):
            ss += xs[i] * xs[i]
        norm = math.sqrt(ss)
        dot = 0.0
        if norm < min_norm:
            norm = min_norm
        else:
            for i in range(size):
                dot += gys[i] * ys[i]
        inv = 1.0 / norm
        for i in range(size):
            gxs[i] = (gys[i] - ys[i] * dot) * inv


@jit
def silu_grad(x: float, s: float) -> float:
    """d silu(x) / dx = s (1 + x (1 - s)) for s = sigmoid64(x), which callers take from one
    vector pass (mathf.sigmoid_vector) rather than a scalar exp each."""
    return s * (1.0 + x * (1.0 - s))
