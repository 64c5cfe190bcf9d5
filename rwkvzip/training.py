"""Offline training of a network over many documents, for priors (scripts/pretrain.py and
`rwkvzip train`).

It runs exactly the codec's kernels (coding/stepper.py): the online learner the
compressor uses (TBPTT and Adam of the recipe), over documents in a shuffled order for
several epochs, each document from a zero recurrent state as a compressed file starts.
So the trained weights are, by construction, weights of the kernels' own mathematics, and
the validation loss is the ideal code length the frozen network would spend on held-out
files. Training itself need not be deterministic; only the exported bytes matter.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rwkvzip import dictionary
from rwkvzip.coding import eol
from rwkvzip.coding.codec import ENCODE_BLOCK, NetworkPredictor, frame_blocks
from rwkvzip.corpus import Document
from rwkvzip.net import optim
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.bf16 import matrices_exact, round_matrices
from rwkvzip.recipe import NUMERIC_CONTRACT, Recipe, RecipeError

Log = Callable[[str], None]


def frozen(recipe: Recipe) -> Recipe:
    """The network alone with its weights fixed: what validation measures."""
    return replace(recipe, lr=0.0, bptt=0, ckpt=16, recompute=True, mix=None, counts=None)


def document_bits(predictor: NetworkPredictor, data: bytes, rows: np.ndarray) -> float:
    """Ideal code length in bits of one document from a zero state (the predictor learns as
    its recipe says)."""
    predictor.restart()
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    bits = 0.0
    for block in frame_blocks(buf):
        r = rows[:len(block)]
        predictor.run_block(block, r)
        p = r[np.arange(len(block)), block].astype(np.float64)
        bits -= float(np.log2(p).sum())
    return bits


def evaluate(recipe: Recipe, W: np.ndarray, docs: list[Document]) -> float:
    """Bits per byte of the frozen network over the documents (each from a zero state)."""
    total = sum(len(d.data) for d in docs)
    if not total:
        return float("nan")
    predictor = NetworkPredictor(frozen(recipe), W)
    rows = np.empty((ENCODE_BLOCK, ALPHABET), dtype=np.float32)
    return sum(document_bits(predictor, d.data, rows) for d in docs) / total


@dataclass
class TrainState:
    """Where a run stands; saved in checkpoints so a run resumes where it stopped."""

    epoch: int = 0
    doc: int = 0  # next document of this epoch's order
    bytes_trained: int = 0
    seconds: float = 0.0
    history: list[dict] = field(default_factory=list)


def save_checkpoint(path: str | Path, predictor: NetworkPredictor, st: TrainState,
                    recipe: Recipe, avg: np.ndarray | None = None) -> None:
    tmp = Path(str(path) + ".tmp.npz")
    np.savez(tmp, W=predictor.W, O=predictor.O, F=predictor.F,
             A=predictor.W if avg is None else avg,
             meta=np.frombuffer(json.dumps({"state": st.__dict__,
                                            "recipe": recipe.to_dict()}).encode(), np.uint8))
    tmp.replace(path)


def load_checkpoint(path: str | Path, predictor: NetworkPredictor
                    ) -> tuple[TrainState, np.ndarray]:
    """The run's state; the predictor gets its weights, moments and counters. Also returns
    the running average of the weights (the weights themselves in older checkpoints)."""
    with np.load(path) as z:
        predictor.W[:] = z["W"]
        predictor.weights_changed()
        predictor.O[:] = z["O"]
        predictor.F[:] = z["F"]
        avg = z["A"].copy() if "A" in z.files else predictor.W.copy()
        meta = json.loads(bytes(z["meta"]).decode())
    return TrainState(**meta["state"]), avg


def checkpoint_recipe(path: str | Path) -> Recipe:
    with np.load(path) as z:
        return Recipe.from_dict(json.loads(bytes(z["meta"]).decode())["recipe"])


def epoch_order(n: int, epoch: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(n)


def fit(recipe: Recipe, docs: list[Document], *, weights: np.ndarray | None = None,
          seconds: float | None = None, epochs: int | None = None, seed: int = 0,
          checkpoint: str | Path | None = None, checkpoint_every: float = 300.0,
          progress: Callable[[int], None] | None = None, log: Log | None = None,
          on_epoch: Callable[[int, np.ndarray], None] | None = None,
          average: float = 0.0) -> tuple[np.ndarray, TrainState]:
    """Train on the documents of split "train" until `seconds` or `epochs` runs out.

    recipe: the network and its online learner (no mixing); weights: the start (else the
    recipe's seeded init); with `checkpoint`, progress is saved there every
    checkpoint_every seconds and at the end, and a run resumes from it if it exists;
    on_epoch(epoch, W) is called after each complete epoch.

    With `average` (bytes), the result is an exponential moving average of the weights over
    about that many bytes of training, not the last weights: an online learner's weights
    follow the document it has just read (updates over 8 bytes are noisy), which helps
    while it adapts but not a network that must start every stream frozen."""
    if recipe.mix is not None or recipe.counts is not None or recipe.bptt < 1 or recipe.lr <= 0:
        raise RecipeError("training needs a network recipe with bptt >= 1, lr > 0, no mixing")
    if seconds is None and epochs is None:
        raise ValueError("give a time or an epoch bound")
    train_docs = [d for d in docs if d.split == "train" and d.data]
    if not train_docs:
        raise ValueError("no training documents")
    predictor = NetworkPredictor(recipe, weights)
    st = TrainState()
    avg = predictor.W.copy()
    if checkpoint is not None and Path(checkpoint).exists():
        st, avg = load_checkpoint(checkpoint, predictor)
        # the learning-rate schedule is the recipe's (a resumed run may lower it)
        predictor.F[optim.F_LR] = recipe.lr
        predictor.F[optim.F_DECAY] = recipe.decay
        predictor.F[optim.F_LR_MIN] = recipe.lr_min
        if log:
            log(f"resumed at epoch {st.epoch}, document {st.doc}, "
                f"{st.bytes_trained:,} bytes, {st.seconds:.0f} s")
    rows = np.empty((ENCODE_BLOCK, ALPHABET), dtype=np.float32)
    start = time.monotonic() - st.seconds
    last_ckpt = time.monotonic()
    window_bits, window_bytes = 0.0, 0

    def out_of_time() -> bool:
        return seconds is not None and time.monotonic() - start >= seconds

    while (epochs is None or st.epoch < epochs) and not out_of_time():
        order = epoch_order(len(train_docs), st.epoch, seed)
        while st.doc < len(order) and not out_of_time():
            d = train_docs[order[st.doc]]
            bits = document_bits(predictor, d.data, rows)
            if average > 0.0:
                avg += (1.0 - math.exp(-len(d.data) / average)) * (predictor.W - avg)
            window_bits += bits
            window_bytes += len(d.data)
            st.bytes_trained += len(d.data)
            st.doc += 1
            if progress:
                progress(len(d.data))
            if window_bytes >= 1 << 20:
                st.seconds = time.monotonic() - start
                st.history.append({"epoch": st.epoch, "bytes": st.bytes_trained,
                                   "seconds": round(st.seconds, 1),
                                   "train_bpb": round(window_bits / window_bytes, 4)})
                if log:
                    h = st.history[-1]
                    log(f"epoch {h['epoch']} {h['bytes']:,} bytes {h['seconds']:.0f} s "
                        f"train {h['train_bpb']:.4f} bpb")
                window_bits, window_bytes = 0.0, 0
            if checkpoint is not None and time.monotonic() - last_ckpt >= checkpoint_every:
                st.seconds = time.monotonic() - start
                save_checkpoint(checkpoint, predictor, st, recipe, avg)
                last_ckpt = time.monotonic()
        if st.doc >= len(order):
            if on_epoch:
                on_epoch(st.epoch, predictor.W)
            st.epoch += 1
            st.doc = 0
    st.seconds = time.monotonic() - start
    if checkpoint is not None:
        save_checkpoint(checkpoint, predictor, st, recipe, avg)
    if not np.all(np.isfinite(predictor.W)):
        raise FloatingPointError("training diverged (non-finite weights)")
    return (avg.copy() if average > 0.0 else predictor.W.copy()), st


# ---------------------------------------------------------------- rwkvzip train

TRAIN_SECONDS = 600.0  # default bound of `rwkvzip train`
TRAIN_EPOCHS = 20


@dataclass
class TrainReport:
    """What `train` did: the prior made and the validation bpb before and after."""

    prior: bytes  # the prior file's bytes
    digest: str
    start: str  # "shipped prior sha256:..." or "seeded init"
    train_bytes: int
    val_bytes: int
    val_before: float
    val_after: float
    epochs: float
    best_epoch: int
    seconds: float
    dictionary_bytes: int


def tuning_recipe(base: Recipe, from_scratch: bool) -> Recipe:
    """The learner `train` runs on a level's network: TBPTT(8) with Adam, a higher rate from
    a seeded start than when refining a prior; the newest numeric contract and no recompute
    after each update (only the trained weights leave it: ~1.5 x the bytes in its time)."""
    lr = 0.001 if from_scratch else 0.0005
    return replace(base, mix=None, counts=None, prior="", optimizer="adam", beta1=0.0,
                   bptt=8, ckpt=8, lr=lr, decay=1 << 20, lr_min=lr / 10, warmup=0, clip=0.0,
                   contract=NUMERIC_CONTRACT, recompute=False)


def sample_documents(samples: list[str | Path], card: Recipe) -> list[Document]:
    """The samples as training and validation documents, as the level's coder sees text:
    without the CRs of CR LF line ends when its card has eol (coding/eol.py)."""
    from rwkvzip import corpus

    docs = corpus.documents_from_samples(samples)
    if card.eol:
        docs = [replace(d, data=eol.strip(d.data)) for d in docs]
    return docs


def train(samples: list[str | Path], output: str | Path | None = None, *,
          level: int | None = None,
          from_scratch: bool = False, seconds: float | None = TRAIN_SECONDS,
          epochs: int | None = TRAIN_EPOCHS, progress: Callable[[int], None] | None = None,
          log: Log | None = None,
          dictionary_size: int = dictionary.DEFAULT_SIZE) -> TrainReport:
    """Train a prior on sample files or directories (like `zstd --train`) and write it.

    Starts from the level's shipped prior (or its network's seeded init with
    from_scratch), holds out about a tenth of the samples for validation, trains for at
    most `seconds` and `epochs`, and keeps the weights of the epoch with the best
    validation loss; the prior's dictionary (at most `dictionary_size` bytes, 0: none) is
    chosen from the training samples (dictionary.build). When the level runs its shipped
    prior frozen from bfloat16 matrices, the new prior's matrices are rounded so too (the
    validation bpb after is that of the rounded weights). Compress and decompress with the
    file as `prior=` / `-D FILE`. The prior's bytes are in the report; with `output` they
    are also written there (through a temporary file renamed into place)."""
    from rwkvzip import corpus, priors
    from rwkvzip.recipe import DEFAULT_LEVEL, level_recipe

    card = level_recipe(DEFAULT_LEVEL if level is None else level)
    if card.counts is not None or (card.mix is not None and not card.mix.network):
        raise RecipeError("this level runs no network, so it has no prior to train")
    shipped = priors.resolve(card)
    start = None if from_scratch else shipped
    recipe = tuning_recipe(card, from_scratch)
    model = recipe.build_model()
    matrices = model.layout.twin_table()
    # a level that runs a frozen bfloat16 prior gets one: the trained matrices rounded
    # (ops/bf16.py), so that the new prior runs as fast as the shipped one
    bf16 = card.lr == 0.0 and shipped is not None and matrices_exact(shipped.W, matrices)
    docs = sample_documents(samples, card)
    val = [d for d in docs if d.split == "val"]
    t0 = time.monotonic()
    W0 = start.W.copy() if start is not None else model.init_params(recipe.seed)
    t_eval = time.monotonic()
    before = evaluate(recipe, W0, val)
    t_eval = time.monotonic() - t_eval  # the last validation must fit in the time bound too
    best = {"bpb": before, "W": W0.copy(), "epoch": -1}

    def keep_best(epoch: int, W: np.ndarray) -> None:
        bpb = evaluate(recipe, W, val)
        if log:
            log(f"epoch {epoch + 1}: validation {bpb:.4f} bpb")
        if bpb < best["bpb"]:
            best.update(bpb=bpb, W=W.copy(), epoch=epoch)

    last_evals = 2 if bf16 else 1  # the last epoch's, and the rounded weights'
    left = (None if seconds is None
            else max(0.0, seconds - (time.monotonic() - t0) - last_evals * t_eval))
    W, st = fit(recipe, docs, weights=W0, seconds=left, epochs=epochs, progress=progress,
                on_epoch=keep_best)
    if st.doc:  # stopped inside an epoch by the time bound
        keep_best(st.epoch, W)
    if bf16:
        best["W"] = round_matrices(best["W"], matrices)
        best["bpb"] = evaluate(recipe, best["W"], val)
        if log:
            log(f"matrices rounded to bfloat16: validation {best['bpb']:.4f} bpb")
    man = corpus.manifest(docs, [{"name": "samples", "files": len(samples)}])
    chosen = dictionary.build([d.data for d in docs if d.split == "train"],
                              min(dictionary_size, priors.MAX_DICTIONARY))
    info = {"start": "seeded" if start is None else start.digest,
            "train_bytes": man["train_bytes"], "val_bytes": man["val_bytes"],
            "val_bpb_before": round(before, 5), "val_bpb": round(best["bpb"], 5),
            "epochs": round(st.epoch + st.doc / max(1, len(docs) - len(val)), 3),
            "seconds": round(time.monotonic() - t0, 1), "dictionary_bytes": len(chosen)}
    data = priors.prior_bytes(model, best["W"], man["digest"], info, chosen,
                              bf16_matrices=bf16)
    if output is not None:
        tmp = Path(f"{output}.tmp")
        tmp.write_bytes(data)
        tmp.replace(output)
    return TrainReport(data, hashlib.sha256(data).hexdigest(),
                       "seeded init" if start is None else f"prior {priors.short(start.digest)}",
                       man["train_bytes"], man["val_bytes"], before, best["bpb"],
                       info["epochs"], best["epoch"] + 1, info["seconds"], len(chosen))
