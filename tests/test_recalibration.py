"""Algorithm 1 end to end on problems whose calibrated answer is known."""

import numpy as np
import pytest

from structcal import ChainPotentials, ParameterError
from structcal.events import MAPEvent, MarginalEvent, Predicate, build_events
from structcal.exceptions import NotFittedError
from structcal.forecasters import KNNRegionForecaster, TreeRegionForecaster
from structcal.prediction import StructuredPrediction
from structcal.recalibration import StructuredRecalibrator, evaluate_events


def _overconfident_world(n_words, seed, temperature=3.0, K=4, L=5):
    """Words drawn from a known CRF; the 'model' reports its potentials x temperature.

    The true marginals are those of the generating CRF, so the model's raw marginals are
    over-confident and a recalibrator should undo it.
    """
    rng = np.random.default_rng(seed)
    from structcal.inference import forward_backward

    unary = rng.standard_normal((n_words * L, K)) * 1.5
    P = np.eye(K) * 0.8
    true = ChainPotentials.from_scores(unary, np.full(n_words, L), P)
    marg = forward_backward(true, edge_marginals=True)
    # sample each word exactly: first label from node marginals, then the transition
    # conditionals p(y_{t+1} | y_t) = edge / node marginal
    y = np.empty(n_words * L, dtype=np.int64)
    for w in range(n_words):
        s = w * L
        y[s] = rng.choice(K, p=marg.marginals[s])
        for t in range(1, L):
            e = marg.edge_marginals[true.edge_offsets[w] + t - 1][y[s + t - 1]]
            y[s + t] = rng.choice(K, p=e / e.sum())
    model = ChainPotentials.from_scores(unary * temperature, np.full(n_words, L), P * temperature)
    return StructuredPrediction(model), y, marg.marginals


def test_recalibration_repairs_overconfident_marginals():
    pred_fit, y_fit, _ = _overconfident_world(1500, seed=0)
    pred_test, y_test, true_marg = _overconfident_world(1500, seed=1)
    rec = StructuredRecalibrator(
        kinds=[MarginalEvent()], features=["phi_mg2", "raw"],
        forecaster=KNNRegionForecaster(random_state=0),
    ).fit(pred_fit, y_fit, raw=True)
    report = rec.evaluate(pred_test, y_test)
    raw, cal = report.get("marginal", "raw"), report.get("marginal", "calibrated")
    assert raw.calibration_error > 0.01  # badly over-confident
    assert cal.calibration_error < 0.002
    assert cal.l2 < raw.l2 - 0.02
    # calibrated forecasts approach the true probability of each event
    out = rec.predict(pred_test, y_test)
    truth = true_marg[np.arange(pred_test.n_nodes), pred_test.map_labels]
    assert np.sqrt(np.mean((out.forecast - truth) ** 2)) < 0.08
    assert np.sqrt(np.mean((out.table.raw - truth) ** 2)) > 0.1


def test_per_kind_and_pooled_forecasters():
    pred_fit, y_fit, _ = _overconfident_world(600, seed=2)
    pred_test, y_test, _ = _overconfident_world(300, seed=3)
    feats = {"map": ["phi_mp3", "phi_mg1"], "marginal": ["phi_mg2", "phi_mp7"]}
    per_kind = StructuredRecalibrator(features=feats, shift_check=False,
                                      forecaster=TreeRegionForecaster(leaf_grid=[20, 80], random_state=0))
    per_kind.fit(pred_fit, y_fit)
    assert set(per_kind.forecasters_) == {"map", "marginal"}
    assert per_kind.feature_names_["map"] == ("phi_mp3", "phi_mg1")
    pooled = StructuredRecalibrator(features=feats, pooled=True, shift_check=False,
                                    forecaster=KNNRegionForecaster(k_grid=[50, 100]))
    pooled.fit(pred_fit, y_fit)
    assert set(pooled.forecasters_) == {"pooled"}
    assert pooled.feature_names_["pooled"][-2:] == ("kind=map", "kind=marginal")
    for rec in (per_kind, pooled):
        out = rec.predict(pred_test, y_test)
        assert out.forecast.shape == (pred_test.n_items + pred_test.n_nodes,)
        assert ((out.forecast >= 0) & (out.forecast <= 1)).all()
        assert out.for_kind("map").shape == (pred_test.n_items,)
        report = rec.evaluate(pred_test, y_test)
        assert report.groups == ["pooled", "map", "marginal"]
        assert report.forecasters == ["raw", "calibrated"]
        d = report.to_dict()
        assert d["pooled"]["calibrated"]["n_events"] == pred_test.n_items + pred_test.n_nodes
        assert "calibrated l2" in report.format()


