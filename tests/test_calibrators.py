"""Recalibrators against scikit-learn references, known answers and bad input."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, softmax
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.naive_bayes import GaussianNB
from sklearn.utils.estimator_checks import parametrize_with_checks

from structcal.calibrators import (
    CrossValidatedCalibration,
    HistogramBinning,
    IsotonicCalibration,
    NormalizedOneVsRest,
    PlattScaling,
    SplineCalib,
    TemperatureScaling,
    VectorScaling,
    compact_logit,
    compact_logit_epsilon,
    natural_spline_basis,
)
from structcal.exceptions import NotFittedError, ParameterError
from structcal.metrics import binned_calibration_error

# ---------------------------------------------------------------------------------------
# scikit-learn's estimator checks

_SHAPE = (
    "the check's data do not have one score column per class (e.g. 2 features for 3 "
    "classes, or classes missing from 10 columns): calibrators refuse them with a "
    "ParameterError"
)
_TRAIN = (
    "with 2 columns for 2 classes a calibrator reads only the second column as the score; "
    "the check expects a classifier that learns from both features"
)
_ABSENT = "a class absent from the calibration data cannot be calibrated (ParameterError)"
_PROBA = "HistogramBinning takes probabilities in [0, 1]; the check feeds arbitrary reals"

_SCORE_CALIBRATOR_XFAIL = {
    "check_classifiers_classes": _SHAPE,
    "check_classifiers_train": _TRAIN,
    "check_dtype_object": _ABSENT,
    "check_estimators_dtypes": _ABSENT,
    "check_estimators_fit_returns_self": _SHAPE,
    "check_estimators_nan_inf": _SHAPE,
    "check_estimators_overwrite_params": _SHAPE,
    "check_estimators_pickle": _ABSENT,
    "check_n_features_in_after_fitting": _ABSENT,
    "check_pipeline_consistency": _ABSENT,
    "check_positive_only_tag_during_fit": _SHAPE,
    "check_readonly_memmap_input": _SHAPE,
    "check_sample_weight_equivalence_on_dense_data": _ABSENT,
}
_LOGIT_XFAIL = {
    "check_classifiers_classes": _SHAPE,
    "check_classifiers_train": _SHAPE,
    "check_estimators_fit_returns_self": _SHAPE,
    "check_estimators_nan_inf": _SHAPE,
    "check_estimators_overwrite_params": _SHAPE,
    "check_readonly_memmap_input": _SHAPE,
}
_HISTOGRAM_EXTRA = [
    "check_all_zero_sample_weights_error", "check_classifier_data_not_an_array",
    "check_dict_unchanged", "check_dont_overwrite_parameters", "check_estimators_dtypes",
    "check_f_contiguous_array_estimator", "check_fit2d_1feature", "check_fit2d_1sample",
    "check_fit2d_predict1d", "check_fit_check_is_fitted", "check_fit_idempotent",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance",
    "check_n_features_in", "check_sample_weights_not_an_array",
    "check_sample_weights_not_overwritten", "check_sample_weights_shape",
    "check_classifiers_train", "check_estimators_nan_inf", "check_estimators_pickle",
    "check_pipeline_consistency", "check_positive_only_tag_during_fit",
    "check_n_features_in_after_fitting", "check_estimators_overwrite_params",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input",
    "check_classifiers_classes",
]

EXPECTED_FAILED = {
    "HistogramBinning": {
        **_SCORE_CALIBRATOR_XFAIL,
        **{name: _PROBA for name in _HISTOGRAM_EXTRA},
    },
    "PlattScaling": {
        **_SCORE_CALIBRATOR_XFAIL,
        "check_classifiers_train": _SHAPE,
        "check_non_transformer_estimators_n_iter": _ABSENT,
    },
    "IsotonicCalibration": dict(_SCORE_CALIBRATOR_XFAIL),
    "SplineCalib": {
        **_SCORE_CALIBRATOR_XFAIL,
        "check_classifiers_train": _SHAPE,
        "check_non_transformer_estimators_n_iter": _ABSENT,
        "check_sample_weight_equivalence_on_dense_data": (
            "the check passes `cv` as a list of splits; SplineCalib's `cv` is a number of "
            "folds (its folds are drawn per calibrated column)"
        ),
    },
    "NormalizedOneVsRest": {**_SCORE_CALIBRATOR_XFAIL, "check_classifiers_train": _SHAPE},
    "TemperatureScaling": {**_LOGIT_XFAIL, "check_classifiers_train": _TRAIN},
    "VectorScaling": {
        **_LOGIT_XFAIL,
        "check_sample_weight_equivalence_on_dense_data": (
            "L-BFGS stops within its tolerance, so weights and repeated rows agree only "
            "to about 1e-6, not the check's 1e-7"
        ),
    },
    "CrossValidatedCalibration": {},
}


def _expected_failed(estimator):
    return EXPECTED_FAILED[type(estimator).__name__]


@parametrize_with_checks(
    [
        HistogramBinning(),
        PlattScaling(),
        IsotonicCalibration(),
        SplineCalib(random_state=0),
        TemperatureScaling(),
        VectorScaling(),
        NormalizedOneVsRest(),
        CrossValidatedCalibration(LogisticRegression(), PlattScaling(), cv=3),
    ],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        # the check suite itself warns about skipped checks (pandas missing, ...)
        warnings.simplefilter("ignore")
        check(estimator)


# ---------------------------------------------------------------------------------------
# helpers


def log_loss(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def smooth_problem(rng, n):
    """Scores on [0, 1] with a smooth, non-sigmoid calibration map."""
    s = rng.beta(2, 2, n)
    true = 0.05 + 0.9 * (0.5 + 0.5 * np.sin(3 * np.pi * (s - 0.5)) * s)
    true = np.clip(true, 0.01, 0.99)
    y = (rng.random(n) < true).astype(int)
    return s, y, true


# ---------------------------------------------------------------------------------------
# isotonic and Platt against scikit-learn


@pytest.mark.parametrize("seed", range(5))
def test_isotonic_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = [5, 40, 300, 2000, 10][seed]
    s = np.round(rng.random(n), 2)  # ties
    y = (rng.random(n) < s).astype(int)
    y[:2] = [0, 1]
    w = rng.random(n) + 0.1
    t = np.concatenate([rng.uniform(-0.2, 1.2, 200), s])
    for weights in (None, w):
        ours = IsotonicCalibration().fit(s, y, sample_weight=weights).predict_proba(t)[:, 1]
        ref = IsotonicRegression(out_of_bounds="clip").fit(s, y, sample_weight=weights)
        np.testing.assert_allclose(ours, ref.predict(t), rtol=1e-12, atol=1e-14)


def test_isotonic_map_is_monotone_and_fits_pav_known_answer():
    cal = IsotonicCalibration().fit([1.0, 2.0, 3.0, 4.0, 5.0], [1, 0, 0, 1, 1])
    m = cal.maps_[0]
    # PAV: (1, 0, 0) pool to 1/3; then 1, 1
    np.testing.assert_allclose(m([1, 2, 3, 4, 5]), [1 / 3, 1 / 3, 1 / 3, 1, 1])
    grid = np.linspace(0, 6, 100)
    assert np.all(np.diff(m(grid)) >= 0)


@pytest.mark.parametrize("seed", range(4))
def test_platt_equals_logistic_regression_on_the_score(seed):
    rng = np.random.default_rng(seed)
    n = 500
    s = rng.normal(size=n) * (seed + 1) + seed
    y = (rng.random(n) < expit(1.5 * s - 0.3)).astype(int)
    w = rng.random(n) + 0.5
    t = np.linspace(s.min() - 1, s.max() + 1, 50)
    for weights in (None, w):
        ours = PlattScaling(prior_correction=False).fit(s, y, sample_weight=weights)
        ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(
            s[:, None], y, sample_weight=weights
        )
        np.testing.assert_allclose(ours.maps_[0].coef, ref.coef_[0, 0], rtol=1e-6)
        np.testing.assert_allclose(ours.maps_[0].intercept, ref.intercept_[0], rtol=1e-6,
                                   atol=1e-8)
        np.testing.assert_allclose(ours.predict_proba(t), ref.predict_proba(t[:, None]),
                                   rtol=1e-6, atol=1e-9)


def test_platt_prior_correction_solves_the_soft_target_problem():
    rng = np.random.default_rng(0)
    s = rng.normal(size=300)
    y = (s > 0).astype(int)  # separable: the plain MLE diverges
    cal = PlattScaling().fit(s, y)
    m = cal.maps_[0]
    npos, nneg = y.sum(), 300 - y.sum()
    t = np.where(y == 1, (npos + 1) / (npos + 2), 1 / (nneg + 2))
    p = m(s)
    # stationarity of the cross-entropy with Platt's targets
    np.testing.assert_allclose([np.sum((p - t) * s), np.sum(p - t)], 0, atol=1e-8)
    assert np.isfinite(m.coef) and m.coef > 0
    from structcal.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="separate the classes"):
        PlattScaling(prior_correction=False, max_iter=20).fit(s, y)


# ---------------------------------------------------------------------------------------
# SplineCalib


def test_natural_basis_matches_lucena_definition_and_bspline_form():
    knots = np.array([0.1, 0.2, 0.45, 0.5, 0.8, 0.95])
    x = np.linspace(-0.3, 1.4, 300)
    N = natural_spline_basis(x, knots)
    K = len(knots)

    def d(k):  # 1-based as in the paper
        return (np.maximum(x - knots[k - 1], 0) ** 3 - np.maximum(x - knots[-1], 0) ** 3) / (
            knots[-1] - knots[k - 1])

    ref = np.column_stack([np.ones_like(x), x] + [d(k) - d(K - 1) for k in range(1, K - 1)])
    np.testing.assert_allclose(N, ref, rtol=1e-12, atol=1e-12)
    # natural: linear beyond the boundary knots (second differences vanish)
    out = x > knots[-1] + 0.01
    np.testing.assert_allclose(np.diff(N[out], 2, axis=0), 0, atol=1e-9)


def test_spline_map_equals_natural_basis_expansion_everywhere():
    rng = np.random.default_rng(1)
    s, y, _ = smooth_problem(rng, 3000)
    for variant in (False, True):
        cal = SplineCalib(random_state=0, n_knots=12, compact_logit=variant).fit(s, y)
        m = cal.maps_[0]
        assert (m.epsilon is not None) == variant
        x = np.linspace(-0.5, 1.5, 400)  # inside and outside the knots
        np.testing.assert_allclose(
            m.log_odds(x), natural_spline_basis(m.transform(x), m.knots) @ m.coef,
            rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("lam", [1e-3, 1.0, 100.0])
def test_spline_fit_minimises_the_penalised_objective(lam):
    """Compare with a dense solve of Lucena's objective on his basis."""
    rng = np.random.default_rng(2)
    s, y, _ = smooth_problem(rng, 400)
    w = rng.random(400) + 0.5
    cal = SplineCalib(lambdas=[lam], n_knots=8, random_state=0, compact_logit=False).fit(
        s, y, sample_weight=w)
    m = cal.maps_[0]
    X = natural_spline_basis(s, m.knots)

    def objective(beta):
        eta = X @ beta
        return np.sum(w * (np.logaddexp(0, eta) - y * eta)) + 0.5 * lam * np.sum(beta[1:] ** 2)

    ref = minimize(objective, np.zeros(X.shape[1]), method="BFGS", options={"gtol": 1e-9})
    assert objective(m.coef) <= ref.fun + 1e-7
    np.testing.assert_allclose(X @ m.coef, X @ ref.x, atol=1e-3)
    assert m.reg_lambda == lam


