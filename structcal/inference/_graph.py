"""Numba kernels for batches of pairwise graph CRFs (private: inputs are trusted).

Layout shared by every kernel
-----------------------------
``unary`` (n_nodes, K)
    Log-potentials; graph ``g`` is rows ``offsets[g]:offsets[g + 1]``.
``kind``, ``pw``, ``pwT``, ``emat``, ``potts``
    The pairwise log-potentials. ``kind == KIND_MATRIX``: edge ``e`` has the matrix
    ``pw[emat[e]]`` (``pwT`` holds the transposes); ``kind == KIND_POTTS``: edge ``e`` scores
    ``potts[e]`` when both ends agree and 0 otherwise.
``indptr``, ``nbr``, ``eid``, ``rev``, ``twin``
    CSR adjacency: node ``i``'s *slots* ``k`` in ``indptr[i]:indptr[i + 1]`` hold its
    neighbour ``nbr[k]``, the edge ``eid[k]``, whether ``i`` is the edge's second endpoint
    (``rev[k]``) and the slot of the same edge seen from the neighbour (``twin[k]``).

Seen from a slot's node (label ``a``) towards its neighbour (label ``b``) the pairwise
score is ``X[b, a]`` with ``X = pwT[m]`` for a forward slot and ``X = pw[m]`` for a
reversed one, so every inner loop runs over ``a`` along a contiguous row (an ``axpy`` that
LLVM vectorises without fastmath).

Message passing (``_send``) is written once and parameterised by the semiring: ``mode`` is
``MODE_SUM`` (log-sum-exp: marginals) or ``MODE_MAX`` (max: MAP). Messages are kept in log
space, normalised to a maximum of 0. Sum-product messages are computed in probability
space with pre-scaled exponentials (``E[b, a] = exp(X[b, a] - colmax[a])``), K*K
multiply-adds and 2K transcendental calls per message; an entry whose sum falls below
``_TINY`` (potentials spanning hundreds of nats) is recomputed exactly in log space.
The same message skeleton runs the flooding-free sequential loopy schedule and the exact
two-pass (leaves to root, root to leaves) schedule used on trees and forests.

Status codes: 0 = ok, 1 = infeasible (some node has no label of non-zero weight).
"""

import math

import numpy as np

from .._numba import batch_kernel, exp_nonpositive, kernel, prange
from .._simd import data_pointer
from ._chain import _logsumexp_row

_TINY = 1e-200
_NEG_INF = -np.inf

KIND_MATRIX = 0
KIND_POTTS = 1
MODE_SUM = 0
MODE_MAX = 1

STATUS_OK = 0
STATUS_INFEASIBLE = 1


# --------------------------------------------------------------------------- helpers


@kernel
def _pair(kind, pw, emat, potts, e, a, b):
    """Pairwise log-potential of edge ``e`` with its first end ``a`` and second end ``b``."""
    if kind == KIND_POTTS:
        return potts[e] if a == b else 0.0
    return pw[emat[e], a, b]


@kernel
def _pointers(unary, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels):
    """The data pointers of the model, structure and labels, as one tuple ``P``.

    Helpers called once per node take ``P`` rather than the arrays: an array passed to a
    Numba function is reference-counted at every call (atomic operations that cost more
    than the helper's own work), a pointer is a plain value. The arrays must outlive
    ``P``.
    """
    return (data_pointer(unary), data_pointer(pw), data_pointer(pwT), data_pointer(emat),
            data_pointer(potts), data_pointer(indptr), data_pointer(nbr), data_pointer(eid),
            data_pointer(rev), data_pointer(labels))


@kernel
def _add_pair_row(kind, K, P, e, r, yb, out):
    """Add ``psi(a, yb)`` to ``out[a]`` for every ``a`` (``out`` a pointer, ``P`` from
    :func:`_pointers`).

    The pairwise score of edge ``e`` seen from a node (label ``a``) whose neighbour has
    label ``yb``; ``r`` is the slot's ``rev``.
    """
    if kind == KIND_POTTS:
        out[yb] += P[4][e]
    else:
        base = (P[3][e] * K + yb) * K
        X = P[1] if r else P[2]
        for a in range(K):
            out[a] += X[base + a]


@kernel
def _conditional_logits(i, kind, K, P, out):
    """``out[a] = unary[i, a] + sum_j psi_ij(a, labels[j])`` over the neighbours of ``i``
    (``out`` a pointer, ``P`` from :func:`_pointers`)."""
    unary, indptr, nbr, eid, rev, labels = P[0], P[5], P[6], P[7], P[8], P[9]
    for a in range(K):
        out[a] = unary[i * K + a]
    for k in range(indptr[i], indptr[i + 1]):
        _add_pair_row(kind, K, P, eid[k], rev[k] != 0, labels[nbr[k]], out)  # (bool, as _decode)


@kernel
def _softmax_into(x, out, row):
    """``out[row] = softmax(x)``; returns False (row untouched) when every entry is -inf."""
    K = x.shape[0]
    mx = _NEG_INF
    for a in range(K):
        if x[a] > mx:
            mx = x[a]
    if mx == _NEG_INF:
        return False
    total = 0.0
    for a in range(K):
        v = math.exp(x[a] - mx)
        out[row, a] = v
        total += v
    inv = 1.0 / total
    for a in range(K):
        out[row, a] *= inv
    return True


