"""`.rwkz` files for fsspec (and so pandas, Dask and Zarr): compression "rwkvzip".

`import rwkvzip` calls register() when fsspec is installed; then

    fsspec.open("data.csv.rwkz", "rt", compression="infer")
    dask.dataframe.read_csv("logs/*.csv.rwkz")

read and write rwkvzip files. Processes that never import rwkvzip (the workers of a Dask
cluster) need it imported first: rwkvzip.dask.install(client).
"""

from __future__ import annotations

from typing import BinaryIO

from rwkvzip.fileio import SUFFIX

NAME = "rwkvzip"
EXTENSION = SUFFIX.lstrip(".")  # fsspec's extensions have no dot


def register() -> bool:
    """Register the compression with fsspec; False if fsspec is not installed."""
    try:
        from fsspec.compression import register_compression
    except ImportError:
        return False
    register_compression(NAME, open_file, EXTENSION, force=True)
    return True


def open_file(infile: BinaryIO, mode: str = "rb", **kwargs) -> BinaryIO:
    """fsspec's callback: a binary file object that decompresses `infile` as it is read, or
    compresses (default level, or `level=`) what is written into it."""
    from rwkvzip.fileobj import RwkvzipFile

    return RwkvzipFile(infile, mode, **kwargs)
