"""PyTorch mirrors of the byte models, and a batched offline trainer for priors.

The compressor runs the numba kernels (rwkvzip/net/); this module restates the same
forward mathematics over whole sequences in PyTorch, so a prior can be trained the way
language models are (many documents side by side, long truncated BPTT, AdamW, a decaying
rate) instead of by the compressor's online learner, whose weights follow the last
document it read. Only the exported bytes matter: `pretrain.py export` checks that the
numba forward on the saved file gives the validation loss measured here (within 0.5 %).

Everything outside the recurrences (projections, norms, the FFN, the head) runs over the
whole (batch, time) window at once; the gated delta rule (GDN) and the WKV-7 state update
(RWKV-7) step through time. Tensors are kept under their file names and file orientation
(out, in), so export is one `Layout.set` per tensor.

Training lanes: B lanes each read documents one after another; a window is T bytes of one
document, the recurrent state carries over from the lane's previous window (detached) and
starts from zero with each document, exactly as a compressed file starts (the first input
is byte 0). A document's last window is padded, and the padding masked out of the loss.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from numba import njit

from rwkvzip.corpus import Document
from rwkvzip.net.common import LAYER_NORM_EPS
from rwkvzip.net.gdn import forward as KG  # noqa: N812
from rwkvzip.net.rwkv7 import forward as KR  # noqa: N812
from rwkvzip.net.rwkv7.model import HEAD_SIZE
from rwkvzip.recipe import PROB_FLOOR

VOCAB = 256
KEEP = 1.0 - VOCAB * PROB_FLOOR



# ---------------------------------------------------------------- recurrences
#
# The two state updates that step through time, each as a plain loop of tensor operations
# (the reference: autograd differentiates it) and as numba kernels with a hand-written
# backward (the fast path: one pass over memory per step instead of a dozen temporaries).
# tests/test_torchnet.py checks the two against each other, values and gradients.


def delta_rule_loop(q, k, v, beta, g, S):
    """Gated delta rule, q already scaled: for each t, u = S^T k, delta = beta (v - g u),
    S <- g S + k delta^T, o = S^T q. q, k: (B, T, H, dk); v: (B, T, H, dv); beta, g:
    (B, T, H); S: (B, H, dk, dv). Returns o (B, T, H, dv) and the last S."""
    outs = []
    for t in range(q.shape[1]):
        kt = k[:, t].unsqueeze(-1)  # (B, H, dk, 1)
        u = (S * kt).sum(2)
        delta = beta[:, t, :, None] * (v[:, t] - g[:, t, :, None] * u)
        S = g[:, t, :, None, None] * S + kt * delta.unsqueeze(2)
        outs.append((S * q[:, t].unsqueeze(-1)).sum(2))
    return torch.stack(outs, 1), S


DELTA_CHUNK = 64  # steps the chunked delta rule solves at once


def delta_rule_chunked(q, k, v, beta, g, S, chunk: int = DELTA_CHUNK):
    """delta_rule_loop's values, a chunk of steps at a time as matrix products (for a GPU,
    where the loop's many small steps cost a launch each). Unrolled within a chunk from its
    first state S0, with G_t the product of g up to t: S_t = G_t S0 + sum_{s<=t} (G_t / G_s)
    k_s delta_s^T, so the deltas solve one lower-triangular system (I + A) D = diag(beta)
    (V - G K S0), A_ts = beta_t (G_t / G_s) k_t.k_s for s < t, and o_t = G_t S0^T q_t +
    sum_{s<=t} (G_t / G_s) (q_t.k_s) delta_s. The ratios come from cumulative sums of log g."""
    T = q.shape[1]
    outs = []
    for lo in range(0, T, chunk):
        qc, kc, vc = (x[:, lo:lo + chunk].transpose(1, 2) for x in (q, k, v))  # (B, H, C, d)
        bc = beta[:, lo:lo + chunk].transpose(1, 2).unsqueeze(-1)  # (B, H, C, 1)
        lg = torch.cumsum(torch.log(g[:, lo:lo + chunk].transpose(1, 2).clamp_min(1e-30)), -1)
        C = qc.shape[2]
        causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
        eye = torch.eye(C, device=q.device)
        ratio = torch.where(causal, lg.unsqueeze(-1) - lg.unsqueeze(-2), -math.inf).exp()
        A = bc * (ratio - eye) * (kc @ kc.transpose(-1, -2))
        decay = lg.exp().unsqueeze(-1)  # (B, H, C, 1)
        D = torch.linalg.solve_triangular(eye + A, bc * (vc - decay * (kc @ S)), upper=False)
        outs.append((decay * (qc @ S) + (ratio * (qc @ kc.transpose(-1, -2))) @ D)
                    .transpose(1, 2))
        last = lg[..., -1:]
        S = (last.exp().unsqueeze(-1) * S
             + kc.transpose(-1, -2) @ ((last - lg).exp().unsqueeze(-1) * D))
    return torch.cat(outs, 1), S


def wkv_loop(w, k, v, kk, a, r, S):
    """WKV-7: for each t, u = S^T kk, S <- S diag(w) - (kk a) u^T + k v^T (key-major),
    y = S^T r. All of w, k, v, kk, a, r: (B, T, H, N); S: (B, H, N, N)."""
    ys = []
    for t in range(w.shape[1]):
        kkt = kk[:, t].unsqueeze(-1)
        u = (S * kkt).sum(2)
        S = (S * w[:, t].unsqueeze(-1) - (kkt * a[:, t].unsqueeze(-1)) * u.unsqueeze(2)
             + k[:, t].unsqueeze(-1) * v[:, t].unsqueeze(2))
        ys.append((S * r[:, t].unsqueeze(-1)).sum(2))
    return torch.stack(ys, 1), S


@njit(cache=True, fastmath=True)
def _delta_fwd(q, k, v, beta, g, S0, o, Ss):
    """Ss[:, t] = the state before step t (Ss[:, T] the last one)."""
    B, T, H, dk = q.shape
    dv = v.shape[3]
    u = np.empty(dv, dtype=np.float32)
    for b in range(B):
        for h in range(H):
            S = Ss[b, 0, h]
            S[:, :] = S0[b, h]
            for t in range(T):
                Sn = Ss[b, t + 1, h]
                gt = g[b, t, h]
                bt = beta[b, t, h]
                for i in range(dv):
                    u[i] = 0.0
                for j in range(dk):
                    kj = k[b, t, h, j]
                    for i in range(dv):
                        u[i] += S[j, i] * kj
                for i in range(dv):
                    u[i] = bt * (v[b, t, h, i] - gt * u[i])  # u is now delta
                for i in range(dv):
                    o[b, t, h, i] = 0.0
                for j in range(dk):
                    kj = k[b, t, h, j]
                    qj = q[b, t, h, j]
                    for i in range(dv):
                        Sn[j, i] = gt * S[j, i] + kj * u[i]
                        o[b, t, h, i] += Sn[j, i] * qj
                S = Sn


@njit(cache=True, fastmath=True)
def _delta_bwd(q, k, v, beta, g, Ss, do, dSl, dq, dk_, dv_, dbeta, dg, dS0):
    B, T, H, dk = q.shape
    dv = v.shape[3]
    dS = np.empty((dk, dv), dtype=np.float32)
    u = np.empty(dv, dtype=np.float32)
    delta = np.empty(dv, dtype=np.float32)
    dd = np.empty(dv, dtype=np.float32)
    for b in range(B):
        for h in range(H):
            dS[:, :] = dSl[b, h]
            for t in range(T - 1, -1, -1):
                S = Ss[b, t, h]
                Sn = Ss[b, t + 1, h]
                gt = g[b, t, h]
                bt = beta[b, t, h]
                # o = Sn^T q
                for j in range(dk):
                    acc = 0.0
                    qj = q[b, t, h, j]
                    for i in range(dv):
                        acc += Sn[j, i] * do[b, t, h, i]
                        dS[j, i] += qj * do[b, t, h, i]
                    dq[b, t, h, j] = acc
                # recompute u, delta
                for i in range(dv):
                    u[i] = 0.0
                for j in range(dk):
                    kj = k[b, t, h, j]
                    for i in range(dv):
                        u[i] += S[j, i] * kj
                for i in range(dv):
                    delta[i] = bt * (v[b, t, h, i] - gt * u[i])
                # Sn = g S + k delta^T
                dgt = 0.0
                for i in range(dv):
                    dd[i] = 0.0
                for j in range(dk):
                    kj = k[b, t, h, j]
                    acc = 0.0
                    for i in range(dv):
                        dgt += dS[j, i] * S[j, i]
                        acc += dS[j, i] * delta[i]
                        dd[i] += dS[j, i] * kj
                    dk_[b, t, h, j] = acc
                # delta = beta (v - g u)
                dbt = 0.0
                for i in range(dv):
                    dbt += dd[i] * (v[b, t, h, i] - gt * u[i])
                    dv_[b, t, h, i] = bt * dd[i]
                    dgt -= bt * dd[i] * u[i]
                    dd[i] = -gt * bt * dd[i]  # now du
                dbeta[b, t, h] = dbt
                dg[b, t, h] = dgt
                # u = S^T k; dS_prev = g dS + k du^T
                for j in range(dk):
                    kj = k[b, t, h, j]
                    acc = 0.0
                    for i in range(dv):
                        acc += S[j, i] * dd[i]
                        dS[j, i] = gt * dS[j, i] + kj * dd[i]
                    dk_[b, t, h, j] += acc
            dS0[b, h] = dS


@njit(cache=True, fastmath=True)
def _wkv_fwd(w, k, v, kk, a, r, S0, y, Ss):
    B, T, H, N = w.shape
    u = np.empty(N, dtype=np.float32)
    for b in range(B):
        for h in range(H):
            S = Ss[b, 0, h]
            S[:, :] = S0[b, h]
            for t in range(T):
                Sn = Ss[b, t + 1, h]
                for i in range(N):
                    u[i] = 0.0
                for j in range(N):
                    kj = kk[b, t, h, j]
                    for i in range(N):
                        u[i] += S[j, i] * kj
                for i in range(N):
                    y[b, t, h, i] = 0.0
                for j in range(N):
                    wj = w[b, t, h, j]
                    bj = -kk[b, t, h, j] * a[b, t, h, j]
                    kj = k[b, t, h, j]
                    rj = r[b, t, h, j]
                    for i in range(N):
                        Sn[j, i] = S[j, i] * wj + bj * u[i] + kj * v[b, t, h, i]
                        y[b, t, h, i] += Sn[j, i] * rj
                S = Sn


@njit(cache=True, fastmath=True)
def _wkv_bwd(w, k, v, kk, a, r, Ss, dy, dSl, dw, dk_, dv_, dkk, da, dr, dS0):
    B, T, H, N = w.shape
    dS = np.empty((N, N), dtype=np.float32)
    u = np.empty(N, dtype=np.float32)
    du = np.empty(N, dtype=np.float32)
    for b in range(B):
        for h in range(H):
            dS[:, :] = dSl[b, h]
            for t in range(T - 1, -1, -1):
                S = Ss[b, t, h]
                Sn = Ss[b, t + 1, h]
                # y = Sn^T r
                for j in range(N):
                    acc = 0.0
                    rj = r[b, t, h, j]
                    for i in range(N):
                        acc += Sn[j, i] * dy[b, t, h, i]
                        dS[j, i] += rj * dy[b, t, h, i]
                    dr[b, t, h, j] = acc
                for i in range(N):
                    u[i] = 0.0
                    du[i] = 0.0
                    dv_[b, t, h, i] = 0.0
                for j in range(N):
                    kj = kk[b, t, h, j]
                    for i in range(N):
                        u[i] += S[j, i] * kj
                # Sn = S diag(w) + b u^T + k v^T, b = -kk a
                for j in range(N):
                    bj = -kk[b, t, h, j] * a[b, t, h, j]
                    kj = k[b, t, h, j]
                    dwj = 0.0
                    dbj = 0.0
                    dkj = 0.0
                    for i in range(N):
                        g_ = dS[j, i]
                        dwj += g_ * S[j, i]
                        dbj += g_ * u[i]
                        dkj += g_ * v[b, t, h, i]
                        du[i] += g_ * bj
                        dv_[b, t, h, i] += g_ * kj
                    dw[b, t, h, j] = dwj
                    dk_[b, t, h, j] = dkj
                    dkk[b, t, h, j] = -a[b, t, h, j] * dbj
                    da[b, t, h, j] = -kk[b, t, h, j] * dbj
                # u = S^T kk; dS_prev = dS diag(w) + kk du^T
                for j in range(N):
                    wj = w[b, t, h, j]
                    kj = kk[b, t, h, j]
                    acc = 0.0
                    for i in range(N):
                        acc += S[j, i] * du[i]
                        dS[j, i] = dS[j, i] * wj + kj * du[i]
                    dkk[b, t, h, j] += acc
            dS0[b, h] = dS


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


_STATES: dict[tuple, np.ndarray] = {}


def _states(shape: tuple) -> np.ndarray:
    """The buffer of every step's state, reused from call to call: a fresh one of a few
    hundred MB a window costs more in page faults than the kernel itself. (One window's
    backward always runs before the next window's forward.)"""
    if shape not in _STATES:
        _STATES.clear()
        _STATES[shape] = np.empty(shape, dtype=np.float32)
    return _STATES[shape]


class DeltaRule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, beta, g, S0):
        B, T, H, _ = q.shape
        arrays = [_np(x) for x in (q, k, v, beta, g, S0)]
        o = np.empty((B, T, H, v.shape[3]), dtype=np.float32)
        Ss = _states((B, T + 1, *S0.shape[1:]))
        _delta_fwd(*arrays, o, Ss)
        ctx.arrays, ctx.Ss = arrays, Ss
        return torch.from_numpy(o), torch.from_numpy(Ss[:, T].copy())

    @staticmethod
    def backward(ctx, do, dSl):
        q, k, v, beta, g, S0 = ctx.arrays
        grads = [np.empty_like(x) for x in (q, k, v, beta, g, S0)]
        _delta_bwd(q, k, v, beta, g, ctx.Ss, _np(do), _np(dSl), *grads)
        return tuple(torch.from_numpy(x) for x in grads)


