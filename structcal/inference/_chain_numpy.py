"""Chain inference in NumPy for small batches: no kernel to compile or load.

The same results as the Numba kernels of :mod:`structcal.inference._chain` on a batch of
chains padded to its longest one (``(n_chains, length, K)``), vectorised over chains:

- Viterbi and k-best are max-plus recursions with the kernels' tie rules (the first
  best label; equal k-best scores in the order the recursion meets them), so their
  labels and scores are identical to the kernels', bit for bit;
- forward-backward and the constrained log-partition of a batch sharing one pairwise
  matrix run the kernels' certified scaled pass (probability space, one matrix product
  per step for the whole batch; see Numerics in :mod:`structcal.inference._chain`): a
  chain is kept only where every term the pass formed is provably far above the
  underflow threshold, and the other chains (and batches with a matrix per edge) are
  computed in log space with messages normalised at every step (the kernels' exact
  fallback pass), so they equal the kernels' results up to rounding (relative 1e-12 in
  the tests); pseudo-marginals are computed in log space.

Which implementation runs is decided by :mod:`structcal._tier`; inputs are trusted
(checked by the public functions of :mod:`structcal.inference.chain`).
"""

from __future__ import annotations

import numpy as np

# status of a chain after inference (shared with the kernels)
STATUS_OK = 0
STATUS_INFEASIBLE = 1
STATUS_FALLBACK = 2
STATUS_PENDING = 3


