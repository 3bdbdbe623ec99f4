"""The graph drivers run as Python (structcal._interpreted) give the compiled drivers'
results, and the tier rule chooses between them as documented."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from structcal import _interpreted, _numba, _tier
from structcal._tier import forced_tier
from structcal.exceptions import InfeasibleError
from structcal.inference import _graph
from structcal.inference import graph as G
from structcal.potentials import GraphPotentials

from ._graph_problems import random_graphs


def _results(p, labels):
    """Every graph routine's outputs on ``p`` (arrays, in a fixed order)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for schedule in ("sequential", "synchronous", "checkerboard"):
            r = G.mean_field(p, schedule=schedule, damping=0.2, max_iter=30,
                             edge_marginals=True, log_partition=True)
            out += [r.marginals, r.edge_marginals, r.log_partition, r.n_iter]
        for damping in (0.0, 0.5):
            r = G.belief_propagation(p, damping=damping, max_iter=30, edge_marginals=True,
                                     log_partition=True)
            out += [r.marginals, r.edge_marginals, r.log_partition, r.n_iter, r.map_labels]
        r = G.max_product(p, max_iter=30)
        out += [r.map_labels, r.map_score]
        for method in ("trws", "max_product", "unary"):
            r = G.map_inference(p, method=method, max_iter=30)
            out += [r.map_labels, r.map_score]
        out += [G.score_labelings(p, labels), G.pseudo_marginals(p, labels)]
        s = G.second_best(p, labels)
        out += [s.labels, s.score, s.node, s.label]
        r = G.icm(p, labels, max_iter=10)
        out += [r.map_labels]
        out.append(G.gibbs_sample(p, 3, burn_in=2, thin=1, random_state=3))
    return out


