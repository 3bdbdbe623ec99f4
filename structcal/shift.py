"""A two-sample test of distribution shift that respects groups.

Events of one input (a sentence's tokens), and inputs of one group (a document's
sentences, an image's nuclei), are not independent: a test that treats them as
independent flags ordinary differences between documents as shift. :func:`group_shift_test`
compares, column by column, the empirical distribution functions of a reference sample
and a new sample by their Kolmogorov-Smirnov distance, and takes the largest distance over
columns as the statistic. Its null distribution comes from permuting whole groups between
the two samples (the number of groups on each side kept): under the null hypothesis that
the groups of both samples are exchangeable, every such reassignment is equally likely,
so the test has its level whatever the dependence within groups (groups are first
thinned to at most as many events as the smaller sample's median group holds, so that
the groups of both samples are alike), and the maximum over
columns accounts for testing several columns at once (without Bonferroni's loss when the
columns are correlated, as an event's raw probability and its features are). A column's
own p-value (``pvalue_columns``) is adjusted the same way (Westfall-Young max-T).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._tier import SMALL_WORK, numpy_tier

__all__ = ["DensityRatio", "GroupShiftResult", "density_ratio", "group_shift_test"]


@dataclass(frozen=True)
class GroupShiftResult:
    """Result of :func:`group_shift_test`.

    Attributes
    ----------
    statistic : float
        The largest KS distance over columns.
    pvalue : float
        Permutation p-value of ``statistic`` (``(1 + #{permuted >= observed}) / (1 + B)``).
    statistic_columns : ndarray of shape (n_columns,)
        The KS distance of each column.
    pvalue_columns : ndarray of shape (n_columns,)
        Each column's p-value, adjusted for all columns (max-T).
    n_groups_reference, n_groups_new : int
    n_permutations : int
    """

    statistic: float
    pvalue: float
    statistic_columns: np.ndarray
    pvalue_columns: np.ndarray
    n_groups_reference: int
    n_groups_new: int
    n_permutations: int


def _at_most_per_group(groups, m, rng):
    """Indices of at most ``m`` rows of each group, drawn at random (in order)."""
    order = rng.permutation(groups.shape[0])
    g = groups[order]
    srt = np.argsort(g, kind="stable")
    g_sorted = g[srt]
    first = np.searchsorted(g_sorted, g_sorted, side="left")
    rank = np.arange(g_sorted.shape[0]) - first
    return np.sort(order[srt[rank < m]])


def _two_samples(reference, new, groups_reference, groups_new):
    """Two samples as 2-d float arrays with the same columns, and their group ids."""
    from ._validation import as_ids
    from .exceptions import ParameterError

    from ._validation import as_numeric

    out = []
    for name, x in (("reference", reference), ("new", new)):
        a = as_numeric(x, name)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2:
            raise ParameterError(f"`{name}` must be 1-d or 2-d (rows, columns); got shape "
                                 f"{a.shape}")
        out.append(a)
    ref, nw = out
    if ref.shape[1] != nw.shape[1]:
        raise ParameterError(f"`reference` and `new` must have the same columns; got "
                             f"{ref.shape[1]} and {nw.shape[1]}")
    gr = (np.arange(ref.shape[0]) if groups_reference is None else
          as_ids(groups_reference, "groups_reference", ref.shape[0], "one per row of `reference`"))
    gn = (np.arange(nw.shape[0]) if groups_new is None else
          as_ids(groups_new, "groups_new", nw.shape[0], "one per row of `new`"))
    return ref, nw, gr, gn


def group_shift_test(reference, new, groups_reference=None, groups_new=None, *,
                     n_permutations: int = 200, random_state=0) -> GroupShiftResult:
    """Test whether ``new`` is distributed like ``reference``, permuting whole groups.

    Parameters
    ----------
    reference, new : array-like of shape (n, n_columns)
        The two samples (rows are events, columns their values: a raw probability,
        features).
    groups_reference, groups_new : array-like of shape (n,), optional
        Group of each row (rows of one group stay together under permutation); default:
        every row its own group. The ids of the two samples are separate groups even when
        they coincide.
    n_permutations : int, default=200
    random_state : int or Generator, default=0

    Returns
    -------
    GroupShiftResult

    Notes
    -----
    The level is exact (up to the Monte Carlo resolution ``1 / (n_permutations + 1)``)
    when the groups are exchangeable under the null hypothesis. With fewer than two
    groups on a side there is nothing to permute, and the p-value is 1.
    """
    from ._validation import check_random_state

    ref, new, gr, gn = _two_samples(reference, new, groups_reference, groups_new)
    C = ref.shape[1]
    _, gr = np.unique(gr, return_inverse=True)
    _, gn = np.unique(gn, return_inverse=True)
    n_gr = int(gr.max()) + 1 if gr.size else 0
    n_gn = int(gn.max()) + 1 if gn.size else 0
    zero = np.zeros(C)
    if ref.shape[0] == 0 or new.shape[0] == 0 or C == 0:
        return GroupShiftResult(0.0, 1.0, zero, np.ones(C), n_gr, n_gn, 0)
    rng = check_random_state(random_state)
    # groups are exchangeable only if they are alike: a batch of a few events per document
    # against a reference of whole documents is not. Every group keeps at most m events
    # (drawn at random), m the smaller of the two samples' median group sizes.
    m = int(max(1, min(np.median(np.bincount(gr)), np.median(np.bincount(gn)))))
    keep_r = _at_most_per_group(gr, m, rng)
    keep_n = _at_most_per_group(gn, m, rng)
    ref, gr = ref[keep_r], gr[keep_r]
    new, gn = new[keep_n], gn[keep_n]
    values = np.vstack([ref, new])
    values = np.where(np.isfinite(values), values, np.nan)
    group = np.concatenate([gr, gn + n_gr])
    G = n_gr + n_gn
    order = np.argsort(values, axis=0, kind="stable").T  # (C, N)
    sorted_vals = np.take_along_axis(values.T, order, axis=1)
    tie_end = np.ones_like(sorted_vals, dtype=bool)
    tie_end[:, :-1] = sorted_vals[:, 1:] != sorted_vals[:, :-1]
    both_nan = np.isnan(sorted_vals[:, 1:]) & np.isnan(sorted_vals[:, :-1])
    tie_end[:, :-1] &= ~both_nan
    size = np.bincount(group, minlength=G)
    observed_side = np.zeros((1, G), dtype=bool)
    observed_side[0, :n_gr] = True
    B = int(n_permutations) if (n_gr >= 2 and n_gn >= 2) else 0
    sides = np.zeros((B + 1, G), dtype=bool)
    sides[0] = observed_side[0]
    for b in range(1, B + 1):
        sides[b, rng.permutation(G)[:n_gr]] = True
    ev_side = sides[:, group]
    n_ref = (sides * size[None, :]).sum(axis=1).astype(np.float64)
    n_new = values.shape[0] - n_ref
    keep = (n_ref > 0) & (n_new > 0)
    ks = np.zeros((B + 1, C))
    ks[keep] = _ks_distances(np.ascontiguousarray(order, dtype=np.int64),
                             np.ascontiguousarray(tie_end), np.ascontiguousarray(ev_side[keep]),
                             n_ref[keep], n_new[keep])
    obs = ks[0]
    if B == 0:
        return GroupShiftResult(float(obs.max()), 1.0, obs, np.ones(C), n_gr, n_gn, 0)
    perm_max = ks[1:].max(axis=1)
    p = (1.0 + np.count_nonzero(perm_max >= obs.max() - 1e-12)) / (B + 1.0)
    p_cols = (1.0 + (perm_max[None, :] >= obs[:, None] - 1e-12).sum(axis=1)) / (B + 1.0)
    return GroupShiftResult(float(obs.max()), float(p), obs, p_cols, n_gr, n_gn, B)


def _ks_distances(order, tie_end, sides, n_ref, n_new):
    """KS distance of every column under every split (:func:`_shift_kernels.ks_permutations`):
    in NumPy for a small job, with the same operations, so the same statistics bit for bit."""
    B, N = sides.shape
    C = order.shape[0]
    out = np.zeros((B, C))
    # NumPy takes about 3e-8 s per (split, column, event): 0.65 s at 2e7, less than a
    # first kernel call (importing Numba and loading the kernel: about 1 s). Past SMALL_WORK
    # the kernel runs; below it, NumPy until the process has paid for loading the kernel
    # (at once where Numba and a kernel are loaded already: structcal._tier)
    if not numpy_tier(B * C * N // 10, kernel="_shift_kernels.ks_permutations",
                      large_work=SMALL_WORK):
        from ._shift_kernels import ks_permutations

        ks_permutations(order, tie_end, sides, n_ref, n_new, out)
        return out
    if B == 0 or N == 0:
        return out
    ir, inw = 1.0 / n_ref, 1.0 / n_new
    j1 = np.arange(1, N + 1)
    for c in range(C):
        cr = np.cumsum(sides[:, order[c]], axis=1)
        d = np.abs(cr * ir[:, None] - (j1[None, :] - cr) * inw[:, None])
        out[:, c] = np.max(np.where(tie_end[c][None, :], d, 0.0), axis=1)
    return out


@dataclass(frozen=True)
class DensityRatio:
    """Result of :func:`density_ratio`.

    Attributes
    ----------
    weights : ndarray of shape (n_reference,)
        Estimated density ratio new / reference at each reference row, clipped and
        scaled to mean 1.
    effective_sample_size : float
        Kish's effective number of reference rows, ``(sum w)^2 / sum w^2``.
    effective_groups : float
        The same over groups (each group weighted by the sum of its rows' weights).
    clipped_share : float
        Share of reference rows whose ratio was clipped at ``clip``.
    auc : float
        Cross-fitted area under the ROC curve of the classifier telling the two samples
        apart (0.5: no difference it can see).
    coverage : float
        Mean of the estimated ratios over the reference rows before scaling (at most 1).
        It is about 1 when the new data lie where the reference data do, and falls toward
        0 with the share of new data outside their support, which no weighting of the
        reference rows can represent.
    """

    weights: np.ndarray
    effective_sample_size: float
    effective_groups: float
    clipped_share: float
    auc: float
    coverage: float = 1.0


def density_ratio(reference, new, groups_reference=None, groups_new=None, *, n_folds=3,
                  clip=20.0, random_state=0) -> DensityRatio:
    """Density ratio of ``new`` to ``reference`` at the reference rows, from a classifier.

    A probabilistic classifier (scikit-learn's ``HistGradientBoostingClassifier``) is
    trained to tell new rows from reference rows; by Bayes' rule
    ``p_new(x) / p_ref(x) = (n_ref / n_new) P(new | x) / P(ref | x)``. It is cross-fitted:
    folds are drawn by group (the groups of both samples), and each reference row's ratio
    comes from a classifier that did not see its group, so that the ratios do not fit
    noise. Ratios are clipped at ``clip`` times their median and scaled to mean 1.

    Parameters
    ----------
    reference, new : array-like of shape (n, n_columns)
    groups_reference, groups_new : array-like of shape (n,), optional
        Group of each row (default: each row its own).
    n_folds : int, default=3
    clip : float, default=20.0
    random_state : int, default=0

    Returns
    -------
    DensityRatio
    """
    from ._validation import check_float, check_int

    ref, nw, gr, gn = _two_samples(reference, new, groups_reference, groups_new)
    if np.isposinf(ref).any() or np.isposinf(nw).any():
        from .exceptions import ParameterError

        raise ParameterError("`reference` and `new` must not hold +inf (NaN marks a missing "
                             "value)")
    n_folds = check_int(n_folds, "n_folds", low=2)
    clip = check_float(clip, "clip", low=1.0, low_inclusive=False)
    nr, nn = ref.shape[0], nw.shape[0]
    gr = np.unique(gr, return_inverse=True)[1] if nr else np.zeros(0, np.int64)
    gn = np.unique(gn, return_inverse=True)[1] if nn else np.zeros(0, np.int64)
    if nr == 0 or nn == 0 or ref.shape[1] == 0:
        w = np.ones(nr)
        return DensityRatio(w, float(nr), float(np.unique(gr).size), 0.0, 0.5, 1.0)
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(random_state)
    X = np.vstack([ref, nw])
    X = np.where(np.isfinite(X), X, np.nan)
    y = np.r_[np.zeros(nr), np.ones(nn)]
    G_r = int(gr.max()) + 1
    group = np.r_[gr, gn + G_r]
    n_groups = int(group.max()) + 1
    fold_of = rng.permutation(n_groups) % n_folds
    fold = fold_of[group]
    q = np.empty(X.shape[0])
    # on a few thousand rows OpenMP threads double the CPU time and save no wall time (the
    # classifiers are the same whatever the thread count): one thread below ONE_THREAD_ROWS
    from contextlib import nullcontext

    from threadpoolctl import threadpool_limits

    few = X.shape[0] < ONE_THREAD_ROWS
    with threadpool_limits(1, user_api="openmp") if few else nullcontext():
        _cross_fit(X, y, fold, n_folds, nr, nn, random_state, q)
    q = np.clip(q, 1e-3, 1 - 1e-3)
    auc = float(roc_auc_score(y, q)) if 0 < nn < X.shape[0] else 0.5
    ratio = (nr / nn) * q[:nr] / (1.0 - q[:nr])
    cap = clip * max(float(np.median(ratio)), 1e-12)
    clipped = float(np.mean(ratio > cap))
    w = np.minimum(ratio, cap)
    coverage = float(min(w.mean(), 1.0))
    w = w / w.mean()
    ess = float(w.sum() ** 2 / (w**2).sum())
    gw = np.bincount(gr, weights=w)
    ess_g = float(gw.sum() ** 2 / max((gw**2).sum(), 1e-300))
    return DensityRatio(w, ess, ess_g, clipped, auc, coverage)


#: Below this many rows (reference and new together) the density ratio's classifiers run
#: on one OpenMP thread: the same weights, half the CPU time and no more wall time (2 CPUs,
#: 6 columns, medians of 7: 1,500 rows 0.31 s against 0.33 s, 5,000 rows 0.31 s against
#: 0.38 s; 20,000 rows 0.70 s against 0.56 s, where the threads pay)
ONE_THREAD_ROWS = 10_000


def _cross_fit(X, y, fold, n_folds, nr, nn, random_state, q):
    """``q[rows of fold f]`` = P(new | x) from a classifier fit on the other folds."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    for f in range(n_folds):
        test = fold == f
        train = ~test
        if not test.any():
            continue
        if y[train].min() == y[train].max():
            q[test] = nn / (nr + nn)
            continue
        clf = HistGradientBoostingClassifier(max_iter=60, max_leaf_nodes=15,
                                             min_samples_leaf=40, l2_regularization=1.0,
                                             early_stopping=False, random_state=random_state)
        clf.fit(X[train], y[train])
        q[test] = clf.predict_proba(X[test])[:, 1]
