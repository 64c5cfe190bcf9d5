"""Where a byte's time goes: µs per byte of each part of the network, its training, the
context models and mixer, and the decoder's own overhead, beside each part's FLOP floor.

    python scripts/profile_kernels.py [FILE] [--configs gdn:32x1,rwkv7:64x1,rwkv7:128x2]
        [--bytes N] [--no-levels] [--footprint 128x768:1,2,4,6,8]
        [--level-shapes gdn:64x1,gdn:128x1m256] [--json OUT] [--md OUT]

Network parts are timed by running the forward's own kernels (rwkvzip/net/) on the model's
own arrays, part by part, in numba loops (no Python in the timing); they add up to about
the whole forward, which is timed as well. The floor of a part is its multiply-adds (2 FLOP
each) at the rate the fixed-order matrix-vector kernel reaches on a matrix that stays in
cache (measured here, `peak`: the best of PEAK_ROUNDS runs just before each network's
table, since this kind of machine's speed drifts by a fifth within minutes and a peak
caught in a slow moment would flatter every ratio); elementwise work (transcendentals,
norms) counts one FLOP an element, so its floor is small and its ratio shows how far the
scalar code is from the machine. The parts and the whole forward run under the numeric
contract (3: the exponentials in float32 lanes). The level rows run the real codec
(Predictor) on FILE (the first N bytes of alice29.txt by default): the context models and
mixer alone (`net=0`), the frozen network mixed in (the default level), the highest level
whose network learns (`-9` since mix-v58 froze `-7`) mixed and alone, frozen and training
by TBPTT, and decoding against the encoder's kernel time (the rest is the Python loop,
dispatch and constriction).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from harness import CORPUS, cpu_name

from rwkvzip import priors
from rwkvzip.coding import coder, stepper
from rwkvzip.coding.codec import ENCODE_BLOCK, Predictor, frame_blocks
from rwkvzip.net import common as KC  # noqa: N812
from rwkvzip.net import optim
from rwkvzip.net.gdn import backward as gdn_backward
from rwkvzip.net.gdn import forward as KG  # noqa: N812
from rwkvzip.net.gradrec import new_record, no_record, record_into
from rwkvzip.net.rwkv7 import backward as rwkv7_backward
from rwkvzip.net.rwkv7 import forward as KR  # noqa: N812
from rwkvzip.ops.bf16 import (
    NO_COPY,
    bf16_copy,
    copy_measured_faster,
    round_matrices,
    round_to_bf16,
    top_halves,
)
from rwkvzip.ops.jit import jit
from rwkvzip.ops.linalg import (
    group_norm,
    l2_normalize,
    l2_normalize_backward,
    layer_norm,
    layer_norm_backward,
    matvec,
    refresh_twins,
    rms_norm,
    rms_norm_backward,
    silu_grad,
    softmax_with_floor,
)
from rwkvzip.ops.mathf import (
    exp32_lane,
    exp64,
    sigmoid64,
    sigmoid_vector,
    silu_vector,
    softplus64,
    swiglu_vector,
    tanh64,
)
from rwkvzip.recipe import (
    ARCHS,
    DEFAULT_LEVEL,
    LEVELS,
    PROB_FLOOR,
    Recipe,
    level_recipe,
)

DEFAULT_FILE = CORPUS / "canterbury" / "alice29.txt"
MIN_SECONDS = 0.3  # each timing runs about this long (the smoke tests shorten it)
PEAK_ROUNDS = 3  # the matvec peak and the whole forward: the best of this many runs
CONFIGS = {"gdn:32x1": ("gdn", {"hidden": 32, "layers": 1, "key_heads": 1, "value_heads": 2,
                                "key_dim": 16, "value_dim": 16, "mlp": 128}),
           "gdn:64x1": ("gdn", {"hidden": 64, "layers": 1, "key_heads": 2, "value_heads": 4,
                                "key_dim": 16, "value_dim": 16, "mlp": 384}),
           "gdn:128x1": ("gdn", {"hidden": 128, "layers": 1, "key_heads": 2, "value_heads": 4,
                                 "key_dim": 32, "value_dim": 32, "mlp": 768}),
           "gdn:128x2": ("gdn", {"hidden": 128, "layers": 2}),
           # narrower MLPs and a width between, for --level-shapes
           "gdn:64x1m256": ("gdn", {"hidden": 64, "layers": 1, "key_heads": 2, "value_heads": 4,
                                    "key_dim": 16, "value_dim": 16, "mlp": 256}),
           "gdn:96x1": ("gdn", {"hidden": 96, "layers": 1, "key_heads": 2, "value_heads": 4,
                                "key_dim": 24, "value_dim": 24, "mlp": 384}),
           "gdn:128x1m256": ("gdn", {"hidden": 128, "layers": 1, "key_heads": 2,
                                     "value_heads": 4, "key_dim": 32, "value_dim": 32,
                                     "mlp": 256}),
           "gdn:128x1m512": ("gdn", {"hidden": 128, "layers": 1, "key_heads": 2,
                                     "value_heads": 4, "key_dim": 32, "value_dim": 32,
                                     "mlp": 512}),
           "rwkv7:64x1": ("rwkv7", {"hidden": 64, "layers": 1, "ffn": 512}),
           "rwkv7:128x2": ("rwkv7", {"hidden": 128, "layers": 2})}


# ---------------------------------------------------------------- timing loops (numba)
# Not cached on disk: numba's cache names the module, and this file runs both as __main__
# and imported by its smoke test.


@jit(cache=False)
def gdn_dims(I):
    """A GDN's sizes from its index table: (C, Hk, Hv, dk, dv, Kc, F, KD, VD, QKV)."""
    Hk, Hv, dk, dv = I[KG.D_HK], I[KG.D_HV], I[KG.D_DK], I[KG.D_DV]
    KD, VD = Hk * dk, Hv * dv
    return I[KC.D_C], Hk, Hv, dk, dv, I[KG.D_KC], I[KG.D_F], KD, VD, 2 * KD + VD


@jit(cache=False)
def loop_forward(arch, data, W, W16, state, tr, I, floor):
    for t in range(data.shape[0]):
        if arch == 0:
            KR.forward_step(data[t], W, W16, state, tr, I, floor)
        else:
            KG.forward_step(data[t], W, W16, state, tr, I, floor)


@jit(cache=False)
def loop_forward_backward(arch, data, W, G, state, s_old, tr, gstate, I, floor,
                          scratch, matrices):
    """Each byte's forward step, then its backward step (one byte's gradient; the matrices'
    gradients into the rows of the record in turn, as a segment's steps do); arch 0 is
    RWKV-7, else GDN."""
    rec = matrices[1]
    for t in range(data.shape[0] - 1):
        for i in range(state.shape[0]):
            s_old[i] = state[i]
            gstate[i] = 0.0
        record_into(rec, t % rec[0].shape[0])
        if arch == 0:
            KR.forward_step(data[t], W, NO_COPY, state, tr, I, floor)
            rwkv7_backward.backward_step(data[t], data[t + 1], W, G, s_old, state, tr, gstate,
                                         I, floor, scratch, matrices)
        else:
            KG.forward_step(data[t], W, NO_COPY, state, tr, I, floor)
            gdn_backward.backward_step(data[t], data[t + 1], W, G, s_old, state, tr, gstate,
                                       I, floor, scratch, matrices)


