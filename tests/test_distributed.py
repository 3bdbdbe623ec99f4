"""Dask scale-out: results identical to the single-process path; bad input fails loudly."""

import json
import warnings
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from structcal import (  # noqa: E402
    ChainPotentials,
    GraphPotentials,
    ParameterError,
    ParameterTypeError,
    io,
)
from structcal.distributed import (  # noqa: E402
    apply_recalibrator,
    fit_recalibrator,
    read_partition,
    sample_items,
    write_chain_dataset,
    write_graph_dataset,
)
from structcal.events import MAPEvent, MarginalEvent  # noqa: E402
from structcal.events.objects import AllObjectsFound, ObjectEvents  # noqa: E402
from structcal.forecasters import KNNRegionForecaster  # noqa: E402
from structcal.prediction import StructuredPrediction  # noqa: E402
from structcal.recalibration import StructuredRecalibrator  # noqa: E402


@pytest.fixture(scope="module")
def client():
    import dask

    # one worker death fails the run at once (the default retries it 3 times)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            distributed.Client(cluster) as c,
        ):
            yield c


def _world(n_items, seed, K=5):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 8, n_items)
    unary = rng.standard_normal((lengths.sum(), K)) * 2
    pot = ChainPotentials.from_scores(unary, lengths, np.eye(K) * 0.7)
    labels = [rng.integers(0, K, L) for L in lengths]
    # outcomes follow the MAP with probability 0.7 so events have both outcomes
    map_labels = StructuredPrediction(pot).map_labels
    offs = pot.offsets
    for i, lab in enumerate(labels):
        keep = rng.random(lab.size) < 0.7
        lab[keep] = map_labels[offs[i] : offs[i + 1]][keep]
    return pot, labels


def _recalibrator():
    return StructuredRecalibrator(
        kinds=[MAPEvent(), MarginalEvent()],
        features=["phi_mp1", "phi_mg2"],
        forecaster=KNNRegionForecaster(k_grid=[5, 10, 20], random_state=0),
        method="forecaster",
    )


def test_apply_and_fit_equal_the_single_process_path(client, tmp_path):
    pot, labels = _world(120, seed=0)
    ids = np.arange(120) * 3 + 7  # ids need not be 0..n-1
    write_chain_dataset(tmp_path / "data", pot, items_per_partition=25, labels=labels, item_ids=ids)
    chosen = sample_items(tmp_path / "data", 80, random_state=4, client=client)
    rec = fit_recalibrator(
        _recalibrator(), tmp_path / "data", n_items=80, random_state=4, client=client
    )
    # single process, on the same items in id order
    rows = np.searchsorted(ids, chosen)
    sub = ChainPotentials.from_list(
        [pot.unary[pot.offsets[i] : pot.offsets[i + 1]] for i in rows], pot.pairwise
    )
    ref = _recalibrator().fit(StructuredPrediction(sub), [labels[i] for i in rows])
    for key in ref.forecasters_:
        np.testing.assert_array_equal(rec.forecasters_[key].X_fit_, ref.forecasters_[key].X_fit_)
        assert rec.forecasters_[key].n_neighbors_ == ref.forecasters_[key].n_neighbors_

    info = apply_recalibrator(ref, tmp_path / "data", tmp_path / "out", client=client)
    assert (tmp_path / "out" / "_SUCCESS").exists() and info["n_partitions"] == 5
    want = ref.predict(StructuredPrediction(pot), labels)
    assert info["n_events"] == want.table.n_events
    _assert_same_events(tmp_path / "out", want, ids, pot.offsets)
    with pytest.raises(ParameterError, match="exists"):
        apply_recalibrator(ref, tmp_path / "data", tmp_path / "out", client=client)

    # per-edge transitions (e.g. an outside model's, start/end folded in): same path
    K = pot.n_states
    per_edge = ChainPotentials(
        pot.unary, pot.offsets, np.random.default_rng(5).normal(size=(pot.n_edges, K, K))
    )
    want = ref.predict(StructuredPrediction(per_edge), labels)  # (first: workers load its kernels)
    write_chain_dataset(
        tmp_path / "edges", per_edge, items_per_partition=40, labels=labels, item_ids=ids
    )
    apply_recalibrator(ref, tmp_path / "edges", tmp_path / "out_edges", client=client)
    _assert_same_events(tmp_path / "out_edges", want, ids, pot.offsets)


