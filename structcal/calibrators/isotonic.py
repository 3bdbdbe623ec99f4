"""Isotonic regression calibration (pool-adjacent-violators)."""

from __future__ import annotations

import numpy as np

from ._base import ScoreCalibrator
from ._isotonic import InterpolatedMap, isotonic_fit  # noqa: F401  (re-exported)

__all__ = ["IsotonicCalibration", "InterpolatedMap"]


class IsotonicCalibration(ScoreCalibrator):
    """Isotonic regression: the non-decreasing map of the score with least squared error.

    Fitted by pool-adjacent-violators on the distinct scores; predictions interpolate
    linearly between the fitted points and are constant beyond the smallest and largest
    calibration scores (scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``
    gives the same map). Multiclass scores are calibrated one column at a time and
    renormalised.

    Parameters
    ----------
    prior : float, default=0.0
        Pseudo-count added to each outcome of every step of the fit: a step of ``n``
        events of which ``s`` are positive forecasts ``(s + prior) / (n + 2 prior)``, the
        posterior mean of its frequency under a Beta(prior, prior) prior (steps that
        would then break monotonicity are pooled again). 0 gives plain isotonic
        regression, whose lowest and highest steps are often exactly 0 and 1; 0.5
        (Jeffreys' prior) keeps every forecast within ``[0.5/(n+1), 1 - 0.5/(n+1)]`` of
        its step's ``n``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of score columns seen in ``fit``.
    maps_ : tuple of InterpolatedMap
        One fitted map per calibrated column.

    References
    ----------
    M. Ayer, H. D. Brunk, G. M. Ewing, W. T. Reid, E. Silverman, *An empirical
    distribution function for sampling with incomplete information*, Annals of
    Mathematical Statistics 26(4), 1955.
    B. Zadrozny, C. Elkan, *Transforming classifier scores into accurate multiclass
    probability estimates*, KDD 2002.

    Examples
    --------
    >>> from structcal.calibrators import IsotonicCalibration
    >>> cal = IsotonicCalibration().fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    >>> cal.predict_proba([0.1, 0.25, 0.4])[:, 1]
    array([0. , 0.5, 1. ])
    """

    def __init__(self, prior=0.0):
        self.prior = prior

    def _validate_hyperparameters(self):
        p = self.prior
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.number)) or not (
            np.isfinite(p) and p >= 0
        ):
            from ..exceptions import ParameterError

            raise ParameterError(f"`prior` must be a finite number >= 0; got {p!r}")

    def _fit_column(self, s, outcome, w, column):
        x, y = isotonic_fit(s, outcome, w, float(self.prior))
        return InterpolatedMap(x, y)
