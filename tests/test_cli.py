"""The real command line, driven as a subprocess: one test for every row of the README's
table of flags (checked below), then refusals and clean errors."""

import json
import os
import re
import time
from pathlib import Path

import pytest
from test_priors import TEXT as PRIOR_TEXT
from test_priors import make_prior

from rwkvzip import priors
from rwkvzip.recipe import DEFAULT_LEVEL, LEVELS, preset_by_name

from clitools import (
    FAST,
    TINY,
    assert_clean_error,
    leftovers,
    mixed_data,
    run_with_tty,
    rwkvzip,
)
from conftest import load_script

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = b"It was the best of times, it was the worst of times. " * 30


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(TEXT)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


def names(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- one test per row of the README table ---------------------------------------------------

def test_files(tmp_path):
    """`rwkvzip FILE…`: each file to FILE.rwkz, inputs kept, mtime copied; several at once."""
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(TEXT)
    b.write_bytes(TEXT[::-1])
    os.utime(a, (1_000_000_000, 1_000_000_000))
    assert rwkvzip(*FAST, a, b).returncode == 0
    assert names(tmp_path) == ["a.txt", "a.txt.rwkz", "b.txt", "b.txt.rwkz"]
    assert os.stat(tmp_path / "a.txt.rwkz").st_mtime == 1_000_000_000
    a.unlink()
    b.unlink()
    assert rwkvzip("-d", tmp_path / "a.txt.rwkz", tmp_path / "b.txt.rwkz").returncode == 0
    assert a.read_bytes() == TEXT and b.read_bytes() == TEXT[::-1]


def test_decompress(sample, tmp_path):
    """`-d`, `rwkvzip decompress`."""
    assert rwkvzip(*FAST, sample).returncode == 0
    sample.unlink()
    assert rwkvzip("decompress", tmp_path / "sample.txt.rwkz").returncode == 0
    assert sample.read_bytes() == TEXT
    assert rwkvzip("--decompress", "-f", tmp_path / "sample.txt.rwkz").returncode == 0
    assert sample.read_bytes() == TEXT


def test_compress(sample, tmp_path):
    """`-z`, `rwkvzip compress`: the same bytes as the short form."""
    blobs = []
    for form in (["-z"], ["compress"], []):
        assert rwkvzip(*form, *FAST, "-f", sample).returncode == 0
        blobs.append((tmp_path / "sample.txt.rwkz").read_bytes())
    assert blobs[0] == blobs[1] == blobs[2] and blobs[0][:4] == b"RWKZ"


def test_stdout(sample, tmp_path):
    """`-c`: to standard output, input kept (even with --rm); several files concatenate."""
    out = rwkvzip("-c", "--rm", *FAST, sample)
    assert out.returncode == 0 and out.stdout[:4] == b"RWKZ"
    assert names(tmp_path) == ["sample.txt"]
    both = rwkvzip("-c", *FAST, sample, sample)
    assert rwkvzip("-d", input=both.stdout).stdout == TEXT + TEXT


def test_output(sample, tmp_path):
    """`-o OUT`: names the output; '-' is stdout; one input only."""
    target = tmp_path / "custom.bin"
    assert rwkvzip(*FAST, sample, "-o", target).returncode == 0
    assert rwkvzip("-d", target, "-o", "-").stdout == TEXT
    assert rwkvzip("decompress", target, "-o", tmp_path / "back.txt").returncode == 0
    assert (tmp_path / "back.txt").read_bytes() == TEXT
    assert_clean_error(rwkvzip(*FAST, sample, sample, "-o", target, "-f"), "one input")


def test_keep(sample, tmp_path):
    """`-k`: inputs are kept (the default, as zstd); the last of -k/--rm wins."""
    assert rwkvzip(*FAST, sample).returncode == 0
    assert names(tmp_path) == ["sample.txt", "sample.txt.rwkz"]
    assert rwkvzip("-d", "--rm", "-k", "-o", tmp_path / "x", tmp_path / "sample.txt.rwkz") \
        .returncode == 0
    assert names(tmp_path) == ["sample.txt", "sample.txt.rwkz", "x"]


def test_rm(sample, tmp_path):
    """`--rm`: the input goes only after its output is complete."""
    assert rwkvzip(*FAST, "--rm", sample).returncode == 0
    assert names(tmp_path) == ["sample.txt.rwkz"]
    assert rwkvzip("-d", "--rm", tmp_path / "sample.txt.rwkz").returncode == 0
    assert names(tmp_path) == ["sample.txt"] and sample.read_bytes() == TEXT
    (tmp_path / "bad.rwkz").write_bytes(b"RWKZ\x01\x01\x05\x01")  # fails: input kept
    assert rwkvzip("-d", "--rm", tmp_path / "bad.rwkz").returncode == 1
    assert names(tmp_path) == ["bad.rwkz", "sample.txt"]


def test_a_corrupt_first_frame_is_reported_before_any_kernel_is_readied(sample, tmp_path,
                                                                       monkeypatch):
    """The kernels of a file's card are readied (compiled, the first time: a minute for
    some cards) only once its first frame's head reads as valid."""
    from rwkvzip.coding import codec

    readied = []
    monkeypatch.setattr(codec, "warm_up", lambda recipe, decoding: readied.append(recipe))
    (tmp_path / "bad.rwkz").write_bytes(b"RWKZ\x01\x4d\x05\x01")  # card 77, a bad frame
    assert_clean_error(rwkvzip("-d", tmp_path / "bad.rwkz"), "bad payload length")
    assert readied == []
    assert rwkvzip(*FAST, sample).returncode == 0
    assert rwkvzip("-t", tmp_path / "sample.txt.rwkz").returncode == 0
    assert len(readied) == 2  # to code, then to decode


def test_force(sample, tmp_path):
    """`-f`: never overwrite without it."""
    packed = tmp_path / "sample.txt.rwkz"
    packed.write_bytes(b"precious")
    assert_clean_error(rwkvzip(*FAST, sample), "already exists")
    assert packed.read_bytes() == b"precious"
    assert rwkvzip(*FAST, "-f", sample).returncode == 0
    assert packed.read_bytes()[:4] == b"RWKZ"


def test_test(sample, tmp_path):
    """`-t`, `rwkvzip test`: decode and check, write nothing."""
    assert rwkvzip(*FAST, sample).returncode == 0
    packed = tmp_path / "sample.txt.rwkz"
    ok = rwkvzip("-tv", packed)
    assert ok.returncode == 0 and ok.stdout == b"" and b"sample.txt.rwkz: OK" in ok.stderr
    blob = bytearray(packed.read_bytes())
    blob[-12] ^= 0xFF
    (tmp_path / "bad.rwkz").write_bytes(bytes(blob))
    assert_clean_error(rwkvzip("test", tmp_path / "bad.rwkz"), "frame 0")
    assert names(tmp_path) == ["bad.rwkz", "sample.txt", "sample.txt.rwkz"]


def test_list(sample, tmp_path):
    """`-l`, `rwkvzip info`: sizes, ratio, bpb, frames, check, recipe, from headers."""
    assert rwkvzip(*FAST, sample, "-o", tmp_path / "fast.rwkz").returncode == 0
    # (another architecture than the default's, whose GDN 64x1 keeps its prior)
    assert rwkvzip("compress", sample, "-o", tmp_path / "tiny.rwkz", "--arch", "rwkv7", *TINY,
                   "--no-mix").returncode == 0
    fast, tiny = tmp_path / "fast.rwkz", tmp_path / "tiny.rwkz"
    out = rwkvzip("-l", fast, tiny)
    assert out.returncode == 0
    header, row1, row2, total = out.stdout.decode().splitlines()
    assert header.split() == ["compressed", "uncompressed", "ratio", "bpb", "frames", "check",
                              "recipe", "name"]
    size = os.path.getsize(fast)
    ratio = f"{100 * size / len(TEXT):.2f}%"
    assert row1.split() == [str(size), str(len(TEXT)), ratio, f"{8 * size / len(TEXT):.3f}",
                            "1", "crc32", LEVELS[1], str(fast)]
    assert row2.split()[-3:] == ["rwkv7", "64x1", str(tiny)]
    assert total.split()[:2] == [str(size + os.path.getsize(tiny)), str(2 * len(TEXT))]
    verified = rwkvzip("info", "-v", fast)
    assert verified.stdout.decode().splitlines()[1].split()[5] == "ok"
    default = rwkvzip("-c", "-1", sample).stdout
    assert f" {LEVELS[1]} ".encode() in rwkvzip("-l", input=default).stdout


def test_verbose(sample, tmp_path):
    """`-v`: size, ratio, bpb and speed when done."""
    out = rwkvzip("-v", *FAST, sample)
    size = os.path.getsize(tmp_path / "sample.txt.rwkz")
    line = out.stderr.decode().strip()
    assert out.returncode == 0 and len(line.splitlines()) == 1
    assert re.fullmatch(rf".*sample\.txt: {len(TEXT)} -> {size} bytes \([0-9.]+%, [0-9.]+ bpb\) "
                        r"in [0-9.]+ s( \(\+ [0-9.]+ s start-up\))?, [0-9.]+ KB/s -> "
                        r".*sample\.txt\.rwkz", line), line


def test_quiet(tmp_path):
    """`-q`: no warnings (the status still says 2) and no progress bar."""
    (tmp_path / "x.rwkz").write_bytes(b"whatever")
    proc = rwkvzip("-q", tmp_path / "x.rwkz")
    assert proc.returncode == 2 and proc.stderr == b""


def test_levels(sample, tmp_path):
    """`-1` … `-9`, `--fast`, `--best`: a preset card each; recipe options on top."""
    def card_id(*args):
        return rwkvzip("-c", *args, input=b"abc").stdout[5]

    assert card_id("-1") == card_id("--fast") == preset_by_name(LEVELS[1]).id
    assert card_id("-9") == card_id("--best") == preset_by_name(LEVELS[9]).id
    assert card_id() == card_id(f"-{DEFAULT_LEVEL}") == preset_by_name(LEVELS[DEFAULT_LEVEL]).id
    assert card_id("-9", "-1") == preset_by_name(LEVELS[1]).id  # the last level wins
    assert card_id("-9", "--hidden", "64") == 0  # spelled out: level 9 with another model
    out = rwkvzip("-c", "-9", "--hidden", "64", "--seed", "9", "--optimizer", "sgd", input=b"x")
    assert b'"seed":9' in out.stdout and b'"optimizer":"sgd"' in out.stdout
    # a setting the level does not use is refused, not written into the header
    assert_clean_error(rwkvzip("-c", "-1", "--hidden", "128", input=b"x"), "does not apply")


def test_combined_flags(sample, tmp_path):
    """`-dc`, `-9k`: short flags combine."""
    assert rwkvzip("-1kf", sample).returncode == 0
    assert names(tmp_path) == ["sample.txt", "sample.txt.rwkz"]
    assert rwkvzip("-dc", tmp_path / "sample.txt.rwkz").stdout == TEXT
    assert rwkvzip("-tvq", tmp_path / "sample.txt.rwkz").returncode == 0


def test_stdin():
    """`-` or no FILE: standard input to standard output (the first two through real pipes
    of a real process, the others in this process)."""
    packed = rwkvzip(*FAST, input=TEXT, process=True)
    assert packed.returncode == 0 and packed.stdout[:4] == b"RWKZ"
    assert rwkvzip("-d", input=packed.stdout, process=True).stdout == TEXT
    assert rwkvzip("decompress", "-", input=packed.stdout).stdout == TEXT
    assert rwkvzip("-", *FAST, input=TEXT).stdout == packed.stdout


def test_end_of_options(tmp_path):
    """`--`: what follows is a file, even if it looks like a flag."""
    (tmp_path / "-v").write_bytes(TEXT)
    assert rwkvzip(*FAST, "--", "-v", cwd=tmp_path).returncode == 0
    assert rwkvzip("-dc", "--", "-v.rwkz", cwd=tmp_path).stdout == TEXT


def test_already_suffixed(sample, tmp_path):
    """FILE.rwkz given to compress: skipped with a warning, exit 2; -f compresses it again."""
    assert rwkvzip(*FAST, sample).returncode == 0
    packed = tmp_path / "sample.txt.rwkz"
    before = packed.read_bytes()
    assert_clean_error(rwkvzip(*FAST, packed), "already has the .rwkz suffix", status=2)
    assert packed.read_bytes() == before
    assert rwkvzip(*FAST, "-f", packed).returncode == 0
    assert (tmp_path / "sample.txt.rwkz.rwkz").exists()


def test_unknown_suffix(sample, tmp_path):
    """`-d` on a name without .rwkz: skipped with a warning, exit 2, the others done."""
    assert rwkvzip(*FAST, sample, "-o", tmp_path / "packed.gz").returncode == 0
    assert rwkvzip(*FAST, sample).returncode == 0
    sample.unlink()
    proc = rwkvzip("-d", tmp_path / "packed.gz", tmp_path / "sample.txt.rwkz")
    assert_clean_error(proc, "unknown suffix", status=2)
    assert sample.read_bytes() == TEXT  # the other file was decompressed
    assert rwkvzip("-dc", tmp_path / "packed.gz").stdout == TEXT  # no name needed


def test_exit_status(sample, tmp_path):
    """Exit status: 0 ok, 1 error (usage errors too), 2 warning; an error beats a warning."""
    assert rwkvzip(*FAST, sample).returncode == 0
    assert_clean_error(rwkvzip("--no-such-flag"), "No such option")
    assert_clean_error(rwkvzip("compress", "--level", "3"), "No such option")
    assert_clean_error(rwkvzip("-o"), "requires an argument")
    assert_clean_error(rwkvzip("-7", "--arch", "rwkv7", "--hidden", "100", "-c", input=b"x"),
                       "multiple of 64")
    assert_clean_error(rwkvzip("-7", "--hidden", "100", "-c", input=b"x"), "multiple of 16")
    assert_clean_error(rwkvzip(tmp_path / "nope"), "no such file")
    (tmp_path / "other.txt").write_bytes(TEXT)
    warned = rwkvzip(*FAST, tmp_path / "sample.txt.rwkz", tmp_path / "other.txt",
                     process=True)  # the status a real process exits with
    assert warned.returncode == 2 and (tmp_path / "other.txt.rwkz").exists()
    mixed = rwkvzip(*FAST, tmp_path / "sample.txt.rwkz", tmp_path / "nope", process=True)
    assert mixed.returncode == 1  # a warning and an error make 1
    assert len(mixed.stderr.decode().splitlines()) == 2
    assert rwkvzip(*FAST, tmp_path).returncode == 2  # a directory is skipped


def test_terminal(sample, tmp_path):
    """Compressed data is never written to or read from a terminal without -f."""
    out = run_with_tty([*FAST, "-c", sample], ["stdout"])
    assert out.returncode == 1 and b"refusing to write compressed data to a terminal" in out.stderr
    assert b"RWKZ" not in out.tty
    forced = run_with_tty([*FAST, "-cf", sample], ["stdout"])
    assert forced.returncode == 0 and b"RWKZ" in forced.tty
    assert rwkvzip(*FAST, sample).returncode == 0
    for args in (["-d"], ["-t"], ["-l"], ["decompress", "-"]):
        refused = run_with_tty(args, ["stdin"])
        assert refused.returncode == 1, args
        assert b"refusing to read compressed data from a terminal" in refused.stderr
    ok = run_with_tty([*FAST, "-d", tmp_path / "sample.txt.rwkz", "-f"], ["stdin", "stdout"])
    assert ok.returncode == 0 and sample.read_bytes() == TEXT  # file to file: no terminal data


def test_progress_bar(tmp_path):
    """A tqdm bar on stderr for lasting work, only on a terminal and not with -q."""
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(12_000) + TEXT * 12)  # a second of work: over BAR_DELAY
    shown = run_with_tty([big], ["stderr"])  # the default level (level 1 is done too soon)
    assert shown.returncode == 0
    assert b"B/s" in shown.tty and b"big.bin" in shown.tty, shown.tty
    packed = tmp_path / "big.bin.rwkz"
    shown = run_with_tty(["-d", "-c", packed], ["stderr"])
    assert shown.returncode == 0 and b"B/s" in shown.tty and b"%" in shown.tty  # total known
    quiet = run_with_tty([*FAST, "-qf", big], ["stderr"])
    assert quiet.returncode == 0 and quiet.tty == b""
    piped = rwkvzip(*FAST, "-f", big)
    assert piped.returncode == 0 and piped.stderr == b""


