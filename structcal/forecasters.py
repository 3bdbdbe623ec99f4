"""Region forecasters: map event features to calibrated probabilities (Kuleshov & Liang §4).

A region forecaster partitions feature space into regions and forecasts, for an event,
the fraction of positive events in its region: the k nearest recalibration events
(:class:`KNNRegionForecaster`) or the leaf of a regression tree
(:class:`TreeRegionForecaster`). Small regions are sharp but noisy; the region size (k or
the minimum leaf size) is chosen by 10-fold cross-validation of the l2 loss over 5..500 in
steps of 5, as in the paper. Both are scikit-learn binary classifiers: ``fit(X, y)`` with
``y`` the event outcomes, ``predict_proba(X)[:, 1]`` the calibrated probabilities.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ._estimator import ParamsMixin, check_fitted
from ._regions import (
    KNNRegionMap, TreeRegionMap, _check_prior, _KDTree, _KNNRegions, _scan_cv_losses,
    _TreeArrays, _TreeRegions,
)
from ._tier import numpy_tier
from ._validation import as_ids, check_random_state, issparse
from .exceptions import ParameterError, StructcalError
from .io import SaveLoadMixin

__all__ = [
    "KNNRegionForecaster", "TreeRegionForecaster", "KNNRegionMap", "TreeRegionMap",
    "SingleClassWarning", "PAPER_GRID",
]

#: The paper's grid of region sizes: 5, 10, ..., 500.
PAPER_GRID = tuple(range(5, 501, 5))


class SingleClassWarning(UserWarning):
    """A forecaster was fit on events that all have the same outcome."""


def _check_grid(grid, name):
    values = np.asarray(list(grid))
    if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"`{name}` must be a non-empty sequence of integers; got {grid!r}")
    if values.min() < 1:
        raise ValueError(f"`{name}` entries must be >= 1; got {values.min()}")
    return np.unique(values.astype(np.int64))


def _check_choice(value, name, grid_name):
    if isinstance(value, str):
        if value != "cv":
            raise ValueError(f"`{name}` must be 'cv' or a positive integer; got {value!r}")
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"`{name}` must be 'cv' or a positive integer; got {value!r}")
    return int(value)


class _BinaryForecaster(SaveLoadMixin, ParamsMixin):
    """Shared fit/predict plumbing: two classes (or one, with a warning), probabilities out.

    A scikit-learn binary classifier by protocol (parameters, tags, ``score``, its input
    validation) that imports scikit-learn only for what a plain array of numbers does not
    need: other inputs, error messages, tree growing.
    """

    def _fit_targets(self, X, y):
        _check_rows(X, y)
        fast = _plain_targets(X, y)
        if fast is not None:
            X, y = fast
            self.n_features_in_ = X.shape[1]
            self.__dict__.pop("feature_names_in_", None)
            y_type = "binary"
        else:
            from sklearn.utils.multiclass import type_of_target
            from sklearn.utils.validation import validate_data

            try:
                X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=False)
            except ValueError as exc:
                if isinstance(exc, StructcalError):
                    raise
                raise ParameterError(str(exc)) from exc
            y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type != "binary":
            raise ValueError(
                f"Only binary classification is supported: {type(self).__name__} forecasts "
                f"binary event outcomes; the type of the target is {y_type} with "
                f"{np.unique(y).shape[0]} distinct values"
            )
        self.classes_, y01 = np.unique(y, return_inverse=True)
        if self.classes_.shape[0] == 1:
            warnings.warn(
                f"{type(self).__name__} was fit on events that all have outcome "
                f"{self.classes_[0].item()!r}: it forecasts that outcome with probability 1",
                SingleClassWarning,
                stacklevel=3,
            )
        return X, y01.astype(np.float64)

    def predict_proba(self, X):
        """Calibrated probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Event features.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Column 1 is the probability of the positive outcome (``classes_[1]``). After a
            fit on a single outcome there is one column of ones.
        """
        check_fitted(self, "classes_")
        X = self._features(X)
        if self.classes_.shape[0] == 1:
            return np.ones((X.shape[0], 1))
        p = self._positive_probability(X)
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        """The more probable outcome of each event."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def to_map(self):
        """The fitted forecaster as arrays (a :class:`KNNRegionMap` or :class:`TreeRegionMap`),
        which forecast the same probabilities without scikit-learn."""
        check_fitted(self, "classes_")
        return self._MAP._from_forecaster(self)

    def score(self, X, y, sample_weight=None):
        """Mean accuracy of :meth:`predict` on ``X`` against ``y`` (scikit-learn's
        ``accuracy_score``)."""
        from sklearn.metrics import accuracy_score

        return accuracy_score(y, self.predict(X), sample_weight=sample_weight)

    def _features(self, X):
        """``X`` as validated by scikit-learn's ``validate_data(reset=False)``: a plain
        finite 2-d array of numbers with the fitted width is taken as it is, anything
        else goes to scikit-learn (its conversions, warnings and error messages)."""
        if not hasattr(self, "feature_names_in_"):
            array = _plain_array(X)
            if array is not None and array.shape[1] == self.n_features_in_:
                return array
            if _empty_rows(X, self.n_features_in_):
                return np.empty((0, self.n_features_in_))
            if type(X) is np.ndarray and X.ndim == 2 and X.shape[0] == 0:
                if X.shape[1] != self.n_features_in_:
                    raise ParameterError(f"`X` has {X.shape[1]} features, but "
                                         f"{type(self).__name__} was fit on {self.n_features_in_}")
                raise ParameterError(f"`X` must hold numbers; got an empty array of dtype {X.dtype}")
        from sklearn.utils.validation import validate_data

        return validate_data(self, X, dtype=np.float64, reset=False)

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags

        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier"
        tags.target_tags.required = True
        tags.classifier_tags = ClassifierTags(multi_class=False)
        return tags


