"""Model files: safetensors save/load with reference names, dtypes, and clear refusals."""

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from rwkvzip.modelfile import load_model, save_model
from rwkvzip.net import common
from rwkvzip.net.params import ModelFileError
from rwkvzip.net.rwkv7 import forward as rwkv7
from rwkvzip.net.rwkv7.model import Rwkv7Model
from rwkvzip.ops.bf16 import NO_COPY

from conftest import TINY_CONFIG


@pytest.fixture
def model_and_weights():
    model = Rwkv7Model(TINY_CONFIG)
    return model, model.init_params(3)


def logits_after(model, W, tokens=b"abc\x00"):
    state = np.zeros(model.state_size, np.float32)
    tr = np.zeros(model.trace_size, np.float32)
    for t in tokens:
        rwkv7.forward_step(t, W, NO_COPY, state, tr, model.index, 2.0**-20)
    lo = model.trace_global[common.T_LOGITS]
    return tr[lo:lo + 256].copy()


def test_save_load_predicts_bit_identically(tmp_path, model_and_weights):
    model, W = model_and_weights
    path = tmp_path / "m.safetensors"
    save_model(path, model, W)
    model2, W2 = load_model(path)
    assert model2.cfg == model.cfg
    assert np.array_equal(W, W2)
    assert np.array_equal(logits_after(model, W), logits_after(model2, W2))


def test_files_use_reference_names_and_orientation(tmp_path, model_and_weights):
    model, W = model_and_weights
    path = tmp_path / "m.safetensors"
    save_model(path, model, W)
    from safetensors.numpy import load_file

    t = load_file(str(path))
    C, F = TINY_CONFIG.hidden, TINY_CONFIG.ffn
    assert t["model.embeddings.weight"].shape == (256, C)
    assert t["model.layers.0.attn.r_proj.weight"].shape == (C, C)
    assert t["model.layers.1.ffn.key.weight"].shape == (F, C)
    assert t["lm_head.weight"].shape == (256, C)
    assert "model.layers.0.attn.v_lora.lora.0.weight" not in t  # layer 0 has no value mix
    # (out, in) orientation: r = r_proj @ x, checked on one row against the flat vector
    spec = model.layout.by_name["model.layers.0.attn.r_proj.weight"]
    flat = W[spec.offset:spec.offset + spec.size].reshape(C, C)  # input-major inside
    assert np.array_equal(t["model.layers.0.attn.r_proj.weight"], flat.T)


def test_reference_checkpoint_without_metadata_or_bias_loads(tmp_path, model_and_weights):
    model, W = model_and_weights
    tensors = model.layout.tensors(W)
    tensors["lm_head.bias"] = np.zeros(256, np.float32)
    bias_free = {k: v for k, v in tensors.items() if k != "lm_head.bias"}
    path = tmp_path / "ref.safetensors"
    save_file(bias_free, str(path))
    model2, W2 = load_model(path)
    assert model2.cfg == model.cfg and np.array_equal(W, W2)


def test_float16_and_bfloat16_convert_exactly(tmp_path, model_and_weights):
    model, W = model_and_weights
    tensors = model.layout.tensors(W)
    half = {k: v.astype(np.float16) for k, v in tensors.items()}
    save_file(half, str(tmp_path / "h.safetensors"),
              metadata={"rwkvzip_arch": "rwkv7",
                        "rwkvzip_config": json.dumps(TINY_CONFIG.to_dict())})
    _, Wh = load_model(tmp_path / "h.safetensors")
    assert np.array_equal(Wh, W.astype(np.float16).astype(np.float32))

    # bfloat16 written by hand (numpy has no bf16): the top 16 bits of each float32
    bf = {k: (np.ascontiguousarray(v).view(np.uint32) >> 16).astype(np.uint16)
          for k, v in tensors.items()}
    header, offset, blobs = {}, 0, []
    for k, v in bf.items():
        header[k] = {"dtype": "BF16", "shape": list(v.shape),
                     "data_offsets": [offset, offset + v.nbytes]}
        offset += v.nbytes
        blobs.append(v.tobytes())
    header["__metadata__"] = {"rwkvzip_arch": "rwkv7",
                              "rwkvzip_config": json.dumps(TINY_CONFIG.to_dict())}
    raw = json.dumps(header).encode()
    (tmp_path / "b.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    _, Wb = load_model(tmp_path / "b.safetensors")
    assert np.array_equal(Wb, ((W.view(np.uint32) >> 16) << 16).view(np.float32))


def test_non_contiguous_arrays_are_saved_in_logical_order(tmp_path, model_and_weights):
    model, W = model_and_weights
    from rwkvzip.net.params import load_safetensors, save_safetensors

    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    save_safetensors(tmp_path / "t.safetensors", {"x": m.T}, {})
    loaded, _ = load_safetensors(tmp_path / "t.safetensors")
    assert np.array_equal(loaded["x"], m.T)


def _save_variant(tmp_path, model, W, mutate):
    tensors = model.layout.tensors(W)
    mutate(tensors)
    path = tmp_path / "bad.safetensors"
    save_file(tensors, str(path), metadata={"rwkvzip_arch": "rwkv7",
                                            "rwkvzip_config": json.dumps(TINY_CONFIG.to_dict())})
    return path


def test_missing_tensor_is_refused(tmp_path, model_and_weights):
    path = _save_variant(tmp_path, *model_and_weights,
                         lambda t: t.pop("model.layers.1.attn.k_k"))
    with pytest.raises(ModelFileError, match="missing tensor model.layers.1.attn.k_k"):
        load_model(path)


def test_misshaped_tensor_is_refused(tmp_path, model_and_weights):
    def mutate(t):
        t["model.layers.0.ffn.key.weight"] = t["model.layers.0.ffn.key.weight"][:, :10].copy()

    path = _save_variant(tmp_path, *model_and_weights, mutate)
    with pytest.raises(ModelFileError, match="ffn.key.weight has shape"):
        load_model(path)


def test_unsupported_dtype_and_garbage_are_refused(tmp_path, model_and_weights):
    def mutate(t):
        t["model.norm.weight"] = t["model.norm.weight"].astype(np.int32)

    with pytest.raises(ModelFileError, match="unsupported dtype I32"):
        load_model(_save_variant(tmp_path, *model_and_weights, mutate))
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(ModelFileError, match="not a safetensors file"):
        load_model(tmp_path / "junk.safetensors")


def test_gdn_model_files_roundtrip(tmp_path):
    from rwkvzip.net.gdn.model import GdnConfig, GdnModel

    model = GdnModel(GdnConfig(hidden=32, layers=2, key_heads=1, value_heads=2, key_dim=8,
                               value_dim=8, conv_kernel=3, mlp=32))
    W = model.init_params(4)
    save_model(tmp_path / "g.safetensors", model, W)
    model2, W2 = load_model(tmp_path / "g.safetensors")
    assert model2.arch == "gdn" and model2.cfg == model.cfg and np.array_equal(W, W2)
