"""RWKV-7 backward step: the float32 kernel's gradient of a multi-step loss (truncated BPTT over
the whole sequence) against central finite differences of an independent float64 NumPy model,
for entries of every parameter tensor and of the initial recurrent state."""

import numpy as np
import pytest

from rwkvzip.net.rwkv7 import forward as rwkv7
from rwkvzip.net.rwkv7.backward import backward_step
from rwkvzip.net.rwkv7.model import HEAD_SIZE, VOCAB, Rwkv7Config, Rwkv7Model

from gradcheck import (
    central_difference,
    check_deterministic_and_accumulating,
    check_parameters,
    close,
    kernel_gradients,
    pick,
)


def grads(model, W, state0, tokens, symbols, floor):
    return kernel_gradients(rwkv7.forward_step, backward_step, model, W, state0, tokens,
                            symbols, floor)


N = HEAD_SIZE


def sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def ln(x, w, b, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def numpy_loss(cfg, t, state0, tokens, symbols, floor):
    """Sum over steps of -ln((1 - 256 floor) softmax(logits)[symbol] + floor), in float64.

    t holds the tensors in file orientation (out, in); state0 is the flat kernel state
    (per layer att_prev, ffn_prev, WKV key-major S[h, key, value]).
    """
    C, H, L = cfg.hidden, cfg.heads, cfg.layers
    st = np.asarray(state0, np.float64)
    per = 2 * C + H * N * N
    att = [st[l * per:l * per + C].copy() for l in range(L)]
    ffn = [st[l * per + C:l * per + 2 * C].copy() for l in range(L)]
    S = [st[l * per + 2 * C:(l + 1) * per].reshape(H, N, N).copy() for l in range(L)]
    total = 0.0
    for tok, sym in zip(tokens, symbols, strict=True):
        x = t["model.embeddings.weight"][tok]
        v_first = None
        for l in range(L):
            p = f"model.layers.{l}."
            if l == 0:
                x = ln(x, t[p + "pre_norm.weight"], t[p + "pre_norm.bias"])
            xa = ln(x, t[p + "attn_norm.weight"], t[p + "attn_norm.bias"])
            d = att[l] - xa
            att[l] = xa
            mix = {n: xa + d * t[p + "attn.x_" + n] for n in "rwkvag"}
            r = t[p + "attn.r_proj.weight"] @ mix["r"]
            k = t[p + "attn.k_proj.weight"] @ mix["k"]
            v = t[p + "attn.v_proj.weight"] @ mix["v"]
            w = np.exp(-sig(t[p + "attn.w_lora.lora.2.weight"]
                            @ np.tanh(t[p + "attn.w_lora.lora.0.weight"] @ mix["w"])
                            + t[p + "attn.w_lora.lora.2.bias"]) / np.sqrt(np.e))
            a = sig(t[p + "attn.a_lora.lora.2.weight"]
                    @ (t[p + "attn.a_lora.lora.0.weight"] @ mix["a"])
                    + t[p + "attn.a_lora.lora.2.bias"])
            g = t[p + "attn.g_lora.lora.2.weight"] @ sig(t[p + "attn.g_lora.lora.0.weight"]
                                                         @ mix["g"])
            if l == 0:
                v_first = v
            else:
                nu = sig(t[p + "attn.v_lora.lora.2.weight"]
                         @ (t[p + "attn.v_lora.lora.0.weight"] @ mix["v"])
                         + t[p + "attn.v_lora.lora.2.bias"])
                v = v + (v_first - v) * nu
            kk = (k * t[p + "attn.k_k"]).reshape(H, N)
            kk = kk / np.maximum(np.linalg.norm(kk, axis=1, keepdims=True), 1e-12)
            k = k * (1 + (a - 1) * t[p + "attn.k_a"])
            wh, kh, vh, ah, rh = (z.reshape(H, N) for z in (w, k, v, a, r))
            u = np.einsum("hji,hj->hi", S[l], kk)  # key-major: u[i] = sum_j S[j, i] kk[j]
            S[l] = (S[l] * wh[:, :, None] - (kk * ah)[:, :, None] * u[:, None, :]
                    + kh[:, :, None] * vh[:, None, :])
            y = np.einsum("hji,hj->hi", S[l], rh)
            y = ln(y, 1.0, 0.0, 64e-5).ravel() * t[p + "attn.g_norm.weight"] \
                + t[p + "attn.g_norm.bias"]
            bonus = (r * k * t[p + "attn.r_k"]).reshape(H, N).sum(1)
            y = y + np.repeat(bonus, N) * v
            x = x + t[p + "attn.o_proj.weight"] @ (y * g)
            xf = ln(x, t[p + "ffn_norm.weight"], t[p + "ffn_norm.bias"])
            xk = xf + (ffn[l] - xf) * t[p + "ffn.x_k"]
            ffn[l] = xf
            x = x + t[p + "ffn.value.weight"] @ np.maximum(t[p + "ffn.key.weight"] @ xk, 0) ** 2
        z = t["lm_head.weight"] @ ln(x, t["model.norm.weight"], t["model.norm.bias"]) \
            + t["lm_head.bias"]
        q = np.exp(z - z.max())
        q /= q.sum()
        total -= np.log((1 - VOCAB * floor) * q[sym] + floor)
    return total


CONFIGS = [
    (Rwkv7Config(hidden=64, layers=2, ffn=64, decay_rank=8, a_rank=8, v_rank=8, g_rank=8),
     1e-3),
    (Rwkv7Config(hidden=128, layers=3, ffn=48, decay_rank=8, a_rank=4, v_rank=6, g_rank=12),
     2.0**-20),
]


@pytest.mark.parametrize("cfg,floor", CONFIGS)
def test_backward_matches_finite_differences(cfg, floor):
    model = Rwkv7Model(cfg)
    rng = np.random.default_rng(1)
    W = (model.init_params(3) + rng.normal(0, 0.1, model.layout.size)).astype(np.float32)
    C, H = cfg.hidden, cfg.heads
    per = 2 * C + H * N * N
    state0 = np.zeros(model.state_size, np.float32)
    for l in range(cfg.layers):
        state0[l * per:l * per + 2 * C] = rng.normal(0, 1.0, 2 * C)
        state0[l * per + 2 * C:(l + 1) * per] = rng.normal(0, 0.3, H * N * N)
    tokens = [72, 105, 33, 10]
    symbols = [105, 33, 10, 72]

    G, gstate = grads(model, W, state0, tokens, symbols, floor)
    assert np.all(np.isfinite(G)) and np.all(np.isfinite(gstate))

    t = {k: v.astype(np.float64) for k, v in model.layout.tensors(W).items()}
    failures = []
    worst, checked = check_parameters(
        model, G, t, lambda: numpy_loss(cfg, t, state0, tokens, symbols, floor), rng, failures)

    s0 = state0.astype(np.float64)

    def fd_state(idx):
        return central_difference(lambda: numpy_loss(cfg, t, s0, tokens, symbols, floor), s0,
                                  idx)

    for l in range(cfg.layers):
        for part, lo, hi in (("att_prev", 0, C), ("ffn_prev", C, 2 * C), ("wkv", 2 * C, per)):
            g = gstate[l * per + lo:l * per + hi]
            scale = float(np.abs(g).max())
            assert scale > 0.0, f"layer {l} {part}: zero state gradient"
            for idx in pick(g, rng, n_top=2, n_rand=3):
                fd = fd_state(l * per + lo + idx)
                worst = max(worst, abs(g[idx] - fd) / (abs(fd) + 1e-30))
                if not close(g[idx], fd, scale):
                    failures.append(f"state layer {l} {part}[{idx}]: kernel {g[idx]:.6g} "
                                    f"fd {fd:.6g}")
    assert not failures, "\n".join(failures) + f"\n(worst relative error {worst:.3g})"


def test_backward_is_deterministic_and_accumulates():
    cfg, floor = CONFIGS[0]
    model = Rwkv7Model(cfg)
    rng = np.random.default_rng(2)
    W = (model.init_params(4) + rng.normal(0, 0.1, model.layout.size)).astype(np.float32)
    state0 = rng.normal(0, 0.5, model.state_size).astype(np.float32)
    check_deterministic_and_accumulating(rwkv7.forward_step, backward_step, model, W, state0,
                                         floor)
