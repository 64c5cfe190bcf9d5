"""The one place that says how every numeric kernel is compiled (the determinism contract).

Only these fast-math flags are allowed: they let LLVM drop NaN/Inf/signed-zero bookkeeping
but never reorder, contract (FMA) or approximate arithmetic, so SSE2, AVX2, AVX-512 and ARM
builds produce bit-identical results.
"""

from __future__ import annotations

from numba.core import types
from numba.core.registry import CPUDispatcher

FASTMATH = frozenset({"nnan", "ninf", "nsz"})


class Kernel(CPUDispatcher):
    """numba's dispatcher, typing calls from other kernels by the arguments' plain types.

    numba compiles a jitted function called from jitted code once per *value* of each
    constant argument (`tslice(tr, I, layer, T_K, n)` is typed with `Literal[int](3)`): the
    default level compiled 138 functions where 86 are distinct, and a cold start spent
    a fifth of its time on copies. With the constants' plain types (int64, bool) each
    helper compiles once per type signature; the machine code, constants folded in where
    LLVM inlines, and its results are the same.
    """

    def get_call_template(self, args, kws):
        args = tuple(types.unliteral(a) for a in args)
        kws = {k: types.unliteral(v) for k, v in kws.items()}
        return super().get_call_template(args, kws)


def jit(func=None, **kwargs):
    """`numba.njit` with the project's fast-math subset, on-disk cache and no GIL, and
    calls between kernels typed by plain types (Kernel).

    error_model="numpy": a division is plain IEEE division. numba's default ("python") adds
    a zero check that raises ZeroDivisionError, which stops loops with a division from
    vectorising (measured: Adam update 75 us -> 9 us for 32k weights). Results are the same.

    Helpers are plain jitted functions that LLVM inlines where it pays; numba-level
    inline="always" is kept for the stepper's glue, where a constant architecture prunes the
    other network before typing. Inlining every helper at numba level made a cold compile
    take 115 s instead of 45 s, at equal speed.
    """
    options = {"fastmath": set(FASTMATH), "error_model": "numpy", "nogil": True,
               "nopython": True, "boundscheck": None, **kwargs}
    cache = options.pop("cache", True)

    def wrap(f):
        kernel = Kernel(py_func=f, locals={}, targetoptions=options)
        if cache:
            kernel.enable_caching()
        return kernel

    return wrap if func is None else wrap(func)
