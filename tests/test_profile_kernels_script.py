"""Smoke test of scripts/profile_kernels.py: the network parts of a small GDN, forward and
backward, with the table."""

from __future__ import annotations

import json

import pytest

from rwkvzip.coding import coder

from conftest import load_script


@pytest.fixture(scope="module")
def profile():
    """The script, loaded once (its timing loops are not cached on disk: the tests share
    their compiles), each of its timings shortened (a smoke test: the figures need not be
    steady, only there)."""
    script = load_script("profile_kernels")
    script.MIN_SECONDS = 0.05
    return script


def test_profile_reports_every_part_with_its_floor(profile, tmp_path, capsys):
    """(Not named profile.py: on sys.path, that would shadow the standard library's
    profile module, which cProfile and torch import.)"""
    out = tmp_path / "p.json"
    text = tmp_path / "t.txt"
    text.write_bytes(b"the network parts of a small GDN, timed on a little text\n" * 200)
    profile.main([str(text), "--configs", "gdn:32x1", "--no-levels", "--footprint", "16x24:1,3",
                  "--json", str(out)])
    report = json.loads(out.read_text())
    rows = report["networks"][0]["rows"]
    assert report["networks"][0]["peak_gflops"] > 0  # measured for this table's floors
    names = [r["part"] for r in rows]
    assert names[:len(profile.GDN_PARTS)] == profile.GDN_PARTS
    end = names.index("whole forward step")
    forward, whole = rows[:end], rows[end]
    assert all(r["us"] > 0 and r["floor_us"] > 0 for r in forward + [whole])
    # the parts are the forward's own work: together about the whole step, not far off
    assert 0.5 * whole["us"] < sum(r["us"] for r in forward[:-1]) < 2.0 * whole["us"]
    # the whole step again, its matrices from a bfloat16 copy: the same work
    assert names[end + 1].startswith("whole forward step, matrices read from a bfloat16 copy")
    assert 0.3 * whole["us"] < rows[end + 1]["us"] < 3.0 * whole["us"]
    # then the GDN's backward step by part, and the whole backward step
    backward = rows[end + 2:]
    assert names[end + 2:end + 2 + len(profile.GDN_BACKWARD_PARTS)] == profile.GDN_BACKWARD_PARTS
    assert backward[-1]["part"] == "whole backward step"
    parts = backward[:len(profile.GDN_BACKWARD_PARTS)]
    assert all(r["us"] > 0 and r["floor_us"] > 0 for r in parts)
    assert 0.3 * backward[-1]["us"] < sum(r["us"] for r in parts) < 1.5 * backward[-1]["us"]
    # --footprint: one matvec while K matrices are read in turn, from float32 and from their
    # bfloat16 copies (which must give the same bits, or the script stops)
    sweep = report["footprint"]
    assert [r["matrices"] for r in sweep] == [1, 3]
    assert sweep[1]["float32_mb"] == round(3 * 16 * 24 * 4 / 1e6, 2)
    assert all(r["float32_us"] > 0 and r["bf16_us"] > 0 for r in sweep)
    printed = capsys.readouterr().out
    assert "× floor" in printed and "from bfloat16 copies" in printed
    assert "matvec peak" in printed


def test_decoder_overhead_is_measured_outside_the_model(profile):
    """Its two parts, directly: the range decoder inside the kernel (it must give the bytes
    back) and a byte's share of the kernel call once a block."""
    from rwkvzip.cm.mixing import MixConfig
    from rwkvzip.net.gdn.model import GdnConfig
    from rwkvzip.recipe import Recipe

    recipe = Recipe(arch="gdn", model=GdnConfig(hidden=32, layers=1, key_heads=1,
                                                value_heads=2, key_dim=16, value_dim=16,
                                                mlp=64),
                    lr=0.0, mix=MixConfig(table_bits=10, match_bits=12))
    parts = profile.decoder_overhead(recipe, b"decoder overhead, outside the model " * 60)
    assert set(parts) == {"call", "coder", "encode_twin"} \
        | ({"encode_constriction"} if coder.constriction is not None else set())
    assert all(0.0 < us < 1000.0 for us in parts.values())


