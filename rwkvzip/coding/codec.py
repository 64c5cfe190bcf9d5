"""The per-byte loops: a Predictor holds one model's live arrays; frames are coded through it.

The encoder runs a block of bytes inside numba and codes the rows in one batched call; the
decoder runs a block inside numba too, decoding each byte in the kernel (coder.take_byte).
Both use the same kernels.

`Predictor(recipe)` gives the predictor of the recipe's kind, each with the same interface
(encode_frame, learn_frame, decode_frame): NetworkPredictor runs the network, alone or mixed
with context models (coding/stepper.py); CountsPredictor the count models of a recipe with
`counts` (cm/counts.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from rwkvzip.cm import counts
from rwkvzip.cm.fastcm import CountArrays
from rwkvzip.cm.mixing import MixArrays
from rwkvzip.coding import coder, precompile, stepper
from rwkvzip.net import optim
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.bf16 import NO_COPY, bf16_copy, copy_pays
from rwkvzip.ops.linalg import refresh_twins
from rwkvzip.recipe import ARCHS, PROB_FLOOR, Recipe

WARM_UP = b"warm up, once"  # what warm_up codes
# bytes per kernel call, counted from a frame's start by every side that advances a model
# over a frame (encode, decode, learn): bounds the probability buffer to 4 MB, and the
# calls' transform (cm/exe.py) takes only words wholly inside one call's block
ENCODE_BLOCK = 4096
Progress = Callable[[int], None]  # told the number of bytes just coded, every few KB


def frame_blocks(buf: np.ndarray) -> Iterator[np.ndarray]:
    """The views of a frame's bytes that every side advances a model over, one kernel call
    each: ENCODE_BLOCK bytes from the frame's start."""
    for lo in range(0, len(buf), ENCODE_BLOCK):
        yield buf[lo:lo + ENCODE_BLOCK]


def scope_table(layout, scope: str, matrices: bool = True) -> np.ndarray:
    """[start, end, train] rows covering the whole parameter vector, for optim (without
    `matrices`: all but the input-major matrices, whose gradients a backward records)."""
    groups = set(scope.split("+"))
    rows: list[list[int]] = []
    for spec in layout.specs:
        if not matrices and spec.input_major_matrix:
            continue
        train = int(spec.group in groups)
        end = spec.offset + spec.size
        if rows and rows[-1][2] == train and rows[-1][1] == spec.offset:
            rows[-1][1] = end
        else:
            rows.append([spec.offset, end, train])
    return np.array(rows, dtype=np.int64)


