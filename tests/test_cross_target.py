"""Determinism across CPU targets: the same bytes from SSE2-only, AVX2 and host (AVX-512)
builds, and each decodes the others' files."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_file
from target_probe import RECIPES

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


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every target compresses the sample with every recipe, then decodes the next target's
    files: (sample, {target: compress report}, {target: (other target, output dir)})."""
    src = corpus_file("canterbury/grammar.lsp")
    root = tmp_path_factory.mktemp("targets")
    made, decoded = {}, {}
    names = list(TARGETS)
    for target in names:
        (root / target).mkdir()
        made[target] = json.loads(probe(target, "compress", src, root / target))
    for i, target in enumerate(names):
        other = names[(i + 1) % len(names)]
        dst = root / f"{target}-from-{other}"
        dst.mkdir()
        probe(target, "decompress", root / other, dst)
        decoded[target] = dst
    return src.read_bytes(), made, decoded


def test_kernels_agree_bit_for_bit(runs):
    _, made, _ = runs
    assert len({r["kernels"] for r in made.values()}) == 1, made


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_targets_agree_bit_for_bit(runs, recipe):
    sample, made, decoded = runs
    assert len({r["blobs"][recipe] for r in made.values()}) == 1, made
    for target, dst in decoded.items():  # each target decodes another target's file
        assert (dst / f"{recipe}.out").read_bytes() == sample, target
