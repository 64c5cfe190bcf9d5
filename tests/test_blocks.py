"""Threads (-T N): independent blocks whose bytes depend on the block size only, decoded in
parallel or serially, with the serial decoder's errors, bounded memory and clean stops."""

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path

import pytest

import rwkvzip
from rwkvzip import FormatError, api
from rwkvzip.coding import blocks
from rwkvzip.coding.container import MAX_FRAME
from rwkvzip.recipe import level_recipe

from clitools import COMMAND, mixed_data
from conftest import load_script

BLOCK = 1 << 16
# level 1's count models with small tables: a block allocates them afresh, so keep them cheap
SMALL = replace(level_recipe(1), counts=replace(level_recipe(1).counts, table_bits=10,
                                                match_bits=14))
# the default level (network, frozen prior, text gate) with small tables
SMALL_DEFAULT = replace(level_recipe(4), mix=replace(level_recipe(4).mix, table_bits=12,
                                                     match_bits=14))


@pytest.fixture(scope="module")
def data() -> bytes:
    return mixed_data(5 * BLOCK + 1234, seed=5)


def test_the_bytes_depend_on_the_block_size_never_on_the_threads(data):
    one = api.compress(data, recipe=SMALL, block_size=BLOCK)
    assert api.compress(data, recipe=SMALL, block_size=BLOCK, threads=2) == one
    assert api.compress(data, recipe=SMALL, block_size=BLOCK, threads=0) == one
    assert api.compress(data, recipe=SMALL, threads=3) == api.compress(
        data, recipe=SMALL, block_size=blocks.DEFAULT_BLOCK_SIZE)  # -T N > 1: the default size
    assert api.compress(data, recipe=SMALL) != one  # -T 1 without a size: one block, as before
    for threads in (1, 2):
        assert api.decompress(one, threads=threads) == data
    comp = api.Compressor(recipe=SMALL, threads=2, block_size=BLOCK)
    comp.compress(data)
    comp.flush()
    assert comp.stats.members == 6 and comp.stats.raw_bytes == len(data)
    assert comp.stats.compressed_bytes == len(one)


def test_the_default_level_network_and_prior_give_the_same_blocks_in_workers(data):
    sample = data[:BLOCK + 500]
    blob = api.compress(sample, SMALL_DEFAULT, block_size=BLOCK)
    assert api.compress(sample, SMALL_DEFAULT, block_size=BLOCK, threads=2) == blob
    assert api.decompress(blob, threads=2) == sample


def test_every_block_starts_from_the_level_start_state(data):
    """Each block is a whole member: alone it decodes to its own bytes."""
    blob = api.compress(data, recipe=SMALL, block_size=BLOCK)
    first = api.compress(data[:BLOCK], recipe=SMALL)
    assert blob.startswith(first)
    assert api.decompress(blob[len(first):]) == data[BLOCK:]


def test_parallel_decoding_of_any_file_and_of_concatenations(data, monkeypatch):
    single = api.compress(data, recipe=SMALL)  # one member: decoded whole by one worker
    blocked = api.compress(data, recipe=SMALL, block_size=BLOCK)
    assert api.decompress(single, threads=2) == data
    assert api.decompress(single + blocked + single, threads=2) == data * 3
    monkeypatch.setattr(blocks, "MAX_PARALLEL_MEMBER", 3 * MAX_FRAME)  # too long: streamed
    assert api.decompress(blocked + single + blocked, threads=2) == data * 3


