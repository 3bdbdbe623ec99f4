"""Numba kernels for the calibration metrics (private; inputs are trusted).

Conventions: scores ``s`` are float64 in [0, 1], outcomes ``y`` are float64 0/1, weights
``w`` float64 >= 0 (ignored unless ``use_w``: then every weight is 1). A bootstrap
resample is the same data with weights ``w * counts`` (``counts`` = multiplicities), so
the point estimate and each resample run the same code.

Per-bin statistics are rows of a (5, n_bins) array: total weight, sum of w*s, sum of w*y,
sum of w*s**2 and sum of w*s*y.
"""

import numpy as np

from .._numba import kernel, parallel_kernel, prange
from ._binning import N_STATS, STAT_S, STAT_SS, STAT_SY, STAT_W, STAT_Y


@kernel
def _weight(w, use_w, i):
    # (a second optional multiplier array here made every loop ~6x slower)
    return w[i] if use_w else 1.0


@kernel
def _accumulate(stats, b, a, si, yi):
    stats[STAT_W, b] += a
    stats[STAT_S, b] += a * si
    stats[STAT_Y, b] += a * yi
    stats[STAT_SS, b] += a * si * si
    stats[STAT_SY, b] += a * si * yi


@kernel
def _cell(x, n_cells):
    return min(int(x * n_cells), n_cells - 1)


@kernel
def _count_table(values, lo, hi, n_cells):
    """Search table for :func:`_upper_count`: ``table[c]`` = number of ``values[lo:hi]``
    (sorted) whose cell ``floor(v * n_cells)`` is before ``c``."""
    table = np.zeros(n_cells + 1, dtype=np.int64)
    for k in range(lo, hi):
        table[_cell(values[k], n_cells) + 1] += 1
    for c in range(n_cells):
        table[c + 1] += table[c]
    return table


@kernel
def _upper_count(values, lo, hi, table, n_cells, x):
    """Number of ``values[lo:hi]`` (sorted, in [0, 1]) that are <= x.

    Values in earlier cells than ``x`` are all below it (the cell index is monotone), so
    the count starts at ``table[cell(x)]`` and only values in ``x``'s own cell are
    compared: O(1) on average, without the unpredictable branches of a binary search.
    """
    c = _cell(x, n_cells)
    k = lo + table[c]
    while k < hi and values[k] <= x:
        k += 1
    return k - lo


@kernel
def uniform_edges(n_bins):
    """Edges ``b / n_bins`` (correctly rounded: 3 / 10 is the double nearest 0.3)."""
    return np.arange(n_bins + 1) / n_bins


@kernel
def _uniform_bin(si, n_bins):
    """The bin ``b`` with ``b / n_bins <= si < (b + 1) / n_bins`` (the last bin closed),
    comparing with the edges themselves: ``floor(si * n_bins)`` alone can be off by one
    at an edge (0.7 * 10 rounds to 7.000000000000001, 0.3 lies below 3 / 10 = 0.3 + 0)."""
    b = min(int(si * n_bins), n_bins - 1)
    if b > 0 and si < b / n_bins:
        b -= 1
    elif b < n_bins - 1 and si >= (b + 1) / n_bins:
        b += 1
    return b


@kernel
def _stats_uniform(s, y, w, use_w, n_bins, stats):
    for i in range(s.shape[0]):
        wi = _weight(w, use_w, i)
        si = s[i]
        _accumulate(stats, _uniform_bin(si, n_bins), wi, si, y[i])


@kernel
def _stats_edges(s, y, w, use_w, edges, stats):
    n_bins = edges.shape[0] - 1
    n_cells = 4 * n_bins + 64
    table = _count_table(edges, 1, n_bins, n_cells)
    for i in range(s.shape[0]):
        wi = _weight(w, use_w, i)
        si = s[i]
        b = _upper_count(edges, 1, n_bins, table, n_cells, si)
        _accumulate(stats, b, wi, si, y[i])


