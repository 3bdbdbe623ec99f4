"""Algorithm 1 of Kuleshov & Liang (2015) end to end, and pooled event-calibration reports.

:class:`StructuredRecalibrator` builds the events ``I(x)`` of a recalibration set with
their features and outcomes, fits a forecaster on them (one per event kind by default, so
each kind is calibrated and hence the pool is), and then turns the events of new inputs
into calibrated probabilities. :func:`evaluate_events` measures raw and calibrated
forecasts: the Brier (l2) loss and its calibration/sharpness decomposition, pooled over
all events and per group, with the calibration-curve data of each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._estimator import ParamsMixin
from ._progress import message, progress
from ._validation import check_int, check_random_state, describe
from .events import EventKind, EventTable, MAPEvent, MarginalEvent, build_events
from .exceptions import ParameterError, ParameterTypeError

__all__ = [
    "StructuredRecalibrator",
    "CalibratedEvents",
    "EventCalibration",
    "CalibrationReport",
    "evaluate_events",
]


@dataclass(frozen=True)
class CalibratedEvents:
    """Events of a batch with their calibrated probabilities.

    Attributes
    ----------
    table : EventTable
        The events (features, outcomes if known, raw model probabilities).
    forecast : ndarray of shape (n_events,)
        Calibrated probability of each event.
    """

    table: EventTable
    forecast: np.ndarray

    def for_kind(self, name: str) -> np.ndarray:
        """Calibrated probabilities of the events of one kind, in table order."""
        if name not in self.table.kind_names:
            raise ParameterError(
                f"no event kind {name!r}; kinds: {list(self.table.kind_names)}"
            )
        k = self.table.kind_names.index(name)
        return self.forecast[self.table.kind == k]


@dataclass(frozen=True)
class EventCalibration:
    """Calibration of one set of forecasts on one group of events.

    Attributes
    ----------
    group : str
        ``"pooled"`` or the group's name (e.g. an event kind).
    forecaster : str
        Which forecasts (e.g. ``"raw"`` or ``"calibrated"``).
    n_events : int
        Number of events in the group.
    accuracy : float
        Fraction of events that hold (the base rate).
    decomposition : BrierDecomposition
        l2 loss, calibration error, sharpness, uncertainty and the bucket table
        (calibration-curve data: mean forecast, mean outcome and count per bucket).
    """

    group: str
    forecaster: str
    n_events: int
    accuracy: float
    decomposition: object

    @property
    def l2(self) -> float:
        """Brier score (mean squared error) of the forecasts."""
        return self.decomposition.brier

    @property
    def calibration_error(self) -> float:
        """``sum_B (N_B/N) (f_B - t_B)^2`` on the buckets."""
        return self.decomposition.calibration_error

    @property
    def sharpness(self) -> float:
        """``sum_B (N_B/N) (t_B - ybar)^2`` on the buckets."""
        return self.decomposition.sharpness

    @property
    def uncertainty(self) -> float:
        """``ybar (1 - ybar)``."""
        return self.decomposition.uncertainty

    @property
    def curve(self):
        """The calibration curve data (a ``ReliabilityTable``)."""
        return self.decomposition.table

    def __repr__(self) -> str:
        return (f"EventCalibration(group={self.group!r}, forecaster={self.forecaster!r}, "
                f"n_events={self.n_events}, l2={self.l2:.4g}, "
                f"calibration_error={self.calibration_error:.4g}, sharpness={self.sharpness:.4g})")

    def _repr_html_(self) -> str:
        return self.curve._repr_html_(
            caption=f"{self.group}, {self.forecaster}: {self.n_events} events, "
                    f"l2 {self.l2:.4f}, calibration error {self.calibration_error:.4f}"
        )


@dataclass(frozen=True)
class CalibrationReport:
    """Pooled and per-group calibration of several sets of forecasts of the same events.

    Attributes
    ----------
    results : tuple of EventCalibration
        One entry per (group, forecaster), pooled first.
    n_bins : int
        Number of equal-width buckets.
    """

    results: tuple
    n_bins: int

    def get(self, group: str = "pooled", forecaster: str = "calibrated") -> EventCalibration:
        """The entry of one group and one set of forecasts."""
        for r in self.results:
            if r.group == group and r.forecaster == forecaster:
                return r
        available = sorted({(r.group, r.forecaster) for r in self.results})
        raise ParameterError(f"no result for group={group!r}, forecaster={forecaster!r}; have {available}")

    @property
    def groups(self) -> list:
        """Group names, pooled first."""
        return list(dict.fromkeys(r.group for r in self.results))

    @property
    def forecasters(self) -> list:
        """Names of the sets of forecasts compared."""
        return list(dict.fromkeys(r.forecaster for r in self.results))

    def to_dict(self) -> dict:
        """``{group: {forecaster: {l2, calibration_error, sharpness, uncertainty, n_events, accuracy}}}``."""
        out: dict = {}
        for r in self.results:
            out.setdefault(str(r.group), {})[r.forecaster] = {
                "l2": r.l2,
                "calibration_error": r.calibration_error,
                "sharpness": r.sharpness,
                "uncertainty": r.uncertainty,
                "n_events": r.n_events,
                "accuracy": r.accuracy,
            }
        return out

    def format(self, scale: float = 100.0) -> str:
        """A text table; losses are multiplied by ``scale`` (x100 as in the paper)."""
        head = f"{'group':<18}{'events':>8}{'holds':>8}"
        for f in self.forecasters:
            head += f"{f + ' l2':>16}{'cal.err':>10}{'sharp':>9}"
        lines = [head]
        for g in self.groups:
            first = self.get(g, self.forecasters[0])
            line = f"{str(g):<18}{first.n_events:>8}{first.accuracy:>8.3f}"
            for f in self.forecasters:
                r = self.get(g, f)
                line += f"{r.l2 * scale:>16.2f}{r.calibration_error * scale:>10.3f}{r.sharpness * scale:>9.2f}"
            lines.append(line)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return (f"CalibrationReport(groups={self.groups}, forecasters={self.forecasters}, "
                f"n_bins={self.n_bins})")

    def _repr_html_(self, scale: float = 100.0) -> str:
        from ._html import html_table

        header = ["group", "events", "holds"]
        for f in self.forecasters:
            header += [f"{f} l2", "cal. err", "sharp"]
        rows = []
        for g in self.groups:
            first = self.get(g, self.forecasters[0])
            row = [g, first.n_events, f"{first.accuracy:.3f}"]
            for f in self.forecasters:
                r = self.get(g, f)
                row += [f"{r.l2 * scale:.2f}", f"{r.calibration_error * scale:.3f}",
                        f"{r.sharpness * scale:.2f}"]
            rows.append(row)
        return html_table(header, rows, caption="Calibration report",
                          note=f"l2 loss, calibration error and sharpness x{scale:g}; "
                               f"{self.n_bins} equal-width buckets")


def evaluate_events(table: EventTable, forecasts: dict, *, by="kind", n_bins: int = 10) -> CalibrationReport:
    """Calibration of forecasts of a table's events, pooled and per group.

    Parameters
    ----------
    table : EventTable
        Events with outcomes.
    forecasts : dict of str to array-like of shape (n_events,)
        Named forecasts of every event, e.g. ``{"raw": table.raw, "calibrated": p}``.
    by : str, array-like or None, default='kind'
        Grouping for the per-group breakdown (see :meth:`EventTable.group_codes`); None
        for pooled only.
    n_bins : int, default=10
        Number of equal-width buckets (the paper's width 0.1).

    Returns
    -------
    CalibrationReport
    """
    from .metrics import brier_decomposition

    if not isinstance(table, EventTable):
        raise ParameterTypeError(f"`table` must be an EventTable; got {describe(table)}")
    if table.outcome is None:
        raise ParameterError("the events have no outcomes: build them with y_true=")
    n_bins = check_int(n_bins, "n_bins", low=1)
    if not isinstance(forecasts, dict) or not forecasts:
        raise ParameterTypeError("`forecasts` must be a non-empty dict of name -> array")
    arrays = {}
    for name, p in forecasts.items():
        p = np.asarray(p, dtype=np.float64)
        if p.shape != (table.n_events,):
            raise ParameterError(f"forecasts {name!r} must have shape ({table.n_events},); got {p.shape}")
        if np.isnan(p).any():
            raise ParameterError(f"forecasts {name!r} contain NaN (e.g. raw probabilities of predicate events)")
        arrays[name] = p
    groups = [("pooled", np.ones(table.n_events, dtype=bool))]
    if by is not None:
        codes, names = table.group_codes(by)
        groups += [(name, codes == g) for g, name in enumerate(names)]
    results = []
    for gname, mask in groups:
        if not mask.any():
            continue
        y = table.outcome[mask]
        for fname, p in arrays.items():
            results.append(
                EventCalibration(
                    group=gname, forecaster=fname, n_events=int(mask.sum()),
                    accuracy=float(y.mean()),
                    decomposition=brier_decomposition(y, p[mask], n_bins=n_bins),
                )
            )
    return CalibrationReport(tuple(results), n_bins)


class StructuredRecalibrator(ParamsMixin):
    """Recalibrate the events of a structured model (Algorithm 1 of Kuleshov & Liang).

    Parameters
    ----------
    kinds : sequence of EventKind, optional
        The event set ``I(x)``; default ``[MAPEvent(), MarginalEvent()]``.
    features : 'all', 'table1', list or dict, default='table1'
        Features of the events (see :func:`~structcal.events.build_events`).
    forecaster : estimator, optional
        A binary probabilistic classifier fit on (features, outcomes); cloned for each
        kind. Default: a cross-validated :class:`~structcal.forecasters.KNNRegionForecaster`.
    pooled : bool, default=False
        Fit one forecaster on all events (with one indicator column per kind) instead of
        one per kind.
    lexicon : Lexicon, optional
        Admissible labelings for ``phi_mp2`` and lexicon events.
    label_set : array-like of int, optional
        Confusable labels for ``phi_mp6``.
    label_names : sequence of str, optional
        Display names of labels.
    random_state : int, numpy.random.Generator or None, default=0
        Seeds the forecasters' randomness (cross-validation folds, tie-breaking): each
        forecaster that has a ``random_state`` parameter gets a seed drawn from it. The
        default makes every fit reproducible; ``None`` gives fresh randomness (and
        leaves the forecasters' own ``random_state`` alone).
    verbose : bool, default=False
        Report the steps of ``fit`` (events, one forecaster per kind) on stderr.

    Attributes
    ----------
    forecasters_ : dict of str to estimator
        The fitted forecaster of each kind (key ``"pooled"`` when ``pooled=True``).
    feature_names_ : dict of str to tuple of str
        The feature columns each forecaster uses.
    kinds_ : list of EventKind

    Examples
    --------
    >>> rec = StructuredRecalibrator(features=["phi_mp1", "phi_mg2"])  # doctest: +SKIP
    >>> rec.fit(pred_recal, y_recal)                                    # doctest: +SKIP
    >>> rec.evaluate(pred_test, y_test).get("marginal").l2             # doctest: +SKIP
    """

    def __init__(
        self,
        kinds=None,
        *,
        features="table1",
        forecaster=None,
        pooled=False,
        lexicon=None,
        label_set=None,
        label_names=None,
        random_state=0,
        verbose=False,
    ):
        self.kinds = kinds
        self.features = features
        self.forecaster = forecaster
        self.pooled = pooled
        self.lexicon = lexicon
        self.label_set = label_set
        self.label_names = label_names
        self.random_state = random_state
        self.verbose = verbose

    def _kinds(self):
        kinds = [MAPEvent(), MarginalEvent()] if self.kinds is None else list(self.kinds)
        for k in kinds:
            if not isinstance(k, EventKind):
                raise ParameterTypeError(f"`kinds` must hold EventKind instances; got {describe(k)}")
        return kinds

    def events(self, pred, y_true=None, *, raw: bool = True) -> EventTable:
        """Build the event table of ``pred`` with this recalibrator's kinds and features."""
        return build_events(
            pred, self._kinds(), y_true=y_true, features=self.features, lexicon=self.lexicon,
            label_set=self.label_set, label_names=self.label_names, raw=raw,
        )

    def _design(self, table: EventTable, key: str):
        if key == "pooled":
            onehot = (table.kind[:, None] == np.arange(len(table.kind_names))[None, :]).astype(float)
            return np.hstack([table.X, onehot]), table.feature_names + tuple(
                f"kind={n}" for n in table.kind_names
            )
        k = table.kind_names.index(key)
        rows = table.kind == k
        cols = np.flatnonzero(table.defined[k])
        return table.X[np.ix_(rows, cols)], tuple(table.feature_names[c] for c in cols)

    def fit(self, pred, y_true, *, raw: bool = False):
        """Fit the forecasters on the events of a recalibration set.

        Parameters
        ----------
        pred : StructuredPrediction
            Predictions on the recalibration inputs (disjoint from the model's training data).
        y_true : array-like or list of array-like
            Their true labelings.
        raw : bool, default=False
            Whether to also compute raw model probabilities (needed only if a feature
            uses them).

        Returns
        -------
        self
        """
        from sklearn.base import clone

        from .forecasters import KNNRegionForecaster

        self.kinds_ = self._kinds()
        verbose = bool(self.verbose)
        message("building the events and their features ...", verbose)
        table = self.events(pred, y_true, raw=raw)
        base = KNNRegionForecaster() if self.forecaster is None else self.forecaster
        rng = None if self.random_state is None else check_random_state(self.random_state)
        self.forecasters_, self.feature_names_ = {}, {}
        keys = ["pooled"] if self.pooled else list(table.kind_names)
        for key in progress(keys, desc="fitting forecasters", verbose=verbose):
            X, names = self._design(table, key)
            y = table.outcome if key == "pooled" else table.outcome[table.kind == table.kind_names.index(key)]
            if y.shape[0] == 0:
                raise ParameterError(f"the recalibration set has no events of kind {key!r}")
            model = clone(base)
            if rng is not None and "random_state" in model.get_params(deep=False):
                model.set_params(random_state=int(rng.integers(2**31 - 1)))
            self.forecasters_[key] = model.fit(X, y)
            self.feature_names_[key] = names
        self.n_events_fit_ = table.n_events
        return self

    def predict(self, pred, y_true=None) -> CalibratedEvents:
        """Calibrated probabilities of the events of new inputs.

        Parameters
        ----------
        pred : StructuredPrediction
            Predictions on new inputs.
        y_true : array-like or list of array-like, optional
            True labelings, to fill the table's outcomes (for evaluation).

        Returns
        -------
        CalibratedEvents
        """
        if not hasattr(self, "forecasters_"):
            from .exceptions import NotFittedError

            raise NotFittedError("this StructuredRecalibrator is not fitted yet: call fit first")
        table = self.events(pred, y_true)
        forecast = np.empty(table.n_events)
        for key, model in self.forecasters_.items():
            X, names = self._design(table, key)
            if names != self.feature_names_[key]:
                raise ParameterError(f"feature columns of {key!r} differ from those seen in fit")
            rows = np.ones(table.n_events, bool) if key == "pooled" else table.kind == table.kind_names.index(key)
            proba = model.predict_proba(X)
            forecast[rows] = proba[:, 1] if proba.shape[1] == 2 else np.where(
                model.classes_[0] == True, 1.0, 0.0  # noqa: E712  (fit on one outcome)
            )
        return CalibratedEvents(table, forecast)

    def evaluate(self, pred, y_true, *, by="kind", n_bins: int = 10) -> CalibrationReport:
        """Raw vs calibrated l2 loss, calibration error and sharpness on new inputs."""
        out = self.predict(pred, y_true)
        forecasts = {"calibrated": out.forecast}
        if out.table.raw is not None and not np.isnan(out.table.raw).any():
            forecasts = {"raw": out.table.raw, **forecasts}
        return evaluate_events(out.table, forecasts, by=by, n_bins=n_bins)