def test_compile_notice_on_a_terminal_only_and_not_in_the_speed(tmp_path):
    """Compiling the kernels (an empty cache) says so on a terminal (a pipe never gets the
    notice: test_the_notice_waits_for_a_slow_start_up); -v gives the coding speed with the
    start-up apart."""
    src = tmp_path / "text.txt"
    src.write_bytes(TEXT * 20)

    empty_cache = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    shown = run_with_tty([*FAST, "-c", src], ["stderr"], env=empty_cache)
    assert shown.returncode == 0
    assert b"compiling kernels for this CPU, once" in shown.tty, shown.tty
    piped = rwkvzip(*FAST, "-v", "-c", src, env=empty_cache)
    assert piped.returncode == 0 and b"compiling" not in piped.stderr
    assert re.search(rb"in [0-9.]+ s \(\+ [0-9.]+ s start-up\), [0-9.]+ KB/s", piped.stderr)
    warm = run_with_tty([*FAST, "-c", src], ["stderr"], env=empty_cache)
    assert warm.returncode == 0 and b"compiling" not in warm.tty


def test_coldstart_script_measures_cold_and_warm(tmp_path):
    script = load_script("coldstart")
    src = tmp_path / "text.txt"
    src.write_bytes(TEXT * 20)
    assert script.main([str(src), "--levels", "1", "--out", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "coldstart.json").read_text())["rows"]
    assert row["cold_start_up_s"] > row["warm_start_up_s"] > 0  # compiled, then loaded
    assert row["cold_wall_s"] > row["cold_start_up_s"] + row["cold_coding_s"]
    assert "| -1 |" in (tmp_path / "coldstart.md").read_text()


