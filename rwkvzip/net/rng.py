"""Seeded integer PRNG for initialisation: a 64-bit LCG, bit-identical on every machine.

Integer arithmetic only; the float draws are exact conversions, so a seed names the same
weights everywhere.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.ops.jit import jit

LCG_MUL = np.uint64(6364136223846793005)
SEED_MIX = 0x9E3779B97F4A7C15


@jit
def _fill_uniform(state, out):
    """out[i] = u32 / 2**32 in float32, advancing the LCG state (state[0]) once per draw."""
    s = state[0]
    mul = np.uint64(6364136223846793005)
    one = np.uint64(1)
    scale = np.float32(1.0 / 4294967296.0)
    for i in range(out.shape[0]):
        s = s * mul + one
        out[i] = np.float32(s >> np.uint64(32)) * scale
    state[0] = s


class Rng:
    """Draws in a fixed order; the order of calls is part of a model's definition."""

    def __init__(self, seed: int):
        self._state = np.array([(seed ^ SEED_MIX) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64)

    def unit(self, n: int) -> np.ndarray:
        out = np.empty(n, dtype=np.float32)
        _fill_uniform(self._state, out)
        return out

    def uniform(self, shape: tuple[int, ...], scale: float) -> np.ndarray:
        """Uniform in [-scale, scale), float32 arithmetic as (u - 0.5) * 2 * scale."""
        u = self.unit(int(np.prod(shape)))
        return (((u - np.float32(0.5)) * np.float32(2.0)) * np.float32(scale)).reshape(shape)

    def centered(self, shape: tuple[int, ...], center: float, scale: float) -> np.ndarray:
        return np.float32(center) + self.uniform(shape, scale)
