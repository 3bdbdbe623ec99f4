"""Gibbs sampling from graph CRFs: the chain's frequencies against enumeration."""

import numpy as np
import pytest

from structcal.exceptions import InfeasibleError, ParameterError
from structcal.inference.exact import exact_graph
from structcal.inference.graph import gibbs_sample
from structcal.potentials import GraphPotentials

from ._graph_problems import random_graphs


def _copies(p, n):
    """``n`` copies of graph 0 of ``p`` in one batch (independent chains)."""
    return p.subset(np.zeros(n, dtype=np.int64))


def _frequencies(p, n_copies=40, n_samples=600, **kw):
    """Node and edge frequencies of graph 0 over the samples of ``n_copies`` chains."""
    q = _copies(p, n_copies)
    y = gibbs_sample(q, n_samples, **kw).reshape(n_samples * n_copies, -1)
    K, n = p.n_states, p.sizes[0]
    e = p.edges[p.edge_offsets[0]:p.edge_offsets[1]]
    node = np.stack([(y == a).mean(axis=0) for a in range(K)], axis=1)
    pair = np.zeros((e.shape[0], K, K))
    for a in range(K):
        for b in range(K):
            pair[:, a, b] = ((y[:, e[:, 0]] == a) & (y[:, e[:, 1]] == b)).mean(axis=0)
    assert node.shape == (n, K)
    return node, pair


@pytest.mark.parametrize("case", ["potts_grid", "matrix_loopy"])
def test_gibbs_frequencies_match_enumeration(case):
    # 24,000 correlated draws: the frequencies are within ~0.01 of the exact node and edge
    # marginals (several standard errors; the seeds are fixed, so this is deterministic)
    rng = np.random.default_rng(7)
    if case == "potts_grid":
        p = GraphPotentials.from_grid(rng.normal(size=(3, 3, 3)),
                                      potts=1.2 * rng.normal(size=12))
    else:
        p = random_graphs(rng, 3, [7], topology="loopy", kind="per_edge")
    ex = exact_graph(p, 0)
    node, pair = _frequencies(p, burn_in=10, thin=2, random_state=3)
    np.testing.assert_allclose(node, ex.marginals, atol=0.015)
    np.testing.assert_allclose(pair, ex.edge_marginals, atol=0.015)


def test_gibbs_respects_forbidden_labels_and_pairs():
    rng = np.random.default_rng(1)
    u = rng.normal(size=(2, 3, 2))
    u[0, 0, 1] = -np.inf  # pixel 0 must take label 0
    w = np.zeros(7)
    w[0] = -np.inf  # pixels 0 and 1 must differ
    p = GraphPotentials.from_grid(u, potts=w)
    y = gibbs_sample(p, 300, init=[0, 1, 0, 0, 0, 0], random_state=0)
    assert (y[:, 0] == 0).all() and (y[:, 1] == 1).all()
    u[0, 1, 1] = -np.inf  # pixel 1 must take label 0 too: no labeling is allowed
    with pytest.raises(InfeasibleError):
        gibbs_sample(GraphPotentials.from_grid(u, potts=w), 3)


def test_gibbs_is_seeded_and_validated():
    rng = np.random.default_rng(2)
    p = GraphPotentials.from_grid(rng.normal(size=(4, 5, 3)), potts=0.7, connectivity=8)
    a = gibbs_sample(p, 5, random_state=11)
    np.testing.assert_array_equal(a, gibbs_sample(p, 5, random_state=11))
    assert not np.array_equal(a, gibbs_sample(p, 5, random_state=12))
    # the chain continues: thin=2 keeps every other labeling of thin=1
    one = gibbs_sample(p, 7, thin=1, burn_in=3, random_state=4)
    two = gibbs_sample(p, 4, thin=2, burn_in=3, random_state=4)
    np.testing.assert_array_equal(one[::2], two)
    for kw, match in [(dict(n_samples=0), "n_samples"), (dict(n_samples=2, thin=0), "thin"),
                      (dict(n_samples=2, burn_in=-1), "burn_in"),
                      (dict(n_samples=2, init=[0, 1]), "init")]:
        with pytest.raises(ParameterError, match=match):
            gibbs_sample(p, **kw)
