"""Numba kernels for node-set events: components, object matching, boundaries, hulls.

Private: inputs are trusted (validated by :mod:`structcal.events.objects` and
:mod:`structcal.events.nodesets`). Every kernel is linear in the nodes and edges it reads,
so that sampled event probabilities (a components pass per sample) stay cheap on images.
"""

import numpy as np

from .._numba import kernel
from ..inference._graph import _uniform


@kernel
def components(labels, indptr, indices, background, component, stack):
    """Connected components of the nodes of each label other than ``background``.

    Two nodes are joined when an edge links them and they have the same label. Components
    are numbered in the order of their smallest node (nodes are scanned in increasing
    order, each new one flooding its component); ``component`` is -1 on background
    nodes (``background = -1``: none). ``stack`` is scratch of ``n_nodes`` entries.
    Returns the number of components.
    """
    n = labels.shape[0]
    for i in range(n):
        component[i] = -1
    n_comp = 0
    for s in range(n):
        if component[s] >= 0 or labels[s] == background:
            continue
        lab = labels[s]
        component[s] = n_comp
        stack[0] = s
        top = 1
        while top > 0:
            top -= 1
            i = stack[top]
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                if component[j] < 0 and labels[j] == lab:
                    component[j] = n_comp
                    stack[top] = j
                    top += 1
        n_comp += 1
    return n_comp


@kernel
def match(component, n_comp, gold, n_gold, labels, gold_labels, best, gold_best):
    """Best IoU of every predicted component with a gold one, and of every gold component.

    ``best[p] = max_g |p & g| / |p | g|`` (0 without overlap), ``gold_best`` likewise. A
    node counts in the intersection of ``p`` and ``g`` only if it has the same class in
    both labelings (``labels[i] == gold_labels[i]``): objects of different classes never
    match. The intersections are counted component by component (members grouped by a
    counting sort), so the cost is linear in the nodes.
    """
    n = component.shape[0]
    size_p = np.zeros(n_comp, dtype=np.int64)
    size_g = np.zeros(n_gold, dtype=np.int64)
    for i in range(n):
        if component[i] >= 0:
            size_p[component[i]] += 1
        if gold[i] >= 0:
            size_g[gold[i]] += 1
    start = np.zeros(n_comp + 1, dtype=np.int64)
    for p in range(n_comp):
        start[p + 1] = start[p] + size_p[p]
    fill = start[:-1].copy()
    members = np.empty(start[n_comp], dtype=np.int64)
    for i in range(n):
        p = component[i]
        if p >= 0:
            members[fill[p]] = i
            fill[p] += 1
    for p in range(n_comp):
        best[p] = 0.0
    for g in range(n_gold):
        gold_best[g] = 0.0
    count = np.zeros(n_gold, dtype=np.int64)
    touched = np.empty(n_gold, dtype=np.int64)
    for p in range(n_comp):
        n_touched = 0
        for t in range(start[p], start[p + 1]):
            i = members[t]
            g = gold[i]
            if g >= 0 and labels[i] == gold_labels[i]:
                if count[g] == 0:
                    touched[n_touched] = g
                    n_touched += 1
                count[g] += 1
        for t in range(n_touched):
            g = touched[t]
            inter = count[g]
            iou = inter / (size_p[p] + size_g[g] - inter)
            if iou > best[p]:
                best[p] = iou
            if iou > gold_best[g]:
                gold_best[g] = iou
            count[g] = 0


@kernel
def sample_rows(q, offsets, seeds, sample, out):
    """One label per row of ``q`` (node ``i`` of item ``g``: rows
    ``offsets[g]:offsets[g+1]``) from the uniform ``u = _uniform(seeds[g], sample * n_g +
    i - offsets[g])``: the first label whose cumulative weight reaches ``u * (row sum)``
    (as ``np.cumsum`` sums, left to right). An item's draws depend only on its seed."""
    n, K = q.shape
    for g in range(offsets.shape[0] - 1):
        n_g = offsets[g + 1] - offsets[g]
        for i in range(offsets[g], offsets[g + 1]):
            _sample_row(q, i, _uniform(seeds[g], sample * n_g + i - offsets[g]), out)


@kernel
def _sample_row(q, i, u, out):
    """Label of row ``i`` of ``q`` for the uniform ``u`` (see :func:`sample_rows`)."""
    K = q.shape[1]
    total = 0.0
    for a in range(K):
        total += q[i, a]
    t = u * total
    cum = 0.0
    lab = 0
    for a in range(K):
        cum += q[i, a]
        if cum < t:
            lab += 1
    out[i] = min(lab, K - 1)


