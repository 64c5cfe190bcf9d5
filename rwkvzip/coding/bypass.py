"""Which frames bypass the models: data that does not compress, found before they run.

Compressed media and archives and encrypted data take the models as long as any data and
come out no smaller (the frame is stored). With the recipe field `bypass` the encoder looks
at each frame first and, when it would not shrink, stores it with a bit in its head that
says the models never saw it: neither side runs them over it, so such data goes through at
the speed of a CRC. The decision is the encoder's alone (the decoder reads the bit), so it
may use any test; this one is cheap and careful:

* the frame's bytes are as evenly spread as random bytes (`looks_flat`: the sum of the
  squared byte counts at most FLAT_SLACK over what n random bytes give on average, so the
  order-2 Renyi entropy is at least 7.99 bits a byte, the Shannon entropy more, and coding
  the bytes by their frequencies alone would save under 0.1 %), and
* no run of GRAM bytes at the frame's sampled places (content-defined: where a hash of
  the run has its low SAMPLE_BITS bits zero, about one place in 32) occurs twice in it or in
  the frames the models saw within `history` bytes before it: the match model would find
  such repeats (concatenated gzip members repeat their headers, small PNGs their chunks,
  an archive the same file twice), and the context models learn what repeats.

Frames that bypass are not part of the models' history, so a later repeat of one is
coded without it (as the first copy was).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from rwkvzip.recipe import Recipe

FLAT_SLACK = (1005, 1000)  # the squared counts' sum may exceed a random sample's by 0.5 %
GRAM = 8  # bytes of a run whose repeat counts
SAMPLE_BITS = 5  # a place is sampled when its run's hash has these low bits zero
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def looks_flat(data: np.ndarray) -> bool:
    """Whether the byte counts c are as even as n random bytes': sum c^2 within FLAT_SLACK
    of its mean n + n (n - 1) / 256 for random bytes. Integers only, so every machine
    decides alike (the decision is in the frame head)."""
    n = len(data)
    squares = int((np.bincount(data, minlength=256).astype(np.int64) ** 2).sum())
    more, base = FLAT_SLACK
    return 256 * squares * base <= more * (256 * n + n * (n - 1))


def sampled_runs(data: np.ndarray) -> np.ndarray:
    """Hashes of the GRAM-byte runs at the sampled places, sorted."""
    if len(data) < GRAM:
        return np.zeros(0, dtype=np.uint64)
    windows = np.lib.stride_tricks.sliding_window_view(data, GRAM)
    runs = np.zeros(len(windows), dtype=np.uint64)
    for i in range(GRAM):
        runs |= windows[:, i].astype(np.uint64) << np.uint64(8 * i)
    with np.errstate(over="ignore"):
        hashes = runs * _MULTIPLIER
    hashes ^= hashes >> np.uint64(29)
    return np.sort(hashes[hashes & np.uint64((1 << SAMPLE_BITS) - 1) == 0])


def history_bytes(recipe: Recipe) -> int:
    """How far back the recipe's match model finds repeats (a network alone: as far as the
    default level's)."""
    models = recipe.mix if recipe.mix is not None else recipe.counts
    return 1 << (models.match_bits if models is not None else 22)


class Bypass:
    """The encoder's test, frame after frame, with what the models saw within `history`
    bytes (the match model's reach)."""

    def __init__(self, history: int):
        self.history = history
        self._seen: deque[tuple[int, np.ndarray]] = deque()  # (bytes, sampled runs)
        self._seen_bytes = 0

    def decide(self, raw: bytes) -> bool:
        """Whether this frame bypasses the models; a frame that does not is remembered."""
        data = np.frombuffer(raw, dtype=np.uint8)
        runs = sampled_runs(data)
        if len(data) == 0 or not looks_flat(data) or self._repeats(runs):
            self._seen.append((len(data), runs))
            self._seen_bytes += len(data)
            while self._seen and self._seen_bytes - self._seen[0][0] >= self.history:
                self._seen_bytes -= self._seen.popleft()[0]
            return False
        return True

    def _repeats(self, runs: np.ndarray) -> bool:
        """Whether a sampled run occurs twice in the frame or in a frame remembered."""
        if len(runs) > 1 and (runs[1:] == runs[:-1]).any():
            return True
        for _, seen in self._seen:
            if len(seen) and len(runs):
                at = np.searchsorted(seen, runs).clip(0, len(seen) - 1)
                if (seen[at] == runs).any():
                    return True
        return False