@pytest.mark.parametrize("damage", ["truncated", "trailing garbage", "bad crc", "empty"])
def test_parallel_decoding_fails_as_the_serial_decoder_does(data, damage):
    blob = bytearray(api.compress(data, recipe=SMALL, block_size=BLOCK))
    if damage == "truncated":
        blob = blob[:-7]
    elif damage == "trailing garbage":
        blob += b"junk"
    elif damage == "bad crc":
        blob[len(blob) // 2] ^= 0x10
    else:
        blob = bytearray()
    errors = []
    for threads in (1, 2):
        with pytest.raises(FormatError) as exc:
            api.decompress(bytes(blob), threads=threads)
        errors.append(str(exc.value))
    assert errors[0] == errors[1], errors


def test_memory_is_bounded_blocks_come_out_while_input_still_arrives(data):
    """At most `threads` blocks in flight: output is returned long before flush."""
    comp = api.Compressor(recipe=SMALL, threads=2, block_size=BLOCK)
    early = b"".join(comp.compress(data[i:i + 4096]) for i in range(0, len(data), 4096))
    rest = comp.flush()
    assert len(early) > len(rest) > 0
    assert api.decompress(early + rest) == data


def test_progress_counts_every_worker(data):
    seen = []
    blob = api.compress(data, recipe=SMALL, block_size=BLOCK)
    comp = api.Compressor(recipe=SMALL, threads=2, block_size=BLOCK, progress=seen.append)
    assert comp.compress(data) + comp.flush() == blob
    assert sum(seen) == len(data)
    seen.clear()
    out = api.io.BytesIO()
    api.decompress_stream(api.io.BytesIO(blob), out, seen.append, threads=2)
    assert sum(seen) == len(data) and out.getvalue() == data


def test_bad_threads_and_block_sizes_are_refused():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="threads"):
            api.compress(b"x", recipe=SMALL, threads=bad)
    for bad in (100, 2 << 30, 1.5):
        with pytest.raises(ValueError, match="block size"):
            api.compress(b"x", recipe=SMALL, block_size=bad)
    assert [blocks.parse_size(s) for s in ("65536", "64K", "4M", "4MiB", "1g", "2 MB")] == \
        [65536, 65536, 4 << 20, 4 << 20, 1 << 30, 2 << 20]
    with pytest.raises(ValueError, match="not a size"):
        blocks.parse_size("4X")


def _square_or_die(arg: int, progress) -> int:
    """A job for Runner: arg 0 kills its worker (as the OOM killer would), -1 fails."""
    progress(blocks.PROGRESS_STEP)
    if arg == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    if arg == -1:
        raise FormatError("bad member")
    return arg * arg


def test_runner_results_errors_and_a_dead_worker_are_never_a_wait():
    seen = []
    runner = blocks.Runner(2, _square_or_die, (), seen.append)
    done = [r for a in (1, 2, 3, 4, 5) for r in runner.put(a)] + runner.finish()
    assert done == [1, 4, 9, 16, 25] and sum(seen) == 5 * blocks.PROGRESS_STEP
    assert runner._workers == []

    runner = blocks.Runner(2, _square_or_die)
    with pytest.raises(FormatError, match="bad member"):  # the job's own error, as it was
        [runner.put(a) for a in (3, -1, 4, 5)] + runner.finish()
    assert runner._workers == []

    runner = blocks.Runner(2, _square_or_die)
    workers = []
    start = time.monotonic()
    with pytest.raises(blocks.EngineError, match=r"worker process died \(signal 9"):
        for a in (3, 0, 4, 5, 6):
            runner.put(a)
            workers += [w.process for w in runner._workers if w.process not in workers]
        runner.finish()
    assert time.monotonic() - start < 60 and runner._workers == []
    assert len(workers) == 2 and not any(p.is_alive() for p in workers)


def test_runner_with_spawned_workers_as_on_macos_and_windows(monkeypatch):
    """spawn: the job, its context and the pipe travel pickled; a death is still an error."""
    monkeypatch.setattr(blocks, "_start_method", lambda: "spawn")
    seen = []
    runner = blocks.Runner(2, _square_or_die, (), seen.append)
    assert [r for a in (1, 2, 3) for r in runner.put(a)] + runner.finish() == [1, 4, 9]
    assert sum(seen) == 3 * blocks.PROGRESS_STEP
    runner = blocks.Runner(2, _square_or_die)
    with pytest.raises(blocks.EngineError, match="worker process died"):
        [runner.put(a) for a in (3, 0, 4, 5)] + runner.finish()
    assert runner._workers == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_worker_is_one_error_line_and_leaves_no_output(tmp_path):
    """The OOM killer takes a worker: the command says so and stops, never waits."""
    (tmp_path / "in.xls").write_bytes(mixed_data(1 << 20))
    with _started(["-4", "-T", "2", "--block-size", "64K", str(tmp_path / "in.xls")]) as proc:
        worker = next(pid for pid in _group(proc.pid) if pid != proc.pid)
        os.kill(worker, signal.SIGKILL)
        _, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err.decode()[-2000:]
    assert err.decode().strip() == \
        f"rwkvzip: {tmp_path / 'in.xls'}: a worker process died (signal 9; out of memory?)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.xls"]