@kernel
def boundary(members, member_offsets, indptr, indices, mark, counts, out):
    """The neighbours outside each event's node set, sorted, each once.

    ``mark`` is scratch of ``n_nodes`` entries holding -1. First call with an empty
    ``out`` to get the ``counts``; then with ``out`` of ``counts.sum()`` entries.
    """
    n_events = member_offsets.shape[0] - 1
    pos = 0
    for e in range(n_events):
        for t in range(member_offsets[e], member_offsets[e + 1]):
            mark[members[t]] = 2 * e  # member of e
        start = pos
        for t in range(member_offsets[e], member_offsets[e + 1]):
            i = members[t]
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                if mark[j] != 2 * e and mark[j] != 2 * e + 1:
                    mark[j] = 2 * e + 1  # boundary of e, recorded once
                    if out.shape[0]:
                        out[pos] = j
                    pos += 1
        counts[e] = pos - start
        if out.shape[0]:
            out[start:pos].sort()
        for t in range(member_offsets[e], member_offsets[e + 1]):
            i = members[t]
            for k in range(indptr[i], indptr[i + 1]):
                mark[indices[k]] = -1
            mark[i] = -1


@kernel
def _cross(ox, oy, ax, ay, bx, by):
    return (ax - ox) * (by - oy) - (ay - oy) * (bx - ox)


@kernel
def pixel_hull_areas(rows, cols, member_offsets, out):
    """Area of the convex hull of the unit squares of each event's pixels.

    ``rows``, ``cols``: pixel coordinates of the members laid end to end. Only the
    leftmost and rightmost pixel of each row can carry hull vertices, so the hull is that
    of their 4 corners per row (Andrew's monotone chain; the shoelace formula for the
    area).
    """
    n_events = member_offsets.shape[0] - 1
    for e in range(n_events):
        a, b = member_offsets[e], member_offsets[e + 1]
        r0 = rows[a]
        r1 = rows[a]
        for t in range(a, b):
            r0 = min(r0, rows[t])
            r1 = max(r1, rows[t])
        nr = int(r1 - r0) + 1
        lo = np.full(nr, np.inf)
        hi = np.full(nr, -np.inf)
        for t in range(a, b):
            k = int(rows[t] - r0)
            lo[k] = min(lo[k], cols[t])
            hi[k] = max(hi[k], cols[t])
        # corner points, sorted by (x = row, y = col): per row r the corners at
        # r - 0.5 and r + 0.5 of its extreme columns
        px = np.empty(4 * nr)
        py = np.empty(4 * nr)
        m = 0
        for k in range(nr):
            if lo[k] > hi[k]:
                continue
            for side in (-0.5, 0.5):
                px[m] = r0 + k + side
                py[m] = lo[k] - 0.5
                px[m + 1] = r0 + k + side
                py[m + 1] = hi[k] + 0.5
                m += 2
        order = _lexsort2(px[:m], py[:m])
        hx = np.empty(2 * m + 1)
        hy = np.empty(2 * m + 1)
        h = 0
        for t in range(m):  # lower hull
            x, y = px[order[t]], py[order[t]]
            while h >= 2 and _cross(hx[h - 2], hy[h - 2], hx[h - 1], hy[h - 1], x, y) <= 0:
                h -= 1
            hx[h] = x
            hy[h] = y
            h += 1
        lower = h + 1
        for t in range(m - 2, -1, -1):  # upper hull
            x, y = px[order[t]], py[order[t]]
            while h >= lower and _cross(hx[h - 2], hy[h - 2], hx[h - 1], hy[h - 1], x, y) <= 0:
                h -= 1
            hx[h] = x
            hy[h] = y
            h += 1
        area = 0.0
        for t in range(h - 1):
            area += hx[t] * hy[t + 1] - hx[t + 1] * hy[t]
        out[e] = abs(area) / 2.0


@kernel
def _lexsort2(x, y):
    """Indices sorting the points by ``x``, then ``y``."""
    order = np.argsort(y, kind="mergesort")
    return order[np.argsort(x[order], kind="mergesort")]


@kernel
def first_nodes(component, out):
    """``out[c]``: the smallest node of component ``c`` (``out`` holds -1 on entry)."""
    for i in range(component.shape[0]):
        c = component[i]
        if c >= 0 and out[c] < 0:
            out[c] = i
