"""Boundary checks for the calibration metrics: forecasts, outcomes, weights and settings.

Every metric reduces its input to one or more *binary problems*: a column of scores
``s`` in [0, 1] and a column of 0/1 outcomes ``o`` of the same length (plus the shared
sample weights). :func:`binary_columns` does that reduction for the four settings of
Posocco & Bonnefoy (binary, class-specific, class-wise, confidence).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, check_int, check_option, describe
from ..exceptions import ParameterError, ParameterTypeError
from . import _binning

__all__ = [
    "SparseBinsWarning",
    "SETTINGS",
    "Columns",
    "check_binary_outcomes",
    "check_probabilities",
    "check_labels",
    "check_sample_weight",
    "check_n_bins",
    "binary_columns",
    "warn_sparse_bins",
]

#: Rows of a probability matrix must sum to one within this absolute tolerance.
ROW_SUM_ATOL = 1e-5

#: Outcome dtypes checked and converted in one compiled pass (others take the numpy path).
_FAST_OUTCOME_DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.int32, np.int64, np.float64))

SETTINGS = ("auto", "binary", "class-specific", "class-wise", "confidence")


class SparseBinsWarning(UserWarning):
    """A binned estimate was asked for with fewer samples than bins.

    The estimate is still computed (empty bins are skipped), but binned calibration errors
    are strongly biased upwards when bins hold few samples.
    """


def check_binary_outcomes(y_true, name: str = "y_true", *, n: int | None = None) -> np.ndarray:
    """Return 0/1 outcomes as float64; accepts bool, integer or float arrays of 0 and 1."""
    arr = np.asarray(y_true) if not isinstance(y_true, np.ndarray) else y_true
    if arr.dtype == object or not (
        arr.dtype == np.bool_
        or np.issubdtype(arr.dtype, np.integer)
        or np.issubdtype(arr.dtype, np.floating)
    ):
        raise ParameterTypeError(
            f"`{name}` must hold binary outcomes (bool, or 0/1 numbers); got {describe(arr)}"
        )
    if arr.ndim == 1 and arr.dtype in _FAST_OUTCOME_DTYPES and (n is None or arr.shape[0] == n):
        out = np.empty(arr.shape[0])
        if _binning.binary_as_float(arr, out):  # one pass; else the checks below say why
            return out
    out = as_float_array(arr, name, ndim=1)
    if n is not None and out.shape[0] != n:
        raise ParameterError(
            f"`{name}` must have one outcome per forecast ({n}); got {out.shape[0]}"
        )
    bad = (out != 0.0) & (out != 1.0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(
            f"`{name}` must hold binary outcomes 0/1; got {out[i]!r} at index {i}"
        )
    return out


def check_probabilities(y_prob, name: str = "y_prob") -> np.ndarray:
    """Return forecasts as float64: (n,) probabilities or (n, K) rows on the simplex."""
    if (
        isinstance(y_prob, np.ndarray) and y_prob.dtype == np.float64 and y_prob.ndim == 1
        and y_prob.size and y_prob.flags.c_contiguous and _binning.all_probabilities(y_prob)
    ):
        return y_prob  # one pass; else the checks below say what is wrong
    arr = as_float_array(y_prob, name, allow_empty=False)
    if arr.ndim not in (1, 2):
        raise ParameterError(
            f"`{name}` must be 1-d (binary forecasts) or 2-d (n_samples, n_classes); got "
            f"{arr.ndim}-d array of shape {arr.shape}"
        )
    if arr.ndim == 2 and arr.shape[1] < 2:
        raise ParameterError(
            f"`{name}` with 2 dimensions must have at least 2 class columns; got shape "
            f"{arr.shape} (pass binary forecasts as a 1-d array)"
        )
    bad = (arr < 0.0) | (arr > 1.0)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ParameterError(
            f"`{name}` must hold probabilities in [0, 1]; got {arr[where]!r} at index {where}"
        )
    if arr.ndim == 2:
        dev = np.abs(arr.sum(axis=1) - 1.0)
        if (dev > ROW_SUM_ATOL).any():
            i = int(np.argmax(dev))
            raise ParameterError(
                f"rows of `{name}` must sum to 1 (within {ROW_SUM_ATOL:g}); row {i} sums to "
                f"{arr[i].sum()!r}"
            )
    return arr


def check_labels(y_true, n: int, n_classes: int, name: str = "y_true") -> np.ndarray:
    """Return integer class labels in ``[0, n_classes)`` as int64."""
    arr = np.asarray(y_true) if not isinstance(y_true, np.ndarray) else y_true
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and arr.size and np.all(np.isfinite(arr)) and (
            np.all(arr == np.round(arr))
        ):
            raise ParameterTypeError(
                f"`{name}` must be integer class labels 0..{n_classes - 1}; got a float array "
                "(convert it with .astype(int) if the values are labels)"
            )
        raise ParameterTypeError(
            f"`{name}` must be integer class labels 0..{n_classes - 1}; got {describe(arr)}"
        )
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ParameterError(
            f"`{name}` must have shape ({n},) (one label per row of y_prob); got {arr.shape}"
        )
    bad = (arr < 0) | (arr >= n_classes)
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(
            f"`{name}` must hold labels in 0..{n_classes - 1} (the columns of y_prob); got "
            f"{arr[i]} at index {i}"
        )
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_sample_weight(sample_weight, n: int) -> np.ndarray | None:
    """Return non-negative finite weights of shape (n,) with a positive sum, or None."""
    if sample_weight is None:
        return None
    w = as_float_array(sample_weight, "sample_weight", ndim=1)
    if w.shape[0] != n:
        raise ParameterError(
            f"`sample_weight` must have shape ({n},) (one weight per sample); got {w.shape}"
        )
    if (w < 0).any():
        i = int(np.argmax(w < 0))
        raise ParameterError(f"`sample_weight` must be >= 0; got {w[i]!r} at index {i}")
    if not w.sum() > 0:
        raise ParameterError("`sample_weight` must have a positive sum; all weights are 0")
    return w


def check_n_bins(n_bins, n_samples: int) -> int:
    """Resolve ``n_bins`` (an int >= 1 or ``"sqrt"``) to an int."""
    if isinstance(n_bins, str):
        if n_bins != "sqrt":
            raise ParameterError(f"`n_bins` must be a positive int or 'sqrt'; got {n_bins!r}")
        return max(1, int(round(np.sqrt(n_samples))))
    return check_int(n_bins, "n_bins", low=1)


def warn_sparse_bins(n_samples: int, n_bins: int, stacklevel: int = 4) -> None:
    """Warn (SparseBinsWarning) when there are fewer samples than bins."""
    if n_samples < n_bins:
        warnings.warn(
            f"only {n_samples} samples for {n_bins} bins: some bins are necessarily empty and "
            "binned calibration errors are strongly biased upwards; use fewer bins "
            "(n_bins='sqrt') or a kernel estimate",
            SparseBinsWarning,
            stacklevel=stacklevel,
        )


@dataclass(frozen=True)
class Columns:
    """Binary problems derived from the input, all sharing the same rows.

    Attributes
    ----------
    scores : ndarray of shape (n_columns, n_samples)
        Forecast probability of each column's event.
    outcomes : ndarray of shape (n_columns, n_samples)
        1.0 where the event happened, else 0.0.
    weights : ndarray of shape (n_samples,) or None
        Sample weights (None: all ones).
    setting : str
        The resolved setting.
    labels : tuple of int
        The class each column is about (the positive class 1 for binary forecasts; ``-1``
        for the confidence setting, whose column is "the predicted class is right").
    """

    scores: np.ndarray
    outcomes: np.ndarray
    weights: np.ndarray | None
    setting: str
    labels: tuple

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.scores.shape[1])

    @property
    def n_columns(self) -> int:
        """Number of binary problems."""
        return int(self.scores.shape[0])


def binary_columns(y_true, y_prob, *, setting="auto", label=None, sample_weight=None) -> Columns:
    """Validate a metric's input and reduce it to binary problems.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 outcomes when ``y_prob`` is 1-d; integer class labels ``0..K-1`` when it is
        2-d.
    y_prob : array-like of shape (n_samples,) or (n_samples, K)
        Probabilities of the positive class, or class-probability rows summing to one.
    setting : {"auto", "binary", "class-specific", "class-wise", "confidence"}
        ``"auto"`` is ``"binary"`` for 1-d and ``"confidence"`` for 2-d ``y_prob``.
        ``"binary"``: the events "y = 1" forecast by ``y_prob`` (1-d input only).
        ``"class-specific"``: the events "y = label" forecast by column ``label``.
        ``"class-wise"``: every class, one column each (estimates are averaged).
        ``"confidence"``: the event "the predicted class (arg max) is right" forecast by
        the largest probability (top-label calibration). 1-d input is read as the two
        columns ``(1 - p, p)`` for the last three settings.
    label : int, optional
        The class of the class-specific setting (required there, rejected elsewhere).
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative weights.

    Returns
    -------
    Columns
    """
    setting = check_option(setting, "setting", SETTINGS)
    prob = check_probabilities(y_prob)
    n = prob.shape[0]
    if setting == "auto":
        setting = "binary" if prob.ndim == 1 else "confidence"
    if label is not None and setting != "class-specific":
        raise ParameterError(
            f"`label` is only used with setting='class-specific'; got label={label!r} with "
            f"setting={setting!r}"
        )
    w = check_sample_weight(sample_weight, n)
    if prob.ndim == 1:
        y = check_binary_outcomes(y_true, n=n)
        if setting == "binary":
            return Columns(prob[None, :], y[None, :], w, setting, (1,))
        prob = np.stack([1.0 - prob, prob], axis=1)
        labels = y.astype(np.int64)
    else:
        if setting == "binary":
            raise ParameterError(
                "setting='binary' needs 1-d forecasts of the positive class; got y_prob of "
                f"shape {prob.shape} (use 'class-specific' with label=1, or pass y_prob[:, 1])"
            )
        labels = check_labels(y_true, n, prob.shape[1])
    K = prob.shape[1]
    if setting == "class-specific":
        if label is None:
            raise ParameterError("setting='class-specific' needs `label` (the class to assess)")
        k = check_int(label, "label", low=0, high=K - 1)
        s = np.ascontiguousarray(prob[:, k])[None, :]
        o = (labels == k).astype(np.float64)[None, :]
        return Columns(s, o, w, setting, (k,))
    if setting == "class-wise":
        s = np.ascontiguousarray(prob.T)
        o = (labels[None, :] == np.arange(K)[:, None]).astype(np.float64)
        return Columns(s, o, w, setting, tuple(range(K)))
    # confidence / top-label
    pred = np.argmax(prob, axis=1)
    s = np.ascontiguousarray(prob[np.arange(n), pred])[None, :]
    o = (pred == labels).astype(np.float64)[None, :]
    return Columns(s, o, w, setting, (-1,))
