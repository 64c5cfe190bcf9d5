"""Independent blocks on several cores (`-T N`).

A block is one member of the container (docs/FORMAT.md, "Blocks"): its own header, frames
and trailer, coded from the level's start state (its prior or seed). So the compressed
bytes depend on the block size alone: one worker, N workers or none write the same file,
and any rwkvzip decodes it as concatenated members. Workers are processes, because the
per-byte loop holds the GIL between kernel calls; at most N blocks are in flight, so memory
stays bounded on streams of any length.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import re
import signal
import sys
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

Progress = Callable[[int], None]
Job = Callable[..., Any]  # job(arg, *context, progress=...) -> result, a module-level function

DEFAULT_BLOCK_SIZE = 16 << 20  # restarts cost < 1 % at this size (README "Threads")
MAX_PARALLEL_MEMBER = 64 << 20  # a longer member (a -T 1 file) is decoded as a stream, here
MIN_BLOCK_SIZE = 1 << 16  # one frame
MAX_BLOCK_SIZE = 1 << 30
PROGRESS_STEP = 16 << 10  # a worker reports progress every this many raw bytes
POLL_SECONDS = 0.1
_SIZE = re.compile(r"(\d+)\s*([kmg]?)(i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def resolve_threads(threads: int) -> int:
    """The number of workers: `threads`, or one per core for 0 (as xz and zstd)."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"threads must be an int >= 0 (0: one per core), not {threads!r}")
    return threads or cpu_count()


def block_size_for(threads: int, block_size: int | None) -> int | None:
    """The block size a compressor cuts at, or None for one member (what `-T 1` writes
    unless a block size is given, so its output stays what it always was)."""
    if block_size is None:
        return None if threads == 1 else DEFAULT_BLOCK_SIZE
    if not isinstance(block_size, int) or isinstance(block_size, bool) \
            or not MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE:
        raise ValueError(f"block size must be {MIN_BLOCK_SIZE >> 10} KiB ... "
                         f"{MAX_BLOCK_SIZE >> 30} GiB, not {block_size!r}")
    return block_size


def parse_size(text: str) -> int:
    """'65536', '512K', '4M', '4MiB', '1G' (binary units, as xz's --block-size)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a size: {text!r} (e.g. 4M, 512KiB, 1G)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


class EngineError(RuntimeError):
    """An engine failed to code a block for a reason of its own (a worker of a cluster died,
    its task was cancelled); the job's own errors come through as they are."""


class Engine(Protocol):
    """Where the blocks are coded: `put` jobs, get their results back in order. Runner below
    uses this machine's cores; rwkvzip.dask's engine a Dask cluster's workers."""

    def put(self, arg) -> list:
        """Queue one job; the results that had to finish first, oldest first."""

    def drain(self) -> list:
        """Every result not yet returned, in order (the engine stays for more)."""

    def finish(self) -> list:
        """Every remaining result, in order; then the engine is done."""

    def close(self) -> None:
        """Stop every job still running (also on errors and Ctrl-C)."""


# engine_factory(job, context, progress) -> Engine: how a compressor or decoder starts one
EngineFactory = Callable[[Job, tuple, "Progress | None"], Engine]


def local(threads: int) -> EngineFactory:
    """The engine of `-T threads`: worker processes on this machine (Runner)."""
    return partial(Runner, threads)


# -- worker side --------------------------------------------------------------------------------

_context: tuple = ()
_reports: Any = None  # the pool's progress queue


def _worker_start(context: tuple, reports) -> None:
    """Ctrl-C and hang-ups are the parent's to handle (it stops the pool); SIGTERM, which
    the parent sends to stop a worker, ends it at once."""
    global _context, _reports
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _context, _reports = context, reports


def _worker_run(job: Job, arg):
    done = 0

    def report(n: int) -> None:
        nonlocal done
        done += n
        if done >= PROGRESS_STEP:
            _reports.put(done)
            done = 0

    result = job(arg, *_context, progress=report)
    if done:
        _reports.put(done)
    return result


# -- parent side --------------------------------------------------------------------------------

def _start_method() -> str:
    """fork where it is safe and fast (Linux: workers inherit the loaded kernels, and a
    script without a __main__ guard still works); spawn elsewhere."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


class Runner:
    """Runs `job(arg, *context, progress=...)` on up to `threads` worker processes and
    returns the results in the order the args were put. With one thread, or when only one
    arg ever comes, the job runs here and no process starts (a small input costs nothing).
    `close()` stops the workers (also on errors and Ctrl-C: nothing keeps running)."""

    def __init__(self, threads: int, job: Job, context: tuple = (),
                 progress: Progress | None = None):
        self.threads = threads
        self._job, self._context, self._progress = job, context, progress
        self._held: list = []  # the first arg, until a second one shows it is worth a pool
        self._pool = None
        self._reports = None
        self._in_flight: deque = deque()

    def put(self, arg) -> list:
        """Queue one job; returns the results that had to finish first (oldest first) to
        keep at most `threads` jobs in flight."""
        if self.threads == 1:
            return [self._run_here(arg)]
        if self._pool is None and not self._held:
            self._held.append(arg)
            return []
        if self._pool is None:
            self._start()
            self._submit(self._held.pop())
        done = []
        while len(self._in_flight) >= self.threads:
            done.append(self._collect())
        self._submit(arg)
        return done

    def drain(self) -> list:
        """Every result not yet returned, in order (the workers stay for more)."""
        if self._held:
            return [self._run_here(self._held.pop())]
        return [self._collect() for _ in range(len(self._in_flight))]

    def finish(self) -> list:
        """Every remaining result, in order; then the workers end (their last progress
        reports are counted: a worker's queue is flushed when it exits)."""
        try:
            done = self.drain()
            if self._pool is not None:
                self._pool.close()
                self._pool.join()
                self._drain()
            return done
        finally:
            self.close()

    def close(self) -> None:
        self._held.clear()
        self._in_flight.clear()
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def _run_here(self, arg):
        return self._job(arg, *self._context, progress=self._progress or _ignore)

    def _start(self) -> None:
        ctx = multiprocessing.get_context(_start_method())
        self._reports = ctx.Queue()
        self._pool = ctx.Pool(self.threads, _worker_start, (self._context, self._reports))

    def _submit(self, arg) -> None:
        self._in_flight.append(self._pool.apply_async(_worker_run, (self._job, arg)))

    def _collect(self):
        """The oldest job's result (its error, raised here), reporting progress meanwhile."""
        result = self._in_flight[0]
        try:
            while not result.ready():
                result.wait(POLL_SECONDS)
                self._drain()
            self._drain()
            self._in_flight.popleft()
            return result.get()
        except BaseException:  # its error, or Ctrl-C while waiting: no worker keeps running
            self.close()
            raise

    def _drain(self) -> None:
        while True:
            try:
                n = self._reports.get_nowait()
            except queue.Empty:
                return
            if self._progress:
                self._progress(n)


def _ignore(n: int) -> None:
    pass
