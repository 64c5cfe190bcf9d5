"""Gated DeltaNet byte model: configuration, parameter layout, seeded initialisation, index table.

The numeric work lives in net/gdn/forward.py (forward) and net/gdn/backward.py; this module
describes the shapes and names and builds the int64 table that tells the kernels where
everything is. Tensor names follow Qwen3.5's linear-attention layers
(model.layers.{i}.linear_attn.*, .mlp.*, .input_layernorm, .post_attention_layernorm); the
embedding, final norm and LM head are the shared global tensors of rwkvzip/net/base.py.

Recurrent state, per layer: [conv memory ((conv_kernel - 1) x qkv_dim, oldest row first: the
pre-conv q|k|v vectors of the previous steps), S (value_heads x key_dim x value_dim, key-major:
S[h, j, i] for key j, value i)].
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from rwkvzip.net import common as KC  # noqa: N812
from rwkvzip.net.base import VOCAB, ByteModel
from rwkvzip.net.gdn import backward as gdn_backward
from rwkvzip.net.gdn import forward as K  # noqa: N812
from rwkvzip.net.params import TensorSpec
from rwkvzip.net.rng import Rng
from rwkvzip.ops.mathf import exp_array, log64, log_array

INIT_SCALE = 0.02  # uniform half-width of every projection matrix, the embedding and the head
A_RANGE = (1.0, 16.0)  # A = exp(A_log) drawn uniform in this range (per value head)
DT_RANGE = (1e-3, 1e-1)  # softplus(dt_bias) drawn log-uniform in this range (per value head)


@dataclass(frozen=True)
class GdnConfig:
    hidden: int = 128
    layers: int = 2
    key_heads: int = 2
    value_heads: int = 4
    key_dim: int = 32
    value_dim: int = 32
    conv_kernel: int = 4
    mlp: int = 256

    def validate(self) -> None:
        if not 16 <= self.hidden <= 16384 or self.hidden % 16:
            raise ValueError(f"hidden size must be a positive multiple of 16 (at most 16384), "
                             f"got {self.hidden}")
        if not 1 <= self.layers <= 64:
            raise ValueError(f"layers must be between 1 and 64, got {self.layers}")
        for name in ("key_heads", "value_heads"):
            value = getattr(self, name)
            if not 1 <= value <= 256:
                raise ValueError(f"{name} must be between 1 and 256, got {value}")
        if self.value_heads % self.key_heads:
            raise ValueError(f"value_heads ({self.value_heads}) must be a multiple of "
                             f"key_heads ({self.key_heads})")
        for name in ("key_dim", "value_dim"):
            value = getattr(self, name)
            if not 1 <= value <= 1024:
                raise ValueError(f"{name} must be between 1 and 1024, got {value}")
        if not 1 <= self.conv_kernel <= 16:
            raise ValueError(f"conv_kernel must be between 1 and 16, got {self.conv_kernel}")
        if not 1 <= self.mlp <= 65536:
            raise ValueError(f"mlp must be between 1 and 65536, got {self.mlp}")

    @property
    def key_total(self) -> int:
        """Width of q (and of k): key_heads * key_dim."""
        return self.key_heads * self.key_dim

    @property
    def value_total(self) -> int:
        """Width of v, z and the mixer output: value_heads * value_dim."""
        return self.value_heads * self.value_dim

    @property
    def qkv_dim(self) -> int:
        """Channels of the fused q|k|v projection (and of the causal conv)."""
        return 2 * self.key_total + self.value_total

    @property
    def layer_state_size(self) -> int:
        return ((self.conv_kernel - 1) * self.qkv_dim
                + self.value_heads * self.key_dim * self.value_dim)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _layer_specs(cfg: GdnConfig, l: int) -> list[tuple[int, TensorSpec]]:
    """(slot, spec) for one block, in slot order."""
    C, F, Hv = cfg.hidden, cfg.mlp, cfg.value_heads
    VD, QKV = cfg.value_total, cfg.qkv_dim
    p = f"model.layers.{l}"

    def vec(name: str, n: int, group: str) -> TensorSpec:
        return TensorSpec(f"{p}.{name}", (n,), False, group)

    def mat(name: str, out_dim: int, in_dim: int, group: str) -> TensorSpec:
        return TensorSpec(f"{p}.{name}", (out_dim, in_dim), True, group)

    return [
        (K.L_IN_NORM, vec("input_layernorm.weight", C, "norm")),
        (K.L_QKV, mat("linear_attn.in_proj_qkv.weight", QKV, C, "attn")),
        (K.L_Z, mat("linear_attn.in_proj_z.weight", VD, C, "attn")),
        (K.L_B, mat("linear_attn.in_proj_b.weight", Hv, C, "attn")),
        (K.L_A, mat("linear_attn.in_proj_a.weight", Hv, C, "attn")),
        # file shape (channels, 1, kernel) as torch's depthwise Conv1d; kept tap-major
        (K.L_CONV, TensorSpec(f"{p}.linear_attn.conv1d.weight", (QKV, 1, cfg.conv_kernel),
                              True, "attn")),
        (K.L_DT_BIAS, vec("linear_attn.dt_bias", Hv, "attn")),
        (K.L_A_LOG, vec("linear_attn.A_log", Hv, "attn")),
        (K.L_GNORM, vec("linear_attn.norm.weight", cfg.value_dim, "norm")),
        (K.L_OUT, mat("linear_attn.out_proj.weight", C, VD, "attn")),
        (K.L_POST_NORM, vec("post_attention_layernorm.weight", C, "norm")),
        (K.L_GATE, mat("mlp.gate_proj.weight", F, C, "ffn")),
        (K.L_UP, mat("mlp.up_proj.weight", F, C, "ffn")),
        (K.L_DOWN, mat("mlp.down_proj.weight", C, F, "ffn")),
    ]


def _trace_sizes(cfg: GdnConfig) -> tuple[list[int], list[int]]:
    C = cfg.hidden
    glob = [0] * KC.NT_GLOBAL  # T_VFIRST (RWKV-7's value residual) stays empty
    glob[KC.T_XOUT] = glob[KC.T_XN] = C
    glob[KC.T_LOGITS] = glob[KC.T_Q] = glob[KC.T_P] = glob[KC.T_GLOGITS] = VOCAB
    layer = [0] * K.NT_LAYER
    for slot in (K.S_X_IN, K.S_XN, K.S_XMID, K.S_HN):
        layer[slot] = C
    for slot in (K.S_QKV, K.S_CPRE, K.S_C):
        layer[slot] = cfg.qkv_dim
    for slot in (K.S_QN, K.S_KN):
        layer[slot] = cfg.key_total
    for slot in (K.S_Z, K.S_U, K.S_DELTA, K.S_O, K.S_ON, K.S_ZS, K.S_Y):
        layer[slot] = cfg.value_total
    for slot in (K.S_BETA, K.S_APRE, K.S_G):
        layer[slot] = cfg.value_heads
    for slot in (K.S_GP, K.S_UP, K.S_ACT):
        layer[slot] = cfg.mlp
    return glob, layer


class GdnModel(ByteModel):
    """Shapes, layout and index table of one Gated DeltaNet configuration."""

    arch = "gdn"
    arch_id = 1

    def __init__(self, cfg: GdnConfig):
        cfg.validate()
        self.cfg = cfg
        self._build(
            hidden=cfg.hidden,
            layers=[_layer_specs(cfg, l) for l in range(cfg.layers)],
            n_layer_slots=K.N_LAYER,
            n_trace_slots=K.NT_LAYER,
            arch_dims={K.D_HK: cfg.key_heads, K.D_HV: cfg.value_heads, K.D_DK: cfg.key_dim,
                       K.D_DV: cfg.value_dim, K.D_KC: cfg.conv_kernel, K.D_F: cfg.mlp},
            trace_sizes=_trace_sizes(cfg),
            state_size=cfg.layers * cfg.layer_state_size,
        )

    def backward_scratch_size(self) -> int:
        return int(gdn_backward.backward_scratch_size(self.index))

    def init_params(self, seed: int) -> np.ndarray:
        """Seeded initialisation; the order of draws is part of the model's definition.

        Draws, in order: embedding, LM head; then per layer: in_proj_qkv, in_proj_z,
        in_proj_b, in_proj_a (uniform +-INIT_SCALE), conv1d (uniform +-1/sqrt(conv_kernel),
        torch's default for a depthwise conv), A_log (one unit draw per value head u:
        A_log = ln(1 + 15 u), so A = exp(A_log) spreads over [1, 16)), dt_bias (one unit draw
        per value head u: dt = 1e-3 * 100**u, dt_bias = ln(e**dt - 1) so softplus(dt_bias) = dt
        spreads log-uniformly over [1e-3, 1e-1)), out_proj, mlp gate_proj, up_proj, down_proj
        (uniform +-INIT_SCALE). Every norm weight is 1, the final norm and LM-head biases 0.
        Logs and exps use the deterministic mathf kernels, so a seed names the same weights
        on every machine.
        """
        cfg, lay = self.cfg, self.layout
        rng = Rng(seed)
        W = np.zeros(lay.size, dtype=np.float32)

        def uniform(name: str, scale: float = INIT_SCALE) -> None:
            lay.set(W, name, rng.uniform(lay.by_name[name].shape, scale))

        def const(name: str, value: float) -> None:
            lay.set(W, name, np.full(lay.by_name[name].shape, value, dtype=np.float32))

        def ln(x: np.ndarray) -> np.ndarray:
            out = np.empty_like(x)
            log_array(np.ascontiguousarray(x, dtype=np.float64), out)
            return out

        def exp(x: np.ndarray) -> np.ndarray:
            out = np.empty_like(x)
            exp_array(np.ascontiguousarray(x, dtype=np.float64), out)
            return out

        uniform("model.embeddings.weight")
        const("model.norm.weight", 1.0)
        uniform("lm_head.weight")
        Hv = cfg.value_heads
        for l in range(cfg.layers):
            p = f"model.layers.{l}"
            for norm in ("input_layernorm", "post_attention_layernorm", "linear_attn.norm"):
                const(f"{p}.{norm}.weight", 1.0)
            for name in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"):
                uniform(f"{p}.linear_attn.{name}.weight")
            uniform(f"{p}.linear_attn.conv1d.weight", 1.0 / math.sqrt(cfg.conv_kernel))
            u = rng.unit(Hv).astype(np.float64)
            a_lo, a_hi = A_RANGE
            lay.set(W, f"{p}.linear_attn.A_log", ln(a_lo + (a_hi - a_lo) * u))
            u = rng.unit(Hv).astype(np.float64)
            d_lo, d_hi = DT_RANGE
            dt = exp(log64(d_lo) + (log64(d_hi) - log64(d_lo)) * u)
            lay.set(W, f"{p}.linear_attn.dt_bias", ln(exp(dt) - 1.0))
            uniform(f"{p}.linear_attn.out_proj.weight")
            for name in ("gate_proj", "up_proj", "down_proj"):
                uniform(f"{p}.mlp.{name}.weight")
        return W
