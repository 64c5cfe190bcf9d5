"""What the context-model tests share: a recipe's payload without its header, and the
mixing state after learning some bytes (the data models' tests compare both)."""

from __future__ import annotations

import io

import numpy as np

from rwkvzip import api
from rwkvzip.cm import mixer
from rwkvzip.cm.context import S_CTX, S_HIST, S_K
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.coding import container, stepper
from rwkvzip.recipe import Recipe


def payload(data: bytes, mix: MixConfig) -> bytes:
    """The frames after the header (the header spells out the recipe)."""
    blob = api.compress(data, Recipe(mix=mix))
    f = io.BytesIO(blob)
    container.read_header(f)
    return blob[f.tell():]


def fed(data: bytes, mix: MixConfig) -> MixArrays:
    """The mixing state after learning every byte of data."""
    arrays = MixArrays(mix, 1)
    mixing = stepper.Mixing(arrays.CT, arrays.HB, arrays.S, arrays.MX, arrays.ST)
    P = np.zeros(256, dtype=np.float32)
    q = np.zeros(256, dtype=np.float32)
    for byte in data:
        mixer.predict(q, arrays.CT, arrays.S, arrays.MX, arrays.ST, 1e-6, P)
        stepper.learn_mixing(byte, 0, mixing, False)
    return arrays


def slots_changed(data: bytes, live: MixConfig, plain: MixConfig) -> list[int]:
    """For each context slot, whether learning data under `live` left it another context
    than under `plain` (1) or the same (0)."""
    a, b = fed(data, live).S, fed(data, plain).S
    k = a[S_K]
    return [int(x != y) for x, y in zip(a[S_CTX:S_CTX + k], b[S_CTX:S_CTX + k], strict=True)]


def instruction_lengths(data: bytes, mix: MixConfig, read_byte, start: int) -> list[int]:
    """The instructions' lengths an instruction follower (riscv.py's, s390x.py's,
    thumb.py's read_byte, with S[start] where the current instruction starts) finds in
    data, followed from its first byte."""
    S = MixArrays(mix, 1).S
    found, begun, hist = [], 0, 0
    for n, c in enumerate(data, 1):
        hist = ((hist << 8) | c) & ((1 << 48) - 1)
        read_byte(S, hist, n)
        if S[start] == n:
            found.append(n - begun)
            begun = n
    return found


def parsed(data: bytes, mix: MixConfig, read_byte, *slots: int) -> list[tuple[int, ...]]:
    """For each byte of data, the state's `slots` before a format parser (jvm.py's,
    pyc.py's, wasm.py's read_byte(S, byte, n)) takes it, followed from the first byte."""
    S = MixArrays(mix, 1).S
    seen, hist = [], 0
    for n, c in enumerate(data, 1):
        seen.append(tuple(int(S[i]) for i in slots))
        hist = ((hist << 8) | c) & ((1 << 56) - 1)  # as context.next_contexts keeps it
        S[S_HIST] = hist
        read_byte(S, c, n)
    return seen


def coded_as_learned(data: bytes, recipe: Recipe) -> bool:
    """Whether coding the data as one frame and learning it uncoded (a stored frame) leave
    the same context models, and the data decodes: a model's transform of the bytes in
    the codec's blocks (exe.py's, x86.py's) must leave every side alike."""
    from rwkvzip.coding import codec

    coded, learned = codec.Predictor(recipe), codec.Predictor(recipe)
    coded.encode_frame(data)
    learned.learn_frame(data)
    return (np.array_equal(coded.mixing.S, learned.mixing.S)
            and np.array_equal(coded.mixing.CT, learned.mixing.CT)
            and api.decompress(api.compress(data, recipe)) == data)
