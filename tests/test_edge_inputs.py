"""Issue 15 part 3: edge-case and malformed inputs give a correct result or a clear error."""

import shutil

import numpy as np
import pytest

from structcal import ChainPotentials, StructuredPrediction
from structcal.events import (
    AnyLabel,
    InLexicon,
    LabelAt,
    Lexicon,
    MAPEvent,
    MarginalEvent,
    Predicate,
    SpanEquals,
    build_events,
)
from structcal.exceptions import ParameterError, ParameterTypeError
from structcal.inference import assignment_probability
from structcal.metrics import binned_calibration_error
from structcal.potentials import GraphPotentials
from structcal.recalibration import StructuredRecalibrator

K = 3


def chains(rng, lengths):
    if not lengths:
        return ChainPotentials(np.zeros((0, K)), [0], rng.normal(size=(K, K)))
    return ChainPotentials.from_list([rng.normal(size=(L, K)) for L in lengths],
                                     rng.normal(size=(K, K)))


LEXICON = Lexicon([[0, 1], [2]], n_states=K)


def all_kinds():
    return [MAPEvent(), MarginalEvent(), LabelAt(5, 0, on_short="skip"),
            SpanEquals(4, [1, 1], on_short="skip"), InLexicon(LEXICON), AnyLabel(1),
            Predicate(lambda y: bool(len(y) > 9), "long")]


# ---------------------------------------------------------------------------------------
# zero events of a kind; empty items; empty batches


@pytest.mark.parametrize("features", ["all", "table1"])
@pytest.mark.parametrize("lengths", [[3, 1, 2], [0, 2], [0], [0, 0], []])
def test_build_events_with_kinds_without_events(rng, lengths, features):
    pred = StructuredPrediction(chains(rng, lengths),
                                unstructured_scores=rng.normal(size=(sum(lengths), K)))
    y = np.zeros(sum(lengths), dtype=int)
    t = build_events(pred, all_kinds(), y_true=y, lexicon=LEXICON, features=features)
    nonempty = np.flatnonzero(np.array(lengths, dtype=int) > 0)
    counts = np.bincount(t.kind, minlength=7)
    # item kinds: one event per non-empty item; marginal: one per node; the skipped
    # label/span kinds and the predicate have none here
    assert counts.tolist() == [len(nonempty), sum(lengths), 0, 0, len(nonempty),
                               len(nonempty), len(nonempty)]
    assert set(t.item.tolist()) <= set(nonempty.tolist())
    assert t.X.shape == (t.n_events, len(t.feature_names))
    assert t.outcome.shape == t.raw.shape == (t.n_events,)
    assert np.all(np.isfinite(t.X))


def test_empty_item_has_no_events_even_with_on_short_error(rng):
    pred = StructuredPrediction(chains(rng, [0, 3]))
    t = build_events(pred, [MAPEvent(), LabelAt(0, 1), SpanEquals(0, [1, 1])],
                     features=["phi_mp1", "phi_mg2"], y_true=[0, 0, 0])
    assert t.item.tolist() == [1, 1, 1]
    with pytest.raises(ParameterError, match="past the end of item 1"):
        build_events(StructuredPrediction(chains(rng, [0, 1])), [LabelAt(1, 0)],
                     features=["phi_mg2"])


def test_empty_graph_has_no_events(rng):
    g = GraphPotentials.from_list([np.zeros((0, K)), rng.normal(size=(2, K))],
                                  [np.zeros((0, 2), int), [(0, 1)]], potts=0.5)
    t = build_events(StructuredPrediction(g), [MAPEvent(), MarginalEvent()],
                     features=["phi_mp1", "phi_mg2"], y_true=[0, 1])
    assert t.item.tolist() == [1, 1, 1]
    assert np.all(np.isfinite(t.raw))


