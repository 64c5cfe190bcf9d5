"""Prior files: pre-trained network weights that start every stream of a recipe naming them.

A prior is a safetensors file with the model's usual tensor names, its architecture and
config, and rwkvzip's own metadata (format version, training-manifest digest, what it was
trained on, a digest of the weights so damage is caught at load) and, optionally, a
dictionary: sample bytes that every stream starting from the prior learns first, exactly as
if it had coded them (the context models, match model, mixer and network all see them), so
small files of the samples' kind start from a model that knows their vocabulary, as with
`zstd -D`. A prior with a dictionary is format 2 (older rwkvzip refuses it rather than
decode without it). Its identity is the
SHA-256 of the file's bytes: a recipe records it (`Recipe.prior`), a compressed file's
header with it (docs/FORMAT.md), and decoding with a missing or different prior is refused
before any frame. Shipped priors live in rwkvzip.models (models/*.safetensors).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from rwkvzip.modelfile import model_bytes, model_from_tensors
from rwkvzip.net.params import ModelFileError, parse_safetensors
from rwkvzip.recipe import Recipe, RecipeError

PRIOR_FORMAT = "1"
PRIOR_FORMAT_DICT = "2"  # a prior with a dictionary
KEY_FORMAT = "rwkvzip_prior"  # prior format version: what makes a safetensors file a prior
KEY_WEIGHTS = "rwkvzip_weights_sha256"  # SHA-256 of the float32 weights, layout order
KEY_DICTIONARY = "rwkvzip_dictionary_sha256"  # SHA-256 of the dictionary's bytes
DICTIONARY_TENSOR = "rwkvzip.dictionary"  # U8[n]: the dictionary (format 2)
MAX_DICTIONARY = 1 << 20  # bytes: every stream learns them first, so they cost start-up time
KEY_MANIFEST = "rwkvzip_manifest_sha256"  # digest of the training manifest (corpus.py)
KEY_TRAINING = "rwkvzip_training"  # JSON: data, epochs, time, validation bpb, version
SUFFIX = ".safetensors"


class PriorError(ValueError):
    """A prior that cannot be used: not a prior, damaged, missing or not the one needed."""


@dataclass(frozen=True)
class Prior:
    digest: str  # SHA-256 of the file, hex: the prior's identity
    name: str  # where it came from (a path, or a shipped file's name)
    model: object  # Rwkv7Model | GdnModel
    W: np.ndarray  # float32 weights in the flat layout
    metadata: dict[str, str]
    dictionary: bytes = b""  # learnt before the first byte of every stream (format 2)

    @property
    def training(self) -> dict:
        try:
            return json.loads(self.metadata.get(KEY_TRAINING, "{}"))
        except json.JSONDecodeError:
            return {}

    def matches(self, recipe: Recipe) -> bool:
        return self.model.arch == recipe.arch and self.model.cfg == recipe.model


def short(digest: str) -> str:
    return f"sha256:{digest[:16]}"


def weights_digest(W: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(W, dtype=np.float32).tobytes()).hexdigest()


def parse_prior(data: bytes, name: str) -> Prior:
    """A prior from a file's bytes; any other or damaged file is a PriorError."""
    try:
        tensors, metadata = parse_safetensors(data, name)
    except ModelFileError as exc:
        reason = str(exc).removeprefix(f"{name}: ")
        raise PriorError(f"{name}: not an rwkvzip prior ({reason})") from None
    version = metadata.get(KEY_FORMAT)
    if version not in (PRIOR_FORMAT, PRIOR_FORMAT_DICT):
        raise PriorError(f"{name}: not an rwkvzip prior (a safetensors file without "
                         f"{KEY_FORMAT}={PRIOR_FORMAT} or {PRIOR_FORMAT_DICT} metadata)")
    dictionary = tensors.pop(DICTIONARY_TENSOR, None)
    if (version == PRIOR_FORMAT_DICT) != (dictionary is not None):
        raise PriorError(f"{name}: damaged prior (format {version} "
                         f"{'needs' if dictionary is None else 'has no'} a dictionary)")
    if dictionary is not None:
        if dictionary.dtype != np.uint8 or dictionary.ndim != 1 or not dictionary.size:
            raise PriorError(f"{name}: damaged prior (its dictionary is not bytes)")
        dictionary = dictionary.tobytes()
        if metadata.get(KEY_DICTIONARY) != hashlib.sha256(dictionary).hexdigest():
            raise PriorError(f"{name}: damaged prior (its dictionary does not match its "
                             "digest)")
    try:
        model, W = model_from_tensors(tensors, metadata, name)
    except ModelFileError as exc:
        raise PriorError(str(exc)) from None
    if metadata.get(KEY_WEIGHTS) != weights_digest(W):
        raise PriorError(f"{name}: damaged prior (its weights do not match their digest)")
    W.flags.writeable = False
    return Prior(hashlib.sha256(data).hexdigest(), name, model, W, metadata,
                 dictionary or b"")


