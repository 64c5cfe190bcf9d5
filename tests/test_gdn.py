"""Gated DeltaNet: the forward step against an independent float64 NumPy model, a pinned
bit-exact digest, and the backward step's gradient of a multi-step loss (truncated BPTT over
the whole sequence) against central finite differences of the NumPy model, for entries of every
parameter tensor and of the initial recurrent state (conv memory and S)."""

import hashlib

import numpy as np
import pytest

from rwkvzip.net import common
from rwkvzip.net.gdn import forward as gdn
from rwkvzip.net.gdn.backward import backward_step
from rwkvzip.net.gdn.model import GdnConfig, GdnModel
from rwkvzip.ops import linalg
from rwkvzip.ops.bf16 import NO_COPY

from gradcheck import (
    central_difference,
    check_deterministic_and_accumulating,
    check_parameters,
    close,
    kernel_gradients,
    pick,
)


def grads(model, W, state0, tokens, symbols, floor):
    return kernel_gradients(gdn.forward_step, backward_step, model, W, state0, tokens,
                            symbols, floor)


VOCAB = 256


def sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def silu(z):
    return z * sig(z)


def rms(x, w, eps=1e-6):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w


def ln(x, w, b, eps=1e-5):
    return (x - x.mean()) / np.sqrt(x.var() + eps) * w + b


def split_state(cfg, state):
    """Per layer (conv memory (Kc - 1, QKV), S (Hv, dk, dv)) in float64, from the flat state."""
    st = np.asarray(state, np.float64)
    Kc, QKV = cfg.conv_kernel, cfg.qkv_dim
    n_mem = (Kc - 1) * QKV
    per = cfg.layer_state_size
    out = []
    for l in range(cfg.layers):
        base = l * per
        mem = st[base:base + n_mem].reshape(Kc - 1, QKV).copy()
        S = st[base + n_mem:base + per].reshape(cfg.value_heads, cfg.key_dim,
                                                cfg.value_dim).copy()
        out.append((mem, S))
    return out


def numpy_run(cfg, t, state0, tokens):
    """Float64 GDN written from the maths on tensors t in file orientation (out, in).

    Returns the logits of every step and the final per-layer (conv memory, S).
    """
    Hk, Hv, dk, dv = cfg.key_heads, cfg.value_heads, cfg.key_dim, cfg.value_dim
    KD = Hk * dk
    layers = split_state(cfg, state0)
    all_logits = []
    for tok in tokens:
        x = t["model.embeddings.weight"][tok]
        for l in range(cfg.layers):
            p = f"model.layers.{l}."
            mem, S = layers[l]
            xn = rms(x, t[p + "input_layernorm.weight"])
            qkv = t[p + "linear_attn.in_proj_qkv.weight"] @ xn
            z = t[p + "linear_attn.in_proj_z.weight"] @ xn
            beta = sig(t[p + "linear_attn.in_proj_b.weight"] @ xn)
            a = t[p + "linear_attn.in_proj_a.weight"] @ xn + t[p + "linear_attn.dt_bias"]
            g = np.exp(-np.exp(t[p + "linear_attn.A_log"]) * np.logaddexp(0.0, a))
            window = np.vstack([mem, qkv[None, :]])  # (Kc, QKV), oldest first
            w_conv = t[p + "linear_attn.conv1d.weight"][:, 0, :]  # (QKV, Kc)
            c = silu(np.sum(w_conv.T * window, axis=0))
            mem = window[1:]
            q = c[:KD].reshape(Hk, dk)
            k = c[KD:2 * KD].reshape(Hk, dk)
            v = c[2 * KD:].reshape(Hv, dv)
            q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-6)
            k = k / np.maximum(np.linalg.norm(k, axis=1, keepdims=True), 1e-6)
            S = S.copy()
            o = np.empty((Hv, dv))
            for h in range(Hv):
                kh = h * Hk // Hv
                decayed = g[h] * S[h]
                S[h] = decayed + np.outer(k[kh], beta[h] * (v[h] - decayed.T @ k[kh]))
                o[h] = S[h].T @ q[kh] / np.sqrt(dk)
            layers[l] = (mem, S)
            y = rms(o, t[p + "linear_attn.norm.weight"]) * silu(z.reshape(Hv, dv))
            x = x + t[p + "linear_attn.out_proj.weight"] @ y.ravel()
            hn = rms(x, t[p + "post_attention_layernorm.weight"])
            act = silu(t[p + "mlp.gate_proj.weight"] @ hn) * (t[p + "mlp.up_proj.weight"] @ hn)
            x = x + t[p + "mlp.down_proj.weight"] @ act
        xo = ln(x, t["model.norm.weight"], t["model.norm.bias"])
        all_logits.append(t["lm_head.weight"] @ xo + t["lm_head.bias"])
    return np.array(all_logits), layers


