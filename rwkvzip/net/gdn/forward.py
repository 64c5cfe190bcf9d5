"""Gated DeltaNet forward step (numba).

Arrays handed in (same contract as net/rwkv7/forward.py):
  W      float32 flat parameters (layout in rwkvzip/net/gdn/model.py)
  W16    W's bfloat16 copy, from which the matrices are read when it is not empty (the same
         values: ops/bf16.py)
  state  float32 recurrent state: per layer [conv memory ((Kc - 1) x QKV, oldest row first),
         S (Hv, dk, dv)]
  tr     float32 trace: every intermediate of the step, kept for the backward pass
  I      int64 index table: dims, then parameter offsets, then trace offsets

One block: x_n = rmsnorm(x); qkv = x_n Wqkv; causal depthwise conv over time on qkv (kernel
Kc, the previous Kc - 1 qkv vectors are the conv memory), SiLU; q, k L2-normalised per key head;
per value head h (key head h // (Hv / Hk)), with beta = sigmoid(x_n Wb),
g = exp(-exp(A_log) softplus(x_n Wa + dt_bias)):
  u = S^T k,  delta = beta (v - g u),  S <- g S + k delta^T,  o = S^T q / sqrt(dk)
then o_n = rmsnorm(o) * norm.weight * silu(x_n Wz) per value head, x += o_n Wout; and the
SwiGLU MLP x += (silu(h Wgate) * (h Wup)) Wdown with h = rmsnorm(x).

S is stored key-major, S[j, i] (key j, value i), so the update and read-out are axpy loops over
the value index and vectorise without reassociation.
"""

from __future__ import annotations

import math

from rwkvzip.net.common import (
    D_C,
    D_L,
    T_XOUT,
    embed,
    gslice,
    head_forward,
    loff,
    lparam,
    tslice,
    weights_matvec,
)
from rwkvzip.ops.jit import jit
from rwkvzip.ops.linalg import l2_normalize, rms_norm
from rwkvzip.ops.mathf import (
    exp64,
    sigmoid64,
    silu_vector,
    softplus64,
    swiglu_vector,
)

# ---- index table I: GDN dims (after the common ones) ------------------------------------
D_HK, D_HV, D_DK, D_DV, D_KC, D_F = range(4, 10)

# ---- per-layer parameter slots ----------------------------------------------------------
(
    L_IN_NORM, L_QKV, L_Z, L_B, L_A, L_CONV, L_DT_BIAS, L_A_LOG, L_GNORM, L_OUT,
    L_POST_NORM, L_GATE, L_UP, L_DOWN,
) = range(14)
N_LAYER = 14

# ---- per-layer trace slots --------------------------------------------------------------
(
    S_X_IN, S_XN, S_QKV, S_Z, S_BETA, S_APRE, S_G, S_CPRE, S_C, S_QN, S_KN,
    S_U, S_DELTA, S_O, S_ON, S_ZS, S_Y, S_XMID, S_HN, S_GP, S_UP, S_ACT,
) = range(22)
NT_LAYER = 22
# S_X_IN block input | S_XN rmsnorm(x) | S_QKV pre-conv q|k|v | S_Z gate input z
# S_BETA sigmoid(x_n Wb) | S_APRE x_n Wa + dt_bias | S_G decay g | S_CPRE conv output
# S_C silu(conv) | S_QN, S_KN normalised q, k | S_U S_old^T k | S_DELTA beta (v - g u)
# S_O read-out | S_ON rmsnorm(o) * norm.weight | S_ZS silu(z) | S_Y S_ON * S_ZS
# S_XMID residual after the mixer | S_HN rmsnorm(xmid) | S_GP, S_UP gate, up | S_ACT silu(gp) up

RMS_EPS = 1e-6
L2_MIN_NORM = 1e-6


@jit
def qkv_dim(I):
    return 2 * I[D_HK] * I[D_DK] + I[D_HV] * I[D_DV]


