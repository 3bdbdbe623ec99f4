"""Shared machinery of the recalibrators: input checks, class bookkeeping, one-vs-rest.

Every calibrator is a scikit-learn classifier whose input ``X`` holds a model's scores:

* one column (or a 1-d array): the score of the positive class of a binary problem;
* ``K >= 2`` columns: one score per class, column ``k`` for class ``classes_[k]``. Score
  calibrators (Platt, isotonic, histogram, spline) calibrate each column as a binary
  problem "y = classes_[k]" and renormalise the rows (Zadrozny & Elkan's normalised
  one-vs-rest); with two columns and two classes only the second column is used, as in
  scikit-learn's ``CalibratedClassifierCV``. Logit calibrators (temperature, vector
  scaling) transform all columns jointly.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._estimator import ClassifierParamsMixin, check_fitted
from .._validation import as_float_array
from ..exceptions import ParameterError, ParameterTypeError
from ..io import SaveLoadMixin

__all__ = ["BaseCalibrator", "ScoreCalibrator", "normalize_rows", "check_scores"]


def check_scores(X, name="X", *, probabilities=False) -> np.ndarray:
    """Return scores as a C-contiguous (n_samples, n_columns) float64 array."""
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise ParameterTypeError(f"`{name}` must be a dense array of scores; got a sparse matrix")
    raw = np.asarray(X) if not isinstance(X, np.ndarray) else X
    if np.iscomplexobj(raw):
        raise ParameterError(f"`{name}` must hold real scores: Complex data not supported")
    if raw.dtype == object:
        try:
            raw = raw.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ParameterTypeError(
                f"`{name}` must hold numbers; got an object array that does not convert: {exc}"
            ) from None
    if raw.ndim == 2 and raw.shape[1] == 0:
        raise ParameterError(
            f"`{name}` has 0 feature(s) (shape={raw.shape}) while a minimum of 1 is required."
        )
    arr = as_float_array(raw, name, allow_empty=False)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ParameterError(
            f"`{name}` must be 1-d (scores of a binary problem) or 2-d (n_samples, "
            f"n_columns); got shape {arr.shape}"
        )
    if arr.shape[1] == 0:
        raise ParameterError(f"`{name}` must have at least one column; got shape {arr.shape}")
    if probabilities:
        bad = (arr < 0) | (arr > 1)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ParameterError(
                f"`{name}` must hold probabilities in [0, 1] for this calibrator; got "
                f"{arr[where]!r} at index {where}"
            )
    return np.ascontiguousarray(arr)


def check_fit_weights(sample_weight, n) -> np.ndarray:
    """Sample weights for ``fit``: ones if None; finite, >= 0, positive sum."""
    if sample_weight is None:
        return np.ones(n)
    w = as_float_array(sample_weight, "sample_weight", ndim=1)
    if w.shape[0] != n:
        raise ParameterError(
            f"`sample_weight` must have shape ({n},) (one weight per sample); got {w.shape}"
        )
    if (w < 0).any():
        raise ParameterError("`sample_weight` must be >= 0")
    if not w.sum() > 0:
        raise ParameterError("`sample_weight` must have a positive sum; all weights are zero")
    return w


def normalize_rows(P: np.ndarray) -> np.ndarray:
    """Divide each row by its sum; a row summing to 0 becomes uniform."""
    s = P.sum(axis=1, keepdims=True)
    K = P.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(s > 0, P / np.where(s > 0, s, 1.0), 1.0 / K)
    return out


def _check_label_type(y):
    """Reject a missing or continuous target before anything else."""
    if y is None:
        raise ParameterError(
            "this calibrator requires y to be passed, but the target y is None"
        )
    arr = np.asarray(y)
    if arr.dtype.kind == "f" and np.isfinite(arr).all() and (arr != np.round(arr)).any():
        raise ParameterError(
            "Unknown label type: continuous (non-integer) targets; calibrators need class "
            "labels"
        )


def _encode_labels(y, n, n_columns):
    """Return (classes_, y_index) for ``n_columns`` score columns."""
    if y is None:
        raise ParameterError(
            "this calibrator requires y to be passed, but the target y is None"
        )
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        from sklearn.exceptions import DataConversionWarning

        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is raveled",
            DataConversionWarning,
            stacklevel=4,
        )
        y = y.ravel()
    if y.ndim != 1:
        raise ParameterError(f"`y` must be 1-d (one label per sample); got shape {y.shape}")
    if y.shape[0] != n:
        raise ParameterError(f"`y` must have one label per row of X ({n}); got {y.shape[0]}")
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ParameterError("`y` must not contain NaN or infinite labels")
        if (y != np.round(y)).any():
            raise ParameterError(
                "Unknown label type: continuous (non-integer) targets; calibrators need "
                "class labels"
            )
    if y.dtype.kind == "O":
        kinds = {type(v) for v in y.tolist()}
        if len(kinds) > 1:
            raise ParameterTypeError(
                f"`y` must hold labels of one type; got {sorted(map(str, kinds))}"
            )
        if all(isinstance(v, (int, np.integer)) for v in y.tolist()):
            y = y.astype(np.int64)
    present = np.unique(y)
    if n_columns >= 3 and y.dtype.kind in "iu" and present.min() >= 0 and (
        present.max() < n_columns
    ):
        classes = np.arange(n_columns)  # integer labels index the columns; absent ones allowed
    else:
        classes = present
    if n_columns == 1 or (n_columns == 2 and len(classes) <= 2):
        if len(classes) != 2:
            raise ParameterError(
                f"calibrating a binary problem needs samples of exactly 2 classes; y has "
                f"{len(classes)} class{'es' if len(classes) != 1 else ''} ({classes.tolist()[:5]})"
            )
    elif len(classes) != n_columns:
        raise ParameterError(
            f"X has {n_columns} score columns, one per class, but y has {len(classes)} "
            f"classes ({classes.tolist()[:10]}); label the classes 0..{n_columns - 1} (a class "
            "may be absent) or pass one column per class present"
        )
    y_index = np.searchsorted(classes, y)
    return classes, y_index.astype(np.int64)


class BaseCalibrator(SaveLoadMixin, ClassifierParamsMixin):
    """Input handling common to all calibrators (not used directly).

    Subclasses implement ``_fit(S, y_index, w)`` and ``_predict_proba(S)`` on validated
    (n_samples, n_columns) scores and 0-based class indices.
    """

    _probabilities = False  # inputs must lie in [0, 1]
    _max_abs_score = None  # calibrators that square or cube scores refuse larger ones

    def _scores(self, X, reset):
        if not reset:
            check_fitted(self)
        S = check_scores(X, probabilities=self._probabilities_required())
        if self._max_abs_score is not None and S.size:
            big = float(np.abs(S).max())
            if big > self._max_abs_score:
                raise ParameterError(
                    f"`X` holds a score of magnitude {big:.3g}; {type(self).__name__} squares "
                    f"or cubes scores and accepts magnitudes up to {self._max_abs_score:g} "
                    "(pass logits or probabilities, or rescale the scores)"
                )
        ndim = np.asarray(X).ndim
        if not reset and S.shape[1] != self.n_features_in_:
            hint = "; Reshape your data: 1-d input is read as one score column" if ndim == 1 else ""
            raise ParameterError(
                f"X has {S.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input{hint}"
            )
        if ndim == 2 and (type(X) is not np.ndarray or hasattr(self, "feature_names_in_")):
            # scikit-learn's feature-name bookkeeping (pandas inputs, or a calibrator fit
            # on them); sets n_features_in_
            from sklearn.utils.validation import validate_data

            validate_data(self, X, reset=reset, skip_check_array=True)
        if reset:
            self.n_features_in_ = S.shape[1]
        return S

    def _probabilities_required(self) -> bool:
        return self._probabilities

    def fit(self, X, y, sample_weight=None):
        """Fit the calibration map(s).

        Parameters
        ----------
        X : array-like of shape (n_samples,) or (n_samples, n_columns)
            Scores of the model being calibrated (see the class docstring).
        y : array-like of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.

        Returns
        -------
        self
        """
        self._validate_hyperparameters()
        _check_label_type(y)
        S = self._scores(X, reset=True)
        self.classes_, y_index = _encode_labels(y, S.shape[0], S.shape[1])
        w = check_fit_weights(sample_weight, S.shape[0])
        self._fit(S, y_index, w)
        return self

    def predict_proba(self, X):
        """Calibrated class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples,) or (n_samples, n_columns)
            Scores, laid out as in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to one; columns follow ``classes_``.
        """
        S = self._scores(X, reset=False)
        return self._predict_proba(S)

    def predict(self, X):
        """Most probable class after calibration.

        Parameters
        ----------
        X : array-like of shape (n_samples,) or (n_samples, n_columns)
            Scores, laid out as in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def _validate_hyperparameters(self):
        """Check hyperparameters (overridden by subclasses that have any)."""