@pytest.fixture
def fitted(rng):
    lengths = [3, 1, 2] * 10
    pred = StructuredPrediction(chains(rng, lengths))
    y = [rng.integers(0, K, L) for L in lengths]
    kinds = [MAPEvent(), MarginalEvent(), LabelAt(2, 0, on_short="skip")]
    return StructuredRecalibrator(kinds, features=["phi_mp1", "phi_mg2"]).fit(pred, y)


@pytest.mark.parametrize("lengths", [[], [0], [0, 0], [1, 1], [2, 0, 1]])
def test_predict_with_kinds_without_events_is_empty(rng, fitted, lengths):
    out = fitted.predict(StructuredPrediction(chains(rng, lengths)))
    n_nonempty = sum(L > 0 for L in lengths)
    assert len(out.for_kind("map")) == n_nonempty
    assert len(out.for_kind("marginal")) == sum(lengths)
    assert len(out.for_kind("label_at[2]=0")) == sum(L > 2 for L in lengths)
    assert out.forecast.shape == (out.table.n_events,)
    assert np.all((out.forecast >= 0) & (out.forecast <= 1))


def test_fit_without_events_of_a_kind_names_the_kind(rng):
    pred = StructuredPrediction(chains(rng, [1, 2, 1]))
    rec = StructuredRecalibrator([MAPEvent(), LabelAt(5, 0, on_short="skip")],
                                 features=["phi_mp1", "phi_mg2"])
    with pytest.raises(ParameterError, match=r"no events of kind 'label_at\[5\]=0'"):
        rec.fit(pred, [[0], [0, 1], [2]])


def test_zero_length_item_is_not_a_certain_map_event(rng, fitted):
    """The reported bug: an empty item gave a MAP event 'holding' with raw P = 1."""
    out = fitted.predict(StructuredPrediction(chains(rng, [0])), y_true=np.zeros(0, int))
    assert out.table.n_events == 0 and out.forecast.shape == (0,)


# ---------------------------------------------------------------------------------------
# assignment_probability: integers only, in both forms


@pytest.mark.parametrize("query, arg", [
    ((0, {1: 2.7}), "label of queries"),
    ((0, {1: 2.0}), "label of queries"),
    ((0, {1.5: 2}), "position of queries"),
    ((0, {True: 2}), "position of queries"),
    ((0.0, {1: 2}), "chain of queries"),
    ((0, (1.0, [2])), "start of queries"),
    ((0, (1, [2.5])), "labels of queries"),
])
def test_assignment_probability_rejects_non_integers(rng, query, arg):
    p = chains(rng, [3, 1])
    with pytest.raises(ParameterTypeError, match=arg):
        assignment_probability(p, [query])


def test_assignment_probability_accepts_numpy_integers(rng):
    p = chains(rng, [3, 1])
    a = assignment_probability(p, [(np.int64(0), {np.int32(1): np.int64(2)})])
    b = assignment_probability(p, [(0, (1, [2]))])
    assert a == pytest.approx(b, rel=1e-12)


# ---------------------------------------------------------------------------------------
# model files


@pytest.fixture
def model_copy(tmp_path):
    from structcal.io import pretrained_path

    src = pretrained_path("ocr_chain_crf")
    for suffix in (".json", ".npz"):
        shutil.copy(str(src) + suffix, tmp_path / f"m{suffix}")
    return tmp_path / "m"