@jit
def layer_state(state, I, layer):
    """(conv memory, S) views of one layer's recurrent state."""
    n_conv = (I[D_KC] - 1) * qkv_dim(I)
    n_s = I[D_HV] * I[D_DK] * I[D_DV]
    base = layer * (n_conv + n_s)
    return state[base:base + n_conv], state[base + n_conv:base + n_conv + n_s]


@jit
def conv_step(mem, Wc, x, Kc, n, y):
    """y = causal depthwise conv of (mem rows, x) with tap-major Wc; then mem shifts in x.

    y[c] = sum_t Wc[t, c] * in_t[c] in tap order, in_t = mem[t] for t < Kc - 1 (oldest first)
    and in_{Kc-1} = x.
    """
    for c in range(n):
        y[c] = 0.0
    for t in range(Kc - 1):
        wt = Wc[t * n:(t + 1) * n]
        mt = mem[t * n:(t + 1) * n]
        for c in range(n):
            y[c] += wt[c] * mt[c]
    wl = Wc[(Kc - 1) * n:Kc * n]
    for c in range(n):
        y[c] += wl[c] * x[c]
    for t in range(Kc - 2):
        dst = mem[t * n:(t + 1) * n]
        src = mem[(t + 1) * n:(t + 2) * n]
        for c in range(n):
            dst[c] = src[c]
    if Kc > 1:
        last = mem[(Kc - 2) * n:(Kc - 1) * n]
        for c in range(n):
            last[c] = x[c]


@jit
def delta_rule_step(S, q, k, v, beta, g, Hk, Hv, dk, dv, scale, u, delta, o):
    """One gated delta-rule update and read-out for every value head (S key-major)."""
    ratio = Hv // Hk
    for h in range(Hv):
        kh = h // ratio
        Sh = S[h * dk * dv:(h + 1) * dk * dv]
        qh = q[kh * dk:(kh + 1) * dk]
        kv = k[kh * dk:(kh + 1) * dk]
        vh = v[h * dv:(h + 1) * dv]
        uh = u[h * dv:(h + 1) * dv]
        dh = delta[h * dv:(h + 1) * dv]
        oh = o[h * dv:(h + 1) * dv]
        gh = g[h]
        bh = beta[h]
        # u = S^T k  (u[i] = sum_j S[j, i] k[j])
        for i in range(dv):
            uh[i] = 0.0
        for j in range(dk):
            kj = kv[j]
            row = Sh[j * dv:(j + 1) * dv]
            for i in range(dv):
                uh[i] += row[i] * kj
        for i in range(dv):
            dh[i] = bh * (vh[i] - gh * uh[i])
        # S[j, i] = g S[j, i] + k[j] delta[i]; o[i] = sum_j S[j, i] q[j] (the new S)
        for i in range(dv):
            oh[i] = 0.0
        for j in range(dk):
            kj = kv[j]
            qj = qh[j]
            row = Sh[j * dv:(j + 1) * dv]
            for i in range(dv):
                row[i] = row[i] * gh + kj * dh[i]
            for i in range(dv):
                oh[i] += row[i] * qj
        for i in range(dv):
            oh[i] = oh[i] * scale


