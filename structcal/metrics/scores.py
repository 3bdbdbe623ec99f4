"""Proper scores of binary forecasts and their binned decompositions.

Murphy's decomposition splits the Brier score of forecasts grouped into bins ``B`` into

* **reliability** ``sum_B (N_B / N) (f_B - t_B)**2`` — how far each bin's mean forecast
  ``f_B`` is from its event frequency ``t_B`` (Kuleshov & Liang's *calibration error*),
* **resolution** ``sum_B (N_B / N) (t_B - ybar)**2`` — how much the bins' frequencies vary
  around the base rate ``ybar`` (their *sharpness*),
* **uncertainty** ``ybar (1 - ybar)`` — the Brier score of always forecasting the base rate,

with ``brier = reliability - resolution + uncertainty`` exactly when the forecasts are
constant within each bin. For forecasts that vary within bins two more terms make the
identity exact (Stephenson, Coelho & Jolliffe, 2008)::

    brier = reliability - resolution + uncertainty
            + within_bin_variance - 2 * within_bin_covariance

where ``within_bin_variance = sum_B (N_B / N) Var_B(p)`` and ``within_bin_covariance =
sum_B (N_B / N) Cov_B(p, y)`` are weighted within-bin (population) moments. The log
score decomposes the same way with Kullback-Leibler divergences in place of squared
differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._tier import LazyModule
from .._validation import check_option
from ..exceptions import ParameterError
from . import _binning
from ._inputs import (
    check_binary_outcomes,
    check_n_bins,
    check_probabilities,
    check_sample_weight,
    warn_sparse_bins,
)
from ._results import ReliabilityTable

_kernels = LazyModule("structcal.metrics._kernels")  # Numba kernels: imported on first use

__all__ = [
    "BrierDecomposition",
    "LogLossDecomposition",
    "brier_decomposition",
    "log_loss_decomposition",
]

_EMPTY = np.zeros(1)


@dataclass(frozen=True)
class BrierDecomposition:
    """Murphy's decomposition of the Brier score (l2 loss) of binary forecasts.

    Attributes
    ----------
    brier : float
        Mean squared error ``(1/N) sum_i w_i (p_i - y_i)**2`` (weighted mean).
    reliability : float
        ``sum_B (N_B / N) (f_B - t_B)**2`` (lower is better).
    resolution : float
        ``sum_B (N_B / N) (t_B - ybar)**2`` (higher is better).
    uncertainty : float
        ``ybar (1 - ybar)``.
    within_bin_variance : float
        ``sum_B (N_B / N) Var_B(p)``: zero when forecasts are constant within bins.
    within_bin_covariance : float
        ``sum_B (N_B / N) Cov_B(p, y)``: zero when forecasts are constant within bins.
    table : ReliabilityTable
        The bins (edges, counts, mean forecast, mean outcome; NaN means for empty bins).
    n_samples : int
        Number of forecasts.

    Notes
    -----
    ``brier == reliability - resolution + uncertainty + within_bin_variance -
    2 * within_bin_covariance`` up to rounding, for any forecasts.
    """

    brier: float
    reliability: float
    resolution: float
    uncertainty: float
    within_bin_variance: float
    within_bin_covariance: float
    table: ReliabilityTable
    n_samples: int

    @property
    def calibration_error(self) -> float:
        """Kuleshov & Liang's name for ``reliability``."""
        return self.reliability

    @property
    def sharpness(self) -> float:
        """Kuleshov & Liang's name for ``resolution``."""
        return self.resolution

    @property
    def refinement(self) -> float:
        """``uncertainty - resolution`` (Dietterich's refinement score, constant forecasts)."""
        return self.uncertainty - self.resolution


@dataclass(frozen=True)
class LogLossDecomposition:
    """Binned decomposition of the log loss of binary forecasts.

    Attributes
    ----------
    log_loss : float
        Mean negative log-likelihood ``-(1/N) sum_i w_i [y_i log p_i + (1 - y_i)
        log(1 - p_i)]`` (natural log; ``inf`` if a sure forecast is wrong).
    reliability : float
        ``sum_B (N_B / N) KL(t_B || f_B)``.
    resolution : float
        ``sum_B (N_B / N) KL(t_B || ybar)``.
    uncertainty : float
        Entropy ``H(ybar)`` of the base rate.
    within_bin : float
        ``log_loss - (reliability - resolution + uncertainty)``: zero when forecasts are
        constant within bins.
    table : ReliabilityTable
        The bins.
    n_samples : int
        Number of forecasts.
    """

    log_loss: float
    reliability: float
    resolution: float
    uncertainty: float
    within_bin: float
    table: ReliabilityTable
    n_samples: int


