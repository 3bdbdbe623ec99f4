"""``structcal warmup``: compile the kernels of the user's paths once, ahead of use.

Each path runs a small but real workload through the same public functions a real run
calls (so the kernels are compiled for the same argument types) and leaves the compiled
kernels in structcal's per-user cache; later processes load them instead of compiling.
Useful after an install or when building a container image.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
import warnings

import numpy as np

from ._common import add_common_options

__all__ = ["PATHS", "warm", "add_parser", "run"]


def _chain():
    """Chain inference and the default recalibration of chain events."""
    from .. import ChainPotentials, StructuredPrediction, StructuredRecalibrator
    from ..inference import assignment_probability, infer, kbest, pseudo_marginals

    for n_chains, seed in ((1500, 1), (300, 0)):  # the parallel copies, then the serial ones
        rng = np.random.default_rng(seed)
        lengths = rng.integers(1, 12, n_chains)
        p = ChainPotentials.from_scores(rng.normal(size=(int(lengths.sum()), 5)) * 3, lengths,
                                        rng.normal(size=(5, 5)))
        r = infer(p)
        kbest(p, k=2)
        pseudo_marginals(p, r.map_labels)
    assignment_probability(p, [(0, {0: int(r.map_labels[0])}), (1, (0, [0, 1]))])
    y = np.where(rng.random(r.map_labels.shape[0]) < 0.8, r.map_labels,
                 rng.integers(0, 5, r.map_labels.shape[0]))
    pred = StructuredPrediction(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(random_state=0).fit(pred.subset(np.arange(200)),
                                                         y[:int(lengths[:200].sum())])
        rec.evaluate(pred.subset(np.arange(200, 300)), y[int(lengths[:200].sum()):])


def _ner():
    """Turn a CRFsuite tagger's feature dicts into calibrated entity probabilities."""
    from .. import StructuredPrediction, StructuredRecalibrator
    from ..adapters import CRFsuiteModel, TagScheme
    from ..datasets import load_wnut17, token_features, wnut17_tagger_path
    from ..events import EntitySpans, entity_table

    model = CRFsuiteModel.from_file(wnut17_tagger_path())
    tags = TagScheme(model)
    dev = load_wnut17("dev")
    pred = StructuredPrediction(model.potentials(token_features(dev.sentences)))
    y = tags.encode([dev.tag_names[t] for t in dev.tags])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(kinds=[EntitySpans(tags)], random_state=0).fit(pred, y)
        out = rec.predict(pred, y)
    entity_table(out.table, "entity", tags)


def _graph():
    """Grid and graph inference and object events."""
    from .. import GraphPotentials, StructuredPrediction, build_events
    from ..events import AllObjectsFound, ObjectEvents
    from ..inference import infer

    rng = np.random.default_rng(0)
    maps = [rng.dirichlet(np.ones(3), size=(12, 12)) for _ in range(4)]
    for batch in (maps, maps[:1]):  # several graphs (the parallel copies), then one
        p = GraphPotentials.from_grid([np.log(m) for m in batch], potts=1.0)
        infer(p)                                    # belief propagation (default)
        infer(p, marginal_method="mean_field")
    maps = maps[:3]
    p = GraphPotentials.from_grid([np.log(m) for m in maps], potts=1.0)
    pred = StructuredPrediction(p)
    y = np.concatenate([m.reshape(-1, 3).argmax(1) for m in maps])
    build_events(pred, [ObjectEvents(), AllObjectsFound()], y_true=y, features=["raw"])
    build_events(pred, [ObjectEvents(raw="gibbs"), AllObjectsFound(raw="gibbs")],
                 features=["raw"])


def _demo():
    """``structcal demo ocr``, its output discarded."""
    from .demo import demo_ocr

    with contextlib.redirect_stdout(io.StringIO()):
        demo_ocr(as_json=True, verbose=False)


#: name -> (workload, what it covers); ``all`` runs every one.
PATHS = {
    "chain": (_chain, "chain inference and the default recalibration of chain events"),
    "ner": (_ner, "a CRFsuite tagger's feature dicts to calibrated entity probabilities"),
    "graph": (_graph, "grid inference and object events"),
    "demo": (_demo, "structcal demo ocr"),
}