def _assert_same_events(out_dir, want, ids, offsets):
    """The output directory holds exactly the single-process events (any partitioning)."""
    got = pa.concat_tables([pq.read_table(f) for f in sorted(Path(out_dir).glob("part-*.parquet"))])
    t = want.table
    assert got.num_rows == t.n_events
    # the output is partition by partition, the single-process table kind by kind; within
    # one item and kind both keep the order of the kind's instances: compare in
    # (kind, item) order, stable
    kinds = np.asarray(t.kind_names)[t.kind]
    w = np.lexsort((ids[t.item], kinds))
    g_kind = np.asarray(got.column("kind").to_pylist())
    g = np.lexsort((got.column("item").to_numpy(), g_kind))
    assert g_kind[g].tolist() == kinds[w].tolist()
    col = lambda name: got.column(name).to_numpy()[g]  # noqa: E731
    np.testing.assert_array_equal(col("item"), ids[t.item][w])
    np.testing.assert_array_equal(col("position"), t.position[w])
    np.testing.assert_array_equal(col("label"), t.label[w])
    np.testing.assert_array_equal(col("forecast"), want.forecast[w])
    np.testing.assert_array_equal(col("raw"), t.raw[w])
    if t.outcome is not None:
        np.testing.assert_array_equal(col("outcome"), t.outcome[w])
    if {"set", "span", "object"} & set(t.kind_scopes):
        members = got.column("members").to_pylist()
        for r_got, r_want in zip(g, w):
            local = t.members_of(r_want) - offsets[t.item[r_want]]
            assert members[r_got] == local.tolist()
    else:
        assert "members" not in got.column_names


def _rewrite(file, table):
    pq.write_table(table, file)


def test_bad_datasets_fail_without_output(client, tmp_path):
    pot, labels = _world(40, seed=1)
    rec = _recalibrator().fit(StructuredPrediction(pot), labels)
    # an item split across two partitions: each half looks whole, the run must still fail
    data = tmp_path / "split"
    files = write_chain_dataset(data, pot, items_per_partition=20, labels=labels)
    a, b = pq.read_table(files[0]), pq.read_table(files[1])
    last = a.column("item").to_numpy() == 19
    meta = a.schema.metadata
    _rewrite(files[0], a.filter(pa.array(~last)).replace_schema_metadata(meta))
    _rewrite(
        files[1], pa.concat_tables([a.filter(pa.array(last)), b]).replace_schema_metadata(meta)
    )
    read_partition(files[1])  # item 19 whole and first in part 1: fine on its own
    head = a.filter(pa.array(last)).slice(0, 1)  # now put its first token back in part 0 too
    if a.filter(pa.array(last)).num_rows > 1:
        _rewrite(
            files[0],
            pa.concat_tables([a.filter(pa.array(~last)), head]).replace_schema_metadata(meta),
        )
        with pytest.raises(ParameterError, match="item 19 is not whole"):
            apply_recalibrator(rec, data, tmp_path / "o1", client=client)
    else:
        _rewrite(
            files[0],
            pa.concat_tables([a.filter(pa.array(~last)), head]).replace_schema_metadata(meta),
        )
        with pytest.raises(ParameterError, match="item 19 appears in more than one partition"):
            apply_recalibrator(rec, data, tmp_path / "o1", client=client)
    assert not (tmp_path / "o1").exists()
    assert not list(tmp_path.glob(".o1.tmp-*"))  # no half-written output left behind

    # items split across partitions where both pieces look whole (positions restart)
    data2 = tmp_path / "dup"
    files = write_chain_dataset(data2, pot, items_per_partition=20, labels=labels)
    t0 = pq.read_table(files[0])
    t1 = pq.read_table(files[1])
    dup = t0.filter(pa.array(t0.column("item").to_numpy() == 3))
    _rewrite(files[1], pa.concat_tables([t1, dup]).replace_schema_metadata(t0.schema.metadata))
    with pytest.raises(ParameterError, match="item 3 appears in more than one partition"):
        apply_recalibrator(rec, data2, tmp_path / "o2", client=client)
    assert not (tmp_path / "o2").exists()

    # partitions that disagree on the shared transition matrix
    pq.write_table(
        t1.replace_schema_metadata(
            {
                **t1.schema.metadata,
                b"structcal.pairwise": json.dumps((pot.pairwise + 1).tolist()).encode(),
            }
        ),
        files[1],
    )
    with pytest.raises(ParameterError, match="part-00000.parquet and part-00001.parquet disagree"):
        apply_recalibrator(rec, data2, tmp_path / "o2", client=client)
    assert not (tmp_path / "o2").exists()

    # a missing column and another format version
    data3 = tmp_path / "cols"
    files = write_chain_dataset(data3, pot, items_per_partition=40, labels=labels)
    t = pq.read_table(files[0])
    _rewrite(files[0], t.drop(["position"]))
    with pytest.raises(ParameterError, match=r"missing column\(s\) \['position'\]"):
        apply_recalibrator(rec, data3, tmp_path / "o3", client=client)
    _rewrite(
        files[0],
        t.replace_schema_metadata({**t.schema.metadata, b"structcal.format_version": b"99"}),
    )
    with pytest.raises(ParameterError, match="format_version 99; this structcal reads 1, 2"):
        apply_recalibrator(rec, data3, tmp_path / "o3", client=client)
    assert not (tmp_path / "o3").exists()
    with pytest.raises(ParameterError, match="must be a fitted StructuredRecalibrator"):
        apply_recalibrator(_recalibrator(), data3, tmp_path / "o3", client=client)


