"""Decisions with finite-sample guarantees: accept at a certified precision, miss at most alpha.

Calibrated probabilities say how sure the model is; a user must then decide: accept an
entity without review, flag an image whose nuclei may be missed. This module turns the
events of a calibration set (their forecasts and outcomes) into decisions whose error
rates are guaranteed on new data, under one assumption: the groups of the new data
(documents, images, writers) are exchangeable with those of the calibration set. Nothing
else enters the bound: no variance, correlation or design effect is estimated.

:class:`PrecisionGuarantee`
    A threshold per class of events (event kind, or kind and entity type / object class)
    such that, with probability at least ``1 - delta`` over the calibration groups, the
    events a new group has accepted (forecast at least the threshold) are right in a share
    at least ``target`` on average over groups. Each group contributes one bounded term
    per threshold (its share of wrong accepted events minus ``1 - target``); a betting
    e-value tests the mean of these terms, and thresholds are tested from the strict end
    down by the fallback procedure, so no Bonferroni correction over the grid is paid.
    Weighted by density ratios (:meth:`PrecisionGuarantee.fit` ``weights=``), the same
    certificate holds for a shifted batch (covariate shift, Tibshirani et al. 2019;
    Park et al. 2022).

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
I. Waudby-Smith, A. Ramdas, *Estimating means of bounded random variables by betting*,
JRSS B 86(1), 2024.
B. L. Wiens, *A fixed sequence Bonferroni procedure for testing multiple endpoints*,
Pharmaceutical Statistics 2(3), 2003.
B. L. Wiens, A. Dmitrienko, *The fallback procedure for evaluating a single family of
hypotheses*, Journal of Biopharmaceutical Statistics 15(6), 2005.
R. J. Tibshirani, R. Foygel Barber, E. J. Candes, A. Ramdas, *Conformal prediction under
covariate shift*, NeurIPS 2019.
S. Park, E. Dobriban, I. Lee, O. Bastani, *PAC prediction sets under covariate shift*,
ICLR 2022.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ._estimator import ParamsMixin
from ._validation import as_float_array, as_ids, as_probabilities, check_float, describe
from .exceptions import ParameterError, ParameterTypeError
from .io import SaveLoadMixin

__all__ = [
    "PrecisionCertificate",
    "accept_events",
    "GuaranteeWarning",
    "PrecisionGuarantee",
    "MissControl",
    "certify_precision",
    "betting_evalues",
    "binomial_tail_pvalue",
    "groups_needed",
    "design_effect",
]

#: Spacing of the thresholds a :class:`PrecisionGuarantee` tests (fixed before any data).
THRESHOLD_STEP = 0.005
#: Bets of the mixture e-value (:func:`betting_evalues`): fractions of the largest bet
#: that keeps the capital positive, dense near 1 (clean groups, whose terms vary little,
#: are best bet on almost fully) and reaching down to 0.2 (0/1 terms of single events)
_BETS = 1.0 - np.geomspace(0.005, 0.8, 12)


class GuaranteeWarning(UserWarning):
    """A guarantee could not be certified with the data given (nothing is accepted)."""


def binomial_tail_pvalue(n_errors, n_accepted, max_error_rate):
    """``P(Bin(n, a) <= k)``: the p-value of "error rate >= a" after ``k`` errors in ``n``.

    Real (non-integer) ``n`` and ``k`` (effective counts) are allowed: the regularised
    incomplete beta function ``I_{1-a}(n - k, k + 1)`` extends the binomial CDF. 1 when
    nothing was accepted.

    Raises
    ------
    ParameterError
        If a count is negative or not finite, ``k > n``, or ``a`` is outside [0, 1].
    """
    from scipy.special import betainc

    n = np.asarray(n_accepted, dtype=np.float64)
    k = np.asarray(n_errors, dtype=np.float64)
    a = check_float(max_error_rate, "max_error_rate", low=0.0, high=1.0)
    for name, v in (("n_errors", k), ("n_accepted", n)):
        if not np.isfinite(v).all() or (v < 0).any():
            raise ParameterError(f"`{name}` must be finite and >= 0; got {v.tolist()}")
    if (k > n).any():
        raise ParameterError("`n_errors` cannot exceed `n_accepted`")
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n - k > 0, betainc(np.maximum(n - k, 1e-300), k + 1.0, 1.0 - a),
                     1.0)
    return np.where(n > 0, np.clip(p, 0.0, 1.0), 1.0)


def design_effect(errors, groups):
    """Kish's design effect of the mean of ``errors`` (0/1) over events clustered in ``groups``.

    A diagnostic (how much grouping inflates the variance of an error rate); the
    certificates of this module do not use it. Returns ``(rho, deff)``: the intra-group
    correlation (ANOVA estimator, clipped to [0, 1]) and ``1 + (m - 1) rho`` with
    ``m = sum(n_g^2) / sum(n_g)``. With one group, or no variation, ``rho`` is 0 when
    every group has one event and 1 otherwise.
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