def warm(paths=("all",), verbose=True) -> dict:
    """Run the workloads of ``paths``; return the wall seconds each took.

    Parameters
    ----------
    paths : sequence of str
        Names in :data:`PATHS`, or ``"all"``.
    verbose : bool, default=True
        Say on stderr what is being compiled and how long it took.
    """
    from .._cache import cache_dir

    names = list(PATHS) if "all" in paths else list(dict.fromkeys(paths))
    unknown = sorted(set(names) - set(PATHS))
    if unknown:
        from ..exceptions import ParameterError

        raise ParameterError(f"unknown warm-up paths {unknown}; choose from {sorted(PATHS)} "
                             "or 'all'")
    seconds = {}
    workers = min(_n_workers(), len(names))
    if workers > 1:
        # one process per path: compilation is single-threaded, and the paths share no
        # kernels worth waiting for; each process writes its kernels to the same cache
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if verbose:
            print(f"warming {', '.join(names)} in {workers} processes ...", file=sys.stderr,
                  flush=True)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            results = dict(zip(names, pool.map(_warm_one, names)))
        for name in names:
            seconds[name] = _report(results[name], f"  {name} ({PATHS[name][1]}): ", verbose)
    else:
        for name in names:
            if verbose:
                print(f"warming {name}: {PATHS[name][1]} ...", file=sys.stderr, flush=True)
            seconds[name] = _report(_warm_one(name), "  ", verbose)
    if verbose:
        print(f"compiled kernels are cached in {cache_dir()}", file=sys.stderr, flush=True)
    return seconds


def _report(result, prefix, verbose) -> float:
    """Say how one path's warm-up went; return its seconds."""
    secs, n_compiled, jit_seconds = result
    if verbose:
        done = (f"{n_compiled} kernels compiled in {jit_seconds:.1f} s"
                if n_compiled else "every kernel loaded from the cache")
        print(f"{prefix}{secs:.1f} s ({done})", file=sys.stderr, flush=True)
    return secs


def _n_workers() -> int:
    from .._warmup import _n_cpus

    return max(1, int(_n_cpus()))


def _warm_one(name):
    """Run one path's workload: ``(seconds, kernels compiled, compile seconds)``."""
    from .. import _numba
    from .._progress import compile_monitor
    from .._tier import forced_tier

    t0 = time.perf_counter()
    # the workloads are small: forced onto the kernels, which are what is being warmed,
    # and a batch large enough for a driver's parallel copy compiles it at once (rather
    # than after the serial copy has run for PARALLEL_COMPILE_SECONDS)
    saved = _numba.PARALLEL_COMPILE_SECONDS
    _numba.PARALLEL_COMPILE_SECONDS = 0.0
    try:
        with compile_monitor(False) as jit, warnings.catch_warnings(), forced_tier("kernels"):
            warnings.simplefilter("ignore")   # the workloads' data are not the point
            PATHS[name][0]()
    finally:
        _numba.PARALLEL_COMPILE_SECONDS = saved
    return time.perf_counter() - t0, int(jit.n_compiled), float(jit.seconds)


def add_parser(sub) -> None:
    """Register ``structcal warmup``."""
    p = sub.add_parser(
        "warmup", help="compile the kernels of your paths once (after install, in images)",
        description="Run small real workloads of the chosen paths so that their compiled "
                    "kernels are in structcal's per-user cache; later processes load them "
                    "instead of compiling. Paths: chain (chain inference and "
                    "recalibration), ner (a CRFsuite tagger's entities), graph (grids and "
                    "objects), demo (structcal demo ocr), all.",
    )
    # no argparse choices: with nargs="*" argparse checks the list default against them
    # and refuses the bare command; warm() names unknown paths itself
    p.add_argument("paths", nargs="*", default=None, metavar="PATH",
                   help="chain, ner, graph, demo or all (default: all)")
    add_common_options(p)
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``structcal warmup``."""
    warm(args.paths or ["all"], verbose=not args.quiet)
    return 0
