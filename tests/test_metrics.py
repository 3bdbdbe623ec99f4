"""ECE/MCE estimators against direct computations, closed-form truths and bad input."""

import numpy as np
import pytest

from structcal.exceptions import ParameterError, ParameterTypeError
from structcal.metrics import (
    SparseBinsWarning,
    _kernels,
    binned_calibration_error,
    calibration_error,
    debiased_calibration_error,
    kde_calibration_error,
    local_calibration_error,
    reliability_curve,
    silverman_bandwidth,
)

# ---------------------------------------------------------------------------------------
# a synthetic forecaster with a closed-form calibration error:
# p ~ U(0, 1), P(y = 1 | p) = 3p^2 - 2p^3 (crosses the diagonal at 1/2), so
# ECE = int |p(1-p)(1-2p)| dp = 1/16, MCE = sqrt(3)/18, L2 = sqrt(1/210)
TRUE_ECE = 1.0 / 16.0
TRUE_MCE = np.sqrt(3.0) / 18.0
TRUE_L2 = np.sqrt(1.0 / 210.0)


def smoothstep_data(rng, n):
    p = rng.random(n)
    y = (rng.random(n) < 3 * p**2 - 2 * p**3).astype(int)
    return y, p


def calibrated_data(rng, n):
    p = rng.random(n)
    return (rng.random(n) < p).astype(int), p


def direct_binned(y, p, edges, w=None):
    """Reference: explicit masks per bin (hard mapping)."""
    w = np.ones_like(p) if w is None else w
    B = len(edges) - 1
    total = w.sum()
    ece, mce, l2 = 0.0, 0.0, 0.0
    counts = np.zeros(B)
    for b in range(B):
        hi_ok = p <= edges[b + 1] if b == B - 1 else p < edges[b + 1]
        mask = (p >= edges[b]) & hi_ok
        nb = w[mask].sum()
        counts[b] = nb
        if nb == 0:
            continue
        gap = abs(np.average(y[mask], weights=w[mask]) - np.average(p[mask], weights=w[mask]))
        ece += nb / total * gap
        l2 += nb / total * gap**2
        mce = max(mce, gap)
    return ece, mce, np.sqrt(l2), counts


def direct_quantile_edges(p, w, B):
    """Reference for the equal-mass edges (definition in sorted_quantile_edges)."""
    total = w.sum()
    vals = np.unique(p[w > 0])
    cum = np.array([w[p <= v].sum() for v in vals])
    edges = [0.0]
    for k in range(1, B):
        T = k * total / B
        v = vals[np.argmax(cum > T + 1e-12 * total)]
        below = vals[vals < v]
        edges.append(0.5 * (below[-1] + v) if below.size else v)
    return np.array(edges + [1.0])


def direct_convex(y, p, B):
    """Reference for uniform convex mapping: explicit weights to bin centres."""
    centres = (np.arange(B) + 0.5) / B
    A = np.zeros((len(p), B))
    for i, s in enumerate(p):
        if s <= centres[0]:
            A[i, 0] = 1
        elif s >= centres[-1]:
            A[i, -1] = 1
        else:
            j = np.searchsorted(centres, s, side="right") - 1
            f = (s - centres[j]) / (centres[j + 1] - centres[j])
            A[i, j], A[i, j + 1] = 1 - f, f
    W = A.sum(0)
    ok = W > 0
    gap = np.abs(A.T @ y / np.where(ok, W, 1) - A.T @ p / np.where(ok, W, 1))[ok]
    return float(np.sum(W[ok] / len(p) * gap)), float(gap.max())


# ---------------------------------------------------------------------------------------
# binned estimators


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n,B", [(50, 5), (1000, 15), (333, 10), (7, 3)])
def test_uniform_ece_equals_direct_computation(seed, n, B):
    rng = np.random.default_rng(seed)
    y, p = smoothstep_data(rng, n)
    w = rng.random(n) + 0.1
    for weights in (None, w):
        r = binned_calibration_error(y, p, n_bins=B, sample_weight=weights)
        ece, mce, l2, counts = direct_binned(y.astype(float), p, np.linspace(0, 1, B + 1),
                                              weights)
        assert r.ece == pytest.approx(ece, rel=1e-12, abs=1e-15)
        assert r.mce == pytest.approx(mce, rel=1e-12, abs=1e-15)
        np.testing.assert_allclose(r.table.counts, counts)
        r2 = binned_calibration_error(y, p, n_bins=B, norm="l2", sample_weight=weights)
        assert r2.estimate == pytest.approx(l2, rel=1e-12, abs=1e-15)


