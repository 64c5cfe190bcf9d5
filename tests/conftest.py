"""Shared fixtures: the corpus location and small recipes that keep the suite fast."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rwkvzip.recipe import Recipe
from rwkvzip.rwkv7 import Rwkv7Config

ROOT = Path(__file__).resolve().parents[1]


def _find_corpus() -> Path:
    """RWKVZIP_CORPUS, else ../shared/corpus beside the checkout, else the workplace copy."""
    candidates = [os.environ.get("RWKVZIP_CORPUS"), ROOT.parent / "shared" / "corpus",
                  "/work/shared/corpus"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return ROOT.parent / "shared" / "corpus"


CORPUS = _find_corpus()

TINY_CONFIG = Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8, a_rank=8, v_rank=8,
                          g_rank=16)


def corpus_file(rel: str) -> Path:
    path = CORPUS / rel
    if not path.exists():
        pytest.skip(f"corpus file {rel} not available at {CORPUS}")
    return path


@pytest.fixture
def tiny_recipe() -> Recipe:
    return Recipe(model=TINY_CONFIG, optimizer="adam", lr=0.003, seed=7)
