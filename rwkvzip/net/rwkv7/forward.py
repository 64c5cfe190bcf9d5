"""RWKV-7 forward step (numba).

Arrays handed in:
  W      float32 flat parameters (layout in rwkvzip/net/rwkv7/model.py)
  W16    W's bfloat16 copy, from which the matrices are read when it is not empty (the same
         values: ops/bf16.py)
  state  float32 recurrent state: per layer [att_x_prev (C), ffn_x_prev (C), wkv (H, N_k, N_v)]
  tr     float32 trace: every intermediate of the step, kept for the backward pass
  I      int64 index table: dims, then parameter offsets, then trace offsets

The WKV state of each head is stored key-major, S[j, i] (key j, value i), so the state update
and read-out are axpy loops over the value index and vectorise without reassociation.
"""

from __future__ import annotations

import math

import numpy as np

from rwkvzip.net.common import (
    D_C,
    D_L,
    LAYER_NORM_EPS,
    T_VFIRST,
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
from rwkvzip.ops.linalg import group_norm, l2_normalize, layer_norm, matvec
from rwkvzip.ops.mathf import exp32_lane, sigmoid_vector, tanh64

# ---- index table I: RWKV-7 dims (after the common ones) ----------------------------------
D_H, D_N, D_I, D_DW, D_DA, D_DV, D_DG = range(4, 11)

# ---- per-layer parameter slots ----------------------------------------------------------
(
    L_PRE_W, L_PRE_B, L_ATT_W, L_ATT_B, L_FFN_W, L_FFN_B,
    L_X_R, L_X_W, L_X_K, L_X_V, L_X_A, L_X_G,
    L_WR, L_WK, L_WV, L_WO,
    L_W1, L_W2, L_W0, L_A1, L_A2, L_A0, L_V1, L_V2, L_V0, L_G1, L_G2,
    L_K_K, L_K_A, L_R_K, L_GN_W, L_GN_B,
    L_F_XK, L_F_KEY, L_F_VAL,
) = range(35)
N_LAYER = 35

# ---- per-layer trace slots --------------------------------------------------------------
(
    S_X_IN, S_X0, S_XA, S_AXP,
    S_XR, S_XW, S_XK, S_XV, S_XAA, S_XG,
    S_R, S_KPRE, S_VPRE,
    S_WH, S_WSIG, S_WDEC, S_AH, S_A, S_GH, S_G, S_VH, S_NU, S_V,
    S_KKPRE, S_KK, S_K,
    S_YWKV, S_YGN, S_ALPHA, S_YHEAD, S_YGATE, S_ATTOUT,
    S_XMID, S_FN, S_FXP, S_FXK, S_FPRE, S_FK, S_FOUT,
) = range(39)
NT_LAYER = 39

GROUP_NORM_EPS = 64e-5
KK_MIN_NORM = 1e-12
INV_SQRT_E = 1.0 / math.sqrt(math.e)
INV_SQRT_E32 = np.float32(INV_SQRT_E)  # ... in float32 lanes


@jit
def layer_state(state, I, layer):
    """(att_x_prev, ffn_x_prev, wkv) views of one layer's recurrent state."""
    C = I[D_C]
    HNN = I[D_H] * I[D_N] * I[D_N]
    base = layer * (2 * C + HNN)
    wkv = base + 2 * C
    return state[base:base + C], state[base + C:wkv], state[wkv:wkv + HNN]


@jit
def forward_step(token, W, W16, state, tr, I, floor):
    """Run one byte through the network; leaves logits, q = softmax and the coded p in tr.
    W16: W's bfloat16 copy or ops.bf16.NO_COPY (net/common.py, weights_matvec). The
    sigmoids, the decay's exponential and the softmax run in float32 lanes."""
    C = I[D_C]
    L = I[D_L]
    H = I[D_H]
    N = I[D_N]
    FF = I[D_I]
    Dw = I[D_DW]
    Da = I[D_DA]
    Dv = I[D_DV]
    Dg = I[D_DG]
    vfirst = gslice(tr, I, T_VFIRST, C)
    embed(token, W, I, tslice(tr, I, 0, S_X_IN, C))

    for l in range(L):
        att_prev, ffn_prev, wkv = layer_state(state, I, l)
        x_in = tslice(tr, I, l, S_X_IN, C)  # written by the layer below (or the embedding)
        x0 = tslice(tr, I, l, S_X0, C)
        if l == 0:
            layer_norm(x_in, lparam(W, I, 0, L_PRE_W, C), lparam(W, I, 0, L_PRE_B, C),
                       LAYER_NORM_EPS, C, x0)
        else:
            for c in range(C):
                x0[c] = x_in[c]

        # ---- time mixing (attention) ----
        xa = tslice(tr, I, l, S_XA, C)
        layer_norm(x0, lparam(W, I, l, L_ATT_W, C), lparam(W, I, l, L_ATT_B, C),
                   LAYER_NORM_EPS, C, xa)
        axp = tslice(tr, I, l, S_AXP, C)
        xr = tslice(tr, I, l, S_XR, C)
        xw = tslice(tr, I, l, S_XW, C)
        xk = tslice(tr, I, l, S_XK, C)
        xv = tslice(tr, I, l, S_XV, C)
        xaa = tslice(tr, I, l, S_XAA, C)
        xg = tslice(tr, I, l, S_XG, C)
        mr = lparam(W, I, l, L_X_R, C)
        mw = lparam(W, I, l, L_X_W, C)
        mk = lparam(W, I, l, L_X_K, C)
        mv = lparam(W, I, l, L_X_V, C)
        ma = lparam(W, I, l, L_X_A, C)
        mg = lparam(W, I, l, L_X_G, C)
        for c in range(C):
            prev = att_prev[c]
            axp[c] = prev
            d = prev - xa[c]
            xr[c] = xa[c] + d * mr[c]
            xw[c] = xa[c] + d * mw[c]
            xk[c] = xa[c] + d * mk[c]
            xv[c] = xa[c] + d * mv[c]
            xaa[c] = xa[c] + d * ma[c]
            xg[c] = xa[c] + d * mg[c]
            att_prev[c] = xa[c]

        r = tslice(tr, I, l, S_R, C)
        kpre = tslice(tr, I, l, S_KPRE, C)
        vpre = tslice(tr, I, l, S_VPRE, C)
        weights_matvec(W, W16, loff(I, l, L_WR), xr, C, C, r)
        weights_matvec(W, W16, loff(I, l, L_WK), xk, C, C, kpre)
        weights_matvec(W, W16, loff(I, l, L_WV), xv, C, C, vpre)

        # decay w = exp(-sigmoid(tanh(xw W1) W2 + w0) / sqrt(e))
        wh = tslice(tr, I, l, S_WH, Dw)
        weights_matvec(W, W16, loff(I, l, L_W1), xw, C, Dw, wh)
        for j in range(Dw):
            wh[j] = tanh64(wh[j])
        wsig = tslice(tr, I, l, S_WSIG, C)
        wdec = tslice(tr, I, l, S_WDEC, C)
        weights_matvec(W, W16, loff(I, l, L_W2), wh, Dw, C, wsig)
        w0 = lparam(W, I, l, L_W0, C)
        for c in range(C):
            wsig[c] = wsig[c] + w0[c]
        sigmoid_vector(wsig, wsig)
        for c in range(C):
            wdec[c] = exp32_lane(-wsig[c] * INV_SQRT_E32)

        # in-context learning rate a = sigmoid(xa A1 A2 + a0)
        ah = tslice(tr, I, l, S_AH, Da)
        a = tslice(tr, I, l, S_A, C)
        weights_matvec(W, W16, loff(I, l, L_A1), xaa, C, Da, ah)
        weights_matvec(W, W16, loff(I, l, L_A2), ah, Da, C, a)
        a0 = lparam(W, I, l, L_A0, C)
        for c in range(C):
            a[c] = a[c] + a0[c]
        sigmoid_vector(a, a)

        # output gate g = sigmoid(xg G1) G2
        gh = tslice(tr, I, l, S_GH, Dg)
        g = tslice(tr, I, l, S_G, C)
        weights_matvec(W, W16, loff(I, l, L_G1), xg, C, Dg, gh)
        sigmoid_vector(gh, gh)
        weights_matvec(W, W16, loff(I, l, L_G2), gh, Dg, C, g)

        # value residual: layer 0 publishes v, later layers mix it in
        v = tslice(tr, I, l, S_V, C)
        if l == 0:
            for c in range(C):
                v[c] = vpre[c]
                vfirst[c] = vpre[c]
        else:
            vh = tslice(tr, I, l, S_VH, Dv)
            nu = tslice(tr, I, l, S_NU, C)
            weights_matvec(W, W16, loff(I, l, L_V1), xv, C, Dv, vh)
            weights_matvec(W, W16, loff(I, l, L_V2), vh, Dv, C, nu)
            v0 = lparam(W, I, l, L_V0, C)
            for c in range(C):
                nu[c] = nu[c] + v0[c]
            sigmoid_vector(nu, nu)
            for c in range(C):
                v[c] = vpre[c] + (vfirst[c] - vpre[c]) * nu[c]

        # removal key kk = normalize(k * k_k); replacement key k * (1 + (a - 1) k_a)
        kkpre = tslice(tr, I, l, S_KKPRE, C)
        kk = tslice(tr, I, l, S_KK, C)
        k = tslice(tr, I, l, S_K, C)
        k_k = lparam(W, I, l, L_K_K, C)
        k_a = lparam(W, I, l, L_K_A, C)
        for c in range(C):
            kkpre[c] = kpre[c] * k_k[c]
        l2_normalize(kkpre, H, N, KK_MIN_NORM, kk)
        for c in range(C):
            k[c] = kpre[c] * (1.0 + (a[c] - 1.0) * k_a[c])

        # WKV: S <- S diag(w) - (S kk)(kk a)^T + v k^T ; y = S r   (S stored key-major)
        ywkv = tslice(tr, I, l, S_YWKV, C)
        wkv_step(wkv, wdec, k, v, kk, a, r, H, N, ywkv)

        ygn = tslice(tr, I, l, S_YGN, C)
        group_norm(ywkv, lparam(W, I, l, L_GN_W, C), lparam(W, I, l, L_GN_B, C),
                   GROUP_NORM_EPS, H, N, ygn)

        # bonus: y += (sum_j r k r_k) v per head, then gate and project
        alpha = tslice(tr, I, l, S_ALPHA, H)
        yhead = tslice(tr, I, l, S_YHEAD, C)
        ygate = tslice(tr, I, l, S_YGATE, C)
        r_k = lparam(W, I, l, L_R_K, C)
        for h in range(H):
            lo = h * N
            s = 0.0
            for j in range(lo, lo + N):
                s += r[j] * k[j] * r_k[j]
            alpha[h] = s
            for j in range(lo, lo + N):
                yhead[j] = ygn[j] + alpha[h] * v[j]
        for c in range(C):
            ygate[c] = yhead[c] * g[c]
        attout = tslice(tr, I, l, S_ATTOUT, C)
        weights_matvec(W, W16, loff(I, l, L_WO), ygate, C, C, attout)
        xmid = tslice(tr, I, l, S_XMID, C)
        for c in range(C):
            xmid[c] = x0[c] + attout[c]

        # ---- channel mixing (FFN, relu^2) ----
        fn = tslice(tr, I, l, S_FN, C)
        layer_norm(xmid, lparam(W, I, l, L_FFN_W, C), lparam(W, I, l, L_FFN_B, C),
                   LAYER_NORM_EPS, C, fn)
        fxp = tslice(tr, I, l, S_FXP, C)
        fxk = tslice(tr, I, l, S_FXK, C)
        fmix = lparam(W, I, l, L_F_XK, C)
        for c in range(C):
            prev = ffn_prev[c]
            fxp[c] = prev
            fxk[c] = fn[c] + (prev - fn[c]) * fmix[c]
            ffn_prev[c] = fn[c]
        fpre = tslice(tr, I, l, S_FPRE, FF)
        fk = tslice(tr, I, l, S_FK, FF)
        weights_matvec(W, W16, loff(I, l, L_F_KEY), fxk, C, FF, fpre)
        for j in range(FF):
            z = fpre[j] if fpre[j] > 0.0 else 0.0
            fk[j] = z * z
        fout = tslice(tr, I, l, S_FOUT, C)
        weights_matvec(W, W16, loff(I, l, L_F_VAL), fk, FF, C, fout)
        # the block's output is the next block's input; the last one feeds the head
        xout = tslice(tr, I, l + 1, S_X_IN, C) if l < L - 1 else gslice(tr, I, T_XOUT, C)
        for c in range(C):
            xout[c] = xmid[c] + fout[c]

    head_forward(W, W16, tr, I, floor)


@jit
def wkv_step(wkv, w, k, v, kk, a, r, H, N, y):
    """One WKV-7 state update and read-out for every head (state key-major)."""
    for h in range(H):
        S = wkv[h * N * N:(h + 1) * N * N]
        lo = h * N
        # u = S kk  (u[i] = sum_j S[j, i] kk[j])
        u = y[lo:lo + N]  # reuse the output slice as scratch; it is overwritten below
        matvec(S, kk[lo:lo + N], N, N, u)
        # S[j, i] = S[j, i] w[j] - kk[j] a[j] u[i] + k[j] v[i]
        for j in range(N):
            wj = w[lo + j]
            bj = -kk[lo + j] * a[lo + j]
            kj = k[lo + j]
            vh = v[lo:lo + N]
            for i in range(N):
                S[j * N + i] = S[j * N + i] * wj + bj * u[i] + kj * vh[i]
        # y = S r
        matvec(S, r[lo:lo + N], N, N, u)
