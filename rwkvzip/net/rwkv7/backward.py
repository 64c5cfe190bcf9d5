"""Exact reverse-mode gradient of one RWKV-7 forward step (numba).

`backward_step` differentiates the loss -ln p[symbol] of one `forward_step` (p the floored
distribution that coded the byte) with respect to every parameter and to the recurrent state
the step started from. It reads the intermediates that `forward_step` left in the trace, plus
copies of the state before and after the step (the WKV update needs both), so no forward work
is repeated except two small per-head reductions (the removal term u = S kk and layer-norm
statistics, recomputed in exactly the forward's order).

Truncated BPTT over T steps: run forward_step for each step keeping (state_old, state_new,
trace); then call backward_step from the last step to the first with one gstate array, zero
before the last step. Each call adds that step's parameter gradient into G (the matrices'
into G too, or into a record the optimizer forms them from: net/gradrec.py) and turns
dL/d(state after the step) into dL/d(state before it).

Conventions as in the forward kernels: matrices are input-major (M[i * n_out + o]); every
reduction runs sequentially in index order; input gradients M · g are explicit per-input
sums over the outputs and weight gradients are axpy rows, so results are bit-identical on
every target (see ops/jit.py and ops/linalg.py).
"""

from __future__ import annotations

import math

import numpy as np

from rwkvzip.net.common import (
    D_C,
    D_L,
    D_V,
    LAYER_NORM_EPS,
    P_EMB,
    T_VFIRST,
    gparam,
    gslice,
    head_backward,
    lparam,
    projection_backward,
    tslice,
)
from rwkvzip.net.rwkv7.forward import (
    D_DA,
    D_DG,
    D_DV,
    D_DW,
    D_H,
    D_I,
    D_N,
    GROUP_NORM_EPS,
    INV_SQRT_E,
    KK_MIN_NORM,
    L_A0,
    L_A1,
    L_A2,
    L_ATT_B,
    L_ATT_W,
    L_F_KEY,
    L_F_VAL,
    L_F_XK,
    L_FFN_B,
    L_FFN_W,
    L_G1,
    L_G2,
    L_GN_B,
    L_GN_W,
    L_K_A,
    L_K_K,
    L_PRE_B,
    L_PRE_W,
    L_R_K,
    L_V0,
    L_V1,
    L_V2,
    L_W0,
    L_W1,
    L_W2,
    L_WK,
    L_WO,
    L_WR,
    L_WV,
    L_X_A,
    L_X_G,
    L_X_K,
    L_X_R,
    L_X_V,
    L_X_W,
    S_A,
    S_AH,
    S_ALPHA,
    S_AXP,
    S_FK,
    S_FN,
    S_FPRE,
    S_FXK,
    S_FXP,
    S_G,
    S_GH,
    S_K,
    S_KK,
    S_KKPRE,
    S_KPRE,
    S_NU,
    S_R,
    S_V,
    S_VH,
    S_VPRE,
    S_WDEC,
    S_WH,
    S_WSIG,
    S_X0,
    S_X_IN,
    S_XA,
    S_XAA,
    S_XG,
    S_XK,
    S_XMID,
    S_XR,
    S_XV,
    S_XW,
    S_YGATE,
    S_YHEAD,
    S_YWKV,
    layer_state,
)
from rwkvzip.ops.jit import jit
from rwkvzip.ops.linalg import layer_norm_backward, matvec, matvec_t, vec_acc

# ---- scratch layout: N_CVEC vectors of C, then FF, then the largest low rank, then 2 * N ----
(
    B_GX, B_GVF, B_GXA, B_GT, B_GT2, B_GYH, B_GG, B_GV,
    B_GR, B_GK, B_GKK, B_GA, B_GW, B_GY, B_GXV,
) = range(15)
N_CVEC = 15


