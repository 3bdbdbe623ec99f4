"""Numba kernels for batches of linear chains (private: inputs are trusted).

Layout shared by every kernel
-----------------------------
``unary`` (n_tokens, K)
    Log-potentials, chains laid end to end; chain ``c`` is rows
    ``offsets[c]:offsets[c + 1]``.
``pw`` (n_mats, K, K) and ``pw_stride``
    Pairwise log-potentials. The matrix between tokens ``t`` and ``t + 1`` of chain
    ``c`` is ``pw[(edge_offsets[c] + t) * pw_stride]``: ``pw_stride`` is 0 when one matrix
    is shared by every edge, 1 when there is one matrix per edge.
``E``, ``ET``, ``colmax``
    The scaled exponentials used by the fast sum-product pass:
    ``E[m, i, j] = exp(pw[m, i, j] - colmax[m, j])`` (``ET`` is its transpose), so every
    entry of ``E`` is in [0, 1] and each column has a 1 unless it is all ``-inf``. Their
    rows are padded with zeros to ``Kp = padded_width(K)`` columns (a multiple of 32), and
    so are the sum-product scratch rows (forward messages, unary exponentials, backward
    messages); outputs (marginals) are never padded. A shared matrix is exponentiated once
    per batch; per-edge matrices are exponentiated chain by chain into per-thread scratch
    (:func:`_fill_scaled_exponentials`), so memory does not grow with the batch.

Numerics
--------
Max-product (Viterbi, k-best) runs in log space and is exact for any finite or ``-inf``
potentials. Sum-product first runs in probability space with a per-step rescaling: one
exp per unary entry, and a (K x K) multiply-add per edge with the precomputed ``E``; it
is about an order of magnitude cheaper than log space because it avoids K*K exps per
edge. Each chain's result is *certified*: either the scaled pass is provably exact to
float64 rounding, or the chain is recomputed by the exact log-space pass
(``_forward_backward_log``). The test is decided before any term can be lost, from the
potentials and the pass's own (exact-to-rounding) values, never by checking an identity
afterwards, because an underflowed term leaves no trace: a state dropped at step t can
be made dominant by a later transition, and every identity still holds for the wrong
distribution.

The argument. Every number in the forward pass is a sum of nonnegative products, so in
floating point each is exact up to a *relative* error of a few ulps per operation, as
long as no positive term underflows (there is no cancellation and no overflow: every
entry of ``E`` and of the shifted unary exponentials ``u`` is in [0, 1], and the forward
row ``a`` is normalised to sum 1). An entry is exactly 0 only where its log-potential is
``-inf``, so then "computed 0" means "truly 0" too, and the result (log-partition, and
the forward rows) is exact to rounding. Underflow is ruled out step by step. A positive
term of step t is ``a[t-1, i] E[i, j] u[t, j] = a[t-1, i] exp(pw[i, j] + unary[t, j] -
shift_t)``; with ``lo_t`` = (min over finite entries of ``unary[t] + colmax``) - shift_t -
(largest spread max - min of the finite entries of a column of ``pw``), every positive
``E[i, j] u[t, j]`` is at least ``exp(lo_t)``. So if ``amin_{t-1} exp(lo_t) >=
exp(_LOG_FLOOR)`` (-680 nats, ~5e-296), with ``amin_{t-1}`` the smallest positive entry
of the normalised row ``a[t-1]`` as computed, no term of step t, nor its normalised value
(divided by at most K), comes near the smallest normal double (2.2e-308), the inductive
hypothesis carries to step t, and the exps of ``E`` and ``u`` were not flushed either.
At t = 0 the terms are ``u[0]`` itself (``amin = 1``). A chain failing the test at any
step goes to log space; if a row sums to exactly 0 under the test the chain is certified
infeasible. The test costs a minimum along rows already being read; because
``amin_{t-1}`` is measured rather than bounded, it follows ``-inf`` patterns that
reach a state only through unlikely ones, and it is not so strict that dense models
lose the fast pass (the threshold compounds over two steps at most: the largest entry of
``a[t-1]`` is at least 1/K). Without ``-inf`` entries, a chain whose every step spans
less than about 330 nats (unary plus pairwise, finite entries) never falls back;
magnitudes of 1e3-1e4 nearly always do.

The backward pass reuses ``E``, ``u`` and the normalisers. Given a certified forward
pass, an underflow in it costs at most an absolute ~1e-300 per term in a marginal (the
forward row it meets sums to 1), and an overflow yields ``inf``, which the products
spread to every entry of the first marginal row (``inf * 0`` is NaN): the check that
this row sums to 1 sends such a chain to log space. ``log_probability`` and
``assignment_probability`` subtract two certified log-partitions.

Vectorisation
-------------
Each step of a recursion is one vector-matrix product of the max-plus (Viterbi) or
sum-product (forward, backward) semiring, fused with the element-wise factor of the next
position (its unary potentials or exponentials). It keeps eight 4-lane accumulators
(:mod:`structcal._simd`) in registers while the rows of the (K x K) matrix stream past;
the per-token row operations (shifted exponentials, sums, scaling) are 4-lane too. Viterbi
runs :func:`_vecmat` on the user's unpadded potentials (vectors past column K are clamped
to start at K - 4); the sum-product passes run :func:`_vecmat_padded` on the padded
exponentials, where every load is at a fixed offset from its row. The helpers take raw
data pointers and flat offsets, so calling them costs no reference counting.
``benchmarks/bench_chain_step.py`` times one step (K = 26: about 60 ns max-plus, 37 ns
sum-product on one core of the development machine).

Status codes written by the drivers: 0 = ok, 1 = infeasible (every labeling is ``-inf``),
2 = ok after the log-space fallback, 3 = the scaled pass was not certified and the chain
awaits the log-space pass. The sum-product drivers leave such chains (queries) pending
rather than running the log-space pass themselves; the caller runs
:func:`log_space_batch` (:func:`constrained_log_space_batch`) on just those. The
fallback is rare (magnitudes of hundreds of nats), so a process that never meets it never
compiles it: a few seconds less on a first run.
"""

import math

import numpy as np

from .._numba import batch_kernel, exp_nonpositive, kernel, prange
from .._simd import (
    LANES, data_pointer, fma, semiring_step, semiring_times, vhmax, vhmin, vload, vsplat, vstore,
    vsum, where_ge,
)
from ._chain_numpy import STATUS_FALLBACK, STATUS_INFEASIBLE, STATUS_OK, STATUS_PENDING  # noqa: F401

_NEG_INF = -np.inf
_INF = np.inf
_FINITE_MIN = -np.finfo(np.float64).max  # x >= _FINITE_MIN: x is not -inf
_SMALLEST = 5e-324  # the smallest positive double: x >= _SMALLEST means x > 0
#: The scaled pass is trusted for a chain only if every term it forms, relative to its
#: step's scale, is provably at least exp(_LOG_FLOOR) ~ 5e-296: far above the smallest
#: normal double (2.2e-308) even after division by a normaliser up to K < 10^12.
_LOG_FLOOR = -680.0
#: A step with ``lo_t >= _LO_SURE`` after a forward row whose smallest positive entry is at
#: least ``_AMIN_SURE`` is certified without evaluating ``exp(_LOG_FLOOR - lo_t)``:
#: exp(-380) * exp(-300) = exp(_LOG_FLOOR).
_LO_SURE = -300.0
_AMIN_SURE = math.exp(_LOG_FLOOR - _LO_SURE)


