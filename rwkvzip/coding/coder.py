"""The range coder (constriction), wrapped so the rest of the code never touches its API.

`Categorical(perfect=False)` everywhere: the exact quantiser costs ~100 us a symbol, and both
sides must use the same one. Rows handed in are float32, contiguous and strictly positive.
"""

from __future__ import annotations

import constriction
import numpy as np

Categorical = constriction.stream.model.Categorical
RangeDecoder = constriction.stream.queue.RangeDecoder
RangeEncoder = constriction.stream.queue.RangeEncoder

_FAMILY = Categorical(perfect=False)


class CoderError(ValueError):
    """The payload cannot be a range-coder stream."""


def encode_rows(symbols: np.ndarray, probs: np.ndarray, encoder: RangeEncoder) -> None:
    """Encode symbols[t] with distribution probs[t] (one batched call)."""
    encoder.encode(symbols.astype(np.int32, copy=False), _FAMILY, probs)


def new_encoder() -> RangeEncoder:
    return RangeEncoder()


def finish(encoder: RangeEncoder) -> bytes:
    return encoder.get_compressed().astype("<u4", copy=False).tobytes()


def new_decoder(payload: bytes) -> RangeDecoder:
    if len(payload) % 4:
        raise CoderError("payload length is not a multiple of 4")
    return RangeDecoder(np.frombuffer(payload, dtype="<u4").astype(np.uint32))


def decode_one(decoder: RangeDecoder, probs: np.ndarray) -> int:
    """Decode one symbol with the distribution `probs` (float32, length 256)."""
    return decoder.decode(Categorical(probs, perfect=False))