# ---------------------------------------------------------------------------- graphs

GRAPH_OPTIONS = {"marginal_method": "belief_propagation", "map_method": "max_product"}


def _graphs(n_items, seed, form, K=3):
    """Graphs of 0-8 nodes (empty graphs, isolated nodes, no edges, cycles) in one pairwise form."""
    rng = np.random.default_rng(seed)
    unaries, edges = [], []
    for _ in range(n_items):
        n = int(rng.integers(0, 9))
        pairs = np.array(
            [(a, b) for a in range(n) for b in range(a + 1, n)], dtype=np.int64
        ).reshape(-1, 2)
        e = pairs[rng.random(len(pairs)) < 0.3]
        flip = rng.random(len(e)) < 0.5
        e[flip] = e[flip][:, ::-1]  # either orientation
        unaries.append(rng.standard_normal((n, K)) * 2)
        edges.append(e)
    m = [len(e) for e in edges]
    if form == "shared":
        pot = GraphPotentials.from_list(unaries, edges, np.eye(K) * 0.8)
    elif form == "typed":
        pot = GraphPotentials.from_list(
            unaries, edges, rng.normal(size=(2, K, K)), edge_type=[rng.integers(0, 2, k) for k in m]
        )
    elif form == "per_edge":
        pot = GraphPotentials.from_list(unaries, edges, [rng.normal(size=(k, K, K)) for k in m])
    else:
        pot = GraphPotentials.from_list(unaries, edges, potts=[rng.random(k) for k in m])
    coords = rng.integers(0, 10, (pot.n_nodes, 2))
    return pot, coords


def _graph_labels(pot, coords, seed):
    rng = np.random.default_rng(seed)
    y = StructuredPrediction(pot, node_data={"coords": coords}, **GRAPH_OPTIONS).map_labels.copy()
    flip = rng.random(y.size) < 0.3
    y[flip] = rng.integers(0, pot.n_states, int(flip.sum()))
    return y


