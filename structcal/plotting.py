"""Calibration curves in the style of Kuleshov & Liang (2015), with matplotlib (optional).

matplotlib is imported only when a function here is called (``pip install structcal[plot]``).
"""

from __future__ import annotations

from ._validation import describe
from .exceptions import ParameterTypeError

__all__ = ["plot_calibration_curve", "plot_report"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plotting needs matplotlib: pip install 'structcal[plot]'"
        ) from exc
    return plt


def plot_calibration_curve(curve, *, ax=None, label=None, color=None, max_marker=400.0):
    """Plot mean outcome against mean forecast per bucket; dot area proportional to its count.

    Parameters
    ----------
    curve : ReliabilityTable or EventCalibration
        The bucket table (``EventCalibration.curve``) of a set of forecasts.
    ax : matplotlib Axes, optional
        Where to draw (a new figure by default).
    label : str, optional
        Legend label.
    color : matplotlib colour, optional
    max_marker : float, default=400.0
        Marker area of the fullest bucket.

    Returns
    -------
    matplotlib Axes
    """
    table = getattr(curve, "curve", curve)
    if not all(hasattr(table, a) for a in ("mean_forecast", "mean_outcome", "counts")):
        raise ParameterTypeError(
            f"`curve` must be a ReliabilityTable or an EventCalibration; got {describe(curve)}"
        )
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    ok = table.counts > 0
    f, t, n = table.mean_forecast[ok], table.mean_outcome[ok], table.counts[ok]
    sizes = max_marker * n / n.max() if n.size else n
    lines = ax.plot(f, t, "-", color=color, label=label, alpha=0.8)
    ax.scatter(f, t, s=sizes, color=lines[0].get_color(), alpha=0.6, edgecolors="none")
    ax.plot([0, 1], [0, 1], ":", color="grey", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean forecast")
    ax.set_ylabel("fraction of events that hold")
    ax.set_aspect("equal")
    return ax


def plot_report(report, group: str = "pooled", *, ax=None, scale: float = 100.0):
    """Calibration curves of every set of forecasts of one group of a ``CalibrationReport``.

    The legend gives each forecaster's l2 loss times ``scale`` (as in the paper's figures).

    Returns
    -------
    matplotlib Axes
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    for name in report.forecasters:
        r = report.get(group, name)
        plot_calibration_curve(r, ax=ax, label=f"{name} ({scale * r.l2:.1f})")
    ax.set_title(f"{group}: {report.get(group, report.forecasters[0]).n_events} events")
    ax.legend(loc="upper left", fontsize="small")
    return ax
