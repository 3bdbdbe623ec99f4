"""StructuredPrediction, events and features on graphs, checked against brute force."""

import warnings

import numpy as np
import pytest

from structcal import GraphPotentials, StructuredPrediction, StructuredRecalibrator
from structcal.events import AnyLabel, LabelAt, MAPEvent, MarginalEvent, build_events
from structcal.exceptions import ConvergenceWarning
from structcal.inference.exact import exact_graph
from structcal.potentials import ChainPotentials

from ._graph_problems import random_graphs

SIZES = [1, 2, 3, 5, 6]


def _exact(p):
    return [exact_graph(p, g) for g in range(p.n_graphs)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["shared", "per_edge", "potts"])
def test_forests_with_bp_are_exact(seed, kind):
    rng = np.random.default_rng(seed)
    p = random_graphs(rng, 3, SIZES, topology="forest", kind=kind, scale=2.0)
    pred = StructuredPrediction(p, marginal_method="belief_propagation")
    assert pred.exact
    ex = _exact(p)
    np.testing.assert_allclose(pred.marginals, np.concatenate([e.marginals for e in ex]), atol=1e-9)
    np.testing.assert_allclose(pred.log_partition, [e.log_partition for e in ex], atol=1e-8)
    best = np.array([e.scores.max() for e in ex])
    np.testing.assert_allclose(pred.map_score, best, atol=1e-9)
    np.testing.assert_allclose(pred.map_probability, np.exp(best - [e.log_partition for e in ex]), atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("topology", ["loopy", "complete"])
def test_pseudo_marginals_and_second_best_match_brute_force(seed, topology):
    rng = np.random.default_rng(seed)
    K = 3
    p = random_graphs(rng, K, [2, 3, 4], topology=topology, kind="per_edge", scale=1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pred = StructuredPrediction(p)
        assert not pred.exact
        labels = pred.map_labels
        pm = pred.pseudo_marginals
        top2 = pred.top2_scores
    for g, e in enumerate(_exact(p)):
        lo, hi = p.offsets[g], p.offsets[g + 1]
        mine = labels[lo:hi]
        score_of = {tuple(lab): s for lab, s in zip(e.labelings, e.scores)}
        assert np.isclose(pred.map_score[g], score_of[tuple(mine)])
        # p(y_j | MAP neighbours) by enumerating y_j with the rest at the MAP
        for j in range(hi - lo):
            s = []
            for a in range(K):
                y = mine.copy()
                y[j] = a
                s.append(score_of[tuple(y)])
            s = np.array(s)
            np.testing.assert_allclose(pm[lo + j], np.exp(s - np.logaddexp.reduce(s)), atol=1e-10)
        # second best = the best labeling at Hamming distance one from the MAP
        one_away = [
            sc for lab, sc in zip(e.labelings, e.scores) if np.sum(np.asarray(lab) != mine) == 1
        ]
        assert np.isclose(top2[g, 1], max(one_away))


def test_map_on_small_loopy_graphs_is_often_exact():
    rng = np.random.default_rng(7)
    p = random_graphs(rng, 3, [5] * 20, topology="loopy", kind="shared", scale=1.0)
    pred = StructuredPrediction(p)
    best = np.array([e.scores.max() for e in _exact(p)])
    assert np.all(pred.map_score <= best + 1e-9)
    assert np.mean(np.isclose(pred.map_score, best)) >= 0.9


def test_neighbors_are_the_graph_adjacency():
    rng = np.random.default_rng(1)
    p = random_graphs(rng, 2, [1, 4, 6], topology="loopy", kind="potts")
    indptr, indices = StructuredPrediction(p).neighbors()
    for i in range(p.n_nodes):
        mine = set(indices[indptr[i] : indptr[i + 1]].tolist())
        want = set(p.edges[p.edges[:, 0] == i, 1].tolist()) | set(p.edges[p.edges[:, 1] == i, 0].tolist())
        assert mine == want


@pytest.mark.parametrize("seed", range(3))
def test_graph_features_on_chain_edges_equal_the_chain_features(seed):
    rng = np.random.default_rng(seed)
    lengths = [1, 3, 4, 6]
    unary = [rng.normal(scale=2.0, size=(n, 4)) for n in lengths]
    trans = rng.normal(size=(4, 4))
    chain = ChainPotentials.from_list(unary, trans)
    graph = GraphPotentials.from_chain(chain)
    y = np.concatenate([rng.integers(0, 4, size=n) for n in lengths])
    kinds = [MAPEvent(), MarginalEvent(), LabelAt(0, 1)]
    features = ["phi_mp1", "phi_mg1", "phi_mp4", "phi_mp5", "phi_mp6", "phi_mp7", "phi_mg2", "phi_mg3", "raw"]
    tc = build_events(StructuredPrediction(chain), kinds, y_true=y, features=features)
    tg = build_events(
        StructuredPrediction(graph, marginal_method="belief_propagation"), kinds, y_true=y,
        features=features,
    )
    assert tc.feature_names == tg.feature_names
    np.testing.assert_allclose(tg.X, tc.X, atol=1e-9)
    np.testing.assert_array_equal(tg.outcome, tc.outcome)
    np.testing.assert_allclose(tg.raw, tc.raw, atol=1e-9)


def test_any_label_on_graphs():
    rng = np.random.default_rng(3)
    # no coupling: nodes are independent, so the product formula is exact
    p = random_graphs(rng, 3, [1, 3, 4], topology="loopy", kind="potts", scale=0.0)
    p = p.with_unary(rng.normal(size=(p.n_nodes, 3)))
    pred = StructuredPrediction(p)
    t = build_events(pred, [AnyLabel(2)], features=["raw"])
    want = [
        sum(np.exp(s - e.log_partition) for lab, s in zip(e.labelings, e.scores) if 2 in lab)
        for e in _exact(p)
    ]
    np.testing.assert_allclose(t.raw, want, atol=1e-6)
    # with coupling: 1 - prod(1 - q) of the mean-field marginals, in [0, 1]
    p = random_graphs(rng, 3, [3, 5], topology="loopy", kind="shared", scale=2.0)
    pred = StructuredPrediction(p)
    t = build_events(pred, [AnyLabel(0)], features=["raw", "map_in_event"])
    q = pred.marginals[:, 0]
    want = [1 - np.prod(1 - q[p.offsets[g] : p.offsets[g + 1]]) for g in range(2)]
    np.testing.assert_allclose(t.raw, want, atol=1e-12)
    has = [0 in pred.map_labels[p.offsets[g] : p.offsets[g + 1]] for g in range(2)]
    np.testing.assert_array_equal(t.columns(["map_in_event"])[:, 0], has)


def test_graph_options_and_bad_input():
    rng = np.random.default_rng(0)
    p = random_graphs(rng, 2, [3], topology="loopy", kind="potts")
    with pytest.raises(ValueError, match="marginal_method"):
        StructuredPrediction(p, marginal_method="exact")
    with pytest.raises(ValueError, match="map_method"):
        StructuredPrediction(p, map_method="best")
    with pytest.raises(TypeError):
        StructuredPrediction(p, beam=3)
    pred = StructuredPrediction(p, marginal_method="belief_propagation", max_iter=50, tol=1e-8)
    sub = pred.subset([0])
    assert sub._options == pred._options
    with pytest.raises(ValueError):
        build_events(pred, [MAPEvent()], y_true=np.zeros(2, np.int64), features=["phi_mp1"])


def test_recalibration_on_overconfident_graphs_improves_l2():
    # labels drawn from a weakly coupled model; the predictor's potentials are 4x too sharp
    rng = np.random.default_rng(0)
    true = random_graphs(rng, 3, [8] * 300, topology="loopy", kind="potts", scale=0.6)
    y = np.concatenate([
        e.labelings[rng.choice(len(e.scores), p=np.exp(e.scores - e.log_partition))]
        for e in _exact(true)
    ])
    sharp = true.with_unary(4.0 * true.unary)
    pred = StructuredPrediction(sharp)
    half = int(pred.item_offsets[150])
    rec = StructuredRecalibrator(
        kinds=[MAPEvent(), MarginalEvent()], features=["phi_mp3", "phi_mg1", "phi_mp7", "phi_mg2"]
    ).fit(pred.subset(np.arange(150)), y[:half])
    report = rec.evaluate(pred.subset(np.arange(150, 300)), y[half:])
    for group in ("map", "marginal"):
        raw, cal = report.get(group, "raw"), report.get(group, "calibrated")
        assert cal.l2 < raw.l2 - 0.01
        assert cal.calibration_error < raw.calibration_error


def test_unknown_kind_names_are_errors():
    rng = np.random.default_rng(0)
    p = random_graphs(rng, 2, [3, 4], topology="loopy", kind="potts")
    pred = StructuredPrediction(p)
    with pytest.raises(ValueError, match="not in `kinds`"):
        build_events(pred, [MAPEvent()], features={"map": ["phi_mp1"], "marginl": ["phi_mg2"]})
    p = random_graphs(rng, 2, [2] * 40, topology="tree", kind="potts")
    pred = StructuredPrediction(p)
    y = pred.map_labels.copy()
    y[: p.n_nodes // 2] = 1 - y[: p.n_nodes // 2]  # half the graphs wrong
    rec = StructuredRecalibrator(kinds=[MAPEvent()], features=["phi_mp1", "phi_mp3"])
    out = rec.fit(pred, y).predict(pred)
    assert out.for_kind("map").shape == (40,)
    with pytest.raises(ValueError, match="no event kind 'marginal'"):
        out.for_kind("marginal")