def test_spline_lambda_is_chosen_by_cross_validated_log_loss():
    rng = np.random.default_rng(3)
    s, y, _ = smooth_problem(rng, 2000)
    lambdas = np.logspace(-3, 3, 7)
    cal = SplineCalib(lambdas=lambdas, random_state=0, compact_logit=False).fit(s, y)
    m = cal.maps_[0]
    assert m.cv_loss.shape == (7,)
    assert m.reg_lambda == lambdas[np.argmin(m.cv_loss)]
    assert np.all(np.isfinite(m.cv_loss)) and np.ptp(m.cv_loss) > 1e-4
    # a fixed penalty reproduces the full fit at the selected penalty
    fixed = SplineCalib(lambdas=[m.reg_lambda], random_state=0, compact_logit=False).fit(
        s, y).maps_[0]
    grid = np.linspace(0, 1, 101)
    np.testing.assert_allclose(fixed(grid), m(grid), atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_splinecalib_beats_isotonic_and_platt_on_a_smooth_map(seed):
    rng = np.random.default_rng(seed)
    s, y, _ = smooth_problem(rng, 3000)
    st, yt, true = smooth_problem(rng, 50_000)
    spline = log_loss(yt, SplineCalib(random_state=seed).fit(s, y).predict_proba(st)[:, 1])
    iso = log_loss(yt, IsotonicCalibration().fit(s, y).predict_proba(st)[:, 1])
    platt = log_loss(yt, PlattScaling().fit(s, y).predict_proba(st)[:, 1])
    best = log_loss(yt, true)
    assert spline < iso and spline < platt
    assert spline - best < 0.5 * (min(iso, platt) - best)


def test_compact_logit_properties_and_epsilon_heuristic():
    for eps in (0.1, 0.01, 1e-4):
        x = np.array([0.0, eps / 2, eps, 0.5, 1 - eps, 1 - eps / 2, 1.0])
        g = compact_logit(x, eps)
        np.testing.assert_allclose(g, [0, eps / 2, eps, 0.5, 1 - eps, 1 - eps / 2, 1],
                                   rtol=1e-12, atol=1e-15)
        grid = np.linspace(0, 1, 1001)
        assert np.all(np.diff(compact_logit(grid, eps)) > 0)
    # eps = 10^(r - 1), r = floor(log10(min(1 - p))), ignoring p = 1
    assert compact_logit_epsilon([0.2, 0.97, 1.0]) == pytest.approx(1e-3)
    assert compact_logit_epsilon([0.2, 0.5]) == pytest.approx(1e-2)
    assert compact_logit_epsilon([0.1, 0.99995]) == pytest.approx(1e-6)


def test_compact_logit_helps_an_overconfident_model():
    rng = np.random.default_rng(4)
    n = 4000
    z = rng.normal(size=n) * 2
    y = (rng.random(n) < expit(z)).astype(int)
    p = expit(6 * z)  # over-confident scores piled up near 0 and 1
    zt = rng.normal(size=50_000) * 2
    yt = (rng.random(50_000) < expit(zt)).astype(int)
    pt = expit(6 * zt)
    plain = SplineCalib(random_state=0, compact_logit=False).fit(p, y)
    logit = SplineCalib(random_state=0, compact_logit=True).fit(p, y)
    assert logit.maps_[0].epsilon == compact_logit_epsilon(p)
    assert log_loss(yt, logit.predict_proba(pt)[:, 1]) < log_loss(yt, plain.predict_proba(pt)[:, 1])
    # "auto" keeps the variant with the lower cross-validated loss: here the transform
    auto = SplineCalib(random_state=0).fit(p, y).maps_[0]
    assert auto.epsilon == logit.maps_[0].epsilon
    assert min(auto.cv_loss) == min(logit.maps_[0].cv_loss) < min(plain.maps_[0].cv_loss)
    # ... and on well-spread scores with a wiggly map, no transform
    s, ys, _ = smooth_problem(rng, 4000)
    auto = SplineCalib(random_state=0).fit(s, ys).maps_[0]
    cand = [SplineCalib(random_state=0, compact_logit=v).fit(s, ys).maps_[0]
            for v in (False, True)]
    best = min(cand, key=lambda m: min(m.cv_loss))
    assert auto.epsilon == best.epsilon
    # scores outside [0, 1] cannot be transformed: "auto" falls back to none
    assert SplineCalib(random_state=0).fit(4 * s - 2, ys).maps_[0].epsilon is None


def test_splinecalib_multiclass_per_class_then_renormalised():
    rng = np.random.default_rng(5)
    n, K = 3000, 4
    logits = rng.normal(size=(n, K)) * 2
    P = softmax(logits, axis=1)
    y = np.array([rng.choice(K, p=row) for row in softmax(logits / 2, axis=1)])
    cal = SplineCalib(random_state=0).fit(P, y)
    out = cal.predict_proba(P)
    np.testing.assert_allclose(out.sum(1), 1, rtol=1e-12)
    cols = np.column_stack([m(P[:, k]) for k, m in enumerate(cal.maps_)])
    np.testing.assert_allclose(out, cols / cols.sum(1, keepdims=True), rtol=1e-12)
    # better than the raw over-confident probabilities
    nll = -np.mean(np.log(out[np.arange(n), y]))
    assert nll < -np.mean(np.log(P[np.arange(n), y]))


# ---------------------------------------------------------------------------------------
# histogram binning


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_histogram_binning_uses_bin_frequencies(strategy):
    rng = np.random.default_rng(6)
    s = rng.random(500)
    y = (rng.random(500) < s).astype(int)
    cal = HistogramBinning(n_bins=7, strategy=strategy).fit(s, y)
    table = binned_calibration_error(y, s, n_bins=7, strategy=strategy).table
    m = cal.maps_[0]
    np.testing.assert_array_equal(m.bin_edges, table.bin_edges)
    np.testing.assert_allclose(m.values, table.mean_outcome)
    np.testing.assert_allclose(cal.predict_proba(s)[:, 1], table.mean_outcome[m.bins(s)])


def test_histogram_empty_bin_maps_to_its_midpoint():
    cal = HistogramBinning(n_bins=4).fit([0.1, 0.2, 0.9, 0.95], [0, 1, 1, 1])
    np.testing.assert_allclose(cal.maps_[0].values, [0.5, 0.375, 0.625, 1.0])


# ---------------------------------------------------------------------------------------
# temperature and vector scaling


@pytest.mark.parametrize("T", [0.5, 1.0, 3.0])
def test_temperature_scaling_recovers_the_temperature(T):
    rng = np.random.default_rng(7)
    z = rng.normal(size=(20_000, 5)) * 3
    y = np.array([rng.choice(5, p=row) for row in softmax(z / T, axis=1)])
    cal = TemperatureScaling().fit(z, y)
    assert cal.temperature_ == pytest.approx(T, rel=0.05)
    # stationarity of the log loss in 1 / T
    p = softmax(z / cal.temperature_, axis=1)
    grad = np.sum((p * z).sum(1) - z[np.arange(len(y)), y])
    assert abs(grad) < 1e-6 * len(y)
    np.testing.assert_array_equal(cal.predict(z), np.argmax(z, axis=1))


def test_temperature_binary_column_and_uninformative_logits():
    rng = np.random.default_rng(8)
    z = rng.normal(size=5000) * 4
    y = (rng.random(5000) < expit(z / 2)).astype(int)
    cal = TemperatureScaling().fit(z, y)
    assert cal.temperature_ == pytest.approx(2.0, rel=0.1)
    np.testing.assert_allclose(cal.predict_proba(z)[:, 1], expit(z / cal.temperature_))
    # logits unrelated to the labels (anti-correlated): the fit goes to T = inf
    cal = TemperatureScaling().fit(np.array([[1.0, 0.0], [0.0, 1.0]]), [1, 0])
    assert np.isinf(cal.temperature_)
    np.testing.assert_allclose(cal.predict_proba([[5.0, 0.0]]), [[0.5, 0.5]])


def test_vector_scaling_recovers_scales_and_beats_temperature():
    rng = np.random.default_rng(9)
    n, K = 30_000, 3
    z = rng.normal(size=(n, K)) * 2
    a, b = np.array([0.5, 1.0, 2.0]), np.array([0.3, -0.1, -0.2])
    y = np.array([rng.choice(K, p=row) for row in softmax(z * a + b, axis=1)])
    vs = VectorScaling().fit(z, y)
    np.testing.assert_allclose(vs.scale_, a, atol=0.1)
    np.testing.assert_allclose(vs.offset_, b - b.mean(), atol=0.1)
    ts = TemperatureScaling().fit(z, y)
    nll = [-np.mean(np.log(m.predict_proba(z)[np.arange(n), y])) for m in (vs, ts)]
    assert nll[0] < nll[1]


# ---------------------------------------------------------------------------------------
# wrappers


def test_normalized_one_vs_rest_equals_builtin_multiclass_and_wraps_any_classifier():
    rng = np.random.default_rng(10)
    P = rng.dirichlet(np.ones(3) * 0.5, 1500)
    y = np.array([rng.choice(3, p=np.sqrt(r) / np.sqrt(r).sum()) for r in P])
    a = NormalizedOneVsRest(PlattScaling()).fit(P, y).predict_proba(P)
    b = PlattScaling().fit(P, y).predict_proba(P)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    c = NormalizedOneVsRest(LogisticRegression()).fit(P, y).predict_proba(P)
    np.testing.assert_allclose(c.sum(1), 1)
    # binary: the same as the binary calibrator
    s = P[:, 0]
    yb = (y == 0).astype(int)
    np.testing.assert_allclose(NormalizedOneVsRest(IsotonicCalibration()).fit(s, yb)
                               .predict_proba(s), IsotonicCalibration().fit(s, yb)
                               .predict_proba(s))


def test_two_probability_columns_mean_the_positive_column():
    rng = np.random.default_rng(11)
    p = rng.random(400)
    y = (rng.random(400) < p).astype(int)
    both = PlattScaling().fit(np.column_stack([1 - p, p]), y)
    one = PlattScaling().fit(p, y)
    np.testing.assert_allclose(both.predict_proba(np.column_stack([1 - p, p])),
                               one.predict_proba(p))


def test_cross_validated_calibration_equals_the_manual_pipeline():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + X[:, 1] ** 2 + rng.normal(size=600) > 1).astype(int)
    cv = StratifiedKFold(5)
    model = CrossValidatedCalibration(GaussianNB(), IsotonicCalibration(), cv=cv).fit(X, y)
    oof = cross_val_predict(GaussianNB(), X, y, cv=cv, method="predict_proba")
    cal = IsotonicCalibration().fit(oof, y)
    final = GaussianNB().fit(X, y)
    np.testing.assert_allclose(model.predict_proba(X), cal.predict_proba(final.predict_proba(X)))
    default = CrossValidatedCalibration(GaussianNB()).fit(X, y)
    assert isinstance(default.calibrator_, SplineCalib)
    assert np.all(default.predict(X) == default.classes_[default.predict_proba(X).argmax(1)])


