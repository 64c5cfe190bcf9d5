"""A second process compiles part of a level's kernels while the first compiles the rest:
numba compiles one function at a time in a process (a global lock), so with a core to spare
a cold start takes about the longer of the two parts, not their sum. The main process types
its block kernel in program order (the network's forward, the mixing's prediction, its
learning step, the backward pass); the helper takes the parts it reaches last: the backward
pass when the network learns, then the mixing's learning step; else that step, then the
mixing's prediction. Where both may reach a kernel at once, the helper takes its callees
from the last to the first, so that the two meet in the middle.

The helper types those kernels (compiles or loads them without running them) on small fresh
arrays with exactly the argument types the block kernels pass them (calls between kernels
are typed by plain types, ops/jit.Kernel), in the form kernels call (ops/callee.py), so what
it writes to the shared on-disk cache is what the first process then loads instead of
compiling. It is started only when the warm-up is still running after HELPER_DELAY seconds
(loading cached kernels takes less), and stopped when the warm-up ends.

    python -m rwkvzip.coding.precompile RECIPE_JSON
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from rwkvzip.recipe import PROB_FLOOR, Recipe

if TYPE_CHECKING:
    from rwkvzip.cm.mixing import MixArrays

HELPER_DELAY = 1.0  # seconds; warm starts take 0.4-0.6 s here


def small_recipe(recipe: Recipe) -> Recipe:
    """The recipe with the smallest tables: kernels are typed by their arrays' kinds, not
    sizes, so it compiles what the full recipe runs."""
    if recipe.mix is not None:
        return replace(recipe, mix=replace(recipe.mix, table_bits=10, match_bits=12))
    if recipe.counts is not None:
        return replace(recipe, counts=replace(recipe.counts, table_bits=8, match_bits=12))
    return recipe


def compile_backward(recipe: Recipe) -> None:
    """Compile (or load) the network's backward step, as stepper.backward calls it (typed on
    zero arrays of the model's sizes)."""
    from rwkvzip.coding import stepper
    from rwkvzip.net.common import dense_matrices
    from rwkvzip.net.gdn import backward as gdn_backward
    from rwkvzip.net.rwkv7 import backward as rwkv7_backward

    model = recipe.build_model()
    module = rwkv7_backward if model.arch_id == stepper.ARCH_RWKV7 else gdn_backward

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    W = model.init_params(0)
    compile_only(module.backward_step, np.int64(0), np.int64(1), W, zeros(W.size),
                 zeros(model.state_size), zeros(model.state_size), zeros(model.trace_size),
                 zeros(model.state_size), model.index, PROB_FLOOR,
                 zeros(model.backward_scratch_size()), dense_matrices())


def learns_by_backward(recipe: Recipe) -> bool:
    """Whether the recipe's block kernel runs the backward step (bptt 1 or TBPTT)."""
    from rwkvzip.coding import codec, stepper

    return recipe.counts is None and codec.training_mode(recipe) in (stepper.MODE_BPTT1,
                                                                     stepper.MODE_TBPTT)


def compile_part(recipe: Recipe) -> None:
    """The helper's part: the backward step when the network learns, then the mixing's
    learning step; else the mixing."""
    if learns_by_backward(recipe):
        compile_backward(recipe)
        if recipe.mix is not None:
            compile_learning_step(small_mixing(recipe), recipe.mix.path_coding)
    elif recipe.mix is not None:
        compile_mixing(recipe)


def small_mixing(recipe: Recipe) -> MixArrays:
    """The mixing's arrays (cm.mixing.MixArrays) for small_recipe(recipe)."""
    from rwkvzip.cm.mixing import MixArrays

    small = small_recipe(recipe)
    return MixArrays(small.mix, small.bptt, frozen=small.lr == 0.0)


