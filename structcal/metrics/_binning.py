"""Binned statistics: NumPy for small work, the Numba kernels for the rest (private).

The functions here take the arguments of their namesakes in :mod:`structcal.metrics._kernels`
and return the same values bit for bit: NumPy's ``bincount`` adds each bin's terms one
after the other in input order, as the kernels' loops do, and every term is formed by the
same operations in the same order. Below :data:`structcal._tier.SMALL_WORK` they run in
NumPy, so that scoring a few thousand events neither imports Numba nor compiles a kernel
on a first run; larger inputs go to the kernels.
"""

from __future__ import annotations

import numpy as np

from .._tier import LazyModule, numpy_tier

__all__ = ["STAT_W", "STAT_S", "STAT_Y", "STAT_SS", "STAT_SY", "N_STATS", "uniform_edges",
           "bin_stats", "bin_index", "summarize_bins", "binary_as_float", "all_probabilities"]

_kernels = LazyModule("structcal.metrics._kernels")

STAT_W, STAT_S, STAT_Y, STAT_SS, STAT_SY = 0, 1, 2, 3, 4
N_STATS = 5

#: NumPy passes over the samples per statistic table (relative to a step of the tier rule)
_BIN_STEPS = 16


def uniform_edges(n_bins):
    """Edges ``b / n_bins`` (correctly rounded), as :func:`_kernels.uniform_edges`."""
    return np.arange(n_bins + 1) / n_bins


def _uniform_bins(s, n_bins):
    """:func:`_kernels._uniform_bin` of every score."""
    b = np.minimum(s * n_bins, n_bins - 1).astype(np.int64)  # s >= 0: truncation = floor
    down = (b > 0) & (s < b / n_bins)
    up = ~down & (b < n_bins - 1) & (s >= (b + 1) / n_bins)
    return b - down + up


def _edge_bins(s, edges):
    """The hard-mapping bin of every score for ``edges`` (interior edges at or below it)."""
    return np.searchsorted(edges[1:-1], s, side="right").astype(np.int64)


def _add(idx, a, s, y, n_bins):
    """Per-bin sums of ``a, a s, a y, a s s, a s y``, term by term in input order."""
    stats = np.empty((N_STATS, n_bins))
    a_s = a * s
    for row, terms in ((STAT_W, a), (STAT_S, a_s), (STAT_Y, a * y), (STAT_SS, a_s * s),
                       (STAT_SY, a_s * y)):
        stats[row] = np.bincount(idx, weights=terms, minlength=n_bins)
    return stats


def bin_stats(s, y, w, use_w, edges, uniform, convex):
    """Per-bin statistics, as :func:`_kernels.bin_stats` (see there)."""
    n = s.shape[0]
    if not numpy_tier(n * _BIN_STEPS):
        return _kernels.bin_stats(s, y, w, use_w, edges, uniform, convex)
    n_bins = edges.shape[0] - 1
    a = w if use_w else np.ones(n)
    if not convex or n_bins == 1:
        idx = _uniform_bins(s, n_bins) if uniform or n_bins == 1 else _edge_bins(s, edges)
        return _add(idx, a, s, y, n_bins)
    centres = 0.5 * (edges[:-1] + edges[1:])
    if uniform:
        t = s * n_bins - 0.5
        j = np.minimum(np.maximum(t.astype(np.int64), 0), n_bins - 2)
        frac = t - j
    else:
        j = np.minimum(np.maximum(np.searchsorted(centres, s, side="right") - 1, 0), n_bins - 2)
        width = centres[j + 1] - centres[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(width > 0.0, (s - centres[j]) / np.where(width > 0.0, width, 1.0), 1.0)
    frac = np.minimum(np.maximum(frac, 0.0), 1.0)
    # each sample adds to bin j, then to bin j + 1: interleaved, as the kernel's loop does
    idx = np.empty(2 * n, dtype=np.int64)
    idx[0::2], idx[1::2] = j, j + 1
    share = np.empty(2 * n)
    share[0::2], share[1::2] = a * (1.0 - frac), a * frac
    return _add(idx, share, np.repeat(s, 2), np.repeat(y, 2), n_bins)


def bin_index(s, edges, uniform):
    """Hard-mapping bin of each score, as :func:`_kernels.bin_index`."""
    if not numpy_tier(s.shape[0] * _BIN_STEPS // 4):
        return _kernels.bin_index(s, edges, uniform)
    n_bins = edges.shape[0] - 1
    return _uniform_bins(s, n_bins) if uniform else _edge_bins(s, edges)


def summarize_bins(stats):
    """(ECE, MCE, plug-in and debiased squared L2 error), as :func:`_kernels.summarize_bins`
    (sums over bins in bin order)."""
    nb = stats[STAT_W]
    total = np.cumsum(nb)[-1] if nb.shape[0] else 0.0
    if not total > 0.0:
        return np.nan, np.nan, np.nan, np.nan
    keep = nb > 0.0
    nb = nb[keep]
    f = stats[STAT_S][keep] / nb
    t = stats[STAT_Y][keep] / nb
    gap = np.abs(t - f)
    with np.errstate(divide="ignore", invalid="ignore"):
        debiased = np.where(nb > 1.0, nb * (gap * gap - t * (1.0 - t) / (nb - 1.0)), 0.0)
    return (float(np.cumsum(nb * gap)[-1] / total), float(max(0.0, gap.max())),
            float(np.cumsum(nb * gap * gap)[-1] / total), float(np.cumsum(debiased)[-1] / total))


def binary_as_float(y, out):
    """Copy 1-d ``y`` into float64 ``out``; return whether every entry is 0 or 1."""
    if not numpy_tier(y.shape[0]):
        return _kernels.binary_as_float(y, out)
    out[:] = y
    return bool(((out == 0.0) | (out == 1.0)).all())


def all_probabilities(p):
    """Whether every entry of the 1-d float array ``p`` lies in [0, 1] (NaN does not)."""
    if not numpy_tier(p.shape[0]):
        return _kernels.all_probabilities(p)
    return bool(((p >= 0.0) & (p <= 1.0)).all())
