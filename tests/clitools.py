"""Driving the command line: in this process with byte pipes (fast), or as a real subprocess
with pipes, files or a pseudo-terminal."""

from __future__ import annotations

import errno
import io
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

TINY = ["--hidden", "64", "--layers", "1"]  # a tiny model: fast in tests
FAST = ["-1"]  # level 1: count models alone, the fastest
COMMAND = [sys.executable, "-m", "rwkvzip"]


def rwkvzip(*args, input=None, cwd=None, env=None, timeout=300, process=False):
    """Run the command line with these arguments and stdin bytes: in this process (no
    interpreter start, the kernels already loaded: about 1.5 s less a call) with its
    standard streams as pipes would be, or as a real process with `process` (or an `env`)."""
    if process or env is not None:
        return subprocess.run([*COMMAND, *map(str, args)], input=input, capture_output=True,
                              cwd=cwd, env=env, timeout=timeout)
    return _in_process([str(a) for a in args], input or b"", cwd)


def _in_process(argv: list[str], data: bytes, cwd) -> subprocess.CompletedProcess:
    """cli.main(argv) with stdin, stdout and stderr swapped for byte buffers (never a
    terminal, as with pipes), in `cwd`; the streams, the directory and the signal handlers
    main installs are put back after."""
    from rwkvzip import cli

    out, err = io.BytesIO(), io.BytesIO()
    streams = (io.TextIOWrapper(io.BytesIO(data)), io.TextIOWrapper(out, write_through=True),
               io.TextIOWrapper(err, write_through=True))
    saved = (sys.stdin, sys.stdout, sys.stderr)
    handlers = {sig: signal.getsignal(sig) for sig in cli.STOP_SIGNALS}
    here = os.getcwd()
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            status = cli.main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
        for stream in streams[1:]:
            stream.flush()
        sys.stdin, sys.stdout, sys.stderr = saved
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for stream in streams:
            stream.detach()  # keep the byte buffers open
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def assert_clean_error(proc, text, status=1):
    """Exit status `status` and one line on stderr naming the problem, no traceback."""
    err = proc.stderr.decode()
    assert proc.returncode == status, (proc.returncode, err)
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert text in err, err


def mixed_data(n: int, seed: int = 0) -> bytes:
    """Text-like words with random runs: some frames coded, some stored."""
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"abcdefghij klmnop", k=rng.randint(2, 9))) for _ in range(300)]
    parts, size = [], 0
    while size < n:
        part = rng.randbytes(2000) if rng.random() < 0.2 else b" ".join(rng.choices(words, k=80))
        parts.append(part)
        size += len(part)
    return b"".join(parts)[:n]


def leftovers(directory) -> list[str]:
    """Temporary outputs left behind (there must never be any)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".rwkvzip-"))


@dataclass
class TtyRun:
    returncode: int
    tty: bytes  # everything the program wrote to the terminal
    stdout: bytes  # when stdout is not the terminal
    stderr: bytes  # when stderr is not the terminal


def run_with_tty(args, tty_streams, cwd=None, stdin_data=b"", timeout=120, env=None) -> TtyRun:
    """Run the CLI with the named streams ('stdin', 'stdout', 'stderr') on a pseudo-terminal
    and the others on files; collect what reaches the terminal."""
    master, slave = os.openpty()
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr:
        fin.write(stdin_data)
        fin.seek(0)
        streams = {"stdin": fin, "stdout": fout, "stderr": ferr}
        for name in tty_streams:
            streams[name] = slave
        proc = subprocess.Popen([*COMMAND, *map(str, args)], cwd=cwd, env=env, **streams)
        os.close(slave)
        seen = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"rwkvzip {args} did not finish in {timeout} s")
            if not select.select([master], [], [], 0.2)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError as exc:  # EIO: the terminal's other side closed
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            seen += chunk
        returncode = proc.wait(timeout=timeout)
        os.close(master)
        fout.seek(0)
        ferr.seek(0)
        return TtyRun(returncode, bytes(seen), fout.read(), ferr.read())