def test_uniform_bins_put_edges_in_the_upper_bin():
    # exactly representable edges: 0.25 belongs to bin 1, 1.0 to the last bin
    r = binned_calibration_error([1, 0, 1, 0], [0.0, 0.25, 0.5, 1.0], n_bins=4)
    np.testing.assert_array_equal(r.table.counts, [1, 1, 1, 1])
    np.testing.assert_array_equal(r.table.mean_forecast, [0.0, 0.25, 0.5, 1.0])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n,B", [(40, 4), (1000, 15), (101, 10), (12, 12)])
def test_quantile_edges_match_definition(seed, n, B):
    rng = np.random.default_rng(seed)
    # ties and repeated values included
    p = np.round(rng.random(n), 2 if seed % 2 else 6)
    y = (rng.random(n) < p).astype(float)
    w = rng.integers(0, 3, n).astype(float) if seed >= 3 else np.ones(n)
    w[0] = 1.0
    order = np.argsort(p)
    edges = _kernels.sorted_quantile_edges(p[order], w[order], True, B)
    np.testing.assert_allclose(edges, direct_quantile_edges(p, w, B), rtol=0, atol=0)
    r = binned_calibration_error(y, p, n_bins=B, strategy="quantile", sample_weight=w)
    np.testing.assert_array_equal(r.table.bin_edges, edges)
    ece, mce, _, counts = direct_binned(y, p, edges, w)
    assert r.ece == pytest.approx(ece, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(r.table.counts, counts)


def test_quantile_bins_hold_equal_counts_without_ties():
    rng = np.random.default_rng(3)
    y, p = smoothstep_data(rng, 150)
    r = binned_calibration_error(y, p, n_bins=15, strategy="quantile")
    np.testing.assert_array_equal(r.table.counts, np.full(15, 10.0))
    r = binned_calibration_error(y, p, n_bins=4, strategy="quantile")
    np.testing.assert_array_equal(r.table.counts, [37, 38, 37, 38])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("B", [1, 2, 5, 15])
def test_convex_mapping_equals_direct_computation(seed, B):
    rng = np.random.default_rng(seed)
    y, p = smoothstep_data(rng, 300)
    r = binned_calibration_error(y, p, n_bins=B, mapping="convex")
    ece, mce = direct_convex(y.astype(float), p, B)
    assert r.ece == pytest.approx(ece, rel=1e-12)
    assert r.mce == pytest.approx(mce, rel=1e-12)
    # the general (edges) path agrees with the uniform fast path
    stats_u = _kernels.bin_stats(p, y.astype(float), np.zeros(1), False,
                                 np.linspace(0, 1, B + 1), True, True)
    stats_e = _kernels.bin_stats(p, y.astype(float), np.zeros(1), False,
                                 np.linspace(0, 1, B + 1), False, True)
    np.testing.assert_allclose(stats_u, stats_e, rtol=1e-12, atol=1e-12)
    # total weight is preserved and each bin's mean forecast is a convex combination
    assert r.table.counts.sum() == pytest.approx(300)


def test_edges_search_matches_searchsorted():
    rng = np.random.default_rng(0)
    for B in (1, 2, 3, 17, 200):
        edges = np.concatenate([[0], np.sort(rng.random(B - 1)), [1]])
        edges[B // 2] = edges[B // 2 - 1]  # a repeated edge (an empty bin)
        p = np.concatenate([rng.random(500), edges, [0.0, 1.0]])
        stats = _kernels.bin_stats(p, np.zeros_like(p), np.zeros(1), False, edges, False,
                                   False)
        ref = np.bincount(np.searchsorted(edges[1:-1], p, side="right"), minlength=B)
        np.testing.assert_array_equal(stats[0], ref)


def test_sqrt_heuristic():
    rng = np.random.default_rng(1)
    y, p = smoothstep_data(rng, 400)
    r = binned_calibration_error(y, p, n_bins="sqrt")
    assert r.table.n_bins == 20
    assert r.method.startswith("binned(n_bins=20")


# ---------------------------------------------------------------------------------------
# kernel estimator


def direct_kde(y, p, grid, h, residual=True):
    """Reference: exact reflected Gaussian kernel sums (images s + 2a, -s + 2a)."""
    D = np.zeros_like(grid)
    N = np.zeros_like(grid)
    t = y - p if residual else y
    for a in range(-3, 4):
        for img in (p + 2 * a, -p + 2 * a):
            k = np.exp(-0.5 * ((grid[:, None] - img[None, :]) / h) ** 2) / (h * np.sqrt(2 * np.pi))
            D += k.sum(1)
            N += (k * t[None, :]).sum(1)
    if not residual:
        N = N - grid * D
    step = grid[1] - grid[0]
    trap = np.full(len(grid), step)
    trap[[0, -1]] /= 2
    return np.abs(N) @ trap / (D @ trap), N / D, D / len(p)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("smoothing", ["residual", "labels"])
@pytest.mark.parametrize("h", [0.01, 0.05, 0.3])
def test_kde_equals_exact_kernel_sums_on_grid_points(seed, smoothing, h):
    rng = np.random.default_rng(seed)
    G = 257
    grid = np.linspace(0, 1, G)
    p = grid[rng.integers(0, G, 60)]  # on grid points: linear binning is exact
    p[:2] = [0.0, 1.0]
    y = (rng.random(60) < p**2).astype(float)
    r = kde_calibration_error(y, p, bandwidth=h, smoothing=smoothing, grid_size=G)
    ece, lce, dens = direct_kde(y, p, grid, h, residual=smoothing == "residual")
    assert r.ece == pytest.approx(ece, rel=1e-9)
    np.testing.assert_allclose(r.curve.density, dens, rtol=1e-9, atol=1e-12)
    ok = np.isfinite(r.curve.lce)
    assert ok.sum() > 10
    np.testing.assert_allclose(r.curve.lce[ok], lce[ok], rtol=1e-7, atol=1e-9)


def test_kde_linear_binning_error_is_small_off_grid():
    rng = np.random.default_rng(0)
    y, p = smoothstep_data(rng, 300)
    grid = np.linspace(0, 1, 1025)
    r = kde_calibration_error(y, p, bandwidth=0.05, grid_size=1025)
    ece, _, _ = direct_kde(y.astype(float), p, grid, 0.05)
    assert r.ece == pytest.approx(ece, rel=1e-4)


def test_density_integrates_to_one_and_bandwidth_is_silverman():
    rng = np.random.default_rng(2)
    y, p = smoothstep_data(rng, 5000)
    r = kde_calibration_error(y, p)
    c = r.curve
    assert np.trapezoid(c.density, c.grid) == pytest.approx(1.0, abs=1e-6)
    # bandwidth from grid quantiles agrees with the exact rule to within a grid step
    assert c.bandwidth == pytest.approx(silverman_bandwidth(p), abs=2e-4)
    sd, (q1, q3) = p.std(), np.quantile(p, [0.25, 0.75])
    assert silverman_bandwidth(p) == pytest.approx(
        0.9 * min(sd, (q3 - q1) / 1.34) * 5000 ** -0.2, rel=2e-3
    )


def test_silverman_degenerate_scores():
    assert silverman_bandwidth(np.full(10, 0.3)) == pytest.approx(0.0, abs=1e-12)
    # constant forecasts: the floor of two grid steps; the ECE is |mean(y) - p| exactly
    y = np.array([1, 0, 0, 1, 1, 1, 0, 1])
    r = kde_calibration_error(y, np.full(8, 0.3))
    assert r.ece == pytest.approx(abs(y.mean() - 0.3), rel=1e-9)
    assert r.curve.bandwidth == pytest.approx(2 / 4096)
    # IQR of zero falls back to the standard deviation
    p = np.array([0.2] * 8 + [0.9, 0.1])
    assert silverman_bandwidth(p) == pytest.approx(0.9 * p.std() * 10 ** -0.2)


# ---------------------------------------------------------------------------------------
# closed-form truth: every estimator converges to it


ESTIMATORS = {
    "legacy-15": lambda y, p: binned_calibration_error(y, p),
    "quantile-15": lambda y, p: binned_calibration_error(y, p, strategy="quantile"),
    "convex-15": lambda y, p: binned_calibration_error(y, p, mapping="convex"),
    "quantile-convex-15": lambda y, p: binned_calibration_error(y, p, strategy="quantile",
                                                               mapping="convex"),
    "uniform-sqrt": lambda y, p: binned_calibration_error(y, p, n_bins="sqrt"),
    "quantile-sqrt": lambda y, p: binned_calibration_error(y, p, n_bins="sqrt",
                                                          strategy="quantile"),
    "kde-residual": lambda y, p: kde_calibration_error(y, p),
    "kde-labels": lambda y, p: kde_calibration_error(y, p, smoothing="labels"),
    "default": lambda y, p: calibration_error(y, p),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimators_converge_to_closed_form_ece(name):
    est = ESTIMATORS[name]
    errors = []
    for n in (2_000, 200_000):
        rng = np.random.default_rng(n)
        y, p = smoothstep_data(rng, n)
        errors.append(abs(est(y, p).ece - TRUE_ECE))
    # sampling sd of the estimate at n=2e5 is ~7e-4; the binning/smoothing bias is below
    assert errors[1] < 3e-3
    assert errors[1] < errors[0] or errors[0] < 3e-3


def test_mce_and_l2_converge_to_closed_form():
    rng = np.random.default_rng(7)
    y, p = smoothstep_data(rng, 400_000)
    assert binned_calibration_error(y, p, n_bins=15).mce == pytest.approx(TRUE_MCE, abs=0.01)
    assert kde_calibration_error(y, p).mce == pytest.approx(TRUE_MCE, abs=0.01)
    # plug-in L2 with few bins is close; the debiased one too (noise subtracted)
    assert binned_calibration_error(y, p, norm="l2").estimate == pytest.approx(TRUE_L2,
                                                                               abs=2e-3)
    assert debiased_calibration_error(y, p).estimate == pytest.approx(TRUE_L2, abs=2e-3)


def test_multiclass_closed_forms():
    # p = (s, (1-s)/2, (1-s)/2) with s ~ U(1/2, 1) and P(y=0 | s) = s^2, else 1 or 2:
    # confidence ECE = 2 int_{1/2}^1 (s - s^2) ds = 1/6; class-wise = (1/6 + 1/12 + 1/12)/3
    rng = np.random.default_rng(11)
    n = 300_000
    s = 0.5 + 0.5 * rng.random(n)
    P = np.stack([s, (1 - s) / 2, (1 - s) / 2], axis=1)
    first = rng.random(n) < s**2
    y = np.where(first, 0, 1 + (rng.random(n) < 0.5)).astype(int)
    for est in (binned_calibration_error, kde_calibration_error):
        assert est(y, P).ece == pytest.approx(1 / 6, abs=3e-3)
        cw = est(y, P, setting="class-wise")
        assert cw.ece == pytest.approx(1 / 9, abs=3e-3)
        np.testing.assert_allclose(cw.per_column, [1 / 6, 1 / 12, 1 / 12], atol=3e-3)
        assert est(y, P, setting="class-specific", label=1).ece == pytest.approx(1 / 12,
                                                                                 abs=3e-3)


def test_binary_settings_agree():
    rng = np.random.default_rng(5)
    y, p = smoothstep_data(rng, 2000)
    P = np.stack([1 - p, p], axis=1)
    b = binned_calibration_error(y, p).ece
    assert binned_calibration_error(y, P, setting="class-specific", label=1).ece == \
        pytest.approx(b, rel=1e-12)
    assert binned_calibration_error(y, p, setting="class-specific", label=1).ece == \
        pytest.approx(b, rel=1e-12)
    cw = binned_calibration_error(y, p, setting="class-wise", mapping="convex", n_bins=10)
    # class 0 sees scores 1 - p: the same errors (mirror-image bins)
    np.testing.assert_allclose(cw.per_column[0], cw.per_column[1], rtol=1e-9)


# ---------------------------------------------------------------------------------------
# the known trap: calibrated data read about 0.011 with 15 bins at n = 10^4


def test_legacy_bias_on_calibrated_data_and_its_interval():
    rng = np.random.default_rng(0)
    y, p = calibrated_data(rng, 10_000)
    legacy = binned_calibration_error(y, p)
    assert 0.007 < legacy.ece < 0.016
    ci = legacy.confidence_interval(random_state=0)
    # the interval describes sampling noise; the whole of it sits above the truth (0),
    # and the bootstrap shows the upward bias of the plug-in estimate
    assert ci.low > 0.004
    assert ci.bias > 0.0005
    # the debiased L2 estimate is near 0 (its squared version fluctuates around 0)
    assert debiased_calibration_error(y, p).estimate < 0.01


# ---------------------------------------------------------------------------------------
# invariances


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_sample_order_invariance(name):
    rng = np.random.default_rng(3)
    y, p = smoothstep_data(rng, 3000)
    p[:300] = np.round(p[:300], 1)  # ties
    perm = rng.permutation(3000)
    a = ESTIMATORS[name](y, p)
    b = ESTIMATORS[name](y[perm], p[perm])
    assert a.ece == pytest.approx(b.ece, rel=1e-10, abs=1e-14)
    assert a.mce == pytest.approx(b.mce, rel=1e-10, abs=1e-14)


def test_unit_weights_and_integer_weights_mean_duplication():
    rng = np.random.default_rng(4)
    y, p = smoothstep_data(rng, 500)
    w = rng.integers(1, 4, 500)
    dup_y, dup_p = np.repeat(y, w), np.repeat(p, w)
    for kw in ({}, {"strategy": "quantile"}, {"mapping": "convex"}):
        assert binned_calibration_error(y, p, sample_weight=np.ones(500), **kw).ece == \
            pytest.approx(binned_calibration_error(y, p, **kw).ece, rel=1e-12)
        assert binned_calibration_error(y, p, sample_weight=w, **kw).ece == \
            pytest.approx(binned_calibration_error(dup_y, dup_p, **kw).ece, rel=1e-12)
    assert debiased_calibration_error(y, p, sample_weight=w).estimate == pytest.approx(
        debiased_calibration_error(dup_y, dup_p).estimate, rel=1e-10)
    # the kernel estimate uses n (rows) in the bandwidth: compare at a fixed bandwidth
    assert kde_calibration_error(y, p, sample_weight=w, bandwidth=0.05).ece == \
        pytest.approx(kde_calibration_error(dup_y, dup_p, bandwidth=0.05).ece, rel=1e-10)


def test_extreme_forecasts_are_finite():
    y = np.array([0, 1, 1, 0, 1])
    p = np.array([0.0, 1.0, 1.0, 0.0, 1e-300])
    for name, est in ESTIMATORS.items():
        with np.errstate(divide="raise", invalid="raise", over="raise"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SparseBinsWarning)
                r = est(y, p)
        assert np.isfinite(r.ece) and np.isfinite(r.mce), name


# ---------------------------------------------------------------------------------------
# local calibration error and reliability curve


def test_local_calibration_recovers_the_calibration_map():
    rng = np.random.default_rng(8)
    y, p = smoothstep_data(rng, 200_000)
    lc = local_calibration_error(y, p)
    true = 3 * lc.grid**2 - 2 * lc.grid**3 - lc.grid
    inner = (lc.grid > 0.05) & (lc.grid < 0.95)
    assert np.nanmax(np.abs(lc.lce[inner] - true[inner])) < 0.02
    np.testing.assert_allclose(lc.at([0.25, 0.5]), np.interp([0.25, 0.5], lc.grid, lc.lce))
    assert lc.curve == pytest.approx(lc.grid + lc.lce, nan_ok=True)


def test_lce_is_nan_without_support():
    p = np.concatenate([np.full(50, 0.1), np.full(50, 0.2)])
    y = (np.arange(100) % 3 == 0).astype(int)
    lc = local_calibration_error(y, p, bandwidth=0.01)
    assert np.isnan(lc.at(0.9))
    assert np.isfinite(lc.at(0.1))


def test_reliability_curve_bands():
    rng = np.random.default_rng(9)
    y, p = smoothstep_data(rng, 5000)
    rc = reliability_curve(y, p, n_resamples=100, random_state=0, grid_size=257)
    inner = (rc.grid > 0.1) & (rc.grid < 0.9)
    assert np.all(rc.low[inner] <= rc.median[inner])
    assert np.all(rc.median[inner] <= rc.high[inner])
    true = 3 * rc.grid**2 - 2 * rc.grid**3
    covered = (rc.low[inner] <= true[inner] + 0.02) & (true[inner] - 0.02 <= rc.high[inner])
    assert covered.mean() > 0.9
    again = reliability_curve(y, p, n_resamples=100, random_state=0, grid_size=257)
    np.testing.assert_array_equal(rc.low, again.low)


# ---------------------------------------------------------------------------------------
# bootstrap intervals


@pytest.mark.parametrize("kind", ["uniform", "quantile", "convex", "kde", "debiased"])
def test_confidence_interval_covers_truth_and_is_reproducible(kind):
    rng = np.random.default_rng(12)
    y, p = smoothstep_data(rng, 20_000)
    make = {
        "uniform": lambda: binned_calibration_error(y, p),
        "quantile": lambda: binned_calibration_error(y, p, strategy="quantile"),
        "convex": lambda: binned_calibration_error(y, p, mapping="convex"),
        "kde": lambda: kde_calibration_error(y, p),
        "debiased": lambda: debiased_calibration_error(y, p),
    }[kind]
    r = make()
    ci = r.confidence_interval(level=0.95, n_resamples=200, random_state=1)
    truth = TRUE_L2 if kind == "debiased" else TRUE_ECE
    assert ci.low < truth < ci.high
    assert ci.low <= r.estimate <= ci.high
    assert 0.001 < ci.standard_error < 0.01
    assert ci.distribution.shape == (200,)
    again = r.confidence_interval(level=0.95, n_resamples=200, random_state=1)
    assert (ci.low, ci.high) == (again.low, again.high)
    other = r.confidence_interval(level=0.95, n_resamples=200, random_state=2)
    assert (ci.low, ci.high) != (other.low, other.high)
    narrow = r.confidence_interval(level=0.5, n_resamples=200, random_state=1)
    assert ci.low <= narrow.low <= narrow.high <= ci.high
    mci = r.confidence_interval(n_resamples=50, random_state=1, statistic="max_error")
    assert mci.low <= r.max_error <= mci.high or mci.estimate == r.max_error


def test_bootstrap_matches_explicit_resampling_in_distribution():
    """The kernel's resamples behave like numpy resamples (same mean and spread)."""
    rng = np.random.default_rng(13)
    y, p = smoothstep_data(rng, 2000)
    r = binned_calibration_error(y, p, n_bins=10)
    ci = r.confidence_interval(n_resamples=2000, random_state=0)
    ref = []
    for _ in range(2000):
        i = rng.integers(0, 2000, 2000)
        ref.append(binned_calibration_error(y[i], p[i], n_bins=10).ece)
    ref = np.array(ref)
    assert ci.bootstrap_mean == pytest.approx(ref.mean(), abs=3 * ref.std() / np.sqrt(1000))
    assert ci.standard_error == pytest.approx(ref.std(), rel=0.1)


def test_bootstrap_counts_are_multinomial():
    n = 50_000  # several blocks
    counts = np.empty(n)
    _kernels.draw_weights(np.uint32(123), np.zeros(1), False, counts)
    assert counts.sum() == n
    assert np.mean(counts == 0) == pytest.approx(np.exp(-1), abs=0.01)
    assert np.mean(counts == 2) == pytest.approx(np.exp(-1) / 2, abs=0.01)
    # every block receives its share of draws
    blocks = counts[: 6 * 8192].reshape(6, 8192).sum(1)
    assert np.all(np.abs(blocks - 8192) < 5 * np.sqrt(8192))
    w = np.linspace(0, 2, n)
    weighted = np.empty(n)
    _kernels.draw_weights(np.uint32(123), w, True, weighted)
    np.testing.assert_allclose(weighted, counts * w)
    again = np.empty(n)
    _kernels.draw_weights(np.uint32(123), np.zeros(1), False, again)
    np.testing.assert_array_equal(again, counts)


def test_classwise_bootstrap_resamples_rows_jointly():
    rng = np.random.default_rng(14)
    P = rng.dirichlet(np.ones(3), 3000)
    y = np.array([rng.choice(3, p=row) for row in P])
    r = binned_calibration_error(y, P, setting="class-wise", n_bins=10)
    ci = r.confidence_interval(n_resamples=100, random_state=0)
    assert np.all(np.isfinite(ci.distribution))
    # calibrated data: resamples read higher than the sample (the plug-in bias)
    assert ci.bias > 0
    cols = [binned_calibration_error((y == k).astype(int), P[:, k], n_bins=10).ece
            for k in range(3)]
    assert r.ece == pytest.approx(np.mean(cols), rel=1e-12)


# ---------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "y,p,match",
    [
        ([0, 1], [0.5, 1.2], r"probabilities in \[0, 1\]"),
        ([0, 1], [-0.1, 0.5], r"probabilities in \[0, 1\]"),
        ([0, 1], [0.5, np.nan], "NaN"),
        ([0, 1], [0.5, np.inf], r"\+inf"),
        ([0, 2], [0.5, 0.5], "binary outcomes 0/1"),
        ([0, 0.5], [0.5, 0.5], "binary outcomes 0/1"),
        ([0, 1, 1], [0.5, 0.5], "one outcome per forecast"),
        ([], [], "must not be empty"),
        ([0, 1], [[0.5, 0.4], [0.5, 0.5]], "sum to 1"),
        ([0, 2], [[0.5, 0.5], [0.5, 0.5]], r"labels in 0\.\.1"),
        ([0, -1], [[0.5, 0.5], [0.5, 0.5]], r"labels in 0\.\.1"),
        ([0], [[1.0]], "at least 2 class columns"),
        ([0], np.ones((1, 1, 1)), "1-d .* or 2-d"),
    ],
)
def test_bad_input_raises_clear_errors(y, p, match):
    for est in (binned_calibration_error, kde_calibration_error, debiased_calibration_error):
        with pytest.raises(ParameterError, match=match):
            est(y, p)


def test_bad_types_and_options():
    with pytest.raises(ParameterTypeError, match="integer class labels"):
        binned_calibration_error([0.0, 1.0], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ParameterTypeError, match="binary outcomes"):
        binned_calibration_error(["a", "b"], [0.5, 0.5])
    with pytest.raises(ParameterError, match="strategy"):
        binned_calibration_error([0, 1], [0.5, 0.5], strategy="kmeans")
    with pytest.raises(ParameterError, match="n_bins"):
        binned_calibration_error([0, 1], [0.5, 0.5], n_bins=0)
    with pytest.raises(ParameterError, match="n_bins"):
        binned_calibration_error([0, 1], [0.5, 0.5], n_bins="log")
    with pytest.raises(ParameterError, match="needs `label`"):
        binned_calibration_error([0, 1], [[0.5, 0.5], [0.5, 0.5]], setting="class-specific")
    with pytest.raises(ParameterError, match="only used with"):
        binned_calibration_error([0, 1], [0.5, 0.5], label=1)
    with pytest.raises(ParameterError, match="label"):
        binned_calibration_error([0, 1], [[0.5, 0.5], [0.5, 0.5]], setting="class-specific",
                                 label=2)
    with pytest.raises(ParameterError, match="1-d forecasts of the positive class"):
        binned_calibration_error([0, 1], [[0.5, 0.5], [0.5, 0.5]], setting="binary")
    with pytest.raises(ParameterError, match="bandwidth"):
        kde_calibration_error([0, 1], [0.5, 0.5], bandwidth=1e-6)
    with pytest.raises(ParameterError, match="bandwidth"):
        kde_calibration_error([0, 1], [0.5, 0.5], bandwidth="scott")
    with pytest.raises(ParameterError, match="sample_weight"):
        binned_calibration_error([0, 1], [0.5, 0.5], sample_weight=[1, -1])
    with pytest.raises(ParameterError, match="positive sum"):
        binned_calibration_error([0, 1], [0.5, 0.5], sample_weight=[0, 0])
    with pytest.raises(ParameterError, match="one weight per sample"):
        binned_calibration_error([0, 1], [0.5, 0.5], sample_weight=[1])
    with pytest.raises(ParameterError, match="class-wise"):
        local_calibration_error([0, 1], [[0.5, 0.5], [0.5, 0.5]], setting="class-wise")
    r = binned_calibration_error([0, 1], [0.2, 0.5], n_bins=1)
    with pytest.raises(ParameterError, match="level"):
        r.confidence_interval(level=1.0)
    with pytest.raises(ParameterError, match="statistic"):
        r.confidence_interval(statistic="median")
    cw = binned_calibration_error([0, 1], [[0.5, 0.5], [0.2, 0.8]], setting="class-wise",
                                  n_bins=1)
    with pytest.raises(ParameterError, match="tables"):
        cw.table


def test_fewer_samples_than_bins_warns_and_still_computes():
    with pytest.warns(SparseBinsWarning, match="3 samples for 15 bins"):
        r = binned_calibration_error([0, 1, 1], [0.1, 0.5, 0.9])
    assert np.isfinite(r.ece)
    assert np.isnan(r.table.mean_forecast).sum() == 12
    with pytest.warns(SparseBinsWarning):
        debiased_calibration_error([0, 1, 1], [0.1, 0.5, 0.9])


def test_single_class_is_well_defined():
    # all outcomes 0: calibration error is the mean forecast where it is not 0
    p = np.array([0.1, 0.2, 0.3, 0.4])
    r = binned_calibration_error(np.zeros(4, int), p, n_bins=2)
    assert r.ece == pytest.approx(p.mean())
    assert kde_calibration_error(np.zeros(4, int), p).ece == pytest.approx(p.mean(), rel=1e-9)
    # a class absent from the labels still has a class-wise term
    P = np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1]])
    r = binned_calibration_error([0, 0], P, setting="class-wise", n_bins=1)
    np.testing.assert_allclose(r.per_column, [0.35, 0.25, 0.1])


