"""Choosing a prior's dictionary from sample files (`rwkvzip train`).

A dictionary is learnt by every stream before its first byte (priors.py), so it should hold
what files of the samples' kind share: keys, boilerplate, imports, idioms. Like zstd's COVER
trainer, the samples are cut into segments, each scored by the k-grams it holds that recur
across the samples and are not yet in the dictionary; the best segment is taken, its k-grams
stop counting, and so on until the size is reached. The segments are laid out best last, so
what matters most is nearest the data (the match model and the mixers' recent state).
"""

from __future__ import annotations

import numpy as np

SEGMENT = 1024  # bytes a dictionary is assembled from
GRAM = 6  # bytes in the k-grams that segments are scored by
DEFAULT_SIZE = 32 * 1024  # a dictionary's bytes: every stream learns them first (~1 s at -4)
MAX_SCAN = 8 << 20  # bytes of segments scored at most (an even spread over larger samples)


def gram_ids(data: bytes) -> np.ndarray:
    """A 64-bit hash of every GRAM-byte window of data (one per start position)."""
    a = np.frombuffer(data, dtype=np.uint8).astype(np.uint64)
    n = len(a) - GRAM + 1
    h = np.zeros(max(n, 0), dtype=np.uint64)
    for j in range(GRAM):
        h = h * np.uint64(0x100000001B3) + a[j:j + n]
    return h


def build(samples: list[bytes], size: int = DEFAULT_SIZE) -> bytes:
    """The dictionary of at most `size` bytes for these samples (b"" if they share nothing
    or size is 0). Deterministic: the same samples give the same dictionary."""
    segments = [s[lo:lo + SEGMENT] for s in samples for lo in range(0, len(s), SEGMENT)]
    segments = [g for g in segments if len(g) >= GRAM]
    if size <= 0 or not segments:
        return b""
    total = sum(len(g) for g in segments)
    if total <= size:
        return b"".join(segments)
    if total > MAX_SCAN:  # bounded time and memory: every k-th segment
        segments = segments[::-(-total // MAX_SCAN)]
    # (segment, gram) pairs, each distinct gram once per segment
    ids = [np.unique(gram_ids(g)) for g in segments]
    seg = np.repeat(np.arange(len(segments)), [len(x) for x in ids])
    grams, gram = np.unique(np.concatenate(ids), return_inverse=True)
    # a gram's worth: the other segments that hold it (a gram in one segment only is noise)
    worth = np.bincount(gram, minlength=len(grams)).astype(np.float64) - 1.0
    chosen: list[int] = []
    taken = 0
    while taken < size:
        score = np.bincount(seg, weights=worth[gram], minlength=len(segments))
        score[chosen] = -1.0
        best = int(np.argmax(score))
        if score[best] <= 0.0:
            break
        chosen.append(best)
        taken += len(segments[best])
        worth[gram[seg == best]] = 0.0
    picked = [segments[i] for i in reversed(chosen)]  # the best last
    return b"".join(picked)[-size:]
