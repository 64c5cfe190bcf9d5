"""ops/memory.zeros: large zeroed arrays from huge pages where the OS offers them, numpy's
zeros otherwise; either way writable zeros of the asked type and length."""

import mmap

import numpy as np
import pytest

from rwkvzip.ops import memory


@pytest.mark.parametrize("n, dtype", [(10, np.uint32), (memory.HUGE_MIN_BYTES // 4, np.uint32),
                                      (3 << 20, np.float32), ((5 << 20) + 7, np.uint8)])
def test_zeros_are_writable_zeros_of_the_type(n, dtype):
    a = memory.zeros(n, dtype)
    assert a.shape == (n,) and a.dtype == np.dtype(dtype) and a.flags.writeable
    assert a.flags.c_contiguous and not a.any()
    a[-1] = 3
    assert a[-1] == 3 and a.sum() == 3


def mapped(a: np.ndarray) -> bool:
    """Whether the array lives in a mapping of its own (np.frombuffer of an mmap)."""
    return isinstance(getattr(a.base, "obj", None), mmap.mmap)


def test_large_arrays_are_mapped_and_small_ones_are_not():
    big = memory.zeros(memory.HUGE_MIN_BYTES, np.uint8)
    small = memory.zeros(1000, np.uint8)
    assert mapped(big) == hasattr(mmap, "MADV_HUGEPAGE")
    assert not mapped(small)


def test_without_the_advice_it_is_numpys_zeros(monkeypatch):
    monkeypatch.delattr(mmap, "MADV_HUGEPAGE", raising=False)
    a = memory.zeros(memory.HUGE_MIN_BYTES, np.uint16)
    assert not mapped(a) and not a.any()
