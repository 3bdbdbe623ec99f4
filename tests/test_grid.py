"""Pixel grids: edges and coordinates, GraphPotentials.from_grid, and the grid kernels
(checked against the general kernels on the same graphs, bit for bit where they promise it,
against the generic matrix path and against enumeration)."""

import networkx as nx
import numpy as np
import pytest

from structcal.exceptions import InfeasibleError, ParameterError
from structcal.inference import graph as G
from structcal.inference.exact import exact_graph
from structcal.potentials import GraphPotentials, grid_coordinates, grid_edges

from ._graph_problems import random_graphs


@pytest.fixture(autouse=True)
def _compiled_kernels():
    """Every routine here runs the compiled kernels: small grids would otherwise run the
    general drivers' Python source (structcal.inference.graph._grid_kernel), and the grid
    kernels would go untested. Interpreted against compiled: tests/test_graph_interpreted.py."""
    from structcal._tier import forced_tier

    with forced_tier("kernels"):
        yield


@pytest.mark.parametrize("h,w", [(1, 1), (1, 5), (4, 1), (3, 4), (5, 5)])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_grid_edges_equal_networkx_grid(h, w, connectivity):
    edges, direction = grid_edges(h, w, connectivity)
    ref = nx.grid_2d_graph(h, w)
    if connectivity == 8:
        ref.add_edges_from(((r, c), (r + 1, c + dc)) for r in range(h - 1) for c in range(w)
                           for dc in (-1, 1) if 0 <= c + dc < w)
    want = {tuple(sorted((r * w + c, r2 * w + c2))) for (r, c), (r2, c2) in ref.edges}
    got = {tuple(sorted(e)) for e in edges.tolist()}
    assert got == want and len(got) == edges.shape[0]
    # the direction code matches the pixel offset
    d = edges[:, 1] - edges[:, 0]
    assert ((d == 1) == (direction == 0)).all() and ((d == w) == (direction == 1)).all() or w == 1
    if connectivity == 8 and h > 1 and w > 1:
        assert ((direction == 2) == (d == w + 1)).all() and ((direction == 3) == (d == w - 1)).all()


def test_grid_edges_errors():
    with pytest.raises(ParameterError, match="connectivity"):
        grid_edges(3, 3, 6)
    with pytest.raises(ParameterError, match="height"):
        grid_edges(0, 3)


def test_grid_coordinates():
    c = grid_coordinates([(2, 3), (0, 4), (1, 1)])
    assert c.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [0, 0]]
    assert grid_coordinates(np.zeros((0, 2), int)).shape == (0, 2)


