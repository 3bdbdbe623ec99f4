"""The NumPy tier of chain inference, the k-NN maps and the shift statistics equals the
Numba kernels: labels, neighbours and statistics bit for bit, probabilities to 1e-12."""

import warnings

import numpy as np
import pytest

from structcal import ChainPotentials
from structcal._tier import SMALL_WORK, forced_tier, numpy_tier
from structcal.exceptions import InfeasibleError, ParameterError, PrecisionWarning
from structcal.inference import chain as ci


def _problem(seed, *, shared, scale=3.0, forbid=0.0, ties=False, K=None):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 6)) if K is None else K
    lengths = rng.integers(0, 7, size=int(rng.integers(1, 6)))
    n, n_edges = int(lengths.sum()), int(np.maximum(lengths - 1, 0).sum())

    def draw(shape):
        x = rng.integers(-2, 3, size=shape).astype(float) if ties else rng.normal(size=shape) * scale
        if forbid:
            x[rng.random(shape) < forbid] = -np.inf
        return x

    unary = draw((n, K))
    pairwise = draw((K, K)) if shared else draw((n_edges, K, K))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return ChainPotentials(unary, offsets, pairwise)


SETTINGS = [
    dict(shared=True), dict(shared=False), dict(shared=True, ties=True),
    dict(shared=False, ties=True), dict(shared=True, forbid=0.3), dict(shared=False, forbid=0.3),
    dict(shared=True, scale=1e3), dict(shared=False, scale=1e150),
]


def _both(f):
    out = {}
    for tier in ("numpy", "kernels"):
        with forced_tier(tier), warnings.catch_warnings():
            warnings.simplefilter("ignore", PrecisionWarning)  # the 1e150 setting
            try:
                out[tier] = f()
            except InfeasibleError as e:
                out[tier] = type(e)
    return out["numpy"], out["kernels"]


def _close(a, b, scale):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    same_inf = np.isinf(a) == np.isinf(b)
    assert same_inf.all() and (a[np.isinf(a)] == b[np.isinf(b)]).all()
    fin = np.isfinite(a)
    np.testing.assert_allclose(a[fin], b[fin], rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("setting", range(len(SETTINGS)))
@pytest.mark.parametrize("seed", range(25))
def test_inference_tiers_agree(setting, seed):
    kw = SETTINGS[setting]
    p = _problem(seed, **kw)
    scale = max(1.0, float(np.abs(p.unary[np.isfinite(p.unary)]).max(initial=0.0)),
                float(np.abs(p.pairwise[np.isfinite(p.pairwise)]).max(initial=0.0)))
    a, b = _both(lambda: ci.infer(p, edge_marginals=True))
    if a is InfeasibleError or b is InfeasibleError:
        assert a is b
    else:
        np.testing.assert_array_equal(a.map_labels, b.map_labels)
        np.testing.assert_array_equal(a.map_score, b.map_score)
        _close(a.log_partition, b.log_partition, scale * max(p.n_tokens, 1))
        _close(a.marginals, b.marginals, 1.0)
        _close(a.edge_marginals, b.edge_marginals, 1.0)
    a, b = _both(lambda: ci.viterbi(p))
    if a is InfeasibleError or b is InfeasibleError:
        assert a is b
    else:
        np.testing.assert_array_equal(a.map_labels, b.map_labels)
        np.testing.assert_array_equal(a.map_score, b.map_score)
    for k in (1, 2, 3, 7, 10):  # (10: past the rounds of argmax, a stable sort)
        a, b = _both(lambda: ci.kbest(p, k))
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.scores, b.scores)
        np.testing.assert_array_equal(a.n_found, b.n_found)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, p.n_states, size=p.n_tokens)
    a, b = _both(lambda: ci.score_labelings(p, labels))
    np.testing.assert_array_equal(a, b)
    a, b = _both(lambda: ci.pseudo_marginals(p, labels))
    if a is InfeasibleError or b is InfeasibleError:
        assert a is b
    else:
        _close(a, b, 1.0)
    # constrained log-partition: a few random queries with random allowed sets
    n_q = 6
    chains = rng.integers(0, p.n_chains, size=n_q)
    counts = np.array([rng.integers(0, p.lengths[c] + 1) for c in chains])
    positions = np.concatenate([rng.choice(p.lengths[c], size=m, replace=False)
                                for c, m in zip(chains, counts)]).astype(np.int64)
    allowed = rng.random((positions.shape[0], p.n_states)) < 0.6
    q_off = np.concatenate([[0], np.cumsum(counts)])
    a, b = _both(lambda: ci.constrained_log_partition(p, chains, q_off, positions, allowed))
    _close(a, b, scale * max(p.n_tokens, 1))