def _binned_input(y_true, y_prob, n_bins, strategy, sample_weight):
    p = check_probabilities(y_prob)
    if p.ndim != 1:
        raise ParameterError(
            f"`y_prob` must be 1-d forecasts of the event; got shape {p.shape}"
        )
    y = check_binary_outcomes(y_true, n=p.shape[0])
    w = check_sample_weight(sample_weight, p.shape[0])
    nb = check_n_bins(n_bins, p.shape[0])
    strategy = check_option(strategy, "strategy", ("uniform", "quantile"))
    if strategy == "quantile":  # a fixed partition may have empty buckets; this one may not
        warn_sparse_bins(p.shape[0], nb, stacklevel=4)
    use_w = w is not None
    wk = w if use_w else _EMPTY
    if strategy == "uniform":
        edges = _binning.uniform_edges(nb)
    else:
        order = np.argsort(p, kind="stable")
        edges = _kernels.sorted_quantile_edges(
            p[order], wk[order] if use_w else wk, use_w, nb
        )
    stats = _binning.bin_stats(p, y, wk, use_w, edges,
                               strategy == "uniform", False)
    total = stats[_binning.STAT_W].sum()
    return p, y, w, edges, stats, total


def brier_decomposition(
    y_true, y_prob, *, n_bins=10, strategy="uniform", sample_weight=None
) -> BrierDecomposition:
    """Brier score of binary forecasts and its decomposition on a bucket partition.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Outcomes: bool, or numbers equal to 0 or 1.
    y_prob : array-like of shape (n_samples,)
        Forecast probabilities in [0, 1].
    n_bins : int or "sqrt", default=10
        Number of buckets (Kuleshov & Liang use 10 buckets of width 0.1).
    strategy : {"uniform", "quantile"}, default="uniform"
        Buckets of equal width or of equal mass.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative sample weights.

    Returns
    -------
    BrierDecomposition

    Warns
    -----
    SparseBinsWarning
        With ``strategy="quantile"`` and fewer samples than bins. (Empty uniform buckets
        are part of a fixed partition and are skipped silently; their table rows are
        NaN.)

    Notes
    -----
    ``reliability`` is a plug-in estimate: even perfectly calibrated forecasts get about
    ``sum_B t_B (1 - t_B) / N`` from sampling noise. See the module docstring for the
    within-bin terms that make the decomposition exact.

    References
    ----------
    A. H. Murphy, *A new vector partition of the probability score*, J. Applied
    Meteorology 12(4), 1973.
    D. B. Stephenson, C. A. S. Coelho, I. T. Jolliffe, *Two extra components in the Brier
    score decomposition*, Weather and Forecasting 23(4), 2008.
    V. Kuleshov, P. Liang, *Calibrated structured prediction*, NIPS 2015, eq. (2)-(3).

    Examples
    --------
    >>> from structcal.metrics import brier_decomposition
    >>> r = brier_decomposition([0, 0, 1, 1], [0.1, 0.1, 0.8, 0.8], n_bins=10)
    >>> round(r.brier, 4), round(r.reliability, 4), round(r.resolution, 4), r.uncertainty
    (0.025, 0.025, 0.25, 0.25)
    """
    p, y, w, edges, stats, total = _binned_input(y_true, y_prob, n_bins, strategy,
                                                 sample_weight)
    table = ReliabilityTable._from_stats(edges, stats)
    nonempty = table.counts > 0
    nb = table.counts[nonempty]
    f = table.mean_forecast[nonempty]
    t = table.mean_outcome[nonempty]
    frac = nb / total
    ybar = stats[_binning.STAT_Y].sum() / total
    var_p = stats[_binning.STAT_SS][nonempty] / nb - f * f
    cov_py = stats[_binning.STAT_SY][nonempty] / nb - f * t
    # mean of (p - y)^2 = mean(p^2) - 2 mean(p y) + mean(y) for 0/1 outcomes
    brier = (stats[_binning.STAT_SS].sum() - 2.0 * stats[_binning.STAT_SY].sum()
             + stats[_binning.STAT_Y].sum()) / total
    return BrierDecomposition(
        brier=float(max(brier, 0.0)),
        reliability=float(np.sum(frac * (f - t) ** 2)),
        resolution=float(np.sum(frac * (t - ybar) ** 2)),
        uncertainty=float(ybar * (1.0 - ybar)),
        within_bin_variance=float(np.sum(frac * var_p)),
        within_bin_covariance=float(np.sum(frac * cov_py)),
        table=table,
        n_samples=int(p.shape[0]),
    )