@jit
def backward_scratch_size(I):
    """float32 entries of the scratch array `backward_step` needs for the model described by I."""
    rank = max(max(I[D_DW], I[D_DA]), max(I[D_DV], I[D_DG]))
    return N_CVEC * I[D_C] + I[D_I] + rank + 2 * I[D_N]


@jit
def cvec(scratch, C, slot):
    return scratch[slot * C:(slot + 1) * C]


@jit
def mix_backward(gm, m, prev, base, n, gbase, gprev, Gm):
    """Back through xm = base + (prev - base) * m (a token-shift mix)."""
    for c in range(n):
        g = gm[c]
        mc = m[c]
        gbase[c] += g * (1.0 - mc)
        gprev[c] += g * mc
        Gm[c] += g * (prev[c] - base[c])


@jit(inline="always")
def key_gradients(j, sw, sb, sk, su, a, kk, gw, gk, gkk, ga):
    """Key j's gradients from its row sums (see wkv_backward)."""
    gw[j] = sw
    gk[j] += sk
    gkk[j] = su - sb * a[j]
    ga[j] = -sb * kk[j]


@jit
def wkv_backward(states, inputs, grads, scratch, N):
    """Back through one head of the WKV step (state key-major, S[j * N + i]).

    states (S_old, S_new, gS); inputs (w, k, v, kk, a, r, gy) of the forward and the output's
    gradient; grads (gr, gk, gv, gw, gkk, ga); scratch (u, gu), N entries each.
    Forward: u[i] = sum_j S_old[j, i] kk[j]; S_new[j, i] = S_old[j, i] w[j] + b[j] u[i]
    + k[j] v[i] with b = -kk a; y[i] = sum_j S_new[j, i] r[j].
    On entry gS = dL/dS_new, on exit dL/dS_old. gr, gk, gv accumulate; gw, gkk, ga are set.
    The sums over a key's row accumulate in float32 (no conversions).
    """
    zero = np.float32(0.0)
    S_old, S_new, gS = states
    w, k, v, kk, a, r, gy = inputs
    gr, gk, gv, gw, gkk, ga = grads
    u, gu = scratch
    # read-out: gr[j] += sum_i S_new[j, i] gy[i]; gS[j, i] += r[j] gy[i]
    matvec_t(S_new, gy, N, N, gr, True)
    for j in range(N):
        rj = r[j]
        for i in range(N):
            gS[j * N + i] += rj * gy[i]
    # u = S_old kk, as the forward formed it (bit-identical to the value it used)
    matvec(S_old, kk, N, N, u)
    # gu[i] = sum_j gS[j, i] b[j]; gv[i] += sum_j gS[j, i] k[j]
    for i in range(N):
        gu[i] = 0.0
    for j in range(N):
        bj = -kk[j] * a[j]
        kj = k[j]
        for i in range(N):
            g = gS[j * N + i]
            gu[i] += g * bj
            gv[i] += g * kj
    # per key j: gw = sum_i gS S_old; gb = sum_i gS u; gk += sum_i gS v; gkk += sum_i S_old gu
    # (two keys side by side only to overlap the dependency chains: the same sums)
    for j0 in range(0, N - N % 2, 2):
        gs0 = gS[j0 * N:(j0 + 1) * N]
        gs1 = gS[(j0 + 1) * N:(j0 + 2) * N]
        so0 = S_old[j0 * N:(j0 + 1) * N]
        so1 = S_old[(j0 + 1) * N:(j0 + 2) * N]
        sw0, sb0, sk0, su0 = zero, zero, zero, zero
        sw1, sb1, sk1, su1 = zero, zero, zero, zero
        for i in range(N):
            ui = u[i]
            vi = v[i]
            gui = gu[i]
            g = gs0[i]
            so = so0[i]
            sw0 += g * so
            sb0 += g * ui
            sk0 += g * vi
            su0 += so * gui
            g = gs1[i]
            so = so1[i]
            sw1 += g * so
            sb1 += g * ui
            sk1 += g * vi
            su1 += so * gui
        key_gradients(j0, sw0, sb0, sk0, su0, a, kk, gw, gk, gkk, ga)
        key_gradients(j0 + 1, sw1, sb1, sk1, su1, a, kk, gw, gk, gkk, ga)
    if N % 2:
        j = N - 1
        sw, sb, sk, su = zero, zero, zero, zero
        for i in range(N):
            g = gS[j * N + i]
            so = S_old[j * N + i]
            sw += g * so
            sb += g * u[i]
            sk += g * v[i]
            su += so * gu[i]
        key_gradients(j, sw, sb, sk, su, a, kk, gw, gk, gkk, ga)
    # dL/dS_old[j, i] = gS[j, i] w[j] + kk[j] gu[i]
    for j in range(N):
        wj = w[j]
        kj = kk[j]
        for i in range(N):
            gS[j * N + i] = gS[j * N + i] * wj + kj * gu[i]