@pytest.mark.parametrize("seed", range(12))
def test_scaled_pass_certifies_chain_by_chain_as_the_kernels_do(seed):
    """A batch sharing one matrix whose chains span from a few to thousands of nats, with
    forbidden entries: the NumPy tier keeps the scaled pass for the same chains as the
    kernels (the same number fall back to log space) and equals them to 1e-12."""
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 9))
    lengths = rng.integers(0, 12, size=40)
    n = int(lengths.sum())
    scale = np.repeat(10.0 ** rng.uniform(-1, 3.5, size=40), lengths)[:, None]
    unary = rng.normal(size=(n, K)) * scale
    unary[rng.random((n, K)) < 0.15] = -np.inf
    unary[np.arange(n), rng.integers(0, K, n)] = rng.normal(size=n)  # a finite label each
    pw = rng.normal(size=(K, K)) * float(rng.choice([1.0, 30.0, 300.0]))
    pw[rng.random((K, K)) < 0.2] = -np.inf
    pw[np.arange(K), np.arange(K)] = 0.0  # staying is always allowed: every chain feasible
    p = ChainPotentials(unary, np.concatenate([[0], np.cumsum(lengths)]), pw)
    a, b = _both(lambda: ci.infer(p, edge_marginals=True))
    assert a.n_fallback == b.n_fallback
    big = max(1.0, float(np.abs(unary[np.isfinite(unary)]).max()))
    _close(a.log_partition, b.log_partition, big * max(n, 1))
    _close(a.marginals, b.marginals, 1.0)
    _close(a.edge_marginals, b.edge_marginals, 1.0)
    np.testing.assert_allclose(a.marginals.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_the_tier_follows_the_size_of_the_work():
    assert numpy_tier(SMALL_WORK) and not numpy_tier(SMALL_WORK + 1)
    with forced_tier("kernels"):
        assert not numpy_tier(1)
        with forced_tier("numpy"):
            assert numpy_tier(10 * SMALL_WORK)
    with pytest.raises(ParameterError, match="tier"):
        with forced_tier("fast"):
            pass


def test_mid_size_chain_work_rents_numpy_until_the_kernels_are_bought(monkeypatch, tmp_path):
    """Between SMALL_WORK and LARGE_WORK: the kernels if this install compiled them (their
    cache index file exists), else NumPy, billed to a file of the install's cache folder,
    until the bill reaches RENT_SECONDS; then the kernels."""
    import structcal._cache as cache
    import structcal._tier as tier

    monkeypatch.setattr(cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(tier, "_ready", set())
    mid = 3 * SMALL_WORK
    assert numpy_tier(mid, kernel="inference/_chain.infer_batch")
    bill = tmp_path / "bills" / "numpy_rent_seconds"
    assert float(bill.read_text()) == pytest.approx(mid * tier.SECONDS_PER_STEP)
    assert not numpy_tier(mid) and not numpy_tier(tier.LARGE_WORK + 1, kernel="inference/_chain.x")
    (tmp_path / "inference").mkdir()
    (tmp_path / "inference" / "_chain.infer_batch-949.py311.nbi").write_bytes(b"")
    assert tier.kernel_compiled("inference/_chain.infer_batch")
    assert not tier.kernel_compiled("inference/_chain.infer")  # a name is matched whole
    assert not numpy_tier(mid, kernel="inference/_chain.infer_batch")
    assert numpy_tier(mid, kernel="inference/_chain.kbest_batch")
    bill.write_text(repr(tier.RENT_SECONDS))  # the NumPy bill has paid for a compilation
    assert not numpy_tier(mid, kernel="inference/_chain.kbest_batch")
    bill.write_text("garbled")  # an unreadable bill counts from 0
    assert numpy_tier(mid, kernel="inference/_chain.kbest_batch")
    assert numpy_tier(SMALL_WORK, kernel="inference/_chain.kbest_batch")


def test_small_work_moves_to_cached_kernels_once_the_process_has_spent_load_seconds(
        monkeypatch, tmp_path):
    """Small work of a path with a kernel: NumPy for a process's first LOAD_SECONDS of it;
    then the kernel if it is cached, or if the install's bill (to which the process adds
    its NumPy seconds, once per LOAD_SECONDS) has paid for compiling it. Tiny work and
    paths without a kernel stay in NumPy."""
    import structcal._cache as cache
    import structcal._tier as tier

    monkeypatch.setattr(cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(tier, "_ready", set())
    (tmp_path / "inference").mkdir()
    (tmp_path / "inference" / "_chain.infer_batch-949.py311.nbi").write_bytes(b"")
    small = SMALL_WORK // 2  # 0.04 s at SECONDS_PER_STEP
    calls = int(np.ceil(tier.LOAD_SECONDS / (small * tier.SECONDS_PER_STEP)))
    bill = tmp_path / "bills" / "numpy_rent_seconds"
    for i in range(calls):
        assert numpy_tier(small, kernel="inference/_chain.infer_batch"), i
        assert bill.exists() == (i == calls - 1)  # billed once LOAD_SECONDS are spent
    assert float(bill.read_text()) == pytest.approx(calls * small * tier.SECONDS_PER_STEP)
    assert not numpy_tier(small, kernel="inference/_chain.infer_batch")  # cached: loaded
    assert numpy_tier(small, kernel="inference/_chain.kbest_batch")  # not cached: rented
    assert numpy_tier(tier.TINY_WORK - 1, kernel="inference/_chain.infer_batch")
    assert numpy_tier(small)
    with forced_tier("numpy"):
        assert numpy_tier(small, kernel="inference/_chain.infer_batch")
    bill.write_text(repr(tier.RENT_SECONDS - tier.LOAD_SECONDS))  # other processes' NumPy
    for _ in range(calls + 1):  # rented until this process's next billing reaches RENT
        if float(bill.read_text()) >= tier.RENT_SECONDS:
            break
        assert numpy_tier(small, kernel="inference/_chain.kbest_batch")
    assert float(bill.read_text()) >= tier.RENT_SECONDS
    assert not numpy_tier(small, kernel="inference/_chain.kbest_batch")  # bought: compiled


def test_small_work_moves_sooner_where_numba_is_imported_or_a_kernel_loaded(
        monkeypatch, tmp_path):
    """What small work must rent before it runs a cached kernel is what loading the kernel
    still costs the process: LOAD_SECONDS without Numba, FIRST_LOAD_SECONDS with Numba
    imported (for other work) but no kernel loaded, KERNEL_LOAD_SECONDS once a kernel is
    loaded; loading or compiling any kernel marks the process."""
    import structcal._cache as cache
    import structcal._tier as tier

    monkeypatch.setattr(cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(tier, "_ready", {"inference/_chain.infer_batch"})
    call = 0.04  # seconds of NumPy work a call (SMALL_WORK // 2 steps)
    small = SMALL_WORK // 2
    assert small * tier.SECONDS_PER_STEP == pytest.approx(call)
    assert tier.KERNEL_LOAD_SECONDS < tier.FIRST_LOAD_SECONDS < tier.LOAD_SECONDS

    def numpy_calls():
        tier._process_bill[:] = [0.0, 0.0, 0.0]
        n = 0
        while numpy_tier(small, kernel="inference/_chain.infer_batch"):
            n += 1
        return n

    assert tier._load_seconds() == tier.LOAD_SECONDS
    assert numpy_calls() == int(np.ceil(tier.LOAD_SECONDS / call))
    monkeypatch.setattr(tier, "_numba_imported", lambda: True)
    assert numpy_calls() == int(np.ceil(tier.FIRST_LOAD_SECONDS / call))
    tier._kernel_loaded[0] = True
    assert numpy_calls() == int(np.ceil(tier.KERNEL_LOAD_SECONDS / call)) == 1
    # a kernel's load (or compilation) in a process marks it
    from structcal._numba import KernelDispatcher
    from structcal.inference import _chain

    dispatcher = _chain.infer_batch.serial
    assert isinstance(dispatcher, KernelDispatcher)
    with forced_tier("kernels"):
        ci.viterbi(ChainPotentials.from_list([np.zeros((3, 2))], np.zeros((2, 2))))
    tier._kernel_loaded[0] = False
    dispatcher.compile(next(iter(dispatcher.overloads)))  # loaded already: nothing to do
    assert tier._kernel_loaded[0]


def test_a_short_job_bills_nothing_and_stays_in_numpy(monkeypatch, tmp_path):
    import structcal._cache as cache
    import structcal._tier as tier

    monkeypatch.setattr(cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(tier, "_ready", {"inference/_chain.infer_batch"})
    small = SMALL_WORK // 2
    while tier._process_bill[0] + small * tier.SECONDS_PER_STEP < tier.LOAD_SECONDS:
        assert numpy_tier(small, kernel="inference/_chain.infer_batch")
    assert not (tmp_path / "bills").exists()


def test_large_work_moves_the_limit_of_renting(monkeypatch, tmp_path):
    """A path whose kernel costs more to compile rents NumPy up to its own ``large_work``
    (the k-NN tree: 2 s of NumPy) instead of LARGE_WORK."""
    import structcal._cache as cache
    import structcal._tier as tier

    monkeypatch.setattr(cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(tier, "_ready", set())
    past = 2 * tier.LARGE_WORK
    assert not numpy_tier(past, kernel="_knn.build_kdtree")
    assert numpy_tier(past, kernel="_knn.build_kdtree", large_work=3 * tier.LARGE_WORK)
    assert not numpy_tier(4 * tier.LARGE_WORK, kernel="_knn.build_kdtree",
                          large_work=3 * tier.LARGE_WORK)
    (tmp_path / "_knn.build_kdtree-79.py311.nbi").write_bytes(b"")  # compiled: the kernel
    assert not numpy_tier(past, kernel="_knn.build_kdtree", large_work=3 * tier.LARGE_WORK)


@pytest.mark.parametrize("n", [50, 3000, 9000])
def test_knn_tree_tiers_build_the_same_tree(n):
    """The tree of a fit is the same whichever tier builds it (NumPy, or the kernel)."""
    from structcal._regions import _build_tree

    rng = np.random.default_rng(n)
    X = np.column_stack([np.round(rng.normal(size=(n, 3)), 1),
                         np.eye(6)[rng.integers(0, 6, n)]])
    with forced_tier("numpy"):
        a = _build_tree(X)
    with forced_tier("kernels"):
        b = _build_tree(X)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("seed", range(6))
def test_knn_map_tiers_agree_with_ties(seed):
    """k-NN forecasts by a scan equal the KD-tree kernel's bit for bit, with many equal
    distances (discrete features) where the tie rule decides."""
    from structcal.forecasters import KNNRegionForecaster

    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(300, 2 + seed % 3)).astype(float)
    y = rng.random(300) < 0.3 + 0.2 * X[:, 0]
    m = KNNRegionForecaster(n_neighbors=int(rng.integers(1, 60)), prior=seed % 2,
                            random_state=seed).fit(X, y).to_map()
    Xq = rng.integers(-1, 4, size=(80, X.shape[1])).astype(float)
    a, b = _both(lambda: m.predict_proba(Xq))
    np.testing.assert_array_equal(a, b)



@pytest.mark.parametrize("seed", range(8))
def test_knn_cross_validation_tiers_agree(seed):
    """The held-out losses of every k by a scan equal the KD-tree kernel's (the same
    neighbours out of fold, ties to the lower row; the sum over events in another order),
    and the same k is chosen: discrete features (ties), groups, a prior."""
    from structcal.forecasters import _knn_cross_validate

    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(30, 400)), int(rng.integers(1, 5))
    X = rng.normal(size=(n, d))
    if seed % 2:
        X = np.round(X, 1)
    y = (rng.random(n) < 0.4).astype(float)
    grid = np.array([1, 2, 5, 10, 15, 25, 40, 60])
    groups = np.arange(n) // 4 if seed % 3 == 0 else None
    a, b = _both(lambda: _knn_cross_validate(X, y, grid, 5, np.random.default_rng(seed),
                                             groups=groups, prior=0.5 * (seed % 2)))
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1]["k"], b[1]["k"])
    np.testing.assert_allclose(a[1]["l2"], b[1]["l2"], rtol=1e-12, atol=0)


def test_pav_tiers_agree_bit_for_bit():
    from structcal.calibrators._isotonic import pav

    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(0, 200))
        y, w = rng.random(n), rng.random(n) + 0.05
        if trial % 2:
            y = np.round(y, 1)  # equal neighbours: pooling on ties
        a, b = _both(lambda: pav(y, w))
        np.testing.assert_array_equal(a, b)
        assert (np.diff(a) >= 0).all()


def test_a_small_fit_imports_no_numba():
    """Fitting a recalibrator on 100 chains (k-NN cross-validation, isotonic maps, shift
    reference) and predicting 100 more runs in NumPy: nothing to compile. Neither step
    imports scikit-learn or SciPy's statistics."""
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from structcal import ChainPotentials, StructuredPrediction, StructuredRecalibrator
from structcal.events import MAPEvent, MarginalEvent
rng = np.random.default_rng(0)
lengths = rng.integers(4, 10, size=200)
truth = rng.integers(0, 5, size=lengths.sum())
scores = rng.normal(size=(lengths.sum(), 5))
scores[np.arange(truth.size), truth] += 1.5
pred = StructuredPrediction(ChainPotentials.from_scores(scores, lengths=lengths,
                                                        transitions=np.zeros((5, 5))))
half = int(lengths[:100].sum())
rec = StructuredRecalibrator(kinds=[MAPEvent(), MarginalEvent()], random_state=0)
rec.fit(pred.subset(np.arange(100)), truth[:half])
out = rec.predict(pred.subset(np.arange(100, 200)))
assert np.isfinite(out.forecast).all()
print([m for m in ("sklearn", "scipy.stats") if m in sys.modules])
print("numba" in sys.modules)
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "STRUCTCAL_TIER"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert res.stdout.strip().splitlines()[-2:] == ["[]", "False"], res.stdout + res.stderr


@pytest.mark.parametrize("seed", range(4))
def test_shift_statistics_tiers_agree(seed):
    """The permutation KS statistics (ties and NaN included) are the kernel's bit for bit."""
    from structcal.shift import group_shift_test

    rng = np.random.default_rng(seed)
    ref = rng.integers(0, 4, size=(300, 3)).astype(float)
    new = rng.integers(0, 4, size=(120, 3)).astype(float) + (seed % 2)
    ref[rng.random(ref.shape) < 0.05] = np.nan
    g_ref, g_new = np.arange(300) // 5, np.arange(120) // 4
    a, b = _both(lambda: group_shift_test(ref, new, g_ref, g_new, random_state=seed))
    assert a.statistic == b.statistic and a.pvalue == b.pvalue
    np.testing.assert_array_equal(a.statistic_columns, b.statistic_columns)
    np.testing.assert_array_equal(a.pvalue_columns, b.pvalue_columns)


def test_the_shift_statistics_follow_the_rule_for_small_work(monkeypatch):
    """The shift test's small work rents NumPy under its kernel's name (so a process that
    has loaded kernels runs it in the cached kernel); past SMALL_WORK the kernel runs."""
    import structcal._tier as tier
    from structcal import shift

    asked = []
    monkeypatch.setattr(tier, "_rent_small", lambda seconds, kernel: asked.append(kernel) or True)
    rng = np.random.default_rng(0)
    ref, new = rng.normal(size=(300, 3)), rng.normal(size=(120, 3))
    shift.group_shift_test(ref, new, np.arange(300) // 5, np.arange(120) // 4, random_state=0)
    assert asked == ["_shift_kernels.ks_permutations"]
    assert not tier.numpy_tier(SMALL_WORK + 1, kernel="_shift_kernels.ks_permutations",
                               large_work=SMALL_WORK)


def test_an_unknown_tier_in_the_environment_is_named(tmp_path):
    import subprocess
    import sys

    code = ("import numpy as np; from structcal import ChainPotentials;"
            "from structcal.inference import infer;"
            "infer(ChainPotentials.from_scores(np.zeros((3, 2)), lengths=[3],"
            " transitions=np.zeros((2, 2))))")
    env = dict(__import__("os").environ, STRUCTCAL_TIER="fast")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "STRUCTCAL_TIER must be one of" in r.stderr


@pytest.mark.parametrize("seed", range(6))
def test_lexicon_lookup_tiers_agree(seed):
    """Lexicon.contains walks the trie in NumPy for a small batch: the kernel's answers,
    with empty labelings, prefixes of words and words longer than any in the lexicon."""
    from structcal.events import Lexicon

    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 6))
    words = [rng.integers(0, K, size=int(rng.integers(0, 6))).tolist() for _ in range(30)]
    lex = Lexicon(words, n_states=K)
    items = [w for w in words[:10]] + [w[:-1] for w in words[10:20] if w] + [
        rng.integers(0, K, size=int(rng.integers(0, 9))).tolist() for _ in range(40)]
    labels = np.array([x for w in items for x in w], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in items])])
    with forced_tier("numpy"):
        a = lex.contains(labels, offsets)
    with forced_tier("kernels"):
        b = lex.contains(labels, offsets)
    np.testing.assert_array_equal(a, b)
    assert a[:10].all()
    want = {tuple(w) for w in words}
    assert a.tolist() == [tuple(w) in want for w in items]


