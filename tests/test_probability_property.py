"""Every number structcal returns as a probability is one: finite, in [0, 1], and rows of
marginals sum to 1 within 1e-12, at every magnitude of the scores (1e-3 to 1e300) and with
forbidden (-inf) labels and transitions. A fast slice runs by default; the full sweep is
marked slow."""

import warnings

import numpy as np
import pytest

from structcal import ChainPotentials, GraphPotentials, StructuredPrediction, StructuredRecalibrator
from structcal.adapters import TagScheme
from structcal.events import (
    AllEntitiesCorrect,
    AllObjectsFound,
    AnyLabel,
    ContainsEntity,
    EntitySpans,
    InLexicon,
    LabelAt,
    Lexicon,
    MAPEvent,
    MarginalEvent,
    ObjectCountCorrect,
    ObjectEvents,
    SpanEquals,
    build_events,
)
from structcal.inference import (
    assignment_probability,
    belief_propagation,
    forward_backward,
    infer,
    log_probability,
    mean_field,
    pseudo_marginals,
)

TAGS = ["O", "B-A", "I-A", "B-B", "I-B"]


def _check_probabilities(x, what, rows=False):
    x = np.asarray(x, dtype=np.float64)
    assert np.isfinite(x).all(), f"{what}: not finite"
    assert (x >= 0).all() and (x <= 1).all(), f"{what}: outside [0, 1] ({x.min()}, {x.max()})"
    if rows:
        flat = x.reshape(x.shape[0], -1)
        assert np.abs(flat.sum(axis=1) - 1).max() <= 1e-12, f"{what}: rows do not sum to 1"


def _chain_batch(scale, seed, K=5, n_chains=12, neginf=0.15):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 8, size=n_chains)
    n = int(lengths.sum())
    s = rng.normal(size=(n, K)) * scale
    T = rng.normal(size=(K, K)) * scale
    s[rng.random(s.shape) < neginf] = -np.inf
    s[np.arange(n), rng.integers(0, K, n)] = rng.normal(size=n) * scale  # a label per token
    T[rng.random(T.shape) < neginf] = -np.inf
    np.fill_diagonal(T, rng.normal(size=K) * scale)  # staying on a label is always allowed
    s[np.arange(n), 0] = np.where(np.isneginf(s[:, 0]), rng.normal(size=n) * scale, s[:, 0])
    return ChainPotentials.from_scores(s, lengths=lengths, transitions=T), lengths


