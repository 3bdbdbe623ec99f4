"""Graph inference against brute-force enumeration, the chain routines and invariants."""

import ast
import inspect
import re
import warnings

import numba
import numpy as np
import pytest
from scipy.special import softmax

from structcal import InfeasibleError, ParameterError
from structcal.exceptions import ConvergenceWarning, ParameterTypeError
from structcal.inference import chain as chain_api
from structcal.inference import graph as G
from structcal.inference import infer, pseudo_marginals, score_labelings
from structcal.inference.exact import exact_graph
from structcal.potentials import GraphPotentials

from ._graph_problems import random_graphs
from ._problems import random_chains

KINDS = ("shared", "typed", "per_edge", "potts")


def _batch(seed, K, topology, kind, scale=1.0, neginf=0.0, sizes=None):
    rng = np.random.default_rng(seed)
    if sizes is None:
        sizes = rng.integers(1, 7, size=4)
        if K >= 3:
            sizes = np.minimum(sizes, 5)
    return random_graphs(rng, K, sizes, topology=topology, kind=kind, scale=scale, neginf=neginf)


def _tol(scale):
    return dict(rtol=1e-9, atol=1e-9 * max(1.0, scale))


def _local(p, g, values):
    return values[p.offsets[g] : p.offsets[g + 1]]


# ---------------------------------------------------------------------------- exact on forests

FOREST_CASES = [
    (K, topology, kind, scale, neginf, seed)
    for K in (2, 3)
    for topology in ("tree", "forest")
    for kind in KINDS
    for scale, neginf in ((1.0, 0.0), (30.0, 0.25), (1e4, 0.0))
    for seed in range(2)
    if not (K == 3 and seed == 1)
]


@pytest.mark.parametrize("K,topology,kind,scale,neginf,seed", FOREST_CASES)
def test_bp_is_exact_on_trees_and_forests(K, topology, kind, scale, neginf, seed):
    p = _batch(seed, K, topology, kind, scale, neginf)
    assert p.is_forest.all()
    r = G.belief_propagation(p, edge_marginals=True, log_partition=True)
    mp = G.max_product(p)
    assert r.converged.all() and (r.n_iter == 1).all()
    for g in range(p.n_graphs):
        ex = exact_graph(p, g)
        np.testing.assert_allclose(_local(p, g, r.marginals), ex.marginals, atol=1e-9)
        e0, e1 = p.edge_offsets[g], p.edge_offsets[g + 1]
        np.testing.assert_allclose(r.edge_marginals[e0:e1], ex.edge_marginals, atol=1e-9)
        np.testing.assert_allclose(r.log_partition[g], ex.log_partition, **_tol(scale))
        np.testing.assert_allclose(mp.map_score[g], ex.map_score, **_tol(scale))
    np.testing.assert_allclose(score_labelings(p, mp.map_labels), mp.map_score, **_tol(scale))
    assert np.isfinite(r.marginals).all() and np.isfinite(r.log_partition).all()
    # MAP inference (TRW-S + ICM) is exact on forests too
    m = G.map_inference(p)
    np.testing.assert_allclose(m.map_score, mp.map_score, **_tol(scale))


@pytest.mark.parametrize("seed", range(3))
def test_graph_routines_on_chain_edges_equal_chain_routines(seed):
    rng = np.random.default_rng(seed)
    for shared in (True, False):
        c = random_chains(rng, 3, rng.integers(0, 7, size=5), shared=shared, scale=2.0)
        p = GraphPotentials.from_chain(c)
        assert p.is_forest.all() and p.n_edges == c.n_edges
        fb = chain_api.forward_backward(c, edge_marginals=True)
        vit = chain_api.viterbi(c)
        r = G.belief_propagation(p, edge_marginals=True, log_partition=True)
        np.testing.assert_allclose(r.marginals, fb.marginals, atol=1e-10)
        np.testing.assert_allclose(r.edge_marginals, fb.edge_marginals, atol=1e-10)
        np.testing.assert_allclose(r.log_partition, fb.log_partition, atol=1e-9)
        gi = infer(p)
        np.testing.assert_allclose(gi.map_score, vit.map_score, atol=1e-10)
        np.testing.assert_array_equal(G.max_product(p).map_labels, vit.map_labels)
        y = vit.map_labels
        np.testing.assert_allclose(score_labelings(p, y), score_labelings(c, y), atol=1e-12)
        np.testing.assert_allclose(pseudo_marginals(p, y), pseudo_marginals(c, y), atol=1e-12)