def _plain_array(X):
    """``X`` as a float64 array when it is a non-empty, finite 2-d array (or list) of real
    numbers; otherwise None."""
    if isinstance(X, (list, tuple)):
        try:
            X = np.asarray(X)
        except (ValueError, TypeError):
            return None
    if type(X) is not np.ndarray:  # subclasses (memmaps, matrices) take scikit-learn's path
        return None
    if X.ndim != 2 or X.dtype.kind not in "biuf" or X.shape[0] == 0 or X.shape[1] == 0:
        return None
    X = X.astype(np.float64, copy=False)
    return X if np.isfinite(X).all() else None


def _empty_rows(X, width):
    """Whether ``X`` is an array (or list) of no rows, of numbers ``width`` wide: an
    empty batch, forecast as no rows rather than refused as scikit-learn would."""
    if isinstance(X, (list, tuple)) and len(X) == 0:
        return True
    return (type(X) is np.ndarray and X.ndim == 2 and X.shape == (0, width)
            and X.dtype.kind in "biuf")


def _plain_targets(X, y):
    """``(X, y)`` when ``X`` is plain (:func:`_plain_array`) and ``y`` a 1-d array of at most
    two integral numbers, one per row; otherwise None."""
    X = _plain_array(X)
    if X is None or type(y) is not np.ndarray or y.ndim != 1 or y.shape[0] != X.shape[0]:
        return None
    if y.dtype.kind == "f":
        if not np.isfinite(y).all() or (y != np.round(y)).any():
            return None
    elif y.dtype.kind not in "biu":
        return None
    return (X, y) if np.unique(y).shape[0] <= 2 else None


