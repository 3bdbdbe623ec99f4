"""Fitted region forecasters as arrays, evaluated without scikit-learn.

A region forecaster (:mod:`structcal.forecasters`) is fit with scikit-learn, but what it
has learnt is plain arrays: the standardised recalibration events and their outcomes for
k nearest neighbours, the nodes of a pruned tree. :class:`KNNRegionMap` and
:class:`TreeRegionMap` hold those arrays and forecast from them, and the forecasters
share their code (the ``_KNNRegions`` and ``_TreeRegions`` mixins). A
:class:`~structcal.StructuredRecalibrator` keeps its region forecasters as these maps,
so loading a saved recalibrator and forecasting with it imports neither scikit-learn nor
SciPy's statistics.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._estimator import ParamsMixin
from ._tier import SECONDS_PER_STEP, numpy_tier
from ._validation import as_float_array
from .exceptions import ParameterError

__all__ = ["KNNRegionMap", "TreeRegionMap"]


def _check_binary_state(est):
    """``classes_`` of a fitted binary forecaster: one or two distinct labels."""
    from ._loadcheck import array

    classes = array(est, "classes_", ndim=1, kind=None)
    if classes.shape[0] not in (1, 2) or np.unique(classes).shape[0] != classes.shape[0]:
        raise ValueError(f"classes_ must hold one or two distinct labels; got {classes!r}")


def _check_prior(prior):
    if (isinstance(prior, (bool, np.bool_)) or not isinstance(prior, numbers.Real)
            or not np.isfinite(prior) or prior < 0):
        raise ValueError(f"`prior` must be a finite number >= 0; got {prior!r}")
    return float(prior)


class _KDTree:
    """Derived, unsaved state of a fitted k-NN forecaster: the tree and data in tree order."""

    def __init__(self, X, y, fold=None, tree=None):
        """``tree``: the arrays of :func:`structcal._kdtree.build_kdtree` (built here when
        None)."""
        if tree is None:
            tree = _build_tree(X)
        self.X_fit = X
        perm, self.start, self.end, self.child, self.lower, self.upper = tree
        self.key = perm
        self.XT = np.ascontiguousarray(X[perm].T)
        self.yr = np.ascontiguousarray(y[perm], dtype=np.float64)
        self.fold = None if fold is None else np.ascontiguousarray(fold[perm], dtype=np.int64)
        leaves = self.child < 0
        self.leaf = int(max(1, (self.end - self.start)[leaves].max(initial=1)))
        self.depth = _depth(self.child)

    def neighbour_means(self, Xq, k, prior=0.0):
        """``(positives among the k nearest fitted events + prior) / (k + 2 prior)`` for each
        row of ``Xq`` (the mean outcome when ``prior`` is 0)."""
        from ._knn import MEANS

        k = int(min(k, self.XT.shape[1]))
        out = np.empty((Xq.shape[0], 1))
        self._pass(MEANS, Xq, None, k, None, prior, 256, out, None, Xq.shape[0] * k // 8)
        return out[:, 0]

    def neighbour_indices(self, Xq, k):
        """``(indices, squared distances)`` (n_q, k) of the ``k`` nearest fitted events of
        each row of ``Xq``, in (distance, index) order."""
        from ._knn import INDICES

        k = int(min(k, self.XT.shape[1]))
        dist = np.empty((Xq.shape[0], k))
        idx = np.empty((Xq.shape[0], k), dtype=np.int64)
        self._pass(INDICES, Xq, None, k, None, 0.0, 256, dist, idx, Xq.shape[0] * k // 8)
        return idx, dist

    def cv_losses(self, grid, prior=0.0, chunk=512):
        """Per-k held-out squared loss summed over all events (``_knn.knn_pass``,
        ``CV_LOSSES``)."""
        from ._knn import CV_LOSSES

        n = self.XT.shape[1]
        out = np.empty(((n + chunk - 1) // chunk, grid.shape[0]))
        Q = np.ascontiguousarray(self.XT.T)
        self._pass(CV_LOSSES, Q, self.fold, int(grid[-1]), grid, prior, chunk, out, None,
                   n * int(grid[-1]) // 8)
        return out.sum(axis=0)

    def _pass(self, mode, Q, fold, k, grid, prior, chunk, out, out_idx, work):
        """Run :func:`structcal._knn.knn_pass` with scratch for its workers."""
        from ._knn import knn_pass, query_one, sort_neighbours

        n_q, n = Q.shape[0], self.XT.shape[1]
        if fold is None:  # no fold excludes any reference
            q_group, ref_group = np.zeros(n_q, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        else:
            q_group = ref_group = fold
        Q = np.ascontiguousarray(Q, dtype=np.float64)
        if not Q.flags.writeable:  # the pass is compiled for writable arrays only
            Q = Q.copy()
        grid = _NO_GRID if grid is None else np.ascontiguousarray(grid, dtype=np.int64)
        n_work = max(1, min(-(-n_q // chunk), _WORKERS))
        knn_pass(
            mode, query_one, sort_neighbours, Q, q_group, ref_group, k, self.XT, self.yr,
            self.key, self.start, self.end, self.child, self.lower, self.upper, grid,
            float(prior), chunk, out, _NO_INDEX if out_idx is None else out_idx,
            *self.scratch(n_work, k), 0, n_work, work=work,
        )

    def scratch(self, n_work, k):
        """Scratch of ``n_work`` workers querying ``k`` neighbours (see ``knn_pass``):
        candidate buffers (distances, indices, tree positions), leaf distances, the
        traversal stack (nodes, bounds) and the sort's stack."""
        from ._knn import SORT_STACK

        cap = 2 * k + 64
        return (np.empty((n_work, cap)), np.empty((n_work, cap), dtype=np.int64),
                np.empty((n_work, cap), dtype=np.int64), np.empty((n_work, self.leaf)),
                np.empty((n_work, self.depth + 2), dtype=np.int64),
                np.empty((n_work, self.depth + 2)),
                np.empty((n_work, SORT_STACK), dtype=np.int64))


