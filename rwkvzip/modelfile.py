"""Save and load a model's weights as safetensors, with the architecture and config in metadata.

Tensor names follow the reference RWKV-7 checkpoints (model.embeddings.weight,
model.layers.{i}.attn.r_proj.weight, ..., lm_head.weight); rwkvzip adds lm_head.bias.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rwkvzip.net.params import (
    ARCH_METADATA_KEY,
    CONFIG_METADATA_KEY,
    ModelFileError,
    check_tensors,
    load_safetensors,
    safetensors_bytes,
)
from rwkvzip.net.rwkv7.model import Rwkv7Config
from rwkvzip.ops import ALPHABET
from rwkvzip.recipe import ARCHS


def model_bytes(model, W: np.ndarray, extra: dict[str, str] | None = None,
                more: dict[str, np.ndarray] | None = None, bf16_matrices: bool = False) -> bytes:
    """A safetensors file: weights in file orientation (and the tensors in `more`);
    architecture, config (and `extra`) in the metadata. With `bf16_matrices` the matrices
    are stored as BF16 (they must be bfloat16 values: ops/bf16.py, round_matrices)."""
    metadata = {ARCH_METADATA_KEY: model.arch,
                CONFIG_METADATA_KEY: json.dumps(model.cfg.to_dict(), sort_keys=True),
                **(extra or {})}
    bf16 = frozenset(s.name for s in model.layout.specs
                     if bf16_matrices and s.input_major_matrix)
    return safetensors_bytes({**model.layout.tensors(W), **(more or {})}, metadata, bf16)


def save_model(path: str | Path, model, W: np.ndarray) -> None:
    Path(path).write_bytes(model_bytes(model, W))


def _infer_rwkv7_config(tensors: dict[str, np.ndarray], path) -> Rwkv7Config:
    """Config from tensor shapes, for checkpoints written without rwkvzip metadata."""
    def shape(name: str) -> tuple[int, ...]:
        if name not in tensors:
            raise ModelFileError(f"{path}: missing tensor {name}")
        return tuple(tensors[name].shape)

    hidden = shape("model.embeddings.weight")[1]
    layers = 0
    while f"model.layers.{layers}.attn.r_proj.weight" in tensors:
        layers += 1
    v_name = "model.layers.1.attn.v_lora.lora.0.weight"
    return Rwkv7Config(
        hidden=hidden,
        layers=layers,
        ffn=shape("model.layers.0.ffn.key.weight")[0],
        decay_rank=shape("model.layers.0.attn.w_lora.lora.0.weight")[0],
        a_rank=shape("model.layers.0.attn.a_lora.lora.0.weight")[0],
        v_rank=shape(v_name)[0] if layers > 1 else 16,
        g_rank=shape("model.layers.0.attn.g_lora.lora.0.weight")[0],
    )


def load_model(path: str | Path):
    """(model, W) from a safetensors file; refuses anything it cannot use exactly."""
    try:
        tensors, metadata = load_safetensors(path)
    except OSError as exc:
        raise ModelFileError(f"{path}: {exc.strerror or exc}") from None
    return model_from_tensors(tensors, metadata, path)


def model_from_tensors(tensors: dict[str, np.ndarray], metadata: dict[str, str], path):
    """(model, W) from parsed safetensors; `path` names the file in errors."""
    arch = metadata.get(ARCH_METADATA_KEY, "rwkv7")
    if arch not in ARCHS:
        raise ModelFileError(f"{path}: unknown architecture {arch!r}")
    cfg_cls, model_cls = ARCHS[arch]
    if CONFIG_METADATA_KEY in metadata:
        try:
            cfg = cfg_cls(**json.loads(metadata[CONFIG_METADATA_KEY]))
        except (TypeError, ValueError) as exc:
            raise ModelFileError(f"{path}: bad config metadata ({exc})") from None
    elif arch == "rwkv7":  # a reference checkpoint: config from shapes, no output bias
        cfg = _infer_rwkv7_config(tensors, path)
        tensors.setdefault("lm_head.bias", np.zeros(ALPHABET, dtype=np.float32))
    else:
        raise ModelFileError(f"{path}: no {CONFIG_METADATA_KEY} metadata for {arch}")
    try:
        model = model_cls(cfg)
    except ValueError as exc:
        raise ModelFileError(f"{path}: {exc}") from None
    check_tensors(model.layout, tensors, path)
    W = np.zeros(model.layout.size, dtype=np.float32)
    for name, value in tensors.items():
        model.layout.set(W, name, value)
    return model, W

