"""What the command line does with each file: output names, refusals, warnings, safe writes,
deleting inputs, progress bars, -v reports and -l listings. Returns gzip's exit status:
0 ok, 1 if any file had an error, else 2 if any file was skipped with a warning."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import time
from dataclasses import dataclass, field

from rwkvzip import feedback
from rwkvzip.coding.blocks import EngineError
from rwkvzip.fileio import (
    SUFFIX,
    UserError,
    atomic_output,
    compressed_name,
    decompressed_name,
    has_suffix,
    open_input,
    remove_input,
)

EXIT_OK, EXIT_ERROR, EXIT_WARNING = 0, 1, 2
CONNECT_SECONDS = 10  # --scheduler: how long to try to reach the scheduler
COMPRESS, DECOMPRESS, TEST, LIST = "compress", "decompress", "test", "list"
STDIN = "-"


@dataclass
class Options:
    stdout: bool = False  # -c
    output: str | None = None  # -o (one input only; '-' is stdout)
    keep: bool = True  # inputs are kept unless --rm
    force: bool = False
    verbose: bool = False
    quiet: bool = False
    level: int | None = None
    prior: str | None = None  # -D FILE: the prior to compress with, or to decode with
    threads: int = 1  # -T N (0: one per core)
    block_size: int | None = None  # --block-size (None: blocks.block_size_for's default)
    scheduler: str | None = None  # --scheduler ADDRESS: blocks coded on a Dask cluster
    recipe_options: dict = field(default_factory=dict)  # --arch, --hidden, ... (None: keep)


class SkippedError(Exception):
    """A file left alone with a warning (exit status 2 unless an error happens)."""


class _Null(io.RawIOBase):
    """Where `-t` writes the decoded data."""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return len(b)


def _display(path: str) -> str:
    return "(stdin)" if path == STDIN else path


def _recipe(options: Options, prior):
    from rwkvzip.priors import with_prior
    from rwkvzip.recipe import DEFAULT_LEVEL, RecipeError, level_recipe, with_overrides

    level = options.level if options.level is not None else DEFAULT_LEVEL
    try:
        recipe = with_overrides(level_recipe(level), **options.recipe_options)
        return recipe if prior is None else with_prior(recipe, prior)
    except RecipeError as exc:
        raise UserError(str(exc)) from None


def _prior(options: Options):
    """The -D prior, loaded once for every file (a bad one is one error line up front)."""
    if options.prior is None:
        return None
    from rwkvzip.priors import PriorError, load_prior

    try:
        return load_prior(options.prior)
    except PriorError as exc:
        raise UserError(str(exc)) from None


class Run:
    """One command over its files: errors and warnings are counted, never fatal to the rest."""

    def __init__(self, mode: str, options: Options):
        self.mode = mode
        self.options = options
        self.errors = 0
        self.warnings = 0
        self.totals = None  # -l over several files
        self.prior = _prior(options)
        self.recipe = _recipe(options, self.prior) if mode == COMPRESS else None
        self.engine = _cluster(options)
        self._warm: set[tuple] = set()  # (recipe, compressing) whose kernels are ready

    # -- the whole command -------------------------------------------------------------------

    def run(self, files: list[str]) -> int:
        files = files or [STDIN]
        try:
            self._check_up_front(files)
            for path in files:
                self._one(path)
        finally:
            if self.engine is not None:
                self.engine.client.close()
        if self.mode == LIST and self.totals is not None and len(files) > 1:
            self._list_row(self.totals, "-", "(totals)")
        return EXIT_ERROR if self.errors else EXIT_WARNING if self.warnings else EXIT_OK

    def _check_up_front(self, files: list[str]) -> None:
        opts = self.options
        if opts.output is not None and opts.stdout:
            raise UserError("use either -c or -o, not both")
        if opts.output is not None and len(files) > 1:
            raise UserError("-o takes one input file; use -c to concatenate several")
        if files.count(STDIN) > 1:
            raise UserError("standard input can be read only once")
        if opts.force:
            return
        if self.mode == COMPRESS and any(self._to_stdout(p) for p in files) \
                and sys.stdout.isatty():
            raise UserError("refusing to write compressed data to a terminal (use -f to force)")
        if self.mode != COMPRESS and STDIN in files and sys.stdin.isatty():
            raise UserError("refusing to read compressed data from a terminal (use -f to force)")

    def _to_stdout(self, path: str) -> bool:
        opts = self.options
        if opts.output is not None:
            return opts.output == "-"
        return opts.stdout or path == STDIN

    def _one(self, path: str) -> None:
        try:
            {COMPRESS: self._compress, DECOMPRESS: self._decompress, TEST: self._test,
             LIST: self._list}[self.mode](path)
        except SkippedError as exc:
            self.warnings += 1
            if not self.options.quiet:
                print(f"rwkvzip: {exc}", file=sys.stderr)
        except BrokenPipeError:
            raise
        except UserError as exc:  # names its own file
            self._error(str(exc))
        except OSError as exc:
            self._error(f"{exc.filename or _display(path)}: {exc.strerror or exc}")
        except MemoryError:
            self._error(f"{_display(path)}: out of memory")
        except EngineError as exc:
            self._error(f"{_display(path)}: {exc}")
        except ValueError as exc:  # FormatError, RecipeError, ModelFileError
            self._error(f"{_display(path)}: {exc}")

    def _error(self, message: str) -> None:
        self.errors += 1
        print(f"rwkvzip: {message}", file=sys.stderr, flush=True)

    # -- per file ----------------------------------------------------------------------------

    def _input(self, path: str, names_output: bool) -> os.stat_result | None:
        """stat of an input file (None for stdin); skips what gzip skips."""
        if path == STDIN:
            return None
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise UserError(f"{path}: no such file") from None
        if stat.S_ISDIR(st.st_mode):
            raise SkippedError(f"{path} is a directory -- ignored")
        if names_output and not stat.S_ISREG(st.st_mode) and not self.options.force:
            raise SkippedError(f"{path} is not a regular file -- ignored (use -c, -o or -f)")
        return st

    def _output(self, path: str, name_for) -> str | None:
        """The output path, or None for stdout."""
        opts = self.options
        if self._to_stdout(path):
            return None
        return opts.output if opts.output is not None else name_for(path)

    def _compress(self, path: str) -> None:
        from rwkvzip.api import compress_stream

        names_output = not self._to_stdout(path) and self.options.output is None
        st = self._input(path, names_output)
        if names_output and has_suffix(path) and not self.options.force:
            raise SkippedError(f"{path} already has the {SUFFIX} suffix -- unchanged")
        out = self._output(path, compressed_name)
        total = st.st_size if st is not None and stat.S_ISREG(st.st_mode) else None
        self._transfer(path, out, total, lambda fin, fout, progress:
                       compress_stream(fin, fout, recipe=self.recipe, prior=self.prior,
                                       threads=self.options.threads,
                                       block_size=self.options.block_size,
                                       progress=progress, engine=self.engine),
                       compressing=True)

    def _decompress(self, path: str) -> None:
        from rwkvzip.api import decompress_stream

        names_output = not self._to_stdout(path) and self.options.output is None
        st = self._input(path, names_output)
        out = self._output(path, decompressed_name)
        if names_output and out is None:
            raise SkippedError(f"{path}: unknown suffix (expected {SUFFIX}) -- ignored "
                        "(use -c or -o to name the output)")
        total = None
        if st is not None and stat.S_ISREG(st.st_mode) and self._bar_enabled():
            total = _raw_size(path)
        self._transfer(path, out, total, lambda fin, fout, progress:
                       decompress_stream(fin, fout, progress, prior=self.prior,
                                         threads=self.options.threads, engine=self.engine),
                       compressing=False)

    def _transfer(self, path: str, out: str | None, total: int | None, work,
                  compressing: bool) -> None:
        """Run `work(fin, fout, progress)` from path to out safely; report; delete the input
        only after the output is complete (--rm)."""
        src = None if path == STDIN else path
        label = os.path.basename(path) if src else ""
        with open_input(src) as fin, atomic_output(out, self.options.force, like=src) as fout:
            start_up = self._start_up(fin, compressing)
            start = time.monotonic()
            with feedback.progress_bar(total, label, self._bar_enabled()) as progress:
                stats = work(fin, fout, progress)
            seconds = time.monotonic() - start
        if self.options.verbose:
            target = out if out is not None else "(stdout)"
            print(feedback.summary(_display(path), target, stats.raw_bytes,
                                   stats.compressed_bytes, seconds, compressing, start_up),
                  file=sys.stderr)
        if src is not None and out is not None and not self.options.keep:
            remove_input(src)

    def _test(self, path: str) -> None:
        st = self._input(path, names_output=False)
        self._verify(path, st)
        if self.options.verbose:
            print(f"{_display(path)}: OK", file=sys.stderr)

    def _verify(self, path: str, st: os.stat_result | None) -> None:
        """Decode everything, checking every frame's CRC-32 and every trailer; no output."""
        from rwkvzip.api import decompress_stream

        total = _raw_size(path) if st is not None and self._bar_enabled() else None
        with open_input(None if path == STDIN else path) as fin:
            self._start_up(fin, compressing=False)
            with feedback.progress_bar(total, os.path.basename(path),
                                       self._bar_enabled()) as bar:
                decompress_stream(fin, _Null(), bar, prior=self.prior,
                                  threads=self.options.threads, engine=self.engine)

    def _list(self, path: str) -> None:
        from rwkvzip import listing

        st = self._input(path, names_output=False)
        with open_input(None if path == STDIN else path) as fin:
            info = listing.scan(fin)
        check = "crc32"  # the kind of check; -lv decodes and verifies it
        if self.options.verbose:
            if path == STDIN:
                raise UserError("-lv cannot read standard input twice; use -t")
            self._verify(path, st)
            check = "ok"
        if self.totals is None:
            print(f"{'compressed':>12} {'uncompressed':>13} {'ratio':>8} {'bpb':>6} "
                  f"{'frames':>7}  {'check':<6} {'recipe':<12} name")
            self.totals = listing.Listing()
        self._list_row(info, check, _display(path))
        t = self.totals
        t.compressed += info.compressed
        t.raw += info.raw
        t.frames += info.frames
        t.members += info.members

    def _list_row(self, info, check: str, name: str) -> None:
        ratio, bpb = feedback.ratio_text(info.compressed, info.raw)
        recipe = ",".join(info.recipes) or "-"
        print(f"{info.compressed:>12} {info.raw:>13} {ratio:>8} {bpb:>6} {info.frames:>7}  "
              f"{check:<6} {recipe:<12} {name}")

    def _start_up(self, fin, compressing: bool) -> float:
        """Get the kernels of this file's recipe ready before the clock and the bar start
        (compiled the first time, with a notice on a terminal; loaded from the cache
        after); the seconds it took. The recipe of a compressed input is read from its
        header without consuming it (nothing is done if it cannot be)."""
        from rwkvzip.coding import codec

        recipe = self.recipe if compressing else _peek_recipe(fin)
        key = (recipe.to_json() if recipe else None, compressing)
        if recipe is None or key in self._warm or (compressing and self.engine is not None):
            # (a cluster's workers do all the compressing; a decoder may decode a long
            # member here)
            return 0.0
        self._warm.add(key)
        with feedback.compile_notice(self._bar_enabled()) as took:
            codec.warm_up(recipe, decoding=not compressing)
        return took[0]

    def _bar_enabled(self) -> bool:
        return feedback.show_progress(self.options.quiet)


