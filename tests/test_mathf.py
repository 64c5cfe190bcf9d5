"""The deterministic transcendental functions against numpy (float64), and against the
float64 exponential written out in plain Python (the bits the mixer's squash uses)."""

import math

import numpy as np
import pytest

from rwkvzip.ops import mathf

GRID = np.concatenate([np.linspace(-30, 30, 60001), np.geomspace(1e-9, 1, 500),
                       -np.geomspace(1e-9, 1, 500)])

CASES = [
    (mathf.exp_array, np.exp, np.linspace(-87, 88, 100001)),
    (mathf.log_array, np.log, np.geomspace(1e-38, 3e38, 100001)),
    (mathf.tanh_array, np.tanh, GRID),
    (mathf.sigmoid_array, lambda x: 1 / (1 + np.exp(-x)), GRID),
    (mathf.softplus_array, lambda x: np.logaddexp(0, x), GRID),
    (mathf.silu_array, lambda x: x / (1 + np.exp(-x)), GRID),
]


def contract_exp(x: float) -> float:
    """exp64 as it is defined (branches and a power-of-two table), in Python floats:
    IEEE double operations in the same order, no fused multiply-add."""
    x = min(x, mathf.EXP_MAX)
    if x < mathf.EXP_MIN:
        return 0.0
    n = math.floor(x * mathf.LOG2E + 0.5)
    r = (x - n * mathf.LN2_HI) - n * mathf.LN2_LO
    p = 1.0 / 479001600.0
    for c in (1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
              1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
        p = p * r + c
    return p * 2.0 ** n


@pytest.mark.parametrize("kernel,reference,x", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_relative_error_below_float32_rounding(kernel, reference, x):
    out = np.empty_like(x)
    kernel(x, out)
    ref = reference(x)
    mask = np.abs(ref) > 1e-300
    rel = np.abs(out[mask] - ref[mask]) / np.abs(ref[mask])
    assert rel.max() < 1e-6


def test_exp_saturates_instead_of_overflowing():
    x = np.array([-1000.0, -104.0, 0.0, 88.0, 1000.0])
    out = np.empty_like(x)
    mathf.exp_array(x, out)
    assert out[0] == 0.0 and out[1] == 0.0 and out[2] == 1.0
    assert np.all(np.isfinite(out)) and out[4] == out[3]


def test_log_positive_array_is_log64_bit_for_bit():
    """The vectorised form the mixer uses gives exactly log64's bits."""
    from rwkvzip.ops.mathf import log64, log_positive_array

    rng = np.random.default_rng(5)
    x = np.concatenate([10.0 ** rng.uniform(-30, 30, 5000), [1.0, 0.5, 2.0, 0.7071067811865476,
                                                             0.70710678118654746, 1e-30, 1e30]])
    out = x.copy()
    log_positive_array(out, np.empty_like(out))
    want = np.array([log64(v) for v in x])
    assert np.array_equal(out, want)


def test_exp_into_is_exp64_bit_for_bit():
    """exp_into (exp_lane in a vector pass) gives exactly exp64's bits, over the whole float32
    range and the clamps."""
    from rwkvzip.ops import mathf

    rng = np.random.default_rng(6)
    x32 = np.concatenate([rng.normal(0, 30, 20000), rng.uniform(-120, 100, 20000),
                          [mathf.EXP_MIN, mathf.EXP_MAX, 0.0, -0.0, 1e-30, -1e-30, 88.5,
                           -103.00001, -200.0, 200.0]]).astype(np.float32)
    x = x32.astype(np.float64)
    out = np.empty_like(x)
    mathf.exp_into(x, out)
    want = np.array([contract_exp(v) for v in x])
    assert np.array_equal(out, want)
    assert np.array_equal(np.array([mathf.exp64(v) for v in x]), want)
    assert np.array_equal(np.array([mathf.exp64(v) for v in x32]), want)  # float32 arguments


def test_the_mixers_sigmoid_vector_is_sigmoid64_bit_for_bit():
    """sigmoid64_vector (the mixer's squash of every node, built on exp_lane) gives exactly
    sigmoid64's bits over the whole float32 range and the clamps, into float32 and float64."""
    from rwkvzip.ops import mathf

    rng = np.random.default_rng(6)
    x32 = np.concatenate([rng.normal(0, 30, 20000), rng.uniform(-120, 100, 20000),
                          [mathf.EXP_MIN, mathf.EXP_MAX, 0.0, -0.0, 1e-30, -1e-30, 88.5,
                           -103.00001, -200.0, 200.0]]).astype(np.float32)
    want = np.array([mathf.sigmoid64(v) for v in x32])
    for dtype in (np.float32, np.float64):
        got = np.empty(len(x32), dtype=dtype)
        mathf.sigmoid64_vector(x32, got)
        assert np.array_equal(got, want.astype(dtype))


def test_the_swiglu_product_is_silu_times_up_bit_for_bit():
    """swiglu_vector (the GDN's SwiGLU product): silu_vector's float32 silu times up, in
    float32."""
    from rwkvzip.ops import mathf

    rng = np.random.default_rng(9)
    gate = np.concatenate([rng.normal(0, 8, 5000), rng.uniform(-120, 100, 5000),
                           [0.0, -0.0, 1e-30, 88.5, -200.0]]).astype(np.float32)
    up = rng.normal(0, 3, len(gate)).astype(np.float32)
    out = np.empty_like(gate)
    silu32 = np.empty_like(gate)
    mathf.silu_vector(gate, silu32)
    mathf.swiglu_vector(gate, up, out)
    assert np.array_equal(out, silu32 * up)


def contract3_exp(x: np.float32) -> np.float32:
    """exp32_lane as the numeric contract (3) defines it, in numpy float32 scalars: IEEE single
    operations in the same order, no fused multiply-add."""
    f = np.float32
    x = min(f(x), mathf.EXP32_MAX)
    if x < mathf.EXP32_MIN:
        return f(0.0)
    n = np.floor(x * mathf.LOG2E_F + f(0.5))
    r = (x - n * mathf.LN2_HI_F) - n * mathf.LN2_LO_F
    p = f(1.0 / 5040.0)
    for c in (1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
        p = p * r + f(c)
    return p * f(2.0 ** int(n))


def test_float32_lanes_are_contract_3_and_accurate():
    """The network's vector passes (float32 lanes): exp32 gives the bits of its formula
    written out in numpy float32, over the whole range and the clamps, and every pass is
    within float32 rounding of numpy's float64 functions (relative error < 1e-6)."""
    from rwkvzip.ops.jit import jit

    @jit(cache=False)
    def exp32_into(x, out):
        for i in range(x.shape[0]):
            out[i] = mathf.exp32_lane(x[i])

    rng = np.random.default_rng(8)
    x = np.concatenate([rng.normal(0, 30, 20000), rng.uniform(-120, 100, 20000),
                        np.linspace(-87, 88, 100001),
                        [-87.0, 88.0, 0.0, -0.0, 1e-30, -1e-30, 88.5, -87.00001, -1e3, 1e3]]
                       ).astype(np.float32)
    got = np.empty_like(x)
    exp32_into(x, got)
    want = np.array([contract3_exp(v) for v in x[-200:]], dtype=np.float32)
    assert np.array_equal(got[-200:], want)
    assert np.array_equal(got[::97], [contract3_exp(v) for v in x[::97]])
    inside = (x >= -87.0) & (x <= 88.0)
    ref = np.exp(x[inside].astype(np.float64))
    assert (np.abs(got[inside] - ref) / ref).max() < 1e-6
    assert got[-2] == 0.0 and got[-1] == got[-9] and np.isfinite(got).all()
    grid = GRID.astype(np.float32)
    g64 = grid.astype(np.float64)
    sig = 1 / (1 + np.exp(-g64))
    for vector, ref in ((mathf.sigmoid_vector, sig), (mathf.silu_vector, g64 * sig)):
        out = np.empty_like(grid)
        vector(grid, out)
        mask = np.abs(ref) > 1e-30
        assert (np.abs(out[mask] - ref[mask]) / np.abs(ref[mask])).max() < 1e-6
    from rwkvzip.ops.linalg import softmax_with_floor

    logits = rng.normal(0, 5, 256).astype(np.float32)
    q, p = np.empty(256, np.float32), np.empty(256, np.float32)
    softmax_with_floor(logits, 2.0**-20, q, p)
    e = np.exp(logits.astype(np.float64) - logits.max())
    np.testing.assert_allclose(q, e / e.sum(), rtol=1e-6, atol=1e-12)


def test_matvec_sums_each_output_in_input_order_bit_for_bit():
    """matvec adds eight inputs a sweep over y: every output must still be the float32 sum
    of its products in input order, whatever n_in's remainder."""
    from rwkvzip.ops.jit import jit
    from rwkvzip.ops.linalg import MATVEC_JAM, matvec

    @jit(cache=False)
    def one_input_a_sweep(M, x, n_in, n_out, y):
        for o in range(n_out):
            y[o] = 0.0
        for i in range(n_in):
            for o in range(n_out):
                y[o] += M[i * n_out + o] * x[i]

    rng = np.random.default_rng(3)
    for n_in, n_out in [(1, 5), (7, 3), (8, 8), (13, 64), (64, 512), (512, 64), (67, 17)]:
        M = rng.normal(0, 1, n_in * n_out).astype(np.float32)
        x = rng.normal(0, 3, n_in).astype(np.float32)
        got, want = np.full(n_out, 9.0, np.float32), np.empty(n_out, np.float32)
        matvec(M, x, n_in, n_out, got)
        one_input_a_sweep(M, x, n_in, n_out, want)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (n_in, n_out)
    assert MATVEC_JAM == 8  # the unrolled sweep in matvec is written for eight


def test_a_helper_called_with_constants_compiles_once():
    """Calls between kernels are typed by plain types (ops.jit.Kernel): a helper called with
    the constants 3 and 4, and a flag, compiles once, not once per value."""
    from rwkvzip.ops.jit import jit

    @jit(cache=False)
    def part(x, slot, flag):
        return x[slot] if flag else -x[slot]

    @jit(cache=False)
    def whole(x):
        return part(x, 3, True) + part(x, 4, False)

    x = np.arange(8, dtype=np.float64)
    assert whole(x) == 3.0 - 4.0
    signatures = part.for_kernels().signatures
    assert [str(t) for t in signatures[0][1:]] == ["int64", "bool"]
    assert len(signatures) == 1


def test_compile_flags_compare_as_numba_compares_them():
    """ops.jit builds the compile flags' dict from a table of defaults (a cold compile spent
    13 % of its time building it): the same dict, in the same order, as numba's own, for
    flags with options set or not, and a copy."""
    from numba.core import compiler, targetconfig

    from rwkvzip.ops import jit

    values = targetconfig.TargetConfig.values
    assert getattr(values, "rwkvzip", False)  # installed with this numba
    plain, tuned = compiler.Flags(), compiler.Flags()
    tuned.nrt, tuned.fastmath, tuned.error_model = True, set(jit.FASTMATH), "numpy"
    for flags in (plain, tuned, compiler.Flags(tuned)):
        reference = {k: getattr(flags, k) for k in flags.options}
        assert list(values(flags).items()) == list(reference.items())
    assert values(tuned) != values(plain) and tuned != plain and tuned == compiler.Flags(tuned)
    jit._compare_flags_faster()  # a second install keeps the first
    assert targetconfig.TargetConfig.values is values
