"""Code the blocks of files on a Dask cluster (`pip install "rwkvzip[dask]"`).

A file cut into independent blocks (`-T N --block-size`) codes each block from the level's
start state, so who codes a block changes nothing: the workers of a Dask cluster write the
same bytes as `rwkvzip -T N --block-size SIZE`, and any rwkvzip decodes them. This module
supplies the engine (blocks.Engine) that hands the blocks to the cluster's workers; the
cutting, the container and the order of the output are api.Compressor's and api's as for
local workers. At most `in_flight` blocks (twice the cluster's threads by default) are out
at once, over every file of a call, so memory stays bounded on inputs of any size.

    from distributed import Client
    import rwkvzip.dask
    client = Client("tcp://scheduler:8786")
    rwkvzip.dask.compress_file("big.log", "big.log.rwkz", client=client, block_size=16 << 20)
    rwkvzip.dask.decompress_file("big.log.rwkz", "big.log", client=client)

Sources and destinations are paths or fsspec URLs (s3://..., read and written by this
process; the workers see only blocks). An output appears only when complete: it is written
beside its destination under a temporary name and moved into place, and removed on any
error or interruption (the cluster's tasks of the call are cancelled).

Workers import rwkvzip when they unpickle a block's task. Work that names rwkvzip only by a
string (fsspec's compression="rwkvzip" in dask.dataframe.read_csv) needs it imported first:
`install(client)` does that on every worker, present and future.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, BinaryIO

import fsspec
from distributed import Client, Future, get_client, get_worker
from distributed.diagnostics.plugin import WorkerPlugin

from rwkvzip import api, feedback
from rwkvzip.coding import blocks
from rwkvzip.fileio import SUFFIX
from rwkvzip.recipe import Recipe

PathLike = str | os.PathLike
Progress = Callable[[int], None]
# A worker reports progress (through Dask's events) every this many raw bytes of a block.
PROGRESS_STEP = 256 << 10
POLL_SECONDS = 0.1
TOPIC = "rwkvzip-progress"  # events topic prefix: one topic per engine


class ClusterError(blocks.EngineError):
    """The cluster failed to code a block (a worker died, the task was cancelled, ...)."""


class StoppedError(ClusterError):
    """Work on one file stopped because another file of the same call failed."""


class Cluster:
    """An engine factory (blocks.EngineFactory) on a Dask client: every engine it starts
    shares its `in_flight` limit, and `stop()` ends them all (the first error of a call on
    several files stops the rest)."""

    def __init__(self, client: Client | None = None, *, in_flight: int | None = None):
        self.client = client if client is not None else get_client()
        limit = in_flight if in_flight is not None else 2 * max(1, total_threads(self.client))
        if limit < 1:
            raise ValueError(f"in_flight must be >= 1, not {limit}")
        self.in_flight = limit
        self._slots = threading.BoundedSemaphore(limit)
        self._stopped = threading.Event()

    def __call__(self, job: blocks.Job, context: tuple,
                 progress: Progress | None) -> _ClusterEngine:
        return _ClusterEngine(self, job, context, progress)

    def stop(self) -> None:
        self._stopped.set()


def engine(client: Client | None = None, *, in_flight: int | None = None) -> Cluster:
    """The engine of a cluster, for api.Compressor, compress_stream and decompress_stream
    (`engine=`): blocks coded by the client's workers (default: the current client)."""
    return Cluster(client, in_flight=in_flight)


def warm_up(client: Client | None = None, level: int | None = None, *,
            recipe: Recipe | None = None) -> None:
    """Load (or compile, the first time) the kernels of a level or recipe on every worker
    now, so the first blocks code at full speed (each worker does it on its first block
    otherwise)."""
    client = client if client is not None else get_client()
    client.run(_warm_up, api.choose_recipe(recipe, level))


def _warm_up(recipe: Recipe) -> None:
    from rwkvzip.coding import codec

    codec.warm_up(recipe, decoding=True)


def total_threads(client: Client) -> int:
    """The number of tasks the cluster runs at once (every worker's threads)."""
    return sum(client.nthreads().values())


