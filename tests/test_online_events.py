"""recalibrate_events: an EventTable streamed through Algorithm 1, grouped by kind."""

import numpy as np
import pytest

from structcal import ParameterError, ParameterTypeError
from structcal.events import MAPEvent, MarginalEvent, build_events
from structcal.online import recalibrate_events, recalibrate_online
from structcal.potentials import ChainPotentials
from structcal.prediction import StructuredPrediction


def _table(seed, n_items=200, K=3, scale=1.0, raw=True, labels=True):
    """Events of random chains whose true labelings are drawn from ``scale``-times flatter
    potentials: ``scale > 1`` makes the model's probabilities over-confident."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, size=n_items)
    unary = [rng.normal(size=(n, K)) for n in lengths]
    pairwise = rng.normal(size=(K, K))
    true = StructuredPrediction(ChainPotentials.from_list(unary, pairwise=pairwise))
    # each label drawn from its true marginal: the marginal events' outcomes have the
    # true probabilities (the MAP events' do not follow the joint; not needed here)
    u = rng.random(true.marginals.shape[0])
    y = (true.marginals.cumsum(axis=1) < u[:, None]).sum(axis=1).clip(0, K - 1)
    model = StructuredPrediction(
        ChainPotentials.from_list([scale * a for a in unary], pairwise=scale * pairwise)
    )
    return build_events(
        model, [MAPEvent(), MarginalEvent()], y_true=y if labels else None,
        features=["raw"], raw=raw,
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("method", ["regret", "blackwell"])
def test_equals_recalibrate_online_on_the_ordered_columns(seed, method):
    table = _table(seed)
    order = np.random.default_rng(seed).permutation(table.n_events)
    r = recalibrate_events(table, order=order, method=method, random_state=seed)
    names = np.asarray(table.kind_names)[table.kind[order]]
    ref = recalibrate_online(
        table.raw[order], table.outcome[order], groups=names, method=method, random_state=seed
    )
    np.testing.assert_array_equal(r.forecasts, ref.forecasts)
    np.testing.assert_array_equal(r.y, table.outcome[order].astype(float))
    assert r.group_labels.tolist() == ["map", "marginal"]
    pooled = recalibrate_events(table, order=order, by=None, method=method, random_state=seed)
    ref = recalibrate_online(
        table.raw[order], table.outcome[order], method=method, random_state=seed
    )
    np.testing.assert_array_equal(pooled.forecasts, ref.forecasts)
    assert pooled.group_labels is None


def test_kinds_are_independent_recalibrators():
    # regret method: the mixed forecasts do not depend on the coin, so each kind's
    # sub-stream is exactly what a recalibrator run on that kind alone would give
    table = _table(2)
    order = np.random.default_rng(2).permutation(table.n_events)
    r = recalibrate_events(table, order=order, random_state=0)
    for k, name in enumerate(table.kind_names):
        rows = order[table.kind[order] == k]
        alone = recalibrate_online(table.raw[rows], table.outcome[rows], random_state=5)
        np.testing.assert_array_equal(r.subset(name).expected_forecasts, alone.expected_forecasts)
    # default order is the table's row order; by="position" groups per position
    np.testing.assert_array_equal(
        recalibrate_events(table, random_state=1).forecasts,
        recalibrate_events(table, order=np.arange(table.n_events), random_state=1).forecasts,
    )
    by_pos = recalibrate_events(table, by="position", random_state=1)
    assert by_pos.group_labels.tolist() == sorted(set(table.position.tolist()))


def test_overconfident_events_become_calibrated():
    # a model 3x sharper than the truth: its raw probabilities are badly over-confident
    table = _table(3, n_items=1500, scale=3.0)
    order = np.random.default_rng(3).permutation(table.n_events)
    r = recalibrate_events(table, order=order, random_state=0)
    raw_c, rec_c = r.base_metrics.calibration_l1[-1], r.metrics.calibration_l1[-1]
    assert raw_c > 0.1
    assert rec_c < raw_c / 3
    assert r.metrics.l2_loss[-1] < r.base_metrics.l2_loss[-1]


def test_invalid_inputs():
    table = _table(4, n_items=20)
    with pytest.raises(ParameterTypeError, match="EventTable"):
        recalibrate_events(np.zeros(3))
    with pytest.raises(ParameterError, match="raw=True"):
        recalibrate_events(_table(4, n_items=20, raw=False))
    with pytest.raises(ParameterError, match="y_true"):
        recalibrate_events(_table(4, n_items=20, labels=False))
    with pytest.raises(ParameterError, match="repeat"):
        recalibrate_events(table, order=[0, 1, 0])
    with pytest.raises(ParameterError, match="order"):
        recalibrate_events(table, order=[table.n_events])
    with pytest.raises(ParameterTypeError, match="order"):
        recalibrate_events(table, order=[0.5])
    bad = table.raw.copy()
    bad[3] = np.nan
    from dataclasses import replace

    with pytest.raises(ParameterError, match="NaN at row 3"):
        recalibrate_events(replace(table, raw=bad))
    with pytest.raises(ParameterError, match="n_grid"):
        recalibrate_events(table, n_grid=0)