@contextmanager
def _started(args: list[str]):
    """rwkvzip ARGS in its own process group (as on a terminal), once its two workers run;
    whatever the test meets, no process of the group outlives it."""
    proc = subprocess.Popen([*COMMAND, *args], stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(_group(proc.pid)) < 3:  # the command and its two workers
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        yield proc
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_every_worker_and_leaves_no_output(tmp_path):
    src = tmp_path.parent / f"{tmp_path.name}-src.bin"
    src.write_bytes(mixed_data(1 << 20))
    # the kernels first (cached for the run below): Ctrl-C lands while coding, not inside a
    # first compile, which Python cannot interrupt
    warm = tmp_path.parent / f"{tmp_path.name}-warm.xls"
    warm.write_bytes(src.read_bytes()[:65536 + 4096])  # two blocks: the workers' kernels too
    subprocess.run([*COMMAND, "-4", "-T", "2", "--block-size", "64K", "-c", str(warm)],
                   stdout=subprocess.DEVNULL, check=True, timeout=600)
    (tmp_path / "in.xls").write_bytes(src.read_bytes())
    with _started(["-4", "-T", "2", "--block-size", "64K", str(tmp_path / "in.xls")]) as proc:
        group = [_command_line(pid) for pid in _group(proc.pid)]  # what the signal reaches
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole group
        _, err = proc.communicate(timeout=240)  # a loaded machine (the suite's other worker)
        assert proc.returncode == 1 and err.decode().strip() == "rwkvzip: interrupted", \
            (proc.returncode, err.decode()[-2000:], group)
        time.sleep(0.5)
        assert _group(proc.pid) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.xls"]


def _group(pgid: int) -> list[int]:
    """Live processes of a process group (Linux /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return f"{pid}: gone"


def test_threads_script_measures_and_checks(tmp_path, data):
    script = load_script("threads")
    src = tmp_path / "sample.bin"
    src.write_bytes(data[:2 * BLOCK + 999])
    assert script.main([str(src), "-N", "1", "--configs", "1:-,2:64K,1:64K",
                        "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "threads-sample-1.json").read_text())
    one, t2, t1 = report["rows"]
    assert one["block_size"] is None and t1["block_size"] == t2["block_size"] == BLOCK
    assert t1["compressed"] == t2["compressed"] and t1["same_as_other_threads"]
    assert all(r["roundtrip"] and r["compress_peak_mib"] > 0 for r in report["rows"])
    assert [r["after_kib"] for r in t2["restarts"]] == [64, 128]  # two restarts, measured
    assert all(r["extra"]["block"] > 0 for r in t2["restarts"])  # fresh models relearn
    assert "| 2 | 64 KiB |" in (tmp_path / "threads-sample-1.md").read_text()


def test_open_writes_and_reads_blocks_with_threads(tmp_path, data):
    path = tmp_path / "t.rwkz"
    with rwkvzip.open(path, "wb", recipe=SMALL, threads=2, block_size=BLOCK) as f:
        f.write(data)
    assert path.read_bytes() == api.compress(data, recipe=SMALL, block_size=BLOCK)
    with rwkvzip.open(path, threads=2) as f:
        assert f.read() == data
    with rwkvzip.open(path, threads=2) as f:  # closed early: the workers stop
        assert f.read(10) == data[:10]
    with pytest.raises(ValueError, match="writing"):
        rwkvzip.open(path, "rb", block_size=BLOCK)
