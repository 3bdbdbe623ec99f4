"""SplineCalib: penalised logistic regression on a natural cubic spline basis (Lucena 2018).

The calibration map is ``p(s) = sigmoid(f(G(s)))`` with ``f`` a natural cubic spline
(cubic between knots, linear beyond the outermost ones) written in Lucena's basis
``N_1 = 1, N_2 = x, N_{k+2} = d_k - d_{K-1}`` with ``d_k(x) = ((x - phi_k)_+^3 - (x -
phi_K)_+^3) / (phi_K - phi_k)``, and ``G`` an optional compact-logit transform. The
coefficients minimise the log loss plus ``lambda / 2 * sum_{k >= 2} beta_k**2`` (the
intercept is not penalised, as in scikit-learn's ``LogisticRegression`` on the basis,
``C = 1 / lambda``); ``lambda`` is chosen by cross-validated log loss.

Speed: every natural spline with knots ``phi`` is also a combination of the ``K + 2``
cubic B-splines on those knots, ``N(x) = B(x) T``, and each ``B(x)`` has only four
non-zero entries. Newton's method on the exact objective above then costs ``O(n)`` per
step for the data terms (a banded Gram matrix) plus ``O(K^3)`` for the small dense
system, instead of ``O(n K^2)`` with the dense basis. Tied scores are merged first.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
from scipy.interpolate import BSpline
from scipy.linalg import solve_banded
from scipy.special import expit

from .._validation import as_float_array, check_float, check_int
from .. import exceptions
from ..exceptions import ParameterError, ParameterTypeError
from ._base import ScoreCalibrator
from ._kernels import cholesky_solve, spline_newton_system, spline_objective

__all__ = [
    "SplineCalib",
    "SplineMap",
    "compact_logit",
    "compact_logit_epsilon",
    "natural_spline_basis",
]

_MIN_EPSILON = 1e-12
# with compact_logit="auto" on more samples than this, the transform is chosen on a
# random subsample of this size (the full cross-validation then runs once)
_SELECTION_SAMPLE = 20_000


def compact_logit(x, epsilon):
    """Lucena's compact logit ``G_eps``: a scaled logit on ``[eps, 1 - eps]``, identity outside.

    ``G(x) = (1 - 2 eps) / (2 log((1 - eps) / eps)) * log(x / (1 - x)) + 1/2`` for ``eps
    <= x <= 1 - eps``; ``G(eps) = eps``, ``G(1/2) = 1/2``, ``G(1 - eps) = 1 - eps``.

    Parameters
    ----------
    x : array-like
        Probabilities in [0, 1].
    epsilon : float
        In (0, 1/2).

    Returns
    -------
    ndarray
    """
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    mid = (x >= epsilon) & (x <= 1.0 - epsilon)
    scale = (1.0 - 2.0 * epsilon) / (2.0 * np.log((1.0 - epsilon) / epsilon))
    xm = x[mid]
    out[mid] = scale * (np.log(xm) - np.log1p(-xm)) + 0.5
    return out


def compact_logit_epsilon(p) -> float:
    """Lucena's heuristic ``eps = 10**(r - 1)``, ``r = floor(log10(min(1 - p_i)))``.

    Probabilities equal to 1 are ignored; the result is at least ``1e-12``.

    Parameters
    ----------
    p : array-like
        Uncalibrated probabilities.

    Returns
    -------
    float
    """
    p = np.asarray(p, dtype=np.float64)
    q = 1.0 - p[p < 1.0]
    if q.size == 0:
        return 0.1
    r = np.floor(np.log10(q.min()))
    return float(max(10.0 ** (r - 1.0), _MIN_EPSILON))


#: Smallest gap between two knots, relative to the range of the scores (see :func:`_separated`).
_KNOT_GAP = 1e-6


def natural_spline_basis(x, knots) -> np.ndarray:
    """Lucena's natural cubic spline basis, shape (n_points, n_knots).

    Columns: ``1``, ``x``, then ``d_k(x) - d_{K-1}(x)`` for ``k = 1..K-2`` with ``d_k(x) =
    ((x - phi_k)_+^3 - (x - phi_K)_+^3) / (phi_K - phi_k)``.

    Parameters
    ----------
    x : array-like of shape (n_points,)
        Evaluation points.
    knots : array-like of shape (n_knots,)
        Increasing knots, at least 2.

    Returns
    -------
    ndarray of shape (n_points, n_knots)
    """
    x = np.asarray(x, dtype=np.float64)
    knots = np.asarray(knots, dtype=np.float64)
    K = knots.shape[0]
    last = knots[-1]
    tail = np.maximum(x - last, 0.0) ** 3
    d = (np.maximum(x[:, None] - knots[None, :-1], 0.0) ** 3 - tail[:, None]) / (
        last - knots[None, :-1]
    )
    out = np.empty((x.shape[0], K))
    out[:, 0] = 1.0
    out[:, 1] = x
    out[:, 2:] = d[:, :-1] - d[:, -1:]
    return out


def _bspline_knots(knots):
    return np.concatenate([[knots[0]] * 4, knots[1:-1], [knots[-1]] * 4])


def _separated(knots):
    """The increasing ``knots`` without those closer than ``_KNOT_GAP`` of the scores' range
    to the previous kept one (the last knot is kept, and its too-close predecessor
    dropped instead).

    Knots a few ulps apart (scores 1 and 1 - 1e-16) make the basis change of
    :func:`_natural_to_bspline` singular; a spline cannot resolve such a gap anyway.
    """
    gap = _KNOT_GAP * (knots[-1] - knots[0])
    keep = [0]
    for i in range(1, knots.shape[0] - 1):
        if knots[i] - knots[keep[-1]] > gap:
            keep.append(i)
    if len(keep) > 1 and knots[-1] - knots[keep[-1]] <= gap:
        keep.pop()
    keep.append(knots.shape[0] - 1)
    return knots[keep]


def _natural_to_bspline(knots):
    """Matrix T of shape (K + 2, K) with ``natural_spline_basis(x) = B(x) @ T`` on the knots'
    range (collocation at the Greville abscissae, where the B-spline matrix is invertible)."""
    t = _bspline_knots(knots)
    m = len(t) - 4
    greville = np.clip((t[1:m + 1] + t[2:m + 2] + t[3:m + 3]) / 3.0, t[0], t[-1])
    B = BSpline.design_matrix(greville, t, 3).toarray()
    # B is banded (each row has 4 consecutive non-zeros around the diagonal)
    ab = np.zeros((7, m))
    for d in range(-3, 4):
        diag = np.diagonal(B, offset=d)
        if d >= 0:
            ab[3 - d, d:] = diag
        else:
            ab[3 - d, :d] = diag
    return solve_banded((3, 3), ab, natural_spline_basis(greville, knots)), t


def _design(x, t):
    """(first index, 4 values) of the cubic B-spline design matrix rows."""
    D = BSpline.design_matrix(np.clip(x, t[0], t[-1]), t, 3)
    first = np.ascontiguousarray(D.indices.reshape(-1, 4)[:, 0], dtype=np.int64)
    vals = np.ascontiguousarray(D.data.reshape(-1, 4), dtype=np.float64)
    return first, vals


@dataclass(frozen=True)
class SplineMap:
    """A fitted SplineCalib map ``p(s) = sigmoid(f(G(s)))``.

    Attributes
    ----------
    knots : ndarray of shape (n_knots,)
        Knots on the (transformed) score scale.
    coef : ndarray of shape (n_knots,)
        Coefficients on :func:`natural_spline_basis` (``coef[0]`` is the intercept).
    bspline_coef : ndarray of shape (n_knots + 2,)
        The same function's cubic B-spline coefficients on the knots (used to evaluate).
    epsilon : float or None
        The compact-logit ``eps`` applied to scores first (None: no transform).
    reg_lambda : float
        The selected penalty.
    cv_loss : ndarray of shape (n_lambdas,)
        Mean cross-validated log loss of each candidate penalty.
    """

    knots: np.ndarray
    coef: np.ndarray
    bspline_coef: np.ndarray
    epsilon: float | None
    reg_lambda: float
    cv_loss: np.ndarray

    def _check_loaded(self):
        from .._loadcheck import array, number

        knots = array(self, "knots", ndim=1)
        if knots.shape[0] < 2 or (np.diff(knots) <= 0).any():
            raise ValueError("knots must be an increasing sequence of at least 2 knots")
        array(self, "coef", ndim=1, shape=knots.shape)
        array(self, "bspline_coef", ndim=1, shape=(knots.shape[0] + 2,))
        number(self, "epsilon", low=0.0, high=0.5, optional=True)
        number(self, "reg_lambda", low=0.0)

    def transform(self, s) -> np.ndarray:
        """Scores on the spline's scale (the compact logit, if any)."""
        s = np.asarray(s, dtype=np.float64)
        return s if self.epsilon is None else compact_logit(s, self.epsilon)

    def log_odds(self, s) -> np.ndarray:
        """``f(G(s))``: calibrated log-odds (linear beyond the outermost knots)."""
        x = self.transform(s)
        lo, hi = self.knots[0], self.knots[-1]
        spl = BSpline(_bspline_knots(self.knots), self.bspline_coef, 3, extrapolate=False)
        out = spl(np.clip(x, lo, hi))
        if (x < lo).any() or (x > hi).any():
            d = spl.derivative()
            out = np.where(x < lo, spl(lo) + d(lo) * (x - lo), out)
            out = np.where(x > hi, spl(hi) + d(hi) * (x - hi), out)
        return out

    def __call__(self, s):
        """Calibrated probabilities of scores ``s``."""
        return expit(self.log_odds(s))


