"""Numba kernels for exact k-nearest-neighbour queries (private: inputs are trusted).

Brute force, which beats tree indexes for the region forecasters' workload: a few
thousand to tens of thousands of events, a handful to a few dozen standardised features,
and k up to several hundred (a KD-tree query at k = 600 on 20,000 points in 11
dimensions takes over 10 s; this takes about a second). Distances are computed feature by
feature over a (n_features, n_ref) transposed copy of the reference points, so the inner
loop runs over contiguous memory and vectorises.
"""

import numpy as np

from ._numba import batch_kernel, kernel, prange


@kernel
def _select_k(dist, k, cand, cand_d, sel, sel_d):
    """Indices of the ``k`` smallest entries of ``dist`` (ties to the lower index), sorted.

    A threshold at a slightly larger rank is first estimated on a strided sample of
    ``dist``; the entries below it are gathered in one pass and only those are partitioned
    and sorted. If the estimate was too low (rare), the exact partition of all of ``dist``
    is used. ``cand``/``cand_d`` are (n,) scratch, ``sel``/``sel_d`` (k,) outputs.
    """
    n = dist.shape[0]
    m = min(n, 4 * k + 512)
    if m < n:
        step = n // m
        sample = dist[::step].copy()
        rank = min(sample.shape[0] - 1, int(1.3 * k * sample.shape[0] / n) + 8)
        guess = np.partition(sample, rank)[rank]
    else:
        guess = np.inf
    c = 0
    for j in range(n):
        if dist[j] <= guess:
            cand[c] = j
            c += 1
    if c < k:
        guess = np.inf
        c = n
        for j in range(n):
            cand[j] = j
    for r in range(c):
        cand_d[r] = dist[cand[r]]
    tau = np.partition(cand_d[:c], k - 1)[k - 1]
    # every candidate below tau, then the ties at tau in index order (cand is sorted)
    q = 0
    for r in range(c):
        if cand_d[r] < tau:
            sel[q] = cand[r]
            q += 1
    for r in range(c):
        if q == k:
            break
        if cand_d[r] == tau:
            sel[q] = cand[r]
            q += 1
    for r in range(k):
        sel_d[r] = dist[sel[r]]
    order = np.argsort(sel_d, kind="mergesort")  # stable: ties stay in index order
    return order


@batch_kernel
def knn_batch(queries, ref_t, k, chunk, out_idx, out_dist):
    """The ``k`` nearest reference points of every query, sorted by (distance, index).

    ``queries`` is (n_q, d); ``ref_t`` the references transposed, (d, n_ref), with
    ``1 <= k <= n_ref``. Writes indices into ``out_idx`` (n_q, k) and squared Euclidean
    distances into ``out_dist``. Ties in distance go to the lower reference index. Scratch
    is allocated once per chunk of ``chunk`` queries.
    """
    n_q, d = queries.shape
    n_ref = ref_t.shape[1]
    n_chunks = (n_q + chunk - 1) // chunk
    for b in prange(n_chunks):
        dist = np.empty(n_ref)
        cand = np.empty(n_ref, dtype=np.int64)
        cand_d = np.empty(n_ref)
        sel = np.empty(k, dtype=np.int64)
        sel_d = np.empty(k)
        for q in range(b * chunk, min(n_q, (b + 1) * chunk)):
            for j in range(n_ref):
                dist[j] = 0.0
            for f in range(d):
                x = queries[q, f]
                for j in range(n_ref):
                    diff = ref_t[f, j] - x
                    dist[j] += diff * diff
            order = _select_k(dist, k, cand, cand_d, sel, sel_d)
            for r in range(k):
                out_idx[q, r] = sel[order[r]]
                out_dist[q, r] = sel_d[order[r]]