def test_the_notice_waits_for_a_slow_start_up(capsys):
    from rwkvzip import feedback

    with feedback.compile_notice(True, delay=0.05) as took:
        time.sleep(0.3)
    assert feedback.NOTICE in capsys.readouterr().err and took[0] >= 0.3
    for enabled, pause in ((True, 0.0), (False, 0.3)):
        with feedback.compile_notice(enabled, delay=0.05):
            time.sleep(pause)
    time.sleep(0.1)
    assert capsys.readouterr().err == ""


def test_help_and_version():
    """`-h`, `-V`."""
    assert b"compress" in rwkvzip("-h").stdout and b"--rm" in rwkvzip("-d", "-h").stdout
    version = rwkvzip("-V", process=True)  # the installed entry point, as a process
    assert version.returncode == 0 and re.match(rb"rwkvzip, version \d+\.\d+", version.stdout)


def test_selftest_row():
    """`rwkvzip selftest` (tests/test_golden.py runs it; here: it is a command)."""
    assert b"golden" in rwkvzip("selftest", "-h").stdout


def test_prior_file(tmp_path):
    """`-D FILE`, `--prior FILE`: compress and decompress with your prior; without it, or with
    another, decoding is refused in one line naming the digest."""
    prior_file = tmp_path / "p.safetensors"
    make_prior(prior_file)
    src = tmp_path / "note.txt"
    src.write_bytes(PRIOR_TEXT)
    digest = priors.load_prior(prior_file).digest
    assert rwkvzip("-7", "-D", prior_file, src).returncode == 0
    packed = tmp_path / "note.txt.rwkz"
    listed = rwkvzip("-l", packed)
    assert listed.returncode == 0 and f"prior sha256:{digest[:16]}" in listed.stdout.decode()
    assert_clean_error(rwkvzip("-d", "-c", packed), f"needs the prior sha256:{digest}")
    other = tmp_path / "other.safetensors"
    make_prior(other, seed=5)
    assert_clean_error(rwkvzip("-d", "-c", "--prior", other, packed), "other.safetensors")
    back = rwkvzip("-d", "-c", "-D", prior_file, packed)
    assert back.returncode == 0 and back.stdout == PRIOR_TEXT
    assert rwkvzip("-t", "-D", prior_file, packed).returncode == 0
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00" * 40)
    assert_clean_error(rwkvzip("-7", "-c", "-D", junk, src), "junk.safetensors")
    assert_clean_error(rwkvzip("-1", "-c", "-D", prior_file, src), "takes no prior")