def test_reversing_an_edge_and_transposing_its_matrix_changes_nothing(rng):
    p = _batch(3, 3, "loopy", "per_edge", sizes=[5, 4])
    flip = rng.random(p.n_edges) < 0.5
    edges = np.where(flip[:, None], p.edges[:, ::-1], p.edges)
    pw = np.where(flip[:, None, None], p.pairwise.transpose(0, 2, 1), p.pairwise)
    q = GraphPotentials(p.unary, p.offsets, edges, p.edge_offsets, pw)
    for fn in (
        lambda x: G.belief_propagation(x, edge_marginals=False).marginals,
        lambda x: G.mean_field(x).marginals,
        lambda x: G.pseudo_marginals(x, np.zeros(x.n_nodes, np.int64)),
    ):
        np.testing.assert_allclose(fn(p), fn(q), atol=1e-10)
    np.testing.assert_allclose(G.map_inference(p).map_score, G.map_inference(q).map_score)


# ---------------------------------------------------------------------------- loopy graphs

#: Stated accuracy on small loopy graphs (6-7 nodes, 3 states, a spanning tree plus a
#: third of the other pairs as edges) with N(0, 0.5^2) potentials. Measured over the 12
#: graphs of each kind of pairwise potentials below (worst kind): node-marginal error of
#: loopy BP at most 0.147, 0.012 on average (per node, largest over states); of mean field
#: at most 0.57, 0.094 on average (mean field is over-confident); Bethe log-partition
#: within 0.169, 0.033 on average; the mean-field bound is never above the true
#: log-partition. The bounds below leave some room above those measurements.
BP_MAX_ERROR, BP_MEAN_ERROR = 0.2, 0.02
MF_MAX_ERROR, MF_MEAN_ERROR = 0.65, 0.12
LOGZ_MAX_ERROR, LOGZ_MEAN_ERROR = 0.25, 0.05


@pytest.mark.parametrize("kind", KINDS)
def test_loopy_methods_are_close_to_brute_force(kind):
    bp_err, mf_err, lz_err = [], [], []
    for seed in range(4):
        p = _batch(seed, 3, "loopy", kind, scale=0.5, sizes=[6, 7, 6])
        assert not p.is_forest.any()
        bp = G.belief_propagation(p, log_partition=True, tol=1e-10, max_iter=500)
        mf = G.mean_field(p, log_partition=True, tol=1e-10, max_iter=500)
        sync = G.mean_field(p, schedule="synchronous", damping=0.5, tol=1e-10, max_iter=2000)
        assert bp.converged.all() and mf.converged.all() and sync.converged.all()
        exact = [exact_graph(p, g) for g in range(p.n_graphs)]
        ex_marg = np.concatenate([ex.marginals for ex in exact])
        ex_logz = np.array([ex.log_partition for ex in exact])
        bp_err.append(np.abs(bp.marginals - ex_marg).max(axis=1))
        mf_err.append(np.abs(mf.marginals - ex_marg).max(axis=1))
        lz_err.append(np.abs(bp.log_partition - ex_logz))
        assert (mf.log_partition <= ex_logz + 1e-9).all()
        # the synchronous and sequential fixed points solve the same mean-field equations
        em = p.edge_matrices()
        for r in (mf, sync):
            q = r.marginals
            pf = np.zeros_like(q)
            np.add.at(pf, p.edges[:, 0], np.einsum("eab,eb->ea", em, q[p.edges[:, 1]]))
            np.add.at(pf, p.edges[:, 1], np.einsum("eab,ea->eb", em, q[p.edges[:, 0]]))
            np.testing.assert_allclose(q, softmax(p.unary + pf, axis=1), atol=1e-7)
    bp_err, mf_err, lz_err = map(np.concatenate, (bp_err, mf_err, lz_err))
    assert bp_err.max() < BP_MAX_ERROR and bp_err.mean() < BP_MEAN_ERROR
    assert mf_err.max() < MF_MAX_ERROR and mf_err.mean() < MF_MEAN_ERROR
    assert lz_err.max() < LOGZ_MAX_ERROR and lz_err.mean() < LOGZ_MEAN_ERROR


