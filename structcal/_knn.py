"""Numba KD-tree queries for exact k-nearest neighbours (private: inputs are trusted).

The region forecasters query every training event for up to ~600 neighbours, which a
brute-force scan does in O(n^2) time. A KD-tree answers each query in roughly O(k log n)
on low-dimensional features, so cross-validating k over all events costs O(n k log n).
The tree is built by :func:`structcal._kdtree.build_kdtree` (NumPy; its layout is
described there) or, for large work once compiled, by :func:`build_kdtree` here, which
builds the same tree.

Order of neighbours (the tie rule): by squared Euclidean distance, computed as
``sum_f (ref[f] - x[f])**2`` accumulated in feature order from 0.0, then by the
reference's *index* (its row in the fitted data). The same rule as a brute-force scan
with a stable sort, so results do not depend on the tree's shape. A node is pruned only
when the lower bound on its distance is strictly greater than the current k-th distance;
the bound is computed with the same monotone floating-point operations as the distance,
so it never exceeds the distance of a point inside the box, and no tie is lost.

Queries can exclude references carrying the query's own label (``ref_group ==
query_group``): that is how cross-validation finds a training event's nearest events
outside its own fold in one traversal.
"""

import numpy as np

from ._kdtree import _SAMPLE
from ._numba import batch_kernel, kernel, prange


@kernel
def _select_value(vals, m, nth):
    """Return the value of rank ``nth`` of ``vals[:m]`` (quickselect, reorders ``vals``)."""
    lo = 0
    hi = m - 1
    while hi > lo:
        mid = (lo + hi) // 2
        a = vals[lo]
        b = vals[mid]
        c = vals[hi]
        pivot = max(min(a, b), min(max(a, b), c))
        i = lo
        j = hi
        while i <= j:
            while vals[i] < pivot:
                i += 1
            while vals[j] > pivot:
                j -= 1
            if i <= j:
                vals[i], vals[j] = vals[j], vals[i]
                i += 1
                j -= 1
        if nth <= j:
            hi = j
        elif nth >= i:
            lo = i
        else:
            break
    return vals[nth]


