"""The default ECE estimator on confident forecasts (issue 15 part 2): logit-scale kernel,
recentred bootstrap intervals."""

import numpy as np
import pytest
from scipy.special import expit, logit

from structcal.exceptions import ParameterError
from structcal.metrics import (
    binned_calibration_error,
    calibration_error,
    kde_calibration_error,
    local_calibration_error,
    reliability_curve,
)


def confident_pool(rng, mean=0.95, sd=1.5, size=200_000):
    """Logit-normal scores with the given mean (as in benchmarks/ece_estimator_study.py)."""
    z = rng.standard_normal(size)
    lo, hi = -10.0, 20.0
    for _ in range(80):
        mu = 0.5 * (lo + hi)
        lo, hi = (mu, hi) if expit(mu + sd * z).mean() < mean else (lo, mu)
    return expit(0.5 * (lo + hi) + sd * z)


def direct_logit_kde(y, p, grid, lo, width, h_u, residual=True):
    """Reference: exact reflected Gaussian kernel sums on u = (logit(p) - lo) / width."""
    u = (logit(p) - lo) / width
    D = np.zeros_like(grid)
    N = np.zeros_like(grid)
    target = y - p if residual else y
    for a in range(-3, 4):
        for img in (u + 2 * a, -u + 2 * a):
            k = np.exp(-0.5 * ((grid[:, None] - img[None, :]) / h_u) ** 2)
            D += k.sum(1)
            N += (k * target[None, :]).sum(1)
    if not residual:
        N = N - expit(lo + width * grid) * D
    trap = np.full(len(grid), grid[1] - grid[0])
    trap[[0, -1]] /= 2
    return np.abs(N) @ trap / (D @ trap), N / D


@pytest.mark.parametrize("smoothing", ["residual", "labels"])
@pytest.mark.parametrize("h", [0.1, 0.5, 2.0])
def test_logit_kde_equals_exact_kernel_sums(smoothing, h):
    rng = np.random.default_rng(0)
    G, lo, hi = 257, -3.0, 5.0
    grid = np.linspace(0, 1, G)
    idx = np.concatenate([[0, G - 1], rng.integers(0, G, 80)])
    p = expit(lo + (hi - lo) * grid[idx])  # logits on grid points: linear binning is exact
    y = (rng.random(p.shape[0]) < p**2).astype(float)
    r = kde_calibration_error(y, p, bandwidth=h, smoothing=smoothing, scale="logit",
                              grid_size=G)
    ece, lce = direct_logit_kde(y, p, grid, lo, hi - lo, h / (hi - lo),
                                residual=smoothing == "residual")
    assert r.ece == pytest.approx(ece, rel=1e-7)
    assert r.curve.bandwidth == pytest.approx(h)
    np.testing.assert_allclose(r.curve.grid, expit(lo + (hi - lo) * grid), rtol=1e-12)
    ok = np.isfinite(r.curve.lce)
    assert ok.sum() > 10
    np.testing.assert_allclose(r.curve.lce[ok], lce[ok], rtol=1e-6, atol=1e-9)
    # the density is per unit of score: it integrates to one over the grid's scores
    assert np.trapezoid(r.curve.density, r.curve.grid) == pytest.approx(1.0, abs=0.02)


def test_default_reads_low_on_calibrated_confident_forecasts():
    """The reported case: forecasts piled up near 1, outcomes drawn calibrated."""
    rng = np.random.default_rng(1)
    pool = confident_pool(rng)
    default, prob_kde, legacy = [], [], []
    for _ in range(8):
        p = pool[rng.integers(0, pool.shape[0], 10_000)]
        y = (rng.random(p.shape[0]) < p).astype(int)
        default.append(calibration_error(y, p).ece)
        prob_kde.append(kde_calibration_error(y, p).ece)
        legacy.append(binned_calibration_error(y, p).ece)
    # measured (benchmarks/ece_estimator_study.py): about 0.0046 vs 0.0085 vs 0.0047
    assert np.mean(default) < 0.006
    assert np.mean(default) < 0.7 * np.mean(prob_kde)
    assert np.mean(default) < 1.2 * np.mean(legacy)


@pytest.mark.parametrize("temperature", [1.5, 0.7])
def test_default_is_accurate_on_miscalibrated_confident_forecasts(temperature):
    rng = np.random.default_rng(2)
    pool = confident_pool(rng)
    eta = expit(logit(pool) / temperature)
    truth = np.abs(eta - pool).mean()
    errors = []
    for _ in range(8):
        i = rng.integers(0, pool.shape[0], 20_000)
        y = (rng.random(i.shape[0]) < eta[i]).astype(int)
        errors.append(calibration_error(y, pool[i]).ece - truth)
    assert abs(np.mean(errors)) < 0.1 * truth
    assert np.max(np.abs(errors)) < 0.25 * truth


def test_recentred_interval_always_contains_the_estimate():
    rng = np.random.default_rng(3)
    pool = confident_pool(rng, mean=0.97)
    p = pool[rng.integers(0, pool.shape[0], 5_000)]
    y = (rng.random(p.shape[0]) < p).astype(int)
    for r in (calibration_error(y, p), kde_calibration_error(y, p),
              binned_calibration_error(y, p)):
        ci = r.confidence_interval(n_resamples=100, random_state=0)
        pct = r.confidence_interval(n_resamples=100, random_state=0, method="percentile")
        assert ci.method == "recentred" and pct.method == "percentile"
        assert ci.low <= r.estimate <= ci.high
        # same bootstrap distribution, shifted so that its median is the estimate
        np.testing.assert_array_equal(ci.distribution, pct.distribution)
        shift = r.estimate - np.median(ci.distribution)
        assert ci.high == pytest.approx(pct.high + shift, abs=1e-12)
        assert ci.low == pytest.approx(max(pct.low + shift, 0.0), abs=1e-12)
    # the probability-scale kernel's percentile interval lies wholly above its estimate
    # here: the failure the recentred interval fixes
    pct = kde_calibration_error(y, p).confidence_interval(n_resamples=100, random_state=0,
                                                          method="percentile")
    assert pct.low > pct.estimate
    with pytest.raises(ParameterError, match="method"):
        calibration_error(y, p).confidence_interval(method="basic")


