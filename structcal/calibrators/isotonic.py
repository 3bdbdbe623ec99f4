"""Isotonic regression calibration (pool-adjacent-violators)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._base import ScoreCalibrator
from ._kernels import pav

__all__ = ["IsotonicCalibration", "InterpolatedMap"]


@dataclass(frozen=True)
class InterpolatedMap:
    """A piecewise-linear calibration map through ``(x, y)``, constant beyond its ends.

    Attributes
    ----------
    x : ndarray of shape (n_points,)
        Increasing scores.
    y : ndarray of shape (n_points,)
        Calibrated probabilities at ``x`` (non-decreasing for isotonic fits).
    """

    x: np.ndarray
    y: np.ndarray

    def _check_loaded(self):
        from .._loadcheck import array

        x = array(self, "x", ndim=1)
        array(self, "y", ndim=1, shape=x.shape, low=0.0, high=1.0)
        if x.shape[0] < 1 or (np.diff(x) < 0).any():
            raise ValueError("x must be a non-empty increasing sequence")

    def __call__(self, s):
        """Calibrated probabilities of scores ``s`` (linear interpolation, clipped)."""
        return np.interp(np.asarray(s, dtype=np.float64), self.x, self.y)


def isotonic_fit(s, outcome, w, prior=0.0):
    """Weighted isotonic regression of ``outcome`` on ``s``: (unique x, fitted y), thinned.

    Tied scores are merged first (weighted mean outcome, summed weight); points inside
    a constant run are dropped except its ends, which leaves the interpolant unchanged.
    With ``prior > 0`` each step (block of the fit) of weight ``n`` and mean ``f`` is
    shrunk to ``(n f + prior) / (n + 2 prior)``, the posterior mean of its frequency under
    a Beta(prior, prior) prior, and the shrunk steps are made monotone again by a second
    pool-adjacent-violators pass (weights ``n + 2 prior``).
    """
    keep = w > 0
    s, outcome, w = s[keep], outcome[keep], w[keep]
    x, inverse = np.unique(s, return_inverse=True)
    wx = np.bincount(inverse, weights=w, minlength=x.shape[0])
    yx = np.bincount(inverse, weights=w * outcome, minlength=x.shape[0]) / wx
    fitted = pav(yx, wx)
    if prior > 0 and fitted.shape[0]:
        starts = np.flatnonzero(np.concatenate([[True], fitted[1:] != fitted[:-1]]))
        bw = np.add.reduceat(wx, starts)
        shrunk = (bw * fitted[starts] + prior) / (bw + 2.0 * prior)
        refit = pav(shrunk, bw + 2.0 * prior)
        fitted = np.repeat(refit, np.diff(np.concatenate([starts, [fitted.shape[0]]])))
    if fitted.shape[0] > 2:
        inner = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
        mask = np.concatenate([[True], inner, [True]])
        x, fitted = x[mask], fitted[mask]
    return x, fitted


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
