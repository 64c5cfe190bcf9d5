"""The cold-start helper (coding/precompile.py) compiles kernels with exactly the argument
types the block kernels pass them, so that the two processes share the cached machine code:
after the block kernels have run here, the helper finds what it would compile in the cache.
(The backward step's part is checked in test_training.py, where the learning kernels are
compiled anyway.)"""

from __future__ import annotations

import ast
import inspect
import threading
from dataclasses import replace

from rwkvzip import api
from rwkvzip.coding import precompile, stepper
from rwkvzip.recipe import level_recipe

from conftest import helper_compiles

DEFAULT = level_recipe(4)


def test_the_mixing_kernels_are_typed_as_the_block_kernels_type_them():
    # the default's mixing without its network: the quickest recipe whose block kernel calls
    # the mixing kernels the helper compiles
    recipe = replace(DEFAULT, mix=replace(DEFAULT.mix, network=False), prior=None)
    data = b"the block kernel compiles the mixing kernels; the helper finds them " * 20
    assert api.decompress(api.compress(data, recipe)) == data
    compiled = helper_compiles("compile_mixing", recipe)
    assert not [k for k in compiled if k.startswith("rwkvzip.")], compiled


def test_the_helper_types_every_kernel_of_the_learning_step():
    """learning_step_parts lists the kernels stepper.learn_mixing calls (its source is read):
    mixer.learn first, the others from the last call to the first, learn_mixing last."""
    source = inspect.getsource(stepper.learn_mixing.py_func)
    nodes = sorted((node for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)),
                   key=lambda node: (node.lineno, node.col_offset))
    calls = [f"{node.func.value.id}.{node.func.attr}" for node in nodes]
    parts = precompile.learning_step_parts(precompile.small_mixing(DEFAULT), path=False)
    names = [f"{k.py_func.__module__.rsplit('.', 1)[1]}.{k.py_func.__name__}" for k, _ in parts]
    assert names[0] == "mixer.learn" and names[-1] == "stepper.learn_mixing"
    assert names[1:-1] == [c for c in reversed(calls) if c != "mixer.learn"]


def test_which_part_the_helper_takes():
    """The backward step when the network learns (the main process reaches it last), else
    the mixing; nothing for count models or mixing without a network (the main process
    would compile the same kernels at the same time): no helper is then started."""
    assert precompile.learns_by_backward(level_recipe(9))
    assert not precompile.learns_by_backward(DEFAULT)  # a frozen prior
    assert not precompile.learns_by_backward(level_recipe(1))
    for recipe in (level_recipe(1), replace(DEFAULT, mix=replace(DEFAULT.mix, network=False))):
        with precompile.helper(recipe, delay=0.0):
            assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
