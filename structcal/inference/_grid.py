"""Numba kernels for pixel grids with Potts pairwise potentials (private: inputs are trusted).

A batch built by :meth:`~structcal.potentials.GraphPotentials.from_grid` carries its
:class:`~structcal.potentials.graph.GridLayout`: graph ``g`` is an ``h x w`` image of
row-major pixels (node ``n0 + r * w + c``) whose edges, from ``e0 = edge_offsets[g]``,
are those of :func:`~structcal.potentials.grid_edges`. The kernels here find a pixel's
neighbours and the Potts weights of its edges by index arithmetic
(:mod:`structcal.potentials._grid_kernels`), with no CSR indirection. A pixel's *slots*
list its neighbours in increasing node index, the order of its CSR slots: up, left,
right, down (4-connected); up-left, up, up-right, left, right, down-left, down,
down-right (8-connected). Every sum over neighbours runs in slot order, as in the
general kernels of :mod:`structcal.inference._graph`, which is what makes the results of
the two agree (mean field and TRW-S: bit for bit).

Mean field: colour classes, vectorised over pixels
--------------------------------------------------
The checkerboard schedule updates the pixels one colour class at a time (4-connected:
the two classes of a checkerboard, ``(r + c) % 2``; 8-connected: the four classes ``2 (r
% 2) + c % 2``). Pixels of one class are never neighbours, so all of them can be updated
at once: with the same result as one at a time, i.e. as the general kernel visiting the
nodes in colour order (the greedy colouring of ``_graph.greedy_colours`` gives exactly
these classes on grids). To make a class contiguous, every label plane is stored with
each image row split by column parity: even columns, then odd columns. In that layout
the pixels of one class in one row are consecutive, and so are their neighbours in each
direction, so a row of one class is a loop of 4-lane vector operations
(:mod:`structcal._simd`) with unaligned loads, each neighbour direction one load per label
and one per weight. Rows and row halves are padded so that pixels off the image read
finite padding with weight 0 (an exact no-op: ``x + 0 * q == x``) and the loop needs no
branch; the padding is excluded from the convergence test by a 0/1 mask. The unary planes,
the weight planes (the edges going right and down of each pixel, and the two downward
diagonals; a weight towards an upper or left neighbour is read at that neighbour) and the
mask depend on the potentials only: the caller builds them once per batch
(:func:`grid_planes_batch`) and keeps them. Rows are visited as a wavefront (class 0 of
row ``s``, then class 1 of row ``s - 1``), which reads the same values as whole passes
while a few rows stay in cache.

Message passing: two labels
---------------------------
TRW-S and loopy BP keep the raster order of the general kernels (so their results are
the same), with messages stored per pixel and slot, ``msg[(i * D + d) * 2 + a]``: the
message into pixel ``i`` from its slot-``d`` neighbour, whose own slot towards ``i`` is
``D - 1 - d``. For two labels each message is the pair of its normalised log-values,
computed in closed form, and every data-dependent choice is a select rather than a
branch (on images the labels are unpredictable; mispredicted branches cost more than the
arithmetic).
"""

import math

import numpy as np

from .._numba import batch_kernel, exp_nonpositive, kernel, prange
from .._simd import LANES, data_pointer, vhmax, vload, vsplat, vstore, where_ge
from ..potentials._grid_kernels import n_slots as _n_slots
from ..potentials._grid_kernels import slot_edge as _slot_edge
from ..potentials._grid_kernels import slot_offset as _slot_offset
from ._graph import _bethe, _edge_beliefs, _keep_best

_NEG_INF = -np.inf

STATUS_OK = 0
STATUS_INFEASIBLE = 1


# --------------------------------------------------------------------------- mean field


