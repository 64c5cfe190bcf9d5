"""The deterministic transcendental functions against numpy (float64)."""

import numpy as np
import pytest

from rwkvzip.kernels import mathf

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
    from rwkvzip.kernels.mathf import log64, log_positive_array

    rng = np.random.default_rng(5)
    x = np.concatenate([10.0 ** rng.uniform(-30, 30, 5000), [1.0, 0.5, 2.0, 0.7071067811865476,
                                                             0.70710678118654746, 1e-30, 1e30]])
    out = x.copy()
    log_positive_array(out, np.empty_like(out))
    want = np.array([log64(v) for v in x])
    assert np.array_equal(out, want)
