"""Platt scaling: a logistic regression on the score."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from .._validation import check_int
from ..exceptions import ParameterTypeError
from ._base import ScoreCalibrator
from ._logistic import newton_logistic

__all__ = ["PlattScaling", "SigmoidMap"]


@dataclass(frozen=True)
class SigmoidMap:
    """The calibration map ``p(s) = 1 / (1 + exp(-(coef * s + intercept)))``.

    Attributes
    ----------
    coef : float
        Slope on the score.
    intercept : float
        Offset.
    """

    coef: float
    intercept: float

    def _check_loaded(self):
        from .._loadcheck import number

        number(self, "coef")
        number(self, "intercept")

    def __call__(self, s):
        """Calibrated probabilities of scores ``s``."""
        return expit(self.coef * np.asarray(s, dtype=np.float64) + self.intercept)


class PlattScaling(ScoreCalibrator):
    """Platt scaling: fit ``P(y = 1 | s) = sigmoid(a s + b)`` by maximum likelihood.

    A logistic regression with the score as its only feature, solved by Newton's method
    (on the standardised score). Multiclass scores are calibrated one column at a time
    and renormalised (see :mod:`structcal.calibrators`).

    Parameters
    ----------
    prior_correction : bool, default=True
        Use Platt's regularised targets ``(N+ + 1) / (N+ + 2)`` for positives and
        ``1 / (N- + 2)`` for negatives instead of 1 and 0 (``N+``, ``N-`` the total
        weights of each class). They keep the fit finite when the scores separate the
        classes. With ``False`` the fit equals an unpenalised logistic regression of the
        labels on the score.
    max_iter : int, default=100
        Maximum number of Newton steps.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of score columns seen in ``fit``.
    maps_ : tuple of SigmoidMap
        One fitted map per calibrated column.
    n_iter_ : int
        Largest number of Newton steps taken by a column's fit.

    References
    ----------
    J. Platt, *Probabilistic outputs for support vector machines and comparisons to
    regularized likelihood methods*, Advances in Large Margin Classifiers, 1999.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.calibrators import PlattScaling
    >>> s = np.array([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
    >>> y = np.array([0, 0, 1, 0, 1, 1])
    >>> cal = PlattScaling(prior_correction=False).fit(s, y)
    >>> np.round(cal.predict_proba([[0.0]])[:, 1], 3)
    array([0.5])
    """

    def __init__(self, *, prior_correction=True, max_iter=100):
        self.prior_correction = prior_correction
        self.max_iter = max_iter

    def _validate_hyperparameters(self):
        if not isinstance(self.prior_correction, (bool, np.bool_)):
            raise ParameterTypeError(
                f"`prior_correction` must be a bool; got {self.prior_correction!r}"
            )
        check_int(self.max_iter, "max_iter", low=1)

    def _fit(self, S, y_index, w):
        self.n_iter_ = 1
        super()._fit(S, y_index, w)

    def _fit_column(self, s, outcome, w, column):
        t = outcome
        if self.prior_correction:
            npos = float(w[outcome == 1].sum())
            nneg = float(w.sum()) - npos
            t = np.where(outcome == 1, (npos + 1.0) / (npos + 2.0), 1.0 / (nneg + 2.0))
        # standardise on s / max|s| so that scores near the float range do not overflow
        scale = float(np.abs(s).max()) if s.size else 0.0
        scale = scale if scale > 0 else 1.0
        z = s / scale
        mu_z = float(np.average(z, weights=w))
        sd_z = float(np.sqrt(np.average((z - mu_z) ** 2, weights=w)))
        if not sd_z > 0:
            sd_z = 1.0 / scale  # (sd = 1)
        mu, sd = mu_z * scale, sd_z * scale
        X = np.column_stack([(z - mu_z) / sd_z, np.ones_like(s)])
        beta, n_iter = newton_logistic(X, t, w, max_iter=self.max_iter, what="Platt scaling")
        self.n_iter_ = max(self.n_iter_, n_iter)
        coef = beta[0] / sd
        return SigmoidMap(float(coef), float(beta[1] - coef * mu))