def betting_evalues(values, upper=1.0):
    """E-values against "mean >= 0" of i.i.d. terms bounded above by ``upper``.

    For each column of ``values`` (rows: independent draws, e.g. groups), the mixture
    over a fixed grid of bets ``lambda`` of the capital ``prod_i (1 - lambda x_i / upper)``
    (Waudby-Smith & Ramdas, 2024). If the terms have a mean >= 0, each capital has
    expectation at most 1, and so has their average: ``P(E >= 1 / delta) <= delta``
    (Markov). The average does not depend on the order of the rows.

    Parameters
    ----------
    values : array-like of shape (n_draws,) or (n_draws, n_tests)
    upper : float or array-like of shape (n_tests,), default=1.0
        An upper bound of the terms (> 0).

    Returns
    -------
    ndarray of shape (n_tests,) (a float for 1-d input)
    """
    x = as_float_array(values, "values")
    one = x.ndim == 1
    x = x[:, None] if one else x
    if x.ndim != 2:
        raise ParameterError(f"`values` must be 1-d or 2-d; got shape {x.shape}")
    u = as_float_array(upper, "upper")
    if u.ndim > 1 or (np.ndim(upper) == 1 and u.shape[0] != x.shape[1]):
        raise ParameterError(f"`upper` must be a number or one bound per column of `values` "
                             f"({x.shape[1]}); got shape {u.shape}")
    u = np.broadcast_to(u, (x.shape[1],))
    if not (np.isfinite(u).all() and (u > 0).all()):
        raise ParameterError("`upper` must be finite and > 0")
    if (x > u[None, :] * (1 + 1e-12)).any():
        raise ParameterError("`values` exceed their upper bound `upper`")
    z = np.minimum(x / u[None, :], 1.0)
    logcap = np.log1p(-_BETS[None, None, :] * z[:, :, None]).sum(axis=0)  # (tests, bets)
    top = logcap.max(axis=1)
    e = np.exp(np.minimum(top, 700.0)) * np.exp(logcap - top[:, None]).mean(axis=1)
    return float(e[0]) if one else e


def groups_needed(target: float, delta: float) -> int:
    """The fewest calibration groups with which a :class:`PrecisionGuarantee` can certify
    ``target`` at ``delta``: that many groups whose accepted events are all right."""
    target = check_float(target, "target", low=0.0, high=1.0, low_inclusive=False,
                         high_inclusive=False)
    delta = check_float(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                        high_inclusive=False)
    a = 1.0 - target
    G = np.arange(1, 100_001)[:, None]
    logcap = G * np.log1p(_BETS[None, :] * a / target)
    top = logcap.max(axis=1, keepdims=True)
    log_e = top[:, 0] + np.log(np.exp(logcap - top).mean(axis=1))
    ok = np.flatnonzero(log_e >= np.log(1.0 / (_MAIN_SHARE * delta)))
    return int(G[ok[0], 0]) if ok.size else int(G[-1, 0])


def _threshold_grid(step: float) -> np.ndarray:
    return np.round(np.arange(step, 1.0 + step / 2, step), 10)


def _group_counts(scores, wrong, gi, G, t, weights):
    """Accepted and wrong-accepted (weighted) events of each group at each threshold.

    Returns ``(A, FP)`` of shape ``(G, T)``: ``A[g, j]`` sums the weights of group ``g``'s
    events with score >= ``t[j]`` (``t`` ascending).
    """
    T = t.shape[0]
    k = np.searchsorted(t, scores, side="right")  # accepted at t[0..k-1]
    idx = gi * (T + 1) + k
    C = np.bincount(idx, weights=weights, minlength=G * (T + 1)).reshape(G, T + 1)
    F = np.bincount(idx, weights=weights * wrong, minlength=G * (T + 1)).reshape(G, T + 1)
    A = np.cumsum(C[:, :0:-1], axis=1)[:, ::-1]
    FP = np.cumsum(F[:, :0:-1], axis=1)[:, ::-1]
    n_acc = np.cumsum(np.bincount(idx, minlength=G * (T + 1)).reshape(G, T + 1)[:, :0:-1],
                      axis=1)[:, ::-1]
    return A, FP, n_acc