def test_graph_layout_round_trips_every_pairwise_form(tmp_path):
    for form in ("shared", "typed", "per_edge", "potts"):
        pot, coords = _graphs(23, seed=1, form=form)
        assert pot.pairwise_kind == ("typed" if form == "per_edge" else form)
        y = np.random.default_rng(0).integers(0, pot.n_states, pot.n_nodes)
        ids = np.arange(23)[::-1] * 2  # any distinct ids, in any order
        files = write_graph_dataset(
            tmp_path / form,
            pot,
            items_per_partition=5,
            labels=y,
            item_ids=ids,
            node_data={"coords": coords, "w": coords[:, 0] * 0.5},
        )
        assert len(files) == 5
        parts = [read_partition(f) for f in files]
        np.testing.assert_array_equal(np.concatenate([p.item_ids for p in parts]), ids)
        np.testing.assert_array_equal(np.concatenate([p.labels for p in parts]), y)
        np.testing.assert_array_equal(
            np.concatenate([p.node_data["coords"] for p in parts]), coords
        )
        np.testing.assert_array_equal(
            np.concatenate([p.node_data["w"] for p in parts]), coords[:, 0] * 0.5
        )
        np.testing.assert_array_equal(
            np.concatenate([p.potentials.unary for p in parts]), pot.unary
        )
        np.testing.assert_array_equal(
            np.concatenate([p.potentials.sizes for p in parts]), pot.sizes
        )
        local = [
            p.potentials.edges
            - np.repeat(p.potentials.offsets[:-1], p.potentials.edge_counts)[:, None]
            for p in parts
        ]
        np.testing.assert_array_equal(
            np.concatenate(local), pot.edges - np.repeat(pot.offsets[:-1], pot.edge_counts)[:, None]
        )
        np.testing.assert_array_equal(
            np.concatenate([p.potentials.edge_matrices() for p in parts]), pot.edge_matrices()
        )
        assert all(p.potentials.pairwise_kind == pot.pairwise_kind for p in parts)
    assert (
        0 in pot.sizes and 0 in pot.edge_counts[pot.sizes > 1]
    )  # empty graphs, graphs without edges
    # an empty batch is one empty partition, read back as an empty batch
    empty = GraphPotentials(np.zeros((0, 2)), [0], np.zeros((0, 2), int), [0], np.eye(2))
    (f,) = write_graph_dataset(tmp_path / "empty", empty, items_per_partition=3)
    assert read_partition(f).potentials.n_graphs == 0


def test_chain_per_edge_and_node_data_round_trip_and_version_1_still_reads(tmp_path):
    rng = np.random.default_rng(3)
    pot = ChainPotentials.from_list(
        [rng.normal(size=(L, 2)) for L in (3, 1, 4)],
        [rng.normal(size=(max(L - 1, 0), 2, 2)) for L in (3, 1, 4)],
    )
    files = write_chain_dataset(
        tmp_path / "c", pot, items_per_partition=2, node_data={"x": np.arange(8.0)}
    )
    parts = [read_partition(f) for f in files]
    np.testing.assert_array_equal(
        np.concatenate([p.potentials.pairwise for p in parts]), pot.pairwise
    )
    np.testing.assert_array_equal(np.concatenate([p.node_data["x"] for p in parts]), np.arange(8.0))
    assert parts[0].labels is None
    # a dataset written by format_version 1 (chains, transitions in the metadata)
    old = read_partition(Path(__file__).parent / "data" / "distributed_chain_v1.parquet")
    assert old.item_ids.tolist() == [5, 9, 11] and old.potentials.lengths.tolist() == [2, 4, 1]
    assert old.labels.tolist() == [0, 1, 2, 2, 1, 1, 2]
    assert old.potentials.pairwise[0].tolist() == [0.017, -0.768, -np.inf]
    assert old.potentials.unary[3].tolist() == [2.834, -0.923, 1.065]