class KNNRegionForecaster(_KNNRegions, _BinaryForecaster):
    """k-nearest-neighbour region forecaster with fast cross-validated k.

    Forecasts, for an event, the fraction of positive events among its ``k`` nearest
    recalibration events in (standardised) feature space.

    Parameters
    ----------
    n_neighbors : 'cv' or int, default='cv'
        ``k``, or ``'cv'`` to choose it by ``cv``-fold cross-validation of the l2 loss
        over ``k_grid``.
    k_grid : sequence of int, default=PAPER_GRID
        Candidate values of ``k`` (5, 10, ..., 500); values above the size of a training
        fold are dropped.
    cv : int, default=10
        Number of cross-validation folds.
    scale : bool, default=True
        Standardise features (zero mean, unit variance; constant features left as they
        are) before measuring distances.
    cv_max_samples : int or None, default=20000
        Above this many events, ``k`` is chosen on a seeded random subsample of
        ``cv_max_samples`` events and rescaled to the full data by the k-NN rate
        ``k ~ n^(4/(d+4))`` (``d`` features); see Notes. ``None``: always cross-validate
        on all events.
    prior : float, default=0.0
        Pseudo-count added to each outcome of every region: the forecast is
        ``(positives among the k neighbours + prior) / (k + 2 prior)``, the posterior mean
        of the region's frequency under a Beta(prior, prior) prior. 0 gives the paper's
        plain frequency, which is exactly 0 or 1 in a region of one outcome; 0.5
        (Jeffreys' prior) keeps every forecast within ``[0.5/(k+1), 1 - 0.5/(k+1)]``.
        Cross-validation scores the forecasts with the prior, so ``k`` is chosen for them.
    random_state : int, Generator or None, default=None
        Seeds the fold assignment, the subsample and the order in which tied neighbours
        are taken.

    Attributes
    ----------
    n_neighbors_ : int
        The ``k`` used.
    cv_results_ : dict or None
        ``{"k": grid, "l2": mean held-out l2 loss per k}`` when ``n_neighbors='cv'``
        (on the subsample when one was used).
    cv_subsample_ : dict or None
        ``{"n_samples": m, "k": k chosen on the subsample, "rate": 4/(d+4)}`` when k was
        chosen on a subsample, else None.
    mean_, scale_ : ndarray of shape (n_features,)
        The standardisation.
    X_fit_ : ndarray of shape (n_samples, n_features)
        The standardised events, in tie order (row ``i`` wins ties against row ``j > i``).
    y_fit_ : ndarray of shape (n_samples,)
        Their outcomes as 0/1.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    Notes
    -----
    Neighbours are exact, found with a KD-tree (:mod:`structcal._knn`, built in ``fit``
    and rebuilt from ``X_fit_`` when missing, e.g. after loading; it is not fitted
    state). Ties in distance go to the event with the lower row in ``X_fit_``, a
    seeded random order of the training events: the results are those of a brute-force
    scan with a stable sort.

    Cross-validation runs one tree query per event: its ``max(k_grid)`` nearest events
    *outside its own fold*, in order, whose running mean of outcomes is the held-out
    forecast for every ``k`` at once. These are exactly the forecasts of ``cv``
    separate fits. Losses are accumulated query by query, so memory does not grow with
    ``n * max(k_grid)``; time is about ``n * max(k_grid) * log(n)``.

    At large ``n`` even that is slow (every event touches ~500 neighbours), so above
    ``cv_max_samples`` events ``k`` is chosen on a seeded subsample of ``m`` events and
    rescaled as ``k_n = round(k_m * (n/m)^(4/(d+4)))`` — the rate at which the
    mean-squared-error-optimal ``k`` grows for a twice-differentiable calibration map in
    ``d`` dimensions. The rescaled ``k`` may exceed ``max(k_grid)``. The held-out Brier
    score of this choice stays within noise of the exact choice on the benchmarks
    (``benchmarks/bench_forecasters.py``). Fitting then costs a subsample CV plus an
    ``n log n`` tree build; predicting costs ``O(k log n)`` per event.

    References
    ----------
    V. Kuleshov, P. Liang, *Calibrated Structured Prediction*, NIPS 2015, §4.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.forecasters import KNNRegionForecaster
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((2000, 1))
    >>> y = rng.random(2000) < x[:, 0] ** 2          # true probability x^2
    >>> f = KNNRegionForecaster(random_state=0).fit(x, y)
    >>> p = f.predict_proba([[0.5]])[0, 1]
    >>> bool(abs(p - 0.25) < 0.1), 5 <= f.n_neighbors_ <= 500
    (True, True)
    """

    _MAP = KNNRegionMap

    def __init__(
        self, n_neighbors="cv", *, k_grid=PAPER_GRID, cv=10, scale=True, cv_max_samples=20_000,
        prior=0.0, random_state=None,
    ):
        self.n_neighbors = n_neighbors
        self.k_grid = k_grid
        self.cv = cv
        self.scale = scale
        self.cv_max_samples = cv_max_samples
        self.prior = prior
        self.random_state = random_state

    def fit(self, X, y, groups=None):
        """Fit on event features ``X`` and outcomes ``y`` (choosing k if ``'cv'``).

        Parameters
        ----------
        X : array-like of shape (n_events, n_features)
        y : array-like of shape (n_events,)
            Binary outcomes.
        groups : array-like of shape (n_events,), optional
            Group of each event (e.g. the document or image it comes from): the
            cross-validation behind ``n_neighbors='cv'`` keeps the events of a group in
            one fold, so that near-duplicates within a group cannot make small regions
            look better than they are on new groups. Default: every event its own group.

        Returns
        -------
        self
        """
        choice = _check_choice(self.n_neighbors, "n_neighbors", "k_grid")
        prior = _check_prior(self.prior)
        grid = _check_grid(self.k_grid, "k_grid")
        if isinstance(self.cv, (bool, np.bool_)) or not isinstance(self.cv, numbers.Integral) or self.cv < 2:
            raise ValueError(f"`cv` must be an integer >= 2; got {self.cv!r}")
        sub = self.cv_max_samples
        if sub is not None and (
            isinstance(sub, (bool, np.bool_)) or not isinstance(sub, numbers.Integral) or sub < 2
        ):
            raise ValueError(f"`cv_max_samples` must be None or an integer >= 2; got {sub!r}")
        X, y01 = self._fit_targets(X, y)
        groups = _groups_iv(groups, X.shape[0])
        rng = check_random_state(self.random_state)
        n = X.shape[0]
        self.mean_ = X.mean(axis=0) if self.scale else np.zeros(X.shape[1])
        std = X.std(axis=0) if self.scale else np.ones(X.shape[1])
        self.scale_ = np.where(std > 0, std, 1.0)
        order = rng.permutation(n)  # tie order: equidistant events are taken by row here
        self.X_fit_ = np.ascontiguousarray((X[order] - self.mean_) / self.scale_)
        self.y_fit_ = y01[order]
        groups = None if groups is None else groups[order]
        self.cv_results_ = None
        self.cv_subsample_ = None
        self._index = None  # the KD-tree is built by the first prediction that needs it
        if choice != "cv":
            if choice > n:
                warnings.warn(
                    f"n_neighbors={choice} but only {n} events were given: every region is "
                    f"all {n} events (k = {n})", UserWarning, stacklevel=2,
                )
            self.n_neighbors_ = int(min(choice, n))
        elif n < 2:
            self.n_neighbors_ = 1
        elif sub is None or n <= sub:
            # the cross-validation's KD-tree (if it built one) is the one over X_fit_
            self.n_neighbors_, self.cv_results_, self._index = _knn_cross_validate(
                self.X_fit_, self.y_fit_, grid, int(self.cv), rng, groups, prior
            )
        else:
            # choose k on a seeded subsample of m events, then rescale k ~ n^(4/(d+4))
            rows = np.sort(rng.choice(n, size=int(sub), replace=False))
            k_sub, self.cv_results_, _ = _knn_cross_validate(
                self.X_fit_[rows], self.y_fit_[rows], grid, int(self.cv), rng,
                None if groups is None else groups[rows], prior,
            )
            rate = 4.0 / (X.shape[1] + 4.0)
            self.n_neighbors_ = int(min(n, max(1, round(k_sub * (n / sub) ** rate))))
            self.cv_subsample_ = {"n_samples": int(sub), "k": k_sub, "rate": rate}
        return self


