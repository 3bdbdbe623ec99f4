"""Grid CRF inference at image scale: structcal vs pydensecrf2, and scaling in the number of pixels.

1. Potts mean field per node and sweep, side by side with pydensecrf2's ``DenseCRF2D``
   (Krähenbühl & Koltun's fully connected CRF, permutohedral lattice) at the same label
   count on the same image size, 1 thread for both (``numba.set_num_threads(1)``;
   DenseCRF2D is single-threaded): structcal ``mean_field(p, tol=0, max_iter=10)`` on a
   4-connected grid with contrast-like random Potts weights (``GraphPotentials.from_grid``:
   the grid kernel, checkerboard schedule) vs ``DenseCRF2D.inference(10)`` with its
   cheapest pairwise term (one Gaussian kernel, ``sxy=3``) and with the usual Gaussian +
   bilateral pair. Also the same mean field (same numbers) by the general CSR kernel, on
   the same graph without its grid. Each call is timed whole (structcal: from the
   potentials to the returned marginals; DenseCRF: ``inference`` after its unary and
   pairwise terms are set). CPU time (``time.process_time``), runs alternate; medians and
   [min, max] of ``--repeats`` runs, in ns per node and sweep. ``--quick``: 130 x 174 only.
2. Mean field, loopy BP (sum-product) and TRW-S (max-product) on grids of 10^4, 10^5 and
   10^6 pixels (2 labels, Potts), grid kernels: CPU seconds per sweep, the exponent of
   time vs nodes (least squares on the log-log points), and the peak resident memory the
   first call adds, in a fresh process (``VmHWM`` after resetting it through
   ``/proc/self/clear_refs``: NumPy and Numba allocations alike, and what mean field keeps
   cached with the potentials) as a multiple of the potentials' bytes (unary + Potts
   weights + edges + CSR adjacency). At 10^4 and 10^5 pixels the general kernels run on
   the same graphs for comparison (A/B, ns per node and sweep).

pydensecrf2 is in the ``bench`` extra (``pip install -e ".[bench]"``); without it part 1
reports only structcal. The machine this runs on may be shared: compare the columns of
one run, not runs on different days.

Run: ``python benchmarks/bench_grid.py [--json] [--quick] [--repeats 5]`` (``--quick``
also times each scaling point once).
"""

from __future__ import annotations

import argparse
import json
import time
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


def without_grid(p):
    """The same model as a plain graph: inference takes the general (CSR) kernels."""
    return GraphPotentials(p.unary, p.offsets, p.edges, p.edge_offsets, potts=p.potts)


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


