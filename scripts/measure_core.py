"""Costs around the model: the decoder's per-byte overhead and start-up time.

    python scripts/measure_core.py
1. Decoder overhead outside the model (Python loop + numba dispatch + constriction), with the
   smallest model: time of decode_frame minus the time numba alone needs for the same steps.
2. Compressing a 1 KB file through the CLI: first with an empty numba cache, then warm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rwkvzip import coder
from rwkvzip.codec import Predictor
from rwkvzip.kernels import stepper
from rwkvzip.kernels.jit import jit
from rwkvzip.recipe import Recipe
from rwkvzip.rwkv7 import Rwkv7Config

SMALLEST = Recipe(model=Rwkv7Config(hidden=64, layers=1, ffn=64, decay_rank=8, a_rank=8,
                                    v_rank=8, g_rank=8), optimizer="sgd", lr=0.01, bptt=0)


@jit
def _no_model(data, probs, record, arch, W, O, G, R, state, tr, P, I, F, toks, ckpt, rs, rt,
              gstate, scratch):
    """Same arguments as stepper.run, no work: isolates the dispatch cost."""
    return data[0]


def decoder_overhead(n: int = 50_000, repeats: int = 3) -> None:
    text = Path(__file__).read_bytes()
    data = (text * (n // len(text) + 1))[:n]
    payload = Predictor(SMALLEST).encode_frame(data)
    best_decode = best_bare = float("inf")
    for _ in range(repeats):
        p = Predictor(SMALLEST)
        t = time.perf_counter()
        assert p.decode_frame(payload, n) == data
        best_decode = min(best_decode, time.perf_counter() - t)
        # the same loop with the model call replaced by a no-op kernel of the same signature,
        # decoding with the true rows recorded beforehand
        p = Predictor(SMALLEST)
        rows = np.empty((n, 256), dtype=np.float32)
        stepper.run(np.frombuffer(data, dtype=np.uint8).copy(), rows, True, p.arch,
                    *p._arrays())
        dec = coder.new_decoder(payload)
        out = bytearray(n)
        one, no_rows, args = np.zeros(1, dtype=np.uint8), p._no_rows, p._arrays()
        decode_one = coder.decode_one
        t = time.perf_counter()
        for i in range(n):
            sym = decode_one(dec, rows[i])
            out[i] = sym
            one[0] = sym
            _no_model(one, no_rows, False, p.arch, *args)
        best_bare = min(best_bare, time.perf_counter() - t)
        assert out == data
    print(f"decoder, smallest model ({n} bytes): {best_decode / n * 1e6:.2f} us/byte in all; "
          f"outside the model (Python loop + dispatch + constriction): "
          f"{best_bare / n * 1e6:.2f} us/byte")


def startup() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "one_kb.txt")
        Path(src).write_bytes(Path(__file__).read_bytes()[:1024])
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "numba-cache"))
        cmd = [sys.executable, "-m", "rwkvzip", "compress", "-f", src]
        for label in ("cold (empty numba cache)", "warm", "warm"):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, env=env)
            print(f"compress 1 KB, {label}: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    decoder_overhead()
    startup()
