"""The checks of one CPU target against the host (tests/test_target_*.py: one file per
target, so parallel test workers build the targets at the same time)."""

from __future__ import annotations

from conftest import corpus_file
from target_probe import expected, run_target

# the sample every recipe codes: short, since each side codes it and decodes the other's
# files with every recipe (the kernels' compile for the target is the test's main cost)
SAMPLE, SAMPLE_BYTES = "canterbury/grammar.lsp", 1500


def sample_bytes() -> bytes:
    return corpus_file(SAMPLE).read_bytes()[:SAMPLE_BYTES]


def target_runs(target: str, tmp_path_factory, host_first: bool) -> dict:
    root = tmp_path_factory.mktemp(target)
    (root / "sample").write_bytes(sample_bytes())
    return run_target(target, root / "sample", root, host_first)


def check_kernels(runs: dict) -> None:
    assert runs["host"]["kernels"] == runs["target"]["kernels"]


def check_recipe(runs: dict, recipe: str) -> None:
    """The same bytes on both, and each decodes the other's file."""
    assert runs["host"]["blobs"][recipe] == runs["target"]["blobs"][recipe]
    sample = sample_bytes()
    for side, out in runs["decoded"].items():
        assert (out / f"{recipe}.out").read_bytes() == expected(recipe, sample), side
