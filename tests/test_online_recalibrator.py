"""OnlineRecalibrator and recalibrate_online: API equivalences, guarantees, errors, sklearn."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from structcal import ParameterError, ParameterTypeError
from structcal import io as scio
from structcal.exceptions import NotFittedError
from structcal.online import OnlineRecalibrator, recalibrate_online, running_metrics

METHODS = ["regret", "blackwell"]


def _stream(seed, T=500, M=10):
    rng = np.random.default_rng(seed)
    # raw forecasts include bucket boundaries, 0 and 1
    p = rng.choice(np.concatenate([rng.random(30), np.arange(M + 1) / M]), size=T)
    y = (rng.random(T) < (0.2 + 0.6 * p)).astype(np.int64)
    return p, y


def _bernoulli(seed, T):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=T)
    return np.where(y == 1, 0.7, 0.3), y


# --------------------------------------------------------------------------- equivalences


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("M", [1, 3, 10])
@pytest.mark.parametrize("seed", [0, 1])
def test_batch_equals_step_by_step(method, M, seed):
    p, y = _stream(seed)
    batch = OnlineRecalibrator(n_buckets=M, method=method, random_state=seed)
    fb = batch.forecast_stream(p, y)
    step = OnlineRecalibrator(n_buckets=M, method=method, random_state=seed)
    fs = np.empty_like(fb)
    for t in range(p.shape[0]):
        if t % 7 == 3:  # read-only calls in between change nothing
            step.predict_proba(p[:, None])
        fs[t] = step.forecast(p[t])
        step.update(p[t], y[t])
    np.testing.assert_array_equal(fb, fs)
    np.testing.assert_array_equal(batch.counts_, step.counts_)
    np.testing.assert_array_equal(batch.outcome_sums_, step.outcome_sums_)
    np.testing.assert_array_equal(batch.rng_state_, step.rng_state_)
    assert batch.n_updates_ == step.n_updates_ == p.shape[0]


@pytest.mark.parametrize("method", METHODS)
def test_update_alone_equals_partial_fit_and_chunking_is_invisible(method):
    p, y = _stream(3)
    a = OnlineRecalibrator(method=method, random_state=7).partial_fit(p[:, None], y)
    b = OnlineRecalibrator(method=method, random_state=7)
    for t in range(p.shape[0]):
        b.update(p[t], y[t])  # no forecast: update draws the coin itself
    c = OnlineRecalibrator(method=method, random_state=7)
    for chunk in np.array_split(np.arange(p.shape[0]), [1, 50, 51, 300]):
        c.partial_fit(p[chunk, None], y[chunk])
    d = OnlineRecalibrator(method=method, random_state=7).fit(p[:, None], y)
    for other in (b, c, d):
        np.testing.assert_array_equal(a.counts_, other.counts_)
        np.testing.assert_array_equal(a.outcome_sums_, other.outcome_sums_)
        np.testing.assert_array_equal(a.rng_state_, other.rng_state_)
        np.testing.assert_array_equal(a.predict_proba(p[:, None]), other.predict_proba(p[:, None]))


@pytest.mark.parametrize("method", METHODS)
def test_recalibrate_online_equals_the_estimator(method):
    p, y = _stream(4)
    r = recalibrate_online(p, y, method=method, n_grid=8, n_buckets=5, random_state=3)
    est = OnlineRecalibrator(n_grid=8, n_buckets=5, method=method, random_state=3)
    np.testing.assert_array_equal(r.forecasts, est.forecast_stream(p, y))
    m = running_metrics(r.forecasts, y, n_grid=8)
    np.testing.assert_array_equal(r.metrics.calibration_l1, m.calibration_l1)
    np.testing.assert_array_equal(r.base_metrics.l2_loss, running_metrics(p, y, n_grid=8).l2_loss)
    np.testing.assert_allclose(r.regret.l2_loss, r.metrics.l2_loss - r.base_metrics.l2_loss,
                               atol=1e-12)


def test_groups_are_independent_recalibrators():
    """With the regret method the mixed forecasts do not depend on the coin, so a grouped
    run must equal separate runs on each group's sub-stream, step for step."""
    p, y = _stream(5, T=600)
    groups = np.random.default_rng(0).choice(np.array(["map", "marginal", "other"]), size=600)
    r = recalibrate_online(p, y, groups=groups, random_state=1)
    assert r.group_labels.tolist() == ["map", "marginal", "other"]
    for label in r.group_labels:
        sel = groups == label
        alone = recalibrate_online(p[sel], y[sel], random_state=99)
        np.testing.assert_array_equal(r.expected_forecasts[sel], alone.expected_forecasts)
        sub = r.subset(label)
        np.testing.assert_array_equal(sub.forecasts, r.forecasts[sel])
        np.testing.assert_array_equal(
            sub.metrics.calibration_l2, running_metrics(r.forecasts[sel], y[sel]).calibration_l2
        )
    with pytest.raises(ParameterError, match="must be one of"):
        r.subset("nope")
    with pytest.raises(ParameterError, match="without groups"):
        recalibrate_online(p, y).subset("map")


