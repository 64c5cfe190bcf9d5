"""Exact reverse-mode gradient of one Gated DeltaNet forward step (numba).

Same contract as net/rwkv7/backward.py: `backward_step` differentiates the loss
-ln p[symbol] of one `forward_step` (p the floored distribution that coded the byte) with
respect to every parameter and to the recurrent state the step started from (conv memory and
S). It reads the intermediates that `forward_step` left in the trace plus copies of the state
before and after the step (the delta rule needs both S; the conv needs the old memory), so no
forward work is repeated except norm statistics, recomputed in exactly the forward's order.

Truncated BPTT over T steps: run forward_step for each step keeping (state_old, state_new,
trace); then call backward_step from the last step to the first with one gstate array, zero
before the last step. Each call adds that step's parameter gradient into G and turns
dL/d(state after the step) into dL/d(state before it).

Delta rule per value head (S key-major, S[j, i]), forward: u = S_old^T k,
delta = beta (v - g u), S_new = g S_old + k delta^T, o = scale S_new^T q. Backward, with
gS = dL/dS_new (after adding the read-out's scale q go^T):
  gdelta = gS^T k;  gk += gS delta + S_old gu;  gq += scale S_new go
  gv = beta gdelta;  gbeta = (v - g u) . gdelta;  gu = -beta g gdelta
  gg = <gS, S_old> - beta u . gdelta;  dL/dS_old = g gS + k gu^T
Conv (tap-major weights, memory rows oldest first; the new memory is the old one shifted by
one row with qkv appended): gqkv = gpre w[Kc-1] + gmem_new[Kc-2];
gmem_old[t] = gpre w[t] + gmem_new[t-1] (t >= 1), gmem_old[0] = gpre w[0].

Conventions as in the forward kernels: matrices are input-major; every reduction runs
sequentially in index order, so results are bit-identical on every target.
"""

from __future__ import annotations

import math

import numpy as np

from rwkvzip.net.common import (
    D_C,
    D_L,
    embed_backward,
    head_backward,
    lparam,
    projection_backward,
    tslice,
)
from rwkvzip.net.gdn.forward import (
    D_DK,
    D_DV,
    D_F,
    D_HK,
    D_HV,
    D_KC,
    L2_MIN_NORM,
    L_A,
    L_A_LOG,
    L_B,
    L_CONV,
    L_DOWN,
    L_DT_BIAS,
    L_GATE,
    L_GNORM,
    L_IN_NORM,
    L_OUT,
    L_POST_NORM,
    L_QKV,
    L_UP,
    L_Z,
    RMS_EPS,
    S_ACT,
    S_APRE,
    S_BETA,
    S_C,
    S_CPRE,
    S_DELTA,
    S_G,
    S_GP,
    S_HN,
    S_KN,
    S_O,
    S_ON,
    S_QKV,
    S_QN,
    S_U,
    S_UP,
    S_X_IN,
    S_XMID,
    S_XN,
    S_Y,
    S_Z,
    S_ZS,
    layer_state,
)
from rwkvzip.ops.jit import jit
from rwkvzip.ops.linalg import (
    l2_normalize_backward,
    rms_norm_backward,
    silu_grad,
)
from rwkvzip.ops.mathf import exp64, sigmoid64, sigmoid_vector, softplus64


@jit
def backward_scratch_size(I):
    """float32 entries of the scratch array `backward_step` needs for the model described by I."""
    KD = I[D_HK] * I[D_DK]
    VD = I[D_HV] * I[D_DV]
    QKV = 2 * KD + VD
    return 4 * I[D_C] + 2 * I[D_F] + 3 * VD + 2 * I[D_DV] + 2 * QKV + 2 * KD + 2 * I[D_HV]


@jit
def conv_backward(mem_old, gmem, Wc, Gc, x, gy, Kc, n, gx):
    """Back through conv_step: Gc += taps' inputs * gy; gx = dL/dx (set); gmem new -> old."""
    wl = Wc[(Kc - 1) * n:Kc * n]
    gwl = Gc[(Kc - 1) * n:Kc * n]
    for c in range(n):
        gx[c] = gy[c] * wl[c]
        gwl[c] += gy[c] * x[c]
    if Kc > 1:
        last = gmem[(Kc - 2) * n:(Kc - 1) * n]  # x became the newest memory row
        for c in range(n):
            gx[c] += last[c]
    for t in range(Kc - 2, -1, -1):  # descending: row t - 1 still holds the new-state value
        wt = Wc[t * n:(t + 1) * n]
        gwt = Gc[t * n:(t + 1) * n]
        mt = mem_old[t * n:(t + 1) * n]
        gt = gmem[t * n:(t + 1) * n]
        for c in range(n):
            gwt[c] += gy[c] * mt[c]
        if t > 0:
            prev = gmem[(t - 1) * n:t * n]
            for c in range(n):
                gt[c] = gy[c] * wt[c] + prev[c]
        else:
            for c in range(n):
                gt[c] = gy[c] * wt[c]


