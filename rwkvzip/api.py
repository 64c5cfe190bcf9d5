"""Compress and decompress bytes, binary streams and chunks (the library's public entry points).

Shaped like the standard library's lzma and gzip modules: `compress`/`decompress` for bytes,
`Compressor`/`Decompressor` objects for data that arrives in pieces, and `compress_stream`/
`decompress_stream` that copy between binary files. File objects are in fileobj.py.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rwkvzip import priors
from rwkvzip.coding import blocks, bypass, container, eol, snapshot
from rwkvzip.coding.codec import Predictor, network_bytes
from rwkvzip.coding.coder import CoderError
from rwkvzip.coding.container import FormatError
from rwkvzip.priors import Prior
from rwkvzip.recipe import Recipe, RecipeError, default_recipe, level_recipe

Progress = Callable[[int], None]  # called with the number of raw bytes just processed
PriorSource = str | Path | bytes | Prior  # a prior file's path or bytes, or a loaded Prior

# Working memory one model may need. The recipe is read from the file, so without this bound
# a forged header could make the decoder allocate (and initialise) any amount of memory.
MAX_MODEL_BYTES = 512 << 20
READ_SIZE = container.MAX_FRAME


@dataclass
class Stats:
    raw_bytes: int = 0
    compressed_bytes: int = 0
    frames: int = 0
    members: int = 0


def model_bytes(recipe: Recipe) -> int:
    """The working memory of a Predictor for this recipe: the network's arrays and the
    context-mixing tables (codec.network_bytes, from what the predictor allocates), or the
    count models' tables (no network runs with them)."""
    if recipe.counts is not None:
        return recipe.counts.memory_bytes()
    return network_bytes(recipe)


def check_model_size(recipe: Recipe) -> None:
    """Refuse (RecipeError) a recipe whose model would need more than MAX_MODEL_BYTES."""
    need = model_bytes(recipe)
    if need > MAX_MODEL_BYTES:
        raise RecipeError(f"the model would need {need >> 20} MiB of memory "
                          f"(limit {MAX_MODEL_BYTES >> 20} MiB)")


def choose_recipe(recipe: Recipe | None, level: int | Recipe | None) -> Recipe:
    """The recipe of `level` or `recipe` (the default's without either). A Recipe in the
    level's place is the 0.x argument order, compress(data, recipe): taken as recipe=."""
    if isinstance(level, Recipe) and recipe is None:
        recipe, level = level, None
    if recipe is not None and not isinstance(recipe, Recipe):
        raise TypeError("recipe must be a Recipe (give a compression level as level=N)")
    if level is not None and (not isinstance(level, int) or isinstance(level, bool)):
        raise TypeError("level must be an int 1 ... 9 (give a recipe as recipe=...)")
    if recipe is not None and level is not None:
        raise ValueError("give either a recipe or a level, not both")
    if level is not None:
        return level_recipe(level)
    return recipe or default_recipe()


def _given_prior(prior: PriorSource | None) -> Prior | None:
    return None if prior is None else priors.load_prior(prior)


def new_predictor(recipe: Recipe, given: Prior | None = None) -> Predictor:
    """The recipe's predictor, its network starting from the recipe's prior if it names one
    (the one given, or a shipped one; PriorError if it is missing or different)."""
    return start_predictor(recipe, priors.resolve(recipe, given))


def start_predictor(recipe: Recipe, prior: Prior | None) -> Predictor:
    """The predictor at a stream's start: the prior's weights, then its dictionary learnt
    (exactly as if coded), so encoder and decoder both begin after it. The dictionary is
    learnt once per process and its state copied into each new predictor (snapshot.py)."""
    predictor = Predictor(recipe, None if prior is None else prior.W)
    if prior is not None and prior.dictionary:
        snapshot.dictionary_state(recipe, prior, predictor).restore(predictor)
    return predictor


def frame_length(recipe: Recipe, pending: bytes | bytearray) -> int:
    """The raw bytes of the next frame while a whole frame's worth is pending: MAX_FRAME, or
    one less not to cut a CR from its LF (eol)."""
    if recipe.eol:
        return eol.frame_length(pending, container.MAX_FRAME)
    return container.MAX_FRAME


def frames_of(data: bytes, recipe: Recipe) -> Iterator[bytes]:
    """The raw bytes of each frame that a Compressor of the recipe cuts `data` into."""
    at = 0
    while len(data) - at >= container.MAX_FRAME:
        n = frame_length(recipe, memoryview(data)[at:at + container.MAX_FRAME])
        yield data[at:at + n]
        at += n
    if at < len(data):
        yield data[at:]