class ScoreCalibrator(BaseCalibrator):
    """A one-dimensional calibration map per column, renormalised for several classes.

    Subclasses implement ``_fit_column(s, outcome, w, column) -> map`` (``s`` the scores
    of one column, ``outcome`` 0/1, ``w`` weights), where ``map(s)`` returns calibrated
    probabilities in [0, 1]; the fitted maps are stored in ``maps_``.
    """

    def _check_loaded(self):
        """Invariants of a fitted score calibrator read from a file."""
        from .._loadcheck import array, integer

        classes = array(self, "classes_", ndim=1, kind=None)
        d = integer(self, "n_features_in_", low=1)
        if classes.shape[0] < 2 or np.unique(classes).shape[0] != classes.shape[0]:
            raise ValueError("classes_ must hold at least two distinct labels")
        maps = getattr(self, "maps_", None)
        if not isinstance(maps, tuple) or not maps or not all(callable(m) for m in maps):
            raise ValueError("maps_ must be a non-empty tuple of calibration maps")
        want = 1 if (d == 2 and classes.shape[0] == 2) or d == 1 else d
        if len(maps) != want:
            raise ValueError(f"maps_ must hold {want} map(s) for {d} score column(s); got "
                             f"{len(maps)}")

    def _columns_to_fit(self, n_columns):
        # with two columns for two classes the second one carries all the information
        return [1] if (n_columns == 2 and len(self.classes_) == 2) else list(range(n_columns))

    def _fit(self, S, y_index, w):
        columns = self._columns_to_fit(S.shape[1])
        maps = []
        for k in columns:
            positive = 1 if len(columns) == 1 else k
            outcome = (y_index == positive).astype(np.float64)
            wpos = float(w[outcome == 1].sum())
            if wpos <= 0 or wpos >= float(w.sum()):
                label = self.classes_[positive]
                label = label.item() if isinstance(label, np.generic) else label
                raise ParameterError(
                    f"cannot calibrate the column of class {label!r}: the "
                    "calibration data have only one class for it "
                    f"({'no' if wpos <= 0 else 'only'} samples of that class)"
                )
            maps.append(self._fit_column(np.ascontiguousarray(S[:, k]), outcome, w, k))
        self.maps_ = tuple(maps)

    def _predict_proba(self, S):
        if len(self.maps_) == 1:
            col = 0 if S.shape[1] == 1 else 1
            p = np.clip(self.maps_[0](S[:, col]), 0.0, 1.0)
            return np.stack([1.0 - p, p], axis=1)
        P = np.column_stack([m(S[:, k]) for k, m in enumerate(self.maps_)])
        return normalize_rows(np.clip(P, 0.0, 1.0))
