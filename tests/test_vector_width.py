"""ops/target.py: 512-bit vectors where the CPU has AVX-512, unless numba's target is set
from outside (checked in fresh processes: numba reads its settings once)."""

from __future__ import annotations

import os
import subprocess
import sys

import llvmlite.binding as ll

PROBE = ("import os, rwkvzip.ops, numba.core.config as c; "
         "print(os.environ.get('NUMBA_CPU_FEATURES')); print(c.CPU_FEATURES)")


def run(extra: dict[str, str]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    env.pop("NUMBA_ENABLE_AVX", None)
    out = subprocess.run([sys.executable, "-c", PROBE], env={**env, **extra},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return out.split("\n")[:2]


def test_wide_vectors_on_avx512_hosts_only():
    env_value, numba_value = run({})
    if ll.get_host_cpu_features().get("avx512f"):
        assert env_value.endswith(",-prefer-256-bit") and "+avx512f" in env_value
        assert numba_value == env_value  # what numba compiles for
    else:
        assert env_value == "None"


def test_a_target_set_from_outside_is_left_alone():
    assert run({"NUMBA_CPU_NAME": "generic"})[0] == "None"
    assert run({"NUMBA_CPU_FEATURES": "+sse2"}) == ["+sse2", "+sse2"]
