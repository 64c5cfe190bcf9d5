"""Determinism across CPU targets: a subprocess built for each target (NUMBA_CPU_NAME /
NUMBA_CPU_FEATURES) writes the host's bytes with every recipe and reads the host's files;
the host (this process) reads the targets' files (tests/test_targets.py).

  probe IN DIR [SRC_DIR OUT_DIR [--decode-only]]
      compress IN with every recipe to DIR/<recipe>.rwkz and print the digests of the
      kernel outputs and of every file (not with --decode-only); then decompress
      SRC_DIR/<recipe>.rwkz to OUT_DIR/<recipe>.out.
"""

import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from rwkvzip import api, priors, selftest
from rwkvzip.cm.fastcm import CountsConfig
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.net.gdn.model import GdnConfig, GdnModel
from rwkvzip.net.rwkv7.model import Rwkv7Config
from rwkvzip.ops import mathf
from rwkvzip.recipe import Recipe, level_recipe

HASWELL_FEATURES = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+fsgsbase,+lzcnt,"
                    "+mmx,+movbe,+popcnt,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave")
TARGETS = {
    "generic-sse2": {"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": ""},
    "haswell-avx2": {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": HASWELL_FEATURES},
}
TARGET_ISA = {"generic-sse2": "sse2", "haswell-avx2": "avx2"}
ISA_ORDER = ("sse2", "avx", "avx2", "avx512")  # narrowest first
# the RWKV-7 of the probe's small recipes
SMALL_RWKV7 = Rwkv7Config(hidden=64, layers=1, ffn=128, decay_rank=8, a_rank=8, v_rank=8,
                          g_rank=16)
PRIOR_CONFIG = GdnConfig(hidden=32, layers=1, key_heads=1, value_heads=2, key_dim=16,
                         value_dim=16, conv_kernel=4, mlp=64)


@functools.cache
def host_isa() -> str:
    """The widest vector instruction set this machine runs (ISA_ORDER), or "other" where it
    is not an x86-64 CPU (asked once: every test of tests/test_targets.py asks it)."""
    import llvmlite.binding as ll

    has = {name for name, on in ll.get_host_cpu_features().items() if on}
    if "avx512f" in has:
        return "avx512"
    if {"avx2", "fma"} <= has:
        return "avx2"
    if "avx" in has:
        return "avx"
    return "sse2" if "sse2" in has else "other"


def not_probed(target: str) -> str | None:
    """Why `target` is not probed on this machine, or None. A target whose instruction set
    is the host's own would only repeat the host's build (a full compile of every kernel,
    ~190 s here); one wider than the host's cannot run here (AVX-512 is covered by the
    host's own build where the host has it); an x86 target cannot run on another CPU."""
    isa, want = host_isa(), TARGET_ISA[target]
    if isa == "other":
        return "this machine is not an x86-64 CPU"
    if want == isa:
        return f"this machine is itself an {isa.upper()} target: the host's build covers it"
    if ISA_ORDER.index(want) > ISA_ORDER.index(isa):
        return f"this machine's widest instruction set is {isa.upper()}: it cannot run it"
    return None


def probe_prior() -> bytes:
    """A prior every target makes alike: seeded weights, scaled so they are not an init,
    and a dictionary (every stream learns it first)."""
    model = GdnModel(PRIOR_CONFIG)
    dictionary = b"(defun grammar (rule) (list 'rule rule))\n" * 8
    return priors.prior_bytes(model, model.init_params(21) * np.float32(1.5), "0" * 64, {},
                              dictionary)


# Recipe() is at the numeric contract (3: float32 lanes in the forward, float32 sums in the
# backward); the level cards (at the end) are the released ones
RECIPES = {
    "tiny-adam": Recipe(model=Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8,
                                          a_rank=8, v_rank=8, g_rank=16),
                        optimizer="adam", lr=0.002, seed=3),
    "tiny-bptt1-adam": Recipe(model=Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8,
                                                a_rank=8, v_rank=8, g_rank=16),
                              optimizer="adam", lr=0.002, seed=3, bptt=1, clip=0.5),
    "tiny-tbptt-sgd": Recipe(model=Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8,
                                               a_rank=8, v_rank=8, g_rank=16),
                             optimizer="sgd", lr=0.02, seed=3, bptt=6, ckpt=4,
                             scope="attn+ffn+head+bias", warmup=200, decay=1000),
    "gdn-bptt1-adam": Recipe(arch="gdn", model=GdnConfig(hidden=32, layers=2, key_heads=1,
                                                         value_heads=2, key_dim=16,
                                                         value_dim=16, conv_kernel=4, mlp=64),
                             optimizer="adam", lr=0.002, seed=8, bptt=1),
    "gdn-tbptt-sgd": Recipe(arch="gdn", model=GdnConfig(hidden=48, layers=1, key_heads=2,
                                                        value_heads=2, key_dim=8, value_dim=8,
                                                        conv_kernel=3, mlp=48),
                            optimizer="sgd", lr=0.02, seed=9, bptt=5, ckpt=2),
    "mix-tbptt-adam": Recipe(model=SMALL_RWKV7,
                             optimizer="adam", lr=0.002, seed=5, bptt=6, ckpt=3,
                             mix=MixConfig(table_bits=12, match_bits=14)),
    "gdn-mix-bptt1": Recipe(arch="gdn", model=GdnConfig(hidden=32, layers=1, key_heads=1,
                                                        value_heads=2, key_dim=16,
                                                        value_dim=16, conv_kernel=4, mlp=64),
                            optimizer="adam", lr=0.002, seed=6, bptt=1,
                            mix=MixConfig(orders=(1, 2, 3, 0), table_bits=11, match_bits=13)),
    "context-models-alone": Recipe(mix=MixConfig(table_bits=12, match_bits=14, network=False)),
    "two-selectors-mix": Recipe(model=SMALL_RWKV7,
                                optimizer="adam", lr=0.002, seed=7, bptt=4, ckpt=4,
                                recompute=False,
                                mix=MixConfig(orders=(1, 2, 3, 0, 13, 11), table_bits=11,
                                              match_bits=14, selectors=2)),
    "record-and-sparse-kinds": Recipe(mix=MixConfig(orders=(1, 2, 3, 0, 8, 9, 10, 11, 12, 13,
                                                            14, 15),
                                                    table_bits=11, match_bits=14,
                                                    network=False)),
    # small tables, so that contexts contend for the four ways of a group (the levels' cards
    # never fill theirs on a sample this small)
    "text-kinds-four-ways": Recipe(mix=MixConfig(orders=(1, 2, 3, 0, 20, 21, 22, 23),
                                                 table_bits=10, match_bits=14, network=False,
                                                 ways=4, sse2=True, selectors=3)),
    "count-models": Recipe(counts=CountsConfig(orders=(0, 1, 2, 3, 5), table_bits=10,
                                               match_bits=13, limit=300, match_min=5)),
    "wide-sgd": Recipe(model=Rwkv7Config(hidden=192, layers=1, ffn=256, decay_rank=8,
                                         a_rank=8, v_rank=8, g_rank=16),
                       optimizer="sgd", lr=0.02, seed=4),
    # started from PRIOR (probe_prior): frozen inside the mixer, and adapting by TBPTT
    "prior-frozen-mix": Recipe(arch="gdn", model=PRIOR_CONFIG, lr=0.0, bptt=0,
                               mix=MixConfig(orders=(1, 2, 3, 0, 13), table_bits=11,
                                             match_bits=14, selectors=2)),
    "prior-tbptt-mix": Recipe(arch="gdn", model=PRIOR_CONFIG, lr=0.0005, bptt=8, ckpt=8,
                              mix=MixConfig(table_bits=11, match_bits=14)),
    # a frozen RWKV-7 inside the mixer (the entry point of the older default cards)
    "rwkv7-frozen-mix": Recipe(model=SMALL_RWKV7,
                               lr=0.0, seed=2, mix=MixConfig(table_bits=11, match_bits=14)),
    # ... and by path coding (the entry point of the default cards mix-v32 ... mix-v51)
    "rwkv7-frozen-path-mix": Recipe(model=SMALL_RWKV7,
                                    lr=0.0, seed=2, mix=MixConfig(table_bits=11, match_bits=14,
                                                                  path_coding=True)),
    # ... and adapting by TBPTT, by path coding (the entry point of mix-v32 ... mix-v52 at -7)
    "rwkv7-tbptt-path-mix": Recipe(model=SMALL_RWKV7,
                                   optimizer="adam", lr=0.002, seed=3, bptt=6, ckpt=6,
                                   mix=MixConfig(table_bits=11, match_bits=14,
                                                 path_coding=True)),
    # the levels' cards with their shipped priors (frozen GDNs at -4, the default and -7,
    # whose matrices the forward reads from bfloat16; a GDN adapting by TBPTT at -9)
    "level-4-shipped-prior": level_recipe(4),
    "level-6-shipped-prior": level_recipe(6),
    "level-7-shipped-prior": level_recipe(7),
    "level-9-shipped-prior": level_recipe(9),
}


