"""Compress and decompress bytes and binary streams (the library's public entry points)."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from rwkvzip import container
from rwkvzip.codec import Predictor
from rwkvzip.coder import CoderError
from rwkvzip.container import FormatError
from rwkvzip.recipe import Recipe, default_recipe

Progress = Callable[[int], None]  # called with the number of raw bytes just processed


@dataclass
class Stats:
    raw_bytes: int = 0
    compressed_bytes: int = 0
    frames: int = 0
    members: int = 0


def _read_full(f: BinaryIO, n: int) -> bytes:
    """Up to n bytes, fewer only at end of input (pipes return short reads)."""
    parts, got = [], 0
    while got < n:
        chunk = f.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def compress_stream(fin: BinaryIO, fout: BinaryIO, recipe: Recipe | None = None,
                    progress: Progress | None = None) -> Stats:
    """Compress everything readable from fin into one rwkvzip stream on fout."""
    recipe = recipe or default_recipe()
    predictor = Predictor(recipe)
    stats = Stats(members=1)
    header = container.encode_header(recipe)
    fout.write(header)
    stats.compressed_bytes += len(header)
    while True:
        raw = _read_full(fin, container.MAX_FRAME)
        if not raw:
            break
        payload = predictor.encode_frame(raw)
        frame = container.encode_frame(raw, payload if len(payload) < len(raw) else None)
        fout.write(frame)
        stats.raw_bytes += len(raw)
        stats.compressed_bytes += len(frame)
        stats.frames += 1
        if progress:
            progress(len(raw))
    trailer = container.encode_trailer(stats.raw_bytes)
    fout.write(trailer)
    stats.compressed_bytes += len(trailer)
    return stats


def decompress_stream(fin: BinaryIO, fout: BinaryIO,
                      progress: Progress | None = None) -> Stats:
    """Decompress one or more concatenated rwkvzip streams from fin into fout."""
    stats = Stats()
    first = True
    while True:
        recipe = container.read_header(fin, first=first)
        if recipe is None:
            return stats
        first = False
        stats.members += 1
        predictor = Predictor(recipe)
        for frame in container.read_frames(fin):
            if frame.stored:
                raw = frame.payload
                predictor.learn_frame(raw)
            else:
                try:
                    raw = predictor.decode_frame(frame.payload, frame.raw_len)
                except CoderError as exc:
                    raise FormatError(f"corrupt input (frame {frame.index}: {exc})") from None
            container.check_frame(frame, raw)
            fout.write(raw)
            stats.raw_bytes += len(raw)
            stats.frames += 1
            if progress:
                progress(len(raw))


def compress(data: bytes, recipe: Recipe | None = None) -> bytes:
    """Compress bytes in memory."""
    out = io.BytesIO()
    compress_stream(io.BytesIO(data), out, recipe)
    return out.getvalue()


def decompress(data: bytes) -> bytes:
    """Decompress bytes in memory (concatenated streams give concatenated data)."""
    out = io.BytesIO()
    decompress_stream(io.BytesIO(data), out)
    return out.getvalue()