def test_regret_method_mixed_forecasts_ignore_the_coin_and_are_symmetric():
    p, y = _stream(6)
    a = recalibrate_online(p, y, random_state=0)
    b = recalibrate_online(p, y, random_state=1)
    np.testing.assert_array_equal(a.expected_forecasts, b.expected_forecasts)
    assert not np.array_equal(a.forecasts, b.forecasts)
    # mirror p -> 1 - p, y -> 1 - y (away from bucket boundaries): forecasts mirror too
    rng = np.random.default_rng(0)
    q = rng.random(400)
    q = q[np.abs(q * 10 - np.rint(q * 10)) > 1e-6]
    yq = (rng.random(q.shape[0]) < q).astype(int)
    m1 = recalibrate_online(q, yq, random_state=0).expected_forecasts
    m2 = recalibrate_online(1 - q, 1 - yq, random_state=0).expected_forecasts
    np.testing.assert_allclose(m1, 1 - m2, atol=1e-9)


def test_fixed_seed_reproducible_and_seeds_differ():
    p, y = _stream(7)
    for method in METHODS:
        f1 = OnlineRecalibrator(method=method, random_state=42).forecast_stream(p, y)
        f2 = OnlineRecalibrator(method=method, random_state=42).forecast_stream(p, y)
        f3 = OnlineRecalibrator(method=method, random_state=43).forecast_stream(p, y)
        np.testing.assert_array_equal(f1, f2)
        assert not np.array_equal(f1, f3)
    # a Generator is consumed like any scikit-learn random_state
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    np.testing.assert_array_equal(
        OnlineRecalibrator(random_state=g1).forecast_stream(p, y),
        OnlineRecalibrator(random_state=g2).forecast_stream(p, y),
    )


def test_predict_proba_is_the_mean_of_the_next_forecast():
    p, y = _stream(8)
    est = OnlineRecalibrator(method="blackwell", random_state=0).fit(p[:300, None], y[:300])
    probs = est.predict_proba(p[:, None])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    assert ((probs >= 0) & (probs <= 1)).all()
    np.testing.assert_array_equal(est.predict(p[:, None]), (probs[:, 1] >= 0.5).astype(int))
    # the empirical mean of many independent draws from the same state equals q
    q = probs[0, 1]
    draws = []
    for seed in range(400):
        e = clone(est).set_params(random_state=seed)
        e.fit(p[:300, None], y[:300])  # blackwell statistics depend on the coin: refit
        draws.append((e.forecast(p[0]), e.predict_proba(p[:1, None])[0, 1]))
    draws = np.array(draws)
    lo, hi = np.floor(draws[:, 1] * 10 + 1e-9) / 10, np.ceil(draws[:, 1] * 10 - 1e-9) / 10
    assert ((draws[:, 0] == lo) | (draws[:, 0] == hi)).all()
    assert 0 <= q <= 1


def test_unseen_buckets_forecast_their_home_point():
    est = OnlineRecalibrator(random_state=0).fit([[0.05]], [1])
    q = est.predict_proba(np.array([[0.0], [0.25], [0.5], [0.95], [1.0]]))[:, 1]
    np.testing.assert_allclose(q[1:], [0.3, 0.5, 0.9, 0.9])


