"""Detection-style calibration of object confidences: found objects *and* missed ones.

The calibration of object events alone (is each predicted object a real one?) says
nothing about the objects a segmenter never proposed. :func:`object_calibration` charges
them: each gold object no prediction matched counts as a forecast of 0 for an object that
exists. On the pooled forecasts it reports the Brier score and the calibration error
(structcal's estimator), next to precision, recall and the expected number of matched
objects (the sum of the confidences) against the actual one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int_array
from ..exceptions import ParameterError
from ._inputs import check_binary_outcomes, check_probabilities
from .calibration import CalibrationErrorResult, calibration_error

__all__ = ["ObjectCalibration", "object_calibration"]


@dataclass(frozen=True, eq=False)
class ObjectCalibration:
    """Calibration of object confidences with missed gold objects charged.

    Attributes
    ----------
    n_objects, n_matched, n_missed : int
        Predicted objects, those matching a gold object, gold objects nobody matched.
    precision, recall, f1 : float
        Object-level (NaN where undefined).
    expected_matched : float
        Sum of the confidences: the number of matched objects the forecasts promise.
    brier : float
        Mean squared error over the objects and the misses (a miss costs 1).
    brier_objects : float
        Over the predicted objects only (NaN without objects).
    calibration : CalibrationErrorResult
        Calibration error over the objects and the misses (misses at forecast 0).
    calibration_objects : CalibrationErrorResult or None
        Over the predicted objects only.
    forecasts, outcomes : ndarray
        The pooled forecasts and outcomes (objects first, then one 0-forecast per miss).
    groups : ndarray or None
        Group (image) of each pooled forecast, for
        ``calibration.confidence_interval(groups=result.groups)``.
    """

    n_objects: int
    n_matched: int
    n_missed: int
    precision: float
    recall: float
    f1: float
    expected_matched: float
    brier: float
    brier_objects: float
    calibration: CalibrationErrorResult
    calibration_objects: CalibrationErrorResult | None
    forecasts: np.ndarray
    outcomes: np.ndarray
    groups: np.ndarray | None

    def __repr__(self):
        return (f"ObjectCalibration(n_objects={self.n_objects}, n_matched={self.n_matched}, "
                f"n_missed={self.n_missed}, brier={self.brier:.4f}, "
                f"calibration={self.calibration.estimate:.4f})")


def object_calibration(y_prob, matched, n_missed=0, *, groups=None) -> ObjectCalibration:
    """Calibration of per-object confidences, charging the gold objects nobody found.

    Parameters
    ----------
    y_prob : array-like of shape (n_objects,)
        Confidence of each predicted object.
    matched : array-like of shape (n_objects,), bool
        Whether each object matches a gold object (e.g. IoU >= 0.5 within its class).
    n_missed : int or array-like of int, default=0
        Gold objects no prediction matched: a total, or one count per group (image)
        when ``groups`` are integer ids ``0..n_groups - 1``.
    groups : array-like of shape (n_objects,), int, optional
        Image of each object; with per-image ``n_missed`` the misses join their image's
        group, so intervals can resample whole images.

    Returns
    -------
    ObjectCalibration

    Examples
    --------
    >>> from structcal.metrics import object_calibration
    >>> r = object_calibration([0.9, 0.8, 0.2], [True, True, False], n_missed=1)
    >>> round(r.recall, 3), round(r.brier, 4), round(r.expected_matched, 2)
    (0.667, 0.2725, 1.9)
    """
    if np.size(y_prob) == 0:
        p = np.asarray(y_prob, dtype=np.float64).reshape(-1)
    else:
        p = check_probabilities(y_prob)
    if p.ndim != 1:
        raise ParameterError(f"`y_prob` must be 1-d (one confidence per object); got shape "
                             f"{p.shape}")
    y = (np.zeros(0) if p.size == 0 and np.size(matched) == 0
         else check_binary_outcomes(matched, n=p.shape[0], name="matched"))
    g = None
    if groups is not None:
        g = as_int_array(np.asarray(groups), "groups", ndim=1, shape=(p.shape[0],), low=0)
    miss = np.asarray(n_missed)
    if miss.ndim == 0:
        m = as_int_array(miss.reshape(1), "n_missed", ndim=1, low=0)
        total_missed = int(m[0])
        miss_groups = None
    else:
        m = as_int_array(miss, "n_missed", ndim=1, low=0)
        if g is None:
            raise ParameterError("per-group `n_missed` needs `groups` (the image of each object)")
        if g.size and g.max() >= m.shape[0]:
            raise ParameterError(f"`groups` holds {int(g.max())}, beyond the {m.shape[0]} "
                                 "groups of `n_missed`")
        total_missed = int(m.sum())
        miss_groups = np.repeat(np.arange(m.shape[0]), m)
    forecasts = np.concatenate([p, np.zeros(total_missed)])
    outcomes = np.concatenate([y.astype(np.float64), np.ones(total_missed)])
    pooled_groups = None
    if g is not None:
        if miss_groups is None:  # a total: the misses form a group of their own
            miss_groups = np.full(total_missed, (int(g.max()) + 1) if g.size else 0)
        pooled_groups = np.concatenate([g, miss_groups]).astype(np.int64)
    n_obj, n_match = int(p.shape[0]), int(y.sum())
    precision = n_match / n_obj if n_obj else float("nan")
    recall = n_match / (n_match + total_missed) if n_match + total_missed else float("nan")
    f1 = (2 * n_match / (n_obj + n_match + total_missed)
          if n_obj + n_match + total_missed else float("nan"))
    if forecasts.size == 0:
        raise ParameterError("`y_prob` and `n_missed`: no objects and no missed objects, "
                             "nothing to evaluate")
    cal = calibration_error(outcomes, forecasts)
    cal_obj = calibration_error(y, p) if n_obj else None
    return ObjectCalibration(
        n_objects=n_obj, n_matched=n_match, n_missed=total_missed, precision=precision,
        recall=recall, f1=f1, expected_matched=float(p.sum()),
        brier=float(np.mean((forecasts - outcomes) ** 2)),
        brier_objects=float(np.mean((p - y) ** 2)) if n_obj else float("nan"),
        calibration=cal, calibration_objects=cal_obj, forecasts=forecasts,
        outcomes=outcomes.astype(bool), groups=pooled_groups,
    )