def numpy_loss(cfg, t, state0, tokens, symbols, floor):
    """Sum over steps of -ln((1 - 256 floor) softmax(logits)[symbol] + floor), in float64."""
    logits, _ = numpy_run(cfg, t, state0, tokens)
    total = 0.0
    for z, sym in zip(logits, symbols, strict=True):
        q = np.exp(z - z.max())
        q /= q.sum()
        total -= np.log((1 - VOCAB * floor) * q[sym] + floor)
    return total


def tensors64(model, W):
    return {k: v.astype(np.float64) for k, v in model.layout.tensors(W).items()}


def random_state(model, rng, scale_mem=1.0, scale_s=0.3):
    """A nonzero initial state: conv memory ~ N(0, scale_mem), S ~ N(0, scale_s)."""
    cfg = model.cfg
    n_mem = (cfg.conv_kernel - 1) * cfg.qkv_dim
    state = np.zeros(model.state_size, np.float32)
    for l in range(cfg.layers):
        base = l * cfg.layer_state_size
        state[base:base + n_mem] = rng.normal(0, scale_mem, n_mem)
        state[base + n_mem:base + cfg.layer_state_size] = rng.normal(
            0, scale_s, cfg.layer_state_size - n_mem)
    return state


def run_kernel(model, W, tokens, state0=None, floor=2.0**-20):
    state = np.zeros(model.state_size, np.float32) if state0 is None else state0.copy()
    tr = np.zeros(model.trace_size, np.float32)
    lo = model.trace_global[common.T_LOGITS]
    out = []
    for tok in tokens:
        gdn.forward_step(tok, W, NO_COPY, state, tr, model.index, floor)
        out.append(tr[lo:lo + VOCAB].copy())
    return np.array(out), state, tr


FWD_CONFIGS = [
    GdnConfig(hidden=32, layers=2, key_heads=1, value_heads=2, key_dim=8, value_dim=16,
              conv_kernel=4, mlp=48),
    GdnConfig(hidden=48, layers=2, key_heads=2, value_heads=4, key_dim=16, value_dim=8,
              conv_kernel=3, mlp=64),
    GdnConfig(hidden=32, layers=1, key_heads=2, value_heads=2, key_dim=8, value_dim=8,
              conv_kernel=1, mlp=32),
]


