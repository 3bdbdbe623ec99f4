"""Running metrics of a forecast stream: calibration error, losses and regret over time.

Every array is indexed by time: entry ``t - 1`` is the value after the first ``t``
forecasts, so ``metrics.l2_loss[-1]`` is the average squared loss of the whole stream and
``metrics.at(300)`` reads all metrics after 300 steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, check_float, check_int, describe
from ..exceptions import ParameterError
from . import _kernels

__all__ = [
    "RunningMetrics",
    "RunningRegret",
    "running_metrics",
    "running_regret",
    "check_probabilities",
    "check_outcomes",
]

LOSSES = ("l2_loss", "log_loss", "misclassification")


def check_probabilities(p, name: str) -> np.ndarray:
    """Return ``p`` as a 1-d float64 array of probabilities in [0, 1] (NaN rejected)."""
    arr = as_float_array(p, name, ndim=1)
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        bad = int(np.flatnonzero((arr < 0.0) | (arr > 1.0))[0])
        raise ParameterError(
            f"`{name}` must hold probabilities in [0, 1]; got {arr[bad]!r} at index {bad}"
        )
    return arr


def check_outcomes(y, name: str = "y", n: int | None = None) -> np.ndarray:
    """Return binary outcomes ``y`` as a 1-d float64 array of 0.0 and 1.0.

    Booleans, integers and floats are accepted as long as every value is exactly 0 or 1;
    anything else (2, 0.5, NaN, strings) is an error, not a guess.
    """
    if y is None:
        raise ParameterError(
            f"`{name}` is required: the recalibrator requires y to be passed, but the "
            "target y is None"
        )
    arr = np.asarray(y) if not isinstance(y, np.ndarray) else y
    if np.iscomplexobj(arr):
        raise ParameterError(f"`{name}` must hold binary outcomes 0/1: Complex data not supported")
    if arr.dtype == object or not (
        arr.dtype == np.bool_
        or np.issubdtype(arr.dtype, np.integer)
        or np.issubdtype(arr.dtype, np.floating)
    ):
        raise ParameterError(
            f"`{name}` must hold binary outcomes 0/1 (Unknown label type: {describe(arr)})"
        )
    if arr.ndim != 1:
        raise ParameterError(
            f"`{name}` must be a 1-d array of outcomes; got shape {arr.shape}"
        )
    if n is not None and arr.shape[0] != n:
        raise ParameterError(
            f"`{name}` must have one outcome per forecast ({n}); got {arr.shape[0]}"
        )
    out = arr.astype(np.float64)
    bad = np.flatnonzero((out != 0.0) & (out != 1.0))
    if bad.size:
        i = int(bad[0])
        if np.issubdtype(arr.dtype, np.floating) and out[i] != np.round(out[i]):
            why = "Unknown label type: continuous target"
        else:
            why = "Only binary classification is supported."
        raise ParameterError(
            f"`{name}` must hold binary outcomes in {{0, 1}}; got {arr[i]!r} at index {i} "
            f"({why})"
        )
    return np.ascontiguousarray(out)


def _losses(p, y, log_eps):
    """Per-step l2, log and misclassification losses of forecasts ``p``."""
    q = np.clip(p, log_eps, 1.0 - log_eps)
    return {
        "l2_loss": (y - p) ** 2,
        "log_loss": -(y * np.log(q) + (1.0 - y) * np.log1p(-q)),
        # y = 1 is missed when p < 1/2, y = 0 when p >= 1/2 (the paper's formula for
        # l_mc has the two indicators swapped: as printed it is the accuracy)
        "misclassification": np.where(y == 1.0, p < 0.5, p >= 0.5).astype(np.float64),
    }


def _running_mean(x):
    return np.cumsum(x) / np.arange(1, x.shape[0] + 1)


def _check_log_eps(log_eps):
    return check_float(log_eps, "log_eps", low=0.0, high=0.5, low_inclusive=False,
                       high_inclusive=False)


@dataclass(frozen=True)
class RunningMetrics:
    """Calibration error and average losses of a forecast stream after each step.

    Attributes
    ----------
    calibration_l1 : ndarray of shape (T,)
        ``C_t^1 = sum_i (n_i / t) |rho_t(i/N) - pbar_i|`` after ``t`` steps, over the
        grid bins of :func:`running_metrics`.
    calibration_l2 : ndarray of shape (T,)
        ``C_t^2``, the same with squared gaps (the paper's "l2 calibration error").
    l2_loss : ndarray of shape (T,)
        Running mean of ``(y - p)^2`` (the Brier score).
    log_loss : ndarray of shape (T,)
        Running mean of ``-(y log q + (1 - y) log(1 - q))`` with ``q`` the forecast
        clipped to ``[log_eps, 1 - log_eps]``.
    misclassification : ndarray of shape (T,)
        Running error rate of the decision ``1[p >= 1/2]``.
    n_grid : int
        The grid resolution ``N`` of the calibration bins.
    log_eps : float
        The clipping used by ``log_loss``.
    """

    calibration_l1: np.ndarray
    calibration_l2: np.ndarray
    l2_loss: np.ndarray
    log_loss: np.ndarray
    misclassification: np.ndarray
    n_grid: int
    log_eps: float

    @property
    def n_steps(self) -> int:
        """Length ``T`` of the stream."""
        return int(self.l2_loss.shape[0])

    def at(self, t: int) -> dict:
        """All metrics after the first ``t`` steps (``1 <= t <= T``) as a dict of floats."""
        t = check_int(t, "t", low=1, high=self.n_steps)
        return {
            name: float(getattr(self, name)[t - 1])
            for name in ("calibration_l1", "calibration_l2") + LOSSES
        }


@dataclass(frozen=True)
class RunningRegret:
    """Average loss of forecasts minus that of a base forecaster, after each step.

    ``regret.l2_loss[t - 1] = (1/t) sum_{s <= t} [l(y_s, p_s) - l(y_s, p^F_s)]`` -- the
    left-hand side of eq. (2) of Kuleshov & Ermon (2017). Negative values mean the
    forecasts beat the base forecaster.

    Attributes
    ----------
    l2_loss, log_loss, misclassification : ndarray of shape (T,)
        Running average regret under each loss (same losses as :class:`RunningMetrics`).
    log_eps : float
        The clipping used by ``log_loss``.
    """

    l2_loss: np.ndarray
    log_loss: np.ndarray
    misclassification: np.ndarray
    log_eps: float

    def at(self, t: int) -> dict:
        """Regret under every loss after the first ``t`` steps, as a dict of floats."""
        t = check_int(t, "t", low=1, high=int(self.l2_loss.shape[0]))
        return {name: float(getattr(self, name)[t - 1]) for name in LOSSES}


def running_metrics(p, y, *, n_grid: int = 10, log_eps: float = 1e-4) -> RunningMetrics:
    """Calibration error and losses of the forecasts ``p`` after each step.

    Parameters
    ----------
    p : array-like of shape (T,)
        Forecast probabilities in [0, 1], in the order they were issued.
    y : array-like of shape (T,)
        Binary outcomes (0/1).
    n_grid : int, default=10
        Resolution ``N``: forecasts are binned to the nearest of ``0, 1/N, ..., 1``.
        For forecasts already on that grid, the calibration errors are exactly eq. (1)
        of Kuleshov & Ermon (2017); otherwise each bin compares the outcome frequency
        with the bin's mean forecast.
    log_eps : float, default=1e-4
        Forecasts are clipped to ``[log_eps, 1 - log_eps]`` for the log loss only (the
        grid contains 0 and 1, whose log loss is unbounded).

    Returns
    -------
    RunningMetrics

    Notes
    -----
    O(T) time: the calibration sums are updated in O(1) per step in a Numba kernel.

    Examples
    --------
    >>> from structcal.online import running_metrics
    >>> m = running_metrics([0.5, 0.5, 1.0, 0.0], [1, 0, 1, 1], n_grid=2)
    >>> m.calibration_l1.tolist()
    [0.5, 0.0, 0.0, 0.25]
    >>> float(m.l2_loss[-1])
    0.375
    """
    n_grid = check_int(n_grid, "n_grid", low=1)
    log_eps = _check_log_eps(log_eps)
    p = check_probabilities(p, "p")
    y = check_outcomes(y, "y", p.shape[0])
    c1 = np.empty(p.shape[0])
    c2 = np.empty(p.shape[0])
    if p.shape[0]:
        _kernels.running_calibration(p, y, n_grid, c1, c2)
    losses = _losses(p, y, log_eps)
    return RunningMetrics(
        calibration_l1=c1,
        calibration_l2=c2,
        **{name: _running_mean(v) for name, v in losses.items()},
        n_grid=n_grid,
        log_eps=log_eps,
    )


def running_regret(p, p_base, y, *, log_eps: float = 1e-4) -> RunningRegret:
    """Running average regret of forecasts ``p`` against base forecasts ``p_base``.

    Parameters
    ----------
    p : array-like of shape (T,)
        Forecasts in [0, 1] (e.g. recalibrated).
    p_base : array-like of shape (T,)
        The base forecaster's forecasts for the same steps.
    y : array-like of shape (T,)
        Binary outcomes.
    log_eps : float, default=1e-4
        Clipping for the log loss, as in :func:`running_metrics`.

    Returns
    -------
    RunningRegret

    Examples
    --------
    >>> from structcal.online import running_regret
    >>> running_regret([1.0, 0.0], [0.5, 0.5], [1, 0]).l2_loss.tolist()
    [-0.25, -0.25]
    """
    log_eps = _check_log_eps(log_eps)
    p = check_probabilities(p, "p")
    p_base = check_probabilities(p_base, "p_base")
    if p_base.shape != p.shape:
        raise ParameterError(
            f"`p_base` must have one forecast per step ({p.shape[0]}); got {p_base.shape[0]}"
        )
    y = check_outcomes(y, "y", p.shape[0])
    mine = _losses(p, y, log_eps)
    base = _losses(p_base, y, log_eps)
    return RunningRegret(
        **{name: _running_mean(mine[name] - base[name]) for name in LOSSES}, log_eps=log_eps
    )
