"""The per-byte loops: a Predictor holds one model's live arrays; frames are coded through it.

The encoder runs a block of bytes inside numba and codes the rows in one batched call; the
decoder alternates one numba step and one decode per byte. Both use the same kernels.
"""

from __future__ import annotations

import numpy as np

from rwkvzip import coder
from rwkvzip.kernels import stepper
from rwkvzip.kernels.common import T_P
from rwkvzip.kernels.optim import (
    F_B1POW,
    F_B2POW,
    F_BETA1,
    F_BETA2,
    F_EPS,
    F_FLOOR,
    F_LR,
    F_OPT,
    N_F,
    OPT_ADAM,
    OPT_SGD,
)
from rwkvzip.recipe import PROB_FLOOR, Recipe

ENCODE_BLOCK = 4096  # bytes per batched encode call (bounds the probability buffer to 4 MB)


class Predictor:
    """A model learning online from a seeded start; encoder and decoder each hold one."""

    def __init__(self, recipe: Recipe):
        recipe.validate()
        self.recipe = recipe
        model = recipe.build_model()
        self.model = model
        self.arch = model.arch_id
        self.W = model.init_params(recipe.seed)
        adam = recipe.optimizer == "adam"
        self.O = np.zeros((2, model.layout.size if adam else 1), dtype=np.float32)
        self.state = np.zeros(model.state_size, dtype=np.float32)
        self.trace = np.zeros(model.trace_size, dtype=np.float32)
        self.index = model.index
        F = np.zeros(N_F, dtype=np.float64)
        F[F_LR] = recipe.lr
        F[F_BETA1] = recipe.beta1
        F[F_BETA2] = recipe.beta2
        F[F_EPS] = recipe.eps
        F[F_OPT] = OPT_ADAM if adam else OPT_SGD
        F[F_B1POW] = 1.0
        F[F_B2POW] = 1.0
        F[F_FLOOR] = PROB_FLOOR
        self.F = F
        p0 = model.trace_global[T_P]
        self.probs = self.trace[p0:p0 + 256]  # live view: the distribution of the next byte
        stepper.begin(self.arch, self.W, self.state, self.trace, self.index, self.F)

    def encode_frame(self, data: bytes) -> bytes:
        """Range-coded payload of one frame; the model advances over its bytes."""
        enc = coder.new_encoder()
        buf = np.frombuffer(data, dtype=np.uint8)
        probs = np.empty((min(ENCODE_BLOCK, len(buf)), 256), dtype=np.float32)
        for lo in range(0, len(buf), ENCODE_BLOCK):
            block = buf[lo:lo + ENCODE_BLOCK]
            rows = probs[:len(block)]
            stepper.encode_block(block, rows, self.arch, self.W, self.O, self.state,
                                 self.trace, self.index, self.F)
            coder.encode_rows(block, rows, enc)
        return coder.finish(enc)

    def learn_frame(self, data: bytes) -> None:
        """Advance over bytes stored uncoded, exactly as encoding them would have."""
        buf = np.frombuffer(data, dtype=np.uint8)
        stepper.learn_block(buf, self.arch, self.W, self.O, self.state, self.trace,
                            self.index, self.F)

    def decode_frame(self, payload: bytes, raw_len: int) -> bytes:
        dec = coder.new_decoder(payload)
        out = bytearray(raw_len)
        # Locals keep the per-byte loop lean: one decode and one numba call per byte.
        decode_one, advance, probs = coder.decode_one, stepper.advance, self.probs
        arch, W, O, state, trace, index, F = (self.arch, self.W, self.O, self.state,
                                              self.trace, self.index, self.F)
        try:
            for t in range(raw_len):
                sym = decode_one(dec, probs)
                out[t] = sym
                advance(sym, arch, W, O, state, trace, index, F)
        except (ValueError, RuntimeError, AssertionError) as exc:  # constriction, corrupt payload
            raise coder.CoderError(str(exc)) from None
        return bytes(out)
