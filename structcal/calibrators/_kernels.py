"""Numba kernels of the calibrators (private; inputs are trusted)."""

import numpy as np

from .._numba import kernel


@kernel
def pav(y, w):
    """Weighted isotonic (non-decreasing) least-squares fit by pool-adjacent-violators.

    ``y`` and ``w`` (> 0) are ordered by the explanatory variable. Returns the fitted
    values, one per input.
    """
    n = y.shape[0]
    value = np.empty(n)
    weight = np.empty(n)
    size = np.empty(n, dtype=np.int64)
    nb = 0
    for i in range(n):
        value[nb] = y[i]
        weight[nb] = w[i]
        size[nb] = 1
        nb += 1
        while nb > 1 and value[nb - 2] >= value[nb - 1]:
            tw = weight[nb - 2] + weight[nb - 1]
            value[nb - 2] = (weight[nb - 2] * value[nb - 2] + weight[nb - 1] * value[nb - 1]) / tw
            weight[nb - 2] = tw
            size[nb - 2] += size[nb - 1]
            nb -= 1
    out = np.empty(n)
    k = 0
    for b in range(nb):
        for _ in range(size[b]):
            out[k] = value[b]
            k += 1
    return out


@kernel
def spline_newton_terms(first, vals, coef, y, w):
    """Loss, gradient and banded Gram matrix of a logistic B-spline fit.

    ``eta_i = sum_a vals[i, a] * coef[first[i] + a]`` (four cubic B-splines per row).
    Returns ``(loss, grad, gram)`` with ``loss = sum_i w_i [y_i log(1 + e^-eta) +
    (1 - y_i) log(1 + e^eta)]``, ``grad = d loss / d coef`` and ``gram[j, k] = sum_i
    w_i p_i (1 - p_i) B_j(x_i) B_k(x_i)`` (non-zero within 3 of the diagonal).
    """
    m = coef.shape[0]
    grad = np.zeros(m)
    gram = np.zeros((m, m))
    loss = 0.0
    for i in range(first.shape[0]):
        f = first[i]
        eta = 0.0
        for a in range(4):
            eta += vals[i, a] * coef[f + a]
        # stable log(1 + e^x) and sigmoid
        if eta > 0:
            e = np.exp(-eta)
            sp_pos = np.log1p(e)  # log(1 + e^-eta)
            p = 1.0 / (1.0 + e)
        else:
            e = np.exp(eta)
            sp_pos = -eta + np.log1p(e)
            p = e / (1.0 + e)
        sp_neg = sp_pos + eta  # log(1 + e^eta)
        wi = w[i]
        loss += wi * (y[i] * sp_pos + (1.0 - y[i]) * sp_neg)
        r = wi * (p - y[i])
        h = wi * p * (1.0 - p)
        for a in range(4):
            va = vals[i, a]
            grad[f + a] += r * va
            hv = h * va
            for b in range(4):
                gram[f + a, f + b] += hv * vals[i, b]
    return loss, grad, gram


@kernel
def spline_eta(first, vals, coef):
    """Linear predictor ``eta_i`` of a B-spline expansion (see spline_newton_terms)."""
    n = first.shape[0]
    out = np.empty(n)
    for i in range(n):
        f = first[i]
        e = 0.0
        for a in range(4):
            e += vals[i, a] * coef[f + a]
        out[i] = e
    return out


# The Newton steps of the spline fit use no BLAS/LAPACK: the matrices are small (at most a
# few hundred rows), where a multithreaded BLAS on a busy machine costs milliseconds per
# call in thread hand-offs instead of microseconds of arithmetic.


@kernel
def _matvec(T, beta):
    out = np.zeros(T.shape[0])
    for j in range(T.shape[0]):
        acc = 0.0
        for a in range(T.shape[1]):
            acc += T[j, a] * beta[a]
        out[j] = acc
    return out


@kernel
def spline_objective(first, vals, T, beta, y, w, pen):
    """Penalised loss ``loss(T beta) + sum_a pen_a beta_a**2 / 2`` of a B-spline fit."""
    eta = spline_eta(first, vals, _matvec(T, beta))
    loss = 0.0
    for i in range(eta.shape[0]):
        e = eta[i]
        sp_pos = np.log1p(np.exp(-e)) if e > 0 else -e + np.log1p(np.exp(e))
        loss += w[i] * (y[i] * sp_pos + (1.0 - y[i]) * (sp_pos + e))
    for a in range(beta.shape[0]):
        loss += 0.5 * pen[a] * beta[a] * beta[a]
    return loss


@kernel(fastmath={"reassoc", "contract"})
def _gram_product(TT, GTT):
    """Upper triangle of ``TT @ GTT.T`` (rows of both are contiguous).

    Reassociation lets the dot products vectorise; no value here is infinite or NaN
    (``reassoc``/``contract`` make no such assumption anyway).
    """
    K, m = TT.shape
    H = np.zeros((K, K))
    for a in range(K):
        for b in range(a, K):
            acc = 0.0
            for j in range(m):
                acc += TT[a, j] * GTT[b, j]
            H[a, b] = acc
    return H


@kernel
def spline_newton_system(first, vals, T, TT, beta, y, w, pen):
    """Objective, gradient and Hessian of the penalised fit in the natural basis.

    With ``gamma = T beta``: gradient ``T' grad_gamma + pen * beta`` and Hessian
    ``T' G T + diag(pen)``, ``G`` the banded Gram matrix (bandwidth 3). ``TT`` is ``T.T``
    (C-contiguous).
    """
    m, K = T.shape
    loss, g_gamma, gram = spline_newton_terms(first, vals, _matvec(T, beta), y, w)
    grad = np.zeros(K)
    for j in range(m):
        for a in range(K):
            grad[a] += T[j, a] * g_gamma[j]
    GTT = np.zeros((K, m))  # (G T)' = T' G
    for j in range(m):
        for k in range(max(0, j - 3), min(m, j + 4)):
            gjk = gram[j, k]
            for b in range(K):
                GTT[b, j] += gjk * TT[b, k]
    H = _gram_product(TT, GTT)
    for a in range(K):
        H[a, a] += pen[a]
        grad[a] += pen[a] * beta[a]
        loss += 0.5 * pen[a] * beta[a] * beta[a]
        for b in range(a):
            H[a, b] = H[b, a]
    return loss, grad, H


@kernel
def cholesky_solve(H, g, jitter):
    """Solve ``(H + jitter I) x = g`` for symmetric positive definite ``H`` (Cholesky).

    Returns ``(x, ok)``; ``ok`` is False when a pivot is not positive.
    """
    K = H.shape[0]
    L = np.zeros((K, K))
    for j in range(K):
        s = H[j, j] + jitter
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:
            return np.zeros(K), False
        d = np.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, K):
            t = H[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / d
    z = np.empty(K)
    for i in range(K):
        t = g[i]
        for k in range(i):
            t -= L[i, k] * z[k]
        z[i] = t / L[i, i]
    x = np.empty(K)
    for i in range(K - 1, -1, -1):
        t = z[i]
        for k in range(i + 1, K):
            t -= L[k, i] * x[k]
        x[i] = t / L[i, i]
    return x, True
