"""The vector width of the kernels' machine code, chosen before numba loads.

On most Intel CPUs with AVX-512, LLVM's tuning prefers 256-bit vectors; the matrix-vector
product from bfloat16 copies (ops/bf16.py) then runs at four fifths of its 512-bit speed
(128x768: 5.5 against 4.3 us in cache; -7's kernels 52-58 against 46-52 us a byte:
models/README.md, "The larger prior from bfloat16 matrices"). Results do not depend on the
width: the kernels' loops never reorder arithmetic (ops/jit.py), each lane computes what a
scalar would, so this changes speed only. It is left alone when numba's target is set from
outside (NUMBA_CPU_NAME, NUMBA_CPU_FEATURES, NUMBA_ENABLE_AVX: the cross-target tests, or a
user's choice), and when numba was loaded first (its settings are read once).
"""

from __future__ import annotations

import os
import sys

OVERRIDES = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_ENABLE_AVX")


def prefer_wide_vectors() -> None:
    """Let LLVM use 512-bit vectors where the CPU has them (NUMBA_CPU_FEATURES: the host's
    features, less the 256-bit preference)."""
    if "numba" in sys.modules or any(os.environ.get(name) for name in OVERRIDES):
        return
    import llvmlite.binding as ll

    try:
        features = ll.get_host_cpu_features()
    except RuntimeError:
        return
    if features.get("avx512f"):
        os.environ["NUMBA_CPU_FEATURES"] = features.flatten() + ",-prefer-256-bit"
