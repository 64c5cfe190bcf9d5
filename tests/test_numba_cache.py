"""_numba_cache: the kernel cache's directory changes with every edit that changes what the
kernels compile to, and with no other."""

from __future__ import annotations

import os

from rwkvzip._numba_cache import _kernel_fingerprint, configure_numba_cache


def test_the_fingerprint_follows_kernels_and_how_they_compile(tmp_path):
    (tmp_path / "ops").mkdir()
    files = {"ops/jit.py": "FASTMATH = {'nnan'}\n", "ops/callee.py": "OPT = 0\n",
             "kernels.py": "@jit\ndef k(x):\n    return x\n", "cli.py": "print('hi')\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    first = _kernel_fingerprint(tmp_path)
    (tmp_path / "cli.py").write_text("print('hello')\n")  # no kernel in it
    assert _kernel_fingerprint(tmp_path) == first
    seen = {first}
    for name in ("ops/jit.py", "ops/callee.py", "kernels.py"):
        (tmp_path / name).write_text(files[name] + "# edited\n")
        seen.add(_kernel_fingerprint(tmp_path))
    assert len(seen) == 4


def test_a_cache_directory_the_user_chose_gets_the_kernels_own_subdirectory(monkeypatch, tmp_path):
    """Kernels of another build in the same NUMBA_CACHE_DIR would be loaded with stale state
    offsets; a child process that inherits the subdirectory keeps it."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    configure_numba_cache("9.9")
    chosen = os.environ["NUMBA_CACHE_DIR"]
    assert chosen == str(tmp_path / f"numba-9.9-{_kernel_fingerprint()}")
    configure_numba_cache("9.9")
    assert os.environ["NUMBA_CACHE_DIR"] == chosen
