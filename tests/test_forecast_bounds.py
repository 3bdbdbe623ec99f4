"""Calibrated forecasts are never exactly 0 or 1: every region and step carries a prior,
and no forecast is more extreme than the recalibration data support."""

import warnings

import numpy as np
import pytest

from structcal import ChainPotentials, ParameterError, StructuredPrediction, StructuredRecalibrator
from structcal.calibrators import IsotonicCalibration
from structcal.events import LabelAt, MAPEvent, MarginalEvent
from structcal.forecasters import KNNRegionForecaster


def _readme_world():
    rng = np.random.default_rng(0)
    lengths = rng.integers(4, 10, size=600)
    truth = rng.integers(0, 5, size=lengths.sum())
    scores = rng.normal(size=(lengths.sum(), 5))
    scores[np.arange(truth.size), truth] += 1.5
    scores *= 3.0
    p = ChainPotentials.from_scores(scores, lengths=lengths, transitions=np.zeros((5, 5)))
    pred = StructuredPrediction(p)
    half = np.r_[0, np.cumsum(lengths)][300]
    return pred.subset(np.arange(300)), truth[:half], pred.subset(np.arange(300, 600)), truth[half:]


def test_readme_example_gives_no_certainties():
    fit_pred, y_fit, test_pred, y_test = _readme_world()
    kinds = [MAPEvent(), MarginalEvent(), LabelAt(0, 2)]
    feats = ["phi_mp1", "phi_mp3", "phi_mg1", "phi_mg2", "phi_mg3", "phi_mp7"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = StructuredRecalibrator(kinds=kinds, features=feats, prior=0.0).fit(fit_pred, y_fit)
        rec = StructuredRecalibrator(kinds=kinds, features=feats).fit(fit_pred, y_fit)
        p0 = plain.predict(test_pred, y_test)
        out = rec.predict(test_pred, y_test)
    # the paper's plain frequencies: exact zeros and ones, some of them wrong
    certain = (p0.forecast == 0) | (p0.forecast == 1)
    assert certain.any()
    assert ((p0.forecast == 0) & p0.table.outcome).any() or ((p0.forecast == 1) & ~p0.table.outcome).any()
    # the default: every forecast strictly inside (0, 1), within the support bounds of each kind
    f = out.forecast
    assert np.isfinite(f).all() and (f > 0).all() and (f < 1).all()
    for key, sel in rec.selection_.items():
        n = sel["n_events"]
        fk = out.for_kind(key)
        assert fk.min() >= 0.5 / (n + 1) - 1e-15 and fk.max() <= 1 - 0.5 / (n + 1) + 1e-15
    # finite log loss, and the Brier score is not made worse by the prior beyond noise
    y = out.table.outcome
    log_loss = -np.mean(np.where(y, np.log(f), np.log1p(-f)))
    assert np.isfinite(log_loss)
    assert np.mean((f - y) ** 2) <= np.mean((p0.forecast - y) ** 2) + 0.002


def test_isotonic_prior_shrinks_each_step_and_stays_monotone():
    rng = np.random.default_rng(0)
    s = rng.random(400)
    y = rng.random(400) < s**3
    plain = IsotonicCalibration().fit(s, y)
    prior = IsotonicCalibration(prior=0.5).fit(s, y)
    grid = np.linspace(0, 1, 1001)
    p0, p1 = plain.predict_proba(grid)[:, 1], prior.predict_proba(grid)[:, 1]
    assert p0.min() == 0.0 and p0.max() == 1.0
    assert (np.diff(p1) >= -1e-15).all()
    assert p1.min() > 0 and p1.max() < 1
    # each step of n events with s positives: (s + 1/2) / (n + 1) when no pooling is needed
    ys = prior.maps_[0].y
    # the lowest plain step holds every score up to where the plain map first rises
    first_rise = plain.maps_[0].x[np.flatnonzero(plain.maps_[0].y > 0)[0] - 1]
    in_step = s <= first_rise
    n, k = int(in_step.sum()), int(y[in_step].sum())
    assert k == 0
    assert ys[0] == pytest.approx(0.5 / (n + 1))
    # prior 0 is plain isotonic regression (scikit-learn's)
    from sklearn.isotonic import IsotonicRegression

    sk = IsotonicRegression(out_of_bounds="clip").fit(s, y)
    np.testing.assert_allclose(p0, sk.predict(grid), atol=1e-12)
    with pytest.raises(ParameterError, match="prior"):
        IsotonicCalibration(prior=-1).fit(s, y)


def test_knn_prior_is_a_pseudo_count_per_region():
    rng = np.random.default_rng(1)
    X = rng.random((300, 2))
    y = rng.random(300) < X[:, 0]
    a = KNNRegionForecaster(n_neighbors=20, random_state=0).fit(X, y)
    b = KNNRegionForecaster(n_neighbors=20, prior=0.5, random_state=0).fit(X, y)
    q = rng.random((50, 2))
    pa, pb = a.predict_proba(q)[:, 1], b.predict_proba(q)[:, 1]
    np.testing.assert_allclose(pb, (pa * 20 + 0.5) / 21, rtol=1e-12)
    # cross-validation scores the forecasts with the prior
    c = KNNRegionForecaster(k_grid=[5, 10, 20], prior=0.5, random_state=0).fit(X, y)
    assert c.n_neighbors_ in (5, 10, 20) and np.isfinite(c.cv_results_["l2"]).all()


def test_knn_asked_for_more_neighbours_than_events_says_so():
    X = np.random.default_rng(0).random((20, 1))
    y = np.arange(20) % 2
    with pytest.warns(UserWarning, match="n_neighbors=50 but only 20 events"):
        f = KNNRegionForecaster(n_neighbors=50).fit(X, y)
    assert f.n_neighbors_ == 20


def test_recalibrator_fit_needs_outcomes_and_says_when_nothing_can_be_held_out():
    fit_pred, y_fit, _, _ = _readme_world()
    with pytest.raises(ParameterError, match="`y_true` is required"):
        StructuredRecalibrator().fit(fit_pred, None)
    one = fit_pred.subset(np.array([0]))
    y_one = y_fit[: one.n_nodes]
    with pytest.warns(UserWarning, match="single group"):
        rec = StructuredRecalibrator(kinds=[MarginalEvent()], features=["raw"]).fit(one, y_one)
    assert rec.selection_["marginal"]["method"] == "raw"
