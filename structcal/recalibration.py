"""Algorithm 1 of Kuleshov & Liang (2015) end to end, and pooled event-calibration reports.

:class:`StructuredRecalibrator` builds the events ``I(x)`` of a recalibration set with
their features and outcomes, fits a recalibration map on them (one per event kind by
default, so each kind is calibrated and hence the pool is), and then turns the events of
new inputs into calibrated probabilities. Per kind it chooses, by cross-validated Brier
score, among the model's raw probability, isotonic regression on it and a region
forecaster on the features, and it warns when new inputs look unlike the recalibration
set (:class:`ShiftTest`). :func:`evaluate_events` measures raw and calibrated forecasts:
the Brier (l2) loss and its calibration/sharpness decomposition, pooled over all events
and per group, with the calibration-curve data of each.
"""

from __future__ import annotations

import functools

import warnings
from dataclasses import dataclass, field

import numpy as np

from ._estimator import ParamsMixin
from ._progress import message, progress
from ._validation import check_float, check_int, check_option, check_random_state, describe
from .events import EventKind, EventTable, MAPEvent, MarginalEvent, build_events
from .exceptions import (
    DistributionShiftWarning,
    ParameterError,
    ParameterTypeError,
    SingleGroupWarning,
)
from .io import SaveLoadMixin

__all__ = [
    "StructuredRecalibrator",
    "CalibratedEvents",
    "EventCalibration",
    "CalibrationReport",
    "ShiftTest",
    "evaluate_events",
    "METHODS",
]

#: The recalibration methods :class:`StructuredRecalibrator` chooses among, simplest first
#: (ties in cross-validated Brier score go to the simpler one).
METHODS = ("raw", "isotonic", "forecaster")