def cpu(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


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
            q = without_grid(p)
            runners = {
                "structcal_potts_mf": lambda: mean_field(p, tol=0.0, max_iter=sweeps, warn=False),
                "structcal_general_kernel": lambda: mean_field(
                    q, schedule="checkerboard", tol=0.0, max_iter=sweeps, warn=False),
            }
            if have:
                for name, bil in (("densecrf_gaussian", False), ("densecrf_gauss_bilateral", True)):
                    d = dense_crf(h, w, K, bil)
                    runners[name] = lambda d=d: d.inference(sweeps)
            for fn in runners.values():
                fn()  # compile / warm up outside the timings
            times = {k: [] for k in runners}
            for _ in range(repeats):
                for k, fn in runners.items():
                    times[k].append(cpu(fn) / (h * w * sweeps) * 1e9)
            row = {"height": h, "width": w, "labels": K}
            row.update({k: summary(v) for k, v in times.items()})
            row["grid_kernel_speedup_vs_general"] = float(np.median(
                np.asarray(times["structcal_general_kernel"]) / times["structcal_potts_mf"]))
            if have:
                # paired ratios of the alternating runs
                row["speedup_vs_gaussian"] = float(np.median(
                    np.asarray(times["densecrf_gaussian"]) / times["structcal_potts_mf"]))
            rows.append(row)
    return rows


def potentials_bytes(p):
    a = p.adjacency
    return sum(x.nbytes for x in (p.unary, p.potts, p.edges, a.indptr, a.neighbors, a.edge_id,
                                  a.reversed, a.twin))


def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


METHODS = {
    "mean_field": lambda p, sweeps: mean_field(p, tol=0.0, max_iter=sweeps, warn=False),
    "loopy_bp": lambda p, sweeps: belief_propagation(p, tol=0.0, max_iter=sweeps, warn=False),
    "trws": lambda p, sweeps: map_inference(p, tol=0.0, max_iter=sweeps, polish=False,
                                            warn=False),
}


def _memory_child(method, side, sweeps):
    """In a fresh process: the peak resident memory one call adds (first call, so that
    nothing freed by earlier calls is reused; includes what it caches on the potentials)."""
    import gc

    # compile (or load) first, on a grid small in memory but large enough (4096 pixels)
    # that the same (parallel) copies of the drivers run
    METHODS[method](grid_potentials(64, 64, 2, seed=1), sweeps)
    p = grid_potentials(side, side, 2)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = _status("VmRSS")
    METHODS[method](p, sweeps)
    print(json.dumps({"added": _status("VmHWM") - base, "potentials": potentials_bytes(p)}))


def peak_added_over_potentials(method, side, sweeps):
    """Peak memory of one call / the potentials' bytes, measured in a fresh process
    (Linux: VmHWM reset through /proc/self/clear_refs); None where that is unavailable."""
    import subprocess
    import sys

    try:
        out = subprocess.run([sys.executable, __file__, "--memory-child", method, str(side),
                              str(sweeps)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None
    return r["added"] / r["potentials"]


def scaling(sides, repeats, sweeps=10, general_up_to=100_000):
    out = {k: [] for k in METHODS}
    for side in sides:
        p = grid_potentials(side, side, 2)
        q = without_grid(p) if p.n_nodes <= general_up_to else None
        for name, method in METHODS.items():
            def fn(x):
                return method(x, sweeps)

            fn(p)  # compile (the serial or parallel copy this size takes) outside the timings
            if q is not None:
                fn(q)
            secs, general, iters = [], [], None
            for _ in range(repeats):
                t = time.process_time()
                r = fn(p)
                secs.append(time.process_time() - t)
                iters = int(r.n_iter.max())
                if q is not None:
                    t = time.process_time()
                    fn(q)
                    general.append(time.process_time() - t)
            point = {
                "nodes": p.n_nodes, "sweeps": iters,
                "seconds_per_sweep": summary(np.asarray(secs) / iters),
                "ns_per_node_sweep": float(np.median(secs) / iters / p.n_nodes * 1e9),
                "peak_added_over_potentials": peak_added_over_potentials(name, side, sweeps),
            }
            if general:
                point["general_kernel_ns_per_node_sweep"] = float(
                    np.median(general) / iters / p.n_nodes * 1e9)
                point["grid_kernel_speedup_vs_general"] = float(
                    np.median(np.asarray(general) / np.asarray(secs)))
            out[name].append(point)
    for name, rows in out.items():
        n = np.log([r["nodes"] for r in rows])
        t = np.log([r["seconds_per_sweep"]["median"] for r in rows])
        out[name] = {"points": rows,
                     "exponent": float(np.polyfit(n, t, 1)[0]) if len(rows) > 1 else None}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="DenseCRF comparison at 130 x 174 only, one timing per grid size")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        numba.set_num_threads(1)
        warnings.simplefilter("ignore")
        method, side, sweeps = args.memory_child
        _memory_child(method, int(side), int(sweeps))
        return
    numba.set_num_threads(1)
    warnings.simplefilter("ignore")
    res = {"threads": 1, "clock": "process_time"}
    res["vs_densecrf"] = vs_densecrf([(130, 174)] if args.quick else [(130, 174), (512, 512)],
                                     (2, 21), args.repeats)
    sides = (100, 316, 1000)
    res["scaling"] = scaling(sides, 1 if args.quick else max(1, args.repeats // 2))
    if args.json:
        print(json.dumps(res))
        return
    print("mean field, CPU ns per node and sweep, 1 thread, median [min, max]")
    for r in res["vs_densecrf"]:
        print(f"  {r['height']}x{r['width']} K={r['labels']}")
        for k in ("structcal_potts_mf", "structcal_general_kernel", "densecrf_gaussian",
                  "densecrf_gauss_bilateral"):
            if k in r:
                s = r[k]
                print(f"    {k:<26} {s['median']:8.1f} [{s['min']:.1f}, {s['max']:.1f}]")
        line = f"    grid kernel vs general kernel {r['grid_kernel_speedup_vs_general']:.1f}x"
        if "speedup_vs_gaussian" in r:
            line += f", vs DenseCRF2D (Gaussian) {r['speedup_vs_gaussian']:.2f}x"
        print(line)
    print("\nscaling on grids (2 labels, Potts): ns/node/sweep, peak memory added by a first"
          " call / potentials")
    for name, v in res["scaling"].items():
        pts = ", ".join(
            f"{p['nodes']}: {p['ns_per_node_sweep']:.0f} ns"
            + (f" (general {p['general_kernel_ns_per_node_sweep']:.0f})"
               if "general_kernel_ns_per_node_sweep" in p else "")
            + (f", x{p['peak_added_over_potentials']:.2f}"
               if p["peak_added_over_potentials"] is not None else "")
            for p in v["points"])
        print(f"  {name:<11} exponent {v['exponent']:.3f}  ({pts})")


if __name__ == "__main__":
    main()