class _Problem:
    """Data of one penalised fit, merged over tied scores, in B-spline form."""

    def __init__(self, first, vals, y, w):
        self.first, self.vals, self.y, self.w = first, vals, y, w
        self.total = float(w.sum())

    @classmethod
    def subset(cls, design_first, design_vals, inverse, y, w, idx, n_unique):
        ws = np.bincount(inverse[idx], weights=w[idx], minlength=n_unique)
        ys = np.bincount(inverse[idx], weights=(w * y)[idx], minlength=n_unique)
        keep = ws > 0
        return cls(design_first[keep], design_vals[keep], ys[keep] / ws[keep], ws[keep])

    def objective(self, T, beta, pen):
        return spline_objective(self.first, self.vals, T, beta, self.y, self.w, pen)


def _newton(problem, T, TT, lam, beta, max_iter, tol, start=None):
    """Minimise loss(T beta) + lam/2 * |beta[1:]|^2 from ``beta``.

    Damped Newton: a step is accepted when it decreases the objective enough (Armijo),
    else halved; the system at the accepted point gives the next step. ``start`` may
    hold the penalty-free (loss, gradient, Hessian) at ``beta`` from a previous call (on
    a penalty path only the penalty changes). Returns ``(beta, n_steps, converged,
    data_system)``, the last being ``start`` for the next call.
    """
    K = T.shape[1]
    pen = np.full(K, lam)
    pen[0] = 0.0
    zero = np.zeros(K)

    def data_system(b):
        return spline_newton_system(problem.first, problem.vals, T, TT, b, problem.y,
                                    problem.w, zero)

    def penalised(system, b):
        fd, gd, Hd = system
        H = Hd.copy()
        H[np.diag_indices(K)] += pen
        return fd + 0.5 * float(b @ (pen * b)), gd + pen * b, H

    current = data_system(beta) if start is None else start
    f, g, H = penalised(current, beta)
    for it in range(max_iter):
        step, ok = cholesky_solve(H, g, 1e-12 * problem.total)
        if not ok:  # numerically indefinite (saturated fit): a gradient step instead
            step = g / max(float(np.abs(np.diag(H)).max()), 1e-12 * problem.total)
        dec = float(g @ step)
        if dec / 2 <= tol * problem.total:
            return beta, it, True, current
        a = 1.0
        while True:
            nb = beta - a * step
            cand = data_system(nb)
            fn, gn, Hn = penalised(cand, nb)
            if fn <= f - 1e-4 * a * dec or a < 1e-10:
                break
            a *= 0.5
        if a < 1e-10:
            return beta, it, True, current
        beta, current, f, g, H = nb, cand, fn, gn, Hn
    return beta, max_iter, False, current


