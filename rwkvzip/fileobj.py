"""File objects that compress on write and decompress on read, like gzip.open and lzma.open."""

from __future__ import annotations

import builtins
import io
import os
from typing import BinaryIO

from rwkvzip import api
from rwkvzip.coding.blocks import EngineFactory
from rwkvzip.recipe import Recipe

_READ, _WRITE = "r", "w"


class _DecodingReader(io.RawIOBase):
    """Raw reader of the data of every member in a binary file (used under a BufferedReader)."""

    def __init__(self, fp: BinaryIO, prior: api.PriorSource | None, threads: int,
                 engine: EngineFactory | None):
        self._pieces = api.decoded_pieces(fp, prior=prior, threads=threads, engine=engine)
        self._left = b""

    def close(self) -> None:
        self._pieces.close()  # stops the workers of a threaded read
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._left:
            piece = next(self._pieces, None)
            if piece is None:
                return 0
            self._left = piece
        n = min(len(b), len(self._left))
        b[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


class RwkvzipFile(io.BufferedIOBase):
    """A binary file object: reading decompresses, writing compresses (like lzma.LZMAFile).

    `filename` is a path or a binary file object. Modes: "r"/"rb" read; "w"/"wb" write,
    "x"/"xb" create, "a"/"ab" append (a new member: reading gives the concatenated data).
    `level` (1 ... 9) or `recipe` choose how data is compressed when writing, `block_size`
    the blocks of a threaded write; `prior`, `threads` and `engine` apply as in api.compress
    and api.decompress.
    """

    def __init__(self, filename: str | bytes | os.PathLike | BinaryIO, mode: str = "r",
                 level: int | None = None, *, recipe: Recipe | None = None,
                 prior: api.PriorSource | None = None, threads: int = 1,
                 block_size: int | None = None, engine: EngineFactory | None = None):
        self._fp: BinaryIO | None = None
        if mode not in ("r", "rb", "w", "wb", "x", "xb", "a", "ab"):
            raise ValueError(f"invalid mode: {mode!r}")
        self._mode = _READ if mode[0] == "r" else _WRITE
        if self._mode == _READ and (level is not None or recipe is not None
                                    or block_size is not None):
            raise ValueError("level, recipe and block_size only apply when writing")
        if self._mode == _WRITE:  # a bad level or recipe fails before a file is touched
            self._compressor = api.Compressor(level, recipe=recipe, prior=prior,
                                              threads=threads, block_size=block_size,
                                              engine=engine)
        if isinstance(filename, (str, bytes, os.PathLike)):
            self._fp = builtins.open(filename, mode[0] + "b")  # noqa: SIM115 - see close()
            self._close_fp = True
        elif hasattr(filename, "read" if self._mode == _READ else "write"):
            self._fp = filename
            self._close_fp = False
        else:
            raise TypeError("filename must be a str, bytes, os.PathLike or file object")
        self._pos = 0
        if self._mode == _READ:
            self._buffer = io.BufferedReader(_DecodingReader(self._fp, prior, threads,
                                                                  engine))

    def _check(self, mode: str) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if mode != self._mode:
            doing = "reading" if mode == _READ else "writing"
            raise io.UnsupportedOperation(f"file not open for {doing}")

    @property
    def closed(self) -> bool:
        return self._fp is None

    def close(self) -> None:
        if self._fp is None:
            return
        try:
            if self._mode == _WRITE:
                self._fp.write(self._compressor.flush())
            else:
                self._buffer.close()
        finally:
            try:
                if self._close_fp:
                    self._fp.close()
            finally:
                self._fp = None

    def fileno(self) -> int:
        self._check(self._mode)
        return self._fp.fileno()

    def readable(self) -> bool:
        self._check(self._mode)
        return self._mode == _READ

    def writable(self) -> bool:
        self._check(self._mode)
        return self._mode == _WRITE

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        """Position in the uncompressed data."""
        self._check(self._mode)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        self._check(_READ)
        data = self._buffer.read(size)
        self._pos += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        self._check(_READ)
        data = self._buffer.read1(size)
        self._pos += len(data)
        return data

    def readinto(self, b) -> int:
        self._check(_READ)
        n = self._buffer.readinto(b)
        self._pos += n
        return n

    def readline(self, size: int | None = -1) -> bytes:
        self._check(_READ)
        line = self._buffer.readline(size)
        self._pos += len(line)
        return line

    def peek(self, size: int = 0) -> bytes:
        self._check(_READ)
        return self._buffer.peek(size)

    def write(self, data) -> int:
        self._check(_WRITE)
        view = memoryview(data).cast("B")
        self._fp.write(self._compressor.compress(view))
        self._pos += len(view)
        return len(view)


def open(filename: str | bytes | os.PathLike | BinaryIO, mode: str = "rb",
         level: int | None = None, *, recipe: Recipe | None = None,
         prior: api.PriorSource | None = None, threads: int = 1,
         block_size: int | None = None, engine: EngineFactory | None = None,
         encoding: str | None = None,
         errors: str | None = None, newline: str | None = None
         ) -> RwkvzipFile | io.TextIOWrapper:
    """Open an rwkvzip file in binary ("rb", "wb", "xb", "ab") or text ("rt", "wt", "xt",
    "at") mode, like gzip.open; text mode wraps the file in an io.TextIOWrapper."""
    options = {"recipe": recipe, "prior": prior, "threads": threads,
               "block_size": block_size, "engine": engine}
    if "t" in mode:
        if "b" in mode:
            raise ValueError(f"invalid mode: {mode!r}")
        binary = RwkvzipFile(filename, mode.replace("t", ""), level, **options)
        return io.TextIOWrapper(binary, encoding, errors, newline)
    if encoding is not None or errors is not None or newline is not None:
        raise ValueError("encoding, errors and newline only apply in text mode")
    return RwkvzipFile(filename, mode, level, **options)