class _ClusterEngine:
    """Jobs of one stream submitted as tasks, results collected oldest first (blocks.Engine).
    The job's context (recipe, prior) is sent to every worker once."""

    def __init__(self, cluster: Cluster, job: blocks.Job, context: tuple,
                 progress: Progress | None):
        self._cluster = cluster
        self._client = cluster.client
        self._job = job
        self._progress = progress
        self._name = f"rwkvzip-{job.__name__.strip('_')}-{uuid.uuid4().hex}"
        [self._context] = self._client.scatter([context], broadcast=True, hash=False)
        self._topic = None
        self._reports: queue.SimpleQueue = queue.SimpleQueue()
        if progress is not None:
            self._topic = f"{TOPIC}-{self._name}"
            self._client.subscribe_topic(self._topic, self._on_event)
        self._in_flight: deque[Future] = deque()
        self._submitted = 0

    def put(self, arg) -> list:
        done = []
        while not self._cluster._slots.acquire(timeout=POLL_SECONDS):
            self._check_stopped()
            if self._in_flight:  # free a slot of ours (others free theirs)
                done.append(self._collect())
        try:
            self._check_stopped()
            self._in_flight.append(self._client.submit(
                _run, self._job, arg, self._context, self._topic,
                key=f"{self._name}-{self._submitted}", pure=False))
        except BaseException:
            self._cluster._slots.release()
            self.close()
            raise
        self._submitted += 1
        return done

    def drain(self) -> list:
        return [self._collect() for _ in range(len(self._in_flight))]

    def finish(self) -> list:
        try:
            return self.drain()
        finally:
            self.close()

    def close(self) -> None:
        """Cancel what is still running, free its slots, stop listening for progress."""
        if self._in_flight:
            self._client.cancel(list(self._in_flight), force=True)
            for _ in self._in_flight:
                self._cluster._slots.release()
            self._in_flight.clear()
        if self._topic is not None:
            with contextlib.suppress(Exception):
                self._client.unsubscribe_topic(self._topic)
            self._topic = None
        if self._context is not None:
            self._context.release()
            self._context = None

    def _collect(self):
        """The oldest task's result; its error (or a stop) cancels the rest and is raised."""
        future = self._in_flight[0]
        index = self._submitted - len(self._in_flight)
        try:
            # wait on a done callback, not on result(timeout=...): under load distributed's
            # sync() can meet a cancelled wait_for and raise UnboundLocalError (Python 3.11)
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            while True:
                self._report()
                self._check_stopped()
                if done.wait(POLL_SECONDS):
                    break
            result = future.result()
            self._in_flight.popleft()
            self._cluster._slots.release()
            self._report()
            return result
        except BaseException as exc:
            self.close()
            if isinstance(exc, Exception) and not _ours(exc):
                raise ClusterError(f"block {index} failed on the cluster: "
                                   f"{type(exc).__name__}: {exc}") from exc
            raise

    def _check_stopped(self) -> None:
        if self._cluster._stopped.is_set():
            raise StoppedError("stopped: another file of this call failed")

    def _on_event(self, event: tuple[float, Any]) -> None:
        """Called on the client's event loop: hand the count to the collecting thread."""
        self._reports.put(event[1])

    def _report(self) -> None:
        while True:
            try:
                n = self._reports.get_nowait()
            except queue.Empty:
                return
            if self._progress is not None:
                self._progress(n)


def _ours(exc: BaseException) -> bool:
    """rwkvzip's own errors (FormatError, PriorError, ...) pass through as they are."""
    return type(exc).__module__.split(".")[0] == "rwkvzip"


def _run(job: blocks.Job, arg, context: tuple, topic: str | None):
    """A task on a worker: the job, its progress sent as events on `topic`."""
    if topic is None:
        return job(arg, *context, progress=_ignore)
    worker = get_worker()
    pending = 0

    def report(n: int) -> None:
        nonlocal pending
        pending += n
        if pending >= PROGRESS_STEP:
            worker.log_event(topic, pending)
            pending = 0

    result = job(arg, *context, progress=report)
    if pending:
        worker.log_event(topic, pending)
    return result


def _ignore(n: int) -> None:
    pass


# -- files ---------------------------------------------------------------------------------------

def compress_file(src: PathLike, dst: PathLike | None = None, *, client: Client | None = None,
                  level: int | None = None, recipe: Recipe | None = None,
                  prior: api.PriorSource | None = None,
                  block_size: int = blocks.DEFAULT_BLOCK_SIZE, overwrite: bool = False,
                  progress: bool | Progress = False) -> api.Stats:
    """Compress `src` to `dst` (default: src + ".rwkz") on the cluster: the same bytes as
    `rwkvzip -T N --block-size block_size`. `progress`: True for a progress bar, or a
    function called with the number of raw bytes coded."""
    return compress_files([src], None if dst is None else [dst], client=client, level=level,
                          recipe=recipe, prior=prior, block_size=block_size,
                          overwrite=overwrite, progress=progress)[0]


def compress_files(sources: Sequence[PathLike], destinations: Sequence[PathLike] | None = None,
                   *, client: Client | None = None, level: int | None = None,
                   recipe: Recipe | None = None, prior: api.PriorSource | None = None,
                   block_size: int = blocks.DEFAULT_BLOCK_SIZE, overwrite: bool = False,
                   progress: bool | Progress = False) -> list[api.Stats]:
    """Compress each source to its destination (default: source + ".rwkz"), the blocks of
    every file on the cluster at once; returns each file's Stats."""
    blocks.block_size_for(0, block_size)  # a bad size fails before anything is written

    def work(fin: BinaryIO, fout: BinaryIO, cluster: Cluster, report: Progress | None):
        return api.compress_stream(fin, fout, level, recipe=recipe, prior=prior,
                                   block_size=block_size, progress=report, engine=cluster)

    destinations = [f"{s}{SUFFIX}" for s in map(os.fspath, sources)] \
        if destinations is None else destinations
    return _run_files(sources, destinations, work, client, overwrite, progress,
                      compressing=True)


