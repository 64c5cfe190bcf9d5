"""Prefetch hints: they compile, touch no value, and a group they load is the one the
context models then read (so the speed they buy cannot change a coded bit)."""

import numpy as np
from mixing_probe import fed

from rwkvzip.cm import context, mixer
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.ops.jit import jit
from rwkvzip.ops.prefetch import prefetch

RICH = MixConfig(orders=(1, 2, 3, 0, context.KIND_WORD_BIGRAM), table_bits=10,
                 match_bits=14, network=False, selectors=3, sse2=True, ways=4)


@jit
def prefetch_all(a):
    for i in range(a.shape[0]):
        prefetch(a, i)
    return a.shape[0]


def test_prefetch_compiles_for_any_dtype_and_changes_nothing():
    for dtype in (np.uint8, np.uint32, np.float32, np.int64):
        a = np.arange(100).astype(dtype)
        assert prefetch_all(a) == 100
        assert np.array_equal(a, np.arange(100).astype(dtype))


def test_prefetching_the_next_bytes_slots_and_rows_changes_no_state():
    arrays = fed(b"the cat sat on the mat; the cat sat on the hat. " * 8, RICH)
    before = [x.copy() for x in (arrays.CT, arrays.S, arrays.MX)]
    context.prefetch_slots(arrays.CT, arrays.S, 17)
    mixer.prefetch_rows(arrays.S, arrays.MX)
    for x, y in zip(before, (arrays.CT, arrays.S, arrays.MX), strict=True):
        assert np.array_equal(x, y)


def test_the_slot_found_lies_in_the_group_prefetched():
    arrays = fed(b"abracadabra, abracadabra! " * 20, RICH)
    S, CT = arrays.S, arrays.CT
    ways = S[context.S_WAYS]
    found = 0
    for o in range(S[context.S_K]):
        for j in range(17):
            idx, _ = context.slot_address(S, o, j)
            first = (idx & ~(ways - 1)) * context.SLOT
            base = context.find_slot(CT, S, o, j)
            if base >= 0:
                found += 1
                assert first <= base < first + ways * context.SLOT
    assert found >= 5  # the repeated text's contexts are known
