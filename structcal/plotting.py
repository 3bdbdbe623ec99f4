"""Calibration curves in the style of Kuleshov & Liang (2015), with matplotlib (optional).

matplotlib is imported only when a function here is called (``pip install structcal[plot]``).
"""

from __future__ import annotations

from ._validation import check_float, describe
from .exceptions import ParameterTypeError

__all__ = ["plot_calibration_curve", "plot_reliability_curve", "plot_report"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plotting needs matplotlib: pip install 'structcal[plot]'"
        ) from exc
    return plt


def plot_calibration_curve(curve, *, ax=None, label=None, color=None, max_marker=400.0,
                           min_count=10):
    """Plot mean outcome against mean forecast per bucket; dot area proportional to its count.

    The line joins only buckets with at least ``min_count`` events: the mean outcome of a
    bucket of a handful of events is mostly noise, so such buckets are drawn as hollow
    markers labelled with their count instead of pulling the line around.

    Parameters
    ----------
    curve : ReliabilityTable, EventCalibration or ReliabilityCurve
        The bucket table (``EventCalibration.curve``) of a set of forecasts; a
        ``ReliabilityCurve`` (from :func:`~structcal.metrics.reliability_curve`) is drawn
        by :func:`plot_reliability_curve`.
    ax : matplotlib Axes, optional
        Where to draw (a new figure by default).
    label : str, optional
        Legend label.
    color : matplotlib colour, optional
        Colour of the line and markers.
    max_marker : float, default=400.0
        Marker area of the fullest bucket.
    min_count : float, default=10
        Buckets with fewer events are not joined by the line; their count is shown.

    Returns
    -------
    matplotlib Axes
    """
    from .metrics import ReliabilityCurve

    if isinstance(curve, ReliabilityCurve):
        return plot_reliability_curve(curve, ax=ax, label=label, color=color)
    table = getattr(curve, "curve", curve)
    if not all(hasattr(table, a) for a in ("mean_forecast", "mean_outcome", "counts")):
        raise ParameterTypeError(
            "`curve` must be a ReliabilityTable, an EventCalibration or a ReliabilityCurve; "
            f"got {describe(curve)}"
        )
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    ok = table.counts > 0
    f, t, n = table.mean_forecast[ok], table.mean_outcome[ok], table.counts[ok]
    sizes = max_marker * n / n.max() if n.size else n
    full = n >= min_count
    lines = ax.plot(f[full], t[full], "-", color=color, label=label, alpha=0.8)
    colour = lines[0].get_color()
    ax.scatter(f[full], t[full], s=sizes[full], color=colour, alpha=0.6, edgecolors="none")
    ax.scatter(f[~full], t[~full], s=30, facecolors="none", edgecolors=colour, alpha=0.8)
    for x, y, c in zip(f[~full], t[~full], n[~full]):
        ax.annotate(f"n={c:g}", (x, y), textcoords="offset points", xytext=(4, 4),
                    fontsize="x-small", color=colour)
    _diagonal(ax)
    ax.set_xlabel("mean forecast")
    ax.set_ylabel("fraction of events that hold")
    return ax


def plot_reliability_curve(curve, *, ax=None, label=None, color=None, show_density=True):
    """Plot a continuous reliability curve with its bootstrap band.

    Parameters
    ----------
    curve : ReliabilityCurve
        From :func:`~structcal.metrics.reliability_curve`.
    ax : matplotlib Axes, optional
        Where to draw (a new figure by default).
    label : str, optional
        Legend label of the estimate.
    color : matplotlib colour, optional
        Colour of the estimate and its band.
    show_density : bool, default=True
        Shade the density of the scores along the bottom (where the curve is supported).

    Returns
    -------
    matplotlib Axes
    """
    import numpy as np

    from .metrics import ReliabilityCurve

    if not isinstance(curve, ReliabilityCurve):
        raise ParameterTypeError(f"`curve` must be a ReliabilityCurve; got {describe(curve)}")
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    lines = ax.plot(curve.grid, curve.estimate, "-", color=color, label=label)
    colour = lines[0].get_color()
    band = np.isfinite(curve.low) & np.isfinite(curve.high)
    ax.fill_between(curve.grid, np.where(band, curve.low, np.nan), np.where(band, curve.high, np.nan),
                    color=colour, alpha=0.25, linewidth=0,
                    label=f"{curve.level:.0%} band ({curve.n_resamples} resamples)")
    if show_density and np.nanmax(curve.density, initial=0.0) > 0:
        height = 0.15 * curve.density / np.nanmax(curve.density)
        ax.fill_between(curve.grid, 0.0, height, color="grey", alpha=0.2, linewidth=0,
                        label="density of scores")
    _diagonal(ax)
    ax.set_xlabel("score")
    ax.set_ylabel("P(event holds | score)")
    return ax


def _diagonal(ax):
    ax.plot([0, 1], [0, 1], ":", color="grey", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")


def plot_report(report, group: str = "pooled", *, ax=None, scale: float = 100.0):
    """Calibration curves of every set of forecasts of one group of a ``CalibrationReport``.

    The legend gives each forecaster's l2 loss times ``scale`` (as in the paper's figures).

    Returns
    -------
    matplotlib Axes
    """
    from .recalibration import CalibrationReport

    if not isinstance(report, CalibrationReport):
        raise ParameterTypeError(f"`report` must be a CalibrationReport (from "
                                 f"StructuredRecalibrator.evaluate); got {describe(report)}")
    scale = check_float(scale, "scale", low=0.0, low_inclusive=False)
    # (an unknown group is named before anything is drawn)
    results = {name: report.get(group, name) for name in report.forecasters}
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    for name, r in results.items():
        plot_calibration_curve(r, ax=ax, label=f"{name} ({scale * r.l2:.1f})")
    ax.set_title(f"{group}: {results[report.forecasters[0]].n_events} events")
    ax.legend(loc="upper left", fontsize="small")
    return ax