def _groups_iv(groups, n):
    """Group codes 0..G-1 of ``n`` events (None stays None: each event its own group)."""
    if groups is None:
        return None
    groups = as_ids(groups, "groups", n, "one group per event")
    if groups.dtype == object:
        groups = groups.astype(str)
    return np.unique(groups, return_inverse=True)[1].astype(np.int64)


#: scikit-learn's wording for a missing ``y`` (its estimator checks look for it)
_CLASS_Y_NONE = "requires y to be passed, but the target y is None"


def _check_rows(X, y):
    """``X`` 2-d and ``y`` with one outcome per row of ``X`` (dense inputs; scikit-learn's
    own validation, which follows, covers the rest)."""
    if y is None:
        raise ParameterError(f"{_CLASS_Y_NONE}: `y` (one outcome per row of `X`) is required")
    if issparse(X) or not hasattr(X, "__len__"):
        return
    shape = np.shape(X)
    if len(shape) != 2:
        raise ParameterError(f"`X` must be 2-d (n_events, n_features); got shape {shape}")
    ny = np.shape(y)
    if len(ny) == 0 or ny[0] != shape[0] or (len(ny) == 2 and ny[1] != 1) or len(ny) > 2:
        raise ParameterError(f"`y` must hold one outcome per row of `X` (shape "
                             f"({shape[0]},)); got shape {ny}")


