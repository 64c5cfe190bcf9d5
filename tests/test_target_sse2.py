"""Determinism on generic-sse2: a build for that CPU target writes the host's (AVX-512) bytes
with every recipe, and each decodes the other's files."""

import pytest

from crosstarget import check_kernels, check_recipe, target_runs
from target_probe import NAMES


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return target_runs("generic-sse2", tmp_path_factory, host_first=True)


def test_kernels_agree_bit_for_bit(runs):
    check_kernels(runs)


@pytest.mark.parametrize("recipe", NAMES)
def test_recipes_agree_bit_for_bit(runs, recipe):
    check_recipe(runs, recipe)
