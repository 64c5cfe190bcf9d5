"""Large zeroed arrays in transparent huge pages, where the operating system offers them.

The context models read their hundreds of MB of tables at random places, every byte: with
4 KB pages nearly every read also misses the TLB, and a small file pays a page fault for
nearly every slot it touches first. Linux backs a private anonymous mapping that is
madvise(MADV_HUGEPAGE)d with 2 MB pages (when transparent huge pages are "always" or
"madvise", as most distributions ship them). Measured at the default on 150 KB of
lcet10.txt, all of fields.c and 150 KB of kennedy.xls: 5-14 % less CPU time a byte
(BENCHMARKS.md, "Huge pages"). The contents are zeros either way, so no result changes;
elsewhere (another OS, the mapping refused) it is numpy's zeros.
"""

from __future__ import annotations

import mmap

import numpy as np

HUGE_MIN_BYTES = 4 << 20  # smaller arrays: numpy's zeros (no 2 MB page to fill)


def zeros(n: int, dtype: np.dtype | type) -> np.ndarray:
    """n zeros of dtype; from huge pages when the array is large and the OS allows it."""
    dt = np.dtype(dtype)
    nbytes = int(n) * dt.itemsize
    advise = getattr(mmap, "MADV_HUGEPAGE", None)
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    if nbytes < HUGE_MIN_BYTES or advise is None or not flags:
        return np.zeros(int(n), dtype=dt)
    try:
        buf = mmap.mmap(-1, nbytes, flags=flags)
        buf.madvise(advise)
    except (OSError, ValueError):
        return np.zeros(int(n), dtype=dt)
    return np.frombuffer(buf, dtype=dt)  # the array keeps the mapping alive