# ---------------------------------------------------------------------------------------
# invariances


@pytest.mark.parametrize(
    "make",
    [
        lambda: PlattScaling(),
        lambda: IsotonicCalibration(),
        lambda: HistogramBinning(strategy="quantile"),
        lambda: SplineCalib(lambdas=[0.1], random_state=0),
        lambda: TemperatureScaling(),
        lambda: VectorScaling(),
    ],
)
def test_sample_order_invariance(make):
    rng = np.random.default_rng(13)
    p = np.round(rng.random(800), 3)
    y = (rng.random(800) < p).astype(int)
    X = p if not isinstance(make(), (TemperatureScaling, VectorScaling)) else np.log(
        np.column_stack([1 - p, p]) + 1e-3)
    perm = rng.permutation(800)
    a = make().fit(X, y).predict_proba(X)
    b = make().fit(X[perm], y[perm]).predict_proba(X)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def test_relabelling_classes_permutes_columns():
    rng = np.random.default_rng(14)
    P = rng.dirichlet(np.ones(3), 900)
    y = np.array([rng.choice(3, p=r) for r in P])
    names = np.array(["cat", "dog", "emu"])
    a = IsotonicCalibration().fit(P, y)
    b = IsotonicCalibration().fit(P, names[y])
    np.testing.assert_allclose(a.predict_proba(P), b.predict_proba(P))
    assert list(b.predict(P[:5])) == list(names[a.predict(P[:5])])