#: Workers of a k-NN pass (rows of scratch; each takes a contiguous block of chunks)
_WORKERS = 32
_NO_GRID = np.zeros(1, dtype=np.int64)
_NO_INDEX = np.zeros((1, 1), dtype=np.int64)


def _build_tree(X):
    """The KD-tree over ``X``: built in NumPy (:mod:`structcal._kdtree`) for up to about
    2 s of NumPy work (:data:`TREE_LARGE_WORK`), unless the kernel
    (:func:`structcal._knn.build_kdtree`, the same tree) is compiled already; the kernel
    for larger work (rent-or-buy rule of :mod:`structcal._tier`)."""
    from ._kdtree import LEAF_SIZE, build_kdtree, numpy_seconds

    if numpy_tier(numpy_seconds(*X.shape) / SECONDS_PER_STEP, kernel="_knn.build_kdtree",
                  large_work=TREE_LARGE_WORK):
        return build_kdtree(X, LEAF_SIZE)
    from ._knn import build_kdtree as build_kdtree_kernel

    return build_kdtree_kernel(X, LEAF_SIZE)


#: Past this work (NumPy seconds / SECONDS_PER_STEP: 2 s in NumPy, about half of what
#: compiling the tree kernel costs) the tree is built by the kernel
TREE_LARGE_WORK = int(2.0 / SECONDS_PER_STEP)


def _depth(child):
    """Depth of the deepest node of a tree numbered breadth first (``child`` links)."""
    level, frontier = 0, np.zeros(1, dtype=np.int64)
    while True:
        kids = child[frontier]
        kids = kids[kids >= 0]
        if kids.shape[0] == 0:
            return level
        frontier = np.concatenate([kids, kids + 1])
        level += 1


def _scan_distances(Xq, X):
    """Squared distances of every row of ``Xq`` to every row of ``X``, summed feature by
    feature from 0.0 as :mod:`structcal._knn` sums them (the same values, bit for bit)."""
    dist = np.zeros((Xq.shape[0], X.shape[0]))
    for f in range(X.shape[1]):
        diff = X[:, f][None, :] - Xq[:, f][:, None]
        dist += diff * diff
    return dist


