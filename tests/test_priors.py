"""Prior files: identity, refusal of anything else, headers that record them, decoding that
needs them, the frozen mode, training your own (API and CLI)."""

import hashlib
import io
import json
from dataclasses import replace

import numpy as np
import pytest

import rwkvzip
from rwkvzip import listing, priors, training
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import container
from rwkvzip.coding.codec import Predictor
from rwkvzip.corpus import CorpusError
from rwkvzip.modelfile import save_model
from rwkvzip.net.gdn.model import GdnConfig, GdnModel
from rwkvzip.ops.bf16 import matrices_exact
from rwkvzip.recipe import (
    DEFAULT_LEVEL,
    DEFAULT_PRESET,
    LEVELS,
    Recipe,
    RecipeError,
    level_recipe,
    preset_by_name,
    preset_cards,
)

SMALL = GdnConfig(hidden=16, layers=1, key_heads=1, value_heads=1, key_dim=16, value_dim=16,
                  mlp=32)
TEXT = b"A prior is a network that has read text before it sees yours. " * 40


def make_prior(path, seed=1, cfg=SMALL):
    model = GdnModel(cfg)
    return priors.save_prior(path, model, model.init_params(seed), "ab" * 32, {"note": "t"})


def small_recipe(**kw) -> Recipe:
    """The network mixed with small context-model tables; frozen (lr 0) unless told."""
    base = Recipe(arch="gdn", model=SMALL, lr=0.0, bptt=0,
                  mix=MixConfig(table_bits=12, match_bits=12))
    return replace(base, **kw)


@pytest.fixture
def prior_file(tmp_path):
    path = tmp_path / "p.safetensors"
    make_prior(path)
    return path


def test_identity_is_the_file_digest(prior_file):
    digest = hashlib.sha256(prior_file.read_bytes()).hexdigest()
    p = priors.load_prior(prior_file)
    assert p.digest == digest
    assert priors.load_prior(prior_file.read_bytes()).digest == digest
    assert p.model.cfg == SMALL and p.W.dtype == np.float32
    assert p.training["note"] == "t" and p.metadata[priors.KEY_MANIFEST] == "ab" * 32
    assert not p.W.flags.writeable  # shared by every stream: never trained in place


