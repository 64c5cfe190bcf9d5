"""A model for 1-bit images (fax pages, bitmaps): each pixel predicted from its neighbours.

When its record detector (context.py, S_IMAGE_REC: quicker than the record model's) has
found a row length of r bytes and the recent bytes are not text, the stream is read as rows
of 8r pixels, one bit a pixel, most significant bit leftmost. For every node of the byte's
tree (the pixel at bit 7 - d, after the d pixels of the prefix) each template picks an
adaptive counter by the pixels to its left in this row and around it in the rows above
(direct-indexed, or hashed for the two largest neighbourhoods); a small mixer of its own
(weights chosen by two templates' neighbourhoods) combines them into one input of the main
mixer, and a switch after the main mixer (two weights a bit position) lets a stream the
model explains well follow it early. Pixels are alike wherever they fall in a byte, so the
tables are shared by all eight bit positions. On other binary data with rows (tables,
executables) the same contexts are bit-level record contexts, and help there too. While it
is not live the model is silent (its input is 0 and the switch is skipped, which leaves the
mixer's arithmetic exactly as without it) and learns nothing.

Integer-only counters, like the other context models; the mixers are float32/float64 in a
fixed order, like the main mixer's. Its counters sit in CT after the match model's
(S[S_IMG_BASE]), its weights in MX (S[S_IMG_MX]); the rows above are kept as 24-bit
windows in S.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.cm import context as cx
from rwkvzip.cm.context import back, counter_p12, update_counter
from rwkvzip.cm.history import hash32, text_class
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.jit import jit
from rwkvzip.ops.mathf import sigmoid64

# Templates: each one's table holds 2**bits counters (its index has that many bits)
TEMPLATE_BITS = (12, 10, 9, 16, 14, 10, 15, 19, 20, 20)
N_TEMPLATES = len(TEMPLATE_BITS)
TEMPLATE_BASE = np.cumsum((0,) + tuple(1 << b for b in TEMPLATE_BITS))[:-1].astype(np.int64)
IMAGE_LIMIT = 255  # counters' update-count limit (images are stationary: slow, exact rates)
# The model's own mixer: inputs (templates, bias), weight sets chosen by templates 0 and 1,
# a final mixer of the two by bit position; its output is one input of the main mixer.
N_IN = N_TEMPLATES + 1
SETS1, SETS2 = 1 << TEMPLATE_BITS[0], 1 << TEMPLATE_BITS[1]
IMAGE_LR = 0.01
W_INIT = 0.3
MAX_LOGIT = 30.0
IMAGE_INPUTS = 1  # columns of the main mixer
# fields of context.STATE: on (the recipe has the model), table base in CT,
# weights' base in MX, and after each byte: r then, the rows above (1 ... 4 up), the last two
# bytes, text-likeness
(S_IMG_ON, S_IMG_BASE, S_IMG_MX, S_IMG_R, S_IMG_U1, S_IMG_U2, S_IMG_U3, S_IMG_U4, S_IMG_LEFT,
 S_IMG_TEXT) = cx.STATE.offsets("image.on", "image.base", "image.mx", "image.r", "image.u1",
                                "image.u2", "image.u3", "image.u4", "image.left", "image.text")
TEXT_SHIFT = 7  # S_IMG_TEXT follows text-likeness (of 256) at 1/128 a byte ...
TEXT_MAX = 128 << 16  # ... (16 fraction bits): the model is silent above one half


def table_size() -> int:
    """uint32 counters the model appends to CT."""
    return sum(1 << b for b in TEMPLATE_BITS)


def start_state(S: np.ndarray, on: bool, base: int) -> None:
    """The model's fields of a new stream's state (mix field image): its counters at `base`
    in CT, and text so far (silent until the data stops looking like text)."""
    S[S_IMG_ON] = int(on)
    S[S_IMG_BASE] = base
    S[S_IMG_TEXT] = TEXT_MAX * 2


# MX: the two mixers' weight sets, the final mixer's 8 x 2 weights, the switch's 8 x 2
# weights (by bit position) and the main mixer's logit at each node (for the switch to learn)
M_FINAL = (SETS1 + SETS2) * N_IN
M_SWITCH = M_FINAL + 16
M_ZMIX = M_SWITCH + 16
SWITCH_LR = 0.002


def weights_size() -> int:
    """float32 weights the model keeps in MX."""
    return M_ZMIX + ALPHABET


@jit
def init_weights(S, MX):
    base = S[S_IMG_MX]
    for i in range((SETS1 + SETS2) * N_IN):
        MX[base + i] = W_INIT
    for i in range(16):
        MX[base + M_FINAL + i] = 0.5
    for d in range(8):
        MX[base + M_SWITCH + 2 * d] = 1.0
        MX[base + M_SWITCH + 2 * d + 1] = 0.0


@jit
def row_window(HB, pos, hmask, d):
    """The 24 pixels around the one d bytes back: bytes d + 1, d, d - 1 back, left first."""
    return (back(HB, pos, hmask, d + 1) << 16) | (back(HB, pos, hmask, d) << 8) \
        | back(HB, pos, hmask, d - 1)


@jit
def next_pixels(S, HB):
    """After the history took a byte: the windows of the next byte's neighbourhood."""
    if S[S_IMG_ON] == 0:
        return
    hmask = (1 << S[cx.S_HBITS]) - 1
    pos = S[cx.S_POS]
    S[S_IMG_TEXT] += ((text_class(back(HB, pos, hmask, 1)) << 23) - S[S_IMG_TEXT]) \
        >> TEXT_SHIFT  # text_class 2 = 256 << 16
    r = S[cx.S_IMAGE_REC]
    if S[S_IMG_R] == 0 or r % S[S_IMG_R] != 0:  # a multiple of the row is still that row
        S[S_IMG_R] = r
    r = S[S_IMG_R]
    if r == 0:
        return
    S[S_IMG_U1] = row_window(HB, pos, hmask, r)
    S[S_IMG_U2] = row_window(HB, pos, hmask, 2 * r)
    S[S_IMG_U3] = row_window(HB, pos, hmask, 3 * r)
    S[S_IMG_U4] = row_window(HB, pos, hmask, 4 * r)
    S[S_IMG_LEFT] = (back(HB, pos, hmask, 2) << 8) | back(HB, pos, hmask, 1)


