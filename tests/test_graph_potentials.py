"""GraphPotentials: constructors, CSR adjacency, forest detection and input validation."""

import networkx as nx
import numpy as np
import pytest

from structcal import ChainPotentials, ParameterError
from structcal.exceptions import ParameterTypeError
from structcal.potentials import GraphPotentials

from ._graph_problems import random_graphs


def _two_graphs(**kw):
    unary = np.zeros((5, 2))
    edges = np.array([[0, 1], [1, 2], [2, 0], [3, 4]])
    return GraphPotentials(unary, [0, 3, 5], edges, [0, 3, 4], **kw)


def test_adjacency_is_a_consistent_csr(rng):
    p = random_graphs(rng, 3, [6, 1, 0, 5], topology="loopy", kind="per_edge")
    a = p.adjacency
    assert a.indptr.shape == (p.n_nodes + 1,) and a.neighbors.shape == (2 * p.n_edges,)
    np.testing.assert_array_equal(a.twin[a.twin], np.arange(2 * p.n_edges))
    owner = np.repeat(np.arange(p.n_nodes), a.degrees)
    np.testing.assert_array_equal(a.neighbors[a.twin], owner)
    np.testing.assert_array_equal(a.edge_id[a.twin], a.edge_id)
    # the slot's node is the edge's second endpoint exactly when `reversed`
    np.testing.assert_array_equal(p.edges[a.edge_id, 1] == owner, a.reversed)
    np.testing.assert_array_equal(p.edges[a.edge_id, np.where(a.reversed, 0, 1)], a.neighbors)
    G = nx.Graph(p.edges.tolist())
    for i in G.nodes:
        assert sorted(G.neighbors(i)) == a.neighbors_of(i).tolist()
    assert a.degrees.sum() == 2 * p.n_edges
    for a_, b_ in zip(a.indptr[:-1], a.indptr[1:]):
        assert np.all(np.diff(a.neighbors[a_:b_]) > 0)


def test_forest_flags():
    p = GraphPotentials.from_list(
        [np.zeros((n, 2)) for n in (3, 3, 4, 0, 1)],
        [[(0, 1), (1, 2)], [(0, 1), (1, 2), (0, 2)], [(0, 1), (2, 3)], [], []],
        potts=1.0,
    )
    assert p.is_forest.tolist() == [True, False, True, True, True]


def test_pairwise_forms_describe_the_same_model():
    K = 3
    rng = np.random.default_rng(0)
    mats = rng.standard_normal((2, K, K))
    edges = [[(0, 1), (1, 2), (2, 3)]]
    etype = [np.array([0, 1, 0])]
    u = [rng.standard_normal((4, K))]
    typed = GraphPotentials.from_list(u, edges, mats, edge_type=etype)
    per_edge = GraphPotentials.from_list(u, edges, [mats[etype[0]]])
    shared = GraphPotentials.from_list(u, edges, mats[0])
    potts = GraphPotentials.from_list(u, edges, potts=[np.array([0.5, -1.0, 2.0])])
    np.testing.assert_array_equal(typed.edge_matrices(), per_edge.edge_matrices())
    np.testing.assert_array_equal(shared.edge_matrices(), np.broadcast_to(mats[0], (3, K, K)))
    np.testing.assert_array_equal(potts.edge_matrices()[1], -1.0 * np.eye(K))
    assert [x.pairwise_kind for x in (typed, per_edge, shared, potts)] == [
        "typed",
        "typed",
        "shared",
        "potts",
    ]
    assert shared.pairwise.shape == (K, K)  # never broadcast to one matrix per edge
    assert potts.pairwise is None and potts.potts.shape == (3,)


def test_from_networkx_and_from_chain():
    G1 = nx.cycle_graph(["a", "b", "c"])
    G2 = nx.Graph()
    G2.add_node("z")
    for i, n in enumerate(G1):
        G1.nodes[n]["u"] = np.array([i, -i], dtype=float)
    for u, v in G1.edges:
        G1.edges[u, v]["w"] = 2.0
        G1.edges[u, v]["M"] = np.array([[1.0, 0.0], [0.0, 3.0]])
    G2.nodes["z"]["u"] = np.array([5.0, 6.0])
    p = GraphPotentials.from_networkx([G1, G2], unary="u", potts="w")
    assert p.sizes.tolist() == [3, 1] and p.n_edges == 3 and p.potts.tolist() == [2.0] * 3
    np.testing.assert_array_equal(p.unary[3], [5.0, 6.0])
    q = GraphPotentials.from_networkx(G1, unary="u", pairwise="M")
    assert q.pairwise.shape == (3, 2, 2)
    with pytest.raises(ParameterError, match="has no 'v' attribute"):
        GraphPotentials.from_networkx(G1, unary="v", potts=1.0)
    with pytest.raises(ParameterError, match="multigraph"):
        GraphPotentials.from_networkx(nx.MultiGraph([(0, 1)]), potts=1.0)
    c = ChainPotentials.from_list([np.zeros((3, 2)), np.zeros((0, 2)), np.zeros((2, 2))], np.eye(2))
    g = GraphPotentials.from_chain(c)
    assert g.edges.tolist() == [[0, 1], [1, 2], [3, 4]] and g.edge_offsets.tolist() == [0, 2, 2, 3]