@kernel
def build_kdtree(X, leaf_size):
    """Build the tree over the rows of ``X`` (n, d): the same arrays as
    :func:`structcal._kdtree.build_kdtree`, whose docstring describes the tree and its
    splits (tested), computed in one compiled pass for large work.
    """
    n, d = X.shape
    min_child = max(1, leaf_size // 4)  # smallest child off the median: bounds n_nodes
    cap = 1 + 2 * max(1, n // min_child)
    perm = np.arange(n)
    start = np.zeros(cap, dtype=np.int64)
    end = np.zeros(cap, dtype=np.int64)
    child = np.full(cap, -1, dtype=np.int64)
    lower = np.zeros((cap, d))
    upper = np.zeros((cap, d))
    vals = np.empty((d, n))  # the node's values, dimension by dimension
    sample = np.empty(_SAMPLE)
    spreads = np.empty(d)
    order = np.empty(d, dtype=np.int64)
    right = np.empty(n, dtype=np.int64)  # a node's right child while it is partitioned
    end[0] = n
    n_nodes = 1
    node = 0
    while node < n_nodes:  # breadth first: parents come before children
        s = start[node]
        e = end[node]
        m = e - s
        for p in range(s, e):
            row = perm[p]
            for f in range(d):
                vals[f, p - s] = X[row, f]
        for f in range(d):
            lo = np.inf
            hi = -np.inf
            for r in range(m):  # branch-free (vectorised)
                v = vals[f, r]
                lo = min(lo, v)
                hi = max(hi, v)
            lower[node, f] = lo
            upper[node, f] = hi
        if m > leaf_size:
            mid = m // 2
            best = -1.0
            best_dim = -1
            best_t = 0.0
            best_tied = 0
            best_median = False
            # dimensions widest first (ties in index order), so that the loop can stop
            # at the first one too narrow to win: an insertion sort of d values (d is
            # small; np.argsort would compile Numba's merge sort, seconds on a first run)
            for f in range(d):
                spreads[f] = upper[node, f] - lower[node, f]
                order[f] = f
                j = f
                while j > 0 and spreads[order[j - 1]] < spreads[f]:
                    order[j] = order[j - 1]
                    j -= 1
                order[j] = f
            for f in order:
                lo = lower[node, f]
                hi = upper[node, f]
                spread = hi - lo
                if not spread > best:  # a split cannot shrink the box by more than this
                    break
                vf = vals[f]
                if m > 4 * _SAMPLE:  # large node: the median of an even sample
                    step = m // _SAMPLE
                    for r in range(_SAMPLE):
                        sample[r] = vf[r * step]
                    t = _select_value(sample, _SAMPLE, _SAMPLE // 2)
                else:
                    t = _select_value(vf, m, mid)
                n_lt = 0
                n_eq = 0
                below = -np.inf  # largest value < t
                above = np.inf  # smallest value > t
                for r in range(m):  # branch-free (vectorised)
                    v = vf[r]
                    n_lt += v < t
                    n_eq += v == t
                    below = max(below, v if v < t else -np.inf)
                    above = min(above, v if v > t else np.inf)
                # candidates: how many of the values tied at t go left. The one closest
                # to the rank median, none (clean) and all (clean)
                for c in range(3):
                    if c == 0:
                        tied = min(max(mid - n_lt, 0), n_eq)
                    elif c == 1:
                        tied = 0
                    else:
                        tied = n_eq
                    n_left = n_lt + tied
                    if n_left < min_child or m - n_left < min_child:
                        continue  # (never the exact rank median: mid >= min_child)
                    left_hi = t if tied > 0 else below
                    right_lo = t if tied < n_eq else above
                    score = spread - max(left_hi - lo, hi - right_lo)
                    if score > best:
                        best = score
                        best_dim = f
                        best_t = t
                        best_tied = tied
                        best_median = c == 0
            if m > 4 * _SAMPLE and (best_dim < 0 or best_median):
                # a median split chosen on a sample (or none usable): at the exact median
                # of that dimension (of the widest if none), which keeps the tree balanced
                if best_dim < 0:
                    best_dim = order[0]
                best_t = _select_value(vals[best_dim], m, mid)
                n_lt = 0
                for r in range(m):
                    if vals[best_dim, r] < best_t:
                        n_lt += 1
                best_tied = mid - n_lt
            if best_dim >= 0:
                f = best_dim
                n_tied = best_tied  # left: values < t and the first n_tied values == t
                i = s
                n_right = 0
                for p in range(s, e):  # stable: each child keeps its points' order
                    row = perm[p]
                    v = X[row, f]
                    if v < best_t or (v == best_t and n_tied > 0):
                        if v == best_t:
                            n_tied -= 1
                        perm[i] = row
                        i += 1
                    else:
                        right[n_right] = row
                        n_right += 1
                for r in range(n_right):
                    perm[i + r] = right[r]
                split = i
                left = n_nodes
                child[node] = left
                start[left] = s
                end[left] = split
                start[left + 1] = split
                end[left + 1] = e
                n_nodes += 2
        node += 1
    return (perm, start[:n_nodes].copy(), end[:n_nodes].copy(), child[:n_nodes].copy(),
            lower[:n_nodes].copy(), upper[:n_nodes].copy())


@kernel(inline="always")
def _box_distance(x, lower, upper, node):
    """Return a lower bound on the squared distance from ``x`` to ``node``'s box."""
    s = 0.0
    for f in range(x.shape[0]):
        v = x[f]
        if v < lower[node, f]:
            t = lower[node, f] - v
            s += t * t
        elif v > upper[node, f]:
            t = v - upper[node, f]
            s += t * t
        else:
            s += 0.0
    return s


@kernel(inline="always")
def _select_pairs(buf_d, buf_k, buf_p, lo, hi, nth):
    """Sort ``buf[lo:hi]`` partially by (distance, index) (quickselect).

    Afterwards position ``nth`` holds the entry of that rank, smaller entries before
    it and larger after.
    """
    hi -= 1
    while hi > lo:
        mid = (lo + hi) // 2
        pd = buf_d[mid]
        pk = buf_k[mid]
        i = lo
        j = hi
        while i <= j:
            while buf_d[i] < pd or (buf_d[i] == pd and buf_k[i] < pk):
                i += 1
            while buf_d[j] > pd or (buf_d[j] == pd and buf_k[j] > pk):
                j -= 1
            if i <= j:
                buf_d[i], buf_d[j] = buf_d[j], buf_d[i]
                buf_k[i], buf_k[j] = buf_k[j], buf_k[i]
                buf_p[i], buf_p[j] = buf_p[j], buf_p[i]
                i += 1
                j -= 1
        if nth <= j:
            hi = j
        elif nth >= i:
            lo = i
        else:
            return


@kernel
def query_one(x, group, k, XT, key, ref_group, start, end, child, lower, upper, buf_d, buf_k,
              buf_p, leaf_d, stack_node, stack_lb):
    """Find the ``k`` nearest tree positions of ``x`` whose ``ref_group`` is not ``group``.

    ``XT`` is the data in tree order, transposed (d, n), and ``key`` the tie-breaking
    index of each tree position. Candidates are gathered into ``buf_d``/``buf_k``/
    ``buf_p`` (distance, index, tree position; scratch of length ``>= 2k``); when full,
    only the ``k`` best are kept and the k-th (distance, index) becomes the admission
    threshold and the pruning radius. ``leaf_d`` is scratch of the largest leaf's size.
    Leaves the neighbours, unsorted, in ``buf[:count]`` and returns ``count`` (``k``, or
    fewer if fewer eligible references exist).
    """
    d = x.shape[0]
    cap = buf_d.shape[0]
    count = 0
    tau = np.inf
    key_cut = np.iinfo(np.int64).max
    stack_node[0] = 0
    stack_lb[0] = _box_distance(x, lower, upper, 0)
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack_node[sp]
        if stack_lb[sp] > tau:
            continue
        left = child[node]
        if left < 0:
            s = start[node]
            m = end[node] - s
            # distances to the whole leaf, feature by feature, on slices: their indices
            # cannot be negative, so the loops carry no wraparound check and vectorise
            # (2.5 times faster than indexing XT[f, s + r])
            ld = leaf_d[:m]
            for r in range(m):
                ld[r] = 0.0
            for f in range(d):
                v = x[f]
                row = XT[f, s:s + m]
                for r in range(m):
                    diff = row[r] - v
                    ld[r] += diff * diff
            keys = key[s:s + m]
            groups = ref_group[s:s + m]
            for r in range(m):
                dist = ld[r]
                p = s + r
                if dist < tau or (dist == tau and keys[r] < key_cut):
                    if groups[r] == group:
                        continue
                    if count == cap:  # keep the k best; their k-th is the new threshold
                        _select_pairs(buf_d, buf_k, buf_p, 0, count, k - 1)
                        tau = buf_d[k - 1]
                        key_cut = buf_k[k - 1]
                        count = k
                        if not (dist < tau or (dist == tau and keys[r] < key_cut)):
                            continue
                    buf_d[count] = dist
                    buf_k[count] = keys[r]
                    buf_p[count] = p
                    count += 1
        else:
            lb_left = _box_distance(x, lower, upper, left)
            lb_right = _box_distance(x, lower, upper, left + 1)
            if lb_left <= lb_right:  # push the farther child first: the nearer is visited next
                stack_node[sp] = left + 1
                stack_lb[sp] = lb_right
                stack_node[sp + 1] = left
                stack_lb[sp + 1] = lb_left
            else:
                stack_node[sp] = left
                stack_lb[sp] = lb_left
                stack_node[sp + 1] = left + 1
                stack_lb[sp + 1] = lb_right
            sp += 2
    if count > k:
        _select_pairs(buf_d, buf_k, buf_p, 0, count, k - 1)
        count = k
    return count


#: Scratch :func:`sort_neighbours` needs: three integers per range on its stack, which
#: holds at most one range per level (fewer than 2 log2(count) + 2 < 128 levels)
SORT_STACK = 3 * 128


@kernel
def sort_neighbours(buf_d, buf_k, buf_p, count, stack):
    """Sort ``buf[:count]`` in place into (distance, index) order (``stack``: scratch of
    at least ``SORT_STACK`` integers).

    Quicksort (median-of-three pivot, the smaller part first so the stack stays within
    log2(count) ranges) with insertion sort below 16 entries. A range still being split
    after 2 log2(count) levels is split at its exact median (:func:`_select_pairs`)
    instead, which bounds the recursion on adversarial inputs. Indices are distinct, so
    the (distance, index) order is total and the result does not depend on the
    algorithm.
    """
    stack[0] = 0
    stack[1] = count
    stack[2] = 0
    sp = 3
    max_level = 2
    c = count
    while c > 1:
        c //= 2
        max_level += 2
    while sp > 0:
        sp -= 3
        lo = stack[sp]
        hi = stack[sp + 1]
        level = stack[sp + 2]
        while hi - lo > 16:
            if level >= max_level:
                mid = (lo + hi) // 2
                _select_pairs(buf_d, buf_k, buf_p, lo, hi, mid)
                split = mid + 1
                left_hi = mid
            else:
                # median of three by (distance, index), moved to lo as the pivot
                a = lo
                b = (lo + hi) // 2
                e = hi - 1
                if buf_d[b] < buf_d[a] or (buf_d[b] == buf_d[a] and buf_k[b] < buf_k[a]):
                    a, b = b, a
                if buf_d[e] < buf_d[b] or (buf_d[e] == buf_d[b] and buf_k[e] < buf_k[b]):
                    b = e
                    if buf_d[b] < buf_d[a] or (buf_d[b] == buf_d[a] and buf_k[b] < buf_k[a]):
                        b = a
                buf_d[lo], buf_d[b] = buf_d[b], buf_d[lo]
                buf_k[lo], buf_k[b] = buf_k[b], buf_k[lo]
                buf_p[lo], buf_p[b] = buf_p[b], buf_p[lo]
                pd = buf_d[lo]
                pk = buf_k[lo]
                i = lo + 1
                j = hi - 1
                while True:
                    while i <= j and (buf_d[i] < pd or (buf_d[i] == pd and buf_k[i] < pk)):
                        i += 1
                    while buf_d[j] > pd or (buf_d[j] == pd and buf_k[j] > pk):
                        j -= 1
                    if i >= j:
                        break
                    buf_d[i], buf_d[j] = buf_d[j], buf_d[i]
                    buf_k[i], buf_k[j] = buf_k[j], buf_k[i]
                    buf_p[i], buf_p[j] = buf_p[j], buf_p[i]
                    i += 1
                    j -= 1
                # the pivot goes to j: [lo, j) smaller, (j, hi) larger
                buf_d[lo], buf_d[j] = buf_d[j], buf_d[lo]
                buf_k[lo], buf_k[j] = buf_k[j], buf_k[lo]
                buf_p[lo], buf_p[j] = buf_p[j], buf_p[lo]
                left_hi = j
                split = j + 1
            level += 1
            if left_hi - lo < hi - split:  # push the larger part, go on with the smaller
                stack[sp] = split
                stack[sp + 1] = hi
                hi = left_hi
            else:
                stack[sp] = lo
                stack[sp + 1] = left_hi
                lo = split
            stack[sp + 2] = level
            sp += 3
        for i in range(lo + 1, hi):
            dd = buf_d[i]
            kk = buf_k[i]
            pp = buf_p[i]
            j = i - 1
            while j >= lo and (buf_d[j] > dd or (buf_d[j] == dd and buf_k[j] > kk)):
                buf_d[j + 1] = buf_d[j]
                buf_k[j + 1] = buf_k[j]
                buf_p[j + 1] = buf_p[j]
                j -= 1
            buf_d[j + 1] = dd
            buf_k[j + 1] = kk
            buf_p[j + 1] = pp


#: What :func:`knn_pass` computes (its ``mode``)
CV_LOSSES, MEANS, INDICES = 0, 1, 2


def _types():
    from numba import types as t

    return t, t.float64[::1], t.float64[:, ::1], t.int64[::1], t.int64[:, ::1], t.int64


def query_signature():
    """The signature :func:`query_one` is compiled for (the one :func:`knn_pass` calls)."""
    t, f1, f2, i1, _, i = _types()
    return i(f1, i, i, f2, i1, i1, i1, i1, i1, f2, f2, f1, i1, i1, f1, i1, f1)


def sort_signature():
    """The signature :func:`sort_neighbours` is compiled for (the one :func:`knn_pass`
    calls)."""
    t, f1, _, i1, _, i = _types()
    return t.none(f1, i1, i1, i, i1)


def _pass_signature():
    """The signature :func:`knn_pass` is compiled for. ``query`` and ``sort`` are
    first-class functions (:func:`query_one`, :func:`sort_neighbours`, compiled for
    :func:`query_signature` and :func:`sort_signature`): the pass calls them through
    their addresses, so it compiles without them (in parallel with them on a first run),
    and they compile once, not again inside each copy of the pass."""
    t, f1, f2, i1, i2, i = _types()
    query, sort = t.FunctionType(query_signature()), t.FunctionType(sort_signature())
    return t.none(i, query, sort, f2, i1, i1, i, f2, f1, i1, i1, i1, i1, f2, f2, i1, t.float64,
                  i, f2, i2, f2, i2, i2, f2, i2, f2, i2, i, i)


def _split_workers(args, n_threads):
    """:func:`knn_pass`'s arguments for each of up to ``n_threads`` threads running its
    serial copy at once: each takes a contiguous block of the call's workers."""
    lo, hi = args[-2], args[-1]
    n = hi - lo
    n_parts = max(1, min(n_threads, n))
    return [(*args[:-2], lo + t * n // n_parts, lo + (t + 1) * n // n_parts)
            for t in range(n_parts)]


@batch_kernel(signature=_pass_signature, split=_split_workers)
def knn_pass(mode, query, sort, Q, q_group, ref_group, k, XT, yr, key, start, end, child,
             lower, upper, grid, prior, chunk, out, out_idx, buf_d, buf_k, buf_p, leaf_d,
             stack_node, stack_lb, sort_stack, w_lo, w_hi):
    """Query the tree for the ``k`` nearest references of every row of ``Q`` (with
    ``query``, :func:`query_one`; sorted by ``sort``, :func:`sort_neighbours`) and write,
    by ``mode``:

    - ``CV_LOSSES``: the cross-validated squared losses of k-NN forecasts, for every k
      in ``grid``. ``Q`` is the data in tree order (row ``q`` is tree position ``q``,
      outcome ``yr[q]``) and ``q_group``/``ref_group`` the folds in tree order: each
      query's ``max(grid)`` nearest references outside its fold are taken in (distance,
      index) order and the forecast for ``k`` is ``(sum of the first k outcomes + prior)
      / (k + 2 prior)`` (the mean outcome when ``prior`` is 0). ``out[b, g]``
      (n_chunks, len(grid)) is the sum of ``(forecast - yr[q])**2`` over the queries of
      chunk ``b`` (``chunk`` consecutive rows; the caller sums the rows in order).
    - ``MEANS``: ``out[q, 0] = (sum of yr over the k nearest references + prior) /
      (k + 2 prior)`` (``q_group`` and ``ref_group`` must differ everywhere).
    - ``INDICES``: the k nearest references of each query in (distance, index) order,
      their indices (``key``) into ``out_idx[q]`` and squared distances into ``out[q]``.

    The scratch arrays have one row per worker (``buf_*``: ``2k + 64`` columns,
    ``leaf_d``: the largest leaf, ``stack_*``: the tree's depth + 2, ``sort_stack``:
    :data:`SORT_STACK`); of ``W`` workers, worker ``w`` takes the chunks from
    ``w n_chunks // W`` to ``(w + 1) n_chunks // W`` (contiguous, so that threads, each
    given a contiguous block of workers, get equal shares of chunks). This call runs the
    workers ``w_lo`` to ``w_hi - 1`` (all of them: 0 and ``W``; a block of them when
    Python threads share the serial copy). The results do not depend on the number of
    workers or threads. Nothing is allocated here.
    """
    n_q = Q.shape[0]
    n_grid = grid.shape[0]
    n_chunks = (n_q + chunk - 1) // chunk
    n_work = buf_d.shape[0]
    for w in prange(w_lo, w_hi):
        bd = buf_d[w]
        bk = buf_k[w]
        bp = buf_p[w]
        for b in range(w * n_chunks // n_work, (w + 1) * n_chunks // n_work):
            if mode == CV_LOSSES:
                for g in range(n_grid):
                    out[b, g] = 0.0
            for q in range(b * chunk, min(n_q, (b + 1) * chunk)):
                count = query(Q[q], q_group[q], k, XT, key, ref_group, start, end, child,
                              lower, upper, bd, bk, bp, leaf_d[w], stack_node[w], stack_lb[w])
                total = 0.0
                if mode == MEANS:
                    for r in range(count):
                        total += yr[bp[r]]
                    out[q, 0] = (total + prior) / (count + 2.0 * prior)
                    continue
                sort(bd, bk, bp, count, sort_stack[w])
                if mode == INDICES:
                    for r in range(count):
                        out_idx[q, r] = bk[r]
                        out[q, r] = bd[r]
                    continue
                g = 0
                for r in range(count):
                    total += yr[bp[r]]
                    while g < n_grid and grid[g] == r + 1:
                        diff = (total + prior) / (grid[g] + 2.0 * prior) - yr[q]
                        out[b, g] += diff * diff
                        g += 1
