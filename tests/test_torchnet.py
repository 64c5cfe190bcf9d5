"""The batched PyTorch trainer (scripts/torchnet.py): its recurrences against their
autograd reference, its forward against the numba kernels, and pretrain.py's torch path
(train, resume, export with the numba check) on a tiny corpus."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch  # the test extra installs it
from test_prior_scripts import GDN_TINY, tiny_corpus

from rwkvzip import corpus, priors, training
from rwkvzip.recipe import Recipe

from conftest import load_script  # noqa: E402


@pytest.fixture(scope="module")
def tn():
    """Imported under its own name, as pretrain.py imports it: numba's on-disk cache of its
    kernels names the module."""
    torch.set_num_threads(1)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import torchnet

    return torchnet


def _inputs(shapes, positive):
    gen = torch.Generator().manual_seed(0)
    return [(torch.rand(s, generator=gen) if pos else torch.randn(s, generator=gen) * 0.5)
            .requires_grad_() for s, pos in zip(shapes, positive, strict=True)]


def _value_and_grads(f, ins):
    out, last = f(*ins)
    weights = torch.arange(out.numel(), dtype=torch.float32).reshape(out.shape).sin()
    loss = (out * weights).sum() + last.cos().sum()
    return [out.detach(), last.detach(), *torch.autograd.grad(loss, ins)]


@pytest.mark.parametrize("kind", ["delta", "wkv"])
def test_numba_recurrences_match_autograd(tn, kind):
    B, T, H, dk, dv = 3, 7, 2, 5, 4
    if kind == "delta":
        shapes = [(B, T, H, dk), (B, T, H, dk), (B, T, H, dv), (B, T, H), (B, T, H),
                  (B, H, dk, dv)]
        fast, ref, pos = tn.DeltaRule.apply, tn.delta_rule_loop, [0, 0, 0, 1, 1, 0]
    else:
        shapes = [(B, T, H, 6)] * 6 + [(B, H, 6, 6)]
        fast, ref, pos = tn.Wkv.apply, tn.wkv_loop, [1, 0, 0, 0, 1, 0, 0]
    ins = _inputs(shapes, pos)
    for a, b in zip(_value_and_grads(fast, ins), _value_and_grads(ref, ins), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def test_the_chunked_delta_rule_matches_the_loop(tn):
    """A chunk of steps at a time (the GPU's form): the loop's outputs, last state and
    gradients, over chunks and a ragged last one."""
    B, T, H, dk, dv = 2, 37, 2, 5, 4
    shapes = [(B, T, H, dk), (B, T, H, dk), (B, T, H, dv), (B, T, H), (B, T, H), (B, H, dk, dv)]
    ins = _inputs(shapes, [0, 0, 0, 1, 1, 0])
    with torch.no_grad():
        ins[4].mul_(0.3).add_(0.7)  # gates in (0.7, 1), as a trained net's mostly are
    chunked = lambda *x: tn.delta_rule_chunked(*x, chunk=16)  # noqa: E731
    for a, b in zip(_value_and_grads(chunked, ins), _value_and_grads(tn.delta_rule_loop, ins),
                    strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-4)


def _documents(n: int, size: int) -> list[corpus.Document]:
    rng = np.random.default_rng(3)
    words = [b"prior ", b"delta ", b"rule ", b"state\n", b"x = f(y)\n", b"0123 "]
    return [corpus.Document("s", f"d{i}", b"".join(words[int(k)] for k in
                                                   rng.integers(0, len(words), size)), "val")
            for i in range(n)]


@pytest.mark.parametrize("arch,cfg", [("gdn", {"hidden": 16, "layers": 2, "key_heads": 1,
                                                "value_heads": 2, "key_dim": 8,
                                                "value_dim": 8, "mlp": 32}),
                                       ("rwkv7", {"hidden": 64, "layers": 2, "ffn": 64})])
def test_torch_forward_matches_numba(tn, arch, cfg):
    """Weights far from the initialisation (so the predictions are not near uniform),
    documents of different lengths, windows shorter than the documents (state carried)."""
    from rwkvzip.recipe import ARCHS

    recipe = Recipe(arch=arch, model=ARCHS[arch][0](**cfg))
    model = recipe.build_model()
    W = model.init_params(5)
    W += np.random.default_rng(2).normal(0, 0.15, W.shape).astype(np.float32)
    docs = _documents(3, 60)[:2] + _documents(1, 25)
    numba_bpb = training.evaluate(recipe, W, docs)
    torch_bpb = tn.evaluate(tn.make_net(model, W), docs, batch=2, window=48)["all"]
    assert abs(numba_bpb - 8.0) > 0.1  # far from the uniform prediction
    assert abs(torch_bpb - numba_bpb) < 2e-4 * numba_bpb
    assert np.array_equal(tn.make_net(model, W).flat(), W)


def test_lanes_read_documents_whole_and_in_order(tn):
    docs = [bytes([i]) * n for i, n in enumerate([5, 12, 3, 9], start=1)]
    lanes = tn.Lanes(docs, lambda e: np.arange(len(docs)), batch=1, window=4)
    seen, starts = b"", []
    for w in range(2 + 3 + 1 + 3):  # windows of 4 per document
        inp, tgt, mask, fresh = lanes.window()
        n = int(mask.sum())
        seen += bytes(tgt[0, :n].astype(np.uint8))
        assert mask[0, :n].all() and not mask[0, n:].any()
        assert bytes(inp[0, 1:n].astype(np.uint8)) == bytes(tgt[0, :n - 1].astype(np.uint8))
        if fresh[0]:
            starts.append(w)
            assert inp[0, 0] == 0  # a document starts from byte 0, as a file does
    assert seen == b"".join(docs) and starts == [0, 2, 5, 6] and lanes.epoch == 0
    lanes.window()
    assert lanes.epoch == 1  # the next window starts the next epoch


def test_pretrain_torch_trains_resumes_and_exports(tmp_path, capsys):
    pretrain = load_script("pretrain")
    man = tiny_corpus(tmp_path / "corpus")
    work = tmp_path / "work"
    args = ["--corpus", str(tmp_path / "corpus"), "--name", "t", "--work", str(work)]
    train = ["train", *args, "--trainer", "torch", "--batch", "4", "--window", "32"]
    pretrain.main([*train, "--arch", "gdn", "--set", GDN_TINY, "--time", "2"])
    first = json.loads((work / "t.json").read_text())
    assert first["trainer"] == "torch" and first["manifest"] == man["digest"]
    pretrain.main([*train, "--time", "4"])  # resumes with its own recipe
    info = json.loads((work / "t.json").read_text())
    assert "resumed at" in capsys.readouterr().out and info["steps"] > first["steps"]
    assert info["val_bpb"]["all"] < 8.0
    out = tmp_path / "t.safetensors"
    pretrain.main(["export", *args, "-o", str(out)])
    p = priors.load_prior(out)
    assert p.training["trainer"]["tool"] == "torch"
    assert p.metadata[priors.KEY_MANIFEST] == man["digest"]
    assert "reproduce" not in capsys.readouterr().out


def test_pretrain_shrink_starts_a_narrower_run_from_a_prior(tmp_path, capsys):
    """`shrink` keeps the MLP units with the strongest weights, in order, and everything else
    as it was; the run it starts trains and exports like any other."""
    pretrain = load_script("pretrain")
    tiny_corpus(tmp_path / "corpus")
    work = tmp_path / "work"
    recipe = pretrain.pretrain_recipe("gdn", GDN_TINY)
    model = recipe.build_model()
    W = model.init_params(3)
    weak = [1, 4, 30]  # units whose down weights are zero: the ones to drop
    down = model.layout.get(W, "model.layers.0.mlp.down_proj.weight")
    down[:, weak] = 0.0
    model.layout.set(W, "model.layers.0.mlp.down_proj.weight", down)
    src = tmp_path / "src.safetensors"
    priors.save_prior(src, model, W, "0" * 64, {})
    args = ["--name", "s", "--work", str(work)]
    pretrain.main(["shrink", "--from", str(src), "--mlp", "29", *args])
    run = torch.load(work / "s.torch.pt", weights_only=False)
    small = Recipe.from_dict(run["extra"]["recipe"]).build_model()
    assert small.cfg.mlp == 29 and small.cfg.hidden == model.cfg.hidden
    kept = [u for u in range(32) if u not in weak]
    for name in ("gate_proj", "up_proj"):
        full = model.layout.get(W, f"model.layers.0.mlp.{name}.weight")
        assert np.array_equal(small.layout.get(run["W"], f"model.layers.0.mlp.{name}.weight"),
                              full[kept])
    attn = "model.layers.0.linear_attn.in_proj_qkv.weight"
    assert np.array_equal(small.layout.get(run["W"], attn), model.layout.get(W, attn))
    with pytest.raises(SystemExit, match="exists"):
        pretrain.main(["shrink", "--from", str(src), "--mlp", "29", *args])
    with pytest.raises(SystemExit, match="below"):
        pretrain.main(["shrink", "--from", str(src), "--mlp", "32", "--name", "t",
                       "--work", str(work)])
    corpus_args = ["--corpus", str(tmp_path / "corpus"), *args]
    pretrain.main(["train", *corpus_args, "--trainer", "torch", "--batch", "4", "--window",
                   "32", "--time", "2"])
    assert "resumed at 0 bytes" in capsys.readouterr().out
    out = tmp_path / "s.safetensors"
    pretrain.main(["export", *corpus_args, "-o", str(out)])
    assert priors.load_prior(out).model.cfg.mlp == 29


def test_pretrain_torch_starts_a_run_from_a_prior(tmp_path, capsys):
    """`train --trainer torch --from PRIOR`: the prior's weights, a fresh run; the export
    records where it started. A second --from on a started run is refused."""
    pretrain = load_script("pretrain")
    tiny_corpus(tmp_path / "corpus")
    model = pretrain.pretrain_recipe("gdn", GDN_TINY).build_model()
    W = model.init_params(5)
    src = tmp_path / "src.safetensors"
    digest = priors.save_prior(src, model, W, "0" * 64, {})
    work = tmp_path / "work"
    args = ["--corpus", str(tmp_path / "corpus"), "--name", "f", "--work", str(work)]
    train = ["train", *args, "--trainer", "torch", "--batch", "4", "--window", "32"]
    pretrain.main([*train, "--from", str(src), "--time", "0"])  # no step: the prior as it was
    run = torch.load(work / "f.torch.pt", weights_only=False)
    assert np.array_equal(run["W"], W) and run["progress"]["steps"] == 0
    with pytest.raises(SystemExit, match="exists"):
        pretrain.main([*train, "--from", str(src), "--time", "2"])
    with pytest.raises(SystemExit, match="'nowhere' is not usable here"):
        pretrain.main([*train, "--device", "nowhere", "--time", "2"])
    pretrain.main([*train, "--time", "2", "--recurrence", "chunked"])  # resumes: the prior's
    # weights, the delta rule in the GPU's form
    assert json.loads((work / "f.json").read_text())["started_from"] == digest
    out = tmp_path / "f.safetensors"
    pretrain.main(["export", *args, "-o", str(out)])
    assert priors.load_prior(out).training["trainer"]["started_from"] == digest
    assert "reproduce" not in capsys.readouterr().out


def test_the_gpus_recurrences_train_and_evaluate_as_the_numba_ones(tn, tmp_path):
    """Off the CPU the net runs the chunked delta rule (or, asked, the autograd loops); here
    on the CPU, each evaluates as the numba kernels do, and trains."""
    tiny_corpus(tmp_path / "corpus")
    docs, _ = corpus.load(tmp_path / "corpus")
    model = load_script("pretrain").pretrain_recipe("gdn", GDN_TINY).build_model()
    W = model.init_params(2)
    fast = tn.make_net(model, W)
    val = docs[:3]
    b = tn.evaluate(fast, val, window=64)
    for recurrence in ("chunked", "loop"):
        net = tn.make_net(model, W, recurrence=recurrence)
        a = tn.evaluate(net, val, window=64)
        assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-3 for k in a), recurrence
    prog = tn.fit(net, docs, tn.Schedule(batch=2, window=16), 0.5)
    assert prog.steps > 0 and not np.array_equal(net.flat(), W)