def test_logit_scale_edge_cases():
    y = np.array([1, 0, 1, 1, 0, 1])
    # exact 0 and 1 forecasts are finite on the clipped logit scale
    r = calibration_error(y, np.array([1.0, 0.0, 1.0, 0.9, 0.2, 0.999]))
    assert np.isfinite(r.ece) and np.isfinite(r.mce)
    # one distinct forecast: the error is |mean outcome - forecast|
    r = calibration_error(y, np.full(6, 0.7))
    assert r.ece == pytest.approx(abs(y.mean() - 0.7), rel=1e-8)
    # weights of zero do not stretch the range of the logits
    w = np.array([1, 1, 1, 1, 1, 0.0])
    a = kde_calibration_error(y, np.array([0.6, 0.7, 0.8, 0.7, 0.6, 1e-12]),
                              scale="logit", sample_weight=w)
    b = kde_calibration_error(y[:5], np.array([0.6, 0.7, 0.8, 0.7, 0.6]), scale="logit")
    assert a.ece == pytest.approx(b.ece, rel=1e-9)
    # a float bandwidth is in logit units and must span two grid steps of the range
    with pytest.raises(ParameterError, match="bandwidth"):
        kde_calibration_error(y, np.array([1e-9, 0.5, 0.6, 0.7, 0.8, 1 - 1e-9]),
                              scale="logit", bandwidth=1e-3)
    with pytest.raises(ParameterError, match="scale"):
        kde_calibration_error(y, np.full(6, 0.7), scale="log")


def test_local_curve_and_reliability_curve_on_the_logit_scale():
    rng = np.random.default_rng(4)
    pool = confident_pool(rng)
    p = pool[rng.integers(0, pool.shape[0], 20_000)]
    eta = expit(logit(p) / 1.5)
    y = (rng.random(p.shape[0]) < eta).astype(int)
    lc = local_calibration_error(y, p, scale="logit")
    # (away from the ends of the forecasts' range, where the reflection biases the curve)
    ok = np.isfinite(lc.lce) & (lc.support > 1000) & (lc.grid > 0.6) & (lc.grid < 0.9999)
    assert ok.sum() > 500
    true_lce = expit(logit(lc.grid[ok]) / 1.5) - lc.grid[ok]
    assert np.max(np.abs(lc.lce[ok] - true_lce)) < 0.03  # noise of ~1000 local samples
    # interpolation: the curve's values at its grid, NaN outside the forecasts' range
    j = np.flatnonzero(ok)[:5]
    np.testing.assert_allclose(lc.at(lc.grid[j]), lc.lce[j], rtol=1e-12)
    assert np.isnan(lc.at([0.0, 1.0])).all()
    rc = reliability_curve(y, p, scale="logit", n_resamples=50, random_state=0)
    inner = np.isfinite(rc.low) & np.isfinite(rc.high)
    assert inner.sum() > 100
    assert np.all(rc.low[inner] <= rc.high[inner])
    assert rc.grid[0] == lc.grid[0] and rc.grid[-1] == lc.grid[-1]  # the same logit range


def test_default_bandwidth_undersmooths_beyond_ten_thousand():
    # up to 10^4 forecasts the default is Silverman's rule on the logits; beyond, the
    # bandwidth shrinks as n**(-1/3) instead of n**(-1/5), continuously at 10^4
    rng = np.random.default_rng(4)
    for n, factor in ((5_000, 1.0), (10_000, 1.0), (80_000, 8.0 ** (0.2 - 1.0 / 3.0))):
        p = confident_pool(rng, size=n)
        y = rng.random(n) < p
        default = calibration_error(y, p)
        silverman = kde_calibration_error(y, p, scale="logit")
        assert default.curves[0].bandwidth == pytest.approx(
            factor * silverman.curves[0].bandwidth, rel=1e-12)
        assert "bandwidth='undersmoothed'" in default.method
    with pytest.raises(ParameterError, match="`bandwidth`"):
        kde_calibration_error([0, 1], [0.2, 0.7], bandwidth="oversmoothed")


def test_undersmoothing_removes_smoothing_bias_at_large_n():
    # a known miscalibration that changes with the score (temperature 0.5 on the logit):
    # Silverman's bandwidth flattens it and reads low by more than the sampling noise at
    # 10^5 forecasts; the n**(-1/3) bandwidth takes most of that bias away
    q = lambda p: expit(2.0 * logit(p))
    bias = {"silverman": [], "undersmoothed": []}
    for seed in range(6):
        rng = np.random.default_rng(seed)
        p = rng.random(100_000)
        y = rng.random(p.shape[0]) < q(p)
        truth = np.mean(np.abs(q(p) - p))
        for rule in bias:
            bias[rule].append(kde_calibration_error(y, p, scale="logit", bandwidth=rule).ece - truth)
    b_s, b_u = np.array(bias["silverman"]), np.array(bias["undersmoothed"])
    assert b_s.mean() < -0.0008  # about -0.0013: several sampling SEs (~0.0003) low
    # paired: the same sets, so the difference is the smoothing bias removed (~0.00065)
    assert np.all(b_u - b_s > 0.0004) and abs(b_u.mean()) < 0.6 * abs(b_s.mean())
