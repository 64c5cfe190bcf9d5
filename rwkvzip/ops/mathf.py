"""Transcendental functions built from + - * /, floor and exact powers of two.

libm and numpy's exp/log/tanh differ between CPUs and operating systems; these do not.
They evaluate in float64 (every operation IEEE-exact, no FMA contraction) and are
accurate to well below float32 rounding, so the float32 results are identical everywhere.
The network's vector passes (`*_vector`, the softmax) run in float32 instead (exp32_lane):
the same kind of formula, IEEE-exact float32 operations, so equally identical everywhere,
with twice the lanes and half the terms.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from rwkvzip.ops.jit import jit

LN2_HI = 6.93147180369123816490e-01  # ln 2, upper bits (exactly representable products with n)
LN2_LO = 1.90821492927058770002e-10  # ln 2 - LN2_HI
LOG2E = 1.4426950408889634
SQRT_HALF = 0.7071067811865476
EXP_MAX = 88.0  # keeps exp() finite in float32 (the ninf flag forbids infinities)
EXP_MIN = -103.0  # below this exp() is zero in float32

EXP_ONE_BITS = 1023 << 52  # the bits of 1.0: adding n << 52 gives 2**n for normal n
ROUND_MAGIC = 6755399441055744.0  # 1.5 * 2**52: n + ROUND_MAGIC holds an integer n in its low bits
ROUND_MAGIC_BITS = 0x4338000000000000  # the bits of ROUND_MAGIC


@intrinsic
def float64_bits(typingctx, value):
    """The bits of a float64 as an int64 (a reinterpretation: no instruction)."""
    if not (isinstance(value, types.Float) and value.bitwidth == 64):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(value), codegen


@intrinsic
def bits_float64(typingctx, value):
    """The float64 whose bits an int64 holds."""
    if not (isinstance(value, types.Integer) and value.bitwidth == 64):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(value), codegen


@jit(inline="always")
def exp_lane(x: float) -> float:
    """exp64(x) bit for bit, in a form whose loops vectorise on every x86-64 target.

    The range clamps are selects; n stays a float (np.floor, where math.floor converts to
    int64 and back: scalar code on AVX2, which has no 64-bit float-integer conversion); and
    2**n is built from n's bits, read off n + ROUND_MAGIC (exact for the n EXP_MIN..EXP_MAX
    give). 256 exponentials: 2.4 -> 1.8 us on a Zen AVX2 host, with no scratch array."""
    xi = min(x, EXP_MAX)
    zero = xi < EXP_MIN
    xi = max(xi, EXP_MIN)
    n = np.floor(xi * LOG2E + 0.5)
    scale = bits_float64(EXP_ONE_BITS + ((float64_bits(n + ROUND_MAGIC) - ROUND_MAGIC_BITS) << 52))
    r = (xi - n * LN2_HI) - n * LN2_LO
    p = 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return 0.0 if zero else p * scale


F32 = np.float32
LOG2E_F = F32(1.44269504)
LN2_HI_F = F32(0.693359375)  # ln 2 to 10 bits: n * LN2_HI_F is exact for |n| < 2**14
LN2_LO_F = F32(-2.12194440e-4)  # ln 2 - LN2_HI_F
EXP32_MAX = F32(88.0)
EXP32_MIN = F32(-87.0)  # exp32 is 0 below (2**-126 is float32's least normal)


@intrinsic
def pow2_float32(typingctx, value):
    """2**n from the bits of a float32 n that holds an integer in [-126, 127]: n + 1.5 * 2**23
    holds n in its low bits, so n's exponent field is those bits + 127, shifted."""
    if not (isinstance(value, types.Float) and value.bitwidth == 32):
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        held = builder.bitcast(builder.fadd(args[0], ir.Constant(ir.FloatType(), 12582912.0)),
                               i32)
        field = builder.add(held, ir.Constant(i32, 127 - 0x4B400000))
        return builder.bitcast(builder.shl(field, ir.Constant(i32, 23)), ir.FloatType())
    return types.float32(value), codegen


@jit(inline="always")
def exp32_lane(x):
    """e**x in float32 arithmetic, for vector loops: 8 lanes to AVX2's
    vector where exp_lane has 4, half its terms (Taylor to r**7 / 7!, |r| <= 0.35);
    relative error <= 1.0e-7 over [-87, 88] (tests/test_mathf.py checks < 1e-6)."""
    xi = min(F32(x), EXP32_MAX)
    zero = xi < EXP32_MIN
    xi = max(xi, EXP32_MIN)
    n = np.floor(xi * LOG2E_F + F32(0.5))
    r = (xi - n * LN2_HI_F) - n * LN2_LO_F
    p = F32(1.0 / 5040.0)
    p = p * r + F32(1.0 / 720.0)
    p = p * r + F32(1.0 / 120.0)
    p = p * r + F32(1.0 / 24.0)
    p = p * r + F32(1.0 / 6.0)
    p = p * r + F32(0.5)
    p = p * r + F32(1.0)
    p = p * r + F32(1.0)
    return F32(0.0) if zero else p * pow2_float32(n)


@jit(inline="always")
def sigmoid32_lane(x):
    """1 / (1 + e**-x) in float32."""
    return F32(1.0) / (F32(1.0) + exp32_lane(-x))


@jit
def exp64(x: float) -> float:
    """e**x for float32-range arguments, relative error < 1e-15 (reduction by ln 2, Taylor
    series to r**12 / 12!, |r| <= 0.35, so the remainder is < 1e-16; exp_lane spells it
    out)."""
    return exp_lane(x)


@jit(inline="always")
def sigmoid_lane(x: float) -> float:
    """sigmoid64(x) bit for bit, for vector loops (exp_lane)."""
    return 1.0 / (1.0 + exp_lane(-x))