class Compressor:
    """Incremental compression into one rwkvzip stream, like lzma.LZMACompressor.

    `compress(data)` returns the compressed bytes ready so far (a frame is coded once 64 KiB
    are buffered, or at the end); `flush()` codes the rest and ends the stream. `progress`,
    if given, is called with the number of raw bytes coded, every few KB. `prior` (a prior
    file's path or bytes) starts the level's network from those weights instead of the
    level's own start; the stream's header records its digest, and decoding needs it.
    `threads` (0: one per core) codes independent blocks of `block_size` bytes in as many
    worker processes; the output depends on the block size only (blocks.block_size_for:
    one block with one thread unless a size is given, else 16 MiB by default). `engine`
    codes the blocks elsewhere instead (rwkvzip.dask.engine: a Dask cluster's workers).
    """

    def __init__(self, level: int | None = None, *, recipe: Recipe | None = None,
                 prior: PriorSource | None = None, progress: Progress | None = None,
                 threads: int = 1, block_size: int | None = None,
                 engine: blocks.EngineFactory | None = None):
        recipe = choose_recipe(recipe, level)
        given = _given_prior(prior)
        self.recipe = recipe if given is None else priors.with_prior(recipe, given)
        check_model_size(self.recipe)
        _check_engine(threads, engine)
        self._block_size = blocks.block_size_for(0 if engine else threads, block_size)
        threads = blocks.resolve_threads(threads)
        self._progress = progress
        self._pending = bytearray()
        self._finished = False
        if self._block_size is None:
            self._start = priors.resolve(self.recipe, given)
            self._predictor: Predictor | None = None  # built for the first frame it codes
            self._bypass = bypass.Bypass(bypass.history_bytes(self.recipe)) if self.recipe.bypass \
                else None
            self._header = container.encode_header(self.recipe)
            self.stats = Stats(members=1)
        else:
            priors.resolve(self.recipe, given)  # a missing prior is an error here, up front
            start = engine or blocks.local(threads)
            self._blocks = start(_compress_block, (self.recipe, given), progress)
            self._blocks_put = 0
            self.stats = Stats()

    def compress(self, data: bytes) -> bytes:
        if self._finished:
            raise ValueError("compressor was already flushed")
        self._pending += data
        if self._block_size is not None:
            done = []
            while len(self._pending) >= self._block_size:
                done += self._put_block(self._block_size)
            return self._members(done)
        out = [self._take_header()]
        while len(self._pending) >= container.MAX_FRAME:
            n = frame_length(self.recipe, self._pending)
            out.append(self._frame(bytes(self._pending[:n])))
            del self._pending[:n]
        return b"".join(out)

    def flush(self) -> bytes:
        """The rest of the stream: the last frame and the trailer. The object is then done."""
        if self._finished:
            raise ValueError("compressor was already flushed")
        self._finished = True
        if self._block_size is not None:  # an empty input is one empty member
            last = self._put_block(len(self._pending)) if self._pending or not self._blocks_put \
                else []
            return self._members(last + self._blocks.finish())
        out = [self._take_header()]
        if self._pending:
            out.append(self._frame(bytes(self._pending)))
            self._pending.clear()
        trailer = container.encode_trailer(self.stats.raw_bytes)
        self.stats.compressed_bytes += len(trailer)
        return b"".join(out) + trailer

    def close(self) -> None:
        """Stop the worker processes of a compressor that will not be flushed."""
        if self._block_size is not None:
            self._blocks.close()

    def _put_block(self, size: int) -> list:
        """Hand the next `size` pending bytes to the workers as one block; the members
        that finished meanwhile (blob, stats), in order."""
        block = bytes(self._pending[:size])
        del self._pending[:size]
        self._blocks_put += 1
        return self._blocks.put(block)

    def _members(self, done: list) -> bytes:
        for _, stats in done:
            _add(self.stats, stats)
        return b"".join(blob for blob, _ in done)

    def _take_header(self) -> bytes:
        header, self._header = self._header, b""
        self.stats.compressed_bytes += len(header)
        return header

    def _frame(self, raw: bytes) -> bytes:
        if self._bypass is not None and self._bypass.decide(raw):
            frame = container.encode_frame(raw, None, eol=self.recipe.eol, bypass=True,
                                           bypassed=True)
            if self._progress:
                self._progress(len(raw))
        else:
            frame = self._coded_frame(raw)
        self.stats.raw_bytes += len(raw)
        self.stats.compressed_bytes += len(frame)
        self.stats.frames += 1
        return frame

    def _coded_frame(self, raw: bytes) -> bytes:
        if self._predictor is None:
            self._predictor = start_predictor(self.recipe, self._start)
        coded, crlf = eol.coded_view(raw, self.recipe.eol)
        payload = self._predictor.encode_frame(coded, self._progress)
        if crlf and self._progress:
            self._progress(len(raw) - len(coded))
        return container.encode_frame(raw, payload if len(payload) < len(raw) else None,
                                      eol=self.recipe.eol, bypass=self.recipe.bypass,
                                      coded_len=len(coded) if crlf else None)