# --------------------------------------------------------------------------- guarantees


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bernoulli_stream_algorithm1_calibrated_and_as_accurate_as_base(method, seed):
    """The paper's first experiment: p^F = 0.3 if y = 0 else 0.7, y ~ Bernoulli(1/2)."""
    p, y = _bernoulli(seed, 3000)
    r = recalibrate_online(p, y, method=method, random_state=seed)
    assert r.base_metrics.calibration_l1[-1] == pytest.approx(0.3)
    assert r.metrics.calibration_l1[299] <= 0.02  # calibrated after a few hundred steps
    assert r.metrics.calibration_l1[-1] <= 0.003
    reg = r.regret.at(3000)
    assert reg["l2_loss"] <= -0.085  # beats the base (0.09) by sharpening 0.3/0.7 to 0/1
    assert reg["misclassification"] <= 0.0
    assert reg["log_loss"] <= 0.0
    # the subroutine alone is calibrated but useless (about the constant 1/2); the
    # approachability forecaster's realised deficits jitter, so it converges more slowly
    # on i.i.d. outcomes (measured C^1 at T = 10000: regret <= 0.006, blackwell <= 0.027)
    p, y = _bernoulli(seed, 10000)
    alone = recalibrate_online(p, y, n_buckets=1, method=method, random_state=seed)
    assert alone.metrics.calibration_l1[-1] <= (0.01 if method == "regret" else 0.035)
    assert alone.metrics.l2_loss[-1] >= 0.245
    assert alone.regret.l2_loss[-1] >= 0.15


@pytest.mark.parametrize("method", METHODS)
def test_regret_small_against_a_calibrated_sharp_base(method):
    """y ~ Bernoulli(q_t) with p^F_t = q_t: nothing to gain, the cost must be O(1/N^2)."""
    rng = np.random.default_rng(11)
    T = 20000
    q = rng.random(T)
    y = (rng.random(T) < q).astype(int)
    r = recalibrate_online(q, y, method=method, random_state=0)
    reg = r.regret.at(T)
    # measured 0.003-0.004 (l2), 0.004-0.008 (misclassification) over seeds 0-2
    assert reg["l2_loss"] <= 0.008
    assert reg["misclassification"] <= 0.02
    assert r.metrics.calibration_l1[-1] <= 0.03


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_grid": 0}, "n_grid"),
        ({"n_grid": 2.5}, "n_grid"),
        ({"n_buckets": 0}, "n_buckets"),
        ({"n_buckets": -3}, "n_buckets"),
        ({"method": "hedge"}, "method"),
        ({"random_state": "seed"}, "random_state"),
    ],
)
def test_invalid_hyperparameters(kwargs, match):
    est = OnlineRecalibrator(**kwargs)  # __init__ stores, never validates
    with pytest.raises((ParameterError, ParameterTypeError), match=match):
        est.fit([[0.5]], [1])
    with pytest.raises((ParameterError, ParameterTypeError), match=match):
        OnlineRecalibrator(**kwargs).forecast(0.5)
    with pytest.raises((ParameterError, ParameterTypeError), match=match):
        recalibrate_online([0.5], [1], **kwargs)


@pytest.mark.parametrize("bad", [-0.1, 1.0000001, np.nan, np.inf, -np.inf])
def test_invalid_probabilities(bad):
    est = OnlineRecalibrator(random_state=0)
    with pytest.raises(ParameterError, match="p_raw"):
        est.forecast(bad)
    with pytest.raises(ParameterError, match="p_raw"):
        est.update(bad, 1)
    with pytest.raises(ParameterError, match="p_raw"):
        est.forecast_stream([0.2, bad], [0, 1])
    with pytest.raises(ParameterError, match="X"):
        est.partial_fit([[0.2], [bad]], [0, 1])
    with pytest.raises(ParameterError, match="p_raw"):
        recalibrate_online([0.2, bad], [0, 1])
    with pytest.raises(ParameterTypeError, match="p_raw"):
        est.forecast("0.5")