def _lse(x, axis):
    """``log(sum(exp(x)))`` along ``axis``, ``-inf`` where every entry is ``-inf``."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(x - m), axis=axis)) + np.squeeze(m, axis=axis)


class _Padded:
    """A batch (or a selection of its chains) padded to its longest chain."""

    def __init__(self, unary, offsets, edge_offsets, pw, stride, chains=None):
        if chains is None:
            chains = np.arange(offsets.shape[0] - 1)
        starts = offsets[chains]
        self.lengths = offsets[chains + 1] - starts
        T = int(self.lengths.max()) if chains.shape[0] else 0
        B, K = chains.shape[0], unary.shape[1]
        pos = np.arange(T)
        self.valid = pos[None, :] < self.lengths[:, None]
        rows = np.where(self.valid, starts[:, None] + pos[None, :], 0)
        self.U = np.where(self.valid[:, :, None], unary[rows], 0.0) if B else np.zeros((0, 0, K))
        self.pw, self.stride, self.e0 = pw, stride, edge_offsets[chains]

    def rows(self, idx):
        """The chains ``idx`` of this batch (unary potentials as they are here)."""
        out = object.__new__(_Padded)
        out.lengths, out.valid, out.U = self.lengths[idx], self.valid[idx], self.U[idx]
        out.pw, out.stride, out.e0 = self.pw, self.stride, self.e0[idx]
        return out

    def matrix(self, t, chains=None):
        """The pairwise matrix of edge ``t`` (positions ``t``, ``t + 1``) of each chain (or
        of the ``chains`` given): ``(n_chains, K, K)``, or ``(1, K, K)`` when the batch
        shares one."""
        if self.stride == 0:
            return self.pw[:1]
        e0 = self.e0 if chains is None else self.e0[chains]
        e = np.minimum(e0 + t, self.pw.shape[0] - 1)  # past a chain's end: unused
        return self.pw[e]


def forward(P):
    """Normalised forward messages ``(n_chains, T, K)`` and the log-partitions."""
    B, T, K = P.U.shape
    alpha = np.zeros((B, T, K))
    logz = np.zeros(B)
    if T == 0:
        return alpha, logz
    a = P.U[:, 0]
    for t in range(T):
        live = P.lengths > t
        if t > 0:  # a chain past its end keeps its last message
            a = np.where(live[:, None], _lse(a[:, :, None] + P.matrix(t - 1), axis=1)
                         + P.U[:, t], a)
        n = np.where(live, _lse(a, axis=1), 0.0)
        a = a - np.where(np.isfinite(n), n, 0.0)[:, None]
        logz = logz + n
        alpha[:, t] = a
    return alpha, logz


def infer(unary, offsets, edge_offsets, pw, stride, do_map, do_marg, do_edge):
    """``(labels, scores, logz, marg, edge, status)`` as :func:`_chain.infer_batch` gives
    them (with no chain pending)."""
    P = _Padded(unary, offsets, edge_offsets, pw, stride)
    n_tokens, K = unary.shape
    B = P.lengths.shape[0]
    labels = np.zeros(n_tokens, dtype=np.int64)
    scores = np.zeros(B)
    logz = np.zeros(B)
    marg = np.empty((n_tokens, K)) if do_marg else np.empty((0, K))
    edge = np.empty((edge_offsets[-1], K, K)) if do_edge else np.empty((0, K, K))
    status = np.zeros(B, dtype=np.int64)
    if do_map:
        lab, scores = viterbi(P)
        labels[:] = lab
        status[scores == -np.inf] = STATUS_INFEASIBLE
    if do_marg:
        if stride == 0 and B:
            m, logz, ok = _forward_backward_scaled(P, edge if do_edge else None)
            redo = np.flatnonzero(~ok)
            status[redo] = np.maximum(status[redo], STATUS_FALLBACK)
        else:
            m, redo = np.empty(P.U.shape), np.arange(B)
        if redo.size:
            Q = P.rows(redo)
            alpha, lz = forward(Q)
            logz[redo] = np.where(Q.lengths > 0, lz, 0.0)
            beta = _backward(Q)
            mq = alpha + beta
            with np.errstate(invalid="ignore"):  # infeasible chains: raised by the caller
                mq = np.exp(mq - _lse(mq, axis=2)[:, :, None])
            m[redo] = mq
            if do_edge:
                _edge_marginals(Q, alpha, beta, edge)
        feasible = logz > -np.inf
        status[~feasible] = STATUS_INFEASIBLE
        if do_map:
            scores = np.where(feasible, scores, -np.inf)
        marg[:] = m[P.valid]
    return labels, scores, logz, marg, edge, status


#: The scaled pass trusts a step only if every term it forms is provably at least
#: exp(_LOG_FLOOR) relative to the step's scale (the kernels' constant)
_LOG_FLOOR = -680.0


def _scaled_matrix(W, exp=np.exp):
    """``(E, colmax, spread)`` of one pairwise matrix, as the kernels' scaled
    exponentials: ``E[i, j] = exp(W[i, j] - colmax[j])`` (a column forbidden everywhere
    gets ``colmax`` 0 and ``E`` 0), and the largest spread (max - min of the finite
    entries) of a column. ``exp``: the exponential applied to the array (the kernels'
    own, interpreted, where the tables must be theirs bit for bit)."""
    colmax = W.max(axis=0)
    low = np.where(np.isfinite(W), W, np.inf).min(axis=0)
    live = colmax > -np.inf
    spread = float((colmax - low)[live].max(initial=0.0))
    colmax = np.where(live, colmax, 0.0)
    return exp(W - colmax[None, :]), colmax, spread


def _forward_scaled(P):
    """The kernels' certified scaled forward pass over a batch sharing one pairwise matrix.

    Returns ``(A, z, u, E, logz, ok)``: the normalised forward rows ``A`` (B, T, K), the
    step normalisers ``z`` (B, T), the shifted unary exponentials ``u`` (B, T, K), the
    scaled matrix ``E``, the log-partitions and, per chain, whether the pass is certified
    (every term it formed was at least ``exp(_LOG_FLOOR)`` relative to its step: exact to
    rounding; an infeasible chain, ``logz = -inf``, is certified too). Uncertified chains
    must be recomputed in log space.
    """
    B, T, K = P.U.shape
    E, colmax, spread = _scaled_matrix(P.pw[0])
    X = P.U.copy()
    X[:, 1:] += colmax
    shift = X.max(axis=2)
    dead = shift == -np.inf
    shift = np.where(dead, 0.0, shift)
    lo = np.where(np.isfinite(X), X, np.inf).min(axis=2) - shift
    lo[:, 1:] -= spread
    u = np.exp(X - shift[:, :, None])
    A = np.zeros((B, T, K))
    z = np.ones((B, T))
    logz = np.zeros(B)
    ok = np.ones(B, dtype=bool)
    infeasible = np.zeros(B, dtype=bool)
    amin = np.ones(B)
    a = np.zeros((B, K))
    for t in range(T):
        live = (P.lengths > t) & ok & ~infeasible
        infeasible |= live & dead[:, t]
        live &= ~dead[:, t]
        with np.errstate(divide="ignore"):
            sure = (lo[:, t] >= _LOG_FLOOR) & (np.log(amin) + lo[:, t] >= _LOG_FLOOR)
        ok &= ~(live & ~sure)
        live &= sure
        x = u[:, 0] if t == 0 else (a @ E) * u[:, t]
        total = x.sum(axis=1)
        infeasible |= live & (total == 0.0)  # every term exactly 0 (none underflowed)
        live &= total > 0.0
        total = np.where(live, total, 1.0)
        x = x / total[:, None]
        a = np.where(live[:, None], x, a)
        amin = np.where(live, np.where(x > 0, x, np.inf).min(axis=1), amin)
        logz += np.where(live, np.log(total) + shift[:, t], 0.0)
        z[:, t] = total
        A[:, t] = a
    logz[infeasible] = -np.inf
    return A, z, u, E, logz, ok


def _forward_backward_scaled(P, edge):
    """Marginals ``(B, T, K)``, log-partitions and the certified mask of the scaled pass
    (:func:`_forward_scaled`, then the backward pass with its normalisers); edge marginals
    of certified chains are written into ``edge`` unless it is None. A chain whose first
    marginal row does not sum to 1 (an overflow in the backward pass) is not certified."""
    A, z, u, E, logz, ok = _forward_scaled(P)
    B, T, K = A.shape
    marg = np.empty((B, T, K))
    beta = np.ones((B, K))
    ET = np.ascontiguousarray(E.T)
    for t in range(T - 1, -1, -1):
        if t < T - 1:
            act = P.lengths > t + 1
            w = u[:, t + 1] * beta / z[:, t + 1][:, None]
            if edge is not None:
                live = np.flatnonzero(act & ok)
                if live.size:  # p(y_t = i, y_t+1 = j) = a[t, i] E[i, j] w[j]
                    edge[P.e0[live] + t] = np.minimum(A[live, t][:, :, None] * E[None]
                                                      * w[live][:, None, :], 1.0)
            with np.errstate(over="ignore", invalid="ignore"):
                beta = np.where(act[:, None], w @ ET, 1.0)
        with np.errstate(invalid="ignore"):  # clamped at 1 as the kernels clamp: a
            marg[:, t] = np.minimum(A[:, t] * beta, 1.0)  # near-certain label rounds past
    with np.errstate(invalid="ignore"):
        first = marg[:, 0].sum(axis=1) if T else np.ones(B)
    ok &= (P.lengths == 0) | (np.abs(first - 1.0) < 1e-6) | (logz == -np.inf)
    return marg, logz, ok


def _backward(P):
    B, T, K = P.U.shape
    beta = np.zeros((B, T, K))
    b = np.zeros((B, K))
    for t in range(T - 2, -1, -1):
        x = _lse(P.matrix(t) + (P.U[:, t + 1] + b)[:, None, :], axis=2)
        x = x - np.where(np.isfinite(n := _lse(x, axis=1)), n, 0.0)[:, None]
        b = np.where((P.lengths > t + 1)[:, None], x, 0.0)
        beta[:, t] = b
    return beta


def _edge_marginals(P, alpha, beta, edge):
    B, T, K = P.U.shape
    for t in range(T - 1):
        live = np.flatnonzero(P.lengths > t + 1)
        if live.size == 0:
            break
        M = P.matrix(t)
        M = M if M.shape[0] == 1 else M[live]
        x = (alpha[live, t][:, :, None] + M
             + (P.U[live, t + 1] + beta[live, t + 1])[:, None, :])
        flat = x.reshape(live.shape[0], K * K)
        with np.errstate(invalid="ignore"):
            flat = np.exp(flat - _lse(flat, axis=1)[:, None])
        edge[P.e0[live] + t] = flat.reshape(-1, K, K)


def viterbi(P):
    """MAP labels (laid end to end) and scores, with the kernel's first-best tie rule."""
    B, T, K = P.U.shape
    lab = np.zeros(int(P.lengths.sum()), dtype=np.int64)
    scores = np.zeros(B)
    if T == 0:
        return lab, scores
    v = np.empty((B, T, K))
    v[:, 0] = P.U[:, 0]
    for t in range(1, T):  # a chain past its end keeps its last row
        v[:, t] = np.where((P.lengths > t)[:, None],
                           (v[:, t - 1][:, :, None] + P.matrix(t - 1)).max(axis=1) + P.U[:, t],
                           v[:, t - 1])
    live = P.lengths > 0
    last = np.maximum(P.lengths - 1, 0)
    rows = np.arange(B)
    y = np.zeros((B, T), dtype=np.int64)
    cur = np.argmax(v[rows, last], axis=1)
    scores = np.where(live, v[rows, last, cur], 0.0)
    y[rows, last] = cur
    for t in range(T - 2, -1, -1):
        act = P.lengths > t + 1
        nxt = y[:, t + 1]
        M = P.matrix(t)
        col = M[0][:, nxt].T if M.shape[0] == 1 else M[rows, :, nxt]
        y[:, t] = np.where(act, np.argmax(v[:, t] + col, axis=1), y[:, t])
    lab[:] = y[P.valid]
    return lab, scores


