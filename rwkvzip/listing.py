"""What `rwkvzip -l` shows: sizes, frames and recipes of a compressed stream, read from its
headers and frame heads without decoding (and without loading a model)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import BinaryIO

from rwkvzip.coding import container
from rwkvzip.recipe import Recipe, preset_cards


@dataclass
class Listing:
    compressed: int = 0
    raw: int = 0
    frames: int = 0
    members: int = 0
    recipes: list[str] = field(default_factory=list)  # one label per distinct recipe, in order


def recipe_label(recipe: Recipe) -> str:
    """The preset card's name (or the architecture and size of a spelled-out recipe), and
    the digest of the prior its network starts from, if any."""
    label = _base_label(recipe)
    return f"{label} prior sha256:{recipe.prior[:16]}" if recipe.prior else label


def _base_label(recipe: Recipe) -> str:
    for card in preset_cards().values():  # a card, or a card with another prior
        if card.recipe == replace(recipe, prior=card.recipe.prior):
            return card.name
    if recipe.counts is not None:
        return "count-models"
    if recipe.mix is not None and not recipe.mix.network:
        return "context-models"
    mix = "+mix" if recipe.mix is not None else ""
    return f"{recipe.arch} {recipe.model.hidden}x{recipe.model.layers}{mix}"


class _CountingReader:
    def __init__(self, f: BinaryIO):
        self._f = f
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.count += len(data)
        return data


def scan(f: BinaryIO) -> Listing:
    """Read every member's header, frame heads and trailer (payloads are read, not decoded:
    memory stays bounded by one frame). The framing and the trailers' totals are checked;
    the CRC-32s need the decoded data (`rwkvzip -t`). Raises FormatError."""
    counted = _CountingReader(f)
    listing = Listing()
    first = True
    while (recipe := container.read_header(counted, first=first)) is not None:
        first = False
        listing.members += 1
        label = recipe_label(recipe)
        if label not in listing.recipes:
            listing.recipes.append(label)
        for frame in container.read_frames(counted, recipe.eol, recipe.bypass):
            listing.raw += frame.raw_len
            listing.frames += 1
    listing.compressed = counted.count
    return listing
