"""Shared fixtures: the test data the suite carries and small recipes that keep it fast."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rwkvzip.net.rwkv7.model import Rwkv7Config
from rwkvzip.recipe import Recipe

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # the scripts import their shared harness


TINY_CONFIG = Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8, a_rank=8, v_rank=8,
                          g_rank=16)


# Samples the suite carries (tests/data/format-0.x/README.md): prose, CRLF text, binary
# records and noise; and Python source
DATA = Path(__file__).parent / "data"
MIXED_SAMPLE = DATA / "format-0.x" / "sample.bin"
CODE_SAMPLE = DATA / "format-0.x" / "blocks.bin"


HELPER_COMPILES = """
import json, sys
sys.path.insert(0, sys.argv[3])
from compile_times import record_compiles
compiled = record_compiles()
from rwkvzip.coding import precompile
from rwkvzip.recipe import Recipe
getattr(precompile, sys.argv[1])(Recipe.from_json(sys.argv[2].encode()))
print(json.dumps([row["kernel"] for row in compiled]))
"""


def helper_compiles(part: str, recipe: Recipe) -> list[str]:
    """The functions the compile helper's `part` (precompile.compile_mixing, ...) compiles
    for `recipe` in a new process sharing this one's kernel cache: none of a kernel this
    process already compiled with the same argument types."""
    import json
    import subprocess

    proc = subprocess.run([sys.executable, "-c", HELPER_COMPILES, part,
                           recipe.to_json().decode(), str(ROOT / "scripts")],
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout)


def load_script(name: str):
    """scripts/NAME.py as a module (its smoke test drives its main and helpers)."""
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiny_recipe() -> Recipe:
    return Recipe(model=replace(TINY_CONFIG, layers=1), optimizer="adam", lr=0.003, seed=7)