@jit(cache=False)
def rwkv7_backward_part(part, W, G, s_old, state, tr, gstate, I, floor, scratch, matrices,
                        vecs, n):
    """One part of net/rwkv7/backward.backward_step, every layer, n times, on the trace of
    the forward step before (vecs: random vectors standing in for the gradients)."""
    C = I[KC.D_C]
    H = I[KR.D_H]
    N = I[KR.D_N]
    FF = I[KR.D_I]
    ranks = (I[KR.D_DW], I[KR.D_DA], I[KR.D_DV], I[KR.D_DG])
    g, gx, big = vecs[0], vecs[1], vecs[2]
    for _ in range(n):
        record_into(matrices[1], 0)
        if part == 0:  # the output layer: logit gradient, head, final norm
            KC.head_backward(65, W, G, tr, I, floor, scratch[:C], scratch[C:2 * C], matrices)
        for l in range(I[KC.D_L]):
            if part == 1:  # the FFN's value and key projections
                KC.projection_backward(W, G, I, l, KR.L_F_VAL, big, g, FF, C, big, matrices)
                KC.projection_backward(W, G, I, l, KR.L_F_KEY, g, big, C, FF, gx, matrices)
            elif part == 2:  # r, k, v, o
                for slot in (KR.L_WO, KR.L_WR, KR.L_WK, KR.L_WV):
                    KC.projection_backward(W, G, I, l, slot, g, g, C, C, gx, matrices)
            elif part == 3:  # the low-rank paths, both matrices of each
                for k, (down, up) in enumerate(((KR.L_W1, KR.L_W2), (KR.L_A1, KR.L_A2),
                                                (KR.L_V1, KR.L_V2), (KR.L_G1, KR.L_G2))):
                    if k == 2 and l == 0:
                        continue  # layer 0 has no value residual
                    r = ranks[k]
                    KC.projection_backward(W, G, I, l, up, big[:r], g, r, C, big[:r], matrices)
                    KC.projection_backward(W, G, I, l, down, g, big[:r], C, r, gx, matrices)
            elif part == 4:  # WKV, every head
                _, _, wkv_old = KR.layer_state(s_old, I, l)
                _, _, wkv_new = KR.layer_state(state, I, l)
                _, _, g_wkv = KR.layer_state(gstate, I, l)
                for h in range(H):
                    lo, so = h * N, h * N * N
                    states = (wkv_old[so:so + N * N], wkv_new[so:so + N * N],
                              g_wkv[so:so + N * N])
                    ins = (vecs[3][lo:lo + N], vecs[4][lo:lo + N], vecs[5][lo:lo + N],
                           vecs[6][lo:lo + N], vecs[7][lo:lo + N], vecs[8][lo:lo + N],
                           vecs[9][lo:lo + N])
                    outs = (vecs[10][lo:lo + N], vecs[11][lo:lo + N], vecs[12][lo:lo + N],
                            vecs[13][lo:lo + N], vecs[14][lo:lo + N], vecs[15][lo:lo + N])
                    wkv_scratch = (scratch[:N], scratch[N:2 * N])
                    rwkv7_backward.wkv_backward(states, ins, outs, wkv_scratch, N)
            elif part == 5:  # the attention and FFN norms, the group norm, layer 0's pre-norm
                w = KC.lparam(W, I, l, KR.L_ATT_W, C)
                gw = KC.lparam(G, I, l, KR.L_ATT_W, C)
                gb = KC.lparam(G, I, l, KR.L_ATT_B, C)
                for _k in range(3 if l == 0 else 2):
                    layer_norm_backward(g, w, gx, KC.LAYER_NORM_EPS, C, big[:C], gw, gb)
                for h in range(H):
                    lo = h * N
                    layer_norm_backward(g[lo:lo + N], w[lo:lo + N], gx[lo:lo + N],
                                        KR.GROUP_NORM_EPS, N, big[lo:lo + N], gw[lo:lo + N],
                                        gb[lo:lo + N])
        if part == 6:  # the whole backward step
            for i in range(gstate.shape[0]):
                gstate[i] = 0.0
            rwkv7_backward.backward_step(65, 66, W, G, s_old, state, tr, gstate, I, floor,
                                         scratch, matrices)