def test_train(tmp_path):
    """`rwkvzip train`: a prior from samples, starting from the level's shipped prior."""
    samples = tmp_path / "s.txt"
    samples.write_bytes(PRIOR_TEXT * 3)
    out = tmp_path / "mine.prior"
    proc = rwkvzip("train", "--epochs", "1", "--time", "60", samples, "-o", out)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.decode()
    assert "validation" in err and "from prior sha256:" in err and "dictionary" in err
    assert priors.load_prior(out).dictionary  # the samples share their text
    src = tmp_path / "more.txt"
    src.write_bytes(PRIOR_TEXT[::-1] + PRIOR_TEXT)
    assert rwkvzip("-D", out, src).returncode == 0
    back = rwkvzip("-d", "-c", "-D", out, tmp_path / "more.txt.rwkz")
    assert back.returncode == 0 and back.stdout == src.read_bytes()
    assert_clean_error(rwkvzip("train", "-7", samples, "-o", out), "already exists")
    assert_clean_error(rwkvzip("train", tmp_path / "nope", "-o", tmp_path / "x"),
                       "no such file or directory")
    assert_clean_error(rwkvzip("train", "--dict-size", "lots", samples, "-o", tmp_path / "x"),
                       "not a size")
    assert_clean_error(rwkvzip("train", "--dict-size", "2M", samples, "-o", tmp_path / "x"),
                       "at most 1024K")


