"""The real command line, driven as a subprocess: files, pipes, refusals, clean errors."""

import os
import subprocess
import sys

import pytest

TINY = ["--hidden", "64", "--layers", "1"]


def rwkvzip(*args, input=None, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "rwkvzip", *args], input=input,
                          capture_output=True, cwd=cwd, env=env, timeout=300)


def assert_clean_error(proc, text):
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert text in err, err


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(b"It was the best of times, it was the worst of times. " * 30)
    return path


def test_file_roundtrip_with_default_names(sample, tmp_path):
    original = sample.read_bytes()
    os.utime(sample, (1_000_000_000, 1_000_000_000))
    assert rwkvzip("compress", str(sample)).returncode == 0
    packed = tmp_path / "sample.txt.rwkz"
    assert packed.exists() and sample.exists()  # input kept by default
    assert os.stat(packed).st_mtime == 1_000_000_000  # mtime copied
    sample.unlink()
    assert rwkvzip("decompress", str(packed)).returncode == 0
    assert sample.read_bytes() == original


def test_pipeline_roundtrip():
    data = b"pipes are fine too\n" * 50
    packed = rwkvzip("compress", *TINY, input=data)
    assert packed.returncode == 0 and packed.stdout[:4] == b"RWKZ"
    unpacked = rwkvzip("decompress", input=packed.stdout)
    assert unpacked.returncode == 0 and unpacked.stdout == data
    dash = rwkvzip("decompress", "-", input=packed.stdout)
    assert dash.stdout == data


def test_stdout_and_output_options(sample, tmp_path):
    out = rwkvzip("compress", "-c", str(sample), *TINY)
    assert out.returncode == 0 and out.stdout[:4] == b"RWKZ"
    target = tmp_path / "custom.bin"
    assert rwkvzip("compress", str(sample), "-o", str(target), *TINY).returncode == 0
    assert rwkvzip("decompress", str(target), "-c").stdout == sample.read_bytes()


def test_never_overwrites_without_force(sample, tmp_path):
    packed = tmp_path / "sample.txt.rwkz"
    packed.write_bytes(b"precious")
    assert_clean_error(rwkvzip("compress", str(sample)), "already exists")
    assert packed.read_bytes() == b"precious"
    assert rwkvzip("compress", "-f", str(sample), *TINY).returncode == 0
    assert packed.read_bytes()[:4] == b"RWKZ"


@pytest.mark.parametrize("content,message", [
    (b"not compressed at all", "bad magic"),
    (b"RWKZ\x01\x01\x05\x10\x00", "truncated"),
])
def test_bad_input_is_one_line_and_leaves_no_output(tmp_path, content, message):
    bad = tmp_path / "bad.rwkz"
    bad.write_bytes(content)
    assert_clean_error(rwkvzip("decompress", str(bad)), message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.rwkz"]


def test_corrupt_frame_reports_frame_and_leaves_no_output(sample, tmp_path):
    assert rwkvzip("compress", str(sample), *TINY).returncode == 0
    packed = tmp_path / "sample.txt.rwkz"
    blob = bytearray(packed.read_bytes())
    blob[-12] ^= 0xFF
    packed.write_bytes(bytes(blob))
    sample.unlink()
    proc = rwkvzip("decompress", str(packed))
    assert_clean_error(proc, "frame 0")
    assert not sample.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".rwkvzip")] == []


def test_unknown_suffix_missing_file_and_bad_options(tmp_path):
    other = tmp_path / "x.gz"
    other.write_bytes(b"RWKZ")
    assert_clean_error(rwkvzip("decompress", str(other)), "unknown suffix")
    assert_clean_error(rwkvzip("compress", str(tmp_path / "nope")), "no such file")
    assert_clean_error(rwkvzip("compress", "--hidden", "100", "-c", input=b"x"),
                       "multiple of 64")
    assert rwkvzip("compress", "--no-such-flag").returncode == 1
    assert rwkvzip("frobnicate").returncode == 1


def test_recipe_options_are_recorded_in_the_header(sample, tmp_path):
    args = ["--hidden", "64", "--layers", "1", "--seed", "9", "--optimizer", "sgd",
            "--lr", "0.01", "--arch", "rwkv7"]
    out = rwkvzip("compress", "-c", str(sample), *args).stdout
    assert b'"seed":9' in out and b'"optimizer":"sgd"' in out
    assert rwkvzip("decompress", input=out).stdout == sample.read_bytes()