class Predictor:
    """A model learning online from a seeded start; encoder and decoder each hold one.

    Predictor(recipe) builds the subclass that runs the recipe's kind of model."""

    def __new__(cls, recipe: Recipe, weights: np.ndarray | None = None):
        if cls is Predictor:
            cls = CountsPredictor if recipe.counts is not None else NetworkPredictor
        return super().__new__(cls)

    def encode_frame(self, data: bytes, progress: Progress | None = None) -> bytes:
        """Range-coded payload of one frame; the model advances over its bytes."""
        enc = coder.new_encoder()
        buf = np.frombuffer(data, dtype=np.uint8).copy()  # writable: one kernel signature
        probs = np.empty((min(ENCODE_BLOCK, len(buf)), self.row_width), dtype=np.float32)
        for block in frame_blocks(buf):
            rows = probs[:len(block)]
            self.run_block(block, rows)
            coder.encode_rows(self.symbols(block), rows, enc)
            if progress:
                progress(len(block))
        return coder.finish(enc)

    # the coder's rows: a byte's distribution, or with path coding (mix field path_coding)
    # three entries whose middle symbol is the byte's share of the range (coder.path_row)
    row_width = ALPHABET

    def stand_ins(self) -> None:
        """The rows and decoder arguments of kernel calls that record or decode nothing."""
        self._no_rows = np.zeros((1, ALPHABET), dtype=np.float32)
        self._no_decoder = coder.no_decoder()

    def symbols(self, block: np.ndarray) -> np.ndarray:
        """The symbol coded for each byte of a block, in its row."""
        if self.row_width == ALPHABET:
            return block
        return np.full(len(block), coder.PATH_SYMBOL, dtype=np.int32)

    def run_block(self, block: np.ndarray, rows: np.ndarray) -> None:
        """Advance over the block's bytes (in numba); rows[t] gets the row byte t is coded
        with."""
        self.advance(block, rows, coder.RECORD, self._no_decoder)

    def byte_shares(self, block: np.ndarray) -> np.ndarray:
        """The share of the range each byte of the block is coded with (float64), advancing
        over it: its probability, or of a path row its units over 2^24, exactly as coded.
        For reports (scripts/costs.py: -log2 of it is the byte's code length); nothing that
        codes reads it."""
        rows = np.empty((len(block), self.row_width), dtype=np.float32)
        self.run_block(block, rows)
        if self.row_width == ALPHABET:
            return rows[np.arange(len(block)), block].astype(np.float64)
        return (rows[:, coder.PATH_SYMBOL].astype(np.float64) + 1.0) / coder.TOTAL

    def learn_frame(self, data: bytes) -> None:
        """Advance over bytes stored uncoded, exactly as encoding them would have."""
        buf = np.frombuffer(data, dtype=np.uint8).copy()
        for block in frame_blocks(buf):
            self.advance(block, self._no_rows, coder.ADVANCE, self._no_decoder)

    def decode_frame(self, payload: bytes, raw_len: int,
                     progress: Progress | None = None) -> bytes:
        """The frame's bytes, decoded inside the model's kernel a block at a time."""
        decoder = coder.new_decoder(payload)
        out = np.zeros(raw_len, dtype=np.uint8)
        for block in frame_blocks(out):
            if self.advance(block, self._no_rows, coder.DECODE, decoder) != len(block):
                raise coder.CoderError("the payload is not a range-coder stream of this model")
            if progress:
                progress(len(block))
        return out.tobytes()

    def advance(self, block: np.ndarray, rows: np.ndarray, io: int, decoder: tuple) -> int:
        """Run the model's block kernel over `block` doing `io` with each byte
        (coder.take_byte); the bytes advanced over."""
        raise NotImplementedError

    def state_arrays(self) -> list[np.ndarray]:
        """Every array the block kernel is given, once each, in a fixed order: the model's
        whole state (what coding changes), which coding/snapshot.py keeps and restores."""
        raise NotImplementedError


def training_mode(recipe: Recipe) -> int:
    """The stepper's mode (stepper.MODE_*) a network recipe runs in."""
    if recipe.mix is not None and not recipe.mix.network:
        return stepper.MODE_NONE
    if recipe.lr == 0.0:
        return stepper.MODE_FROZEN
    if recipe.bptt >= 2:
        return stepper.MODE_TBPTT
    return stepper.MODE_BPTT1 if recipe.bptt == 1 else stepper.MODE_HEAD


def entry_point(recipe: Recipe):
    """The stepper kernel a network recipe codes with (stepper.ENTRY_POINTS): by its
    architecture (none without a network), coding (path or byte rows), and whether the
    network learns (run) or not (run_fixed, which compiles without the training code)."""
    network = recipe.mix is None or recipe.mix.network
    arch = ARCHS[recipe.arch][1].arch_id if network else stepper.ARCH_NONE
    path = recipe.mix is not None and recipe.mix.path_coding
    run, run_fixed = stepper.ENTRY_POINTS[arch, path]
    return run if network_learns(recipe) else run_fixed


def network_learns(recipe: Recipe) -> bool:
    """Whether a network recipe's network learns (no network, or a frozen one, does not)."""
    return training_mode(recipe) not in (stepper.MODE_NONE, stepper.MODE_FROZEN)


