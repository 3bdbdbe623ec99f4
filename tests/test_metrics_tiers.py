"""The NumPy tier of the binned statistics equals the Numba kernels bit for bit."""

import numpy as np
import pytest

from structcal._tier import forced_tier
from structcal.metrics import _binning, _kernels


def _scores(rng, n, n_bins):
    """Scores with edge values (b / n_bins, 0, 1, centres) among uniform draws."""
    s = rng.random(n)
    special = np.concatenate([np.arange(n_bins + 1) / n_bins, (np.arange(n_bins) + 0.5) / n_bins,
                              [0.0, 1.0, 0.3, 0.7, np.nextafter(0.3, 0), np.nextafter(0.7, 1)]])
    pick = rng.random(n) < 0.3
    s[pick] = rng.choice(special, size=int(pick.sum()))
    return s


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("mode", ["uniform", "edges", "convex-uniform", "convex-edges"])
def test_bin_stats_tiers_agree(seed, mode):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    n_bins = int(rng.integers(1, 16))
    s = _scores(rng, n, n_bins)
    y = (rng.random(n) < s).astype(np.float64)
    use_w = bool(seed % 2)
    w = rng.random(n) * 3 if use_w else np.zeros(1)
    uniform = mode.endswith("uniform")
    if uniform:
        edges = _binning.uniform_edges(n_bins)
        np.testing.assert_array_equal(edges, _kernels.uniform_edges(n_bins))
    else:
        inner = np.sort(rng.random(n_bins - 1))
        if n_bins > 2 and seed % 3 == 0:  # a repeated edge: an empty bin of width 0
            inner[1] = inner[0]
        edges = np.concatenate([[0.0], inner, [1.0]])
    convex = mode.startswith("convex")
    with forced_tier("numpy"):
        a = _binning.bin_stats(s, y, w, use_w, edges, uniform, convex)
        ia = _binning.bin_index(s, edges, uniform)
        sa = _binning.summarize_bins(a)
    b = _kernels.bin_stats(s, y, w, use_w, edges, uniform, convex)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ia, _kernels.bin_index(s, edges, uniform))
    np.testing.assert_array_equal(np.array(sa), np.array(_kernels.summarize_bins(b)))
    with forced_tier("kernels"):  # the dispatch itself
        np.testing.assert_array_equal(_binning.bin_stats(s, y, w, use_w, edges, uniform, convex), b)


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64, np.float64])
def test_input_checks_tiers_agree(dtype):
    rng = np.random.default_rng(0)
    for values in ([0, 1, 1, 0], [0, 2, 1], [], [1]):
        y = np.array(values, dtype=dtype)
        outs = []
        for tier in ("numpy", "kernels"):
            out = np.empty(y.shape[0])
            with forced_tier(tier):
                ok = _binning.binary_as_float(y, out)
            outs.append((ok, out))
        assert outs[0][0] == outs[1][0] == bool(np.isin(y, [0, 1]).all())
        np.testing.assert_array_equal(outs[0][1], outs[1][1])
    for p in (rng.random(50), np.array([0.0, 1.0]), np.array([0.5, np.nan]),
              np.array([-0.0, 1.0 + 1e-16, 1.0000001]), np.array([-1e-300])):
        with forced_tier("numpy"):
            a = _binning.all_probabilities(p)
        with forced_tier("kernels"):
            b = _binning.all_probabilities(p)
        assert a == b == bool(((p >= 0) & (p <= 1)).all())


def test_summarize_empty_table_is_nan():
    with forced_tier("numpy"):
        out = _binning.summarize_bins(np.zeros((_binning.N_STATS, 4)))
    assert np.isnan(out).all()
    assert np.isnan(_kernels.summarize_bins(np.zeros((_binning.N_STATS, 4)))).all()