def test_docstring_examples_run():
    import doctest

    import structcal.distributed

    result = doctest.testmod(structcal.distributed, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_bad_graph_datasets_are_refused_naming_the_problem(tmp_path):
    pot, coords = _graphs(12, seed=2, form="potts")
    y = np.zeros(pot.n_nodes, dtype=np.int64)
    (f,) = write_graph_dataset(tmp_path / "g", pot, items_per_partition=12, labels=y)
    t = pq.read_table(f)
    meta = t.schema.metadata

    def bad(table, match, meta_changes=None):
        path = tmp_path / "bad.parquet"
        pq.write_table(table.replace_schema_metadata({**meta, **(meta_changes or {})}), path)
        with pytest.raises(ParameterError, match=match):
            read_partition(path)

    col = t.column_names.index
    bad(t.drop(["edges"]), r"missing column\(s\) \['edges'\]")
    bad(t.drop(["potts"]), r"missing column\(s\) \['potts'\]")
    bad(t, "format_version 3; this structcal reads 1, 2", {b"structcal.format_version": b"3"})
    bad(t, "pairwise_form of a graph dataset", {b"structcal.pairwise_form": b"per_token"})
    bad(pa.concat_tables([t, t.slice(4, 1)]), "item 4 appears in more than one row")
    g = int(np.argmax(pot.edge_counts > 0))
    edges = t.column("edges").to_pylist()
    edges[g][1] = int(pot.sizes[g])  # one past the last node
    bad(t.set_column(col("edges"), "edges", pa.array(edges)), f"item {g}: edge 0 = .* out of range")
    edges[g][1] = edges[g][0]
    bad(t.set_column(col("edges"), "edges", pa.array(edges)), "self-loops")
    edges = t.column("edges").to_pylist()
    edges[g] = edges[g][:-1]
    bad(
        t.set_column(col("edges"), "edges", pa.array(edges)),
        f"item {g}: `edges` holds an odd number",
    )
    unary = t.column("unary").to_pylist()
    unary[g] = unary[g][:-1]
    bad(
        t.set_column(col("unary"), "unary", pa.array(unary)),
        f"item {g}: `unary` holds .* not a multiple",
    )
    labels = t.column("label").to_pylist()
    labels[g] = labels[g] + [0]
    bad(t.set_column(col("label"), "label", pa.array(labels)), f"item {g}: column 'label' holds")
    labels[g] = [9] * int(pot.sizes[g])
    bad(t.set_column(col("label"), "label", pa.array(labels)), r"labels must lie in \[0, 3\)")
    with pytest.raises(ParameterError, match="exists"):
        write_graph_dataset(tmp_path / "g", pot, items_per_partition=3)
    with pytest.raises(ParameterError, match="one integer label per node"):
        write_graph_dataset(tmp_path / "g2", pot, items_per_partition=3, labels=y[:-1])
    assert not (tmp_path / "g2").exists() and not list(tmp_path.glob(".g2.tmp-*"))


def test_graphs_apply_and_fit_equal_the_single_process_path(client, tmp_path):
    pot, coords = _graphs(60, seed=4, form="per_edge")
    y = _graph_labels(pot, coords, seed=5)
    ids = np.arange(60) * 10 + 3
    write_graph_dataset(
        tmp_path / "data",
        pot,
        items_per_partition=15,
        labels=y,
        item_ids=ids,
        node_data={"coords": coords},
    )
    template = StructuredRecalibrator(
        kinds=[MAPEvent(), MarginalEvent(), ObjectEvents(), AllObjectsFound(n_samples=8)],
        features={
            "map": ["phi_mp1"],
            "marginal": ["phi_mg2"],
            "object": ["set_size", "raw", "object_eccentricity"],
            # sampled: an image's probability must not depend on its partition
            "all_found": ["raw", "phi_mp1"],
        },
        forecaster=KNNRegionForecaster(k_grid=[5, 10], random_state=0),
        method="forecaster",
    )
    # single process first (it compiles the kernels the workers then load from the cache)
    chosen = sample_items(tmp_path / "data", 45, random_state=1, client=client)
    rows = np.searchsorted(ids, chosen)
    node_rows = np.concatenate([np.arange(pot.offsets[i], pot.offsets[i + 1]) for i in rows])
    sub = StructuredPrediction(
        pot.subset(rows), node_data={"coords": coords[node_rows]}, **GRAPH_OPTIONS
    )
    from sklearn.base import clone

    ref = clone(template).fit(sub, y[node_rows])
    want = ref.predict(StructuredPrediction(pot, node_data={"coords": coords}, **GRAPH_OPTIONS), y)
    rec = fit_recalibrator(
        template, tmp_path / "data", n_items=45, random_state=1, client=client, **GRAPH_OPTIONS
    )
    for key in ref.forecasters_:
        np.testing.assert_array_equal(rec.forecasters_[key].X_fit_, ref.forecasters_[key].X_fit_)
        assert rec.forecasters_[key].n_neighbors_ == ref.forecasters_[key].n_neighbors_

    # the saved recalibrator (a path) is what the workers get; the objects come out with
    # their members (positions of their nodes in the graph)
    io.save(ref, tmp_path / "rec")
    info = apply_recalibrator(
        tmp_path / "rec", tmp_path / "data", tmp_path / "out", client=client, **GRAPH_OPTIONS
    )
    assert info["n_items"] == 60 and info["n_events"] == want.table.n_events
    assert set(want.table.kind_names) == {"map", "marginal", "object", "all_found"}
    assert (want.table.kind == 2).sum() > 10
    _assert_same_events(tmp_path / "out", want, ids, pot.offsets)
    success = json.loads((tmp_path / "out" / "_SUCCESS").read_text())
    assert success["recalibrator_sha256"] and success["n_events"] == want.table.n_events

    # a recalibrator file of another format version, a graph split across partitions,
    # partitions that disagree: refused, nothing written
    manifest = json.loads((tmp_path / "rec.json").read_text())
    (tmp_path / "rec.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(ParameterError, match="format_version 99"):
        apply_recalibrator(tmp_path / "rec", tmp_path / "data", tmp_path / "o1", client=client)
    files = sorted((tmp_path / "data").glob("part-*.parquet"))
    t0, t1 = pq.read_table(files[0]), pq.read_table(files[1])
    pq.write_table(
        pa.concat_tables([t1, t0.slice(2, 1)]).replace_schema_metadata(t1.schema.metadata), files[1]
    )
    with pytest.raises(ParameterError, match=f"item {ids[2]} appears in more than one partition"):
        apply_recalibrator(ref, tmp_path / "data", tmp_path / "o2", client=client, **GRAPH_OPTIONS)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".o1", "o1", ".o2", "o2"))]