# ---------------------------------------------------------------------------------------
# bad input


ALL = [HistogramBinning, PlattScaling, IsotonicCalibration, SplineCalib,
       TemperatureScaling, VectorScaling, NormalizedOneVsRest]


@pytest.mark.parametrize("cls", ALL)
def test_bad_input_raises_clear_errors(cls):
    s = np.array([0.1, 0.4, 0.6, 0.9, 0.3, 0.7])
    y = np.array([0, 0, 1, 1, 0, 1])
    with pytest.raises(ParameterError, match="NaN"):
        cls().fit(np.r_[s[:-1], np.nan], y)
    with pytest.raises(ParameterError, match="empty"):
        cls().fit(np.zeros(0), np.zeros(0, int))
    with pytest.raises(ParameterError, match="one label per row"):
        cls().fit(s, y[:-1])
    with pytest.raises(ParameterError, match="exactly 2 classes.*1 class"):
        cls().fit(s, np.zeros(6, int))
    with pytest.raises(ParameterError, match="Unknown label type"):
        cls().fit(s, s)
    with pytest.raises(ParameterError, match="2 classes"):
        cls().fit(s, [0, 1, 2, 0, 1, 2])
    with pytest.raises(NotFittedError):
        cls().predict_proba(s)
    with pytest.raises(ParameterError, match="sample_weight"):
        cls().fit(s, y, sample_weight=-np.ones(6))
    if cls in (HistogramBinning,):
        with pytest.raises(ParameterError, match=r"probabilities in \[0, 1\]"):
            cls().fit(s + 1, y)


