"""Recipes: canonical JSON, validation, presets."""

import json
from dataclasses import replace

import pytest

from rwkvzip.recipe import (
    DEFAULT_LEVEL,
    LEVELS,
    SUPPORTED_CONTRACTS,
    Recipe,
    RecipeError,
    default_recipe,
    level_recipe,
    preset_cards,
    preset_id_of,
    with_overrides,
)


def test_canonical_json_roundtrip(tiny_recipe):
    raw = tiny_recipe.to_json()
    assert Recipe.from_json(raw) == tiny_recipe
    assert raw == Recipe.from_json(raw).to_json()


@pytest.mark.parametrize("change,message", [
    ({"arch": "mamba99"}, "unknown architecture"),
    ({"arch": 1}, "unknown architecture"),
    ({"contract": 4}, "numeric contract 4 needs a newer rwkvzip"),
    ({"contract": 1}, "numeric contract 1 was written by rwkvzip 0.x"),
    ({"optimizer": "lion"}, "unknown optimizer"),
    ({"lr": "fast"}, "wrong type"),
    ({"seed": -1}, "seed"),
    ({"extra": 1}, "unknown"),
    ({"model": {"hidden": 100}}, "missing|multiple of 64"),
])
def test_invalid_recipes_are_refused(tiny_recipe, change, message):
    d = json.loads(tiny_recipe.to_json())
    d.update(change)
    with pytest.raises(RecipeError, match=message):
        Recipe.from_dict(d)


def test_recompute_is_written_only_when_off(tiny_recipe):
    """TBPTT's recompute is on in every recipe before the field: those keep their JSON."""
    tbptt = replace(tiny_recipe, bptt=8, ckpt=8)
    assert b"recompute" not in tbptt.to_json()
    off = with_overrides(tbptt, recompute=0)
    assert off.recompute is False and b'"recompute":false' in off.to_json()
    assert Recipe.from_json(off.to_json()) == off
    assert with_overrides(tbptt, recompute="false") == off
    for bad in ({"recompute": 0}, {"recompute": "no"}):
        d = json.loads(tbptt.to_json()) | bad
        with pytest.raises(RecipeError, match="wrong type"):
            Recipe.from_dict(d)
    with pytest.raises(RecipeError, match="0 or 1"):
        with_overrides(tbptt, recompute=2)
    with pytest.raises(RecipeError, match="truncated BPTT"):
        with_overrides(replace(tbptt, bptt=1), recompute=0)
    assert with_overrides(off, bptt=1).recompute  # leaving TBPTT leaves its setting too
    with pytest.raises(RecipeError, match="truncated BPTT"):
        replace(tbptt, bptt=1, recompute=False).validate()


def seeded_rwkv7() -> Recipe:
    """The default level's models with an RWKV-7 from seeded weights, learning by TBPTT."""
    return with_overrides(default_recipe(), arch="rwkv7", lr=5e-4, bptt=8)


def test_default_recipe_is_a_frozen_preset():
    assert preset_id_of(default_recipe()) is not None
    assert all(card.recipe.contract in SUPPORTED_CONTRACTS for card in preset_cards().values())


def test_overrides_change_only_what_is_given():
    base = seeded_rwkv7()
    r = with_overrides(base, hidden=128, seed=5, lr=None)
    assert r.model.hidden == 128 and r.seed == 5 and r.lr == base.lr
    assert preset_id_of(r) is None
    with pytest.raises(RecipeError, match="multiple of 64"):
        with_overrides(base, hidden=65)


def test_another_network_size_starts_from_seeded_weights_not_the_prior():
    base = default_recipe()
    assert base.prior
    other = "gdn" if base.arch == "rwkv7" else "rwkv7"
    for change in ({"hidden": 2 * base.model.hidden}, {"layers": base.model.layers + 1},
                   {"arch": other}):
        assert with_overrides(base, **change).prior == ""
    kept = with_overrides(base, hidden=base.model.hidden, lr=0.0001)
    assert kept.lr == 0.0001 and kept.prior == base.prior


def test_a_setting_that_would_change_nothing_but_the_header_is_an_error():
    fast = level_recipe(1)  # count models
    for change in ({"hidden": 128}, {"seed": 9}, {"optimizer": "sgd"}, {"mix": False}):
        with pytest.raises(RecipeError, match="does not apply.*count models"):
            with_overrides(fast, **change)
    default = default_recipe()  # a frozen prior
    with pytest.raises(RecipeError, match="does not learn"):
        with_overrides(default, bptt=8)
    with pytest.raises(RecipeError, match="prior"):
        with_overrides(default, seed=3)
    assert with_overrides(default, bptt=8, lr=1e-4).bptt == 8
    bigger = 2 * default.model.hidden  # seeded now: the seed applies
    assert with_overrides(default, hidden=bigger, seed=3).seed == 3
    alone = replace(default, mix=replace(default.mix, network=False), prior="")
    with pytest.raises(RecipeError, match="no network"):
        with_overrides(alone, hidden=64)
    sgd = with_overrides(seeded_rwkv7(), optimizer="sgd")
    with pytest.raises(RecipeError, match="Adam"):
        with_overrides(sgd, beta2=0.9)


def test_every_level_names_a_card_and_the_default_level_is_the_default_recipe():
    assert sorted(LEVELS) == list(range(1, 10))
    for level in LEVELS:
        assert preset_id_of(level_recipe(level)) is not None
    assert level_recipe(DEFAULT_LEVEL) == default_recipe()
    with pytest.raises(RecipeError, match="level"):
        level_recipe(0)