def test_subset_and_with_unary(rng):
    p = random_graphs(rng, 2, [3, 4, 2], topology="loopy", kind="typed")
    s = p.subset([2, 0])
    assert s.sizes.tolist() == [2, 3] and s.n_edges == p.edge_counts[2] + p.edge_counts[0]
    np.testing.assert_array_equal(s.unary[:2], p.unary[7:9])
    np.testing.assert_array_equal(s.edges[: p.edge_counts[2]], p.edges[p.edge_offsets[2] :] - 7)
    np.testing.assert_array_equal(
        s.edge_matrices()[p.edge_counts[2] :], p.edge_matrices()[: p.edge_counts[0]]
    )
    w = p.with_unary(np.ones_like(p.unary))
    assert w.adjacency is p.adjacency and (w.unary == 1).all()
    assert [len(x) for x in p.split_nodes(np.arange(p.n_nodes))] == [3, 4, 2]


@pytest.mark.parametrize(
    "edges,edge_offsets,message",
    [
        ([[0, 1], [1, 1], [3, 4]], [0, 2, 3], r"self-loops; edge 1 = \[1, 1\]"),
        (
            [[0, 1], [1, 0], [3, 4]],
            [0, 2, 3],
            "must not list an edge twice .* edges 0 = \\[0, 1\\] and 1 = \\[1, 0\\]",
        ),
        ([[0, 1], [1, 2], [3, 9]], [0, 2, 3], "`edges` entries must be < 5; got 9"),
        (
            [[0, 1], [2, 3], [3, 4]],
            [0, 2, 3],
            r"edge 1 = \[2, 3\] is listed in graph 0 .* nodes are 0..2",
        ),
        ([[0, 1], [1, 2], [3, 4]], [0, 3], "`edge_offsets` must have n_graphs \\+ 1 = 3 entries"),
        (
            [[0, 1], [1, 2], [3, 4]],
            [0, 2, 4],
            "`edge_offsets` must end at the number of rows \\(3\\)",
        ),
        ([[0, -1]], [0, 1, 1], "`edges` entries must be >= 0"),
        ([[0.0, 1.0]], [0, 1, 1], "`edges` must be an integer array"),
    ],
)
def test_bad_edges(edges, edge_offsets, message):
    with pytest.raises((ParameterError, ParameterTypeError), match=message):
        GraphPotentials(
            np.zeros((5, 2)), [0, 3, 5], np.asarray(edges), edge_offsets, np.zeros((2, 2))
        )


def test_bad_potentials():
    with pytest.raises(ParameterError, match="`unary` must not contain NaN"):
        GraphPotentials(np.full((5, 2), np.nan), [0, 3, 5], [[0, 1]], [0, 1, 1], potts=0.0)
    with pytest.raises(ParameterError, match="`unary` must not contain \\+inf"):
        GraphPotentials(np.full((5, 2), np.inf), [0, 3, 5], [[0, 1]], [0, 1, 1], potts=0.0)
    with pytest.raises(ParameterError, match="`pairwise` must not contain NaN"):
        _two_graphs(pairwise=np.full((2, 2), np.nan))
    with pytest.raises(ParameterError, match="`potts` must not contain \\+inf"):
        _two_graphs(potts=np.array([0.0, np.inf, 0.0, 0.0]))
    with pytest.raises(ParameterError, match="`potts` must not contain NaN"):
        _two_graphs(potts=np.nan)
    with pytest.raises(ParameterError, match="exactly one of `pairwise`"):
        _two_graphs()
    with pytest.raises(ParameterError, match="exactly one of `pairwise`"):
        _two_graphs(pairwise=np.zeros((2, 2)), potts=1.0)
    with pytest.raises(
        ParameterError,
        match=r"per-edge `pairwise` must have shape \(n_edges, n_states, n_states\)=\(4, 2, 2\)",
    ):
        _two_graphs(pairwise=np.zeros((3, 2, 2)))
    with pytest.raises(
        ParameterError, match=r"`pairwise` must have shape \(n_states, n_states\)=\(2, 2\)"
    ):
        _two_graphs(pairwise=np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="`edge_type` entries must be < 2"):
        _two_graphs(pairwise=np.zeros((2, 2, 2)), edge_type=[0, 1, 2, 0])
    with pytest.raises(
        ParameterError, match=r"`potts` must be a scalar or have shape \(n_edges,\)=\(4,\)"
    ):
        _two_graphs(potts=np.zeros(3))
    with pytest.raises(ParameterError, match="`offsets` must end at the number of rows"):
        GraphPotentials(
            np.zeros((5, 2)), [0, 3, 4], np.zeros((0, 2), np.int64), [0, 0, 0], potts=0.0
        )
    with pytest.raises(ParameterError, match=r"`edges\[0\]` holds local node indices in \[0, 2\)"):
        GraphPotentials.from_list([np.zeros((2, 2))], [[(0, 2)]], potts=0.0)
    with pytest.raises(ParameterError, match="same number of states"):
        GraphPotentials.from_list([np.zeros((2, 2)), np.zeros((2, 3))], [[], []], potts=0.0)
    with pytest.raises(ParameterTypeError, match="`unaries` must be a list"):
        GraphPotentials.from_list(np.zeros((2, 2)), [[]], potts=0.0)


def test_potentials_are_read_only():
    p = _two_graphs(potts=1.0)
    for arr in (p.unary, p.edges, p.offsets, p.potts, p.adjacency.neighbors):
        with pytest.raises(ValueError):
            arr[0] = 0