def _cluster(options: Options):
    """The engine of --scheduler: a client of that Dask scheduler (None without it)."""
    if options.scheduler is None:
        return None
    if options.threads != 1:
        raise UserError("use either -T or --scheduler, not both")
    try:
        from distributed import Client

        from rwkvzip.dask import engine
    except ImportError:
        raise UserError("--scheduler needs Dask: pip install 'rwkvzip[dask]'") from None
    try:
        client = Client(options.scheduler, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UserError(f"cannot reach the Dask scheduler at {options.scheduler}: "
                        f"{exc}") from None
    return engine(client)


def _peek_recipe(fin):
    """The recipe in the header at the start of fin, left unread (None if fin cannot peek,
    or the header or the first frame's head is not complete there or not valid: decoding
    will say why, without first compiling a card's kernels for a file it cannot read)."""
    from rwkvzip import api
    from rwkvzip.coding import container
    from rwkvzip.recipe import RecipeError

    peek = getattr(fin, "peek", None)
    if peek is None:
        return None
    try:
        start = io.BytesIO(peek(container.MAX_HEADER + container.MAX_FRAME_HEAD))
        recipe = container.read_header(start)
        api.check_model_size(recipe)
        container.read_frame_head(start, 0, 0, recipe.eol, recipe.bypass)
    except (container.FormatError, RecipeError):
        return None
    return recipe


def _raw_size(path: str) -> int | None:
    """The decoded size from the frame heads (for the progress bar), None if unreadable."""
    from rwkvzip import listing
    from rwkvzip.coding.container import FormatError

    with contextlib.suppress(OSError, FormatError), open(path, "rb") as f:
        return listing.scan(f).raw
    return None


def run(mode: str, files: list[str], options: Options) -> int:
    """Run one command over its files; the exit status."""
    return Run(mode, options).run(list(files))


def train(samples: list[str], output: str, *, level: int | None, from_scratch: bool,
          seconds: float, epochs: int, dictionary_size: int, force: bool,
          quiet: bool) -> int:
    """`rwkvzip train`: the prior is written only when complete, never over a file without
    -f; the report gives the validation bpb before and after."""
    from rwkvzip import corpus, training
    from rwkvzip.priors import PriorError, short
    from rwkvzip.recipe import RecipeError

    if seconds <= 0 or epochs < 1:
        raise UserError("--time must be positive and --epochs at least 1")
    if os.path.lexists(output) and not force:
        raise UserError(f"{output} already exists; use -f to overwrite")
    try:
        total = sum(len(d) for _, d in corpus.sample_files(samples))
        with feedback.progress_bar(int(0.9 * total) * epochs, "train",
                                   feedback.show_progress(quiet)) as bar:
            report = training.train(samples, level=level, from_scratch=from_scratch,
                                    seconds=seconds, epochs=epochs, progress=bar,
                                    dictionary_size=dictionary_size)
    except (corpus.CorpusError, RecipeError, PriorError) as exc:
        raise UserError(str(exc)) from None
    with atomic_output(output, force) as f:
        f.write(report.prior)
    if not quiet:
        print(f"{output}: prior {short(report.digest)} from {report.start}; "
              f"{report.train_bytes:,} bytes trained on, {report.val_bytes:,} held out; "
              f"validation {report.val_before:.4f} -> {report.val_after:.4f} bpb "
              f"(best epoch {report.best_epoch} of {report.epochs:g}, {report.seconds:.0f} s); "
              f"dictionary {report.dictionary_bytes:,} bytes", file=sys.stderr)
    return EXIT_OK