@jit
def around(window, b, lo, hi):
    """Pixels lo .. hi (0: straight above, < 0 to the left) of a row window, for the pixel
    at bit b of the byte: one integer, leftmost pixel highest."""
    return (window >> (b + 8 - hi)) & ((1 << (hi - lo + 1)) - 1)


@jit
def neighbourhood(S, d, A):
    """The rows-above part of every template for the pixels at depth d (the same for every
    prefix, so computed once a depth)."""
    b = 7 - d
    u1 = S[S_IMG_U1]
    u2 = S[S_IMG_U2]
    u3 = S[S_IMG_U3]
    A[0] = (around(u1, b, -2, 2) << 3) | around(u2, b, -1, 1)
    A[1] = (around(u1, b, -3, 3) << 1) | around(u2, b, 0, 0)
    A[2] = around(u1, b, 0, 0)
    A[3] = (around(u1, b, -1, 4) << 5) | around(u2, b, -2, 2)
    A[4] = around(u1, b, -6, 6)
    A[5] = (around(u1, b, -1, 1) << 4) | (around(u2, b, -1, 1) << 1) | around(u3, b, 0, 0)
    A[6] = around(u1, b, -1, 1)  # (A[7] is unused: template 7 reads A[4] with more left)
    # for the hashed ones: 7 pixels above in each of three rows; a frame around them
    A[8] = around(u1, b, -3, 3) | (around(u2, b, -3, 3) << 7) | (around(u3, b, -3, 3) << 14)
    A[9] = (around(u1, b, -4, -4) | (around(u2, b, -4, -4) << 1)
            | (around(u3, b, -4, -4) << 2) | (around(S[S_IMG_U4], b, -4, 4) << 3)
            | (around(u3, b, 4, 4) << 12) | (around(u2, b, 4, 4) << 13)
            | (around(u1, b, 4, 4) << 14))


@jit
def templates(A, left, out):
    """Table index of every template from the rows above (A, `neighbourhood`) and the
    pixels to the left (`left`, the last one in bit 0). The left pixels are the low bits,
    so the nodes of one depth read neighbouring counters."""
    out[0] = (A[0] << 4) | (left & 15)
    out[1] = (A[1] << 2) | (left & 3)
    out[2] = (A[2] << 8) | (left & 255)
    out[3] = (A[3] << 5) | (left & 31)
    out[4] = (A[4] << 1) | (left & 1)
    out[5] = (A[5] << 3) | (left & 7)
    out[6] = (A[6] << 12) | (left & 4095)
    out[7] = (A[4] << 6) | (left & 63)
    # hashed: 21 above and 3 left; with 16 more around them
    h = hash32((A[8] << 3) + (left & 7) + 0x5BD1E995)
    out[8] = h >> (32 - TEMPLATE_BITS[8])
    frame = (A[9] << 1) | ((left >> 3) & 1)
    out[9] = hash32(h + frame * 0x2545F491) >> (32 - TEMPLATE_BITS[9])