def _scan_neighbour_means(Xq, X, y, k, prior):
    """:meth:`_KDTree.neighbour_means` by a scan of every fitted event: the same neighbours
    (squared distances summed feature by feature from 0.0, ties to the lower row of ``X``;
    the rule of :mod:`structcal._knn`), so the same forecasts, bit for bit."""
    k = int(min(k, X.shape[0]))
    nearest = np.argsort(_scan_distances(Xq, X), axis=1, kind="stable")[:, :k]
    total = y[nearest].sum(axis=1)
    return (total + prior) / (k + 2.0 * prior)


def _scan_cv_losses(X, y, folds, grid, prior, block=None):
    """:meth:`_KDTree.cv_losses` by a scan: for every event, its ``max(grid)`` nearest
    events of other folds (squared distances summed feature by feature from 0.0, ties to
    the lower row: the rule of :mod:`structcal._knn`), the running sum of their outcomes,
    and the squared loss of each ``k``'s forecast, summed over the events. The same
    neighbours and per-event losses as the tree's; the sum over events is taken in row
    order rather than tree order (equal to about 1e-16)."""
    n = X.shape[0]
    k_max = int(grid[-1])
    if block is None:
        block = max(1, int(1_000_000 // max(n, 1)))
    total = np.zeros(grid.shape[0])
    for a in range(0, n, block):
        rows = np.arange(a, min(n, a + block))
        dist = _scan_distances(X[rows], X)
        dist[folds[None, :] == folds[rows][:, None]] = np.inf
        nearest = np.argsort(dist, axis=1, kind="stable")[:, :k_max]
        running = np.cumsum(y[nearest], axis=1)
        forecast = (running[:, grid - 1] + prior) / (grid[None, :] + 2.0 * prior)
        total += ((forecast - y[rows][:, None]) ** 2).sum(axis=0)
    return total


class _KNNRegions:
    """Fitted state and forecast of k nearest neighbours (``X_fit_``, ``y_fit_``, ...)."""

    def _check_loaded(self):
        """Invariants of a fitted forecaster read from a file (see :mod:`structcal._loadcheck`)."""
        from ._loadcheck import array, integer

        _check_binary_state(self)
        d = integer(self, "n_features_in_", low=1)
        X = array(self, "X_fit_", ndim=2, shape=(None, d))
        n = X.shape[0]
        if n < 1:
            raise ValueError("X_fit_ holds no events")
        array(self, "y_fit_", ndim=1, shape=(n,), low=0.0, high=1.0)
        if not np.isin(self.y_fit_, (0.0, 1.0)).all():
            raise ValueError("y_fit_ must hold outcomes 0 and 1")
        array(self, "mean_", ndim=1, shape=(d,))
        array(self, "scale_", ndim=1, shape=(d,))
        if (self.scale_ <= 0).any():
            raise ValueError("scale_ must be positive")
        integer(self, "n_neighbors_", low=1, high=n)
        _check_prior(self.prior)

    def _tree(self):
        """Return the KD-tree over ``X_fit_``, built if missing (derived state, not saved)."""
        index = getattr(self, "_index", None)
        if index is None or index.X_fit is not self.X_fit_:
            index = self._index = _KDTree(self.X_fit_, self.y_fit_)
        return index

    def _positive_probability(self, X):
        Xs = np.ascontiguousarray((X - self.mean_) / self.scale_)
        prior = _check_prior(self.prior)
        n, d = self.X_fit_.shape
        if numpy_tier(Xs.shape[0] * n * (d + 8)):  # a small job: no tree, no kernel
            return _scan_neighbour_means(Xs, self.X_fit_, self.y_fit_, self.n_neighbors_, prior)
        return self._tree().neighbour_means(Xs, self.n_neighbors_, prior)


class _TreeRegions:
    """Fitted state and forecast of a pruned regression tree (``tree_*_`` arrays)."""

    def _check_loaded(self):
        """Invariants of a fitted forecaster read from a file (see :mod:`structcal._loadcheck`)."""
        from ._loadcheck import array, integer

        _check_binary_state(self)
        d = integer(self, "n_features_in_", low=1)
        children = array(self, "tree_children_", ndim=2, shape=(None, 2), kind="iu")
        m = children.shape[0]
        if m < 1:
            raise ValueError("the tree has no node")
        leaf = children[:, 0] < 0
        if ((children[:, 1] < 0) != leaf).any():
            raise ValueError("a node has exactly one child")
        nodes = np.arange(m)
        if (children[~leaf] <= nodes[~leaf, None]).any() or (children >= m).any() or (
                children < -1).any():
            raise ValueError("tree child indices must point forward to existing nodes")
        feature = array(self, "tree_feature_", ndim=1, shape=(m,), kind="iu")
        if ((feature[~leaf] < 0) | (feature[~leaf] >= d)).any():
            raise ValueError(f"tree features must be in 0..{d - 1}")
        array(self, "tree_threshold_", ndim=1, shape=(m,), finite=False)
        if np.isnan(self.tree_threshold_[~leaf]).any():
            raise ValueError("tree thresholds must not be NaN")
        array(self, "tree_value_", ndim=1, shape=(m,), low=0.0, high=1.0)
        integer(self, "min_samples_leaf_", low=1)

    def _positive_probability(self, X):
        tree = _TreeArrays.from_arrays(
            self.tree_children_, self.tree_feature_, self.tree_threshold_, self.tree_value_
        )
        return np.clip(tree.predict(X), 0.0, 1.0)


class _RegionMap(ParamsMixin):
    """A fitted region forecaster's forecast, from arrays only."""

    #: the fitted attributes a map keeps (the forecaster's, without its fit-time options)
    _FITTED = ()

    @classmethod
    def _from_forecaster(cls, forecaster):
        params = {name: getattr(forecaster, name) for name in cls._get_param_names()}
        out = cls(**params)
        for name in cls._FITTED + ("feature_names_in_",):
            if hasattr(forecaster, name):
                setattr(out, name, getattr(forecaster, name))
        return out

    def predict_proba(self, X):
        """Calibrated probabilities, as the forecaster's ``predict_proba``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Event features (finite).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Column 1 is the probability of the positive outcome (``classes_[1]``); one
            column of ones after a fit on a single outcome.
        """
        X = as_float_array(X, "X", ndim=2)
        if X.shape[1] != self.n_features_in_:
            raise ParameterError(f"`X` must have {self.n_features_in_} feature columns (as "
                                 f"at fit); got {X.shape[1]}")
        if self.classes_.shape[0] == 1:
            return np.ones((X.shape[0], 1))
        p = self._positive_probability(X)
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        """The more probable outcome of each event."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class KNNRegionMap(_KNNRegions, _RegionMap):
    """A fitted :class:`~structcal.forecasters.KNNRegionForecaster`, as arrays.

    Forecasts, for an event, the fraction of positive events among its ``n_neighbors_``
    nearest recalibration events in standardised feature space (with ``prior``
    pseudo-counts per outcome), exactly as the forecaster it was made from. Made by
    ``KNNRegionForecaster.to_map()``; nothing here fits.

    Parameters
    ----------
    prior : float, default=0.0
        Pseudo-count per outcome added to every region.

    Attributes
    ----------
    X_fit_, y_fit_, mean_, scale_, n_neighbors_, classes_, n_features_in_, cv_results_, cv_subsample_
        As in :class:`~structcal.forecasters.KNNRegionForecaster`.
    """

    _FITTED = ("classes_", "n_features_in_", "mean_", "scale_", "X_fit_", "y_fit_",
               "n_neighbors_", "cv_results_", "cv_subsample_", "_index")

    def __init__(self, prior=0.0):
        self.prior = prior


class TreeRegionMap(_TreeRegions, _RegionMap):
    """A fitted :class:`~structcal.forecasters.TreeRegionForecaster`, as arrays.

    Forecasts, for an event, the mean outcome of the recalibration events in its leaf,
    exactly as the forecaster it was made from. Made by ``TreeRegionForecaster.to_map()``.

    Attributes
    ----------
    tree_children_, tree_feature_, tree_threshold_, tree_value_, min_samples_leaf_, grown_min_samples_leaf_, cv_results_, classes_, n_features_in_
        As in :class:`~structcal.forecasters.TreeRegionForecaster`.
    """

    _FITTED = ("classes_", "n_features_in_", "tree_children_", "tree_feature_",
               "tree_threshold_", "tree_value_", "min_samples_leaf_",
               "grown_min_samples_leaf_", "cv_results_")


class _TreeArrays:
    """A regression tree as plain arrays, with pruning by minimum leaf size."""

    def __init__(self, sk_tree):
        self.children = np.column_stack([sk_tree.children_left, sk_tree.children_right]).astype(np.int64)
        self.feature = sk_tree.feature.astype(np.int64)
        self.threshold = sk_tree.threshold.astype(np.float64)
        self.value = sk_tree.value[:, 0, 0].astype(np.float64)
        counts = sk_tree.n_node_samples
        internal = self.children[:, 0] >= 0
        # smaller side of each split (0 at leaves): the split survives leaf sizes <= this
        self.smaller_side = np.where(
            internal, np.minimum(counts[self.children[:, 0]], counts[self.children[:, 1]]), 0
        )

    @classmethod
    def from_arrays(cls, children, feature, threshold, value):
        tree = cls.__new__(cls)
        tree.children, tree.feature, tree.threshold, tree.value = children, feature, threshold, value
        return tree

    def _paths(self, X):
        """Yield (sample rows, their node) level by level from the root to the leaves."""
        Xf = np.asarray(X, dtype=np.float32)  # scikit-learn compares in float32
        rows = np.arange(X.shape[0])
        node = np.zeros(X.shape[0], dtype=np.int64)
        while rows.size:
            yield rows, node
            left = self.children[node, 0]
            inner = left >= 0
            rows, node = rows[inner], node[inner]
            go_left = Xf[rows, self.feature[node]] <= self.threshold[node]
            node = np.where(go_left, self.children[node, 0], self.children[node, 1])

    def predict(self, X):
        """Forecast of each row of ``X``: the value of its leaf."""
        out = np.empty(X.shape[0])
        for rows, node in self._paths(X):
            leaf = self.children[node, 0] < 0
            out[rows[leaf]] = self.value[node[leaf]]
        return out

    def pruned(self, m):
        """The tree with every split leaving fewer than ``m`` events on a side removed."""
        children = self.children.copy()
        children[self.smaller_side < m] = -1
        return _TreeArrays.from_arrays(children, self.feature, self.threshold, self.value)

    def pruned_losses(self, X, y, grid):
        """Sum of squared errors on ``(X, y)`` of :meth:`pruned` at every ``m`` in ``grid``.

        One pass down the tree: a node reached with ancestors' smallest split side ``g``
        is where the forecast stops for ``smaller_side < m <= g``.
        """
        diff = np.zeros(grid.shape[0] + 1)
        reach = np.full(X.shape[0], np.iinfo(np.int64).max)
        for rows, node in self._paths(X):
            err = (self.value[node] - y[rows]) ** 2
            lo = np.searchsorted(grid, self.smaller_side[node], side="right")
            hi = np.searchsorted(grid, reach[rows], side="right")
            stops = lo < hi  # else this node splits for every m that reaches it
            diff += np.bincount(lo[stops], weights=err[stops], minlength=diff.shape[0])
            diff -= np.bincount(hi[stops], weights=err[stops], minlength=diff.shape[0])
            inner = self.children[node, 0] >= 0
            reach[rows[inner]] = np.minimum(reach[rows[inner]], self.smaller_side[node[inner]])
        return np.cumsum(diff)[:-1]