def _top(x, k):
    """Indices and values of the ``k`` largest entries along the last axis of ``x``, in
    decreasing order, equal values in index order (a stable sort of ``-x``). For small
    ``k``, ``k`` rounds of ``argmax`` (which returns the first maximum) with the winner
    masked to ``-inf``: the same entries in the same order, without sorting every row
    (past the last finite entry the indices may differ; callers ignore them there).
    Overwrites ``x``."""
    if k > 8:
        order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        return order, np.take_along_axis(x, order, axis=-1)
    order = np.empty(x.shape[:-1] + (k,), dtype=np.int64)
    top = np.empty(x.shape[:-1] + (k,))
    for q in range(k):
        i = np.argmax(x, axis=-1)[..., None]
        order[..., q:q + 1] = i
        top[..., q:q + 1] = np.take_along_axis(x, i, axis=-1)
        if q + 1 < k:
            np.put_along_axis(x, i, -np.inf, axis=-1)
    return order, top


def _top2_step(prev, mat):
    """:func:`_top` of the candidates ``prev[i, r0] + mat[i, j]`` of every state ``j``
    (index ``2 i + r0``) for ``k = 2``, from ``K`` candidates per state instead of ``2 K``.

    ``prev[i, 0] >= prev[i, 1]``, so the best is ``(i*, 0)`` with ``i*`` the first
    maximiser of ``prev[i, 0] + mat[i, j]``, and the second is the first maximum among
    ``(i, 0)`` for ``i != i*`` and ``(i*, 1)``: a candidate ``(i, 1)`` with ``i != i*``
    never beats ``(i, 0)``, which comes before it. Putting ``(i*, 1)`` in the place of
    ``(i*, 0)`` keeps the index order of these candidates, so ``argmax`` (the first
    maximum) breaks ties as the stable sort does.
    """
    n, K = prev.shape[0], prev.shape[1]
    a = prev[:, :, 0][:, :, None] + mat  # (chain, i, j)
    best = np.argmax(a, axis=1)[:, None, :]  # (chain, 1, j)
    top = np.empty((n, K, 2))
    top[:, :, 0] = np.take_along_axis(a, best, axis=1)[:, 0]
    second = np.take_along_axis(prev[:, :, 1][:, :, None] + mat, best, axis=1)  # (i*, 1)
    np.put_along_axis(a, best, second, axis=1)
    runner = np.argmax(a, axis=1)  # (chain, j)
    top[:, :, 1] = np.take_along_axis(a, runner[:, None, :], axis=1)[:, 0]
    order = np.empty((n, K, 2), dtype=np.int64)
    order[:, :, 0] = 2 * best[:, 0]
    order[:, :, 1] = 2 * runner + (runner == best[:, 0])
    return order, top


