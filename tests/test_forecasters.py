"""Region forecasters: fast CV equals explicit CV, known calibration maps, sklearn contract."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.neighbors import KNeighborsRegressor
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from structcal.forecasters import KNNRegionForecaster, SingleClassWarning, TreeRegionForecaster


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("cv", [3, 10])
def test_knn_fast_cv_equals_explicit_fold_fits(seed, cv):
    rng = np.random.default_rng(100 + seed)
    n = 600
    X = rng.standard_normal((n, 3))
    y = (rng.random(n) < 1 / (1 + np.exp(-2 * X[:, 0]))).astype(float)
    grid = [1, 2, 5, 17, 40, 200, 500]
    f = KNNRegionForecaster(k_grid=grid, cv=cv, random_state=seed).fit(X, y)
    # the forecaster's own fold assignment: one permutation for tie order, one for folds
    r = np.random.default_rng(seed)
    order = r.permutation(n)
    folds = r.permutation(n) % cv
    Xs = ((X - X.mean(0)) / X.std(0))[order]
    ys = y[order]
    k_max = n - np.bincount(folds).max()
    want = []
    for k in [g for g in grid if g <= k_max]:
        pred = np.empty(n)
        for fold in range(cv):
            tr, te = folds != fold, folds == fold
            pred[te] = KNeighborsRegressor(k, algorithm="brute").fit(Xs[tr], ys[tr]).predict(Xs[te])
        want.append(np.mean((pred - ys) ** 2))
    np.testing.assert_array_equal(f.cv_results_["k"], [g for g in grid if g <= k_max])
    np.testing.assert_allclose(f.cv_results_["l2"], want, rtol=1e-12)
    assert f.n_neighbors_ == f.cv_results_["k"][np.argmin(f.cv_results_["l2"])]


def test_knn_predictions_equal_neighbour_means():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 2))
    y = rng.random(300) < 0.4
    f = KNNRegionForecaster(n_neighbors=25).fit(X, y)
    Q = rng.standard_normal((50, 2))
    ref = KNeighborsRegressor(25, algorithm="brute").fit((X - f.mean_) / f.scale_, y.astype(float))
    np.testing.assert_allclose(f.predict_proba(Q)[:, 1], ref.predict((Q - f.mean_) / f.scale_))


@pytest.mark.parametrize("Forecaster", [KNNRegionForecaster, TreeRegionForecaster])
def test_forecasts_recover_a_known_calibration_map(Forecaster):
    """Events whose true probability is known: the forecasts approach it and are calibrated."""
    rng = np.random.default_rng(7)
    n = 6000
    x = rng.random((n, 1))
    truth = lambda v: 0.1 + 0.8 * v ** 2  # noqa: E731
    y = rng.random(n) < truth(x[:, 0])
    grid = list(range(5, 501, 5)) if Forecaster is KNNRegionForecaster else [5, 25, 50, 100, 200, 400]
    kw = {"k_grid": grid} if Forecaster is KNNRegionForecaster else {"leaf_grid": grid}
    f = Forecaster(random_state=0, **kw).fit(x, y)
    xt = rng.random((20000, 1))
    p = f.predict_proba(xt)[:, 1]
    # k-NN: 0.024; the pruned tree (CV picks m=100, held-out l2 within 3e-5 of the best
    # refit tree's): 0.041
    assert np.sqrt(np.mean((p - truth(xt[:, 0])) ** 2)) < (0.03 if Forecaster is KNNRegionForecaster else 0.045)
    # calibration error on fresh events, measured with the true probabilities (no outcome
    # noise): sum over forecast deciles of weight * (mean forecast - mean truth)^2
    bins = np.clip((p * 10).astype(int), 0, 9)
    t = truth(xt[:, 0])
    err = sum(
        (bins == b).mean() * (p[bins == b].mean() - t[bins == b].mean()) ** 2 for b in np.unique(bins)
    )
    assert err < 1e-3


def _pruned_predict(sk_tree, X, m):
    """Reference for the documented forecaster: walk the scikit-learn tree from the root,
    stopping at leaves and at nodes whose split leaves fewer than m events on a side."""
    t = sk_tree.tree_
    out = []
    for x in np.asarray(X, dtype=np.float32):
        v = 0
        while t.children_left[v] >= 0 and min(
            t.n_node_samples[t.children_left[v]], t.n_node_samples[t.children_right[v]]
        ) >= m:
            v = t.children_left[v] if x[t.feature[v]] <= t.threshold[v] else t.children_right[v]
        out.append(t.value[v, 0, 0])
    return np.array(out)


@pytest.mark.parametrize("max_depth", [None, 3])
def test_tree_cv_equals_the_pruning_definition(max_depth):
    """One tree per fold grown at min(leaf_grid), pruned at each m: the CV losses, the
    chosen m and the final forecasts are those of the documented definition."""
    from sklearn.model_selection import KFold

    rng = np.random.default_rng(3)
    n = 400
    X = np.column_stack([rng.integers(0, 4, n), rng.random(n)])
    y = (rng.random(n) < 0.2 + 0.15 * X[:, 0] + 0.2 * X[:, 1]).astype(float)
    grid = [1, 10, 40, 100]
    f = TreeRegionForecaster(leaf_grid=grid, cv=4, max_depth=max_depth, random_state=5).fit(X, y)
    seed = int(np.random.default_rng(5).integers(0, 2**31 - 1))
    want = np.zeros(len(grid))
    for tr, te in KFold(4, shuffle=True, random_state=seed).split(X):
        t = DecisionTreeRegressor(min_samples_leaf=1, max_depth=max_depth, random_state=seed)
        t.fit(X[tr], y[tr])
        for g, m in enumerate(grid):
            want[g] += ((_pruned_predict(t, X[te], m) - y[te]) ** 2).sum()
    np.testing.assert_allclose(f.cv_results_["l2"], want / n, rtol=1e-12)
    assert f.min_samples_leaf_ == grid[int(np.flatnonzero(want <= want.min() + 1e-12)[-1])]
    full = DecisionTreeRegressor(min_samples_leaf=1, max_depth=max_depth, random_state=seed).fit(X, y)
    Q = np.column_stack([rng.integers(0, 4, 300), rng.random(300)])
    np.testing.assert_array_equal(f.predict_proba(Q)[:, 1], np.clip(_pruned_predict(full, Q, f.min_samples_leaf_), 0, 1))
    # at the growing leaf size the forecaster is scikit-learn's tree itself
    np.testing.assert_array_equal(
        TreeRegionForecaster(min_samples_leaf=7, random_state=5).fit(X, y).predict_proba(Q)[:, 1],
        DecisionTreeRegressor(min_samples_leaf=7, random_state=seed).fit(X, y).predict(Q),
    )


@pytest.mark.parametrize("Forecaster", [KNNRegionForecaster, TreeRegionForecaster])
def test_deterministic_and_clonable(Forecaster):
    rng = np.random.default_rng(1)
    X = rng.integers(0, 3, size=(500, 2)).astype(float)  # many ties
    y = rng.random(500) < 0.5
    kw = {"k_grid": [5, 50]} if Forecaster is KNNRegionForecaster else {"leaf_grid": [5, 50]}
    a = Forecaster(random_state=3, **kw).fit(X, y).predict_proba(X)
    b = clone(Forecaster(random_state=3, **kw)).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("Forecaster", [KNNRegionForecaster, TreeRegionForecaster])
def test_single_outcome_and_unfitted(Forecaster):
    X = np.arange(20.0).reshape(-1, 1)
    with pytest.raises(NotFittedError):
        Forecaster().predict_proba(X)
    with pytest.warns(SingleClassWarning, match="all have outcome True"):
        f = Forecaster().fit(X, np.ones(20, bool))
    np.testing.assert_array_equal(f.predict_proba(X), np.ones((20, 1)))
    assert f.predict(X).tolist() == [True] * 20


@pytest.mark.parametrize("Forecaster", [KNNRegionForecaster, TreeRegionForecaster])
def test_bad_input(Forecaster):
    X = np.arange(20.0).reshape(-1, 1)
    y = np.arange(20) % 2
    bad = X.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        Forecaster().fit(bad, y)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        Forecaster().fit(X, np.arange(20) % 3)
    f = Forecaster(**({"n_neighbors": 3} if Forecaster is KNNRegionForecaster else {"min_samples_leaf": 3})).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        f.predict_proba(np.zeros((2, 3)))
    name = "n_neighbors" if Forecaster is KNNRegionForecaster else "min_samples_leaf"
    with pytest.raises(ValueError, match=f"`{name}` must be 'cv' or a positive integer"):
        Forecaster(**{name: 0}).fit(X, y)
    with pytest.raises(ValueError, match="`cv` must be an integer >= 2"):
        Forecaster(cv=1).fit(X, y)


@pytest.mark.parametrize("Forecaster", [KNNRegionForecaster, TreeRegionForecaster])
def test_an_empty_batch_gets_no_rows(Forecaster):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    f = Forecaster().fit(X, X[:, 0] + rng.normal(size=60) > 0)
    for empty in (np.empty((0, 3)), np.empty((0, 3), dtype=np.float32), []):
        assert f.predict_proba(empty).shape == (0, 2)
        assert f.predict(empty).shape == (0,)
    assert f.to_map().predict_proba(np.empty((0, 3))).shape == (0, 2)
    with pytest.raises(ValueError, match="`X` has 2 features, but .* was fit on 3"):
        f.predict_proba(np.empty((0, 2)))
    with pytest.raises(ValueError, match="2D array"):
        f.predict_proba(np.empty(0))
    with pytest.raises(ValueError, match="must hold numbers; got an empty array of dtype object"):
        f.predict_proba(np.empty((0, 3), dtype=object))
    with pytest.raises(ValueError):
        Forecaster().fit(np.empty((0, 3)), np.empty(0, bool))


@parametrize_with_checks(
    [KNNRegionForecaster(k_grid=[1, 3, 5]), TreeRegionForecaster(leaf_grid=[1, 3, 5])],
    expected_failed_checks=lambda est: {
        "check_classifiers_one_label": "single-outcome fits forecast that outcome with a SingleClassWarning (documented)",
    },
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _builders():
    """The two builders of the same KD-tree: NumPy and the kernel."""
    from structcal import _kdtree, _knn

    return {"numpy": _kdtree.build_kdtree, "kernel": _knn.build_kdtree}


@pytest.mark.parametrize("kind", ["normal", "discrete", "one-hot", "constant"])
@pytest.mark.parametrize("n,leaf_size", [(0, 4), (1, 1), (2, 1), (5, 1), (300, 1), (300, 4),
                                         (700, 8), (5000, 64), (9000, 40)])
def test_kdtree_builders_build_the_same_tree(kind, n, leaf_size):
    """NumPy and the kernel build the same arrays (so either may serve a fit): random,
    tied, one-hot and constant features; nodes split at sampled medians (n > 4096)."""
    rng = np.random.default_rng(n + leaf_size)
    if kind == "normal":
        X = rng.normal(size=(n, 3))
    elif kind == "discrete":
        X = rng.integers(0, 3, size=(n, 4)).astype(float)
    elif kind == "one-hot":
        X = _one_hot_and_continuous(rng, n) if n >= 3 else rng.random((n, 17))
    else:
        X = np.ones((n, 2))
    got = _builders()["numpy"](X, leaf_size)
    want = _builders()["kernel"](X, leaf_size)
    for a, b, name in zip(got, want, ["perm", "start", "end", "child", "lower", "upper"]):
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got[1].shape[0] < 8 * max(n, 1) / leaf_size + 1


@pytest.mark.parametrize("builder", ["numpy", "kernel"])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 7, 60])
def test_kdtree_neighbours_follow_the_tie_rule(seed, k, builder):
    """The tree returns exactly a brute-force scan sorted by (squared distance, row)."""
    from structcal._regions import _KDTree

    rng = np.random.default_rng(seed)
    n = 700
    # discrete features: many exact ties in distance, duplicated points
    X = rng.integers(0, 4, size=(n, 3)).astype(float) * np.array([1.0, 0.5, 2.0])
    Q = np.vstack([X[:40], rng.integers(0, 4, size=(40, 3)) * 0.7])
    tree = _KDTree(X, np.zeros(n), tree=_builders()[builder](X, 8))
    idx, dist = tree.neighbour_indices(Q, k)
    for q in range(Q.shape[0]):
        d = np.zeros(n)
        for f in range(3):  # the documented accumulation order
            d += (X[:, f] - Q[q, f]) ** 2
        want = np.lexsort((np.arange(n), d))[:k]
        np.testing.assert_array_equal(idx[q], want)
        np.testing.assert_array_equal(dist[q], d[want])


def _one_hot_and_continuous(rng, n, n_letters=12):
    """Events like the OCR letters': a one-hot letter with skewed frequencies (rare
    letters), a few coarse continuous features (ties) and a binary flag, standardised
    as the forecaster does (rare letters get the widest dimensions)."""
    freq = 1.0 / np.arange(1, n_letters + 1) ** 1.5
    letter = rng.choice(n_letters, size=n, p=freq / freq.sum())
    X = np.column_stack([
        np.round(rng.random(n), 1),
        rng.integers(0, 5, n) / 4.0,
        np.eye(n_letters)[letter],
        np.round(rng.beta(4.0, 1.0, n), 2),
        (rng.random(n) < 0.05).astype(float),
    ])
    m = min(30, n // 3)
    X[n - m:] = X[:m]  # exact duplicates
    std = X.std(0)
    return (X - X.mean(0)) / np.where(std > 0, std, 1.0)


@pytest.mark.parametrize("builder", ["numpy", "kernel"])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 9, 80])
@pytest.mark.parametrize("leaf_size", [4, 40])
@pytest.mark.parametrize("n", [900, 9000])  # 9000: the root splits at a sampled median
def test_kdtree_on_one_hot_features_follows_the_tie_rule(seed, k, leaf_size, n, builder):
    """One-hot plus coarse continuous features (distance ties everywhere, splits at the
    edges of tie blocks): boxes are exact bounds, and neighbours equal a brute-force
    scan sorted by (squared distance, row)."""
    from structcal._regions import _KDTree

    rng = np.random.default_rng(10 + seed)
    X = _one_hot_and_continuous(rng, n)
    d = X.shape[1]
    perm, start, end, child, lower, upper = arrays = _builders()[builder](X, leaf_size)
    assert np.array_equal(np.sort(perm), np.arange(n)) and start[0] == 0 and end[0] == n
    for node in range(start.shape[0]):
        pts = X[perm[start[node]:end[node]]]
        assert len(pts) > 0
        np.testing.assert_array_equal(lower[node], pts.min(0))
        np.testing.assert_array_equal(upper[node], pts.max(0))
        if child[node] < 0:
            assert len(pts) <= leaf_size
        else:
            left = child[node]
            assert left > node and end[left] == start[left + 1]
            assert start[left] == start[node] and end[left + 1] == end[node]
    # the one-hot dimensions are split cleanly: some leaves hold a single letter
    leaves = np.flatnonzero(child < 0)
    assert any(np.ptp(X[perm[start[i]:end[i]], 2:-2], axis=0).max() == 0 for i in leaves)
    Q = np.vstack([X[:60], _one_hot_and_continuous(rng, 60)])
    idx, dist = _KDTree(X, np.zeros(n), tree=arrays).neighbour_indices(Q, k)
    for q in range(Q.shape[0]):
        dq = np.zeros(n)
        for f in range(d):  # the documented accumulation order
            dq += (X[:, f] - Q[q, f]) ** 2
        want = np.lexsort((np.arange(n), dq))[:k]
        np.testing.assert_array_equal(idx[q], want)
        np.testing.assert_array_equal(dist[q], dq[want])


def test_knn_cv_on_one_hot_features_equals_explicit_fold_fits():
    """CV losses on one-hot plus continuous features equal brute-force held-out forecasts
    with the documented tie rule, and predictions equal brute-force neighbour means."""
    rng = np.random.default_rng(3)
    n, cv, seed = 600, 5, 2
    X = _one_hot_and_continuous(rng, n)
    y = (rng.random(n) < 0.2 + 0.6 * (X[:, 0] > 0)).astype(float)
    grid = [2, 15, 60, 300]
    f = KNNRegionForecaster(k_grid=grid, cv=cv, random_state=seed).fit(X, y)
    r = np.random.default_rng(seed)
    order = r.permutation(n)
    folds = r.permutation(n) % cv
    Xs = f.X_fit_
    ys = y[order]
    loss = np.zeros(len(grid))
    for i in range(n):
        d = np.zeros(n)
        for c in range(Xs.shape[1]):
            d += (Xs[:, c] - Xs[i, c]) ** 2
        nb = [j for j in np.lexsort((np.arange(n), d)) if folds[j] != folds[i]]
        for g, k in enumerate(grid):
            loss[g] += (ys[nb[:k]].mean() - ys[i]) ** 2
    np.testing.assert_allclose(f.cv_results_["l2"], loss / n, rtol=1e-12)
    Q = np.vstack([X[:50], _one_hot_and_continuous(rng, 50)])
    Qs = (Q - f.mean_) / f.scale_
    want = np.empty(len(Q))
    for q in range(len(Q)):
        d = np.zeros(n)
        for c in range(Xs.shape[1]):
            d += (Xs[:, c] - Qs[q, c]) ** 2
        want[q] = ys[np.lexsort((np.arange(n), d))[: f.n_neighbors_]].mean()
    np.testing.assert_array_equal(f.predict_proba(Q)[:, 1], want)


@pytest.mark.parametrize("n", [0, 1, 2, 16, 17, 40, 500, 1064, 4000])
def test_sort_neighbours_orders_by_distance_then_index(n):
    """Random, tied, presorted, reversed and all-equal distances: (distance, index) order."""
    from structcal import _knn

    rng = np.random.default_rng(n)
    cases = [rng.random(n), rng.integers(0, 3, n).astype(float), np.sort(rng.random(n)),
             np.sort(rng.random(n))[::-1], np.zeros(n)]
    for d in cases:
        for key in (rng.permutation(5 * n + 1)[:n], np.arange(n)[::-1], np.arange(n)):
            bd, bk, bp = d.copy(), key.astype(np.int64), np.arange(n)
            _knn.sort_neighbours(bd, bk, bp, n, np.empty(_knn.SORT_STACK, dtype=np.int64))
            want = np.lexsort((key, d))
            np.testing.assert_array_equal(bp, want)
            np.testing.assert_array_equal(bk, key[want])
            np.testing.assert_array_equal(bd, d[want])


def test_knn_cv_with_ties_equals_explicit_fold_fits():
    """Discrete features (ties everywhere): CV losses equal held-out forecasts computed
    by brute force with the documented tie rule (distance, then row of X_fit_)."""
    rng = np.random.default_rng(5)
    n, cv, seed = 500, 5, 1
    X = rng.integers(0, 3, size=(n, 2)).astype(float)
    y = (rng.random(n) < 0.3 + 0.2 * X[:, 0]).astype(float)
    grid = [3, 10, 50, 120]
    f = KNNRegionForecaster(k_grid=grid, cv=cv, random_state=seed).fit(X, y)
    r = np.random.default_rng(seed)
    order = r.permutation(n)
    folds = r.permutation(n) % cv
    Xs = ((X - X.mean(0)) / X.std(0))[order]
    np.testing.assert_array_equal(f.X_fit_, Xs)
    ys = y[order]
    loss = np.zeros(len(grid))
    for i in range(n):
        d = ((Xs - Xs[i]) ** 2).sum(axis=1)
        nb = [j for j in np.lexsort((np.arange(n), d)) if folds[j] != folds[i]]
        for g, k in enumerate(grid):
            loss[g] += (ys[nb[:k]].mean() - ys[i]) ** 2
    np.testing.assert_allclose(f.cv_results_["l2"], loss / n, rtol=1e-12)
    assert f.n_neighbors_ == grid[int(np.flatnonzero(loss <= loss.min() + 1e-12)[-1])]


def test_knn_subsample_choice_and_lazy_tree():
    rng = np.random.default_rng(0)
    n, m = 3000, 1000
    X = rng.random((n, 2))
    y = rng.random(n) < X[:, 0]
    f = KNNRegionForecaster(k_grid=[5, 20, 80], cv_max_samples=m, random_state=0).fit(X, y)
    sub = f.cv_subsample_
    assert sub["n_samples"] == m and sub["rate"] == pytest.approx(4 / 6)
    assert f.n_neighbors_ == round(sub["k"] * (n / m) ** (4 / 6))
    exact = KNNRegionForecaster(k_grid=[5, 20, 80], cv_max_samples=None, random_state=0).fit(X, y)
    assert exact.cv_subsample_ is None and exact.cv_results_["k"].tolist() == [5, 20, 80]
    # the tree is derived state: dropping it (as after loading) gives the same forecasts
    Q = rng.random((200, 2))
    before = f.predict_proba(Q)
    f._index = None
    np.testing.assert_array_equal(f.predict_proba(Q), before)
    with pytest.raises(ValueError, match="`cv_max_samples` must be None or an integer >= 2"):
        KNNRegionForecaster(cv_max_samples=1).fit(X, y)


def test_knn_forecaster_predicts_with_the_tree_its_cross_validation_built(monkeypatch):
    """A fit whose cross-validation ran on a KD-tree over all of ``X_fit_`` keeps that tree
    for its forecasts (and hands it to its map): no second build, the same tree arrays as
    a build afresh, the same forecasts. A fit that chose k on a subsample, or by a scan,
    keeps none."""
    from structcal import _regions
    from structcal._tier import forced_tier

    rng = np.random.default_rng(1)
    X = np.round(rng.normal(size=(3000, 3)), 1)
    y = rng.random(3000) < 0.5 + 0.3 * np.tanh(X[:, 0])
    Q = rng.normal(size=(500, 3))
    builds = []
    build = _regions._build_tree
    monkeypatch.setattr(_regions, "_build_tree", lambda X: builds.append(X) or build(X))
    with forced_tier("kernels"):
        f = KNNRegionForecaster(k_grid=[5, 20, 80], random_state=0).fit(X, y)
        assert len(builds) == 1 and builds[0] is f.X_fit_
        p = f.predict_proba(Q)
        m = f.to_map()
        np.testing.assert_array_equal(m.predict_proba(Q), p)
        assert len(builds) == 1  # the cross-validation's tree, shared by the map
        kept = f._index
        f._index = None
        np.testing.assert_array_equal(f.predict_proba(Q), p)
        assert len(builds) == 2
        for a, b in zip((kept.key, kept.start, kept.end, kept.child, kept.lower, kept.upper),
                        (f._index.key, f._index.start, f._index.end, f._index.child,
                         f._index.lower, f._index.upper)):
            np.testing.assert_array_equal(a, b)
        sub = KNNRegionForecaster(k_grid=[5, 20], cv_max_samples=1000, random_state=0).fit(X, y)
        assert sub._index is None
    with forced_tier("numpy"):
        assert KNNRegionForecaster(k_grid=[5, 20], random_state=0).fit(X, y)._index is None


@pytest.mark.parametrize("Forecaster", [KNNRegionForecaster, TreeRegionForecaster])
def test_plain_arrays_and_scikit_learns_validation_give_the_same_fit(tmp_path, Forecaster):
    """A plain array of numbers skips scikit-learn's validation; anything else goes
    through it (here a list of outcomes and a memory-mapped X): the same fit and
    forecasts either way, and the same errors for what does not fit."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = rng.random(300) < 0.5 + 0.3 * np.tanh(X[:, 0])
    kw = {"k_grid": [5, 20, 50]} if Forecaster is KNNRegionForecaster else {"leaf_grid": [5, 20, 50]}
    fast = Forecaster(random_state=0, **kw).fit(X, y.astype(int))
    slow = Forecaster(random_state=0, **kw).fit(X, y.astype(int).tolist())
    mm = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float64, shape=X.shape)
    mm[:] = X
    for a, b in [(fast.predict_proba(X), slow.predict_proba(X)),
                 (fast.predict_proba(X), fast.predict_proba(mm)),
                 (fast.predict_proba(X.tolist()), slow.predict_proba(mm))]:
        np.testing.assert_array_equal(a, b)
    assert fast.n_features_in_ == slow.n_features_in_ == 3
    assert np.array_equal(fast.classes_, slow.classes_)
    bad = X.copy()
    bad[3, 1] = np.nan
    for model in (fast, slow):
        with pytest.raises(ValueError, match="NaN"):
            model.predict_proba(bad)
        with pytest.raises(ValueError, match="3 features"):
            model.predict_proba(X[:, :2])
    with pytest.raises(ValueError, match="binary"):
        Forecaster(**kw).fit(X, np.arange(300) % 3)
    with pytest.raises(ValueError, match="binary"):
        Forecaster(**kw).fit(X, rng.random(300))