class Wkv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, k, v, kk, a, r, S0):
        B, T, H, N = w.shape
        arrays = [_np(x) for x in (w, k, v, kk, a, r, S0)]
        y = np.empty((B, T, H, N), dtype=np.float32)
        Ss = _states((B, T + 1, H, N, N))
        _wkv_fwd(*arrays, y, Ss)
        ctx.arrays, ctx.Ss = arrays, Ss
        return torch.from_numpy(y), torch.from_numpy(Ss[:, T].copy())

    @staticmethod
    def backward(ctx, dy, dSl):
        w, k, v, kk, a, r, S0 = ctx.arrays
        grads = [np.empty_like(x) for x in (w, k, v, kk, a, r, S0)]
        _wkv_bwd(w, k, v, kk, a, r, ctx.Ss, _np(dy), _np(dSl), *grads)
        return tuple(torch.from_numpy(x) for x in grads)


RECURRENCES = {"numba": (DeltaRule.apply, Wkv.apply), "loop": (delta_rule_loop, wkv_loop),
               "chunked": (delta_rule_chunked, wkv_loop)}


class TorchNet(torch.nn.Module):
    """File-named parameters of one rwkvzip model, initialised from flat weights W."""

    def __init__(self, model, W: np.ndarray, recurrence: str = "numba"):
        super().__init__()
        self.delta_rule, self.wkv = RECURRENCES[recurrence]
        self.model = model
        self.cfg = model.cfg
        self.names = [s.name for s in model.layout.specs]
        self.params = torch.nn.ParameterList(
            torch.nn.Parameter(torch.from_numpy(model.layout.get(W, n).astype(np.float32)))
            for n in self.names)
        self._by = dict(zip(self.names, range(len(self.names)), strict=True))

    def p(self, name: str) -> torch.Tensor:
        return self.params[self._by[name]]

    @property
    def device(self) -> torch.device:
        return self.params[0].device

    def tensor(self, a: np.ndarray) -> torch.Tensor:
        """A batch array on the net's device."""
        return torch.from_numpy(a).to(self.device)

    def zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(*shape, device=self.device)

    def flat(self) -> np.ndarray:
        """The weights in rwkvzip's flat layout (for a prior file)."""
        W = np.zeros(self.model.layout.size, dtype=np.float32)
        for n in self.names:
            self.model.layout.set(W, n, self.p(n).detach().cpu().numpy())
        return W

    def head(self, x: torch.Tensor) -> torch.Tensor:
        x = F.layer_norm(x, (x.shape[-1],), self.p("model.norm.weight"),
                         self.p("model.norm.bias"), LAYER_NORM_EPS)
        return F.linear(x, self.p("lm_head.weight"), self.p("lm_head.bias"))

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.p("model.embeddings.weight"))

    def zero_state(self, batch: int) -> list[torch.Tensor]:
        raise NotImplementedError

    def forward(self, tokens: torch.Tensor, state: list[torch.Tensor]
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        raise NotImplementedError


def rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def l2n(x: torch.Tensor, min_norm: float) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(min_norm)


class GdnNet(TorchNet):
    """Gated DeltaNet (net/gdn/forward.py). State per layer: conv memory (B, QKV, Kc - 1),
    S (B, Hv, dk, dv)."""

    def zero_state(self, batch: int) -> list[torch.Tensor]:
        c = self.cfg
        out = []
        for _ in range(c.layers):
            out.append(self.zeros(batch, c.qkv_dim, c.conv_kernel - 1))
            out.append(self.zeros(batch, c.value_heads, c.key_dim, c.value_dim))
        return out

    def forward(self, tokens, state):
        c = self.cfg
        B, T = tokens.shape
        Hk, Hv, dk, dv = c.key_heads, c.value_heads, c.key_dim, c.value_dim
        KD = Hk * dk
        x = self.embed(tokens)
        new_state = []
        for l in range(c.layers):
            p = f"model.layers.{l}"
            mem, S = state[2 * l], state[2 * l + 1]
            xn = rms(x, self.p(f"{p}.input_layernorm.weight"), KG.RMS_EPS)
            qkv = F.linear(xn, self.p(f"{p}.linear_attn.in_proj_qkv.weight"))
            z = F.linear(xn, self.p(f"{p}.linear_attn.in_proj_z.weight"))
            beta = torch.sigmoid(F.linear(xn, self.p(f"{p}.linear_attn.in_proj_b.weight")))
            apre = (F.linear(xn, self.p(f"{p}.linear_attn.in_proj_a.weight"))
                    + self.p(f"{p}.linear_attn.dt_bias"))
            g = torch.exp(-torch.exp(self.p(f"{p}.linear_attn.A_log")) * F.softplus(apre))
            seq = torch.cat([mem, qkv.transpose(1, 2)], dim=2)  # (B, QKV, Kc - 1 + T)
            conv = F.conv1d(seq, self.p(f"{p}.linear_attn.conv1d.weight"), groups=c.qkv_dim)
            new_mem = seq[:, :, seq.shape[2] - (c.conv_kernel - 1):]
            cc = F.silu(conv.transpose(1, 2))  # (B, T, QKV)
            rep = Hv // Hk
            q = l2n(cc[..., :KD].reshape(B, T, Hk, dk), KG.L2_MIN_NORM)
            k = l2n(cc[..., KD:2 * KD].reshape(B, T, Hk, dk), KG.L2_MIN_NORM)
            q = q.repeat_interleave(rep, dim=2) / math.sqrt(dk)
            k = k.repeat_interleave(rep, dim=2)
            v = cc[..., 2 * KD:].reshape(B, T, Hv, dv)
            o, S = self.delta_rule(q, k, v, beta, g, S)  # o: (B, T, Hv, dv)
            on = rms(o, self.p(f"{p}.linear_attn.norm.weight"), KG.RMS_EPS)
            y = on.reshape(B, T, Hv * dv) * F.silu(z)
            xmid = x + F.linear(y, self.p(f"{p}.linear_attn.out_proj.weight"))
            hn = rms(xmid, self.p(f"{p}.post_attention_layernorm.weight"), KG.RMS_EPS)
            act = (F.silu(F.linear(hn, self.p(f"{p}.mlp.gate_proj.weight")))
                   * F.linear(hn, self.p(f"{p}.mlp.up_proj.weight")))
            x = xmid + F.linear(act, self.p(f"{p}.mlp.down_proj.weight"))
            new_state += [new_mem, S]
        return self.head(x), new_state


def shift(x: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """x one step back in time, `prev` (B, C) before the first step."""
    return torch.cat([prev.unsqueeze(1), x[:, :-1]], dim=1)


class Rwkv7Net(TorchNet):
    """RWKV-7 (net/rwkv7/forward.py). State per layer: att_x_prev (B, C), ffn_x_prev (B, C),
    wkv (B, H, N, N) key-major."""

    def ln(self, t: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(t, (t.shape[-1],), self.p(f"{name}.weight"),
                            self.p(f"{name}.bias"), LAYER_NORM_EPS)

    def zero_state(self, batch: int) -> list[torch.Tensor]:
        c = self.cfg
        out = []
        for _ in range(c.layers):
            out += [self.zeros(batch, c.hidden), self.zeros(batch, c.hidden),
                    self.zeros(batch, c.heads, HEAD_SIZE, HEAD_SIZE)]
        return out

    def forward(self, tokens, state):
        c = self.cfg
        B, T = tokens.shape
        C, H, N = c.hidden, c.heads, HEAD_SIZE
        x = self.embed(tokens)
        vfirst = None
        new_state = []
        for l in range(c.layers):
            p = f"model.layers.{l}"
            a_prev, f_prev, S = state[3 * l:3 * l + 3]

            x0 = self.ln(x, f"{p}.pre_norm") if l == 0 else x
            xa = self.ln(x0, f"{p}.attn_norm")
            d = shift(xa, a_prev) - xa
            xr, xw, xk, xv, xaa, xg = (xa + d * self.p(f"{p}.attn.{n}")
                                       for n in ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g"))

            def lin(t, name, p=p):
                return F.linear(t, self.p(f"{p}.attn.{name}.weight"))

            r, kpre, vpre = lin(xr, "r_proj"), lin(xk, "k_proj"), lin(xv, "v_proj")
            wsig = torch.sigmoid(F.linear(torch.tanh(lin(xw, "w_lora.lora.0")),
                                          self.p(f"{p}.attn.w_lora.lora.2.weight"),
                                          self.p(f"{p}.attn.w_lora.lora.2.bias")))
            w = torch.exp(-wsig * KR.INV_SQRT_E)
            a = torch.sigmoid(F.linear(lin(xaa, "a_lora.lora.0"),
                                       self.p(f"{p}.attn.a_lora.lora.2.weight"),
                                       self.p(f"{p}.attn.a_lora.lora.2.bias")))
            g = lin(torch.sigmoid(lin(xg, "g_lora.lora.0")), "g_lora.lora.2")
            if l == 0:
                v = vfirst = vpre
            else:
                nu = torch.sigmoid(F.linear(lin(xv, "v_lora.lora.0"),
                                            self.p(f"{p}.attn.v_lora.lora.2.weight"),
                                            self.p(f"{p}.attn.v_lora.lora.2.bias")))
                v = vpre + (vfirst - vpre) * nu
            kk = l2n((kpre * self.p(f"{p}.attn.k_k")).reshape(B, T, H, N), KR.KK_MIN_NORM)
            k = kpre * (1.0 + (a - 1.0) * self.p(f"{p}.attn.k_a"))
            wh, kh, vh, ah, rh = (t.reshape(B, T, H, N) for t in (w, k, v, a, r))
            y, S = self.wkv(wh, kh, vh, kk, ah, rh, S)  # y: (B, T, H, N)
            ygn = F.group_norm(y.reshape(B * T, C), H, self.p(f"{p}.attn.g_norm.weight"),
                               self.p(f"{p}.attn.g_norm.bias"), KR.GROUP_NORM_EPS)
            alpha = (rh * kh * self.p(f"{p}.attn.r_k").reshape(H, N)).sum(-1, keepdim=True)
            yhead = ygn.reshape(B, T, H, N) + alpha * vh
            xmid = x0 + lin(yhead.reshape(B, T, C) * g, "o_proj")
            fn = self.ln(xmid, f"{p}.ffn_norm")
            fxk = fn + (shift(fn, f_prev) - fn) * self.p(f"{p}.ffn.x_k")
            fk = torch.relu(F.linear(fxk, self.p(f"{p}.ffn.key.weight"))).square()
            x = xmid + F.linear(fk, self.p(f"{p}.ffn.value.weight"))
            new_state += [xa[:, -1], fn[:, -1], S]
        return self.head(x), new_state


NETS = {"gdn": GdnNet, "rwkv7": Rwkv7Net}


def make_net(model, W: np.ndarray, recurrence: str = "", device: str = "cpu") -> TorchNet:
    """The net on `device`, its recurrences by RECURRENCES' name: by default the numba
    kernels on the CPU and, off it (they work on host arrays), the chunked delta rule and the
    WKV-7 loop."""
    recurrence = recurrence or ("numba" if torch.device(device).type == "cpu" else "chunked")
    if torch.device(device).type != "cpu":
        # Full float32 products, as the kernels compute (no TF32 in matmul or conv).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return NETS[model.arch](model, W, recurrence).to(device)


def code_bits(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log2 p[target] of the coded distribution p = KEEP softmax + PROB_FLOOR."""
    lp = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return -torch.log2(KEEP * torch.exp(lp) + PROB_FLOOR)


# ---------------------------------------------------------------- batches


class Lanes:
    """B lanes reading documents one after another, T bytes a window."""

    def __init__(self, docs: list[bytes], order: Callable[[int], np.ndarray], batch: int,
                 window: int, epoch: int = 0, next_doc: int = 0):
        self.docs, self.order, self.B, self.T = docs, order, batch, window
        self.epoch, self.next_doc = epoch, next_doc
        self.perm = order(epoch)
        self.cur: list[bytes | None] = [None] * batch
        self.pos = [0] * batch

    def _take(self) -> bytes:
        if self.next_doc >= len(self.perm):
            self.epoch += 1
            self.next_doc = 0
            self.perm = self.order(self.epoch)
        d = self.docs[int(self.perm[self.next_doc])]
        self.next_doc += 1
        return d

    def window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(inputs, targets, mask) of shape (B, T), and fresh (B,): the lanes that start a
        document (their state is zeroed before the window)."""
        fresh = np.zeros(self.B, dtype=bool)
        at = []
        for b in range(self.B):
            if self.cur[b] is None or self.pos[b] >= len(self.cur[b]):
                self.cur[b], self.pos[b] = self._take(), 0
                fresh[b] = True
            at.append((self.cur[b], self.pos[b]))
            self.pos[b] += self.T
        return (*windows_of(at, self.T), fresh)


def reset_lanes(state: list[torch.Tensor], fresh: np.ndarray) -> list[torch.Tensor]:
    keep = torch.from_numpy(~fresh).float().to(state[0].device)
    return [s.detach() * keep.reshape(-1, *([1] * (s.dim() - 1))) for s in state]


def windows_of(at: list[tuple[bytes, int]], window: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inputs, targets, mask): bytes lo .. lo + window of each (document, lo), masked past
    the document's end."""
    B = len(at)
    inp = np.zeros((B, window), dtype=np.int64)
    tgt = np.zeros((B, window), dtype=np.int64)
    mask = np.zeros((B, window), dtype=np.float32)
    for b, (d, lo) in enumerate(at):
        seg = np.frombuffer(d[lo:lo + window], dtype=np.uint8)
        n = len(seg)
        if not n:
            continue
        tgt[b, :n] = seg
        inp[b, 0] = d[lo - 1] if lo else 0
        inp[b, 1:n] = seg[:n - 1]
        mask[b, :n] = 1.0
    return inp, tgt, mask


@torch.no_grad()
def evaluate(net: TorchNet, docs: list[Document], batch: int = 64, window: int = 1024
             ) -> dict[str, float]:
    """Bits per byte of each source's documents (each from a zero state), and of all."""
    bits: dict[str, float] = {}
    size: dict[str, int] = {}
    order = sorted(range(len(docs)), key=lambda i: -len(docs[i].data))  # similar lengths
    for first in range(0, len(order), batch):
        group = [docs[i] for i in order[first:first + batch]]
        data = [d.data for d in group]
        state = net.zero_state(len(group))
        per_doc = np.zeros(len(group))
        for lo in range(0, max(len(d) for d in data), window):
            inp, tgt, mask = windows_of([(d, lo) for d in data], window)
            logits, state = net(net.tensor(inp), state)
            b = code_bits(logits, net.tensor(tgt)) * net.tensor(mask)
            per_doc += b.sum(1).double().cpu().numpy()
        for d, bd in zip(group, per_doc, strict=True):
            bits[d.source] = bits.get(d.source, 0.0) + bd
            size[d.source] = size.get(d.source, 0) + len(d.data)
    out = {s: bits[s] / size[s] for s in sorted(bits)}
    out["all"] = sum(bits.values()) / sum(size.values())
    return {k: round(float(v), 4) for k, v in out.items()}


# ---------------------------------------------------------------- training


@dataclass
class Progress:
    """Where a run stands; saved in its checkpoint so a run resumes where it stopped."""

    steps: int = 0
    bytes_trained: int = 0
    seconds: float = 0.0
    epoch: int = 0
    next_doc: int = 0
    history: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class Schedule:
    """AdamW with a linear warm-up, then a cosine decay to lr * final over the run's time."""

    lr: float = 3e-3
    final: float = 0.05
    warmup: int = 200  # steps
    batch: int = 128
    window: int = 256
    clip: float = 1.0
    weight_decay: float = 0.0

    def rate(self, step: int, frac: float) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        frac = min(max(frac, 0.0), 1.0)
        return self.lr * (self.final + (1 - self.final) * 0.5 * (1 + math.cos(math.pi * frac)))


def save_run(path: Path, net: TorchNet, opt: torch.optim.Optimizer, prog: Progress,
             extra: dict) -> None:
    tmp = Path(str(path) + ".tmp")
    torch.save({"W": net.flat(), "opt": opt.state_dict(), "progress": prog.__dict__,
                "extra": extra}, tmp)
    tmp.replace(path)


def load_run(path: Path) -> dict:
    return torch.load(path, weights_only=False, map_location="cpu")


def fit(net: TorchNet, train: list[Document], sched: Schedule, seconds: float, *,
        seed: int = 0, checkpoint: Path | None = None, checkpoint_every: float = 300.0,
        val: list[Document] | None = None, log: Callable[[str], None] = print,
        extra: dict | None = None) -> Progress:
    """Train until `seconds` of training in all (a resumed run counts its earlier time)."""
    params = list(net.parameters())
    opt = torch.optim.AdamW(params, lr=sched.lr, betas=(0.9, 0.99), eps=1e-8,
                            weight_decay=sched.weight_decay)
    prog = Progress()
    if checkpoint is not None and checkpoint.exists():
        run = load_run(checkpoint)
        with torch.no_grad():
            for n in net.names:
                net.p(n).copy_(torch.from_numpy(net.model.layout.get(run["W"], n)))
        opt.load_state_dict(run["opt"])
        prog = Progress(**run["progress"])
        log(f"resumed at {prog.bytes_trained:,} bytes, {prog.seconds:.0f} s")
    data = [d.data for d in train]
    total = sum(len(d) for d in data)
    lanes = Lanes(data, lambda e: np.random.default_rng([seed, e]).permutation(len(data)),
                  sched.batch, sched.window, prog.epoch, prog.next_doc)
    state = net.zero_state(sched.batch)
    start = time.monotonic() - prog.seconds
    last_save = last_log = time.monotonic()
    bits_sum, bytes_sum = 0.0, 0
    while True:
        now = time.monotonic()
        prog.seconds = now - start
        if prog.seconds >= seconds:
            break
        lr = sched.rate(prog.steps, prog.seconds / seconds)
        for group in opt.param_groups:
            group["lr"] = lr
        inp, tgt, mask, fresh = lanes.window()
        state = reset_lanes(state, fresh)
        logits, state = net(net.tensor(inp), state)
        bits = code_bits(logits, net.tensor(tgt)) * net.tensor(mask)
        n = float(mask.sum())
        loss = bits.sum() / max(n, 1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if sched.clip:
            torch.nn.utils.clip_grad_norm_(params, sched.clip)
        opt.step()
        prog.steps += 1
        prog.bytes_trained += int(n)
        prog.epoch, prog.next_doc = lanes.epoch, lanes.next_doc
        bits_sum += float(bits.detach().sum())
        bytes_sum += int(n)
        if now - last_log >= 60:
            entry = {"seconds": round(prog.seconds, 1), "bytes": prog.bytes_trained,
                     "epoch": round(prog.bytes_trained / total, 3),
                     "lr": lr, "train_bpb": round(bits_sum / max(bytes_sum, 1), 4)}
            prog.history.append(entry)
            log(f"{entry['seconds']:.0f} s, {entry['bytes']:,} bytes (epoch {entry['epoch']}), "
                f"lr {lr:.2e}, train {entry['train_bpb']} bpb, "
                f"{bytes_sum / (now - last_log) / 1e3:.1f} KB/s")
            bits_sum, bytes_sum, last_log = 0.0, 0, now
        if checkpoint is not None and now - last_save >= checkpoint_every:
            save_run(checkpoint, net, opt, prog, extra or {})
            last_save = now
    if checkpoint is not None:
        save_run(checkpoint, net, opt, prog, extra or {})
    return prog
