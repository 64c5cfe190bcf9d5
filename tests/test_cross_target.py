"""Determinism across CPU targets: the same bytes from SSE2-only, AVX2 and host (AVX-512)
builds, and each decodes the others' files."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_file

HERE = Path(__file__).parent
HASWELL_FEATURES = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+fsgsbase,+lzcnt,"
                    "+mmx,+movbe,+popcnt,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave")
TARGETS = {
    "host": {},
    "generic-sse2": {"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": ""},
    "haswell-avx2": {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": HASWELL_FEATURES},
}


def probe(target, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    env.update(TARGETS[target])
    proc = subprocess.run([sys.executable, str(HERE / "target_probe.py"), *map(str, args)],
                          capture_output=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout.decode()


@pytest.mark.parametrize("recipe", ["tiny-adam", "wide-sgd", "tiny-bptt1-adam",
                                    "tiny-tbptt-sgd", "gdn-bptt1-adam", "gdn-tbptt-sgd",
                                    "mix-tbptt-adam", "gdn-mix-bptt1",
                                    "context-models-alone"])
def test_targets_agree_bit_for_bit(tmp_path, recipe):
    src = corpus_file("canterbury/grammar.lsp")
    results = {}
    for target in TARGETS:
        out = tmp_path / f"{target}.rwkz"
        results[target] = json.loads(probe(target, "compress", recipe, src, out))
    assert len({r["kernels"] for r in results.values()}) == 1, results
    assert len({r["blob"] for r in results.values()}) == 1, results
    names = list(TARGETS)
    for i, target in enumerate(names):  # each target decodes the next one's file
        other = names[(i + 1) % len(names)]
        dst = tmp_path / f"{target}-from-{other}.out"
        probe(target, "decompress", recipe, tmp_path / f"{other}.rwkz", dst)
        assert dst.read_bytes() == src.read_bytes()
