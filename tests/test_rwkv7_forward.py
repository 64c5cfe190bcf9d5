"""RWKV-7 forward: against an independent float64 NumPy model, the reference design's published
checksums, and pinned bit-exact digests."""

import hashlib

import numpy as np
import pytest

from rwkvzip.net import common
from rwkvzip.net.rwkv7 import forward as rwkv7
from rwkvzip.net.rwkv7.model import Rwkv7Config, Rwkv7Model
from rwkvzip.ops.bf16 import NO_COPY

FLOOR = 2.0**-20


class NumpyRwkv7:
    """Float64 RWKV-7 written from the maths, on tensors in file orientation (out, in)."""

    def __init__(self, model: Rwkv7Model, W: np.ndarray):
        self.cfg = model.cfg
        self.t = {k: v.astype(np.float64) for k, v in model.layout.tensors(W).items()}
        C, H = self.cfg.hidden, self.cfg.heads
        self.att_prev = [np.zeros(C) for _ in range(self.cfg.layers)]
        self.ffn_prev = [np.zeros(C) for _ in range(self.cfg.layers)]
        self.S = [np.zeros((H, 64, 64)) for _ in range(self.cfg.layers)]  # S[h, value, key]

    @staticmethod
    def ln(x, w, b, eps=1e-5):
        return (x - x.mean()) / np.sqrt(x.var() + eps) * w + b

    def step(self, token: int) -> np.ndarray:
        t, cfg = self.t, self.cfg
        H = cfg.heads
        sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
        x = t["model.embeddings.weight"][token].copy()
        v_first = None
        for l in range(cfg.layers):
            p = f"model.layers.{l}."
            if l == 0:
                x = self.ln(x, t[p + "pre_norm.weight"], t[p + "pre_norm.bias"])
            xa = self.ln(x, t[p + "attn_norm.weight"], t[p + "attn_norm.bias"])
            d = self.att_prev[l] - xa
            self.att_prev[l] = xa
            mix = {n: xa + d * t[p + "attn.x_" + n] for n in "rwkvag"}
            r = t[p + "attn.r_proj.weight"] @ mix["r"]
            k = t[p + "attn.k_proj.weight"] @ mix["k"]
            v = t[p + "attn.v_proj.weight"] @ mix["v"]
            w_pre = (t[p + "attn.w_lora.lora.2.weight"]
                     @ np.tanh(t[p + "attn.w_lora.lora.0.weight"] @ mix["w"])
                     + t[p + "attn.w_lora.lora.2.bias"])
            w = np.exp(-sig(w_pre) / np.sqrt(np.e))
            a = sig(t[p + "attn.a_lora.lora.2.weight"] @ (t[p + "attn.a_lora.lora.0.weight"]
                                                           @ mix["a"])
                    + t[p + "attn.a_lora.lora.2.bias"])
            g = t[p + "attn.g_lora.lora.2.weight"] @ sig(t[p + "attn.g_lora.lora.0.weight"]
                                                         @ mix["g"])
            if l == 0:
                v_first = v.copy()
            else:
                nu = sig(t[p + "attn.v_lora.lora.2.weight"]
                         @ (t[p + "attn.v_lora.lora.0.weight"] @ mix["v"])
                         + t[p + "attn.v_lora.lora.2.bias"])
                v = v + (v_first - v) * nu
            kk = (k * t[p + "attn.k_k"]).reshape(H, 64)
            kk = (kk / np.maximum(np.linalg.norm(kk, axis=1, keepdims=True), 1e-12)).ravel()
            k = k * (1 + (a - 1) * t[p + "attn.k_a"])
            y = np.empty(cfg.hidden)
            for h in range(H):
                sl = slice(h * 64, (h + 1) * 64)
                S = self.S[l][h]
                S[:] = (S * w[sl][None, :] - np.outer(S @ kk[sl], kk[sl] * a[sl])
                        + np.outer(v[sl], k[sl]))
                y[sl] = S @ r[sl]
            yg = y.reshape(H, 64)
            yg = (yg - yg.mean(1, keepdims=True)) / np.sqrt(yg.var(1, keepdims=True) + 64e-5)
            y = yg.ravel() * t[p + "attn.g_norm.weight"] + t[p + "attn.g_norm.bias"]
            bonus = (r * k * t[p + "attn.r_k"]).reshape(H, 64).sum(1)
            y = y + np.repeat(bonus, 64) * v
            x = x + t[p + "attn.o_proj.weight"] @ (y * g)
            xf = self.ln(x, t[p + "ffn_norm.weight"], t[p + "ffn_norm.bias"])
            xk = xf + (self.ffn_prev[l] - xf) * t[p + "ffn.x_k"]
            self.ffn_prev[l] = xf
            x = x + t[p + "ffn.value.weight"] @ np.maximum(t[p + "ffn.key.weight"] @ xk, 0) ** 2
        xn = self.ln(x, t["model.norm.weight"], t["model.norm.bias"])
        return t["lm_head.weight"] @ xn + t["lm_head.bias"]


