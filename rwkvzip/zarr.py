"""Zarr 3's codec for rwkvzip: `zarr.create_array(..., compressors=[RwkvzipCodec(level=1)])`.

A bytes-to-bytes codec named "rwkvzip" in the array's metadata (Zarr finds it through the
entry point `zarr.codecs`), coding each chunk with the numcodecs codec
(rwkvzip.numcodecs.Rwkvzip) in a thread, as Zarr's own compressors do.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import cached_property

from zarr.abc.codec import BytesBytesCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer
from zarr.core.buffer.cpu import as_numpy_array_wrapper
from zarr.core.common import JSON, parse_named_configuration
from zarr.registry import register_codec

from rwkvzip.numcodecs import CODEC_ID, Rwkvzip


@dataclass(frozen=True)
class RwkvzipCodec(BytesBytesCodec):
    """rwkvzip at `level` (None: the default), from the prior file at `prior` (None: the
    level's own)."""

    is_fixed_size = False
    level: int | None = None
    prior: str | None = None

    def __post_init__(self) -> None:
        self._numcodec  # noqa: B018 - a bad level fails here, not at the first chunk

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> RwkvzipCodec:
        _, configuration = parse_named_configuration(data, CODEC_ID, require_configuration=False)
        return cls(**(configuration or {}))

    def to_dict(self) -> dict[str, JSON]:
        configuration = {k: v for k, v in (("level", self.level), ("prior", self.prior))
                         if v is not None}
        return {"name": CODEC_ID, "configuration": configuration}

    @cached_property
    def _numcodec(self) -> Rwkvzip:
        return Rwkvzip(self.level, self.prior)

    def _encode_sync(self, chunk: Buffer, spec: ArraySpec) -> Buffer:
        return as_numpy_array_wrapper(self._numcodec.encode, chunk, spec.prototype)

    def _decode_sync(self, chunk: Buffer, spec: ArraySpec) -> Buffer:
        return as_numpy_array_wrapper(self._numcodec.decode, chunk, spec.prototype)

    async def _encode_single(self, chunk: Buffer, spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._encode_sync, chunk, spec)

    async def _decode_single(self, chunk: Buffer, spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk, spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError  # not known before coding


register_codec(CODEC_ID, RwkvzipCodec)