def test_multiclass_shape_and_absent_class_errors():
    P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1]])
    with pytest.raises(ParameterError, match="class 2.*only one class"):
        IsotonicCalibration().fit(P, [0, 1, 0, 1])
    with pytest.raises(ParameterError, match="3 score columns.*2 classes"):
        IsotonicCalibration().fit(P, ["a", "b", "a", "b"])
    cal = IsotonicCalibration().fit(P[:, :2] / P[:, :2].sum(1, keepdims=True), [0, 1, 0, 1])
    with pytest.raises(ParameterError, match="expecting 2 features"):
        cal.predict_proba(P)
    with pytest.raises(ParameterError, match="Reshape your data"):
        TemperatureScaling().fit(P, [0, 1, 2, 0]).predict_proba(P[:, 0])


def test_hyperparameter_validation():
    s = np.linspace(0.05, 0.95, 20)
    y = np.arange(20) % 2
    with pytest.raises(ParameterError, match="n_bins"):
        HistogramBinning(n_bins=0).fit(s, y)
    with pytest.raises(ParameterError, match="strategy"):
        HistogramBinning(strategy="kmeans").fit(s, y)
    with pytest.raises(ParameterError, match="lambdas"):
        SplineCalib(lambdas=[-1.0]).fit(s, y)
    with pytest.raises(ParameterError, match="epsilon"):
        SplineCalib(compact_logit=True, epsilon=0.7).fit(s, y)
    with pytest.raises(ParameterError, match="n_knots"):
        SplineCalib(n_knots=1).fit(s, y)
    with pytest.raises(ParameterError, match="at least 2 samples of each class"):
        SplineCalib().fit(s, (np.arange(20) == 3).astype(int))
    with pytest.raises(ParameterError, match=r"probabilities in \[0, 1\]"):
        SplineCalib(compact_logit=True).fit(s * 3, y)
    with pytest.raises(ParameterError, match="reg"):
        VectorScaling(reg=-1).fit(np.column_stack([s, -s]), y)
    # the spline with fewer distinct scores than knots uses them all
    cal = SplineCalib(n_knots=200, random_state=0, compact_logit=False).fit(s, y)
    np.testing.assert_array_equal(cal.maps_[0].knots, s)
    assert clone(cal).get_params() == cal.get_params()