@kernel
def _stats_convex(s, y, w, use_w, edges, uniform, stats):
    n_bins = edges.shape[0] - 1
    if n_bins == 1:
        _stats_uniform(s, y, w, use_w, 1, stats)
        return
    centres = np.empty(n_bins)
    for b in range(n_bins):
        centres[b] = 0.5 * (edges[b] + edges[b + 1])
    n_cells = 4 * n_bins + 64
    table = _count_table(centres, 0, n_bins, n_cells)
    for i in range(s.shape[0]):
        wi = _weight(w, use_w, i)
        si = s[i]
        # left centre j in [0, n_bins - 2] and the share frac of the right one, clamped to
        # [0, 1] so that forecasts outside the centres go wholly to the end bins
        if uniform:
            t = si * n_bins - 0.5
            j = min(max(int(t), 0), n_bins - 2)
            frac = t - j
        else:
            j = min(max(_upper_count(centres, 0, n_bins, table, n_cells, si) - 1, 0), n_bins - 2)
            width = centres[j + 1] - centres[j]
            frac = (si - centres[j]) / width if width > 0.0 else 1.0
        frac = min(max(frac, 0.0), 1.0)
        _accumulate(stats, j, wi * (1.0 - frac), si, y[i])
        _accumulate(stats, j + 1, wi * frac, si, y[i])


@kernel
def accumulate_bin_stats(s, y, w, use_w, edges, uniform, convex, stats):
    """Add the per-bin statistics of these samples to ``stats`` (see :func:`bin_stats`)."""
    n_bins = edges.shape[0] - 1
    # one loop per mode: a single loop with every branch compiles to much slower code
    if convex:
        _stats_convex(s, y, w, use_w, edges, uniform, stats)
    elif uniform:
        _stats_uniform(s, y, w, use_w, n_bins, stats)
    else:
        _stats_edges(s, y, w, use_w, edges, stats)


@kernel
def bin_stats(s, y, w, use_w, edges, uniform, convex):
    """Per-bin statistics of a binning with ``n_bins = len(edges) - 1`` bins.

    Hard mapping: bin ``b`` holds ``edges[b] <= s < edges[b+1]`` (the last bin is closed),
    also with ``uniform`` (edges :func:`uniform_edges`, found in O(1)). Convex mapping ("linear binning"): each sample is split between the two bins
    whose centres surround it, in proportion to its distance to them (all of it to the
    first/last bin below the first/above the last centre).
    """
    stats = np.zeros((N_STATS, edges.shape[0] - 1))
    accumulate_bin_stats(s, y, w, use_w, edges, uniform, convex, stats)
    return stats


@kernel
def bin_index(s, edges, uniform):
    """Hard-mapping bin of each score, with the conventions of :func:`bin_stats`."""
    n_bins = edges.shape[0] - 1
    out = np.empty(s.shape[0], dtype=np.int64)
    if uniform:
        for i in range(s.shape[0]):
            out[i] = _uniform_bin(s[i], n_bins)
    else:
        n_cells = 4 * n_bins + 64
        table = _count_table(edges, 1, n_bins, n_cells)
        for i in range(s.shape[0]):
            out[i] = _upper_count(edges, 1, n_bins, table, n_cells, s[i])
    return out


@kernel
def sorted_quantile_edges(s_sorted, w, use_w, n_bins):
    """Equal-mass bin edges from scores sorted in increasing order.

    Returns ``edges`` of shape (n_bins + 1,) with ``edges[0] = 0`` and ``edges[-1] = 1``.
    Interior edge ``k`` sits halfway between ``v_k``, the smallest score whose cumulative
    weight ``W(s <= v_k)`` exceeds ``k * W / n_bins``, and the largest score below ``v_k``
    (at ``v_k`` itself if there is none). Tied scores therefore always share a bin, and
    the edges depend only on the multiset of (score, weight) pairs, not on their order.
    """
    n = s_sorted.shape[0]
    edges = np.empty(n_bins + 1)
    edges[0] = 0.0
    edges[n_bins] = 1.0
    total = 0.0
    for i in range(n):
        total += _weight(w, use_w, i)
    if total <= 0.0:
        for k in range(1, n_bins):
            edges[k] = k / n_bins
        return edges
    tol = 1e-12 * total
    k = 1
    running = 0.0
    have_prev = False
    prev_value = 0.0
    i = 0
    while i < n and k < n_bins:
        v = s_sorted[i]
        g = 0.0
        while i < n and s_sorted[i] == v:
            g += _weight(w, use_w, i)
            i += 1
        if g <= 0.0:
            continue
        running += g
        while k < n_bins and k * total / n_bins + tol < running:
            edges[k] = 0.5 * (prev_value + v) if have_prev else v
            k += 1
        have_prev = True
        prev_value = v
    while k < n_bins:  # only reachable through rounding: put the remaining edges at the top
        edges[k] = prev_value
        k += 1
    return edges


