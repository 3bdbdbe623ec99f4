"""Small dense logistic regressions solved by damped Newton steps (private)."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit

from .. import exceptions


def logistic_loss(eta, t, w) -> float:
    """``sum_i w_i [t_i log(1 + e^-eta_i) + (1 - t_i) log(1 + e^eta_i)]`` (stable)."""
    return float(np.sum(w * (t * np.logaddexp(0.0, -eta) + (1.0 - t) * np.logaddexp(0.0, eta))))


def newton_logistic(X, t, w, *, penalty=None, beta0=None, max_iter=100, tol=1e-12,
                    what="logistic regression"):
    """Minimise ``logistic_loss(X @ beta, t, w) + 0.5 * beta @ diag(penalty) @ beta``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Design matrix.
    t : ndarray of shape (n,)
        Targets in [0, 1].
    w : ndarray of shape (n,)
        Non-negative weights.
    penalty : ndarray of shape (d,), optional
        Ridge penalty per coefficient (0 = unpenalised).
    beta0 : ndarray of shape (d,), optional
        Starting point (zeros by default).
    max_iter : int
        Maximum number of Newton steps.
    tol : float
        Stop when half the Newton decrement falls below ``tol * sum(w)``.
    what : str
        Name used in the convergence warning.

    Returns
    -------
    beta : ndarray of shape (d,)
    n_iter : int
        Newton steps taken.
    """
    d = X.shape[1]
    pen = np.zeros(d) if penalty is None else penalty
    beta = np.zeros(d) if beta0 is None else beta0.astype(np.float64).copy()
    total = float(w.sum())

    def objective(b):
        return logistic_loss(X @ b, t, w) + 0.5 * float(b @ (pen * b))

    f = objective(beta)
    for it in range(max_iter):
        eta = X @ beta
        p = expit(eta)
        g = X.T @ (w * (p - t)) + pen * beta
        H = (X * (w * p * (1.0 - p))[:, None]).T @ X + np.diag(pen)
        H[np.diag_indices(d)] += 1e-12 * total  # keeps H invertible once p saturates
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H, g, rcond=None)[0]
        dec = float(g @ step)
        if dec / 2 <= tol * total:
            return beta, it
        a = 1.0
        while True:
            nb = beta - a * step
            fn = objective(nb)
            if fn <= f - 1e-4 * a * dec or a < 1e-10:
                break
            a *= 0.5
        if a < 1e-10:  # no progress possible at machine precision
            return beta, it
        beta, f = nb, fn
    warnings.warn(
        f"{what} did not converge in {max_iter} Newton steps (the scores may separate the "
        "classes, which makes the maximum-likelihood slope infinite)",
        exceptions.ConvergenceWarning,
        stacklevel=3,
    )
    return beta, max_iter
