"""One byte of the model's life (learn from it, then read it), and the encoder's block loop.

Encoder and decoder call exactly these kernels (`run`, or `run_fixed` when the network does
not learn; the first call with `start` predicts the first byte), so both sides compute the
same bits; the decoder's range decoding runs inside them too (coder.take_byte, or with path
coding take_path). Each has one entry point per architecture and coding (ENTRY_POINTS), in
which both are constants: numba prunes the other branches before typing, so a level
compiles only what it runs.

Training modes (F[F_MODE]; the recipe's bptt 0, 1 or T >= 2 picks one):
  MODE_HEAD   output layer only: exact step on LM head and bias after each byte
  MODE_BPTT1  after each byte, the exact gradient of its loss through the last forward pass
              (recurrent state held constant), then an optimizer step on the whole scope
  MODE_TBPTT  truncated BPTT(T = F[F_BPTT]): forward T bytes with fixed weights, then
              backpropagate the segment's mean loss through time (state gradients carried),
              take one optimizer step and recompute the live state with the new weights
              (or, with F[F_RECOMPUTE] = 0, go on from the state the forward passes left:
              measured as good, and a forward pass a byte cheaper)
  MODE_NONE   no network: the context models and mixer alone (needs mixing)
  MODE_FROZEN the network predicts but does not learn (a recipe's lr 0, e.g. a frozen prior)

With mixing (F[F_MIX] = 1) the coded distribution comes from mixer.predict, which takes the
network's softmax as one input among the context models. The network then learns from its
own loss plus the mixer's (end to end; measured better than either alone): mixer.learn
gives the mixer loss's logit gradient of step j, kept in row j of the mixer's GM rows until
the step's backward pass (a trace may be overwritten by a replay before then).

TBPTT with T = 1 takes exactly the same first step as MODE_BPTT1 (same trace, same states,
same gradient); they part afterwards only because TBPTT recomputes the live state with the
updated weights at each segment end, which bptt=1 (by definition, state held constant and
one forward per byte) does not.

Arrays (allocated by codec.Predictor; the entry points take them in three bundles: Net,
Training and Mixing):
  W, O, G    parameters, Adam moments (2, n), gradient accumulator
  W16        W's bfloat16 copy, from which a frozen network's forward reads its matrices
             (the same values, half the bytes: ops/bf16.py), or ops.bf16.NO_COPY
  R          scope table [start, end, train] (see optim.apply_gradients)
  state, tr  live recurrent state and trace (modes 0 and 1, and TBPTT's recompute)
  P          float32[256]: the distribution of the next byte (what the coder uses)
  toks       int64[T + 1]: the segment's input bytes; toks[j + 1] is step j's target
  ckpt       (n_chunks, state) states at the start of each chunk of K steps (TBPTT)
  rs, rt     (K + 1, state) states and (K, trace) traces of the current chunk
  gstate     dL/d(state) carried backwards through time
  scratch    work space of the backward pass
  RV         the scope table without the matrices (their gradients are in rec)
  WT, twins  TBPTT: W's matrices as output-major twins (refreshed after every optimizer
             step; the table twins says where), from which the backward reads its input
             gradients ~4x faster with the same bits; empty in the other modes, where
             weights change every byte and refreshing would cost more than it saves
  rec        the matrices' gradients of a segment's backward steps kept as their factors
             (net/gradrec.py), which the optimizer forms row by row (in G) as it steps
  CT, HB, S, MX, ST   the mixer's tables, history, state, floats and stretch table
                      (context.py, mixer.py; one-element dummies without mixing)
  decoder    (words, state) of coder.new_decoder: the stream a DECODE block reads (stand-ins
             otherwise)
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from rwkvzip.cm import (
    context,
    delta,
    exe,
    image,
    jvm,
    mixer,
    pyc,
    riscv,
    s390x,
    sheet,
    sparse,
    steps,
    syntax,
    thumb,
    wasm,
    x86,
)
from rwkvzip.coding import coder
from rwkvzip.net.common import (
    D_V,
    T_P,
    T_Q,
    gslice,
    logit_gradient,
)
from rwkvzip.net.gdn import backward as gdn_backward
from rwkvzip.net.gdn import forward as gdn
from rwkvzip.net.gdn.model import GdnModel
from rwkvzip.net.gradrec import record_into
from rwkvzip.net.optim import (
    F_BPTT,
    F_CKPT,
    F_FLOOR,
    F_MIX,
    F_MODE,
    F_RECOMPUTE,
    F_SEEN,
    F_SEGPOS,
    apply_gradients,
    learn_head,
)
from rwkvzip.net.rwkv7 import backward as rwkv7_backward
from rwkvzip.net.rwkv7 import forward as rwkv7
from rwkvzip.net.rwkv7.model import Rwkv7Model
from rwkvzip.ops import ALPHABET
from rwkvzip.ops.jit import jit
from rwkvzip.ops.linalg import refresh_twins

ARCH_RWKV7, ARCH_GDN = Rwkv7Model.arch_id, GdnModel.arch_id
ARCH_NONE = -1  # no network: the context models and mixer alone (MODE_NONE)
MODE_HEAD, MODE_BPTT1, MODE_TBPTT, MODE_NONE, MODE_FROZEN = 0, 1, 2, 3, 4

# The kernels' argument bundles (plain tuples to numba; built by codec.Predictor)
Net = namedtuple("Net", "W state tr P I F W16")
Training = namedtuple("Training", "O G R RV toks ckpt rs rt gstate scratch WT twins rec")
Mixing = namedtuple("Mixing", "CT HB S MX ST")


@jit(inline="always")
def forward(arch, token, W, W16, state, tr, I, F):
    """`arch` is a constant in every entry point, so numba drops the other architecture's
    branch before typing: a level compiles only its own network. The token is one integer
    type on every path (one signature of forward_step, not three)."""
    if arch == ARCH_RWKV7:
        rwkv7.forward_step(np.int64(token), W, W16, state, tr, I, F[F_FLOOR])
    elif arch == ARCH_GDN:
        gdn.forward_step(np.int64(token), W, W16, state, tr, I, F[F_FLOOR])


@jit(inline="always")
def backward(arch, j, token, symbol, net, train, s_old, s_new, tr):
    """Step j's backward pass (its matrices' gradients into row j of the record)."""
    W, _, _, _, I, F, _ = net
    matrices = (train.WT, train.rec)
    record_into(train.rec, j)
    if arch == ARCH_RWKV7:
        rwkv7_backward.backward_step(np.int64(token), np.int64(symbol), W, train.G, s_old,
                                     s_new, tr, train.gstate, I, F[F_FLOOR],
                                     train.scratch, matrices)
    elif arch == ARCH_GDN:
        gdn_backward.backward_step(np.int64(token), np.int64(symbol), W, train.G, s_old,
                                   s_new, tr, train.gstate, I, F[F_FLOOR],
                                   train.scratch, matrices)


@jit(inline="always")
def step_optimizer(net, train, steps):
    """One optimizer step from the gradients of the last `steps` backward steps (their
    mean)."""
    apply_gradients(net.W, train.O, train.G, (train.R, train.RV), net.F, 1.0 / steps,
                    train.rec, steps)


@jit(inline="always")
def publish(tr, net, mixing, path):
    """The coding distribution of the next byte, into P: the network's own (from the trace
    tr), or the mixer's, which reads the network's softmax from the trace; with path coding
    (`path`, a constant of the entry point) what its nodes share (they follow, in
    take_path)."""
    I, P, F = net.I, net.P, net.F
    if path:
        mixer.prepare(gslice(tr, I, T_Q, I[D_V]), mixing.S, mixing.MX)
    elif F[F_MIX] != 0.0:
        mixer.predict(gslice(tr, I, T_Q, I[D_V]), mixing.CT, mixing.S, mixing.MX, mixing.ST,
                      F[F_FLOOR], P)
    else:
        p = gslice(tr, I, T_P, I[D_V])
        for j in range(P.shape[0]):
            P[j] = p[j]


@jit
def loss_symbol(symbol, tr, net, mixing, j):
    """What the backward pass of step j differentiates: the network's own loss on `symbol`,
    or with mixing that loss plus the mixer's (through the network's input to the mixer:
    row j of the mixer's logit gradients), summed into the trace's T_GLOGITS (-1 says so)."""
    I, F = net.I, net.F
    if F[F_MIX] == 0.0:
        return symbol
    V = I[D_V]
    g = logit_gradient(symbol, tr, I, F[F_FLOOR])
    row = mixing.S[mixer.S_GM] + j * V
    for i in range(V):
        g[i] += mixing.MX[row + i]
    return -1


@jit
def copy(src, dst):
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@jit(inline="always")
def live_step(arch, token, net, train, j):
    """Forward step j of a TBPTT segment into the chunk buffers (state rs[k] -> rs[k + 1])."""
    rs, rt = train.rs, train.rt
    k = j % int(net.F[F_CKPT])
    copy(rs[k], rs[k + 1])
    forward(arch, token, net.W, net.W16, rs[k + 1], rt[k], net.I, net.F)
    return k


@jit(inline="always")
def begin(arch, path, net, train, mixing):
    """Prediction for the first byte: the network reads byte 0 from a zero state."""
    train.toks[0] = 0
    copy(net.state, train.rs[0])
    if net.F[F_MODE] == MODE_TBPTT:
        copy(net.state, train.ckpt[0])
        k = live_step(arch, 0, net, train, 0)
        publish(train.rt[k], net, mixing, path)
    else:
        begin_fixed(arch, path, net, mixing)


@jit(inline="always")
def begin_fixed(arch, path, net, mixing):
    """`begin` for a network that does not learn (or is absent)."""
    if net.F[F_MODE] != MODE_NONE:
        forward(arch, 0, net.W, net.W16, net.state, net.tr, net.I, net.F)
    publish(net.tr, net, mixing, path)


@jit(inline="always")
def tbptt_update(arch, net, train, mixing):
    """The segment toks[0..T] is complete: backpropagate through it, step, recompute (or
    not: F_RECOMPUTE)."""
    W, state, tr, _, I, F, _ = net
    toks, ckpt, rs, rt, gstate = train.toks, train.ckpt, train.rs, train.rt, train.gstate
    T = int(F[F_BPTT])
    K = int(F[F_CKPT])
    n_chunks = (T + K - 1) // K
    if F[F_RECOMPUTE] == 0.0:  # the live state goes on (before replays overwrite it)
        copy(rs[(T - 1) % K + 1], state)
    for i in range(gstate.shape[0]):
        gstate[i] = 0.0
    for c in range(n_chunks - 1, -1, -1):
        j0 = c * K
        j1 = min(T, j0 + K)
        if c < n_chunks - 1:  # the last chunk is still in rs/rt; replay earlier ones
            copy(ckpt[c], rs[0])
            for j in range(j0, j1):
                live_step(arch, toks[j], net, train, j)
        for j in range(j1 - 1, j0 - 1, -1):
            k = j - j0
            target = loss_symbol(toks[j + 1], rt[k], net, mixing, j)
            backward(arch, j, toks[j], target, net, train, rs[k], rs[k + 1], rt[k])
    step_optimizer(net, train, T)
    if train.WT.shape[0] > 0:
        refresh_twins(W, train.WT, train.twins)
    if F[F_RECOMPUTE] != 0.0:  # recompute the live state over the segment, new weights
        copy(ckpt[0], state)
        for j in range(T):
            forward(arch, toks[j], W, net.W16, state, tr, I, F)


@jit
def learn_mixing(symbol, j, mixing, path):
    """The mixer learns from the byte just coded (the gradient for the network goes to row
    j of its GM rows); the context models then move on to the next context, and what the
    next byte reads starts loading (with path coding, `path`, only what it surely reads)."""
    CT, HB, S, MX, ST = mixing
    row = S[mixer.S_GM] + j * ALPHABET
    mixer.learn(symbol, CT, S, MX, ST, MX[row:row + ALPHABET])
    context.next_contexts(S, HB, symbol)
    sheet.next_contexts(S, HB)
    syntax.next_contexts(S)
    jvm.next_contexts(S, HB)
    pyc.next_contexts(S, HB)
    wasm.next_contexts(S, HB)
    exe.next_contexts(S, HB)
    x86.next_contexts(S, HB)
    riscv.next_contexts(S, HB)
    s390x.next_contexts(S, HB)
    thumb.next_contexts(S, HB)
    sparse.next_contexts(CT, S, HB)
    steps.next_expected(S, HB)
    delta.next_contexts(CT, S, HB)
    context.match_update(S, HB, CT)
    image.next_pixels(S, HB)
    context.prefetch_slots(CT, S, 1 if path else 17)
    if not path:
        mixer.prefetch_rows(S, MX)


@jit(inline="always")
def predict_fixed(symbol, arch, path, net, mixing):
    """The next distribution from a network that does not learn (MODE_FROZEN) or is not
    run (MODE_NONE)."""
    if net.F[F_MODE] == MODE_FROZEN:
        forward(arch, symbol, net.W, net.W16, net.state, net.tr, net.I, net.F)
    publish(net.tr, net, mixing, path)


@jit(inline="always")
def advance(symbol, arch, path, net, train, mixing):
    """Learn from the byte just coded, then read it to predict the next one (into P)."""
    W, state, tr, _, I, F, _ = net
    toks, ckpt, rs, rt, gstate = train.toks, train.ckpt, train.rs, train.rt, train.gstate
    mode = F[F_MODE]
    if F[F_MIX] != 0.0:  # the mixer learns first: its logit gradient is part of the loss
        learn_mixing(symbol, int(F[F_SEGPOS]) if mode == MODE_TBPTT else 0, mixing, path)
    if mode == MODE_NONE or mode == MODE_FROZEN:  # noqa: SIM109 - numba: a float in a tuple
        predict_fixed(symbol, arch, path, net, mixing)
    elif mode == MODE_HEAD:
        learn_head(loss_symbol(symbol, tr, net, mixing, 0), W, train.O, tr, I, F)
        forward(arch, symbol, W, net.W16, state, tr, I, F)
        publish(tr, net, mixing, path)
    elif mode == MODE_BPTT1:
        # tr holds the forward that predicted `symbol`; rs[0] the state before it.
        for i in range(gstate.shape[0]):
            gstate[i] = 0.0
        target = loss_symbol(symbol, tr, net, mixing, 0)
        backward(arch, 0, toks[0], target, net, train, rs[0], state, tr)
        step_optimizer(net, train, 1)
        copy(state, rs[0])
        toks[0] = symbol
        forward(arch, symbol, W, net.W16, state, tr, I, F)
        publish(tr, net, mixing, path)
    else:
        j = int(F[F_SEGPOS]) + 1  # steps of the segment now complete
        toks[j] = symbol
        K = int(F[F_CKPT])
        if j < int(F[F_BPTT]):
            if j % K == 0:  # a new chunk starts from the state after step j - 1
                copy(rs[K], rs[0])
                copy(rs[0], ckpt[j // K])
            k = live_step(arch, symbol, net, train, j)
            publish(rt[k], net, mixing, path)
            F[F_SEGPOS] = j
        else:
            tbptt_update(arch, net, train, mixing)
            # a new segment starts with the byte just coded as its first input
            toks[0] = symbol
            copy(state, ckpt[0])
            copy(state, rs[0])
            k = live_step(arch, symbol, net, train, 0)
            publish(rt[k], net, mixing, path)
            F[F_SEGPOS] = 0
    F[F_SEEN] += 1.0


@jit(inline="always")
def take(io, t, data, probs, net, mixing, decoder, path):
    """coder.take_byte, or with path coding take_path."""
    if path:
        return take_path(io, t, data, probs, mixing, decoder)
    return coder.take_byte(io, t, data, probs, net.P, decoder)


@jit(inline="always")
def take_path(io, t, data, probs, mixing, decoder):
    """Byte t by path coding: its units of the coder's 2^24 are those of the tree's that
    remain after splitting at each node of its path (coder.path_units, the node's
    probability from mixer.node_probability), most significant bit first. RECORD keeps the
    byte's row (coder.path_row) in probs[t], DECODE walks the tree by the stream's quantile,
    ADVANCE follows the byte's bits. False: the stream is corrupt."""
    CT, HB, S, MX, ST = mixing
    quantile = coder.decode_quantile(decoder[1]) if io == coder.DECODE else np.int64(0)
    if quantile < 0:
        return False
    symbol = np.int64(data[t])
    left = np.int64(coder.PATH_LEFT)
    rest = np.int64(coder.PATH_REST)
    node = 1
    for d in range(8):
        p1 = mixer.node_probability(CT, S, MX, ST, node, d)
        ones, zeros = coder.path_units(rest, p1, d)
        bit = int(quantile >= left + zeros) if io == coder.DECODE else (symbol >> (7 - d)) & 1
        if bit:
            left += zeros
            rest = ones
        else:
            rest -= ones
        node = 2 * node + bit
    width = coder.PATH_LEAST + rest
    if io == coder.DECODE:
        if quantile < left or quantile >= left + width:  # outside the tree's units
            return False
        coder.decode_interval(decoder[0], decoder[1], left, width)
        data[t] = node - ALPHABET
    elif io == coder.RECORD:
        coder.path_row(left, width, probs[t])
    return True