@kernel
def _bfs(n0, n1, indptr, nbr, order, parent_slot):
    """Write the breadth-first order of nodes ``n0:n1``.

    One tree per component, rooted at its lowest node, into ``order[n0:n1]``;
    ``parent_slot[j]`` is the slot of ``j`` pointing
    to its parent (-1 for roots). Other slots of ``j`` lead to children on a forest.
    """
    for j in range(n0, n1):
        parent_slot[j] = -2  # unvisited
    head = n0
    tail = n0
    for r in range(n0, n1):
        if parent_slot[r] != -2:
            continue
        parent_slot[r] = -1
        order[tail] = r
        tail += 1
        while head < tail:
            j = order[head]
            head += 1
            for k in range(indptr[j], indptr[j + 1]):
                i = nbr[k]
                if parent_slot[i] == -2:
                    # the slot of i that points back to j
                    for k2 in range(indptr[i], indptr[i + 1]):
                        if nbr[k2] == j:
                            parent_slot[i] = k2
                            break
                    order[tail] = i
                    tail += 1


# ---------------------------------------------------------------- scores, ICM, conditionals


@kernel
def _graph_score(n0, n1, e0, e1, unary, edges, kind, pw, emat, potts, labels):
    total = 0.0
    for i in range(n0, n1):
        total += unary[i, labels[i]]
    for e in range(e0, e1):
        total += _pair(kind, pw, emat, potts, e, labels[edges[e, 0]], labels[edges[e, 1]])
    return total


@batch_kernel(interpret=True)
def score_batch(offsets, edge_offsets, unary, edges, kind, pw, emat, potts, labels, out):
    """Unnormalised log-score of the given labeling of every graph."""
    n_graphs = offsets.shape[0] - 1
    for g in prange(n_graphs):
        out[g] = _graph_score(
            offsets[g],
            offsets[g + 1],
            edge_offsets[g],
            edge_offsets[g + 1],
            unary,
            edges,
            kind,
            pw,
            emat,
            potts,
            labels,
        )


@kernel
def _icm_graph(
    n0, n1, unary, kind, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels, max_iter, tmp
):
    """Run iterated conditional modes in place on nodes ``n0:n1``.

    Each node in turn moves to its best label given its neighbours, only on a strict
    improvement (so the score never
    decreases and the loop terminates). Returns ``(sweeps, converged)``: sweeps made and
    whether the last one changed nothing.
    """
    K = unary.shape[1]
    P = _pointers(unary, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels)
    T = data_pointer(tmp)
    sweeps = 0
    while sweeps < max_iter:
        sweeps += 1
        changed = False
        for i in range(n0, n1):
            _conditional_logits(i, kind, K, P, T)
            best = labels[i]
            bv = tmp[best]
            for a in range(K):
                if tmp[a] > bv:
                    bv = tmp[a]
                    best = a
            if best != labels[i]:
                labels[i] = best
                changed = True
        if not changed:
            return sweeps, True
    return sweeps, False


@batch_kernel(interpret=True)
def icm_batch(
    offsets,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    labels,
    max_iter,
    sweeps,
    converged,
):
    """ICM on every graph (``prange`` over graphs); ``labels`` is updated in place."""
    n_graphs = offsets.shape[0] - 1
    K = unary.shape[1]
    for g in prange(n_graphs):
        tmp = np.empty(K)
        sw, conv = _icm_graph(
            offsets[g],
            offsets[g + 1],
            unary,
            kind,
            pw,
            pwT,
            emat,
            potts,
            indptr,
            nbr,
            eid,
            rev,
            labels,
            max_iter,
            tmp,
        )
        sweeps[g] = sw
        converged[g] = conv


@batch_kernel(interpret=True)
def conditional_logits_batch(
    offsets, unary, kind, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels, out
):
    """``out[i, a] = unary[i, a] + sum_j psi_ij(a, labels[j])`` for every node."""
    n_graphs = offsets.shape[0] - 1
    K = unary.shape[1]
    for g in prange(n_graphs):
        tmp = np.empty(K)
        P = _pointers(unary, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels)
        T = data_pointer(tmp)
        for i in range(offsets[g], offsets[g + 1]):
            _conditional_logits(i, kind, K, P, T)
            for a in range(K):
                out[i, a] = tmp[a]


@batch_kernel(interpret=True)
def second_best_batch(
    offsets,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    labels,
    map_score,
    node_out,
    label_out,
    score_out,
):
    """Find the best single-node change of ``labels`` in every graph.

    Writes the node, new label and score (``-inf`` and -1 when no other labeling exists).
    """
    n_graphs = offsets.shape[0] - 1
    K = unary.shape[1]
    for g in prange(n_graphs):
        tmp = np.empty(K)
        P = _pointers(unary, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels)
        T = data_pointer(tmp)
        best = _NEG_INF
        bn = -1
        bl = -1
        for i in range(offsets[g], offsets[g + 1]):
            _conditional_logits(i, kind, K, P, T)
            cur = tmp[labels[i]]
            for a in range(K):
                if a == labels[i] or tmp[a] == _NEG_INF:
                    continue
                d = tmp[a] - cur
                if bn == -1 or d > best:
                    best = d
                    bn = i
                    bl = a
        node_out[g] = bn
        label_out[g] = bl
        score_out[g] = map_score[g] + best if bn >= 0 else _NEG_INF


# --------------------------------------------------------------------------- mean field


@kernel
def _axpy_rows(X, m, q, j, out, finite):
    """``out[a] += sum_b q[j, b] * X[m, b, a]`` (the vector ``q[j]`` times matrix ``X[m]``).

    With ``finite`` (no ``-inf`` in ``X``) four rows are combined per pass over ``out``,
    which shortens the dependency chain through ``out`` (the accumulating twin of the
    chain kernels' max-plus/sum-product vector-matrix products). Otherwise rows with
    ``q[j, b] == 0`` are skipped, so that a forbidden pair whose partner label has
    probability zero contributes 0 rather than ``0 * -inf = NaN``.
    """
    K = out.shape[0]
    if not finite:
        for b in range(K):
            qb = q[j, b]
            if qb != 0.0:
                for a in range(K):
                    out[a] += X[m, b, a] * qb
        return
    b = 0
    while b + 4 <= K:
        x0, x1, x2, x3 = q[j, b], q[j, b + 1], q[j, b + 2], q[j, b + 3]
        for a in range(K):
            out[a] += (x0 * X[m, b, a] + x1 * X[m, b + 1, a]) + (
                x2 * X[m, b + 2, a] + x3 * X[m, b + 3, a]
            )
        b += 4
    while b < K:
        xb = q[j, b]
        for a in range(K):
            out[a] += xb * X[m, b, a]
        b += 1


