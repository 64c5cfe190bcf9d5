"""Point numba's on-disk cache at a per-user, per-version directory before numba loads.

Compiled kernels depend on the package version, so each release gets its own directory;
when nothing is writable we fall back to a temporary one (slower start, still correct).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            return True
    except OSError:
        return False


# how every kernel is compiled (its flags, its callees' form): numba's cache index does not
# record either, so an edit there must start a new cache too
COMPILER_MODULES = ("ops/jit.py", "ops/callee.py")


def _kernel_fingerprint(package: Path | None = None) -> str:
    """Hash of the kernel sources (every module with a jitted function) and of
    COMPILER_MODULES: numba only checks a cached function's own file, so an edit to a kernel
    it inlines from another file would otherwise reuse stale machine code."""
    package = package or Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        source = path.read_bytes()
        name = path.relative_to(package).as_posix()
        # intrinsics are compiled in too
        if b"@jit" in source or b"@intrinsic" in source or name in COMPILER_MODULES:
            digest.update(name.encode())
            digest.update(source)
    return digest.hexdigest()[:12]


def configure_numba_cache(version: str) -> None:
    """A directory of the user's NUMBA_CACHE_DIR gets a subdirectory per version and
    fingerprint too: numba would otherwise load an older build's kernels, whose state
    offsets no longer hold."""
    tag = f"numba-{version}-{_kernel_fingerprint()}"
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        if os.path.basename(os.path.normpath(chosen)) != tag:  # not already ours
            os.environ["NUMBA_CACHE_DIR"] = os.path.join(chosen, tag)
        return
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    candidates = [
        os.path.join(base, "rwkvzip", tag),
        os.path.join(tempfile.gettempdir(), f"rwkvzip-{user}", tag),
    ]
    for path in candidates:
        if _writable(path):
            os.environ["NUMBA_CACHE_DIR"] = path
            return
