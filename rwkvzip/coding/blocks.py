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
import multiprocessing.connection
import os
import pickle
import re
import signal
import sys
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager, suppress
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
STOP_SECONDS = 5  # a worker asked to stop gets this long before it is killed
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

TERMINAL_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGHUP", "SIGTERM")
                         if hasattr(signal, name))
_PROGRESS, _DONE, _FAILED = "progress", "done", "failed"  # what a worker sends back


def _worker_main(conn, inherited: list, job: Job, context: tuple) -> None:
    """A worker's life: jobs arrive on its pipe (None: stop), and its progress, then its
    result or error, go back on it. Ctrl-C and hang-ups are the parent's to handle (it stops
    the workers); SIGTERM, which the parent sends to stop a worker, ends it at once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked by the parent while it forked us
        signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINAL_SIGNALS)
    for other in inherited:  # the parent's ends (fork): our pipe reads EOF once it is gone
        other.close()
    while True:
        try:
            arg = conn.recv()
        except EOFError:
            return
        if arg is None:
            return
        done = 0

        def report(n: int) -> None:
            nonlocal done
            done += n
            if done >= PROGRESS_STEP:
                conn.send((_PROGRESS, done))
                done = 0

        try:
            reply = (_DONE, job(arg, *context, progress=report))
        except Exception as exc:  # the job's own error, raised again in the parent
            reply = (_FAILED, _picklable(exc))
        if done:
            conn.send((_PROGRESS, done))
        conn.send(reply)


def _picklable(exc: Exception) -> Exception:
    """The error itself where it survives the trip to the parent, else its words."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


# -- parent side --------------------------------------------------------------------------------

def _start_method() -> str:
    """fork where it is safe and fast (Linux: workers inherit the loaded kernels, and a
    script without a __main__ guard still works); spawn elsewhere."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


class _Worker:
    """One worker process, the parent's end of its pipe and the ticket of its job."""

    def __init__(self, ctx, job: Job, context: tuple, others: list[_Worker]):
        conn, child = ctx.Pipe()
        inherited = [w.conn for w in others] + [conn] if ctx.get_start_method() == "fork" \
            else []
        self.process = ctx.Process(target=_worker_main, args=(child, inherited, job, context),
                                   daemon=True)
        try:
            self.process.start()
        finally:
            child.close()
        self.conn = conn
        self.ticket: _Ticket | None = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still there after a while; nothing may outlive
        the command."""
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_SECONDS)
            if self.process.is_alive():
                self.process.kill()
        self.process.join()
        self.conn.close()


class _Ticket:
    """One job in flight: done once its worker sent the result or the error."""

    def __init__(self):
        self.done = False
        self.result: Any = None
        self.error: Exception | None = None


class Runner:
    """Runs `job(arg, *context, progress=...)` on up to `threads` worker processes and
    returns the results in the order the args were put. With one thread, or when only one
    arg ever comes, the job runs here and no process starts (a small input costs nothing).
    `close()` stops the workers (also on errors and Ctrl-C: nothing keeps running). A
    worker that dies (killed, out of memory) is an EngineError, never a wait."""

    def __init__(self, threads: int, job: Job, context: tuple = (),
                 progress: Progress | None = None):
        self.threads = threads
        self._job, self._context, self._progress = job, context, progress
        self._held: list = []  # the first arg, until a second one shows it is worth workers
        self._workers: list[_Worker] = []
        self._in_flight: deque[_Ticket] = deque()

    def put(self, arg) -> list:
        """Queue one job; returns the results that had to finish first (oldest first) to
        keep at most `threads` jobs in flight."""
        if self.threads == 1:
            return [self._run_here(arg)]
        if not self._workers and not self._held:
            self._held.append(arg)
            return []
        if self._held:
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
        """Every remaining result, in order; then the workers end."""
        try:
            done = self.drain()
            for worker in self._workers:
                with suppress(OSError):  # gone already
                    worker.conn.send(None)
            for worker in self._workers:
                worker.process.join(STOP_SECONDS)
            return done
        finally:
            self.close()

    def close(self) -> None:
        self._held.clear()
        self._in_flight.clear()
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()

    def _run_here(self, arg):
        return self._job(arg, *self._context, progress=self._progress or _ignore)

    def _submit(self, arg) -> None:
        try:
            worker = next(w for w in self._workers if w.ticket is None)
        except StopIteration:  # fewer than `threads` started: one more
            ctx = multiprocessing.get_context(_start_method())
            with _terminal_signals_held():
                worker = _Worker(ctx, self._job, self._context, self._workers)
                self._workers.append(worker)  # before a held Ctrl-C lands: close() stops it
        worker.ticket = _Ticket()
        self._in_flight.append(worker.ticket)
        try:
            worker.conn.send(arg)
        except BaseException:  # a broken pipe (the worker died), or Ctrl-C meanwhile
            self.close()
            raise

    def _collect(self):
        """The oldest job's result (its error, raised here), reporting progress meanwhile."""
        ticket = self._in_flight[0]
        try:
            while not ticket.done:
                self._receive()
        except BaseException:  # a dead worker, or Ctrl-C while waiting: no worker keeps running
            self.close()
            raise
        self._in_flight.popleft()
        if ticket.error is not None:
            self.close()
            raise ticket.error
        return ticket.result

    def _receive(self) -> None:
        """Read what the busy workers sent within one poll; a worker gone is an error."""
        busy = [w for w in self._workers if w.ticket is not None]
        waits = {w.conn: w for w in busy} | {w.process.sentinel: w for w in busy}
        for ready in multiprocessing.connection.wait(list(waits), POLL_SECONDS):
            worker = waits[ready]
            if ready is not worker.conn:
                continue  # exited: its last messages may still be in the pipe
            try:
                while worker.conn.poll() and worker.ticket is not None:
                    self._message(worker, *worker.conn.recv())
            except EOFError:
                raise EngineError(_died(worker.process)) from None
        for worker in busy:
            if worker.ticket is not None and not worker.process.is_alive() \
                    and not worker.conn.poll():
                raise EngineError(_died(worker.process))

    def _message(self, worker: _Worker, kind: str, value) -> None:
        if kind == _PROGRESS:
            if self._progress:
                self._progress(value)
            return
        ticket, worker.ticket = worker.ticket, None
        ticket.done = True
        if kind == _DONE:
            ticket.result = value
        else:
            ticket.error = value


@contextmanager
def _terminal_signals_held():
    """Ctrl-C, SIGTERM and hang-ups wait while a worker is forked: it inherits them blocked
    and unblocks them once it ignores them, so none can stop it half-started."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, TERMINAL_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _died(process) -> str:
    code = process.exitcode
    how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
    return f"a worker process died ({how}; out of memory?)"


def _ignore(n: int) -> None:
    pass