def _check_chain(scale, seed):
    p, lengths = _chain_batch(scale, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PrecisionWarning at the largest magnitudes
        r = forward_backward(p, edge_marginals=True)
        _check_probabilities(r.marginals, "marginals", rows=True)
        _check_probabilities(r.edge_marginals, "edge marginals", rows=True)
        v = infer(p)
        _check_probabilities(pseudo_marginals(p, v.map_labels), "pseudo-marginals", rows=True)
        _check_probabilities(np.exp(log_probability(p, v.map_labels)), "MAP probability")
        q = [(c, (0, [int(v.map_labels[p.offsets[c]])])) for c in range(p.n_chains)]
        _check_probabilities(assignment_probability(p, q), "assignment probability")
        pred = StructuredPrediction(p)
        lex = Lexicon([[0, 1], [2], [0, 0, 0]], n_states=p.n_states)
        kinds = [MAPEvent(), MarginalEvent(), LabelAt(0, 1), SpanEquals(0, [0], on_short="skip"),
                 AnyLabel(2), InLexicon(lex), EntitySpans(TAGS),
                 ContainsEntity(TAGS, types=["A"]), AllEntitiesCorrect(TAGS)]
        t = build_events(pred, kinds, features=["raw"])
        _check_probabilities(t.raw, "event raw probabilities")
        _check_probabilities(pred.map_probability, "StructuredPrediction.map_probability")


def _graph_batch(scale, seed, K=3):
    rng = np.random.default_rng(seed)
    unaries, edges = [], []
    for _ in range(4):
        n = int(rng.integers(2, 9))
        u = rng.normal(size=(n, K)) * scale
        u[rng.random(u.shape) < 0.1] = -np.inf
        u[np.arange(n), rng.integers(0, K, n)] = rng.normal(size=n) * scale
        unaries.append(u)
        e = [(i, i + 1) for i in range(n - 1)] + [(0, n - 1)] * (n > 2)
        edges.append(e)
    return GraphPotentials.from_list(unaries, edges, potts=abs(rng.normal()) * scale)


def _check_graph(scale, seed):
    p = _graph_batch(scale, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings at large magnitudes
        _check_probabilities(mean_field(p).marginals, "mean-field marginals", rows=True)
        _check_probabilities(belief_propagation(p).marginals, "BP marginals", rows=True)
        pred = StructuredPrediction(p)
        kinds = [MAPEvent(), MarginalEvent(), ObjectEvents(), AllObjectsFound(n_samples=8),
                 ObjectCountCorrect(n_samples=8)]
        t = build_events(pred, kinds, features=["raw"])
        _check_probabilities(t.raw, "graph event raw probabilities")


SCALES_FAST = [1e-3, 1.0, 30.0, 1e4, 1e15, 1e300]
SCALES_SLOW = [10.0**e for e in range(-3, 301, 9)] + [1e300]


@pytest.mark.parametrize("scale", SCALES_FAST)
def test_chain_probabilities_are_probabilities(scale):
    for seed in range(3):
        _check_chain(scale, seed)


@pytest.mark.parametrize("scale", SCALES_FAST)
def test_graph_probabilities_are_probabilities(scale):
    _check_graph(scale, 0)


@pytest.mark.slow
@pytest.mark.parametrize("scale", SCALES_SLOW)
def test_probabilities_at_scale(scale):
    for seed in range(20):
        _check_chain(scale, seed)
        _check_graph(scale, seed)


def test_reproducer_marginal_rounding_past_one():
    s = np.array([[9.7, -9.5, 13.4], [-27.7, 33.3, -3.8], [10.7, 15.5, 4.9]])
    r = infer(ChainPotentials.from_scores(s, lengths=[3], transitions=np.zeros((3, 3))))
    assert r.marginals.max() <= 1.0
    _check_probabilities(r.marginals, "marginals", rows=True)
    for scale in (20, 100, 1e3):
        rng = np.random.default_rng(0)
        p = ChainPotentials.from_scores(rng.normal(size=(50, 4)) * scale, lengths=[10] * 5,
                                        transitions=np.zeros((4, 4)))
        _check_probabilities(infer(p).marginals, "marginals", rows=True)


def test_large_magnitude_marginals_are_exact_where_float64_can_tell():
    # every score a multiple of 2**40 (exact in float64, so every sum is exact): the
    # marginals must be those of brute force at the same magnitude
    from structcal.inference.exact import exact_chain

    rng = np.random.default_rng(3)
    unit = 2.0**40
    s = rng.integers(-3, 4, size=(4, 3)) * unit
    s[0, 0] += 1.0  # a near-tie broken by one nat
    p = ChainPotentials.from_scores(s, lengths=[4], transitions=np.zeros((3, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = infer(p).marginals
    ref = exact_chain(p, 0)
    np.testing.assert_allclose(m, ref.marginals, atol=1e-12)


def test_magnitudes_above_the_bound_are_refused():
    from structcal import ParameterError

    s = np.zeros((3, 2))
    s[1, 0] = 1e302
    with pytest.raises(ParameterError, match="at most 1.07e\\+301 in magnitude"):
        ChainPotentials.from_scores(s, lengths=[3], transitions=np.zeros((2, 2)))
    with pytest.raises(ParameterError, match="magnitude"):
        GraphPotentials.from_list([np.array([[0.0, -1e303]])], [[]])


def test_precision_warning_names_the_accuracy():
    from structcal.exceptions import PrecisionWarning

    rng = np.random.default_rng(0)
    p = ChainPotentials.from_scores(rng.normal(size=(20, 3)) * 1e14, lengths=[20],
                                    transitions=np.zeros((3, 3)))
    with pytest.warns(PrecisionWarning, match="relative accuracy of about"):
        infer(p)
    # ordinary magnitudes: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        infer(ChainPotentials.from_scores(rng.normal(size=(200, 3)) * 30, lengths=[100, 100],
                                          transitions=np.zeros((3, 3))))


def test_recalibrator_and_scheme_outputs_are_probabilities():
    p, lengths = _chain_batch(3.0, 0, n_chains=120, neginf=0.0)
    pred = StructuredPrediction(p)
    rng = np.random.default_rng(0)
    y = infer(p).map_labels.copy()
    flip = rng.random(y.shape[0]) < 0.3
    y[flip] = rng.integers(0, p.n_states, flip.sum())
    assert TagScheme(TAGS).n_tags == p.n_states  # entities read with a 5-tag BIO scheme
    rec = StructuredRecalibrator(kinds=[MAPEvent(), MarginalEvent(),
                                        EntitySpans(TAGS, invalid_gold="conlleval")],
                                 shift_check=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.fit(pred.subset(np.arange(60)), y[: p.offsets[60]])
    out = rec.predict(pred.subset(np.arange(60, 120)))
    _check_probabilities(out.forecast, "recalibrated forecasts")
    assert (out.forecast > 0).all() and (out.forecast < 1).all()