@jit
def mix_pixel(CT, S, MX, ST, d, idx, st):
    """The model's mixed logit for one pixel, from the templates' indices idx (st gets the
    inputs); returns (logit, first mixer's logit, second's)."""
    base = S[S_IMG_BASE]
    for i in range(N_TEMPLATES):
        st[i] = ST[counter_p12(CT, base + TEMPLATE_BASE[i] + idx[i])]
    st[N_TEMPLATES] = 0.25
    w1 = S[S_IMG_MX] + idx[0] * N_IN
    w2 = S[S_IMG_MX] + (SETS1 + idx[1]) * N_IN
    z1 = 0.0
    z2 = 0.0
    for i in range(N_IN):
        z1 += MX[w1 + i] * st[i]
        z2 += MX[w2 + i] * st[i]
    z1 = min(max(z1, -MAX_LOGIT), MAX_LOGIT)
    z2 = min(max(z2, -MAX_LOGIT), MAX_LOGIT)
    wf = S[S_IMG_MX] + M_FINAL + 2 * d
    z = min(max(MX[wf] * z1 + MX[wf + 1] * z2, -MAX_LOGIT), MAX_LOGIT)
    return z, z1, z2


@jit
def image_inputs(CT, S, MX, ST, X, col):
    """X[node, col]: the model's logit at every tree node (0 while no row length is known)."""
    if not live(S):
        for n in range(ALPHABET):
            X[n, col] = 0.0
        return
    A = np.empty(N_TEMPLATES, dtype=np.int64)
    idx = np.empty(N_TEMPLATES, dtype=np.int64)
    st = np.empty(N_IN, dtype=np.float64)
    for d in range(8):
        neighbourhood(S, d, A)
        left = S[S_IMG_LEFT] << d
        for prefix in range(1 << d):
            templates(A, left | prefix, idx)
            z, _, _ = mix_pixel(CT, S, MX, ST, d, idx, st)
            X[(1 << d) + prefix, col] = z


@jit
def image_input_at(CT, S, MX, ST, node, d):
    """image_inputs' value at one node of depth d (path coding)."""
    if not live(S):
        return 0.0
    A = np.empty(N_TEMPLATES, dtype=np.int64)
    idx = np.empty(N_TEMPLATES, dtype=np.int64)
    st = np.empty(N_IN, dtype=np.float64)
    neighbourhood(S, d, A)
    templates(A, (S[S_IMG_LEFT] << d) | (node - (1 << d)), idx)
    z, _, _ = mix_pixel(CT, S, MX, ST, d, idx, st)
    return z


@jit
def image_learn(CT, S, MX, ST, symbol):
    """Teach the model the coded byte's eight pixels: its mixers, then its counters."""
    if not live(S):
        return
    base = S[S_IMG_BASE]
    A = np.empty(N_TEMPLATES, dtype=np.int64)
    idx = np.empty(N_TEMPLATES, dtype=np.int64)
    st = np.empty(N_IN, dtype=np.float64)
    prefix = 0
    for d in range(8):
        bit = (symbol >> (7 - d)) & 1
        neighbourhood(S, d, A)
        templates(A, (S[S_IMG_LEFT] << d) | prefix, idx)
        z, z1, z2 = mix_pixel(CT, S, MX, ST, d, idx, st)
        w1 = S[S_IMG_MX] + idx[0] * N_IN
        w2 = S[S_IMG_MX] + (SETS1 + idx[1]) * N_IN
        wf = S[S_IMG_MX] + M_FINAL + 2 * d
        err = bit - sigmoid64(z)
        MX[wf] += IMAGE_LR * 0.5 * err * z1
        MX[wf + 1] += IMAGE_LR * 0.5 * err * z2
        e1 = bit - sigmoid64(z1)
        e2 = bit - sigmoid64(z2)
        for i in range(N_IN):
            MX[w1 + i] += IMAGE_LR * e1 * st[i]
            MX[w2 + i] += IMAGE_LR * e2 * st[i]
        for i in range(N_TEMPLATES):
            update_counter(CT, base + TEMPLATE_BASE[i] + idx[i], bit, IMAGE_LIMIT)
        prefix = 2 * prefix + bit


@jit
def live(S):
    """Whether the model speaks for the next byte: it is on, has a row length, and the data
    is not text."""
    return S[S_IMG_ON] != 0 and S[S_IMG_R] != 0 and S[S_IMG_TEXT] < TEXT_MAX


@jit
def switch(S, MX, X, col, node, d, z):
    """The final logit at a node: the main mixer's z and the model's own logit, weighted by
    bit position (at first z alone), so a stream the model explains well can follow it
    without waiting for every weight set of the main mixer to learn it."""
    base = S[S_IMG_MX]
    MX[base + M_ZMIX + node] = z
    w = base + M_SWITCH + 2 * d
    return min(max(MX[w] * z + MX[w + 1] * X[node, col], -MAX_LOGIT), MAX_LOGIT)


@jit
def learn_switch(S, MX, X, col, node, d, err):
    base = S[S_IMG_MX]
    w = base + M_SWITCH + 2 * d
    MX[w] += SWITCH_LR * err * MX[base + M_ZMIX + node]
    MX[w + 1] += SWITCH_LR * err * X[node, col]