@pytest.mark.parametrize("bad", [2, -1, 0.5, np.nan, np.inf])
def test_invalid_outcomes(bad):
    est = OnlineRecalibrator(random_state=0)
    with pytest.raises(ParameterError, match="`y`"):
        est.update(0.5, bad)
    with pytest.raises(ParameterError, match="`y`"):
        est.forecast_stream([0.2, 0.3], np.array([0, bad]))
    with pytest.raises(ParameterError, match="`y`"):
        est.partial_fit([[0.2], [0.3]], np.array([0, bad]))
    with pytest.raises(ParameterError, match="`y`"):
        recalibrate_online([0.2, 0.3], np.array([1, bad]))


def test_other_invalid_inputs():
    est = OnlineRecalibrator(random_state=0)
    with pytest.raises(ParameterError, match="one outcome per"):
        est.forecast_stream([0.2, 0.3], [1])
    with pytest.raises(ParameterError, match="expecting 1 feature"):
        est.fit(np.full((3, 2), 0.5), [0, 1, 0])
    with pytest.raises(ParameterError, match="2-d"):
        est.fit([0.5, 0.5], [0, 1])
    with pytest.raises(ParameterError, match="Unknown label type"):
        est.fit([[0.5], [0.5]], ["a", "b"])
    with pytest.raises(ParameterError, match="y is None"):
        est.fit([[0.5]], None)
    with pytest.raises(ParameterError, match="classes"):
        est.partial_fit([[0.5]], [1], classes=[0, 1, 2])
    with pytest.raises(ParameterError, match="groups"):
        recalibrate_online([0.2, 0.3], [0, 1], groups=[0])
    with pytest.raises(ParameterError, match="groups"):
        recalibrate_online([0.2, 0.3], [0, 1], groups=[0.0, np.nan])
    with pytest.raises(NotFittedError):
        OnlineRecalibrator().predict_proba([[0.5]])
    # y given as booleans or floats 0.0 / 1.0 is fine
    f1 = OnlineRecalibrator(random_state=0).forecast_stream([0.2, 0.9], [False, True])
    f2 = OnlineRecalibrator(random_state=0).forecast_stream([0.2, 0.9], [0.0, 1.0])
    np.testing.assert_array_equal(f1, f2)
    # empty streams are fine for the stream API
    assert OnlineRecalibrator().forecast_stream([], []).shape == (0,)
    assert recalibrate_online([], []).metrics.n_steps == 0


def test_protocol_errors():
    est = OnlineRecalibrator(random_state=0)
    est.forecast(0.3)
    with pytest.raises(ParameterError, match="still waiting"):
        est.forecast(0.3)
    with pytest.raises(ParameterError, match="pending forecast"):
        est.update(0.4, 1)
    with pytest.raises(ParameterError, match="still waiting"):
        est.partial_fit([[0.3]], [1])
    with pytest.raises(ParameterError, match="still waiting"):
        est.forecast_stream([0.3], [1])
    est.update(0.3, 1)  # completes the step
    est.forecast_stream([0.3], [1])
    # hyperparameters changed after learning started
    est.set_params(n_grid=20)
    with pytest.raises(ParameterError, match="changed after"):
        est.forecast(0.3)
    est.fit([[0.3]], [1])  # fit starts over with the new hyperparameters
    assert est.counts_.shape == (20, 21)


# --------------------------------------------------------------------------- persistence


def test_save_load_continues_the_stream_identically(tmp_path):
    p, y = _stream(9, T=400)
    a = OnlineRecalibrator(method="blackwell", n_buckets=4, random_state=3)
    a.forecast_stream(p[:200], y[:200])
    scio.save(a, tmp_path / "rec")
    b = scio.load(tmp_path / "rec", expected_class=OnlineRecalibrator)
    assert b.get_params() == a.get_params()
    np.testing.assert_array_equal(a.forecast_stream(p[200:], y[200:]),
                                  b.forecast_stream(p[200:], y[200:]))
    assert a.n_updates_ == b.n_updates_ == 400
    # pickling works as well (plain arrays and ints)
    c = pickle.loads(pickle.dumps(b))
    np.testing.assert_array_equal(c.predict_proba(p[:, None]), b.predict_proba(p[:, None]))
    b.forecast(0.5)
    with pytest.raises(ParameterError, match="still waiting"):
        scio.save(b, tmp_path / "pending")