def test_docstring_examples():
    import doctest

    from structcal.calibrators import binning, isotonic, platt, scaling, spline

    for module in (binning, isotonic, platt, scaling, spline):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_auto_transform_choice_on_a_subsample_for_large_inputs():
    rng = np.random.default_rng(15)
    n = 30_000  # above the 20 000 selection sample
    z = rng.normal(size=n) * 2
    y = (rng.random(n) < expit(z)).astype(int)
    p = expit(6 * z)
    auto = SplineCalib(random_state=0).fit(p, y).maps_[0]
    forced = SplineCalib(random_state=0, compact_logit=True).fit(p, y).maps_[0]
    assert auto.epsilon is not None
    np.testing.assert_allclose(auto(p[:100]), forced(p[:100]), rtol=1e-10)


def test_saved_calibrators_load_and_predict_without_sklearn(tmp_path):
    """Every calibrator and the online recalibrator follow scikit-learn's estimator
    protocol without inheriting from it: a saved one loads and predicts in a fresh process
    that imports neither scikit-learn nor SciPy's statistics, with the same numbers."""
    import subprocess
    import sys

    from structcal import io
    from structcal.online import OnlineRecalibrator

    rng = np.random.default_rng(0)
    s = rng.random(400)
    y = (rng.random(400) < s**2).astype(int)
    logits = rng.normal(size=(400, 3))
    y3 = rng.integers(0, 3, 400)
    fitted = {
        "histogram": HistogramBinning().fit(s, y),
        "platt": PlattScaling().fit(s, y),
        "isotonic": IsotonicCalibration().fit(s, y),
        "spline": SplineCalib(random_state=0).fit(s, y),
        "temperature": TemperatureScaling().fit(logits, y3),
        "vector": VectorScaling().fit(logits, y3),
        "online": OnlineRecalibrator(random_state=0).fit(s[:, None], y),
    }
    want = {}
    for name, cal in fitted.items():
        io.save(cal, tmp_path / name)
        X = logits if name in ("temperature", "vector") else (s[:, None] if name == "online" else s)
        np.save(tmp_path / f"{name}_X.npy", X)
        want[name] = cal.predict_proba(X)
        np.save(tmp_path / f"{name}_want.npy", want[name])
    code = f"""
import sys
import numpy as np
from structcal import io
for name in {sorted(fitted)!r}:
    cal = io.load({str(tmp_path)!r} + "/" + name)
    got = cal.predict_proba(np.load({str(tmp_path)!r} + "/" + name + "_X.npy"))
    assert np.array_equal(got, np.load({str(tmp_path)!r} + "/" + name + "_want.npy")), name
print([m for m in ("sklearn", "scipy.stats") if m in sys.modules])
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout + res.stderr
    # the estimator protocol: classifier tags and accuracy, as ClassifierMixin gives them
    from sklearn.base import is_classifier

    cal = fitted["platt"]
    assert is_classifier(cal) and is_classifier(fitted["online"])
    assert cal.score(s, y) == pytest.approx(float(np.mean(cal.predict(s) == y)))
    # score checks its inputs: no broadcasting of a short y, no NaN or misaligned weights
    for bad in ((s, y[:1]), (s, y[:10]), (s, y[:, None]), (s, y, np.full(400, np.nan)),
                (s, y, np.ones(3)), (s, y, -np.ones(400))):
        with pytest.raises(ParameterError):
            cal.score(*bad)
    with pytest.raises(NotFittedError):
        PlattScaling().predict_proba(s)