def _xlogy_ratio(a, b):
    """``a log(a / b)`` with ``0 log 0 = 0`` (and ``inf`` where ``a > 0 = b``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a > 0, a * (np.log(a) - np.log(b)), 0.0)
    return out


def _kl_bernoulli(t, f):
    return _xlogy_ratio(t, f) + _xlogy_ratio(1.0 - t, 1.0 - f)


def _entropy(t):
    return -(_xlogy_ratio(t, 1.0) + _xlogy_ratio(1.0 - t, 1.0))


def _log_loss_within_bins(p, y, w, losses, edges, strategy, nonempty, frac, t, kl):
    bins = _binning.bin_index(p, edges, strategy == "uniform")
    n_bins = edges.shape[0] - 1
    ww = np.ones_like(p) if w is None else w
    loss_sum = np.bincount(bins, weights=ww * losses, minlength=n_bins)[nonempty]
    weight_sum = np.bincount(bins, weights=ww, minlength=n_bins)[nonempty]
    cross_entropy = _entropy(t) + kl
    finite = np.isfinite(cross_entropy)
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = frac * (loss_sum / weight_sum - cross_entropy)
    return float(np.sum(terms[finite]))


def log_loss_decomposition(
    y_true, y_prob, *, n_bins=10, strategy="uniform", sample_weight=None
) -> LogLossDecomposition:
    """Log loss of binary forecasts and its decomposition on a bucket partition.

    For forecasts constant within bins, ``log_loss = reliability - resolution +
    uncertainty`` with ``reliability = sum_B (N_B / N) KL(t_B || f_B)``, ``resolution =
    sum_B (N_B / N) KL(t_B || ybar)`` and ``uncertainty = H(ybar)`` (natural logarithms);
    ``within_bin`` holds the remainder otherwise.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Outcomes: bool, or numbers equal to 0 or 1.
    y_prob : array-like of shape (n_samples,)
        Forecast probabilities in [0, 1]. A forecast of 0 or 1 that turns out wrong gives
        an infinite loss (no clipping).
    n_bins : int or "sqrt", default=10
        Number of buckets.
    strategy : {"uniform", "quantile"}, default="uniform"
        Buckets of equal width or of equal mass.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative sample weights.

    Returns
    -------
    LogLossDecomposition

    Warns
    -----
    SparseBinsWarning
        With ``strategy="quantile"`` and fewer samples than bins.

    References
    ----------
    J. Bröcker, *Reliability, sufficiency, and the decomposition of proper scores*,
    Quarterly J. Royal Meteorological Society 135, 2009.
    """
    p, y, w, edges, stats, total = _binned_input(y_true, y_prob, n_bins, strategy,
                                                 sample_weight)
    table = ReliabilityTable._from_stats(edges, stats)
    nonempty = table.counts > 0
    frac = table.counts[nonempty] / total
    f = table.mean_forecast[nonempty]
    t = table.mean_outcome[nonempty]
    ybar = stats[_binning.STAT_Y].sum() / total
    with np.errstate(divide="ignore"):
        losses = np.where(y == 1.0, -np.log(p), -np.log1p(-p))
    if w is not None:  # a weight of 0 removes a forecast, infinite loss included
        losses = np.where(w > 0, losses, 0.0)
    ll = float(np.average(losses, weights=w)) if w is not None else float(losses.mean())
    kl = _kl_bernoulli(t, f)
    rel = float(np.sum(frac * kl))
    res = float(np.sum(frac * _kl_bernoulli(t, np.full_like(t, ybar))))
    unc = float(_entropy(np.array([ybar]))[0])
    with np.errstate(invalid="ignore"):
        within = ll - (rel - res + unc)
    if np.isnan(within):
        # Both losses infinite: a bucket whose mean forecast is 0 or 1 and whose outcomes
        # disagree. Its forecasts are all equal to that mean, so its share of the
        # remainder is 0; the remainder is summed over the other buckets.
        within = _log_loss_within_bins(p, y, w, losses, edges, strategy, nonempty, frac,
                                       t, kl)
    return LogLossDecomposition(
        log_loss=ll,
        reliability=rel,
        resolution=res,
        uncertainty=unc,
        within_bin=float(within),
        table=table,
        n_samples=int(p.shape[0]),
    )