def test_a_process_that_keeps_calling_moves_small_work_to_the_cached_kernels(tmp_path):
    """End to end, in fresh processes sharing the cache: once the chain kernel is cached,
    a process that keeps running small batches starts in NumPy (Numba not imported) and,
    after LOAD_SECONDS of estimated NumPy work, runs the kernel; its results agree with
    the NumPy tier's (labels equal, marginals to 1e-12)."""
    import os
    import subprocess
    import sys

    setup = """
import numpy as np
from structcal import ChainPotentials
rng = np.random.default_rng(0)
lengths = rng.integers(5, 15, size=400)
p = ChainPotentials.from_scores(3 * rng.normal(size=(lengths.sum(), 12)), lengths=lengths,
                                transitions=rng.normal(size=(12, 12)))
"""
    compile_it = setup + """
from structcal._tier import forced_tier
from structcal.inference import infer
with forced_tier("kernels"):
    infer(p)
"""
    loop = setup + """
import sys
from structcal import _tier
from structcal.inference import infer
work = p.n_tokens * 144  # under SMALL_WORK: small work
assert _tier.TINY_WORK < work <= _tier.SMALL_WORK
first = infer(p)
numpy_calls = 1
while "numba" not in sys.modules:
    r = infer(p)
    numpy_calls += 1
    assert numpy_calls < 300
last = infer(p)  # the kernel
np.save(sys.argv[1], np.stack([first.marginals, last.marginals]))
np.save(sys.argv[2], np.stack([first.map_labels, last.map_labels]))
print(numpy_calls, _tier._process_bill[0])
"""
    env = {k: v for k, v in os.environ.items() if k != "STRUCTCAL_TIER"}
    subprocess.run([sys.executable, "-c", compile_it], env=env, check=True, timeout=600)
    out = subprocess.run([sys.executable, "-c", loop, str(tmp_path / "m.npy"),
                          str(tmp_path / "y.npy")], env=env, capture_output=True, text=True,
                         check=True, timeout=600)
    calls, spent = out.stdout.split()
    from structcal import _tier

    assert float(spent) >= _tier.LOAD_SECONDS and int(calls) >= 2, out.stdout
    m, y = np.load(tmp_path / "m.npy"), np.load(tmp_path / "y.npy")
    np.testing.assert_array_equal(y[0], y[1])
    np.testing.assert_allclose(m[0], m[1], rtol=0, atol=1e-12)
