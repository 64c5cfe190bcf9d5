"""The syntax model: contexts of where a byte stands in the punctuation of its line or string.

Source code, markup, configuration, debug strings and prose alike are tokens separated by
punctuation whose order follows a grammar: after `name:` in a debug string comes a type
number, after `);` in C a newline, after `="` in HTML a value, after `, ` in prose a
word. The order-k contexts see only the last k bytes, and the word kinds (0, 20 ... 22) only
the words. The model keeps, since the last line feed or NUL (the separator of lines and of
the strings in an executable's string tables), the last four bytes that are neither letters,
digits nor `_` (the punctuation path, spaces included), and a hash and length of the current
token (the letters, digits and `_` since the last of them). It sets three contexts:

* KIND_SHEET_FIELD's slot: the punctuation path and the current token;
* KIND_SHEET_COL's slot: the last two bytes of the path and a(1);
* KIND_SHEET_ABOVE's slot: the path and the token's length so far (up to LENGTH_CAP), which
  knows where names end (`tm_sec:` … `tm_hour:`) without having seen the name.

It adds no slot. It takes the spreadsheet kinds' slots (16, 17, 18) while they are absent,
that is while no BIFF record chain is followed (sheet.py), and leaves them absent while the
1-bit image model is live (image.py: a bitmap is not text). While the executable model is
live (exe.py: aligned words of code and tables, where punctuation means nothing) that
model sets the three slots to word contexts of its own. The model runs in recipes with the
mix field `syntax`, which needs kinds 16, 17 and 18 in the orders.

With the mix field `nest` it also keeps how deep the byte is in brackets (`(`, `[`, `{`
open one level, up to NEST_CAP; `)`, `]`, `}` close one) and whether a `"` is open, and
sets a fourth context in KIND_SHEET_LEFT's slot (idle like the other three, and left to it
by the executable model): the depth, the quote and the current token. In Lisp, C or JSON a
token means different things at different depths.

Measured (models/README.md, "The syntax model"): at the default the small text files gain
1-3 %, the long ones 0.2-0.6 %, and sum 3.0 % (its debug strings 2,425 -> 2,227 bytes);
the nesting ("The syntax model's nesting"): grammar.lsp 1.4 %, the others 0-0.3 %.
Everything is integer.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm import image, sheet
from rwkvzip.cm.history import hash32
from rwkvzip.ops.jit import jit

# fields of context.STATE: on (the recipe's mix field syntax), the
# punctuation path (its last four bytes, the last one lowest), the current token's hash and
# its length; then the nesting's (mix field nest): on, the bracket depth, a " open
(S_SY_ON, S_SY_PATH, S_SY_TOKEN, S_SY_LENGTH, S_SY_NEST_ON, S_SY_DEPTH,
 S_SY_QUOTE) = cx.STATE.offsets(*(f"syntax.{name}" for name in (
    "on", "path", "token", "length", "nest_on", "depth", "quote")))
NEST_CAP = 7  # deeper brackets share the depth's context
PATH_MASK = 0xFFFFFFFF  # four bytes of punctuation
LENGTH_CAP = 15  # token lengths above this share a context
KINDS = (cx.KIND_SHEET_FIELD, cx.KIND_SHEET_COL, cx.KIND_SHEET_ABOVE)  # the slots it takes
FIRST_KIND, LAST_KIND = KINDS[0], KINDS[-1]  # consecutive codes


def enabled(orders: tuple[int, ...]) -> bool:
    """Whether a recipe's orders have the slots the model takes."""
    return all(k in orders for k in KINDS)


def start_state(S: np.ndarray, on: bool, nest: bool) -> None:
    """The model's fields of a new stream's state (mix fields syntax and nest)."""
    S[S_SY_ON] = int(on)
    S[S_SY_NEST_ON] = int(nest)


def nest_enabled(orders: tuple[int, ...]) -> bool:
    """Whether a recipe's orders have the slot the nesting's context takes."""
    return cx.KIND_SHEET_LEFT in orders


@jit(inline="always")
def follow_nesting(S, last):
    """The bracket depth and the quote after byte `last` (mix field nest)."""
    if last == 40 or last == 91 or last == 123:  # ( [ {
        S[S_SY_DEPTH] = min(S[S_SY_DEPTH] + 1, NEST_CAP)
    elif (last == 41 or last == 93 or last == 125) and S[S_SY_DEPTH] > 0:  # ) ] }
        S[S_SY_DEPTH] -= 1
    if last == 34:  # "
        S[S_SY_QUOTE] ^= 1


@jit(inline="always")
def is_syntax_kind(k):
    """Kinds 16, 17, 18: the slots the model takes."""
    return FIRST_KIND <= k <= LAST_KIND


@jit(inline="always")
def is_token_byte(b):
    """Letters, digits and `_`: what a token is made of."""
    return (48 <= b <= 57) or (65 <= b <= 90) or (97 <= b <= 122) or b == 95


@jit(inline="always")
def context_hash(k, a, b):
    """A context of kind k's slot from two values (each at least 0)."""
    h = hash32(k * 0x2545F491 + 0x1234567)
    h = hash32(h * 0x01000193 + a + 2)
    return hash32(h * 0x01000193 + b + 2)


@jit
def next_contexts(S):
    """After sheet.next_contexts: move the path and token over the byte just coded and, while
    the spreadsheet kinds' slots are free and no bitmap is live, set the three contexts
    (exe.next_contexts, after this, may take the slots for its words)."""
    if S[S_SY_ON] == 0:
        return
    last = S[cx.S_HIST] & 0xFF
    if last == 0 or last == 10:  # NUL or line feed: a new string or line
        S[S_SY_PATH] = 0
        S[S_SY_TOKEN] = 0
        S[S_SY_LENGTH] = 0
    elif is_token_byte(last):
        S[S_SY_TOKEN] = hash32(S[S_SY_TOKEN] * 0x01000193 + last + 1)
        S[S_SY_LENGTH] += 1
    else:
        S[S_SY_PATH] = ((S[S_SY_PATH] << 8) | last) & PATH_MASK
        S[S_SY_TOKEN] = 0
        S[S_SY_LENGTH] = 0
    nest = S[S_SY_NEST_ON] != 0
    if nest:
        follow_nesting(S, last)
    if sheet.following(S) or image.live(S):
        return
    for m in range(S[cx.S_K]):
        k = S[cx.S_ORDERS + m]
        if k == cx.KIND_SHEET_FIELD:
            S[cx.S_CTX + m] = context_hash(k, S[S_SY_PATH], S[S_SY_TOKEN])
        elif k == cx.KIND_SHEET_COL:
            S[cx.S_CTX + m] = context_hash(k, S[S_SY_PATH] & 0xFFFF, last)
        elif k == cx.KIND_SHEET_ABOVE:
            S[cx.S_CTX + m] = context_hash(k, S[S_SY_PATH], min(S[S_SY_LENGTH], LENGTH_CAP))
        elif k == cx.KIND_SHEET_LEFT and nest:
            S[cx.S_CTX + m] = context_hash(k, 2 * S[S_SY_DEPTH] + S[S_SY_QUOTE], S[S_SY_TOKEN])