@jit(cache=False)
def gdn_backward_part(part, W, G, s_old, state, tr, gstate, I, floor, scratch, matrices,
                      vecs, n):
    """One part of net/gdn/backward.backward_step, every layer, n times, on the trace of the
    forward step before (vecs: random vectors standing in for the gradients)."""
    C, Hk, Hv, dk, dv, Kc, F, KD, VD, QKV = gdn_dims(I)
    DKV = dk * dv
    g, gx, big, gq, gk, out = vecs[0], vecs[1], vecs[2], vecs[3], vecs[4], vecs[11]
    sig = np.empty(max(F, QKV), dtype=np.float64)
    for _ in range(n):
        record_into(matrices[1], 0)
        if part == 0:  # the output layer: logit gradient, head, final norm
            KC.head_backward(65, W, G, tr, I, floor, scratch[:C], scratch[C:2 * C], matrices)
        for l in range(I[KC.D_L]):
            if part == 1:  # the MLP: down, gate and up projections, the SwiGLU's gradient
                gp = KC.tslice(tr, I, l, KG.S_GP, F)
                KC.projection_backward(W, G, I, l, KG.L_DOWN, big, g, F, C, big, matrices)
                sigmoid_vector(gp, sig[:F])
                for f in range(F):  # into another vector: gradients scaled in place again
                    out[f] = big[f] * silu_grad(gp[f], sig[f])  # and again turn denormal
                KC.projection_backward(W, G, I, l, KG.L_GATE, g, out, C, F, gx, matrices)
                KC.projection_backward(W, G, I, l, KG.L_UP, g, out, C, F, gx, matrices)
            elif part == 2:  # the mixer's projections: out, z, q|k|v, beta, a
                KC.projection_backward(W, G, I, l, KG.L_OUT, big, g, VD, C, big, matrices)
                KC.projection_backward(W, G, I, l, KG.L_Z, g, big, C, VD, gx, matrices)
                KC.projection_backward(W, G, I, l, KG.L_QKV, g, big, C, QKV, gx, matrices)
                KC.projection_backward(W, G, I, l, KG.L_B, g, big, C, Hv, gx, matrices)
                KC.projection_backward(W, G, I, l, KG.L_A, g, big, C, Hv, gx, matrices)
            elif part == 3:  # the gated delta rule, every value head
                _, S_o = KG.layer_state(s_old, I, l)
                _, S_n = KG.layer_state(state, I, l)
                _, g_S = KG.layer_state(gstate, I, l)
                for h in range(Hv):
                    so, lo, klo = h * DKV, h * dv, (h // (Hv // Hk)) * dk
                    gdn_backward.delta_rule_backward(
                        (S_o[so:so + DKV], S_n[so:so + DKV], g_S[so:so + DKV]),
                        (vecs[5][klo:klo + dk], vecs[6][klo:klo + dk], vecs[7][lo:lo + dv],
                         vecs[8][lo:lo + dv], vecs[9][lo:lo + dv], vecs[10][lo:lo + dv]),
                        (0.5, 0.9, 0.25), (gq[klo:klo + dk], gk[klo:klo + dk],
                                           big[lo:lo + dv]),
                        (scratch[:dv], scratch[dv:2 * dv]), dk, dv)
            elif part == 4:  # q, k L2 norms, the conv's SiLU, the causal conv
                mem_old, _ = KG.layer_state(s_old, I, l)
                g_mem, _ = KG.layer_state(gstate, I, l)
                c = KC.tslice(tr, I, l, KG.S_C, QKV)
                l2_normalize_backward(c[0:KD], KC.tslice(tr, I, l, KG.S_QN, KD), gq, Hk, dk,
                                      KG.L2_MIN_NORM, big[0:KD])
                l2_normalize_backward(c[KD:2 * KD], KC.tslice(tr, I, l, KG.S_KN, KD), gk, Hk,
                                      dk, KG.L2_MIN_NORM, big[KD:2 * KD])
                cpre = KC.tslice(tr, I, l, KG.S_CPRE, QKV)
                sigmoid_vector(cpre, sig[:QKV])
                for i in range(QKV):
                    out[i] = big[i] * silu_grad(cpre[i], sig[i])
                gdn_backward.conv_backward(mem_old, g_mem, KC.lparam(W, I, l, KG.L_CONV,
                                                                      Kc * QKV),
                                           KC.lparam(G, I, l, KG.L_CONV, Kc * QKV),
                                           KC.tslice(tr, I, l, KG.S_QKV, QKV), out, Kc, QKV,
                                           gx)
            elif part == 5:  # norms: post-MLP, the gated per-head norm, the input norm
                rms_norm_backward(KC.tslice(tr, I, l, KG.S_XMID, C),
                                  KC.lparam(W, I, l, KG.L_POST_NORM, C), g, KG.RMS_EPS, C, gx,
                                  KC.lparam(G, I, l, KG.L_POST_NORM, C))
                o = KC.tslice(tr, I, l, KG.S_O, VD)
                for h in range(Hv):
                    lo = h * dv
                    rms_norm_backward(o[lo:lo + dv], KC.lparam(W, I, l, KG.L_GNORM, dv),
                                      g[lo:lo + dv], KG.RMS_EPS, dv, big[lo:lo + dv],
                                      KC.lparam(G, I, l, KG.L_GNORM, dv))
                rms_norm_backward(KC.tslice(tr, I, l, KG.S_X_IN, C),
                                  KC.lparam(W, I, l, KG.L_IN_NORM, C), g, KG.RMS_EPS, C, gx,
                                  KC.lparam(G, I, l, KG.L_IN_NORM, C))
        if part == 6:  # the whole backward step
            for i in range(gstate.shape[0]):
                gstate[i] = 0.0
            gdn_backward.backward_step(65, 66, W, G, s_old, state, tr, gstate, I, floor,
                                       scratch, matrices)


@jit(cache=False)
def loop_optimizer(W, O, G, scope, F, rec, steps, n):
    for _ in range(n):
        optim.apply_gradients(W, O, G, scope, F, 1.0 / steps, rec, steps)


@jit(cache=False)
def loop_twins(W, WT, table, n):
    for _ in range(n):
        refresh_twins(W, WT, table)


@jit(cache=False)
def loop_learn_mixing(data, mixing, path):
    for t in range(data.shape[0]):
        stepper.learn_mixing(data[t], 0, mixing, path)


@jit(cache=False)
def loop_decode(rows, words, state, out):
    for t in range(rows.shape[0]):
        out[t] = coder.decode_symbol(rows[t], words, state)


@jit(cache=False)
def loop_matvec(M, x, n_in, n_out, y, n):
    for _ in range(n):
        matvec(M, x, n_in, n_out, y)


@jit(cache=False)
def loop_head(W, tr, I, floor, n):
    for _ in range(n):
        KC.head_forward(W, NO_COPY, tr, I, floor)


@jit(cache=False)
def rwkv7_part(part, W, state, tr, I, n):
    """One part of net/rwkv7/forward.forward_step, every layer, n times."""
    C = I[KC.D_C]
    H = I[KR.D_H]
    N = I[KR.D_N]
    FF = I[KR.D_I]
    Dw = I[KR.D_DW]
    Da = I[KR.D_DA]
    Dv = I[KR.D_DV]
    Dg = I[KR.D_DG]
    for _ in range(n):
        for l in range(I[KC.D_L]):
            att_prev, ffn_prev, wkv = KR.layer_state(state, I, l)
            x0 = KC.tslice(tr, I, l, KR.S_X0, C)
            xa = KC.tslice(tr, I, l, KR.S_XA, C)
            if part == 0:  # norms: layer 0's pre-norm, attention and FFN norms, WKV group norm
                if l == 0:
                    layer_norm(KC.tslice(tr, I, l, KR.S_X_IN, C),
                               KC.lparam(W, I, l, KR.L_PRE_W, C),
                               KC.lparam(W, I, l, KR.L_PRE_B, C), KC.LAYER_NORM_EPS, C, x0)
                layer_norm(x0, KC.lparam(W, I, l, KR.L_ATT_W, C),
                           KC.lparam(W, I, l, KR.L_ATT_B, C), KC.LAYER_NORM_EPS, C, xa)
                layer_norm(KC.tslice(tr, I, l, KR.S_XMID, C), KC.lparam(W, I, l, KR.L_FFN_W, C),
                           KC.lparam(W, I, l, KR.L_FFN_B, C), KC.LAYER_NORM_EPS, C,
                           KC.tslice(tr, I, l, KR.S_FN, C))
                group_norm(KC.tslice(tr, I, l, KR.S_YWKV, C), KC.lparam(W, I, l, KR.L_GN_W, C),
                           KC.lparam(W, I, l, KR.L_GN_B, C), KR.GROUP_NORM_EPS, H, N,
                           KC.tslice(tr, I, l, KR.S_YGN, C))
            elif part == 1:  # token shift and the six mixes
                for slot, dst in ((KR.L_X_R, KR.S_XR), (KR.L_X_W, KR.S_XW),
                                  (KR.L_X_K, KR.S_XK), (KR.L_X_V, KR.S_XV),
                                  (KR.L_X_A, KR.S_XAA), (KR.L_X_G, KR.S_XG)):
                    m = KC.lparam(W, I, l, slot, C)
                    out = KC.tslice(tr, I, l, dst, C)
                    for c in range(C):
                        out[c] = xa[c] + (att_prev[c] - xa[c]) * m[c]
            elif part == 2:  # projections r, k, v, o
                for slot, src, dst in ((KR.L_WR, KR.S_XR, KR.S_R), (KR.L_WK, KR.S_XK, KR.S_KPRE),
                                       (KR.L_WV, KR.S_XV, KR.S_VPRE),
                                       (KR.L_WO, KR.S_YGATE, KR.S_ATTOUT)):
                    matvec(KC.lparam(W, I, l, slot, C * C), KC.tslice(tr, I, l, src, C), C, C,
                           KC.tslice(tr, I, l, dst, C))
            elif part == 3:  # low-rank paths (decay, in-context rate, gate, value) with
                # their tanh / sigmoid / exp
                wh = KC.tslice(tr, I, l, KR.S_WH, Dw)
                matvec(KC.lparam(W, I, l, KR.L_W1, C * Dw), KC.tslice(tr, I, l, KR.S_XW, C),
                       C, Dw, wh)
                for j in range(Dw):
                    wh[j] = tanh64(wh[j])
                wsig = KC.tslice(tr, I, l, KR.S_WSIG, C)
                wdec = KC.tslice(tr, I, l, KR.S_WDEC, C)
                matvec(KC.lparam(W, I, l, KR.L_W2, Dw * C), wh, Dw, C, wsig)
                sigmoid_vector(wsig, wsig)
                for c in range(C):
                    wdec[c] = exp32_lane(-wsig[c] * KR.INV_SQRT_E32)
                ah = KC.tslice(tr, I, l, KR.S_AH, Da)
                a = KC.tslice(tr, I, l, KR.S_A, C)
                matvec(KC.lparam(W, I, l, KR.L_A1, C * Da), KC.tslice(tr, I, l, KR.S_XAA, C),
                       C, Da, ah)
                matvec(KC.lparam(W, I, l, KR.L_A2, Da * C), ah, Da, C, a)
                sigmoid_vector(a, a)
                gh = KC.tslice(tr, I, l, KR.S_GH, Dg)
                matvec(KC.lparam(W, I, l, KR.L_G1, C * Dg), KC.tslice(tr, I, l, KR.S_XG, C),
                       C, Dg, gh)
                sigmoid_vector(gh, gh)
                matvec(KC.lparam(W, I, l, KR.L_G2, Dg * C), gh, Dg, C,
                       KC.tslice(tr, I, l, KR.S_G, C))
                if l > 0:
                    vh = KC.tslice(tr, I, l, KR.S_VH, Dv)
                    nu = KC.tslice(tr, I, l, KR.S_NU, C)
                    matvec(KC.lparam(W, I, l, KR.L_V1, C * Dv), KC.tslice(tr, I, l, KR.S_XV, C),
                           C, Dv, vh)
                    matvec(KC.lparam(W, I, l, KR.L_V2, Dv * C), vh, Dv, C, nu)
                    sigmoid_vector(nu, nu)
            elif part == 4:  # keys (normalised removal key) and WKV state update
                l2_normalize(KC.tslice(tr, I, l, KR.S_KKPRE, C), H, N, KR.KK_MIN_NORM,
                             KC.tslice(tr, I, l, KR.S_KK, C))
                KR.wkv_step(wkv, KC.tslice(tr, I, l, KR.S_WDEC, C), KC.tslice(tr, I, l, KR.S_K, C),
                            KC.tslice(tr, I, l, KR.S_V, C), KC.tslice(tr, I, l, KR.S_KK, C),
                            KC.tslice(tr, I, l, KR.S_A, C), KC.tslice(tr, I, l, KR.S_R, C), H,
                            N, KC.tslice(tr, I, l, KR.S_YWKV, C))
            else:  # FFN: key, relu^2, value
                fpre = KC.tslice(tr, I, l, KR.S_FPRE, FF)
                fk = KC.tslice(tr, I, l, KR.S_FK, FF)
                matvec(KC.lparam(W, I, l, KR.L_F_KEY, C * FF), KC.tslice(tr, I, l, KR.S_FXK, C),
                       C, FF, fpre)
                for j in range(FF):
                    z = fpre[j] if fpre[j] > 0.0 else 0.0
                    fk[j] = z * z
                matvec(KC.lparam(W, I, l, KR.L_F_VAL, FF * C), fk, FF, C,
                       KC.tslice(tr, I, l, KR.S_FOUT, C))


@jit(cache=False)
def gdn_part(part, W, state, tr, I, n):
    """One part of net/gdn/forward.forward_step, every layer, n times."""
    C, Hk, Hv, dk, dv, Kc, F, KD, VD, QKV = gdn_dims(I)
    for _ in range(n):
        for l in range(I[KC.D_L]):
            mem, S = KG.layer_state(state, I, l)
            xn = KC.tslice(tr, I, l, KG.S_XN, C)
            if part == 0:  # norms: input, post-attention, the gated per-head norm
                rms_norm(KC.tslice(tr, I, l, KG.S_X_IN, C), KC.lparam(W, I, l, KG.L_IN_NORM, C),
                         KG.RMS_EPS, C, xn)
                rms_norm(KC.tslice(tr, I, l, KG.S_XMID, C),
                         KC.lparam(W, I, l, KG.L_POST_NORM, C), KG.RMS_EPS, C,
                         KC.tslice(tr, I, l, KG.S_HN, C))
                o = KC.tslice(tr, I, l, KG.S_O, VD)
                on = KC.tslice(tr, I, l, KG.S_ON, VD)
                for h in range(Hv):
                    rms_norm(o[h * dv:(h + 1) * dv], KC.lparam(W, I, l, KG.L_GNORM, dv),
                             KG.RMS_EPS, dv, on[h * dv:(h + 1) * dv])
            elif part == 1:  # projections q|k|v, z, beta, a, out
                matvec(KC.lparam(W, I, l, KG.L_QKV, C * QKV), xn, C, QKV,
                       KC.tslice(tr, I, l, KG.S_QKV, QKV))
                matvec(KC.lparam(W, I, l, KG.L_Z, C * VD), xn, C, VD,
                       KC.tslice(tr, I, l, KG.S_Z, VD))
                matvec(KC.lparam(W, I, l, KG.L_B, C * Hv), xn, C, Hv,
                       KC.tslice(tr, I, l, KG.S_BETA, Hv))
                matvec(KC.lparam(W, I, l, KG.L_A, C * Hv), xn, C, Hv,
                       KC.tslice(tr, I, l, KG.S_APRE, Hv))
                matvec(KC.lparam(W, I, l, KG.L_OUT, VD * C), KC.tslice(tr, I, l, KG.S_Y, VD),
                       VD, C, KC.tslice(tr, I, l, KG.S_XMID, C))
            elif part == 2:  # gates (beta, decay) and the SiLUs of conv and z
                beta = KC.tslice(tr, I, l, KG.S_BETA, Hv)
                apre = KC.tslice(tr, I, l, KG.S_APRE, Hv)
                g = KC.tslice(tr, I, l, KG.S_G, Hv)
                a_log = KC.lparam(W, I, l, KG.L_A_LOG, Hv)
                for h in range(Hv):
                    beta[h] = sigmoid64(beta[h])
                    g[h] = exp64(-exp64(a_log[h]) * softplus64(apre[h]))
                silu_vector(KC.tslice(tr, I, l, KG.S_CPRE, QKV), KC.tslice(tr, I, l, KG.S_C, QKV))
                silu_vector(KC.tslice(tr, I, l, KG.S_Z, VD), KC.tslice(tr, I, l, KG.S_ZS, VD))
            elif part == 3:  # causal conv and the q, k normalisation
                KG.conv_step(mem, KC.lparam(W, I, l, KG.L_CONV, Kc * QKV),
                             KC.tslice(tr, I, l, KG.S_QKV, QKV), Kc, QKV,
                             KC.tslice(tr, I, l, KG.S_CPRE, QKV))
                c = KC.tslice(tr, I, l, KG.S_C, QKV)
                l2_normalize(c[0:KD], Hk, dk, KG.L2_MIN_NORM, KC.tslice(tr, I, l, KG.S_QN, KD))
                l2_normalize(c[KD:2 * KD], Hk, dk, KG.L2_MIN_NORM,
                             KC.tslice(tr, I, l, KG.S_KN, KD))
            elif part == 4:  # gated delta rule
                c = KC.tslice(tr, I, l, KG.S_C, QKV)
                KG.delta_rule_step(S, KC.tslice(tr, I, l, KG.S_QN, KD),
                                   KC.tslice(tr, I, l, KG.S_KN, KD), c[2 * KD:QKV],
                                   KC.tslice(tr, I, l, KG.S_BETA, Hv),
                                   KC.tslice(tr, I, l, KG.S_G, Hv), Hk, Hv, dk, dv,
                                   1.0 / math.sqrt(dk), KC.tslice(tr, I, l, KG.S_U, VD),
                                   KC.tslice(tr, I, l, KG.S_DELTA, VD),
                                   KC.tslice(tr, I, l, KG.S_O, VD))
            else:  # SwiGLU MLP
                hn = KC.tslice(tr, I, l, KG.S_HN, C)
                gp = KC.tslice(tr, I, l, KG.S_GP, F)
                up = KC.tslice(tr, I, l, KG.S_UP, F)
                act = KC.tslice(tr, I, l, KG.S_ACT, F)
                matvec(KC.lparam(W, I, l, KG.L_GATE, C * F), hn, C, F, gp)
                matvec(KC.lparam(W, I, l, KG.L_UP, C * F), hn, C, F, up)
                swiglu_vector(gp, up, act)
                matvec(KC.lparam(W, I, l, KG.L_DOWN, F * C), act, F, C,
                       KC.tslice(tr, I, l, KG.S_XMID, C))


@jit(cache=False)
def loop_softmax(logits, floor, q, p, n):
    for _ in range(n):
        softmax_with_floor(logits, floor, q, p)


# ---------------------------------------------------------------- part tables

RWKV7_PARTS = ["norms", "token shift and mixes", "projections r, k, v, o",
               "low-rank paths (decay, a, gate, value) + tanh/sigmoid/exp",
               "removal key + WKV state update", "FFN (key, relu², value)"]
RWKV7_BACKWARD_PARTS = ["backward: output layer (logit gradient, head, final norm)",
                        "backward: FFN key and value projections",
                        "backward: projections r, k, v, o",
                        "backward: low-rank paths (decay, a, value, gate)",
                        "backward: WKV (every head)",
                        "backward: norms (attention, FFN, group, pre-norm)"]
GDN_PARTS = ["norms (input, post, gated)", "projections q|k|v, z, b, a, out",
             "gates + SiLU (transcendentals)", "causal conv + q, k L2 norm",
             "gated delta rule", "SwiGLU MLP"]


def part_flops(arch: str, cfg) -> list[tuple[int, int]]:
    """(multiply-adds, elementwise ops) a byte of each part, in the part tables' order."""
    L = cfg.layers
    if arch == "rwkv7":
        C, N, FF = cfg.hidden, 64, cfg.ffn
        lora = C * (cfg.decay_rank * 2 + cfg.a_rank * 2 + cfg.g_rank * 2)
        lora_v = C * cfg.v_rank * 2 * (L - 1)
        return [(0, (3 * L + 1) * 5 * C), (0, L * 6 * 2 * C), (L * 4 * C * C, 0),
                (L * lora + lora_v, L * 4 * C), (L * 3 * C * N, L * 3 * C),
                (L * 2 * C * FF, L * FF)]
    C, F = cfg.hidden, cfg.mlp
    QKV, VD, KD = cfg.qkv_dim, cfg.value_total, cfg.key_total
    S = cfg.value_heads * cfg.key_dim * cfg.value_dim
    return [(0, L * (2 * C + VD) * 3), (L * C * (QKV + VD + 2 * cfg.value_heads + C), 0),
            (0, L * (QKV + VD + 3 * cfg.value_heads) * 4), (L * QKV * cfg.conv_kernel,
                                                              L * 2 * KD * 2),
            (L * 3 * S, L * VD), (L * 3 * C * F, L * F * 4)]


GDN_BACKWARD_PARTS = ["backward: output layer (logit gradient, head, final norm)",
                      "backward: MLP projections (down, gate, up) and the SwiGLU's gradient",
                      "backward: mixer projections (out, z, q|k|v, beta, a)",
                      "backward: gated delta rule (every value head)",
                      "backward: q, k L2 norms, SiLU and causal conv",
                      "backward: norms (post-MLP, gated per head, input)"]


def backward_flops(arch: str, cfg) -> list[tuple[int, int]]:
    """(multiply-adds, elementwise ops) a byte of each backward part, in the backward part
    tables' order: the input gradients' matrix products (the weight gradients are recorded,
    formed by the optimizer) and the recurrences' passes; the norms' few passes."""
    L, C, V = cfg.layers, cfg.hidden, 256
    head = (C * V, 4 * V + 10 * C)
    if arch == "rwkv7":
        N, FF = 64, cfg.ffn
        lora = C * (cfg.decay_rank + cfg.a_rank + cfg.g_rank) * 2
        lora_v = C * cfg.v_rank * 2 * (L - 1)
        return [head, (L * 2 * C * FF, L * FF), (L * 4 * C * C, 0), (L * lora + lora_v, 0),
                (L * 11 * C * N, 0), (0, (3 * L + 1) * 10 * C)]
    F, QKV, VD, KD = cfg.mlp, cfg.qkv_dim, cfg.value_total, cfg.key_total
    S = cfg.value_heads * cfg.key_dim * cfg.value_dim
    return [head, (L * 3 * C * F, L * 6 * F),
            (L * C * (2 * VD + QKV + 2 * cfg.value_heads), 0),
            (L * 7 * S, L * 6 * VD), (L * 2 * cfg.conv_kernel * QKV, L * (8 * KD + 6 * QKV)),
            (0, L * (2 * C + VD) * 8)]


def profile_backward(model, W, state, tr, data: np.ndarray, peak: float) -> list[dict]:
    """The backward step by part, on the learning levels' settings (float32 sums, the
    matrices' output-major twins, their gradients recorded), after a forward over `data`."""
    I = model.index
    arch = "rwkv7" if model.arch_id == 0 else "gdn"
    kernel, labels, module = ((rwkv7_backward_part, RWKV7_BACKWARD_PARTS, rwkv7_backward)
                              if arch == "rwkv7" else
                              (gdn_backward_part, GDN_BACKWARD_PARTS, gdn_backward))
    table = model.layout.twin_table()
    WT = np.zeros_like(W)
    refresh_twins(W, WT, table)
    matrices = (WT, new_record(table, 1))
    G = np.zeros_like(W)
    s_old = state.copy()
    loop_forward(model.arch_id, data[-1:], W, NO_COPY, state, tr, I, PROB_FLOOR)
    gstate = np.zeros_like(state)
    scratch = np.zeros(module.backward_scratch_size(I), np.float32)
    rng = np.random.default_rng(3)
    cfg = model.cfg  # the widest vector any part takes
    size = cfg.hidden + (cfg.ffn if arch == "rwkv7" else cfg.mlp + cfg.qkv_dim)
    vecs = tuple((0.1 * rng.standard_normal(size)).astype(np.float32) for _ in range(16))
    flops = backward_flops(arch, model.cfg)
    rows, total = [], 0.0
    for k, (label, (macs, elems)) in enumerate(zip(labels, flops, strict=True)):
        us = timed(lambda n, k=k: kernel(k, W, G, s_old, state, tr, gstate.copy(), I,
                                         PROB_FLOOR, scratch, matrices, vecs, n)) * 1e6
        total += us
        rows.append(row(label, us, 2 * macs + elems, peak))
    whole = timed(lambda n: kernel(len(labels), W, G, s_old, state, tr, gstate, I,
                                   PROB_FLOOR, scratch, matrices, vecs, n)) * 1e6
    rows.append(row("backward: element-wise, and what the parts lose together in the caches "
                    "(the whole step less the parts)", whole - total, 0, peak))
    rows.append(row("whole backward step", whole, sum(2 * m + e for m, e in flops), peak))
    return rows


def timed(fn, *args) -> float:
    """Seconds per call of fn(*args, n) for the n that takes about MIN_SECONDS."""
    min_seconds = MIN_SECONDS
    fn(*args, 1)
    n = 1
    while True:
        t = time.perf_counter()
        fn(*args, n)
        dt = time.perf_counter() - t
        if dt >= min_seconds or n >= 1 << 24:
            return dt / n
        n *= max(2, int(min_seconds / max(dt, 1e-6)))


def matvec_peak() -> float:
    """GFLOP/s of the fixed-order matvec on a 256 x 256 matrix (it stays in cache): the
    best of PEAK_ROUNDS runs."""
    n = 256
    M = np.random.default_rng(0).random(n * n, dtype=np.float32)
    x = np.ones(n, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    return 2 * n * n / min(timed(loop_matvec, M, x, n, n, y) for _ in range(PEAK_ROUNDS)) / 1e9


@jit(cache=False)
def loop_matrices(Ms, x, n_in, n_out, y, n):
    """n sweeps over the matrices Ms (rows of one flat matrix each), one matvec each."""
    for _ in range(n):
        for k in range(Ms.shape[0]):
            matvec(Ms[k], x, n_in, n_out, y)


def footprint_sweep(n_in: int, n_out: int, counts: tuple[int, ...]) -> list[dict]:
    """µs of one n_in x n_out matvec while K such matrices are read in turn, from float32
    and from their bfloat16 copies (the same values, ops/bf16.py): where the float32 ones
    outgrow the L2 cache, the time of a matvec jumps; the copies, half the bytes, later."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n_in).astype(np.float32)
    y32, y16 = np.empty(n_out, np.float32), np.empty(n_out, np.float32)
    rows = []
    for k in counts:
        M32 = round_to_bf16(rng.standard_normal((k, n_in * n_out)).astype(np.float32))
        M16 = top_halves(M32)
        us32 = timed(loop_matrices, M32, x, n_in, n_out, y32) / k * 1e6
        us16 = timed(loop_matrices, M16, x, n_in, n_out, y16) / k * 1e6
        if not np.array_equal(y32, y16):
            raise SystemExit("profile: the bfloat16 copy gave other bits")
        rows.append({"matrices": k, "float32_mb": round(M32.nbytes / 1e6, 2),
                     "float32_us": round(us32, 2), "bf16_us": round(us16, 2)})
    return rows


def profile_network(name: str, data: np.ndarray) -> dict:
    arch, cfg_kw = CONFIGS[name]
    peak = matvec_peak()
    cfg = ARCHS[arch][0](**cfg_kw)
    model = ARCHS[arch][1](cfg)
    W = model.init_params(0)
    state = np.zeros(model.state_size, dtype=np.float32)
    tr = np.zeros(model.trace_size, dtype=np.float32)
    I = model.index
    forward_us = whole_forward(model, W, NO_COPY, state, tr, data)
    W_bf16 = round_matrices(W, model.layout.twin_table())
    forward16_us = whole_forward(model, W_bf16, bf16_copy(W_bf16, model.layout.twin_table()),
                                 state, tr, data)
    kernel, labels = (rwkv7_part, RWKV7_PARTS) if arch == "rwkv7" else (gdn_part, GDN_PARTS)
    rows = []
    for k, (label, (macs, elems)) in enumerate(zip(labels, part_flops(arch, cfg),
                                                   strict=True)):
        us = timed(lambda n, k=k: kernel(k, W, state, tr, I, n)) * 1e6
        rows.append(row(label, us, 2 * macs + elems, peak))
    V, C = 256, cfg.hidden
    us = timed(lambda n: loop_head(W, tr, I, PROB_FLOOR, n)) * 1e6
    rows.append(row("output layer: norm, head matvec, softmax", us, 2 * C * V + 8 * V, peak))
    logits = np.random.default_rng(1).normal(size=V).astype(np.float32)
    q = np.zeros(V, dtype=np.float32)
    p = np.zeros(V, dtype=np.float32)
    us = timed(lambda n: loop_softmax(logits, PROB_FLOOR, q, p, n)) * 1e6
    rows.append(row("  of which softmax (exp of 256)", us, 4 * V, peak))
    total_flops = sum(2 * m + e for m, e in part_flops(arch, cfg)) + 2 * C * V + 8 * V
    rows.append(row("whole forward step", forward_us, total_flops, peak))
    rows.append(row("whole forward step, matrices read from a bfloat16 copy (a prior rounded "
                    "to bfloat16, ops/bf16.py)", forward16_us, total_flops, peak))
    rows += profile_backward(model, W, state, tr, data, peak)
    return {"config": name, "parameters": model.layout.size, "peak_gflops": round(peak, 2),
            "rows": rows}


def whole_forward(model, W, W16, state, tr, data: np.ndarray) -> float:
    """µs a byte of the whole forward step over data, the best of PEAK_ROUNDS runs (W16:
    its matrices' bfloat16 copy, or NO_COPY)."""
    I = model.index
    loop_forward(model.arch_id, data[:16], W, W16, state, tr, I, PROB_FLOOR)
    best = math.inf
    for _ in range(PEAK_ROUNDS):
        t = time.perf_counter()
        loop_forward(model.arch_id, data, W, W16, state, tr, I, PROB_FLOOR)
        best = min(best, time.perf_counter() - t)
    return best / len(data) * 1e6


def row(label: str, us: float, flops: int, peak: float) -> dict:
    floor = flops / (peak * 1e3)
    return {"part": label, "us": round(us, 3), "kflop": round(flops / 1e3, 1),
            "floor_us": round(floor, 3), "x_floor": round(us / floor, 1) if floor else None}


def per_byte(recipe: Recipe, data: bytes, coding: bool = True,
             weights: np.ndarray | None = None) -> dict[str, float]:
    """µs a byte of the predictor over data (its prior's weights, or `weights`): its kernels
    alone (the encoder's block calls, no coder) and, with `coding`, encoding and decoding
    what it encoded."""
    if weights is None:
        prior = priors.resolve(recipe)
        weights = None if prior is None else prior.W

    def predictor() -> Predictor:
        return Predictor(recipe, weights)

    predictor().encode_frame(data[:256])  # compiled before the clock
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    kernels = predictor()
    rows = np.empty((ENCODE_BLOCK, kernels.row_width), dtype=np.float32)
    t = time.perf_counter()
    for block in frame_blocks(buf):
        kernels.run_block(block, rows[:len(block)])
    kernel = time.perf_counter() - t
    if not coding:
        return {"kernel": kernel / len(data) * 1e6}
    t = time.perf_counter()
    payload = predictor().encode_frame(data)
    enc = time.perf_counter() - t
    t = time.perf_counter()
    out = predictor().decode_frame(payload, len(data))
    dec = time.perf_counter() - t
    if out != data:
        raise SystemExit("profile: decoding did not give the data back")
    return {k: v / len(data) * 1e6 for k, v in (("kernel", kernel), ("encode", enc),
                                                   ("decode", dec))}


def paired_kernel_times(first: Recipe, second: Recipe, data: bytes,
                        rounds: int = 5) -> tuple[float, float, float]:
    """µs a byte of two recipes' kernels, run in turn `rounds` times: the least of each, and
    the median of the rounds' ratios second / first. This machine's speed drifts by 10-20 %
    within seconds (five rounds of -7's network, frozen and TBPTT: ratios 3.04-3.40); a
    ratio of two single runs minutes apart measured 2.94 and 3.33."""
    times, ratios = ([], []), []
    for _ in range(rounds):
        a = per_byte(first, data, coding=False)["kernel"]
        b = per_byte(second, data, coding=False)["kernel"]
        times[0].append(a)
        times[1].append(b)
        ratios.append(b / a)
    return min(times[0]), min(times[1]), float(np.median(ratios))


def decoder_overhead(recipe: Recipe, data: bytes) -> dict[str, float]:
    """µs a byte the coder costs outside the model, measured directly (decode minus
    kernels would drown it in the model's own run-to-run noise): the range decoder, inside
    the kernel, decoding each byte from the real rows the encoder coded with; the Python
    call into the kernel, once a block of ENCODE_BLOCK bytes, a byte's share; and the
    batched range encoders, constriction's and its numba twin's (the same bytes)."""
    prior = priors.resolve(recipe)
    pred = Predictor(recipe, None if prior is None else prior.W)
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    rows = np.empty((len(buf), pred.row_width), dtype=np.float32)
    for block, block_rows in zip(frame_blocks(buf), frame_blocks(rows), strict=True):
        pred.run_block(block, block_rows)
    symbols = pred.symbols(buf)
    encode_s, payloads = {}, {}
    encoders = [("twin", coder.TwinEncoder)]
    if coder.constriction is not None:  # not on Linux on ARM
        encoders.insert(0, ("constriction", coder.ConstrictionEncoder))
    for name, encoder in encoders:
        coder.TwinEncoder().encode_rows(symbols[:1], rows[:1])  # compiled before the clock
        enc = encoder()
        t = time.perf_counter()
        for block, block_rows in zip(frame_blocks(symbols), frame_blocks(rows), strict=True):
            enc.encode_rows(block, block_rows)
        payloads[name] = enc.finish()
        encode_s[name] = time.perf_counter() - t
    payload = payloads["twin"]
    if payloads.get("constriction", payload) != payload:
        raise SystemExit("profile: the twin encoder wrote other bytes than constriction")
    out = np.empty(len(buf), dtype=np.int64)
    loop_decode(rows[:1], *coder.new_decoder(payload), out[:1])  # compiled before the clock
    words, state = coder.new_decoder(payload)
    t = time.perf_counter()
    loop_decode(rows, words, state, out)
    coding = time.perf_counter() - t
    if not np.array_equal(out, symbols):
        raise SystemExit("profile: the range decoder did not give the data back")
    empty, calls = np.zeros(0, dtype=np.uint8), 20_000
    t = time.perf_counter()
    for _ in range(calls):
        pred.advance(empty, pred._no_rows, coder.DECODE, pred._no_decoder)
    call = (time.perf_counter() - t) / calls / ENCODE_BLOCK
    return {"call": call * 1e6, "coder": coding / len(buf) * 1e6,
            **{f"encode_{name}": s / len(buf) * 1e6 for name, s in encode_s.items()}}


def tbptt_parts(recipe: Recipe, data: bytes) -> dict[str, float]:
    """µs a byte of the parts of a learning level's TBPTT step, each timed alone on the predictor's
    arrays: the backward step (forward and backward of each byte, less the forward), the
    optimizer step once a segment of `bptt` bytes (forming the matrices' gradients from
    the backward's record, and the update; and the update alone), and the twins' refresh."""
    prior = priors.resolve(recipe)
    pred = Predictor(recipe, None if prior is None else prior.W)
    buf = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    W, I, floor = pred.W, pred.index, PROB_FLOOR
    state, tr = pred.state.copy(), pred.trace.copy()
    arch = ARCHS[recipe.arch][1].arch_id
    loop_forward(arch, buf[:16], W, NO_COPY, state, tr, I, floor)
    t = time.perf_counter()
    loop_forward(arch, buf, W, NO_COPY, state, tr, I, floor)
    forward = (time.perf_counter() - t) / len(buf)
    G = np.zeros_like(W)
    s_old, gstate = np.zeros_like(state), np.zeros_like(state)
    rec = pred.training.rec
    matrices = (pred.WT, rec)  # as stepper.backward
    loop_forward_backward(arch, buf[:16], W, G, state, s_old, tr, gstate, I, floor,
                          pred.scratch, matrices)
    t = time.perf_counter()
    loop_forward_backward(arch, buf, W, G, state, s_old, tr, gstate, I, floor,
                          pred.scratch, matrices)
    both = (time.perf_counter() - t) / (len(buf) - 1)
    T, scope = recipe.bptt, (pred.R, pred.RV)
    step = timed(lambda n: loop_optimizer(W.copy(), pred.O.copy(), G, scope, pred.F.copy(), rec,
                                          T, n))
    update = timed(lambda n: loop_optimizer(W.copy(), pred.O.copy(), G, scope, pred.F.copy(),
                                            no_record(), T, n))
    twins = timed(lambda n: loop_twins(W, pred.WT.copy(), pred.training.twins, n))
    return {"backward": (both - forward) * 1e6, "optimizer": step / T * 1e6,
            "formation": (step - update) / T * 1e6, "twins": twins / T * 1e6}


def learning_share(recipe: Recipe, data: bytes) -> float:
    """µs a byte of what the context models and mixer do after a byte is coded
    (stepper.learn_mixing: counters, mixer weights and APMs learn from it, and the context
    models move on to the next byte's contexts), in a loop of its own over data (with no
    prediction between two bytes, the mixer learns from the last one's inputs: the same work,
    not the same values); the rest of their time is predicting (the counters read at each
    node, the mixers, the APMs)."""
    buf = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    path = recipe.mix.path_coding
    mixing = Predictor(recipe).mixing
    loop_learn_mixing(buf[:16], mixing, path)  # compiled before the clock
    t = time.perf_counter()
    loop_learn_mixing(buf[16:], mixing, path)
    return (time.perf_counter() - t) / max(len(buf) - 16, 1) * 1e6


def learning_level() -> int:
    """The highest compression level whose network trains online (lr > 0)."""
    return max(level for level in LEVELS if level_recipe(level).lr > 0)


def profile_levels(data: bytes) -> list[dict]:
    """The codec's own per-byte costs at the default recipe and at the highest level whose
    network learns online (its TBPTT step by part)."""
    default = level_recipe(DEFAULT_LEVEL)
    level = learning_level()
    top, tag = level_recipe(level), f"-{level}"
    cm_alone = replace(default, mix=replace(default.mix, network=False), prior=None)
    cm = per_byte(cm_alone, data)
    learning = learning_share(cm_alone, data)
    mixed = per_byte(default, data)
    overhead = decoder_overhead(default, data)
    whole_top = per_byte(top, data)["kernel"]
    alone = replace(top, mix=None)
    frozen_top, tbptt, ratio = paired_kernel_times(
        replace(alone, lr=0.0, bptt=0, recompute=True), alone, data)
    parts = tbptt_parts(alone, data)
    rows = [
        ("context models + mixer (default level, network off)", cm["kernel"]),
        ("  of which learning from the coded byte and moving on to the next contexts",
         learning),
        ("  of which predicting the next byte (counters at each node, mixers, APMs)",
         cm["kernel"] - learning),
        ("default level (frozen prior mixed in), kernels", mixed["kernel"]),
        ("network's share of the default (forward + its mixer input)",
         mixed["kernel"] - cm["kernel"]),
        ("default level, encode (kernels + batched coder)", mixed["encode"]),
        ("default level, decode", mixed["decode"]),
        (f"decoder: the kernel call once a block ({ENCODE_BLOCK} bytes), a byte's share",
         overhead["call"]),
        ("decoder: range decoding of one byte, inside the kernel", overhead["coder"]),
        ("decoder overhead outside the model (the two)", overhead["call"] + overhead["coder"]),
        ("encoder: constriction's range encoder, batched, a byte",
         overhead.get("encode_constriction", math.nan)),
        ("encoder: its numba twin (Linux on ARM), batched, a byte", overhead["encode_twin"]),
        (f"{tag} level (prior adapting by TBPTT, mixed), kernels", whole_top),
        (f"{tag}'s network alone, frozen ({top.arch} {top.model.hidden}x{top.model.layers})",
         frozen_top),
        (f"{tag}'s network alone, TBPTT({alone.bptt}) training", tbptt),
        ("  TBPTT step / forward (ratio, the median of five runs in turn)", ratio),
        ("  of the step: one backward step (a byte's gradient)", parts["backward"]),
        (f"  of the step: the optimizer step, once a segment of {alone.bptt} bytes",
         parts["optimizer"]),
        ("    of which forming the matrices' gradients from the backward's record",
         parts["formation"]),
        ("  of the step: the matrices' output-major twins refreshed after it",
         parts["twins"]),
        ("  of the step: " + ("two forwards (live, and the recompute after the update)"
                              if alone.recompute else "the live forward") + " and the rest",
         tbptt - parts["backward"] - parts["optimizer"] - parts["twins"]),
    ]
    return [{"part": part, "us": round(us, 2)} for part, us in rows]


def level_shapes(names: list[str], data: bytes, rounds: int = 3,
                 base: Recipe | None = None) -> list[dict]:
    """µs a byte of the default level's kernels with each network of `names` (CONFIGS) in its
    prior's place, frozen, from random weights in float32 and rounded to bfloat16 (the copy
    is kept where ops/bf16 finds it faster): which networks the default's speed bound has
    room for. All run in turn `rounds` times, the least of each (this machine drifts).
    `base`: another level's recipe (the smoke test's small one)."""
    base = base or level_recipe(DEFAULT_LEVEL)
    runs = []
    for name in names:
        arch, cfg = CONFIGS[name]
        recipe = replace(base, arch=arch, model=ARCHS[arch][0](**cfg), prior=None)
        model = recipe.build_model()
        W = model.init_params(0)
        runs += [(name, "float32", recipe, W, model.layout.size),
                 (name, "bfloat16", recipe,
                  round_matrices(W.copy(), model.layout.twin_table()), model.layout.size)]
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        for k, (_, _, recipe, W, _) in enumerate(runs):
            times[k].append(per_byte(recipe, data, coding=False, weights=W)["kernel"])
    return [{"config": name, "weights": kind, "parameters": size, "us": round(min(t), 2)}
            for (name, kind, _, _, size), t in zip(runs, times, strict=True)]


def markdown(report: dict) -> str:
    out = [f"# Profile: µs a byte (`scripts/profile_kernels.py`, {report['machine']})", "",
           "floor = FLOP / peak, the peak being the fixed-order matvec's rate on a 256×256 "
           f"matrix in cache (the best of {PEAK_ROUNDS} runs, just before each table).", "",
           "A frozen network's bfloat16 copy on this CPU (ops/bf16.copy_pays): "
           + ("kept, faster" if report["bf16_copy_faster"] else "not kept, slower") + ".", ""]
    for net in report["networks"]:
        out += [f"## {net['config']} ({net['parameters']:,} parameters)", "",
                f"matvec peak {net['peak_gflops']:.1f} GFLOP/s.", "",
                "| part | µs / byte | kFLOP | floor µs | × floor |", "|---|---:|---:|---:|---:|"]
        out += [f"| {r['part']} | {r['us']:.2f} | {r['kflop']:.1f} | {r['floor_us']:.2f} | "
                f"{r['x_floor'] if r['x_floor'] is not None else '–'} |" for r in net["rows"]]
        out.append("")
    out += ["## The codec", "", f"On the first {report['bytes']:,} bytes of "
            f"{report['file']}, one thread.", "", "| part | µs / byte |", "|---|---:|"]
    out += [f"| {r['part']} | {r['us']:.2f} |" for r in report["levels"]]
    if report.get("footprint"):
        n_in, n_out = report["footprint_shape"]
        out += ["", f"## Matrices read in turn: one {n_in}×{n_out} matvec, µs", "",
                "| matrices | float32 MB | from float32 | from bfloat16 copies |",
                "|---:|---:|---:|---:|"]
        out += [f"| {r['matrices']} | {r['float32_mb']:.2f} | {r['float32_us']:.2f} | "
                f"{r['bf16_us']:.2f} |" for r in report["footprint"]]
    if report.get("level_shapes"):
        out += ["", "## The default level with other networks (frozen), kernels µs / byte",
                "", "| network | parameters | matrices | µs / byte |", "|---|---:|---|---:|"]
        out += [f"| {r['config']} | {r['parameters']:,} | {r['weights']} | {r['us']:.2f} |"
                for r in report["level_shapes"]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--configs", default="gdn:32x1,rwkv7:64x1,gdn:128x2,rwkv7:128x2")
    ap.add_argument("--bytes", type=int, default=60_000, help="bytes of FILE the codec runs")
    ap.add_argument("--no-levels", action="store_true", help="only the network parts")
    ap.add_argument("--footprint", default="",
                    help="N_INxN_OUT:K1,K2,...: also time a matvec while K matrices of that "
                         "shape are read in turn, from float32 and from bfloat16 copies")
    ap.add_argument("--level-shapes", default="",
                    help="CONFIGS,...: also time the default level's kernels with each of these "
                         "networks in its prior's place (random weights, frozen)")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--md", help="write the table here")
    a = ap.parse_args(argv)
    shapes = [n for n in a.level_shapes.split(",") if n]
    for name in a.configs.split(",") + shapes:
        if name not in CONFIGS:
            ap.error(f"unknown config {name!r}; known: {', '.join(CONFIGS)}")
    raw = Path(a.file).read_bytes()[:a.bytes]
    data = np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
    report = {"machine": cpu_name(), "file": Path(a.file).name,
              "bytes": len(raw), "bf16_copy_faster": copy_measured_faster(),
              "networks": [profile_network(n, data[:20_000])
                           for n in a.configs.split(",")],
              "levels": [] if a.no_levels else profile_levels(raw)}
    if a.footprint:
        shape, _, counts = a.footprint.partition(":")
        n_in, n_out = (int(v) for v in shape.split("x"))
        report["footprint_shape"] = [n_in, n_out]
        report["footprint"] = footprint_sweep(n_in, n_out,
                                              tuple(int(k) for k in counts.split(",")))
    if shapes:
        report["level_shapes"] = level_shapes(shapes, raw)
    text = markdown(report)
    print(text, end="")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1) + "\n")
    if a.md:
        Path(a.md).write_text(text)


if __name__ == "__main__":
    main()
