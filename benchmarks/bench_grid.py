"""Grid CRF inference at image scale: structcal vs pydensecrf2, and scaling in the number of pixels.

1. Potts mean field per node and sweep, side by side with pydensecrf2's ``DenseCRF2D``
   (Krähenbühl & Koltun's fully connected CRF, permutohedral lattice) at the same label
   count on the same image size, 1 thread for both (``numba.set_num_threads(1)``;
   DenseCRF2D is single-threaded): structcal ``mean_field(p, tol=0, max_iter=10)`` on a
   4-connected grid with contrast-like random Potts weights (``GraphPotentials.from_grid``)
   vs ``DenseCRF2D.inference(10)`` with its cheapest pairwise term (one Gaussian kernel,
   ``sxy=3``) and with the usual Gaussian + bilateral pair. Runs alternate; medians and
   ranges of ``--repeats`` runs, in ns per node and sweep (iteration).
   ``--quick``: 130 x 174 only.
2. Mean field, loopy BP (sum-product) and TRW-S (max-product) on grids of 10^4, 10^5 and
   10^6 pixels (2 labels, Potts): seconds per sweep, the exponent of time vs nodes (least
   squares on the log-log points) and the peak memory each call allocates through NumPy
   (``tracemalloc``) as a multiple of the potentials' bytes (unary + Potts weights +
   edges + CSR adjacency).

pydensecrf2 is in the ``bench`` extra (``pip install -e ".[bench]"``); without it part 1
reports only structcal. The machine this runs on may be shared: compare the two columns
of one run, not runs on different days.

Run: ``python benchmarks/bench_grid.py [--json] [--quick] [--repeats 5]`` (``--quick``
also times each scaling point once).
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
import warnings

import numba
import numpy as np

from structcal.inference.graph import belief_propagation, map_inference, mean_field
from structcal.potentials import GraphPotentials


def grid_potentials(h, w, K, seed=0):
    rng = np.random.default_rng(seed)
    unary = rng.normal(size=(h, w, K))
    m = h * (w - 1) + (h - 1) * w
    return GraphPotentials.from_grid(unary, potts=rng.uniform(0.2, 1.5, size=(1, m)))


def dense_crf(h, w, K, bilateral, seed=0):
    from pydensecrf import densecrf as dcrf

    rng = np.random.default_rng(seed)
    d = dcrf.DenseCRF2D(w, h, K)
    d.setUnaryEnergy(np.ascontiguousarray(rng.normal(size=(K, h * w)).astype(np.float32)))
    d.addPairwiseGaussian(sxy=3, compat=3)
    if bilateral:
        img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        d.addPairwiseBilateral(sxy=80, srgb=13, rgbim=img, compat=10)
    return d


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def summary(values):
    v = np.asarray(values)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def vs_densecrf(sizes, labels, repeats, sweeps=10):
    try:
        import pydensecrf  # noqa: F401
        have = True
    except ImportError:
        have = False
    rows = []
    for h, w in sizes:
        for K in labels:
            p = grid_potentials(h, w, K)
            run_sc = lambda: mean_field(p, tol=0.0, max_iter=sweeps, warn=False)  # noqa: E731
            run_sc()
            runners = {"structcal_potts_mf": run_sc}
            if have:
                for name, bil in (("densecrf_gaussian", False), ("densecrf_gauss_bilateral", True)):
                    d = dense_crf(h, w, K, bil)
                    d.inference(1)
                    runners[name] = lambda d=d: d.inference(sweeps)
            times = {k: [] for k in runners}
            for _ in range(repeats):
                for k, fn in runners.items():
                    times[k].append(timed(fn) / (h * w * sweeps) * 1e9)
            row = {"height": h, "width": w, "labels": K}
            row.update({k: summary(v) for k, v in times.items()})
            if have:
                row["speedup_vs_gaussian"] = (row["densecrf_gaussian"]["median"]
                                              / row["structcal_potts_mf"]["median"])
            rows.append(row)
    return rows


def potentials_bytes(p):
    a = p.adjacency
    return sum(x.nbytes for x in (p.unary, p.potts, p.edges, a.indptr, a.neighbors, a.edge_id,
                                  a.reversed, a.twin))


def scaling(sides, repeats, sweeps=10):
    methods = {
        "mean_field": lambda p: mean_field(p, tol=0.0, max_iter=sweeps, warn=False),
        "loopy_bp": lambda p: belief_propagation(p, tol=0.0, max_iter=sweeps, warn=False),
        "trws": lambda p: map_inference(p, tol=0.0, max_iter=sweeps, polish=False, warn=False),
    }
    out = {k: [] for k in methods}
    for side in sides:
        p = grid_potentials(side, side, 2)
        for name, fn in methods.items():
            fn(grid_potentials(8, 8, 2))  # compile outside the timings
            secs, iters = [], None
            for _ in range(repeats):
                t = time.perf_counter()
                r = fn(p)
                secs.append(time.perf_counter() - t)
                iters = int(r.n_iter.max())
            tracemalloc.start()
            fn(p)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            out[name].append({
                "nodes": p.n_nodes, "sweeps": iters,
                "seconds_per_sweep": summary(np.asarray(secs) / iters),
                "ns_per_node_sweep": float(np.median(secs) / iters / p.n_nodes * 1e9),
                "peak_alloc_over_potentials": peak / potentials_bytes(p),
            })
    for name, rows in out.items():
        n = np.log([r["nodes"] for r in rows])
        t = np.log([r["seconds_per_sweep"]["median"] for r in rows])
        out[name] = {"points": rows, "exponent": float(np.polyfit(n, t, 1)[0]) if len(rows) > 1 else None}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="DenseCRF comparison at 130 x 174 only, one timing per grid size")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    numba.set_num_threads(1)
    warnings.simplefilter("ignore")
    res = {"threads": 1}
    res["vs_densecrf"] = vs_densecrf([(130, 174)] if args.quick else [(130, 174), (512, 512)],
                                     (2, 21), args.repeats)
    sides = (100, 316, 1000)
    res["scaling"] = scaling(sides, 1 if args.quick else max(1, args.repeats // 2))
    if args.json:
        print(json.dumps(res))
        return
    print("ns per node and sweep, 1 thread, median [min, max]")
    for r in res["vs_densecrf"]:
        line = f"  {r['height']}x{r['width']} K={r['labels']:<3}"
        for k in ("structcal_potts_mf", "densecrf_gaussian", "densecrf_gauss_bilateral"):
            if k in r:
                s = r[k]
                line += f" {k} {s['median']:.0f} [{s['min']:.0f}, {s['max']:.0f}]"
        if "speedup_vs_gaussian" in r:
            line += f"  speed-up {r['speedup_vs_gaussian']:.2f}x"
        print(line)
    print("\nscaling on grids (2 labels, Potts): ns/node/sweep, peak alloc / potentials")
    for name, v in res["scaling"].items():
        pts = ", ".join(f"{p['nodes']}: {p['ns_per_node_sweep']:.0f} ns, x{p['peak_alloc_over_potentials']:.1f}"
                        for p in v["points"])
        print(f"  {name:<11} exponent {v['exponent']:.3f}  ({pts})")


if __name__ == "__main__":
    main()