@pytest.mark.parametrize("path", [False, True])
def test_the_context_models_learning_share(profile, path):
    """What the context models and mixer do after each byte (stepper.learn_mixing), timed in
    a loop of its own, with and without path coding: a share of the level's time."""
    from rwkvzip.cm.mixing import MixConfig
    from rwkvzip.recipe import Recipe

    recipe = Recipe(mix=MixConfig(table_bits=10, match_bits=12, network=False,
                                  path_coding=path))
    data = b"the context models learn from every byte, then move on " * 40
    learning = profile.learning_share(recipe, data)
    whole = profile.per_byte(recipe, data, coding=False)["kernel"]
    assert 0.0 < learning < 2.0 * whole


def test_rwkv7_backward_by_part(profile):
    """Every part of the backward step timed on a small two-layer RWKV-7 (the value
    residual's low-rank path runs in layer 1), with its floor; the parts are the step's own
    work, so together they are of the order of the whole step."""
    import numpy as np

    from rwkvzip.net.rwkv7.model import Rwkv7Config, Rwkv7Model

    model = Rwkv7Model(Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8, a_rank=8,
                                   v_rank=8, g_rank=16))
    W = model.init_params(0)
    state = np.zeros(model.state_size, dtype=np.float32)
    tr = np.zeros(model.trace_size, dtype=np.float32)
    data = np.frombuffer(b"a backward step by part, on a little text " * 4, np.uint8)
    rows = profile.profile_backward(model, W, state, tr, data.astype(np.int64), 25.0)
    names = [r["part"] for r in rows]
    assert names[:len(profile.RWKV7_BACKWARD_PARTS)] == profile.RWKV7_BACKWARD_PARTS
    assert names[-1] == "whole backward step"
    parts, whole = rows[:len(profile.RWKV7_BACKWARD_PARTS)], rows[-1]["us"]
    assert all(r["us"] > 0 and r["floor_us"] > 0 for r in parts)
    assert 0.3 * whole < sum(r["us"] for r in parts) < 1.5 * whole


def test_tbptt_parts_of_either_architecture(profile):
    """-7's TBPTT step by part on a small network of each architecture (-7 runs a GDN since
    mix-v54, the levels before it an RWKV-7): every part is measured and positive."""
    from rwkvzip.net.gdn.model import GdnConfig
    from rwkvzip.net.rwkv7.model import Rwkv7Config
    from rwkvzip.recipe import Recipe

    data = b"the parts of a training step, on a little text to learn from\n" * 8
    for arch, model in (("gdn", GdnConfig(hidden=32, layers=1, key_heads=1, value_heads=2,
                                          key_dim=16, value_dim=16, mlp=64)),
                        ("rwkv7", Rwkv7Config(hidden=64, layers=1, ffn=128, decay_rank=8,
                                              a_rank=8, v_rank=8, g_rank=16))):
        recipe = Recipe(arch=arch, model=model, lr=0.001, bptt=6, ckpt=6)
        parts = profile.tbptt_parts(recipe, data)
        assert set(parts) == {"backward", "optimizer", "formation", "twins"}, arch
        assert all(us > 0 for us in parts.values()), (arch, parts)


def test_level_shapes_time_other_networks_in_the_levels_place(profile):
    """--level-shapes: the level's kernels with another network in its prior's place, from
    float32 and from bfloat16-rounded weights; each timed, with its size."""
    from rwkvzip.cm.mixing import MixConfig
    from rwkvzip.recipe import Recipe

    base = Recipe(arch="gdn", lr=0.0, mix=MixConfig(table_bits=10, match_bits=12))
    data = b"other networks in the level's place, on a little text\n" * 20
    rows = profile.level_shapes(["gdn:32x1"], data, rounds=1, base=base)
    assert [(r["config"], r["weights"]) for r in rows] == [("gdn:32x1", "float32"),
                                                            ("gdn:32x1", "bfloat16")]
    config, model = profile.ARCHS["gdn"]
    size = model(config(**profile.CONFIGS["gdn:32x1"][1])).layout.size
    assert all(r["parameters"] == size and r["us"] > 0 for r in rows)
    assert "other networks" in profile.markdown({"machine": "m", "file": "f", "bytes": 1,
                                                 "bf16_copy_faster": False, "networks": [],
                                                 "levels": [], "level_shapes": rows})