@jit
def backward_step(token, symbol, W, G, state_old, state_new, tr, gstate, I, floor, scratch,
                  matrices):
    """Add d(-ln p[symbol]) / dW of one forward step into G; map gstate back one step.

    token      the byte the step read (its embedding row gets the input gradient)
    symbol     the byte the step's distribution coded (the loss is -ln p[symbol])
               (-1: the trace's T_GLOGITS already holds dL/dlogits)
    W, G       flat float32 parameters and their gradient accumulator (same layout, G += ...)
    state_old  the recurrent state before forward_step; state_new the state after it
    tr         the trace forward_step left for this step (T_GLOGITS gets dL/dlogits)
    gstate     in: dL/d(state_new) (zeros for a single step); out: dL/d(state_old)
    I, floor   the index table and the output floor the forward used
    scratch    float32 work array of at least backward_scratch_size(I) entries
    matrices   (WT, rec): W's matrices as output-major twins (linalg.refresh_twins), or an
               empty WT to read W itself (the same bits either way); and the record that keeps the
               matrices' gradients (net/gradrec.py), or an empty one: into G with the rest
               (net.common.dense_matrices: both empty)
    """
    C = I[D_C]
    L = I[D_L]
    V = I[D_V]
    H = I[D_H]
    N = I[D_N]
    FF = I[D_I]
    Dw = I[D_DW]
    Da = I[D_DA]
    Dv = I[D_DV]
    Dg = I[D_DG]
    NN = N * N

    GX = cvec(scratch, C, B_GX)  # dL/d(residual stream) at the current point
    GVF = cvec(scratch, C, B_GVF)  # dL/d(v_first), gathered from every layer > 0
    GXA = cvec(scratch, C, B_GXA)  # dL/d(attention layer-norm output xa)
    GT = cvec(scratch, C, B_GT)
    GT2 = cvec(scratch, C, B_GT2)
    GYH = cvec(scratch, C, B_GYH)
    GG = cvec(scratch, C, B_GG)
    GV = cvec(scratch, C, B_GV)
    GR = cvec(scratch, C, B_GR)
    GK = cvec(scratch, C, B_GK)
    GKK = cvec(scratch, C, B_GKK)
    GA = cvec(scratch, C, B_GA)
    GW = cvec(scratch, C, B_GW)
    GY = cvec(scratch, C, B_GY)
    GXV = cvec(scratch, C, B_GXV)
    o = N_CVEC * C
    GF = scratch[o:o + FF]
    o += FF
    rank = max(max(Dw, Da), max(Dv, Dg))
    GH = scratch[o:o + rank]
    o += rank
    U = scratch[o:o + N]
    GU = scratch[o + N:o + 2 * N]

    # ---- output: bias, LM head, final layer norm ----
    head_backward(symbol, W, G, tr, I, floor, GT, GX, matrices)
    for c in range(C):
        GVF[c] = 0.0
    vfirst = gslice(tr, I, T_VFIRST, C)

    for l in range(L - 1, -1, -1):
        g_att, g_ffn, g_wkv = layer_state(gstate, I, l)
        _, _, wkv_old = layer_state(state_old, I, l)
        _, _, wkv_new = layer_state(state_new, I, l)

        # ---- channel mixing: out = xmid + relu(fxk · Key)^2 · Value ----
        fk = tslice(tr, I, l, S_FK, FF)
        fpre = tslice(tr, I, l, S_FPRE, FF)
        fxk = tslice(tr, I, l, S_FXK, C)
        fn = tslice(tr, I, l, S_FN, C)
        fxp = tslice(tr, I, l, S_FXP, C)
        projection_backward(W, G, I, l, L_F_VAL, fk, GX, FF, C, GF, matrices)
        for j in range(FF):
            GF[j] = GF[j] * (2.0 * fpre[j]) if fpre[j] > 0.0 else 0.0
        projection_backward(W, G, I, l, L_F_KEY, fxk, GF, C, FF, GT, matrices)
        # fxk = fn + (prev - fn) * mix; the new state's ffn_prev is fn
        fmix = lparam(W, I, l, L_F_XK, C)
        gfmix = lparam(G, I, l, L_F_XK, C)
        for c in range(C):
            g = GT[c]
            GT2[c] = g_ffn[c] + g * (1.0 - fmix[c])
            gfmix[c] += g * (fxp[c] - fn[c])
            g_ffn[c] = g * fmix[c]
        layer_norm_backward(tslice(tr, I, l, S_XMID, C), lparam(W, I, l, L_FFN_W, C), GT2,
                            LAYER_NORM_EPS, C, GX, lparam(G, I, l, L_FFN_W, C),
                            lparam(G, I, l, L_FFN_B, C))
        # GX = dL/dxmid = dL/dattout, and the residual part of dL/dx0

        # ---- time mixing: xmid = x0 + (yhead * g) · WO ----
        xa = tslice(tr, I, l, S_XA, C)
        axp = tslice(tr, I, l, S_AXP, C)
        for c in range(C):  # the new state's att_prev is xa
            GXA[c] = g_att[c]
            g_att[c] = 0.0
        ygate = tslice(tr, I, l, S_YGATE, C)
        yhead = tslice(tr, I, l, S_YHEAD, C)
        gate = tslice(tr, I, l, S_G, C)
        projection_backward(W, G, I, l, L_WO, ygate, GX, C, C, GT, matrices)
        for c in range(C):
            GG[c] = GT[c] * yhead[c]
            GYH[c] = GT[c] * gate[c]

        # bonus: yhead = ygn + alpha v, alpha = sum_j r k r_k per head
        r = tslice(tr, I, l, S_R, C)
        k = tslice(tr, I, l, S_K, C)
        v = tslice(tr, I, l, S_V, C)
        alpha = tslice(tr, I, l, S_ALPHA, H)
        r_k = lparam(W, I, l, L_R_K, C)
        g_rk = lparam(G, I, l, L_R_K, C)
        for h in range(H):
            lo = h * N
            ga_h = 0.0
            for j in range(lo, lo + N):
                ga_h += GYH[j] * v[j]
            al = alpha[h]
            for j in range(lo, lo + N):
                GV[j] = GYH[j] * al
                t = ga_h * r_k[j]
                GR[j] = t * k[j]
                GK[j] = t * r[j]
                g_rk[j] += ga_h * (r[j] * k[j])

        # group norm per head, then the WKV step
        ywkv = tslice(tr, I, l, S_YWKV, C)
        gn_w = lparam(W, I, l, L_GN_W, C)
        g_gnw = lparam(G, I, l, L_GN_W, C)
        g_gnb = lparam(G, I, l, L_GN_B, C)
        for c in range(C):
            GY[c] = 0.0
        for h in range(H):
            lo = h * N
            hi = lo + N
            layer_norm_backward(ywkv[lo:hi], gn_w[lo:hi], GYH[lo:hi], GROUP_NORM_EPS, N,
                                GY[lo:hi], g_gnw[lo:hi], g_gnb[lo:hi])
        wdec = tslice(tr, I, l, S_WDEC, C)
        kk = tslice(tr, I, l, S_KK, C)
        a = tslice(tr, I, l, S_A, C)
        for h in range(H):
            lo = h * N
            hi = lo + N
            so = h * NN
            states = (wkv_old[so:so + NN], wkv_new[so:so + NN], g_wkv[so:so + NN])
            inputs = (wdec[lo:hi], k[lo:hi], v[lo:hi], kk[lo:hi], a[lo:hi], r[lo:hi],
                      GY[lo:hi])
            grads = (GR[lo:hi], GK[lo:hi], GV[lo:hi], GW[lo:hi], GKK[lo:hi], GA[lo:hi])
            wkv_backward(states, inputs, grads, (U, GU), N)

        # k = kpre (1 + (a - 1) k_a)
        kpre = tslice(tr, I, l, S_KPRE, C)
        k_a = lparam(W, I, l, L_K_A, C)
        g_ka = lparam(G, I, l, L_K_A, C)
        for c in range(C):
            t = GK[c] * kpre[c]
            GA[c] += t * k_a[c]
            g_ka[c] += t * (a[c] - 1.0)
            GK[c] = GK[c] * (1.0 + (a[c] - 1.0) * k_a[c])
        # kk = kkpre / max(|kkpre|, KK_MIN_NORM) per head, kkpre = kpre k_k
        kkpre = tslice(tr, I, l, S_KKPRE, C)
        for h in range(H):
            lo = h * N
            ss = 0.0
            for j in range(lo, lo + N):
                ss += kkpre[j] * kkpre[j]
            norm = math.sqrt(ss)
            dot = 0.0
            if norm < KK_MIN_NORM:
                norm = KK_MIN_NORM  # clamped: kk is kkpre times a constant
            else:
                for j in range(lo, lo + N):
                    dot += GKK[j] * kk[j]
            inv = 1.0 / norm
            for j in range(lo, lo + N):
                GT[j] = (GKK[j] - kk[j] * dot) * inv
        k_k = lparam(W, I, l, L_K_K, C)
        g_kk = lparam(G, I, l, L_K_K, C)
        for c in range(C):
            GK[c] += GT[c] * k_k[c]
            g_kk[c] += GT[c] * kpre[c]
        # GK = dL/dkpre

        # value residual: v = vpre + (vfirst - vpre) nu, nu = sigmoid(xv V1 V2 + v0)
        xv = tslice(tr, I, l, S_XV, C)
        if l > 0:
            vpre = tslice(tr, I, l, S_VPRE, C)
            nu = tslice(tr, I, l, S_NU, C)
            for c in range(C):
                gv = GV[c]
                n_c = nu[c]
                GVF[c] += gv * n_c
                GT[c] = gv * (vfirst[c] - vpre[c]) * (n_c * (1.0 - n_c))
                GV[c] = gv * (1.0 - n_c)
            vec_acc(lparam(G, I, l, L_V0, C), GT, C)
            projection_backward(W, G, I, l, L_V2, tslice(tr, I, l, S_VH, Dv), GT, Dv, C, GH,
                                matrices)
            projection_backward(W, G, I, l, L_V1, xv, GH, C, Dv, GXV, matrices)
        else:
            for c in range(C):  # layer 0 published v = vpre as v_first
                GV[c] += GVF[c]
                GXV[c] = 0.0
        # GV = dL/dvpre

        # in-context learning rate a = sigmoid(xaa A1 A2 + a0)
        for c in range(C):
            GA[c] = GA[c] * (a[c] * (1.0 - a[c]))
        vec_acc(lparam(G, I, l, L_A0, C), GA, C)
        xaa = tslice(tr, I, l, S_XAA, C)
        projection_backward(W, G, I, l, L_A2, tslice(tr, I, l, S_AH, Da), GA, Da, C, GH,
                            matrices)
        projection_backward(W, G, I, l, L_A1, xaa, GH, C, Da, GT, matrices)
        mix_backward(GT, lparam(W, I, l, L_X_A, C), axp, xa, C, GXA, g_att,
                     lparam(G, I, l, L_X_A, C))

        # decay wdec = exp(-sigmoid(tanh(xw W1) W2 + w0) / sqrt(e))
        wsig = tslice(tr, I, l, S_WSIG, C)
        for c in range(C):
            s = wsig[c]
            GW[c] = GW[c] * (-INV_SQRT_E * wdec[c]) * (s * (1.0 - s))
        vec_acc(lparam(G, I, l, L_W0, C), GW, C)
        xw = tslice(tr, I, l, S_XW, C)
        wh = tslice(tr, I, l, S_WH, Dw)
        projection_backward(W, G, I, l, L_W2, wh, GW, Dw, C, GH, matrices)
        for d in range(Dw):
            GH[d] = GH[d] * (1.0 - wh[d] * wh[d])
        projection_backward(W, G, I, l, L_W1, xw, GH, C, Dw, GT, matrices)
        mix_backward(GT, lparam(W, I, l, L_X_W, C), axp, xa, C, GXA, g_att,
                     lparam(G, I, l, L_X_W, C))

        # output gate g = sigmoid(xg G1) G2
        xg = tslice(tr, I, l, S_XG, C)
        gh = tslice(tr, I, l, S_GH, Dg)
        projection_backward(W, G, I, l, L_G2, gh, GG, Dg, C, GH, matrices)
        for d in range(Dg):
            GH[d] = GH[d] * (gh[d] * (1.0 - gh[d]))
        projection_backward(W, G, I, l, L_G1, xg, GH, C, Dg, GT, matrices)
        mix_backward(GT, lparam(W, I, l, L_X_G, C), axp, xa, C, GXA, g_att,
                     lparam(G, I, l, L_X_G, C))

        # r, k, v projections and their token-shift mixes
        xr = tslice(tr, I, l, S_XR, C)
        projection_backward(W, G, I, l, L_WR, xr, GR, C, C, GT, matrices)
        mix_backward(GT, lparam(W, I, l, L_X_R, C), axp, xa, C, GXA, g_att,
                     lparam(G, I, l, L_X_R, C))
        xk = tslice(tr, I, l, S_XK, C)
        projection_backward(W, G, I, l, L_WK, xk, GK, C, C, GT, matrices)
        mix_backward(GT, lparam(W, I, l, L_X_K, C), axp, xa, C, GXA, g_att,
                     lparam(G, I, l, L_X_K, C))
        projection_backward(W, G, I, l, L_WV, xv, GV, C, C, GT, matrices)
        for c in range(C):
            GT[c] += GXV[c]
        mix_backward(GT, lparam(W, I, l, L_X_V, C), axp, xa, C, GXA, g_att,
                     lparam(G, I, l, L_X_V, C))
        # g_att now holds dL/d(att_prev before the step)

        # xa = layer_norm(x0); x0 = pre_norm(x_in) in layer 0, else x_in
        layer_norm_backward(tslice(tr, I, l, S_X0, C), lparam(W, I, l, L_ATT_W, C), GXA,
                            LAYER_NORM_EPS, C, GX, lparam(G, I, l, L_ATT_W, C),
                            lparam(G, I, l, L_ATT_B, C))
        if l == 0:
            for c in range(C):
                GT[c] = 0.0
            layer_norm_backward(tslice(tr, I, 0, S_X_IN, C), lparam(W, I, 0, L_PRE_W, C), GX,
                                LAYER_NORM_EPS, C, GT, lparam(G, I, 0, L_PRE_W, C),
                                lparam(G, I, 0, L_PRE_B, C))
            for c in range(C):
                GX[c] = GT[c]

    # ---- embedding row of the input byte ----
    emb = gparam(G, I, P_EMB, V * C)[token * C:(token + 1) * C]
    vec_acc(emb, GX, C)

