"""ops/callee.py: a kernel that other kernels call is compiled for them alone (no Python
wrapper, no machine code of its own), cached as IR, and loaded from that cache where a new
kernel calls it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rwkvzip.ops import callee
from rwkvzip.ops.jit import jit

pytestmark = pytest.mark.skipif(not callee.SUPPORTED, reason="this numba lacks what it needs")


def test_a_kernel_called_by_kernels_compiles_only_for_them():
    @jit(cache=False)
    def scale(x, k):
        return x * k

    @jit(cache=False)
    def total(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += scale(x[i], 3.0)
        return s

    x = np.arange(5, dtype=np.float64)
    assert total(x) == 30.0
    assert scale.signatures == []  # nothing compiled for Python
    assert len(scale.callee.signatures) == 1
    library = scale.callee.overloads[scale.callee.signatures[0]].library
    assert isinstance(library, callee.CalleeLibrary)
    with pytest.raises(TypeError, match="only for kernels"):
        scale.callee(1.0, 2.0)
    assert scale(2.0, 4.0) == 8.0  # Python gets its own form, compiled on demand
    assert scale.signatures and total(x) == 30.0


MODULE = """
from rwkvzip.ops.jit import jit

@jit
def part(x, i):
    return x[i] * 2.0

@jit
def first(x):
    return part(x, 0) + part(x, 1)

@jit
def second(x):
    return part(x, 2) - 1.0
"""

RUN = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import kernels
x = np.arange(4, dtype=np.float32)
got = [float(kernels.first(x))]
if sys.argv[2] == "second":
    got.append(float(kernels.second(x)))
print(json.dumps({"got": got, "part_hits": sum(kernels.part.callee.stats.cache_hits.values()),
                  "part_misses": sum(kernels.part.callee.stats.cache_misses.values()),
                  "first_hits": sum(kernels.first.stats.cache_hits.values())}))
"""


def run(module_dir: Path, cache: Path, what: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", RUN, str(module_dir), what], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_a_callee_is_cached_and_loaded_where_a_new_kernel_calls_it(tmp_path):
    (tmp_path / "kernels.py").write_text(textwrap.dedent(MODULE))
    cache = tmp_path / "cache"
    cold = run(tmp_path, cache, "first")
    assert cold["got"] == [2.0] and cold["part_misses"] == 1 and cold["first_hits"] == 0
    assert any(cache.rglob("*part-callee*.nbi"))  # beside the kernels', under its own name
    warm = run(tmp_path, cache, "second")  # `second` is new: it links part's cached IR
    assert warm["got"] == [2.0, 3.0]
    assert warm["first_hits"] == 1 and warm["part_hits"] == 1 and warm["part_misses"] == 0
