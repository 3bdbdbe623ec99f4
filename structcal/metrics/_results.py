"""Result objects shared by the calibration metrics, and the bootstrap machinery."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_float, check_int, check_option, check_random_state
from ..exceptions import ParameterError
from . import _binning

__all__ = [
    "ReliabilityTable",
    "ConfidenceInterval",
    "bootstrap_seeds",
    "bootstrap_interval",
    "percentile_interval",
]


@dataclass(frozen=True)
class ReliabilityTable:
    """Per-bin summary of binned forecasts (the numbers behind a reliability diagram).

    Attributes
    ----------
    bin_edges : ndarray of shape (n_bins + 1,)
        Bin boundaries, from 0 to 1 (uniform bins: ``b / n_bins``, so that 0.3 is exactly
        the float ``0.3``). Bin ``b`` holds forecasts ``edges[b] <= p < edges[b+1]`` (the
        last bin also holds ``p = 1``): a forecast on an edge counts in the bin above it.
    counts : ndarray of shape (n_bins,)
        Total weight of each bin: the number of forecasts when unweighted (float64;
        fractional under the convex mapping, which splits a forecast between two bins).
    mean_forecast : ndarray of shape (n_bins,)
        Weighted mean forecast ``f_B`` of each bin; NaN for an empty bin.
    mean_outcome : ndarray of shape (n_bins,)
        Weighted event frequency ``t_B`` of each bin; NaN for an empty bin.
    """

    bin_edges: np.ndarray
    counts: np.ndarray
    mean_forecast: np.ndarray
    mean_outcome: np.ndarray

    @property
    def n_bins(self) -> int:
        """Number of bins."""
        return int(self.counts.shape[0])

    @property
    def gap(self) -> np.ndarray:
        """``mean_outcome - mean_forecast`` per bin (NaN for empty bins)."""
        return self.mean_outcome - self.mean_forecast

    def __repr__(self) -> str:
        return f"ReliabilityTable(n_bins={self.n_bins}, n={float(self.counts.sum()):g})"

    def _repr_html_(self, caption="Reliability table") -> str:
        from .._html import html_table

        rows = []
        for b in range(self.n_bins):
            lo, hi = self.bin_edges[b], self.bin_edges[b + 1]
            empty = not self.counts[b] > 0
            rows.append([
                f"[{lo:.3g}, {hi:.3g}{']' if b == self.n_bins - 1 else ')'}",
                f"{self.counts[b]:g}",
                "" if empty else f"{self.mean_forecast[b]:.4f}",
                "" if empty else f"{self.mean_outcome[b]:.4f}",
                "" if empty else f"{self.gap[b]:+.4f}",
            ])
        return html_table(["bin", "count", "mean forecast", "mean outcome", "gap"], rows,
                          caption=caption)

    @classmethod
    def _from_stats(cls, edges: np.ndarray, stats: np.ndarray) -> ReliabilityTable:
        counts = stats[_binning.STAT_W].copy()
        with np.errstate(invalid="ignore", divide="ignore"):
            nonempty = counts > 0
            mf = np.where(nonempty, stats[_binning.STAT_S] / np.where(nonempty, counts, 1), np.nan)
            mo = np.where(nonempty, stats[_binning.STAT_Y] / np.where(nonempty, counts, 1), np.nan)
        return cls(np.asarray(edges, dtype=np.float64).copy(), counts, mf, mo)


@dataclass(frozen=True)
class ConfidenceInterval:
    """A bootstrap interval.

    Attributes
    ----------
    low, high : float
        The interval's ends. ``method="percentile"``: the ``(1 - level) / 2`` and
        ``(1 + level) / 2`` percentiles of the bootstrap distribution;
        ``method="recentred"``: those percentiles after the distribution is shifted so
        that its median is the estimate (see :func:`bootstrap_interval`).
    level : float
        Confidence level.
    estimate : float
        The estimate on the original sample.
    bootstrap_mean : float
        Mean of the bootstrap distribution.
    standard_error : float
        Standard deviation of the bootstrap distribution.
    n_resamples : int
        Number of bootstrap resamples.
    distribution : ndarray of shape (n_resamples,)
        The bootstrap values (NaN-free resamples only), as computed (not shifted).
    method : {"percentile", "recentred"}
        How ``low`` and ``high`` were read from the distribution.
    """

    low: float
    high: float
    level: float
    estimate: float
    bootstrap_mean: float
    standard_error: float
    n_resamples: int
    distribution: np.ndarray = field(repr=False)
    method: str = "percentile"

    @property
    def bias(self) -> float:
        """Bootstrap estimate of the bias: ``bootstrap_mean - estimate``.

        Plug-in calibration errors are biased upwards; this shows by how much, roughly.
        """
        return self.bootstrap_mean - self.estimate


def check_bootstrap_args(level, n_resamples, random_state):
    """Validate the common bootstrap arguments; return (level, n_resamples, Generator)."""
    level = check_float(level, "level", low=0.0, high=1.0, low_inclusive=False,
                        high_inclusive=False)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    return level, n_resamples, check_random_state(random_state)


def bootstrap_seeds(rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """One 32-bit seed per resample (the kernels seed Numba's generator with it)."""
    return rng.integers(0, 2**32, size=n_resamples, dtype=np.uint32)


def percentile_interval(values, estimate, level, n_resamples) -> ConfidenceInterval:
    """Percentile interval of bootstrap ``values`` (NaNs dropped)."""
    return bootstrap_interval(values, estimate, level, n_resamples, "percentile")


def bootstrap_interval(values, estimate, level, n_resamples, method, *, floor=None):
    """Interval of bootstrap ``values`` (NaNs dropped) around ``estimate``.

    ``"percentile"``: the ``(1 -+ level) / 2`` quantiles ``q_lo, q_hi`` of the values.
    ``"recentred"``: the same quantiles after shifting the values by ``estimate - m``
    (``m`` their median), i.e. ``[estimate - (m - q_lo), estimate + (q_hi - m)]``, then
    raised to ``floor`` when given (a statistic that cannot be below it). Since
    ``q_lo <= m <= q_hi``, the recentred interval always contains the estimate.
    """
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ParameterError("every bootstrap resample gave an undefined (NaN) statistic")
    alpha = (1.0 - level) / 2.0
    low, mid, high = np.quantile(values, [alpha, 0.5, 1.0 - alpha])
    if method == "recentred":
        low, high = estimate - (mid - low), estimate + (high - mid)
        if floor is not None:
            low = max(low, floor)
    return ConfidenceInterval(
        low=float(low),
        high=float(high),
        level=float(level),
        estimate=float(estimate),
        bootstrap_mean=float(values.mean()),
        standard_error=float(values.std(ddof=1)) if values.size > 1 else 0.0,
        n_resamples=int(n_resamples),
        distribution=values,
        method=method,
    )


def check_statistic(statistic) -> str:
    """``statistic`` of ``confidence_interval``: the estimate or the maximum error."""
    return check_option(statistic, "statistic", ("estimate", "max_error"))
