"""One byte of the model's life (learn from it, then read it), and the encoder's frame loop.

Encoder and decoder call exactly these kernels, so both sides compute the same bits.
"""

from __future__ import annotations

from rwkvzip.kernels import rwkv7
from rwkvzip.kernels.common import D_V, T_P, gslice
from rwkvzip.kernels.jit import jit
from rwkvzip.kernels.optim import F_FLOOR, learn_head

ARCH_RWKV7 = 0


@jit(inline="always")
def forward(arch, token, W, state, tr, I, F):
    if arch == ARCH_RWKV7:
        rwkv7.forward_step(token, W, state, tr, I, F[F_FLOOR])


@jit
def begin(arch, W, state, tr, I, F):
    """Prediction for the first byte: the network reads byte 0 from a zero state."""
    forward(arch, 0, W, state, tr, I, F)


@jit
def advance(symbol, arch, W, O, state, tr, I, F):
    """Learn from the byte just coded, then read it to predict the next one."""
    learn_head(symbol, W, O, tr, I, F)
    forward(arch, symbol, W, state, tr, I, F)


@jit
def encode_block(data, probs, arch, W, O, state, tr, I, F):
    """Copy each byte's coding distribution into probs[t] and advance over the block."""
    V = I[D_V]
    p = gslice(tr, I, T_P, V)
    for t in range(data.shape[0]):
        for j in range(V):
            probs[t, j] = p[j]
        advance(data[t], arch, W, O, state, tr, I, F)


@jit
def learn_block(data, arch, W, O, state, tr, I, F):
    """Advance over a block without coding it (frames stored raw)."""
    for t in range(data.shape[0]):
        advance(data[t], arch, W, O, state, tr, I, F)
