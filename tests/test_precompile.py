"""The cold-start helper (coding/precompile.py) compiles the mixing kernels with exactly the
argument types the block kernels pass them: after it has run, a process coding with the
recipe loads them from the shared cache instead of compiling them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace

from rwkvzip.coding import precompile
from rwkvzip.recipe import level_recipe

CODE_AND_LIST_COMPILES = """
import json, sys
from numba.core import event
compiled = []
class Listener(event.Listener):
    def on_start(self, ev):
        fn = ev.data["dispatcher"].py_func
        compiled.append(fn.__module__ + "." + fn.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Listener())
from rwkvzip import api
from rwkvzip.recipe import Recipe
recipe = Recipe.from_json(sys.argv[1].encode())
data = b"the helper compiled the mixing kernels; this process loads them " * 20
assert api.decompress(api.compress(data, recipe)) == data
print(json.dumps(compiled))
"""


def test_the_main_process_loads_what_the_helper_compiled(tmp_path):
    # the default's mixing without its network: the quickest recipe whose block kernel
    # calls the mixing kernels the helper compiles
    recipe = level_recipe(4)
    recipe = replace(recipe, mix=replace(recipe.mix, network=False), prior=None).to_json().decode()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    helper = subprocess.run([sys.executable, "-m", "rwkvzip.coding.precompile", recipe],
                            env=env, capture_output=True, timeout=600)
    assert helper.returncode == 0, helper.stderr.decode()[-2000:]
    main = subprocess.run([sys.executable, "-c", CODE_AND_LIST_COMPILES, recipe], env=env,
                          capture_output=True, timeout=600)
    assert main.returncode == 0, main.stderr.decode()[-2000:]
    compiled = json.loads(main.stdout)
    assert "rwkvzip.coding.stepper.run_fixed_none" in compiled  # the block kernel itself
    for loaded in ("rwkvzip.cm.mixer.predict", "rwkvzip.cm.mixer.learn",
                   "rwkvzip.coding.stepper.learn_mixing", "rwkvzip.cm.context.next_contexts"):
        assert loaded not in compiled


def test_no_helper_for_levels_it_cannot_help():
    """Count models and mixing without a network: the main process would compile the same
    kernels at the same time. The context manager then starts nothing."""
    default = level_recipe(4)
    for recipe in (level_recipe(1), replace(default, mix=replace(default.mix, network=False))):
        with precompile.helper(recipe, delay=0.0):
            assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