def load_prior(source: str | Path | bytes | Prior) -> Prior:
    """A prior from a path, the bytes of a file, or a Prior already loaded."""
    if isinstance(source, Prior):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse_prior(bytes(source), "<prior bytes>")
    try:
        data = Path(source).read_bytes()
    except OSError as exc:
        raise PriorError(f"{source}: {exc.strerror or exc}") from None
    return parse_prior(data, str(source))


def prior_bytes(model, W: np.ndarray, manifest_digest: str, training: dict,
                dictionary: bytes = b"", bf16_matrices: bool = False) -> bytes:
    """The bytes of a prior file (its SHA-256 is its identity); with a dictionary, format 2;
    with `bf16_matrices`, matrices that are bfloat16 values stored as BF16 (half the
    bytes; the codec then runs a frozen network from a bfloat16 copy, ops/bf16.py)."""
    W = np.ascontiguousarray(W, dtype=np.float32)
    if not np.all(np.isfinite(W)):
        raise PriorError("refusing to save non-finite weights")
    if len(dictionary) > MAX_DICTIONARY:
        raise PriorError(f"a dictionary holds at most {MAX_DICTIONARY} bytes")
    from rwkvzip import __version__

    extra = {KEY_FORMAT: PRIOR_FORMAT_DICT if dictionary else PRIOR_FORMAT,
             KEY_WEIGHTS: weights_digest(W), KEY_MANIFEST: manifest_digest,
             KEY_TRAINING: json.dumps({**training, "rwkvzip": __version__}, sort_keys=True)}
    more = {}
    if dictionary:
        extra[KEY_DICTIONARY] = hashlib.sha256(dictionary).hexdigest()
        more[DICTIONARY_TENSOR] = np.frombuffer(dictionary, dtype=np.uint8)
    try:
        return model_bytes(model, W, extra, more, bf16_matrices)
    except ValueError as exc:
        raise PriorError(str(exc)) from None


def save_prior(path: str | Path, model, W: np.ndarray, manifest_digest: str,
               training: dict, dictionary: bytes = b"", bf16_matrices: bool = False) -> str:
    """Write a prior file; returns its digest."""
    data = prior_bytes(model, W, manifest_digest, training, dictionary, bf16_matrices)
    Path(path).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=1)
def _shipped() -> dict[str, str]:
    """digest -> file name of every prior shipped in rwkvzip.models (hashes only)."""
    out = {}
    for entry in resources.files("rwkvzip.models").iterdir():
        if entry.name.endswith(SUFFIX):
            out[hashlib.sha256(entry.read_bytes()).hexdigest()] = entry.name
    return out


@lru_cache(maxsize=8)
def shipped_prior(digest: str) -> Prior | None:
    name = _shipped().get(digest)
    if name is None:
        return None
    return parse_prior(resources.files("rwkvzip.models").joinpath(name).read_bytes(), name)


def resolve(recipe: Recipe, given: Prior | None = None) -> Prior | None:
    """The prior a recipe starts from: the one given (it must be the recipe's) or a shipped
    one; None for a recipe without a prior. Refuses a missing or different prior in one
    line naming the digest the recipe needs."""
    if not recipe.prior:
        return None
    if given is not None and given.digest == recipe.prior:
        prior = given
    else:
        prior = shipped_prior(recipe.prior)
        if prior is None:
            if given is not None:
                raise PriorError(f"this data needs the prior sha256:{recipe.prior}, not "
                                 f"{given.name} ({short(given.digest)})")
            raise PriorError(f"this data needs the prior sha256:{recipe.prior}, which is not "
                             "shipped with this rwkvzip: give it with --prior FILE")
    if not prior.matches(recipe):
        raise PriorError(f"prior {short(prior.digest)} is a {prior.model.arch} network of "
                         "another size than the recipe says")
    return prior


def with_prior(recipe: Recipe, prior: Prior) -> Recipe:
    """The recipe starting from `prior`: its network takes the prior's architecture and size."""
    if recipe.counts is not None or (recipe.mix is not None and not recipe.mix.network):
        raise RecipeError("this level runs no network, so it takes no prior (use -4 ... -9)")
    return replace(recipe, arch=prior.model.arch, model=prior.model.cfg, prior=prior.digest)
