"""Dask scale-out: results identical to the single-process path; bad input fails loudly."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from structcal import ChainPotentials, GraphPotentials, ParameterError, io  # noqa: E402
from structcal.distributed import (  # noqa: E402
    apply_recalibrator,
    fit_recalibrator,
    read_partition,
    sample_items,
    write_chain_dataset,
    write_graph_dataset,
)
from structcal.events import MAPEvent, MarginalEvent  # noqa: E402
from structcal.events.objects import ObjectEvents  # noqa: E402
from structcal.forecasters import KNNRegionForecaster  # noqa: E402
from structcal.prediction import StructuredPrediction  # noqa: E402
from structcal.recalibration import StructuredRecalibrator  # noqa: E402


@pytest.fixture(scope="module")
def client():
    import dask

    # one worker death fails the run at once (the default retries it 3 times)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster, distributed.Client(cluster) as c:
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
        lab[keep] = map_labels[offs[i]:offs[i + 1]][keep]
    return pot, labels


def _recalibrator():
    return StructuredRecalibrator(
        kinds=[MAPEvent(), MarginalEvent()], features=["phi_mp1", "phi_mg2"],
        forecaster=KNNRegionForecaster(k_grid=[5, 10, 20], random_state=0), method="forecaster",
    )


def test_apply_and_fit_equal_the_single_process_path(client, tmp_path):
    pot, labels = _world(120, seed=0)
    ids = np.arange(120) * 3 + 7  # ids need not be 0..n-1
    write_chain_dataset(tmp_path / "data", pot, items_per_partition=25, labels=labels, item_ids=ids)
    chosen = sample_items(tmp_path / "data", 80, random_state=4, client=client)
    rec = fit_recalibrator(_recalibrator(), tmp_path / "data", n_items=80, random_state=4, client=client)
    # single process, on the same items in id order
    rows = np.searchsorted(ids, chosen)
    sub = ChainPotentials.from_list([pot.unary[pot.offsets[i]:pot.offsets[i + 1]] for i in rows], pot.pairwise)
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
    per_edge = ChainPotentials(pot.unary, pot.offsets, np.random.default_rng(5).normal(size=(pot.n_edges, K, K)))
    write_chain_dataset(tmp_path / "edges", per_edge, items_per_partition=40, labels=labels, item_ids=ids)
    apply_recalibrator(ref, tmp_path / "edges", tmp_path / "out_edges", client=client)
    _assert_same_events(tmp_path / "out_edges", ref.predict(StructuredPrediction(per_edge), labels),
                        ids, pot.offsets)


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
    if "set" in t.kind_scopes:
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
    _rewrite(files[1], pa.concat_tables([a.filter(pa.array(last)), b]).replace_schema_metadata(meta))
    read_partition(files[1])  # item 19 whole and first in part 1: fine on its own
    head = a.filter(pa.array(last)).slice(0, 1)  # now put its first token back in part 0 too
    if a.filter(pa.array(last)).num_rows > 1:
        _rewrite(files[0], pa.concat_tables([a.filter(pa.array(~last)), head]).replace_schema_metadata(meta))
        with pytest.raises(ParameterError, match="item 19 is not whole"):
            apply_recalibrator(rec, data, tmp_path / "o1", client=client)
    else:
        _rewrite(files[0], pa.concat_tables([a.filter(pa.array(~last)), head]).replace_schema_metadata(meta))
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

    # a missing column and another format version
    data3 = tmp_path / "cols"
    files = write_chain_dataset(data3, pot, items_per_partition=40, labels=labels)
    t = pq.read_table(files[0])
    _rewrite(files[0], t.drop(["position"]))
    with pytest.raises(ParameterError, match=r"missing column\(s\) \['position'\]"):
        apply_recalibrator(rec, data3, tmp_path / "o3", client=client)
    _rewrite(files[0], t.replace_schema_metadata({**t.schema.metadata, b"structcal.format_version": b"99"}))
    with pytest.raises(ParameterError, match="format_version 99; this structcal reads 1"):
        apply_recalibrator(rec, data3, tmp_path / "o3", client=client)
    assert not (tmp_path / "o3").exists()
    with pytest.raises(ParameterError, match="must be a fitted StructuredRecalibrator"):
        apply_recalibrator(_recalibrator(), data3, tmp_path / "o3", client=client)


class _DiesOnPredict(StructuredRecalibrator):
    """A recalibrator whose worker process dies in the middle of a partition."""

    def predict(self, pred, y_true=None):
        os._exit(1)


def test_a_dying_worker_fails_the_run_without_output(client, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        pot, labels = _world(30, seed=2)
        rec = _DiesOnPredict(kinds=[MarginalEvent()], features=["phi_mg2"],
                             forecaster=KNNRegionForecaster(n_neighbors=5))
        rec.fit(StructuredPrediction(pot), labels)
        write_chain_dataset(tmp_path / "d", pot, items_per_partition=10, labels=labels)
        with pytest.raises(distributed.scheduler.KilledWorker):
            apply_recalibrator(rec, tmp_path / "d", tmp_path / "out", client=client)
        assert not (tmp_path / "out").exists()
        assert not list(tmp_path.glob(".out.tmp-*"))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    client.wait_for_workers(2, timeout=60)