@kernel
def _mf_field(
    i,
    with_unary,
    shared,
    finite,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    q,
    PF,
    PR,
    field,
):
    """Compute the mean-field field of node ``i`` into ``field``.

    ``unary[i]`` (if ``with_unary``) plus the expected pairwise score under the neighbours'
    ``q``. With ``shared`` (one matrix for every
    edge) the neighbours' projections ``PF = q M^T``, ``PR = q M`` are read instead.
    """
    K = unary.shape[1]
    for a in range(K):
        field[a] = unary[i, a] if with_unary else 0.0
    for k in range(indptr[i], indptr[i + 1]):
        j = nbr[k]
        if kind == KIND_POTTS:
            w = potts[eid[k]]
            if finite:
                for a in range(K):
                    field[a] += w * q[j, a]
            else:  # a -inf weight meets only labels of probability 0 (0 * -inf = NaN)
                for a in range(K):
                    if q[j, a] > 0.0:
                        field[a] += w * q[j, a]
        elif shared:
            if rev[k]:
                for a in range(K):
                    field[a] += PR[j, a]
            else:
                for a in range(K):
                    field[a] += PF[j, a]
        else:
            m = emat[eid[k]]
            if rev[k]:
                _axpy_rows(pw, m, q, j, field, finite)
            else:
                _axpy_rows(pwT, m, q, j, field, finite)


@kernel
def _mf_project(j, finite, pw, pwT, q, PF, PR):
    """Project node ``j``'s distribution through the shared matrix ``M = pw[0]``.

    ``PF[j] = M q_j`` (what a first endpoint sees) and ``PR[j] = M^T q_j``.
    """
    K = q.shape[1]
    for a in range(K):
        PF[j, a] = 0.0
        PR[j, a] = 0.0
    _axpy_rows(pwT, 0, q, j, PF[j], finite)
    _axpy_rows(pw, 0, q, j, PR[j], finite)


@kernel
def _mf_softmax(x):
    """Turn the field ``x`` into ``softmax(x)`` in place; False if every entry is ``-inf``.

    Two labels: ``p_1 = sigmoid(x_1 - x_0)`` (one exponential, of ``-|x_1 - x_0|``);
    more: ``exp(x - max) / sum``. The exponentials are
    :func:`~structcal._numba.exp_nonpositive`, so that the vectorised grid kernels
    (:mod:`structcal.inference._grid`) reproduce these values bit for bit.
    """
    K = x.shape[0]
    if K == 2:
        if x[0] == _NEG_INF and x[1] == _NEG_INF:
            return False
        d = x[1] - x[0]
        e = exp_nonpositive(min(d, -d))
        big = 1.0 / (e + 1.0)
        small = e * big
        x[0] = small if d >= 0.0 else big
        x[1] = big if d >= 0.0 else small
        return True
    mx = x[0]
    for a in range(1, K):
        mx = max(x[a], mx)
    if mx == _NEG_INF:
        return False
    total = 0.0
    for a in range(K):
        e = exp_nonpositive(x[a] - mx)
        x[a] = e
        total = total + e
    inv = 1.0 / total
    for a in range(K):
        x[a] = x[a] * inv
    return True


@kernel
def softmax_rows(unary, q):
    """``q[i] = softmax(unary[i])`` for every row (as :func:`_mf_softmax`); rows of -inf
    are left as NaN for the caller to refuse."""
    n, K = unary.shape
    x = np.empty(K)
    for i in range(n):
        for a in range(K):
            x[a] = unary[i, a]
        ok = _mf_softmax(x)
        for a in range(K):
            q[i, a] = x[a] if ok else np.nan


@kernel
def _mean_field_graph(
    n0,
    n1,
    finite,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    order,
    sequential,
    damping,
    tol,
    max_iter,
    q,
    qnew,
    PF,
    PR,
    field,
):
    """Mean field on nodes ``n0:n1`` from the distributions already in ``q``.

    Sequential: the nodes ``order[n0:n1]`` one at a time, each seeing its neighbours'
    latest ``q``; synchronous: every node from the previous sweep. Returns ``(n_iter,
    delta, status)``: sweeps made, the last sweep's largest change ``|softmax(field) -
    q|`` (the fixed-point residual, before damping) and the status.
    """
    K = unary.shape[1]
    shared = kind == KIND_MATRIX and pw.shape[0] == 1
    if shared:
        for j in range(n0, n1):
            _mf_project(j, finite, pw, pwT, q, PF, PR)
    keep = 1.0 - damping
    delta = 0.0
    it = 0
    while it < max_iter:
        it += 1
        delta = 0.0
        for idx in range(n0, n1):
            i = order[idx]
            _mf_field(
                i,
                True,
                shared,
                finite,
                unary,
                kind,
                pw,
                pwT,
                emat,
                potts,
                indptr,
                nbr,
                eid,
                rev,
                q,
                PF,
                PR,
                field,
            )
            if not _mf_softmax(field):
                return it, np.inf, STATUS_INFEASIBLE
            if sequential:
                for a in range(K):
                    d = abs(field[a] - q[i, a])
                    if d > delta:
                        delta = d
                    q[i, a] = keep * field[a] + damping * q[i, a]
                if shared:
                    _mf_project(i, finite, pw, pwT, q, PF, PR)
            else:
                for a in range(K):
                    qnew[i, a] = field[a]
        if not sequential:
            for i in range(n0, n1):
                for a in range(K):
                    d = abs(qnew[i, a] - q[i, a])
                    if d > delta:
                        delta = d
                    q[i, a] = keep * qnew[i, a] + damping * q[i, a]
            if shared:
                for j in range(n0, n1):
                    _mf_project(j, finite, pw, pwT, q, PF, PR)
        if delta <= tol:
            break
    return it, delta, STATUS_OK


