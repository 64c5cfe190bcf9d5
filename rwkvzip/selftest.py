"""Known-answer self-test: golden vectors shipped with the package prove that this machine
writes and reads the same files as every other.

A vector is a recipe (a preset card, or a spelled-out recipe for an architecture that has no
card) and the SHA-256 of a golden input compressed with it; the compressed file itself is
shipped too. A mixing card's models speak on several kinds of data (the 1-bit image model,
the spreadsheet record model, the executable model), so it codes EXE_INPUT, which holds each
kind; a card with eol also codes EOL_INPUT, CRLF text (`inputs_for`).
`rwkvzip selftest` compresses the input and compares the digest (writes the same bytes),
and decompresses the shipped file and compares it with the input (reads files made
elsewhere). A vector is never rewritten: a changed digest is a determinism failure.
`scripts/make_golden.py` adds vectors for new cards and architectures.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rwkvzip import api
from rwkvzip.coding import container
from rwkvzip.coding.container import FormatError
from rwkvzip.recipe import (
    ARCHS,
    DEFAULT_PRESET,
    Recipe,
    preset_by_name,
    preset_cards,
    with_overrides,
)

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

MANIFEST = "manifest.json"
INPUT = "input.bin"
# the golden input, a small bitmap, a small BIFF worksheet and a small SPARC-like executable
EXE_INPUT = "input-exe.bin"
# the golden input's text and code with CR LF line ends: one frame of CRLF text, which cards
# with eol code as LF text
EOL_INPUT = "input-crlf.bin"


def golden_dir() -> Traversable:
    """The vectors shipped inside the installed package."""
    return resources.files("rwkvzip") / "golden"


@dataclass(frozen=True)
class Vector:
    name: str
    recipe: Recipe
    sha256: str
    preset: str | None = None  # the card's name, when the recipe is a preset card's
    input: str = INPUT  # the file of the input it codes

    def blob_name(self) -> str:
        return f"{self.name}.rwkz"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _vector(entry: dict) -> Vector:
    preset = entry.get("preset")
    recipe = preset_by_name(preset).recipe if preset else Recipe.from_dict(entry["recipe"])
    return Vector(entry["name"], recipe, entry["sha256"], preset, entry.get("input", INPUT))


def inputs_for(recipe: Recipe) -> list[tuple[str, str]]:
    """(name suffix, golden input) of each vector a new card or recipe gets."""
    if recipe.eol:
        return [("", EOL_INPUT), ("-exe", EXE_INPUT)]
    return [("", EXE_INPUT if recipe.mix is not None else INPUT)]


def load(directory: Traversable | None = None) -> tuple[bytes, list[Vector]]:
    """The golden input (checked against its digest) and the vectors."""
    directory = directory or golden_dir()
    manifest = json.loads((directory / MANIFEST).read_text())
    return load_input(directory, INPUT), [_vector(e) for e in manifest["vectors"]]


def load_input(directory: Traversable, name: str) -> bytes:
    """One golden input, checked against the digest in the manifest."""
    manifest = json.loads((directory / MANIFEST).read_text())
    digest = (manifest["input_sha256"] if name == INPUT
              else manifest.get("inputs", {}).get(name))
    data = (directory / name).read_bytes()
    if _sha(data) != digest:
        raise ValueError(f"golden input {name} is damaged (its SHA-256 differs)")
    return data


def check(vector: Vector, data: bytes, directory: Traversable | None = None) -> list[str]:
    """What is wrong with one vector on this machine (nothing: an empty list)."""
    directory = directory or golden_dir()
    problems = []
    written = api.compress(data, recipe=vector.recipe)
    if _sha(written) != vector.sha256:
        problems.append("compresses to different bytes")
    blob = (directory / vector.blob_name()).read_bytes()
    if _sha(blob) != vector.sha256:
        problems.append(f"shipped file {vector.blob_name()} is damaged")
    else:
        try:
            if api.decompress(blob) != data:
                problems.append("decompresses the shipped file to different data")
        except FormatError as exc:
            problems.append(f"cannot decompress the shipped file ({exc})")
    return problems


def run(verbose: bool = False, directory: Traversable | None = None,
        out: TextIO | None = None) -> bool:
    """Check every vector and say plainly whether this machine agrees; True if it does."""
    out = out or sys.stdout
    start = time.monotonic()
    directory = directory or golden_dir()
    data, vectors = load(directory)
    inputs = {INPUT: data}
    failed = []
    for vector in vectors:
        t0 = time.monotonic()
        if vector.input not in inputs:
            inputs[vector.input] = load_input(directory, vector.input)
        problems = check(vector, inputs[vector.input], directory)
        if problems:
            failed.append(vector.name)
        if verbose or problems:
            status = "; ".join(problems) or "writes and reads the golden file"
            print(f"  {vector.name:<10} {status} ({time.monotonic() - t0:.1f} s)", file=out)
    names = ", ".join(v.name for v in vectors)
    seconds = time.monotonic() - start
    if failed:
        print(f"selftest FAILED for {', '.join(failed)}: this machine does NOT produce or read "
              "the same files as everyone else; files made here may not decompress elsewhere. "
              "Please report it with `rwkvzip -V` and your CPU and OS.", file=out)
        return False
    print(f"selftest passed: this machine writes and reads the same files as everyone else "
          f"({len(vectors)} golden vectors: {names}; {seconds:.1f} s)", file=out)
    return True


def missing(vectors: list[Vector]) -> list[tuple[str, Recipe, str | None, str]]:
    """(name, recipe, preset, input) of every vector that a released preset card, or one
    recipe for each architecture, still lacks (a draft card gets its vector at release)."""
    have = {v.name for v in vectors}
    todo = [(card.name + suffix, card.recipe, card.name, source)
            for card in sorted(preset_cards().values(), key=lambda c: c.id) if not card.draft
            for suffix, source in inputs_for(card.recipe) if card.name + suffix not in have]
    covered = {v.recipe.arch for v in vectors} | {r.arch for _, r, _, _ in todo}
    for arch in ARCHS:
        if arch not in covered:
            recipe = with_overrides(preset_by_name(DEFAULT_PRESET).recipe, arch=arch)
            todo += [(f"arch-{arch}{suffix}", recipe, None, source)
                     for suffix, source in inputs_for(recipe)]
    return todo


def add_missing(directory: Path) -> list[str]:
    """Add vectors (and their files) for what `missing` lists; existing vectors and the
    input are never rewritten. The names added."""
    manifest = json.loads((directory / MANIFEST).read_text())
    _, vectors = load(directory)
    added = []
    for name, recipe, preset, source in missing(vectors):
        blob = api.compress(load_input(directory, source), recipe=recipe)
        if _stores_raw(blob):
            raise ValueError(f"{name}: the golden input is stored, not coded, so the vector "
                             "would not test the arithmetic; give it a recipe that learns")
        if source == EOL_INPUT and not _codes_crlf(blob):
            raise ValueError(f"{name}: no frame of the golden input is coded as CRLF text")
        path = directory / f"{name}.rwkz"
        if path.exists():
            raise FileExistsError(f"{path} exists but is not in {MANIFEST}")
        path.write_bytes(blob)
        entry = {"name": name, "sha256": _sha(blob)}
        entry.update({"preset": preset} if preset else {"recipe": recipe.to_dict()})
        if source != INPUT:
            entry["input"] = source
        manifest["vectors"].append(entry)
        added.append(name)
    if added:
        (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return added


def _frames(blob: bytes) -> list[container.Frame]:
    f = io.BytesIO(blob)
    recipe = container.read_header(f)
    return list(container.read_frames(f, recipe.eol, recipe.bypass))


def _stores_raw(blob: bytes) -> bool:
    return any(frame.stored for frame in _frames(blob))


def _codes_crlf(blob: bytes) -> bool:
    return any(frame.crlf for frame in _frames(blob))


def add_input(directory: Path, name: str, data: bytes) -> None:
    """Ship a second golden input (never rewritten: one that exists must be the same)."""
    manifest = json.loads((directory / MANIFEST).read_text())
    inputs = manifest.setdefault("inputs", {})
    if name in inputs:
        if inputs[name] != _sha(data):
            raise FileExistsError(f"golden input {name} exists with other bytes; inputs are "
                                  "never rewritten")
        return
    (directory / name).write_bytes(data)
    inputs[name] = _sha(data)
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def start(directory: Path, data: bytes) -> None:
    """A new golden directory holding only the input (no vectors yet)."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / MANIFEST).exists():
        raise FileExistsError(f"{directory / MANIFEST} exists; vectors are never rewritten")
    (directory / INPUT).write_bytes(data)
    manifest = {"input_sha256": _sha(data), "vectors": []}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