def test_threads(tmp_path):
    src = tmp_path / "data.bin"
    data = mixed_data(65536 + 99)
    src.write_bytes(data)
    out = {}
    for threads in ("1", "2"):
        proc = rwkvzip(*FAST, "-T", threads, "--block-size", "64K", "-c", src)
        assert proc.returncode == 0, proc.stderr
        out[threads] = proc.stdout
    assert len(set(out.values())) == 1
    assert rwkvzip(*FAST, "-c", src).stdout != out["1"]  # -T 1 alone: one block, as before
    proc = rwkvzip("-d", "-T", "2", "-c", input=out["1"])
    assert proc.returncode == 0 and proc.stdout == data
    assert rwkvzip("-t", "-T", "2", input=out["1"]).returncode == 0
    assert_clean_error(rwkvzip(*FAST, "--block-size", "1K", src), "block size must be")
    assert_clean_error(rwkvzip(*FAST, "-T", "-2", src), "--threads")
    assert not leftovers(tmp_path)


README_ROWS = {
    "`rwkvzip FILE…`": test_files,
    "`-d`, `rwkvzip decompress`": test_decompress,
    "`-z`, `rwkvzip compress`": test_compress,
    "`-c`": test_stdout,
    "`-o OUT`": test_output,
    "`-k`": test_keep,
    "`--rm`": test_rm,
    "`-f`": test_force,
    "`-t`, `rwkvzip test`": test_test,
    "`-l`, `rwkvzip info`": test_list,
    "`-v`": test_verbose,
    "`-q`": test_quiet,
    "`-1` … `-9`, `--fast`, `--best`": test_levels,
    "`-dc`, `-9k`": test_combined_flags,
    "`-` or no FILE": test_stdin,
    "`--`": test_end_of_options,
    "FILE.rwkz to compress": test_already_suffixed,
    "`-d` on another suffix": test_unknown_suffix,
    "exit status": test_exit_status,
    "a terminal": test_terminal,
    "progress bar": test_progress_bar,
    "`-h`, `-V`": test_help_and_version,
    "`-T N`, `--threads N`, `--block-size SIZE`": test_threads,
    "`-D FILE`, `--prior FILE`": test_prior_file,
    "`rwkvzip train`": test_train,
    "`rwkvzip selftest`": test_selftest_row,
}


