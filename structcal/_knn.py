"""Numba KD-tree for exact k-nearest-neighbour queries (private: inputs are trusted).

The region forecasters query every training event for up to ~600 neighbours, which a
brute-force scan does in O(n^2) time. A KD-tree (median splits on the widest dimension,
implicit binary layout: node ``i`` has children ``2i+1`` and ``2i+2``, leaves hold
``leaf_size/2..leaf_size`` points) answers each query in roughly O(k log n) on
low-dimensional features, so cross-validating k over all events costs O(n k log n).

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

from ._numba import batch_kernel, kernel, prange

#: Points per leaf (at most). 40 is a good trade-off for k of tens to hundreds.
LEAF_SIZE = 40


def n_tree_levels(n, leaf_size=LEAF_SIZE):
    """Return the number of levels of the implicit tree over ``n`` points (1: one leaf)."""
    return int(np.log2(max(1.0, (n - 1) / leaf_size))) + 1


@kernel
def _select_nth(X, perm, start, end, nth, dim):
    """Sort ``perm[start:end]`` partially by ``X[perm, dim]`` (Hoare quickselect).

    Afterwards ``X[perm[nth], dim]`` is the value of rank ``nth``, smaller values
    before it and larger after.
    """
    lo = start
    hi = end - 1
    while hi > lo:
        mid = (lo + hi) // 2
        a = X[perm[lo], dim]
        b = X[perm[mid], dim]
        c = X[perm[hi], dim]
        pivot = max(min(a, b), min(max(a, b), c))  # median of three
        i = lo
        j = hi
        while i <= j:
            while X[perm[i], dim] < pivot:
                i += 1
            while X[perm[j], dim] > pivot:
                j -= 1
            if i <= j:
                t = perm[i]
                perm[i] = perm[j]
                perm[j] = t
                i += 1
                j -= 1
        if nth <= j:
            hi = j
        elif nth >= i:
            lo = i
        else:
            return


@kernel
def build_kdtree(X, n_levels):
    """Build the tree over the rows of ``X`` (n, d).

    Returns ``perm`` (n,) (tree position -> row of ``X``), ``start``/``end`` (n_nodes,)
    (each node's range of tree positions) and ``lower``/``upper`` (n_nodes, d) (each
    node's bounding box), with ``n_nodes = 2**n_levels - 1``.
    """
    n, d = X.shape
    n_nodes = 2**n_levels - 1
    perm = np.arange(n)
    start = np.zeros(n_nodes, dtype=np.int64)
    end = np.zeros(n_nodes, dtype=np.int64)
    lower = np.zeros((n_nodes, d))
    upper = np.zeros((n_nodes, d))
    end[0] = n
    for node in range(n_nodes):  # parents come before children
        s = start[node]
        e = end[node]
        for f in range(d):
            lower[node, f] = np.inf
            upper[node, f] = -np.inf
        for p in range(s, e):
            for f in range(d):
                v = X[perm[p], f]
                if v < lower[node, f]:
                    lower[node, f] = v
                if v > upper[node, f]:
                    upper[node, f] = v
        left = 2 * node + 1
        if left < n_nodes:
            dim = 0
            spread = -1.0
            for f in range(d):
                if upper[node, f] - lower[node, f] > spread:
                    spread = upper[node, f] - lower[node, f]
                    dim = f
            mid = s + (e - s) // 2
            if e - s > 1:
                _select_nth(X, perm, s, e, mid, dim)
            start[left] = s
            end[left] = mid
            start[left + 1] = mid
            end[left + 1] = e
    return perm, start, end, lower, upper


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


@kernel
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
def query_one(x, group, k, XT, key, ref_group, start, end, lower, upper, buf_d, buf_k, buf_p,
              leaf_d, stack_node, stack_lb):
    """Find the ``k`` nearest tree positions of ``x`` whose ``ref_group`` is not ``group``.

    ``XT`` is the data in tree order, transposed (d, n), and ``key`` the tie-breaking
    index of each tree position. Candidates are gathered into ``buf_d``/``buf_k``/
    ``buf_p`` (distance, index, tree position; scratch of length ``>= 2k``); when full,
    only the ``k`` best are kept and the k-th (distance, index) becomes the admission
    threshold and the pruning radius. ``leaf_d`` is scratch of the largest leaf's size.
    Leaves the neighbours, unsorted, in ``buf[:count]`` and returns ``count`` (``k``, or
    fewer if fewer eligible references exist).
    """
    n_nodes = start.shape[0]
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
        left = 2 * node + 1
        if left >= n_nodes:
            s = start[node]
            m = end[node] - s
            for r in range(m):  # distances to the whole leaf, feature by feature (vectorised)
                leaf_d[r] = 0.0
            for f in range(d):
                v = x[f]
                for r in range(m):
                    diff = XT[f, s + r] - v
                    leaf_d[r] += diff * diff
            for r in range(m):
                dist = leaf_d[r]
                p = s + r
                if dist < tau or (dist == tau and key[p] < key_cut):
                    if ref_group[p] == group:
                        continue
                    if count == cap:  # keep the k best; their k-th is the new threshold
                        _select_pairs(buf_d, buf_k, buf_p, 0, count, k - 1)
                        tau = buf_d[k - 1]
                        key_cut = buf_k[k - 1]
                        count = k
                        if not (dist < tau or (dist == tau and key[p] < key_cut)):
                            continue
                    buf_d[count] = dist
                    buf_k[count] = key[p]
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


@kernel
def sort_neighbours(buf_d, buf_k, buf_p, count):
    """Sort ``buf[:count]`` in place into (distance, index) order.

    Insertion sort below 16 entries, else quicksort splitting at the median found by
    :func:`_select_pairs` (stack depth at most log2(count)).
    """
    stack = np.empty(128, dtype=np.int64)
    stack[0] = 0
    stack[1] = count
    sp = 2
    while sp > 0:
        sp -= 2
        lo = stack[sp]
        hi = stack[sp + 1]
        if hi - lo <= 16:
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
            continue
        mid = (lo + hi) // 2
        _select_pairs(buf_d, buf_k, buf_p, lo, hi, mid)  # median split: depth <= log2(count)
        stack[sp] = lo
        stack[sp + 1] = mid
        stack[sp + 2] = mid + 1
        stack[sp + 3] = hi
        sp += 4


@batch_kernel
def cv_losses(XT, yr, key, fold, start, end, lower, upper, grid, chunk, out):
    """Sum the cross-validated squared losses of k-NN forecasts, for every k in ``grid``.

    Every reference (tree position ``q``) is a query: its ``max(grid)`` nearest
    references outside its own fold are found in (distance, index) order and the
    forecast for ``k`` is the mean outcome of the first ``k``. Writes into ``out``
    (n_chunks, len(grid)) the sum of ``(forecast - yr[q])**2`` over the queries of each
    chunk of ``chunk`` consecutive tree positions (the caller sums the rows in order, so
    the result does not depend on the number of threads). No neighbour table is kept.
    """
    d, n = XT.shape
    k = grid[grid.shape[0] - 1]
    n_chunks = out.shape[0]
    for b in prange(n_chunks):
        buf_d, buf_k, buf_p, leaf_d, stack_node, stack_lb = _scratch(k, start, end)
        x = np.empty(d)
        for g in range(grid.shape[0]):
            out[b, g] = 0.0
        for q in range(b * chunk, min(n, (b + 1) * chunk)):
            for f in range(d):
                x[f] = XT[f, q]
            count = query_one(x, fold[q], k, XT, key, fold, start, end, lower, upper,
                              buf_d, buf_k, buf_p, leaf_d, stack_node, stack_lb)
            sort_neighbours(buf_d, buf_k, buf_p, count)
            total = 0.0
            g = 0
            for r in range(count):
                total += yr[buf_p[r]]
                while g < grid.shape[0] and grid[g] == r + 1:
                    diff = total / grid[g] - yr[q]
                    out[b, g] += diff * diff
                    g += 1


@kernel
def _scratch(k, start, end):
    """Allocate per-thread scratch for queries: candidate buffers, leaf distances, stack."""
    n_levels = int(np.log2(start.shape[0] + 1))
    leaf = 1
    for node in range(start.shape[0] // 2, start.shape[0]):
        leaf = max(leaf, end[node] - start[node])
    cap = 2 * k + 64
    return (np.empty(cap), np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64),
            np.empty(leaf), np.empty(2 * n_levels + 2, dtype=np.int64),
            np.empty(2 * n_levels + 2))


@batch_kernel
def neighbour_means(queries, k, XT, yr, key, start, end, lower, upper, out):
    """Write the mean of ``yr`` over the ``k`` nearest references of each query."""
    n_q = queries.shape[0]
    none = np.full(XT.shape[1], -1, dtype=np.int64)
    chunk = 256
    for b in prange((n_q + chunk - 1) // chunk):
        buf_d, buf_k, buf_p, leaf_d, stack_node, stack_lb = _scratch(k, start, end)
        for q in range(b * chunk, min(n_q, (b + 1) * chunk)):
            count = query_one(queries[q], 0, k, XT, key, none, start, end, lower, upper,
                              buf_d, buf_k, buf_p, leaf_d, stack_node, stack_lb)
            total = 0.0
            for r in range(count):
                total += yr[buf_p[r]]
            out[q] = total / count


@batch_kernel
def neighbour_indices(queries, k, XT, key, start, end, lower, upper, out_idx, out_dist):
    """Find the ``k`` nearest references of each query in (distance, index) order.

    Writes their indices (``key``) into ``out_idx`` and squared distances into
    ``out_dist``.
    """
    n_q = queries.shape[0]
    none = np.full(XT.shape[1], -1, dtype=np.int64)
    chunk = 256
    for b in prange((n_q + chunk - 1) // chunk):
        buf_d, buf_k, buf_p, leaf_d, stack_node, stack_lb = _scratch(k, start, end)
        for q in range(b * chunk, min(n_q, (b + 1) * chunk)):
            count = query_one(queries[q], 0, k, XT, key, none, start, end, lower, upper,
                              buf_d, buf_k, buf_p, leaf_d, stack_node, stack_lb)
            sort_neighbours(buf_d, buf_k, buf_p, count)
            for r in range(count):
                out_idx[q, r] = buf_k[r]
                out_dist[q, r] = buf_d[r]