def test_map_inference_finds_the_optimum_on_most_small_loopy_graphs():
    found = {"trws": 0, "max_product": 0}
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for seed in range(12):
            for kind in KINDS:
                p = _batch(100 + seed, 3, "loopy", kind, scale=1.0, sizes=[6, 7])
                for g in range(p.n_graphs):
                    ex = exact_graph(p, g).map_score
                    n += 1
                    for method in found:
                        r = G.map_inference(p, method=method)
                        assert r.map_score[g] <= ex + 1e-9
                        found[method] += bool(r.map_score[g] >= ex - 1e-9)
    # measured: TRW-S + ICM finds the exact optimum on about 95% of such graphs
    assert found["trws"] >= 0.85 * n
    assert found["trws"] >= found["max_product"] - 2


@pytest.mark.parametrize("kind", KINDS)
def test_mean_field_without_pairwise_is_independent_softmax(kind, rng):
    p = _batch(5, 4, "loopy", kind, scale=3.0, sizes=[5, 1, 0, 6])
    K = p.n_states
    if kind == "potts":
        z = GraphPotentials(p.unary, p.offsets, p.edges, p.edge_offsets, potts=0.0)
    elif kind == "shared":
        z = GraphPotentials(p.unary, p.offsets, p.edges, p.edge_offsets, np.zeros((K, K)))
    else:
        z = GraphPotentials(
            p.unary, p.offsets, p.edges, p.edge_offsets, np.zeros((p.n_edges, K, K))
        )
    for schedule in ("sequential", "synchronous"):
        r = G.mean_field(z, schedule=schedule, log_partition=True)
        np.testing.assert_allclose(r.marginals, softmax(p.unary, axis=1), atol=1e-12)
        assert (r.n_iter == 1).all() and r.converged.all()
        logz = [
            np.sum(np.log(np.exp(_local(z, g, z.unary)).sum(axis=1))) for g in range(z.n_graphs)
        ]
        np.testing.assert_allclose(r.log_partition, logz, atol=1e-10)
    np.testing.assert_allclose(
        G.belief_propagation(z).marginals, softmax(p.unary, axis=1), atol=1e-12
    )


# ---------------------------------------------------------------------------- MAP helpers


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_icm_never_lowers_the_score_and_stops_at_a_local_optimum(kind, seed):
    rng = np.random.default_rng(seed)
    p = _batch(seed, 4, "loopy", kind, scale=2.0, sizes=[8, 5, 1, 0, 7])
    for _ in range(5):
        start = rng.integers(0, p.n_states, size=p.n_nodes)
        r = G.icm(p, start)
        assert r.converged.all()
        assert (r.map_score >= score_labelings(p, start) - 1e-12).all()
        sb = G.second_best(p, r.map_labels, r.map_score)
        assert (sb.margin >= 0).all()  # no single change improves a local optimum


@pytest.mark.parametrize("kind", KINDS)
def test_pseudo_marginals_and_second_best_match_enumeration(kind, rng):
    p = _batch(7, 3, "loopy", kind, scale=2.0, sizes=[5, 4, 1])
    y = rng.integers(0, 3, size=p.n_nodes)
    pm = G.pseudo_marginals(p, y)
    sb = G.second_best(p, y)
    base = score_labelings(p, y)
    best = np.full(p.n_graphs, -np.inf)
    for i in range(p.n_nodes):
        g = int(np.searchsorted(p.offsets, i, side="right") - 1)
        scores = []
        for a in range(3):
            z = y.copy()
            z[i] = a
            scores.append(score_labelings(p, z)[g])
            if a != y[i]:
                best[g] = max(best[g], scores[-1])
        np.testing.assert_allclose(pm[i], softmax(scores), atol=1e-12)
    np.testing.assert_allclose(sb.score, best, atol=1e-10)
    np.testing.assert_allclose(score_labelings(p, sb.labels), sb.score, atol=1e-10)
    np.testing.assert_allclose(sb.margin, base - best, atol=1e-10)
    assert np.count_nonzero(sb.labels != y) == p.n_graphs