def test_every_row_of_the_readme_flags_table_has_a_test():
    text = README.read_text()
    table = text.split("<!-- flags-table -->")[1].split("<!-- /flags-table -->")[0]
    rows = [line.split("|")[1].strip() for line in table.strip().splitlines()[2:]]
    assert rows == list(README_ROWS)


# -- refusals and clean errors ----------------------------------------------------------------

@pytest.mark.parametrize("content,message", [
    (b"not compressed at all", "bad magic"),
    (b"RWKZ\x01\x4d\x05\x20\x00", "truncated"),
    (b"RWKZ\x03\x01", "format version 3 needs a newer rwkvzip"),
    (b"RWKZ\x01\x7f\x05", "unknown preset card 127"),
    (b"RWKZ\x01\x01\x05", "preset card 1 is retired"),
])
def test_bad_input_is_one_line_and_leaves_no_output(tmp_path, content, message):
    bad = tmp_path / "bad.rwkz"
    bad.write_bytes(content)
    assert_clean_error(rwkvzip("decompress", bad), message)
    assert names(tmp_path) == ["bad.rwkz"]


def test_corrupt_frame_reports_file_and_frame_and_leaves_no_output(sample, tmp_path):
    assert rwkvzip(*FAST, sample).returncode == 0
    packed = tmp_path / "sample.txt.rwkz"
    blob = bytearray(packed.read_bytes())
    blob[-12] ^= 0xFF
    packed.write_bytes(bytes(blob))
    sample.unlink()
    proc = rwkvzip("decompress", packed)
    assert_clean_error(proc, f"{packed}: corrupt input (CRC mismatch in frame 0)")
    assert not sample.exists() and leftovers(tmp_path) == []


def test_input_and_output_the_same_file_is_refused(sample, tmp_path):
    assert rwkvzip(*FAST, sample).returncode == 0
    packed = tmp_path / "sample.txt.rwkz"
    before = packed.read_bytes()
    assert_clean_error(rwkvzip("-df", packed, "-o", packed), "same file")
    assert packed.read_bytes() == before
