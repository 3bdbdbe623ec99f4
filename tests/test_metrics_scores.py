"""Brier and log-loss decompositions: identities, the issue-4 contract, bad input."""

import numpy as np
import pytest

from structcal.exceptions import ParameterError
from structcal.metrics import (
    BrierDecomposition,
    ReliabilityTable,
    SparseBinsWarning,
    brier_decomposition,
    log_loss_decomposition,
)


def binned_constant_forecasts(rng, n, n_bins):
    """Forecasts constant within each uniform bin (the bin's midpoint)."""
    b = rng.integers(0, n_bins, n)
    p = (b + 0.5) / n_bins
    y = (rng.random(n) < np.clip(p + 0.2 * (rng.random(n_bins)[b] - 0.5), 0, 1)).astype(int)
    return y, p


def test_contract_fields():
    """The structured-event evaluation relies on exactly these names."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    p = rng.random(200)
    res = brier_decomposition(y, p, n_bins=10, strategy="uniform", sample_weight=None)
    assert isinstance(res, BrierDecomposition)
    assert isinstance(res.table, ReliabilityTable)
    for name in ("brier", "reliability", "resolution", "uncertainty", "calibration_error",
                 "sharpness", "n_samples"):
        assert isinstance(getattr(res, name), (float, int))
    assert res.calibration_error == res.reliability
    assert res.sharpness == res.resolution
    assert res.n_samples == 200
    t = res.table
    assert t.bin_edges.shape == (11,) and t.counts.shape == (10,)
    assert t.mean_forecast.shape == (10,) and t.mean_outcome.shape == (10,)
    np.testing.assert_allclose(t.bin_edges, np.linspace(0, 1, 11))
    assert res.brier == pytest.approx(np.mean((p - y) ** 2), rel=1e-12)
    ybar = y.mean()
    assert res.uncertainty == pytest.approx(ybar * (1 - ybar), rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n_bins", [1, 4, 10, 25])
def test_identity_is_exact_for_forecasts_constant_within_bins(seed, n_bins):
    rng = np.random.default_rng(seed)
    y, p = binned_constant_forecasts(rng, 3000, n_bins)
    r = brier_decomposition(y, p, n_bins=n_bins)
    assert r.within_bin_variance == pytest.approx(0.0, abs=1e-15)
    assert r.within_bin_covariance == pytest.approx(0.0, abs=1e-15)
    assert r.brier == pytest.approx(r.reliability - r.resolution + r.uncertainty, abs=1e-14)
    # direct per-bin computation
    rel = res = 0.0
    for b in range(n_bins):
        m = np.floor(p * n_bins).astype(int) == b
        if m.any():
            rel += m.mean() * (p[m].mean() - y[m].mean()) ** 2
            res += m.mean() * (y[m].mean() - y.mean()) ** 2
    assert r.reliability == pytest.approx(rel, rel=1e-12, abs=1e-16)
    assert r.resolution == pytest.approx(res, rel=1e-12, abs=1e-16)
    ll = log_loss_decomposition(y, p, n_bins=n_bins)
    assert ll.within_bin == pytest.approx(0.0, abs=1e-13)
    assert ll.log_loss == pytest.approx(ll.reliability - ll.resolution + ll.uncertainty,
                                        abs=1e-13)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_generalised_identity_holds_for_any_forecasts(seed, strategy):
    rng = np.random.default_rng(seed)
    n = 1000
    p = rng.random(n) ** 2
    y = (rng.random(n) < np.sqrt(p)).astype(int)
    w = rng.random(n) if seed % 2 else None
    r = brier_decomposition(y, p, n_bins=7, strategy=strategy, sample_weight=w)
    rhs = (r.reliability - r.resolution + r.uncertainty + r.within_bin_variance
           - 2 * r.within_bin_covariance)
    assert r.brier == pytest.approx(rhs, abs=1e-14)
    assert r.brier == pytest.approx(np.average((p - y) ** 2, weights=w), rel=1e-12)
    assert r.refinement == pytest.approx(r.uncertainty - r.resolution)
    ll = log_loss_decomposition(y, p, n_bins=7, strategy=strategy, sample_weight=w)
    ref = -np.average(y * np.log(p) + (1 - y) * np.log1p(-p), weights=w)
    assert ll.log_loss == pytest.approx(ref, rel=1e-12)
    assert ll.log_loss == pytest.approx(ll.reliability - ll.resolution + ll.uncertainty
                                        + ll.within_bin, abs=1e-13)


def test_perfect_and_useless_forecasters():
    # forecasting the base rate everywhere: perfectly calibrated, no resolution
    y = np.array([1, 0, 0, 1, 0, 0, 0, 1, 0, 0])
    r = brier_decomposition(y, np.full(10, 0.3))
    assert r.reliability == pytest.approx(0.0, abs=1e-16)
    assert r.resolution == pytest.approx(0.0, abs=1e-16)
    assert r.brier == pytest.approx(0.21)
    # sure and right: zero Brier, resolution = uncertainty
    r = brier_decomposition(y, y.astype(float))
    assert r.brier == 0.0
    assert r.resolution == pytest.approx(r.uncertainty)
    ll = log_loss_decomposition(y, y.astype(float))
    assert ll.log_loss == 0.0 and np.isfinite(ll.reliability)
    # sure and wrong: infinite log loss, no NaN
    ll = log_loss_decomposition([1], [0.0], n_bins=1)
    assert ll.log_loss == np.inf and ll.reliability == np.inf
    assert ll.within_bin == 0.0


def test_log_loss_remainder_with_a_sure_and_wrong_bucket():
    # the bucket of forecasts 0 carries the infinite loss; the remainder comes from the
    # other buckets alone, as if the sure bucket were a perfect-sharpness constant one
    y = np.array([1, 0, 1, 0, 1, 1])
    p = np.array([0.0, 0.0, 0.51, 0.59, 0.55, 0.9])
    ll = log_loss_decomposition(y, p)
    assert ll.log_loss == np.inf and ll.reliability == np.inf
    rest = log_loss_decomposition(y[2:], p[2:])
    assert np.isfinite(rest.within_bin) and rest.within_bin > 0
    assert ll.within_bin == pytest.approx(rest.within_bin * 4 / 6, rel=1e-12)
    # a zero weight removes a sure-and-wrong forecast: finite loss, no NaN
    w = np.array([0.0, 1, 1, 1, 1, 1])
    ll = log_loss_decomposition(y, p, sample_weight=w)
    assert np.isfinite(ll.log_loss) and np.isfinite(ll.within_bin)


def test_empty_bins_are_nan_in_the_table_and_skipped():
    r = brier_decomposition([0, 1, 1], [0.05, 0.95, 0.96], n_bins=2)
    np.testing.assert_array_equal(r.table.counts, [1, 2])
    r = brier_decomposition([0, 1, 1, 1], [0.05, 0.95, 0.96, 0.97], n_bins=3)
    assert np.isnan(r.table.mean_forecast[1]) and np.isnan(r.table.mean_outcome[1])
    assert r.table.counts[1] == 0
    assert np.isfinite(r.reliability)


def test_order_invariance_and_weights_as_duplicates():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 400)
    p = np.round(rng.random(400), 2)
    perm = rng.permutation(400)
    a = brier_decomposition(y, p, strategy="quantile")
    b = brier_decomposition(y[perm], p[perm], strategy="quantile")
    assert a.reliability == pytest.approx(b.reliability, rel=1e-12)
    w = rng.integers(1, 4, 400)
    c = brier_decomposition(y, p, sample_weight=w)
    d = brier_decomposition(np.repeat(y, w), np.repeat(p, w))
    for f in ("brier", "reliability", "resolution", "uncertainty", "within_bin_variance"):
        assert getattr(c, f) == pytest.approx(getattr(d, f), rel=1e-12)


def test_accepts_bool_and_float_outcomes():
    p = np.array([0.2, 0.7, 0.9])
    a = brier_decomposition(np.array([False, True, True]), p)
    b = brier_decomposition(np.array([0.0, 1.0, 1.0]), p, n_bins=10)
    assert a.brier == b.brier


def test_bad_input():
    with pytest.raises(ParameterError, match="1-d forecasts"):
        brier_decomposition([0, 1], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ParameterError, match="binary outcomes"):
        brier_decomposition([0, 2], [0.5, 0.5])
    with pytest.raises(ParameterError, match=r"\[0, 1\]"):
        log_loss_decomposition([0, 1], [0.5, 1.5])
    with pytest.raises(ParameterError, match="empty"):
        brier_decomposition([], [])
    with pytest.raises(ParameterError, match="NaN"):
        brier_decomposition([0, 1], [np.nan, 0.5])
    with pytest.warns(SparseBinsWarning):
        brier_decomposition([0, 1], [0.5, 0.5], n_bins=10, strategy="quantile")
    # a fixed partition with empty buckets is normal: no warning
    brier_decomposition([0, 1], [0.5, 0.5], n_bins=10)