def learning_step_parts(m: MixArrays, path: bool) -> list[tuple]:
    """(kernel, arguments) for each kernel stepper.learn_mixing calls, on the arrays `m`,
    in the order the helper compiles them: the mixer's learning step (the largest) first,
    then the others from the last call to the first, then learn_mixing itself. The main
    process types them from the first call on, so when it reaches the step while the helper
    is still at it, the two meet in the middle instead of compiling the same kernels in
    step (tests/test_precompile.py checks the calls against learn_mixing's source)."""
    from rwkvzip.cm import (
        context,
        delta,
        exe,
        image,
        jvm,
        mixer,
        pyc,
        riscv,
        s390x,
        sheet,
        sparse,
        steps,
        syntax,
        thumb,
        wasm,
        x86,
    )
    from rwkvzip.coding import stepper
    from rwkvzip.ops import ALPHABET

    symbol = np.uint8(ord("w"))  # a block's bytes are uint8 (int() keeps the type in numba)
    calls = [  # as learn_mixing makes them
        (context.next_contexts, (m.S, m.HB, symbol)),
        (sheet.next_contexts, (m.S, m.HB)),
        (syntax.next_contexts, (m.S,)),
        (jvm.next_contexts, (m.S, m.HB)),
        (pyc.next_contexts, (m.S, m.HB)),
        (wasm.next_contexts, (m.S, m.HB)),
        (exe.next_contexts, (m.S, m.HB)),
        (x86.next_contexts, (m.S, m.HB)),
        (riscv.next_contexts, (m.S, m.HB)),
        (s390x.next_contexts, (m.S, m.HB)),
        (thumb.next_contexts, (m.S, m.HB)),
        (sparse.next_contexts, (m.CT, m.S, m.HB)),
        (steps.next_expected, (m.S, m.HB)),
        (delta.next_contexts, (m.CT, m.S, m.HB)),
        (context.match_update, (m.S, m.HB, m.CT)),
        (image.next_pixels, (m.S, m.HB)),
        (context.prefetch_slots, (m.CT, m.S, 1)),
    ]
    if not path:
        calls.append((mixer.prefetch_rows, (m.S, m.MX)))
    first = (mixer.learn, (symbol, m.CT, m.S, m.MX, m.ST, m.MX[:ALPHABET]))
    step = (stepper.learn_mixing, (symbol, 0, stepper.Mixing(m.CT, m.HB, m.S, m.MX, m.ST),
                                   path))
    return [first, *reversed(calls), step]


def compile_learning_step(m: MixArrays, path: bool) -> None:
    """Type (compile or load, without running) learning_step_parts."""
    for kernel, args in learning_step_parts(m, path):
        compile_only(kernel, *args)


def compile_mixing(recipe: Recipe) -> None:
    """The mixing's kernels: its learning step first (the largest, which the main process
    reaches last), then the prediction (mixer.predict, as stepper.publish calls it, or with
    path coding mixer.prepare and node_probability), typed on fresh small arrays. In the
    other order the main process reached the learning step while the helper was half-way
    through it, and both compiled its kernels in step."""
    from rwkvzip.cm import mixer
    from rwkvzip.ops import ALPHABET

    m = small_mixing(recipe)
    compile_learning_step(m, recipe.mix.path_coding)
    q = np.full(ALPHABET, 1.0 / ALPHABET, dtype=np.float32)  # the network's softmax
    if recipe.mix.path_coding:
        compile_only(mixer.prepare, q, m.S, m.MX)
        compile_only(mixer.node_probability, m.CT, m.S, m.MX, m.ST, 1, 0)
    else:
        compile_only(mixer.predict, q, m.CT, m.S, m.MX, m.ST, PROB_FLOOR,
                     np.zeros(ALPHABET, dtype=np.float32))


def compile_only(kernel, *args: object) -> None:
    """Compile (or load) `kernel` for these arguments' types, in the form other kernels call
    (ops/jit.Kernel.for_kernels), without running it."""
    import numba

    kernel.for_kernels().compile(tuple(numba.typeof(a) for a in args))


def _spare_core() -> bool:
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # not on Linux
        return (os.cpu_count() or 1) > 1


@contextlib.contextmanager
def helper(recipe: Recipe, delay: float = HELPER_DELAY) -> Iterator[None]:
    """Around a warm-up: after `delay` seconds, a helper process compiles the recipe's part
    (compile_part: when the network learns, or is mixed with context models; with a second
    core); stopped when the warm-up ends (numba writes each cache file whole, so stopping
    it mid-way costs nothing but its work)."""
    mixed = recipe.mix is not None and recipe.mix.network
    if not (mixed or learns_by_backward(recipe)) or not _spare_core():
        yield
        return
    lock = threading.Lock()
    procs: list[subprocess.Popen] = []
    done = False

    def start() -> None:
        with lock:
            if done:
                return
            # no interpreter to start (an embedded one): the main process compiles alone
            with contextlib.suppress(OSError):
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "rwkvzip.coding.precompile",
                     recipe.to_json().decode()],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))

    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            done = True
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()


def main(argv: list[str]) -> int:
    compile_part(Recipe.from_json(argv[0].encode()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