# --------------------------------------------------------------------------- scikit-learn

_X_DOMAIN = (
    "the single feature must be a raw probability in [0, 1]; this check feeds several "
    "features and/or values outside [0, 1]"
)
_BINARY = "outcomes must be 0/1; this check uses multiclass or string labels"

EXPECTED_FAILED_CHECKS = {
    "check_fit_score_takes_y": _X_DOMAIN,
    "check_estimators_overwrite_params": _X_DOMAIN,
    "check_dont_overwrite_parameters": _X_DOMAIN,
    "check_estimators_fit_returns_self": _X_DOMAIN,
    "check_readonly_memmap_input": _X_DOMAIN,
    "check_n_features_in_after_fitting": _X_DOMAIN,
    "check_positive_only_tag_during_fit": "negative X is rejected: raw probabilities are in "
    "[0, 1], which no input tag expresses",
    "check_estimators_dtypes": _BINARY,
    "check_dtype_object": _X_DOMAIN,
    "check_pipeline_consistency": _X_DOMAIN,
    "check_estimators_nan_inf": _X_DOMAIN + " (NaN/inf are rejected: see "
    "test_invalid_probabilities)",
    "check_estimators_pickle": _X_DOMAIN + " (see test_save_load_continues_the_stream_identically)",
    "check_f_contiguous_array_estimator": _X_DOMAIN,
    "check_classifier_data_not_an_array": _BINARY,
    "check_classifiers_one_label": _X_DOMAIN,
    "check_classifiers_classes": _BINARY,
    "check_estimators_partial_fit_n_features": _X_DOMAIN,
    "check_classifiers_train": _X_DOMAIN,
    "check_supervised_y_2d": _X_DOMAIN,
    "check_methods_sample_order_invariance": _X_DOMAIN,
    "check_methods_subset_invariance": _X_DOMAIN,
    "check_fit2d_1sample": _X_DOMAIN,
    "check_fit2d_1feature": _BINARY,
    "check_dict_unchanged": _X_DOMAIN,
    "check_fit_idempotent": _X_DOMAIN,
    "check_fit_check_is_fitted": _X_DOMAIN,
    "check_n_features_in": _X_DOMAIN,
    "check_fit2d_predict1d": _X_DOMAIN,
}


@parametrize_with_checks(
    [OnlineRecalibrator(random_state=0)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_sklearn_contract_on_probability_data():
    """What the checks above cannot reach with their own data, on raw probabilities."""
    p, y = _stream(10)
    X = p[:, None]
    est = OnlineRecalibrator(n_grid=5, n_buckets=3, method="blackwell", random_state=0)
    assert est.get_params() == {"n_grid": 5, "n_buckets": 3, "method": "blackwell",
                                "random_state": 0}
    c = clone(est)
    assert c.get_params() == est.get_params() and not hasattr(c, "counts_")
    assert est.fit(X, y) is est and est.partial_fit(X, y) is est
    assert est.n_features_in_ == 1 and est.classes_.tolist() == [0, 1]
    # fit is idempotent: it starts over from the seed
    first = est.fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(first, est.fit(X, y).predict_proba(X))
    # prediction is read-only, row-wise, order-independent
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}
    pr = est.predict_proba(X)
    est.predict(X)
    for k, v in vars(est).items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, before[k])
        else:
            assert v == before[k]
    perm = np.random.default_rng(0).permutation(X.shape[0])
    np.testing.assert_array_equal(est.predict_proba(X[perm]), pr[perm])
    np.testing.assert_array_equal(est.predict_proba(X[:7]), pr[:7])
    # list input, read-only and Fortran-ordered arrays, float32
    ro = np.asfortranarray(X.copy())
    ro.setflags(write=False)
    np.testing.assert_array_equal(clone(est).fit(ro, y).predict_proba(X), first)
    np.testing.assert_array_equal(clone(est).fit(X.tolist(), y.tolist()).predict_proba(X), first)
    clone(est).fit(X.astype(np.float32), y)
    # one class only is a valid stream
    clone(est).fit(X, np.zeros_like(y))
    with pytest.raises(ParameterError, match="expecting 1 feature"):
        est.predict_proba(np.hstack([X, X]))