@kernel
def _mf_elbo(
    n0, n1, finite, unary, kind, pw, pwT, emat, potts, indptr, nbr, eid, rev, q, PF, PR, field
):
    """Return the mean-field lower bound on the log-partition at ``q``.

    ``E_q[score] + H(q)`` (terms with ``q = 0`` contribute 0).
    """
    K = unary.shape[1]
    shared = kind == KIND_MATRIX and pw.shape[0] == 1
    if shared:
        for j in range(n0, n1):
            _mf_project(j, finite, pw, pwT, q, PF, PR)
    total = 0.0
    for i in range(n0, n1):
        _mf_field(
            i,
            False,
            shared,
            finite,
            unary,
            kind,
            pw,
            pwT,
            emat,
            potts,
            indptr,
            nbr,
            eid,
            rev,
            q,
            PF,
            PR,
            field,
        )
        for a in range(K):
            qa = q[i, a]
            if qa > 0.0:
                # each edge is seen from both ends: half of the pairwise term each time
                total += qa * (unary[i, a] + 0.5 * field[a] - math.log(qa))
    return total


@batch_kernel(interpret=True)
def mean_field_batch(
    offsets,
    finite,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    order,
    sequential,
    damping,
    tol,
    max_iter,
    q,
    qnew,
    PF,
    PR,
    n_iter,
    delta,
    status,
):
    """Run mean field on every graph (``prange`` over graphs).

    ``q`` holds the initial distributions and receives the result; ``order`` is the
    sequential visiting order of the nodes (a permutation within each graph).
    """
    n_graphs = offsets.shape[0] - 1
    K = unary.shape[1]
    for g in prange(n_graphs):
        field = np.empty(K)
        it, d, st = _mean_field_graph(
            offsets[g],
            offsets[g + 1],
            finite,
            unary,
            kind,
            pw,
            pwT,
            emat,
            potts,
            indptr,
            nbr,
            eid,
            rev,
            order,
            sequential,
            damping,
            tol,
            max_iter,
            q,
            qnew,
            PF,
            PR,
            field,
        )
        n_iter[g] = it
        delta[g] = d
        status[g] = st


@batch_kernel(interpret=True)
def mean_field_elbo_batch(
    offsets, finite, unary, kind, pw, pwT, emat, potts, indptr, nbr, eid, rev, q, PF, PR, elbo
):
    """The mean-field lower bound of every graph at ``q`` (``prange`` over graphs)."""
    n_graphs = offsets.shape[0] - 1
    K = unary.shape[1]
    for g in prange(n_graphs):
        field = np.empty(K)
        elbo[g] = _mf_elbo(
            offsets[g], offsets[g + 1], finite, unary, kind, pw, pwT, emat, potts, indptr, nbr,
            eid, rev, q, PF, PR, field,
        )


@kernel
def greedy_colours(n_nodes, indptr, nbr, colour):
    """Colour the nodes greedily in index order: each takes the smallest colour that no
    lower-numbered neighbour has. Returns the number of colours used.

    On a 4-connected grid (row-major pixels) this is the checkerboard ``(r + c) % 2``; on
    an 8-connected one ``2 (r % 2) + c % 2``.
    """
    n_colours = 0
    used = np.full(max(1, indptr.shape[0]), -1, dtype=np.int64)
    for i in range(n_nodes):
        for k in range(indptr[i], indptr[i + 1]):
            j = nbr[k]
            if j < i:
                used[colour[j]] = i
        c = 0
        while used[c] == i:
            c += 1
        colour[i] = c
        if c + 1 > n_colours:
            n_colours = c + 1
    return n_colours


# --------------------------------------------------------------------------- belief propagation


@kernel
def _msg_matrix(mode, X, EX, cX, m, h, u, s, out):
    """``out[a] = (+)_b X[m, b, a] + h[b]`` for a matrix edge, ``(+)`` = log-sum-exp or max.

    Both loops combine four rows of the matrix per pass over the output (``-inf`` needs
    no guard: the max-plus form never meets ``+inf``, and the sum-product form works
    with the finite scaled exponentials ``EX`` in [0, 1]).
    """
    K = h.shape[0]
    hmax = _NEG_INF
    for b in range(K):
        if h[b] > hmax:
            hmax = h[b]
    if hmax == _NEG_INF:
        for a in range(K):
            out[a] = _NEG_INF
        return
    if mode == MODE_MAX:
        for a in range(K):
            out[a] = _NEG_INF
        b = 0
        while b + 4 <= K:
            h0, h1, h2, h3 = h[b], h[b + 1], h[b + 2], h[b + 3]
            for a in range(K):
                out[a] = max(
                    out[a],
                    max(
                        max(h0 + X[m, b, a], h1 + X[m, b + 1, a]),
                        max(h2 + X[m, b + 2, a], h3 + X[m, b + 3, a]),
                    ),
                )
            b += 4
        while b < K:
            hb = h[b]
            for a in range(K):
                out[a] = max(out[a], hb + X[m, b, a])
            b += 1
        return
    for b in range(K):
        u[b] = math.exp(h[b] - hmax)
    for a in range(K):
        s[a] = 0.0
    b = 0
    while b + 4 <= K:
        u0, u1, u2, u3 = u[b], u[b + 1], u[b + 2], u[b + 3]
        for a in range(K):
            s[a] += (u0 * EX[m, b, a] + u1 * EX[m, b + 1, a]) + (
                u2 * EX[m, b + 2, a] + u3 * EX[m, b + 3, a]
            )
        b += 4
    while b < K:
        ub = u[b]
        for a in range(K):
            s[a] += ub * EX[m, b, a]
        b += 1
    for a in range(K):
        if s[a] > _TINY:
            out[a] = cX[m, a] + hmax + math.log(s[a])
        else:  # underflow (or a genuine zero): exact log-space sum for this entry
            for b in range(K):
                u[b] = X[m, b, a] + h[b]
            out[a] = _logsumexp_row(u)