@pytest.mark.parametrize("kind", ["shared", "per_edge", "typed", "potts"])
@pytest.mark.parametrize("topology", ["tree", "forest", "loopy", "complete"])
@pytest.mark.parametrize("scale, neginf", [(1.0, 0.0), (30.0, 0.0), (1.0, 0.25)])
def test_interpreted_graph_drivers_equal_the_compiled_ones(kind, topology, scale, neginf):
    rng = np.random.default_rng(hash((kind, topology, scale, neginf)) % 2**32)
    K = int(rng.integers(1, 5))
    p = random_graphs(rng, K, [0, 1, 5, 7], topology=topology, kind=kind, scale=scale,
                      neginf=neginf)
    labels = rng.integers(0, K, p.n_nodes)
    got = {}
    for tier in ("numpy", "kernels"):
        with forced_tier(tier):
            try:
                got[tier] = _results(p, labels)
            except InfeasibleError as exc:  # both tiers refuse alike
                got[tier] = str(exc)
    if isinstance(got["kernels"], str):
        assert got["numpy"] == got["kernels"]
        return
    assert len(got["numpy"]) == len(got["kernels"])
    for a, b in zip(got["numpy"], got["kernels"]):
        if a is None or b is None:  # not computed by that routine
            assert a is None and b is None
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "iub":
            np.testing.assert_array_equal(a, b)
        else:  # the same operations; equal unless the CPU does not fuse fma
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_the_graph_example_runs_interpreted_bit_for_bit():
    rng = np.random.default_rng(0)
    p = random_graphs(rng, 3, [36], topology="loopy", kind="potts")
    out = {}
    for tier in ("numpy", "kernels"):
        with forced_tier(tier):
            mf, bp = G.mean_field(p), G.belief_propagation(p)
            best = G.map_inference(p)
            out[tier] = [mf.marginals, bp.marginals, best.map_labels, best.map_score,
                         G.pseudo_marginals(p, best.map_labels)]
    for a, b in zip(out["numpy"], out["kernels"]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_small_grids_run_the_general_drivers_source_with_the_grid_kernels_results(
        monkeypatch, connectivity):
    """A small two-label Potts grid with nothing compiled runs the general drivers' Python
    source instead of compiling the pixel-grid kernels: mean field and TRW-S give the grid
    kernels' results bit for bit, BP to rounding. A compiled grid kernel is used."""
    from structcal.inference import _grid
    from structcal.potentials import grid_edges

    rng = np.random.default_rng(connectivity)
    imgs = [2.0 * rng.normal(size=(h, w, 2)) for h, w in ((5, 6), (2, 2), (4, 7))]
    imgs[0][1, 1, 0] = -np.inf
    w = [rng.normal(size=grid_edges(*u.shape[:2], connectivity)[0].shape[0]) for u in imgs]
    p = GraphPotentials.from_grid(imgs, potts=w, connectivity=connectivity)
    runs = {
        "mf": lambda: G.mean_field(p, max_iter=30, warn=False, log_partition=True),
        "bp": lambda: G.belief_propagation(p, max_iter=30, warn=False, edge_marginals=True),
        "map": lambda: G.map_inference(p, max_iter=30, warn=False),
    }
    with forced_tier("kernels"):  # the grid kernels
        want = {k: f() for k, f in runs.items()}

    class NotToRun:  # stands in for a grid driver: compiled or not, and must not run
        def __init__(self, compiled):
            self.compiled = lambda: compiled

        def __call__(self, *args, **kwargs):
            pytest.fail("a grid kernel ran")

    for name in ("mean_field_grid_batch", "bp2_grid_batch", "trws2_grid_batch"):
        monkeypatch.setattr(_grid, name, NotToRun(False))
    for d in (_graph.mean_field_batch, _graph.bp_batch, _graph.trws_batch,
              _graph.mean_field_elbo_batch, _graph.icm_batch):
        monkeypatch.setattr(d, "_interpreted_tier", lambda steps: True)
    got = {k: f() for k, f in runs.items()}
    np.testing.assert_array_equal(got["mf"].marginals, want["mf"].marginals)
    np.testing.assert_array_equal(got["mf"].log_partition, want["mf"].log_partition)
    np.testing.assert_array_equal(got["mf"].n_iter, want["mf"].n_iter)
    np.testing.assert_allclose(got["bp"].marginals, want["bp"].marginals, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got["bp"].edge_marginals, want["bp"].edge_marginals, rtol=0,
                               atol=1e-13)
    np.testing.assert_array_equal(got["bp"].n_iter, want["bp"].n_iter)
    np.testing.assert_array_equal(got["map"].map_labels, want["map"].map_labels)
    np.testing.assert_array_equal(got["map"].map_score, want["map"].map_score)
    # a compiled grid kernel runs, even for small work
    monkeypatch.setattr(_grid, "mean_field_grid_batch", NotToRun(True))
    with pytest.raises(pytest.fail.Exception, match="a grid kernel ran"):
        runs["mf"]()


def test_the_tier_rule_interprets_small_uncompiled_work_until_the_bill_is_paid(monkeypatch):
    driver = _graph.bp_batch
    bills = {}
    monkeypatch.setattr(_tier, "bill", lambda s, name="x": bills.get(name, 0.0))
    monkeypatch.setattr(_tier, "kernel_compiled", lambda name: False)
    monkeypatch.setattr(driver.serial, "overloads", {})
    monkeypatch.setattr(driver.parallel.dispatcher, "overloads", {})
    small = round(_numba.INTERPRET_MAX_SECONDS / _numba.INTERPRET_SECONDS_PER_STEP)
    assert driver._interpreted_tier(small // 2)
    assert not driver._interpreted_tier(2 * small)  # too long to run interpreted
    bills[driver._interpret_bill] = _numba.INTERPRET_RENT_SECONDS
    assert not driver._interpreted_tier(10)  # the install has paid for the compilation
    bills.clear()
    with forced_tier("kernels"):
        assert not driver._interpreted_tier(10)
    with forced_tier("numpy"):
        assert driver._interpreted_tier(10**12)
    monkeypatch.setattr(_tier, "kernel_compiled",
                        lambda name: name == "inference/_graph.bp_batch__parallel")
    assert not driver._interpreted_tier(10)  # a copy is in the cache: load it
    assert driver._kernel_name == ("inference/_graph.bp_batch",
                                   "inference/_graph.bp_batch__parallel")
    with pytest.raises(TypeError, match="explicit signature"):
        _numba.batch_kernel(lambda x: x, signature=lambda: None, interpret=True)


def test_python_stand_ins_of_the_intrinsics():
    rng = np.random.default_rng(0)
    for _ in range(20000):
        a, b, c = (rng.standard_normal(3) * np.exp(rng.standard_normal(3) * 30)).tolist()
        if rng.random() < 0.2:
            c = -a * b  # cancellation: the fused result is the rounding error of a * b
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        want = float(exact) if exact else a * b + c
        assert _interpreted._fma(a, b, c) == want
    assert math.isnan(_interpreted._fma(math.inf, 0.0, 1.0))
    assert _interpreted._fma(1.0, 2.0, -math.inf) == -math.inf
    from structcal._simd import ROUND_MAGIC

    for n in (-1022, -5, 0, 1, 1023):
        assert _interpreted._pow2_rounded(n + ROUND_MAGIC) == 2.0**n
    assert _interpreted._log(0.0) == -math.inf and math.isnan(_interpreted._log(-1.0))
    assert _interpreted._log(math.inf) == math.inf and _interpreted._log(math.e) == 1.0
    assert _interpreted._exp(1000.0) == math.inf and _interpreted._exp(-math.inf) == 0.0
    x = np.array([-800.0, -708.5, -50.0, -1e-300, 0.0, -np.inf])
    want = np.array([_numba.exp_nonpositive(v) for v in x])
    got = np.array([_interpreted.interpreted(_numba.exp_nonpositive)(v) for v in x])
    np.testing.assert_array_equal(got, want)


def test_bp_tables_without_compilation_equal_the_kernels():
    from structcal.inference import _chain
    from structcal.inference.graph import _scaled_exponentials

    rng = np.random.default_rng(1)
    for K in range(1, 10):  # below and past the kernel's 4-lane width
        for trial in range(10):
            pw = rng.standard_normal((3, K, K)) * rng.choice([1.0, 30.0, 300.0])
            pw[rng.random(pw.shape) < 0.3] = -np.inf
            if trial % 3 == 0:
                pw[:, :, 0] = -np.inf  # a column forbidden everywhere
            E, _, colmax, _ = _chain.scaled_exponentials(pw)
            got = _scaled_exponentials(pw)
            np.testing.assert_array_equal(got[0], E)
            np.testing.assert_array_equal(got[1], colmax)
    E, colmax = _scaled_exponentials(np.zeros((0, 3, 3)))
    assert E.shape == (0, 3, 3) and colmax.shape == (0, 3)


@pytest.mark.parametrize("grid", [True, False])
@pytest.mark.parametrize("options", [{}, {"schedule": "synchronous", "damping": 0.3},
                                     {"schedule": "sequential", "log_partition": True}])
def test_mean_field_rents_the_first_sweeps_and_continues_compiled_with_the_same_result(
        monkeypatch, grid, options):
    """Where all ``max_iter`` sweeps are too long to run as Python but the first sweeps are
    not, mean field runs those as the general driver's source; the graphs still moving then
    continue in the compiled driver from their distributions: the result is that of one
    compiled run, bit for bit (here the second graph converges within the rented sweeps
    and the others do not, so the continuation runs on two separate stretches of graphs)."""
    from structcal.potentials import grid_edges

    rng = np.random.default_rng(1)
    imgs = [rng.normal(size=(h, w, 2)) for h, w in ((5, 6), (2, 2), (4, 7), (6, 6))]
    w = [1.5 * rng.normal(size=grid_edges(*u.shape[:2], 4)[0].shape[0]) for u in imgs]
    p = GraphPotentials.from_grid(imgs, potts=w, connectivity=4)
    if not grid:  # the same graphs without their grid layout: the general driver throughout
        p = GraphPotentials.from_list([u.reshape(-1, 2) for u in imgs],
                                      [grid_edges(*u.shape[:2], 4)[0] for u in imgs],
                                      potts=w)
        assert p.grid is None
    with forced_tier("kernels"):
        want = G.mean_field(p, warn=False, **options)
    rent = int(want.n_iter[1] + want.n_iter[[0, 2, 3]].min()) // 2
    assert want.n_iter[1] <= rent < want.n_iter[[0, 2, 3]].min()
    monkeypatch.setattr(_numba, "INTERPRET_MAX_SECONDS",
                        (rent + 0.5) * G._steps(p) * _numba.INTERPRET_SECONDS_PER_STEP)
    monkeypatch.setattr(_tier, "bill", lambda s, name="x": 0.0)
    from structcal.inference import _grid

    for driver in (_graph.mean_field_batch, _grid.mean_field_grid_batch):
        monkeypatch.setattr(driver, "compiled", lambda: False)
    ran = []
    run = _interpreted.run
    monkeypatch.setattr(_interpreted, "run", lambda k, a: (ran.append(k), run(k, a))[1])
    got = G.mean_field(p, warn=False, **options)
    assert _graph.mean_field_batch in ran  # the rented sweeps ran as Python
    np.testing.assert_array_equal(got.marginals, want.marginals)
    np.testing.assert_array_equal(got.n_iter, want.n_iter)
    np.testing.assert_array_equal(got.delta, want.delta)
    np.testing.assert_array_equal(got.converged, want.converged)
    if options.get("log_partition"):
        np.testing.assert_array_equal(got.log_partition, want.log_partition)
    # all sweeps within the limit: Python throughout, nothing continues
    monkeypatch.setattr(_numba, "INTERPRET_MAX_SECONDS",
                        1.01 * G._steps(p, 200) * _numba.INTERPRET_SECONDS_PER_STEP)
    assert G._rented_sweeps(_graph.mean_field_batch, _graph.mean_field_batch, p, 200) == 0
    # a compiled driver runs throughout
    monkeypatch.setattr(_numba, "INTERPRET_MAX_SECONDS",
                        (rent + 0.5) * G._steps(p) * _numba.INTERPRET_SECONDS_PER_STEP)
    assert G._rented_sweeps(_graph.mean_field_batch, _graph.mean_field_batch, p, 200) == rent
    monkeypatch.setattr(_graph.mean_field_batch, "compiled", lambda: True)
    assert G._rented_sweeps(_graph.mean_field_batch, _graph.mean_field_batch, p, 200) == 0