@jit
def forward_step(token, W, W16, state, tr, I, floor):
    """Run one byte through the network; leaves logits, q = softmax and the coded p in tr.
    W16: W's bfloat16 copy or ops.bf16.NO_COPY (net/common.py, weights_matvec). The SiLUs,
    the SwiGLU's gate and the softmax run in float32 lanes."""
    C = I[D_C]
    L = I[D_L]
    Hk = I[D_HK]
    Hv = I[D_HV]
    dk = I[D_DK]
    dv = I[D_DV]
    Kc = I[D_KC]
    F = I[D_F]
    KD = Hk * dk
    VD = Hv * dv
    QKV = 2 * KD + VD
    scale = 1.0 / math.sqrt(dk)
    embed(token, W, I, tslice(tr, I, 0, S_X_IN, C))

    for l in range(L):
        mem, S = layer_state(state, I, l)
        x_in = tslice(tr, I, l, S_X_IN, C)  # written by the layer below (or the embedding)
        xn = tslice(tr, I, l, S_XN, C)
        rms_norm(x_in, lparam(W, I, l, L_IN_NORM, C), RMS_EPS, C, xn)

        # ---- token mixer: projections ----
        qkv = tslice(tr, I, l, S_QKV, QKV)
        z = tslice(tr, I, l, S_Z, VD)
        beta = tslice(tr, I, l, S_BETA, Hv)
        apre = tslice(tr, I, l, S_APRE, Hv)
        g = tslice(tr, I, l, S_G, Hv)
        weights_matvec(W, W16, loff(I, l, L_QKV), xn, C, QKV, qkv)
        weights_matvec(W, W16, loff(I, l, L_Z), xn, C, VD, z)
        weights_matvec(W, W16, loff(I, l, L_B), xn, C, Hv, beta)
        weights_matvec(W, W16, loff(I, l, L_A), xn, C, Hv, apre)
        dt_bias = lparam(W, I, l, L_DT_BIAS, Hv)
        a_log = lparam(W, I, l, L_A_LOG, Hv)
        for h in range(Hv):
            beta[h] = sigmoid64(beta[h])
            apre[h] = apre[h] + dt_bias[h]
            g[h] = exp64(-exp64(a_log[h]) * softplus64(apre[h]))

        # ---- causal conv + SiLU, then L2-normalised q, k ----
        cpre = tslice(tr, I, l, S_CPRE, QKV)
        c = tslice(tr, I, l, S_C, QKV)
        conv_step(mem, lparam(W, I, l, L_CONV, Kc * QKV), qkv, Kc, QKV, cpre)
        silu_vector(cpre, c)
        qn = tslice(tr, I, l, S_QN, KD)
        kn = tslice(tr, I, l, S_KN, KD)
        l2_normalize(c[0:KD], Hk, dk, L2_MIN_NORM, qn)
        l2_normalize(c[KD:2 * KD], Hk, dk, L2_MIN_NORM, kn)

        # ---- gated delta rule ----
        u = tslice(tr, I, l, S_U, VD)
        delta = tslice(tr, I, l, S_DELTA, VD)
        o = tslice(tr, I, l, S_O, VD)
        delta_rule_step(S, qn, kn, c[2 * KD:QKV], beta, g, Hk, Hv, dk, dv, scale, u, delta, o)

        # ---- gated RMSNorm per value head, output projection, residual ----
        on = tslice(tr, I, l, S_ON, VD)
        zs = tslice(tr, I, l, S_ZS, VD)
        y = tslice(tr, I, l, S_Y, VD)
        gn_w = lparam(W, I, l, L_GNORM, dv)
        for h in range(Hv):
            rms_norm(o[h * dv:(h + 1) * dv], gn_w, RMS_EPS, dv, on[h * dv:(h + 1) * dv])
        silu_vector(z, zs)
        for i in range(VD):
            y[i] = on[i] * zs[i]
        xmid = tslice(tr, I, l, S_XMID, C)
        weights_matvec(W, W16, loff(I, l, L_OUT), y, VD, C, xmid)
        for i in range(C):
            xmid[i] = x_in[i] + xmid[i]

        # ---- channel MLP (SwiGLU) ----
        hn = tslice(tr, I, l, S_HN, C)
        rms_norm(xmid, lparam(W, I, l, L_POST_NORM, C), RMS_EPS, C, hn)
        gp = tslice(tr, I, l, S_GP, F)
        up = tslice(tr, I, l, S_UP, F)
        act = tslice(tr, I, l, S_ACT, F)
        weights_matvec(W, W16, loff(I, l, L_GATE), hn, C, F, gp)
        weights_matvec(W, W16, loff(I, l, L_UP), hn, C, F, up)
        swiglu_vector(gp, up, act)
        # the block's output is the next block's input; the last one feeds the head
        xout = tslice(tr, I, l + 1, S_X_IN, C) if l < L - 1 else gslice(tr, I, T_XOUT, C)
        weights_matvec(W, W16, loff(I, l, L_DOWN), act, F, C, xout)
        for i in range(C):
            xout[i] = xmid[i] + xout[i]

    head_forward(W, W16, tr, I, floor)