@kernel
def _msg_potts(mode, w, h, u, out):
    """``out[a] = (+)_b (w [a == b] + h[b])`` for a Potts edge in O(K).

    Sum: with ``u = exp(h - max h)`` and ``S = sum(u)``, ``out[a] = max h + log(S - u[a]
    + e^w u[a])``, written as ``w + log(e^-w (S - u[a]) + u[a])`` when ``w > 0`` so that
    nothing overflows; ``S - u[a]`` is summed directly for the top label (no
    cancellation), and an entry below ``_TINY`` is recomputed exactly in log space.
    """
    K = h.shape[0]
    b1 = 0
    for b in range(1, K):
        if h[b] > h[b1]:
            b1 = b
    h1 = h[b1]
    if h1 == _NEG_INF:
        for a in range(K):
            out[a] = _NEG_INF
        return
    if mode == MODE_MAX:
        h2 = _NEG_INF  # best over b != b1
        for b in range(K):
            if b != b1 and h[b] > h2:
                h2 = h[b]
        for a in range(K):
            other = h2 if a == b1 else h1
            out[a] = max(w + h[a], other)
        return
    rest = 0.0  # sum over b != b1 of u[b]
    for b in range(K):
        u[b] = math.exp(h[b] - h1)
    for b in range(K):
        if b != b1:
            rest += u[b]
    big = w > 0.0
    ew = math.exp(-w) if big else math.exp(w)  # in [0, 1]
    for a in range(K):
        others = rest if a == b1 else max(1.0 + rest - u[a], 1.0)
        v = ew * others + u[a] if big else others + ew * u[a]
        if v > _TINY:
            out[a] = h1 + (w if big else 0.0) + math.log(v)
        else:  # exact: log of sum_{b != a} e^h[b] + e^(w + h[a])
            mx = w + h[a]
            for b in range(K):
                if b != a and h[b] > mx:
                    mx = h[b]
            if mx == _NEG_INF:
                out[a] = _NEG_INF
                continue
            acc = math.exp(w + h[a] - mx)
            for b in range(K):
                if b != a:
                    acc += math.exp(h[b] - mx)
            out[a] = mx + math.log(acc)


@kernel
def _belief(j, unary, indptr, msg, belief):
    """``belief[j] = unary[j] + sum of the messages into j``."""
    K = unary.shape[1]
    for b in range(K):
        belief[j, b] = unary[j, b]
    for k in range(indptr[j], indptr[j + 1]):
        for b in range(K):
            belief[j, b] += msg[k, b]


@kernel
def _cavity(j, kout, unary, indptr, msg, belief, h):
    """Belief of ``j`` without the message arriving through slot ``kout``."""
    K = unary.shape[1]
    for b in range(K):
        mb = msg[kout, b]
        if mb > _NEG_INF:
            h[b] = belief[j, b] - mb
        else:  # cannot subtract -inf: sum the other messages directly
            v = unary[j, b]
            for k in range(indptr[j], indptr[j + 1]):
                if k != kout:
                    v += msg[k, b]
            h[b] = v


@kernel
def _send(
    mode,
    j,
    kout,
    damping,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    eid,
    rev,
    twin,
    EF,
    cF,
    ER,
    cR,
    msg,
    belief,
    h,
    u,
    s,
    new,
):
    """Send the message from node ``j`` through its slot ``kout`` (to that neighbour).

    Writes it into the neighbour's slot ``twin[kout]``. ``belief[j]`` must be current.
    Returns the largest change of a log-message entry.
    """
    K = unary.shape[1]
    _cavity(j, kout, unary, indptr, msg, belief, h)
    kin = twin[kout]
    e = eid[kin]
    if kind == KIND_POTTS:
        _msg_potts(mode, potts[e], h, u, new)
    elif rev[kin]:
        _msg_matrix(mode, pw, ER, cR, emat[e], h, u, s, new)
    else:
        _msg_matrix(mode, pwT, EF, cF, emat[e], h, u, s, new)
    mx = _NEG_INF
    for a in range(K):
        if new[a] > mx:
            mx = new[a]
    change = 0.0
    for a in range(K):
        v = new[a] - mx if mx > _NEG_INF else _NEG_INF
        old = msg[kin, a]
        if damping > 0.0 and v > _NEG_INF and old > _NEG_INF:
            v = (1.0 - damping) * v + damping * old
        if v != old:
            d = abs(v - old)  # inf when exactly one side is -inf
            if d > change:
                change = d
        msg[kin, a] = v
    return change