def test_evaluate_events_matches_direct_brier_computation():
    pred, y, _ = _overconfident_world(200, seed=4)
    t = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y, features=["phi_mp1", "phi_mg2"])
    rng = np.random.default_rng(0)
    p = rng.random(t.n_events)
    report = evaluate_events(t, {"raw": t.raw, "random": p}, by="kind")
    for group, mask in (("pooled", np.ones(t.n_events, bool)), ("map", t.kind == 0), ("marginal", t.kind == 1)):
        for name, f in (("raw", t.raw), ("random", p)):
            r = report.get(group, name)
            o = t.outcome[mask].astype(float)
            assert r.n_events == mask.sum()
            np.testing.assert_allclose(r.l2, np.mean((f[mask] - o) ** 2))
            # calibration error from the bucket table, computed directly
            b = np.minimum((f[mask] * 10).astype(int), 9)
            ce = sum((b == k).mean() * (f[mask][b == k].mean() - o[b == k].mean()) ** 2 for k in np.unique(b))
            np.testing.assert_allclose(r.calibration_error, ce, rtol=1e-10, atol=1e-15)
            np.testing.assert_allclose(r.curve.counts.sum(), mask.sum())


@pytest.mark.parametrize("grouped", [False, True])
def test_evaluate_events_bootstrap_resamples_whole_groups(grouped):
    # the interval is the 2.5% and 97.5% quantiles of the Brier score with every event
    # weighted by its group's multiplicity in a multinomial draw of the groups
    pred, y, _ = _overconfident_world(60, seed=5)
    t = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y, features=["phi_mp1", "phi_mg2"])
    groups = np.arange(60) // 7 if grouped else None
    report = evaluate_events(t, {"raw": t.raw}, by="kind", groups=groups, n_resamples=300,
                             random_state=3)
    item_group = np.arange(60) // 7 if grouped else np.arange(60)
    G = item_group.max() + 1
    counts = np.random.default_rng(3).multinomial(G, np.full(G, 1.0 / G), size=300)
    w_all = counts[:, item_group[t.item]].astype(float)
    for group, mask in (("pooled", np.ones(t.n_events, bool)), ("map", t.kind == 0)):
        w = w_all[:, mask]
        ok = w.sum(axis=1) > 0
        boot = (w[ok] @ (t.raw[mask] - t.outcome[mask]) ** 2) / w[ok].sum(axis=1)
        np.testing.assert_allclose(report.get(group, "raw").l2_interval,
                                   np.quantile(boot, [0.025, 0.975]), rtol=1e-12)


def test_predicate_events_get_forecasts_without_model_probability():
    pred_fit, y_fit, _ = _overconfident_world(800, seed=5)
    pred_test, y_test, _ = _overconfident_world(400, seed=6)
    ends_in_zero = Predicate(lambda lab: bool(lab[-1] == 0), "ends_in_zero")
    rec = StructuredRecalibrator(kinds=[ends_in_zero], features=["map_in_event", "phi_mp3"],
                                 forecaster=KNNRegionForecaster(k_grid=[25, 50, 100])).fit(pred_fit, y_fit)
    out = rec.predict(pred_test, y_test)
    assert np.isnan(out.table.raw).all()
    report = rec.evaluate(pred_test, y_test)
    assert report.forecasters == ["calibrated"]
    # MAP ends in zero is strong evidence the word does
    mp = pred_test.map_labels[pred_test.item_offsets[1:] - 1] == 0
    assert out.forecast[mp].mean() > out.forecast[~mp].mean() + 0.3


def test_errors():
    pred, y, _ = _overconfident_world(50, seed=7)
    rec = StructuredRecalibrator(features=["phi_mp1", "phi_mg2"])
    with pytest.raises(NotFittedError):
        rec.predict(pred)
    t = build_events(pred, [MAPEvent()], features=["phi_mp1"])
    with pytest.raises(ParameterError, match="no outcomes"):
        evaluate_events(t, {"raw": t.raw})
    t = build_events(pred, [MAPEvent()], y_true=y, features=["phi_mp1"])
    with pytest.raises(ParameterError, match=r"must have shape \(50,\)"):
        evaluate_events(t, {"raw": np.zeros(3)})
    with pytest.raises(ParameterError, match="contain NaN"):
        evaluate_events(t, {"raw": np.full(50, np.nan)})
    with pytest.raises(TypeError, match="EventKind"):
        StructuredRecalibrator(kinds=["map"]).fit(pred, y)
