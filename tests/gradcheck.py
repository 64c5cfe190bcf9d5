"""Shared pieces of the finite-difference gradient tests of every architecture."""

import numpy as np

from rwkvzip.net.common import dense_matrices
from rwkvzip.net.gradrec import flush, new_record, no_record, record_into
from rwkvzip.ops.bf16 import NO_COPY
from rwkvzip.ops.linalg import refresh_twins


def twin_of(model, W, rec=None):
    """The backward's `matrices` argument with W's matrices as output-major twins (and
    their gradients into G, or into a record)."""
    WT = np.zeros_like(W)
    refresh_twins(W, WT, model.layout.twin_table())
    return WT, no_record() if rec is None else rec


def kernel_gradients(forward_step, backward_step, model, W, state0, tokens, symbols, floor,
                     matrices=None):
    """float32 forward_step over the sequence, then backward_step from the last step back
    (reading the matrices from W, or from their twins; with a record in `matrices`, step j
    records into its row j)."""
    matrices = dense_matrices() if matrices is None else matrices
    I = model.index
    state = state0.copy()
    steps = []
    for tok in tokens:
        old = state.copy()
        tr = np.zeros(model.trace_size, np.float32)
        forward_step(tok, W, NO_COPY, state, tr, I, floor)
        steps.append((old, state.copy(), tr))
    G = np.zeros_like(W)
    gstate = np.zeros(model.state_size, np.float32)
    scratch = np.zeros(model.backward_scratch_size(), np.float32)
    for j in range(len(tokens) - 1, -1, -1):
        old, new, tr = steps[j]
        record_into(matrices[1], j)
        backward_step(tokens[j], symbols[j], W, G, old, new, tr, gstate, I, floor, scratch,
                      matrices)
    return G, gstate


def pick(g, rng, n_top=2, n_rand=2):
    """Flat indices of a few entries with a clearly non-zero gradient."""
    a = np.abs(g.ravel())
    order = np.argsort(-a, kind="stable")
    chosen = list(order[:n_top])
    big = np.flatnonzero(a >= 0.1 * a.max())
    rest = np.setdiff1d(big, chosen)
    if len(rest):
        chosen += list(rng.choice(rest, size=min(n_rand, len(rest)), replace=False))
    return chosen


def close(analytic, fd, scale):
    """Relative 2e-3 plus a tiny absolute floor tied to the tensor's gradient scale.

    Observed errors are a few 1e-6 (float32 kernels against float64 differences).
    """
    return abs(analytic - fd) <= 2e-3 * abs(fd) + 1e-5 * scale


def check_deterministic_and_accumulating(forward_step, backward_step, model, W, state0, floor):
    """The same backward twice gives identical bits; a second pass into G adds to it."""
    G1, s1 = kernel_gradients(forward_step, backward_step, model, W, state0, [1, 2, 3],
                              [2, 3, 4], floor)
    G2, s2 = kernel_gradients(forward_step, backward_step, model, W, state0, [1, 2, 3],
                              [2, 3, 4], floor)
    assert np.array_equal(G1, G2) and np.array_equal(s1, s2)
    G3, s3 = kernel_gradients(forward_step, backward_step, model, W, state0, [1, 2, 3],
                              [2, 3, 4], floor, twin_of(model, W))
    assert np.array_equal(G1, G3) and np.array_equal(s1, s3)  # twins: the same bits
    # the matrices' gradients recorded as factors and formed afterwards: the same bits, and
    # every matrix of the layout recorded
    table = model.layout.twin_table()
    rec = new_record(table, 3)
    G4, s4 = kernel_gradients(forward_step, backward_step, model, W, state0, [1, 2, 3],
                              [2, 3, 4], floor, twin_of(model, W, rec))
    assert sorted(rec[1][:, 0]) == sorted(table[:, 0])
    assert not any(G4[o:o + a * b].any() for o, a, b in table)
    flush(rec, 3, G4)
    assert np.array_equal(G1, G4) and np.array_equal(s1, s4)
    I = model.index
    state = state0.copy()
    tr = np.zeros(model.trace_size, np.float32)
    forward_step(1, W, NO_COPY, state, tr, I, floor)
    scratch = np.zeros(model.backward_scratch_size(), np.float32)
    G = np.zeros_like(W)
    one = np.zeros_like(W)
    for target in (G, G, one):
        backward_step(1, 2, W, target, state0, state, tr.copy(),
                      np.zeros(model.state_size, np.float32), I, floor, scratch,
                      dense_matrices())
    np.testing.assert_allclose(G, 2 * one, rtol=1e-6, atol=1e-12)


def central_difference(loss, arr, idx, eps=1e-5):
    """d loss() / d arr[idx]; arr is perturbed in place (a view into the loss's inputs)."""
    keep = arr[idx]
    arr[idx] = keep + eps
    up = loss()
    arr[idx] = keep - eps
    down = loss()
    arr[idx] = keep
    return (up - down) / (2 * eps)


def check_parameters(model, G, t, loss, rng, failures):
    """Compare G with finite differences of loss() on a few clearly non-zero entries of
    every parameter tensor t[name] (float64, perturbed in place); failures are appended.
    Returns (worst relative error, entries checked)."""
    worst, checked = 0.0, 0
    for spec in model.layout.specs:
        g = model.layout.get(G, spec.name).reshape(-1)  # file orientation, like t[name]
        scale = float(np.abs(g).max())
        assert scale > 0.0, f"{spec.name}: zero gradient"
        for idx in pick(g, rng):
            fd = central_difference(loss, t[spec.name].reshape(-1), idx)
            checked += 1
            worst = max(worst, abs(g[idx] - fd) / (abs(fd) + 1e-30))
            if not close(g[idx], fd, scale):
                failures.append(f"{spec.name}[{idx}]: kernel {g[idx]:.6g} fd {fd:.6g}")
    return worst, checked