@kernel
def _bp_graph(
    mode,
    n0,
    n1,
    forest,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    twin,
    EF,
    cF,
    ER,
    cR,
    damping,
    tol,
    max_iter,
    msg,
    belief,
    order,
    parent_slot,
):
    """Run belief propagation on nodes ``n0:n1``.

    Leaves final beliefs in ``belief`` and the
    BFS order in ``order``/``parent_slot``. Returns ``(n_iter, delta)``.
    """
    K = unary.shape[1]
    h = np.empty(K)
    u = np.empty(K)
    s = np.empty(K)
    new = np.empty(K)
    for k in range(indptr[n0], indptr[n1]):
        for a in range(K):
            msg[k, a] = 0.0
    _bfs(n0, n1, indptr, nbr, order, parent_slot)
    it = 0
    delta = 0.0
    if forest:
        # exact two-pass schedule: leaves to roots, then roots to leaves
        for idx in range(n1 - 1, n0 - 1, -1):
            j = order[idx]
            if parent_slot[j] >= 0:
                _belief(j, unary, indptr, msg, belief)
                _send(
                    mode,
                    j,
                    parent_slot[j],
                    0.0,
                    unary,
                    kind,
                    pw,
                    pwT,
                    emat,
                    potts,
                    indptr,
                    eid,
                    rev,
                    twin,
                    EF,
                    cF,
                    ER,
                    cR,
                    msg,
                    belief,
                    h,
                    u,
                    s,
                    new,
                )
        for idx in range(n0, n1):
            j = order[idx]
            _belief(j, unary, indptr, msg, belief)
            for k in range(indptr[j], indptr[j + 1]):
                if k != parent_slot[j]:
                    _send(
                        mode,
                        j,
                        k,
                        0.0,
                        unary,
                        kind,
                        pw,
                        pwT,
                        emat,
                        potts,
                        indptr,
                        eid,
                        rev,
                        twin,
                        EF,
                        cF,
                        ER,
                        cR,
                        msg,
                        belief,
                        h,
                        u,
                        s,
                        new,
                    )
        it = 1
    else:
        while it < max_iter:
            it += 1
            delta = 0.0
            for j in range(n0, n1):
                _belief(j, unary, indptr, msg, belief)
                for k in range(indptr[j], indptr[j + 1]):
                    d = _send(
                        mode,
                        j,
                        k,
                        damping,
                        unary,
                        kind,
                        pw,
                        pwT,
                        emat,
                        potts,
                        indptr,
                        eid,
                        rev,
                        twin,
                        EF,
                        cF,
                        ER,
                        cR,
                        msg,
                        belief,
                        h,
                        u,
                        s,
                        new,
                    )
                    if d > delta:
                        delta = d
            if delta <= tol:
                break
    for j in range(n0, n1):
        _belief(j, unary, indptr, msg, belief)
    return it, delta


@kernel
def _decode(
    n0,
    n1,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    msg,
    order,
    labels,
    decided,
    tmp,
):
    """Decode max-product beliefs in BFS order, conditioning on decoded neighbours.

    Each node takes its best label given the labels already chosen for its neighbours and
    the messages of the
    others. Exact MAP on a forest (it is then the usual backtracking). ``decided`` is
    (n1 - n0,) scratch. Returns False if some node has no feasible label.
    """
    K = unary.shape[1]
    P = _pointers(unary, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels)
    T = data_pointer(tmp)
    for j in range(n1 - n0):
        decided[j] = False
    ok = True
    for idx in range(n0, n1):
        j = order[idx]
        for a in range(K):
            tmp[a] = unary[j, a]
        for k in range(indptr[j], indptr[j + 1]):
            i = nbr[k]
            if decided[i - n0]:
                _add_pair_row(kind, K, P, eid[k], rev[k], labels[i], T)
            else:
                for a in range(K):
                    tmp[a] += msg[k, a]
        best = 0
        for a in range(1, K):
            if tmp[a] > tmp[best]:
                best = a
        if tmp[best] == _NEG_INF:
            ok = False
        labels[j] = best
        decided[j - n0] = True
    return ok


@kernel
def _trws_pass(
    forward,
    n0,
    n1,
    unary,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    twin,
    gamma,
    msg,
    belief,
    labels,
    h,
    u,
    s,
    new,
    tmp,
):
    """Make one pass of TRW-S (sequential tree-reweighted max-product).

    Visits nodes ``n0:n1`` in increasing (``forward``) or decreasing index order. Each node
    updates its belief,
    decodes its label given the already-visited neighbours and sends
    ``max_a gamma_i * belief_i(a) - m_{j->i}(a) + psi(a, b)`` to the neighbours still
    ahead. Returns the largest change of a log-message entry.
    """
    K = unary.shape[1]
    P = _pointers(unary, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels)
    T = data_pointer(tmp)
    change = 0.0
    for step in range(n1 - n0):
        i = n0 + step if forward else n1 - 1 - step
        _belief(i, unary, indptr, msg, belief)
        # decode: neighbours behind take their label, those ahead their message
        for a in range(K):
            tmp[a] = unary[i, a]
        for k in range(indptr[i], indptr[i + 1]):
            j = nbr[k]
            if (j < i) == forward:
                _add_pair_row(kind, K, P, eid[k], rev[k], labels[j], T)
            else:
                for a in range(K):
                    tmp[a] += msg[k, a]
        best = 0
        for a in range(1, K):
            if tmp[a] > tmp[best]:
                best = a
        labels[i] = best
        g = gamma[i - n0]
        for k in range(indptr[i], indptr[i + 1]):
            j = nbr[k]
            if (j > i) != forward:
                continue
            for a in range(K):
                bv = belief[i, a]
                h[a] = _NEG_INF if bv == _NEG_INF else g * bv - msg[k, a]
            kin = twin[k]
            e = eid[kin]
            if kind == KIND_POTTS:
                _msg_potts(MODE_MAX, potts[e], h, u, new)
            elif rev[kin]:
                _msg_matrix(MODE_MAX, pw, pw, pw[0], emat[e], h, u, s, new)
            else:
                _msg_matrix(MODE_MAX, pwT, pwT, pwT[0], emat[e], h, u, s, new)
            mx = _NEG_INF
            for a in range(K):
                if new[a] > mx:
                    mx = new[a]
            for a in range(K):
                v = new[a] - mx if mx > _NEG_INF else _NEG_INF
                old = msg[kin, a]
                if v != old:
                    d = abs(v - old)
                    if d > change:
                        change = d
                msg[kin, a] = v
    return change