def group_folds(groups, n, cv, rng):
    """Fold of each of ``n`` events: whole groups dealt at random into ``cv`` folds.

    With ``groups`` None every event is its own group. The number of folds is capped at
    the number of groups. Returns ``(folds, n_folds)``.
    """
    if groups is None:
        n_folds = int(min(cv, n))
        return rng.permutation(n) % n_folds, n_folds
    n_groups = int(groups.max()) + 1 if groups.shape[0] else 0
    n_folds = int(min(cv, n_groups))
    return (rng.permutation(n_groups) % max(n_folds, 1))[groups], n_folds


def _knn_cross_validate(X, y, grid, cv, rng, groups=None, prior=0.0):
    """K minimising the ``cv``-fold held-out l2 loss over ``grid``, the losses, and the
    KD-tree over ``X`` the losses were computed with (None without a tree; its folds are
    dropped, so that it serves forecasts as it is).

    Draws the fold assignment from ``rng`` (whole groups per fold when ``groups`` is
    given); ``X``/``y`` are the standardised events in tie order. Ties in loss go to the
    larger k.
    """
    n = X.shape[0]
    folds, n_folds = group_folds(groups, n, cv, rng)
    if n_folds < 2:  # one group: nothing to hold out; the largest region
        k = int(min(grid.max(), n))
        return k, {"k": np.array([k]), "l2": np.array([np.nan])}, None
    k_max = int(min(grid.max(), n - np.bincount(folds, minlength=n_folds).max()))
    grid = grid[grid <= k_max]
    if grid.size == 0:
        grid = np.array([max(k_max, 1)], dtype=np.int64)
    grid = np.ascontiguousarray(grid, dtype=np.int64)
    index = None
    if numpy_tier(n * n * (1 + X.shape[1] // 8)):  # a small fit: no tree, no kernel
        loss = _scan_cv_losses(X, y, folds, grid, prior) / n
    else:
        index = _KDTree(X, y, folds)
        loss = index.cv_losses(grid, prior) / n
        index.fold = None
    # (the tiers sum the losses in other orders: equal to ~1e-16, so ties are relative)
    best = int(np.flatnonzero(loss <= loss.min() * (1.0 + 1e-12) + 1e-15)[-1])
    return int(grid[best]), {"k": grid, "l2": loss}, index


class TreeRegionForecaster(_TreeRegions, _BinaryForecaster):
    """Decision-tree region forecaster with cross-validated minimum leaf size.

    Forecasts, for an event, the fraction of positive events in its leaf of a regression
    tree grown on the recalibration events (l2 splitting criterion).

    Parameters
    ----------
    min_samples_leaf : 'cv' or int, default='cv'
        Minimum number of events per leaf, or ``'cv'`` to choose it by ``cv``-fold
        cross-validation of the l2 loss over ``leaf_grid``.
    leaf_grid : sequence of int, default=PAPER_GRID
        Candidate minimum leaf sizes (5, 10, ..., 500); values above half a training
        fold are dropped.
    cv : int, default=10
        Number of cross-validation folds.
    max_depth : int or None, default=None
        Passed to the tree.
    random_state : int, Generator or None, default=None
        Seeds the folds and the trees' tie-breaking.

    Attributes
    ----------
    min_samples_leaf_ : int
        The leaf size used.
    grown_min_samples_leaf_ : int
        The leaf size the tree was grown with (``min(leaf_grid)`` under CV, else
        ``min_samples_leaf_``); see Notes.
    tree_children_ : ndarray of shape (n_nodes, 2)
        Left and right child of each node (-1, -1 at leaves, including pruned nodes).
    tree_feature_, tree_threshold_ : ndarray of shape (n_nodes,)
        Split of each internal node: left if ``x[feature] <= threshold`` (features
        compared in float32, as scikit-learn does).
    tree_value_ : ndarray of shape (n_nodes,)
        Mean outcome of the training events in each node.
    cv_results_ : dict or None
        ``{"min_samples_leaf": grid, "l2": mean held-out l2 loss}`` when cross-validated.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    Notes
    -----
    Cross-validation grows **one tree per fold** and evaluates every leaf size on it by
    pruning. The forecaster for leaf size ``m`` is defined as follows: grow the
    scikit-learn regression tree with ``min_samples_leaf = m0 = min(leaf_grid)``, then,
    from the root down, make a leaf of every node whose split leaves fewer than ``m``
    training events on either side; its forecast is the mean outcome of its training
    events. Every leaf keeps at least ``m`` events, as with ``min_samples_leaf=m``. For
    ``m = m0`` this *is* scikit-learn's tree; for larger ``m`` it can differ from a tree
    refit with ``min_samples_leaf=m``, which may choose a different split where the best
    unconstrained one is too unbalanced (there the pruned tree stops, the refit tree
    splits elsewhere). The final forecaster is this pruned tree on all events at the
    chosen ``m``. Cost: ``cv + 1`` tree fits instead of ``cv * len(leaf_grid) + 1``.
    Trees suit categorical features (the paper found them better than k-NN there).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.forecasters import TreeRegionForecaster
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 3, size=(3000, 1)).astype(float)   # a categorical feature
    >>> y = rng.random(3000) < np.array([0.1, 0.5, 0.9])[x[:, 0].astype(int)]
    >>> f = TreeRegionForecaster(leaf_grid=[5, 50, 500], random_state=0).fit(x, y)
    >>> np.round(f.predict_proba([[0.0], [1.0], [2.0]])[:, 1], 1).tolist()
    [0.1, 0.5, 0.9]
    """

    _MAP = TreeRegionMap

    def __init__(self, min_samples_leaf="cv", *, leaf_grid=PAPER_GRID, cv=10, max_depth=None, random_state=None):
        self.min_samples_leaf = min_samples_leaf
        self.leaf_grid = leaf_grid
        self.cv = cv
        self.max_depth = max_depth
        self.random_state = random_state

    def _grow(self, X, y, m, seed):
        from sklearn.tree import DecisionTreeRegressor

        tree = DecisionTreeRegressor(min_samples_leaf=int(m), max_depth=self.max_depth, random_state=seed)
        return _TreeArrays(tree.fit(X, y).tree_)

    def fit(self, X, y, groups=None):
        """Fit on event features ``X`` and outcomes ``y`` (choosing the leaf size if ``'cv'``).

        ``groups`` (one per event, optional) keeps the events of a group in one fold of
        the cross-validation, as in :meth:`KNNRegionForecaster.fit`.
        """
        choice = _check_choice(self.min_samples_leaf, "min_samples_leaf", "leaf_grid")
        grid = _check_grid(self.leaf_grid, "leaf_grid")
        if isinstance(self.cv, (bool, np.bool_)) or not isinstance(self.cv, numbers.Integral) or self.cv < 2:
            raise ValueError(f"`cv` must be an integer >= 2; got {self.cv!r}")
        X, y01 = self._fit_targets(X, y)
        groups = _groups_iv(groups, X.shape[0])
        rng = check_random_state(self.random_state)
        seed = int(rng.integers(0, 2**31 - 1))
        n = X.shape[0]
        self.cv_results_ = None
        n_groups = n if groups is None else int(groups.max()) + 1
        if choice == "cv" and n >= 4 and n_groups >= 2:
            if groups is None:
                from sklearn.model_selection import KFold

                cv = min(int(self.cv), n)
                splits = list(KFold(n_splits=cv, shuffle=True, random_state=seed).split(X))
            else:
                fold, cv = group_folds(groups, n, int(self.cv), np.random.default_rng(seed))
                splits = [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(cv)]
            smallest_train = min(tr.shape[0] for tr, _ in splits)
            grid = grid[grid <= max(smallest_train // 2, 1)]
            if grid.size == 0:
                grid = np.array([1])
            grown = int(grid[0])
            loss = np.zeros(grid.shape[0])
            for train, test in splits:
                tree = self._grow(X[train], y01[train], grown, seed)
                loss += tree.pruned_losses(X[test], y01[test], grid)
            loss /= n
            best = int(np.flatnonzero(loss <= loss.min() + 1e-15)[-1])  # ties: larger leaves
            self.min_samples_leaf_ = int(grid[best])
            self.cv_results_ = {"min_samples_leaf": grid, "l2": loss}
        else:
            self.min_samples_leaf_ = grown = 1 if choice == "cv" else int(min(choice, n))
        self.grown_min_samples_leaf_ = grown
        tree = self._grow(X, y01, grown, seed).pruned(self.min_samples_leaf_)
        self.tree_children_, self.tree_feature_ = tree.children, tree.feature
        self.tree_threshold_, self.tree_value_ = tree.threshold, tree.value
        return self
