"""RWKV-7 byte model: configuration, parameter layout, seeded initialisation, index table.

The numeric work lives in net/rwkv7/forward.py; this module describes the shapes and names and
builds the int64 table that tells the kernels where everything is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rwkvzip.net import common as KC  # noqa: N812
from rwkvzip.net.base import VOCAB, ByteModel
from rwkvzip.net.params import TensorSpec
from rwkvzip.net.rng import Rng
from rwkvzip.net.rwkv7 import backward as rwkv7_backward
from rwkvzip.net.rwkv7 import forward as K  # noqa: N812

HEAD_SIZE = 64
INIT_SCALE = 0.02


@dataclass(frozen=True)
class Rwkv7Config:
    hidden: int = 128
    layers: int = 2
    ffn: int = 512
    decay_rank: int = 16
    a_rank: int = 16
    v_rank: int = 16
    g_rank: int = 32

    def validate(self) -> None:
        if self.hidden <= 0 or self.hidden % HEAD_SIZE:
            raise ValueError(f"hidden size must be a positive multiple of {HEAD_SIZE}, "
                             f"got {self.hidden}")
        if not 1 <= self.layers <= 64:
            raise ValueError(f"layers must be between 1 and 64, got {self.layers}")
        for name in ("ffn", "decay_rank", "a_rank", "v_rank", "g_rank"):
            value = getattr(self, name)
            if not 1 <= value <= 16384:
                raise ValueError(f"{name} must be between 1 and 16384, got {value}")

    @property
    def heads(self) -> int:
        return self.hidden // HEAD_SIZE

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _layer_specs(cfg: Rwkv7Config, l: int) -> list[tuple[int, TensorSpec]]:
    """(slot, spec) for one block, in slot order; absent tensors are left out."""
    C, F = cfg.hidden, cfg.ffn
    p = f"model.layers.{l}"

    def vec(name: str, group: str) -> TensorSpec:
        return TensorSpec(f"{p}.{name}", (C,), False, group)

    def mat(name: str, out_dim: int, in_dim: int, group: str) -> TensorSpec:
        return TensorSpec(f"{p}.{name}", (out_dim, in_dim), True, group)

    specs = []
    if l == 0:
        specs += [(K.L_PRE_W, vec("pre_norm.weight", "norm")),
                  (K.L_PRE_B, vec("pre_norm.bias", "norm"))]
    specs += [
        (K.L_ATT_W, vec("attn_norm.weight", "norm")),
        (K.L_ATT_B, vec("attn_norm.bias", "norm")),
        (K.L_FFN_W, vec("ffn_norm.weight", "norm")),
        (K.L_FFN_B, vec("ffn_norm.bias", "norm")),
        (K.L_X_R, vec("attn.x_r", "attn")),
        (K.L_X_W, vec("attn.x_w", "attn")),
        (K.L_X_K, vec("attn.x_k", "attn")),
        (K.L_X_V, vec("attn.x_v", "attn")),
        (K.L_X_A, vec("attn.x_a", "attn")),
        (K.L_X_G, vec("attn.x_g", "attn")),
        (K.L_WR, mat("attn.r_proj.weight", C, C, "attn")),
        (K.L_WK, mat("attn.k_proj.weight", C, C, "attn")),
        (K.L_WV, mat("attn.v_proj.weight", C, C, "attn")),
        (K.L_WO, mat("attn.o_proj.weight", C, C, "attn")),
        (K.L_W1, mat("attn.w_lora.lora.0.weight", cfg.decay_rank, C, "attn")),
        (K.L_W2, mat("attn.w_lora.lora.2.weight", C, cfg.decay_rank, "attn")),
        (K.L_W0, vec("attn.w_lora.lora.2.bias", "attn")),
        (K.L_A1, mat("attn.a_lora.lora.0.weight", cfg.a_rank, C, "attn")),
        (K.L_A2, mat("attn.a_lora.lora.2.weight", C, cfg.a_rank, "attn")),
        (K.L_A0, vec("attn.a_lora.lora.2.bias", "attn")),
    ]
    if l > 0:
        specs += [
            (K.L_V1, mat("attn.v_lora.lora.0.weight", cfg.v_rank, C, "attn")),
            (K.L_V2, mat("attn.v_lora.lora.2.weight", C, cfg.v_rank, "attn")),
            (K.L_V0, vec("attn.v_lora.lora.2.bias", "attn")),
        ]
    specs += [
        (K.L_G1, mat("attn.g_lora.lora.0.weight", cfg.g_rank, C, "attn")),
        (K.L_G2, mat("attn.g_lora.lora.2.weight", C, cfg.g_rank, "attn")),
        (K.L_K_K, vec("attn.k_k", "attn")),
        (K.L_K_A, vec("attn.k_a", "attn")),
        (K.L_R_K, vec("attn.r_k", "attn")),
        (K.L_GN_W, vec("attn.g_norm.weight", "attn")),
        (K.L_GN_B, vec("attn.g_norm.bias", "attn")),
        (K.L_F_XK, vec("ffn.x_k", "ffn")),
        (K.L_F_KEY, mat("ffn.key.weight", F, C, "ffn")),
        (K.L_F_VAL, mat("ffn.value.weight", C, F, "ffn")),
    ]
    return specs


def _trace_sizes(cfg: Rwkv7Config) -> tuple[list[int], list[int]]:
    C = cfg.hidden
    glob = [0] * KC.NT_GLOBAL
    glob[KC.T_XOUT] = glob[KC.T_XN] = glob[KC.T_VFIRST] = C
    glob[KC.T_LOGITS] = glob[KC.T_Q] = glob[KC.T_P] = glob[KC.T_GLOGITS] = VOCAB
    layer = [C] * K.NT_LAYER
    layer[K.S_WH] = cfg.decay_rank
    layer[K.S_AH] = cfg.a_rank
    layer[K.S_GH] = cfg.g_rank
    layer[K.S_VH] = cfg.v_rank
    layer[K.S_ALPHA] = cfg.heads
    layer[K.S_FPRE] = layer[K.S_FK] = cfg.ffn
    return glob, layer


class Rwkv7Model(ByteModel):
    """Shapes, layout and index table of one RWKV-7 configuration."""

    arch = "rwkv7"
    arch_id = 0

    def __init__(self, cfg: Rwkv7Config):
        cfg.validate()
        self.cfg = cfg
        C, H, N = cfg.hidden, cfg.heads, HEAD_SIZE
        self._build(
            hidden=C,
            layers=[_layer_specs(cfg, l) for l in range(cfg.layers)],
            n_layer_slots=K.N_LAYER,
            n_trace_slots=K.NT_LAYER,
            arch_dims={K.D_H: H, K.D_N: N, K.D_I: cfg.ffn, K.D_DW: cfg.decay_rank,
                       K.D_DA: cfg.a_rank, K.D_DV: cfg.v_rank, K.D_DG: cfg.g_rank},
            trace_sizes=_trace_sizes(cfg),
            state_size=cfg.layers * (2 * C + H * N * N),
        )

    def backward_scratch_size(self) -> int:
        return int(rwkv7_backward.backward_scratch_size(self.index))

    def init_params(self, seed: int) -> np.ndarray:
        """Seeded initialisation, drawing in the same order as the reference design."""
        cfg, lay = self.cfg, self.layout
        rng = Rng(seed)
        W = np.zeros(lay.size, dtype=np.float32)

        def uniform(name: str) -> None:
            lay.set(W, name, rng.uniform(lay.by_name[name].shape, INIT_SCALE))

        def const(name: str, value: float) -> None:
            lay.set(W, name, np.full(lay.by_name[name].shape, value, dtype=np.float32))

        uniform("model.embeddings.weight")
        const("model.norm.weight", 1.0)
        uniform("lm_head.weight")
        for l in range(cfg.layers):
            p = f"model.layers.{l}"
            for norm in (["pre_norm"] if l == 0 else []) + ["attn_norm", "ffn_norm",
                                                            "attn.g_norm"]:
                const(f"{p}.{norm}.weight", 1.0)
            for name in ("r_proj", "k_proj", "v_proj", "o_proj"):
                uniform(f"{p}.attn.{name}.weight")
            for lora in ["w_lora", "a_lora"] + (["v_lora"] if l > 0 else []) + ["g_lora"]:
                uniform(f"{p}.attn.{lora}.lora.0.weight")
                uniform(f"{p}.attn.{lora}.lora.2.weight")
            for mix in ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g"):
                lay.set(W, f"{p}.attn.{mix}", rng.centered((cfg.hidden,), 0.5, INIT_SCALE))
            for name in ("k_k", "k_a", "r_k"):
                const(f"{p}.attn.{name}", 1.0)
            lay.set(W, f"{p}.ffn.x_k", rng.centered((cfg.hidden,), 0.5, INIT_SCALE))
            uniform(f"{p}.ffn.key.weight")
            uniform(f"{p}.ffn.value.weight")
        return W