def test_second_best_without_alternatives():
    p = GraphPotentials.from_list([np.zeros((2, 1)), np.zeros((0, 1))], [[(0, 1)], []], potts=1.0)
    sb = G.second_best(p, np.zeros(2, np.int64))
    assert (
        sb.node.tolist() == [-1, -1] and np.isneginf(sb.score).all() and np.isinf(sb.margin).all()
    )


# ---------------------------------------------------------------------------- structure & numerics


def test_isolated_nodes_empty_and_disconnected_graphs():
    u = np.log([[0.2, 0.8], [0.5, 0.5], [0.9, 0.1], [0.3, 0.7]])
    p = GraphPotentials.from_list(
        [u, np.zeros((0, 2)), u[:2]], [[(0, 1)], [], []], potts=np.log(4.0)
    )
    assert p.is_forest.tolist() == [True, True, True]
    r = infer(p)
    np.testing.assert_allclose(r.marginals[2:4], softmax(u[2:4], axis=1))  # isolated nodes
    np.testing.assert_allclose(r.marginals[4:], softmax(u[:2], axis=1))
    assert r.map_labels[2:].tolist() == [0, 1, 1, 0]
    assert r.map_score[1] == 0.0
    ex = exact_graph(p, 0)
    np.testing.assert_allclose(r.marginals[:4], ex.marginals, atol=1e-12)
    for q in (G.mean_field(p), G.belief_propagation(p, log_partition=True), G.map_inference(p)):
        assert q.marginals is None or q.marginals.shape == (6, 2)
    assert G.belief_propagation(p, log_partition=True).log_partition[1] == 0.0
    # a batch of empty graphs only
    e = GraphPotentials.from_list([np.zeros((0, 3))], [[]], np.zeros((3, 3)))
    assert infer(e).marginals.shape == (0, 3) and infer(e).map_score.tolist() == [0.0]


def test_extreme_potentials_on_loopy_graphs_are_finite_and_right():
    rng = np.random.default_rng(0)
    p = _batch(1, 3, "loopy", "per_edge", scale=1e4, sizes=[6, 5])
    for r in (G.belief_propagation(p, warn=False), G.mean_field(p, warn=False)):
        assert np.isfinite(r.marginals).all()
        np.testing.assert_allclose(r.marginals.sum(axis=1), 1.0)
    for g in range(p.n_graphs):
        ex = exact_graph(p, g)
        # at this scale the distribution is a point mass on the MAP labeling
        mp = G.map_inference(p, warn=False)
        np.testing.assert_allclose(mp.map_score[g], ex.map_score, rtol=1e-12)
        bp = G.belief_propagation(p, warn=False)
        assert (_local(p, g, bp.marginals).argmax(axis=1) == ex.labelings[0]).all()
    pm = G.pseudo_marginals(p, rng.integers(0, 3, size=p.n_nodes))
    assert np.isfinite(pm).all()


def test_results_are_deterministic_and_independent_of_threads():
    p = _batch(11, 4, "loopy", "typed", scale=1.0, sizes=[9] * 40)
    runs = {}
    old = numba.get_num_threads()
    try:
        for threads in (1, old):
            numba.set_num_threads(threads)
            for _ in range(2):
                out = (
                    G.mean_field(p).marginals,
                    G.belief_propagation(p).marginals,
                    G.map_inference(p).map_labels,
                    G.mean_field(
                        p, schedule="synchronous", damping=0.5, max_iter=20, warn=False
                    ).marginals,
                )
                runs.setdefault("ref", out)
                for a, b in zip(out, runs["ref"]):
                    np.testing.assert_array_equal(a, b)
    finally:
        numba.set_num_threads(old)