def run_kernel(model, W, tokens):
    state = np.zeros(model.state_size, np.float32)
    tr = np.zeros(model.trace_size, np.float32)
    lo = model.trace_global[common.T_LOGITS]
    out = []
    for tok in tokens:
        rwkv7.forward_step(tok, W, NO_COPY, state, tr, model.index, FLOOR)
        out.append(tr[lo:lo + 256].copy())
    return np.array(out), state, tr


@pytest.mark.parametrize("cfg", [
    Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8, a_rank=8, v_rank=8, g_rank=16),
    Rwkv7Config(hidden=128, layers=3, ffn=256, decay_rank=16, a_rank=8, v_rank=12, g_rank=32),
])
def test_forward_matches_float64_numpy(cfg):
    model = Rwkv7Model(cfg)
    W = model.init_params(11)
    # Larger weights than the init so every path (decay, gates, residual mix) matters.
    rng = np.random.default_rng(0)
    W = (W + rng.normal(0, 0.15, W.shape)).astype(np.float32)
    ref = NumpyRwkv7(model, W)
    tokens = [72, 101, 108, 108, 111, 32, 119, 0, 255, 10, 10, 65]
    logits, _, _ = run_kernel(model, W, tokens)
    for t, tok in enumerate(tokens):
        want = ref.step(tok)
        np.testing.assert_allclose(logits[t], want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def _checksum(a):
    a = np.asarray(a, np.float64).ravel()
    return float(np.sum((np.arange(len(a)) + 1) * a))


def test_matches_reference_design_snapshot():
    """Same seeded init and maths as the reference design: its published checksums agree."""
    cfg = Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=16, a_rank=16, v_rank=16,
                      g_rank=32)
    model = Rwkv7Model(cfg)
    W = model.init_params(0x123456789ABCDEF0)
    tokens = [0, 1, 7, 42, 255, 3, 128, 64, 17, 99]
    logits, state, tr = run_kernel(model, W, tokens)
    probes = logits[:, [0, 1, 2, 42, 127, 255]]
    per_layer = 2 * 64 + 64 * 64
    wkv0 = state[128:per_layer].reshape(64, 64).T  # reference stores S[value, key]
    vf = model.trace_global[common.T_VFIRST]
    assert _checksum(probes) == pytest.approx(25.674967924598604, abs=2e-4)
    assert _checksum(logits[-1, :8]) == pytest.approx(0.6798738166689873, abs=2e-4)
    assert _checksum(wkv0) == pytest.approx(129.96246423722232, abs=2e-4)
    assert _checksum(state[per_layer:per_layer + 64]) == pytest.approx(-231.32620857097208,
                                                                       abs=2e-4)
    assert _checksum(tr[vf:vf + 64]) == pytest.approx(-1.9213613774627447, abs=2e-4)


def forward_digest() -> str:
    """SHA-256 over logits, coded probabilities and final state for a fixed seed and input."""
    cfg = Rwkv7Config(hidden=64, layers=2, ffn=128, decay_rank=8, a_rank=8, v_rank=8,
                      g_rank=16)
    model = Rwkv7Model(cfg)
    W = model.init_params(2024)
    logits, state, tr = run_kernel(model, W, list(b"The quick brown fox \x00\xff"))
    p = model.trace_global[common.T_P]
    h = hashlib.sha256()
    for part in (logits, tr[p:p + 256], state):
        h.update(np.ascontiguousarray(part, dtype="<f4").tobytes())
    return h.hexdigest()


PINNED_FORWARD_DIGEST = "6caa06888c34957472fb0ecdd713b1c657ba65cd0e4024f051b728d4a2475a93"


def test_forward_bit_exact_checksum():
    assert forward_digest() == PINNED_FORWARD_DIGEST


def test_init_is_a_pure_function_of_the_seed():
    model = Rwkv7Model(Rwkv7Config(hidden=64, layers=2, ffn=64, decay_rank=8, a_rank=8,
                                   v_rank=8, g_rank=8))
    a, b, c = model.init_params(5), model.init_params(5), model.init_params(6)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