class SplineCalib(ScoreCalibrator):
    """SplineCalib: a smoothing-spline logistic calibration map (Lucena, 2018).

    Fits ``P(y = 1 | s) = sigmoid(f(G(s)))`` where ``f`` is a natural cubic spline on at
    most ``n_knots`` knots sampled from the distinct scores (the smallest and largest
    always included), fitted by L2-penalised logistic regression on Lucena's natural
    spline basis with the penalty chosen by cross-validated log loss, and ``G`` the
    optional compact-logit transform for over-confident models. Multiclass scores are
    calibrated one column at a time and renormalised (Lucena's Algorithm 3).

    Parameters
    ----------
    n_knots : int, default=30
        Maximum number of knots (at least 2; the paper suggests up to 200; all distinct
        scores are used when there are fewer).
    lambdas : array-like of shape (n_lambdas,), default=None
        Candidate penalties ``lambda`` (``1 / C`` of scikit-learn's logistic regression);
        ``None`` means ``np.logspace(-4, 4, 17)`` (ml-insights' grid of ``C``).
    cv : int, default=5
        Number of stratified folds for choosing ``lambda`` (reduced to the size of the
        smaller class when that is smaller; at least 2 samples of each class needed).
    compact_logit : "auto" or bool, default="auto"
        Apply the compact logit ``G_eps`` to the scores first (they must then be
        probabilities in [0, 1]); it helps a lot with over-confident models (scores piled
        up near 0 and 1) and can hurt slightly elsewhere. ``"auto"`` keeps the variant
        with the lower cross-validated log loss (when the scores lie in [0, 1]; above
        20 000 samples the choice is made on a random subsample of 20 000).
    epsilon : "auto" or float, default="auto"
        The compact logit's ``eps``: Lucena's heuristic ``10**(floor(log10(min(1 - p)))
        - 1)`` on each column's calibration scores, or a value in (0, 0.5).
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the knot sample and the folds.
    max_iter : int, default=50
        Maximum Newton steps per fit.
    tol : float, default=1e-12
        Newton stops when half the decrement is below ``tol`` times the total weight.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of score columns seen in ``fit``.
    maps_ : tuple of SplineMap
        One fitted map per calibrated column (knots, coefficients, selected penalty and
        the cross-validated loss of each candidate).
    n_iter_ : int
        Largest number of Newton steps of a final (all-data) fit.

    References
    ----------
    B. Lucena, *Spline-based probability calibration*, arXiv:1809.07751, 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.calibrators import SplineCalib
    >>> rng = np.random.default_rng(0)
    >>> s = rng.random(2000)
    >>> y = (rng.random(2000) < s**2).astype(int)
    >>> cal = SplineCalib(random_state=0).fit(s, y)
    >>> p = cal.predict_proba([0.5])[0, 1]         # true P(y=1 | s=0.5) = 0.25
    >>> bool(abs(p - 0.25) < 0.05)
    True
    """

    _max_abs_score = 1e100  # (cubes/squares of larger scores overflow)

    def __init__(
        self,
        *,
        n_knots=30,
        lambdas=None,
        cv=5,
        compact_logit="auto",
        epsilon="auto",
        random_state=None,
        max_iter=50,
        tol=1e-12,
    ):
        self.n_knots = n_knots
        self.lambdas = lambdas
        self.cv = cv
        self.compact_logit = compact_logit
        self.epsilon = epsilon
        self.random_state = random_state
        self.max_iter = max_iter
        self.tol = tol

    def _probabilities_required(self) -> bool:
        return not isinstance(self.compact_logit, str) and bool(self.compact_logit)

    def _validate_hyperparameters(self):
        check_int(self.n_knots, "n_knots", low=2)
        check_int(self.cv, "cv", low=2)
        if not (isinstance(self.compact_logit, (bool, np.bool_)) or self.compact_logit == "auto"):
            raise ParameterTypeError(
                f"`compact_logit` must be 'auto' or a bool; got {self.compact_logit!r}"
            )
        if not (isinstance(self.epsilon, str) and self.epsilon == "auto"):
            check_float(self.epsilon, "epsilon", low=0.0, high=0.5, low_inclusive=False,
                        high_inclusive=False)
        check_int(self.max_iter, "max_iter", low=1)
        check_float(self.tol, "tol", low=0.0, low_inclusive=False)
        self._lambda_grid()

    def _lambda_grid(self):
        if self.lambdas is None:
            return np.logspace(-4, 4, 17)
        lam = as_float_array(self.lambdas, "lambdas", ndim=1, allow_empty=False)
        if (lam <= 0).any():
            raise ParameterError("`lambdas` must be positive")
        return lam

    def _rng(self, column):
        rs = self.random_state
        if isinstance(rs, np.random.Generator):
            return rs
        if rs is None:
            return np.random.default_rng()
        if isinstance(rs, (bool, np.bool_)) or not isinstance(rs, (int, np.integer)):
            raise ParameterTypeError(
                f"`random_state` must be None, an int or a numpy Generator; got {rs!r}"
            )
        return np.random.default_rng([int(rs), int(column)])

    def _fit(self, S, y_index, w):
        self.n_iter_ = 1
        super()._fit(S, y_index, w)

    def _fit_column(self, s, outcome, w, column):
        variants = [bool(self.compact_logit)]
        if isinstance(self.compact_logit, str):  # "auto": both, if the scores allow it
            in_unit = bool(((s >= 0) & (s <= 1)).all())
            variants = [False, True] if in_unit else [False]
        if len(variants) > 1 and s.shape[0] > _SELECTION_SAMPLE:
            # choose the transform on a random subsample (cross-validated log loss), then
            # run the full procedure for the chosen one only
            idx = self._rng(column).choice(s.shape[0], _SELECTION_SAMPLE, replace=False)
            sub = [self._cross_validate(s[idx], outcome[idx], w[idx], column, v)[0]
                   for v in variants]
            variants = [variants[int(np.argmin(sub))]]
        # cross-validate every variant left, refit only the best one on all the data
        candidates = [self._cross_validate(s, outcome, w, column, v) for v in variants]
        refit = min(candidates, key=lambda c: c[0])[1]
        return refit()

    def _cross_validate(self, s, outcome, w, column, transform):
        """CV losses of one variant; returns (best CV loss, function doing the final fit)."""
        rng = self._rng(column)  # the same knots/folds for every variant of an int seed
        eps = None
        if transform:
            eps = compact_logit_epsilon(s) if self.epsilon == "auto" else float(self.epsilon)
            x = compact_logit(s, eps)
        else:
            x = s
        pos = w > 0
        uniq, inverse = np.unique(x[pos], return_inverse=True)
        x, outcome, w = x[pos], outcome[pos], w[pos]
        if uniq.shape[0] < 2:
            raise ParameterError(
                "SplineCalib needs at least 2 distinct scores in each calibrated column; "
                f"column {column} has {uniq.shape[0]}"
            )
        if uniq[-1] - uniq[0] <= 1e-12 * max(1.0, abs(uniq[0]), abs(uniq[-1])):
            raise ParameterError(
                "SplineCalib needs scores that differ by more than rounding in each calibrated "
                f"column; column {column} spans [{float(uniq[0])!r}, {float(uniq[-1])!r}]"
                + (" after the compact logit transform" if transform else "")
            )
        n_pos = int(np.count_nonzero(outcome == 1))
        n_splits = min(self.cv, n_pos, outcome.shape[0] - n_pos)
        if n_splits < 2:
            raise ParameterError(
                "SplineCalib chooses its penalty by cross-validation and needs at least 2 "
                f"samples of each class; column {column} has {n_pos} positive and "
                f"{outcome.shape[0] - n_pos} negative samples"
            )
        if uniq.shape[0] <= self.n_knots:
            knots = uniq
        else:
            inner = rng.choice(uniq.shape[0] - 2, size=self.n_knots - 2, replace=False) + 1
            knots = np.concatenate([uniq[:1], np.sort(uniq[inner]), uniq[-1:]])
        knots = _separated(knots)
        T, t = _natural_to_bspline(knots)
        TT = np.ascontiguousarray(T.T)
        first_u, vals_u = _design(uniq, t)
        lambdas = np.sort(self._lambda_grid())[::-1]  # most penalised first: warm starts
        ybar = float(np.average(outcome, weights=w))
        beta0 = np.zeros(knots.shape[0])
        beta0[0] = np.log(ybar / (1.0 - ybar))
        n_unique = uniq.shape[0]

        from sklearn.model_selection import StratifiedKFold

        folds = StratifiedKFold(n_splits=n_splits, shuffle=True,
                                random_state=int(rng.integers(2**31 - 1)))
        zero_pen = np.zeros(knots.shape[0])

        def fold_path(split):
            train, test = split
            tr = _Problem.subset(first_u, vals_u, inverse, outcome, w, train, n_unique)
            te = _Problem.subset(first_u, vals_u, inverse, outcome, w, test, n_unique)
            beta, losses, all_ok, state = beta0, np.empty(lambdas.shape[0]), True, None
            for j, lam in enumerate(lambdas):
                # the validation loss needs ~1e-7 relative accuracy, not the final fit's
                beta, _, ok, state = _newton(tr, T, TT, lam, beta, self.max_iter,
                                             max(self.tol, 1e-9), state)
                all_ok &= ok
                losses[j] = te.objective(T, beta, zero_pen)
            return losses, all_ok

        # the folds are independent and their kernels release the GIL: run them in threads
        splits = list(folds.split(np.zeros((outcome.shape[0], 1)), outcome))
        workers = max(1, min(len(splits), numba.get_num_threads()))
        if workers > 1 and outcome.shape[0] >= 20_000:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(fold_path, splits))
        else:
            results = [fold_path(split) for split in splits]
        cv_loss = np.sum([r[0] for r in results], axis=0)
        converged = all(r[1] for r in results)
        cv_loss /= float(w.sum())
        best = int(np.argmin(cv_loss))  # ties resolve to the larger penalty (listed first)

        def refit():
            full = _Problem(first_u, vals_u,
                            np.bincount(inverse, weights=w * outcome, minlength=n_unique)
                            / np.bincount(inverse, weights=w, minlength=n_unique),
                            np.bincount(inverse, weights=w, minlength=n_unique))
            beta, state, ok = beta0, None, True
            for lam in lambdas[: best + 1]:
                beta, steps, ok, state = _newton(full, T, TT, lam, beta, self.max_iter,
                                                 self.tol, state)
                self.n_iter_ = max(self.n_iter_, steps, 1)
            if not (converged and ok):
                warnings.warn(
                    f"SplineCalib: a Newton fit did not converge in {self.max_iter} steps",
                    exceptions.ConvergenceWarning,
                    stacklevel=5,
                )
            order = np.argsort(lambdas)  # report the CV losses in increasing-lambda order
            return SplineMap(
                knots=knots,
                coef=beta,
                bspline_coef=(T * beta).sum(axis=1),
                epsilon=eps,
                reg_lambda=float(lambdas[best]),
                cv_loss=cv_loss[order],
            )

        return float(cv_loss[best]), refit