@kernel
def summarize_bins(stats):
    """(ECE, MCE, plug-in squared L2 error, debiased squared L2 error) of binned statistics.

    Empty bins are skipped. The debiased term of a bin is
    ``(t - f)**2 - t (1 - t) / (n_b - 1)`` with ``n_b`` its total weight (frequency
    weights); bins with ``n_b <= 1`` contribute nothing to it (Kumar et al., 2019).
    """
    n_bins = stats.shape[1]
    total = 0.0
    for b in range(n_bins):
        total += stats[STAT_W, b]
    if total <= 0.0:
        return np.nan, np.nan, np.nan, np.nan
    ece = 0.0
    mce = 0.0
    l2 = 0.0
    l2d = 0.0
    for b in range(n_bins):
        nb = stats[STAT_W, b]
        if nb <= 0.0:
            continue
        f = stats[STAT_S, b] / nb
        t = stats[STAT_Y, b] / nb
        gap = abs(t - f)
        ece += nb * gap
        if gap > mce:
            mce = gap
        l2 += nb * gap * gap
        if nb > 1.0:
            l2d += nb * (gap * gap - t * (1.0 - t) / (nb - 1.0))
    return ece / total, mce, l2 / total, l2d / total


@kernel
def kde_histograms(s, y, w, use_w, n_grid, residual, dens, numer):
    """Linear binning onto ``n_grid`` points of [0, 1] (spacing ``1 / (n_grid - 1)``).

    Adds each sample's weight to ``dens`` and its weighted target (``y - s`` with
    ``residual``, else ``y``) to ``numer``, split between the two surrounding grid points.
    Returns ``(W, sum w*s, sum w*s**2)``.
    """
    last = n_grid - 1
    tw = 0.0
    ts = 0.0
    tss = 0.0
    for i in range(s.shape[0]):
        wi = _weight(w, use_w, i)
        si = s[i]
        t = si * last
        j = min(int(t), last - 1)
        frac = t - j
        target = y[i] - si if residual else y[i]
        a = wi * (1.0 - frac)
        c = wi * frac
        dens[j] += a
        dens[j + 1] += c
        numer[j] += a * target
        numer[j + 1] += c * target
        tw += wi
        ts += wi * si
        tss += wi * si * si
    return tw, ts, tss


# ---------------------------------------------------------------------------------------
# bootstrap

_BLOCK = 8192  # rows per block: a block's counts stay in the L1/L2 cache


@kernel
def _splitmix64(state):
    state = state + np.uint64(0x9E3779B97F4A7C15)
    z = state
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return state, z ^ (z >> np.uint64(31))


@kernel
def _block_counts(seed, n):
    """Number of the ``n`` draws of a resample landing in each block of rows
    (multinomial, by conditional binomials from Numba's generator seeded with ``seed``)."""
    n_blocks = (n + _BLOCK - 1) // _BLOCK
    counts = np.empty(n_blocks, dtype=np.int64)
    np.random.seed(seed)
    draws_left = n
    rows_left = n
    for b in range(n_blocks):
        size = min(_BLOCK, n - b * _BLOCK)
        if rows_left == size:
            counts[b] = draws_left
        else:
            counts[b] = np.random.binomial(draws_left, size / rows_left)
        draws_left -= counts[b]
        rows_left -= size
    return counts


@kernel
def _fill_block(state, count, w, use_w, start, buf):
    """Multiplicities of ``count`` uniform draws among ``len(buf)`` rows (times
    ``w[start:]`` when ``use_w``) into ``buf``; returns the generator state.

    An index is ``(32 random bits * size) >> 32`` (SplitMix64 bits): bias below 2**-19.
    """
    size = buf.shape[0]
    buf[:] = 0.0
    usize = np.uint64(size)
    for _ in range(count):
        state, z = _splitmix64(state)
        buf[np.int64(((z >> np.uint64(32)) * usize) >> np.uint64(32))] += 1.0
    if use_w:
        for k in range(size):
            buf[k] *= w[start + k]
    return state


@kernel
def _initial_state(seed):
    return np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1)


@kernel
def draw_weights(seed, w, use_w, out):
    """Bootstrap weights: multiplicities of ``n`` uniform draws among ``n`` rows, times
    ``w`` when ``use_w``.

    Multinomial resampling done cache-friendly: the draws per block of rows first, then
    the draws within each block. A resample depends only on ``seed``, whichever thread
    runs it. The fused estimators below consume the same weights block by block.
    """
    n = out.shape[0]
    counts = _block_counts(seed, n)
    state = _initial_state(seed)
    for b in range(counts.shape[0]):
        start = b * _BLOCK
        stop = min(start + _BLOCK, n)
        state = _fill_block(state, counts[b], w, use_w, start, out[start:stop])


