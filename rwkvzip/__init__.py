"""rwkvzip: lossless compression by a byte-level network (a pre-trained Gated DeltaNet at
the default level; RWKV-7 by choice) mixed with context models, feeding a range coder.

Used like the standard library's gzip and lzma modules:

    rwkvzip.compress(data, level=6), rwkvzip.decompress(blob)
    rwkvzip.open(path, "rb" | "wb" | "rt" | "wt" ...), rwkvzip.RwkvzipFile
    rwkvzip.Compressor(), rwkvzip.Decompressor()   incremental, for streams
    rwkvzip.FormatError                             foreign, corrupt or truncated input
    rwkvzip.train(samples, "my.prior"), compress(data, prior="my.prior")   your own prior
"""

import importlib

from rwkvzip import fsspec
from rwkvzip._numba_cache import configure_numba_cache

__version__ = "1.0.0"

configure_numba_cache(__version__)
fsspec.register()  # fsspec opens .rwkz files, where it is installed

# The public names load their modules (and numba) on first use, so the command line starts
# fast for --help and argument errors.
_PUBLIC = {
    "compress": "api", "decompress": "api", "Compressor": "api", "Decompressor": "api",
    "compress_stream": "api", "decompress_stream": "api", "Stats": "api",
    "open": "fileobj", "RwkvzipFile": "fileobj",
    "FormatError": "coding.container", "Recipe": "recipe", "RecipeError": "recipe",
    "train": "training", "load_prior": "priors", "PriorError": "priors",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'rwkvzip' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rwkvzip.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