@jit
def delta_rule_backward(states, inputs, gates, grads, scratch, dk, dv):
    """Back through one value head of delta_rule_step (S key-major, S[j * dv + i]).

    states (S_old, S_new, gS); inputs (q, k, v, u, delta, go): the forward's vectors and the
    output's gradient; gates (beta, g, scale); grads (gq, gk, gv); scratch (gd, gu).
    On entry gS = dL/dS_new, on exit dL/dS_old. gq, gk accumulate; gv is set; gd, gu are
    scratch (dv entries). Returns (dL/dbeta, dL/dg).
    """
    S_old, S_new, gS = states
    q, k, v, u, delta, go = inputs
    beta, g, scale = gates
    gq, gk, gv = grads
    gd, gu = scratch
    # read-out o = scale S_new^T q: gq[j] += scale sum_i S_new[j, i] go[i]; gS += scale q go^T
    # (four rows side by side only to overlap their sums' dependency chains: each is still
    # the sequential sum over i, the same bits as one row at a time)
    j4 = dk - dk % 4
    for j in range(0, j4, 4):
        r0 = S_new[j * dv:(j + 1) * dv]
        r1 = S_new[(j + 1) * dv:(j + 2) * dv]
        r2 = S_new[(j + 2) * dv:(j + 3) * dv]
        r3 = S_new[(j + 3) * dv:(j + 4) * dv]
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for i in range(dv):
            gi = go[i]
            s0 += r0[i] * gi
            s1 += r1[i] * gi
            s2 += r2[i] * gi
            s3 += r3[i] * gi
        gq[j] += s0 * scale
        gq[j + 1] += s1 * scale
        gq[j + 2] += s2 * scale
        gq[j + 3] += s3 * scale
    for j in range(j4, dk):
        row = S_new[j * dv:(j + 1) * dv]
        s = 0.0
        for i in range(dv):
            s += row[i] * go[i]
        gq[j] += s * scale
    for j in range(dk):
        grow = gS[j * dv:(j + 1) * dv]
        qj = q[j] * scale
        for i in range(dv):
            grow[i] += qj * go[i]
    # gdelta[i] = sum_j gS[j, i] k[j]
    for i in range(dv):
        gd[i] = 0.0
    for j in range(dk):
        kj = k[j]
        grow = gS[j * dv:(j + 1) * dv]
        for i in range(dv):
            gd[i] += grow[i] * kj
    # delta = beta (v - g u)
    gbeta = 0.0
    gg = 0.0
    for i in range(dv):
        d = gd[i]
        gv[i] = beta * d
        gbeta += (v[i] - g * u[i]) * d
        gu[i] = -(beta * g) * d
        gg -= beta * u[i] * d
    # per key j: gk += sum_i gS delta + S_old gu; gg += <gS, S_old> (rows in order; four
    # side by side, as above); then dL/dS_old = g gS + k gu^T
    for j in range(0, j4, 4):
        o0 = S_old[j * dv:(j + 1) * dv]
        o1 = S_old[(j + 1) * dv:(j + 2) * dv]
        o2 = S_old[(j + 2) * dv:(j + 3) * dv]
        o3 = S_old[(j + 3) * dv:(j + 4) * dv]
        g0 = gS[j * dv:(j + 1) * dv]
        g1 = gS[(j + 1) * dv:(j + 2) * dv]
        g2 = gS[(j + 2) * dv:(j + 3) * dv]
        g3 = gS[(j + 3) * dv:(j + 4) * dv]
        k0 = 0.0
        k1 = 0.0
        k2 = 0.0
        k3 = 0.0
        t0 = 0.0
        t1 = 0.0
        t2 = 0.0
        t3 = 0.0
        for i in range(dv):
            di = delta[i]
            ui = gu[i]
            k0 += g0[i] * di + o0[i] * ui
            k1 += g1[i] * di + o1[i] * ui
            k2 += g2[i] * di + o2[i] * ui
            k3 += g3[i] * di + o3[i] * ui
            t0 += g0[i] * o0[i]
            t1 += g1[i] * o1[i]
            t2 += g2[i] * o2[i]
            t3 += g3[i] * o3[i]
        gk[j] += k0
        gk[j + 1] += k1
        gk[j + 2] += k2
        gk[j + 3] += k3
        gg += t0
        gg += t1
        gg += t2
        gg += t3
    for j in range(j4, dk):
        orow = S_old[j * dv:(j + 1) * dv]
        grow = gS[j * dv:(j + 1) * dv]
        sk = 0.0
        sg = 0.0
        for i in range(dv):
            gs = grow[i]
            so = orow[i]
            sk += gs * delta[i] + so * gu[i]
            sg += gs * so
        gk[j] += sk
        gg += sg
    for j in range(dk):
        kj = k[j]
        grow = gS[j * dv:(j + 1) * dv]
        for i in range(dv):
            grow[i] = grow[i] * g + kj * gu[i]
    return gbeta, gg


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
    matrices   (WT, rec): where the matrices are read from and their gradients go, as
               in net/rwkv7/backward.py
    """
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
    DKV = dk * dv
    ratio = Hv // Hk
    scale = 1.0 / math.sqrt(dk)

    o = 0
    GX = scratch[o:o + C]  # dL/d(residual stream) at the current point
    o += C
    GXN = scratch[o:o + C]  # dL/d(input rmsnorm output x_n)
    o += C
    GT = scratch[o:o + C]
    o += C
    GT2 = scratch[o:o + C]
    o += C
    GUP = scratch[o:o + F]  # dL/d(act), then dL/d(up)
    o += F
    GGP = scratch[o:o + F]  # dL/d(gate pre-activation)
    o += F
    GY = scratch[o:o + VD]  # dL/dy, then dL/d(o_n)
    o += VD
    GZ = scratch[o:o + VD]
    o += VD
    GO = scratch[o:o + VD]
    o += VD
    GD = scratch[o:o + dv]
    o += dv
    GU = scratch[o:o + dv]
    o += dv
    GC = scratch[o:o + QKV]  # dL/d(conv output after SiLU), then before it
    o += QKV
    GQKV = scratch[o:o + QKV]
    o += QKV
    GQ = scratch[o:o + KD]  # dL/d(normalised q)
    o += KD
    GK = scratch[o:o + KD]
    o += KD
    GB = scratch[o:o + Hv]  # dL/d(x_n Wb)
    o += Hv
    GA = scratch[o:o + Hv]  # dL/d(x_n Wa + dt_bias)
    # sigmoids of the SiLUs' inputs, float64, one vector pass each (bit for bit sigmoid64)
    sig = np.empty(max(F, VD, QKV), dtype=np.float64)

    # ---- output: bias, LM head, final layer norm (shared with RWKV-7) ----
    head_backward(symbol, W, G, tr, I, floor, GT, GX, matrices)

    for l in range(L - 1, -1, -1):
        g_mem, g_S = layer_state(gstate, I, l)
        mem_old, S_old = layer_state(state_old, I, l)
        _, S_new = layer_state(state_new, I, l)

        # ---- MLP: out = xmid + (silu(hn Wgate) * (hn Wup)) Wdown ----
        hn = tslice(tr, I, l, S_HN, C)
        gp = tslice(tr, I, l, S_GP, F)
        up = tslice(tr, I, l, S_UP, F)
        act = tslice(tr, I, l, S_ACT, F)
        projection_backward(W, G, I, l, L_DOWN, act, GX, F, C, GUP, matrices)
        sigmoid_vector(gp, sig[:F])
        for f in range(F):
            ga = GUP[f]
            x = gp[f]
            s = sig[f]
            GGP[f] = ga * up[f] * silu_grad(x, s)
            GUP[f] = ga * (x * s)  # silu64(x)
        projection_backward(W, G, I, l, L_GATE, hn, GGP, C, F, GT, matrices)
        projection_backward(W, G, I, l, L_UP, hn, GUP, C, F, GT2, matrices)
        for i in range(C):
            GT[i] += GT2[i]
        rms_norm_backward(tslice(tr, I, l, S_XMID, C), lparam(W, I, l, L_POST_NORM, C), GT,
                          RMS_EPS, C, GX, lparam(G, I, l, L_POST_NORM, C))
        # GX = dL/dxmid: the mixer output's gradient and the residual part of dL/dx_in

        # ---- output projection and gated RMSNorm: y = rmsnorm(o) * w * silu(z) ----
        xn = tslice(tr, I, l, S_XN, C)
        y = tslice(tr, I, l, S_Y, VD)
        projection_backward(W, G, I, l, L_OUT, y, GX, VD, C, GY, matrices)
        z = tslice(tr, I, l, S_Z, VD)
        on = tslice(tr, I, l, S_ON, VD)
        zs = tslice(tr, I, l, S_ZS, VD)
        sigmoid_vector(z, sig[:VD])
        for i in range(VD):
            gy = GY[i]
            GZ[i] = gy * on[i] * silu_grad(z[i], sig[i])
            GY[i] = gy * zs[i]
            GO[i] = 0.0
        ov = tslice(tr, I, l, S_O, VD)
        gn_w = lparam(W, I, l, L_GNORM, dv)
        g_gnw = lparam(G, I, l, L_GNORM, dv)
        for h in range(Hv):
            lo = h * dv
            hi = lo + dv
            rms_norm_backward(ov[lo:hi], gn_w, GY[lo:hi], RMS_EPS, dv, GO[lo:hi], g_gnw)
        projection_backward(W, G, I, l, L_Z, xn, GZ, C, VD, GXN, matrices)

        # ---- gated delta rule, per value head ----
        qn = tslice(tr, I, l, S_QN, KD)
        kn = tslice(tr, I, l, S_KN, KD)
        c = tslice(tr, I, l, S_C, QKV)
        u = tslice(tr, I, l, S_U, VD)
        delta = tslice(tr, I, l, S_DELTA, VD)
        beta = tslice(tr, I, l, S_BETA, Hv)
        g = tslice(tr, I, l, S_G, Hv)
        apre = tslice(tr, I, l, S_APRE, Hv)
        a_log = lparam(W, I, l, L_A_LOG, Hv)
        g_alog = lparam(G, I, l, L_A_LOG, Hv)
        g_dt = lparam(G, I, l, L_DT_BIAS, Hv)
        for i in range(KD):
            GQ[i] = 0.0
            GK[i] = 0.0
        for h in range(Hv):
            kh = h // ratio
            klo = kh * dk
            lo = h * dv
            so = h * DKV
            gbeta, gg = delta_rule_backward(
                (S_old[so:so + DKV], S_new[so:so + DKV], g_S[so:so + DKV]),
                (qn[klo:klo + dk], kn[klo:klo + dk], c[2 * KD + lo:2 * KD + lo + dv],
                 u[lo:lo + dv], delta[lo:lo + dv], GO[lo:lo + dv]),
                (beta[h], g[h], scale),
                (GQ[klo:klo + dk], GK[klo:klo + dk], GC[2 * KD + lo:2 * KD + lo + dv]),
                (GD, GU), dk, dv)
            # beta = sigmoid(b); g = exp(-A softplus(apre)), A = exp(A_log), apre = a + dt_bias
            b = beta[h]
            GB[h] = gbeta * (b * (1.0 - b))
            A = exp64(a_log[h])
            gx = gg * g[h]  # dL/d(-A softplus(apre))
            GA[h] = gx * (-A * sigmoid64(apre[h]))
            g_dt[h] += GA[h]
            g_alog[h] += gx * (-A * softplus64(apre[h]))

        # ---- L2 norms of q and k, SiLU, causal conv ----
        l2_normalize_backward(c[0:KD], qn, GQ, Hk, dk, L2_MIN_NORM, GC[0:KD])
        l2_normalize_backward(c[KD:2 * KD], kn, GK, Hk, dk, L2_MIN_NORM, GC[KD:2 * KD])
        cpre = tslice(tr, I, l, S_CPRE, QKV)
        sigmoid_vector(cpre, sig[:QKV])
        for i in range(QKV):
            GC[i] = GC[i] * silu_grad(cpre[i], sig[i])
        qkv = tslice(tr, I, l, S_QKV, QKV)
        conv_backward(mem_old, g_mem, lparam(W, I, l, L_CONV, Kc * QKV),
                      lparam(G, I, l, L_CONV, Kc * QKV), qkv, GC, Kc, QKV, GQKV)
        # g_mem now holds dL/d(conv memory before the step)

        # ---- input projections: qkv, b, a (z done above) ----
        projection_backward(W, G, I, l, L_QKV, xn, GQKV, C, QKV, GT, matrices)
        for i in range(C):
            GXN[i] += GT[i]
        projection_backward(W, G, I, l, L_B, xn, GB, C, Hv, GT, matrices)
        for i in range(C):
            GXN[i] += GT[i]
        projection_backward(W, G, I, l, L_A, xn, GA, C, Hv, GT, matrices)
        for i in range(C):
            GXN[i] += GT[i]
        rms_norm_backward(tslice(tr, I, l, S_X_IN, C), lparam(W, I, l, L_IN_NORM, C), GXN,
                          RMS_EPS, C, GX, lparam(G, I, l, L_IN_NORM, C))
        # GX = dL/dx_in, the output gradient of the block below

    # ---- embedding row of the input byte ----
    embed_backward(token, G, I, GX)
