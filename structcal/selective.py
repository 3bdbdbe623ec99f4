"""Selective prediction: abstain when not confident enough, or when abstaining costs less.

* :func:`risk_coverage_curve` — the error rate of the predictions kept when only those
  with confidence at least ``t`` are kept, for every threshold ``t``;
* :func:`selective_threshold` — the threshold that keeps as many predictions as possible
  while their accuracy on held-out data reaches a target;
* :func:`decide` — the action of least expected loss under a loss matrix, or abstention
  when its (expected) cost is lower (Chow's rule for the 0-1 loss).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ._validation import as_float_array, check_float
from .exceptions import ParameterError
from .metrics._inputs import (
    check_binary_outcomes,
    check_labels,
    check_probabilities,
    check_sample_weight,
)

__all__ = [
    "Decisions",
    "RiskCoverageCurve",
    "SelectiveThreshold",
    "TargetNotReachedWarning",
    "decide",
    "risk_coverage_curve",
    "selective_threshold",
    "top_label_confidence",
]


class TargetNotReachedWarning(UserWarning):
    """No confidence threshold reaches the requested accuracy on the given data."""


@dataclass(frozen=True)
class RiskCoverageCurve:
    """Selective risk as a function of coverage.

    Attributes
    ----------
    thresholds : ndarray of shape (n_thresholds,)
        The distinct confidences, in decreasing order; point ``k`` keeps the predictions
        with ``confidence >= thresholds[k]``.
    coverage : ndarray of shape (n_thresholds,)
        Fraction (of the total weight) of predictions kept; increasing, ending at 1.
    risk : ndarray of shape (n_thresholds,)
        Error rate among the predictions kept.
    aurc : float
        Area under the risk-coverage curve, ``sum_k (coverage_k - coverage_{k-1})
        risk_k`` (lower is better; Geifman et al., 2019).
    """

    thresholds: np.ndarray
    coverage: np.ndarray
    risk: np.ndarray
    aurc: float

    @property
    def accuracy(self) -> np.ndarray:
        """``1 - risk``: accuracy of the predictions kept at each threshold."""
        return 1.0 - self.risk


@dataclass(frozen=True)
class SelectiveThreshold:
    """A confidence threshold for selective prediction.

    Attributes
    ----------
    threshold : float
        Keep predictions with ``confidence >= threshold`` (``inf``: keep none).
    coverage : float
        Fraction of the held-out predictions kept.
    accuracy : float
        Their accuracy (NaN when none is kept).
    target_accuracy : float
        The requested accuracy.
    achieved : bool
        Whether a threshold reaching the target exists.
    """

    threshold: float
    coverage: float
    accuracy: float
    target_accuracy: float
    achieved: bool

    def accept(self, confidence) -> np.ndarray:
        """Boolean mask of the predictions to keep."""
        return as_float_array(confidence, "confidence") >= self.threshold


def _check_selective_input(correct, confidence, sample_weight):
    conf = as_float_array(confidence, "confidence", ndim=1, allow_empty=False)
    ok = check_binary_outcomes(correct, "correct", n=conf.shape[0])
    w = check_sample_weight(sample_weight, conf.shape[0])
    return ok, conf, (np.ones_like(conf) if w is None else w)


def top_label_confidence(y_true, y_prob):
    """Correctness and confidence of arg-max predictions.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Integer labels ``0..K-1``, or 0/1 outcomes for 1-d ``y_prob``.
    y_prob : array-like of shape (n_samples, K) or (n_samples,)
        Probability rows (or probabilities of class 1).

    Returns
    -------
    correct : ndarray of shape (n_samples,)
        1.0 where the most probable class is the true one.
    confidence : ndarray of shape (n_samples,)
        The largest probability.
    """
    P = check_probabilities(y_prob)
    if P.ndim == 1:
        y = check_binary_outcomes(y_true, n=P.shape[0]).astype(np.int64)
        P = np.stack([1.0 - P, P], axis=1)
    else:
        y = check_labels(y_true, P.shape[0], P.shape[1])
    pred = np.argmax(P, axis=1)
    return (pred == y).astype(np.float64), P[np.arange(P.shape[0]), pred]


def risk_coverage_curve(correct, confidence, *, sample_weight=None) -> RiskCoverageCurve:
    """Risk-coverage curve of predictions ranked by confidence.

    Parameters
    ----------
    correct : array-like of shape (n_samples,)
        1 (or True) where a prediction is right, 0 where it is wrong.
    confidence : array-like of shape (n_samples,)
        Any real confidence score (higher = more confident); tied scores are kept or
        dropped together.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative weights.

    Returns
    -------
    RiskCoverageCurve

    References
    ----------
    Y. Geifman, R. El-Yaniv, *Selective classification for deep neural networks*,
    NeurIPS 2017; Y. Geifman, G. Uziel, R. El-Yaniv, *Bias-reduced uncertainty
    estimation for deep neural classifiers*, ICLR 2019 (AURC).

    Examples
    --------
    >>> from structcal.selective import risk_coverage_curve
    >>> rc = risk_coverage_curve([1, 1, 0, 1], [0.9, 0.8, 0.7, 0.6])
    >>> rc.coverage.tolist(), rc.risk.tolist()
    ([0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.3333333333333333, 0.25])
    """
    ok, conf, w = _check_selective_input(correct, confidence, sample_weight)
    order = np.argsort(-conf, kind="stable")
    conf, ok, w = conf[order], ok[order], w[order]
    last = np.flatnonzero(np.r_[conf[1:] != conf[:-1], True])  # end of each tie group
    cw = np.cumsum(w)[last]
    cerr = np.cumsum(w * (1.0 - ok))[last]
    total = cw[-1]
    if not total > 0:
        raise ParameterError("`sample_weight` must have a positive sum")
    with np.errstate(invalid="ignore", divide="ignore"):
        risk = np.where(cw > 0, cerr / np.where(cw > 0, cw, 1.0), np.nan)
    coverage = cw / total
    steps = np.diff(np.r_[0.0, coverage])
    aurc = float(np.nansum(steps * risk))
    return RiskCoverageCurve(conf[last], coverage, risk, aurc)


def selective_threshold(
    correct, confidence, target_accuracy, *, sample_weight=None
) -> SelectiveThreshold:
    """The lowest confidence threshold whose kept predictions reach a target accuracy.

    Among all thresholds (the distinct confidences of the held-out data), the one that
    keeps the most predictions while their accuracy is at least ``target_accuracy``.
    This is an empirical choice: expect the accuracy on new data to scatter around the
    target by about ``sqrt(a (1 - a) / n_kept)``.

    Parameters
    ----------
    correct : array-like of shape (n_samples,)
        1 where a held-out prediction is right, 0 where it is wrong.
    confidence : array-like of shape (n_samples,)
        Confidence scores of the held-out predictions.
    target_accuracy : float
        Required accuracy of the kept predictions, in (0, 1].
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative weights.

    Returns
    -------
    SelectiveThreshold

    Warns
    -----
    TargetNotReachedWarning
        When no threshold reaches the target; the result then keeps nothing
        (``threshold=inf``, ``achieved=False``).

    Examples
    --------
    >>> from structcal.selective import selective_threshold
    >>> t = selective_threshold([1, 1, 0, 1, 0], [0.9, 0.8, 0.7, 0.6, 0.5], 0.75)
    >>> t.threshold, t.coverage, t.accuracy
    (0.6, 0.8, 0.75)
    """
    target = check_float(target_accuracy, "target_accuracy", low=0.0, high=1.0,
                         low_inclusive=False)
    rc = risk_coverage_curve(correct, confidence, sample_weight=sample_weight)
    acc = rc.accuracy
    good = np.flatnonzero(acc >= target - 1e-12)
    if good.size == 0:
        warnings.warn(
            f"no confidence threshold reaches accuracy {target:g} on these data (the most "
            f"confident group has accuracy {acc[0]:.4g}); the result keeps no prediction",
            TargetNotReachedWarning,
            stacklevel=2,
        )
        return SelectiveThreshold(np.inf, 0.0, np.nan, target, False)
    k = good[-1]  # the largest coverage meeting the target
    return SelectiveThreshold(float(rc.thresholds[k]), float(rc.coverage[k]), float(acc[k]),
                              target, True)


@dataclass(frozen=True)
class Decisions:
    """Loss-minimising decisions, possibly abstaining.

    Attributes
    ----------
    actions : ndarray of shape (n_samples,), dtype int64
        The chosen action (column of the loss matrix), or -1 for abstention.
    expected_loss : ndarray of shape (n_samples,)
        Expected loss of the decision taken.
    action_losses : ndarray of shape (n_samples, n_actions)
        Expected loss of every action.
    abstain_loss : ndarray of shape (n_samples,)
        Expected cost of abstaining (``inf`` when abstention is not allowed).
    """

    actions: np.ndarray
    expected_loss: np.ndarray
    action_losses: np.ndarray
    abstain_loss: np.ndarray
    _loss_matrix: np.ndarray = field(repr=False)
    _abstain_cost: np.ndarray = field(repr=False)

    @property
    def abstained(self) -> np.ndarray:
        """Boolean mask of abstentions."""
        return self.actions < 0

    def realized_loss(self, y_true) -> np.ndarray:
        """Loss actually incurred by each decision once the true classes are known.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True class indices.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        K = self._loss_matrix.shape[0]
        y = check_labels(y_true, self.actions.shape[0], K)
        act = np.maximum(self.actions, 0)
        acted = self._loss_matrix[y, act]
        return np.where(self.actions < 0, self._abstain_cost[y], acted)


