"""Decisions with finite-sample guarantees: accept at a certified precision, miss at most alpha.

Calibrated probabilities say how sure the model is; a user must then decide: accept an
entity without review, flag an image whose nuclei may be missed. This module turns the
events of a calibration set (their forecasts and outcomes) into decisions whose error
rates are guaranteed on new data, under one assumption: the groups of the new data (and
the inputs within them) are exchangeable with those of the calibration set. Under
distribution shift the guarantees do not hold; :class:`~structcal.StructuredRecalibrator`'s
shift test warns when a batch looks unlike the recalibration data.

:class:`PrecisionGuarantee`
    A threshold per event kind (and optionally per entity type or object class) such that
    with probability at least ``1 - delta`` over the calibration draw, the precision of
    the events accepted on new data (those whose forecast reaches the threshold) is at
    least ``target``. Learn-then-Test (Angelopoulos et al., 2021): every threshold of a
    fixed grid is a hypothesis "precision below target", tested by an exact binomial tail
    p-value of the calibration events it accepts; a Bonferroni correction over the grid
    makes all rejections simultaneously valid, and the loosest certified threshold (the
    one that accepts most) is used. Events of one group are dependent (a document repeats
    its entities and errors): the binomial counts are deflated by Kish's design effect
    ``1 + (m - 1) rho`` (``m`` the size-weighted number of accepted events per group,
    ``rho`` the intra-group correlation of the errors). When no threshold can be
    certified with the data given, nothing is accepted and a :class:`GuaranteeWarning`
    says why.

:class:`MissControl`
    For entities and objects: a threshold on candidate events (a candidate set larger than
    the MAP's, e.g. ``EntitySpans(..., candidates=10)``) such that the expected share of
    gold entities (objects) of a new group that no accepted candidate matches is at most
    ``alpha``: conformal risk control (Angelopoulos et al., 2022), with groups as the
    exchangeable units. It reports the expected number of candidates accepted per group.

References
----------
A. N. Angelopoulos, S. Bates, E. J. Candes, M. I. Jordan, L. Lei, *Learn then Test:
Calibrating Predictive Algorithms to Achieve Risk Control*, 2021, arXiv:2110.01052.
A. N. Angelopoulos, S. Bates, A. Fisch, L. Lei, T. Schuster, *Conformal Risk Control*,
ICLR 2024, arXiv:2208.02814.
L. Kish, *Survey Sampling*, Wiley, 1965 (design effect).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ._estimator import ParamsMixin
from ._validation import as_float_array, check_float, describe
from .exceptions import ParameterError, ParameterTypeError
from .io import SaveLoadMixin

__all__ = [
    "PrecisionCertificate",
    "accept_events",
    "GuaranteeWarning",
    "PrecisionGuarantee",
    "MissControl",
    "certify_precision",
    "DEFAULT_GRID",
    "binomial_tail_pvalue",
    "design_effect",
]

#: Thresholds (on calibrated probabilities) tested by :class:`PrecisionGuarantee`: fixed
#: before seeing data, so that the Bonferroni correction is over a known number of tests.
DEFAULT_GRID = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97,
                0.975, 0.98, 0.985, 0.99, 0.993, 0.995, 0.997, 0.998, 0.999)


class GuaranteeWarning(UserWarning):
    """A guarantee could not be certified with the data given (nothing is accepted)."""


def binomial_tail_pvalue(n_errors, n_accepted, max_error_rate):
    """``P(Bin(n, a) <= k)``: the p-value of "error rate >= a" after ``k`` errors in ``n``.

    Real (non-integer) ``n`` and ``k`` (effective counts) are allowed: the regularised
    incomplete beta function ``I_{1-a}(n - k, k + 1)`` extends the binomial CDF. 1 when
    nothing was accepted.
    """
    from scipy.special import betainc

    n = np.asarray(n_accepted, dtype=np.float64)
    k = np.asarray(n_errors, dtype=np.float64)
    a = float(max_error_rate)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n - k > 0, betainc(np.maximum(n - k, 1e-300), k + 1.0, 1.0 - a),
                     1.0)
    return np.where(n > 0, np.clip(p, 0.0, 1.0), 1.0)


def design_effect(errors, groups):
    """Kish's design effect of the mean of ``errors`` (0/1) over events clustered in ``groups``.

    Returns ``(rho, deff)``: the intra-group correlation (ANOVA estimator, clipped to
    [0, 1]) and ``1 + (m - 1) rho`` with ``m = sum(n_g^2) / sum(n_g)``. With one group,
    or no variation, ``rho`` is 0 when every group has one event and 1 otherwise (nothing
    tells the within-group correlation apart: assume the worst).
    """
    e = np.asarray(errors, dtype=np.float64)
    _, inv = np.unique(groups, return_inverse=True)
    G = int(inv.max()) + 1 if inv.size else 0
    sizes = np.bincount(inv, minlength=G).astype(np.float64)
    if e.size == 0:
        return 0.0, 1.0
    m = float((sizes**2).sum() / sizes.sum())
    if m <= 1.0:
        return 0.0, 1.0
    if G < 2 or e.var() == 0:
        return 1.0, m
    sums = np.bincount(inv, weights=e, minlength=G)
    means = sums / sizes
    grand = e.mean()
    N = e.size
    msb = float((sizes * (means - grand) ** 2).sum() / (G - 1))
    msw = float(((e - means[inv]) ** 2).sum() / max(N - G, 1))
    n0 = (N - (sizes**2).sum() / N) / (G - 1)
    rho = (msb - msw) / (msb + (n0 - 1) * msw) if (msb + (n0 - 1) * msw) > 0 else 0.0
    rho = float(np.clip(rho, 0.0, 1.0))
    return rho, 1.0 + (m - 1.0) * rho


def _inputs(scores, outcomes, groups, classes):
    s = as_float_array(scores, "scores", ndim=1)
    n = s.shape[0]
    if outcomes is not None:
        o = np.asarray(outcomes)
        if o.shape != (n,):
            raise ParameterError(f"`outcomes` must have shape ({n},); got {o.shape}")
        if o.dtype != np.bool_:
            if not np.isin(o, (0, 1)).all():
                raise ParameterError("`outcomes` must be 0/1 or boolean")
            o = o.astype(bool)
    else:
        o = None
    g = np.arange(n) if groups is None else np.asarray(groups)
    if g.shape != (n,):
        raise ParameterError(f"`groups` must have shape ({n},) (one per event); got {g.shape}")
    c = np.zeros(n, dtype=np.int64) if classes is None else np.asarray(classes)
    if c.shape != (n,):
        raise ParameterError(f"`classes` must have shape ({n},) (one per event); got {c.shape}")
    if s.size and (s.min() < 0 or s.max() > 1):
        raise ParameterError("`scores` must be probabilities in [0, 1]")
    return s, o, g, c


@dataclass(frozen=True)
class PrecisionCertificate:
    """What :class:`PrecisionGuarantee` certified for one class of events.

    Attributes
    ----------
    threshold : float
        Events with forecast >= threshold are accepted (``inf``: none).
    certified : bool
    n_calibration : int
        Calibration events of the class.
    n_accepted : int
        Of those, accepted at the threshold.
    accepted_share : float
        The share of calibration events accepted (the expected share on new data).
    precision_calibration : float
        Precision of the accepted calibration events.
    pvalue : float
        The binomial tail p-value at the threshold (before Bonferroni).
    design_effect : float
    message : str
    """

    threshold: float
    certified: bool
    n_calibration: int
    n_accepted: int
    accepted_share: float
    precision_calibration: float
    pvalue: float
    design_effect: float
    message: str


class PrecisionGuarantee(SaveLoadMixin, ParamsMixin):
    """Accept events at a precision certified with probability ``1 - delta``.

    Parameters
    ----------
    target : float, default=0.95
        The precision required of the accepted events on new data.
    delta : float, default=0.1
        The guarantee fails with probability at most ``delta`` over the calibration data.
    grid : sequence of float, default=DEFAULT_GRID
        Candidate thresholds on the forecasts, fixed before seeing data.

    Attributes
    ----------
    certificates_ : dict
        Class -> :class:`PrecisionCertificate`.
    thresholds_ : dict
        Class -> threshold (``inf`` where nothing could be certified).

    Notes
    -----
    Guarantee: if the calibration groups and the new groups are exchangeable (drawn from
    the same distribution), then with probability at least ``1 - delta`` over the
    calibration data, for every class, the expected precision of the events accepted on
    new data is at least ``target``. It is a guarantee on the population precision; the
    precision realised on a finite batch scatters around it. It does not survive
    distribution shift.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.guarantees import PrecisionGuarantee
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(4000)                        # calibrated forecasts
    >>> y = rng.random(4000) < p                    # outcomes
    >>> g = PrecisionGuarantee(target=0.9, delta=0.1).fit(p, y)
    >>> t = g.thresholds_[0]
    >>> bool(0.9 <= t < 1.0), bool(y[p >= t].mean() >= 0.9)
    (True, True)
    """

    def __init__(self, target=0.95, delta=0.1, *, grid=DEFAULT_GRID):
        self.target = target
        self.delta = delta
        self.grid = grid

    def _check(self):
        check_float(self.target, "target", low=0.0, high=1.0, low_inclusive=False,
                    high_inclusive=False)
        check_float(self.delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                    high_inclusive=False)
        grid = np.asarray(list(self.grid), dtype=np.float64)
        if grid.ndim != 1 or grid.size == 0 or not np.isfinite(grid).all() or (
                grid < 0).any() or (grid > 1).any():
            raise ParameterError("`grid` must be a non-empty sequence of thresholds in [0, 1]")
        return np.unique(grid)

    def fit(self, scores, outcomes, *, groups=None, classes=None):
        """Certify a threshold per class from calibration events.

        Parameters
        ----------
        scores : array-like of shape (n_events,)
            Calibrated probabilities of the events (e.g. ``CalibratedEvents.forecast``).
        outcomes : array-like of shape (n_events,), bool
            Whether each event holds (the entity is right).
        groups : array-like of shape (n_events,), optional
            Group of each event (document, image; default: each event its own).
        classes : array-like of shape (n_events,), optional
            Class of each event (event kind, entity type, object class): one threshold
            per class.

        Returns
        -------
        self
        """
        grid = self._check()
        s, o, g, c = _inputs(scores, outcomes, groups, classes)
        if o is None:
            raise ParameterError("`outcomes` are required to certify a precision")
        a = 1.0 - float(self.target)
        m = grid.shape[0]
        level = float(self.delta) / m
        self.certificates_, self.thresholds_ = {}, {}
        for cls in np.unique(c):
            rows = c == cls
            sc, oc, gc = s[rows], o[rows], g[rows]
            rho, _ = design_effect(~oc, gc)
            best = None
            for t in grid:  # every threshold is its own test (Bonferroni): keep the loosest
                acc = sc >= t
                n = int(acc.sum())
                if n == 0:
                    continue
                k = int((~oc[acc]).sum())
                _, inv = np.unique(gc[acc], return_inverse=True)
                sizes = np.bincount(inv).astype(np.float64)
                mbar = float((sizes**2).sum() / sizes.sum())
                deff = 1.0 + (mbar - 1.0) * rho
                p = float(binomial_tail_pvalue(k / deff, n / deff, a))
                if p <= level and (best is None or t < best[0]):
                    best = (t, n, k, p, deff)
            key = cls.item() if isinstance(cls, np.generic) else cls
            if best is None:
                msg = (f"cannot certify precision {self.target:g} at delta {self.delta:g} for "
                       f"class {key!r} with {int(rows.sum())} calibration events: nothing is "
                       "accepted (more calibration data, a lower target or a larger delta "
                       "would help)")
                warnings.warn(msg, GuaranteeWarning, stacklevel=2)
                cert = PrecisionCertificate(np.inf, False, int(rows.sum()), 0, 0.0, float("nan"),
                                            1.0, 1.0, msg)
            else:
                t, n, k, p, deff = best
                cert = PrecisionCertificate(
                    float(t), True, int(rows.sum()), n, n / max(int(rows.sum()), 1),
                    1.0 - k / n, p, deff,
                    f"precision >= {self.target:g} certified at threshold {t:g} "
                    f"(confidence {1 - self.delta:g}): {n} of {int(rows.sum())} calibration "
                    f"events accepted, {n - k} right")
            self.certificates_[key] = cert
            self.thresholds_[key] = cert.threshold
        return self

    def accept(self, scores, classes=None) -> np.ndarray:
        """Which events to accept: forecast >= their class's certified threshold.

        Events of a class not seen in ``fit`` are not accepted.
        """
        if not hasattr(self, "thresholds_"):
            from .exceptions import NotFittedError

            raise NotFittedError("this PrecisionGuarantee is not fitted yet: call fit first")
        s, _, _, c = _inputs(scores, None, None, classes)
        thr = np.array([self.thresholds_.get(k.item() if isinstance(k, np.generic) else k,
                                             np.inf) for k in c], dtype=np.float64)
        return s >= thr

    def format(self) -> str:
        """A text table of the certified thresholds."""
        lines = [f"{'class':<24}{'threshold':>10}{'accepted':>10}{'of':>8}{'precision':>11}"
                 f"{'deff':>7}"]
        for k, c in self.certificates_.items():
            thr = "none" if not c.certified else f"{c.threshold:g}"
            prec = "-" if not c.certified else f"{c.precision_calibration:.3f}"
            lines.append(f"{str(k):<24}{thr:>10}{c.n_accepted:>10}{c.n_calibration:>8}"
                         f"{prec:>11}{c.design_effect:>7.2f}")
        return "\n".join(lines)


def certify_precision(calibrated, target=0.95, delta=0.1, *, groups=None, by="kind"):
    """A :class:`PrecisionGuarantee` from recalibrated events with outcomes.

    Parameters
    ----------
    calibrated : CalibratedEvents
        From ``StructuredRecalibrator.predict(pred, y_true)`` on calibration inputs (not
        the recalibrator's own fitting data).
    target, delta : float
    groups : array-like of shape (n_inputs,), optional
        Group of each input (documents, images).
    by : {'kind', 'label'}, default='kind'
        One threshold per event kind, or per kind and label (entity type, object class).

    Returns
    -------
    PrecisionGuarantee
        Fitted; accept new events with :func:`accept_events`.
    """
    t = calibrated.table
    if t.outcome is None:
        raise ParameterError("the events have no outcomes: predict with y_true=")
    if getattr(calibrated, "fallback", None):
        raise ParameterError(
            f"the calibration events of {sorted(calibrated.fallback)} were forecast by the raw "
            "probability because the recalibrator's shift test flagged them: a threshold "
            "certified on them would not apply to the fitted map's forecasts. Certify on "
            "data like the recalibration data, or predict them with shift_check=False if "
            "the flag is a false alarm"
        )
    classes = _event_classes(t, by)
    item_group = np.arange(int(t.item.max()) + 1 if t.n_events else 0) if groups is None \
        else np.unique(np.asarray(groups), return_inverse=True)[1]
    pg = PrecisionGuarantee(target, delta).fit(calibrated.forecast, t.outcome,
                                               groups=item_group[t.item], classes=classes)
    pg.by_ = by
    return pg


def _event_classes(table, by):
    names = np.asarray(table.kind_names, dtype=object)[table.kind]
    if by == "kind":
        return names
    if by == "label":
        return np.array([f"{n}:{int(lab)}" if lab >= 0 else str(n)
                         for n, lab in zip(names, table.label)], dtype=object)
    raise ParameterError(f"`by` must be 'kind' or 'label'; got {by!r}")


def accept_events(guarantee, calibrated, *, by=None) -> np.ndarray:
    """Which of the new events ``calibrated`` (CalibratedEvents) the guarantee accepts.

    ``by`` defaults to the grouping the guarantee was certified with
    (:func:`certify_precision`), else ``'kind'``.
    """
    by = by or getattr(guarantee, "by_", "kind")
    accepted = guarantee.accept(calibrated.forecast, _event_classes(calibrated.table, by))
    fallback = getattr(calibrated, "fallback", None)
    if fallback:
        names = np.asarray(calibrated.table.kind_names, dtype=object)[calibrated.table.kind]
        void = np.isin(names, list(fallback))
        accepted &= ~void
        warnings.warn(
            f"the batch's events of {sorted(fallback)} look unlike the recalibration data "
            "(shift test): the precision guarantee does not cover them, and none of them is "
            "accepted", GuaranteeWarning, stacklevel=2)
    return accepted




class MissControl(SaveLoadMixin, ParamsMixin):
    """Accept candidate events so that the expected share of missed gold objects is <= alpha.

    Parameters
    ----------
    alpha : float, default=0.1
        The expected share of a new group's gold entities (objects) that no accepted
        candidate matches.

    Attributes
    ----------
    threshold_ : float
        Candidates with score >= threshold are accepted (``-inf``: all of them).
    achievable_ : bool
        False when even accepting every candidate misses more than ``alpha`` on the
        calibration groups (the candidates do not cover enough gold): everything is then
        accepted and a :class:`GuaranteeWarning` says so.
    expected_set_size_ : float
        Mean number of accepted candidates per calibration group.
    floor_ : float
        The calibration miss rate when every candidate is accepted.

    Notes
    -----
    Conformal risk control: with ``L_g(t)`` the share of group ``g``'s gold entities not
    matched by a candidate of score >= ``t`` (a non-increasing function of the acceptance
    as ``t`` falls), the threshold is the largest ``t`` with
    ``(G / (G + 1)) mean_g L_g(t) + 1 / (G + 1) <= alpha``. If the groups are exchangeable,
    the expected loss of a new group is at most ``alpha``. Groups without gold entities
    have loss 0. Candidates must match distinct gold entities (exact spans; objects at IoU
    >= 0.5 within class), so that matched candidates count gold entities once.
    """

    def __init__(self, alpha=0.1):
        self.alpha = alpha

    def fit(self, scores, outcomes, groups, n_gold):
        """Choose the threshold from calibration candidates.

        Parameters
        ----------
        scores : array-like of shape (n_candidates,)
            Score of each candidate (its calibrated or raw probability).
        outcomes : array-like of shape (n_candidates,), bool
            Whether the candidate matches a gold entity.
        groups : array-like of shape (n_candidates,)
            Group of each candidate.
        n_gold : dict or array-like
            Number of gold entities of every calibration group: a dict group -> count, or
            ``(group_ids, counts)``; groups without candidates must be listed too.

        Returns
        -------
        self
        """
        alpha = check_float(self.alpha, "alpha", low=0.0, high=1.0, low_inclusive=False)
        s, o, _, _ = _inputs(scores, outcomes, None, None)
        g = np.asarray(groups)
        if g.shape != s.shape:
            raise ParameterError(f"`groups` must have shape {s.shape}; got {g.shape}")
        ids, counts = _gold_counts(n_gold)
        index = {k: i for i, k in enumerate(ids.tolist())}
        try:
            gi = np.array([index[k] for k in g.tolist()], dtype=np.int64)
        except KeyError as exc:
            raise ParameterError(f"`n_gold` has no count for group {exc.args[0]!r}") from None
        G = ids.shape[0]
        hit = np.bincount(gi[o], minlength=G)
        if (hit > counts).any():
            raise ParameterError("more candidates match gold entities than a group has: "
                                 "candidates must match distinct gold entities")
        weight = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0)
        # loss(t) = mean_g (counts_g - hits_g(t)) / counts_g; hits grow as t falls
        order = np.argsort(-s, kind="stable")
        ts = s[order]
        gain = np.where(o[order], weight[gi[order]], 0.0)  # loss drop when accepting each
        base = float(np.mean(np.where(counts > 0, 1.0, 0.0)))  # loss with nothing accepted
        loss_after = base - np.cumsum(gain) / G  # after accepting the first j+1
        bound = lambda L: (G / (G + 1.0)) * L + 1.0 / (G + 1.0)  # noqa: E731
        # candidate thresholds: accept everything with score >= ts[j]; ties move together
        last_of_tie = np.ones(ts.shape[0], dtype=bool)
        last_of_tie[:-1] = ts[1:] != ts[:-1]
        ok = last_of_tie & (bound(loss_after) <= alpha)
        self.floor_ = float(loss_after[-1]) if ts.size else base
        if bound(base) <= alpha:
            self.threshold_, self.achievable_ = np.inf, True
        elif ok.any():
            j = int(np.flatnonzero(ok)[0])
            self.threshold_, self.achievable_ = float(ts[j]), True
        else:
            self.threshold_, self.achievable_ = -np.inf, False
            warnings.warn(
                f"the candidates cover too little gold to miss at most {alpha:g}: accepting "
                f"every candidate still misses {self.floor_:.3f} of the gold entities of a "
                f"calibration group on average (with {G} groups the bound needs "
                f"{(alpha * (G + 1) - 1) / G:.3f}); more candidates per item (e.g. "
                "EntitySpans(candidates=k) with a larger k) would help",
                GuaranteeWarning, stacklevel=2)
        accepted = s >= self.threshold_
        self.expected_set_size_ = float(accepted.sum() / max(G, 1))
        self.n_groups_ = int(G)
        return self

    def accept(self, scores) -> np.ndarray:
        """Which candidates to accept (score >= the threshold)."""
        if not hasattr(self, "threshold_"):
            from .exceptions import NotFittedError

            raise NotFittedError("this MissControl is not fitted yet: call fit first")
        s, _, _, _ = _inputs(scores, None, None, None)
        return s >= self.threshold_


def _gold_counts(n_gold):
    if isinstance(n_gold, dict):
        ids = np.asarray(list(n_gold.keys()))
        counts = np.asarray(list(n_gold.values()), dtype=np.int64)
    elif isinstance(n_gold, tuple) and len(n_gold) == 2:
        ids, counts = np.asarray(n_gold[0]), np.asarray(n_gold[1], dtype=np.int64)
    else:
        raise ParameterTypeError(
            f"`n_gold` must be a dict group -> count or (group_ids, counts); got {describe(n_gold)}")
    if ids.shape != counts.shape or (counts < 0).any():
        raise ParameterError("`n_gold` must give a non-negative count per group")
    return ids, counts
