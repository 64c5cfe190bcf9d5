"""Byte histories of contexts (mix field runs; paq8px's run map): every context of every
model remembers the last byte that followed it, the byte before that if it differed, and how
many times in a row the last one came. While the coded byte's bits so far agree with one of
those bytes, its next bit is one more input of the mixer per model: a map learnt online from
the run's length, the depth, whether the context ever saw another byte and the predicted
bit to the probability of a 1. A context's counters average what followed it; its history
says what followed it last and how steadily (at -6 the Unicode-table tuning slices -0.64 %,
the other binaries -0.91 %, the Canterbury files -0.92 %: bible.txt -1.07 %, world192.txt
-1.29 %).

A history is 24 bits: the last byte (bits 0-7), the one before it (8-15, the same while the
context saw one byte only) and the run (16-23, 1 ... 255; 0: no history). Each model keeps
its histories in a table of its own of 2**(table bits - SHRINK) 32-bit entries, a history
under an 8-bit check, found by the context's hash (history_hash). A slot table holds the
high nibbles of about 1/17 as many contexts as it has slots, so an eighth of its size keeps
most of what the slots keep: against a history beside every slot (eight times the memory),
the binary tuning slices 0.01 % smaller, world192.txt 0.21 % larger (a large text's many
contexts). The state fields and the table lookups are context.py's (S_RUNS_*, byte_history,
history_input); this module is the history's arithmetic.
"""

from __future__ import annotations

from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

SHRINK = 3  # a model's history table has 2**(its table bits - SHRINK) entries
RUN_MAX = 63  # runs longer than this share the map's cells of RUN_MAX
SECOND = (RUN_MAX + 1) * 16  # the second byte's cells follow the last byte's
CELLS = SECOND + 8  # map cells per model


@jit(inline="always")
def depth_group(d):
    """The map's depth: 0, 1, 2 (depths 2-4) or 3 (5-7); one cell per depth measured worse
    (the Unicode-table tuning slices -0.48 % against -0.63 %: fewer cells learn sooner)."""
    return 0 if d == 0 else (1 if d == 1 else (2 if d < 5 else 3))


@jit(inline="always")
def cell(h, node, d):
    """The map cell for history h at tree node `node` (depth d), or -1 where neither of its
    bytes agrees with the node's prefix (or there is no history). The last byte's cells are
    by run, depth, whether another byte came before it and the bit it predicts; the one
    before it, where the last byte has left the path, by depth and bit."""
    run = h >> 16
    if run == 0:
        return -1
    last = h & 0xFF
    before = (h >> 8) & 0xFF
    other = int(last != before)
    if ((last | 256) >> (8 - d)) == node:
        bit = (last >> (7 - d)) & 1
        return ((min(run, RUN_MAX) * 4 + depth_group(d)) * 2 + other) * 2 + bit
    if other and ((before | 256) >> (8 - d)) == node:
        return SECOND + depth_group(d) * 2 + ((before >> (7 - d)) & 1)
    return -1


@jit(inline="always")
def after(h, symbol):
    """History h once `symbol` has followed its context."""
    run = h >> 16
    if run == 0:
        return symbol | (symbol << 8) | (1 << 16)
    if h & 0xFF == symbol:
        return (h & 0xFFFF) | (min(run + 1, 255) << 16)
    return symbol | ((h & 0xFF) << 8) | (1 << 16)


@jit(inline="always")
def history_hash(ctx):
    """The hash that places a context's history (its top bits) and checks it (its low 8)."""
    return hash32(ctx * 0x2F0B3C6D + 0x51ED27A3)
