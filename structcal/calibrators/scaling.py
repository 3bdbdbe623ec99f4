"""Temperature scaling and vector scaling of logits (Guo et al., 2017)."""

from __future__ import annotations

import numpy as np
from scipy.special import log_softmax

from .._validation import check_float, check_int
from ..exceptions import ParameterError
from ._base import BaseCalibrator

__all__ = ["TemperatureScaling", "VectorScaling"]


def _as_logits(S):
    """Binary logits given as one column become the two columns ``(0, z)``."""
    return np.column_stack([np.zeros(S.shape[0]), S[:, 0]]) if S.shape[1] == 1 else S


def _nll(Z, y_index, w):
    logp = log_softmax(Z, axis=1)
    return -float(np.sum(w * logp[np.arange(Z.shape[0]), y_index]))


class TemperatureScaling(BaseCalibrator):
    """Temperature scaling: ``softmax(z / T)`` with one temperature ``T > 0`` for all classes.

    ``T`` minimises the log loss of the calibration data (``1 / T`` by Newton's method:
    the loss is convex in it). ``T > 1`` softens over-confident logits. Predictions keep
    the arg max of the logits.

    Parameters
    ----------
    max_iter : int, default=100
        Maximum Newton steps.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of logit columns.
    temperature_ : float
        The fitted temperature (``inf`` when the logits carry no information: the fit
        predicts the uniform distribution).
    n_iter_ : int
        Newton steps taken.

    Notes
    -----
    ``X`` holds logits, shape (n_samples, n_classes), or one column of binary log-odds
    (read as the two logits ``(0, z)``). Log-probabilities work as logits too.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, *On calibration of modern neural
    networks*, ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.calibrators import TemperatureScaling
    >>> z = np.array([[4.0, 0.0], [0.0, 4.0], [4.0, 0.0], [0.0, 4.0]])
    >>> cal = TemperatureScaling().fit(z, [0, 1, 1, 0])
    >>> bool(cal.temperature_ > 1)
    True
    """

    _max_abs_score = 1e100  # (cubes/squares of larger scores overflow)

    def __init__(self, *, max_iter=100):
        self.max_iter = max_iter

    def _validate_hyperparameters(self):
        check_int(self.max_iter, "max_iter", low=1)

    def _fit(self, S, y_index, w):
        Z = _as_logits(S)
        n = Z.shape[0]
        zy = Z[np.arange(n), y_index]
        theta = 1.0

        def parts(th):
            logp = log_softmax(th * Z, axis=1)
            p = np.exp(logp)
            mean_z = (p * Z).sum(axis=1)
            var_z = (p * Z * Z).sum(axis=1) - mean_z**2
            f = -float(np.sum(w * logp[np.arange(n), y_index]))
            g = float(np.sum(w * (mean_z - zy)))
            h = float(np.sum(w * np.maximum(var_z, 0.0)))
            return f, g, h

        f, g, h = parts(theta)
        total = float(w.sum())
        self.n_iter_ = 1
        for it in range(self.max_iter):
            self.n_iter_ = it + 1
            if h <= 0 or g * g / h <= 1e-14 * total:  # flat, or Newton decrement ~ 0
                break
            step = g / h
            a = 1.0
            while True:  # projected Newton step on theta >= 0 with backtracking
                cand = max(theta - a * step, 0.0)
                fc, gc, hc = parts(cand)
                if fc <= f - 1e-4 * g * (theta - cand) or a < 1e-10:
                    break
                a *= 0.5
            if cand == theta:
                break
            theta, f, g, h = cand, fc, gc, hc
        self.temperature_ = float(np.inf) if theta == 0.0 else float(1.0 / theta)

    def _predict_proba(self, S):
        theta = 0.0 if np.isinf(self.temperature_) else 1.0 / self.temperature_
        return np.exp(log_softmax(theta * _as_logits(S), axis=1))


class VectorScaling(BaseCalibrator):
    """Vector scaling: ``softmax(a * z + b)`` with a scale ``a_k`` and an offset ``b_k`` per class.

    A generalisation of temperature scaling (and, for one column of binary log-odds, of
    Platt scaling on the logit) fitted by minimising the log loss (L-BFGS with exact
    gradients), with an optional ridge penalty pulling ``a`` towards 1 and ``b`` towards 0.

    Parameters
    ----------
    reg : float, default=0.0
        Penalty ``reg / 2 * (|a - 1|^2 + |b|^2)`` (0: maximum likelihood).
    max_iter : int, default=500
        Maximum L-BFGS iterations.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of logit columns.
    scale_ : ndarray of shape (n_classes,)
        Per-class scales ``a``.
    offset_ : ndarray of shape (n_classes,)
        Per-class offsets ``b`` (defined up to a common constant; centred to mean 0).
    n_iter_ : int
        L-BFGS iterations.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, *On calibration of modern neural
    networks*, ICML 2017.
    """

    _max_abs_score = 1e100  # (cubes/squares of larger scores overflow)

    def __init__(self, *, reg=0.0, max_iter=500):
        self.reg = reg
        self.max_iter = max_iter

    def _validate_hyperparameters(self):
        check_float(self.reg, "reg", low=0.0)
        check_int(self.max_iter, "max_iter", low=1)

    def _fit(self, S, y_index, w):
        Z = _as_logits(S)
        n, K = Z.shape
        onehot = np.zeros((n, K))
        onehot[np.arange(n), y_index] = 1.0
        total = float(w.sum())
        reg = float(self.reg)

        def fun(params):
            a, b = params[:K], params[K:]
            logp = log_softmax(Z * a + b, axis=1)
            r = (np.exp(logp) - onehot) * w[:, None]
            f = -float(np.sum(w * logp[np.arange(n), y_index]))
            ga = (r * Z).sum(axis=0)
            gb = r.sum(axis=0)
            f += 0.5 * reg * (float(np.sum((a - 1) ** 2)) + float(np.sum(b**2)))
            g = np.concatenate([ga + reg * (a - 1), gb + reg * b])
            return f / total, g / total

        x0 = np.concatenate([np.ones(K), np.zeros(K)])
        from scipy.optimize import minimize

        res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                       options={"maxiter": self.max_iter, "gtol": 1e-10, "ftol": 1e-15})
        if not np.all(np.isfinite(res.x)):
            raise ParameterError("vector scaling diverged: check the logits for huge values")
        self.scale_ = res.x[:K].copy()
        self.offset_ = res.x[K:] - res.x[K:].mean()
        self.n_iter_ = int(res.nit)

    def _predict_proba(self, S):
        Z = _as_logits(S)
        return np.exp(log_softmax(Z * self.scale_ + self.offset_, axis=1))
