"""Online recalibration (Algorithm 1 of Kuleshov & Ermon, 2017) as an estimator and a function.

:class:`OnlineRecalibrator` is the stateful, scikit-learn compatible object (a binary
probabilistic classifier whose single feature is the raw probability). It supports the
online protocol one step at a time (:meth:`~OnlineRecalibrator.forecast` then
:meth:`~OnlineRecalibrator.update`) and a whole stream in one compiled call
(:meth:`~OnlineRecalibrator.forecast_stream`, :meth:`~OnlineRecalibrator.partial_fit`).
:func:`recalibrate_online` recalibrates a stream of ``(raw probability, outcome)`` pairs,
optionally with one independent recalibrator per group (e.g. per event kind), and returns
the forecasts together with their running metrics.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .. import io
from .._estimator import ClassifierParamsMixin, check_fitted
from .._validation import (
    as_float_array,
    check_int,
    check_option,
    check_random_state,
    describe,
    issparse,
)
from ..exceptions import ParameterError, ParameterTypeError
from . import _kernels
from .metrics import (
    RunningMetrics,
    RunningRegret,
    _check_log_eps,
    check_outcomes,
    check_probabilities,
    running_metrics,
    running_regret,
)

__all__ = ["OnlineRecalibrator", "OnlineRecalibration", "recalibrate_online", "bucket_homes"]

METHODS = {"regret": _kernels.METHOD_REGRET, "blackwell": _kernels.METHOD_BLACKWELL}


def bucket_homes(n_grid: int, n_buckets: int) -> np.ndarray:
    """Grid index each bucket's subroutine uses when several forecasts are valid.

    The grid point ``i / N`` nearest the centre ``(j + 1/2) / M`` of bucket ``j``; a tie
    goes to the point nearer 1/2 (so the rule is symmetric under ``p -> 1 - p``), and a
    tie at exactly 1/2 (odd ``N``) to the lower point.

    Parameters
    ----------
    n_grid : int
        ``N``, the grid resolution.
    n_buckets : int
        ``M``, the number of buckets.

    Returns
    -------
    ndarray of shape (n_buckets,), dtype int64

    Examples
    --------
    >>> from structcal.online import bucket_homes
    >>> bucket_homes(10, 10).tolist()
    [1, 2, 3, 4, 5, 5, 6, 7, 8, 9]
    >>> bucket_homes(10, 1).tolist()
    [5]
    """
    n_grid = check_int(n_grid, "n_grid", low=1)
    n_buckets = check_int(n_buckets, "n_buckets", low=1)
    j = np.arange(n_buckets, dtype=np.int64)
    num = (2 * j + 1) * n_grid  # centre * N = num / den, exactly
    den = 2 * n_buckets
    lo = num // den
    twice_rem = 2 * (num - lo * den)
    # tie: the centre is halfway between lo and lo + 1; move toward N / 2
    tie_up = (2 * lo + 1) < n_grid
    up = (twice_rem > den) | ((twice_rem == den) & tie_up)
    return np.ascontiguousarray(lo + up, dtype=np.int64)


def _check_method(method):
    return METHODS[check_option(method, "method", METHODS)]


def _resolve_sizes(n_grid, n_buckets):
    n_grid = check_int(n_grid, "n_grid", low=1)
    if n_buckets is None:
        return n_grid, n_grid
    return n_grid, check_int(n_buckets, "n_buckets", low=1)


def _check_scalar_probability(p_raw):
    if isinstance(p_raw, (bool, np.bool_)) or not isinstance(p_raw, numbers.Real):
        raise ParameterTypeError(
            f"`p_raw` must be a probability (a real number); got {describe(p_raw)}"
        )
    p = float(p_raw)
    if not (0.0 <= p <= 1.0):  # also rejects NaN
        raise ParameterError(f"`p_raw` must be a probability in [0, 1]; got {p!r}")
    return p


def _check_scalar_outcome(y):
    if isinstance(y, (bool, np.bool_)):
        return float(y)
    if isinstance(y, numbers.Real) and float(y) in (0.0, 1.0):
        return float(y)
    raise ParameterError(f"`y` must be a binary outcome 0 or 1; got {describe(y)}")


def _check_same_length(p, y):
    if y.shape[0] != p.shape[0]:
        raise ParameterError(
            f"`y` must have one outcome per row of X ({p.shape[0]}); got {y.shape[0]}"
        )


def _seed_state(random_state) -> np.ndarray:
    rng = check_random_state(random_state)
    return np.array([rng.integers(0, 2**63 - 1, dtype=np.int64)], dtype=np.uint64)


@io.register(format_version=1)
class OnlineRecalibrator(io.SaveLoadMixin, ClassifierParamsMixin):
    """Online recalibration of a stream of raw probabilities (Kuleshov & Ermon, Algorithm 1).

    The raw forecasts ``p^F_t`` are split into ``M`` buckets ``[j/M, (j+1)/M)``; each
    bucket runs its own randomised online calibration subroutine on the grid
    ``{0, 1/N, ..., 1}``, which sees only the outcomes of the steps whose raw forecast fell
    in its bucket. The forecast for ``p^F_t`` is the forecast of its bucket's subroutine.
    Against any outcome sequence (even one chosen adversarially from the past and from
    the forecaster's mixed strategy) the forecasts become calibrated (``C_T^1`` tends to
    at most ``1/(2N)`` for ``method="regret"``) while losing at most ``O(1/N)`` against the
    raw forecasts in any bounded proper loss meeting the conditions of the paper's Lemma 2
    (l2, misclassification; Theorem 1 of the paper, ``M = N``).

    With ``n_buckets=1`` this is the plain calibration subroutine, which ignores
    ``p_raw``: calibrated, but only as sharp as a constant forecast.

    Parameters
    ----------
    n_grid : int, default=10
        ``N``: forecasts lie on ``{0, 1/N, ..., 1}``. Larger ``N`` lowers the calibration
        floor ``1/(2N)`` and the regret bound, and slows convergence (the bound on
        ``C_T^1`` has a ``sqrt(N / T_j)`` term per bucket).
    n_buckets : int or None, default=None
        ``M``, the number of buckets over the raw forecast; ``None`` means ``M = N``
        (Theorem 1).
    method : {"regret", "blackwell"}, default="regret"
        The calibration subroutine. ``"regret"``: internal-regret minimisation over the
        ``N + 1`` experts "forecast ``i/N``" with loss ``(y - i/N)^2`` (quadratic-potential
        regret matching over the neighbour swaps ``i -> i +- 1``). ``"blackwell"``:
        Foster's (1999) approachability forecaster on the calibration deficits. Both do
        O(1) work per update and at most ``N`` steps of a walk per forecast; see
        :mod:`structcal.online`.
    random_state : int, numpy Generator or None, default=None
        Seeds the forecaster's private coin (SplitMix64). With an int, every forecast is
        reproducible; the step API and the batch methods draw the same numbers.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        ``[0, 1]``.
    n_features_in_ : int
        1 (the raw probability).
    n_buckets_ : int
        The resolved ``M``.
    grid_ : ndarray of shape (n_grid + 1,)
        The forecast grid ``i / N``.
    homes_ : ndarray of shape ``(n_buckets_,)``
        Grid index each bucket forecasts while its statistics allow several forecasts
        (see :func:`bucket_homes`); the initial forecast of every bucket.
    counts_ : ndarray of shape ``(n_buckets_, n_grid + 1)``
        Per bucket and grid point: the summed forecast probabilities ``sum_t w_{t,i}``
        (``"regret"``) or the number of times ``i / N`` was forecast (``"blackwell"``).
    outcome_sums_ : ndarray of shape ``(n_buckets_, n_grid + 1)``
        The same sums weighted by the outcomes ``y_t``.
    rng_state_ : ndarray of shape (1,), dtype uint64
        The state of the private coin.
    n_updates_ : int
        Number of outcomes learned so far.

    See Also
    --------
    recalibrate_online : run a whole stream (optionally grouped) in one call, with metrics.

    References
    ----------
    .. [1] V. Kuleshov and S. Ermon. Estimating uncertainty online against an adversary.
       AAAI 2017 (Algorithm 1, Theorem 1).
    .. [2] D. P. Foster and R. V. Vohra. Asymptotic calibration. Biometrika 85(2), 1998.
    .. [3] N. Cesa-Bianchi and G. Lugosi. Prediction, Learning, and Games. Cambridge
       University Press, 2006 (Sections 2.1, 4.4-4.5: potential-based internal regret and
       calibration).
    .. [4] D. P. Foster. A proof of calibration via Blackwell's approachability theorem.
       Games and Economic Behavior 29, 1999.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.online import OnlineRecalibrator
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, size=2000)
    >>> p_raw = np.where(y == 1, 0.7, 0.3)          # accurate but under-confident
    >>> rec = OnlineRecalibrator(n_grid=10, random_state=0)
    >>> p = rec.forecast_stream(p_raw, y)
    >>> bool(np.all(p[-100:] == y[-100:]))           # 0.3 / 0.7 sharpened to 0 / 1
    True
    >>> rec.forecast(0.7)                            # one step of the online protocol
    1.0
    >>> rec.update(0.7, 1).n_updates_
    2001
    """

    def __init__(self, n_grid=10, n_buckets=None, method="regret", random_state=None):
        self.n_grid = n_grid
        self.n_buckets = n_buckets
        self.method = method
        self.random_state = random_state

    # ------------------------------------------------------------------ state

    def _reset(self):
        n_grid, n_buckets = _resolve_sizes(self.n_grid, self.n_buckets)
        _check_method(self.method)
        self.n_buckets_ = n_buckets
        self.grid_ = np.arange(n_grid + 1) / n_grid
        self.homes_ = bucket_homes(n_grid, n_buckets)
        self.counts_ = np.zeros((n_buckets, n_grid + 1))
        self.outcome_sums_ = np.zeros((n_buckets, n_grid + 1))
        self.rng_state_ = _seed_state(self.random_state)
        self.n_updates_ = 0
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = 1
        self._pending = None
        self._method_code = _check_method(self.method)

    def _ensure_state(self):
        """Create the state on first use; refuse hyperparameters changed since then."""
        if not hasattr(self, "counts_"):
            self._reset()
            return
        n_grid, n_buckets = _resolve_sizes(self.n_grid, self.n_buckets)
        if self.counts_.shape != (n_buckets, n_grid + 1) or self._method_code != _check_method(
            self.method
        ):
            raise ParameterError(
                "n_grid, n_buckets or method changed after the recalibrator started learning "
                f"(state is for n_buckets={self.counts_.shape[0]}, "
                f"n_grid={self.counts_.shape[1] - 1}); call fit() or use a clone"
            )

    def _no_pending(self, what):
        if getattr(self, "_pending", None) is not None:
            raise ParameterError(
                f"cannot {what}: the forecast for p_raw={self._pending[0]!r} is still waiting "
                "for its outcome; call update(p_raw, y) first"
            )

    def _kernel_args(self):
        return (
            self.counts_[None],
            self.outcome_sums_[None],
            self.homes_,
            self.grid_.shape[0] - 1,
            self.n_buckets_,
            self._method_code,
        )

    # ------------------------------------------------------------------ online protocol

    def forecast(self, p_raw) -> float:
        """Step 1 of the online protocol: the calibrated forecast for raw forecast ``p_raw``.

        Draws the forecaster's coin (the forecast is random when the bucket's subroutine
        mixes two grid points) and remembers the draw until :meth:`update` reveals the
        outcome. Calling ``forecast`` twice without an ``update`` is an error.

        Parameters
        ----------
        p_raw : float
            The base forecaster's probability, in [0, 1].

        Returns
        -------
        float
            A grid value ``i / N``.
        """
        p = _check_scalar_probability(p_raw)
        self._ensure_state()
        self._no_pending("forecast again")
        counts, sums, homes, n_grid, n_buckets, method = self._kernel_args()
        j, lo, w_lo, k = _kernels.forecast_step(
            p, 0, counts, sums, homes, n_grid, n_buckets, method, self.rng_state_
        )
        self._pending = (p, j, lo, w_lo, k)
        return k / n_grid

    def update(self, p_raw, y):
        """Step 2 of the online protocol: learn the outcome ``y`` of raw forecast ``p_raw``.

        If :meth:`forecast` was called for this ``p_raw``, its draw is the one learned
        from; otherwise the forecast is made (and its coin drawn) here, so ``update``
        alone is exactly ``partial_fit`` on one sample.

        Parameters
        ----------
        p_raw : float
            The same raw probability that was passed to :meth:`forecast`.
        y : {0, 1}
            The outcome.

        Returns
        -------
        self
        """
        p = _check_scalar_probability(p_raw)
        yv = _check_scalar_outcome(y)
        self._ensure_state()
        counts, sums, homes, n_grid, n_buckets, method = self._kernel_args()
        if self._pending is None:
            j, lo, w_lo, k = _kernels.forecast_step(
                p, 0, counts, sums, homes, n_grid, n_buckets, method, self.rng_state_
            )
        else:
            p_pending, j, lo, w_lo, k = self._pending
            if p != p_pending:
                raise ParameterError(
                    f"`p_raw` must be the raw forecast of the pending forecast "
                    f"({p_pending!r}); got {p!r}"
                )
        _kernels.update_step(0, j, lo, w_lo, k, yv, counts, sums, method)
        self._pending = None
        self.n_updates_ += 1
        return self

    # ------------------------------------------------------------------ streams

    def forecast_stream(self, p_raw, y) -> np.ndarray:
        """Run the online protocol over a whole stream in one compiled call.

        For each ``t`` in order: forecast for ``p_raw[t]``, then learn ``y[t]``. Identical,
        draw for draw, to calling :meth:`forecast` and :meth:`update` in a loop.

        Parameters
        ----------
        p_raw : array-like of shape (T,)
            Raw probabilities in [0, 1].
        y : array-like of shape (T,)
            Outcomes (0/1).

        Returns
        -------
        ndarray of shape (T,)
            The forecast issued before each outcome (grid values).
        """
        p = check_probabilities(p_raw, "p_raw")
        yv = check_outcomes(y, "y", p.shape[0])
        self._ensure_state()
        self._no_pending("run a stream")
        forecasts, _ = self._run(p, yv)
        return forecasts

    def _run(self, p, yv):
        forecasts = np.empty(p.shape[0])
        means = np.empty(p.shape[0])
        counts, sums, homes, n_grid, n_buckets, method = self._kernel_args()
        if p.shape[0]:
            _kernels.run_stream(
                p, yv, np.zeros(p.shape[0], dtype=np.int64), counts, sums, homes, n_grid,
                n_buckets, method, self.rng_state_, forecasts, means,
            )
        self.n_updates_ += int(p.shape[0])
        return forecasts, means

    # ------------------------------------------------------------------ scikit-learn API

    def _check_X(self, X):
        if issparse(X):
            raise ParameterTypeError(
                f"`X` must be a dense array: sparse input is not supported; got {describe(X)}"
            )
        if np.iscomplexobj(X):
            raise ParameterError("`X` must hold raw probabilities: Complex data not supported")
        arr = as_float_array(X, "X", ndim=2)
        if arr.shape[1] == 0:
            raise ParameterError(
                f"X has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required."
            )
        if arr.shape[1] != 1:
            raise ParameterError(
                f"X has {arr.shape[1]} features, but {type(self).__name__} is expecting 1 "
                "feature as input (the raw probability)"
            )
        return check_probabilities(arr[:, 0], "X[:, 0]")

    def partial_fit(self, X, y, classes=None):
        """Learn from a batch of samples in order, as an online stream.

        An empty batch only creates the state, so that :meth:`predict_proba` can report
        the very first forecast's distribution.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1)
            Raw probabilities in [0, 1].
        y : array-like of shape (n_samples,)
            Outcomes (0/1).
        classes : array-like of shape (2,), optional
            Must be ``[0, 1]`` if given (accepted for the scikit-learn online API).

        Returns
        -------
        self
        """
        if classes is not None and not np.array_equal(np.asarray(classes), [0, 1]):
            raise ParameterError(f"`classes` must be [0, 1]; got {describe(classes)}")
        yv = check_outcomes(y, "y")
        p = self._check_X(X)
        _check_same_length(p, yv)
        self._ensure_state()
        self._no_pending("partial_fit")
        self._run(p, yv)
        return self

    def fit(self, X, y):
        """Forget everything and learn from ``(X, y)`` as one online stream, in order.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1)
            Raw probabilities in [0, 1].
        y : array-like of shape (n_samples,)
            Outcomes (0/1).

        Returns
        -------
        self
        """
        yv = check_outcomes(y, "y")
        p = self._check_X(X)
        _check_same_length(p, yv)
        self._reset()
        self._run(p, yv)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Mean calibrated forecast the current state would issue for each raw probability.

        Deterministic and read-only (no coin is drawn, nothing is learned): the mean of
        the mixed forecast of each sample's bucket, which is what :meth:`forecast` would
        draw from next. Use it to apply a frozen recalibrator to new data.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1)
            Raw probabilities in [0, 1].

        Returns
        -------
        ndarray of shape (n_samples, 2)
            ``[1 - q, q]`` per row.
        """
        check_fitted(self, "counts_")
        p = self._check_X(X)
        q = np.empty(p.shape[0])
        counts, sums, homes, n_grid, n_buckets, method = self._kernel_args()
        if p.shape[0]:
            _kernels.mean_forecasts(
                p, np.zeros(p.shape[0], dtype=np.int64), counts, sums, homes, n_grid,
                n_buckets, method, q,
            )
        return np.column_stack([1.0 - q, q])

    def predict(self, X) -> np.ndarray:
        """Most likely outcome: 1 where the mean calibrated forecast is at least 1/2.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1)
            Raw probabilities in [0, 1].

        Returns
        -------
        ndarray of shape (n_samples,), dtype int64
        """
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(np.int64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.poor_score = True
        tags.input_tags.allow_nan = False
        return tags

    # ------------------------------------------------------------------ persistence

    def _to_state(self):
        check_fitted(self, "counts_")
        self._no_pending("save")
        params = self.get_params()
        seed = params["random_state"]
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            params["random_state"] = int(seed)
        else:
            params["random_state"] = None  # a Generator cannot be stored; the coin state is
        params["n_updates_"] = int(self.n_updates_)
        arrays = {
            "counts_": self.counts_,
            "outcome_sums_": self.outcome_sums_,
            "rng_state_": self.rng_state_,
        }
        return params, arrays

    @classmethod
    def _from_state(cls, params, arrays):
        params = dict(params)
        n_updates = params.pop("n_updates_")
        model = cls(**params)
        model._reset()
        for name in ("counts_", "outcome_sums_"):
            if arrays[name].shape != model.counts_.shape:
                raise ParameterError(
                    f"saved `{name}` has shape {arrays[name].shape}; the parameters need "
                    f"{model.counts_.shape}"
                )
            getattr(model, name)[...] = arrays[name]
        model.rng_state_ = np.ascontiguousarray(arrays["rng_state_"], dtype=np.uint64)
        model.n_updates_ = int(n_updates)
        return model


@dataclass(frozen=True)
class OnlineRecalibration:
    """A recalibrated stream: forecasts over time and their running metrics.

    Attributes
    ----------
    forecasts : ndarray of shape (T,)
        The recalibrated forecast ``p_t`` issued before each outcome (grid values).
    expected_forecasts : ndarray of shape (T,)
        The mean of the mixed forecast ``p_t`` was drawn from (not on the grid). For
        ``method="regret"`` these do not depend on the coin at all.
    p_raw : ndarray of shape (T,)
        The raw forecasts ``p^F_t``.
    y : ndarray of shape (T,)
        The outcomes (float 0/1).
    groups : ndarray of shape (T,), dtype int64, or None
        Index into ``group_labels`` of each step's group (``None`` when ungrouped).
    group_labels : ndarray or None
        The distinct group labels, sorted; group ``g`` had its own recalibrator.
    metrics : RunningMetrics
        Running calibration error and losses of ``forecasts``.
    base_metrics : RunningMetrics
        The same for ``p_raw``.
    regret : RunningRegret
        Running loss of ``forecasts`` minus that of ``p_raw``.
    params : dict
        ``n_grid``, ``n_buckets``, ``method``, ``log_eps`` used.
    """

    forecasts: np.ndarray
    expected_forecasts: np.ndarray
    p_raw: np.ndarray
    y: np.ndarray
    groups: np.ndarray | None
    group_labels: np.ndarray | None
    metrics: RunningMetrics
    base_metrics: RunningMetrics
    regret: RunningRegret
    params: dict

    def subset(self, label) -> "OnlineRecalibration":
        """The steps of one group, with metrics recomputed over that sub-stream only.

        Parameters
        ----------
        label : object
            One of ``group_labels``.

        Returns
        -------
        OnlineRecalibration
        """
        if self.group_labels is None:
            raise ParameterError("this stream was recalibrated without groups")
        where = np.flatnonzero(self.group_labels == label)
        if where.size != 1:
            raise ParameterError(
                f"`label` must be one of {self.group_labels.tolist()}; got {describe(label)}"
            )
        mask = self.groups == where[0]
        return _make_result(
            self.forecasts[mask], self.expected_forecasts[mask], self.p_raw[mask],
            self.y[mask], np.zeros(int(mask.sum()), dtype=np.int64),
            self.group_labels[where], self.params,
        )


def _make_result(forecasts, means, p, y, codes, labels, params):
    n_grid, log_eps = params["n_grid"], params["log_eps"]
    return OnlineRecalibration(
        forecasts=forecasts,
        expected_forecasts=means,
        p_raw=p,
        y=y,
        groups=None if labels is None else codes,
        group_labels=labels,
        metrics=running_metrics(forecasts, y, n_grid=n_grid, log_eps=log_eps),
        base_metrics=running_metrics(p, y, n_grid=n_grid, log_eps=log_eps),
        regret=running_regret(forecasts, p, y, log_eps=log_eps),
        params=dict(params),
    )


def recalibrate_online(
    p_raw,
    y,
    *,
    groups=None,
    n_grid: int = 10,
    n_buckets: int | None = None,
    method: str = "regret",
    random_state=None,
    log_eps: float = 1e-4,
) -> OnlineRecalibration:
    """Recalibrate a stream of ``(raw probability, outcome)`` pairs online, in one call.

    Runs Algorithm 1 of Kuleshov & Ermon (2017) over the stream in order -- forecast for
    ``p_raw[t]``, then learn ``y[t]`` -- in one compiled pass, and computes the running
    calibration error, losses and regret against the raw forecasts.

    Parameters
    ----------
    p_raw : array-like of shape (T,)
        Raw forecasts ``p^F_t`` in [0, 1], in stream order.
    y : array-like of shape (T,)
        Outcomes (0/1).
    groups : array-like of shape (T,), optional
        A label per step (e.g. the event kind). Each distinct label gets its own,
        independent recalibrator (its own ``M`` buckets), as if the sub-streams were
        recalibrated separately; the forecasts stay in stream order.
    n_grid, n_buckets, method, random_state
        As in :class:`OnlineRecalibrator`.
    log_eps : float, default=1e-4
        Clipping of the log loss in the metrics.

    Returns
    -------
    OnlineRecalibration

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.online import recalibrate_online
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, size=1000)
    >>> r = recalibrate_online(np.where(y == 1, 0.7, 0.3), y, random_state=0)
    >>> print(f"{r.base_metrics.calibration_l1[-1]:.3f} {r.metrics.calibration_l1[-1]:.3f}")
    0.300 0.002
    """
    n_grid, n_buckets_ = _resolve_sizes(n_grid, n_buckets)
    method_code = _check_method(method)
    log_eps = _check_log_eps(log_eps)
    p = check_probabilities(p_raw, "p_raw")
    yv = check_outcomes(y, "y", p.shape[0])
    if groups is None:
        labels, codes = None, np.zeros(p.shape[0], dtype=np.int64)
    else:
        g = np.asarray(groups)
        if g.ndim != 1 or g.shape[0] != p.shape[0]:
            raise ParameterError(
                f"`groups` must be a 1-d array with one label per step ({p.shape[0]}); "
                f"got shape {g.shape}"
            )
        if g.dtype.kind == "f" and np.isnan(g).any():
            raise ParameterError("`groups` must not contain NaN")
        labels, codes = np.unique(g, return_inverse=True)
        codes = np.ascontiguousarray(codes, dtype=np.int64)
    n_groups = 1 if labels is None else labels.shape[0]
    counts = np.zeros((n_groups, n_buckets_, n_grid + 1))
    sums = np.zeros_like(counts)
    forecasts = np.empty(p.shape[0])
    means = np.empty(p.shape[0])
    if p.shape[0]:
        _kernels.run_stream(
            p, yv, codes, counts, sums, bucket_homes(n_grid, n_buckets_), n_grid, n_buckets_,
            method_code, _seed_state(random_state), forecasts, means,
        )
    params = {"n_grid": n_grid, "n_buckets": n_buckets_, "method": method, "log_eps": log_eps}
    return _make_result(forecasts, means, p, yv, codes, labels, params)