def decide(y_prob, loss_matrix=None, *, abstain_cost=None) -> Decisions:
    """Choose the action of least expected loss, or abstain when that costs less.

    The expected loss of action ``a`` is ``sum_k P(y = k) L[k, a]``; abstaining costs
    ``sum_k P(y = k) c_k``. With the 0-1 loss and a constant abstention cost ``c`` this is
    Chow's rule: predict the arg max unless its probability is below ``1 - c``. Only
    calibrated probabilities make these expected losses meaningful.

    Parameters
    ----------
    y_prob : array-like of shape (n_samples, K) or (n_samples,)
        Class probabilities (rows sum to one), or probabilities of class 1.
    loss_matrix : array-like of shape (K, n_actions), default=None
        ``L[k, a]``: loss of action ``a`` when the true class is ``k``. ``None`` means the
        0-1 loss (actions = classes).
    abstain_cost : None, float or array-like of shape (K,), default=None
        Cost of abstaining (per true class if an array); ``None`` never abstains.

    Returns
    -------
    Decisions
        Ties between actions go to the lowest index; between acting and abstaining, to
        acting.

    References
    ----------
    C. K. Chow, *On optimum recognition error and reject tradeoff*, IEEE Trans.
    Information Theory 16(1), 1970.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.selective import decide
    >>> d = decide(np.array([[0.9, 0.1], [0.55, 0.45]]), abstain_cost=0.2)
    >>> d.actions.tolist()
    [0, -1]
    """
    P = check_probabilities(y_prob, "y_prob")
    if P.ndim == 1:
        P = np.stack([1.0 - P, P], axis=1)
    K = P.shape[1]
    if loss_matrix is None:
        L = 1.0 - np.eye(K)
    else:
        L = as_float_array(loss_matrix, "loss_matrix", ndim=2)
        if L.shape[0] != K or L.shape[1] < 1:
            raise ParameterError(
                f"`loss_matrix` must have shape ({K}, n_actions) (one row per class of "
                f"y_prob); got {L.shape}"
            )
    if abstain_cost is None:
        c = np.full(K, np.inf)
    else:
        scalar = np.ndim(abstain_cost) == 0
        c = as_float_array(abstain_cost, "abstain_cost")
        if scalar:
            c = np.full(K, float(c[0]))
        elif c.shape != (K,):
            raise ParameterError(
                f"`abstain_cost` must be a number or have shape ({K},); got {c.shape}"
            )
    R = np.einsum("nk,ka->na", P, L)
    best = np.argmin(R, axis=1)
    best_loss = R[np.arange(P.shape[0]), best]
    with np.errstate(invalid="ignore"):  # 0 * inf: an impossible class costs nothing
        abstain = np.where(P > 0, P * c[None, :], 0.0).sum(axis=1)
    actions = np.where(abstain < best_loss, -1, best).astype(np.int64)
    return Decisions(
        actions=actions,
        expected_loss=np.minimum(best_loss, abstain),
        action_losses=R,
        abstain_loss=abstain,
        _loss_matrix=L,
        _abstain_cost=c,
    )
