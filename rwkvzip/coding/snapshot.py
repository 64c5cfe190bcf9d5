"""A prior's dictionary learnt once per process, its state put back into every new predictor.

Every stream that starts from a prior with a dictionary first learns the dictionary
(priors.py), exactly as if it had coded it: 32 KB take the default level about 0.8 s, which
was most of the time of a small file. The state after it is the same for every stream of a
(recipe, prior), so it is learnt once and kept as what it changed in a fresh predictor
(`Snapshot`); a new predictor is built as before and the change is written into it. The
context tables are hundreds of MB, lazily zeroed (ops/memory.py), and the dictionary touches
a few % of their 64-byte slots, so the snapshot keeps only the slots that changed and a
restore costs copies of those (and the page faults a fresh table takes anyway), not model
time.

The predictor's whole state (network weights and recurrent state, optimizer moments, context
tables, match history, mixers, APMs, the kernels' counters) is in the arrays its kernel
takes (Predictor.state_arrays): a numba kernel changes nothing else. So the restored
predictor is bit for bit the one that learnt the dictionary, and the compressed bytes are
those of a fresh start. Arrays are compared as raw bits (-0.0 is not 0.0).

One (recipe, prior) is kept per process (the last used); `-T` workers each learn it once,
or inherit it from the process they fork from.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from rwkvzip.coding import eol
from rwkvzip.coding.codec import Predictor
from rwkvzip.priors import Prior
from rwkvzip.recipe import Recipe

CHUNK_BYTES = 64  # the unit a change is kept in: one context slot
WHOLE_BYTES = 1 << 16  # an array this small is kept whole when anything in it changed
COMPARE_BLOCK = 1 << 22  # bytes compared at a time (bounds the work arrays)
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def learn_dictionary(predictor: Predictor, recipe: Recipe, dictionary: bytes) -> None:
    """Advance a stream's predictor over a prior's dictionary, as the frames show text: with
    LF line ends where the recipe codes CRLF text as LF text (eol)."""
    predictor.learn_frame(eol.strip(dictionary) if recipe.eol else dictionary)


def _flat_bits(a: np.ndarray) -> np.ndarray:
    """A 1-D view of a contiguous array's elements as unsigned integers of their width."""
    if not a.flags.c_contiguous:
        raise ValueError("a predictor's state arrays are contiguous")
    return a.reshape(-1).view(_BITS[a.dtype.itemsize])


def _changed_chunks(new: np.ndarray, old: np.ndarray, chunk: int) -> np.ndarray:
    """Indices of the `chunk`-element pieces of `new` (1-D, length a multiple of chunk)
    that differ from `old`, compared a block at a time."""
    step = max(chunk, COMPARE_BLOCK // new.itemsize // chunk * chunk)
    found = []
    for lo in range(0, len(new), step):
        differ = (new[lo:lo + step] != old[lo:lo + step]).reshape(-1, chunk).any(axis=1)
        found.append(np.flatnonzero(differ) + lo // chunk)
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class _Change:
    """What one state array holds after the dictionary, where it differs from a fresh one:
    the whole array (chunks None), or the changed chunks' ids and contents and the tail
    after the last whole chunk."""

    at: int  # the array's place in state_arrays
    chunks: np.ndarray | None
    rows: np.ndarray
    tail: np.ndarray | None = None


class Snapshot:
    """The change a predictor made to its state since it was `fresh`, to put into another
    fresh predictor of the same recipe and starting weights (read-only: restoring never
    changes it)."""

    def __init__(self, learnt: Predictor, fresh: Predictor):
        new, old = learnt.state_arrays(), fresh.state_arrays()
        self.shapes = [(a.shape, a.dtype) for a in new]
        if self.shapes != [(a.shape, a.dtype) for a in old]:
            raise ValueError("a snapshot compares two predictors of one recipe")
        self.changes: list[_Change] = []
        for at, (a, b) in enumerate(zip(new, old, strict=True)):
            x, y = _flat_bits(a), _flat_bits(b)
            if a.nbytes < WHOLE_BYTES:
                if not np.array_equal(x, y):
                    self.changes.append(_Change(at, None, _frozen(x.copy())))
                continue
            chunk = CHUNK_BYTES // a.itemsize
            whole = len(x) - len(x) % chunk
            ids = _changed_chunks(x[:whole], y[:whole], chunk)
            rows = x[:whole].reshape(-1, chunk)[ids]
            tail = x[whole:].copy() if not np.array_equal(x[whole:], y[whole:]) else None
            if len(ids) or tail is not None:
                index = ids.astype(np.int32 if whole // chunk < 2**31 else np.int64)
                self.changes.append(_Change(at, _frozen(index), _frozen(rows),
                                            None if tail is None else _frozen(tail)))

    @property
    def nbytes(self) -> int:
        """The memory the snapshot keeps."""
        return sum(c.rows.nbytes + (0 if c.chunks is None else c.chunks.nbytes)
                   + (0 if c.tail is None else c.tail.nbytes) for c in self.changes)

    def restore(self, fresh: Predictor) -> None:
        """Write the change into a predictor built as the `fresh` one was (and not yet
        advanced): it then holds the learnt predictor's state, bit for bit."""
        arrays = fresh.state_arrays()
        if [(a.shape, a.dtype) for a in arrays] != self.shapes:
            raise ValueError("a snapshot restores into a predictor of its own recipe")
        for c in self.changes:
            x = _flat_bits(arrays[c.at])
            if c.chunks is None:
                x[:] = c.rows
                continue
            whole = len(x) - len(x) % c.rows.shape[1]
            x[:whole].reshape(-1, c.rows.shape[1])[c.chunks] = c.rows
            if c.tail is not None:
                x[whole:] = c.tail


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_lock = threading.Lock()
_kept: list = []  # [key, Snapshot] of the last (recipe, prior) learnt, or empty


def dictionary_state(recipe: Recipe, prior: Prior, fresh: Predictor) -> Snapshot:
    """The change learning `prior`'s dictionary makes to a fresh predictor of `recipe`
    (`fresh`, built from the prior's weights: the reference it is measured against), learnt
    on the first call for this recipe and prior in the process and kept for the next ones.
    The key is the recipe, the prior's digest and its dictionary and weights, so a prior
    built in memory under another's digest is never given that one's state."""
    with _lock:
        if _kept and _same_start(_kept[0], recipe, prior):
            return _kept[1]
        _kept.clear()  # one entry: the last one's memory goes before this one is learnt
        learner = Predictor(recipe, prior.W)
        learn_dictionary(learner, recipe, prior.dictionary)
        snapshot = Snapshot(learner, fresh)
        _kept[:] = [(recipe, prior.digest, prior.dictionary, prior.W), snapshot]
        return snapshot


def _same_start(key: tuple, recipe: Recipe, prior: Prior) -> bool:
    kept_recipe, digest, dictionary, W = key
    return (digest == prior.digest and kept_recipe == recipe and dictionary == prior.dictionary
            and (W is prior.W or np.array_equal(W.view(np.uint32), prior.W.view(np.uint32))))


def forget() -> None:
    """Drop the kept state (its memory), e.g. when no more streams of that prior follow."""
    with _lock:
        _kept.clear()