class Decompressor:
    """Incremental decompression of one rwkvzip member, like lzma.LZMADecompressor.

    `decompress(data, max_length=-1)` returns the data decoded so far (at most max_length
    bytes when max_length >= 0; the rest waits for the next call). `eof` becomes True at the
    end of the member; bytes after it are in `unused_data` (another member may start there).
    `needs_input` is False while decoded data is waiting to be returned. Errors are
    FormatError. Buffering never exceeds one frame plus what the caller hands in. The
    header's recipe is checked (known preset, architecture and numeric contract, a model
    that fits in memory, its prior: the one given as `prior` or a shipped one, else
    PriorError) before anything else is read; the model itself is built when the first
    frame has fully arrived.
    """

    def __init__(self, *, prior: PriorSource | None = None, progress: Progress | None = None,
                 first: bool = True):
        self._given = _given_prior(prior)
        self._first = first  # False: bytes that are not a member are "trailing garbage"
        self._progress = progress
        self._buf = bytearray()
        self._out = bytearray()
        self._predictor: Predictor | None = None
        self._start: Prior | None = None  # the prior the header's recipe starts from
        self._head: container.FrameHead | None = None
        self._ended = False  # trailer parsed
        self.eof = False
        self.unused_data = b""
        self.recipe: Recipe | None = None
        self.stats = Stats()

    @property
    def needs_input(self) -> bool:
        return not self.eof and not self._out

    def truncated(self) -> FormatError:
        """The error for input that ends here, before the end of the member."""
        if self.recipe is None:
            where = "header"
        elif self._head is None:
            where = f"frame {self.stats.frames} or trailer"
        else:
            where = f"frame {self.stats.frames}"
        return FormatError(f"truncated input (the compressed stream ends inside {where})")

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if self._ended and data:
            raise EOFError("already at the end of the compressed stream")
        self._buf += data
        while (max_length < 0 or len(self._out) < max_length) and self._step():
            pass
        if self._ended:
            self.unused_data = bytes(self._buf)
        n = len(self._out) if max_length < 0 else min(max_length, len(self._out))
        out = bytes(self._out[:n])
        del self._out[:n]
        self.eof = self._ended and not self._out
        return out

    def _parse(self, window: int, parse: Callable[[BinaryIO], object]) -> object:
        """Run a container parser on the buffered bytes; consume them only if it succeeds."""
        f = io.BytesIO(bytes(self._buf[:window]))
        result = parse(f)
        del self._buf[:f.tell()]
        self.stats.compressed_bytes += f.tell()
        return result

    def _step(self) -> bool:
        """Parse or decode the next piece if enough input is buffered; False when not."""
        if self._ended or (self._head is None and not self._buf):
            return False
        try:
            if self.recipe is None:
                recipe = self._parse(container.MAX_HEADER,
                                     lambda f: container.read_header(f, first=self._first))
                try:
                    check_model_size(recipe)
                except RecipeError as exc:
                    raise FormatError(f"cannot decode this file: {exc}") from None
                self._start = priors.resolve(recipe, self._given)
                self.recipe = recipe
                self.stats.members = 1
            elif self._head is None:
                index, total = self.stats.frames, self.stats.raw_bytes
                self._head = self._parse(
                    container.MAX_FRAME_HEAD,
                    lambda f: container.read_frame_head(f, index, total, self.recipe.eol,
                                                     self.recipe.bypass))
                self._ended = self._head is None
            else:
                if len(self._buf) < self._head.payload_len:
                    return False
                self._decode_frame(bytes(self._buf[:self._head.payload_len]))
        except container.TruncatedError:
            return False
        return True

    def _decode_frame(self, payload: bytes) -> None:
        head = self._head
        if head.bypassed:  # the models never saw it
            raw = payload
            if self._progress:
                self._progress(len(raw))
        else:
            raw = self._modelled_frame(head, payload)
        container.check_frame(head, raw)
        del self._buf[:len(payload)]
        self._head = None
        self._out += raw
        self.stats.compressed_bytes += len(payload)
        self.stats.raw_bytes += len(raw)
        self.stats.frames += 1

    def _modelled_frame(self, head: container.FrameHead, payload: bytes) -> bytes:
        """A frame the models ran over: decoded, or stored and learnt."""
        if self._predictor is None:
            self._predictor = start_predictor(self.recipe, self._start)
        if head.stored:
            raw = payload
            coded = eol.strip(raw) if head.crlf else raw
            if len(coded) != head.coded_len or (head.crlf and not eol.crlf_text(raw)):
                raise FormatError(f"corrupt input (frame {head.index}'s line ends)")
            self._predictor.learn_frame(coded)
            if self._progress:
                self._progress(len(raw))
        else:
            try:
                coded = self._predictor.decode_frame(payload, head.coded_len, self._progress)
            except CoderError as exc:
                raise FormatError(f"corrupt input (frame {head.index}: {exc})") from None
            raw = eol.restore(coded) if head.crlf else coded
            if raw is None or len(raw) != head.raw_len:
                raise FormatError(f"corrupt input (frame {head.index}'s line ends)")
            if head.crlf and self._progress:
                self._progress(len(raw) - len(coded))
        return raw


