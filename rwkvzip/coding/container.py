"""Container format v1 (specified in docs/FORMAT.md): header with recipe, CRC'd frames, trailer.

Only bytes in, bytes out: this module knows nothing of models. Every length read from a
file is checked against a bound before anything is allocated from it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import BinaryIO

from rwkvzip import __version__
from rwkvzip.recipe import (
    RETIRED_BY,
    RETIRED_CARDS,
    Recipe,
    RecipeError,
    preset_cards,
    preset_id_of,
)

MAGIC = b"RWKZ"
FORMAT_VERSION = 1  # what a stream without a prior of its own is written as
PRIOR_VERSION = 2  # a version-1 header followed by the SHA-256 of the prior the stream needs
DIGEST_BYTES = 32
MAX_FRAME = 1 << 16  # raw bytes per frame
MAX_RECIPE_JSON = 4096
MAX_VARINT_BYTES = 10
# Longest possible header, frame head (or end marker + trailer): an incremental reader never
# needs more buffered bytes than this to parse one of them.
MAX_HEADER = len(MAGIC) + 1 + 2 * MAX_VARINT_BYTES + MAX_RECIPE_JSON + DIGEST_BYTES
MAX_FRAME_HEAD = 3 * MAX_VARINT_BYTES + 4  # raw_len, field, coded_len (eol), crc


def max_payload(raw_len: int) -> int:
    """Upper bound on a frame's payload: a byte costs at most 20 bits (the probability floor,
    or path coding's least share of the range), plus the range coder's flush, with room to
    spare; anything larger is forged or corrupt."""
    return 4 * ((raw_len * 24 + 7) // 32 + 8)


class FormatError(ValueError):
    """The input is not a valid rwkvzip stream (foreign, corrupt or truncated)."""


class TruncatedError(FormatError):
    """The input ended inside a header, frame or trailer (more input could complete it)."""


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_exact(f: BinaryIO, n: int, what: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise TruncatedError(f"truncated input (inside {what})")
    return data


def _read_varint(f: BinaryIO, what: str) -> int:
    value = 0
    for i in range(MAX_VARINT_BYTES):
        byte = _read_exact(f, 1, what)[0]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if i and byte == 0:
                raise FormatError(f"corrupt input (non-canonical number in {what})")
            return value
    raise FormatError(f"corrupt input (number too long in {what})")


def _recipe_body(recipe: Recipe) -> bytes:
    """A preset id (>= 1), or 0 + length + canonical JSON."""
    pid = preset_id_of(recipe)
    if pid is not None:
        return encode_varint(pid)
    raw = recipe.to_json()
    return encode_varint(0) + encode_varint(len(raw)) + raw


def encode_header(recipe: Recipe) -> bytes:
    """Magic, version, then the recipe. A recipe that is a preset card (whose frozen recipe
    may name a shipped prior) is version 1 with the card's id. A recipe that starts from
    another prior is version 2: the recipe as it would be with the card's own start (so a
    card with a user's prior stays a card id) followed by the prior's 32-byte digest."""
    if not recipe.prior or preset_id_of(recipe) is not None:
        return MAGIC + bytes([FORMAT_VERSION]) + _recipe_body(recipe)
    base = next((card.recipe for card in preset_cards().values()
                 if card.recipe == replace(recipe, prior=card.recipe.prior)),
                replace(recipe, prior=""))
    return (MAGIC + bytes([PRIOR_VERSION]) + _recipe_body(base)
            + bytes.fromhex(recipe.prior))


def read_header(f: BinaryIO, first: bool = True) -> Recipe | None:
    """The recipe of the next stream, or None at a clean end of input (for later members)."""
    magic = f.read(len(MAGIC))
    if not magic and not first:
        return None
    if not magic:
        raise FormatError("not an rwkvzip file (empty input)")
    if magic != MAGIC:
        if MAGIC.startswith(magic):
            raise TruncatedError("truncated input (inside header)")
        if not first:
            raise FormatError("trailing garbage after the end of the compressed stream")
        raise FormatError("not an rwkvzip file (bad magic)")
    version = _read_exact(f, 1, "header")[0]
    if version not in (FORMAT_VERSION, PRIOR_VERSION):
        raise FormatError(f"format version {version} needs a newer rwkvzip (this is "
                          f"{__version__}, reading versions {FORMAT_VERSION} and "
                          f"{PRIOR_VERSION})")
    tag = _read_varint(f, "header")
    if tag:
        card = preset_cards().get(tag)
        if card is None and tag in RETIRED_CARDS:
            raise FormatError(f"preset card {tag} is retired: this file was written by "
                              f"{RETIRED_BY}")
        if card is None:
            raise FormatError(f"unknown preset card {tag}: this file needs a newer rwkvzip "
                              f"(this is {__version__})")
        recipe = card.recipe
    else:
        length = _read_varint(f, "header")
        if length > MAX_RECIPE_JSON:
            raise FormatError("corrupt header (recipe too long)")
        try:
            recipe = Recipe.from_json(_read_exact(f, length, "header"))
        except RecipeError as exc:
            raise FormatError(f"cannot decode this file: {exc}") from None
    if version == PRIOR_VERSION:
        digest = _read_exact(f, DIGEST_BYTES, "header").hex()
        try:
            recipe = replace(recipe, prior=digest)
            recipe.validate()
        except RecipeError as exc:
            raise FormatError(f"cannot decode this file: {exc}") from None
    return recipe


def encode_frame(raw: bytes, payload: bytes | None, *, eol: bool = False,
                 coded_len: int | None = None, bypass: bool = False,
                 bypassed: bool = False) -> bytes:
    """A coded frame, or a stored one (payload None: the raw bytes follow as they are).
    eol: the stream's recipe has the field (its frames' heads have the CRLF bit);
    coded_len: the frame is CRLF text the models ran over without its CRs (eol.py), this
    many bytes; bypass: the recipe has the field (its frames' heads have the bypass bit);
    bypassed: the frame is stored and the models never saw it (coding/bypass.py)."""
    stored = payload is None
    body = raw if stored else payload
    crlf = coded_len is not None
    if crlf and not eol:
        raise ValueError("a CRLF frame needs a recipe with eol")
    if bypassed and not (bypass and stored and not crlf):
        raise ValueError("a bypassed frame is a stored frame of a recipe with bypass")
    field = len(body)
    if eol:
        field = 2 * field + crlf
    if bypass:
        field = 2 * field + bypassed
    field = 2 * field + stored
    return (encode_varint(len(raw)) + encode_varint(field)
            + (encode_varint(coded_len) if crlf else b"")
            + struct.pack("<I", zlib.crc32(raw)) + body)


def encode_trailer(total: int) -> bytes:
    return encode_varint(0) + encode_varint(total)


@dataclass
class FrameHead:
    index: int
    raw_len: int
    payload_len: int
    stored: bool  # payload is the raw bytes (coding would have expanded them)
    crc: int
    coded_len: int  # bytes the models ran over: raw_len, or fewer for CRLF text (crlf)
    crlf: bool = False  # CRLF text, coded without its CRs (coding/eol.py)
    bypassed: bool = False  # stored, and the models never saw it (coding/bypass.py)


@dataclass
class Frame:
    index: int
    raw_len: int
    crc: int
    payload: bytes
    stored: bool  # payload is the raw bytes (coding would have expanded them)
    coded_len: int  # as FrameHead
    crlf: bool = False
    bypassed: bool = False


def read_frame_head(f: BinaryIO, index: int, total: int, eol: bool = False,
                    bypass: bool = False) -> FrameHead | None:
    """The head of frame `index`, or None after the end marker and the trailer, whose total
    must equal `total` (the raw bytes of the frames before). eol, bypass: the stream's
    recipe has the field (a CRLF bit, a bypass bit in the head). At most MAX_FRAME_HEAD
    bytes."""
    raw_len = _read_varint(f, f"frame {index}")
    if raw_len == 0:
        declared = _read_varint(f, "trailer")
        if declared != total:
            raise FormatError(f"corrupt input (trailer says {declared} bytes, "
                              f"frames hold {total})")
        return None
    if raw_len > MAX_FRAME:
        raise FormatError(f"corrupt input (frame {index} claims {raw_len} bytes)")
    field = _read_varint(f, f"frame {index}")
    stored, field = bool(field & 1), field >> 1
    bypassed, field = (bool(field & 1), field >> 1) if bypass else (False, field)
    crlf, payload_len = (bool(field & 1), field >> 1) if eol else (False, field)
    if bypassed and (crlf or not stored):
        raise FormatError(f"corrupt input (frame {index} is bypassed but not stored)")
    coded_len = _read_varint(f, f"frame {index}") if crlf else raw_len
    if crlf and not raw_len <= 2 * coded_len < 2 * raw_len:
        raise FormatError(f"corrupt input (frame {index} has a bad coded length)")
    if (payload_len != raw_len if stored
            else payload_len > max_payload(coded_len) or payload_len % 4):
        raise FormatError(f"corrupt input (frame {index} has a bad payload length)")
    (crc,) = struct.unpack("<I", _read_exact(f, 4, f"frame {index}"))
    return FrameHead(index, raw_len, payload_len, stored, crc, coded_len, crlf, bypassed)


def read_frames(f: BinaryIO, eol: bool = False, bypass: bool = False) -> Iterator[Frame]:
    """Yield frames until the end marker; checks the trailer's total length."""
    total = 0
    index = 0
    while (head := read_frame_head(f, index, total, eol, bypass)) is not None:
        payload = _read_exact(f, head.payload_len, f"frame {index}")
        yield Frame(index, head.raw_len, head.crc, payload, head.stored, head.coded_len,
                    head.crlf, head.bypassed)
        total += head.raw_len
        index += 1


def check_frame(frame: Frame | FrameHead, raw: bytes) -> None:
    if zlib.crc32(raw) != frame.crc:
        raise FormatError(f"corrupt input (CRC mismatch in frame {frame.index})")


class _Recorder:
    """A reader that keeps what it reads."""

    def __init__(self, f: BinaryIO):
        self._f = f
        self.parts: list[bytes] = []
        self.size = 0

    def read(self, n: int) -> bytes:
        data = self._f.read(n)
        self.parts.append(data)
        self.size += len(data)
        return data


def read_member(f: BinaryIO, first: bool, limit: int) -> tuple[bytes, bool] | None:
    """The next member's bytes as they are (its framing checked, nothing decoded), with
    True; or, with False, the bytes read so far when the member is longer than `limit` or
    its framing is wrong (whoever decodes it as a stream meets the error at its place).
    None at a clean end of input after a member; an empty input is FormatError."""
    rec = _Recorder(f)
    try:
        recipe = read_header(rec, first)
        if recipe is None:
            return None
        index = total = 0
        while rec.size <= limit:
            head = read_frame_head(rec, index, total, recipe.eol, recipe.bypass)
            if head is None:
                return b"".join(rec.parts), True
            _read_exact(rec, head.payload_len, f"frame {index}")
            index, total = index + 1, total + head.raw_len
    except FormatError:
        if not rec.size:
            raise
    return b"".join(rec.parts), False
