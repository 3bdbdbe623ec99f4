"""Shipped graph datasets (scene, snakes) and the synthetic superpixel-scene generator."""

import networkx as nx
import numpy as np
import pytest

from structcal import ParameterError
from structcal.datasets import (
    GraphDataset,
    grid_edges,
    load_scene,
    load_snakes,
    make_superpixel_scenes,
)
from structcal.potentials import GraphPotentials


def test_scene_loader_and_its_graphs():
    full = load_scene()
    train, test = load_scene("train"), load_scene("test")
    assert full.X.shape == (2407, 294) and train.Y.shape == (1211, 6) and test.n_images == 1196
    assert set(np.unique(full.Y)) == {0, 1} and np.isfinite(full.X).all()
    g = train.subset(np.arange(5)).graphs()
    assert g.n_graphs == 5 and g.node_features.shape == (30, 6 * 295) and g.edges.shape == (75, 2)
    dense = g.node_features.toarray()
    for j in range(6):  # node j holds the image features in block j, plus a constant
        np.testing.assert_array_equal(dense[j, j * 295 : j * 295 + 294], train.X[0])
        assert dense[j, j * 295 + 294] == 1.0 and np.count_nonzero(dense[j]) <= 295
    np.testing.assert_array_equal(g.labels, train.Y[:5].ravel())
    p = GraphPotentials(np.zeros((30, 2)), g.offsets, g.edges, g.edge_offsets, potts=0.0)
    assert not p.is_forest.any() and (p.adjacency.degrees == 5).all()
    assert (g.edge_features.sum(axis=1) == 1).all() and g.edge_features.shape[1] == 15
    with pytest.raises(ParameterError, match="`split` must be one of"):
        load_scene("validation")


def test_snakes_loader_and_its_graphs():
    snakes = load_snakes()
    assert snakes.n_grids == 300 and snakes.split("test").n_grids == 100
    assert snakes.labels.min() == 0 and snakes.labels.max() == 10
    codes = snakes.colour_codes
    assert set(np.unique(codes)) == {0, 1, 2, 3, 4}
    assert ((codes == 0) == (snakes.labels == 0)).all()  # blue is exactly the background
    for g in range(snakes.n_grids):  # every snake has segments 1..10 once
        lab = snakes.label_grid(g)
        assert sorted(lab[lab > 0].tolist()) == list(range(1, 11))
    gd = snakes.subset([0, 1]).graphs()
    h, w = snakes.shapes[0]
    assert gd.node_features.shape[1] == 54 and (gd.node_features.sum(axis=1) == 9).all()
    assert gd.edge_offsets[1] == h * (w - 1) + (h - 1) * w
    assert (gd.edge_features.sum(axis=1) == 1).all() and gd.edge_features.shape[1] == 50
    assert snakes.image(0).shape == (h, w, 3)


def test_grid_edges():
    edges, vertical = grid_edges(3, 4)
    G = nx.grid_2d_graph(3, 4)
    expected = {tuple(sorted((a[0] * 4 + a[1], b[0] * 4 + b[1]))) for a, b in G.edges}
    assert {tuple(e) for e in edges.tolist()} == expected
    assert (edges[vertical, 1] - edges[vertical, 0] == 4).all() and (
        edges[~vertical, 1] - edges[~vertical, 0] == 1
    ).all()


def test_superpixel_scenes_follow_their_documented_model():
    d = make_superpixel_scenes(6, random_state=3)
    again = make_superpixel_scenes(6, random_state=3)
    np.testing.assert_array_equal(d.node_features, again.node_features)
    np.testing.assert_array_equal(d.edges, again.edges)
    assert isinstance(d, GraphDataset) and d.n_graphs == 6 and d.n_nodes == 600 and d.n_states == 21
    counts = np.diff(d.edge_offsets)
    assert (counts <= 3 * 100 - 6).all() and (counts >= 2 * 100).all()  # planar, triangulated
    p = GraphPotentials(np.zeros((600, 21)), d.offsets, d.edges, d.edge_offsets, potts=0.0)
    for g in range(6):  # each scene's adjacency is planar and connected
        sub = nx.Graph((d.edges[d.edge_offsets[g] : d.edge_offsets[g + 1]] - 100 * g).tolist())
        assert nx.is_connected(sub) and nx.check_planarity(sub)[0]
    assert not p.is_forest.any()
    assert d.labels.min() >= 0 and d.labels.max() < 21 and (d.labels == 0).any()
    # features are one-hot labels plus Gaussian noise of the stated scale
    resid = d.node_features - np.eye(21)[d.labels]
    assert abs(resid.std() - 0.5) < 0.02
    # the contrast feature is in (0, 1] and larger inside objects than across boundaries
    same = d.labels[d.edges[:, 0]] == d.labels[d.edges[:, 1]]
    contrast = d.edge_features[:, 1]
    assert (contrast > 0).all() and (contrast <= 1).all() and (d.edge_features[:, 0] == 1).all()
    assert contrast[same].mean() > contrast[~same].mean() + 0.3
    X, y = d.X, d.y
    assert (
        len(X) == 6 and X[0][0].shape == (100, 21) and X[0][1].max() < 100 and y[0].shape == (100,)
    )
    with pytest.raises(ParameterError, match="`n_objects` must be"):
        make_superpixel_scenes(2, n_objects=(5, 2))


@pytest.mark.parametrize(
    "module",
    [
        "structcal.inference.graph",
        "structcal.inference._dispatch",
        "structcal.potentials.graph",
        "structcal.crf.graph",
        "structcal.datasets.graphs",
        "structcal.datasets.scene",
        "structcal.datasets.snakes",
    ],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_importing_the_graph_modules_compiles_nothing():
    import subprocess
    import sys

    code = (
        "import structcal, structcal.inference, structcal.crf, structcal.datasets;"
        "from structcal.inference import _graph as k;"
        "print(sum(len(d.overloads) for d in (k.mean_field_batch.serial, k.bp_batch.serial,"
        " k.bp_batch.parallel.dispatcher, k.trws_batch.serial, k._send, k._mf_field)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
