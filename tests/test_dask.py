"""rwkvzip on a Dask cluster (a real LocalCluster with two worker processes), fsspec's
"rwkvzip" compression, and the numcodecs/Zarr codec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dask.dataframe as dd
import fsspec
import numcodecs
import numpy as np
import pandas as pd
import pytest
import zarr
from distributed import Client, LocalCluster

import rwkvzip
import rwkvzip.dask as rd
from rwkvzip import api, commands
from rwkvzip.coding import blocks
from rwkvzip.coding.container import FormatError
from rwkvzip.numcodecs import Rwkvzip
from rwkvzip.recipe import RecipeError

from clitools import rwkvzip as run_cli
from conftest import CODE_SAMPLE, DATA, MIXED_SAMPLE, load_script

BLOCK = blocks.MIN_BLOCK_SIZE  # 64 KiB: several blocks from the samples


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def data() -> bytes:
    """Source code, prose, CRLF text and binary records: four blocks of 64 KiB."""
    data = CODE_SAMPLE.read_bytes() * 2 + MIXED_SAMPLE.read_bytes() * 3
    assert 3 * BLOCK < len(data) < 4 * BLOCK
    return data


def _write(path, blob: bytes) -> str:
    path.write_bytes(blob)
    return str(path)


def _leftovers(directory) -> list[str]:
    return [p for p in os.listdir(directory) if p.startswith(".rwkvzip-")]


def test_cluster_writes_the_bytes_of_threads_and_decodes_them(client, data, tmp_path):
    src = _write(tmp_path / "in.bin", data)
    reported = []
    stats = rd.compress_file(src, client=client, level=1, block_size=BLOCK,
                             progress=reported.append)
    blob = (tmp_path / "in.bin.rwkz").read_bytes()
    assert blob == api.compress(data, 1, threads=2, block_size=BLOCK)
    assert (stats.raw_bytes, stats.compressed_bytes, stats.members) == (len(data), len(blob), 4)
    assert 0 < sum(reported) <= len(data)
    stats = rd.decompress_file(src + ".rwkz", tmp_path / "out.bin", client=client)
    assert (tmp_path / "out.bin").read_bytes() == data
    assert stats.members == 4 and not _leftovers(tmp_path)


def test_cluster_decodes_a_default_level_file_of_an_earlier_rwkvzip(client, tmp_path):
    """The network's path on the workers: a -6 -T 2 file written by rwkvzip 0.x."""
    rd.decompress_file(DATA / "format-0.x" / "blocks.L6.T2.rwkz", tmp_path / "out",
                       client=client)
    assert (tmp_path / "out").read_bytes() == CODE_SAMPLE.read_bytes()


def test_many_files_at_once_each_as_threads_writes_it(client, data, tmp_path):
    parts = [b"", b"one line\n", data[:BLOCK + 100], data]
    sources = [_write(tmp_path / f"f{i}", part) for i, part in enumerate(parts)]
    stats = rd.compress_files(sources, client=client, level=1, block_size=BLOCK)
    for src, part, st in zip(sources, parts, stats, strict=True):
        blob = Path(src + ".rwkz").read_bytes()
        assert blob == api.compress(part, 1, threads=2, block_size=BLOCK)
        assert st.raw_bytes == len(part)
    outs = [tmp_path / f"out{i}" for i in range(len(parts))]
    rd.decompress_files([s + ".rwkz" for s in sources], outs, client=client)
    assert [p.read_bytes() for p in outs] == parts


def test_in_flight_blocks_are_bounded(client, data, tmp_path):
    """One slot: blocks go out one at a time and the output is still the same."""
    src = _write(tmp_path / "in", data)
    with open(src, "rb") as fin, open(tmp_path / "out", "wb") as fout:
        api.compress_stream(fin, fout, 1, block_size=BLOCK, engine=rd.engine(client, in_flight=1))
    assert (tmp_path / "out").read_bytes() == api.compress(data, 1, threads=2, block_size=BLOCK)


def test_existing_outputs_are_kept_unless_overwrite(client, data, tmp_path):
    src = _write(tmp_path / "in", data[:1000])
    dst = _write(tmp_path / "in.rwkz", b"precious")
    with pytest.raises(FileExistsError, match="already exists"):
        rd.compress_file(src, client=client, level=1)
    assert Path(dst).read_bytes() == b"precious"
    rd.compress_file(src, client=client, level=1, overwrite=True)
    assert api.decompress(Path(dst).read_bytes()) == data[:1000]