def test_not_a_prior_is_one_clear_error(tmp_path, prior_file):
    plain = tmp_path / "plain.safetensors"
    model = GdnModel(SMALL)
    save_model(plain, model, model.init_params(0))
    with pytest.raises(priors.PriorError, match="not an rwkvzip prior"):
        priors.load_prior(plain)
    with pytest.raises(priors.PriorError, match="not a safetensors file"):
        priors.load_prior(b"hello, this is not a model file at all")
    with pytest.raises(priors.PriorError, match="No such file"):
        priors.load_prior(tmp_path / "missing.safetensors")
    data = bytearray(prior_file.read_bytes())
    data[-8] ^= 0x01  # a low mantissa bit of the last tensor: still a finite float
    with pytest.raises(priors.PriorError, match="damaged prior"):
        priors.load_prior(bytes(data))
    with pytest.raises(priors.PriorError):
        priors.load_prior(bytes(data[:len(data) // 2]))


def test_roundtrip_with_prior_and_refusals(tmp_path, prior_file):
    blob = rwkvzip.compress(TEXT, recipe=small_recipe(), prior=prior_file)
    assert blob[:5] == container.MAGIC + bytes([container.PRIOR_VERSION])
    assert rwkvzip.decompress(blob, prior=prior_file) == TEXT
    digest = priors.load_prior(prior_file).digest
    with pytest.raises(priors.PriorError, match=f"sha256:{digest}"):
        rwkvzip.decompress(blob)
    other = tmp_path / "other.safetensors"
    make_prior(other, seed=2)
    with pytest.raises(priors.PriorError, match="not .*other.safetensors"):
        rwkvzip.decompress(blob, prior=other)
    # the weights matter: the seeded start codes the same data differently
    assert rwkvzip.compress(TEXT, recipe=small_recipe(lr=0.001, bptt=8)) != \
        rwkvzip.compress(TEXT, recipe=small_recipe(lr=0.001, bptt=8), prior=prior_file)


def test_adapting_prior_roundtrips_and_stream_api(prior_file):
    recipe = small_recipe(lr=0.0005, bptt=8, ckpt=8)
    out = io.BytesIO()
    rwkvzip.compress_stream(io.BytesIO(TEXT), out, recipe, prior=prior_file)
    back = io.BytesIO()
    rwkvzip.decompress_stream(io.BytesIO(out.getvalue()), back, prior=prior_file)
    assert back.getvalue() == TEXT


def test_frozen_network_keeps_its_weights(prior_file):
    p = priors.load_prior(prior_file)
    recipe = replace(small_recipe(), prior=p.digest)
    pred = Predictor(recipe, p.W)
    pred.encode_frame(TEXT)
    assert np.array_equal(pred.W, p.W)


def test_card_with_a_users_prior_is_a_compact_header(tmp_path):
    """A card whose network has the prior's size keeps its one-byte id plus the digest."""
    card = preset_by_name(DEFAULT_PRESET)
    model = card.recipe.build_model()
    path = tmp_path / "gdn.safetensors"
    priors.save_prior(path, model, model.init_params(3), "00" * 32, {})
    p = priors.load_prior(path)
    recipe = priors.with_prior(card.recipe, p)
    header = container.encode_header(recipe)
    assert header == (container.MAGIC + bytes([container.PRIOR_VERSION, card.id])
                      + bytes.fromhex(p.digest))
    assert container.read_header(io.BytesIO(header)) == recipe
    assert listing.recipe_label(recipe) == f"{DEFAULT_PRESET} prior sha256:{p.digest[:16]}"


def test_header_refuses_a_prior_on_a_recipe_without_network():
    card = preset_by_name("fast-v2")
    header = container.MAGIC + bytes([container.PRIOR_VERSION, card.id]) + b"\x11" * 32
    with pytest.raises(container.FormatError, match="takes no prior"):
        container.read_header(io.BytesIO(header))
    with pytest.raises(container.FormatError, match="truncated"):
        container.read_header(io.BytesIO(header[:-3]))
    with pytest.raises(RecipeError, match="no network"):
        priors.with_prior(preset_by_name("fast-v2").recipe,
                          priors.Prior("0" * 64, "x", GdnModel(SMALL), np.zeros(1), {}))


def test_recipe_json_keeps_old_bytes_and_checks_digest():
    r = small_recipe()
    assert "prior" not in json.loads(r.to_json())
    with_digest = replace(r, prior="ab" * 32)
    assert Recipe.from_json(with_digest.to_json()) == with_digest
    with pytest.raises(RecipeError, match="SHA-256"):
        replace(r, prior="xyz").validate()


def test_train_api_improves_on_held_out_samples(tmp_path):
    samples = tmp_path / "samples"
    samples.mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):  # JSON lines of one shape: easy to learn, not in any prior
        rows = [json.dumps({"id": int(k), "user": f"u{int(k) % 7}", "ok": bool(k % 2)})
                for k in rng.integers(0, 10_000, 60)]
        (samples / f"part{i}.jsonl").write_text("\n".join(rows) + "\n")
    (samples / "LICENSE").write_text("never trained on")
    out = tmp_path / "mine.prior"
    report = rwkvzip.train([samples], out, level=7, from_scratch=True, seconds=60, epochs=2)
    assert out.read_bytes() == report.prior
    assert report.val_after < report.val_before
    p = priors.load_prior(out)
    assert p.digest == report.digest and p.model.cfg == level_recipe(7).model
    # -7 runs its prior frozen from bfloat16 matrices: the trained ones are rounded so too
    assert matrices_exact(p.W, p.model.layout.twin_table())
    assert p.training["val_bpb"] == pytest.approx(report.val_after, abs=1e-4)
    # the training samples are small: the dictionary keeps them all (the held-out ones not)
    assert 0 < len(p.dictionary) == report.dictionary_bytes < report.train_bytes + 1
    assert p.metadata[priors.KEY_FORMAT] == priors.PRIOR_FORMAT_DICT


def dictionary_prior(path, dictionary, seed=1):
    model = GdnModel(SMALL)
    return priors.save_prior(path, model, model.init_params(seed), "ab" * 32, {}, dictionary)


def test_a_dictionary_primes_every_stream_and_is_part_of_the_identity(tmp_path):
    """A format-2 prior's dictionary is learnt before every stream (and every block): a
    short file of the same kind codes smaller, decodes only with that prior, and a damaged
    dictionary is refused at load."""
    plain, primed = tmp_path / "plain.safetensors", tmp_path / "primed.safetensors"
    make_prior(plain)
    boiler = b'{"event":"request","path":"/api/v1/orders","status":200,"latency_ms":'
    dict_prior = dictionary_prior(primed, b"".join(boiler + b"%d}\n" % i for i in range(60)))
    assert dict_prior != priors.load_prior(plain).digest
    p = priors.load_prior(primed)
    assert p.metadata[priors.KEY_FORMAT] == priors.PRIOR_FORMAT_DICT
    assert p.dictionary.startswith(boiler)
    assert np.array_equal(p.W, priors.load_prior(plain).W)  # the same weights
    data = b"".join(boiler + b"%d}\n" % (7 * i) for i in range(6))
    recipe = small_recipe(lr=0.0005, bptt=8, ckpt=8)
    with_dict = rwkvzip.compress(data, recipe=recipe, prior=primed)
    assert len(with_dict) < len(rwkvzip.compress(data, recipe=recipe, prior=plain)) - 40
    assert rwkvzip.decompress(with_dict, prior=primed) == data
    with pytest.raises(priors.PriorError, match=f"sha256:{p.digest}"):
        rwkvzip.decompress(with_dict, prior=plain)
    blocks = rwkvzip.compress(data * 150, recipe=recipe, prior=primed, block_size=65536)
    assert rwkvzip.decompress(blocks, prior=primed) == data * 150
    # the safetensors library reads it; a flipped dictionary byte is damage
    from safetensors.numpy import load

    assert load(primed.read_bytes())[priors.DICTIONARY_TENSOR].tobytes() == p.dictionary
    raw = bytearray(primed.read_bytes())
    at = raw.index(boiler[:20], 8 + 64)
    raw[at] ^= 0x20
    with pytest.raises(priors.PriorError, match="dictionary does not match"):
        priors.load_prior(bytes(raw))


def test_train_refuses_levels_without_network_and_empty_samples(tmp_path):
    with pytest.raises(RecipeError, match="no network"):
        training.train([tmp_path], level=1)
    (tmp_path / "COPYING").write_text("licence")
    with pytest.raises(CorpusError, match="no usable sample"):
        training.train([tmp_path], level=7, from_scratch=True)


def test_same_weights_same_file_and_library_compatible(tmp_path):
    """The identity is reproducible (sorted header), and the safetensors library reads it."""
    from safetensors.numpy import load

    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert make_prior(a) == make_prior(b)
    assert a.read_bytes() == b.read_bytes()
    p = priors.load_prior(a)
    tensors = load(a.read_bytes())
    assert set(tensors) == {s.name for s in p.model.layout.specs}
    assert np.array_equal(tensors["lm_head.weight"], p.model.layout.get(p.W, "lm_head.weight"))


def test_shipped_priors_start_the_levels_with_a_network():
    """Every card that names a prior finds it in the package; the default level has one."""
    named = {card.recipe.prior for card in preset_cards().values() if card.recipe.prior}
    assert level_recipe(DEFAULT_LEVEL).prior in named
    for digest in named:
        p = priors.shipped_prior(digest)
        assert p is not None and p.digest == digest
        assert p.metadata[priors.KEY_MANIFEST] and p.training["val_bpb"]
    for level in LEVELS:
        r = level_recipe(level)
        if r.prior:
            assert priors.resolve(r).matches(r)


def test_default_level_roundtrip_needs_no_flag(tmp_path):
    blob = rwkvzip.compress(TEXT)
    card_id = preset_by_name(LEVELS[DEFAULT_LEVEL]).id
    assert blob[:6] == container.MAGIC + bytes([container.FORMAT_VERSION, card_id])
    assert rwkvzip.decompress(blob) == TEXT
    assert len(blob) < len(rwkvzip.compress(TEXT, recipe=replace(level_recipe(DEFAULT_LEVEL),
                                                                  prior="")))


def test_open_with_a_prior(tmp_path, prior_file):
    path = tmp_path / "p.rwkz"
    with rwkvzip.open(path, "wb", recipe=small_recipe(), prior=prior_file) as f:
        f.write(TEXT)
    assert path.read_bytes() == rwkvzip.compress(TEXT, recipe=small_recipe(), prior=prior_file)
    with rwkvzip.open(path, prior=prior_file) as f:
        assert f.read() == TEXT
    with rwkvzip.open(path) as f, pytest.raises(priors.PriorError, match="needs the prior"):
        f.read()