def kbest(unary, offsets, edge_offsets, pw, stride, k):
    """``(labels (k, n_tokens), scores (n_chains, k), found)`` as :func:`_chain.kbest_batch`:
    equal scores in the order the kernel's recursion meets them."""
    P = _Padded(unary, offsets, edge_offsets, pw, stride)
    B, T, K = P.U.shape
    n_tokens = unary.shape[0]
    labels = np.full((k, n_tokens), -1, dtype=np.int64)
    scores = np.full((B, k), -np.inf)
    found = np.zeros(B, dtype=np.int64)
    if B == 0:
        return labels, scores, found
    empty = P.lengths == 0
    scores[empty, 0] = 0.0
    found[empty] = 1
    if T == 0:
        return labels, scores, found
    S = np.full((B, T, K, k), -np.inf)
    # back pointers: the candidate index i * k + r0 of each kept prefix (read only along
    # finite paths)
    BP = np.zeros((B, T, K, k), dtype=np.int64)
    S[:, 0, :, 0] = P.U[:, 0]
    for t in range(1, T):
        live = np.flatnonzero(P.lengths > t)  # chains past their end keep -inf scores
        if k == 2:
            order, top = _top2_step(S[live, t - 1], P.matrix(t - 1, live))
        else:
            mt = np.swapaxes(P.matrix(t - 1, live), 1, 2)[:, :, :, None]
            # candidates for state j: S[t-1, i, r0] + pw[i, j], met in (i, r0) order
            cand = np.empty((live.shape[0], K, K, k))
            np.add(S[live, t - 1][:, None, :, :], mt, out=cand)  # (chain, j, i, r0)
            order, top = _top(cand.reshape(live.shape[0], K, K * k), k)
        top += P.U[live, t][:, :, None]
        S[live, t] = top
        BP[live, t] = order
    rows = np.arange(B)
    last = np.maximum(P.lengths - 1, 0)
    order, val = _top(S[rows, last].reshape(B, K * k), k)
    live = ~empty
    scores[live] = val[live]
    found[live] = (val[live] > -np.inf).sum(axis=1)
    for q in range(k):  # backtrack rank q of every chain at once
        j = order[:, q] // k
        r = order[:, q] % k
        ok = live & (val[:, q] > -np.inf)
        y = np.full((B, T), -1, dtype=np.int64)
        for t in range(T - 1, -1, -1):
            at = ok & (t <= last)
            y[at, t] = j[at]
            if t > 0:
                back = BP[rows, t, j, r]
                j, r = np.where(at, back // k, j), np.where(at, back % k, r)
        out = np.full((B, T), -1, dtype=np.int64)
        out[ok] = y[ok]
        labels[q] = out[P.valid]
    return labels, scores, found


def score(p, pw, stride, labels):
    """Unnormalised log-score of one labeling per chain of ``p`` (ChainPotentials), as
    :func:`_chain.score_batch` (the same sums in the same order: a chain's unary terms,
    then its edges')."""
    chain, pos = p.chain_index, p.position_index
    i = np.flatnonzero(pos > 0)  # the edge into token i
    edges = pw[(p.edge_offsets[chain[i]] + pos[i] - 1) * stride, labels[i - 1], labels[i]]
    terms = np.concatenate([p.unary[np.arange(p.n_tokens), labels], edges])
    return np.bincount(np.concatenate([chain, chain[i]]), weights=terms, minlength=p.n_chains)


def pseudo_marginals(p, pw, stride, labels):
    """``(out, bad)`` of ``p`` (ChainPotentials) as :func:`_chain.pseudo_marginals_batch`."""
    chain, pos = p.chain_index, p.position_index
    x = p.unary.copy()
    has_prev = pos > 0
    has_next = pos < p.lengths[chain] - 1
    e = (p.edge_offsets[chain] + pos - 1) * stride
    i = np.flatnonzero(has_prev)
    x[i] += pw[e[i], labels[i - 1], :]
    i = np.flatnonzero(has_next)
    x[i] += pw[e[i] + stride, :, labels[i + 1]]
    mx = x.max(axis=1) if p.n_tokens else np.zeros(0)
    dead = mx == -np.inf
    out = np.exp(x - np.where(dead, 0.0, mx)[:, None])
    out /= np.where(dead, 1.0, out.sum(axis=1))[:, None]
    out[dead] = 0.0
    bad = np.zeros(p.n_chains, dtype=np.int64)
    for t in np.flatnonzero(dead)[::-1]:  # the first dead position of each chain wins
        bad[chain[t]] = pos[t] + 1
    return out, bad


def constrained_log_partition(unary, offsets, edge_offsets, pw, stride, chains, q_offsets,
                              positions, allowed):
    """Log-partition of each query's chain with its constraints (labels outside
    ``allowed`` forbidden at ``positions``), as :func:`_chain.constrained_log_partition_batch`."""
    P = _Padded(unary, offsets, edge_offsets, pw, stride, chains)
    if positions.shape[0]:
        q = np.repeat(np.arange(chains.shape[0]), np.diff(q_offsets))
        forbid = np.zeros(P.U.shape, dtype=bool)
        np.logical_or.at(forbid, (q, positions), ~allowed)
        P.U = np.where(forbid, -np.inf, P.U)
    if stride == 0 and chains.shape[0]:
        *_, logz, ok = _forward_scaled(P)
        redo = np.flatnonzero(~ok)
        if redo.size:
            _, logz[redo] = forward(P.rows(redo))
    else:
        _, logz = forward(P)
    return np.where(P.lengths > 0, logz, 0.0)
