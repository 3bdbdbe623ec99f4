"""Histogram binning calibration with uniform or quantile bins."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._tier import LazyModule
from .._validation import check_int, check_option
from ..metrics import _binning
from ._base import ScoreCalibrator

_metric_kernels = LazyModule("structcal.metrics._kernels")  # Numba: imported on first use

__all__ = ["HistogramBinning", "BinnedMap"]

_NO_WEIGHTS = np.zeros(1)


@dataclass(frozen=True)
class BinnedMap:
    """A piecewise-constant calibration map: the event frequency of each score bin.

    Attributes
    ----------
    bin_edges : ndarray of shape (n_bins + 1,)
        Bin boundaries from 0 to 1 (bin ``b`` holds ``edges[b] <= s < edges[b+1]``, the
        last bin also ``s = 1``).
    values : ndarray of shape (n_bins,)
        Calibrated probability of each bin.
    uniform : bool
        Whether the edges are ``b / n_bins`` (then bins are found in O(1), with the same
        rule ``edges[b] <= s < edges[b+1]`` as the binned calibration metrics).
    """

    bin_edges: np.ndarray
    values: np.ndarray
    uniform: bool

    def _check_loaded(self):
        from .._loadcheck import array

        edges = array(self, "bin_edges", ndim=1)
        if edges.shape[0] < 2 or (np.diff(edges) <= 0).any():
            raise ValueError("bin_edges must be an increasing sequence of at least 2 edges")
        array(self, "values", ndim=1, shape=(edges.shape[0] - 1,), low=0.0, high=1.0)
        if not isinstance(self.uniform, (bool, np.bool_)):
            raise ValueError("uniform must be a bool")
        if self.uniform and not np.allclose(edges, np.linspace(0, 1, edges.shape[0]), atol=0):
            raise ValueError("uniform bins must have edges b / n_bins")

    def bins(self, s) -> np.ndarray:
        """Bin index of each score."""
        s = np.ascontiguousarray(s, dtype=np.float64)
        return _binning.bin_index(s, self.bin_edges, self.uniform)

    def __call__(self, s):
        """Calibrated probabilities of scores ``s``."""
        return self.values[self.bins(s)]


class HistogramBinning(ScoreCalibrator):
    """Histogram binning: replace a score by the event frequency of its bin.

    Parameters
    ----------
    n_bins : int, default=10
        Number of bins on [0, 1].
    strategy : {"uniform", "quantile"}, default="uniform"
        Bins of equal width, or of equal mass on the calibration scores (edges as in
        :func:`structcal.metrics.binned_calibration_error`; tied scores share a bin).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of score columns seen in ``fit``.
    maps_ : tuple of BinnedMap
        One fitted map per calibrated column.

    Notes
    -----
    Scores must be probabilities in [0, 1]. A bin without calibration data maps to its
    midpoint (the score is left roughly as it is). Multiclass scores are calibrated one
    column at a time and renormalised.

    References
    ----------
    B. Zadrozny, C. Elkan, *Obtaining calibrated probability estimates from decision
    trees and naive Bayesian classifiers*, ICML 2001.

    Examples
    --------
    >>> from structcal.calibrators import HistogramBinning
    >>> cal = HistogramBinning(n_bins=2).fit([0.1, 0.2, 0.3, 0.6, 0.7, 0.9], [0, 0, 1, 1, 1, 0])
    >>> cal.predict_proba([0.25, 0.8])[:, 1].round(4).tolist()
    [0.3333, 0.6667]
    """

    _probabilities = True

    def __init__(self, *, n_bins=10, strategy="uniform"):
        self.n_bins = n_bins
        self.strategy = strategy

    def _validate_hyperparameters(self):
        check_int(self.n_bins, "n_bins", low=1)
        check_option(self.strategy, "strategy", ("uniform", "quantile"))

    def _fit_column(self, s, outcome, w, column):
        uniform = self.strategy == "uniform"
        if uniform:
            edges = _binning.uniform_edges(self.n_bins)
        else:
            order = np.argsort(s, kind="stable")
            edges = _metric_kernels.sorted_quantile_edges(s[order], w[order], True, self.n_bins)
        stats = _binning.bin_stats(s, outcome, w, True, edges, uniform, False)
        counts = stats[_binning.STAT_W]
        mid = 0.5 * (edges[:-1] + edges[1:])
        with np.errstate(invalid="ignore", divide="ignore"):
            values = np.where(counts > 0, stats[_binning.STAT_Y] / counts, mid)
        return BinnedMap(edges, values, uniform)