def test_from_grid_equals_from_list():
    rng = np.random.default_rng(0)
    imgs = [rng.normal(size=(3, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(1, 3, 3))]
    w = [rng.uniform(size=grid_edges(*u.shape[:2], 8)[0].shape[0]) for u in imgs]
    p = GraphPotentials.from_grid(imgs, potts=w, connectivity=8)
    ref = GraphPotentials.from_list(
        [u.reshape(-1, 3) for u in imgs], [grid_edges(*u.shape[:2], 8)[0] for u in imgs], potts=w
    )
    for name in ("unary", "offsets", "edges", "edge_offsets", "potts", "is_forest"):
        np.testing.assert_array_equal(getattr(p, name), getattr(ref, name))
    for name in ("indptr", "neighbors", "edge_id", "reversed", "twin"):
        np.testing.assert_array_equal(getattr(p.adjacency, name), getattr(ref.adjacency, name))
    assert p.is_forest.tolist() == [False, False, True]


def test_from_grid_batch_array_and_direction_matrices():
    rng = np.random.default_rng(1)
    U = rng.normal(size=(2, 3, 3, 2))
    pw = rng.normal(size=(2, 2, 2))  # horizontal, vertical
    p = GraphPotentials.from_grid(U, pairwise=pw)
    e, d = grid_edges(3, 3)
    np.testing.assert_array_equal(p.edge_type, np.concatenate([d, d]))
    np.testing.assert_array_equal(p.edge_matrices(), pw[np.concatenate([d, d])])
    shared = GraphPotentials.from_grid(U, pairwise=pw[0])
    assert shared.pairwise_kind == "shared"
    w = rng.uniform(size=(2, e.shape[0]))
    np.testing.assert_array_equal(GraphPotentials.from_grid(U, potts=w).potts, w.ravel())


def test_from_grid_errors():
    U = np.zeros((3, 3, 2))
    with pytest.raises(ParameterError, match="exactly one"):
        GraphPotentials.from_grid(U)
    with pytest.raises(ParameterError, match="NaN"):
        GraphPotentials.from_grid(np.full((2, 2, 2), np.nan), potts=1.0)
    with pytest.raises(ParameterError, match="same number of states"):
        GraphPotentials.from_grid([U, np.zeros((2, 2, 3))], potts=1.0)
    with pytest.raises(ParameterError, match="one array per image"):
        GraphPotentials.from_grid([U, U], potts=[np.ones(12)])
    with pytest.raises(ParameterError, match=r"potts\[0\]"):
        GraphPotentials.from_grid([U], potts=[np.ones(11)])
    with pytest.raises(ParameterError, match="per direction"):
        GraphPotentials.from_grid(U, pairwise=np.zeros((3, 2, 2)))
    with pytest.raises(ParameterError, match="unaries"):
        GraphPotentials.from_grid(np.zeros((3, 3)), potts=1.0)
    with pytest.raises(ParameterError, match=r"\+inf"):
        GraphPotentials.from_grid(U, potts=np.inf)


# ---------------------------------------------------------------------------- mean field

def _as_matrices(p):
    """The same model with one explicit matrix per edge (the generic mean-field path)."""
    return GraphPotentials(p.unary, p.offsets, p.edges, p.edge_offsets, p.edge_matrices())


def _general(p):
    """The same batch without its grid: every routine takes the general (CSR) kernels."""
    out = GraphPotentials(p.unary, p.offsets, p.edges, p.edge_offsets, potts=p.potts)
    assert out.grid is None
    return out


def test_grid_is_recorded_and_kept():
    rng = np.random.default_rng(0)
    imgs = [rng.normal(size=(3, 4, 2)), rng.normal(size=(2, 5, 2)), rng.normal(size=(1, 3, 2))]
    p = GraphPotentials.from_grid(imgs, potts=1.0, connectivity=8)
    assert p.grid.shapes.tolist() == [[3, 4], [2, 5], [1, 3]] and p.grid.connectivity == 8
    sub = p.subset([2, 0])
    assert sub.grid.shapes.tolist() == [[1, 3], [3, 4]] and sub.grid.connectivity == 8
    assert p.with_unary(p.unary + 1.0).grid is p.grid
    assert _general(p).grid is None
    assert GraphPotentials.from_list([np.zeros((2, 2))], [[(0, 1)]], potts=1.0).grid is None


@pytest.mark.parametrize("connectivity", [4, 8])
def test_greedy_colours_of_grids_are_the_checkerboard_classes(connectivity):
    from structcal.inference import _graph

    for h, w in [(1, 1), (1, 6), (5, 1), (4, 7), (6, 6)]:
        p = GraphPotentials.from_grid(np.zeros((h, w, 2)), potts=1.0, connectivity=connectivity)
        colour = np.empty(p.n_nodes, dtype=np.int64)
        _graph.greedy_colours(p.n_nodes, p.adjacency.indptr, p.adjacency.neighbors, colour)
        r, c = np.divmod(np.arange(h * w), w)
        want = (r + c) % 2 if connectivity == 4 else 2 * (r % 2) + c % 2
        if w == 1 and connectivity == 8:
            want = r % 2  # (no odd columns: the classes renumber)
        np.testing.assert_array_equal(colour, want)


_SHAPES = [(1, 1), (1, 7), (6, 1), (2, 2), (5, 9), (8, 12), (3, 17)]


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("K", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("schedule,damping", [("checkerboard", 0.0), ("checkerboard", 0.3),
                                              ("synchronous", 0.5)])
def test_grid_mean_field_equals_general_kernel_bit_for_bit(connectivity, K, schedule, damping):
    # the grid kernel visits the colour classes of the general kernel's checkerboard order,
    # with the same operations in the same order: the same bits, on images of every shape
    # (odd / even widths, single rows and columns), in one batch, from softmax(unary) and
    # from a given init, with forbidden labels
    rng = np.random.default_rng(K + 10 * connectivity)
    imgs = [2.0 * rng.normal(size=(h, w, K)) for h, w in _SHAPES]
    if K > 1:
        imgs[4][1, 2, : K - 1] = -np.inf  # one allowed label
        imgs[5][0, 0, 0] = -np.inf
    w = [rng.normal(size=grid_edges(*u.shape[:2], connectivity)[0].shape[0]) for u in imgs]
    p = GraphPotentials.from_grid(imgs, potts=w, connectivity=connectivity)
    ref = _general(p)
    for init in (None, rng.random((p.n_nodes, K))):
        kw = dict(schedule=schedule, damping=damping, tol=0.0, max_iter=6, warn=False,
                  log_partition=True, init=init)
        a, b = G.mean_field(p, **kw), G.mean_field(ref, **kw)
        np.testing.assert_array_equal(a.marginals, b.marginals)
        np.testing.assert_array_equal(a.delta, b.delta)
        np.testing.assert_array_equal(a.log_partition, b.log_partition)
    # and it stops where the general kernel stops
    kw = dict(schedule=schedule, damping=damping, tol=1e-5, max_iter=500, warn=False)
    a, b = G.mean_field(p, **kw), G.mean_field(ref, **kw)
    np.testing.assert_array_equal(a.n_iter, b.n_iter)
    np.testing.assert_array_equal(a.marginals, b.marginals)


@pytest.mark.parametrize("K", [2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("schedule,damping", [("sequential", 0.0), ("sequential", 0.3),
                                              ("checkerboard", 0.0), ("synchronous", 0.5)])
def test_potts_paths_equal_matrix_path(K, schedule, damping):
    rng = np.random.default_rng(K)
    U = 2.0 * rng.normal(size=(2, 4, 5, K))
    U[0, 1, 2, : K - 1] = -np.inf  # a node with one allowed label
    U[1, 0, 0, 0] = -np.inf
    w = rng.normal(size=(2, grid_edges(4, 5, 8)[0].shape[0]))
    p = GraphPotentials.from_grid(U, potts=w, connectivity=8)
    kw = dict(schedule=schedule, damping=damping, tol=0.0, max_iter=7, warn=False,
              log_partition=True)
    fast, ref = G.mean_field(p, **kw), G.mean_field(_as_matrices(p), **kw)
    np.testing.assert_allclose(fast.marginals, ref.marginals, rtol=0, atol=1e-13)
    np.testing.assert_allclose(fast.log_partition, ref.log_partition, rtol=1e-12)
    np.testing.assert_allclose(fast.marginals.sum(axis=1), 1.0, atol=1e-14)
    assert fast.marginals[1 * 5 + 2, K - 1] == 1.0


def test_mean_field_auto_schedule():
    rng = np.random.default_rng(1)
    p = GraphPotentials.from_grid(rng.normal(size=(4, 5, 3)), potts=0.8)
    kw = dict(tol=0.0, max_iter=5, warn=False)
    np.testing.assert_array_equal(G.mean_field(p, **kw).marginals,
                                  G.mean_field(p, schedule="checkerboard", **kw).marginals)
    q = _general(p)
    np.testing.assert_array_equal(G.mean_field(q, **kw).marginals,
                                  G.mean_field(q, schedule="sequential", **kw).marginals)
    assert G.mean_field(p, **kw).method == "mean_field_checkerboard"
    with pytest.raises(ParameterError, match="schedule"):
        G.mean_field(p, schedule="random")


def test_grid_mean_field_refuses_a_pixel_without_allowed_label():
    U = np.zeros((3, 4, 2))
    U[2, 1] = -np.inf
    p = GraphPotentials.from_grid(U, potts=0.5)
    for schedule in ("checkerboard", "synchronous", "sequential"):
        with pytest.raises(InfeasibleError, match="node 9"):
            G.mean_field(p, schedule=schedule)


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_potts_mean_field_without_coupling_is_exact(K):
    rng = np.random.default_rng(0)
    U = 30.0 * rng.normal(size=(3, 4, K))
    p = GraphPotentials.from_grid(U, potts=0.0)
    q = G.mean_field(p).marginals
    e = np.exp(U.reshape(-1, K) - U.reshape(-1, K).max(axis=1, keepdims=True))
    np.testing.assert_allclose(q, e / e.sum(axis=1, keepdims=True), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("seed", range(3))
def test_potts_mean_field_fixed_point_and_bound_on_small_grids(seed):
    # on a tiny loopy grid the mean-field bound is below the exact log-partition, and q
    # is a fixed point of the update computed independently here
    rng = np.random.default_rng(seed)
    K = 3
    U = rng.normal(size=(2, 3, K))
    p = GraphPotentials.from_grid(U, potts=rng.uniform(0, 1.5, size=7))
    r = G.mean_field(p, tol=1e-12, max_iter=2000, log_partition=True)
    ex = exact_graph(p, 0)
    assert r.log_partition[0] <= float(ex.log_partition) + 1e-12
    q = r.marginals
    field = p.unary.copy()
    for (s, t), w in zip(p.edges, p.potts):
        field[s] += w * q[t]
        field[t] += w * q[s]
    want = np.exp(field - field.max(axis=1, keepdims=True))
    np.testing.assert_allclose(q, want / want.sum(axis=1, keepdims=True), atol=1e-10)


def test_potts_with_forbidden_pairs_takes_the_generic_path():
    rng = np.random.default_rng(3)
    p = random_graphs(rng, 3, [5, 4], topology="loopy", kind="potts")
    w = p.potts.copy()
    w[0] = -np.inf  # the ends of edge 0 must differ; one end can only take label 0
    u = p.unary.copy()
    u[p.edges[0, 0], 1:] = -np.inf
    u[p.edges[0, 1], 0] = -np.inf  # (mean field needs q = 0 exactly where -inf would hit)
    p = GraphPotentials(u, p.offsets, p.edges, p.edge_offsets, potts=w)
    r = G.mean_field(p, tol=0.0, max_iter=5, warn=False)
    ref = G.mean_field(_as_matrices(p), tol=0.0, max_iter=5, warn=False)
    np.testing.assert_allclose(r.marginals, ref.marginals, atol=1e-13)
    assert r.marginals[p.edges[0, 1], 0] == 0.0


def test_potts_large_magnitudes_stay_finite():
    rng = np.random.default_rng(5)
    for K in (2, 6):
        p = GraphPotentials.from_grid(1e4 * rng.normal(size=(6, 6, K)), potts=1e4)
        q = G.mean_field(p, warn=False).marginals
        assert np.isfinite(q).all() and np.allclose(q.sum(axis=1), 1.0)


# ---------------------------------------------------------------------------- message passing


@pytest.mark.parametrize("connectivity", [4, 8])
def test_grid_slots_are_the_csr_slots(connectivity):
    # the index arithmetic of the grid kernels against the sorted CSR of the same edges
    from structcal.potentials._grid_kernels import grid_slot_table

    for h, w in [(1, 1), (1, 4), (5, 1), (3, 4), (6, 7)]:
        p = GraphPotentials.from_list([np.zeros((h * w, 2))],
                                      [grid_edges(h, w, connectivity)[0]], potts=1.0)
        D = 4 if connectivity == 4 else 8
        nbr = np.empty((h * w, D), dtype=np.int64)
        eid = np.empty((h * w, D), dtype=np.int64)
        grid_slot_table(h, w, connectivity, 0, nbr, eid)
        a = p.adjacency
        for i in range(h * w):
            sl = slice(a.indptr[i], a.indptr[i + 1])
            have = nbr[i] >= 0
            np.testing.assert_array_equal(nbr[i][have], a.neighbors[sl])
            np.testing.assert_array_equal(eid[i][have], a.edge_id[sl])
            assert ((nbr[i] >= 0) == (eid[i] >= 0)).all()


def _grid_problems(rng, connectivity, shapes=((7, 9), (2, 2), (6, 13), (1, 5), (11, 4))):
    imgs = [2.0 * rng.normal(size=(h, w, 2)) for h, w in shapes]
    imgs[0][0, 0, 0] = -np.inf  # a pixel with one allowed label
    imgs[2][3, 3, 1] = -np.inf
    w = [rng.normal(size=grid_edges(*u.shape[:2], connectivity)[0].shape[0]) for u in imgs]
    return GraphPotentials.from_grid(imgs, potts=w, connectivity=connectivity)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_grid_trws_equals_general_kernel(connectivity):
    # the two-label grid kernel makes the general kernel's operations in the same order:
    # the same labels, iterations, last change and (polished) MAP
    rng = np.random.default_rng(connectivity)
    p = _grid_problems(rng, connectivity)
    ref = _general(p)
    for max_iter in (1, 2, 5, 100):
        for polish in (False, True):
            a = G.map_inference(p, max_iter=max_iter, polish=polish, warn=False)
            b = G.map_inference(ref, max_iter=max_iter, polish=polish, warn=False)
            np.testing.assert_array_equal(a.map_labels, b.map_labels)
            np.testing.assert_array_equal(a.map_score, b.map_score)
            np.testing.assert_array_equal(a.n_iter, b.n_iter)
            np.testing.assert_array_equal(a.delta, b.delta)


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("damping", [0.0, 0.5])
def test_grid_bp_equals_general_kernel(connectivity, damping):
    # same schedule and stopping rule; the two-label messages are computed in closed form,
    # so the numbers agree to rounding
    rng = np.random.default_rng(10 + connectivity)
    p = _grid_problems(rng, connectivity, shapes=((7, 9), (2, 2), (6, 13), (11, 4)))
    assert not p.is_forest.any()
    ref = _general(p)
    for max_iter in (1, 3, 30):
        kw = dict(damping=damping, max_iter=max_iter, warn=False, log_partition=True,
                  edge_marginals=True)
        a, b = G.belief_propagation(p, **kw), G.belief_propagation(ref, **kw)
        np.testing.assert_allclose(a.marginals, b.marginals, rtol=0, atol=1e-13)
        np.testing.assert_allclose(a.edge_marginals, b.edge_marginals, rtol=0, atol=1e-13)
        np.testing.assert_allclose(a.log_partition, b.log_partition, rtol=1e-13)
        np.testing.assert_allclose(a.delta, b.delta, rtol=1e-9, atol=1e-13)
        np.testing.assert_array_equal(a.n_iter, b.n_iter)
        assert a.marginals[0, 0] == 0.0


def test_grid_bp_on_a_forest_batch_stays_exact():
    # a batch with a one-row image takes the general kernels (exact two-pass BP there)
    rng = np.random.default_rng(3)
    p = GraphPotentials.from_grid([rng.normal(size=(1, 6, 2)), rng.normal(size=(2, 3, 2))],
                                  potts=[rng.normal(size=5), rng.normal(size=7)])
    r = G.belief_propagation(p, log_partition=True, warn=False)
    ex = exact_graph(p, 0)
    np.testing.assert_allclose(r.marginals[:6], ex.marginals, atol=1e-12)
    np.testing.assert_allclose(r.log_partition[0], ex.log_partition, rtol=1e-12)