def test_a_corrupt_block_raises_its_error_and_leaves_no_output(client, data, tmp_path):
    blob = bytearray(api.compress(data, 1, threads=2, block_size=BLOCK))
    blob[len(blob) // 2] ^= 0x40  # inside the second or third member's payload
    src = _write(tmp_path / "bad.rwkz", bytes(blob))
    with pytest.raises(FormatError):
        rd.decompress_file(src, tmp_path / "out", client=client)
    assert not (tmp_path / "out").exists() and not _leftovers(tmp_path)


def test_the_first_failing_file_stops_the_others(client, data, tmp_path):
    good = _write(tmp_path / "good.rwkz", api.compress(data, 1, threads=2, block_size=BLOCK))
    bad = _write(tmp_path / "bad.rwkz", b"not rwkvzip at all")
    with pytest.raises(FormatError, match="not an rwkvzip file"):
        rd.decompress_files([good, bad], [tmp_path / "a", tmp_path / "b"], client=client)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert not _leftovers(tmp_path)


def test_an_interrupted_job_is_cancelled_and_leaves_no_output(client, data, tmp_path):
    src = _write(tmp_path / "in", data)

    def interrupt(n: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rd.compress_file(src, client=client, level=1, block_size=BLOCK, progress=interrupt)
    assert not (tmp_path / "in.rwkz").exists() and not _leftovers(tmp_path)
    deadline = time.monotonic() + 30  # nothing of the job keeps running
    while any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(client.processing().values())


def test_a_failure_of_the_cluster_is_one_clear_exception(client):
    """A task that fails for a reason that is not rwkvzip's (here: a job that cannot run)."""
    runner = rd.engine(client)(int, (), None)
    runner.put(b"x")
    with pytest.raises(rd.ClusterError, match="block 0 failed on the cluster: TypeError"):
        runner.finish()


def test_bad_arguments_fail_before_anything_is_written(client, tmp_path):
    src = _write(tmp_path / "in", b"abc")
    with pytest.raises(ValueError, match="block size"):
        rd.compress_file(src, client=client, block_size=100)
    with pytest.raises(ValueError, match="same destination"):
        rd.compress_files([src, src], [tmp_path / "x", tmp_path / "x"], client=client)
    with pytest.raises(ValueError, match="threads or an engine"):
        api.compress(b"abc", threads=2, engine=rd.engine(client))
    assert os.listdir(tmp_path) == ["in"]


def test_command_line_scheduler_writes_the_bytes_of_threads(client, data):
    address = client.scheduler.address
    out = run_cli("-1", "--block-size", "64K", "--scheduler", address, "-c", input=data)
    assert out.returncode == 0, out.stderr
    assert out.stdout == api.compress(data, 1, threads=2, block_size=BLOCK)
    back = run_cli("-d", "--scheduler", address, "-c", input=out.stdout)
    assert back.returncode == 0 and back.stdout == data
    both = run_cli("-T", "2", "--scheduler", address, "-c", input=data)
    assert both.returncode == 1 and b"either -T or --scheduler" in both.stderr


def test_command_line_scheduler_that_cannot_be_reached(monkeypatch):
    monkeypatch.setattr(commands, "CONNECT_SECONDS", 1)
    out = run_cli("-1", "--scheduler", "tcp://127.0.0.1:9", "-c", input=b"abc")
    assert out.returncode == 1 and out.stdout == b""
    assert out.stderr.count(b"\n") == 1 and b"cannot reach the Dask scheduler" in out.stderr


# -- fsspec --------------------------------------------------------------------------------------

def _tables(n: int) -> list[pd.DataFrame]:
    rng = np.random.default_rng(7)
    return [pd.DataFrame({"id": np.arange(300) + 1000 * i,
                          "city": rng.choice(["Oslo", "Lyon", "Kyiv"], 300),
                          "value": rng.normal(size=300).round(3)}) for i in range(n)]


def test_import_registers_the_compression_in_a_new_process():
    code = ("import rwkvzip, fsspec.utils, fsspec.compression; "
            "print(fsspec.utils.infer_compression('a.csv.rwkz'), "
            "'rwkvzip' in fsspec.compression.available_compressions())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["rwkvzip", "True"], out.stderr


def test_fsspec_writes_and_reads_rwkz_files_and_pandas_reads_them(tmp_path):
    table = _tables(1)[0]
    path = str(tmp_path / "t.csv.rwkz")
    with fsspec.open(path, "wt", compression="infer") as f:
        table.to_csv(f, index=False)
    blob = Path(path).read_bytes()
    assert api.decompress(blob) == table.to_csv(index=False).encode()
    with fsspec.open(path, "rt", compression="infer") as f:
        pd.testing.assert_frame_equal(pd.read_csv(f), table)


def test_dask_dataframe_reads_rwkz_csv_files_on_the_cluster(client, tmp_path):
    for i, table in enumerate(_tables(3)):
        text = table.to_csv(index=False).encode()
        (tmp_path / f"part{i}.csv").write_bytes(text)
        (tmp_path / f"part{i}.csv.rwkz").write_bytes(rwkvzip.compress(text, level=1))
    rd.install(client)  # the workers import rwkvzip, which registers the compression there
    assert all(client.run(lambda: "rwkvzip" in fsspec.compression.compr).values())
    frame = dd.read_csv(str(tmp_path / "part*.csv.rwkz"), blocksize=None).compute()
    plain = dd.read_csv(str(tmp_path / "part*.csv")).compute()
    assert len(frame) == 900
    pd.testing.assert_frame_equal(frame.reset_index(drop=True), plain.reset_index(drop=True))


# -- numcodecs and Zarr --------------------------------------------------------------------------

def test_numcodecs_finds_the_codec_by_id_and_round_trips_an_array():
    codec = numcodecs.get_codec({"id": "rwkvzip", "level": 1})
    assert isinstance(codec, Rwkvzip)
    assert codec.get_config() == {"id": "rwkvzip", "level": 1, "prior": None}
    array = (np.arange(50_000, dtype=np.int64) * 7) % 1000
    blob = codec.encode(array)
    assert len(blob) < array.nbytes // 4
    assert np.array_equal(np.frombuffer(codec.decode(blob), dtype=np.int64), array)
    out = np.empty_like(array)
    codec.decode(blob, out=out)
    assert np.array_equal(out, array)
    with pytest.raises(RecipeError):
        Rwkvzip(level=12)


def test_zarr_arrays_store_their_chunks_with_rwkvzip(tmp_path):
    array = np.arange(60_000, dtype=np.int32).reshape(300, 200) % 977
    formats = [2, 3] if int(zarr.__version__.split(".")[0]) >= 3 else [2]
    for zarr_format in formats:
        store = str(tmp_path / f"v{zarr_format}.zarr")
        if zarr_format == 3:
            from rwkvzip.zarr import RwkvzipCodec
            compressor = RwkvzipCodec(level=1)
        else:
            compressor = Rwkvzip(level=1)
        z = zarr.create_array(store=store, shape=array.shape, chunks=(150, 200),
                              dtype=array.dtype, compressors=[compressor],
                              zarr_format=zarr_format)
        z[:] = array
        # a new process finds the codec from the array's metadata (the entry points)
        code = ("import sys, zarr, numpy as np; z = zarr.open_array(sys.argv[1], mode='r'); "
                "print(int(np.asarray(z[:]).sum()), z.nchunks)")
        out = subprocess.run([sys.executable, "-c", code, store], capture_output=True,
                             text=True, timeout=300)
        assert out.stdout.split() == [str(int(array.sum())), "2"], out.stderr[-2000:]


def test_cluster_script_measures_and_checks(tmp_path, data):
    script = load_script("cluster")
    src = tmp_path / "sample.bin"
    src.write_bytes(data[:2 * BLOCK + 999])
    assert script.main([str(src), "-N", "1", "--block-size", "64K", "--workers", "1",
                        "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "cluster-sample-1.json").read_text())
    assert [r["config"] for r in report["rows"]] == ["-T 1", "-T 2", "cluster, 1 worker"]
    assert all(r["same_as_threads"] and r["roundtrip"] for r in report["rows"])
    assert report["blocks"] == 3 and report["overhead_per_block_s"] >= 0
    assert "| cluster, 1 worker |" in (tmp_path / "cluster-sample-1.md").read_text()
