"""Property-based tests: malformed and extreme inputs to every public entry point.

The contract (issue 15): each call returns a correct result or raises a documented
structcal error (:class:`~structcal.StructcalError`, a ``ValueError``/``TypeError``
subclass); it never crashes with another exception and never returns NaN where the
documentation promises a number. Documented warnings (sparse bins, non-convergence) are
allowed; any other warning is an error (``filterwarnings = error``).

Correctness against brute force on small problems is asserted where magnitudes keep the
probability-space passes exact (|potentials| <= 50); at large magnitudes these tests only
assert finiteness and normalisation (the certified chain numerics are tested in the chain
inference tests).
"""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from structcal import ChainPotentials, GraphPotentials, StructcalError, StructuredPrediction
from structcal.exceptions import ConvergenceWarning, SingleGroupWarning
from structcal.forecasters import SingleClassWarning
from structcal.metrics import SparseBinsWarning

FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# values a user might pass: ordinary, huge, tiny, infinite, NaN
WILD = st.one_of(
    st.floats(-10, 10),
    st.sampled_from([0.0, -0.0, 1e4, -1e4, 1e300, -1e300, 5e-324, np.inf, -np.inf, np.nan]),
)


def outcome(fn, *args, **kwargs):
    """``fn(...)``, or None when it raised a documented structcal error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SparseBinsWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", SingleClassWarning)
        warnings.simplefilter("ignore", SingleGroupWarning)
        try:
            return fn(*args, **kwargs)
        except StructcalError:
            return None


def assert_no_nan(*arrays):
    for a in arrays:
        assert not np.isnan(np.asarray(a, dtype=np.float64)).any()


# ---------------------------------------------------------------------------------------
# potentials constructors


@FUZZ
@given(
    unary=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                  max_side=4), elements=WILD),
    pairwise=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                     max_side=4), elements=WILD),
    offsets=st.lists(st.integers(-2, 6), max_size=5),
)
def test_chain_potentials_constructor(unary, pairwise, offsets):
    p = outcome(ChainPotentials, unary, offsets, pairwise)
    if p is not None:
        assert not np.isnan(p.unary).any() and not np.isposinf(p.unary).any()
        assert p.offsets[0] == 0 and p.offsets[-1] == p.n_tokens
        assert np.all(np.diff(p.offsets) >= 0)


@FUZZ
@given(
    unaries=st.lists(hnp.arrays(np.float64, st.tuples(st.integers(0, 4), st.integers(0, 3)),
                                elements=WILD), min_size=0, max_size=3),
    edges=st.lists(st.lists(st.tuples(st.integers(-1, 4), st.integers(-1, 4)), max_size=4),
                   max_size=3),
    potts=st.one_of(st.none(), WILD),
    pairwise=st.one_of(st.none(), hnp.arrays(np.float64, st.tuples(st.integers(1, 3),
                                                                    st.integers(1, 3)),
                                             elements=WILD)),
)
def test_graph_potentials_constructor(unaries, edges, potts, pairwise):
    p = outcome(GraphPotentials.from_list, unaries, edges, pairwise, potts=potts)
    if p is not None:
        assert not np.isnan(p.unary).any()
        assert p.edges.shape == (p.n_edges, 2)
        assert np.all(p.edges[:, 0] != p.edges[:, 1])


# ---------------------------------------------------------------------------------------
# chain inference


@st.composite
def chain_problems(draw, max_len=4):
    K = draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, max_len), min_size=1, max_size=3))
    scale = draw(st.sampled_from([1.0, 10.0, 50.0, 1e3, 1e4]))
    n = sum(lengths)
    n_edges = sum(max(L - 1, 0) for L in lengths)
    per_edge = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    unary = scale * rng.normal(size=(n, K))
    pw = scale * rng.normal(size=(n_edges, K, K) if per_edge else (K, K))
    if draw(st.booleans()):  # forbidden labels and transitions
        unary[rng.random(unary.shape) < 0.2] = -np.inf
        pw[rng.random(pw.shape) < 0.2] = -np.inf
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return ChainPotentials(unary, offsets, pw), scale


def brute_force(p, c):
    """All labelings of chain ``c`` with their scores."""
    s, e = p.offsets[c], p.offsets[c + 1]
    L, K = e - s, p.n_states
    labs = np.array(list(itertools.product(range(K), repeat=L)), dtype=int).reshape(K**L, L)
    scores = p.unary[s + np.arange(L), labs].sum(axis=1) if L else np.zeros(1)
    e0 = p.edge_offsets[c]
    for t in range(L - 1):
        mat = p.pairwise if p.pairwise.ndim == 2 else p.pairwise[e0 + t]
        scores = scores + mat[labs[:, t], labs[:, t + 1]]
    return labs, scores


@FUZZ
@given(chain_problems())
def test_chain_inference_is_finite_and_exact_when_moderate(problem):
    from scipy.special import logsumexp

    from structcal.inference import forward_backward, infer, kbest, log_probability, viterbi

    p, scale = problem
    r = outcome(infer, p)
    if r is None:  # documented: a chain with no labeling of positive probability
        return
    assert_no_nan(r.marginals, r.log_partition, r.map_score)
    assert np.all(np.isfinite(r.log_partition)) and np.all(np.isfinite(r.map_score))
    # (at magnitude 1e4, exp(score - log Z) rounds to within ~1e-11 of 1, above it)
    assert np.all((r.marginals >= 0) & (r.marginals <= 1 + 1e-9))
    if p.n_tokens:
        nonempty = np.diff(p.offsets) > 0
        sums = np.add.reduceat(r.marginals.sum(axis=1), p.offsets[:-1][nonempty])
        np.testing.assert_allclose(sums / np.diff(p.offsets)[nonempty], 1.0, rtol=1e-9)
    fb, vi = forward_backward(p), viterbi(p)
    assert_no_nan(fb.marginals, vi.map_score)
    kb = kbest(p, k=2)
    assert not np.isnan(kb.scores).any()
    lp = log_probability(p, r.map_labels)
    assert_no_nan(lp)
    if scale <= 50:
        for c in range(p.n_chains):
            labs, scores = brute_force(p, c)
            logz = logsumexp(scores)
            assert r.log_partition[c] == pytest.approx(logz, rel=1e-9, abs=1e-9)
            assert r.map_score[c] == pytest.approx(scores.max(), rel=1e-9, abs=1e-9)
            assert lp[c] == pytest.approx(scores.max() - logz, rel=1e-7, abs=1e-9)


@FUZZ
@given(chain_problems(max_len=3), st.data())
def test_chain_queries_with_wild_arguments(problem, data):
    from structcal.inference import assignment_probability, log_probability

    p, _ = problem
    anything = st.one_of(st.integers(-2, 5), st.floats(-1, 5), st.booleans(), st.none(),
                         st.text(max_size=2))
    chain = data.draw(anything)
    pos = data.draw(anything)
    lab = data.draw(anything)
    for query in ([(chain, {pos: lab})], [(chain, (pos, [lab]))], [(chain, pos)], (chain,)):
        r = outcome(assignment_probability, p, query)
        if r is not None:
            assert_no_nan(r)
            assert np.all((r >= 0) & (r <= 1 + 1e-9))
    labels = data.draw(hnp.arrays(np.float64, st.integers(0, 6), elements=WILD))
    r = outcome(log_probability, p, labels)
    if r is not None:
        assert_no_nan(r)


# ---------------------------------------------------------------------------------------
# graph inference


@st.composite
def graph_problems(draw):
    K = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(0, 5), min_size=1, max_size=3))
    scale = draw(st.sampled_from([1.0, 30.0, 1e3, 1e4]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    unaries, edges = [], []
    for n in sizes:
        u = scale * rng.normal(size=(n, K))
        if draw(st.booleans()):
            u[rng.random(u.shape) < 0.2] = -np.inf
        unaries.append(u)
        pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.5]
        edges.append(np.array(pairs, dtype=int).reshape(-1, 2))
    if draw(st.booleans()):
        return GraphPotentials.from_list(unaries, edges, potts=scale * rng.normal())
    return GraphPotentials.from_list(unaries, edges, scale * rng.normal(size=(K, K)))


@settings(FUZZ, max_examples=25)
@given(graph_problems(), st.sampled_from(["bp", "mf", "max", "trws", "icm"]))
def test_graph_inference_is_finite(p, method):
    from structcal.inference import (
        belief_propagation,
        icm,
        map_inference,
        max_product,
        mean_field,
    )

    run = {
        "bp": lambda: belief_propagation(p, log_partition=True),
        "mf": lambda: mean_field(p, log_partition=True),
        "max": lambda: max_product(p),
        "trws": lambda: map_inference(p),
        "icm": lambda: icm(p, np.zeros(p.n_nodes, dtype=int)),
    }[method]
    r = outcome(run)
    if r is None:
        return
    if r.marginals is not None:
        assert_no_nan(r.marginals)
        assert np.all((r.marginals >= 0) & (r.marginals <= 1 + 1e-9))
    if r.log_partition is not None:
        assert_no_nan(r.log_partition)
    if r.map_labels is not None:
        assert np.all((r.map_labels >= 0) & (r.map_labels < p.n_states))


# ---------------------------------------------------------------------------------------
# events and recalibration


@FUZZ
@given(chain_problems(max_len=3), st.data())
def test_build_events_and_recalibrator_on_any_batch(problem, data):
    from structcal.events import (
        AnyLabel,
        LabelAt,
        Lexicon,
        MAPEvent,
        MarginalEvent,
        Predicate,
        SpanEquals,
        build_events,
    )
    from structcal.forecasters import TreeRegionForecaster
    from structcal.recalibration import StructuredRecalibrator

    p, _ = problem
    K = p.n_states
    kinds = [MAPEvent(), MarginalEvent(), LabelAt(data.draw(st.integers(-3, 3)), 0,
                                                  on_short="skip"),
             SpanEquals(data.draw(st.integers(-2, 2)), [0, 0], on_short="skip"),
             AnyLabel(K - 1), Predicate(lambda y: bool(y.sum() % 2), "odd")]
    pred = StructuredPrediction(p, unstructured_scores=np.ones((p.n_tokens, K)))
    try:
        pred.marginals
    except StructcalError:  # an infeasible chain: documented
        return
    rng = np.random.default_rng(0)
    y = rng.integers(0, K, p.n_tokens)
    t = outcome(build_events, pred, kinds, y_true=y, features="table1",
                lexicon=Lexicon([[0]], n_states=K))
    assert t is not None
    assert np.all(np.isfinite(t.X))
    raw = t.raw[t.kind != 5]  # the predicate has no model probability (NaN, documented)
    assert np.all((raw >= 0) & (raw <= 1))
    rec = StructuredRecalibrator([MAPEvent(), MarginalEvent()], features=["phi_mp1", "phi_mg2"],
                                 forecaster=TreeRegionForecaster(min_samples_leaf=1))
    fitted = outcome(rec.fit, pred, y)
    if fitted is not None:
        out = fitted.predict(pred, y)
        assert_no_nan(out.forecast)
        assert np.all((out.forecast >= 0) & (out.forecast <= 1))


# ---------------------------------------------------------------------------------------
# metrics


PROBS = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.3, 0.7, 1 - 1e-16, 5e-324]))


@st.composite
def forecasts(draw):
    n = draw(st.integers(0, 40))
    if draw(st.booleans()):  # multiclass rows
        K = draw(st.integers(1, 4))
        P = draw(hnp.arrays(np.float64, (n, K), elements=PROBS))
        if draw(st.booleans()):
            P = P / np.where(P.sum(1, keepdims=True) > 0, P.sum(1, keepdims=True), 1.0)
        y = draw(hnp.arrays(np.int64, n, elements=st.integers(-1, K)))
    else:
        P = draw(hnp.arrays(np.float64, n, elements=st.one_of(PROBS, WILD)))
        y = draw(hnp.arrays(np.int64, n, elements=st.integers(-1, 2)))
    w = draw(st.one_of(st.none(), hnp.arrays(np.float64, n, elements=st.one_of(
        st.floats(0, 3), st.sampled_from([0.0, -1.0, np.inf, np.nan])))))
    return y, P, w


@FUZZ
@given(forecasts(), st.sampled_from(["binned", "quantile", "convex", "sqrt", "kde", "logit",
                                     "default", "debiased", "brier", "logloss"]))
def test_metrics_on_any_forecasts(data, name):
    from structcal import metrics as M

    y, P, w = data
    est = {
        "binned": lambda: M.binned_calibration_error(y, P, sample_weight=w),
        "quantile": lambda: M.binned_calibration_error(y, P, strategy="quantile",
                                                       sample_weight=w),
        "convex": lambda: M.binned_calibration_error(y, P, mapping="convex", sample_weight=w),
        "sqrt": lambda: M.binned_calibration_error(y, P, n_bins="sqrt", sample_weight=w),
        "kde": lambda: M.kde_calibration_error(y, P, sample_weight=w, grid_size=257),
        "logit": lambda: M.kde_calibration_error(y, P, scale="logit", sample_weight=w,
                                                 grid_size=257),
        "default": lambda: M.calibration_error(y, P, sample_weight=w),
        "debiased": lambda: M.debiased_calibration_error(y, P, sample_weight=w),
        "brier": lambda: M.brier_decomposition(y, P, sample_weight=w),
        "logloss": lambda: M.log_loss_decomposition(y, P, sample_weight=w),
    }[name]
    r = outcome(est)
    if r is None:
        return
    if isinstance(r, M.CalibrationErrorResult):
        assert np.isfinite(r.estimate) and r.estimate >= 0
        assert np.isfinite(r.max_error)
        ci = outcome(r.confidence_interval, n_resamples=20, random_state=0)
        if ci is not None:
            assert ci.low <= r.estimate <= ci.high
            assert np.isfinite(ci.low) and np.isfinite(ci.high)
    else:
        values = [v for v in vars(r).values() if isinstance(v, float)]
        assert_no_nan(values)


# ---------------------------------------------------------------------------------------
# calibrators


# Subnormal scores and scores a few ulps apart (1 and 1 - 1e-16) once crashed PlattScaling
# and SplineCalib (division by zero, scipy's LinAlgError): both are in the mix.
CAL_SCORES = st.one_of(
    st.floats(-10, 10),
    st.sampled_from([0.0, 1.0, 0.3, 0.7, 1 - 1e-16, 5e-324, -5e-324, 1e4, -1e4, 1e300, -1e300, np.inf,
                     -np.inf, np.nan]),
)


@FUZZ
@given(
    st.integers(0, 30).flatmap(lambda n: st.tuples(
        hnp.arrays(np.float64, n, elements=CAL_SCORES),
        hnp.arrays(np.int64, n, elements=st.integers(0, 1)),
    )),
    st.sampled_from(["platt", "isotonic", "spline", "temperature", "histogram"]),
)
def test_calibrators_on_any_scores(data, name):
    from structcal import calibrators as C

    s, y = data
    model = {
        "platt": lambda: C.PlattScaling(),
        "isotonic": lambda: C.IsotonicCalibration(),
        "spline": lambda: C.SplineCalib(n_knots=5, cv=2, random_state=0),
        "temperature": lambda: C.TemperatureScaling(),
        "histogram": lambda: C.HistogramBinning(n_bins=5),
    }[name]()
    X = s if name != "temperature" else np.stack([np.zeros_like(s), s], axis=1)
    fitted = outcome(model.fit, X, y)
    if fitted is None:
        return
    q = outcome(fitted.predict_proba, X)
    assert q is not None
    assert_no_nan(q)
    assert np.all((q >= 0) & (q <= 1))