def decompress_file(src: PathLike, dst: PathLike, *, client: Client | None = None,
                    prior: api.PriorSource | None = None, overwrite: bool = False,
                    progress: bool | Progress = False) -> api.Stats:
    """Decompress `src` to `dst`, its blocks (members) decoded on the cluster."""
    return decompress_files([src], [dst], client=client, prior=prior, overwrite=overwrite,
                            progress=progress)[0]


def decompress_files(sources: Sequence[PathLike], destinations: Sequence[PathLike], *,
                     client: Client | None = None, prior: api.PriorSource | None = None,
                     overwrite: bool = False, progress: bool | Progress = False
                     ) -> list[api.Stats]:
    """Decompress each source to its destination, the members of every file on the cluster
    at once; returns each file's Stats."""

    def work(fin: BinaryIO, fout: BinaryIO, cluster: Cluster, report: Progress | None):
        return api.decompress_stream(fin, fout, report, prior=prior, engine=cluster)

    return _run_files(sources, destinations, work, client, overwrite, progress,
                      compressing=False)


def _run_files(sources: Sequence[PathLike], destinations: Sequence[PathLike], work,
               client: Client | None, overwrite: bool, progress: bool | Progress,
               compressing: bool) -> list[api.Stats]:
    """work(fin, fout, cluster, report) for each pair, each file in a thread of this process
    (it only reads, waits and writes); the first error stops the others and is raised, and
    no output of an unfinished file remains."""
    sources = [os.fspath(s) for s in sources]
    destinations = [os.fspath(d) for d in destinations]
    if len(sources) != len(destinations):
        raise ValueError(f"{len(sources)} sources but {len(destinations)} destinations")
    if len(set(destinations)) != len(destinations):
        raise ValueError("two sources have the same destination")
    for dst in destinations:
        _check_absent(dst, overwrite)
    cluster = Cluster(client)
    total = sum(_size(s) for s in sources) if progress is True and compressing else None
    with _progress(progress, total) as report:
        lock = threading.Lock()

        def one(src: str, dst: str) -> api.Stats:
            counted = None if report is None else _locked(report, lock)
            with fsspec.open(src, "rb") as fin, _atomic_output(dst, overwrite) as fout:
                return work(fin, fout, cluster, counted)

        with ThreadPoolExecutor(max(1, min(len(sources), cluster.in_flight))) as pool:
            futures = [pool.submit(one, s, d) for s, d in zip(sources, destinations, strict=True)]
            try:
                wait(futures, return_when=FIRST_EXCEPTION)
            finally:  # an error, or Ctrl-C here: stop every file, remove their outputs
                if not all(f.done() and f.exception() is None for f in futures):
                    cluster.stop()
                    for f in futures:
                        f.cancel()
                    wait(futures)
            errors = [f.exception() for f in futures if not f.cancelled()]
            first = next((e for e in errors if e is not None and not isinstance(e, StoppedError)),
                         None)
            if first is not None:
                raise first
            return [f.result() for f in futures]


def _locked(report: Progress, lock: threading.Lock) -> Progress:
    def counted(n: int) -> None:
        with lock:
            report(n)
    return counted


@contextlib.contextmanager
def _progress(progress: bool | Progress, total: int | None) -> Iterator[Progress | None]:
    if progress is True:
        with feedback.progress_bar(total, "", True) as bar:
            yield bar
    else:
        yield progress or None


def _size(path: str) -> int | None:
    fs, p = fsspec.core.url_to_fs(path)
    with contextlib.suppress(Exception):
        return fs.size(p)
    return None


def _check_absent(dst: str, overwrite: bool) -> None:
    fs, path = fsspec.core.url_to_fs(dst)
    if not overwrite and fs.exists(path):
        raise FileExistsError(f"{dst} already exists (overwrite=True replaces it)")


@contextlib.contextmanager
def _atomic_output(dst: str, overwrite: bool) -> Iterator[BinaryIO]:
    """A file that becomes `dst` when the block ends without error; removed otherwise."""
    fs, path = fsspec.core.url_to_fs(dst)
    _check_absent(dst, overwrite)
    tmp = f"{fs._parent(path)}/.rwkvzip-{uuid.uuid4().hex}.tmp"
    try:
        with fs.open(tmp, "wb") as f:
            yield f
        fs.mv(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(tmp)
        raise


# -- workers -------------------------------------------------------------------------------------

class ImportRwkvzip(WorkerPlugin):
    """Imports rwkvzip on a worker when it starts, which registers the fsspec compression
    "rwkvzip" there (see install)."""

    name = "rwkvzip"

    def setup(self, worker) -> None:
        import rwkvzip  # noqa: F401 - importing registers the compression with fsspec


def install(client: Client) -> None:
    """Import rwkvzip on every worker of the client's cluster, now and on those that join
    later, so that fsspec opens `.rwkz` files there (dask.dataframe.read_csv("*.csv.rwkz")).
    The same as starting each worker with `dask worker --preload rwkvzip ...`."""
    client.register_plugin(ImportRwkvzip())
