"""The KD-tree of the k-NN region forecasters, built in NumPy (private: inputs are trusted).

The tree is queried by the Numba kernels of :mod:`structcal._knn`; building it is a
small part of a forecaster's work (O(n d log n), against O(n k log n) for the queries of
cross-validation), so it is built here, without a kernel: a first run compiles nothing
for it.

Nodes are numbered breadth first with explicit child links (``child[i]`` is the left
child, ``child[i] + 1`` the right one, -1 for a leaf); leaves hold at most ``leaf_size``
points and every child at least ``leaf_size // 4``, so there are fewer than
``8 n / leaf_size`` nodes. Each node is split where its bounding box shrinks the most
(:func:`build_kdtree`): a median split on continuous features, but on one-hot or other
discrete features (Table 1's letter indicator, whose rare letters are the widest
dimensions once standardised) a clean split at the edge of the median's tie block, which
takes that dimension out of both children's boxes. Plain median splits on the widest
dimension landed inside the tie block there, left one child's box as wide as its
parent's, and the tree pruned almost nothing. The neighbours a query finds do not depend
on the tree's shape (see :mod:`structcal._knn`), so these choices only affect speed.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LEAF_SIZE", "build_kdtree", "numpy_seconds"]

#: Points per leaf (at most; median splits leave 32..64). Query times for k of tens to
#: hundreds change by a few percent between 40 and 80; fewer levels build faster.
LEAF_SIZE = 64

#: Nodes of more than ``4 * _SAMPLE`` points are split near the median of a sample.
_SAMPLE = 1024


def numpy_seconds(n: int, d: int) -> float:
    """Estimated seconds :func:`build_kdtree` takes for ``n`` points of ``d`` dimensions:
    per point and level (``log2(n / 48)`` levels), 0.6 us plus 0.06 us per dimension.
    Measured on a 2-CPU machine, continuous and one-hot features: 0.43-2.3 us per point
    and level at n = 20,000 to 100,000 (d = 2 to 34), which the estimate exceeds; at
    n = 2,000 up to 3.3 us, which it does not, but such work is small enough for NumPy
    in any case (below ``SMALL_WORK`` of :mod:`structcal._tier`)."""
    levels = max(1.0, float(np.log2(max(n, 1) / 48)))
    return n * levels * (6e-7 + 6e-8 * d)


def build_kdtree(X, leaf_size):
    """Build the tree over the rows of ``X`` (n, d).

    Returns ``perm`` (n,) (tree position -> row of ``X``), ``start``/``end`` (n_nodes,)
    (each node's range of tree positions), ``child`` (n_nodes,) (index of the left
    child, the right one follows it; -1 for a leaf) and ``lower``/``upper``
    (n_nodes, d) (each node's bounding box, the exact minimum and maximum of its
    points). Nodes are numbered breadth first, so parents come before children; the
    points of a node keep their order in each child.

    A node of more than ``leaf_size`` points is split in the dimension and at the point
    that shrink its box the most: the score of a split is the node's spread in that
    dimension minus the larger of the children's spreads. Candidates per dimension are
    the rank-median split and, when the median value is tied, the two clean splits at
    the edges of its tie block (all tied values on one side), which must leave at least
    ``leaf_size // 4`` points on each side. On one-hot or otherwise discrete features a
    median split inside a tie block leaves one child's box as wide as its parent's,
    whereas a clean split removes that dimension from both boxes. The best candidate
    wins, ties to the wider dimension (then the lower index) and to the median split;
    in nodes of more than ``4 * _SAMPLE`` points candidates are scored at the median of
    an even sample of ``_SAMPLE`` values, and a median split chosen that way is then
    made at the exact median (of the widest dimension if no sampled candidate leaves
    ``leaf_size // 4`` points per side).
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    XT = np.ascontiguousarray(X.T)  # (d, n): a node's values of a dimension are one row
    min_child = max(1, leaf_size // 4)  # smallest child off the median: bounds n_nodes
    perm = np.arange(n, dtype=np.int64)
    start, end, child = [0], [n], [-1]
    lower, upper = [], []
    node = 0
    while node < len(start):  # breadth first: parents come before children
        s, e = start[node], end[node]
        m = e - s
        vals = XT[:, perm[s:e]]  # (d, m): the node's points
        lo = vals.min(axis=1, initial=np.inf)
        hi = vals.max(axis=1, initial=-np.inf)
        lower.append(lo)
        upper.append(hi)
        if m > leaf_size:
            split = _best_split(vals, lo, hi, min_child)
            if split is not None:
                f, t, tied = split
                v = vals[f]
                eq = v == t
                left = (v < t) | (eq & (np.cumsum(eq) <= tied))
                seg = perm[s:e]
                n_left = int(np.count_nonzero(left))
                perm[s:e] = np.concatenate([seg[left], seg[~left]])
                child[node] = len(start)
                start += [s, s + n_left]
                end += [s + n_left, e]
                child += [-1, -1]
        node += 1
    boxes = [np.array(rows, dtype=np.float64).reshape(len(rows), d) for rows in (lower, upper)]
    return (perm, np.array(start, dtype=np.int64), np.array(end, dtype=np.int64),
            np.array(child, dtype=np.int64), *boxes)


def _best_split(vals, lo, hi, min_child):
    """``(dimension, value t, how many values == t go left)`` of the best split of a node
    with points ``vals`` (d, m) and box ``[lo, hi]``, or None if no candidate leaves
    ``min_child`` points on each side."""
    m = vals.shape[1]
    mid = m // 2
    spread = hi - lo
    order = np.argsort(-spread, kind="stable")  # widest first, ties in index order
    sampled = m > 4 * _SAMPLE
    # the widest dimension first: dimensions no wider than its best score cannot win
    first = _candidates(vals, order[:1], lo, hi, mid, min_child, sampled)
    best = first[0].max()
    rest = order[1:][spread[order[1:]] > best]
    if rest.shape[0]:
        more = _candidates(vals, rest, lo, hi, mid, min_child, sampled)
        first = tuple(np.concatenate([a, b]) for a, b in zip(first, more))
    score, t, tied = first
    dims = np.concatenate([order[:1], rest])
    flat = int(np.argmax(score))  # the first best: wider dimension, then median split
    if score.flat[flat] < 0:
        best_dim, best_median = -1, True
    else:
        i, c = divmod(flat, 3)
        best_dim, best_t, best_tied, best_median = int(dims[i]), t[i], int(tied[i, c]), c == 0
    if sampled and best_median:
        # a median split chosen on a sample (or none usable): at the exact median of that
        # dimension (of the widest if none), which keeps the tree balanced
        if best_dim < 0:
            best_dim = int(order[0])
        v = vals[best_dim]
        best_t = np.partition(v, mid)[mid]
        best_tied = mid - int(np.count_nonzero(v < best_t))
    if best_dim < 0:
        return None
    return best_dim, best_t, best_tied


def _candidates(vals, dims, lo, hi, mid, min_child, sampled):
    """Scores (len(dims), 3), values ``t`` and tied counts (len(dims), 3) of the three
    candidate splits of each dimension in ``dims``: the rank median, and the clean splits
    with none and all of the values tied at the median on the left. A candidate leaving
    fewer than ``min_child`` points on a side scores -1."""
    m = vals.shape[1]
    v = vals[dims]  # a copy, reordered in place below (counts do not need the order)
    if sampled:
        step = m // _SAMPLE
        t = np.partition(v[:, : step * _SAMPLE : step], _SAMPLE // 2, axis=1)[:, _SAMPLE // 2]
        ties = np.arange(t.shape[0])
        n_lt = np.empty(t.shape[0], dtype=np.int64)
        n_eq, below, above = n_lt.copy(), t.copy(), t.copy()
    else:
        v.partition(mid, axis=1)  # values <= t before column mid, >= t after it
        t = v[:, mid].copy()
        below = v[:, :mid].max(axis=1, initial=-np.inf)
        above = v[:, mid + 1:].min(axis=1, initial=np.inf)
        n_lt = np.full(t.shape[0], mid, dtype=np.int64)
        n_eq = np.ones(t.shape[0], dtype=np.int64)
        ties = np.flatnonzero((below == t) | (above == t))  # else: mid below t, one at t
    if ties.shape[0]:
        w, tt = v[ties], t[ties, None]
        below_t, above_t = w < tt, w > tt
        n_lt[ties] = np.count_nonzero(below_t, axis=1)
        n_eq[ties] = m - n_lt[ties] - np.count_nonzero(above_t, axis=1)
        below[ties] = np.where(below_t, w, -np.inf).max(axis=1)  # largest value < t
        above[ties] = np.where(above_t, w, np.inf).min(axis=1)  # smallest value > t
    tied = np.zeros((t.shape[0], 3), dtype=np.int64)
    tied[:, 0] = np.minimum(np.maximum(mid - n_lt, 0), n_eq)
    tied[:, 2] = n_eq
    n_left = n_lt[:, None] + tied
    left_hi = np.where(tied > 0, t[:, None], below[:, None])
    right_lo = np.where(tied < n_eq[:, None], t[:, None], above[:, None])
    lo_d, hi_d = lo[dims][:, None], hi[dims][:, None]
    score = (hi_d - lo_d) - np.maximum(left_hi - lo_d, hi_d - right_lo)
    ok = (n_left >= min_child) & (m - n_left >= min_child)
    return np.where(ok, score, -1.0), t, tied