@batch_kernel(interpret=True)
def trws_batch(
    offsets,
    edge_offsets,
    unary,
    edges,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    twin,
    tol,
    max_iter,
    patience,
    msg,
    belief,
    labels,
    best_labels,
    n_iter,
    delta,
    scores,
):
    """Run TRW-S on every graph (``prange`` over graphs).

    Forward and backward passes until no message changes by more than ``tol``, or the best
    decoded score has not improved for
    ``patience`` iterations; keeps the best-scoring decoded labeling. ``n_iter[g]`` is
    the number of iterations made (``== max_iter`` when neither rule stopped it).
    """
    n_graphs = offsets.shape[0] - 1
    K = unary.shape[1]
    for g in prange(n_graphs):
        n0 = offsets[g]
        n1 = offsets[g + 1]
        e0 = edge_offsets[g]
        e1 = edge_offsets[g + 1]
        h = np.empty(K)
        u = np.empty(K)
        s = np.empty(K)
        new = np.empty(K)
        tmp = np.empty(K)
        gamma = np.empty(n1 - n0)
        for k in range(indptr[n0], indptr[n1]):
            for a in range(K):
                msg[k, a] = 0.0
        for i in range(n0, n1):
            labels[i] = 0
            best_labels[i] = 0
            # weight 1 / max(#earlier neighbours, #later neighbours) (Kolmogorov 2006)
            lo = 0
            hi = 0
            for k in range(indptr[i], indptr[i + 1]):
                if nbr[k] < i:
                    lo += 1
                else:
                    hi += 1
            c = lo if lo > hi else hi
            gamma[i - n0] = 1.0 / c if c > 0 else 1.0
        best = _NEG_INF
        it = 0
        d = 0.0
        stale = 0
        while it < max_iter:
            it += 1
            d = 0.0
            stale += 1
            for direction in range(2):
                dd = _trws_pass(
                    direction == 0,
                    n0,
                    n1,
                    unary,
                    kind,
                    pw,
                    pwT,
                    emat,
                    potts,
                    indptr,
                    nbr,
                    eid,
                    rev,
                    twin,
                    gamma,
                    msg,
                    belief,
                    labels,
                    h,
                    u,
                    s,
                    new,
                    tmp,
                )
                if dd > d:
                    d = dd
                best, stale = _keep_best(it == 1 and direction == 0, n0, n1, e0, e1, unary,
                                         edges, kind, pw, emat, potts, labels, best_labels, best,
                                         stale)
            if d <= tol or stale >= patience:
                break
        n_iter[g] = it
        delta[g] = d
        scores[g] = best


@kernel
def _keep_best(first, n0, n1, e0, e1, unary, edges, kind, pw, emat, potts, labels, best_labels,
               best, stale):
    """After a TRW-S pass: keep ``labels`` in ``best_labels`` if they score higher than
    ``best`` (always after the first pass); ``stale`` counts iterations without
    improvement. Returns the new ``(best, stale)``."""
    sc = _graph_score(n0, n1, e0, e1, unary, edges, kind, pw, emat, potts, labels)
    if sc > best or first:
        if sc > best:
            stale = 0
        best = sc
        for i in range(n0, n1):
            best_labels[i] = labels[i]
    return best, stale


@kernel
def _edge_beliefs(
    e0, e1, unary, edges, kind, pw, emat, potts, indptr, nbr, msg, belief, emarg, hs, ht
):
    """Write normalised pairwise beliefs of edges ``e0:e1``.

    ``b_e(a, b) ~ exp(psi_e(a, b) + h_s(a) + h_t(b))`` for edges ``e0:e1`` (cavities exclude
    the message along the edge itself).
    """
    K = unary.shape[1]
    for e in range(e0, e1):
        s_node = edges[e, 0]
        t_node = edges[e, 1]
        ks = -1
        for k in range(indptr[s_node], indptr[s_node + 1]):
            if nbr[k] == t_node:
                ks = k
                break
        kt = -1
        for k in range(indptr[t_node], indptr[t_node + 1]):
            if nbr[k] == s_node:
                kt = k
                break
        _cavity(s_node, ks, unary, indptr, msg, belief, hs)
        _cavity(t_node, kt, unary, indptr, msg, belief, ht)
        mx = _NEG_INF
        for a in range(K):
            for b in range(K):
                v = _pair(kind, pw, emat, potts, e, a, b) + hs[a] + ht[b]
                emarg[e, a, b] = v
                if v > mx:
                    mx = v
        total = 0.0
        for a in range(K):
            for b in range(K):
                v = math.exp(emarg[e, a, b] - mx) if mx > _NEG_INF else 0.0
                emarg[e, a, b] = v
                total += v
        if total > 0.0:
            for a in range(K):
                for b in range(K):
                    emarg[e, a, b] /= total


@kernel
def _bethe(n0, n1, e0, e1, unary, edges, kind, pw, emat, potts, indptr, marg, emarg):
    """Return the Bethe approximation of the log-partition from node and edge beliefs.

    Exact on a forest at convergence: ``-F = sum_e <psi_e + theta_s + theta_t>_{b_e} + H(b_e)
    - sum_i (d_i - 1) (<theta_i>_{b_i} + H(b_i))``.
    """
    K = unary.shape[1]
    total = 0.0
    for e in range(e0, e1):
        s_node = edges[e, 0]
        t_node = edges[e, 1]
        for a in range(K):
            for b in range(K):
                p = emarg[e, a, b]
                if p > 0.0:
                    total += p * (
                        _pair(kind, pw, emat, potts, e, a, b)
                        + unary[s_node, a]
                        + unary[t_node, b]
                        - math.log(p)
                    )
    for i in range(n0, n1):
        d = indptr[i + 1] - indptr[i]
        if d == 1:
            continue
        node = 0.0
        for a in range(K):
            p = marg[i, a]
            if p > 0.0:
                node += p * (unary[i, a] - math.log(p))
        total -= (d - 1) * node
    return total


