"""Flat parameter layout (name -> offset/shape in one float32 vector) and safetensors I/O.

Matrices are stored input-major inside the flat vector (see ops/linalg.py) but saved in
the usual PyTorch (out, in) orientation, so files look like any other checkpoint.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import safetensors

CONFIG_METADATA_KEY = "rwkvzip_config"
ARCH_METADATA_KEY = "rwkvzip_arch"


class ModelFileError(ValueError):
    """A model file that cannot be used: missing or misshaped tensors, unknown dtype."""


@dataclass(frozen=True)
class TensorSpec:
    name: str  # name in safetensors files
    shape: tuple[int, ...]  # shape in files (PyTorch orientation)
    transposed: bool  # a matrix kept input-major (shape reversed) in the flat vector
    group: str  # train-scope group: embed, norm, attn, ffn, head, bias
    offset: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def input_major_matrix(self) -> bool:
        """A matrix y = x · M of the kernels (they read its twin, record its gradient)."""
        return self.transposed and len(self.shape) == 2


class Layout:
    """Ordered tensors packed back to back in one flat float32 vector."""

    def __init__(self, specs: list[TensorSpec]):
        placed, offset = [], 0
        for spec in specs:
            placed.append(TensorSpec(spec.name, spec.shape, spec.transposed, spec.group, offset))
            offset += spec.size
        self.specs: list[TensorSpec] = placed
        self.by_name: dict[str, TensorSpec] = {s.name: s for s in placed}
        self.size: int = offset

    def get(self, W: np.ndarray, name: str) -> np.ndarray:
        """The tensor in file orientation (a fresh contiguous array)."""
        spec = self.by_name[name]
        flat = W[spec.offset:spec.offset + spec.size]
        if spec.transposed:
            return np.ascontiguousarray(flat.reshape(spec.shape[::-1]).T)
        return flat.reshape(spec.shape).copy()

    def set(self, W: np.ndarray, name: str, value: np.ndarray) -> None:
        spec = self.by_name[name]
        value = np.asarray(value, dtype=np.float32)
        if value.shape != spec.shape:
            raise ModelFileError(f"tensor {name} has shape {value.shape}, expected {spec.shape}")
        if spec.transposed:
            value = value.T
        W[spec.offset:spec.offset + spec.size] = value.reshape(-1)

    def twin_table(self) -> np.ndarray:
        """Rows (offset, n_in, n_out) of every input-major matrix: what a backward pass reads
        from output-major twins (linalg.refresh_twins, input_gradient)."""
        rows = [(s.offset, s.shape[1], s.shape[0]) for s in self.specs
                if s.input_major_matrix]
        return np.array(rows, dtype=np.int64).reshape(-1, 3)

    def tensors(self, W: np.ndarray) -> dict[str, np.ndarray]:
        return {s.name: self.get(W, s.name) for s in self.specs}


def safetensors_bytes(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str],
                      bf16: frozenset[str] = frozenset()) -> bytes:
    """A safetensors file (float32 tensors, those named in `bf16` as BF16, and uint8 ones as
    U8), byte-for-byte the same for the same content: tensors and metadata in sorted order.
    Written here, not by the safetensors library: it writes the metadata in hash order
    (measured with 0.8.0: another order in every process), so the same prior would get a
    different digest each time it is saved. A BF16 tensor must hold bfloat16 values only:
    it is stored exactly, never rounded here."""
    arrays, dtypes = {}, {}
    for k in sorted(tensors):
        if tensors[k].dtype == np.uint8:
            arrays[k], dtypes[k] = np.ascontiguousarray(tensors[k]), "U8"
            continue
        a = np.ascontiguousarray(tensors[k], dtype="<f4")
        arrays[k], dtypes[k] = a, "F32"
        if k in bf16:
            bits = a.view("<u4")
            if np.any(bits & 0xFFFF):
                raise ValueError(f"tensor {k} holds values that are not bfloat16")
            arrays[k], dtypes[k] = (bits >> 16).astype("<u2"), "BF16"
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, a in arrays.items():
        header[name] = {"dtype": dtypes[name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as the format asks
    return b"".join([struct.pack("<Q", len(raw)), raw, *(a.tobytes() for a in arrays.values())])


def save_safetensors(path: str | Path, tensors: Mapping[str, np.ndarray],
                     metadata: Mapping[str, str]) -> None:
    Path(path).write_bytes(safetensors_bytes(tensors, metadata))


# the dtypes a model file may hold, as numpy reads their bytes (BF16 as its bit pattern)
_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8", "U8": "u1"}


def load_safetensors(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Read every tensor as float32 (U8 ones as uint8) plus the metadata; F16/BF16/F64
    convert exactly or refuse."""
    return parse_safetensors(Path(path).read_bytes(), path)


def parse_safetensors(data: bytes, path: str | Path = "<bytes>"
                      ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors (as float32; U8 ones as uint8) and metadata of a safetensors file's bytes;
    `path` names it in errors. The safetensors library checks the layout and cuts out the
    tensors; the metadata comes from the header it has checked (the library reads it only
    from a file on disk), and BF16 widens here (numpy has no bfloat16)."""
    try:
        entries = safetensors.deserialize(bytes(data))
    except (safetensors.SafetensorError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{path}: not a safetensors file ({exc})") from None
    (hlen,) = struct.unpack("<Q", data[:8])
    metadata = json.loads(bytes(data[8:8 + hlen])).get("__metadata__") or {}
    tensors = {}
    for name, info in entries:
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ModelFileError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        raw = np.frombuffer(info["data"], dtype=_DTYPES[dtype]).reshape(info["shape"])
        if dtype == "BF16":
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        elif dtype == "U8":
            tensors[name] = raw.copy()
            continue
        elif dtype == "F64":
            arr = raw.astype(np.float32)
            if not np.array_equal(arr.astype(np.float64), raw):
                raise ModelFileError(f"{path}: tensor {name} is float64 and not float32-exact")
        else:
            arr = raw.astype(np.float32)
        if not np.all(np.isfinite(arr)):
            raise ModelFileError(f"{path}: tensor {name} holds NaN or infinity")
        tensors[name] = arr
    return tensors, dict(metadata)


def check_tensors(layout: Layout, tensors: Mapping[str, np.ndarray], path: str | Path) -> None:
    """Every tensor present with its shape; nothing unexpected."""
    missing = [s.name for s in layout.specs if s.name not in tensors]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ModelFileError(f"{path}: missing tensor {missing[0]}{more}")
    for s in layout.specs:
        if tuple(tensors[s.name].shape) != s.shape:
            raise ModelFileError(f"{path}: tensor {s.name} has shape "
                                 f"{tuple(tensors[s.name].shape)}, expected {s.shape}")
    extra = sorted(set(tensors) - set(layout.by_name))
    if extra:
        raise ModelFileError(f"{path}: unexpected tensor {extra[0]}")
