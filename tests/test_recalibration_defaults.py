"""StructuredRecalibrator's defaults: features the inputs support, method chosen by CV, shift test."""

import warnings

import numpy as np
import pytest

from structcal import ChainPotentials, ParameterError, StructuredPrediction
from structcal.calibrators import IsotonicCalibration
from structcal.events import MAPEvent, MarginalEvent, Predicate, build_events, external_events
from structcal.exceptions import DistributionShiftWarning
from structcal.features import REQUIREMENTS, get_feature, register_feature
from structcal.forecasters import KNNRegionForecaster
from structcal.recalibration import (
    METHODS,
    ShiftTest,
    StructuredRecalibrator,
    _clustered_se,
    _item_folds,
    _one_se_choice,
)

from ._graph_problems import random_graphs
from .test_recalibration import _overconfident_world

SMALL_KNN = KNNRegionForecaster(k_grid=[10, 25, 50, 100])


def test_auto_features_follow_declared_requirements():
    pred, y, _ = _overconfident_world(20, seed=0)
    kinds = [MAPEvent(), MarginalEvent(), Predicate(lambda lab: bool(lab[0] == 0), "first0")]
    t = build_events(pred, kinds, y_true=y, features="auto")
    names = {k: t.group_by("kind")[k].feature_names for k in t.kind_names}
    assert names["map"] == ("phi_mp1", "phi_mp3", "phi_mg1", "raw")  # no phi_no1, no phi_mp2
    assert set(names["marginal"]) == {"phi_mp4", "phi_mp5", "phi_mp7", "phi_mg2", "phi_mg3", "raw"} | {
        f"phi_mp6[{a}]" for a in range(pred.n_states)
    }
    # a predicate has no model probability: I[MAP in E] but no raw column, raw is NaN
    assert names["first0"] == ("phi_mp1", "phi_mp3", "phi_mg1", "map_in_event")
    assert np.isnan(t.raw[t.kind == 2]).all()
    # the requirements are declared by the features, not listed in build_events
    assert get_feature("phi_no1").requires == ("unstructured_scores",)
    assert get_feature("phi_mp2").requires == ("lexicon",)
    assert {"unstructured_scores", "lexicon", "probability"} <= set(REQUIREMENTS)
    # (events/objects.py adds node_coords and node_intensity for object shape features)
    assert get_feature("phi_no2").missing(pred, MarginalEvent()) == [REQUIREMENTS["unstructured_scores"].needs]
    # with unstructured scores the phi_no features come back
    scored = StructuredPrediction(pred.potentials, unstructured_scores=np.zeros((pred.n_nodes, pred.n_states)))
    t = build_events(scored, [MAPEvent()], features="auto")
    assert t.feature_names == ("phi_no1", "phi_mp1", "phi_mp3", "phi_mg1", "raw")
    # a user feature with a requirement is dropped by 'auto' when it is not met
    register_feature("test_needs_lexicon", scope="item", requires=["lexicon"], replace=True)(
        lambda ctx: np.zeros(len(ctx.events))
    )
    with pytest.raises(ParameterError, match="needs a `lexicon`"):
        build_events(pred, [MAPEvent()], features=["test_needs_lexicon"])
    with pytest.raises(ParameterError, match="unknown `requires`"):
        register_feature("test_bad_req", scope="item", requires=["gpu"])


def test_default_recalibrator_on_ocr_shipped_model():
    from structcal.demos import ocr_setup

    setup = ocr_setup("ocr_chain_crf")
    # random subsets: the first words of a split are not a random sample (their lengths
    # differ, and the shift test rightly says so)
    rng = np.random.default_rng(0)
    recal = setup.recalibration.subset(np.sort(rng.choice(setup.recalibration.n_words, 500, replace=False)))
    test = setup.test.subset(np.sort(rng.choice(setup.test.n_words, 300, replace=False)))
    rec = StructuredRecalibrator(random_state=0).fit(setup.predict(recal), recal.labels)
    assert set(rec.selection_) == {"map", "marginal"}
    for key, sel in rec.selection_.items():
        assert sel["method"] in METHODS
        assert set(sel["cv_brier"]) == set(METHODS)
        # the rule: isotonic unless another candidate is better by more than one SE
        assert set(sel["cv_brier_se"]) == set(METHODS) and sel["cv_brier_se"][sel["method"]] == 0.0
        cv, se = sel["cv_brier"], sel["cv_brier_se"]
        if sel["method"] != "isotonic":
            assert cv[sel["method"]] < cv["isotonic"] - se["isotonic"]
        assert sel["n_items"] == 500
    assert "phi_no1" in rec.feature_names_["map"] and "phi_mp2" not in rec.feature_names_["map"]
    assert rec.feature_names_["map"][-1] == "raw"
    table = rec.format_selection()
    assert "cv isotonic" in table and "marginal" in table
    report = rec.evaluate(setup.predict(test), test.labels)
    for kind in ("map", "marginal"):
        # held-out Brier no worse than the raw model's beyond noise
        assert report.get(kind, "calibrated").l2 <= report.get(kind, "raw").l2 + 0.01