@batch_kernel(interpret=True)
def bp_batch(
    mode,
    offsets,
    edge_offsets,
    forest,
    unary,
    edges,
    kind,
    pw,
    pwT,
    emat,
    potts,
    indptr,
    nbr,
    eid,
    rev,
    twin,
    EF,
    cF,
    ER,
    cR,
    damping,
    tol,
    max_iter,
    do_edge,
    msg,
    belief,
    order,
    parent_slot,
    labels,
    marg,
    emarg,
    n_iter,
    delta,
    status,
    logz,
    scores,
):
    """Belief propagation on every graph (``prange`` over graphs).

    ``MODE_SUM``: node marginals into ``marg`` and, with ``do_edge``, edge beliefs into
    ``emarg`` and the Bethe log-partition into ``logz``. ``MODE_MAX``: decoded labels into
    ``labels`` and their scores into ``scores``.
    """
    n_graphs = offsets.shape[0] - 1
    K = unary.shape[1]
    for g in prange(n_graphs):
        n0 = offsets[g]
        n1 = offsets[g + 1]
        it, d = _bp_graph(
            mode,
            n0,
            n1,
            forest[g],
            unary,
            kind,
            pw,
            pwT,
            emat,
            potts,
            indptr,
            nbr,
            eid,
            rev,
            twin,
            EF,
            cF,
            ER,
            cR,
            damping,
            tol,
            max_iter,
            msg,
            belief,
            order,
            parent_slot,
        )
        n_iter[g] = it
        delta[g] = d
        status[g] = STATUS_OK
        if mode == MODE_SUM:
            for i in range(n0, n1):
                if not _softmax_into(belief[i], marg, i):
                    status[g] = STATUS_INFEASIBLE
            if do_edge and status[g] == STATUS_OK:
                hs = np.empty(K)
                ht = np.empty(K)
                _edge_beliefs(
                    edge_offsets[g],
                    edge_offsets[g + 1],
                    unary,
                    edges,
                    kind,
                    pw,
                    emat,
                    potts,
                    indptr,
                    nbr,
                    msg,
                    belief,
                    emarg,
                    hs,
                    ht,
                )
                logz[g] = _bethe(
                    n0,
                    n1,
                    edge_offsets[g],
                    edge_offsets[g + 1],
                    unary,
                    edges,
                    kind,
                    pw,
                    emat,
                    potts,
                    indptr,
                    marg,
                    emarg,
                )
        else:
            decided = np.empty(n1 - n0, dtype=np.bool_)
            tmp = np.empty(K)
            ok = _decode(
                n0,
                n1,
                unary,
                kind,
                pw,
                pwT,
                emat,
                potts,
                indptr,
                nbr,
                eid,
                rev,
                msg,
                order,
                labels,
                decided,
                tmp,
            )
            if not ok:
                status[g] = STATUS_INFEASIBLE
            scores[g] = _graph_score(
                n0,
                n1,
                edge_offsets[g],
                edge_offsets[g + 1],
                unary,
                edges,
                kind,
                pw,
                emat,
                potts,
                labels,
            )


# --------------------------------------------------------------------------- Gibbs sampling


@kernel
def _uniform(seed, counter):
    """A uniform number in [0, 1) from ``(seed, counter)``: splitmix64's output function.

    Counter-based, so a node's draw at a sweep does not depend on the order in which the
    nodes (or the graphs of a batch, or the threads) are processed.
    """
    z = np.uint64(seed) + np.uint64(counter) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@batch_kernel(interpret=True)
def gibbs_batch(offsets, order, unary, kind, pw, pwT, emat, potts, indptr, nbr, eid, rev,
                labels, seeds, sweep0, n_sweeps, status):
    """Run ``n_sweeps`` Gibbs sweeps on every graph (``prange`` over graphs), in place.

    A sweep visits the nodes in ``order`` (colour class by colour class); each node draws
    its label from its conditional distribution given its neighbours' current labels,
    ``softmax(unary_i + sum_j psi_ij(., labels_j))``, with the uniform
    ``_uniform(seeds[g], sweep * n_g + i - offsets[g])`` of its graph ``g`` of ``n_g``
    nodes (sweeps numbered from ``sweep0``), so a graph's draws do not depend on the other
    graphs of the batch: the first
    label whose cumulative weight exceeds ``u`` times the total. ``status[g]`` is set to
    infeasible if some node had no allowed label (it keeps its label).
    """
    n_graphs = offsets.shape[0] - 1
    n, K = unary.shape
    for g in prange(n_graphs):
        tmp = np.empty(K)
        P = _pointers(unary, pw, pwT, emat, potts, indptr, nbr, eid, rev, labels)
        T = data_pointer(tmp)
        n_g = offsets[g + 1] - offsets[g]
        for s in range(n_sweeps):
            base = (sweep0 + s) * n_g - offsets[g]
            for idx in range(offsets[g], offsets[g + 1]):
                i = order[idx]
                _conditional_logits(i, kind, K, P, T)
                mx = _NEG_INF
                for a in range(K):
                    mx = max(mx, tmp[a])
                if mx == _NEG_INF:
                    status[g] = STATUS_INFEASIBLE
                    continue
                total = 0.0
                last = 0
                for a in range(K):
                    v = exp_nonpositive(tmp[a] - mx)
                    tmp[a] = v
                    total += v
                    if v > 0.0:
                        last = a
                t = _uniform(seeds[g], base + i) * total
                lab = last
                cum = 0.0
                for a in range(K):
                    cum += tmp[a]
                    if cum > t:
                        lab = a
                        break
                labels[i] = lab
