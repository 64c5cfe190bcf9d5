"""What every architecture shares: the byte vocabulary and the global tensors around the blocks.

The embedding, the final layer norm, the LM head and its bias sit in the global parameter
slots of net/common.py (P_EMB..P_BIAS) and are read by the shared common.embed and
common.head_forward kernels, so every model names and shapes them the same way.
"""

from __future__ import annotations

import numpy as np

from rwkvzip.net import common as KC  # noqa: N812
from rwkvzip.net.params import Layout, TensorSpec
from rwkvzip.ops import ALPHABET

VOCAB = ALPHABET  # a byte network predicts one of the alphabet's symbols


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


class ByteModel:
    """Shapes, layout and index table of one configuration of an architecture.

    Subclasses describe their blocks and call `_build`; the int64 index table it makes is
    what the kernels read (net/common.py): dims, parameter offsets, trace offsets.
    """

    arch: str
    arch_id: int
    cfg: object

    def _build(self, hidden: int, layers: list[list[tuple[int, TensorSpec]]],
               n_layer_slots: int, n_trace_slots: int, arch_dims: dict[int, int],
               trace_sizes: tuple[list[int], list[int]], state_size: int) -> None:
        glob = global_specs(hidden)
        self.layout = Layout([s for _, s in glob] + [s for ls in layers for _, s in ls])
        self.state_size = state_size
        param_off = np.full(KC.N_GLOBAL + len(layers) * n_layer_slots, -1, dtype=np.int64)
        for slot, spec in glob:
            param_off[slot] = self.layout.by_name[spec.name].offset
        for l, ls in enumerate(layers):
            for slot, spec in ls:
                param_off[KC.N_GLOBAL + l * n_layer_slots + slot] = \
                    self.layout.by_name[spec.name].offset
        dims = np.zeros(KC.N_DIMS, dtype=np.int64)
        dims[[KC.D_C, KC.D_L, KC.D_V, KC.D_TB, KC.D_LP, KC.D_LT]] = [
            hidden, len(layers), VOCAB, KC.N_DIMS + len(param_off), n_layer_slots,
            n_trace_slots]
        for slot, value in arch_dims.items():
            dims[slot] = value
        gsz, lsz = trace_sizes
        sizes = gsz + lsz * len(layers)
        trace_off = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.trace_size = int(sum(sizes))
        self.index = np.concatenate([dims, param_off, trace_off]).astype(np.int64)
        self.trace_global = {slot: int(trace_off[slot]) for slot in range(KC.NT_GLOBAL)}

    def backward_scratch_size(self) -> int:
        """float32 entries of work space the architecture's backward pass needs."""
        raise NotImplementedError
