"""bfloat16 copies of a frozen network's matrices (ops/bf16.py): the same bits as float32,
on both architectures; kept only while the network is frozen and its matrices are bfloat16
values, where the copy is the faster form on this CPU; stored as BF16 in prior files and
read back exactly."""

from __future__ import annotations

import numpy as np
import pytest

from rwkvzip import priors
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding.codec import Predictor
from rwkvzip.net.gdn.model import GdnConfig
from rwkvzip.net.rwkv7.model import Rwkv7Config
from rwkvzip.ops.bf16 import (
    COPY_SETTING,
    bf16_copy,
    copy_measured_faster,
    matrices_exact,
    round_matrices,
    round_to_bf16,
)
from rwkvzip.ops.linalg import matvec
from rwkvzip.recipe import Recipe

from conftest import load_script

GDN = GdnConfig(hidden=32, layers=1, key_heads=1, value_heads=2, key_dim=16, value_dim=16,
                mlp=64)
RWKV7 = Rwkv7Config(hidden=64, layers=2, ffn=64, decay_rank=8, a_rank=8, v_rank=8, g_rank=8)
DATA = (b"A frozen prior reads its matrices from half the bytes, and codes the same. "
        b"def f(x):\n    return [x * 2 for x in range(10)]\n") * 12


def test_rounding_is_to_nearest_even_and_idempotent():
    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -7)  # bfloat16's spacing at 1
    x = np.array([one + ulp / 2, one + 3 * ulp / 2, one + ulp / 2 + 2 ** -20, -2.5, 0.0,
                  3.0e38], dtype=np.float32)
    r = round_to_bf16(x)
    assert r[0] == one and r[1] == one + 2 * ulp  # ties go to the even neighbour
    assert r[2] == one + ulp and r[3] == -2.5 and r[4] == 0.0
    assert np.all(r.view(np.uint32) & 0xFFFF == 0)
    assert np.array_equal(round_to_bf16(r), r)


@pytest.mark.parametrize("n_in,n_out", [(8, 16), (13, 7), (64, 40)])
def test_matvec_from_a_bf16_copy_has_the_same_bits(n_in, n_out):
    """Every output summed in the same order from exactly the same values (the tail of
    n_in % 8 inputs too)."""
    rng = np.random.default_rng(n_in)
    M = round_to_bf16(rng.standard_normal(n_in * n_out).astype(np.float32))
    x = rng.standard_normal(n_in).astype(np.float32)
    y32, y16 = np.empty(n_out, np.float32), np.empty(n_out, np.float32)
    matvec(M, x, n_in, n_out, y32)
    matvec((M.view(np.uint32) >> 16).astype(np.uint16), x, n_in, n_out, y16)
    assert np.array_equal(y32.view(np.uint32), y16.view(np.uint32))


def frozen(arch: str, model) -> Recipe:
    return Recipe(arch=arch, model=model, lr=0.0,
                  mix=MixConfig(table_bits=10, match_bits=12, path_coding=True))


@pytest.mark.parametrize("arch,model", [("gdn", GDN), ("rwkv7", RWKV7)])
def test_a_frozen_network_codes_the_same_from_its_bf16_copy(arch, model, monkeypatch):
    monkeypatch.setenv(COPY_SETTING, "1")  # whatever this CPU measures
    recipe = frozen(arch, model)
    net = recipe.build_model()
    table = net.layout.twin_table()
    W = round_matrices(net.init_params(5), table)
    assert matrices_exact(W, table) and not matrices_exact(net.init_params(5), table)
    fast = Predictor(recipe, W)
    assert fast.W16.size == W.size
    payload = fast.encode_frame(DATA)
    monkeypatch.setenv(COPY_SETTING, "0")
    slow = Predictor(recipe, W)
    assert slow.W16.size == 0
    assert slow.encode_frame(DATA) == payload
    assert Predictor(recipe, W).decode_frame(payload, len(DATA)) == DATA


def test_the_copy_only_while_frozen_and_exact(monkeypatch):
    monkeypatch.setenv(COPY_SETTING, "1")
    recipe = frozen("gdn", GDN)
    net = recipe.build_model()
    table = net.layout.twin_table()
    W = round_matrices(net.init_params(1), table)
    assert Predictor(recipe, net.init_params(1)).W16.size == 0  # matrices not bfloat16
    learning = Recipe(arch="gdn", model=GDN, lr=0.001, bptt=4, ckpt=4,
                      mix=MixConfig(table_bits=10, match_bits=12))
    assert Predictor(learning, W).W16.size == 0  # weights that change every segment
    p = Predictor(recipe, W)
    assert p.W16.size and p.net.W16 is p.W16
    p.W[table[0, 0]] += np.float32(1e-3)  # written from outside: the copy follows
    p.weights_changed()
    assert p.W16.size == 0 and p.net.W16.size == 0 and p.kernel()[1][0].W16.size == 0
    assert bf16_copy(W, table[:0]).size == 0


def test_the_copy_where_it_pays_on_this_cpu(monkeypatch):
    """Unset, the choice is this CPU's measurement (made once); the setting overrides it."""
    recipe = frozen("gdn", GDN)
    net = recipe.build_model()
    W = round_matrices(net.init_params(1), net.layout.twin_table())
    monkeypatch.delenv(COPY_SETTING, raising=False)
    faster = copy_measured_faster()
    assert isinstance(faster, bool) and copy_measured_faster() is faster
    assert bool(Predictor(recipe, W).W16.size) == faster
    monkeypatch.setenv(COPY_SETTING, "0")
    assert Predictor(recipe, W).W16.size == 0


def test_prior_files_store_bf16_matrices_exactly(tmp_path):
    net = frozen("gdn", GDN).build_model()
    table = net.layout.twin_table()
    W = round_matrices(net.init_params(2), table)
    plain = priors.prior_bytes(net, W, "0" * 64, {})
    small = priors.prior_bytes(net, W, "0" * 64, {}, bf16_matrices=True)
    matrix_bytes = int(sum(n_in * n_out for _, n_in, n_out in table)) * 2
    assert len(plain) - len(small) == matrix_bytes
    loaded = priors.load_prior(small)
    assert np.array_equal(loaded.W, W)  # the same weights (and weights digest) as float32
    with pytest.raises(priors.PriorError, match="not bfloat16"):
        priors.prior_bytes(net, net.init_params(2), "0" * 64, {}, bf16_matrices=True)


def test_pretrain_bf16_rounds_a_prior(tmp_path, capsys):
    pretrain = load_script("pretrain")
    net = frozen("gdn", GDN).build_model()
    src, out = tmp_path / "src.safetensors", tmp_path / "bf16.safetensors"
    priors.save_prior(src, net, net.init_params(4), "1" * 64, {"epochs": 2})
    pretrain.main(["bf16", "--from", str(src), "-o", str(out)])
    p, q = priors.load_prior(src), priors.load_prior(out)
    table = net.layout.twin_table()
    assert np.array_equal(q.W, round_matrices(p.W, table))
    assert q.training["bf16_from"] == p.digest and q.training["epochs"] == 2
    assert q.metadata[priors.KEY_MANIFEST] == "1" * 64
    assert out.stat().st_size < src.stat().st_size
    assert "bfloat16" in capsys.readouterr().out
