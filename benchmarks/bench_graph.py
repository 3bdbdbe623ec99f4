"""Throughput of graph-CRF inference on superpixel-scale graphs.

Times, on synthetic superpixel scenes (100 nodes, 21 labels, the Delaunay adjacency of
random points: about 290 edges, see ``structcal.datasets.make_superpixel_scenes``),
through the public functions of ``structcal.inference.graph``:

* 10 sequential mean-field sweeps (``mean_field(..., tol=0, max_iter=10)``);
* 10 loopy sum-product BP sweeps (``belief_propagation(..., tol=0, max_iter=10)``),
  each sending all 2 x n_edges messages once;

with random pairwise potentials given three ways: one 21 x 21 matrix shared by every
edge (a CRF's learned compatibility matrix, the headline keys
``meanfield_graphs_per_s_1thread`` etc.), one matrix per edge (keys ending ``_per_edge``)
and Potts weights per edge (``_potts``). Counted naively, 10 sweeps are 10 x 2 x n_edges x
21^2 = 2.4-2.7 million multiply-adds per graph; with one matrix per edge the kernel does
exactly that (and streams 2 MB of matrices per sweep, so it is memory-bound); with a shared
matrix it projects each node's distribution through the matrix once per sweep (about
0.9 million multiply-adds per graph in all); Potts needs O(n_edges K). 1 thread
(``numba.set_num_threads(1)``) and all threads; medians (and range) of ``--repeats`` runs;
JIT compilation timed separately.

If pgmpy is importable (it is not a dependency; see the README's note), its loopy BP is
run on a small grid for comparison and what happened is reported.

Run: ``python benchmarks/bench_graph.py [--json] [--repeats 7] [--graphs 400]``
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import numba
import numpy as np

from structcal.datasets import make_superpixel_scenes
from structcal.inference.graph import belief_propagation, mean_field
from structcal.potentials import GraphPotentials


def scene_potentials(n_graphs: int, kind: str, seed: int = 0) -> GraphPotentials:
    """Random potentials on synthetic superpixel graphs (100 nodes, 21 labels)."""
    data = make_superpixel_scenes(n_graphs, random_state=seed)
    rng = np.random.default_rng(seed + 1)
    K = data.n_states
    unary = rng.standard_normal((data.n_nodes, K))
    m = data.edges.shape[0]
    if kind == "per_edge":
        return GraphPotentials(
            unary, data.offsets, data.edges, data.edge_offsets, 0.5 * rng.standard_normal((m, K, K))
        )
    if kind == "shared":
        return GraphPotentials(
            unary, data.offsets, data.edges, data.edge_offsets, 0.5 * rng.standard_normal((K, K))
        )
    return GraphPotentials(
        unary, data.offsets, data.edges, data.edge_offsets, potts=rng.uniform(0, 1, size=m)
    )


def time_call(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return np.array(times)


TASKS = {
    "meanfield": lambda p: mean_field(p, tol=0.0, max_iter=10, warn=False),
    "loopy_bp": lambda p: belief_propagation(p, tol=0.0, max_iter=10, warn=False),
}


def pgmpy_comparison(size=4, n_states=3, seed=0):
    """pgmpy on a ``size x size`` grid with random potentials, if pgmpy is importable.

    pgmpy (1.1.2) has no loopy BP: ``BeliefPropagation`` is exact junction-tree
    calibration (memory exponential in the grid width), ``BeliefPropagationWithMessagePassing``
    is documented for loop-free factor graphs only, and ``Mplp`` computes MAP labelings.
    Each is run and what happens is recorded; structcal's loopy BP is scored against the
    junction-tree marginals and its MAP score against Mplp's. Keep the grid small: a 6 x 6
    grid with 5 states already needs a 45 GiB table in the junction tree.
    """
    try:
        import pgmpy
        from pgmpy.factors.discrete import DiscreteFactor
        from pgmpy.inference import BeliefPropagation, BeliefPropagationWithMessagePassing, Mplp
        from pgmpy.models import DiscreteMarkovNetwork, FactorGraph
    except ImportError:
        return {"pgmpy": "not installed (not a structcal dependency)"}
    from structcal.datasets import grid_edges
    from structcal.inference.graph import map_inference, score_labelings

    out = {"pgmpy_version": pgmpy.__version__, "pgmpy_grid": f"{size}x{size}, {n_states} states"}
    rng = np.random.default_rng(seed)
    edges, _ = grid_edges(size, size)
    n = size * size
    unary = 0.5 * rng.standard_normal((n, n_states))
    pw = 0.5 * rng.standard_normal((edges.shape[0], n_states, n_states))
    p = GraphPotentials(unary, [0, n], edges, [0, edges.shape[0]], pw)
    names = [f"x{i}" for i in range(n)]

    def factors():
        fs = [DiscreteFactor([names[i]], [n_states], np.exp(unary[i])) for i in range(n)]
        fs += [
            DiscreteFactor([names[a], names[b]], [n_states, n_states], np.exp(pw[e]).ravel())
            for e, (a, b) in enumerate(edges)
        ]
        return fs

    def network():
        model = DiscreteMarkovNetwork([(names[a], names[b]) for a, b in edges])
        model.add_factors(*factors())
        return model

    belief_propagation(p, warn=False)  # compile outside the timings
    map_inference(p, warn=False)
    t = time.perf_counter()
    ours = belief_propagation(p, warn=False)
    out["structcal_loopy_bp_seconds"] = time.perf_counter() - t
    exact = None
    try:
        t = time.perf_counter()
        jt = BeliefPropagation(network())
        jt.calibrate()
        exact = np.array([jt.query([v], show_progress=False).values for v in names])
        out["pgmpy_junction_tree_seconds"] = time.perf_counter() - t
        out["structcal_loopy_bp_max_error_vs_pgmpy_exact"] = float(
            np.abs(ours.marginals - exact).max()
        )
    except Exception as exc:
        out["pgmpy_junction_tree_error"] = f"{type(exc).__name__}: {exc}"[:200]
    try:
        fg = FactorGraph()
        fg.add_nodes_from(names)
        fs = factors()
        fg.add_factors(*fs)
        for f in fs:
            fg.add_edges_from([(v, f) for v in f.scope()])
        res = BeliefPropagationWithMessagePassing(fg).query(names)
        marg = np.array([res[v].values for v in names])
        out["pgmpy_message_passing"] = "ran"
        if exact is not None:
            out["pgmpy_message_passing_max_error"] = float(np.abs(marg - exact).max())
    except BaseException as exc:  # RecursionError on graphs with loops
        out["pgmpy_message_passing_error"] = f"{type(exc).__name__}: {exc}"[:200]
    try:
        t = time.perf_counter()
        r = Mplp(network()).map_query()
        out["pgmpy_mplp_seconds"] = time.perf_counter() - t
        out["pgmpy_mplp_map_score"] = float(score_labelings(p, np.array([r[v] for v in names]))[0])
    except Exception as exc:
        out["pgmpy_mplp_error"] = f"{type(exc).__name__}: {exc}"[:200]
    t = time.perf_counter()
    out["structcal_map_score"] = float(map_inference(p, warn=False).map_score[0])
    out["structcal_map_seconds"] = time.perf_counter() - t
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per setting (>= 5)")
    parser.add_argument("--graphs", type=int, default=400, help="graphs per timed run")
    args = parser.parse_args()
    if args.repeats < 5:
        parser.error("--repeats must be >= 5")

    t = time.perf_counter()
    for kind in ("per_edge", "shared", "potts"):
        small = scene_potentials(2, kind)
        for fn in TASKS.values():
            fn(small)
    compile_seconds = time.perf_counter() - t

    all_threads = numba.config.NUMBA_NUM_THREADS
    results, rows = {}, []
    problems = {
        kind: scene_potentials(args.graphs, kind) for kind in ("per_edge", "shared", "potts")
    }
    for threads in (1, all_threads):
        numba.set_num_threads(threads)
        tag = "1thread" if threads == 1 else "all_threads"
        for kind, p in problems.items():
            for name, fn in TASKS.items():
                fn(p)  # warm
                times = time_call(lambda: fn(p), args.repeats)
                gps = p.n_graphs / times
                suffix = "" if kind == "shared" else f"_{kind}"
                results[f"{name}_graphs_per_s_{tag}{suffix}"] = float(np.median(gps))
                rows.append((name, kind, threads, np.median(gps), gps.min(), gps.max()))
    numba.set_num_threads(all_threads)
    p = problems["shared"]
    out = {
        **results,
        "compile_seconds": compile_seconds,
        "graphs_per_run": p.n_graphs,
        "nodes_per_graph": float(p.sizes.mean()),
        "edges_per_graph": float(p.edge_counts.mean()),
        "n_states": p.n_states,
        "sweeps": 10,
        "meanfield_target_graphs_per_s_per_thread": 1000,
        "repeats": args.repeats,
        "threads_all": all_threads,
        "machine": f"{platform.processor() or platform.machine()}, numba {numba.__version__}",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out.update(pgmpy_comparison())
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"graph inference: {p.n_graphs} graphs per run, {out['nodes_per_graph']:.0f} nodes, "
        f"{out['edges_per_graph']:.1f} edges, {p.n_states} states, 10 sweeps"
    )
    print(f"JIT compile (first calls, this process): {compile_seconds:.2f} s")
    print(
        f"{'task':<12}{'pairwise':<10}{'threads':>8}{'median graphs/s':>17}{'min':>10}{'max':>10}"
    )
    for name, kind, threads, med, lo, hi in rows:
        print(f"{name:<12}{kind:<10}{threads:>8}{med:>17,.0f}{lo:>10,.0f}{hi:>10,.0f}")
    for k, v in out.items():
        if k.startswith(("pgmpy", "structcal_")):
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
