"""Steps the instruction models of variable-length ISAs share (x86.py, riscv.py, s390x.py,
thumb.py): the slots they take, a run of signature instructions or calls landing on known
targets as evidence, and the byte at the same place of an earlier instruction. Each model
passes the offsets of its own fields of context.STATE."""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit


@jit(inline="always")
def takes_slot(k):
    """Whether an instruction model, while live, gives kind k's slot an instruction context:
    the word, text and spreadsheet kinds (words, lines and records mean nothing in code)."""
    return cx.is_text_kind(k) or cx.KIND_SHEET_FIELD <= k <= cx.KIND_SHEET_LEFT or (
        k == cx.WORD_ORDER)


@jit
def follow_run(S, run, parity, run_end, seen, start, length, n, gap):
    """A signature instruction ended at n: a second one at its parity within `gap` bytes of
    the last is evidence (S[seen] = n), and the next instruction starts at n."""
    if S[run] > 0 and S[parity] == n & 1 and n - S[run_end] <= gap:
        S[run] = 2
    else:
        S[run] = 1
        S[parity] = n & 1
    S[run_end] = n
    if S[run] < 2:
        return
    S[seen] = n
    if S[start] != n:
        S[start] = n
        S[length] = 0


@jit
def target_hit(S, targets, bits, target, n, seen, hits, span, most):
    """A call to `target` ended at n: a target already in the table (2**bits entries from
    S[targets], by hash) is a hit; hits within `span` bytes of the last count up to `most`
    (S[hits]; S[seen] = n), and the target is remembered."""
    i = targets + (hash32(target) >> (32 - bits))
    if S[i] == target + 1:
        if S[seen] < 0 or n - S[seen] > span:
            S[hits] = 1
        else:
            S[hits] = min(S[hits] + 1, most)
        S[seen] = n
    S[i] = target + 1


@jit
def same_place(S, HB, hmask, n, same, start):
    """The byte at the next byte's place of the instruction that started at S[same] (256:
    none, the place is the first, or it is out of the history)."""
    at = S[same]
    j = n - S[start]
    if at < 0 or j == 0 or n - at > hmask:
        return 256
    return np.int64(HB[(at + j) & hmask])