@kernel
def _mf_layout(h, w):
    """Sizes of the column-parity layout: ``(n_vec, half, row, plane)``.

    A row of ``plane`` holds the even columns at ``1 .. (w + 1) // 2`` of its first
    ``half`` entries and the odd columns likewise in the second half; rows ``0`` and
    ``h + 1`` are padding.
    """
    n_vec = ((w + 1) // 2 + LANES - 1) // LANES
    half = LANES * n_vec + LANES
    return n_vec, half, 2 * half, (h + 2) * 2 * half


@kernel
def plane_sizes(shapes, out):
    """``out[g]``: the entries of one plane of grid ``g`` in the layout of ``_mf_layout``."""
    for g in range(shapes.shape[0]):
        out[g] = _mf_layout(shapes[g, 0], shapes[g, 1])[3]


@kernel
def _mf_position(r, c, half):
    return (r + 1) * 2 * half + (c & 1) * half + (c >> 1) + 1


@kernel
def _mf_offsets(connectivity, half, parity, out):
    """Offsets from a pixel to its slot neighbours in the layout, for column ``parity``."""
    row = 2 * half
    o = half if parity == 0 else -half  # the other half of the same row
    s = -1 if parity == 0 else 0  # its entry left of this pixel's column
    if connectivity == 4:
        out[0] = -row
        out[1] = o + s
        out[2] = o + s + 1
        out[3] = row
    else:
        out[0] = -row + o + s
        out[1] = -row
        out[2] = -row + o + s + 1
        out[3] = o + s
        out[4] = o + s + 1
        out[5] = row + o + s
        out[6] = row
        out[7] = row + o + s + 1


@kernel
def _mf_field(D, U, Q, base, with_field, w0, w1, w2, w3, w4, w5, w6, w7, o0, o1, o2, o3, o4,
              o5, o6, o7):
    """The field ``U + sum_d w_d * Q[neighbour d]`` of 4 pixels for one label (slot order;
    just ``U`` without ``with_field``).

    ``U`` and ``Q`` are data pointers (no reference counting in the hot loop); ``base =
    a * plane + p`` addresses label ``a`` of the pixels at ``p``; ``w0 .. w7`` are the
    slot weights and ``o0 .. o7`` the slot offsets (the first ``D`` are used).
    """
    f = vload(U, base)
    if with_field:
        f = f + w0 * vload(Q, base + o0)
        f = f + w1 * vload(Q, base + o1)
        f = f + w2 * vload(Q, base + o2)
        f = f + w3 * vload(Q, base + o3)
        if D == 8:
            f = f + w4 * vload(Q, base + o4)
            f = f + w5 * vload(Q, base + o5)
            f = f + w6 * vload(Q, base + o6)
            f = f + w7 * vload(Q, base + o7)
    return f


@kernel
def _mf_row(K, D, U, Q, out, W, M, p0, n_vec, offs, plane, F, keep, damping, synchronous,
            with_field):
    """Update one row half of one colour class (``n_vec`` vectors from position ``p0``).

    The field of label ``a`` is ``U + sum_d w_d * Q[neighbour d]`` (slot order; without
    ``with_field`` just ``U``, for the initial ``softmax(unary)``), then the softmax over
    labels (two labels: the sigmoid of the difference), lane by lane: the same
    operations, in the same order, as ``_graph._mf_field`` and ``_graph._mf_softmax``.
    Sequential: ``Q`` is damped towards the update in place and the largest change of a
    real pixel (``M == 1``) is returned; synchronous: the update goes to ``out``.

    ``W`` holds ``D / 2`` weight planes, the edges going right, down and, 8-connected,
    down-right and down-left of each pixel; the weight towards an upper or left
    neighbour is read at that neighbour's position.
    """
    Up, Qp, Wp, Fp = data_pointer(U), data_pointer(Q), data_pointer(W), data_pointer(F)
    o0, o1, o2, o3 = offs[0], offs[1], offs[2], offs[3]
    o4, o5, o6, o7 = (offs[4], offs[5], offs[6], offs[7]) if D == 8 else (0, 0, 0, 0)
    z = vsplat(0.0)
    w4 = w5 = w6 = w7 = z
    dl = z
    for v in range(n_vec):
        p = p0 + LANES * v
        if D == 4:  # planes: right, down
            w0 = vload(Wp, plane + p + o0)
            w1 = vload(Wp, p + o1)
            w2 = vload(Wp, p)
            w3 = vload(Wp, plane + p)
        else:  # planes: right, down, down-right, down-left
            w0 = vload(Wp, 2 * plane + p + o0)
            w1 = vload(Wp, plane + p + o1)
            w2 = vload(Wp, 3 * plane + p + o2)
            w3 = vload(Wp, p + o3)
            w4 = vload(Wp, p)
            w5 = vload(Wp, 3 * plane + p)
            w6 = vload(Wp, plane + p)
            w7 = vload(Wp, 2 * plane + p)
        mx = vsplat(_NEG_INF)
        for a in range(K):
            f = _mf_field(D, Up, Qp, a * plane + p, with_field, w0, w1, w2, w3, w4, w5, w6, w7,
                          o0, o1, o2, o3, o4, o5, o6, o7)
            vstore(Fp, LANES * a, f)
            mx = max(f, mx)
        if K == 2:
            x = vload(Fp, LANES) - vload(Fp, 0)
            e = exp_nonpositive(min(x, x * -1.0))
            big = 1.0 / (e + 1.0)
            small = e * big
            vstore(Fp, 0, where_ge(x, 0.0, small, big))
            vstore(Fp, LANES, where_ge(x, 0.0, big, small))
            inv = vsplat(1.0)
        else:
            total = z
            for a in range(K):
                e = exp_nonpositive(vload(Fp, LANES * a) - mx)
                vstore(Fp, LANES * a, e)
                total = total + e
            inv = 1.0 / total
        m = vload(M, p)
        for a in range(K):
            base = a * plane + p
            val = vload(Fp, LANES * a)
            if K != 2:
                val = val * inv
            if synchronous:
                vstore(out, base, val)
            else:
                old = vload(Qp, base)
                diff = val - old
                dl = max(dl, max(diff, diff * -1.0) * m)
                vstore(Qp, base, val * keep + old * damping)
    return vhmax(dl)


@kernel
def _mf_weights(connectivity, e0, h, w, potts, W, plane, half):
    """Write the weight planes of ``_mf_row`` (zeros where an edge is missing)."""
    eV = e0 + h * (w - 1)
    eD = eV + (h - 1) * w
    eA = eD + (h - 1) * (w - 1)
    for r in range(h):
        for c in range(w):
            p = _mf_position(r, c, half)
            if c + 1 < w:
                W[p] = potts[e0 + r * (w - 1) + c]
            if r + 1 < h:
                W[plane + p] = potts[eV + r * w + c]
            if connectivity == 8 and r + 1 < h:
                if c + 1 < w:  # (r, c) - (r + 1, c + 1)
                    W[2 * plane + p] = potts[eD + r * (w - 1) + c]
                if c > 0:  # (r, c) - (r + 1, c - 1): anti-diagonal edge of (r, c - 1)
                    W[3 * plane + p] = potts[eA + r * (w - 1) + c - 1]


@kernel
def _planes(n0, e0, h, w, connectivity, unary, potts, U, W, M):
    """Write one grid's unary planes ``U``, weight planes ``W`` and mask ``M``.

    Returns the first node whose unary is all ``-inf`` (mean field cannot start), or -1.
    """
    K = unary.shape[1]
    n_vec, half, row, plane = _mf_layout(h, w)
    U[:] = 0.0
    W[:] = 0.0
    M[:] = 0.0
    bad = -1
    for r in range(h):
        i0 = n0 + r * w
        p0 = (r + 1) * row + 1
        for c in range(w):
            M[p0 + (c & 1) * half + (c >> 1)] = 1.0
            mx = _NEG_INF
            for a in range(K):
                mx = max(mx, unary[i0 + c, a])
            if mx == _NEG_INF and bad < 0:
                bad = i0 + c
        for a in range(K):
            for c in range(w):
                U[a * plane + p0 + (c & 1) * half + (c >> 1)] = unary[i0 + c, a]
    _mf_weights(connectivity, e0, h, w, potts, W, plane, half)
    return bad


@batch_kernel
def grid_planes_batch(offsets, edge_offsets, shapes, connectivity, unary, potts, starts, U, W,
                      M, bad):
    """The column-parity layout of every grid's potentials (``prange`` over grids).

    Grid ``g`` occupies ``starts[g]:starts[g + 1]`` of ``M``, ``K`` times that range of
    ``U`` and ``D / 2`` times that of ``W`` (``D`` slots); ``bad[g]`` is its first node
    whose unary is all ``-inf``, or -1. The potentials are fixed, so the caller computes
    this once per batch.
    """
    K = unary.shape[1]
    Dh = _n_slots(connectivity) // 2
    n_graphs = offsets.shape[0] - 1
    for g in prange(n_graphs):
        a, b = starts[g], starts[g + 1]
        bad[g] = _planes(offsets[g], edge_offsets[g], shapes[g, 0], shapes[g, 1], connectivity,
                         unary, potts, U[K * a:K * b], W[Dh * a:Dh * b], M[a:b])


@kernel
def _mean_field_grid(
    n0, h, w, connectivity, U, W, M, checkerboard, damping, tol, max_iter, init, q
):
    """Mean field on one grid (finite Potts weights) from its planes ``U``, ``W``, ``M``.

    Starts from ``softmax(unary)``, or from ``q`` with ``init``. ``checkerboard``: one
    colour class at a time (see the module notes); otherwise synchronous. Returns
    ``(n_iter, delta)``; ``q`` receives the result.
    """
    K = q.shape[1]
    D = _n_slots(connectivity)
    n_vec, half, row, plane = _mf_layout(h, w)
    Q = np.empty(K * plane)
    uniform = 1.0 / K  # what a padding entry's update gives (field 0)
    for a in range(K):
        Q[a * plane:a * plane + row] = uniform
        Q[a * plane + (h + 1) * row:(a + 1) * plane] = uniform
        for r in range(h):
            for par in range(2):
                x = a * plane + (r + 1) * row + par * half
                n_real = (w + 1 - par) // 2
                Q[x] = uniform
                Q[x + 1 + n_real:x + half] = uniform
                if init:
                    for j in range(n_real):
                        Q[x + 1 + j] = q[n0 + r * w + 2 * j + par, a]
    offs = np.empty((2, D), dtype=np.int64)
    _mf_offsets(connectivity, half, 0, offs[0])
    _mf_offsets(connectivity, half, 1, offs[1])
    F = np.empty(LANES * K)
    keep = 1.0 - damping
    if not init:  # softmax(unary), as _graph.softmax_rows
        for r in range(h):
            for par in range(2):
                _mf_row(K, D, U, Q, Q, W, M, (r + 1) * row + par * half + 1, n_vec, offs[par],
                        plane, F, 1.0, 0.0, True, False)
    Qn = Q.copy() if not checkerboard else np.empty(0)
    it = 0
    delta = 0.0
    while it < max_iter:
        it += 1
        delta = 0.0
        # rows are visited as a wavefront, which keeps a few rows in cache and gives the
        # same numbers as whole passes (every pixel sees the same neighbour values)
        if checkerboard and connectivity == 4:
            # class 0 ((r + c) even) of row s, then class 1 of row s - 1: class 1 of row
            # s - 1 reads class 0 of rows s - 2 .. s (updated), class 0 of row s + 1
            # reads class 1 of rows s .. s + 2 (not yet)
            for s in range(h + 1):
                for colour in range(2):
                    r = s - colour
                    if 0 <= r < h:
                        par = (r + colour) & 1
                        dl = _mf_row(K, D, U, Q, Q, W, M, (r + 1) * row + par * half + 1,
                                     n_vec, offs[par], plane, F, keep, damping, False, True)
                        delta = max(delta, dl)
        elif checkerboard:
            # classes 0, 1 (even rows, even / odd columns) of even row s, then classes
            # 2, 3 of odd row s - 1 (they read classes 0, 1 of rows s - 2 and s)
            for s in range(0, h + 1, 2):
                for colour in range(4):
                    r = s if colour < 2 else s - 1
                    if 0 <= r < h:
                        par = colour & 1
                        dl = _mf_row(K, D, U, Q, Q, W, M, (r + 1) * row + par * half + 1,
                                     n_vec, offs[par], plane, F, keep, damping, False, True)
                        delta = max(delta, dl)
        else:
            # row s from the old values, then row s - 1 (no longer read) takes its update
            for s in range(h + 1):
                if s < h:
                    for par in range(2):
                        _mf_row(K, D, U, Q, Qn, W, M, (s + 1) * row + par * half + 1, n_vec,
                                offs[par], plane, F, keep, damping, True, True)
                if s > 0:
                    for a in range(K):
                        for p in range(s * row, (s + 1) * row):
                            x = a * plane + p
                            dl = abs(Qn[x] - Q[x]) * M[p]
                            if dl > delta:
                                delta = dl
                            Q[x] = keep * Qn[x] + damping * Q[x]
        if delta <= tol:
            break
    for r in range(h):
        i0 = n0 + r * w
        p0 = (r + 1) * row + 1
        for a in range(K):
            for c in range(w):
                q[i0 + c, a] = Q[a * plane + p0 + (c & 1) * half + (c >> 1)]
    return it, delta


@batch_kernel
def mean_field_grid_batch(
    offsets, shapes, connectivity, starts, U, W, M, checkerboard, damping, tol, max_iter, init,
    q, n_iter, delta,
):
    """Mean field on every grid of a batch (``prange`` over grids); see ``_mean_field_grid``.

    ``starts``, ``U``, ``W``, ``M`` come from :func:`grid_planes_batch`.
    """
    K = q.shape[1]
    Dh = _n_slots(connectivity) // 2
    n_graphs = offsets.shape[0] - 1
    for g in prange(n_graphs):
        a, b = starts[g], starts[g + 1]
        it, d = _mean_field_grid(
            offsets[g], shapes[g, 0], shapes[g, 1], connectivity, U[K * a:K * b],
            W[Dh * a:Dh * b], M[a:b], checkerboard, damping, tol, max_iter, init, q,
        )
        n_iter[g] = it
        delta[g] = d


# --------------------------------------------------------------------------- message passing


@kernel
def _gamma(connectivity, h, w, r, c):
    """TRW-S weight ``1 / max(#earlier, #later neighbours)`` of pixel ``(r, c)``."""
    D = _n_slots(connectivity)
    lo = 0
    hi = 0
    for d in range(D):
        dr, dc = _slot_offset(connectivity, d)
        if 0 <= r + dr < h and 0 <= c + dc < w:
            if d < D // 2:
                lo += 1
            else:
                hi += 1
    m = lo if lo > hi else hi
    return 1.0 / m if m > 0 else 1.0


@kernel
def slot_weights(connectivity, e0, h, w, potts, ws, noff):
    """Potts weight of every slot of every pixel of one grid (NaN: no neighbour there).

    ``ws[(r * w + c) * D + d]``; ``noff[d]`` receives the index offset of slot ``d``'s
    neighbour (``dr * w + dc``).
    """
    D = _n_slots(connectivity)
    for d in range(D):
        dr, dc = _slot_offset(connectivity, d)
        noff[d] = dr * w + dc
    for r in range(h):
        for c in range(w):
            for d in range(D):
                e = _slot_edge(connectivity, e0, h, w, r, c, d)
                ws[(r * w + c) * D + d] = potts[e] if e >= 0 else np.nan


@kernel
def _trws2_pass(forward, connectivity, n0, h, w, unary, ws, noff, gamma, msg, labels):
    """One TRW-S pass over a two-label grid, in raster order or its reverse.

    ``msg[(i * D + d) * 2 + a]`` is the (normalised log-) message into pixel ``i`` from
    its slot-``d`` neighbour; ``ws``, ``noff`` are those of :func:`slot_weights`. At each
    pixel, the operations of ``_graph._trws_pass`` with ``_graph._msg_potts``
    (``MODE_MAX``) for ``K = 2``, in the same order: the belief is the unary plus the
    messages in slot order; the label maximises the unary, the pairwise scores towards
    the neighbours already visited in this pass and the messages of the others (ties to
    label 0); the messages to the neighbours ahead are ``max_b gamma * belief(b) -
    m_in(b) + w [a == b]``, normalised to a maximum of 0. Every data-dependent choice is
    a select (``where_ge``), not a branch: on images the labels and the larger of two
    messages are unpredictable, and mispredicted branches cost more than the arithmetic.
    Returns the largest change of a message entry.
    """
    D = _n_slots(connectivity)
    half = D // 2
    n = h * w
    change = 0.0
    for step in range(n):
        li = step if forward else n - 1 - step
        i = n0 + li
        b0 = unary[i, 0]
        b1 = unary[i, 1]
        t0 = b0
        t1 = b1
        for d in range(D):
            x = ws[li * D + d]
            if x != x:  # no neighbour
                continue
            k = (li * D + d) * 2
            m0 = msg[k]
            m1 = msg[k + 1]
            b0 += m0
            b1 += m1
            if (d < half) == forward:  # visited in this pass: its label scores x
                lab = float(labels[i + noff[d]])
                t0 = where_ge(lab, 0.5, t0, t0 + x)
                t1 = where_ge(lab, 0.5, t1 + x, t1)
            else:
                t0 += m0
                t1 += m1
        labels[i] = 1 if t1 > t0 else 0
        g = gamma[li]
        for d in range(D):
            if (d >= half) != forward:
                continue
            x = ws[li * D + d]
            if x != x:
                continue
            k = (li * D + d) * 2
            h0 = _NEG_INF if b0 == _NEG_INF else g * b0 - msg[k]
            h1 = _NEG_INF if b1 == _NEG_INF else g * b1 - msg[k + 1]
            new0 = where_ge(x + h0, h1, x + h0, h1)  # max(x + h0, h1)
            new1 = where_ge(x + h1, h0, x + h1, h0)
            mx = where_ge(new1, new0, new1, new0)
            v0 = new0 - mx if mx > _NEG_INF else _NEG_INF
            v1 = new1 - mx if mx > _NEG_INF else _NEG_INF
            kin = ((li + noff[d]) * D + D - 1 - d) * 2
            dd = abs(v0 - msg[kin])  # NaN when both are -inf: then no change
            change = where_ge(dd, change, dd, change)
            dd = abs(v1 - msg[kin + 1])
            change = where_ge(dd, change, dd, change)
            msg[kin] = v0
            msg[kin + 1] = v1
    return change


@batch_kernel
def trws2_grid_batch(offsets, edge_offsets, shapes, connectivity, unary, edges, kind, pw, emat,
                     potts, tol, max_iter, patience, labels, best_labels, n_iter, delta, scores):
    """TRW-S on every two-label grid (``prange`` over grids): ``_graph.trws_batch``, with
    the passes of :func:`_trws2_pass` (the same numbers)."""
    n_graphs = offsets.shape[0] - 1
    D = _n_slots(connectivity)
    for g in prange(n_graphs):
        n0 = offsets[g]
        n1 = offsets[g + 1]
        e0 = edge_offsets[g]
        e1 = edge_offsets[g + 1]
        h = shapes[g, 0]
        w = shapes[g, 1]
        msg = np.zeros((n1 - n0) * D * 2)
        ws = np.empty((n1 - n0) * D)
        noff = np.empty(D, dtype=np.int64)
        slot_weights(connectivity, e0, h, w, potts, ws, noff)
        gamma = np.empty(n1 - n0)
        for r in range(h):
            for c in range(w):
                gamma[r * w + c] = _gamma(connectivity, h, w, r, c)
        for i in range(n0, n1):
            labels[i] = 0
            best_labels[i] = 0
        best = _NEG_INF
        it = 0
        d = 0.0
        stale = 0
        while it < max_iter:
            it += 1
            d = 0.0
            stale += 1
            for direction in range(2):
                dd = _trws2_pass(direction == 0, connectivity, n0, h, w, unary, ws, noff,
                                 gamma, msg, labels)
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
def _bp2_message(x, h0, h1):
    """Normalised log-message ``(m_0, m_1)`` of a Potts edge of weight ``x`` (sum-product).

    ``m_a = log(e^(h_a + x) + e^(h_{1-a}))`` from the sender's cavity ``h``, shifted to a
    maximum of 0; its difference ``m_1 - m_0 = log(1 + e^(D + x)) - log(e^x + e^D)``
    with ``D = h_1 - h_0`` is evaluated without overflow as ``max(D + x, 0) - max(x, D)
    + log((1 + e^-|D + x|) / (1 + e^-|x - D|))``. Both ``-inf`` (the sender has no
    allowed label): both ``-inf``, as in ``_graph._msg_potts``.
    """
    if h0 == _NEG_INF and h1 == _NEG_INF:
        return _NEG_INF, _NEG_INF
    if h0 == _NEG_INF:
        diff = x
    elif h1 == _NEG_INF:
        diff = -x
    else:
        dh = h1 - h0
        s = dh + x
        t = x - dh
        diff = (max(s, 0.0) - max(x, dh)) + math.log(
            (1.0 + exp_nonpositive(-abs(s))) / (1.0 + exp_nonpositive(-abs(t)))
        )
    return -max(diff, 0.0), min(diff, 0.0)


@kernel
def _bp2_belief(D, i, li, U, WS, MSG):
    """Belief ``(b_0, b_1)`` of pixel ``i`` (local ``li``): its unary plus the messages of
    its existing slots, in slot order (pointers ``U``, ``WS``, ``MSG`` to the unary, the
    slot weights and the messages)."""
    b0 = U[2 * i]
    b1 = U[2 * i + 1]
    for d in range(D):
        if WS[li * D + d] == WS[li * D + d]:
            b0 += MSG[(li * D + d) * 2]
            b1 += MSG[(li * D + d) * 2 + 1]
    return b0, b1


@kernel
def _bp2_sweep(connectivity, n0, h, w, unary, ws, noff, damping, msg):
    """One sweep of loopy sum-product BP on a two-label grid, in raster order.

    As ``_graph._bp_graph``'s loopy schedule: each pixel in turn takes its belief (unary
    plus messages in slot order) and sends every neighbour the message of its cavity
    (belief minus that neighbour's message), damped in log space as
    ``(1 - damping) * new + damping * old``. Returns the largest change of a message entry.
    """
    D = _n_slots(connectivity)
    keep = 1.0 - damping
    change = 0.0
    U, WS, MSG = data_pointer(unary), data_pointer(ws), data_pointer(msg)
    for li in range(h * w):
        i = n0 + li
        b0, b1 = _bp2_belief(D, i, li, U, WS, MSG)
        for d in range(D):
            x = ws[li * D + d]
            if x != x:
                continue
            k = (li * D + d) * 2
            m0 = msg[k]
            m1 = msg[k + 1]
            h0 = b0 - m0 if m0 > _NEG_INF else _bp2_cavity(connectivity, unary, ws, msg, i, li,
                                                           d, 0)
            h1 = b1 - m1 if m1 > _NEG_INF else _bp2_cavity(connectivity, unary, ws, msg, i, li,
                                                           d, 1)
            v0, v1 = _bp2_message(x, h0, h1)
            kin = ((li + noff[d]) * D + D - 1 - d) * 2
            old = msg[kin]
            if damping > 0.0 and v0 > _NEG_INF and old > _NEG_INF:
                v0 = keep * v0 + damping * old
            dd = abs(v0 - old)  # NaN when both are -inf: then no change
            change = where_ge(dd, change, dd, change)
            old = msg[kin + 1]
            if damping > 0.0 and v1 > _NEG_INF and old > _NEG_INF:
                v1 = keep * v1 + damping * old
            dd = abs(v1 - old)
            change = where_ge(dd, change, dd, change)
            msg[kin] = v0
            msg[kin + 1] = v1
    return change


@kernel
def _bp2_cavity(connectivity, unary, ws, msg, i, li, dout, a):
    """Label ``a`` of pixel ``i``'s belief without the message from slot ``dout``, summed
    directly (for a ``-inf`` message, which cannot be subtracted; ``_graph._cavity``)."""
    D = _n_slots(connectivity)
    v = unary[i, a]
    for d in range(D):
        if d != dout and ws[li * D + d] == ws[li * D + d]:
            v += msg[(li * D + d) * 2 + a]
    return v


@batch_kernel
def bp2_grid_batch(offsets, edge_offsets, shapes, connectivity, unary, edges, kind, pw, emat,
                   potts, indptr, nbr, damping, tol, max_iter, do_edge, marg, emarg, n_iter,
                   delta, status, logz, belief, cmsg):
    """Loopy sum-product BP on every two-label grid (``prange`` over grids).

    The schedule, damping, stopping rule and outputs of ``_graph.bp_batch`` with
    ``MODE_SUM`` on a graph with cycles: node marginals into ``marg`` and, with
    ``do_edge``, edge beliefs into ``emarg`` and the Bethe log-partition into ``logz``
    (by ``_graph._edge_beliefs`` and ``_graph._bethe`` on the beliefs ``belief``
    (n_nodes, 2) and the messages laid out in CSR slots, ``cmsg`` (2 n_edges, 2)).
    """
    n_graphs = offsets.shape[0] - 1
    D = _n_slots(connectivity)
    for g in prange(n_graphs):
        n0 = offsets[g]
        n1 = offsets[g + 1]
        h = shapes[g, 0]
        w = shapes[g, 1]
        n = n1 - n0
        msg = np.zeros(n * D * 2)
        ws = np.empty(n * D)
        noff = np.empty(D, dtype=np.int64)
        slot_weights(connectivity, edge_offsets[g], h, w, potts, ws, noff)
        it = 0
        d = 0.0
        while it < max_iter:
            it += 1
            d = _bp2_sweep(connectivity, n0, h, w, unary, ws, noff, damping, msg)
            if d <= tol:
                break
        n_iter[g] = it
        delta[g] = d
        status[g] = STATUS_OK
        U, WS, MSG = data_pointer(unary), data_pointer(ws), data_pointer(msg)
        for li in range(n):
            i = n0 + li
            b0, b1 = _bp2_belief(D, i, li, U, WS, MSG)
            mx = max(b0, b1)
            if mx == _NEG_INF:
                status[g] = STATUS_INFEASIBLE
                continue
            e0 = math.exp(b0 - mx)
            e1 = math.exp(b1 - mx)
            inv = 1.0 / (e0 + e1)
            marg[i, 0] = e0 * inv
            marg[i, 1] = e1 * inv
            if do_edge:
                belief[i, 0] = b0
                belief[i, 1] = b1
        if do_edge and status[g] == STATUS_OK:
            for li in range(n):
                k = indptr[n0 + li]
                for dd in range(D):
                    if ws[li * D + dd] == ws[li * D + dd]:
                        cmsg[k, 0] = msg[(li * D + dd) * 2]
                        cmsg[k, 1] = msg[(li * D + dd) * 2 + 1]
                        k += 1
            hs = np.empty(2)
            ht = np.empty(2)
            _edge_beliefs(edge_offsets[g], edge_offsets[g + 1], unary, edges, kind, pw, emat,
                          potts, indptr, nbr, cmsg, belief, emarg, hs, ht)
            logz[g] = _bethe(n0, n1, edge_offsets[g], edge_offsets[g + 1], unary, edges, kind,
                             pw, emat, potts, indptr, marg, emarg)