@kernel
def _resampled_fixed_bin_stats(seed, s, y, w, use_w, edges, uniform, convex, buf):
    """Bin statistics of one resample (fixed edges), block by block from ``draw_weights``'
    weights without materialising them."""
    n = s.shape[0]
    stats = np.zeros((N_STATS, edges.shape[0] - 1))
    counts = _block_counts(seed, n)
    state = _initial_state(seed)
    for b in range(counts.shape[0]):
        start = b * _BLOCK
        stop = min(start + _BLOCK, n)
        blk = buf[: stop - start]
        state = _fill_block(state, counts[b], w, use_w, start, blk)
        accumulate_bin_stats(s[start:stop], y[start:stop], blk, True, edges, uniform, convex,
                             stats)
    return stats


@kernel
def _resampled_kde_histograms(seed, s, y, w, use_w, n_grid, residual, buf, dens, numer):
    """:func:`kde_histograms` of one resample, block by block."""
    n = s.shape[0]
    counts = _block_counts(seed, n)
    state = _initial_state(seed)
    tw = 0.0
    ts = 0.0
    tss = 0.0
    for b in range(counts.shape[0]):
        start = b * _BLOCK
        stop = min(start + _BLOCK, n)
        blk = buf[: stop - start]
        state = _fill_block(state, counts[b], w, use_w, start, blk)
        a, c, d = kde_histograms(s[start:stop], y[start:stop], blk, True, n_grid, residual,
                                 dens, numer)
        tw += a
        ts += c
        tss += d
    return tw, ts, tss


@parallel_kernel
def bootstrap_binned(s, y, w, use_w, seeds, n_bins, quantile, convex, n_chunks, out):
    """Binned summaries (see :func:`summarize_bins`) of each bootstrap resample.

    With ``quantile`` the scores must be sorted (and ``y``, ``w`` permuted alike); the
    equal-mass edges are recomputed on every resample (from a full weight vector).
    Resamples are processed in ``n_chunks`` parallel chunks, each with its own buffers.
    """
    n = s.shape[0]
    R = seeds.shape[0]
    edges_u = uniform_edges(n_bins)
    for c in prange(n_chunks):
        full = np.empty(n if quantile else 0)
        blk = np.empty(_BLOCK)
        for r in range(c * R // n_chunks, (c + 1) * R // n_chunks):
            if quantile:
                draw_weights(seeds[r], w, use_w, full)
                edges = sorted_quantile_edges(s, full, True, n_bins)
                stats = bin_stats(s, y, full, True, edges, False, convex)
            else:
                stats = _resampled_fixed_bin_stats(seeds[r], s, y, w, use_w, edges_u,
                                                   True, convex, blk)
            e, mc, l2, l2d = summarize_bins(stats)
            out[r, 0] = e
            out[r, 1] = mc
            out[r, 2] = l2
            out[r, 3] = l2d


@parallel_kernel
def bootstrap_kde_histograms(
    s, y, w, use_w, seeds, n_grid, residual, n_chunks, dens, numer, moments
):
    """Linear-binned histograms (see :func:`kde_histograms`) of each bootstrap resample."""
    R = seeds.shape[0]
    for c in prange(n_chunks):
        blk = np.empty(_BLOCK)
        for r in range(c * R // n_chunks, (c + 1) * R // n_chunks):
            a, b, m2 = _resampled_kde_histograms(seeds[r], s, y, w, use_w, n_grid, residual,
                                                 blk, dens[r], numer[r])
            moments[r, 0] = a
            moments[r, 1] = b
            moments[r, 2] = m2


@kernel
def all_probabilities(p):
    """Whether every entry of the 1-d float array ``p`` lies in [0, 1] (NaN does not).

    One pass, for the input checks' fast path; the slow path finds and names the culprit.
    """
    ok = True
    for i in range(p.shape[0]):
        v = p[i]
        ok &= (v >= 0.0) & (v <= 1.0)
    return ok


@kernel
def binary_as_float(y, out):
    """Copy 1-d ``y`` into float64 ``out``; return whether every entry is 0 or 1."""
    ok = True
    for i in range(y.shape[0]):
        v = np.float64(y[i])
        out[i] = v
        ok &= (v == 0.0) | (v == 1.0)
    return ok