def _in_worker():
    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


class _DiesOnPredict(StructuredRecalibrator):
    """A recalibrator whose worker process dies in the middle of a partition.

    Off the allow-list of structcal.io, so it cannot be saved: it travels to the workers as
    an object (the fallback the module docstring describes).
    """

    def events(self, pred, y_true=None, **kwargs):
        if _in_worker():  # fit runs here; predicting dies on the worker
            os._exit(1)
        return super().events(pred, y_true, **kwargs)


def test_a_dying_worker_fails_the_run_without_output(client, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        pot, labels = _world(30, seed=2)
        rec = _DiesOnPredict(
            kinds=[MarginalEvent()],
            features=["phi_mg2"],
            forecaster=KNNRegionForecaster(n_neighbors=5),
        )
        rec.fit(StructuredPrediction(pot), labels)
        write_chain_dataset(tmp_path / "d", pot, items_per_partition=10, labels=labels)
        with pytest.raises(distributed.scheduler.KilledWorker):
            apply_recalibrator(rec, tmp_path / "d", tmp_path / "out", client=client)
        assert not (tmp_path / "out").exists()
        assert not list(tmp_path.glob(".out.tmp-*"))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    # (last test of the module: the cluster closes next, so no waiting for a new worker)


def test_group_column_and_guarantee(client, tmp_path):
    from structcal.guarantees import accept_events, certify_precision

    pot, labels = _world(120, seed=3)
    groups = np.arange(120) // 6  # 20 "documents"
    write_chain_dataset(tmp_path / "data", pot, items_per_partition=30, labels=labels,
                        groups=groups)
    part = read_partition(sorted((tmp_path / "data").glob("part-*.parquet"))[0])
    np.testing.assert_array_equal(part.groups, groups[:30])
    rec = fit_recalibrator(_recalibrator(), tmp_path / "data", n_items=120, random_state=0,
                           client=client)
    ref = _recalibrator().fit(StructuredPrediction(pot), labels, groups=groups)
    assert rec.selection_["map"]["n_groups"] == ref.selection_["map"]["n_groups"] == 20
    cal_pot, cal_labels = _world(300, seed=9)
    cal = ref.predict(StructuredPrediction(cal_pot), cal_labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a kind may not be certifiable: it accepts nothing
        g = certify_precision(cal, 0.6, 0.2)
    assert any(c.certified for c in g.certificates_.values())
    apply_recalibrator(ref, tmp_path / "data", tmp_path / "out", client=client, guarantee=g)
    got = pa.concat_tables([pq.read_table(f) for f in sorted((tmp_path / "out").glob("*.parquet"))])
    want = ref.predict(StructuredPrediction(pot), labels)
    # same order as the single process: the kinds' events item by item within a partition
    assert got.column("accepted").to_numpy().sum() == accept_events(g, want).sum()
    with pytest.raises(ParameterTypeError, match="fitted PrecisionGuarantee"):
        apply_recalibrator(ref, tmp_path / "data", tmp_path / "o2", client=client, guarantee=3)
    # a chain with two group values is refused, naming the item
    f = sorted((tmp_path / "data").glob("part-*.parquet"))[0]
    t = pq.read_table(f)
    col = t.column("group").to_numpy().copy()
    col[1] = 999
    pq.write_table(t.set_column(t.column_names.index("group"), "group", pa.array(col))
                   .replace_schema_metadata(t.schema.metadata), f)
    with pytest.raises(ParameterError, match="several values in the `group` column"):
        read_partition(f)


def test_adapt_takes_one_weighting_decision_for_the_whole_dataset(client, tmp_path):
    """shift_policy='adapt' on Dask: the client refits the flagged kind's map once from
    the partitions' samples, every partition uses it, and the forecasts are those of the
    single process on the whole batch (no groups: blocks of consecutive inputs in both)."""
    from structcal.exceptions import DistributionShiftWarning

    def world(n, seed, scale):
        rng = np.random.default_rng(seed)
        lengths = rng.integers(2, 8, n)
        unary = rng.standard_normal((lengths.sum(), 5)) * scale
        labels = np.where(rng.random(lengths.sum()) < 0.7, unary.argmax(axis=1),
                          rng.integers(0, 5, lengths.sum()))
        return unary, lengths, labels

    u0, l0, y0 = world(600, 1, 1.0)
    fit_pot = ChainPotentials.from_scores(u0, l0, np.eye(5) * 0.3)
    rec = StructuredRecalibrator(kinds=[MAPEvent()], method="isotonic", shift_policy="adapt",
                                 random_state=0).fit(StructuredPrediction(fit_pot),
                                                     np.split(y0, np.cumsum(l0)[:-1]))
    ua, la, ya = world(200, 2, 1.6)
    pot = ChainPotentials.from_scores(ua, la, np.eye(5) * 0.3)
    labels = np.split(ya, np.cumsum(la)[:-1])
    with pytest.warns(DistributionShiftWarning):
        single = rec.predict(StructuredPrediction(pot), labels)
    assert single.fallback == {"map": "adapted"}
    write_chain_dataset(tmp_path / "data", pot, items_per_partition=50, labels=labels)
    with pytest.warns(DistributionShiftWarning) as caught:
        info = apply_recalibrator(rec, tmp_path / "data", tmp_path / "out", client=client)
    assert len([w for w in caught if issubclass(w.category, DistributionShiftWarning)]) == 1
    assert info["fallback"] == ["map"] and info["adaptation"]["map"]["map"] == "weighted isotonic"
    got = pa.concat_tables([pq.read_table(f) for f in sorted((tmp_path / "out").glob("*.parquet"))])
    np.testing.assert_allclose(got.column("forecast").to_numpy(), single.forecast, rtol=0,
                               atol=1e-12)


def test_one_shift_decision_for_the_whole_dataset(client, tmp_path):
    # partitions 0-1 look like the recalibration data, 2-3 are far sharper: the fallback
    # decision is taken once for the dataset and applied to every partition, as the single
    # process does for its whole batch
    from structcal.exceptions import DistributionShiftWarning

    def world(n, seed, scale):
        rng = np.random.default_rng(seed)
        lengths = rng.integers(2, 8, n)
        unary = rng.standard_normal((lengths.sum(), 5)) * scale
        labels = np.where(rng.random(lengths.sum()) < 0.7, unary.argmax(axis=1),
                          rng.integers(0, 5, lengths.sum()))
        return unary, lengths, labels

    u0, l0, y0 = world(300, 1, 1.0)
    fit_pot = ChainPotentials.from_scores(u0, l0, np.eye(5) * 0.3)
    rec = StructuredRecalibrator(kinds=[MAPEvent()], method="isotonic", shift_policy="fallback",
                                 random_state=0).fit(StructuredPrediction(fit_pot),
                                                     np.split(y0, np.cumsum(l0)[:-1]))
    ua, la, ya = world(100, 2, 1.0)
    ub, lb, yb = world(100, 3, 6.0)
    pot = ChainPotentials.from_scores(np.vstack([ua, ub]), np.concatenate([la, lb]),
                                      np.eye(5) * 0.3)
    labels = np.split(np.concatenate([ya, yb]), np.cumsum(np.concatenate([la, lb]))[:-1])
    with pytest.warns(DistributionShiftWarning):
        single = rec.predict(StructuredPrediction(pot), labels)
    assert single.fallback == {"map": "raw"}
    write_chain_dataset(tmp_path / "data", pot, items_per_partition=50, labels=labels)
    with pytest.warns(DistributionShiftWarning) as caught:
        info = apply_recalibrator(rec, tmp_path / "data", tmp_path / "out", client=client)
    assert len([w for w in caught if issubclass(w.category, DistributionShiftWarning)]) == 1
    assert info["fallback"] == ["map"] and info["shift_test"].shifted
    got = pa.concat_tables([pq.read_table(f) for f in sorted((tmp_path / "out").glob("*.parquet"))])
    np.testing.assert_allclose(got.column("forecast").to_numpy(), single.forecast, rtol=0, atol=1e-12)
    assert json.loads((tmp_path / "out" / "_SUCCESS").read_text())["fallback"] == ["map"]
    # the unshifted half alone: no fallback anywhere, the fitted map's forecasts
    pot_a = ChainPotentials.from_scores(ua, la, np.eye(5) * 0.3)
    write_chain_dataset(tmp_path / "data_a", pot_a, items_per_partition=50,
                        labels=np.split(ya, np.cumsum(la)[:-1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DistributionShiftWarning)
        info = apply_recalibrator(rec, tmp_path / "data_a", tmp_path / "out_a", client=client)
    assert info["fallback"] == [] and not info["shift_test"].shifted
    got = pa.concat_tables([pq.read_table(f) for f in sorted((tmp_path / "out_a").glob("*.parquet"))])
    want = rec.predict(StructuredPrediction(pot_a), np.split(ya, np.cumsum(la)[:-1]))
    np.testing.assert_allclose(got.column("forecast").to_numpy(), want.forecast, rtol=0, atol=1e-12)


def test_fall_back_partition_applies_each_kinds_fallback_map(tmp_path):
    # the worker task behind shift_policy='fallback': a kind falling back to isotonic
    # regression takes the map of its raw probability, one falling back to raw its raw
    # probability, each clipped; their events are not accepted; other kinds are untouched
    from structcal.distributed import _fall_back_partition, _version
    from structcal.events import external_events

    rng = np.random.default_rng(0)
    n = 300
    fit = external_events(np.arange(n), kind=np.array(["a", "b"] * (n // 2)), raw=rng.random(n),
                          features={"x": rng.normal(size=n)}, outcome=rng.random(n) < 0.3)
    rec = StructuredRecalibrator(method="forecaster", forecaster=KNNRegionForecaster(
        n_neighbors=20), random_state=0).fit_events(fit)
    raw = rng.random(30)
    kind = np.array(["a", "b", "c"] * 10)
    table = pa.table({"kind": pa.array(kind), "raw": pa.array(raw),
                      "forecast": pa.array(np.full(30, 0.5)), "accepted": pa.array(np.ones(30, bool))})
    pq.write_table(table, tmp_path / "p.parquet")
    n_hit = _fall_back_partition(rec, _version(), str(tmp_path / "p.parquet"),
                                 {"a": "isotonic", "b": "raw"})
    got = pq.read_table(tmp_path / "p.parquet")
    f, acc = got.column("forecast").to_numpy(), got.column("accepted").to_numpy()
    a, b, c = kind == "a", kind == "b", kind == "c"
    assert n_hit == 20
    np.testing.assert_allclose(f[a], np.clip(rec.fallback_maps_["a"].predict_proba(raw[a])[:, 1],
                                             *rec._bounds("a")))
    np.testing.assert_allclose(f[b], np.clip(raw[b], *rec._bounds("b")))
    assert (f[c] == 0.5).all() and acc[c].all() and not acc[a | b].any()