def network_buffers(recipe: Recipe) -> dict[str, tuple[tuple[int, ...], type]]:
    """Shape and dtype of each array a NetworkPredictor allocates for its network (weights,
    optimizer, state, TBPTT buffers): one source for the predictor and its memory estimate."""
    model = recipe.build_model()
    n, ns, nt = model.layout.size, model.state_size, model.trace_size
    whole, tbptt = recipe.bptt >= 1, recipe.bptt >= 2
    matrices = model.layout.twin_table()  # what the backward's record keeps (net/gradrec.py)
    K = min(recipe.ckpt, recipe.bptt) if tbptt else 1
    n_chunks = -(-recipe.bptt // K) if tbptt else 1
    f32 = np.float32
    return {
        "W": ((n,), f32),
        # the frozen network's bfloat16 copy, kept when its matrices are bfloat16 values
        "W16": ((n if training_mode(recipe) == stepper.MODE_FROZEN else 0,), np.uint16),
        "O": ((2, n if recipe.optimizer == "adam" else 1), f32),
        "G": ((n if whole else 1,), f32),
        "state": ((ns,), f32),
        "trace": ((nt,), f32),
        "toks": ((max(recipe.bptt, 1) + 1,), np.int64),
        "ckpt": ((n_chunks, ns if tbptt else 1), f32),
        "rs": ((K + 1, ns), f32),
        "rt": ((K, nt) if tbptt else (1, 1), f32),
        "gstate": ((ns if whole else 1,), f32),
        "scratch": ((model.backward_scratch_size() if whole else 1,), f32),
        "WT": ((n if tbptt else 0,), f32),
        "REC": ((max(recipe.bptt, 1), int(matrices[:, 1:3].sum())) if whole else (0, 0), f32),
        "TAB": ((len(matrices) if whole else 0, 4), np.int64),
        "CUR": ((3,), np.int64),
    }


def network_bytes(recipe: Recipe) -> int:
    """Bytes of the arrays network_buffers describes, and of the context-mixing tables."""
    arrays = sum(math.prod(shape) * np.dtype(dtype).itemsize
                 for shape, dtype in network_buffers(recipe).values())
    return arrays + (recipe.mix.memory_bytes(recipe.bptt) if recipe.mix is not None else 0)


class NetworkPredictor(Predictor):
    """The network (RWKV-7 or GDN), alone or mixed with context models (`mix`)."""

    def __init__(self, recipe: Recipe, weights: np.ndarray | None = None):
        """weights: the starting parameters (a prior's), else the recipe's seeded init."""
        recipe.validate()
        self.recipe = recipe
        model = recipe.build_model()
        self.model = model
        K = min(recipe.ckpt, recipe.bptt) if recipe.bptt >= 2 else 1
        F = np.zeros(optim.N_F, dtype=np.float64)
        F[optim.F_LR] = recipe.lr
        F[optim.F_BETA1] = recipe.beta1
        F[optim.F_BETA2] = recipe.beta2
        F[optim.F_EPS] = recipe.eps
        F[optim.F_OPT] = optim.OPT_ADAM if recipe.optimizer == "adam" else optim.OPT_SGD
        F[optim.F_B1POW] = 1.0
        F[optim.F_B2POW] = 1.0
        F[optim.F_FLOOR] = PROB_FLOOR
        F[optim.F_CLIP] = recipe.clip
        F[optim.F_WARMUP] = recipe.warmup
        F[optim.F_DECAY] = recipe.decay
        F[optim.F_LR_MIN] = recipe.lr_min
        F[optim.F_MODE] = training_mode(recipe)
        F[optim.F_MIX] = float(recipe.mix is not None)
        F[optim.F_BPTT] = recipe.bptt
        F[optim.F_CKPT] = K
        F[optim.F_RECOMPUTE] = float(recipe.recompute)
        self.F = F
        buffers = network_buffers(recipe)
        for name, (shape, dtype) in buffers.items():  # self.O, self.G, self.state, ...
            if name not in ("W", "W16"):
                setattr(self, name, np.zeros(shape, dtype=dtype))
        if weights is None:
            self.W = model.init_params(recipe.seed)
        else:
            if weights.shape != buffers["W"][0] or weights.dtype != np.float32:
                raise ValueError(f"starting weights must be float32[{model.layout.size}] for "
                                 "this model")
            self.W = weights.copy()
        if recipe.mix is not None and recipe.mix.path_coding:
            self.row_width = coder.PATH_ROW
        self.R = scope_table(model.layout, recipe.scope)
        self.RV = scope_table(model.layout, recipe.scope, matrices=False)
        self.probs = np.zeros(ALPHABET, dtype=np.float32)  # the distribution of the next byte
        self.index = model.index
        self.stand_ins()
        self._no_data = np.zeros(0, dtype=np.uint8)  # `run` with `start` alone
        if recipe.mix is not None:
            m = MixArrays(recipe.mix, recipe.bptt, frozen=recipe.lr == 0.0)
            self.mixing = stepper.Mixing(m.CT, m.HB, m.S, m.MX, m.ST)
        else:  # one-element stand-ins keep a single kernel signature
            self.mixing = stepper.Mixing(np.zeros(1, np.uint32), np.zeros(1, np.uint8),
                                         np.zeros(1, np.int64), np.zeros(1, np.float32),
                                         np.zeros(1, np.float32))
        self.W16 = NO_COPY
        self.net = stepper.Net(self.W, self.state, self.trace, self.probs, self.index, self.F,
                               self.W16)
        self.training = stepper.Training(self.O, self.G, self.R, self.RV, self.toks, self.ckpt,
                                         self.rs, self.rt, self.gstate, self.scratch, self.WT,
                                         model.layout.twin_table(),
                                         (self.REC, self.TAB, self.CUR))
        bundles = ((self.net, self.training, self.mixing) if network_learns(recipe)
                   else (self.net, self.mixing))
        self._kernel = entry_point(recipe), bundles
        self.weights_changed()
        self.begin()

    def weights_changed(self) -> None:
        """Call after writing into W from outside the kernels: the backward's twins follow,
        and so does a frozen network's bfloat16 copy (kept when its matrices are bfloat16
        values and the copy is faster on this CPU, ops/bf16.py: the same bits)."""
        if self.WT.size:
            refresh_twins(self.W, self.WT, self.training.twins)
        if training_mode(self.recipe) == stepper.MODE_FROZEN:
            copy = bf16_copy(self.W, self.model.layout.twin_table())
            self.W16 = copy if copy.size and copy_pays() else NO_COPY
            self.net = self.net._replace(W16=self.W16)
            self._kernel = self._kernel[0], (self.net,) + self._kernel[1][1:]

    def restart(self) -> None:
        """A new document: zero recurrent state, same weights and optimizer (for training)."""
        self.state[:] = 0.0
        self.F[optim.F_SEGPOS] = 0.0
        self.begin()

    def begin(self) -> None:
        """Predict the first byte from the current weights and state."""
        run, arrays = self.kernel()
        run(self._no_data, self._no_rows, coder.ADVANCE, True, *arrays, self._no_decoder)

    def kernel(self) -> tuple:
        """The block kernel of this arch and its bundles after (data, probs, io, start):
        run_fixed when the network does not learn (it compiles without the training code),
        else run."""
        return self._kernel

    def advance(self, block: np.ndarray, rows: np.ndarray, io: int, decoder: tuple) -> int:
        run, arrays = self.kernel()
        return run(block, rows, io, False, *arrays, decoder)

    def state_arrays(self) -> list[np.ndarray]:
        return _unique_arrays(self.kernel()[1])


class CountsPredictor(Predictor):
    """Count models of several orders and a match model, linearly mixed (recipe `counts`)."""

    def __init__(self, recipe: Recipe, weights: np.ndarray | None = None):
        if weights is not None:
            raise ValueError("count models take no starting weights")
        recipe.validate()
        self.recipe = recipe
        self.arrays = CountArrays(recipe.counts, PROB_FLOOR)
        self.probs = self.arrays.probs
        self.stand_ins()

    def advance(self, block: np.ndarray, rows: np.ndarray, io: int, decoder: tuple) -> int:
        a = self.arrays
        return counts.run(block, rows, io, a.C, a.S, a.W, a.HB, decoder)

    def state_arrays(self) -> list[np.ndarray]:
        a = self.arrays
        return _unique_arrays((a.C, a.S, a.W, a.HB))


def _unique_arrays(bundles: tuple) -> list[np.ndarray]:
    """The arrays in nested tuples, depth first, each once (bundles share some)."""
    out: list[np.ndarray] = []
    seen: set[int] = set()
    stack = [bundles]
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            if id(item) not in seen:
                seen.add(id(item))
                out.append(item)
        elif isinstance(item, tuple):
            stack.extend(reversed(item))
    return out


def warm_up(recipe: Recipe, decoding: bool = True) -> None:
    """Compile (or load from the on-disk cache) every kernel that coding (and decoding, if
    `decoding`) with this recipe call, on a few bytes and the smallest tables, so the real
    predictor then starts at full speed; when compiling, a helper process compiles the
    mixing kernels meanwhile (precompile.helper). Lets the command line say when it
    compiles and time the coding alone."""
    small = precompile.small_recipe(recipe)
    with precompile.helper(recipe):
        payload = Predictor(small).encode_frame(WARM_UP)
        if decoding:
            decoder = Predictor(small)
            decoder.decode_frame(payload, len(WARM_UP))
            decoder.learn_frame(WARM_UP)  # a stored frame
