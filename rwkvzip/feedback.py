"""What the user sees while and after the work runs: a tqdm progress bar on stderr (only on a
terminal, only for work that lasts) and the -v summary line."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from tqdm import tqdm

Progress = Callable[[int], None]  # told the number of raw bytes just processed
BAR_DELAY = 0.5  # seconds of work before a bar appears: quick jobs stay silent
NOTICE_DELAY = 1.5  # loading cached kernels takes less; compiling them takes a minute
NOTICE = "rwkvzip: compiling kernels for this CPU, once (up to a minute)"


def show_progress(quiet: bool) -> bool:
    """A bar only when stderr is a terminal and -q was not given."""
    return not quiet and sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(total: int | None, label: str, enabled: bool) -> Iterator[Progress | None]:
    """Yields a callback taking the number of raw bytes just processed (None when off)."""
    if not enabled:
        yield None
        return
    sized = _terminal_known()  # a terminal that reports no size (0 x 0) is taken as 80 x 24
    bar = tqdm(total=total, desc=label, unit="B", unit_scale=True, unit_divisor=1024,
               file=sys.stderr, leave=False, delay=BAR_DELAY, dynamic_ncols=sized,
               ncols=None if sized else 80, nrows=None if sized else 24)
    try:
        yield bar.update
    finally:
        bar.close()


@contextlib.contextmanager
def compile_notice(enabled: bool, delay: float = NOTICE_DELAY) -> Iterator[list[float]]:
    """Around the kernels' warm-up: if it lasts `delay` seconds (they are being compiled,
    not loaded from the cache), one line says so, on a terminal only. Yields a list that
    receives the seconds it took."""
    took: list[float] = []
    timer = threading.Timer(delay, lambda: print(NOTICE, file=sys.stderr, flush=True))
    timer.daemon = True
    if enabled:
        timer.start()
    start = time.monotonic()
    try:
        yield took
    finally:
        timer.cancel()
        took.append(time.monotonic() - start)


def _terminal_known() -> bool:
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return size.columns > 0 and size.lines > 0


def ratio_text(compressed: int, raw: int) -> tuple[str, str]:
    """Compressed size as a percentage of the raw size, and bits per raw byte."""
    if raw == 0:
        return "-", "-"
    return f"{100 * compressed / raw:.2f}%", f"{8 * compressed / raw:.3f}"


def summary(name: str, target: str, raw: int, compressed: int, seconds: float,
            compressing: bool, start_up: float = 0.0) -> str:
    """The -v line: sizes, ratio, bits per byte and speed (raw bytes per second of coding;
    the kernels' start-up, a minute when they are compiled, is given apart)."""
    ratio, bpb = ratio_text(compressed, raw)
    before, after = (raw, compressed) if compressing else (compressed, raw)
    speed = raw / 1000 / seconds if seconds > 0 else 0.0
    extra = f" (+ {start_up:.2f} s start-up)" if start_up >= 0.005 else ""
    return (f"{name}: {before} -> {after} bytes ({ratio}, {bpb} bpb) in {seconds:.2f} s"
            f"{extra}, {speed:.1f} KB/s -> {target}")
