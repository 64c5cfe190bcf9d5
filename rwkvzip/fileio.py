"""Safe file handling: output goes to a temporary file beside the target and is renamed into
place only when complete; on any error or interruption the partial file is removed. An input
is deleted only after its output is complete, flushed to disk and in place."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

SUFFIX = ".rwkz"
TEMP_PREFIX = ".rwkvzip-"  # temporary outputs: .rwkvzip-XXXXXXXX.tmp beside the target


class UserError(Exception):
    """An error to report to the user as one line (exit status 1)."""


@contextlib.contextmanager
def open_input(path: str | None) -> Iterator[BinaryIO]:
    """The file at `path`, or stdin for None or '-'."""
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | None, force: bool, like: str | None = None) -> Iterator[BinaryIO]:
    """Yield a file to write; on success it becomes `path` (stdout when path is None).

    `like` names a regular file whose mode and mtime the output takes (the input, as gzip
    does); without it the output gets the usual mode of a new file (0666 minus the umask).
    An existing `path` is replaced only with `force`, and never when it is `like` itself.
    """
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if os.path.lexists(path):
        if like is not None and os.path.exists(path) and os.path.samefile(like, path):
            raise UserError(f"{path}: input and output are the same file")
        if not force:
            raise UserError(f"{path} already exists; use -f to overwrite")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UserError(f"{path}: cannot create output ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        st = os.stat(like) if like is not None else None
        if st is not None and stat.S_ISREG(st.st_mode):
            os.chmod(tmp, st.st_mode & 0o7777)
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_directory(directory)


def _sync_directory(directory: str) -> None:
    """Make the rename durable before anything (such as deleting the input) relies on it."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_input(path: str) -> None:
    """Delete an input whose output is complete (--rm)."""
    try:
        os.unlink(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot remove input ({exc.strerror})") from None


def compressed_name(path: str) -> str:
    return path + SUFFIX


def has_suffix(path: str) -> bool:
    return path.endswith(SUFFIX) and len(os.path.basename(path)) > len(SUFFIX)


def decompressed_name(path: str) -> str | None:
    """FILE for FILE.rwkz; None for a name without the suffix (gzip's "unknown suffix")."""
    return path[: -len(SUFFIX)] if has_suffix(path) else None
