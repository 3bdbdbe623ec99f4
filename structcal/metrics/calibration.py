"""Estimators of the expected (and maximum) calibration error, with bootstrap intervals.

A forecaster is calibrated when ``P(y = 1 | p) = p``. Its expected calibration error is
``ECE = E |P(y = 1 | p) - p|`` and its maximum calibration error ``MCE = max_p |P(y = 1 |
p) - p|``. Neither can be computed from a finite sample; this module offers the
estimators compared by Posocco & Bonnefoy (2021):

* **binned** (:func:`binned_calibration_error`): split [0, 1] into bins, compare the mean
  forecast and the event frequency in each. Uniform or equal-mass (``"quantile"``) bins;
  hard or *convex* mapping (a forecast is shared by the two nearest bin centres, "linear
  binning"); a fixed number of bins or ``"sqrt"`` (``round(sqrt(n))``). The legacy
  estimator is 15 uniform bins with hard mapping.
* **kernel** (:func:`kde_calibration_error`): the local calibration error
  ``LCE(s) = P(y = 1 | s) - s`` estimated by Gaussian kernel smoothing (Silverman's
  bandwidth, data reflected at 0 and 1, evaluated on a fine grid by FFT), and
  ``ECE = integral |LCE(s)| f(s) ds``.
* **debiased L2** (:func:`debiased_calibration_error`): Kumar et al.'s estimator of
  ``sqrt(E (P(y = 1 | p) - p)**2)``, which subtracts the sampling noise of each bin.

Plug-in estimates are biased upwards: on perfectly calibrated data the 15-bin ECE of
10 000 forecasts reads about 0.011. Every result therefore offers
``confidence_interval()`` (percentile bootstrap over samples) whose ``bias`` field shows
the size of the effect.

Multiclass forecasts are assessed in one of the settings of :func:`binary_columns`
(class-specific, class-wise, confidence). Class-wise estimates are the mean over classes
of the class-specific ones (for L2 norms: the root of the mean squared error).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._tier import LazyModule
from .._validation import as_float_array, check_float, check_int, check_option
from ..exceptions import ParameterError
from . import _binning
from ._inputs import Columns, binary_columns, check_n_bins, warn_sparse_bins
from ._results import (
    ConfidenceInterval,
    ReliabilityTable,
    bootstrap_interval,
    bootstrap_seeds,
    check_bootstrap_args,
    check_statistic,
)

_kernels = LazyModule("structcal.metrics._kernels")  # Numba kernels: imported on first use

__all__ = [
    "CalibrationErrorResult",
    "LocalCalibration",
    "ReliabilityCurve",
    "binned_calibration_error",
    "debiased_calibration_error",
    "kde_calibration_error",
    "calibration_error",
    "local_calibration_error",
    "reliability_curve",
    "silverman_bandwidth",
]

_EMPTY = np.zeros(1)


def _n_chunks(n_resamples: int) -> int:
    """Parallel chunks for the bootstrap drivers (each holds one weight buffer)."""
    import numba  # (the bootstrap runs the kernels: Numba is imported by then)

    return int(max(1, min(n_resamples, numba.get_num_threads())))


def _weights(columns: Columns):
    if columns.weights is None:
        return _EMPTY, False
    return columns.weights, True


# ---------------------------------------------------------------------------------------
# result objects


@dataclass(frozen=True)
class LocalCalibration:
    """Local calibration error ``LCE(s) = P(y = 1 | s) - s`` on a grid of scores.

    Attributes
    ----------
    grid : ndarray of shape (grid_size,)
        Increasing scores: evenly spaced from 0 to 1 (``scale="probability"``), or
        evenly spaced in logit between the smallest and the largest forecast
        (``scale="logit"``).
    lce : ndarray of shape (grid_size,)
        Estimated local calibration error; NaN where fewer than one sample lies within
        about one bandwidth (``support < 1``).
    density : ndarray of shape (grid_size,)
        Kernel density estimate of the scores, per unit of score (integrates to about 1
        over the grid).
    support : ndarray of shape (grid_size,)
        Effective number of samples near each grid point: ``sum_i w_i exp(-(s -
        s_i)**2 / (2 h**2))``, weights rescaled to sum to the number of samples.
    bandwidth : float
        The kernel bandwidth ``h``, in units of the scale (probability or logit).
    """

    grid: np.ndarray
    lce: np.ndarray
    density: np.ndarray
    support: np.ndarray
    bandwidth: float

    @property
    def curve(self) -> np.ndarray:
        """The reliability curve ``s + LCE(s)`` (estimated ``P(y = 1 | s)``)."""
        return self.grid + self.lce

    def at(self, scores) -> np.ndarray:
        """Interpolate the local calibration error at ``scores`` (NaN where undefined,
        including outside the grid, which on the logit scale spans the forecasts)."""
        s = as_float_array(scores, "scores")
        if s.size and ((s < 0).any() or (s > 1).any()):
            raise ParameterError("`scores` must lie in [0, 1]")
        return np.interp(s, self.grid, self.lce, left=np.nan, right=np.nan)


@dataclass(frozen=True)
class CalibrationErrorResult:
    """An estimate of the calibration error of a set of forecasts.

    Attributes
    ----------
    estimate : float
        The estimate: the expected calibration error (``norm="l1"``) or the root mean
        squared calibration error (``norm="l2"``). For the class-wise setting, the mean
        over classes (L2: root of the mean of squares).
    max_error : float
        The maximum calibration error (MCE): the largest bin gap (binned estimators) or
        the largest ``|LCE|`` at grid points next to data (kernel estimator); class-wise,
        the mean over classes.
    norm : {"l1", "l2"}
        Which error ``estimate`` measures.
    method : str
        Description of the estimator, e.g. ``"binned(n_bins=15, strategy='uniform',
        mapping='hard')"``.
    setting : str
        ``"binary"``, ``"class-specific"``, ``"class-wise"`` or ``"confidence"``.
    n_samples : int
        Number of forecasts.
    per_column : ndarray of shape (n_columns,)
        The estimate for each binary problem (each class in the class-wise setting; one
        entry otherwise). L2 norms report squared errors here (the debiased ones may be
        negative).
    labels : tuple of int
        The class of each column (``-1`` for "the predicted class is right").
    tables : tuple of ReliabilityTable
        Per-column bin tables (binned estimators; empty otherwise).
    curves : tuple of LocalCalibration
        Per-column local calibration errors (kernel estimator; empty otherwise).
    """

    estimate: float
    max_error: float
    norm: str
    method: str
    setting: str
    n_samples: int
    per_column: np.ndarray
    labels: tuple
    tables: tuple = ()
    curves: tuple = ()
    _spec: object = field(default=None, repr=False, compare=False)

    @property
    def ece(self) -> float:
        """Alias of ``estimate``."""
        return self.estimate

    @property
    def mce(self) -> float:
        """Alias of ``max_error``."""
        return self.max_error

    @property
    def table(self) -> ReliabilityTable:
        """The bin table of a single-column result."""
        if len(self.tables) != 1:
            raise ParameterError(
                f"this result has {len(self.tables)} bin tables (one per column); use `tables`"
            )
        return self.tables[0]

    @property
    def curve(self) -> LocalCalibration:
        """The local calibration error of a single-column kernel result."""
        if len(self.curves) != 1:
            raise ParameterError(
                f"this result has {len(self.curves)} local curves (one per column); use "
                "`curves`"
            )
        return self.curves[0]

    def confidence_interval(
        self, level=0.95, n_resamples=200, random_state=None, *, statistic="estimate",
        method="recentred", groups=None,
    ) -> ConfidenceInterval:
        """Bootstrap interval of the estimate (or of the maximum error).

        Rows (or, with ``groups``, whole groups of rows) are resampled with replacement
        and the whole estimator is rerun on each resample (equal-mass edges, logit ranges
        and bandwidths are recomputed), in parallel compiled code for rows.

        **Construction.** Let ``m`` be the median of the ``n_resamples`` bootstrap
        estimates and ``q_lo, q_hi`` their ``(1 -+ level) / 2`` quantiles. The default
        ``"recentred"`` interval is ``[max(0, estimate - (m - q_lo)), estimate + (q_hi -
        m)]``: the bootstrap distribution shifted so that its median is the estimate.
        Why: a calibration error is an absolute value, so its plug-in estimate is biased
        upwards by the sampling noise, and a resample (which duplicates rows and so has
        fewer distinct forecasts) is noisier still; the bootstrap distribution therefore
        sits *above* the estimate by about the bias ``m - estimate`` (the ``bias`` field),
        and its plain percentiles can exclude the estimate altogether on confident or
        nearly calibrated forecasts. The recentred interval keeps the bootstrap's spread
        (the sampling variability, which is what the bootstrap measures well) and removes
        that shift; it always contains the estimate. ``"percentile"`` gives the plain
        percentiles ``[q_lo, q_hi]``.

        Neither corrects the estimate's own upward bias: with few forecasts the truth
        can lie below the interval (see the coverage table of
        ``benchmarks/ece_estimator_study.py``).

        Parameters
        ----------
        level : float, default=0.95
            Confidence level, in (0, 1).
        n_resamples : int, default=200
            Number of bootstrap resamples.
        random_state : None, int or numpy.random.Generator, default=None
            Seed; the same seed gives the same interval.
        statistic : {"estimate", "max_error"}, default="estimate"
            Which statistic to bootstrap.
        method : {"recentred", "percentile"}, default="recentred"
            How the interval is read from the bootstrap distribution (see above).
        groups : array-like of shape (n_samples,), optional
            Group of each row (document, image, writer): the bootstrap draws whole groups,
            as many as there are, so that rows which are not independent (events of one
            document) do not make the interval too narrow. Default: rows are independent.

        Returns
        -------
        ConfidenceInterval
        """
        level, n_resamples, rng = check_bootstrap_args(level, n_resamples, random_state)
        statistic = check_statistic(statistic)
        method = check_option(method, "method", ("recentred", "percentile"))
        if groups is not None:
            est, mx = _group_bootstrap(self._spec, groups, n_resamples, rng)
        else:
            seeds = bootstrap_seeds(rng, n_resamples)
            est, mx = self._spec.bootstrap(seeds)
        values = est if statistic == "estimate" else mx
        point = self.estimate if statistic == "estimate" else self.max_error
        return bootstrap_interval(values, point, level, n_resamples, method, floor=0.0)


def _group_bootstrap(spec, groups, n_resamples, rng):
    """(estimate, max_error) of each resample that draws whole groups with replacement."""
    import copy
    from dataclasses import replace

    columns = spec.columns
    g = np.asarray(groups)
    if g.ndim != 1 or g.shape[0] != columns.n_samples:
        raise ParameterError(f"`groups` must have shape ({columns.n_samples},), one group per "
                             f"row; got shape {g.shape}")
    _, code = np.unique(g, return_inverse=True)
    G = int(code.max()) + 1 if code.size else 0
    base = columns.weights if columns.weights is not None else np.ones(columns.n_samples)
    counts = rng.multinomial(G, np.full(G, 1.0 / max(G, 1)), size=n_resamples)
    est = np.empty(n_resamples)
    mx = np.empty(n_resamples)
    for r in range(n_resamples):
        w = base * counts[r, code]
        if not (w > 0).any():  # every drawn group has zero weight: the resample is empty
            est[r] = mx[r] = np.nan
            continue
        resample = copy.copy(spec)
        resample.columns = replace(columns, weights=w)
        _, e, m = resample.point()
        e, m = resample.combine(e, m)
        est[r], mx[r] = e, m
    keep = ~np.isnan(est)
    return est[keep], mx[keep]


@dataclass(frozen=True)
class ReliabilityCurve:
    """A continuous reliability diagram with bootstrap percentile bands.

    Attributes
    ----------
    grid : ndarray of shape (grid_size,)
        Scores from 0 to 1.
    estimate : ndarray of shape (grid_size,)
        Estimated ``P(y = 1 | s)`` on the original sample (NaN where unsupported).
    median, low, high : ndarray of shape (grid_size,)
        Median and ``(1 -+ level) / 2`` percentiles over bootstrap resamples, with the
        bandwidth held at the original sample's (NaN where fewer than half of the
        resamples support the point).
    density : ndarray of shape (grid_size,)
        Kernel density of the scores on the original sample.
    level : float
        Band level.
    bandwidth : float
        Kernel bandwidth.
    n_resamples : int
        Number of bootstrap resamples.
    """

    grid: np.ndarray
    estimate: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray
    density: np.ndarray
    level: float
    bandwidth: float
    n_resamples: int

    def __repr__(self) -> str:
        return (f"ReliabilityCurve(grid_size={self.grid.shape[0]}, level={self.level}, "
                f"bandwidth={self.bandwidth:.4g}, n_resamples={self.n_resamples})")

    def _repr_html_(self) -> str:
        from .._html import html_table

        step = max(1, self.grid.shape[0] // 10)
        rows = [[f"{self.grid[i]:.3f}", f"{self.estimate[i]:.4f}", f"{self.low[i]:.4f}",
                 f"{self.high[i]:.4f}", f"{self.density[i]:.3f}"]
                for i in range(0, self.grid.shape[0], step)]
        return html_table(
            ["score", "estimate", f"low ({self.level:g})", f"high ({self.level:g})", "density"],
            rows, caption="Reliability curve",
            note=f"every {step}th of {self.grid.shape[0]} grid points; bandwidth "
                 f"{self.bandwidth:.4g}, {self.n_resamples} bootstrap resamples; "
                 "structcal.plotting.plot_reliability_curve draws it",
        )


# ---------------------------------------------------------------------------------------
# binned estimators


class _BinnedSpec:
    """A binned estimator bound to its data: point estimate and bootstrap."""

    def __init__(self, columns, n_bins, strategy, mapping, statistic):
        self.columns = columns
        self.n_bins = n_bins
        self.quantile = strategy == "quantile"
        self.convex = mapping == "convex"
        self.statistic = statistic  # "l1", "l2" or "l2-debiased"

    def _column_index(self):
        return {"l1": 0, "l2": 2, "l2-debiased": 3}[self.statistic]

    def edges(self, c):
        s = self.columns.scores[c]
        if not self.quantile:
            return _binning.uniform_edges(self.n_bins)
        w, use_w = _weights(self.columns)
        if use_w:
            order = np.argsort(s, kind="stable")
            return _kernels.sorted_quantile_edges(
                s[order], w[order], True, self.n_bins
            )
        return _kernels.sorted_quantile_edges(np.sort(s), w, False, self.n_bins)

    def point(self):
        w, use_w = _weights(self.columns)
        tables, est, mx = [], [], []
        j = self._column_index()
        for c in range(self.columns.n_columns):
            edges = self.edges(c)
            stats = _binning.bin_stats(
                self.columns.scores[c], self.columns.outcomes[c], w, use_w,
                edges, not self.quantile, self.convex,
            )
            summary = _binning.summarize_bins(stats)
            tables.append(ReliabilityTable._from_stats(edges, stats))
            est.append(summary[j])
            mx.append(summary[1])
        return tuple(tables), np.array(est), np.array(mx)

    def combine(self, per_column, max_per_column):
        """Overall (estimate, max_error) from per-column values (last axis = columns)."""
        m = np.mean(per_column, axis=-1)
        if self.statistic != "l1":
            m = np.sqrt(np.maximum(m, 0.0))
        return m, np.mean(max_per_column, axis=-1)

    def bootstrap(self, seeds):
        w, use_w = _weights(self.columns)
        j = self._column_index()
        C = self.columns.n_columns
        est = np.empty((seeds.shape[0], C))
        mx = np.empty((seeds.shape[0], C))
        for c in range(C):
            s, y, wc = self.columns.scores[c], self.columns.outcomes[c], w
            if self.quantile:
                order = np.argsort(s, kind="stable")
                s, y = s[order], y[order]
                if use_w:
                    wc = w[order]
            out = np.empty((seeds.shape[0], 4))
            _kernels.bootstrap_binned(
                s, y, wc, use_w, seeds, self.n_bins, self.quantile, self.convex,
                _n_chunks(seeds.shape[0]), out,
            )
            est[:, c] = out[:, j]
            mx[:, c] = out[:, 1]
        return self.combine(est, mx)

    def describe(self):
        strategy = "quantile" if self.quantile else "uniform"
        mapping = "convex" if self.convex else "hard"
        if self.statistic == "l2-debiased":
            return f"debiased-l2(n_bins={self.n_bins}, strategy={strategy!r})"
        return f"binned(n_bins={self.n_bins}, strategy={strategy!r}, mapping={mapping!r})"


def _binned_result(columns, spec, norm):
    tables, est, mx = spec.point()
    estimate, max_error = spec.combine(est, mx)
    return CalibrationErrorResult(
        estimate=float(estimate),
        max_error=float(max_error),
        norm=norm,
        method=spec.describe(),
        setting=columns.setting,
        n_samples=columns.n_samples,
        per_column=est,
        labels=columns.labels,
        tables=tables,
        _spec=spec,
    )


def binned_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    mapping="hard",
    norm="l1",
    setting="auto",
    label=None,
    sample_weight=None,
) -> CalibrationErrorResult:
    """Binned estimate of the expected and maximum calibration errors.

    ``ECE = sum_B (N_B / N) |t_B - f_B|`` and ``MCE = max_B |t_B - f_B|`` over non-empty
    bins, where ``f_B`` is the mean forecast and ``t_B`` the event frequency in bin ``B``
    (``norm="l2"`` gives ``sqrt(sum_B (N_B / N) (t_B - f_B)**2)`` instead).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 outcomes (1-d ``y_prob``) or class labels ``0..K-1`` (2-d ``y_prob``).
    y_prob : array-like of shape (n_samples,) or (n_samples, K)
        Forecast probabilities of the positive class, or probability rows.
    n_bins : int or "sqrt", default=15
        Number of bins; ``"sqrt"`` uses ``round(sqrt(n_samples))`` (Posocco & Bonnefoy's
        heuristic).
    strategy : {"uniform", "quantile"}, default="uniform"
        Bins of equal width, or of equal mass (edges between order statistics; tied
        forecasts always share a bin, so bins may be unequal under ties).
    mapping : {"hard", "convex"}, default="hard"
        Each forecast in its own bin, or split between the two bins whose centres
        surround it in proportion to its distance to them ("linear binning").
    norm : {"l1", "l2"}, default="l1"
        Expected absolute error (ECE) or root mean squared error.
    setting : {"auto", "binary", "class-specific", "class-wise", "confidence"}, default="auto"
        How multiclass forecasts are assessed (see Notes).
    label : int, optional
        The class assessed in the class-specific setting.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative sample weights.

    Returns
    -------
    CalibrationErrorResult
        ``estimate`` (ECE), ``max_error`` (MCE), per-column ``tables`` and
        ``confidence_interval()``.

    Warns
    -----
    SparseBinsWarning
        When there are fewer samples than bins (empty bins are skipped).

    Notes
    -----
    ``setting="auto"`` assesses 1-d forecasts as binary and 2-d ones in the confidence
    (top-label) setting: the largest probability forecasts "the predicted class is
    right". ``"class-wise"`` averages the class-specific errors of every class.

    References
    ----------
    M. P. Naeini, G. Cooper, M. Hauskrecht, *Obtaining well calibrated probabilities using
    Bayesian binning*, AAAI 2015 (ECE, MCE).
    N. Posocco, A. Bonnefoy, *Estimating expected calibration errors*, ICANN 2021
    (adaptive and convex binning, the sqrt heuristic).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.metrics import binned_calibration_error
    >>> r = binned_calibration_error([0, 1, 1, 1], [0.2, 0.6, 0.7, 0.9], n_bins=2)
    >>> round(r.ece, 4), round(r.mce, 4)
    (0.25, 0.2667)
    """
    columns = binary_columns(y_true, y_prob, setting=setting, label=label,
                             sample_weight=sample_weight)
    nb = check_n_bins(n_bins, columns.n_samples)
    strategy = check_option(strategy, "strategy", ("uniform", "quantile"))
    mapping = check_option(mapping, "mapping", ("hard", "convex"))
    norm = check_option(norm, "norm", ("l1", "l2"))
    warn_sparse_bins(columns.n_samples, nb)
    spec = _BinnedSpec(columns, nb, strategy, mapping, norm)
    return _binned_result(columns, spec, norm)


def debiased_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="quantile",
    setting="auto",
    label=None,
    sample_weight=None,
) -> CalibrationErrorResult:
    """Debiased estimate of the L2 calibration error (Kumar, Liang & Ma, 2019).

    The plug-in squared error of a bin, ``(t_B - f_B)**2``, overestimates the squared
    calibration error by the sampling variance of ``t_B``. Subtracting its unbiased
    estimate ``t_B (1 - t_B) / (N_B - 1)`` gives an estimate of
    ``E (P(y = 1 | p_B) - p_B)**2`` for the binned forecaster; the result is
    ``sqrt(max(0, sum_B (N_B / N) [(t_B - f_B)**2 - t_B (1 - t_B) / (N_B - 1)]))``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 outcomes (1-d ``y_prob``) or class labels (2-d ``y_prob``).
    y_prob : array-like of shape (n_samples,) or (n_samples, K)
        Forecast probabilities.
    n_bins : int or "sqrt", default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="quantile"
        Bin edges (equal-mass bins, as in the reference implementation, by default).
    setting : {"auto", "binary", "class-specific", "class-wise", "confidence"}, default="auto"
        See :func:`binned_calibration_error`.
    label : int, optional
        The class assessed in the class-specific setting.
    sample_weight : array-like of shape (n_samples,), optional
        Frequency weights (a weight of 2 counts a sample twice in ``N_B``).

    Returns
    -------
    CalibrationErrorResult
        ``norm="l2"``; ``per_column`` holds the debiased *squared* errors (which can be
        negative); ``max_error`` is the largest plug-in bin gap.

    Warns
    -----
    SparseBinsWarning
        When there are fewer samples than bins.

    Notes
    -----
    Bins with total weight at most 1 contribute nothing (their variance is undefined).

    References
    ----------
    A. Kumar, P. Liang, T. Ma, *Verified uncertainty calibration*, NeurIPS 2019.
    """
    columns = binary_columns(y_true, y_prob, setting=setting, label=label,
                             sample_weight=sample_weight)
    nb = check_n_bins(n_bins, columns.n_samples)
    strategy = check_option(strategy, "strategy", ("uniform", "quantile"))
    warn_sparse_bins(columns.n_samples, nb)
    spec = _BinnedSpec(columns, nb, strategy, "hard", "l2-debiased")
    return _binned_result(columns, spec, "l2")


# ---------------------------------------------------------------------------------------
# kernel estimator

_SILVERMAN_IQR = 1.34


def _grid_quantiles(dens, total, qs, step):
    """Quantiles of linear-binned masses ``dens`` (rows) on a grid of spacing ``step``."""
    cdf = np.cumsum(dens, axis=-1) / total[:, None]
    out = np.empty((dens.shape[0], len(qs)))
    for k, q in enumerate(qs):
        j = np.argmax(cdf >= q, axis=-1)
        prev = np.where(j > 0, cdf[np.arange(len(j)), np.maximum(j - 1, 0)], 0.0)
        cur = cdf[np.arange(len(j)), j]
        frac = np.where(cur > prev, (q - prev) / np.where(cur > prev, cur - prev, 1.0), 0.0)
        out[:, k] = (np.maximum(j - 1, 0) + np.where(j > 0, frac, 0.0)) * step
    return out


def silverman_bandwidth(scores, sample_weight=None) -> float:
    """Silverman's rule-of-thumb bandwidth for a sample of scores.

    ``h = 0.9 * min(sd, IQR / 1.34) * n**(-1/5)`` (the standard deviation alone when the
    interquartile range is 0), with weighted moments and ``n`` the number of samples of
    positive weight.

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Scores in [0, 1].
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative weights.

    Returns
    -------
    float

    References
    ----------
    B. W. Silverman, *Density estimation for statistics and data analysis*, Chapman &
    Hall, 1986, eq. (3.31).
    """
    s = as_float_array(scores, "scores", ndim=1, allow_empty=False)
    w = np.ones_like(s) if sample_weight is None else as_float_array(
        sample_weight, "sample_weight", shape=s.shape
    )
    order = np.argsort(s, kind="stable")
    s, w = s[order], w[order]
    total = w.sum()
    mean = (w * s).sum() / total
    sd = np.sqrt(max((w * (s - mean) ** 2).sum() / total, 0.0))
    cw = np.cumsum(w) / total
    q1, q3 = np.interp([0.25, 0.75], cw - 0.5 * w / total, s)
    n = int(np.count_nonzero(w > 0))
    return float(_silverman(np.array([sd]), np.array([q3 - q1]), n)[0])


def _silverman(sd, iqr, n):
    a = np.minimum(sd, iqr / _SILVERMAN_IQR)
    a = np.where(a > 0, a, sd)
    return 0.9 * a * float(n) ** (-0.2)


# bandwidth="undersmoothed": Silverman's bandwidth up to this many forecasts, shrinking as
# n**(-1/3) beyond (chosen in benchmarks/ece_candidates.py among 1000, 3000 and 10000; see
# calibration_error)
_UNDERSMOOTH_FROM = 10_000


def _undersmoothing(n):
    """``h / h_Silverman`` of ``bandwidth="undersmoothed"`` at ``n`` forecasts: 1 up to
    ``_UNDERSMOOTH_FROM``, ``(n / _UNDERSMOOTH_FROM)**(1/5 - 1/3)`` beyond (continuous)."""
    if n <= _UNDERSMOOTH_FROM:
        return 1.0
    return (n / _UNDERSMOOTH_FROM) ** (1.0 / 5.0 - 1.0 / 3.0)


# Forecasts are clipped to [_LOGIT_EPS, 1 - _LOGIT_EPS] before the logit: 1 - 2**-53 is
# the largest double below 1, so only forecasts within 1.1e-16 of 0 or 1 are merged.
_LOGIT_EPS = 2.0**-53


class _KDESpec:
    """The kernel estimator bound to its data.

    The kernel works on a coordinate ``u`` in [0, 1]: the score itself
    (``scale="probability"``), or its logit mapped linearly from the range of the
    column's forecasts onto [0, 1] (``scale="logit"``). The residuals ``y - s`` are always
    those of the scores.
    """

    def __init__(self, columns, bandwidth, smoothing, grid_size, scale="probability"):
        self.columns = columns
        self.bandwidth = bandwidth  # a rule name or a float (in units of the scale)
        self.residual = smoothing == "residual"
        self.smoothing = smoothing
        self.grid_size = grid_size
        self.scale = scale
        self.step = 1.0 / (grid_size - 1)
        self.n_eff = (
            columns.n_samples
            if columns.weights is None
            else int(np.count_nonzero(columns.weights > 0))
        )
        self.grid = np.linspace(0.0, 1.0, grid_size)
        self._coords = {}

    def describe(self):
        bw = repr(self.bandwidth) if isinstance(self.bandwidth, str) else f"{self.bandwidth:g}"
        return (f"kde(bandwidth={bw}, smoothing={self.smoothing!r}, scale={self.scale!r}, "
                f"grid_size={self.grid_size})")

    # -- coordinates ------------------------------------------------------------------
    def coords(self, c):
        """(u, targets, lo, width) of column ``c``: kernel coordinate ``u`` in [0, 1],
        the outcomes shifted so that the kernels' ``outcome - u`` is ``y - s``, and the
        affine map ``logit(s) = lo + width * u`` (``lo = 0, width = 1``: the score)."""
        if c not in self._coords:
            s, y = self.columns.scores[c], self.columns.outcomes[c]
            if self.scale == "probability":
                self._coords[c] = (s, y, 0.0, 1.0)
            else:
                t = np.log(np.clip(s, _LOGIT_EPS, 1.0 - _LOGIT_EPS))
                t -= np.log1p(-np.clip(s, _LOGIT_EPS, 1.0 - _LOGIT_EPS))
                w, use_w = _weights(self.columns)
                live = t[w > 0] if use_w else t
                lo, hi = (float(live.min()), float(live.max())) if live.size else (0.0, 0.0)
                if not hi > lo:  # one distinct forecast: a unit window around it
                    lo, hi = lo - 0.5, lo + 0.5
                u = np.clip((t - lo) / (hi - lo), 0.0, 1.0)
                target = (y - s) + u if self.residual else y
                self._coords[c] = (u, target, lo, hi - lo)
        return self._coords[c]

    def grid_scores(self, c):
        """The score at each grid point of column ``c``."""
        _, _, lo, width = self.coords(c)
        if self.scale == "probability":
            return self.grid
        t = lo + width * self.grid
        return 1.0 / (1.0 + np.exp(-t))

    # -- histograms ---------------------------------------------------------------------
    def histograms(self, c):
        w, use_w = _weights(self.columns)
        u, target, _, _ = self.coords(c)
        G = self.grid_size
        dens = np.zeros((1, G))
        numer = np.zeros((1, G))
        mom = np.array([_kernels.kde_histograms(
            u, target, w, use_w, G, self.residual, dens[0], numer[0],
        )])
        return dens, numer, mom

    def bootstrap_histograms(self, c, seeds):
        w, use_w = _weights(self.columns)
        u, target, _, _ = self.coords(c)
        R, G = seeds.shape[0], self.grid_size
        dens = np.zeros((R, G))
        numer = np.zeros((R, G))
        mom = np.empty((R, 3))
        _kernels.bootstrap_kde_histograms(
            u, target, w, use_w, seeds, G, self.residual, _n_chunks(R), dens, numer, mom,
        )
        return dens, numer, mom

    # -- smoothing ------------------------------------------------------------------------
    def bandwidths(self, c, dens, mom):
        """Kernel standard deviation of each row, in units of ``u``."""
        if not isinstance(self.bandwidth, str):
            h = self.bandwidth / self.coords(c)[3]
            if h < 2.0 * self.step:
                raise ParameterError(
                    f"`bandwidth` must be at least two grid steps; got {self.bandwidth:g}, "
                    f"below {2.0 * self.step * self.coords(c)[3]:.4g} (two steps of the "
                    "grid over the range of the forecasts' logits): pass a larger "
                    "bandwidth or grid_size"
                )
            return np.full(dens.shape[0], h)
        total = mom[:, 0]
        mean = mom[:, 1] / total
        sd = np.sqrt(np.maximum(mom[:, 2] / total - mean**2, 0.0))
        q = _grid_quantiles(dens, total, (0.25, 0.75), self.step)
        h = _silverman(sd, q[:, 1] - q[:, 0], self.n_eff)
        if self.bandwidth == "undersmoothed":
            h = h * _undersmoothing(self.n_eff)
        return np.maximum(h, 2.0 * self.step)

    def smooth(self, hist, h):
        """Reflected Gaussian smoothing of linear-binned rows ``hist`` (one h per row).

        The grid masses are mirrored at 0 and 1 (points at 0 and 1 are their own
        mirror images, so their mass counts twice) into a sequence of period 2, and
        convolved circularly with the periodised Gaussian through its exact Fourier
        coefficients: the result is the kernel sum with infinitely many reflections.
        """
        G = self.grid_size
        M = 2 * (G - 1)
        ext = np.zeros((hist.shape[0], M))
        ext[:, :G] += hist
        ext[:, (M - np.arange(G)) % M] += hist
        k = np.arange(M // 2 + 1)
        with np.errstate(under="ignore"):  # high frequencies of narrow kernels vanish
            mult = np.exp(-0.5 * (np.pi * k[None, :] * h[:, None]) ** 2) / self.step
            return np.fft.irfft(np.fft.rfft(ext, axis=1) * mult, n=M, axis=1)[:, :G]

    def finish(self, c, dens_hist, numer_hist, mom, h=None):
        """(ece, mce, lce, density, support, h) per row of histograms of column ``c``.

        ``density`` is the density of the scores (per unit of score) and ``h`` the
        bandwidth in units of the scale; ``h`` given is in units of ``u``.
        """
        total = mom[:, 0]
        if h is None:
            h = self.bandwidths(c, dens_hist, mom)
        D = self.smooth(dens_hist, h)
        N = self.smooth(numer_hist, h)
        scores = self.grid_scores(c)
        if not self.residual:
            N = N - scores[None, :] * D
        trap = np.full(self.grid_size, self.step)
        trap[[0, -1]] *= 0.5
        with np.errstate(invalid="ignore", divide="ignore"):
            ece = (np.abs(N) @ trap) / (D @ trap)
            support = D * (h * np.sqrt(2.0 * np.pi) * self.n_eff / total)[:, None]
            lce = np.where(support >= 1.0, N / D, np.nan)
            near = dens_hist > 0
            near[:, 1:] |= dens_hist[:, :-1] > 0
            near[:, :-1] |= dens_hist[:, 1:] > 0
            gap = np.where(near & (D > 0), np.abs(N / np.where(D > 0, D, 1.0)), 0.0)
        mce = gap.max(axis=1)
        density = D / total[:, None]
        width = self.coords(c)[3]
        if self.scale == "logit":  # du/ds = 1 / (width * s * (1 - s))
            with np.errstate(divide="ignore", invalid="ignore"):
                jac = 1.0 / (width * scores * (1.0 - scores))
            density = density * np.where(np.isfinite(jac), jac, 0.0)[None, :]
        return ece, mce, lce, density, support, h * width

    def point(self):
        curves, est, mx = [], [], []
        for c in range(self.columns.n_columns):
            dens, numer, mom = self.histograms(c)
            ece, mce, lce, density, support, h = self.finish(c, dens, numer, mom)
            curves.append(LocalCalibration(self.grid_scores(c), lce[0], density[0],
                                           support[0], float(h[0])))
            est.append(ece[0])
            mx.append(mce[0])
        return tuple(curves), np.array(est), np.array(mx)

    def combine(self, per_column, max_per_column):
        return np.mean(per_column, axis=-1), np.mean(max_per_column, axis=-1)

    def bootstrap(self, seeds):
        C = self.columns.n_columns
        est = np.empty((seeds.shape[0], C))
        mx = np.empty((seeds.shape[0], C))
        for c in range(C):
            dens, numer, mom = self.bootstrap_histograms(c, seeds)
            e, m, *_ = self.finish(c, dens, numer, mom)
            est[:, c] = e
            mx[:, c] = m
        return self.combine(est, mx)


def _kde_spec(y_true, y_prob, bandwidth, smoothing, grid_size, setting, label, sample_weight,
              scale="probability"):
    columns = binary_columns(y_true, y_prob, setting=setting, label=label,
                             sample_weight=sample_weight)
    grid_size = check_int(grid_size, "grid_size", low=3)
    smoothing = check_option(smoothing, "smoothing", ("residual", "labels"))
    scale = check_option(scale, "scale", ("probability", "logit"))
    if isinstance(bandwidth, str):
        bandwidth = check_option(bandwidth, "bandwidth", ("silverman", "undersmoothed"))
    elif scale == "probability":
        bandwidth = check_float(bandwidth, "bandwidth", low=2.0 / (grid_size - 1))
    else:  # two grid steps of the logits' range: checked once the range is known
        bandwidth = check_float(bandwidth, "bandwidth", low=0.0, low_inclusive=False)
    return _KDESpec(columns, bandwidth, smoothing, grid_size, scale)


def kde_calibration_error(
    y_true,
    y_prob,
    *,
    bandwidth="silverman",
    smoothing="residual",
    scale="probability",
    grid_size=4097,
    setting="auto",
    label=None,
    sample_weight=None,
) -> CalibrationErrorResult:
    """Kernel estimate of the expected and maximum calibration errors.

    The local calibration error ``LCE(s) = P(y = 1 | s) - s`` is estimated by
    Nadaraya-Watson kernel smoothing (equivalently, Bayes' rule on two kernel density
    estimates) with a Gaussian kernel, the data reflected at 0 and 1, on ``grid_size``
    points of [0, 1] computed by FFT in ``O(n + grid_size log grid_size)``. Then
    ``ECE = integral |LCE(s)| f(s) ds`` with ``f`` the kernel density of the scores, which
    simplifies to ``integral |N(s)| ds / integral D(s) ds`` with ``D(s) = sum_i w_i
    K(s - s_i)`` and ``N(s) = sum_i w_i K(s - s_i) (y_i - s_i)``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 outcomes (1-d ``y_prob``) or class labels (2-d ``y_prob``).
    y_prob : array-like of shape (n_samples,) or (n_samples, K)
        Forecast probabilities.
    bandwidth : {"silverman", "undersmoothed"} or float, default="silverman"
        Kernel standard deviation; ``"silverman"`` uses Silverman's rule on the scores
        (interquartile range read from the grid histogram, to within one grid step),
        floored at two grid steps. ``"undersmoothed"`` is Silverman's rule up to 10^4
        forecasts and shrinks as ``n**(-1/3)`` beyond (continuously; see
        :func:`calibration_error`, which uses it). A float must be at least two grid
        steps.
    smoothing : {"residual", "labels"}, default="residual"
        Smooth the residuals ``y_i - s_i`` (``N`` above), or smooth the labels and
        subtract the grid score (``LCE = sum K y / sum K - s``, Posocco & Bonnefoy's
        formulation). On calibrated data the residuals have mean zero everywhere, so
        smoothing them adds no smoothing bias; the labels version adds
        ``smooth(s) - s``, which is non-zero near 0 and 1 and where the density changes.
    scale : {"probability", "logit"}, default="probability"
        Where the kernel works. ``"probability"``: on the scores, reflected at 0 and 1.
        ``"logit"``: on ``logit(s)`` (scores clipped to ``[2**-53, 1 - 2**-53]``), over
        the range of the forecasts' logits, reflected at its ends; the bandwidth (rule
        or float) is then in logit units. The ECE is the same functional either way
        (``E |P(y = 1 | s) - s|`` does not depend on how the scores are parametrised);
        only the smoothing differs. Forecasts piled up near 0 or 1 (confident models)
        are spread out on the logit scale, where Silverman's rule does not collapse:
        this is what :func:`calibration_error` uses.
    grid_size : int, default=4097
        Number of grid points on [0, 1] (spacing ``1 / (grid_size - 1)``), or on the
        range of the logits.
    setting : {"auto", "binary", "class-specific", "class-wise", "confidence"}, default="auto"
        See :func:`binned_calibration_error`.
    label : int, optional
        The class assessed in the class-specific setting.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative sample weights.

    Returns
    -------
    CalibrationErrorResult
        ``estimate`` (ECE), ``max_error`` (MCE: the largest ``|LCE|`` at grid points next
        to a forecast), per-column ``curves`` (:class:`LocalCalibration`) and
        ``confidence_interval()``.

    Notes
    -----
    Samples are linear-binned onto the grid (each split between its two neighbouring
    grid points, which preserves their mean), so results match the exact kernel sums to
    within about ``(grid step / bandwidth)**2``.

    References
    ----------
    N. Posocco, A. Bonnefoy, *Estimating expected calibration errors*, ICANN 2021.
    B. W. Silverman, *Algorithm AS 176: Kernel density estimation using the fast Fourier
    transform*, Applied Statistics 31(1), 1982.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.metrics import kde_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(20000)
    >>> y = rng.random(20000) < p ** 2        # true P(y=1 | p) = p**2: ECE = 1/6
    >>> round(kde_calibration_error(y, p).ece, 2)
    0.17
    """
    spec = _kde_spec(y_true, y_prob, bandwidth, smoothing, grid_size, setting, label,
                     sample_weight, scale)
    curves, est, mx = spec.point()
    estimate, max_error = spec.combine(est, mx)
    return CalibrationErrorResult(
        estimate=float(estimate),
        max_error=float(max_error),
        norm="l1",
        method=spec.describe(),
        setting=spec.columns.setting,
        n_samples=spec.columns.n_samples,
        per_column=est,
        labels=spec.columns.labels,
        curves=curves,
        _spec=spec,
    )


def calibration_error(
    y_true, y_prob, *, setting="auto", label=None, sample_weight=None
) -> CalibrationErrorResult:
    """The expected calibration error by structcal's recommended estimator.

    This is :func:`kde_calibration_error` with ``scale="logit"`` and
    ``bandwidth="undersmoothed"`` (Silverman's bandwidth on the logits of the forecasts up
    to 10^4 forecasts, shrinking as ``n**(-1/3)`` beyond; smoothed residuals): the kernel
    works on ``logit(s)``, where forecasts piled up near 0 or 1 (confident models,
    structured events) are spread out and the bandwidth does not collapse to the grid as
    it does on the probability scale.

    *Why undersmooth at large n.* Smoothing with bandwidth ``h`` biases the estimate by
    about ``h**2`` where the calibration error changes with the score, while its noise
    shrinks as ``n**(-1/2)``. Silverman's ``h ~ n**(-1/5)`` leaves a bias of order
    ``n**(-2/5)``, which at large ``n`` exceeds the noise; ``h ~ n**(-1/3)`` makes it
    ``n**(-2/3)``, below the noise. With 400 evaluation sets at 10^4 and 80 at 10^5 on
    the 16 confident distributions below, over seeds 3, 11 and 17
    (``python benchmarks/ece_candidates.py --seed S --sizes 10000 100000 --resamples 400
    --only "n = 10000" --per-distribution``; ``benchmarks/results/ece_undersmoothing.txt``)
    the median ratio of its 95th-percentile error to 15 bins' is 0.98, 0.98 and 1.00 at
    10^5 (Silverman's rule: 1.00, 0.99, 1.00), and no distribution is clearly worse
    than 15 bins (Silverman's rule: one, the OCR marginals at temperature 0.7, 1.20
    [1.08, 1.35]). Up to 10^4 forecasts the two rules are the same.

    ``benchmarks/ece_estimator_study.py`` supports the choice (median over score
    distributions of the 95th-percentile relative error ``|estimate - truth| / truth``;
    run kept in ``benchmarks/results/ece_estimator_study.txt``). On Posocco & Bonnefoy's
    protocol at reduced scale (32 score distributions from 4 model types on Gaussian
    mixtures, 30 to 500 forecasts) it is below the legacy 15-bin estimator at every size,
    in the confidence setting (2.35 vs 3.45 at n = 30, 1.20 vs 1.60 at n = 100, 0.53 vs
    0.62 at n = 500) and the class-wise one (1.70 vs 2.84, 0.80 vs 1.44, 0.41 vs 0.47).
    On confident forecasters (16 distributions: the OCR chain CRF's marginal events and
    logit-normal forecasts with means 0.9-0.99, under four known miscalibrations) it is
    clearly below at n = 100 and 1000 (1.37 vs 1.96, 0.41 vs 0.48) and below within the
    noise at n = 10^4 and 10^5: with 400 and 80 evaluation sets per distribution it
    reads 0.139 vs 0.145 (paired 95% interval of the ratio [0.80, 1.02]) and 0.0467 vs
    0.0474 ([0.92, 1.06]), clearly higher on none of the 16 distributions
    (``benchmarks/results/ece_confident_check.txt``). There both are at the efficiency
    bound: the 95th-percentile error of an efficient estimator, whose error is only the
    sampling noise of the sample itself, has a median of 0.150 and 0.0475 over these
    distributions, and an estimator told the true sign of the miscalibration reads 0.146
    and 0.048. No estimator measured is clearly
    below 15 bins there (``benchmarks/ece_candidates.py``: wider, faster-shrinking or
    cross-validated bandwidths, kernel sums debiased by their noise, witness
    estimators); the lowest error any of them reaches on each distribution, picked with
    hindsight, has a median of 0.135 at n = 10^4 (15 bins: 0.141). On perfectly
    calibrated outcomes drawn from the OCR CRF's marginals it reads 0.0038 at n = 10^4
    (15 bins: 0.0057; the probability-scale kernel, the default before: 0.0101). With
    fewer than a few hundred forecasts every estimator's error exceeds the ECE itself:
    report the interval (``confidence_interval()``), not just the number.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 outcomes (1-d ``y_prob``) or class labels (2-d ``y_prob``).
    y_prob : array-like of shape (n_samples,) or (n_samples, K)
        Forecast probabilities.
    setting : {"auto", "binary", "class-specific", "class-wise", "confidence"}, default="auto"
        See :func:`binned_calibration_error`.
    label : int, optional
        The class assessed in the class-specific setting.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative sample weights.

    Returns
    -------
    CalibrationErrorResult
    """
    return kde_calibration_error(y_true, y_prob, scale="logit", bandwidth="undersmoothed",
                                 setting=setting, label=label, sample_weight=sample_weight)


def _single_column_spec(y_true, y_prob, bandwidth, smoothing, grid_size, setting, label,
                        sample_weight, what, scale):
    spec = _kde_spec(y_true, y_prob, bandwidth, smoothing, grid_size, setting, label,
                     sample_weight, scale)
    if spec.columns.n_columns != 1:
        raise ParameterError(
            f"{what} describes one binary problem; setting='class-wise' has "
            f"{spec.columns.n_columns} (use setting='class-specific' with label=k)"
        )
    return spec


def local_calibration_error(
    y_true,
    y_prob,
    *,
    bandwidth="silverman",
    smoothing="residual",
    scale="probability",
    grid_size=4097,
    setting="auto",
    label=None,
    sample_weight=None,
) -> LocalCalibration:
    """The local calibration error ``LCE(s) = P(y = 1 | s) - s`` on a grid of scores.

    Parameters are those of :func:`kde_calibration_error` (the class-wise setting is not
    accepted: pick a class with ``setting="class-specific"``).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 outcomes or class labels.
    y_prob : array-like of shape (n_samples,) or (n_samples, K)
        Forecast probabilities.
    bandwidth : {"silverman", "undersmoothed"} or float, default="silverman"
        Kernel standard deviation (see :func:`kde_calibration_error`).
    smoothing : {"residual", "labels"}, default="residual"
        What is smoothed (see :func:`kde_calibration_error`).
    scale : {"probability", "logit"}, default="probability"
        Where the kernel works (see :func:`kde_calibration_error`).
    grid_size : int, default=4097
        Number of grid points on [0, 1].
    setting : {"auto", "binary", "class-specific", "confidence"}, default="auto"
        Which binary problem to describe.
    label : int, optional
        The class of the class-specific setting.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative sample weights.

    Returns
    -------
    LocalCalibration

    References
    ----------
    N. Posocco, A. Bonnefoy, *Estimating expected calibration errors*, ICANN 2021, §4.4.
    """
    spec = _single_column_spec(y_true, y_prob, bandwidth, smoothing, grid_size, setting,
                               label, sample_weight, "local_calibration_error", scale)
    curves, _, _ = spec.point()
    return curves[0]


def reliability_curve(
    y_true,
    y_prob,
    *,
    level=0.9,
    n_resamples=200,
    random_state=None,
    bandwidth="silverman",
    smoothing="residual",
    scale="probability",
    grid_size=1025,
    setting="auto",
    label=None,
    sample_weight=None,
) -> ReliabilityCurve:
    """Continuous reliability diagram ``s + LCE(s)`` with bootstrap percentile bands.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 outcomes or class labels.
    y_prob : array-like of shape (n_samples,) or (n_samples, K)
        Forecast probabilities.
    level : float, default=0.9
        Level of the pointwise percentile band.
    n_resamples : int, default=200
        Number of bootstrap resamples.
    random_state : None, int or numpy.random.Generator, default=None
        Seed of the resampling.
    bandwidth : "silverman" or float, default="silverman"
        Kernel standard deviation, computed once on the original sample and held fixed
        across resamples (so the band shows sampling noise at one level of smoothing).
    smoothing : {"residual", "labels"}, default="residual"
        What is smoothed (see :func:`kde_calibration_error`).
    scale : {"probability", "logit"}, default="probability"
        Where the kernel works (see :func:`kde_calibration_error`).
    grid_size : int, default=1025
        Number of grid points on [0, 1].
    setting : {"auto", "binary", "class-specific", "confidence"}, default="auto"
        Which binary problem to describe.
    label : int, optional
        The class of the class-specific setting.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative sample weights.

    Returns
    -------
    ReliabilityCurve

    References
    ----------
    N. Posocco, A. Bonnefoy, *Estimating expected calibration errors*, ICANN 2021, §4.4
    (the bootstrapped reliability curve).
    """
    level, n_resamples, rng = check_bootstrap_args(level, n_resamples, random_state)
    spec = _single_column_spec(y_true, y_prob, bandwidth, smoothing, grid_size, setting,
                               label, sample_weight, "reliability_curve", scale)
    curves, _, _ = spec.point()
    h = curves[0].bandwidth
    seeds = bootstrap_seeds(rng, n_resamples)
    dens, numer, mom = spec.bootstrap_histograms(0, seeds)
    h_u = np.full(n_resamples, h / spec.coords(0)[3])  # in units of the kernel coordinate
    _, _, lce, *_ = spec.finish(0, dens, numer, mom, h=h_u)
    boot = curves[0].grid[None, :] + lce
    enough = np.isfinite(boot).sum(axis=0) >= 0.5 * n_resamples
    alpha = (1.0 - level) / 2.0
    qs = np.full((3, spec.grid_size), np.nan)
    if enough.any():
        qs[:, enough] = np.nanquantile(boot[:, enough], [alpha, 0.5, 1.0 - alpha], axis=0)
    return ReliabilityCurve(
        grid=curves[0].grid,
        estimate=curves[0].curve,
        median=qs[1],
        low=qs[0],
        high=qs[2],
        density=curves[0].density,
        level=level,
        bandwidth=h,
        n_resamples=n_resamples,
    )
