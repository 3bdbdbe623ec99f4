"""Timings of the calibration toolbox, against its targets.

Prints a table of median wall-clock times over several runs (after one warm-up run that
also compiles the Numba kernels) and, with ``--json``, a JSON object.

    python benchmarks/bench_calibration.py            # full sizes: 10^6 forecasts, 10^5 fit
    python benchmarks/bench_calibration.py --json
    python benchmarks/bench_calibration.py --quick    # 10x smaller, a few seconds
    python benchmarks/bench_calibration.py --cpu --repeats 21 \
        --match "bincount,uniform bins (legacy),Brier decomposition"   # side by side

Targets: on 10^6 forecasts the binned estimators < 15 ms, the kernel estimator
< 60 ms, a 200-resample bootstrap interval < 2 s; SplineCalib fits 10^5 forecasts in < 1 s.
Timings are wall-clock on whatever machine runs this; the load average is printed so a
busy machine can be recognised.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from structcal.calibrators import IsotonicCalibration, PlattScaling, SplineCalib  # noqa: E402
from structcal.metrics import (  # noqa: E402
    binned_calibration_error,
    brier_decomposition,
    debiased_calibration_error,
    kde_calibration_error,
)


def median_time(fn, repeats, clock=time.perf_counter):
    fn()  # warm-up (compilation, caches)
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return float(np.median(times)), times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print a JSON object instead")
    ap.add_argument("--quick", action="store_true", help="10x smaller inputs")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per fast item")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu", action="store_true",
                    help="time CPU (process_time) instead of wall-clock: for loaded machines")
    ap.add_argument("--match", default=None,
                    help="comma-separated substrings: time only the items whose name has one")
    args = ap.parse_args(argv)

    n = 100_000 if args.quick else 1_000_000
    n_fit = 10_000 if args.quick else 100_000
    rng = np.random.default_rng(args.seed)
    p = rng.random(n)
    y = (rng.random(n) < 3 * p**2 - 2 * p**3).astype(np.int64)
    pf = rng.random(n_fit)
    yf = (rng.random(n_fit) < pf**2).astype(np.int64)

    binned_uniform = binned_calibration_error(y, p)
    binned_quantile = binned_calibration_error(y, p, strategy="quantile")
    kde = kde_calibration_error(y, p)

    items = [
        # name, callable, n, target seconds (None: no target), repeats
        ("numpy bincount ECE (reference)", lambda: _bincount_ece(y, p, 15), n, None,
         args.repeats),
        ("binned ECE, 15 uniform bins (legacy)", lambda: binned_calibration_error(y, p), n,
         0.015, args.repeats),
        ("binned ECE, 15 uniform bins, convex",
         lambda: binned_calibration_error(y, p, mapping="convex"), n, 0.015, args.repeats),
        ("binned ECE, sqrt(n) uniform bins",
         lambda: binned_calibration_error(y, p, n_bins="sqrt"), n, 0.015, args.repeats),
        ("binned ECE, 15 equal-mass bins (sorts)",
         lambda: binned_calibration_error(y, p, strategy="quantile"), n, None, args.repeats),
        ("binned ECE, 15 equal-mass bins, convex",
         lambda: binned_calibration_error(y, p, strategy="quantile", mapping="convex"), n,
         None, args.repeats),
        ("debiased L2 error, 15 equal-mass bins", lambda: debiased_calibration_error(y, p), n,
         None, args.repeats),
        ("numpy bincount Brier decomposition (reference)", lambda: _bincount_brier(y, p, 10), n,
         None, args.repeats),
        ("Brier decomposition, 10 buckets", lambda: brier_decomposition(y, p), n, 0.015,
         args.repeats),
        ("KDE ECE (Silverman, 4097-point grid)", lambda: kde_calibration_error(y, p), n, 0.060,
         args.repeats),
        ("bootstrap CI, 200 resamples, legacy bins",
         lambda: binned_uniform.confidence_interval(n_resamples=200, random_state=0), n, 2.0,
         3),
        ("bootstrap CI, 200 resamples, equal-mass bins",
         lambda: binned_quantile.confidence_interval(n_resamples=200, random_state=0), n,
         None, 3),
        ("bootstrap CI, 200 resamples, KDE",
         lambda: kde.confidence_interval(n_resamples=200, random_state=0), n, None, 3),
        ("SplineCalib fit (defaults: 30 knots, 17 lambdas x 5 folds, both transforms)",
         lambda: SplineCalib(random_state=0).fit(pf, yf), n_fit, 1.0, 3),
        ("SplineCalib fit (one transform: compact_logit=False)",
         lambda: SplineCalib(random_state=0, compact_logit=False).fit(pf, yf), n_fit, None, 3),
        ("SplineCalib fit (200 knots, compact_logit=False)",
         lambda: SplineCalib(n_knots=200, random_state=0, compact_logit=False).fit(pf, yf),
         n_fit, None, 3),
        ("IsotonicCalibration fit", lambda: IsotonicCalibration().fit(pf, yf), n_fit, None,
         args.repeats),
        ("PlattScaling fit", lambda: PlattScaling().fit(pf, yf), n_fit, None, args.repeats),
    ]
    try:
        from sklearn.calibration import calibration_curve

        items.insert(1, ("sklearn calibration_curve, 15 bins (reference)",
                         lambda: calibration_curve(y, p, n_bins=15), n, None, args.repeats))
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        pass

    if args.match:
        keys = args.match.split(",")
        items = [it for it in items if any(k in it[0] for k in keys)]
    clock = time.process_time if args.cpu else time.perf_counter
    rows = []
    for name, fn, size, target, repeats in items:
        med, times = median_time(fn, repeats, clock)
        rows.append({
            "name": name,
            "n": size,
            "median_seconds": med,
            "min_seconds": float(min(times)),
            "runs": repeats,
            "target_seconds": target,
            "meets_target": None if target is None else bool(med < target),
        })
    info = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "quick": args.quick,
    }
    if args.json:
        print(json.dumps({"info": info, "timings": rows}, indent=2))
        return
    print(f"structcal calibration timings ({'CPU' if args.cpu else 'wall-clock'}; "
          f"{'quick' if args.quick else 'full'} sizes; "
          f"{info['cpus']} CPUs, load average {info['load_average']})")
    print(f"{'item':76s} {'n':>9s} {'median':>10s} {'target':>8s}  ok")
    for r in rows:
        med = r["median_seconds"]
        shown = f"{med * 1e3:8.1f} ms" if med < 1 else f"{med:8.2f} s "
        tgt = "" if r["target_seconds"] is None else (
            f"{r['target_seconds'] * 1e3:.0f} ms" if r["target_seconds"] < 1
            else f"{r['target_seconds']:.0f} s")
        ok = "" if r["meets_target"] is None else ("yes" if r["meets_target"] else "NO")
        print(f"{r['name']:76s} {r['n']:9d} {shown:>10s} {tgt:>8s}  {ok}")


def _bincount_ece(y, p, n_bins):
    """The textbook numpy implementation (what the binned estimators are compared with)."""
    b = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    cnt = np.bincount(b, minlength=n_bins)
    sp = np.bincount(b, weights=p, minlength=n_bins)
    sy = np.bincount(b, weights=y, minlength=n_bins)
    nz = cnt > 0
    return float(np.sum(np.abs(sy[nz] - sp[nz])) / len(p))


def _bincount_brier(y, p, n_bins):
    """The textbook numpy Brier decomposition (reliability, resolution, uncertainty)."""
    b = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    cnt = np.bincount(b, minlength=n_bins)
    sp = np.bincount(b, weights=p, minlength=n_bins)
    sy = np.bincount(b, weights=y, minlength=n_bins)
    nz = cnt > 0
    ybar = y.mean()
    rel = np.sum((sp[nz] - sy[nz]) ** 2 / cnt[nz]) / len(p)
    res = np.sum((sy[nz] / cnt[nz] - ybar) ** 2 * cnt[nz]) / len(p)
    return float(np.mean((p - y) ** 2)), rel, res, ybar * (1 - ybar)


if __name__ == "__main__":
    main()
