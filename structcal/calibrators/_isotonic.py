"""Isotonic maps without scikit-learn: the fitted map as arrays, and the fit itself.

:class:`IsotonicMap` is what :class:`~structcal.StructuredRecalibrator` keeps for a kind
recalibrated by isotonic regression of the outcome on the model's raw probability: loading
a saved recalibrator and predicting with it imports neither scikit-learn nor SciPy's
statistics (:class:`~structcal.calibrators.IsotonicCalibration`, the scikit-learn
estimator, shares the same fit and map).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._estimator import ParamsMixin

__all__ = ["InterpolatedMap", "IsotonicMap", "isotonic_fit"]


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


#: A pool-adjacent-violators pass in Python costs about 1 microsecond per point; up to
#: ``SMALL_WORK / PAV_STEP_COST`` points it runs without the kernel (and its compilation)
PAV_STEP_COST = 200


def pav(y, w):
    """Weighted isotonic fit by pool-adjacent-violators: the kernel
    (:func:`structcal.calibrators._kernels.pav`), or for a small fit the same steps in
    Python (the same arithmetic in the same order: the same values, bit for bit)."""
    from .._tier import numpy_tier

    if not numpy_tier(y.shape[0] * PAV_STEP_COST, kernel="calibrators/_kernels.pav"):
        from ._kernels import pav as kernel  # Numba: imported by large fits only

        return kernel(y, w)
    value, weight, size = [], [], []
    for yi, wi in zip(y.tolist(), w.tolist()):
        value.append(yi)
        weight.append(wi)
        size.append(1)
        while len(value) > 1 and value[-2] >= value[-1]:
            tw = weight[-2] + weight[-1]
            value[-2] = (weight[-2] * value[-2] + weight[-1] * value[-1]) / tw
            weight[-2] = tw
            size[-2] += size[-1]
            del value[-1], weight[-1], size[-1]
    return np.repeat(np.asarray(value, dtype=np.float64), np.asarray(size, dtype=np.int64))


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


class IsotonicMap(ParamsMixin):
    """Isotonic regression of a binary outcome on one score, evaluated without scikit-learn.

    Parameters
    ----------
    prior : float, default=0.0
        Pseudo-count per outcome of every step (see
        :class:`~structcal.calibrators.IsotonicCalibration`).

    Attributes
    ----------
    map_ : InterpolatedMap
        The fitted map of the score to the probability of the positive outcome.
    classes_ : ndarray of shape (2,)
        ``[False, True]``.
    n_features_in_ : int
        1.
    """

    def __init__(self, prior=0.0):
        self.prior = prior

    def fit(self, scores, outcomes, sample_weight=None):
        """Fit the map on scores and 0/1 outcomes (optionally weighted)."""
        from .._validation import as_float_array, check_float
        from ..exceptions import ParameterError

        prior = check_float(self.prior, "prior", low=0.0)
        s = as_float_array(scores, "scores", ndim=1)
        y = np.asarray(outcomes)
        if y.shape != s.shape or not np.isin(y, (0, 1)).all():
            raise ParameterError(f"`outcomes` must hold one 0/1 per score of `scores` "
                                 f"({s.shape[0]})")
        w = np.ones(s.shape[0]) if sample_weight is None else as_float_array(
            sample_weight, "sample_weight", ndim=1, shape=s.shape)
        if (w < 0).any() or not (w > 0).any():
            raise ParameterError("`sample_weight` must be >= 0 with a positive sum")
        x, fitted = isotonic_fit(s, y.astype(np.float64), w, prior)
        self.map_ = InterpolatedMap(x, fitted)
        self.classes_ = np.array([False, True])
        self.n_features_in_ = 1
        return self

    def predict_proba(self, scores) -> np.ndarray:
        """``[P(outcome 0), P(outcome 1)]`` of each score, shape (n, 2)."""
        s = np.asarray(scores, dtype=np.float64).reshape(-1)
        p = np.clip(self.map_(s), 0.0, 1.0)
        return np.column_stack([1.0 - p, p])

    def _check_loaded(self):
        if not isinstance(getattr(self, "map_", None), InterpolatedMap):
            raise ValueError("map_ must be an InterpolatedMap")
        self.map_._check_loaded()