def record_table() -> bytes:
    """Rows of 45 bytes with changes here and there: the record kinds find r = 45 in it (the
    shared sample has no records, so there they only see r = 0)."""
    rng = np.random.default_rng(11)
    rows = np.tile(rng.integers(0, 256, 45, dtype=np.uint8), 60)
    flip = rng.random(rows.size) < 0.1
    rows[flip] = rng.integers(0, 256, int(flip.sum()), dtype=np.uint8)
    return rows.tobytes()


def kernel_digest() -> str:
    x = np.linspace(-40, 40, 20001)
    h = hashlib.sha256()
    h.update(api.compress(record_table(), RECIPES["record-and-sparse-kinds"]))
    # the 1-bit image model is live only on a bitmap, the sheet model only on BIFF records,
    # the executable model only on binary words, the column-delta model on binary records:
    # the golden input that has all four
    data = (selftest.golden_dir() / selftest.EXE_INPUT).read_bytes()
    h.update(api.compress(data, level_recipe(4)))
    for fn in (mathf.exp_array, mathf.tanh_array, mathf.sigmoid_array, mathf.softplus_array,
               mathf.silu_array):
        out = np.empty_like(x)
        fn(x, out)
        h.update(out.tobytes())
    out = np.empty_like(x)
    mathf.log_array(np.exp(x), out)
    h.update(out.tobytes())
    out = np.exp(x)
    mathf.log_positive_array(out, np.empty_like(out))
    h.update(out.tobytes())
    x32 = x.astype(np.float32)
    for fn in (mathf.sigmoid_vector, mathf.silu_vector, mathf.sigmoid64_vector):
        out32 = np.empty_like(x32)
        fn(x32, out32)
        h.update(out32.tobytes())
    return h.hexdigest()


