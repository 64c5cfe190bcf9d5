"""Safe file handling: output goes to a temporary file beside the target and is renamed into
place only when complete; on any error or interruption the partial file is removed."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

SUFFIX = ".rwkz"


class UserError(Exception):
    """An error to report to the user as one line (exit status 1)."""


@contextlib.contextmanager
def open_input(path: str | None) -> Iterator[BinaryIO]:
    if path is None or path == "-":
        yield sys.stdin.buffer
        return
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory") from None
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None
    with f:
        yield f


@contextlib.contextmanager
def atomic_output(path: str | None, force: bool, like: str | None = None) -> Iterator[BinaryIO]:
    """Yield a file to write; on success it becomes `path` (stdout when path is None).

    `like` names a file whose mode and mtime the output takes (the input, as gzip does).
    """
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if os.path.lexists(path) and not force:
        raise UserError(f"{path} already exists; use -f to overwrite")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".rwkvzip-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UserError(f"{path}: cannot create output ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if like is not None:
            st = os.stat(like)
            os.chmod(tmp, st.st_mode & 0o7777)
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def compressed_name(path: str) -> str:
    return path + SUFFIX


def decompressed_name(path: str) -> str:
    if not path.endswith(SUFFIX) or len(path) == len(SUFFIX):
        raise UserError(f"{path}: unknown suffix (expected {SUFFIX}); use -o or -c")
    return path[: -len(SUFFIX)]