def test_docstring_examples():
    import doctest

    from structcal.metrics import calibration, scores

    for module in (calibration, scores):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_fused_resampling_equals_explicit_weights():
    """The block-wise estimators see exactly the weights draw_weights produces."""
    rng = np.random.default_rng(15)
    n = 20_000
    y, p = smoothstep_data(rng, n)
    y = y.astype(float)
    w = rng.random(n)
    for use_w in (False, True):
        full = np.empty(n)
        _kernels.draw_weights(np.uint32(77), w, use_w, full)
        for convex in (False, True):
            edges = np.linspace(0, 1, 16)
            ref = _kernels.bin_stats(p, y, full, True, edges, True, convex)
            got = _kernels._resampled_fixed_bin_stats(np.uint32(77), p, y, w, use_w, edges,
                                                       True, convex, np.empty(8192))
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
        d1, n1 = np.zeros(257), np.zeros(257)
        m1 = _kernels.kde_histograms(p, y, full, True, 257, True, d1, n1)
        d2, n2 = np.zeros(257), np.zeros(257)
        m2 = _kernels._resampled_kde_histograms(np.uint32(77), p, y, w, use_w, 257, True,
                                                np.empty(8192), d2, n2)
        np.testing.assert_allclose(d2, d1, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(n2, n1, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m2, m1, rtol=1e-12)


def test_bootstrap_does_not_depend_on_the_thread_count():
    import numba

    rng = np.random.default_rng(16)
    y, p = smoothstep_data(rng, 5000)
    results = []
    threads = numba.get_num_threads()
    try:
        for t in sorted({1, threads}):
            numba.set_num_threads(t)
            results.append([
                binned_calibration_error(y, p).confidence_interval(
                    n_resamples=50, random_state=3).distribution,
                kde_calibration_error(y, p).confidence_interval(
                    n_resamples=20, random_state=3).distribution,
            ])
    finally:
        numba.set_num_threads(threads)
    for a, b in zip(results[0], results[-1]):
        np.testing.assert_array_equal(a, b)


def test_residual_smoothing_has_no_smoothing_bias_on_calibrated_data():
    """Smoothing labels adds smooth(s) - s where the score density changes; residuals
    have mean zero everywhere on calibrated data."""
    rng = np.random.default_rng(17)
    p = rng.beta(0.5, 3, 100_000)
    y = (rng.random(100_000) < p).astype(int)
    labels = kde_calibration_error(y, p, smoothing="labels", bandwidth=0.05).ece
    residual = kde_calibration_error(y, p, bandwidth=0.05).ece
    assert residual < 0.004 < 0.01 < labels


@pytest.mark.parametrize("dtype", [bool, np.int32, np.int64, np.float64, np.int8])
def test_one_pass_input_checks_agree_with_the_numpy_path(dtype):
    """The compiled fast path (contiguous float64 forecasts, common outcome dtypes) gives
    the results of list input (numpy path) and the same errors."""
    from structcal.metrics import binned_calibration_error, brier_decomposition

    rng = np.random.default_rng(0)
    p = rng.random(500)
    y = (rng.random(500) < p).astype(dtype)
    a, b = binned_calibration_error(y, p), binned_calibration_error(y.tolist(), p.tolist())
    assert (a.estimate, a.max_error) == (b.estimate, b.max_error)
    a, b = brier_decomposition(y, p), brier_decomposition(y.tolist(), p.tolist())
    assert (a.brier, a.reliability, a.resolution) == (b.brier, b.reliability, b.resolution)
    for bad, what in [(np.nan, "NaN"), (1.5, r"\[0, 1\]"), (-0.0001, r"\[0, 1\]")]:
        q = p.copy()
        q[7] = bad
        with pytest.raises(ValueError, match=what):
            binned_calibration_error(y, q)
    yb = y.astype(np.float64)
    yb[3] = 0.5
    with pytest.raises(ValueError, match=r"binary outcomes 0/1; got .*0\.5.* at index 3"):
        brier_decomposition(yb, p)


@pytest.mark.parametrize("estimator", ["binned", "quantile", "kde", "debiased"])
def test_group_bootstrap_of_duplicated_rows_matches_the_rows_bootstrap(estimator):
    # every row copied 5 times, the copies one group: the grouped bootstrap is the row
    # bootstrap of the distinct rows, while an ungrouped one is too narrow by about sqrt(5)
    from structcal.metrics import binned_calibration_error, debiased_calibration_error, kde_calibration_error

    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, size=300)
    y = (rng.uniform(size=300) < np.clip(p + 0.15, 0, 1)).astype(float)
    fn = {"binned": lambda a, b: binned_calibration_error(a, b, n_bins=10),
          "quantile": lambda a, b: binned_calibration_error(a, b, n_bins=10, strategy="quantile"),
          "kde": lambda a, b: kde_calibration_error(a, b),
          "debiased": lambda a, b: debiased_calibration_error(a, b, n_bins=10)}[estimator]
    rows = fn(y, p).confidence_interval(n_resamples=400, random_state=0)
    dup = fn(np.repeat(y, 5), np.repeat(p, 5))
    if estimator != "debiased":  # (its bias correction counts rows)
        assert dup.estimate == pytest.approx(fn(y, p).estimate, rel=1e-6, abs=1e-9)
    grouped = dup.confidence_interval(n_resamples=400, random_state=0, groups=np.repeat(np.arange(300), 5))
    naive = dup.confidence_interval(n_resamples=400, random_state=0)
    assert grouped.standard_error == pytest.approx(rows.standard_error, rel=0.2)
    assert naive.standard_error < 0.7 * grouped.standard_error
    with pytest.raises(ParameterError, match="groups"):
        dup.confidence_interval(groups=np.arange(3))
