"""Fixed-order vector kernels shared by every model.

Matrices live in one flat float32 vector, stored input-major (M[i * n_out + o] = W_T[i, o]),
so a matrix-vector product runs in "axpy" form: the outputs are the vectorised inner loop and
each output sums its inputs in index order, whatever the SIMD width. Reductions (norms,
softmax sums) run sequentially in float64.

Kernels take views (W[off:off + n]) and index them only with loop counters: an index that
LLVM cannot prove non-negative gets numba's wrap-around check and the loop stops
vectorising (measured: 3-5x slower matrix-vector products).
"""

from __future__ import annotations

import math

from rwkvzip.kernels.jit import jit
from rwkvzip.kernels.mathf import exp64


@jit
def matvec(M, x, n_in, n_out, y):
    """y = x @ M, with M the input-major (n_in, n_out) matrix flattened."""
    for o in range(n_out):
        y[o] = 0.0
    for i in range(n_in):
        xi = x[i]
        for o in range(n_out):
            y[o] += M[i * n_out + o] * xi


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
    """
    n = logits.shape[0]
    m = logits[0]
    for i in range(1, n):
        if logits[i] > m:
            m = logits[i]
    total = 0.0
    for i in range(n):
        e = exp64(logits[i] - m)
        q[i] = e if e >= 1e-30 else 0.0  # no float32 denormals (slow), floor covers it
        total += q[i]
    inv = 1.0 / total
    keep = 1.0 - n * floor
    for i in range(n):
        q[i] = q[i] * inv
        p[i] = keep * q[i] + floor