@pytest.mark.parametrize("cfg", FWD_CONFIGS)
def test_forward_matches_float64_numpy(cfg):
    model = GdnModel(cfg)
    rng = np.random.default_rng(0)
    # Larger weights than the init so every path (conv, gates, decay, MLP) matters.
    W = (model.init_params(11) + rng.normal(0, 0.15, model.layout.size)).astype(np.float32)
    state0 = random_state(model, rng)
    tokens = [72, 101, 108, 108, 111, 32, 119, 0, 255, 10, 10, 65]
    logits, state, tr = run_kernel(model, W, tokens, state0)
    want, layers = numpy_run(cfg, tensors64(model, W), state0, tokens)
    for step in range(len(tokens)):
        np.testing.assert_allclose(logits[step], want[step], rtol=2e-4,
                                   atol=2e-4 * np.abs(want[step]).max())
    for (mem, S), (kmem, kS) in zip(layers, split_state(cfg, state), strict=True):
        np.testing.assert_allclose(kmem, mem, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(kS, S, rtol=2e-4, atol=2e-4 * np.abs(S).max())
    # the coded distribution is the floored softmax of the logits
    q = np.exp(want[-1] - want[-1].max())
    q /= q.sum()
    p0 = model.trace_global[common.T_P]
    np.testing.assert_allclose(tr[p0:p0 + VOCAB], (1 - VOCAB * 2.0**-20) * q + 2.0**-20,
                               rtol=1e-3, atol=1e-7)


def forward_digest() -> str:
    """SHA-256 over logits, coded probabilities and final state for a fixed seed and input."""
    model = GdnModel(FWD_CONFIGS[1])
    logits, state, tr = run_kernel(model, model.init_params(2024),
                                   list(b"The quick brown fox \x00\xff"))
    p = model.trace_global[common.T_P]
    h = hashlib.sha256()
    for part in (logits, tr[p:p + VOCAB], state):
        h.update(np.ascontiguousarray(part, dtype="<f4").tobytes())
    return h.hexdigest()


PINNED_FORWARD_DIGEST = "d2d96f77b944b7d9583ecc8d22ca69869b254c03105ce8fbfd36034a21c6b9b7"


def test_forward_bit_exact_checksum():
    assert forward_digest() == PINNED_FORWARD_DIGEST


def test_init_is_seeded_and_in_range():
    cfg = GdnConfig(hidden=32, layers=2, key_heads=2, value_heads=8, key_dim=8, value_dim=8,
                    conv_kernel=4, mlp=32)
    model = GdnModel(cfg)
    a, b, c = model.init_params(5), model.init_params(5), model.init_params(6)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    t = model.layout.tensors(a)
    for l in range(cfg.layers):
        p = f"model.layers.{l}."
        A = np.exp(t[p + "linear_attn.A_log"].astype(np.float64))
        assert np.all((A >= 1.0 - 1e-5) & (A < 16.0 + 1e-4)) and A.max() - A.min() > 1.0
        dt = np.logaddexp(0.0, t[p + "linear_attn.dt_bias"].astype(np.float64))
        assert np.all((dt >= 1e-3 * (1 - 1e-4)) & (dt < 0.1 * (1 + 1e-4)))
        assert dt.max() / dt.min() > 2.0
        for norm in ("input_layernorm", "post_attention_layernorm", "linear_attn.norm"):
            assert np.all(t[p + norm + ".weight"] == 1.0)
        assert np.abs(t[p + "linear_attn.conv1d.weight"]).max() <= 0.5
    assert np.abs(t["lm_head.weight"]).max() <= 0.02
    # every tensor owned by exactly one parameter slot of the index table
    n_params = common.N_GLOBAL + cfg.layers * gdn.N_LAYER
    offsets = model.index[common.N_DIMS:common.N_DIMS + n_params]
    assert sorted(offsets.tolist()) == [s.offset for s in model.layout.specs]
    assert {s.group for s in model.layout.specs} == {"embed", "norm", "attn", "ffn", "head",
                                                     "bias"}


def test_config_validation():
    GdnConfig().validate()
    for bad in (dict(hidden=40), dict(value_heads=3), dict(conv_kernel=0), dict(layers=0),
                dict(key_dim=0), dict(mlp=0)):
        with pytest.raises(ValueError):
            GdnConfig(**bad).validate()


# ---- backward --------------------------------------------------------------------------


def test_norm_backward_helpers():
    """linalg.rms_norm_backward and l2_normalize_backward (both branches of the clamp)."""
    rng = np.random.default_rng(7)
    n = 12
    x = rng.normal(0, 1, 2 * n).astype(np.float32)
    x[n:] *= 1e-8  # the second group's norm is below the clamp
    w = rng.normal(1, 0.3, n).astype(np.float32)
    gy = rng.normal(0, 1, 2 * n).astype(np.float32)
    x64, w64, gy64 = (a.astype(np.float64) for a in (x, w, gy))

    y = np.zeros_like(x)
    gx = np.zeros_like(x)
    linalg.l2_normalize(x, 2, n, 1e-6, y)
    linalg.l2_normalize_backward(x, y, gy, 2, n, 1e-6, gx)
    y0 = x64[:n] / np.linalg.norm(x64[:n])
    want = (gy64[:n] - y0 * (y0 @ gy64[:n])) / np.linalg.norm(x64[:n])
    np.testing.assert_allclose(gx[:n], want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    np.testing.assert_allclose(gx[n:], gy64[n:] / 1e-6, rtol=1e-6)

    def f(v):
        return gy64[:n] @ rms(v, w64)

    gx = np.full(n, 0.5, np.float32)  # accumulates onto what is there
    Gw = np.zeros(n, np.float32)
    linalg.rms_norm_backward(x[:n], w, gy[:n], 1e-6, n, gx, Gw)
    eye = np.eye(n) * 1e-6
    fd = np.array([(f(x64[:n] + e) - f(x64[:n] - e)) / 2e-6 for e in eye])
    np.testing.assert_allclose(gx - 0.5, fd, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(Gw, gy64[:n] * rms(x64[:n], 1.0), rtol=1e-5, atol=1e-6)


BWD_CONFIGS = [
    (GdnConfig(hidden=32, layers=2, key_heads=1, value_heads=2, key_dim=8, value_dim=8,
               conv_kernel=4, mlp=48), 1e-3),
    (GdnConfig(hidden=48, layers=2, key_heads=2, value_heads=4, key_dim=8, value_dim=12,
               conv_kernel=3, mlp=32), 2.0**-20),
]


@pytest.mark.parametrize("cfg,floor", BWD_CONFIGS)
def test_backward_matches_finite_differences(cfg, floor):
    model = GdnModel(cfg)
    rng = np.random.default_rng(1)
    W = (model.init_params(3) + rng.normal(0, 0.1, model.layout.size)).astype(np.float32)
    state0 = random_state(model, rng)
    tokens = [72, 105, 33, 10]
    symbols = [105, 33, 10, 72]

    G, gstate = grads(model, W, state0, tokens, symbols, floor)
    assert np.all(np.isfinite(G)) and np.all(np.isfinite(gstate))

    t = tensors64(model, W)
    failures = []
    worst, checked = check_parameters(
        model, G, t, lambda: numpy_loss(cfg, t, state0, tokens, symbols, floor), rng, failures)
    assert checked >= 2 * len(model.layout.specs)

    s0 = state0.astype(np.float64)

    def fd_state(idx):
        return central_difference(lambda: numpy_loss(cfg, t, s0, tokens, symbols, floor), s0,
                                  idx)

    per = cfg.layer_state_size
    n_mem = (cfg.conv_kernel - 1) * cfg.qkv_dim
    for l in range(cfg.layers):
        for part, lo, hi in (("conv", 0, n_mem), ("S", n_mem, per)):
            g = gstate[l * per + lo:l * per + hi]
            scale = float(np.abs(g).max())
            assert scale > 0.0, f"layer {l} {part}: zero state gradient"
            idxs = pick(g, rng, n_top=2, n_rand=3)
            if part == "conv":  # the oldest memory row too (it only feeds the conv)
                oldest = np.abs(g[:cfg.qkv_dim])
                idxs.append(int(np.argmax(oldest)))
            for idx in idxs:
                fd = fd_state(l * per + lo + idx)
                worst = max(worst, abs(g[idx] - fd) / (abs(fd) + 1e-30))
                if not close(g[idx], fd, scale):
                    failures.append(f"state layer {l} {part}[{idx}]: kernel {g[idx]:.6g} "
                                    f"fd {fd:.6g}")
    assert not failures, "\n".join(failures) + f"\n(worst relative error {worst:.3g})"


def test_backward_is_deterministic_and_accumulates():
    cfg, floor = BWD_CONFIGS[0]
    model = GdnModel(cfg)
    rng = np.random.default_rng(2)
    W = (model.init_params(4) + rng.normal(0, 0.1, model.layout.size)).astype(np.float32)
    state0 = random_state(model, rng, 0.5, 0.5)
    check_deterministic_and_accumulating(gdn.forward_step, backward_step, model, W, state0,
                                         floor)