#: The shares of delta of the thresholds a :class:`PrecisionGuarantee` starts from: the
#: largest grid threshold at most the target (accepting where calibrated forecasts reach
#: the target is precise enough), then, for forecasts too confident or errors clustered
#: among the less confident events, thresholds a quarter, half and three quarters of the
#: way from the target to 1. Fixed before any data.
_ANCHORS = ((0.0, 0.7), (0.25, 0.1), (0.5, 0.1), (0.75, 0.1))
#: The share of delta of the threshold at the target (the least any certificate gets)
_MAIN_SHARE = _ANCHORS[0][1]


def _allocation(t, target):
    """Each grid threshold's share of delta (the anchors'; 0 elsewhere), and the index of
    the threshold at the target."""
    share = np.zeros(t.shape[0])
    main = int(np.searchsorted(t, target + 1e-12)) - 1
    for frac, w in _ANCHORS:
        j = int(np.searchsorted(t, target + frac * (1.0 - target) + 1e-12)) - 1
        share[max(j, 0)] += w
    return share, main


def _fallback(E, share, delta, usable):
    """The loosest threshold index certified by the fallback procedure, or None.

    Thresholds are tested from the strictest down; threshold ``j`` is tested at level
    ``share[j] * delta`` plus the level of ``j + 1`` if that one was certified (a run of
    certified thresholds passes its level on), and is certified when ``E[j] >= 1 / level``.
    """
    level, passed, best = 0.0, False, None
    for j in range(E.shape[0] - 1, -1, -1):
        level = share[j] * delta + (level if passed else 0.0)
        passed = bool(level > 0 and usable[j] and E[j] >= 1.0 / level)
        if passed:
            best = j
    return best


