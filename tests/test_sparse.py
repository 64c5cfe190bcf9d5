"""The sparse model (cm/sparse.py): live on binary data no other model reads, silent on text
and where the x86 or word models speak, and it codes bytecode-like data better."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, exe, sparse, x86
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.recipe import Recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_golden import code  # noqa: E402  (SPARC words)
from test_x86 import calling_code  # noqa: E402  (x86-64 code)

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 20, 21, 22, 24), table_bits=11, match_bits=14,
                  network=False, selectors=2, exe=True, x86=True)
SPARSE = replace(SMALL, sparse=True)
TEXT = b"Bytecode has fields of two bytes; text has words. " * 40


def bytecode(n: int = 4000, seed: int = 9) -> bytes:
    """Instructions of four bytes: an opcode, an operand, a byte that depends on the opcode,
    an operand: the byte two back tells what the last one cannot."""
    rng = np.random.default_rng(seed)
    ops = rng.integers(0, 16, n)
    fields = [ops, rng.integers(0, 256, n), (ops * 13 + 1) % 256, rng.integers(0, 8, n)]
    return np.stack(fields, axis=1).astype(np.uint8).tobytes()


def contexts(S) -> list[int]:
    return list(S[context.S_CTX:context.S_CTX + S[context.S_K]])


def test_live_on_binary_data_and_not_on_text():
    S = fed(TEXT + bytecode(), SPARSE).S
    assert S[sparse.S_SP_LIVE] == 1
    changed = [a != b for a, b in zip(contexts(S), contexts(fed(TEXT + bytecode(), SMALL).S),
                                      strict=True)]
    assert changed == [False] * 3 + [True, False] + [True] * 4
    assert payload(TEXT, SPARSE) == payload(TEXT, SMALL)


def test_silent_where_the_instruction_and_word_models_speak():
    for data, model_sel in ((code(), exe.S_EXE_SEL), (calling_code(), x86.S_X86_SEL)):
        S = fed(data, SPARSE).S
        assert S[model_sel] >= 0 and S[sparse.S_SP_LIVE] == 0


def test_bytecode_codes_smaller_and_decodes():
    data = TEXT + bytecode()
    assert len(payload(data, SPARSE)) < 0.97 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=SPARSE))) == data


def test_the_zero_run_counts_bytes_since_a_zero():
    S = fed(b"\x01\x02\x00\x05\x06\x07", SPARSE).S
    assert S[sparse.S_SP_ZERO_RUN] == 3
    S = fed(b"\x01" * 40, SPARSE).S
    assert S[sparse.S_SP_ZERO_RUN] == sparse.ZERO_RUN_CAP
