"""Normalised one-vs-rest calibration (Zadrozny & Elkan, 2002) around any binary calibrator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._estimator import clone
from ..exceptions import ParameterTypeError
from ._base import ScoreCalibrator
from .platt import PlattScaling

__all__ = ["NormalizedOneVsRest", "EstimatorMap"]


@dataclass(frozen=True)
class EstimatorMap:
    """A calibration map given by a fitted binary classifier on one score feature.

    Attributes
    ----------
    estimator : estimator
        The fitted classifier; ``map(s) = estimator.predict_proba(s[:, None])[:, 1]``.
    """

    estimator: object

    def __call__(self, s):
        """Calibrated probabilities of scores ``s``."""
        s = np.asarray(s, dtype=np.float64).reshape(-1, 1)
        return self.estimator.predict_proba(s)[:, 1]


class NormalizedOneVsRest(ScoreCalibrator):
    """Calibrate each class column with its own binary calibrator, then renormalise rows.

    For ``K`` score columns, a clone of ``estimator`` is fitted on ``(X[:, [k]], y ==
    classes_[k])`` for each class and the calibrated probabilities ``g_k(s_k)`` are
    divided by their row sum (a row summing to 0 becomes uniform). The built-in score
    calibrators do exactly this for multiclass input (through the same code); this
    wrapper makes any binary classifier with ``predict_proba`` (a structcal calibrator,
    or e.g. scikit-learn's ``LogisticRegression``) usable the same way. Binary scores
    use one clone, as the score calibrators do.

    Parameters
    ----------
    estimator : estimator, default=None
        A binary classifier with ``fit(X, y, sample_weight=...)`` and ``predict_proba``;
        ``None`` means :class:`PlattScaling`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of score columns.
    maps_ : tuple of EstimatorMap
        The fitted per-column calibrators.

    References
    ----------
    B. Zadrozny, C. Elkan, *Transforming classifier scores into accurate multiclass
    probability estimates*, KDD 2002.
    """

    def __init__(self, estimator=None):
        self.estimator = estimator

    def _validate_hyperparameters(self):
        est = self.estimator
        if est is not None and not (hasattr(est, "fit") and hasattr(est, "predict_proba")):
            raise ParameterTypeError(
                f"`estimator` must have fit and predict_proba; got {type(est).__name__}"
            )

    def _fit_column(self, s, outcome, w, column):
        est = clone(PlattScaling() if self.estimator is None else self.estimator)
        est.fit(s.reshape(-1, 1), outcome.astype(np.int64), sample_weight=w)
        return EstimatorMap(est)
