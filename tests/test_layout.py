"""The state arrays' layouts: every slot declared once by name, none overlapping, and a dump
that names them."""

import numpy as np
import pytest

from rwkvzip.cm import context, counts, delta, exe, image, mixer, sheet, syntax
from rwkvzip.cm.fastcm import CountArrays, CountsConfig
from rwkvzip.cm.layout import StateLayout
from rwkvzip.cm.mixing import MixArrays, MixConfig


@pytest.mark.parametrize("layout", [context.STATE, counts.STATE], ids=["mix", "counts"])
def test_fields_tile_the_array_in_order(layout):
    at = 0
    for _name, offset, length in layout.fields():
        assert offset == at and length >= 1
        at += length
    assert at == layout.size


def test_every_state_constant_of_the_models_is_a_field():
    """Each module's S_* offsets into the mixing state start a declared field (the slot
    tiling above says no two fields overlap)."""
    starts = {offset for _, offset, _ in context.STATE.fields()}
    for module in (context, mixer, image, sheet, exe, delta, syntax):
        for const, value in vars(module).items():
            if const.startswith("S_") and type(value) is int:
                assert value in starts, f"{module.__name__}.{const}"
    assert context.STATE.size == context.N_S and counts.STATE.size == counts.N_S


def test_a_layout_refuses_a_name_twice_and_an_empty_field():
    layout = StateLayout("test")
    assert layout.add_each("a", "b") == (0, 1) and layout.add("c", 4) == 2
    with pytest.raises(ValueError, match="twice"):
        layout.add("a")
    with pytest.raises(ValueError, match="at least one"):
        layout.add("d", 0)
    assert layout.offsets("c", "a") == (2, 0) and layout.length("c") == 4


def test_the_dump_names_every_field_of_a_live_array():
    arrays = MixArrays(MixConfig(orders=(1, 2, 0, context.KIND_INDIRECT), table_bits=10,
                                 match_bits=12), bptt=1)
    text = context.STATE.dump(arrays.S)
    lines = text.splitlines()
    assert len(lines) == len(context.STATE.fields())
    assert "models = 4" in lines
    n = context.MAX_MODELS
    assert any(line.startswith(f"table_bits[{n}] = [10, 10, 10, 10, 0") for line in lines)
    assert any(line.startswith(f"orders[{n}] = [1, 2, 0, 25, 0, 0, 0, 0, ...") for line in lines)
    cfg = CountsConfig(orders=(0, 1, 2), table_bits=10, match_bits=12)
    S = CountArrays(cfg, 2.0**-20).S
    assert "(after the fields:" in counts.STATE.dump(S).splitlines()[-1]
    with pytest.raises(ValueError, match="slots"):
        context.STATE.dump(np.zeros(3, np.int64))
