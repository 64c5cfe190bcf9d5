"""rwkvzip: lossless compression by a byte-level RWKV-7 that learns online while it codes."""

from rwkvzip._numba_cache import configure_numba_cache

__version__ = "0.1.0"

configure_numba_cache(__version__)