def test_default_recalibrator_on_graphs():
    rng = np.random.default_rng(0)
    p = random_graphs(rng, 3, [6] * 240, topology="loopy", kind="potts", scale=1.5)
    pred = StructuredPrediction(p)
    y = pred.map_labels.copy()
    flip = rng.random(y.shape[0]) < 0.15
    y[flip] = (y[flip] + 1) % 3
    half = int(pred.item_offsets[120])
    rec = StructuredRecalibrator(forecaster=SMALL_KNN, random_state=0)
    rec.fit(pred.subset(np.arange(120)), y[:half])
    assert set(rec.selection_) == {"map", "marginal"}
    assert "raw" in rec.feature_names_["marginal"]
    out = rec.predict(pred.subset(np.arange(120, 240)), y[half:])
    assert ((out.forecast >= 0) & (out.forecast <= 1)).all()


def _two_population_world(n_words, seed):
    """Short words from a calibrated model, long words from one 4x over-confident.

    Isotonic regression on the raw probability cannot tell the populations apart; a
    forecaster that also sees the length (phi_mp1) can.
    """
    parts = [_overconfident_world(n_words // 2, seed, temperature=1.0, L=3),
             _overconfident_world(n_words // 2, seed + 100, temperature=4.0, L=8)]
    unary = np.concatenate([p.potentials.unary for p, _, _ in parts])
    offsets = np.r_[0, np.cumsum(np.concatenate([p.lengths for p, _, _ in parts]))]
    # each half keeps the transition matrix of its own temperature: one matrix per edge
    pairwise = np.concatenate([
        np.broadcast_to(p.potentials.pairwise, (p.potentials.n_edges,) + p.potentials.pairwise.shape)
        for p, _, _ in parts
    ])
    pot = ChainPotentials(unary, offsets, pairwise)
    return StructuredPrediction(pot), np.concatenate([y for _, y, _ in parts])


def test_auto_chooses_what_the_data_call_for():
    # a calibrated model: its raw probability is kept (or isotonic, within noise)
    pred, y, _ = _overconfident_world(400, seed=10, temperature=1.0)
    rec = StructuredRecalibrator(kinds=[MarginalEvent()], forecaster=SMALL_KNN, random_state=0).fit(pred, y)
    sel = rec.selection_["marginal"]
    assert sel["method"] in ("raw", "isotonic")
    assert sel["cv_brier"]["raw"] < sel["cv_brier"]["forecaster"] + 1e-3
    # an over-confident one: the raw probability loses clearly
    pred, y, _ = _overconfident_world(400, seed=11, temperature=3.0)
    rec.fit(pred, y)
    sel = rec.selection_["marginal"]
    assert sel["method"] != "raw"
    assert sel["cv_brier"]["raw"] > min(sel["cv_brier"]["isotonic"], sel["cv_brier"]["forecaster"]) + 0.02
    # two populations only the features can tell apart: the forecaster wins
    pred, y = _two_population_world(1200, seed=12)
    rec = StructuredRecalibrator(kinds=[MAPEvent()], features=["phi_mp1", "raw"],
                                 forecaster=SMALL_KNN, random_state=0).fit(pred, y)
    sel = rec.selection_["map"]
    assert sel["method"] == "forecaster"
    assert sel["cv_brier"]["forecaster"] < sel["cv_brier"]["isotonic"] - 0.005


def test_auto_rule_picks_the_candidate_that_is_truly_best():
    # a calibrated model (its raw marginals are the generating CRF's) on a large set: the
    # isotonic map's fitting noise costs more than the SE, and the raw probability is kept
    pred, y, _ = _overconfident_world(1500, seed=10, temperature=1.0)
    rec = StructuredRecalibrator(kinds=[MarginalEvent()], forecaster=SMALL_KNN, random_state=0,
                                 shift_check=False).fit(pred, y)
    sel = rec.selection_["marginal"]
    assert sel["method"] == "raw"
    assert sel["cv_brier"]["raw"] < sel["cv_brier"]["isotonic"] - sel["cv_brier_se"]["isotonic"]
    # one over-confident temperature: a monotone map of the raw probability undoes it
    pred, y, _ = _overconfident_world(400, seed=11, temperature=3.0)
    rec.fit(pred, y)
    sel = rec.selection_["marginal"]
    assert sel["method"] == "isotonic"
    assert sel["cv_brier"]["raw"] > sel["cv_brier"]["isotonic"] + 2 * sel["cv_brier_se"]["raw"]
    # two populations only the features tell apart: the forecaster, clearly
    pred, y = _two_population_world(1200, seed=12)
    rec = StructuredRecalibrator(kinds=[MAPEvent()], features=["phi_mp1", "raw"],
                                 forecaster=SMALL_KNN, random_state=0, shift_check=False).fit(pred, y)
    sel = rec.selection_["map"]
    assert sel["method"] == "forecaster"
    assert sel["cv_brier"]["forecaster"] < sel["cv_brier"]["isotonic"] - sel["cv_brier_se"]["isotonic"]


def test_auto_rule_tie_goes_to_the_simpler_candidate():
    # the forecaster sees only the raw probability, so it can know nothing isotonic
    # regression does not: the two estimate the same map. Here its CV score is lower by
    # less than one SE; the rule keeps isotonic, the plain lowest score would not.
    pred, y, _ = _overconfident_world(400, seed=10, temperature=3.0)
    kw = dict(kinds=[MAPEvent()], features=["raw"], forecaster=SMALL_KNN, random_state=0,
              shift_check=False, prior=0.0)
    sel = StructuredRecalibrator(**kw).fit(pred, y).selection_["map"]
    assert sel["method"] == "isotonic"
    diff = sel["cv_brier"]["forecaster"] - sel["cv_brier"]["isotonic"]
    assert -sel["cv_brier_se"]["forecaster"] < diff < 0
    plain = StructuredRecalibrator(n_se=0.0, **kw).fit(pred, y).selection_["map"]
    assert plain["method"] == "forecaster" and plain["cv_brier"] == sel["cv_brier"]
    # exact ties (identical held-out losses) go to isotonic, at any n_se
    rng = np.random.default_rng(0)
    items = np.repeat(np.arange(50), 3)
    loss = rng.random(150)
    for n_se in (0.0, 1.0):
        assert _one_se_choice({m: loss for m in METHODS}, items, n_se) == "isotonic"
    # the raw probability displaces the forecaster only if clearly better than it
    losses = {"raw": loss - 0.05, "isotonic": loss + 0.2, "forecaster": loss}
    assert _one_se_choice(losses, items, 1.0) == "raw"
    z = rng.standard_normal(150)
    losses["raw"] = loss - 1e-4 + 0.02 * (z - z.mean())  # better by 1e-4, SE ~0.002
    assert _one_se_choice(losses, items, 1.0) == "forecaster"
    with pytest.raises(ParameterError, match="`n_se`"):
        StructuredRecalibrator(n_se=-1.0).fit(pred, y)
    with pytest.raises(ParameterError, match="`n_se`"):
        StructuredRecalibrator(n_se=(1.0, 1.0, 1.0)).fit(pred, y)
    with pytest.raises(ParameterError, match="`n_se`"):
        StructuredRecalibrator(n_se=(1.0, -0.5)).fit(pred, y)


def test_auto_rule_margins_per_step():
    # the default asks the forecaster to win by 2 SE, the raw probability by 1 SE
    assert StructuredRecalibrator().n_se == (2.0, 1.0)
    rng = np.random.default_rng(1)
    items = np.repeat(np.arange(200), 2)
    loss = rng.random(400)
    z = rng.standard_normal(400)
    noise = z - z.mean()
    se = _clustered_se(0.05 * noise, items)
    default = StructuredRecalibrator().n_se
    for gap, first, both_1 in ((1.75, "isotonic", "forecaster"), (2.5, "forecaster", "forecaster")):
        losses = {"isotonic": loss, "forecaster": loss - gap * se + 0.05 * noise, "raw": loss + 0.3}
        assert _one_se_choice(losses, items, default) == first
        assert _one_se_choice(losses, items, 1.0) == both_1
    # the raw step uses the second margin: 1.25 SE better than isotonic is enough at 1.0
    losses = {"isotonic": loss, "forecaster": loss + 0.3, "raw": loss - 1.25 * se + 0.05 * noise}
    assert _one_se_choice(losses, items, default) == "raw"
    assert _one_se_choice(losses, items, (1.0, 1.5)) == "isotonic"


def test_auto_rule_starts_from_raw_on_small_kinds():
    from structcal.recalibration import SMALL_KIND_EVENTS

    rng = np.random.default_rng(2)
    default = StructuredRecalibrator().n_se

    def losses_for(n, iso_gap_in_se):
        items = np.arange(n)
        loss = rng.random(n)
        z = rng.standard_normal(n)
        noise = 0.05 * (z - z.mean())
        se = _clustered_se(noise, items)
        return items, {"raw": loss, "isotonic": loss - iso_gap_in_se * se + noise,
                       "forecaster": loss + 0.3}

    # isotonic better than raw by half a standard error: kept on a large kind, not on a small one
    items, losses = losses_for(SMALL_KIND_EVENTS, 0.5)
    assert _one_se_choice(losses, items, default) == "isotonic"
    items, losses = losses_for(SMALL_KIND_EVENTS - 1, 0.5)
    assert _one_se_choice(losses, items, default) == "raw"
    # clearly better (1.5 SE > n_se[1] = 1): isotonic replaces raw on a small kind too
    items, losses = losses_for(60, 1.5)
    assert _one_se_choice(losses, items, default) == "isotonic"
    # and the forecaster needs its own margin over the choice so far
    items, losses = losses_for(60, 0.0)
    z = rng.standard_normal(60)
    noise = 0.05 * (z - z.mean())
    se = _clustered_se(noise, items)
    losses["forecaster"] = losses["raw"] - 2.5 * se + noise
    assert _one_se_choice(losses, items, default) == "forecaster"
    losses["forecaster"] = losses["raw"] - 1.5 * se + noise
    assert _one_se_choice(losses, items, default) == "raw"


def test_small_kind_of_a_calibrated_model_keeps_raw():
    # 60 events whose raw probability is the truth, 20 draws: the default keeps it as it is
    # in at least 16 (18 measured; isotonic as the reference on small kinds too: 10)
    kept = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        p = rng.uniform(0.05, 0.95, size=60)
        y = (rng.random(60) < p).astype(np.int64)
        table = external_events(np.arange(60), raw=p, outcome=y)
        rec = StructuredRecalibrator(random_state=0).fit_events(table)
        kept += rec.selection_[table.kind_names[0]]["method"] == "raw"
    assert kept >= 16


def test_clustered_se_matches_a_direct_computation():
    rng = np.random.default_rng(1)
    items = np.repeat(np.arange(40), rng.integers(1, 6, size=40))
    d = rng.standard_normal(items.shape[0]) + np.repeat(rng.standard_normal(40), np.bincount(items))
    m = d.mean()
    G, N = 40, d.shape[0]
    resid = np.array([d[items == g].sum() - (items == g).sum() * m for g in range(G)])
    np.testing.assert_allclose(_clustered_se(d, items), np.sqrt(G / (G - 1) * (resid**2).sum()) / N)
    # one event per input: the usual SE of the mean (with the G / (G - 1) correction)
    one = rng.standard_normal(30)
    np.testing.assert_allclose(_clustered_se(one, np.arange(30)), one.std(ddof=1) / np.sqrt(30))
    assert _clustered_se(d, np.zeros(d.shape[0], dtype=int)) == 0.0


def test_cv_scores_match_a_direct_computation():
    pred, y, _ = _overconfident_world(300, seed=13)
    rec = StructuredRecalibrator(kinds=[MarginalEvent()], features=["phi_mg2", "raw"],
                                 forecaster=SMALL_KNN, cv=4, random_state=3,
                                 prior=0.0).fit(pred, y)
    t = rec.events(pred, y)
    r, o = t.raw, t.outcome
    sel = rec.selection_["marginal"]
    np.testing.assert_allclose(sel["cv_brier"]["raw"], np.mean((r - o) ** 2))
    # isotonic: one fit per fold of inputs, scored on the held-out inputs
    seed = int(np.random.default_rng(3).integers(0, 2**31 - 1))
    fold = _item_folds(t.item, 4, np.random.default_rng(seed))
    held = np.empty(t.n_events)
    for f in range(4):
        cal = IsotonicCalibration().fit(r[fold != f], o[fold != f])
        held[fold == f] = cal.predict_proba(r[fold == f])[:, 1]
    np.testing.assert_allclose(sel["cv_brier"]["isotonic"], np.mean((held - o) ** 2), rtol=1e-12)


def test_item_folds_keep_an_input_together():
    rng = np.random.default_rng(0)
    items = np.repeat(np.arange(50), rng.integers(1, 9, size=50))
    fold = _item_folds(items, 5, np.random.default_rng(1))
    for i in range(50):
        assert np.unique(fold[items == i]).shape[0] == 1
    per_fold = np.bincount([fold[items == i][0] for i in range(50)], minlength=5)
    assert per_fold.tolist() == [10] * 5
    np.testing.assert_array_equal(fold, _item_folds(items, 5, np.random.default_rng(1)))


def test_same_inputs_same_outputs():
    pred, y, _ = _overconfident_world(300, seed=14)
    test, y_test, _ = _overconfident_world(200, seed=15)
    outs = []
    for _ in range(2):
        rec = StructuredRecalibrator(method="auto", random_state=7).fit(pred, y)
        outs.append((rec.selection_, rec.predict(test).forecast, rec.shift_test(test).pvalue))
    assert outs[0][0] == outs[1][0]
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    np.testing.assert_array_equal(outs[0][2], outs[1][2])


def test_forced_methods():
    pred, y, _ = _overconfident_world(200, seed=16)
    test, _, _ = _overconfident_world(100, seed=17)
    raw = StructuredRecalibrator(method="raw", prior=0.0).fit(pred, y)
    out = raw.predict(test)
    np.testing.assert_array_equal(out.forecast, out.table.raw)
    assert raw.forecasters_ == {} and raw.selection_["map"]["cv_brier"] == {}
    iso = StructuredRecalibrator(method="isotonic", prior=0.0).fit(pred, y)
    t = iso.events(pred, y)
    m = t.kind == 1
    direct = IsotonicCalibration().fit(t.raw[m], t.outcome[m])
    out = iso.predict(test)
    np.testing.assert_allclose(out.for_kind("marginal"), direct.predict_proba(out.table.raw[out.table.kind == 1])[:, 1])
    mixed = StructuredRecalibrator(
        kinds=[MAPEvent(), Predicate(lambda lab: bool(lab[0] == 0), "first0")],
        method={"map": "raw", "first0": "forecaster"}, forecaster=SMALL_KNN,
    ).fit(pred, y)
    assert [s["method"] for s in mixed.selection_.values()] == ["raw", "forecaster"]
    # a predicate has no raw probability: auto leaves only the forecaster
    auto = StructuredRecalibrator(kinds=[Predicate(lambda lab: bool(lab[0] == 0), "first0")],
                                  forecaster=SMALL_KNN).fit(pred, y)
    assert auto.selection_["first0"] == {"method": "forecaster", "cv_brier": {}, "cv_brier_se": {},
                                         "n_events": 200, "n_items": 200, "n_groups": 200}
    with pytest.raises(ParameterError, match="method 'isotonic' needs the model's raw probability"):
        StructuredRecalibrator(kinds=[Predicate(lambda lab: True, "t")], method="isotonic").fit(pred, y)
    with pytest.raises(ParameterError, match="`method` must be one of"):
        StructuredRecalibrator(method="knn").fit(pred, y)
    with pytest.raises(ParameterError, match="not among"):
        StructuredRecalibrator(method={"map": "raw", "mapp": "raw", "marginal": "raw"}).fit(pred, y)
    with pytest.raises(ParameterError, match="`cv`"):
        StructuredRecalibrator(cv=1).fit(pred, y)


def test_shift_warning_on_shifted_batches_only():
    pred, y, _ = _overconfident_world(500, seed=20)
    rec = StructuredRecalibrator(forecaster=SMALL_KNN, random_state=0).fit(pred, y)
    # in distribution: fresh draws of the same world never warn
    for seed in range(21, 29):
        fresh, y_fresh, _ = _overconfident_world(400, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error", DistributionShiftWarning)
            rec.predict(fresh, y_fresh)
        assert not rec.shift_test(fresh).shifted
    # a model 3x less confident on the new inputs: the raw probabilities moved
    soft, _, _ = _overconfident_world(400, seed=30, temperature=1.0)
    with pytest.warns(DistributionShiftWarning, match=r"may not transfer.*structcal\.online"):
        rec.predict(soft)
    test = rec.shift_test(soft)
    assert isinstance(test, ShiftTest) and test.shifted
    flagged = test.flagged()
    assert ("marginal", "raw") in {(k, c) for k, c, _, _ in flagged}
    assert "*" in test.format()
    # longer inputs: phi_mp1 moved even though each position looks the same
    longer, _, _ = _overconfident_world(400, seed=31, L=8)
    assert ("map", "phi_mp1") in {(k, c) for k, c, _, _ in rec.shift_test(longer).flagged()}
    # the check can be turned off
    rec.set_params(shift_check=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DistributionShiftWarning)
        rec.predict(soft)


def _feature_world(n, seed, x_shift=0.0, raw_power=1.0):
    """One event per input: raw p ~ U(0, 1)**raw_power, a feature x, outcome ~ Bernoulli(p**2)."""
    rng = np.random.default_rng(seed)
    p = rng.random(n) ** raw_power
    x = rng.normal(x_shift, 1.0, n)
    y = rng.random(n) < p**2
    return external_events(np.arange(n), kind="e", raw=p, features={"x": x}, outcome=y)


def test_shift_fallback_takes_the_simplest_map_whose_input_did_not_shift(tmp_path):
    fit = _feature_world(600, seed=0)
    rec = StructuredRecalibrator(method="forecaster", forecaster=SMALL_KNN,
                                 shift_policy="fallback", random_state=0).fit_events(fit)
    iso = rec.fallback_maps_["e"]
    direct = IsotonicCalibration(prior=0.0).fit(fit.raw, fit.outcome)
    # only the feature moved: the forecaster falls back to isotonic regression on raw
    moved_x = _feature_world(400, seed=1, x_shift=3.0)
    with pytest.warns(DistributionShiftWarning, match=r"\['e'\] use isotonic regression on the raw"):
        out = rec.predict_events(moved_x)
    assert out.fallback == {"e": "isotonic"}
    want = np.clip(iso.predict_proba(moved_x.raw)[:, 1], *rec._bounds("e"))
    np.testing.assert_allclose(out.forecast, want, rtol=0, atol=1e-12)
    assert np.corrcoef(want, direct.predict_proba(moved_x.raw)[:, 1])[0, 1] > 0.99
    # the raw probability moved too: the raw probability
    moved_both = _feature_world(400, seed=2, x_shift=3.0, raw_power=3.0)
    with pytest.warns(DistributionShiftWarning, match=r"\['e'\] use the model's raw probability"):
        out = rec.predict_events(moved_both)
    assert out.fallback == {"e": "raw"}
    np.testing.assert_allclose(out.forecast, np.clip(moved_both.raw, *rec._bounds("e")))
    # nothing moved: the forecaster itself
    same = _feature_world(400, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DistributionShiftWarning)
        out = rec.predict_events(same)
    assert out.fallback == {}
    np.testing.assert_allclose(out.forecast, np.clip(
        rec.forecasters_["e"].predict_proba(np.column_stack([same.raw, same.columns("x")[:, 0]]))[:, 1],
        *rec._bounds("e")))
    # 'warn' keeps the forecaster on the shifted batch
    rec.set_params(shift_policy="warn")
    with pytest.warns(DistributionShiftWarning):
        assert rec.predict_events(moved_x).fallback == {}
    # a saved and loaded recalibrator falls back the same way; an isotonic kind has no
    # fallback map of its own (its one input is the raw probability)
    rec.set_params(shift_policy="fallback")
    from structcal import io

    io.save(rec, tmp_path / "rec")
    back = io.load(tmp_path / "rec")
    with pytest.warns(DistributionShiftWarning):
        again = back.predict_events(moved_x)
    assert again.fallback == {"e": "isotonic"}
    np.testing.assert_array_equal(again.forecast, want)
    assert StructuredRecalibrator(method="isotonic", random_state=0).fit_events(fit).fallback_maps_ == {}


def _covariate_world(n, seed, x_mean=0.0):
    """raw p ~ U(0, 1); the outcome's log-odds add 1.5 x to the raw's: P(y | raw) moves with
    the distribution of the feature x (a covariate shift for a map of raw alone)."""
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    x = rng.normal(x_mean, 1.0, n)
    z = np.log(p / (1 - p)) + 1.5 * x
    y = rng.random(n) < 1 / (1 + np.exp(-z))
    return external_events(np.arange(n), kind="e", raw=p, features={"x": x}, outcome=y), \
        1 / (1 + np.exp(-z))


def test_adapt_refits_an_isotonic_map_toward_a_batch_whose_features_shifted(tmp_path):
    """Every column a map reads counts: the isotonic map reads only raw, whose distribution
    does not move, but the outcome given raw does (through x). Weighted toward the batch,
    the refit map beats the fitted one and the raw probability on it."""
    fit, _ = _covariate_world(4000, seed=0)
    rec = StructuredRecalibrator(method="isotonic", shift_policy="adapt",
                                 random_state=0).fit_events(fit)
    batch, truth = _covariate_world(1500, seed=1, x_mean=1.0)
    with pytest.warns(DistributionShiftWarning, match="weighted toward this batch"):
        out = rec.predict_events(batch)
    assert out.shifted == ("e",) and out.fallback == {"e": "adapted"}
    info = out.adaptation["e"]
    assert info["map"] == "weighted isotonic" and 20 < info["effective_groups"] < 4000
    rec_warn = StructuredRecalibrator(method="isotonic", shift_policy="warn",
                                      random_state=0).fit_events(fit)
    with pytest.warns(DistributionShiftWarning):
        fixed = rec_warn.predict_events(batch).forecast
    y = batch.outcome.astype(float)
    brier = lambda f: float(np.mean((f - truth) ** 2))  # noqa: E731 (distance to the truth)
    assert brier(out.forecast) < 0.7 * brier(fixed)
    assert brier(out.forecast) < 0.6 * brier(np.clip(batch.raw, 0, 1))
    assert np.mean((out.forecast - y) ** 2) < np.mean((fixed - y) ** 2)
    # the weights are the density ratios flattened to ADAPT_WEIGHT_POWER: the plain ratios
    # (power 1) move further toward the batch, no weighting (power 0) is the fitted map
    forecasts = {}
    for power in (0.0, 1.0):
        r = StructuredRecalibrator(method="isotonic", shift_policy="adapt", random_state=0)
        r.ADAPT_WEIGHT_POWER = power
        with pytest.warns(DistributionShiftWarning):
            forecasts[power] = r.fit_events(fit).predict_events(batch).forecast
    np.testing.assert_allclose(forecasts[0.0], fixed, rtol=0, atol=1e-12)
    assert brier(forecasts[1.0]) < brier(out.forecast) < brier(fixed)
    # saved and loaded: the same adaptation
    from structcal import io

    io.save(rec, tmp_path / "rec")
    with pytest.warns(DistributionShiftWarning):
        again = io.load(tmp_path / "rec").predict_events(batch)
    np.testing.assert_array_equal(again.forecast, out.forecast)
    # a batch far outside the recalibration data: the weights collapse, the kind falls
    # back to the raw probability and says why
    far, _ = _covariate_world(1500, seed=2, x_mean=6.0)
    with pytest.warns(DistributionShiftWarning, match="collapsed"):
        out = rec.predict_events(far)
    assert out.fallback == {"e": "raw"} and "collapsed" in out.adaptation["e"]["reason"]


def test_adapt_where_the_weights_collapse_falls_back_to_the_simplest_map_whose_input_did_not_shift():
    """Under 'adapt', a forecaster whose batch lies far outside the recalibration features
    (the weights collapse) but whose raw probability did not move falls back to isotonic
    regression on the raw probability, as under 'fallback', not to the raw probability."""
    fit = _feature_world(600, seed=0)
    rec = StructuredRecalibrator(method="forecaster", forecaster=SMALL_KNN,
                                 random_state=0).fit_events(fit)
    assert rec.shift_policy == "adapt"  # the default
    far = _feature_world(400, seed=1, x_shift=8.0)
    with pytest.warns(DistributionShiftWarning, match="collapsed"):
        out = rec.predict_events(far)
    assert out.fallback == {"e": "isotonic"}
    assert out.adaptation["e"]["map"] == "isotonic"
    assert "collapsed" in out.adaptation["e"]["reason"]
    want = np.clip(rec.fallback_maps_["e"].predict_proba(far.raw)[:, 1], *rec._bounds("e"))
    np.testing.assert_allclose(out.forecast, want, rtol=0, atol=1e-12)
    # the raw probability moved too: the raw probability
    both = _feature_world(400, seed=2, x_shift=8.0, raw_power=3.0)
    with pytest.warns(DistributionShiftWarning):
        out = rec.predict_events(both)
    assert out.fallback == {"e": "raw"}
    np.testing.assert_allclose(out.forecast, np.clip(both.raw, *rec._bounds("e")))


@pytest.mark.parametrize("n, m", [(40, 60), (132, 150), (900, 700)])
def test_shift_test_p_values_are_scipy_ks_2samp(n, m):
    # the column-batched KS test gives scipy's statistic and p-value (exact when n m <= 10^4)
    from scipy.stats import ks_2samp

    from structcal.recalibration import _ks_pvalues

    rng = np.random.default_rng(n)
    ref = np.round(rng.standard_normal((n, 5)), 1)
    new = np.round(rng.standard_normal((m, 5)) * np.array([1, 1.3, 1, 1, 1]) + [0, 0, 1.5, 0, 0], 1)
    new[:, 3] = np.round(new[:, 3])
    ref[:, 4] = new[:, 4] = 2.0  # constant in both: p = 1
    stat, p = _ks_pvalues(ref, new)
    method = "exact" if n * m <= 10_000 else "asymp"
    for c in range(4):
        r = ks_2samp(ref[:, c], new[:, c], method=method)
        np.testing.assert_allclose([stat[c], p[c]], [r.statistic, r.pvalue], rtol=1e-12, atol=1e-300)
    assert (stat[4], p[4]) == (0.0, 1.0)
    assert p[2] < 1e-3 < p[0]  # the shifted column


def _near_duplicate_world(n_groups, copies, seed):
    """Items in groups of near-copies whose MAP is right or wrong by group, not by score."""
    rng = np.random.default_rng(seed)
    K, T = 3, 4
    base = rng.normal(scale=2.0, size=(n_groups, T, K))
    right = rng.random(n_groups) < 0.5
    scores, labels, groups = [], [], []
    for g in range(n_groups):
        for _ in range(copies):
            s = base[g] + rng.normal(scale=1e-3, size=(T, K))
            lab = s.argmax(axis=1)
            if not right[g]:
                lab = lab.copy()
                lab[0] = (lab[0] + 1) % K
            scores.append(s)
            labels.append(lab)
            groups.append(g)
    pot = ChainPotentials.from_scores(np.concatenate(scores), lengths=[T] * len(scores),
                                      transitions=np.zeros((K, K)))
    return StructuredPrediction(pot), labels, np.asarray(groups)


def test_grouped_cv_chooses_differently_on_near_duplicates():
    # near-copies of an item share their outcome: with folds of items, the k-NN forecaster
    # finds an item's copies in the other folds and "wins" the CV; with folds of groups it
    # cannot, and the choice falls back on the raw probability's monotone map
    pred, y, groups = _near_duplicate_world(60, 6, seed=1)
    knn = KNNRegionForecaster(k_grid=[5, 10, 20])
    kw = dict(kinds=[MAPEvent()], features=["phi_mp1", "phi_mg1"], forecaster=knn,
              random_state=0, shift_check=False)
    by_item = StructuredRecalibrator(**kw).fit(pred, y)
    by_group = StructuredRecalibrator(**kw).fit(pred, y, groups=groups)
    assert by_item.selection_["map"]["method"] == "forecaster"
    assert by_group.selection_["map"]["method"] != "forecaster"
    assert by_group.selection_["map"]["n_groups"] == 60 and by_item.selection_["map"]["n_groups"] == 360
    # on new groups, the grouped choice is the better one
    new, y_new, g_new = _near_duplicate_world(60, 6, seed=2)
    brier = lambda r: float(np.mean((r.forecast - r.table.outcome) ** 2))  # noqa: E731
    assert brier(by_group.predict(new, y_new)) < brier(by_item.predict(new, y_new)) - 0.02


def test_density_ratio_weights_do_not_depend_on_the_thread_count(monkeypatch):
    """Below ONE_THREAD_ROWS the classifiers run on one OpenMP thread: the same weights."""
    import structcal.shift as shift

    rng = np.random.default_rng(4)
    ref, new = rng.normal(size=(900, 3)), rng.normal(size=(500, 3)) + [0.5, 0.0, -0.3]
    groups = np.arange(900) // 3
    monkeypatch.setattr(shift, "ONE_THREAD_ROWS", 0)
    threads = shift.density_ratio(ref, new, groups)
    monkeypatch.setattr(shift, "ONE_THREAD_ROWS", 10**9)
    one = shift.density_ratio(ref, new, groups)
    np.testing.assert_array_equal(threads.weights, one.weights)
    assert (threads.auc, threads.effective_sample_size) == (one.auc, one.effective_sample_size)
    assert threads.auc > 0.6  # a real shift: the weights are not all 1
    assert threads.weights.std() > 0.1
