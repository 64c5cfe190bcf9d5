"""The one place that says how every numeric kernel is compiled (the determinism contract).

Only these fast-math flags are allowed: they let LLVM drop NaN/Inf/signed-zero bookkeeping
but never reorder, contract (FMA) or approximate arithmetic, so SSE2, AVX2, AVX-512 and ARM
builds produce bit-identical results.
"""

from __future__ import annotations

from numba.core import types
from numba.core.registry import CPUDispatcher

from rwkvzip.ops.callee import callee

FASTMATH = frozenset({"nnan", "ninf", "nsz"})


def _compare_flags_faster() -> None:
    """numba looks its overloads up by the compile flags in force (a TargetConfig of some 40
    options), hashing and comparing them at each overloaded call it types; each time it
    builds their dict with one property call per option. py-spy put 13 % of a cold compile
    of -6 there; with the same dict built from a table of each class's defaults, -6
    compiled in 60-62 s instead of 67-68 in one process (numba 0.68, an AMD EPYC). Installed
    only where it gives numba's own answer (checked here on a Flags with options set), so
    another numba keeps its own."""
    from numba.core import compiler, targetconfig

    config = targetconfig.TargetConfig
    if getattr(config.values, "rwkvzip", False):
        return
    numba_values = config.values
    defaults: dict[type, dict] = {}

    def values(self) -> dict:
        table = defaults.get(type(self))
        if table is None:
            table = defaults[type(self)] = {k: o.default for k, o in type(self).options.items()}
        return {**table, **self._values}

    values.rwkvzip = True
    probe = compiler.Flags()
    probe.nrt, probe.fastmath = True, set(FASTMATH)
    try:
        same = list(values(probe).items()) == list(numba_values(probe).items())
    except Exception:  # noqa: BLE001 - another numba's internals: keep its own
        same = False
    if same:
        config.values = values


_compare_flags_faster()


class Kernel(CPUDispatcher):
    """numba's dispatcher, typing calls from other kernels by the arguments' plain types.

    numba compiles a jitted function called from jitted code once per *value* of each
    constant argument (`tslice(tr, I, layer, T_K, n)` is typed with `Literal[int](3)`): the
    default level compiled 138 functions where 86 are distinct, and a cold start spent
    a fifth of its time on copies. With the constants' plain types (int64, bool) each
    helper compiles once per type signature; the machine code, constants folded in where
    LLVM inlines, and its results are the same.

    Calls from other kernels go to `callee`, the form compiled for them alone
    (ops/callee.py); Python calls to this one.
    """

    def __init__(self, py_func, locals: dict, targetoptions: dict, cache: bool) -> None:
        super().__init__(py_func=py_func, locals=locals, targetoptions=targetoptions)
        if cache:
            self.enable_caching()
        self.callee = callee(py_func, locals, targetoptions, cache)

    def for_kernels(self) -> CPUDispatcher:
        """The dispatcher that compiles this kernel where kernels call it."""
        return self if self.callee is None else self.callee

    def get_call_template(self, args, kws):
        args = tuple(types.unliteral(a) for a in args)
        kws = {k: types.unliteral(v) for k, v in kws.items()}
        return CPUDispatcher.get_call_template(self.for_kernels(), args, kws)

    def get_overload(self, sig):
        """The compiled form a kernel's call links (numba asks when it lowers the call)."""
        return CPUDispatcher.get_overload(self.for_kernels(), sig)


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
        return Kernel(f, {}, options, cache)

    return wrap if func is None else wrap(func)