def learning_kernel(name: str, arch: int, path: bool):
    """The block kernel of a network that learns, for one architecture and coding: `arch`
    and `path` are constants of the closure, so numba drops the other network's and the
    other coding's branches before typing (a level compiles only its own), and the loop is
    the kernel itself, not a function inlined into it (inlining it took 6 s of each learning
    kernel's 29 s compile).

    run(data, probs, io, start, net, train, mixing, decoder): advance over a block of bytes,
    doing `io` with each (coder.take_byte: record its distribution in probs[t], or decode it
    into data[t] first); with `start`, first predict the first byte (a stream's or a
    document's start). Returns the bytes advanced over (fewer only when a decoded stream is
    corrupt). It is one top-level kernel that reaches the model, which LLVM optimises as a
    whole: one kernel instead of three separate loops costs 20 s of compilation instead of
    ~200 s.
    """
    def run(data, probs, io, start, net, train, mixing, decoder):
        if start:
            begin(arch, path, net, train, mixing)
        mixed = net.F[F_MIX] != 0.0
        for t in range(data.shape[0]):
            if mixed:
                exe.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                x86.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                riscv.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                s390x.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                thumb.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                jvm.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
            if not take(io, t, data, probs, net, mixing, decoder, path):
                return t
            advance(int(data[t]), arch, path, net, train, mixing)
            if mixed:
                exe.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                x86.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                riscv.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                s390x.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                thumb.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                jvm.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
        return data.shape[0]

    run.__name__ = run.__qualname__ = name  # its own name, and its own cache file
    return jit(run)


