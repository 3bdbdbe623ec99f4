"""Notebook display and helpers: HTML reprs, reliability plots, flat results back to items."""

import networkx as nx
import numpy as np
import pytest

from structcal import GraphPotentials, split_events, split_items, to_networkx
from structcal.events import MAPEvent, MarginalEvent, build_events
from structcal.metrics import brier_decomposition, reliability_curve
from structcal.prediction import StructuredPrediction
from structcal.recalibration import evaluate_events

from ._problems import random_chains


@pytest.fixture(scope="module")
def table():
    p = random_chains(np.random.default_rng(0), 3, np.arange(60) % 5 + 1)
    pred = StructuredPrediction(p)
    y = pred.map_labels.copy()
    y[::3] = (y[::3] + 1) % 3
    return build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y,
                        features=["phi_mg1", "phi_mg2"])


def test_html_reprs_are_tables_and_plain_reprs_are_short(table):
    report = evaluate_events(table, {"raw": table.raw, "half": np.full(table.n_events, 0.5)})
    html = report._repr_html_()
    assert html.count("<tr>") == 1 + len(report.groups)  # header + one row per group
    assert "raw l2" in html and "marginal" in html
    assert len(repr(report)) < 200 and "CalibrationReport" in repr(report)
    entry = report.get("marginal", "raw")
    assert "<table>" in entry._repr_html_() and len(repr(entry)) < 200
    assert entry.curve._repr_html_().count("<tr>") == 1 + entry.curve.n_bins
    t_html = table._repr_html_(max_rows=5)
    assert "phi_mg2" in t_html and "first 5 events" in t_html
    assert len(repr(table)) < 300
    curve = reliability_curve(table.outcome, table.raw, n_resamples=20, random_state=0,
                              grid_size=101)
    assert "<table>" in curve._repr_html_() and "ReliabilityCurve(" in repr(curve)


def test_html_is_escaped():
    from structcal._html import html_table

    assert "&lt;b&gt;" in html_table(["<b>"], [["x"]])


def test_calibration_curve_does_not_join_sparse_buckets():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    from structcal.plotting import plot_calibration_curve

    rng = np.random.default_rng(0)
    p = np.r_[rng.uniform(0.0, 0.5, 500), [0.95, 0.96, 0.97]]  # 3 events in the top bucket
    y = rng.random(p.size) < p
    table = brier_decomposition(y, p, n_bins=10).table
    ax = plot_calibration_curve(table, min_count=10)
    line = ax.get_lines()[0]
    assert line.get_xdata().max() < 0.5            # the line stops at the last full bucket
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["n=3"]                         # the sparse bucket shows its count
    plt.close("all")


def test_reliability_curve_plots_with_its_band():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    from structcal.plotting import plot_calibration_curve, plot_reliability_curve

    rng = np.random.default_rng(0)
    p = rng.random(2000)
    y = rng.random(2000) < p ** 2
    curve = reliability_curve(y, p, n_resamples=20, random_state=0, grid_size=101)
    ax = plot_reliability_curve(curve, label="forecasts")
    assert np.array_equal(ax.get_lines()[0].get_ydata(), curve.estimate, equal_nan=True)
    assert len(ax.collections) == 2                 # the band and the density
    # plot_calibration_curve accepts the curve too (it used to reject it)
    ax2 = plot_calibration_curve(curve)
    assert len(ax2.collections) == 2
    with pytest.raises(TypeError, match="ReliabilityCurve"):
        plot_reliability_curve(np.zeros(3))
    plt.close("all")


def test_split_items_and_events(table):
    parts = split_items(np.arange(6) * 10, [0, 2, 2, 6])
    assert [a.tolist() for a in parts] == [[0, 10], [], [20, 30, 40, 50]]
    with pytest.raises(ValueError, match="offsets"):
        split_items(np.arange(6), [0, 2, 5])
    values = np.arange(table.n_events, dtype=float)
    per_item = split_events(table, values, "marginal")
    assert len(per_item) == table.n_items
    assert [a.shape[0] for a in per_item] == table.item_lengths.tolist()
    marg = np.flatnonzero(table.kind == table.kind_names.index("marginal"))
    for i, a in enumerate(per_item):
        rows = marg[table.item[marg] == i]
        assert np.array_equal(a, values[rows[np.argsort(table.position[rows])]])
    assert all(a.shape == (1,) for a in split_events(table, values, "map"))
    with pytest.raises(ValueError, match="unknown event kind"):
        split_events(table, values, "nope")
    with pytest.raises(ValueError, match="one entry per event"):
        split_events(table, values[:-1], "map")


def test_to_networkx_puts_node_results_on_the_right_nodes():
    rng = np.random.default_rng(0)
    graphs = [nx.path_graph(["a", "b", "c"]), nx.cycle_graph(4)]
    for g in graphs:
        for node in g.nodes:
            g.nodes[node]["unary"] = rng.normal(size=2)
    p = GraphPotentials.from_networkx(graphs, potts=0.5)
    labels = np.arange(p.n_nodes)
    marginals = rng.random((p.n_nodes, 2))
    out = to_networkx(graphs, p.offsets, label=labels, marginals=marginals)
    assert out[0].nodes["c"]["label"] == 2 and out[1].nodes[0]["label"] == 3
    assert np.array_equal(out[1].nodes[3]["marginals"], marginals[6])
    assert "label" not in graphs[0].nodes["a"]      # the inputs are not modified
    with pytest.raises(ValueError, match="one row per node"):
        to_networkx(graphs, p.offsets, label=labels[:-1])
    with pytest.raises(ValueError, match="describes 1 graphs"):
        to_networkx(graphs, [0, 7], label=labels)
