"""What every architecture shares: the byte vocabulary and the global tensors around the blocks.

The embedding, the final layer norm, the LM head and its bias sit in the global parameter
slots of kernels/common.py (P_EMB..P_BIAS) and are read by the shared common.embed and
common.head_forward kernels, so every model names and shapes them the same way.
"""

from __future__ import annotations

from rwkvzip.kernels import common as KC  # noqa: N812
from rwkvzip.params import TensorSpec

VOCAB = 256


def global_specs(hidden: int) -> list[tuple[int, TensorSpec]]:
    """(global slot, spec) of the tensors outside the blocks, in slot order."""
    C = hidden
    return [
        (KC.P_EMB, TensorSpec("model.embeddings.weight", (VOCAB, C), False, "embed")),
        (KC.P_LNO_W, TensorSpec("model.norm.weight", (C,), False, "head")),
        (KC.P_LNO_B, TensorSpec("model.norm.bias", (C,), False, "head")),
        (KC.P_HEAD, TensorSpec("lm_head.weight", (VOCAB, C), True, "head")),
        (KC.P_BIAS, TensorSpec("lm_head.bias", (VOCAB,), False, "bias")),
    ]
