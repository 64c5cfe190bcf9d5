"""Nothing is ever lost: an error mid-stream, a full disk, Ctrl-C, SIGTERM or SIGHUP leave the
input intact and no partial or temporary file; mode and mtime are copied."""

import os
import resource
import signal
import stat
import subprocess
import time

import pytest

from clitools import COMMAND, FAST, assert_clean_error, leftovers, mixed_data, rwkvzip


def names(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_during_compression_keeps_the_input_and_leaves_nothing(tmp_path, sig):
    src = tmp_path / "big.bin"
    data = mixed_data(200_000)
    src.write_bytes(data)
    proc = subprocess.Popen([*COMMAND, *FAST, "--rm", str(src)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not any((tmp_path / n).stat().st_size > 0 for n in leftovers(tmp_path)):
        assert proc.poll() is None, "finished before it could be interrupted"
        assert time.monotonic() < deadline, "no temporary output appeared"
        time.sleep(0.02)
    proc.send_signal(sig)  # mid-stream: part of the output is written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert err.decode().strip() == "rwkvzip: interrupted"
    assert names(tmp_path) == ["big.bin"] and src.read_bytes() == data


def test_an_error_mid_stream_when_decompressing_leaves_nothing(tmp_path):
    src = tmp_path / "two.bin"
    data = mixed_data(100_000, seed=1)
    src.write_bytes(data)
    assert rwkvzip(*FAST, "--rm", src).returncode == 0
    packed = tmp_path / "two.bin.rwkz"
    blob = bytearray(packed.read_bytes())
    blob[-20] ^= 0x55  # inside the second frame: the first one is written out before it fails
    packed.write_bytes(bytes(blob))
    proc = rwkvzip("-d", "--rm", packed)
    assert_clean_error(proc, "frame 1")
    assert names(tmp_path) == ["two.bin.rwkz"] and packed.read_bytes() == bytes(blob)


def test_a_full_disk_when_compressing_keeps_the_input_and_leaves_nothing(tmp_path):
    src = tmp_path / "big.bin"
    data = mixed_data(150_000, seed=2)
    src.write_bytes(data)
    assert rwkvzip(*FAST, "-c", input=b"warm the kernel cache").returncode == 0

    def small_disk():  # writes beyond 30 kB fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))

    proc = subprocess.run([*COMMAND, *FAST, "--rm", str(src)], capture_output=True,
                          preexec_fn=small_disk, timeout=300)
    assert_clean_error(proc, "File too large")
    assert names(tmp_path) == ["big.bin"] and src.read_bytes() == data


def test_mode_and_mtime_are_copied_and_new_files_follow_the_umask(tmp_path):
    src = tmp_path / "a.txt"
    src.write_bytes(b"mode and time travel with the data\n" * 5)
    os.chmod(src, 0o640)
    os.utime(src, ns=(1_500_000_000_123_456_789, 1_600_000_000_987_654_321))
    assert rwkvzip(*FAST, src).returncode == 0
    packed = os.stat(tmp_path / "a.txt.rwkz")
    assert stat.S_IMODE(packed.st_mode) == 0o640
    assert packed.st_mtime_ns == 1_600_000_000_987_654_321
    src.unlink()
    assert rwkvzip("-d", tmp_path / "a.txt.rwkz").returncode == 0
    assert stat.S_IMODE(os.stat(src).st_mode) == 0o640
    assert os.stat(src).st_mtime_ns == 1_600_000_000_987_654_321
    proc = subprocess.run([*COMMAND, *FAST, "-o", str(tmp_path / "piped.rwkz")],
                          input=b"from a pipe", capture_output=True, timeout=300,
                          preexec_fn=lambda: os.umask(0o027))
    assert proc.returncode == 0
    assert stat.S_IMODE(os.stat(tmp_path / "piped.rwkz").st_mode) == 0o640  # 0666 - umask