@pytest.mark.parametrize("damage", ["empty", "truncated", "corrupt", "not-zip", "no-array"])
def test_damaged_model_file_raises_parameter_error(model_copy, damage):
    from structcal.crf import ChainCRF
    from structcal.io import load

    npz = model_copy.with_name("m.npz")
    raw = npz.read_bytes()
    if damage == "no-array":  # a valid archive with an array of the wrong shape
        arrays = dict(np.load(npz))
        arrays = {k: np.zeros(1) for k in arrays}
        np.savez(npz, **arrays)
    else:
        npz.write_bytes({"empty": b"", "truncated": raw[: len(raw) // 2],
                         "corrupt": raw[:100] + b"x" * 100 + raw[200:],
                         "not-zip": b"hello" * 50}[damage])
    for loader in (ChainCRF.load, load):
        with pytest.raises(ParameterError, match="m.npz"):
            loader(model_copy)


def test_damaged_manifest_raises_parameter_error(model_copy):
    from structcal.io import load

    json_path = model_copy.with_name("m.json")
    for text in ("", "{", "[]", '{"format": "structcal-model"}'):
        json_path.write_text(text)
        with pytest.raises(ParameterError, match="m.json"):
            load(model_copy)


# ---------------------------------------------------------------------------------------
# Lexicon, bin edges, ownership of the potentials' arrays


def test_lexicon_accepts_the_empty_word_in_both_forms():
    a = Lexicon([[], [0, 1]], n_states=2)
    b = Lexicon(["", "ab"], n_states=2, alphabet="ab")
    offsets = np.array([0, 0, 2, 3])
    labels = np.array([0, 1, 1])
    assert a.n_words == b.n_words == 2
    assert a.contains(labels, offsets).tolist() == [True, True, False]
    assert b.contains(labels, offsets).tolist() == [True, True, False]
    with pytest.raises(ParameterTypeError, match="n_states"):
        Lexicon([[0]], n_states=2.5)


@pytest.mark.parametrize("n_bins", [3, 5, 7, 10, 15, 20])
def test_uniform_bins_follow_their_edges_exactly(n_bins):
    """Every forecast on, or one ulp either side of, an edge lands in the bin the
    documented rule ``edges[b] <= p < edges[b + 1]`` gives (issue: 0.3, 0.6, 0.7 at 10)."""
    from structcal.calibrators import HistogramBinning

    edges = np.arange(n_bins + 1) / n_bins
    p = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, 1)])
    p = np.clip(p, 0.0, 1.0)
    y = np.arange(p.shape[0]) % 2
    t = binned_calibration_error(y, p, n_bins=n_bins).table
    assert np.array_equal(t.bin_edges, edges)
    want = np.minimum(np.searchsorted(edges, p, side="right") - 1, n_bins - 1)
    assert t.counts.tolist() == np.bincount(want, minlength=n_bins).tolist()
    binning = HistogramBinning(n_bins=n_bins).fit(p, y)
    assert binning.maps_[0].bins(p).tolist() == want.tolist()


def test_bin_edges_of_ten_bins_at_the_reported_points():
    t = binned_calibration_error([0, 0, 0], [0.3, 0.6, 0.7], n_bins=3).table  # warm-up
    t = binned_calibration_error([0] * 12, [0.3, 0.6, 0.7] * 4, n_bins=10).table
    assert t.bin_edges[[3, 6, 7]].tolist() == [0.3, 0.6, 0.7]
    assert np.flatnonzero(t.counts).tolist() == [3, 6, 7]


def test_potentials_do_not_follow_the_callers_array():
    u = np.zeros((3, 2))
    pw = np.zeros((2, 2))
    p = ChainPotentials(u, [0, 3], pw)
    u[0, 0] = 5.0
    pw[0, 1] = 3.0
    assert p.unary[0, 0] == 0.0 and p.pairwise[0, 1] == 0.0
    view = u[:, :]
    q = ChainPotentials(view, [0, 3], pw)
    u[1, 1] = 7.0
    assert q.unary[1, 1] == 0.0
    with pytest.raises(ValueError):
        p.unary[0, 0] = 1.0
    # read-only all the way down (another batch's arrays): shared, not copied
    r = ChainPotentials(p.unary, p.offsets, p.pairwise)
    assert np.shares_memory(r.unary, p.unary)
    g = GraphPotentials(u, [0, 3], np.array([[0, 1]]), [0, 1], potts=np.array([1.0]))
    u[2, 0] = 9.0
    assert g.unary[2, 0] == 0.0