@jit
def sigmoid64_vector(x, out):
    """out[i] = sigmoid64(x[i]) bit for bit, in one vector pass (out apart from x): the
    mixer's float64 squash of every node."""
    for i in range(x.shape[0]):
        out[i] = sigmoid_lane(np.float64(x[i]))


@jit
def silu_vector(x, out):
    """out[i] = x[i] * sigmoid32(x[i]) in float32 lanes, one vector pass (out apart from x)."""
    for i in range(x.shape[0]):
        xi = F32(x[i])
        out[i] = xi * sigmoid32_lane(xi)


@jit
def swiglu_vector(gate, up, out):
    """out[i] = gate[i] * sigmoid32(gate[i]) * up[i] in float32 lanes, one vector pass (the
    SwiGLU's product; out apart from gate and up)."""
    for i in range(gate.shape[0]):
        g = F32(gate[i])
        out[i] = g * sigmoid32_lane(g) * up[i]


@jit
def sigmoid_vector(x, out):
    """out[i] = sigmoid32(x[i]) in float32 lanes, one vector pass (out apart from x)."""
    for i in range(x.shape[0]):
        out[i] = sigmoid32_lane(F32(x[i]))


@jit
def log64(x: float) -> float:
    """Natural log of a positive finite x, relative error < 1e-15."""
    if x <= 0.0:
        return -745.0
    m, e = math.frexp(x)  # x = m * 2**e with m in [0.5, 1): exact
    if m < SQRT_HALF:
        m = m * 2.0
        e -= 1
    return log_reduced(m, float(e))


@jit(inline="always")
def log_reduced(m: float, e: float) -> float:
    """log(m * 2**e) for m in [sqrt(1/2), sqrt(2)): the series both log forms share."""
    f = m - 1.0
    s = f / (2.0 + f)
    s2 = s * s
    # log(1+f) = 2 atanh(s) = 2 (s + s^3/3 + ...), |s| < 0.172.
    t = 1.0 / 21.0
    t = t * s2 + 1.0 / 19.0
    t = t * s2 + 1.0 / 17.0
    t = t * s2 + 1.0 / 15.0
    t = t * s2 + 1.0 / 13.0
    t = t * s2 + 1.0 / 11.0
    t = t * s2 + 1.0 / 9.0
    t = t * s2 + 1.0 / 7.0
    t = t * s2 + 1.0 / 5.0
    t = t * s2 + 1.0 / 3.0
    t = t * s2 + 1.0
    return 2.0 * s * t + e * LN2_HI + e * LN2_LO


MANTISSA_BITS = 0x000FFFFFFFFFFFFF
HALF_EXPONENT = 0x3FE0000000000000  # the exponent field of 0.5: m * 2**e with m in [0.5, 1)


@jit
def log_positive_array(x, e):
    """x[i] = log64(x[i]) in place for positive normal float64 values, bit for bit; `e` is
    float64 scratch of the same length. The exponent is taken from the bits instead of
    frexp and the branch is a select, so the loops vectorise (several times faster)."""
    bits = x.view(np.int64)
    for i in range(x.shape[0]):
        b = bits[i]
        e[i] = float(((b >> 52) & 0x7FF) - 1022)
        bits[i] = (b & MANTISSA_BITS) | HALF_EXPONENT
    for i in range(x.shape[0]):
        m = x[i]
        small = m < SQRT_HALF
        x[i] = log_reduced(m * 2.0 if small else m, e[i] - 1.0 if small else e[i])


@jit
def log1p64(y: float) -> float:
    """log(1 + y) for y > -1, accurate for tiny y (Goldberg's correction)."""
    u = 1.0 + y
    if u == 1.0:
        return y
    return log64(u) * (y / (u - 1.0))


@jit
def sigmoid64(x: float) -> float:
    return 1.0 / (1.0 + exp64(-x))


@jit
def tanh64(x: float) -> float:
    ax = abs(x)
    if ax < 0.0625:
        # Series: avoids cancellation near zero. Remainder term x^11 < 1e-14 relative.
        x2 = x * x
        return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (
            -17.0 / 315.0 + x2 * (62.0 / 2835.0 + x2 * (-1382.0 / 155925.0))))))
    t = 1.0 if ax > 20.0 else 1.0 - 2.0 / (exp64(2.0 * ax) + 1.0)
    return t if x > 0.0 else -t


@jit
def softplus64(x: float) -> float:
    """log(1 + e**x), without overflow."""
    if x > 30.0:
        return x
    if x < -30.0:
        return exp64(x)
    return log1p64(exp64(x))


@jit
def silu64(x: float) -> float:
    return x * sigmoid64(x)


# Array forms for tests and vectorised callers.


@jit
def exp_into(x, out):
    """out[i] = exp64(x[i]) in one vector pass (exp_lane in a loop, as the kernels use it).
    In place (out is x) is correct but takes LLVM's scalar path (its overlap check), so
    callers keep them apart."""
    for i in range(x.shape[0]):
        out[i] = exp_lane(np.float64(x[i]))


@jit
def exp_array(x, out):
    for i in range(x.shape[0]):
        out[i] = exp64(x[i])


@jit
def log_array(x, out):
    for i in range(x.shape[0]):
        out[i] = log64(x[i])


@jit
def tanh_array(x, out):
    for i in range(x.shape[0]):
        out[i] = tanh64(x[i])


@jit
def sigmoid_array(x, out):
    for i in range(x.shape[0]):
        out[i] = sigmoid64(x[i])


@jit
def softplus_array(x, out):
    for i in range(x.shape[0]):
        out[i] = softplus64(x[i])


@jit
def silu_array(x, out):
    for i in range(x.shape[0]):
        out[i] = silu64(x[i])