def test_forbidden_labels_are_respected():
    # node 0 may not take label 1; the Potts weight -inf forces neighbours to differ
    u = np.array([[0.0, -np.inf], [0.0, 0.0], [0.0, 0.0]])
    p = GraphPotentials.from_list([u], [[(0, 1), (1, 2)]], potts=-np.inf)
    ex = exact_graph(p, 0)
    r = G.belief_propagation(p)
    np.testing.assert_allclose(r.marginals, ex.marginals, atol=1e-12)
    assert G.map_inference(p).map_labels.tolist() == [0, 1, 0]
    with pytest.raises(InfeasibleError, match="node 0"):
        G.pseudo_marginals(p, [0, 0, 0])


def test_convergence_is_reported_and_warned():
    p = _batch(2, 3, "loopy", "shared", scale=2.0, sizes=[7, 7])
    with pytest.warns(ConvergenceWarning, match="mean field"):
        r = G.mean_field(p, tol=0.0, max_iter=3)
    assert (r.n_iter == 3).all() and not r.converged.any() and (r.delta > 0).all()
    with pytest.warns(ConvergenceWarning, match="belief propagation"):
        G.belief_propagation(p, tol=0.0, max_iter=2)
    r = G.mean_field(p, tol=0.0, max_iter=3, warn=False)  # no warning when asked
    assert r.method == "mean_field_sequential"


# ---------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors():
    p = GraphPotentials.from_list([np.zeros((3, 2))], [[(0, 1), (1, 2)]], np.zeros((2, 2)))
    with pytest.raises(
        ParameterError, match=r"`labels` must have one label per node \(n_nodes=3\); got length 2"
    ):
        score_labelings(p, [0, 1])
    with pytest.raises(ParameterError, match=r"`labels\[0\]` must have the graph's 3 nodes"):
        G.pseudo_marginals(p, [np.array([0, 1])])
    with pytest.raises(ParameterError, match="`labels` entries must be < 2"):
        G.icm(p, [0, 1, 2])
    with pytest.raises(ParameterTypeError, match="GraphPotentials"):
        G.mean_field(np.zeros((3, 2)))
    with pytest.raises(ParameterTypeError, match="ChainPotentials or GraphPotentials"):
        infer(np.zeros((3, 2)))
    for kw, msg in [
        (dict(damping=1.0), "`damping` must be < 1.0"),
        (dict(tol=-1.0), "`tol` must be >= 0.0"),
        (dict(max_iter=0), "`max_iter` must be >= 1"),
        (dict(schedule="random"), "`schedule` must be one of"),
        (dict(init=np.ones((2, 2))), r"`init` must have shape \(3, 2\)"),
        (dict(init=-np.ones((3, 2))), "`init` must hold non-negative"),
    ]:
        with pytest.raises(ParameterError, match=msg):
            G.mean_field(p, **kw)
    with pytest.raises(ParameterError, match="`method` must be one of"):
        G.map_inference(p, method="ad3")
    with pytest.raises(ParameterError, match="`map_score` must have shape"):
        G.second_best(p, [0, 0, 0], map_score=[1.0, 2.0])


# ---------------------------------------------------------------------------- documentation


def _documented_defaults(fn):
    doc = inspect.getdoc(fn)
    return dict(re.findall(r"^(\w+) : .*?default=(.+?)$", doc, re.M))


@pytest.mark.parametrize(
    "fn", [G.mean_field, G.belief_propagation, G.max_product, G.icm, G.map_inference, G.infer]
)
def test_docstring_defaults_match_signatures(fn):
    documented = _documented_defaults(fn)
    sig = inspect.signature(fn)
    assert documented, fn.__name__
    for name, text in documented.items():
        assert ast.literal_eval(text.strip()) == sig.parameters[name].default, (fn.__name__, name)