@dataclass(frozen=True)
class CalibratedEvents:
    """Events of a batch with their calibrated probabilities.

    Attributes
    ----------
    table : EventTable
        The events (features, outcomes if known, raw model probabilities).
    forecast : ndarray of shape (n_events,)
        Calibrated probability of each event.
    fallback : dict of str to str, optional
        The kinds whose fitted map was not used because the batch looked unlike the
        recalibration data, with the map used instead: ``'adapted'`` (the map refit on the
        recalibration events weighted toward the batch, ``shift_policy='adapt'``),
        ``'isotonic'`` (isotonic regression on the raw probability, for a forecaster whose
        features shifted but whose raw probability did not) or ``'raw'``; empty when none.
    shifted : tuple of str
        The kinds the shift test flagged in this batch (any column: raw probability or
        feature).
    maps : callable, optional
        ``maps(table)``: forecasts of other events by the maps this batch was forecast
        with (the fitted maps, or those the shift decision put in their place).
    adaptation : dict of str to dict
        For each kind the shift test flagged under ``shift_policy='adapt'``: ``map``
        (what its forecasts come from), ``effective_sample_size`` and
        ``effective_groups`` of the weighted recalibration events, ``n_reference``,
        ``auc`` of the classifier that told the batch from them, and ``reason`` when the
        weights collapsed and the kind fell back.
    """

    table: EventTable
    forecast: np.ndarray
    fallback: dict = None
    shifted: tuple = ()
    adaptation: dict = None
    maps: object = field(default=None, repr=False, compare=False)

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
    l2_interval : (float, float) or None
        95% bootstrap interval of the Brier score, whole groups (inputs, or the groups
        given) resampled; None when not computed.
    decomposition : BrierDecomposition
        l2 loss, calibration error, sharpness, uncertainty and the bucket table
        (calibration-curve data: mean forecast, mean outcome and count per bucket).
    """

    group: str
    forecaster: str
    n_events: int
    accuracy: float
    decomposition: object
    l2_interval: tuple | None = None

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
                "l2_interval": None if r.l2_interval is None else list(r.l2_interval),
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


def evaluate_events(table: EventTable, forecasts: dict, *, by="kind", n_bins: int = 10,
                    groups=None, n_resamples: int = 0, random_state=0) -> CalibrationReport:
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
    groups : array-like of shape (n_inputs,), optional
        Group of each input: the bootstrap resamples whole groups (default: inputs).
    n_resamples : int, default=0
        Bootstrap resamples for the Brier intervals (0: none).
    random_state : int or Generator, default=0

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
        from ._validation import as_numeric

        p = as_numeric(p, f"forecasts[{name!r}]")
        if p.shape != (table.n_events,):
            raise ParameterError(f"`forecasts` {name!r} must have shape ({table.n_events},) "
                                 f"(one per event of the table); got {p.shape}")
        if np.isnan(p).any():
            raise ParameterError(f"`forecasts` {name!r} contain NaN (e.g. raw probabilities of "
                                 "predicate events)")
        if p.size and (p.min() < 0.0 or p.max() > 1.0):
            raise ParameterError(f"`forecasts` {name!r} must be probabilities in [0, 1]; got "
                                 f"values in [{p.min():.4g}, {p.max():.4g}]")
        arrays[name] = p
    subsets = [("pooled", np.ones(table.n_events, dtype=bool))]
    if by is not None:
        codes, names = table.group_codes(by)
        subsets += [(name, codes == g) for g, name in enumerate(names)]
    counts = None
    n_resamples = check_int(n_resamples, "n_resamples", low=0)
    if n_resamples and table.n_events:
        n_items = max(int(getattr(table, "n_items", 0) or 0), int(table.item.max()) + 1)
        item_group = _item_groups(groups, n_items)
        G = int(item_group.max()) + 1 if n_items else 0
        rng = check_random_state(random_state)
        counts = rng.multinomial(G, np.full(G, 1.0 / max(G, 1)), size=n_resamples)
        counts = counts.astype(np.float64)
        event_group = item_group[table.item]
    results = []
    for gname, mask in subsets:
        if not mask.any():
            continue
        y = table.outcome[mask]
        if counts is not None:  # a resample weights each group by its multiplicity
            g = event_group[mask]
            tot = counts @ np.bincount(g, minlength=G).astype(np.float64)
            ok = tot > 0
        for fname, p in arrays.items():
            interval = None
            if counts is not None:
                se = np.bincount(g, weights=(p[mask] - y) ** 2, minlength=G)
                boot = (counts[ok] @ se) / tot[ok]
                interval = (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975)))
            results.append(
                EventCalibration(
                    group=gname, forecaster=fname, n_events=int(mask.sum()),
                    accuracy=float(y.mean()),
                    decomposition=brier_decomposition(y, p[mask], n_bins=n_bins),
                    l2_interval=interval,
                )
            )
    return CalibrationReport(tuple(results), n_bins)


@dataclass(frozen=True)
class ShiftTest:
    """Two-sample tests of new events against the recalibration events, respecting groups.

    Per event kind (or ``"pooled"``), the Kolmogorov-Smirnov distance of each column (the
    raw probability and each feature) between the recalibration sample and the new
    events, with a permutation p-value that moves whole groups (documents, images, or the
    inputs themselves) between the two samples (:func:`structcal.shift.group_shift_test`):
    adjusted over the columns of a kind (max-T) and, Bonferroni, over the kinds.

    Attributes
    ----------
    key : tuple of str
        Event kind (or ``"pooled"``) of each test.
    column : tuple of str
        Column tested (``"raw"`` or a feature name).
    statistic : ndarray of shape (n_tests,)
        KS statistic (largest gap between the two empirical distribution functions).
    pvalue : ndarray of shape (n_tests,)
        Adjusted p-value: permutation max-T over the kind's columns, times the number of
        kinds tested (at most 1).
    n_reference, n_new : ndarray of shape (n_tests,), int64
        Number of groups in the recalibration sample and in the new batch.
    alpha : float
        Family-wise level: a test with ``pvalue < alpha`` flags a shift.
    """

    key: tuple
    column: tuple
    statistic: np.ndarray
    pvalue: np.ndarray
    n_reference: np.ndarray
    n_new: np.ndarray
    alpha: float

    @property
    def shifted(self) -> bool:
        """Whether any column differs at the family-wise level ``alpha``."""
        return bool((self.pvalue < self.alpha).any())

    def kind_shifted(self, key, columns) -> bool:
        """Whether any of ``columns`` of kind ``key`` differs at level ``alpha``."""
        want = set(columns)
        return any(k == key and c in want and p < self.alpha
                   for k, c, p in zip(self.key, self.column, self.pvalue))

    def flagged(self) -> list:
        """``(key, column, statistic, pvalue)`` of the flagged tests, most significant first."""
        idx = np.flatnonzero(self.pvalue < self.alpha)
        idx = idx[np.lexsort((-self.statistic[idx], self.pvalue[idx]))]
        return [(self.key[i], self.column[i], float(self.statistic[i]), float(self.pvalue[i])) for i in idx]

    def format(self) -> str:
        """A text table of the tests."""
        lines = [f"{'kind':<18}{'column':<24}{'KS':>7}{'p (adj.)':>11}{'groups ref':>11}"
                 f"{'groups new':>11}"]
        for i in range(len(self.key)):
            flag = "  *" if self.pvalue[i] < self.alpha else ""
            lines.append(
                f"{self.key[i]:<18}{self.column[i]:<24}{self.statistic[i]:>7.3f}"
                f"{self.pvalue[i]:>11.2g}{self.n_reference[i]:>11}{self.n_new[i]:>11}{flag}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _shift_sample(groups: np.ndarray, rng, cap: int) -> np.ndarray:
    """Rows of at most ``cap`` events drawn at random (in order), for the shift tests."""
    n = groups.shape[0]
    if n <= cap:
        return np.arange(n)
    return np.sort(rng.choice(n, size=cap, replace=False))


def _one_event_per_item(items: np.ndarray, rng, cap: int) -> np.ndarray:
    """Rows of one event drawn at random per input (at most ``cap`` inputs, drawn at random)."""
    order = rng.permutation(items.shape[0])
    _, first = np.unique(items[order], return_index=True)
    rows = order[first]
    if rows.shape[0] > cap:
        rows = rng.choice(rows, size=cap, replace=False)
    return np.sort(rows)


def _item_folds(items: np.ndarray, n_folds: int, rng) -> np.ndarray:
    """Fold of each event: groups (``items`` holds each event's group, e.g. its input or
    document) dealt at random into ``n_folds`` folds of equal size."""
    ids, inverse = np.unique(items, return_inverse=True)
    return (rng.permutation(ids.shape[0]) % n_folds)[inverse]


def _item_groups(groups, n_items: int) -> np.ndarray:
    """Group code (0..G-1) of each input; each input its own group when ``groups`` is None."""
    if groups is None:
        return np.arange(n_items, dtype=np.int64)
    if isinstance(groups, (str, bytes)) or not hasattr(groups, "__len__"):
        raise ParameterTypeError(
            f"`groups` must be a sequence with one group id per input; got {describe(groups)}"
        )
    arr = np.asarray(groups)
    if arr.ndim != 1 or arr.shape[0] != n_items:
        raise ParameterError(
            f"`groups` must have one group id per input: shape ({n_items},); got shape "
            f"{arr.shape}"
        )
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ParameterError("`groups` must not contain NaN or infinite ids")
    if arr.dtype == object:
        try:
            arr = arr.astype(str)
        except (TypeError, ValueError):
            raise ParameterTypeError("`groups` must hold numbers or strings") from None
    return np.unique(arr, return_inverse=True)[1].astype(np.int64)


#: without groups, the shift test's units are this many blocks of consecutive inputs
SHIFT_BLOCKS = 30


def _shift_units(groups, n_items: int) -> np.ndarray:
    """The units the shift test permutes: the groups when given, else blocks of
    consecutive inputs (neighbouring inputs, a document's sentences or an image's tiles
    in the order they came, tend to be alike; treating each as its own unit makes
    ordinary differences between documents look like shift)."""
    if groups is not None:
        return _item_groups(groups, n_items)
    n_blocks = min(SHIFT_BLOCKS, max(n_items, 1))
    return (np.arange(n_items, dtype=np.int64) * n_blocks) // max(n_items, 1)


def _support_bounds(n: int, prior: float) -> tuple:
    """The most extreme forecasts ``n`` recalibration events can support: the posterior
    means of a frequency after ``n`` agreeing outcomes under a Beta(prior, prior) prior."""
    if prior <= 0:
        return 0.0, 1.0
    lo = prior / (n + 2.0 * prior)
    return lo, 1.0 - lo


def _ks_pvalues(ref: np.ndarray, new: np.ndarray):
    """KS statistic and p-value of each column (exact for small samples).

    The same statistic and p-values as ``scipy.stats.ks_2samp`` (two-sided): exact when
    ``n * m <= 10,000``, else ``kstwo.sf(D, round(n m / (n + m)))`` for all columns in one
    call (a per-column ``ks_2samp`` costs about a millisecond of overhead each).
    """
    from scipy.stats import kstwo

    n, m = ref.shape[0], new.shape[0]
    n_cols = ref.shape[1]
    stat, p = np.zeros(n_cols), np.ones(n_cols)
    if n == 0 or m == 0:
        return stat, p
    ref_sorted, new_sorted = np.sort(ref, axis=0), np.sort(new, axis=0)
    varies = np.zeros(n_cols, dtype=bool)
    for c in range(n_cols):
        a, b = ref_sorted[:, c], new_sorted[:, c]
        pooled = np.concatenate([a, b])
        if pooled.min() == pooled.max():
            continue  # one value in both samples: identical distributions
        varies[c] = True
        diff = np.searchsorted(a, pooled, side="right") / n - np.searchsorted(b, pooled, side="right") / m
        stat[c] = max(float(diff.max()), float(np.clip(-diff.min(), 0.0, 1.0)))
    if not varies.any():
        return stat, p
    if n * m <= 10_000:
        from scipy.stats import ks_2samp

        for c in np.flatnonzero(varies):
            with warnings.catch_warnings():
                # scipy falls back to the asymptotic p-value when the exact one fails
                warnings.simplefilter("ignore", RuntimeWarning)
                p[c] = ks_2samp(ref[:, c], new[:, c], method="exact").pvalue
    else:
        en = np.round(float(n) * m / (n + m))
        p[varies] = np.clip(kstwo.sf(stat[varies], en), 0.0, 1.0)
    return stat, p


def _stable_seed(random_state, key: str) -> int:
    """A seed from the recalibrator's ``random_state`` and a kind's name, the same in every
    process (``hash`` of a str is not)."""
    import zlib

    base = random_state if isinstance(random_state, (int, np.integer)) else 0
    return int(np.random.default_rng([zlib.crc32(key.encode()), int(base) % (2**32)])
               .integers(2**31 - 1))


def _positive_column(model, X) -> np.ndarray:
    """Probability of a positive outcome from a fitted binary classifier (one class allowed)."""
    proba = model.predict_proba(X)
    if proba.shape[1] == 2:
        return proba[:, 1]
    return np.full(proba.shape[0], 1.0 if bool(model.classes_[0]) else 0.0)


def _kept_form(model):
    """What a recalibrator keeps of a fitted forecaster: structcal's region forecasters as
    their maps (arrays, evaluated without scikit-learn), any other model (a subclass
    included, which may forecast otherwise) as it is."""
    from .forecasters import KNNRegionForecaster, TreeRegionForecaster  # fitted: imported

    return model.to_map() if type(model) in (KNNRegionForecaster, TreeRegionForecaster) else model


def _fit_isotonic(r: np.ndarray, y: np.ndarray, prior: float = 0.0, weights=None):
    """Isotonic regression of the outcome on the raw probability (None if one outcome
    only): an :class:`~structcal.calibrators.IsotonicMap`, evaluated without scikit-learn."""
    from .calibrators._isotonic import IsotonicMap

    if y.all() or not y.any():
        return None
    return IsotonicMap(prior=prior).fit(r, y, sample_weight=weights)


def _fit_with_groups(model, X, y, groups):
    """``model.fit(X, y, groups=groups)`` if its ``fit`` takes groups, else ``fit(X, y)``."""
    import inspect

    try:
        takes = "groups" in inspect.signature(model.fit).parameters
    except (TypeError, ValueError):
        takes = False
    return model.fit(X, y, groups=groups) if takes else model.fit(X, y)


def _clustered_se(d: np.ndarray, items: np.ndarray) -> float:
    """Standard error of the mean of ``d``, clustered by input (events of an input are dependent).

    The sandwich estimator of a ratio mean: with ``D_g`` the sum of ``d`` over the events
    of input ``g`` (``n_g`` of them, ``N`` in all, ``G`` inputs),
    ``sqrt(G / (G - 1) * sum_g (D_g - n_g * mean(d))**2) / N``; 0 with one input.
    """
    _, inv = np.unique(items, return_inverse=True)
    g = int(inv.max()) + 1 if inv.shape[0] else 0
    if g < 2:
        return 0.0
    sums = np.bincount(inv, weights=d, minlength=g)
    counts = np.bincount(inv, minlength=g)
    resid = sums - counts * float(np.mean(d))
    return float(np.sqrt(g / (g - 1) * np.sum(resid**2)) / d.shape[0])


#: Below this many recalibration events of a kind, ``method='auto'`` takes the raw
#: probability as its reference (see the Notes of :class:`StructuredRecalibrator`).
SMALL_KIND_EVENTS = 100


def _one_se_choice(losses: dict, items: np.ndarray, n_se, small=None) -> str:
    """The method picked from per-event held-out losses by the rule of ``method='auto'``.

    Isotonic regression is the reference; the forecaster replaces it if its mean loss is
    lower by more than ``n_se[0]`` clustered standard errors of the paired difference; the
    raw probability then replaces the current choice if lower by more than ``n_se[1]``.
    A single number serves both steps. With fewer than ``small`` (default
    :data:`SMALL_KIND_EVENTS`) events the raw probability is the reference instead:
    isotonic regression replaces it only if lower by more than ``n_se[1]``, then the
    forecaster the current choice by ``n_se[0]``.
    """
    n_forecaster, n_raw = _se_margins(n_se)
    small = SMALL_KIND_EVENTS if small is None else small

    def beats(a, b, n):
        d = losses[a] - losses[b]
        return float(np.mean(d)) < -n * _clustered_se(d, items)

    if losses["raw"].shape[0] < small:
        chosen = "isotonic" if beats("isotonic", "raw", n_raw) else "raw"
        return "forecaster" if beats("forecaster", chosen, n_forecaster) else chosen
    chosen = "forecaster" if beats("forecaster", "isotonic", n_forecaster) else "isotonic"
    return "raw" if beats("raw", chosen, n_raw) else chosen


def _se_margins(n_se) -> tuple:
    """``n_se`` (a number, or a pair: forecaster step, raw step) as two checked floats."""
    if isinstance(n_se, (tuple, list)):
        if len(n_se) != 2:
            raise ParameterError(
                f"`n_se` must be a number or a pair (forecaster, raw) of numbers; got {len(n_se)} values"
            )
        return tuple(check_float(v, "n_se", low=0.0) for v in n_se)
    v = check_float(n_se, "n_se", low=0.0)
    return v, v


class StructuredRecalibrator(SaveLoadMixin, ParamsMixin):
    """Recalibrate the events of a structured model (Algorithm 1 of Kuleshov & Liang).

    With no arguments it works on any :class:`~structcal.StructuredPrediction` (chain or
    graph, with or without unstructured scores or a lexicon): the events are the MAP and
    marginal events, described by every Table 1 feature the inputs support plus the
    model's raw probability (``features='auto'``), and for each event kind the
    recalibration map is chosen by cross-validation (below), so that recalibration does
    not make a reasonably calibrated model worse.

    Parameters
    ----------
    kinds : sequence of EventKind, optional
        The event set ``I(x)``; default ``[MAPEvent(), MarginalEvent()]``.
    features : 'auto', 'table1', 'all', list or dict, default='auto'
        Features of the events (see :func:`~structcal.events.build_events`); ``'auto'``
        keeps every Table 1 feature whose requirements the inputs meet, plus the raw
        probability where the kind has one.
    forecaster : estimator, optional
        A binary probabilistic classifier fit on (features, outcomes); cloned for each
        kind (its ``random_state``, if it has one left at None, is seeded from
        ``random_state``). Default: a cross-validated
        :class:`~structcal.forecasters.KNNRegionForecaster`.
    method : {'auto', 'raw', 'isotonic', 'forecaster'} or dict, default='auto'
        The recalibration map of each kind: ``'raw'`` keeps the model's probability as it
        is, ``'isotonic'`` fits isotonic regression on it
        (:class:`~structcal.calibrators.IsotonicMap`, arrays evaluated without
        scikit-learn), ``'forecaster'`` fits
        ``forecaster`` on the features (the paper's Algorithm 1), and ``'auto'`` picks one
        by cross-validated Brier score with a standard-error rule (see Notes: isotonic
        unless another candidate is better by more than ``n_se`` standard errors). Kinds
        without a raw probability (e.g. predicates) have only the forecaster. A dict maps
        kind names (or ``"pooled"``) to one of these.
    cv : int, default=5
        Folds of the cross-validation behind ``method='auto'``. Folds are drawn by group
        (all events of a group fall in the same fold; see ``groups`` in :meth:`fit`; by
        default each input is its own group, and the events of one input are never
        split), at random with ``random_state``.
    n_se : float or (float, float), default=(2.0, 1.0)
        How many standard errors of the paired held-out loss difference a candidate must
        win by under ``method='auto'``: the forecaster to displace the reference
        (isotonic), then the raw probability to displace that choice (see Notes). One
        number serves both steps; 0 keeps the candidate with the lowest cross-validated
        Brier score (isotonic on ties).
    pooled : bool, default=False
        Fit one map on all events (with one indicator column per kind) instead of one per
        kind.
    prior : float, default=0.5
        Pseudo-count added to each outcome of every region (k-NN) and step (isotonic) of
        the fitted maps: a region of ``n`` events of which ``s`` hold forecasts ``(s +
        prior) / (n + 2 prior)``, the posterior mean of its frequency under a
        Beta(prior, prior) prior (0.5: Jeffreys' prior). No forecast is then more extreme
        than ``n`` agreeing outcomes support, and none is exactly 0 or 1 (which would
        give an infinite log loss, and be wrong whenever such an event does, or does not,
        happen). The raw probability and a user's ``forecaster`` are kept within the same
        bounds for ``n`` = the number of recalibration events of the kind. 0 gives the
        paper's plain frequencies.
    lexicon : Lexicon, optional
        Admissible labelings for ``phi_mp2`` and lexicon events.
    label_set : array-like of int, optional
        Confusable labels for ``phi_mp6``.
    label_names : sequence of str, optional
        Display names of labels.
    shift_check : bool, default=True
        At predict time, test whether the new inputs' raw probabilities and features are
        distributed like the recalibration set's (a permutation test that moves whole
        groups, :meth:`shift_test`; without groups, blocks of consecutive inputs, so that
        the sentences of one document, in their order, do not count as independent), and
        issue a
        :class:`~structcal.exceptions.DistributionShiftWarning` if not.
    shift_alpha : float, default=0.05
        Family-wise level of those tests (over the columns of a kind by permutation, over
        kinds by Bonferroni): on data like the recalibration data, at most this share of
        batches is flagged. Batches of fewer than 5 groups (inputs, when no groups are
        given) are not tested at predict time: a flag on one to four documents says
        little about a distribution, and would make the forecasts of a service that
        predicts an input at a time flip between map and raw from call to call.
        :meth:`shift_test` tests any batch.
    shift_policy : {'adapt', 'fallback', 'warn'}, default='adapt'
        What a flagged batch changes. ``'adapt'``: every kind with a flagged column (its
        raw probability or any feature, whichever the map reads) gets its map refit on the
        recalibration events weighted by the density ratio of the batch to them
        (:func:`structcal.shift.density_ratio`, over all the kind's columns): isotonic
        regression of the outcome on the raw probability with those weights, flattened
        to the power ``ADAPT_WEIGHT_POWER`` (0.5; Shimodaira, 2000: less variance from a
        few heavy events for some bias back toward the recalibration data). Where the
        weights collapse (effective number of groups below ``MIN_EFFECTIVE_GROUPS`` or
        ``MIN_EFFECTIVE_SHARE`` of the groups, or too much of the batch outside the
        recalibration data, coverage below ``MIN_COVERAGE``) the kind falls back to the
        simplest map whose input did not shift (a forecaster to isotonic regression on the
        raw probability if that did not shift), else to the model's raw probability; the
        batch's ``CalibratedEvents.adaptation`` says which kinds did and why.
        ``'fallback'`` never refits: it replaces the fitted map of the kinds whose map
        reads a shifted column by the simplest map whose input did not shift (the
        forecaster, which reads the features, by isotonic regression on the raw
        probability if that did not shift; isotonic regression by the model's raw
        probability). ``'warn'`` only warns. See Notes: the fitted map is a correction
        learnt on the recalibration data, and it is the part that may not transfer.
    random_state : int, numpy.random.Generator or None, default=0
        Seeds the cross-validation folds, the forecasters and the shift tests' samples.
        The default makes every fit reproducible (same inputs, same outputs); ``None``
        gives fresh randomness.
    verbose : bool, default=False
        Report the steps of ``fit`` (events, one forecaster per kind) on stderr.

    Attributes
    ----------
    selection_ : dict of str to dict
        For each kind (or ``"pooled"``): ``method`` (the one used), ``cv_brier`` (mean
        held-out Brier score of each candidate, when ``method='auto'`` compared several),
        ``cv_brier_se`` (standard error of each candidate's paired held-out Brier
        difference from the chosen one, clustered by group; 0 for the chosen one),
        ``n_events``, ``n_items`` and ``n_groups`` of the recalibration set.
        :meth:`format_selection` prints it as a table.
    forecasters_ : dict of str to estimator
        The fitted map of each kind whose method is ``'isotonic'`` (an
        ``IsotonicMap`` of the raw probability) or ``'forecaster'`` (the region
        forecaster on the features: structcal's region forecasters are kept as their
        fitted arrays, a :class:`~structcal.forecasters.KNNRegionMap` or
        :class:`~structcal.forecasters.TreeRegionMap`, any other forecaster as fitted);
        kinds kept ``'raw'`` have no entry. Loading a saved recalibrator whose maps are
        all of these kinds and forecasting imports no scikit-learn.
    fallback_maps_ : dict of str to IsotonicMap
        For each kind whose method is ``'forecaster'`` and whose events have a raw
        probability: isotonic regression of the outcome on it, the map a batch falls back
        to when the forecaster's features shifted but the raw probability did not.
    feature_names_ : dict of str to tuple of str
        The feature columns of each kind.
    shift_reference_ : dict of str to ndarray of shape (n_sample, n_columns)
        Recalibration events (at most 5,000, drawn at random): the raw probability (if
        the kind has one) and the features, the reference sample of the shift tests.
    shift_groups_ : dict of str to ndarray of shape (n_sample,)
        The group of each of those events.
    shift_columns_ : dict of str to list of str
        Names of the columns of ``shift_reference_``.
    kinds_ : list of EventKind
    n_events_fit_ : int

    Notes
    -----
    *Selection.* The raw probability needs no fitting, so its score is its Brier score on
    all events; isotonic regression and the forecaster are fit on ``cv - 1`` folds and
    scored on the held-out one (the forecaster's own choice of region size is nested
    inside). Every event thus has a held-out squared error under each candidate, and two
    candidates are compared by the mean of the paired per-event differences, whose
    standard error is clustered by input (events of one input share its features and
    errors). The rule, a one-standard-error rule with a reference:

    1. Isotonic regression on the raw probability is the reference: of the candidates
       that are calibrated by construction on the data they are fit on, it has the least
       freedom (one monotone map of one number, ranking kept).
    2. The forecaster, which can also re-rank events by their features, replaces it if
       its mean held-out Brier score is lower by more than ``n_se[0]`` (default 2)
       standard errors. The margin is wider than one standard error because the
       standard error treats the fitted maps as fixed, and the forecaster's held-out
       score moves more than that with the data it is fit on (its region size is tuned
       by an inner cross-validation; a retrained tagger that differs only in its label
       order moved it by up to 0.1 Brier x100 on WNUT-17). Measured in
       ``benchmarks/results/selection_rule_study.txt`` (``benchmarks/selection_rule_study.py``):
       over 104 settings (WNUT-17: 8 outer cross-fit splits x 2 taggers x 4 event kinds;
       OCR letters: 10 draws x 2 base models x 2 forecasters) the rule's held-out Brier
       score was worse than the better of raw and isotonic beyond a 95% bootstrap
       interval in 2 settings at 1 standard error, 1 at 1.5 and none at 2; the price of
       2 is the forecaster kept less often where it does win (OCR linear SVM with k-NN:
       5 of 10 draws instead of 9, 0.19 instead of 0.36 Brier x100 below isotonic).
    3. The raw probability replaces the choice so far if it is lower by more than
       ``n_se[1]`` (default 1) standard errors. It needs no fitting, but keeping it
       asserts that the model is already calibrated, so it must show it: on large sets
       where the model is calibrated it does (the isotonic map's fitting noise costs more
       than the standard error), on small or miscalibrated ones it does not. A wider
       margin here costs where the model is calibrated (the study's synthetic calibrated
       model, 300 events of 150 inputs: regret 0.29, 0.38 and 0.51 Brier x100 against
       the best candidate at 1, 1.5 and 2 standard errors).
    4. A kind with fewer than ``SMALL_KIND_EVENTS`` (100) recalibration events starts
       from the raw probability instead: isotonic regression replaces it only if lower
       by more than ``n_se[1]`` standard errors, then the forecaster the choice so far by
       ``n_se[0]``. On a few dozen events the isotonic map is mostly fitting noise and the
       cross-validation can rarely tell it from the raw probability, so the rule keeps
       the map that asserts nothing. Measured in
       ``benchmarks/results/small_sample_study.json`` (``benchmarks/small_sample_study.py``:
       20 random sets of whole groups of 30, 60 and 90 events from 12 source -> target
       settings: OCR, WNUT-17, GUM, synthetic): the recalibrated probability was worse
       than the raw one on the target in 8% of the draws against 26% with isotonic as the
       reference. The price is paid where the raw probability is far from calibrated
       and 30-90 events show it only sometimes (WNUT-17 entities, GUM maps, synthetic
       T=2): better beyond a 95% interval in 12 of 36 cells, worse in 12, +0.27 Brier
       x100 on average (up to +4.4 on WNUT-17 entities).

    Differences within the noise of the cross-validation thus never pick the more
    flexible map (whose choice on small sets is mostly noise, and whose calibration is
    less certain), nor the uncorrected model. ``n_se=0`` gives the plain lowest-score
    choice. The chosen map is then fit on all events. The forecaster candidate is the
    expensive one: about ``cv + 1`` forecaster fits per kind.

    *Shift test.* Events of one input are not independent (the marginal events of a
    sentence share its length, its MAP margin, ...), and neither are the inputs of one
    group (a document's sentences repeat its entities): a test that treats them as
    independent flags ordinary differences between documents as shift. Each column gets
    its Kolmogorov-Smirnov distance between the recalibration sample and the new events
    (cheap, no tuning, and it sees a change of spread as well as of location), and the
    p-values come from permuting whole groups between the two samples
    (:func:`structcal.shift.group_shift_test`): valid whatever the dependence within a
    group, adjusted over a kind's columns (max-T) and over kinds (Bonferroni). Measured
    false-alarm rate on random splits of documents and images, and power on genre and
    dev-to-test shifts: ``benchmarks/shift_study.py``.

    *What a shifted batch changes.* The fitted map is a correction learnt on the
    recalibration data; under shift it is the part that may not transfer (a model less
    overconfident on the new data than on the old is made worse by a map that sharpens
    it). By default (``shift_policy='adapt'``) a kind whose map reads a flagged column
    gets, for this batch, an isotonic map refit on the recalibration events weighted
    toward the batch: if only the mix of events changed (covariate shift), the weighted
    events are a sample like the batch's, and the refit map is right for it. A change of
    the outcome given the events (concept shift) cannot be seen without the batch's
    outcomes, and no weighting corrects it. With ``shift_policy='fallback'`` (and under
    ``'adapt'`` where the weights collapse) a kind whose map reads a flagged column falls
    back, for this batch, to the simplest map whose input did not shift: a forecaster
    (whose neighbourhoods in feature space are what a shift of the features moves) to
    isotonic regression on the raw probability, if the raw probability's distribution did
    not shift (a one-dimensional calibration map stays right when only the mix of
    events changes); otherwise, and for isotonic regression, to the model's raw
    probability. Measured on 112 shift settings: ``benchmarks/shift_study.py``. The
    decision is per batch: a batch's forecasts then depend on the batch (a single input
    cannot be tested and is never flagged); ``shift_policy='warn'`` makes every input's
    forecast its own.

    Examples
    --------
    >>> rec = StructuredRecalibrator(random_state=0)                      # doctest: +SKIP
    >>> rec.fit(pred_recal, y_recal)                                    # doctest: +SKIP
    >>> print(rec.format_selection())                                   # doctest: +SKIP
    >>> rec.evaluate(pred_test, y_test).get("marginal").l2             # doctest: +SKIP
    """

    def __init__(
        self,
        kinds=None,
        *,
        features="auto",
        forecaster=None,
        method="auto",
        cv=5,
        n_se=(2.0, 1.0),
        pooled=False,
        prior=0.5,
        lexicon=None,
        label_set=None,
        label_names=None,
        shift_check=True,
        shift_alpha=0.05,
        shift_policy="adapt",
        random_state=0,
        verbose=False,
    ):
        self.kinds = kinds
        self.features = features
        self.forecaster = forecaster
        self.method = method
        self.cv = cv
        self.n_se = n_se
        self.pooled = pooled
        self.prior = prior
        self.lexicon = lexicon
        self.label_set = label_set
        self.label_names = label_names
        self.shift_check = shift_check
        self.shift_alpha = shift_alpha
        self.shift_policy = shift_policy
        self.random_state = random_state
        self.verbose = verbose

    #: at most this many inputs in the reference sample of the shift tests
    _SHIFT_CAP = 5000
    #: fewest groups of new events that predict tests for shift
    _SHIFT_MIN_GROUPS = 5

    def _kinds(self):
        kinds = [MAPEvent(), MarginalEvent()] if self.kinds is None else list(self.kinds)
        for k in kinds:
            if not isinstance(k, EventKind):
                raise ParameterTypeError(f"`kinds` must hold EventKind instances; got {describe(k)}")
        return kinds

    def events(self, pred, y_true=None, *, raw: bool = True) -> EventTable:
        """Build the event table of ``pred`` with this recalibrator's kinds and features."""
        from .events.external import ExternalKind

        if any(isinstance(k, ExternalKind) for k in getattr(self, "kinds_", ())):
            raise ParameterTypeError(
                "this recalibrator was fit on events of an outside model: calibrate new ones "
                "with predict_events(table)")
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

    @staticmethod
    def _rows(table: EventTable, key: str) -> np.ndarray:
        if key == "pooled":
            return np.ones(table.n_events, dtype=bool)
        return table.kind == table.kind_names.index(key)

    @staticmethod
    def _raw(table: EventTable, rows) -> np.ndarray | None:
        """The raw probabilities of the rows, or None if some event has none."""
        if table.raw is None:
            return None
        r = table.raw[rows]
        return r if np.isfinite(r).all() else None

    def _method_of(self, key: str) -> str:
        if isinstance(self.method, dict):
            if key not in self.method:
                raise ParameterError(
                    f"`method` has no entry for {key!r}; it names {sorted(self.method)}"
                )
            m = self.method[key]
        else:
            m = self.method
        return check_option(m, "method", ("auto",) + METHODS)

    def _base_forecaster(self, seed: int):
        if self.forecaster is None:
            from .forecasters import KNNRegionForecaster

            return KNNRegionForecaster(random_state=seed, prior=float(self.prior))
        from ._estimator import clone

        base = clone(self.forecaster)
        if "random_state" in base.get_params(deep=False) and base.get_params()["random_state"] is None:
            base.set_params(random_state=seed)
        return base

    def _check_params(self):
        from .events import Lexicon

        if self.kinds is not None:
            if isinstance(self.kinds, (str, bytes, dict)) or not hasattr(self.kinds, "__iter__"):
                raise ParameterTypeError(
                    f"`kinds` must be a sequence of EventKind; got {describe(self.kinds)}")
            self._kinds()
        f = self.features
        if isinstance(f, str):
            check_option(f, "features", ("auto", "table1", "all"))
        elif isinstance(f, dict):
            for k, v in f.items():
                if not isinstance(k, str) or isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
                    raise ParameterTypeError(
                        "`features` as a dict maps kind names to lists of feature names")
        elif not hasattr(f, "__iter__"):
            raise ParameterTypeError(
                f"`features` must be 'auto', 'table1', 'all', a list or a dict; got {describe(f)}")
        if self.forecaster is not None and not (
                hasattr(self.forecaster, "fit") and hasattr(self.forecaster, "predict_proba")):
            raise ParameterTypeError(
                f"`forecaster` must be a probabilistic classifier (fit, predict_proba); got "
                f"{describe(self.forecaster)}")
        for name in ("pooled", "shift_check", "verbose"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ParameterTypeError(f"`{name}` must be a bool; got "
                                         f"{describe(getattr(self, name))}")
        if self.lexicon is not None and not isinstance(self.lexicon, Lexicon):
            raise ParameterTypeError(f"`lexicon` must be a Lexicon; got {describe(self.lexicon)}")
        if self.label_set is not None:
            from ._validation import as_int_array

            as_int_array(np.asarray(self.label_set), "label_set", ndim=1, low=0)
        if self.label_names is not None and (
                isinstance(self.label_names, bytes)
                or not hasattr(self.label_names, "__len__")
                or not all(isinstance(n, (str, np.str_)) for n in self.label_names)):
            raise ParameterTypeError(
                f"`label_names` must be a sequence of str; got {describe(self.label_names)}")
        check_random_state(self.random_state if not isinstance(self.random_state, np.random.Generator)
                           else None)
        if isinstance(self.method, dict):
            for m in self.method.values():
                check_option(m, "method", ("auto",) + METHODS)
        else:
            check_option(self.method, "method", ("auto",) + METHODS)
        check_int(self.cv, "cv", low=2)
        _se_margins(self.n_se)
        check_float(self.shift_alpha, "shift_alpha", low=0.0, high=1.0)
        check_option(getattr(self, "shift_policy", "warn"), "shift_policy",
                     ("adapt", "fallback", "warn"))
        check_float(self.prior, "prior", low=0.0)

    def fit(self, pred, y_true, *, groups=None, raw: bool = True):
        """Choose and fit the recalibration map of each event kind on a recalibration set.

        Parameters
        ----------
        pred : StructuredPrediction
            Predictions on the recalibration inputs (disjoint from the model's training data).
        y_true : array-like or list of array-like
            Their true labelings.
        groups : array-like of shape (n_inputs,), optional
            One group id per input: the document a sentence comes from, the image of a
            nucleus, the writer of a word, the patient or video of a frame. Every
            cross-validation inside (the choice of ``method='auto'``, the forecasters'
            own choice of region size), the standard errors of the selection rule and
            the shift test's reference treat a group as the unit: its inputs are never
            split across folds, so that near-duplicates within a group (repeated
            mentions in a document, neighbouring nuclei) cannot make a flexible map look
            better than it is on new groups. Default: each input is its own group (the
            events of one input are never split).
        raw : bool, default=True
            Compute the model's raw probability of the events (needed by the ``'raw'`` and
            ``'isotonic'`` methods and the shift test's ``raw`` column); False leaves only
            the forecaster.

        Returns
        -------
        self
        """
        self._check_params()
        if y_true is None:
            raise ParameterError(
                "`y_true` is required: fit learns the recalibration map from the true "
                "labelings of the recalibration inputs (one per input, as StructuredPrediction "
                "was built)"
            )
        kinds = self._kinds()
        n_items = getattr(pred, "n_items", None)
        item_group = _item_groups(groups, n_items) if n_items is not None else None
        message("building the events and their features ...", bool(self.verbose))
        table = self.events(pred, y_true, raw=raw)
        self._fit_table(table, kinds, item_group, groups)
        self.n_states_ = int(pred.n_states) if hasattr(pred, "n_states") else None
        return self

    def fit_events(self, table: EventTable, *, groups=None):
        """Fit on an event table: events of an outside model, or any table of events.

        The same selection, prior, groups and shift reference as :meth:`fit`; the table
        comes from :func:`~structcal.events.external_events` (or
        :func:`~structcal.events.build_events`).

        Parameters
        ----------
        table : EventTable
            Events with outcomes.
        groups : array-like of shape (n_inputs,), optional
            Group of each input of the table (``table.item`` indexes it).

        Returns
        -------
        self
        """
        self._check_params()
        if not isinstance(table, EventTable):
            raise ParameterTypeError(f"`table` must be an EventTable; got {describe(table)}")
        if table.outcome is None:
            raise ParameterError("the events have no outcomes: fitting needs them")
        if table.n_events == 0:
            raise ParameterError("the table has no events: fitting needs events with outcomes")
        for k, name in enumerate(table.kind_names):
            if (table.kind == k).any() and not table.defined[k].any():
                raise ParameterError(
                    f"the events of kind {name!r} have neither a raw probability nor a "
                    "feature: give external_events raw= or features= for them")
        from .events.external import ExternalKind

        own = {k.name: k for k in (self.kinds or [])}
        kinds = [own.get(n) or ExternalKind(n) for n in table.kind_names]
        n_items = max(table.n_items, int(table.item.max()) + 1 if table.n_events else 0)
        self._fit_table(table, kinds, _item_groups(groups, n_items), groups)
        self.n_states_ = None
        return self

    def _fit_table(self, table, kinds, item_group, groups):
        rng = check_random_state(self.random_state)
        self.kinds_ = kinds
        verbose = bool(self.verbose)
        if item_group is None:
            item_group = _item_groups(groups, int(table.item.max()) + 1 if table.n_events else 0)
        event_group = item_group[table.item]
        n_all = int(item_group.shape[0])
        event_unit = (_shift_units(None, n_all)[table.item] if groups is None else event_group)
        if isinstance(self.method, dict):
            keys = ["pooled"] if self.pooled else list(table.kind_names)
            unknown = sorted(set(self.method) - set(keys))
            if unknown:
                raise ParameterError(f"`method` names {unknown}, which are not among {keys}")
        self.forecasters_, self.feature_names_, self.selection_ = {}, {}, {}
        self.shift_reference_, self.shift_columns_, self.shift_groups_ = {}, {}, {}
        self.shift_outcomes_ = {}
        self.fallback_maps_ = {}
        keys = ["pooled"] if self.pooled else list(table.kind_names)
        for key in progress(keys, desc="fitting forecasters", verbose=verbose):
            rows = self._rows(table, key)
            X, names = self._design(table, key)
            y = table.outcome[rows]
            if y.shape[0] == 0:
                raise ParameterError(f"the recalibration set has no events of kind {key!r}")
            r = self._raw(table, rows)
            items = table.item[rows]
            grp = event_group[rows]
            seed = int(rng.integers(0, 2**31 - 1))
            method, scores, ses = self._select(key, X, y, r, grp, seed)
            if method == "isotonic":
                model = _fit_isotonic(r, y, float(self.prior))
                if model is not None:
                    self.forecasters_[key] = model
                else:  # one outcome only: the isotonic map is that constant; so is k-NN's
                    method = "forecaster"
            if method == "forecaster":
                with warnings.catch_warnings():
                    from .forecasters import SingleClassWarning

                    if self.prior > 0:  # the prior keeps a one-outcome kind off 0 and 1
                        warnings.simplefilter("ignore", SingleClassWarning)
                    self.forecasters_[key] = _kept_form(_fit_with_groups(
                        self._base_forecaster(seed), X, y, grp))
                if r is not None:  # what a batch whose features shifted falls back to
                    iso = _fit_isotonic(r, y, float(self.prior))
                    if iso is not None:
                        self.fallback_maps_[key] = iso
            self.feature_names_[key] = names
            self.selection_[key] = {
                "method": method,
                "cv_brier": scores,
                "cv_brier_se": ses,
                "n_events": int(y.shape[0]),
                "n_items": int(np.unique(items).shape[0]),
                "n_groups": int(np.unique(grp).shape[0]),
            }
            extra = r is not None and "raw" not in names  # raw as a column of its own
            cols = (["raw"] if extra else []) + list(names)
            ref = np.column_stack([r, X]) if extra else X
            sample = _shift_sample(grp, np.random.default_rng(seed), self._SHIFT_CAP)
            self.shift_reference_[key] = np.ascontiguousarray(ref[sample])
            self.shift_outcomes_[key] = np.asarray(y[sample], dtype=bool)
            self.shift_groups_[key] = np.unique(event_unit[rows][sample],
                                                return_inverse=True)[1].astype(np.int64)
            self.shift_columns_[key] = cols
        self.n_events_fit_ = table.n_events

    def _select(self, key, X, y, r, items, seed):
        """The method of one kind and the cross-validated Brier score of each candidate."""
        method = self._method_of(key)
        if method in ("raw", "isotonic") and r is None:
            raise ParameterError(
                f"method {method!r} needs the model's raw probability of the events, and the "
                f"events of {key!r} have none; use 'forecaster' or 'auto' for this kind "
                "(method may be a dict per kind)"
            )
        if method != "auto":
            return method, {}, {}
        if r is None:
            return "forecaster", {}, {}
        losses = self._held_out_losses(X, y, r, items, seed)
        if losses is None:  # a single group: nothing to hold out; keep the model's probability
            warnings.warn(
                f"the recalibration events of {key!r} come from a single group (input or "
                "document), so no candidate map can be checked on held-out data: the model's "
                "raw probability is kept for this kind. Recalibrate on more inputs.",
                SingleGroupWarning, stacklevel=4,
            )
            return "raw", {}, {}
        chosen = _one_se_choice(losses, items, self.n_se)
        scores = {m: float(np.mean(losses[m])) for m in METHODS}
        ses = {m: _clustered_se(losses[m] - losses[chosen], items) for m in METHODS}
        return chosen, scores, ses

    def _held_out_losses(self, X, y, r, items, seed):
        """Per-event squared errors of the candidates of ``method='auto'`` (None: one input).

        The raw probability as it is; isotonic regression and the forecaster from
        ``cv`` folds of inputs (drawn with ``seed``), each event predicted by the maps
        fit on the other folds.
        """
        n_folds = min(int(self.cv), np.unique(items).shape[0])
        if n_folds < 2:
            return None
        fold = _item_folds(items, n_folds, np.random.default_rng(seed))
        yf = y.astype(np.float64)
        prior = float(self.prior)
        held_out = {m: np.empty(y.shape[0]) for m in METHODS}
        for f in range(n_folds):
            test, train = fold == f, fold != f
            lo, hi = _support_bounds(int(train.sum()), prior)
            held_out["raw"][test] = np.clip(r[test], lo, hi)
            iso = _fit_isotonic(r[train], y[train], prior)
            held_out["isotonic"][test] = (
                float(y[train][0]) if iso is None else iso.predict_proba(r[test])[:, 1]
            )
            with warnings.catch_warnings():
                from .forecasters import SingleClassWarning

                warnings.simplefilter("ignore", SingleClassWarning)
                model = _fit_with_groups(self._base_forecaster(seed), X[train], y[train],
                                         items[train])
            held_out["forecaster"][test] = _positive_column(model, X[test])
            held_out["isotonic"][test] = np.clip(held_out["isotonic"][test], lo, hi)
            held_out["forecaster"][test] = np.clip(held_out["forecaster"][test], lo, hi)
        return {name: (p - yf) ** 2 for name, p in held_out.items()}

    def format_selection(self, scale: float = 100.0) -> str:
        """A text table of the method chosen for each kind and the candidates' CV Brier scores.

        Each score of a candidate other than the chosen one is followed by the standard
        error of its paired difference from the chosen one (``selection_['cv_brier_se']``).

        Parameters
        ----------
        scale : float, default=100.0
            Scores are multiplied by it (x100 as in the paper).
        """
        self._check_fitted()
        width = 22
        lines = [f"{'kind':<18}{'events':>8}{'inputs':>8}  {'chosen':<12}"
                 + "".join(f"{'cv ' + m:>{width}}" for m in METHODS)]
        for key, sel in self.selection_.items():
            line = f"{key:<18}{sel['n_events']:>8}{sel['n_items']:>8}  {sel['method']:<12}"
            ses = sel.get("cv_brier_se", {})
            for m in METHODS:
                v = sel["cv_brier"].get(m)
                if v is None:
                    cell = "-"
                elif m == sel["method"] or m not in ses:
                    cell = format(v * scale, ".3f")
                else:
                    cell = f"{v * scale:.3f} (se {ses[m] * scale:.3f})"
                line += f"{cell:>{width}}"
            lines.append(line)
        return "\n".join(lines)

    def _check_loaded(self):
        """Invariants of a fitted recalibrator read from a file (see :mod:`structcal._loadcheck`)."""
        from ._loadcheck import integer

        self._check_params()
        kinds = getattr(self, "kinds_", None)
        if not isinstance(kinds, list) or not kinds or not all(isinstance(k, EventKind) for k in kinds):
            raise ValueError("kinds_ must be a non-empty list of event kinds")
        names = [k.name for k in kinds]
        sel, fc, fn = (getattr(self, a, None) for a in ("selection_", "forecasters_",
                                                       "feature_names_"))
        if not all(isinstance(x, dict) for x in (sel, fc, fn)):
            raise ValueError("selection_, forecasters_ and feature_names_ must be dicts")
        keys = ["pooled"] if self.pooled else names
        if sorted(sel) != sorted(keys) or sorted(fn) != sorted(keys):
            raise ValueError(f"selection_ and feature_names_ must have one entry per kind "
                             f"{keys}; got {sorted(sel)} and {sorted(fn)}")
        for key, entry in sel.items():
            if not isinstance(entry, dict) or entry.get("method") not in METHODS:
                raise ValueError(f"selection_[{key!r}] has no valid method")
            n = entry.get("n_events")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"selection_[{key!r}]['n_events'] must be a positive int")
            if (entry["method"] == "raw") == (key in fc):
                raise ValueError(f"forecasters_ must hold a map for {key!r} exactly when its "
                                 "method is not 'raw'")
            f = fc.get(key)
            if key in fc and not hasattr(f, "predict_proba"):
                raise ValueError(f"forecasters_[{key!r}] is not a probabilistic classifier")
            cols = fn[key]
            if not isinstance(cols, tuple) or not all(isinstance(c, str) for c in cols):
                raise ValueError(f"feature_names_[{key!r}] must be a tuple of names")
            width = getattr(f, "n_features_in_", None)
            if entry["method"] == "forecaster" and width is not None and width != len(cols):
                raise ValueError(f"forecasters_[{key!r}] takes {width} features but "
                                 f"feature_names_ lists {len(cols)}")
            if entry["method"] == "isotonic" and width not in (None, 1):
                raise ValueError(f"the isotonic map of {key!r} must take one score")
            ref = getattr(self, "shift_reference_", {}).get(key)
            cols_ref = getattr(self, "shift_columns_", {}).get(key)
            if ref is not None and (not isinstance(ref, np.ndarray) or ref.ndim != 2
                                    or cols_ref is None or ref.shape[1] != len(cols_ref)):
                raise ValueError(f"shift_reference_[{key!r}] does not match shift_columns_")
        outs = getattr(self, "shift_outcomes_", {})  # absent in files of older versions
        if not isinstance(outs, dict):
            raise ValueError("shift_outcomes_ must be a dict")
        for key, o in outs.items():
            ref = getattr(self, "shift_reference_", {}).get(key)
            if ref is None or not isinstance(o, np.ndarray) or o.shape != (ref.shape[0],):
                raise ValueError(f"shift_outcomes_[{key!r}] must hold one outcome per row of "
                                 "shift_reference_")
        maps = getattr(self, "fallback_maps_", {})  # absent in files of older versions
        if not isinstance(maps, dict):
            raise ValueError("fallback_maps_ must be a dict")
        for key, m in maps.items():
            if key not in sel or sel[key]["method"] != "forecaster":
                raise ValueError(f"fallback_maps_ has an entry for {key!r}, which is not a "
                                 "forecaster kind")
            if not hasattr(m, "predict_proba") or getattr(m, "n_features_in_", 1) != 1:
                raise ValueError(f"fallback_maps_[{key!r}] is not an isotonic map of one score")
        integer(self, "n_events_fit_", low=0)
        if getattr(self, "n_states_", None) is not None:
            integer(self, "n_states_", low=1)

    def _check_fitted(self):
        if not hasattr(self, "selection_"):
            from .exceptions import NotFittedError

            raise NotFittedError("this StructuredRecalibrator is not fitted yet: call fit first")

    def predict(self, pred, y_true=None, *, groups=None) -> CalibratedEvents:
        """Calibrated probabilities of the events of new inputs.

        Parameters
        ----------
        pred : StructuredPrediction
            Predictions on new inputs.
        y_true : array-like or list of array-like, optional
            True labelings, to fill the table's outcomes (for evaluation).
        groups : array-like of shape (n_inputs,), optional
            Group of each new input (documents, images), for the shift test (see
            :meth:`fit`); default: each input its own group.

        Returns
        -------
        CalibratedEvents

        Warns
        -----
        DistributionShiftWarning
            With ``shift_check=True``, when the raw probabilities or features of the new
            events are distributed unlike the recalibration set's (:meth:`shift_test`);
            with ``shift_policy='fallback'`` the kinds whose fitted map reads a shifted
            column fall back to the simplest map whose input did not shift (isotonic
            regression on the raw probability, or the raw probability; see
            ``shift_policy`` and ``CalibratedEvents.fallback``).
        """
        self._check_fitted()
        K = getattr(self, "n_states_", None)
        if K is not None and getattr(pred, "n_states", K) != K:
            raise ParameterError(
                f"`pred` has {pred.n_states} labels per position but this recalibrator was fit "
                f"on predictions with {K}: it calibrates the events of that model only"
            )
        item_group = _item_groups(groups, pred.n_items) if hasattr(pred, "n_items") else None
        units = _shift_units(groups, pred.n_items) if hasattr(pred, "n_items") else None
        table = self.events(pred, y_true)
        return self._predict_table(table, item_group, shift_units=units)

    def predict_events(self, table: EventTable, *, groups=None) -> CalibratedEvents:
        """Calibrated probabilities of the events of a table (see :meth:`fit_events`).

        Parameters
        ----------
        table : EventTable
            Events of the kinds and features seen in fit (outcomes optional).
        groups : array-like of shape (n_inputs,), optional
            Group of each input, for the shift test.

        Returns
        -------
        CalibratedEvents
        """
        self._check_fitted()
        if not isinstance(table, EventTable):
            raise ParameterTypeError(f"`table` must be an EventTable; got {describe(table)}")
        missing = sorted(set(table.kind_names) - set(self.selection_)) if not self.pooled else []
        if missing:
            raise ParameterError(f"the table has kinds {missing} this recalibrator was not fit on "
                                 f"(it knows {sorted(self.selection_)})")
        n_items = max(table.n_items, int(table.item.max()) + 1 if table.n_events else 0)
        return self._predict_table(table, _item_groups(groups, n_items),
                                   shift_units=_shift_units(groups, n_items))

    def _predict_table(self, table, item_group, *, check_shift=True, shift_units=None):
        test, rows_by_key = None, {}
        if self.shift_check and check_shift:
            units = shift_units if shift_units is not None else item_group
            if units is None:
                units = np.arange(int(table.item.max()) + 1 if table.n_events else 0)
            event_group = units[table.item]
            if np.unique(event_group).size >= self._SHIFT_MIN_GROUPS:
                rows_by_key = self._shift_rows(table, event_group)
                test = self._shift_test_rows(rows_by_key)
        batch = self._batch_rows(table)
        has_raw = {k: r is not None for k, (_, r) in batch.items()}
        fallback, adapted = self._shift_decision(test, rows_by_key, has_raw)
        forecast = self._forecast_table(table, fallback, adapted, batch)
        if test is not None:
            self._warn_if_shifted(test, fallback, adapted)
        shifted = tuple(sorted({k for k, _, _, _ in test.flagged()})) if test is not None else ()
        # the same maps for other events (a certificate for this batch re-forecasts its
        # calibration events with them: structcal.guarantees.certify_precision(batch=))
        maps = functools.partial(self._forecast_table, fallback=dict(fallback),
                                 adapted=dict(adapted))
        return CalibratedEvents(table, forecast, fallback, shifted,
                                {k: info for k, (_, info) in adapted.items()}, maps)

    def _batch_rows(self, table) -> dict:
        """Each kind of the table: ``(its rows, its raw probabilities or None)``, the
        feature columns checked against fit's."""
        batch = {}
        for key in self.selection_:
            if key != "pooled" and key not in table.kind_names:
                continue  # no events of this kind in the batch
            _, names = self._design(table, key)
            if names != self.feature_names_[key]:
                seen = self.feature_names_[key]
                missing = [c for c in seen if c not in names]
                extra = [c for c in names if c not in seen]
                raise ParameterError(
                    f"the events of {key!r} have feature columns {list(names)}; the "
                    f"recalibrator was fit on {list(seen)}"
                    + (f" (missing: {missing}; a column that is NaN for every event of the "
                       "kind counts as missing)" if missing else "")
                    + (f" (not seen in fit: {extra})" if extra else ""))
            rows = self._rows(table, key)
            if not rows.any():  # no events of this kind in the batch: nothing to forecast
                continue
            batch[key] = rows, self._raw(table, rows)
        return batch

    def _forecast_table(self, table, fallback, adapted, batch=None) -> np.ndarray:
        """Forecasts of a table's events by the fitted maps, or for the kinds in
        ``fallback`` by the map used instead (see :meth:`_shift_decision`)."""
        batch = self._batch_rows(table) if batch is None else batch
        forecast = np.empty(table.n_events)
        for key, (rows, r) in batch.items():
            if key in fallback:
                forecast[rows] = self._fallback_forecast(key, fallback[key], r, adapted)
                continue
            method = self.selection_[key]["method"]
            if method == "forecaster":
                X, _ = self._design(table, key)
                f = _positive_column(self.forecasters_[key], X)
            elif r is None:
                raise ParameterError(f"the events of {key!r} have no raw probability to recalibrate")
            else:
                f = r if method == "raw" else _positive_column(self.forecasters_[key], r)
            forecast[rows] = np.clip(f, *self._bounds(key))
        return forecast

    def _bounds(self, key) -> tuple:
        """The clip bounds of the forecasts of a kind (never exactly 0 or 1)."""
        return _support_bounds(self.selection_[key]["n_events"], float(getattr(self, "prior", 0.0)))

    def _fallback_forecast(self, key, how, r, adapted=None) -> np.ndarray:
        """Forecasts of a kind whose fitted map is not used (``how``: ``'raw'``,
        ``'isotonic'`` or ``'adapted'``, the last reading ``adapted[key]``), clipped."""
        if how == "raw":
            f = r
        elif how == "adapted":
            f = _positive_column(adapted[key][0], r)
        else:
            f = _positive_column(self.fallback_maps_[key], r)
        return np.clip(f, *self._bounds(key))

    def _fallback_kinds(self, test, has_raw: dict) -> dict:
        """Kinds whose fitted map is not used under ``shift_policy='fallback'``, with the
        method used instead (``has_raw``: kinds of the batch, and whether their events have
        a raw probability).

        A map that reads a column the shift test flagged falls back to the simplest map
        whose input did not shift: the forecaster (which reads the features) to isotonic
        regression on the raw probability when the raw probability itself did not shift,
        else (and isotonic regression, whose one input is the raw probability) to the raw
        probability.
        """
        if test is None or getattr(self, "shift_policy", "warn") != "fallback":
            return {}
        return self._simplest_maps(test, has_raw)

    def _simplest_maps(self, test, has_raw: dict) -> dict:
        """The map each kind of ``has_raw`` falls back to on the flagged batch ``test``
        (see :meth:`_fallback_kinds`), whatever the shift policy."""
        out = {}
        maps = getattr(self, "fallback_maps_", None) or {}
        for key, ok in has_raw.items():
            method = self.selection_[key]["method"]
            if not ok or method == "raw":
                continue
            raw_shifted = test.kind_shifted(key, ["raw"])
            if method == "isotonic":
                if raw_shifted:
                    out[key] = "raw"
            elif test.kind_shifted(key, list(self.feature_names_[key])):
                out[key] = "isotonic" if key in maps and not raw_shifted else "raw"
        return out

    #: under ``shift_policy='adapt'``, a kind whose weighted recalibration events count
    #: fewer effective groups than this, or than ``MIN_EFFECTIVE_SHARE`` of its groups,
    #: falls back instead (the weights have collapsed onto a few groups)
    MIN_EFFECTIVE_GROUPS = 5
    MIN_EFFECTIVE_SHARE = 0.1
    #: ... or whose batch lies too much outside the recalibration events' support
    #: (:attr:`structcal.shift.DensityRatio.coverage` below this)
    MIN_COVERAGE = 0.6
    #: the density ratios are raised to this power before the adapted map is refit
    #: (flattened importance weights: 1 is the plain ratio, 0 no weighting)
    ADAPT_WEIGHT_POWER = 0.5

    def _shift_decision(self, test, rows_by_key: dict, has_raw: dict):
        """What a flagged batch changes: ``(fallback, adapted)``.

        ``fallback`` maps each kind whose fitted map is not used to the map used instead
        (see :class:`CalibratedEvents`); ``adapted`` maps the kinds refit with weights (and
        those whose weights collapsed, with ``None`` as map) to ``(map, info)``.
        """
        policy = getattr(self, "shift_policy", "warn")
        if test is None or policy == "warn":
            return {}, {}
        if policy == "fallback":
            return self._fallback_kinds(test, has_raw), {}
        from .shift import density_ratio

        fallback, adapted = {}, {}
        flagged = {k for k, _, _, _ in test.flagged()}
        outcomes = getattr(self, "shift_outcomes_", {}) or {}
        for key, ok in has_raw.items():
            method = self.selection_[key]["method"]
            if key not in flagged or method == "raw" or not ok:
                continue
            cols = list(self.shift_columns_[key])
            if key not in outcomes or key not in rows_by_key or "raw" not in cols:
                fallback.update(self._simplest_maps(test, {key: ok}))
                continue
            ref = self.shift_reference_[key]
            new, grp = rows_by_key[key]
            seed = _stable_seed(self.random_state, key)
            sample = _shift_sample(grp, np.random.default_rng(seed), self._SHIFT_CAP)
            dr = density_ratio(ref, new[sample], self.shift_groups_.get(key), grp[sample],
                               random_state=seed)
            info = {"effective_sample_size": dr.effective_sample_size,
                    "effective_groups": dr.effective_groups, "n_reference": int(ref.shape[0]),
                    "auc": dr.auc, "coverage": dr.coverage}
            j = cols.index("raw")
            y = outcomes[key]
            model = None
            n_groups = int(np.unique(self.shift_groups_[key]).size) if key in getattr(
                self, "shift_groups_", {}) else int(ref.shape[0])
            need = max(self.MIN_EFFECTIVE_GROUPS, self.MIN_EFFECTIVE_SHARE * n_groups)
            weights_hold = dr.effective_groups >= need and dr.coverage >= self.MIN_COVERAGE
            info["n_reference_groups"] = n_groups
            if weights_hold and 0 < y.sum() < y.shape[0]:
                w = dr.weights ** self.ADAPT_WEIGHT_POWER
                model = _fit_isotonic(ref[:, j], y, float(self.prior), w / w.mean())
            if model is None:
                info["reason"] = (
                    f"the weights collapsed: {dr.effective_groups:.1f} effective groups of "
                    f"{n_groups} (at least {need:.1f} needed), coverage {dr.coverage:.2f} of "
                    f"the batch by the recalibration data (at least {self.MIN_COVERAGE:g} "
                    "needed)") if not weights_hold else (
                    "the recalibration events of this kind all have the same outcome: "
                    "there is no map to refit")
                # a map that read a shifted column and cannot be re-weighted: the simplest
                # map whose input did not shift (isotonic of raw for a forecaster whose raw
                # probability did not shift), else the raw probability
                fb = self._simplest_maps(test, {key: ok}).get(key, "raw")
                info["map"] = fb
                fallback[key] = fb
            else:
                info["map"] = "weighted isotonic"
                fallback[key] = "adapted"
            adapted[key] = (model, info)
        return fallback, adapted

    def shift_test(self, pred, *, groups=None) -> ShiftTest:
        """Test whether the events of ``pred`` are distributed like the recalibration events.

        Parameters
        ----------
        pred : StructuredPrediction
            Predictions on new inputs.
        groups : array-like of shape (n_inputs,), optional
            Group of each new input (default: each input its own group).

        Returns
        -------
        ShiftTest
            KS statistic and adjusted permutation p-value per kind and column (see the
            class).
        """
        self._check_fitted()
        table = self.events(pred)
        units = _shift_units(groups, pred.n_items)
        return self._shift_test(table, units[table.item])

    #: permutations of the shift test
    _SHIFT_PERMUTATIONS = 200

    def _shift_test(self, table: EventTable, event_group) -> ShiftTest:
        return self._shift_test_rows(self._shift_rows(table, event_group))

    def _shift_rows(self, table: EventTable, event_group) -> dict:
        """The new events' columns of each kind's shift test: ``{key: (values, groups)}``."""
        out = {}
        for key in self.selection_:
            if key != "pooled" and key not in table.kind_names:
                continue
            rows = self._rows(table, key)
            if not rows.any():
                continue
            X, _ = self._design(table, key)
            r = self._raw(table, rows)
            extra = len(self.shift_columns_[key]) == X.shape[1] + 1  # raw as a column of its own
            if extra and r is None:
                raise ParameterError(f"the events of {key!r} have no raw probability to compare")
            out[key] = (np.column_stack([r, X]) if extra else X, event_group[rows])
        return out

    def _shift_test_rows(self, rows_by_key: dict) -> ShiftTest:
        """The shift test of new events given as :meth:`_shift_rows` gives them."""
        from .shift import group_shift_test

        rng = check_random_state(self.random_state)
        keys, cols, stats, pvals, n_ref, n_new = [], [], [], [], [], []
        tested = []
        for key in self.selection_:
            seed = int(rng.integers(0, 2**31 - 1))
            if key not in rows_by_key:
                continue
            new, grp = rows_by_key[key]
            sample = _shift_sample(grp, np.random.default_rng(seed), self._SHIFT_CAP)
            ref = self.shift_reference_[key]
            ref_groups = getattr(self, "shift_groups_", {}).get(key)
            res = group_shift_test(ref, new[sample], ref_groups, grp[sample],
                                   n_permutations=self._SHIFT_PERMUTATIONS, random_state=seed)
            tested.append(key)
            keys += [key] * res.statistic_columns.shape[0]
            cols += list(self.shift_columns_[key])
            stats.append(res.statistic_columns)
            pvals.append(res.pvalue_columns)
            n_ref += [res.n_groups_reference] * res.statistic_columns.shape[0]
            n_new += [res.n_groups_new] * res.statistic_columns.shape[0]
        stat = np.concatenate(stats) if stats else np.zeros(0)
        p = np.concatenate(pvals) if pvals else np.zeros(0)
        return ShiftTest(
            key=tuple(keys), column=tuple(cols), statistic=stat,
            pvalue=np.minimum(p * max(len(tested), 1), 1.0),
            n_reference=np.asarray(n_ref, dtype=np.int64), n_new=np.asarray(n_new, dtype=np.int64),
            alpha=float(self.shift_alpha),
        )

    @staticmethod
    def _warn_if_shifted(test: ShiftTest, fallback=None, adapted=None):
        if not test.shifted:
            return
        hits = test.flagged()
        where = "; ".join(f"{k} {c} (KS {s:.2f}, p={p:.1g})" for k, c, s, p in hits[:4])
        more = f" and {len(hits) - 4} more" if len(hits) > 4 else ""
        what = (f"the new inputs' events are distributed unlike the recalibration set's: "
                f"{where}{more} (Kolmogorov-Smirnov, permutation of groups, "
                f"alpha={test.alpha:g})")
        if fallback:
            raw = sorted(k for k, m in fallback.items() if m == "raw")
            iso = sorted(k for k, m in fallback.items() if m == "isotonic")
            ada = sorted(k for k, m in fallback.items() if m == "adapted")
            collapsed = sorted(k for k, (m, _) in (adapted or {}).items() if m is None)
            uses = ([f"the kinds {ada} use isotonic regression on the raw probability refit "
                     "on the recalibration events weighted toward this batch (effective "
                     "groups " + ", ".join(f"{k} {adapted[k][1]['effective_groups']:.0f}"
                                            for k in ada) + ")"] if ada else []) + (
                [f"the weights toward this batch collapsed for {collapsed}"]
                if collapsed else []) + (
                [f"the kinds {raw} use the model's raw probability"] if raw else []) + (
                [f"the kinds {iso} use isotonic regression on the raw probability (which did "
                 "not shift)"] if iso else [])
            uses = "; ".join(uses)
            what += (". " + uses[0].upper() + uses[1:] + " instead of their fitted map, "
                     "which may not transfer to these data")
        else:
            what += ". The recalibration map may not transfer to them"
        what += (", and the finite-sample guarantees of structcal.guarantees, which assume "
                 "new data exchangeable with the calibration data, hold for them only when "
                 "certified for this batch (certify_precision(..., batch=))")
        w = DistributionShiftWarning(
            f"{what}: refit on data like these, or recalibrate online as outcomes arrive "
            "(structcal.online.recalibrate_events / OnlineRecalibrator). "
            "Pass shift_check=False to silence this check."
        )
        w.cli_text = (f"{what}: refit with `structcal fit` on data like these. "
                      "--no-shift-check silences this check.")
        warnings.warn(w, stacklevel=4)

    def evaluate(self, pred, y_true, *, groups=None, by="kind", n_bins: int = 10,
                 n_resamples: int = 200) -> CalibrationReport:
        """Raw vs calibrated l2 loss, calibration error and sharpness on new inputs.

        Parameters
        ----------
        pred : StructuredPrediction
        y_true : array-like or list of array-like
        groups : array-like of shape (n_inputs,), optional
            Group of each input (documents, images): the shift test and the bootstrap
            intervals of the Brier scores resample whole groups (default: inputs).
        by : str or None, default='kind'
        n_bins : int, default=10
        n_resamples : int, default=200
            Bootstrap resamples of the Brier intervals (0: none).

        Returns
        -------
        CalibrationReport
        """
        out = self.predict(pred, y_true, groups=groups)
        forecasts = {"calibrated": out.forecast}
        if out.table.raw is not None and not np.isnan(out.table.raw).any():
            forecasts = {"raw": np.clip(out.table.raw, 0.0, 1.0), **forecasts}
        return evaluate_events(out.table, forecasts, by=by, n_bins=n_bins, groups=groups,
                               n_resamples=n_resamples,
                               random_state=check_random_state(self.random_state))