def _inputs(scores, outcomes, groups, classes):
    s = as_probabilities(scores, "scores")
    n = s.shape[0]
    if outcomes is not None:
        o = np.asarray(outcomes)
        if o.shape != (n,):
            raise ParameterError(f"`outcomes` must have shape ({n},) (one per score of "
                                 f"`scores`); got {o.shape}")
        if o.dtype != np.bool_:
            if o.dtype.kind not in "biuf" or not np.isin(o, (0, 1)).all():
                raise ParameterError("`outcomes` must be 0/1 or boolean")
            o = o.astype(bool)
    else:
        o = None
    g = np.arange(n) if groups is None else as_ids(groups, "groups", n,
                                                 "one per score of `scores`")
    c = np.zeros(n, dtype=np.int64) if classes is None else as_ids(classes, "classes", n,
                                                                   "one per score of `scores`")
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
    n_groups : int
        Calibration groups with events of the class.
    n_accepted : int
        Of the events, accepted at the threshold.
    accepted_share : float
        The share of calibration events accepted (the expected share on new data).
    precision_calibration : float
        Precision of the accepted calibration events (pooled; weighted when fit with
        weights).
    group_precision : float
        Mean over calibration groups with accepted events of their share of right ones
        (the quantity certified).
    evalue : float
        The e-value at the threshold (at the first threshold tested when nothing is
        certified); a certificate needs ``1 / (share * delta)``.
    effective_groups : float
        Kish's effective number of groups of the weights (the number of groups when
        unweighted).
    message : str
        What was certified, or why nothing was.
    """

    threshold: float
    certified: bool
    n_calibration: int
    n_groups: int
    n_accepted: int
    accepted_share: float
    precision_calibration: float
    group_precision: float
    evalue: float
    effective_groups: float
    message: str


class PrecisionGuarantee(SaveLoadMixin, ParamsMixin):
    """Accept events at a precision certified with probability ``1 - delta``.

    Parameters
    ----------
    target : float, default=0.95
        The precision required of the accepted events of new groups.
    delta : float, default=0.1
        The guarantee fails with probability at most ``delta`` over the calibration data.
    step : float, default=0.005
        Spacing of the thresholds tested (fixed before seeing data).

    Attributes
    ----------
    certificates_ : dict
        Class -> :class:`PrecisionCertificate`.
    thresholds_ : dict
        Class -> threshold (``inf`` where nothing could be certified).

    Notes
    -----
    *What is guaranteed.* For a threshold ``t`` and a group ``g`` (document, image, or
    each event alone when no groups are given) with ``A_g(t)`` accepted events of which
    ``FP_g(t)`` are wrong, let ``R_g(t) = FP_g(t) / A_g(t) - (1 - target)`` (0 when
    ``A_g(t) = 0``). "The accepted events of a new group are right in a share >= target
    on average" is ``E[R_g(t)] <= 0``. If calibration and new groups are i.i.d. draws
    (exchangeable groups, whatever the dependence within a group), then with probability
    at least ``1 - delta`` over the calibration groups, every class's certified
    threshold satisfies it.

    *Why this holds.* ``R_g(t)`` lies in ``[-(1 - target), target]``, so for every bet
    ``0 <= lambda < 1`` the capital ``prod_g (1 - lambda R_g(t) / target)`` has
    expectation at most 1 when ``E[R_g(t)] >= 0``; so has the average over a fixed grid
    of bets, an e-value ``E(t)``, and by Markov's inequality ``P(E(t) >= 1/a) <= a``
    (:func:`betting_evalues`). When every group holds one event (no groups given), the
    terms are 0/1 and the exact binomial tail p-value replaces ``1 / E(t)``.

    Thresholds ``step`` apart are tested by the fallback procedure (Wiens, 2003), from
    the strictest down, with shares of ``delta`` fixed before any data: ``0.7 delta`` at the
    largest threshold at most ``target`` and ``0.1 delta`` at each of the thresholds a
    quarter, half and three quarters of the way from ``target`` to 1. A threshold is
    certified when its e-value reaches ``1 / level``, where its level is its own share
    plus, if the next stricter threshold was certified, that one's level: a run of
    certified thresholds passes its level down. The fallback procedure is a shortcut of
    a closed test of weighted Bonferroni tests, so with probability at least
    ``1 - delta`` no threshold whose precision is below ``target`` is certified, whatever
    the dependence between the e-values (Wiens & Dmitrienko, 2005). The loosest certified
    threshold is used. No variance, correlation or design effect is estimated: the bound
    holds in finite samples.

    *Per group, not per event.* The certified quantity weighs every group alike (a
    document with one accepted entity as much as one with fifty). The precision pooled
    over events agrees with it unless precision depends on how many events a group has
    accepted; ``benchmarks/guarantees_study.py`` reports both on every shipped dataset.
    A statement on pooled precision needs a bound on the number of events per group, and
    a group that could hold many wrong events makes it unprovable with tens of groups.

    *How much data.* A group can at best multiply the capital by about ``1 / target``, so
    a certificate needs a number of groups whose accepted events are all right
    (:func:`groups_needed`: 29 at target 0.9 and delta 0.1, 14 at 0.8, 59 at 0.95), and
    more when some are wrong. Classes with fewer groups are refused, with the reason.

    *Under shift.* With ``weights`` (density ratios of the new data to the calibration
    data, per event), the terms are reweighted (``R_g`` over weighted counts, times the
    group's mean weight), the upper bound scaled by the largest weight, and the
    guarantee holds for groups drawn from the new distribution if the weights are its
    density ratio (covariate shift). The effective number of groups says what the
    weighting costs.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.guarantees import PrecisionGuarantee
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(4000)                        # calibrated forecasts
    >>> y = rng.random(4000) < p                    # outcomes
    >>> g = PrecisionGuarantee(target=0.9, delta=0.1).fit(p, y)
    >>> t = g.thresholds_[0]
    >>> bool(0.8 <= t < 1.0), bool(y[p >= t].mean() >= 0.9)
    (True, True)
    """

    def __init__(self, target=0.95, delta=0.1, *, step=THRESHOLD_STEP):
        self.target = target
        self.delta = delta
        self.step = step

    def _check(self):
        check_float(self.target, "target", low=0.0, high=1.0, low_inclusive=False,
                    high_inclusive=False)
        check_float(self.delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                    high_inclusive=False)
        check_float(self.step, "step", low=1e-4, high=0.1)
        return _threshold_grid(float(self.step))

    def fit(self, scores, outcomes, *, groups=None, classes=None, weights=None):
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
        weights : array-like of shape (n_events,), optional
            Density ratio of the new data to the calibration data at each event (finite,
            >= 0), for a certificate on shifted data (see Notes).

        Returns
        -------
        self
        """
        t = self._check()
        s, o, g, c = _inputs(scores, outcomes, groups, classes)
        if o is None:
            raise ParameterError("`outcomes` are required to certify a precision")
        if weights is None:
            w = np.ones(s.shape[0])
        else:
            w = as_float_array(weights, "weights", ndim=1, shape=(s.shape[0],))
            if (w < 0).any():
                raise ParameterError("`weights` must be >= 0 (density ratios)")
        a = 1.0 - float(self.target)
        self.certificates_, self.thresholds_ = {}, {}
        self.weighted_ = weights is not None
        for cls in (np.unique(c) if c.size else []):
            rows = c == cls
            key = cls.item() if isinstance(cls, np.generic) else cls
            cert = self._certify_class(s[rows], ~o[rows], g[rows], w[rows], t, a, key)
            if not cert.certified:
                warnings.warn(cert.message, GuaranteeWarning, stacklevel=2)
            self.certificates_[key] = cert
            self.thresholds_[key] = cert.threshold
        return self

    def _certify_class(self, s, wrong, g, w, t, a, key):
        target, delta = float(self.target), float(self.delta)
        _, gi = np.unique(g, return_inverse=True)
        G = int(gi.max()) + 1 if gi.size else 0
        n = int(s.shape[0])
        A, FP, n_acc = _group_counts(s, wrong.astype(np.float64), gi, G, t, w)
        gw = np.bincount(gi, weights=w, minlength=G) / np.maximum(np.bincount(gi, minlength=G), 1)
        ess = float(gw.sum() ** 2 / max((gw**2).sum(), 1e-300)) if G else 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            R = np.where(A > 0, FP / np.where(A > 0, A, 1.0) - a, 0.0) * gw[:, None]
        upper = target * max(float(gw.max()) if G else 1.0, 1e-12)
        if G and n == G and not self.weighted_:
            # one event per group: each term is 0/1 minus (1 - target), and the exact
            # binomial tail is the sharpest valid p-value (reported as its inverse)
            E = 1.0 / np.maximum(binomial_tail_pvalue(FP.sum(axis=0), A.sum(axis=0), a),
                                 1e-300)
        else:
            E = betting_evalues(R, upper) if G else np.zeros(t.shape[0])
        share, main = _allocation(t, target)
        best = _fallback(E, share, delta, n_acc.sum(axis=0) > 0)
        first = float(E[main]) if main >= 0 else 0.0
        main = max(main, 0)
        if best is None:
            need = groups_needed(target, delta)
            groups_acc = int((n_acc[:, main] > 0).sum())
            if G == 0:
                why = "there are no calibration events"
            elif groups_acc < need:
                why = (f"only {groups_acc} of its {G} calibration groups have an event with "
                       f"forecast >= {target:g}, and even all-right groups certify precision "
                       f"{target:g} at delta {delta:g} from {need} groups on")
            else:
                prec = 1.0 - float(FP[:, main].sum() / max(A[:, main].sum(), 1e-300))
                why = (f"the {groups_acc} groups with events of forecast >= {target:g} give "
                       f"evidence {first:.3g} against 'precision below {target:g}' (precision "
                       f"of those events {prec:.3f}; {1 / (_MAIN_SHARE * delta):.3g} is needed)")
            msg = (f"cannot certify precision {target:g} at delta {delta:g} for class {key!r} "
                   f"({n} calibration events in {G} groups): {why}; nothing is accepted. More "
                   "calibration groups, a lower target or a larger delta would help")
            return PrecisionCertificate(np.inf, False, n, G, 0, 0.0, float("nan"),
                                        float("nan"), first or 0.0, ess, msg)
        thr = float(t[best])
        acc = s >= thr
        k = int(acc.sum())
        ra = A[:, best] > 0
        prec = 1.0 - float((w * wrong)[acc].sum() / max(w[acc].sum(), 1e-300))
        gprec = 1.0 - float((FP[ra, best] / A[ra, best]).mean()) if ra.any() else float("nan")
        msg = (f"precision >= {target:g} certified at threshold {thr:g} (confidence "
               f"{1 - delta:g}, groups as units): {k} of {n} calibration events in {G} groups "
               f"accepted, {prec:.3f} right")
        return PrecisionCertificate(thr, True, n, G, k, k / max(n, 1), prec, gprec,
                                    float(E[best]), ess, msg)

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
        lines = [f"{'class':<24}{'threshold':>10}{'accepted':>10}{'of':>8}{'groups':>8}"
                 f"{'precision':>11}{'e-value':>10}"]
        for k, c in self.certificates_.items():
            thr = "none" if not c.certified else f"{c.threshold:g}"
            prec = "-" if not c.certified else f"{c.precision_calibration:.3f}"
            lines.append(f"{str(k):<24}{thr:>10}{c.n_accepted:>10}{c.n_calibration:>8}"
                         f"{c.n_groups:>8}{prec:>11}{c.evalue:>10.3g}")
        return "\n".join(lines)


def certify_precision(calibrated, target=0.95, delta=0.1, *, groups=None, by="kind",
                      batch=None, batch_groups=None):
    """A :class:`PrecisionGuarantee` from recalibrated events with outcomes.

    Parameters
    ----------
    calibrated : CalibratedEvents
        From ``StructuredRecalibrator.predict(pred, y_true)`` on calibration inputs (not
        the recalibrator's own fitting data).
    target, delta : float
    groups : array-like of shape (n_inputs,), optional
        Group of each calibration input (documents, images): one id per input of
        ``calibrated`` (not per event).
    by : {'kind', 'label'}, default='kind'
        One threshold per event kind, or per kind and label (entity type, object class).
    batch : CalibratedEvents, optional
        New events the certificate is for, when they are shifted from the calibration
        events: each calibration event is weighted by the density ratio of the batch to
        the calibration events at its columns (:func:`structcal.shift.density_ratio`), so
        that the certificate holds for data like the batch (see
        :class:`PrecisionGuarantee`, *Under shift*); where the batch's kinds fell back to
        other maps, the calibration events are forecast by those maps too
        (``CalibratedEvents.maps``). :func:`accept_events` on a batch the recalibrator
        flagged as shifted requires it.
    batch_groups : array-like of shape (n_batch_inputs,), optional
        Group of each input of ``batch``.

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
            f"the calibration events of {sorted(calibrated.fallback)} were forecast by "
            "another map than the fitted one (adapted to them, or a fallback) because the "
            "recalibrator's shift test flagged them: a threshold certified on them would "
            "not apply to the fitted map's forecasts. Certify on data like the "
            "recalibration data, or predict them with shift_check=False if the flag is a "
            "false alarm"
        )
    classes = _event_classes(t, by)
    item_group = _item_group_ids(groups, t, "groups")
    weights, forecast = None, calibrated.forecast
    if batch is not None:
        weights, info = _batch_weights(calibrated, item_group, batch, batch_groups)
        if getattr(batch, "fallback", None):
            if getattr(batch, "maps", None) is None:
                raise ParameterError(
                    "the batch's kinds fell back to other maps, and it does not carry them: "
                    "predict it with StructuredRecalibrator.predict or predict_events")
            # the batch's kinds that fell back are forecast by other maps than the
            # calibration events were: forecast these by the batch's maps too
            forecast = batch.maps(t)
    pg = PrecisionGuarantee(target, delta).fit(forecast, t.outcome,
                                               groups=item_group[t.item], classes=classes,
                                               weights=weights)
    pg.by_ = by
    pg.batch_ = None if batch is None else _fingerprint(batch)
    pg.batch_weights_ = {} if batch is None else info
    return pg


def _item_group_ids(groups, table, name):
    n_items = max(int(getattr(table, "n_items", 0) or 0),
                  int(table.item.max()) + 1 if table.n_events else 0)
    if groups is None:
        return np.arange(n_items)
    g = as_ids(groups, name, n_items, "one per input, not per event")
    return np.unique(g, return_inverse=True)[1]


def _fingerprint(calibrated) -> str:
    import hashlib

    h = hashlib.sha256()
    h.update(np.ascontiguousarray(calibrated.forecast, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(calibrated.table.item, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def _kind_columns(calibrated, k):
    """The columns a map of kind ``k`` may read: raw probability (if any) and features."""
    t = calibrated.table
    rows = t.kind == k
    cols = np.flatnonzero(t.defined[k]) if t.X.size else np.zeros(0, np.int64)
    X = t.X[np.ix_(rows, cols)] if cols.size else np.zeros((int(rows.sum()), 0))
    if t.raw is not None and np.isfinite(t.raw[rows]).all():
        X = np.column_stack([t.raw[rows], X])
    return rows, X


def _batch_weights(calibrated, item_group, batch, batch_groups):
    """Density ratios batch / calibration of each calibration event, per kind."""
    from .shift import density_ratio

    t, b = calibrated.table, batch.table
    bg = _item_group_ids(batch_groups, b, "batch_groups")
    w = np.ones(t.n_events)
    info = {}
    for k, name in enumerate(t.kind_names):
        rows, X = _kind_columns(calibrated, k)
        if name not in b.kind_names or not rows.any():
            continue
        kb = b.kind_names.index(name)
        brows, Xb = _kind_columns(batch, kb)
        if Xb.shape[1] != X.shape[1] or not brows.any():
            raise ParameterError(f"the batch's events of {name!r} have other columns than the "
                                 "calibration events")
        r = density_ratio(X, Xb, item_group[t.item[rows]], bg[b.item[brows]])
        w[rows] = r.weights
        info[name] = {"effective_sample_size": r.effective_sample_size,
                      "n": int(rows.sum()), "clipped": r.clipped_share}
    return w, info


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
    (:func:`certify_precision`), else ``'kind'``. Events of kinds the recalibrator
    flagged as shifted in this batch (``calibrated.shifted``) are accepted only under a
    certificate weighted toward this very batch (``certify_precision(...,
    batch=calibrated)``); otherwise none of them is, and a :class:`GuaranteeWarning`
    names the kinds.
    """
    by = by or getattr(guarantee, "by_", "kind")
    accepted = guarantee.accept(calibrated.forecast, _event_classes(calibrated.table, by))
    weighted_here = getattr(guarantee, "batch_", None) == _fingerprint(calibrated)
    void = set()
    if not weighted_here:
        void = set(getattr(calibrated, "fallback", None) or {}) | set(
            getattr(calibrated, "shifted", None) or ())
    if void:
        names = np.asarray(calibrated.table.kind_names, dtype=object)[calibrated.table.kind]
        accepted &= ~np.isin(names, list(void))
        warnings.warn(
            f"the batch's events of {sorted(void)} look unlike the calibration data (shift "
            "test): the precision certificate does not cover them, and none of them is "
            "accepted. Certify for this batch with certify_precision(..., batch=...) to "
            "weight the calibration events toward it", GuaranteeWarning, stacklevel=2)
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
        g = as_ids(groups, "groups", s.shape[0], "one per score of `scores`")
        ids, counts = _gold_counts(n_gold)
        if ids.shape[0] == 0:
            raise ParameterError("`n_gold` lists no calibration group: miss control needs "
                                 "the gold count of at least one group")
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
        counts = np.asarray(list(n_gold.values()))
    elif isinstance(n_gold, tuple) and len(n_gold) == 2:
        ids, counts = np.asarray(n_gold[0]), np.asarray(n_gold[1])
    else:
        raise ParameterTypeError(
            f"`n_gold` must be a dict group -> count or (group_ids, counts); got {describe(n_gold)}")
    if ids.ndim != 1 or ids.shape != counts.shape:
        raise ParameterError(f"`n_gold` must give one count per group id; got {ids.shape} ids "
                             f"and {counts.shape} counts")
    if counts.size and (counts.dtype.kind not in "biuf" or not np.isfinite(
            counts.astype(np.float64)).all() or (counts < 0).any()
            or (counts != np.round(counts)).any()):
        raise ParameterError("`n_gold` counts must be whole numbers >= 0; got "
                             f"{counts[:5].tolist()}")
    as_ids(ids, "n_gold", ids.shape[0], "group ids")
    uniq, first = np.unique(ids, return_index=True)
    if uniq.shape[0] != ids.shape[0]:
        dup = np.setdiff1d(np.arange(ids.shape[0]), first)[:3]
        raise ParameterError(f"`n_gold` lists group ids more than once (e.g. "
                             f"{ids[dup].tolist()}): give one count per group")
    return ids, counts.astype(np.int64)