# a file of two independent blocks (-T 2), written and read by two worker processes (with
# the fastest recipe: every kernel is checked by the single-stream files above)
BLOCKED, BLOCKED_RECIPE, BLOCK_SIZE = "two-blocks", "count-models", 1 << 16
NAMES = sorted([*RECIPES, BLOCKED])


def expected(name: str, sample: bytes) -> bytes:
    return sample * (BLOCK_SIZE // len(sample) + 1) if name == BLOCKED else sample


def compress_all(data: bytes, out: Path) -> dict:
    """Every recipe's file in `out`; the digests of the kernel outputs and of every file."""
    blobs = {}
    prior = probe_prior()
    for name, recipe in RECIPES.items():
        blob = api.compress(data, recipe, prior=prior if name.startswith("prior") else None)
        (out / f"{name}.rwkz").write_bytes(blob)
        blobs[name] = hashlib.sha256(blob).hexdigest()
    blob = api.compress(expected(BLOCKED, data), RECIPES[BLOCKED_RECIPE], threads=2,
                        block_size=BLOCK_SIZE)
    (out / f"{BLOCKED}.rwkz").write_bytes(blob)
    blobs[BLOCKED] = hashlib.sha256(blob).hexdigest()
    return {"kernels": kernel_digest(), "blobs": blobs}


def decompress_all(src: Path, out: Path) -> None:
    prior = probe_prior()
    for name in NAMES:
        blob = (src / f"{name}.rwkz").read_bytes()
        (out / f"{name}.out").write_bytes(api.decompress(blob, prior=prior, threads=2))


def target_env(target: str) -> dict:
    """The environment of a process built for `target`, with a kernel cache of its own:
    numba keeps one index per function, and a process that saves it for another target can
    drop an entry the host just wrote (other test workers would then compile that kernel
    again, uninterruptibly)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    env.update(TARGETS[target])
    if os.environ.get("NUMBA_CACHE_DIR"):  # set by rwkvzip on import where one is writable
        env["NUMBA_CACHE_DIR"] = f"{os.environ['NUMBA_CACHE_DIR']}-{target}"
    return env


def probe_all(args: dict[str, tuple]) -> dict[str, str]:
    """`probe *args[target]` in one process per target, all at once; each one's output."""
    procs = {t: subprocess.Popen([sys.executable, __file__, *map(str, a)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=target_env(t)) for t, a in args.items()}
    outs = {}
    for target, proc in procs.items():
        out, err = proc.communicate(timeout=1200)
        assert proc.returncode == 0, f"{target}: {err.decode()[-3000:]}"
        outs[target] = out.decode()
    return outs


def run_targets(targets: list[str], sample: Path, root: Path) -> dict:
    """Each target's digests beside the host's, and where each side decoded the other's
    files: {target: {"host": report, "target": report, "decoded": {"host": dir,
    "target": dir}}}.

    The targets' processes compile their kernels first, all at once; the host codes after
    them, when the tests on the other workers have compiled most of its kernels meanwhile
    (compiling them here too would do that work twice); then each target decodes the
    host's files, and the host each target's."""
    host = root / "host"
    host.mkdir()
    dirs = {t: {name: root / t / name for name in ("files", "decoded", "host-decoded")}
            for t in targets}
    for d in dirs.values():
        for path in d.values():
            path.mkdir(parents=True)
    made = probe_all({t: (sample, dirs[t]["files"]) for t in targets})
    report = compress_all(sample.read_bytes(), host)
    probe_all({t: (sample, dirs[t]["files"], host, dirs[t]["decoded"], "--decode-only")
               for t in targets})
    runs = {}
    for t in targets:
        decompress_all(dirs[t]["files"], dirs[t]["host-decoded"])
        runs[t] = {"host": report, "target": json.loads(made[t]),
                   "decoded": {"host": dirs[t]["host-decoded"], "target": dirs[t]["decoded"]}}
    return runs


def main() -> None:
    """probe IN DIR [SRC_DIR OUT_DIR [--decode-only]]"""
    args = sys.argv[1:]
    decode_only = args[-1] == "--decode-only"
    src, out, *rest = map(Path, args[:-1] if decode_only else args)
    if not decode_only:
        print(json.dumps(compress_all(src.read_bytes(), out)))
    if rest:
        decompress_all(*rest)


if __name__ == "__main__":
    main()