def decompress_chunks(chunks: Iterable[bytes], progress: Progress | None = None,
                      stats: Stats | None = None, prior: PriorSource | None = None
                      ) -> Iterator[bytes]:
    """Decoded pieces of one or more concatenated members arriving as `chunks`; raises
    FormatError on foreign, corrupt, truncated or trailing data, PriorError when a member
    needs a prior that is neither given nor shipped. Adds up into `stats`."""
    stats = stats if stats is not None else Stats()
    given = _given_prior(prior)
    dec: Decompressor | None = None
    seen = False
    for chunk in chunks:
        while chunk:
            if dec is None:
                dec = Decompressor(prior=given, progress=progress, first=not seen)
                seen = True
            out = dec.decompress(chunk)
            chunk = b""
            if out:
                yield out
            if dec.eof:
                _add(stats, dec.stats)
                chunk, dec = dec.unused_data, None
    if not seen:
        raise FormatError("not an rwkvzip file (empty input)")
    if dec is not None:
        raise dec.truncated()


def _add(total: Stats, part: Stats) -> None:
    total.raw_bytes += part.raw_bytes
    total.compressed_bytes += part.compressed_bytes
    total.frames += part.frames
    total.members += part.members


def read_chunks(f: BinaryIO, size: int = READ_SIZE):
    while chunk := f.read(size):
        yield chunk


def _read_full(f: BinaryIO, n: int) -> bytes:
    """Up to n bytes, fewer only at end of input (pipes return short reads)."""
    parts, got = [], 0
    while got < n:
        chunk = f.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def compress_stream(fin: BinaryIO, fout: BinaryIO, level: int | None = None, *,
                    recipe: Recipe | None = None, prior: PriorSource | None = None,
                    threads: int = 1, block_size: int | None = None,
                    progress: Progress | None = None,
                    engine: blocks.EngineFactory | None = None) -> Stats:
    """Compress everything readable from fin into one rwkvzip stream on fout (the arguments
    as Compressor's)."""
    comp = Compressor(level, recipe=recipe, prior=prior, progress=progress, threads=threads,
                      block_size=block_size, engine=engine)
    try:
        fout.write(comp.compress(b""))
        while raw := _read_full(fin, container.MAX_FRAME):
            fout.write(comp.compress(raw))
        fout.write(comp.flush())
    finally:
        comp.close()
    return comp.stats


def decompress_stream(fin: BinaryIO, fout: BinaryIO, progress: Progress | None = None, *,
                      prior: PriorSource | None = None, threads: int = 1,
                      engine: blocks.EngineFactory | None = None) -> Stats:
    """Decompress one or more concatenated rwkvzip streams from fin into fout; with
    `threads` (0: one per core) its members, the blocks of a file written with threads, are
    decoded by as many worker processes (with `engine`, by its workers)."""
    stats = Stats()
    pieces = decoded_pieces(fin, progress, stats, prior=prior, threads=threads, engine=engine)
    with contextlib.closing(pieces):  # a failed write stops the workers at once
        for piece in pieces:
            fout.write(piece)
    return stats


