"""Determinism across CPU targets: builds for generic SSE2 and for haswell (AVX2) write the
host's bytes with every recipe, and each side decodes the other's files (target_probe.py).
A target whose instruction set is the host's own is skipped (an AVX2 host's build is the
AVX2 case; AVX-512 is tested where the host has it), and so is one the host cannot run.
The targets compile at once, in processes of their own, at the start of the suite (this
file has the most tests, and test workers take those first)."""

import pytest

from conftest import MIXED_SAMPLE
from target_probe import NAMES, TARGETS, expected, not_probed, run_targets


# the sample every recipe codes: short, since each side codes it and decodes the other's
# files with every recipe (the kernels' compile for each target is the test's main cost):
# prose, then binary records (the record, image and executable models' data)
def sample_bytes() -> bytes:
    data = MIXED_SAMPLE.read_bytes()
    return data[:1000] + data[4500:5000]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("targets")
    (root / "sample").write_bytes(sample_bytes())
    targets = [t for t in TARGETS if not not_probed(t)]
    if not targets:
        pytest.skip("; ".join(f"{t}: {not_probed(t)}" for t in TARGETS))
    return run_targets(targets, root / "sample", root)


def probed(runs, target):
    """The target's run, or a skip saying why it was not probed."""
    reason = not_probed(target)
    if reason:
        pytest.skip(f"{target}: {reason}")
    return runs[target]


@pytest.mark.parametrize("target", TARGETS)
def test_kernels_agree_bit_for_bit(runs, target):
    run = probed(runs, target)
    assert run["host"]["kernels"] == run["target"]["kernels"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("recipe", NAMES)
def test_recipes_agree_bit_for_bit(runs, target, recipe):
    """The same bytes on both, and each decodes the other's file."""
    run = probed(runs, target)
    assert run["host"]["blobs"][recipe] == run["target"]["blobs"][recipe]
    sample = sample_bytes()
    for side, out in run["decoded"].items():
        assert (out / f"{recipe}.out").read_bytes() == expected(recipe, sample), side
