"""A numcodecs codec with id "rwkvzip", for the chunks of Zarr arrays and other numcodecs users.

    numcodecs.get_codec({"id": "rwkvzip", "level": 1})
    zarr.create_array(..., compressors=[Rwkvzip(level=1)], zarr_format=2)

Registered with numcodecs through the entry point `numcodecs.codecs` (so get_codec finds it
without an import) and when this module is imported. Zarr 3 arrays (zarr_format=3) take
rwkvzip.zarr.RwkvzipCodec, its counterpart in Zarr's own codec API.

Each chunk is a whole rwkvzip stream, coded from the level's start state: a chunk costs the
model's start-up (docs/zarr.md measures it), so chunks of 64 KiB and more make sense.
"""

from __future__ import annotations

from numcodecs.abc import Codec
from numcodecs.compat import ensure_bytes, ensure_contiguous_ndarray, ndarray_copy
from numcodecs.registry import register_codec

from rwkvzip import api
from rwkvzip.recipe import level_recipe

CODEC_ID = "rwkvzip"


class Rwkvzip(Codec):
    """rwkvzip at `level` (1 ... 9, None: the default), from the prior file at `prior` (a
    path that must exist wherever the data is decoded; None: the level's own)."""

    codec_id = CODEC_ID

    def __init__(self, level: int | None = None, prior: str | None = None):
        if level is not None:
            level_recipe(level)  # a bad level fails here, not at the first chunk
        self.level = level
        self.prior = prior

    def encode(self, buf) -> bytes:
        return api.compress(ensure_bytes(ensure_contiguous_ndarray(buf)), self.level,
                            prior=self.prior)

    def decode(self, buf, out=None):
        return ndarray_copy(api.decompress(ensure_bytes(buf), prior=self.prior), out)


register_codec(Rwkvzip)