# --------------------------------------------------------------------------- helpers


@kernel
def _logsumexp_row(x):
    """log(sum(exp(x))) of a 1-d array, ``-inf`` when every entry is ``-inf``."""
    m = _NEG_INF
    for v in x:
        if v > m:
            m = v
    if m == _NEG_INF:
        return _NEG_INF
    s = 0.0
    for v in x:
        s += exp_nonpositive(v - m)
    return m + math.log(s)


def padded_width(K):
    """Row width of the scaled exponentials and of the sum-product scratch rows: ``K``
    rounded up to a multiple of 32 (one block of :func:`_vecmat_padded`), or ``K`` itself
    below 4 (the scalar path)."""
    return K if K < LANES else -(-K // (8 * LANES)) * (8 * LANES)


def scaled_exponentials(pw, width=None):
    """Return ``(E, ET, colmax, spread)`` for pairwise log-potentials ``pw`` of shape (n, K, K).

    ``E[m, i, j] = exp(pw[m, i, j] - colmax[m, j])`` and ``ET[m, j, i] = E[m, i, j]``,
    both of shape (n, K, width) with zeros in columns ``K:width`` (``width`` defaults
    to K; the sum-product chain kernels use :func:`padded_width`). ``E`` and ``ET``
    start on a 64-byte boundary, so with a padded width no 4-lane load of their rows
    straddles two cache lines. ``spread[m]`` is the largest spread ``max - min`` of the
    finite entries of a column of ``pw[m]`` (0 if none), so every positive entry of
    ``E[m]`` is at least ``exp(-spread[m])`` (see Numerics in the module docstring).
    """
    n, K = pw.shape[0], pw.shape[1]
    width = K if width is None else int(width)
    if width < K:
        raise ValueError(f"width must be at least n_states={K}; got {width}")
    E = zeros_matrices(n, K, width)
    ET = zeros_matrices(n, K, width)
    colmax = np.empty((n, K))
    spread = np.empty(n)
    _fill_scaled_exponentials(pw, 0, n, E, ET, colmax, spread, 0)
    return E, ET, colmax, spread


@kernel
def zeros_rows(n, width):
    """A zeroed (n, width) float64 array starting on a 64-byte boundary (the scratch rows
    of the sum-product passes; with a padded width every row is aligned too)."""
    buf = np.zeros(n * width + 8)
    start = ((64 - buf.ctypes.data % 64) % 64) // 8
    return buf[start : start + n * width].reshape((n, width))


@kernel
def zeros_matrices(n, K, width):
    """Return a zeroed (n, K, width) float64 array starting on a 64-byte boundary.

    It holds one chain's scaled exponentials of per-edge potentials.
    """
    return zeros_rows(n * K, width).reshape((n, K, width))


@kernel
def _fill_scaled_exponentials(pw, m0, n, E, ET, colmax, spread, q0):
    """Write ``E[q0 + q]``, ``ET[q0 + q]``, ``colmax[q0 + q]`` and ``spread[q0 + q]`` from
    ``pw[m0 + q]`` for ``q < n``.

    See :func:`scaled_exponentials`; the padding columns ``K:Kp`` of ``E`` and ``ET`` are
    not touched. Column maxima, minima and exponentials go 4 lanes at a time along the
    rows of ``pw`` (the last vector of a row is clamped to end at column K, rewriting a
    few entries with the same values); the transpose is a scalar pass.
    """
    K = pw.shape[1]
    Kp = E.shape[2]
    P, Ep, ETp, Cp = data_pointer(pw), data_pointer(E), data_pointer(ET), data_pointer(colmax)
    for qq in range(n):
        src = (m0 + qq) * K * K
        q = q0 + qq
        c0 = q * K
        sp = 0.0
        if K < LANES:
            for j in range(K):
                c = _NEG_INF
                lo = _INF
                for i in range(K):
                    x = P[src + i * K + j]
                    c = max(c, x)
                    if x != _NEG_INF:
                        lo = min(lo, x)
                Cp[c0 + j] = c
                if c != _NEG_INF:
                    sp = max(sp, c - lo)
        else:
            for jb in range(0, K, LANES):
                j = min(jb, K - LANES)
                acc = vsplat(_NEG_INF)
                low = vsplat(_INF)
                for i in range(K):
                    x = vload(P, src + i * K + j)
                    acc = max(acc, x)
                    low = min(low, where_ge(x, _FINITE_MIN, x, _INF))
                vstore(Cp, c0 + j, acc)
                sp = max(sp, vhmax(where_ge(acc, _FINITE_MIN, acc - low, 0.0)))
        spread[q] = sp
        for j in range(K):
            if Cp[c0 + j] == _NEG_INF:
                Cp[c0 + j] = 0.0  # column forbidden everywhere: E[:, j] = 0
        for i in range(K):
            r = src + i * K
            o = (q * K + i) * Kp
            if K < LANES:
                for j in range(K):
                    Ep[o + j] = exp_nonpositive(P[r + j] - Cp[c0 + j])
            else:
                for jb in range(0, K, LANES):
                    j = min(jb, K - LANES)
                    vstore(Ep, o + j, exp_nonpositive(vload(P, r + j) - vload(Cp, c0 + j)))
        for i in range(K):
            for j in range(K):
                ETp[(q * K + j) * Kp + i] = Ep[(q * K + i) * Kp + j]


# Helpers for the hot loops. They take raw pointers (``data_pointer``) and flat element
# offsets rather than arrays and row numbers: an array passed to an inlined function is
# reference-counted on every call, a pointer is not. ``X, x0`` names the K values
# ``X[x0 : x0 + K]``; for a (n, K) array, row r starts at ``r * K``.


@kernel
def _row_sum(X, x0, K):
    """``sum(X[x0 : x0 + K])``: four lanes of partial sums, then the last ``K % 4``."""
    acc = vsplat(0.0)
    j = 0
    while j + LANES <= K:
        acc = acc + vload(X, x0 + j)
        j += LANES
    total = vsum(acc)
    while j < K:
        total += X[x0 + j]
        j += 1
    return total


@kernel
def _row_sum_minpos(X, x0, K):
    """``(sum(x), min of the positive entries of x)`` for ``x = X[x0 : x0 + K]`` (``inf``
    when none is positive), four lanes at a time then the last ``K % 4``."""
    acc = vsplat(0.0)
    low = vsplat(_INF)
    j = 0
    while j + LANES <= K:
        x = vload(X, x0 + j)
        acc = acc + x
        low = min(low, where_ge(x, _SMALLEST, x, _INF))
        j += LANES
    total = vsum(acc)
    mn = vhmin(low)
    while j < K:
        x = X[x0 + j]
        total += x
        if x > 0.0:
            mn = min(mn, x)
        j += 1
    return total, mn


@kernel
def _row_mul(X, x0, Y, y0, c, O, o0, K):
    """``O[o0:o0+K] = X[x0:x0+K] * Y[y0:y0+K] * c`` (the rows may coincide)."""
    j = 0
    while j + LANES <= K:
        vstore(O, o0 + j, vload(X, x0 + j) * vload(Y, y0 + j) * c)
        j += LANES
    while j < K:
        O[o0 + j] = X[x0 + j] * Y[y0 + j] * c
        j += 1


@kernel
def _row_mul_prob(X, x0, Y, y0, c, O, o0, K):
    """:func:`_row_mul` for probabilities: each product is clamped to at most 1 (a
    marginal of a near-certain label can round past 1 by an ulp)."""
    one = vsplat(1.0)
    j = 0
    while j + LANES <= K:
        vstore(O, o0 + j, min(vload(X, x0 + j) * vload(Y, y0 + j) * c, one))
        j += LANES
    while j < K:
        O[o0 + j] = min(X[x0 + j] * Y[y0 + j] * c, 1.0)
        j += 1


@kernel
def _row_scale(X, x0, c, O, o0, K):
    """``O[o0:o0+K] = X[x0:x0+K] * c`` (the rows may coincide)."""
    j = 0
    while j + LANES <= K:
        vstore(O, o0 + j, vload(X, x0 + j) * c)
        j += LANES
    while j < K:
        O[o0 + j] = X[x0 + j] * c
        j += 1


@kernel
def _exp_shifted_row(A, a0, B, b0, use_b, U, u0, K):
    """``U[u0:u0+K] = exp(x - max(x))`` for ``x = A[a0:a0+K] + B[b0:b0+K]`` (``x`` is the
    ``A`` row alone unless ``use_b``).

    Returns ``(max(x), min(x) - max(x))``, the minimum over the finite entries (so every
    positive entry of ``U`` is at least the exponential of the second value); when
    ``max(x)`` is ``-inf`` (every entry forbidden), ``(-inf, 0)`` and ``U`` is left
    unwritten.
    """
    if K < LANES:
        shift = _NEG_INF
        low = _INF
        for j in range(K):
            x = A[a0 + j] + B[b0 + j] if use_b else A[a0 + j]
            shift = max(shift, x)
            if x != _NEG_INF:
                low = min(low, x)
        if shift == _NEG_INF:
            return shift, 0.0
        for j in range(K):
            x = A[a0 + j] + B[b0 + j] if use_b else A[a0 + j]
            U[u0 + j] = exp_nonpositive(x - shift)
        return shift, low - shift
    # vectors at 0, 4, 8, ... and a last one clamped to K - 4, overlapping the one before
    # it: harmless for a maximum, and the exponentials are written from A and B, not in
    # place, so overlapping columns get the same values twice
    acc = vsplat(_NEG_INF)
    lacc = vsplat(_INF)
    for jb in range(0, K, LANES):
        j = min(jb, K - LANES)
        x = vload(A, a0 + j)
        if use_b:
            x = x + vload(B, b0 + j)
        acc = max(acc, x)
        lacc = min(lacc, where_ge(x, _FINITE_MIN, x, _INF))
    shift = vhmax(acc)
    if shift == _NEG_INF:
        return shift, 0.0
    for jb in range(0, K, LANES):
        j = min(jb, K - LANES)
        x = vload(A, a0 + j)
        if use_b:
            x = x + vload(B, b0 + j)
        vstore(U, u0 + j, exp_nonpositive(x - shift))
    return shift, vhmin(lacc) - shift


@kernel(switches=("maxplus", "scale"))
def _store_scaled(acc, S, s0, O, o0, c, maxplus, scale):
    """``O[o0+c : o0+c+4] = acc (.) S[s0+c : s0+c+4]`` (``acc`` alone unless ``scale``)."""
    if scale:
        acc = semiring_times(acc, vload(S, s0 + c), maxplus)
    vstore(O, o0 + c, acc)


@kernel(switches=("maxplus", "scale"))
def _vecmat_block(X, x0, M, m0, S, s0, O, o0, K, jb, maxplus, scale):
    """Columns ``jb .. jb + 31`` of :func:`_vecmat`, each vector start clamped to ``K - 4``:
    eight vector accumulators, one pass over the rows of ``M``. Eight independent chains
    cover the latency of a fused multiply-add (4 cycles, 2 per cycle on current x86
    cores)."""
    c0 = min(jb, K - LANES)
    c1 = min(jb + LANES, K - LANES)
    c2 = min(jb + 2 * LANES, K - LANES)
    c3 = min(jb + 3 * LANES, K - LANES)
    c4 = min(jb + 4 * LANES, K - LANES)
    c5 = min(jb + 5 * LANES, K - LANES)
    c6 = min(jb + 6 * LANES, K - LANES)
    c7 = min(jb + 7 * LANES, K - LANES)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vsplat(_NEG_INF if maxplus else 0.0)
    for i in range(K):
        r = m0 + i * K
        x = vsplat(X[x0 + i])
        a0 = semiring_step(a0, x, vload(M, r + c0), maxplus)
        a1 = semiring_step(a1, x, vload(M, r + c1), maxplus)
        a2 = semiring_step(a2, x, vload(M, r + c2), maxplus)
        a3 = semiring_step(a3, x, vload(M, r + c3), maxplus)
        a4 = semiring_step(a4, x, vload(M, r + c4), maxplus)
        a5 = semiring_step(a5, x, vload(M, r + c5), maxplus)
        a6 = semiring_step(a6, x, vload(M, r + c6), maxplus)
        a7 = semiring_step(a7, x, vload(M, r + c7), maxplus)
    _store_scaled(a0, S, s0, O, o0, c0, maxplus, scale)
    _store_scaled(a1, S, s0, O, o0, c1, maxplus, scale)
    _store_scaled(a2, S, s0, O, o0, c2, maxplus, scale)
    _store_scaled(a3, S, s0, O, o0, c3, maxplus, scale)
    _store_scaled(a4, S, s0, O, o0, c4, maxplus, scale)
    _store_scaled(a5, S, s0, O, o0, c5, maxplus, scale)
    _store_scaled(a6, S, s0, O, o0, c6, maxplus, scale)
    _store_scaled(a7, S, s0, O, o0, c7, maxplus, scale)


@kernel(switches=("maxplus", "scale"))
def _vecmat(X, x0, M, m0, S, s0, O, o0, K, maxplus, scale):
    """One step of a chain recursion in the max-plus (``maxplus``) or sum-product semiring:
    ``o = (x (x) M) (.) s`` for the K-vectors ``x = X[x0:x0+K]``, ``s = S[s0:s0+K]``,
    ``o = O[o0:o0+K]`` and the (K, K) matrix at ``M[m0:m0+K*K]``, i.e.

    - max-plus: ``o[j] = max_i (x[i] + M[i, j]) + s[j]``,
    - sum-product: ``o[j] = (sum_i x[i] * M[i, j]) * s[j]``,

    without the ``s`` factor unless ``scale``. ``o`` must not overlap ``x`` or ``s``.

    For K >= 4 the output columns are computed 32 at a time as eight
    :data:`~structcal._simd.f64x4` accumulators held in registers while the rows of ``M``
    stream past. Vectors past the last column have their start clamped to ``K - 4``: they
    overlap columns already done and store the same values again, so any K >= 4 runs
    without padding or a scalar remainder (for K < 32 some of the eight vectors repeat
    work; one block keeps the compiled code, and the JIT compile time, small). Max-plus
    results are exact whatever the order; sum-product results differ from a sequential
    sum by rounding only (fused multiply-adds where the CPU has them). Below K = 4 a
    plain loop does the work.
    """
    if K < LANES:
        _vecmat_small(X, x0, M, m0, K, S, s0, O, o0, K, maxplus, scale)
        return
    for jb in range(0, K, 8 * LANES):
        _vecmat_block(X, x0, M, m0, S, s0, O, o0, K, jb, maxplus, scale)


@kernel(switches=("maxplus", "scale"))
def _vecmat_small(X, x0, M, m0, Kp, S, s0, O, o0, K, maxplus, scale):
    """:func:`_vecmat` by plain loops (K < 4); the rows of ``M`` are ``Kp`` apart."""
    for j in range(K):
        acc = _NEG_INF if maxplus else 0.0
        for i in range(K):
            acc = semiring_step(acc, X[x0 + i], M[m0 + i * Kp + j], maxplus)
        O[o0 + j] = semiring_times(acc, S[s0 + j], maxplus) if scale else acc


@kernel(switches=("maxplus", "scale"))
def _vecmat_padded_block(X, x0, M, m0, S, s0, O, o0, K, Kp, jb, maxplus, scale):
    """Columns ``jb .. jb + 31`` of :func:`_vecmat_padded`: as :func:`_vecmat_block`, but
    every vector is at a fixed offset from the start of its row, so the loads address
    ``row + constant`` and need no register of their own."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vsplat(_NEG_INF if maxplus else 0.0)
    r = m0 + jb
    for i in range(K):
        x = vsplat(X[x0 + i])
        a0 = semiring_step(a0, x, vload(M, r), maxplus)
        a1 = semiring_step(a1, x, vload(M, r + LANES), maxplus)
        a2 = semiring_step(a2, x, vload(M, r + 2 * LANES), maxplus)
        a3 = semiring_step(a3, x, vload(M, r + 3 * LANES), maxplus)
        a4 = semiring_step(a4, x, vload(M, r + 4 * LANES), maxplus)
        a5 = semiring_step(a5, x, vload(M, r + 5 * LANES), maxplus)
        a6 = semiring_step(a6, x, vload(M, r + 6 * LANES), maxplus)
        a7 = semiring_step(a7, x, vload(M, r + 7 * LANES), maxplus)
        r += Kp
    s = s0 + jb
    o = o0 + jb
    _store_scaled(a0, S, s, O, o, 0, maxplus, scale)
    _store_scaled(a1, S, s, O, o, LANES, maxplus, scale)
    _store_scaled(a2, S, s, O, o, 2 * LANES, maxplus, scale)
    _store_scaled(a3, S, s, O, o, 3 * LANES, maxplus, scale)
    _store_scaled(a4, S, s, O, o, 4 * LANES, maxplus, scale)
    _store_scaled(a5, S, s, O, o, 5 * LANES, maxplus, scale)
    _store_scaled(a6, S, s, O, o, 6 * LANES, maxplus, scale)
    _store_scaled(a7, S, s, O, o, 7 * LANES, maxplus, scale)


@kernel(switches=("maxplus", "scale"))
def _vecmat_padded(X, x0, M, m0, S, s0, O, o0, K, Kp, maxplus, scale):
    """:func:`_vecmat` on padded rows: the K rows of the matrix at ``M[m0:]`` are ``Kp``
    apart, ``Kp = padded_width(K)``, and its columns ``K:Kp`` hold the semiring zero
    (0 or ``-inf``); ``s = S[s0:s0+Kp]`` and ``o = O[o0:o0+Kp]`` are whole padded rows
    (all ``Kp`` entries of ``o`` are written; ``x = X[x0:x0+K]`` is read unpadded).

    The sum-product passes use it on the scaled exponentials, which are built padded.
    With every vector at a fixed offset, the row loop is pure loads and fused
    multiply-adds; the clamped offsets of :func:`_vecmat` cost a register each, more than
    the CPU has once the loop is unrolled, and spilling them made that step about 1.7x
    slower (``benchmarks/bench_chain_step.py``).
    """
    if K < LANES:
        _vecmat_small(X, x0, M, m0, Kp, S, s0, O, o0, K, maxplus, scale)
        return
    for jb in range(0, Kp, 8 * LANES):
        _vecmat_padded_block(X, x0, M, m0, S, s0, O, o0, K, Kp, jb, maxplus, scale)


# --------------------------------------------------------------------------- max-product


@kernel(_nrt=False)
def _viterbi_chain(unary, s, L, pw, mat0, pw_stride, v, v0, ckpt, labels):
    """Viterbi on tokens ``s:s+L``. Returns the MAP score.

    The max-plus rows go to ``v`` (.., K): without checkpoints (``ckpt`` empty) row ``t``
    is ``v[v0 + t]`` (the marginals output, when those are computed next). Otherwise
    ``v`` is a ring of B rows (row ``t`` at ``v[t % B]``) and ``ckpt`` (>= ceil(L / B),
    K) keeps the first row of each block of B: the backtrack recomputes a block's rows
    from its checkpoint when it reaches them, so a long chain needs ``K / B`` values of
    scratch per token, for one more max-plus pass.
    """
    K = unary.shape[1]
    B = v.shape[0] if ckpt.shape[0] > 0 else L
    vp, pwp, up = data_pointer(v), data_pointer(pw), data_pointer(unary)
    for j in range(K):
        v[v0, j] = unary[s, j]
    rp = v0  # row of v holding position t - 1 (no modulo in the loop)
    for t in range(1, L):
        rc = rp + 1
        if rc == v0 + B:  # position t starts a block: keep the row before it
            rc = v0
            for j in range(K):
                ckpt[t // B - 1, j] = v[rp, j]
        m0 = (mat0 + t - 1) * pw_stride * K * K
        _vecmat(vp, rp * K, pwp, m0, up, (s + t) * K, vp, rc * K, K, True, True)
        rp = rc
    # backtrack by recomputing each argmax (cheaper than storing back-pointers)
    last = rp
    best = 0
    for j in range(1, K):
        if v[last, j] > v[last, best]:
            best = j
    score = v[last, best]
    labels[s + L - 1] = best
    blk = ((L - 1) // B) * B  # first position whose row is in v
    for t in range(L - 2, -1, -1):
        if t < blk:  # rows blk - B .. blk - 1 again, from the row before the block
            blk -= B
            for j in range(K):
                v[v0 + (blk - 1) % B, j] = ckpt[blk // B - 1, j] if blk > 0 else 0.0
            if blk == 0:
                for j in range(K):
                    v[v0, j] = unary[s, j]
            for q in range(max(blk, 1), blk + B):
                m0 = (mat0 + q - 1) * pw_stride * K * K
                _vecmat(vp, (v0 + (q - 1) % B) * K, pwp, m0, up, (s + q) * K, vp, (v0 + q % B) * K, K, True, True)
        m = (mat0 + t) * pw_stride
        nxt = labels[s + t + 1]
        r = rp - 1 if rp > v0 else v0 + B - 1  # position t: one row before t + 1's
        rp = r
        b = 0
        bv = v[r, 0] + pw[m, 0, nxt]
        for i in range(1, K):
            x = v[r, i] + pw[m, i, nxt]
            if x > bv:
                bv = x
                b = i
        labels[s + t] = b
    return score


@kernel
def _kbest_chain(unary, s, L, pw, mat0, pw_stride, k, S, BI, BR, labels_out, scores_out):
    """Exact k-best (list Viterbi) on one chain.

    ``S`` (L, K, k) holds the k best prefix scores ending in each state, ``BI``/``BR`` the
    state and rank of the predecessor. Writes ``labels_out`` (k, n_tokens) and
    ``scores_out`` (k,); returns the number of feasible labelings found (<= k).
    """
    K = unary.shape[1]
    for j in range(K):
        S[0, j, 0] = unary[s, j]
        for r in range(1, k):
            S[0, j, r] = _NEG_INF
    for t in range(1, L):
        m = (mat0 + t - 1) * pw_stride
        for j in range(K):
            for r in range(k):
                S[t, j, r] = _NEG_INF
                BI[t, j, r] = -1
                BR[t, j, r] = -1
            for i in range(K):
                p = pw[m, i, j]
                for r0 in range(k):
                    x = S[t - 1, i, r0] + p
                    if not x > S[t, j, k - 1]:
                        break  # S[t-1, i, :] is sorted: no later rank can enter
                    # insert x keeping S[t, j, :] sorted in decreasing order (stable)
                    q = k - 1
                    while q > 0 and x > S[t, j, q - 1]:
                        S[t, j, q] = S[t, j, q - 1]
                        BI[t, j, q] = BI[t, j, q - 1]
                        BR[t, j, q] = BR[t, j, q - 1]
                        q -= 1
                    S[t, j, q] = x
                    BI[t, j, q] = i
                    BR[t, j, q] = r0
            u = unary[s + t, j]
            for r in range(k):
                S[t, j, r] += u
    # the k best over (state, rank) at the last position
    fin_j = np.full(k, -1, dtype=np.int64)
    fin_r = np.full(k, -1, dtype=np.int64)
    fin_v = np.full(k, _NEG_INF)
    for j in range(K):
        for r in range(k):
            x = S[L - 1, j, r]
            if not x > fin_v[k - 1]:
                break
            q = k - 1
            while q > 0 and x > fin_v[q - 1]:
                fin_v[q] = fin_v[q - 1]
                fin_j[q] = fin_j[q - 1]
                fin_r[q] = fin_r[q - 1]
                q -= 1
            fin_v[q] = x
            fin_j[q] = j
            fin_r[q] = r
    found = 0
    for q in range(k):
        scores_out[q] = fin_v[q]
        if fin_v[q] == _NEG_INF:
            for t in range(L):
                labels_out[q, s + t] = -1
            continue
        found += 1
        j = fin_j[q]
        r = fin_r[q]
        for t in range(L - 1, -1, -1):
            labels_out[q, s + t] = j
            if t > 0:
                j, r = BI[t, j, r], BR[t, j, r]
    return found


# --------------------------------------------------------------------------- sum-product

#: Positions per block of the sum-product passes: a thread keeps the shifted unary
#: exponentials (and, with per-edge pairwise potentials, the scaled matrices) of one block
#: of this many positions; the backward pass of a longer chain recomputes them block by
#: block (see Memory in the module docstring).
_BLOCK = 128


@kernel(switches=("masked",), _nrt=False)
def _unary_row(up, s, t, K, masked, first, nxt, callowed, tmp):
    """Pointer and flat offset of the unary row of position ``t`` of the chain at ``s``.

    With ``masked``, constraints ``q = first[t], nxt[q], nxt[nxt[q]], ...`` (until -1)
    forbid the labels outside ``callowed[q]`` there: the row is then copied into ``tmp``
    (K,) and masked.
    """
    if masked:
        q = first[t]
        if q >= 0:
            for j in range(K):
                tmp[j] = up[(s + t) * K + j]
            while q >= 0:
                for j in range(K):
                    if not callowed[q, j]:
                        tmp[j] = _NEG_INF
                q = nxt[q]
            return data_pointer(tmp), 0
    return up, (s + t) * K


@kernel(switches=("masked",), _nrt=False)
def _fill_block(
    unary, s, b0, b1, pw, mat0, pw_stride, E, ET, colmax, spread, refill,
    masked, first, nxt, callowed, tmp, u, thr, certify,
):
    """Shifted unary exponentials of positions ``b0:b1`` of one chain into rows
    ``0:b1-b0`` of ``u``; returns the sum of their shifts (``-inf`` if some position has
    every label forbidden, the rest then unwritten).

    Position ``p`` (> 0) meets the matrix of edge ``p - 1``: its scaled exponentials are
    ``E[(p - b0) * pw_stride]`` (the shared matrix's when ``pw_stride`` is 0); with
    ``refill`` they are first written there from ``pw``. With ``certify``, ``thr[p - b0]``
    gets ``lo`` of step ``p``, the log of a lower bound on every positive ``E[i, j] u[p, j]``
    (see :func:`_forward_scaled`).
    """
    K = unary.shape[1]
    Kp = u.shape[1]
    if refill:
        e0 = max(b0, 1)
        if b1 > e0:
            _fill_scaled_exponentials(pw, mat0 + e0 - 1, b1 - e0, E, ET, colmax, spread, e0 - b0)
    up, cp, uu = data_pointer(unary), data_pointer(colmax), data_pointer(u)
    shifts = 0.0
    for p in range(b0, b1):
        r = p - b0
        m = r * pw_stride
        rp, r0 = _unary_row(up, s, p, K, masked, first, nxt, callowed, tmp)
        shift, lo = _exp_shifted_row(rp, r0, cp, m * K, p > 0, uu, r * Kp, K)
        if shift == _NEG_INF:
            return _NEG_INF
        shifts += shift
        if certify:
            if p > 0:
                lo -= spread[m]
            thr[r] = lo
    return shifts


@kernel(switches=("masked",), _nrt=False)
def _forward_scaled(
    unary, s, L, pw, mat0, pw_stride, E, ET, colmax, spread, refill,
    masked, first, nxt, callowed, tmp, u, thr, o, A, a0, store, z,
):
    """Scaled forward pass over the chain of ``L`` tokens at ``s``, block by block.

    The normalised forward row of position ``t`` goes to row ``a0 + t`` of ``A`` (.., K)
    when ``store`` (the marginals output: the backward pass turns it into marginals in
    place) and ``z[t]`` gets the step normaliser; otherwise ``A`` is (2, K) and rows
    alternate. ``u`` (B, Kp) and ``thr`` (B,) hold a block (:func:`_fill_block`), ``o``
    (1, Kp) one step's output; ``E ... refill`` and the mask arguments as in
    :func:`_fill_block`.

    Returns ``(log_partition, ok)``. ``ok`` is True only if the pass is certified (see
    Numerics in the module docstring): every term it formed was provably far above the
    underflow threshold, so the result is exact to rounding; otherwise the caller must use
    the log-space pass. ``log_partition`` is ``-inf`` (with ``ok``) when the chain is
    infeasible.
    """
    # Step t is certified when amin * exp(lo_t) >= exp(_LOG_FLOOR), amin being the smallest
    # positive normalised forward value at t - 1: every term a[t-1, i] E[i, j] u[t, j] is
    # then at least exp(_LOG_FLOOR). thr[t - b0] holds lo_t (<= 0): minus the spread of
    # the finite entries of unary + colmax at t (``_exp_shifted_row``) and minus the
    # largest spread of a column of the pairwise matrix (``spread``).
    K = unary.shape[1]
    Kp = u.shape[1]
    B = u.shape[0]
    Ep, Ap, uu, op = data_pointer(E), data_pointer(A), data_pointer(u), data_pointer(o)
    logz = 0.0
    amin = 1.0  # smallest positive normalised forward value of the previous step
    for b0 in range(0, L, B):
        b1 = min(L, b0 + B)
        shifts = _fill_block(
            unary, s, b0, b1, pw, mat0, pw_stride, E, ET, colmax, spread, refill,
            masked, first, nxt, callowed, tmp, u, thr, True,
        )
        if shifts == _NEG_INF:
            return _NEG_INF, True
        logz += shifts
        for t in range(b0, b1):
            r = t - b0
            lo = thr[r]
            # amin * exp(lo) >= exp(_LOG_FLOOR), with the exp only off the common path
            if amin < _AMIN_SURE or lo < _LO_SURE:
                if lo < _LOG_FLOOR or amin < exp_nonpositive(_LOG_FLOOR - lo):
                    return logz, False
            if t == 0:
                total, low = _row_sum_minpos(uu, 0, K)
                src = uu
            else:
                prev = a0 + t - 1 if store else (t - 1) & 1
                _vecmat_padded(
                    Ap, prev * K, Ep, r * pw_stride * K * Kp, uu, r * Kp, op, 0, K, Kp, False, True
                )
                total, low = _row_sum_minpos(op, 0, K)
                src = op
            if total == 0.0:  # every term was exactly zero (none underflowed): infeasible
                return _NEG_INF, True
            if store:
                z[t] = total
            inv = 1.0 / total
            amin = low * inv
            logz += math.log(total)
            cur = a0 + t if store else t & 1
            _row_scale(src, 0, inv, Ap, cur * K, K)
    return logz, True


@kernel(_nrt=False)
def _backward_scaled(
    unary, s, L, pw, mat0, pw_stride, E, ET, colmax, spread, refill, tmp, u, z,
    beta, w, marg, edge, e0, do_edge, no_mask, no_allowed,
):
    """Scaled backward pass after a stored :func:`_forward_scaled` (forward rows in
    ``marg[s:s+L]``, normalisers in ``z``, the last block still in ``u`` and ``E``).

    Turns rows ``s:s+L`` of ``marg`` into node marginals in place and, when ``do_edge``,
    writes edge marginals into ``edge[e0:e0+L-1]``. Blocks before the last are
    recomputed (:func:`_fill_block`) as the pass reaches them. ``beta`` and ``w`` are
    (1, Kp) scratch. With this scaling every marginal row sums to one in exact
    arithmetic. After a certified forward pass an underflow here costs at most an
    absolute 1e-300 per term in a marginal; an overflow gives inf, which the matrix
    products spread (inf * 0 is NaN) to every entry of the first row, so checking that
    row's sum is enough. Returns False when the check fails (the caller then uses the
    log-space pass).
    """
    K = marg.shape[1]
    Kp = u.shape[1]
    B = u.shape[0]
    Ep, ETp, uu = data_pointer(E), data_pointer(ET), data_pointer(u)
    bp, wp, mp, ep = data_pointer(beta), data_pointer(w), data_pointer(marg), data_pointer(edge)
    for j in range(K):
        beta[0, j] = 1.0
    blk = ((L - 1) // B) * B  # first position of the block in u
    for t in range(L - 2, -1, -1):
        if t + 1 < blk:
            blk -= B
            _fill_block(
                unary, s, blk, blk + B, pw, mat0, pw_stride, E, ET, colmax, spread, refill,
                False, no_mask, no_mask, no_allowed, tmp, u, z, False,
            )
        r = t + 1 - blk
        m = r * pw_stride
        _row_mul(uu, r * Kp, bp, 0, 1.0 / z[t + 1], wp, 0, K)
        if do_edge:  # p(y_t = i, y_t+1 = j) = a[t, i] E[m, i, j] w[j]
            for i in range(K):
                _row_mul_prob(Ep, (m * K + i) * Kp, wp, 0, marg[s + t, i], ep,
                              ((e0 + t) * K + i) * K, K)
        _vecmat_padded(wp, 0, ETp, m * K * Kp, wp, 0, bp, 0, K, Kp, False, False)
        _row_mul_prob(mp, (s + t) * K, bp, 0, 1.0, mp, (s + t) * K, K)
    total = _row_sum(mp, s * K, K)
    return abs(total - 1.0) < 1e-6


@kernel
def _normalise_log_row(X, r, K):
    """Subtract the row's maximum from ``X[r]`` in place and return it (``-inf``, row left
    as it is, when every entry is ``-inf``)."""
    c = _NEG_INF
    for j in range(K):
        c = max(c, X[r, j])
    if c != _NEG_INF:
        for j in range(K):
            X[r, j] -= c
    return c


@kernel
def _softmax_row(v, O, r, K):
    """``O[r] = exp(v - max(v)) / sum(exp(v - max(v)))``: a probability row (entries in
    [0, 1], summing to 1 up to rounding) at any magnitude of ``v``; all zeros when every
    entry of ``v`` is ``-inf``."""
    m = _NEG_INF
    for j in range(K):
        m = max(m, v[j])
    if m == _NEG_INF:
        for j in range(K):
            O[r, j] = 0.0
        return
    total = 0.0
    for j in range(K):
        e = exp_nonpositive(v[j] - m)
        O[r, j] = e
        total += e
    inv = 1.0 / total
    for j in range(K):
        O[r, j] = min(O[r, j] * inv, 1.0)


@kernel(switches=("masked",))
def _forward_backward_log(
    unary, s, L, pw, mat0, pw_stride, masked, first, nxt, callowed, tmp, A, a0, store, lb,
    edge, e0, do_edge,
):
    """Exact log-space forward(-backward): the fallback. Returns the log-partition
    (``-inf`` if the chain is infeasible).

    Every row of forward messages (and of backward messages) is normalised to a maximum
    of 0 as it is made, its maximum added to the log-partition, so that no message grows
    with the chain: the sums formed stay within a few times the potentials' own
    magnitude, and marginals are made by a softmax of forward plus backward rows, never
    by subtracting the log-partition (at magnitudes of 10^12 and beyond that difference
    cancels catastrophically). Node and edge marginals are therefore probabilities (in
    [0, 1], each row summing to 1 up to rounding) at every magnitude the potentials may
    have (see :data:`structcal._validation.MAX_LOG_POTENTIAL`); their log-odds are exact
    up to a rounding error of a few ulps of the potentials' magnitude times the chain
    length.

    Normalised log forward rows go to ``A`` as in :func:`_forward_scaled` (rows
    ``a0:a0+L`` when ``store``, else two alternating rows); with ``store`` a backward
    pass then turns them into node marginals in place (and writes edge marginals when
    ``do_edge``), keeping two rows of backward messages in ``lb`` (2, K). The mask
    arguments are those of :func:`_fill_block` (forward only).
    """
    K = unary.shape[1]
    up = data_pointer(unary)
    terms = np.empty(K)
    logz = 0.0
    for t in range(L):
        rp, r0 = _unary_row(up, s, t, K, masked, first, nxt, callowed, tmp)
        cur = a0 + t if store else t & 1
        if t == 0:
            for j in range(K):
                A[cur, j] = rp[r0 + j]
        else:
            prev = a0 + t - 1 if store else (t - 1) & 1
            m = (mat0 + t - 1) * pw_stride
            for j in range(K):
                for i in range(K):
                    terms[i] = A[prev, i] + pw[m, i, j]
                A[cur, j] = _logsumexp_row(terms) + rp[r0 + j]
        c = _normalise_log_row(A, cur, K)
        if c == _NEG_INF:
            return _NEG_INF
        logz += c
    logz += _logsumexp_row(A[a0 + L - 1] if store else A[(L - 1) & 1])
    if not store:
        return logz
    for j in range(K):
        lb[(L - 1) & 1, j] = 0.0
    for t in range(L - 2, -1, -1):
        m = (mat0 + t) * pw_stride
        nx = lb[(t + 1) & 1]
        cu = lb[t & 1]
        for i in range(K):
            for j in range(K):
                terms[j] = pw[m, i, j] + unary[s + t + 1, j] + nx[j]
            cu[i] = _logsumexp_row(terms)
        _normalise_log_row(lb, t & 1, K)
        if do_edge:
            top = _NEG_INF
            for i in range(K):
                for j in range(K):
                    v = A[a0 + t, i] + pw[m, i, j] + unary[s + t + 1, j] + nx[j]
                    edge[e0 + t, i, j] = v
                    top = max(top, v)
            total = 0.0
            for i in range(K):
                for j in range(K):
                    e = exp_nonpositive(edge[e0 + t, i, j] - top) if top != _NEG_INF else 0.0
                    edge[e0 + t, i, j] = e
                    total += e
            inv = 1.0 / total if total > 0.0 else 0.0
            for i in range(K):
                for j in range(K):
                    edge[e0 + t, i, j] = min(edge[e0 + t, i, j] * inv, 1.0)
        for j in range(K):  # row t + 1 is done with: forward + backward -> marginal
            terms[j] = A[a0 + t + 1, j] + nx[j]
        _softmax_row(terms, A, a0 + t + 1, K)
    for j in range(K):
        terms[j] = A[a0, j] + lb[0, j]
    _softmax_row(terms, A, a0, K)
    return logz


@batch_kernel
def infer_batch(
    unary, offsets, edge_offsets, pw, pw_stride, E, ET, colmax, spread,
    do_map, do_marg, do_edge, chunk,
    labels, scores, logz, marg, edge, status,
):
    """Viterbi and/or forward-backward over every chain, ``prange`` over chunks of chains.

    Writes each chain's MAP score, log-partition and status (see the module notes; a
    pending chain's marginals and log-partition are left to :func:`log_space_batch`); the
    chain's edge ``t`` uses ``pw[(edge_offsets[c] + t) * pw_stride]``. With marginals,
    Viterbi runs in the chain's rows of ``marg`` and the forward pass stores its rows
    there too; otherwise Viterbi uses a ring of rows with checkpoints (see
    :func:`_viterbi_chain`). The per-chain steps are written out here rather than in a
    helper: each level of kernel calls has its callees' code optimised and compiled
    again, so one level less saves seconds of compilation on a first run.

    Scratch is allocated once per chunk of ``chunk`` chains, sized for its longest chain
    (blocks of at most ``_BLOCK`` positions, see Memory in the module docstring). With a
    shared matrix (``pw_stride == 0``) ``E, ET, colmax, spread`` are its scaled
    exponentials; with per-edge matrices they are ignored (only ``E.shape[2]``, the padded
    width, is read) and each block's are built in the chunk's scratch just before its
    forward steps, so memory stays per thread and the exponentials are still in cache.
    """
    n_chains = offsets.shape[0] - 1
    K = unary.shape[1]
    Kp = E.shape[2]
    local = pw_stride != 0 and do_marg
    n_chunks = (n_chains + chunk - 1) // chunk
    for b in prange(n_chunks):
        c0 = b * chunk
        c1 = min(n_chains, c0 + chunk)
        Lmax = 1
        for c in range(c0, c1):
            Lmax = max(Lmax, offsets[c + 1] - offsets[c])
        nb = min(Lmax, _BLOCK)
        Ec, ETc, colc, spc = E, ET, colmax, spread
        if local:  # this chunk's scratch for one block's per-edge matrices (_fill_block)
            Ec = zeros_matrices(nb, K, Kp)
            ETc = zeros_matrices(nb, K, Kp)
            colc = np.zeros((nb, K))
            spc = np.zeros(nb)
        u = zeros_rows(nb, Kp)
        thr = np.empty(nb)
        o = zeros_rows(1, Kp)
        z = np.empty(Lmax if do_marg else 0)
        beta = zeros_rows(1, Kp)
        w = zeros_rows(1, Kp)
        viterbi_only = do_map and not do_marg
        v = np.empty((nb if viterbi_only else 0, K))
        ckpt = np.empty(((Lmax + nb - 1) // nb if viterbi_only else 0, K))
        tmp = np.empty(K)
        no_mask = np.empty(0, dtype=np.int64)
        no_allowed = np.empty((0, K), dtype=np.bool_)
        for c in range(c0, c1):
            # one chain: Viterbi in ``marg``'s rows when marginals follow (the forward pass
            # then overwrites them), else in ``v`` with checkpoints; then the certified
            # scaled forward-backward, or status pending when it is not certified
            s = offsets[c]
            L = offsets[c + 1] - s
            e0 = edge_offsets[c]
            sc = 0.0
            lz = 0.0
            st = STATUS_OK
            if L > 0 and do_map:
                if do_marg:
                    sc = _viterbi_chain(unary, s, L, pw, e0, pw_stride, marg, s, ckpt[:0], labels)
                else:
                    sc = _viterbi_chain(unary, s, L, pw, e0, pw_stride, v, 0, ckpt, labels)
                if sc == _NEG_INF:
                    lz = _NEG_INF
                    st = STATUS_INFEASIBLE
            if L > 0 and do_marg and st == STATUS_OK:
                lz, ok = _forward_scaled(
                    unary, s, L, pw, e0, pw_stride, Ec, ETc, colc, spc, local,
                    False, no_mask, no_mask, no_allowed, tmp, u, thr, o, marg, s, True, z,
                )
                if ok and lz == _NEG_INF:
                    sc = _NEG_INF
                    st = STATUS_INFEASIBLE
                else:
                    if ok:
                        ok = _backward_scaled(
                            unary, s, L, pw, e0, pw_stride, Ec, ETc, colc, spc, local, tmp,
                            u, z, beta, w, marg, edge, e0, do_edge, no_mask, no_allowed,
                        )
                    if not ok:
                        st = STATUS_PENDING  # for log_space_batch
            scores[c] = sc
            logz[c] = lz
            status[c] = st


@batch_kernel
def log_space_batch(
    unary, offsets, edge_offsets, pw, pw_stride, chains, do_edge, scores, logz, marg, edge,
    status,
):
    """Marginals and log-partition of ``chains`` by the exact log-space pass.

    These are the chains :func:`infer_batch` left pending; edge marginals too when
    ``do_edge`` (:func:`_forward_backward_log`). Overwrites their rows of ``marg`` and ``edge`` and
    their ``logz``; status becomes 2 (fallback), or 1 (infeasible, MAP score ``-inf``).
    """
    K = unary.shape[1]
    for i in prange(chains.shape[0]):
        c = chains[i]
        s = offsets[c]
        e0 = edge_offsets[c]
        no_mask = np.empty(0, dtype=np.int64)
        lz = _forward_backward_log(
            unary, s, offsets[c + 1] - s, pw, e0, pw_stride, False, no_mask, no_mask,
            np.empty((0, K), dtype=np.bool_), np.empty(K), marg, s, True, np.empty((2, K)),
            edge, e0, do_edge,
        )
        logz[c] = lz
        status[c] = STATUS_FALLBACK
        if lz == _NEG_INF:
            scores[c] = _NEG_INF
            status[c] = STATUS_INFEASIBLE


@batch_kernel
def kbest_batch(unary, offsets, edge_offsets, pw, pw_stride, k, labels, scores, found):
    """k-best labelings of every chain (``prange`` over chains)."""
    n_chains = offsets.shape[0] - 1
    K = unary.shape[1]
    for c in prange(n_chains):
        s = offsets[c]
        L = offsets[c + 1] - s
        if L == 0:
            scores[c, 0] = 0.0
            for q in range(1, k):
                scores[c, q] = _NEG_INF
            found[c] = 1
            continue
        S = np.empty((L, K, k))
        BI = np.empty((L, K, k), dtype=np.int64)
        BR = np.empty((L, K, k), dtype=np.int64)
        found[c] = _kbest_chain(
            unary, s, L, pw, edge_offsets[c], pw_stride, k, S, BI, BR, labels, scores[c]
        )


# --------------------------------------------------------------------------- scores, pseudo-marginals


@batch_kernel
def score_batch(unary, offsets, edge_offsets, pw, pw_stride, labels, out):
    """Unnormalised log-score of the given labeling of every chain."""
    n_chains = offsets.shape[0] - 1
    for c in prange(n_chains):
        s = offsets[c]
        L = offsets[c + 1] - s
        total = 0.0
        for t in range(L):
            total += unary[s + t, labels[s + t]]
        for t in range(L - 1):
            m = (edge_offsets[c] + t) * pw_stride
            total += pw[m, labels[s + t], labels[s + t + 1]]
        out[c] = total


@batch_kernel
def pseudo_marginals_batch(unary, offsets, edge_offsets, pw, pw_stride, labels, out, bad):
    """p(y_t = a | y_-t = labels_-t) for every token; ``bad[c]`` gets 1 + the first position
    whose conditional is undefined (all ``-inf``), 0 when none is."""
    n_chains = offsets.shape[0] - 1
    K = unary.shape[1]
    for c in prange(n_chains):
        s = offsets[c]
        L = offsets[c + 1] - s
        bad[c] = 0
        for t in range(L):
            mx = _NEG_INF
            for j in range(K):
                x = unary[s + t, j]
                if t > 0:
                    x += pw[(edge_offsets[c] + t - 1) * pw_stride, labels[s + t - 1], j]
                if t < L - 1:
                    x += pw[(edge_offsets[c] + t) * pw_stride, j, labels[s + t + 1]]
                out[s + t, j] = x
                if x > mx:
                    mx = x
            if mx == _NEG_INF:
                if bad[c] == 0:
                    bad[c] = t + 1
                for j in range(K):
                    out[s + t, j] = 0.0
                continue
            total = 0.0
            for j in range(K):
                e = exp_nonpositive(out[s + t, j] - mx)
                out[s + t, j] = e
                total += e
            for j in range(K):
                out[s + t, j] /= total


# --------------------------------------------------------------------------- constrained forward


@batch_kernel
def constrained_log_partition_batch(
    unary, offsets, edge_offsets, pw, pw_stride, E, colmax, spread,
    q_chain, q_offsets, cpos, callowed, chunk, out, pending,
):
    """Constrained log-partition of each query (``prange`` over chunks of queries).

    Labels outside ``callowed[k]`` are forbidden at position ``cpos[k]`` of the query's
    chain for its constraints ``k`` in ``q_offsets[q]:q_offsets[q + 1]``; the forward pass
    applies them as it reads each unary row (:func:`_unary_row`), through a per-thread
    list of constraints by position. ``E``, ``colmax`` and ``spread`` are as in
    :func:`infer_batch`: with per-edge matrices a chain's scaled exponentials are built
    in the chunk's scratch, once for consecutive queries on a chain of one block. A query
    whose scaled pass is not certified gets ``pending[q] = True`` (its ``out[q]`` is then
    meaningless) and is left to :func:`constrained_log_space_batch`.
    """
    n_q = q_chain.shape[0]
    K = unary.shape[1]
    Kp = E.shape[2]
    local = pw_stride != 0
    nxt = np.empty(cpos.shape[0], dtype=np.int64)  # each query links its own constraints
    n_chunks = (n_q + chunk - 1) // chunk
    for b in prange(n_chunks):
        q0 = b * chunk
        q1 = min(n_q, q0 + chunk)
        Lmax = 1
        for q in range(q0, q1):
            c = q_chain[q]
            Lmax = max(Lmax, offsets[c + 1] - offsets[c])
        nb = min(Lmax, _BLOCK)
        Ec, ETc, colc, spc = E, E, colmax, spread  # (the forward pass reads no ET)
        if local:  # this chunk's scratch for one block's per-edge matrices (_fill_block)
            Ec = zeros_matrices(nb, K, Kp)
            ETc = zeros_matrices(nb, K, Kp)
            colc = np.zeros((nb, K))
            spc = np.zeros(nb)
        u = zeros_rows(nb, Kp)
        thr = np.empty(nb)
        o = zeros_rows(1, Kp)
        A = np.empty((2, K))
        tmp = np.empty(K)
        z = np.empty(0)
        first = np.full(Lmax, -1, dtype=np.int64)
        filled = -1
        for q in range(q0, q1):
            c = q_chain[q]
            s = offsets[c]
            L = offsets[c + 1] - s
            if L == 0:
                out[q] = 0.0
                continue
            k0, k1 = q_offsets[q], q_offsets[q + 1]
            _link_constraints(first, nxt, cpos, k0, k1)
            refill = local and not (c == filled and L <= nb)
            logz, ok = _forward_scaled(
                unary, s, L, pw, edge_offsets[c], pw_stride, Ec, ETc, colc, spc, refill,
                True, first, nxt, callowed, tmp, u, thr, o, A, 0, False, z,
            )
            filled = c
            out[q] = logz
            pending[q] = not ok  # for constrained_log_space_batch
            _unlink_constraints(first, cpos, k0, k1)


@kernel
def _link_constraints(first, nxt, cpos, k0, k1):
    """List constraints ``k0:k1`` by position for :func:`_unary_row`.

    ``first[t]`` is the first constraint at position ``t`` (-1: none) and ``nxt[k]`` the
    one after ``k``.
    """
    for k in range(k1 - 1, k0 - 1, -1):
        nxt[k] = first[cpos[k]]
        first[cpos[k]] = k


@kernel
def _unlink_constraints(first, cpos, k0, k1):
    """Undo :func:`_link_constraints` (``first`` back to all -1)."""
    for k in range(k0, k1):
        first[cpos[k]] = -1


@batch_kernel
def constrained_log_space_batch(
    unary, offsets, edge_offsets, pw, pw_stride, q_chain, q_offsets, cpos, callowed,
    queries, out,
):
    """Constrained log-partition of ``queries`` by the exact log-space pass.

    These are the queries :func:`constrained_log_partition_batch` left pending (same
    arguments).
    """
    K = unary.shape[1]
    nxt = np.empty(cpos.shape[0], dtype=np.int64)
    for i in prange(queries.shape[0]):
        q = queries[i]
        c = q_chain[q]
        s = offsets[c]
        L = offsets[c + 1] - s
        first = np.full(L, -1, dtype=np.int64)
        _link_constraints(first, nxt, cpos, q_offsets[q], q_offsets[q + 1])
        out[q] = _forward_backward_log(
            unary, s, L, pw, edge_offsets[c], pw_stride, True, first, nxt, callowed,
            np.empty(K), np.empty((2, K)), 0, False, np.empty((2, K)),
            np.empty((0, K, K)), 0, False,
        )