def decoded_pieces(fin: BinaryIO, progress: Progress | None = None,
                   stats: Stats | None = None, *, prior: PriorSource | None = None,
                   threads: int = 1, engine: blocks.EngineFactory | None = None
                   ) -> Iterator[bytes]:
    """The decoded data of the members read from fin, piece by piece; with `threads` or an
    `engine`, the members are decoded by workers (closing the iterator stops them)."""
    stats = stats if stats is not None else Stats()
    _check_engine(threads, engine)
    threads = blocks.resolve_threads(threads)
    if threads == 1 and engine is None:
        return decompress_chunks(read_chunks(fin), progress, stats, prior)
    return _decompress_blocks(_Pushback(fin), engine or blocks.local(threads), progress, stats,
                              prior)


def _check_engine(threads: int, engine: blocks.EngineFactory | None) -> None:
    if engine is not None and threads != 1:
        raise ValueError("give threads or an engine, not both (the engine has its workers)")


def _compress_block(data: bytes, recipe: Recipe, given: Prior | None, *,
                    progress: Progress) -> tuple[bytes, Stats]:
    """One block: a whole member from the recipe's start state (a worker's job)."""
    comp = Compressor(recipe=recipe, prior=given, progress=progress)
    blob = comp.compress(data) + comp.flush()
    return blob, comp.stats


def _decompress_member(member: bytes, given: Prior | None, *,
                       progress: Progress) -> tuple[bytes, Stats]:
    """One whole member, decoded (a worker's job)."""
    stats = Stats()
    return b"".join(decompress_chunks([member], progress, stats, given)), stats


def _decompress_blocks(reader: _Pushback, engine: blocks.EngineFactory,
                       progress: Progress | None, stats: Stats, prior: PriorSource | None
                       ) -> Iterator[bytes]:
    """Members handed whole to the workers, output in order. A member too long to hold
    (blocks.MAX_PARALLEL_MEMBER), or whose framing is wrong, is decoded here as a stream
    once the members before it are out, so errors come where -T 1 meets them."""
    given = _given_prior(prior)
    runner = engine(_decompress_member, (given,), progress)
    first = True
    try:
        while (read := container.read_member(reader, first, blocks.MAX_PARALLEL_MEMBER)):
            member, whole = read
            done = runner.put(member) if whole else runner.drain()
            for raw, part in done:
                _add(stats, part)
                yield raw
            if not whole:
                yield from _decode_member(reader, member, first, given, progress, stats)
            first = False
        for raw, part in runner.finish():
            _add(stats, part)
            yield raw
    finally:
        runner.close()


def _decode_member(reader: _Pushback, start: bytes, first: bool, given: Prior | None,
                   progress: Progress | None, stats: Stats) -> Iterator[bytes]:
    """One member as a stream: `start`, then reader until its end; what follows it goes
    back to reader."""
    dec = Decompressor(prior=given, progress=progress, first=first)
    chunk = start
    while True:
        if out := dec.decompress(chunk):
            yield out
        if dec.eof:
            break
        if not (chunk := reader.read(READ_SIZE)):
            raise dec.truncated()
    _add(stats, dec.stats)
    reader.unread(dec.unused_data)


class _Pushback:
    """A binary reader whose full reads (short only at the end) can be given back."""

    def __init__(self, f: BinaryIO):
        self._f = f
        self._back = b""

    def unread(self, data: bytes) -> None:
        self._back = data + self._back

    def read(self, n: int) -> bytes:
        head, self._back = self._back[:n], self._back[n:]
        return head + _read_full(self._f, n - len(head)) if len(head) < n else head


def compress(data: bytes, level: int | None = None, *, recipe: Recipe | None = None,
             prior: PriorSource | None = None, threads: int = 1,
             block_size: int | None = None,
             engine: blocks.EngineFactory | None = None) -> bytes:
    """Compress bytes in memory at a compression level 1 ... 9 (None: the default), or with
    a recipe; `prior`: a prior file's path or bytes to start the network from; `threads`,
    `block_size`, `engine`: independent blocks on several cores, as Compressor."""
    comp = Compressor(level, recipe=recipe, prior=prior, threads=threads,
                      block_size=block_size, engine=engine)
    try:
        return comp.compress(data) + comp.flush()
    finally:
        comp.close()


def decompress(data: bytes, *, prior: PriorSource | None = None, threads: int = 1,
               engine: blocks.EngineFactory | None = None) -> bytes:
    """Decompress bytes in memory (concatenated streams give concatenated data); `prior`:
    the prior file the data was compressed with, if it is not a shipped one; `threads`:
    decode its blocks on as many cores (0: one per core), or `engine`'s workers."""
    if blocks.resolve_threads(threads) == 1 and engine is None:
        return b"".join(decompress_chunks([bytes(data)], prior=prior))
    out = io.BytesIO()
    decompress_stream(io.BytesIO(data), out, prior=prior, threads=threads, engine=engine)
    return out.getvalue()