@pytest.mark.parametrize("copy", ["parallel", "threads"])
@pytest.mark.parametrize("n_workers", [1, 3, 32])
def test_knn_passes_do_not_depend_on_the_number_of_workers(monkeypatch, n_workers, copy):
    """CV losses, neighbour means and neighbour lists are the same, bit for bit, whether
    the chunks go to one worker or many (and to the serial copy, the parallel copy or
    the serial copy in several threads at once)."""
    from structcal import _knn, _numba, _regions

    rng = np.random.default_rng(7)
    X = _one_hot_and_continuous(rng, 3000)
    y = (rng.random(3000) < 0.3).astype(float)
    folds = rng.permutation(3000) % 5
    Q = _one_hot_and_continuous(rng, 700)
    grid = np.array([1, 4, 30, 90], dtype=np.int64)

    def run():
        tree = _regions._KDTree(X, y, folds)
        return (tree.cv_losses(grid, prior=0.5, chunk=100), tree.neighbour_means(Q, 30, 0.5),
                *tree.neighbour_indices(Q, 12))

    want = run()  # default workers
    monkeypatch.setattr(_regions, "_WORKERS", n_workers)
    monkeypatch.setattr(_numba, "PARALLEL_MIN_WORK", 0)  # large enough for the parallel copy
    monkeypatch.setattr(_numba, "PARALLEL_COMPILE_SECONDS", 0.0)
    threaded = []
    if copy == "threads":  # the parallel copy not bought: the serial one, split
        monkeypatch.setattr(_knn.knn_pass, "_use_parallel", lambda args: False)
        monkeypatch.setattr(_numba.numba, "get_num_threads", lambda: 3)
        split = _knn.knn_pass.split
        monkeypatch.setattr(_knn.knn_pass, "split",
                            lambda args, n: threaded.append(n) or split(args, n))
    for a, b in zip(run(), want):
        np.testing.assert_array_equal(a, b)
    assert threaded == ([3] * 3 if copy == "threads" else [])  # CV, means, neighbours
