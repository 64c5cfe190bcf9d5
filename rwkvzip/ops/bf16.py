"""bfloat16 copies of float32 weights: the same values in half the bytes.

A float32 whose low 16 bits are zero is exactly representable in bfloat16 (its top half),
and widening that half back (a 16-bit shift) is exact. So a kernel that reads a matrix from
its bfloat16 copy computes exactly what it computes from the float32 one, in the same order:
the same bits on every CPU, with no new numeric contract. What changes is the memory the
forward streams: a frozen GDN 128x1 reads 1.7 MB of float32 matrices a byte, more than the
L2 cache keeps beside the context tables; its bfloat16 copy (0.85 MB) stays there
(models/README.md, "The larger prior from bfloat16 matrices", has the measurements).

A prior's matrices are bfloat16 values when `pretrain.py bf16` rounded them so; the codec
then keeps the copy for a frozen network (coding/codec.py) and the forward reads it
(net/common.py, weights_matvec) -- where the copy pays on this CPU (copy_pays): widening
costs two vector instructions an element, cheap with AVX-512 (an Intel Xeon: a 128x768
matvec 5.7 -> 4.5 us, the 128x1 codec about 20 % faster) but not on a Zen 1 EPYC's 128-bit
units (9.0 -> 19.3 us; that codec's kernels 87-95 -> 121-126 us a byte). Either way the bits
are the same.
"""

from __future__ import annotations

import functools
import math
import os
import time

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

NO_COPY = np.zeros(0, dtype=np.uint16)  # "no bfloat16 copy": the kernels read W itself


@intrinsic
def as_float32(typingctx, value):
    """A weight as float32: a float32 as it is, a uint16 (bfloat16 bits) widened exactly.
    The widening is a shift and a reinterpretation, so loops that use it still vectorise."""
    if isinstance(value, types.Float) and value.bitwidth == 32:
        def codegen(context, builder, signature, args):
            return args[0]
        return types.float32(value), codegen
    if isinstance(value, types.Integer) and value.bitwidth == 16 and not value.signed:
        def codegen(context, builder, signature, args):
            bits = builder.shl(builder.zext(args[0], ir.IntType(32)),
                               ir.Constant(ir.IntType(32), 16))
            return builder.bitcast(bits, ir.FloatType())
        return types.float32(value), codegen
    return None


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), still as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def round_matrices(W: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """A copy of W with every matrix (rows offset, n_in, n_out, as Layout.twin_table)
    rounded to bfloat16; the vectors (norms, biases, embeddings) stay float32."""
    out = W.copy()
    for o, n_in, n_out in matrices:
        out[o:o + n_in * n_out] = round_to_bf16(W[o:o + n_in * n_out])
    return out


def matrices_exact(W: np.ndarray, matrices: np.ndarray) -> bool:
    """Whether every matrix of W (rows offset, n_in, n_out, as Layout.twin_table) holds
    bfloat16 values only, so that its copy reads back the same."""
    bits = W.view(np.uint32)
    return all(not np.any(bits[o:o + n_in * n_out] & 0xFFFF) for o, n_in, n_out in matrices)


def top_halves(W: np.ndarray) -> np.ndarray:
    """The bfloat16 bits (uint16) of float32 values: exact for bfloat16 values only."""
    return (W.view(np.uint32) >> 16).astype(np.uint16)


def bf16_copy(W: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """The bfloat16 copy of W the forward reads its matrices from (the top halves of W's
    words: exact for the matrices, and only they are read from it), or NO_COPY when a
    matrix is not bfloat16-exact."""
    if len(matrices) == 0 or not matrices_exact(W, matrices):
        return NO_COPY
    return top_halves(W)


COPY_SETTING = "RWKVZIP_BF16_COPY"  # "1": keep a copy wherever exact, "0": never; unset: measured
CALIBRATION = (4, 128, 768)  # matrices read in turn, their shape: the 128x1 priors' MLP, whose
# 1.6 MB of float32 (0.8 MB copied) is out of L2 as the forward's matrices are in the codec


def copy_pays() -> bool:
    """Whether a frozen network reads its matrices from a bfloat16 copy on this CPU:
    COPY_SETTING when set, else whether the copy was the faster one here (measured once a
    process, about 5 ms). The choice never changes a bit of the output."""
    setting = os.environ.get(COPY_SETTING, "")
    if setting in ("0", "1"):
        return setting == "1"
    return copy_measured_faster()


@functools.cache
def copy_measured_faster() -> bool:
    """CALIBRATION's matvecs timed from float32 and from bfloat16 copies, in turn, five
    rounds; the better round of each decides."""
    from rwkvzip.ops.linalg import matvec  # linalg imports this module's widening

    count, n_in, n_out = CALIBRATION
    rng = np.random.default_rng(0)
    mats32 = [round_to_bf16(rng.standard_normal(n_in * n_out).astype(np.float32))
              for _ in range(count)]
    forms = (mats32, [top_halves(M) for M in mats32])
    x = rng.standard_normal(n_in).astype(np.float32)
    y = np.empty(n_out, dtype=np.float32)
    best = [math.inf, math.inf]
    for _ in range(5):
        for k, mats in enumerate(forms):
            matvec(mats[0], x, n_in, n_out, y)  # compiled (or loaded) before the clock
            t = time.perf_counter()
            for _ in range(8):
                for M in mats:
                    matvec(M, x, n_in, n_out, y)
            best[k] = min(best[k], time.perf_counter() - t)
    return best[1] < best[0]