def fixed_kernel(name: str, arch: int, path: bool):
    """`learning_kernel` for MODE_NONE and MODE_FROZEN (the same steps, so the same bits): no
    backward pass or optimizer is reachable from it, so a level whose network does not
    learn (the default) compiles a fraction of the kernels."""
    def run_fixed(data, probs, io, start, net, mixing, decoder):
        F = net.F
        if start:
            begin_fixed(arch, path, net, mixing)
        mixed = F[F_MIX] != 0.0
        for t in range(data.shape[0]):
            if mixed:
                exe.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                x86.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                riscv.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                s390x.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                thumb.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
                jvm.calls_before_byte(mixing.S, data, t, io != coder.DECODE)
            if not take(io, t, data, probs, net, mixing, decoder, path):
                return t
            symbol = int(data[t])
            if mixed:
                learn_mixing(symbol, 0, mixing, path)
            predict_fixed(symbol, arch, path, net, mixing)
            F[F_SEEN] += 1.0
            if mixed:
                exe.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                x86.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                riscv.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                s390x.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                thumb.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
                jvm.calls_after_byte(mixing.S, data, t, io == coder.DECODE)
        return data.shape[0]

    run_fixed.__name__ = run_fixed.__qualname__ = name
    return jit(run_fixed)


# Entry points, one per architecture and coding (the codec calls these, through
# ENTRY_POINTS; a level compiles only its own network and coding):
# run_*(data, probs, io, start, net, train, mixing, decoder)  a block, the network learning
# run_fixed_*(data, probs, io, start, net, mixing, decoder)   the network fixed or absent
# (*_path: path coding, mix field path_coding)
run_rwkv7 = learning_kernel("run_rwkv7", ARCH_RWKV7, False)
run_gdn = learning_kernel("run_gdn", ARCH_GDN, False)
run_rwkv7_path = learning_kernel("run_rwkv7_path", ARCH_RWKV7, True)
run_gdn_path = learning_kernel("run_gdn_path", ARCH_GDN, True)
run_fixed_rwkv7 = fixed_kernel("run_fixed_rwkv7", ARCH_RWKV7, False)
run_fixed_gdn = fixed_kernel("run_fixed_gdn", ARCH_GDN, False)
run_fixed_none = fixed_kernel("run_fixed_none", ARCH_NONE, False)
run_fixed_rwkv7_path = fixed_kernel("run_fixed_rwkv7_path", ARCH_RWKV7, True)
run_fixed_gdn_path = fixed_kernel("run_fixed_gdn_path", ARCH_GDN, True)
run_fixed_none_path = fixed_kernel("run_fixed_none_path", ARCH_NONE, True)

ENTRY_POINTS = {  # (arch, path coding): (run, run_fixed)
    (ARCH_RWKV7, False): (run_rwkv7, run_fixed_rwkv7),
    (ARCH_GDN, False): (run_gdn, run_fixed_gdn),
    (ARCH_NONE, False): (None, run_fixed_none),
    (ARCH_RWKV7, True): (run_rwkv7_path, run_fixed_rwkv7_path),
    (ARCH_GDN, True): (run_gdn_path, run_fixed_gdn_path),
    (ARCH_NONE, True): (None, run_fixed_none_path),
}
